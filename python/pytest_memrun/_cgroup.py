"""Where a process's memory cgroup is, and its files, on v1 and v2."""
import os


def _mounts():
    """(mount point, root in the hierarchy, fstype, super options) of each cgroup mount."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rfields = left.split(), right.split()
            if len(rfields) < 3 or rfields[0] not in ("cgroup", "cgroup2"):
                continue
            out.append((_unescape(fields[4]), _unescape(fields[3]), rfields[0], set(rfields[2].split(","))))
    return out


def _unescape(path):
    # mountinfo writes space, tab, newline and backslash as octal escapes.
    for code in ("\\040", "\\011", "\\012", "\\134"):
        path = path.replace(code, chr(int(code[1:], 8)))
    return path


def groups(pid="self"):
    """{controllers: directory} of every hierarchy process `pid` is in, as this
    process sees them (its cgroup namespace and mounts)."""
    mounts = _mounts()
    result = {}
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            hid, controllers, path = line.rstrip("\n").split(":", 2)
            for point, root, fstype, opts in mounts:
                if hid == "0":
                    if fstype != "cgroup2":
                        continue
                elif fstype != "cgroup" or not set(controllers.split(",")) <= opts:
                    continue
                rel = path
                if root != "/":
                    if not (path == root or path.startswith(root + "/")):
                        continue
                    rel = path[len(root):]
                result[controllers] = os.path.join(point, rel.lstrip("/"))
                break
    return result


def memory_group(pid="self"):
    """(version, directory) of the memory cgroup of `pid`: 1 or 2, or (None, None)."""
    found = groups(pid)
    for controllers, directory in found.items():
        if "memory" in controllers.split(",") and os.path.exists(os.path.join(directory, "memory.usage_in_bytes")):
            return 1, directory
    directory = found.get("")
    if directory and os.path.exists(os.path.join(directory, "memory.current")):
        return 2, directory
    return None, None


def join(pid_from, pid="0"):
    """Moves this process into every group process `pid_from` is in that it is
    not in itself (v1: memory and pids; v2: the one group). Pages already
    charged stay where they were: v2 never moves charges, v1 only with
    memory.move_charge_at_immigrate, which memrun leaves at 0."""
    mine, theirs = groups("self"), groups(pid_from)
    moved = 0
    for controllers, directory in theirs.items():
        if mine.get(controllers) == directory or controllers.startswith("name="):
            continue
        with open(os.path.join(directory, "cgroup.procs"), "w") as f:
            f.write(pid)
        moved += 1
    if not moved:
        raise RuntimeError(f"process {pid_from} is in no cgroup of its own to join")


def memory_line(pid):
    """The raw path of `pid`'s memory cgroup as /proc/PID/cgroup says it (the
    v1 memory hierarchy's line, else v2's "0::"), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    unified = None
    for line in lines:
        hid, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return path
        if hid == "0":
            unified = path
    return unified


def descendants(pid):
    """`pid` and every process below it (each thread's children)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            continue
    return found


def exiting(pid):
    """`pid` is exiting or gone: the kernel moves an exiting task to the root
    cgroup (cgroup_exit), so where it is says nothing then. PF_EXITING is
    0x4 in the flags field of /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return True
    return fields[0] in ("Z", "X", "x") or int(fields[6]) & 0x4 != 0
