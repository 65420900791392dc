#include "runner/report.h"

#include <fcntl.h>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <nlohmann/json.hpp>

#include "cgroup/error.h"
#include "cgroup/fs.h"
#include "runner/units.h"
#include "runner/utf8.h"

#ifndef MEMRUN_VERSION
#define MEMRUN_VERSION "0.0.0"
#endif

namespace memrun {
namespace {

std::string iso(std::chrono::system_clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", fmt::gmtime(std::chrono::system_clock::to_time_t(t)), ms);
}

nlohmann::ordered_json breakdown_json(const cgroup::Breakdown& b) {
  return {{"anon", b.anon}, {"file", b.file}, {"kernel", b.kernel}, {"shmem", b.shmem}, {"sock", b.sock}};
}

std::string breakdown_text(const cgroup::Breakdown& b) {
  return fmt::format("anon {}, file {}, kernel {}, shmem {}, sock {}", format_size(b.anon),
                     format_size(b.file), format_size(b.kernel), format_size(b.shmem),
                     format_size(b.sock));
}

// `text` as valid UTF-8 without control characters (but newlines and
// tabs): a test's output may hold any bytes, and JSON and XML 1.0 take
// neither invalid UTF-8 nor most control characters. Others become '?'.
std::string printable(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    size_t len = utf8_length(text, i);
    if (len == 0 || (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      out += '?';
      i += 1;
    } else {
      out.append(text, i, len);
      i += len;
    }
  }
  return out;
}

// `text` on one console line: printable, with line breaks and tabs shown
// as \n and \t. A reason can quote a test's data (a program name, a kernel
// log's process name); a line break in it must not start a console line of
// its own, where a CI runner would read it as a command ("::warning ...").
std::string one_line(const std::string& text) {
  std::string out;
  for (char c : printable(text)) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else out += c;
  }
  return out;
}

// The last lines of a test's stderr, then of its stdout.
std::string both_tails(const PlannedTest& p) {
  std::string out;
  for (const auto& path : {p.stderr_path, p.stdout_path}) {
    std::string tail = log_tail(path, 10);
    if (!tail.empty()) out += (out.empty() ? "" : "\n") + tail;
  }
  return printable(out);
}

// memrun's own high-water mark, which the footprint benchmark reads: it
// must stay flat. VmHWM, not getrusage's ru_maxrss: the latter keeps the
// peak of the image memrun was exec'd from (a Python parent's, say).
uint64_t own_max_rss() {
  std::istringstream in(fs::read_file("/proc/self/status").value_or(""));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  return 0;
}

nlohmann::ordered_json victims_json(const std::vector<OomKill>& kills) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& k : kills)
    out.push_back({{"pid", k.pid}, {"name", printable(k.name)}, {"anon_rss_bytes", k.anon_rss},
                   {"file_rss_bytes", k.file_rss}, {"shmem_rss_bytes", k.shmem_rss}});
  return out;
}

// The samples, plus the kernel's exact peak as a point of its own (at the
// highest sample's time), so that a spike between two samples still shows.
nlohmann::ordered_json timeline_json(const Result& r) {
  const Timeline& tl = r.timeline;
  return {{"interval_s", tl.interval_s * tl.stride},
          {"t_s", tl.t_s},
          {"current", tl.current},
          {"anon", tl.anon},
          {"file", tl.file},
          {"kernel_peak", {{"t_s", tl.t_s.empty() ? r.duration_s : tl.peak_t_s}, {"bytes", r.peak}}}};
}

