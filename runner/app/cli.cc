#include "runner/app/cli.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <set>
#include <sstream>

#include "runner/base/error.h"

namespace memrun {
namespace {

// The groups --help lists flags under (in the order first declared).
constexpr const char* kSelect = "Which tests";
constexpr const char* kLimits = "Limits";
constexpr const char* kParallel = "Several tests at once";
constexpr const char* kReports = "Reports";
constexpr const char* kCompare = "Comparing with a base report";
constexpr const char* kWhere = "Where and how tests run";

// How a command is named in what memrun says: "memrun" or "memrun list".
std::string command_name(const CLI::App& app) { return app.get_parent() ? "memrun " + app.get_name() : "memrun"; }

// A check of an option's value in memrun's words: `wrong` says what is wrong
// with a value ("" when nothing is), and memrun's usage error (exit 2) adds
// an example and where to look. Thrown from the validator itself, which
// CLI11 lets through (it catches only its own ValidationError), so that
// CLI11's "--live: sometimes not in {auto,on,off}" never reaches the user.
// After option_text(): a positional is named by it (SPEC, BASE).
CLI::Option* takes(CLI::App& app, CLI::Option* opt, const std::string& example,
                   std::function<std::string(const std::string& name, const std::string& value)> wrong) {
  bool positional = opt->get_positional();
  std::string name = positional ? opt->get_option_text() : opt->get_name();
  if (name.size() > 3 && name.compare(name.size() - 3, 3, "...") == 0) name.resize(name.size() - 3);
  std::string in = app.get_parent() ? app.get_name() + ": " : "";
  std::string look =
      positional ? "see " + command_name(app) + " --help" : command_name(app) + " --help lists the flags";
  return opt->check(CLI::Validator(
      [=](std::string& value) {
        std::string why = wrong(name, value);
        if (!why.empty()) throw Error(Category::usage, in + why + "; e.g. " + example + " (" + look + ")");
        return std::string();
      },
      "", "memrun"));
}

// A flag whose value is one of `words`: --help shows them as a|b|c.
CLI::Option* one_of(CLI::App& app, CLI::Option* opt, const std::vector<std::string>& words,
                    const std::string& separator = " ") {
  std::string shown, said;
  for (size_t i = 0; i < words.size(); ++i) {
    shown += (i ? "|" : "") + words[i];
    said += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
  }
  std::string example = opt->get_name() + separator + words[words.size() > 1 ? 1 : 0];
  takes(app, opt, example, [=](const std::string& name, const std::string& value) {
    bool known = std::find(words.begin(), words.end(), value) != words.end();
    return known ? "" : name + " takes " + said + ", not '" + value + "'";
  });
  return opt->option_text(separator == "=" ? "[=" + shown + "]" : shown);
}

// A flag whose value is a whole number from `lo` (to `hi`, when given).
CLI::Option* whole_number(CLI::App& app, CLI::Option* opt, long lo, long hi, long example) {
  std::string range = hi ? "from " + std::to_string(lo) + " to " + std::to_string(hi) : std::to_string(lo) + " or more";
  std::string e_g = opt->get_name() + " " + std::to_string(example);
  takes(app, opt, e_g, [=](const std::string& name, const std::string& value) {
    char* end = nullptr;
    errno = 0;
    long n = std::strtol(value.c_str(), &end, 10);
    bool fits = !value.empty() && *end == '\0' && errno == 0 && n >= lo && (!hi || n <= hi);
    return fits ? "" : name + " takes a whole number " + range + ", not '" + value + "'";
  });
  return opt->option_text("N");
}

// An option whose value is a file (or, with `folder_too`, a path) that exists.
CLI::Option* existing(CLI::App& app, CLI::Option* opt, const std::string& example, bool folder_too = false) {
  return takes(app, opt, example, [=](const std::string& name, const std::string& value) {
    std::error_code ec;
    auto status = std::filesystem::status(value, ec);
    if (!std::filesystem::exists(status)) return name + " '" + value + "': no such file";
    if (!folder_too && !std::filesystem::is_regular_file(status)) return name + " '" + value + "': not a file";
    return std::string();
  });
}

// Each command's line, as --help's usage and the man page's synopsis.
const std::vector<std::pair<std::string, std::string>>& synopses() {
  static const std::vector<std::pair<std::string, std::string>> lines = {
      {"memrun", "memrun [FLAGS] SPEC..."},
      {"exec", "memrun exec --memory SIZE [FLAGS] [--] COMMAND [ARGS...]"},
      {"list", "memrun list [FLAGS] SPEC..."},
      {"bisect", "memrun bisect SPEC --test NAME [FLAGS]"},
      {"bisect", "memrun bisect [--memory-range LO:HI] [FLAGS] -- COMMAND [ARGS...]"},
      {"compare", "memrun compare [FLAGS] BASE HEAD"},
      {"merge", "memrun merge [FLAGS] REPORT..."},
      {"repro", "memrun repro REPORT NAME [--spec SPEC]"},
      {"explain", "memrun explain REPORT NAME [--spec SPEC] [FLAGS]"},
      {"doctor", "memrun doctor [FLAGS]"},
      {"gc", "memrun gc [FLAGS]"},
  };
  return lines;
}

// `text` in lines of at most `width` characters, every line but the first
// indented by `indent`.
std::string wrapped(const std::string& text, size_t indent, size_t width) {
  std::istringstream words(text);
  std::string out, line;
  for (std::string w; words >> w;) {
    if (!line.empty() && indent + line.size() + 1 + w.size() > width) {
      out += line + "\n" + std::string(indent, ' ');
      line.clear();
    }
    line += (line.empty() ? "" : " ") + w;
  }
  return out + line;
}

// --help in memrun's words: value names (SIZE, DURATION, FILE, a|b) from
// each option's option_text, flags in their groups, descriptions wrapped.
class Help : public CLI::Formatter {
 public:
  static constexpr size_t kWidth = 100, kColumn = 30;

  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode mode) const override {
    if (mode == CLI::AppFormatMode::Sub) return make_expanded(app);
    std::string out = wrapped(app->get_description(), 0, kWidth) + "\n\n" + make_usage(app, "");
    bool root = app->get_parent() == nullptr;
    if (root) out += make_subcommands(app, mode);
    out += make_positionals(app) + flag_groups(app);
    if (!app->get_footer().empty()) out += "\n" + wrapped_paragraphs(app->get_footer()) + "\n";
    return out;
  }

