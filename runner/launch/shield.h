// What keeps a test from the service managers. A manager starts what it is
// asked to (systemd-run, systemctl start, a D-Bus activation) in a cgroup of
// its own, outside the test's group and so outside its limit, and a
// service it starts is no descendant of the test: memrun could not even
// find it. So tests get no route to a manager unless their spec says
// `service_manager: true`.
#pragma once

#include <string>
#include <vector>

#include "runner/launch/child.h"

namespace memrun {

/// The routes memrun closes, found once per process.
struct Shield {
  /// The sockets a service manager or its bus listens on that exist here
  /// (canonical, each once): the user's manager and session bus
  /// (/run/user/UID, XDG_RUNTIME_DIR, DBUS_SESSION_BUS_ADDRESS) and, with
  /// CAP_SYS_ADMIN, the system's (/run/systemd/private, the system bus).
  /// Without privilege the system's manager starts nothing for a test.
  std::vector<std::string> sockets;
  /// Without CAP_SYS_ADMIN a test's mount namespace needs a user namespace
  /// of its own: true when that is the case and it works here.
  bool user_namespace = false;
  /// False when tests cannot be given mounts of their own at all (no
  /// CAP_SYS_ADMIN, no user namespaces): then the sockets stay in reach.
  bool possible = false;
};

/// The shield of this process (computed on first use).
const Shield& shield();

/// Whether `name` is a variable that points a test at the user's bus
/// (DBUS_SESSION_BUS_ADDRESS, XDG_RUNTIME_DIR): tests do not inherit them
/// unless their spec says `service_manager: true`.
bool names_the_users_bus(const std::string& name);

/// Closes the routes of shield() for `cmd` (sockets covered in a mount
/// namespace of its own, in a user namespace where needed), when possible.
void keep_from_service_managers(Command& cmd);

/// One line for `memrun doctor`: what tests can and cannot reach.
std::string shield_sentence();

/// For `memrun doctor`: whether tests run in a pid namespace of their own
/// (see Command::pid_namespace), given whether memrun seals them here.
std::string pid_namespace_sentence(bool sealing);

}  // namespace memrun
