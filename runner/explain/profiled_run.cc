// The profiled run of explain: which profiler fits a test's program
// (memray for Python, heaptrack for native programs), the second run in a
// cgroup of its own with its processes sampled (process_sampler.h) for
// what neither follows (an exec'd child), and its profiles read back
// (memray.h, heaptrack.h) by helpers run as tests are (helpers.h).
#include "runner/explain/profiled_run.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <wordexp.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "runner/base/files.h"
#include "runner/base/units.h"
#include "runner/explain/heaptrack.h"
#include "runner/explain/helpers.h"
#include "runner/explain/memray.h"
#include "runner/explain/process_sampler.h"
#include "runner/launch/child.h"

extern char** environ;

namespace memrun {

using namespace explain;

namespace {

namespace fs = std::filesystem;

// The words of one simple command (`"$PY" x.py "cache/wide-$N.parquet"`)
// as sh makes them, from the test's folder: quotes removed, $VAR and
// ${VAR:-x} from the test's environment, globs matched: wordexp(3), with
// WRDE_NOCMD (a command substitution is refused, never run); an unquoted
// operator (| & ; < > ( ) { } newline) is refused too: a pipeline or a list
// is no one program. wordexp reads the process's variables, so it runs in
// a child given the test's, its signals unblocked, its errors unprinted,
// for at most 5 s and 1 MiB of words. nullopt when it refuses, or the line
// starts by assigning a variable or holds a comment (#).
// Long: the child that runs wordexp(3) and the parent that reads its words,
// each bounded, side by side.
std::optional<std::vector<std::string>> command_words(const std::string& command, const std::vector<std::string>& env,
                                                     const std::string& cwd) {
  size_t name = command.find_first_not_of(" \t");
  size_t after = name == std::string::npos ? name : command.find_first_not_of(
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_", name);
  bool assigns = after != std::string::npos && after > name && command[after] == '=' &&
                 !(command[name] >= '0' && command[name] <= '9');
  if (assigns || command.find('#') != std::string::npos) return std::nullopt;
  constexpr size_t kMaxWords = 1 << 20;
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return std::nullopt;
  std::vector<char*> vars;
  for (const auto& kv : env) vars.push_back(const_cast<char*>(kv.c_str()));
  vars.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    environ = vars.data();
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGALRM, SIG_DFL);
    ::alarm(5);
    int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0 || ::dup2(null, 2) < 0 || ::chdir(cwd.c_str()) != 0) ::_exit(1);
    wordexp_t w;
    if (::wordexp(command.c_str(), &w, WRDE_NOCMD) != 0) ::_exit(1);
    for (size_t i = 0; i < w.we_wordc; ++i) {
      const char* at = w.we_wordv[i];
      for (size_t left = std::strlen(at) + 1; left > 0;) {  // with its NUL: the words' separator
        ssize_t n = ::write(out[1], at, left);
        if (n <= 0) ::_exit(1);
        at += n, left -= static_cast<size_t>(n);
      }
    }
    ::_exit(0);
  }
  ::close(out[1]);
  std::string text;
  char piece[4096];
  for (ssize_t n; pid > 0 && (n = ::read(out[0], piece, sizeof piece)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(piece, static_cast<size_t>(n));
    if (text.size() > kMaxWords) {
      ::kill(pid, SIGKILL);
      break;
    }
  }
  ::close(out[0]);
  int status = 0;
  while (pid > 0 && ::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (pid <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || text.size() > kMaxWords) return std::nullopt;
  std::vector<std::string> words;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\0', at);
    words.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  if (words.empty()) return std::nullopt;
  return words;
}

// The source line a frame names, trimmed and cut to 120 bytes: what a
// developer knows a site by ("" when it cannot be read). A relative file
// is the test's, from its folder. The name is the test's to choose (a
// compile() filename, a #line): only a regular file is read (a FIFO would
// hang memrun, /dev/zero grow it), and only its first 4 MiB.
std::string source_line(const StackFrame& f, const std::string& cwd) {
  if (f.file.empty() || f.line <= 0) return "";
  std::string path = (fs::path(cwd) / f.file).string();
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return "";
  struct stat st{};
  std::string text;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    char piece[65536];
    int line = 1;
    uint64_t seen = 0;
    for (ssize_t n; line <= f.line && seen < 4 * MiB && (n = ::read(fd, piece, sizeof piece)) > 0; seen += n)
      for (ssize_t i = 0; i < n && line <= f.line; ++i) {
        if (piece[i] == '\n') ++line;
        else if (line == f.line && text.size() < 4096) text += piece[i];
      }
  }
  ::close(fd);
  size_t begin = text.find_first_not_of(" \t"), end = text.find_last_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  text = text.substr(begin, end - begin + 1);
  if (text.size() <= 120) return text;
  size_t cut = 117;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
  return text.substr(0, cut) + "...";
}

bool is_python_name(const std::string& path) {
  static const std::regex python(R"(python[0-9.]*)");
  return std::regex_match(fs::path(path).filename().string(), python);
}

// The interpreter of a script's #! line ("/usr/bin/env python3" -> python3).
std::string shebang_interpreter(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || line.rfind("#!", 0) != 0) return "";
  std::istringstream words(line.substr(2));
  std::string first, second;
  words >> first >> second;
  if (fs::path(first).filename() == "env") return second;
  return first;
}

