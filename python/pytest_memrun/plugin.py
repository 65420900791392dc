"""pytest --memrun: each case marked @pytest.mark.memrun(memory=...) runs in a
cgroup of its own under that limit and is judged by memrun, in plain pytest.

How a case runs: `memrun exec` makes the case's cgroup and starts a tiny
shell in it, which says its pid and waits. pytest forks; the child moves
itself into that shell's cgroups (cgroup.procs), runs the case's setup, call
and teardown, sends the reports back and exits; then the shell exits with
the child's status and memrun judges the group as it judges any test (OOM
kills, peak, limit, headroom, escapes). Pages the child inherited stay
charged where they were (v2 never moves charges; v1 only with
move_charge_at_immigrate, which memrun leaves off), so the figures are the
case's own, and pytest starts and collects once for the whole session.
"""
import ctypes
import json
import os
import pickle
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback

import pytest

from . import _cgroup, binary, format_size, parse_size, peak

KEYS = ("memory", "memory_high", "expect", "min_headroom", "timeout")
MARKER = ("memrun(memory=None, memory_high=None, expect=None, min_headroom=None, timeout=None): "
          "the memory limit (and expectation) memrun runs this test under")
# The case's cgroup holds this shell while the forked case runs: it says its
# pid, waits for the case's status and exits with it.
HOLDER = 'echo $$ > ready; read status < done; exit "$status"'
PR_SET_PDEATHSIG = 1  # prctl(2)


def pytest_addoption(parser):
    group = parser.getgroup("memrun", "memory limits with the kernel as the judge")
    group.addoption("--memrun", action="store_true", default=False,
                    help="run each case marked memrun(memory=...) in a cgroup of its own under its limit")
    group.addoption("--memrun-default-memory", metavar="SIZE", default=None,
                    help="with --memrun: the limit of cases without a memrun marker (default: they run as usual)")
    group.addoption("--memrun-json", metavar="FILE", default=None,
                    help="with --memrun: write a memrun report of the session (schema memrun-report/1)")
    group.addoption("--memrun-binary", metavar="PATH", default=None,
                    help="the memrun program (default: the one in this package)")


def pytest_configure(config):
    config.addinivalue_line("markers", MARKER)
    if config.getoption("memrun") and os.environ.get("MEMRUN_TEST") is None:
        config.pluginmanager.register(Session(config), "memrun-session")


@pytest.fixture
def memrun_peak(request):
    """`with memrun_peak(max="24MiB") as p:` the kernel's peak of a block
    (memrun.peak); each block's figures go into the case's report."""
    def make(max=None, retained_max=None):
        p = peak(max=max, retained_max=retained_max)
        request.node._memrun_blocks.append(p)
        return p
    request.node._memrun_blocks = []
    yield make
    for i, p in enumerate(request.node._memrun_blocks):
        if p.peak is not None:
            suffix = "" if i == 0 else f"_{i + 1}"
            request.node.user_properties.append((f"memrun_block_peak_bytes{suffix}", p.peak))
            request.node.user_properties.append((f"memrun_block_retained_bytes{suffix}", p.retained))


def marker_of(item):
    """The case's memrun keywords, the closest marker winning (function over
    class over module); raises UsageError for a marker memrun cannot use."""
    marks = {}
    for mark in reversed(list(item.iter_markers("memrun"))):
        if mark.args:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.memrun takes keywords only, e.g. memrun(memory=\"64MiB\")")
        for key, value in mark.kwargs.items():
            if key not in KEYS:
                raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.memrun has no keyword '{key}' "
                                        f"(it takes {', '.join(KEYS)})")
            marks[key] = str(value)
    return marks


