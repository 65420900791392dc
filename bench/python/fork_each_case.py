"""bench/run pytest_suites' baseline for the fork model (-p fork_each_case
--fork-each-case): each case runs in a fork of pytest's process, as pytest
--memrun runs it, with no memrun, no cgroup and no seal. What it costs over
plain pytest is what forking pytest costs; what pytest --memrun costs over
it is memrun's part. A measuring tool, not a runner: no timeout, no crash
handling beyond "the fork said nothing"."""
import gc
import json
import os

import pytest


def pytest_addoption(parser):
    parser.addoption("--fork-each-case", action="store_true", default=False,
                     help="bench: run each case in a fork of pytest's process (no memrun)")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    if not item.config.getoption("fork_each_case"):
        return None
    from _pytest.runner import runtestprotocol
    hook, config = item.ihook, item.config
    hook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    # As the plugin does: what the parent set up goes first, so that the
    # fork sets up and tears down all it needs.
    item.session._setupstate.teardown_exact(None)
    r, w = os.pipe2(os.O_CLOEXEC)
    gc.freeze()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(r)
            reports = runtestprotocol(item, log=False, nextitem=None)
            data = json.dumps([config.hook.pytest_report_to_serializable(config=config, report=x)
                               for x in reports], default=str).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    while True:
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    for d in json.loads(b"".join(chunks) or b"[]"):
        if isinstance(d.get("longrepr"), list) and len(d["longrepr"]) == 3:
            d["longrepr"] = tuple(d["longrepr"])
        hook.pytest_runtest_logreport(report=config.hook.pytest_report_from_serializable(config=config, data=d))
    hook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
