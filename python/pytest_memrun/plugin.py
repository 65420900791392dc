"""pytest --memrun: each case marked @pytest.mark.memrun(memory=...) runs in a
cgroup of its own under that limit, and memrun judges it.

How a case runs. One memrun process per pytest process (`memrun serve`, one
per pytest-xdist worker) speaks to this plugin over a socket pair only the
two of them hold. For each case memrun makes the case's group and, as root,
a sealed test's init (PID 1 of a pid namespace of its own, in a mount and
cgroup namespace where the case's group is the root); pytest forks the
case into that pid namespace and hands memrun the fork's pidfd; memrun
moves the fork into the case's group; the fork enters the init's mount and
cgroup namespaces and runs the case's setup, call and teardown; pytest
tells memrun how it ended, and memrun's verdict comes back to be shown.
The plugin never judges: it says pytest's outcome and shows memrun's.

The fork's first steps run in an at-fork hook this module registers when
pytest loads it, before the suite's conftests and modules: no hook of theirs
runs before the case is in its group and sealed, and none of them sees the
socket to memrun (it is closed there first).
"""
import ctypes
import gc
import json
import math
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback

import pytest

from . import binary, format_size, parse_size, peak
from . import blocks as _blocks

# memrun's spec keys a marker takes (the spec's table, runner/spec/keys.cc:
# the keys a rule of a suite's `cases:` takes); memrun checks every value
# with the spec's own reader and messages.
MARKER = ("memrun(memory=SIZE, **keys): the hard memory limit memrun runs this case under, in a cgroup of "
          "its own; any other key of a memrun spec's test too (expect=oom, min_headroom=\"20%\", timeout=\"30s\", ...)")

_MAX_MESSAGE = 256 * 1024      # runner/app/serve.h kMaxServeMessage
_MAX_NODEID = 16 * 1024        # runner/app/serve.cc reads a case's node id up to 16 KiB
_MAX_REPORTS = 64 << 20        # what a case may send back of its reports

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_THP_DISABLE = 1, 4, 41
_CLONE_NEWNS, _CLONE_NEWCGROUP, _CLONE_NEWPID = 0x00020000, 0x02000000, 0x20000000


def _check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _setns(fd, kind, what):
    _check(_libc.setns(fd, kind), f"setns({what})")


