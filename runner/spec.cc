#include "runner/spec.h"

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <fnmatch.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "runner/error.h"
#include "runner/inputs.h"
#include "runner/units.h"
#include "runner/utf8.h"

namespace memrun {

namespace {

const std::vector<std::string> kTopKeys = {"env", "setup", "defaults", "tests", "suites"};
const std::vector<std::string> kSetupKeys = {"run", "memory", "memory_high", "swap", "timeout",
                                             "env", "cwd", "pids", "inputs", "outputs", "service_manager",
                                             "transparent_hugepages"};
const std::vector<std::string> kTestKeys = {"name", "run", "memory", "memory_high",
                                            "swap", "timeout", "env", "cwd", "expect",
                                            "min_headroom", "tags", "pids", "max_increase", "inputs",
                                            "service_manager", "transparent_hugepages", "thrash", "explain"};
// A suite: its source, and what every case gets unless a rule says otherwise.
const std::vector<std::string> kSuiteKeys = {"name", "gtest", "pytest", "python", "ctest", "cases", "exclude",
                                             "memory", "memory_high", "swap", "timeout", "env", "cwd",
                                             "expect", "min_headroom", "tags", "pids", "max_increase",
                                             "inputs", "service_manager", "transparent_hugepages", "thrash", "explain"};
// A rule of a suite's `cases:`; the keys a marker may set are a subset.
const std::vector<std::string> kRuleKeys = {"match", "memory", "memory_high", "swap", "timeout", "env",
                                            "expect", "min_headroom", "tags", "pids", "max_increase",
                                            "inputs", "service_manager", "transparent_hugepages", "thrash", "explain"};

// Optimal string alignment distance: edits plus adjacent swaps, so that
// "memroy" and "tset" are one step from what was meant.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// Everything one test (or `defaults:`) can say; unset fields inherit.
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
  std::optional<ExplainMode> explain;
  std::optional<YAML::Node> inputs;  // read in finish(), against the test's cwd and env
};

class Parser {
 public:
  Parser(std::string path, std::string dir, const Discoverer& discover, bool check_inputs)
      : path_(std::move(path)), dir_(std::move(dir)), discover_(discover), check_inputs_(check_inputs) {}

  [[noreturn]] void fail(const YAML::Mark& m, const std::string& message) const {
    std::string where = path_;
    if (!m.is_null()) where += ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
    throw Error(Category::bad_input, where + ": " + message);
  }
  [[noreturn]] void fail(const YAML::Node& n, const std::string& message) const {
    fail(n.Mark(), message);
  }

  // expand_vars, with the node's place in an error.
  std::string expand(const YAML::Node& n, const std::string& text, const std::map<std::string, std::string>& env) const {
    try {
      return expand_vars(text, env);
    } catch (const std::invalid_argument& e) {
      fail(n, e.what());
    }
  }

  static const char* kind_of(const YAML::Node& n) {
    if (n.IsSequence()) return "a list";
    if (n.IsMap()) return "a mapping";
    if (n.IsNull()) return "empty";
    return "a single value";
  }

  std::string scalar(const YAML::Node& n, const std::string& key, const char* want) const {
    if (!n.IsScalar()) fail(n, "'" + key + "' must be " + want + ", not " + kind_of(n));
    return n.Scalar();
  }

  uint64_t size(const YAML::Node& n, const std::string& key) const {
    std::string why;
    auto v = parse_size_with_unit(scalar(n, key, "a size such as 512MiB"), &why);
    if (!v) fail(n, "'" + key + "': " + why);
    return *v;
  }

  // Checks a mapping's keys against `allowed`, rejecting typos and repeats.
  void check_keys(const YAML::Node& map, const std::vector<std::string>& allowed,
                  const std::string& where) const {
    std::set<std::string> seen;
    for (const auto& kv : map) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
      if (!seen.insert(key).second) fail(kv.first, "'" + key + "' is given twice in " + where);
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      // yaml-cpp (0.7) reads YAML 1.1 merge keys as a plain key named "<<".
      if (key == "<<")
        fail(kv.first, "merge keys (<<: *anchor) are not supported in " + where +
                           "; put shared keys under 'defaults:', or anchor whole values (&x ... *x)");
      std::string best;
      size_t best_d = 3;
      for (const auto& a : allowed)
        if (size_t d = edit_distance(key, a); d < best_d) best_d = d, best = a;
      std::string msg = "unknown key '" + key + "' in " + where;
      if (!best.empty()) msg += "; did you mean '" + best + "'?";
      else {
        msg += " (known keys:";
        for (const auto& a : allowed) msg += " " + a;
        msg += ")";
      }
      fail(kv.first, msg);
    }
  }

