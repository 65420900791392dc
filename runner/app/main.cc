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
#include "runner/app/cli.h"
#include "runner/app/cli_scan.h"
#include "runner/app/commands.h"
#include "runner/app/doctor.h"
#include "runner/app/result.h"
#include "runner/app/serve.h"
#include "runner/base/error.h"
#include "runner/run/enforce.h"

namespace memrun {
namespace {

Result dispatch(const CLI::App& app, const Cli& c) {
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
  if (*c.exec) {
    if (c.exec_options.argv.empty()) throw Error(Category::usage, missing_arguments(*c.exec, {"command"}));
    return exec_command(c.exec_options, o);
  }
  if (*c.serve) return serve_command(o);
  if (o.specs.empty()) throw Error(Category::usage, missing_arguments(app));
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
      "memrun runs each test of a YAML spec in its own cgroup under a hard memory limit, and reports what the "
      "kernel measured: pass or fail, the peak, OOM kills and the headroom.",
      "memrun"};
  Cli cli;
  declare_command_line(app, cli);
  app.set_version_flag("--version", fmt::format("memrun {} (commit {}, {})", MEMRUN_VERSION, kCommit,
                                                *MEMRUN_BUILD_TYPE ? MEMRUN_BUILD_TYPE " build" : "no build type"),
                       "print memrun's version, the commit it was built from and its build type, and exit");
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
    // Not CLI11's "base is required", "The following argument was not
    // expected" or "Could not convert": memrun's words (cli.h).
    std::string said = reworded(app, e, std::vector<std::string>(argv + 1, argv + argc));
    if (said.empty()) app.exit(e);
    else fmt::print(stderr, "memrun: {}\n", said);
    return exit_code(Result::stopped(Category::usage), false);
  }
  bool skip = cli.o.unenforceable == "skip";
  return exit_code(run_guarded([&] { return dispatch(app, cli); }, skip), skip);
}
