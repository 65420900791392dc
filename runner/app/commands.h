// memrun's commands, one file each (app/*_command.cc): main.cc wires the command
// line to them and nothing else. Each returns its Result and throws
// memrun::Error for what the user must fix; main prints it and picks the
// exit code for both.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cgroup/cgroup.h"
#include "runner/app/result.h"
#include "runner/plan/plan.h"
#include "runner/report/ci_outputs.h"
#include "runner/report/json.h"
#include "runner/spec/spec.h"

namespace memrun {

/// How a comparison is made and where it goes (`memrun compare`, `--baseline`).
struct Comparing {
  std::string max_increase;                ///< --max-increase: unless a test's spec says; "": the default
  std::string gate = "auto";               ///< --gate auto|peak|working-set
  std::string json, junit, markdown;       ///< `memrun compare --json/--junit/--markdown`
};

/// Every flag of `memrun SPEC...`, one field each.
struct Options {
  std::vector<std::string> specs;
  std::string json;         ///< --json: report path
  Selection selection;      ///< --filter, --tag
  bool fail_fast = false;   ///< --fail-fast
  std::string backend = "auto";
  std::string cgroup_parent;
  bool host_cgroups = false;  ///< --host-cgroups: tests are not sealed in their groups
  std::string run_dir = ".memrun";
  bool verbose = false;
  std::string shard;        ///< --shard K/N
  std::string timings;      ///< --timings: a previous JSON report
  CiOutputs ci;             ///< --junit, --markdown
  std::string sample_interval = "20ms";  ///< --sample-interval, "0" for off
  double scale = 1;         ///< --scale: every limit times this
  std::vector<std::string> sets;  ///< --set NAME.memory=SIZE
  int jobs = 1;             ///< -j
  std::string memory_budget;  ///< --memory-budget SIZE
  bool allow_oversubscribe = false;
  std::string max_log = "64MiB";  ///< --max-log, "0" for no cap
  std::string grace = "5s";       ///< --grace
  std::string live = "auto";      ///< --live auto|on|off
  std::string baseline;           ///< --baseline: a report to compare this run with
  Comparing comparing;            ///< --max-increase, --gate (with --baseline)
  /// --explain[=on-failure|always|never]: for tests whose spec has no
  /// `explain:` ("": never).
  std::string explain;
  std::string unenforceable = "fail";  ///< --unenforceable fail|skip
};

/// What `--backend NAME` asks for.
cgroup::Kind kind_of(const std::string& name);

/// How to open the backend `o` asks for (--backend, --cgroup-parent,
/// --host-cgroups), for a run named `run_name`.
cgroup::OpenOptions open_options(const Options& o, const std::string& run_name);

/// Where load_all hands a spec's tests (by its path) as they are made.
using SpecSink = std::function<void(const std::string& path, std::vector<TestSpec>&& tests)>;

/// Every spec of `paths`, loaded and checked; suites are listed under their
/// memory limits in the backend `o` asks for (see SuiteLister). With
/// `sink`, the tests go there as they are made (TestSink), not into the specs;
/// with `compact`, into each spec's `cases` (CompactTests), for a run.
std::vector<Spec> load_all(const std::vector<std::string>& paths, const Options& o, const SpecSink& sink = nullptr,
                           bool compact = false);

/// Applies --shard and --timings to the selection.
void shard_selection(const Options& o, Selection* selection);

/// memrun SPEC...: runs the selected tests and writes the reports.
Result run_command(const Options& o);

/// What every report of a run says of it (RunInfo): memrun, the host, the
/// backend, the run's id and folder; a spec run adds its shard and jobs.
RunInfo describe_run(const Options& o, const std::string& run_id, const std::string& run_dir,
                     const cgroup::Backend& backend);

/// What `memrun exec` asks of a run beyond what a spec run does.
struct RunExtras {
  bool echo = false;                       ///< the tests' output shown as it comes (and logged)
  bool brief = false;                      ///< the verdict lines alone: no header, no summary, no log tail
  std::vector<TestRecord>* records = nullptr;  ///< each test's record, as it came
};

/// Runs the selected tests of `specs` (loaded, or made by `memrun exec`)
/// and writes the reports.
Result run_specs(std::vector<Spec> specs, const Options& o, const RunExtras& extras = {});

/// What `memrun exec` runs: one command, as one test.
struct ExecOptions {
  std::vector<std::string> argv;     ///< after --
  std::string name;                  ///< --name; default the program's name
  std::string memory;                ///< --memory (required)
  std::string expect = "pass";       ///< --expect pass|oom|fail|N
  std::string timeout = "10m";       ///< --timeout
  std::string min_headroom;          ///< --min-headroom, optional
  bool service_manager = false;      ///< --service-manager (spec key service_manager)
  bool sub_groups = false;           ///< --sub-groups (spec key sub_groups)
  std::string output = "live";       ///< --output live|after
};

/// The name of the test that runs `argv` (exec's, bisect's): `given`
/// (--name), else the program's file name, as people call it.
std::string program_test_name(const std::string& given, const std::vector<std::string>& argv);

/// memrun exec --memory SIZE -- CMD ARGS...: one command under one limit,
/// with the verdict line and the exit code of a spec run.
Result exec_command(const ExecOptions& e, const Options& o);

/// How `memrun exec` ends for its one test `t` and record `r`, where the
/// run ended with `run`: the command's own ending handed on when it failed
/// on its own and memory held; else `run`.
Result exec_result(const TestSpec& t, const TestRecord& r, const Result& run);

/// The tests of `plan` as `memrun list` prints them: a header, then a line
/// a test, in aligned columns (where it is, its name, limit, expectation,
/// tags, where its limit came from).
std::string list_table(const Plan& plan);

/// memrun list SPEC...: the selected tests, one line each, without running.
Result list_command(const std::vector<std::string>& paths, const Options& o);

/// memrun merge REPORT...: one report (and its CI outputs) from shards'.
Result merge_command(const std::vector<std::string>& paths, const std::string& output, const CiOutputs& ci);

/// memrun bisect: the smallest limit at which a test passes.
Result bisect_command(const std::vector<std::string>& words, const std::string& test_name, const std::string& range,
                      const std::string& tolerance, int trials, const Options& o);

/// memrun repro REPORT NAME [--spec SPEC]: the shell line that reruns one test.
Result repro_command(const std::string& report_path, const std::string& name, const std::string& spec);

/// memrun explain REPORT NAME [--spec SPEC]: reruns one test of a report
/// as `repro` would, explained whatever its verdict (never returns).
/// `o`: its --cgroup-parent and --run-dir (else the report's own, where
/// they still exist).
Result explain_command(const std::string& report_path, const std::string& name, const std::string& spec,
                       const Options& o);

/// memrun compare BASE HEAD: what changed between two reports, with CI
/// outputs; failed when a test regressed.
Result compare_command(const std::string& base_path, const std::string& head_path, const Comparing& comparing);

/// Checks --max-increase and --gate; throws Error(usage) when wrong.
void check_comparing(const Comparing& comparing);

/// A run's `head` compared with `base` (read from `base_path`), as
/// --baseline makes it; the run's outputs then carry it.
Comparison compare_with_baseline(const ReportData& base, const std::string& base_path, const ReportData& head,
                                 const Comparing& comparing);

/// The tests of `base` a run of `plan` answers for: those it ran, and those
/// gone from a loaded spec that the selection would have taken. Tests left
/// out by --filter, --tag or --shard, or of specs not loaded, are dropped:
/// they are not gone.
ReportData baseline_in_scope(const ReportData& base, const std::vector<Spec>& specs, const Plan& plan,
                             const Selection& selection);

/// memrun gc: removes what dead runs left.
Result gc_command(const Options& o);

}  // namespace memrun
