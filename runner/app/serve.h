// memrun serve: the memrun of one pytest process. `pytest --memrun` (the
// pytest_memrun plugin, python/) starts one per pytest process (one per
// pytest-xdist worker) and speaks to it over a socket pair only the two
// of them hold: memrun's standard input. For each case the plugin asks
// for, memrun makes the case's group and, where it seals tests (root), a
// sealed test's init that starts no command (Command::vessel); pytest
// forks the case into that init's pid namespace and hands memrun the
// fork's pidfd; memrun moves it into the group, and from then on samples,
// walks and times it as any test; pytest says how the case ended, and
// memrun judges it and writes its record. The plugin never judges: it
// shows memrun's verdict.
//
// The protocol, one JSON object per message (SOCK_SEQPACKET, at most
// kMaxMessage bytes, descriptors beside it as SCM_RIGHTS), the plugin's
// message first, each answered in order:
//   hello {cwd}                      -> hello {memrun, backend, sealed, ...}
//                                       or error {message, cannot_enforce}
//   case {id, nodeid, marks, where, file, line, cwd, run, runs, default_memory}
//                                    -> ready {id, sealed, env, unset, ...}
//                                       [+ the init's pid, mount and cgroup
//                                       namespaces when sealed], or error {id, message}
//   take {id} [+ the fork's pidfd]   -> taken {id}, or error {id, message}
//   block {id, op: begin|end, name}  -> block {id, source, baseline_bytes[, high_bytes, now_bytes]}
//                                       (a memrun_peak block of the running case, measured by memrun)
//   ended {id, status, outcome, user_s, system_s}
//                                    -> verdict {id, record, final, text}
//   abandon {id, why}                -> verdict {id, ...} (outcome error)
//   finish {} [+ a file for the report]
//                                    -> finished {passed, failed, skipped}
// The fork's parent must be the plugin's process (its peer credentials):
// no other process can be handed in. EOF ends memrun serve, and the group
// of a case under way with it.
#pragma once

#include "runner/app/commands.h"
#include "runner/app/result.h"

namespace memrun {

/// The largest message either side sends.
constexpr size_t kMaxServeMessage = 256 * 1024;

/// memrun serve: answers the plugin on `socket` (standard input) until it
/// says finish or goes. `o`: the backend's flags (--backend,
/// --cgroup-parent, --host-cgroups, --sample-interval).
Result serve_command(const Options& o, int socket = 0);

}  // namespace memrun
