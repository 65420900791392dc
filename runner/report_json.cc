// The report's JSON, both ways. Every field name of memrun-report/1 is
// spelled here and nowhere else in memrun (docs/report.md documents them).
#include "runner/report_json.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <cmath>
#include <ctime>
#include <fstream>

#include "runner/error.h"
#include "runner/utf8.h"

namespace memrun {

using Json = nlohmann::ordered_json;

std::string iso(std::chrono::system_clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", fmt::gmtime(std::chrono::system_clock::to_time_t(t)), ms);
}

namespace {

constexpr const char* kSchema = "memrun-report/1";

// The time point of an iso() text; the epoch when it is not one.
std::chrono::system_clock::time_point parse_iso(const std::string& text) {
  std::tm tm{};
  int ms = 0;
  if (std::sscanf(text.c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &ms) < 6)
    return {};
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return std::chrono::system_clock::from_time_t(::timegm(&tm)) + std::chrono::milliseconds(ms);
}

Json null_or(bool null, const Json& value) { return null ? Json(nullptr) : value; }

// A timestamp, or null for one never taken (a test that never started).
Json when(std::chrono::system_clock::time_point t) {
  return t == std::chrono::system_clock::time_point{} ? Json(nullptr) : Json(iso(t));
}

// Reads the fields of one JSON object with the types the schema gives
// them: a missing or null field is the default (older reports lack newer
// fields); a field of another type is the input's fault, said with where.
class Fields {
 public:
  Fields(const Json& object, std::string where) : j_(object), where_(std::move(where)) {
    if (!j_.is_object()) throw Error(kExitUsage, where_ + ": should be a JSON object, is " + j_.type_name());
  }
  template <class T>
  T get(const char* key, T fallback = T{}) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return fallback;
    try {
      return it->template get<T>();
    } catch (const nlohmann::json::exception&) {
      throw Error(kExitUsage, fmt::format("{}: field '{}' has the wrong type ({}); is this a memrun report that "
                                          "was edited by hand? Write it again with --json",
                                          where_, key, it->type_name()));
    }
  }
  Fields object(const char* key) const {
    auto it = j_.find(key);
    static const Json empty = Json::object();
    return Fields(it == j_.end() || it->is_null() ? empty : *it, where_ + "." + key);
  }
  const Json& raw(const char* key) const {
    static const Json null;
    auto it = j_.find(key);
    return it == j_.end() ? null : *it;
  }
  const std::string& where() const { return where_; }

