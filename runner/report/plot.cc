#include "runner/report/plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "runner/base/units.h"
#include "runner/base/utf8.h"
#include "runner/report/report.h"

namespace memrun {
namespace {

// XML/HTML text escaping.
std::string esc(const std::string& s) {
  std::string out;
  for (char c : escape_controls(s, true)) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

// Where the memory went (verdict/explanation.h): a table of the sites, each with its
// stack folded in a <details> (innermost frame first).
std::string explanation_html(const Explanation& e) {
  std::string out = fmt::format("<h3>where the memory went ({})</h3>\n", esc(e.why));
  if (e.status != "explained") return out + "<p>" + esc(e.message) + "</p>\n";
  std::string ending = profiled_ending_text(e);
  out += fmt::format("<p>A second run under {} (the verdict is the first run's): {}{}</p>\n", esc(e.profiler),
                     esc(e.summary), ending.empty() ? "" : "; " + esc(ending));
  out += "<table class=\"explain\"><tr><th>bytes</th><th>of peak</th><th>site</th><th>stack</th></tr>\n";
  for (const auto& s : e.sites) {
    std::string stack;
    for (const auto& f : s.stack) stack += esc(frame_text(f)) + "\n";
    out += fmt::format("<tr><td>{}</td><td>{:.0f}%</td><td><code>{}</code></td><td><details><summary>{} frames"
                       "</summary><pre>{}</pre></details></td></tr>\n",
                       format_size(s.bytes), 100 * s.share, esc(site_text(s)),
                       s.stack.size(), stack);
  }
  out += "</table>\n<p>" + esc(unseen_text(e)) + "</p>\n";
  return out;
}

// A "nice" tick step: 1, 2 or 5 times a power of ten, about `span / 5`.
double tick_step(double span) {
  double raw = span / 5, power = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * power) return m * power;
  return 10 * power;
}

}  // namespace

namespace {

// The frame of one test's plot: its scales, and the parts drawn in order.
class Plot {
 public:
  // Drawn at the width of a page (the SVG scales to its container: a third
  // of a wide page was all a fixed 640 px took).
  static constexpr double W = 1200, H = 300, left = 64, right = 16, top = 28, bottom = 44;

  explicit Plot(const TestRecord& t) : t_(t), tl_(t.observed.timeline) {
    const double mib = static_cast<double>(MiB);  // plots in MiB, with fractions
    for (auto v : tl_.anon) anon_.push_back(v / mib);
    for (auto v : tl_.file) file_.push_back(v / mib);
    limit_ = t.verdict.limit / mib;
    peak_ = t.verdict.peak / mib;
    duration_ = std::max(t.observed.duration_s, tl_.t_s.empty() ? 0.0 : tl_.t_s.back());
    t_max_ = std::max(duration_, 0.001);
    y_max_ = std::max({limit_, peak_, 1.0}) * 1.08;
  }
  double x(double s) const { return left + (W - left - right) * s / t_max_; }
  double y(double mib) const { return H - bottom - (H - top - bottom) * mib / y_max_; }

