#include "runner/bisect/bisect.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "runner/base/error.h"
#include "runner/base/units.h"
#include "runner/base/utf8.h"
#include "runner/plan/plan.h"
#include "runner/run/process_setup.h"
#include "runner/run/run.h"

namespace memrun {
namespace {

constexpr uint64_t kPage = 4096;

uint64_t round_up(uint64_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

// One probe: the test, alone, under `limit`, `trials` times. It passes when
// every trial exits 0 without an OOM kill (expect and min_headroom are the
// spec's business, not the requirement's).
struct Probe {
  bool passed = true;
  Verdict last;     ///< of the last trial
  bool limit_reached = false;
  int interrupted_by = 0;  ///< the signal that stopped a trial (0: none)
  /// Whether a failure was memory's doing: an OOM kill, or any failure
  /// after the kernel had to push usage back at the limit (a test that
  /// thrashes into its timeout, a program that handles its own allocation
  /// failure). Anything else is the test failing on its own.
  bool for_memory() const { return last.outcome == Outcome::oom || last.outcome == Outcome::thrash || limit_reached; }
};

// Why a probe that failed for another reason than memory ends the
// bisection ("" when it did not): taking it as "too small" would make a
// flaky test's failure a bound.
std::string not_memory(const TestSpec& test, uint64_t limit, const Probe& p) {
  if (p.passed || p.for_memory()) return "";
  return fmt::format("'{}' failed under {} without reaching the limit ({}): that is the test failing on its own, "
                     "not memory. Is it flaky? Fix it, or rerun with --trials N so that every probe runs it N times",
                     printable(test.name), format_size(limit), p.last.reason);
}

// Runs the probe's trials until one fails, a signal stops one, or one
// escapes its limit (`passed` false, `last.figures_hold` false).
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
    // Its own group each trial, its logs the plan's.
    PlannedTest made = made_test(plan.tests[0], 0, plan.run_dir);
    plan.tests[0].named(fmt::format("probe-{}", ++*runs), made.stdout_path(), made.stderr_path());
    // Only the verdict and whether the kernel held usage at the limit
    // matter here; the record goes with the plan.
    struct LastTrial : RunObserver {
      Probe& p;
      explicit LastTrial(Probe& probe) : p(probe) {}
      void test_done(size_t, const TestRecord& r) override {
        p.last = r.verdict;
        p.limit_reached = r.observed.kernel.limit_reached;
      }
    } observer(p);
    RunOptions options;
    prepare_runner_process(options);
    auto results = run_plan(plan, backend, options, observer);
    p.interrupted_by = results.interrupted_by;
    p.passed = p.last.outcome == Outcome::pass && p.last.figures_hold && !p.interrupted_by;
  }
  return p;
}

}  // namespace

void parse_memory_range(const std::string& text, BisectOptions* o) {
  auto colon = text.find(':');
  if (colon == std::string::npos)
    throw Error(Category::usage, "--memory-range '" + text + "' must be LO:HI, e.g. 64MiB:2GiB");
  o->low = size_of_flag(text.substr(0, colon), "--memory-range LO");
  o->high = size_of_flag(text.substr(colon + 1), "--memory-range HI");
  if (o->low >= o->high) throw Error(Category::usage, "--memory-range: LO must be below HI");
}

void parse_tolerance(const std::string& text, BisectOptions* o) {
  if (!text.empty() && text.back() == '%') {
    char* end = nullptr;
    double pct = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() - 1 || pct <= 0 || pct >= 50)
      throw Error(Category::usage, "--tolerance '" + text + "' must be a size (1MiB) or a percentage (1%)");
    o->tolerance = 0;
    o->tolerance_pct = pct;
  } else {
    o->tolerance = size_of_flag(text, "--tolerance");
  }
}

namespace {

// One bisection: the probes it ran and the bounds they set, in steps.
class Bisection {
 public:
  Bisection(const TestSpec& test, const Spec& spec, cgroup::Backend& backend, const BisectOptions& o, std::FILE* out)
      : test_(test), spec_(spec), backend_(backend), o_(o), out_(out) {}

