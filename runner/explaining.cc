// The profiled run of explain: memray for Python, heaptrack for native
// programs, a sampler of the processes in the profiled run's cgroup for
// what neither follows (an exec'd child), and the profiles read back
// through memray's Python API and heaptrack_print.
#include "runner/explaining.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

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

#include "runner/files.h"
#include "runner/launch.h"
#include "runner/units.h"

extern char** environ;

namespace memrun {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxSites = 10;

// Reads a profile through memray's own API (memray.FileReader): the
// allocations held at the high-water mark of each process it followed,
// largest first, with their Python and native frames.
const char* kMemrayReader = R"PY(
import glob, json, sys
import memray
out = []
for path in sorted(glob.glob(sys.argv[1] + "*")):
    try:
        r = memray.FileReader(path)
        m = r.metadata
        recs = sorted(r.get_high_watermark_allocation_records(merge_threads=True), key=lambda a: -a.size)
        sites = []
        for a in recs[:int(sys.argv[2])]:
            try:
                stack = list(a.hybrid_stack_trace(max_stacks=64)) if m.has_native_traces else list(a.stack_trace(max_stacks=64))
            except Exception:
                stack = list(a.stack_trace(max_stacks=64))
            sites.append({"bytes": a.size, "allocations": a.n_allocations,
                          "stack": [[str(f), str(p), int(l or 0)] for f, p, l in stack]})
        out.append({"file": path, "pid": m.pid, "command": m.command_line, "peak": m.peak_memory, "sites": sites})
    except Exception as e:
        out.append({"file": path, "error": "%s: %s" % (type(e).__name__, e)})
print(json.dumps(out))
)PY";

struct Ran {
  int status = -1;  // the wait status; -1 when it could not start or was killed at its bound
  std::string out, err;
};

// Runs a helper (a profiler's reader, a probe) outside any test's cgroup,
// its output in files of `dir`; killed after `bound`. Only the pid it
// started is ever signalled.
Ran run_helper(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& dir,
               std::chrono::seconds bound) {
  Ran ran;
  std::string out = dir + "/helper.out", err = dir + "/helper.err";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  // In memrun's own folder: never where the test could have left a module
  // for the helper to import (glibc 2.29+).
  posix_spawn_file_actions_addchdir_np(&fa, dir.c_str());
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    ran.err = fmt::format("cannot start {}: {}", argv[0], std::strerror(rc));
    return ran;
  }
  auto end = std::chrono::steady_clock::now() + bound;
  int status = 0;
  for (;;) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      ran.status = status;
      break;
    }
    if (std::chrono::steady_clock::now() > end) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ran.err = fmt::format("{} took longer than {} s and was killed", argv[0], bound.count());
      return ran;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ran.out = read_proc(out);
  ran.err = read_proc(err);
  return ran;
}

bool ok(const Ran& r) { return r.status >= 0 && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0; }

std::vector<std::string> helper_env(const TestSpec& t) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (!t.env.count(kv.substr(0, kv.find('=')))) env.push_back(kv);
  }
  for (const auto& [k, v] : t.env) env.push_back(k + "=" + v);
  return env;
}

