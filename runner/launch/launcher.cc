#include "runner/launch/launcher.h"

#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner/launch/shield.h"

namespace memrun {
namespace {

// waitid's account of an ended child as the status wait4 would give.
int wait_status(const siginfo_t& info) {
  if (info.si_code == CLD_EXITED) return (info.si_status & 0xff) << 8;
  return (info.si_status & 0x7f) | (info.si_code == CLD_DUMPED ? 0x80 : 0);
}

}  // namespace

void RealLauncher::keep_from_service_managers(Command& cmd) const { memrun::keep_from_service_managers(cmd); }

RealLauncher::RealLauncher(bool init_program) : worker_(start) {
  if (init_program) prepare_init_program();
}

Launcher::Started RealLauncher::start(Job& job) {
  Started started{job.serial, {}, nullptr};
  try {
    started.child = launch(job.cmd, job.placement);
  } catch (...) {
    started.error = std::current_exception();
  }
  return started;
}

std::vector<Launcher::Ended> RealLauncher::reap(const std::vector<int>* only) {
  std::vector<Ended> ended;
  rusage usage;
  if (only) {
    for (int pidfd : *only) {
      siginfo_t info{};
      if (::syscall(SYS_waitid, kWaitPidfd, pidfd, &info, WEXITED | WNOHANG, &usage) == 0 && info.si_pid != 0)
        ended.push_back({info.si_pid, wait_status(info), usage});
    }
    return ended;
  }
  int status;
  for (pid_t pid; (pid = ::wait4(-1, &status, WNOHANG, &usage)) > 0;) ended.push_back({pid, status, usage});
  return ended;
}

}  // namespace memrun
