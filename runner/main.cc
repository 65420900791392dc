// memrun's command line: spec -> plan -> run -> report.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>

#include "cgroup/cgroup.h"
#include "cgroup/error.h"
#include "runner/bisect.h"
#include "runner/budget.h"
#include "runner/ci_report.h"
#include "runner/doctor.h"
#include "runner/live.h"
#include "runner/merge.h"
#include "runner/plan.h"
#include "runner/report.h"
#include "runner/run.h"
#include "runner/units.h"

namespace memrun {
namespace {

/// Every flag of `memrun SPEC...`, one field each.
struct Options {
  std::vector<std::string> specs;
  std::string json;         ///< --json: report path
  Selection selection;      ///< --filter, --tag
  bool fail_fast = false;   ///< --fail-fast
  std::string backend = "auto";
  std::string cgroup_parent;
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
};

std::chrono::milliseconds duration_option(const std::string& flag, const std::string& text, const char* zero) {
  if (text == "0") return std::chrono::milliseconds(0);
  std::string why;
  auto d = parse_duration(text, &why);
  if (!d) throw Error(kExitUsage, flag + ": " + why + " (or 0 " + zero + ")");
  return *d;
}

uint64_t size_option(const std::string& flag, const std::string& text) {
  std::string why;
  auto v = parse_size(text, &why);
  if (!v) throw Error(kExitUsage, flag + ": " + why);
  return *v;
}

// Where each result goes as it comes in: a console line (on a terminal,
// above the live view) and the report's entry.
class Outputs : public RunObserver {
 public:
  Outputs(std::FILE* out, const Console& console, LiveView* live, Report* report, const Plan& plan)
      : out_(out), console_(console), live_(live), report_(report), plan_(plan) {}
  void setup_done(const SetupResult& s) override {
    if (live_) live_->clear();
    console_.setup(s);
    std::fflush(out_);
    if (report_) report_->add_setup(s);
  }
  void test_done(const Result& r) override {
    if (live_) {
      live_->clear();
      live_->finished(r);
    }
    console_.test(r);
    std::fflush(out_);
    if (report_) report_->add_test(static_cast<size_t>(r.planned - plan_.tests.data()), r);
  }
  void tick(const std::vector<Progress>& running) override {
    if (live_) live_->update(running);
  }

