"""memrun's pytest plugin. memrun runs it itself (python3 -c), so nothing is
installed and no conftest.py changes:

  collect ARGS...  pytest's own collection of ARGS; one JSON line per case
                   goes to the file descriptor $MEMRUN_PYTEST_FD:
                   {"nodeid": ..., "memrun": {marker keywords},
                    "arg": the case as an argument from the current folder},
                   a module (or folder) pytest skipped as it collected it
                   (pytest.importorskip, a module-level pytest.skip) is a
                   line with "skipped": pytest's reason and no marker;
                   then {"options": ARGS without their paths}
  run NODEID ARGS...
                   runs that one case as pytest ARGS would (memrun starts one
                   process per case, each in a cgroup of its own): every
                   option of ARGS applies, and pytest finds its rootdir, ini
                   file and conftests from ARGS' paths as it would alone;
                   only the case is collected. How it ended ("passed",
                   "failed", "skipped" for a skip or xfail, "none" when it
                   never ran to its end) goes to the file
                   $MEMRUN_PYTEST_OUTCOME names, once pytest's session has
                   ended; a skipped case also exits 77 (pytest itself
                   exits 0 then)
  serve ARGS...    pytest ARGS, prepared once for many cases: it collects
                   ARGS, says {"ready": N} on the SOCK_SEQPACKET socket
                   $MEMRUN_PYTEST_FD, then runs each case memrun asks for
                   there in a fork of itself, inside that case's sealed
                   test (see serve() below), as `run` would have

Both register the `memrun` marker, so that --strict-markers accepts it:

  @pytest.mark.memrun(memory="64MiB", expect="oom", min_headroom="20%")
"""
import difflib
import gc
import json
import os
import fcntl
import select
import selectors
import signal
import socket
import stat
import struct
import sys

import pytest

KEYS = ("memory", "memory_high", "expect", "min_headroom", "timeout", "max_increase", "inputs", "thrash")
MARKER = ("memrun(memory=None, memory_high=None, expect=None, min_headroom=None, timeout=None, max_increase=None, "
          "inputs=None, thrash=None): the memory limit (and expectation) memrun runs this test under")


def where(item):
    """The test's file and line, as an editor takes them."""
    path, line, _ = item.location
    return f"{path}:{(line or 0) + 1}"


def value_of(key, value):
    # inputs: a list of paths (one path alone is a list of one), as JSON.
    if key == "inputs":
        return json.dumps([str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)])
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


SKIPPED = 77


def options_only(config, args):
    """ARGS without the paths pytest took from them: each positional
    argument found by parsing ARGS without it (an option's value, such as
    -m's, is not one)."""
    paths = list(config.known_args_namespace.file_or_dir or [])
    out = list(args)
    for i in reversed(range(len(out))):
        if out[i] not in paths:
            continue
        rest = out[:i] + out[i + 1:]
        left = list(config._parser.parse_known_args(rest).file_or_dir or [])
        expected = list(paths)
        expected.remove(out[i])
        if left == expected:
            paths = expected
            out = rest
    return out


