"""Output-stage edge cases: parameters and biases solved from the stage's model so that each intermediate of a
requantizing stage sits at its saturation or wrap edge, one step past it and one step inside.

A drawn case reaches an inner edge only by luck: in XNNPACK's rndnu16, the int16 zero-point add (SQADD) saturates
only when the pre-shifted value is at int16's top, the 15-bit multiplier is within zp of 2^15 and the zero point is
at least 32768 - (that value * multiplier) >> 15; the tester's and lowp's draws hand it multipliers of 2^14 (every
power-of-two scale, the largest scale below 256) or spread over [2^14, 2^15). Here each stage's intermediates are
written as monotone functions of x = acc + bias under chosen parameters (the scale or multiplier and shift, the zero
point, the clamp), and bisection finds the x where each crosses its edge; a case of one row puts each column's x
there by its bias (bias[n] = x - acc[0, n]). The intermediates, from lowp.isa_models.requant's stages:

    fp32     v = rint(f32(x) * scale): int32 (CVTPS2DQ's INT32_MIN, FCVTNS's saturation, avxvnni's INT32_MIN + zp),
             the magic bias's exact range (|v| <= 2^22), int16 (PACKSSDW, SQXTN), v + zp in int16 (PADDSW, SQADD),
             8 bits (PACKSSWB, SQXTN), the clamp
    rndnu    y = (x * m + 2^(s-1)) >> s: the NEON pre-shift (SQSHL x << L), int32 (the scalar's narrowing), then as fp32
    rndnu16  the pre-shift (SQRSHL), int16 (SQXTN), the high half + zp in int16 (SQADD, with a multiplier of 2^15 - 1),
             8 bits, the clamp
    fixed    TFLite / gemmlowp / FBGEMM: the left shift x << shift, y + zp in int32, 8 bits, the clamp

A case is named `stage_<intermediate>` (STAGE_EDGES' keys); its id regenerates everything (the zero points, the
operands, then these parameters, from the seed), as every case's does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from lowp.isa_models.float32 import F32, f32
from lowp.isa_models.requant import OUT_RANGE, xnnpack_rndnu16_params, xnnpack_rndnu_neon_params

I16 = (-(1 << 15), (1 << 15) - 1)
I32 = (-(1 << 31), (1 << 31) - 1)
MAGIC = (-(1 << 22), 1 << 22)
PREFIX = "stage_"
LARGEST_BELOW_256 = np.nextafter(F32(256), F32(0))
# rndnu16's largest multiplier: the 24-bit mantissa 32767 * 2^9 rounds to 2^15 - 1 ((m + 2^8) >> 9)
RNDNU16_TOP_MANTISSA = 32767 << 9
EDGE_COLUMNS = 8            # columns of an edge case: the edge, one past it, one inside, per side, and a spare


@dataclass(frozen=True)
class Edge:
    """One intermediate: its parameters (`setup(rng, out_type, domain)` -> the keys it fixes), its value as a
    function of one x under them (`value(x, q)`, non-decreasing in x), and its edges (`bounds(q, out_type)` -> the
    lowest and highest value it holds; None for a side without an edge)."""
    setup: Callable
    value: Callable
    bounds: Callable


# ---- the stages' intermediates as functions of x = acc + bias ------------------------------------------------------
def _scale(q) -> F32:
    return F32(np.asarray(q["scale"]).reshape(-1)[0])


def fp32_rounded(x: int, q) -> int:
    """rint(f32(x) * scale): the value every fp32 path converts (ties to even), before any saturation."""
    return int(np.rint(np.float64(f32(np.int64(x)) * _scale(q))))


def rndnu_exact(x: int, q) -> int:
    """rndnu's (x * m + 2^(s-1)) >> s in exact integers (the scalar reference's int64, before its narrowing)."""
    bits = int(_scale(q).view(np.uint32))
    m, s = (bits & 0x7FFFFF) | 0x800000, 150 - (bits >> 23)
    return (x * m + (1 << (s - 1))) >> s


def rndnu_pre_shift(x: int, q) -> int:
    """x << L, the NEON rndnu pre-shift (SQSHL by right_pre_shift, a left shift for scales of at least 0.5) before
    it saturates."""
    return x << max(int(np.asarray(xnnpack_rndnu_neon_params(_scale(q))["right_pre_shift"]).reshape(-1)[0]), 0)


def _rndnu16(q) -> tuple[int, int]:
    p = xnnpack_rndnu16_params(_scale(q))
    return int(np.asarray(p["multiplier"]).reshape(-1)[0]), int(np.asarray(p["left_pre_shift"]).reshape(-1)[0])


def rndnu16_pre_shift(x: int, q) -> int:
    """SQRSHL by left_pre_shift before its int32 saturation: x << n, or (x + 2^(n-1)) >> n for a right shift."""
    _, shift = _rndnu16(q)
    return x << shift if shift >= 0 else (x + (1 << (-shift - 1))) >> -shift


def rndnu16_high(x: int, q) -> int:
    """The rounded high half of the int16-saturated pre-shift times the 15-bit multiplier: what SQADD adds zp to."""
    m, _ = _rndnu16(q)
    x16 = min(max(rndnu16_pre_shift(x, q), I32[0]), I32[1])
    x16 = min(max(x16, I16[0]), I16[1])
    return (x16 * m + (1 << 14)) >> 15


def fixed_exact(x: int, q) -> int:
    """x * multiplier * 2^(shift - 31), rounded half up, in exact integers (every flavour to within one step)."""
    m, s = int(np.asarray(q["multiplier"]).reshape(-1)[0]), int(np.asarray(q["shift"]).reshape(-1)[0])
    num, den = x * m * (1 << max(s, 0)), 1 << (31 - min(s, 0))
    return (2 * num + den) // (2 * den)


def fixed_pre_shift(x: int, q) -> int:
    return x << max(int(np.asarray(q["shift"]).reshape(-1)[0]), 0)


def plus_zero_point(value):
    def with_zp(x, q):
        return value(x, q) + int(q["output_zero_point"])
    return with_zp


# ---- the parameters each edge fixes ----------------------------------------------------------------------------------
def _zp_at(end: str):
    def setup(rng, out_type, domain):
        lo, hi = OUT_RANGE[out_type]
        return {"output_zero_point": {"low": lo, "high": hi, "any": int(rng.integers(lo, hi + 1)), "zero": max(lo, 0)}[end]}
    return setup


def _scale_of(kind: str, zp: str = "any"):
    """A setup fixing the scale (one of: largest below 256, one near 1, one of at least 1, rndnu16's top multiplier
    at a drawn exponent) and the zero point."""
    def setup(rng, out_type, domain):
        if kind == "largest":
            s = LARGEST_BELOW_256
        elif kind == "rndnu16_top":
            s = F32(RNDNU16_TOP_MANTISSA * 2.0 ** (int(rng.integers(-9, 1)) - 23))
        elif kind == "big":
            s = F32(rng.uniform(1, 255))
        else:
            s = F32(rng.uniform(0.25, 4))
        return {"scale": s, **_zp_at(zp)(rng, out_type, domain)}
    return setup


def _multiplier_of(kind: str, zp: str = "any"):
    """A setup fixing the fixed-point multiplier and shift: the largest multiplier at shift 0, or a drawn one with
    the largest left shift the domain allows (up to 16)."""
    def setup(rng, out_type, domain):
        if kind == "top":
            m, s = (1 << 31) - 1, 0
        else:
            m, s = int(rng.integers(1 << 30, 1 << 31)), int(min(domain.shift_hi, 16))
        return {"multiplier": m, "shift": s, **_zp_at(zp)(rng, out_type, domain)}
    return setup


def _both(lo_hi):
    return lambda q, out_type: lo_hi


def _high(lo_hi):
    return lambda q, out_type: (None, lo_hi[1])


def _low(lo_hi):
    return lambda q, out_type: (lo_hi[0], None)


def _type(q, out_type):
    return OUT_RANGE[out_type]


def _clamp(q, out_type):
    return int(q["output_min"]), int(q["output_max"])


def _tail(pre, setup_any) -> dict[str, Edge]:
    """The edges after the value a stage adds the zero point to: + zp in int16 at each end of the zero point's type,
    the narrowing to 8 bits, the clamp."""
    return {"zero_point_add_high": Edge(_with_zp(setup_any, "high"), plus_zero_point(pre), _high(I16)),
            "zero_point_add_low": Edge(_with_zp(setup_any, "low"), plus_zero_point(pre), _low(I16)),
            "8bit": Edge(setup_any, plus_zero_point(pre), _type),
            "clamp": Edge(setup_any, plus_zero_point(pre), _clamp)}


def _with_zp(setup, end):
    def both(rng, out_type, domain):
        return {**setup(rng, out_type, domain), **_zp_at(end)(rng, out_type, domain)}
    return both


STAGE_EDGES: dict[str, dict[str, Edge]] = {
    "fp32": {
        "int32": Edge(_scale_of("largest", "low"), fp32_rounded, _both(I32)),
        "magic_bias": Edge(_scale_of("largest"), fp32_rounded, _both(MAGIC)),
        "int16": Edge(_scale_of("near1", "zero"), fp32_rounded, _both(I16)),
        **_tail(fp32_rounded, _scale_of("near1"))},
    "rndnu": {
        "pre_shift": Edge(_scale_of("big", "zero"), rndnu_pre_shift, _both(I32)),
        "int32": Edge(_scale_of("largest", "low"), rndnu_exact, _both(I32)),
        "int16": Edge(_scale_of("near1", "zero"), rndnu_exact, _both(I16)),
        **_tail(rndnu_exact, _scale_of("near1"))},
    "rndnu16": {
        "pre_shift": Edge(_scale_of("big", "zero"), rndnu16_pre_shift, _both(I32)),
        "int16": Edge(_scale_of("near1", "zero"), rndnu16_pre_shift, _both(I16)),
        **_tail(rndnu16_high, _scale_of("rndnu16_top"))},
    "fixed": {
        "pre_shift": Edge(_multiplier_of("shifted", "zero"), fixed_pre_shift, _both(I32)),
        "zero_point_add_high": Edge(_multiplier_of("top", "high"), plus_zero_point(fixed_exact), _high(I32)),
        "zero_point_add_low": Edge(_multiplier_of("top", "low"), plus_zero_point(fixed_exact), _low(I32)),
        "8bit": Edge(_multiplier_of("top"), plus_zero_point(fixed_exact), _type),
        "clamp": Edge(_multiplier_of("top"), plus_zero_point(fixed_exact), _clamp)},
}


def stage_family(contract) -> str | None:
    """Which of STAGE_EDGES a contract's first accepted stage is (None: a float output, no integer edges)."""
    from lowp.conformance.contracts.output import FixedPointDomain, ScaleDomain
    first = contract.accepted[0]
    if isinstance(contract.domain, FixedPointDomain):
        return "fixed"
    if not isinstance(contract.domain, ScaleDomain):
        return None
    if first.startswith("xnnpack-rndnu16"):
        return "rndnu16"
    return "rndnu" if first.startswith(("xnnpack-rndnu", "rvv-vnclip")) else "fp32"


