// The cgroup v1 backend: the memory controller's own hierarchy (and the pids
// hierarchy where mounted), as on hybrid hosts where systemd or the host
// keeps memory on v1.
//
// Kernel rules this file obeys (Documentation/admin-guide/cgroup-v1/memory.rst):
// - memory.memsw.limit_in_bytes is memory+swap and must never be below
//   memory.limit_in_bytes, so it is written after it.
// - memory.max_usage_in_bytes is the group's high-water mark since creation:
//   a fresh group per test makes it that test's peak.
// - memory.oom_control's `oom_kill` counter exists since 4.13.
// - v1 has no cgroup.kill and no CLONE_INTO_CGROUP: the child moves itself by
//   writing "0" to each hierarchy's cgroup.procs before it execs.
// - TCP socket buffers are charged to a counter of their own
//   (memory.kmem.tcp.*), never to memory.usage_in_bytes, and only in a group
//   whose memory.kmem.tcp.limit_in_bytes was written before the socket was
//   made (memcg_update_tcp_max() turns the accounting on; memory.rst 2.7.1):
//   without that write a test queues any amount in loopback buffers
//   uncharged. (Unix-socket buffers are slab memory, charged as kmem.)
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "cgroup/block.h"
#include "cgroup/cgroup.h"
#include "cgroup/error.h"
#include "cgroup/fs.h"

namespace memrun::cgroup {
namespace {

void make_dir(const std::string& dir, Failure::Kind kind) {
  if (::mkdir(dir.c_str(), 0755) != 0) fail_errno(kind, "cannot create cgroup " + dir, dir);
}

// memory.stat's hierarchical total_* keys under v2's names; rss includes
// transparent huge pages. Kernel and socket memory have their own files.
Breakdown breakdown_of(std::map<std::string, uint64_t>& s, const std::string& dir) {
  Breakdown b;
  b.anon = s["total_rss"];
  b.file = s["total_cache"];
  b.shmem = s["total_shmem"];
  b.kernel = fs::read_u64(dir + "/memory.kmem.usage_in_bytes").value_or(0);
  b.sock = fs::read_u64(dir + "/memory.kmem.tcp.usage_in_bytes").value_or(0);
  return b;
}

// The process (thread group) of task `tid`: its Tgid; `tid` itself when
// it is gone (then it is no longer outside either).
int process_of(int tid) {
  std::istringstream in(fs::read_file("/proc/" + std::to_string(tid) + "/status").value_or(""));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Tgid:", 0) == 0) return std::atoi(line.c_str() + 5);
  return tid;
}

// The memory line of /proc/PID/cgroup ("4:memory:/a/b" -> "/a/b"); empty
// when the process is gone.
class V1Group : public Group {
 public:
  /// `ancestors_limit`: the lowest limit above the group, read once per run.
  /// `tcp`: the kernel offers TCP accounting (memory.kmem.tcp.*).
  V1Group(std::string mem, std::string pids, uint64_t ancestors_limit, bool tcp)
      : mem_(std::move(mem)), pids_(std::move(pids)), ancestors_limit_(ancestors_limit), tcp_(tcp) {}
  ~V1Group() override { last_attempt(); }

