"""gemmlowp / ruy / TFLite fixed-point arithmetic, bit for bit: the primitives every integer requantization of
these libraries is made of, and MultiplyByQuantizedMultiplier in each rounding flavour the libraries ship.

Pure numpy, vectorized over any broadcastable shapes. Every value is carried exactly in int64 and only then
narrowed where the C++ narrows. Citations are to docs/research/gemmlowp-fixedpoint.md and
docs/research/tflite-ruy-rounding.md (section given) and through them to the repositories and lines they cite.

Corners. Where the libraries (or the back-ends of one library) disagree, or the C++ is implementation-defined or
undefined, the function takes a parameter naming each variant. Its default, None, means "strict": if any element
hits the corner, the function raises `ImplementationDefined` (a `ContractCorner`) naming the corner, the parameter
that selects a variant and the options; off the corner the answer is unique and no choice is needed. Inputs a
library asserts against (a shift outside its range, a negative multiplier in single rounding) raise `OutOfDomain`.
`mbqm_corners` returns the corner masks instead of raising, for a runner that wants to classify, not stop.
"""
from __future__ import annotations

import math

import numpy as np

from lowp.isa_models.lanes import numpy_only

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


# ---------------------------------------------------------------------------------------------------------------
# Corners

class ContractCorner(ArithmeticError):
    """An input on which a library contract gives no single answer. `corner` names it, `where` is a boolean mask
    over the broadcast inputs (None when the corner is about a scalar parameter)."""

    def __init__(self, corner: str, message: str, where=None):
        super().__init__(f"[{corner}] {message}")
        self.corner = corner
        self.where = where


class ImplementationDefined(ContractCorner):
    """The cited implementations disagree here (or the C++ leaves it implementation-defined/undefined and real
    compilers differ from the library's own comment); pass the named parameter to choose a variant."""


class OutOfDomain(ContractCorner, ValueError):
    """An input the library asserts against (RDBPOT exponent outside 0..31, single rounding with a negative
    multiplier or a shift above 30, ...): no implementation defines a result."""


def _first(mask: np.ndarray) -> str:
    idx = np.argwhere(mask)
    return "" if idx.size == 0 else f" (first at index {tuple(int(i) for i in idx[0])})"


def flag(mask, choice, corner: str, param: str, options, what: str) -> None:
    """Raise ImplementationDefined if `mask` has a hit and the caller chose no variant (`choice is None`)."""
    mask = np.asarray(mask, bool)
    if choice is None and mask.any():
        raise ImplementationDefined(
            corner, f"{what}: {int(mask.sum())} element(s) hit it{_first(mask)}; the implementations differ, so pass "
                    f"{param}= one of {', '.join(repr(o) for o in options)}", mask)
    if choice is not None and choice not in options:
        raise ValueError(f"{param}={choice!r}: expected one of {', '.join(repr(o) for o in options)}")


def check_domain(mask, corner: str, what: str) -> None:
    mask = np.asarray(mask, bool)
    if mask.any():
        raise OutOfDomain(corner, f"{what}: {int(mask.sum())} element(s){_first(mask)}", mask)


# ---------------------------------------------------------------------------------------------------------------
# Integer helpers

def ints(x, name: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> np.ndarray:
    """An integer operand as exact int64 values, checked to lie in [lo, hi] (int32 by default). Python ints,
    integer numpy scalars and arrays are accepted; floats and bools are refused (lowp never casts silently)."""
    numpy_only(f"lowp.isa_models.fixedpoint ({name})", x, why="the gemmlowp/TFLite fixed-point reference functions "
               "are numpy only; the instruction models (SQRDMULH, SRSHL, ...) run on both backends")
    a = np.asarray(x)
    if a.dtype == object:
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in a.ravel()):
            raise ValueError(f"{name}: expected integers")
        if a.size and (min(int(v) for v in a.ravel()) < lo or max(int(v) for v in a.ravel()) > hi):
            raise ValueError(f"{name}: values outside [{lo}, {hi}]")
        return a.astype(np.int64)
    if a.dtype.kind not in "iu":
        raise ValueError(f"{name}: expected integers, got dtype {a.dtype}")
    if a.dtype == np.uint64 and a.size and int(a.max()) > hi:
        raise ValueError(f"{name}: values outside [{lo}, {hi}]")
    a = a.astype(np.int64)
    if a.size and (int(a.min()) < lo or int(a.max()) > hi):
        raise ValueError(f"{name}: values outside [{lo}, {hi}] (an int32 operand)")
    return a


