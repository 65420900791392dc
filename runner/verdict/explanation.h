// explain: where the memory of a test went. A test that failed on memory
// (or any test, with `explain: always`) runs once more, after the run,
// under an allocation profiler (memray for Python, heaptrack for native
// programs) in a cgroup of its own; its record gains the top allocation
// sites at the profiler's peak, beside what the profiler could not see by
// the kernel's breakdown. The profiled run is a second run: it never
// changes the verdict of the run it explains.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cgroup/cgroup.h"

namespace memrun {

/// One frame of an allocation's stack.
struct StackFrame {
  std::string function;
  std::string file;  ///< "" when the profiler could not tell
  int line = 0;      ///< 0 when unknown
  bool native = false;  ///< a native (C/C++) frame, not a Python one
  bool operator==(const StackFrame&) const = default;
};

/// Memory the profiler saw allocated from one stack, held at its peak.
struct AllocationSite {
  uint64_t bytes = 0;
  uint64_t allocations = 0;
  /// Of the profiled run's kernel peak (0..1, more when the profiler counts
  /// memory it never touched).
  double share = 0;
  std::string process;  ///< the process it was in (its command line)
  /// Innermost first: the allocator, then its callers.
  std::vector<StackFrame> stack;
  /// The index in `stack` of the frame shown as the site: the first one in
  /// the test's own code (not an allocator, interpreter or library).
  size_t where = 0;
  /// The source line of the shown frame ("" when memrun could not read it).
  std::string code;
  /// Made on a thread with no Python frame of its own (a native thread
  /// pool's): `stack` goes on, from this index, with the Python stack that
  /// ran when the process's heap was highest: the call the thread served.
  std::optional<size_t> served_from;
  bool operator==(const AllocationSite&) const = default;
};

/// A process seen in the profiled run's cgroup, at its largest.
struct ProcessSeen {
  int pid = 0;               ///< as the test's pid namespace numbers it
  std::string command;       ///< its command line
  uint64_t peak_private = 0; ///< the most anonymous and shmem memory it held (sampled)
  /// "memray", "heaptrack": the profiler saw its allocations; "profiler":
  /// the profiler's own helper; "": nothing profiled it.
  std::string profiled_by;
  bool operator==(const ProcessSeen&) const = default;
};

/// What the profiler could not see: the profiled run's kernel peak less
/// the profiled peak, by memory.stat's breakdown at the highest sample.
struct Unseen {
  uint64_t total = 0;        ///< kernel peak - profiled peak (0 when the profile saw more)
  uint64_t file = 0;         ///< page cache
  uint64_t kernel = 0;       ///< kernel memory and socket buffers
  uint64_t shmem = 0;        ///< tmpfs, shared memory
  uint64_t other_processes = 0;  ///< private memory of processes no profiler saw
  /// Anonymous memory beyond what the profiler counted: allocator slack,
  /// the profiler's own, memory mapped around the allocator.
  uint64_t anon_unprofiled = 0;
  bool operator==(const Unseen&) const = default;
};

/// The explanation of one test: the report's "explanation" object, written
/// and read with the rest of the report (report/json.cc).
struct Explanation {
  /// "explained"; "unavailable": no profiler for it here (`message` says
  /// what to install); "failed": the profiled run or its profile could not
  /// be read (`message` says why).
  std::string status;
  std::string message;
  std::string why;       ///< what asked for it: "oom", "thrash", "fail", "always", "regressed"
  std::string profiler;  ///< "memray 1.20.0", "heaptrack 1.4.0"
  std::string command;   ///< the profiled command, as run
  /// The run explained (the first run, whose verdict stands).
  uint64_t explained_peak = 0;
  double explained_duration_s = 0;
  /// The profiled run: its limit (above the test's, so that the profile
  /// reaches the peak the limit cut short), how it ended, its kernel peak
  /// and time: the profiler's overhead is these against the explained run's.
  uint64_t limit = 0;
  std::string outcome;
  int exit_code = -1;
  uint64_t kernel_peak = 0;
  double duration_s = 0;
  cgroup::Breakdown at_peak;  ///< the profiled run's breakdown at its highest sample
  uint64_t profiled_peak = 0;  ///< the profiler's own peak, summed over the processes it saw
  Unseen unseen;
  std::vector<AllocationSite> sites;  ///< largest first
  std::vector<ProcessSeen> processes; ///< largest first
  /// One-line summary: where the memory was ("in a child process: ...").
  std::string summary;
  bool operator==(const Explanation&) const = default;
};

/// True for a frame's file that is no test's own code: an interpreter's
/// ("<frozen ...>"), an installed package's (site-packages), the standard
/// library's, a system header's.
bool library_file(const std::string& file);

/// A site's shown frame: "helper (tests/x.py:12)".
std::string frame_text(const StackFrame& f);
/// A site's shown frame with its source line: "<module> (x.py:10): df =
/// pl.read_parquet(p)".
std::string line_text(const AllocationSite& s);
/// A site's shown frame with its source line and, for a thread pool's
/// allocations, whose call they served: "<module> (x.py:10): df =
/// pl.read_parquet(p) (on other threads, for this line's call)".
std::string site_text(const AllocationSite& s);
/// The caller of a site's shown frame in the test's code, when there is one.
const StackFrame* site_caller(const AllocationSite& s);

/// What the profiler could not see, and the profiled run against the first,
/// in one plain line (sizes and durations only): every output's.
std::string unseen_text(const Explanation& e);
/// How the profiled run ended when it did not run to its end: "the profiled
/// run was itself OOM-killed at its limit of 144 MiB: the profile ends at
/// the kill" (its sites are what it held then, not the program's whole
/// peak). Empty for a profiled run that ended on its own.
std::string profiled_ending_text(const Explanation& e);

/// The explanation in plain lines (console, JUnit's failure text): the
/// summary, the top `max_sites` sites one line each, and what was unseen.
std::vector<std::string> explanation_lines(const Explanation& e, size_t max_sites);

}  // namespace memrun
