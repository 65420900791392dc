#include "runner/run/tool_results.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include "runner/base/error.h"
#include "runner/spec/spec.h"

namespace memrun {

ToolResults::~ToolResults() {
  if (fd_ >= 0) ::close(fd_);
}

// Where the tool writes how the case ended: a memory file of the test's
// own (memfd, 3.17+), no path of the run's folder, which another test (at
// -j N, or a root test that mounts the disk again) could write. Named
// through a process that keeps it open while anything of the test runs:
// the test's init, /proc/1/fd/N (a test in a pid namespace sees no other
// /proc), else memrun. Never the test's own descriptors: GoogleTest opens
// the name at its end, when the case may have closed them, or opened
// another file under that number.
void ToolResults::ask(Command& cmd, bool gtest) {
  // Never executable (MFD_NOEXEC_SEAL, 6.3+, where a memory file without
  // MFD_EXEC or it draws a warning in the kernel's log).
  constexpr unsigned kNoExecSeal = 0x8;
  fd_ = static_cast<int>(::syscall(SYS_memfd_create, "memrun-results", MFD_CLOEXEC | kNoExecSeal));
  if (fd_ < 0 && errno == EINVAL) fd_ = static_cast<int>(::syscall(SYS_memfd_create, "memrun-results", MFD_CLOEXEC));
  if (fd_ < 0) throw_errno(Category::system, "memfd_create (the file a case writes how it ended to)");
  // GoogleTest takes GTEST_OUTPUT as it takes --gtest_output, and a wrapper
  // script passes the environment on where it may not pass an argument.
  // Once (getenv takes the first): the caller's or the suite's goes.
  std::string key = gtest ? "GTEST_OUTPUT=" : "MEMRUN_PYTEST_OUTCOME=";
  std::erase_if(cmd.env, [&](const std::string& kv) { return kv.rfind(key, 0) == 0; });
  if (cmd.pid_namespace) cmd.results_fd = fd_;
  std::string name = "/proc/" + (cmd.pid_namespace ? std::string("1") : std::to_string(::getpid())) + "/fd/" +
                     std::to_string(fd_);
  cmd.env.push_back(key + (gtest ? "xml:" : "") + name);
}

// A file past 64 MiB, a case's own messages, is no answer.
void ToolResults::read(const TestSpec& t, Observation& o) {
  if (fd_ < 0) return;
  struct stat st {};
  if (::fstat(fd_, &st) == 0) bytes_ = static_cast<uint64_t>(st.st_blocks) * 512;
  std::string text;
  if (o.ending == Ending::exited) {
    constexpr size_t kMax = 64u << 20;
    char chunk[65536];
    ssize_t n;
    while (static_cast<uint64_t>(st.st_size) <= kMax && text.size() <= kMax &&
           (n = ::pread(fd_, chunk, sizeof chunk, static_cast<off_t>(text.size()))) > 0)
      text.append(chunk, static_cast<size_t>(n));
    if (static_cast<uint64_t>(st.st_size) <= kMax && text.size() <= kMax)
      o.tool_said = said_in_results(t.rules, text, t.argv);
  }
  ::close(fd_);
  fd_ = -1;
}

}  // namespace memrun
