// memrun's cgroup library: one interface, one file per backend (v2.cc,
// v1.cc; systemd.cc puts a delegated v2 tree behind the same interface).
//
// Lifecycle, as the runner uses it for every test:
//   Backend::create  -> a fresh Group with its limits already written
//   Group::placement -> what a new child needs to start inside the group
//   Group::usage     -> cheap sample while the test runs
//   Group::finish    -> the kernel's figures, read before anything is removed
//   Group::kill_step -> every process in the group, however it detached;
//                       called again until the group is empty
//   Group::remove_step -> rmdir of the subtree, retried while EBUSY
// kill_all_blocking and destroy_blocking do the same for callers without an
// event loop; they wait. A group's destructor never waits; a backend's
// close() (and its destructor, which closes it after the run) waits up to
// 2 s for the run's own directory to go.
//
// The library knows cgroups and nothing of the program that uses it: it
// throws cgroup::Failure (error.h), whose kind the caller maps to an exit
// code; where limits cannot be enforced it says so as a typed Problem
// (problem.h), which the caller turns into advice in its own terms; the
// kernel's figures come as named fields (Final), the raw files only as
// diagnostics to pass on whole. Nothing here includes the caller's headers
// (the build gives it no path to them).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cgroup/host.h"
#include "cgroup/problem.h"

