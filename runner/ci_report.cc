#include "runner/ci_report.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <pugixml.hpp>
#include <sstream>

#include "cgroup/error.h"
#include "runner/plot.h"
#include "runner/report.h"
#include "runner/units.h"

namespace memrun {
namespace {

uint64_t u64(const nlohmann::ordered_json& t, const char* key) { return t.value(key, uint64_t{0}); }

// What happened, in one line: "OOM-killed at 64.0 MiB (peak 64.0 MiB,
// headroom 0 B)" or the reason memrun gave.
std::string summary_of(const nlohmann::ordered_json& t) {
  std::string memory = fmt::format("peak {} of {}, headroom {}", format_size(u64(t, "peak_bytes")),
                                   format_size(u64(t, "limit_bytes")),
                                   format_signed_size(t.value("headroom_bytes", int64_t{0})));
  std::string outcome = t.value("outcome", "");
  if (outcome == "oom") {
    std::string victims;
    for (const auto& k : t.value("oom_victims", nlohmann::ordered_json::array()))
      victims += fmt::format("{}{} (pid {}, anon-rss {})", victims.empty() ? "; killed " : ", ", k.value("name", ""),
                             k.value("pid", 0), format_size(k.value("anon_rss_bytes", uint64_t{0})));
    return fmt::format("OOM-killed at {} ({}){}", format_size(u64(t, "limit_bytes")), memory, victims);
  }
  return t.value("reason", "") + (outcome == "error" || outcome == "interrupted" ? "" : " (" + memory + ")");
}

// `text` shown literally in a Markdown table cell: every ASCII punctuation
// character as a numeric character reference, which Markdown decodes to the
// character but never reads as syntax (no code span, emphasis, link, HTML
// tag or cell separator can start), and line breaks as spaces.
std::string markdown_literal(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '\n' || c == '\r' || c == '\t') out += ' ';
    else if (c < 0x80 && std::ispunct(c)) out += fmt::format("&#{};", static_cast<int>(c));
    else out += static_cast<char>(c);
  }
  return out;
}

bool is_error(const nlohmann::ordered_json& t) {
  std::string o = t.value("outcome", "");
  return o == "error" || o == "interrupted";
}