  /// Opens what placement() hands out: the groups' cgroup.procs, or their
  /// sealed leaves' (`sealed`), which the test is then sealed in.
  void open_fds(bool sealed) {
    for (const auto& group : {mem_, pids_}) {
      if (group.empty()) continue;
      std::string dir = sealed ? group + "/" + kSealedLeaf : group;
      int fd = ::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) fail_errno(Failure::Kind::system, "cannot open " + dir + "/cgroup.procs", dir);
      fds_.push_back(fd);
    }
    if (sealed) seal_ = &seal_mounts("cgroup"), stat_ = mem_ + "/" + kSealedLeaf;
    // Held open for the samples: a pread each, no path lookup.
    usage_fd_ = ::open((mem_ + "/memory.usage_in_bytes").c_str(), O_RDONLY | O_CLOEXEC);
    limit_fd_ = ::open((mem_ + "/memory.limit_in_bytes").c_str(), O_RDONLY | O_CLOEXEC);
    if (usage_fd_ < 0 || limit_fd_ < 0) fail_errno(Failure::Kind::system, "cannot open the memory files of " + mem_, mem_);
    if (sealed && (leaf_limit_fd_ = ::open((stat_ + "/memory.limit_in_bytes").c_str(), O_RDONLY | O_CLOEXEC)) < 0)
      fail_errno(Failure::Kind::system, "cannot open the memory files of " + stat_, stat_);
    watch_oom();
    if (tcp_) watch_sub_groups();
    limit_watches_ = fs::watch_writes({mem_ + "/memory.limit_in_bytes", mem_ + "/memory.memsw.limit_in_bytes",
                                        stat_ + "/memory.limit_in_bytes", stat_ + "/memory.memsw.limit_in_bytes"});
    // The peak memrun reports is the group's high-water mark, which a write
    // of 0 resets for everyone (v1; v2's memory.peak resets only for the
    // descriptor written, 6.12+). A sealed test cannot reach the group's.
    peak_watches_ = fs::watch_writes({mem_ + "/memory.max_usage_in_bytes", mem_ + "/memory.memsw.max_usage_in_bytes"});
  }

  // v1's OOM notifier (cgroup.event_control with memory.oom_control): the
  // kernel signals the eventfd when it declares an OOM at the watched
  // group's limit or an ancestor's (mem_cgroup_oom_notify() walks the
  // subtree of the group that ran out), never at a sub-group's. It says
  // whether a kill came at memrun's limit where failcnt cannot (memory+swap
  // is charged first and, since 6.x, counts no failures) and the kernel
  // log's report was rate-limited. Best effort: without it, failcnt.
  void watch_oom() {
    oom_event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    oom_control_fd_ = ::open((stat_ + "/memory.oom_control").c_str(), O_RDONLY | O_CLOEXEC);
    if (oom_event_fd_ < 0 || oom_control_fd_ < 0 ||
        fs::try_write_file(stat_ + "/cgroup.event_control",
                           std::to_string(oom_event_fd_) + " " + std::to_string(oom_control_fd_)) != 0) {
      for (int* fd : {&oom_event_fd_, &oom_control_fd_})
        if (*fd >= 0) ::close(*fd), *fd = -1;
    }
  }

  // A sub-group the test makes is one where its sockets go uncharged (see
  // the top and Final::uncharged_sub_group): inotify sees each group made
  // in the folder the test's processes are in the moment it is made, one
  // the test removes again included; the subtree at the end, the rest
  // (where inotify cannot watch). A memory sub-group cannot be made but
  // through such a folder.
  // (On the process's one inotify instance: closing an instance of its
  // own waits for an SRCU grace period, ~12 ms a test measured.)
  void watch_sub_groups() { sub_group_watch_ = fs::watch_made(stat_); }

  // The first memory sub-group the test made, below the folder its
  // processes are in ("/sub"); "" when it made none.
  // (The groups of memrun's own blocks, open_block(), are no test's:
  // their TCP limit is written before a process moves in.)
  std::string sub_group_made() const {
    for (const auto& g : groups(mem_)) {
      if (g == mem_ || g == stat_) continue;
      std::string below = g.substr(stat_.size());
      // One of memrun's that a process the block started kept from going.
      if (g.rfind(stat_ + "/", 0) == 0 && blocks_left_->count(below.substr(1))) continue;
      return below;
    }
    return fs::any_made_but(sub_group_watch_, own_blocks_) ? "one it removed again" : "";
  }