# --- the fork's first steps ---------------------------------------------------
class _Entry:
    """What a case's fork does before anything else runs in it: drop the
    parent's descriptors, wait until memrun has moved it into its group,
    enter its init's namespaces, and take the case's environment."""

    def __init__(self, thread, close, go, report, namespaces, cwd, env, unset, hugepages_off):
        self.thread, self.close, self.go, self.report = thread, close, go, report
        self.namespaces, self.cwd, self.env, self.unset = namespaces, cwd, env, unset
        self.hugepages_off = hugepages_off

    def enter(self):
        try:
            for fd in self.close:
                os.close(fd)
            _close_ways_out(keep=(self.go, self.report, *self.namespaces))
            # Dies with pytest; before the wait, so that pytest gone after it
            # kills it, and gone before it leaves the pipe at EOF.
            _check(_libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
            word = os.read(self.go, 1)
            if word != b"G":  # pytest abandoned it, or died
                os._exit(1)
            if self.namespaces:
                mnt, cgroup, root = self.namespaces
                _setns(mnt, _CLONE_NEWNS, "the case's mount namespace")
                _setns(cgroup, _CLONE_NEWCGROUP, "the case's cgroup namespace")
                # Entering a mount namespace leaves the root and the folder
                # at the namespace's root, which is not the system's root
                # where that was made with chroot (switch_root, as an
                # initramfs does): the init's own root (/proc/INIT/root,
                # opened by memrun) is the case's.
                os.fchdir(root)
                os.chroot(".")
                for fd in (mnt, cgroup, root):
                    os.close(fd)
                os.chdir(self.cwd)
            if self.hugepages_off:
                _check(_libc.prctl(_PR_SET_THP_DISABLE, 1, 0, 0, 0), "prctl(PR_SET_THP_DISABLE)")
            for name in self.unset:
                os.environ.pop(name, None)
            os.environ.update(self.env)
            # Blocks (memrun_peak) are measured by memrun, asked through pytest.
            import pytest_memrun
            pytest_memrun._service = _Blocks(self.report, self.go)
        except BaseException:
            _send_back(self.report, {"error": "the case could not be started in its cgroup:\n" + traceback.format_exc()})
            os._exit(1)


_entry = None  # set by the parent for one fork

# Filesystems whose files reach past a case's seal (statfs(2)'s f_type):
# /proc (another process's root, fds and namespaces), sysfs, cgroup v1 and
# v2 (a cgroup.procs or tasks file), nsfs (a namespace to setns into),
# pidfs (6.9+: pidfds), bpf.
_WAYS_OUT = {0x9FA0, 0x62656572, 0x27E0EB, 0x63677270, 0x6E736673, 0x50494446, 0xCAFE4A11}
_O_PATH = 0o10000000


def _close_ways_out(keep):
    """Closes what the case inherited from pytest's process that could take
    it out of its seal: descriptors a module or conftest opened in pytest's
    own namespaces as it was imported. A directory or an O_PATH descriptor
    is a way into pytest's mount namespace (openat(fd, "sys/fs/cgroup/...")),
    a cgroup file one into another group, a /proc or namespace file or a
    pidfd one into another process's namespaces. Files, pipes and sockets
    stay open, as they are in plain pytest."""
    import fcntl
    import stat
    buf = ctypes.create_string_buffer(256)  # struct statfs; f_type comes first
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd <= 2 or fd in keep:
            continue
        try:
            st = os.fstat(fd)
            way_out = stat.S_ISDIR(st.st_mode) or bool(fcntl.fcntl(fd, fcntl.F_GETFL) & _O_PATH)
            if not way_out and _libc.fstatfs(fd, buf) == 0:
                way_out = ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF in _WAYS_OUT
            if not way_out:
                way_out = os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[pidfd]"
        except OSError:
            continue  # the listing's own descriptor, gone by now
        if way_out:
            os.close(fd)


def _after_fork_in_child():
    global _entry
    entry, _entry = _entry, None
    # Only the fork the plugin made, from its own thread: another thread's
    # fork at that moment is no case.
    if entry is not None and entry.thread == threading.get_ident():
        entry.enter()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _send_back(fd, payload):
    """One message of the case's to pytest's process: its length, then its JSON."""
    data = json.dumps(payload, default=str).encode()
    view = memoryview(len(data).to_bytes(4, "big") + data)
    while view:
        view = view[os.write(fd, view):]


def _read_message(fd):
    """The next message written with _send_back on `fd` (blocking), or None at its end."""
    def exactly(n):
        data = b""
        while len(data) < n:
            chunk = os.read(fd, n - len(data))
            if not chunk:
                return None
            data += chunk
        return data
    head = exactly(4)
    body = exactly(int.from_bytes(head, "big")) if head else None
    return None if body is None else json.loads(body)


_MAX_BLOCK_NAME = 200  # runner/app/serve.cc reads a block's name up to 200 bytes


def _block_request(block):
    """A block's request as memrun takes it (op and name alone), or None."""
    if not isinstance(block, dict) or block.get("op") not in ("begin", "end"):
        return None
    name = block.get("name")
    if not isinstance(name, str) or len(name.encode("utf-8", "replace")) > _MAX_BLOCK_NAME:
        return None
    return {"op": block["op"], "name": name}


class _Blocks:
    """In a case's fork: pytest_memrun.peak()'s way to memrun. A block
    opens and closes by asking pytest's process, which asks memrun."""

    def __init__(self, out, answers):
        self.out, self.answers, self.lock = out, answers, threading.Lock()

    def __call__(self, request):
        with self.lock:
            _send_back(self.out, {"block": request})
            answer = _read_message(self.answers)
        if answer is None or "error" in answer:
            raise RuntimeError("pytest_memrun.peak(): memrun could not measure the block: "
                               + (answer or {}).get("error", "pytest's process is gone"))
        return answer


# --- options and the marker ---------------------------------------------------
def pytest_addoption(parser):
    group = parser.getgroup("memrun", "memory limits with the kernel as the judge (memrun)")
    group.addoption("--memrun", action="store_true", default=False,
                    help="run each case marked memrun(memory=...) in a cgroup of its own under its limit")
    group.addoption("--memrun-default-memory", metavar="SIZE", default=None,
                    help="with --memrun: the limit of cases without a memrun marker (default: they run as usual)")
    group.addoption("--memrun-json", metavar="FILE", default=None,
                    help="with --memrun: write memrun's report of the session (schema memrun-report/1), for "
                         "memrun compare")
    group.addoption("--memrun-repeat", metavar="N", type=int, default=1,
                    help="with --memrun: run each marked case N times, each in a fresh cgroup; the report keeps "
                         "every run, and memrun compare reads their spread as the noise")
    group.addoption("--memrun-explain", action="store_true", default=False,
                    help="with --memrun: run a case that failed on memory (OOM-killed, thrashing, below its "
                         "min_headroom) once more under memray (which this Python must have: pip install memray), "
                         "and name the lines that allocated what it held at its peak")
    group.addoption("--memrun-unenforceable", choices=("fail", "skip"), default="fail",
                    help="where memory limits cannot be enforced (no root, no sudo): fail (the default: the run "
                         "stops with memrun's reason) or skip the marked cases")
    group.addoption("--memrun-cgroup-parent", metavar="PATH", default=None,
                    help="make the cases' cgroups below this cgroup (default: memrun's own)")
    group.addoption("--memrun-sudo", choices=("auto", "never"), default="auto",
                    help="auto (default): when pytest is not root, memrun runs through passwordless sudo where "
                         "`sudo -n` allows it (as on GitHub's hosted runners); never: not")
    group.addoption("--memrun-binary", metavar="PATH", default=None,
                    help="the memrun program (default: the one in this package, else $MEMRUN, else memrun on PATH)")


def pytest_configure(config):
    config.addinivalue_line("markers", MARKER)
    if config.getoption("memrun") and os.environ.get("MEMRUN_TEST") is None:
        config.pluginmanager.register(Session(config), "memrun-session")


@pytest.fixture
def memrun_peak(request):
    """`with memrun_peak(name="read", max="24MiB") as p:` the kernel's peak of
    a block (pytest_memrun.peak); under pytest --memrun each block's figures
    go into memrun's record of the case, by its name."""
    first = len(_blocks)

    def make(name=None, max=None, retained_max=None):
        return peak(max=max, retained_max=retained_max, name=name)
    yield make
    for p in _blocks[first:]:
        if p.peak is not None:
            request.node.user_properties.append((f"memrun_block_peak_bytes[{p.name}]", p.peak))
            request.node.user_properties.append((f"memrun_block_retained_bytes[{p.name}]", p.retained))


def marks_of(item):
    """The case's memrun keywords, the closest marker winning (function over
    class over module), as they were written: memrun reads them."""
    marks = {}
    for mark in reversed(list(item.iter_markers("memrun"))):
        if mark.args:
            raise ValueError("@pytest.mark.memrun takes keywords only, e.g. memrun(memory=\"64MiB\")")
        marks.update(mark.kwargs)
    return marks


def _json_value(value, depth=0):
    # A marker's value as memrun's spec reader takes it: text, numbers,
    # booleans, lists and mappings; anything else as its text. What JSON
    # cannot carry to memrun is the case's error, said here (a NaN, an
    # integer past 64 bits, text that is no UTF-8, a value nested deeper
    # than memrun reads a message).
    if depth > 8:
        raise ValueError("a value nested more than 8 deep: memrun's keys take a size, a duration, a word, "
                         "a list or a mapping of them")
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if not -(1 << 63) <= value < (1 << 64):
            raise ValueError(f"{value} is too large for memrun (sizes, counts and durations end at 2**64)")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} is no number memrun can take: give a finite number, or text such as \"64MiB\"")
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {_json_text(str(k)): _json_value(v, depth + 1) for k, v in value.items()}
    return _json_text(value if isinstance(value, str) else str(value))