  std::string make_usage(const CLI::App* app, std::string) const override {
    std::string name = app->get_parent() ? app->get_name() : "memrun";
    std::string out;
    for (const auto& [command, line] : synopses())
      if (command == name) out += (out.empty() ? "Usage: " : "       ") + line + "\n";
    if (!app->get_parent()) out += "       memrun COMMAND [FLAGS] ...   (memrun COMMAND --help: its flags)\n";
    return out;
  }

  std::string make_positionals(const CLI::App* app) const override {
    auto args = app->get_options([](const CLI::Option* o) { return o->get_positional() && !o->get_group().empty(); });
    return args.empty() ? "" : make_group("Arguments", true, args);
  }

  std::string make_subcommands(const CLI::App* app, CLI::AppFormatMode) const override {
    std::string out = "\nCommands:\n";
    for (const auto* sub : app->get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); }))
      out += row("  " + sub->get_name(), sub->get_description());
    return out;
  }

  // Each group in the order first declared; the help flag's last.
  std::string flag_groups(const CLI::App* app) const {
    std::vector<std::string> groups = app->get_groups();
    std::stable_partition(groups.begin(), groups.end(), [](const std::string& g) { return g != "Flags"; });
    std::string out;
    for (const auto& group : groups) {
      auto flags = app->get_options(
          [&](const CLI::Option* o) { return o->get_group() == group && o->nonpositional(); });
      if (!group.empty() && !flags.empty()) out += make_group(group, false, flags);
    }
    return out;
  }

  std::string make_option(const CLI::Option* opt, bool positional) const override {
    return row("  " + make_option_name(opt, positional) + make_option_opts(opt), make_option_desc(opt));
  }

  std::string make_option_name(const CLI::Option* opt, bool positional) const override {
    if (positional) return opt->get_option_text();
    std::string out;
    for (const auto& s : opt->get_snames()) out += "-" + s + ", ";
    for (const auto& l : opt->get_lnames()) out += "--" + l + ", ";
    return out.substr(0, out.size() - 2);
  }

  std::string make_option_opts(const CLI::Option* opt) const override {
    const std::string& value = opt->get_option_text();
    if (opt->get_positional() || value.empty()) return "";
    return (value[0] == '[' ? "" : " ") + value;  // --explain[=WHEN]: its value is optional
  }

  std::string make_option_desc(const CLI::Option* opt) const override {
    return opt->get_description() + (opt->get_required() ? " (required)" : "");
  }

 private:
  // A name and its description: the description from column kColumn, or
  // on the next line there when the name is longer.
  static std::string row(const std::string& name, const std::string& description) {
    std::string out = name;
    if (name.size() + 2 > kColumn) out += "\n" + std::string(kColumn, ' ');
    else out += std::string(kColumn - name.size(), ' ');
    return out + wrapped(description, kColumn, kWidth) + "\n";
  }
  static std::string wrapped_paragraphs(const std::string& text) {
    std::string out;
    for (size_t at = 0; at <= text.size();) {
      size_t end = text.find("\n\n", at);
      if (end == std::string::npos) end = text.size();
      out += (out.empty() ? "" : "\n\n") + wrapped(text.substr(at, end - at), 0, kWidth);
      at = end + 2;
    }
    return out;
  }
};

