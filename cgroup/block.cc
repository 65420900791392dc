// Blocks of a test measured on their own (cgroup.h Block, block.h).
#include "cgroup/block.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "cgroup/error.h"
#include "cgroup/fs.h"

namespace memrun::cgroup {
namespace {

int open_or_fail(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) fail_errno(Failure::Kind::system, "cannot open " + path, path);
  return fd;
}

class SampledBlock : public Block {
 public:
  explicit SampledBlock(const std::string& usage_file) : fd_(open_or_fail(usage_file, O_RDONLY)) {
    source_ = "sampled every 1 ms";
    sampled_ = true;
    baseline_ = high_ = fs::read_u64_at(fd_).value_or(0);
  }
  ~SampledBlock() override { ::close(fd_); }
  void sample() override { high_ = std::max(high_, fs::read_u64_at(fd_).value_or(0)); }
  Figures close() override {
    uint64_t now = fs::read_u64_at(fd_).value_or(0);
    return {std::max(high_, now), now};
  }

 private:
  int fd_;
  uint64_t high_ = 0;
};

// memory.peak, 6.12+: "a write of any non-empty string resets the mark to
// the current usage for subsequent reads through the same descriptor"
// (cgroup-v2.rst); other readers (memrun's peak of the whole test) keep
// theirs. Before 6.12 the write fails (EINVAL): sampled instead.
class PeakResetBlock : public Block {
 public:
  PeakResetBlock(int peak_fd, int current_fd) : peak_fd_(peak_fd), current_fd_(current_fd) {
    source_ = "memory.peak";
    baseline_ = fs::read_u64_at(current_fd_).value_or(0);
  }
  ~PeakResetBlock() override {
    ::close(peak_fd_);
    ::close(current_fd_);
  }
  Figures close() override {
    uint64_t now = fs::read_u64_at(current_fd_).value_or(0);
    return {std::max(fs::read_u64_at(peak_fd_).value_or(0), now), now};
  }

 private:
  int peak_fd_, current_fd_;
};

// v1 keeps one high-water mark per group, which a write resets for every
// reader (memrun's peak of the whole test too): the block gets a group of
// its own instead. v1 moves no charges with a process (unless
// move_charge_at_immigrate is set, which memrun never does): what was
// charged before stays where it is, and the new group's mark starts with
// the block. Its charges count in the test's group too (use_hierarchy).
class SubGroupBlock : public Block {
 public:
  SubGroupBlock(std::string group, std::string sub, std::string name, int pid,
                std::shared_ptr<std::set<std::string>> left)
      : group_(std::move(group)), sub_(std::move(sub)), name_(std::move(name)), pid_(std::to_string(pid)),
        left_(std::move(left)) {
    source_ = "memory.max_usage_in_bytes";
  }
  ~SubGroupBlock() override {
    if (!closed_) {
      fs::try_write_file(group_ + "/cgroup.procs", pid_);
      remove();
    }
  }
  Figures close() override {
    Figures f{fs::read_u64(sub_ + "/memory.max_usage_in_bytes").value_or(0),
              fs::read_u64(sub_ + "/memory.usage_in_bytes").value_or(0)};
    closed_ = true;
    fs::write_file(group_ + "/cgroup.procs", pid_);
    remove();
    return f;
  }

 private:
  // What the process started in the block may still run there: the group
  // then goes with the test's (removed deepest first).
  void remove() {
    if (::rmdir(sub_.c_str()) != 0 && errno != ENOENT) left_->insert(name_);
  }
  std::string group_, sub_, name_, pid_;
  std::shared_ptr<std::set<std::string>> left_;
  bool closed_ = false;
};

}  // namespace

std::unique_ptr<Block> sampled_block(const std::string& usage_file) {
  return std::make_unique<SampledBlock>(usage_file);
}

std::unique_ptr<Block> peak_reset_block(const std::string& group) {
  int peak = ::open((group + "/memory.peak").c_str(), O_RDWR | O_CLOEXEC);
  if (peak >= 0 && ::write(peak, "reset\n", 6) == 6)
    return std::make_unique<PeakResetBlock>(peak, open_or_fail(group + "/memory.current", O_RDONLY));
  if (peak >= 0) ::close(peak);
  return sampled_block(group + "/memory.current");
}

std::unique_ptr<Block> sub_group_block(const std::string& group, const std::string& name, int pid,
                                       uint64_t tcp_limit, std::shared_ptr<std::set<std::string>> left) {
  std::string sub = group + "/" + name;
  if (::mkdir(sub.c_str(), 0755) != 0) fail_errno(Failure::Kind::system, "cannot create cgroup " + sub, sub);
  // Sockets are charged in a v1 group only once its TCP limit was written
  // (see v1.cc): before the process moves in, so none it makes is missed.
  int err = 0;
  if (tcp_limit) err = fs::try_write_file(sub + "/memory.kmem.tcp.limit_in_bytes", std::to_string(tcp_limit));
  if (!err) err = fs::try_write_file(sub + "/cgroup.procs", std::to_string(pid));
  if (err) {
    ::rmdir(sub.c_str());
    errno = err;
    fail_errno(Failure::Kind::system, "cannot move process " + std::to_string(pid) + " into " + sub, sub);
  }
  return std::make_unique<SubGroupBlock>(group, sub, name, pid, std::move(left));
}

}  // namespace memrun::cgroup
