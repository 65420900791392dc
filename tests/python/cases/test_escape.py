# Cases that try every way out of their limit a forked case has, then hold
# 100 MiB under 64 MiB: none may pass (tests/python/check expects each to
# fail, OOM-killed). What this module opens as pytest imports it (in
# pytest's own process, before any case forks) is what a hostile suite
# would hand its cases: the root memory cgroup's files, a folder and /proc
# of pytest's mount namespace, pytest's own namespaces.
import ctypes
import glob
import os
import subprocess
import sys
import tempfile
import threading

import pytest

MiB = 1 << 20
libc = ctypes.CDLL(None, use_errno=True)


def _open(path, flags=os.O_RDONLY):
    try:
        return os.open(path, flags)
    except OSError:
        return None


# Opened in pytest's process, as root: its views of the host.
ROOT_PROCS = [fd for fd in (_open(p, os.O_WRONLY) for p in glob.glob("/sys/fs/cgroup/*/cgroup.procs")
                            + ["/sys/fs/cgroup/cgroup.procs"]) if fd is not None]
ROOT_TASKS = [fd for fd in (_open(p, os.O_WRONLY) for p in glob.glob("/sys/fs/cgroup/*/tasks")) if fd is not None]
CGROUP_DIR = _open("/sys/fs/cgroup", os.O_RDONLY | os.O_DIRECTORY)
PROC_DIR = _open("/proc", os.O_RDONLY | os.O_DIRECTORY)
NAMESPACES = [fd for fd in (_open(f"/proc/self/ns/{k}") for k in ("cgroup", "mnt", "pid")) if fd is not None]


def hold(n=100):
    return bytearray(b"x" * (n * MiB))


def try_write(fd, text):
    try:
        os.write(fd, text.encode())
        return True
    except OSError:
        return False


@pytest.mark.memrun(memory="64MiB")
def test_writes_itself_into_every_cgroup_it_can_name():
    me = str(os.getpid())
    # The roots of the hierarchies it sees (never a group below: on a host
    # where this test failed to be sealed, another run's).
    for path in glob.glob("/sys/fs/cgroup/cgroup.procs") + glob.glob("/sys/fs/cgroup/*/cgroup.procs"):
        fd = _open(path, os.O_WRONLY)
        if fd is not None:
            try_write(fd, me)
    d = tempfile.mkdtemp()
    # A memory hierarchy mounted afresh (v1), or cgroup2: rooted at the case's group.
    for args in (["-t", "cgroup", "-o", "memory", "none", d], ["-t", "cgroup2", "none", d]):
        if subprocess.run(["mount", *args], capture_output=True).returncode == 0:
            fd = _open(os.path.join(d, "cgroup.procs"), os.O_WRONLY)
            if fd is not None:
                try_write(fd, me)
                os.close(fd)
            subprocess.run(["umount", "-l", d])
    os.rmdir(d)
    x = hold()
    assert len(x) == 100 * MiB


@pytest.mark.memrun(memory="64MiB")
def test_uses_what_pytest_opened_for_it():
    me = str(os.getpid())
    for fd in ROOT_PROCS:
        try_write(fd, me)
    for base in (CGROUP_DIR, PROC_DIR):
        if base is not None:
            for rel in ("memory/cgroup.procs", "cgroup.procs", "1/root/sys/fs/cgroup/memory/cgroup.procs"):
                try:
                    fd = os.open(rel, os.O_WRONLY, dir_fd=base)
                    try_write(fd, me)
                except OSError:
                    pass
    for fd in NAMESPACES:
        libc.setns(fd, 0)
    x = hold()
    assert len(x) == 100 * MiB


@pytest.mark.memrun(memory="64MiB")
def test_a_thread_leaves_fills_pipes_and_comes_back():
    held = []

    def out_and_back():
        tid = str(threading.get_native_id())
        for fd in ROOT_TASKS:
            try_write(fd, tid)
        for path in glob.glob("/sys/fs/cgroup/*/tasks"):
            fd = _open(path, os.O_WRONLY)
            if fd is not None:
                try_write(fd, tid)
        # Pipe buffers are charged to the writing thread's group.
        for _ in range(100):
            r, w = os.pipe()
            try:
                import fcntl
                fcntl.fcntl(w, 1031, MiB)  # F_SETPIPE_SZ
                os.set_blocking(w, False)
                os.write(w, b"y" * MiB)
            except OSError:
                break
            held.append((r, w))

    t = threading.Thread(target=out_and_back)
    t.start()
    t.join()
    assert len(held) == 100, f"only {len(held)} MiB of pipe buffers"


@pytest.mark.memrun(memory="64MiB")
def test_a_child_moves_out_and_holds_it():
    code = ("import glob, os, time\n"
            "for p in glob.glob('/sys/fs/cgroup/cgroup.procs') + glob.glob('/sys/fs/cgroup/*/cgroup.procs'):\n"
            "    try:\n"
            "        fd = os.open(p, os.O_WRONLY)\n"
            "        os.write(fd, str(os.getpid()).encode())\n"
            "    except OSError: pass\n"
            "x = b'z' * (100 << 20)\n"
            "print('held', flush=True)\n"
            "time.sleep(0.5)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "held" in out.stdout
