"""IEEE binary32 arithmetic and float -> int conversions, bit for bit, as requantizing kernels use them.

numpy float32 operations are IEEE binary32 with round to nearest even (the default MXCSR / FPCR mode every
library here runs under). int -> float32 conversions go through float64 (exact), then one rounding. The
conversions to int differ only outside the int32 range (and on NaN), which is where kernels disagree:
lrintf (C99, undefined there), CVTPS2DQ (x86: the "integer indefinite" 0x80000000), FCVTNS (AArch64: saturates,
NaN -> 0) and the magic-bias trick (float bits of x + 1.5 * 2^23).
"""
from __future__ import annotations

import numpy as np

from lowp.isa_models.fixedpoint import INT32_MAX, INT32_MIN, check_domain
from lowp.isa_models.lanes import numpy_only

F32 = np.float32
MAGIC_BIAS = F32(12582912.0)            # 1.5 * 2^23: x + MAGIC_BIAS has x's nearest integer in its low mantissa bits
MAGIC_BIAS_BITS = 0x4B400000            # its bit pattern


def f32(x) -> np.ndarray:
    """Round to float32 (nearest even). Integers (any size that float64 holds exactly, i.e. |x| <= 2^53) are
    converted through float64, which is exact, so this is one correct rounding, like cvtsi2ss/cvtdq2ps."""
    numpy_only("lowp.isa_models.float32.f32", x)
    a = np.asarray(x)
    if a.dtype.kind in "iu":
        if a.size and np.abs(a.astype(np.int64)).max() > (1 << 53):
            raise ValueError("f32: integer beyond 2^53, not exactly representable in float64")
        return a.astype(np.float64).astype(F32)
    return a.astype(np.float64).astype(F32) if a.dtype != F32 else a


def floats32(x, name) -> np.ndarray:
    """x as float32, refusing any other dtype (lowp never casts silently)."""
    numpy_only(f"lowp.isa_models.float32 ({name})", x)
    a = np.asarray(x)
    if a.dtype != F32:
        raise ValueError(f"{name}: expected float32 values (np.float32), got {a.dtype}; lowp never casts silently -- "
                         "use f32() where the C++ rounds to float")
    return a


def fma_f32(a, b, c) -> np.ndarray:
    """A float32 fused multiply-add, round(a*b + c) with ONE rounding to float32, for float32 a, b, c.

    Why this is exact: a*b of two float32 has at most 48 significant bits and an exponent in [-298, 256], so it is
    exact in float64. The sum p + c is not always exact in float64, and rounding it to float64 and then to
    float32 can double-round. So the sum is computed in round-to-odd: s = RN64(p + c) and its exact error e
    (TwoSum, exact in float64), then s is moved to the float64 neighbour with an odd last bit on the side of the
    true value whenever e != 0. Rounding a round-to-odd value with 53 >= 24 + 2 bits to float32 is correct
    (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to odd",
    IEEE TC 2008). Inputs that are not all float32 are refused: an int32 x float32 product can need 55 bits,
    and then a float64 product is not exact (docs/research/pytorch-fbgemm.md#experiments)."""
    a, b, c = floats32(a, "a"), floats32(b, "b"), floats32(c, "c")
    c64 = c.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):      # 0 * inf is NaN, as the instruction gives
        p = a.astype(np.float64) * b.astype(np.float64)
        s = p + c64
        bv = s - p
        err = (p - (s - bv)) + (c64 - bv)                 # TwoSum: s + err == p + c exactly (finite s)
        finite = np.isfinite(s)
        err = np.where(finite, err, 0.0)
        # truncation toward zero of the exact value: step s back one ulp when it overshoots in magnitude
        over = (err != 0) & (np.sign(err) != np.sign(s))
        t = np.where(over, np.nextafter(s, 0.0), s)
        odd = (t.view(np.int64) & 1) == 1
        ro = np.where((err != 0) & ~odd, np.nextafter(t, np.copysign(np.inf, t)), t)
        r = ro.astype(F32)
    return r[()] if r.ndim == 0 else r


# ---------------------------------------------------------------------------------------------------------------
# float -> int conversions

def rne_int(x) -> np.ndarray:
    """nearbyint/lrintf of float values under the default rounding mode (ties to even), as exact int64; NaN,
    infinity and |x| >= 2^63 are undefined in C: OutOfDomain."""
    numpy_only("lowp.isa_models.float32.rne_int", x)
    x = np.asarray(x, np.float64)
    check_domain(~np.isfinite(x) | (np.abs(x) >= 2.0 ** 63), "float_to_int_range",
                 "lrintf/nearbyint of NaN, infinity or |x| >= 2^63 is undefined")
    return np.rint(x).astype(np.int64)


def lrintf(x) -> np.ndarray:
    """(int32_t) lrintf(x): ties to even; defined only when the rounded value fits int32 (OutOfDomain otherwise,
    as C leaves it undefined). C99 7.12.9.5."""
    r = rne_int(floats32(x, "x"))
    check_domain((r < INT32_MIN) | (r > INT32_MAX), "float_to_int_range",
                 "(int32_t) lrintf(x) of a value outside int32 is undefined")
    return r.astype(np.int32)


def cvtps2dq(x) -> np.ndarray:
    """CVTPS2DQ / _mm256_cvtps_epi32: round to nearest even (MXCSR default); NaN or a rounded value outside int32
    gives the integer indefinite 0x80000000 (INT32_MIN), on both sides. Intel SDM Vol. 2A CVTPS2DQ."""
    a = floats32(x, "x").astype(np.float64)
    with np.errstate(invalid="ignore"):
        r = np.rint(np.where(np.isfinite(a), a, 0.0))
        bad = ~np.isfinite(a) | (r < INT32_MIN) | (r > INT32_MAX)
    return np.where(bad, INT32_MIN, r).astype(np.int32)


def fcvtns(x) -> np.ndarray:
    """FCVTNS Wd/Vd.4S (vcvtnq_s32_f32): round to nearest, ties to even, saturating to int32; NaN -> 0.
    Arm ARM C7.2.104 FCVTNS (vector), FPToFixed with saturation."""
    a = floats32(x, "x").astype(np.float64)
    r = np.rint(np.where(np.isnan(a), 0.0, a))
    return np.clip(r, INT32_MIN, INT32_MAX).astype(np.int32)


def magic_bias_bits(x) -> np.ndarray:
    """The magic-bias rounding: the bits of f32(x + 12582912.0f) as int32. For |x| <= 2^22 they are
    0x4B400000 + rint(x) (ties to even); beyond that the exponent moves, and the bits stay monotone in x (as
    int32 they are negative once x + bias < 0). XNNPACK src/qs8-gemm/scalar.c.in @75db3c0 L430-460."""
    s = floats32(x, "x") + MAGIC_BIAS
    r = np.asarray(s, F32).view(np.int32)
    return r[()] if r.ndim == 0 else r