  void read_fields(const YAML::Node& map, Fields& f, bool is_defaults) const {
    for (const auto& kv : map) {
      const std::string key = kv.first.Scalar();
      const YAML::Node& v = kv.second;
      if (key == "name" || key == "run") {
        if (is_defaults) fail(kv.first, "'" + key + "' belongs to each test, not to defaults");
      }
      if (key == "name") {
        f.name = scalar(v, key, "a string");
        check_name(v, *f.name);
      } else if (key == "run") {
        read_run(v, f);
      } else if (key == "memory") {
        f.memory = size(v, key);
      } else if (key == "memory_high") {
        f.memory_high = size(v, key);
      } else if (key == "swap") {
        std::string s = scalar(v, key, "a size such as 0 or 256MiB");
        f.swap = s == "0" ? 0 : size(v, key);
      } else if (key == "timeout") {
        std::string why;
        auto d = parse_duration(scalar(v, key, "a duration such as 30s"), &why);
        if (!d) fail(v, "'timeout': " + why);
        f.timeout = *d;
      } else if (key == "env") {
        read_env(v, f);
      } else if (key == "cwd") {
        f.cwd = scalar(v, key, "a directory");
        std::filesystem::path p(*f.cwd);
        if (p.is_relative()) p = std::filesystem::path(dir_) / p;
        std::error_code ec;
        if (!std::filesystem::is_directory(p, ec))
          fail(v, "'cwd': " + p.string() + " is not a directory (a relative cwd is relative to the spec's folder)");
        f.cwd = std::filesystem::weakly_canonical(p, ec).string();
      } else if (key == "expect") {
        f.expect = read_expect(v);
      } else if (key == "min_headroom") {
        f.min_headroom = read_headroom(v);
      } else if (key == "tags") {
        std::vector<std::string> tags;
        if (v.IsScalar()) tags.push_back(v.Scalar());
        else if (v.IsSequence())
          for (const auto& t : v) tags.push_back(scalar(t, "tags", "a string"));
        else fail(v, "'tags' must be a list of strings");
        f.tags = tags;
      } else if (key == "max_increase") {
        // `max_increase: 10%, 8MiB`, or as a list: [10%, 8MiB]
        std::string text;
        if (v.IsSequence())
          for (const auto& part : v) text += (text.empty() ? "" : ",") + scalar(part, key, "a percentage or a size");
        else
          text = scalar(v, key, "a percentage, a size, or both");
        std::string why;
        f.max_increase = parse_max_increase(text, &why);
        if (!f.max_increase) fail(v, "'max_increase': " + why);
      } else if (key == "inputs" && is_defaults) {
        fail(kv.first, "'inputs' belongs to each test (the files it reads), not to defaults");
      } else if (key == "inputs") {
        f.inputs = v;
      } else if (key == "thrash") {
        bool b = false;
        if (!YAML::convert<bool>::decode(v, b))
          fail(v, "'thrash' must be on (the default: a test whose working set does not fit its limit is ended as "
                  "`thrash`) or off (it runs until it ends or times out), not " +
                      std::string(v.IsScalar() ? "'" + v.Scalar() + "'" : kind_of(v)));
        f.thrash = b;
      } else if (key == "explain") {
        std::string m = scalar(v, key, "on-failure, always or never");
        f.explain = explain_mode_named(m);
        if (!f.explain)
          fail(v, "'explain' must be on-failure (a test that fails on memory runs once more under an allocation "
                  "profiler), always or never, not '" + m + "'");
      } else if (key == "service_manager") {
        bool b = false;
        if (!YAML::convert<bool>::decode(v, b))
          fail(v, "'service_manager' must be true (the test may reach the service manager: systemd-run, "
                  "systemctl) or false (the default), not " + std::string(v.IsScalar() ? "'" + v.Scalar() + "'" : kind_of(v)));
        f.service_manager = b;
      } else if (key == "transparent_hugepages") {
        std::string t = scalar(v, key, "never or system");
        if (t != "never" && t != "system")
          fail(v, "'transparent_hugepages' must be never (no transparent huge pages for the test, whatever the "
                  "host's policy) or system (the host's policy, the default), not '" + t + "'");
        f.hugepages_off = t == "never";
      } else if (key == "pids") {
        std::string s = scalar(v, key, "a number or 'max'");
        if (s == "max") f.pids = std::optional<uint64_t>{};
        else {
          std::string why;
          auto n = parse_size(s, &why);
          if (!n || s.find_first_not_of("0123456789") != std::string::npos)
            fail(v, "'pids' must be a whole number of processes (at least 1) or 'max'");
          f.pids = n;
        }
      }
    }
  }

