// memrun's command line: CLI11 wired to the commands (runner/app/*_command.cc), and
// the one place where a result or an error becomes an exit code.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "cgroup/error.h"
#include "runner/app/cli_scan.h"
#include "runner/app/commands.h"
#include "runner/app/doctor.h"
#include "runner/app/result.h"
#include "runner/app/serve.h"
#include "runner/base/error.h"
#include "runner/run/enforce.h"

namespace memrun {
namespace {

/// The parsed command line: memrun's flags, which command was given, and
/// the arguments of each.
struct Cli {
  Options o;
  CLI::App *doctor = nullptr, *gc = nullptr, *list = nullptr, *merge = nullptr, *bisect = nullptr, *repro = nullptr,
           *compare = nullptr, *exec = nullptr, *explain = nullptr, *serve = nullptr;
  std::vector<std::string> list_specs, merge_inputs, bisect_words;
  std::string merge_output, bisect_test, bisect_range, bisect_tolerance;
  int bisect_trials = 1;
  std::string repro_report, repro_name, repro_spec;
  std::string explain_report, explain_name, explain_spec;
  std::string compare_base, compare_head;
  Comparing comparing;  ///< of `memrun compare`
  ExecOptions exec_options;
};

// How a comparison judges: shared by `memrun compare` and --baseline.
void add_comparing_flags(CLI::App& app, Comparing& c) {
  app.add_option("--max-increase", c.max_increase,
                 "how much more memory than the base is not yet a regression: N%, SIZE, or both (the larger wins); "
                 "a test's `max_increase:` overrides it. Default, with 3 runs or more a side (--repeat 3): the "
                 "larger of 2%, 1MiB and 3 times the larger side's spread (the range of its runs); with fewer: "
                 "10%, 1MiB");
  app.add_option("--gate", c.gate,
                 "the figure compared: auto (the working set where both reports subtracted page cache and the "
                 "test declares no inputs; else the kernel peak), peak, working-set")
      ->check(CLI::IsMember({"auto", "peak", "working-set"}));
}

// The flags of `memrun SPEC...` (doctor, gc and bisect share --backend and
// --cgroup-parent through fallthrough).
// Long: one declaration per flag, as --help lists them.
void add_run_flags(CLI::App& app, Options& o) {
  app.add_option("spec", o.specs, "YAML spec files to run")->check(CLI::ExistingPath);
  app.add_option("--json", o.json, "write the JSON report (schema memrun-report/1) to this file");
  app.add_option("--filter", o.selection.filter, "run only tests whose name matches this regex");
  app.add_option("--tag", o.selection.tags, "run only tests with one of these tags (repeatable)");
  app.add_flag("--fail-fast", o.fail_fast,
               "start no test after the first that does not pass (with -j, those running finish)");
  app.add_option("--backend", o.backend,
                 "auto: where systemd is PID 1 on cgroup v2, systemd (a scope from the system manager as root, "
                 "from your user manager without); else v2 where it has the memory controller, else v1. "
                 "Or v2, v1, systemd")
      ->check(CLI::IsMember({"auto", "v2", "v1", "systemd"}));
  app.add_option("--cgroup-parent", o.cgroup_parent,
                 "make the run's cgroups below this cgroup (default: memrun's own)");
  app.add_flag("--host-cgroups", o.host_cgroups,
               "let tests see the host's cgroup hierarchies (as root: and write them) instead of being "
               "sealed in their own group; for tests that must inspect or manage the host's cgroups");
  app.add_option("--run-dir", o.run_dir, "folder for each run's logs (default .memrun)");
  app.add_flag("-v,--verbose", o.verbose, "say where cgroups are made");
  app.add_option("--junit", o.ci.junit, "write JUnit XML (for CI test tabs) to this file");
  app.add_option("--markdown", o.ci.markdown, "write a Markdown table of the verdicts to this file");
  app.add_option("--html", o.ci.html, "write a self-contained HTML report with a memory plot per test");
  app.add_option("--shard", o.shard, "run only shard K of N (K/N, 1-based), for CI matrix jobs");
  app.add_option("--timings", o.timings,
                 "a previous JSON report: balance shards by its durations; with -j, start the longest first");
  app.add_option("--sample-interval", o.sample_interval,
                 "how often memory is sampled for timelines and the page-cache estimate (default 20ms; 0: off)");
  app.add_option("--scale", o.scale, "run every test at this factor of its limit (e.g. 0.8: who lives near the edge?)");
  app.add_option("--set", o.sets, "override one test's limit: NAME.memory=SIZE (repeatable)");
  app.add_option("-j,--jobs", o.jobs,
                 "run up to N tests at once, within the memory budget (default 1: one at a time, in spec order)");
  app.add_option("--memory-budget", o.memory_budget,
                 "the sum of the limits of running tests stays within SIZE (default with -j: the memory "
                 "available to memrun less 10%)");
  app.add_flag("--allow-oversubscribe", o.allow_oversubscribe,
               "run a test whose limit exceeds the budget alone, instead of failing it with `error`");
  app.add_option("--max-log", o.max_log, "keep at most SIZE of each test's stdout and stderr (default 64MiB; 0: all)");
  app.add_option("--grace", o.grace,
                 "on Ctrl-C, SIGTERM or another signal, how long tests get after SIGTERM before SIGKILL (default 5s); "
                 "a second signal kills at once");
  app.add_option("--live", o.live, "the live view of running tests: auto (on a terminal), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_option("--repeat", o.selection.repeat,
                 "run each test N times, each in a fresh cgroup; the report keeps every run's figures, and "
                 "comparisons use their spread as the noise bound")
      ->check(CLI::Range(1, 100));
  app.add_option("--baseline", o.baseline,
                 "a report of the base branch (--json): compare this run with it at the end; exit 1 when a test "
                 "regressed beyond --max-increase")
      ->check(CLI::ExistingFile);
  add_comparing_flags(app, o.comparing);
  app.add_flag("--explain{on-failure}", o.explain,
               "run a test that failed on memory once more under an allocation profiler (memray, heaptrack) and "
               "report where its memory went; --explain=always: every test (a test's `explain:` overrides it)")
      ->check(CLI::IsMember({"on-failure", "always", "never"}));
  app.add_option("--unenforceable", o.unenforceable,
                 "where memory limits cannot be enforced (no root, no delegated cgroup): fail (exit 3, the "
                 "default) or skip (exit 77, which the CMake functions' UNENFORCEABLE_SKIP gives CTest as "
                 "SKIP_RETURN_CODE): for developers' machines where a test without its limit proves nothing")
      ->check(CLI::IsMember({"fail", "skip"}));
}

// The subcommands and their own flags.
// Long: one declaration per subcommand and flag, as --help lists them.
void add_commands(CLI::App& app, Cli& c) {
  c.doctor = app.add_subcommand("doctor", "check whether memory limits can be enforced here, and how to fix it");
  c.doctor->fallthrough();  // --backend, --cgroup-parent
  c.gc = app.add_subcommand("gc", "remove the cgroups and kill the processes that killed memrun runs left");
  c.gc->fallthrough();  // --backend, --cgroup-parent
  auto* list = c.list = app.add_subcommand("list", "list the tests of specs without running them");
  c.list->fallthrough();  // --backend, --cgroup-parent: where suites are listed
  list->add_option("spec", c.list_specs, "YAML spec files")->required()->check(CLI::ExistingPath);
  list->add_option("--filter", c.o.selection.filter, "only tests whose name matches this regex");
  list->add_option("--tag", c.o.selection.tags, "only tests with one of these tags");
  list->add_option("--shard", c.o.shard, "only shard K of N (K/N)");
  list->add_option("--timings", c.o.timings, "a previous JSON report: balance shards by its durations");
  auto* merge = c.merge = app.add_subcommand("merge", "merge the JSON reports of shards into one (and its JUnit/Markdown)");
  merge->add_option("report", c.merge_inputs, "JSON reports of the shards")->required()->check(CLI::ExistingFile);
  merge->add_option("-o,--output", c.merge_output, "write the merged JSON report here");
  merge->add_option("--junit", c.o.ci.junit, "write the merged JUnit XML here");
  merge->add_option("--markdown", c.o.ci.markdown, "write the merged Markdown table here");
  merge->add_option("--html", c.o.ci.html, "write the merged HTML report here");
  auto* bisect = c.bisect = app.add_subcommand(
      "bisect", "find the smallest memory limit at which a test passes: bisect SPEC --test NAME, or "
                "bisect [--memory-range LO:HI] -- COMMAND...");
  bisect->add_option("words", c.bisect_words, "the spec, or the command after --");
  bisect->add_option("--test", c.bisect_test, "the test of the spec to bisect");
  bisect->add_option("--memory-range", c.bisect_range, "LO:HI, e.g. 64MiB:4GiB (default: the first run, at 4x the test's limit and at least 1 GiB, "
                    "sets the top; its peak and working set the bottom)");
  bisect->add_option("--tolerance", c.bisect_tolerance, "stop when the range is this narrow: a size or N% (default 1%)");
  bisect->add_option("--trials", c.bisect_trials, "runs per probe; a probe passes when all do (flaky tests)");
  bisect->fallthrough();
  auto* compare = c.compare = app.add_subcommand(
      "compare", "what a change did to memory: compare a head report with a base report, test by test; exit 1 "
                 "when a test regressed");
  compare->add_option("base", c.compare_base, "the base branch's JSON report")->required()->check(CLI::ExistingFile);
  compare->add_option("head", c.compare_head, "the JSON report to judge")->required()->check(CLI::ExistingFile);
  compare->add_option("--markdown", c.comparing.markdown, "write the comparison as Markdown (a table for a pull request)");
  compare->add_option("--json", c.comparing.json, "write the comparison as JSON (schema memrun-compare/1)");
  compare->add_option("--junit", c.comparing.junit, "write JUnit XML: a failure per regression");
  add_comparing_flags(*compare, c.comparing);
  auto* exec = c.exec = app.add_subcommand(
      "exec", "run one command under one memory limit, as a test: memrun exec --memory 200MiB CMD ARGS... "
              "Its output passes through as it runs (and is kept in the run folder); memrun's verdict line "
              "follows. Exit status: the command's own when the memory verdict passed (no OOM kill, "
              "--min-headroom held); 1 when it did not; 128+N when a signal N ended it; with --expect other than "
              "pass, 0 when the expectation held, else 1");
  // Never filled by CLI11: scan_command_line() takes the command off the
  // line first (every word from the first that is not exec's), so that no
  // flag of the command's is taken for memrun's. Listed for --help.
  exec->add_option("command", c.exec_options.argv,
                   "the command and its arguments: every word from the first that is not a flag of exec's (or "
                   "after --)");
  exec->add_option("--memory", c.exec_options.memory, "the hard limit, e.g. 200MiB")->required();
  exec->add_option("--expect", c.exec_options.expect, "pass (default), oom, fail, or an exit code");
  exec->add_option("--timeout", c.exec_options.timeout, "kill it after this long (default 10m)");
  exec->add_option("--min-headroom", c.exec_options.min_headroom, "a size or a percentage of the limit that must stay free");
  exec->add_flag("--service-manager", c.exec_options.service_manager,
                 "let the command reach the service manager (systemd-run, systemctl), which would start what it "
                 "asks outside the limit; without it the manager's sockets are covered for the command");
  exec->add_flag("--sub-groups", c.exec_options.sub_groups,
                 "let the command make memory sub-groups of its group on cgroup v1, where the kernel charges no "
                 "socket buffers; without it such a command fails");
  exec->add_option("--output", c.exec_options.output,
                   "live: the command's output passes through as it runs (the default); after: memrun's verdict "
                   "line alone first, then the command's whole stdout and stderr (what the CMake functions use, so "
                   "that a CTest log starts with the verdict)")
      ->check(CLI::IsMember({"live", "after"}));
  exec->add_option("--name", c.exec_options.name, "its name in the reports (default: the program's)");
  exec->add_option("--json", c.o.json, "write the JSON report here");
  exec->add_option("--junit", c.o.ci.junit, "write JUnit XML here");
  exec->add_option("--run-dir", c.o.run_dir, "folder for its logs (default .memrun)");
  exec->fallthrough();  // --backend, --cgroup-parent
  auto* repro = c.repro = app.add_subcommand("repro", "print the command line that reruns one test of a report alone");
  repro->add_option("report", c.repro_report, "a JSON report")->required()->check(CLI::ExistingFile);
  repro->add_option("name", c.repro_name, "the test's name")->required();
  repro->add_option("--spec", c.repro_spec, "the test's spec, when specs of the report share the name");
  auto* explain = c.explain = app.add_subcommand(
      "explain", "rerun one test of a report as `repro` prints it, under an allocation profiler: where its memory went");
  explain->add_option("report", c.explain_report, "a JSON report")->required()->check(CLI::ExistingFile);
  explain->add_option("name", c.explain_name, "the test's name")->required();
  explain->add_option("--spec", c.explain_spec, "the test's spec, when specs of the report share the name");
  // --cgroup-parent and --run-dir: where the rerun is confined (default: the
  // report's run's cgroup parent and run folder, where they exist).
  explain->fallthrough();
  // pytest --memrun's own (runner/app/serve.h): started by the pytest plugin
  // with a socket on its standard input; not listed.
  c.serve = app.add_subcommand("serve", "the memrun of a pytest process (pytest --memrun starts it)");
  c.serve->group("");
  c.serve->fallthrough();  // --backend, --cgroup-parent, --host-cgroups, --sample-interval
}

Result dispatch(const Cli& c) {
  const Options& o = c.o;
  if (*c.doctor) return doctor(open_options(o, ""), stdout);
  if (*c.list) return list_command(c.list_specs, o);
  if (*c.bisect)
    return bisect_command(c.bisect_words, c.bisect_test, c.bisect_range, c.bisect_tolerance, c.bisect_trials, o);
  if (*c.repro) return repro_command(c.repro_report, c.repro_name, c.repro_spec);
  if (*c.explain) return explain_command(c.explain_report, c.explain_name, c.explain_spec, o);
  if (*c.gc) return gc_command(o);
  if (*c.merge) return merge_command(c.merge_inputs, c.merge_output, o.ci);
  if (*c.compare) return compare_command(c.compare_base, c.compare_head, c.comparing);
  if (*c.exec) return exec_command(c.exec_options, o);
  if (*c.serve) return serve_command(o);
  if (o.specs.empty()) throw Error(Category::usage, "no spec given. Usage: memrun SPEC.yaml... (see memrun --help)");
  return run_command(o);
}

// The one table of exit codes: every number memrun ends with is here, and
// the README's "Exit codes" lists the same.
int exit_code(const Result& r, bool skip_unenforceable) {
  switch (r.kind()) {
    case Result::Kind::passed: return 0;
    case Result::Kind::failed: return 1;
    case Result::Kind::interrupted: return 128 + r.signal();
    // As a shell reports a command: its status, or 128+N for a signal N.
    case Result::Kind::passed_on: return r.signal() ? 128 + r.signal() : r.status();
    case Result::Kind::stopped: break;
  }
  switch (r.category()) {
    case Category::usage: return 2;
    case Category::bad_input: return 2;
    case Category::output: return 2;
    // 77: automake's and meson's skip code, which the CMake functions give
    // CTest as SKIP_RETURN_CODE.
    case Category::cannot_enforce: return skip_unenforceable ? 77 : 3;
    // memrun itself failed, not a test: a caller (CI) tells it from 1.
    case Category::system: return 4;
    case Category::internal: return 4;
  }
  return 4;
}

// The cgroup library says what failed; how memrun ends is decided here.
Category category_of(cgroup::Failure::Kind kind) {
  switch (kind) {
    case cgroup::Failure::Kind::cannot_enforce: return Category::cannot_enforce;
    case cgroup::Failure::Kind::system: return Category::system;
    // What the spec asks of this backend, it lacks (memory_high on v1).
    case cgroup::Failure::Kind::unsupported: return Category::bad_input;
  }
  return Category::internal;
}

// The one error policy: what the user must fix is printed and ends memrun
// as its category says; anything else is an internal error.
Result run_guarded(const std::function<Result()>& command, bool skip_unenforceable) {
  try {
    return command();
  } catch (const Error& e) {
    fmt::print(stderr, "memrun: {}\n", e.what());
    return Result::stopped(e.category());
  } catch (const cgroup::Failure& e) {
    bool unenforceable = e.kind() == cgroup::Failure::Kind::cannot_enforce;
    if (unenforceable && skip_unenforceable) {
      fmt::print(stderr, "memrun: SKIP (--unenforceable skip): {}\n", failure_text(e));
    } else {
      fmt::print(stderr, "memrun: {}{}\n", failure_text(e),
                 unenforceable ? "\n       or, to skip such tests rather than fail them: --unenforceable skip" : "");
    }
    return Result::stopped(category_of(e.kind()));
  } catch (const nlohmann::json::exception& e) {
    // memrun's own records are typed; a JSON type error can only come from
    // a report handed to it (merge, repro, --timings, --baseline).
    fmt::print(stderr, "memrun: a report given to memrun is not as memrun writes it ({}); give a report "
                       "written by memrun --json\n", e.what());
    return Result::stopped(Category::bad_input);
  } catch (const std::filesystem::filesystem_error& e) {
    fmt::print(stderr, "memrun: {}: {} (check the path and its permissions, or choose another with --run-dir)\n",
               e.path1().string(), e.code().message());
    return Result::stopped(Category::output);
  } catch (const std::exception& e) {
    fmt::print(stderr, "memrun: internal error: {}\n", e.what());
    return Result::stopped(Category::internal);
  }
}

}  // namespace

// The commit memrun was built from (the build's runner/commit.cc).
extern const char* const kCommit;
}  // namespace memrun

