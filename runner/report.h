// Stage 4: the report. The console table as tests finish, and the JSON
// report (schema in docs/report.md) written atomically at the end.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

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

/// The JSON report (docs/report.md).
nlohmann::ordered_json json_report(const RunInfo& info, const RunResults& results);

/// Writes `text` to `path` atomically (a temp file in the same folder, then
/// rename), so a reader never sees half a report; a non-regular target such
/// as /dev/stdout is written directly. Throws Error(kExitUsage) on failure.
void write_atomically(const std::string& path, const std::string& text);

/// The last `max_lines` lines of a log file (at most 4 KiB are read).
std::string log_tail(const std::string& path, size_t max_lines);

/// The exit code for a finished run: 0 all passed, 1 otherwise.
int exit_code_for(const std::vector<Result>& results, size_t planned);

}  // namespace memrun
