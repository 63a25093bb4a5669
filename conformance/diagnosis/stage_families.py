"""Output-stage families: parametrised readings of the ways a requantizing kernel's output stage goes wrong, so
that a failing row names the bug ("xnnpack-fp32 with the float->int conversion truncating (cvttps2dq for
cvtps2dq)") instead of "no known variant". variants.py does this for the int32 accumulation; this module does it
for the step after it, on the stage of the contract the kernel claims.

A contract's accepted stages (lowp.isa_models.requant) are rebuilt here as PATHS: the same arithmetic as a
sequence of steps a kernel writes one instruction at a time (scale, round, add the zero point, narrow, clamp on the
x86, NEON and scalar-C paths; pre-shift, doubling high multiply, rounding shift for the fixed-point ones), each step
with the ways it goes wrong as a parameter (a `Bug`). tests/test_stage_families.py proves that every path without
a bug equals its stage bit for bit on the contract's draws, so a member is the stage with exactly one thing changed.

The families (FAMILIES; each names the bug and its instructions, e.g. "SQRDMULH for SQDMULH"):
    float-to-int     the conversion truncating, rounding half up or half away instead of to nearest even
    float-order      the scale's float arithmetic in another order (one rounding where the contract has two)
    doubling-high    SQRDMULH for SQDMULH, or the reverse
    rounding-shift   the rounding right shift truncating (SSHL for SRSHL), or rounding ties another way
    shift-amount     the right shift one bit short or long
    narrowing        rndnu16's pre-shifted value narrowed to int16 wrapping (XTN for SQXTN)
    zero-point       added wrapping (int16, int32, after the 8-bit narrowing), saturating at 8 bits, twice, not at
                     all, subtracted
    clamp            output_min or output_max missing, both missing, swapped, applied before the zero point is
                     added, the type's range for the parameters'
    per-channel      a per-channel value (bias, scale, multiplier, shift; qd8's per-row zero point and scale) read
                     from column 0, the neighbour, the previous column, the pair's other column (row, for per-row)

matches() names every member whose output equals C and differs from every accepted stage's output on the case
(a member that coincides with the right answer on a case is no reading of it: a correct kernel is never named).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from lowp.isa_models.fixedpoint import INT32_MAX, INT32_MIN, sat32, wrap32
from lowp.isa_models.float32 import F32, f32, fma_f32
from lowp.isa_models.requant import (OUT_RANGE, OUTPUT_STAGES, biased, xnnpack_rndnu16_params,
                                     xnnpack_rndnu_neon_params)


@dataclass(frozen=True)
class Bug:
    """One way an output stage goes wrong; None (0) is "as the path does it"."""
    convert: str | None = None     # float -> int rounding: even, trunc, half_up, half_away
    order: str | None = None       # fused (one rounding of the exact product), b_first (qd8's scales swapped)
    dhm: str | None = None         # doubling high multiply: floor (SQDMULH) or round (SQRDMULH)
    shift: str | None = None       # the right shift's rounding: up, away, trunc, even, fbgemm
    shift_by: int = 0              # the right shift off by this many bits
    zp: str | None = None          # sat16, wrap16, wrap32, wrap8, sat8, twice, none, negated
    clamp: str | None = None       # right, no_min, no_max, none, swapped, before_zp, type
    narrow: str | None = None      # rndnu16's narrowing of the pre-shifted value to int16: wrap16 (XTN for SQXTN)


# ------------------------------------------------------------------------------------------------- small steps

def _channel(q, key, N) -> np.ndarray:
    """A per-channel parameter as a (1, N) row (a scalar broadcasts), its own dtype."""
    return np.broadcast_to(np.asarray(q[key]), (N,)).reshape(1, N)


def _ints(q) -> tuple[int, int, int]:
    return int(q["output_zero_point"]), int(q["output_min"]), int(q["output_max"])


def _cast(y, out_type) -> np.ndarray:
    """A C cast to the output type: modulo 256 (the int32 the value passed through first changes nothing mod 2^8)."""
    lo = OUT_RANGE[out_type][0]
    return ((np.asarray(y, np.int64) - lo) % 256 + lo).astype(np.int8 if out_type == "s8" else np.uint8)


def _store(y, out_type) -> np.ndarray:
    return np.asarray(y, np.int64).astype(np.int8 if out_type == "s8" else np.uint8)


def _clamp(x, mode, lo, hi, tlo, thi):
    """x clamped as a kernel with the clamp bug `mode` clamps it; lo, hi the right bounds at this step, tlo, thi the
    output type's range at this step."""
    if mode == "no_min":
        return np.minimum(x, hi)
    if mode == "no_max":
        return np.maximum(x, lo)
    if mode == "none":
        return x
    if mode == "swapped":                       # max with the upper bound, then min with the lower one
        return np.minimum(np.maximum(x, hi), lo)
    if mode == "type":
        return np.minimum(np.maximum(x, tlo), thi)
    return np.minimum(np.maximum(x, lo), hi)


