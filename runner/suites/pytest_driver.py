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

Both register the `memrun` marker, so that --strict-markers accepts it:

  @pytest.mark.memrun(memory="64MiB", expect="oom", min_headroom="20%")
"""
import json
import os
import sys

import pytest

# memrun reads and checks a marker's keys with the spec's own table
# (runner/spec/keys.cc): the same keys and messages as pytest --memrun.
MARKER = ("memrun(memory=SIZE, **keys): the hard memory limit memrun runs this case under, in a cgroup of "
          "its own; any other key of a memrun spec's test too (expect=oom, min_headroom=\"20%\", timeout=\"30s\", ...)")


def where(item):
    """The test's file and line, as an editor takes them."""
    path, line, _ = item.location
    return f"{path}:{(line or 0) + 1}"


def value_of(value):
    """A marker's value as JSON memrun reads (as YAML, through the spec's
    table): text, numbers, booleans, lists and mappings; anything else its text."""
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [value_of(v) for v in value]
    if isinstance(value, dict):
        return {str(k): value_of(v) for k, v in value.items()}
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
                    marks[key] = value_of(value)
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


def main(argv):
    mode, args = argv[0], argv[1:]
    if mode == "collect":
        out = os.fdopen(int(os.environ["MEMRUN_PYTEST_FD"]), "w")
        return pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *args], plugins=[Plugin(out, args)])
    plugin = Plugin(case=args[0])
    # Opened before the case runs, which may change the environment or the
    # folder (the name is /proc/PID/fd/N, a memory file memrun holds for it).
    where = os.environ.get("MEMRUN_PYTEST_OUTCOME")
    outcome = None
    if where:
        try:
            outcome = open(where, "w")
        except OSError as e:  # memrun then says pytest never said
            print(f"memrun's pytest plugin: cannot open {where} for the case's outcome: {e}", file=sys.stderr)
    code = pytest.main(["-q", "-p", "no:cacheprovider", *args[1:]], plugins=[plugin])
    # How the case ended, written only now that pytest's session has: a
    # process that ends before (os._exit in the test) leaves no word, and
    # memrun does not take its exit code for pytest's verdict.
    said = plugin.outcome or "none"
    if code != 0 and said in ("passed", "skipped"):
        said = "failed"  # the session failed after the case (a teardown, a plugin)
    if outcome:
        try:
            with outcome:
                outcome.write(said)
        except OSError as e:
            print(f"memrun's pytest plugin: cannot write the case's outcome to {where}: {e}", file=sys.stderr)
    if code == 0 and plugin.outcome == "skipped":
        return SKIPPED
    return code


sys.exit(main(sys.argv[1:]))
