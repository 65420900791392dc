// memrun exec --memory SIZE -- CMD ARGS...: one command under one limit, as
// people reach for `systemd-run -p MemoryMax=` or `/usr/bin/time -v`, and as
// a CTest launcher for one test. The command becomes a one-test spec, and
// runs and reports as any spec does.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "runner/app/commands.h"
#include "runner/base/error.h"
#include "runner/base/shell.h"
#include "runner/base/units.h"
#include "runner/base/utf8.h"
#include "runner/spec/keys.h"
#include "runner/spec/spec.h"
#include "runner/verdict/decide.h"

namespace memrun {
namespace {

// The command as a shell would read it back, for display.
std::string shown(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                   "_-+=/.,:@%") == std::string::npos;
    out += (out.empty() ? "" : " ") + (plain ? a : shell_quote(a));
  }
  return out;
}

}  // namespace

Result exec_result(const TestSpec& t, const TestRecord& r, const Result& run) {
  // Only a plain run (expect pass) hands on the command's status: a test
  // that expects oom, fail or a code passes exactly when memrun says so.
  // (Not when it was interrupted, or a report is unwritten.)
  if (run.kind() != Result::Kind::passed && run.kind() != Result::Kind::failed) return run;
  if (t.expect.kind != Expectation::pass || r.verdict.outcome != Outcome::fail) return run;
  const Observation& o = r.observed;
  // A command that exited 0 and still failed (forks refused at pids.max, a
  // tool's rule) failed for memrun's reason: its own 0 would hide that.
  if (!o.signal && o.exit_code == 0) return run;
  // The memory verdict alone: the same observation judged as if the
  // command's ending had been expected. Where that passes, memory held.
  TestSpec as_expected = t;
  if (o.signal) {
    as_expected.expect = Expectation{Expectation::fail, 0};
  } else {
    as_expected.expect = Expectation{Expectation::exit_code, o.exit_code};
  }
  if (!decide(as_expected, o).passed) return run;
  return Result::passed_on(o.exit_code, o.signal);
}

Result exec_command(const ExecOptions& e, const Options& o) {
  if (e.argv.empty())
    throw Error(Category::usage, "memrun exec needs a command: memrun exec --memory 200MiB -- CMD ARGS...");
  // An empty word names no program: PATH's search would make it the first
  // folder on PATH ("cannot run '/usr/bin/': Permission denied").
  if (e.argv[0].empty())
    throw Error(Category::usage, "memrun exec: the command's name is empty (''); name a program to run: memrun exec "
                                 "--memory 200MiB -- CMD ARGS...");
  // The flags are the spec's keys (--memory is `memory`): read and checked
  // through the spec's table, so that a rule is the same in both.
  spec::Source src;
  src.form = spec::Source::exec;
  spec::Fields f;
  f.name = program_test_name(e.name, e.argv);
  f.argv = e.argv;
  f.command = shown(e.argv);
  spec::read_flag(src, "memory", e.memory, f);
  spec::read_flag(src, "timeout", e.timeout, f);
  spec::read_flag(src, "expect", e.expect, f);
  if (!e.min_headroom.empty()) spec::read_flag(src, "min_headroom", e.min_headroom, f);
  f.service_manager = e.service_manager;
  f.sub_groups = e.sub_groups;
  TestSpec t = spec::test_of(f, std::filesystem::current_path().string());
  if (auto problem = spec::check_test(src, t)) src.fail(YAML::Mark::null_mark(), problem.what);
  t.line = t.column = 1;
  // Reports name the spec "memrun exec"; there is no file to point at.
  std::vector<TestRecord> records;
  bool after = e.output == "after";
  Result run = run_specs({Spec{"memrun exec", std::nullopt, {t}}}, o, RunExtras{!after, after, &records});
  if (after && records.size() == 1) {
    // The verdict line came first; now the command's whole output, as a
    // CTest log shows it (the logs are the record; nothing was echoed).
    std::fflush(stdout);
    for (const auto& [path, label] : {std::pair{records[0].test.stdout_path, "stdout"},
                                      std::pair{records[0].test.stderr_path, "stderr"}}) {
      std::ifstream in(path, std::ios::binary);
      if (!in || in.peek() == std::ifstream::traits_type::eof()) continue;
      std::printf("--- %s of %s (%s)\n", label, escape_controls(t.name).c_str(), path.c_str());
      std::cout << in.rdbuf();
      std::cout.flush();
    }
  }
  return records.size() == 1 ? exec_result(t, records[0], run) : run;
}

}  // namespace memrun