def _zp_times(mode) -> int:
    return {"twice": 2, "none": 0, "negated": -1}.get(mode, 1)


def _round(v, mode) -> np.ndarray:
    """float64 values rounded to integers (as float64) by `mode`."""
    if mode == "trunc":
        return np.trunc(v)
    if mode in ("half_up", "half_away"):
        a = np.abs(v) if mode == "half_away" else v
        f = np.floor(a)
        r = f + (a - f >= 0.5)
        return np.copysign(r, v) if mode == "half_away" else r
    return np.rint(v)


def _convert(v, mode, isa) -> np.ndarray:
    """float -> int32 as the ISA's conversion does it out of range: x86's integer indefinite INT32_MIN
    (CVTPS2DQ, CVTTPS2DQ), Arm's saturation (FCVTNS, FCVTZS, FCVTAS); C's lrintf and casts exact (int64)."""
    r = _round(v, mode)
    if isa == "x86":
        bad = ~np.isfinite(r) | (r < INT32_MIN) | (r > INT32_MAX)
        return np.where(bad, INT32_MIN, np.where(bad, 0.0, r).astype(np.int64))
    if isa == "arm":
        return np.clip(np.nan_to_num(r), INT32_MIN, INT32_MAX).astype(np.int64)
    return np.clip(r, -2.0 ** 62, 2.0 ** 62).astype(np.int64)


def _scaled(acc, q, bug) -> np.ndarray:
    """f32(acc + bias) * scale as float64 values: float32's product (one rounding), or with order='fused' the exact
    product (24 x 24 bits fit float64), which the rounding to an integer then rounds once."""
    x = biased(acc, q)
    s = _channel(q, "scale", x.shape[1]).astype(F32)
    if bug.order == "fused":
        return f32(x).astype(np.float64) * s.astype(np.float64)
    return (f32(x) * s).astype(np.float64)


# ---------------------------------------------------------------------------------------- float requantization

def float_c(acc, q, out_type, bug=Bug(), *, clamp_at="float"):
    """The scalar-C paths: XNNPACK's lrintf / fmagic / imagic (clamp the float to [min - zp, max - zp], round,
    + zp, an (int8_t) cast) and FBGEMM's generic one (round, + zp, clamp the int to [min, 255], & 0xFF)."""
    v = _scaled(acc, q, bug)
    zp, mn, mx = _ints(q)
    tlo, thi = OUT_RANGE[out_type]
    mode, add = bug.clamp or "right", _zp_times(bug.zp) * zp
    if clamp_at == "float":
        v = np.clip(v, mn, mx) if mode == "before_zp" else _clamp(v, mode, mn - zp, mx - zp, tlo - zp, thi - zp)
        return _cast(_convert(v, bug.convert or "even", "c") + add, out_type)
    i = _convert(v, bug.convert or "even", "c")
    y = np.clip(i, mn, mx) + add if mode == "before_zp" else _clamp(i + add, mode, mn, mx, tlo, thi)
    return _cast(y, out_type)


def _x86_tail(i, zp, out_type, mode):
    """VPACKSSDW, the zero point (VPADDSW; a bug's other add), VPACKSSWB / VPACKUSWB: int32 -> the output type."""
    tlo, thi = OUT_RANGE[out_type]
    if mode == "wrap32":                                        # VPADDD before the pack
        s = np.clip(wrap32(i + zp), -32768, 32767)
    else:
        s = np.clip(i, -32768, 32767)
        if mode == "wrap16":                                    # VPADDW
            s = (s + zp + 32768) % 65536 - 32768
        elif mode not in ("wrap8", "sat8"):
            for _ in range(abs(_zp_times(mode))):               # VPADDSW (twice), VPSUBSW, none
                s = np.clip(s + np.sign(_zp_times(mode)) * zp, -32768, 32767)
    o = np.clip(s, tlo, thi)
    if mode == "wrap8":                                         # VPADDB after the pack
        return np.asarray(_cast(o + zp, out_type), np.int64)
    if mode == "sat8":                                          # VPADDSB / VPADDUSB after the pack
        return np.clip(o + zp, tlo, thi)
    return o


def float_x86(acc, q, out_type, bug=Bug(), *, minps=True):
    """XNNPACK's SSE/AVX2/AVX-512 fp32 path (VMINPS with max - zp, VCVTPS2DQ, VPACKSSDW, VPADDSW zp, VPACKSSWB,
    VPMAXSB min) and FBGEMM's AVX2 one (no VMINPS: the upper clamp is the pack's, output_max being 255)."""
    v = _scaled(acc, q, bug)
    zp, mn, mx = _ints(q)
    tlo, thi = OUT_RANGE[out_type]
    mode = bug.clamp or "right"
    top = {"no_max": None, "none": None, "swapped": mn - zp, "before_zp": mx, "type": thi - zp}.get(mode, mx - zp)
    if minps and top is not None:
        v = np.minimum(v, top)
    o = _x86_tail(_convert(v, bug.convert or "even", "x86"), zp, out_type, bug.zp or "sat16")
    bottom = {"no_min": None, "none": None, "swapped": mx, "type": tlo}.get(mode, mn)
    return _store(o if bottom is None else np.maximum(o, bottom), out_type)


