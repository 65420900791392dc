// Picks the backend for --backend and says, when none can enforce a memory
// limit here, why and what to do about it.
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "cgroup/error.h"
#include "cgroup/fs.h"

namespace memrun::cgroup {
namespace {

// --cgroup-parent may name a directory or a path below the hierarchy's mount.
std::string resolve_parent(const std::string& given, const std::string& mount) {
  if (given.empty() || fs::exists(given)) return given;
  return mount + (given.front() == '/' ? "" : "/") + given;
}

Verdict check_v2(const std::string& given) {
  const Host& h = host();
  Verdict v{"v2", resolve_parent(given, h.v2_mount), "", ""};
  if (h.v2_mount.empty()) {
    v.problem = "cgroup2 is not mounted";
    v.fix = "mount it (mount -t cgroup2 none /sys/fs/cgroup) or use --backend v1";
    return v;
  }
  if (v.parent.empty()) {
    v.parent = h.v2_self;
    // Started from a process memrun once moved into a leaf (see v2.cc):
    // the run belongs next to that leaf, where controllers are enabled.
    const std::string leaf = "/memrun.leaf";
    if (v.parent.size() > leaf.size() && v.parent.compare(v.parent.size() - leaf.size(), leaf.size(), leaf) == 0)
      v.parent.resize(v.parent.size() - leaf.size());
  }
  auto controllers = fs::read_file(v.parent + "/cgroup.controllers");
  if (!controllers) {
    v.problem = "no cgroup directory at " + v.parent;
    v.fix = "pass an existing cgroup v2 directory to --cgroup-parent";
  } else if (controllers->find("memory") == std::string::npos) {
    v.problem = "the memory controller is not available in " + v.parent;
    v.fix = h.mode == Mode::hybrid
                ? "this host is hybrid: memory is bound to cgroup v1. Use "
                  "--backend v1 (or auto), or boot with "
                  "systemd.unified_cgroup_hierarchy=1 to get memory on v2"
                : "enable it in the parent's cgroup.subtree_control (as root: "
                  "echo +memory > <parent>/cgroup.subtree_control), or ask "
                  "systemd for a delegated scope";
  } else if (::access(v.parent.c_str(), W_OK) != 0) {
    v.problem = "no permission to create cgroups in " + v.parent;
    v.fix = "run memrun as root, or pass a delegated cgroup you own to --cgroup-parent";
  }
  return v;
}

Verdict check_v1(const std::string& given) {
  const Host& h = host();
  auto mem = h.v1_self.find("memory");
  Verdict v{"v1", "", "", ""};
  if (mem == h.v1_self.end()) {
    v.problem = "no cgroup v1 memory hierarchy is mounted";
    v.fix = h.mode == Mode::unified ? "this host is unified: use --backend v2 (or auto)"
                                    : "mount one (mount -t cgroup -o memory none /sys/fs/cgroup/memory)";
    return v;
  }
  v.parent = given.empty() ? mem->second : resolve_parent(given, h.v1_mount.at("memory"));
  if (!fs::exists(v.parent + "/memory.limit_in_bytes")) {
    v.problem = "no cgroup v1 memory directory at " + v.parent;
    v.fix = "pass an existing directory of the memory hierarchy to --cgroup-parent";
  } else if (::access(v.parent.c_str(), W_OK) != 0) {
    v.problem = "no permission to create cgroups in " + v.parent;
    v.fix = "run memrun as root";
  }
  return v;
}

// v1: a run's pids groups go to the place in the pids hierarchy that
// matches its memory parent: memrun's own pids group by default, else the
// path of --cgroup-parent below the memory mount, below the pids mount.
// "" when there is no such place: the run then makes no pids groups (its
// `pids` limits are not applied), and neither it nor gc touches any other
// place of the pids hierarchy (its root above all).
std::string v1_pids_parent(const std::string& memory_parent, bool given) {
  const Host& h = host();
  auto self = h.v1_self.find("pids");
  auto mount = h.v1_mount.find("pids");
  auto memory = h.v1_mount.find("memory");
  if (!given) return self != h.v1_self.end() ? self->second : "";
  if (mount == h.v1_mount.end() || memory == h.v1_mount.end()) return "";
  if (memory_parent.compare(0, memory->second.size(), memory->second) != 0) return "";
  std::string place = mount->second + memory_parent.substr(memory->second.size());
  return fs::exists(place + "/cgroup.procs") ? place : "";
}

bool in_container() {
  // Docker's and Podman's marks; systemd's own test (the `container`
  // variable of PID 1) needs root to read.
  return fs::exists("/.dockerenv") || fs::exists("/run/.containerenv");
}

// What works here instead, when `failed` cannot enforce: only fixes that
// apply on this host, and never the backend just tried (a fix that
// suggests one is kept only where that backend would work).
std::string fixes_here(const OpenOptions& options, const Verdict& failed) {
  const Host& h = host();
  std::vector<std::string> fixes;
  bool suggests_backend = failed.fix.find("--backend") != std::string::npos;
  if (!suggests_backend && failed.fix.find("run memrun as root") == std::string::npos) fixes.push_back(failed.fix);
  // What auto tried: the systemd backend where systemd owns the tree (see
  // check_kind), else v2 and v1.
  bool systemd_owns = options.parent.empty() && h.mode == Mode::unified && h.systemd_pid1;
  auto works = [&](Kind kind) {
    bool tried = options.kind == kind ||
                 (options.kind == Kind::automatic && (systemd_owns ? kind == Kind::systemd : kind != Kind::systemd));
    if (tried) return false;
    // Where systemd owns the tree, v2 below memrun's own cgroup would move
    // the caller's service's processes: never offered.
    if (systemd_owns && kind == Kind::v2) return false;
    if (kind == Kind::systemd && !h.systemd_pid1) return false;
    Verdict v = kind == Kind::v2 ? check_v2(options.parent) : kind == Kind::v1 ? check_v1(options.parent) : check_systemd();
    return v.problem.empty();
  };
  for (auto [kind, name] : {std::pair{Kind::v2, "v2"}, {Kind::v1, "v1"}, {Kind::systemd, "systemd"}})
    if (works(kind)) fixes.push_back(std::string("use --backend ") + name + " (it works here)");
  if (::geteuid() != 0) {
    fixes.push_back("run memrun as root (sudo memrun ...)");
    if (h.systemd_pid1 && h.mode == Mode::unified)
      fixes.push_back("let your user manager delegate the memory controller: sudo loginctl enable-linger $USER, "
                      "then run memrun from a login session of yours (memrun doctor shows the delegation)");
    fixes.push_back("pass a cgroup you own with the memory controller to --cgroup-parent");
  } else if (systemd_owns) {
    fixes.push_back("start memrun in a scope delegated to it (systemd-run --scope -p Delegate=yes memrun ...) and "
                    "pass that scope's cgroup to --cgroup-parent");
  }
  if (in_container())
    fixes.push_back("in a container: start it with a writable cgroup of its own (docker/podman run --privileged, "
                    "or --cgroupns=private with the memory controller delegated)");
  std::string text;
  for (size_t i = 0; i < fixes.size(); ++i) text += (i ? "\n       " : "") + fixes[i];
  return text;
}

Verdict check_kind(const OpenOptions& options) {
  switch (options.kind) {
    case Kind::v2: return check_v2(options.parent);
    case Kind::v1: return check_v1(options.parent);
    case Kind::systemd: return check_systemd();
    case Kind::automatic: break;
  }
  // Where systemd is PID 1 on cgroup v2, the tree is its own: root and user
  // alike get a cgroup from it as a delegated scope, never by moving the
  // processes of the unit memrun was started in (systemd.io/CGROUP_DELEGATION:
  // write only below a cgroup delegated to you). With --cgroup-parent the
  // user names a delegated cgroup themselves.
  if (options.parent.empty() && host().mode == Mode::unified && host().systemd_pid1) return check_systemd();
  // cgroup v2 first: it has memory.peak, memory.events and cgroup.kill.
  Verdict v2 = check_v2(options.parent);
  if (v2.problem.empty()) return v2;
  Verdict v1 = check_v1(options.parent);
  if (v1.problem.empty()) return v1;
  // Neither works: explain the failure of the hierarchy that has the
  // memory controller (v1 on a hybrid host).
  return host().mode == Mode::unified ? v2 : v1;
}

}  // namespace

Verdict check(const OpenOptions& options) {
  Verdict v = check_kind(options);
  if (!v.problem.empty()) v.fix = fixes_here(options, v);
  return v;
}

Garbage collect_garbage(const OpenOptions& options) {
  Verdict v = check(options);
  Garbage g;
  // Each dead run is removed on its own: one that cannot be (a group whose
  // files cannot be read, a process that will not die) is said and skipped,
  // never a reason for a later run, gc or doctor to fail.
  auto remove = [&](const std::string& dir) {
    try {
      remove_tree(dir);
      g.removed.push_back(dir);
    } catch (const Failure& e) {
      g.problems.push_back(e.what());
    }
  };
  if (!v.problem.empty()) return g;
  if (v.backend == "systemd") {
    // A scope ends only when its last process does: a SIGKILLed memrun
    // leaves it running with its tests. Emptying the dead run's groups (the
    // scope is delegated to the user who ran it) lets systemd end and
    // forget the scope.
    for (const auto& scope : dead_scopes())
      for (const auto& child : children_of(scope)) remove(child);
    return g;
  }
  std::vector<std::string> parents = {v.parent};
  if (v.backend == "v1")
    if (auto p = v1_pids_parent(v.parent, !options.parent.empty()); !p.empty()) parents.push_back(p);
  for (const auto& parent : parents)
    for (const auto& dir : dead_runs(parent)) remove(dir);
  return g;
}

std::unique_ptr<Backend> open(const OpenOptions& options) {
  Verdict v = check(options);
  if (!v.problem.empty())
    throw Failure(Failure::Kind::cannot_enforce, "memory limits cannot be enforced (backend " + v.backend + "): " +
                                                    v.problem + ".\n  fix: " + v.fix);
  collect_garbage(options);
  if (v.backend == "systemd") return open_systemd(options.run_name, options.seal);
  if (v.backend == "v2") return open_v2(v.parent, options.run_name, options.seal);
  return open_v1(v.parent, options.run_name, options.seal, v1_pids_parent(v.parent, !options.parent.empty()));
}

}  // namespace memrun::cgroup