nlohmann::ordered_json test_json(const Result& r) {
  const PlannedTest& p = *r.planned;
  const TestSpec& t = *p.test;
  auto null_if = [](bool cond, auto v) { return cond ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(v); };
  auto when = [](std::chrono::system_clock::time_point t) {
    return t == std::chrono::system_clock::time_point{} ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(iso(t));
  };
  return {
      {"name", t.name},
      {"spec", p.spec->path},
      {"line", t.line},
      {"command", t.command},
      {"env", t.env},
      {"tags", t.tags},
      {"outcome", to_string(r.outcome)},
      {"expected", t.expect.describe()},
      {"passed", r.passed},
      {"reason", r.reason},
      {"requested_limit_bytes", t.memory},
      {"limit_bytes", r.limit},
      {"peak_bytes", r.peak},
      {"peak_source", r.peak_sampled ? "sampled" : "kernel"},
      {"working_set_peak_bytes", r.working_set_peak},
      {"page_cache_bytes", r.page_cache},
      {"headroom_bytes", r.headroom},
      {"headroom_pct", std::round(r.headroom_pct * 100) / 100},
      {"headroom_basis", r.headroom_basis},
      {"limit_reached", r.kernel.limit_reached},
      {"limit_at_end_bytes", null_if(r.kernel.limit_at_end == UINT64_MAX, r.kernel.limit_at_end)},
      {"escaped_processes", r.kernel.escaped},
      {"cleanup_error", null_if(r.cleanup_error.empty(), r.cleanup_error)},
      // Read after every process of the group was killed: what is still
      // charged as shmem lives in a tmpfs file or a shared memory segment.
      {"tmpfs_left_bytes", r.kernel.breakdown.shmem},
      {"oom_kills", r.kernel.oom_kills},
      {"oom_group_kills", r.kernel.oom_group_kills},
      {"exit_code", null_if(r.exit_code < 0, r.exit_code)},
      {"signal", null_if(r.signal == 0, r.signal)},
      {"duration_s", r.duration_s},
      {"cpu_user_s", r.cpu_user_s},
      {"cpu_system_s", r.cpu_system_s},
      {"samples", r.samples},
      {"placement", r.placement},
      {"memory_high_bytes", t.memory_high ? nlohmann::ordered_json(*t.memory_high) : nlohmann::ordered_json(nullptr)},
      {"breakdown", breakdown_json(r.kernel.breakdown)},
      {"breakdown_at_peak", breakdown_json(r.at_peak)},
      {"timeline", timeline_json(r)},
      {"oom_victims", victims_json(r.oom_victims)},
      {"memory_stat", r.kernel.stat},
      {"events", r.kernel.events},
      {"pressure_us", r.kernel.pressure_us},
      // A stream the test never wrote to has no file.
      {"stdout", null_if(r.stdout_bytes == 0, p.stdout_path)},
      {"stderr", null_if(r.stderr_bytes == 0, p.stderr_path)},
      {"stdout_bytes", r.stdout_bytes},
      {"stderr_bytes", r.stderr_bytes},
      {"log_discarded_bytes", r.log_discarded_bytes},
      {"started", when(r.started)},
      {"ended", when(r.ended)},
      // Self-contained for CI outputs made elsewhere (memrun merge): the
      // end of the logs of a test that did not pass.
      {"log_tail", r.passed ? "" : both_tails(p)},
  };
}

}  // namespace

bool want_color(std::FILE* out) {
  const char* no = std::getenv("NO_COLOR");
  return ::isatty(::fileno(out)) && !(no && *no);
}

Console::Console(std::FILE* out, bool color, size_t name_width)
    : out_(out), color_(color), width_(name_width) {}

std::string Console::paint(const char* code, const std::string& text) const {
  return color_ ? fmt::format("\033[{}m{}\033[0m", code, text) : text;
}

void Console::setup(const SetupResult& s) const {
  const std::string& spec = s.planned->spec->path;
  if (!s.ran) {
    fmt::print(out_, "{}  setup of {}: outputs up to date, not run\n", paint("2", "SKIP"), spec);
    return;
  }
  fmt::print(out_, "{}  setup of {}: peak {} / {}, {}\n", s.result.passed ? paint("32", "DONE") : paint("1;31", "FAIL"),
             spec, format_size(s.result.peak), format_size(s.result.limit), format_duration(s.result.duration_s));
  if (!s.result.passed) details(s.result);
}

