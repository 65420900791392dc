// memrun serve (see serve.h): the socket, the cases, and the loop that
// waits on both.
// Long room: the protocol with the pytest plugin, read and answered in one
// place, so that no message of it is spelled twice.
#include "runner/app/serve.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "cgroup/error.h"
#include "runner/base/bounded_json.h"
#include "runner/base/clock.h"
#include "runner/base/error.h"
#include "runner/base/files.h"
#include "runner/base/kernel_log.h"
#include "runner/base/shell.h"
#include "runner/base/units.h"
#include "runner/base/utf8.h"
#include "runner/explain/profiled_run.h"
#include "runner/launch/launcher.h"
#include "runner/launch/shield.h"
#include "runner/plan/plan.h"
#include "runner/report/json.h"
#include "runner/report/report.h"
#include "runner/run/enforce.h"
#include "runner/run/process_setup.h"
#include "runner/run/running_set.h"
#include "runner/run/running_test.h"
#include "runner/spec/inputs.h"
#include "runner/spec/keys.h"

namespace memrun {
namespace {

using Json = nlohmann::ordered_json;

// What one message carries: an fd for each namespace of a sealed case, a
// pidfd, a report's file.
constexpr size_t kMaxFds = 4;
// A case's marker and its name are the plugin's data: bounded.
constexpr size_t kMaxBlocks = 1000;

// One message: its JSON and the descriptors that came with it, which it
// closes unless they were taken.
class Message {
 public:
  Message() = default;
  Message(Message&& m) noexcept : body(std::move(m.body)), fds_(std::exchange(m.fds_, {})) {}
  Message& operator=(Message&&) = delete;
  ~Message() {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
  }
  /// The i-th descriptor, now the caller's; -1 when none came.
  int take(size_t i) { return i < fds_.size() ? std::exchange(fds_[i], -1) : -1; }
  void add_fd(int fd) { fds_.push_back(fd); }
  size_t fds() const { return fds_.size(); }

  Json body;

 private:
  std::vector<int> fds_;
};

[[noreturn]] void protocol_error(const std::string& what) {
  throw Error(Category::internal, "the pytest plugin and memrun serve do not agree: " + what +
                                      " (is the plugin of the same version as memrun? pip install it again)");
}

// The next message on `socket`, without waiting: nullopt when none is
// there (`*eof` set when the plugin's side is closed).
std::optional<Message> receive(int socket, bool* eof) {
  std::string buffer(kMaxServeMessage + 1, '\0');
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  iovec io{buffer.data(), buffer.size()};
  msghdr msg{};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return std::nullopt;
  if (n < 0 && errno != ECONNRESET) throw_errno(Category::system, "recvmsg from the pytest plugin");
  Message m;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
      for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        m.add_fd(fd);
      }
  if (n <= 0) {
    *eof = true;
    return std::nullopt;
  }
  if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || static_cast<size_t>(n) > kMaxServeMessage)
    protocol_error("a message longer than " + format_size(kMaxServeMessage) + " or with too many descriptors");
  buffer.resize(static_cast<size_t>(n));
  try {
    JsonLimits limits;
    limits.depth = 16;  // the deepest message nests 4 (a marker's env, say)
    m.body = parse_json(buffer, "a message of the pytest plugin", limits);
  } catch (const Error& e) {
    protocol_error(e.what());
  }
  if (!m.body.is_object() || m.body.size() == 0) protocol_error("a message that is no JSON object");
  return m;
}

void send(int socket, const Json& body, const std::vector<int>& fds = {}) {
  std::string text = body.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > kMaxServeMessage) throw Error(Category::internal, "a message to the pytest plugin is too long");
  iovec io{text.data(), text.size()};
  msghdr msg{};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t n;
  do n = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n < 0) throw_errno(Category::system, "sendmsg to the pytest plugin");
}

// A value of the plugin's JSON as YAML, the spec's own reader's input:
// scalars as their text (a number stays a number's text, so that
// `memory=64` meets the spec's "a bare number" message), no marks, so
// that errors name the case's line rather than a place in this text.
YAML::Node yaml_of(const Json& j) {
  if (j.is_object()) {
    YAML::Node n(YAML::NodeType::Map);
    for (const auto& [k, v] : j.items()) n[k] = yaml_of(v);
    return n;
  }
  if (j.is_array()) {
    YAML::Node n(YAML::NodeType::Sequence);
    for (const auto& v : j) n.push_back(yaml_of(v));
    return n;
  }
  if (j.is_null()) return YAML::Node(YAML::NodeType::Null);
  if (j.is_string()) return YAML::Node(j.get<std::string>());
  if (j.is_boolean()) return YAML::Node(j.get<bool>() ? "true" : "false");
  return YAML::Node(j.dump());
}

