// Helpers for integration tests: run the real memrun binary on a spec in a
// scratch folder and read back its JSON report.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cgroup/cgroup.h"

namespace memrun::testing {

/// A temporary folder, removed with its contents on destruction.
class Scratch {
 public:
  Scratch();
  ~Scratch();
  const std::string& path() const { return path_; }
  /// Writes `text` to path()/name and returns the full path.
  std::string write(const std::string& name, const std::string& text) const;

 private:
  std::string path_;
};

/// The fixture of every test that runs memrun: a scratch folder, and no
/// cgroup of a finished run may be left behind, whatever the test ran.
class MemrunTest : public ::testing::Test {
 protected:
  void TearDown() override;
  Scratch dir;
};

/// What a memrun process did.
struct RunOutput {
  int exit_code = -1;
  std::string out, err;
  nlohmann::json report;  ///< the --json report, when one was written
};

/// Runs `argv` (stdin /dev/null), waiting for it to end.
RunOutput run_program(const std::vector<std::string>& argv, const std::string& cwd = ".");

/// A program started in the background (start_program), to be signalled.
struct Started {
  int pid = -1;
  std::string out_path, err_path;
  std::shared_ptr<Scratch> io;
};

/// Starts `argv` without waiting for it.
Started start_program(const std::vector<std::string>& argv, const std::string& cwd = ".");

/// Waits for a started program and collects what it did.
RunOutput finish_program(const Started& started);

/// Runs memrun with `args`.
RunOutput run_memrun(const std::vector<std::string>& args, const std::string& cwd = ".");

/// The memrun binary.
std::string memrun_bin();

/// Writes `yaml` (with {W} replaced by the workload binary's path) as
/// spec.yaml in `dir` and runs it with --json and --run-dir inside `dir`.
RunOutput run_spec(const Scratch& dir, const std::string& yaml,
                   const std::vector<std::string>& extra = {});

/// Like run_spec, with memrun started as `prefix` (e.g. a shell that first
/// moves itself into a cgroup, then execs memrun: its last word).
RunOutput run_spec_with(const Scratch& dir, const std::string& yaml, const std::vector<std::string>& prefix,
                        const std::vector<std::string>& extra = {});

/// The report entry of test `name`; fails the test if absent.
const nlohmann::json& test_named(const RunOutput& run, const std::string& name);

/// Run directories of memruns that are gone, below where memrun makes its
/// groups: must be empty after every run.
std::vector<std::string> leftover_cgroups();

/// Polls `ready` every 50 ms until it holds (true) or `seconds` have passed
/// (false): how tests wait for an event they cannot be woken by. Bounds are
/// generous (a VM under load is slow); a passing test never waits them out.
bool wait_until(const std::function<bool()>& ready, int seconds = 60);

/// wait_until a file exists and is not empty.
bool wait_for_file(const std::string& path, int seconds = 60);

/// A test's shell writes its pid for pid_in_file with this (`echo $$`
/// followed by its pid namespace, which a sealed test has of its own).
inline const char* const kPidNs = "$(readlink /proc/self/ns/pid)";

/// The pid, as this process sees it, of the process whose pid a test wrote
/// to `path` ("PID" or "PID pid:[INODE]": its number in that pid
/// namespace): 0 when no such process is alive, -1 when `path` holds no pid.
int pid_in_file(const std::string& path);

/// The whole file, or `fallback` when it cannot be read (absent, gone).
std::string read_text(const std::string& path, const std::string& fallback = "");

/// `text` without trailing newlines and spaces.
std::string trimmed(std::string text);

/// Writes `text` to `path` with one write(2), as cgroup and /proc files
/// want it: 0, or the errno.
int write_text(const std::string& path, const std::string& text);

/// True when process `pid` exists (and is not a zombie).
bool process_alive(int pid);

/// Writes `mib` MiB of data to `path` (left in this process's page cache).
void write_mib(const std::string& path, int mib);

/// True when `path` is on tmpfs (or ramfs): reading a file there charges no
/// page cache to the reader, and nothing is ever evicted and read back. The
/// page-cache tests skip there (the VMs' scratch folders may be).
bool on_tmpfs(const std::string& path);

/// The workload binary.
std::string workload();

/// A cgroup made with memrun's own library (memory enabled for its
/// children) and limited to `bytes`: a parent for --cgroup-parent.
std::unique_ptr<cgroup::Backend> limited_parent(uint64_t bytes);

/// "2026-11-30T10:15:02.123Z" (a report's timestamps) in ms since the epoch.
int64_t epoch_ms(const std::string& iso);

/// The highest sum of the values of intervals covering one moment, given as
/// (start, +value) and (end, -value) events; an interval ending when another
/// starts does not overlap it.
int64_t peak_sum(std::vector<std::pair<int64_t, int64_t>> events);

/// From a report's tests: the most that ran at once, and the highest sum of
/// their requested limits at once.
int most_at_once(const nlohmann::json& tests);
uint64_t most_promised(const nlohmann::json& tests);

/// Each test's name, start and end (for a failed assertion on timing).
std::string times_of(const nlohmann::json& tests);

}  // namespace memrun::testing