  void read_env(const YAML::Node& v, Fields& f) const {
    if (!v.IsMap()) fail(v, "'env' must be a mapping of NAME: value, not " + std::string(kind_of(v)));
    for (const auto& e : v) {
      std::string name = scalar(e.first, "env", "a variable name");
      bool ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
      for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
      if (!ok) fail(e.first, "'" + name + "' is not a valid environment variable name (letters, digits, _)");
      if (name == "MEMRUN_TEST" || name == "MEMRUN_MEMORY_LIMIT")
        fail(e.first, name + " is set by memrun for every test (its name, its limit in bytes); use another name");
      f.env[name] = scalar(e.second, "env." + name, "a string");
    }
  }

  // inputs/outputs (of the setup, a test's inputs): paths relative to its
  // cwd, ${VAR}s expanded from its environment.
  std::vector<std::string> read_paths(const YAML::Node& v, const std::string& key, const TestSpec& setup) const {
    if (!v.IsSequence()) fail(v, "'" + key + "' must be a list of paths");
    std::vector<std::string> out;
    for (const auto& p : v) {
      std::filesystem::path path(expand(p, scalar(p, key, "a path"), setup.env));
      if (path.is_relative()) path = std::filesystem::path(setup.cwd) / path;
      out.push_back(path.lexically_normal().string());
      if (check_inputs_ && key == "inputs" && setup.name != "setup") check_input(p, out.back());
    }
    return out;
  }

  // A test's input, at its place in the spec (see input_refusal); a missing
  // one only when the spec's setup makes it (checked again at each start).
  void check_input(const YAML::Node& at, const std::string& path) const {
    bool missing = false;
    std::string why = input_refusal(path, &missing);
    if (!why.empty()) fail(at, why);
    if (!missing) return;
    for (const auto& out : setup_outputs_) {
      auto rel = std::filesystem::path(path).lexically_relative(out);
      if (!rel.empty() && *rel.begin() != "..") return;
    }
    fail(at, "the input " + path + " does not exist (a relative input is relative to the test's cwd; a file the "
             "spec's setup makes belongs in its 'outputs')");
  }

  Setup read_setup(const YAML::Node& node, const Fields& defaults) const {
    if (!node.IsMap()) fail(node, "'setup' must be a mapping with run and memory");
    check_keys(node, kSetupKeys, "setup");
    Fields f;
    f.env = defaults.env;
    f.name = "setup";
    read_fields(node, f, false);  // inputs and outputs are read below
    Setup s;
    s.command = finish(node, f, true);
    s.command.pids = f.pids ? *f.pids : std::optional<uint64_t>(kDefaultPids);
    if (node["inputs"]) s.inputs = read_paths(node["inputs"], "inputs", s.command);
    if (node["outputs"]) s.outputs = read_paths(node["outputs"], "outputs", s.command);
    setup_outputs_ = s.outputs;
    return s;
  }

  void check_name(const YAML::Node& n, const std::string& name) const {
    // The name becomes part of a cgroup directory and of log file names.
    if (name.empty()) fail(n, "a test name must not be empty");
    if (name.size() > 100) fail(n, "the test name is longer than 100 characters");
    if (name.find('/') != std::string::npos) fail(n, "a test name must not contain '/' (it names a cgroup directory)");
    if (name.find("..") != std::string::npos || name == ".") fail(n, "a test name must not contain '..' or be '.'");
    for (unsigned char c : name)
      if (c < 0x20 || c == 0x7f) fail(n, "a test name must not contain control characters");
  }

