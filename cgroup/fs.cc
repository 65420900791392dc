#include "cgroup/fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "cgroup/error.h"

namespace memrun {

namespace cgroup {
void fail_errno(Failure::Kind kind, const std::string& what, const std::string& path) {
  throw Failure(kind, what + ": " + std::strerror(errno), errno, path);
}
}  // namespace cgroup

namespace fs {

using cgroup::Failure;
using cgroup::fail_errno;

std::optional<std::string> read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ESRCH) return std::nullopt;
    fail_errno(Failure::Kind::system, "cannot open " + path, path);
  }
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int saved = errno;
      ::close(fd);
      errno = saved;
      // A cgroup removed under us reads as ENODEV, a /proc/PID file of a
      // process that has just gone as ESRCH: either is absent.
      if (errno == ENODEV || errno == ESRCH) return std::nullopt;
      fail_errno(Failure::Kind::system, "cannot read " + path, path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

int try_write_file(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  ssize_t n;
  do {
    n = ::write(fd, value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  int err = n < 0 ? errno : 0;
  ::close(fd);
  return err;
}

void write_file(const std::string& path, const std::string& value) {
  if (int err = try_write_file(path, value)) {
    errno = err;
    fail_errno(Failure::Kind::system, "cannot write '" + value + "' to " + path, path);
  }
}

std::string trim(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

std::optional<uint64_t> parse_u64(const std::string& text) {
  std::string t = trim(text);
  if (t == "max") return UINT64_MAX;
  if (t.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : t) {
    if (c < '0' || c > '9') return std::nullopt;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

std::optional<uint64_t> read_u64(const std::string& path) {
  auto text = read_file(path);
  if (!text) return std::nullopt;
  return parse_u64(*text);
}

std::optional<uint64_t> read_u64_at(int fd) {
  if (fd < 0) return std::nullopt;
  char buf[64];
  ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  if (n <= 0) return std::nullopt;
  return parse_u64(std::string(buf, static_cast<size_t>(n)));
}

std::map<std::string, uint64_t> parse_keyed(const std::string& text) {
  std::map<std::string, uint64_t> out;
  std::istringstream in(text);
  std::string key, value;
  while (in >> key >> value) {
    if (auto v = parse_u64(value)) out[key] = *v;
  }
  return out;
}

std::map<std::string, uint64_t> read_keyed(const std::string& path) {
  auto text = read_file(path);
  return text ? parse_keyed(*text) : std::map<std::string, uint64_t>{};
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

}  // namespace fs
}  // namespace memrun
