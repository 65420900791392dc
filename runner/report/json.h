// The JSON report (schema memrun-report/1, docs/report.md), and the only
// place its field names are spelled: records to JSON for `--json` and back
// for `merge`, `repro`, `--timings` and comparisons.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runner/base/files.h"
#include "runner/report/comparison.h"
#include "runner/verdict/record.h"

namespace memrun {

/// What else on the machine changes what a test's memory figures mean:
/// compare.h warns when two reports differ in it.
struct Environment {
  std::string thp;             ///< transparent huge pages: always, madvise or never
  uint64_t swap_bytes = 0;     ///< swap configured (SwapTotal)
  uint64_t memory_bytes = 0;   ///< MemTotal
  int cpus = 0;                ///< online CPUs
  /// Variables that change how programs allocate: MALLOC_*, GLIBC_TUNABLES,
  /// LD_PRELOAD, jemalloc's and mimalloc's.
  std::map<std::string, std::string> allocator_env;
  bool operator==(const Environment&) const = default;
};

/// Facts about the run that every report carries.
struct RunInfo {
  std::string memrun_version;  ///< of the memrun that wrote the report
  std::string memrun_path;     ///< its absolute path (/proc/self/exe), for `memrun repro`
  bool host_cgroups = false;   ///< --host-cgroups: tests were not sealed in their groups
  /// The variables of memrun's own environment that the specs' ${...} read
  /// (nullopt: unset), for `memrun repro` to set again.
  std::map<std::string, std::optional<std::string>> spec_environment;
  std::string run_id, run_dir;
  std::string cwd;  ///< where memrun ran: spec paths are relative to it
  std::string backend, cgroup_mode, cgroup_path;
  std::string kernel;  ///< uname -r
  std::chrono::system_clock::time_point started, ended;
  std::string interrupted_by;            ///< the signal's name, empty if none
  int shard_index = 0, shard_count = 0;  ///< --shard K/N; 0/0 without
  int jobs = 1;                          ///< -j
  std::optional<uint64_t> budget;        ///< the memory budget, if any
  uint64_t memrun_max_rss = 0;           ///< memrun's own high-water mark
  /// What memrun could not remove at the end (the run's cgroup), or empty.
  std::string cleanup_error;
  std::vector<std::string> merged_from;  ///< `memrun merge`'s inputs
  Environment environment;
  /// With --baseline: the comparison with the baseline, written as the
  /// report's "comparison" (memrun-compare/1), read back, kept by merge.
  std::optional<Comparison> comparison;
  bool operator==(const RunInfo&) const = default;
};

/// A whole report, typed: what `memrun merge` and `repro` read.
struct ReportData {
  RunInfo info;
  std::vector<SetupRecord> setups;
  std::vector<TestRecord> tests;
  bool operator==(const ReportData&) const = default;
};

/// Hands each test record of a report to the function given, in order:
/// the CI outputs take their records this way, so that a run's come one at
/// a time from its spool and a merged report's from memory.
using EachRecord = std::function<void(const std::function<void(const TestRecord&)>&)>;

/// A test's entry of the report's "tests" array (or a setup's "result").
nlohmann::ordered_json to_json(const TestRecord& record);

/// The record of a test's entry. Throws Error(bad_input) naming `where`
/// and the field when a field has the wrong type.
TestRecord record_from_json(const nlohmann::ordered_json& entry, const std::string& where);

/// The figures a JUnit testcase carries as properties, named as the report
/// names them: limit, peak, headroom, OOM kills, outcome.
std::vector<std::pair<std::string, std::string>> junit_properties(const TestRecord& record);
/// The same for a JUnit testsuite: the host's backend, cgroup mode, kernel.
std::vector<std::pair<std::string, std::string>> junit_properties(const RunInfo& info);

/// A breakdown as the report writes it, on one line: {"anon":1,...}.
std::string breakdown_json_text(const cgroup::Breakdown& breakdown);

/// One entry of a report array, as text, indented as the report has it.
std::string entry_text(const TestRecord& record);
std::string entry_text(const SetupRecord& setup);

/// Streams a report: its head (from `info` and `tally`), the setups' entry
/// texts, then `tests` entries, the i-th from `test_text(i)`.
void render_report(const RunInfo& info, const Tally& tally, const std::vector<std::string>& setup_texts,
                   size_t tests, const std::function<std::string(size_t)>& test_text, const Sink& sink);

/// The report at `path`, typed. Throws Error(bad_input) when the file is
/// missing, not JSON, not a memrun-report/1, lacks a required field, has a
/// field of the wrong type or out of its range (naming the field and the
/// test), or lists a test twice.
ReportData read_report(const std::string& path);
/// The same for a report's text; `path` names it in errors.
ReportData parse_report(const std::string& text, const std::string& path);

/// The report's whole text, as --json writes it.
std::string report_text(const ReportData& report);

/// Hands the tests of `report` to the function given, for the CI outputs.
EachRecord each_record(const ReportData& report);

/// "2026-11-30T10:15:02.123Z", as every timestamp of the report.
std::string iso(std::chrono::system_clock::time_point t);

}  // namespace memrun
