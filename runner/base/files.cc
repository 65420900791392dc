#include "runner/base/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "runner/base/error.h"

namespace memrun {

namespace {

bool is_special(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
}

std::map<std::string, bool>& claimed() {
  static std::map<std::string, bool> kinds;
  return kinds;
}

}  // namespace

void claim_output(const std::string& path) {
  if (!path.empty()) claimed()[path] = is_special(path);
}

namespace {

// The umask, read without setting it: umask(0) then umask(mask) would
// leave, for that moment, every file another thread creates open to all.
// /proc/PID/status has said it since Linux 4.7; before, only umask(2) can.
mode_t process_umask() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Umask:", 0) == 0) return static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8));
  mode_t mask = ::umask(0);
  ::umask(mask);
  return mask;
}

}  // namespace

void write_atomically(const std::string& path, const std::function<void(const Sink&)>& produce) {
  auto it = claimed().find(path);
  bool special = (it == claimed().end() || it->second) && is_special(path);
  // The temp file's name is random and made with O_EXCL (mkostemp): no
  // link planted under a name memrun would use is ever followed.
  std::string tmp = special ? path : path + ".tmp.XXXXXX";
  int fd = special ? ::open(tmp.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC) : ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) throw_errno(Category::output, "cannot write the report " + path);
  if (!special) ::fchmod(fd, 0644 & ~process_umask());
  const std::string kept = "cannot write the report " + path + (special ? "" : " (the previous one is kept)");
  // Whatever fails, the temporary file goes and the previous report stays.
  auto fail = [&](const std::string& what) {
    int saved = errno;
    ::close(fd);
    if (!special) ::unlink(tmp.c_str());
    errno = saved;
    throw_errno(Category::output, what);
  };
  try {
    produce([&](const std::string& text) {
      size_t done = 0;
      while (done < text.size()) {
        ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw_errno(Category::output, kept);
        done += static_cast<size_t>(n);
      }
    });
  } catch (...) {
    ::close(fd);
    if (!special) ::unlink(tmp.c_str());
    throw;
  }
  if (!special && ::fsync(fd) != 0) fail(kept);
  ::close(fd);
  if (!special && ::rename(tmp.c_str(), path.c_str()) != 0) {
    int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    throw_errno(Category::output, "cannot write the report " + path);
  }
}

void write_atomically(const std::string& path, const std::string& text) {
  write_atomically(path, [&](const Sink& sink) { sink(text); });
}

std::string log_tail(const std::string& path, size_t max_lines) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  off_t size = ::lseek(fd, 0, SEEK_END);
  off_t from = std::max<off_t>(0, size - 4096);
  std::string buf(static_cast<size_t>(size - from), '\0');
  ssize_t n = ::pread(fd, buf.data(), buf.size(), from);
  ::close(fd);
  buf.resize(n > 0 ? static_cast<size_t>(n) : 0);
  while (!buf.empty() && buf.back() == '\n') buf.pop_back();
  size_t pos = buf.size(), lines = 0;
  while (pos > 0 && lines < max_lines) {
    pos = buf.rfind('\n', pos - 1);
    if (pos == std::string::npos) {
      pos = 0;
      break;
    }
    ++lines;
  }
  if (buf[pos] == '\n') ++pos;
  return buf.substr(pos);
}

std::vector<int> child_processes(int pid, std::vector<int>* threads) {
  std::vector<int> out;
  std::string task = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(task.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    if (threads) threads->push_back(std::atoi(e->d_name));
    std::istringstream in(read_proc(task + "/" + e->d_name + "/children"));
    for (int child; in >> child;) out.push_back(child);
  }
  ::closedir(d);
  return out;
}

namespace {

// Field `n` (4 or more) of /proc/PID/stat as a number; -1 when gone. The
// command name (field 2) may hold spaces and parentheses: fields are
// counted after its closing parenthesis.
int stat_field(int pid, int n) {
  std::string stat = read_proc("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream in(stat.substr(close + 1));
  std::string state;
  int value = -1;
  in >> state;  // field 3
  for (int i = 4; i <= n && in >> value; ++i) {
  }
  return value;
}

}  // namespace

int parent_process(int pid) { return stat_field(pid, 4); }

int session_of(int pid) { return stat_field(pid, 6); }

std::string read_proc(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[8192];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

int write_proc(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  ssize_t n;
  do n = ::write(fd, value.data(), value.size());
  while (n < 0 && errno == EINTR);
  int err = n < 0 ? errno : 0;
  ::close(fd);
  return err;
}

}  // namespace memrun
