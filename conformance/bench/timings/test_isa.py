"""pytest-benchmark: model and native throughput on one batch (run: `pytest --pyargs lowp.conformance.bench.timings.test_isa`,
or `pytest conformance/bench/timings/test_isa.py` in a checkout). `lowp bench isa` is the side-by-side table."""
import numpy as np
import pytest

from lowp.isa_models import intrinsic
from lowp.isa_models.verify.proof import random_batch

pytest.importorskip("pytest_benchmark",
                    reason="pytest-benchmark is not installed (the bench extra: pip install 'lowp[bench]')")

NAMES = ["_mm512_maddubs_epi16", "_mm256_maddubs_epi16", "_mm512_dpbusd_epi32", "_mm512_madd_epi16"]


@pytest.fixture(scope="module")
def native():
    from lowp.emulator.x86.native import NativeUnavailable, NativeX86
    try:
        return NativeX86()
    except NativeUnavailable as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("name", NAMES)
def test_model(benchmark, name):
    intr = intrinsic(name)
    args = random_batch(intr, 1 << 14, np.random.default_rng(0))
    benchmark.extra_info["lanes"] = (1 << 14) * intr.result.lanes
    benchmark(intr, *args)


@pytest.mark.parametrize("name", NAMES)
def test_native(benchmark, native, name):
    intr = intrinsic(name)
    if native.unavailable(intr):
        pytest.skip(native.unavailable(intr))
    args = random_batch(intr, 1 << 14, np.random.default_rng(0))
    benchmark.extra_info["lanes"] = (1 << 14) * intr.result.lanes
    benchmark(native.run, intr, args)
