// The explanation's plain-text lines (runner/verdict/explanation.h); its JSON is
// the report's (runner/report/json.cc).
#include "runner/verdict/explanation.h"

#include <fmt/format.h>

#include "runner/base/units.h"

namespace memrun {

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
