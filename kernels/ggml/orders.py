"""The float orders of ggml's dot products: for each ISA family ggml ships, which float32 operations turn a vec_dot's
exact integer sums into its float32 result, in order, as a numpy model (the `ordered` contract).

Every vec_dot sums integer products exactly (dot.py: the group sums); only what follows rounds: the scales'
products, their products with the integer sums, and the additions, in an order each ISA's code fixes. Modelled
here bit for bit, one named Order per family, so a kernel is judged bit for bit with ANY scales, not only in the
power-of-two domain (exact.py) where every order agrees.

Where C code leaves the rounding to the compiler (a * b + c written as one statement, or as a multiply and an add
intrinsic, may be fused into an FMA: C11 6.5p8, FP_CONTRACT), each way is an Order of its own, named (an Order's
`fused` says whether C statements are contracted): GCC contracts across statements and intrinsics
(-ffp-contract=fast, its default in gnu11) where the target has an FMA; clang (zig cc) contracts only within one
C expression (-ffp-contract=on), never across an intrinsic's call. x86 without -mfma and wasm have no FMA, so
nothing is contracted there. Measured at -O2, ggml's level (GCC forms FMAs only when it optimizes). order_for
names GCC's x86 orders (lowp builds x86 natively with the host cc); CLANG_TWIN gives a clang build's (zig cc:
the Bochs and other emulated builds).

Integer parts (what ggml sums in integers before any float operation) come from lowp's own block model
(blocks.py): x's codes decoded at unit scale (its fp16 d and dmin set to 1) give the integer sub-scales, so the
kernels' integer sums are rebuilt exactly; the float scales are read from the blocks as ggml reads them.

Sources: ggml-org/ggml @d99724f src/ggml-cpu/quants.c (the _generic vec_dots), src/ggml-cpu/arch/{x86,arm,riscv,
wasm}/quants.c (each arch's), src/ggml-cpu/arch-fallback.h (which types an arch leaves to the _generic); every step
below cites its lines in the file its section names. Measured against ggml's own kernels: docs/ggml.md, "Float
orders".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from lowp.isa_models.float32 import fma_f32
from lowp.kernels.ggml.blocks import QK_K, _iq1_m_scale
from lowp.kernels.ggml.dot import VEC_DOT_TYPE, blocks_of, formats_for
from lowp.kernels.ggml.grids import Grids

F32 = np.float32
ZERO = F32(0)
FP16_ONE = 0x3C00


# ---- float32 steps ------------------------------------------------------------------------------------------------
def f(x) -> np.ndarray:
    """An integer (or float) as float32, one rounding (cvtsi2ss / cvtdq2ps / scvtf: exact below 2^24)."""
    return np.asarray(x).astype(np.float64).astype(F32)


def mul(a, b):
    with np.errstate(all="ignore"):
        return np.multiply(a, b, dtype=F32)


def add(a, b):
    with np.errstate(all="ignore"):
        return np.add(a, b, dtype=F32)


def fma(a, b, c):
    """round(a * b + c) once: an FMA instruction, or a contracted a * b + c."""
    return fma_f32(np.asarray(a, F32), np.asarray(b, F32), np.asarray(c, F32))


def madd(a, b, c, fused: bool):
    """c + a * b as the code writes it: fused into one FMA where the compiler contracts it, else two roundings."""
    return fma(a, b, c) if fused else add(c, mul(a, b))


def hsum_float_8(v) -> F32:
    """x86 quants.c L43-49 hsum_float_8: (hi + lo) of the 128-bit halves, then movehl, then movehdup:
    ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7))."""
    h = add(v[4:8], v[0:4])
    q = add(h[0:2], h[2:4])
    return F32(add(q[0], q[1]))


def vaddvq_f32(v) -> F32:
    """AArch64 FADDP-based vaddvq_f32 (arm_neon.h: faddp v.4s then faddp s): (v0 + v1) + (v2 + v3)."""
    return F32(add(add(v[0], v[1]), add(v[2], v[3])))


def sequential(values, start=ZERO) -> F32:
    """for (...) sum += value: left to right from `start`."""
    total = F32(start)
    for v in values:
        total = F32(add(total, v))
    return total


# ---- the integer parts ggml sums before any float step -------------------------------------------------------------
@dataclass(frozen=True)
class Parts:
    """A vec_dot's operands as its kernels read them, per x block (nb of them). prod: (nb, qk) integer products
    x code * y code in value order (x_codes, y_codes: the factors); sub: x's integer sub-scale per value (1 where
    the format has none); dx, dmin: x's float scales per block as the kernel converts them (nvfp4: (nb, 4), one per
    16 values); yd: y's d per y block (q1_0/q2_0/nvfp4 have several a block); mins: the integer minimum term per
    block (sum of bsums * min), min16 its factor per 16 values, bsums q8_K's stored sums; m, s: q4_1/q5_1's fp16 m
    and q8_1's stored s; delta: iq1_s's delta term, an integer per block."""
    x_type: str
    prod: np.ndarray
    x_codes: np.ndarray
    y_codes: np.ndarray
    sub: np.ndarray
    dx: np.ndarray
    yd: np.ndarray
    dmin: np.ndarray | None = None
    mins: np.ndarray | None = None
    m: np.ndarray | None = None
    s: np.ndarray | None = None
    delta: np.ndarray | None = None
    min16: np.ndarray | None = None         # K-quants: the integer min of each 16 values
    bsums: np.ndarray | None = None         # q8_K's stored bsums (nb, 16)


def _fp16(field) -> np.ndarray:
    return np.asarray(field).view(np.float16).astype(F32)


def _unit_records(x_type: str, rec: np.ndarray) -> np.ndarray:
    """x's records with every fp16 super-scale set to 1.0: decoding them gives the integer sub-scales (times a
    constant per format) that the kernels multiply in integers."""
    rec = rec.copy()
    for field in ("d", "dmin"):
        if field in rec.dtype.names and rec.dtype[field].base == np.dtype("<u2"):
            rec[field] = FP16_ONE
    if x_type == "iq1_m":           # its d is spread over the top nibbles of the four scale words
        words = rec["scales"].copy().view("<u2").reshape(len(rec), 4)
        for w in range(4):
            words[:, w] = (words[:, w] & 0x0FFF) | (((FP16_ONE >> (4 * w)) & 0xF) << 12)
        rec["scales"] = words.view(np.uint8).reshape(rec["scales"].shape)
    return rec


# the integer sub-scale is the unit-scale decode's scale times this (blocks.py: iq2 d * (0.5 + s) * 0.25 ...)
SUB_SCALE_FACTOR = {"iq2_xxs": 8, "iq2_xs": 8, "iq2_s": 8, "iq3_xxs": 4, "iq1_m": 8}


def parts(x_type: str, x_raw, y_raw, n: int, grids: Grids | None = None) -> Parts:
    """The integer products and float scales of ggml_vec_dot_<x_type>_<its q8 type>(n, x, y)."""
    y_type = VEC_DOT_TYPE[x_type]
    formats = formats_for(x_type, grids)
    xf, yf = formats[x_type], formats[y_type]
    xr = xf.records(x_raw)[: blocks_of(x_type, n)]
    yr = yf.records(y_raw)[: blocks_of(y_type, n)]
    x, y = xf.decode(xr), yf.decode(yr)
    unit = xf.decode(_unit_records(x_type, xr))
    prod = x.codes.reshape(len(xr), -1).astype(np.int64) * y.codes.reshape(len(xr), -1)
    sub = np.rint(unit.scale * SUB_SCALE_FACTOR.get(x_type, 1)).astype(np.int64) if x_type in _SUB_SCALED \
        else np.ones_like(prod)
    yd = y.scale[:, 0].astype(F32)
    dx = _x_scale(x_type, xr, x)
    extra = _minimum_parts(x_type, xr, yr, unit, y)
    return Parts(x_type, prod, x.codes.reshape(len(xr), -1).astype(np.int64),
                 y.codes.reshape(len(xr), -1).astype(np.int64), sub, dx, yd, **extra)


_SUB_SCALED = {"q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_xs", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s",
               "iq1_s", "iq1_m"}


def _x_scale(x_type: str, xr: np.ndarray, x) -> np.ndarray:
    """The float scale of x each kernel converts once per block (per sub-block for nvfp4)."""
    if x_type == "mxfp4":
        return x.scale[:, 0].astype(F32)                       # GGML_E8M0_TO_FP32_HALF(e)
    if x_type == "nvfp4":
        return x.scale[:, ::16].astype(F32)                    # ggml_ue4m3_to_fp32 per 16
    if x_type == "iq1_m":
        return _iq1_m_scale(xr["scales"]).astype(F32)
    return _fp16(xr["d"])


def _minimum_parts(x_type: str, xr, yr, unit, y) -> dict:
    if x_type in ("q4_1", "q5_1"):
        return {"m": _fp16(xr["m"]), "s": _fp16(yr["s"])}
    if x_type in ("q2_K", "q4_K", "q5_K"):                    # sum over 16s of bsums * the group's integer min
        min16, bsums = -unit.offset[:, ::16].astype(np.int64), yr["bsums"].astype(np.int64)
        return {"dmin": _fp16(xr["dmin"]), "mins": (bsums * min16).sum(axis=1), "min16": min16, "bsums": bsums}
    if x_type in ("q3_K", "q6_K", "tq1_0", "tq2_0"):
        return {"bsums": yr["bsums"].astype(np.int64)}
    if x_type == "iq1_s":                                     # ls * delta sign * (bsums of its 32), ints
        ls_delta = np.rint(unit.offset[:, ::32] * 8).astype(np.int64)
        b32 = yr["bsums"].astype(np.int64).reshape(len(yr), 8, 2).sum(axis=2)
        return {"delta": (ls_delta * b32).sum(axis=1)}
    return {}


def block_sums(p: Parts) -> np.ndarray:
    """Each x block's integer sum, sub-scales applied (the generic kernels' sumi / isum / bsum)."""
    return (p.sub * p.prod).sum(axis=1)


def k_lanes(p: Parts) -> np.ndarray:
    """The K-quants' eight integer lanes per block: aux32[l] sums sub-scale * product over the elements e with
    e % 8 == l (quants.c L683-686 q3_K, L750-759 q4_K, L830-839 q5_K, L893-896 q6_K)."""
    return (p.sub * p.prod).reshape(len(p.prod), -1, 8).sum(axis=1)


def sub_block_sums(p: Parts, size: int) -> np.ndarray:
    """(nb, qk / size) integer sums of the products within each `size` values (sub-scales not applied)."""
    return p.prod.reshape(len(p.prod), -1, size).sum(axis=2)


# ---- generic: src/ggml-cpu/quants.c, one function per type -------------------------------------------------------
def _generic_sumi_dx_dy(p: Parts, fused: bool, sumf=ZERO) -> F32:
    """q4_0 (L255): sumf += sumi*dx*dy, i.e. ((float)sumi * dx) * dy, then the add."""
    for si, dx, dy in zip(f(block_sums(p)), p.dx, p.yd):
        sumf = madd(mul(si, dx), dy, sumf, fused)
    return F32(sumf)


def _generic_d_sumi(p: Parts, fused: bool, sumf=ZERO) -> F32:
    """q5_0 (L402), q8_0 (L475), mxfp4 (L324), iq4_nl (L1278), tq1_0 (L527), tq2_0 (L559): one
    scale d = dx * dy (the product commutes: one rounding), then sumf += d * (float)sumi."""
    for si, dx, dy in zip(f(block_sums(p)), p.dx, p.yd):
        sumf = madd(mul(dx, dy), si, sumf, fused)
    return F32(sumf)


def _generic_with_min(p: Parts, fused: bool, sumf=ZERO) -> F32:
    """q4_1 (L292), q5_1 (L445): sumf += (dx*dy)*sumi + m*s. Contracted, the first product fuses with the sum of
    the two: fma(dx*dy, sumi, m*s) (GCC's widening_mul and clang's fmuladd both take the left operand); the add
    to sumf stays."""
    for si, dx, dy, m, s in zip(f(block_sums(p)), p.dx, p.yd, p.m, p.s):
        sumf = add(sumf, madd(mul(dx, dy), si, mul(m, s), fused))
    return F32(sumf)


def _generic_two_level(p: Parts, fused: bool) -> F32:
    """q1_0 (L168, L171), q2_0 (L216, L219), nvfp4 (L359): per x block a float partial over its q8 blocks.
    q1_0/q2_0: sumi += d1 * sumi_block, then sumf += d0 * sumi. nvfp4 (4 sub-blocks of 16, a UE4M3 scale each):
    sumf += dy * d * sumi per sub-block directly."""
    if p.x_type == "nvfp4":
        sums = sub_block_sums(p, 16)
        sumf = ZERO
        for ib in range(len(sums)):
            for k in range(4):
                sumf = madd(mul(p.yd[2 * ib + k // 2], p.dx[ib, k]), f(sums[ib, k]), sumf, fused)
        return F32(sumf)
    sums = sub_block_sums(p, 32)
    yd = p.yd.reshape(len(sums), -1)
    sumf = ZERO
    for ib in range(len(sums)):
        inner = ZERO
        for k in range(sums.shape[1]):
            inner = madd(yd[ib, k], f(sums[ib, k]), inner, fused)
        sumf = madd(p.dx[ib], inner, sumf, fused)
    return F32(sumf)


def _generic_q2_K(p: Parts, fused: bool) -> F32:
    """q2_K (L612): dall = yd * d, dmin = yd * dmin; sumf += dall * isum - dmin * summs. Contracted:
    fma(dall, isum, -(dmin * summs)), then the add to sumf."""
    sumf = ZERO
    for isum, summs, dx, dm, yd in zip(f(block_sums(p)), f(p.mins), p.dx, p.dmin, p.yd):
        minus = -mul(mul(yd, dm), summs)
        sumf = add(sumf, madd(mul(yd, dx), isum, minus, fused))
    return F32(sumf)


def _generic_k_lanes(p: Parts, fused: bool) -> F32:
    """q3_K (L690-692), q4_K (L763-767), q5_K (L843-847), q6_K (L900-902): eight float lanes,
    sums[l] += d * aux32[l] with d = dx * yd; q4_K/q5_K also sumf -= dmin * sumi per block (dmin = dmin * yd);
    at the end sumf += sums[l], l = 0..7, in order."""
    lanes = f(k_lanes(p))
    sums = np.zeros(8, F32)
    sumf = ZERO
    for ib in range(len(lanes)):
        sums = madd(mul(p.dx[ib], p.yd[ib]), lanes[ib], sums, fused)
        if p.mins is not None:
            sumf = madd(-mul(p.dmin[ib], p.yd[ib]), f(p.mins[ib]), sumf, fused)
    return sequential(sums, sumf)


# iq: `sumf += d * bsum` (d = dx * yd), then *s = factor * sumf: quants.c L943-945 iq2_xxs, L993-995 iq2_xs,
# L1044-1047 iq2_s, L1089-1091 iq3_xxs, L1145-1147 iq3_s (no factor)
IQ_FINAL_FACTOR = {"iq2_xxs": F32(0.125), "iq2_xs": F32(0.125), "iq2_s": F32(0.125), "iq3_xxs": F32(0.25),
                   "iq3_s": None}


def _generic_iq_bsum(p: Parts, fused: bool) -> F32:
    """The iq2/iq3 generics: an integer bsum per block (ls * sumi summed), sumf += d * bsum, a final factor.
    blocks.py's sub-scale for these is ls / 8 (iq3_xxs ls / 4): the unit decode times that gives ls."""
    sumf = ZERO
    for b, dx, yd in zip(f(block_sums(p)), p.dx, p.yd):
        sumf = madd(mul(dx, yd), b, sumf, fused)
    factor = IQ_FINAL_FACTOR[p.x_type]
    return F32(sumf) if factor is None else F32(mul(factor, sumf))


