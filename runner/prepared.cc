#include "runner/prepared.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "runner/error.h"

namespace memrun {
namespace {

// A case's own variables (running.cc sets them per test): never the
// prepared process's, which each case's fork replaces with its own.
bool case_variable(const std::string& kv) {
  for (const char* key : {"MEMRUN_TEST=", "MEMRUN_MEMORY_LIMIT=", "MEMRUN_PYTEST_OUTCOME="})
    if (kv.rfind(key, 0) == 0) return true;
  return false;
}

void say(const std::string& text) { (void)!::write(2, text.data(), text.size()); }

}  // namespace

std::vector<std::string> serve_argv(const std::vector<std::string>& argv) {
  // PYTHON -c PLUGIN run NODEID ARGS... (discover.cc's pytest_case)
  if (argv.size() < 5 || argv[1] != "-c" || argv[3] != "run") return {};
  std::vector<std::string> out(argv.begin(), argv.begin() + 3);
  out.push_back("serve");
  out.insert(out.end(), argv.begin() + 5, argv.end());
  return out;
}

PreparedPytest::PreparedPytest(Command serve, std::string log) : serve_(std::move(serve)), log_(std::move(log)) {}

PreparedPytest::~PreparedPytest() {
  // EOF: the process leaves its loop and ends pytest's session.
  if (socket_ >= 0) ::close(socket_);
  if (process_.pidfd >= 0) ::close(process_.pidfd);
}

void PreparedPytest::gone(const std::string& why) {
  if (state_ != State::gone)
    say("memrun: " + why + "; its cases now start pytest afresh each (as with `prepared: off`)" +
        (process_.pid > 0 ? "; its output: " + log_ : "") + "\n");
  state_ = State::gone;
  if (socket_ >= 0) ::close(socket_);
  socket_ = -1;
}

bool PreparedPytest::ready() {
  if (state_ != State::unstarted) return state_ == State::ready;
  // setns(2) through a pidfd, which enters the init's namespaces, is 5.8+.
  utsname u{};
  int major = 0, minor = 0;
  if (::uname(&u) != 0 || std::sscanf(u.release, "%d.%d", &major, &minor) != 2 || major * 1000 + minor < 5008) {
    gone(std::string("pytest cannot be prepared once for a suite on kernel ") + u.release +
         " (a case enters its test's namespaces through a pidfd, 5.8+)");
    return false;
  }
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    gone(std::string("pytest could not be prepared: socketpair: ") + std::strerror(errno));
    return false;
  }
  socket_ = pair[0];
  int out = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  serve_.inherit_fd = pair[1];
  serve_.env.push_back("MEMRUN_PYTEST_FD=" + std::to_string(pair[1]));
  serve_.stdout_fd = serve_.stderr_fd = out >= 0 ? out : ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  std::string why;
  try {
    // In memrun's own group: the process is no test, and each case's
    // group is charged for what the case itself touches.
    process_ = launch(serve_, cgroup::Placement{});
  } catch (const Error& e) {
    why = e.what();
  }
  ::close(pair[1]);
  ::close(serve_.stdout_fd);
  if (!why.empty()) {
    gone("pytest could not be prepared: " + why);
    return false;
  }
  // Its word once it has collected (the launcher's thread waits, never
  // the loop).
  pollfd p{socket_, POLLIN, 0};
  int n;
  do n = ::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kReadyWithin).count()));
  while (n < 0 && errno == EINTR);
  char word[256] = {};
  ssize_t got = n > 0 ? ::recv(socket_, word, sizeof word - 1, 0) : -1;
  auto said = nlohmann::json::parse(std::string(word, got > 0 ? static_cast<size_t>(got) : 0), nullptr, false);
  if (said.is_discarded() || !said.contains("ready")) {
    gone(n == 0 ? "pytest, prepared once for a suite, did not finish collecting within " +
                      std::to_string(kReadyWithin.count()) + " s"
                : "pytest, prepared once for a suite, ended before it was ready");
    return false;
  }
  state_ = State::ready;
  return true;
}

Child PreparedPytest::start(Command cmd, const cgroup::Placement& placement) {
  // The case: its node id, folder and environment, NUL-separated (bytes,
  // as the kernel takes them); one message, which a socket's buffer bounds
  // (net.core.wmem_default, 208 KiB by default): a larger one starts afresh.
  std::string request = cmd.argv[4] + '\0' + cmd.cwd;
  for (const auto& kv : cmd.env) request += '\0' + kv;
  if (request.size() > kLargestRequest || !ready()) return launch(cmd, placement);
  int vessel[2];
  if (::pipe2(vessel, O_CLOEXEC) != 0) throw_errno(Category::system, "pipe");
  cmd.vessel_fd = vessel[0];
  Child child;
  try {
    child = launch(cmd, placement);
  } catch (...) {
    ::close(vessel[0]);
    ::close(vessel[1]);
    throw;
  }
  ::close(vessel[0]);
  // With the init's pidfd, the case's output, the init's pipe and
  // cgroup.procs of each of its groups.
  std::vector<int> fds = {child.pidfd, cmd.stdout_fd, cmd.stderr_fd, vessel[1]};
  fds.insert(fds.end(), placement.procs_fds.begin(), placement.procs_fds.end());
  iovec io{request.data(), request.size()};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  msghdr msg{};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  bool sent = ::sendmsg(socket_, &msg, MSG_NOSIGNAL) >= 0;
  std::string why = sent ? "" : std::strerror(errno);
  ::close(vessel[1]);
  if (sent) return child;
  // The init, ours and waiting for a case that never comes, goes (the
  // loop reaps it); the case starts afresh in the same groups.
  gone("pytest, prepared once for a suite, could not be asked to run a case (" + why + ")");
  ::syscall(SYS_pidfd_send_signal, child.pidfd, SIGKILL, nullptr, 0);
  ::close(child.pidfd);
  ::close(child.status_fd);
  cmd.vessel_fd = -1;
  return launch(cmd, placement);
}

Child PreparedSet::start(Command cmd, const cgroup::Placement& placement, const std::string& log_dir) {
  std::vector<std::string> argv = serve_argv(cmd.argv);
  if (argv.empty()) return launch(cmd, placement);
  Command serve = cmd;
  serve.argv = argv;
  std::erase_if(serve.env, case_variable);
  serve.pid_namespace = serve.private_shm = false;
  serve.hidden_sockets.clear();
  serve.stdout_fd = serve.stderr_fd = -1;
  // One process per suite: the same command, folder and environment.
  std::string key = serve.cwd;
  for (const auto& s : serve.argv) key += '\0' + s;
  key += '\1';
  for (const auto& s : serve.env) key += '\0' + s;
  key += serve.hugepages_off ? "\1thp-off" : "";
  auto& prepared = by_suite_[key];
  if (!prepared)
    prepared = std::make_unique<PreparedPytest>(
        std::move(serve), log_dir + "/pytest-prepared-" + std::to_string(by_suite_.size()) + ".log");
  return prepared->start(std::move(cmd), placement);
}

}  // namespace memrun
