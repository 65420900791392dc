#include "cgroup/moves.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cgroup/error.h"
#include "cgroup/fs.h"
#include "cgroup/problem.h"

namespace memrun::cgroup {
namespace {

constexpr const char* kTracefs = "/sys/kernel/tracing";
constexpr uint64_t kCloneIntoCgroup = 0x200000000ull;  // linux/sched.h, 5.7+

[[noreturn]] void cannot_watch(const std::string& detail, int err = 0) {
  Problem p = make_problem(Problem::Kind::no_move_watch, "", kTracefs, detail);
  p.error = err;
  unenforceable(p);
}

// Where tracefs is mounted; "" where it is not.
std::string mounted_tracefs() {
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    // "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS ... - FSTYPE SOURCE ..."
    std::istringstream fields(line);
    std::string skip, point, word;
    fields >> skip >> skip >> skip >> skip >> point;
    while (fields >> word && word != "-") {}
    if (fields >> word && word == "tracefs" && point.find('\\') == std::string::npos) return point;
  }
  return "";
}

// Where tracefs is mounted, mounting it at its usual place where it is not.
std::string tracefs() {
  if (auto point = mounted_tracefs(); !point.empty()) return point;
  if (::mount("nodev", kTracefs, "tracefs", 0, nullptr) != 0)
    cannot_watch("tracefs is not mounted and cannot be (mount: " + std::string(std::strerror(errno)) + ")", errno);
  return kTracefs;
}

// The hierarchy that holds the memory controller, as the kernel numbers it
// (/proc/cgroups; 0: the unified one, cgroup v2).
int memory_hierarchy() {
  std::istringstream in(fs::read_file("/proc/cgroups").value_or(""));
  for (std::string name, hierarchy, rest; in >> name >> hierarchy && std::getline(in, rest);)
    if (name == "memory") return std::atoi(hierarchy.c_str());
  return 0;
}

void set_control(const std::string& dir, const std::string& file, const std::string& value) {
  if (fs::try_write_file(dir + "/" + file, value) != 0)
    cannot_watch("cannot write '" + value + "' to " + dir + "/" + file + " (" + std::strerror(errno) + ")", errno);
}

template <typename T>
T at(const unsigned char* data, size_t offset) {
  T value;
  std::memcpy(&value, data + offset, sizeof value);
  return value;
}

}  // namespace

MoveWatch::Field MoveWatch::Format::operator[](const std::string& name) const {
  for (const auto& [n, f] : fields)
    if (n == name) return f;
  cannot_watch("the kernel's event has no field '" + name + "'");
}

// "name: cgroup_attach_task / ID: 538 / format: / field:int pid;<TAB>offset:24;<TAB>size:4;..."
MoveWatch::Format MoveWatch::format_of(const std::string& file) {
  auto text = fs::read_file(file);
  if (!text) cannot_watch("cannot read " + file + " (" + std::strerror(errno) + ")", errno);
  Format f;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("ID: ", 0) == 0) f.id = std::atoi(line.c_str() + 4);
    auto field = line.find("field:"), offset = line.find("offset:"), size = line.find("size:");
    if (field == std::string::npos || offset == std::string::npos || size == std::string::npos) continue;
    std::string decl = line.substr(field + 6, line.find(';', field) - field - 6);
    auto name_at = decl.find_last_of(" \t");
    std::string name = name_at == std::string::npos ? decl : decl.substr(name_at + 1);
    f.fields.push_back({name, {std::strtoul(line.c_str() + offset + 7, nullptr, 10),
                               std::strtoul(line.c_str() + size + 5, nullptr, 10)}});
  }
  return f;
}

// The tracepoints name tasks by their pid in the initial pid namespace;
// a watcher inside one of its own (a container) knows its tasks by others
// ("NSpid:" of /proc/self/status lists a pid a level).
static bool in_own_pid_namespace() {
  std::istringstream in(fs::read_file("/proc/self/status").value_or(""));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("NSpid:", 0) == 0) {
      std::istringstream pids(line.substr(6));
      int n = 0;
      for (std::string pid; pids >> pid;) ++n;
      return n > 1;
    }
  return false;
}

