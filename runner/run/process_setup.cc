// memrun's own process, set up for running tests (see process_setup.h).
#include "runner/run/process_setup.h"

#include <sys/prctl.h>
#include <sys/resource.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "runner/base/files.h"

namespace memrun {
namespace {

// Under global memory pressure the kernel's OOM killer should pick a test,
// never the runner that reports on it. Lowering one's oom_score_adj needs
// CAP_SYS_RESOURCE (root); then tests get back the value memrun started
// with. Without it, raising is always allowed: tests get memrun's value
// + 500 instead. Returns what tests get.
std::string protect_memrun() {
  const std::string path = "/proc/self/oom_score_adj";
  int own = std::atoi(read_proc(path).c_str());
  if (own > -500 && write_proc(path, "-500") == 0) return std::to_string(own);
  return std::to_string(std::min(1000, own + 500));
}

// Each running test holds up to kFilesPerTest descriptors, so -j 128
// would pass the usual soft limit of 1024. memrun raises its own soft
// limit to the hard one; tests get the original back before exec
// (programs using select(2) break above 1024). Returns the original, or
// {0, 0} when nothing was raised; the same on every call.
rlimit raise_open_files() {
  static const rlimit original = [] {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return rlimit{0, 0};
    rlimit raised = limit;
    raised.rlim_cur = raised.rlim_max;
    return ::setrlimit(RLIMIT_NOFILE, &raised) == 0 ? limit : rlimit{0, 0};
  }();
  return original;
}

}  // namespace

void prepare_runner_process(RunOptions& options) {
  // Daemons a test leaves behind are reparented to memrun, not to PID 1,
  // so that they can be reaped once their group is killed.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  // Once per process: a second protect_memrun() would read back memrun's
  // own lowered value, not the one tests must get.
  static const std::string tests_oom_score_adj = protect_memrun();
  options.oom_score_adj = tests_oom_score_adj;
  options.open_files = raise_open_files();
}

int jobs_within_open_files() {
  raise_open_files();
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return INT_MAX;
  auto fit = (static_cast<int64_t>(limit.rlim_cur) - kFilesOfMemrun) / kFilesPerSlot;
  return static_cast<int>(std::clamp<int64_t>(fit, 1, INT_MAX));
}

}  // namespace memrun
