// The profiled run of explain: memray for Python, heaptrack for native
// programs, a sampler of the processes in the profiled run's cgroup for
// what neither follows (an exec'd child), and the profiles read back
// through memray's Python API and heaptrack_print.
#include "runner/explain/profiled_run.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <wordexp.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include "runner/base/files.h"
#include "runner/base/units.h"
#include "runner/launch/child.h"

extern char** environ;

namespace memrun {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxSites = 10;

// A profile's reader holds a description of each allocation live at the
// peak and the symbols of the libraries they came from (memray's
// symbolizer reads their debug information): room is given for that, at
// least the profiled run's limit, and a time bound.
constexpr uint64_t kReaderMemory = 512 * MiB;
constexpr std::chrono::seconds kReaderBound{300};
// `python -c "import memray"`, `heaptrack --version`.
constexpr uint64_t kProbeMemory = 256 * MiB;

// Reads a profile through memray's own API (memray.FileReader): the
// allocations held at the high-water mark of each process it followed,
// largest first, with their Python and native frames. A thread pool's
// allocations (Polars', Arrow's, DuckDB's) carry no Python frame of their
// own: those live at the peak are added up by the call they served, the
// Python stack of the last allocation with Python frames made before each
// (a second pass over the records, up to the peak), and come as "pool"
// sites: the largest one's native frames, then that stack.
const char* kMemrayReader = R"PY(
import glob, json, sys
import memray

FREES = {memray.AllocatorType.FREE, memray.AllocatorType.MUNMAP, memray.AllocatorType.PYMALLOC_FREE}

def frames(stack):
    return [[str(f), str(p), int(l or 0)] for f, p, l in stack]

def pool_sites(r, main_tid):
    live, total, peak, at = {}, 0, -1, -1
    for i, a in enumerate(r.get_allocation_records()):
        if a.allocator in FREES:
            total -= live.pop(a.address, 0)
            continue
        live[a.address] = a.size
        total += a.size
        if total > peak:
            peak, at = total, i
    live, served, last = {}, {}, None
    for i, a in enumerate(r.get_allocation_records()):
        if i > at:
            break
        if a.allocator in FREES:
            live.pop(a.address, None)
        elif a.stack_id:
            live.pop(a.address, None)
            last = a
        elif a.tid != main_tid and last is not None:
            live[a.address] = (a, last)
        else:
            live.pop(a.address, None)
    for a, by in live.values():
        s = served.setdefault(by.stack_id, [0, 0, a, by])
        s[0] += a.size
        s[1] += 1
        if a.size > s[2].size:
            s[2] = a
    out = []
    for size, count, largest, by in served.values():
        try:
            native = frames(largest.hybrid_stack_trace(max_stacks=32))
        except Exception:
            native = []
        out.append({"bytes": size, "allocations": count, "stack": native,
                    "served": frames(by.stack_trace(max_stacks=64))})
    return out

out = []
for path in sorted(glob.glob(sys.argv[1] + "*")):
    try:
        r = memray.FileReader(path)
        m = r.metadata
        try:
            pool = pool_sites(r, m.main_thread_id)
        except Exception:  # an aggregated profile keeps no single allocation
            pool = None
        recs = sorted(r.get_high_watermark_allocation_records(merge_threads=False), key=lambda a: -a.size)
        sites = []
        for a in recs:
            if len(sites) == int(sys.argv[2]):
                break
            try:
                stack = list(a.hybrid_stack_trace(max_stacks=64)) if m.has_native_traces else list(a.stack_trace(max_stacks=64))
            except Exception:
                stack = list(a.stack_trace(max_stacks=64))
            python = any(str(p).endswith(".py") for _, p, _ in stack)
            if pool is not None and a.tid != m.main_thread_id and not python:
                continue  # counted in a pool site
            sites.append({"bytes": a.size, "allocations": a.n_allocations, "stack": frames(stack)})
        out.append({"file": path, "pid": m.pid, "command": m.command_line, "peak": m.peak_memory, "sites": sites,
                    "pool": pool or []})
    except Exception as e:
        out.append({"file": path, "error": "%s: %s" % (type(e).__name__, e)})
print(json.dumps(out))
)PY";

