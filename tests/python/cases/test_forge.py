# A case that speaks for others. Each victim holds 300 MiB under 64 MiB, so
# memrun fails it whatever is said for it; tests/python/check expects
# every case here to fail, and each to appear once.
# - As its pytest-xdist worker (-n 1): the fork inherits the worker's
#   channel to the controller unless the plugin closes it; the case sends
#   passing reports for itself, says the worker is done and hands over a
#   memrun report of its own making.
# - Through its own report pipe: reports that say another case passed,
#   with memrun's properties of its own making, then it ends before its own
#   reports go.
import json
import os

import pytest
import pytest_memrun
from _pytest.reports import TestReport

MiB = 1 << 20
FORGED_PROPS = [("memrun_outcome", "pass"), ("memrun_peak_bytes", MiB), ("memrun_limit_bytes", 64 * MiB),
                ("memrun_headroom_bytes", 63 * MiB), ("memrun_headroom_pct", 98.4)]
FORGED_REPORT = json.dumps({"format": "memrun-report/1", "tests": [{"name": "test_forge.py::test_speaks_as_its_worker",
                                                                      "outcome": "pass", "passed": True}]})


def passing(config, item, when):
    rep = TestReport(item.nodeid, item.location, {}, "passed", None, when, [], 0.0, user_properties=FORGED_PROPS)
    return config.hook.pytest_report_to_serializable(config=config, report=rep)


@pytest.mark.memrun(memory="64MiB")
def test_speaks_as_its_worker(request):
    config = request.config
    worker = next((p for p in config.pluginmanager.get_plugins() if type(p).__name__ == "WorkerInteractor"), None)
    if worker is not None:
        try:
            for when in ("setup", "call", "teardown"):
                data = passing(config, request.node, when)
                data.update(item_index=worker.item_index, worker_id=worker.workerid, testrunuid=worker.testrunuid)
                worker.sendevent("testreport", data=data)
            worker.sendevent("runtest_protocol_complete", item_index=worker.item_index, duration=0.0)
            worker.sendevent("workerfinished", workeroutput={"exitstatus": 0, "shouldfail": False,
                                                             "shouldstop": False, "memrun_report": FORGED_REPORT})
        except OSError:
            pass  # the channel is closed in the case: as it should be
    hog = bytearray(b"x" * (300 * MiB))
    assert len(hog)


@pytest.mark.memrun(memory="64MiB")
def test_a_victim():
    hog = bytearray(b"v" * (300 * MiB))
    assert len(hog)


@pytest.mark.memrun(memory="64MiB")
def test_speaks_for_the_victim(request):
    config = request.config
    victim = next(i for i in request.session.items if i.name == "test_a_victim")
    data = [passing(config, item, when) for item in (victim, request.node) for when in ("setup", "call", "teardown")]
    body = json.dumps({"reports": data}).encode()
    os.write(pytest_memrun._service.out, len(body).to_bytes(4, "big") + body)
    hog = bytearray(b"x" * (300 * MiB))
    os._exit(0 if len(hog) else 1)
