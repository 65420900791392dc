#include <gtest/gtest.h>

#include "columns.h"

TEST(Small, Fits) { EXPECT_GT(load_columns(8), 0u); }

// 96 MiB under the 64 MiB of Big.*: the kernel must kill it.
TEST(Big, LoadsEverything) { EXPECT_GT(load_columns(96), 0u); }

TEST(Big, DISABLED_NotRun) { EXPECT_GT(load_columns(512), 0u); }

class Sizes : public ::testing::TestWithParam<int> {};
TEST_P(Sizes, Load) { EXPECT_GE(load_columns(static_cast<std::size_t>(GetParam())), 0u); }
INSTANTIATE_TEST_SUITE_P(Mib, Sizes, ::testing::Values(4, 16));
