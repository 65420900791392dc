"""A map-only Daft pipeline (the native runner, no cluster) of UDFs whose
heap is an inflation factor times their input, as in Daft's own mock
workload (big_task_heap_usage). Each UDF requests memory_bytes = the limit
memrun runs the test under (MEMRUN_MEMORY_LIMIT), so that the report sets
what a task used against what it asked for.

  pipeline.py ROWS NAME=INFLATION [NAME=INFLATION ...]

Every UDF gets all ROWS int64 values (8 bytes each) in one batch and holds
INFLATION times their size while it works."""
import os
import sys

import daft
from daft import DataType

rows = int(sys.argv[1])
request = int(os.environ.get("MEMRUN_MEMORY_LIMIT", str(1 << 30)))


def udf_with(inflation):
    @daft.udf(return_dtype=DataType.int64(), memory_bytes=request, batch_size=rows)
    def inflate(column):
        values = column.to_pylist()
        heap = bytearray(int(len(values) * 8 * inflation))
        for i in range(0, len(heap), 4096):  # bytearray's pages are untouched zeros
            heap[i] = 1
        return [v + 1 for v in values]

    return inflate


df = daft.from_pydict({"x": list(range(rows))})
for stage in sys.argv[2:]:
    name, inflation = stage.split("=")
    df = df.with_column(name, udf_with(float(inflation))(df["x"]))
result = df.collect().to_pydict()
print({name: result[name][-1] for name in result})
