// A GoogleTest binary whose cases print GoogleTest's own result lines
// about themselves and then end otherwise: memrun's verdict must be the
// program's results, never a line a case printed (suites_test.cc).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

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

// Runs the program again for a case that passes (which writes its own
// results where the environment says), then ends before GoogleTest could
// write this case's.
TEST(Printing, RunsAnotherCaseThenExits) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_GT(n, 0);
  self[n] = '\0';
  std::string again = std::string("'") + self + "' --gtest_filter=Printing.SaysFailedThenPasses > /dev/null";
  ASSERT_EQ(std::system(again.c_str()), 0);
  std::exit(1);
}

// A name that is not ASCII (GCC takes UTF-8 identifiers): GoogleTest's
// results keep it as it is.
TEST(Printing, GrößePasst) { SUCCEED(); }

// Closes every descriptor but stdio (a daemon's habit), then opens a file
// read-only many times ($MEMRUN_READ_ONLY, if set): GoogleTest writes its
// results after the case, and must neither lose them nor write that file.
TEST(Printing, ClosesItsDescriptorsThenPasses) {
  ASSERT_EQ(syscall(SYS_close_range, 3u, ~0u, 0u), 0);
  if (const char* path = std::getenv("MEMRUN_READ_ONLY")) {
    for (int i = 0; i < 64; ++i) ASSERT_GE(open(path, O_RDONLY), 0);
  }
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