namespace memrun::cgroup {

/// Limits written into a group before any process enters it.
struct Limits {
  uint64_t memory_max = 0;                 ///< hard limit in bytes
  std::optional<uint64_t> memory_high;     ///< throttle point (v2 only)
  uint64_t swap_max = 0;                   ///< swap on top of memory_max
  std::optional<uint64_t> pids_max;        ///< where a pids controller exists
};

/// How a new child gets into its group before its first instruction.
struct Placement {
  /// An O_PATH/O_DIRECTORY fd of the group for clone3(CLONE_INTO_CGROUP), or
  /// -1 when the backend cannot use it (v1).
  int dir_fd = -1;
  /// Open O_WRONLY fds of cgroup.procs files: the child writes "0" to each
  /// (which moves the writer) before it execs.
  std::vector<int> procs_fds;
  /// When not null, the child seals itself in its group before it execs,
  /// in a mount namespace of its own: a new cgroup namespace rooted where
  /// it stands, every one of these mounts detached and mounted again from
  /// inside (the test sees its group as "/" and nothing above it).
  const std::vector<CgroupMount>* seal = nullptr;
  /// v2, sealed: an O_WRONLY fd of cgroup.procs of a leaf beside the sealed
  /// one, under the same limited parent, where the init of a test's pid
  /// namespace moves itself once the test started: v2 lets a group with
  /// processes enable no controller for its children (the "no internal
  /// process" rule), and the test's group is the test's to divide. -1: the
  /// init stays in the test's group (v1 has no such rule).
  int init_procs_fd = -1;
};

/// The normalized part of memory.stat that explains where memory went.
struct Breakdown {
  uint64_t anon = 0, file = 0, kernel = 0, shmem = 0, sock = 0;
  bool operator==(const Breakdown&) const = default;
};

/// A sample taken while the test runs.
struct Usage {
  uint64_t current = 0;           ///< memory.current / usage_in_bytes
  uint64_t reclaimable_file = 0;  ///< active_file + inactive_file
  Breakdown breakdown;            ///< where the memory is
  /// Bytes the kernel had to read back soon after evicting them, so far
  /// (workingset_refault_anon + _file, in pages times the page size): what
  /// a group whose working set does not fit its limit spends its time on.
  uint64_t refaulted = 0;
  /// Of `refaulted`, the anonymous memory read back from swap
  /// (workingset_refault_anon, 5.9+; 0 before, where the two are one count).
  uint64_t refaulted_anon = 0;
  /// Page cache of the group mapped into its processes' address spaces now
  /// (v2 file_mapped, v1 total_mapped_file): their code, their mmap()s.
  uint64_t file_mapped = 0;
  /// Bytes of the group's memory in swap now (v2 memory.swap.current; v1
  /// memory.stat total_swap): 0 without swap or swap accounting.
  uint64_t swap = 0;
  /// The group's own hard limit read back now (memory.max,
  /// memory.limit_in_bytes; page-aligned; UINT64_MAX for v2's "max"), nullopt
  /// when not read: a test that could write its group's files may have
  /// raised it for a while, and put it back before it ended.
  std::optional<uint64_t> limit;
  /// A sealed test's leaf's hard limit read back now, nullopt without a
  /// leaf: the test can write it, and lower it for a while (a kill under
  /// it would look like one at the group's limit) and put it back.
  std::optional<uint64_t> leaf_limit;
};

/// What the kernel says about a finished test.
struct Final {
  /// The kernel's own high-water mark (v2 memory.peak since 5.19, v1
  /// memory.max_usage_in_bytes); nullopt where the kernel keeps none.
  std::optional<uint64_t> peak;
  uint64_t oom_kills = 0;        ///< processes the OOM killer killed
  uint64_t oom_group_kills = 0;  ///< v2 memory.oom.group kills (5.19+)
  /// True when usage hit the limit at least once (v2 memory.events `max`,
  /// v1 memory.failcnt): the kernel had to reclaim to stay under it.
  bool limit_reached = false;
  /// Whether the OOM kills came at the limit memrun set (the group's, a
  /// sealed test's leaf's, or a lower one above them: the effective limit),
  /// false when only limits the test set on groups below its own were hit:
  /// v2 memory.events `oom` against memory.events.local (5.2+); v1 the OOM
  /// notifier on the test's group, else the failcnt of those groups
  /// against the sub-groups' (the kernel log's oom_memcg= tells exactly:
  /// see Group::limit_paths). nullopt where the kernel cannot tell
  /// (limit_reached stands in).
  std::optional<bool> oom_at_limit;
  /// Forks the kernel refused at pids.max in the group and its sub-groups
  /// (pids.events `max`): a test that did not run as written.
  uint64_t refused_forks = 0;
  /// Huge pages the kernel refused at the group's hugetlb limits
  /// (hugetlb.<size>.events `max`, v2).
  uint64_t refused_huge_pages = 0;
  /// Times usage crossed memory.high and the kernel throttled the group
  /// (v2 memory.events `high`; 0 on v1, which has no memory.high).
  uint64_t high_events = 0;
  Breakdown breakdown;
  /// Page cache the kernel could reclaim (active_file + inactive_file) at
  /// the end; it is charged to the group but is no requirement of the test.
  uint64_t reclaimable_file = 0;
  /// The hard limit that really applied: the smaller of the group's own and
  /// every ancestor's.
  uint64_t effective_limit = 0;
  /// The group's own hard limit as the kernel reports it at the end
  /// (memory.max, memory.limit_in_bytes; page-aligned): a test that could
  /// write its group's files may have raised it.
  uint64_t limit_at_end = UINT64_MAX;
  /// Whether the group's or its leaf's limit files (memory.limit_in_bytes
  /// and memsw, memory.max and swap.max) were written while the test ran,
  /// as inotify saw (memrun writes them before the test starts): a limit
  /// raised or lowered between two samples and put back still shows.
  bool limit_written = false;
  /// Whether the group's high-water marks (v1 memory.max_usage_in_bytes
  /// and memsw), which `peak` reads, were written while the test ran: a
  /// write resets them, and the peak is then not the test's.
  bool peak_reset = false;
  /// The kernel's high-water mark of the group's swap (v2 memory.swap.peak,
  /// 6.5+); nullopt where it keeps none (the runner's samples stand in).
  std::optional<uint64_t> swap_peak;
  /// The kernel's high-water mark of memory and swap together (v1
  /// memory.memsw.max_usage_in_bytes, with swap accounting): what headroom
  /// rests on when swap is allowed; nullopt on v2, which keeps none.
  std::optional<uint64_t> memory_and_swap_peak;
  uint64_t swap_at_end = 0;  ///< as Usage::swap, when the test has ended
  /// Processes of the test found outside its memory group at the end (v1:
  /// still in its pids group, which holds them whatever they did to their
  /// memory cgroup). They are killed with the rest. (The runner adds those
  /// it saw leave while the test ran, on every backend.)
  uint64_t escaped = 0;
  /// v1 with TCP accounting: the first memory sub-group the test made (its
  /// path below the test's group), seen when it was made or at the end.
  /// v1 charges socket buffers only in a group whose
  /// memory.kmem.tcp.limit_in_bytes was written before the socket was made,
  /// and no write can be made sure to come first: a process of the test can
  /// enter the group the moment it exists. Empty: none, or v2 (which
  /// charges sockets in every group).
  std::string uncharged_sub_group;
  /// The kernel's files as it names their keys, for a report to carry
  /// whole: what a reader of the report may look up. Every figure a caller
  /// decides by is a named field above; these are never read by key.
  struct Raw {
    std::map<std::string, uint64_t> events;       ///< memory.events (v1: failcnt as `max`, `oom_kill`)
    std::map<std::string, uint64_t> stat;         ///< memory.stat
    std::map<std::string, uint64_t> pressure_us;  ///< memory.pressure totals in µs ("some", "full"); empty without PSI
    bool operator==(const Raw&) const = default;
  } raw;
  bool operator==(const Final&) const = default;
};

/// A part of a test measured on its own (a caller's "peak of this block"),
/// from Group::open_block() to close(): what the process that opened it,
/// and what that process starts meanwhile, are charged.
class Block {
 public:
  virtual ~Block() = default;
  /// How it is measured: "memory.max_usage_in_bytes" (v1: a group of its
  /// own below the test's, its high-water mark), "memory.peak" (v2 from
  /// 6.12: a reset of the group's mark for a descriptor of its own), or
  /// "sampled every 1 ms" (elsewhere, or a block while another is open).
  const std::string& source() const { return source_; }
  /// The usage the block's peak counts from (0 for a group of its own).
  uint64_t baseline() const { return baseline_; }
  /// Whether the caller must call sample() every kSampleEvery while it is open.
  bool sampled() const { return sampled_; }
  static constexpr int kSampleEveryUs = 1000;
  virtual void sample() {}
  /// Ends the block: its high-water mark (the peak is it less the
  /// baseline) and its usage now. Throws Failure.
  struct Figures {
    uint64_t high = 0, now = 0;
  };
  virtual Figures close() = 0;

