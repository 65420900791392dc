#include "runner/base/units.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "runner/base/error.h"

namespace memrun {
namespace {

// Splits "12.5 MiB" into the number and the unit; false if no number leads.
bool split_number(const std::string& text, double* number, std::string* unit,
                  std::string* why) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  std::string num = text.substr(0, i);
  if (!text.empty() && text[0] == '-') {
    *why = "must be positive";
    return false;
  }
  if (num.empty() || num == "." || num.find('.') != num.rfind('.')) {
    *why = "expected a number with a unit";
    return false;
  }
  *number = std::strtod(num.c_str(), nullptr);
  size_t j = i;
  while (j < text.size() && text[j] == ' ') ++j;
  *unit = text.substr(j);
  return true;
}

}  // namespace

std::optional<uint64_t> parse_size(const std::string& text, std::string* why) {
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},          {"B", 1},
      {"K", 1024.0},    {"KiB", 1024.0},    {"kB", 1e3},
      {"M", 1048576.0}, {"MiB", 1048576.0}, {"MB", 1e6},
      {"G", 1073741824.0}, {"GiB", 1073741824.0}, {"GB", 1e9},
      {"T", 1099511627776.0}, {"TiB", 1099511627776.0}, {"TB", 1e12},
  };
  double number;
  std::string unit;
  if (!split_number(text, &number, &unit, why)) {
    if (*why == "expected a number with a unit") *why = "'" + text + "' is not a size (write e.g. 512MiB, 2GiB, 100MB)";
    return std::nullopt;
  }
  for (const auto& [name, factor] : kUnits) {
    if (unit != name) continue;
    double bytes = std::round(number * factor);
    // 2^63 bytes: past it no kernel interface takes the number.
    if (bytes >= 9223372036854775807.0) {
      *why = "'" + text + "' is too large (the kernel takes at most 8 EiB)";
      return std::nullopt;
    }
    if (bytes < 1) {
      *why = "'" + text + "' is zero: a size must be at least 1 byte";
      return std::nullopt;
    }
    return static_cast<uint64_t>(bytes);
  }
  *why = "unknown unit '" + unit + "' in '" + text +
         "' (use B, KiB, MiB, GiB, TiB, kB, MB, GB, TB, or K, M, G, T for binary)";
  return std::nullopt;
}

std::optional<uint64_t> parse_size_with_unit(const std::string& text, std::string* why) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos && text != "0") {
    *why = "'" + text + "' has no unit, and a bare number is ambiguous; write " + text + "MiB (" + text +
           " x 2^20 bytes), " + text + "MB (" + text + " x 10^6 bytes) or " + text + "B (bytes)";
    return std::nullopt;
  }
  return parse_size(text, why);
}

std::optional<std::chrono::milliseconds> parse_duration(const std::string& text,
                                                        std::string* why) {
  double number;
  std::string unit;
  if (!split_number(text, &number, &unit, why)) {
    *why = "'" + text + "' is not a duration (write e.g. 250ms, 30s, 2m, 1h)";
    return std::nullopt;
  }
  double ms;
  if (unit == "ms") ms = number;
  else if (unit == "s") ms = number * 1e3;
  else if (unit == "m") ms = number * 60e3;
  else if (unit == "h") ms = number * 3600e3;
  else {
    *why = unit.empty() ? "'" + text + "' has no unit (write e.g. 30s or 250ms)"
                        : "unknown unit '" + unit + "' in '" + text + "' (use ms, s, m or h)";
    return std::nullopt;
  }
  if (ms < 1) {
    *why = "'" + text + "' is shorter than 1ms";
    return std::nullopt;
  }
  if (ms > 1e12) {
    *why = "'" + text + "' is too long";
    return std::nullopt;
  }
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

std::string format_size_exact(uint64_t bytes) {
  static const std::pair<const char*, uint64_t> kUnits[] = {
      {"TiB", uint64_t{1} << 40}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB},
      {"TB", 1000000000000}, {"GB", 1000000000}, {"MB", 1000000}, {"kB", 1000}};
  uint64_t number = bytes;
  const char* unit = "B";
  // The smallest number: 4MiB, not 4096KiB; 1GB, not 1000000kB (binary
  // units come first and win a tie).
  for (const auto& [name, factor] : kUnits)
    if (bytes && bytes % factor == 0 && bytes / factor < number) {
      number = bytes / factor;
      unit = name;
    }
  return fmt::format("{}{}", number, unit);
}

std::string format_duration_exact(std::chrono::milliseconds duration) {
  int64_t ms = duration.count();
  if (ms > 0 && ms % 3600000 == 0) return fmt::format("{}h", ms / 3600000);
  if (ms > 0 && ms % 60000 == 0) return fmt::format("{}m", ms / 60000);
  if (ms > 0 && ms % 1000 == 0) return fmt::format("{}s", ms / 1000);
  return fmt::format("{}ms", ms);
}

std::string format_size(uint64_t bytes) {
  if (bytes == UINT64_MAX) return "max";
  static const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int i = 0;
  while (v >= 1024 && i < 6) {
    v /= 1024;
    ++i;
  }
  if (i == 0) return fmt::format("{} B", bytes);
  return fmt::format("{:.{}f} {}", v, v < 10 ? 2 : 1, kNames[i]);
}

std::string format_limit(uint64_t bytes) {
  // A limit is rounded up to the kernel's page (4 KiB, or 64 KiB on some
  // arm64 kernels): 1GB is set as 1000001536 bytes. Decimal where, up to
  // that rounding, it is a whole number of MB that is no whole MiB (124MiB
  // is 130,023,424 bytes: a whole MiB, never "130 MB").
  if (bytes < 1000000 || bytes == UINT64_MAX || bytes % MiB == 0) return format_size(bytes);
  uint64_t decimal = bytes / 1000000 * 1000000;
  if (bytes - decimal >= 64 * KiB) return format_size(bytes);
  static const std::pair<double, const char*> kUnits[] = {{1e12, "TB"}, {1e9, "GB"}, {1e6, "MB"}};
  for (const auto& [unit, name] : kUnits)
    if (static_cast<double>(decimal) >= unit)
      return fmt::format("{:g} {} ({})", static_cast<double>(decimal) / unit, name, format_size(bytes));
  return format_size(bytes);
}

std::string format_signed_size(int64_t bytes) {
  if (bytes >= 0) return format_size(static_cast<uint64_t>(bytes));
  return "-" + format_size(static_cast<uint64_t>(-bytes));
}

std::string format_duration(double seconds) {
  if (seconds < 60) return fmt::format("{:.{}f}s", seconds, seconds < 10 ? 2 : 1);
  int total = static_cast<int>(seconds);
  if (total < 3600) return fmt::format("{}m{:02}s", total / 60, total % 60);
  return fmt::format("{}h{:02}m", total / 3600, (total / 60) % 60);
}

uint64_t size_of_flag(const std::string& text, const char* what) {
  std::string why;
  auto v = parse_size_with_unit(text, &why);
  if (!v) throw Error(Category::usage, std::string(what) + ": " + why);
  return *v;
}

}  // namespace memrun
