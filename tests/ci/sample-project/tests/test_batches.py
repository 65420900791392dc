# The pytest recipe's own case (docs/ci/github-pytest.yml): a batch parsed
# under a limit, its block's peak gated on a pull request.
import pytest

BATCH = 16  # MiB


@pytest.mark.memrun(memory="96MiB")
def test_parse_a_batch(memrun_peak):
    with memrun_peak(name="parse"):
        rows = [bytearray(1 << 20) for _ in range(BATCH)]
    assert len(rows) == BATCH
