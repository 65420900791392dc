"""The block peak of read_parquet(columns=["c0"]) under the Polars of the
python running it, printed as bytes (tests/python/polars_check runs it under
memrun exec with each Polars of specs/python: 0.20.15 read every column,
pola-rs/polars#15098; 0.20.18 has the fix), into OUT. Usage: block_peak.py PATH OUT"""
import sys

import polars as pl

import pytest_memrun

with pytest_memrun.peak() as p:
    df = pl.read_parquet(sys.argv[1], columns=["c0"])
assert df.width == 1
with open(sys.argv[2], "w") as f:
    print(p.peak, p.source, pl.__version__, file=f)
