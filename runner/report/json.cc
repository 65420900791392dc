// The report's JSON, both ways. Every field name of memrun-report/1 is
// spelled here and nowhere else in memrun (docs/report.md documents them).
// Long room: one codec (issue 47): every field written and read beside its
// twin, checked complete at build time (codec_fields.h).
#include "runner/report/json.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <climits>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iterator>
#include <tuple>

#include "runner/base/bounded_json.h"
#include "runner/base/error.h"
#include "runner/base/units.h"
#include "runner/base/utf8.h"
#include "runner/plan/plan.h"
#include "runner/report/codec_fields.h"
#include "runner/verdict/decide.h"

namespace memrun {

using Json = nlohmann::ordered_json;

std::string iso(std::chrono::system_clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", fmt::gmtime(std::chrono::system_clock::to_time_t(t)), ms);
}

namespace {

constexpr const char* kSchema = "memrun-report/1";

// The largest byte count a report may hold: every size memrun compares or
// subtracts fits a signed 64-bit integer (a kernel's "no limit" included).
constexpr uint64_t kMaxBytes = INT64_MAX;
// Durations and times of a test (seconds): finite, and at most ~31 years.
constexpr double kMaxSeconds = 1e9;

// The time point of an iso() text, or nullopt when it is not one (or is
// outside years 1970..2200: system_clock counts nanoseconds in 64 bits,
// which end in 2262).
std::optional<std::chrono::system_clock::time_point> parse_iso(const std::string& text) {
  std::tm tm{};
  int ms = 0;
  char z = 0;
  int got = std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                        &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms, &z);
  if (got != 8 || z != 'Z' || tm.tm_year < 1970 || tm.tm_year > 2200 || tm.tm_mon < 1 || tm.tm_mon > 12 ||
      tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour < 0 || tm.tm_hour > 23 || tm.tm_min < 0 || tm.tm_min > 59 ||
      tm.tm_sec < 0 || tm.tm_sec > 60 || ms < 0 || ms > 999)
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return std::chrono::system_clock::from_time_t(::timegm(&tm)) + std::chrono::milliseconds(ms);
}

Json null_or(bool null, const Json& value) { return null ? Json(nullptr) : value; }

// A timestamp, or null for one never taken (a test that never started).
Json when(std::chrono::system_clock::time_point t) {
  return t == std::chrono::system_clock::time_point{} ? Json(nullptr) : Json(iso(t));
}

// A value of a report as an error message quotes it: short, one line.
std::string quoted(const Json& value) {
  // Never a whole list or object: it may be large, or nested deep enough to
  // exhaust the stack of a recursive dump.
  if (value.is_structured()) return std::string("a JSON ") + value.type_name();
  std::string text = value.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

// Reads the fields of one JSON object with the types and ranges the schema
// gives them. A missing or null optional field is its default (older
// reports lack newer fields); a required one missing, a field of another
// type, or a number out of its range is the input's fault, said with where
// (and which test): a negative size must not read as 16 EiB, nor 1e300 as 0.
class Fields {
 public:
  Fields(const Json& object, std::string where) : j_(object), where_(std::move(where)) {
    if (!j_.is_object()) throw Error(Category::bad_input, where_ + ": should be a JSON object, is " + j_.type_name());
  }
  /// A string, bool, or container of them.
  template <class T>
  T get(const char* key, T fallback = T{}) const {
    const Json* v = find(key);
    if (!v) return fallback;
    try {
      return v->template get<T>();
    } catch (const nlohmann::json::exception&) {
      throw wrong(key, fmt::format("has the wrong type ({})", v->type_name()));
    }
  }
  /// A string that must be there.
  std::string text(const char* key) const {
    if (!find(key)) throw missing(key);
    return get<std::string>(key);
  }
  /// A size in bytes: an integer in 0..2^63-1.
  uint64_t bytes(const char* key, uint64_t fallback = 0) const {
    const Json* v = find(key);
    return v ? bytes_of(*v, key) : fallback;
  }
  uint64_t required_bytes(const char* key) const {
    if (!find(key)) throw missing(key);
    return bytes(key);
  }
  /// An integer in lo..hi.
  int64_t integer(const char* key, int64_t lo, int64_t hi, int64_t fallback = 0) const {
    const Json* v = find(key);
    if (!v) return fallback;
    bool whole = v->is_number_integer();
    int64_t n = 0;
    if (v->is_number_unsigned()) whole = v->get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX);
    if (whole) n = v->get<int64_t>();
    if (!whole || n < lo || n > hi)
      throw wrong(key, fmt::format("is {}: should be a whole number from {} to {}", quoted(*v), lo, hi));
    return n;
  }
  /// A finite number in lo..hi.
  double real(const char* key, double lo, double hi, double fallback = 0) const {
    const Json* v = find(key);
    return v ? real_of(*v, key, lo, hi) : fallback;
  }
  double seconds(const char* key) const { return real(key, 0, kMaxSeconds); }
  /// A list of sizes, or of seconds.
  std::vector<uint64_t> byte_list(const char* key) const {
    std::vector<uint64_t> out;
    for (const Json& v : list(key)) out.push_back(bytes_of(v, key));
    return out;
  }
  std::vector<double> seconds_list(const char* key) const {
    std::vector<double> out;
    for (const Json& v : list(key)) out.push_back(real_of(v, key, 0, kMaxSeconds));
    return out;
  }
  /// Counters by name (memory.stat, memory.events): whole, not negative.
  std::map<std::string, uint64_t> counters(const char* key) const {
    std::map<std::string, uint64_t> out;
    const Json* v = find(key);
    if (!v) return out;
    if (!v->is_object()) throw wrong(key, fmt::format("has the wrong type ({})", v->type_name()));
    for (const auto& [name, n] : v->items()) {
      if (!n.is_number_unsigned())
        throw wrong(key, fmt::format("has {} = {}: should be a whole number, 0 or more", quoted(Json(name)), quoted(n)));
      out[name] = n.get<uint64_t>();
    }
    return out;
  }
  /// A timestamp as iso() writes it; `null_ok`: null or missing is "never".
  std::chrono::system_clock::time_point time(const char* key, bool null_ok) const {
    const Json* v = find(key);
    if (!v) {
      if (null_ok) return {};
      throw missing(key);
    }
    auto t = parse_iso(get<std::string>(key));
    if (!t) throw wrong(key, "is " + quoted(*v) + ": should be a UTC time such as 2026-11-30T10:15:02.123Z");
    return *t;
  }
  void require(const char* key) const {
    if (!find(key)) throw missing(key);
  }
  /// A field that must be there, null allowed (a figure not measured).
  void present(const char* key) const {
    if (!j_.contains(key)) throw missing(key);
  }
  /// Whether the entry has `key` at all, null included: a report written
  /// before the field existed has not.
  bool has(const char* key) const { return j_.contains(key); }
  Fields object(const char* key) const {
    const Json* v = find(key);
    static const Json empty = Json::object();
    return Fields(v ? *v : empty, where_ + "." + key);
  }
  const Json& raw(const char* key) const {
    static const Json null;
    auto it = j_.find(key);
    return it == j_.end() ? null : *it;
  }
  /// A list (an empty one when missing or null).
  const Json& list(const char* key) const {
    static const Json empty = Json::array();
    const Json* v = find(key);
    if (!v) return empty;
    if (!v->is_array()) throw wrong(key, fmt::format("has the wrong type ({})", v->type_name()));
    return *v;
  }
  const std::string& where() const { return where_; }
  /// Names the test in every later message: "r.json: tests[3] 'sort'".
  void name_test(const std::string& name) { where_ += " '" + printable(name) + "'"; }

 private:
  const Json* find(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  uint64_t bytes_of(const Json& v, const char* key) const {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > kMaxBytes)
      throw wrong(key, fmt::format("is {}: should be a whole number of bytes from 0 to {}", quoted(v), kMaxBytes));
    return v.get<uint64_t>();
  }
  double real_of(const Json& v, const char* key, double lo, double hi) const {
    double d = v.is_number() ? v.get<double>() : NAN;
    if (!std::isfinite(d) || d < lo || d > hi)
      throw wrong(key, fmt::format("is {}: should be a number from {:g} to {:g}", quoted(v), lo, hi));
    return d;
  }
  Error missing(const char* key) const {
    return Error(Category::bad_input, fmt::format("{}: field '{}' is missing; is this a memrun report (memrun-report/1)? "
                                                  "Write it again with --json",
                                                  where_, key));
  }
  Error wrong(const char* key, const std::string& what) const {
    return Error(Category::bad_input, fmt::format("{}: field '{}' {}; is this a memrun report that was edited by hand? "
                                                  "Write it again with --json",
                                                  where_, key, what));
  }

  const Json& j_;
  std::string where_;
};

Json breakdown_json(const cgroup::Breakdown& b) {
  return {{"anon", b.anon}, {"file", b.file}, {"kernel", b.kernel}, {"shmem", b.shmem}, {"sock", b.sock}};
}

cgroup::Breakdown breakdown_from(const Fields& f) {
  cgroup::Breakdown b;
  b.anon = f.bytes("anon");
  b.file = f.bytes("file");
  b.kernel = f.bytes("kernel");
  b.shmem = f.bytes("shmem");
  b.sock = f.bytes("sock");
  return b;
}

// The explanation (verdict/explanation.h): where a test's memory went, by
// a second run under a profiler. Its strings are read back through the
// one rule for data memrun did not write (utf8.h): no control character
// reaches a terminal or markup.
Json frame_json(const StackFrame& f) {
  return {{"function", f.function}, {"file", f.file}, {"line", f.line}, {"native", f.native}};
}

std::string shown(const Fields& f, const char* key) { return escape_controls(f.text(key)); }

StackFrame frame_from(const Fields& f) {
  f.require("line");
  f.require("native");
  return {shown(f, "function"), shown(f, "file"), static_cast<int>(f.integer("line", 0, INT_MAX)), f.get<bool>("native")};
}

Json site_json(const AllocationSite& s) {
  Json stack = Json::array();
  for (const auto& frame : s.stack) stack.push_back(frame_json(frame));
  return {{"bytes", s.bytes},
          {"allocations", s.allocations},
          {"share", s.share},
          {"process", s.process},
          {"where", s.where},
          {"code", s.code},
          {"served_from", s.served_from ? Json(*s.served_from) : Json()},
          {"stack", stack}};
}

// A frame's index past its stack would be read past the stack's end.
AllocationSite site_from(const Fields& f) {
  AllocationSite s;
  for (const char* key : {"bytes", "allocations", "share", "where", "stack"}) f.require(key);
  s.bytes = f.bytes("bytes");
  s.allocations = f.bytes("allocations");
  s.share = f.real("share", 0, 1e6);  // above 1 when the profiler counts memory never touched
  s.process = shown(f, "process");
  const Json& stack = f.list("stack");
  for (size_t i = 0; i < stack.size(); ++i)
    s.stack.push_back(frame_from(Fields(stack[i], fmt::format("{}.stack[{}]", f.where(), i))));
  s.where = static_cast<size_t>(f.integer("where", 0, s.stack.empty() ? 0 : static_cast<int64_t>(s.stack.size()) - 1));
  s.code = escape_controls(f.get<std::string>("code"));  // from memrun 0.1's tenth round on: absent before
  if (f.has("served_from") && !f.raw("served_from").is_null())
    s.served_from = static_cast<size_t>(f.integer("served_from", 0, static_cast<int64_t>(s.stack.size()) - 1));
  return s;
}

Json process_json(const ProcessSeen& p) {
  return {{"pid", p.pid}, {"command", p.command}, {"peak_private_bytes", p.peak_private}, {"profiled_by", p.profiled_by}};
}

ProcessSeen process_from(const Fields& f) {
  f.require("pid");
  return {static_cast<int>(f.integer("pid", 0, INT_MAX)), shown(f, "command"), f.required_bytes("peak_private_bytes"),
          shown(f, "profiled_by")};
}

Json unseen_json(const Unseen& u) {
  return {{"total_bytes", u.total},
          {"file_bytes", u.file},
          {"kernel_bytes", u.kernel},
          {"shmem_bytes", u.shmem},
          {"other_processes_bytes", u.other_processes},
          {"anon_unprofiled_bytes", u.anon_unprofiled}};
}

Unseen unseen_from(const Fields& f) {
  return {f.required_bytes("total_bytes"),          f.required_bytes("file_bytes"),
          f.required_bytes("kernel_bytes"),         f.required_bytes("shmem_bytes"),
          f.required_bytes("other_processes_bytes"), f.required_bytes("anon_unprofiled_bytes")};
}

Json explanation_json(const Explanation& e) {
  Json sites = Json::array(), processes = Json::array();
  for (const auto& s : e.sites) sites.push_back(site_json(s));
  for (const auto& p : e.processes) processes.push_back(process_json(p));
  return {
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
        {"at_peak", breakdown_json(e.at_peak)}}},
      {"profiled_peak_bytes", e.profiled_peak},
      {"unseen", unseen_json(e.unseen)},
      {"summary", e.summary},
      {"sites", sites},
      {"processes", processes},
  };
}

