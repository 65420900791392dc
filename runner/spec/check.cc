// A test made whole from its fields, and checked: when the spec is read,
// and again after --scale or --set changed a limit.
#include <filesystem>

#include "runner/spec/inputs.h"
#include "runner/spec/keys.h"

namespace memrun {
namespace spec {
namespace {

// A test's input, at its place in the spec (see input_refusal); a missing
// one only when the spec's setup makes it (checked again at each start).
void check_input(const Source& src, const YAML::Node& at, const std::string& path) {
  bool missing = false;
  std::string why = input_refusal(path, &missing);
  if (!why.empty()) src.fail(at, why);
  if (!missing) return;
  for (const auto& out : src.setup_outputs) {
    auto rel = std::filesystem::path(path).lexically_relative(out);
    if (!rel.empty() && *rel.begin() != "..") return;
  }
  src.fail(at, "the input " + path + " does not exist (a relative input is relative to the test's cwd; a file the "
               "spec's setup makes belongs in its 'outputs')");
}

}  // namespace

std::vector<std::string> read_paths(const Source& src, const YAML::Node& v, const std::string& key,
                                    const TestSpec& test) {
  if (!v.IsSequence()) src.fail(v, "'" + key + "' must be a list of paths");
  std::vector<std::string> out;
  for (const auto& p : v) {
    std::filesystem::path path(src.expand(p, src.scalar(p, key, "a path"), test.env));
    if (path.is_relative()) path = std::filesystem::path(test.cwd) / path;
    out.push_back(path.lexically_normal().string());
    if (src.check_inputs && key == "inputs" && test.name != "setup") check_input(src, p, out.back());
  }
  return out;
}

TestSpec test_of(const Fields& f, const std::string& dir) {
  TestSpec t;
  t.name = *f.name;
  t.argv = *f.argv;
  t.command = f.command;
  t.memory = *f.memory;
  t.memory_high = f.memory_high;
  t.swap = f.swap.value_or(0);
  t.timeout = f.timeout.value_or(kDefaultTimeout);
  t.env = f.env;
  t.cwd = f.cwd.value_or(dir);
  t.expect = f.expect.value_or(Expectation{});
  t.min_headroom = f.min_headroom;
  t.tags = f.tags.value_or(std::vector<std::string>{});
  t.pids = f.pids ? *f.pids : std::optional<uint64_t>(kDefaultPids);
  t.max_increase = f.max_increase;
  t.service_manager = f.service_manager.value_or(false);
  t.hugepages_off = f.hugepages_off.value_or(false);
  t.thrash = f.thrash.value_or(true);
  t.sub_groups = f.sub_groups.value_or(false);
  t.explain = f.explain;
  return t;
}

TestSpec finish(const Source& src, const YAML::Node& node, const Fields& f, bool is_setup) {
  if (!f.name) src.fail(node, "this test has no 'name'");
  const std::string who = is_setup ? "the setup" : "test '" + *f.name + "'";
  if (!f.argv) src.fail(node, who + " has no 'run' command");
  if (!f.memory) src.fail(node, who + " has no 'memory' limit (e.g. memory: 256MiB)");
  TestSpec t = test_of(f, src.dir);
  t.line = node.Mark().line + 1;
  t.column = node.Mark().column + 1;
  auto at = [&](const char* key) { return node[key] ? node[key] : node; };
  auto written = [&](const char* key) { return node[key] && node[key].IsScalar() ? node[key].Scalar() : ""; };
  if (auto p = check_test(src, t, written)) src.fail(at(p.key->name), who + ": " + p.what);
  if (!is_setup && f.inputs) t.inputs = read_paths(src, *f.inputs, "inputs", t);
  return t;
}

}  // namespace spec

void recheck_test(const Spec& spec, const TestSpec& t, const std::string& changed_by, const std::string& advice) {
  spec::Source src;
  src.path = spec.path;
  auto p = spec::check_test(src, t);
  if (!p) return;
  YAML::Mark at;
  at.line = t.line - 1;
  at.column = t.column - 1;
  std::string key = p.key->name;
  src.fail(t.line > 0 ? at : YAML::Mark::null_mark(),
           "test '" + t.name + "': " + p.what + " once " + changed_by + " applies; " +
               (key == "memory" ? "give at least 1MiB" : advice + ", or lower the test's " + key + " in the spec"));
}

}  // namespace memrun