def edge_names(kern, domain: str) -> list[str]:
    """The `stage_<intermediate>` case names of a requantizing kernel (none for a float output, the not-claimed
    probe, or an edge the contract's domain cannot reach: a zero point below 0 for u8, a left shift where the
    domain has none, a clamp FBGEMM fixes)."""
    if not kern.quantized or kern.float_output or domain == "outside":
        return []
    from lowp.conformance.contracts.output import output_contract
    contract = output_contract(kern.output)
    family = stage_family(contract)
    if family is None:
        return []
    lo = OUT_RANGE[kern.c_type][0]
    out = []
    for name in STAGE_EDGES[family]:
        if (name == "zero_point_add_low" and lo >= 0) or (name == "clamp" and contract.domain.fbgemm_clamp) or \
                (name == "pre_shift" and family == "fixed" and contract.domain.shift_hi <= 0):
            continue
        out.append(PREFIX + name)
    return out


def edge_of(name: str) -> str | None:
    return name.removeprefix(PREFIX) if name.startswith(PREFIX) else None


# ---- solving for x -------------------------------------------------------------------------------------------------
def first_at_least(value, T: int, lo: int, hi: int) -> int:
    """The smallest x in [lo, hi] with value(x) >= T (value non-decreasing), hi + 1 where there is none."""
    if value(hi) < T:
        return hi + 1
    if value(lo) >= T:
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if value(mid) >= T else (mid, hi)
    return hi