Explanation explanation_from(const Fields& f) {
  Explanation e;
  e.status = shown(f, "status");
  e.message = shown(f, "message");
  e.why = shown(f, "why");
  e.profiler = shown(f, "profiler");
  e.command = shown(f, "command");
  f.require("explained");
  Fields explained = f.object("explained");
  e.explained_peak = explained.required_bytes("peak_bytes");
  explained.require("duration_s");
  e.explained_duration_s = explained.seconds("duration_s");
  f.require("profiled_run");
  Fields run = f.object("profiled_run");
  e.limit = run.required_bytes("limit_bytes");
  e.outcome = shown(run, "outcome");
  run.require("exit_code");
  e.exit_code = static_cast<int>(run.integer("exit_code", -1, 255));  // -1: it did not exit
  e.kernel_peak = run.required_bytes("peak_bytes");
  run.require("duration_s");
  e.duration_s = run.seconds("duration_s");
  run.require("at_peak");
  e.at_peak = breakdown_from(run.object("at_peak"));
  e.profiled_peak = f.required_bytes("profiled_peak_bytes");
  f.require("unseen");
  e.unseen = unseen_from(f.object("unseen"));
  e.summary = shown(f, "summary");
  for (const char* key : {"sites", "processes"}) f.require(key);
  const Json& sites = f.list("sites");
  for (size_t i = 0; i < sites.size(); ++i)
    e.sites.push_back(site_from(Fields(sites[i], fmt::format("{}.sites[{}]", f.where(), i))));
  const Json& processes = f.list("processes");
  for (size_t i = 0; i < processes.size(); ++i)
    e.processes.push_back(process_from(Fields(processes[i], fmt::format("{}.processes[{}]", f.where(), i))));
  return e;
}