// GitHub's workflow command escaping: data and property values.
std::string escape_data(const std::string& s) {
  std::string out;
  for (char c : s) {
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

}  // namespace

std::string junit_xml(const nlohmann::ordered_json& report) {
  pugi::xml_document doc;
  auto decl = doc.append_child(pugi::node_declaration);
  decl.append_attribute("version") = "1.0";
  decl.append_attribute("encoding") = "UTF-8";
  auto suites = doc.append_child("testsuites");
  suites.append_attribute("name") = "memrun";
  // A testsuite per spec, in the report's order.
  std::vector<std::string> specs;
  std::map<std::string, pugi::xml_node> suite_of;
  size_t failures = 0, errors = 0;
  double total_time = 0;
  const auto& host = report["host"];
  for (const auto& t : report["tests"]) {
    std::string spec = t.value("spec", "");
    if (!suite_of.count(spec)) {
      auto s = suites.append_child("testsuite");
      s.append_attribute("name") = spec.c_str();
      s.append_attribute("timestamp") = report.value("started", "").c_str();
      auto props = s.append_child("properties");
      for (const char* k : {"backend", "cgroup_mode", "kernel"}) {
        auto p = props.append_child("property");
        p.append_attribute("name") = k;
        p.append_attribute("value") = host.value(k, "").c_str();
      }
      suite_of[spec] = s;
      specs.push_back(spec);
    }
    auto suite = suite_of[spec];
    auto c = suite.append_child("testcase");
    double time = t.value("duration_s", 0.0);
    total_time += time;
    c.append_attribute("name") = t.value("name", "").c_str();
    c.append_attribute("classname") = spec.c_str();
    c.append_attribute("file") = spec.c_str();
    c.append_attribute("line") = t.value("line", 0);
    c.append_attribute("time") = fmt::format("{:.3f}", time).c_str();
    auto props = c.append_child("properties");
    for (const char* k : {"limit_bytes", "peak_bytes", "headroom_bytes", "oom_kills"}) {
      auto p = props.append_child("property");
      p.append_attribute("name") = k;
      p.append_attribute("value") = t.contains(k) ? t[k].dump().c_str() : "0";
    }
    auto outcome = props.append_child("property");
    outcome.append_attribute("name") = "outcome";
    outcome.append_attribute("value") = t.value("outcome", "").c_str();
    if (!t.value("passed", false)) {
      bool error = is_error(t);
      (error ? errors : failures)++;
      auto f = c.append_child(error ? "error" : "failure");
      f.append_attribute("message") = summary_of(t).c_str();
      f.append_attribute("type") = t.value("outcome", "").c_str();
      f.text() = (t.value("reason", "") + "\nbreakdown at the highest sample: " +
                  t.value("breakdown_at_peak", nlohmann::ordered_json::object()).dump())
                     .c_str();
    }
    std::string tail = t.value("log_tail", "");
    if (!tail.empty()) c.append_child("system-out").text() = tail.c_str();
  }
  for (const auto& spec : specs) {
    auto s = suite_of[spec];
    size_t n = 0, f = 0, e = 0;
    double time = 0;
    for (auto c : s.children("testcase")) {
      ++n;
      f += !c.child("failure").empty();
      e += !c.child("error").empty();
      time += c.attribute("time").as_double();
    }
    s.append_attribute("tests") = n;
    s.append_attribute("failures") = f;
    s.append_attribute("errors") = e;
    s.append_attribute("skipped") = 0;
    s.append_attribute("time") = fmt::format("{:.3f}", time).c_str();
  }
  suites.append_attribute("tests") = report["tests"].size();
  suites.append_attribute("failures") = failures;
  suites.append_attribute("errors") = errors;
  suites.append_attribute("time") = fmt::format("{:.3f}", total_time).c_str();
  std::ostringstream out;
  doc.save(out, "  ");
  return out.str();
}

std::string markdown_table(const nlohmann::ordered_json& report) {
  std::string out = "| verdict | test | outcome | peak | limit | headroom |\n|---|---|---|---:|---:|---:|\n";
  for (const auto& t : report["tests"]) {
    bool passed = t.value("passed", false);
    out += fmt::format("| {} | <code>{}</code> | {} | {} | {} | {} ({:.0f}%) |\n", passed ? "✅ pass" : "❌ FAIL", markdown_literal(t.value("name", "")),
                       t.value("outcome", ""), format_size(u64(t, "peak_bytes")), format_size(u64(t, "limit_bytes")),
                       format_signed_size(t.value("headroom_bytes", int64_t{0})), t.value("headroom_pct", 0.0));
  }
  const auto& s = report["summary"];
  out += fmt::format("\n**memrun**: {} passed, {} failed ({} backend, kernel {})\n", s.value("passed", 0),
                     s.value("failed", 0), report["host"].value("backend", ""), report["host"].value("kernel", ""));
  return out;
}

std::string github_annotations(const nlohmann::ordered_json& report) {
  std::string out;
  for (const auto& t : report["tests"]) {
    if (t.value("passed", false)) continue;
    out += fmt::format("::error file={},line={},title={}::{}\n", escape_property(t.value("spec", "")),
                       t.value("line", 0), escape_property("memrun: " + t.value("name", "")),
                       escape_data(summary_of(t)));
  }
  return out;
}

namespace {
bool under_github_actions() {
  const char* gha = std::getenv("GITHUB_ACTIONS");
  return gha && std::string(gha) == "true";
}
}  // namespace

bool ci_outputs_wanted(const CiOutputs& o) {
  return !o.junit.empty() || !o.markdown.empty() || !o.html.empty() || under_github_actions();
}

void write_ci_outputs(const nlohmann::ordered_json& report, const CiOutputs& outputs) {
  if (!outputs.junit.empty()) write_atomically(outputs.junit, junit_xml(report));
  if (!outputs.markdown.empty()) write_atomically(outputs.markdown, markdown_table(report));
  if (!outputs.html.empty()) write_atomically(outputs.html, html_report(report));
  if (!under_github_actions()) return;
  fmt::print("{}", github_annotations(report));
  if (const char* summary = std::getenv("GITHUB_STEP_SUMMARY"); summary && *summary) {
    // The step summary is shared by every command of the step: append.
    std::ofstream out(summary, std::ios::app);
    out << markdown_table(report);
    if (!out) throw Error(kExitUsage, std::string("cannot append to GITHUB_STEP_SUMMARY ") + summary);
  }
}

}  // namespace memrun