def _generic_iq1(p: Parts, fused: bool) -> F32:
    """iq1_s (L1187): sumf += dx * yd * (sumi + IQ1S_DELTA * sumi1); iq1_m (L1248): the same with the delta
    inside the codes (blocks.py: 8 * grid + sign, so block_sums is 8 * sumi1 + sumi2 and the inner float is
    that times 0.125: the same single rounding)."""
    sumf = ZERO
    b = block_sums(p)
    for ib in range(len(b)):
        if p.x_type == "iq1_s":
            inner = madd(F32(0.125), f(p.delta[ib]), f(b[ib]), fused)
        else:
            inner = mul(F32(0.125), f(b[ib]))
        sumf = madd(mul(p.dx[ib], p.yd[ib]), inner, sumf, fused)
    return F32(sumf)


def _generic_iq4_xs(p: Parts, fused: bool) -> F32:
    """iq4_xs (L1306-1321): d4d8 = dx * yd; per 32 values d1 = d4d8 * (ls - 32) and sumf += d1 * sumi."""
    sums = sub_block_sums(p, 32)
    ls = p.sub[:, ::32]
    sumf = ZERO
    for ib in range(len(sums)):
        d4d8 = mul(p.dx[ib], p.yd[ib])
        for k in range(8):
            sumf = madd(mul(d4d8, f(ls[ib, k])), f(sums[ib, k]), sumf, fused)
    return F32(sumf)


