#include "cgroup/fs.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <map>
#include <set>
#include <sstream>

#include "cgroup/error.h"

namespace memrun {

namespace cgroup {
void fail_errno(Failure::Kind kind, const std::string& what, const std::string& path) {
  throw Failure(kind, what + ": " + std::strerror(errno), errno, path);
}
}  // namespace cgroup

namespace fs {

int open_path(const std::string& path, int flags) {
  if (path.size() < PATH_MAX) return ::open(path.c_str(), flags);
  int dir = AT_FDCWD;
  std::string rest = path;
  while (rest.size() >= PATH_MAX) {
    size_t cut = rest.rfind('/', PATH_MAX - 1);
    if (cut == std::string::npos || cut == 0) {
      if (dir != AT_FDCWD) ::close(dir);
      errno = ENAMETOOLONG;  // a single name longer than a path may be
      return -1;
    }
    int next = ::openat(dir, rest.substr(0, cut).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    int saved = errno;
    if (dir != AT_FDCWD) ::close(dir);
    errno = saved;
    if (next < 0) return -1;
    dir = next;
    rest.erase(0, cut + 1);
  }
  int fd = ::openat(dir, rest.c_str(), flags);
  int saved = errno;
  if (dir != AT_FDCWD) ::close(dir);
  errno = saved;
  return fd;
}

namespace {

// The process's inotify instance, its watches, and those it has seen
// written (an overflow of its queue counts as a write to every watch).
struct Writes {
  std::mutex lock;
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  std::set<int> watching, written;
  std::map<int, std::map<std::string, int>> made;  // watch_made's: the folders' names, how often each
};

// Reads what the instance queued; the lock is held.
void drain(Writes& w) {
  alignas(inotify_event) char events[4096];
  for (ssize_t n; (n = ::read(w.fd, events, sizeof events)) > 0;)
    for (ssize_t at = 0; at < n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(events + at);
      if (e->mask & (IN_MODIFY | IN_CREATE)) w.written.insert(e->wd);
      if ((e->mask & IN_CREATE) && e->len > 0) ++w.made[e->wd][e->name];
      // Events were lost: any watch there was then may have been written.
      if (e->mask & IN_Q_OVERFLOW) w.written.insert(w.watching.begin(), w.watching.end());
      at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
    }
}

Writes& writes() {
  static Writes* w = new Writes;  // never closed: see watch_writes
  return *w;
}

}  // namespace

namespace {

std::vector<int> watch(const std::vector<std::string>& paths, uint32_t mask) {
  Writes& w = writes();
  std::lock_guard<std::mutex> hold(w.lock);
  std::vector<int> watches;
  if (w.fd < 0) return watches;
  for (const auto& f : paths)
    if (int wd = ::inotify_add_watch(w.fd, f.c_str(), mask); wd >= 0)
      watches.push_back(wd), w.watching.insert(wd), w.written.erase(wd);
  return watches;
}

}  // namespace

std::vector<int> watch_writes(const std::vector<std::string>& files) { return watch(files, IN_MODIFY); }

std::vector<int> watch_made(const std::string& dir) { return watch({dir}, IN_CREATE | IN_ONLYDIR); }

bool any_written(const std::vector<int>& watches) {
  Writes& w = writes();
  std::lock_guard<std::mutex> hold(w.lock);
  if (w.fd < 0 || watches.empty()) return false;
  drain(w);
  for (int wd : watches)
    if (w.written.count(wd)) return true;
  return false;
}

bool any_made_but(const std::vector<int>& watches, const std::map<std::string, int>& but) {
  Writes& w = writes();
  std::lock_guard<std::mutex> hold(w.lock);
  if (w.fd < 0 || watches.empty()) return false;
  drain(w);
  for (int wd : watches) {
    if (!w.written.count(wd)) continue;
    auto made = w.made.find(wd);
    // Written with no name known (an overflow): it may have been anything.
    if (made == w.made.end()) return true;
    for (const auto& [name, times] : made->second) {
      auto ours = but.find(name);
      if (ours == but.end() || times > ours->second) return true;
    }
  }
  return false;
}

void unwatch(std::vector<int>& watches) {
  Writes& w = writes();
  std::lock_guard<std::mutex> hold(w.lock);
  for (int wd : watches) {
    if (w.fd >= 0) ::inotify_rm_watch(w.fd, wd);
    w.watching.erase(wd), w.written.erase(wd), w.made.erase(wd);
  }
  watches.clear();
}

int writes_seen(const std::string& file, const std::string& value) {
  auto watches = watch_writes({file});
  int error = watches.empty() ? -1 : try_write_file(file, value);
  if (error == 0 && !any_written(watches)) error = -1;
  unwatch(watches);
  return error;
}

int remove_dir_path(const std::string& path) {
  if (path.size() < PATH_MAX) return ::rmdir(path.c_str());
  size_t slash = path.rfind('/');
  int parent = open_path(path.substr(0, slash), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (parent < 0) return -1;
  int rc = ::unlinkat(parent, path.c_str() + slash + 1, AT_REMOVEDIR);
  int saved = errno;
  ::close(parent);
  errno = saved;
  return rc;
}

using cgroup::Failure;
using cgroup::fail_errno;

std::optional<std::string> read_file(const std::string& path) {
  int fd = open_path(path, O_RDONLY | O_CLOEXEC);
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
  int fd = open_path(path, O_WRONLY | O_CLOEXEC);
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

std::map<std::string, uint64_t> read_keyed_at(int fd) {
  char buf[4096];
  ssize_t n = fd < 0 ? -1 : ::pread(fd, buf, sizeof buf, 0);
  return n > 0 ? parse_keyed(std::string(buf, static_cast<size_t>(n))) : std::map<std::string, uint64_t>{};
}

bool exists(const std::string& path) {
  if (path.size() < PATH_MAX) return ::access(path.c_str(), F_OK) == 0;
  int fd = open_path(path, O_PATH | O_CLOEXEC);
  if (fd >= 0) ::close(fd);
  return fd >= 0;
}

}  // namespace fs
}  // namespace memrun
