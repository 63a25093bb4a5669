"""FBGEMM / Caffe2 DNNLOWP / PyTorch-fbgemm quantization arithmetic after the int32 accumulation, bit for bit, and
(re-exported) the oneDNN int8 rules of lowp.conformance.contracts.onednn. Seed 003 (DNNLOWP: float32 requantization) and seed 002 (oneDNN int8 nuances).

float32 arithmetic is numpy float32 (IEEE binary32, round to nearest even, as FBGEMM's scalar and AVX2 code
under the default MXCSR). int32 -> float32 conversions go through float64 (exact), then one rounding.
Where the libraries or the builds differ (the float-bias epilogue: division / reciprocal / fused multiply-add;
the quantizer: reciprocal multiply / legacy / division; ChooseQuantizationParams: FBGEMM / PyTorch), the variant
is a parameter with no silent default (each a table from name to implementation: FLOAT_BIAS_ADD,
lowp.isa_models.requant.FBGEMM_TAILS, QUANTIZE_FNS). int32 corner parameters behave as in lowp.isa_models.fixedpoint.
The float32 emulation lives in lowp.isa_models.float32 and the oneDNN rules in lowp.conformance.contracts.onednn; both are
re-exported here so older imports keep working.
Citations: pytorch/FBGEMM @71d6f8b; docs/research/fbgemm-requantization.md, docs/research/fbgemm-accumulation.md,
docs/research/onednn.md, docs/research/pytorch-fbgemm.md, docs/research/onnx-mlas.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lowp.isa_models.fixedpoint import INT32_MAX, INT32_MIN, check_domain, flag, ints, narrow32, out32, wrap32
from lowp.isa_models.float32 import F32, f32, fma_f32, rne_int
from lowp.isa_models.float32 import floats32 as _floats
from lowp.isa_models.requant import FBGEMM_TAILS

from lowp.conformance.contracts.onednn import (exact_u8s8, onednn_reorder_weights_s8, onednn_s8s8_compensation,  # noqa: F401 (re-exported)
                     onednn_s8s8_via_u8s8, onednn_scale_adjust)

_rne_int = rne_int          # the old private name, kept for importers


# ---------------------------------------------------------------------------------------------------------------
# Offsets (src/RefImplementations.cc L434-465)

def row_offsets_u8acc32_ref(A, *, overflow=None) -> np.ndarray:
    """row_offsets_u8acc32_ref: row_offsets[i] = sum_k A[i,k] (int32). A is M x K uint8.
    FBGEMM src/RefImplementations.cc @71d6f8b L434-446 (docs/research/fbgemm-requantization.md#zero-point-algebra)."""
    A = ints(A, "A", 0, 255)
    return out32(narrow32(A.sum(axis=1), overflow, "row sum overflows int32"))


def col_offsets_with_zero_pt_s8acc32_ref(B, B_zero_point, *, ncols_per_quant_group: int | None = None,
                                         overflow=None) -> np.ndarray:
    """col_offsets_with_zero_pt_s8acc32_ref: col_offsets[j] = sum_k B[k,j] - B_zero_point[j / ncols_per_group] * K,
    int32. B is K x N int8; B_zero_point has one entry per quantization group (N / ncols_per_quant_group):
    per-tensor ncols = N, per-group N / groups, per-channel 1. FBGEMM src/RefImplementations.cc @71d6f8b
    L448-465 (docs/research/fbgemm-requantization.md#zero-point-algebra)."""
    B = ints(B, "B", -128, 127)
    K, N = B.shape
    ncols = N if ncols_per_quant_group is None else int(ncols_per_quant_group)
    zp = np.atleast_1d(ints(B_zero_point, "B_zero_point"))
    g = np.arange(N) // ncols
    if zp.shape[0] <= g.max(initial=0):
        raise ValueError(f"B_zero_point: {zp.shape[0]} entries for {g.max(initial=0) + 1} quantization groups")
    s = narrow32(B.sum(axis=0), overflow, "column sum overflows int32")
    zk = narrow32(zp[g] * K, overflow, "B_zero_point * K overflows int32")
    return out32(narrow32(s - zk, overflow, "sum - zp*K overflows int32"))


def _corrected_raw(inp, A_zero_point, col_offsets, B_zp_per_col, row_offsets, int_bias, overflow):
    """raw = inp - A_zp * col_offsets[j] - B_zp * row_offsets[i] (+ int32 bias[j]), in int32 as the C++ does."""
    raw = ints(inp, "inp")
    if raw.ndim != 2:
        raise ValueError("inp: expected an M x N int32 matrix")
    M, N = raw.shape
    if A_zero_point:
        co = ints(col_offsets, "col_offsets").reshape(1, N)
        raw = narrow32(raw - narrow32(ints(A_zero_point, "A_zero_point") * co, overflow, "A_zp * col_offsets"),
                       overflow, "raw - A_zp * col_offsets")
    if B_zp_per_col is not None:
        ro = ints(row_offsets, "row_offsets").reshape(M, 1)
        raw = narrow32(raw - narrow32(B_zp_per_col.reshape(1, N) * ro, overflow, "B_zp * row_offsets"),
                       overflow, "raw - B_zp * row_offsets")
    if int_bias is not None:
        raw = narrow32(raw + ints(int_bias, "bias").reshape(1, N), overflow, "raw + bias")
    return raw


def _clamp_u8(rounded, lo):
    """out = max(lo, min(255, rounded)) stored to uint8 (a modular conversion, as in the C++)."""
    return (np.maximum(lo, np.minimum(255, rounded)) & 0xFF).astype(np.uint8)


# ---------------------------------------------------------------------------------------------------------------
# requantize_u8acc32_ref (src/RefImplementations.cc L217-290)

def requantize_u8acc32_ref_fixed(inp, *, C_multiplier: int, C_right_shift: int, C_zero_point: int,
                                 A_zero_point: int, B_zero_point: int, row_offsets=None, col_offsets=None, bias=None,
                                 fuse_relu: bool = False, overflow=None) -> np.ndarray:
    """requantize_u8acc32_ref, fixed-point multiplier: raw corrected by the zero points (scalar B zero point) and
    int32 bias, then ((int64(raw) * C_multiplier + nudge) >> C_right_shift) + C_zero_point with nudge =
    1 << max(0, shift - 1) -- half-up rounding, and the quirk that shift 0 still adds 1 --, clamped to
    [fuse_relu ? C_zero_point : 0, 255]. FBGEMM src/RefImplementations.cc @71d6f8b L217-255
    (docs/research/fbgemm-requantization.md#the-reference-requantizations)."""
    shift = int(C_right_shift)
    if not 0 <= shift <= 63:
        raise ValueError(f"C_right_shift={shift}: an int64 shift needs 0..63")
    bzp = None if not B_zero_point else np.full(ints(inp, "inp").shape[1], int(B_zero_point), np.int64)
    raw = _corrected_raw(inp, A_zero_point, col_offsets, bzp, row_offsets, bias, overflow)
    ab = raw * int(ints(C_multiplier, "C_multiplier"))
    nudge = 1 << max(0, shift - 1)
    flag(ab > (1 << 63) - 1 - nudge, overflow, "int64_overflow", "overflow", ("wrap",),
         "int64 raw * C_multiplier + nudge overflows")
    with np.errstate(over="ignore"):
        rounded = ((ab + np.int64(nudge)) >> shift) + int(C_zero_point)
    return _clamp_u8(rounded, int(C_zero_point) if fuse_relu else 0)


def requantize_u8acc32_ref_float(inp, *, C_multiplier, C_zero_point: int, A_zero_point: int, B_zero_point,
                                 row_offsets, col_offsets=None, bias=None, ncols_per_quant_group: int | None = None,
                                 fuse_relu: bool = False, overflow=None) -> np.ndarray:
    """requantize_u8acc32_ref, float multiplier: raw corrected by the zero points (B zero point per quantization
    group, always applied) and int32 bias; result = f32(f32(raw) * C_multiplier[g]); lrintf (ties to even) +
    C_zero_point, clamped to [fuse_relu ? C_zero_point : 0, 255]. C_multiplier: float32, one per group.
    FBGEMM src/RefImplementations.cc @71d6f8b L257-290
    (docs/research/fbgemm-requantization.md#the-reference-requantizations)."""
    raw0 = ints(inp, "inp")
    N = raw0.shape[1]
    ncols = N if ncols_per_quant_group is None else int(ncols_per_quant_group)
    g = np.arange(N) // ncols
    bzp = np.atleast_1d(ints(B_zero_point, "B_zero_point"))[g]
    mult = np.atleast_1d(_floats(C_multiplier, "C_multiplier"))[g]
    raw = _corrected_raw(raw0, A_zero_point, col_offsets, bzp, row_offsets, bias, overflow)
    result = f32(raw) * mult.reshape(1, N)
    rounded = _rne_int(result) + int(C_zero_point)
    return _clamp_u8(rounded, int(C_zero_point) if fuse_relu else 0)


# ---------------------------------------------------------------------------------------------------------------
# ReQuantizeOutput (include/fbgemm/Fbgemm.h L1168-1260; OutputProcessing-inl.h L63-200; QuantUtilsAvx2.cc L443-1000)

FLOAT_BIAS = {
    "divide": "f32(f32(raw) + f32(bias / act_times_w_scale)): the generic (anyarch/aarch64) code, and the AVX2 "
              "routine for OUT_CHANNEL granularity (_mm256_div_ps, no FMA)",
    "reciprocal": "f32(f32(raw) + f32(bias * rcp)), rcp = f32(1.0 / double(act_times_w_scale)): the AVX2 routine for "
                  "TENSOR/GROUP granularity compiled without FP contraction",
    "reciprocal_fma": "f32(f32(raw) + bias * rcp) with one rounding: the same routine contracted into an FMA, as "
                      "observed in the PyTorch 2.15 wheel (docs/research/pytorch-fbgemm.md#experiments)",
}
GRANULARITIES = ("tensor", "group", "out_channel")


def _rcp(aw):
    """f32(1.0 / double(act_times_w_scale)): the reciprocal the AVX2 routine precomputes."""
    return (1.0 / aw.astype(np.float64)).astype(F32)


def _bias_divide(xf, b, aw):
    return xf + (b / aw)


def _bias_reciprocal(xf, b, aw):
    return xf + b * _rcp(aw)


def _bias_reciprocal_fma(xf, b, aw):
    return fma_f32(b, np.broadcast_to(_rcp(aw), b.shape), xf)


# The float-bias epilogues as a table: FLOAT_BIAS name -> xf + bias / act_times_w_scale in that rounding.
FLOAT_BIAS_ADD = {"divide": _bias_divide, "reciprocal": _bias_reciprocal, "reciprocal_fma": _bias_reciprocal_fma}
assert FLOAT_BIAS_ADD.keys() == FLOAT_BIAS.keys()


def float_bias_variant(path: str, granularity: str, *, fp_contract: bool) -> str:
    """The float-bias rounding a build computes: 'divide' for the generic path and for AVX2 OUT_CHANNEL;
    'reciprocal' or 'reciprocal_fma' (fp_contract: the compiler fused it, as GCC's default -ffp-contract=fast
    does in FBGEMM's FMA-enabled AVX2 files) for AVX2 TENSOR/GROUP. This is a property of the build, not of the
    source: calibrate fp_contract against the peer."""
    if path == "generic" or granularity == "out_channel":
        return "divide"
    return "reciprocal_fma" if fp_contract else "reciprocal"


def requantize_output(inp, *, C_multiplier, C_zero_point: int, Aq_zero_point: int, Bq_zero_point, row_offsets=None,
                      col_offsets=None, bias=None, act_times_w_scale=None, granularity: str = "tensor",
                      groups: int = 1, fuse_relu: bool = False, path: str = "generic", float_bias: str | None = None,
                      overflow=None) -> np.ndarray:
    """ReQuantizeOutput<FUSE_RELU, Q_GRAN, BIAS_T>::f, the uint8 epilogue of FBGEMM's GEMMs (and of PyTorch's
    quantized::linear with the fbgemm engine), on an M x N int32 block starting at column 0.

    raw = inp - Aq_zp * col_offsets[j] - row_offsets[i] * Bq_zp[idx] (row_offsets None: B symmetric), int32;
    idx = 0 (tensor), j // (N / groups) (group: lowp indexes by column, FBGEMM by block.col_start, the same when
    a block lies in one group, as FBGEMM asserts), j (out_channel). An int32 bias is added in int32; a float32
    bias is scaled by 1/act_times_w_scale[idx] in the rounding `float_bias` names (FLOAT_BIAS; required when the
    bias is float). Then xf * C_multiplier[idx] in float32, rounded to nearest even, + C_zero_point, clamped to
    [fuse_relu ? C_zero_point : 0, 255].

    path='generic': lrintf, int64 add, clamp (OutputProcessing-inl.h L90-131). path='avx2' (what x86 always runs,
    QuantUtilsAvx2.cc requantizeOutputProcessingAvx2): cvtps2dq (out of range or NaN -> INT32_MIN), packs_epi32
    (sat16), adds_epi16 with int16(C_zero_point), packus_epi16, then max_epu8 with uint8(lo). The two agree for
    0 <= C_zero_point <= 255 and products within int16 after rounding, and differ outside (e.g. huge products).
    FBGEMM @71d6f8b; docs/research/fbgemm-requantization.md#requantizeoutput,
    docs/research/pytorch-fbgemm.md#quantizedlinear."""
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity={granularity!r}: expected one of {GRANULARITIES}")
    if path not in FBGEMM_TAILS:
        raise ValueError(f"path={path!r}: expected one of {', '.join(repr(p) for p in FBGEMM_TAILS)}")
    raw0 = ints(inp, "inp")
    M, N = raw0.shape
    if granularity == "tensor":
        idx = np.zeros(N, np.int64)
    elif granularity == "group":
        if N % groups:
            raise ValueError(f"N={N} is not a multiple of groups={groups}")
        idx = np.arange(N) // (N // groups)
    else:
        idx = np.arange(N)
    bzp = np.atleast_1d(ints(Bq_zero_point, "Bq_zero_point"))[idx] if row_offsets is not None else None
    mult = np.atleast_1d(_floats(C_multiplier, "C_multiplier"))[idx].reshape(1, N)
    is_float_bias = bias is not None and np.asarray(bias).dtype.kind == "f"
    raw = _corrected_raw(raw0, Aq_zero_point, col_offsets, bzp, row_offsets, None if is_float_bias else bias, overflow)
    xf = f32(raw)
    if is_float_bias:
        if float_bias not in FLOAT_BIAS:
            raise ValueError(f"float_bias={float_bias!r}: a float bias is rounded differently by different builds; "
                             f"pass one of {', '.join(FLOAT_BIAS)} (see float_bias_variant)")
        b = _floats(bias, "bias").reshape(1, N)
        aw = np.atleast_1d(_floats(act_times_w_scale, "act_times_w_scale"))[idx].reshape(1, N)
        xf = FLOAT_BIAS_ADD[float_bias](xf, b, aw)
    ab = xf * mult
    zp = int(C_zero_point)
    return FBGEMM_TAILS[path](ab, zp, zp if fuse_relu else 0)


# ---------------------------------------------------------------------------------------------------------------
# Quantization parameters and quantizers (src/QuantUtils.cc L39-191; include/fbgemm/QuantUtils.h L63-160)

SMALL_SCALE_THRESHOLD = F32(6.1e-5)


@dataclass(frozen=True)
class TensorQuantizationParams:
    """real = scale * (q - zero_point). scale is a float32 (FBGEMM) or a float64 (PyTorch's copy)."""
    scale: float
    zero_point: int


def _cdiv(a: int, b: int) -> int:
    """C++ integer division: truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _log2f(x: np.float32) -> np.float32:
    """log2f of a float32, taken as the correctly rounded float32 (glibc's log2f is within 1 ulp and correctly
    rounded on all but rare inputs; the float64 log2 rounded to float32 equals the correctly rounded value
    unless the true value lies within ~1e-16 relative of a float32 midpoint)."""
    return F32(math.log2(float(x)))


def _raise_small_scale(scale, mn, mx, qmin, qmax):
    """Both variants' handling of a scale below SMALL_SCALE_THRESHOLD: use the threshold and stretch the range
    (the end that is 0 stays 0), in float32 as the C++ does."""
    if mn == 0:
        mx = F32(SMALL_SCALE_THRESHOLD * F32(qmax - qmin))
    elif mx == 0:
        mn = F32(-SMALL_SCALE_THRESHOLD * F32(qmax - qmin))
    else:
        amp = F32(SMALL_SCALE_THRESHOLD / scale)
        mn, mx = F32(mn * amp), F32(mx * amp)
    return SMALL_SCALE_THRESHOLD, mn, mx


def choose_quantization_params(min: float, max: float, qmin: int, qmax: int, *,  # noqa: A002
                               preserve_sparsity: bool = False, force_scale_power_of_two: bool = False,
                               variant: str, reduce_range: bool = False) -> TensorQuantizationParams:
    """ChooseQuantizationParams(min, max, qmin, qmax, preserve_sparsity, force_scale_power_of_two).

    variant='fbgemm' (FBGEMM src/QuantUtils.cc @71d6f8b L39-141): float32 scale f32((double(max) - min) /
    (qmax - qmin)); 0 or a scale whose float reciprocal is infinite -> 0.1f; power of two via log2/log2f;
    SMALL_SCALE_THRESHOLD 6.1e-5f cut-off with min/max rescaled in float; zero point from the side with the
    smaller |qmin| + |min/scale| error term; nearbyint (ties to even), clamped to [qmin, qmax]. Symmetric
    (preserve_sparsity and min < 0 < max): max_scale from float divisions, zero point (qmin + qmax) / 2.0.
    variant='pytorch' (aten/src/ATen/native/quantized/cpu/QuantUtils.h, "should be identical"): reduce_range
    halves qmin/qmax (C++ integer division), the scale stays a double, power of two via log(x)/log(2), and the
    error terms are |qmin| - |min/scale| (a MINUS sign); it also checks min <= max and qmin < qmax.
    docs/research/fbgemm-requantization.md#choosequantizationparams. The float rounding of every step is reproduced;
    log/log2 are the host libm's (math.log, math.log2), as the C++ calls them."""
    if variant not in ("fbgemm", "pytorch"):
        raise ValueError("variant: expected 'fbgemm' (FBGEMM's float32 scale) or 'pytorch' (ATen's double copy)")
    if reduce_range and variant != "pytorch":
        raise ValueError("reduce_range exists only in PyTorch's copy (variant='pytorch'); FBGEMM has none")
    mn, mx = F32(min), F32(max)
    if variant == "pytorch":
        if not mn <= mx:
            raise ValueError("In ChooseQuantizationParams, min should be less than or equal to max")
        if reduce_range:
            qmin, qmax = _cdiv(qmin, 2), _cdiv(qmax, 2)
    symmetric = bool(mn < 0 and mx > 0 and preserve_sparsity)
    if symmetric:
        sqmin = -(_cdiv(qmax - qmin, 2) + 1)
        sqmax = _cdiv(qmax - qmin, 2)
        max_scale = float(np.maximum(np.abs(mn / F32(sqmin)), np.abs(mx / F32(sqmax))))   # float divisions
        mn, mx = F32(max_scale * sqmin), F32(max_scale * sqmax)
    mn, mx = np.minimum(mn, F32(0)), np.maximum(mx, F32(0))
    if variant == "pytorch" and not qmin < qmax:
        raise ValueError("qmin should be less than qmax")
    scale64 = (float(mx) - float(mn)) / (qmax - qmin)
    if variant == "fbgemm":
        scale = F32(scale64)
        with np.errstate(divide="ignore", over="ignore"):
            if scale == 0 or np.isinf(F32(1) / scale):
                scale = F32(0.1)
        if force_scale_power_of_two:
            if scale < 1:
                scale = F32(1.0 / (1 << int(math.floor(math.log2(1.0 / float(scale))))))
            else:
                scale = F32(1 << int(np.ceil(_log2f(scale))))
        if scale < SMALL_SCALE_THRESHOLD:
            scale, mn, mx = _raise_small_scale(scale, mn, mx, qmin, qmax)
        s = float(scale)
    else:
        s = scale64
        with np.errstate(divide="ignore", over="ignore"):
            if F32(s) == 0 or np.isinf(F32(1) / F32(s)):
                s = 0.1
        if force_scale_power_of_two:
            if s < 1:
                s = 1.0 / (1 << int(math.floor(math.log(1.0 / s) / math.log(2))))
            else:
                s = float(1 << int(math.ceil(math.log(s) / math.log(2))))
        if s < float(SMALL_SCALE_THRESHOLD):
            s, mn, mx = _raise_small_scale(F32(s), mn, mx, qmin, qmax)
            s = float(s)
    zp_from_min = qmin - float(mn) / s
    zp_from_max = qmax - float(mx) / s
    sign = 1.0 if variant == "fbgemm" else -1.0
    err_min = abs(qmin) + sign * abs(float(mn) / s)
    err_max = abs(qmax) + sign * abs(float(mx) / s)
    zp0 = zp_from_min if err_min < err_max else zp_from_max
    if mn < 0 and mx > 0 and preserve_sparsity:
        zp0 = (qmin + qmax) / 2.0
    if zp0 < qmin:
        zp = qmin
    elif zp0 > qmax:
        zp = qmax
    else:
        zp = int(np.rint(zp0))
    return TensorQuantizationParams(scale=F32(s) if variant == "fbgemm" else s, zero_point=int(zp))


QUANTIZE = {
    "fbgemm": "zp + nearbyint(f32(src * f32(1/scale))) in float, then clamp: FBGEMM Quantize<T> since #362 "
              "(QuantUtils.h @71d6f8b L63-92), PyTorch quantize_per_tensor",
    "fbgemm_legacy": "nearbyint(f32(zp + f32(src * f32(1/scale)))): FBGEMM's LEGACY=true Quantize (91063b0c3, removed "
                     "in de265ff47); differs on exact .5 ties",
    "divide": "nearbyint(f32(src / scale)) + zp: ONNX QuantizeLinear, ORT MLAS MlasQuantizeLinear (scalar and AVX2)",
}


def _quantize_fbgemm(x, scale, zpf, zp):
    return zpf + np.rint(x * (F32(1) / scale))              # zp + nearbyint(...): a float expression


def _quantize_fbgemm_legacy(x, scale, zpf, zp):
    return np.rint(zpf + x * (F32(1) / scale))


def _quantize_divide(x, scale, zpf, zp):
    return np.rint(x / scale).astype(np.float64) + zp


# The quantizers as a table: QUANTIZE name -> the unclamped value (float) in that rounding.
QUANTIZE_FNS = {"fbgemm": _quantize_fbgemm, "fbgemm_legacy": _quantize_fbgemm_legacy, "divide": _quantize_divide}
assert QUANTIZE_FNS.keys() == QUANTIZE.keys()


def _qrange(precision, signed):
    return (-(1 << (precision - 1)), (1 << (precision - 1)) - 1) if signed else (0, (1 << precision) - 1)


def quantize(src, scale, zero_point: int, *, variant: str, precision: int = 8, signed: bool = False) -> np.ndarray:
    """Quantize float32 src to integers in [0, 2^p - 1] (or the signed range), in the rounding `variant` names
    (QUANTIZE). FBGEMM forms zp + r in float32 (zero_point + std::nearbyint(float) is a float expression) and
    clamps in double. NaN raises OutOfDomain (the scalar C++ converts it through double: undefined).
    docs/research/fbgemm-requantization.md#quantize, docs/research/onnx-mlas.md. Returns int64 values (the caller picks
    the storage type)."""
    if variant not in QUANTIZE:
        raise ValueError(f"variant={variant!r}: expected one of {', '.join(QUANTIZE)}")
    x = _floats(src, "src")
    check_domain(np.isnan(x), "nan", "quantizing NaN is undefined in the scalar C++")
    scale = F32(scale)
    zpf = F32(zero_point)
    lo, hi = _qrange(precision, signed)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        v = QUANTIZE_FNS[variant](x, scale, zpf, int(zero_point))
    v = np.clip(np.asarray(v, np.float64), lo, hi)
    return v.astype(np.int64)


def dequantize(q, scale, zero_point: int) -> np.ndarray:
    """Dequantize(q) = f32(scale * f32(q - zero_point)). FBGEMM include/fbgemm/QuantUtils.h @71d6f8b L136-140."""
    return F32(scale) * f32(ints(q, "q") - int(zero_point))


def choose_requantization_multiplier(real_multiplier, *, precision: int = 32) -> tuple[int, int]:
    """ChooseRequantizationMultiplier(real_multiplier) -> (multiplier, right_shift), real ~ multiplier *
    2^-right_shift: float doubling/halving into [0.5, 1], q = nearbyint(real * 2^(precision-1)), q == 2^(p-1)
    -> q/2, shift - 1. The multiplier carries the float's 24 significant bits.
    FBGEMM src/QuantUtils.cc @71d6f8b L144-191
    (docs/research/fbgemm-requantization.md#chooserequantizationmultiplier)."""
    r = F32(real_multiplier)
    if not r > 0:
        raise ValueError("real_multiplier must be > 0 (FBGEMM asserts != 0 and q >= 0)")
    s = 31
    while r < F32(0.5):
        r = F32(r * F32(2))
        s += 1
    while r > F32(1):
        r = F32(r / F32(2))
        s -= 1
    q = int(np.rint(F32(r * F32(float(1 << (precision - 1))))))
    if q == 1 << (precision - 1):
        q //= 2
        s -= 1
    if not (0 <= s < 64 and q <= INT32_MAX):
        raise ValueError(f"real_multiplier {float(real_multiplier)!r} gives shift {s}, outside what FBGEMM asserts")
    return q, s


def saturating_rounding_mul_with_shift(a, b, right_shift: int) -> np.ndarray:
    """SaturatingRoundingMulWithShift(a, b, s) = (int64(a) * b + 2^(s-1)) >> s: half-up rounding, and NOT
    saturating despite the name. s >= 1 (1 << -1 is undefined). FBGEMM src/QuantUtils.cc @71d6f8b L222-230."""
    if not 1 <= right_shift <= 62:
        raise ValueError("right_shift must be in 1..62")
    return (ints(a, "a") * ints(b, "b") + (1 << (right_shift - 1))) >> right_shift


def requantize_fixed_point(src, zero_point: int, multiplier: int, right_shift: int, *, precision: int = 8,
                           signed: bool = False) -> np.ndarray:
    """RequantizeFixedPoint<T>: clamp(zp + SaturatingRoundingMulWithShift(src, multiplier, shift)) to the
    precision's range. FBGEMM include/fbgemm/QuantUtils.h @71d6f8b L192-230
    (docs/research/fbgemm-requantization.md#chooserequantizationmultiplier)."""
    lo, hi = _qrange(precision, signed)
    return np.clip(int(zero_point) + saturating_rounding_mul_with_shift(src, multiplier, right_shift), lo, hi)


def requantize_float(src, zero_point: int, multiplier, *, precision: int = 8, signed: bool = False) -> np.ndarray:
    """Requantize<T> with a float multiplier: clamp(zp + lrintf(f32(f32(src) * multiplier))).
    FBGEMM include/fbgemm/QuantUtils.h @71d6f8b L232-260
    (docs/research/fbgemm-requantization.md#chooserequantizationmultiplier)."""
    lo, hi = _qrange(precision, signed)
    return np.clip(int(zero_point) + _rne_int(f32(ints(src, "src")) * F32(multiplier)), lo, hi)
