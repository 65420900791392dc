// How a bisection ends when it finds no limit, on the fake backend
// (tests/fake_backend.h): it returns why, or the signal that stopped it,
// and `memrun bisect` turns that into its exit code (runner/app/main.cc). What
// it finds on a real kernel is bisect_test.cc's.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>

#include "fake_backend.h"
#include "runner/base/units.h"
#include "runner/bisect/bisect.h"
#include "runner/spec/spec.h"

namespace memrun::testing {
namespace {

class BisectResult : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "memrun-bisect-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
  }
  void TearDown() override {
    if (out_) std::fclose(out_);
    std::filesystem::remove_all(dir_);
  }

  /// Bisects the one test of `yaml` between 16 MiB and 256 MiB.
  memrun::BisectResult bisect_one(const std::string& yaml) {
    spec_ = parse_spec(yaml, dir_ + "/spec.yaml", dir_);
    BisectOptions o;
    o.low = 16 * MiB;
    o.high = 256 * MiB;
    o.run_dir = dir_ + "/run";
    std::filesystem::create_directories(o.run_dir);
    out_ = std::tmpfile();
    return bisect(spec_.tests.at(0), spec_, backend, o, out_);
  }
  /// What bisect printed.
  std::string printed() {
    std::string text;
    std::rewind(out_);
    for (int c; (c = std::fgetc(out_)) != EOF;) text += static_cast<char>(c);
    return text;
  }

  FakeBackend backend;

 private:
  std::string dir_;
  Spec spec_;
  std::FILE* out_ = nullptr;
};

TEST_F(BisectResult, ATestThatFailsOnItsOwnHasNoLimitAndSaysWhy) {
  auto r = bisect_one("tests:\n  - {name: t, run: 'exit 3', memory: 64MiB}\n");
  EXPECT_EQ(r.minimum, 0u);
  EXPECT_EQ(r.interrupted_by, 0);
  EXPECT_EQ(r.runs, 1);
  EXPECT_NE(r.no_limit.find("'t' does not pass even under 256.0 MiB, for another reason than memory"),
            std::string::npos)
      << r.no_limit;
}

TEST_F(BisectResult, ATestThatGetsAroundItsLimitHasNoLimitAndNoProbeLine) {
  // Above any limit of the range, in the first probe (its group is
  // probe-1; the fake's scripts go by what follows the first '-').
  backend.scripts["1"].final.peak = 512 * MiB;
  auto r = bisect_one("tests:\n  - {name: t, run: 'true', memory: 64MiB}\n");
  EXPECT_EQ(r.minimum, 0u);
  EXPECT_NE(r.no_limit.find("bisect needs a test that keeps to the limit it is given"), std::string::npos)
      << r.no_limit;
  EXPECT_EQ(printed().find("probe"), std::string::npos) << "a probe without a bound was shown: " << printed();
}

TEST_F(BisectResult, ASignalEndsItWithTheSignal) {
  // The test signals its runner (its parent: this process) itself.
  auto r = bisect_one("tests:\n  - {name: t, run: 'kill -TERM $PPID; exec sleep 30', memory: 64MiB}\n");
  EXPECT_EQ(r.interrupted_by, SIGTERM);
  EXPECT_EQ(r.minimum, 0u);
  EXPECT_TRUE(r.no_limit.empty()) << r.no_limit;
  EXPECT_EQ(backend.live_groups, 0);
}

}  // namespace
}  // namespace memrun::testing