// What a helper (a profile's reader, a probe) did.
struct Ran {
  bool ok = false;         // it ran and exited 0
  bool exited = false;     // it ended by exiting (0 or not), not by memrun's or the kernel's hand
  std::string out, err;    // what it wrote (at most kHelperOutput of each)
  std::string failure;     // when not ok: what happened, in words
  int interrupted_by = 0;  // the signal that interrupted memrun while it ran, or 0
};

// A helper's output is a few sites' stacks: more is no reader's.
constexpr uint64_t kHelperOutput = 16 * MiB;

// At most `cap` bytes of the file at `path` ("" when there is none); sets
// *more when the file holds more.
std::string read_at_most(const std::string& path, uint64_t cap, bool* more) {
  // In pieces: memrun's own memory grows with what was written, never by
  // the cap.
  std::ifstream in(path, std::ios::binary);
  std::string text;
  char piece[65536];
  while (in && text.size() <= cap) {
    in.read(piece, sizeof piece);
    text.append(piece, static_cast<size_t>(in.gcount()));
  }
  *more = text.size() > cap;
  if (*more) text.resize(cap);
  return text;
}

std::vector<std::string> helper_env(const TestSpec& t) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (!t.env.count(kv.substr(0, kv.find('=')))) env.push_back(kv);
  }
  for (const auto& [k, v] : t.env) env.push_back(k + "=" + v);
  return env;
}

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

// How the profiled run runs the test: the profiler that fits its program
// and the wrapped argv, or why none does.
struct Profiling {
  std::string profiler;  // "memray" or "heaptrack"
  std::string python;    // memray's interpreter
  std::vector<std::string> argv;
  std::string why_not;   // what to install or change, when nothing fits
};

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

// A command line as the explanation keeps it: a pytest case's is memrun's
// whole plugin (python -c), which says nothing.
std::string shortened(const std::string& command) {
  constexpr size_t kMax = 240;
  if (command.size() <= kMax) return command;
  size_t cut = kMax;
  while (cut > 0 && (static_cast<unsigned char>(command[cut]) & 0xc0) == 0x80) --cut;  // whole UTF-8 characters
  return command.substr(0, cut) + "...";
}

