// heaptrack's profiles read back through heaptrack_print (heaptrack.cc).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runner/explain/helpers.h"

namespace memrun::explain {

// heaptrack_print's peak consumers (-p): each a location, then the
// backtraces that reached it with their bytes at the peak. heaptrack has
// no machine-readable form of these with file:line (its flame graph stacks
// lack lines, its massif output the stacks), so its text is read, strictly:
// a line not as expected ends the block.
std::string read_heaptrack(const std::string& dir, const std::string& out_base, const std::vector<std::string>& env,
                           Helpers& helpers, uint64_t limit, Explanation& e,
                           std::map<std::string, std::string>& profiled_commands, int& interrupted_by);

}  // namespace memrun::explain