// The comparison with a baseline (memrun-compare/1, report/comparison.h):
// the report's "comparison", and `memrun compare --json`'s file.
// What decided a compared test (null for the rest): the rule, the
// max_increase it applied, the larger side's spread, and why in words.
Json threshold_json(const TestChange& t) {
  if (!compared(t.change)) return nullptr;
  const Threshold& h = t.threshold;
  return {{"rule", to_string(h.rule)}, {"max_increase", {{"percent", h.percent}, {"bytes", h.bytes}}},
          {"spread_bytes", h.spread}, {"why", h.why}};
}


// The comparison's reading: `where` names it ("r.json: comparison").
Error not_a_comparison(const std::string& where, const std::string& why) {
  return Error(Category::bad_input, where + ": " + why + "; is this a comparison memrun wrote (memrun-compare/1)?");
}

Threshold threshold_from(const Fields& h, const std::string& where, const std::string& name) {
  Threshold out;
  std::string rule = h.text("rule");
  bool known = false;
  for (ThresholdRule r : {ThresholdRule::spread, ThresholdRule::fixed, ThresholdRule::spec, ThresholdRule::flag})
    if (rule == to_string(r)) out.rule = r, known = true;
  if (!known)
    throw not_a_comparison(where, "test '" + printable(name) + "' has the threshold rule " + printable(rule) +
                                      ", not one memrun writes");
  h.require("max_increase");
  Fields increase = h.object("max_increase");
  increase.require("percent");
  out.percent = increase.real("percent", 0, 1000);  // as specs allow
  out.bytes = increase.required_bytes("bytes");
  out.spread = h.required_bytes("spread_bytes");
  out.why = h.text("why");
  return out;
}

// A side's [lowest, highest], null where it was not measured (0, 0).
std::pair<uint64_t, uint64_t> range_from(const Fields& e, const char* key) {
  e.present(key);
  std::vector<uint64_t> range = e.byte_list(key);
  if (range.empty()) return {0, 0};
  if (range.size() != 2) throw Error(Category::bad_input, e.where() + ": field '" + key + "' should be [lowest, highest]");
  return {range[0], range[1]};
}

// Long: one line per field of a test's entry, as comparison_json writes them.
TestChange change_from(const Fields& e, const std::string& where) {
  TestChange t;
  t.name = e.text("name");
  t.spec = e.text("spec");
  e.require("line");
  t.line = static_cast<int>(e.integer("line", 0, INT_MAX));
  std::string change = e.text("change");
  bool known = false;
  for (Change k : {Change::regressed, Change::improved, Change::unchanged, Change::added, Change::gone,
                   Change::not_comparable, Change::failed_in_head, Change::failed_in_base, Change::failed_in_both,
                   Change::skipped})
    if (change == to_string(k)) t.change = k, known = true;
  if (!known)
    throw not_a_comparison(where, "test '" + printable(t.name) + "' has the change " + printable(change) +
                                      ", not one memrun writes");
  t.figure = e.text("figure");
  t.block = e.get<std::string>("block");
  for (const char* key : {"base_bytes", "head_bytes"}) e.present(key);  // null where not measured
  t.base = e.bytes("base_bytes");
  t.head = e.bytes("head_bytes");
  std::tie(t.base_lo, t.base_hi) = range_from(e, "base_range_bytes");
  std::tie(t.head_lo, t.head_hi) = range_from(e, "head_range_bytes");
  t.threshold.allowed = e.required_bytes("allowed_increase_bytes");
  if (!e.raw("threshold").is_null()) {  // absent before issue 49
    uint64_t allowed = t.threshold.allowed;
    t.threshold = threshold_from(e.object("threshold"), where, t.name);
    t.threshold.allowed = allowed;
  }
  for (const char* key : {"base_runs", "head_runs"}) e.require(key);
  t.base_runs = static_cast<size_t>(e.integer("base_runs", 0, INT_MAX));
  t.head_runs = static_cast<size_t>(e.integer("head_runs", 0, INT_MAX));
  t.base_outcomes = e.text("base_outcomes");
  t.head_outcomes = e.text("head_outcomes");
  t.reason = e.text("reason");
  t.note = e.text("note");
  const Json& lines = e.list("where");  // absent before explain
  for (size_t i = 0; i < lines.size(); ++i) {
    Fields w(lines[i], fmt::format("{}.where[{}]", e.where(), i));
    t.where.push_back({w.text("where"), w.required_bytes("base_bytes"), w.required_bytes("head_bytes")});
  }
  return t;
}

