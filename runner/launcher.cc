#include "runner/launcher.h"

namespace memrun {

// The prepared processes live on the thread, as long as it does.
Launcher::Launcher(bool init_program)
    : worker_([prepared = std::make_shared<PreparedSet>()](Job& job) { return start(job, *prepared); }) {
  if (init_program) prepare_init_program();
}

Launcher::Started Launcher::start(Job& job, PreparedSet& prepared) {
  Started started{job.serial, {}, nullptr};
  try {
    started.child = job.prepared.empty() ? launch(job.cmd, job.placement)
                                         : prepared.start(std::move(job.cmd), job.placement, job.prepared);
  } catch (...) {
    started.error = std::current_exception();
  }
  return started;
}

}  // namespace memrun