void Console::test(const Result& r) const {
  const TestSpec& t = *r.planned->test;
  std::string verdict = r.passed ? paint("32", "PASS") : paint("1;31", "FAIL");
  std::string outcome = to_string(r.outcome);
  if (r.passed && r.outcome != Outcome::pass) outcome += " (expected)";
  std::string memory = r.outcome == Outcome::error || (r.outcome == Outcome::interrupted && r.duration_s == 0)
                           ? "-"
                           : fmt::format("peak {} / {}", format_size(r.peak), format_size(r.limit));
  std::string headroom = "-";
  if (memory != "-") {
    headroom = fmt::format("headroom {} ({:.0f}%)", format_signed_size(r.headroom), r.headroom_pct);
    if (r.headroom_basis == "working_set") headroom += " excl. page cache";
  }
  fmt::print(out_, "{}  {:<{}}  {:<16} {:<28} {:<36} {}\n", verdict, t.name, width_, outcome, memory,
             headroom, format_duration(r.duration_s));
  if (r.headroom_basis == "working_set")
    fmt::print(out_, "      the kernel peak is the limit because page cache filled it; working set ~{} (sampled), {} of reclaimable cache at the end\n",
               format_size(r.working_set_peak), format_size(r.page_cache));
  if (r.limit < t.memory)
    fmt::print(out_, "      effective limit {}: an ancestor cgroup allows less than the {} the spec asks\n",
               format_size(r.limit), format_size(t.memory));
  if (!r.passed) details(r);
  if (!r.cleanup_error.empty()) fmt::print(out_, "      cleanup: {}\n", one_line(r.cleanup_error));
  if (r.kernel.breakdown.shmem > 0 && r.outcome != Outcome::error)
    fmt::print(out_, "      left {} in tmpfs files (/dev/shm, a tmpfs /tmp) or shared memory: it outlives the test, "
                     "and no limit covers it\n", format_size(r.kernel.breakdown.shmem));
}