  const std::string& path() const override { return mem_; }
  // A group of the block's own below the one the test's processes are in
  // (the sealed leaf, or the group), with the test's TCP limit written
  // first; where another block is open, samples.
  std::unique_ptr<Block> open_block(int pid, bool alone) override {
    if (!alone) return sampled_block(stat_ + "/memory.usage_in_bytes");
    uint64_t tcp = fs::read_u64(stat_ + "/memory.kmem.tcp.limit_in_bytes").value_or(0);
    std::string name = kBlockGroup + std::to_string(++blocks_);
    auto block = sub_group_block(stat_, name, pid, tcp, blocks_left_);
    ++own_blocks_[name];  // made by memrun (a name the test made first fails the mkdir)
    return block;
  }
  std::string kernel_path() const override {
    auto mount = host().v1_mount.find("memory");
    return mount != host().v1_mount.end() && mem_.rfind(mount->second, 0) == 0 ? mem_.substr(mount->second.size())
                                                                               : mem_;
  }
  std::vector<std::string> limit_paths() const override {
    std::string own = kernel_path();
    if (stat_ == mem_) return {own};
    return {own, own + "/" + kSealedLeaf};
  }
  // memcg_memory_event() propagates events upwards only on the unified
  // hierarchy: a v1 group's oom_kill counts its own tasks' kills alone.
  bool counts_kills_below() const override { return false; }
  Placement placement() const override { return {-1, fds_, seal_}; }
  std::string outside(int pid) const override { return outside_group(pid, kernel_path(), "memory"); }
  std::set<int> tasks_inside() const override { return listed_tasks(subtree(mem_), "tasks"); }

  Usage usage() const override {
    Usage u;
    u.current = fs::read_u64_at(usage_fd_).value_or(0);
    // The group's limit, which a sealed test cannot reach (its leaf's is
    // the one it sees as its own, and the group's still holds it).
    u.limit = fs::read_u64_at(limit_fd_);
    if (leaf_limit_fd_ >= 0) u.leaf_limit = fs::read_u64_at(leaf_limit_fd_);
    auto [stat, breakdown] = read_stat();
    // Once the group is empty its figures move only as the kernel frees
    // memory on its own (a private /dev/shm torn down after the last
    // exit): finish() uses this read once rather than reading again.
    if (emptied_) emptied_stat_ = {stat, breakdown};
    u.reclaimable_file = stat["total_active_file"] + stat["total_inactive_file"];
    // total_: with the sub-groups; workingset_refault before 5.9, split
    // into _anon and _file since.
    u.refaulted = (stat["total_workingset_refault"] + stat["total_workingset_refault_anon"] +
                   stat["total_workingset_refault_file"]) *
                  page_size();
    u.refaulted_anon = stat["total_workingset_refault_anon"] * page_size();
    u.file_mapped = stat["total_mapped_file"];
    u.breakdown = breakdown;
    // total_swap: pages of the subtree in swap (with swap accounting).
    // (memsw.usage less usage is no measure: the two counters are charged
    // in batches of their own and differ by a few hundred KiB with no swap.)
    u.swap = stat["total_swap"];
    return u;
  }