  void read_run(const YAML::Node& v, Fields& f) const {
    if (v.IsScalar()) {
      if (v.Scalar().empty()) fail(v, "'run' is empty: give a shell command or an argv list");
      f.argv = std::vector<std::string>{"/bin/sh", "-c", v.Scalar()};
      f.command = v.Scalar();
    } else if (v.IsSequence() && v.size() > 0) {
      std::vector<std::string> argv;
      for (const auto& a : v) argv.push_back(scalar(a, "run", "a string"));
      if (argv[0].empty()) fail(v, "'run' starts with an empty program name: give the program first, e.g. [python3, x.py]");
      f.argv = argv;
      for (const auto& a : argv) f.command += (f.command.empty() ? "" : " ") + a;
    } else {
      fail(v, "'run' must be a shell command (a string) or an argv list such as [prog, arg]");
    }
  }

  Expectation read_expect(const YAML::Node& v) const {
    std::string why;
    auto e = parse_expectation(scalar(v, "expect", "pass, oom, fail or an exit code"), &why);
    if (!e) fail(v, "'expect' " + why);
    return *e;
  }

  MinHeadroom read_headroom(const YAML::Node& v) const {
    std::string why;
    auto h = parse_min_headroom(scalar(v, "min_headroom", "a size or a percentage"), &why);
    if (!h) fail(v, "'min_headroom': " + why);
    return *h;
  }

  TestSpec finish(const YAML::Node& node, const Fields& f, bool is_setup = false) const {
    TestSpec t;
    if (!f.name) fail(node, "this test has no 'name'");
    const std::string who = is_setup ? "the setup" : "test '" + *f.name + "'";
    if (!f.argv) fail(node, who + " has no 'run' command");
    if (!f.memory) fail(node, who + " has no 'memory' limit (e.g. memory: 256MiB)");
    t.name = *f.name;
    t.line = node.Mark().line + 1;
    t.column = node.Mark().column + 1;
    t.argv = *f.argv;
    t.command = f.command;
    t.memory = *f.memory;
    auto at = [&](const char* key) { return node[key] ? node[key] : node; };
    if (t.memory < kMinMemory) {
      // Only a plain number can be a forgotten unit (64 -> 64MiB).
      std::string given = node["memory"] && node["memory"].IsScalar() ? node["memory"].Scalar() : "";
      bool plain = !given.empty() && given.find_first_not_of("0123456789") == std::string::npos;
      fail(at("memory"), who + ": memory " + format_size(t.memory) + " is below 1 MiB, too small to run any program" +
                             (plain ? " (a plain number is bytes: did you mean " + given + "MiB?)" : ""));
    }
    t.memory_high = f.memory_high;
    if (t.memory_high && *t.memory_high >= t.memory)
      fail(at("memory_high"), who + ": memory_high must be below memory (" + format_size(t.memory) + ")");
    t.swap = f.swap.value_or(0);
    t.timeout = f.timeout.value_or(kDefaultTimeout);
    t.env = f.env;
    t.cwd = f.cwd.value_or(dir_);
    t.expect = f.expect.value_or(Expectation{});
    t.min_headroom = f.min_headroom;
    if (t.min_headroom && !t.min_headroom->is_percent && t.min_headroom->bytes >= t.memory)
      fail(at("min_headroom"), who + ": min_headroom must be below memory (" + format_size(t.memory) + ")");
    t.tags = f.tags.value_or(std::vector<std::string>{});
    t.pids = f.pids ? *f.pids : std::optional<uint64_t>(kDefaultPids);
    t.max_increase = f.max_increase;
    t.service_manager = f.service_manager.value_or(false);
    t.hugepages_off = f.hugepages_off.value_or(false);
    t.thrash = f.thrash.value_or(true);
    t.explain = f.explain;
    if (!is_setup && f.inputs) t.inputs = read_paths(*f.inputs, "inputs", t);
    return t;
  }

