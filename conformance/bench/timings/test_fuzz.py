"""pytest-benchmark: `lowp fuzz` end to end on the native kernel beside the plain C harness, issue 36's figure
(lowp.conformance.bench.fuzz.end_to_end). Reported in extra_info, not asserted: a slow or loaded machine moves it.

    pytest --pyargs lowp.conformance.bench.timings.test_fuzz     # or: pytest conformance/bench/timings/test_fuzz.py
    lowp bench fuzz                                               # the table, with the per-case and batched paths
"""
import pytest

from lowp.conformance.bench.fuzz import end_to_end

pytest.importorskip("pytest_benchmark",
                    reason="pytest-benchmark is not installed (the bench extra: pip install 'lowp[bench]')")

FIGURES = ("end-to-end/s", "C harness/s", "end-to-end/C harness")


def test_lowp_fuzz_end_to_end(benchmark):
    row = benchmark.pedantic(end_to_end, kwargs={"seconds": 0.5}, rounds=1, iterations=1)
    if FIGURES[0] not in row:
        pytest.skip(row["note"])
    benchmark.extra_info.update({name: row[name] for name in FIGURES})
    assert row["end-to-end/s"] > 0 and row["C harness/s"] > 0, row
