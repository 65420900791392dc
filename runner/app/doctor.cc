#include "runner/app/doctor.h"

#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <sstream>

#include "cgroup/error.h"
#include "runner/base/error.h"
#include "runner/base/files.h"
#include "runner/base/units.h"
#include "runner/launch/shield.h"
#include "runner/run/enforce.h"

namespace memrun {
namespace {

bool has_swap() {
  std::istringstream in(read_proc("/proc/swaps"));
  std::string line;
  std::getline(in, line);  // header
  return static_cast<bool>(std::getline(in, line));
}

}  // namespace

// Long: doctor's rows in the order it prints them, then the proof (a real group, a limit read back).
Result doctor(const cgroup::OpenOptions& options, std::FILE* out) {
  const auto& h = cgroup::host();
  utsname u{};
  ::uname(&u);
  auto row = [&](const std::string& k, const std::string& v) { fmt::print(out, "  {:<18} {}\n", k, v); };
  fmt::print(out, "memrun doctor\n");
  row("kernel", u.release);
  row("user", ::geteuid() == 0 ? "root" : "uid " + std::to_string(::geteuid()));
  std::string mode = cgroup::to_string(h.mode);
  if (h.mode == cgroup::Mode::hybrid)
    mode += " (controllers on cgroup v1; cgroup2 mounted at " + h.v2_mount + ")";
  row("cgroup mode", mode);
  if (!h.v2_self.empty()) {
    std::string ctrls;
    for (const auto& c : h.v2_controllers) ctrls += (ctrls.empty() ? "" : " ") + c;
    row("cgroup v2 self", h.v2_self);
    row("  controllers", ctrls.empty() ? "(none)" : ctrls);
  }
  for (const char* c : {"memory", "pids"})
    if (auto it = h.v1_self.find(c); it != h.v1_self.end()) row(std::string("cgroup v1 ") + c, it->second);
  row("PID 1", h.systemd_pid1 ? "systemd" : "not systemd");
  row("service manager", shield_sentence());
  row("libsystemd", libsystemd_sentence());
  row("swap", has_swap() ? "active (memrun sets swap limits to the spec's swap, default 0)" : "none");

  cgroup::Verdict v = cgroup::check(options);
  row("backend", v.backend + (options.kind == cgroup::Kind::automatic ? " (auto)" : ""));
  row("groups made in", v.parent.empty() ? "-" : v.parent);
  if (v.backend == "systemd") row("delegated", cgroup::delegated_controllers() + " (memory is needed)");
  if (!v.ok()) {
    fmt::print(out, "\ncannot enforce memory limits: {}.\n  fix: {}\n", cgroup::describe(v.problem), advice(v.problem));
    return Result::stopped(Category::cannot_enforce);
  }
  // Prove it: a real group with a real limit, read back, then removed.
  try {
    cgroup::OpenOptions o = options;
    o.run_name = cgroup::run_name(cgroup::run_id("doctor"));
    auto backend = cgroup::open(o);
    if (backend->name() == "systemd") row("run cgroup", backend->run_path());
    const uint64_t limit = 64 * MiB;
    cgroup::Capabilities c = backend->probe(limit);
    row("peak", c.peak);
    row("OOM kills", c.oom_kills);
    row("kill all", c.kill_all);
    row("swap accounting", c.swap);
    row("pressure (PSI)", c.pressure);
    row("pids limit", c.pids);
    row("huge pages", c.hugetlb);
    row("placement", c.placement);
    row("sealed", sealed_sentence(c.sealed));
    row("pid namespace", pid_namespace_sentence(c.sealed));
    row("socket buffers", c.sockets);
    row("limit writes", c.limit_writes);
    backend->close();
    if (c.limit_read_back != limit) {
      fmt::print(out, "\ncannot enforce: wrote a {} limit, read back {}\n", format_size(limit),
                 format_size(c.limit_read_back));
      return Result::stopped(Category::cannot_enforce);
    }
    fmt::print(out, "\nmemory limits can be enforced here: made a test group in {}, set {}, read it back.\n",
               v.parent, format_size(limit));
    return Result::passed();
  } catch (const cgroup::Failure& e) {
    // A failed cgroupfs call is not the host's answer: it ends doctor as
    // it ends a run (main's table).
    if (e.kind() != cgroup::Failure::Kind::cannot_enforce) throw;
    fmt::print(out, "\ncannot enforce memory limits: {}\n", failure_text(e));
    return Result::stopped(Category::cannot_enforce);
  }
}

}  // namespace memrun
