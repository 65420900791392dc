#include "runner/run/thrash_watch.h"

#include <algorithm>

namespace memrun {

void ThrashWatch::count(const cgroup::Usage& u) {
  // What a test reads back is thrashing only when it is the test's own
  // memory: its code and the files it maps (needed again as soon as they
  // are evicted: each access waits on the disk) or its anonymous memory
  // back from swap. A file re-read with read() streams through the page
  // cache instead: every pass over a file larger than the limit reads back
  // pages evicted a pass ago, as many as the file has, while the program
  // itself needs a few buffers (150 passes over 128 MB under 64 MiB read
  // back 200 MB/s, and are no thrash). The kernel counts refaults per type
  // only (anon/file; v1 has no activations, and a refault it activates is
  // only one read back within the size of the active list): the file
  // refaults of a sample count in the share of the page cache that is
  // mapped at that sample.
  uint64_t all = u.refaulted - std::min(u.refaulted, last_refaulted_);
  uint64_t anon = std::min(all, u.refaulted_anon - std::min(u.refaulted_anon, last_refaulted_anon_));
  uint64_t file = all - anon;
  uint64_t cache = std::max(u.breakdown.file, u.reclaimable_file);
  if (cache > 0) file = static_cast<uint64_t>(static_cast<double>(file) * std::min(1.0, static_cast<double>(u.file_mapped) / cache));
  else file = 0;
  working_refaulted_ += anon + file;
  last_refaulted_ = u.refaulted;
  last_refaulted_anon_ = u.refaulted_anon;
}

bool ThrashWatch::thrashing(const cgroup::Usage& u, Clock::time_point now, uint64_t limit, const cgroup::Group& group,
                              Observation& o) {
  // A test whose working set does not fit its limit can go on for as long
  // as its timeout allows, reading back from disk what the kernel has just
  // evicted (a program's own code included) and doing little else: python3
  // started cold under 6 MiB read back 5 GiB in 10 s and never printed. It
  // is ended here with its own verdict, once within a window it has read
  // back more than kThrashFactor times its limit of its own memory (see
  // count()), or (where the kernel keeps per-group pressure: v2,
  // 4.20+) read back at least its limit while all its tasks were stalled
  // on memory for half the window or more: a large limit over a slow disk
  // refaults less than ten times its size in a window, yet the test does
  // nothing else. A single pass over a file larger than the limit reads
  // nothing back (evicted pages are refaults only when read again), and
  // re-reading files with read() is no thrash (count()); measured:
  // the spilling sort of specs/parquet.yaml reads back 0.45 times its
  // limit in 10 s, the streaming aggregate 0.75 times in 1 s.
  constexpr auto kWindow = std::chrono::seconds(5);
  constexpr uint64_t kThrashFactor = 10;
  if (!window_start_) {
    window_start_ = now;
    window_refaulted_ = working_refaulted_;
    window_stalled_ = group.stalled_us();
    return false;
  }
  if (now - *window_start_ < kWindow) return false;
  uint64_t read_back = working_refaulted_ - window_refaulted_;
  auto window_us = std::chrono::duration_cast<std::chrono::microseconds>(now - *window_start_).count();
  auto stalled_now = group.stalled_us();
  std::optional<uint64_t> stalled;
  if (stalled_now && window_stalled_) stalled = *stalled_now - std::min(*stalled_now, *window_stalled_);
  bool refaulting = read_back >= kThrashFactor * limit;
  bool stalling = stalled && *stalled * 2 >= static_cast<uint64_t>(window_us) && read_back >= limit;
  // (Usage flickers below the limit as reclaim frees a batch; a group that
  // read its limit back ten times over has been at it.)
  if ((!refaulting && !stalling) || u.current < limit / 2) {
    window_start_ = now;  // the next window
    window_refaulted_ = working_refaulted_;
    window_stalled_ = stalled_now;
    return false;
  }
  o.thrash_stalled_s = stalled ? *stalled / 1e6 : 0;
  o.ending = Ending::thrashed;
  o.thrash_refaulted = read_back;
  o.thrash_window_s = std::chrono::duration<double>(now - *window_start_).count();
  return true;
}

}  // namespace memrun
