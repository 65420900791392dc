// Many names in little memory: each name's bytes once, in one arena, and a
// table of where each starts. A suite may list a million cases; a
// std::map or std::set of their names costs some 100 bytes a name beyond
// the name, this about 16.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace memrun {

/// Names added in order, numbered from 0; each found again by its text.
class Names {
 public:
  /// Adds `name` as the next number and returns it; a name already held
  /// gets a number of its own too (find() then finds the first).
  size_t add(std::string_view name);
  /// The name numbered `index`.
  std::string_view operator[](size_t index) const {
    return {arena_.data() + starts_[index], static_cast<size_t>(starts_[index + 1] - starts_[index])};
  }
  size_t size() const { return starts_.size() - 1; }
  /// The number of the first name equal to `name`, or npos.
  size_t find(std::string_view name) const;
  static constexpr size_t npos = SIZE_MAX;
  /// Bytes this holds (its arena and tables), for benchmarks and tests.
  size_t bytes() const;

 private:
  std::string arena_;
  std::vector<uint64_t> starts_{0};  // name i is arena_[starts_[i], starts_[i + 1])
  // Open addressing over the names' numbers plus one (0: empty), kept at
  // most half full.
  std::vector<uint32_t> slots_;
  void grow();
};

}  // namespace memrun
