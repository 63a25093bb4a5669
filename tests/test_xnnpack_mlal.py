"""NEON MLAL pair sums (issue 34, item 5): two s8 products share an int16 lane (SMULL, SMLAL) before SADALP widens
them. Which two k share it is the pair-index function of lowp.kernels.models.arm.mlal_pairs_gemm, its distance and
the rounding of kc before whole blocks are counted: XNNPACK's c2, c2s4, c4, c4s2, c8 and c16 MLAL templates all
pair k with k + 8, in whole 16-k blocks of kc rounded to 2, 8, 4, 8, 8, 16 (lowp.conformance.libraries.xnnpack
MLAL_PAIRS). The model is checked against the instructions' own models and plain integers; lowp's own 2x8c2 MLAL
kernel (tests/xnnpack/mlal.toml) runs on Unicorn and passes, and its one-bug versions (pairs k with k + 2; claims
weights of -128) are caught by the conformance suite."""
from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import registered, runner

from lowp.isa_models import arm
from lowp.kernels.models.arm import mlal_pairs_gemm, mlal_pairs_igemm, smlal_sadalp_gemm, smlal_sadalp_kc2_gemm

TOML = Path(__file__).resolve().parent / "xnnpack" / "mlal.toml"
GOOD, BUG_PAIRS, BUG_DOMAIN = ("xnn_qs8_qc8w_gemm_2x8c2_neonv8_mlal", "xnn_qs8_qc8w_gemm_2x8c2_neonv8_mlal_bug_pairs",
                               "xnn_qs8_qc8w_gemm_2x8c2_neonv8_mlal_bug_domain")
EDGES = np.array([-128, -127, -64, -1, 0, 1, 64, 127], np.int8)


def _wrap16(x):
    return (np.asarray(x, np.int64) + 2 ** 15) % 2 ** 16 - 2 ** 15


