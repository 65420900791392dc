// The cgroup v2 (unified hierarchy) backend.
//
// Kernel rules this file obeys (Documentation/admin-guide/cgroup-v2.rst):
// - "No internal processes": a non-root cgroup may enable a domain
//   controller such as memory in cgroup.subtree_control only while it holds
//   no processes itself. memrun's own cgroup usually holds memrun (and, in a
//   systemd unit, its siblings), so those processes are moved into a leaf
//   first (see make_room).
// - A controller can be enabled in a child only when the parent enabled it.
// - memory.peak exists since 5.19, cgroup.kill since 5.14, memory.oom.group
//   since 4.19, clone3(CLONE_INTO_CGROUP) since 5.7; the code checks for
//   each instead of trusting a version number.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>

#include "cgroup/block.h"
#include "cgroup/cgroup.h"
#include "cgroup/error.h"
#include "cgroup/fs.h"

namespace memrun::cgroup {
namespace {

/// Name of the leaf that takes the processes of a cgroup memrun must enable
/// controllers in.
constexpr const char* kLeaf = "memrun.leaf";

bool has_word(const std::string& file, const std::string& word) {
  std::istringstream in(fs::read_file(file).value_or(""));
  std::string w;
  while (in >> w)
    if (w == word) return true;
  return false;
}

// The names in directory `dir` (the files of a cgroup).
std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    ::closedir(d);
  }
  return names;
}

// Moves every process of `dir` into dir/memrun.leaf so that `dir` may enable
// controllers for its children.
void make_room(const std::string& dir) {
  std::string leaf = dir + "/" + kLeaf;
  if (::mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST) {
    Problem p = make_problem(Problem::Kind::cannot_create_group, "v2", leaf);
    p.error = errno;
    unenforceable(std::move(p));
  }
  for (int round = 0; round < 100; ++round) {
    std::istringstream in(fs::read_file(dir + "/cgroup.procs").value_or(""));
    std::string pid;
    bool any = false;
    while (in >> pid) {
      any = true;
      // ESRCH: it exited meanwhile. Other errors show up when enabling.
      fs::try_write_file(leaf + "/cgroup.procs", pid);
    }
    if (!any) return;
  }
}

void enable(const std::string& dir, const std::set<std::string>& want) {
  std::string cmd;
  for (const auto& c : want) cmd += (cmd.empty() ? "+" : " +") + c;
  int err = fs::try_write_file(dir + "/cgroup.subtree_control", cmd);
  if (err == EBUSY) {
    make_room(dir);
    err = fs::try_write_file(dir + "/cgroup.subtree_control", cmd);
  }
  if (err) {
    Problem p = make_problem(Problem::Kind::controllers_not_enabled, "v2", dir, cmd);
    p.error = err;
    unenforceable(std::move(p));
  }
}

// memory.stat's keys, normalized. "kernel" exists since 5.18; before, its
// parts are added up.
Breakdown breakdown_of(std::map<std::string, uint64_t>& s) {
  Breakdown b;
  b.anon = s["anon"];
  b.file = s["file"];
  b.shmem = s["shmem"];
  b.sock = s["sock"];
  b.kernel = s.count("kernel") ? s["kernel"]
                               : s["kernel_stack"] + s["pagetables"] + s["percpu"] + s["slab"];
  return b;
}

class V2Group : public Group {
 public:
  /// `ancestors_limit`: the lowest memory.max above the group, read once per run.
  /// `hugetlb_events`: the group's hugetlb.<size>.events files, where
  /// hugetlb is limited.
  V2Group(std::string path, bool has_kill, uint64_t ancestors_limit, std::vector<std::string> hugetlb_events)
      : path_(std::move(path)), has_kill_(has_kill), ancestors_limit_(ancestors_limit),
        hugetlb_events_(std::move(hugetlb_events)) {}
  ~V2Group() override { last_attempt(); }

