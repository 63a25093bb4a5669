"""The 4.6-bit scheme of seed 004: its (Nx, Nw) pairs, the int16-safe flush interval of the kernels, and the
behaviour models of kernels/x86/gemm_q46.h (the 4.6-bit kernels and their like-for-like exact 8-bit baselines).

The scheme (seed 004): activations x in [-xmax, xmax] (Nx = 2 xmax + 1 levels), weights w in [-wmax, wmax]
(Nw = 2 wmax + 1), chosen so that every product fits int8: P = xmax * wmax <= 127. PMADDUBSW needs an unsigned
first operand, so the kernel feeds u = x + xmax = x - A_m (A_m = -floor(Nx / 2)) in [0, 2 xmax] and adds
-xmax * colsum(B) (the article's formula with Z_A = 0). The shift doubles the product bound: |u * w| <= 2P.

Safe depth, derived (docs/q46-kernels.md): an int16 lane of the kernel holds one pair sum u[k] w[k] + u[k+1]
w[k+1] per step (VPMADDUBSW), one step per KG values of k (KG = 4 at 256 bits, 8 at 512). After n steps its
|value| <= n * 2 * 2P, so it cannot leave [-32768, 32767] iff n <= floor(32767 / 4P): for P = 127 that is 64
steps, flush = 256 k at 256 bits and 512 k at 512 bits. (Without the shift the bound would be floor(32767 / P)
= 258 products per lane, the article's 258.) The pair sum itself is at most 4P = 508 and never saturates.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from lowp.isa_models import x86
from lowp.isa_models.lanes import S16, S32, U8, wrap

from lowp.kernels.models import _pad, _round_up
from lowp.kernels.registry import Domain, Kernel

INT16_MAX = 32767
CHUNK_ELEMENTS = 1 << 22          # bound on the lanes of one batch of registers in a model step

# seed 004: "(255, 3), (127, 5), (85, 7), (63, 9), (51, 11), (43, 13), (37, 15), (31, 17), (29, 19), (25, 21),
# (23, 23) and the symmetric ones" = 21 pairs. The authors' training code
# (docs/research/q46-bins.md#the-grid-from-the-training-code) runs the 19 with Nw in 5..127
# (in_bins = (127 // (Nw // 2)) * 2 + 1) plus the 16x16 and 256x256 baselines.
_ARTICLE_HALF = ((255, 3), (127, 5), (85, 7), (63, 9), (51, 11), (43, 13), (37, 15), (31, 17), (29, 19),
                 (25, 21), (23, 23))
BASELINES = ((16, 16), (256, 256))


def code_pairs() -> list[tuple[int, int]]:
    """The 19 (Nx, Nw) of the training code, in its order (Nw = 5, 7, ..., 127)."""
    nws = (5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 29, 31, 37, 43, 51, 63, 85, 127)
    return [((127 // (nw // 2)) * 2 + 1, nw) for nw in nws]


def article_pairs() -> list[tuple[int, int]]:
    """The 21 symmetric pairs of seed 004 (the 19 of the code plus (255, 3) and (3, 255)), Nx descending."""
    half = list(_ARTICLE_HALF)
    return half + [(nw, nx) for nx, nw in reversed(half) if nx != nw]


def safe_steps(nx: int, nw: int) -> int:
    """VPMADDUBSW steps an int16 lane can absorb with shifted activations: floor(32767 / (4 xmax wmax))."""
    p = (nx // 2) * (nw // 2)
    return INT16_MAX // (4 * p) if p else 1 << 62


def safe_flush(nx: int, nw: int, kg: int) -> int:
    """The largest flush interval (k values between int16 -> int32 widenings) that cannot overflow int16 on the
    pair's domain, for a kernel taking kg values of k per step."""
    return kg * safe_steps(nx, nw)


