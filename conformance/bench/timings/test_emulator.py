"""pytest-benchmark: one Unicorn call of the registry's SDOT GEMM (sdot_s8_neon) in each hook mode: no hooks, the
executor's budget, lowp's exact count, per-mnemonic counts, lockstep (lowp.conformance.bench.emulator.HOOK_MODES).

    pytest --pyargs lowp.conformance.bench.timings.test_emulator          # or: pytest conformance/bench/timings/test_emulator.py
    lowp bench emulator --hooks                                # the side-by-side table with the slowdowns
"""
import numpy as np
import pytest

from lowp.conformance.bench.emulator import HOOK_MODES, hook_setup

pytest.importorskip("pytest_benchmark",
                    reason="pytest-benchmark is not installed (the bench extra: pip install 'lowp[bench]')")


@pytest.mark.parametrize("mode", list(HOOK_MODES))
def test_emulated_gemm(benchmark, mode):
    call, count, product = hook_setup(mode)
    call()                                  # translate once
    r = benchmark(call)
    benchmark.extra_info["instructions"] = count
    if benchmark.stats is not None:
        benchmark.extra_info["M instr/s"] = count / benchmark.stats.stats.median / 1e6
    assert np.array_equal(r.arrays[2], product)