Json victims_json(const std::vector<OomKill>& kills) {
  Json out = Json::array();
  for (const auto& k : kills)
    out.push_back({{"pid", k.pid}, {"name", storable(k.name)}, {"anon_rss_bytes", k.anon_rss},
                   {"file_rss_bytes", k.file_rss}, {"shmem_rss_bytes", k.shmem_rss},
                   {"oom_memcg", null_or(k.oom_memcg.empty(), storable(k.oom_memcg))},
                   {"limit_bytes", null_or(k.limit_bytes == 0, k.limit_bytes)}});
  return out;
}

std::vector<OomKill> victims_from(const Fields& t) {
  std::vector<OomKill> out;
  const Json& list = t.raw("oom_victims");
  if (list.is_null()) return out;
  if (!list.is_array()) throw Error(Category::bad_input, t.where() + ": field 'oom_victims' should be a list");
  for (size_t i = 0; i < list.size(); ++i) {
    Fields k(list[i], fmt::format("{}.oom_victims[{}]", t.where(), i));
    out.push_back({static_cast<int>(k.integer("pid", 0, INT_MAX)), k.get<std::string>("name"),
                   k.bytes("anon_rss_bytes"), k.bytes("file_rss_bytes"), k.bytes("shmem_rss_bytes"),
                   k.get<std::string>("oom_memcg", ""), k.raw("limit_bytes").is_null() ? 0 : k.bytes("limit_bytes")});
  }
  return out;
}

// The samples, plus the kernel's exact peak as a point of its own (at the
// highest sample's time), so that a spike between two samples still shows.
Json timeline_json(const TestRecord& r) {
  const Timeline& tl = r.observed.timeline;
  return {{"interval_s", tl.interval_s * tl.stride},
          {"stride", tl.stride},
          {"skipped", tl.skipped},
          {"t_s", tl.t_s},
          {"current", tl.current},
          {"anon", tl.anon},
          {"file", tl.file},
          {"kernel_peak", {{"t_s", tl.t_s.empty() ? r.observed.duration_s : tl.peak_t_s}, {"bytes", r.verdict.peak}}}};
}

Timeline timeline_from(const Fields& tl) {
  Timeline out;
  out.stride = static_cast<int>(tl.integer("stride", 1, INT_MAX, 1));
  out.skipped = static_cast<int>(tl.integer("skipped", 0, INT_MAX));
  // Written times the stride (the points' spacing); a power of two, so the
  // division is exact.
  out.interval_s = tl.seconds("interval_s") / out.stride;
  out.t_s = tl.seconds_list("t_s");
  out.current = tl.byte_list("current");
  out.anon = tl.byte_list("anon");
  out.file = tl.byte_list("file");
  // Without a point the kernel's peak is drawn at the test's end; the
  // timeline's own peak time is then 0 (no sample was taken).
  if (!out.t_s.empty()) out.peak_t_s = tl.object("kernel_peak").seconds("t_s");
  // One point is one entry of each array: the plots index them together.
  size_t n = out.t_s.size();
  if (out.current.size() != n || out.anon.size() != n || out.file.size() != n)
    throw Error(Category::bad_input, fmt::format("{}: the arrays t_s, current, anon and file should be as long as each other, "
                                                 "are {}, {}, {} and {} long; write the report again with --json",
                                                 tl.where(), n, out.current.size(), out.anon.size(), out.file.size()));
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
      {"memrun_path", info.memrun_path},
      {"host_cgroups", info.host_cgroups},
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
      {"summary", {{"total", tally.total}, {"passed", tally.passed}, {"failed", tally.failed()}, {"skipped", tally.skipped}, {"disabled", tally.disabled}}},
      {"cleanup_error", null_or(info.cleanup_error.empty(), info.cleanup_error)},
  };
  if (!info.merged_from.empty()) head["merged_from"] = info.merged_from;
  Json read = Json::object();
  for (const auto& [name, value] : info.spec_environment) read[name] = value ? Json(*value) : Json(nullptr);
  head["spec_environment"] = read;
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
  // What every memrun-report/1 has had since its first version: without
  // it, a file is not a report of a run (and not a base to compare with).
  info.memrun_version = f.text("memrun_version");
  info.run_id = f.text("run_id");
  info.memrun_path = f.get<std::string>("memrun_path");
  info.host_cgroups = f.get<bool>("host_cgroups");
  const Json& read = f.raw("spec_environment");
  if (!read.is_null() && !read.is_object())
    throw Error(Category::bad_input, f.where() + ": field 'spec_environment' should be an object of names and values");
  if (read.is_object())
    for (const auto& [name, value] : read.items()) {
      if (!value.is_null() && !value.is_string())
        throw Error(Category::bad_input, f.where() + ": field 'spec_environment' should hold a string or null for " +
                                             quoted(Json(name)));
      info.spec_environment[name] = value.is_null() ? std::nullopt : std::optional<std::string>(value.get<std::string>());
    }
  info.run_dir = f.get<std::string>("run_dir");
  info.cwd = f.get<std::string>("cwd", ".");
  info.memrun_max_rss = f.bytes("memrun_max_rss_bytes");
  info.started = f.time("started", false);
  info.ended = f.time("ended", false);
  info.interrupted_by = f.get<std::string>("interrupted_by");
  f.require("host");
  Fields host = f.object("host");
  info.kernel = host.get<std::string>("kernel");
  info.backend = host.text("backend");
  info.cgroup_mode = host.text("cgroup_mode");
  info.cgroup_path = host.get<std::string>("cgroup_path");
  Fields shard = f.object("shard");
  info.shard_index = static_cast<int>(shard.integer("index", 0, kMaxShards));
  info.shard_count = static_cast<int>(shard.integer("count", 0, kMaxShards));
  if (info.shard_index > info.shard_count || (info.shard_count > 0 && info.shard_index == 0))
    throw Error(Category::bad_input, fmt::format("{}: shard {}/{} is not a shard (1 <= K <= N)", f.where(), info.shard_index,
                                                 info.shard_count));
  info.jobs = static_cast<int>(f.integer("jobs", 1, INT_MAX, 1));
  if (!f.raw("memory_budget_bytes").is_null()) info.budget = f.bytes("memory_budget_bytes");
  info.cleanup_error = f.get<std::string>("cleanup_error");
  info.merged_from = f.get<std::vector<std::string>>("merged_from");
  Fields e = f.object("environment");
  info.environment.thp = e.get<std::string>("thp");
  info.environment.swap_bytes = e.bytes("swap_bytes");
  info.environment.memory_bytes = e.bytes("memory_bytes");
  info.environment.cpus = static_cast<int>(e.integer("cpus", 0, INT_MAX));
  info.environment.allocator_env = e.get<std::map<std::string, std::string>>("allocator_env");
  return info;
}

