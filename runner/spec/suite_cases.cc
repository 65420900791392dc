// `suites:`, in two stages: read with the rest of the spec (no tool runs
// before the whole file is valid), then listed by their tools, each case a
// test with the suite's fields, then every matching rule's in order (later
// ones win), then the case's own marks (a pytest marker wins over the spec).
#include <fnmatch.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "runner/base/error.h"
#include "runner/base/utf8.h"
#include "runner/spec/keys.h"
#include "runner/spec/names.h"

namespace memrun::spec {
namespace {

// The path a source key names, against the spec's folder.
std::string source_path(const Source& src, const YAML::Node& node, const char* key, const Fields& suite) {
  std::filesystem::path p(src.expand(node[key], src.scalar(node[key], key, "a path"), suite.env));
  if (p.is_relative()) p = std::filesystem::path(src.dir) / p;
  return p.lexically_normal().string();
}

// The one source a suite names: gtest, pytest or ctest.
SuiteSource read_source(const Source& src, const YAML::Node& node, const Fields& suite) {
  SuiteSource s;
  s.suite = *suite.name;
  s.cwd = suite.cwd.value_or(src.dir);
  s.env = suite.env;
  s.memory = suite.memory.value_or(0);
  s.service_manager = suite.service_manager.value_or(false);
  int given = 0;
  if (node["gtest"]) ++given, s.kind = SuiteSource::gtest, s.path = source_path(src, node, "gtest", suite);
  if (node["ctest"]) ++given, s.kind = SuiteSource::ctest, s.path = source_path(src, node, "ctest", suite);
  if (auto py = node["pytest"]) {
    ++given;
    s.kind = SuiteSource::pytest;
    if (py.IsScalar()) s.args = {src.expand(py, py.Scalar(), suite.env)};
    else if (py.IsSequence())
      for (const auto& a : py) s.args.push_back(src.expand(a, src.scalar(a, "pytest", "a string"), suite.env));
    else src.fail(py, "'pytest' takes pytest's own arguments: a path, or a list such as [tests/memory, -m, memory]");
  }
  if (auto ex = node["exclude"]) {
    auto glob = [&](const YAML::Node& g) { return src.scalar(g, "exclude", "a glob over case names, e.g. \"Slow.*\""); };
    if (ex.IsScalar()) s.exclude = {glob(ex)};
    else if (ex.IsSequence())
      for (const auto& g : ex) s.exclude.push_back(glob(g));
    else src.fail(ex, "'exclude' takes globs over the case names: one, or a list such as [\"Slow.*\", \"*Flaky*\"]");
  }
  if (auto py = node["python"]) {
    if (!node["pytest"]) src.fail(py, "'python' names the interpreter of a pytest suite; this suite has no 'pytest'");
    s.python = src.expand(py, src.scalar(py, "python", "an interpreter such as .venv/bin/python"), suite.env);
    if (s.python.find('/') != std::string::npos && std::filesystem::path(s.python).is_relative())
      s.python = (std::filesystem::path(src.dir) / s.python).lexically_normal().string();
  }
  if (given != 1)
    src.fail(node, "suite '" + s.suite + "' must name exactly one source: gtest: BINARY, pytest: [ARGS...] or ctest: "
                   "BUILD_DIR");
  return s;
}

// A case's marks (pytest's @pytest.mark.memrun, ctest's WILL_FAIL) over
// its fields. A marker's value has no place in the spec: errors name the case.
void read_marks(const Source& src, const SuiteDraft& suite, const Case& c, Fields& f) {
  YAML::Node marks(YAML::NodeType::Map);
  std::string at;  // the test's file:line, from the pytest plugin
  for (const auto& [k, v] : c.marks) {
    if (k == "@where") at = v + ": ";
    // Each value as YAML reads it: pytest's as the JSON its plugin wrote
    // (suites/pytest_driver.py: a string, a number, a list, a mapping), ctest's
    // plain words (a timeout).
    else marks[k] = YAML::Load(v);
  }
  try {
    check_keys(src, marks, names_at(kRule), "@pytest.mark.memrun");
    read_fields(src, marks, f, kRule);
  } catch (const Error& e) {
    std::string what = e.what();
    src.fail(suite.node, "suite '" + suite.source.suite + "': case " + escape_controls(c.name) + ": " +
                             escape_controls(at) + "its marker: " + what.substr(what.find(": ") + 2));
  }
}

// One case of a suite as a test, named SUITE/CASE (list_suites makes it
// unique).
TestSpec case_test(const Source& src, const SuiteDraft& suite, const Case& c) {
  const std::string& name = suite.source.suite;
  Fields f = suite.fields;
  // A tool's case name is data: a control character in it would reach
  // consoles, CI logs and reports: kept as storable() keeps it.
  f.name = name + "/" + storable(c.name);
  f.argv = c.argv;
  f.command = c.command;
  if (!c.cwd.empty()) f.cwd = c.cwd;
  for (const auto& [k, v] : c.env) f.env[k] = v;
  std::string origin = "suite " + name + " (line " + std::to_string(suite.node.Mark().line + 1) + ")";
  for (const auto& [glob, rule] : suite.rules)
    if (::fnmatch(glob.c_str(), c.name.c_str(), 0) == 0) {
      read_fields(src, rule, f, kRule);
      origin += "; rule '" + glob + "' (line " + std::to_string(rule.Mark().line + 1) + ")";
    }
  if (!c.marks.empty()) {
    read_marks(src, suite, c, f);
    origin += "; marker";
  }
  TestSpec t = finish(src, suite.node, f);
  t.origin = origin;
  t.rules = c.rules;
  t.not_runnable = c.not_runnable;
  t.disabled = c.disabled;
  t.skipped = storable(c.skipped);  // pytest's words, a test's own: data, as names are
  for (const auto& label : c.labels)  // the build tree's words: data, as names are
    if (std::string tag = storable(label); std::find(t.tags.begin(), t.tags.end(), tag) == t.tags.end())
      t.tags.push_back(tag);
  return t;
}

// The suite's cases' DEPENDS, fixtures and locks, in their tests' names
// (tests[i] is found[i]'s). Tests that wait on each other would never
// start: ctest refuses such a cycle too.
void order_cases(const Source& src, const SuiteDraft& suite, const std::vector<Case>& found, TestSpec* tests) {
  std::vector<std::string> names, full;
  std::vector<CtestOrder> orders;
  std::vector<bool> disabled;
  for (size_t i = 0; i < found.size(); ++i) {
    names.push_back(found[i].name);
    full.push_back(tests[i].name);
    orders.push_back(found[i].order);
    disabled.push_back(found[i].disabled);
  }
  auto resolved = resolve(names, full, orders, disabled);
  if (auto loop = cycle(full, resolved); !loop.empty()) {
    std::string chain;
    for (size_t i = 0; i < loop.size(); ++i) chain += (i ? " waits for '" : "'") + loop[i] + "'";
    src.fail(suite.node, "suite '" + suite.source.suite + "': its tests wait for each other (ctest's DEPENDS and "
                         "fixtures): " + chain + ". ctest refuses this cycle too: break it in these tests' DEPENDS or "
                         "FIXTURES_* properties");
  }
  for (size_t i = 0; i < found.size(); ++i) tests[i].order = std::move(resolved[i]);
}

}  // namespace

SuiteDraft read_suite(const Source& src, const YAML::Node& node, const Fields& defaults) {
  if (!node.IsMap()) src.fail(node, "each suite must be a mapping with name, a source (gtest, pytest or ctest) and memory");
  check_keys(src, node, names_at(kSuite), "a suite");
  SuiteDraft d{node, {}, defaults, {}};
  read_fields(src, node, d.fields, kSuite);
  if (!d.fields.name) src.fail(node, "this suite has no 'name'");
  if (!d.fields.memory)
    src.fail(node, "suite '" + *d.fields.name + "' has no 'memory' limit for its cases (e.g. memory: 256MiB)");
  d.source = read_source(src, node, d.fields);
  if (auto cases = node["cases"]) {
    if (!cases.IsSequence()) src.fail(cases, "'cases' must be a list of rules, each with 'match' and the keys it sets");
    for (const auto& rule : cases) {
      if (!rule.IsMap()) src.fail(rule, "a rule of 'cases' must be a mapping: match: GLOB, then the keys it sets");
      check_keys(src, rule, names_at(kRule), "a rule of 'cases'");
      if (!rule["match"]) src.fail(rule, "this rule has no 'match' (a glob over the case names, e.g. \"Parquet.*\")");
      d.rules.push_back({src.scalar(rule["match"], "match", "a glob such as \"Parquet.*\""), rule});
    }
  }
  return d;
}

namespace {

// Every test's name in a spec, its line and whose it is (-1: `tests:`'s,
// else its suite's number): a listing of a million cases is never held as
// a map of its names.
class SpecNames {
 public:
  void add(const TestSpec& t, int owner) {
    names_.add(t.name);
    lines_.push_back(t.line), owners_.push_back(owner);
  }
  /// Names `t`, a case of the suite `owner`, uniquely: the second of two
  /// cases of one name (ctest tests of two folders) runs apart as NAME#2.
  /// A name another test has is the spec's error.
  void name_case(const Source& src, const SuiteDraft& suite, TestSpec& t, int owner) {
    if (size_t at = names_.find(t.name); at != Names::npos && owners_[at] == owner) {
      int n = ++again_[t.name] + 1;
      t.name += "#" + std::to_string(n);
    }
    if (size_t at = names_.find(t.name); at != Names::npos)
      src.fail(suite.node, "the case '" + t.name + "' is named like another test (line " + std::to_string(lines_[at]) +
                               "): rename the suite");
    add(t, owner);
  }

