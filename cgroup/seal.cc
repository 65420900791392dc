// Sealing a test in its group: as root, a test could otherwise write any
// file of the hierarchy (raise its own limit, move itself to the root) and
// pass. A sealed test sees its own group as the root of every cgroup
// hierarchy, and its limit is set once more on a parent it cannot see.
// This file says whether memrun may seal and which mounts; the test's
// process takes the steps itself before exec (Placement::seal: memrun's
// init::seal, in runner/launch/init.cc).
//
// Kernel rules this file obeys (cgroup_namespaces(7), cgroup-v2.rst
// "Namespace", mount_namespaces(7)):
// - unshare(CLONE_NEWCGROUP) (4.6+) makes the caller's current cgroup, in
//   every hierarchy, the root of its new cgroup namespace: /proc/self/cgroup
//   shows "/", and a cgroup filesystem mounted from inside is rooted there,
//   with no way above it ("..": the mount's root).
// - Mounts inherited from before still show the whole hierarchy, so those
//   of the hierarchies the backend's limits live in (seal_mounts: v1's
//   memory and pids, or cgroup2) are detached (MNT_DETACH: lazily, whatever
//   still uses them) and mounted again from inside. Each detach waits for
//   an RCU grace period (~0.1 ms a test), which is why the others are left
//   as they are: the test may see them, and they hold no limit of memrun's.
//   The mount namespace is the child's own and a slave of the host's
//   (MS_SLAVE, set by the caller): nothing done there reaches the host.
// - Inside a non-initial cgroup namespace, a v1 hierarchy can be mounted
//   again only as it exists (same controllers, or the same name=); cgroup2's
//   superblock options are set from the initial namespace only.
// - The limit the test could still write is its own group's (the
//   namespace's root): memrun sets the same limit on the parent above, which
//   the test cannot reach, so raising its own changes nothing. A root that
//   enters another namespace on purpose (setns(2) with PID 1's namespace
//   files) is beyond this; memrun still reads the limit back at the end.
#include <sstream>

#include "cgroup/cgroup.h"
#include "cgroup/fs.h"

namespace memrun::cgroup {

bool has_sys_admin() {
  // CAP_SYS_ADMIN is bit 21 of CapEff.
  std::istringstream in(fs::read_file("/proc/self/status").value_or(""));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("CapEff:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> 21) & 1;
  return false;
}

bool can_seal() {
  return !host().mounts.empty() && fs::exists("/proc/self/ns/cgroup") && has_sys_admin();
}

const std::vector<CgroupMount>& seal_mounts(const std::string& fstype) {
  // Built once per process (the layout is detected once); the pointer a
  // Placement carries stays valid for the run.
  static const auto of = [](const std::string& type) {
    std::vector<CgroupMount> out;
    for (const auto& m : host().mounts)
      if (m.fstype == type) out.push_back(m);
    return out;
  };
  static const std::vector<CgroupMount> v1 = of("cgroup"), v2 = of("cgroup2");
  return fstype == "cgroup" ? v1 : v2;
}

}  // namespace memrun::cgroup
