// memrun SPEC...: spec -> plan -> run -> report, with every flag and output
// path checked before anything is made.
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <sstream>

#include "cgroup/error.h"
#include "runner/app/commands.h"
#include "runner/base/error.h"
#include "runner/base/files.h"
#include "runner/base/units.h"
#include "runner/base/utf8.h"
#include "runner/explain/profiled_run.h"
#include "runner/plan/budget.h"
#include "runner/report/live_view.h"
#include "runner/report/report.h"
#include "runner/run/process_setup.h"
#include "runner/run/run.h"
#include "runner/spec/overrides.h"

extern char** environ;

namespace memrun {
namespace {

std::chrono::milliseconds duration_option(const std::string& flag, const std::string& text, const char* zero) {
  if (text == "0") return std::chrono::milliseconds(0);
  std::string why;
  auto d = parse_duration(text, &why);
  if (!d) throw Error(Category::usage, flag + ": " + why + " (or 0 " + zero + ")");
  return *d;
}

uint64_t size_option(const std::string& flag, const std::string& text) {
  std::string why;
  auto v = parse_size_with_unit(text, &why);
  if (!v) throw Error(Category::usage, flag + ": " + why);
  return *v;
}

// Where each result goes as it comes in: a console line (on a terminal,
// above the live view) and the report's entry.
class Outputs : public RunObserver {
 public:
  Outputs(std::FILE* out, const Console& console, LiveView* live, Report* report, const Plan& plan, ExplainMode explain,
          std::vector<TestRecord>* records)
      : out_(out), console_(console), live_(live), report_(report), plan_(plan), explain_(explain), records_(records) {}
  /// A record to explain after the run: its plan index, and why.
  struct ToExplain {
    size_t index;
    TestRecord record;
    std::string why;
  };
  std::vector<ToExplain>& to_explain() { return to_explain_; }
  /// With --baseline: each record's plan index is kept for regressed().
  /// Without, nothing grows with every test a run of a million ends.
  void key_records() { keyed_ = true; }
  /// --baseline found `r` regressed: it is explained too, unless its
  /// explain is never (explain_regressed).
  void regressed(const TestRecord& r) {
    auto at = index_of_.find(key_of(r));
    if (at == index_of_.end()) return;
    if (!explain_regressed(plan_.tests[at->second].test->explain.value_or(explain_))) return;
    for (auto& x : to_explain_)
      if (x.index == at->second) {
        if (x.why == "always") x.why = "regressed";  // more to the point; a failure's own why stays
        return;
      }
    to_explain_.push_back({at->second, r, "regressed"});
  }
  void setup_done(const SetupRecord& s) override {
    if (live_) live_->clear();
    console_.setup(s);
    std::fflush(out_);
    if (report_) report_->add_setup(s);
  }
  void test_done(size_t index, const TestRecord& r) override {
    if (live_) {
      live_->clear();
      live_->finished(r);
    }
    const PlannedTest& p = plan_.tests[index];
    if (p.runs == 1) return emit(index, r);
    // --repeat: the runs of a test make one record, once all are in.
    auto& runs = pending_[p.first];
    runs.emplace(p.run, r);
    if (static_cast<int>(runs.size()) == p.runs) flush(p.first);
  }
  /// The runs of tests that never got all of theirs (--fail-fast, a
  /// signal): what came, as one record each.
  void flush_all() {
    while (!pending_.empty()) flush(pending_.begin()->first);
  }
  const Tally& tally() const { return tally_; }
  void tick(const std::vector<Progress>& running) override {
    if (live_) live_->update(running);
  }

 private:
  void emit(size_t index, const TestRecord& r) {
    console_.test(r);
    std::fflush(out_);
    tally_.add(r.verdict);
    if (report_) report_->add_test(index, r);
    if (keyed_) index_of_.emplace(key_of(r), index);
    const TestSpec& t = *plan_.tests[index].test;
    std::string why =
        explain_why(t.explain.value_or(explain_), r);
    if (!why.empty()) to_explain_.push_back({index, r, why});
    if (records_) records_->push_back(r);
  }
  void flush(size_t first) {
    std::vector<TestRecord> runs;
    for (auto& [run, record] : pending_.at(first)) runs.push_back(std::move(record));
    pending_.erase(first);
    emit(first, combine_runs(std::move(runs)));
  }