def _neon_tail(i, q, out_type, bug):
    """SQXTN to int16, SQADD zp, SQXTN / SQXTUN, SMAX min, SMIN max (XNNPACK's NEON fp32 and rndnu tails)."""
    zp, mn, mx = _ints(q)
    tlo, thi = OUT_RANGE[out_type]
    mode, zmode = bug.clamp or "right", bug.zp or "sat16"
    s = np.clip(wrap32(i + zp) if zmode == "wrap32" else i, -32768, 32767)     # ADD .4S before SQXTN
    if mode == "before_zp":                                     # SMAX / SMIN on the int16 values, before SQADD
        s = np.clip(s, mn, mx)
    if zmode == "wrap32":
        pass
    elif zmode == "wrap16":                                     # ADD .8H
        s = (s + zp + 32768) % 65536 - 32768
    elif zmode not in ("wrap8", "sat8"):
        for _ in range(abs(_zp_times(zmode))):                  # SQADD (twice), SQSUB, none
            s = np.clip(s + np.sign(_zp_times(zmode)) * zp, -32768, 32767)
    o = np.clip(s, tlo, thi)
    if zmode == "wrap8":                                        # ADD .16B after the narrowing
        o = np.asarray(_cast(o + zp, out_type), np.int64)
    elif zmode == "sat8":                                       # SQADD .16B
        o = np.clip(o + zp, tlo, thi)
    if mode != "before_zp":
        o = _clamp(o, mode, mn, mx, tlo, thi)
    return _store(o, out_type)


def float_arm(acc, q, out_type, bug=Bug()):
    """XNNPACK's NEONv8 fp32 path: FMUL, FCVTNS (saturating), then the NEON tail."""
    return _neon_tail(_convert(_scaled(acc, q, bug), bug.convert or "even", "arm"), q, out_type, bug)


# ----------------------------------------------------------------------------------- fixed-point requantization
# A fixed-point stage is x = acc + bias, h = x * m / 2^e1 rounded down (SQDMULH after a left pre-shift by 31 - e1)
# or up at the tie (SQRDMULH, SRDHM), then a rounding right shift by e2. A split is (m, e1, e2) per channel.

def split_tflite_single(q, N):
    """ruy's NEON split of single rounding: SSHL by max(shift + 1, 0), SQDMULH, SRSHL by max(-shift, 1)."""
    m, s = _channel(q, "multiplier", N).astype(np.int64), _channel(q, "shift", N).astype(np.int64)
    return m, 31 - np.maximum(s + 1, 0), np.maximum(-s, 1)


def split_tflite_double(q, N):
    """TFLite's and gemmlowp's double rounding: SRDHM(x << max(shift, 0), m), RDBPOT by max(-shift, 0)."""
    m, s = _channel(q, "multiplier", N).astype(np.int64), _channel(q, "shift", N).astype(np.int64)
    return m, 31 - np.maximum(s, 0), np.maximum(-s, 0)


def split_rndnu(q, N):
    """XNNPACK's rndnu_neon params from the float scale: SQSHL by right_pre_shift, SQDMULH by the Q31 mantissa,
    SRSHL by -right_post_shift."""
    p = xnnpack_rndnu_neon_params(_channel(q, "scale", N)[0].astype(F32))
    return (np.asarray(p["multiplier"], np.int64).reshape(1, N), 31 - np.asarray(p["right_pre_shift"]).reshape(1, N),
            -np.asarray(p["right_post_shift"], np.int64).reshape(1, N))


def split_fbgemm(q, N):
    """FBGEMM's requantize_u8acc32_ref: one int64 product, one shift by C_right_shift = 31 - shift."""
    m, s = _channel(q, "multiplier", N).astype(np.int64), _channel(q, "shift", N).astype(np.int64)
    return m, np.zeros_like(s), 31 - s


def _rshift(h, R, mode):
    """h / 2^R, 0 <= R <= 63, rounded by `mode`: up (SRSHL), away (RDBPOT), trunc (SSHL / ASR), even, fbgemm (a nudge of
    1 << max(0, R - 1): FBGEMM's reference adds 1 even at R = 0)."""
    if np.any(R < 0) or np.any(R > 63):
        raise ValueError("a right shift outside [0, 63]")
    if mode == "trunc":
        return h >> R
    if mode == "fbgemm":
        return (h + (np.int64(1) << np.maximum(R - 1, 0))) >> R
    half = np.where(R > 0, np.int64(1) << np.maximum(R - 1, 0), 0)
    if mode == "up":
        return (h + half) >> R
    mask = (np.int64(1) << R) - 1
    low, down = h & mask, h >> R
    if mode == "away":                                          # gemmlowp's RoundingDivideByPOT
        return down + (low > (mask >> 1) + (h < 0))
    return down + ((low > half) | ((low == half) & (down & 1 == 1))) * (R > 0)      # even