 private:
  std::FILE* out_;
  const Console& console_;
  LiveView* live_;
  Report* report_;  // null when no report is asked for
  const Plan& plan_;
};

// Applies --shard and --timings to the selection.
void shard_selection(const Options& o, Selection* selection) {
  if (!o.timings.empty()) selection->timings = timings_from(read_report(o.timings));
  if (!o.shard.empty()) parse_shard(o.shard, selection);
}

// True when `path` is this process's stdout (/dev/stdout, /proc/self/fd/1,
// or whatever file fd 1 is).
bool is_stdout(const std::string& path) {
  struct stat a {}, b {};
  return !path.empty() && ::stat(path.c_str(), &a) == 0 && ::fstat(STDOUT_FILENO, &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

// An output path must be writable before the tests run: its folder exists
// and may be written, or it names something that exists and may be written
// (/dev/stdout, a FIFO). Throws Error(kExitUsage) saying which and why.
void check_output_path(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  namespace sfs = std::filesystem;
  std::error_code ec;
  if (sfs::exists(path, ec) && !sfs::is_directory(path, ec)) {
    if (::access(path.c_str(), W_OK) != 0)
      throw Error(kExitUsage, fmt::format("{} {}: cannot write there: {}", flag, path, std::strerror(errno)));
    return;
  }
  if (sfs::is_directory(path, ec))
    throw Error(kExitUsage, fmt::format("{} {}: is a folder; give a file name (e.g. {}/report)", flag, path, path));
  sfs::path folder = sfs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  if (!sfs::is_directory(folder, ec))
    throw Error(kExitUsage, fmt::format("{} {}: the folder {} does not exist; create it first (mkdir -p {}) or "
                                        "choose another path",
                                        flag, path, folder.string(), folder.string()));
  if (::access(folder.c_str(), W_OK) != 0)
    throw Error(kExitUsage, fmt::format("{} {}: cannot write in {}: {}", flag, path, folder.string(), std::strerror(errno)));
}

cgroup::Kind kind_of(const std::string& name) {
  if (name == "v2") return cgroup::Kind::v2;
  if (name == "v1") return cgroup::Kind::v1;
  if (name == "systemd") return cgroup::Kind::systemd;
  return cgroup::Kind::automatic;
}

std::vector<Spec> load_all(const std::vector<std::string>& paths) {
  std::vector<Spec> specs;
  for (const auto& p : paths) specs.push_back(load_spec(p));
  return specs;
}

int list(const std::vector<std::string>& paths, const Options& o) {
  auto specs = load_all(paths);
  Selection selection = o.selection;
  shard_selection(o, &selection);
  Plan plan = make_plan(specs, selection, "");
  for (const auto& p : plan.tests) {
    const TestSpec& t = *p.test;
    fmt::print("{}:{}  {}  memory {}  expect {}{}\n", p.spec->path, t.line, t.name, format_size(t.memory),
               t.expect.describe(), t.tags.empty() ? "" : "  tags " + fmt::format("{}", fmt::join(t.tags, ",")));
  }
  return kExitOk;
}

int merge(const std::vector<std::string>& paths, const std::string& output, const CiOutputs& ci) {
  std::vector<nlohmann::ordered_json> reports;
  for (const auto& p : paths) reports.push_back(read_report(p));
  auto merged = merge_reports(reports, paths);
  if (!output.empty()) write_atomically(output, merged.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  write_ci_outputs(merged, ci);
  const auto& s = merged["summary"];
  fmt::print("merged {} reports: {} passed, {} failed\n", paths.size(), s["passed"].get<int>(), s["failed"].get<int>());
  return exit_code_of(merged);
}

int bisect_command(const std::vector<std::string>& words, const std::string& test_name, const std::string& range,
                   const std::string& tolerance, int trials, const Options& o) {
  BisectOptions bo;
  if (!range.empty()) parse_memory_range(range, &bo);
  if (!tolerance.empty()) parse_tolerance(tolerance, &bo);
  if (trials < 1) throw Error(kExitUsage, "--trials must be at least 1");
  bo.trials = trials;
  std::vector<Spec> specs;
  const TestSpec* test = nullptr;
  if (!test_name.empty()) {
    if (words.size() != 1) throw Error(kExitUsage, "memrun bisect SPEC --test NAME: give one spec");
    specs = load_all(words);
    for (const auto& t : specs[0].tests)
      if (t.name == test_name) test = &t;
    if (!test) throw Error(kExitUsage, words[0] + " has no test named '" + test_name + "' (memrun list shows them)");
  } else {
    // memrun bisect --memory-range LO:HI -- COMMAND...
    if (words.empty() || range.empty())
      throw Error(kExitUsage, "give a spec and --test NAME, or --memory-range LO:HI -- COMMAND...");
    TestSpec t;
    t.name = "command";
    t.argv = words;
    t.command = fmt::format("{}", fmt::join(words, " "));
    t.memory = bo.high;
    t.timeout = kDefaultTimeout;
    t.cwd = std::filesystem::current_path().string();
    t.pids = kDefaultPids;
    specs.push_back({"(command line)", std::nullopt, {t}});
    test = &specs[0].tests[0];
  }
  std::string run_id = new_run_id();
  bo.run_dir = o.run_dir + "/" + run_id;
  std::filesystem::create_directories(bo.run_dir);
  auto backend = cgroup::open({kind_of(o.backend), o.cgroup_parent, "memrun-" + run_id});
  fmt::print("bisecting the memory limit of '{}' on the {} backend; logs in {}\n", test->name, backend->name(),
             bo.run_dir);
  auto r = bisect(*test, specs[0], *backend, bo, stdout);
  backend->close();
  fmt::print("\nsmallest passing limit: {} ({} bytes){}; kernel peak without pressure {}; {} runs\n",
             format_size(r.minimum), r.minimum,
             r.failing ? ", fails at " + format_size(r.failing) : "", format_size(r.first_peak), r.runs);
  uint64_t mib = (r.minimum + (1 << 20) - 1) >> 20;
  fmt::print("for the spec (the minimum, rounded up; add the headroom you want on top):\n    memory: {}MiB\n", mib);
  return kExitOk;
}

// `text` as one word for a POSIX shell: in single quotes, each ' as '\''.
std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// `text` matched literally by an ECMAScript regex (--filter).
std::string regex_literal(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::strchr("\\^$.|?*+()[]{}", c)) out += '\\';
    out += c;
  }
  return out;
}

int repro(const std::string& report_path, const std::string& name, const std::string& spec) {
  auto report = read_report(report_path);
  std::vector<const nlohmann::ordered_json*> found;
  for (const auto& t : report["tests"])
    if (t.value("name", "") == name && (spec.empty() || t.value("spec", "") == spec)) found.push_back(&t);
  if (found.empty())
    throw Error(kExitUsage, report_path + " has no test named '" + name + "'" + (spec.empty() ? "" : " in " + spec));
  if (found.size() > 1) {
    std::string specs;
    for (const auto* t : found) specs += "\n  " + t->value("spec", "");
    throw Error(kExitUsage, "'" + name + "' names a test in several specs of " + report_path + ":" + specs +
                                "\nsay which with --spec SPEC");
  }
  const auto& t = *found[0];
  // Every word is quoted for the shell, and the filter matches the name
  // literally and whole: the line reruns exactly this test, whatever its
  // name, paths or environment hold.
  std::string env;
  const auto vars = t.value("env", nlohmann::ordered_json::object());
  for (const auto& [k, v] : vars.items()) env += shell_quote(k + "=" + v.get<std::string>()) + " ";
  fmt::print("cd {} && {}{}memrun {} --filter {} --set {} --backend {}\n", shell_quote(report.value("cwd", ".")),
             env.empty() ? "" : "env ", env, shell_quote(t.value("spec", "")),
             shell_quote("^" + regex_literal(name) + "$"),
             shell_quote(name + ".memory=" + std::to_string(t.value("requested_limit_bytes", uint64_t{0}))),
             shell_quote(report["host"].value("backend", "auto")));
  return kExitOk;
}

int run(const Options& o) {
  auto specs = load_all(o.specs);
  apply_overrides(specs, o.scale, o.sets);
  std::string run_id = new_run_id();
  std::string run_dir = o.run_dir + "/" + run_id;
  Selection selection = o.selection;
  shard_selection(o, &selection);
  Plan plan = make_plan(specs, selection, run_dir);
  if (plan.tests.empty() && selection.shard_count == 0)
    throw Error(kExitUsage, "no test matches the selection (--filter/--tag); 'memrun list SPEC' shows the tests");

  // Every flag and output path is checked before anything is made: a bad
  // one found after the tests ran would cost their report.
  check_output_path("--json", o.json);
  check_output_path("--junit", o.ci.junit);
  check_output_path("--markdown", o.ci.markdown);
  check_output_path("--html", o.ci.html);
  RunOptions ro;
  ro.fail_fast = o.fail_fast;
  ro.sample_interval = duration_option("--sample-interval", o.sample_interval, "to turn sampling off");
  ro.grace = duration_option("--grace", o.grace, "to kill at once");
  ro.max_log = o.max_log == "0" ? 0 : size_option("--max-log", o.max_log);
  if (o.jobs < 1) throw Error(kExitUsage, "-j must be at least 1");
  ro.jobs = std::min(o.jobs, jobs_within_open_files());
  ro.allow_oversubscribe = o.allow_oversubscribe;
  ro.timings = selection.timings;
  // One test at a time needs no budget: its own limit is all it promises.
  // With -j, or when asked, the limits of running tests must fit in one.
  std::optional<uint64_t> budget;
  if (!o.memory_budget.empty()) budget = size_option("--memory-budget", o.memory_budget);

  auto backend = cgroup::open({kind_of(o.backend), o.cgroup_parent, "memrun-" + run_id});
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  if (ec) throw Error(kExitUsage, "cannot create the run folder " + run_dir + ": " + ec.message() + " (choose another with --run-dir)");

  RunInfo info;
  info.run_id = run_id;
  info.run_dir = run_dir;
  info.backend = backend->name();
  info.cgroup_mode = cgroup::to_string(cgroup::host().mode);
  info.cgroup_path = backend->run_path();
  utsname u{};
  ::uname(&u);
  info.kernel = u.release;
  info.started = std::chrono::system_clock::now();
  info.shard_index = selection.shard_index;
  info.shard_count = selection.shard_count;

  // --json /dev/stdout: the report owns stdout, the console goes to stderr.
  std::FILE* con = is_stdout(o.json) ? stderr : stdout;
  size_t width = 4;
  for (const auto& p : plan.tests) width = std::max(width, p.test->name.size());
  Console console(con, want_color(con), width);
  fmt::print(con, "memrun {}: {} test{} on {} backend ({} cgroups), kernel {}; logs in {}\n", MEMRUN_VERSION,
             plan.tests.size(), plan.tests.size() == 1 ? "" : "s", info.backend, info.cgroup_mode,
             info.kernel, run_dir);
  if (o.verbose) fmt::print(con, "cgroups below {}\n", info.cgroup_path);
  std::fflush(con);

  // The default budget needs the backend: how much room its cgroups have.
  if (budget) ro.budget = Budget{*budget, "--memory-budget"};
  else if (o.jobs > 1) ro.budget = default_budget(mem_available(), backend->room());
  if (ro.jobs < o.jobs)
    fmt::print(con, "-j {}: the open-files limit allows {} tests at once (each holds up to 10 descriptors); running {} "
               "(raise `ulimit -Hn` for more)\n", o.jobs, ro.jobs, ro.jobs);
  if (ro.budget)
    fmt::print(con, "up to {} test{} at once within a memory budget of {} ({})\n", ro.jobs, ro.jobs == 1 ? "" : "s",
               format_size(ro.budget->bytes),
               ro.budget->source);
  std::fflush(con);

  info.jobs = ro.jobs;
  if (ro.budget) info.budget = ro.budget->bytes;

  bool live = con == stdout && (o.live == "on" || (o.live == "auto" && ::isatty(STDOUT_FILENO)));
  std::optional<LiveView> view;
  if (live) {
    view.emplace(stdout, plan.tests.size(), ro.jobs, ro.budget ? std::optional(ro.budget->bytes) : std::nullopt,
                 ro.timings);
    ro.tick = std::chrono::milliseconds(200);
  }
  // A report nobody asked for is not rendered: that is work on every test.
  std::optional<Report> report;
  if (!o.json.empty() || ci_outputs_wanted(o.ci)) report.emplace(run_dir);
  Outputs observer(con, console, view ? &*view : nullptr, report ? &*report : nullptr, plan);
  auto run = run_plan(plan, *backend, ro, observer);
  if (view) view->clear();
  // What cannot be removed is said, and the report is written all the same.
  try {
    backend->close();
  } catch (const Error& e) {
    info.cleanup_error = e.what();
    fmt::print(stderr, "memrun: cleanup: {} ('memrun gc' removes it once nothing holds it)\n", e.what());
  }
  info.ended = std::chrono::system_clock::now();
  info.interrupted_by = run.interrupted_by;
  console.summary(run.tests, plan.tests.size(), info.interrupted_by);
  // Each output on its own: one that cannot be written does not cost the
  // others. The CI outputs are made from the report in memory, so that they
  // depend on no file a test could have removed.
  std::vector<std::string> unwritten;
  auto attempt = [&](const std::function<void()>& write) {
    try {
      write();
    } catch (const Error& e) {
      unwritten.push_back(e.what());
    }
  };
  if (!o.json.empty()) attempt([&] { report->write(o.json, info); });
  if (ci_outputs_wanted(o.ci)) attempt([&] { write_ci_outputs(report->json(info), o.ci); });
  for (const auto& why : unwritten) fmt::print(stderr, "memrun: {}\n", why);
  if (info.interrupted_by) return 128 + info.interrupted_by;
  if (!unwritten.empty()) return kExitUsage;
  return exit_code_for(run.tests, plan.tests.size());
}

}  // namespace
}  // namespace memrun

int main(int argc, char** argv) {
  using namespace memrun;
  // A closed stdout (memrun | head) must not kill memrun before it cleans up.
  ::signal(SIGPIPE, SIG_IGN);
  Options o;
  CLI::App app{
      "memrun runs each test of a YAML spec in its own cgroup under a hard memory limit and\n"
      "reports what the kernel measured: pass/fail, peak, OOM kills and headroom.\n\n"
      "Exit codes: 0 all tests passed; 1 a test did not pass; 2 bad spec or usage;\n"
      "3 memory limits cannot be enforced here (run 'memrun doctor' for the fix).",
      "memrun"};
  app.set_version_flag("--version", MEMRUN_VERSION);
  app.add_option("spec", o.specs, "YAML spec files to run")->check(CLI::ExistingPath);
  app.add_option("--json", o.json, "write the JSON report (schema memrun-report/1) to this file");
  app.add_option("--filter", o.selection.filter, "run only tests whose name matches this regex");
  app.add_option("--tag", o.selection.tags, "run only tests with one of these tags (repeatable)");
  app.add_flag("--fail-fast", o.fail_fast,
               "start no test after the first that does not pass (with -j, those running finish)");
  app.add_option("--backend", o.backend,
                 "auto: without root on a systemd host, systemd; else v2 where it has the memory "
                 "controller, else v1. Or v2, v1, systemd")
      ->check(CLI::IsMember({"auto", "v2", "v1", "systemd"}));
  app.add_option("--cgroup-parent", o.cgroup_parent,
                 "make the run's cgroups below this cgroup (default: memrun's own)");
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
                 "on Ctrl-C/SIGTERM/SIGHUP, how long tests get after SIGTERM before SIGKILL (default 5s); "
                 "a second signal kills at once");
  app.add_option("--live", o.live, "the live view of running tests: auto (on a terminal), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}));

  auto* doctor_cmd = app.add_subcommand("doctor", "check whether memory limits can be enforced here, and how to fix it");
  doctor_cmd->fallthrough();  // --backend, --cgroup-parent
  auto* gc_cmd = app.add_subcommand("gc", "remove the cgroups and kill the processes that killed memrun runs left");
  gc_cmd->fallthrough();  // --backend, --cgroup-parent
  auto* list_cmd = app.add_subcommand("list", "list the tests of specs without running them");
  std::vector<std::string> list_specs;
  list_cmd->add_option("spec", list_specs, "YAML spec files")->required()->check(CLI::ExistingPath);
  list_cmd->add_option("--filter", o.selection.filter, "only tests whose name matches this regex");
  list_cmd->add_option("--tag", o.selection.tags, "only tests with one of these tags");
  list_cmd->add_option("--shard", o.shard, "only shard K of N (K/N)");
  list_cmd->add_option("--timings", o.timings, "a previous JSON report: balance shards by its durations");
  auto* merge_cmd = app.add_subcommand("merge", "merge the JSON reports of shards into one (and its JUnit/Markdown)");
  std::vector<std::string> merge_inputs;
  std::string merge_output;
  merge_cmd->add_option("report", merge_inputs, "JSON reports of the shards")->required()->check(CLI::ExistingFile);
  merge_cmd->add_option("-o,--output", merge_output, "write the merged JSON report here");
  merge_cmd->add_option("--junit", o.ci.junit, "write the merged JUnit XML here");
  merge_cmd->add_option("--markdown", o.ci.markdown, "write the merged Markdown table here");
  merge_cmd->add_option("--html", o.ci.html, "write the merged HTML report here");
  auto* bisect_cmd = app.add_subcommand(
      "bisect", "find the smallest memory limit at which a test passes: bisect SPEC --test NAME, or "
                "bisect --memory-range LO:HI -- COMMAND...");
  std::vector<std::string> bisect_words;
  std::string bisect_test, bisect_range, bisect_tolerance;
  int bisect_trials = 1;
  bisect_cmd->add_option("words", bisect_words, "the spec, or the command after --");
  bisect_cmd->add_option("--test", bisect_test, "the test of the spec to bisect");
  bisect_cmd->add_option("--memory-range", bisect_range, "LO:HI, e.g. 64MiB:4GiB (default: from the first run)");
  bisect_cmd->add_option("--tolerance", bisect_tolerance, "stop when the range is this narrow: a size or N% (default 1%)");
  bisect_cmd->add_option("--trials", bisect_trials, "runs per probe; a probe passes when all do (flaky tests)");
  bisect_cmd->fallthrough();
  auto* repro_cmd = app.add_subcommand("repro", "print the command line that reruns one test of a report alone");
  std::string repro_report, repro_name, repro_spec;
  repro_cmd->add_option("report", repro_report, "a JSON report")->required()->check(CLI::ExistingFile);
  repro_cmd->add_option("name", repro_name, "the test's name")->required();
  repro_cmd->add_option("--spec", repro_spec, "the test's spec, when specs of the report share the name");
  app.require_subcommand(0, 1);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  try {
    if (*doctor_cmd) return doctor({kind_of(o.backend), o.cgroup_parent, ""}, stdout);
    if (*list_cmd) return list(list_specs, o);
    if (*bisect_cmd) return bisect_command(bisect_words, bisect_test, bisect_range, bisect_tolerance, bisect_trials, o);
    if (*repro_cmd) return repro(repro_report, repro_name, repro_spec);
    if (*gc_cmd) {
      auto garbage = cgroup::collect_garbage({kind_of(o.backend), o.cgroup_parent, ""});
      // On v1 a run has a directory per hierarchy, under systemd several in
      // its scope: a run is the last memrun-<id> of the path.
      std::set<std::string> runs;
      for (const auto& dir : garbage.removed) {
        fmt::print("removed {}\n", dir);
        auto at = dir.rfind("/memrun-");
        std::string run = dir.substr(at + 1, dir.find('/', at + 1) - at - 1);
        if (run.size() > 6 && run.compare(run.size() - 6, 6, ".scope") == 0) run.resize(run.size() - 6);
        runs.insert(run);
      }
      for (const auto& problem : garbage.problems) fmt::print("could not remove: {}\n", problem);
      fmt::print("{} dead run{} cleaned up\n", runs.size(), runs.size() == 1 ? "" : "s");
      return kExitOk;
    }
    if (*merge_cmd) return merge(merge_inputs, merge_output, o.ci);
    if (o.specs.empty()) {
      fmt::print(stderr, "memrun: no spec given. Usage: memrun SPEC.yaml... (see memrun --help)\n");
      return kExitUsage;
    }
    return run(o);
  } catch (const Error& e) {
    fmt::print(stderr, "memrun: {}\n", e.what());
    return e.exit_code();
  } catch (const nlohmann::json::exception& e) {
    // memrun's own records are typed; a JSON type error can only come from
    // a report handed to it (merge, repro, --timings, --baseline).
    fmt::print(stderr, "memrun: a report given to memrun is not as memrun writes it ({}); give a report "
                       "written by memrun --json\n", e.what());
    return kExitUsage;
  } catch (const std::filesystem::filesystem_error& e) {
    fmt::print(stderr, "memrun: {}: {} (check the path and its permissions, or choose another with --run-dir)\n",
               e.path1().string(), e.code().message());
    return kExitUsage;
  } catch (const std::exception& e) {
    fmt::print(stderr, "memrun: internal error: {}\n", e.what());
    return 1;
  }
}
