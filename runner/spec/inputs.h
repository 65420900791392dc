// A test's declared inputs: which paths may be one, and their page cache
// dropped before each run on a thread of its own, so that the run's event
// loop never waits on a disk or a large tree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runner/base/worker.h"

namespace memrun {

/// At most this many files below one input folder: a larger tree (a system
/// folder, a home) takes long to walk and to evict, and is no test's input.
constexpr size_t kMaxInputFiles = 10000;

/// Why `path` cannot be an input, or "" when it can (or is missing:
/// `missing` is then set, and whether that is an error is the caller's).
/// An input is a regular file or a folder (symbolic links followed), on no
/// kernel filesystem (/proc, /sys, devices), outside the host's system
/// folders (dropping their cache slows every program on the host), a
/// folder with at most kMaxInputFiles files. Never opens what it checks
/// but folders (a FIFO's open would block).
std::string input_refusal(const std::string& path, bool* missing);

/// Drops the page cache of `paths` (files, or every regular file below a
/// folder; symbolic links inside a folder are not followed): written back,
/// then POSIX_FADV_DONTNEED, which evicts the clean pages no process maps.
/// Only regular files are opened (O_NONBLOCK, checked with fstat). Returns
/// "" or why an input cannot be used now (missing, refused as above).
std::string evict_inputs(const std::vector<std::string>& paths);

/// Runs evict_inputs on a thread of its own, one job at a time, in order
/// (see Worker): fd() becomes readable when a job is done; take() then
/// returns the finished jobs.
class Evictor {
 public:
  struct Done {
    size_t id;
    std::string error;  ///< "" when evicted
  };
  Evictor();

  int fd() const { return worker_.fd(); }
  void post(size_t id, std::vector<std::string> paths) { worker_.post({id, std::move(paths)}); }
  std::vector<Done> take() { return worker_.take(); }

 private:
  Worker<std::pair<size_t, std::vector<std::string>>, Done> worker_;
};

}  // namespace memrun
