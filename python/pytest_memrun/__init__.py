"""memrun: memory tests with the kernel as the judge.

- `pytest --memrun`: each case marked `@pytest.mark.memrun(memory="64MiB")`
  runs in a cgroup of its own under that limit, judged by memrun (plugin.py).
- `with pytest_memrun.peak(max="24MiB") as p:` the kernel's peak of the block's
  memory (the whole cgroup the test is in: native allocations and child
  processes included), and what the block still holds after it.
- `pytest_memrun.binary()`: the path of the memrun program this wheel carries.
"""
import os
import re
import shutil
import select
import threading

from . import _cgroup

__all__ = ["binary", "peak", "Peak", "PeakExceeded", "parse_size", "format_size", "blocks"]
__version__ = "0.1.0"

_UNITS = {"": 1, "B": 1, "K": 1024, "KiB": 1024, "kB": 1000, "M": 1024**2, "MiB": 1024**2, "MB": 1000**2,
          "G": 1024**3, "GiB": 1024**3, "GB": 1000**3, "T": 1024**4, "TiB": 1024**4, "TB": 1000**4}


def binary():
    """The memrun program: the one in this package, else $MEMRUN, else memrun on PATH."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "memrun")
    for path in (here, os.environ.get("MEMRUN"), shutil.which("memrun")):
        if path and os.access(path, os.X_OK) and os.path.realpath(path) != os.path.realpath(__file__):
            if path != here and _is_wrapper(path):
                continue
            return path
    raise FileNotFoundError("memrun: no memrun program in this package or on PATH (reinstall the wheel, or set $MEMRUN)")


def _is_wrapper(path):
    # pip's console script for memrun is a Python file: not the program.
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return True


def parse_size(value):
    """Bytes of an int or of a size as memrun writes it: 512MiB, 2GiB, 100MB, 64M."""
    if isinstance(value, int):
        return value
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", str(value))
    if not m or m.group(2) not in _UNITS:
        raise ValueError(f"'{value}' is not a size (write e.g. 512MiB, 2GiB, 100MB)")
    return round(float(m.group(1)) * _UNITS[m.group(2)])


def format_size(n):
    sign, n = ("-" if n < 0 else ""), abs(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{sign}{n} B" if unit == "B" else f"{sign}{n:.1f} {unit}"
        n /= 1024


class PeakExceeded(AssertionError):
    """A block's peak or retained memory was above what pytest_memrun.peak() allowed."""