// How a comparison judges: shared by `memrun compare` and --baseline.
void add_comparing_flags(CLI::App& app, Comparing& c) {
  app.add_option("--max-increase", c.max_increase,
                 "how much more memory than the base is not yet a regression: N%, SIZE, or both (the larger wins); "
                 "a test's `max_increase:` overrides it. Default, with 3 runs or more a side (--repeat 3): the "
                 "larger of 2%, 1MiB and 3 times the larger side's spread (the range of its runs); with fewer: "
                 "10%, 1MiB")
      ->option_text("N%|SIZE")
      ->group(kCompare);
  one_of(app,
         app.add_option("--gate", c.gate,
                        "the figure compared: auto (the working set where both reports subtracted page cache and "
                        "the test declares no inputs; else the kernel peak), peak, working-set"),
         {"auto", "peak", "working-set"})
      ->group(kCompare);
}

// The flags of `memrun SPEC...`; a command that takes some of them declares
// them all and keeps those it takes (take_run_flags), so that each is written
// once and --help lists them under every command that takes them.
// Long: one declaration per flag, as --help lists them.
void add_run_flags(CLI::App& app, Options& o) {
  existing(app, app.add_option("spec", o.specs, "YAML spec files to run")->option_text("SPEC..."),
           "memrun specs/parquet.yaml", true);
  app.option_defaults()->group(kSelect);
  app.add_option("--filter", o.selection.filter, "only tests whose name matches this regex (RE2)")
      ->option_text("REGEX");
  // One value a flag (repeatable), so that a SPEC after it stays a SPEC.
  app.add_option("--tag", o.selection.tags, "only tests with this tag (repeatable: one of these tags)")
      ->option_text("TAG")
      ->allow_extra_args(false);
  app.add_option("--shard", o.shard, "only shard K of N (1-based), for CI matrix jobs")->option_text("K/N");
  app.add_option("--timings", o.timings,
                 "a previous JSON report: balance shards by its durations; with -j, start the longest first")
      ->option_text("REPORT");
  whole_number(app,
               app.add_option("--repeat", o.selection.repeat,
                              "run each test N times, each in a fresh cgroup; the report keeps every run's figures, "
                              "and comparisons use their spread as the noise bound"),
               1, 100, 3);
  app.add_flag("--fail-fast", o.fail_fast,
               "start no test after the first that does not pass (with -j, those running finish)");
  app.option_defaults()->group(kLimits);
  auto* scale =
      app.add_option("--scale", o.scale,
                     "run every test at this factor of its limit (e.g. 0.8: who lives near the edge?)")
          ->option_text("FACTOR");
  // The bounds of runner/spec/overrides.cc's.
  takes(app, scale, "--scale 0.8", [](const std::string& name, const std::string& value) {
          char* end = nullptr;
          double factor = std::strtod(value.c_str(), &end);
          bool fits = !value.empty() && *end == '\0' && factor > 0 && factor <= 1000;
          return fits ? "" : name + " takes a number above 0, up to 1000, not '" + value + "'";
        });
  app.add_option("--set", o.sets, "override one test's limit (repeatable)")
      ->option_text("NAME.memory=SIZE")
      ->allow_extra_args(false);
  one_of(app,
         app.add_option("--unenforceable", o.unenforceable,
                        "where memory limits cannot be enforced (no root, no delegated cgroup): fail (exit 3, the "
                        "default) or skip (exit 77, which the CMake functions' UNENFORCEABLE_SKIP gives CTest as "
                        "SKIP_RETURN_CODE): for developers' machines where a test without its limit proves nothing"),
         {"fail", "skip"});
  app.option_defaults()->group(kParallel);
  whole_number(app,
               app.add_option("-j,--jobs", o.jobs,
                              "run up to N tests at once, within the memory budget (default 1: one at a time, in "
                              "spec order)"),
               1, 0, 4);
  app.add_option("--memory-budget", o.memory_budget,
                 "the sum of the limits of running tests stays within SIZE (default with -j: the memory "
                 "available to memrun less 10%)")
      ->option_text("SIZE");
  app.add_flag("--allow-oversubscribe", o.allow_oversubscribe,
               "run a test whose limit exceeds the budget alone, instead of failing it with `error`");
  app.option_defaults()->group(kReports);
  app.add_option("--json", o.json, "write the JSON report (schema memrun-report/1) to FILE")->option_text("FILE");
  app.add_option("--junit", o.ci.junit, "write JUnit XML (for CI test tabs) to FILE")->option_text("FILE");
  app.add_option("--markdown", o.ci.markdown, "write a Markdown table of the verdicts to FILE")->option_text("FILE");
  app.add_option("--html", o.ci.html, "write a self-contained HTML report with a memory plot per test to FILE")
      ->option_text("FILE");
  app.add_option("--run-dir", o.run_dir, "folder for each run's logs (default .memrun)")->option_text("DIR");
  app.add_option("--max-log", o.max_log, "keep at most SIZE of each test's stdout and stderr (default 64MiB; 0: all)")
      ->option_text("SIZE");
  one_of(app,
         app.add_option("--live", o.live, "the live view of running tests: auto (on a terminal), on, off"),
         {"auto", "on", "off"});
  one_of(app,
         app.add_flag("--explain{on-failure}", o.explain,
                      "run a test that failed on memory once more under an allocation profiler (memray, heaptrack) "
                      "and report where its memory went; --explain=always: every test (a test's `explain:` "
                      "overrides it)"),
         {"on-failure", "always", "never"}, "=");
  app.add_flag("-v,--verbose", o.verbose, "say where cgroups are made");
  app.option_defaults()->group(kCompare);
  app.add_option("--baseline", o.baseline,
                 "a report of the base branch (--json): compare this run with it at the end; exit 1 when a test "
                 "regressed beyond --max-increase")
      ->option_text("REPORT");
  existing(app, app.get_option("--baseline"), "--baseline base.json");
  add_comparing_flags(app, o.comparing);
  app.option_defaults()->group(kWhere);
  one_of(app,
         app.add_option("--backend", o.backend,
                        "auto: where systemd is PID 1 on cgroup v2, systemd (a scope from the system manager as "
                        "root, from your user manager without); else v2 where it has the memory controller, else "
                        "v1. Or v2, v1, systemd"),
         {"auto", "v2", "v1", "systemd"});
  app.add_option("--cgroup-parent", o.cgroup_parent, "make the run's cgroups below this cgroup (default: memrun's own)")
      ->option_text("PATH");
  app.add_flag("--host-cgroups", o.host_cgroups,
               "let tests see the host's cgroup hierarchies (as root: and write them) instead of being "
               "sealed in their own group; for tests that must inspect or manage the host's cgroups");
  app.add_option("--sample-interval", o.sample_interval,
                 "how often memory is sampled for timelines and the page-cache estimate (default 20ms; 0: off)")
      ->option_text("DURATION");
  app.add_option("--grace", o.grace,
                 "on Ctrl-C, SIGTERM or another signal, how long tests get after SIGTERM before SIGKILL (default "
                 "5s); a second signal kills at once")
      ->option_text("DURATION");
  app.option_defaults()->group("Flags");
}

