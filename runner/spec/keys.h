// The spec's keys, in one table: where each may be written (a test, a
// suite, a rule of a suite's `cases:`, `defaults:`, the setup, and the
// flags of `memrun exec` and `memrun bisect` that stand for it), how its
// value is read, and what it must hold once the test is whole. The spec
// parser (spec/parser.cc), the suite stage (spec/suite_cases.cc), `exec` and `bisect`
// read and check through it, so a rule is written once. Internal to runner/.
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runner/spec/spec.h"

namespace memrun::spec {

/// Everything one test (or `defaults:`, a suite, a rule) can say; unset
/// fields inherit.
struct Fields {
  std::optional<std::string> name;
  std::optional<std::vector<std::string>> argv;
  std::string command;
  std::optional<uint64_t> memory, memory_high, swap;
  std::optional<std::chrono::milliseconds> timeout;
  std::map<std::string, std::string> env;
  std::optional<std::string> cwd;
  std::optional<Expectation> expect;
  std::optional<MinHeadroom> min_headroom;
  std::optional<std::vector<std::string>> tags;
  std::optional<std::optional<uint64_t>> pids;
  std::optional<MaxIncrease> max_increase;
  std::optional<bool> service_manager;
  std::optional<bool> hugepages_off;
  std::optional<bool> thrash;
  std::optional<bool> sub_groups;
  std::optional<ExplainMode> explain;
  std::optional<YAML::Node> inputs;  ///< read in finish(), against the test's cwd and env
};

/// The places a key may be written in a spec.
enum Place : unsigned { kTest = 1, kSuite = 2, kRule = 4, kDefaults = 8, kSetup = 16 };

/// Where values come from: a spec file (errors at path:line:col, keys
/// named 'memory'), or a command's flags (keys named by their flag).
struct Source {
  enum Form { file, exec, bisect } form = file;
  std::string path;  ///< the spec file, for messages
  std::string dir;   ///< the spec's folder: relative cwds and paths start here
  bool check_inputs = false;              ///< inputs must exist (load_spec)
  std::vector<std::string> setup_outputs;  ///< what the setup makes: inputs that may be missing

  /// Throws Error (bad_input in a spec, usage on a command line): "path:line:col: message" in a spec, the
  /// message alone on the command line.
  [[noreturn]] void fail(const YAML::Mark& at, const std::string& message) const;
  [[noreturn]] void fail(const YAML::Node& at, const std::string& message) const { fail(at.Mark(), message); }
  /// expand_vars, with the node's place in an error.
  std::string expand(const YAML::Node& at, const std::string& text, const std::map<std::string, std::string>& env) const;
  /// A value that must be one scalar, or an error naming `key` and what it must be.
  std::string scalar(const YAML::Node& n, const std::string& key, const char* want) const;
  /// The key as an error about its value names it: 'memory' or --memory.
  std::string quoted(const std::string& key) const;
  /// The key as a check names it: memory or --memory.
  std::string plain(const std::string& key) const;
};

/// "a list", "a mapping", "empty" or "a single value".
const char* kind_of(const YAML::Node& n);

/// One key of the table.
struct Key {
  const char* name;          ///< as written in a spec
  unsigned places;           ///< Place bits
  const char* exec_flag;     ///< the flag of `memrun exec` that sets it, or nullptr
  const char* bisect_flag;   ///< the flag of `memrun bisect` that sets it, or nullptr
  /// Reads the value into the fields; nullptr: not a test's field (a
  /// suite's source, a rule's match, the setup's outputs), read where it is used.
  void (*read)(const Source&, const YAML::Node& value, Fields&);
  /// Why `t` breaks the key's rule ("" when it holds), `t` whole; `written`
  /// is the value as given, for hints. nullptr: nothing to check.
  std::string (*check)(const Source&, const TestSpec& t, const std::string& written);
  /// Why it is refused in `defaults:` when it is a test's key but not a
  /// default (nullptr: allowed, or not a test's key).
  const char* not_a_default;
};

/// The table, in the order unknown-key messages list keys.
const std::vector<Key>& keys();
/// The key named `name`, or nullptr.
const Key* key_named(const std::string& name);
/// The names allowed at `place`, in table order. At kDefaults: a test's
/// keys (read_fields refuses those that are no default, with the reason).
std::vector<std::string> names_at(Place place);

/// Checks a mapping's keys against `allowed`, rejecting typos, repeats and
/// merge keys; `where` names the place in messages ("a test").
void check_keys(const Source& src, const YAML::Node& map, const std::vector<std::string>& allowed,
                const std::string& where);

/// Reads every key of `map` that is a test's field into `f` (`place` only
/// refuses what is no default).
void read_fields(const Source& src, const YAML::Node& map, Fields& f, Place place);

/// Reads one flag's value through its key (exec's --memory, ...).
void read_flag(const Source& src, const std::string& key, const std::string& value, Fields& f);

/// The whole test from its fields, with every default, unchecked. `name`,
/// `argv` and `memory` must be set.
TestSpec test_of(const Fields& f, const std::string& dir);

/// The first rule of the table that a whole test breaks.
struct Problem {
  const Key* key = nullptr;  ///< whose check failed; nullptr: none
  std::string what;          ///< what is wrong, naming keys as `src` does
  explicit operator bool() const { return key != nullptr; }
};

/// Runs every key's check on `t`, in table order. `written(key)` is the
/// value as given, for hints ("" when unknown).
Problem check_test(const Source& src, const TestSpec& t,
                   const std::function<std::string(const char* key)>& written = nullptr);

/// A test (or the setup) from its fields at `node`: required keys present,
/// defaults applied, every check run, its inputs read.
TestSpec finish(const Source& src, const YAML::Node& node, const Fields& f, bool is_setup = false);

/// inputs/outputs (of the setup, a test's inputs): paths relative to the
/// test's cwd, ${VAR}s expanded from its environment.
std::vector<std::string> read_paths(const Source& src, const YAML::Node& v, const std::string& key,
                                    const TestSpec& test);

/// A suite as its spec says it, before its tool lists its cases.
struct SuiteDraft {
  YAML::Node node;
  SuiteSource source;
  Fields fields;                                        ///< every case's, before rules
  std::vector<std::pair<std::string, YAML::Node>> rules;  ///< (glob, rule) in order
};

/// Reads a suite of `suites:` (no tool runs).
SuiteDraft read_suite(const Source& src, const YAML::Node& node, const Fields& defaults);

/// The suite stage: lists each suite's cases with `discover` and makes
/// them tests after `spec.tests` (names unique across the spec), or hands
/// them all, `spec.tests` first, to `sink` (see TestSink). With `compact`
/// (and no sink), every test goes to `spec.cases`, `spec.tests` first.
void list_suites(const Source& src, Spec& spec, const std::vector<SuiteDraft>& suites, const Discoverer& discover,
                 const TestSink& sink = nullptr, bool compact = false);

}  // namespace memrun::spec
