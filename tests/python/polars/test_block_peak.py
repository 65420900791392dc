# The Polars promise with block peaks (tests/python/polars_check runs it with
# pytest --memrun in .venv/engines): read_parquet of one column of the
# wide fixture (specs/polars/make_fixture.py, 16 float64 columns) costs
# about one column; all columns cost the file. The interpreter and Polars
# (~45 MiB) are outside the block, so a 1.5x threshold means what it says.
import os

import polars as pl
import pytest

import pytest_memrun

FIXTURE = os.environ["MEMRUN_FIXTURE"]


def column_bytes():
    return pl.scan_parquet(FIXTURE).select(pl.len()).collect().item() * 8


@pytest.mark.memrun(memory="256MiB")
def test_one_column_costs_one_column():
    one = column_bytes()
    with pytest_memrun.peak() as p:
        df = pl.read_parquet(FIXTURE, columns=["c0"])
    assert df.width == 1
    print(p, f"column {pytest_memrun.format_size(one)}: {p.peak / one:.2f}x")
    assert p.peak <= 1.5 * one, p


@pytest.mark.memrun(memory="1GiB")
def test_all_columns_cost_more_than_ten():
    one = column_bytes()
    with pytest_memrun.peak() as p:
        df = pl.read_parquet(FIXTURE)
    assert df.width == 16
    print(p, f"column {pytest_memrun.format_size(one)}: {p.peak / one:.2f}x")
    assert p.peak > 10 * one, p
