// The file a test's tool writes how its case ended to (pytest's plugin,
// GoogleTest's XML results), read by memrun once nothing of the test runs.
#pragma once

#include <cstdint>

#include "runner/launch/child.h"
#include "runner/verdict/record.h"

namespace memrun {

/// A memory file of the test's own (memfd), named in its command's
/// environment. Never waits.
class ToolResults {
 public:
  ToolResults() = default;
  ~ToolResults();
  ToolResults(const ToolResults&) = delete;
  ToolResults& operator=(const ToolResults&) = delete;

  /// Makes the file and names it in `cmd` (GTEST_OUTPUT for a GoogleTest
  /// program, `gtest`; else MEMRUN_PYTEST_OUTCOME). Throws Error when it
  /// cannot be made.
  void ask(Command& cmd, bool gtest);
  /// What the tool said, into `o.tool_said` (only when the test exited on
  /// its own), and the file closed. Once; nothing after the first call.
  void read(const TestSpec& t, Observation& o);
  /// Of `shmem` the group is charged with, what is not this file's.
  uint64_t shmem_left(uint64_t shmem) const { return shmem > bytes_ ? shmem - bytes_ : 0; }

 private:
  int fd_ = -1;
  uint64_t bytes_ = 0;  // what the file held in pages
};

}  // namespace memrun