Json blocks_json(const std::vector<BlockFigures>& blocks) {
  Json out = Json::array();
  for (const auto& b : blocks)
    out.push_back({{"name", b.name}, {"peak_bytes", b.peak}, {"retained_bytes", b.retained},
                   {"baseline_bytes", b.baseline}, {"source", b.source}});
  return out;
}

std::vector<BlockFigures> blocks_from(const Fields& f) {
  std::vector<BlockFigures> out;
  const Json& list = f.raw("blocks");
  if (list.is_null()) return out;
  if (!list.is_array()) throw Error(Category::bad_input, f.where() + ": field 'blocks' should be a list");
  for (size_t i = 0; i < list.size(); ++i) {
    Fields b(list[i], fmt::format("{}.blocks[{}]", f.where(), i));
    out.push_back({b.text("name"), b.required_bytes("peak_bytes"), b.bytes("retained_bytes"),
                   b.bytes("baseline_bytes"), b.get<std::string>("source")});
  }
  return out;
}

Json runs_json(const std::vector<RunFigures>& runs) {
  Json out = Json::array();
  for (const auto& r : runs) {
    Json run = {{"peak_bytes", r.peak}, {"working_set_peak_bytes", r.working_set_peak},
                {"outcome", to_string(r.outcome)}, {"passed", r.passed}, {"duration_s", r.duration_s},
                {"figures_hold", r.figures_hold}};
    if (!r.blocks.empty()) run["blocks"] = blocks_json(r.blocks);
    out.push_back(std::move(run));
  }
  return out;
}

// A report written before runs were recorded has one run: the record's own.
std::vector<RunFigures> runs_from(const Fields& t, const Verdict& v, const Observation& o) {
  const Json& list = t.raw("runs");
  if (!list.is_null() && !list.is_array()) throw Error(Category::bad_input, t.where() + ": field 'runs' should be a list");
  if (list.is_null() || list.empty())
    return {{v.peak, v.working_set_peak, v.outcome, v.passed, o.duration_s, v.figures_hold, o.blocks}};
  std::vector<RunFigures> out;
  for (size_t i = 0; i < list.size(); ++i) {
    Fields r(list[i], fmt::format("{}.runs[{}]", t.where(), i));
    auto outcome = outcome_named(r.text("outcome"));
    if (!outcome) throw Error(Category::bad_input, r.where() + ": field 'outcome' is not an outcome memrun writes");
    r.require("passed");
    out.push_back({r.required_bytes("peak_bytes"), r.bytes("working_set_peak_bytes"), *outcome, r.get<bool>("passed"),
                   r.seconds("duration_s"), r.get<bool>("figures_hold", v.figures_hold), blocks_from(r)});
  }
  return out;
}

