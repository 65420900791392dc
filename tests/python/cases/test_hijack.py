# At -n 2: a hostile case on one worker tries to make the cases of the other
# pass, by handing them its own cgroup (the pids in its group, written to
# every FIFO below the temporary folder, as the plugin's holders once read
# theirs, and to every pipe of every pytest process it can see) and a
# forged outcome, while each of them holds 300 MiB under 64 MiB.
# tests/python/check expects every victim to fail (it runs this with a
# temporary folder of its own).
import glob
import os
import stat
import tempfile
import time

import pytest

MiB = 1 << 20


def my_group_pids():
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if "memory" in controllers.split(",") or controllers == "":
                procs = f"/sys/fs/cgroup/memory{path}/cgroup.procs"
                if not os.path.exists(procs):
                    procs = f"/sys/fs/cgroup{path}/cgroup.procs"
                with open(procs) as g:
                    return g.read().split()
    except OSError:
        pass
    return [str(os.getpid())]


def fifos_and_pipes_of_pytest():
    """The FIFOs below the temporary folder, and the pipes of every pytest
    process it can see (never a file: only what could carry a case's word)."""
    found = []
    for path in glob.glob(os.path.join(tempfile.gettempdir(), "**"), recursive=True):
        try:
            if stat.S_ISFIFO(os.lstat(path).st_mode):
                found.append(path)
        except OSError:
            pass
    for proc in glob.glob("/proc/[0-9]*"):
        if proc == f"/proc/{os.getpid()}":
            continue
        try:
            with open(f"{proc}/cmdline", "rb") as f:
                if b"pytest" not in f.read():
                    continue
            for fdpath in glob.glob(f"{proc}/fd/*"):
                if os.readlink(fdpath).startswith("pipe:"):
                    found.append(fdpath)
        except OSError:
            pass
    return found


@pytest.mark.xdist_group("hijacker")
@pytest.mark.memrun(memory="1GiB")
def test_hijacker():
    pids = my_group_pids()
    end = time.monotonic() + 6
    while time.monotonic() < end:
        for path in fifos_and_pipes_of_pytest():
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                continue
            for word in [f"{pid}\n" for pid in pids] + ['{"reports": [], "outcome": "passed"}\n']:
                try:
                    os.write(fd, word.encode())
                except OSError:
                    pass
            os.close(fd)
        time.sleep(0.01)


@pytest.mark.xdist_group("victims")
@pytest.mark.memrun(memory="64MiB")
@pytest.mark.parametrize("n", range(5))
def test_victim(n):
    time.sleep(0.5)
    x = bytearray(b"v" * (300 * MiB))
    assert len(x) == 300 * MiB
