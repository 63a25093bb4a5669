"""lowp's contract models of the peer libraries' quantized operators, composed from the conformance modules:
an accumulation contract (contracts.exact, or contracts.pair_saturating for VPMADDUBSW: u8*s8 pair sums
clipped to int16, pairs starting at even k; for ONNX Runtime, the pairs of the raw operands with the zero points
folded in by sums, contracts.pair_saturating_folded_zero_points) chosen by the instruction-set parameter `isa`, then
the library's epilogue (fbgemm_quant.requantize_output and friends) with its float rounding as a named parameter.

Every model takes a problem dict (problems.py) and returns what the library's operator returns (uint8 codes, int32
accumulators or float32 values). Nothing here imports a peer library: the models are pure numpy.

Sources: docs/research/fbgemm-requantization.md, docs/research/onednn.md, docs/research/pytorch-fbgemm.md,
docs/research/onnx-mlas.md (FBGEMM @71d6f8b, oneDNN
@3f27bec, PyTorch aten/src/ATen/native/quantized/cpu/qlinear*.cpp), intel/ideep include/ideep/operators/matmul.hpp
(the reciprocal scales PyTorch's onednn engine hands to oneDNN), onnxruntime quantization kernels and MLAS
(`MlasRequantizeOutput`, the QGEMM dispatch and zero-point folding, Avx2WeightS8ToU8Transformer:
docs/research/onnx-mlas.md#mlas-qgemm), ONNX Operators.md (MatMulInteger, QLinearMatMul, ConvInteger).
"""
from __future__ import annotations

import numpy as np

from lowp.conformance.contracts import int32 as contracts
from lowp.conformance.contracts.fbgemm import choose_quantization_params, f32, fma_f32, quantize, requantize_output

F32 = np.float32
ISAS = ("exact", "pair_saturating", "pair_saturating_igemm")


def accumulate(A, B, isa: str) -> np.ndarray:
    """C32 = A (M x K, uint8) times B (K x N, int8) under the instruction set's accumulation contract:
    'exact' (VPDPBUSD on AVX-512 VNNI: exact int32, wrapping); 'pair_saturating' (VPMADDUBSW + VPMADDWD + VPADDD on
    AVX2 and AVX-512 without VNNI: pairs (k, k+1), k even, saturated to int16, as FBGEMM packs K);
    'pair_saturating_igemm' (the same instructions in oneDNN's x64 int8 GEMM, whose driver packs K in blocks and
    starts the pairs at each block: contracts.onednn_igemm_k_blocks)."""
    if isa == "exact":
        return contracts.exact(A, B).astype(np.int64)
    if isa == "pair_saturating":
        return contracts.pair_saturating(A, B).astype(np.int64)
    if isa == "pair_saturating_igemm":
        return contracts.pair_saturating_k_blocks(A, B, contracts.onednn_igemm_k_blocks(A.shape[1])).astype(np.int64)
    raise ValueError(f"isa={isa!r}: expected one of {ISAS}")


def _rne_clip_u8(x, lo=0):
    return np.clip(np.rint(np.asarray(x, np.float64)), lo, 255).astype(np.uint8)


# ---------------------------------------------------------------------------------------------------------------
# PyTorch, engine "fbgemm" (and "x86", which packs linear weights for FBGEMM too)

def _fbgemm_scales(p):
    """act_times_w_scale[n] = f32(f32(x_scale) * w_scale[n]) and mult = f32(act_w / f32(y_scale)), the float32
    arithmetic of PackedLinearWeight::apply_impl (w_scale is stored as float at prepack)."""
    ws = f32(np.asarray(p["w_scale"], np.float64))
    act_w = f32(F32(p["x_scale"]) * ws)
    mult = f32(act_w / F32(p["y_scale"]))
    return act_w, mult


