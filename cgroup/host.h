// What this machine's cgroups look like, detected once per process (as crun
// does): which hierarchies are mounted where, and where memrun itself sits.
// Nothing here creates or changes a cgroup.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace memrun::cgroup {

/// How the cgroup hierarchies are mounted.
enum class Mode {
  unified,  ///< only cgroup2: every controller on v2
  hybrid,   ///< v1 controller hierarchies plus a cgroup2 mount (often empty)
  legacy,   ///< only v1 hierarchies
  none,     ///< no cgroupfs mounted at all
};

/// "unified", "hybrid", "legacy" or "none".
const char* to_string(Mode mode);

/// A cgroup filesystem as mounted here: what it takes to mount it again in
/// a test's own namespaces (see Placement::seal).
struct CgroupMount {
  std::string point;   ///< where it is mounted (mountinfo's octal escapes undone)
  std::string fstype;  ///< "cgroup" (v1) or "cgroup2"
  /// v1: which hierarchy ("memory", "cpu,cpuacct", "name=systemd", plus flags
  /// such as "xattr"); empty for cgroup2, whose options belong to the
  /// superblock and are set from the initial namespace only.
  std::string options;
  unsigned long flags = 0;  ///< MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC as mounted
};

/// The cgroup layout as seen from this process.
struct Host {
  Mode mode = Mode::none;
  /// Where cgroup2 is mounted; empty when it is not.
  std::string v2_mount;
  /// memrun's own v2 cgroup directory (below v2_mount); empty without v2.
  std::string v2_self;
  /// Controllers available in v2_self (its cgroup.controllers).
  std::set<std::string> v2_controllers;
  /// v1 controller name ("memory", "pids", ...) -> memrun's own directory in
  /// that controller's hierarchy.
  std::map<std::string, std::string> v1_self;
  /// v1 controller name -> where its hierarchy is mounted.
  std::map<std::string, std::string> v1_mount;
  /// The mounts of the hierarchies a test's limits live in (every cgroup2
  /// mount; v1 ones with memory, pids or hugetlb), in mountinfo's order
  /// (parents first): what a sealed test gets mounted afresh.
  std::vector<CgroupMount> mounts;
  /// True when PID 1 is systemd (its cgroup tree belongs to systemd).
  bool systemd_pid1 = false;
};

/// Parses a layout from the text of /proc/self/mountinfo and
/// /proc/self/cgroup; the seam for tests. Reads cgroup.controllers of the v2
/// directory it finds under `prefix` (normally empty).
Host parse_host(const std::string& mountinfo, const std::string& proc_cgroup,
                const std::string& prefix = "");

/// This process's layout, detected on first use and cached.
const Host& host();

}  // namespace memrun::cgroup
