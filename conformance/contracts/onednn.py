"""oneDNN's int8 rules a kernel model needs: the 0.5 weight scaling of its non-VNNI s8s8 convolutions, the s8s8
compensation, s8 x s8 on a u8 x s8 engine (seed 002; docs/research/onednn.md#the-int8-guide). Its output
scales rule (dst = saturate(round((src_scale * wei_scale * acc + bias) / dst_scale + zp))) is an output stage:
lowp.isa_models.requant ('onednn-ref', 'onednn-jit', ...), re-exported here. Moved from fbgemm_quant, which
re-exports these names.
"""
from __future__ import annotations

import numpy as np

from lowp.isa_models.fixedpoint import ints, narrow32, out32, wrap32
from lowp.isa_models.float32 import F32, f32
from lowp.isa_models.requant import onednn_jit, onednn_ref  # noqa: F401 (the output scales rule)


def onednn_scale_adjust(*, has_vnni: bool) -> float:
    """scale_adjust of oneDNN's int8 convolutions: 1 with VNNI, 0.5 without (the weights reorder halves the s8
    weights; the epilogue multiplies by 1/scale_adjust). jit_uni_x8s8s32x_conv_kernel.cpp L1438-1442,
    jit_brgemm_conv_utils.cpp L2446-2455 @3f27bec."""
    return 1.0 if has_vnni else 0.5


def onednn_reorder_weights_s8(w, *, has_vnni: bool, src_scale: float = 1.0, dst_scale: float = 1.0) -> np.ndarray:
    """The s8 weights reorder with scale adjustment: o = saturate_and_round<s8>(f32(w * f32(f32(src_scale *
    adj) / dst_scale))), nearbyintf (ties to even). Without VNNI (adj 0.5) odd weights lose a bit: 1 -> 0,
    3 -> 2, -1 -> 0, 127 -> 64. src/cpu/reorder/simple_reorder.hpp @3f27bec L292-345
    (docs/research/onednn.md#the-int8-guide, oneDNN#375)."""
    w = ints(w, "w", -128, 127)
    factor = F32(F32(F32(src_scale) * F32(onednn_scale_adjust(has_vnni=has_vnni))) / F32(dst_scale))
    v = f32(w) * factor
    return np.clip(np.rint(v.astype(np.float64)), -128, 127).astype(np.int8)


def onednn_s8s8_compensation(w_s8, *, axis: int = 0, overflow=None) -> np.ndarray:
    """The s8s8 compensation: comp = -128 * sum of the (reordered) s8 weights over the reduction axis, int32.
    simple_reorder.hpp L292-345; doc/advanced_topics/int8_computations.md (seed 002)."""
    w = ints(w_s8, "w_s8", -128, 127)
    return out32(narrow32(-128 * w.sum(axis=axis), overflow, "compensation overflows int32"))


def exact_u8s8(a_u8, b_s8) -> np.ndarray:
    """An exact u8 x s8 -> s32 product (VNNI's VPDPBUSD, or any exact kernel), wrapped to int32."""
    return out32(wrap32(ints(a_u8, "a", 0, 255) @ ints(b_s8, "b", -128, 127)))


def onednn_s8s8_via_u8s8(a_s8, b_s8, *, u8s8=exact_u8s8) -> np.ndarray:
    """oneDNN's s8 x s8 on a u8 x s8 engine: Y = (A + 128)_u8 . B + comp, comp = -128 * colsum(B). Exact when
    u8s8 is exact; with a pair-saturating u8s8 (VPMADDUBSW) the error is amplified, seed 002's
    {127,127}.{127,127} -> 255 instead of 32258. a is M x K, b K x N. int8_computations.md (seed 002)."""
    a = ints(a_s8, "a_s8", -128, 127)
    b = ints(b_s8, "b_s8", -128, 127)
    acc = np.asarray(u8s8((a + 128).astype(np.uint8), b.astype(np.int8)), np.int64)
    return out32(wrap32(acc + onednn_s8s8_compensation(b, axis=0).astype(np.int64)))