  // Long: one read per figure of the group's end, each beside the kernel rule it obeys.
  Final finish() const override {
    Final f;
    f.peak = fs::read_u64(mem_ + "/memory.max_usage_in_bytes");
    // TCP buffers are on a counter of their own, under a limit of their own
    // (the top of this file): the two high-water marks added are the
    // group's peak, an upper bound where they did not come at once, so that
    // memory held in socket buffers is never left out of the limit (a test
    // held its limit in anonymous memory and as much again in loopback
    // buffers, and its peak said the first alone).
    if (tcp_ && f.peak)
      if (auto tcp = fs::read_u64(mem_ + "/memory.kmem.tcp.max_usage_in_bytes")) *f.peak += *tcp;
    // v1 counts memory events only in the group where they happen (the
    // kernel stops propagating them upwards outside the unified hierarchy,
    // memcg_memory_event()): an OOM in a sub-group the test made shows up
    // only there, so the subtree is added up.
    // failcnt counts in the group whose limit refused a charge
    // (page_counter_try_charge() counts it on the counter that failed,
    // not its ancestors): the test's own limit is on the group and,
    // sealed, its leaf; a limit the test set below itself is its own
    // business. With swap accounting memory+swap is charged first
    // (try_charge_memcg()) and fails first at equal limits; its failcnt
    // counts only before 6.x (page_counter's track_failcnt since), so at
    // memrun's limits failcnt often says nothing (watch_oom says it).
    uint64_t failcnt = 0, failcnt_below = 0;
    for (const auto& g : groups(mem_)) {
      bool held = g == stat_ && oom_control_fd_ >= 0;
      f.oom_kills += (held ? fs::read_keyed_at(oom_control_fd_) : fs::read_keyed(g + "/memory.oom_control"))["oom_kill"];
      uint64_t n = fs::read_u64(g + "/memory.failcnt").value_or(0) + fs::read_u64(g + "/memory.memsw.failcnt").value_or(0);
      (g == mem_ || g == stat_ ? failcnt : failcnt_below) += n;
    }
    // Whether the kills came at memrun's limit: the OOM notifier's word
    // (watch_oom); where it stayed silent (another OOM in the hierarchy
    // held the OOM lock, mem_cgroup_oom_trylock()), charges refused at
    // memrun's limits and none below. Without the notifier: refusals at
    // memrun's limits, or none below (6.x counts none). (The kernel log,
    // read for every test on v1, decides where it names each kill's
    // oom_memcg=, i.e. unless its reports were rate-limited.)
    uint64_t declared = 0;
    bool watched = oom_event_fd_ >= 0;
    if (watched && ::read(oom_event_fd_, &declared, sizeof declared) != sizeof declared) declared = 0;
    f.limit_at_end = fs::read_u64_at(limit_fd_).value_or(UINT64_MAX);
    f.limit_written = fs::any_written(limit_watches_);
    f.peak_reset = fs::any_written(peak_watches_);
    // A sealed root test can write its leaf's limit: lowered, an OOM under
    // a limit of its own would look like one at memrun's.
    if (stat_ != mem_)
      f.limit_at_end = std::min(f.limit_at_end, fs::read_u64_at(leaf_limit_fd_).value_or(UINT64_MAX));
    f.memory_and_swap_peak = fs::read_u64(mem_ + "/memory.memsw.max_usage_in_bytes");
    // A high-water mark at the limit says the same as failcnt, since
    // charges beyond it are reclaimed, never granted.
    f.limit_reached = failcnt > 0 || (f.peak && f.limit_at_end != UINT64_MAX && *f.peak + 65536 >= f.limit_at_end);
    // The notifier can stay silent for a kill (seen on 6.18, about one in
    // four, for a process that wrote itself from the sealed leaf into the
    // group and then ran out: the kill counted, the eventfd not signalled).
    // Where the subtree holds no group but memrun's, every limit in it is
    // memrun's (one the test lowers is seen by the limit watches), so a
    // kill in it that came with the peak at the limit came at memrun's
    // limit whatever the notifier said (a kill of the machine's own OOM
    // counts in the victim's group too, __oom_kill_process(), and needs no
    // limit reached).
    if (f.oom_kills > 0)
      f.oom_at_limit = declared > 0 || (failcnt > 0 && failcnt_below == 0) ||
                       (f.limit_reached && sub_group_made().empty()) || (!watched && failcnt_below == 0);
    // v1 has no memory.events; report its counters under v2's names where
    // they mean the same, so reports read alike on both.
    f.raw.events = {{"max", failcnt}, {"oom_kill", f.oom_kills}};
    // pids.events `max` counts, on v1, the forks refused in the group that
    // forked (a sealed test's leaf, or a sub-group), not its ancestors.
    if (!pids_.empty())
      for (const auto& g : groups(pids_))
        f.refused_forks += fs::read_keyed(g + "/pids.events")["max"];
    std::tie(f.raw.stat, f.breakdown) = emptied_stat_ ? std::move(*emptied_stat_) : read_stat();
    emptied_stat_.reset();
    f.swap_at_end = f.raw.stat["total_swap"];
    f.reclaimable_file = f.raw.stat["total_active_file"] + f.raw.stat["total_inactive_file"];
    f.effective_limit = std::min(ancestors_limit_, f.limit_at_end);
    f.escaped = escaped_;
    if (tcp_) f.uncharged_sub_group = sub_group_made();
    return f;
  }