// The flags of memrun's that a command takes: declared as memrun's are,
// those not named dropped (the command falls through to none: what it
// takes is exactly what its --help lists).
void take_run_flags(CLI::App& command, Options& o, const std::set<std::string>& names) {
  std::vector<CLI::Option*> before = command.get_options([](CLI::Option*) { return true; });
  add_run_flags(command, o);
  for (auto* opt : command.get_options([](CLI::Option*) { return true; })) {
    bool taken = std::find(before.begin(), before.end(), opt) != before.end();
    for (const auto& l : opt->get_lnames()) taken |= names.count("--" + l) > 0;
    if (!taken) command.remove_option(opt);
  }
}

// The subcommands and their own flags.
// Long: one declaration per subcommand and flag, as --help lists them.
void add_commands(CLI::App& app, Cli& c) {
  const std::set<std::string> backend = {"--backend", "--cgroup-parent", "--host-cgroups"};
  c.doctor = app.add_subcommand("doctor", "check whether memory limits can be enforced here, and how to fix it");
  take_run_flags(*c.doctor, c.o, backend);
  c.gc = app.add_subcommand("gc", "remove the cgroups and kill the processes that killed memrun runs left");
  take_run_flags(*c.gc, c.o, {"--backend", "--cgroup-parent"});

  auto* list = c.list = app.add_subcommand("list", "list the tests of specs, with their limits, without running them");
  // --backend, --cgroup-parent: where suites are listed.
  take_run_flags(*list, c.o, {"--filter", "--tag", "--shard", "--timings", "--backend", "--cgroup-parent"});
  existing(*list, list->add_option("spec", c.list_specs, "YAML spec files")->required()->option_text("SPEC..."),
           "memrun list specs/parquet.yaml", true);

  auto* merge = c.merge = app.add_subcommand("merge", "merge the JSON reports of shards into one (and its CI outputs)");
  auto* shards = merge->add_option("report", c.merge_inputs, "JSON reports of the shards")->required();
  existing(*merge, shards->option_text("REPORT..."), "memrun merge shard-1.json shard-2.json -o report.json");
  merge->option_defaults()->group(kReports);
  merge->add_option("-o,--output", c.merge_output, "write the merged JSON report to FILE")->option_text("FILE");
  merge->add_option("--junit", c.o.ci.junit, "write the merged JUnit XML to FILE")->option_text("FILE");
  merge->add_option("--markdown", c.o.ci.markdown, "write the merged Markdown table to FILE")->option_text("FILE");
  merge->add_option("--html", c.o.ci.html, "write the merged HTML report to FILE")->option_text("FILE");

  auto* bisect = c.bisect =
      app.add_subcommand("bisect", "find the smallest memory limit at which a test (or a program) passes");
  bisect->add_option("words", c.bisect_words, "a spec (with --test), or the program and its arguments after --")
      ->required()
      ->option_text("SPEC | COMMAND...");
  bisect->option_defaults()->group("Bisecting");
  bisect->add_option("--test", c.bisect_test, "the test of the spec to bisect")->option_text("NAME");
  bisect->add_option("--memory-range", c.bisect_range,
                     "where to look, e.g. 64MiB:4GiB (default: the first run, at 4x the test's limit and at least "
                     "1GiB, sets the top; its peak and working set the bottom)")
      ->option_text("LO:HI");
  bisect->add_option("--tolerance", c.bisect_tolerance, "stop when the range is this narrow (default 1%)")
      ->option_text("SIZE|N%");
  whole_number(*bisect,
               bisect->add_option("--trials", c.bisect_trials,
                                  "runs per probe; a probe passes when all do (flaky tests)"),
               1, 0, 3);
  take_run_flags(*bisect, c.o, {"--backend", "--cgroup-parent", "--host-cgroups", "--run-dir"});

  auto* compare = c.compare = app.add_subcommand(
      "compare", "what a change did to memory: compare a head report with a base report, test by test");
  existing(*compare,
           compare->add_option("base", c.compare_base, "the base branch's JSON report")
               ->required()
               ->option_text("BASE"),
           "memrun compare base.json head.json");
  existing(*compare,
           compare->add_option("head", c.compare_head, "the JSON report to judge")->required()->option_text("HEAD"),
           "memrun compare base.json head.json");
  compare->option_defaults()->group(kReports);
  compare->add_option("--markdown", c.comparing.markdown, "write the comparison as Markdown (a table for a pull request)")
      ->option_text("FILE");
  compare->add_option("--json", c.comparing.json, "write the comparison as JSON (schema memrun-compare/1)")
      ->option_text("FILE");
  compare->add_option("--junit", c.comparing.junit, "write JUnit XML: a failure per regression")->option_text("FILE");
  add_comparing_flags(*compare, c.comparing);
  compare->footer("Exit status: 0 when no test regressed, 1 when one did, 2 when a report cannot be read.");

  auto* exec = c.exec = app.add_subcommand("exec", "run one program under one memory limit, as a test");
  exec->footer(
      "The program's output passes through as it runs (and is kept in the run folder); memrun's verdict line "
      "follows. Every word from the first that is not one of these flags is the program's (-- before it is "
      "allowed, never needed).\n\n"
      "Exit status: the program's own when the memory verdict passed (no OOM kill, --min-headroom held); 1 when "
      "it did not; 128+N when a signal N ended it; with --expect other than pass, 0 when the expectation held, "
      "else 1.");
  // Never filled by CLI11: scan_command_line() takes the command off the
  // line first (every word from the first that is not exec's), so that no
  // flag of the command's is taken for memrun's. Listed for --help.
  exec->add_option("command", c.exec_options.argv, "the program and its arguments")->option_text("COMMAND [ARGS...]");
  exec->option_defaults()->group("The test");
  exec->add_option("--memory", c.exec_options.memory, "the hard limit, e.g. 200MiB")->required()->option_text("SIZE");
  exec->add_option("--expect", c.exec_options.expect, "pass (the default), oom, fail, or an exit code")
      ->option_text("pass|oom|fail|CODE");
  exec->add_option("--timeout", c.exec_options.timeout, "kill it after this long (default 10m)")
      ->option_text("DURATION");
  exec->add_option("--min-headroom", c.exec_options.min_headroom, "how much of the limit must stay free")
      ->option_text("SIZE|N%");
  exec->add_option("--name", c.exec_options.name, "its name in the reports (default: the program's)")
      ->option_text("NAME");
  exec->add_flag("--service-manager", c.exec_options.service_manager,
                 "let the program reach the service manager (systemd-run, systemctl), which would start what it "
                 "asks outside the limit; without it the manager's sockets are covered for the program");
  exec->add_flag("--sub-groups", c.exec_options.sub_groups,
                 "let the program make memory sub-groups of its group on cgroup v1, where the kernel charges no "
                 "socket buffers; without it such a program fails");
  one_of(*exec,
         exec->add_option("--output", c.exec_options.output,
                          "live: the program's output passes through as it runs (the default); after: memrun's "
                          "verdict line alone first, then the program's whole stdout and stderr (what the CMake "
                          "functions use, so that a CTest log starts with the verdict)"),
         {"live", "after"});
  take_run_flags(*exec, c.o,
                 {"--unenforceable", "--json", "--junit", "--markdown", "--html", "--run-dir", "--max-log", "--live",
                  "--explain", "--verbose", "--baseline", "--max-increase", "--gate", "--backend", "--cgroup-parent",
                  "--host-cgroups", "--sample-interval", "--grace"});

  auto* repro = c.repro = app.add_subcommand("repro", "print the command line that reruns one test of a report alone");
  existing(*repro, repro->add_option("report", c.repro_report, "a JSON report")->required()->option_text("REPORT"),
           "memrun repro report.json big_join");
  repro->add_option("name", c.repro_name, "the test's name")->required()->option_text("NAME");
  repro->add_option("--spec", c.repro_spec, "the test's spec, when specs of the report share the name")
      ->option_text("SPEC");

  auto* explain = c.explain = app.add_subcommand(
      "explain", "rerun one test of a report as `repro` prints it, under an allocation profiler: where its memory went");
  existing(*explain,
           explain->add_option("report", c.explain_report, "a JSON report")->required()->option_text("REPORT"),
           "memrun explain report.json big_join");
  explain->add_option("name", c.explain_name, "the test's name")->required()->option_text("NAME");
  explain->add_option("--spec", c.explain_spec, "the test's spec, when specs of the report share the name")
      ->option_text("SPEC");
  // Where the rerun is confined (default: the report's run's cgroup parent
  // and run folder, where they exist).
  take_run_flags(*explain, c.o, {"--cgroup-parent", "--run-dir"});

  // pytest --memrun's own (runner/app/serve.h): started by the pytest plugin
  // with a socket on its standard input; not listed.
  c.serve = app.add_subcommand("serve", "the memrun of a pytest process (pytest --memrun starts it)");
  take_run_flags(*c.serve, c.o, {"--backend", "--cgroup-parent", "--host-cgroups", "--sample-interval"});
  c.serve->group("");
}

}  // namespace

