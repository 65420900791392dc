// A GoogleTest binary whose cases print GoogleTest's own result lines
// about themselves and then end otherwise: memrun's verdict must be the
// program's results, never a line a case printed (suites_test.cc).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

// Says it passed, then ends the program before GoogleTest could.
TEST(Printing, SaysOkThenExits) {
  std::printf("[       OK ] Printing.SaysOkThenExits (0 ms)\n");
  std::fflush(stdout);
  std::exit(1);
}

// Says it was skipped, then fails.
TEST(Printing, SaysSkippedThenFails) {
  std::printf("[  SKIPPED ] Printing.SaysSkippedThenFails\n");
  FAIL() << "a real failure";
}

// Says it failed, and passes.
TEST(Printing, SaysFailedThenPasses) {
  std::printf("[  FAILED  ] Printing.SaysFailedThenPasses (0 ms)\n");
  SUCCEED();
}

// With MEMRUN_SKIP_EVERYTHING set, a global environment skips the whole
// program in its SetUp: no case starts, though the XML lists the one the
// filter selected as run.
class SkipEverything : public testing::Environment {
 public:
  void SetUp() override {
    if (std::getenv("MEMRUN_SKIP_EVERYTHING")) GTEST_SKIP() << "skipped by the global environment";
  }
};
testing::Environment* const kSkipEverything = testing::AddGlobalTestEnvironment(new SkipEverything);