 private:
  const Json& j_;
  std::string where_;
};

Json breakdown_json(const cgroup::Breakdown& b) {
  return {{"anon", b.anon}, {"file", b.file}, {"kernel", b.kernel}, {"shmem", b.shmem}, {"sock", b.sock}};
}

cgroup::Breakdown breakdown_from(const Fields& f) {
  cgroup::Breakdown b;
  b.anon = f.get<uint64_t>("anon");
  b.file = f.get<uint64_t>("file");
  b.kernel = f.get<uint64_t>("kernel");
  b.shmem = f.get<uint64_t>("shmem");
  b.sock = f.get<uint64_t>("sock");
  return b;
}

Json victims_json(const std::vector<OomKill>& kills) {
  Json out = Json::array();
  for (const auto& k : kills)
    out.push_back({{"pid", k.pid}, {"name", printable(k.name)}, {"anon_rss_bytes", k.anon_rss},
                   {"file_rss_bytes", k.file_rss}, {"shmem_rss_bytes", k.shmem_rss}});
  return out;
}

std::vector<OomKill> victims_from(const Fields& t) {
  std::vector<OomKill> out;
  const Json& list = t.raw("oom_victims");
  if (!list.is_array()) return out;
  for (size_t i = 0; i < list.size(); ++i) {
    Fields k(list[i], fmt::format("{}.oom_victims[{}]", t.where(), i));
    out.push_back({k.get<int>("pid"), k.get<std::string>("name"), k.get<uint64_t>("anon_rss_bytes"),
                   k.get<uint64_t>("file_rss_bytes"), k.get<uint64_t>("shmem_rss_bytes")});
  }
  return out;
}

// The samples, plus the kernel's exact peak as a point of its own (at the
// highest sample's time), so that a spike between two samples still shows.
Json timeline_json(const TestRecord& r) {
  const Timeline& tl = r.observed.timeline;
  return {{"interval_s", tl.interval_s * tl.stride},
          {"t_s", tl.t_s},
          {"current", tl.current},
          {"anon", tl.anon},
          {"file", tl.file},
          {"kernel_peak", {{"t_s", tl.t_s.empty() ? r.observed.duration_s : tl.peak_t_s}, {"bytes", r.verdict.peak}}}};
}

Timeline timeline_from(const Fields& tl) {
  Timeline out;
  out.interval_s = tl.get<double>("interval_s");
  out.t_s = tl.get<std::vector<double>>("t_s");
  out.current = tl.get<std::vector<uint64_t>>("current");
  out.anon = tl.get<std::vector<uint64_t>>("anon");
  out.file = tl.get<std::vector<uint64_t>>("file");
  out.peak_t_s = tl.object("kernel_peak").get<double>("t_s");
  return out;
}

// One element of a report array, as nlohmann's dump(2) would print it at
// the depth of the report's "tests" and "setups": four spaces in.
std::string element(const Json& j) {
  std::string text = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out = "    ";
  out.reserve(text.size() + text.size() / 8);
  for (char c : text) {
    out += c;
    if (c == '\n') out += "    ";
  }
  return out;
}

Json head_json(const RunInfo& info, const Tally& tally) {
  Json head = {
      {"schema", kSchema},
      {"memrun_version", info.memrun_version},
      {"run_id", info.run_id},
      {"run_dir", info.run_dir},
      {"cwd", info.cwd},
      {"memrun_max_rss_bytes", info.memrun_max_rss},
      {"started", iso(info.started)},
      {"ended", iso(info.ended)},
      {"interrupted_by", null_or(info.interrupted_by.empty(), info.interrupted_by)},
      {"host", {{"kernel", info.kernel}, {"backend", info.backend}, {"cgroup_mode", info.cgroup_mode}, {"cgroup_path", info.cgroup_path}}},
      {"shard", null_or(info.shard_count == 0, {{"index", info.shard_index}, {"count", info.shard_count}})},
      {"jobs", info.jobs},
      {"memory_budget_bytes", null_or(!info.budget, info.budget.value_or(0))},
      {"summary", {{"total", tally.total}, {"passed", tally.passed}, {"failed", tally.failed()}}},
      {"cleanup_error", null_or(info.cleanup_error.empty(), info.cleanup_error)},
  };
  if (!info.merged_from.empty()) head["merged_from"] = info.merged_from;
  const Environment& e = info.environment;
  head["environment"] = {{"thp", e.thp},
                         {"swap_bytes", e.swap_bytes},
                         {"memory_bytes", e.memory_bytes},
                         {"cpus", e.cpus},
                         {"allocator_env", e.allocator_env}};
  return head;
}

RunInfo head_from(const Fields& f) {
  RunInfo info;
  info.memrun_version = f.get<std::string>("memrun_version");
  info.run_id = f.get<std::string>("run_id");
  info.run_dir = f.get<std::string>("run_dir");
  info.cwd = f.get<std::string>("cwd", ".");
  info.memrun_max_rss = f.get<uint64_t>("memrun_max_rss_bytes");
  info.started = parse_iso(f.get<std::string>("started"));
  info.ended = parse_iso(f.get<std::string>("ended"));
  info.interrupted_by = f.get<std::string>("interrupted_by");
  Fields host = f.object("host");
  info.kernel = host.get<std::string>("kernel");
  info.backend = host.get<std::string>("backend");
  info.cgroup_mode = host.get<std::string>("cgroup_mode");
  info.cgroup_path = host.get<std::string>("cgroup_path");
  Fields shard = f.object("shard");
  info.shard_index = shard.get<int>("index");
  info.shard_count = shard.get<int>("count");
  if (info.shard_count < 0 || info.shard_index < 0 || info.shard_index > info.shard_count ||
      (info.shard_count > 0 && info.shard_index == 0))
    throw Error(kExitUsage, fmt::format("{}: shard {}/{} is not a shard (1 <= K <= N)", f.where(), info.shard_index,
                                        info.shard_count));
  info.jobs = f.get<int>("jobs", 1);
  if (!f.raw("memory_budget_bytes").is_null()) info.budget = f.get<uint64_t>("memory_budget_bytes");
  info.cleanup_error = f.get<std::string>("cleanup_error");
  info.merged_from = f.get<std::vector<std::string>>("merged_from");
  Fields e = f.object("environment");
  info.environment.thp = e.get<std::string>("thp");
  info.environment.swap_bytes = e.get<uint64_t>("swap_bytes");
  info.environment.memory_bytes = e.get<uint64_t>("memory_bytes");
  info.environment.cpus = e.get<int>("cpus");
  info.environment.allocator_env = e.get<std::map<std::string, std::string>>("allocator_env");
  return info;
}

Json runs_json(const std::vector<RunFigures>& runs) {
  Json out = Json::array();
  for (const auto& r : runs)
    out.push_back({{"peak_bytes", r.peak}, {"working_set_peak_bytes", r.working_set_peak},
                   {"outcome", to_string(r.outcome)}, {"passed", r.passed}, {"duration_s", r.duration_s}});
  return out;
}

// A report written before runs were recorded has one run: the record's own.
std::vector<RunFigures> runs_from(const Fields& t, const Verdict& v, const Observation& o) {
  const Json& list = t.raw("runs");
  if (!list.is_array() || list.empty()) return {{v.peak, v.working_set_peak, v.outcome, v.passed, o.duration_s}};
  std::vector<RunFigures> out;
  for (size_t i = 0; i < list.size(); ++i) {
    Fields r(list[i], fmt::format("{}.runs[{}]", t.where(), i));
    auto outcome = outcome_named(r.get<std::string>("outcome"));
    if (!outcome) throw Error(kExitUsage, r.where() + ": field 'outcome' is not an outcome memrun writes");
    out.push_back({r.get<uint64_t>("peak_bytes"), r.get<uint64_t>("working_set_peak_bytes"), *outcome,
                   r.get<bool>("passed"), r.get<double>("duration_s")});
  }
  return out;
}

Ending ending_of(Outcome outcome) {
  switch (outcome) {
    case Outcome::timeout: return Ending::timed_out;
    case Outcome::thrash: return Ending::thrashed;
    case Outcome::interrupted: return Ending::interrupted;
    case Outcome::error: return Ending::not_started;
    default: return Ending::exited;
  }
}

}  // namespace