def fixed(acc, q, out_type, bug=Bug(), *, split, pre, dhm, shift, narrow, tail):
    """x = wrap32(acc + bias); h = x * m / 2^e1 by the doubling high multiply (pre 'exact': from the exact int64
    product; 'sat' / 'wrap': of x shifted left by 31 - e1 with SQSHL / SSHL, as NEON does); r = h / 2^e2 by the
    rounding shift; narrowed ('wrap32': an int64 -> int32 cast) and handed to the tail."""
    x = biased(acc, q)
    m, e1, e2 = split(q, x.shape[1])
    rounding = (bug.dhm or dhm) == "round"
    if pre == "exact":
        p = x * m
        h = (p + np.where(rounding & (e1 > 0), np.int64(1) << np.maximum(e1 - 1, 0), 0)) >> e1
    else:
        t = x << (31 - e1)
        t = sat32(t) if pre == "sat" else wrap32(t)
        h = (t * m + (1 << 30 if rounding else 0)) >> 31
    r = _rshift(h, e2 + bug.shift_by, bug.shift or shift)
    return TAILS[tail](wrap32(r) if narrow == "wrap32" else r, q, out_type, bug)


def _xnn_tail(r, q, out_type, bug):
    """XNNPACK's scalar rndnu: clamp to [min - zp, max - zp], + zp, an (int8_t) cast."""
    zp, mn, mx = _ints(q)
    tlo, thi = OUT_RANGE[out_type]
    mode, add = bug.clamp or "right", _zp_times(bug.zp) * zp
    y = np.clip(r, mn, mx) if mode == "before_zp" else _clamp(r, mode, mn - zp, mx - zp, tlo - zp, thi - zp)
    return _cast(y + add, out_type)


def _int_tail(r, q, out_type, bug, wrap=True):
    """TFLite's and gemmlowp's: + zp in int32 (wrapping), clamp to [min, max], a cast; FBGEMM's (wrap=False):
    the same in int64, & 0xFF."""
    zp, mn, mx = _ints(q)
    tlo, thi = OUT_RANGE[out_type]
    mode, add = bug.clamp or "right", _zp_times(bug.zp) * zp
    if mode == "before_zp":
        return _cast(np.clip(r, mn, mx) + add, out_type)
    y = wrap32(r + add) if wrap else r + add
    return _cast(_clamp(y, mode, mn, mx, tlo, thi), out_type)


def rndnu16(acc, q, out_type, bug=Bug()):
    """XNNPACK's rndnu16 (qu8) one instruction at a time: SQRSHL by left_pre_shift (a saturating left shift, or for
    a negative count a right shift rounding ties up), SQXTN to int16, SQRDMULH by the 15-bit multiplier, then the
    NEON tail (SQADD zp, SQXTUN, UMAX, UMIN); requant.xnnpack_rndnu16 computes the same in one piece."""
    x = biased(acc, q)
    p = xnnpack_rndnu16_params(_channel(q, "scale", x.shape[1]).astype(F32))
    count = p["left_pre_shift"] - bug.shift_by                  # shift_by > 0: one bit further right
    right = _rshift(x, np.maximum(-count, 0), bug.shift or "up")
    pre = np.where(count >= 0, sat32(x << np.maximum(count, 0)), right)
    x16 = (pre + 32768) % 65536 - 32768 if bug.narrow == "wrap16" else np.clip(pre, -32768, 32767)
    high = (x16 * p["multiplier"] + (0 if bug.dhm == "floor" else 1 << 14)) >> 15
    return _neon_tail(high, q, out_type, bug)


TAILS = {"xnnpack": _xnn_tail, "int": _int_tail, "fbgemm": lambda r, q, t, b: _int_tail(r, q, t, b, wrap=False),
         "neon": _neon_tail}


# ------------------------------------------------------------------------------------------- qd8: float output

def qd8(acc, q, out_type, bug=Bug(), *, fused=True):
    """XNNPACK qd8-f32: f32(acc) * inv_scale[m] (one rounding), then FMA (or multiply, add) with b_scale[n] and
    bias[n], MAXPS min, MINPS max; order='b_first': the filter scale first, the row's inv_scale in the FMA."""
    a = wrap32(np.asarray(acc, np.int64))
    M, N = a.shape
    inv = np.broadcast_to(np.asarray(q["a_inv_scale"], F32), (M,)).reshape(M, 1)
    b, bias = _channel(q, "b_scale", N).astype(F32), _channel(q, "bias", N).astype(F32)
    first, second = (b, inv) if bug.order == "b_first" else (inv, b)
    with np.errstate(over="ignore", invalid="ignore"):
        v = f32(a) * first
        y = fma_f32(v, np.broadcast_to(second, v.shape), np.broadcast_to(bias, v.shape)) if fused else v * second + bias
        lo, hi = F32(q["output_min"]), F32(q["output_max"])
        return _clamp(y, bug.clamp or "right", lo, hi, F32(-np.inf), F32(np.inf)).astype(F32)


