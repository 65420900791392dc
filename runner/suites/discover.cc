// A suite's cases, listed by its own tool (GoogleTest, pytest, ctest) under
// the suite's limit, and read as they come.
// Long room: the three tools' listings share the bounded, streamed reading of
// a tool's output; each tool's own reader is a function of its own.
#include "runner/suites/discover.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "cgroup/error.h"
#include "runner/base/bounded_json.h"
#include "runner/base/error.h"
#include "runner/base/shell.h"
#include "runner/base/units.h"
#include "runner/base/utf8.h"
#include "runner/launch/child.h"
#include "runner/launch/shield.h"
#include "runner/spec/spec.h"

extern char** environ;

namespace memrun {
namespace {

/// An fd closed when it goes out of scope.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

/// Listings so far in this process, to name their groups.
int listings = 0;

/// What a listing tool printed, and how it ended.
struct Listing {
  int status = 0;  ///< wait status
  uint64_t oom_kills = 0;  ///< in the listing's group
  std::string out, err, cases;  ///< cases: what the pytest plugin wrote (read whole unless streamed)
  Fd out_fd, cases_fd;  ///< streamed: the memory files, read a line at a time (Lines)
  uint64_t cut = 0;  ///< the size of an output past kMaxListing (only its end is kept)
};

// A listing is read a line at a time, never whole: memrun's memory does not
// grow with it. A million GoogleTest cases are some 40 MiB; a tool that
// prints more than this is broken (or hostile). What it wrote is in memory
// files charged to the listing's group, under the suite's limit.
constexpr uint64_t kMaxListing = 128 * MiB;
// A name a case can run under fits one argument of execve (128 KiB).
constexpr size_t kMaxLine = 1 * MiB;

// The lines of a memory file from its start, one at a time.
class Lines {
 public:
  explicit Lines(int fd) : fd_(fd) {}
  /// The next line (without its newline); false at the end. Throws
  /// Error(bad_input) for a line longer than kMaxLine.
  bool next(std::string& line) {
    line.clear();
    for (;;) {
      if (at_ == got_) {
        ssize_t n = ::pread(fd_, buf_, sizeof buf_, static_cast<off_t>(offset_));
        if (n <= 0) return !line.empty();
        offset_ += static_cast<uint64_t>(n), at_ = 0, got_ = static_cast<size_t>(n);
      }
      const char* end = static_cast<const char*>(std::memchr(buf_ + at_, '\n', got_ - at_));
      size_t take = end ? static_cast<size_t>(end - (buf_ + at_)) : got_ - at_;
      if (line.size() + take > kMaxLine)
        throw Error(Category::bad_input, "a line of its listing is longer than " + format_size(kMaxLine) +
                                             ", longer than any case name a program can be given");
      line.append(buf_ + at_, take);
      at_ += take;
      if (end) {
        ++at_;
        return true;
      }
    }
  }

 private:
  int fd_;
  uint64_t offset_ = 0;
  char buf_[65536];
  size_t at_ = 0, got_ = 0;
};

// The last 4 KiB of a memory file, for an error message.
std::string last_of(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return "";
  off_t from = std::max<off_t>(0, st.st_size - 4096);
  std::string text(static_cast<size_t>(st.st_size - from), '\0');
  ssize_t n = ::pread(fd, text.data(), text.size(), from);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return text;
}

// What the tool wrote to `fd`; past kMaxListing only its last 4 KiB (for
// the error), with `*cut` set to its size.
std::string read_back(int fd, uint64_t* cut) {
  std::string text;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) > kMaxListing) {
    *cut = std::max(*cut, static_cast<uint64_t>(st.st_size));
    ::lseek(fd, st.st_size - 4096, SEEK_SET);
  } else {
    ::lseek(fd, 0, SEEK_SET);
  }
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  return text;
}

// The last few lines of a tool's output, indented, for an error message.
std::string tail(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string out;
  for (size_t i = lines.size() > 12 ? lines.size() - 12 : 0; i < lines.size(); ++i) out += "\n    | " + lines[i];
  return out;
}