def torch_fbgemm_linear(p, *, isa: str, float_bias: str = "reciprocal_fma") -> np.ndarray:
    """quantized::linear / linear_relu with the fbgemm engine: FBGEMM's GEMM under `isa`, then ReQuantizeOutput's
    x86 (AVX2) epilogue with the float bias rounded as `float_bias` says for per-tensor weights; per-channel
    weights divide (_mm256_div_ps), whatever the build (fbgemm_quant.float_bias_variant). Research 6.2."""
    A, W = p["A"], p["W"]
    K = A.shape[1]
    per_channel = p["per_channel"]
    wzp = np.asarray(p["w_zp"], np.int64)
    act_w, mult = _fbgemm_scales(p)
    C = accumulate(A, W.T, isa)
    row_off = A.astype(np.int64).sum(axis=1)
    zp_per_col = wzp if per_channel else np.full(W.shape[0], wzp[0])
    col_off = W.astype(np.int64).sum(axis=1) - zp_per_col * K
    bias = p["bias"]
    variant = None
    if bias is not None:
        variant = "divide" if per_channel else float_bias
    return requantize_output(C, C_multiplier=mult, C_zero_point=int(p["y_zp"]), Aq_zero_point=int(p["x_zp"]),
                             Bq_zero_point=wzp, row_offsets=row_off, col_offsets=col_off, bias=bias,
                             act_times_w_scale=act_w if bias is not None else None,
                             granularity="out_channel" if per_channel else "tensor", fuse_relu=p["relu"],
                             path="avx2", float_bias=variant, overflow="wrap")


def dynamic_qparams(X, reduce_range: bool):
    """fbgemm::FindMinMax then quant_utils::ChooseQuantizationParams(min, max, 0, 255, preserve_sparsity=false,
    force_scale_power_of_two=false, reduce_range): PyTorch's copy (double scale). Research 2.2, 6.4."""
    return choose_quantization_params(float(X.min()), float(X.max()), 0, 255, variant="pytorch",
                                      reduce_range=reduce_range)


FBGEMM_DYNAMIC_QUANTIZERS = {
    "zp_in_fma": "rne(fma(x, f32(1/scale), zp)): the zero point added inside one fused multiply-add, then cvtps2dq",
    "zp_then_round": "rne(f32(zp + f32(x * f32(1/scale)))): two roundings, zero point added before rounding "
                     "(fbgemm_quant.quantize variant 'fbgemm_legacy')",
    "round_then_zp": "zp + rne(f32(x * f32(1/scale))): FBGEMM's current Quantize (fbgemm_quant variant 'fbgemm')",
}


def fbgemm_dynamic_quantize(X, scale_f, zero_point: int, quantizer: str) -> np.ndarray:
    """The activations of the dynamic path, quantized by FBGEMM's QuantizeAvx2 inside PackAWithQuantRowOffset, in
    the rounding `quantizer` names (FBGEMM_DYNAMIC_QUANTIZERS), clamped to 0..255."""
    inv = F32(F32(1) / F32(scale_f))
    if quantizer == "zp_in_fma":
        v = fma_f32(X, np.full(X.shape, inv, F32), np.full(X.shape, F32(zero_point), F32))
        return np.clip(np.rint(v.astype(np.float64)), 0, 255).astype(np.uint8)
    if quantizer == "zp_then_round":
        return quantize(X, F32(scale_f), zero_point, variant="fbgemm_legacy").astype(np.uint8)
    if quantizer == "round_then_zp":
        return quantize(X, F32(scale_f), zero_point, variant="fbgemm").astype(np.uint8)
    raise ValueError(f"quantizer={quantizer!r}: expected one of {', '.join(FBGEMM_DYNAMIC_QUANTIZERS)}")


