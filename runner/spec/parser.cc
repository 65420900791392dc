#include "runner/spec/spec.h"

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "runner/base/error.h"
#include "runner/base/units.h"
#include "runner/base/utf8.h"
#include "runner/spec/keys.h"

namespace memrun {
namespace {

using spec::Fields;

// Stage one: the text, its YAML, every key but a suite's cases. Nothing
// runs here: suites are listed by list_suites once the whole file is valid.
class Parser {
 public:
  Parser(std::string path, std::string dir, bool check_inputs) {
    src_.path = std::move(path);
    src_.dir = std::move(dir);
    src_.check_inputs = check_inputs;
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

  Spec parse(const std::string& text, std::vector<spec::SuiteDraft>& suites) {
    YAML::Node root = load(text);
    spec::check_keys(src_, root, {"env", "setup", "defaults", "tests", "suites"}, "the spec");
    Fields defaults = read_defaults(root);
    Spec spec;
    if (auto setup = root["setup"]) spec.setup = read_setup(setup, defaults);
    auto tests = root["tests"];
    auto suite_list = root["suites"];
    if (!tests && !suite_list) fail(root, "the spec has no 'tests:' list (nor 'suites:')");
    if (tests && (!tests.IsSequence() || tests.size() == 0))
      fail(tests, "'tests' must be a non-empty list of tests (each starting with '- name:')");
    std::map<std::string, int> lines;
    for (const auto& node : tests ? tests : YAML::Node(YAML::NodeType::Sequence)) {
      if (!node.IsMap()) fail(node, "each test must be a mapping with name, run and memory");
      spec::check_keys(src_, node, spec::names_at(spec::kTest), "a test");
      Fields f = defaults;
      spec::read_fields(src_, node, f, spec::kTest);
      TestSpec t = spec::finish(src_, node, f);
      if (auto [it, fresh] = lines.emplace(t.name, t.line); !fresh)
        fail(node["name"], "duplicate test name '" + t.name + "' (first at line " + std::to_string(it->second) + ")");
      spec.tests.push_back(std::move(t));
    }
    if (suite_list) {
      if (!suite_list.IsSequence() || suite_list.size() == 0)
        fail(suite_list, "'suites' must be a non-empty list of suites (each starting with '- name:')");
      for (const auto& node : suite_list) suites.push_back(spec::read_suite(src_, node, defaults));
    }
    return spec;
  }

  const spec::Source& source() const { return src_; }

 private:
  template <typename At>
  [[noreturn]] void fail(const At& at, const std::string& message) const { src_.fail(at, message); }

  // The text as one YAML document that is a mapping.
  YAML::Node load(const std::string& text) const {
    check_utf8(text);
    YAML::Node root;
    try {
      // One document: tests after a `---` would silently never run.
      if (int line = second_document_line(text)) {
        YAML::Mark at;
        at.line = line - 1;
        fail(at, "a second YAML document starts here (after ---), and memrun would never run "
                 "its tests: put every test under one 'tests:' list, or split the file into specs");
      }
      root = YAML::Load(text);
    } catch (const YAML::DeepRecursion& e) {
      fail(e.mark, "the spec is nested too deeply (more than " + std::to_string(e.depth() - 1) +
                       " levels); a spec needs three or four");
    } catch (const YAML::Exception& e) {
      fail(e.mark, "invalid YAML: " + e.msg);
    }
    if (!root || root.IsNull()) fail(YAML::Mark::null_mark(), "the spec is empty: it needs a 'tests:' list");
    if (!root.IsMap())
      fail(root, "the spec must be a mapping with a 'tests:' list, not " + std::string(spec::kind_of(root)));
    return root;
  }

  // Spec-level env and `defaults:`: what every test has unless it says
  // otherwise. The env is for the setup and every test, below defaults'
  // and a test's own. Its values may use ${NAME:-default} from memrun's
  // environment, so a knob such as MEMRUN_SCALE can be set from outside.
  Fields read_defaults(const YAML::Node& root) const {
    Fields defaults;
    if (auto e = root["env"]) {
      Fields top;
      spec::key_named("env")->read(src_, e, top);
      for (auto& [k, v] : top.env) defaults.env[k] = src_.expand(e[k], v, {});
    }
    if (auto d = root["defaults"]) {
      if (!d.IsMap()) fail(d, "'defaults' must be a mapping of test keys");
      spec::check_keys(src_, d, spec::names_at(spec::kDefaults), "defaults");
      spec::read_fields(src_, d, defaults, spec::kDefaults);
    }
    return defaults;
  }

  Setup read_setup(const YAML::Node& node, const Fields& defaults) {
    if (!node.IsMap()) fail(node, "'setup' must be a mapping with run and memory");
    spec::check_keys(src_, node, spec::names_at(spec::kSetup), "setup");
    Fields f;
    f.env = defaults.env;
    f.name = "setup";
    spec::read_fields(src_, node, f, spec::kSetup);  // inputs and outputs are read below
    Setup s;
    s.command = spec::finish(src_, node, f, true);
    if (node["inputs"]) s.inputs = spec::read_paths(src_, node["inputs"], "inputs", s.command);
    if (node["outputs"]) s.outputs = spec::read_paths(src_, node["outputs"], "outputs", s.command);
    src_.setup_outputs = s.outputs;
    return s;
  }

  spec::Source src_;
};

}  // namespace

Spec parse_spec(const std::string& text, const std::string& path, const std::string& dir,
                const Discoverer& discover, bool check_inputs, const TestSink& sink, bool compact) {
  Parser parser(path, dir, check_inputs);
  std::vector<spec::SuiteDraft> suites;
  Spec spec = parser.parse(text, suites);
  spec.path = path;
  spec::list_suites(parser.source(), spec, suites, discover, sink, compact);  // stage two: the suites' tools list their cases
  return spec;
}

Spec load_spec(const std::string& path, const Discoverer& discover, const TestSink& sink, bool compact) {
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
  return parse_spec(text, path, dir, discover, true, sink, compact);
}

}  // namespace memrun
