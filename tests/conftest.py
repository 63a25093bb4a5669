import os
import textwrap

import numpy as np
import pytest
from hypothesis import strategies as st

from lowp.isa_models.proof import extremes

# The Pythons the tests start (`python -m lowp ...`, `python -c ...`) import the lowp under test, not the checkout's
# lowp/ folder that -m and -c would put first on sys.path from the repository's root: that folder lacks
# lowp.kernels and the rest (they install from the top-level folders), so against a non-editable install every
# such child would fail. PYTHONSAFEPATH is -P for the children (Python 3.11+).
os.environ.setdefault("PYTHONSAFEPATH", "1")


@pytest.fixture(scope="session")
def native():
    """The host CPU as an x86 executor; the whole module skips, with the reason, where it cannot be built."""
    from lowp.emulator.native import NativeUnavailable, NativeX86
    try:
        return NativeX86()
    except NativeUnavailable as e:
        pytest.skip(f"native x86 back end unavailable: {e}")


def lanes_of(dtype, n):
    """n lanes of dtype, with the type's extremes drawn often (hypothesis shrinks towards 0)."""
    info = np.iinfo(dtype)
    element = st.one_of(st.sampled_from(extremes(dtype)), st.integers(int(info.min), int(info.max)))
    return st.lists(element, min_size=n, max_size=n).map(lambda xs: np.array(xs, dtype=np.int64).astype(dtype))


def registers_for(intr, batch=st.integers(1, 4)):
    """Hypothesis strategy: a batch of arguments for `intr`, in its parameter order, as proof.Backend.run takes."""
    @st.composite
    def build(draw):
        n = draw(batch)
        args = []
        for p in intr.params:
            if p.kind == "vec":
                args.append(np.stack([draw(lanes_of(p.dtype, p.lanes)) for _ in range(n)]))
            elif p.kind == "mask":
                args.append(np.array([draw(st.integers(0, 2 ** p.bits - 1)) for _ in range(n)], dtype=np.uint64))
            else:
                args.append(draw(st.integers(p.lo, p.hi)))
        return args
    return build()


def runner(k):
    """The executor of kernel `k`, or a skip with the reason it cannot run here."""
    import pytest
    from lowp.kernels import executor
    ex = executor(k)
    reason = ex.unavailable()
    if reason:
        pytest.skip(f"{k.name}: {reason}")
    return ex


SCALAR_KERNEL_TOML = """
[[kernel]]
name = "{prefix}{what}"
target = "x86-64"
source = "{source}"
symbol = "{what}_gemm"
signature = "gemm"
a_type = "u8"
b_type = "s8"
packing = "none"
contract = "exact"
model = "lowp.kernels.models:exact_gemm"
tile = {{mr = 1, nr = 1, kr = 1}}
domain = {{a = [0, 255], b = [-128, 127]}}
"""


def scalar_kernels_toml(prefix: str, source: str, whats) -> str:
    """[[kernel]] tables for test kernels `<what>_gemm` in `source`: u8 x s8, 1x1x1 tile, claiming exact."""
    return "".join(SCALAR_KERNEL_TOML.format(prefix=prefix, source=source, what=w) for w in whats)


@pytest.fixture
def forget_kernels():
    """Unregister, after the test, every kernel it registered (load_toml, check() and the commands register)."""
    from lowp.kernels import kernels
    from lowp.kernels.registry import _KERNELS, _ORIGINS
    kernels()
    before = set(_KERNELS)
    yield
    for name in set(_KERNELS) - before:
        _KERNELS.pop(name)
        _ORIGINS.pop(name, None)


# Kernels that misbehave in the ways a run must survive (scalar_kernels_toml names them `<prefix><what>`):
# crasher faults inside the guard, aborter kills its process, hanger never returns, offbyone drops the last k.
MISBEHAVING_C = textwrap.dedent("""
    #include <stdint.h>
    #include <stddef.h>
    size_t crasher_workspace(int64_t M, int64_t N, int64_t K) { return 0; }
    size_t hanger_workspace(int64_t M, int64_t N, int64_t K) { return 0; }
    size_t offbyone_workspace(int64_t M, int64_t N, int64_t K) { return 0; }
    size_t aborter_workspace(int64_t M, int64_t N, int64_t K) { return 0; }
    void abort(void);
    void aborter_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *w) {
        if (K > 5) abort();    /* a death no guard can turn into a fault: the worker dies */
        for (int64_t i = 0; i < M * N; ++i) C[i] = 0;
    }
    void crasher_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *w) {
        if (K > 5) *(volatile int *)0 = 1;
        for (int64_t i = 0; i < M * N; ++i) C[i] = 0;
    }
    void hanger_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *w) {
        for (;;) __asm__ volatile("");
    }
    void offbyone_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *w) {
        for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
                int32_t s = 0;
                for (int64_t k = 0; k + 1 < K; ++k) s += A[i * K + k] * B[k * N + j];   /* drops the last k */
                C[i * N + j] = s;
            }
    }
""")