def torch_fbgemm_linear_dynamic(p, *, isa: str, epilogue: str = "fma", quantizer: str = "zp_in_fma") -> np.ndarray:
    """quantized::linear_dynamic with the fbgemm engine: X quantized with the PyTorch qparams by FBGEMM's
    QuantizeAvx2 (in the rounding `quantizer` names: see docs/findings.md), the GEMM under `isa`, then
    ReQuantizeForFloat's AVX2
    epilogue out = f32(raw) * f32(f32(scale) * w_scale[n]) + bias[n] with one rounding ('fma', a contracted
    build) or two ('separate'). Research 1.6, 6.4."""
    X, W = p["X"], p["W"]
    K = X.shape[1]
    qp = dynamic_qparams(X, p["reduce_range"])
    scale_f = F32(qp.scale)
    A = fbgemm_dynamic_quantize(X, scale_f, qp.zero_point, quantizer)
    wzp = np.asarray(p["w_zp"], np.int64)
    zp_per_col = wzp if p["per_channel"] else np.full(W.shape[0], wzp[0])
    C = accumulate(A, W.T, isa)
    row_off = A.astype(np.int64).sum(axis=1)[:, None]
    col_off = (W.astype(np.int64).sum(axis=1) - zp_per_col * K)[None, :]
    raw = contracts._wrap32(C - qp.zero_point * col_off - row_off * zp_per_col[None, :]).astype(np.int64)
    mult = f32(scale_f * f32(np.asarray(p["w_scale"], np.float64)))
    mult = np.broadcast_to(mult if p["per_channel"] else mult[:1], (W.shape[0],))[None, :]
    rawf = f32(raw)
    if p["bias"] is None:
        out = f32(rawf * mult)
    elif epilogue == "fma":
        out = fma_f32(rawf, np.broadcast_to(mult, rawf.shape), np.broadcast_to(p["bias"][None, :], rawf.shape))
    elif epilogue == "separate":
        out = f32(f32(rawf * mult) + p["bias"][None, :])
    else:
        raise ValueError(f"epilogue={epilogue!r}: expected 'fma' or 'separate'")
    if p["relu"]:
        out = np.maximum(out, F32(0))
    return out.astype(F32)


# ---------------------------------------------------------------------------------------------------------------
# PyTorch, engine "onednn": ideep hands oneDNN reciprocal scales; oneDNN inverts them again

def onednn_weight_scales(p):
    """The weight scales oneDNN receives, one per output channel. PyTorch's onednn prepack stores reciprocals:
    per tensor in double (1.0 / q_scale(), stored as float), per channel in float (1.0f /
    q_per_channel_scales()[i].item<float>()); ideep inverts them again in double (s = 1.0 / s, stored as float).
    qlinear_prepack.cpp PackedLinearWeightsOnednn::prepack; ideep matmul.hpp do_prepare_static_quant."""
    ws = np.asarray(p["w_scale"], np.float64)
    if p["per_channel"]:
        rcp = F32(1) / ws.astype(F32)
    else:
        rcp = np.full(p["W"].shape[0], F32(1.0 / float(ws[0])), F32)
    return (1.0 / rcp.astype(np.float64)).astype(F32)


def onednn_static_scales(p):
    """The float32 scales oneDNN receives from PyTorch's onednn engine (qlinear.cpp apply_impl, ideep matmul.hpp
    do_prepare_static_quant), each a reciprocal of a reciprocal: src = f32(1.0 / double(f32(1.0 / x_scale))),
    wei = onednn_weight_scales, dst = f32(1.0f / f32(1.0 / y_scale)); a scale equal to 1 is not set at all.
    oneDNN then multiplies by f32(1.f / dst) (cpu_primitive.hpp DEFINE_ARG_SCALES_BUFFER)."""
    src = F32(1.0 / float(F32(1.0 / float(p["x_scale"]))))
    dst = F32(F32(1) / F32(1.0 / float(p["y_scale"])))
    return src, onednn_weight_scales(p), F32(F32(1) / dst)


def _onednn_scale(accf, src, wei, order):
    if order == "combined":           # precompute_scales: f32(src * wei[n]), one multiply (gemm:jit pp kernel)
        return f32(accf * f32(src * wei)[None, :])
    if order == "sequential":         # brgemm: vmulps by the src scale, then by the weight scale
        return f32(f32(accf * src) * wei[None, :])
    raise ValueError(f"scale order {order!r}: expected 'combined' or 'sequential'")


