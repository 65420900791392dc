#include "harness.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cgroup/cgroup.h"
#include "runner/base/units.h"

namespace memrun::testing {

// The tests write the workload's path into spec lines and shell lines
// unquoted: from a build folder whose path holds a space (a clone in
// "My Projects"), it is reached through a link in a folder of its own
// under TMPDIR, named as the workload is (the kernel's reports name it so).
std::string workload() {
  static const std::string path = [] {
    std::string bin = WORKLOAD_BIN;
    if (bin.find_first_of(" \t'\"") == std::string::npos) return bin;
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/memrun-workload-XXXXXX";
    // Open to every user: the VMs' tests run the workload as a plain one.
    if (!::mkdtemp(tmpl.data()) || ::chmod(tmpl.c_str(), 0755) != 0) return bin;
    std::string link = tmpl + "/memrun-workload";
    if (::symlink(bin.c_str(), link.c_str()) != 0) return bin;
    static const std::string dir = tmpl;
    std::atexit([] { std::filesystem::remove_all(dir); });
    return link;
  }();
  return path;
}

void write_mib(const std::string& path, int mib) {
  std::ofstream out(path, std::ios::binary);
  std::string block(MiB, 'x');
  for (int i = 0; i < mib; ++i) out.write(block.data(), static_cast<std::streamsize>(block.size()));
}

bool on_tmpfs(const std::string& path) {
  struct statfs info {};
  return ::statfs(path.c_str(), &info) == 0 && (info.f_type == TMPFS_MAGIC || info.f_type == RAMFS_MAGIC);
}

Scratch::Scratch() {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/memrun-test-XXXXXX";
  path_ = ::mkdtemp(tmpl.data());
}

Scratch::~Scratch() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string Scratch::write(const std::string& name, const std::string& text) const {
  std::string p = path_ + "/" + name;
  std::ofstream(p) << text;
  return p;
}

std::string memrun_bin() { return MEMRUN_BIN; }

RunOutput run_memrun(const std::vector<std::string>& args, const std::string& cwd) {
  std::vector<std::string> argv{MEMRUN_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_program(argv, cwd);
}

Started start_program(const std::vector<std::string>& args, const std::string& cwd) {
  Started st;
  st.io = std::make_shared<Scratch>();
  st.out_path = st.io->path() + "/out";
  st.err_path = st.io->path() + "/err";
  pid_t pid = ::fork();
  if (pid == 0) {
    int in = ::open("/dev/null", O_RDONLY);
    int o = ::open(st.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = ::open(st.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(in, 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    if (::chdir(cwd.c_str()) != 0) ::_exit(126);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  st.pid = pid;
  return st;
}

RunOutput finish_program(const Started& st) {
  int status = 0;
  ::waitpid(st.pid, &status, 0);
  RunOutput r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_text(st.out_path);
  r.err = read_text(st.err_path);
  return r;
}

RunOutput run_program(const std::vector<std::string>& args, const std::string& cwd) {
  return finish_program(start_program(args, cwd));
}

RunOutput run_spec(const Scratch& dir, const std::string& yaml, const std::vector<std::string>& extra) {
  return run_spec_with(dir, yaml, {MEMRUN_BIN}, extra);
}

RunOutput run_spec_with(const Scratch& dir, const std::string& yaml, const std::vector<std::string>& prefix,
                        const std::vector<std::string>& extra) {
  std::string text = yaml;
  for (size_t at; (at = text.find("{W}")) != std::string::npos;) text.replace(at, 3, workload());
  std::string spec = dir.write("spec.yaml", text);
  std::string report = dir.path() + "/report.json";
  std::filesystem::remove(report);
  std::vector<std::string> args = prefix;
  for (const auto& a : {spec, std::string("--json"), report, std::string("--run-dir"), dir.path() + "/runs"})
    args.push_back(a);
  args.insert(args.end(), extra.begin(), extra.end());
  RunOutput r = run_program(args);
  if (std::filesystem::exists(report)) r.report = nlohmann::json::parse(read_text(report));
  return r;
}

const nlohmann::json& test_named(const RunOutput& run, const std::string& name) {
  static const nlohmann::json kMissing;
  if (run.report.contains("tests"))
    for (const auto& t : run.report["tests"])
      if (t["name"] == name) return t;
  ADD_FAILURE() << "no test '" << name << "' in the report; memrun said:\n" << run.out << run.err;
  return kMissing;
}

std::vector<std::string> leftover_cgroups() {
  std::vector<std::string> dirs, roots;
  // Where memrun makes its run directories: below its v2 parent, and in each
  // v1 hierarchy it uses.
  cgroup::OpenOptions v2;
  v2.kind = cgroup::Kind::v2;
  if (auto v = cgroup::check(v2); v.ok()) roots.push_back(v.parent);
  for (const auto& [ctrl, dir] : cgroup::host().v1_self) roots.push_back(dir);
  // Runs whose memrun is gone but whose cgroups remain. (A memrun running
  // beside the tests, e.g. a developer's, is alive and not counted.)
  for (const auto& root : roots)
    for (const auto& dir : cgroup::dead_runs(root)) dirs.push_back(dir);
  return dirs;
}

void MemrunTest::TearDown() { EXPECT_EQ(leftover_cgroups(), std::vector<std::string>{}); }

std::unique_ptr<cgroup::Backend> limited_parent(uint64_t bytes) {
  cgroup::OpenOptions o;
  o.run_name = cgroup::run_name("test-parent-" + std::to_string(::getpid()));
  auto parent = cgroup::open(o);
  std::string limit_file = parent->run_path() + (parent->name() == "v1" ? "/memory.limit_in_bytes" : "/memory.max");
  if (int err = write_text(limit_file, std::to_string(bytes)))
    throw std::runtime_error("cannot write " + limit_file + ": " + std::strerror(err));
  return parent;
}

bool wait_until(const std::function<bool()>& ready, int seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!ready()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

bool wait_for_file(const std::string& path, int seconds) {
  return wait_until(
      [&] {
        std::error_code ec;
        return std::filesystem::file_size(path, ec) > 0 && !ec;
      },
      seconds);
}

int pid_in_file(const std::string& path) {
  int pid = -1;
  std::string ns;
  std::ifstream(path) >> pid >> ns;
  auto link = [](const std::string& p) {
    char buf[64] = {0};
    ssize_t n = ::readlink(p.c_str(), buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  };
  if (pid <= 0 || ns.empty() || ns == link("/proc/self/ns/pid")) return pid;
  // Another namespace: the process whose NSpid (its number in each
  // namespace it is in, this one's first) ends with `pid`, in that one.
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (link("/proc/" + name + "/ns/pid") != ns) continue;
    std::ifstream status("/proc/" + name + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("NSpid:", 0) != 0) continue;
      std::istringstream ids(line.substr(6));
      int id = 0, last = 0;
      while (ids >> id) last = id;
      if (last == pid) return std::stoi(name);
    }
  }
  return 0;
}

std::string read_text(const std::string& path, const std::string& fallback) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fallback;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

int write_text(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = n < 0 ? errno : static_cast<size_t>(n) == text.size() ? 0 : EIO;
  ::close(fd);
  return err;
}

bool process_alive(int pid) {
  if (pid <= 0) return false;
  std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  return close != std::string::npos && stat.size() > close + 2 && stat[close + 2] != 'Z';
}

int64_t epoch_ms(const std::string& iso) {
  std::tm tm{};
  int ms = 0;
  std::sscanf(iso.c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
              &tm.tm_sec, &ms);
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(::timegm(&tm)) * 1000 + ms;
}

int64_t peak_sum(std::vector<std::pair<int64_t, int64_t>> events) {
  std::sort(events.begin(), events.end());  // at a tie, ends (negative) first
  int64_t now = 0, most = 0;
  for (const auto& [t, delta] : events) most = std::max(most, now += delta);
  return most;
}

namespace {
std::vector<std::pair<int64_t, int64_t>> events_of(const nlohmann::json& tests, bool by_limit) {
  std::vector<std::pair<int64_t, int64_t>> events;
  for (const auto& t : tests) {
    if (t["started"].is_null()) continue;
    int64_t value = by_limit ? t["requested_limit_bytes"].get<int64_t>() : 1;
    events.push_back({epoch_ms(t["started"]), value});
    events.push_back({epoch_ms(t["ended"]), -value});
  }
  return events;
}
}  // namespace

int most_at_once(const nlohmann::json& tests) { return static_cast<int>(peak_sum(events_of(tests, false))); }

uint64_t most_promised(const nlohmann::json& tests) { return static_cast<uint64_t>(peak_sum(events_of(tests, true))); }

std::string times_of(const nlohmann::json& tests) {
  std::string out = "\n";
  for (const auto& t : tests)
    out += t.value("name", "?") + ": " + t["started"].dump() + " .. " + t["ended"].dump() + " " +
           t.value("outcome", "?") + "\n";
  return out;
}

}  // namespace memrun::testing
