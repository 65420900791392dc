#include "runner/discover.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runner/error.h"
#include "runner/units.h"

extern char** environ;

namespace memrun {
namespace {

/// What a listing tool printed, and how it ended.
struct Listing {
  int status = 0;  ///< wait status
  std::string out, err, fd3;
};

std::string read_back(int fd) {
  std::string text;
  ::lseek(fd, 0, SEEK_SET);
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
// few KiB to a few MiB), with a timeout. fd 3 is a third memory file when
// `with_fd3` (the pytest plugin writes its cases there, out of reach of
// pytest's own output capture).
Listing run_tool(const SuiteSource& s, const std::vector<std::string>& argv,
                 const std::map<std::string, std::string>& env, bool with_fd3) {
  int out = ::memfd_create("memrun-list-out", MFD_CLOEXEC), err = ::memfd_create("memrun-list-err", MFD_CLOEXEC);
  int fd3 = with_fd3 ? ::memfd_create("memrun-list-cases", MFD_CLOEXEC) : -1;
  if (out < 0 || err < 0 || (with_fd3 && fd3 < 0)) throw_errno(kExitUsage, "memfd_create");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out, 1);
  posix_spawn_file_actions_adddup2(&actions, err, 2);
  if (fd3 >= 0) posix_spawn_file_actions_adddup2(&actions, fd3, 3);
  posix_spawn_file_actions_addchdir_np(&actions, s.cwd.c_str());
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (!env.count(kv.substr(0, kv.find('=')))) envs.push_back(kv);
  }
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  for (const auto& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cargv.push_back(nullptr);
  cenv.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, argv[0].c_str(), &actions, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    for (int fd : {out, err, fd3})
      if (fd >= 0) ::close(fd);
    throw Error(kExitUsage, "suite '" + s.suite + "': cannot run " + argv[0] + ": " + std::strerror(rc));
  }
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  pollfd p{pidfd, POLLIN, 0};
  int ready;
  do {  // (a signal memrun handles later must not pass for the timeout)
    ready = pidfd >= 0 ? ::poll(&p, 1, static_cast<int>(s.timeout.count())) : 0;
  } while (ready < 0 && errno == EINTR);
  bool ended = ready == 1;
  if (!ended) ::kill(pid, SIGKILL);
  Listing l;
  while (::waitpid(pid, &l.status, 0) < 0 && errno == EINTR) {
  }
  if (pidfd >= 0) ::close(pidfd);
  l.out = read_back(out), l.err = read_back(err);
  if (fd3 >= 0) l.fd3 = read_back(fd3);
  for (int fd : {out, err, fd3})
    if (fd >= 0) ::close(fd);
  if (!ended)
    throw Error(kExitUsage, "suite '" + s.suite + "': listing its cases with " + argv[0] + " took longer than " +
                                format_duration(static_cast<double>(s.timeout.count()) / 1000) + "; it was killed" + tail(l.out + l.err));
  return l;
}

std::string how_it_ended(int status) {
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + std::to_string(WTERMSIG(status));
  return "exited with " + std::to_string(WEXITSTATUS(status));
}

std::vector<Case> gtest_cases(const SuiteSource& s) {
  if (::access(s.path.c_str(), X_OK) != 0)
    throw Error(kExitUsage, "suite '" + s.suite + "': gtest: " + s.path +
                                " is not an executable file (build the test binary first; a relative path is "
                                "relative to the spec's folder)");
  auto l = run_tool(s, {s.path, "--gtest_list_tests"}, s.env, false);
  if (!WIFEXITED(l.status) || WEXITSTATUS(l.status) != 0)
    throw Error(kExitUsage, "suite '" + s.suite + "': " + s.path + " --gtest_list_tests " + how_it_ended(l.status) +
                                "; is it a GoogleTest binary?" + tail(l.out + l.err));
  std::vector<Case> cases;
  for (const auto& name : parse_gtest_list(l.out))
    cases.push_back({name, {s.path, "--gtest_filter=" + name}, s.path + " --gtest_filter=" + name, "", {}, {}});
  return cases;
}

std::vector<Case> ctest_cases(const SuiteSource& s) {
  if (::access((s.path + "/CTestTestfile.cmake").c_str(), R_OK) != 0)
    throw Error(kExitUsage, "suite '" + s.suite + "': ctest: " + s.path +
                                " is not a CMake build tree with tests (no CTestTestfile.cmake: configure it with "
                                "enable_testing() first)");
  auto l = run_tool(s, {"ctest", "--test-dir", s.path, "--show-only=json-v1"}, s.env, false);
  if (!WIFEXITED(l.status) || WEXITSTATUS(l.status) != 0)
    throw Error(kExitUsage, "suite '" + s.suite + "': ctest --show-only=json-v1 " + how_it_ended(l.status) +
                                tail(l.out + l.err));
  auto cases = parse_ctest_json(l.out);
  for (auto& c : cases)
    if (c.cwd.empty()) c.cwd = s.path;  // ctest runs a test in its build folder
  return cases;
}

std::vector<Case> pytest_cases(const SuiteSource& s) {
  std::vector<std::string> argv = {s.python, "-c", pytest_plugin(), "collect"};
  argv.insert(argv.end(), s.args.begin(), s.args.end());
  auto env = s.env;
  env["MEMRUN_PYTEST_FD"] = "3";
  auto l = run_tool(s, argv, env, true);
  std::string what = s.python + " -m pytest --collect-only";
  for (const auto& a : s.args) what += " " + a;
  if (WIFEXITED(l.status) && WEXITSTATUS(l.status) == 5)
    throw Error(kExitUsage, "suite '" + s.suite + "': pytest collected no tests (" + what +
                                "); check its paths and -m/-k selection" + tail(l.out + l.err));
  if (!WIFEXITED(l.status) || WEXITSTATUS(l.status) != 0) {
    std::string hint = l.err.find("No module named") != std::string::npos
                           ? "; is pytest installed for " + s.python + "? (the suite's `python:` names another)"
                           : "; pytest says why above (a collection error, a bad argument)";
    throw Error(kExitUsage, "suite '" + s.suite + "': " + what + " " + how_it_ended(l.status) + hint +
                                tail(l.out + l.err));
  }
  std::vector<Case> cases;
  std::istringstream lines(l.fd3);
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("nodeid"))
      throw Error(kExitUsage, "suite '" + s.suite + "': memrun's pytest plugin wrote something else: " + line);
    std::string id = j["nodeid"];
    if (j.contains("error"))
      throw Error(kExitUsage, "suite '" + s.suite + "': " + id + ": " + j["error"].get<std::string>());
    Case c{id, {s.python, "-c", pytest_plugin(), "run", id}, s.python + " -m pytest " + id, "", {}, {}};
    for (const auto& [k, v] : j["memrun"].items()) c.marks[k] = v.get<std::string>();
    cases.push_back(std::move(c));
  }
  return cases;
}

