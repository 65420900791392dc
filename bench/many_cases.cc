// 200 trivial GoogleTest cases (Many/Trivial.Case/0 ... /199): the per-case
// cost of running a suite one process per case, by memrun or by CTest.
#include <gtest/gtest.h>

class Trivial : public ::testing::TestWithParam<int> {};
TEST_P(Trivial, Case) { EXPECT_GE(GetParam(), 0); }
INSTANTIATE_TEST_SUITE_P(Many, Trivial, ::testing::Range(0, 200));
