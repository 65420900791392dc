#include "runner/run/enforce.h"

#include <vector>

#include "cgroup/cgroup.h"

namespace memrun {
namespace {

using K = cgroup::Problem::Kind;

const char* flag_value(cgroup::Kind kind) {
  switch (kind) {
    case cgroup::Kind::v2: return "v2";
    case cgroup::Kind::v1: return "v1";
    case cgroup::Kind::systemd: return "systemd";
    case cgroup::Kind::automatic: break;
  }
  return "auto";
}

std::string delegate_fix(unsigned uid) {
  std::string id = std::to_string(uid);
  return "as root, delegate memory to user managers: mkdir -p /etc/systemd/system/user@.service.d && "
         "printf '[Service]\\nDelegate=pids memory\\n' > /etc/systemd/system/user@.service.d/memrun-delegate.conf"
         " && systemctl daemon-reload && systemctl restart user@" + id +
         ".service (or log in again). Check too that no slice above it sets DisableControllers=memory "
         "(systemctl show -p DisableControllers user-" + id + ".slice user.slice)";
}

// The fix of the problem itself, where it is neither another backend nor
// root (those come with the rest of the advice, where they apply): "" for
// none.
std::string own_fix(const cgroup::Problem& p) {
  switch (p.kind) {
    case K::no_v2_group: return "pass an existing cgroup v2 directory to --cgroup-parent";
    case K::no_memory_controller:
      // Hybrid: memory is bound to cgroup v1, whose backend is offered
      // where it works.
      if (p.mode == cgroup::Mode::hybrid) return "";
      return "enable it in the parent's cgroup.subtree_control (as root: echo +memory > "
             "<parent>/cgroup.subtree_control), or ask systemd for a delegated scope";
    case K::no_v1_memory:
      if (p.mode == cgroup::Mode::unified) return "";
      return "mount one (mount -t cgroup -o memory none /sys/fs/cgroup/memory)";
    case K::no_v1_group: return "pass an existing directory of the memory hierarchy to --cgroup-parent";
    case K::no_libsystemd: return "install systemd's library (apt-get install libsystemd0)";
    case K::no_manager:
      return p.root ? "start memrun on a host where systemd is PID 1"
                    : "log in (a user manager runs per login), or enable lingering: loginctl enable-linger " +
                          std::to_string(p.uid);
    case K::memory_not_delegated:
    case K::scope_without_memory: return delegate_fix(p.uid);
    case K::cannot_create_group:
      return "a read-only cgroup mount or a reached cgroup.max.descendants refuses new groups; memrun doctor "
             "shows what this host allows";
    case K::scope_refused:
    case K::scope_not_started:
      return (p.root ? "journalctl -u " : "journalctl --user -u ") + p.path + " says why the manager did not start it";
    case K::no_move_watch:
      return "run without --host-cgroups (each test sealed in its group sees no other), or on a kernel with "
             "tracing (CONFIG_FTRACE, tracefs mounted at /sys/kernel/tracing)";
    case K::none:
    case K::v2_not_mounted:
    case K::no_permission:
    case K::not_unified:
    case K::controllers_not_enabled: break;
  }
  return "";
}

}  // namespace

std::string advice(const cgroup::Problem& p) {
  std::vector<std::string> fixes;
  if (auto own = own_fix(p); !own.empty()) fixes.push_back(own);
  for (cgroup::Kind kind : p.would_work)
    fixes.push_back(std::string("use --backend ") + flag_value(kind) + " (it works here)");
  if (!p.root) {
    fixes.push_back("run memrun as root (sudo memrun ...)");
    if (p.systemd_pid1 && p.mode == cgroup::Mode::unified)
      fixes.push_back("let your user manager delegate the memory controller: sudo loginctl enable-linger $USER, "
                      "then run memrun from a login session of yours (memrun doctor shows the delegation)");
    fixes.push_back("pass a cgroup you own with the memory controller to --cgroup-parent");
  } else if (p.systemd_owns) {
    fixes.push_back("start memrun in a scope delegated to it (systemd-run --scope -p Delegate=yes memrun ...) and "
                    "pass that scope's cgroup to --cgroup-parent");
  }
  if (p.in_container)
    fixes.push_back("in a container: start it with a writable cgroup of its own (docker/podman run --privileged, "
                    "or --cgroupns=private with the memory controller delegated)");
  std::string text;
  for (size_t i = 0; i < fixes.size(); ++i) text += (i ? "\n       " : "") + fixes[i];
  return text;
}

std::string failure_text(const cgroup::Failure& e) {
  const cgroup::Problem& p = e.problem();
  switch (p.kind) {
    case K::none: return e.what();
    // A run's own directory refused controllers: its parent is the one to change.
    case K::controllers_not_enabled: return cgroup::describe(p) + "; choose another --cgroup-parent";
    case K::scope_without_memory:
    case K::no_move_watch: return cgroup::describe(p) + ".\n  fix: " + own_fix(p);
    default:
      return "memory limits cannot be enforced (backend " + p.backend + "): " + cgroup::describe(p) +
             ".\n  fix: " + advice(p);
  }
}

std::string sealed_sentence(bool sealing) {
  if (sealing)
    return "yes: each test in a cgroup namespace of its own, the hierarchies of its limits mounted afresh for it, "
           "its limit set again on a parent it cannot see";
  return cgroup::can_seal() ? "no (--host-cgroups): tests see the host's hierarchies; a raised limit is found at the end"
                            : "no: needs CAP_SYS_ADMIN (root) and cgroup namespaces; a raised limit is found at the end";
}

std::string libsystemd_sentence() {
  std::string missing = cgroup::libsystemd_missing();
  return missing.empty() ? "loaded (libsystemd.so.0: the systemd backend can be used)" : missing;
}

}  // namespace memrun
