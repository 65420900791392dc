// The values of a spec that are parsed the same wherever they appear
// (expectations, headroom, max_increase, ${...} expansion): the seams the
// spec parser, `memrun exec` and the unit tests share.
#include <cctype>
#include <cstdlib>
#include <stdexcept>

#include "runner/base/units.h"
#include "runner/spec/spec.h"

namespace memrun {

std::string Expectation::describe() const {
  switch (kind) {
    case pass: return "pass";
    case oom: return "oom";
    case fail: return "fail";
    case exit_code: return "exit " + std::to_string(code);
  }
  return "pass";
}

const char* to_string(ExplainMode mode) {
  switch (mode) {
    case ExplainMode::never: return "never";
    case ExplainMode::on_failure: return "on-failure";
    case ExplainMode::always: return "always";
  }
  return "never";
}

std::optional<ExplainMode> explain_mode_named(const std::string& text) {
  for (auto m : {ExplainMode::never, ExplainMode::on_failure, ExplainMode::always})
    if (text == to_string(m)) return m;
  return std::nullopt;
}

uint64_t MinHeadroom::for_limit(uint64_t limit) const {
  return is_percent ? static_cast<uint64_t>(static_cast<double>(limit) * percent / 100.0) : bytes;
}

namespace {

// The environment is the process's; so is the record of what the specs'
// ${...} read of it.
std::map<std::string, std::optional<std::string>>& outside_reads() {
  static std::map<std::string, std::optional<std::string>> reads;
  return reads;
}

// What one ${...} (its inside: `inner`) expands to.
std::string expand_one(std::string inner, const std::map<std::string, std::string>& env) {
  std::string written = inner, fallback;
  bool has_fallback = false;
  if (auto dash = inner.find(":-"); dash != std::string::npos) {
    fallback = inner.substr(dash + 2);
    inner = inner.substr(0, dash);
    has_fallback = true;
  }
  // Only ${NAME} and ${NAME:-default}: the shell's other forms (${X-d},
  // ${X:=d}, ...) would silently expand to nothing here.
  bool name = !inner.empty() && !std::isdigit(static_cast<unsigned char>(inner[0]));
  for (char c : inner) name = name && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!name)
    throw std::invalid_argument("'${" + written + "}' is not ${NAME} or ${NAME:-default}, " +
                                "the two forms memrun expands (write $${ for a literal ${)");
  const char* outside = std::getenv(inner.c_str());
  if (auto it = env.find(inner); it != env.end() && !it->second.empty()) return it->second;
  // Read from memrun's own environment: `memrun repro` must set it again.
  outside_reads()[inner] = outside ? std::optional<std::string>(outside) : std::nullopt;
  if (outside && *outside) return outside;
  return has_fallback ? fallback : "";
}


}  // namespace

std::map<std::string, std::optional<std::string>> environment_read() { return outside_reads(); }

std::string expand_vars(const std::string& text, const std::map<std::string, std::string>& env) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    size_t open = text.find("${", i);
    if (open == std::string::npos) {
      out += text.substr(i);
      break;
    }
    // $${ is a literal ${.
    if (open > i && text[open - 1] == '$') {
      out += text.substr(i, open - 1 - i) + "${";
      i = open + 2;
      continue;
    }
    out += text.substr(i, open - i);
    size_t close = text.find('}', open);
    if (close == std::string::npos)
      throw std::invalid_argument("'" + text + "' has a ${ that is never closed (write $${ for a literal ${)");
    out += expand_one(text.substr(open + 2, close - open - 2), env);
    i = close + 1;
  }
  return out;
}

std::optional<MaxIncrease> parse_max_increase(const std::string& text, std::string* why) {
  MaxIncrease m{0, 0};
  bool pct = false, size = false;
  std::string rest = text;
  for (size_t start = 0; start <= rest.size();) {
    size_t comma = rest.find(',', start);
    std::string part = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    while (!part.empty() && part.front() == ' ') part.erase(0, 1);
    while (!part.empty() && part.back() == ' ') part.pop_back();
    if (!part.empty() && part.back() == '%' && !pct) {
      char* end = nullptr;
      std::string num = part.substr(0, part.size() - 1);
      double p = std::strtod(num.c_str(), &end);
      if (num.empty() || *end != '\0' || !(p >= 0 && p <= 1000)) {
        *why = "'" + part + "' is not a percentage from 0% to 1000%";
        return std::nullopt;
      }
      m.percent = p;
      pct = true;
    } else if (!size && !part.empty() && part.back() != '%') {
      std::string size_why;
      auto bytes = part == "0" ? std::optional<uint64_t>(0) : parse_size(part, &size_why);
      if (!bytes) {
        *why = size_why;
        return std::nullopt;
      }
      m.bytes = *bytes;
      size = true;
    } else {
      *why = "'" + text + "' must be a percentage (10%), a size (8MiB) or both (10%, 8MiB)";
      return std::nullopt;
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return m;
}

std::optional<Expectation> parse_expectation(const std::string& s, std::string* why) {
  Expectation e;
  if (s == "pass") e.kind = Expectation::pass;
  else if (s == "oom") e.kind = Expectation::oom;
  else if (s == "fail") e.kind = Expectation::fail;
  else if (!s.empty() && s.size() <= 3 && s.find_first_not_of("0123456789") == std::string::npos && std::stoi(s) <= 255) {
    e.kind = Expectation::exit_code;
    e.code = std::stoi(s);
  } else {
    *why = "must be pass, oom, fail or an exit code 0-255, not '" + s + "'";
    return std::nullopt;
  }
  return e;
}

std::optional<MinHeadroom> parse_min_headroom(const std::string& s, std::string* why) {
  MinHeadroom h;
  if (!s.empty() && s.back() == '%') {
    std::string num = s.substr(0, s.size() - 1);
    char* end = nullptr;
    double p = std::strtod(num.c_str(), &end);
    if (num.empty() || *end != '\0' || !(p > 0 && p < 100)) {
      *why = "'" + s + "' must be a percentage above 0% and below 100% (0% asks for nothing: leave min_headroom "
             "out; 100% no test can meet), or a size such as 16MiB";
      return std::nullopt;
    }
    h.is_percent = true;
    h.percent = p;
    return h;
  }
  if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos) {
    *why = "'" + s + "' has no unit, and a bare number is ambiguous; write " + s + "% (of the limit), " + s +
           "MiB (" + s + " x 2^20 bytes) or " + s + "B (bytes)";
    return std::nullopt;
  }
  auto bytes = parse_size(s, why);
  if (!bytes) return std::nullopt;
  h.bytes = *bytes;
  return h;
}

}  // namespace memrun