  /// Grid and axes, labelled in MiB and seconds.
  std::string axes() const {
    std::string svg;
    for (double v = 0, step = tick_step(y_max_); v <= y_max_; v += step)
      svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#e4e4e4\"/>"
                         "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:g}</text>\n",
                         left, W - right, y(v), left - 6, y(v) + 4, v);
    for (double s = 0, step = tick_step(t_max_); s <= t_max_ + 1e-9; s += step)
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:g}</text>\n", x(s), H - bottom + 16, s);
    svg += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#333\"/>"
                       "<line x1=\"{0}\" x2=\"{3}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#333\"/>\n",
                       left, top, H - bottom, W - right);
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">seconds</text>\n", (left + W - right) / 2,
                       H - 6);
    svg += fmt::format("<text x=\"14\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {})\">MiB</text>\n",
                       (top + H - bottom) / 2, (top + H - bottom) / 2);
    return svg;
  }

  /// Stacked areas: anon at the bottom, file (page cache) on top of it.
  std::string areas() const {
    const std::vector<double>& ts = tl_.t_s;
    if (ts.empty()) return "";
    auto area = [&](bool upper, const char* colour, const char* label) {
      std::string pts = fmt::format("{:.1f},{:.1f} ", x(ts.front()), y(upper ? anon_.front() : 0));
      for (size_t i = 0; i < ts.size(); ++i)
        pts += fmt::format("{:.1f},{:.1f} ", x(ts[i]), y(upper ? anon_[i] + file_[i] : anon_[i]));
      for (size_t i = ts.size(); i-- > 0;) pts += fmt::format("{:.1f},{:.1f} ", x(ts[i]), y(upper ? anon_[i] : 0));
      return fmt::format("<polygon points=\"{}\" fill=\"{}\" fill-opacity=\"0.75\"><title>{}</title></polygon>\n",
                         pts, colour, label);
    };
    return area(false, "#4e79a7", "anon") + area(true, "#a0cbe8", "file (page cache)");
  }

  /// The limit and memory.high as lines, the kernel's peak, an OOM kill.
  /// Marks (class "mark") are drawn where their figures are; labels (class
  /// "label") where no mark is: the limit's at the end of its line farther
  /// from the peak and the kill, which sit on it in an OOM.
  std::string marks() const {
    double peak_t = tl_.t_s.empty() ? duration_ : tl_.peak_t_s;  // the kernel's exact peak, even between samples
    double nearest_left = x(peak_t) - left, nearest_right = W - right - x(peak_t);
    if (t_.verdict.outcome == Outcome::oom) {
      nearest_left = std::min(nearest_left, x(duration_) - left);
      nearest_right = std::min(nearest_right, W - right - x(duration_));
    }
    bool label_left = nearest_left > nearest_right;
    auto line_label = [&](double at, const char* colour, const std::string& text) {
      return fmt::format("<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\" fill=\"{}\">{}</text>\n",
                         label_left ? left + 6 : W - right, y(at) - 5, label_left ? "start" : "end", colour, text);
    };
    std::string svg = fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#d62728\" "
                                  "stroke-width=\"1.5\" stroke-dasharray=\"6 3\"/>\n",
                                  left, W - right, y(limit_));
    svg += line_label(limit_, "#d62728", "limit " + format_size(t_.verdict.limit));
    if (t_.test.memory_high) {
      double high = *t_.test.memory_high / static_cast<double>(MiB);
      svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#ff7f0e\" "
                         "stroke-dasharray=\"3 3\"/>\n",
                         left, W - right, y(high));
      svg += line_label(high, "#ff7f0e", "memory.high");
    }
    bool near_right = x(peak_t) > W - 240;  // its label on the side with room
    svg += fmt::format("<circle class=\"mark\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#222\"><title>kernel peak {}"
                       "</title></circle><text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\">kernel peak {}"
                       "</text>\n",
                       x(peak_t), y(peak_), format_size(t_.verdict.peak), x(peak_t) + (near_right ? -14 : 14),
                       y(peak_) + 20, near_right ? "end" : "start", format_size(t_.verdict.peak));
    if (t_.verdict.outcome == Outcome::oom)
      svg += fmt::format("<text class=\"mark\" x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#d62728\" font-size=\"16\" "
                         "text-anchor=\"middle\">✕</text><text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\" "
                         "fill=\"#d62728\" text-anchor=\"end\">OOM kill</text>\n",
                         x(duration_), y(limit_) + 6, x(duration_) - 14, y(limit_) + 38);
    return svg;
  }

  /// What the colours mean, at the foot (the title takes the head's width).
  std::string legend() const {
    return fmt::format("<rect x=\"{0}\" y=\"{1}\" width=\"10\" height=\"10\" fill=\"#4e79a7\"/><text class=\"label\" "
                       "x=\"{2}\" y=\"{3}\">anon</text><rect x=\"{4}\" y=\"{1}\" width=\"10\" height=\"10\" "
                       "fill=\"#a0cbe8\"/><text class=\"label\" x=\"{5}\" y=\"{3}\">file (page cache)</text>\n",
                       W - 230, H - 15, W - 216, H - 6, W - 170, W - 156);
  }

 private:
  const TestRecord& t_;
  const Timeline& tl_;
  std::vector<double> anon_, file_;
  double limit_, peak_, duration_, t_max_, y_max_;
};

}  // namespace

