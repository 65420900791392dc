// Every move of a task into a cgroup, and every new task, as the kernel
// records them: a task may leave its group and come back between two looks
// at /proc/TID/cgroup, and only the kernel's own record of the move sees it.
//
// What the kernel offers (6.18): inotify and fanotify on a group's `tasks`
// or `cgroup.procs` see a write to that one file (without the task it
// moved), not the write that took a task out through another group's file;
// a task that leaves and exits while out writes nothing back. The
// tracepoint cgroup:cgroup_attach_task fires on every migration (a write
// to `tasks`, `cgroup.procs`, `cgroup.threads`), v1 and v2 alike, with the
// task and where it went; sched:sched_process_fork names each new task's
// parent, so that a task made after the last walk is still known. A task
// born in another group (v2's clone3 CLONE_INTO_CGROUP, 5.7+) is no
// migration (cgroup_post_fork()): task:task_newtask, which carries the
// clone's flags, names it; cgroup:cgroup_notify_populated names the group
// it was born in when that group had no task, and /proc, read at once,
// names any other while the task lives. All are read in a tracefs
// instance of the caller's own, in the kernel's binary format
// (per_cpu/cpuN/trace_pipe_raw), so that no text a name holds frames an
// event. A reader with root may reach the instance: writes to its
// controls, a remade instance and a foreign read of its pipes (which
// takes events: the kernel counts more read than read() took) are seen;
// read() then says the record is not whole.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace memrun::cgroup {

class MoveWatch {
 public:
  struct Event {
    /// born: a task cloned with CLONE_INTO_CGROUP (v2), into a group of the
    /// cloner's choosing; its fork follows it.
    enum class Kind { fork, attach, born } kind = Kind::fork;
    int task = 0;      ///< fork, born: the new task; attach: the task moved (a thread id)
    int parent = 0;    ///< fork, born: the task that made it (born: the cloning thread)
    /// attach: the group it entered, below its hierarchy's root; born:
    /// the group it was born in (read_births()), "" when not known.
    std::string path;
    uint64_t ns = 0;   ///< when, on CLOCK_MONOTONIC
    int by = 0;        ///< attach, born: the task that did it (the kernel's common_pid)
  };

  /// Starts watching, in a tracefs instance named `name` (unique to the
  /// caller: "memrun-PID-N"), the moves into groups of the hierarchy that
  /// holds the memory controller (v1's memory hierarchy; on v2 the unified
  /// one) and every new task. Mounts tracefs at /sys/kernel/tracing where
  /// no tracefs is mounted (its usual place; it stays, as a boot's would).
  /// Throws Failure(cannot_enforce) with Problem::no_move_watch (`detail`:
  /// why) when the kernel's record cannot be read: no tracefs (not root,
  /// a kernel without tracing), no such tracepoint.
  static std::unique_ptr<MoveWatch> open(const std::string& name);
  /// Removes its instance: an rmdir waits for the kernel's RCU grace
  /// period (52-63 ms measured on 6.18, two busy cores), so once a run,
  /// at its end, never in the destructor. read() says the record is not
  /// whole after it.
  void close();
  /// Never waits: an instance not close()d stays, to remove_stale() (`memrun
  /// gc`, or the next run's start) once this process is gone.
  ~MoveWatch();
  MoveWatch(const MoveWatch&) = delete;
  MoveWatch& operator=(const MoveWatch&) = delete;

  /// Appends the events the kernel recorded before this call, in the order
  /// they happened; never blocks. False when the kernel lost some (a full
  /// buffer, per each CPU's stats), another reader took some (the stats'
  /// "read events" above what this took) or the instance was tampered
  /// with (see intact()): what happened meanwhile is not known.
  bool read(std::vector<Event>& out);

  /// The instances named `prefix`PID-... whose PID is no live process of
  /// `comm` (a watcher killed before it could remove its own), removed;
  /// returns their paths. Nothing when tracefs is not mounted.
  static std::vector<std::string> remove_stale(const std::string& prefix, const std::string& comm);

 private:
  MoveWatch() = default;
  struct Field {
    size_t offset = 0, size = 0;
  };
  struct Format {
    int id = -1;
    std::vector<std::pair<std::string, Field>> fields;
    Field operator[](const std::string& name) const;
  };
  static Format format_of(const std::string& file);
  bool parse_page(const unsigned char* page, size_t len, std::vector<Event>& out, uint64_t& taken);
  void guard();  ///< watches its controls (see intact())
  void watch_births(const std::string& dir);
  void read_births(std::vector<Event>& events, size_t from) const;
  void place_births(uint64_t cut);
  /// A CPU's events so far: lost (overwritten, dropped when full, or lost
  /// to a commit that overran) and read, by anyone (per_cpu/cpuN/stats).
  struct Counts {
    uint64_t lost = 0, read = 0;
  };
  Counts counts_on(size_t cpu) const;
  /// No control of the instance was written since open(), and it is still
  /// the one open() made.
  bool intact() const;
  std::vector<Counts> counts_;  ///< counts_on() of each CPU at the last read
  std::vector<int> guards_;     ///< inotify watches of its controls
  ino_t dir_ino_ = 0;
  std::vector<Event> held_;  ///< read after the cut of the last call

  std::string dir_;  ///< the instance
  /// trace_pipe_raw of each CPU, opened for each read: a descriptor kept
  /// open is one an unsealed test could take from /proc/PPID/fd and block
  /// on (the path it can open as well: see intact()).
  std::vector<std::string> cpus_;
  std::vector<unsigned char> page_;
  size_t data_offset_ = 16, commit_size_ = 8;
  Format attach_, fork_, newtask_, populated_;  ///< newtask_.id, populated_.id -1: not watched (v1)
  /// Groups that became populated (v2): by whom, which, when; until
  /// place_births() knows whose they are.
  struct Filled {
    int by;
    std::string path;
    uint64_t ns;
  };
  std::vector<Filled> filled_;
  uint64_t last_cut_ = 0;  ///< read()'s previous cut
};

}  // namespace memrun::cgroup
