// The verdict: from the kernel's figures to an outcome, the headroom and
// pass/fail against what the spec expects.
#include "runner/verdict/decide.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "runner/base/units.h"

namespace memrun {

const char* to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::pass: return "pass";
    case Outcome::fail: return "fail";
    case Outcome::oom: return "oom";
    case Outcome::timeout: return "timeout";
    case Outcome::thrash: return "thrash";
    case Outcome::error: return "error";
    case Outcome::interrupted: return "interrupted";
    case Outcome::skipped: return "skipped";
  }
  return "error";
}

std::optional<Outcome> outcome_named(const std::string& text) {
  for (Outcome o : {Outcome::pass, Outcome::fail, Outcome::oom, Outcome::timeout, Outcome::thrash, Outcome::error,
                    Outcome::interrupted, Outcome::skipped})
    if (text == to_string(o)) return o;
  return std::nullopt;
}

const char* to_string(HeadroomBasis basis) { return basis == HeadroomBasis::working_set ? "working_set" : "peak"; }

std::optional<HeadroomBasis> headroom_basis_named(const std::string& text) {
  for (HeadroomBasis b : {HeadroomBasis::peak, HeadroomBasis::working_set})
    if (text == to_string(b)) return b;
  return std::nullopt;
}

const char* to_string(Ending ending) {
  switch (ending) {
    case Ending::exited: return "exited";
    case Ending::timed_out: return "timed_out";
    case Ending::thrashed: return "thrashed";
    case Ending::interrupted: return "interrupted";
    case Ending::not_started: return "not_started";
    case Ending::not_run: return "not_run";
  }
  return "not_started";
}

std::optional<Ending> ending_named(const std::string& text) {
  for (Ending e : {Ending::exited, Ending::timed_out, Ending::thrashed, Ending::interrupted, Ending::not_started,
                   Ending::not_run})
    if (text == to_string(e)) return e;
  return std::nullopt;
}