  void signal_all(int sig) override {
    signal_tree(mem_, sig);
    // A process that moved out of its memory group is still in its pids group.
    if (!pids_.empty()) signal_tree(pids_, sig);
  }

  bool kill_step() override {
    // Once empty, a group stays empty: only a member can fork into it. The
    // pids group is emptied too: it still holds a process that moved itself
    // out of its memory group.
    if (emptied_) return true;
    std::vector<std::string> mem_walked, pids_walked;
    // The first step counts the escaped on its walk of the pids subtree; a
    // subtree it found empty stays empty (only a member forks into it).
    bool pids_empty = pids_.empty();
    if (!counted_) escaped_ = escaped(&pids_walked, &pids_empty), counted_ = true;
    bool mem_empty = kill_tree_step(mem_, &mem_walked);
    emptied_ = (pids_empty || kill_tree_step(pids_, &pids_walked)) && mem_empty;
    // Once both are empty no process is left to make a sub-group: the
    // subtrees just walked are final, and finish() and remove_step() use
    // them (the per-test path reads each tree once).
    if (emptied_) mem_groups_ = std::move(mem_walked), pids_groups_ = std::move(pids_walked);
    return emptied_;
  }

  bool remove_step() override {
    if (removed_) return true;  // (the destructor after the run's loop removed it)
    for (int fd : fds_) ::close(fd);
    fds_.clear();
    fs::unwatch(limit_watches_);
    fs::unwatch(peak_watches_);
    fs::unwatch(sub_group_watch_);
    for (int* fd : {&usage_fd_, &limit_fd_, &leaf_limit_fd_, &oom_event_fd_, &oom_control_fd_})
      if (*fd >= 0) ::close(*fd), *fd = -1;
    bool gone = remove_groups_step(groups(mem_));
    return removed_ = (pids_.empty() || remove_groups_step(groups(pids_))) && gone;
  }

 private:
  std::pair<std::map<std::string, uint64_t>, Breakdown> read_stat() const {
    auto stat = fs::read_keyed(stat_ + "/memory.stat");
    Breakdown b = breakdown_of(stat, stat_);
    return {std::move(stat), b};
  }

  // The subtree of `top` (mem_ or pids_): as kill_step left it, or read now.
  std::vector<std::string> groups(const std::string& top) const {
    const auto& known = top == mem_ ? mem_groups_ : pids_groups_;
    return known.empty() ? subtree(top) : known;
  }

  // Processes in the test's pids subtree with a thread whose memory cgroup
  // is no longer below the test's memory group: they moved out, whole or
  // one thread (`tasks` lists threads; a thread moves alone through
  // another group's `tasks`). Puts the subtree in `walked`, and whether it
  // listed no task in `empty`.
  uint64_t escaped(std::vector<std::string>* walked, bool* empty) const {
    if (pids_.empty()) return 0;
    std::set<int> out;  // by process: a process counts once, however many threads left
    *walked = subtree(pids_);
    *empty = true;
    for (const auto& g : *walked) {
      std::istringstream in(fs::read_file(g + "/tasks").value_or(""));
      for (pid_t tid; in >> tid;) {
        *empty = false;
        if (tid > 0 && !outside(tid).empty()) out.insert(process_of(tid));
      }
    }
    return out.size();
  }