  /// Opens what placement() hands out: for the group itself, or for its
  /// sealed leaf (`sealed`), which the test is then sealed in.
  void open_fds(bool sealed) {
    std::string dir = sealed ? path_ + "/" + kSealedLeaf : path_;
    dir_fd_ = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    procs_fd_ = ::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (dir_fd_ < 0 || procs_fd_ < 0) fail_errno(Failure::Kind::system, "cannot open cgroup " + dir, dir);
    if (sealed) seal_ = &seal_mounts("cgroup2"), stat_ = dir;
    std::string init = path_ + "/" + kInitLeaf;
    if (sealed && (init_procs_fd_ = ::open((init + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC)) < 0)
      fail_errno(Failure::Kind::system, "cannot open cgroup " + init, init);
    // Held open for the samples: a pread each, no path lookup.
    current_fd_ = ::open((path_ + "/memory.current").c_str(), O_RDONLY | O_CLOEXEC);
    max_fd_ = ::open((path_ + "/memory.max").c_str(), O_RDONLY | O_CLOEXEC);
    if (current_fd_ < 0 || max_fd_ < 0) fail_errno(Failure::Kind::system, "cannot open the memory files of " + path_, path_);
    if (sealed && (leaf_max_fd_ = ::open((stat_ + "/memory.max").c_str(), O_RDONLY | O_CLOEXEC)) < 0)
      fail_errno(Failure::Kind::system, "cannot open the memory files of " + stat_, stat_);
    limit_watches_ = fs::watch_writes({path_ + "/memory.max", path_ + "/memory.swap.max", stat_ + "/memory.max",
                                        stat_ + "/memory.swap.max"});
  }

  const std::string& path() const override { return path_; }
  // memory.peak reset for a descriptor of the block's own (6.12+), where
  // the test's processes are; else sampled.
  std::unique_ptr<Block> open_block(int, bool alone) override {
    return alone ? peak_reset_block(stat_) : sampled_block(stat_ + "/memory.current");
  }
  std::string kernel_path() const override {
    const std::string& mount = host().v2_mount;
    return path_.rfind(mount, 0) == 0 ? path_.substr(mount.size()) : path_;
  }

  std::vector<std::string> limit_paths() const override {
    std::string own = kernel_path();
    if (stat_ == path_) return {own};
    return {own, own + "/" + kSealedLeaf};
  }
  Placement placement() const override { return {dir_fd_, {procs_fd_}, seal_, init_procs_fd_}; }
  std::string outside(int pid) const override { return outside_group(pid, kernel_path(), ""); }
  std::set<int> tasks_inside() const override { return listed_tasks(subtree(path_), "cgroup.threads"); }

  Usage usage() const override {
    Usage u;
    u.current = fs::read_u64_at(current_fd_).value_or(0);
    // The group's limit, which a sealed test cannot reach (its leaf's is
    // the one it sees as its own, and the group's still holds it).
    u.limit = fs::read_u64_at(max_fd_);
    if (leaf_max_fd_ >= 0) u.leaf_limit = fs::read_u64_at(leaf_max_fd_);
    auto stat = fs::read_keyed(stat_ + "/memory.stat");
    // Once the group is empty its figures move only as the kernel frees
    // memory on its own (a private /dev/shm torn down after the last
    // exit): finish() uses this read once rather than reading again.
    if (emptied_) emptied_stat_ = stat;
    u.reclaimable_file = stat["active_file"] + stat["inactive_file"];
    // workingset_refault before 5.9, split into _anon and _file since.
    u.refaulted = (stat["workingset_refault"] + stat["workingset_refault_anon"] + stat["workingset_refault_file"]) *
                  page_size();
    u.refaulted_anon = stat["workingset_refault_anon"] * page_size();
    u.file_mapped = stat["file_mapped"];
    u.breakdown = breakdown_of(stat);
    u.swap = fs::read_u64(path_ + "/memory.swap.current").value_or(0);
    return u;
  }

  // Long: one kernel file per figure of Final, read in the order the kernel documents them.
  Final finish() const override {
    Final f;
    f.peak = fs::read_u64(path_ + "/memory.peak");
    // memory.events is hierarchical (local counts are in .local): it counts
    // what happened in sub-groups the test made, too.
    auto events = fs::read_keyed(path_ + "/memory.events");
    f.oom_group_kills = events["oom_group_kill"];
    f.high_events = events["high"];
    // With memory.oom.group the kernel kills the chosen victim, then every
    // task of the group, the victim again among them (oom_kill_process():
    // __oom_kill_process() for the victim, then mem_cgroup_scan_tasks()
    // over the group), and counts oom_kill each time: one more per group
    // kill than processes killed.
    f.oom_kills = events["oom_kill"] - std::min(events["oom_kill"], f.oom_group_kills);
    // Whether the test's own limit was hit: memory.events.local (5.2+) of
    // the group and of a sealed leaf, where the limit is; the hierarchical
    // count also has what limits the test set below itself (a nested
    // memrun's tests) hit.
    // (memory.events.local, 5.2+; without it, the hierarchical count.)
    auto own = fs::read_keyed(path_ + "/memory.events.local");
    bool local = !own.empty();
    if (!local) own = events;
    if (stat_ != path_) {
      auto leaf = fs::read_keyed(stat_ + "/memory.events.local");
      own["max"] += leaf["max"];
      own["oom"] += leaf["oom"];
    }
    f.limit_reached = own["max"] > 0;
    // `oom` counts where the limit was hit: mem_cgroup_oom() raises
    // MEMCG_OOM on the group over its limit; its .local count stays there,
    // the hierarchical one goes up to every ancestor, whichever group's
    // task is killed. So an OOM under a limit the test set on a sub-group
    // shows in the group's hierarchical count and in no .local count of
    // the group or its leaf; an ancestor's lower limit shows in neither.
    if (local) {
      uint64_t below = events["oom"] - std::min(events["oom"], own["oom"]);
      f.oom_at_limit = own["oom"] > 0 || below == 0;
    }
    // pids.events `max`: forks refused at pids.max (a fork bomb, reported).
    // Kernels without pids.events.local count it only in the group that
    // forked (a sealed test's leaf); newer ones also in its ancestors up to
    // the one whose limit was hit: the larger of the two is the count
    // either way.
    for (const auto& dir : stat_ != path_ ? std::vector<std::string>{path_, stat_} : std::vector<std::string>{path_})
      if (auto pe = fs::read_keyed(dir + "/pids.events"); pe.count("max"))
        f.refused_forks = std::max(f.refused_forks, pe["max"]);
    // hugetlb.<size>.events `max`: huge pages refused at the limit.
    for (const auto& file : hugetlb_events_) f.refused_huge_pages += fs::read_keyed(path_ + "/" + file)["max"];
    auto stat = emptied_stat_ ? std::move(*emptied_stat_) : fs::read_keyed(stat_ + "/memory.stat");
    emptied_stat_.reset();
    f.breakdown = breakdown_of(stat);
    f.reclaimable_file = stat["active_file"] + stat["inactive_file"];
    f.raw = {std::move(events), std::move(stat), pressure_totals()};
    f.limit_at_end = fs::read_u64_at(max_fd_).value_or(UINT64_MAX);
    f.limit_written = fs::any_written(limit_watches_);
    // A sealed root test can write its leaf's memory.max (the group's is
    // out of its reach): raising it changes nothing, lowering it would make
    // an OOM under a limit of its own look like one at memrun's.
    if (stat_ != path_)
      f.limit_at_end = std::min(f.limit_at_end, fs::read_u64_at(leaf_max_fd_).value_or(UINT64_MAX));
    f.effective_limit = std::min(ancestors_limit_, f.limit_at_end);
    // memory.swap.current needs swap accounting; memory.swap.peak is 6.5+.
    f.swap_at_end = fs::read_u64(path_ + "/memory.swap.current").value_or(0);
    f.swap_peak = fs::read_u64(path_ + "/memory.swap.peak");
    return f;
  }

  std::optional<uint64_t> stalled_us() const override {
    auto totals = pressure_totals();
    auto full = totals.find("full");
    if (full == totals.end()) return std::nullopt;
    return full->second;
  }

  void signal_all(int sig) override { signal_tree(path_, sig); }

  bool kill_step() override {
    // Once empty, a group stays empty: only a member can fork into it.
    if (emptied_) return true;
    if (!has_kill_) return emptied_ = kill_tree_step(path_);
    // cgroup.kill (5.14+) kills the whole subtree atomically, forks
    // included; the kernel sends the kill once per write, so a second write
    // only repeats it. `populated` in cgroup.events covers the subtree.
    if (!killed_) {
      if (fs::try_write_file(path_ + "/cgroup.kill", "1") == ENOENT) return emptied_ = true;
      killed_ = true;
    }
    auto events = fs::read_keyed(path_ + "/cgroup.events");
    return emptied_ = events.empty() || events["populated"] == 0;
  }

  bool remove_step() override {
    if (removed_) return true;  // (the destructor after the run's loop removed it)
    if (dir_fd_ >= 0) ::close(dir_fd_);
    if (procs_fd_ >= 0) ::close(procs_fd_);
    if (init_procs_fd_ >= 0) ::close(init_procs_fd_);
    if (current_fd_ >= 0) ::close(current_fd_);
    if (max_fd_ >= 0) ::close(max_fd_);
    if (leaf_max_fd_ >= 0) ::close(leaf_max_fd_);
    fs::unwatch(limit_watches_);
    dir_fd_ = procs_fd_ = init_procs_fd_ = current_fd_ = max_fd_ = leaf_max_fd_ = -1;
    // Sub-groups the test made (threaded ones included) go first: rmdir of
    // a group with children fails with EBUSY.
    return removed_ = remove_tree_step(path_);
  }

 private:
  // memory.pressure (PSI, 4.20+; hierarchical): "some"/"full" -> total=.
  std::map<std::string, uint64_t> pressure_totals() const {
    std::map<std::string, uint64_t> totals;
    std::optional<std::string> text;
    try {
      text = fs::read_file(path_ + "/memory.pressure");
    } catch (const Failure&) {
      return totals;  // EOPNOTSUPP: pressure turned off for the group (cgroup.pressure 0, 6.5+)
    }
    std::istringstream in(text.value_or(""));
    for (std::string line; std::getline(in, line);) {
      auto t = line.find("total=");
      if (t != std::string::npos) totals[line.substr(0, line.find(' '))] = fs::parse_u64(line.substr(t + 6)).value_or(0);
    }
    return totals;
  }

  std::string path_;
  // Where memory.stat is read: the group where the test's processes are
  // (see v1.cc: a parent's statistics lag behind its child's since 6.x).
  std::string stat_ = path_;
  bool has_kill_;
  uint64_t ancestors_limit_;
  std::vector<std::string> hugetlb_events_;
  int dir_fd_ = -1, procs_fd_ = -1, init_procs_fd_ = -1;
  int current_fd_ = -1, max_fd_ = -1;  // the group's memory.current and memory.max
  int leaf_max_fd_ = -1;               // a sealed test's leaf's memory.max
  std::vector<int> limit_watches_;     // fs::watch_writes of the limit files
  const std::vector<CgroupMount>* seal_ = nullptr;
  bool killed_ = false, emptied_ = false, removed_ = false;
  mutable std::optional<std::map<std::string, uint64_t>> emptied_stat_;  // usage()
};

class V2Backend : public Backend {
 public:
  V2Backend(const std::string& parent, const std::string& run_name, bool seal) {
    run_ = parent + "/" + run_name;
    std::set<std::string> want = {"memory"};
    if (has_word(parent + "/cgroup.controllers", "pids")) want.insert("pids");
    want_ = want;
    seal_ = seal && can_seal();
    enable(parent, want);
    if (::mkdir(run_.c_str(), 0755) != 0) {
      Problem p = make_problem(Problem::Kind::cannot_create_group, "v2", run_);
      p.error = errno;
      unenforceable(std::move(p));
    }
    try {
      enable(run_, want);
    } catch (...) {
      ::rmdir(run_.c_str());
      throw;
    }
    pids_ = want.count("pids") > 0;
    enable_hugetlb(parent);
    // What this kernel offers, checked once per run rather than per test.
    has_kill_ = fs::exists(run_ + "/cgroup.kill");
    ancestors_limit_ = effective_limit(run_, host().v2_mount, "memory.max");
    swap_ = fs::exists(run_ + "/memory.swap.max");
    oom_group_ = fs::exists(run_ + "/memory.oom.group");
  }
  ~V2Backend() override {
    try {
      close();
    } catch (...) {
    }
  }