bool disabled(const std::string& name) {
  return name.rfind("DISABLED_", 0) == 0 || name.find("/DISABLED_") != std::string::npos;
}

}  // namespace

std::vector<std::string> parse_gtest_list(const std::string& text) {
  // Suite lines end in '.', case lines are indented by two spaces; either
  // may end in a comment ("  # GetParam() = 3", "  # TypeParam = int").
  std::vector<std::string> names;
  std::string suite;
  bool suite_disabled = false;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (auto hash = line.find("  #"); hash != std::string::npos) line.erase(hash);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (line.empty()) continue;
    if (line[0] != ' ') {
      suite = line;
      suite_disabled = disabled(suite);
      continue;
    }
    std::string name = line.substr(line.find_first_not_of(' '));
    if (suite.empty() || suite_disabled || disabled(name)) continue;
    names.push_back(suite + name);
  }
  return names;
}

std::vector<Case> parse_ctest_json(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.contains("tests") || !j["tests"].is_array())
    throw Error(kExitUsage, "ctest --show-only=json-v1 did not print its JSON (CMake 3.14 or later is needed)");
  std::vector<Case> cases;
  for (const auto& t : j["tests"]) {
    Case c;
    c.name = t.value("name", "");
    if (!t.contains("command") || !t["command"].is_array() || t["command"].empty())
      throw Error(kExitUsage, "ctest test '" + c.name + "' has no command (its executable was not built?)");
    for (const auto& a : t["command"]) c.argv.push_back(a.get<std::string>());
    for (const auto& a : c.argv) c.command += (c.command.empty() ? "" : " ") + a;
    bool skip = false;
    for (const auto& p : t.value("properties", nlohmann::json::array())) {
      std::string key = p.value("name", "");
      const auto& v = p["value"];
      if (key == "WORKING_DIRECTORY" && v.is_string()) c.cwd = v.get<std::string>();
      if (key == "DISABLED" && v.is_boolean()) skip = v.get<bool>();
      if (key == "WILL_FAIL" && v.is_boolean() && v.get<bool>()) c.marks["expect"] = "fail";
      if (key == "ENVIRONMENT" && v.is_array())
        for (const auto& kv : v) {
          std::string s = kv.get<std::string>();
          if (auto eq = s.find('='); eq != std::string::npos) c.env[s.substr(0, eq)] = s.substr(eq + 1);
        }
    }
    if (!skip) cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<Case> discover(const SuiteSource& source) {
  std::vector<Case> cases;
  switch (source.kind) {
    case SuiteSource::gtest: cases = gtest_cases(source); break;
    case SuiteSource::ctest: cases = ctest_cases(source); break;
    case SuiteSource::pytest: cases = pytest_cases(source); break;
  }
  if (cases.empty())
    throw Error(kExitUsage, "suite '" + source.suite + "' has no cases to run (all disabled, or none found)");
  return cases;
}

}  // namespace memrun