def _json_text(text):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{text!r} is no text memrun can read (it holds a lone surrogate)") from None
    if "\0" in text:
        raise ValueError(f"{text!r} holds a NUL character, which no environment variable, name or word can hold")
    return text


def outcome_word(reports):
    """pytest's outcome of a case from its reports, as memrun's pytest plugin
    says it in a spec run: the worst phase wins; a skip or xfail is
    "skipped"; "none" when the call never reported (the process ended)."""
    word = None
    for rep in reports:
        if rep.failed:
            return "failed"
        if rep.skipped:
            word = "skipped"
        elif rep.passed and rep.when == "call" and word is None:
            word = "passed"
    if word == "passed" and not any(r.when == "teardown" for r in reports):
        return "none"
    return word or "none"


# --- the session's memrun -----------------------------------------------------
class Memrun:
    """One `memrun serve` and the socket to it."""

    def __init__(self, config, argv, sudo):
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = mine
        self.sudo = sudo
        try:
            # In a session of its own: Ctrl-C is pytest's to handle; memrun
            # ends when this socket closes, and takes the case under way
            # with it.
            self.proc = subprocess.Popen((["sudo", "-n"] if sudo else []) + argv, stdin=theirs,
                                         stdout=subprocess.DEVNULL, start_new_session=True)
        finally:
            theirs.close()
        self.mine_fd = mine.fileno()
        self.inbox = {}

    def send(self, body, fds=()):
        data = json.dumps(body, allow_nan=False).encode()
        if len(data) > _MAX_MESSAGE:
            raise ValueError(f"the case's name and marker are over {_MAX_MESSAGE // 1024} KiB, more than "
                             "memrun takes: shorten its parameters' ids (pytest.param(..., id=...))")
        socket.send_fds(self.sock, [data], list(fds)) if fds else self.sock.send(data)

    def receive(self, key, cid=None):
        """The answer `key` (or an error) to request `cid` (None: the next
        one), with the descriptors that came with it. Answers to other
        requests (a case made ahead) wait in the inbox."""
        while True:
            for k in (key, "error"):
                if (k, cid) in self.inbox:
                    body, fds = self.inbox.pop((k, cid))
                    return k, body, fds
            data, fds, _, _ = socket.recv_fds(self.sock, _MAX_MESSAGE + 1, 4)
            if not data:
                code = self.proc.wait()
                raise MemrunGone(f"memrun serve ended (exit {code})")
            body = json.loads(data)
            k = next(iter(body))
            inner = body[k]
            self.inbox[(k, inner.get("id") if isinstance(inner, dict) else None)] = (inner, fds)

    def close(self):
        for _, fds in self.inbox.values():  # cases made ahead and never run
            for fd in fds:
                os.close(fd)
        self.inbox.clear()
        try:
            self.sock.close()
        finally:
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class MemrunGone(Exception):
    pass