// Runs a suite's tool once, its output into memory files (a listing is a
// few KiB to a few MiB), with a timeout and, given a backend, in a group of
// its own under the suite's memory limit: a collection that imports a
// library which blows up is reported as an OOM kill, not as a host in
// trouble. `with_cases_fd` adds a third memory file, inherited by the tool
// (the pytest plugin writes its cases there, out of reach of pytest's own
// output capture; its number is in MEMRUN_PYTEST_FD).
// Long: one listing start to end (environment, group, start, wait, clean-up),
// each way it fails said beside the step it fails at.
Listing run_tool(const SuiteSource& s, const std::vector<std::string>& argv, std::map<std::string, std::string> env,
                 bool with_cases_fd, cgroup::Backend* backend, bool streamed = false) {
  auto memfd = [](const char* name, unsigned flags) {
    int fd = ::memfd_create(name, flags);
    if (fd < 0) throw_errno(Category::system, "memfd_create");
    return Fd(fd);
  };
  Fd out = memfd("memrun-list-out", MFD_CLOEXEC), err = memfd("memrun-list-err", MFD_CLOEXEC);
  // Not close-on-exec: the tool inherits it (no test runs while suites are
  // listed, so no other process gets it).
  Fd cases = with_cases_fd ? memfd("memrun-list-cases", 0) : Fd();
  if (with_cases_fd) env["MEMRUN_PYTEST_FD"] = std::to_string(cases.get());
  Command cmd;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    if (!env.count(key) && (s.service_manager || !names_the_users_bus(key))) cmd.env.push_back(kv);
  }
  // Listing runs what a case runs (pytest imports the test modules): it is
  // kept from the service managers the same way.
  if (!s.service_manager) keep_from_service_managers(cmd);
  for (const auto& [k, v] : env) cmd.env.push_back(k + "=" + v);
  cmd.path = find_executable(argv[0], cmd.env);
  if (cmd.path.empty())
    throw Error(Category::bad_input, "suite '" + s.suite + "': cannot run " + argv[0] + ": it is not on the PATH");
  cmd.argv = argv;
  cmd.cwd = s.cwd;
  cmd.stdout_fd = out.get(), cmd.stderr_fd = err.get();
  std::unique_ptr<cgroup::Group> group;
  if (backend) group = backend->create("list-" + std::to_string(++listings), {s.memory, {}, 0, kDefaultPids});
  Child child;
  try {
    child = launch(cmd, group ? group->placement() : cgroup::Placement{});
  } catch (const Error& e) {
    throw Error(Category::bad_input, "suite '" + s.suite + "': cannot list its cases: " + e.what());
  }
  Fd pidfd(child.pidfd);
  pollfd p{pidfd.get(), POLLIN, 0};
  int ready;
  do {  // (a signal memrun handles later must not pass for the timeout)
    ready = ::poll(&p, 1, static_cast<int>(s.timeout.count()));
  } while (ready < 0 && errno == EINTR);
  bool ended = ready == 1;
  // Everything the tool started goes with it (pytest may start workers).
  if (group) group->kill_all_blocking();
  else if (!ended) ::kill(child.pid, SIGKILL);
  Listing l;
  while (::waitpid(child.pid, &l.status, 0) < 0 && errno == EINTR) {
  }
  if (group) {
    l.oom_kills = group->finish().oom_kills;
    group->destroy_blocking();
  }
  l.err = read_back(err.get(), &l.cut);
  if (!streamed) {
    l.out = read_back(out.get(), &l.cut);
    if (with_cases_fd) l.cases = read_back(cases.get(), &l.cut);
  } else {
    // Only the end, for the errors below; the rest is read as it is parsed.
    for (Fd* f : {&out, &cases}) {
      struct stat st {};
      if (f->get() >= 0 && ::fstat(f->get(), &st) == 0 && static_cast<uint64_t>(st.st_size) > kMaxListing)
        l.cut = std::max(l.cut, static_cast<uint64_t>(st.st_size));
    }
    l.out = last_of(out.get());
    l.out_fd = std::move(out), l.cases_fd = std::move(cases);
  }
  if (!ended)
    throw Error(Category::bad_input, "suite '" + s.suite + "': listing its cases with " + argv[0] + " took longer than " +
                                         format_duration(static_cast<double>(s.timeout.count()) / 1000) + "; it was killed" + tail(l.out + l.err));
  if (l.oom_kills)
    throw Error(Category::bad_input, "suite '" + s.suite + "': listing its cases with " + argv[0] +
                                         " was OOM-killed by the kernel under the suite's memory limit (" + format_size(s.memory) +
                                         "): raise the suite's 'memory' (what it lists runs in as much)" + tail(l.out + l.err));
  if (l.cut)
    throw Error(Category::bad_input, "suite '" + s.suite + "': listing its cases with " + argv[0] + " printed " +
                                         format_size(l.cut) + ", more than the " + format_size(kMaxListing) +
                                         " any listing needs; memrun read none of it (is it the right program?)" +
                                         tail(l.out + l.err));
  return l;
}

