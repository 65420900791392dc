"""Writes the Parquet fixture of specs/polars.yaml: COLUMNS float64 columns
(c0, c1, ...) of ROWS rows in row groups of 65,536 rows (8 MiB each), so
that a streaming reader holds a few of them at a time; one column is a
sixteenth of the file. At SCALE 1: 2,000,000 rows, 16 columns (256 MB of
data, a 240 MB file). Usage: make_fixture.py PATH SCALE"""
import sys

import numpy as np
import polars as pl

path, rows, columns = sys.argv[1], int(2_000_000 * float(sys.argv[2])), 16
rng = np.random.default_rng(0)
pl.DataFrame({f"c{i}": rng.random(rows) for i in range(columns)}).write_parquet(path, row_group_size=65536)
