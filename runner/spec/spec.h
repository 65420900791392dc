// Stage 1: the spec. A YAML file becomes a validated list of tests with the
// spec's `defaults:` merged in. Nothing runs before the whole file is valid.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runner/base/units.h"
#include "runner/spec/order.h"
#include "runner/spec/suite.h"

namespace memrun {

/// A test's `explain:` (spec, rule, defaults) or --explain.
enum class ExplainMode { never, on_failure, always };

/// "never", "on-failure", "always".
const char* to_string(ExplainMode mode);
/// The mode named `text`, or nullopt.
std::optional<ExplainMode> explain_mode_named(const std::string& text);

/// What a test is expected to end with.
struct Expectation {
  enum Kind { pass, oom, fail, exit_code } kind = pass;
  int code = 0;  ///< for exit_code
  /// "pass", "oom", "fail" or "exit 3".
  std::string describe() const;
  bool operator==(const Expectation&) const = default;
};

/// The least headroom a passing test must keep: bytes, or a share of its limit.
struct MinHeadroom {
  uint64_t bytes = 0;
  double percent = 0;  ///< used when is_percent
  bool is_percent = false;
  /// The requirement in bytes for a given limit.
  uint64_t for_limit(uint64_t limit) const;
  bool operator==(const MinHeadroom&) const = default;
};

/// How much more memory a test may use than the baseline's before a
/// comparison calls it a regression: a share of the baseline's figure, a
/// size, or both (the larger wins, so a small test does not flap on a few
/// pages).
struct MaxIncrease {
  double percent = 10;
  uint64_t bytes = MiB;
  /// The allowed increase over a baseline figure of `base` bytes.
  uint64_t for_base(uint64_t base) const {
    return std::max(bytes, static_cast<uint64_t>(static_cast<double>(base) * percent / 100));
  }
  bool operator==(const MaxIncrease&) const = default;
};

/// Parses "10%", "8MiB" or "10%, 8MiB" (either order). Nullopt and `why`
/// set when it is none of these.
std::optional<MaxIncrease> parse_max_increase(const std::string& text, std::string* why);

/// Parses `expect`: pass, oom, fail or an exit code 0-255. Nullopt and
/// `why` set otherwise.
std::optional<Expectation> parse_expectation(const std::string& text, std::string* why);

/// Parses `min_headroom`: a size, or a percentage above 0% and below 100%.
std::optional<MinHeadroom> parse_min_headroom(const std::string& text, std::string* why);

/// One test, as written, with defaults applied.
struct TestSpec {
  std::string name;
  int line = 0, column = 0;            ///< where the test starts in the spec
  std::vector<std::string> argv;       ///< `run`, as an argv (shell: sh -c)
  std::string command;                 ///< `run` as written, for display
  uint64_t memory = 0;                 ///< hard limit, bytes
  std::optional<uint64_t> memory_high; ///< throttle point, bytes (v2)
  uint64_t swap = 0;                   ///< swap allowed on top, bytes
  std::chrono::milliseconds timeout{0};
  std::map<std::string, std::string> env;
  std::string cwd;                     ///< absolute
  Expectation expect;
  std::optional<MinHeadroom> min_headroom;
  std::vector<std::string> tags;
  std::optional<uint64_t> pids;        ///< pids.max; nullopt: no limit
  /// What a comparison with a baseline allows (compare.h); nullopt: the
  /// command line's or the default.
  std::optional<MaxIncrease> max_increase;
  /// Files the test reads (absolute): memrun evicts their page cache before
  /// every run of the test, so that each run pays the same (see run/loop.cc).
  std::vector<std::string> inputs;
  /// The test may reach the service managers (shield.h): it inherits the
  /// user's bus variables and their sockets stay in its mount namespace.
  bool service_manager = false;
  /// `transparent_hugepages: never`: the test runs with transparent huge
  /// pages disabled (PR_SET_THP_DISABLE), whatever the host's policy.
  bool hugepages_off = false;
  /// `thrash: off`: the test is never ended as thrashing (run/thrash_watch.cc); it
  /// runs until it ends or its timeout.
  bool thrash = true;
  /// `sub_groups: true`: the test may make memory sub-groups on cgroup v1,
  /// where the kernel charges no socket buffers (see cgroup::Final::
  /// uncharged_sub_group); without it such a test fails.
  bool sub_groups = false;
  /// `explain:` (explain/profiled_run.h); nullopt: as --explain says (on-failure with
  /// it, never without).
  std::optional<ExplainMode> explain;
  /// A suite's case: where its limit and expectation came from ("suite
  /// engine (line 3); rule 'Parquet.*' (line 6); marker"); empty for a test
  /// written in `tests:`.
  std::string origin;
  /// A suite's case: how its own tool judges its end (spec/suite.h).
  ToolRules rules;
  /// Why it cannot run (ctest found no executable): reported, never started.
  std::string not_runnable;
  /// Its tool does not run it (DISABLED_, ctest's DISABLED): counted as
  /// disabled, never started.
  bool disabled = false;
  /// Its tool skipped it as it listed it, and why: skipped, never started.
  std::string skipped;
  /// A ctest case's DEPENDS, fixtures and locks (spec/order.h).
  Order order;
  bool operator==(const TestSpec&) const = default;
};

/// A command run once before a spec's tests, e.g. to generate fixtures. It
/// runs under its own limit like a test, and is skipped when every output
/// exists and is newer than every input.
struct Setup {
  TestSpec command;                  ///< name "setup"; run, memory, timeout, cwd, env
  std::vector<std::string> inputs;   ///< absolute paths
  std::vector<std::string> outputs;  ///< absolute paths
};

/// A spec's tests in little memory, for a run of a suite that lists a
/// million cases: a suite's case whose test is its suite's template (an
/// earlier case of the suite) but for the case's name, in the test's
/// name, argv and command, is held as its name alone and made whole again
/// when it runs; any other test is held whole. Such a case costs some 30
/// bytes here; a TestSpec held whole, 1.5 KiB (heaptrack, GoogleTest).
class CompactTests {
 public:
  /// Holds `t` whole.
  void add(TestSpec t);
  /// Holds `t`, the test the suite numbered `suite` made of its case
  /// `case_name`, as its name when the suite's template made again with
  /// that name is `t` (checked here, field by field); else whole, and the
  /// template of the suite's cases after it.
  void add_case(TestSpec t, const std::string& case_name, size_t suite);
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  /// Whether test i is held whole (else as its name).
  bool whole(size_t i) const { return !(entries_[i] & kByName); }
  std::string_view name(size_t i) const;
  /// Test i held whole; for one held as its name, its template, whose
  /// every field but its name, argv and command is test i's.
  const TestSpec& shared(size_t i) const;
  /// Test i, whole.
  TestSpec made(size_t i) const;
  /// Test i, held whole from here on (--set changes one test's limit).
  TestSpec& own(size_t i);
  /// Every test held whole and every template (--scale changes them all).
  std::vector<TestSpec*> held();
  /// Bytes this holds beyond its tests held whole and its templates.
  size_t bytes() const;

