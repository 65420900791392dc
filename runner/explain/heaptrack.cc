// heaptrack's profiles, read from heaptrack_print's text (heaptrack.h).
#include "runner/explain/heaptrack.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>

#include "runner/base/files.h"
#include "runner/launch/child.h"

namespace memrun::explain {

namespace fs = std::filesystem;

namespace {

// "209.72M" as heaptrack_print writes sizes (powers of 1000) -> bytes.
uint64_t heaptrack_size(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  double unit = 1;
  if (end && *end) {
    switch (*end) {
      case 'K': unit = 1e3; break;
      case 'M': unit = 1e6; break;
      case 'G': unit = 1e9; break;
      case 'T': unit = 1e12; break;
      default: break;
    }
  }
  return static_cast<uint64_t>(std::llround(v * unit));
}

// heaptrack_print's lines: a location's head, a backtrace's head (its
// bytes and calls), the total.
const std::regex peak_head(R"(^(\S+) peak memory consumed over (\d+) calls from$)");
const std::regex sub_head(R"(^(\S+) consumed over (\d+) calls from:$)");
const std::regex total(R"(^peak heap memory consumption: (\S+)$)");

// Frames from lines[k] on: "FUNCTION" then optional "  at FILE:LINE" and
// "  in MODULE", indented by `indent`; `k` ends past them. `lib`: whether
// each frame's module is a library's (or heaptrack's own).
void read_frames(const std::vector<std::string>& lines, size_t& k, size_t indent, std::vector<StackFrame>& stack,
                 std::vector<bool>& lib) {
  std::string pad(indent, ' ');
  while (k < lines.size() && lines[k].rfind(pad, 0) == 0 && lines[k].size() > indent && lines[k][indent] != ' ' &&
         !std::regex_match(lines[k], sub_head)) {
    StackFrame f{lines[k].substr(indent), "", 0, true};
    bool library = false;
    ++k;
    if (k < lines.size() && lines[k].rfind(pad + "  at ", 0) == 0) {
      std::string at = lines[k].substr(indent + 5);
      auto colon = at.rfind(':');
      f.file = colon == std::string::npos ? at : at.substr(0, colon);
      f.line = colon == std::string::npos ? 0 : std::atoi(at.c_str() + colon + 1);
      ++k;
    }
    if (k < lines.size() && lines[k].rfind(pad + "  in ", 0) == 0) {
      std::string module = lines[k].substr(indent + 5);
      library = module.rfind("/lib", 0) == 0 || module.rfind("/usr/lib", 0) == 0 ||
                module.find("heaptrack") != std::string::npos;
      ++k;
    }
    stack.push_back(f);
    lib.push_back(library);
  }
}

// One profile's heaptrack_print text: the command it ran (in
// `profiled_commands`), its peak, and a site for each backtrace of each
// peak consumer.
void read_print(const std::string& out, Explanation& e, std::map<std::string, std::string>& profiled_commands) {
  std::istringstream in(out);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string command;
  std::smatch m;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("Debuggee command was: ", 0) == 0) {
      command = lines[i].substr(22);
      profiled_commands[shortened(command)] = "heaptrack";
    }
    if (std::regex_match(lines[i], m, total)) e.profiled_peak += heaptrack_size(m[1]);
    if (!std::regex_match(lines[i], m, peak_head)) continue;
    size_t k = i + 1;
    std::vector<StackFrame> location;
    std::vector<bool> location_lib;
    read_frames(lines, k, 0, location, location_lib);
    while (k < lines.size() && std::regex_match(lines[k], m, sub_head)) {
      AllocationSite site;
      site.bytes = heaptrack_size(m[1]);
      site.allocations = std::stoull(m[2]);
      site.process = shortened(command);
      site.stack = location;
      std::vector<bool> lib = location_lib;
      ++k;
      read_frames(lines, k, 4, site.stack, lib);
      site.where = where_of(site.stack, lib);
      e.sites.push_back(std::move(site));
    }
    i = k - 1;
  }
}

}  // namespace

std::string read_heaptrack(const std::string& dir, const std::string& out_base, const std::vector<std::string>& env,
                           Helpers& helpers, uint64_t limit, Explanation& e,
                           std::map<std::string, std::string>& profiled_commands, int& interrupted_by) {
  std::string print = find_executable("heaptrack_print", env);
  std::string prefix = fs::path(out_base).filename().string() + ".";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    Ran ran = helpers.run("read", {print, "-f", entry.path().string(), "-p", "1", "-a", "0", "-T", "0", "-l", "0", "-n",
                                   std::to_string(kMaxSites), "-s", "3"},
                          limit, kReaderBound);
    // A signal taken during one reader is the run's, though that reader
    // finished: no other reader starts.
    interrupted_by = ran.interrupted_by;
    if (!ran.ok) return "heaptrack's profile " + name + " could not be read: " + ran.failure;
    if (ran.interrupted_by) return "heaptrack's profiles were not all read: memrun was interrupted";
    read_print(ran.out, e, profiled_commands);
  }
  if (profiled_commands.empty()) return "heaptrack wrote no profile (did the program start?)";
  return "";
}

}  // namespace memrun::explain