# --------------------------------------------------------------------------------------------------- the paths

CLAMPS = ("no_min", "no_max", "none", "swapped", "before_zp", "type")
ZPS_C = ("twice", "none", "negated")
ZPS_SIMD = ("wrap16", "wrap32", "wrap8", "sat8") + ZPS_C
CONVERTS = ("trunc", "half_up", "half_away")
SHIFTS = ("up", "away", "trunc", "even")
COLUMN_MAPS = ("first", "next", "prev", "pairs")
ROW_MAPS = ("first", "next", "prev")


@dataclass(frozen=True, eq=False)         # a path is itself: compared and hashed by identity
class Path:
    """One way a kernel computes a stage: `run(acc, q, out_type, bug)`, the ISA its instructions are named in, and
    the members it has: for each Bug field, the values that are a bug on this path."""
    name: str
    isa: str                       # x86, arm, c
    run: Callable
    members: dict = field(default_factory=dict)
    channels: tuple = ()           # per-channel parameters (one per column of C)
    rows: tuple = ()               # per-row parameters (one per row of A)


def _path(name, isa, run, channels, **members):
    return Path(name, isa, run, {k: tuple(v) for k, v in members.items()}, channels)


def _fixed_path(name, isa, channels, members, **how):
    """A fixed-point path: `fixed` with its steps (`how`); its members, less the doubling high multiply and the
    rounding shift it has itself."""
    def run(acc, q, out_type, bug=Bug()):
        return fixed(acc, q, out_type, bug, **how)
    members = {**members, "dhm": tuple(v for v in members.get("dhm", ()) if v != how["dhm"]),
               "shift": tuple(v for v in members.get("shift", ()) if v != how["shift"])}
    return _path(name, isa, run, channels, **{k: v for k, v in members.items() if v})


_FLOAT_CH, _FIXED_CH = ("bias", "scale"), ("bias", "multiplier", "shift")
_C = _path("scalar", "c", float_c, _FLOAT_CH, convert=CONVERTS, order=("fused",), zp=ZPS_C, clamp=CLAMPS)
_X86 = _path("x86", "x86", float_x86, _FLOAT_CH, convert=CONVERTS, zp=ZPS_SIMD, clamp=CLAMPS)
_ARM = _path("neon", "arm", float_arm, _FLOAT_CH, convert=CONVERTS, zp=ZPS_SIMD,
             clamp=tuple(c for c in CLAMPS if c != "type"))        # SQXTN already clamps to the type
_FIXED = dict(dhm=("floor", "round"), shift=SHIFTS, shift_by=(-1, 1), zp=ZPS_C, clamp=CLAMPS)
# SRSHL's result is at most 2^30 in magnitude (post-shift >= 1): adding the zero point in int32 never wraps there
_NEON_FIXED = dict(_FIXED, zp=tuple(z for z in ZPS_SIMD if z != "wrap32"), clamp=_ARM.members["clamp"])
_RNDNU = dict(split=split_rndnu, pre="exact", dhm="floor", shift="up", tail="xnnpack")

# rndnu16's pre-shift rounds ties up (SRSHL's rounding), its high half rounds (SQRDMULH); the zero point is added
# in int16 after the narrowing, so no int32 add exists to wrap
_RNDNU16 = _path("neon", "arm", rndnu16, _FLOAT_CH, shift=("trunc", "away", "even"), shift_by=(-1, 1),
                 dhm=("floor",), narrow=("wrap16",), zp=_NEON_FIXED["zp"], clamp=_ARM.members["clamp"])

