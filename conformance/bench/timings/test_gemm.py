"""pytest-benchmark: seed 004's GEMM grid corners and 512^3, one test per contender and shape (run:
`pytest --pyargs lowp.conformance.bench.timings.test_gemm`, or `pytest conformance/bench/timings/test_gemm.py` in a checkout). `lowp bench
gemm` is the side-by-side table with ratios."""
import numpy as np
import pytest

from lowp.conformance.bench.gemm import BIG, contenders, single_thread_blas

pytest.importorskip("pytest_benchmark",
                    reason="pytest-benchmark is not installed (the bench extra: pip install 'lowp[bench]')")

SHAPES = [(72, 24, 128), (360, 96, 512), BIG]          # (H, W, D): C = A(H x D) x B(D x W)
CONTENDERS = {c.name: c for c in contenders()}
NAMES = [n for n, c in CONTENDERS.items() if c.group in ("float", "4.6-bit", "fbgemm") or n.startswith("q8_")
         or n in ("u8s8s32_avx2", "u8s8s32_avx512vnni")]


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    single_thread_blas()


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", NAMES)
def test_gemm(benchmark, name, shape):
    c = CONTENDERS[name]
    if c.setup is None:
        pytest.skip(f"{name}: {c.skipped}")
    call = c.setup(*shape, np.random.default_rng(0))
    H, W, D = shape
    benchmark.extra_info.update(group=c.group, macs=H * W * D)
    benchmark(call)
    if benchmark.stats is not None:
        benchmark.extra_info["ns_per_mac"] = benchmark.stats.stats.median / (H * W * D) * 1e9