// The test's program and its arguments: its argv, or the words of its one
// shell command; nullopt (and *why_not) when `run` is more shell than that.
std::optional<std::vector<std::string>> program_argv(const TestSpec& t, const std::vector<std::string>& env,
                                                    std::string* why_not) {
  if (t.argv.size() != 3 || fs::path(t.argv[0]).filename() != "sh" || t.argv[1] != "-c") return t.argv;
  auto words = command_words(t.argv[2], env, t.cwd);
  if (!words)
    *why_not = "explain runs a test's program under a profiler itself, and this test's `run` is more shell code "
               "than one command (a pipeline, a list, a redirection, a command substitution or a variable "
               "assignment); give `run` as one command or an argv list ([python3, x.py]) to explain it";
  return words;
}

Profiling choose(const TestSpec& t, const std::string& out_base, const std::vector<std::string>& env) {
  Profiling p;
  auto words = program_argv(t, env, &p.why_not);
  if (!words) return p;
  std::vector<std::string> argv = *words;
  // A relative program is the test's, from its folder; the profiler and
  // memray's probe run from elsewhere.
  std::string program = find_executable(argv[0], env);
  if (!program.empty() && program[0] != '/') program = (fs::path(t.cwd) / program).lexically_normal().string();
  if (program.empty()) {
    p.why_not = argv[0] + " is not on the test's PATH: nothing to profile";
    return p;
  }
  // Python: the interpreter itself, a script whose #! names one, or a
  // console script of one (pytest).
  std::string python;
  std::vector<std::string> rest(argv.begin() + 1, argv.end());
  if (is_python_name(program)) {
    python = program;
    if (!rest.empty() && rest[0].size() > 1 && rest[0][0] == '-' && rest[0] != "-c" && rest[0] != "-m") {
      p.why_not = "memray runs `python -c`, `python -m` or a script; this test gives python the option " + rest[0] +
                  " first: move it into the script (or PYTHON* variables) to explain it";
      return p;
    }
  } else if (std::string interp = shebang_interpreter(program); !interp.empty() && is_python_name(interp)) {
    python = find_executable(interp, env);
    if (python.empty()) {
      p.why_not = program + "'s interpreter " + interp + " is not on the test's PATH";
      return p;
    }
    rest.insert(rest.begin(), program);
  }
  if (!python.empty()) {
    p.profiler = "memray";
    p.python = python;
    // --native: the frames below Python (numpy's, the allocator's) name
    // what allocated; --follow-fork: children forked by Python are
    // profiled too (not those exec'd: the process sampler names those).
    p.argv = {python, "-m", "memray", "run", "--native", "--follow-fork", "--force", "-q", "-o", out_base + ".bin"};
    p.argv.insert(p.argv.end(), rest.begin(), rest.end());
    return p;
  }
  p.profiler = "heaptrack";
  std::string heaptrack = find_executable("heaptrack", env);
  if (heaptrack.empty() || find_executable("heaptrack_print", env).empty()) {
    p.why_not = "heaptrack is not installed, which explains native programs: install it (apt-get install heaptrack "
                "on Debian and Ubuntu, dnf install heaptrack on Fedora) and run again";
    return p;
  }
  p.argv = {heaptrack, "-o", out_base};
  p.argv.push_back(program);
  p.argv.insert(p.argv.end(), rest.begin(), rest.end());
  return p;
}