# Each accepted stage of a contract, as the path(s) that compute it (a stage missing here has no families yet).
PATHS: dict[str, tuple[Path, ...]] = {
    "xnnpack-fp32-lrintf": (_C,), "xnnpack-fp32-fmagic": (_C,), "xnnpack-fp32-imagic": (_C,),
    "xnnpack-fp32-x86": (_X86,), "xnnpack-fp32-neonv8": (_ARM,),
    "xnnpack-rndnu": (_fixed_path("scalar", "c", _FLOAT_CH, _FIXED, **_RNDNU, narrow="exact"),),
    "xnnpack-rndnu-scalar": (_fixed_path("scalar", "c", _FLOAT_CH, _FIXED, **_RNDNU, narrow="wrap32"),),
    "xnnpack-rndnu16": (_RNDNU16,),
    "xnnpack-rndnu-neon": (_fixed_path("neon", "arm", _FLOAT_CH, _NEON_FIXED, split=split_rndnu, pre="sat",
                                       dhm="floor", shift="up", narrow="exact", tail="neon"),),
    "tflite-S": (_fixed_path("scalar", "c", _FIXED_CH, _FIXED, split=split_tflite_single, pre="exact", dhm="floor",
                             shift="up", narrow="wrap32", tail="int"),),
    "tflite-G": (_fixed_path("scalar", "c", _FIXED_CH, _FIXED, split=split_tflite_double, pre="wrap", dhm="round",
                             shift="away", narrow="exact", tail="int"),),
    "gemmlowp-fixedpoint": (_fixed_path("scalar", "c", _FIXED_CH, _FIXED, split=split_tflite_double, pre="sat",
                                        dhm="round", shift="away", narrow="exact", tail="int"),),
    "fbgemm-float-generic": (_path("scalar", "c", lambda a, q, t, bug=Bug(): float_c(a, q, t, bug, clamp_at="int"),
                                   _FLOAT_CH, convert=CONVERTS, zp=ZPS_C, clamp=("no_min", "before_zp")),),
    "fbgemm-float-avx2": (_path("x86", "x86", lambda a, q, t, bug=Bug(): float_x86(a, q, t, bug, minps=False),
                                _FLOAT_CH, convert=CONVERTS, zp=ZPS_SIMD, clamp=("no_min",)),),
    "fbgemm-fixed": (_fixed_path("scalar", "c", ("bias",), dict(shift=("up", "trunc", "even"), shift_by=(-1, 1),
                                                                 zp=ZPS_C, clamp=("no_min", "before_zp")),
                                 split=split_fbgemm, pre="exact", dhm="floor", shift="fbgemm", narrow="exact",
                                 tail="fbgemm"),),
    "qd8-f32-fma": (replace(_path("fma", "x86", qd8, ("bias", "b_scale"), order=("b_first",),
                                  clamp=("no_min", "no_max", "none", "swapped")),
                            rows=("a_inv_scale", "a_zero_point")),),
    "qd8-f32-unfused": (replace(_path("scalar", "c", lambda a, q, t, bug=Bug(): qd8(a, q, t, bug, fused=False),
                                      ("bias", "b_scale"), order=("b_first",),
                                      clamp=("no_min", "no_max", "none", "swapped")),
                                rows=("a_inv_scale", "a_zero_point")),),
}


# ------------------------------------------------------------------------------------------ the families' words

@dataclass(frozen=True)
class StageFamily:
    """A family of output-stage bugs: one Bug field, its values' words and, per ISA, the instructions they are."""
    name: str
    knob: str
    words: dict                    # value -> (what is wrong, {isa or "any": the instructions})

    def describe(self, value, isa: str) -> str:
        what, instructions = self.words[value]
        shown = instructions.get(isa) or instructions.get("any")
        return f"{what} ({shown})" if shown else what