// to_json and record_from_json are one line per field of the schema, in
// the report's order: longer than other functions, and clearer for it.
Json to_json(const TestRecord& r) {
  const TestIdentity& t = r.test;
  const Observation& o = r.observed;
  const Verdict& v = r.verdict;
  const cgroup::Final& k = o.kernel;
  return {
      {"name", t.name},
      {"spec", t.spec},
      {"line", t.line},
      {"command", t.command},
      {"env", t.env},
      {"tags", t.tags},
      {"outcome", to_string(v.outcome)},
      {"expected", t.expected},
      {"passed", v.passed},
      {"reason", v.reason},
      {"requested_limit_bytes", t.requested_limit},
      {"swap_limit_bytes", t.swap_limit},
      {"limit_bytes", v.limit},
      {"peak_bytes", v.peak},
      {"peak_source", v.peak_sampled ? "sampled" : "kernel"},
      {"working_set_peak_bytes", v.working_set_peak},
      {"page_cache_bytes", v.page_cache},
      {"headroom_bytes", v.headroom},
      {"headroom_pct", std::round(v.headroom_pct * 100) / 100},
      {"headroom_basis", v.headroom_basis},
      {"swap_peak_bytes", v.swap_peak},
      {"swap_bytes", v.swap_at_end},
      {"limit_reached", k.limit_reached},
      {"limit_at_end_bytes", null_or(k.limit_at_end == UINT64_MAX, k.limit_at_end)},
      {"escaped_processes", k.escaped},
      {"cleanup_error", null_or(o.cleanup_error.empty(), o.cleanup_error)},
      // Read after every process of the group was killed: what is still
      // charged as shmem lives in a tmpfs file or a shared memory segment.
      {"tmpfs_left_bytes", k.breakdown.shmem},
      {"oom_kills", k.oom_kills},
      {"oom_group_kills", k.oom_group_kills},
      {"exit_code", null_or(o.exit_code < 0, o.exit_code)},
      {"signal", null_or(o.signal == 0, o.signal)},
      {"duration_s", o.duration_s},
      {"cpu_user_s", o.cpu_user_s},
      {"cpu_system_s", o.cpu_system_s},
      {"samples", o.samples},
      {"placement", o.placement},
      {"memory_high_bytes", null_or(!t.memory_high, t.memory_high.value_or(0))},
      {"breakdown", breakdown_json(k.breakdown)},
      {"breakdown_at_peak", breakdown_json(o.at_peak)},
      {"timeline", timeline_json(r)},
      {"oom_victims", victims_json(o.oom_victims)},
      {"memory_stat", k.stat},
      {"events", k.events},
      {"pressure_us", k.pressure_us},
      // A stream the test never wrote to has no file.
      {"stdout", null_or(o.stdout_bytes == 0, t.stdout_path)},
      {"stderr", null_or(o.stderr_bytes == 0, t.stderr_path)},
      {"stdout_bytes", o.stdout_bytes},
      {"stderr_bytes", o.stderr_bytes},
      {"log_discarded_bytes", o.log_discarded_bytes},
      {"started", when(o.started)},
      {"ended", when(o.ended)},
      // Self-contained for CI outputs made elsewhere (memrun merge): the
      // end of the logs of a test that did not pass.
      {"log_tail", o.log_tail},
      {"max_increase", t.max_increase ? Json({{"percent", t.max_increase->first}, {"bytes", t.max_increase->second}})
                                      : Json(nullptr)},
      {"runs", runs_json(r.runs)},
      {"inputs", t.inputs},
  };
}

