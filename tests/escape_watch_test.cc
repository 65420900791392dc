// Which test a move between cgroups belongs to (runner/run/escape_watch.h),
// fed the kernel's events by hand: no process is made, no group entered.
#include "runner/run/escape_watch.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cgroup/error.h"

namespace memrun {
namespace {

using Event = cgroup::MoveWatch::Event;
using Kind = Event::Kind;

// Task ids above the kernel's largest pid_max (2^22): no real task of
// this process, so each is a root when one of its threads makes it.
constexpr int kTask = 5000000;

struct Left {
  uint64_t serial;
  int task;
  std::string where;
};

class Fed {
 public:
  Fed() : watch_(nullptr) {}
  // A task made by one of this process's threads: a root.
  void root(int task) { events_.push_back({Kind::fork, task, static_cast<int>(::syscall(SYS_gettid)), {}, ns_++}); }
  void fork(int task, int parent) { events_.push_back({Kind::fork, task, parent, {}, ns_++}); }
  void move(int task, const std::string& path) { events_.push_back({Kind::attach, task, 0, path, ns_++}); }
  void born(int task, int parent, const std::string& path) { events_.push_back({Kind::born, task, parent, path, ns_++}); }
  EscapeWatch& watch() { return watch_; }
  // What the watch says of the events given so far.
  std::vector<Left> judge(bool whole = true) {
    std::vector<Left> left;
    watch_.judge(events_, whole, [&](uint64_t serial, int task, const std::string& where) {
      left.push_back({serial, task, where});
    });
    events_.clear();
    return left;
  }

 private:
  EscapeWatch watch_;
  std::vector<Event> events_;
  uint64_t ns_ = 1;
};

TEST(EscapeWatch, MovesBeforeTheTestIsKnownAreJudgedWhenItIs) {
  Fed fed;
  fed.root(kTask);
  fed.move(kTask, "/memrun/t1");
  fed.fork(kTask + 1, kTask);
  fed.move(kTask + 1, "/");
  fed.move(kTask + 1, "/memrun/t1");
  EXPECT_TRUE(fed.judge().empty());
  fed.watch().follow(7, kTask, "/memrun/t1");
  auto left = fed.judge();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].serial, 7u);
  EXPECT_EQ(left[0].task, kTask + 1);
  EXPECT_EQ(left[0].where, "/");
}

TEST(EscapeWatch, ARootsIdTakenAgainLeavesItsMovesBehind) {
  // A root memrun never follows (a helper of its own) moves to the host's
  // root and ends; a test's first process gets its id: the helper's move
  // is not the test's.
  Fed fed;
  fed.root(kTask);
  fed.move(kTask, "/");
  EXPECT_TRUE(fed.judge().empty());
  fed.root(kTask);
  fed.move(kTask, "/memrun/t1");
  fed.watch().follow(7, kTask, "/memrun/t1");
  EXPECT_TRUE(fed.judge().empty());
}

TEST(EscapeWatch, MoreMovesBeforeTheTestIsKnownThanMemrunKeepsFailTheTest) {
  // 16 moves home are kept; the trips out after them are not, and must
  // not pass for that.
  Fed fed;
  fed.root(kTask);
  for (int i = 0; i < 16; ++i) fed.move(kTask, "/memrun/t1");
  for (int i = 0; i < 4; ++i) fed.move(kTask, i % 2 ? "/memrun/t1" : "/");
  EXPECT_TRUE(fed.judge().empty());
  fed.watch().follow(3, kTask, "/memrun/t1");
  auto left = fed.judge();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].serial, 3u);
  EXPECT_EQ(left[0].task, 0);
  EXPECT_EQ(left[0].where, "(unknown: its tasks moved between cgroups 20 times before memrun knew the test, more than "
                           "memrun keeps)");
}

TEST(EscapeWatch, ManyRootsNotYetFollowedLoseNoMove) {
  // 300 roots memrun made and does not follow yet, each with a trip out:
  // whichever becomes a test later, its trip is judged.
  Fed fed;
  for (int i = 0; i < 300; ++i) {
    fed.root(kTask + i);
    fed.move(kTask + i, "/");
  }
  EXPECT_TRUE(fed.judge().empty());
  fed.watch().follow(1, kTask, "/memrun/t1");
  fed.watch().follow(2, kTask + 299, "/memrun/t2");
  auto left = fed.judge();
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0].serial, 1u);
  EXPECT_EQ(left[0].where, "/");
  EXPECT_EQ(left[1].serial, 2u);
}

TEST(EscapeWatch, ATaskBornInAnotherGroupLeftItsTest) {
  // clone3 with CLONE_INTO_CGROUP: the birth comes before the fork, and
  // belongs to the cloning thread's test.
  Fed fed;
  fed.root(kTask);
  fed.watch().follow(5, kTask, "/memrun/t1");
  fed.born(kTask + 1, kTask, "/memrun/t1/sub");  // below its own group
  fed.fork(kTask + 1, kTask);
  fed.born(kTask + 2, kTask + 1, "/");
  fed.fork(kTask + 2, kTask + 1);
  fed.born(kTask + 3, kTask + 2, "");  // gone before memrun read it
  fed.fork(kTask + 3, kTask + 2);
  fed.born(kTask + 9, 1, "/");  // no test's
  auto left = fed.judge();
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0].task, kTask + 2);
  EXPECT_EQ(left[0].where, "/");
  EXPECT_EQ(left[1].task, kTask + 3);
  EXPECT_EQ(left[1].where,
            "(unknown: born with clone3's CLONE_INTO_CGROUP into a group that had tasks, and gone before memrun "
            "could read which)");
}

TEST(EscapeWatch, ALostRecordFailsEveryTestFollowed) {
  Fed fed;
  fed.root(kTask);
  fed.watch().follow(5, kTask, "/memrun/t1");
  auto left = fed.judge(false);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].task, 0);
}

// The instances of this process's watches.
std::vector<std::string> own_instances() {
  std::vector<std::string> found;
  std::error_code ec;
  std::string prefix = "memrun-" + std::to_string(::getpid()) + "-";
  for (const auto& e : std::filesystem::directory_iterator("/sys/kernel/tracing/instances", ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) found.push_back(e.path().string());
  return found;
}

TEST(EscapeWatch, TheRecordIsRemovedByCloseNeverByTheDestructor) {
  // The removal waits for an RCU grace period: the run's end does it
  // (close()), a destructor never waits; what it leaves is gc's.
  std::unique_ptr<EscapeWatch> watch;
  try {
    watch = std::make_unique<EscapeWatch>();
  } catch (const cgroup::Failure& e) {
    GTEST_SKIP() << "no record of moves here: " << e.what();
  }
  auto made = own_instances();
  ASSERT_EQ(made.size(), 1u);
  watch.reset();
  EXPECT_TRUE(std::filesystem::exists(made[0])) << "the destructor removed the instance";
  ::rmdir(made[0].c_str());
  watch = std::make_unique<EscapeWatch>();
  made = own_instances();
  ASSERT_EQ(made.size(), 1u);
  watch->close();
  EXPECT_FALSE(std::filesystem::exists(made[0]));
  watch.reset();
  for (const auto& left : own_instances()) ::rmdir(left.c_str());
}

}  // namespace
}  // namespace memrun