FAMILIES: tuple[StageFamily, ...] = (
    StageFamily("float-to-int", "convert", {
        "trunc": ("the float->int conversion truncating", {
            "x86": "cvttps2dq for cvtps2dq", "arm": "FCVTZS for FCVTNS", "c": "an (int32_t) cast for lrintf"}),
        "half_up": ("the float->int conversion rounding half up", {
            "x86": "floor(v + 0.5) for cvtps2dq", "arm": "FRINTM of v + 0.5 for FCVTNS", "c": "floorf(v + 0.5f) for lrintf"}),
        "half_away": ("the float->int conversion rounding half away from zero", {
            "x86": "a round-half-away for cvtps2dq", "arm": "FCVTAS for FCVTNS", "c": "lroundf for lrintf"}),
    }),
    StageFamily("float-order", "order", {
        "fused": ("the scale's multiply fused with the rounding (one rounding of the exact product)", {
            "any": "an FMA of the magic bias, -ffp-contract=fast, for a multiply then an add"}),
        "b_first": ("the filter scale applied before the row's inv_scale", {"any": "the two scales' operands swapped"}),
    }),
    StageFamily("doubling-high", "dhm", {
        "round": ("the doubling high multiply rounding", {"any": "SQRDMULH for SQDMULH"}),
        "floor": ("the doubling high multiply not rounding", {"any": "SQDMULH for SQRDMULH"}),
    }),
    StageFamily("rounding-shift", "shift", {
        "trunc": ("the right shift not rounding", {"arm": "SSHL for SRSHL", "c": "a plain >> without the rounding term",
                                                   "x86": "VPSRAD without the rounding term"}),
        "up": ("the rounding right shift's ties rounded up, not away from zero", {"any": "SRSHL without RDBPOT's fixup"}),
        "away": ("the rounding right shift's ties rounded away from zero, not up", {"any": "RDBPOT for SRSHL"}),
        "even": ("the rounding right shift's ties rounded to even", {}),
    }),
    StageFamily("shift-amount", "shift_by", {
        -1: ("the right shift one bit short", {}), 1: ("the right shift one bit too far", {}),
    }),
    StageFamily("narrowing", "narrow", {
        "wrap16": ("the pre-shifted value narrowed to int16 wrapping", {"arm": "XTN for SQXTN",
                                                                       "c": "an (int16_t) cast for a saturation"}),
    }),
    StageFamily("zero-point", "zp", {
        "wrap16": ("the zero point added wrapping in int16", {"x86": "VPADDW for VPADDSW", "arm": "ADD for SQADD"}),
        "wrap32": ("the zero point added wrapping in int32, before the narrowing", {
            "x86": "VPADDD before VPACKSSDW for VPADDSW after it", "arm": "ADD .4S before SQXTN for SQADD after it"}),
        "wrap8": ("the zero point added wrapping after the narrowing to 8 bits", {
            "x86": "VPADDB after VPACKSSWB", "arm": "ADD .16B after SQXTN"}),
        "sat8": ("the zero point added saturating after the narrowing to 8 bits", {
            "x86": "VPADDSB after VPACKSSWB", "arm": "SQADD .16B after SQXTN"}),
        "twice": ("the zero point added twice", {}),
        "none": ("the zero point not added", {}),
        "negated": ("the zero point subtracted", {"x86": "VPSUBSW for VPADDSW", "arm": "SQSUB for SQADD"}),
    }),
    StageFamily("clamp", "clamp", {
        "no_min": ("the output_min clamp missing", {"x86": "no VPMAXSB", "arm": "no SMAX", "c": "no max with output_min"}),
        "no_max": ("the output_max clamp missing", {"x86": "no VMINPS", "arm": "no SMIN", "c": "no min with output_max"}),
        "none": ("both clamps missing", {}),
        "swapped": ("output_min and output_max swapped", {}),
        "before_zp": ("the clamp applied before the zero point is added (to [min, max], not [min - zp, max - zp])", {}),
        "type": ("clamped to the type's range instead of [output_min, output_max]", {}),
    }),
)
_BY_KNOB = {f.knob: f for f in FAMILIES}
CHANNEL_FAMILY = "per-channel"
ZERO_POINTS = ("a_zero_point", "b_zero_point")
_MAP_WORDS = {"first": "column 0 for every column", "next": "the next column (n + 1)",
              "prev": "the previous column (n - 1)", "pairs": "the other column of its pair (n xor 1)"}


# --------------------------------------------------------------------------------------------------- matching