class Session:
    def __init__(self, config):
        self.config = config
        self.default_memory = config.getoption("memrun_default_memory")
        if self.default_memory is not None:
            try:
                parse_size(self.default_memory)
            except ValueError as e:
                raise pytest.UsageError(f"--memrun-default-memory: {e}")
        path = config.getoption("memrun_binary")
        try:
            self.binary = path or binary()
        except FileNotFoundError as e:
            raise pytest.UsageError(str(e))
        self.json = config.getoption("memrun_json")
        self.worker = getattr(config, "workerinput", None)
        # Each case's memrun report lands in `parts`: one folder for the
        # session (xdist's workers get the controller's through the env).
        parts = os.environ.get("MEMRUN_PYTEST_PARTS")
        self.own_parts = parts is None
        self.parts = parts or tempfile.mkdtemp(prefix="memrun-pytest-")
        os.environ["MEMRUN_PYTEST_PARTS"] = self.parts
        self.count = 0

    # --- the session's report ---------------------------------------------
    def pytest_sessionfinish(self, session):
        if self.worker is not None or not self.own_parts:
            return
        try:
            if self.json:
                write_session_report(self.binary, self.parts, self.json)
        finally:
            shutil.rmtree(self.parts, ignore_errors=True)

    def pytest_report_header(self, config):
        return f"memrun: {self.binary} (each marked case in a cgroup of its own)"

    # --- one case ------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        problem = None
        try:
            marks = marker_of(item)
        except pytest.UsageError as e:
            marks, problem = {"memory": "-"}, str(e)
        if not marks.get("memory"):
            if self.default_memory is None:
                if not marks:
                    return None
                problem = f"{item.nodeid}: @pytest.mark.memrun needs memory=, e.g. memory=\"64MiB\""
            marks["memory"] = self.default_memory
        if "memory_high" in marks:
            problem = (f"{item.nodeid}: memrun(memory_high=...) is for memrun SPEC only (suites: pytest); "
                       "pytest --memrun takes memory, expect, min_headroom and timeout")
        item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        # A marker memrun cannot use errors its case alone, as pytest errors
        # a case whose fixture is wrong.
        for report in (self.error_reports(item, problem) if problem else self.run(item, marks)):
            item.ihook.pytest_runtest_logreport(report=report)
        item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True

    def run(self, item, marks):
        config = self.config
        # What the parent set up for earlier cases goes first: the child sets
        # up and tears down everything it needs, so no fixture is finalised
        # twice (once in the child, once here).
        item.session._setupstate.teardown_exact(None)
        capman = config.pluginmanager.getplugin("capturemanager")
        if capman is not None:
            capman.read_global_capture()  # output before the case is not the case's
        self.count += 1
        tag = (self.worker or {}).get("workerid", "main")
        case_dir = tempfile.mkdtemp(prefix=f"{tag}-{self.count:05d}-", dir=self.parts)
        ready, done = os.path.join(case_dir, "ready"), os.path.join(case_dir, "done")
        os.mkfifo(ready)
        os.mkfifo(done)
        # O_RDWR: opening a FIFO so never blocks, and the holder's opens
        # return at once whatever happens on this side.
        ready_fd = os.open(ready, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        done_fd = os.open(done, os.O_RDWR | os.O_CLOEXEC)
        report_path = os.path.join(case_dir, "report.json")
        # --host-cgroups: the holder's pid must be the one this process sees
        # (a sealed test runs in a pid namespace of its own, where it would
        # be another's), and the forked case is not sealed in any case.
        argv = [self.binary, "--host-cgroups", "exec", "--memory", marks["memory"], "--name", item.nodeid,
                "--json", report_path, "--run-dir", os.path.join(case_dir, "run")]
        for key in ("expect", "timeout", "min_headroom"):
            if key in marks:
                argv += ["--" + key.replace("_", "-"), marks[key]]
        argv += ["--", "/bin/sh", "-c", HOLDER]
        console = os.path.join(case_dir, "console.txt")
        with open(console, "wb") as out:
            proc = subprocess.Popen(argv, cwd=case_dir, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        holder, buf = None, b""
        while holder is None:
            r, _, _ = select.select([ready_fd], [], [], 0.05)
            if r:
                buf += os.read(ready_fd, 64)
                if buf.endswith(b"\n"):
                    holder = buf.strip().decode()
            elif proc.poll() is not None:
                break
        os.close(ready_fd)
        # Whatever made the pid wrong, the case never joins another process's
        # groups: the holder's command line must be the holder's.
        try:
            with open(f"/proc/{holder}/cmdline", "rb") as f:
                if holder is not None and HOLDER.encode() not in f.read():
                    holder = None
        except (OSError, TypeError):
            holder = None
        if holder is None:
            os.close(done_fd)
            return self.error_reports(item, f"could not start the case (exit {proc.returncode}):\n"
                                            + _tail(console))
        reports, status = self.fork_case(item, holder, marks)
        os.write(done_fd, f"{status}\n".encode())
        os.close(done_fd)
        proc.wait()
        try:
            with open(report_path) as f:
                record = json.load(f)["tests"][0]
        except (OSError, ValueError, KeyError, IndexError):
            return self.error_reports(item, f"ended (exit {proc.returncode}) without a report:\n" + _tail(console))
        out = err = ""
        if capman is not None and not reports:
            out, err = capman.read_global_capture()
        judged = self.judge(item, record, reports, out + err)
        # An escape, pytest's skip or failure: the session's report says so too.
        if self.escaped or record.get("outcome") in ("skipped", "fail"):
            with open(report_path) as f:
                whole = json.load(f)
            whole["tests"][0] = record
            with open(report_path, "w") as f:
                json.dump(whole, f)
        return judged

    def fork_case(self, item, holder, marks):
        """Runs the case in a forked child inside the holder's cgroups; its
        reports come back through a pipe. Returns (reports, status for the holder)."""
        r, w = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child
            os.close(r)
            code = 0
            try:
                # The case dies with pytest (a SIGTERM to pytest alone): the
                # holder then reads EOF, and memrun exec removes the group.
                if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
                    raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
                if os.getppid() != parent:  # pytest died before the prctl
                    os._exit(1)
                _cgroup.join(holder)
                joined = _cgroup.memory_line("self")
                os.write(w, b"J")  # joined: from here the parent watches for escapes
                os.environ["MEMRUN_TEST"] = item.nodeid
                os.environ["MEMRUN_MEMORY_LIMIT"] = str(parse_size(marks["memory"]))
                from _pytest.runner import runtestprotocol
                reports = runtestprotocol(item, log=False, nextitem=None)
                data = [self.config.hook.pytest_report_to_serializable(config=self.config, report=rep)
                        for rep in reports]
                # pickle keeps what JSON would not (a skip's longrepr tuple);
                # both ends are the same interpreter.
                now = _cgroup.memory_line("self")
                # (A group below its own is still the case's: pytest_memrun.peak()'s.)
                inside = now == joined or (now or "").startswith(joined.rstrip("/") + "/")
                payload = pickle.dumps({"reports": data, "left_for": None if inside else now})
            except BaseException:
                payload = pickle.dumps({"error": traceback.format_exc()})
                code = 1
            try:
                with os.fdopen(w, "wb") as f:
                    f.write(payload)
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
        os.close(w)
        chunks, self.escaped = [], {}
        group = _cgroup.memory_line(holder)
        while True:
            if select.select([r], [], [], 0.05)[0]:
                chunk = os.read(r, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
            if group is not None and chunks and chunks[0].startswith(b"J"):
                self.watch(pid, group)
        os.close(r)
        _, wstatus = os.waitpid(pid, 0)
        if chunks and chunks[0].startswith(b"J"):
            chunks[0] = chunks[0][1:]
        status = os.waitstatus_to_exitcode(wstatus)
        status = 128 - status if status < 0 else status  # as a shell says a signal
        self.crash = None
        try:
            data = pickle.loads(b"".join(chunks)) if chunks else {}
        except Exception:
            data = {}
        if data.get("left_for"):
            self.escaped[pid] = ("the case's own process", data["left_for"])
        if "error" in data:
            self.crash = "the case's process failed before its test ran:\n" + data["error"]
        elif "reports" not in data:
            self.crash = (f"the case's process was killed by signal {-os.waitstatus_to_exitcode(wstatus)}"
                          if os.WIFSIGNALED(wstatus) else f"the case's process exited {status} before reporting")
        reports = [self.config.hook.pytest_report_from_serializable(config=self.config, data=d)
                   for d in data.get("reports", [])]
        return reports, status

    def watch(self, pid, group):
        """memrun's escape walk cannot see the forked case (it is no child of
        the holder): the parent walks the case's tree itself. A process of
        it found outside the case's memory cgroup (or a group below it) is
        killed through a pidfd, and the case fails, as memrun fails a test
        whose process escapes."""
        for p in _cgroup.descendants(pid):
            where = _cgroup.memory_line(p)
            if where is None or where == group or where.startswith(group.rstrip("/") + "/") or _cgroup.exiting(p):
                continue
            try:
                fd = os.pidfd_open(p)
            except OSError:
                continue
            try:
                # Still below the case (not a reused pid) once the pidfd holds it.
                if p in _cgroup.descendants(pid) and not _cgroup.exiting(p):
                    with open(f"/proc/{p}/comm") as f:
                        self.escaped[p] = (f.read().strip(), where)
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
            except OSError:
                pass
            finally:
                os.close(fd)

    # --- memrun's verdict as pytest's outcome -------------------------------
    def judge(self, item, record, reports, captured):
        from _pytest.reports import TestReport
        if self.escaped:
            record["passed"] = False
            record["outcome"] = "fail"
            for run in record.get("runs") or []:
                run["outcome"], run["passed"] = "fail", False
            record["escaped_processes"] = record.get("escaped_processes", 0) + len(self.escaped)
            record["reason"] = "; ".join(f"{name} (pid {p}) left the case's cgroup for {where}: killed"
                                         for p, (name, where) in self.escaped.items())
        passed = bool(record.get("passed"))
        props = [("memrun_outcome", record.get("outcome")),
                 ("memrun_peak_bytes", record.get("peak_bytes")),
                 ("memrun_limit_bytes", record.get("limit_bytes")),
                 ("memrun_headroom_bytes", record.get("headroom_bytes")),
                 ("memrun_headroom_pct", record.get("headroom_pct"))]
        summary = verdict_text(record)
        if not reports:
            # The case's process never reported: killed (an OOM kill, a
            # timeout) or crashed. memrun's verdict decides.
            reports = [TestReport(item.nodeid, item.location, {k: 1 for k in item.keywords}, "passed", None, when, [], 0.0)
                       for when in ("setup", "call", "teardown")]
            if not passed or record.get("outcome") != "oom":
                why = f"{self.crash}\n{summary}" if self.crash else summary
                if captured.strip():
                    why += "\n--- the case's output (last lines) ---\n" + "\n".join(captured.splitlines()[-20:])
                reports[1].outcome, reports[1].longrepr = "failed", why
        elif not passed:
            call = next((rep for rep in reports if rep.when == "call"), None)
            if call is None or call.skipped:
                call = reports[0]
            before = str(call.longrepr) + "\n" if call.failed and call.longrepr else ""
            call.outcome, call.longrepr = "failed", before + summary
            if hasattr(call, "wasxfail"):
                del call.wasxfail
        # pytest's failure (an assertion, a fixture's error, a strict xpass)
        # is the case's outcome in memrun's report too: a run that did not
        # end as expected is never compared as a measurement.
        failed = [rep.when for rep in reports if rep.failed]
        if passed and failed:
            passed = False
            record["passed"] = False
            record["outcome"] = "fail"
            record["reason"] = f"pytest: the case failed (in its {', '.join(failed)})"
            for run in record.get("runs") or []:
                run["outcome"], run["passed"] = "fail", False
        # pytest's skip and xfail are the case's outcome in memrun's report
        # too, so that no comparison reads such a run as a measurement.
        if passed and any(rep.skipped for rep in reports):
            record["outcome"] = "skipped"
            for run in record.get("runs") or []:
                run["outcome"] = "skipped"
        for rep in reports:
            rep.user_properties = list(rep.user_properties) + props
            if rep.when == "call" and passed:
                rep.sections.append(("memrun", summary))
        return reports

    def error_reports(self, item, why):
        from _pytest.reports import TestReport
        reports = [TestReport(item.nodeid, item.location, {k: 1 for k in item.keywords}, "failed", f"memrun: {why}", "setup", [], 0.0)]
        reports.append(TestReport(item.nodeid, item.location, {k: 1 for k in item.keywords}, "passed", None, "teardown", [], 0.0))
        return reports


def verdict_text(t):
    """memrun's verdict of a case in a few lines, as its console says it."""
    size = lambda n: "?" if n is None else format_size(n)  # noqa: E731
    head = (f"memrun: {t.get('outcome')} (expected {t.get('expected')}), "
            f"peak {size(t.get('peak_bytes'))} of limit {size(t.get('limit_bytes'))}, "
            f"headroom {size(t.get('headroom_bytes'))} ({t.get('headroom_pct', 0):.0f}%)")
    lines = [head]
    if t.get("reason"):
        lines.append(f"memrun: {t['reason']}")
    if t.get("oom_kills"):
        lines.append(f"memrun: {t['oom_kills']} OOM kill(s) in the case's cgroup")
    for v in t.get("oom_victims") or []:
        lines.append(f"memrun: the kernel killed {v.get('name')} (pid {v.get('pid')}, "
                     f"anon-rss {size(v.get('anon_rss_bytes'))}, file-rss {size(v.get('file_rss_bytes'))})")
    if not t.get("passed"):
        b = t.get("breakdown_at_peak") or {}
        if b:
            lines.append("memrun: at the highest sample: " + ", ".join(f"{k} {size(v)}" for k, v in b.items()))
    return "\n".join(lines)


def _tail(path, lines=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def write_session_report(memrun, parts, path):
    """One memrun-report/1 of the session from each case's report (memrun
    merge: the same schema and summary as a spec run's)."""
    reports = sorted(os.path.join(d, "report.json") for d in (os.path.join(parts, n) for n in os.listdir(parts))
                     if os.path.exists(os.path.join(d, "report.json")))
    if not reports:
        raise pytest.UsageError(f"--memrun-json {path}: no case ran under memrun (mark one with memrun(memory=...))")
    # merge exits 1 when a case failed: the report is written all the same.
    done = subprocess.run([memrun, "merge", "-o", path, *reports], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode not in (0, 1) or not os.path.exists(path):
        raise pytest.UsageError(f"--memrun-json {path}: memrun merge failed: {done.stderr.strip()}")
    # Each case ran as the holder shell; its command in the report is the
    # one that reruns it (a FILE like /dev/stdout is left as merge wrote it).
    if not os.path.isfile(path):
        return
    with open(path) as f:
        report = json.load(f)
    for t in report.get("tests", []):
        t["command"] = shlex.join(["python", "-m", "pytest", "--memrun", t["name"]])
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1)
    os.replace(tmp, path)