def edge_xs(value, bounds, lo: int, hi: int) -> list[int]:
    """x values at the edges: per side, the last x whose value the intermediate holds, the first past it, one more
    step inside and one more outside; within [lo, hi]."""
    low, high = bounds
    out = []
    if high is not None:
        past = first_at_least(value, high + 1, lo, hi)
        out += [past - 1, past, past - 2, past + 1]
    if low is not None:
        at = first_at_least(value, low, lo, hi)
        out += [at, at - 1, at + 1, at - 2]
    return [x for x in dict.fromkeys(out) if lo <= x <= hi]


def aim(kern, contract, q: dict, acc: np.ndarray, rng, edge: str, out_type: str) -> dict:
    """q with the parameters of `edge` (STAGE_EDGES) and each column's bias putting row 0's x = acc + bias at one of
    the edge's x values (edge_xs), in turn; a clamp drawn inside the type for the clamp's edge, the type's ends
    otherwise (FBGEMM's fixed clamp kept)."""
    family = stage_family(contract)
    e = STAGE_EDGES[family][edge]
    domain = contract.domain
    q = dict(q)
    N = len(np.atleast_1d(q["bias"]))
    for key, value in e.setup(rng, out_type, domain).items():
        q[key] = np.full(N, value, np.asarray(q[key]).dtype) if np.ndim(q.get(key)) else value
    lo, hi = OUT_RANGE[out_type]
    if getattr(domain, "fbgemm_clamp", False):
        q["output_min"], q["output_max"] = lo, hi
    else:
        inner = edge == "clamp"
        q["output_min"] = int(rng.integers(lo + 1, lo + 64)) if inner else lo
        q["output_max"] = int(rng.integers(hi - 63, hi)) if inner else hi
    b_lo, b_hi = getattr(domain, "bias_range", I32)
    xs = edge_xs(lambda x: e.value(x, q), e.bounds(q, out_type), b_lo, b_hi)
    if not xs:
        return q
    row = np.asarray(acc, np.int64)[0] if np.size(acc) else np.zeros(N, np.int64)
    bias = np.array([xs[j % len(xs)] for j in range(N)], np.int64) - row
    q["bias"] = np.clip(bias, b_lo, b_hi).astype(np.int32)
    return q