  // The line (1-based) where a second YAML document starts, or 0. YAML
  // allows a document marker (--- or ...) at the start of a line only
  // between documents: never inside a scalar, where a line starting with
  // one ends the scalar. So a marker after any content is a second
  // document; a --- before any content only opens the first. A scan of
  // the lines, not a parse: parsing every document of a hostile file could
  // take long, and only the first is used.
  static int second_document_line(const std::string& text) {
    bool content = false, ended = false;
    int line = 0;
    for (size_t at = 0; at < text.size();) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      std::string l = text.substr(at, end - at);
      at = end + 1;
      ++line;
      if (!l.empty() && l.back() == '\r') l.pop_back();
      auto marker = [&](const char* m) {
        return l.compare(0, 3, m) == 0 && (l.size() == 3 || l[3] == ' ' || l[3] == '\t');
      };
      if (marker("...")) {  // the end of a document: anything after it is another
        ended = true;
        continue;
      }
      if (marker("---")) {
        if (content || ended) return line;
        // "--- {tests: ...}": the first document's content on the marker's line.
        if (l.find_first_not_of(" \t", 3) != std::string::npos && l[l.find_first_not_of(" \t", 3)] != '#')
          content = true;
        continue;
      }
      auto first = l.find_first_not_of(" \t");
      if (first == std::string::npos || l[first] == '#' || (first == 0 && l[0] == '%')) continue;
      if (ended) return line;
      content = true;
    }
    return 0;
  }

  // Everything memrun writes (JSON, JUnit) is UTF-8: a spec must be too.
  void check_utf8(const std::string& text) const {
    int line = 1, column = 1;
    for (size_t i = 0; i < text.size();) {
      unsigned char c = static_cast<unsigned char>(text[i]);
      size_t len = utf8_length(text, i);
      if (len == 0) {
        YAML::Mark m;
        m.line = line - 1;
        m.column = column - 1;
        fail(m, fmt::format("the spec is not valid UTF-8 (byte 0x{:02x}); save it as UTF-8", c));
      }
      if (c == '\n') ++line, column = 1;
      else ++column;
      i += len;
    }
  }

  Spec parse(const std::string& text) const {
    check_utf8(text);
    YAML::Node root;
    try {
      // One document: tests after a `---` would silently never run.
      if (int line = second_document_line(text)) {
        YAML::Mark at;
        at.line = line - 1;
        fail(at, "a second YAML document starts here (after ---), and memrun would never run "
                                         "its tests: put every test under one 'tests:' list, or split the file "
                                         "into specs");
      }
      root = YAML::Load(text);
    } catch (const YAML::DeepRecursion& e) {
      fail(e.mark, "the spec is nested too deeply (more than " + std::to_string(e.depth() - 1) +
                       " levels); a spec needs three or four");
    } catch (const YAML::Exception& e) {
      fail(e.mark, "invalid YAML: " + e.msg);
    }
    if (!root || root.IsNull()) fail(YAML::Mark::null_mark(), "the spec is empty: it needs a 'tests:' list");
    if (!root.IsMap()) fail(root, "the spec must be a mapping with a 'tests:' list, not " + std::string(kind_of(root)));
    check_keys(root, kTopKeys, "the spec");
    Fields defaults;
    // Spec-level env: for the setup and every test, below defaults' and a
    // test's own. Values may use ${NAME:-default} from memrun's environment,
    // so a knob such as MEMRUN_SCALE can be set from outside.
    if (auto e = root["env"]) {
      Fields top;
      read_env(e, top);
      for (auto& [k, v] : top.env) defaults.env[k] = expand(e[k], v, {});
    }
    if (auto d = root["defaults"]) {
      if (!d.IsMap()) fail(d, "'defaults' must be a mapping of test keys");
      check_keys(d, kTestKeys, "defaults");
      read_fields(d, defaults, true);
    }
    Spec spec;
    if (auto setup = root["setup"]) spec.setup = read_setup(setup, defaults);
    auto tests = root["tests"];
    auto suites = root["suites"];
    if (!tests && !suites) fail(root, "the spec has no 'tests:' list (nor 'suites:')");
    if (tests && (!tests.IsSequence() || tests.size() == 0))
      fail(tests, "'tests' must be a non-empty list of tests (each starting with '- name:')");
    std::map<std::string, int> lines;
    for (const auto& node : tests ? tests : YAML::Node(YAML::NodeType::Sequence)) {
      if (!node.IsMap()) fail(node, "each test must be a mapping with name, run and memory");
      check_keys(node, kTestKeys, "a test");
      Fields f = defaults;
      read_fields(node, f, false);
      TestSpec t = finish(node, f);
      if (auto [it, fresh] = lines.emplace(t.name, t.line); !fresh)
        fail(node["name"], "duplicate test name '" + t.name + "' (first at line " + std::to_string(it->second) + ")");
      spec.tests.push_back(std::move(t));
    }
    if (suites) {
      if (!suites.IsSequence() || suites.size() == 0)
        fail(suites, "'suites' must be a non-empty list of suites (each starting with '- name:')");
      for (const auto& node : suites)
        for (auto& t : read_suite(node, defaults)) {
          if (auto [it, fresh] = lines.emplace(t.name, t.line); !fresh)
            fail(node, "the case '" + t.name + "' is named like another test (line " + std::to_string(it->second) +
                           "): rename the suite");
          spec.tests.push_back(std::move(t));
        }
    }
    return spec;
  }

  // A suite: its cases, listed by their own tool, each a test with the
  // suite's fields, then every matching rule's in order (later ones win),
  // then the case's own marks (a pytest marker wins over the spec).
  std::vector<TestSpec> read_suite(const YAML::Node& node, const Fields& defaults) const {
    if (!node.IsMap()) fail(node, "each suite must be a mapping with name, a source (gtest, pytest or ctest) and memory");
    check_keys(node, kSuiteKeys, "a suite");
    Fields suite = defaults;
    read_fields(node, suite, false);
    if (!suite.name) fail(node, "this suite has no 'name'");
    if (!suite.memory) fail(node, "suite '" + *suite.name + "' has no 'memory' limit for its cases (e.g. memory: 256MiB)");
    SuiteSource source = read_source(node, suite);
    std::vector<std::pair<std::string, YAML::Node>> rules;
    if (auto cases = node["cases"]) {
      if (!cases.IsSequence()) fail(cases, "'cases' must be a list of rules, each with 'match' and the keys it sets");
      for (const auto& rule : cases) {
        if (!rule.IsMap()) fail(rule, "a rule of 'cases' must be a mapping: match: GLOB, then the keys it sets");
        check_keys(rule, kRuleKeys, "a rule of 'cases'");
        if (!rule["match"]) fail(rule, "this rule has no 'match' (a glob over the case names, e.g. \"Parquet.*\")");
        rules.push_back({scalar(rule["match"], "match", "a glob such as \"Parquet.*\""), rule});
      }
    }
    std::vector<Case> found;
    if (!discover_) fail(node, "suite '" + source.suite + "': suites are listed only when memrun loads the spec");
    try {
      found = discover_(source);
    } catch (const Error& e) {
      fail(node, e.what());
    }
    std::vector<TestSpec> out;
    std::map<std::string, int> seen;
    for (const auto& c : found) {
      Fields f = suite;
      // A tool's case name is data: a control character in it would reach
      // consoles, CI logs and reports (see escape_controls).
      f.name = source.suite + "/" + escape_controls(c.name);
      // Two cases of one name (ctest tests of two folders) run apart, the
      // second as NAME#2.
      if (int n = ++seen[*f.name]; n > 1) f.name = *f.name + "#" + std::to_string(n);
      f.argv = c.argv;
      f.command = c.command;
      if (!c.cwd.empty()) f.cwd = c.cwd;
      for (const auto& [k, v] : c.env) f.env[k] = v;
      std::string origin = "suite " + source.suite + " (line " + std::to_string(node.Mark().line + 1) + ")";
      for (const auto& [glob, rule] : rules)
        if (::fnmatch(glob.c_str(), c.name.c_str(), 0) == 0) {
          read_fields(rule, f, false);
          origin += "; rule '" + glob + "' (line " + std::to_string(rule.Mark().line + 1) + ")";
        }
      if (!c.marks.empty()) {
        YAML::Node marks(YAML::NodeType::Map);
        // inputs come as a JSON list (memrun_pytest.py), valid flow YAML.
        std::string at;  // the test's file:line, from the pytest plugin
        for (const auto& [k, v] : c.marks) {
          if (k == "@where") at = v + ": ";
          else marks[k] = k == "inputs" ? YAML::Load(v) : YAML::Node(v);
        }
        try {
          read_fields(marks, f, false);
        } catch (const Error& e) {
          // A marker's value has no place in the spec: name the case.
          std::string what = e.what();
          fail(node, "suite '" + source.suite + "': case " + escape_controls(c.name) + ": " + escape_controls(at) +
                         "its marker: " + what.substr(what.find(": ") + 2));
        }
        origin += "; marker";
      }
      TestSpec t = finish(node, f);
      t.origin = origin;
      t.rules = c.rules;
      t.not_runnable = c.not_runnable;
      t.disabled = c.disabled;
      out.push_back(std::move(t));
    }
    return out;
  }

  // The one source a suite names: gtest, pytest or ctest.
  SuiteSource read_source(const YAML::Node& node, const Fields& suite) const {
    SuiteSource s;
    s.suite = *suite.name;
    s.cwd = suite.cwd.value_or(dir_);
    s.env = suite.env;
    s.memory = suite.memory.value_or(0);
    s.service_manager = suite.service_manager.value_or(false);
    int given = 0;
    auto path = [&](const char* key) {
      std::filesystem::path p(expand(node[key], scalar(node[key], key, "a path"), suite.env));
      if (p.is_relative()) p = std::filesystem::path(dir_) / p;
      return p.lexically_normal().string();
    };
    if (node["gtest"]) ++given, s.kind = SuiteSource::gtest, s.path = path("gtest");
    if (node["ctest"]) ++given, s.kind = SuiteSource::ctest, s.path = path("ctest");
    if (auto py = node["pytest"]) {
      ++given;
      s.kind = SuiteSource::pytest;
      if (py.IsScalar()) s.args = {expand(py, py.Scalar(), suite.env)};
      else if (py.IsSequence())
        for (const auto& a : py) s.args.push_back(expand(a, scalar(a, "pytest", "a string"), suite.env));
      else fail(py, "'pytest' takes pytest's own arguments: a path, or a list such as [tests/memory, -m, memory]");
    }
    if (auto ex = node["exclude"]) {
      auto glob = [&](const YAML::Node& g) { return scalar(g, "exclude", "a glob over case names, e.g. \"Slow.*\""); };
      if (ex.IsScalar()) s.exclude = {glob(ex)};
      else if (ex.IsSequence())
        for (const auto& g : ex) s.exclude.push_back(glob(g));
      else fail(ex, "'exclude' takes globs over the case names: one, or a list such as [\"Slow.*\", \"*Flaky*\"]");
    }
    if (auto py = node["python"]) {
      if (!node["pytest"]) fail(py, "'python' names the interpreter of a pytest suite; this suite has no 'pytest'");
      s.python = expand(py, scalar(py, "python", "an interpreter such as .venv/bin/python"), suite.env);
      if (s.python.find('/') != std::string::npos && std::filesystem::path(s.python).is_relative())
        s.python = (std::filesystem::path(dir_) / s.python).lexically_normal().string();
    }
    if (given != 1)
      fail(node, "suite '" + s.suite + "' must name exactly one source: gtest: BINARY, pytest: [ARGS...] or ctest: "
                 "BUILD_DIR");
    return s;
  }

 private:
  std::string path_, dir_;
  const Discoverer& discover_;
  bool check_inputs_;
  mutable std::vector<std::string> setup_outputs_;
};

}  // namespace

Spec parse_spec(const std::string& text, const std::string& path, const std::string& dir,
                const Discoverer& discover, bool check_inputs) {
  Spec spec = Parser(path, dir, discover, check_inputs).parse(text);
  spec.path = path;
  return spec;
}

Spec load_spec(const std::string& path, const Discoverer& discover) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(Category::bad_input, path + ": is a directory; give a spec file (e.g. specs/example.yaml)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Category::bad_input, path + ": cannot read the spec: " + std::strerror(errno));
  // A spec is a few KiB; reading stops past the bound (memrun /dev/zero).
  constexpr size_t kMaxSpec = 16 * MiB;
  std::string text;
  char chunk[65536];
  while (text.size() <= kMaxSpec && in.read(chunk, sizeof chunk).gcount() > 0)
    text.append(chunk, static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxSpec)
    throw Error(Category::bad_input, path + ": is larger than 16 MiB, which no spec is; give a YAML spec file");
  auto dir = std::filesystem::absolute(path, ec).parent_path().string();
  return parse_spec(text, path, dir, discover, true);
}

}  // namespace memrun