class Plugin:
    def __init__(self, out=None, args=(), case=None):
        self.out, self.args, self.case = out, list(args), case
        self.outcome = None  # of the case, in run mode
        self.skipped = []  # collection reports of what pytest skipped as it collected it

    def pytest_collectreport(self, report):
        # Once a node id: with --doctest-modules a module is collected twice.
        if self.out is not None and report.skipped and report.nodeid and \
                all(r.nodeid != report.nodeid for r in self.skipped):
            self.skipped.append(report)

    def pytest_configure(self, config):
        config.addinivalue_line("markers", MARKER)
        if self.case is not None:
            # The case alone, from the rootdir pytest found for ARGS (a node
            # id is relative to it, not to the current folder).
            path, sep, rest = self.case.partition("::")
            config.args = [str(config.rootpath / path) + sep + rest]

    def pytest_runtest_logreport(self, report):
        # The worst phase wins: a failed setup or teardown is pytest's
        # "error"; a skip or xfail (wasxfail) in setup or call a skip.
        if report.failed:
            self.outcome = "failed"
        elif report.skipped and self.outcome != "failed":
            self.outcome = "skipped"
        elif report.passed and report.when == "call" and self.outcome is None:
            self.outcome = "passed"

    def pytest_collection_finish(self, session):
        if self.out is None:
            return
        here = session.config.invocation_params.dir
        for item in session.items:
            marks, error = {}, None
            # Closest last, so that a function's marker wins over its class's
            # and its module's.
            for mark in reversed(list(item.iter_markers("memrun"))):
                if mark.args:
                    error = f"{where(item)}: @pytest.mark.memrun takes keywords only, e.g. memrun(memory=\"64MiB\")"
                for key, value in mark.kwargs.items():
                    if key not in KEYS:
                        near = difflib.get_close_matches(key, KEYS, n=1)
                        error = (f"{where(item)}: @pytest.mark.memrun has no keyword '{key}'" +
                                 (f"; did you mean '{near[0]}'?" if near else f" (it takes {', '.join(KEYS)})"))
                    marks[key] = value_of(key, value)
            path, sep, rest = item.nodeid.partition("::")
            arg = os.path.relpath(session.config.rootpath / path, here) + sep + rest
            line = {"nodeid": item.nodeid, "memrun": marks, "arg": arg, "where": where(item)}
            if error:
                line["error"] = error
            self.out.write(json.dumps(line) + "\n")
        for report in self.skipped:
            # pytest's own words: (path, line, "Skipped: why") for a skip.
            longrepr = report.longrepr
            said = isinstance(longrepr, tuple) and len(longrepr) == 3
            why = str(longrepr[2] if said else longrepr)
            why = why[len("Skipped: "):] if why.startswith("Skipped: ") else why
            at = (f"{os.path.relpath(longrepr[0], session.config.rootpath)}:{longrepr[1]}" if said
                  else report.nodeid)
            path = report.nodeid.partition("::")[0]
            arg = os.path.relpath(session.config.rootpath / path, here)
            self.out.write(json.dumps({"nodeid": report.nodeid, "memrun": {}, "arg": arg, "where": at,
                                       "skipped": why}) + "\n")
        self.out.write(json.dumps({"options": options_only(session.config, self.args)}) + "\n")
        self.out.flush()


# Kernel interfaces the prepared process needs, through the C library
# (Python 3.11 has no os.setns or os.unshare).
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWPID = 0x00020000, 0x02000000, 0x20000000
PR_SET_PDEATHSIG = 1


def libc_call(name, *args):
    import ctypes
    global LIBC
    if LIBC is None:  # loaded once, before the first fork
        LIBC = ctypes.CDLL(None, use_errno=True)
    if getattr(LIBC, name)(*args) == -1:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}: {os.strerror(err)}")


LIBC = None


def close_what_could_escape():
    """Closes what a module or conftest opened as this process imported it,
    outside any test's seal, that could take a case out of its own: a
    directory or path (the host's cgroup hierarchies, /proc, /dev/shm
    through it), a file of /proc, /sys or /dev but the harmless ones, a
    namespace, a pidfd, an io_uring, a Unix or netlink socket (a service
    manager's bus). Files, pipes and network sockets stay, as in one pytest
    process."""
    keep_dev = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            mode = os.fstat(fd).st_mode
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        except OSError:
            continue  # the listing's own
        if fd <= 2:
            continue
        if stat.S_ISSOCK(mode):
            with socket.socket(fileno=os.dup(fd)) as s:
                risky = s.family in (socket.AF_UNIX, socket.AF_NETLINK)
        elif target.startswith(("pipe:", "anon_inode:[eventfd]", "anon_inode:[eventpoll]", "anon_inode:[timerfd]",
                                "anon_inode:[signalfd]")):
            risky = False
        else:
            risky = (stat.S_ISDIR(mode) or flags & O_PATH or not target.startswith("/") or
                     target.startswith(("/proc", "/sys")) or
                     (target.startswith("/dev/") and not target.startswith(keep_dev + ("/dev/pts/",))))
        if risky:
            os.close(fd)