def pair_table(include_baselines: bool = True) -> list[dict]:
    """One row per (Nx, Nw): the 21 pairs of seed 004 (marked whether the training code also uses them) and the
    two asymmetric baselines. Columns:
      bits            (log2 Nx + log2 Nw) / 2, the article's average bits per value
      max_product     max |x w| on the pair's symmetric ranges (baselines: unsigned 0..N-1 ranges)
      int16_depth     floor(32767 / max_product): products an int16 accumulator absorbs (the article's 258 for 127)
      shifted_product max |(x + xmax) w|, the bound the kernel's VPMADDUBSW operands really have (2 max_product)
      shifted_depth   floor(32767 / shifted_product): products per int16 lane with the A_m shift
      flush_256, flush_512  the kernels' largest safe flush interval in k (KG = 4 and 8)
    """
    code = set(code_pairs())
    rows = []
    for nx, nw in article_pairs():
        p = (nx // 2) * (nw // 2)
        rows.append(dict(nx=nx, nw=nw, source="code+article" if (nx, nw) in code else "article",
                         bits=round((math.log2(nx) + math.log2(nw)) / 2, 3), max_product=p,
                         int16_depth=INT16_MAX // p, shifted_product=2 * p, shifted_depth=INT16_MAX // (2 * p),
                         flush_256=safe_flush(nx, nw, 4), flush_512=safe_flush(nx, nw, 8)))
    if include_baselines:
        for nx, nw in BASELINES:
            p = (nx - 1) * (nw - 1)
            rows.append(dict(nx=nx, nw=nw, source="baseline (code)", bits=round((math.log2(nx) + math.log2(nw)) / 2, 3),
                             max_product=p, int16_depth=INT16_MAX // p, shifted_product=None, shifted_depth=None,
                             flush_256=None, flush_512=None))
    return rows


def pair_domain(nx: int, nw: int) -> Domain:
    check_pair(nx, nw)
    return Domain((-(nx // 2), nx // 2), (-(nw // 2), nw // 2))


def check_pair(nx: int, nw: int) -> None:
    if nx % 2 == 0 or nw % 2 == 0 or nx < 1 or nw < 1:
        raise ValueError(f"(Nx, Nw) = ({nx}, {nw}): the 4.6-bit scheme is symmetric; both must be odd and positive")
    if (nx // 2) * (nw // 2) > 127 or nx > 255 or nw > 255:
        raise ValueError(f"(Nx, Nw) = ({nx}, {nw}): max |x w| = {(nx // 2) * (nw // 2)} does not fit int8 "
                         "(the scheme needs ((Nx-1)/2) * ((Nw-1)/2) <= 127 and both ranges within s8)")


def for_pair(kernel: Kernel, nx: int, nw: int, flush: int | None = None) -> Kernel:
    """The 4.6-bit kernel set up for one (Nx, Nw): shift = xmax, the pair's domain, and a flush interval that is
    validated against the int16-safe bound (default: the largest safe one). Raises ValueError if it is unsafe."""
    check_pair(nx, nw)
    kg = kernel.tile.kr
    limit = safe_flush(nx, nw, kg)
    flush = min(limit, 1 << 30) if flush is None else int(flush)
    if flush < kg or flush % kg:
        raise ValueError(f"{kernel.name}: flush = {flush} must be a positive multiple of {kg} (k per step)")
    if flush > limit:
        raise ValueError(f"{kernel.name}: flush = {flush} can overflow int16 for (Nx, Nw) = ({nx}, {nw}): at most "
                         f"{limit} k (floor(32767 / (4 * {nx // 2} * {nw // 2})) = {limit // kg} steps of {kg})")
    return dataclasses.replace(kernel, name=f"{kernel.name}@{nx}x{nw}", params={"shift": nx // 2, "flush": flush},
                               domain=pair_domain(nx, nw), tile=dataclasses.replace(kernel.tile, spill=flush))


# ------------------------------------------------------------------------------------------------------------
# Behaviour models: the registers of gemm_q46.h, through the instruction models, in the kernel's order.

PAIR_CONTROL = np.array([0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15], np.uint8)


def _sign_extend(x: np.ndarray) -> np.ndarray:
    """VPMOVSXBW over any number of bytes (whole 128-bit sources; the caller pads)."""
    shape = x.shape
    return x86.vpmovsxbw(np.ascontiguousarray(x).view(np.int8).reshape(-1, 16)).reshape(shape)


def pack_b(B: np.ndarray, kg: int, es: int) -> np.ndarray:
    """B' of gemm_q46.h: [step][panel][8 columns x kg values], as the kernel builds it: PSHUFB pairs rows k, k+1
    (a register holding row k's 8 columns then row k+1's), 16-bit interleaves make quads, 32-bit ones octets,
    and VPMOVSXBW widens to int16 when es == 2. Returns (steps, panels, 8 * kg) of u8 (es 1) or int16 (es 2)."""
    K, N = B.shape
    Kp, Np = _round_up(K, kg), _round_up(N, 8)
    w = _pad(B, Kp, Np).view(np.uint8)
    regs = w.reshape(Kp // 2, 2, Np // 8, 8).transpose(0, 2, 1, 3).reshape(Kp // 2, Np // 8, 16)
    pairs = x86.vpshufb(regs, PAIR_CONTROL)                       # column c: (b[k][c], b[k+1][c]) at 2c, 2c+1
    if kg == 2:
        packed = pairs
    else:
        words = pairs.view(np.uint16)                                # (Kp/2, P, 8): one word per column
        quads = np.stack([words[0::2], words[1::2]], axis=-1)        # VPUNPCKL/HWD: (Kp/4, P, 8, 2 words)
        packed = quads.view(np.uint8).reshape(Kp // 4, Np // 8, 8, 4)
        if kg == 8:                                                  # VPUNPCKL/HDQ: column c = quad k, quad k+4
            packed = packed.reshape(Kp // 8, 2, Np // 8, 8, 4).transpose(0, 2, 3, 1, 4)
        packed = np.ascontiguousarray(packed).reshape(Kp // kg, Np // 8, 8 * kg)
    return _sign_extend(packed) if es == 2 else packed


def _step_sums(a: np.ndarray, panels: np.ndarray, kg: int, s0: int, s1: int, step) -> np.ndarray:
    """sum over steps s0..s1-1 of step(a_reg, b_reg), exactly in int64, where a_reg broadcasts row i's kg values
    of A' (VPBROADCASTD/Q) to the 8 columns. a: (M, Kp) packed A'; panels: (steps, P, 8 kg)."""
    M = a.shape[0]
    P, lanes = panels.shape[1], panels.shape[2]
    total = None
    chunk = max(1, CHUNK_ELEMENTS // max(1, M * P * lanes))
    for c0 in range(s0, s1, chunk):
        c1 = min(c0 + chunk, s1)
        group = a[:, c0 * kg:c1 * kg].reshape(M, c1 - c0, 1, 1, kg)
        a_reg = np.broadcast_to(group, (M, c1 - c0, P, 8, kg)).reshape(M, c1 - c0, P, lanes)
        out = step(a_reg, np.broadcast_to(panels[None, c0:c1], a_reg.shape)).sum(axis=1, dtype=np.int64)
        total = out if total is None else total + out
    return total


def _columns(acc: np.ndarray, N: int) -> np.ndarray:
    """REDUCE: the int32 lanes of each column (1 or 2) summed, panels laid side by side, cropped to N."""
    M, P, lanes = acc.shape
    return acc.reshape(M, P, 8, lanes // 8).sum(axis=-1).reshape(M, 8 * P)[:, :N]


def _compensation(B: np.ndarray, shift: int) -> np.ndarray:
    """COMP[n] = -shift * colsum(B)[n], int32 wrapping (computed mod 2^32, whatever the size of shift)."""
    colsum = B.astype(np.int64).sum(axis=0) & 0xFFFFFFFF
    return ((colsum.astype(np.uint64) * np.uint64((-shift) & 0xFFFFFFFF)) & np.uint64(0xFFFFFFFF)).astype(np.int64)


def q46_gemm(A: np.ndarray, B: np.ndarray, *, width: int, shift: int, flush: int) -> np.ndarray:
    """gemm_q46.h with ACC16, for any s8 A and B: u = (a + shift) mod 256 as u8; per step VPMADDUBSW(u, b) (the
    pair sum saturates to int16 only out of domain) and VPADDW (wrapping) into int16 lanes; every
    max(1, flush // KG) steps from k = 0 the int16 lanes are widened by VPMADDWD(ones) and added (VPADDD) into
    int32; then REDUCE, and COMP = -shift * colsum(B) is added, all int32 wrapping. VPADDW wraps modulo 2^16, so
    one block's chain equals its exact sum wrapped once; VPADDD likewise modulo 2^32."""
    M, K = A.shape
    N = B.shape[1]
    kg = width // 64
    Kp = _round_up(K, kg)
    steps = Kp // kg
    block = max(1, flush // kg) if flush >= 0 else 1
    u = _pad(wrap(A.astype(np.int64) + shift % 256, U8), M, Kp)
    panels = pack_b(B, kg, 1).view(np.int8)
    acc = np.zeros((M, panels.shape[1], 2 * kg), np.int64)
    ones = np.ones(4 * kg, np.int16)
    for s0 in range(0, steps, block):
        h = wrap(_step_sums(u, panels, kg, s0, min(s0 + block, steps), x86.vpmaddubsw), S16)   # int16 lanes
        acc += x86.vpmaddwd(h, ones)
    return wrap(_columns(acc, N) + _compensation(B, shift), S32)


def q8_gemm(A: np.ndarray, B: np.ndarray, *, width: int, dot: str) -> np.ndarray:
    """gemm_q46.h without ACC16, for any s8 A and B. dot='vpmaddwd': A' and B' are VPMOVSXBW-widened int16 and each
    step is VPMADDWD + VPADDD (KG = width / 128); exact for every s8 input (no s8 pair reaches 4 x 0x8000).
    dot='vpdpbusd': A' = a XOR 0x80 (u8), each step VPDPBUSD (KG = width / 64), COMP = -128 * colsum(B);
    exact too. int32 wrapping throughout (modulo 2^32, so the chain is summed exactly and wrapped once)."""
    M, K = A.shape
    N = B.shape[1]
    if dot == "vpmaddwd":
        kg, es = width // 128, 2
        Kp = _round_up(K, kg)
        a = _sign_extend(_pad(A, M, _round_up(Kp, 16)))[:, :Kp]
        step = x86.vpmaddwd
        shift = 0
    elif dot == "vpdpbusd":
        kg, es = width // 64, 1
        Kp = _round_up(K, kg)
        a = _pad(A.view(np.uint8) ^ np.uint8(0x80), M, Kp)
        def step(a_reg, b_reg):
            return x86.vpdpbusd(np.zeros(a_reg.shape[-1] // 4, np.int32), a_reg, b_reg)
        shift = 128
    else:
        raise ValueError(f"unknown dot-product step {dot!r}")
    panels = pack_b(B, kg, es)
    if es == 1:
        panels = panels.view(np.int8)
    acc = _step_sums(a, panels, kg, 0, Kp // kg, step)
    return wrap(_columns(acc, N) + _compensation(B, shift), S32)
