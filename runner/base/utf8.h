// UTF-8 checks: everything memrun writes (JSON, JUnit XML) must be UTF-8,
// while specs and test output may hold any bytes; and the one rule for
// showing text memrun did not write.
#pragma once

#include <cstdint>
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

/// The code point of the valid UTF-8 sequence of `len` bytes at text[i].
inline uint32_t code_point(const std::string& text, size_t i, size_t len) {
  auto at = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(text[i + k])); };
  if (len == 1) return at(0);
  uint32_t c = at(0) & (0xff >> (len + 1));
  for (size_t k = 1; k < len; ++k) c = (c << 6) | (at(k) & 0x3f);
  return c;
}

/// Characters that are valid text but show as something else, or as
/// nothing: C1 controls (U+0080..U+009F; U+009B is a terminal's CSI),
/// bidirectional controls (U+200E/F, U+202A..E, U+2066..9: "ok\u202etset"
/// shows as "okfailed-test" reversed), zero-width characters (U+200B..D,
/// U+2060, U+FEFF) and line and paragraph separators (U+2028/9).
inline bool shows_as_other(uint32_t c) {
  return (c >= 0x80 && c <= 0x9f) || c == 0x200e || c == 0x200f || (c >= 0x202a && c <= 0x202e) ||
         (c >= 0x2066 && c <= 0x2069) || (c >= 0x200b && c <= 0x200d) || c == 0x2060 || c == 0xfeff || c == 0x2028 ||
         c == 0x2029;
}

namespace utf8_detail {
// One loop for both rules below: every byte that is no UTF-8 text, every
// control character (C0 but, with `keep_lines`, \n \r \t) and DEL as
// \xNN; with `shown`, the characters of shows_as_other as \uNNNN too.
inline std::string escape(const std::string& text, bool keep_lines, bool shown) {
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
    } else if (uint32_t u = len > 1 ? code_point(text, i, len) : 0; shown && shows_as_other(u)) {
      out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(u >> shift) & 15];
      i += len;
    } else {
      out.append(text, i, len);
      i += len;
    }
  }
  return out;
}
}  // namespace utf8_detail

/// The one rule for every text memrun shows that it did not write itself
/// (a spec's or a suite's case names, a report read back, a test's output,
/// a profiler's frames): in the console, JUnit, Markdown, HTML, workflow
/// annotations and explain's output, every byte that is no printable UTF-8
/// (a control character, DEL, a broken sequence) becomes the visible text
/// \xNN, and every character that shows as another or as nothing
/// (shows_as_other) \uNNNN: an ESC, a BEL, a CR or a CSI never reaches a
/// terminal, a CI log, Markdown or XML (where XML 1.0 has no way to write
/// one at all), and no name shows as another's. With `keep_lines`,
/// newlines, carriage returns and tabs stay (XML text may hold them).
inline std::string escape_controls(const std::string& text, bool keep_lines = false) {
  return utf8_detail::escape(text, keep_lines, true);
}

/// What memrun keeps of a name or a text it did not write (a suite's case
/// names, a report read back, a test's output in the record): valid UTF-8
/// without control characters (the JSON report and JUnit can hold it), as
/// escape_controls writes them; characters that only show as others stay
/// as they are (the JSON keeps a name as it is: it is shown through
/// escape_controls).
inline std::string storable(const std::string& text, bool keep_lines = false) {
  return utf8_detail::escape(text, keep_lines, false);
}

/// `text` shown in a table's cell: escape_controls, then at most `max`
/// characters (an escape's counted as they show), the last an ellipsis
/// when it was cut. The whole text stays where it is stored (the JSON
/// report): a name of 64 MiB makes no table of 64 MiB a row.
inline std::string cell(const std::string& text, size_t max = 120) {
  std::string shown = escape_controls(text);
  size_t chars = 0, at = 0;  // `at`: where the first max - 1 characters end
  for (size_t i = 0; i < shown.size(); ++chars) {
    if (chars + 1 == max) at = i;
    if (chars == max) return shown.substr(0, at) + "\u2026";
    i += utf8_length(shown, i);  // escape_controls wrote valid UTF-8
  }
  return shown;
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