  std::FILE* out_;
  const Console& console_;
  LiveView* live_;
  Report* report_;  // null when no report is asked for
  const Plan& plan_;
  ExplainMode explain_;
  std::vector<ToExplain> to_explain_;
  // Two specs may name a test alike: a test is its spec and its name, as
  // compare keys it.
  static std::string key_of(const TestRecord& r) { return r.test.spec + '\n' + r.test.name; }
  bool keyed_ = false;
  std::map<std::string, size_t> index_of_;  // key_of -> plan index of its (first) run
  std::vector<TestRecord>* records_;  // null unless asked for
  Tally tally_;
  std::map<size_t, std::map<int, TestRecord>> pending_;  // first run's index -> runs so far
};

// True when `path` is this process's stdout (/dev/stdout, /proc/self/fd/1,
// or whatever file fd 1 is).
bool is_stdout(const std::string& path) {
  struct stat a {}, b {};
  return !path.empty() && ::stat(path.c_str(), &a) == 0 && ::fstat(STDOUT_FILENO, &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

// An output path must be writable before the tests run: its folder exists
// and may be written, or it names something that exists and may be written
// (/dev/stdout, a FIFO). Throws Error(output) saying which and why.
void check_output_path(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  namespace sfs = std::filesystem;
  std::error_code ec;
  if (sfs::exists(path, ec) && !sfs::is_directory(path, ec)) {
    if (::access(path.c_str(), W_OK) != 0)
      throw Error(Category::output, fmt::format("{} {}: cannot write there: {}", flag, path, std::strerror(errno)));
    return;
  }
  if (sfs::is_directory(path, ec))
    throw Error(Category::output,
                fmt::format("{} {}: is a folder; give a file name (e.g. {}/report)", flag, path, path));
  sfs::path folder = sfs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  if (!sfs::is_directory(folder, ec))
    throw Error(Category::output, fmt::format("{} {}: the folder {} does not exist; create it first (mkdir -p {}) or "
                                              "choose another path",
                                              flag, path, folder.string(), folder.string()));
  if (::access(folder.c_str(), W_OK) != 0)
    throw Error(Category::output,
                fmt::format("{} {}: cannot write in {}: {}", flag, path, folder.string(), std::strerror(errno)));
}

// Every flag and output path, checked before anything is made: a bad one
// found after the tests ran would cost their report.
RunOptions run_options(const Options& o, const Selection& selection) {
  check_output_path("--json", o.json);
  check_output_path("--junit", o.ci.junit);
  check_output_path("--markdown", o.ci.markdown);
  check_output_path("--html", o.ci.html);
  for (const auto* path : {&o.json, &o.ci.junit, &o.ci.markdown, &o.ci.html}) claim_output(*path);
  RunOptions ro;
  ro.pid_namespace = !o.host_cgroups;
  ro.fail_fast = o.fail_fast;
  ro.sample_interval = duration_option("--sample-interval", o.sample_interval, "to turn sampling off");
  ro.grace = duration_option("--grace", o.grace, "to kill at once");
  ro.max_log = o.max_log == "0" ? 0 : size_option("--max-log", o.max_log);
  if (o.jobs < 1) throw Error(Category::usage, "-j must be at least 1");
  ro.jobs = std::min(o.jobs, jobs_within_open_files());
  ro.allow_oversubscribe = o.allow_oversubscribe;
  ro.timings = selection.timings;
  // One test at a time needs no budget: its own limit is all it promises.
  // With -j, or when asked, the limits of running tests must fit in one
  // (the default needs the backend: see choose_budget).
  if (!o.memory_budget.empty()) ro.budget = Budget{size_option("--memory-budget", o.memory_budget), "--memory-budget"};
  return ro;
}

std::optional<ReportData> read_baseline(const Options& o) {
  if (o.baseline.empty()) return std::nullopt;
  check_comparing(o.comparing);
  return read_report(o.baseline);
}

void make_run_dir(const std::string& run_dir) {
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  if (ec)
    throw Error(Category::output, "cannot create the run folder " + run_dir + ": " + ec.message() +
                                      " (choose another with --run-dir)");
}

// The default budget: what the backend's cgroups have room for.
void choose_budget(const Options& o, const cgroup::Backend& backend, RunOptions& ro) {
  if (!ro.budget && o.jobs > 1) ro.budget = default_budget(mem_available(), backend.room());
}

// memrun's own high-water mark, which the footprint benchmark reads: it
// must stay flat. VmHWM, not getrusage's ru_maxrss: the latter keeps the
// peak of the image memrun was exec'd from (a Python parent's, say).
uint64_t own_max_rss() {
  std::istringstream in(read_proc("/proc/self/status"));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  return 0;
}

// A figure of /proc/meminfo in bytes ("SwapTotal:  1024 kB"), 0 if absent.
uint64_t meminfo(const std::string& meminfo_text, const std::string& key) {
  auto at = meminfo_text.find(key + ":");
  return at == std::string::npos ? 0 : std::strtoull(meminfo_text.c_str() + at + key.size() + 1, nullptr, 10) * 1024;
}

// What else changes a test's figures: a comparison of two reports warns
// when these differ (compare.h).
Environment this_environment() {
  Environment e;
  // "always [madvise] never": the bracketed word is the mode.
  std::string thp = read_proc("/sys/kernel/mm/transparent_hugepage/enabled");
  auto open = thp.find('['), close = thp.find(']');
  e.thp = open != std::string::npos && close > open ? thp.substr(open + 1, close - open - 1) : "unknown";
  std::string mem = read_proc("/proc/meminfo");
  e.swap_bytes = meminfo(mem, "SwapTotal");
  e.memory_bytes = meminfo(mem, "MemTotal");
  e.cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  for (char** v = environ; *v; ++v) {
    std::string kv = *v, key = kv.substr(0, kv.find('='));
    for (const char* prefix : {"MALLOC_", "GLIBC_TUNABLES", "LD_PRELOAD", "JE_MALLOC_CONF", "_RJEM_MALLOC_CONF",
                               "MIMALLOC_", "TCMALLOC_"})
      if (key.rfind(prefix, 0) == 0) e.allocator_env[key] = kv.substr(key.size() + 1);
  }
  return e;
}

RunInfo run_info(const Options& o, const std::string& run_id, const std::string& run_dir,
                 const cgroup::Backend& backend, const Selection& selection, const RunOptions& ro) {
  RunInfo info = describe_run(o, run_id, run_dir, backend);
  info.shard_index = selection.shard_index;
  info.shard_count = selection.shard_count;
  info.jobs = ro.jobs;
  if (ro.budget) info.budget = ro.budget->bytes;
  return info;
}

// The console's column of test names: as wide as the longest, at least 4.
size_t name_width(const Plan& plan) {
  size_t width = 4;
  for (const auto& p : plan.tests) width = std::max(width, cell(std::string(p.name())).size());
  return width;
}

// The lines a run starts with: what runs where, and how many at once.
void announce(std::FILE* con, const Options& o, size_t tests, const RunInfo& info, const RunOptions& ro) {
  int runs = std::max(1, o.selection.repeat);
  fmt::print(con, "memrun {}: {} test{}{} on {} backend ({} cgroups), kernel {}; logs in {}\n", MEMRUN_VERSION, tests,
             tests == 1 ? "" : "s", runs > 1 ? fmt::format(", {} runs each", runs) : "", info.backend,
             info.cgroup_mode, info.kernel, info.run_dir);
  if (o.verbose) fmt::print(con, "cgroups below {}\n", info.cgroup_path);
  if (ro.jobs < o.jobs)
    fmt::print(con, "-j {}: the open-files limit allows {} tests at once (each holds up to {} descriptors, and the "
               "next starts while it is cleaned up); running {} (raise `ulimit -Hn` for more)\n", o.jobs, ro.jobs,
               kFilesPerTest, ro.jobs);
  if (ro.budget)
    fmt::print(con, "up to {} test{} at once within a memory budget of {} ({})\n", ro.jobs, ro.jobs == 1 ? "" : "s",
               format_size(ro.budget->bytes), ro.budget->source);
  std::fflush(con);
}

// Writes every output asked for, each on its own: one that cannot be
// written does not cost the others. The CI outputs are made from the run's
// records, so that they depend on no file a test could have removed; they
// come first, so that the report's memrun_max_rss_bytes covers making them.
// Returns what could not be written.
std::vector<std::string> write_outputs(const Options& o, const Report* report, RunInfo& info,
                                       const Comparison* comparison) {
  std::vector<std::string> unwritten;
  auto attempt = [&](const std::function<void()>& write) {
    try {
      write();
    } catch (const Error& e) {
      unwritten.push_back(e.what());
    }
  };
  if (ci_outputs_wanted(o.ci)) attempt([&] { write_ci_outputs(info, report->records(), o.ci, comparison); });
  info.memrun_max_rss = own_max_rss();
  if (!o.json.empty()) attempt([&] { report->write(o.json, info); });
  return unwritten;
}

// The tests' output where memrun's console `con` is not in its way: with
// the report on stdout, both streams go to stderr.
void echo_tests_output(RunOptions& ro, std::FILE* con) {
  ro.echo_stdout = con == stdout ? STDOUT_FILENO : STDERR_FILENO;
  ro.echo_stderr = STDERR_FILENO;
}

// The live view of a run on a terminal (or --live on), and the loop's
// ticks that feed it.
void live_view(const Options& o, std::optional<LiveView>& view, const Plan& plan, RunOptions& ro) {
  if (!(o.live == "on" || (o.live == "auto" && ::isatty(STDOUT_FILENO)))) return;
  view.emplace(stdout, plan.tests.size(), ro.jobs, ro.budget ? std::optional(ro.budget->bytes) : std::nullopt,
               ro.timings);
  ro.tick = std::chrono::milliseconds(200);
}

// --baseline: the run's records compared with the baseline's (`in_scope`:
// the tests this run could have run); the regressed are explained too.
Comparison compare_run(const ReportData& in_scope, const Options& o, const RunInfo& info, Report& report,
                       Outputs& observer) {
  ReportData head{info, {}, {}};
  report.records()([&](const TestRecord& r) { head.tests.push_back(r); });
  Comparison comparison = compare_with_baseline(in_scope, o.baseline, head, o.comparing);
  std::set<std::pair<std::string, std::string>> regressed;  // spec, name
  for (const auto& c : comparison.tests)
    if (c.change == Change::regressed) regressed.emplace(c.spec, c.name);
  if (!regressed.empty())
    report.records()([&](const TestRecord& r) {
      if (regressed.count({r.test.spec, r.test.name})) observer.regressed(r);
    });
  return comparison;
}

// --baseline, once explain ran: where each change went, by the lines of
// the tests' code, from both sides' explanations.
void where_it_went(Comparison& comparison, const ReportData& in_scope, const RunInfo& info, Report& report) {
  ReportData head{info, {}, {}};
  report.records()([&](const TestRecord& r) { head.tests.push_back(r); });
  explain_changes(comparison, in_scope, head);
}

// explain: each test to explain runs once more under a profiler, one at a
// time once the run is over; its verdict stays the first run's. Returns
// the signal that interrupted it, or 0.
int explain_all(Outputs& observer, const Plan& plan, cgroup::Backend& backend, const RunOptions& ro,
                const std::string& run_dir, Console& console, std::FILE* con, Report* report) {
  fmt::print(con, "\nexplain: running {} test{} once more under an allocation profiler\n",
             observer.to_explain().size(), observer.to_explain().size() == 1 ? "" : "s");
  std::fflush(con);
  // Signals wait on a signalfd for the whole of explain, as they do while
  // tests run: the profiled runs' and readers' loops take them (and stop
  // what runs); one that comes between two steps stops the next.
  SignalGuard signals;
  int interrupted = 0;
  for (auto& x : observer.to_explain()) {
    if (!interrupted) interrupted = signals.take();
    if (interrupted) {
      Explanation e;
      e.why = x.why;
      e.status = "interrupted";
      e.message = fmt::format("memrun was interrupted ({}) before its profiled run: nothing was explained",
                              strsignal(interrupted));
      x.record.explanation = e;
    } else {
      x.record.explanation = explain_test(made_test(plan.tests[x.index], x.index, plan.run_dir), x.record, x.why, backend,
                                         ro, run_dir, interrupted);
    }
    console.explanation(x.record);
    std::fflush(con);
    if (report) report->replace_test(x.index, x.record);
  }
  // A signal after the last step still interrupts the run; those after
  // the first are that interruption's.
  while (int s = signals.take())
    if (!interrupted) interrupted = s;
  return interrupted;
}

// The run's end: its groups removed (what cannot be is said, and the
// report is written all the same), its time and signal noted.
void end_run(cgroup::Backend& backend, RunInfo& info, int interrupted_by) {
  try {
    backend.close();
  } catch (const cgroup::Failure& e) {
    info.cleanup_error = e.what();
    fmt::print(stderr, "memrun: cleanup: {} ('memrun gc' removes it once nothing holds it)\n", e.what());
  }
  info.ended = std::chrono::system_clock::now();
  if (interrupted_by) info.interrupted_by = strsignal(interrupted_by);
}

}  // namespace

RunInfo describe_run(const Options& o, const std::string& run_id, const std::string& run_dir,
                     const cgroup::Backend& backend) {
  RunInfo info;
  info.memrun_version = MEMRUN_VERSION;
  info.environment = this_environment();
  info.cwd = std::filesystem::current_path().string();
  info.run_id = run_id;
  info.run_dir = run_dir;
  info.backend = backend.name();
  info.cgroup_mode = cgroup::to_string(cgroup::host().mode);
  info.cgroup_path = backend.run_path();
  utsname u{};
  ::uname(&u);
  info.kernel = u.release;
  info.started = std::chrono::system_clock::now();
  // What `memrun repro` needs to run a test again the same way.
  std::error_code ec;
  info.memrun_path = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  info.host_cgroups = o.host_cgroups;
  info.spec_environment = environment_read();
  return info;
}

// A run holds its suites' cases compactly (CompactTests): a listing of a
// million costs it some 40 bytes a case until each runs.
Result run_command(const Options& o) { return run_specs(load_all(o.specs, o, nullptr, true), o); }

// Long: the run's stages top-down (plan, open, run, compare, explain, outputs), each a call or two.
Result run_specs(std::vector<Spec> specs, const Options& o, const RunExtras& extras) {
  apply_overrides(specs, o.scale, o.sets);
  std::string run_id = new_run_id();
  std::string run_dir = o.run_dir + "/" + run_id;
  Selection selection = o.selection;
  shard_selection(o, &selection);
  Plan plan = make_plan(specs, selection, run_dir);
  if (plan.tests.empty() && selection.shard_count == 0)
    throw Error(Category::usage, "no test matches the selection (--filter/--tag); 'memrun list SPEC' shows the tests");
  RunOptions ro = run_options(o, selection);
  // The baseline is read before anything runs: a bad one found after the
  // tests ran would cost their comparison.
  std::optional<ReportData> baseline = read_baseline(o);
  size_t tests = static_cast<size_t>(
      std::count_if(plan.tests.begin(), plan.tests.end(), [](const PlannedTest& p) { return p.run == 1; }));

  auto backend = cgroup::open(open_options(o, cgroup::run_name(run_id)));
  make_run_dir(run_dir);
  choose_budget(o, *backend, ro);
  RunInfo info = run_info(o, run_id, run_dir, *backend, selection, ro);

  // --json /dev/stdout: the report owns stdout, the console goes to stderr.
  std::FILE* con = is_stdout(o.json) ? stderr : stdout;
  Console console(con, want_color(con), name_width(plan));
  if (extras.brief) console.omit_log_tails();  // memrun exec --output after shows the whole output
  if (!extras.brief) announce(con, o, tests, info, ro);
  if (extras.echo) echo_tests_output(ro, con);
  std::optional<LiveView> view;
  // No live view over the tests' own output.
  if (!extras.echo && con == stdout) live_view(o, view, plan, ro);
  // A report nobody asked for is not rendered: that is work on every test.
  std::optional<Report> report;
  if (!o.json.empty() || ci_outputs_wanted(o.ci) || baseline) report.emplace(run_dir);
  Outputs observer(con, console, view ? &*view : nullptr, report ? &*report : nullptr, plan,
                   explain_mode_named(o.explain).value_or(ExplainMode::never), extras.records);
  if (baseline) observer.key_records();
  prepare_runner_process(ro);
  auto run = run_plan(plan, *backend, ro, observer);
  observer.flush_all();
  if (view) view->clear();
  // --baseline: the comparison comes before explain, which explains the
  // regressions it finds, and before the outputs, which carry both.
  std::optional<Comparison> comparison;
  std::optional<ReportData> in_scope;
  if (baseline && !run.interrupted_by) {
    in_scope = baseline_in_scope(*baseline, specs, plan, selection);
    comparison = compare_run(*in_scope, o, info, *report, observer);
  }
  if (!run.interrupted_by && !observer.to_explain().empty()) {
    run.interrupted_by = explain_all(observer, plan, *backend, ro, run_dir, console, con, report ? &*report : nullptr);
    if (comparison) where_it_went(*comparison, *in_scope, info, *report);
  }
  end_run(*backend, info, run.interrupted_by);
  if (!extras.brief) console.summary(observer.tally(), tests, info.interrupted_by);
  // The tests ran to their end: their comparison stands though explain was
  // interrupted.
  if (comparison) {
    fmt::print(con, "\n{}", comparison_text(*comparison));
    info.comparison = *comparison;
  }
  auto unwritten = write_outputs(o, report ? &*report : nullptr, info, comparison ? &*comparison : nullptr);
  for (const auto& why : unwritten) fmt::print(stderr, "memrun: {}\n", why);
  if (run.interrupted_by) return Result::interrupted(run.interrupted_by);
  if (!unwritten.empty()) return Result::stopped(Category::output);
  // A record rewritten in the spool is reported as an error (Report::entry).
  bool passed = all_passed(observer.tally(), tests) && !(comparison && gate_fails(*comparison)) &&
                !(report && report->lost() > 0);
  return passed ? Result::passed() : Result::failed();
}

}  // namespace memrun
