// The table of spec keys (spec/keys.h): each key's places, reader and check.
#include "runner/spec/keys.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "runner/base/error.h"
#include "runner/base/nearest.h"
#include "runner/base/units.h"

namespace memrun::spec {

void Source::fail(const YAML::Mark& m, const std::string& message) const {
  std::string where = path;
  if (form == file && !m.is_null()) where += ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
  throw Error(form == file ? Category::bad_input : Category::usage, form == file ? where + ": " + message : message);
}

std::string Source::expand(const YAML::Node& at, const std::string& text,
                           const std::map<std::string, std::string>& env) const {
  try {
    return expand_vars(text, env);
  } catch (const std::invalid_argument& e) {
    fail(at, e.what());
  }
}

std::string Source::scalar(const YAML::Node& n, const std::string& key, const char* want) const {
  if (!n.IsScalar()) fail(n, "'" + key + "' must be " + want + ", not " + kind_of(n));
  return n.Scalar();
}

std::string Source::plain(const std::string& key) const {
  const Key* k = key_named(key);
  const char* flag = !k ? nullptr : form == exec ? k->exec_flag : form == bisect ? k->bisect_flag : nullptr;
  return flag ? flag : key;
}

std::string Source::quoted(const std::string& key) const {
  return form == file ? "'" + key + "'" : plain(key);
}

const char* kind_of(const YAML::Node& n) {
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  if (n.IsNull()) return "empty";
  return "a single value";
}

namespace {

uint64_t size(const Source& src, const YAML::Node& n, const std::string& key) {
  std::string why;
  auto v = parse_size_with_unit(src.scalar(n, key, "a size such as 512MiB"), &why);
  if (!v) src.fail(n, src.quoted(key) + ": " + why);
  return *v;
}

// A yes/no key's value, or an error saying what each answer means.
bool boolean(const Source& src, const YAML::Node& v, const std::string& message) {
  bool b = false;
  if (!YAML::convert<bool>::decode(v, b))
    src.fail(v, message + std::string(v.IsScalar() ? "'" + v.Scalar() + "'" : kind_of(v)));
  return b;
}

// The name becomes part of a cgroup directory and of log file names.
void read_name(const Source& src, const YAML::Node& v, Fields& f) {
  const std::string name = src.scalar(v, "name", "a string");
  if (name.empty()) src.fail(v, "a test name must not be empty");
  if (name.size() > 100) src.fail(v, "the test name is longer than 100 characters");
  if (name.find('/') != std::string::npos) src.fail(v, "a test name must not contain '/' (it names a cgroup directory)");
  if (name.find("..") != std::string::npos || name == ".") src.fail(v, "a test name must not contain '..' or be '.'");
  for (unsigned char c : name)
    if (c < 0x20 || c == 0x7f) src.fail(v, "a test name must not contain control characters");
  f.name = name;
}

// An argument or a variable's value is a C string for exec(2): a NUL in it
// ("\0" in a double-quoted YAML string) would cut it short unseen.
const std::string& without_nul(const Source& src, const YAML::Node& v, const std::string& text, const char* what) {
  if (text.find('\0') != std::string::npos)
    src.fail(v, std::string(what) + " contains a NUL byte (\\0), which no program argument or environment variable "
                                    "can hold: remove it");
  return text;
}

void read_run(const Source& src, const YAML::Node& v, Fields& f) {
  if (v.IsScalar()) {
    without_nul(src, v, v.Scalar(), "'run'");
    if (v.Scalar().empty()) src.fail(v, "'run' is empty: give a shell command or an argv list");
    f.argv = std::vector<std::string>{"/bin/sh", "-c", v.Scalar()};
    f.command = v.Scalar();
  } else if (v.IsSequence() && v.size() > 0) {
    std::vector<std::string> argv;
    for (const auto& a : v) argv.push_back(without_nul(src, a, src.scalar(a, "run", "a string"), "an argument of 'run'"));
    if (argv[0].empty()) src.fail(v, "'run' starts with an empty program name: give the program first, e.g. [python3, x.py]");
    f.argv = argv;
    f.command.clear();
    for (const auto& a : argv) f.command += (f.command.empty() ? "" : " ") + a;
  } else {
    src.fail(v, "'run' must be a shell command (a string) or an argv list such as [prog, arg]");
  }
}

void read_env(const Source& src, const YAML::Node& v, Fields& f) {
  if (!v.IsMap()) src.fail(v, "'env' must be a mapping of NAME: value, not " + std::string(kind_of(v)));
  for (const auto& e : v) {
    std::string name = src.scalar(e.first, "env", "a variable name");
    bool ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
    for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (!ok) src.fail(e.first, "'" + name + "' is not a valid environment variable name (letters, digits, _)");
    if (name == "MEMRUN_TEST" || name == "MEMRUN_MEMORY_LIMIT" || name == "MEMRUN_PYTEST_OUTCOME" ||
        name == "MEMRUN_SUB_GROUPS")
      src.fail(e.first, name + " is set by memrun for every test (its name, its limit in bytes, where a pytest "
                               "case's outcome goes, whether it may make sub-groups); use another name");
    f.env[name] = without_nul(src, e.second, src.scalar(e.second, "env." + name, "a string"), ("env." + name).c_str());
  }
}

void read_cwd(const Source& src, const YAML::Node& v, Fields& f) {
  std::filesystem::path p(src.scalar(v, "cwd", "a directory"));
  if (p.is_relative()) p = std::filesystem::path(src.dir) / p;
  std::error_code ec;
  if (!std::filesystem::is_directory(p, ec))
    src.fail(v, "'cwd': " + p.string() + " is not a directory (a relative cwd is relative to the spec's folder)");
  f.cwd = std::filesystem::weakly_canonical(p, ec).string();
}

void read_timeout(const Source& src, const YAML::Node& v, Fields& f) {
  std::string why;
  auto d = parse_duration(src.scalar(v, "timeout", "a duration such as 30s"), &why);
  if (!d) src.fail(v, src.quoted("timeout") + ": " + why);
  f.timeout = *d;
}

void read_expect(const Source& src, const YAML::Node& v, Fields& f) {
  std::string why;
  f.expect = parse_expectation(src.scalar(v, "expect", "pass, oom, fail or an exit code"), &why);
  if (!f.expect) src.fail(v, src.quoted("expect") + " " + why);
}

void read_min_headroom(const Source& src, const YAML::Node& v, Fields& f) {
  std::string why;
  f.min_headroom = parse_min_headroom(src.scalar(v, "min_headroom", "a size or a percentage"), &why);
  if (!f.min_headroom) src.fail(v, src.quoted("min_headroom") + ": " + why);
}

void read_tags(const Source& src, const YAML::Node& v, Fields& f) {
  std::vector<std::string> tags;
  if (v.IsScalar()) tags.push_back(v.Scalar());
  else if (v.IsSequence())
    for (const auto& t : v) tags.push_back(src.scalar(t, "tags", "a string"));
  else src.fail(v, "'tags' must be a list of strings");
  f.tags = tags;
}

// `max_increase: 10%, 8MiB`, or as a list: [10%, 8MiB]
void read_max_increase(const Source& src, const YAML::Node& v, Fields& f) {
  std::string text;
  if (v.IsSequence())
    for (const auto& part : v) text += (text.empty() ? "" : ",") + src.scalar(part, "max_increase", "a percentage or a size");
  else
    text = src.scalar(v, "max_increase", "a percentage, a size, or both");
  std::string why;
  f.max_increase = parse_max_increase(text, &why);
  if (!f.max_increase) src.fail(v, "'max_increase': " + why);
}

void read_pids(const Source& src, const YAML::Node& v, Fields& f) {
  std::string s = src.scalar(v, "pids", "a number or 'max'");
  if (s == "max") {
    f.pids = std::optional<uint64_t>{};
    return;
  }
  std::string why;
  auto n = parse_size(s, &why);
  if (!n || s.find_first_not_of("0123456789") != std::string::npos)
    src.fail(v, "'pids' must be a whole number of processes (at least 1) or 'max'");
  f.pids = n;
}

void read_explain(const Source& src, const YAML::Node& v, Fields& f) {
  std::string m = src.scalar(v, "explain", "on-failure, always or never");
  f.explain = explain_mode_named(m);
  if (!f.explain)
    src.fail(v, "'explain' must be on-failure (a test that fails on memory runs once more under an allocation "
                "profiler), always or never, not '" + m + "'");
}

void read_hugepages(const Source& src, const YAML::Node& v, Fields& f) {
  std::string t = src.scalar(v, "transparent_hugepages", "never or system");
  if (t != "never" && t != "system")
    src.fail(v, "'transparent_hugepages' must be never (no transparent huge pages for the test, whatever the "
                "host's policy) or system (the host's policy, the default), not '" + t + "'");
  f.hugepages_off = t == "never";
}

std::string check_memory(const Source& src, const TestSpec& t, const std::string& written) {
  if (t.memory >= kMinMemory) return "";
  // Only a plain number can be a forgotten unit (64 -> 64MiB).
  bool plain = !written.empty() && written.find_first_not_of("0123456789") == std::string::npos;
  return src.plain("memory") + " " + format_size(t.memory) + " is below 1 MiB, too small to run any program" +
         (plain ? " (a plain number is bytes: did you mean " + written + "MiB?)" : "");
}

// The command line shows a limit as it was written (1GB, not 953.7 MiB).
std::string below_memory(const Source& src, const char* key, const TestSpec& t) {
  return src.plain(key) + " must be below " + src.plain("memory") + " (" +
         (src.form == Source::file ? format_size(t.memory) : format_limit(t.memory)) + ")";
}

constexpr unsigned kTestish = kTest | kSuite | kRule | kDefaults;  // a test's field, wherever written
constexpr unsigned kAll = kTestish | kSetup;

// Every key a spec knows, in the order messages list them. A test's keys
// come from the test, `defaults:`, its suite or a rule; the setup takes
// those a command needs.
const std::vector<Key> kKeys = {
    {"name", kTest | kSuite, nullptr, nullptr, read_name, nullptr, "belongs to each test, not to defaults"},
    {"gtest", kSuite, nullptr, nullptr, nullptr, nullptr, nullptr},
    {"pytest", kSuite, nullptr, nullptr, nullptr, nullptr, nullptr},
    {"python", kSuite, nullptr, nullptr, nullptr, nullptr, nullptr},
    {"ctest", kSuite, nullptr, nullptr, nullptr, nullptr, nullptr},
    {"cases", kSuite, nullptr, nullptr, nullptr, nullptr, nullptr},
    {"exclude", kSuite, nullptr, nullptr, nullptr, nullptr, nullptr},
    {"match", kRule, nullptr, nullptr, nullptr, nullptr, nullptr},
    {"run", kTest | kSetup, nullptr, nullptr, read_run, nullptr, "belongs to each test, not to defaults"},
    {"memory", kAll, "--memory", "--memory-range HI",
     [](const Source& s, const YAML::Node& v, Fields& f) { f.memory = size(s, v, "memory"); }, check_memory, nullptr},
    {"memory_high", kAll, nullptr, nullptr,
     [](const Source& s, const YAML::Node& v, Fields& f) { f.memory_high = size(s, v, "memory_high"); },
     [](const Source& s, const TestSpec& t, const std::string&) {
       return t.memory_high && *t.memory_high >= t.memory ? below_memory(s, "memory_high", t) : "";
     },
     nullptr},
    {"swap", kAll, nullptr, nullptr,
     [](const Source& s, const YAML::Node& v, Fields& f) {
       f.swap = s.scalar(v, "swap", "a size such as 0 or 256MiB") == "0" ? 0 : size(s, v, "swap");
     },
     nullptr, nullptr},
    {"timeout", kAll, "--timeout", nullptr, read_timeout, nullptr, nullptr},
    {"env", kAll, nullptr, nullptr, read_env, nullptr, nullptr},
    {"cwd", kAll & ~kRule, nullptr, nullptr, read_cwd, nullptr, nullptr},
    {"expect", kTestish, "--expect", nullptr, read_expect, nullptr, nullptr},
    {"min_headroom", kTestish, "--min-headroom", nullptr, read_min_headroom,
     [](const Source& s, const TestSpec& t, const std::string&) {
       const auto& h = t.min_headroom;
       return h && !h->is_percent && h->bytes >= t.memory ? below_memory(s, "min_headroom", t) : "";
     },
     nullptr},
    {"tags", kTestish, nullptr, nullptr, read_tags, nullptr, nullptr},
    {"pids", kAll, nullptr, nullptr, read_pids, nullptr, nullptr},
    {"max_increase", kTestish, nullptr, nullptr, read_max_increase, nullptr, nullptr},
    {"inputs", kTest | kSuite | kRule | kSetup, nullptr, nullptr,
     [](const Source&, const YAML::Node& v, Fields& f) { f.inputs = v; }, nullptr,
     "belongs to each test (the files it reads), not to defaults"},
    {"outputs", kSetup, nullptr, nullptr, nullptr, nullptr, nullptr},
    {"service_manager", kAll, "--service-manager", nullptr,
     [](const Source& s, const YAML::Node& v, Fields& f) {
       f.service_manager = boolean(s, v, "'service_manager' must be true (the test may reach the service manager: "
                                         "systemd-run, systemctl) or false (the default), not ");
     },
     nullptr, nullptr},
    {"transparent_hugepages", kAll, nullptr, nullptr, read_hugepages, nullptr, nullptr},
    {"thrash", kTestish, nullptr, nullptr,
     [](const Source& s, const YAML::Node& v, Fields& f) {
       f.thrash = boolean(s, v, "'thrash' must be on (the default: a test whose working set does not fit its limit "
                                "is ended as `thrash`) or off (it runs until it ends or times out), not ");
     },
     nullptr, nullptr},
    {"explain", kTestish, nullptr, nullptr, read_explain, nullptr, nullptr},
    {"sub_groups", kTestish, "--sub-groups", nullptr,
     [](const Source& s, const YAML::Node& v, Fields& f) {
       f.sub_groups = boolean(s, v, "'sub_groups' must be true (the test may make memory sub-groups, where cgroup v1 "
                                    "charges no socket buffers) or false (the default: such a test fails on v1), not ");
     },
     nullptr, nullptr},
};


}  // namespace

const std::vector<Key>& keys() { return kKeys; }

const Key* key_named(const std::string& name) {
  for (const auto& k : kKeys)
    if (name == k.name) return &k;
  return nullptr;
}

std::vector<std::string> names_at(Place place) {
  std::vector<std::string> out;
  for (const auto& k : kKeys)
    if ((k.places & place) || (place == kDefaults && k.not_a_default)) out.push_back(k.name);
  return out;
}

void check_keys(const Source& src, const YAML::Node& map, const std::vector<std::string>& allowed,
                const std::string& where) {
  std::set<std::string> seen;
  for (const auto& kv : map) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if (!seen.insert(key).second) src.fail(kv.first, "'" + key + "' is given twice in " + where);
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    // yaml-cpp (0.7) reads YAML 1.1 merge keys as a plain key named "<<".
    if (key == "<<")
      src.fail(kv.first, "merge keys (<<: *anchor) are not supported in " + where +
                             "; put shared keys under 'defaults:', or anchor whole values (&x ... *x)");
    // Keys are short: "tset" is two edits from "tests", and still a typo.
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
    src.fail(kv.first, msg);
  }
}

void read_fields(const Source& src, const YAML::Node& map, Fields& f, Place place) {
  for (const auto& kv : map) {
    const Key* k = key_named(kv.first.Scalar());
    if (!k) continue;  // a marker's key memrun does not know: its plugin already refused it
    if (place == kDefaults && k->not_a_default) src.fail(kv.first, "'" + std::string(k->name) + "' " + k->not_a_default);
    if (k->read) k->read(src, kv.second, f);
  }
}

void read_flag(const Source& src, const std::string& key, const std::string& value, Fields& f) {
  const Key* k = key_named(key);
  if (!k || !k->read) throw std::logic_error("read_flag: '" + key + "' is no field of the spec's table");
  k->read(src, YAML::Node(value), f);
}

Problem check_test(const Source& src, const TestSpec& t, const std::function<std::string(const char* key)>& written) {
  for (const auto& k : kKeys)
    if (k.check)
      if (std::string what = k.check(src, t, written ? written(k.name) : ""); !what.empty()) return {&k, what};
  return {};
}

}  // namespace memrun::spec