  std::string name() const override { return "v2"; }
  const std::string& run_path() const override { return run_; }

  std::unique_ptr<Group> create(const std::string& name, const Limits& limits) override {
    std::string dir = run_ + "/" + name;
    if (::mkdir(dir.c_str(), 0755) != 0) fail_errno(Failure::Kind::system, "cannot create cgroup " + dir, dir);
    auto group = std::make_unique<V2Group>(dir, has_kill_, ancestors_limit_, hugetlb_events_);
    write_limits(dir, limits);
    // Huge pages of hugetlbfs and MAP_HUGETLB are not charged to memory
    // (before 6.6's memory_hugetlb_accounting): without a limit of their
    // own, a test maps as many as the host reserved. They get the memory
    // limit (the kernel rounds it down to whole huge pages).
    for (const auto& file : hugetlb_limits_) fs::write_file(dir + "/" + file, std::to_string(limits.memory_max));
    if (seal_) {
      // The sealed test runs in dir/test with the same limits (what it reads
      // as its own: runtimes size their heaps from it); dir's, which it
      // cannot see, hold whatever it writes into its own. Its controllers
      // come from dir, so that it can delegate further (a nested memrun).
      std::string leaf = dir + "/" + kSealedLeaf;
      enable(dir, want_);
      if (::mkdir(leaf.c_str(), 0755) != 0) fail_errno(Failure::Kind::system, "cannot create cgroup " + leaf, leaf);
      write_limits(leaf, limits);
      // Its init's leaf, bound by dir's limits like the test (see
      // Placement::init_procs_fd).
      std::string init = dir + "/" + kInitLeaf;
      if (::mkdir(init.c_str(), 0755) != 0) fail_errno(Failure::Kind::system, "cannot create cgroup " + init, init);
    }
    group->open_fds(seal_);
    return group;
  }

