// Stage 4: the report. The console table as tests finish, and the JSON
// report (schema in docs/report.md) written atomically at the end.
#pragma once

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runner/files.h"
#include "runner/run.h"

namespace memrun {

/// Facts about the run that every report carries.
struct RunInfo {
  std::string run_id, run_dir;
  std::string backend, cgroup_mode, cgroup_path;
  std::string kernel;  ///< uname -r
  std::chrono::system_clock::time_point started, ended;
  int interrupted_by = 0;  ///< signal number, 0 if none
  int shard_index = 0, shard_count = 0;  ///< --shard K/N; 0/0 without
  int jobs = 1;                          ///< -j
  std::optional<uint64_t> budget;        ///< the memory budget, if any
  /// What memrun could not remove at the end (the run's cgroup), or empty.
  std::string cleanup_error;
};

/// Console output; colour only when enabled.
class Console {
 public:
  /// `color`: use ANSI colours (a TTY without NO_COLOR). `name_width`: the
  /// width of the name column, so that lines align.
  Console(std::FILE* out, bool color, size_t name_width);
  /// One aligned line per test; for a test that did not pass, the reason,
  /// the memory breakdown (for an OOM) and the tail of its log.
  void test(const Result& r) const;
  /// One line for a spec's setup: skipped (up to date), or how it ran, and
  /// the reason and log tail when it failed.
  void setup(const SetupResult& s) const;
  /// The closing line: "N passed, N failed" and the exit code's meaning.
  void summary(const std::vector<Result>& results, size_t planned, int interrupted_by) const;

 private:
  std::string paint(const char* code, const std::string& text) const;
  void details(const Result& r) const;  // reason, OOM breakdown, log tail
  std::FILE* out_;
  bool color_;
  size_t width_;
};

/// True when stdout is a TTY and NO_COLOR is unset.
bool want_color(std::FILE* out);

/// The JSON report (docs/report.md), built as the run goes: each result is
/// rendered as it ends and spooled to an unlinked file in the run folder, so
/// that memrun's memory does not grow with the number of tests or the length
/// of their timelines. write() assembles the report in the plan's order.
class Report {
 public:
  /// `dir`: where the spool lives (the run folder).
  explicit Report(const std::string& dir);
  ~Report();
  Report(const Report&) = delete;
  Report& operator=(const Report&) = delete;
  void add_setup(const SetupResult& s);
  /// The result of the plan's `index`-th test; tests never added (never
  /// started under --fail-fast) are absent from the report.
  void add_test(size_t index, const Result& r);
  /// Hands the whole report, in pieces, to `sink`.
  void render(const RunInfo& info, const Sink& sink) const;
  /// Writes the whole report to `path` with write_atomically.
  void write(const std::string& path, const RunInfo& info) const;
  /// The whole report, parsed: what the CI outputs are made from, so that
  /// they depend on no file (a test may delete the run folder).
  nlohmann::ordered_json json(const RunInfo& info) const;

 private:
  struct Spooled {
    uint64_t offset = 0;
    uint32_t length = 0;  // 0: not added
    bool held = false;    // in held_, not in the spool
  };
  int spool_ = -1;
  uint64_t spooled_ = 0;
  std::vector<Spooled> tests_;
  std::map<size_t, std::string> held_;  // entries the spool could not take
  std::vector<std::string> setups_;
  size_t total_ = 0, passed_ = 0;
};

/// The exit code for a finished run: 0 all passed, 1 otherwise.
int exit_code_for(const std::vector<Result>& results, size_t planned);

}  // namespace memrun