std::unique_ptr<MoveWatch> MoveWatch::open(const std::string& name) {
  if (in_own_pid_namespace())
    cannot_watch("this process runs in a pid namespace of its own, and the kernel's record names tasks by the "
                 "host's pids");
  std::string root = tracefs();
  std::unique_ptr<MoveWatch> w(new MoveWatch);
  std::string dir = root + "/instances/" + name;
  if (::mkdir(dir.c_str(), 0700) != 0)
    cannot_watch("cannot make the tracefs instance " + dir + " (" + std::strerror(errno) + ")", errno);
  w->dir_ = dir;  // removed by close() from here on (or remove_stale())
  auto set = [&](const std::string& file, const std::string& value) { set_control(dir, file, value); };
  w->attach_ = format_of(dir + "/events/cgroup/cgroup_attach_task/format");
  w->fork_ = format_of(dir + "/events/sched/sched_process_fork/format");
  for (const char* f : {"common_pid", "dst_root", "pid", "dst_path"}) (void)w->attach_[f];
  for (const char* f : {"parent_pid", "child_pid"}) (void)w->fork_[f];
  // CLONE_INTO_CGROUP takes a v2 group only (cgroup_css_set_fork():
  // EBADF otherwise): a child's v1 memory group is always its parent's.
  if (memory_hierarchy() == 0) w->watch_births(dir);
  Format header = format_of(root + "/events/header_page");
  w->data_offset_ = header["data"].offset;
  w->commit_size_ = header["commit"].size;
  // A full buffer drops the new events. The page's RB_MISSED_EVENTS says
  // only what overwriting lost (rb_move_tail() counts drops apart, in
  // "dropped events"): read() compares each CPU's stats instead.
  set("options/overwrite", "0");
  set("buffer_size_kb", "1024");
  // Each CPU has a buffer of its own: read one after the other, a child's
  // fork can come before its parent's. Their times on CLOCK_MONOTONIC
  // order them (read() cuts at its own start).
  set("trace_clock", "mono");
  set("events/cgroup/cgroup_attach_task/filter", "dst_root == " + std::to_string(memory_hierarchy()));
  set("events/cgroup/cgroup_attach_task/enable", "1");
  set("events/sched/sched_process_fork/enable", "1");
  std::error_code ec;
  for (const auto& cpu : std::filesystem::directory_iterator(dir + "/per_cpu", ec)) {
    std::string pipe = cpu.path().string() + "/trace_pipe_raw";
    int fd = ::open(pipe.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) cannot_watch("cannot open " + pipe + " (" + std::strerror(errno) + ")", errno);
    ::close(fd);
    w->cpus_.push_back(pipe);
  }
  if (w->cpus_.empty()) cannot_watch("no CPU in " + dir + "/per_cpu");
  w->page_.resize(1 << 16);
  for (size_t i = 0; i < w->cpus_.size(); ++i) w->counts_.push_back(w->counts_on(i));
  w->guard();
  return w;
}

// Births into a group (v2): the clones with CLONE_INTO_CGROUP, and the
// groups that became populated (see place_births()).
void MoveWatch::watch_births(const std::string& dir) {
  newtask_ = format_of(dir + "/events/task/task_newtask/format");
  for (const char* f : {"common_pid", "pid", "clone_flags"}) (void)newtask_[f];
  if (newtask_["clone_flags"].size != 8)  // an unsigned long of a 32-bit kernel
    cannot_watch("the kernel's record of a new task cannot say CLONE_INTO_CGROUP (clone_flags is not 64-bit)");
  populated_ = format_of(dir + "/events/cgroup/cgroup_notify_populated/format");
  for (const char* f : {"common_pid", "path", "val"}) (void)populated_[f];
  set_control(dir, "events/task/task_newtask/filter", "clone_flags & " + std::to_string(kCloneIntoCgroup));
  set_control(dir, "events/task/task_newtask/enable", "1");
  set_control(dir, "events/cgroup/cgroup_notify_populated/filter", "root == 0 && val == 1");
  set_control(dir, "events/cgroup/cgroup_notify_populated/enable", "1");
}