// The profiler's name and version; "" when memray is not installed in the
// test's Python (its import failed), with `failure` set when the probe
// could not tell (killed at its limit, timed out, not started).
std::string version_of(const Profiling& p, const std::vector<std::string>& env, Helpers& helpers,
                       int& interrupted_by, std::string& failure) {
  if (p.profiler == "memray") {
    Ran r = helpers.run("version", {p.python, "-I", "-c", "import memray; print(memray.__version__)"}, kProbeMemory,
                        std::chrono::seconds(60));
    interrupted_by = r.interrupted_by;
    if (!r.ok && !r.exited) failure = "the probe of memray in " + p.python + ": " + r.failure;
    if (!r.ok) return "";
    std::string v = r.out.substr(0, r.out.find('\n'));
    return "memray " + v;
  }
  Ran r = helpers.run("version", {find_executable("heaptrack", env), "--version"}, kProbeMemory,
                      std::chrono::seconds(60));
  interrupted_by = r.interrupted_by;
  std::string v = r.out.substr(0, r.out.find('\n'));
  return v.empty() ? "heaptrack" : v;  // "heaptrack 1.4.0"
}

// What the host has free (MemAvailable), or 0 when it cannot be read.
uint64_t mem_available_bytes() {
  std::string mem = read_proc("/proc/meminfo");
  auto at = mem.find("MemAvailable:");
  return at == std::string::npos ? 0 : std::strtoull(mem.c_str() + at + 13, nullptr, 10) * 1024;
}

// The limit of the profiled run: above the test's, so that a profile of a
// test its limit killed reaches the peak the test was heading for (the
// profiler's own memory is charged too); within what the host has free.
uint64_t profiled_limit(uint64_t limit) {
  uint64_t want = limit * 2 + 64 * MiB;
  if (uint64_t avail = mem_available_bytes()) want = std::min(want, std::max(limit, avail / 10 * 8));
  return want;
}

// The limit of a profile's reader: see kReaderMemory.
uint64_t reader_limit(uint64_t profiled) {
  uint64_t want = std::max(kReaderMemory, profiled);
  if (uint64_t avail = mem_available_bytes()) want = std::min(want, std::max(kProbeMemory, avail / 10 * 8));
  return want;
}

}  // namespace

std::string explain_why(ExplainMode mode, const TestRecord& r) {
  const Verdict& v = r.verdict;
  if (mode == ExplainMode::never || v.disabled || r.observed.ending == Ending::not_started ||
      r.observed.ending == Ending::not_run || v.outcome == Outcome::interrupted || v.outcome == Outcome::skipped)
    return "";
  if (mode == ExplainMode::always) return "always";
  if (v.passed) return "";
  if (v.outcome == Outcome::oom) return "oom";
  if (v.outcome == Outcome::thrash) return "thrash";
  if (v.reason.rfind("headroom", 0) == 0) return "headroom";
  return "";
}

bool explain_regressed(ExplainMode mode) { return mode != ExplainMode::never; }

