"""read_parquet of one column of the wide fixture: what pola-rs/polars#15098
found reading every column from Polars 0.20 until 0.20.17 (fixed by #15229).
specs/polars_regression.yaml runs it under each Polars of specs/python.
Usage: read_one_column.py PATH"""
import sys

import polars as pl

df = pl.read_parquet(sys.argv[1], columns=["c0"])
assert df.width == 1
print(f"polars {pl.__version__}: {df.height} rows of c0")