GENERIC = {"q4_0": _generic_sumi_dx_dy, "q5_0": _generic_d_sumi, "q8_0": _generic_d_sumi,
           "mxfp4": _generic_d_sumi, "iq4_nl": _generic_d_sumi, "tq1_0": _generic_d_sumi, "tq2_0": _generic_d_sumi,
           "q4_1": _generic_with_min, "q5_1": _generic_with_min, "q1_0": _generic_two_level,
           "q2_0": _generic_two_level, "nvfp4": _generic_two_level, "q2_K": _generic_q2_K,
           "q3_K": _generic_k_lanes, "q4_K": _generic_k_lanes, "q5_K": _generic_k_lanes, "q6_K": _generic_k_lanes,
           "iq2_xxs": _generic_iq_bsum, "iq2_xs": _generic_iq_bsum, "iq2_s": _generic_iq_bsum,
           "iq3_xxs": _generic_iq_bsum, "iq3_s": _generic_iq_bsum, "iq1_s": _generic_iq1, "iq1_m": _generic_iq1,
           "iq4_xs": _generic_iq4_xs}


def _generic_tail(p: Parts, start: int, sumf: F32, fused: bool) -> F32:
    """The scalar loop after a SIMD one (the simple 32-value types): the blocks from `start` on, each by its type's
    generic statement, continuing from sumf."""
    if start >= len(p.prod):
        return sumf
    rest = Parts(**{k: (v[start:] if isinstance(v, np.ndarray) else v) for k, v in p.__dict__.items()})
    return GENERIC[p.x_type](rest, fused, sumf)


# ---- x86 AVX2 and AVX: src/ggml-cpu/arch/x86/quants.c --------------------------------------------------------------
# The AVX2 paths accumulate with _mm256_fmadd_ps (fmadd=True); most AVX paths (L742 on) write the same loop as
# _mm256_add_ps(_mm256_mul_ps(..), acc) (fmadd=False), which GCC contracts into an FMA when the build has -mfma
# (piledriver) and clang never does (contract). Both keywords default to the AVX2 build under GCC.
def vacc(a, b, c, fmadd: bool, contract: bool):
    """c + a * b as a vector loop writes it: an explicit FMA intrinsic, or a multiply and an add intrinsic that
    the compiler may contract."""
    return fma(a, b, c) if fmadd else madd(a, b, c, contract)


def lanes_of_four(p: Parts) -> np.ndarray:
    """(nb, 8) int: mul_sum_i8_pairs_float / mul_sum_us8_pairs_float (x86 L122-133, L105-119): maddubs sums
    products in pairs, madd_epi16 with ones sums pairs of pairs: lane l holds elements 4l..4l+3 (the nibble
    unpacking bytes_from_nibbles_32, L90-96, puts elements 0..31 in byte order)."""
    return p.prod.reshape(len(p.prod), 8, 4).sum(axis=2)


def _avx2_one_accumulator(p: Parts, fused: bool, fmadd: bool = True, contract: bool = True) -> F32:
    """q4_0 (L717-740), q5_0 (L1159-1180; AVX L1182-1211), q8_0 (L1325-1339): acc = fmadd(set1(dx * dy),
    (float)lanes, acc) over every block, then hsum_float_8(acc). No scalar tail runs (the loop takes every
    block)."""
    acc = np.zeros(8, F32)
    for lanes, dx, dy in zip(f(lanes_of_four(p)), p.dx, p.yd):
        acc = vacc(mul(dx, dy), lanes, acc, fmadd, contract)
    return hsum_float_8(acc)


def _avx2_with_min(p: Parts, fused: bool, fmadd: bool = True, contract: bool = True) -> F32:
    """q4_1 (L876-907, AVX2 and AVX share it): acc = fmadd(d0*d1, lanes, acc), summs += m * s (a C statement:
    fused where contracted); q5_1 (L1239-1265; AVX L1265-1298): summs the same, acc = fmadd(lanes, dx*dy, acc).
    *s = hsum_float_8(acc) + summs."""
    acc = np.zeros(8, F32)
    summs = ZERO
    for lanes, dx, dy, m, s in zip(f(lanes_of_four(p)), p.dx, p.yd, p.m, p.s):
        summs = madd(m, s, summs, fused)
        acc = vacc(mul(dx, dy), lanes, acc, fmadd, contract)
    return F32(add(hsum_float_8(acc), summs))


def _avx2_two_accumulators(p: Parts, fused: bool) -> F32:
    """mxfp4 (L937-960, tail L992-1000), iq4_nl (L3937-3963, tail L3991-3999): blocks in pairs, the even one into
    accum1 and the odd one into accum2 (fmadd of set1(dy * dx) and the lanes), sumf = hsum_float_8(accum1 +
    accum2); an odd last block by the scalar tail sumf += d * sumi (one statement: fused where contracted)."""
    acc = np.zeros((2, 8), F32)
    lanes = f(lanes_of_four(p))
    pairs = len(lanes) // 2 * 2
    for ib in range(pairs):
        acc[ib % 2] = fma(mul(p.yd[ib], p.dx[ib]), lanes[ib], acc[ib % 2])
    sumf = hsum_float_8(add(acc[0], acc[1]))
    for ib in range(pairs, len(lanes)):
        sumf = madd(mul(p.yd[ib], p.dx[ib]), f(lanes[ib].sum()), sumf, fused)
    return F32(sumf)


def lanes_mod32_by4(values: np.ndarray) -> np.ndarray:
    """(nb, 8) int: the K-quants' AVX2 int32 lanes. Each 256-bit load holds 32 consecutive values; maddubs then
    madd_epi16 (with the scales) sum bytes 4k..4k+3 into lane k, so lane k gathers every value e with
    (e % 32) // 4 == k (x86 L1616-1643 q2_K, L1850-1876 q3_K, L2091-2109 q4_K, L2282-2303 q5_K, L2463-2499 q6_K)."""
    return values.reshape(len(values), -1, 8, 4).sum(axis=(1, 3))


def lanes_halves_of_64(values: np.ndarray) -> np.ndarray:
    """(nb, 8) int: q2_K's and q3_K's AVX lanes (L1689-1748, L1924-2016): 128-bit pieces of 16 values, the
    first 64 of each 128 into sumi_0 and the rest into sumi_1; lane 4h + k gathers the values e with
    (e % 128) // 64 == h and (e % 16) // 4 == k."""
    v = values.reshape(len(values), -1, 2, 4, 4, 4)          # (nb, 128s, half, 16s in the half, lane, 4)
    return v.sum(axis=(1, 3, 5)).reshape(len(values), 8)


def _avx2_k_lanes(p: Parts, halves_of_64: bool = False) -> np.ndarray:
    """The integer lanes each K-quant's AVX2 loop converts. q6_K keeps its 6-bit codes unsigned (0..63) in the
    products and subtracts 32 * (bsums * scales) in pairs of 16s per lane (L2457 q8sclsub, L2502): the lanes then
    differ from the signed codes' lanes, not their total."""
    if p.x_type != "q6_K":
        return (lanes_halves_of_64 if halves_of_64 else lanes_mod32_by4)(p.sub * p.prod)
    unsigned = lanes_mod32_by4(p.sub * (p.prod + 32 * p.y_codes))
    return unsigned - 32 * (p.bsums * p.sub[:, ::16]).reshape(len(p.prod), 8, 2).sum(axis=2)


def _avx2_k(p: Parts, fused: bool, fmadd: bool = True, contract: bool = True) -> F32:
    """q2_K (L1594-1650): acc = fmadd(dmin, mins lanes, acc) then fmadd(d, lanes, acc), hsum_float_8;
    q3_K (L1788-1880), q6_K (L2446-2505): acc = fmadd(d, lanes, acc), hsum_float_8;
    q4_K (L2061-2120): a 4-lane acc_m = fmadd(dmin, mins lanes, acc_m), *s = hsum_float_8(acc) + ((m0 + m2) +
    (m1 + m3)) (movehl, movehdup); q5_K (L2243-2312): summs += dmin * (int) mins (a C statement), *s =
    hsum_float_8(acc) + summs. d = yd * dx, dmin = -yd * dmin. The AVX paths (L1652-1756, L1886-2026, L2122-2202,
    L2314-2412, L2510-2613) run the same steps with mul and add, q2_K and q3_K with lanes_halves_of_64."""
    lanes = f(_avx2_k_lanes(p, halves_of_64=not fmadd and p.x_type in ("q2_K", "q3_K")))
    acc, acc_m, summs = np.zeros(8, F32), np.zeros(4, F32), ZERO
    for ib in range(len(lanes)):
        dmin = -mul(p.yd[ib], p.dmin[ib]) if p.dmin is not None else None
        if p.x_type == "q2_K":
            acc = vacc(dmin, f((p.bsums[ib] * p.min16[ib]).reshape(8, 2).sum(axis=1)), acc, fmadd, contract)
        elif p.x_type == "q4_K":
            acc_m = vacc(dmin, f((p.bsums[ib] * p.min16[ib]).reshape(4, 4).sum(axis=1)), acc_m, fmadd, contract)
        elif p.x_type == "q5_K":
            summs = madd(dmin, f(p.mins[ib]), summs, fused)
        acc = vacc(mul(p.yd[ib], p.dx[ib]), lanes[ib], acc, fmadd, contract)
    if p.x_type == "q4_K":
        half = add(acc_m[0:2], acc_m[2:4])
        return F32(add(hsum_float_8(acc), add(half[0], half[1])))
    return F32(add(hsum_float_8(acc), summs)) if p.x_type == "q5_K" else hsum_float_8(acc)


