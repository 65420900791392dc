#include "runner/spec/names.h"

#include <functional>
#include <stdexcept>

namespace memrun {

size_t Names::add(std::string_view name) {
  if (size() >= UINT32_MAX - 1) throw std::length_error("more than 4 billion names");
  arena_.append(name);
  starts_.push_back(arena_.size());
  if (2 * size() > slots_.size()) grow();
  else {
    size_t mask = slots_.size() - 1;
    for (size_t at = std::hash<std::string_view>{}(name) & mask;; at = (at + 1) & mask)
      if (slots_[at] == 0) {
        slots_[at] = static_cast<uint32_t>(size());
        break;
      }
  }
  return size() - 1;
}

void Names::grow() {
  slots_.assign(slots_.empty() ? 16 : 2 * slots_.size(), 0);
  size_t mask = slots_.size() - 1;
  // In order, so that among equal names the first comes first in its chain.
  for (size_t i = 0; i < size(); ++i)
    for (size_t at = std::hash<std::string_view>{}((*this)[i]) & mask;; at = (at + 1) & mask)
      if (slots_[at] == 0) {
        slots_[at] = static_cast<uint32_t>(i + 1);
        break;
      }
}

size_t Names::find(std::string_view name) const {
  if (slots_.empty()) return npos;
  size_t mask = slots_.size() - 1;
  for (size_t at = std::hash<std::string_view>{}(name) & mask; slots_[at] != 0; at = (at + 1) & mask)
    if ((*this)[slots_[at] - 1] == name) return slots_[at] - 1;
  return npos;
}

size_t Names::bytes() const {
  return arena_.capacity() + starts_.capacity() * sizeof(uint64_t) + slots_.capacity() * sizeof(uint32_t);
}

}  // namespace memrun