def wrap32(x) -> np.ndarray:
    """Two's-complement wrap of exact integers (int64 values) to int32, as int64 values."""
    x = np.asarray(x, np.int64)
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def sat32(x) -> np.ndarray:
    return np.clip(np.asarray(x, np.int64), INT32_MIN, INT32_MAX)


def out32(x) -> np.ndarray:
    """The int32 result (a numpy int32 scalar for 0-d inputs)."""
    r = np.asarray(x, np.int64).astype(np.int32)
    return r[()] if r.ndim == 0 else r


def narrow32(v, overflow, what: str) -> np.ndarray:
    """A plain C++ int32 operation whose exact value is v: overflow is undefined behaviour (signed) that every
    compiler and SIMD path lowp knows turns into a wrap; strict mode flags it."""
    v = np.asarray(v, np.int64)
    flag((v < INT32_MIN) | (v > INT32_MAX), overflow, "int32_overflow", "overflow", ("wrap",), what)
    return wrap32(v)


# ---------------------------------------------------------------------------------------------------------------
# Primitives (gemmlowp fixedpoint/fixedpoint.h @ 16e8662; docs/research/gemmlowp-fixedpoint.md)

SRDHM_MIN_MIN = {
    "saturate": "INT32_MAX: gemmlowp scalar, NEON vqrdmulhq_s32, wasm SIMD, MSA (fixedpoint.h L337-350)",
    "sse": "INT32_MIN: gemmlowp SSE4 and AVX2 back-ends (fixedpoint_sse.h L320-356, fixedpoint_avx.h L316-352)",
}


def srdhm(a, b, *, min_min=None):
    """SaturatingRoundingDoublingHighMul(a, b), int32: floor((a*b + 2^30) / 2^31), ties toward +inf (not away
    from zero), i.e. ARM SQRDMULH. The one saturating input, a == b == INT32_MIN (true result 2^31), is
    implementation-defined across gemmlowp's own back-ends: min_min='saturate' (INT32_MAX) or 'sse' (INT32_MIN).
    gemmlowp fixedpoint/fixedpoint.h @16e8662 L337-350
    (docs/research/gemmlowp-fixedpoint.md#saturatingroundingdoublinghighmul-srdhm)."""
    a, b = ints(a, "a"), ints(b, "b")
    minmin = (a == INT32_MIN) & (b == INT32_MIN)
    flag(minmin, min_min, "srdhm_min_min", "min_min", tuple(SRDHM_MIN_MIN), "SRDHM(INT32_MIN, INT32_MIN)")
    r = (a * b + (1 << 30)) >> 31
    r = np.where(minmin, INT32_MAX if min_min == "saturate" else INT32_MIN, r)
    return out32(r)


def srdhm16(a, b, *, min_min=None):
    """The int16 SaturatingRoundingDoublingHighMul: floor((a*b + 2^14) / 2^15), INT16_MIN^2 -> INT16_MAX
    ('saturate') or INT16_MIN. gemmlowp fixedpoint/fixedpoint.h @16e8662 L352-363
    (docs/research/gemmlowp-fixedpoint.md#saturatingroundingdoublinghighmul-srdhm)."""
    a, b = ints(a, "a", -(1 << 15), (1 << 15) - 1), ints(b, "b", -(1 << 15), (1 << 15) - 1)
    minmin = (a == -(1 << 15)) & (b == -(1 << 15))
    flag(minmin, min_min, "srdhm_min_min", "min_min", tuple(SRDHM_MIN_MIN), "SRDHM16(INT16_MIN, INT16_MIN)")
    r = (a * b + (1 << 14)) >> 15
    r = np.where(minmin, (1 << 15) - 1 if min_min == "saturate" else -(1 << 15), r)
    r = np.asarray(r, np.int64).astype(np.int16)
    return r[()] if r.ndim == 0 else r


def _exponent(e, name, lo, hi):
    e = ints(e, name, -(1 << 31), (1 << 31) - 1)
    check_domain((e < lo) | (e > hi), "shift_range", f"{name} outside [{lo}, {hi}] (the library asserts it)")
    return e