def _avx2_q1_0(p: Parts, fused: bool, fmadd: bool = True, contract: bool = True) -> F32:
    """q1_0 (L567-605; AVX L607-656): per q8 block K of the x block, eight lanes of four signed q8 values;
    acc_block = d_y0 * lanes_0, then fmadd(d_yK, lanes_K, acc_block) for K = 1..3; acc = fmadd(d0, acc_block,
    acc); hsum_float_8."""
    lanes = f(p.prod.reshape(len(p.prod), 4, 8, 4).sum(axis=3))
    yd = p.yd.reshape(len(p.prod), 4)
    acc = np.zeros(8, F32)
    for ib in range(len(lanes)):
        block = mul(yd[ib, 0], lanes[ib, 0])
        for k in (1, 2, 3):
            block = vacc(yd[ib, k], lanes[ib, k], block, fmadd, contract)
        acc = vacc(p.dx[ib], block, acc, fmadd, contract)
    return hsum_float_8(acc)


def _avx2_nvfp4(p: Parts, fused: bool, fmadd: bool = True, contract: bool = True) -> F32:
    """nvfp4 (L1025-1063; AVX L1065-1118 the same with mul and add): per x block two q8 blocks of 32; lanes of
    four values, lanes 0-3 of a q8 block are its first 16-value sub-block and 4-7 its second (the unpacklo/hi_epi64
    reordering, L1040-1041), each times its s = ue4m3(d_s) * dy; accum = fmadd(scales01, lanes, accum) then
    fmadd(scales23, ...); hsum_float_8."""
    lanes = f(p.prod.reshape(len(p.prod), 2, 8, 4).sum(axis=3))
    acc = np.zeros(8, F32)
    for ib in range(len(lanes)):
        for half in (0, 1):
            s = mul(p.dx[ib, 2 * half:2 * half + 2], p.yd[2 * ib + half])
            acc = vacc(np.repeat(s, 4), lanes[ib, half], acc, fmadd, contract)
    return hsum_float_8(acc)


def _avx2_ternary(p: Parts, fused: bool, contract: bool = True) -> F32:
    """tq1_0 (L1391-1498), tq2_0 (L1523-1564): unsigned codes (0..2) times q8 summed in int16 lanes of pairs,
    minus the stored bsums (int16 lane m minus bsums[m]), madd to eight int32 lanes: lane k holds (code + 1) * y
    over (e % 32) // 4 == k minus bsums[2k] + bsums[2k + 1]; then sumf = _mm256_add_ps(_mm256_mul_ps(lanes, d),
    sumf): GCC (-ffp-contract=fast) fuses the two intrinsics into an FMA, clang does not (`contract`)."""
    unsigned = lanes_mod32_by4(p.prod + p.y_codes)
    lanes = f(unsigned - p.bsums.reshape(len(p.prod), 8, 2).sum(axis=2))
    acc = np.zeros(8, F32)
    for ib in range(len(lanes)):
        acc = madd(lanes[ib], mul(p.yd[ib], p.dx[ib]), acc, contract)
    return hsum_float_8(acc)


def _avx2_iq(p: Parts, fused: bool, fmadd: bool = True, contract: bool = True) -> F32:
    """iq2_xxs (L2680-2713), iq2_xs (L2826-2907), iq2_s (L3106-3158), iq3_xxs (L3279-3317), iq3_s (L3420-3478),
    iq4_xs (L4022-4052): the sub-scale applied in integers (madd with ls), lanes of (e % 32) // 4; accum =
    fmadd(d, lanes, accum), d = dx * yd; *s = factor * hsum_float_8(accum) (0.125 for iq2, 0.25 iq3_xxs). The
    AVX paths (L2715-2768, L2909-3065, L3160-3250, L3319-3374, L3480-3584, L4054-4100) build the two 128-bit
    halves of the same lanes and multiply then add."""
    lanes = f(lanes_mod32_by4(p.sub * p.prod))
    acc = np.zeros(8, F32)
    for ib in range(len(lanes)):
        acc = vacc(mul(p.dx[ib], p.yd[ib]), lanes[ib], acc, fmadd, contract)
    factor = IQ_FINAL_FACTOR.get(p.x_type)
    return hsum_float_8(acc) if factor is None else F32(mul(factor, hsum_float_8(acc)))


def _avx2_iq1_s(p: Parts, fused: bool, fmadd: bool = True, contract: bool = True) -> F32:
    """iq1_s (L3609-3655; AVX L3657-3703): lanes of ls * grid * q8; accum = fmadd(d, lanes, accum), d = yd * dx;
    the delta part an integer sumi1 per block (from bsums), accum1 += d * sumi1 (a statement: contracted); *s =
    hsum_float_8(accum) + IQ1S_DELTA * accum1 (0.125 * accum1 is exact)."""
    lanes = f(lanes_mod32_by4(p.sub * p.prod))
    acc, acc1 = np.zeros(8, F32), ZERO
    for ib in range(len(lanes)):
        d = mul(p.yd[ib], p.dx[ib])
        acc = vacc(d, lanes[ib], acc, fmadd, contract)
        acc1 = madd(d, f(p.delta[ib]), acc1, fused)
    return F32(madd(F32(0.125), acc1, hsum_float_8(acc), fused))


def _avx2_iq1_m(p: Parts, fused: bool, fmadd: bool = True, contract: bool = True) -> F32:
    """iq1_m (L3737-3823; AVX L3825-3909): the grid and the delta signs in separate int32 lanes (sumi1: ls * grid *
    q8, sumi2: ls * sign * q8, each of (e % 32) // 4), two accumulators accum1, accum2 = fmadd(d, lanes, .); *s =
    hsum_float_8(accum1) + IQ1M_DELTA * hsum_float_8(accum2). blocks.py's code is 8 * grid + sign."""
    grid = np.rint(p.x_codes / 8).astype(np.int64)
    sign = p.x_codes - 8 * grid
    lanes1 = f(lanes_mod32_by4(p.sub * grid * p.y_codes))
    lanes2 = f(lanes_mod32_by4(p.sub * sign * p.y_codes))
    acc1, acc2 = np.zeros(8, F32), np.zeros(8, F32)
    for ib in range(len(lanes1)):
        d = mul(p.yd[ib], p.dx[ib])
        acc1, acc2 = vacc(d, lanes1[ib], acc1, fmadd, contract), vacc(d, lanes2[ib], acc2, fmadd, contract)
    return F32(madd(F32(0.125), hsum_float_8(acc2), hsum_float_8(acc1), fused))


AVX2 = {"q4_0": _avx2_one_accumulator, "q5_0": _avx2_one_accumulator, "q8_0": _avx2_one_accumulator,
        "q4_1": _avx2_with_min, "q5_1": _avx2_with_min, "mxfp4": _avx2_two_accumulators,
        "iq4_nl": _avx2_two_accumulators, "q1_0": _avx2_q1_0, "nvfp4": _avx2_nvfp4, "tq1_0": _avx2_ternary,
        "tq2_0": _avx2_ternary, "q2_K": _avx2_k, "q3_K": _avx2_k, "q4_K": _avx2_k, "q5_K": _avx2_k, "q6_K": _avx2_k,
        "iq2_xxs": _avx2_iq, "iq2_xs": _avx2_iq, "iq2_s": _avx2_iq, "iq3_xxs": _avx2_iq, "iq3_s": _avx2_iq,
        "iq4_xs": _avx2_iq, "iq1_s": _avx2_iq1_s, "iq1_m": _avx2_iq1_m, "q2_0": GENERIC["q2_0"]}   # no x86 q2_0


def quad_lanes(prod: np.ndarray) -> np.ndarray:
    """(n, 4) int: 32 values in two 16-byte halves whose maddubs pairs are added (in int16, or after madd in int32)
    before the last madd: lane k holds values 4k..4k+3 and 16+4k..16+4k+3 (AVX q4_0 L760-763, mul_sum_i8_quad_float
    L247-263 for q8_0, mxfp4, iq4_nl; SSSE3 q1_0 L671-683)."""
    return prod.reshape(-1, 2, 4, 4).sum(axis=(1, 3))


