#include "runner/report/report.h"

#include <fcntl.h>
#include <sys/random.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>

#include "runner/base/bounded_json.h"
#include "runner/base/error.h"
#include "runner/base/units.h"
#include "runner/base/utf8.h"

namespace memrun {
namespace {

std::string breakdown_text(const cgroup::Breakdown& b) {
  return fmt::format("anon {}, file {}, kernel {}, shmem {}, sock {}", format_size(b.anon),
                     format_size(b.file), format_size(b.kernel), format_size(b.shmem),
                     format_size(b.sock));
}

// Whether a record holds a run's figures: a skipped case ran no test (its
// figures, an interpreter's start, are no measurement); an error or an
// interrupted test that never started has none.
bool has_figures(const TestRecord& r) {
  const Verdict& v = r.verdict;
  return !(v.outcome == Outcome::error || (v.outcome == Outcome::skipped && v.passed) ||
           (v.outcome == Outcome::interrupted && r.observed.duration_s == 0));
}

}  // namespace

Said said_of(const TestRecord& r) {
  const Verdict& v = r.verdict;
  Said s;
  bool skipped = v.outcome == Outcome::skipped && v.passed;
  s.verdict = skipped ? "SKIP" : v.passed ? "PASS" : "FAIL";
  std::string o = to_string(v.outcome);
  if (v.disabled) s.outcome = "disabled";
  else if (skipped || (v.passed && v.outcome == Outcome::pass)) s.outcome = o;
  else if (v.passed) s.outcome = o + " (expected)";
  else if (v.outcome == Outcome::error || v.outcome == Outcome::interrupted) s.outcome = o;
  // A failed test whose outcome met its expectation failed for a reason of
  // its own, said beside the outcome: "pass" alone beside FAIL reads as two
  // verdicts.
  else if (!v.figures_hold) s.outcome = o + ": figures do not hold";
  else if (v.reason.rfind("headroom ", 0) == 0) s.outcome = o + ": below min_headroom";
  else if (!r.test.expected.empty() && r.test.expected != o) s.outcome = o + " (expected " + r.test.expected + ")";
  else s.outcome = o;
  if (!v.passed || skipped) s.reason = one_line(v.reason);
  s.headroom = "-";
  if (has_figures(r)) {
    s.headroom = fmt::format("{} ({:.0f}%)", format_signed_size(v.headroom), v.headroom_pct);
    if (v.headroom_basis == HeadroomBasis::working_set) s.headroom += " excl. page cache";
  }
  return s;
}

std::string at_peak_text(const TestRecord& r) {
  const Observation& o = r.observed;
  if (o.samples == 0) return "no sample of its memory: it ended within one sample interval";
  uint64_t peak = r.verdict.peak;
  std::string where = o.sampled_peak >= peak
                          ? fmt::format(" ({}, the kernel's peak)", format_size(o.sampled_peak))
                          : fmt::format(" ({}, {} below the kernel's peak: the rest came between samples)",
                                        format_size(o.sampled_peak), format_size(peak - o.sampled_peak));
  return "memory at the highest sample" + where + ": " + breakdown_text(o.at_peak);
}

bool want_color(std::FILE* out) {
  const char* no = std::getenv("NO_COLOR");
  return ::isatty(::fileno(out)) && !(no && *no);
}

Console::Console(std::FILE* out, bool color, size_t name_width)
    : out_(out), color_(color), width_(name_width) {}

std::string Console::paint(const char* code, const std::string& text) const {
  return color_ ? fmt::format("\033[{}m{}\033[0m", code, text) : text;
}

void Console::setup(const SetupRecord& s) const {
  if (!s.ran || !s.result) {
    fmt::print(out_, "{}  setup of {}: outputs up to date, not run\n", paint("2", "SKIP"), s.spec);
    return;
  }
  const Verdict& v = s.result->verdict;
  fmt::print(out_, "{}  setup of {}: peak {} / {}, {}\n", v.passed ? paint("32", "DONE") : paint("1;31", "FAIL"),
             s.spec, format_size(v.peak), format_size(v.limit), format_duration(s.result->observed.duration_s));
  if (!v.passed) details(*s.result);
}

void Console::test(const TestRecord& r) const {
  const Verdict& v = r.verdict;
  const Observation& o = r.observed;
  Said said = said_of(r);
  std::string verdict = said.verdict == std::string("SKIP")   ? paint("33", "SKIP")
                        : said.verdict == std::string("PASS") ? paint("32", "PASS")
                                                              : paint("1;31", "FAIL");
  std::string memory = has_figures(r) ? fmt::format("peak {} / {}", format_size(v.peak), format_limit(v.limit)) : "-";
  // Swap, where the test had any: its peak against what the spec allows.
  if (memory != "-" && v.swap_peak > 0)
    memory += fmt::format(" + swap {} / {}", format_size(v.swap_peak), format_size(r.test.swap_limit));
  std::string headroom = said.headroom == "-" ? "-" : "headroom " + said.headroom;
  fmt::print(out_, "{}  {:<{}}  {:<25} {:<28} {:<36} {}\n", verdict, cell(r.test.name), width_, said.outcome, memory,
             headroom, format_duration(o.duration_s));
  if (v.headroom_basis == HeadroomBasis::working_set)
    fmt::print(out_, "      {}; working set ~{} (sampled), {} of reclaimable cache at the end\n",
               v.peak + v.limit / 50 >= v.limit ? "the kernel peak is the limit because page cache filled it"
                                                : "page cache made up much of the kernel peak",
               format_size(v.working_set_peak), format_size(v.page_cache));
  if (v.limit < r.test.requested_limit)
    fmt::print(out_, "      effective limit {}: an ancestor cgroup allows less than the {} the spec asks\n",
               format_size(v.limit), format_size(r.test.requested_limit));
  if (r.runs.size() > 1) {
    std::vector<uint64_t> peaks;
    for (const auto& run : r.runs) peaks.push_back(run.peak);
    std::sort(peaks.begin(), peaks.end());
    size_t passed = std::count_if(r.runs.begin(), r.runs.end(), [](const RunFigures& f) { return f.passed; });
    fmt::print(out_, "      {} runs, {} passed: peak {} / {} / {} (min / median / max); the line shows the {}\n",
               r.runs.size(), passed, format_size(peaks.front()), format_size(peaks[peaks.size() / 2]),
               format_size(peaks.back()), v.passed ? "highest" : "first that failed");
  }
  if (!v.passed) details(r);
  if (said.verdict == std::string("SKIP") && !v.disabled) fmt::print(out_, "      {}\n", said.reason);
  if (!o.cleanup_error.empty()) fmt::print(out_, "      cleanup: {}\n", one_line(o.cleanup_error));
  if (o.kernel.breakdown.shmem > 0 && v.outcome != Outcome::error)
    fmt::print(out_, "      left {} in files of a shared tmpfs (/run, a tmpfs /tmp; /dev/shm where memrun could not give "
                     "the test its own) or in shared memory: it outlives the test, "
                     "and no limit covers it\n", format_size(o.kernel.breakdown.shmem));
}

void Console::details(const TestRecord& r) const {
  const Verdict& v = r.verdict;
  fmt::print(out_, "      {}\n", said_of(r).reason);
  if (v.outcome == Outcome::oom) {
    // Without a sample (a test killed within one interval) the only figures
    // of the group are read after the kill, when the victim's memory is
    // gone: the kernel's own, of the victims, say what it held.
    if (r.observed.samples > 0)
      fmt::print(out_, "      {}\n", at_peak_text(r));
    else
      fmt::print(out_, "      no sample: it was killed within one sample interval ({}); the kernel's figures{}\n",
                 format_duration(r.observed.duration_s),
                 r.observed.oom_victims.empty() ? ": peak " + format_size(v.peak) + " (the kernel log was not readable)"
                                                : " at the kill:");
    for (const auto& k : r.observed.oom_victims)
      fmt::print(out_, "      the kernel killed {} (pid {}): anon-rss {}, file-rss {}, shmem-rss {}\n", one_line(k.name), k.pid,
                 format_size(k.anon_rss), format_size(k.file_rss), format_size(k.shmem_rss));
  }
  if (v.outcome == Outcome::error || v.outcome == Outcome::interrupted || !log_tails_) return;
  for (const auto& path : {r.test.stderr_path, r.test.stdout_path}) {
    // A test's bytes must not drive the terminal (or a CI log viewer).
    std::string tail = printable(log_tail(path, 10));
    if (tail.empty()) continue;
    fmt::print(out_, "      --- last lines of {}\n", path);
    size_t start = 0;
    while (start < tail.size()) {
      size_t end = tail.find('\n', start);
      if (end == std::string::npos) end = tail.size();
      fmt::print(out_, "      | {}\n", tail.substr(start, end - start));
      start = end + 1;
    }
  }
}

void Console::explanation(const TestRecord& r) const {
  if (!r.explanation) return;
  fmt::print(out_, "{}  {}\n", paint("1;33", "WHY "), one_line(r.test.name));
  for (const auto& line : explanation_lines(*r.explanation, 5)) fmt::print(out_, "      {}\n", one_line(line));
}

void Console::summary(const Tally& tally, size_t planned, const std::string& interrupted_by) const {
  size_t not_run = planned - tally.total;
  std::string line = fmt::format("{} passed, {} failed", tally.passed, tally.failed());
  if (tally.skipped > tally.disabled) line += fmt::format(", {} skipped", tally.skipped - tally.disabled);
  if (tally.disabled) line += fmt::format(", {} disabled", tally.disabled);
  if (not_run) line += fmt::format(", {} not run (--fail-fast)", not_run);
  fmt::print(out_, "\n{}\n", tally.failed() ? paint("1;31", line) : paint("32", line));
  if (!interrupted_by.empty()) fmt::print(out_, "memrun was interrupted by {}\n", interrupted_by);
}

namespace {

bool write_all(int fd, const std::string& text, uint64_t offset) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::pwrite(fd, text.data() + done, text.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// The spool is a file without a name, and a sealed test sees no process
// that holds it (its pid namespace); still, a test memrun does not seal (or
// a process of the user's own) could rewrite it through /proc/PID/fd. Each
// entry's digest, keyed by a secret of the run's and kept in memory, tells
// memrun whether what it reads back is what it wrote.
uint64_t digest_of(uint64_t key, const std::string& text) {
  return std::hash<std::string>{}(std::to_string(key) + text);
}

}  // namespace

Report::Report(const std::string& dir) {
  if (::getrandom(&key_, sizeof key_, 0) != sizeof key_) key_ = static_cast<uint64_t>(::getpid()) << 32 ^ static_cast<uint64_t>(::time(nullptr));
  // O_TMPFILE (3.11+): a file without a name, gone with memrun however it
  // ends. Where the filesystem lacks it, a named file unlinked at once.
  spool_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (spool_ < 0) {
    std::string path = dir + "/.report-spool." + std::to_string(::getpid());
    spool_ = ::open(path.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (spool_ >= 0) ::unlink(path.c_str());
  }
  // Without it (a full or read-only run folder) entries are held in memory.
}

Report::~Report() {
  if (spool_ >= 0) ::close(spool_);
}

void Report::add_setup(const SetupRecord& s) { setups_.push_back(entry_text(s)); }

void Report::add_test(size_t index, const TestRecord& r) {
  if (tests_.size() <= index) tests_.resize(index + 1);
  added_.push_back(index);
  replace_test(index, r);
}

void Report::replace_test(size_t index, const TestRecord& r) {
  std::string text = entry_text(r);
  Spooled& t = tests_.at(index);
  t.outcome = r.verdict.outcome, t.passed = r.verdict.passed, t.disabled = r.verdict.disabled;
  t.name = r.test.name, t.spec = r.test.spec, t.line = r.test.line, t.requested_limit = r.test.requested_limit;
  t.length = static_cast<uint32_t>(text.size());
  if (spool_ >= 0 && write_all(spool_, text, spooled_)) {
    t.offset = spooled_, t.held = false, t.digest = digest_of(key_, text);
    spooled_ += text.size();
  } else {
    // The run folder is full (the tests' logs filled it): the entries wait
    // in memory instead, and the report is still written where it can be.
    t.offset = 0, t.held = true;
    held_[index] = std::move(text);
  }
}

// A test memrun does not seal can rewrite the spool through memrun's
// descriptors (/proc/PID/fd): what it changed no longer matches its digest.
// Each entry stands or falls alone: the records it did not reach are
// reported as written, each one it did as a stand-in, outcome `error`,
// that says so (its figures are lost: the run fails).
std::string Report::entry(size_t index) const {
  const Spooled& t = tests_.at(index);
  if (t.held) return held_.at(index);
  std::string buffer(t.length, '\0');
  if (::pread(spool_, buffer.data(), t.length, static_cast<off_t>(t.offset)) != static_cast<ssize_t>(t.length))
    throw_errno(Category::system, "cannot read back the report's spool");
  if (digest_of(key_, buffer) == t.digest) return buffer;
  if (lost_.insert(index).second)
    std::fprintf(stderr, "memrun: the record of test '%s' was changed in the report's spool while memrun ran (a test "
                         "memrun did not seal can rewrite it through memrun's descriptors): it is reported as an error; "
                         "run tests sealed (as root, without --host-cgroups) so that none can\n",
                 one_line(t.name).c_str());
  TestRecord stand_in;
  stand_in.test.name = t.name, stand_in.test.spec = t.spec, stand_in.test.line = t.line;
  stand_in.test.requested_limit = t.requested_limit;
  stand_in.verdict.outcome = Outcome::error;
  stand_in.verdict.figures_hold = false;
  stand_in.verdict.reason = "memrun's record of this test was changed while memrun ran (by a test memrun did not "
                            "seal, through memrun's descriptors): its figures are lost";
  stand_in.observed.ending = Ending::exited;
  stand_in.runs = {{0, 0, Outcome::error, false, 0, false}};
  return entry_text(stand_in);
}

Tally Report::verified() const {
  Tally tally;
  for (size_t i : added_) {
    entry(i);
    Verdict v;  // an error, unless the entry stands
    if (!lost_.count(i)) v.outcome = tests_[i].outcome, v.passed = tests_[i].passed, v.disabled = tests_[i].disabled;
    tally.add(v);
  }
  return tally;
}

void Report::render(const RunInfo& info, const Sink& sink) const {
  std::vector<size_t> order = added_;
  std::sort(order.begin(), order.end());
  Tally tally = verified();
  render_report(info, tally, setups_, order.size(), [&](size_t i) { return entry(order[i]); }, sink);
}

void Report::write(const std::string& path, const RunInfo& info) const {
  write_atomically(path, [&](const Sink& sink) { render(info, sink); });
}

EachRecord Report::records() const {
  return [this](const std::function<void(const TestRecord&)>& use) {
    std::vector<size_t> order = added_;
    std::sort(order.begin(), order.end());
    for (size_t i : order)
      use(record_from_json(parse_json(entry(i), "the report's spool"), "the report's spool"));
  };
}

bool all_passed(const Tally& tally, size_t planned) {
  return tally.total >= planned && !tally.failed();
}

}  // namespace memrun
