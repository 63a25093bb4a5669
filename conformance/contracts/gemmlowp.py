"""gemmlowp's output stages and output pipelines, bit for bit: what gemmlowp does to the int32 accumulators after
the GEMM (bias, the legacy and fixed-point quantize-down stages, clamp, casts), plus the accumulator itself and
the legacy EightBitIntGemm reference.

Matrices are 2-D (rows x cols) int32 accumulators; per-channel vectors follow gemmlowp's VectorShape: a 'Col'
vector has one entry per row, a 'Row' vector one per column. Arithmetic is exact int64, narrowed where the C++
narrows; corner parameters (left_shift, min_min, overflow) behave as in lowp.conformance.contracts.fixedpoint: None is
strict and raises ImplementationDefined where the implementations differ.
Citations: gemmlowp public/output_stages.h and internal/output.h @16e8662 (docs/research/gemmlowp-output-stages.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from lowp.conformance.contracts.fixedpoint import (INT32_MAX, INT32_MIN, check_domain, ints, multiply_by_quantized_multiplier, narrow32, out32,
                         wrap32)

VECTOR_SHAPES = ("Col", "Row")


def _matrix(x, name="x") -> np.ndarray:
    x = ints(x, name)
    if x.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D (rows x cols) int32 matrix, got {x.ndim}-D")
    return x


def _per_channel(v, x: np.ndarray, vector_shape: str, name: str, lo=INT32_MIN, hi=INT32_MAX) -> np.ndarray:
    """A per-channel vector broadcast against x: a 'Col' vector indexes rows, a 'Row' vector indexes columns."""
    if vector_shape not in VECTOR_SHAPES:
        raise ValueError(f"vector_shape={vector_shape!r}: expected 'Col' (one entry per row) or 'Row' (per column)")
    v = ints(v, name, lo, hi)
    n = x.shape[0] if vector_shape == "Col" else x.shape[1]
    if v.ndim != 1 or v.shape[0] != n:
        raise ValueError(f"{name}: a {vector_shape} vector for a {x.shape[0]}x{x.shape[1]} matrix needs {n} entries, "
                         f"got shape {v.shape}")
    return v[:, None] if vector_shape == "Col" else v[None, :]


# ---------------------------------------------------------------------------------------------------------------
# The accumulator

def gemmlowp_accumulator(lhs, rhs, lhs_offset=0, rhs_offset=0) -> np.ndarray:
    """The int32 matrix gemmlowp's output pipeline receives: sum_d (lhs[r,d] + lhs_offset[r]) * (rhs[d,c] +
    rhs_offset[c]) modulo 2^32, whatever decomposition the kernel uses (UnpackResultBlock sums four terms, equal
    mod 2^32). Offsets are *added* (lhs_offset = -lhs_zero_point); scalar or per row (lhs) / per column (rhs).
    gemmlowp internal/unpack.h @16e8662 L89-127, public/gemmlowp.h L53-66
    (docs/research/gemmlowp-output-stages.md#the-accumulator)."""
    lhs, rhs = ints(lhs, "lhs"), ints(rhs, "rhs")
    if lhs.ndim != 2 or rhs.ndim != 2 or lhs.shape[1] != rhs.shape[0]:
        raise ValueError(f"lhs {lhs.shape} and rhs {rhs.shape}: expected rows x depth and depth x cols")
    lo = ints(lhs_offset, "lhs_offset")
    ro = ints(rhs_offset, "rhs_offset")
    lo = lo.reshape(-1, 1) if lo.ndim else lo
    ro = ro.reshape(1, -1) if ro.ndim else ro
    # int64 matmul wraps modulo 2^64 on overflow, which keeps the value exact modulo 2^32.
    with np.errstate(over="ignore"):
        acc = (lhs + lo) @ (rhs + ro)
    return out32(wrap32(acc))


# ---------------------------------------------------------------------------------------------------------------
# Stage functions

def bias_addition(x, bias, *, vector_shape: str, overflow=None) -> np.ndarray:
    """OutputStageBiasAddition<VectorMap>: x + bias[pos], int32 (overflow: see fixedpoint); a 'Row' vector is
    indexed by column, a 'Col' vector by row. gemmlowp output_stages.h L183-192, output.h L314-330."""
    x = _matrix(x)
    b = _per_channel(bias, x, vector_shape, "bias")
    return out32(narrow32(x + b, overflow, "x + bias overflows int32"))


def quantize_down_int32_to_uint8_scale(x, result_offset, result_mult_int, result_shift, *, rounding: str = "away",
                                       vector_shape: str | None = None, overflow=None) -> np.ndarray:
    """OutputStageQuantizeDownInt32ToUint8Scale (legacy): RDBPOT(wrap32(wrap32(x + result_offset) *
    result_mult_int), result_shift), int32 out (no clamp: cast with a later stage). rounding='away' is the
    library since fbf7914 (2017-01, PR #66); 'up' is ((..) + 2^(s-1)) >> s as before it, as in the header
    comment, ReferenceEightBitIntGemm and the meta fast path. They differ only at negative ties, never after a
    [0,255] clamp. With vector_shape ('Col'/'Row') result_offset and result_mult_int are per-channel vectors
    (the PC stage); result_shift stays scalar. Shift in 0..31.
    gemmlowp output_stages.h L29-66, output.h L65-119 (docs/research/gemmlowp-output-stages.md#the-pipeline)."""
    x = _matrix(x)
    if vector_shape is None:
        off, mult = ints(result_offset, "result_offset"), ints(result_mult_int, "result_mult_int")
        if off.ndim or mult.ndim:
            raise ValueError("per-channel result_offset/result_mult_int need vector_shape (the PC stage)")
    else:
        off = _per_channel(result_offset, x, vector_shape, "result_offset")
        mult = _per_channel(result_mult_int, x, vector_shape, "result_mult_int")
    shift = ints(result_shift, "result_shift", -(1 << 31), (1 << 31) - 1)
    if shift.ndim:
        raise ValueError("result_shift is a scalar in both the per-tensor and the PC stage")
    check_domain(np.asarray(shift < 0 or shift > 31), "shift_range", "result_shift outside [0, 31]")
    y = narrow32(x + off, overflow, "x + result_offset overflows int32")
    flavour = "legacy" if rounding == "away" else "legacy_up" if rounding == "up" else None
    if flavour is None:
        raise ValueError(f"rounding={rounding!r}: expected 'away' or 'up'")
    return multiply_by_quantized_multiplier(y, mult, -shift, flavour=flavour, overflow=overflow)


def quantize_down_int32_by_fixed_point(x, result_fixedpoint_multiplier, result_shift, result_offset_after_shift, *,
                                       min_min=None, overflow=None) -> np.ndarray:
    """OutputStageQuantizeDownInt32ByFixedPoint (old name ...ToUint8ScaleByFixedPoint):
    wrap32(RDBPOT(SRDHM(x, M), result_shift) + result_offset_after_shift), result_shift in 0..31.
    gemmlowp output_stages.h L68-124, output.h L121-148 (docs/research/gemmlowp-output-stages.md#the-pipeline)."""
    x = _matrix(x)
    shift = ints(result_shift, "result_shift", -(1 << 31), (1 << 31) - 1)
    check_domain(np.asarray((shift < 0) | (shift > 31)), "shift_range", "result_shift outside [0, 31]")
    y = multiply_by_quantized_multiplier(x, result_fixedpoint_multiplier, -shift, flavour="G", min_min=min_min)
    off = ints(result_offset_after_shift, "result_offset_after_shift")
    return out32(narrow32(np.asarray(y, np.int64) + off, overflow, "+ result_offset_after_shift overflows int32"))


def scale_int32_by_fixed_point_and_exponent(x, result_fixedpoint_multiplier, result_exponent,
                                            result_offset_after_shift, *, vector_shape: str | None = None,
                                            left_shift=None, min_min=None, overflow=None) -> np.ndarray:
    """OutputStageScaleInt32ByFixedPointAndExponent: L = max(0, e), R = max(0, -e),
    wrap32(RDBPOT(SRDHM(ShiftLeft(x, L), M), R) + result_offset_after_shift) -- TFLite's double-rounding MBQM
    ('G') plus the offset. ShiftLeft saturates on gemmlowp's scalar path and wraps on NEON/SSE (left_shift=).
    With vector_shape, M and e are per-channel vectors (the PC stage, ...PC<Shape>); the offset is scalar.
    gemmlowp output_stages.h L126-159, output.h L150-221 (docs/research/gemmlowp-output-stages.md#the-pipeline)."""
    x = _matrix(x)
    if vector_shape is None:
        m = ints(result_fixedpoint_multiplier, "result_fixedpoint_multiplier")
        e = ints(result_exponent, "result_exponent", -(1 << 31), (1 << 31) - 1)
        if m.ndim or e.ndim:
            raise ValueError("per-channel multipliers/exponents need vector_shape='Col' or 'Row' (the PC stage)")
    else:
        m = _per_channel(result_fixedpoint_multiplier, x, vector_shape, "result_fixedpoint_multiplier")
        e = _per_channel(result_exponent, x, vector_shape, "result_exponent", -(1 << 31), (1 << 31) - 1)
    y = multiply_by_quantized_multiplier(x, m, e, flavour="G", left_shift=left_shift, min_min=min_min)
    off = ints(result_offset_after_shift, "result_offset_after_shift")
    return out32(narrow32(np.asarray(y, np.int64) + off, overflow, "+ result_offset_after_shift overflows int32"))


def clamp(x, min, max) -> np.ndarray:   # noqa: A002 - gemmlowp's field names
    """OutputStageClamp{min, max}: min(max(x, min), max); max is applied last, so it wins if min > max.
    gemmlowp output_stages.h L194-200, output.h L332-354."""
    x = ints(x, "x")
    return out32(np.minimum(np.maximum(x, ints(min, "min")), ints(max, "max")))


def _saturating_cast(x, dtype):
    info = np.iinfo(dtype)
    r = np.clip(ints(x, "x"), info.min, info.max).astype(dtype)
    return r[()] if r.ndim == 0 else r


def saturating_cast_to_uint8(x):
    """OutputStageSaturatingCastToUint8: clamp to [0, 255]. output_stages.h L161-164, output.h L223-244."""
    return _saturating_cast(x, np.uint8)


def saturating_cast_to_int8(x):
    """OutputStageSaturatingCastToInt8: clamp to [-128, 127]. output_stages.h L166-169, output.h L246-267."""
    return _saturating_cast(x, np.int8)


def saturating_cast_to_int16(x):
    """OutputStageSaturatingCastToInt16: clamp to [-32768, 32767]. output_stages.h L178-181, output.h L269-290."""
    return _saturating_cast(x, np.int16)


def truncating_cast_to_uint8(x):
    """OutputStageTruncatingCastToUint8: uint8(x) = x & 255 (meant for already-clamped values).
    output_stages.h L171-176, output.h L292-312."""
    r = (ints(x, "x") & 255).astype(np.uint8)
    return r[()] if r.ndim == 0 else r


# ---------------------------------------------------------------------------------------------------------------
# Stages as values, and the pipeline

@dataclass(frozen=True)
class BiasAddition:
    bias: Any
    vector_shape: str = "Row"

    def __call__(self, x, v):
        return bias_addition(x, self.bias, vector_shape=self.vector_shape, overflow=v.get("overflow"))


@dataclass(frozen=True)
class QuantizeDownInt32ToUint8Scale:
    result_offset: Any
    result_mult_int: Any
    result_shift: int
    rounding: str = "away"

    def __call__(self, x, v):
        return quantize_down_int32_to_uint8_scale(x, self.result_offset, self.result_mult_int, self.result_shift,
                                                  rounding=self.rounding, overflow=v.get("overflow"))


@dataclass(frozen=True)
class QuantizeDownInt32ToUint8ScalePC:
    result_offset: Any
    result_mult_int: Any
    result_shift: int
    vector_shape: str = "Col"
    rounding: str = "away"

    def __call__(self, x, v):
        return quantize_down_int32_to_uint8_scale(x, self.result_offset, self.result_mult_int, self.result_shift,
                                                  rounding=self.rounding, vector_shape=self.vector_shape,
                                                  overflow=v.get("overflow"))


@dataclass(frozen=True)
class QuantizeDownInt32ByFixedPoint:
    result_fixedpoint_multiplier: int
    result_shift: int
    result_offset_after_shift: int

    def __call__(self, x, v):
        return quantize_down_int32_by_fixed_point(x, self.result_fixedpoint_multiplier, self.result_shift,
                                                  self.result_offset_after_shift, min_min=v.get("min_min"),
                                                  overflow=v.get("overflow"))


@dataclass(frozen=True)
class ScaleInt32ByFixedPointAndExponent:
    result_fixedpoint_multiplier: int
    result_exponent: int
    result_offset_after_shift: int

    def __call__(self, x, v):
        return scale_int32_by_fixed_point_and_exponent(
            x, self.result_fixedpoint_multiplier, self.result_exponent, self.result_offset_after_shift,
            left_shift=v.get("left_shift"), min_min=v.get("min_min"), overflow=v.get("overflow"))


@dataclass(frozen=True)
class ScaleInt32ByFixedPointAndExponentPC:
    result_fixedpoint_multiplier: Any
    result_exponent: Any
    result_offset_after_shift: int
    vector_shape: str = "Col"

    def __call__(self, x, v):
        return scale_int32_by_fixed_point_and_exponent(
            x, self.result_fixedpoint_multiplier, self.result_exponent, self.result_offset_after_shift,
            vector_shape=self.vector_shape, left_shift=v.get("left_shift"), min_min=v.get("min_min"),
            overflow=v.get("overflow"))


@dataclass(frozen=True)
class Clamp:
    min: int
    max: int

    def __call__(self, x, v):
        return clamp(x, self.min, self.max)


class _Cast:
    final = True


@dataclass(frozen=True)
class SaturatingCastToUint8(_Cast):
    def __call__(self, x, v):
        return saturating_cast_to_uint8(x)


@dataclass(frozen=True)
class SaturatingCastToInt8(_Cast):
    def __call__(self, x, v):
        return saturating_cast_to_int8(x)


@dataclass(frozen=True)
class SaturatingCastToInt16(_Cast):
    def __call__(self, x, v):
        return saturating_cast_to_int16(x)


@dataclass(frozen=True)
class TruncatingCastToUint8(_Cast):
    def __call__(self, x, v):
        return truncating_cast_to_uint8(x)


def evaluate_pipeline(acc, stages: Sequence, *, left_shift=None, min_min=None, overflow=None) -> np.ndarray:
    """Apply an output pipeline as gemmlowp does: stages left to right on each int32 accumulator, all int32 until
    a cast stage, which must be last (gemmlowp static_asserts the final type against the destination). An empty
    pipeline returns the raw int32 accumulators. The corner parameters are passed to every stage that has the
    corner. gemmlowp internal/output.h @16e8662 L440-556 (docs/research/gemmlowp-output-stages.md#the-pipeline)."""
    x = out32(_matrix(acc, "acc"))
    variants = {"left_shift": left_shift, "min_min": min_min, "overflow": overflow}
    cast = None
    for i, stage in enumerate(stages):
        if not callable(stage):
            raise TypeError(f"stage {i}: {stage!r} is not an output stage")
        if cast is not None:
            raise ValueError(f"stage {i} ({type(stage).__name__}) follows the cast stage {cast}; gemmlowp would "
                             "evaluate it on the narrow type, for which it has no such stage: put the cast last")
        x = stage(x, variants)
        if isinstance(stage, _Cast):
            cast = type(stage).__name__
    return x


def make_standard_output_pipeline(result_offset, result_mult_int, result_shift, *, rounding: str = "away"):
    """MakeStandardOutputPipeline: (QuantizeDownInt32ToUint8Scale, SaturatingCastToUint8), what Gemm() and
    EightBitIntGemm use. gemmlowp output_stages.h L207-239, public/gemmlowp.h L72-83."""
    return (QuantizeDownInt32ToUint8Scale(result_offset, result_mult_int, result_shift, rounding),
            SaturatingCastToUint8())


def reference_eight_bit_int_gemm(a, b, a_offset, b_offset, c_offset, c_mult_int, c_shift, *, overflow=None):
    """ReferenceEightBitIntGemm of gemmlowp's test, in matrix form (a is m x k uint8, b is k x n uint8):
    total = sum (a + a_offset)(b + b_offset) (int32, wraps), ((total + c_offset) * c_mult_int + rounding) >> c_shift
    in int32 with rounding = 2^(c_shift-1) (0 when c_shift = 0), ties up, clamped to [0, 255]. c_shift = 32,
    which its assert accepts, is undefined behaviour there, so lowp takes 0..31. The generic test parameters
    (-75, -91, 74980, 123) overflow int32 at large depth, hence overflow='wrap' to reproduce it.
    gemmlowp test/test.cc @16e8662 L35-107 (docs/research/gemmlowp-output-stages.md#the-legacy-eightbitintgemm)."""
    acc = gemmlowp_accumulator(a, b, a_offset, b_offset)
    return evaluate_pipeline(acc, make_standard_output_pipeline(c_offset, c_mult_int, c_shift, rounding="up"),
                             overflow=overflow)