def torch_onednn_linear(p, *, isa: str, scales: str = "combined") -> np.ndarray:
    """quantized::linear / linear_relu with the onednn engine (oneDNN matmul u8 x s8 -> u8, weights zero point 0):
    acc = GEMM under `isa` minus x_zp * colsum(W) (int32), then in float32, one rounding per instruction:
    f = acc * scales (order `scales`), + bias, relu, * f32(1/dst), + f32(y_zp), clamp [0, 255], cvtps2dq (rne).
    oneDNN's gemm:jit pp kernel (jit_gemm_inner_product_utils.cpp compute_oc_channel_blk) and brgemm kernel
    (jit_brgemm_kernel.cpp store_accumulators_apply_post_ops) order the steps this way; they differ in whether the
    src and weight scales are multiplied first ('combined') or applied one after the other ('sequential')."""
    A, W = p["A"], p["W"]
    src, wei, dst_inv = onednn_static_scales(p)
    C = accumulate(A, W.T, isa) - int(p["x_zp"]) * W.astype(np.int64).sum(axis=1)[None, :]
    f = _onednn_scale(f32(contracts._wrap32(C).astype(np.int64)), src, wei, scales)
    if p["bias"] is not None:
        f = f32(f + p["bias"][None, :])
    if p["relu"]:
        f = np.maximum(f, F32(0))
    if dst_inv != 1:
        f = f32(f * dst_inv)
    f = f32(f + F32(p["y_zp"]))
    return _rne_clip_u8(np.clip(f, F32(0), F32(255)))


def onednn_dynamic_quantize(X, qp):
    """The f32 -> u8 reorder of the dynamic path: ideep sets the reorder's dst scale to
    s = f32(1.0 / double(f32(1.0 / scale))); oneDNN's jit reorder multiplies by f32(1.f / s) (jit_uni_reorder.cpp),
    adds the zero point in float, saturates to [0, 255] and rounds (cvtps2dq, ties to even)."""
    s = F32(1.0 / float(F32(1.0 / qp.scale)))
    inv = F32(F32(1) / s)
    v = f32(f32(X * inv) + F32(qp.zero_point))
    return _rne_clip_u8(np.clip(v, F32(0), F32(255))), s


def torch_onednn_linear_dynamic(p, *, isa: str, scales: str = "combined") -> np.ndarray:
    """quantized::linear_dynamic with the onednn engine: PyTorch qparams (FindMinMax, ChooseQuantizationParams with
    reduce_range), the oneDNN reorder f32 -> u8 (onednn_dynamic_quantize), then matmul u8 x s8 -> f32:
    f = (acc - zp * colsum(W)) * scales (order `scales`) + bias, relu. apply_dynamic_impl, ideep matmul.hpp."""
    X, W = p["X"], p["W"]
    qp = dynamic_qparams(X, p["reduce_range"])
    A, s = onednn_dynamic_quantize(X, qp)
    src = F32(s)          # ideep's inverted src scale, handed to the matmul as is
    wei = onednn_weight_scales(p)
    C = accumulate(A, W.T, isa) - int(qp.zero_point) * W.astype(np.int64).sum(axis=1)[None, :]
    f = _onednn_scale(f32(contracts._wrap32(C).astype(np.int64)), src, wei, scales)
    if p["bias"] is not None:
        f = f32(f + p["bias"][None, :])
    if p["relu"]:
        f = np.maximum(f, F32(0))
    return f.astype(F32)


# ---------------------------------------------------------------------------------------------------------------
# ONNX Runtime (MLAS) and the ONNX specification
#
# Every ORT operator here is one MLAS QGEMM call (ConvInteger after an im2col), so one accumulation parameter covers
# all three. MLAS dispatches on the operand types (qgemm.h MlasGemmQuantGetDispatch) and, for u8 x s8 only, on CPUID
# (platform.cpp): the u8 x s8 kernel is VPDPBUSD(S) on AVX-512 VNNI / AVX-VNNI and AMX (exact), VPMADDUBSW on AVX2
# and AVX-512 without VNNI ('pair_saturating'); u8 x u8 widens B to 16 bits (VPMADDWD: exact) and s8 x s8, s8 x u8
# run MLAS's generic C kernel (exact) on every x86 CPU. docs/research/onnx-mlas.md#mlas-qgemm.

