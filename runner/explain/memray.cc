// memray's profiles, read by memray_reader.py in a helper (memray.h).
#include "runner/explain/memray.h"

#include <fmt/format.h>

#include <map>
#include <vector>

#include "runner/base/bounded_json.h"
#include "runner/base/error.h"

namespace memrun::explain {

namespace {

using Json = nlohmann::ordered_json;

// memray keeps apart what one Python line allocated through different
// native paths (or bytecode offsets: three calls on one line): one site
// per process and Python stack, as a developer reads them.
std::vector<AllocationSite> merged_by_python_stack(std::vector<AllocationSite> sites) {
  std::map<std::string, size_t> by_stack;
  std::vector<AllocationSite> merged;
  for (auto& site : sites) {
    std::string key = site.process;
    for (const auto& f : site.stack)
      if (!f.native) key += fmt::format("\n{}\t{}\t{}", f.function, f.file, f.line);
    auto [at, fresh] = by_stack.emplace(key, merged.size());
    if (fresh || key == site.process) {
      if (!fresh) at->second = merged.size();
      merged.push_back(std::move(site));
      continue;
    }
    merged[at->second].bytes += site.bytes;
    merged[at->second].allocations += site.allocations;
  }
  return merged;
}

void add_frames(const Json& from, std::vector<StackFrame>& to) {
  for (const auto& fr : from) {
    std::string file = fr[1].get<std::string>();
    to.push_back({fr[0].get<std::string>(), file == "<unknown>" ? "" : file, fr[2].get<int>(), !python_file(file)});
  }
}

// The sites of one profile's entry (its "sites", then its "pool").
void add_sites(const Json& f, const std::string& process, Explanation& e) {
  for (const char* kind : {"sites", "pool"})
    for (const auto& s : f.value(kind, Json::array())) {
      AllocationSite site;
      site.bytes = s.value("bytes", uint64_t{0});
      site.allocations = s.value("allocations", uint64_t{0});
      site.process = process;
      add_frames(s["stack"], site.stack);
      if (s.contains("served")) {
        site.served_from = site.stack.size();
        add_frames(s["served"], site.stack);
      }
      site.where = where_of(site.stack, {});
      e.sites.push_back(std::move(site));
    }
}

}  // namespace

// memray's profiles, one per process it followed.
std::string read_memray(const Profiling& p, const std::string& out_base, Helpers& helpers, uint64_t limit,
                        Explanation& e, std::map<int, std::string>& profiled, int& interrupted_by) {
  Ran ran = helpers.run("read", {p.python, "-I", "-c", memray_reader(), out_base + ".bin", std::to_string(kMaxSites * 5)},
                        limit, kReaderBound);
  interrupted_by = ran.interrupted_by;
  if (!ran.ok) return "memray's profile could not be read: " + ran.failure;
  Json j;
  try {
    j = parse_json(ran.out, "memray's profile reader");  // within limits, as every reader
  } catch (const Error& error) {
    return error.what();
  }
  if (!j.is_array()) return "memray's profile reader wrote something else: " + ran.out.substr(0, 500);
  std::string errors;
  for (const auto& f : j) {
    if (f.contains("error")) {
      errors += f.value("file", "") + ": " + f.value("error", "") + "; ";
      continue;
    }
    int pid = f.value("pid", 0);
    profiled[pid] = "memray";
    e.profiled_peak += f.value("peak", uint64_t{0});
    add_sites(f, fmt::format("{} (pid {})", shortened(f.value("command", "")), pid), e);
  }
  e.sites = merged_by_python_stack(std::move(e.sites));
  if (j.empty()) return "memray wrote no profile (did the test's Python start?)";
  if (e.sites.empty() && !errors.empty()) return "memray's profile could not be read: " + errors;
  return "";
}

}  // namespace memrun::explain
