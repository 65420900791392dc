// UTF-8 checks: everything memrun writes (JSON, JUnit XML) must be UTF-8,
// while specs and test output may hold any bytes.
#pragma once

#include <string>

namespace memrun {

/// The length of the valid UTF-8 sequence starting at text[i], or 0 when
/// the bytes there are not one.
inline size_t utf8_length(const std::string& text, size_t i) {
  auto at = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  unsigned char c = at(0);
  if (c < 0x80) return 1;
  // Lead bytes C0, C1 and F5..FF never occur; E0, ED, F0 and F4 narrow the
  // second byte (no overlong forms, no surrogates, nothing past U+10FFFF).
  size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  if (len == 0 || i + len > text.size()) return 0;
  for (size_t k = 1; k < len; ++k)
    if ((at(k) >> 6) != 0x2) return 0;
  unsigned char second = at(1);
  if ((c == 0xe0 && second < 0xa0) || (c == 0xed && second > 0x9f) || (c == 0xf0 && second < 0x90) ||
      (c == 0xf4 && second > 0x8f))
    return 0;
  return len;
}

}  // namespace memrun