def _avx_pairs(p: Parts, fused: bool, contract: bool) -> F32:
    """AVX q4_0 (L742-768), q8_0 (L1343-1361), mxfp4 (L965-989), iq4_nl (L3966-3989): blocks in pairs, one
    __m256 of the even block's four quad lanes and the odd block's, accum = _mm256_add_ps(_mm256_mul_ps(deltas,
    p), accum) with deltas = (d_even x 4, d_odd x 4); sumf = hsum_float_8(accum); an odd last block by the scalar
    tail (the generic statement)."""
    lanes = f(quad_lanes(p.prod))
    pairs = len(lanes) // 2 * 2
    acc = np.zeros(8, F32)
    for ib in range(0, pairs, 2):
        deltas = np.repeat(mul(p.dx[ib:ib + 2], p.yd[ib:ib + 2]), 4)
        acc = madd(deltas, np.concatenate([lanes[ib], lanes[ib + 1]]), acc, contract)
    return _generic_tail(p, pairs, hsum_float_8(acc), fused)


def x86_avx_steps(contract: bool) -> dict:
    """The AVX paths (no AVX2): the AVX2 models with multiply and add for fmadd, and the pairs of q4_0, q8_0,
    mxfp4, iq4_nl; tq1_0 and tq2_0 have none (their generic statement)."""
    from functools import partial
    steps = {t: partial(step, fmadd=False, contract=contract) for t, step in AVX2.items()
             if t not in ("tq1_0", "tq2_0", "q4_0", "q8_0", "mxfp4", "iq4_nl")}
    steps |= {t: partial(_avx_pairs, contract=contract) for t in ("q4_0", "q8_0", "mxfp4", "iq4_nl")}
    return steps | {t: GENERIC[t] for t in ("tq1_0", "tq2_0", "q2_0")}


def x86_avx2_clang_steps() -> dict:
    """AVX2 built by clang: the same except where the code writes a multiply and an add intrinsic (tq1_0, tq2_0),
    which clang does not contract."""
    from functools import partial
    return AVX2 | {t: partial(_avx2_ternary, contract=False) for t in ("tq1_0", "tq2_0")}


def hsum_float_4x4(a, b, c, d) -> F32:
    """x86 quants.c L290-299: _mm_hadd_ps(a, b), (c, d), then of those, then twice of itself:
    (((a0 + a1) + (a2 + a3)) + ((b0 + b1) + (b2 + b3))) + (((c0 + c1) + (c2 + c3)) + ((d0 + d1) + (d2 + d3)))."""
    r = [add(add(v[0], v[1]), add(v[2], v[3])) for v in (a, b, c, d)]
    return F32(add(add(r[0], r[1]), add(r[2], r[3])))


def _ssse3_q4_0(p: Parts, fused: bool) -> F32:
    """SSSE3 q4_0 (L770-837): blocks in pairs, four 4-lane accumulators: acc_0 and acc_1 the even block's low
    (values 0..15) and high (16..31) lanes of four, acc_2 and acc_3 the odd block's; acc_k = add(mul(d, p_k),
    acc_k); hsum_float_4x4; an odd last block by the scalar tail."""
    lanes = f(lanes_of_four(p)).reshape(-1, 2, 4)
    pairs = len(lanes) // 2 * 2
    acc = np.zeros((4, 4), F32)
    for ib in range(pairs):
        d = mul(p.dx[ib], p.yd[ib])
        for half in (0, 1):
            k = 2 * (ib % 2) + half
            acc[k] = madd(d, lanes[ib, half], acc[k], fused)
    return _generic_tail(p, pairs, hsum_float_4x4(*acc), fused)


def _ssse3_q1_0(p: Parts, fused: bool) -> F32:
    """SSSE3 q1_0 (L657-692): the four q8 blocks of an x block into four 4-lane accumulators, each its quad
    lanes: acc_K = add(acc_K, mul(mul(d0, d_yK), lanes)); hsum_float_4x4."""
    lanes = f(quad_lanes(p.prod)).reshape(len(p.prod), 4, 4)
    yd = p.yd.reshape(len(p.prod), 4)
    acc = np.zeros((4, 4), F32)
    for ib in range(len(lanes)):
        for k in range(4):
            acc[k] = madd(mul(p.dx[ib], yd[ib, k]), lanes[ib, k], acc[k], fused)
    return hsum_float_4x4(*acc)


SSSE3 = {"q4_0": _ssse3_q4_0, "q1_0": _ssse3_q1_0}


# ---- AArch64 NEON: src/ggml-cpu/arch/arm/quants.c ----------------------------------------------------------------
def neon_lanes(p: Parts, dotprod: bool) -> np.ndarray:
    """(nb * qk / 32, 4) int: each 32 values' int32x4 after ggml_vdotq_s32 over their two 16-byte halves, added.
    With dotprod it is SDOT: lane i sums bytes 4i..4i+3; without, ggml-cpu-impl.h L310-315 (vmull_s8 of the low
    and high 8 bytes, vpaddlq_s16 each, added): lane i sums bytes 2i, 2i+1, 8+2i, 9+2i."""
    byte = np.arange(16)
    lane = byte // 4 if dotprod else (byte % 8) // 2
    halves = p.prod.reshape(-1, 2, 16).sum(axis=1)
    return np.stack([halves[:, lane == i].sum(axis=1) for i in range(4)], axis=1)


def _neon_pairs(p: Parts, fused: bool, dotprod: bool) -> F32:
    """q4_0 (L491-513), q5_0 (L948-1004), q8_0 (L1349-1372), q4_1 (L694-727), q5_1 (L1063-1122): blocks in
    pairs, the even one into sumv0 and the odd one into sumv1 by vmlaq_n_f32(sumv, (float)lanes, dx * dy)
    (arm_neon.h writes it as one expression, __p0 + __p1 * splat: an FMLA where contracted); then
    sumf = vaddvq_f32(sumv0) + vaddvq_f32(sumv1), q4_1 + summs (L727), q5_1 + summs0 + summs1 (L1122); an odd
    last block by the scalar tail (the generic statement)."""
    lanes = f(neon_lanes(p, dotprod))
    sumv, summs = np.zeros((2, 4), F32), [ZERO, ZERO]
    pairs = len(lanes) // 2 * 2
    for ib in range(0, pairs, 2):
        if p.x_type == "q4_1":      # L700: summs += m0 * s0 + m1 * s1: contracted, fma(m0, s0, m1 * s1)
            summs[0] = add(summs[0], madd(p.m[ib], p.s[ib], mul(p.m[ib + 1], p.s[ib + 1]), fused))
        for k in (0, 1):
            if p.x_type == "q5_1":  # L1071-1072: summs0 += m0 * s0; summs1 += m1 * s1
                summs[k] = madd(p.m[ib + k], p.s[ib + k], summs[k], fused)
            sumv[k] = madd(lanes[ib + k], mul(p.dx[ib + k], p.yd[ib + k]), sumv[k], fused)
    sumf = add(vaddvq_f32(sumv[0]), vaddvq_f32(sumv[1]))
    for extra in {"q4_1": summs[:1], "q5_1": summs}.get(p.x_type, []):
        sumf = add(sumf, extra)
    return _generic_tail(p, pairs, F32(sumf), fused)


def _neon_pairs_scalar(p: Parts, fused: bool, dotprod: bool) -> F32:
    """mxfp4 (L775-795), iq4_nl (L4214-4236): per pair, the int32x4 reduced to an integer (vaddvq_s32), then
    sumf += dx0 * dy0 * S0 + dx1 * dy1 * S1 (mxfp4: e0 * d0 * S0 ...), one C statement: contracted, the first
    product fuses with the second: fma(dx0*dy0, S0, (dx1*dy1) * S1), then the add to sumf. Tail: the generic."""
    sums = f(block_sums(p))
    pairs = len(sums) // 2 * 2
    sumf = ZERO
    for ib in range(0, pairs, 2):
        d0, d1 = mul(p.dx[ib], p.yd[ib]), mul(p.dx[ib + 1], p.yd[ib + 1])
        sumf = add(sumf, madd(d0, sums[ib], mul(d1, sums[ib + 1]), fused))
    return _generic_tail(p, pairs, F32(sumf), fused)


def _q6_K_unsigned_total(p: Parts) -> np.ndarray:
    """q6_K's block integer as NEON (L3522-3582) and AVX2 form it: unsigned 6-bit codes times q8 and the scales,
    minus 32 * the stored bsums times the scales."""
    unsigned = (p.sub * (p.prod + 32 * p.y_codes)).sum(axis=1)
    return unsigned - 32 * (p.bsums * p.sub[:, ::16]).sum(axis=1)


