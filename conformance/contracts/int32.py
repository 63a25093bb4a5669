"""The accumulation contracts a kernel's int32 result is judged against.

A contract is what a library promises about C = A x B before any output stage: a set of accepted results (the
exact product, or the documented saturating variant: the way the WebAssembly relaxed-SIMD tests list accepted
results), plus known variants that are not accepted but name what a failing kernel did instead. Each reference
is written here from the libraries' own descriptions (docs/research/), independently of the kernels'
behaviour models, so that a kernel, its model and its contract are three separate readings.

Exactness is promised on a domain: the kernel's registry entry says on which inputs it claims its contract.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from lowp.isa_models.lanes import exact_products, symbolic, wrap

I32 = np.int32


def _wrap32(x: np.ndarray) -> np.ndarray:
    """The low 32 bits of exact integers, as int32 (lanes.wrap; symbolic lanes, lowp prove's, spell the wrap out)."""
    if symbolic(x):
        return ((x.astype(np.int64) + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(I32)
    return wrap(x, I32)


def exact(A, B, a_offset: int = 0, b_offset: int = 0) -> np.ndarray:
    """sum_k (A[i,k] + a_offset) * (B[k,j] + b_offset), exact, wrapped to int32 as C's int32 accumulation wraps.
    gemmlowp adds offsets (lhs_offset, rhs_offset; doc/low-precision.md); ruy and TFLite subtract zero points:
    the same contract with a_offset = -zero_point (see exact_zero_points)."""
    if a_offset or b_offset:
        return _wrap32(exact_products(A.astype(np.int64) + a_offset, B.astype(np.int64) + b_offset))
    return _wrap32(exact_products(A, B))       # the operands' own types bound the products


def exact_zero_points(A, B, a_zero_point: int = 0, b_zero_point: int = 0) -> np.ndarray:
    """ruy/TFLite's spelling: sum_k (A - a_zero_point)(B - b_zero_point), expanded the way ruy's kernels apply it
    (raw product, minus zero point times the other operand's sums, plus K * both zero points), int32 wrapping."""
    A64, B64 = A.astype(np.int64), B.astype(np.int64)
    K = A.shape[1]
    raw = exact_products(A, B) - a_zero_point * B64.sum(axis=0)[None, :] - b_zero_point * A64.sum(axis=1)[:, None]
    return _wrap32(raw + K * a_zero_point * b_zero_point)


def _pair_sums(A, B):
    """(i, j, p): A[i,2p]*B[2p,j] + A[i,2p+1]*B[2p+1,j], K padded with a zero to even."""
    K = A.shape[1]
    if K % 2:
        A = np.concatenate([A, np.zeros((A.shape[0], 1), A.dtype)], axis=1)
        B = np.concatenate([B, np.zeros((1, B.shape[1]), B.dtype)], axis=0)
    a = A.astype(np.int32).reshape(A.shape[0], -1, 2)
    b = B.astype(np.int32).reshape(-1, 2, B.shape[1])
    return np.einsum("ip,pj->ijp", a[:, :, 0], b[:, 0, :]) + np.einsum("ip,pj->ijp", a[:, :, 1], b[:, 1, :])


def pair_saturating(A, B) -> np.ndarray:
    """oneDNN/FBGEMM AVX2 u8s8s32 (VPMADDUBSW + VPMADDWD + VPADDD): each pair (k, k+1), k even, summed and
    saturated to int16, then accumulated exactly in int32 (wrapping). Seed 002 section 1.1; FBGEMM
    docs/research/fbgemm-accumulation.md#reference-versus-kernel."""
    p = _pair_sums(A, B)
    return _wrap32(np.clip(p, -32768, 32767).sum(axis=2, dtype=np.int64))


def pair_saturating_k_blocks(A, B, block_starts) -> np.ndarray:
    """VPMADDUBSW pair saturation when a GEMM driver splits K into blocks and packs each block on its own: the
    pairs start at each block's first k (so a block starting at an odd k pairs (odd, even) indices), an odd block
    is zero-padded, and the block sums are added exactly in int32. block_starts: the first k of every block,
    beginning with 0. pair_saturating(A, B) is the one-block case. Added for oneDNN's x64 igemm (see
    onednn_igemm_k_blocks); docs/findings.md section 4."""
    K = A.shape[1]
    starts = [int(s) for s in block_starts]
    if not starts or starts[0] != 0 or any(b <= a for a, b in zip(starts, starts[1:])) or starts[-1] >= max(K, 1):
        raise ValueError(f"block_starts {starts}: expected increasing first indices, starting at 0, below K={K}")
    total = np.zeros((A.shape[0], B.shape[1]), np.int64)
    for s, e in zip(starts, starts[1:] + [K]):
        total += pair_saturating(A[:, s:e], B[s:e]).astype(np.int64)
    return _wrap32(total)


def onednn_igemm_k_blocks(K: int, *, bk: int = 384, bk_traditional: int = 256, uk: int = 1) -> list[int]:
    """The K blocks of oneDNN's x64 int8 GEMM driver (src/cpu/x64/gemm/gemm_driver.cpp get_k_padd, one thread):
    K <= bk_traditional: one block; K < 2*bk: two blocks of rnd_up((K + 1) / 2, uk); else blocks of bk.
    AVX2 s8 GEMM: bk 384, bk_traditional 256, uk 1 (gemm_info.cpp; AVX-512 without VNNI: 768 and 384), so
    256 < K < 768 splits at (K + 1) // 2, which is odd for K = 257, 258, 261, 262, ... @3f27bec."""
    if K <= bk_traditional:
        return [0]
    blk = -(-((K + 1) // 2) // uk) * uk if K < 2 * bk else bk
    return list(range(0, K, blk))


def _zero_point_per_column(b_zero_point, n: int) -> np.ndarray:
    z = np.asarray(b_zero_point, np.int64)
    return np.broadcast_to(z.reshape(-1) if z.ndim else z, (n,))[None, :]


def pair_saturating_folded_zero_points(A, B, a_zero_point=0, b_zero_point=0) -> np.ndarray:
    """sum_k (A - a_zp)(B - b_zp) as ONNX Runtime's MLAS computes it with a u8 x s8 VPMADDUBSW kernel: the pairs of
    the RAW operands saturated (pair_saturating), the zero points folded in afterwards by sums, int32 wrapping:
    raw - b_zp[n] * rowsum(A) - a_zp * colsum(B) + K * a_zp * b_zp[n] (b_zp scalar or per column). MLAS qgemm.h
    MlasGemmQuantOperation (RowSumBuffer, ColumnSumBuffer, ZeroPointB); docs/research/onnx-mlas.md#mlas-qgemm."""
    A64, B64 = A.astype(np.int64), B.astype(np.int64)
    zb, za = _zero_point_per_column(b_zero_point, B.shape[1]), int(a_zero_point)
    raw = pair_saturating(A, B).astype(np.int64)
    return _wrap32(raw - zb * A64.sum(axis=1)[:, None] - za * B64.sum(axis=0)[None, :] + A.shape[1] * za * zb)


def pair_saturating_shifted_zero_points(A, B, a_zero_point=0, b_zero_point=0) -> np.ndarray:
    """The other order: the pairs of the zero-point-SHIFTED operands (A - a_zp)(B - b_zp), each pair sum saturated
    to int16. No library lowp knows computes this (MLAS and FBGEMM fold the zero points in by sums); it is named so
    that a report shows whether the data can tell the two orders apart."""
    a = A.astype(np.int64) - int(a_zero_point)
    b = B.astype(np.int64) - _zero_point_per_column(b_zero_point, B.shape[1])
    return _wrap32(np.clip(_pair_sums(a, b), -32768, 32767).sum(axis=2, dtype=np.int64))


def shifted_pair_saturating(A, B) -> np.ndarray:
    """oneDNN s8s8s32 on the u8s8 AVX2 path: A + 128 as u8, pair-saturating product, minus 128 * colsum(B)
    (seed 002 section 2: 255 instead of 32258)."""
    shifted = pair_saturating(A.astype(np.int16) + 128, B).astype(np.int64)
    return _wrap32(shifted - 128 * B.astype(np.int64).sum(axis=0))


def fbgemm_acc16(A, B, brow: int = 256) -> np.ndarray:
    """FBGEMM matmul_u8i8acc16_ref: s16 = clip16(s16 + clip16(pair)) over pairs in ascending k; every brow k
    values the int16 sum is added to int32 and restarted (src/RefImplementations.cc L314-345,
    docs/research/fbgemm-accumulation.md#acc16). Each block's saturating sum in log2 steps (saturating_sum): the
    loop over the pairs, one clip each, cost the diagnosis of a failing requantizing case some 10 ms."""
    p = np.clip(_pair_sums(A, B), -32768, 32767)
    if not isinstance(p, np.ndarray):     # symbolic lanes (lowp prove): FBGEMM's loop as written, a clip a pair
        s32 = np.zeros(p.shape[:2], np.int64)
        s16 = np.zeros(p.shape[:2], np.int64)
        for q in range(p.shape[2]):
            s16 = np.clip(s16 + p[:, :, q], -32768, 32767)
            if 2 * q % brow == brow - 2:
                s32 += s16
                s16[:] = 0
        return _wrap32(s32 + s16)
    restarts = [q + 1 for q in range(p.shape[2]) if 2 * q % brow == brow - 2]     # after the pairs that flush
    total = np.zeros(p.shape[:2], np.int64)
    for block in np.split(p, restarts, axis=2):
        total += saturating_sum(block)
    return _wrap32(total)


_BIG = 1 << 60
SHORT_SUM = 12      # terms up to which saturating_sum adds in place (measured: composing costs more below)


def saturating_sum(terms: np.ndarray) -> np.ndarray:
    """(..., L) -> (...): the running int16 sum of the terms from 0, saturating at every add (s = clip16(s + t)), in
    log2(L) numpy steps: each add is the map x -> min(max(x + a, lo), hi), and such maps compose into one
    (a = a1 + a2, lo = clip(lo1 + a2, lo2, hi2), hi = clip(hi1 + a2, lo2, hi2)), so pairs of neighbours are
    composed until one map per row is left, then applied to 0. A short sum is added in place, term by term:
    composing costs more there."""
    a = np.asarray(terms, np.int64)
    if a.shape[-1] <= SHORT_SUM:
        s = np.zeros(a.shape[:-1], np.int64)
        for i in range(a.shape[-1]):
            np.add(s, a[..., i], out=s)
            np.minimum(s, 32767, out=s)
            np.maximum(s, -32768, out=s)
        return s
    lo, hi = np.full_like(a, -32768), np.full_like(a, 32767)
    while a.shape[-1] > 1:
        if a.shape[-1] % 2:           # pad with the identity map
            none = np.zeros(a.shape[:-1] + (1,), np.int64)
            a, lo, hi = (np.concatenate([x, none + end], axis=-1) for x, end in ((a, 0), (lo, -_BIG), (hi, _BIG)))
        a2, lo2, hi2 = a[..., 1::2], lo[..., 1::2], hi[..., 1::2]
        a, lo, hi = a[..., 0::2] + a2, np.clip(lo[..., 0::2] + a2, lo2, hi2), np.clip(hi[..., 0::2] + a2, lo2, hi2)
    return np.clip(a[..., 0], lo[..., 0], hi[..., 0])


def int16_lanes_wrapping(flush: int, signed: bool = True):
    """Products accumulated in 16-bit lanes for `flush` depth steps (wrapping, as NEON SMLAL/UMLAL), then
    widened into int32: seed 004's 24x8 kernel (flush 258) and the 4-bit kernel."""
    def reference(A, B):
        total = np.zeros((A.shape[0], B.shape[1]), np.int64)
        for k0 in range(0, A.shape[1], flush):
            block = exact_products(A[:, k0:k0 + flush], B[k0:k0 + flush])
            low = block % 65536
            total += np.where(low >= 32768, low - 65536, low) if signed else low
        return _wrap32(total)
    reference.__name__ = f"int16_lanes_flush{flush}"
    return reference


def gemmlowp_lhs_nonzero_wrap(A, B) -> np.ndarray:
    """gemmlowp's NEON int8 kernels sum two s8 products in an int16 lane (SMULL + SMLAL); the only overflow is
    (-128)*(-128) twice, 32768, which wraps to -32768. Which two k share a lane is a kernel detail; this variant
    pairs k with k+8 in blocks of 16 as lowp's gemmlowp-style kernel does."""
    K = A.shape[1]
    kp = -(-K // 16) * 16
    a = np.zeros((A.shape[0], kp), np.int64)
    a[:, :K] = A
    b = np.zeros((kp, B.shape[1]), np.int64)
    b[:K] = B
    a, b = a.reshape(A.shape[0], -1, 2, 8), b.reshape(-1, 2, 8, B.shape[1])
    lanes = np.einsum("ibl,blj->ijbl", a[:, :, 0], b[:, 0]) + np.einsum("ibl,blj->ijbl", a[:, :, 1], b[:, 1])
    lanes = np.where(lanes == 32768, -32768, lanes)
    return _wrap32(lanes.sum(axis=(2, 3)))


@dataclass(frozen=True)
class Variant:
    name: str
    compute: Callable
    description: str


@dataclass(frozen=True)
class Contract:
    name: str
    description: str
    accepted: tuple[Variant, ...]
    known: tuple[Variant, ...] = field(default_factory=tuple)

    def reference(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """The contract's first accepted result: what a failing C is compared with."""
        return self.accepted[0].compute(A, B)

    def judge(self, C: np.ndarray, A: np.ndarray, B: np.ndarray) -> "Judgement":
        """PASS when C equals an accepted variant; either way, name the variant C matches, if any."""
        expected = self.accepted[0].compute(A, B)
        for v in self.accepted + self.known:
            result = expected if v is self.accepted[0] else v.compute(A, B)
            if np.array_equal(C, result):
                return Judgement(v in self.accepted, v.name, expected)
        return Judgement(False, None, expected)


@dataclass
class Judgement:
    ok: bool
    matched: str | None         # the variant the result equals (accepted or known), or None
    expected: np.ndarray        # the contract's first accepted result


EXACT = Variant("exact", exact, "the exact integer product, int32 wrap-around")
PAIR_SAT = Variant("pair-saturating", pair_saturating,
                   "u8*s8 pair sums (k, k+1), k even, saturated to int16 (VPMADDUBSW: AVX2/AVX-512 without VNNI)")
SHIFTED_PAIR_SAT = Variant("shifted-pair-saturating", shifted_pair_saturating,
                           "s8s8 as (A+128) u8 x s8 with pair saturation, minus 128*colsum(B) (oneDNN on AVX2)")
ACC16 = Variant("fbgemm-acc16", fbgemm_acc16, "FBGEMM acc16: saturating int16 accumulation, flushed every 256 k")
LHS_WRAP = Variant("int16-pair-wrap", gemmlowp_lhs_nonzero_wrap,
                   "two s8 products per int16 lane (k, k+8), 2 x (-128)^2 wraps to -32768")
Q46_LANES = Variant("int16-lanes-flush258", int16_lanes_wrapping(258), "s16 lanes wrapping, flushed every 258 k")
U4_LANES = Variant("uint16-lanes-flush144", int16_lanes_wrapping(144, signed=False),
                   "u16 lanes wrapping, flushed every 144 k")

CONTRACTS: dict[str, Contract] = {c.name: c for c in [
    Contract("exact", "exact int32 GEMM: C = sum_k A*B, int32 wrap-around; the contract of FBGEMM acc32, oneDNN "
             "on VNNI, ruy and gemmlowp on their promised domains", (EXACT,),
             (PAIR_SAT, SHIFTED_PAIR_SAT, ACC16, LHS_WRAP, Q46_LANES, U4_LANES)),
    Contract("onednn-u8s8s32", "oneDNN u8s8s32: exact with VNNI; with AVX2/AVX-512 each u8*s8 pair sum may "
             "saturate to int16 (seed 002): both results are accepted", (EXACT, PAIR_SAT), (ACC16,)),
    Contract("fbgemm-acc16", "FBGEMM acc16 (matmul_u8i8acc16_ref, brow 256) on AVX2/AVX-512; exact where "
             "FBGEMM redirects acc16 to int32 on VNNI", (ACC16, EXACT), (PAIR_SAT,)),
]}


def contract(name: str) -> Contract:
    try:
        return CONTRACTS[name]
    except KeyError:
        raise KeyError(f"no contract named {name!r}; known: {', '.join(CONTRACTS)}") from None