// A shell command of plain words ("python3 x.py"), as words; nullopt when
// the shell would do more than split it.
std::optional<std::vector<std::string>> plain_words(const std::string& command) {
  if (command.find_first_of("'\"\\$`|&;<>()*?[]{}~#\n=") != std::string::npos) return std::nullopt;
  std::vector<std::string> words;
  std::istringstream in(command);
  for (std::string w; in >> w;) words.push_back(w);
  if (words.empty()) return std::nullopt;
  return words;
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

Profiling choose(const TestSpec& t, const std::string& out_base, const std::vector<std::string>& env) {
  Profiling p;
  std::vector<std::string> argv = t.argv;
  if (argv.size() == 3 && fs::path(argv[0]).filename() == "sh" && argv[1] == "-c") {
    auto words = plain_words(argv[2]);
    if (!words) {
      p.why_not = "explain runs a test's program under a profiler itself, and this test's `run` is shell code; "
                  "give `run` as an argv list ([python3, x.py]) or a plain command line to explain it";
      return p;
    }
    argv = *words;
  }
  std::string program = find_executable(argv[0], env);
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
  explicit ProcessSampler(std::string group)
      : group_(std::move(group)), self_(fs::read_symlink("/proc/self/exe", ec_)), thread_([this] { loop(); }) {}
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
    while (!stop_) {
      scan();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  bool in_group(const std::string& pid) const {
    std::istringstream in(read_proc("/proc/" + pid + "/cgroup"));
    for (std::string line; std::getline(in, line);) {
      auto at = line.find("/" + group_);
      if (at != std::string::npos) {
        size_t end = at + 1 + group_.size();
        if (end == line.size() || line[end] == '/') return true;
      }
    }
    return false;
  }
  void scan() {
    DIR* d = ::opendir("/proc");
    if (!d) return;
    while (dirent* e = ::readdir(d)) {
      std::string pid = e->d_name;
      if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos || !in_group(pid)) continue;
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
      auto& p = seen_[std::stoi(pid)];
      // A process that execs keeps its pid: the last command is the one
      // that held the memory, as a rule.
      if (priv >= p.peak_private || p.command.empty()) p.command = shortened(cmdline);
      p.pid = ns_pid;
      p.peak_private = std::max(p.peak_private, priv);
    }
    ::closedir(d);
  }

  std::string group_;
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
std::string read_memray(const Profiling& p, const std::string& out_base, const std::vector<std::string>& env,
                        const std::string& dir, Explanation& e, std::map<int, std::string>& profiled) {
  Ran ran = run_helper({p.python, "-I", "-c", kMemrayReader, out_base + ".bin", std::to_string(kMaxSites * 5)}, env, dir,
                       std::chrono::seconds(300));
  if (!ok(ran)) return "memray's profile could not be read: " + ran.err.substr(0, 2000);
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
    for (const auto& s : f["sites"]) {
      AllocationSite site;
      site.bytes = s.value("bytes", uint64_t{0});
      site.allocations = s.value("allocations", uint64_t{0});
      site.process = fmt::format("{} (pid {})", shortened(command), pid);
      for (const auto& fr : s["stack"]) {
        std::string file = fr[1].get<std::string>();
        bool native = !python_file(file);
        site.stack.push_back({fr[0].get<std::string>(), file == "<unknown>" ? "" : file, fr[2].get<int>(), native});
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
std::string read_heaptrack(const std::string& dir, const std::string& out_base, const std::vector<std::string>& env,
                           Explanation& e, std::map<std::string, std::string>& profiled_commands) {
  std::string print = find_executable("heaptrack_print", env);
  std::string prefix = fs::path(out_base).filename().string() + ".";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    Ran ran = run_helper({print, "-f", entry.path().string(), "-p", "1", "-a", "0", "-T", "0", "-l", "0", "-n",
                          std::to_string(kMaxSites), "-s", "3"},
                         env, dir, std::chrono::seconds(300));
    if (!ok(ran)) return "heaptrack_print could not read " + name + ": " + ran.err.substr(0, 2000);
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

std::string version_of(const Profiling& p, const std::vector<std::string>& env, const std::string& dir) {
  if (p.profiler == "memray") {
    Ran r = run_helper({p.python, "-I", "-c", "import memray; print(memray.__version__)"}, env, dir, std::chrono::seconds(60));
    if (!ok(r)) return "";
    std::string v = r.out.substr(0, r.out.find('\n'));
    return "memray " + v;
  }
  Ran r = run_helper({find_executable("heaptrack", env), "--version"}, env, dir, std::chrono::seconds(60));
  std::string v = r.out.substr(0, r.out.find('\n'));
  return v.empty() ? "heaptrack" : v;  // "heaptrack 1.4.0"
}

// The limit of the profiled run: above the test's, so that a profile of a
// test its limit killed reaches the peak the test was heading for (the
// profiler's own memory is charged too); within what the host has free.
uint64_t profiled_limit(uint64_t limit) {
  uint64_t want = limit * 2 + 64 * MiB;
  std::string mem = read_proc("/proc/meminfo");
  auto at = mem.find("MemAvailable:");
  if (at != std::string::npos) {
    uint64_t avail = std::strtoull(mem.c_str() + at + 13, nullptr, 10) * 1024;
    want = std::min(want, std::max(limit, avail / 10 * 8));
  }
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

Explanation explain_test(const PlannedTest& planned, const TestRecord& r, const std::string& why,
                         cgroup::Backend& backend, const RunOptions& options, const std::string& run_dir) {
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
  e.profiler = version_of(p, env, dir);
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
  Plan plan;
  plan.run_dir = run_dir;
  plan.tests.push_back(run);
  RunOptions ro = options;
  ro.fail_fast = false;
  ro.jobs = 1;
  ro.tick = std::chrono::milliseconds(0);
  ro.budget.reset();
  Catch caught;
  ProcessSampler sampler(group);
  run_plan(plan, backend, ro, caught);
  sampler.stop();
  if (!caught.record) {
    e.status = "failed";
    e.message = "the profiled run did not happen (memrun was interrupted)";
    return e;
  }
  const TestRecord& pr = *caught.record;
  e.outcome = to_string(pr.verdict.outcome);
  e.exit_code = pr.observed.exit_code;
  e.kernel_peak = pr.verdict.peak;
  e.duration_s = pr.observed.duration_s;
  e.at_peak = pr.observed.at_peak;
  if (pr.observed.ending == Ending::not_started) {
    e.status = "failed";
    e.message = "the profiled run could not start: " + pr.observed.start_error;
    return e;
  }

  // Which processes the profiler saw: memray says their pids (as the
  // test's pid namespace numbers them), heaptrack the command it ran.
  std::map<int, std::string> profiled_pids;
  std::map<std::string, std::string> profiled_commands;
  std::string failure = p.profiler == "memray" ? read_memray(p, out_base, env, dir, e, profiled_pids)
                                               : read_heaptrack(dir, fs::path(out_base).filename().string(), env, e,
                                                                profiled_commands);
  std::stable_sort(e.sites.begin(), e.sites.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  if (e.sites.size() > kMaxSites) e.sites.resize(kMaxSites);
  for (auto& s : e.sites)
    s.share = e.kernel_peak ? static_cast<double>(s.bytes) / static_cast<double>(e.kernel_peak) : 0;
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
                            format_size(e.kernel_peak), frame_text(s.stack.empty() ? StackFrame{} : s.stack[s.where]));
  } else {
    e.summary = fmt::format("{} saw {} allocated at its peak, no site", p.profiler, format_size(e.profiled_peak));
  }
  return e;
}

}  // namespace memrun
