#include "cgroup/host.h"

#include <sys/mount.h>

#include <cctype>
#include <sstream>
#include <vector>

#include "cgroup/fs.h"

namespace memrun::cgroup {

const char* to_string(Mode mode) {
  switch (mode) {
    case Mode::unified: return "unified";
    case Mode::hybrid: return "hybrid";
    case Mode::legacy: return "legacy";
    case Mode::none: return "none";
  }
  return "none";
}

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

// Joins a mount point with a cgroup path from /proc/self/cgroup. The path is
// relative to the hierarchy's root; the mount may show a sub-tree of it
// (mountinfo's "root" field), as inside a container.
std::string join(const std::string& mount, const std::string& root,
                 const std::string& path) {
  std::string rel = path;
  if (root != "/" && rel.rfind(root, 0) == 0) rel = rel.substr(root.size());
  if (rel == "/" || rel.empty()) return mount;
  return mount + rel;
}

struct Mount {
  std::string root, point;
};

// mountinfo writes space, tab, newline and backslash in paths as \ooo.
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

// A mount's own flags (mountinfo's field 6) that a new mount must keep.
unsigned long mount_flags(const std::string& opts) {
  unsigned long flags = 0;
  for (const auto& o : split(opts, ',')) {
    if (o == "ro") flags |= MS_RDONLY;
    if (o == "nosuid") flags |= MS_NOSUID;
    if (o == "nodev") flags |= MS_NODEV;
    if (o == "noexec") flags |= MS_NOEXEC;
  }
  return flags;
}

// Whether a v1 hierarchy holds a test's limits (memory, pids, hugetlb):
// the ones a sealed test must not see above its group. Its other
// hierarchies (cpu, devices, name=systemd, ...) stay as they are: each
// mount replaced costs a test ~0.1 ms (an RCU grace period per detach).
bool holds_limits(const std::string& super) {
  for (const auto& o : split(super, ','))
    if (o == "memory" || o == "pids" || o == "hugetlb") return true;
  return false;
}

// A v1 superblock's options without those a new mount of the same
// hierarchy must not repeat: rw/ro are the mount's, release_agent may be
// set from the initial namespace only.
std::string hierarchy_options(const std::string& super) {
  std::string out;
  for (const auto& o : split(super, ',')) {
    if (o == "rw" || o == "ro" || o.rfind("release_agent=", 0) == 0) continue;
    out += (out.empty() ? "" : ",") + o;
  }
  return out;
}

}  // namespace

// Long: two passes that fill one Host, each beside the format it reads:
// mountinfo's lines, then /proc/self/cgroup's against the mounts found.
Host parse_host(const std::string& mountinfo, const std::string& proc_cgroup,
                const std::string& prefix) {
  Host h;
  Mount v2;
  std::map<std::string, Mount> v1;  // controller -> mount
  std::istringstream lines(mountinfo);
  std::string line;
  while (std::getline(lines, line)) {
    // id parent maj:min root mountpoint opts [optional...] - fstype src super
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream head(line.substr(0, dash)), tail(line.substr(dash + 3));
    std::string id, parent, dev, root, point, opts, fstype, src, super;
    head >> id >> parent >> dev >> root >> point >> opts;
    tail >> fstype >> src >> super;
    if (fstype == "cgroup2" || (fstype == "cgroup" && holds_limits(super)))
      h.mounts.push_back({prefix + unescape(point), fstype, fstype == "cgroup" ? hierarchy_options(super) : "",
                          mount_flags(opts)});
    if (fstype == "cgroup2") {
      if (v2.point.empty()) v2 = {root, point};
    } else if (fstype == "cgroup") {
      for (const auto& opt : split(super, ',')) {
        if (opt == "rw" || opt == "ro" || opt.find('=') != std::string::npos)
          continue;
        if (!v1.count(opt)) v1[opt] = {root, point};
      }
    }
  }
  std::istringstream cg(proc_cgroup);
  while (std::getline(cg, line)) {
    // hierarchy-id:controller,list:/path
    auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string ctrls = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (ctrls.empty()) {
      if (!v2.point.empty()) {
        h.v2_mount = prefix + v2.point;
        h.v2_self = prefix + join(v2.point, v2.root, path);
      }
      continue;
    }
    for (const auto& c : split(ctrls, ',')) {
      auto m = v1.find(c);
      if (m == v1.end()) continue;
      h.v1_self[c] = prefix + join(m->second.point, m->second.root, path);
      h.v1_mount[c] = prefix + m->second.point;
    }
  }
  if (!h.v2_self.empty()) {
    auto text = fs::read_file(h.v2_self + "/cgroup.controllers");
    if (text)
      for (const auto& c : split(fs::trim(*text), ' '))
        if (!c.empty()) h.v2_controllers.insert(c);
  }
  bool any_v1 = !h.v1_self.empty();
  if (!h.v2_mount.empty())
    h.mode = any_v1 ? Mode::hybrid : Mode::unified;
  else
    h.mode = any_v1 ? Mode::legacy : Mode::none;
  return h;
}

const Host& host() {
  static const Host cached = [] {
    Host h = parse_host(fs::read_file("/proc/self/mountinfo").value_or(""),
                        fs::read_file("/proc/self/cgroup").value_or(""));
    // systemd's PID 1 is the only process with that comm name as init.
    auto comm = fs::read_file("/proc/1/comm").value_or("");
    h.systemd_pid1 = comm.rfind("systemd", 0) == 0;
    return h;
  }();
  return cached;
}

}  // namespace memrun::cgroup
