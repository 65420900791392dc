// Files memrun writes and reads besides the cgroup's: reports written
// atomically, and the tail of a test's log.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace memrun {

/// Writes what `produce` hands to its sink to `path` atomically (a temp file
/// in the same folder, then rename), so a reader never sees half a report; a
/// non-regular target such as /dev/stdout is written directly. Throws
/// Error(output) on failure, leaving the previous file as it was.
using Sink = std::function<void(const std::string&)>;
void write_atomically(const std::string& path, const std::function<void(const Sink&)>& produce);
/// The same for a text at hand.
void write_atomically(const std::string& path, const std::string& text);
/// Fixes, before any test runs, whether `path` is written directly (it is
/// a FIFO or a device now, as `--json /dev/stdout` is) or through a temp
/// file: a test that later plants a FIFO or a link to /dev/null there
/// cannot make memrun hang or drop its report.
void claim_output(const std::string& path);

/// A small file of /proc (meminfo, swaps, our own status), whole; empty
/// when it cannot be read.
std::string read_proc(const std::string& path);

/// The children of process `pid`, of all its threads (/proc/PID/task/TID/
/// children, Linux 3.5+ with CONFIG_PROC_CHILDREN); none when it is gone.
/// With `threads`, its threads' ids too (/proc/PID/task), read on the same
/// walk of the folder.
std::vector<int> child_processes(int pid, std::vector<int>* threads = nullptr);

/// The parent of process `pid` (field 4 of /proc/PID/stat); -1 when it is gone.
int parent_process(int pid);

/// The session of process `pid` (field 6 of /proc/PID/stat); -1 when it is gone.
int session_of(int pid);
/// Writes `value` to a /proc file with one write(2), as procfs wants;
/// returns the errno, 0 on success.
int write_proc(const std::string& path, const std::string& value);

/// The last `max_lines` lines of a log file (at most 4 KiB are read).
std::string log_tail(const std::string& path, size_t max_lines);

}  // namespace memrun