 protected:
  std::string source_;
  uint64_t baseline_ = 0;
  bool sampled_ = false;
};

/// One test's cgroup. Removed by remove_step() (a loop retries it on a
/// timer) or destroy_blocking(); the destructor, as a last resort, makes
/// one attempt (kill, rmdir) and never waits: what is still busy then is
/// left for gc.
class Group {
 public:
  virtual ~Group() = default;
  /// The group's directory (the memory hierarchy's, on v1).
  virtual const std::string& path() const = 0;
  /// The group as the kernel names it in its log (an OOM kill's
  /// `task_memcg=`): its path below the root of its hierarchy.
  virtual std::string kernel_path() const = 0;
  /// The groups that hold a limit memrun set, as the kernel log names them
  /// (an OOM kill's `oom_memcg=`): this group, and a sealed test's leaf;
  /// never a group the test made below.
  virtual std::vector<std::string> limit_paths() const { return {kernel_path()}; }
  /// Whether an OOM kill in a sub-group is counted in this group's own
  /// counters too, so that removing the sub-group cannot hide it (v2:
  /// memory.events is hierarchical). v1 counts it only in the sub-group's
  /// memory.oom_control, gone with it: the kernel log must be read.
  virtual bool counts_kills_below() const { return true; }
  /// How to place a child in this group.
  virtual Placement placement() const = 0;
  /// Where task `id` (a process, or one thread of one: each has cgroups of
  /// its own) is when it is not in this group or below it: its cgroup as
  /// /proc/ID/cgroup names it (the memory hierarchy's on v1, the unified
  /// one on v2); "" when it is inside, or gone.
  virtual std::string outside(int id) const = 0;
  /// The tasks (threads) in this group and below it, as the groups list
  /// them (v1 `tasks`, v2 `cgroup.threads`): one read a group, where
  /// outside() is one a thread. A walk of many threads asks outside() only
  /// of those not listed. Empty where unknown (then ask each).
  virtual std::set<int> tasks_inside() const { return {}; }
  /// Current usage; a handful of small reads, cheap enough to sample often.
  virtual Usage usage() const = 0;
  /// Reads every figure; call after the test ended and before its removal.
  virtual Final finish() const = 0;
  /// memory.pressure's `full` total in microseconds: how long all of the
  /// group's tasks were stalled on memory at once (reclaim, refaults), its
  /// sub-groups' included; nullopt where the kernel keeps no per-group
  /// pressure (v1, kernels without PSI). One small read.
  virtual std::optional<uint64_t> stalled_us() const { return std::nullopt; }
  /// Opens a block for process `pid`, a process of the test (see Block).
  /// `alone`: no other block of the test is open, so the process may be
  /// moved into a group of the block's own (v1); otherwise it is sampled.
  /// Throws Failure when the kernel refuses.
  virtual std::unique_ptr<Block> open_block(int pid, bool alone) = 0;
  /// The test's first process started in the group (its pid): a backend
  /// may keep it for diagnostics; the cgroupfs backends need nothing.
  virtual void started(int pid) { (void)pid; }
  /// Sends `sig` once to every process of the group and its sub-groups: a
  /// polite SIGTERM before the kill, which a process may catch.
  virtual void signal_all(int sig) = 0;
  /// Kills every process in the group and its sub-groups (a test may make
  /// them) once, and returns at once: true when no process is left. Never
  /// waits: a killed process leaves its group only when it has finished
  /// exiting (a large address space takes a while to tear down), so the
  /// run's loop calls it again on a timer until it says true.
  virtual bool kill_step() = 0;
  /// One attempt to remove the group with every sub-group, deepest first:
  /// true when all are gone; false while the kernel says EBUSY (a killed
  /// process has not finished exiting: kill_step again, then retry).
  /// Throws Failure on any other error.
  virtual bool remove_step() = 0;
  /// kill_step until it says true, sleeping between tries, for up to
  /// `timeout_ms`: for callers without a loop only (probe, a suite's
  /// listing). Returns false if processes remain.
  bool kill_all_blocking(int timeout_ms = 2000);
  /// kill_all_blocking, then remove_step until it says true, sleeping
  /// between tries, for up to 2 s: for callers without a loop only.
  /// Idempotent; throws Failure when the group cannot be removed.
  void destroy_blocking();