void MoveWatch::guard() {
  // What would make the record lie, written by anyone from now on (a test
  // that reaches tracefs unsealed): events or tracing turned off, a
  // filter, the buffer cleared or resized. inotify sees each write
  // (vfs_write's IN_MODIFY, a truncation's too); the instance made again
  // under the same name has another inode.
  std::vector<std::string> guarded;
  for (const char* f : {"tracing_on", "options/overwrite", "buffer_size_kb", "trace_clock", "trace", "events/enable",
                        "events/cgroup/enable", "events/sched/enable", "events/cgroup/cgroup_attach_task/enable",
                        "events/cgroup/cgroup_attach_task/filter", "events/sched/sched_process_fork/enable",
                        "events/sched/sched_process_fork/filter", "events/task/enable",
                        "events/task/task_newtask/enable", "events/task/task_newtask/filter",
                        "events/cgroup/cgroup_notify_populated/enable", "events/cgroup/cgroup_notify_populated/filter"})
    guarded.push_back(dir_ + "/" + f);
  for (const auto& pipe : cpus_) {
    std::string cpu = pipe.substr(0, pipe.rfind('/'));
    guarded.push_back(cpu + "/trace");
    guarded.push_back(cpu + "/buffer_size_kb");
  }
  guards_ = fs::watch_writes(guarded);
  struct stat st {};
  if (::stat(dir_.c_str(), &st) == 0) dir_ino_ = st.st_ino;
}

MoveWatch::Counts MoveWatch::counts_on(size_t cpu) const {
  std::string stats = cpus_[cpu].substr(0, cpus_[cpu].rfind('/')) + "/stats";
  std::istringstream in(fs::read_file(stats).value_or(""));
  Counts c;
  auto value = [&](const std::string& line, const char* key) {
    return std::strtoull(line.c_str() + std::strlen(key), nullptr, 10);
  };
  for (std::string line; std::getline(in, line);) {
    for (const char* key : {"overrun: ", "commit overrun: ", "dropped events: "})
      if (line.rfind(key, 0) == 0) c.lost += value(line, key);
    if (line.rfind("read events: ", 0) == 0) c.read = value(line, "read events: ");
  }
  return c;
}

bool MoveWatch::intact() const {
  struct stat st {};
  return !fs::any_written(guards_) && ::stat(dir_.c_str(), &st) == 0 && st.st_ino == dir_ino_;
}

void MoveWatch::close() {
  fs::unwatch(guards_);
  if (!dir_.empty()) ::rmdir(dir_.c_str());
  dir_.clear();
}

MoveWatch::~MoveWatch() { fs::unwatch(guards_); }

// The group each birth populated, where it populated one: a clone into
// a group with no task makes cgroup_post_fork() trace each group that
// became populated, the child's own first, in the cloning thread, before
// task_newtask. A move populates too (and is traced after it): each
// population is its thread's next move's or birth's. Everything before the
// cut is drained (see read()): a population is placed once its thread's
// next event is before the cut, and forgotten a read later.
void MoveWatch::place_births(uint64_t cut) {
  std::stable_sort(filled_.begin(), filled_.end(), [](const Filled& a, const Filled& b) { return a.ns < b.ns; });
  std::set<const Event*> placed;
  for (auto f = filled_.begin(); f != filled_.end();) {
    auto next = std::find_if(held_.begin(), held_.end(), [&](const Event& e) {
      return e.kind != Event::Kind::fork && e.by == f->by && e.ns >= f->ns;
    });
    if (f->ns >= cut || next == held_.end() || next->ns >= cut) {
      ++f;
      continue;
    }
    if (next->kind == Event::Kind::born && placed.insert(&*next).second) next->path = f->path;
    f = filled_.erase(f);
  }
  std::erase_if(filled_, [&](const Filled& f) { return f.ns < last_cut_; });
  last_cut_ = cut;
}