std::string how_it_ended(int status) {
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + std::to_string(WTERMSIG(status));
  return "exited with " + std::to_string(WEXITSTATUS(status));
}

// A word of a command for a POSIX shell: as it is when nothing in it is
// special, else quoted.
std::string shell_word(const std::string& word) {
  bool plain = !word.empty() && word.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                       "0123456789_@%+=:,./-") == std::string::npos;
  return plain ? word : shell_quote(word);
}

std::string shell_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + shell_word(a);
  return out;
}

bool excluded(const SuiteSource& s, const std::string& name) {
  for (const auto& glob : s.exclude)
    if (::fnmatch(glob.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

// Every case name of a streamed --gtest_list_tests, in order.
void each_gtest_name(const Listing& l, const std::function<void(const GtestName&)>& use) {
  GtestListParser parser([&](GtestName n) { use(n); });
  Lines lines(l.out_fd.get());
  for (std::string line; lines.next(line);) parser.feed(std::move(line));
}

// How often each name listed more than once (not disabled) is listed: the
// names' hashes first (8 bytes a case), then the names of equal hashes.
std::map<std::string, int> listed_twice(const Listing& l) {
  auto hash = [](const std::string& name) { return std::hash<std::string>{}(name); };
  std::vector<uint64_t> hashes;
  each_gtest_name(l, [&](const GtestName& n) {
    if (!n.disabled) hashes.push_back(hash(n.name));
  });
  std::sort(hashes.begin(), hashes.end());
  std::set<uint64_t> twice;
  for (size_t i = 1; i < hashes.size(); ++i)
    if (hashes[i] == hashes[i - 1]) twice.insert(hashes[i]);
  std::map<std::string, int> count;
  if (!twice.empty())
    each_gtest_name(l, [&](const GtestName& n) {
      if (!n.disabled && twice.count(hash(n.name))) ++count[n.name];
    });
  return count;
}

// Cases counted as they are kept: those the suite would run (not
// disabled, not excluded), and, of those, the selection's, each under the
// name it runs as (usable_name), handed on as it comes (SuiteSource::found)
// or kept.
struct Kept {
  size_t runnable = 0;
  std::vector<Case> cases;
  void add(const SuiteSource& s, Case c, bool selected = true) {
    if (!c.disabled) ++runnable;
    c.name = usable_name(c.name);
    if (selected && s.keep && !s.keep(s.suite + "/" + c.name)) return;
    if (s.found) s.found(std::move(c));
    else cases.push_back(std::move(c));
  }
};

// The listing is read three times, never held: which names may come twice
// (a hash of each, 8 bytes a case), how often those come, then the cases,
// each kept or dropped as it is read.
Kept gtest_cases(const SuiteSource& s, cgroup::Backend* backend) {
  if (::access(s.path.c_str(), X_OK) != 0)
    throw Error(Category::bad_input, "suite '" + s.suite + "': gtest: " + s.path +
                                         " is not an executable file (build the test binary first; a relative path is "
                                         "relative to the spec's folder)");
  auto l = run_tool(s, {s.path, "--gtest_list_tests"}, s.env, false, backend, true);
  if (!WIFEXITED(l.status) || WEXITSTATUS(l.status) != 0)
    throw Error(Category::bad_input, "suite '" + s.suite + "': " + s.path + " --gtest_list_tests " + how_it_ended(l.status) +
                                         "; is it a GoogleTest binary?" + tail(l.out + l.err));
  std::map<std::string, int> count, seen;
  try {
    count = listed_twice(l);
  } catch (const Error& e) {
    throw Error(Category::bad_input, "suite '" + s.suite + "': " + s.path + " --gtest_list_tests: " + e.what());
  }
  Kept kept;
  each_gtest_name(l, [&](const GtestName& n) {
    Case c{n.name, {s.path, "--gtest_filter=" + n.name}, "", "", {}, {}};
    c.disabled = n.disabled;
    // A name GoogleTest lists twice (two fixtures of one name, which it
    // fails on purpose) selects both: the sharding variables pick the k-th
    // of those the filter selects, so each runs alone, the second and
    // later under "NAME#k".
    // The verdict comes from googletest's XML results (GTEST_OUTPUT, set
    // when the case starts): inherited sharding variables would run no
    // test at all, and GTEST_REPEAT would leave the last repetition's
    // results alone. The log reads plainly (no colour, every case line).
    c.env = {{"GTEST_COLOR", "no"},        {"GTEST_BRIEF", "0"},      {"GTEST_TOTAL_SHARDS", "1"},
             {"GTEST_SHARD_INDEX", "0"}, {"GTEST_REPEAT", "1"}};
    if (auto it = count.find(n.name); !n.disabled && it != count.end() && it->second > 1) {
      int k = seen[n.name]++;
      if (k > 0) c.name += "#" + std::to_string(k + 1);
      c.env["GTEST_TOTAL_SHARDS"] = std::to_string(it->second);
      c.env["GTEST_SHARD_INDEX"] = std::to_string(k);
    }
    if (excluded(s, c.name)) return;
    std::string env;
    for (const auto& [k, v] : c.env) env += k + "=" + v + " ";
    c.command = env + shell_line(c.argv);
    // GoogleTest's own word on the case, as its XML results say it: a
    // failure outside every test (an environment's, an ad hoc one) makes
    // the program exit 1 but fails no case.
    c.rules.tool = "GoogleTest";
    c.rules.gtest_results = true;
    kept.add(s, std::move(c));
  });
  return kept;
}

Kept ctest_cases(const SuiteSource& s, cgroup::Backend* backend) {
  if (::access((s.path + "/CTestTestfile.cmake").c_str(), R_OK) != 0)
    throw Error(Category::bad_input, "suite '" + s.suite + "': ctest: " + s.path +
                                         " is not a CMake build tree with tests (no CTestTestfile.cmake: configure it with "
                                         "enable_testing() first)");
  auto l = run_tool(s, {"ctest", "--test-dir", s.path, "--show-only=json-v1"}, s.env, false, backend);
  if (!WIFEXITED(l.status) || WEXITSTATUS(l.status) != 0)
    throw Error(Category::bad_input, "suite '" + s.suite + "': ctest --show-only=json-v1 " + how_it_ended(l.status) +
                                         tail(l.out + l.err));
  auto cases = parse_ctest_json(l.out);
  // Not filtered as read: a case the selection picks brings the fixtures
  // it requires (plan.cc, as ctest -R does).
  Kept kept;
  for (auto& c : cases) {
    if (c.cwd.empty()) c.cwd = s.path;  // ctest runs a test in its build folder
    // Out, whatever needs it: ctest -E removes a fixture's setup as well.
    if (!excluded(s, c.name)) kept.add(s, std::move(c), false);
  }
  return kept;
}

// What a failed listing's "No module named 'X'" means: pytest itself is
// missing, or a module the tests or a plugin import.
std::string missing_module_hint(const SuiteSource& s, const std::string& err) {
  const std::string marker = "No module named '";
  auto at = err.rfind(marker);
  if (at == std::string::npos) return "; pytest says why above (a collection error, a bad argument)";
  auto end = err.find('\'', at + marker.size());
  std::string module = err.substr(at + marker.size(), end == std::string::npos ? 0 : end - at - marker.size());
  if (module == "pytest" || module.rfind("pytest.", 0) == 0 || module == "_pytest")
    return "; pytest is not installed for " + s.python + " (the suite's `python:` names the interpreter that has it)";
  return "; " + s.python + " cannot import the module '" + module +
         "' (a dependency of the tests, a conftest or a -p plugin): install it for " + s.python;
}

// One case from a line of the plugin's listing (not an error, not excluded).
Case pytest_case(const SuiteSource& s, const nlohmann::ordered_json& j) {
  std::string id = j["nodeid"];
  // Every argument of the suite, as pytest alone gets them (its paths
  // too: they decide the rootdir, ini file and conftests); the plugin
  // collects only the case.
  Case c{id, {s.python, "-c", pytest_plugin(), "run", id}, j.value("arg", id), "", {}, {}};
  c.argv.insert(c.argv.end(), s.args.begin(), s.args.end());
  // Each value as the JSON the plugin wrote (a string, a number, a list,
  // a mapping): read_marks reads it as YAML, through the spec's table.
  const nlohmann::ordered_json marks = j.value("memrun", nlohmann::ordered_json::object());
  if (marks.is_object())
    for (const auto& [k, v] : marks.items()) c.marks[k] = v.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  c.rules.tool = "pytest";
  c.rules.outcome_file = true;
  // Where the test is (file:line), for an error in its marker's values.
  if (j.contains("where") && j["where"].is_string() && !c.marks.empty()) c.marks["@where"] = j["where"];
  // A module pytest skipped as it collected it: pytest counts one skip;
  // so does memrun, without running it (its command shows the skip).
  if (j.contains("skipped") && j["skipped"].is_string())
    c.skipped = "pytest skipped it as it collected it: " + j["skipped"].get<std::string>() +
                (j.contains("where") && j["where"].is_string() ? " (" + j["where"].get<std::string>() + ")" : "");
  return c;
}

// Whether a line of the plugin's streamed listing holds `text`.
bool any_line_holds(const Listing& l, const std::string& text) {
  Lines lines(l.cases_fd.get());
  for (std::string line; lines.next(line);)
    if (line.find(text) != std::string::npos) return true;
  return false;
}

// The options line the plugin ends its answer with: without it, what ran
// was not a Python with pytest (python: /bin/true). Read before the cases,
// so that each is whole (its command shown with them) as it is read.
std::vector<std::string> pytest_options(const SuiteSource& s, const Listing& l) {
  Lines lines(l.cases_fd.get());
  for (std::string line; lines.next(line);)
    if (line.rfind("{\"options\"", 0) == 0)
      if (auto j = parse_json(line, "its plugin's line"); j.is_object() && j["options"].is_array())
        return j["options"].get<std::vector<std::string>>();
  throw Error(Category::bad_input, s.python + " ran memrun's pytest plugin, which never answered: is " + s.python +
                                       " a Python interpreter with pytest? (the suite's `python:`)" + tail(l.out + l.err));
}

Kept pytest_cases(const SuiteSource& s, cgroup::Backend* backend) {
  std::vector<std::string> argv = {s.python, "-c", pytest_plugin(), "collect"};
  argv.insert(argv.end(), s.args.begin(), s.args.end());
  auto l = run_tool(s, argv, s.env, true, backend, true);
  std::string what = s.python + " -m pytest --collect-only";
  for (const auto& a : s.args) what += " " + a;
  // pytest says 5 when it collected nothing, also when every module was
  // skipped as it was collected: pytest alone fails such a run too.
  if (WIFEXITED(l.status) && WEXITSTATUS(l.status) == 5)
    throw Error(Category::bad_input, "suite '" + s.suite + "': pytest collected no tests (" + what +
                                         "); check its paths and -m/-k selection" +
                                         (any_line_holds(l, "\"skipped\": ")
                                              ? ", and what its modules need (pytest skipped every one as it "
                                                "collected it: pytest -rs says why)"
                                              : "") +
                                         tail(l.out + l.err));
  if (!WIFEXITED(l.status) || WEXITSTATUS(l.status) != 0)
    throw Error(Category::bad_input, "suite '" + s.suite + "': " + what + " " + how_it_ended(l.status) +
                                         missing_module_hint(s, l.out + l.err) + tail(l.out + l.err));
  Kept kept;
  try {
    // Shown, and rerun by hand: pytest with the suite's options and the case
    // as a path from the suite's folder.
    std::vector<std::string> shown = {s.python, "-m", "pytest"};
    auto options = pytest_options(s, l);
    shown.insert(shown.end(), options.begin(), options.end());
    Lines lines(l.cases_fd.get());
    for (std::string line; lines.next(line);) {
      auto j = parse_json(line, "its plugin's line");
      if (j.is_object() && j.contains("options") && j["options"].is_array()) continue;
      if (!j.is_object() || !j.contains("nodeid") || !j["nodeid"].is_string())
        throw Error(Category::bad_input, "memrun's pytest plugin wrote something else: " + line);
      std::string id = j["nodeid"];
      if (j.contains("error"))
        throw Error(Category::bad_input, id + ": " + (j["error"].is_string() ? j["error"].get<std::string>() : ""));
      if (excluded(s, id)) continue;
      Case c = pytest_case(s, j);
      shown.push_back(c.command);
      c.command = shell_line(shown);
      shown.pop_back();
      kept.add(s, std::move(c));
    }
  } catch (const Error& e) {
    throw Error(Category::bad_input, "suite '" + s.suite + "': " + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw Error(Category::bad_input, "suite '" + s.suite + "': memrun's pytest plugin wrote something else (" + e.what() + ")");
  }
  return kept;
}

bool disabled(const std::string& name) {
  return name.rfind("DISABLED_", 0) == 0 || name.find("/DISABLED_") != std::string::npos;
}

}  // namespace

void GtestListParser::feed(std::string line) {
  // Suite lines end in '.', case lines are indented by two spaces; either
  // may end in a comment ("  # GetParam() = 3", "  # TypeParam = int").
  // Anything else (a program that prints failures before its listing) is
  // no suite: the lines under it are not cases.
  if (auto hash = line.find("  #"); hash != std::string::npos) line.erase(hash);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
  if (line.empty()) return;
  if (line[0] != ' ') {
    bool is_suite = line.back() == '.' && line.find(' ') == std::string::npos;
    suite_ = is_suite ? line : "";
    suite_disabled_ = is_suite && disabled(suite_);
    return;
  }
  if (suite_.empty() || line.rfind("  ", 0) != 0 || line[2] == ' ') return;
  std::string name = line.substr(2);
  if (name.find(' ') != std::string::npos) return;
  found_({suite_ + name, suite_disabled_ || disabled(name)});
}

std::vector<GtestName> parse_gtest_list(const std::string& text) {
  std::vector<GtestName> names;
  GtestListParser parser([&](GtestName n) { names.push_back(std::move(n)); });
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) parser.feed(std::move(line));
  return names;
}

namespace {

// ctest's ENVIRONMENT_MODIFICATION (3.22+): "NAME=OP:VALUE" entries, in
// order, on top of ENVIRONMENT and memrun's own environment. `unset:` is
// taken as an empty value (a case's env only sets).
void modify_environment(const std::vector<std::string>& entries, std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> before = env;  // reset: ENVIRONMENT's, else the inherited value
  auto current = [&](const std::string& name) -> std::string {
    if (auto it = env.find(name); it != env.end()) return it->second;
    const char* inherited = std::getenv(name.c_str());
    return inherited ? inherited : "";
  };
  for (const auto& e : entries) {
    auto eq = e.find('='), colon = e.find(':', eq == std::string::npos ? 0 : eq);
    if (eq == std::string::npos || colon == std::string::npos) continue;
    std::string name = e.substr(0, eq), op = e.substr(eq + 1, colon - eq - 1), value = e.substr(colon + 1);
    std::string now = current(name);
    auto joined = [&](const std::string& sep, bool append) {
      return now.empty() ? value : append ? now + sep + value : value + sep + now;
    };
    if (op == "reset") {
      if (auto it = before.find(name); it != before.end()) env[name] = it->second;
      else env.erase(name);
    } else if (op == "set") env[name] = value;
    else if (op == "unset") env[name] = "";
    else if (op == "string_append") env[name] = now + value;
    else if (op == "string_prepend") env[name] = value + now;
    else if (op == "path_list_append") env[name] = joined(":", true);
    else if (op == "path_list_prepend") env[name] = joined(":", false);
    else if (op == "cmake_list_append") env[name] = joined(";", true);
    else if (op == "cmake_list_prepend") env[name] = joined(";", false);
  }
}

// A property's value as a list (ctest writes one value as a string).
std::vector<std::string> strings_of(const nlohmann::ordered_json& v) {
  std::vector<std::string> out;
  if (v.is_string()) out.push_back(v.get<std::string>());
  if (v.is_array())
    for (const auto& e : v)
      if (e.is_string()) out.push_back(e.get<std::string>());
  return out;
}

// One property of a ctest test, as `ctest --show-only=json-v1` lists it.
void read_ctest_property(const std::string& key, const nlohmann::ordered_json& v, Case& c) {
  if (key == "WORKING_DIRECTORY" && v.is_string()) c.cwd = v.get<std::string>();
  if (key == "DISABLED" && v.is_boolean()) c.disabled = v.get<bool>();
  if (key == "WILL_FAIL" && v.is_boolean()) c.rules.will_fail = v.get<bool>();
  if (key == "SKIP_RETURN_CODE" && v.is_number_integer()) c.rules.skip_exit_code = v.get<int>();
  if (key == "PASS_REGULAR_EXPRESSION") c.rules.pass_regex = strings_of(v);
  if (key == "FAIL_REGULAR_EXPRESSION") c.rules.fail_regex = strings_of(v);
  if (key == "SKIP_REGULAR_EXPRESSION") c.rules.skip_regex = strings_of(v);
  // ctest kills a test at TIMEOUT seconds and fails it; 0 is none.
  if (key == "TIMEOUT" && v.is_number() && v.get<double>() > 0)
    c.marks["timeout"] = std::to_string(static_cast<long long>(std::ceil(v.get<double>() * 1000))) + "ms";
  if (key == "DEPENDS") c.order.depends = strings_of(v);
  if (key == "FIXTURES_SETUP") c.order.fixtures_setup = strings_of(v);
  if (key == "FIXTURES_CLEANUP") c.order.fixtures_cleanup = strings_of(v);
  if (key == "FIXTURES_REQUIRED") c.order.fixtures_required = strings_of(v);
  if (key == "RESOURCE_LOCK") c.order.resource_locks = strings_of(v);
  if (key == "RUN_SERIAL" && v.is_boolean()) c.order.run_serial = v.get<bool>();
  if (key == "LABELS") c.labels = strings_of(v);
  if (key == "PROCESSORS" && v.is_number_integer()) c.order.processors = v.get<int>();
  if (key == "ENVIRONMENT")
    for (const auto& s : strings_of(v))
      if (auto eq = s.find('='); eq != std::string::npos) c.env[s.substr(0, eq)] = s.substr(eq + 1);
  // ctest reports a test whose REQUIRED_FILES are missing Not Run. An
  // absolute path is checked (CMake writes them so); a relative one is
  // ctest's to resolve, from a folder this listing does not know.
  if (key == "REQUIRED_FILES" && c.not_runnable.empty())
    for (const auto& file : strings_of(v))
      if (!file.empty() && file[0] == '/' && ::access(file.c_str(), F_OK) != 0) {
        c.not_runnable = "not run: its REQUIRED_FILES " + file + " is missing; ctest reports it Not Run";
        break;
      }
}

}  // namespace

std::vector<Case> parse_ctest_json(const std::string& text) {
  nlohmann::ordered_json j;
  try {
    j = parse_json(text, "ctest --show-only=json-v1");
  } catch (const Error& e) {
    // Past a limit: say which; not JSON at all: an old ctest.
    if (std::string(e.what()).find(": holds ") != std::string::npos) throw;
  }
  if (!j.is_object() || !j.contains("tests") || !j["tests"].is_array())
    throw Error(Category::bad_input, "ctest --show-only=json-v1 did not print its JSON (CMake 3.14 or later is needed)");
  std::vector<Case> cases;
  for (const auto& t : j["tests"]) {
    Case c;
    c.name = t.value("name", "");
    c.rules.tool = "ctest";
    // ctest lists a test whose executable it cannot find without a
    // command, runs the others, and reports it "Not Run" (a failure).
    if (!t.contains("command") || !t["command"].is_array() || t["command"].empty())
      c.not_runnable = "not run: ctest finds no executable for it (was its target built?); ctest reports it Not Run";
    else
      for (const auto& a : t["command"]) c.argv.push_back(a.is_string() ? a.get<std::string>() : a.dump());
    c.command = shell_line(c.argv);
    for (const auto& p : t.value("properties", nlohmann::ordered_json::array()))
      if (p.contains("value")) read_ctest_property(p.value("name", ""), p["value"], c);
    // After ENVIRONMENT, whatever order the properties came in.
    for (const auto& p : t.value("properties", nlohmann::ordered_json::array()))
      if (p.value("name", "") == "ENVIRONMENT_MODIFICATION" && p.contains("value"))
        modify_environment(strings_of(p["value"]), c.env);
    cases.push_back(std::move(c));
  }
  return cases;
}

std::string usable_name(const std::string& name) { return storable(name); }

std::vector<Case> discover(const SuiteSource& source, cgroup::Backend* backend) {
  Kept kept;
  switch (source.kind) {
    case SuiteSource::gtest: kept = gtest_cases(source, backend); break;
    case SuiteSource::ctest: kept = ctest_cases(source, backend); break;
    case SuiteSource::pytest: kept = pytest_cases(source, backend); break;
  }
  // (A name that is no UTF-8 text, or holds control characters, cannot be
  // written to a report, JUnit or a terminal as it is: the case runs under
  // its name with those bytes as \xNN (Kept::add); its command keeps the
  // real name.)
  // (None of them selected is no error: the selection may pick tests elsewhere.)
  if (kept.runnable == 0)
    throw Error(Category::bad_input, "suite '" + source.suite + "' has no cases to run (all disabled, excluded, or none found)");
  return std::move(kept.cases);
}

SuiteLister::~SuiteLister() {
  if (!backend_) return;
  try {
    backend_->close();
  } catch (const cgroup::Failure&) {  // 'memrun gc' removes what is left
  }
}

std::vector<Case> SuiteLister::operator()(const SuiteSource& source) {
  if (!opened_) {
    opened_ = true;
    auto o = options_;
    o.run_name = cgroup::run_name(cgroup::run_id("list"));
    o.seal = false;  // a listing is the user's own tool, not a test to judge
    try {
      backend_ = cgroup::open(o);
    } catch (const cgroup::Failure& e) {
      if (e.kind() != cgroup::Failure::Kind::cannot_enforce) throw;
    }
  }
  return discover(source, backend_.get());
}

}  // namespace memrun
