"""Memory promises of Polars and PyArrow over one wide Parquet file
(specs/polars.yaml runs each case in its own cgroup; the limits are in the
markers). MEMRUN_FIXTURE names the file: 16 float64 columns, so one column
is a sixteenth of it; 256 MB of data at MEMRUN_SCALE 1, 128 MB at 0.5.
The file is read cold by every case (the spec's inputs). Figures: working
set, lowest-highest over 5 runs at scale 1 and 3 at 0.5, MiB, on Debian 12
with Polars 1.35.2 and PyArrow 22; the interpreter with Polars loaded is
~45 of them. Each min_headroom keeps the highest of them with room to spare."""
import os

import polars as pl
import pyarrow.parquet as pq
import pytest

FIXTURE = os.environ.get("MEMRUN_FIXTURE", "cache/wide.parquet")


# One column costs about one column: 70-70 / 62-62.
@pytest.mark.memrun(memory="128MiB", min_headroom="20%")
def test_read_parquet_one_column():
    assert pl.read_parquet(FIXTURE, columns=["c0"]).width == 1


# Every column under the one-column limit: killed at 128 MiB (or ended
# thrashing there: its working set does not fit) in every run.
@pytest.mark.memrun(memory="128MiB", expect="oom")
def test_read_parquet_all_columns():
    assert pl.read_parquet(FIXTURE).width == 16


# The streaming engine holds a few row groups at a time: 88-94 / 88-97.
@pytest.mark.memrun(memory="128MiB", min_headroom="10%")
def test_streaming_sum_of_every_column():
    out = pl.scan_parquet(FIXTURE).select(pl.all().sum()).collect(engine="streaming")
    assert out.width == 16


# The same query on the in-memory engine loads the whole file: killed (or
# thrashing) at 128 MiB in every run.
@pytest.mark.memrun(memory="128MiB", expect="oom")
def test_in_memory_sum_of_every_column():
    out = pl.scan_parquet(FIXTURE).select(pl.all().sum()).collect(engine="in-memory")
    assert out.width == 16


# A tenth of the rows streamed to a new file (its written pages are page
# cache; dirty ones count until written back, which v1 does not throttle
# per cgroup, so the output is kept small): 85-88 / 76-76 under 256 MiB.
@pytest.mark.memrun(memory="128MiB")
def test_sink_parquet_streams(tmp_path):
    out = tmp_path / "tenth.parquet"
    pl.scan_parquet(FIXTURE).filter(pl.col("c0") > 0.9).sink_parquet(out, row_group_size=65536)
    assert out.stat().st_size > 0


# PyArrow's column projection: 89-90 / 72-72.
@pytest.mark.memrun(memory="128MiB", min_headroom="20%")
def test_pyarrow_read_table_one_column():
    assert pq.read_table(FIXTURE, columns=["c0"]).num_columns == 1


# Every column, batch by batch: 109-111 / 109-109.
@pytest.mark.memrun(memory="160MiB", min_headroom="20%")
def test_pyarrow_iter_batches_of_every_column():
    rows = sum(batch.num_rows for batch in pq.ParquetFile(FIXTURE).iter_batches(batch_size=65536))
    assert rows > 0


# The whole table at once (decoded buffers on top of the data): killed at
# 160 MiB in every run.
@pytest.mark.memrun(memory="160MiB", expect="oom")
def test_pyarrow_read_table_all_columns():
    assert pq.read_table(FIXTURE).num_columns == 16


# Twenty reads of half the columns, under a limit the working set fits and
# the file's page cache does not (a third of the file's size to spare): each
# read takes the file back from disk. Re-reading a file is no thrashing: it
# passes. Working set 117-119 MiB at 0.5 (under pytest), under 140 MiB.
_FIXTURE_BYTES = os.path.getsize(FIXTURE) if os.path.exists(FIXTURE) else 256 << 20


@pytest.mark.memrun(memory=f"{(64 << 20) + _FIXTURE_BYTES * 2 // 3 >> 20}MiB")
def test_twenty_reads_of_half_the_columns():
    for _ in range(20):
        assert pl.read_parquet(FIXTURE, columns=[f"c{i}" for i in range(8)]).width == 8