// Where each task born from `from` on is now, read as soon as the
// buffers are drained (the sooner, the likelier it still lives), for a
// birth that populated no group (place_births()). A task gone, or whose
// id a later fork took again (pid_max can be 32768), keeps "": not known.
void MoveWatch::read_births(std::vector<Event>& events, size_t from) const {
  for (size_t i = from; i < events.size(); ++i) {
    Event& born = events[i];
    if (born.kind != Event::Kind::born) continue;
    std::istringstream in(fs::read_file("/proc/" + std::to_string(born.task) + "/cgroup").value_or(""));
    for (std::string line; std::getline(in, line);)
      if (line.rfind("0::", 0) == 0) born.path = line.substr(3);
    // Its own fork comes after it (kernel_clone() traces it after
    // copy_process()): a second fork, or a birth, is a new task.
    int forks = 0;
    bool reborn = false;
    for (const auto& e : events) {
      if (e.task != born.task || e.ns <= born.ns) continue;
      forks += e.kind == Event::Kind::fork;
      reborn = reborn || e.kind == Event::Kind::born;
    }
    if (forks > 1 || reborn) born.path.clear();
  }
}

bool MoveWatch::read(std::vector<Event>& out) {
  // What happened before the cut is in the buffers now; what a CPU
  // records while another is read waits for the next call, so that no
  // event is handed out before one that came earlier.
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  uint64_t cut = static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
  bool whole = true;
  size_t fresh = held_.size();
  for (size_t i = 0; i < cpus_.size(); ++i) {
    int fd = ::open(cpus_[i].c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      whole = false;  // (the instance was removed under us)
      continue;
    }
    uint64_t taken = 0;
    for (;;) {
      // One sub-buffer (a page) a read, as much of it as was written.
      ssize_t n = ::read(fd, page_.data(), page_.size());
      if (n <= 0) break;
      whole = parse_page(page_.data(), static_cast<size_t>(n), held_, taken) && whole;
    }
    ::close(fd);
    // The kernel counts each event a reader takes (rb_advance_reader(),
    // or a page's entries when it hands a whole one over): more than this
    // read took, another reader took the rest.
    Counts counts = counts_on(i);
    whole = whole && counts.lost == counts_[i].lost && counts.read - counts_[i].read == taken;
    counts_[i] = counts;
  }
  read_births(held_, fresh);
  whole = whole && intact();
  std::stable_sort(held_.begin(), held_.end(), [](const Event& a, const Event& b) { return a.ns < b.ns; });
  place_births(cut);
  auto later = std::find_if(held_.begin(), held_.end(), [&](const Event& e) { return e.ns >= cut; });
  out.insert(out.end(), std::make_move_iterator(held_.begin()), std::make_move_iterator(later));
  held_.erase(held_.begin(), later);
  return whole;
}