 protected:
  /// For the destructors of backends: a remove_step, and if the group is
  /// still there a kill_step and another remove_step; never waits, throws
  /// nothing.
  void last_attempt() noexcept;

 private:
  bool destroyed_ = false;
};

/// What a backend's groups offer on this kernel, each a sentence of what
/// the kernel does: a caller asks the library, never the filesystem.
struct Capabilities {
  uint64_t limit_read_back = 0;  ///< the probe group's hard limit, as the kernel reports it
  std::string peak, oom_kills, kill_all, swap, pressure, pids, hugetlb, placement;
  std::string sockets;  ///< whether socket buffers are charged and limited
  std::string limit_writes;  ///< whether a write to a test's limit while it runs is seen
  bool sealed = false;  ///< its tests are sealed in their groups (see Placement::seal)
};

/// Where a backend makes its groups, and whether it can enforce there.
class Backend {
 public:
  virtual ~Backend() = default;
  /// "v2", "v1" or "systemd".
  virtual std::string name() const = 0;
  /// The directory holding this run's groups.
  virtual const std::string& run_path() const = 0;
  /// A new group named `name` below the run's directory with `limits`
  /// written. Throws Failure if it cannot be made.
  virtual std::unique_ptr<Group> create(const std::string& name,
                                        const Limits& limits) = 0;
  /// How much more memory the run's tree may be charged before an
  /// ancestor's limit is hit: the smallest `limit - usage` over the limited
  /// ancestors of run_path(); UINT64_MAX when none is limited. What a
  /// scheduler may hand out (see runner/plan/budget.h).
  virtual uint64_t room() const = 0;
  /// Makes a group named "probe" with a `limit` (and a pids limit), reads
  /// back what it offers, and removes it. Throws Failure when it cannot.
  virtual Capabilities probe(uint64_t limit) = 0;
  /// Removes the run's directory (after every group was removed).
  virtual void close() = 0;
};

/// Options for opening a backend.
struct OpenOptions {
  Kind kind = Kind::automatic;  ///< which backend; automatic picks one that works
  /// Where to put the run's directory instead of this process's own cgroup
  /// (a path below the mount, or an absolute directory); "" for the default.
  std::string parent;
  /// Directory name of this run's sub-tree, unique per run (see run_name()).
  std::string run_name;
  /// Seal each test in its group where this process may (see can_seal);
  /// false lets tests see the host's hierarchies as they are.
  bool seal = true;
};

/// What open() would pick, and whether it can enforce there.
struct Verdict {
  std::string backend;  ///< "v2", "v1" or "systemd"
  std::string parent;   ///< where groups would be made
  Problem problem;      ///< kind none when limits can be enforced
  bool ok() const { return problem.kind == Problem::Kind::none; }
};

/// Checks what open() would pick, without creating anything.
Verdict check(const OpenOptions& options);

/// Opens the backend: creates the run's directory, enables controllers.
/// Throws Failure(cannot_enforce) carrying the Problem (see check) when
/// memory limits cannot be enforced.
std::unique_ptr<Backend> open(const OpenOptions& options);

// Backend constructors, one per file; open() picks between them.
// `seal`: make each group sealable (a child group "test" that the test runs
// in, both limited; Placement::seal set) when can_seal() says memrun may.
std::unique_ptr<Backend> open_v2(const std::string& parent, const std::string& run_name, bool seal);
/// `pids_parent`: where the run's pids groups go ("" for none).
std::unique_ptr<Backend> open_v1(const std::string& parent, const std::string& run_name, bool seal,
                                 const std::string& pids_parent);
/// A transient scope from the systemd manager (the user's when not root),
/// with cgroup v2 groups below it. `run_name` names the scope.
std::unique_ptr<Backend> open_systemd(const std::string& run_name, bool seal);

/// The name of the child group a sealed test runs in, below its group.
constexpr const char* kSealedLeaf = "test";
/// The groups Group::open_block makes on v1 are named this, then a number.
constexpr const char* kBlockGroup = "memrun-block-";
/// The leaf beside it that holds the test's init (Placement::init_procs_fd).
constexpr const char* kInitLeaf = "init";

/// Whether this process may seal tests: cgroup namespaces (4.6+), a cgroup
/// mount to replace, and CAP_SYS_ADMIN (root, outside unprivileged containers).
bool can_seal();

/// Whether this process has CAP_SYS_ADMIN in its user namespace (root,
/// outside unprivileged containers): what unshare(CLONE_NEWNS) and mount need.
bool has_sys_admin();

/// The mounts of Host::mounts of filesystem type `fstype` ("cgroup" for the
/// v1 backend, "cgroup2" for v2 and systemd): those the backend's limits
/// live in, which its sealed tests get mounted afresh.
const std::vector<CgroupMount>& seal_mounts(const std::string& fstype);

/// Whether libsystemd, which the systemd backend loads when it is used,
/// can be loaded here: "" when it can, else why and what to install.
std::string libsystemd_missing();

/// Whether the systemd backend can work here (a reachable manager, cgroup v2,
/// memory delegated); used by check().
Verdict check_systemd();

/// The controllers the systemd manager can hand to a scope of this user.
std::string delegated_controllers();

/// The smallest finite limit among `dir` and its ancestors up to `top`, for
/// the file `limit_file`; UINT64_MAX when none is set.
uint64_t effective_limit(const std::string& dir, const std::string& top,
                         const std::string& limit_file);

/// The smallest `limit - usage` among `dir` and its ancestors up to `top`
/// that have a finite limit in `limit_file` (usage from `usage_file`);
/// UINT64_MAX when none has.
uint64_t room_below(const std::string& dir, const std::string& top,
                    const std::string& limit_file, const std::string& usage_file);

/// Capabilities::limit_writes for a probe group's limit file `file`, which
/// holds `limit`: whether a write to it is seen (fs::writes_seen).
std::string limit_writes_sentence(const std::string& file, uint64_t limit);

/// `dir` and every group below it, deepest first (the order rmdir needs).
std::vector<std::string> subtree(const std::string& dir);

/// The processes listed in `dir`'s group and its sub-groups, as this pid
/// namespace numbers them (0 for one it cannot see; a threaded sub-group's
/// by thread id): the kernel's own answer to "which processes are in this
/// group", with no cgroup path to match.
std::vector<pid_t> processes_below(const std::string& dir);

/// Sends `sig` once to every process listed in `dir`'s cgroup.procs and its
/// sub-groups'. For a polite SIGTERM before kill_all: unlike SIGKILL, a
/// process may catch it and clean up. Pid 0 (a process of a pid namespace
/// memrun cannot see) is never signalled.
void signal_tree(const std::string& dir, int sig);

/// SIGKILL, once, to every process listed in `dir` and its sub-groups (for
/// kernels without cgroup.kill). Returns true when none was listed: the
/// subtree is empty. `walked`, when given, gets the subtree it read
/// (deepest first), so that a caller need not read it again.
bool kill_tree_step(const std::string& dir, std::vector<std::string>* walked = nullptr);

/// rmdir of `dir`'s subtree, deepest first; between a busy group's tries
/// SIGKILL again to what it lists. True when all are gone, false while one
/// is busy (EBUSY); throws Failure on any other error.
bool remove_tree_step(const std::string& dir);

/// remove_tree_step of a subtree already read (`groups`, deepest first):
/// once a group is empty nothing can add to it, so its walk after the last
/// kill stands.
bool remove_groups_step(const std::vector<std::string>& groups);

/// The kernel's page size in bytes.
uint64_t page_size();

/// The start time of process `pid` (clock ticks after boot, field 22 of
/// /proc/PID/stat), or 0 when there is no such process. With the pid, it
/// identifies a process across pid reuse.
uint64_t process_start_time(int pid);

/// The inode of this process's pid namespace (0 when /proc cannot say).
uint64_t pid_namespace();

// How runs are named, which is how gc tells a dead run's groups from a live
// one's and from anything else: a run's directory (on systemd, its scope
// unit "<name>.scope") is kRunPrefix + its id, and an id ends with the
// identity of the process that made it.

/// What every run's directory name starts with.
constexpr const char* kRunPrefix = "memrun-";

/// The identity a run's id ends with: "<pid>-<start time>-<pid namespace>"
/// of this process.
std::string run_identity();

/// A new run id for this process: "<label>-<run_identity()>". `label`
/// (a time, a purpose) has no '/'.
std::string run_id(const std::string& label);

/// The directory name of the run `id`: kRunPrefix + id (OpenOptions::run_name).
std::string run_name(const std::string& id);

/// The id of the run a group or directory below it belongs to: its last
/// path component that starts with kRunPrefix, without the prefix and a
/// systemd scope's ".scope"; "" when the path is no run's.
std::string run_id_of(const std::string& path);

/// Run directories (kRunPrefix + "...-<pid>-<start>-<ns>") below `parent`
/// whose process is provably gone: it lived in this pid namespace and no
/// process has its pid and start time (killed by SIGKILL, or by the
/// machine). A live run's, or one of another pid namespace, are never listed.
std::vector<std::string> dead_runs(const std::string& parent);

/// Kills every process in the tree below `dir` and removes its
/// directories, deepest first. Throws when one cannot be removed.
void remove_tree(const std::string& dir);

/// What collect_garbage did.
struct Garbage {
  std::vector<std::string> runs;      ///< ids of the dead runs cleaned up, sorted, each once
  std::vector<std::string> removed;   ///< directories removed
  std::vector<std::string> problems;  ///< what could not be removed, and why
};

/// Removes what dead runs left below the places `options` would use (each
/// v1 hierarchy, the v2 parent, or the systemd manager's run scopes).
/// open() does this before it makes the run's directory.
Garbage collect_garbage(const OpenOptions& options);

/// The directories of the manager's kRunPrefix*.scope units whose process
/// is provably gone (see dead_runs).
std::vector<std::string> dead_scopes();

/// Every task id the file `list` (tasks, cgroup.threads) of each of
/// `groups` names.
std::set<int> listed_tasks(const std::vector<std::string>& groups, const std::string& list);

/// The sub-groups of `dir`, not descending.
std::vector<std::string> children_of(const std::string& dir);

/// Where task `id` (a process or a thread: /proc/TID/cgroup is the
/// thread's own) is, unless it is in the group `kernel_path` or below it:
/// its line of /proc/ID/cgroup for the hierarchy with `controller` ("" for
/// the unified one). "" when inside, or gone.
std::string outside_group(int id, const std::string& kernel_path, const std::string& controller);

/// rmdir(2) of a group with no sub-groups, retried while EBUSY (processes
/// still exiting) for up to 2 s. Throws Failure on failure.
void remove_dir(const std::string& dir);

}  // namespace memrun::cgroup
