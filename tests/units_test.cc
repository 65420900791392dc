#include "runner/base/units.h"

#include <gtest/gtest.h>

namespace memrun {
namespace {

uint64_t size(const std::string& s) {
  std::string why;
  auto v = parse_size(s, &why);
  EXPECT_TRUE(v) << s << ": " << why;
  return v.value_or(0);
}

std::string size_error(const std::string& s) {
  std::string why;
  EXPECT_FALSE(parse_size(s, &why)) << s;
  return why;
}

TEST(Units, PlainNumbersAreBytes) { EXPECT_EQ(size("4096"), 4096u); }

TEST(Units, IecSizeUnits) {
  EXPECT_EQ(size("1KiB"), 1024u);
  EXPECT_EQ(size("64MiB"), 64ull << 20);
  EXPECT_EQ(size("2GiB"), 2ull << 30);
  EXPECT_EQ(size("1TiB"), 1ull << 40);
}

TEST(Units, SiSizeUnits) {
  EXPECT_EQ(size("1kB"), 1000u);
  EXPECT_EQ(size("100MB"), 100000000u);
  EXPECT_EQ(size("3GB"), 3000000000u);
  EXPECT_EQ(size("1TB"), 1000000000000u);
}

TEST(Units, BareLettersAreBinaryLikeSystemd) {
  EXPECT_EQ(size("512K"), 512u << 10);
  EXPECT_EQ(size("64M"), 64ull << 20);
  EXPECT_EQ(size("1G"), 1ull << 30);
  EXPECT_EQ(size("1T"), 1ull << 40);
}

TEST(Units, FractionsAndSpaces) {
  EXPECT_EQ(size("1.5GiB"), 3ull << 29);
  EXPECT_EQ(size("64 MiB"), 64ull << 20);
}

TEST(Units, BadSizesAreRefused) {
  EXPECT_NE(size_error("0").find("zero"), std::string::npos);
  EXPECT_NE(size_error("-5MiB").find("positive"), std::string::npos);
  EXPECT_NE(size_error("64mb").find("unknown unit 'mb'"), std::string::npos);
  EXPECT_NE(size_error("lots").find("not a size"), std::string::npos);
  EXPECT_NE(size_error("99999999999TiB").find("too large"), std::string::npos);
  EXPECT_NE(size_error("1.2.3MiB").find("not a size"), std::string::npos);
}

TEST(Units, DurationUnits) {
  std::string why;
  EXPECT_EQ(parse_duration("250ms", &why)->count(), 250);
  EXPECT_EQ(parse_duration("30s", &why)->count(), 30000);
  EXPECT_EQ(parse_duration("1.5s", &why)->count(), 1500);
  EXPECT_EQ(parse_duration("2m", &why)->count(), 120000);
  EXPECT_EQ(parse_duration("1h", &why)->count(), 3600000);
}

TEST(Units, BadDurationsAreRefused) {
  std::string why;
  EXPECT_FALSE(parse_duration("30", &why));
  EXPECT_NE(why.find("no unit"), std::string::npos);
  EXPECT_FALSE(parse_duration("3d", &why));
  EXPECT_NE(why.find("unknown unit 'd'"), std::string::npos);
  EXPECT_FALSE(parse_duration("0s", &why));
}

TEST(Units, SizesAreFormattedForPeople) {
  EXPECT_EQ(format_size(512), "512 B");
  EXPECT_EQ(format_size(64ull << 20), "64.0 MiB");
  EXPECT_EQ(format_size(1536ull << 20), "1.50 GiB");
  EXPECT_EQ(format_signed_size(-(3ll << 20)), "-3.00 MiB");
  EXPECT_EQ(format_duration(0.414), "0.41s");
  EXPECT_EQ(format_duration(125), "2m05s");
}

}  // namespace
}  // namespace memrun