// A page of the ring buffer (kernel/trace/ring_buffer.c): a timestamp, the
// committed size (its two high bits say events were missed), then events,
// each a 32-bit header (5 bits type_len, 27 bits time delta): type_len
// 1..28 is data of type_len * 4 bytes after it, 0 data of the length the
// next word gives (that word included), 29 padding, 30 and 31 time words.
// Long: one pass over a page of the ring buffer, each record type beside the kernel rule it obeys.
bool MoveWatch::parse_page(const unsigned char* page, size_t len, std::vector<Event>& out, uint64_t& taken) {
  if (len < data_offset_) return true;
  uint64_t commit = commit_size_ == 8 ? at<uint64_t>(page, 8) : at<uint32_t>(page, 8);
  constexpr uint64_t kMissedEvents = 1ull << 31, kMissedStored = 1ull << 30;
  bool whole = (commit & (kMissedEvents | kMissedStored)) == 0;
  uint64_t ts = at<uint64_t>(page, 0);
  size_t size = std::min<size_t>(commit & (kMissedStored - 1), len - data_offset_);
  const unsigned char* p = page + data_offset_;
  const unsigned char* end = p + size;
  auto str = [&](const unsigned char* data, size_t data_len, Field f) {
    uint32_t loc = at<uint32_t>(data, f.offset);
    size_t off = loc & 0xffff, n = loc >> 16;
    if (off >= data_len) return std::string();
    n = std::min(n, data_len - off);
    std::string s(reinterpret_cast<const char*>(data + off), n);
    if (auto nul = s.find('\0'); nul != std::string::npos) s.resize(nul);
    return s;
  };
  while (p + 4 <= end) {
    uint32_t header = at<uint32_t>(p, 0);
    uint32_t type_len = header & 31;
    uint64_t delta = header >> 5;
    const unsigned char* data;
    size_t data_len, total;
    if (type_len == 29) {
      if ((header >> 5) == 0) break;  // the rest of the page is padding
      if (p + 8 > end) break;
      total = 4 + at<uint32_t>(p, 4);
      ts += delta;  // a discarded event's time
      p += total;
      continue;
    }
    if (type_len >= 30) {  // 30: a delta too large for 27 bits; 31: an absolute time
      if (p + 8 > end) break;
      uint64_t t = (static_cast<uint64_t>(at<uint32_t>(p, 4)) << 27) + delta;
      ts = type_len == 30 ? ts + t : t;
      p += 8;
      continue;
    }
    ts += delta;
    if (type_len == 0) {
      if (p + 8 > end) break;
      uint32_t length = at<uint32_t>(p, 4);
      if (length < 4) break;
      data = p + 8, data_len = length - 4, total = 4 + length;
    } else {
      data = p + 4, data_len = type_len * 4, total = 4 + data_len;
    }
    if (p + total > end) break;
    p += total;
    ++taken;
    if (data_len < 2) continue;
    int type = at<uint16_t>(data, 0);
    auto int_field = [&](const Format& f, const char* name) {
      Field field = f[name];
      return field.offset + 4 <= data_len ? at<int32_t>(data, field.offset) : 0;
    };
    if (type == fork_.id) {
      out.push_back({Event::Kind::fork, int_field(fork_, "child_pid"), int_field(fork_, "parent_pid"), {}, ts});
    } else if (type == attach_.id) {
      Field path = attach_["dst_path"];
      if (path.offset + 4 > data_len) continue;
      out.push_back({Event::Kind::attach, int_field(attach_, "pid"), 0, str(data, data_len, path), ts,
                     int_field(attach_, "common_pid")});
    } else if (type == newtask_.id) {
      Field flags = newtask_["clone_flags"];
      if (flags.offset + 8 > data_len || !(at<uint64_t>(data, flags.offset) & kCloneIntoCgroup)) continue;
      int by = int_field(newtask_, "common_pid");
      out.push_back({Event::Kind::born, int_field(newtask_, "pid"), by, {}, ts, by});
    } else if (type == populated_.id) {
      Field path = populated_["path"];
      if (path.offset + 4 > data_len) continue;
      if (int_field(populated_, "val") == 1)
        filled_.push_back({int_field(populated_, "common_pid"), str(data, data_len, path), ts});
    }
  }
  return whole;
}

std::vector<std::string> MoveWatch::remove_stale(const std::string& prefix, const std::string& comm) {
  std::vector<std::string> removed;
  std::string root = mounted_tracefs();
  // Instances are the host's, named by host pids: never judged from inside
  // a pid namespace, where a live watcher's pid means another process.
  if (root.empty() || in_own_pid_namespace()) return removed;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(root + "/instances", ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    int pid = std::atoi(name.c_str() + prefix.size());
    if (pid <= 0) continue;
    auto its = fs::read_file("/proc/" + std::to_string(pid) + "/comm");
    if (its && fs::trim(*its) == comm) continue;  // its watcher is alive
    if (::rmdir(e.path().c_str()) == 0) removed.push_back(e.path().string());
  }
  return removed;
}

}  // namespace memrun::cgroup