ORT_ACCUMULATIONS = {
    "exact": "sum_k (A - a_zp)(B - b_zp) in int32, wrapping: the ONNX specification; MLAS's VNNI/AMX u8 x s8 kernels, "
             "its u8 x u8 kernels and its generic s8 kernels",
    "pair_saturating+zp_folded": "MLAS's u8 x s8 kernel on AVX2 and AVX-512 without VNNI (VPMADDUBSW, VPMADDWD, "
                                 "VPADDD): pair sums of the RAW operands at even k saturated to int16, the zero points "
                                 "folded in afterwards by row and column sums (contracts.pair_saturating_folded_zero_"
                                 "points)",
    "pair_saturating+zp_subtracted": "the pairs of the zero-point-shifted operands saturated: the other order, which "
                                     "no library lowp knows uses (contracts.pair_saturating_shifted_zero_points)",
}
ORT_ISAS = ("exact", "pair_saturating")
# Avx2WeightS8ToU8Transformer's s8_overflow_ops: the operators (and the versions of their definitions) whose constant
# s8 weight session.x64quantprecision rewrites to u8. ConvInteger is not among them; QLinearMatMul only in its
# opset-10 definition, so a model importing opset 21 or later keeps its s8 weights (measured: docs/findings.md 4.5).
S8_WEIGHTS_TO_U8_SINCE = {"MatMulInteger": (10,), "QLinearMatMul": (10,)}


def _zp_sub(X, zp, axis=None):
    x = X.astype(np.int64)
    z = np.asarray(zp, np.int64)
    if z.ndim and axis is not None:
        shape = [1] * x.ndim
        shape[axis] = -1
        z = z.reshape(shape)
    return x - z


def mlas_qgemm(A, B, a_zp, b_zp, *, a_signed: bool, b_signed: bool, isa: str = "exact",
               zero_points: str = "folded") -> np.ndarray:
    """C = sum_k (A - a_zp)(B - b_zp[n]) (A is M x K, B is K x N, b_zp scalar or per column) as MLAS's QGEMM computes
    it for these operand types: with isa='pair_saturating' the u8 x s8 kernel is VPMADDUBSW, whose pairs are of the
    raw operands with the zero points folded in by sums (zero_points='folded', qgemm.h) or, the unused alternative,
    of the shifted operands ('subtracted'); every other type pair, and every pair under isa='exact', is exact."""
    if isa not in ORT_ISAS:
        raise ValueError(f"isa={isa!r}: expected one of {ORT_ISAS}")
    if zero_points not in ("folded", "subtracted"):
        raise ValueError(f"zero_points={zero_points!r}: expected 'folded' or 'subtracted'")
    if isa == "pair_saturating" and not a_signed and b_signed:
        fn = contracts.pair_saturating_folded_zero_points if zero_points == "folded" else \
            contracts.pair_saturating_shifted_zero_points
        return fn(A, B, a_zp, b_zp)
    return contracts._wrap32(_zp_sub(A, a_zp) @ _zp_sub(B, b_zp, axis=1))


def op_since_version(op: str, opset: int) -> int:
    """The version of the operator's definition a model importing `opset` uses (ONNX Operators.md): MatMulInteger
    and ConvInteger 10; QLinearMatMul 10, and 21 from opset 21 on."""
    return 21 if op == "QLinearMatMul" and opset >= 21 else 10


def s8_weights_rewritten(op: str, p) -> bool:
    """Whether ORT's Avx2WeightS8ToU8Transformer (session.x64quantprecision=1 on a CPU whose MLAS u8 x u8 and u8 x s8
    dispatches differ: every AVX2 CPU, VNNI or not) rewrites this problem's weight B to u8: B is a constant s8
    tensor of an operator (definition) in S8_WEIGHTS_TO_U8_SINCE with some value outside [-64, 64]
    (s8_to_u8.h Int8TensorProto2Uint8)."""
    if p["types"][1] != "s8" or op_since_version(op, p.get("opset", 21)) not in S8_WEIGHTS_TO_U8_SINCE.get(op, ()):
        return False
    B = p["B"].astype(np.int64)
    return bool(((B < -64) | (B > 64)).any())


def rewrite_s8_weights(p) -> dict:
    """The rewritten problem: B ^ 0x80 as u8 and its zero point ^ 0x80 (the same real values: B - b_zp is unchanged),
    so MLAS runs its u8 x u8 kernel."""
    flip = lambda v: (np.asarray(v).astype(np.int16) + 128).astype(np.uint8)      # noqa: E731  (x ^ 0x80)
    return dict(p, B=flip(p["B"]), b_zp=flip(p["b_zp"]), types=(p["types"][0], "u8"))