def _neon_k(p: Parts, fused: bool, dotprod: bool) -> F32:
    """The NEON K-quants reduce each block to integers (vaddvq_s32 of the vdot lanes times the sub-scales), so
    only scalar statements round: q2_K (L1954-2005): sum += dmin * mins with dmin = -yd * dmin, then sum += d *
    isum; q3_K (L2229-2297): sum += d * isum; q4_K (L2800-2846): sumf -= dmin * mins, then sumf += d * (sumi1 +
    sumi2); q5_K (L2896-2947): sumf += d * sumi - dmin * mins (one statement: fma(d, sumi, -(dmin * mins)) and
    the add, as generic q2_K); q6_K (L3506-3582): sum += d_all * yd * (isum - 32 * isum_mins). d = yd * dx."""
    total = _q6_K_unsigned_total(p) if p.x_type == "q6_K" else block_sums(p)
    sumf = ZERO
    for ib in range(len(total)):
        isum = f(total[ib])
        d = mul(p.dx[ib], p.yd[ib])
        if p.x_type in ("q2_K", "q4_K"):
            sumf = madd(-mul(p.yd[ib], p.dmin[ib]), f(p.mins[ib]), sumf, fused)
        if p.x_type == "q5_K":
            sumf = add(sumf, madd(d, isum, -mul(mul(p.yd[ib], p.dmin[ib]), f(p.mins[ib])), fused))
        else:
            sumf = madd(d, isum, sumf, fused)
    return F32(sumf)


