// The explanation's JSON codec and its plain-text lines (runner/verdict/explanation.h).
#include "runner/verdict/explanation.h"

#include <fmt/format.h>

#include "runner/base/units.h"
#include "runner/base/utf8.h"

namespace memrun {

using Json = nlohmann::ordered_json;

namespace {

Json frame_json(const StackFrame& f) {
  return Json{{"function", f.function}, {"file", f.file}, {"line", f.line}, {"native", f.native}};
}

// A report's text read back: the one rule for data memrun did not write
// (utf8.h): no control character reaches a terminal or markup.
std::string text(const Json& j, const char* key) { return escape_controls(j.at(key).get<std::string>()); }

StackFrame frame_from(const Json& j) {
  return {text(j, "function"), text(j, "file"), j.at("line").get<int>(), j.at("native").get<bool>()};
}

}  // namespace

Json explanation_json(const Explanation& e) {
  Json sites = Json::array();
  for (const auto& s : e.sites) {
    Json stack = Json::array();
    for (const auto& f : s.stack) stack.push_back(frame_json(f));
    sites.push_back(Json{{"bytes", s.bytes},
                         {"allocations", s.allocations},
                         {"share", s.share},
                         {"process", s.process},
                         {"where", s.where},
                         {"code", s.code},
                         {"served_from", s.served_from ? Json(*s.served_from) : Json()},
                         {"stack", stack}});
  }
  Json processes = Json::array();
  for (const auto& p : e.processes)
    processes.push_back(Json{{"pid", p.pid}, {"command", p.command}, {"peak_private_bytes", p.peak_private},
                             {"profiled_by", p.profiled_by}});
  const Unseen& u = e.unseen;
  const cgroup::Breakdown& b = e.at_peak;
  return Json{
      {"status", e.status},
      {"message", e.message},
      {"why", e.why},
      {"second_run", true},
      {"profiler", e.profiler},
      {"command", e.command},
      {"explained", {{"peak_bytes", e.explained_peak}, {"duration_s", e.explained_duration_s}}},
      {"profiled_run",
       {{"limit_bytes", e.limit},
        {"outcome", e.outcome},
        {"exit_code", e.exit_code},
        {"peak_bytes", e.kernel_peak},
        {"duration_s", e.duration_s},
        {"at_peak", {{"anon", b.anon}, {"file", b.file}, {"kernel", b.kernel}, {"shmem", b.shmem}, {"sock", b.sock}}}}},
      {"profiled_peak_bytes", e.profiled_peak},
      {"unseen",
       {{"total_bytes", u.total},
        {"file_bytes", u.file},
        {"kernel_bytes", u.kernel},
        {"shmem_bytes", u.shmem},
        {"other_processes_bytes", u.other_processes},
        {"anon_unprofiled_bytes", u.anon_unprofiled}}},
      {"summary", e.summary},
      {"sites", sites},
      {"processes", processes},
  };
}

Explanation explanation_from_json(const Json& j) {
  Explanation e;
  e.status = text(j, "status");
  e.message = text(j, "message");
  e.why = text(j, "why");
  e.profiler = text(j, "profiler");
  e.command = text(j, "command");
  e.explained_peak = j.at("explained").at("peak_bytes").get<uint64_t>();
  e.explained_duration_s = j.at("explained").at("duration_s").get<double>();
  const Json& r = j.at("profiled_run");
  e.limit = r.at("limit_bytes").get<uint64_t>();
  e.outcome = text(r, "outcome");
  e.exit_code = r.at("exit_code").get<int>();
  e.kernel_peak = r.at("peak_bytes").get<uint64_t>();
  e.duration_s = r.at("duration_s").get<double>();
  const Json& b = r.at("at_peak");
  e.at_peak = {b.at("anon").get<uint64_t>(), b.at("file").get<uint64_t>(), b.at("kernel").get<uint64_t>(),
               b.at("shmem").get<uint64_t>(), b.at("sock").get<uint64_t>()};
  e.profiled_peak = j.at("profiled_peak_bytes").get<uint64_t>();
  const Json& u = j.at("unseen");
  e.unseen = {u.at("total_bytes").get<uint64_t>(),        u.at("file_bytes").get<uint64_t>(),
              u.at("kernel_bytes").get<uint64_t>(),       u.at("shmem_bytes").get<uint64_t>(),
              u.at("other_processes_bytes").get<uint64_t>(), u.at("anon_unprofiled_bytes").get<uint64_t>()};
  e.summary = text(j, "summary");
  for (const auto& s : j.at("sites")) {
    AllocationSite site;
    site.bytes = s.at("bytes").get<uint64_t>();
    site.allocations = s.at("allocations").get<uint64_t>();
    site.share = s.at("share").get<double>();
    site.process = text(s, "process");
    site.where = s.at("where").get<size_t>();
    for (const auto& f : s.at("stack")) site.stack.push_back(frame_from(f));
    if (!site.stack.empty() && site.where >= site.stack.size())
      throw std::out_of_range("explanation: a site's 'where' is past its stack");
    // Both from memrun 0.1's tenth round on: absent in older reports.
    if (s.contains("code")) site.code = text(s, "code");
    if (s.contains("served_from") && !s.at("served_from").is_null()) {
      site.served_from = s.at("served_from").get<size_t>();
      if (*site.served_from >= site.stack.size())
        throw std::out_of_range("explanation: a site's 'served_from' is past its stack");
    }
    e.sites.push_back(std::move(site));
  }
  for (const auto& p : j.at("processes"))
    e.processes.push_back({p.at("pid").get<int>(), text(p, "command"),
                           p.at("peak_private_bytes").get<uint64_t>(), text(p, "profiled_by")});
  return e;
}

std::string frame_text(const StackFrame& f) {
  if (f.file.empty()) return f.function;
  return f.line > 0 ? fmt::format("{} ({}:{})", f.function, f.file, f.line) : fmt::format("{} ({})", f.function, f.file);
}

std::string line_text(const AllocationSite& s) {
  if (s.stack.empty()) return "?";
  std::string text = frame_text(s.stack[s.where]);
  return s.code.empty() ? text : text + ": " + s.code;
}

std::string site_text(const AllocationSite& s) {
  std::string text = line_text(s);
  if (s.served_from && s.where >= *s.served_from) text += " (on other threads, for this line's call)";
  return text;
}

bool library_file(const std::string& file) {
  return file.empty() || file[0] == '<' || file.find("/site-packages/") != std::string::npos ||
         file.find("/dist-packages/") != std::string::npos || file.find("/lib/python3") != std::string::npos ||
         file.rfind("/usr/", 0) == 0;
}

const StackFrame* site_caller(const AllocationSite& s) {
  // The next frame out that is the test's too: the same kind (a Python
  // frame's caller is a Python frame), with a file and a line.
  if (s.where >= s.stack.size()) return nullptr;
  for (size_t i = s.where + 1; i < s.stack.size(); ++i) {
    const auto& f = s.stack[i];
    if (f.line > 0 && !library_file(f.file) && f.native == s.stack[s.where].native) return &f;
  }
  return nullptr;
}

std::string unseen_text(const Explanation& e) {
  const Unseen& u = e.unseen;
  return fmt::format("unseen by the profiler {}: page cache {}, kernel {}, shmem {}, other processes {}, other anon "
                     "{}; profiled run: peak {} under {} in {} ({} at first: peak {})",
                     format_size(u.total), format_size(u.file), format_size(u.kernel), format_size(u.shmem),
                     format_size(u.other_processes), format_size(u.anon_unprofiled), format_size(e.kernel_peak),
                     format_size(e.limit), format_duration(e.duration_s), format_duration(e.explained_duration_s),
                     format_size(e.explained_peak));
}

std::string profiled_ending_text(const Explanation& e) {
  if (e.outcome != "oom") return "";
  return fmt::format("the profiled run was itself OOM-killed at its limit of {}: the profile ends at the kill",
                     format_size(e.limit));
}

std::vector<std::string> explanation_lines(const Explanation& e, size_t max_sites) {
  std::vector<std::string> lines;
  if (e.status != "explained") {
    lines.push_back(fmt::format("explain: {}", e.message));
    return lines;
  }
  std::string ending = profiled_ending_text(e);
  lines.push_back(fmt::format("explain ({}, a second run under {}; the verdict above is the first run's): {}{}",
                              e.why, e.profiler, e.summary, ending.empty() ? "" : "; " + ending));
  for (size_t i = 0; i < e.sites.size() && i < max_sites; ++i) {
    const auto& s = e.sites[i];
    const StackFrame* caller = site_caller(s);
    lines.push_back(fmt::format("  {:>9} {:>4.0f}%  {}{}", format_size(s.bytes), 100 * s.share, site_text(s),
                                caller ? " <- " + frame_text(*caller) : ""));
  }
  lines.push_back("  " + unseen_text(e));
  return lines;
}

}  // namespace memrun
