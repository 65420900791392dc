// memrun-workload: a program with a known memory behaviour, for tests and
// benchmarks. It touches exactly what it is told to, so a kernel peak can be
// checked against it.
//
//   memrun-workload --touch 100MiB --hold 200ms
//   memrun-workload --children 4 --touch 40MiB      (the tree counts)
//   memrun-workload --touch 64MiB --spike 256MiB --loops 5   (inflate/deflate)
//   memrun-workload --daemon PIDFILE --hold 1h      (a setsid grandchild)
//   memrun-workload --shm 64MiB                      (tmpfs, charged as shmem)
//   memrun-workload --arrive DIR --await 2 --touch 1MiB (a barrier: overlap made certain)
//   memrun-workload --touch 50MiB --until FILE       (hold until the test says so)
//   memrun-workload --tcp-queue 256MiB               (socket buffers nobody reads)
//   memrun-workload --heap 10MiB,200MiB              (malloc'd in two functions: profilers name them)
//   memrun-workload --thread-away DIR --pipes 256    (one thread leaves alone, fills pipes, comes back)
//   memrun-workload --thread-away DIR --whole ...    (the whole process does)
//   memrun-workload --threads 1000 --hold 10s        (idle threads)
//   memrun-workload --born-in DIR --born-touch 200MiB (a child born in DIR touches, exits)
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "runner/base/units.h"

namespace {

// Maps and touches `bytes` of anonymous memory, one write per page, so every
// page is really backed (and charged).
char* touch(uint64_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::exit(3);
  }
  char* c = static_cast<char*>(p);
  for (uint64_t i = 0; i < bytes; i += 4096) c[i] = 1;
  return c;
}

// Two allocation sites an allocation profiler must tell apart (explain's
// tests): each mallocs and touches its bytes in a function of its own,
// never inlined, so that the stack names it (different bytes: identical
// bodies would be folded into one). The memory is kept.
__attribute__((noinline)) char* heap_small_site(uint64_t bytes) {
  auto* p = static_cast<char*>(std::malloc(bytes));
  for (uint64_t i = 0; p && i < bytes; i += 4096) p[i] = 1;
  asm volatile("" : : "r"(p) : "memory");
  return p;
}
__attribute__((noinline)) char* heap_big_site(uint64_t bytes) {
  auto* p = static_cast<char*>(std::malloc(bytes));
  for (uint64_t i = 0; p && i < bytes; i += 4096) p[i] = 2;
  asm volatile("" : : "r"(p) : "memory");
  return p;
}

uint64_t size_arg(const std::string& s) {
  if (s.empty()) return 0;
  std::string why;
  auto v = memrun::parse_size(s, &why);
  if (!v) {
    std::fprintf(stderr, "memrun-workload: %s\n", why.c_str());
    std::exit(2);
  }
  return *v;
}

void sleep_for(const std::string& d) {
  if (d.empty()) return;
  std::string why;
  auto ms = memrun::parse_duration(d, &why);
  if (!ms) {
    std::fprintf(stderr, "memrun-workload: %s\n", why.c_str());
    std::exit(2);
  }
  std::this_thread::sleep_for(*ms);
}

// Polls every 5 ms until `ready()` holds or `bound` has passed; tests use
// it to wait for an event (a file, a partner test), never a fixed sleep.
template <typename Ready>
bool wait_until(Ready ready, std::chrono::seconds bound) {
  auto end = std::chrono::steady_clock::now() + bound;
  while (!ready()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

size_t entries(const std::string& dir) {
  std::error_code ec;
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec))
    ++n;
  return n;
}

// A barrier between tests that must run at the same moment: notes this
// process in `dir`, then waits until `count` have. Exits 3 after 300 s (an
// emulated CPU under load starts forty tests in over a minute), so a
// runner that never ran them together fails the test instead of hanging it.
void arrive(const std::string& dir, int count) {
  if (dir.empty()) return;
  // A name of its own (mkstemp): tests in pid namespaces of their own
  // share pid numbers.
  std::string mark = dir + "/arrived-XXXXXX";
  int fd = ::mkstemp(mark.data());
  if (fd >= 0) ::close(fd);
  if (!wait_until([&] { return entries(dir) >= static_cast<size_t>(count); }, std::chrono::seconds(300))) {
    std::fprintf(stderr, "memrun-workload: only %zu of %d tests reached the barrier in %s within 300 s\n",
                 entries(dir), count, dir.c_str());
    std::exit(3);
  }
}