class Peak:
    """The kernel's high-water mark of this process's memory cgroup during a
    block, less the usage when the block began (`baseline`): `peak`; and the
    usage after it less the baseline: `retained`. Everything the group holds
    counts: native allocations, child processes, page cache, kernel memory.

    How (`source`):
    - "memory.peak": cgroup v2 from 6.12, where a write to memory.peak resets
      the high-water mark for the writing file descriptor only;
    - "memory.max_usage_in_bytes": cgroup v1, in a test's group ($MEMRUN_TEST
      is set): the block runs in a sub-group of its own, made for it, whose
      mark starts at the block (usage there starts at 0: the baseline is 0).
      So on v1 it is the block's own new charges, of this process and what
      it starts in the block (not of processes started before it), and
      memory freed in the block that was charged before does not lower it
      (on v2 it does). The test's own mark is never reset: a write there
      resets it for every reader, memrun's peak of the whole test too
      (which fails such a test). One block at a time per process: blocks
      nest, but two that overlap otherwise (threads) sample instead;
    - "sampled every 1 ms": elsewhere (v2 before 6.12, or a group shared with
      others, whose mark is not this block's to reset): a forked process
      reads usage, so a peak shorter than the interval can be missed.
    """

    def __init__(self, max=None, retained_max=None, interval=0.001, name=None):
        self.name = None if name is None else str(name)
        self.max = None if max is None else parse_size(max)
        self.retained_max = None if retained_max is None else parse_size(retained_max)
        self.interval = interval
        self.peak = self.retained = self.baseline = self.high_water = None
        self.source = None
        self._served = False
        self._fd = None
        self._sampler = None
        self._sub = None  # v1: the block's own sub-group

    # --- reading the group -------------------------------------------------
    def _usage(self):
        return _read_int(self._dir, "memory.current" if self._version == 2 else "memory.usage_in_bytes")

    def __enter__(self):
        # Every block of a case, in order: under pytest --memrun its figures
        # go into memrun's record, by name ("block", "block 2", ... unless named).
        names = {b.name for b in blocks}
        base = self.name or "block"
        self.name, n = base, 1
        while self.name in names:  # each name once: a comparison pairs blocks by it
            n += 1
            self.name = f"{base} {n}"
        blocks.append(self)
        if _service is not None:
            # pytest --memrun: memrun measures the block (the plugin asks it).
            reply = _service({"op": "begin", "name": self.name})
            self.source, self.baseline = reply["source"], reply["baseline_bytes"]
            self._served = True
            return self
        self._version, self._dir = _cgroup.memory_group()
        if self._version is None:
            raise RuntimeError("pytest_memrun.peak(): this process is in no memory cgroup it can read "
                               "(run it under pytest --memrun or memrun SPEC)")
        if self._version == 2:
            try:
                fd = os.open(os.path.join(self._dir, "memory.peak"), os.O_RDWR | os.O_CLOEXEC)
                try:
                    os.write(fd, b"reset\n")  # 6.12+: this fd's own mark
                    self._fd, self.source = fd, "memory.peak"
                except OSError:
                    os.close(fd)
            except OSError:
                pass
        elif os.environ.get("MEMRUN_SUB_GROUPS") == "1":
            # (A test may make memory sub-groups on v1 only where its spec
            # says sub_groups: true: memrun then sets MEMRUN_SUB_GROUPS.)
            # v1: this process (its threads, what it starts) moves into a
            # fresh sub-group for the block. Its pages stay charged where
            # they are (v1 moves no charges unless told to); the sub-group's
            # are the block's, and go to the test's group when it is removed.
            sub = os.path.join(self._dir, f"memrun-peak-{os.getpid()}-{id(self):x}")
            with _blocks_lock:
                try:
                    # A block another thread has open moved the whole
                    # process: this one samples (blocks of one thread nest).
                    if any(t != threading.get_ident() for t, _ in _open_blocks):
                        raise OSError("another thread's block is open")
                    os.mkdir(sub)
                    try:
                        # Sockets are charged only in a group whose TCP
                        # limit was written (v1): the test's, as memrun did.
                        tcp = os.path.join(self._dir, "memory.kmem.tcp.limit_in_bytes")
                        if os.path.exists(tcp):
                            _write(sub, "memory.kmem.tcp.limit_in_bytes", _read_text(tcp))
                        _write(sub, "cgroup.procs", "0")  # "0": the writer's process
                    except OSError:
                        os.rmdir(sub)
                        raise
                    self._sub, self.source = sub, "memory.max_usage_in_bytes"
                    _open_blocks.append((threading.get_ident(), sub))
                except OSError:
                    pass
        if self.source is None:
            self.source = f"sampled every {self.interval * 1000:g} ms"
            self._start_sampler()
        self.baseline = 0 if self._sub else self._usage()
        return self

    def _start_sampler(self):
        # A process, not a thread: a thread needs the GIL, which a block
        # busy in C (numpy filling an array) holds until it is over. Forked,
        # it shares the test's pages; the few it writes are charged to the
        # group, inside the baseline. It has sampled once before the block.
        path = os.path.join(self._dir, "memory.current" if self._version == 2 else "memory.usage_in_bytes")
        results_r, results_w = os.pipe()
        stop_r, stop_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(results_r)
                os.close(stop_w)
                fd = os.open(path, os.O_RDONLY)
                high, said = 0, False
                while True:
                    high = max(high, int(os.pread(fd, 64, 0)))
                    if not said:
                        os.write(results_w, b"R")
                        said = True
                    if select.select([stop_r], [], [], self.interval)[0]:
                        break
                high = max(high, int(os.pread(fd, 64, 0)))
                os.write(results_w, str(high).encode())
            finally:
                os._exit(0)
        os.close(results_w)
        os.close(stop_r)
        self._sampler = (pid, results_r, stop_w)
        os.read(results_r, 1)

    def _stop_sampler(self):
        pid, results_r, stop_w = self._sampler
        os.write(stop_w, b"x")
        os.close(stop_w)
        data = b""
        while True:
            chunk = os.read(results_r, 64)
            if not chunk:
                break
            data += chunk
        os.close(results_r)
        os.waitpid(pid, 0)
        return int(data) if data else 0

    def __exit__(self, exc_type, exc, tb):
        __tracebackhide__ = True  # a max missed shows the test's `with`, not this
        if self._served:
            reply = _service({"op": "end", "name": self.name})
            self.source, self.baseline = reply["source"], reply["baseline_bytes"]
            high, now = reply["high_bytes"], reply["now_bytes"]
        elif self._sampler is not None:
            high = max(self._stop_sampler(), self._usage())
            now = self._usage()
        elif self._fd is not None:
            os.lseek(self._fd, 0, os.SEEK_SET)
            high = int(os.read(self._fd, 64))
            os.close(self._fd)
            now = self._usage()
        else:
            try:
                high = _read_int(self._sub, "memory.max_usage_in_bytes")
                now = _read_int(self._sub, "memory.usage_in_bytes")
            finally:
                # Back into the test's group, whatever happened; the
                # sub-group goes unless a process the block started still
                # runs there (memrun removes it then).
                with _blocks_lock:
                    _write(self._dir, "cgroup.procs", "0")
                    _open_blocks.remove((threading.get_ident(), self._sub))
                try:
                    os.rmdir(self._sub)
                except OSError:
                    pass
                self._sub = None
        self.high_water = high
        self.peak = max(0, high - self.baseline)
        self.retained = now - self.baseline
        if exc_type is not None:
            return False
        if self.max is not None and self.peak > self.max:
            raise PeakExceeded(f"the block's peak was {format_size(self.peak)}, above its max {format_size(self.max)} "
                               f"({self.source}; baseline {format_size(self.baseline)})")
        if self.retained_max is not None and self.retained > self.retained_max:
            raise PeakExceeded(f"the block retained {format_size(self.retained)}, above its retained_max "
                               f"{format_size(self.retained_max)} ({self.source}; baseline {format_size(self.baseline)})")
        return False

    def __repr__(self):
        if self.peak is None:
            return "<pytest_memrun.Peak (not measured yet)>"
        return (f"<pytest_memrun.Peak peak={format_size(self.peak)} retained={format_size(self.retained)} "
                f"baseline={format_size(self.baseline)} source={self.source!r}>")


def _read_int(directory, name):
    with open(os.path.join(directory, name)) as f:
        return int(f.read())


# v1 blocks open in this process, innermost last (see Peak).
_blocks_lock = threading.Lock()
_open_blocks = []


def _read_text(path):
    with open(path) as f:
        return f.read().strip()


def _write(directory, name, text):
    # A cgroup's file, never made where none is (O_CREAT is not asked).
    fd = os.open(os.path.join(directory, name), os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


# The blocks measured in this process so far (a case's fork starts with
# its parent's list and the plugin reads what the case added).
blocks = []
# Under pytest --memrun, in a case's fork: asks memrun (through the
# plugin) to open or close a block, and returns its answer. memrun then
# measures it: a sub-group it made for the block (v1), a reset of
# memory.peak for a descriptor of its own (v2, 6.12+), else its samples.
_service = None


def peak(max=None, retained_max=None, name=None):
    """`with pytest_memrun.peak(name="read", max="24MiB", retained_max="2MiB") as p:` — see Peak."""
    return Peak(max=max, retained_max=retained_max, name=name)