def _ort_gemm(op, p, *, isa, zero_points, precision_mode):
    if precision_mode and s8_weights_rewritten(op, p):
        p = rewrite_s8_weights(p)
    ta, tb = p["types"]
    return mlas_qgemm(p["A"], p["B"], p["a_zp"], p["b_zp"], a_signed=ta == "s8", b_signed=tb == "s8", isa=isa,
                      zero_points=zero_points)


def onnx_matmul_integer(p, *, isa: str = "exact", zero_points: str = "folded",
                        precision_mode: bool = False) -> np.ndarray:
    """MatMulInteger: sum_k (A - a_zp)(B - b_zp[n]) in int32 ("accumulation may overflow iff in 32 bits"), as MLAS
    computes it under `isa` (mlas_qgemm); precision_mode: the session's x64quantprecision rewrite of the weights
    (s8_weights_rewritten). isa='exact' is the ONNX specification."""
    return _ort_gemm("MatMulInteger", p, isa=isa, zero_points=zero_points, precision_mode=precision_mode)


def qlinear_output_scale(p, order: str = "ab_then_y"):
    """QLinearMatMul's float32 multiplier per column: ORT computes f32(f32(a_scale * b_scale[n]) / y_scale)
    ('ab_then_y', as QGemm's ComputeOutputScale); 'a_then_by' = f32(a_scale * f32(b_scale / y_scale))."""
    a, b, y = F32(p["a_scale"]), np.atleast_1d(np.asarray(p["b_scale"], F32)), F32(p["y_scale"])
    if order == "ab_then_y":
        return f32(f32(a * b) / y)
    if order == "a_then_by":
        return f32(a * f32(b / y))
    raise ValueError(order)


def onnx_qlinear_matmul(p, *, isa: str = "exact", zero_points: str = "folded", precision_mode: bool = False,
                        rounding: str = "mlas_f32") -> np.ndarray:
    """QLinearMatMul: acc = sum_k (a - a_zp)(b - b_zp[n]) in int32 as MLAS computes it under `isa` (mlas_qgemm, with
    the x64quantprecision rewrite where precision_mode and the problem's opset say so), then
    y = saturate(rne(acc * multiplier) + y_zp).
    rounding='mlas_f32': MlasRequantizeOutput, f32(f32(acc) * f32 multiplier), clamp to [qmin - zp, qmax - zp] in
    float, cvtps2dq (ties to even), + zp; the same on the AVX2 and the VNNI paths (measured, docs/peers.md).
    rounding='onnx_reference': onnx/reference/ops/op_qlinear_matmul.py, the float32 multiplier
    a_scale*b_scale/y_scale times the int32 accumulator in float64, then rint and clip."""
    acc = _ort_gemm("QLinearMatMul", p, isa=isa, zero_points=zero_points,
                    precision_mode=precision_mode).astype(np.int64)
    out_dtype = p["y_dtype"]
    info = np.iinfo(out_dtype)
    zp = int(p["y_zp"])
    if rounding == "mlas_f32":
        m = qlinear_output_scale(p)[None, :]
        f = f32(f32(acc) * m)
        f = np.clip(f, F32(info.min - zp), F32(info.max - zp))
        return (np.rint(f.astype(np.float64)).astype(np.int64) + zp).astype(out_dtype)
    if rounding == "onnx_reference":
        m = (F32(p["a_scale"]) * np.atleast_1d(np.asarray(p["b_scale"], F32)) / F32(p["y_scale"])).astype(F32)
        d = acc.astype(np.float64) * m.astype(np.float64)[None, :] + zp
        return np.clip(np.rint(d), info.min, info.max).astype(out_dtype)
    raise ValueError(f"rounding={rounding!r}")