def _rshift_away(x, e):
    """RDBPOT on exact int64 values, e in 0..31 (elementwise)."""
    mask = (np.int64(1) << e) - 1
    rem = x & mask
    thr = (mask >> 1) + (x < 0)
    return (x >> e) + (rem > thr)


def _rshift_up(x, e):
    """Rounding right shift with ties up, computed without overflow (ARM SRSHL/VRSHL, the 'U' second step)."""
    half = np.where(e > 0, np.int64(1) << np.maximum(e - 1, 0), 0)
    return (x + half) >> e


def rounding_divide_by_pot(x, exponent, *, ties="away"):
    """RoundingDivideByPOT(x, exponent): x / 2^exponent rounded to nearest, ties away from zero (gemmlowp since
    PR #65, commit 12c15b7, on every path; NEON's fixup + VRSHL gives the same). ties='up' is the ARM RSHL
    ground truth gemmlowp used before #65 and the second step of flavour 'U'. Exponent must be in 0..31
    (asserted), else OutOfDomain. gemmlowp fixedpoint/fixedpoint.h @16e8662 L365-379
    (docs/research/gemmlowp-fixedpoint.md#roundingdividebypot-rdbpot)."""
    x = ints(x, "x")
    e = _exponent(exponent, "exponent", 0, 31)
    if ties == "away":
        return out32(_rshift_away(x, e))
    if ties == "up":
        return out32(_rshift_up(x, e))
    raise ValueError(f"ties={ties!r}: expected 'away' or 'up'")


def saturating_rounding_multiply_by_pot(x, exponent):
    """SaturatingRoundingMultiplyByPOT<Exponent>(x): sat32(x * 2^E) for E > 0, RDBPOT(x, -E) for E < 0, x for
    E = 0; |E| <= 31. gemmlowp fixedpoint/fixedpoint.h @16e8662 L381-429
    (docs/research/gemmlowp-fixedpoint.md#saturatingroundingmultiplybypot)."""
    x = ints(x, "x")
    e = _exponent(exponent, "exponent", -31, 31)
    up = sat32(x << np.maximum(e, 0))
    down = _rshift_away(x, np.maximum(-e, 0))
    return out32(np.where(e > 0, up, down))


LEFT_SHIFT = {
    "saturate": "gemmlowp scalar ShiftLeft (computes in int64 and saturates; fixedpoint.h L125-135)",
    "wrap": "NEON vshlq_s32, SSE _mm_slli_epi32, AVX2 _mm256_sllv_epi32 (ruy x86), TFLite x * (1 << L)",
}


def shift_left(x, n, *, left_shift=None):
    """ShiftLeft(x, n), 0 <= n <= 31: where x * 2^n overflows int32, gemmlowp's scalar path saturates and its
    NEON/SSE paths (and TFLite's x * (1 << n)) wrap: left_shift='saturate' or 'wrap'; strict otherwise.
    gemmlowp fixedpoint/fixedpoint.h @16e8662 L125-135; fixedpoint_neon.h L107-125; fixedpoint_sse.h L138-141."""
    x = ints(x, "x")
    n = _exponent(n, "n", 0, 31)
    v = x << n
    flag((v < INT32_MIN) | (v > INT32_MAX), left_shift, "left_shift_overflow", "left_shift", tuple(LEFT_SHIFT),
         "x << n overflows int32")
    return out32(sat32(v) if left_shift == "saturate" else wrap32(v))