// The processes of the profiled run's cgroup, sampled from /proc while it
// runs: each one's largest private memory (anonymous and shmem), so that
// memory in a process no profiler followed is named. A thread of its own:
// run_plan's loop is not to be slowed by a scan of /proc.
class ProcessSampler {
 public:
  /// `dir`: the profiled run's group (the backend's run_path()/group).
  explicit ProcessSampler(std::string dir)
      : dir_(std::move(dir)), self_(fs::read_symlink("/proc/self/exe", ec_)), thread_([this] { loop(); }) {}
  ~ProcessSampler() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::vector<ProcessSeen> seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<ProcessSeen> out;
    for (const auto& [pid, p] : seen_) out.push_back(p);
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.peak_private > b.peak_private; });
    return out;
  }

 private:
  void loop() {
    // Signals are memrun's loop's (a signalfd): never this thread's, whose
    // default action would end memrun without its report.
    sigset_t all;
    sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
    while (!stop_) {
      scan();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  void scan() {
    // The group's own list, not a match of names in /proc/PID/cgroup:
    // another run's group of the same name is no test's of this run.
    for (pid_t listed : cgroup::processes_below(dir_)) {
      if (listed <= 0) continue;  // in a pid namespace memrun cannot see
      std::string pid = std::to_string(listed);
      std::istringstream status(read_proc("/proc/" + pid + "/status"));
      uint64_t priv = 0;
      int ns_pid = 0;
      for (std::string line; std::getline(status, line);) {
        if (line.rfind("RssAnon:", 0) == 0 || line.rfind("RssShmem:", 0) == 0)
          priv += std::strtoull(line.c_str() + line.find(':') + 1, nullptr, 10) * 1024;
        if (line.rfind("NSpid:", 0) == 0) {
          // The innermost namespace's number is the last: what the test and
          // its profiler know the process by.
          std::istringstream ids(line.substr(6));
          for (int id; ids >> id;) ns_pid = id;
        }
      }
      // memrun's own (a sealed test's pid 1 is memrun's stub) is no test's.
      std::error_code ec;
      if (fs::read_symlink("/proc/" + pid + "/exe", ec) == self_) continue;
      std::string cmdline = read_proc("/proc/" + pid + "/cmdline");
      std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
      while (!cmdline.empty() && cmdline.back() == ' ') cmdline.pop_back();
      if (cmdline.empty()) continue;  // gone, or a zombie
      std::lock_guard<std::mutex> lock(mu_);
      auto& p = seen_[listed];
      // A process that execs keeps its pid: the last command is the one
      // that held the memory, as a rule.
      if (priv >= p.peak_private || p.command.empty()) p.command = shortened(cmdline);
      p.pid = ns_pid;
      p.peak_private = std::max(p.peak_private, priv);
    }
  }

  std::string dir_;
  std::error_code ec_;
  fs::path self_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::map<int, ProcessSeen> seen_;
  std::thread thread_;
};

// Catches the profiled run's record.
struct Catch : RunObserver {
  std::optional<TestRecord> record;
  void test_done(size_t, const TestRecord& r) override { record = r; }
};

// The helpers of one explanation (memray's reader, heaptrack_print, a
// version probe) run as tests do: each in a group of memrun's own backend,
// under a hard limit and a timeout, in memrun's folder for the test (never
// where the test could have left a module for them to import), with the
// test's environment. A capture too large to read ends its reader,
// never memrun or the machine; a signal to memrun stops it as it stops a
// test, and its group is removed.
class Helpers {
 public:
  Helpers(const PlannedTest& planned, cgroup::Backend& backend, const RunOptions& options, std::string run_dir,
          std::string dir)
      : planned_(planned), backend_(backend), options_(options), run_dir_(std::move(run_dir)), dir_(std::move(dir)) {
    options_.fail_fast = false;
    options_.jobs = 1;
    options_.tick = std::chrono::milliseconds(0);
    options_.budget.reset();
    options_.echo_stdout = options_.echo_stderr = -1;  // memrun exec's echo is the test's output, not a reader's
    options_.max_log = kHelperOutput;
  }

  /// Runs `argv` as the helper `what` ("read", "version": a word for its
  /// group and logs) under `limit` for at most `bound`.
  // Long: one run's steps (plan, loop, what ended it, its output) in order, each short.
  Ran run(const std::string& what, const std::vector<std::string>& argv, uint64_t limit, std::chrono::seconds bound) {
    Ran ran;
    TestSpec spec;
    spec.name = planned_.test->name + " (explain's " + what + ")";
    spec.argv = argv;
    for (size_t i = 0; i < argv.size(); ++i) spec.command += (i ? " " : "") + argv[i];
    spec.command = shortened(spec.command);
    spec.memory = limit;
    spec.timeout = bound;
    spec.env = planned_.test->env;
    spec.cwd = dir_;
    spec.pids = kDefaultPids;
    PlannedTest p = planned_;
    p.test = &spec;
    ++count_;
    p.group = fmt::format("explain-{}-{}{}", planned_.group, what, count_);
    p.stdout_path = fmt::format("{}/{}{}.out", dir_, what, count_);
    p.stderr_path = fmt::format("{}/{}{}.err", dir_, what, count_);
    p.run = p.runs = 1;
    p.first = 0;
    p.after.clear();  // alone in its plan: what it waited for ran already
    p.needs.clear();
    Plan plan;
    plan.run_dir = run_dir_;
    plan.tests.push_back(p);
    Catch caught;
    RunResults results = run_plan(plan, backend_, options_, caught);
    ran.interrupted_by = results.interrupted_by;
    std::string name = fs::path(argv[0]).filename().string();
    bool more_out = false, more_err = false;
    ran.out = read_at_most(p.stdout_path, kHelperOutput, &more_out);
    ran.err = read_at_most(p.stderr_path, 2000, &more_err);
    if (!caught.record) {
      ran.failure = fmt::format("{} did not run", name);
      return ran;
    }
    const TestRecord& r = *caught.record;
    const Observation& o = r.observed;
    switch (r.verdict.outcome) {
      case Outcome::pass:
        ran.exited = true;
        ran.ok = !more_out;
        if (more_out) ran.failure = fmt::format("{} wrote more than {}, which is no profile's reading", name,
                                                format_size(kHelperOutput));
        return ran;
      case Outcome::oom:
      case Outcome::thrash:
        ran.failure = fmt::format("{} was {} at its memory limit of {} (the capture is too large to read within it; "
                                  "its files are in {})",
                                  name, r.verdict.outcome == Outcome::oom ? "OOM-killed" : "ended thrashing",
                                  format_size(limit), dir_);
        return ran;
      case Outcome::timeout:
        ran.failure = fmt::format("{} took longer than {} s and was stopped", name, bound.count());
        return ran;
      case Outcome::interrupted:
        ran.failure = fmt::format("{} was stopped: memrun was interrupted", name);
        return ran;
      case Outcome::error:
        ran.failure = fmt::format("{} could not start: {}", name, o.start_error);
        return ran;
      default:
        ran.exited = o.signal == 0;
        ran.failure = o.signal ? fmt::format("{} was killed by {}", name, strsignal(o.signal))
                               : fmt::format("{} exited with {}", name, o.exit_code);
        if (!ran.err.empty()) ran.failure += ": " + ran.err;
        return ran;
    }
  }

 private:
  const PlannedTest& planned_;
  cgroup::Backend& backend_;
  RunOptions options_;
  std::string run_dir_, dir_;
  int count_ = 0;
};

// The frame a site is shown by: the first in the test's own code. With
// Python frames, a Python one (the interpreter's C frames are no test's
// code); else the first native frame of the program's own module.
size_t where_of(const std::vector<StackFrame>& stack, const std::vector<bool>& library_module) {
  bool python = std::any_of(stack.begin(), stack.end(), [](const StackFrame& f) { return !f.native; });
  for (size_t i = 0; i < stack.size(); ++i)
    if (!stack[i].native && !library_file(stack[i].file)) return i;
  for (size_t i = 0; i < stack.size(); ++i)
    if (!stack[i].native) return i;
  if (python) return 0;
  for (size_t i = 0; i < stack.size(); ++i)
    if (stack[i].line > 0 && !library_file(stack[i].file) && (i >= library_module.size() || !library_module[i]))
      return i;
  return 0;
}


bool python_file(const std::string& file) {
  return file.size() > 3 && file.compare(file.size() - 3, 3, ".py") == 0;
}

// memray's profiles, one per process it followed.
// Long: the reader's output in its order (profiles, sites, merged stacks);
// it moves with memray's own room when explain is split by job (issue 47).
std::string read_memray(const Profiling& p, const std::string& out_base, Helpers& helpers, uint64_t limit,
                        Explanation& e, std::map<int, std::string>& profiled, int& interrupted_by) {
  Ran ran = helpers.run("read", {p.python, "-I", "-c", kMemrayReader, out_base + ".bin", std::to_string(kMaxSites * 5)},
                        limit, kReaderBound);
  interrupted_by = ran.interrupted_by;
  if (!ran.ok) return "memray's profile could not be read: " + ran.failure;
  auto j = nlohmann::json::parse(ran.out, nullptr, false);
  if (j.is_discarded() || !j.is_array()) return "memray's profile reader wrote something else: " + ran.out.substr(0, 500);
  std::string errors;
  for (const auto& f : j) {
    if (f.contains("error")) {
      errors += f.value("file", "") + ": " + f.value("error", "") + "; ";
      continue;
    }
    int pid = f.value("pid", 0);
    std::string command = f.value("command", "");
    profiled[pid] = "memray";
    e.profiled_peak += f.value("peak", uint64_t{0});
    auto add_frames = [](const nlohmann::json& from, std::vector<StackFrame>& to) {
      for (const auto& fr : from) {
        std::string file = fr[1].get<std::string>();
        to.push_back({fr[0].get<std::string>(), file == "<unknown>" ? "" : file, fr[2].get<int>(), !python_file(file)});
      }
    };
    for (const char* kind : {"sites", "pool"})
      for (const auto& s : f.value(kind, nlohmann::json::array())) {
        AllocationSite site;
        site.bytes = s.value("bytes", uint64_t{0});
        site.allocations = s.value("allocations", uint64_t{0});
        site.process = fmt::format("{} (pid {})", shortened(command), pid);
        add_frames(s["stack"], site.stack);
        if (s.contains("served")) {
          site.served_from = site.stack.size();
          add_frames(s["served"], site.stack);
        }
        site.where = where_of(site.stack, {});
        e.sites.push_back(std::move(site));
      }
  }
  // memray keeps apart what one Python line allocated through different
  // native paths (or bytecode offsets: three calls on one line): one site
  // per process and Python stack, as a developer reads them.
  std::map<std::string, size_t> by_stack;
  std::vector<AllocationSite> merged;
  for (auto& site : e.sites) {
    std::string key = site.process;
    for (const auto& f : site.stack)
      if (!f.native) key += fmt::format("\n{}\t{}\t{}", f.function, f.file, f.line);
    auto [at, fresh] = by_stack.emplace(key, merged.size());
    if (fresh || key == site.process) {
      if (!fresh) at->second = merged.size();
      merged.push_back(std::move(site));
      continue;
    }
    merged[at->second].bytes += site.bytes;
    merged[at->second].allocations += site.allocations;
  }
  e.sites = std::move(merged);
  if (j.empty()) return "memray wrote no profile (did the test's Python start?)";
  if (e.sites.empty() && !errors.empty()) return "memray's profile could not be read: " + errors;
  return "";
}

// "209.72M" as heaptrack_print writes sizes (powers of 1000) -> bytes.
uint64_t heaptrack_size(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  double unit = 1;
  if (end && *end) {
    switch (*end) {
      case 'K': unit = 1e3; break;
      case 'M': unit = 1e6; break;
      case 'G': unit = 1e9; break;
      case 'T': unit = 1e12; break;
      default: break;
    }
  }
  return static_cast<uint64_t>(std::llround(v * unit));
}

// heaptrack_print's peak consumers (-p): each a location, then the
// backtraces that reached it with their bytes at the peak. heaptrack has
// no machine-readable form of these with file:line (its flame graph stacks
// lack lines, its massif output the stacks), so its text is read, strictly:
// a line not as expected ends the block.
// Long: heaptrack_print's text read strictly, block by block; it moves to a
// room of its own when explain is split by job (issue 47).
std::string read_heaptrack(const std::string& dir, const std::string& out_base, const std::vector<std::string>& env,
                           Helpers& helpers, uint64_t limit, Explanation& e,
                           std::map<std::string, std::string>& profiled_commands, int& interrupted_by) {
  std::string print = find_executable("heaptrack_print", env);
  std::string prefix = fs::path(out_base).filename().string() + ".";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    Ran ran = helpers.run("read", {print, "-f", entry.path().string(), "-p", "1", "-a", "0", "-T", "0", "-l", "0", "-n",
                                   std::to_string(kMaxSites), "-s", "3"},
                          limit, kReaderBound);
    // A signal taken during one reader is the run's, though that reader
    // finished: no other reader starts.
    interrupted_by = ran.interrupted_by;
    if (!ran.ok) return "heaptrack's profile " + name + " could not be read: " + ran.failure;
    if (ran.interrupted_by) return "heaptrack's profiles were not all read: memrun was interrupted";
    std::istringstream in(ran.out);
    std::string command;
    static const std::regex peak_head(R"(^(\S+) peak memory consumed over (\d+) calls from$)");
    static const std::regex sub_head(R"(^(\S+) consumed over (\d+) calls from:$)");
    static const std::regex total(R"(^peak heap memory consumption: (\S+)$)");
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    std::smatch m;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].rfind("Debuggee command was: ", 0) == 0) {
        command = lines[i].substr(22);
        profiled_commands[shortened(command)] = "heaptrack";
      }
      if (std::regex_match(lines[i], m, total)) e.profiled_peak += heaptrack_size(m[1]);
      if (!std::regex_match(lines[i], m, peak_head)) continue;
      // Frames: "FUNCTION" then optional "  at FILE:LINE" and "  in MODULE",
      // indented by `indent`.
      auto read_frames = [&](size_t& k, size_t indent, std::vector<StackFrame>& stack, std::vector<bool>& lib) {
        std::string pad(indent, ' ');
        while (k < lines.size() && lines[k].rfind(pad, 0) == 0 && lines[k].size() > indent &&
               lines[k][indent] != ' ' && !std::regex_match(lines[k], m, sub_head)) {
          StackFrame f{lines[k].substr(indent), "", 0, true};
          bool library = false;
          ++k;
          if (k < lines.size() && lines[k].rfind(pad + "  at ", 0) == 0) {
            std::string at = lines[k].substr(indent + 5);
            auto colon = at.rfind(':');
            f.file = colon == std::string::npos ? at : at.substr(0, colon);
            f.line = colon == std::string::npos ? 0 : std::atoi(at.c_str() + colon + 1);
            ++k;
          }
          if (k < lines.size() && lines[k].rfind(pad + "  in ", 0) == 0) {
            std::string module = lines[k].substr(indent + 5);
            library = module.rfind("/lib", 0) == 0 || module.rfind("/usr/lib", 0) == 0 ||
                      module.find("heaptrack") != std::string::npos;
            ++k;
          }
          stack.push_back(f);
          lib.push_back(library);
        }
      };
      size_t k = i + 1;
      std::vector<StackFrame> location;
      std::vector<bool> location_lib;
      read_frames(k, 0, location, location_lib);
      while (k < lines.size() && std::regex_match(lines[k], m, sub_head)) {
        AllocationSite site;
        site.bytes = heaptrack_size(m[1]);
        site.allocations = std::stoull(m[2]);
        site.process = shortened(command);
        site.stack = location;
        std::vector<bool> lib = location_lib;
        ++k;
        read_frames(k, 4, site.stack, lib);
        site.where = where_of(site.stack, lib);
        e.sites.push_back(std::move(site));
      }
      i = k - 1;
    }
  }
  if (profiled_commands.empty()) return "heaptrack wrote no profile (did the program start?)";
  return "";
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

