#include "runner/report/live_view.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "runner/base/units.h"
#include "runner/base/utf8.h"

namespace memrun {

std::string bar(double fraction, size_t width) {
  fraction = std::clamp(fraction, 0.0, 1.0);
  auto full = static_cast<size_t>(std::lround(fraction * static_cast<double>(width)));
  return std::string(full, '#') + std::string(width - full, '.');
}

LiveView::LiveView(std::FILE* out, size_t total, int jobs, std::optional<uint64_t> budget,
                   std::map<std::string, double> timings)
    : out_(out), total_(total), jobs_(std::max(1, jobs)), budget_(budget), timings_(std::move(timings)) {}

void LiveView::finished(const TestRecord& r) {
  ++done_;
  done_seconds_ += r.observed.duration_s;
}

std::vector<std::string> LiveView::render(const std::vector<Progress>& running, size_t width) const {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // ETA: what is left of each test's expected duration (its timing from a
  // previous report, else the mean of those finished), spread over the
  // jobs that can run at once.
  std::optional<double> mean;
  if (done_) mean = done_seconds_ / static_cast<double>(done_);
  else if (!timings_.empty()) {
    double sum = 0;
    for (const auto& [name, s] : timings_) sum += s;
    mean = sum / static_cast<double>(timings_.size());
  }
  std::string eta = "-";
  if (mean) {
    double left = 0;
    for (const auto& p : running) {
      auto it = timings_.find(p.planned->test->name);
      left += std::max(0.0, (it == timings_.end() ? *mean : it->second) - p.elapsed_s);
    }
    size_t queued = total_ - std::min(total_, done_ + running.size());
    left += static_cast<double>(queued) * *mean;
    size_t parallel = std::max<size_t>(1, std::min<size_t>(jobs_, running.size() + queued));
    eta = format_duration(left / static_cast<double>(parallel));
  }
  uint64_t promised = 0;
  for (const auto& p : running) promised += p.planned->test->memory;
  std::string status = fmt::format("{}/{} done  {} running  {} elapsed  ETA {}  limits {}", done_, total_,
                                   running.size(), format_duration(elapsed), eta, format_size(promised));
  if (budget_) status += " of " + format_size(*budget_);
  std::vector<std::string> lines{status};

  size_t name_width = 4;
  for (const auto& p : running) name_width = std::max(name_width, escape_controls(p.planned->test->name).size());
  // "  NAME  [bar]  CURRENT / LIMIT  ELAPSED": the name gives way first.
  constexpr size_t kBar = 20, kFigures = 2 + 2 + kBar + 2 + 23 + 2 + 8;
  name_width = std::min(name_width, width > kFigures + 8 ? width - kFigures : 8);
  for (const auto& p : running) {
    const TestSpec& t = *p.planned->test;
    std::string name = escape_controls(t.name);
    if (name.size() > name_width) name = name.substr(0, name_width - 1) + "~";
    double fraction = t.memory ? static_cast<double>(p.current) / static_cast<double>(t.memory) : 0;
    std::string line = fmt::format("  {:<{}}  [{}]  {:>10} / {:<10}  {}", name, name_width, bar(fraction, kBar),
                                   format_size(p.current), format_size(t.memory), format_duration(p.elapsed_s));
    lines.push_back(line.substr(0, width));
  }
  lines[0] = lines[0].substr(0, width);
  return lines;
}

void LiveView::update(const std::vector<Progress>& running) {
  winsize ws{};
  size_t width = ::ioctl(::fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
  // Lines one column short of the width never wrap, so that the count of
  // lines to erase stays exact.
  auto lines = render(running, width - 1);
  clear();
  for (const auto& line : lines) fmt::print(out_, "{}\n", line);
  drawn_ = lines.size();
  std::fflush(out_);
}

void LiveView::clear() {
  if (drawn_ == 0) return;
  // Up to the view's first line (CUU), to its first column, and erase to
  // the end of the screen (ED): ECMA-48, understood by every terminal.
  fmt::print(out_, "\033[{}A\r\033[J", drawn_);
  drawn_ = 0;
  std::fflush(out_);
}

}  // namespace memrun