  uint64_t room() const override {
    return room_below(run_, host().v2_mount, "memory.max", "memory.current");
  }

  Capabilities probe(uint64_t limit) override {
    auto group = create("probe", {limit, std::nullopt, 0, std::optional<uint64_t>(64)});
    const std::string& dir = group->path();
    auto has = [&](const char* file) { return fs::exists(dir + "/" + file); };
    Capabilities c;
    c.limit_read_back = fs::read_u64(dir + "/memory.max").value_or(0);
    c.peak = has("memory.peak") ? "memory.peak" : "no memory.peak (before 5.19): the peak is sampled";
    c.oom_kills = "memory.events (oom_kill; oom_group_kill since 5.19)";
    c.kill_all = has_kill_ ? "cgroup.kill" : "SIGKILL to every pid in cgroup.procs, repeated";
    c.swap = swap_ ? "yes (memory.swap.max)" : "no: swap cannot be limited per test";
    c.pressure = has("memory.pressure") ? "yes (memory.pressure)" : "no";
    c.pids = pids_ ? "yes (pids.max)" : "no pids controller";
    c.hugetlb = hugetlb_limits_.empty() ? "not limited: no hugetlb controller offered here"
                                        : "hugetlb.<size>.max = the memory limit";
    c.placement = "clone3(CLONE_INTO_CGROUP) where the kernel has it (5.7+)";
    c.sealed = seal_;
    c.sockets = "charged with the rest of the test's memory (memory.stat sock)";
    c.limit_writes = limit_writes_sentence(dir + "/memory.max", c.limit_read_back);
    group->destroy_blocking();
    return c;
  }

