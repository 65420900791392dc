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

/// The one rule for names and strings memrun did not write itself (a
/// suite's case names, gtest's, pytest's, CTest's; a report read back):
/// every byte that is no printable UTF-8 (a control character, DEL, a
/// broken sequence) becomes the visible text \xNN, so that an ESC, a BEL or
/// a CR never reaches a terminal, a CI log, Markdown or XML (where XML 1.0
/// has no way to write one at all). With `keep_lines`, newlines, carriage
/// returns and tabs stay (XML text may hold them).
inline std::string escape_controls(const std::string& text, bool keep_lines = false) {
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    size_t len = utf8_length(text, i);
    // U+FFFE and U+FFFF are valid UTF-8 but no XML 1.0 character.
    if (len == 3 && c == 0xef && static_cast<unsigned char>(text[i + 1]) == 0xbf &&
        (static_cast<unsigned char>(text[i + 2]) & 0xfe) == 0xbe)
      len = 0;
    bool line = c == '\n' || c == '\r' || c == '\t';
    if (len == 0 || ((c < 0x20 && !(keep_lines && line)) || c == 0x7f)) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      i += 1;
    } else {
      out.append(text, i, len);
      i += len;
    }
  }
  return out;
}

/// `text` as valid UTF-8 with no control character but newlines and tabs
/// (JSON and XML 1.0 take neither invalid UTF-8 nor most controls; a CR
/// would rewrite a console line): the rest written \xNN, as names are.
inline std::string printable(const std::string& text) {
  std::string out;
  for (char c : escape_controls(text, true)) {
    if (c == '\r') out += "\\x0d";
    else out += c;
  }
  return out;
}

/// `text` on one console line: printable, with line breaks and tabs shown
/// as \n and \t. A reason can quote a test's data (a program name, a kernel
/// log's process name); a line break in it must not start a console line of
/// its own, where a CI runner would read it as a command ("::warning ...").
inline std::string one_line(const std::string& text) {
  std::string out;
  for (char c : printable(text)) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else out += c;
  }
  return out;
}

}  // namespace memrun
