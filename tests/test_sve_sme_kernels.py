"""The vector-length agnostic kernels of issue 12 on qemu-aarch64: the SVE SDOT GEMM really runs at the vector
length its entry names (its own workspace query, svcntw, says so), equals its behaviour model (built from
lowp.isa_models.sve) and the exact product at VL 128, 256 and 512 around its tile edges, and the SME SMOPA GEMM is
skipped, with the qemu issue named, on a qemu whose SMOPA is wrong (7.2), or checked on one whose SMOPA is right."""
from __future__ import annotations

import numpy as np
import pytest

from lowp.kernels import executor
from lowp.kernels.registry import kernel

SVE = ("sve_sdot_s8_vl128", "sve_sdot_s8_vl256", "sve_sdot_s8_vl512")


def runnable(name):
    ex = executor(kernel(name))
    reason = ex.unavailable()
    if reason:
        pytest.skip(f"{name}: {reason}")
    return ex


@pytest.mark.parametrize("name", SVE)
def test_sve_kernel_runs_at_its_vector_length(name):
    ex, bits = runnable(name), kernel(name).vector_bits
    nr = ex.machine.call("lowp_sve_sdot_s8_workspace", 4, 1, 4).ret // 4 - 4     # (Mp + Np) * Kp, M = K = 4, N = 1
    assert nr == bits // 32 == kernel(name).tile.nr


@pytest.mark.parametrize("name", SVE)
def test_sve_kernel_equals_its_model_and_the_exact_product(name):
    k, ex = kernel(name), runnable(name)
    rng = np.random.default_rng(k.vector_bits)
    nr = k.tile.nr
    for M, N, K in [(1, 1, 1), (4, nr, 4), (5, nr + 1, 5), (3, 2 * nr - 1, 33), (9, 3, 300)]:
        A = rng.integers(-128, 128, (M, K)).astype(np.int8)
        B = rng.integers(-128, 128, (K, N)).astype(np.int8)
        C = ex.run(A, B)
        assert np.array_equal(C, k.predict(A, B)), (M, N, K)
        assert np.array_equal(C, A.astype(np.int64) @ B.astype(np.int64)), (M, N, K)


def fixes_2083(version) -> bool:
    """qemu issue #2083 (32-bit SMOPA) is fixed in 9.0 and in the 8.2 stable series from 8.2.3."""
    return version >= (9,) or (8, 2, 3) <= version < (8, 3)


def test_sme_kernel_is_skipped_on_a_qemu_whose_smopa_is_wrong_or_else_checked():
    """The found qemu decides: its SMOPA probe fails exactly where its version lacks the fix (7.2: SKIPPED naming
    #2083 and the binary), and passes where it has it (10.0: the kernel runs and equals its model)."""
    k = kernel("sme_smopa_s8_svl512")
    ex = executor(k)
    reason = ex.unavailable()
    if reason is not None and "not installed" in reason:
        pytest.skip(reason)
    who = ex.target.identity()
    assert str(who) in ex.describe() and "sme-default-vector-length=64" in ex.describe()
    if who.version is not None:
        assert (reason is None) == fixes_2083(who.version), reason
    if reason is not None:
        assert "#2083" in reason and str(who) in reason
        return
    rng = np.random.default_rng(5)
    for M, N, K in [(1, 1, 1), (16, 16, 4), (17, 33, 9)]:
        A = rng.integers(-128, 128, (M, K)).astype(np.int8)
        B = rng.integers(-128, 128, (K, N)).astype(np.int8)
        C = ex.run(A, B, mnemonics=True)
        assert np.array_equal(C, k.predict(A, B)) and np.array_equal(C, A.astype(np.int64) @ B.astype(np.int64))
        assert ex.last.mnemonics.get("smopa", 0) > 0          # qemu's SMOPA carried it, counted