def im2col(X, KH, KW, strides, dilations, pads, fill) -> np.ndarray:
    """ORT's math::Im2col (NCHW) for all images of X (N x C x H x W): rows (c, kh, kw) in that order, columns
    (image, oh, ow); positions in the padding hold `fill` (ORT passes the input zero point)."""
    sh, sw = strides
    dh, dw = dilations
    pt, pl, pb, pr = pads
    N, C, H, Wd = X.shape
    xp = np.full((N, C, H + pt + pb, Wd + pl + pr), fill, np.int64)
    xp[:, :, pt:pt + H, pl:pl + Wd] = X
    OH = (H + pt + pb - dh * (KH - 1) - 1) // sh + 1
    OW = (Wd + pl + pr - dw * (KW - 1) - 1) // sw + 1
    cols = np.empty((C, KH, KW, N, OH, OW), np.int64)
    for kh in range(KH):
        for kw in range(KW):
            patch = xp[:, :, kh * dh: kh * dh + sh * (OH - 1) + 1: sh, kw * dw: kw * dw + sw * (OW - 1) + 1: sw]
            cols[:, kh, kw] = patch.transpose(1, 0, 2, 3)
    return cols.reshape(C * KH * KW, N * OH * OW), (OH, OW)


def onnx_conv_integer(p, *, isa: str = "exact", zero_points: str = "folded", padding: str = "zero_point",
                      precision_mode: bool = False) -> np.ndarray:
    """ConvInteger (NCHW, OIHW, groups, strides, dilations, pads): y = sum (x - x_zp)(w - w_zp[o]) in int32, as ORT
    computes it (conv_integer.cc): per group one MLAS QGEMM whose FIRST operand is the weight W (O/g x C/g*kh*kw,
    zero point w_zp) and second the im2col of X (zero point x_zp), so under isa='pair_saturating' it is a u8 weight
    with an s8 input that saturates, not the other way round. precision_mode changes nothing (the x64quantprecision
    rewrite does not cover ConvInteger). padding='zero_point': padded positions hold x_zp, i.e. contribute nothing
    (ORT's im2col pads with the zero point); padding='zero': they hold the integer 0."""
    del precision_mode
    X, Wt = p["X"], p["W"]
    tx, tw = p["types"]
    g = p["group"]
    N = X.shape[0]
    O, Cg, KH, KW = Wt.shape
    fill = int(p["x_zp"]) if padding == "zero_point" else 0
    if padding not in ("zero_point", "zero"):
        raise ValueError(f"padding={padding!r}")
    og = O // g
    out = None
    for gi in range(g):
        cols, (OH, OW) = im2col(X[:, gi * Cg:(gi + 1) * Cg], KH, KW, p["strides"], p["dilations"], p["pads"], fill)
        if out is None:
            out = np.zeros((N, O, OH, OW), np.int64)
        w = Wt[gi * og:(gi + 1) * og].reshape(og, -1)
        w_zp = np.asarray(p["w_zp"])
        if w_zp.size != 1:
            raise ValueError("ORT's ConvInteger takes a per-tensor w_zp only (conv_integer.cc)")
        w_zp = w_zp.reshape(-1)[0]
        y = mlas_qgemm(w, cols.astype(X.dtype), w_zp, p["x_zp"], a_signed=tw == "s8", b_signed=tx == "s8", isa=isa,
                       zero_points=zero_points).astype(np.int64)
        out[:, gi * og:(gi + 1) * og] = y.reshape(og, N, OH, OW).transpose(1, 0, 2, 3)
    return contracts._wrap32(out)


# ---------------------------------------------------------------------------------------------------------------
# The contract each (library, operator) is judged against, and the named alternatives reported beside it

def _bind(fn, **kw):
    def model(p):
        return fn(p, **kw)
    return model