namespace {

// The explanation ends here: `status`, and why.
Explanation& ended(Explanation& e, const std::string& status, const std::string& message) {
  e.status = status;
  e.message = message;
  return e;
}

// memrun was interrupted: what ran was stopped and its group removed
// (run_plan); the explanation says so, the verdict stands.
Explanation& interrupted(Explanation& e, int sig, const char* during, int& interrupted_by) {
  interrupted_by = sig;
  return ended(e, "interrupted",
               fmt::format("memrun was interrupted ({}) during {}, which was stopped: nothing was explained",
                           strsignal(sig), during));
}

// The profiler's name and version in `e.profiler`; false, `e` saying why,
// when it cannot run.
bool probed(Explanation& e, const Profiling& p, const std::vector<std::string>& env, Helpers& helpers,
            int& interrupted_by) {
  int sig = 0;
  std::string probe_failure;
  e.profiler = version_of(p, env, helpers, sig, probe_failure);
  if (sig) return interrupted(e, sig, "the profiler's version probe", interrupted_by), false;
  if (!probe_failure.empty()) return ended(e, "failed", probe_failure), false;
  if (e.profiler.empty())
    return ended(e, "unavailable",
                 "memray is not installed in " + p.python + ", which explains Python tests: install it there (" +
                     p.python + " -m pip install memray) and run again"),
           false;
  return true;
}

// The profiled run: the test once more as `p` wraps it, alone, above its
// limit (e.limit), its processes sampled. Its figures go to `e`; its
// record, when it ran.
std::optional<TestRecord> run_profiled(Explanation& e, const PlannedTest& planned, const Profiling& p,
                                       const std::string& dir, cgroup::Backend& backend, const RunOptions& options,
                                       const std::string& run_dir, std::vector<ProcessSeen>& processes, int& sig) {
  TestSpec profiled = *planned.test;
  profiled.argv = p.argv;
  profiled.command = e.command;
  profiled.memory = e.limit;
  profiled.memory_high.reset();
  profiled.min_headroom.reset();
  // A profiled program runs slower (memray, by a few times at most).
  if (profiled.timeout.count() > 0) profiled.timeout = profiled.timeout * 5 + std::chrono::seconds(60);
  PlannedTest run = planned;
  run.test = &profiled;
  run.named("explain-" + planned.group(), dir + "/stdout.log", dir + "/stderr.log");
  Plan plan = plan_of_one(run, run_dir);
  RunOptions ro = options;
  ro.fail_fast = false;
  ro.jobs = 1;
  ro.tick = std::chrono::milliseconds(0);
  ro.budget.reset();
  Catch caught;
  ProcessSampler sampler(backend.run_path() + "/" + run.group());
  sig = run_plan(plan, backend, ro, caught).interrupted_by;
  sampler.stop();
  processes = sampler.seen();
  if (caught.record) {
    const TestRecord& pr = *caught.record;
    e.outcome = to_string(pr.verdict.outcome);
    e.exit_code = pr.observed.exit_code;
    e.kernel_peak = pr.verdict.peak;
    e.duration_s = pr.observed.duration_s;
    e.at_peak = pr.observed.at_peak;
  }
  return caught.record;
}

// The sites' shares and source lines, which processes a profiler saw
// (memray names their pids as the test's pid namespace numbers them,
// heaptrack the command it ran), and what none saw.
void attribute(Explanation& e, const std::map<int, std::string>& pids,
               const std::map<std::string, std::string>& commands, const std::string& cwd) {
  std::stable_sort(e.sites.begin(), e.sites.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  if (e.sites.size() > kMaxSites) e.sites.resize(kMaxSites);
  for (auto& s : e.sites) {
    s.share = e.kernel_peak ? static_cast<double>(s.bytes) / static_cast<double>(e.kernel_peak) : 0;
    if (!s.stack.empty()) s.code = source_line(s.stack[s.where], cwd);
  }
  uint64_t unprofiled = 0;
  for (auto& proc : e.processes) {
    if (pids.count(proc.pid)) proc.profiled_by = pids.at(proc.pid);
    else if (commands.count(proc.command)) proc.profiled_by = commands.at(proc.command);
    else if (proc.command.find("heaptrack") != std::string::npos || proc.command.find("memray") != std::string::npos)
      proc.profiled_by = "profiler";
    if (proc.profiled_by.empty()) unprofiled += proc.peak_private;
  }
  if (e.processes.size() > 10) e.processes.resize(10);
  Unseen& u = e.unseen;
  u.total = e.kernel_peak > e.profiled_peak ? e.kernel_peak - e.profiled_peak : 0;
  u.file = e.at_peak.file;
  u.kernel = e.at_peak.kernel + e.at_peak.sock;
  u.shmem = e.at_peak.shmem;
  u.other_processes = unprofiled;
  uint64_t seen = e.profiled_peak + unprofiled;
  u.anon_unprofiled = e.at_peak.anon > seen ? e.at_peak.anon - seen : 0;
}

// The summary: the largest thing the explanation found.
std::string summary_of(const Explanation& e, const std::string& profiler) {
  const ProcessSeen* child = nullptr;
  for (const auto& proc : e.processes)
    if (proc.profiled_by.empty() && (!child || proc.peak_private > child->peak_private)) child = &proc;
  if (child && child->peak_private > e.profiled_peak && child->peak_private >= e.kernel_peak / 4)
    return fmt::format("the memory was in a child process {} did not profile: {} (pid {}) held {}; {} saw {}",
                       profiler, child->command, child->pid, format_size(child->peak_private), profiler,
                       format_size(e.profiled_peak));
  if (e.profiled_peak < e.kernel_peak / 4)
    return fmt::format("the profiler saw little: {} of the kernel's peak {}; at the peak page cache held {}, "
                       "kernel memory {}, shmem {}, anonymous memory {}",
                       format_size(e.profiled_peak), format_size(e.kernel_peak), format_size(e.at_peak.file),
                       format_size(e.unseen.kernel), format_size(e.at_peak.shmem), format_size(e.at_peak.anon));
  if (!e.sites.empty())
    return fmt::format("{} of the kernel's peak {} was allocated at its peak by {}", format_size(e.sites[0].bytes),
                       format_size(e.kernel_peak), site_text(e.sites[0]));
  return fmt::format("{} saw {} allocated at its peak, no site", profiler, format_size(e.profiled_peak));
}

}  // namespace

Explanation explain_test(const PlannedTest& planned, const TestRecord& r, const std::string& why,
                         cgroup::Backend& backend, const RunOptions& options, const std::string& run_dir,
                         int& interrupted_by) {
  interrupted_by = 0;
  Explanation e;
  e.why = why;
  e.explained_peak = r.verdict.peak;
  e.explained_duration_s = r.observed.duration_s;
  const TestSpec& t = *planned.test;
  std::string dir = run_dir + "/explain/" + planned.group();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return ended(e, "failed", "cannot create " + dir + ": " + ec.message());
  dir = fs::absolute(dir).string();
  std::string out_base = dir + "/profile";
  std::vector<std::string> env = helper_env(t);
  Profiling p = choose(t, out_base, env);
  if (!p.why_not.empty()) return ended(e, "unavailable", p.why_not);
  Helpers helpers(planned, backend, options, run_dir, dir);
  if (!probed(e, p, env, helpers, interrupted_by)) return e;
  for (size_t i = 0; i < p.argv.size(); ++i) e.command += (i ? " " : "") + p.argv[i];
  e.command = shortened(e.command);
  e.limit = profiled_limit(r.verdict.limit ? r.verdict.limit : t.memory);
  int sig = 0;
  std::vector<ProcessSeen> processes;
  auto record = run_profiled(e, planned, p, dir, backend, options, run_dir, processes, sig);
  if (sig) return interrupted(e, sig, "the profiled run", interrupted_by);
  if (!record) return ended(e, "failed", "the profiled run did not happen");
  if (record->observed.ending == Ending::not_started)
    return ended(e, "failed", "the profiled run could not start: " + record->observed.start_error);
  std::map<int, std::string> profiled_pids;
  std::map<std::string, std::string> profiled_commands;
  uint64_t read_limit = reader_limit(e.limit);
  std::string failure =
      p.profiler == "memray"
          ? read_memray(p, out_base, helpers, read_limit, e, profiled_pids, sig)
          : read_heaptrack(dir, fs::path(out_base).filename().string(), env, helpers, read_limit, e, profiled_commands,
                           sig);
  if (sig) return interrupted(e, sig, "the reading of its profile", interrupted_by);
  e.processes = std::move(processes);
  attribute(e, profiled_pids, profiled_commands, t.cwd);
  if (!failure.empty()) return ended(e, "failed", failure);
  e.status = "explained";
  e.summary = summary_of(e, p.profiler);
  return e;
}

}  // namespace memrun