  /// Runs the test under `limit` (o.trials times) and shows the probe; a
  /// signal, a trial that escaped its limit, or (with `require_memory`) a
  /// failure that was not memory's ends the bisection (stopped()).
  Probe at(uint64_t limit, bool require_memory = true) {
    Probe p = probe(test_, spec_, backend_, limit, o_.trials, o_.run_dir, &r.runs);
    if (p.interrupted_by) {
      r.interrupted_by = p.interrupted_by;
      return p;
    }
    // A trial that got around its limit, or was killed under a limit memrun
    // did not set, says nothing of this one: no bound.
    if (!p.last.figures_hold) {
      r.no_limit = fmt::format("'{}' under {}: {}. bisect needs a test that keeps to the limit it is given",
                               printable(test_.name), format_size(limit), p.last.reason);
      return p;
    }
    fmt::print(out_, "  probe {:>2}: limit {:>10} -> {:<8} peak {}\n", r.runs, format_size(limit),
               to_string(p.last.outcome), format_size(p.last.peak));
    std::fflush(out_);
    if (require_memory) r.no_limit = not_memory(test_, limit, p);
    return p;
  }

  /// Whether the bisection ended without a result (see BisectResult).
  bool stopped() const { return r.interrupted_by || !r.no_limit.empty(); }

  /// 1. Unconstrained (the top of the range): the kernel peak bounds the
  ///    requirement from above, and the working set estimate from below.
  Probe unconstrained(uint64_t top) {
    Probe first = at(top, false);
    if (stopped()) return first;
    if (!first.passed)
      r.no_limit = first.for_memory()
                       ? fmt::format("'{}' does not pass even under {} ({}): raise --memory-range HI", printable(test_.name),
                                     format_size(top), first.last.reason)
                       : fmt::format("'{}' does not pass even under {}, for another reason than memory ({}): there "
                                     "is no limit to find; fix the test first",
                                     printable(test_.name), format_size(top), first.last.reason);
    r.first_peak = first.last.peak;
    return first;
  }

  /// 2. The peak itself usually passes; confirm it, else climb by 1/8.
  ///    Returns the lowest limit known to pass.
  uint64_t confirm_peak(uint64_t top) {
    uint64_t hi = std::min(top, round_up(r.first_peak));
    if (hi == top) return hi;
    while (!at(hi).passed && !stopped()) {
      r.failing = hi;
      hi = std::min(top, round_up(hi + hi / 8));
      if (hi == top) break;  // passed already, in step 1
    }
    return hi;
  }

  /// 3. A failing lower bound: from the working set estimate (what could
  ///    not be reclaimed), halving while it still passes. The page cache can
  ///    make the true minimum far lower than the peak: found, not assumed.
  uint64_t failing_bound(uint64_t working_set, uint64_t& hi) {
    if (r.failing) return r.failing;
    uint64_t lo = std::max(o_.low, round_up(working_set / 10 * 9));
    if (lo >= hi) lo = round_up(hi - hi / 10);
    while (hi - lo > tolerance(hi)) {
      if (!at(lo).passed) {
        if (!stopped()) r.failing = lo;
        break;
      }
      hi = lo;
      lo = round_up(lo / 2);
    }
    return lo;
  }

  /// 4. Bisection between the failing and the passing limit.
  uint64_t narrow(uint64_t lo, uint64_t hi) {
    while (r.failing && hi - lo > tolerance(hi)) {
      uint64_t mid = round_up(lo + (hi - lo) / 2);
      if (at(mid).passed) {
        hi = mid;
      } else if (stopped()) {
        break;
      } else {
        lo = mid;
        r.failing = mid;
      }
    }
    return hi;
  }

  BisectResult r;

 private:
  uint64_t tolerance(uint64_t hi) const {
    return o_.tolerance ? o_.tolerance : std::max<uint64_t>(kPage, static_cast<uint64_t>(hi * o_.tolerance_pct / 100));
  }
  const TestSpec& test_;
  const Spec& spec_;
  cgroup::Backend& backend_;
  const BisectOptions& o_;
  std::FILE* out_;
};

}  // namespace

BisectResult bisect(const TestSpec& test, const Spec& spec, cgroup::Backend& backend, const BisectOptions& o,
                    std::FILE* out) {
  Bisection b(test, spec, backend, o, out);
  uint64_t top = o.high ? o.high : std::max<uint64_t>(4 * test.memory, 1ull << 30);
  Probe first = b.unconstrained(top);
  if (b.stopped()) return b.r;
  uint64_t hi = b.confirm_peak(top);
  if (b.stopped()) return b.r;
  uint64_t lo = b.failing_bound(first.last.working_set_peak, hi);
  if (b.stopped()) return b.r;
  uint64_t minimum = b.narrow(lo, hi);
  if (!b.stopped()) b.r.minimum = minimum;
  return b.r;
}

}  // namespace memrun
