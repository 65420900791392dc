"""memrun's pytest plugin. memrun runs it itself (python3 -c), so nothing is
installed and no conftest.py changes:

  collect ARGS...  pytest's own collection of ARGS; one JSON line per case
                   goes to the file descriptor $MEMRUN_PYTEST_FD:
                   {"nodeid": ..., "memrun": {marker keywords}}
  run NODEID       runs that one case (memrun starts one process per case,
                   each in a cgroup of its own)

Both register the `memrun` marker, so that --strict-markers accepts it:

  @pytest.mark.memrun(memory="64MiB", expect="oom", min_headroom="20%")
"""
import difflib
import json
import os
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


class Plugin:
    def __init__(self, out=None):
        self.out = out

    def pytest_configure(self, config):
        config.addinivalue_line("markers", MARKER)

    def pytest_collection_finish(self, session):
        if self.out is None:
            return
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
            line = {"nodeid": item.nodeid, "memrun": marks, "where": where(item)}
            if error:
                line["error"] = error
            self.out.write(json.dumps(line) + "\n")
        self.out.flush()


def main(argv):
    mode, args = argv[0], argv[1:]
    if mode == "collect":
        out = os.fdopen(int(os.environ["MEMRUN_PYTEST_FD"]), "w")
        return pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *args], plugins=[Plugin(out)])
    return pytest.main(["-q", "-p", "no:cacheprovider", *args], plugins=[Plugin()])


sys.exit(main(sys.argv[1:]))