class Session:
    def __init__(self, config):
        self.config = config
        self.default_memory = config.getoption("memrun_default_memory")
        if self.default_memory is not None:
            try:
                parse_size(self.default_memory)
            except ValueError as e:
                raise pytest.UsageError(f"--memrun-default-memory: {e}")
        self.repeat = config.getoption("memrun_repeat")
        if self.repeat < 1 or self.repeat > 100:
            raise pytest.UsageError("--memrun-repeat: give 1 to 100 runs")
        path = config.getoption("memrun_binary")
        try:
            self.binary = os.path.abspath(path) if path else binary()
        except FileNotFoundError as e:
            raise pytest.UsageError(str(e))
        self.worker = getattr(config, "workerinput", None)
        self.json = config.getoption("memrun_json")
        self.memrun = None
        self.unenforceable = None  # memrun's reason, where limits cannot be enforced
        self.sealed = False
        self.ids = 0
        self.reports = []  # memrun's reports of the session: this process's, and each xdist worker's
        self.prepared = {}  # (node id, run) -> the id of its request, made ahead
        self.own_pidns = None
        self._channel = None  # pytest-xdist's channel, in a worker

    # --- memrun's start and end ---------------------------------------------
    def _argv(self):
        argv = [self.binary]
        parent = self.config.getoption("memrun_cgroup_parent")
        if parent:
            argv += ["--cgroup-parent", parent]
        return argv + ["serve"]

    def _sudo(self):
        if os.geteuid() == 0 or self.config.getoption("memrun_sudo") == "never" or not shutil.which("sudo"):
            return False
        return subprocess.run(["sudo", "-n", "true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0

    def start(self):
        """Starts this process's memrun (once); False where limits cannot be
        enforced (self.unenforceable says why)."""
        if self.memrun is not None or self.unenforceable is not None:
            return self.unenforceable is None
        sudo = self._sudo()
        try:
            self.memrun = Memrun(self.config, self._argv(), sudo)
            hello = {"cwd": os.getcwd()}
            if self.config.getoption("memrun_explain"):
                hello["explain"] = {"python": sys.executable, "env": dict(os.environ)}
            self.memrun.send({"hello": hello})
            key, body, _ = self.memrun.receive("hello")
        except (OSError, MemrunGone) as e:
            raise pytest.UsageError(f"memrun: could not start {self.binary} serve: {e}")
        if key == "error":
            self.memrun.close()
            self.memrun = None
            how = "" if sudo or os.geteuid() == 0 else (
                " pytest runs as a user without root: run it as root, or where `sudo -n` works (passwordless "
                "sudo, as on GitHub's hosted runners), or")
            self.unenforceable = (f"memrun cannot enforce memory limits here: {body['message']}\n"
                                  f"To fix it:{how} see `{self.binary} doctor`; to skip the marked cases instead of "
                                  "failing the run: --memrun-unenforceable=skip")
            return False
        self.sealed = body["sealed"]
        if self.sealed:
            # Where the cases' pid namespaces are entered from, and left.
            self.own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        # No case of another user may read or ptrace pytest's process (a
        # case gets its own back as it starts: _Entry.enter).
        _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        self.header = (f"memrun {body['memrun']}: {body['backend']} backend ({body['cgroup_mode']} cgroups), "
                       f"kernel {body['kernel']}; each marked case in a cgroup of its own"
                       + (", sealed" if self.sealed else ", unsealed (pytest is not root)")
                       + (" (memrun through sudo)" if sudo else ""))
        return True

    def pytest_report_header(self, config):
        return f"memrun: {self.binary} (each marked case in a cgroup of its own)"

    def pytest_collection_finish(self, session):
        # One message per run where memrun cannot enforce, before any case
        # runs (the controller's check for its workers too).
        if not any(self.wanted(item) for item in session.items):
            return
        if not self.start() and self.config.getoption("memrun_unenforceable") == "fail":
            raise pytest.UsageError(self.unenforceable)
        if self.unenforceable:
            tr = self.config.pluginmanager.get_plugin("terminalreporter")
            if tr is not None and self.worker is None:
                tr.write_line(f"memrun: {self.unenforceable.splitlines()[0]}; its cases are skipped "
                              "(--memrun-unenforceable=skip)", yellow=True)
        elif self.worker is None and hasattr(self, "header"):
            tr = self.config.pluginmanager.get_plugin("terminalreporter")
            if tr is not None:
                tr.write_line(self.header)

    @pytest.hookimpl(optionalhook=True)  # pytest-xdist's, when it is installed
    def pytest_testnodedown(self, node, error):
        report = getattr(node, "workeroutput", {}).get("memrun_report")
        if report:
            self.reports.append(report)

    def pytest_sessionfinish(self, session):
        if self.memrun is not None:
            report = self._finish()
            if report:
                if self.worker is not None:
                    self.config.workeroutput["memrun_report"] = report
                else:
                    self.reports.append(report)
        if self.worker is None and self.reports:
            self._outputs()

    def _finish(self):
        """The session's report from this process's memrun, which then ends."""
        fd = os.memfd_create("memrun-report", os.MFD_CLOEXEC)
        try:
            self.memrun.send({"finish": {}}, [fd])
            self.memrun.receive("finished")
            os.lseek(fd, 0, os.SEEK_SET)
            with os.fdopen(os.dup(fd), "rb") as f:
                return f.read().decode()
        except (OSError, MemrunGone) as e:
            sys.stderr.write(f"memrun: the session's report was lost: {e}\n")
            return None
        finally:
            os.close(fd)
            self.memrun.close()
            self.memrun = None

    def _outputs(self):
        """--memrun-json, and under GitHub Actions one step summary and an
        annotation per failed case: memrun merge of the processes' reports
        (memrun renders and escapes every one of them)."""
        if not self.json and os.environ.get("GITHUB_ACTIONS") != "true":
            return
        # Written now, with every case ended: no case's process is left to
        # reach them (memrun killed what each left).
        folder = tempfile.mkdtemp(prefix="memrun-reports-")
        try:
            parts = []
            for i, text in enumerate(self.reports):
                parts.append(os.path.join(folder, f"{i}.json"))
                with open(parts[-1], "w") as f:
                    f.write(text)
            argv = [self.binary, "merge", *parts, "-o", self.json or os.path.join(folder, "session.json")]
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
            tr = self.config.pluginmanager.get_plugin("terminalreporter")
            for line in done.stdout.splitlines():
                if line.startswith("::") and tr is not None:
                    tr.write_line(line)
            if done.returncode not in (0, 1):
                raise pytest.UsageError(f"--memrun-json {self.json}: memrun merge failed: {done.stderr.strip()}")
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    # --- one case -------------------------------------------------------------
    def wanted(self, item):
        return self.default_memory is not None or any(True for _ in item.iter_markers("memrun"))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        if not self.wanted(item):
            return None
        item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        for report in self.run(item, nextitem):
            item.ihook.pytest_runtest_logreport(report=report)
        item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True

    def run(self, item, nextitem):
        try:
            marks = self.marks(item)
        except ValueError as e:
            return self.error_reports(item, f"{_where(item)}: {e}")
        if not self.start():
            return self.skip_reports(item, self.unenforceable.splitlines()[0])
        # What the parent set up for earlier cases goes first: the fork sets
        # up and tears down all it needs, so that no fixture is finalised
        # twice (once in the fork, once here).
        item.session._setupstate.teardown_exact(None)
        capman = self.config.pluginmanager.getplugin("capturemanager")
        if capman is not None:
            capman.read_global_capture()  # output before the case is not the case's
        shown = None
        for run in range(1, self.repeat + 1):
            # What memrun makes ready while this run goes: the next run, or
            # the next case.
            following = (item, run + 1) if run < self.repeat else (nextitem, 1)
            try:
                reports, verdict = self.run_once(item, marks, run, following)
            except (MemrunGone, OSError) as e:
                return self.error_reports(item, f"memrun serve ended before the case did: {e}")
            except ValueError as e:
                return self.error_reports(item, f"{_where(item)}: {e}")
            if "error" in verdict:
                return self.error_reports(item, verdict["error"])
            # The run that says most: the first that did not pass, else the last.
            if shown is None or shown[1]["run"]["passed"]:
                shown = (reports, verdict)
        reports, verdict = shown
        return self.show(item, reports, verdict.get("final", verdict["run"]), capman)

    def channel_fds(self):
        """In a pytest-xdist worker, the descriptors of its channel to the
        controller (execnet's pipes, dup'ed from the worker's stdin and
        stdout): the fork closes them first, or a case could speak to the
        controller as its worker (send reports for any case, or a memrun
        report of its own making as the worker's output)."""
        if self.worker is None:
            return []
        if self._channel is None:
            fds = set()
            for plugin in self.config.pluginmanager.get_plugins():
                io = getattr(getattr(getattr(plugin, "channel", None), "gateway", None), "_io", None)
                for f in (getattr(io, "outfile", None), getattr(io, "infile", None)):
                    try:
                        fds.add(f.fileno())
                    except (AttributeError, OSError, ValueError):
                        pass
            if not fds:
                raise ValueError("pytest-xdist's channel to its controller was not found in this worker, so a case "
                                 "could not be kept from it: this pytest-xdist is not one the plugin knows")
            self._channel = sorted(fds)
        return self._channel

    def marks(self, item):
        marks = {}
        for k, v in marks_of(item).items():
            try:
                marks[k] = _json_value(v)
            except ValueError as e:
                raise ValueError(f"@pytest.mark.memrun({k}=...): {e}") from None
        return marks

    def request(self, item, marks, run):
        """Asks memrun to make the case's group (and init) ready; its id."""
        if len(item.nodeid.encode("utf-8", "replace")) > _MAX_NODEID:
            raise ValueError(f"the case's id is over {_MAX_NODEID // 1024} KiB, more than memrun takes: shorten "
                             "its parameters' ids (pytest.param(..., id=...))")
        self.ids += 1
        path, line, _ = item.location
        absolute = os.path.join(str(self.config.rootpath), path)
        base = os.environ.get("GITHUB_WORKSPACE") or str(self.config.rootpath)
        nodepath, sep, rest = item.nodeid.partition("::")
        arg = os.path.relpath(os.path.join(str(self.config.rootpath), nodepath), os.getcwd()) + sep + rest
        self.memrun.send({"case": {"id": self.ids, "nodeid": item.nodeid, "arg": arg, "marks": marks,
                                   "where": _where(item), "file": os.path.relpath(absolute, base),
                                   "line": (line or 0) + 1, "cwd": os.getcwd(), "run": run, "runs": self.repeat,
                                   "default_memory": self.default_memory}})
        return self.ids

    def ahead(self, following):
        """Asks for the following case (or run) now, so that memrun makes it
        ready while this one runs."""
        item, run = following
        if item is None or not self.wanted(item) or (item.nodeid, run) in self.prepared:
            return
        try:
            marks = self.marks(item)
            self.prepared[(item.nodeid, run)] = self.request(item, marks, run)
        except ValueError:
            return  # its own turn says why

    def run_once(self, item, marks, run, following):
        """One run of the case in a fork memrun takes in; (pytest's reports,
        memrun's verdict)."""
        m = self.memrun
        channel = self.channel_fds()  # before anything is made for the case
        cid = self.prepared.pop((item.nodeid, run), None) or self.request(item, marks, run)
        key, ready, fds = m.receive("ready", cid)
        if key == "error":
            return [], {"error": ready["message"]}
        pidns, namespaces = (fds[0], fds[1:4]) if ready["sealed"] else (None, [])
        r_report, w_report = os.pipe2(os.O_CLOEXEC)
        r_go, w_go = os.pipe2(os.O_CLOEXEC)
        global _entry
        parents = [m.mine_fd, r_report, w_go] + [fd for fd in (pidns, self.own_pidns) if fd is not None]
        parents += channel
        _entry = _Entry(threading.get_ident(), parents, r_go, w_report, namespaces, os.getcwd(), ready["env"],
                        ready["unset"], ready["hugepages_off"])
        pid = None
        try:
            # setns(CLONE_NEWPID) changes where this process's next child is
            # born, not this process: the fork is the first process of the
            # case's pid namespace after its init; pytest stays where it is.
            if pidns is not None:
                _setns(pidns, _CLONE_NEWPID, "the case's pid namespace, for its fork")
            # What pytest holds now is never collected in the fork: its
            # pages stay shared (a collection would write to every object).
            gc.freeze()
            try:
                pid = os.fork()
            finally:
                if pid != 0 and pidns is not None:
                    _setns(self.own_pidns, _CLONE_NEWPID, "pytest's own pid namespace")
        except OSError as e:
            _entry = None
            for fd in fds + [r_report, w_report, r_go, w_go]:
                os.close(fd)
            m.send({"abandon": {"id": cid, "why": str(e)}})
            m.receive("verdict", cid)
            return [], {"error": f"pytest could not fork the case: {e}"}
        if pid == 0:
            self.child(item, w_report)  # never returns
        _entry = None
        for fd in fds + [r_go, w_report]:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        try:
            m.send({"take": {"id": cid}}, [pidfd])
            key, taken, _ = m.receive("taken", cid)
            os.write(w_go, b"G" if key == "taken" else b"X")
            if key == "taken":
                self.ahead(following)
            said = self.serve_case(cid, r_report, w_go, pidfd)
        finally:
            os.close(pidfd)
            os.close(w_go)
        _, status = os.waitpid(pid, 0)
        reports, why = self.reports_of(item, said)
        if why and not said.get("error"):
            said["error"] = why
        if key != "taken":
            return [], {"error": taken["message"]}
        m.send({"ended": {"id": cid, "status": status, "outcome": outcome_word(reports) if reports else "none"}})
        _, verdict, _ = m.receive("verdict", cid)
        if said.get("error") and not reports:
            verdict["crash"] = said["error"]
        return reports, verdict

    def reports_of(self, item, said):
        """pytest's reports of this case from what its fork said: only its
        own (its node id), one per phase, in order; what else it sent is no
        report (a case cannot speak for another, nor twice for itself).
        (reports, why some were refused or None)."""
        reports, seen, why = [], set(), None
        data = said.get("reports", []) if isinstance(said, dict) else []
        for d in data if isinstance(data, list) else []:
            try:
                if not isinstance(d, dict) or d.get("nodeid") != item.nodeid or d.get("when") in seen \
                        or d.get("when") not in ("setup", "call", "teardown"):
                    raise ValueError("a report of another case, or a second of the same phase")
                # JSON has no tuples: a skip's (path, line, reason) comes back a list.
                if isinstance(d.get("longrepr"), list) and len(d["longrepr"]) == 3:
                    d["longrepr"] = tuple(d["longrepr"])
                report = self.config.hook.pytest_report_from_serializable(config=self.config, data=d)
                if report is None or getattr(report, "nodeid", None) != item.nodeid:
                    raise ValueError("no test report")
            except Exception as e:  # the fork's bytes: nothing of them may end pytest
                why = f"the case's process sent pytest a report memrun refused ({e})"
                continue
            seen.add(d["when"])
            reports.append(report)
        reports.sort(key=lambda r: ("setup", "call", "teardown").index(r.when))
        return reports, why

    def serve_case(self, cid, r_report, w_go, pidfd):
        """What the case's process says while it runs (its blocks, which
        memrun measures) and at its end (its reports), read until it exits
        (what it left running may hold the pipe open long after). Its own
        bytes: bounded."""
        said, buffer = {}, b""
        os.set_blocking(r_report, False)
        try:
            while True:
                ready, _, _ = select.select([r_report, pidfd], [], [])
                gone = pidfd in ready
                while True:
                    try:
                        chunk = os.read(r_report, 1 << 16)
                    except BlockingIOError:
                        break
                    if not chunk:
                        gone = True
                        break
                    buffer += chunk
                    if len(buffer) > _MAX_REPORTS:
                        return {}
                while len(buffer) >= 4 and len(buffer) >= 4 + int.from_bytes(buffer[:4], "big"):
                    n = int.from_bytes(buffer[:4], "big")
                    try:
                        message = json.loads(buffer[4:4 + n])
                    except (ValueError, RecursionError):  # the case's bytes: anything
                        message = {}
                    buffer = buffer[4 + n:]
                    if isinstance(message, dict) and "block" in message:
                        block = _block_request(message["block"])
                        if block is None:
                            _send_back(w_go, {"error": "a block needs op begin or end and a name of at most "
                                                       f"{_MAX_BLOCK_NAME} characters"})
                            continue
                        self.memrun.send({"block": dict(block, id=cid)})
                        key, answer, _ = self.memrun.receive("block", cid)
                        _send_back(w_go, answer if key == "block" else {"error": answer.get("message", "")})
                    elif isinstance(message, dict):
                        said = message
                if gone:
                    return said
        finally:
            os.close(r_report)

    def child(self, item, w_report):
        """The fork: the case's protocol, its reports back to pytest's
        process, and its end. Never returns."""
        code = 0
        try:
            from _pytest.runner import runtestprotocol
            _blocks.clear()  # the case's own, named from its first
            reports = runtestprotocol(item, log=False, nextitem=None)
            data = [self.config.hook.pytest_report_to_serializable(config=self.config, report=r) for r in reports]
            payload = {"reports": data}
        except BaseException:
            payload = {"error": traceback.format_exc()}
            code = 1
        try:
            _send_back(w_report, payload)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)

    # --- memrun's verdict, shown as pytest shows a case ---------------------
    def show(self, item, reports, verdict, capman):
        from _pytest.reports import TestReport
        props = [("memrun_outcome", verdict["outcome"]), ("memrun_peak_bytes", verdict["peak_bytes"]),
                 ("memrun_limit_bytes", verdict["limit_bytes"]), ("memrun_headroom_bytes", verdict["headroom_bytes"]),
                 ("memrun_headroom_pct", round(verdict["headroom_pct"], 1))]
        text = verdict["text"]
        keywords = {k: 1 for k in item.keywords}
        have = {rep.when for rep in reports}
        # The phases the case's process never reported, where it ended
        # before its teardown did (an OOM kill, a timeout, a crash): memrun's
        # verdict stands for them.
        if "teardown" not in have or "setup" not in have:
            for when in ("setup", "call", "teardown"):
                if when not in have:
                    reports.append(TestReport(item.nodeid, item.location, keywords, "passed", None, when, [], 0.0))
        reports.sort(key=lambda r: ("setup", "call", "teardown").index(r.when))
        pytest_failed = any(rep.failed for rep in reports if rep.when in have)
        if not verdict["passed"] and not (pytest_failed and verdict["outcome"] == "fail"):
            # memrun's failure (memory, a timeout, a case that ended before
            # pytest could say): the case fails with memrun's words first.
            call = next((r for r in reports if r.when == "call"), None)
            setup = next(r for r in reports if r.when == "setup")
            if call is None or setup.failed or setup.skipped:
                call = setup
            before = f"\n\n{call.longreprtext}" if call.failed and call.longrepr else ""
            output = ""
            if not have and capman is not None:
                out, err = capman.read_global_capture()
                tail = "\n".join((out + err).splitlines()[-20:])
                if tail.strip():
                    output = "\n--- the case's output (last lines) ---\n" + tail
            call.outcome, call.longrepr = "failed", text + before + output
            if hasattr(call, "wasxfail"):
                del call.wasxfail
        for rep in reports:
            rep.user_properties = list(rep.user_properties) + props
            if rep.when == "call" and not rep.failed:  # (a failure says it first)
                rep.sections.append(("memrun", text))
        return reports

    def error_reports(self, item, why):
        from _pytest.reports import TestReport
        keywords = {k: 1 for k in item.keywords}
        return [TestReport(item.nodeid, item.location, keywords, "failed", f"memrun: {why}", "setup", [], 0.0),
                TestReport(item.nodeid, item.location, keywords, "passed", None, "teardown", [], 0.0)]

    def skip_reports(self, item, why):
        from _pytest.reports import TestReport
        keywords = {k: 1 for k in item.keywords}
        path, line, _ = item.location
        return [TestReport(item.nodeid, item.location, keywords, "skipped", (path, (line or 0) + 1, f"Skipped: {why}"),
                           "setup", [], 0.0),
                TestReport(item.nodeid, item.location, keywords, "passed", None, "teardown", [], 0.0)]


def _where(item):
    path, line, _ = item.location
    return f"{path}:{(line or 0) + 1}"