// Queues `bytes` in TCP buffers on 127.0.0.1 that nobody reads: connections
// to a listener of its own, each written to until the kernel takes no more
// (its send and receive buffers are full), then the next. Returns 0 once
// all is queued (the sockets stay open until exit), 3 when the kernel
// refuses more: eight connections in a row that took under 64 KiB each.
int queue_tcp(uint64_t bytes) {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener, 64) != 0 || ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("memrun-workload: listen on 127.0.0.1");
    return 3;
  }
  std::vector<char> block(64 << 10, 'x');
  uint64_t queued = 0;
  int refused = 0;
  for (int n = 0; queued < bytes && refused < 8 && n < 4096; ++n) {
    int out = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (out < 0 || ::connect(out, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::fcntl(out, F_SETFL, O_NONBLOCK) != 0) {
      std::perror("memrun-workload: connect to 127.0.0.1");
      return 3;
    }
    int in = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);  // kept open, never read
    if (in < 0) {
      std::perror("memrun-workload: accept");
      return 3;
    }
    uint64_t before = queued;
    for (;;) {
      ssize_t sent = ::send(out, block.data(), block.size(), MSG_NOSIGNAL);
      if (sent > 0) {
        queued += static_cast<uint64_t>(sent);
        if (queued >= bytes) break;
        continue;
      }
      // Full for now: loopback moves what was sent into the receiver's
      // queue at once; a moment more, then the next connection.
      pollfd p{out, POLLOUT, 0};
      if (sent < 0 && errno == EAGAIN && ::poll(&p, 1, 20) == 1 && (p.revents & POLLOUT)) continue;
      break;
    }
    refused = queued - before < block.size() ? refused + 1 : 0;
  }
  if (queued >= bytes) return 0;
  std::fprintf(stderr, "memrun-workload: the kernel took only %llu of %llu bytes into TCP buffers\n",
               static_cast<unsigned long long>(queued), static_cast<unsigned long long>(bytes));
  return 3;
}

// The cgroup folder of the calling thread, on the mounts this process sees:
// its memory hierarchy's line on v1, else the unified one's.
std::string own_group() {
  std::ifstream in("/proc/thread-self/cgroup");
  std::string unified;
  for (std::string line; std::getline(in, line);) {
    auto first = line.find(':'), second = line.find(':', first + 1);
    std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
    if (("," + controllers + ",").find(",memory,") != std::string::npos) return "/sys/fs/cgroup/memory" + path;
    if (controllers.empty()) unified = "/sys/fs/cgroup" + path;
  }
  return unified;
}

// Writes the calling thread alone into the group `dir`: v1's `tasks`, v2's
// `cgroup.threads` (which takes a thread only within its threaded subtree);
// `whole`: its whole process, into `cgroup.procs`.
bool move_thread(const std::string& dir, bool whole = false) {
  std::string tid = std::to_string(whole ? ::getpid() : ::syscall(SYS_gettid));
  bool v1 = std::filesystem::exists(dir + "/tasks");
  std::string list = whole ? "/cgroup.procs" : v1 ? "/tasks" : "/cgroup.threads";
  int fd = ::open((dir + list).c_str(), O_WRONLY | O_CLOEXEC);
  bool moved = fd >= 0 && ::write(fd, tid.data(), tid.size()) == static_cast<ssize_t>(tid.size());
  if (fd >= 0) ::close(fd);
  return moved;
}

