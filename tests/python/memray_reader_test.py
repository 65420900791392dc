"""explain's reader of memray's profiles (runner/explain/memray_reader.py), on
its own: a program profiled as memrun's explain profiles one (memray run
--native --follow-fork), read back by the reader as an import and as memrun
runs it (python -I -c, its text), in a Python that has memray (.venv/engines
of ./setup.sh test).
   PYTHON -m pytest tests/python/memray_reader_test.py"""
import json
import os
import subprocess
import sys

import pytest

memray = pytest.importorskip("memray")

READER = os.path.join(os.path.dirname(__file__), "..", "..", "runner", "explain", "memray_reader.py")
sys.path.insert(0, os.path.dirname(READER))
import memray_reader  # noqa: E402

MiB = 1 << 20

PROGRAM = '''
def grow():
    return bytearray(48 * 1024 * 1024)  # the line the reader must name


held = grow()
small = [bytes(1000) for _ in range(10)]
'''


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    folder = tmp_path_factory.mktemp("memray-reader")
    program = folder / "grow.py"
    program.write_text(PROGRAM)
    prefix = str(folder / "profile")
    subprocess.run([sys.executable, "-m", "memray", "run", "--native", "--follow-fork", "--force", "-q",
                    "-o", prefix + ".bin", str(program)], check=True, cwd=folder)
    return prefix, str(program)


def test_the_site_held_at_the_peak_is_named_by_its_python_line(profile):
    prefix, program = profile
    entries = memray_reader.read(prefix + ".bin", 5)
    assert len(entries) == 1, entries
    entry = entries[0]
    assert "error" not in entry, entry
    assert entry["pid"] > 0
    assert "grow.py" in entry["command"]
    assert entry["peak"] >= 48 * MiB
    top = entry["sites"][0]
    assert top["bytes"] >= 48 * MiB
    assert top["allocations"] >= 1
    python = [f for f in top["stack"] if f[1].endswith(".py")]
    assert python[0][:2] == ["grow", program], top["stack"]
    assert python[0][2] == PROGRAM.splitlines().index("    return bytearray(48 * 1024 * 1024)  # the line the reader must name") + 1
    assert any(not f[1].endswith(".py") for f in top["stack"]), "no native frame, though --native"
    # Largest first, at most as many as asked.
    sizes = [s["bytes"] for s in entry["sites"]]
    assert sizes == sorted(sizes, reverse=True) and len(sizes) <= 5
    assert memray_reader.read(prefix + ".bin", 1)[0]["sites"] == entry["sites"][:1]


def test_memrun_runs_it_as_python_c_and_reads_one_json_list(profile):
    prefix, _ = profile
    with open(READER) as f:
        text = f.read()
    out = subprocess.run([sys.executable, "-I", "-c", text, prefix + ".bin", "5"], check=True, capture_output=True,
                         text=True).stdout
    assert json.loads(out) == json.loads(json.dumps(memray_reader.read(prefix + ".bin", 5)))


def test_a_profile_it_cannot_read_is_an_entry_with_its_error(tmp_path):
    (tmp_path / "p.bin").write_bytes(b"not a memray capture")
    entries = memray_reader.read(str(tmp_path / "p.bin"), 5)
    assert len(entries) == 1 and entries[0]["file"] == str(tmp_path / "p.bin")
    assert entries[0]["error"], entries


def test_no_profile_is_no_entry(tmp_path):
    assert memray_reader.read(str(tmp_path / "none.bin"), 5) == []
