// memray's profiles read back (memray.cc), through memray's own API by
// the reader memray_reader.py, compiled in.
#pragma once

#include <map>
#include <string>

#include "runner/explain/helpers.h"

namespace memrun::explain {

/// The reader's program (memray_reader.py), as memrun hands it to python -c.
const std::string& memray_reader();

// memray's profiles, one per process it followed.
// Long: the reader's output in its order (profiles, sites, merged stacks);
// it moves with memray's own room when explain is split by job (issue 47).
std::string read_memray(const Profiling& p, const std::string& out_base, Helpers& helpers, uint64_t limit,
                        Explanation& e, std::map<int, std::string>& profiled, int& interrupted_by);

}  // namespace memrun::explain
