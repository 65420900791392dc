// Every field of every type memrun-report/1 carries, listed once, beside
// the codec that writes and reads them (json.cc). Each list is checked, at
// compile time, to name every field of its type once: a field added to a
// record type fails the build here until it is listed, written and read,
// and the round trip (tests/report_test.cc) then sets it and finds it back.
#pragma once

#include <cstddef>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "runner/report/json.h"
#include "runner/verdict/record.h"

namespace memrun::codec {

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

/// Stands for any field's value in a braced initializer. An optional field
/// is built by its own constructor from it (a conversion to the optional
/// as well would make the two ambiguous).
struct AnyField {
  template <class U>
    requires(!is_optional<U>::value)
  operator U() const;
};

template <class T, size_t... I>
constexpr bool braces_take(std::index_sequence<I...>) {
  return requires { T{(void(I), AnyField{})...}; };
}

/// The number of fields of the aggregate T: the most initializers its
/// braces take (one more is "too many initializers"). AnyField converts to
/// each field's own type, so no brace elision reaches into a field that is
/// itself an aggregate.
template <class T, size_t N = 0>
constexpr size_t arity() {
  static_assert(std::is_aggregate_v<T>, "arity: not an aggregate");
  if constexpr (braces_take<T>(std::make_index_sequence<N + 1>{}))
    return arity<T, N + 1>();
  else
    return N;
}

template <class T>
struct Of {};

// The lists, one per type, in the order each type declares its fields.
constexpr auto fields(Of<StackFrame>) {
  return std::tuple{&StackFrame::function, &StackFrame::file, &StackFrame::line, &StackFrame::native};
}
constexpr auto fields(Of<AllocationSite>) {
  using S = AllocationSite;
  return std::tuple{&S::bytes, &S::allocations, &S::share, &S::process, &S::stack, &S::where, &S::code,
                    &S::served_from};
}
constexpr auto fields(Of<ProcessSeen>) {
  return std::tuple{&ProcessSeen::pid, &ProcessSeen::command, &ProcessSeen::peak_private, &ProcessSeen::profiled_by};
}
constexpr auto fields(Of<Unseen>) {
  return std::tuple{&Unseen::total, &Unseen::file, &Unseen::kernel, &Unseen::shmem, &Unseen::other_processes,
                    &Unseen::anon_unprofiled};
}
constexpr auto fields(Of<Explanation>) {
  using E = Explanation;
  return std::tuple{&E::status, &E::message, &E::why, &E::profiler, &E::command, &E::explained_peak,
                    &E::explained_duration_s, &E::limit, &E::outcome, &E::exit_code, &E::kernel_peak, &E::duration_s,
                    &E::at_peak, &E::profiled_peak, &E::unseen, &E::sites, &E::processes, &E::summary};
}
constexpr auto fields(Of<cgroup::Breakdown>) {
  using B = cgroup::Breakdown;
  return std::tuple{&B::anon, &B::file, &B::kernel, &B::shmem, &B::sock};
}
constexpr auto fields(Of<cgroup::Final::Raw>) {
  using R = cgroup::Final::Raw;
  return std::tuple{&R::events, &R::stat, &R::pressure_us};
}
constexpr auto fields(Of<cgroup::Final>) {
  using F = cgroup::Final;
  return std::tuple{&F::peak, &F::oom_kills, &F::oom_group_kills, &F::limit_reached, &F::oom_at_limit,
                    &F::refused_forks, &F::refused_huge_pages, &F::high_events, &F::breakdown, &F::reclaimable_file,
                    &F::effective_limit, &F::limit_at_end, &F::limit_written, &F::peak_reset, &F::swap_peak,
                    &F::memory_and_swap_peak, &F::swap_at_end, &F::escaped, &F::uncharged_sub_group, &F::raw};
}
constexpr auto fields(Of<OomKill>) {
  using K = OomKill;
  return std::tuple{&K::pid, &K::name, &K::anon_rss, &K::file_rss, &K::shmem_rss, &K::oom_memcg, &K::limit_bytes};
}
constexpr auto fields(Of<Timeline>) {
  using T = Timeline;
  return std::tuple{&T::interval_s, &T::t_s, &T::current, &T::anon, &T::file, &T::stride, &T::skipped, &T::peak_t_s};
}
constexpr auto fields(Of<BlockFigures>) {
  using B = BlockFigures;
  return std::tuple{&B::name, &B::peak, &B::retained, &B::baseline, &B::source};
}
constexpr auto fields(Of<Observation>) {
  using O = Observation;
  return std::tuple{&O::ending, &O::start_error, &O::exit_code, &O::signal, &O::kernel, &O::samples, &O::sampled_peak,
                    &O::reclaimable_at_sampled_peak, &O::sampled_working_set, &O::sampled_swap_peak,
                    &O::sampled_limit, &O::sampled_lowest_limit, &O::escaped_to, &O::at_peak, &O::timeline,
                    &O::oom_victims, &O::placement, &O::thrash_refaulted, &O::thrash_window_s, &O::thrash_stalled_s,
                    &O::cleanup_error, &O::log_error, &O::stdout_bytes, &O::stderr_bytes, &O::log_discarded_bytes,
                    &O::duration_s, &O::cpu_user_s, &O::cpu_system_s, &O::started, &O::ended, &O::pass_matched,
                    &O::fail_matched, &O::skip_matched, &O::tool_said, &O::blocks, &O::log_tail};
}
constexpr auto fields(Of<Verdict>) {
  using V = Verdict;
  return std::tuple{&V::outcome, &V::passed, &V::reason, &V::limit, &V::peak, &V::peak_sampled, &V::working_set_peak,
                    &V::page_cache, &V::headroom_basis, &V::headroom, &V::headroom_pct, &V::swap_peak,
                    &V::swap_at_end, &V::disabled, &V::figures_hold};
}
constexpr auto fields(Of<TestIdentity>) {
  using T = TestIdentity;
  return std::tuple{&T::name, &T::spec, &T::line, &T::command, &T::env, &T::tags, &T::expected, &T::requested_limit,
                    &T::swap_limit, &T::memory_high, &T::stdout_path, &T::stderr_path, &T::max_increase, &T::inputs,
                    &T::timeout_s, &T::measured};
}
constexpr auto fields(Of<RunFigures>) {
  using R = RunFigures;
  return std::tuple{&R::peak, &R::working_set_peak, &R::outcome, &R::passed, &R::duration_s, &R::figures_hold,
                    &R::blocks};
}
constexpr auto fields(Of<TestRecord>) {
  using R = TestRecord;
  return std::tuple{&R::test, &R::observed, &R::verdict, &R::runs, &R::explanation};
}
constexpr auto fields(Of<SetupRecord>) { return std::tuple{&SetupRecord::spec, &SetupRecord::ran, &SetupRecord::result}; }
constexpr auto fields(Of<Environment>) {
  using E = Environment;
  return std::tuple{&E::thp, &E::swap_bytes, &E::memory_bytes, &E::cpus, &E::allocator_env};
}
constexpr auto fields(Of<RunInfo>) {
  using I = RunInfo;
  return std::tuple{&I::memrun_version, &I::memrun_path, &I::host_cgroups, &I::spec_environment, &I::run_id,
                    &I::run_dir, &I::cwd, &I::backend, &I::cgroup_mode, &I::cgroup_path, &I::kernel, &I::started,
                    &I::ended, &I::interrupted_by, &I::shard_index, &I::shard_count, &I::jobs, &I::budget,
                    &I::memrun_max_rss, &I::cleanup_error, &I::merged_from, &I::environment, &I::comparison};
}
constexpr auto fields(Of<ReportData>) { return std::tuple{&ReportData::info, &ReportData::setups, &ReportData::tests}; }

constexpr auto fields(Of<Threshold>) {
  using H = Threshold;
  return std::tuple{&H::rule, &H::percent, &H::bytes, &H::spread, &H::allowed, &H::why};
}
constexpr auto fields(Of<WhereChange>) { return std::tuple{&WhereChange::where, &WhereChange::base, &WhereChange::head}; }
constexpr auto fields(Of<TestChange>) {
  using T = TestChange;
  return std::tuple{&T::name, &T::spec, &T::block, &T::line, &T::change, &T::figure, &T::base_lo, &T::base,
                    &T::base_hi, &T::head_lo, &T::head, &T::head_hi, &T::base_runs, &T::head_runs, &T::threshold,
                    &T::note, &T::base_outcomes, &T::head_outcomes, &T::reason, &T::where};
}
constexpr auto fields(Of<Comparison>) {
  return std::tuple{&Comparison::base_name, &Comparison::head_name, &Comparison::tests, &Comparison::warnings};
}

template <class A, class B>
constexpr bool same_member(A a, B b) {
  if constexpr (std::is_same_v<A, B>)
    return a == b;
  else
    return false;
}

// The pairs of T's list's entries that are the same field (each entry
// with itself among them).
template <class T, size_t... I>
constexpr size_t equal_pairs(std::index_sequence<I...>) {
  constexpr auto list = fields(Of<T>{});
  size_t n = 0;
  auto count = [&](auto a) { std::apply([&](auto... b) { ((n += same_member(a, b)), ...); }, list); };
  (count(std::get<I>(list)), ...);
  return n;
}

/// Whether T's list names each of its fields once: as many entries as T
/// has fields, each equal to itself alone.
template <class T>
constexpr bool listed_once() {
  constexpr size_t listed = std::tuple_size_v<decltype(fields(Of<T>{}))>;
  return equal_pairs<T>(std::make_index_sequence<listed>{}) == listed && listed == arity<T>();
}

// A field added to one of these types, and not to its list, stops the
// build here: write it where the message says, read it back beside, list
// it above, and set it in tests/report_test.cc's every_field_set.
#define MEMRUN_CARRIED(T, codec) \
  static_assert(listed_once<T>(), #T " has a field memrun-report/1 does not carry: write and read it in " codec)
MEMRUN_CARRIED(StackFrame, "report/json.cc frame_json, frame_from");
MEMRUN_CARRIED(AllocationSite, "report/json.cc site_json, site_from");
MEMRUN_CARRIED(ProcessSeen, "report/json.cc process_json, process_from");
MEMRUN_CARRIED(Unseen, "report/json.cc unseen_json, unseen_from");
MEMRUN_CARRIED(Explanation, "report/json.cc explanation_json, explanation_from");
MEMRUN_CARRIED(cgroup::Breakdown, "report/json.cc breakdown_json, breakdown_from");
MEMRUN_CARRIED(cgroup::Final::Raw, "report/json.cc to_json, record_from_json");
MEMRUN_CARRIED(cgroup::Final, "report/json.cc to_json, record_from_json");
MEMRUN_CARRIED(OomKill, "report/json.cc victims_json, victims_from");
MEMRUN_CARRIED(Timeline, "report/json.cc timeline_json, timeline_from");
MEMRUN_CARRIED(BlockFigures, "report/json.cc blocks_json, blocks_from");
MEMRUN_CARRIED(Observation, "report/json.cc to_json, record_from_json");
MEMRUN_CARRIED(Verdict, "report/json.cc to_json, record_from_json");
MEMRUN_CARRIED(TestIdentity, "report/json.cc to_json, record_from_json");
MEMRUN_CARRIED(RunFigures, "report/json.cc runs_json, runs_from");
MEMRUN_CARRIED(TestRecord, "report/json.cc to_json, record_from_json");
MEMRUN_CARRIED(SetupRecord, "report/json.cc entry_text, parse_report");
MEMRUN_CARRIED(Environment, "report/json.cc head_json, head_from");
MEMRUN_CARRIED(RunInfo, "report/json.cc head_json, head_from");
MEMRUN_CARRIED(ReportData, "report/json.cc report_text, parse_report");
MEMRUN_CARRIED(Threshold, "report/json.cc threshold_json, threshold_from");
MEMRUN_CARRIED(WhereChange, "report/json.cc comparison_json, change_from");
MEMRUN_CARRIED(TestChange, "report/json.cc comparison_json, change_from");
MEMRUN_CARRIED(Comparison, "report/json.cc comparison_json, comparison_from_json");
#undef MEMRUN_CARRIED

}  // namespace memrun::codec