std::string string_of(const Json& body, const char* key, size_t max = 16 * 1024) {
  auto it = body.find(key);
  if (it == body.end() || !it->is_string()) protocol_error(std::string("no string '") + key + "'");
  std::string s = it->get<std::string>();
  if (s.size() > max) protocol_error(std::string("'") + key + "' longer than " + std::to_string(max) + " bytes");
  return s;
}

uint64_t number_of(const Json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || !it->is_number_unsigned()) protocol_error(std::string("no number '") + key + "'");
  return it->get<uint64_t>();
}

// The pid a pidfd holds (its fdinfo's "Pid:", 5.3+); -1 once it exited.
int pid_of_pidfd(int pidfd) {
  std::string info = read_proc("/proc/self/fdinfo/" + std::to_string(pidfd));
  auto at = info.find("\nPid:");
  return at == std::string::npos ? -1 : std::atoi(info.c_str() + at + 5);
}

// The identity (device, inode) of a process's namespace of `kind`.
std::pair<dev_t, ino_t> namespace_of(int pid, const char* kind) {
  struct stat st {};
  if (::stat(("/proc/" + std::to_string(pid) + "/ns/" + kind).c_str(), &st) != 0) return {0, 0};
  return {st.st_dev, st.st_ino};
}

// One run of a case, from its request to its verdict.
struct Case {
  uint64_t id = 0;
  Spec spec;  // owns the case's TestSpec (tests[0]); the planned test points into it
  PlannedTest planned;
  int run = 1, runs = 1;
  std::string arg;  // the case as pytest takes it from its folder (for explain's run)
  size_t blocks = 0;  // opened so far
  uint64_t serial = 0;  // in the RunningSet while its test runs
  bool taken = false;
};

// The words of memrun's verdict for pytest to show: the outcome first,
// with the figures that answer "how much": peak, limit, headroom, and who
// the kernel killed.
std::string verdict_text(const TestRecord& r) {
  const Verdict& v = r.verdict;
  // A failed case says FAIL and why (said_of, as every output of a run
  // says it): "pass (expected pass)" beside its reason read as a pass.
  std::string what = v.passed ? fmt::format("{} (expected {})", to_string(v.outcome), r.test.expected)
                              : "FAIL, " + said_of(r).outcome;
  std::string head = fmt::format("memrun: {}, peak {} of limit {}, headroom {} ({:.0f}%)", what, format_size(v.peak),
                                 format_size(v.limit), format_signed_size(v.headroom), v.headroom_pct);
  if (v.outcome == Outcome::oom)
    head = fmt::format("memrun: OOM-killed at its {} limit (expected {}): peak {}", format_size(v.limit),
                       r.test.expected, format_size(v.peak));
  if (v.headroom_basis == HeadroomBasis::working_set) head += " (headroom excl. page cache)";
  std::string text = head;
  if (!v.reason.empty()) text += "\nmemrun: " + printable(v.reason);
  for (const auto& k : r.observed.oom_victims)
    text += fmt::format("\nmemrun: the kernel killed {} (pid {}, anon-rss {}, file-rss {})", printable(k.name), k.pid,
                        format_size(k.anon_rss), format_size(k.file_rss));
  if (!v.passed && v.outcome != Outcome::skipped) {
    text += "\nmemrun: " + at_peak_text(r);
  }
  return text;
}

// An explanation (--memrun-explain) as the console shows it.
std::string explanation_text(const TestRecord& r) {
  if (!r.explanation) return "";
  std::string text = "memrun explain: where its memory went";
  for (const auto& line : explanation_lines(*r.explanation, 5)) text += "\n      " + printable(line);
  return text;
}