def candidates(library: str, op: str, isa: str, *, precision_mode: bool = False) -> dict:
    """{variant name: model} for one peer operator on one path; the first entry is lowp's contract for it (the
    variant the installed library implements, calibrated and explained in docs/peers.md), the others are the
    named alternatives whose agreement is reported beside it, so a report shows what each parameter decides.
    precision_mode: ONNX Runtime's session.x64quantprecision rewrite is in force on this path."""
    other = "pair_saturating" if isa == "exact" else "exact"
    if (library, op) == ("torch-fbgemm", "linear"):
        return {f"{isa}+reciprocal_fma": _bind(torch_fbgemm_linear, isa=isa, float_bias="reciprocal_fma"),
                f"{isa}+reciprocal": _bind(torch_fbgemm_linear, isa=isa, float_bias="reciprocal"),
                f"{isa}+divide": _bind(torch_fbgemm_linear, isa=isa, float_bias="divide"),
                f"{other}+reciprocal_fma": _bind(torch_fbgemm_linear, isa=other, float_bias="reciprocal_fma")}
    if (library, op) == ("torch-fbgemm", "linear_dynamic"):
        return {f"{isa}+fma": _bind(torch_fbgemm_linear_dynamic, isa=isa, epilogue="fma"),
                f"{isa}+fma+zp_then_round": _bind(torch_fbgemm_linear_dynamic, isa=isa, quantizer="zp_then_round"),
                f"{isa}+fma+round_then_zp": _bind(torch_fbgemm_linear_dynamic, isa=isa, quantizer="round_then_zp"),
                f"{isa}+separate": _bind(torch_fbgemm_linear_dynamic, isa=isa, epilogue="separate"),
                f"{other}+fma": _bind(torch_fbgemm_linear_dynamic, isa=other, epilogue="fma")}
    if library == "torch-onednn":
        fn = torch_onednn_linear if op == "linear" else torch_onednn_linear_dynamic
        # brgemm (VNNI) applies the src and weight scales one after the other; gemm:jit's pp kernel multiplies by
        # their precomputed product
        first, second = ("sequential", "combined") if isa == "exact" else ("combined", "sequential")
        alt_isa = "pair_saturating" if isa == "pair_saturating_igemm" else "exact" if isa != "exact" else \
            "pair_saturating_igemm"
        return {f"{isa}+{first}": _bind(fn, isa=isa, scales=first),
                f"{isa}+{second}": _bind(fn, isa=isa, scales=second),
                f"{alt_isa}+{first}": _bind(fn, isa=alt_isa, scales=first)}
    if library == "onnxruntime":
        return _ort_candidates(op, isa, precision_mode)
    raise KeyError(f"no model for {library} {op}")


def _ort_candidates(op: str, isa: str, precision_mode: bool) -> dict:
    """ONNX Runtime: the accumulation the path's MLAS kernel computes, then the operator's epilogue; alternatives:
    the other accumulation, on the saturating path the other zero-point order, on an x64quantprecision path the
    same without the weight rewrite, and the operator's own float/padding variant."""
    if isa not in ORT_ISAS:
        raise ValueError(f"isa={isa!r}: expected one of {ORT_ISAS} for onnxruntime")
    fn = {"MatMulInteger": onnx_matmul_integer, "QLinearMatMul": onnx_qlinear_matmul,
          "ConvInteger": onnx_conv_integer}.get(op)
    if fn is None:
        raise KeyError(f"no model for onnxruntime {op}")
    tail, alt_tail = {"MatMulInteger": ({}, None), "QLinearMatMul": ({"rounding": "mlas_f32"}, {"rounding": "onnx_reference"}),
                      "ConvInteger": ({"padding": "zero_point"}, {"padding": "zero"})}[op]
    suffix = {"QLinearMatMul": ("+mlas_f32", "+onnx_reference_f64"), "ConvInteger": ("+pad_zero_point", "+pad_zero")}
    rewrite = "+s8_weights_to_u8" if precision_mode and op in S8_WEIGHTS_TO_U8_SINCE else ""

    def name(acc, rw=rewrite, last=0):
        return acc + rw + (suffix[op][last] if op in suffix else "")

    def acc_name(i):
        return "exact" if i == "exact" else "pair_saturating+zp_folded"

    other = "pair_saturating" if isa == "exact" else "exact"
    out = {name(acc_name(isa)): _bind(fn, isa=isa, precision_mode=precision_mode, **tail)}
    if alt_tail is not None:
        out[name(acc_name(isa), last=1)] = _bind(fn, isa=isa, precision_mode=precision_mode, **alt_tail)
    if isa == "pair_saturating":
        out[name("pair_saturating+zp_subtracted")] = _bind(fn, isa=isa, zero_points="subtracted",
                                                          precision_mode=precision_mode, **tail)
        if rewrite:
            out[name(acc_name(isa), rw="+no_rewrite")] = _bind(fn, isa=isa, **tail)
    out[name(acc_name(other))] = _bind(fn, isa=other, precision_mode=precision_mode, **tail)
    return out