// One thread leaves the process's group alone for `dir`, fills `pipes`
// pipes of 1 MiB there (a pipe's buffer is charged to the group of the
// thread that writes it), stays `away`, and writes itself back. The pipes
// stay open until the process exits. 3: the kernel refused the move out.
// `whole`: the whole process leaves and comes back.
int thread_away(const std::string& dir, int pipes, const std::string& away, bool whole) {
  int result = 0;
  std::vector<int> kept;
  std::thread([&] {
    std::string home = own_group();
    if (!move_thread(dir, whole)) {
      std::perror(("memrun-workload: move a thread to " + dir).c_str());
      result = 3;
      return;
    }
    std::string block(1 << 20, 'p');
    for (int i = 0; i < pipes; ++i) {
      int p[2];
      if (::pipe2(p, O_CLOEXEC) != 0 || ::fcntl(p[1], F_SETPIPE_SZ, 1 << 20) < 0) break;
      if (::write(p[1], block.data(), block.size()) < 0) break;
      kept.push_back(p[0]), kept.push_back(p[1]);
    }
    sleep_for(away);
    if (!move_thread(home, whole)) std::perror(("memrun-workload: move the thread back to " + home).c_str());
  }).join();
  return result;
}

// A child born in the group `dir` (clone3 with CLONE_INTO_CGROUP, v2 and
// 5.7+: it is never moved, so no migration is recorded) touches `bytes`
// there and exits; the parent waits for it. 3: the kernel refused the
// clone (a v1 group: EBADF) or the child failed.
int born_in(const std::string& dir, uint64_t bytes) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return 3;
  struct clone_args args;
  std::memset(&args, 0, sizeof args);
  args.flags = CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<uint64_t>(fd);
  pid_t child = static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
  if (child == 0) {
    touch(bytes);
    ::_exit(0);
  }
  ::close(fd);
  if (child < 0) {
    std::perror(("memrun-workload: clone3 into " + dir).c_str());
    return 3;
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  std::string touch_s, spike_s, hold, shm_s, daemon_pidfile, arrive_dir, until, hugetlb_s, tcp_s, heap_s;
  int children = 0, loops = 0, exit_code = 0, await = 2;
  CLI::App app{"a workload with a known memory behaviour"};
  app.add_option("--touch", touch_s, "anonymous memory to touch and keep");
  app.add_option("--children", children, "fork this many children, each doing --touch");
  app.add_option("--spike", spike_s, "extra memory touched then freed, --loops times");
  app.add_option("--loops", loops, "inflate/deflate cycles of --spike");
  app.add_option("--hold", hold, "sleep this long before exiting (e.g. 200ms)");
  app.add_option("--shm", shm_s, "write this much to a file in /dev/shm (kept until exit)");
  app.add_option("--daemon", daemon_pidfile, "start a setsid'd grandchild sleeping forever; write its pid here");
  app.add_option("--exit", exit_code, "exit with this code");
  app.add_option("--arrive", arrive_dir,
                 "note this process in DIR and wait until --await processes have (with --children: each child, "
                 "after touching)");
  app.add_option("--await", await, "how many must reach the --arrive barrier (default 2)");
  app.add_option("--until", until, "after touching, wait until this file exists (at most 120 s)");
  app.add_option("--hugetlb", hugetlb_s, "map this much with MAP_HUGETLB (2 MiB pages) and touch it");
  app.add_option("--tcp-queue", tcp_s, "queue this much in TCP loopback buffers nobody reads; exit 3 if refused");
  std::string thread_dir, away = "0s";
  bool away_whole = false;
  int pipes = 0, threads = 0;
  app.add_option("--thread-away", thread_dir, "one thread moves alone to this cgroup, fills --pipes, comes back");
  app.add_option("--pipes", pipes, "with --thread-away: pipes of 1 MiB to fill while away");
  app.add_option("--away", away, "with --thread-away: how long it stays away (e.g. 2s)");
  app.add_flag("--whole", away_whole, "with --thread-away: the whole process moves, not one thread");
  app.add_option("--threads", threads, "start this many threads that sleep until the process exits");
  std::string born_dir, born_touch;
  app.add_option("--born-in", born_dir, "a child born in this cgroup (clone3 CLONE_INTO_CGROUP) does --born-touch, exits");
  app.add_option("--born-touch", born_touch, "with --born-in: memory the child touches there");
  std::string map_file;
  app.add_option("--heap", heap_s, "SMALL,BIG: malloc and touch SMALL in heap_small_site(), then BIG in heap_big_site()");
  app.add_option("--map", map_file, "map this file and read a byte of each page, over and over, forever");
  CLI11_PARSE(app, argc, argv);
  if (!map_file.empty()) {
    // A working set that is the whole file: every page is needed again on
    // the next pass, as a program's code is.
    int fd = ::open(map_file.c_str(), O_RDONLY);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0 || st.st_size == 0) return 3;
    void* m = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) return 3;
    auto* p = static_cast<volatile const unsigned char*>(m);
    unsigned sum = 0;
    for (;;)
      for (off_t at = 0; at < st.st_size; at += 4096) sum += p[at];
  }
  // With --children, each child arrives once it has touched its memory (so
  // that the whole tree certainly holds it at once); else the process does,
  // before anything else.
  if (children == 0) arrive(arrive_dir, await);

  if (!daemon_pidfile.empty()) {
    pid_t a = ::fork();
    if (a == 0) {
      ::setsid();
      pid_t b = ::fork();
      if (b == 0) {
        for (;;) ::pause();
      }
      FILE* f = std::fopen(daemon_pidfile.c_str(), "w");
      // The pid as this pid namespace numbers it, and which namespace that
      // is (a sealed test has its own): see pid_in_file in harness.h.
      char ns[64] = {0};
      ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
      if (n < 0) ns[0] = 0;
      if (f) {
        std::fprintf(f, "%d %s\n", b, ns);
        std::fclose(f);
      }
      ::_exit(0);
    }
    ::waitpid(a, nullptr, 0);
  }

  uint64_t bytes = size_arg(touch_s);
  if (children > 0) {
    int failed = 0, status;
    std::vector<pid_t> pids;
    for (int i = 0; i < children; ++i) {
      pid_t pid = ::fork();
      if (pid < 0) {
        std::perror("fork");
        ++failed;
      } else if (pid > 0) {
        pids.push_back(pid);
      } else {
        touch(bytes);
        arrive(arrive_dir, await);
        sleep_for(hold);
        ::_exit(0);
      }
    }
    // A child that died (an OOM kill of one process, as v1 does) ends the
    // tree: the others would wait at the barrier for it in vain.
    while (::wait(&status) > 0)
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && ++failed == 1)
        for (pid_t pid : pids) ::kill(pid, SIGKILL);
    return failed ? 1 : exit_code;
  }
  touch(bytes);

  if (!heap_s.empty()) {
    auto comma = heap_s.find(',');
    if (comma == std::string::npos) {
      std::fprintf(stderr, "memrun-workload: --heap wants SMALL,BIG (e.g. 10MiB,200MiB)\n");
      return 2;
    }
    if (!heap_small_site(size_arg(heap_s.substr(0, comma))) || !heap_big_site(size_arg(heap_s.substr(comma + 1))))
      return 3;
  }

  if (!shm_s.empty()) {
    std::string path = "/dev/shm/memrun-workload." + std::to_string(::getpid());
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return 3;
    ::unlink(path.c_str());  // freed when the fd closes: nothing left behind
    std::string block(1 << 20, 'x');
    for (uint64_t done = 0, want = size_arg(shm_s); done < want; done += block.size())
      if (::write(fd, block.data(), block.size()) < 0) return 3;
  }

  if (uint64_t huge = size_arg(hugetlb_s)) {
    void* p = ::mmap(nullptr, huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    if (p == MAP_FAILED) {
      std::perror("mmap(MAP_HUGETLB)");
      return 3;
    }
    for (uint64_t i = 0; i < huge; i += 2 << 20) static_cast<char*>(p)[i] = 1;
  }

  if (uint64_t tcp = size_arg(tcp_s); tcp && queue_tcp(tcp) != 0) return 3;
  if (!thread_dir.empty() && thread_away(thread_dir, pipes, away, away_whole) != 0) return 3;
  if (!born_dir.empty() && born_in(born_dir, size_arg(born_touch)) != 0) return 3;
  for (int i = 0; i < threads; ++i) std::thread([] { for (;;) ::pause(); }).detach();

  uint64_t spike = size_arg(spike_s);
  for (int i = 0; i < loops && spike; ++i) {
    char* p = touch(spike);
    ::munmap(p, spike);
  }
  if (!until.empty() && !wait_until([&] { return std::filesystem::exists(until); }, std::chrono::seconds(120))) {
    std::fprintf(stderr, "memrun-workload: %s did not appear within 120 s\n", until.c_str());
    return 3;
  }
  sleep_for(hold);
  return exit_code;
}