def _pairs_by_integers(A, B, d, k_round=None):
    """The pair sums as plain integers: kc = K rounded up to k_round (to 2d: every block whole); for k mod 2d < d in
    the whole 2d blocks of kc, wrap16(a[k] b[k] + a[k+d] b[k+d]) (a product past K is 0); the rest lone products;
    summed, wrapped to int32."""
    K = A.shape[1]
    r = k_round or 2 * d
    whole = -(-K // r) * r // (2 * d) * (2 * d)
    total = np.zeros((A.shape[0], B.shape[1]), np.int64)
    for k in range(K):
        product = np.outer(A[:, k].astype(np.int64), B[k].astype(np.int64))
        if k >= whole:
            total += product
        elif k % (2 * d) < d:
            if k + d < K:
                product += np.outer(A[:, k + d].astype(np.int64), B[k + d].astype(np.int64))
            total += _wrap16(product)
    return (total + 2 ** 31) % 2 ** 32 - 2 ** 31


def test_one_lane_is_smull_smlal_sadalp_for_every_a_pair():
    """Every (a_k, a_k+8) of int8 against the edge weights of k and k + 8: the model's 1x16 GEMM is lane 0 of
    SMULL, SMLAL (the isa_models, mod 2^16), SADALP from zero, exhaustively over A."""
    a0, a8 = (x.ravel().astype(np.int8) for x in np.meshgrid(np.arange(-128, 128), np.arange(-128, 128)))
    A = np.zeros((a0.size, 16), np.int8)
    A[:, 0], A[:, 8] = a0, a8
    for b0 in EDGES:
        for b8 in EDGES:
            B = np.zeros((16, 1), np.int8)
            B[0, 0], B[8, 0] = b0, b8
            lanes = arm.smlal(arm.smull(A[:, :8], np.broadcast_to(B[:8, 0], (a0.size, 8))),
                              A[:, 8:], np.broadcast_to(B[8:, 0], (a0.size, 8)))
            words = arm.sadalp(np.zeros((a0.size, 4), np.int32), lanes)
            assert np.array_equal(smlal_sadalp_gemm(A, B)[:, 0], words.astype(np.int64).sum(axis=1)), (b0, b8)
    both = (a0 == -128) & (a8 == -128)
    B = np.zeros((16, 1), np.int8)
    B[0, 0] = B[8, 0] = -128
    assert set(smlal_sadalp_gemm(A, B)[both, 0]) == {-32768}        # 2 x 16384 wraps, and only there


@pytest.mark.parametrize("d,k_round", [(1, None), (2, None), (3, None), (8, None), (16, None), (8, 2), (8, 4),
                                       (8, 8), (2, 1)])
def test_the_pair_index_function_is_the_models_parameters(d, k_round):
    """mlal_pairs_gemm at any distance and kc rounding is the plain-integer pairing (k, k + d) of each whole 2d
    block, remainders and lone products included, on edge values where the wraps are."""
    rng = np.random.default_rng(d)
    for K in (1, d, 2 * d - 1, 2 * d + 1, 13, 33, 70):
        A = rng.choice(EDGES[:3], (3, K)).astype(np.int8)
        B = rng.choice(EDGES[:2], (K, 5)).astype(np.int8)
        assert np.array_equal(mlal_pairs_gemm(A, B, distance=d, k_round=k_round),
                              _pairs_by_integers(A, B, d, k_round)), K


def test_a_c2_dup_kernel_pairs_only_whole_blocks():
    """kc = 10 (K = 9): no whole 16-k block for a kernel rounding kc to 2 (c2 dup), one for one rounding to 8 (c2s4,
    c8): the same -128s at k 0 and 8 wrap in the second only; K = 15 (kc 16) wraps in both."""
    for K, wraps_kc2 in ((9, False), (15, True)):
        A, B = np.zeros((1, K), np.int8), np.zeros((K, 1), np.int8)
        A[0, [0, 8]] = B[[0, 8], 0] = -128
        assert smlal_sadalp_gemm(A, B)[0, 0] == -32768
        assert smlal_sadalp_kc2_gemm(A, B)[0, 0] == (-32768 if wraps_kc2 else 32768)


def test_an_igemm_pairs_within_each_tap():
    """K = 48 as 3 taps of 16: the pair (k, k + 8) of tap 1 is k = 16 + l with 24 + l; one straddling tap 0 and 1
    (k = 12, 20) is two lone products."""
    A, B = np.zeros((1, 48), np.int8), np.zeros((48, 1), np.int8)
    A[0, [16, 24]] = B[[16, 24], 0] = -128
    assert mlal_pairs_igemm(A, B, distance=8)[0, 0] == -32768
    A, B = np.zeros((1, 48), np.int8), np.zeros((48, 1), np.int8)
    A[0, [12, 20]] = B[[12, 20], 0] = -128
    assert mlal_pairs_igemm(A, B, distance=8)[0, 0] == 32768


def test_pair_cases_tell_the_pairings_apart():
    """The int16_pair_index cases (conformance.search.cases PAIR_CLASSES at PAIR_KS): each distance 1, 2, 4, 8
    (every block whole), and distance 8 with kc rounded to 2, 4 and 8, wraps on a different set of them, so a kernel
    pairing other k than its model shows on one."""
    from lowp.conformance.search.cases import PAIR_KS, _pair_pattern
    from lowp.conformance.search.names import PAIR_CLASSES

    def wraps(d, k_round):
        return tuple(int(mlal_pairs_gemm(_pair_pattern(c, (-128, 127), (1, K), "A").astype(np.int8),
                                         _pair_pattern(c, (-128, 127), (K, 1), "B").astype(np.int8),
                                         distance=d, k_round=k_round)[0, 0])
                     for c in PAIR_CLASSES for K in PAIR_KS)
    pairings = [(1, None), (2, None), (4, None), (8, None), (8, 2), (8, 4), (8, 8)]
    seen = {p: wraps(*p) for p in pairings}
    assert seen[(8, None)] == seen[(8, 8)]          # rounding kc to 8 pairs as every block whole does
    assert len(set(seen.values())) == len(pairings) - 1, seen


# ---- lowp's own c2 MLAL kernel, on Unicorn ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ks():
    with registered(TOML) as kernels:
        yield kernels


def _wrap_inputs():
    """Row 0 wraps a (k, k + 8) lane (k = 0, 8), row 1 a (k, k + 2) lane (k = 16, 18); both columns read them."""
    A, B = np.zeros((2, 33), np.int8), np.full((33, 3), -128, np.int8)
    A[0, [0, 8]] = -128
    A[1, [16, 18]] = -128
    return A, B


def _quant(k, A, B):
    from lowp.conformance.search.quantized import draw_params
    q = draw_params(k, A, B, 3, "typical")
    q["scale"][:] = 2.0 ** -9          # +-32768 -> +-64: the wrap shows in C
    q["output_zero_point"], q["output_min"], q["output_max"] = 0, -128, 127
    q["bias"][:] = 0
    q.update({key: 0 for key in ("a_zero_point", "b_zero_point") if key in q})
    return q


@pytest.mark.emulated
def test_the_c2_kernel_is_its_model_and_the_bug_is_the_model_at_distance_2(ks):
    """On random operands over the whole int8 range and on the wrapping inputs: the right kernel is its model (the
    pairs k, k + 8 of whole blocks of kc rounded to 2) bit for bit; the one-bug kernel is not, and is the same model
    at distance 2."""
    good, bug = runner(ks[GOOD]), runner(ks[BUG_PAIRS])
    rng = np.random.default_rng(4)
    for K in (1, 9, 13, 16, 31, 48):
        A = rng.integers(-128, 128, (2, K)).astype(np.int8)
        B = rng.integers(-128, 128, (K, 11)).astype(np.int8)
        q = _quant(ks[GOOD], A, B)
        assert np.array_equal(good.run(A, B, quant=q, seed=1), ks[GOOD].predict(A, B, q)), K
    A, B = _wrap_inputs()
    q = _quant(ks[GOOD], A, B)
    C = good.run(A, B, quant=q, seed=1)
    assert np.array_equal(C, ks[GOOD].predict(A, B, q)) and list(C[:, 0]) == [-64, 64]
    from lowp.kernels.models.quant import ModelParts
    at_2 = replace(ks[BUG_PAIRS], model=ModelParts(partial(mlal_pairs_gemm, distance=2, k_round=2),
                                                   "xnnpack-fp32-neonv8", "s8"))
    C = bug.run(A, B, quant=q, seed=1)
    assert not np.array_equal(C, ks[BUG_PAIRS].predict(A, B, q)) and np.array_equal(C, at_2.predict(A, B, q))
    assert list(C[:, 0]) == [64, -64]


@pytest.mark.emulated
def test_the_conformance_suite_passes_the_c2_kernel_and_catches_both_bugs(ks):
    """The right kernel passes its claim (weights in [-127, 127]) and its model over the whole range; the pairing
    bug passes the claim (no pair wraps there) but fails the model on an int16_pair_index case; the kernel that
    claims -128 fails its own contract where two -128 * -128 products meet."""
    from lowp.conformance import ConformanceFailure, check
    for name in (GOOD, BUG_PAIRS, BUG_DOMAIN):
        runner(ks[name])
    for name in (GOOD, BUG_PAIRS):
        row = check(name, examples=5)
        assert row["verdict"] == "PASS" and row["executed"] == row["cases"]
    assert check(GOOD, "model", domain="full", examples=5)["verdict"] == "PASS"
    with pytest.raises(ConformanceFailure, match=r"shrunk from case \S+:model:full:int16_pair_index:"):
        check(BUG_PAIRS, "model", domain="full", examples=5)
    with pytest.raises(ConformanceFailure, match=r"bug_domain:xnnpack-fp32:claimed(.|\n)*the result matches "
                                                 r"accumulation int16-pair-wrap"):
        check(BUG_DOMAIN, examples=5)