def _neon_q1_q2(p: Parts, fused: bool, dotprod: bool) -> F32:
    """q1_0 (L153-205), q2_0 (L246-273): one float32x4 over every q8 block: sumv = vmlaq_n_f32(sumv,
    (float)lanes, d0 * d1) with d0 the x block's scale and d1 the q8 block's (the signs, resp. the 2-bit codes,
    unpacked in value order); *s = vaddvq_f32(sumv)."""
    lanes = f(neon_lanes(p, dotprod))
    per_x = len(lanes) // len(p.prod)
    sumv = np.zeros(4, F32)
    for k in range(len(lanes)):
        sumv = madd(lanes[k], mul(p.dx[k // per_x], p.yd[k]), sumv, fused)
    return vaddvq_f32(sumv)


def _neon_nvfp4(p: Parts, fused: bool, dotprod: bool) -> F32:
    """nvfp4 (L826-898): per x block an int32x4 of its four 16-value sub-blocks' integer sums, scales =
    vmulq_f32({d0..d3}, {dy0, dy0, dy1, dy1}), acc = vfmaq_f32(acc, (float)sums, scales) (an explicit FMA);
    *s = vaddvq_f32(acc)."""
    sums = f(sub_block_sums(p, 16))
    acc = np.zeros(4, F32)
    for ib in range(len(sums)):
        scales = mul(p.dx[ib], np.repeat(p.yd[2 * ib:2 * ib + 2], 2))
        acc = fma(sums[ib], scales, acc)
    return vaddvq_f32(acc)


def _neon_block_integer(p: Parts, fused: bool, dotprod: bool) -> F32:
    """The NEON vec_dots that reduce each x block to integers and then run the generic's statement (the integer
    may be the generic's times a power of two, with the final factor divided by it: the same float result):
    tq1_0 (L1555-1560), tq2_0 (L1666-1671), iq2_xxs (L3681-3683: 0.25 * sumf of half the generic's bsum),
    iq2_xs (L3755-3757), iq2_s (L3850-3853), iq3_xxs (L3914-3916: 0.5 * sumf), iq3_s (L4024), iq1_s (L4089),
    iq1_m (L4182); iq4_xs (L4307): sumf += dx * yd * (sumi1 + sumi2), one integer a block."""
    return (_generic_d_sumi if p.x_type == "iq4_xs" else GENERIC[p.x_type])(p, fused)


def faddv(v, lanes: int) -> F32:
    """SVE FADDV over a vector of `lanes` float32 lanes whose first len(v) are active: the architecture's recursive
    pairwise reduction (Arm ARM, ReducePredicated / Reduce: the lower half's sum plus the upper half's), inactive
    lanes entering as +0.0."""
    values = np.zeros(lanes, F32)
    values[:len(v)] = v
    while len(values) > 1:                  # Reduce(lower half) + Reduce(upper half): adjacent pairs, level by level
        values = add(values[0::2], values[1::2])
    return F32(values[0])


def _sve_q4_0_q8_0(p: Parts, fused: bool, bits: int) -> F32:
    """q4_0 (L391-490) and q8_0 (L1232-1345) with SVE: blocks in pairs into sumv0 and sumv1 by svmla_n_f32 (FMLA),
    sumf = svaddv_f32(sumv0 + sumv1); an odd last block by the generic tail. At VL 128 a block's int32 lanes are
    SDOT's over its two 16-byte halves (as neon-dotprod), at 256 eight lanes of four values, at 512 the same eight
    lanes active of sixteen (q4_0: the reduction over 16 lanes with 8 zeros), q8_0 at 512 both blocks of a pair in
    one 16-lane vector times (d0 x 8, d1 x 8) into one accumulator (L1296-1323)."""
    lanes = f(neon_lanes(p, dotprod=True) if bits == 128 else lanes_of_four(p))
    pairs = len(lanes) // 2 * 2
    width = bits // 32
    if p.x_type == "q8_0" and bits == 512:
        acc = np.zeros(16, F32)
        for ib in range(0, pairs, 2):
            d = np.repeat(mul(p.dx[ib:ib + 2], p.yd[ib:ib + 2]), 8)
            acc = fma(np.concatenate([lanes[ib], lanes[ib + 1]]), d, acc)
        return _generic_tail(p, pairs, faddv(acc, 16), fused)
    sumv = np.zeros((2, lanes.shape[1]), F32)
    for ib in range(pairs):
        sumv[ib % 2] = fma(lanes[ib], mul(p.dx[ib], p.yd[ib]), sumv[ib % 2])
    return _generic_tail(p, pairs, faddv(add(sumv[0], sumv[1]), width), fused)


def _sve_q2_K(p: Parts, fused: bool, bits: int) -> F32:
    """q2_K with SVE (L1697-1941): per block acc_sum = FMLA(acc_sum, (float)mins lanes, dmin) then FMLA(acc_sum,
    (float)lanes, d) (d = yd * dx, dmin = -yd * dmin); *s = svaddv_f32(acc_sum). At VL 128 four lanes: mins lane k
    sums min * bsums over the 16s j with j % 4 == k, the products' lane k the values (e % 16) // 4 == k (SDOT of
    16-value pieces times their scale); at 256 and 512 eight lanes: mins over j % 8 == k, values (e % 32) // 4 ==
    k (at 512 eight of sixteen lanes active)."""
    width = 4 if bits == 128 else 8
    mins = f((p.bsums * p.min16).reshape(len(p.prod), -1, width).sum(axis=1))
    values = p.sub * p.prod
    lanes = f(values.reshape(len(p.prod), -1, 4, 4).sum(axis=(1, 3)) if bits == 128 else lanes_mod32_by4(values))
    acc = np.zeros(width, F32)
    for ib in range(len(lanes)):
        acc = fma(mins[ib], -mul(p.yd[ib], p.dmin[ib]), acc)
        acc = fma(lanes[ib], mul(p.yd[ib], p.dx[ib]), acc)
    return faddv(acc, bits // 32)


def sve_steps(bits: int) -> dict:
    """An SVE build (ggml's have dotprod): q4_0, q8_0 and q2_K as above; q3_K (L2147, L2200), q4_K (L2724, L2756,
    L2770) and q6_K (L3427, L3481) reduce each block to integers and run NEON's statements; every other type has
    no SVE path (NEON with dotprod)."""
    from functools import partial
    return neon_steps(dotprod=True) | {t: partial(_sve_q4_0_q8_0, bits=bits) for t in ("q4_0", "q8_0")} | \
        {"q2_K": partial(_sve_q2_K, bits=bits)}


NEON_PAIRS = ("q4_0", "q5_0", "q8_0", "q4_1", "q5_1")


def neon_steps(dotprod: bool) -> dict:
    from functools import partial
    steps = {t: partial(_neon_pairs, dotprod=dotprod) for t in NEON_PAIRS}
    steps |= {t: partial(_neon_k, dotprod=dotprod) for t in ("q2_K", "q3_K", "q4_K", "q5_K", "q6_K")}
    steps |= {t: partial(_neon_q1_q2, dotprod=dotprod) for t in ("q1_0", "q2_0")}
    steps |= {t: partial(_neon_block_integer, dotprod=dotprod) for t in ("tq1_0", "tq2_0", "iq2_xxs", "iq2_xs",
                                                                          "iq2_s", "iq3_xxs", "iq3_s", "iq1_s",
                                                                          "iq1_m", "iq4_xs")}
    steps["nvfp4"] = partial(_neon_nvfp4, dotprod=dotprod)
    return steps | {t: partial(_neon_pairs_scalar, dotprod=dotprod) for t in ("mxfp4", "iq4_nl")}


# ---- RISC-V V: src/ggml-cpu/arch/riscv/quants.c (the __riscv_v bodies; VLEN chosen at run time) -----------------
def _rvv_sumi_dy_dx(p: Parts, fused: bool) -> F32:
    """tq1_0 (L6068, L6172): sumf += (int)sum * y.d * x.d, i.e. ((float)sum * yd) * dx: y's scale first, unlike
    the generic's sum * (dx * yd)."""
    sumf = ZERO
    for si, dx, dy in zip(f(block_sums(p)), p.dx, p.yd):
        sumf = madd(mul(si, dy), dx, sumf, fused)
    return F32(sumf)


def _rvv_q5_K(p: Parts, fused: bool) -> F32:
    """q5_K (L2105-2183): sumf -= dmin * mins per block (dmin = dmin * yd), and a second accumulator sums +=
    aux32 * d (d = dx * yd, aux32 the block's integer); *s = sumf + sums."""
    sumf, sums = ZERO, ZERO
    for ib, total in enumerate(f(block_sums(p))):
        sumf = madd(-mul(p.dmin[ib], p.yd[ib]), f(p.mins[ib]), sumf, fused)
        sums = madd(total, mul(p.dx[ib], p.yd[ib]), sums, fused)
    return F32(add(sumf, sums))


def _rvv_q6_K_halves(p: Parts, fused: bool) -> F32:
    """q6_K at VLEN 128 (L2308-2419, inline assembly): each 128-value half of a block is reduced to an integer
    (signed codes: vsub 32, L2374) and added by its own fmadd.s sumf, d, half, sumf (L2400): two FMAs a block."""
    halves = f((p.sub * p.prod).reshape(len(p.prod), 2, 128).sum(axis=2))
    sumf = ZERO
    for ib in range(len(halves)):
        for h in (0, 1):
            sumf = fma(mul(p.dx[ib], p.yd[ib]), halves[ib, h], sumf)
    return F32(sumf)


def _rvv_q6_K_block(p: Parts, fused: bool) -> F32:
    """q6_K at VLEN 256, 512, 1024 (L2435-2511, L2535-2611, L2635-2712): an integer sum_t per block, sumf += d *
    sum_t."""
    return _generic_d_sumi(p, fused)


def rvv_steps(vector_bits: int) -> dict:
    """Most RVV bodies reduce a block (or a pair) to integers with vwredsum / vredsum and then run the generic's
    statement: q4_0 (L268), q4_1 (L319), q5_0 (L373), q5_1 (L426), q8_0 (L467), q1_0 (L517, L556), iq4_nl
    (L5527-5528, L5584-5585) and mxfp4 (L6518-6519, L6575-6576) in pairs (an odd last block has no tail there:
    llama.cpp #29131, so those kernels miss this order at odd block counts), tq2_0 (L6376, L6447), iq2_xxs
    (L4609, L4703), iq2_xs (L4342, L4434), iq2_s (L3840, L3942), iq3_xxs (L5187, L5280), iq3_s (L4890, L4985),
    iq1_s (L2853), iq1_m (L3322, L3435), iq4_xs (L5668, L5748: one integer per block, d * yd * it); q2_K (L744,
    L886: sumf += dmin * mins, then dall * isum), q3_K (L1251, L1363), q4_K (L1845 fnmsub.s, L1955 fmadd.s;
    L2020, L2056) as the NEON K-quants. q2_0 and nvfp4 have no RVV body (the _generic)."""
    steps = {t: GENERIC[t] for t in ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q1_0", "q2_0", "nvfp4", "iq4_nl",
                                      "mxfp4", "tq2_0", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s",
                                      "iq1_m")}
    steps["iq4_xs"] = _generic_d_sumi
    steps["tq1_0"] = _rvv_sumi_dy_dx
    from functools import partial
    steps |= {t: partial(_neon_k, dotprod=True) for t in ("q2_K", "q3_K", "q4_K")}
    steps["q5_K"] = _rvv_q5_K
    steps["q6_K"] = _rvv_q6_K_halves if vector_bits == 128 else _rvv_q6_K_block      # L2720-2740 dispatch
    return steps


# ---- wasm32 SIMD128: src/ggml-cpu/arch/wasm/quants.c (no FMA: neither SIMD128 nor scalar wasm has one) ---------
def wasm_lanes(p: Parts) -> np.ndarray:
    """(nb, 4) int: a 32-value block widened to i16x8 in four runs of eight and reduced by wasm_i32x4_dot_i16x8
    (lane k: pairs 2k, 2k+1 of each run), the four added: lane k holds the values e with (e % 8) // 2 == k
    (wasm quants.c L272-292 q4_0, L400-406 q4_1, L498-505 q5_0, L594-600 q5_1, L654-663 q8_0)."""
    return p.prod.reshape(len(p.prod), 4, 4, 2).sum(axis=(1, 3))


def _wasm_blocks(p: Parts, fused: bool) -> F32:
    """q4_1 (L378-415), q5_0 (L455-508), q5_1 (L548-603), q8_0 (L636-671) every block, q4_0 (L255-336) in pairs
    with the generic tail (L339-352): sumv = wasm_f32x4_add(sumv, wasm_f32x4_mul((float)lanes, dx * dy)); sumf =
    ((v0 + v1) + v2) + v3 (the extract_lane sum), q4_1 and q5_1 + summs (summs += m * s each block)."""
    lanes = f(wasm_lanes(p))
    stop = len(lanes) // 2 * 2 if p.x_type == "q4_0" else len(lanes)
    sumv, summs = np.zeros(4, F32), ZERO
    for ib in range(stop):
        if p.m is not None:
            summs = madd(p.m[ib], p.s[ib], summs, fused)
        sumv = madd(lanes[ib], mul(p.dx[ib], p.yd[ib]), sumv, fused)
    sumf = sequential(sumv[1:], sumv[0])
    if p.m is not None:
        sumf = add(sumf, summs)
    return _generic_tail(p, stop, F32(sumf), fused)


def _wasm_q3_K(p: Parts, fused: bool) -> F32:
    """q3_K (L826-904): integer lanes v_acc0 (values e % 8 == l) and v_acc1 (e % 8 == 4 + l); per block
    v_sum = (float)acc0 * d + (float)acc1 * d, sums[0..3] += v_sum; at the end (sums[0..3] + sums[4..7], the
    latter zero) then ((s0 + s1) + s2) + s3."""
    lanes = f(k_lanes(p))
    sums = np.zeros(4, F32)
    for ib in range(len(lanes)):
        d = mul(p.dx[ib], p.yd[ib])
        sums = add(sums, add(mul(lanes[ib, :4], d), mul(lanes[ib, 4:], d)))
    sums = add(sums, np.zeros(4, F32))
    return sequential(sums[1:], sums[0])


def _wasm_mins_then_block(p: Parts, fused: bool) -> F32:
    """q4_K (L942-1034), q5_K (L1074-1177): per block sumf -= dmin * mins (dmin = yd * dmin), then sumf += d *
    the block's integer (d = yd * dx)."""
    sumf = ZERO
    for ib, total in enumerate(f(block_sums(p))):
        sumf = madd(-mul(p.yd[ib], p.dmin[ib]), f(p.mins[ib]), sumf, fused)
        sumf = madd(mul(p.yd[ib], p.dx[ib]), total, sumf, fused)
    return F32(sumf)


# q2_K (L697-791): the generic statement sumf += dall * isum - dmin * summs; q6_K (L1212-1272): the generic's
# eight float lanes sums[l] += d * aux32[l] (aux32[l] the values e % 8 == l); the other 15 types have no wasm
# version (arch-fallback.h L299-330: their _generic)
WASM = {t: GENERIC[t] for t in GENERIC} | {t: _wasm_blocks for t in ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0")} | \
       {"q3_K": _wasm_q3_K, "q4_K": _wasm_mins_then_block, "q5_K": _wasm_mins_then_block}


# ---- the named orders ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Order:
    """A named float order: `steps[x_type](parts, fused)` gives the float32 result; `fused` says whether a C
    statement's a * b + c is contracted into an FMA (the explicit FMA intrinsics are FMAs either way)."""
    name: str
    describe: str
    steps: dict[str, Callable[[Parts, bool], F32]]
    fused: bool

    @property
    def types(self) -> frozenset[str]:
        return frozenset(self.steps)

    def value(self, x_type: str, x_raw, y_raw, n: int, grids: Grids | None = None) -> np.float32:
        """What a kernel with this float order returns for ggml_vec_dot_<x_type>_<q8 type>(n, x, y)."""
        if x_type not in self.steps:
            raise KeyError(f"order {self.name} has no model for {x_type}")
        return F32(self.steps[x_type](parts(x_type, x_raw, y_raw, n, grids), self.fused))


ORDERS: dict[str, Order] = {o.name: o for o in (
    Order("generic", "quants.c _generic: sequential over blocks, every a * b + c rounded twice (no FMA: x86 "
          "without -mfma, or -ffp-contract=off)", GENERIC, False),
    Order("generic-fma", "quants.c _generic with each C statement's a * b + c contracted into an FMA (GCC or clang "
          "where the target has FMA: x86 -mfma, AArch64, RISC-V with D)", GENERIC, True),
    Order("neon", "AArch64 NEON without dotprod: even and odd blocks into two 4-lane vmlaq_n_f32 accumulators "
          "(contracted: FMLA), lanes as ggml_vdotq_s32's fallback groups them, vaddvq(a0) + vaddvq(a1), scalar tail",
          neon_steps(dotprod=False), True),
    Order("neon-dotprod", "AArch64 NEON with dotprod (SDOT lanes of four bytes), otherwise as neon",
          neon_steps(dotprod=True), True),
    Order("neon-nofma", "neon built with -ffp-contract=off: vmlaq_n_f32 and every statement multiply then add",
          neon_steps(dotprod=False), False),
    Order("neon-dotprod-nofma", "neon-dotprod built with -ffp-contract=off", neon_steps(dotprod=True), False),
    *(Order(f"sve-vl{bits}", f"AArch64 SVE at VL {bits} (with dotprod): q4_0/q8_0/q2_K by FMLA into SVE "
             "accumulators reduced by FADDV's pairwise tree, the other types as neon-dotprod", sve_steps(bits), True)
      for bits in (128, 256, 512)),
    Order("rvv-vl128", "RISC-V V at VLEN 128: blocks reduced to integers by vwredsum, then the generic's "
          "statements (contracted); q6_K two fmadd.s a block, q5_K a second accumulator, tq1_0 sum * yd * dx",
          rvv_steps(128), True),
    *(Order(f"rvv-vl{bits}", f"RISC-V V at VLEN {bits}: as rvv-vl128 but q6_K one integer a block",
            rvv_steps(bits), True) for bits in (256, 512, 1024)),
    Order("wasm-simd128", "wasm32 SIMD128: four f32x4 lanes of (e % 8) // 2 by multiply then add, extract-lane "
          "sums; K-quants as their generic or per-block statements; nothing fused (wasm has no FMA)", WASM, False),
    Order("avx2", "x86 AVX2 (-mavx2 -mfma) built by GCC: dx * dy first, eight FMA lanes of four products' int32 "
          "sums, hsum_float_8; statements and mul/add intrinsic pairs contracted", AVX2, True),
    Order("avx2-clang", "x86 AVX2 built by clang: as avx2, but a multiply and an add intrinsic stay two roundings "
          "(tq1_0, tq2_0)", x86_avx2_clang_steps(), True),
    Order("avx", "x86 AVX without FMA (sandybridge, ivybridge): the AVX2 lanes with multiply then add, q4_0/q8_0/"
          "mxfp4/iq4_nl two blocks a step", x86_avx_steps(contract=False), False),
    Order("avx-fma", "x86 AVX with -mfma built by GCC (piledriver): avx with every multiply-add contracted",
          x86_avx_steps(contract=True), True),
    Order("avx-fma-clang", "x86 AVX with -mfma built by clang: the C statements contracted, the intrinsics not",
          x86_avx_steps(contract=False), True),
    Order("ssse3", "x86 SSSE3 without AVX (the sse42 build): q4_0 and q1_0 in four 4-lane accumulators, "
          "hsum_float_4x4; every other type its generic statement", SSSE3 | {t: GENERIC[t] for t in GENERIC
                                                                           if t not in SSSE3}, False),
)}


def order_for(arch: str, features: frozenset[str], x_type: str, vector_bits: int | None = None) -> str | None:
    """The name of the order ggml @d99724f's code for `arch` takes for ggml_vec_dot of x_type, given the CPU
    features its build enables, or None where that path is not modelled (then only the bounded contract applies).
    arch and the feature names it reads: 'x86-64' ('avx2', 'fma', 'avx', 'ssse3' or 'sse4_2'; AVX-512 and VNNI
    change no vec_dot's float order), 'aarch64' ('asimddp', 'sve' with vector_bits 128/256/512; 'i8mm' changes
    nothing for one row), 'riscv64' ('v' with vector_bits 128..1024), 'wasm32' ('simd128')."""
    if arch == "x86-64":
        return _x86_order(features, x_type)
    if arch == "aarch64":
        return _aarch64_order(features, x_type, vector_bits)
    if arch == "riscv64":
        return _riscv64_order(features, x_type, vector_bits)
    if arch == "wasm32":
        return "wasm-simd128" if "simd128" in features else "generic"    # no FMA in wasm: never contracted
    return None


def _riscv64_order(features: frozenset[str], x_type: str, vector_bits: int | None) -> str | None:
    """riscv quants.c: with __riscv_v each vec_dot dispatches on __riscv_vlenb() to a body for VLEN 128, 256, 512 or
    1024 (QEMU takes those); without V the _generic runs, contracted (RV64GC has fmadd.s, clang and GCC contract
    by default)."""
    if "v" not in features:
        return "generic-fma" if x_type in GENERIC else None
    if vector_bits in (128, 256, 512, 1024):
        name = f"rvv-vl{vector_bits}"
        return name if x_type in ORDERS[name].steps else None
    return None


# arm quants.c: the types with an __ARM_FEATURE_SVE path (L391 q4_0, L1232 q8_0, L1697 q2_K, L2034 q3_K, L2709
# q4_K, L3344 q6_K), taken before the NEON one
SVE_TYPES = frozenset({"q4_0", "q8_0", "q2_K", "q3_K", "q4_K", "q6_K"})


def _aarch64_order(features: frozenset[str], x_type: str, vector_bits: int | None) -> str | None:
    """arm quants.c: the __ARM_FEATURE_SVE paths come first (their vector length: vector_bits); the
    __ARM_FEATURE_MATMUL_INT8 (i8mm) ones only serve nrc == 2 (L316, L610, L1170, L2361, L2570, L2985, L3175), so
    a one-row vec_dot runs NEON. AArch64 always has FMA and clang (measured, zig cc) contracts by default, so the
    contracted orders apply (a -ffp-contract=off build takes the -nofma twins). dotprod changes ggml_vdotq_s32's
    lane grouping."""
    if "sve" in features and x_type in SVE_TYPES:
        ok = "asimddp" in features and vector_bits in (128, 256, 512)
        return f"sve-vl{vector_bits}" if ok else None          # SVE without dotprod: no ggml variant
    return "neon-dotprod" if "asimddp" in features else "neon"


# The files whose code the orders model, by the first 16 hex digits of their SHA-256: ggml-org/ggml @d99724f
# src/ggml-cpu/arch/<folder>/quants.c and src/ggml-cpu/quants.c ('generic': the _generic twins and the generics
# arch-fallback.h renames). A checkout whose file differs may have changed an order: its kernels claim the bound,
# and their named order is a probe (lowp.conformance.libraries.ggml).
MODELLED_FILES = {"x86": "3c489fdc77e3ab48", "arm": "9fccd3897db24c9d", "riscv": "acf089ff8b39c1ee",
                  "wasm": "defc3f28aa882d52", "generic": "a61f1011e49d05b5"}


# The orders a clang build of the same x86 flags takes (order_for names GCC's: lowp builds x86 natively with the
# host cc, and GCC contracts separate multiply and add intrinsics where clang does not)
CLANG_TWIN = {"avx2": "avx2-clang", "avx-fma": "avx-fma-clang"}


def _x86_order(features: frozenset[str], x_type: str) -> str | None:
    """x86 quants.c chooses at compile time (`features`: what the build enables): __AVX2__ first, then __AVX__,
    then __SSSE3__ (q1_0 L657 and q4_0 L770 only), else the generic statements (an #else, or the scalar loop that
    takes every block; arch-fallback.h L86 renames q2_0's _generic: x86 has none). Every GGML_CPU_ALL_VARIANTS
    flag set with AVX2 has FMA (src/CMakeLists.txt L492-576); with -mfma GCC contracts the generic statements
    too. The names are GCC's; CLANG_TWIN gives a clang build's."""
    generic = "generic-fma" if "fma" in features else "generic"
    if "avx2" in features:
        if "fma" not in features:
            return None                 # _mm256_fmadd_ps needs -mfma: no such build
        return "avx2"
    if "avx" in features:
        return "avx-fma" if "fma" in features else "avx"
    if "ssse3" in features or "sse4_2" in features:
        return "ssse3"
    return generic
