#include "runner/report/ci_outputs.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <pugixml.hpp>
#include <sstream>
#include <vector>

#include "runner/base/error.h"
#include "runner/base/units.h"
#include "runner/base/utf8.h"
#include "runner/report/plot.h"
#include "runner/report/report.h"

namespace memrun {
namespace {

bool is_error(const TestRecord& t) {
  return t.verdict.outcome == Outcome::error || t.verdict.outcome == Outcome::interrupted;
}

// What happened, in one line, as every output says it (said_of): the
// reason, the figures, and who the kernel killed.
std::string summary_of(const TestRecord& t) {
  const Verdict& v = t.verdict;
  Said said = said_of(t);
  if (is_error(t)) return said.reason;
  std::string victims;
  for (const auto& k : t.observed.oom_victims)
    victims += fmt::format("{}{} (pid {}, anon-rss {})", victims.empty() ? "; killed " : ", ", printable(k.name), k.pid,
                           format_size(k.anon_rss));
  return fmt::format("{} (peak {} of {}, headroom {}){}", said.reason, format_size(v.peak), format_limit(v.limit),
                     said.headroom, victims);
}

}  // namespace

// `text` shown literally in a Markdown table cell: every ASCII punctuation
// character as a numeric character reference, which Markdown decodes to the
// character but never reads as syntax (no code span, emphasis, link, HTML
// tag or cell separator can start), and line breaks as spaces.
std::string markdown_literal(const std::string& text) {
  std::string out;
  for (unsigned char c : escape_controls(text, true)) {
    if (c == '\n' || c == '\r' || c == '\t') out += ' ';
    else if (c < 0x80 && std::ispunct(c)) out += fmt::format("&#{};", static_cast<int>(c));
    else out += static_cast<char>(c);
  }
  return out;
}

// GitHub's workflow command escaping: data and property values.
std::string escape_data(const std::string& s) {
  std::string out;
  for (char c : escape_controls(s, true)) {
    if (c == '%') out += "%25";
    else if (c == '\r') out += "%0D";
    else if (c == '\n') out += "%0A";
    else out += c;
  }
  return out;
}

std::string escape_property(const std::string& s) {
  std::string out;
  for (char c : escape_data(s)) {
    if (c == ':') out += "%3A";
    else if (c == ',') out += "%2C";
    else out += c;
  }
  return out;
}

namespace {

void add_property(pugi::xml_node props, const char* name, const std::string& value) {
  auto p = props.append_child("property");
  p.append_attribute("name") = name;
  p.append_attribute("value") = value.c_str();
}

}  // namespace

pugi::xml_node junit_root(pugi::xml_document& doc, const char* name) {
  auto decl = doc.append_child(pugi::node_declaration);
  decl.append_attribute("version") = "1.0";
  decl.append_attribute("encoding") = "UTF-8";
  auto suites = doc.append_child("testsuites");
  suites.append_attribute("name") = name;
  return suites;
}

// Every attribute and text of `node` and below, in XML 1.0's characters
// (escape_controls): pugixml writes a control character as &#27;, which no
// XML parser accepts, and the whole file would be unreadable.
void xml_safe(pugi::xml_node node) {
  for (auto a : node.attributes()) a.set_value(escape_controls(a.value(), true).c_str());
  if (node.type() == pugi::node_pcdata || node.type() == pugi::node_cdata || node.type() == pugi::node_comment)
    node.set_value(escape_controls(node.value(), true).c_str());
  for (auto child : node.children()) xml_safe(child);
}

std::string xml_text(const pugi::xml_document& doc) {
  xml_safe(doc);
  std::ostringstream out;
  doc.save(out, "  ");
  return out.str();
}

namespace {

// pugixml's printing handed to a Sink as it goes.
struct SinkWriter : pugi::xml_writer {
  const Sink& sink;
  explicit SinkWriter(const Sink& s) : sink(s) {}
  void write(const void* data, size_t size) override { sink(std::string(static_cast<const char*>(data), size)); }
};

// The JUnit document printed a part at a time, each part as the whole
// document prints it: in XML 1.0's characters (xml_safe), indented at its
// depth. With `reread`, each part as printing, reading back and printing
// again gives it, as a run with a comparison wrote its document (it was
// read back to add the comparison's testsuite: a CR of a text is read as a
// newline, a text of spaces alone is dropped).
struct JunitPrinter {
  const Sink& sink;
  bool reread;

