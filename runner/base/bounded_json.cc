#include "runner/base/bounded_json.h"

#include <fmt/format.h>

#include <utility>
#include <vector>

#include "runner/base/error.h"
#include "runner/base/units.h"

namespace memrun {

using Json = nlohmann::ordered_json;

Json parse_json(const std::string& text, const std::string& where, const JsonLimits& limits) {
  // nlohmann parses without recursion, and hands its callback each value
  // as it is made: a container past the depth is refused as it opens, a
  // member past the length as it comes, a string past its length as it
  // ends; nothing deeper or longer is built. `open`: for each container
  // being read, whether it is a list, and its members so far.
  std::vector<std::pair<bool, size_t>> open;
  auto check = [&](int depth, nlohmann::json::parse_event_t event, Json& value) {
    using E = nlohmann::json::parse_event_t;
    std::string past;
    if (event == E::object_end || event == E::array_end) {
      open.pop_back();
      return true;
    }
    // A member: an object's at its key, a list's at its value.
    bool member = event == E::key || (!open.empty() && open.back().first && event != E::key);
    if (member && ++open.back().second > limits.elements)
      past = fmt::format("a list or object of more than {} members", limits.elements);
    if (event == E::object_start || event == E::array_start) {
      if (static_cast<size_t>(depth) >= limits.depth)
        past = fmt::format("lists and objects nested more than {} deep", limits.depth);
      open.push_back({event == E::array_start, 0});
    }
    if ((event == E::value || event == E::key) && value.is_string() &&
        value.get_ref<const std::string&>().size() > limits.string_bytes)
      past = "a string longer than " + format_size(limits.string_bytes);
    if (!past.empty())
      throw Error(Category::bad_input, where + ": holds " + past + ", past what memrun reads; is this a file memrun wrote?");
    return true;
  };
  try {
    return Json::parse(text, check);
  } catch (const nlohmann::json::exception& e) {
    throw Error(Category::bad_input, where + ": not JSON (" + e.what() + ")");
  }
}

}  // namespace memrun