 private:
  Names names_;
  std::vector<int> lines_, owners_;
  std::map<std::string, int> again_;  // names listed more than once: how often
};

}  // namespace

void list_suites(const Source& src, Spec& spec, const std::vector<SuiteDraft>& suites, const Discoverer& discover,
                 const TestSink& sink, bool compact) {
  SpecNames names;
  for (const auto& t : spec.tests) names.add(t, -1);
  if (sink && !spec.tests.empty()) sink(std::exchange(spec.tests, {}));
  compact = compact && !sink;
  if (compact)
    for (auto& t : std::exchange(spec.tests, {})) spec.cases.add(std::move(t));
  auto keep = [&](std::vector<TestSpec> made) {
    if (sink) sink(std::move(made));
    else for (auto& t : made) compact ? spec.cases.add(std::move(t)) : spec.tests.push_back(std::move(t));
  };
  for (size_t k = 0; k < suites.size(); ++k) {
    const SuiteDraft& suite = suites[k];
    if (!discover)
      src.fail(suite.node, "suite '" + suite.source.suite + "': suites are listed only when memrun loads the spec");
    auto make = [&](const Case& c) {
      TestSpec t = case_test(src, suite, c);
      names.name_case(src, suite, t, static_cast<int>(k));
      return t;
    };
    // A case made into a test as its tool lists it (its Case dropped
    // there), but ctest's: their order is resolved over them all.
    SuiteSource source = suite.source;
    bool made_error = false;  // an error of the spec's, from a case: said as it is
    auto one = [&](const Case& c) {
      try {
        std::vector<TestSpec> made;
        made.push_back(make(c));
        if (compact) return spec.cases.add_case(std::move(made[0]), c.name, k);
        keep(std::move(made));
      } catch (const Error&) {
        made_error = true;
        throw;
      }
    };
    if (source.kind != SuiteSource::ctest) source.found = one;
    std::vector<Case> found;
    try {
      found = discover(source);
    } catch (const Error& e) {
      if (made_error) throw;
      src.fail(suite.node, e.what());
    }
    if (source.kind != SuiteSource::ctest) {
      for (const auto& c : found) one(c);  // a Discoverer that returns them (tests' fixed lists)
      continue;
    }
    std::vector<TestSpec> made;
    for (const auto& c : found) made.push_back(make(c));
    order_cases(src, suite, found, made.data());
    keep(std::move(made));
  }
}

}  // namespace memrun::spec
