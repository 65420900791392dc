// Where an integration test runs: the lanes of the suite (tests/vm).
//   host     this machine's layout (v1, hybrid): every test but the other
//            kernels' own (V2.*, Systemd.*)
//   v2       the pure cgroup v2 VM
//   systemd  the VM with systemd as PID 1 (memrun takes a scope)
// A test says its lanes beside itself, so that a rename takes them along:
//   MEMRUN_LANES(Suite, "*", kHostLane);              // the whole suite
//   MEMRUN_LANES(Suite, "SomeTest", kHostLane | kV2Lane);
// The test pattern is a glob (fnmatch) over the test's name; a test's own
// label wins over its suite's, and a test with none runs on the host and
// in the v2 VM. A label that names no test stops the binary (exit 2): a
// renamed test never leaves its lane in silence.
#pragma once

namespace memrun::testing {

enum Lane : unsigned { kHostLane = 1, kV2Lane = 2, kSystemdLane = 4 };

struct LaneLabel {
  LaneLabel(const char* suite, const char* test, unsigned lanes, const char* file, int line);
};

}  // namespace memrun::testing

#define MEMRUN_LANES_JOIN2(a, b) a##b
#define MEMRUN_LANES_JOIN(a, b) MEMRUN_LANES_JOIN2(a, b)
#define MEMRUN_LANES(suite, test, lanes)                                                               \
  static const ::memrun::testing::LaneLabel MEMRUN_LANES_JOIN(memrun_lanes_, __LINE__)(#suite, test, \
                                                                                        lanes, __FILE__, __LINE__)