void Console::details(const Result& r) const {
  fmt::print(out_, "      {}\n", one_line(r.reason));
  if (r.outcome == Outcome::oom) {
    fmt::print(out_, "      memory at the highest sample: {}\n", breakdown_text(r.at_peak));
    for (const auto& k : r.oom_victims)
      fmt::print(out_, "      the kernel killed {} (pid {}): anon-rss {}, file-rss {}, shmem-rss {}\n", one_line(k.name), k.pid,
                 format_size(k.anon_rss), format_size(k.file_rss), format_size(k.shmem_rss));
  }
  if (r.outcome != Outcome::error && r.outcome != Outcome::interrupted) {
    for (const auto& path : {r.planned->stderr_path, r.planned->stdout_path}) {
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
}

void Console::summary(const std::vector<Result>& results, size_t planned, int interrupted_by) const {
  size_t passed = 0, failed = 0;
  for (const auto& r : results) (r.passed ? passed : failed)++;
  size_t not_run = planned - results.size();
  std::string line = fmt::format("{} passed, {} failed", passed, failed);
  if (not_run) line += fmt::format(", {} not run (--fail-fast)", not_run);
  fmt::print(out_, "\n{}\n", failed ? paint("1;31", line) : paint("32", line));
  if (interrupted_by) fmt::print(out_, "memrun was interrupted by {}\n", strsignal(interrupted_by));
}

namespace {

// One element of a report array, as nlohmann's dump(2) would print it at
// the depth of the report's "tests" and "setups": four spaces in.
std::string element(const nlohmann::ordered_json& j) {
  std::string text = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out = "    ";
  out.reserve(text.size() + text.size() / 8);
  for (char c : text) {
    out += c;
    if (c == '\n') out += "    ";
  }
  return out;
}

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

}  // namespace

Report::Report(const std::string& dir) {
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

void Report::add_setup(const SetupResult& s) {
  nlohmann::ordered_json j = {{"spec", s.planned->spec->path}, {"ran", s.ran}};
  if (s.ran) j["result"] = test_json(s.result);
  setups_.push_back(element(j));
}

void Report::add_test(size_t index, const Result& r) {
  std::string text = element(test_json(r));
  if (tests_.size() <= index) tests_.resize(index + 1);
  if (spool_ >= 0 && write_all(spool_, text, spooled_)) {
    tests_[index] = {spooled_, static_cast<uint32_t>(text.size())};
    spooled_ += text.size();
  } else {
    // The run folder is full (the tests' logs filled it): the entries wait
    // in memory instead, and the report is still written where it can be.
    tests_[index] = {0, static_cast<uint32_t>(text.size()), true};
    held_[index] = std::move(text);
  }
  ++total_;
  passed_ += r.passed;
}

void Report::render(const RunInfo& info, const Sink& sink) const {
  nlohmann::ordered_json head = {
      {"schema", "memrun-report/1"},
      {"memrun_version", MEMRUN_VERSION},
      {"run_id", info.run_id},
      {"run_dir", info.run_dir},
      {"cwd", std::filesystem::current_path().string()},
      {"memrun_max_rss_bytes", own_max_rss()},
      {"started", iso(info.started)},
      {"ended", iso(info.ended)},
      {"interrupted_by", info.interrupted_by ? nlohmann::ordered_json(strsignal(info.interrupted_by)) : nlohmann::ordered_json(nullptr)},
      {"host", {{"kernel", info.kernel}, {"backend", info.backend}, {"cgroup_mode", info.cgroup_mode}, {"cgroup_path", info.cgroup_path}}},
      {"shard", info.shard_count ? nlohmann::ordered_json({{"index", info.shard_index}, {"count", info.shard_count}})
                                 : nlohmann::ordered_json(nullptr)},
      {"jobs", info.jobs},
      {"memory_budget_bytes", info.budget ? nlohmann::ordered_json(*info.budget) : nlohmann::ordered_json(nullptr)},
      {"summary", {{"total", total_}, {"passed", passed_}, {"failed", total_ - passed_}}},
      {"cleanup_error", info.cleanup_error.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(info.cleanup_error)},
  };
  {
    std::string text = head.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    text.resize(text.size() - 2);  // the closing "\n}": setups and tests follow
    sink(text + ",\n  \"setups\": ");
    sink(setups_.empty() ? "[]" : "[\n");
    for (size_t i = 0; i < setups_.size(); ++i) sink(setups_[i] + (i + 1 < setups_.size() ? ",\n" : "\n  ]"));
    // One test at a time from the spool, in the plan's order.
    sink(",\n  \"tests\": ");
    sink(total_ == 0 ? "[]" : "[\n");
    size_t written = 0;
    std::string buffer;
    for (size_t i = 0; i < tests_.size(); ++i) {
      const Spooled& t = tests_[i];
      if (t.length == 0) continue;
      if (t.held) {
        buffer = held_.at(i);
      } else {
        buffer.resize(t.length);
        if (::pread(spool_, buffer.data(), t.length, static_cast<off_t>(t.offset)) != static_cast<ssize_t>(t.length))
          throw_errno(kExitUsage, "cannot read back the report's spool");
      }
      sink(buffer + (++written < total_ ? ",\n" : "\n  ]"));
    }
    sink("\n}\n");
  }
}

void Report::write(const std::string& path, const RunInfo& info) const {
  write_atomically(path, [&](const Sink& sink) { render(info, sink); });
}

nlohmann::ordered_json Report::json(const RunInfo& info) const {
  std::string text;
  render(info, [&](const std::string& part) { text += part; });
  return nlohmann::ordered_json::parse(text);
}

int exit_code_for(const std::vector<Result>& results, size_t planned) {
  if (results.size() < planned) return kExitTestFailed;
  for (const auto& r : results)
    if (!r.passed) return kExitTestFailed;
  return kExitOk;
}

}  // namespace memrun