std::vector<std::string> synopsis() {
  std::vector<std::string> out;
  for (const auto& [command, line] : synopses()) out.push_back(line);
  return out;
}

// How `command` is written: its lines of synopses(), joined.
std::string usage_of(const CLI::App& command) {
  std::string usage, name = command.get_parent() ? command.get_name() : "memrun";
  for (const auto& [of, line] : synopses())
    if (of == name) usage += (usage.empty() ? "" : " or ") + line;
  return usage;
}

// Like bare `memrun`'s "no spec given": the arguments `command` needs and
// lacks (the required ones, and a run's spec), by the names --help gives
// them, and how the command is written.
std::string missing_arguments(const CLI::App& command, const std::set<std::string>& unfilled) {
  std::string missing;
  for (const auto* opt : command.get_options()) {
    bool needed = opt->get_required() || (!command.get_parent() && opt->get_positional());
    bool given = opt->count() > 0 && !unfilled.count(opt->get_name());
    if (!(needed || unfilled.count(opt->get_name())) || given) continue;
    std::string name = opt->get_positional() ? opt->get_option_text() : opt->get_name() + " " + opt->get_option_text();
    if (name.size() > 3 && name.compare(name.size() - 3, 3, "...") == 0) name.resize(name.size() - 3);
    if (auto bar = name.find(" | "); bar != std::string::npos) name.replace(bar, 3, " or ");
    name = name.substr(0, name.find(" ["));  // COMMAND [ARGS...]
    missing += (missing.empty() ? "" : " or ") + name;
  }
  if (missing.empty()) return "";
  return "no " + missing + " given. Usage: " + usage_of(command) + " (see " + command_name(command) + " --help)";
}