 private:
  static constexpr uint32_t kByName = 1u << 31;
  struct Template {
    TestSpec test;
    std::string case_name;  // the case it was made of, as its argv and command name it
    size_t suite = 0;
  };
  TestSpec made_of(const Template& t, std::string_view name) const;
  // Deques: a test's address holds while others are added (a plan points
  // at them).
  std::deque<TestSpec> whole_;
  std::deque<Template> templates_;
  // Each test: kByName | the number of a test held as its name, or the
  // number of one held whole.
  std::vector<uint32_t> entries_;
  // A test held as its name: its name is arena_[ends_[n - 1], ends_[n]),
  // its template templates_[template_of_[n]].
  std::string arena_;
  std::vector<uint64_t> ends_;
  std::vector<uint32_t> template_of_;
};

/// A loaded spec file.
struct Spec {
  std::string path;             ///< as given on the command line
  std::optional<Setup> setup;
  std::vector<TestSpec> tests;  ///< in file order; empty when `cases` holds them
  /// Its tests, in file order, when loaded for a run (load_spec's
  /// `compact`): a run of a million cases holds them compactly.
  CompactTests cases;
};

/// Expands ${NAME} and ${NAME:-default} in `text` from `env`, then from
/// memrun's own environment; an unset NAME without default expands to "".
/// $${ is a literal ${. Throws std::invalid_argument (saying what is wrong)
/// for any other ${...} form and for a ${ never closed.
std::string expand_vars(const std::string& text, const std::map<std::string, std::string>& env);

/// The variables of memrun's own environment that expand_vars has read so
/// far, with their values (nullopt: unset), for `memrun repro` to set again.
std::map<std::string, std::optional<std::string>> environment_read();

/// Defaults that apply when neither the test nor `defaults:` says otherwise.
inline constexpr std::chrono::milliseconds kDefaultTimeout = std::chrono::minutes(10);
inline constexpr uint64_t kDefaultPids = 4096;
/// Below this a limit is a typo (a plain number is bytes: `memory: 64`).
inline constexpr uint64_t kMinMemory = MiB;

/// Where a spec's tests go as they are made, instead of into Spec::tests
/// (`memrun list` prints them as they come): `tests:` first, then each
/// suite's cases, a ctest suite's at once (their order is resolved over
/// them all), any other's one at a time as its tool lists them. A test
/// brings (Order::brings) only tests of its own batch.
using TestSink = std::function<void(std::vector<TestSpec>&&)>;

/// Parses spec text. `path` names the file in messages; relative `cwd`s are
/// resolved against `dir`. `suites:` are listed with `discover` once the
/// whole file is valid (a spec with suites and no discoverer is an error);
/// every key is read and checked through runner/spec/keys.h. Throws
/// memrun::Error(bad_input) with "path:line:col: what is wrong" and what to
/// write instead. With `check_inputs` (load_spec), a test's inputs must be
/// files or folders that exist (see inputs.h), or outputs of the setup.
/// With `sink`, the tests go there and Spec::tests stays empty; with
/// `compact` (and no sink), they go to Spec::cases.
Spec parse_spec(const std::string& text, const std::string& path, const std::string& dir,
                const Discoverer& discover = nullptr, bool check_inputs = false, const TestSink& sink = nullptr,
                bool compact = false);

/// Reads and parses a spec file; its suites are listed with `discover`.
Spec load_spec(const std::string& path, const Discoverer& discover = nullptr, const TestSink& sink = nullptr,
               bool compact = false);

/// Checks a test of `spec` again as parsing did (memory at least 1 MiB,
/// memory_high and min_headroom below it) after `changed_by` ("--scale
/// 0.5") changed its limit. Throws Error(bad_input) "path:line:col: test
/// 'x': what is wrong once CHANGED_BY applies; ADVICE, or lower ...".
void recheck_test(const Spec& spec, const TestSpec& t, const std::string& changed_by, const std::string& advice);

}  // namespace memrun