 private:
  std::string mem_, pids_;
  // Where memory.stat is read: the group where the test's processes are.
  // Since 6.x the kernel folds per-cpu statistics into a group's
  // memory.stat only when enough changed in that group (rstat,
  // memcg_rstat_updated()), and changes stop being counted upwards once
  // the group they happen in has enough pending: the parent of a sealed
  // test's leaf read stale figures for a whole 100 MiB burst (measured).
  std::string stat_ = mem_;
  int blocks_ = 0;                        // open_block()'s groups so far
  std::map<std::string, int> own_blocks_;  // their names, made once each: memrun's, not the test's
  // Those a process the block started kept from being removed at its end.
  std::shared_ptr<std::set<std::string>> blocks_left_ = std::make_shared<std::set<std::string>>();
  uint64_t ancestors_limit_;
  std::vector<int> fds_;
  int usage_fd_ = -1, limit_fd_ = -1;  // the group's memory.usage_in_bytes and limit_in_bytes
  int leaf_limit_fd_ = -1;             // a sealed test's leaf's limit_in_bytes
  int oom_event_fd_ = -1, oom_control_fd_ = -1;  // watch_oom()
  bool tcp_ = false;                             // TCP accounting offered: sub-groups are watched
  std::vector<int> sub_group_watch_;             // watch_sub_groups()
  std::vector<int> limit_watches_;               // fs::watch_writes of the limit files
  std::vector<int> peak_watches_;                // and of the group's high-water marks
  const std::vector<CgroupMount>* seal_ = nullptr;
  bool emptied_ = false, removed_ = false;
  bool counted_ = false;  // escaped_ was counted, before the first kill
  std::vector<std::string> mem_groups_, pids_groups_;  // the subtrees once emptied
  mutable std::optional<std::pair<std::map<std::string, uint64_t>, Breakdown>> emptied_stat_;  // usage()
  uint64_t escaped_ = 0;
};

class V1Backend : public Backend {
 public:
  V1Backend(const std::string& parent, const std::string& run_name, bool seal, const std::string& pids_parent) {
    run_ = parent + "/" + run_name;
    seal_ = seal && can_seal();
    if (::mkdir(run_.c_str(), 0755) != 0) {
      Problem p = make_problem(Problem::Kind::cannot_create_group, "v1", run_);
      p.error = errno;
      unenforceable(std::move(p));
    }
    top_ = host().v1_mount.count("memory") ? host().v1_mount.at("memory") : parent;
    ancestors_limit_ = effective_limit(run_, top_, "memory.limit_in_bytes");
    memsw_ = fs::exists(run_ + "/memory.memsw.limit_in_bytes");
    tcp_ = fs::exists(run_ + "/memory.kmem.tcp.limit_in_bytes");
    // Hierarchical accounting is fixed at 1 since 5.x; older kernels need it
    // set before the group has children so ancestors' limits apply.
    fs::try_write_file(run_ + "/memory.use_hierarchy", "1");
    if (!pids_parent.empty()) {
      pids_run_ = pids_parent + "/" + run_name;
      if (::mkdir(pids_run_.c_str(), 0755) != 0) pids_run_.clear();
    }
  }
  ~V1Backend() override {
    try {
      close();
    } catch (...) {
    }
  }

  std::string name() const override { return "v1"; }
  const std::string& run_path() const override { return run_; }

  std::unique_ptr<Group> create(const std::string& name, const Limits& limits) override {
    if (limits.memory_high)
      throw Failure(Failure::Kind::unsupported, "memory_high needs cgroup v2: v1 has no throttling limit");
    std::string mem = run_ + "/" + name;
    std::string pids = pids_run_.empty() ? "" : pids_run_ + "/" + name;
    make_dir(mem, Failure::Kind::system);
    if (!pids.empty() && ::mkdir(pids.c_str(), 0755) != 0) pids.clear();
    auto group = std::make_unique<V1Group>(mem, pids, ancestors_limit_, tcp_);
    write_limits(mem, pids, limits);
    if (seal_) {
      // The sealed test runs in test/ below both groups, with the same
      // limits (what it reads as its own); the groups above, which it
      // cannot see, hold whatever it writes into its own.
      std::string mem_leaf = mem + "/" + kSealedLeaf, pids_leaf = pids.empty() ? "" : pids + "/" + kSealedLeaf;
      make_dir(mem_leaf, Failure::Kind::system);
      if (!pids_leaf.empty()) make_dir(pids_leaf, Failure::Kind::system);
      write_limits(mem_leaf, pids_leaf, limits);
    }
    group->open_fds(seal_);
    return group;
  }