namespace memrun {
namespace {

TEST(Units, DecimalAndBinaryAreBothExactAndShownAsWhatTheyAre) {
  std::string why;
  EXPECT_EQ(parse_size_with_unit("1GB", &why), 1000000000u);
  EXPECT_EQ(parse_size_with_unit("1GiB", &why), 1073741824u);
  EXPECT_EQ(format_limit(1000000000), "1 GB (953.7 MiB)");
  EXPECT_EQ(format_limit(1500000000), "1.5 GB (1.40 GiB)");
  EXPECT_EQ(format_limit(100000000), "100 MB (95.4 MiB)");
  EXPECT_EQ(format_limit(1073741824), "1.00 GiB");
  EXPECT_EQ(format_limit(64 * MiB), "64.0 MiB");
  EXPECT_EQ(format_limit(124 * MiB), "124.0 MiB");  // 130,023,424 bytes: within 64 KiB of a whole MB
  // As the kernel sets it: rounded up to its page.
  EXPECT_EQ(format_limit(1000001536), "1 GB (953.7 MiB)");
  EXPECT_EQ(format_limit(1000000000 + 64 * KiB), format_size(1000000000 + 64 * KiB));
  EXPECT_EQ(format_limit(16384000000), format_size(16384000000));  // 15625 MiB: binary is exact
  EXPECT_EQ(parse_size_with_unit("20", &why), std::nullopt);
  EXPECT_EQ(why, "'20' has no unit, and a bare number is ambiguous; write 20MiB (20 x 2^20 bytes), 20MB (20 x 10^6 "
                 "bytes) or 20B (bytes)");
  EXPECT_EQ(parse_size_with_unit("20B", &why), 20u);
}

}  // namespace
}  // namespace memrun

namespace memrun {
namespace {

// A size or a duration in a printed command (repro, explain) is as a person
// writes it, and reads back to exactly what it was.
TEST(Units, SizesAreWrittenAsPeopleWriteThemAndReadBackTheSame) {
  EXPECT_EQ(format_size_exact(134217728), "128MiB");
  EXPECT_EQ(format_size_exact(4 * GiB), "4GiB");
  EXPECT_EQ(format_size_exact(1536 * KiB), "1536KiB");
  EXPECT_EQ(format_size_exact(1000000000), "1GB");
  EXPECT_EQ(format_size_exact(1500000000), "1500MB");
  EXPECT_EQ(format_size_exact(1000), "1kB");
  EXPECT_EQ(format_size_exact(1023), "1023B");
  uint64_t bytes = 1;
  for (int i = 0; i < 2000; ++i) {
    bytes = bytes * 6364136223846793005ull + 1442695040888963407ull;  // every size class, reproducibly
    uint64_t b = (bytes >> (i % 40 + 10)) << (i % 31);
    if (b == 0 || b >= (uint64_t{1} << 53)) continue;  // parse_size reads through a double
    std::string why, shown = format_size_exact(b);
    EXPECT_EQ(parse_size(shown, &why), std::optional<uint64_t>(b)) << shown << " " << why;
  }
}

TEST(Units, DurationsAreWrittenAsPeopleWriteThemAndReadBackTheSame) {
  using std::chrono::milliseconds;
  EXPECT_EQ(format_duration_exact(milliseconds(600000)), "10m");
  EXPECT_EQ(format_duration_exact(milliseconds(7200000)), "2h");
  EXPECT_EQ(format_duration_exact(milliseconds(90000)), "90s");
  EXPECT_EQ(format_duration_exact(milliseconds(1500)), "1500ms");
  for (int64_t ms : {1, 999, 1000, 59000, 60000, 61000, 3599999, 3600000, 8640000, 12345})
    for (int64_t scale : {1, 1000, 60000}) {
      std::string why, shown = format_duration_exact(milliseconds(ms * scale));
      auto back = parse_duration(shown, &why);
      ASSERT_TRUE(back) << shown << " " << why;
      EXPECT_EQ(back->count(), ms * scale) << shown;
    }
}

}  // namespace
}  // namespace memrun
