// A small GoogleTest binary whose cases use known amounts of memory: what
// memrun's `suites:` runs case by case in the tests (tests/suites_test.cc)
// and in specs/suites.yaml. Plain, typed and value-parameterized cases, a
// disabled one, and one whose memory is held by a child process (which an
// allocator hook in the test process never sees).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

namespace {

// Touches `mib` MiB of anonymous memory (every page written) and returns a
// byte of it, so that the writes cannot be optimized away.
int touch(size_t mib) {
  size_t bytes = mib << 20;
  // Written through a volatile pointer, a byte per page: the compiler may
  // not drop the writes (it drops a malloc+memset+free it can see through).
  volatile char* p = static_cast<volatile char*>(std::malloc(bytes));
  if (!p) std::abort();
  for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
  p[bytes - 1] = 1;
  int byte = p[bytes - 1];
  std::free(const_cast<char*>(p));
  return byte;
}

TEST(Small, Fits) { EXPECT_EQ(touch(8), 1); }

// Under a limit that is meant for a column, not the whole table: the kernel
// must kill it (a spec rule expects oom).
TEST(Big, LoadsEverything) { EXPECT_EQ(touch(96), 1); }

TEST(Child, HoldsMemoryInAChild) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(touch(40) == 1 ? 0 : 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

class Touch : public ::testing::TestWithParam<int> {};
TEST_P(Touch, Mib) { EXPECT_EQ(touch(static_cast<size_t>(GetParam())), 1); }
INSTANTIATE_TEST_SUITE_P(Sizes, Touch, ::testing::Values(4, 16));

template <typename T>
class Typed : public ::testing::Test {};
using Types = ::testing::Types<int, double>;
TYPED_TEST_SUITE(Typed, Types);
TYPED_TEST(Typed, Works) { EXPECT_EQ(touch(sizeof(TypeParam)), 1); }

// GoogleTest skips it; so must memrun (it would fail).
TEST(Small, DISABLED_NeverRuns) { FAIL() << "a disabled case ran"; }

}  // namespace