// Long: the profiled run end to end (profiler, limit, run, profiles,
// breakdown, summary); split with explain's rooms (issue 47).
Explanation explain_test(const PlannedTest& planned, const TestRecord& r, const std::string& why,
                         cgroup::Backend& backend, const RunOptions& options, const std::string& run_dir,
                         int& interrupted_by) {
  interrupted_by = 0;
  Explanation e;
  e.why = why;
  e.explained_peak = r.verdict.peak;
  e.explained_duration_s = r.observed.duration_s;
  const TestSpec& t = *planned.test;
  std::string group = "explain-" + planned.group;
  std::string dir = run_dir + "/explain/" + planned.group;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    e.status = "failed";
    e.message = "cannot create " + dir + ": " + ec.message();
    return e;
  }
  dir = fs::absolute(dir).string();
  std::string out_base = dir + "/profile";
  std::vector<std::string> env = helper_env(t);
  Profiling p = choose(t, out_base, env);
  if (!p.why_not.empty()) {
    e.status = "unavailable";
    e.message = p.why_not;
    return e;
  }
  Helpers helpers(planned, backend, options, run_dir, dir);
  // memrun was interrupted: what ran was stopped and its group removed
  // (run_plan); the explanation says so, the verdict stands.
  auto interrupted = [&](int sig, const char* during) {
    interrupted_by = sig;
    e.status = "interrupted";
    e.message = fmt::format("memrun was interrupted ({}) during {}, which was stopped: nothing was explained",
                            strsignal(sig), during);
    return e;
  };
  int sig = 0;
  std::string probe_failure;
  e.profiler = version_of(p, env, helpers, sig, probe_failure);
  if (sig) return interrupted(sig, "the profiler's version probe");
  if (!probe_failure.empty()) {
    e.status = "failed";
    e.message = probe_failure;
    return e;
  }
  if (e.profiler.empty()) {
    e.status = "unavailable";
    e.message = "memray is not installed in " + p.python + ", which explains Python tests: install it there (" +
                p.python + " -m pip install memray) and run again";
    return e;
  }
  for (size_t i = 0; i < p.argv.size(); ++i) e.command += (i ? " " : "") + p.argv[i];
  e.command = shortened(e.command);

  TestSpec profiled = t;
  profiled.argv = p.argv;
  profiled.command = e.command;
  profiled.memory = profiled_limit(r.verdict.limit ? r.verdict.limit : t.memory);
  profiled.memory_high.reset();
  profiled.min_headroom.reset();
  // A profiled program runs slower (memray, by a few times at most).
  if (profiled.timeout.count() > 0) profiled.timeout = profiled.timeout * 5 + std::chrono::seconds(60);
  e.limit = profiled.memory;
  PlannedTest run = planned;
  run.test = &profiled;
  run.group = group;
  run.stdout_path = dir + "/stdout.log";
  run.stderr_path = dir + "/stderr.log";
  run.run = run.runs = 1;
  run.first = 0;
  run.after.clear();  // alone in its plan: what it waited for ran already
  run.needs.clear();
  Plan plan;
  plan.run_dir = run_dir;
  plan.tests.push_back(run);
  RunOptions ro = options;
  ro.fail_fast = false;
  ro.jobs = 1;
  ro.tick = std::chrono::milliseconds(0);
  ro.budget.reset();
  Catch caught;
  ProcessSampler sampler(backend.run_path() + "/" + group);
  RunResults results = run_plan(plan, backend, ro, caught);
  sampler.stop();
  if (caught.record) {
    const TestRecord& pr = *caught.record;
    e.outcome = to_string(pr.verdict.outcome);
    e.exit_code = pr.observed.exit_code;
    e.kernel_peak = pr.verdict.peak;
    e.duration_s = pr.observed.duration_s;
    e.at_peak = pr.observed.at_peak;
  }
  if (results.interrupted_by) return interrupted(results.interrupted_by, "the profiled run");
  if (!caught.record) {
    e.status = "failed";
    e.message = "the profiled run did not happen";
    return e;
  }
  const TestRecord& pr = *caught.record;
  if (pr.observed.ending == Ending::not_started) {
    e.status = "failed";
    e.message = "the profiled run could not start: " + pr.observed.start_error;
    return e;
  }

  // Which processes the profiler saw: memray says their pids (as the
  // test's pid namespace numbers them), heaptrack the command it ran.
  std::map<int, std::string> profiled_pids;
  std::map<std::string, std::string> profiled_commands;
  uint64_t read_limit = reader_limit(profiled.memory);
  std::string failure =
      p.profiler == "memray"
          ? read_memray(p, out_base, helpers, read_limit, e, profiled_pids, sig)
          : read_heaptrack(dir, fs::path(out_base).filename().string(), env, helpers, read_limit, e, profiled_commands,
                           sig);
  if (sig) return interrupted(sig, "the reading of its profile");
  std::stable_sort(e.sites.begin(), e.sites.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  if (e.sites.size() > kMaxSites) e.sites.resize(kMaxSites);
  for (auto& s : e.sites) {
    s.share = e.kernel_peak ? static_cast<double>(s.bytes) / static_cast<double>(e.kernel_peak) : 0;
    if (!s.stack.empty()) s.code = source_line(s.stack[s.where], t.cwd);
  }
  e.processes = sampler.seen();
  uint64_t unprofiled = 0;
  for (auto& proc : e.processes) {
    if (profiled_pids.count(proc.pid)) proc.profiled_by = profiled_pids[proc.pid];
    else if (profiled_commands.count(proc.command)) proc.profiled_by = profiled_commands[proc.command];
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
  if (!failure.empty()) {
    e.status = "failed";
    e.message = failure;
    return e;
  }
  e.status = "explained";

  // The summary: the largest thing the explanation found.
  const ProcessSeen* child = nullptr;
  for (const auto& proc : e.processes)
    if (proc.profiled_by.empty() && (!child || proc.peak_private > child->peak_private)) child = &proc;
  if (child && child->peak_private > e.profiled_peak && child->peak_private >= e.kernel_peak / 4) {
    e.summary = fmt::format("the memory was in a child process {} did not profile: {} (pid {}) held {}; {} saw {}",
                            p.profiler, child->command, child->pid, format_size(child->peak_private), p.profiler,
                            format_size(e.profiled_peak));
  } else if (e.profiled_peak < e.kernel_peak / 4) {
    e.summary = fmt::format("the profiler saw little: {} of the kernel's peak {}; at the peak page cache held {}, "
                            "kernel memory {}, shmem {}, anonymous memory {}",
                            format_size(e.profiled_peak), format_size(e.kernel_peak), format_size(e.at_peak.file),
                            format_size(u.kernel), format_size(e.at_peak.shmem), format_size(e.at_peak.anon));
  } else if (!e.sites.empty()) {
    const auto& s = e.sites[0];
    e.summary = fmt::format("{} of the kernel's peak {} was allocated at its peak by {}", format_size(s.bytes),
                            format_size(e.kernel_peak), site_text(s));
  } else {
    e.summary = fmt::format("{} saw {} allocated at its peak, no site", p.profiler, format_size(e.profiled_peak));
  }
  return e;
}

}  // namespace memrun