O_PATH = getattr(os, "O_PATH", 0o10000000)


def root_of(pidfd):
    """An O_PATH descriptor of the root folder of the process `pidfd`
    names, as nsenter --root takes it: opened through /proc/PID/root, and
    its process still alive after (its pid was not another's)."""
    with open(f"/proc/self/fdinfo/{pidfd}") as f:
        pid = int(next(line for line in f if line.startswith("Pid:")).split()[1])
    root = os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    if pid <= 0 or select.select([pidfd], [], [], 0)[0]:
        os.close(root)
        raise ProcessLookupError("the case's test ended before the case started")
    return root


class Serve:
    """serve mode: pytest's session, configured and collected once; each
    case then runs in a fork of it. memrun starts a case's sealed test
    first (its groups, its pid, mount and cgroup namespaces, its init),
    with no command of its own, and sends here what the case needs: its
    node id, environment and folder, and as descriptors the init's pidfd,
    the case's stdout and stderr, the pipe its init waits on for the case's
    wait status, and cgroup.procs of each of its groups. What the forked
    case inherits from this process memrun gave it as it would a test
    (the seccomp filter, no huge pages, the open-files limit, the OOM
    score); the rest it takes itself (child(), below). What this process
    imported (pytest, plugins, conftests, the test modules) is its own,
    shared copy-on-write: a case's group is charged for what the case
    touches and allocates from its fork on."""

    def __init__(self, sock, plugin):
        self.sock, self.plugin, self.items = sock, plugin, {}
        self.running = {}  # the pidfd of each case's fork -> (its pid, its init's pipe)
        self.environment = dict(os.environb)  # as memrun started it

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        self.items = {item.nodeid: item for item in session.items}
        # A fork has one thread: a lock another thread held (a conftest's,
        # a library's pool) would stay held in it, and the case hang.
        threads = len(os.listdir("/proc/self/task"))
        if threads > 1:
            print(f"memrun: this pytest runs {threads} threads once it has collected the suite (a conftest's or "
                  "a library's, started at import): its forks could hang, so each case starts afresh")
            return True
        # What a conftest or plugin added to the environment as it was
        # imported, each case gets too, over its own (as from its own pytest).
        self.added = {k: v for k, v in os.environb.items() if self.environment.get(k) != v}
        # A case's end is waited for here, whatever a conftest did to SIGCHLD;
        # the case gets back what it did.
        self.sigchld = signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        # Forks must not inherit what a plugin buffered for this process's
        # own output; nor scan (and so copy) every object this process made.
        sys.stdout.flush()
        sys.stderr.flush()
        gc.freeze()
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.sock, selectors.EVENT_READ)
        self.sock.send(json.dumps({"ready": len(self.items)}).encode())
        # Never a wait on one case: each may run for minutes.
        while True:
            for key, _ in self.selector.select():
                if key.fileobj is self.sock:
                    if not self.take(session):
                        return True  # memrun closed its end: the run is over
                else:
                    self.ended(key.fileobj)

    def take(self, session):
        """Starts the case memrun asks for; False once memrun is gone."""
        try:
            msg, fds, _, _ = socket.recv_fds(self.sock, 1 << 20, 64)
        except InterruptedError:
            return True
        if not msg:
            return False
        try:
            # NODEID \0 FOLDER \0 NAME=VALUE \0 ... (bytes: a folder or a
            # value need not be UTF-8)
            nodeid, cwd, *env = msg.split(b"\0")
            pidfd, out, err, vessel, procs = fds[0], fds[1], fds[2], fds[3], fds[4:]
            # setns with a pidfd (5.8+): this process's children are born
            # in the init's pid namespace (its own stays where it is).
            fds.append(root_of(pidfd))
            libc_call("setns", pidfd, CLONE_NEWPID)
            pid = os.fork()
            if pid == 0:
                self.child(session, nodeid.decode(), cwd, env, pidfd, out, err, procs + [vessel], fds[-1])
            ended = os.pidfd_open(pid)
            self.running[ended] = (pid, fds.pop(3))
            self.selector.register(ended, selectors.EVENT_READ)
        except Exception as e:  # the case's init reads EOF: its test fails, saying why
            if len(fds) > 2:
                try:
                    os.write(fds[2], f"memrun's prepared pytest could not start the case: {e}\n".encode())
                except OSError:
                    pass
        finally:
            for fd in fds:
                os.close(fd)
        return True

    def ended(self, pidfd):
        """A case's fork ended: its init gets its wait status and resource
        usage, as from its own command (init::InitReport)."""
        pid, vessel = self.running.pop(pidfd)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        try:
            _, status, usage = os.wait4(pid, 0)
        except OSError:  # its status is lost: its init reads EOF, and its test fails
            os.close(vessel)
            return

        def timeval(s):
            return [int(s), int(round((s - int(s)) * 1e6))]
        # struct InitReport {int status; struct rusage usage;} (x86_64, arm64).
        report = struct.pack("i4x4q14q", status, *timeval(usage.ru_utime), *timeval(usage.ru_stime),
                             *(getattr(usage, f) for f in ("ru_maxrss", "ru_ixrss", "ru_idrss", "ru_isrss",
                                                           "ru_minflt", "ru_majflt", "ru_nswap", "ru_inblock",
                                                           "ru_oublock", "ru_msgsnd", "ru_msgrcv", "ru_nsignals",
                                                           "ru_nvcsw", "ru_nivcsw")))
        try:
            os.write(vessel, report)
        except OSError:
            pass  # the test was killed first: its init's end stands
        os.close(vessel)

    def child(self, session, nodeid, cwd, env, pidfd, out, err, procs_and_vessel, root):
        """The case, born in its pid namespace: before anything of the
        test runs, it lets go of every other case's descriptors and of
        memrun's socket, enters its init's mount namespace, joins its
        groups and roots a cgroup namespace there (as the init's own command
        seals itself), then runs as `run` would."""
        code, step = 4, "its start"
        try:
            for fd in self.running:
                os.close(fd)
                os.close(self.running[fd][1])
            self.selector.close()
            self.sock.close()
            # Dies with this process, which reports its end.
            libc_call("prctl", PR_SET_PDEATHSIG, 9, 0, 0, 0)
            step = "entering its mount namespace"
            libc_call("setns", pidfd, CLONE_NEWNS)
            os.close(pidfd)
            # setns leaves the caller at the namespace's root mount; the
            # init's root may be a folder below it (memrun under chroot).
            here, there = os.stat("/"), os.fstat(root)
            if (here.st_dev, here.st_ino) != (there.st_dev, there.st_ino):
                os.fchdir(root)
                os.chroot(".")
            os.close(root)
            *procs, vessel = procs_and_vessel
            os.close(vessel)
            step = "joining its groups"
            for fd in procs:
                os.write(fd, b"0")  # moves the writer (v1 and v2)
                os.close(fd)
            step = "its cgroup namespace"
            libc_call("unshare", CLONE_NEWCGROUP)
            os.setsid()
            step = "its output"
            signal.signal(signal.SIGCHLD, self.sigchld)
            close_what_could_escape()
            null = os.open("/dev/null", os.O_RDONLY)
            # Other copies of this process's own output (faulthandler's,
            # a logging handler's) become the case's stderr.
            log = os.fstat(2)
            for name in os.listdir("/proc/self/fd") if stat.S_ISREG(log.st_mode) else ():
                fd = int(name)
                if fd > 2 and fd not in (null, out, err):
                    try:
                        st = os.fstat(fd)
                    except OSError:
                        continue
                    if (st.st_dev, st.st_ino) == (log.st_dev, log.st_ino):
                        os.dup2(err, fd)
            for fd, target in ((null, 0), (out, 1), (err, 2)):
                os.dup2(fd, target)
                os.close(fd)
            # pytest's capture, afresh on the case's streams: its files
            # until now are this process's, shared by every fork (what one
            # case left there would be read as the next one's output).
            capman = session.config.pluginmanager.getplugin("capturemanager")
            old = getattr(capman, "_global_capturing", None)
            if old is not None:
                for capture in (old.in_, old.out, old.err):
                    for fd in (getattr(capture, "targetfd_save", None),
                               getattr(getattr(capture, "tmpfile", None), "fileno", lambda: None)()):
                        if isinstance(fd, int) and fd > 2:
                            try:
                                os.close(fd)
                            except OSError:
                                pass
                capman._global_capturing = None
                capman.start_global_capturing()
                capman.suspend_global_capture()
            step = f"its folder {os.fsdecode(cwd)}"
            os.chdir(cwd)
            os.environ.clear()
            for kv in env:
                name, eq, value = kv.partition(b"=")
                if eq:
                    os.environb[name] = value
            os.environb.update(self.added)
            step = "pytest"
            code = self.run(session, nodeid)
        except BaseException as e:
            try:
                os.write(2, f"memrun's prepared pytest could not run the case ({step}): {e!r}\n".encode())
            except OSError:
                pass
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)

    def run(self, session, nodeid):
        where = os.environ.get("MEMRUN_PYTEST_OUTCOME")
        item = self.items.get(nodeid)
        if item is None:
            print(f"memrun's prepared pytest: pytest did not collect {nodeid} this time "
                  "(run the suite with `prepared: off`)", file=sys.stderr)
            return written(where, "none", 4)
        # The case alone, as `run` collects it: what this process counted
        # as it collected the others (an error in another module) is not
        # the case's.
        session.testsfailed = 0
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.stats.clear()
            # "1 passed in 0.02s": the case's own time (pytest 8.4+, before).
            if hasattr(getattr(reporter, "_session_start", None), "elapsed"):
                reporter._session_start = type(reporter._session_start)()
            elif isinstance(getattr(reporter, "_sessionstarttime", None), float):
                import time
                reporter._sessionstarttime = time.time()
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=None)
        code = 1 if session.testsfailed else 0
        session.exitstatus = code
        item.config.hook.pytest_sessionfinish(session=session, exitstatus=code)
        return written(where, self.plugin.outcome or "none", code, self.plugin.outcome)


