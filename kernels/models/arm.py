"""Behaviour models of the built-in AArch64 kernels, composed from lowp.isa_models.arm in each kernel's order.

As for the x86 models, a chain of wrapping additions (SADALP, SDOT and SMMLA accumulators, ADDV, SMLAL/UMLAL
lanes) is summed exactly and wrapped once, since addition modulo 2^n is associative.
"""
from __future__ import annotations

import numpy as np

from lowp.isa_models import arm, sme, sve
from lowp.isa_models.lanes import S16, S32, U16, exact_products, wrap

from lowp.kernels.models import CHUNK_BYTES, _pad, _round_up


def _blocks(x: np.ndarray, rows: int, k: int, kb: int) -> np.ndarray:
    """Rows of x (k-contiguous), zero-padded to rows x multiple of kb, as (rows, blocks, kb)."""
    kp = _round_up(k, kb)
    return _pad(x, rows, kp).reshape(rows, kp // kb, kb)


def mlal_pairs_gemm(A: np.ndarray, B: np.ndarray, *, distance: int, k_round: int | None = None) -> np.ndarray:
    """Two s8 products per int16 lane, the pair (k, k + distance): in each whole block of 2 * distance k values
    (counted from the first k), lane l = SMLAL(SMULL(a[l], b[l]), a[l + distance], b[l + distance]), wrapping mod
    2^16 (only when both products are -128 * -128 = 16384), then SADALP into int32 lanes; the k past the last whole
    block are lone SMULL products (exact); all summed and wrapped to int32 once.
    The pair-index function is the two parameters: `distance` (k -> k + distance for k mod 2 * distance < distance)
    and `k_round`, what the kernel rounds kc up to before it counts whole blocks (its packed k-block kr * sr; the
    packed weights past K are zero): None, a whole block, pairs every k (gemmlowp_s8.c, XNNPACK's c16); XNNPACK's
    NEON MLAL templates pair at distance 8 and round to 2 (c2 dup), 4 (c4 dup) or 8 (c2s4, c4s2, c8): a kc of 10
    (K 9 or 10) pairs nothing in a c2 dup kernel, k 0 with 8 in a c8 one (lowp.conformance.libraries.xnnpack
    MLAL_PAIRS)."""
    if distance < 1:
        raise ValueError(f"distance must be >= 1, got {distance}")
    M, K = A.shape
    N = B.shape[1]
    block = 2 * distance
    whole = _round_up(K, k_round or block) // block * block        # the k of whole blocks (zero past K)
    paired = min(whole, K)
    a, b = (_pair_halves(_blocks(x[:, :paired], rows, whole, block), distance)
            for x, rows in ((A, M), (np.ascontiguousarray(B.T), N)))      # (rows, blocks, registers, 2, 8)
    total = exact_products(A[:, paired:], B[paired:])   # lone SMULL products, SADALP: exact
    step = max(1, CHUNK_BYTES // max(1, M * N * a.shape[2] * 16 * 8))
    for g in range(0, a.shape[1], step):
        ar = a[:, None, g:g + step]
        br = b[None, :, g:g + step]
        shape = (M, N, ar.shape[2], a.shape[2], 8)
        p = arm.smull(np.broadcast_to(ar[..., 0, :], shape), np.broadcast_to(br[..., 0, :], shape))
        p = arm.smlal(p, np.broadcast_to(ar[..., 1, :], shape), np.broadcast_to(br[..., 1, :], shape))
        q = arm.sadalp(np.zeros(shape[:-1] + (4,), np.int32), p)
        total += q.sum(axis=(2, 3, 4), dtype=np.int64)
    return wrap(total, S32)


def _pair_halves(x: np.ndarray, distance: int) -> np.ndarray:
    """(rows, blocks, 2 * distance) k values as the SMULL and SMLAL operands of 8-lane registers: (rows, blocks,
    registers, 2, 8), [..., 0, l] = k l and [..., 1, l] = k l + distance, zero lanes past distance."""
    lanes = _round_up(distance, 8)
    halves = x.reshape(x.shape[:2] + (2, distance))
    halves = np.concatenate([halves, np.zeros(x.shape[:2] + (2, lanes - distance), x.dtype)], axis=3)
    return halves.reshape(x.shape[:2] + (2, lanes // 8, 8)).transpose(0, 1, 3, 2, 4)


def mlal_pairs_igemm(A: np.ndarray, B: np.ndarray, *, distance: int, k_round: int | None = None) -> np.ndarray:
    """An XNNPACK IGEMM of MLAL pairs: each tap's kc values are paired from the tap's own first k (the kernel walks
    each tap's pointer anew, rounding kc per tap), so the int16 pairs restart at every tap; K is split in the taps
    an IGEMM case uses unless it names its own (lowp.kernels.xnnpack.default_taps)."""
    from lowp.kernels.xnnpack import default_taps
    ks = default_taps(A.shape[1])
    kc = A.shape[1] // ks
    total = sum(mlal_pairs_gemm(A[:, p * kc:(p + 1) * kc], B[p * kc:(p + 1) * kc], distance=distance,
                                k_round=k_round).astype(np.int64) for p in range(ks))
    return wrap(total, S32)


# The named models of the kernels (a TOML entry names a model 'module:function'): pairs (k, k + 8), kc rounded to
# a whole 16-k block (gemmlowp_s8.c; XNNPACK's c8, c16, c2s4 and c4s2: rounding to 8 pairs the same k), to 2 (c2
# dup, LD1R, LD2R, LD4R) or to 4 (c4 dup, LD1R, LD2R).
def smlal_sadalp_gemm(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """gemmlowp_s8.c and XNNPACK's c8/c16/shuffled NEON MLAL GEMMs: the pairs (k, k + 8) of each 16-k block."""
    return mlal_pairs_gemm(A, B, distance=8)


def smlal_sadalp_igemm(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """XNNPACK's c8/c16/shuffled NEON MLAL IGEMMs: the pairs (k, k + 8) of each tap's 16-k blocks."""
    return mlal_pairs_igemm(A, B, distance=8)


def smlal_sadalp_kc2_gemm(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """XNNPACK's c2 dup NEON MLAL GEMMs: kc rounded to 2, pairs (k, k + 8) in whole 16-k blocks only."""
    return mlal_pairs_gemm(A, B, distance=8, k_round=2)


def smlal_sadalp_kc2_igemm(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """XNNPACK's c2 dup NEON MLAL IGEMMs: per tap, kc rounded to 2, pairs in whole 16-k blocks only."""
    return mlal_pairs_igemm(A, B, distance=8, k_round=2)


def smlal_sadalp_kc4_gemm(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """XNNPACK's c4 dup NEON MLAL GEMMs: kc rounded to 4, pairs (k, k + 8) in whole 16-k blocks only."""
    return mlal_pairs_gemm(A, B, distance=8, k_round=4)


def smlal_sadalp_kc4_igemm(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """XNNPACK's c4 dup NEON MLAL IGEMMs: per tap, kc rounded to 4, pairs in whole 16-k blocks only."""
    return mlal_pairs_igemm(A, B, distance=8, k_round=4)


def sdot_gemm(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """sdot_s8.c: SDOT of each 4-k group of an A row against 4 columns of a B panel, int32 accumulation."""
    M, K = A.shape
    N = B.shape[1]
    kp, np4 = _round_up(K, 4), _round_up(N, 4)
    a = _pad(A, M, kp).reshape(M, 1, kp // 4, 1, 4)
    b = _pad(B, kp, np4).reshape(kp // 4, 4, np4 // 4, 4).transpose(2, 0, 3, 1)     # [col block][group][col][k]
    total = np.zeros((M, np4 // 4, 4), np.int64)
    step = max(1, CHUNK_BYTES // max(1, M * np4 * 4 * 8))
    for g in range(0, kp // 4, step):
        ar = np.broadcast_to(a[:, :, g:g + step], (M, np4 // 4, min(step, kp // 4 - g), 4, 4))
        br = np.broadcast_to(b[None, :, g:g + step], ar.shape)
        shape = ar.shape[:3] + (16,)
        q = arm.sdot(np.zeros(shape[:-1] + (4,), np.int32), ar.reshape(shape), br.reshape(shape))
        total += q.sum(axis=2, dtype=np.int64)
    return wrap(total.reshape(M, np4)[:, :N], S32)


def smmla_gemm(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """smmla_s8.c: SMMLA of 2x8 blocks of A (row pairs) by 8x2 blocks of B (column pairs, stored transposed)."""
    M, K = A.shape
    N = B.shape[1]
    mp, np2, kp = _round_up(M, 2), _round_up(N, 2), _round_up(K, 8)
    a = _pad(A, mp, kp).reshape(mp // 2, 2, kp // 8, 8).transpose(0, 2, 1, 3).reshape(mp // 2, 1, kp // 8, 16)
    b = _pad(np.ascontiguousarray(B.T), np2, kp).reshape(np2 // 2, 2, kp // 8, 8).transpose(0, 2, 1, 3) \
        .reshape(1, np2 // 2, kp // 8, 16)
    shape = (mp // 2, np2 // 2, kp // 8, 16)
    q = arm.smmla(np.zeros(shape[:-1] + (4,), np.int32), np.broadcast_to(a, shape), np.broadcast_to(b, shape))
    blocks = q.sum(axis=2, dtype=np.int64).reshape(mp // 2, np2 // 2, 2, 2)      # [row pair][col pair][i][j]
    return wrap(blocks.transpose(0, 2, 1, 3).reshape(mp, np2)[:M, :N], S32)


def mlal_flush_gemm(A: np.ndarray, B: np.ndarray, *, flush: int) -> np.ndarray:
    """mlal_24x8.c: each int16 (s8: SMLAL) or uint16 (u8: UMLAL) lane accumulates its products for `flush` depth
    steps, wrapping mod 2^16, then is widened (SADDW/UADDW) into int32; the block sums are the lanes."""
    if flush < 2 or flush % 2:
        raise ValueError(f"flush must be an even depth >= 2, got {flush}")
    M, K = A.shape
    lane = S16 if A.dtype == np.int8 else U16
    total = np.zeros((M, B.shape[1]), np.int64)
    for k0 in range(0, K, flush):
        block = exact_products(A[:, k0:k0 + flush], B[k0:k0 + flush])
        total += wrap(block, lane).astype(np.int64)
    return wrap(total, S32)


def sve_sdot_gemm(A: np.ndarray, B: np.ndarray, *, vector_bits: int) -> np.ndarray:
    """sve_sdot_s8.c at one vector length: per panel of VL/32 columns and k-group of 4, SVE SDOT of the panel's
    vector (lane c: column c's 4 bytes) with A's row group broadcast to every lane, int32 accumulation."""
    M, K = A.shape
    N = B.shape[1]
    nr = vector_bits // 32
    kp, npad = _round_up(K, 4), _round_up(N, nr)
    a = _pad(A, M, kp).reshape(M, kp // 4, 4)
    b = _pad(B, kp, npad).reshape(kp // 4, 4, npad // nr, nr).transpose(2, 0, 3, 1)   # [panel][group][col][k]
    acc = np.zeros((M, npad // nr, nr), np.int32)
    for g in range(kp // 4):
        row = np.broadcast_to(a[:, None, None, g, :], (M, npad // nr, nr, 4)).reshape(M, npad // nr, nr * 4)
        panel = np.broadcast_to(b[None, :, g], (M, npad // nr, nr, 4)).reshape(M, npad // nr, nr * 4)
        acc = sve.sdot(acc, panel, row)
    return acc.reshape(M, npad)[:, :N]


def sme_smopa_gemm(A: np.ndarray, B: np.ndarray, *, vector_bits: int) -> np.ndarray:
    """sme_smopa_s8.c at one streaming vector length: per SVL/32 x SVL/32 tile, SMOPA of A's and B's packed
    k-groups (lane i: row / column i's 4 bytes) into ZA0.S from zero, all predicates true."""
    M, K = A.shape
    N = B.shape[1]
    t = vector_bits // 32
    kp, mp, npad = _round_up(K, 4), _round_up(M, t), _round_up(N, t)
    a = _pad(A, mp, kp).reshape(mp // t, t, kp // 4, 4).transpose(0, 2, 1, 3)        # [row tile][group][row][k]
    b = _pad(B, kp, npad).reshape(kp // 4, 4, npad // t, t).transpose(2, 0, 3, 1)    # [col tile][group][col][k]
    za = np.zeros((mp // t, npad // t, t, t), np.int32)
    every = np.ones((mp // t, npad // t, t * 4), bool)
    for g in range(kp // 4):
        zn = np.broadcast_to(a[:, None, g], (mp // t, npad // t, t, 4)).reshape(mp // t, npad // t, t * 4)
        zm = np.broadcast_to(b[None, :, g], (mp // t, npad // t, t, 4)).reshape(mp // t, npad // t, t * 4)
        za = sme.smopa(za, zn, zm, every, every)
    return za.transpose(0, 2, 1, 3).reshape(mp, npad)[:M, :N]


def sme2_sdot_gemm(A: np.ndarray, B: np.ndarray, *, vector_bits: int) -> np.ndarray:
    """sme2_sdot_s8.c at one streaming vector length (b = SVL/8 bytes): per row and block of 4 columns, SME2 SDOT
    (4-way, VGx4) of the row's b-deep k chunk (four times) with the 4 columns' chunks into ZA vectors slot + r *
    vstride (slot: the block within a ZA fill of vstride = b/4 blocks, ZA zeroed per fill), then each vector's
    lanes summed (SADDV) and wrapped to int32."""
    M, K = A.shape
    N = B.shape[1]
    b = vector_bits // 8
    vstride, kp, npad = b // 4, _round_up(K, b), _round_up(N, 4)
    a, bt = _pad(A, M, kp), _pad(np.ascontiguousarray(B.T), npad, kp)
    blocks = npad // 4
    C = np.zeros((M, npad), np.int64)
    for j0 in range(0, blocks, vstride):
        jn = min(vstride, blocks - j0)
        za = np.zeros((M, b, b // 4), np.int32)
        for k in range(0, kp, b):
            zn = np.repeat(a[:, None, k:k + b], 4, axis=1)                        # (M, 4, b): the row chunk
            for j in range(jn):
                cols = bt[(j0 + j) * 4:(j0 + j) * 4 + 4, k:k + b]
                za = sme.sdot_za(za, zn, np.broadcast_to(cols, zn.shape), j)
        for j in range(jn):
            group = za[:, j + vstride * np.arange(4), :].astype(np.int64)        # (M, 4, lanes): MOVA VGx4
            C[:, (j0 + j) * 4:(j0 + j) * 4 + 4] = group.sum(axis=-1)             # SADDV, 64-bit
    return wrap(C[:, :N], S32)