TestRecord record_from_json(const Json& entry, const std::string& where) {
  Fields f(entry, where);
  TestRecord r;
  TestIdentity& t = r.test;
  t.name = escape_controls(f.get<std::string>("name"));  // data read back: the one rule for names
  t.spec = f.get<std::string>("spec");
  t.line = f.get<int>("line");
  t.command = f.get<std::string>("command");
  t.env = f.get<std::map<std::string, std::string>>("env");
  t.tags = f.get<std::vector<std::string>>("tags");
  t.expected = f.get<std::string>("expected");
  t.requested_limit = f.get<uint64_t>("requested_limit_bytes");
  t.swap_limit = f.get<uint64_t>("swap_limit_bytes", 0);
  if (!f.raw("memory_high_bytes").is_null()) t.memory_high = f.get<uint64_t>("memory_high_bytes");
  t.stdout_path = f.get<std::string>("stdout");
  t.stderr_path = f.get<std::string>("stderr");

  Verdict& v = r.verdict;
  auto outcome = outcome_named(f.get<std::string>("outcome"));
  if (!outcome) throw Error(kExitUsage, where + ": field 'outcome' is not one of pass, fail, oom, timeout, error, interrupted");
  v.outcome = *outcome;
  v.passed = f.get<bool>("passed");
  v.reason = f.get<std::string>("reason");
  v.limit = f.get<uint64_t>("limit_bytes");
  v.peak = f.get<uint64_t>("peak_bytes");
  v.peak_sampled = f.get<std::string>("peak_source") == "sampled";
  v.working_set_peak = f.get<uint64_t>("working_set_peak_bytes");
  v.page_cache = f.get<uint64_t>("page_cache_bytes");
  v.headroom = f.get<int64_t>("headroom_bytes");
  v.headroom_pct = f.get<double>("headroom_pct");
  v.headroom_basis = f.get<std::string>("headroom_basis", "peak");
  v.swap_peak = f.get<uint64_t>("swap_peak_bytes", 0);
  v.swap_at_end = f.get<uint64_t>("swap_bytes", 0);

  Observation& o = r.observed;
  cgroup::Final& k = o.kernel;
  o.ending = ending_of(v.outcome);
  if (!v.peak_sampled) k.peak = v.peak;
  k.limit_reached = f.get<bool>("limit_reached");
  k.limit_at_end = f.get<uint64_t>("limit_at_end_bytes", UINT64_MAX);
  k.escaped = f.get<uint64_t>("escaped_processes");
  k.oom_kills = f.get<uint64_t>("oom_kills");
  k.oom_group_kills = f.get<uint64_t>("oom_group_kills");
  k.breakdown = breakdown_from(f.object("breakdown"));
  k.stat = f.get<std::map<std::string, uint64_t>>("memory_stat");
  k.events = f.get<std::map<std::string, uint64_t>>("events");
  k.pressure_us = f.get<std::map<std::string, uint64_t>>("pressure_us");
  k.reclaimable_file = v.page_cache;
  o.cleanup_error = f.get<std::string>("cleanup_error");
  o.exit_code = f.get<int>("exit_code", -1);
  o.signal = f.get<int>("signal");
  o.duration_s = f.get<double>("duration_s");
  o.cpu_user_s = f.get<double>("cpu_user_s");
  o.cpu_system_s = f.get<double>("cpu_system_s");
  o.samples = f.get<int>("samples");
  o.placement = f.get<std::string>("placement");
  o.at_peak = breakdown_from(f.object("breakdown_at_peak"));
  o.timeline = timeline_from(f.object("timeline"));
  o.oom_victims = victims_from(f);
  o.stdout_bytes = f.get<uint64_t>("stdout_bytes");
  o.stderr_bytes = f.get<uint64_t>("stderr_bytes");
  o.log_discarded_bytes = f.get<uint64_t>("log_discarded_bytes");
  o.started = parse_iso(f.get<std::string>("started"));
  o.ended = parse_iso(f.get<std::string>("ended"));
  o.log_tail = f.get<std::string>("log_tail");
  Fields increase = f.object("max_increase");
  if (!f.raw("max_increase").is_null())
    t.max_increase = std::pair{increase.get<double>("percent"), increase.get<uint64_t>("bytes")};
  r.runs = runs_from(f, v, o);
  t.inputs = f.get<std::vector<std::string>>("inputs");
  return r;
}

