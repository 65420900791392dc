// Small, strict helpers for cgroupfs files. Every cgroup file is tiny and is
// read with one read(2): the kernel generates it at that moment, so a
// buffered stream would only add copies.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace memrun::fs {

/// The whole file, or nullopt when it does not exist (ENOENT) or went away
/// while it was read (ENODEV: a removed cgroup; ESRCH: /proc/PID of a
/// process that has just exited). Throws on any other error.
std::optional<std::string> read_file(const std::string& path);

/// Writes `value` with one write(2), as cgroupfs wants. Throws
/// cgroup::Failure naming the file and errno on failure.
void write_file(const std::string& path, const std::string& value);

/// Like write_file, but returns errno (0 on success) instead of throwing.
int try_write_file(const std::string& path, const std::string& value);

/// Parses a cgroup number: decimal, or "max" (v2's "no limit") as UINT64_MAX.
std::optional<uint64_t> parse_u64(const std::string& text);

/// Reads a one-number file (memory.peak, memory.max, ...); nullopt if absent.
std::optional<uint64_t> read_u64(const std::string& path);

/// Reads a one-number file through `fd`, an fd of it held open: one
/// pread(2) at offset 0, which makes cgroupfs generate it afresh (the
/// sample path reads this way, without a path lookup). nullopt on any error
/// (ENODEV: the group was removed) or when fd < 0.
std::optional<uint64_t> read_u64_at(int fd);

/// Parses "key value" lines (memory.stat, memory.events, oom_control).
std::map<std::string, uint64_t> parse_keyed(const std::string& text);

/// parse_keyed of a file; an empty map when the file does not exist.
std::map<std::string, uint64_t> read_keyed(const std::string& path);

/// parse_keyed of a small file held open as `fd` (one pread(2) at offset
/// 0, as read_u64_at); an empty map on any error.
std::map<std::string, uint64_t> read_keyed_at(int fd);

/// `text` without trailing newlines and spaces, as cgroup files end.
std::string trim(std::string text);

/// True when `path` exists.
bool exists(const std::string& path);

/// open(2) of `path`, however long. A test names the groups below its own
/// and may nest them past PATH_MAX (4096 bytes), where open(2) refuses the
/// path (ENAMETOOLONG): such a path is opened a part at a time, each part
/// from a descriptor of the folder before it. -1 and errno on failure.
int open_path(const std::string& path, int flags);

/// rmdir(2) of `path`, however long (see open_path). 0, or -1 and errno.
int remove_dir_path(const std::string& path);

/// Watches `files` for writes (inotify's IN_MODIFY, which vfs_write()
/// raises for cgroupfs files too, from any mount of the hierarchy); files
/// that do not exist are left out. One inotify instance serves the whole
/// process: closing one waits for an SRCU grace period
/// (fsnotify_destroy_group()), milliseconds a test; removing a watch does
/// not. Returns the watches, for any_written and unwatch.
std::vector<int> watch_writes(const std::vector<std::string>& files);

/// Watches folder `dir` for folders made in it (IN_CREATE: a cgroup's
/// sub-group), on the same instance: any_written says whether one was.
std::vector<int> watch_made(const std::string& dir);

/// Whether any of `watches` saw a write (or, of watch_made's, a folder
/// made) since it was made; reads what the instance queued, never waits.
bool any_written(const std::vector<int>& watches);

/// Whether watch_made's `watches` saw a folder made that is not one of
/// `but` (a name and how many times the caller made it: one made again
/// under the same name is another's), or lost one with the queue.
bool any_made_but(const std::vector<int>& watches, const std::map<std::string, int>& but);

/// Ends `watches` (those of a removed file are gone already) and clears it.
void unwatch(std::vector<int>& watches);

/// Whether a write to `file` (of `value`, which it holds already) is seen
/// by watch_writes: a probe, for doctor. 0 when seen; else -1 when no
/// watch could be made (fs.inotify limits), or the write's errno.
int writes_seen(const std::string& file, const std::string& value);

}  // namespace memrun::fs
