// Picks the backend asked for (or one that works) and says, when none can
// enforce a memory limit here, why, and what would work instead.
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "cgroup/cgroup.h"
#include "cgroup/error.h"
#include "cgroup/fs.h"

namespace memrun::cgroup {
namespace {

// A parent may be given as a directory or as a path below the hierarchy's mount.
std::string resolve_parent(const std::string& given, const std::string& mount) {
  if (given.empty() || fs::exists(given)) return given;
  return mount + (given.front() == '/' ? "" : "/") + given;
}

Verdict check_v2(const std::string& given) {
  const Host& h = host();
  Verdict v{"v2", resolve_parent(given, h.v2_mount), {}};
  if (h.v2_mount.empty()) {
    v.problem.kind = Problem::Kind::v2_not_mounted;
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
  if (!controllers)
    v.problem = make_problem(Problem::Kind::no_v2_group, "v2", v.parent);
  else if (controllers->find("memory") == std::string::npos)
    v.problem = make_problem(Problem::Kind::no_memory_controller, "v2", v.parent);
  else if (::access(v.parent.c_str(), W_OK) != 0)
    v.problem = make_problem(Problem::Kind::no_permission, "v2", v.parent);
  return v;
}

Verdict check_v1(const std::string& given) {
  const Host& h = host();
  auto mem = h.v1_self.find("memory");
  Verdict v{"v1", "", {}};
  if (mem == h.v1_self.end()) {
    v.problem.kind = Problem::Kind::no_v1_memory;
    return v;
  }
  v.parent = given.empty() ? mem->second : resolve_parent(given, h.v1_mount.at("memory"));
  if (!fs::exists(v.parent + "/memory.limit_in_bytes"))
    v.problem = make_problem(Problem::Kind::no_v1_group, "v1", v.parent);
  else if (::access(v.parent.c_str(), W_OK) != 0)
    v.problem = make_problem(Problem::Kind::no_permission, "v1", v.parent);
  return v;
}

// v1: a run's pids groups go to the place in the pids hierarchy that
// matches its memory parent: memrun's own pids group by default, else the
// path of the given parent below the memory mount, below the pids mount.
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

// What this host is, for a problem found on it.
void host_facts(Problem& p) {
  const Host& h = host();
  p.mode = h.mode;
  p.root = ::geteuid() == 0;
  p.uid = ::geteuid();
  p.systemd_pid1 = h.systemd_pid1;
  p.in_container = in_container();
}

// The facts around a problem: what this host is, and which backends other
// than the one tried would work here (what auto tried is never offered).
void add_facts(const OpenOptions& options, Problem& p) {
  host_facts(p);
  const Host& h = host();
  // What auto tried: the systemd backend where systemd owns the tree (see
  // check_kind), else v2 and v1.
  p.systemd_owns = options.parent.empty() && h.mode == Mode::unified && h.systemd_pid1;
  auto works = [&](Kind kind) {
    bool tried = options.kind == kind ||
                 (options.kind == Kind::automatic && (p.systemd_owns ? kind == Kind::systemd : kind != Kind::systemd));
    if (tried) return false;
    // Where systemd owns the tree, v2 below this process's own cgroup would
    // move the caller's service's processes: never offered.
    if (p.systemd_owns && kind == Kind::v2) return false;
    if (kind == Kind::systemd && !h.systemd_pid1) return false;
    Verdict v = kind == Kind::v2 ? check_v2(options.parent) : kind == Kind::v1 ? check_v1(options.parent) : check_systemd();
    return v.ok();
  };
  for (Kind kind : {Kind::v2, Kind::v1, Kind::systemd})
    if (works(kind)) p.would_work.push_back(kind);
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
  // write only below a cgroup delegated to you). With a parent given, the
  // user names a delegated cgroup themselves.
  if (options.parent.empty() && host().mode == Mode::unified && host().systemd_pid1) return check_systemd();
  // cgroup v2 first: it has memory.peak, memory.events and cgroup.kill.
  Verdict v2 = check_v2(options.parent);
  if (v2.ok()) return v2;
  Verdict v1 = check_v1(options.parent);
  if (v1.ok()) return v1;
  // Neither works: explain the failure of the hierarchy that has the
  // memory controller (v1 on a hybrid host).
  return host().mode == Mode::unified ? v2 : v1;
}

}  // namespace

std::string describe(const Problem& p) {
  using K = Problem::Kind;
  switch (p.kind) {
    case K::none: return "";
    case K::v2_not_mounted: return "cgroup2 is not mounted";
    case K::no_v2_group: return "no cgroup directory at " + p.path;
    case K::no_memory_controller: return "the memory controller is not available in " + p.path;
    case K::no_permission: return "no permission to create cgroups in " + p.path;
    case K::no_v1_memory: return "no cgroup v1 memory hierarchy is mounted";
    case K::no_v1_group: return "no cgroup v1 memory directory at " + p.path;
    case K::not_unified:
      return "the systemd backend needs the unified cgroup hierarchy (cgroup v2); this host is " +
             std::string(to_string(p.mode));
    case K::no_libsystemd:
    case K::no_manager: return p.detail;
    case K::memory_not_delegated:
      return "the memory controller is not delegated to the " + std::string(p.root ? "system" : "user") +
             " manager (it has: " + p.detail + ")";
    case K::scope_without_memory: return "the scope " + p.path + " has no memory controller (it has: " + p.detail + ")";
    case K::cannot_create_group: return "cannot create cgroup " + p.path + ": " + std::strerror(p.error);
    case K::scope_refused: return "systemd refused the scope " + p.path + ": " + p.detail;
    case K::scope_not_started: return "systemd did not start the scope " + p.path + ": " + p.detail;
    case K::no_move_watch:
      return "cannot watch the tests' moves between cgroups (a task that leaves its group and returns between two "
             "walks would go unseen): " + p.detail;
    case K::controllers_not_enabled:
      return "cannot enable the " + p.detail + " controllers in " + p.path + ": " + std::strerror(p.error) +
             " (cgroup v2 allows it only where the parent enabled them too, and only in a cgroup without processes "
             "of its own)";
  }
  return "";
}

void unenforceable(Problem problem) {
  host_facts(problem);
  std::string what = describe(problem), path = problem.path;
  throw Failure(Failure::Kind::cannot_enforce, what, problem.error, path, std::move(problem));
}

Verdict check(const OpenOptions& options) {
  Verdict v = check_kind(options);
  if (!v.ok()) {
    v.problem.backend = v.backend;
    add_facts(options, v.problem);
  }
  return v;
}

Garbage collect_garbage(const OpenOptions& options) {
  Verdict v = check(options);
  Garbage g;
  // Each dead run is removed on its own: one that cannot be (a group whose
  // files cannot be read, a process that will not die) is said and skipped,
  // never a reason for a later run or gc to fail.
  auto remove = [&](const std::string& dir) {
    try {
      remove_tree(dir);
      g.removed.push_back(dir);
    } catch (const Failure& e) {
      g.problems.push_back(e.what());
    }
  };
  if (!v.ok()) return g;
  if (v.backend == "systemd") {
    // A scope ends only when its last process does: a SIGKILLed memrun
    // leaves it running with its tests. Emptying the dead run's groups (the
    // scope is delegated to the user who ran it) lets systemd end and
    // forget the scope.
    for (const auto& scope : dead_scopes())
      for (const auto& child : children_of(scope)) remove(child);
  } else {
    std::vector<std::string> parents = {v.parent};
    if (v.backend == "v1")
      if (auto p = v1_pids_parent(v.parent, !options.parent.empty()); !p.empty()) parents.push_back(p);
    for (const auto& parent : parents)
      for (const auto& dir : dead_runs(parent)) remove(dir);
  }
  // On v1 a run has a directory per hierarchy, under systemd several in
  // its scope: each names its run.
  for (const auto& dir : g.removed)
    if (auto id = run_id_of(dir); !id.empty()) g.runs.push_back(id);
  std::sort(g.runs.begin(), g.runs.end());
  g.runs.erase(std::unique(g.runs.begin(), g.runs.end()), g.runs.end());
  return g;
}

std::unique_ptr<Backend> open(const OpenOptions& options) {
  Verdict v = check(options);
  if (!v.ok())
    throw Failure(Failure::Kind::cannot_enforce,
                  "memory limits cannot be enforced (backend " + v.backend + "): " + describe(v.problem), 0,
                  v.problem.path, v.problem);
  collect_garbage(options);
  if (v.backend == "systemd") return open_systemd(options.run_name, options.seal);
  if (v.backend == "v2") return open_v2(v.parent, options.run_name, options.seal);
  return open_v1(v.parent, options.run_name, options.seal, v1_pids_parent(v.parent, !options.parent.empty()));
}

}  // namespace memrun::cgroup
