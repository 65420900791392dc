#include "runner/launch/launcher.h"

namespace memrun {

Launcher::Launcher(bool init_program) : worker_(start) {
  if (init_program) prepare_init_program();
}

Launcher::Started Launcher::start(Job& job) {
  Started started{job.serial, {}, nullptr};
  try {
    started.child = launch(job.cmd, job.placement);
  } catch (...) {
    started.error = std::current_exception();
  }
  return started;
}

}  // namespace memrun