std::string extra_arguments(const CLI::App& command) {
  std::string extra;
  for (const auto& word : command.remaining()) extra += (extra.empty() ? "'" : " '") + word + "'";
  if (extra.empty()) return "";
  return (command.get_parent() ? command.get_name() + ": " : "") + "more arguments than it takes: " + extra +
         ". Usage: " + usage_of(command) + " (see " + command_name(command) + " --help)";
}

std::string flag_given_a_value(const CLI::App& app, const std::vector<std::string>& args) {
  auto parsed = app.get_subcommands();
  for (const auto& arg : args) {
    auto eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) continue;
    std::string name = arg.substr(0, eq);
    for (const CLI::App* command : {&app, parsed.empty() ? &app : parsed.front()}) {
      const CLI::Option* opt = command->get_option_no_throw(name);
      // A flag: an option that takes no value of its own.
      if (!opt || opt->get_expected_max() != 0) continue;
      return name + " takes no value, not '" + arg.substr(eq + 1) + "'; e.g. " + name + " (see " +
             command_name(*command) + " --help)";
    }
  }
  return "";
}

std::string reworded(const CLI::App& app, const CLI::ParseError& e, const std::vector<std::string>& args) {
  auto parsed = app.get_subcommands();
  const CLI::App& command = parsed.empty() ? app : *parsed.front();
  if (dynamic_cast<const CLI::RequiredError*>(&e)) return missing_arguments(command);
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) return extra_arguments(command);
  return flag_given_a_value(app, args);
}

void declare_command_line(CLI::App& app, Cli& c) {
  app.formatter(std::make_shared<Help>());
  app.get_help_ptr()->description("print this help and exit (memrun COMMAND --help: the command's)");
  add_run_flags(app, c.o);
  add_commands(app, c);
  for (auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    sub->get_help_ptr()->description("print this help and exit")->group("Flags");
    if (sub != c.serve) sub->group("Commands");
  }
  app.get_help_ptr()->group("Flags");
  app.require_subcommand(0, 1);
  app.footer(
      "Exit codes: 0 all tests passed; 1 a test did not pass; 2 bad spec or usage; 3 memory limits cannot be "
      "enforced here (run 'memrun doctor' for the fix); 77 the same, with --unenforceable skip; 4 memrun itself "
      "failed (a system call, an internal error); 128+N interrupted by signal N. memrun exec: the program's own "
      "status where memory held.");
}

}  // namespace memrun