// A record is one thing: its verdict is that of one of its runs (the
// first that did not pass, else the highest peak: combine_runs), and it
// passed only if every run did; an `oom` outcome is a kill the kernel
// counted. A record that says otherwise was not written by memrun (a
// hand-made head that says `oom` while its run says pass would compare as
// "improved"): refused, naming the fields.
void check_runs(const Fields& f, const TestRecord& r) {
  const Verdict& v = r.verdict;
  const cgroup::Final& k = r.observed.kernel;
  size_t chosen = 0;
  bool all_passed = true;
  for (size_t i = 0; i < r.runs.size(); ++i) {
    const RunFigures& run = r.runs[i], &best = r.runs[chosen];
    all_passed = all_passed && run.passed;
    if ((!run.passed && best.passed) || (run.passed == best.passed && best.passed && run.peak > best.peak)) chosen = i;
  }
  const RunFigures& run = r.runs[chosen];
  std::vector<std::string> wrong;
  if (v.passed != all_passed)
    wrong.push_back(fmt::format("'passed' is {} while {}", v.passed, all_passed ? "every run passed" : "a run did not pass"));
  if (v.outcome != run.outcome)
    wrong.push_back(fmt::format("'outcome' is {} while runs[{}] says {}", to_string(v.outcome), chosen, to_string(run.outcome)));
  if (v.peak != run.peak)
    wrong.push_back(fmt::format("'peak_bytes' is {} while runs[{}] says {}", v.peak, chosen, run.peak));
  if (v.outcome == Outcome::oom && k.oom_kills == 0 && k.oom_group_kills == 0)
    wrong.push_back("'outcome' is oom while 'oom_kills' and 'oom_group_kills' count no kill");
  // What decide() fails as a defeated limit, whose figures do not hold.
  if (v.figures_hold) {
    if (k.escaped > 0) wrong.push_back("'figures_hold' is true while 'escaped_processes' counts processes that left");
    if (k.limit_written) wrong.push_back("'figures_hold' is true while 'limit_written' says the limit was written");
    if (k.peak_reset) wrong.push_back("'figures_hold' is true while 'peak_reset' says the peak was reset");
    if (r.test.requested_limit && above_limit(v.peak, r.test.requested_limit))
      wrong.push_back("'figures_hold' is true while 'peak_bytes' is above 'requested_limit_bytes'");
    if (r.test.requested_limit && above_limit(r.observed.sampled_peak, r.test.requested_limit))
      wrong.push_back("'figures_hold' is true while 'sampled_peak_bytes' is above 'requested_limit_bytes'");
  }
  if (v.passed && v.outcome != Outcome::skipped && r.observed.ending == Ending::not_started)
    wrong.push_back("'passed' is true while 'ending' says the test never started");
  if (wrong.empty()) return;
  std::string what;
  for (const auto& w : wrong) what += (what.empty() ? "" : "; ") + w;
  throw Error(Category::bad_input, f.where() + ": the record contradicts itself: " + what +
                                       " (memrun writes the verdict of one of its runs); is this a report memrun wrote?");
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
// Long: one line per field of the report's schema.
Json to_json(const TestRecord& r) {
  const TestIdentity& t = r.test;
  const Observation& o = r.observed;
  const Verdict& v = r.verdict;
  const cgroup::Final& k = o.kernel;
  Json j = {
      {"name", t.name},
      {"spec", t.spec},
      {"line", t.line},
      {"command", t.command},
      {"env", t.env},
      {"tags", t.tags},
      {"outcome", to_string(v.outcome)},
      {"expected", t.expected},
      {"passed", v.passed},
      {"figures_hold", v.figures_hold},
      {"disabled", v.disabled},
      {"reason", v.reason},
      {"requested_limit_bytes", t.requested_limit},
      {"swap_limit_bytes", t.swap_limit},
      {"limit_bytes", v.limit},
      {"peak_bytes", v.peak},
      {"peak_source", v.peak_sampled ? "sampled" : "kernel"},
      {"working_set_peak_bytes", v.working_set_peak},
      {"page_cache_bytes", v.page_cache},
      {"headroom_bytes", v.headroom},
      {"headroom_pct", v.headroom_pct},  // whole: outputs for people round it
      {"headroom_basis", to_string(v.headroom_basis)},
      {"swap_peak_bytes", v.swap_peak},
      {"swap_bytes", v.swap_at_end},
      {"limit_reached", k.limit_reached},
      {"limit_at_end_bytes", null_or(k.limit_at_end == UINT64_MAX, k.limit_at_end)},
      {"limit_written", k.limit_written},
      {"peak_reset", k.peak_reset},
      {"sampled_peak_bytes", o.sampled_peak},
      {"sampled_limit_bytes", null_or(o.sampled_limit == 0, o.sampled_limit)},
      {"sampled_lowest_limit_bytes", null_or(o.sampled_lowest_limit == UINT64_MAX, o.sampled_lowest_limit)},
      {"escaped_processes", k.escaped},
      {"cleanup_error", null_or(o.cleanup_error.empty(), o.cleanup_error)},
      // Read after every process of the group was killed: what is still
      // charged as shmem lives in a tmpfs file or a shared memory segment.
      {"tmpfs_left_bytes", k.breakdown.shmem},
      {"oom_kills", k.oom_kills},
      {"oom_group_kills", k.oom_group_kills},
      {"oom_at_limit", null_or(!k.oom_at_limit, k.oom_at_limit.value_or(false))},
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
      {"memory_stat", k.raw.stat},
      {"events", k.raw.events},
      {"pressure_us", k.raw.pressure_us},
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
      {"timeout_s", t.timeout_s},
      {"measured", t.measured},
      {"blocks", blocks_json(o.blocks)},
      // The rest of the observation, so that a record read back is the
      // record written (the CI outputs and --baseline read the spool).
      {"ending", to_string(o.ending)},
      {"start_error", null_or(o.start_error.empty(), o.start_error)},
      {"escaped_to", null_or(o.escaped_to.empty(), o.escaped_to)},
      {"log_error", null_or(o.log_error.empty(), o.log_error)},
      {"sampled_working_set_bytes", o.sampled_working_set},
      {"reclaimable_at_sampled_peak_bytes", o.reclaimable_at_sampled_peak},
      {"sampled_swap_peak_bytes", o.sampled_swap_peak},
      {"thrash", o.ending != Ending::thrashed && o.thrash_refaulted == 0 && o.thrash_window_s == 0 &&
                         o.thrash_stalled_s == 0
                     ? Json(nullptr)
                     : Json({{"refaulted_bytes", o.thrash_refaulted},
                             {"window_s", o.thrash_window_s},
                             {"stalled_s", o.thrash_stalled_s}})},
      {"matched", {{"pass", o.pass_matched}, {"fail", o.fail_matched}, {"skip", o.skip_matched}}},
      {"tool_said", null_or(o.tool_said.empty(), o.tool_said)},
      {"kernel",
       {{"peak_bytes", null_or(!k.peak, k.peak.value_or(0))},
        {"effective_limit_bytes", null_or(k.effective_limit == UINT64_MAX, k.effective_limit)},
        {"reclaimable_file_bytes", k.reclaimable_file},
        {"swap_peak_bytes", null_or(!k.swap_peak, k.swap_peak.value_or(0))},
        {"memory_and_swap_peak_bytes", null_or(!k.memory_and_swap_peak, k.memory_and_swap_peak.value_or(0))},
        {"swap_at_end_bytes", k.swap_at_end},
        {"refused_forks", k.refused_forks},
        {"refused_huge_pages", k.refused_huge_pages},
        {"high_events", k.high_events},
        {"uncharged_sub_group", null_or(k.uncharged_sub_group.empty(), k.uncharged_sub_group)}}},
  };
  // Only where a test was explained: other reports stay as they were.
  if (r.explanation) j["explanation"] = explanation_json(*r.explanation);
  return j;
}

// Long: one line per field of the report's schema, as to_json.
TestRecord record_from_json(const Json& entry, const std::string& where) {
  Fields f(entry, where);
  TestRecord r;
  TestIdentity& t = r.test;
  // Required: what names the test, and what a verdict and a comparison
  // stand on (in every memrun-report/1 since its first version).
  t.name = storable(f.text("name"));  // data read back: kept as names are (shown through escape_controls)
  f.name_test(t.name);
  t.spec = f.text("spec");
  for (const char* key : {"line", "outcome", "passed", "requested_limit_bytes", "limit_bytes", "peak_bytes", "duration_s"})
    f.require(key);
  t.line = static_cast<int>(f.integer("line", 0, INT_MAX));
  t.command = f.get<std::string>("command");
  t.env = f.get<std::map<std::string, std::string>>("env");
  t.tags = f.get<std::vector<std::string>>("tags");
  t.expected = f.get<std::string>("expected");
  t.requested_limit = f.bytes("requested_limit_bytes");
  t.swap_limit = f.bytes("swap_limit_bytes");
  if (!f.raw("memory_high_bytes").is_null()) t.memory_high = f.bytes("memory_high_bytes");
  t.stdout_path = f.get<std::string>("stdout");
  t.stderr_path = f.get<std::string>("stderr");

  Verdict& v = r.verdict;
  auto outcome = outcome_named(f.get<std::string>("outcome"));
  if (!outcome) throw Error(Category::bad_input, f.where() + ": field 'outcome' is not an outcome memrun writes (pass, fail, oom, timeout, thrash, error, interrupted, skipped)");
  v.outcome = *outcome;
  v.passed = f.get<bool>("passed");
  v.disabled = f.get<bool>("disabled", false);
  v.reason = f.get<std::string>("reason");
  // A report from before the field said so only in its reason (and its
  // runs, read after, take the record's word).
  v.figures_hold = f.get<bool>("figures_hold", v.reason.rfind("the test defeated its memory limit", 0) != 0 &&
                                                   v.reason.find(": the limit that killed was not the one memrun set") ==
                                                       std::string::npos);
  v.limit = f.bytes("limit_bytes");
  v.peak = f.bytes("peak_bytes");
  v.peak_sampled = f.get<std::string>("peak_source") == "sampled";
  v.working_set_peak = f.bytes("working_set_peak_bytes");
  v.page_cache = f.bytes("page_cache_bytes");
  v.headroom = f.integer("headroom_bytes", -static_cast<int64_t>(kMaxBytes), static_cast<int64_t>(kMaxBytes));
  v.headroom_pct = f.real("headroom_pct", -1e30, 100);  // headroom is at most the allowance
  auto basis = headroom_basis_named(f.get<std::string>("headroom_basis", "peak"));
  if (!basis) throw Error(Category::bad_input, f.where() + ": field 'headroom_basis' should be \"peak\" or \"working_set\"");
  v.headroom_basis = *basis;
  v.swap_peak = f.bytes("swap_peak_bytes");
  v.swap_at_end = f.bytes("swap_bytes");

  Observation& o = r.observed;
  cgroup::Final& k = o.kernel;
  if (f.has("ending")) {
    auto ending = ending_named(f.get<std::string>("ending"));
    if (!ending) throw Error(Category::bad_input, f.where() + ": field 'ending' is not an ending memrun writes");
    o.ending = *ending;
  } else {
    o.ending = ending_of(v.outcome);  // a report from before the field
  }
  k.limit_reached = f.get<bool>("limit_reached");
  k.limit_at_end = f.bytes("limit_at_end_bytes", UINT64_MAX);
  k.limit_written = f.get<bool>("limit_written");
  k.peak_reset = f.has("peak_reset") && f.get<bool>("peak_reset");  // (reports before the field)
  o.sampled_peak = f.bytes("sampled_peak_bytes");
  o.sampled_limit = f.bytes("sampled_limit_bytes");
  o.sampled_lowest_limit = f.bytes("sampled_lowest_limit_bytes", UINT64_MAX);
  k.escaped = f.bytes("escaped_processes");
  k.oom_kills = f.bytes("oom_kills");
  k.oom_group_kills = f.bytes("oom_group_kills");
  if (!f.raw("oom_at_limit").is_null()) k.oom_at_limit = f.get<bool>("oom_at_limit");
  k.breakdown = breakdown_from(f.object("breakdown"));
  k.raw.stat = f.counters("memory_stat");
  k.raw.events = f.counters("events");
  k.raw.pressure_us = f.counters("pressure_us");
  o.cleanup_error = f.get<std::string>("cleanup_error");
  // An exit status is 0..255; a signal number 1..64 (SIGRTMAX), 128 allows for more.
  o.exit_code = static_cast<int>(f.integer("exit_code", 0, 255, -1));
  o.signal = static_cast<int>(f.integer("signal", 0, 128));
  o.duration_s = f.seconds("duration_s");
  o.cpu_user_s = f.seconds("cpu_user_s");
  o.cpu_system_s = f.seconds("cpu_system_s");
  o.samples = static_cast<int>(f.integer("samples", 0, INT_MAX));
  o.placement = f.get<std::string>("placement");
  o.at_peak = breakdown_from(f.object("breakdown_at_peak"));
  o.timeline = timeline_from(f.object("timeline"));
  o.oom_victims = victims_from(f);
  o.stdout_bytes = f.bytes("stdout_bytes");
  o.stderr_bytes = f.bytes("stderr_bytes");
  o.log_discarded_bytes = f.bytes("log_discarded_bytes");
  o.started = f.time("started", true);
  o.ended = f.time("ended", true);
  o.log_tail = f.get<std::string>("log_tail");
  Fields increase = f.object("max_increase");
  if (!f.raw("max_increase").is_null())
    t.max_increase = std::pair{increase.real("percent", 0, 1000), increase.bytes("bytes")};  // as specs allow
  o.blocks = blocks_from(f);  // before the runs: a report with none takes the record's
  r.runs = runs_from(f, v, o);
  t.inputs = f.get<std::vector<std::string>>("inputs");
  t.timeout_s = f.seconds("timeout_s");
  t.measured = f.get<std::string>("measured", "process");
  if (t.measured != "process" && t.measured != "forked_case")
    throw Error(Category::bad_input, f.where() + ": field 'measured' should be \"process\" or \"forked_case\"");
  o.start_error = f.get<std::string>("start_error");
  o.escaped_to = f.get<std::string>("escaped_to");
  o.log_error = f.get<std::string>("log_error");
  o.sampled_working_set = f.bytes("sampled_working_set_bytes");
  o.reclaimable_at_sampled_peak = f.bytes("reclaimable_at_sampled_peak_bytes");
  o.sampled_swap_peak = f.bytes("sampled_swap_peak_bytes");
  Fields thrash = f.object("thrash");
  o.thrash_refaulted = thrash.bytes("refaulted_bytes");
  o.thrash_window_s = thrash.seconds("window_s");
  o.thrash_stalled_s = thrash.seconds("stalled_s");
  Fields matched = f.object("matched");
  o.pass_matched = matched.get<bool>("pass");
  o.fail_matched = matched.get<bool>("fail");
  o.skip_matched = matched.get<bool>("skip");
  if (!f.raw("tool_said").is_null()) o.tool_said = f.get<std::string>("tool_said");
  if (f.has("kernel")) {
    Fields kf = f.object("kernel");
    if (!kf.raw("peak_bytes").is_null()) k.peak = kf.bytes("peak_bytes");
    k.effective_limit = kf.raw("effective_limit_bytes").is_null() ? UINT64_MAX : kf.bytes("effective_limit_bytes");
    k.reclaimable_file = kf.bytes("reclaimable_file_bytes");
    if (!kf.raw("swap_peak_bytes").is_null()) k.swap_peak = kf.bytes("swap_peak_bytes");
    if (!kf.raw("memory_and_swap_peak_bytes").is_null()) k.memory_and_swap_peak = kf.bytes("memory_and_swap_peak_bytes");
    k.swap_at_end = kf.bytes("swap_at_end_bytes");
    k.refused_forks = kf.bytes("refused_forks");
    k.refused_huge_pages = kf.bytes("refused_huge_pages");
    k.high_events = kf.bytes("high_events");
    k.uncharged_sub_group = kf.get<std::string>("uncharged_sub_group");
  } else {  // a report from before the field: what the verdict says of them
    if (!v.peak_sampled) k.peak = v.peak;
    k.reclaimable_file = v.page_cache;
    k.effective_limit = v.limit;
    k.swap_at_end = v.swap_at_end;
  }
  check_runs(f, r);
  if (!f.raw("explanation").is_null()) r.explanation = explanation_from(f.object("explanation"));
  return r;
}

std::string comparison_json(const Comparison& c) {
  nlohmann::ordered_json j = {
      {"schema", "memrun-compare/1"},
      {"base", c.base_name},
      {"head", c.head_name},
      {"summary",
       {{"regressed", c.count(Change::regressed)}, {"improved", c.count(Change::improved)},
        {"unchanged", c.count(Change::unchanged)}, {"new", c.count(Change::added)}, {"gone", c.count(Change::gone)},
        {"not_comparable", c.count(Change::not_comparable)}, {"failed_in_head", c.count(Change::failed_in_head)},
        {"failed_in_base", c.count(Change::failed_in_base)}, {"failed_in_both", c.count(Change::failed_in_both)},
        {"skipped", c.count(Change::skipped)}}},
      {"warnings", c.warnings},
      {"tests", nlohmann::ordered_json::array()},
  };
  for (const auto& t : c.tests) {
    // Figures of a failed or skipped side are where it stopped, not a
    // measurement: null, with its outcomes beside.
    bool measured = !outcome_change(t.change);
    auto figure = [&](const nlohmann::ordered_json& value) { return measured ? value : nlohmann::ordered_json(nullptr); };
    j["tests"].push_back({{"name", t.name}, {"spec", t.spec}, {"line", t.line}, {"block", t.block},
                          {"change", to_string(t.change)}, {"figure", t.figure}, {"base_bytes", figure(t.base)}, {"head_bytes", figure(t.head)},
                          {"base_range_bytes", figure({t.base_lo, t.base_hi})},
                          {"head_range_bytes", figure({t.head_lo, t.head_hi})}, {"change_bytes", figure(t.delta())},
                          {"change_pct", figure(std::round(t.pct() * 100) / 100)},
                          {"allowed_increase_bytes", t.threshold.allowed}, {"threshold", threshold_json(t)},
                          {"base_runs", t.base_runs},
                          {"head_runs", t.head_runs}, {"base_outcomes", t.base_outcomes},
                          {"head_outcomes", t.head_outcomes}, {"reason", t.reason}, {"note", t.note}});
    auto& where = j["tests"].back()["where"] = nlohmann::ordered_json::array();
    for (const auto& w : t.where)
      where.push_back({{"where", w.where}, {"base_bytes", w.base}, {"head_bytes", w.head}});
  }
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Comparison comparison_from_json(const Json& j, const std::string& where) {
  if (!j.is_object() || j.value("schema", "") != "memrun-compare/1")
    throw not_a_comparison(where, "not a memrun-compare/1 object");
  Fields f(j, where);
  Comparison c;
  c.base_name = f.text("base");
  c.head_name = f.text("head");
  c.warnings = f.get<std::vector<std::string>>("warnings");
  f.require("tests");
  const Json& tests = f.list("tests");
  for (size_t i = 0; i < tests.size(); ++i)
    c.tests.push_back(change_from(Fields(tests[i], fmt::format("{}.tests[{}]", where, i)), where));
  return c;
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
  if (info.comparison) {
    // Indented to its depth, as one dump(2) of the whole would print it.
    std::string text = comparison_json(*info.comparison);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    std::string indented;
    for (char c : text) indented += c == '\n' ? std::string("\n  ") : std::string(1, c);
    sink(",\n  \"comparison\": " + indented);
  }
  sink("\n}\n");
}

ReportData parse_report(const std::string& text, const std::string& path) {
  Json j = parse_json(text, path);
  if (!j.is_object() || !j["schema"].is_string() || j["schema"].get<std::string>() != kSchema || !j["tests"].is_array())
    throw Error(Category::bad_input, path + ": not a memrun report (schema " + kSchema + "); write one with --json");
  ReportData report;
  report.info = head_from(Fields(j, path));
  if (j.contains("comparison") && !j["comparison"].is_null())
    report.info.comparison = comparison_from_json(j["comparison"], path + ": comparison");
  const Json& setups = j["setups"];
  if (!setups.is_null() && !setups.is_array()) throw Error(Category::bad_input, path + ": field 'setups' should be a list");
  for (size_t i = 0; setups.is_array() && i < setups.size(); ++i) {
    Fields s(setups[i], fmt::format("{}: setups[{}]", path, i));
    SetupRecord setup{s.text("spec"), s.get<bool>("ran"), std::nullopt};
    if (!s.raw("result").is_null())
      setup.result = record_from_json(s.raw("result"), fmt::format("{}: setups[{}].result", path, i));
    report.setups.push_back(std::move(setup));
  }
  const Json& tests = j["tests"];
  // A test is its spec and its name: two entries of one test would be
  // counted, compared and merged twice.
  std::map<std::pair<std::string, std::string>, size_t> seen;
  for (size_t i = 0; i < tests.size(); ++i) {
    report.tests.push_back(record_from_json(tests[i], fmt::format("{}: tests[{}]", path, i)));
    const TestIdentity& t = report.tests.back().test;
    if (auto [it, fresh] = seen.emplace(std::pair{t.spec, t.name}, i); !fresh)
      throw Error(Category::bad_input, fmt::format("{}: tests[{}] and tests[{}] are both test '{}' of {}: a report lists each "
                                                   "test once; write it again with --json",
                                                   path, it->second, i, printable(t.name), printable(t.spec)));
  }
  return report;
}

ReportData read_report(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Category::bad_input, path + ": cannot read the report: " + std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(Category::bad_input, path + ": cannot read the report: " + std::strerror(errno));
  return parse_report(text, path);
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
