// The ways a Block is measured (cgroup.h), for the backends: internal to
// cgroup/.
#pragma once

#include <memory>
#include <set>
#include <string>

#include "cgroup/cgroup.h"

namespace memrun::cgroup {

/// Samples `usage_file` (memory.current, memory.usage_in_bytes) while open.
std::unique_ptr<Block> sampled_block(const std::string& usage_file);

/// v2: a reset of `group`'s memory.peak for a descriptor of the block's
/// own (6.12+, where a write resets the mark for the writer's descriptor
/// only); where the kernel refuses it, sampled.
std::unique_ptr<Block> peak_reset_block(const std::string& group);

/// v1: `pid` (every thread of it) moved into `group`/`name`, made for the
/// block, and back into `group` at close(); `tcp_limit` is written to the
/// new group's memory.kmem.tcp.limit_in_bytes first (0: not offered), so
/// that its sockets are charged as the test's are.
/// `left` gets the block's name when its group cannot be removed at its
/// end (a process the block started still runs there).
std::unique_ptr<Block> sub_group_block(const std::string& group, const std::string& name, int pid,
                                       uint64_t tcp_limit, std::shared_ptr<std::set<std::string>> left);

}  // namespace memrun::cgroup