// What the plugin shows of a record: memrun's words and figures, named
// as the report names them (its JUnit properties).
Json verdict_of(const TestRecord& r) {
  const Verdict& v = r.verdict;
  std::string text = verdict_text(r);
  if (r.explanation) text += "\n" + explanation_text(r);
  return {{"outcome", to_string(v.outcome)}, {"passed", v.passed}, {"expected", r.test.expected},
          {"reason", v.reason}, {"limit_bytes", v.limit}, {"peak_bytes", v.peak},
          {"headroom_bytes", v.headroom}, {"headroom_pct", v.headroom_pct},
          {"oom_kills", r.observed.kernel.oom_kills}, {"text", text}};
}


class Server {
 public:
  Server(const Options& o, int socket) : o_(o), socket_(socket), leftovers_(steady_clock()) {
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    timer_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (epoll_ < 0 || timer_ < 0) throw_errno(Category::system, "epoll/timerfd");
    watch(socket_, kSocket);
    watch(signals_.fd(), kSignals);
    watch(timer_, kTimer);
    watch(launcher_.fd(), kLauncher);
    ucred peer{};
    socklen_t length = sizeof peer;
    if (::getsockopt(socket_, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0)
      throw Error(Category::usage, "memrun serve speaks only to the pytest plugin, over a socket on its standard "
                                   "input (pytest --memrun starts it): run pytest --memrun instead");
    peer_ = peer;
  }
  ~Server() {
    running_.abandon();
    ::close(timer_);
    ::close(epoll_);
  }

  Result run() {
    try {
      return serve();
    } catch (...) {
      // memrun's own failure, or a plugin it cannot understand: what was
      // made for the cases goes before the error is said (the error is
      // memrun's first failure, not one of the cleanup's).
      try {
        close_backend();
      } catch (...) {
      }
      throw;
    }
  }

 private:
  Result serve() {
    while (!finished_) {
      auto next = running_.next_deadline(leftovers_.next());
      epoll_event events[8];
      int n = steady_clock().wait(epoll_, timer_, events, 8, next);
      if (n < 0 && errno != EINTR) throw_errno(Category::system, "epoll_wait");
      for (int i = 0; i < n; ++i) {
        if (events[i].data.u64 == kTimer) {
          uint64_t expirations;
          (void)!::read(timer_, &expirations, sizeof expirations);
        }
        if (events[i].data.u64 == kSignals) on_signals();
        if (events[i].data.u64 == kLauncher) on_launched();
      }
      ended_.clear();
      if (int sig = interrupted_by_) return stop(sig);
      if (!read_messages()) return stop(0);
      auto now = steady_clock().now();
      leftovers_.retry(now);
      running_.on_timers(now);
      running_.finish_exited(steady_clock(), kernel_log_, launcher_, admission_, false,
                             [&](size_t index, TestRecord r) { judged(index, std::move(r)); });
    }
    close_backend();
    return Result::passed();
  }

  enum : uint64_t { kSocket = 1, kSignals = 2, kTimer = 3, kLauncher = 4 };

  void watch(int fd, uint64_t what) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = what;
    if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) throw_errno(Category::system, "epoll_ctl");
  }

  void on_signals() {
    while (int sig = signals_.take()) interrupted_by_ = sig;
  }

  // The plugin went (EOF) or a signal came: the case under way is killed,
  // its group removed, and memrun ends.
  Result stop(int sig) {
    close_backend();
    return sig ? Result::interrupted(sig) : Result::passed();
  }

  // An init no case waits for, through its pidfd.
  static void kill_started(const Child& child) {
    if (child.pidfd >= 0) ::syscall(SYS_pidfd_send_signal, child.pidfd, SIGKILL, nullptr, 0);
    for (int fd : {child.pidfd, child.status_fd})
      if (fd >= 0) ::close(fd);
  }

  void close_backend() {
    if (!backend_) return;
    // A start under way uses its case's group until its exec: waited for
    // (bounded), then its init killed with the rest.
    auto bound = steady_clock().now() + std::chrono::seconds(2);
    while (running_.starting() && steady_clock().now() < bound) {
      pollfd p{launcher_.fd(), POLLIN, 0};
      if (::poll(&p, 1, 10) <= 0) continue;
      for (auto& started : launcher_.take()) {
        if (RunningTest* test = running_.find(started.serial)) test->launched(started.child, started.error);
        else kill_started(started.child);
      }
    }
    // Cases made ahead and never run, or under way when the plugin went.
    running_.abandon();
    // Groups a case left busy: retried for a moment, then gc's.
    bound = steady_clock().now() + std::chrono::seconds(2);
    while (!leftovers_.empty() && steady_clock().now() < bound) {
      ::usleep(10000);
      leftovers_.retry(steady_clock().now());
    }
    try {
      backend_->close();
    } catch (const cgroup::Failure& e) {
      fmt::print(stderr, "memrun serve: cleanup: {} ('memrun gc' removes it once nothing holds it)\n", e.what());
    }
    backend_.reset();
  }

  // Every message that is there; false when the plugin is gone.
  bool read_messages() {
    for (;;) {
      bool eof = false;
      auto m = receive(socket_, &eof);
      if (eof) return false;
      if (!m) return true;
      dispatch(*m);
      if (finished_) return true;
    }
  }

  void dispatch(Message& m) {
    const Json& b = m.body;
    if (b.contains("hello")) return hello(b.at("hello"));
    if (!backend_) protocol_error("a request before hello");
    if (b.contains("case")) return on_case(b.at("case"));
    if (b.contains("take")) return on_take(b.at("take"), m);
    if (b.contains("ended")) return on_ended(b.at("ended"));
    if (b.contains("block")) return on_block(b.at("block"));
    if (b.contains("abandon")) return on_abandon(b.at("abandon"));
    if (b.contains("finish")) return on_finish(m);
    protocol_error("a request memrun does not know: " + b.begin().key());
  }

  // The backend, opened once: where it cannot enforce, the plugin hears
  // why (in memrun's words; it says them in pytest's) and memrun ends.
  void hello(const Json& h) {
    if (backend_) protocol_error("a second hello");
    run_id_ = new_run_id();
    cgroup::OpenOptions open = open_options(o_, cgroup::run_name(run_id_));
    try {
      backend_ = cgroup::open(open);
    } catch (const cgroup::Failure& e) {
      if (e.kind() != cgroup::Failure::Kind::cannot_enforce) throw;
      send(socket_, {{"error", {{"message", failure_text(e)}, {"cannot_enforce", true}}}});
      finished_ = true;
      return;
    }
    // A case enters its init's namespaces from the plugin's process,
    // which needs CAP_SYS_ADMIN for it (setns): root. Otherwise it is only
    // moved into its group, where a process without root cannot leave it.
    sealed_ = open.seal && peer_.uid == 0;
    RunOptions ro;
    ro.pid_namespace = sealed_;
    std::string why;
    if (o_.sample_interval == "0") ro.sample_interval = std::chrono::milliseconds(0);
    else if (auto d = parse_duration(o_.sample_interval, &why)) ro.sample_interval = *d;
    prepare_runner_process(ro);
    context_.backend = backend_.get();
    context_.clock = &steady_clock();
    context_.leftovers = &leftovers_;
    context_.oom_score_adj = ro.oom_score_adj;
    context_.open_files = ro.open_files;
    context_.sample_interval = ro.sample_interval;
    context_.pid_namespace = sealed_;
    context_.epoll = epoll_;
    context_.launcher = &launcher_;
    std::string cwd = h.is_object() && h.contains("cwd") ? string_of(h, "cwd") : "";
    // --memrun-explain: a case that failed on memory runs once more, as a
    // pytest process of its own under memray (explain_test, as `memrun
    // explain` reruns a suite's case), with pytest's interpreter and
    // environment.
    if (h.is_object() && h.contains("explain") && h.at("explain").is_object()) {
      const Json& x = h.at("explain");
      explain_python_ = string_of(x, "python", 4096);
      if (x.contains("env") && x.at("env").is_object() && x.at("env").size() <= 4096)
        for (const auto& [name, value] : x.at("env").items())
          if (value.is_string() && name.rfind("MEMRUN_", 0) != 0 && name.size() < 1024 && value.get<std::string>().size() < 65536)
            explain_env_[name] = value.get<std::string>();
    }
    info_ = describe_run(o_, run_id_, "", *backend_);
    if (!cwd.empty()) info_.cwd = cwd;
    report_.emplace(std::filesystem::temp_directory_path().string());
    send(socket_, {{"hello",
                    {{"memrun", MEMRUN_VERSION}, {"backend", backend_->name()}, {"cgroup_mode", info_.cgroup_mode},
                     {"kernel", info_.kernel}, {"sealed", sealed_}, {"pid", ::getpid()}}}});
  }

  // A case's test from its request: its marker read through the spec's
  // table (the same keys and messages as a spec's `suites: pytest`).
  // Throws Error(bad_input) with the message for the case.
  std::unique_ptr<Case> make_case(const Json& c) {
    auto k = std::make_unique<Case>();
    k->id = number_of(c, "id");
    k->run = static_cast<int>(std::min<uint64_t>(number_of(c, "run"), 1000));
    k->runs = static_cast<int>(std::min<uint64_t>(number_of(c, "runs"), 1000));
    std::string nodeid = string_of(c, "nodeid"), where = string_of(c, "where", 4096);
    std::string file = string_of(c, "file", 4096), cwd = string_of(c, "cwd", 4096);
    k->arg = c.contains("arg") ? string_of(c, "arg") : nodeid;
    const Json& marks = c.at("marks");
    if (!marks.is_object()) protocol_error("marks that are no object");
    spec::Source src;
    src.path = escape_controls(where);
    src.dir = cwd;
    src.check_inputs = true;
    YAML::Node node = yaml_of(marks);
    spec::check_keys(src, node, spec::names_at(spec::kRule), "@pytest.mark.memrun");
    spec::Fields f;
    f.name = nodeid;
    f.argv = std::vector<std::string>{"python", "-m", "pytest", "--memrun", nodeid};
    f.command = "python -m pytest --memrun " + shell_quote(nodeid);
    f.cwd = cwd;
    if (!marks.contains("memory") && c.contains("default_memory") && c.at("default_memory").is_string())
      spec::read_flag(src, "memory", c.at("default_memory").get<std::string>(), f);
    spec::read_fields(src, node, f, spec::kRule);
    if (!f.memory)
      src.fail(node, "@pytest.mark.memrun needs memory=, e.g. @pytest.mark.memrun(memory=\"64MiB\") (or run pytest "
                     "with --memrun-default-memory SIZE)");
    TestSpec t = spec::finish(src, node, f);
    t.line = static_cast<int>(std::min<uint64_t>(number_of(c, "line"), 1u << 30));
    t.rules.tool = "pytest";
    t.rules.outcome_file = true;
    k->spec = Spec{file, std::nullopt, {std::move(t)}};
    return k;
  }

  void on_case(const Json& c) {
    uint64_t id = number_of(c, "id");
    std::unique_ptr<Case> k;
    try {
      k = make_case(c);
    } catch (const Error& e) {
      send(socket_, {{"error", {{"id", id}, {"message", e.what()}}}});
      return;
    }
    if (cases_.count(id)) protocol_error("a case id given twice");
    k->planned = {&k->spec, &k->spec.tests[0]};
    k->planned.named(fmt::format("case-{:06d}", ++groups_), "", "");
    k->planned.run = k->run;
    k->planned.runs = k->runs;
    auto test = std::make_unique<RunningTest>(k->planned);
    test->as_vessel();
    k->serial = next_serial_++;
    if (!test->start(context_, nullptr, k->serial)) {
      TestRecord r = test->not_started();
      send(socket_, {{"error", {{"id", id}, {"message", "memrun could not start the case: " + r.verdict.reason}}}});
      r.test.measured = "forked_case";
      tally_.add(r.verdict);
      report_->add_test(tests_++, r);
      return;
    }
    bool starting = test->starting();
    admission_.started(k->planned.test->memory);
    running_.add(k->serial, k->serial, std::move(test));  // its index is its serial
    index_of_[k->serial] = id;
    Case& made = *(cases_[id] = std::move(k));
    if (!starting) ready(made);  // else once the launcher has started its init
  }

  // The starts the launcher finished: each case's init runs (its ready
  // goes out), or could not start (its error, and its record).
  void on_launched() {
    for (auto& started : launcher_.take()) {
      RunningTest* test = running_.find(started.serial);
      auto id = index_of_.find(started.serial);
      if (!test || id == index_of_.end()) {  // (never: a case is starting until launched())
        kill_started(started.child);
        continue;
      }
      Case& k = *cases_.at(id->second);
      if (test->launched(started.child, started.error)) {
        ready(k);
        continue;
      }
      std::string why = "memrun could not start the case: " + test->not_started().verdict.reason;
      drop(k, why);
      send(socket_, {{"error", {{"id", id->second}, {"message", why}}}});
    }
  }

  // The case is ready to be forked: what its fork needs, with the init's
  // namespaces where it is sealed.
  void ready(Case& k) {
    RunningTest& test = test_of(k);
    std::vector<int> fds;
    // The init's pid, mount and cgroup namespaces, and its root: entering
    // a mount namespace sets the root to the namespace's, which is not the
    // system's where that was made with chroot (an initramfs's switch_root).
    if (int init = test.vessel_pid(); init > 0)
      for (const char* what : {"ns/pid", "ns/mnt", "ns/cgroup", "root"}) {
        int fd = ::open(("/proc/" + std::to_string(init) + "/" + what).c_str(),
                        (std::string(what) == "root" ? O_PATH | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
        if (fd < 0) {
          for (int f : fds) ::close(f);
          throw_errno(Category::system, std::string("cannot open the case's ") + what);
        }
        fds.push_back(fd);
      }
    const TestSpec& t = *k.planned.test;
    Json env = Json::object();
    for (const auto& [name, value] : t.env) env[name] = value;
    env["MEMRUN_TEST"] = t.name;
    env["MEMRUN_MEMORY_LIMIT"] = std::to_string(t.memory);
    Json unset = Json::array({"MEMRUN_PYTEST_OUTCOME", "MEMRUN_SUB_GROUPS"});
    if (!t.service_manager)
      for (const char* name : {"DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR"}) unset.push_back(name);
    Json ready = {{"id", k.id},         {"sealed", !fds.empty()},   {"env", env},
                  {"unset", unset},     {"limit_bytes", t.memory},  {"hugepages_off", t.hugepages_off},
                  {"timeout_s", t.timeout.count() / 1e3}};
    try {
      send(socket_, {{"ready", ready}}, fds);
    } catch (...) {
      for (int f : fds) ::close(f);
      throw;
    }
    for (int f : fds) ::close(f);
  }

  Case& case_named(const Json& body) {
    auto it = cases_.find(number_of(body, "id"));
    if (it == cases_.end()) protocol_error("a case memrun was not asked to make");
    return *it->second;
  }

  RunningTest& test_of(const Case& k) {
    RunningTest* t = running_.find(k.serial);
    if (!t) protocol_error("a case that has ended");
    return *t;
  }

  // The fork the plugin made for the case: its own child (no other
  // process can be handed in), in the case's pid namespace where the case
  // is sealed; memrun moves it into the case's groups.
  void on_take(const Json& body, Message& m) {
    Case& k = case_named(body);
    RunningTest& test = test_of(k);
    int pidfd = m.take(0);
    int pid = pidfd >= 0 ? pid_of_pidfd(pidfd) : -1;
    std::string why;
    if (k.taken || !test.waiting()) why = "the case was handed in twice";
    else if (pid <= 0) why = "no process came with it, or it has already exited";
    else if (parent_process(pid) != peer_.pid) why = "the process handed in is not the pytest process's own child";
    else if (int init = test.vessel_pid(); init > 0 && namespace_of(pid, "pid") != namespace_of(init, "pid"))
      why = "the process handed in is not in its test's pid namespace";
    // Its inputs read cold: evicted now, just before it starts (made ahead,
    // its group waited while the case before it ran, and may have read them).
    else why = evict_inputs(k.planned.test->inputs);
    if (why.empty()) {
      try {
        test.adopt(pidfd, pid, peer_.pid);
        pidfd = -1;
        k.taken = true;
      } catch (const Error& e) {
        why = e.what();
        pidfd = -1;  // adopt() closed it
      }
    }
    if (pidfd >= 0) ::close(pidfd);
    if (!why.empty()) {
      // Refused for good: the case is not run, and its record says why.
      uint64_t id = k.id;
      drop(k, "memrun could not take the case in: " + why);
      send(socket_, {{"error", {{"id", id}, {"message", "memrun could not take the case in: " + why}}}});
      return;
    }
    send(socket_, {{"taken", {{"id", k.id}}}});
  }

  // How the case ended, as the plugin's process reaped it: its wait
  // status, pytest's word, and the blocks it measured.
  void on_ended(const Json& body) {
    Case& k = case_named(body);
    RunningTest& test = test_of(k);
    if (!k.taken) protocol_error("the end of a case never taken in");
    int status = static_cast<int>(number_of(body, "status") & 0xffff);
    std::string outcome = string_of(body, "outcome", 16);
    if (outcome != "passed" && outcome != "failed" && outcome != "skipped" && outcome != "none")
      protocol_error("an outcome pytest does not give: " + outcome);
    rusage usage{};
    auto seconds = [&](const char* key, timeval& tv) {
      double s = body.contains(key) && body.at(key).is_number() ? body.at(key).get<double>() : 0;
      if (!(s >= 0 && s < 1e9)) s = 0;
      tv.tv_sec = static_cast<time_t>(s);
      tv.tv_usec = static_cast<suseconds_t>((s - static_cast<double>(tv.tv_sec)) * 1e6);
    };
    seconds("user_s", usage.ru_utime);
    seconds("system_s", usage.ru_stime);
    test.case_ended(status, usage, outcome == "none" ? "" : outcome);
  }

  // A block of the case (pytest_memrun's memrun_peak) opens or closes:
  // memrun measures it, and its figures go into the case's record.
  void on_block(const Json& body) {
    Case& k = case_named(body);
    RunningTest& test = test_of(k);
    Json answer = {{"id", k.id}};
    // What a block asks comes from the case's own process (through the
    // plugin): a request memrun cannot take is that block's error, never
    // the end of memrun serve.
    try {
      std::string op = string_of(body, "op", 16), name = string_of(body, "name", 200);
      if (op == "begin") {
        if (k.blocks >= kMaxBlocks) throw Error(Category::usage, "a case may measure at most 1000 blocks");
        ++k.blocks;
        auto [source, baseline] = test.open_block(name);
        answer["source"] = source;
        answer["baseline_bytes"] = baseline;
      } else if (op == "end") {
        BlockFigures b = test.close_block(name);
        answer["source"] = b.source;
        answer["baseline_bytes"] = b.baseline;
        answer["high_bytes"] = b.peak + b.baseline;
        answer["now_bytes"] = b.retained + b.baseline;
      } else {
        protocol_error("a block's op that is neither begin nor end");
      }
    } catch (const Error& e) {
      send(socket_, {{"error", {{"id", k.id}, {"message", e.what()}}}});
      return;
    } catch (const cgroup::Failure& e) {
      send(socket_, {{"error", {{"id", k.id}, {"message", std::string(e.what())}}}});
      return;
    }
    send(socket_, {{"block", answer}});
  }

  // The plugin could not run the case (its fork failed): what was made for
  // it goes, and its record says why.
  void on_abandon(const Json& body) {
    Case& k = case_named(body);
    send(socket_, {{"verdict", drop(k, "pytest could not run the case: " + string_of(body, "why"))}});
  }

  // A case's run was judged: its record (with --memrun-repeat, all runs'
  // as one, once the last came) goes to the report, its verdict to the
  // plugin.
  void judged(size_t serial, TestRecord r) { send(socket_, {{"verdict", keep(serial, std::move(r))}}); }

  // A case's run was judged: its record (with --memrun-repeat, all runs'
  // as one, once the last came) goes to the report; what the plugin is
  // told of it is returned.
  Json keep(uint64_t serial, TestRecord r) {
    uint64_t id = index_of_.at(serial);
    index_of_.erase(serial);
    auto it = cases_.find(id);
    std::unique_ptr<Case> k = std::move(it->second);
    cases_.erase(it);
    r.test.measured = "forked_case";
    Json reply = {{"id", id}, {"run", verdict_of(r)}};
    auto& runs = pending_runs_[r.test.name];
    runs.push_back(std::move(r));
    if (k->run >= k->runs) {
      TestRecord whole = combine_runs(std::move(runs));
      pending_runs_.erase(whole.test.name);
      if (!explain_python_.empty()) explain(*k, whole);
      reply["final"] = verdict_of(whole);
      tally_.add(whole.verdict);
      report_->add_test(tests_++, whole);
    }
    // Its test may still point into it until the loop's turn ends.
    ended_.push_back(std::move(k));
    return reply;
  }

  // --memrun-explain: where the memory of a case that failed on memory went
  // (verdict/explanation.h), from a second run of it under memray, with room to reach
  // its peak. The verdict stays the first run's.
  void explain(const Case& k, TestRecord& whole) {
    std::string why = explain_why(ExplainMode::on_failure, whole);
    if (why.empty()) return;
    const TestSpec& t = *k.planned.test;
    TestSpec profiled = t;
    profiled.argv = {explain_python_, "-m", "pytest", "-p", "no:cacheprovider", "-q", k.arg};
    profiled.command = explain_python_ + " -m pytest -p no:cacheprovider -q " + shell_quote(k.arg);
    profiled.env = explain_env_;
    for (const auto& [name, value] : t.env) profiled.env[name] = value;
    PlannedTest planned = k.planned;
    planned.test = &profiled;
    if (explain_dir_.empty()) {
      std::string dir = (std::filesystem::temp_directory_path() / "memrun-explain-XXXXXX").string();
      if (!::mkdtemp(dir.data())) throw_errno(Category::system, "mkdtemp for explain's files");
      explain_dir_ = dir;
    }
    RunOptions ro;
    ro.pid_namespace = context_.pid_namespace;
    ro.sample_interval = context_.sample_interval;
    ro.oom_score_adj = context_.oom_score_adj;
    ro.open_files = context_.open_files;
    int interrupted = 0;
    whole.explanation = explain_test(planned, whole, why, *backend_, ro, explain_dir_, interrupted);
    if (interrupted) interrupted_by_ = interrupted;
  }

  // A case that will not run: what was made for it goes, and its record
  // says why.
  Json drop(Case& k, const std::string& why) {
    size_t index = 0;
    auto test = running_.remove(k.serial, &index);
    if (!test) protocol_error("a case that has ended");
    test->abandon();
    admission_.ended(k.planned.test->memory);
    Observation o;
    o.ending = Ending::not_started;
    o.start_error = why;
    return keep(k.serial, make_record(k.planned, o));
  }

  // The session's report, into the file the plugin opened for it (it
  // gathers its workers' reports and writes the one the user asked for).
  void on_finish(Message& m) {
    int fd = m.take(0);
    if (fd >= 0) {
      info_.ended = std::chrono::system_clock::now();
      std::string error;
      uint64_t at = 0;
      report_->render(info_, [&](const std::string& text) {
        for (size_t done = 0; done < text.size() && error.empty();) {
          ssize_t n = ::pwrite(fd, text.data() + done, text.size() - done, static_cast<off_t>(at));
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) error = std::strerror(errno);
          else done += static_cast<size_t>(n), at += static_cast<uint64_t>(n);
        }
      });
      ::close(fd);
      if (!error.empty()) throw Error(Category::output, "cannot write the session's memrun report: " + error);
    }
    send(socket_, {{"finished",
                    {{"passed", tally_.passed}, {"failed", tally_.failed()}, {"skipped", tally_.skipped}}}});
    finished_ = true;
  }

  const Options& o_;
  int socket_;
  ucred peer_{};
  SignalGuard signals_;
  // Before the cases: its thread ends after them (their PR_SET_PDEATHSIG).
  RealLauncher launcher_{true};
  int epoll_ = -1, timer_ = -1;
  int interrupted_by_ = 0;
  bool finished_ = false, sealed_ = false;
  std::string run_id_;
  std::unique_ptr<cgroup::Backend> backend_;
  RunContext context_;
  Leftovers leftovers_;
  KernelLog kernel_log_;
  Admission admission_{1 << 20, std::nullopt, false};
  RunningSet running_;
  RunInfo info_;
  std::optional<Report> report_;
  Tally tally_;
  size_t tests_ = 0, groups_ = 0;
  uint64_t next_serial_ = 1;
  std::map<uint64_t, std::unique_ptr<Case>> cases_;      // by id
  std::map<uint64_t, uint64_t> index_of_;                // serial -> id
  std::map<std::string, std::vector<TestRecord>> pending_runs_;  // a case's runs so far
  std::vector<std::unique_ptr<Case>> ended_;  // judged: gone on the next turn
  std::string explain_python_, explain_dir_;    // --memrun-explain's
  std::map<std::string, std::string> explain_env_;
};

}  // namespace

Result serve_command(const Options& o, int socket) {
  struct stat st {};
  if (::fstat(socket, &st) != 0 || !S_ISSOCK(st.st_mode))
    throw Error(Category::usage, "memrun serve speaks only to the pytest plugin, over a socket on its standard input "
                                 "(pytest --memrun starts it): run pytest --memrun instead");
  Server server(o, socket);
  return server.run();
}

}  // namespace memrun
