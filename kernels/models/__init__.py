"""Behaviour models of the built-in kernels: what each kernel computes, bit for bit, for any input.

Each model builds the registers the kernel builds (the broadcast group of A, the packed panel of B), applies
the instruction models from lowp.isa_models in the kernel's order, and accumulates as the kernel does. Where a
chain of additions wraps modulo 2^32 (VPADDD, VPDPBUSD's accumulator), it is summed exactly and wrapped once:
addition modulo 2^32 is associative, so the order of the chain cannot matter. Saturating chains (VPADDSW) are
not associative and are stepped through in the kernel's order, over whole matrices at a time.
"""
from __future__ import annotations

import numpy as np

from lowp.isa_models import x86
from lowp.isa_models.lanes import S32, exact_products, wrap

CHUNK_BYTES = 1 << 26   # bound on the temporaries of one step of a model


def _pad(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    out = np.zeros((rows, cols), x.dtype)
    out[: x.shape[0], : x.shape[1]] = x
    return out


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def exact_gemm(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """sum_k A[i,k] * B[k,j] exactly, wrapped to int32 (what an exact kernel must return)."""
    return wrap(exact_products(A, B), S32)


def _dot4_step(kind: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One DOT of gemm_u8s8s32.h on registers of bytes: the four-product sums per 32-bit column lane."""
    if kind == "maddubs":   # VPMADDUBSW (pair-saturating) then VPMADDWD with ones (exact)
        pairs = x86.vpmaddubsw(a, b)
        return x86.vpmaddwd(pairs, np.ones(pairs.shape[-1], np.int16))
    if kind == "vpdpbusd":  # VPDPBUSD from a zero accumulator: the exact four-product sum
        return x86.vpdpbusd(np.zeros(a.shape[-1] // 4, np.int32), a, b)
    raise ValueError(f"unknown dot-product sequence {kind!r}")


def dot4_gemm(A: np.ndarray, B: np.ndarray, *, width: int, dot: str, signed_a: bool = False) -> np.ndarray:
    """gemm_u8s8s32.h: A's k-groups of 4 broadcast against B panels of width/32 columns, DOT per group,
    VPADDD across groups. signed_a: A is s8, shifted to u8 by XOR 0x80 and compensated by -128 * colsum(B)."""
    M, K = A.shape
    N = B.shape[1]
    vw = width // 8                       # bytes per register
    cpv = vw // 4                         # columns per register
    Kp, Np = _round_up(K, 4), _round_up(N, cpv)
    a = (A.view(np.uint8) ^ np.uint8(0x80)) if signed_a else A
    a = _pad(a, M, Kp).reshape(M, Kp // 4, 1, 1, 4)
    b = _pad(B, Kp, Np).reshape(Kp // 4, 4, Np // cpv, cpv).transpose(0, 2, 3, 1).reshape(Kp // 4, Np // cpv, vw)
    acc = np.zeros((M, Np // cpv, cpv), np.int64)
    step = max(1, CHUNK_BYTES // max(1, M * Np * 8))
    for g in range(0, Kp // 4, step):
        groups = min(step, Kp // 4 - g)
        a_reg = np.broadcast_to(a[:, g:g + step], (M, groups, Np // cpv, cpv, 4)).reshape(M, groups, Np // cpv, vw)
        acc += _dot4_step(dot, a_reg, np.broadcast_to(b[None, g:g + step], a_reg.shape)).sum(axis=1, dtype=np.int64)
    c = acc.reshape(M, Np)[:, :N]
    if signed_a:
        c = c - 128 * B.astype(np.int64).sum(axis=0)
    return wrap(c, S32)


def outlier_split(B: np.ndarray, nbits: int) -> tuple[np.ndarray, np.ndarray]:
    """FBGEMM/DNNLOWP's split W = W_main + W_outlier (seed 003): a weight is an outlier when it does not fit
    nbits signed bits (every weight when nbits = 0).
    docs/research/fbgemm-accumulation.md#outlier-aware-acc16-splitting-w."""
    if nbits <= 0:
        outlier = np.ones(B.shape, bool)
    else:
        outlier = (B.astype(np.int16) < -(1 << (nbits - 1))) | (B.astype(np.int16) >= (1 << (nbits - 1)))
    return np.where(outlier, 0, B).astype(B.dtype), np.where(outlier, B, 0).astype(B.dtype)


def acc16_gemm(A: np.ndarray, B: np.ndarray, *, width: int, brow: int = 256, nbits: int = 8) -> np.ndarray:
    """gemm_acc16.h, FBGEMM's acc16 path: per pair of k (k even, ascending) VPMADDUBSW against B panels of
    width/16 int16 columns, VPADDSW into int16 accumulators, and every `brow` k values VPMOVSXWD + VPADDD into
    int32 (FBGEMM's KCB = 256). Outliers (weights outside nbits signed bits) are added as an exact int32 pass."""
    main, outliers = outlier_split(B, nbits)
    M, K = A.shape
    N = B.shape[1]
    vw = width // 8
    cpv = vw // 2                         # int16 columns per register
    Kp, Np = _round_up(K, 2), _round_up(N, cpv)
    a = _pad(A, M, Kp).reshape(M, Kp // 2, 1, 2)
    b = _pad(main, Kp, Np).reshape(Kp // 2, 2, Np // cpv, cpv).transpose(0, 2, 3, 1).reshape(Kp // 2, Np // cpv, vw)
    half = cpv // 2                       # an int16 register spills into two int32 registers
    s32 = [np.zeros((M, Np // cpv, half), np.int32) for _ in range(2)]
    s16 = np.zeros((M, Np // cpv, cpv), np.int16)
    for p in range(Kp // 2):
        a_reg = np.broadcast_to(a[:, p][:, :, None, :], (M, Np // cpv, cpv, 2)).reshape(M, Np // cpv, vw)
        s16 = x86.vpaddsw(s16, x86.vpmaddubsw(a_reg, b[p]))
        if (2 * p + 2) % brow == 0 or p == Kp // 2 - 1:      # end of a k-block: spill and restart
            for h in range(2):
                s32[h] = x86.vpaddd(s32[h], x86.vpmovsxwd(np.ascontiguousarray(s16[..., h * half:(h + 1) * half])))
            s16 = np.zeros_like(s16)
    c = np.concatenate(s32, axis=-1).reshape(M, Np)[:, :N].astype(np.int64) + A.astype(np.int64) @ outliers.astype(np.int64)
    return wrap(c, S32)