def written(where, said, code, outcome=None):
    """Writes how the case ended to `where`, once pytest's session has;
    returns the exit code for pytest's `code`."""
    if code != 0 and said in ("passed", "skipped"):
        said = "failed"  # the session failed after the case (a teardown, a plugin)
    if where:
        try:
            with open(where, "w") as f:
                f.write(said)
        except OSError as e:  # memrun then says pytest never said
            print(f"memrun's pytest plugin: cannot write the case's outcome to {where}: {e}", file=sys.stderr)
    if code == 0 and outcome == "skipped":
        return SKIPPED
    return code


def main(argv):
    mode, args = argv[0], argv[1:]
    if mode == "collect":
        out = os.fdopen(int(os.environ["MEMRUN_PYTEST_FD"]), "w")
        return pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *args], plugins=[Plugin(out, args)])
    if mode == "serve":
        fd = int(os.environ.pop("MEMRUN_PYTEST_FD"))
        # What memrun's own caller left open is no case's: a case started
        # afresh gets its streams alone (its init closes the rest).
        os.closerange(3, fd)
        os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))
        sock = socket.socket(fileno=fd)
        if not hasattr(socket, "recv_fds") or not hasattr(os, "pidfd_open"):
            print(f"Python {sys.version.split()[0]} cannot serve cases (3.9+ can): memrun starts each afresh")
            return 3

        plugin = Plugin()
        return pytest.main(["-q", "-p", "no:cacheprovider", *args], plugins=[plugin, Serve(sock, plugin)])
    plugin = Plugin(case=args[0])
    where = os.environ.get("MEMRUN_PYTEST_OUTCOME")  # before a test can change the environment
    code = pytest.main(["-q", "-p", "no:cacheprovider", *args[1:]], plugins=[plugin])
    # How the case ended, written only now that pytest's session has: a
    # process that ends before (os._exit in the test) leaves no word, and
    # memrun does not take its exit code for pytest's verdict.
    return written(where, plugin.outcome or "none", code, plugin.outcome)


sys.exit(main(sys.argv[1:]))
