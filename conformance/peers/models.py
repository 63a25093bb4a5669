"""lowp's contract models of the peer libraries' quantized operators, composed from the conformance modules:
an accumulation contract (contracts.exact, or contracts.pair_saturating for VPMADDUBSW: u8*s8 pair sums
clipped to int16, pairs starting at even k) chosen by the instruction-set parameter `isa`, then the library's
epilogue (fbgemm_quant.requantize_output and friends) with its float rounding as a named parameter.

Every model takes a problem dict (problems.py) and returns what the library's operator returns (uint8 codes, int32
accumulators or float32 values). Nothing here imports a peer library: the models are pure numpy.

Sources: docs/research/fbgemm-requantization.md, docs/research/onednn.md, docs/research/pytorch-fbgemm.md,
docs/research/onnx-mlas.md (FBGEMM @71d6f8b, oneDNN
@3f27bec, PyTorch aten/src/ATen/native/quantized/cpu/qlinear*.cpp), intel/ideep include/ideep/operators/matmul.hpp
(the reciprocal scales PyTorch's onednn engine hands to oneDNN), onnxruntime quantization kernels and MLAS
(`MlasRequantizeOutput`), ONNX Operators.md (MatMulInteger, QLinearMatMul, ConvInteger).
"""
from __future__ import annotations

import numpy as np

from .. import contracts
from ..fbgemm_quant import choose_quantization_params, f32, fma_f32, quantize, requantize_output

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

def _zp_sub(X, zp, axis=None):
    x = X.astype(np.int64)
    z = np.asarray(zp, np.int64)
    if z.ndim and axis is not None:
        shape = [1] * x.ndim
        shape[axis] = -1
        z = z.reshape(shape)
    return x - z


def onnx_matmul_integer(p, *, isa: str = "exact") -> np.ndarray:
    """MatMulInteger: sum_k (A - a_zp)(B - b_zp[n]) in int32 ("accumulation may overflow iff in 32 bits"). With
    isa='exact' this is the ONNX specification and MLAS on AVX-512 VNNI or its u8u8 kernels."""
    if isa != "exact":
        raise ValueError("only the exact contract is modelled for MatMulInteger (MLAS's AVX2 u8s8 kernel runs on "
                         "zero-point-subtracted data and cannot be forced on a VNNI CPU)")
    return contracts._wrap32(_zp_sub(p["A"], p["a_zp"]) @ _zp_sub(p["B"], p["b_zp"], axis=1))


def qlinear_output_scale(p, order: str = "ab_then_y"):
    """QLinearMatMul's float32 multiplier per column: ORT computes f32(f32(a_scale * b_scale[n]) / y_scale)
    ('ab_then_y', as QGemm's ComputeOutputScale); 'a_then_by' = f32(a_scale * f32(b_scale / y_scale))."""
    a, b, y = F32(p["a_scale"]), np.atleast_1d(np.asarray(p["b_scale"], F32)), F32(p["y_scale"])
    if order == "ab_then_y":
        return f32(f32(a * b) / y)
    if order == "a_then_by":
        return f32(a * f32(b / y))
    raise ValueError(order)


def onnx_qlinear_matmul(p, *, isa: str = "exact", rounding: str = "mlas_f32") -> np.ndarray:
    """QLinearMatMul: acc = sum_k (a - a_zp)(b - b_zp[n]) exact int32; y = saturate(rne(acc * multiplier) + y_zp).
    rounding='mlas_f32': MlasRequantizeOutput, f32(f32(acc) * f32 multiplier), clamp to [qmin - zp, qmax - zp] in
    float, cvtps2dq (ties to even), + zp. rounding='onnx_reference': onnx/reference/ops/op_qlinear_matmul.py, the
    float32 multiplier a_scale*b_scale/y_scale times the int32 accumulator in float64, then rint and clip."""
    acc = onnx_matmul_integer(p, isa=isa).astype(np.int64)
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


def onnx_conv_integer(p, *, isa: str = "exact", padding: str = "zero_point") -> np.ndarray:
    """ConvInteger (NCHW, OIHW, groups, strides, dilations, pads): y = sum (x - x_zp)(w - w_zp[o]) in int32.
    padding='zero_point': padded positions hold x_zp, i.e. contribute nothing (the real value 0; ORT's im2col
    pads with the zero point); padding='zero': padded positions hold the integer 0."""
    if isa != "exact":
        raise ValueError("only the exact contract is modelled for ConvInteger")
    X, Wt = p["X"], p["W"]
    g = p["group"]
    sh, sw = p["strides"]
    dh, dw = p["dilations"]
    pt, pl, pb, pr = p["pads"]
    N, C, H, Wd = X.shape
    O, Cg, KH, KW = Wt.shape
    x = X.astype(np.int64) - int(p["x_zp"])
    fill = 0 if padding == "zero_point" else -int(p["x_zp"])
    xp = np.full((N, C, H + pt + pb, Wd + pl + pr), fill, np.int64)
    xp[:, :, pt:pt + H, pl:pl + Wd] = x
    w = _zp_sub(Wt, p["w_zp"], axis=0)
    OH = (H + pt + pb - dh * (KH - 1) - 1) // sh + 1
    OW = (Wd + pl + pr - dw * (KW - 1) - 1) // sw + 1
    out = np.zeros((N, O, OH, OW), np.int64)
    og = O // g
    for gi in range(g):
        xs = xp[:, gi * Cg:(gi + 1) * Cg]
        for kh in range(KH):
            for kw in range(KW):
                patch = xs[:, :, kh * dh: kh * dh + sh * (OH - 1) + 1: sh, kw * dw: kw * dw + sw * (OW - 1) + 1: sw]
                out[:, gi * og:(gi + 1) * og] += np.einsum("nchw,oc->nohw", patch, w[gi * og:(gi + 1) * og, :, kh, kw])
    return contracts._wrap32(out)


# ---------------------------------------------------------------------------------------------------------------
# The contract each (library, operator) is judged against, and the named alternatives reported beside it

def _bind(fn, **kw):
    def model(p):
        return fn(p, **kw)
    return model


def candidates(library: str, op: str, isa: str) -> dict:
    """{variant name: model} for one peer operator on one path; the first entry is lowp's contract for it (the
    variant the installed library implements, calibrated and explained in docs/peers.md), the others are the
    named alternatives whose agreement is reported beside it, so a report shows what each parameter decides."""
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
    if (library, op) == ("onnxruntime", "MatMulInteger"):
        return {"exact": onnx_matmul_integer}
    if (library, op) == ("onnxruntime", "QLinearMatMul"):
        return {"exact+mlas_f32": _bind(onnx_qlinear_matmul, rounding="mlas_f32"),
                "exact+onnx_reference_f64": _bind(onnx_qlinear_matmul, rounding="onnx_reference")}
    if (library, op) == ("onnxruntime", "ConvInteger"):
        return {"exact+pad_zero_point": _bind(onnx_conv_integer, padding="zero_point"),
                "exact+pad_zero": _bind(onnx_conv_integer, padding="zero")}
    raise KeyError(f"no model for {library} {op}")