int main(int argc, char** argv) {
  using namespace memrun;
  // Started with stdin, stdout or stderr closed (`memrun SPEC >&-`), memrun
  // would open its own files under those numbers and then print into them
  // (the report's spool, a test's log): /dev/null holds each place instead.
  for (int fd = 0; fd < 3; ++fd)
    if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF && ::open("/dev/null", O_RDWR) != fd) {
      // (dprintf: a closed stderr takes nothing, and no stream aborts on it)
      (void)!::dprintf(2, "memrun: cannot open /dev/null in place of closed descriptor %d: %s\n", fd,
                       std::strerror(errno));
      return exit_code(Result::stopped(Category::system), false);
    }
  // A closed stdout (memrun | head) must not kill memrun before it cleans up.
  ::signal(SIGPIPE, SIG_IGN);
  CLI::App app{
      "memrun runs each test of a YAML spec in its own cgroup under a hard memory limit and\n"
      "reports what the kernel measured: pass/fail, peak, OOM kills and headroom.\n\n"
      "Exit codes: 0 all tests passed; 1 a test did not pass; 2 bad spec or usage;\n"
      "3 memory limits cannot be enforced here (run 'memrun doctor' for the fix); 77 the same,\n"
      "with --unenforceable skip; 4 memrun itself failed (a system call, an internal error).\n"
      "memrun exec: the command's own status where memory held.",
      "memrun"};
  app.set_version_flag("--version", fmt::format("memrun {} (commit {})", MEMRUN_VERSION, kCommit));
  Cli cli;
  add_run_flags(app, cli.o);
  add_commands(app, cli);
  app.require_subcommand(0, 1);
  try {
    auto scanned = scan_command_line(app, std::vector<std::string>(argv + 1, argv + argc), "exec");
    std::reverse(scanned.args.begin(), scanned.args.end());  // CLI11 takes them last first
    app.parse(scanned.args);
    cli.exec_options.argv = std::move(scanned.command);
  } catch (const Error& e) {
    fmt::print(stderr, "memrun: {}\n", e.what());
    return exit_code(Result::stopped(e.category()), false);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return exit_code(Result::stopped(Category::usage), false);
  }
  bool skip = cli.o.unenforceable == "skip";
  return exit_code(run_guarded([&] { return dispatch(cli); }, skip), skip);
}
