#include "runner/merge.h"

#include <fstream>
#include <set>
#include <sstream>

#include "cgroup/error.h"

namespace memrun {

nlohmann::ordered_json read_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(kExitUsage, path + ": cannot read the report: " + std::strerror(errno));
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(kExitUsage, path + ": not a JSON report (" + e.what() + ")");
  }
  if (!j.is_object() || j.value("schema", "") != "memrun-report/1" || !j["tests"].is_array())
    throw Error(kExitUsage, path + ": not a memrun report (schema memrun-report/1); write one with --json");
  return j;
}

nlohmann::ordered_json merge_reports(const std::vector<nlohmann::ordered_json>& reports,
                                     const std::vector<std::string>& paths) {
  if (reports.empty()) throw Error(kExitUsage, "memrun merge needs at least one report");
  // Shards: every index of 1..N exactly once, when the reports are shards.
  int count = 0;
  std::map<int, std::string> seen;
  for (size_t i = 0; i < reports.size(); ++i) {
    const auto& shard = reports[i]["shard"];
    if (shard.is_null()) continue;
    int k = shard["index"], n = shard["count"];
    if (count && n != count)
      throw Error(kExitUsage, paths[i] + " is shard " + std::to_string(k) + "/" + std::to_string(n) +
                                  ", but other reports are of " + std::to_string(count) + " shards");
    count = n;
    if (auto [it, fresh] = seen.emplace(k, paths[i]); !fresh)
      throw Error(kExitUsage, "shard " + std::to_string(k) + "/" + std::to_string(n) + " comes twice: " +
                                  it->second + " and " + paths[i]);
  }
  if (count) {
    std::string missing;
    for (int k = 1; k <= count; ++k)
      if (!seen.count(k)) missing += (missing.empty() ? "" : ", ") + std::to_string(k) + "/" + std::to_string(count);
    if (!missing.empty())
      throw Error(kExitUsage, "shard " + missing + " is missing: merge the report of every shard");
  }
  std::vector<size_t> order(reports.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    auto idx = [&](size_t i) { return reports[i]["shard"].is_null() ? 0 : reports[i]["shard"]["index"].get<int>(); };
    return idx(a) < idx(b);
  });

  nlohmann::ordered_json merged = reports[order[0]];
  merged["tests"] = nlohmann::ordered_json::array();
  merged["setups"] = nlohmann::ordered_json::array();
  merged["shard"] = nullptr;
  merged["merged_from"] = nlohmann::ordered_json::array();
  std::map<std::string, std::string> where;  // spec:name -> report
  size_t passed = 0;
  for (size_t i : order) {
    const auto& r = reports[i];
    merged["merged_from"].push_back(paths[i]);
    if (r["started"] < merged["started"]) merged["started"] = r["started"];
    if (r["ended"] > merged["ended"]) merged["ended"] = r["ended"];
    if (!r["interrupted_by"].is_null()) merged["interrupted_by"] = r["interrupted_by"];
    for (const auto& s : r.value("setups", nlohmann::ordered_json::array())) merged["setups"].push_back(s);
    for (const auto& t : r["tests"]) {
      std::string key = t.value("spec", "") + ":" + t.value("name", "");
      if (auto [it, fresh] = where.emplace(key, paths[i]); !fresh)
        throw Error(kExitUsage, "test '" + t.value("name", "") + "' of " + t.value("spec", "") +
                                    " appears twice: in " + it->second + " and " + paths[i]);
      passed += t.value("passed", false);
      merged["tests"].push_back(t);
    }
  }
  size_t total = merged["tests"].size();
  merged["summary"] = {{"total", total}, {"passed", passed}, {"failed", total - passed}};
  return merged;
}

std::map<std::string, double> timings_from(const nlohmann::ordered_json& report) {
  std::map<std::string, double> out;
  for (const auto& t : report["tests"])
    if (t.contains("duration_s") && t["duration_s"].is_number()) out[t["name"]] = t["duration_s"];
  return out;
}

int exit_code_of(const nlohmann::ordered_json& report) {
  for (const auto& t : report["tests"])
    if (!t.value("passed", false)) return kExitTestFailed;
  return kExitOk;
}

}  // namespace memrun