std::vector<std::pair<std::string, std::string>> junit_properties(const TestRecord& r) {
  return {{"limit_bytes", std::to_string(r.verdict.limit)},
          {"peak_bytes", std::to_string(r.verdict.peak)},
          {"headroom_bytes", std::to_string(r.verdict.headroom)},
          {"oom_kills", std::to_string(r.observed.kernel.oom_kills)},
          {"outcome", to_string(r.verdict.outcome)}};
}

std::vector<std::pair<std::string, std::string>> junit_properties(const RunInfo& info) {
  return {{"backend", info.backend}, {"cgroup_mode", info.cgroup_mode}, {"kernel", info.kernel}};
}

std::string breakdown_json_text(const cgroup::Breakdown& b) { return breakdown_json(b).dump(); }

std::string entry_text(const TestRecord& record) { return element(to_json(record)); }

std::string entry_text(const SetupRecord& s) {
  Json j = {{"spec", s.spec}, {"ran", s.ran}};
  if (s.result) j["result"] = to_json(*s.result);
  return element(j);
}

void render_report(const RunInfo& info, const Tally& tally, const std::vector<std::string>& setup_texts, size_t tests,
                   const std::function<std::string(size_t)>& test_text, const Sink& sink) {
  std::string text = head_json(info, tally).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  text.resize(text.size() - 2);  // the closing "\n}": setups and tests follow
  sink(text + ",\n  \"setups\": ");
  sink(setup_texts.empty() ? "[]" : "[\n");
  for (size_t i = 0; i < setup_texts.size(); ++i)
    sink(setup_texts[i] + (i + 1 < setup_texts.size() ? ",\n" : "\n  ]"));
  // One test at a time, in the plan's order.
  sink(",\n  \"tests\": ");
  sink(tests == 0 ? "[]" : "[\n");
  for (size_t i = 0; i < tests; ++i) sink(test_text(i) + (i + 1 < tests ? ",\n" : "\n  ]"));
  if (!info.comparison_json.empty()) {
    // Indented to its depth, as one dump(2) of the whole would print it.
    std::string text = info.comparison_json;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    std::string indented;
    for (char c : text) indented += c == '\n' ? std::string("\n  ") : std::string(1, c);
    sink(",\n  \"comparison\": " + indented);
  }
  sink("\n}\n");
}

ReportData read_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(kExitUsage, path + ": cannot read the report: " + std::strerror(errno));
  Json j;
  try {
    j = Json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(kExitUsage, path + ": not a JSON report (" + e.what() + ")");
  }
  if (!j.is_object() || !j["schema"].is_string() || j["schema"].get<std::string>() != kSchema || !j["tests"].is_array())
    throw Error(kExitUsage, path + ": not a memrun report (schema " + kSchema + "); write one with --json");
  ReportData report;
  report.info = head_from(Fields(j, path));
  const Json& setups = j["setups"];
  for (size_t i = 0; setups.is_array() && i < setups.size(); ++i) {
    Fields s(setups[i], fmt::format("{}: setups[{}]", path, i));
    SetupRecord setup{s.get<std::string>("spec"), s.get<bool>("ran"), std::nullopt};
    if (s.raw("result").is_object()) setup.result = record_from_json(s.raw("result"), fmt::format("{}: setups[{}].result", path, i));
    report.setups.push_back(std::move(setup));
  }
  const Json& tests = j["tests"];
  for (size_t i = 0; i < tests.size(); ++i)
    report.tests.push_back(record_from_json(tests[i], fmt::format("{}: tests[{}]", path, i)));
  return report;
}

std::string report_text(const ReportData& report) {
  Tally tally;
  for (const auto& t : report.tests) tally.add(t.verdict);
  std::vector<std::string> setups;
  for (const auto& s : report.setups) setups.push_back(entry_text(s));
  std::string out;
  render_report(report.info, tally, setups, report.tests.size(),
                [&](size_t i) { return entry_text(report.tests[i]); }, [&](const std::string& part) { out += part; });
  return out;
}

EachRecord each_record(const ReportData& report) {
  return [&report](const std::function<void(const TestRecord&)>& use) {
    for (const auto& t : report.tests) use(t);
  };
}

}  // namespace memrun
