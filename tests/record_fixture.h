// A planned test of one spec and records made from it as the loop would
// make them: what the verdict's and the report's unit tests start from.
#pragma once

#include <filesystem>
#include <string>

#include "runner/plan/plan.h"
#include "runner/spec/spec.h"
#include "runner/verdict/record.h"

namespace memrun::fixture {


// Where the tests' files go: $TMPDIR, else /tmp.
inline std::string tmp() { return std::filesystem::temp_directory_path().string(); }

struct Fixture {
  Spec spec;
  PlannedTest planned;
  Fixture() {
    spec = parse_spec("tests:\n  - {name: big, run: x, memory: 64MiB, min_headroom: 8MiB}\n", "s.yaml", tmp());
    planned = {&spec, &spec.tests[0], "001-big", "/nonexistent/o", "/nonexistent/e"};
  }
  /// The record of a test that exited with `exit_code` (an OOM kill: the
  /// kernel killed it, signal 9) with this kernel peak.
  TestRecord result(Outcome outcome, int exit_code, uint64_t peak) {
    Observation o = exited(exit_code, peak);
    if (outcome == Outcome::oom) {
      o.exit_code = -1;
      o.signal = 9;
      o.kernel.oom_kills = 1;
      o.kernel.limit_reached = true;
    }
    return make_record(planned, o);
  }
  /// A test that exited 0 with this kernel peak and these samples (MiB).
  TestRecord sampled(uint64_t peak, int samples, uint64_t sampled_peak, uint64_t cache_at_sampled_peak,
                     uint64_t sampled_working_set, bool limit_reached = false) {
    Observation o = exited(0, peak << 20);
    o.kernel.limit_reached = limit_reached;
    o.samples = samples;
    o.sampled_peak = sampled_peak << 20;
    o.reclaimable_at_sampled_peak = cache_at_sampled_peak << 20;
    o.sampled_working_set = sampled_working_set << 20;
    return make_record(planned, o);
  }
  static Observation exited(int exit_code, uint64_t peak) {
    Observation o;
    o.ending = Ending::exited;
    o.exit_code = exit_code;
    o.kernel.peak = peak;
    o.kernel.effective_limit = UINT64_MAX;
    return o;
  }
};

}  // namespace memrun::fixture
