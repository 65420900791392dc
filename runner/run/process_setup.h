// memrun's own process, set up for running tests: once per command that
// runs any (run, exec, bisect), never by the loop itself.
#pragma once

#include "runner/run/run.h"

namespace memrun {

/// memrun's process-wide set-up for running tests, once per command that
/// runs any: it becomes its descendants' subreaper (what a test leaves is
/// reaped once its group is killed), lowers its own oom_score_adj (the OOM
/// killer picks a test, never memrun) and raises its open-files limit to
/// the hard one; `options` gets what the tests must get back.
void prepare_runner_process(RunOptions& options);

/// The descriptors a running test holds at most: its pidfd, two pipes, two
/// logs, /dev/null past a cap, and its group's (up to seven: procs files, the
/// usage and limit files sampled, a sealed test's leaf's limit, v1's OOM
/// notifier's eventfd and file).
inline constexpr int kFilesPerTest = 15;
/// A slot of -j holds up to two tests' (the next test starts in it while
/// the one before is read and removed); memrun itself holds up to
/// kFilesOfMemrun, and the group made ahead for the next test.
inline constexpr int kFilesPerSlot = 2 * kFilesPerTest;
inline constexpr int kFilesOfMemrun = 32 + kFilesPerTest;

/// How many tests can run at once within memrun's open-files limit (see
/// kFilesPerSlot), once memrun has raised its soft limit to the hard one.
int jobs_within_open_files();

}  // namespace memrun
