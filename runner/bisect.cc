#include "runner/bisect.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cgroup/error.h"
#include "runner/plan.h"
#include "runner/run.h"
#include "runner/units.h"

namespace memrun {
namespace {

constexpr uint64_t kPage = 4096;

uint64_t round_up(uint64_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

// One probe: the test, alone, under `limit`, `trials` times. It passes when
// every trial exits 0 without an OOM kill (expect and min_headroom are the
// spec's business, not the requirement's).
struct Probe {
  bool passed = true;
  Result last;
  /// Whether a failure was memory's doing: an OOM kill, or any failure
  /// after the kernel had to push usage back at the limit (a test that
  /// thrashes into its timeout, a program that handles its own allocation
  /// failure). Anything else is the test failing on its own.
  bool for_memory() const { return last.outcome == Outcome::oom || last.kernel.limit_reached; }
};

// A probe that failed for another reason than memory ends the bisection:
// taking it as "too small" would make a flaky test's failure a bound.
void require_memory_failure(const TestSpec& test, uint64_t limit, const Probe& p) {
  if (p.passed || p.for_memory()) return;
  throw Error(kExitTestFailed,
              fmt::format("'{}' failed under {} without reaching the limit ({}): that is the test failing on its "
                          "own, not memory. Is it flaky? Fix it, or rerun with --trials N so that every probe "
                          "runs it N times",
                          test.name, format_size(limit), p.last.reason));
}

Probe probe(const TestSpec& test, const Spec& spec, cgroup::Backend& backend, uint64_t limit, int trials,
            const std::string& run_dir, int* runs) {
  TestSpec t = test;
  t.memory = limit;
  t.expect = Expectation{};
  t.min_headroom.reset();
  // The plan points into these: they live as long as it.
  const std::vector<Spec> specs{Spec{spec.path, std::nullopt, {t}}};
  Probe p;
  for (int i = 0; i < trials && p.passed; ++i) {
    Plan plan = make_plan(specs, {}, run_dir);
    plan.tests[0].group = fmt::format("probe-{}", ++*runs);
    RunObserver quiet;
    auto results = run_plan(plan, backend, {}, quiet);
    if (results.interrupted_by) throw Error(128 + results.interrupted_by, "bisect interrupted");
    p.last = results.tests.at(0);
    p.last.planned = nullptr;  // the plan is gone
    p.passed = p.last.outcome == Outcome::pass;
  }
  return p;
}

uint64_t parse(const std::string& text, const char* what) {
  std::string why;
  auto v = parse_size(text, &why);
  if (!v) throw Error(kExitUsage, std::string(what) + ": " + why);
  return *v;
}

}  // namespace

void parse_memory_range(const std::string& text, BisectOptions* o) {
  auto colon = text.find(':');
  if (colon == std::string::npos)
    throw Error(kExitUsage, "--memory-range '" + text + "' must be LO:HI, e.g. 64MiB:2GiB");
  o->low = parse(text.substr(0, colon), "--memory-range LO");
  o->high = parse(text.substr(colon + 1), "--memory-range HI");
  if (o->low >= o->high) throw Error(kExitUsage, "--memory-range: LO must be below HI");
}

void parse_tolerance(const std::string& text, BisectOptions* o) {
  if (!text.empty() && text.back() == '%') {
    char* end = nullptr;
    double pct = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() - 1 || pct <= 0 || pct >= 50)
      throw Error(kExitUsage, "--tolerance '" + text + "' must be a size (1MiB) or a percentage (1%)");
    o->tolerance = 0;
    o->tolerance_pct = pct;
  } else {
    o->tolerance = parse(text, "--tolerance");
  }
}

BisectResult bisect(const TestSpec& test, const Spec& spec, cgroup::Backend& backend, const BisectOptions& o,
                    std::FILE* out) {
  BisectResult r;
  auto show = [&](uint64_t limit, const Probe& p) {
    fmt::print(out, "  probe {:>2}: limit {:>10} -> {:<8} peak {}\n", r.runs, format_size(limit),
               to_string(p.last.outcome), format_size(p.last.peak));
    std::fflush(out);
  };
  // 1. Unconstrained (the top of the range): the kernel peak bounds the
  //    requirement from above, and the working set estimate from below.
  uint64_t top = o.high ? o.high : std::max<uint64_t>(4 * test.memory, 1ull << 30);
  Probe first = probe(test, spec, backend, top, o.trials, o.run_dir, &r.runs);
  show(top, first);
  if (!first.passed)
    throw Error(kExitTestFailed,
                first.for_memory()
                    ? fmt::format("'{}' does not pass even under {} ({}): raise --memory-range HI", test.name,
                                  format_size(top), first.last.reason)
                    : fmt::format("'{}' does not pass even under {}, for another reason than memory ({}): there is "
                                  "no limit to find; fix the test first",
                                  test.name, format_size(top), first.last.reason));
  r.first_peak = first.last.peak;
  // 2. The peak itself usually passes; confirm it, else climb.
  uint64_t hi = std::min(top, round_up(r.first_peak));
  if (hi < top) {
    Probe at_peak = probe(test, spec, backend, hi, o.trials, o.run_dir, &r.runs);
    show(hi, at_peak);
    require_memory_failure(test, hi, at_peak);
    while (!at_peak.passed) {
      r.failing = hi;
      hi = std::min(top, round_up(hi + hi / 8));
      if (hi == top) break;  // passed already, in step 1
      at_peak = probe(test, spec, backend, hi, o.trials, o.run_dir, &r.runs);
      show(hi, at_peak);
      require_memory_failure(test, hi, at_peak);
    }
  }
  auto tolerance = [&] {
    return o.tolerance ? o.tolerance : std::max<uint64_t>(kPage, static_cast<uint64_t>(hi * o.tolerance_pct / 100));
  };
  // 3. A failing lower bound: from the working set estimate (what could not
  //    be reclaimed), halving while it still passes. The page cache can
  //    make the true minimum far lower than the peak: found, not assumed.
  uint64_t lo = r.failing;
  if (!lo) {
    lo = std::max(o.low, round_up(first.last.working_set_peak / 10 * 9));
    if (lo >= hi) lo = round_up(hi - hi / 10);
    while (hi - lo > tolerance()) {
      Probe p = probe(test, spec, backend, lo, o.trials, o.run_dir, &r.runs);
      show(lo, p);
      require_memory_failure(test, lo, p);
      if (!p.passed) {
        r.failing = lo;
        break;
      }
      hi = lo;
      lo = round_up(lo / 2);
    }
  }
  // 4. Bisection between the failing and the passing limit.
  while (r.failing && hi - lo > tolerance()) {
    uint64_t mid = round_up(lo + (hi - lo) / 2);
    Probe p = probe(test, spec, backend, mid, o.trials, o.run_dir, &r.runs);
    show(mid, p);
    require_memory_failure(test, mid, p);
    if (p.passed) {
      hi = mid;
    } else {
      lo = mid;
      r.failing = mid;
    }
  }
  r.minimum = hi;
  return r;
}

void apply_overrides(std::vector<Spec>& specs, double scale, const std::vector<std::string>& sets) {
  // Written so that NaN fails too: every comparison with NaN is false.
  if (!(scale > 0 && scale <= 1000)) throw Error(kExitUsage, "--scale must be a positive factor up to 1000, such as 0.8");
  for (auto& spec : specs)
    for (auto& t : spec.tests) {
      double scaled = static_cast<double>(t.memory) * scale;
      if (scaled >= 0x1p62)
        throw Error(kExitUsage, "--scale " + std::to_string(scale) + " makes the limit of '" + t.name +
                                    "' larger than any machine's memory; choose a smaller factor");
      t.memory = std::max<uint64_t>(kMinMemory, round_up(static_cast<uint64_t>(scaled)));
    }
  for (const auto& set : sets) {
    auto dot = set.rfind(".memory=");
    if (dot == std::string::npos)
      throw Error(kExitUsage, "--set '" + set + "' must be NAME.memory=SIZE, e.g. --set big-join.memory=3GiB");
    std::string name = set.substr(0, dot);
    uint64_t bytes = parse(set.substr(dot + 8), "--set");
    bool found = false;
    for (auto& spec : specs)
      for (auto& t : spec.tests)
        if (t.name == name) t.memory = bytes, found = true;
    if (!found) throw Error(kExitUsage, "--set: no test named '" + name + "' in the specs");
  }
}

}  // namespace memrun
