// JSON read within limits: a report, a suite's listing, a message of the
// pytest plugin, each read as far as JsonLimits allows and no further.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace memrun {

/// What a JSON text memrun reads (a report, a suite's listing) may hold:
/// its nesting (nlohmann's dump, comparison and conversions recurse once a
/// level), each string's and each list's or object's length. Far above
/// anything memrun writes or a tool lists.
struct JsonLimits {
  size_t depth = 64;
  size_t string_bytes = 1 << 20;  ///< a name, a command (execve takes 128 KiB an argument)
  size_t elements = 10'000'000;   ///< a list's or an object's members (a report's tests)
};

/// `text` parsed as JSON, within `limits`. Throws Error(bad_input)
/// "`where`: ...": not JSON, or past a limit (which, and where).
nlohmann::ordered_json parse_json(const std::string& text, const std::string& where, const JsonLimits& limits = {});

}  // namespace memrun