def rounding_half_sum(a, b, *, ties=None):
    """RoundingHalfSum(a, b) = (a + b) / 2 rounded to nearest. Scalar gemmlowp rounds ties away from zero
    (ties='away'); NEON vrhaddq rounds them up (ties='up'). They differ only on negative odd sums; strict there.
    gemmlowp fixedpoint/fixedpoint.h @16e8662 L236-243 (docs/research/gemmlowp-fixedpoint.md#the-other-primitives)."""
    a, b = ints(a, "a"), ints(b, "b")
    s = a + b
    flag((s < 0) & (s % 2 != 0), ties, "half_sum_negative_tie", "ties", ("away", "up"),
         "RoundingHalfSum of a negative odd sum")
    away = np.sign(s) * ((np.abs(s) + 1) // 2)
    return out32(away if ties == "away" else (s + 1) >> 1)


# ---------------------------------------------------------------------------------------------------------------
# MultiplyByQuantizedMultiplier and its flavours (docs/research/tflite-ruy-rounding.md)

FLAVOURS = {
    "G": "gemmlowp double rounding RDBPOT_away(SRDHM(x << L, m), R): ScaleInt32ByFixedPointAndExponent, "
         "QuantizeDownInt32ByFixedPoint, TFLite reference MBQM (default build), ruy reference before 2020-07",
    "U": "double rounding, ties up twice (SRDHM(x << L, m) + 2^(R-1)) >> R: TFLite NEON "
         "MultiplyByQuantizedMultiplier4Rows (double build), depthwise kUpward, ruy x86 kernels, "
         "ruy reference 2020-07..2021-02",
    "S": "single rounding (int64(x)*m + 2^(30-shift)) >> (31-shift), ties up: ruy reference since be760b6, "
         "TFLite/TFLM with TFLITE_SINGLE_ROUNDING=1, XNNPACK",
    "S_neon": "single rounding as ruy's ARM kernels and TFLite's NEON 4Rows compute it: SSHL (wrapping) by "
              "max(shift+1, 0), SQDMULH, SRSHL by min(shift, -1); equals 'S' unless that left shift overflows",
    "legacy": "gemmlowp QuantizeDownInt32ToUint8Scale since fbf7914: RDBPOT_away(x * m, -shift), m an integer "
              "(result_mult_int), shift = -result_shift",
    "legacy_up": "the same before fbf7914 and in ReferenceEightBitIntGemm / the meta fast path: "
                 "(x * m + 2^(s-1)) >> s with int32 wrap, rounding 0 when s = 0",
}


def _mbqm_parts(x, multiplier, shift, flavour):
    if flavour not in FLAVOURS:
        raise ValueError(f"flavour={flavour!r}: expected one of {', '.join(FLAVOURS)}")
    x, m = ints(x, "x"), ints(multiplier, "multiplier")
    if flavour in ("S", "S_neon"):
        s = _exponent(shift, "shift", -31, 30)
        check_domain(np.broadcast_to(m < 0, np.broadcast(x, m, s).shape), "negative_multiplier",
                     "single rounding requires multiplier >= 0 (TFLite common.cc L31-47 asserts it)")
    elif flavour in ("legacy", "legacy_up"):
        s = _exponent(shift, "shift", -31, 0)
    else:
        s = _exponent(shift, "shift", -31, 31)
    x, m, s = np.broadcast_arrays(x, m, s)
    return x, m, s


def mbqm_corners(x, multiplier, shift, flavour: str) -> dict:
    """The implementation-defined corners `multiply_by_quantized_multiplier` would flag, as boolean masks (never
    raises for them): 'left_shift_overflow', 'srdhm_min_min', 'int32_overflow'. Domain errors still raise."""
    x, m, s = _mbqm_parts(x, multiplier, shift, flavour)
    none = np.zeros(x.shape, bool)
    if flavour in ("G", "U"):
        v = x << np.maximum(s, 0)
        over = (v < INT32_MIN) | (v > INT32_MAX)
        # SRDHM sees INT32_MIN if the exact shift is INT32_MIN, or if either left_shift variant makes it so
        mm = (m == INT32_MIN) & ((sat32(v) == INT32_MIN) | (wrap32(v) == INT32_MIN))
        return {"left_shift_overflow": over, "srdhm_min_min": mm, "int32_overflow": none}
    if flavour == "S":
        r = (x * m + (np.int64(1) << (30 - s))) >> (31 - s)
        return {"left_shift_overflow": none, "srdhm_min_min": none,
                "int32_overflow": (r < INT32_MIN) | (r > INT32_MAX)}
    if flavour == "S_neon":     # its pre-shift is a choice of instruction (left_shift), never a strict corner
        return {"left_shift_overflow": none, "srdhm_min_min": none, "int32_overflow": none}
    p = x * m
    over = (p < INT32_MIN) | (p > INT32_MAX)
    if flavour == "legacy_up":
        w = wrap32(p) + np.where(s < 0, np.int64(1) << np.maximum(-s - 1, 0), 0)
        over |= (w < INT32_MIN) | (w > INT32_MAX)
    return {"left_shift_overflow": none, "srdhm_min_min": none, "int32_overflow": over}


def _no_flags(flavour, **flags):
    """A corner flag the flavour has no corner for is an error, never silently ignored."""
    given = {k: v for k, v in flags.items() if v is not None}
    if given:
        raise ValueError(f"flavour {flavour!r} has no corner {', '.join(f'{k}=' for k in given)}: "
                         f"it has no such step (see FLAVOURS[{flavour!r}])")


def _mbqm_double(x, m, s, *, flavour, left_shift, min_min, overflow):
    """G and U: SRDHM(ShiftLeft(x, L), m), then RDBPOT (G, ties away) or a rounding shift with ties up (U).
    TFLite common.cc L78-90; common.h L412-445
    (docs/research/tflite-ruy-rounding.md#multiplybyquantizedmultiplier-mbqm)."""
    _no_flags(flavour, overflow=overflow)
    L, R = np.maximum(s, 0), np.maximum(-s, 0)
    v = x << L
    flag((v < INT32_MIN) | (v > INT32_MAX), left_shift, "left_shift_overflow", "left_shift",
         tuple(LEFT_SHIFT), "x << max(shift, 0) overflows int32")
    v = sat32(v) if left_shift == "saturate" else wrap32(v)
    h = np.asarray(srdhm(v, m, min_min=min_min), np.int64)
    return out32(_rshift_away(h, R) if flavour == "G" else _rshift_up(h, R))


def _mbqm_single(x, m, s, *, flavour, left_shift, min_min, overflow):
    """S: (int64(x) * m + 2^(30 - shift)) >> (31 - shift), one rounding, ties up. ruy apply_multiplier.cc
    L48-65; TFLite common.cc L31-47 (docs/research/tflite-ruy-rounding.md#ruy)."""
    _no_flags(flavour, left_shift=left_shift, min_min=min_min)
    ts = 31 - s
    r = (x * m + (np.int64(1) << (ts - 1))) >> ts
    return out32(narrow32(r, overflow, "single rounding result does not fit int32 (static_cast<int32_t>)"))


S_NEON_LEFT_SHIFT = {
    "wrap": "SSHL / vshlq_s32 (wraps): ruy's ARM kernels, TFLite's NEON 4Rows; the default of 'S_neon'",
    "saturate": "SQSHL / vqshlq_s32 (saturates): XNNPACK's rndnu NEON kernels (right_pre_shift)",
}


def _mbqm_single_neon(x, m, s, *, flavour, left_shift, min_min, overflow):
    """S_neon: shift left by max(shift + 1, 0) (SSHL wraps, SQSHL saturates: left_shift='wrap' (default) or
    'saturate'), SQDMULH by m, SRSHL right by max(-shift, 1) (ties up). ruy kernel_arm64.cc ~L545-561; XNNPACK
    src/qs8-gemm/c4-neondot.c.in @75db3c0 L555-570 (vqshlq_s32, vqdmulhq_s32, vrshlq_s32)."""
    _no_flags(flavour, min_min=min_min, overflow=overflow)
    mode = "wrap" if left_shift is None else left_shift
    if mode not in S_NEON_LEFT_SHIFT:
        raise ValueError(f"left_shift={left_shift!r} for flavour 'S_neon': expected one of "
                         f"{', '.join(repr(o) for o in S_NEON_LEFT_SHIFT)}")
    Rn = np.minimum(s, -1)                      # SRSHL amount (negative: rounding right shift by -Rn >= 1)
    Ln = s - Rn                                 # = max(shift + 1, 0), at most 31
    v = x << Ln
    t = sat32(v) if mode == "saturate" else wrap32(v)
    q = np.where((t == INT32_MIN) & (m == INT32_MIN), INT32_MAX, (t * m) >> 31)   # SQDMULH (m >= 0 here)
    return out32(_rshift_up(q, -Rn))


def _mbqm_legacy(x, m, s, *, flavour, left_shift, min_min, overflow):
    """legacy / legacy_up: int32 x * result_mult_int, then RDBPOT (ties away) or + 2^(R-1) >> R (ties up).
    gemmlowp internal/output.h @16e8662 L65-90 (docs/research/gemmlowp-output-stages.md#the-pipeline)."""
    _no_flags(flavour, left_shift=left_shift, min_min=min_min)
    R = -s
    p = narrow32(x * m, overflow, "x * result_mult_int overflows int32")
    if flavour == "legacy":
        return out32(_rshift_away(p, R))
    rounding = np.where(R >= 1, np.int64(1) << np.maximum(R - 1, 0), 0)
    return out32(narrow32(p + rounding, overflow, "x * mult + rounding overflows int32") >> R)


# The rounding flavours as a table: name -> implementation (all take x, m, s broadcast as exact int64).
MBQM = {"G": _mbqm_double, "U": _mbqm_double, "S": _mbqm_single, "S_neon": _mbqm_single_neon,
        "legacy": _mbqm_legacy, "legacy_up": _mbqm_legacy}
assert MBQM.keys() == FLAVOURS.keys()


def multiply_by_quantized_multiplier(x, multiplier, shift, *, flavour: str, left_shift=None, min_min=None,
                                     overflow=None):
    """MultiplyByQuantizedMultiplier(x, multiplier, shift): x * multiplier * 2^(shift - 31) rounded to an int32,
    in the rounding flavour given (see FLAVOURS and the table MBQM; 'G', 'U', 'S', 'S_neon', 'legacy',
    'legacy_up').

    Q31 flavours (G, U, S, S_neon): multiplier is a Q0.31 fixed-point number (>= 2^30 when it comes from
    QuantizeMultiplier), shift > 0 multiplies by 2^shift. Legacy flavours: multiplier is gemmlowp's integer
    result_mult_int and shift = -result_shift (so the real factor is multiplier * 2^shift).

    Corner parameters (strict when None, see the module docstring): left_shift ('saturate'|'wrap') for the
    overflow of x << max(shift, 0) in G and U, and for S_neon the pre-shift instruction itself (None = 'wrap',
    SSHL as ruy; 'saturate' = SQSHL as XNNPACK rndnu); min_min ('saturate'|'sse') for SRDHM(INT32_MIN, INT32_MIN)
    in G and U; overflow ('wrap') for a plain int32 product or sum that overflows (legacy) and the int64 ->
    int32 narrowing of S. A flag the flavour has no step for raises ValueError.

    TFLite tensorflow/lite/kernels/internal/common.cc (tflite-micro @90b983c) L31-47 single, L78-90 double;
    common.h L412-445 (NEON 4Rows, 'U'); ruy ruy/apply_multiplier.cc L48-65 ('S'); ruy kernel_arm64.cc ~L545-561
    ('S_neon'); gemmlowp internal/output.h @16e8662 L65-90, L150-181 ('legacy', 'G');
    docs/research/tflite-ruy-rounding.md#the-flavours-side-by-side."""
    x, m, s = _mbqm_parts(x, multiplier, shift, flavour)
    return MBQM[flavour](x, m, s, flavour=flavour, left_shift=left_shift, min_min=min_min, overflow=overflow)


def quantize_multiplier(real: float, *, single_rounding: bool = False) -> tuple[int, int]:
    """TFLite QuantizeMultiplier(double) -> (quantized_multiplier, shift), so that real ~ m * 2^(shift - 31):
    frexp, round(q * 2^31) with ties away from zero (TfLiteRound = std::round), renormalise 2^31, flush shift <
    -31 to zero, and with single_rounding cap shift at 30 (m = INT32_MAX). tflite-micro @90b983c
    tensorflow/lite/kernels/internal/quantization_util.cc L53-104
    (docs/research/tflite-ruy-rounding.md#multiplybyquantizedmultiplier-mbqm)."""
    real = float(real)
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    v = q * (1 << 31)                               # exact: scaling by a power of two
    whole = math.floor(abs(v))
    qf = int(math.copysign(whole + (1 if abs(v) - whole >= 0.5 else 0), v))   # std::round: ties away from zero
    if qf == (1 << 31):
        qf //= 2
        shift += 1
    if shift < -31:
        shift, qf = 0, 0
    if single_rounding and shift > 30:
        shift, qf = 30, (1 << 31) - 1
    return qf, shift