  void close() override {
    if (closed_) return;
    closed_ = true;
    remove_dir(run_);
  }

 private:
  void write_limits(const std::string& dir, const Limits& limits) {
    fs::write_file(dir + "/memory.max", std::to_string(limits.memory_max));
    if (limits.memory_high) fs::write_file(dir + "/memory.high", std::to_string(*limits.memory_high));
    // memory.swap.max is absent without swap accounting (CONFIG_MEMCG_SWAP,
    // swapaccount=0); swap cannot be limited then, and probe() says so.
    if (swap_) fs::write_file(dir + "/memory.swap.max", std::to_string(limits.swap_max));
    // One OOM kill takes the whole test down: a test is one unit of work,
    // and half a process tree left running would only blur the verdict.
    // (The kernel takes the highest group with oom.group set below the
    // group whose limit was hit: a sealed leaf needs it as well.)
    if (oom_group_) fs::write_file(dir + "/memory.oom.group", "1");
    if (limits.pids_max && pids_) fs::write_file(dir + "/pids.max", std::to_string(*limits.pids_max));
  }

  // Best effort: hugetlb is enabled where the parent offers it (systemd's
  // user managers do not delegate it); memory limits do not depend on it.
  void enable_hugetlb(const std::string& parent) {
    if (!has_word(parent + "/cgroup.controllers", "hugetlb")) return;
    if (fs::try_write_file(parent + "/cgroup.subtree_control", "+hugetlb") != 0 ||
        fs::try_write_file(run_ + "/cgroup.subtree_control", "+hugetlb") != 0)
      return;
    // hugetlb.<size>.max limits the huge pages a test faults in; over it the
    // fault fails (SIGBUS) and hugetlb.<size>.events counts `max`, which the
    // verdict names. (hugetlb.<size>.rsvd.max, 5.7+, would fail the mmap
    // instead, but the kernel counts no event for it: left unlimited.)
    for (const auto& file : listing(run_)) {
      if (file.rfind("hugetlb.", 0) != 0 || file.find(".rsvd.") != std::string::npos) continue;
      if (file.size() > 4 && file.compare(file.size() - 4, 4, ".max") == 0) hugetlb_limits_.push_back(file);
      if (file.size() > 7 && file.compare(file.size() - 7, 7, ".events") == 0) hugetlb_events_.push_back(file);
    }
  }

  std::string run_;
  std::vector<std::string> hugetlb_limits_, hugetlb_events_;  // in each group
  std::set<std::string> want_;  // the controllers each group gets
  uint64_t ancestors_limit_ = UINT64_MAX;
  bool seal_ = false;  // tests are sealed in a leaf of their group
  bool pids_ = false, has_kill_ = false, swap_ = false, oom_group_ = false, closed_ = false;
};

}  // namespace

std::unique_ptr<Backend> open_v2(const std::string& parent, const std::string& run_name, bool seal) {
  return std::make_unique<V2Backend>(parent, run_name, seal);
}

}  // namespace memrun::cgroup
