#include "runner/launch/shield.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>

#include "cgroup/cgroup.h"

namespace memrun {
namespace {

std::string variable(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The socket paths of a D-Bus address: "unix:path=/run/user/1000/bus",
// alternatives separated by ';', keys by ',', values %-escaped. Abstract
// sockets (unix:abstract=) have no path to cover: only a network namespace
// of the test's own would hide them.
std::vector<std::string> unix_paths(const std::string& address) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < address.size()) {
    size_t end = address.find(';', start);
    if (end == std::string::npos) end = address.size();
    std::string alt = address.substr(start, end - start);
    start = end + 1;
    if (alt.rfind("unix:", 0) != 0) continue;
    for (size_t at = 5; at < alt.size();) {
      size_t comma = alt.find(',', at);
      if (comma == std::string::npos) comma = alt.size();
      std::string kv = alt.substr(at, comma - at);
      at = comma + 1;
      if (kv.rfind("path=", 0) != 0) continue;
      std::string path;
      for (size_t i = 5; i < kv.size(); ++i) {
        if (kv[i] == '%' && i + 2 < kv.size() && std::isxdigit(static_cast<unsigned char>(kv[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(kv[i + 2]))) {
          path += static_cast<char>(std::stoi(kv.substr(i + 1, 2), nullptr, 16));
          i += 2;
        } else {
          path += kv[i];
        }
      }
      out.push_back(path);
    }
  }
  return out;
}

Shield find_shield() {
  Shield s;
  const bool privileged = cgroup::has_sys_admin();
  s.user_namespace = !privileged && user_namespaces_work();
  s.possible = privileged || s.user_namespace;
  std::vector<std::string> candidates;
  for (const std::string& dir : {"/run/user/" + std::to_string(::geteuid()), variable("XDG_RUNTIME_DIR")})
    if (!dir.empty()) candidates.insert(candidates.end(), {dir + "/bus", dir + "/systemd/private"});
  for (const auto& p : unix_paths(variable("DBUS_SESSION_BUS_ADDRESS"))) candidates.push_back(p);
  if (privileged) {
    candidates.insert(candidates.end(), {"/run/systemd/private", "/run/dbus/system_bus_socket"});
    for (const auto& p : unix_paths(variable("DBUS_SYSTEM_BUS_ADDRESS"))) candidates.push_back(p);
  }
  for (const auto& c : candidates) {
    struct stat st {};
    // Only sockets: a variable pointing elsewhere never gets a file covered.
    if (::stat(c.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    std::error_code ec;
    std::string path = std::filesystem::canonical(c, ec).string();
    if (ec) continue;
    bool seen = false;
    for (const auto& p : s.sockets) seen = seen || p == path;
    if (!seen) s.sockets.push_back(path);
  }
  return s;
}

}  // namespace

const Shield& shield() {
  static const Shield s = find_shield();
  return s;
}

bool names_the_users_bus(const std::string& name) {
  return name == "DBUS_SESSION_BUS_ADDRESS" || name == "XDG_RUNTIME_DIR";
}

void keep_from_service_managers(Command& cmd) {
  const Shield& s = shield();
  if (!s.possible) return;
  cmd.hidden_sockets = s.sockets;
  cmd.user_namespace = s.user_namespace;
}

std::string shield_sentence() {
  const Shield& s = shield();
  if (s.sockets.empty()) return "no service manager's socket in reach here";
  std::string list;
  for (const auto& p : s.sockets) list += (list.empty() ? "" : ", ") + p;
  if (!s.possible)
    return "tests can reach " + list +
           ": without root, covering them needs user namespaces, which this kernel refuses "
           "(sysctl kernel.unprivileged_userns_clone, or an AppArmor restriction)";
  return "covered in each test's mount namespace" + std::string(s.user_namespace ? " (in a user namespace)" : "") +
         ": " + list + " (a spec's service_manager: true leaves them)";
}

std::string pid_namespace_sentence(bool sealing) {
  const std::string own = "each test under an init of memrun's, PID 1 of a pid namespace of its own with /proc "
                          "mounted afresh: it sees only its own processes";
  if (sealing) return "yes: " + own;
  if (cgroup::has_sys_admin()) return "no (--host-cgroups): tests see every process, memrun's too";
  if (!shield().user_namespace)
    return "no: without root it needs user namespaces, which this kernel refuses; tests see every process, "
           "memrun's too";
  if (!pid_namespaces_work())
    return "no: this kernel refuses a fresh /proc inside a user namespace (the host's /proc is partly covered, "
           "as in many containers); tests see every process, memrun's too";
  return "yes, in each test's user namespace: " + own + " (not for a spec's service_manager: true)";
}

}  // namespace memrun