  // `doc` from `depth`; with `open`, only what comes before the child
  // named `open` and, in `after`, what comes after it.
  void print(pugi::xml_document& doc, unsigned depth, const char* open = nullptr, std::string* after = nullptr) {
    xml_safe(doc);
    if (reread) {
      std::string text = xml_text(doc);
      doc.reset();
      doc.load_string(text.c_str(), pugi::parse_default | pugi::parse_declaration);
      xml_safe(doc);
    }
    if (!open) {
      SinkWriter writer(sink);
      if (depth == 0) doc.save(writer, "  ");
      else doc.document_element().print(writer, "  ", pugi::format_default, pugi::encoding_auto, depth);
      return;
    }
    std::ostringstream out;
    if (depth == 0) doc.save(out, "  ");
    else doc.document_element().print(out, "  ", pugi::format_default, pugi::encoding_auto, depth);
    // The placeholder's line splits the element's opening from its closing.
    std::string text = out.str();
    size_t at = text.rfind('\n', text.find(std::string("<") + open)) + 1;
    sink(text.substr(0, at));
    *after = text.substr(text.find('\n', at) + 1);
  }
};

const char* const placeholder = "memrun-placeholder";

// What a testsuite's attributes count, over its testcases as they are
// written (the time is the sum of the times as written).
struct SuiteCount {
  size_t tests = 0, failures = 0, errors = 0, skipped = 0, disabled = 0;
  double time = 0;
};

std::string seconds(double time) { return fmt::format("{:.3f}", time); }

// The counts a testsuites or testsuite element carries, in the schema's order.
void add_counts(pugi::xml_node node, const SuiteCount& n) {
  node.append_attribute("tests") = n.tests;
  node.append_attribute("failures") = n.failures;
  node.append_attribute("errors") = n.errors;
  node.append_attribute("skipped") = n.skipped;
  node.append_attribute("disabled") = n.disabled;
  node.append_attribute("time") = seconds(n.time).c_str();
}

void write_testcase(const TestRecord& t, JunitPrinter& printer) {
  const Verdict& v = t.verdict;
  pugi::xml_document doc;
  auto c = doc.append_child("testcase");
  c.append_attribute("name") = t.test.name.c_str();
  c.append_attribute("classname") = t.test.spec.c_str();
  c.append_attribute("file") = t.test.spec.c_str();
  c.append_attribute("line") = t.test.line;
  c.append_attribute("time") = seconds(t.observed.duration_s).c_str();
  auto props = c.append_child("properties");
  for (const auto& [name, value] : junit_properties(t)) add_property(props, name.c_str(), value);
  if (v.outcome == Outcome::skipped && v.passed) {
    c.append_child("skipped").append_attribute("message") = escape_controls(v.reason).c_str();
  } else if (!v.passed) {
    auto f = c.append_child(is_error(t) ? "error" : "failure");
    f.append_attribute("message") = summary_of(t).c_str();
    f.append_attribute("type") = to_string(v.outcome);
    // The reason may quote a test's data (a group it moved into): the
    // display rule, as everywhere (XML 1.0 has no character for most C0).
    std::string text = escape_controls(v.reason, true) + "\n" + at_peak_text(t);
    // Where the memory went (verdict/explanation.h): the sites in the failure text,
    // which is what a CI test tab shows.
    if (t.explanation)
      for (const auto& line : explanation_lines(*t.explanation, 10)) text += "\n" + escape_controls(line, true);
    f.text() = text.c_str();
  }
  if (!t.observed.log_tail.empty()) c.append_child("system-out").text() = t.observed.log_tail.c_str();
  printer.print(doc, 2);
}

// A testsuite's opening, its properties included; returns its closing.
std::string open_testsuite(const RunInfo& info, const std::string& spec, const SuiteCount& n,
                           JunitPrinter& printer) {
  pugi::xml_document doc;
  auto s = doc.append_child("testsuite");
  s.append_attribute("name") = spec.c_str();
  s.append_attribute("timestamp") = iso(info.started).c_str();
  add_counts(s, n);
  auto props = s.append_child("properties");
  for (const auto& [name, value] : junit_properties(info)) add_property(props, name.c_str(), value);
  s.append_child(placeholder);
  std::string close;
  printer.print(doc, 1, placeholder, &close);
  return close;
}

// The comparison's testsuite as comparison_junit makes it; returns its
// failures as it counts them.
size_t comparison_suite(const Comparison& c, pugi::xml_document& doc) {
  pugi::xml_document extra;
  extra.load_string(comparison_junit(c).c_str());
  auto suite = extra.child("testsuites").child("testsuite");
  doc.append_copy(suite);
  return suite.attribute("failures").as_uint();
}

}  // namespace

// Long: JUnit's elements and attributes in the order its schema (tests/junit.xsd) wants them.
void junit_xml(const RunInfo& info, const EachRecord& records, const Sink& sink, const Comparison* comparison) {
  // A first pass counts what each testsuite's attributes and the root's
  // say; the second writes each testcase as it comes, a small document at
  // a time, so that what is held does not grow with the tests.
  std::vector<std::string> specs;  // in the order of their first test
  std::map<std::string, SuiteCount> count;
  SuiteCount all;
  bool grouped = true;  // each spec's tests come together
  records([&](const TestRecord& t) {
    const Verdict& v = t.verdict;
    auto [it, first] = count.try_emplace(t.test.spec);
    if (first) specs.push_back(t.test.spec);
    else if (specs.back() != t.test.spec) grouped = false;
    SuiteCount& n = it->second;
    ++n.tests;
    ++all.tests;
    n.time += std::strtod(seconds(t.observed.duration_s).c_str(), nullptr);
    all.time += t.observed.duration_s;
    if (v.outcome == Outcome::skipped && v.passed) {
      ++n.skipped;
      ++all.skipped;
      n.disabled += escape_controls(v.reason).rfind("disabled:", 0) == 0;
      all.disabled += v.disabled;
    } else if (!v.passed) {
      bool error = is_error(t);
      (error ? n.errors : n.failures)++;
      (error ? all.errors : all.failures)++;
    }
  });
  pugi::xml_document extra;
  if (comparison) {
    all.tests += comparison->tests.size();
    all.failures += comparison_suite(*comparison, extra);
  }
  JunitPrinter printer{sink, comparison != nullptr};
  pugi::xml_document doc;
  auto suites = junit_root(doc, "memrun");
  add_counts(suites, all);
  if (specs.empty() && !comparison) return printer.print(doc, 0);
  suites.append_child(placeholder);
  std::string end;
  printer.print(doc, 0, placeholder, &end);
  if (grouped) {
    // One pass: a testsuite ends where the next spec's tests begin.
    size_t next = 0;
    std::string close;
    records([&](const TestRecord& t) {
      if (next == 0 || specs[next - 1] != t.test.spec) {
        sink(close);
        close = open_testsuite(info, specs[next], count[specs[next]], printer);
        ++next;
      }
      write_testcase(t, printer);
    });
    sink(close);
  } else {
    for (const auto& spec : specs) {
      std::string close = open_testsuite(info, spec, count[spec], printer);
      records([&](const TestRecord& t) {
        if (t.test.spec == spec) write_testcase(t, printer);
      });
      sink(close);
    }
  }
  if (comparison) printer.print(extra, 1);
  sink(end);
}

std::string junit_xml(const RunInfo& info, const EachRecord& records) {
  std::string out;
  junit_xml(info, records, [&](const std::string& text) { out += text; });
  return out;
}

std::string explanation_markdown(const TestRecord& t) {
  if (!t.explanation) return "";
  const Explanation& e = *t.explanation;
  std::string out = fmt::format("\n<details><summary>where the memory of <code>{}</code> went ({})</summary>\n\n",
                                markdown_literal(t.test.name), markdown_literal(e.why));
  if (e.status != "explained") return out + markdown_literal(e.message) + "\n\n</details>\n";
  std::string ending = profiled_ending_text(e);
  out += fmt::format("A second run under {} (the verdict is the first run's): {}{}\n\n", markdown_literal(e.profiler),
                     markdown_literal(e.summary), ending.empty() ? "" : "; " + markdown_literal(ending));
  out += "| bytes | of peak | site | called from |\n|---:|---:|---|---|\n";
  for (const auto& s : e.sites) {
    const StackFrame* caller = site_caller(s);
    out += fmt::format("| {} | {:.0f}% | <code>{}</code> | {} |\n", format_size(s.bytes), 100 * s.share,
                       markdown_literal(site_text(s)),
                       caller ? "<code>" + markdown_literal(frame_text(*caller)) + "</code>" : "");
  }
  out += "\n" + markdown_literal(unseen_text(e)) + ".\n";
  return out + "\n</details>\n";
}

void markdown_table(const RunInfo& info, const EachRecord& records, const Sink& sink) {
  sink("| verdict | test | outcome | peak | limit | headroom | reason |\n|---|---|---|---:|---:|---:|---|\n");
  Tally tally;
  records([&](const TestRecord& t) {
    const Verdict& v = t.verdict;
    tally.add(v);
    Said said = said_of(t);
    std::string mark = said.verdict == std::string("SKIP") ? "⏭ skip" : v.passed ? "✅ pass" : "❌ FAIL";
    bool figures = said.headroom != "-";  // a skipped test ran nothing
    sink(fmt::format("| {} | <code>{}</code> | {} | {} | {} | {} | {} |\n", mark, markdown_literal(cell(t.test.name)),
                     said.outcome, figures ? format_size(v.peak) : "-", figures ? format_size(v.limit) : "-",
                     said.headroom, markdown_literal(cell(said.reason, 400))));
  });
  // Where the memory went, a collapsible section per explained test, so
  // that a pull request's comment names the line.
  records([&](const TestRecord& t) {
    if (t.explanation) sink(explanation_markdown(t));
  });
  std::string skipped = tally.skipped > tally.disabled ? fmt::format(", {} skipped", tally.skipped - tally.disabled) : "";
  if (tally.disabled) skipped += fmt::format(", {} disabled", tally.disabled);
  // A merged report's host fields come from its inputs: data, like names.
  sink(fmt::format("\n**memrun**: {} passed, {} failed{} ({} backend, kernel {})\n", tally.passed, tally.failed(),
                   skipped, markdown_literal(info.backend), markdown_literal(info.kernel)));
}

std::string markdown_table(const RunInfo& info, const EachRecord& records) {
  std::string out;
  markdown_table(info, records, [&](const std::string& text) { out += text; });
  return out;
}

// Where an annotation points: "file=PATH,line=N," with a spec given by
// absolute path made relative to GITHUB_WORKSPACE (the checkout: GitHub
// maps a file against it only), and nothing for one outside it (a path
// GitHub cannot map puts the annotation nowhere; without a file it shows
// on the job). A relative path is the checkout's, as a job runs it.
std::string annotation_place(const std::string& spec, int line) {
  namespace fs = std::filesystem;
  fs::path path = spec;
  if (path.is_absolute()) {
    const char* ws = std::getenv("GITHUB_WORKSPACE");
    if (!ws || !*ws) return "";
    path = path.lexically_normal().lexically_relative(fs::path(ws).lexically_normal());
    if (path.empty() || *path.begin() == "..") return "";
  }
  if (path.empty()) return "";
  return fmt::format("file={},line={},", escape_property(path.string()), line);
}

std::string github_annotations(const EachRecord& records) {
  std::string out;
  records([&](const TestRecord& t) {
    if (t.verdict.passed) return;
    out += fmt::format("::error {}title={}::{}\n", annotation_place(t.test.spec, t.test.line),
                       escape_property("memrun: " + t.test.name + " — " + said_of(t).outcome), escape_data(summary_of(t)));
  });
  return out;
}

bool under_github_actions() {
  const char* gha = std::getenv("GITHUB_ACTIONS");
  return gha && std::string(gha) == "true";
}

void append_step_summary(const std::function<void(const Sink&)>& produce) {
  const char* summary = std::getenv("GITHUB_STEP_SUMMARY");
  if (!summary || !*summary) return;
  // The step summary is shared by every command of the step: append.
  std::ofstream out(summary, std::ios::app);
  produce([&](const std::string& text) { out << text; });
  if (!out) throw Error(Category::output, std::string("cannot append to GITHUB_STEP_SUMMARY ") + summary);
}

void append_step_summary(const std::string& markdown) {
  append_step_summary([&](const Sink& sink) { sink(markdown); });
}

bool ci_outputs_wanted(const CiOutputs& o) {
  return !o.junit.empty() || !o.markdown.empty() || !o.html.empty() || under_github_actions();
}

void write_ci_outputs(const RunInfo& info, const EachRecord& records, const CiOutputs& outputs,
                      const Comparison* comparison) {
  // Each output is written as it is made, from the records read again:
  // what is held does not grow with the tests.
  auto markdown = [&](const Sink& sink) {
    markdown_table(info, records, sink);
    if (comparison) sink("\n" + comparison_markdown(*comparison));
  };
  if (!outputs.junit.empty())
    write_atomically(outputs.junit, [&](const Sink& sink) { junit_xml(info, records, sink, comparison); });
  if (!outputs.markdown.empty()) write_atomically(outputs.markdown, markdown);
  if (!outputs.html.empty())
    write_atomically(outputs.html, [&](const Sink& sink) { html_report(info, records, sink); });
  if (!under_github_actions()) return;
  fmt::print("{}", github_annotations(records));
  if (comparison) fmt::print("{}", comparison_annotations(*comparison));
  append_step_summary(markdown);
}

}  // namespace memrun
