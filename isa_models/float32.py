"""IEEE binary32 arithmetic, float -> int conversions and float32 -> binary16 / bfloat16 conversions, bit for bit,
as requantizing kernels use them.

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


# ---------------------------------------------------------------------------------------------------------------
# float32 -> half precision (IEEE binary16) and bfloat16, as the bits a kernel stores (uint16)

F16_ROUNDINGS = {
    "rne": "round to nearest, ties to even: VCVTPS2PH with imm8 0 (_MM_FROUND_TO_NEAREST_INT), FCVTN under FPCR's "
           "default RN mode with FZ16 off, FP16's fp16_ieee_from_fp32_value; overflow gives infinity",
    "trunc": "toward zero: VCVTPS2PH with imm8 3 (_MM_FROUND_TO_ZERO), a kernel that drops the rounding; overflow "
             "gives the largest finite value 65504",
}


def fp16_bits(x, rounding: str = "rne") -> np.ndarray:
    """float32 -> IEEE binary16 bits (uint16), as VCVTPS2PH / _mm256_cvtps_ph (Intel SDM Vol. 2A VCVTPS2PH,
    "Convert Single-Precision FP value to 16-bit FP value"), FCVTN Vd.4H, Vn.4S / vcvt_f16_f32 (Arm ARM C7.2.79
    FCVTN, FPConvert) and the portable fp16_ieee_from_fp32_value (Maratyszcza/FP16 include/fp16/fp16.h) compute
    it: subnormal halves kept (MXCSR and FPCR as Linux leaves them: no DAZ, FZ16 off), infinities kept, a NaN
    quieted with the top 9 bits of its payload (SDM Table 4-7 / Arm FPConvertNaN; fp16_ieee_from_fp32_value gives
    the canonical 0x7E00 instead: a NaN never leaves a qd8 stage on finite parameters). `rounding`: F16_ROUNDINGS.
    Exact: numpy's IEEE cast where no value is a NaN and the rounding is "rne"; otherwise the float32 value
    is scaled by a power of two into [2^10, 2^11) (or the subnormal grid) in float64, where the rounding to an
    integer is one exact np.rint / np.trunc."""
    if rounding not in F16_ROUNDINGS:
        raise ValueError(f"fp16_bits: rounding={rounding!r}; expected one of {', '.join(F16_ROUNDINGS)}")
    f = floats32(x, "x")
    if rounding == "rne" and not np.isnan(f).any():
        # numpy's float32 -> float16 cast is this rounding on every value but NaN (subnormals, ties, infinities and
        # the overflow to infinity included: tests/test_half_conversions.py holds it to an exact rational reading and
        # to the scaling below), a tenth of its cost on the small arrays of a qd8-f16 kernel's judge
        with np.errstate(over="ignore"):
            out = f.astype(np.float16).view(np.uint16)
        return out[()] if out.ndim == 0 else out
    return _fp16_bits_scaled(f, rounding)


def _fp16_bits_scaled(x: np.ndarray, rounding: str) -> np.ndarray:
    """fp16_bits by an exact power-of-two scaling: every input, NaNs and both roundings."""
    bits = x.view(np.uint32).astype(np.int64)
    sign = (bits >> 16) & 0x8000
    exponent, mantissa = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    with np.errstate(invalid="ignore", over="ignore"):         # NaNs and infinities take their own branch below
        a = np.abs(np.asarray(x, np.float64))
        _, e = np.frexp(np.where((exponent == 0xFF) | (a == 0), 1.0, a))
        grid = np.maximum(e - 1, -14) - 10                              # the exponent of the half's last bit
        scaled = np.ldexp(np.where(exponent == 0xFF, 0.0, a), -grid)    # exact: a power-of-two scaling
        r = (np.rint if rounding == "rne" else np.trunc)(scaled).astype(np.int64)
    magnitude = ((grid + 25) << 10) + r - 1024                          # the half's bits, the carry included
    overflow = 0x7C00 if rounding == "rne" else 0x7BFF
    magnitude = np.where(magnitude >= 0x7C00, overflow, magnitude)
    magnitude = np.where(a == 0, 0, magnitude)
    magnitude = np.where(exponent == 0xFF, np.where(mantissa == 0, 0x7C00, 0x7E00 | (mantissa >> 13)), magnitude)
    out = (sign | magnitude).astype(np.uint16)
    return out[()] if out.ndim == 0 else out


def f16_values(bits) -> np.ndarray:
    """binary16 bits as numpy float16 (IEEE binary16): the values a kernel's f16 output holds."""
    return np.asarray(bits, np.uint16).view(np.float16)


BF16_CONVERSIONS = {
    "rne": "round to nearest even by adding 0x7FFF + the kept LSB to the bits; a NaN quieted (bit 22 set) first: "
           "XNNPACK's math_cvt_bf16_fp32 (src/xnnpack/math.h L467-483) and its AVX2 blend; BFCVTN (Arm ARM "
           "C7.2.33, FPConvertBF: FPCR honoured, FZ off keeps subnormals)",
    "rne-nonan": "the same addition with no NaN test (a NaN whose payload is in the low 16 bits can carry into "
                 "infinity): XNNPACK's NEON dot-product bf16 stores (vaddq_u32, vshrn_n_u32 by 16)",
    "rne-daz": "VCVTNEPS2BF16 (_mm512_cvtneps_pbh): the same rounding, subnormal inputs taken as zero (sign kept) "
               "whatever MXCSR says, NaN quieted (Intel SDM Vol. 2A VCVTNEPS2BF16, convert_fp32_to_bfloat16)",
}


def bf16_bits(x, conversion: str = "rne") -> np.ndarray:
    """float32 -> bfloat16 bits (uint16), one of BF16_CONVERSIONS. They agree on every finite normal input and
    infinities; "rne-daz" differs on subnormal inputs, "rne-nonan" on NaNs."""
    if conversion not in BF16_CONVERSIONS:
        raise ValueError(f"bf16_bits: conversion={conversion!r}; expected one of {', '.join(BF16_CONVERSIONS)}")
    bits = floats32(x, "x").view(np.uint32).astype(np.int64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFFFFFF
    nan = ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x7FFFFF) != 0)
    if conversion != "rne-nonan":
        rounded = np.where(nan, bits | 0x00400000, rounded)
    if conversion == "rne-daz":
        rounded = np.where((bits & 0x7F800000) == 0, bits & 0x80000000, rounded)
    out = (rounded >> 16).astype(np.uint16)
    return out[()] if out.ndim == 0 else out


def bf16_to_f32(bits) -> np.ndarray:
    """bfloat16 bits as the float32 they are (the bits shifted up by 16: math_cvt_fp32_bf16, exact)."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(F32)