def _mapped(n: int, mapping: str, block: int | None = None, rows: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(index each of n positions reads, whether the result there is determined). An index past the ends reads
    something else entirely (the next array, the weights), so that position tells nothing. With `block`, XNNPACK's
    ABI: "column 0" (row 0) is the call's, the first of its block of nr columns (mr rows); each block of columns
    carries its own biases and scales, zero past N: an index in the block but past N reads the padding's 0 (index
    n: the caller appends it), one in another block tells nothing; the rows' parameters are one array, with copies
    of the last row past M."""
    i = np.arange(n)
    first = i // block * block if block else np.zeros_like(i)
    src = {"first": first, "next": i + 1, "prev": i - 1, "pairs": i ^ 1}[mapping]
    if block and rows:
        known, src = src >= 0, np.minimum(src, n - 1)
    elif block:
        known, src = (src >= 0) & (src // block == i // block), np.minimum(src, n)
    else:
        known = (src >= 0) & (src < n)
    return np.where(known, src, i), known


def _same(x, y, known) -> bool:
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    if x.dtype.kind == "f":
        x, y = x.view(f"u{x.dtype.itemsize}"), y.view(f"u{y.dtype.itemsize}")
    return bool(np.array_equal(x[known], y[known]))


def _members(path: Path, q: dict, blocks):
    """(key, words, Bug, per-column or per-row remap) of every member of one path."""
    for knob, values in path.members.items():
        for value in values:
            family = _BY_KNOB[knob]
            yield (f"{family.name}:{value}", family.describe(value, path.isa), Bug(**{knob: value}), None)
    for axis, keys, maps in ((1, path.channels, COLUMN_MAPS), (0, path.rows, ROW_MAPS)):
        for key in keys:
            if np.ndim(q.get(key)) != 1:
                continue
            for mapping in maps:
                where = _MAP_WORDS[mapping] if axis else _MAP_WORDS[mapping].replace("column", "row")
                if blocks and mapping == "first":
                    where += f" of its block of {blocks[axis]}"
                yield (f"{CHANNEL_FAMILY}:{key}:{mapping}", f"{key} read from {where}", Bug(), (axis, key, mapping))


def _remapped(q: dict, axis: int, key: str, mapping: str, B, blocks) -> tuple[dict, np.ndarray, np.ndarray]:
    """q with `key` read through the mapping, and where the result is determined. XNNPACK's packed int32 (blocks
    given) is not the bias but bias - a_zp * colsum(B) + K * a_zp * b_zp (xnnpack.pack_weights): a kernel reading
    another column's gets that column's zero-point terms too, which the effective bias carries."""
    values = np.asarray(q[key])
    block = blocks[axis] if blocks else None
    src, ok = _mapped(len(values), mapping, block, rows=axis == 0)
    packed = key == "bias" and blocks and values.dtype.kind == "i" and np.ndim(q.get("a_zero_point", 0)) == 0
    if packed:
        izp, kzp = int(q.get("a_zero_point", 0)), int(q.get("b_zero_point", 0))
        P = values.astype(np.int64) - izp * B.astype(np.int64).sum(axis=0) + B.shape[0] * izp * kzp
        moved = values + (np.append(P, 0)[src] - P)                     # index n: the packing's zero padding
        values = wrap32(moved).astype(values.dtype)
    else:
        values = np.append(values, np.zeros(1, values.dtype))[src]
    # Where another real column (row) is read: a member is named only if it differs from the contract there, not
    # just where it reads the padding's 0 (a 1-column counterexample whose scale "is read from column n + 1" is any
    # bug that gives 0: naming it would send its reader after the wrong bug).
    real = ok & (src < len(values)) & (src != np.arange(len(values)))
    return {**q, key: values}, ok, real


def accepted_outputs(stages, accs, q: dict, out_type: str) -> list[np.ndarray]:
    """Each of `stages` (names) on each accumulator of `accs`, in that order, leaving out those undefined there."""
    out = []
    for acc in accs:
        for stage in stages:
            try:
                out.append(OUTPUT_STAGES[stage].compute(acc, q, out_type))
            except (ArithmeticError, ValueError):
                continue
    return out


def matches(contract_name: str, A, B, q: dict, C, out_type: str, *, acc_variants, isa: str = "c",
            blocks: tuple[int, int] | None = None, keys=None, rights=None) -> list[tuple[str, str]]:
    """(key, name) of every family member C equals on the contract's paths, each differing from every accepted
    stage's output on this case; names say "<contract> with <the bug> (<its instructions>)", in the words of the
    path of the kernel's ISA (x86, arm, c) where several paths give C. acc_variants: the accumulation contract's
    accepted variants (the stage's input is their product with the zero points); blocks: (mr, nr) of a kernel
    called per mr rows whose per-channel values are packed per block of nr columns, zero past N (XNNPACK's ABI),
    None for plain arrays; keys: only these members (a shrink keeping a reading asks about its own); rights: the
    accepted outputs (each accepted stage on each accepted accumulator, those defined), if the caller has them."""
    from lowp.conformance.contracts.output import accumulators, output_contract
    contract = output_contract(contract_name)
    paths = list(dict.fromkeys(p for s in contract.accepted for p in PATHS.get(s, ())))
    if not paths:
        return []
    paths.sort(key=lambda p: (p.isa != isa, p.isa != "c"))
    C = np.asarray(C)
    accs = [accumulators(v, A, B, q) for v in acc_variants]
    rights = accepted_outputs(contract.accepted, accs, q, out_type) if rights is None else rights
    found: dict[str, str] = {}
    for path in paths:
        for key, text, bug, remap in _members(path, q, blocks):
            if key in found or (keys is not None and key not in keys):
                continue
            known = evidence = np.ones(C.shape, bool)
            q2, inputs = q, accs
            if remap is not None:
                q2, ok, real = _remapped(q, *remap, B, blocks)
                along = (1, -1) if remap[0] else (-1, 1)
                known = np.broadcast_to(ok.reshape(along), C.shape)
                evidence = np.broadcast_to(real.reshape(along), C.shape)
                if remap[1] in ZERO_POINTS:             # the only parameters the accumulator itself depends on
                    inputs = [accumulators(v, A, B, q2) for v in acc_variants]
            if not known.any():
                continue
            for acc in inputs:
                try:
                    out = path.run(acc, q2, out_type, bug)
                except (ArithmeticError, ValueError):
                    continue
                if _same(out, C, known) and not any(_same(out, r, evidence) for r in rights):
                    found[key] = f"{contract_name} with {text}"
                    break
    return list(found.items())


def undetermined(contract_name: str, B, q: dict, keys, *, blocks: tuple[int, int] | None = None) -> set[str]:
    """The keys of `keys` (per-channel and per-row readings) that a case cannot show: each of its columns (rows)
    would read another column's value only past the ends or in XNNPACK's zero padding (a 1-column case and "bias
    read from the previous column"). matches() never names them there, so such a case is no evidence against them;
    every other reading it shows or refutes."""
    from lowp.conformance.contracts.output import output_contract
    contract = output_contract(contract_name)
    paths = list(dict.fromkeys(p for s in contract.accepted for p in PATHS.get(s, ())))
    out = set()
    for path in paths:
        for key, _, _, remap in _members(path, q, blocks):
            if remap is not None and key in keys and not _remapped(q, *remap, B, blocks)[2].any():
                out.add(key)
    return out
