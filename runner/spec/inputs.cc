#include "runner/spec/inputs.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <utility>

#include "runner/base/error.h"

namespace memrun {
namespace {

namespace stdfs = std::filesystem;

// The host's own files: dropping their cache makes every program on the
// host read its code again.
bool in_system_folder(const stdfs::path& p) {
  static const char* const kSystem[] = {"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32",
                                        "/proc", "/run", "/sbin", "/sys", "/usr", "/var/lib", "/var/cache"};
  if (p == "/") return true;
  for (const char* s : kSystem) {
    auto rel = p.lexically_relative(s);
    if (!rel.empty() && *rel.begin() != "..") return true;
  }
  return false;
}

bool kernel_filesystem(const std::string& path) {
  struct statfs fs {};
  if (::statfs(path.c_str(), &fs) != 0) return false;
  switch (static_cast<unsigned long>(fs.f_type)) {
    case PROC_SUPER_MAGIC: case SYSFS_MAGIC: case CGROUP_SUPER_MAGIC: case CGROUP2_SUPER_MAGIC:
    case DEBUGFS_MAGIC: case TRACEFS_MAGIC: case SECURITYFS_MAGIC: case BPF_FS_MAGIC: case DEVPTS_SUPER_MAGIC:
      return true;
    default: return false;
  }
}

const char* kind_of(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  return "not a regular file";
}

// The regular files below `dir` (symbolic links not followed), at most
// kMaxInputFiles + 1 of them.
std::vector<std::string> files_below(const std::string& dir, std::string* error) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = stdfs::recursive_directory_iterator(dir, stdfs::directory_options::skip_permission_denied, ec);
       !ec && it != stdfs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_symlink(ec) || !it->is_regular_file(ec)) continue;
    out.push_back(it->path().string());
    if (out.size() > kMaxInputFiles) break;
  }
  if (ec && error) *error = "cannot read the folder " + dir + ": " + ec.message();
  return out;
}

// `follow`: an input named in the spec may be a symbolic link (to a data
// set elsewhere, say), checked when the spec was read; a file found in a
// folder's walk may not (the walk skips links; O_NOFOLLOW covers one made
// since).
void evict_file(const std::string& path, bool follow) {
  // O_NONBLOCK: were it replaced by a FIFO since it was checked, open()
  // returns at once; fstat then refuses it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW) | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    // DONTNEED skips dirty pages: a file just written (by a setup, say)
    // must be written back first, or part of its cache stays. Only the
    // pages: fdatasync would also flush the disk's cache, some ms per file
    // even when nothing is dirty (20 s for 5000 clean files).
    ::sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  }
  ::close(fd);
}

}  // namespace

std::string input_refusal(const std::string& path, bool* missing) {
  if (missing) *missing = false;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      if (missing) *missing = true;
      return "";
    }
    return "cannot read the input " + path + ": " + std::strerror(errno);
  }
  std::error_code ec;
  stdfs::path real = stdfs::canonical(path, ec);
  if (ec) real = stdfs::path(path).lexically_normal();
  if (kernel_filesystem(path) || in_system_folder(real))
    return "the input " + path + (real.string() != path ? " (" + real.string() + ")" : "") +
           " is a system path: memrun drops the page cache of every input before each run, which there would "
           "slow every program on the host; copy what the test reads into the project, or leave it out of "
           "'inputs'";
  if (S_ISREG(st.st_mode)) return "";
  if (!S_ISDIR(st.st_mode))
    return "the input " + path + " is " + kind_of(st.st_mode) +
           ": inputs are files and folders whose page cache memrun drops before each run";
  std::string error;
  auto files = files_below(path, &error);
  if (!error.empty()) return error;
  if (files.size() > kMaxInputFiles)
    return "the input folder " + path + " holds more than " + std::to_string(kMaxInputFiles) +
           " files: memrun would walk and evict all of them before each run; name the files or folders the test "
           "reads";
  return "";
}

std::string evict_inputs(const std::vector<std::string>& paths) {
  for (const auto& path : paths) {
    bool missing = false;
    std::string why = input_refusal(path, &missing);
    if (missing) return "the input " + path + " does not exist";
    if (!why.empty()) return why;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      for (const auto& f : files_below(path, nullptr)) evict_file(f, false);
    } else {
      evict_file(path, true);
    }
  }
  return "";
}

Evictor::Evictor()
    : worker_([](std::pair<size_t, std::vector<std::string>>& job) { return Done{job.first, evict_inputs(job.second)}; }) {}

}  // namespace memrun