  uint64_t room() const override {
    return room_below(run_, top_, "memory.limit_in_bytes", "memory.usage_in_bytes");
  }

  Capabilities probe(uint64_t limit) override {
    auto group = create("probe", {limit, std::nullopt, 0, std::optional<uint64_t>(64)});
    Capabilities c;
    c.limit_read_back = fs::read_u64(group->path() + "/memory.limit_in_bytes").value_or(0);
    c.peak = "memory.max_usage_in_bytes";
    c.oom_kills = "memory.oom_control (oom_kill), added up over the test's sub-groups, and the kernel log for every "
                  "test (a kill in a sub-group the test removed)";
    c.kill_all = "SIGKILL to every pid in cgroup.procs, repeated (v1 has no cgroup.kill)";
    c.swap = memsw_ ? "yes (memory.memsw.limit_in_bytes)" : "no: swap cannot be limited per test";
    c.pressure = "no (v1 has no per-group PSI)";
    c.pids = pids_run_.empty() ? "no pids controller" : "yes (pids.max)";
    c.hugetlb = "not limited (huge pages are limited on v2 only)";
    c.placement = "the child joins its group before exec";
    c.sealed = seal_;
    c.sockets = tcp_ ? "TCP buffers limited to the memory limit on a counter of their own "
                       "(memory.kmem.tcp.limit_in_bytes); unix-socket buffers charged as kernel memory"
                     : "no: TCP buffers are not charged (this kernel has no memory.kmem.tcp.limit_in_bytes): a "
                       "test may queue any amount in TCP sockets unseen";
    c.limit_writes = limit_writes_sentence(group->path() + "/memory.limit_in_bytes", c.limit_read_back);
    group->destroy_blocking();
    return c;
  }

  void close() override {
    if (closed_) return;
    closed_ = true;
    if (!pids_run_.empty()) remove_dir(pids_run_);
    remove_dir(run_);
  }

 private:
  void write_limits(const std::string& mem, const std::string& pids, const Limits& limits) {
    fs::write_file(mem + "/memory.limit_in_bytes", std::to_string(limits.memory_max));
    // With swap accounting, memsw = memory + swap caps swap at swap_max.
    if (memsw_)
      fs::write_file(mem + "/memory.memsw.limit_in_bytes", std::to_string(limits.memory_max + limits.swap_max));
    // TCP buffers get the memory limit on their own counter (see the top):
    // the kernel charges a socket to the group it is made in, so a sealed
    // test's leaf needs the write as well as the group.
    if (tcp_) fs::write_file(mem + "/memory.kmem.tcp.limit_in_bytes", std::to_string(limits.memory_max));
    if (limits.pids_max && !pids.empty()) fs::write_file(pids + "/pids.max", std::to_string(*limits.pids_max));
  }

  std::string run_, pids_run_, top_;
  uint64_t ancestors_limit_ = UINT64_MAX;
  bool memsw_ = false;  // swap accounting
  bool tcp_ = false;    // memory.kmem.tcp.limit_in_bytes offered
  bool seal_ = false;   // tests are sealed in a leaf of their groups
  bool closed_ = false;
};

}  // namespace

std::unique_ptr<Backend> open_v1(const std::string& parent, const std::string& run_name, bool seal,
                                 const std::string& pids_parent) {
  return std::make_unique<V1Backend>(parent, run_name, seal, pids_parent);
}

}  // namespace memrun::cgroup