std::string svg_plot(const TestRecord& t) {
  Plot p(t);
  Said said = said_of(t);
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" style=\"width:100%;height:auto\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      Plot::W, Plot::H);
  // The verdict as every output says it (said_of): "— FAIL, pass: below
  // min_headroom", never a bare outcome beside a failure.
  svg += fmt::format("<text class=\"label title\" x=\"{}\" y=\"16\" font-size=\"13\" font-weight=\"bold\">{} — {}, {}"
                     "</text>\n",
                     Plot::left, esc(cell(t.test.name)), said.verdict, esc(said.outcome));
  return svg + p.axes() + p.areas() + p.marks() + p.legend() + "</svg>\n";
}

void html_report(const RunInfo& info, const EachRecord& records, const Sink& sink) {
  // Written as it is made, one test at a time, over three passes of the
  // records (the head counts them, the table lists them, the sections plot
  // them): memrun's memory does not grow with the page.
  Tally tally;
  records([&](const TestRecord& t) { tally.add(t.verdict); });
  sink(fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>memrun report {}</title>\n"
      "<style>body{{font-family:sans-serif;margin:2em;color:#222}}table{{border-collapse:collapse}}"
      "td,th{{padding:4px 10px;border-bottom:1px solid #ddd;text-align:left}}td.num{{text-align:right}}"
      ".fail{{color:#c00;font-weight:bold}}.pass{{color:#080}}section{{margin:2em 0}}"
      "pre{{background:#f6f6f6;padding:8px;overflow:auto}}</style></head><body>\n"
      "<h1>memrun report</h1>\n<p>{} passed, {} failed &middot; backend {} ({} cgroups), kernel {} &middot; {}</p>\n",
      esc(info.run_id), tally.passed, tally.failed(), esc(info.backend), esc(info.cgroup_mode), esc(info.kernel),
      iso(info.started)));
  sink("<table id=\"verdicts\"><tr><th>verdict</th><th>test</th><th>outcome</th><th>peak</th><th>limit</th>"
       "<th>headroom</th><th>duration</th><th>reason</th></tr>\n");
  records([&](const TestRecord& t) {
    const Verdict& v = t.verdict;
    std::string name = esc(t.test.name);
    Said said = said_of(t);
    bool figures = said.headroom != "-";
    sink(fmt::format("<tr><td class=\"{}\">{}</td><td><a href=\"#t-{}\">{}</a></td><td>{}</td><td class=\"num\">{}"
                     "</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>\n",
                     v.passed ? "pass" : "fail", said.verdict, name, name, esc(said.outcome),
                     figures ? format_size(v.peak) : "-", figures ? format_size(v.limit) : "-", esc(said.headroom),
                     format_duration(t.observed.duration_s), esc(said.reason)));
  });
  sink("</table>\n");
  records([&](const TestRecord& t) {
    const Verdict& v = t.verdict;
    std::string name = esc(t.test.name);
    std::string section = fmt::format("<section class=\"test\" id=\"t-{}\"><h2>{}</h2>\n", name, name) + svg_plot(t);
    if (!v.passed) {
      section += fmt::format("<p class=\"fail\">{}</p>\n", esc(said_of(t).reason));
      section += "<p>" + esc(at_peak_text(t)) + "</p>\n";
      for (const auto& k : t.observed.oom_victims)
        section += fmt::format("<p>the kernel killed <b>{}</b> (pid {}): anon-rss {}, file-rss {}, shmem-rss {}</p>\n",
                               esc(printable(k.name)), k.pid, format_size(k.anon_rss), format_size(k.file_rss),
                               format_size(k.shmem_rss));
      if (!t.observed.log_tail.empty()) section += "<pre>" + esc(t.observed.log_tail) + "</pre>\n";
    }
    if (t.explanation) section += explanation_html(*t.explanation);
    sink(section + "</section>\n");
  });
  sink("</body></html>\n");
}

}  // namespace memrun
