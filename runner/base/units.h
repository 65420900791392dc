// Sizes and durations as people write them in specs and on the command line.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace memrun {

/// Binary units, defined once for the code and its tests.
inline constexpr uint64_t KiB = uint64_t{1} << 10, MiB = uint64_t{1} << 20, GiB = uint64_t{1} << 30;

/// Parses a byte size: a plain number is bytes; IEC units (KiB MiB GiB TiB),
/// SI units (kB MB GB TB) and bare K M G T (binary, as systemd reads them);
/// an optional fraction ("1.5GiB"). Returns nullopt and sets *why on error.
std::optional<uint64_t> parse_size(const std::string& text, std::string* why);

/// parse_size() for a size whose unit must be written: a bare number
/// ("20") is refused, since people mean MiB as often as bytes by it (a
/// `min_headroom: 20` read as 20 bytes asks for nothing). *why then says
/// what to write instead.
std::optional<uint64_t> parse_size_with_unit(const std::string& text, std::string* why);

/// A size given to a flag (--set, --memory-range, ...): Error(usage) naming
/// `what` where it is none.
uint64_t size_of_flag(const std::string& text, const char* what);

/// Parses a duration with a unit: ms, s, m, h ("250ms", "1.5s", "2m").
std::optional<std::chrono::milliseconds> parse_duration(const std::string& text,
                                                        std::string* why);

/// Formats bytes for people: "512 B", "63.9 MiB", "1.50 GiB".
std::string format_size(uint64_t bytes);

/// Formats bytes exactly, as a person writes a size on a command line:
/// the unit that gives the shortest whole number ("128MiB", "1GB",
/// "1536KiB", "1000B"); parse_size() reads it back to the same bytes.
std::string format_size_exact(uint64_t bytes);

/// Formats a duration exactly, in the largest unit that divides it ("10m",
/// "90s", "1500ms"); parse_duration() reads it back to the same
/// milliseconds.
std::string format_duration_exact(std::chrono::milliseconds duration);

/// Formats a size someone wrote, as what it is: a decimal size (1GB, 10^9
/// bytes) as "1 GB (953.7 MiB)", so that a limit of 1GB is never shown as
/// an unexplained 953.7 MiB; any other as format_size().
std::string format_limit(uint64_t bytes);

/// Formats a signed byte difference, e.g. headroom: "-3.2 MiB".
std::string format_signed_size(int64_t bytes);

/// Formats seconds: "0.41s", "12.3s", "2m05s".
std::string format_duration(double seconds);

}  // namespace memrun