namespace {

// What the process's end says, before any memory figure is looked at.
Outcome outcome_of(const Observation& o) {
  switch (o.ending) {
    case Ending::timed_out: return Outcome::timeout;
    case Ending::thrashed: return Outcome::thrash;
    case Ending::interrupted:
    case Ending::not_run: return Outcome::interrupted;
    case Ending::not_started: return Outcome::error;
    case Ending::exited: break;
  }
  // Only a kernel OOM kill at the limit memrun set (or a lower one above
  // it: the effective limit) is an OOM: SIGKILL can
  // come from anywhere, and a kill under a lower limit the test set itself
  // (a sub-group it limited, a nested memrun's test, a container's) is the
  // test's own business: counted in oom_kills, never its outcome, so that
  // `expect: oom` is never met by a limit the test chose. Where the kernel
  // cannot say which limit was hit (v1 without the kill's log line, v2
  // before 5.2), its limit having been reached stands in.
  bool killed = o.kernel.oom_kills > 0 || o.kernel.oom_group_kills > 0;
  if (killed && o.kernel.oom_at_limit.value_or(o.kernel.limit_reached)) return Outcome::oom;
  return o.exit_code == 0 && o.signal == 0 ? Outcome::pass : Outcome::fail;
}

// A case whose tool wrote how it ended (pytest, through memrun's plugin,
// once its session ended; GoogleTest, in its XML results): that word, and
// for pytest an exit code that agrees (GoogleTest's program exits 1 for a
// failure outside every test, which fails no case). No word means the
// process ended before the tool could say (os._exit or exit() in a test, a
// crash): whatever its exit code, that is no pass and no skip.
Outcome said_outcome(const ToolRules& rules, const Observation& o, std::string* why) {
  std::string code = "exit " + std::to_string(o.exit_code);
  if (o.tool_said.empty()) {
    *why = rules.tool + " never said how the case ended: its process ended first (" + code +
           (rules.gtest_results ? "; exit() in the test, or the program or a wrapper sent its results elsewhere: "
                                  "--gtest_output, GTEST_OUTPUT, a cleared environment)"
                                : "; os._exit() in the test, or the interpreter crashed)");
    return Outcome::fail;
  }
  // GoogleTest lists a case a global environment's SetUp kept from
  // starting as run (and says PASSED): no measurement of it. Skipped
  // (GTEST_SKIP() there, exit 0) or failed (a failure there).
  if (o.tool_said == "none" && rules.gtest_results && o.exit_code == 0) {
    *why = "GoogleTest never started it: a global environment's SetUp skipped the program";
    return Outcome::skipped;
  }
  if (o.tool_said == "none") {
    *why = rules.gtest_results ? "GoogleTest never started it (" + code + "; a global environment's SetUp failed)"
                               : rules.tool + " ended before the case ran to its end (" + code + "; pytest.exit()?)";
    return Outcome::fail;
  }
  if (o.tool_said == "skipped") {
    *why = rules.tool + " skipped it";
    return Outcome::skipped;
  }
  if (o.tool_said == "passed" && (o.exit_code == 0 || rules.gtest_results)) return Outcome::pass;
  if (o.tool_said == "passed") *why = rules.tool + " passed it, but its process then ended with " + code;
  if (o.tool_said == "failed") *why = rules.tool + " failed it";
  return Outcome::fail;
}

// A suite's case that exited, as its own tool judges it (ctest's
// cmCTestRunTest::EndTest, which the others fit): a signal fails; a
// required expression missing or a failing one found fails; else the exit
// code decides, unless a required expression is set. A skip (its exit code
// or expression) wins over all that; WILL_FAIL then turns pass and fail
// round. `why` says what decided, when it was not the exit code alone.
Outcome tool_outcome(const ToolRules& rules, const Observation& o, std::string* why) {
  if (o.signal) return Outcome::fail;
  if (rules.outcome_file || rules.gtest_results) return said_outcome(rules, o, why);
  bool required = !rules.pass_regex.empty();
  if ((rules.skip_exit_code && o.exit_code == *rules.skip_exit_code) || o.skip_matched) {
    *why = rules.tool + " skipped it" +
           (o.skip_matched ? " (its output matched the skip expression)" : " (exit " + std::to_string(o.exit_code) + ")");
    return Outcome::skipped;
  }
  // What the cap (--max-log) dropped was never matched, where ctest matches
  // the whole output: a fail expression, or the pass line, may be in it.
  if (rules.reads_output() && o.log_discarded_bytes > 0 && !o.fail_matched) {
    *why = rules.tool + ": " + format_size(o.log_discarded_bytes) + " of its output went past --max-log and was " +
           "never matched against its expressions; raise --max-log (0: no cap) to have all of it read";
    return Outcome::fail;
  }
  bool ok = o.exit_code == 0 || required;
  if (required && !o.pass_matched) ok = false, *why = rules.tool + ": the pass expression is not in its output";
  if (o.fail_matched) ok = false, *why = rules.tool + ": the fail expression is in its output";
  if (required && o.pass_matched && !o.fail_matched && o.exit_code != 0)
    *why = rules.tool + ": the pass expression is in its output (exit " + std::to_string(o.exit_code) + " aside)";
  if (rules.will_fail) {
    ok = !ok;
    *why = rules.tool + ": WILL_FAIL, and it " + (ok ? "failed" : "passed") + (why->empty() ? "" : " (" + *why + ")");
  }
  return ok ? Outcome::pass : Outcome::fail;
}

// The kernel's page size: limits are kept in whole pages.
uint64_t page_size() {
  static const uint64_t size = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

// The figures: effective limit, peak, working set and headroom.
void measure(const TestSpec& t, const Observation& o, Verdict& r) {
  const cgroup::Final& kernel = o.kernel;
  r.limit = std::min(t.memory, kernel.effective_limit ? kernel.effective_limit : t.memory);
  // Never lower than what memrun saw itself: on v1 a test can reset the
  // kernel's high-water mark (memory.max_usage_in_bytes) before it ends.
  r.peak = std::max(kernel.peak.value_or(0), o.sampled_peak);
  r.peak_sampled = !kernel.peak || o.sampled_peak > *kernel.peak;
  r.page_cache = kernel.reclaimable_file;
  // Page cache is charged to the group that first reads a file, and the
  // kernel reclaims it instead of killing anything: a test streaming a file
  // fills its limit with it, and a test reading a file that nobody had
  // cached pays for pages it does not need. So where reclaimable cache made
  // up much of the peak, headroom rests on what could not be reclaimed: the
  // kernel peak less the cache the highest sample saw (never less than any
  // sample's own working set). That is only sound when the highest sample
  // saw the peak (within 10%): a spike the samples missed counts in full,
  // so the estimate never flatters the test.
  //
  // While cache holds usage at the limit, a burst of anonymous memory shows
  // only in memory.stat (the kernel reclaims cache to make room; the peak
  // stays the limit): samples come every 2 ms there (run/sampler.cc), so that
  // a burst touching tens of MiB is seen. (The kernel keeps no high-water
  // mark of anonymous memory alone: ru_maxrss counts mapped files charged
  // elsewhere, such as the program's own binary, and overshoots the group.)
  if (o.samples > 0) {
    uint64_t net_peak = r.peak - std::min(r.peak, o.reclaimable_at_sampled_peak);
    r.working_set_peak = std::min(r.peak, std::max(o.sampled_working_set, net_peak));
  } else {
    r.working_set_peak = r.peak;
  }
  bool peak_seen = o.samples > 0 && o.sampled_peak >= r.peak / 10 * 9;
  // An OOM kill or thrashing means the limit was really needed: no estimate
  // then.
  bool oom = r.outcome == Outcome::oom || r.outcome == Outcome::thrash;
  // And a few pages of cache are no reason for an estimate: it takes 5% of
  // the limit.
  bool much_cache = r.peak - r.working_set_peak >= r.limit / 20;
  r.headroom_basis = peak_seen && !oom && much_cache ? HeadroomBasis::working_set : HeadroomBasis::peak;
  uint64_t basis = r.headroom_basis == HeadroomBasis::peak ? r.peak : r.working_set_peak;
  // Swap: what the test had there is memory it used. With `swap:` allowed,
  // the allowance is the limit plus that swap, and what was used of it is
  // memory and swap together: the kernel's joint mark on v1 (memsw), else
  // the two peaks added (they may come at different times, so headroom is
  // never flattered). Without swap accounting a test may swap unlimited
  // and unseen by the peak: then swap_peak says so, and counts as used.
  r.swap_at_end = kernel.swap_at_end;
  r.swap_peak = std::max({kernel.swap_peak.value_or(0), o.sampled_swap_peak, kernel.swap_at_end});
  uint64_t allowance = r.limit + t.swap;
  uint64_t used = basis + r.swap_peak;
  if (kernel.memory_and_swap_peak && r.headroom_basis == HeadroomBasis::peak && t.swap > 0)
    used = std::max(*kernel.memory_and_swap_peak, r.peak);
  r.headroom = static_cast<int64_t>(allowance) - static_cast<int64_t>(used);
  r.headroom_pct = allowance ? 100.0 * static_cast<double>(r.headroom) / static_cast<double>(allowance) : 0;
}

// Whether the outcome is what the spec expects, and if not, why: the
// reason names the cause the kernel counted (refused forks, huge pages,
// memory.high throttling).
// Long: one case per way a test can end, each with its sentence, in the order they are tried.
void judge(const TestSpec& t, const Observation& o, Verdict& r) {
  const cgroup::Final& kernel = o.kernel;

  // A refused fork means the test did not run as written (pids.max is
  // memrun's fork-bomb guard, not the test's logic): a failure, which
  // `expect: fail` may accept.
  uint64_t refused = kernel.refused_forks;
  if (r.outcome == Outcome::pass && refused > 0) {
    r.outcome = Outcome::fail;
    r.reason = "the kernel refused " + std::to_string(refused) + " fork" + (refused == 1 ? "" : "s") + " at pids.max " +
               (t.pids ? std::to_string(*t.pids) : std::string("?")) + " (raise the test's `pids:` if it needs more)";
  }

  const Expectation& e = t.expect;
  // What the suite's tool skipped is neither a pass nor a failure, whatever
  // the spec expects.
  if (r.outcome == Outcome::skipped) {
    r.passed = true;
    return;
  }
  switch (e.kind) {
    case Expectation::pass: r.passed = r.outcome == Outcome::pass; break;
    // A test that must not fit its limit may be OOM-killed, or thrash until
    // memrun ends it: either way its working set did not fit.
    case Expectation::oom: r.passed = r.outcome == Outcome::oom || r.outcome == Outcome::thrash; break;
    case Expectation::fail: r.passed = r.outcome == Outcome::fail; break;
    case Expectation::exit_code:
      r.passed = (r.outcome == Outcome::pass || r.outcome == Outcome::fail) && o.exit_code == e.code;
      break;
  }
  if (!r.passed && r.reason.empty()) {
    std::string got = to_string(r.outcome);
    if (r.outcome == Outcome::oom) got += " at " + format_size(r.limit);
    bool global = std::any_of(o.oom_victims.begin(), o.oom_victims.end(),
                              [](const OomKill& k) { return k.oom_memcg == "/"; });
    // A pass of what `expect: oom` wanted killed: its kills were under a
    // limit of its own (a sub-group's, or its leaf's, lowered for a moment).
    if (r.outcome == Outcome::pass && kernel.oom_kills > 0 && !global)
      got += "; the kernel OOM-killed " + std::to_string(kernel.oom_kills) + " of its processes under a limit the " +
             "test set itself, below the " + format_size(t.memory) + " memrun set";
    if (r.outcome == Outcome::fail) {
      got += o.signal ? " (killed by signal " + std::to_string(o.signal) + ")"
                      : " (exit " + std::to_string(o.exit_code) + ")";
      if (kernel.oom_kills > 0 && global)
        got += "; the machine ran out of memory: the kernel's OOM killer killed " + std::to_string(kernel.oom_kills) +
               " of its processes before its " + format_size(t.memory) + " limit was reached";
      else if (kernel.oom_kills > 0)
        got += "; the kernel OOM-killed " + std::to_string(kernel.oom_kills) + " of its processes under a limit the " +
               "test set itself, below the " + format_size(t.memory) + " memrun set";
      if (kernel.refused_huge_pages > 0)
        got += "; the kernel refused it huge pages " + std::to_string(kernel.refused_huge_pages) +
               " times at its hugetlb limit (the memory limit applies to huge pages too)";
    }
    if (r.outcome == Outcome::timeout) {
      got += " after " + format_duration(t.timeout.count() / 1e3);
      // memory.high throttles instead of killing: a test held there looks
      // merely slow.
      if (t.memory_high && kernel.high_events > 0)
        got += " (memory_high " + format_size(*t.memory_high) + " throttled it " + std::to_string(kernel.high_events) +
               " times: its working set does not fit under memory_high; raise it)";
    }
    if (r.outcome == Outcome::thrash)
      got += fmt::format(": it read back {} of its own memory (its code, mapped files, swap) in {:.1f}s at its limit{}, and "
                         "made little else; its working set does not fit in {} (raise memory; memrun bisect finds "
                         "how much it needs)",
                         format_size(o.thrash_refaulted), o.thrash_window_s,
                         o.thrash_stalled_s > 0
                             ? fmt::format(", all its tasks stalled on memory for {:.1f}s of it", o.thrash_stalled_s)
                             : "",
                         format_size(r.limit));
    r.reason = "expected " + e.describe() + ", got " + got;
  }
}

// A test that got around its limit, or kept too little headroom, fails
// whatever its outcome.
// Long: one check per way around a limit (escapes, a raised or lowered limit, samples above it, headroom), in order.
void guard(const TestSpec& t, const Observation& o, Verdict& r) {
  const cgroup::Final& kernel = o.kernel;
  const Expectation& e = t.expect;
  // A test that got around its limit proves nothing, whatever it expected:
  // it raised the limit (it could write its group's files), moved a
  // process out of its group, or the kernel saw more than the limit.
  // What memrun saw while the test ran counts as much as the figures at
  // the end, which a test can put back (its limit) or reset (v1's peak).
  std::string defeated;
  auto size_or_none = [](uint64_t bytes) { return bytes >= (uint64_t{1} << 62) ? std::string("no limit") : format_size(bytes); };
  if (kernel.limit_at_end != UINT64_MAX && kernel.limit_at_end > t.memory)
    defeated = "its cgroup's limit was " + format_size(kernel.limit_at_end) + " at the end, not the " +
               format_size(t.memory) + " memrun set: the test raised it";
  // The kernel keeps a limit rounded down to whole pages; a page or more
  // below what memrun set was written by the test.
  else if (kernel.limit_at_end != UINT64_MAX && kernel.limit_at_end + page_size() <= t.memory)
    defeated = "its cgroup's limit was " + format_size(kernel.limit_at_end) + " at the end, not the " +
               format_size(t.memory) + " memrun set: the test lowered it";
  else if (o.sampled_limit > t.memory)
    defeated = "its cgroup's limit read " + size_or_none(o.sampled_limit) + " while it ran, not the " +
               format_size(t.memory) + " memrun set: the test raised it";
  else if (o.sampled_lowest_limit != UINT64_MAX && o.sampled_lowest_limit + page_size() <= t.memory)
    defeated = "its cgroup's limit read " + format_size(o.sampled_lowest_limit) + " while it ran, not the " +
               format_size(t.memory) + " memrun set: the test lowered it";
  else if (kernel.limit_written)
    defeated = "its cgroup's memory limit was written while it ran, and put back before the end: for a while the "
               "limit was not the " + format_size(t.memory) + " memrun set";
  else if (kernel.peak_reset)
    defeated = "its cgroup's peak (memory.max_usage_in_bytes) was reset while it ran: the kernel's peak is not "
               "the test's";
  else if (kernel.escaped > 0)
    defeated = std::to_string(kernel.escaped) + " of its processes had moved out of its memory cgroup" +
               (o.escaped_to.empty() ? "" : " (into " + o.escaped_to + ")");
  else if (above_limit(o.sampled_peak, t.memory))
    defeated = "memrun's samples saw " + format_size(o.sampled_peak) + " in use while it ran, above its limit " +
               format_size(t.memory);
  else if (above_limit(r.peak, t.memory))
    defeated = "its peak " + format_size(r.peak) + " is above its limit " + format_size(t.memory);
  if (!defeated.empty()) {
    r.passed = false;
    r.figures_hold = false;
    r.reason = "the test defeated its memory limit: " + defeated + "; its figures do not hold";
  }
  // v1 charges no socket buffers in a sub-group unless its TCP limit was
  // written before the socket was made, which nothing can make sure of
  // (cgroup/v1.cc): the test's figures may leave out any amount of them.
  // A reason it failed for already stands first.
  if (defeated.empty() && !kernel.uncharged_sub_group.empty() && !t.sub_groups) {
    std::string why = "made a memory sub-group (" + kernel.uncharged_sub_group +
                      ") where cgroup v1 does not charge socket buffers: its figures do not hold (a spec's "
                      "`sub_groups: true` allows such a group)";
    r.reason = r.passed || r.reason.empty() ? "the test " + why : r.reason + "; it also " + why;
    r.passed = false;
    r.figures_hold = false;
  }
  // A memcg OOM kill comes when a charge fails with usage at the limit (the
  // kernel OOM-kills only for charges of at most 8 pages, order 3; larger
  // ones fall back): the group's peak, with swap where v1 counts it, is
  // then there. Far below the limit memrun set, where no ancestor's lower
  // limit stands in, the kill came from a limit the test lowered and put
  // back, or from the machine's OOM killer where the kernel log could not
  // be read: never an OOM `expect: oom` is met by.
  uint64_t reached = std::max(kernel.peak.value_or(0), kernel.memory_and_swap_peak.value_or(0));
  if (defeated.empty() && r.outcome == Outcome::oom && kernel.peak && kernel.effective_limit >= t.memory &&
      reached + std::max<uint64_t>(t.memory / 64, uint64_t{4} << 20) < t.memory) {
    r.passed = false;
    r.figures_hold = false;
    r.reason = "OOM-killed with the kernel's peak at " + format_size(reached) + ", far below its limit " +
               format_size(t.memory) + ": the limit that killed was not the one memrun set (one the test " +
               "lowered and put back, or the machine's OOM killer)";
  }
  bool headroom_applies =
      (e.kind == Expectation::pass || e.kind == Expectation::exit_code) && r.outcome != Outcome::skipped;
  if (r.passed && headroom_applies && t.min_headroom) {
    // A percentage is of the allowance, as headroom_pct is: the limit, and
    // the swap allowed on top.
    uint64_t need = t.min_headroom->for_limit(r.limit + t.swap);
    if (r.headroom < static_cast<int64_t>(need)) {
      r.passed = false;
      r.reason = "headroom " + format_signed_size(r.headroom) + " is below min_headroom " + format_size(need) +
                 " (peak " + format_size(r.peak) + " of " + format_size(r.limit) +
                 (r.swap_peak ? ", swap " + format_size(r.swap_peak) + " of " + format_size(t.swap) : "") + ")";
    }
  }
}

}  // namespace

// Usage above a limit: what the kernel lets past a hard limit on its own is
// forced charges, never its charge batching. try_charge_memcg() precharges
// a batch (MEMCG_CHARGE_BATCH, 64 pages) only while the batch fits under
// the limit, else retries with what was asked: memory.current and
// usage_in_bytes (the page counter, stock included) stay at or below
// memory.max. What goes over is charged with page_counter_charge() at
// `force:`: __GFP_NOFAIL allocations, allocations made while reclaiming
// (PF_MEMALLOC), and sockets' guaranteed minimum buffers
// (__sk_mem_raise_allocated(), sk_forced_mem_schedule(): __GFP_NOFAIL). Each
// is a few pages per task or socket, and the kernel reclaims it back at
// once. A sixty-fourth of the limit, at least 1 MiB, holds them many times
// over; no test that needs more than that past its limit got it honestly.
bool above_limit(uint64_t bytes, uint64_t limit) {
  uint64_t margin = std::max<uint64_t>(limit / 64, uint64_t{1} << 20);
  return bytes > limit && bytes - limit > margin;
}

Verdict decide(const TestSpec& t, const Observation& o) {
  Verdict r;
  if (t.disabled || !t.skipped.empty()) {
    r.outcome = Outcome::skipped;
    r.passed = true;
    r.disabled = t.disabled;
    r.limit = t.memory;
    r.reason = t.disabled ? "disabled: " + (t.rules.tool.empty() ? std::string("its tool") : t.rules.tool) +
                                " does not run it"
                          : t.skipped;
    return r;
  }
  r.outcome = outcome_of(o);
  std::string why;
  if (r.outcome == Outcome::pass || r.outcome == Outcome::fail)
    if (t.rules.any() && o.ending == Ending::exited) r.outcome = tool_outcome(t.rules, o, &why);
  if (o.ending == Ending::not_started || o.ending == Ending::not_run) {
    r.limit = t.memory;
    r.reason = o.ending == Ending::not_run ? "not run: memrun was interrupted" : o.start_error;
    return r;
  }
  measure(t, o, r);
  judge(t, o, r);
  if (!why.empty()) r.reason = r.reason.empty() || r.outcome == Outcome::skipped ? why : r.reason + "; " + why;
  guard(t, o, r);
  return r;
}

}  // namespace memrun
