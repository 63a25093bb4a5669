"""Output stages (requantization), bit for bit: what an int8 GEMM micro-kernel does to its int32 accumulators
before it stores u8/s8 (or, for the dynamically quantized qd8 kernels, float32) results.

Every stage is `compute(acc, q, out_type)`: `acc` is the int32 (M, N) accumulator sum_k (A - a_zp)(B - b_zp)
(int32 wrap-around) WITHOUT bias; `q` holds the parameters under these keys (a stage reads only what it needs):

    bias                int32 (N,), added to acc in int32 (wrapping) before scaling; float32 (N,) for the float
                        epilogues (qd8, oneDNN), added after scaling
    scale               float32 (N,), per output channel (per tensor: all equal)
    multiplier, shift   int32 (N,), fixed point, TFLite's convention: real ~ multiplier * 2^(shift - 31)
    output_zero_point   int; output_min, output_max: ints (qd8: floats)
    a_zero_point        int32 (M,), a_inv_scale float32 (M,), b_scale float32 (N,): qd8 only
    b_float_zero_point  float32 (N,): qd8-qc2w's weight zero point per output channel; with it a qc2w stage reads
    a_row_sum, kc       int (M,), int: the sums of A's rows and the depth as the ukernel is handed them (derived
                        from A by lowp.kernels.xnnpack.row_terms, not drawn)
    src_scale, dst_scale  float32 scalars: oneDNN only

and `out_type` is "s8", "u8", "f32", "f16" or "bf16". The result is np.int8 / np.uint8 / np.float32 / np.float16
(IEEE binary16) / np.uint16 (bfloat16 bits) (M, N).

Each library's pseudocode is one short function per flavour, built from the instruction models below
(CVTPS2DQ, PACKSSDW, PADDSW, FCVTNS, SQXTN, SQADD, ...), and `OUTPUT_STAGES` maps names to them. Parameters
outside a library's documented domain are the contracts' business (lowp.conformance.contracts.output); a stage
computes what the code would, and raises only where even that is undefined.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from lowp.isa_models.fixedpoint import INT32_MAX, INT32_MIN, multiply_by_quantized_multiplier, wrap32
from lowp.isa_models.lanes import numpy_only
from lowp.isa_models.float32 import (F32, MAGIC_BIAS, MAGIC_BIAS_BITS, bf16_bits, cvtps2dq, f16_values, f32, fcvtns,
                      floats32, fma_f32, fp16_bits, lrintf, magic_bias_bits, rne_int)

OUT_RANGE = {"s8": (-128, 127), "u8": (0, 255)}
OUT_DTYPE = {"s8": np.int8, "u8": np.uint8, "f32": np.float32, "f16": np.float16, "bf16": np.uint16}

XNNPACK = "google/XNNPACK @75db3c0"


@dataclass(frozen=True)
class OutputStage:
    name: str
    compute: Callable          # compute(acc, q, out_type) -> np.ndarray
    description: str
    citation: str
    out_types: tuple = ("s8", "u8")
    reads_rows: bool = False   # it reads a_row_sum and kc (lowp.kernels.xnnpack.row_terms) beside acc and q

    def __call__(self, acc, q, out_type):
        if out_type not in self.out_types:
            raise ValueError(f"output stage {self.name!r}: out_type {out_type!r} is not one of {self.out_types}")
        numpy_only(f"output stage {self.name!r}", acc, why="the output-stage reference models (lowp.isa_models."
                   "requant, fixedpoint, float32) are numpy only; prove a kernel's requantization with the "
                   "instruction models it is made of")
        return self.compute(acc, q, out_type)


# ---------------------------------------------------------------------------------------------------------------
# Saturating and wrapping integer steps (exact int64 values in, int64 values out)

def _sat(x, lo, hi):
    return np.clip(np.asarray(x, np.int64), lo, hi)


def packssdw(x):
    """PACKSSDW / _mm256_packs_epi32: int32 -> int16, saturating. Intel SDM Vol. 2B PACKSSWB/PACKSSDW."""
    return _sat(x, -32768, 32767)


def packsswb(x):
    """PACKSSWB / _mm256_packs_epi16: int16 -> int8, saturating. Intel SDM Vol. 2B PACKSSWB/PACKSSDW."""
    return _sat(x, -128, 127)


def packuswb(x):
    """PACKUSWB / _mm256_packus_epi16: int16 -> uint8, saturating. Intel SDM Vol. 2B PACKUSWB."""
    return _sat(x, 0, 255)


def paddsw(a, b):
    """PADDSW / _mm256_adds_epi16: int16 + int16, saturating. Intel SDM Vol. 2B PADDSB/PADDSW."""
    return _sat(np.asarray(a, np.int64) + np.asarray(b, np.int64), -32768, 32767)


def paddd(a, b):
    """PADDD / _mm256_add_epi32: int32 + int32, wrapping. Intel SDM Vol. 2B PADDB/PADDW/PADDD/PADDQ."""
    return wrap32(np.asarray(a, np.int64) + np.asarray(b, np.int64))


def sqxtn_s32(x):
    """SQXTN Vd.4H, Vn.4S (vqmovn_s32): int32 -> int16, saturating. Arm ARM C7.2.313 SQXTN."""
    return _sat(x, -32768, 32767)


def sqxtn_s16(x):
    """SQXTN Vd.8B, Vn.8H (vqmovn_s16): int16 -> int8, saturating. Arm ARM C7.2.313 SQXTN."""
    return _sat(x, -128, 127)


def sqxtun_s16(x):
    """SQXTUN Vd.8B, Vn.8H (vqmovun_s16): int16 -> uint8, saturating. Arm ARM C7.2.314 SQXTUN."""
    return _sat(x, 0, 255)


def sqsub_s32(a, b):
    """SQSUB Vd.4S (vqsubq_s32): int32 - int32, saturating. Arm ARM C7.2.309 SQSUB."""
    return _sat(np.asarray(a, np.int64) - np.asarray(b, np.int64), INT32_MIN, INT32_MAX)


def sqadd_s16(a, b):
    """SQADD Vd.8H (vqaddq_s16): int16 + int16, saturating. Arm ARM C7.2.282 SQADD."""
    return _sat(np.asarray(a, np.int64) + np.asarray(b, np.int64), -32768, 32767)


# ---------------------------------------------------------------------------------------------------------------
# Parameters

class Batch(dict):
    """The parameters of n cases of one shape, each value with a leading case axis (a scalar's (n,), a per-channel
    array's (n, N), a per-row one's (n, M)), for a stage of BATCHED_STAGES called with the cases' (n, M, N)
    accumulators: it computes every case at once, as it computes one (lowp.conformance.run.batch judges a batch
    of a quantized kernel's cases so). The parameter helpers below give each value the case axis in front."""


def need(q: dict, key: str):
    try:
        return q[key]
    except KeyError:
        raise KeyError(f"quantization parameter {key!r} is missing (the case has {', '.join(sorted(q)) or 'none'})") \
            from None


def _acc(acc) -> np.ndarray:
    numpy_only("lowp.isa_models.requant (output stage)", acc, why="the output-stage reference models are numpy only")
    a = np.asarray(acc)
    if a.ndim < 2 or a.dtype.kind not in "iu":       # (n, M, N): a Batch's cases
        raise ValueError(f"acc: expected an (M, N) int32 matrix, got {a.dtype} with shape {a.shape}")
    return a.astype(np.int64)


def _row(q, key, N, dtype):
    """A per-output-channel parameter as a (1, N) row of `dtype` (a scalar broadcasts); a Batch's as (n, 1, N) or
    (n, 1, 1)."""
    v = np.asarray(need(q, key))
    if np.dtype(dtype).kind == "f" and v.dtype != dtype:
        raise ValueError(f"{key}: expected {np.dtype(dtype)} values, got {v.dtype}; lowp never casts silently")
    if np.dtype(dtype).kind != "f" and v.dtype.kind not in "iu":
        raise ValueError(f"{key}: expected integers, got {v.dtype}")
    if isinstance(q, Batch):            # (n,) or (n, N): one value or N a case
        if v.ndim not in (1, 2) or (v.ndim == 2 and v.shape[1] != N):
            raise ValueError(f"{key}: expected one value or {N} a case, got shape {v.shape} for {len(v)} cases")
        return v.astype(dtype).reshape(len(v), 1, -1)
    if v.ndim > 1 or (v.ndim == 1 and v.shape[0] != N):
        raise ValueError(f"{key}: expected {N} values (one per output channel) or one, got shape {v.shape}")
    # np.full or a reshape, not np.broadcast_to: its view costs 5 us a call, and every case is judged through this
    return np.full((1, N), v, dtype) if v.ndim == 0 else v.astype(dtype).reshape(1, N)


def _col(q, key, M, dtype):
    return np.swapaxes(_row(q, key, M, dtype), -1, -2)


def _int(q, key) -> int:
    v = np.asarray(need(q, key))
    if isinstance(q, Batch):            # one integer a case, as a (n, 1, 1) column of int64
        if v.ndim != 1 or v.dtype.kind not in "iu":
            raise ValueError(f"{key}: expected one integer a case, got {v.dtype} of shape {v.shape}")
        return v.astype(np.int64).reshape(-1, 1, 1)
    if v.ndim or v.dtype.kind not in "iu":
        raise ValueError(f"{key}: expected one integer, got {v!r}")
    return int(v)


def biased(acc, q) -> np.ndarray:
    """acc + bias[n], int32 wrap-around: the packed int32 bias every int8 library adds before scaling."""
    a = _acc(acc)
    return wrap32(a + _row(q, "bias", a.shape[-1], np.int64))


def _store(x, out_type):
    lo, hi = OUT_RANGE[out_type]
    x = np.asarray(x, np.int64)
    if x.size and (x.min() < lo or x.max() > hi):
        raise AssertionError(f"an output stage produced values outside {out_type}: [{x.min()}, {x.max()}]")
    return x.astype(OUT_DTYPE[out_type])


# ---------------------------------------------------------------------------------------------------------------
# XNNPACK fp32: float32(acc + bias) * scale, then one of several float -> int8 paths

def _fp32_scaled(acc, q):
    x = biased(acc, q)
    return f32(x) * _row(q, "scale", x.shape[-1], F32)


def _less_zp(q):
    zp = _int(q, "output_zero_point")
    return zp, F32(_int(q, "output_min") - zp), F32(_int(q, "output_max") - zp)


def xnnpack_fp32_lrintf(acc, q, out_type):
    """xnn_qs8_requantize_fp32 (the tester's reference) and the scalar 'lrintf' kernels: clamp the scaled value in
    float to [min - zp, max - zp], lrintf (ties to even), + zp. src/xnnpack/requantization.h L30-62."""
    v = _fp32_scaled(acc, q)
    zp, lo, hi = _less_zp(q)
    v = np.minimum(np.maximum(v, lo), hi)
    return _store(lrintf(v).astype(np.int64) + zp, out_type)


def xnnpack_fp32_fmagic(acc, q, out_type):
    """Scalar 'fmagic': clamp in float, add the magic bias 1.5 * 2^23, reinterpret the bits, subtract
    0x4B400000 - zp. src/qs8-gemm/scalar.c.in L430-438; params src/microparams-init.c (magic_bias)."""
    v = _fp32_scaled(acc, q)
    zp, lo, hi = _less_zp(q)
    v = np.minimum(np.maximum(v, lo), hi)
    return _store(magic_bias_bits(v).astype(np.int64) - (MAGIC_BIAS_BITS - zp), out_type)


def xnnpack_fp32_imagic(acc, q, out_type):
    """Scalar 'imagic': add the magic bias first, clamp the bits as int32 between magic_min = bits(magic + min -
    zp) and magic_max, subtract 0x4B400000 - zp. src/qs8-gemm/scalar.c.in L440-458; microparams-init.c."""
    v = _fp32_scaled(acc, q)
    zp, lo, hi = _less_zp(q)
    magic_min, magic_max = (np.asarray(magic_bias_bits(x), np.int64) for x in (lo, hi))   # a Batch's: per case
    r = np.minimum(np.maximum(magic_bias_bits(v).astype(np.int64), magic_min), magic_max)
    return _store(r - (MAGIC_BIAS_BITS - zp), out_type)


def _x86_tail(i32, q, out_type, *, zero_point_add):
    """PACKSSDW, the zero point (PADDSW in int16, or PADDD in int32 before the pack), PACKSSWB / PACKUSWB, then
    PMAXSB / PMAXUB with output_min."""
    zp = _int(q, "output_zero_point")
    if zero_point_add == "paddsw":
        s16 = paddsw(packssdw(i32), zp)
    else:
        s16 = packssdw(paddd(i32, zp))
    o = packsswb(s16) if out_type == "s8" else packuswb(s16)
    return _store(np.maximum(o, _int(q, "output_min")), out_type)


def xnnpack_fp32_x86(acc, q, out_type):
    """SSE4/AVX2/AVX-512 'fp32': MINPS with output_max - zp (the float upper clamp only), CVTPS2DQ (INT32_MIN
    beyond int32), PACKSSDW, PADDSW zp, PACKSSWB (PACKUSWB for u8), PMAXSB output_min. Equal to the reference
    on the documented domain. src/qs8-gemm/MRx8c8-avx2.c.in L441-471; microparams-init.c fp32_avx2."""
    v = _fp32_scaled(acc, q)
    _, _, hi = _less_zp(q)
    return _x86_tail(cvtps2dq(np.minimum(v, hi)).astype(np.int64), q, out_type, zero_point_add="paddsw")


def xnnpack_fp32_avxvnni_wrap(acc, q, out_type):
    """The AVX-VNNI shape: MINPS output_max - zp, CVTPS2DQ, then a plain 32-bit VPADDD of the zero point before
    the packs. Below -2^31 CVTPS2DQ gives INT32_MIN, and INT32_MIN + a negative zero point wraps to a large
    positive value, which packs to 127 where the reference gives output_min.
    src/qs8-gemm/MRx8c8-avxvnni.c.in L535-558 (_mm256_add_epi32(vacc, voutput_zero_point)); the AVX-512 VNNI
    template has the same step (src/qs8-gemm/MRx16c4-avx512vnni.c.in @ad7560b, _mm512_add_epi32)."""
    v = _fp32_scaled(acc, q)
    _, _, hi = _less_zp(q)
    return _x86_tail(cvtps2dq(np.minimum(v, hi)).astype(np.int64), q, out_type, zero_point_add="paddd")


def _neon_tail(i32, q, out_type):
    """SQXTN to int16, SQADD zp, SQXTN (SQXTUN for u8), SMAX/SMIN (UMAX/UMIN) with output_min / output_max."""
    s16 = sqadd_s16(sqxtn_s32(i32), _int(q, "output_zero_point"))
    o = sqxtn_s16(s16) if out_type == "s8" else sqxtun_s16(s16)
    return _store(np.minimum(np.maximum(o, _int(q, "output_min")), _int(q, "output_max")), out_type)


def xnnpack_fp32_neonv8(acc, q, out_type):
    """NEONv8 'fp32': FMUL, FCVTNS (saturating, ties to even), SQXTN, SQADD zp, SQXTN, SMAX/SMIN. No float clamp.
    src/qs8-gemm/c4-neondot.c.in L573-620 (vcvtnq_s32_f32, vqmovn_s32, vqaddq_s16, vqmovn_s16)."""
    return _neon_tail(fcvtns(_fp32_scaled(acc, q)).astype(np.int64), q, out_type)


def _magic_minus_zero_point(acc, q) -> np.ndarray:
    """float32(acc + bias) * scale + magic bias (each rounded to nearest even), its bits as int32, minus
    0x4B400000 - zp with a saturating 32-bit subtraction (QSUB, VQSUB.S32): rint(x) + zp where |x| <= 2^22, the
    saturated side's end beyond (the bits are monotone in x; magic_bias_bits)."""
    from lowp.isa_models.arm32.simd32 import qsub
    zp = _int(q, "output_zero_point")
    bits = magic_bias_bits(_fp32_scaled(acc, q)).astype(np.int32)
    return qsub(bits[..., None], np.array([MAGIC_BIAS_BITS - zp], np.int32))[..., 0]


def xnnpack_fp32_armsimd32(acc, q, out_type):
    """ARMv6 SIMD32 'fp32': VCVT.F32.S32, VMUL.F32 scale, VADD.F32 magic bias, QSUB magic_bias_less_zero_point,
    SSAT #8 (USAT #8 for u8), then the clamp on four packed bytes: SSUB8 (USUB8) output_min + SEL, SSUB8 output_max
    + SEL. No float clamp. src/qs8-gemm/c4-armsimd32.c.in (__qsub, __ssat, __ssub8, __sel); src/microparams-init.c fp32_armsimd32."""
    from lowp.isa_models.arm32.simd32 import sel, ssat, ssub8_ge, usat, usub8_ge
    i32 = _magic_minus_zero_point(acc, q)[..., None]
    s = out_type == "s8"
    dtype = np.int8 if s else np.uint8
    sat = (ssat(i32, 8) if s else usat(i32, 8))[..., 0].astype(dtype)
    sub_ge = ssub8_ge if s else usub8_ge
    lo = np.full(4, _int(q, "output_min"), np.int64).astype(dtype)
    hi = np.full(4, _int(q, "output_max"), np.int64).astype(dtype)
    flat = sat.reshape(-1)
    padded = np.concatenate([flat, np.zeros(-len(flat) % 4, dtype)]).reshape(-1, 4)     # words of 4 bytes
    out = sel(padded, lo, sub_ge(padded, lo)[1])            # vout >= min ? vout : min
    out = sel(hi, out, sub_ge(out, hi)[1])                  # vout >= max ? max : vout
    return _store(out.reshape(-1)[:len(flat)].reshape(sat.shape).astype(np.int64), out_type)


def xnnpack_fp32_neon(acc, q, out_type):
    """ARMv7-class NEON 'fp32' (params fp32_neon, the AArch64 C kernels and the AArch32 assembly: no FCVTNS there): FMUL by the scale, FADD the magic bias 1.5 * 2^23
    and take the bits as int32, SQSUB magic_bias_less_output_zero_point (0x4B400000 - zp, saturating), SQXTN to
    int16, SQXTN (SQXTUN for u8), SMAX/SMIN (UMAX/UMIN) with output_min / output_max. No float clamp: beyond
    |v| = 2^22 the magic sum's bits stay monotone and the saturating steps reach the type's end, as the
    reference's clamp does. src/qs8-qc8w-gemm/gen/qs8-qc8w-gemm-1x8-minmax-fp32-neon-mlal-lane.c L153-185 (the
    template src/qs8-gemm/neon-mlal-lane.c.in); microparams-init.c xnn_init_qs8_qc8w_conv_minmax_fp32_neon_params;
    qu8: src/qu8-gemm/gen/qu8-gemm-1x8-minmax-fp32-neon-mlal-lane.c L173-182 (vqmovun_s16, vmax_u8); AArch32:
    src/qs8-gemm/4x8-aarch32-neon-mlal-lane-cortex-a7.S.in (VQSUB.S32, VQMOVN.S32, VQMOVN.S16, VMAX/VMIN)."""
    i32 = sqsub_s32(magic_bias_bits(_fp32_scaled(acc, q)).astype(np.int64),
                    MAGIC_BIAS_BITS - _int(q, "output_zero_point"))
    s16 = sqxtn_s32(i32)
    o = sqxtn_s16(s16) if out_type == "s8" else sqxtun_s16(s16)
    return _store(np.minimum(np.maximum(o, _int(q, "output_min")), _int(q, "output_max")), out_type)


def xnnpack_fp32_hvx(acc, q, out_type):
    """HVX 'fp32' built for HVX v68..v71 (__HVX_ARCH__ < 73): per lane (float)acc * scale and lrintf (ties to even;
    Hexagon's convert_sf2w saturates beyond int32, where C leaves lrintf undefined), then Vh.vpack(Vw,Vw):sat,
    Vh.vadd(zp):sat, Vb.vpack(Vh,Vh):sat, Vb.vmax(output_min), Vb.vmin(output_max) (lowp.isa_models.hexagon.hvx:
    vpackwh_sat, vaddhsat, vpackhb_sat, vmaxb, vminb). No float clamp. Step for step the NEONv8 sequence
    (FCVTNS, SQXTN, SQADD, SQXTN, SMAX, SMIN), so equal to it bit for bit; zp, min and max are splatted from the
    int16 fields of fp32_scalar (Vh.vsplat: exact; Vb.vsplat: their low byte, exact for s8 bounds).
    src/qs8-gemm/c4-hvx.c.in L34-61 (rescale_fp32, the #else branch) and L222-263."""
    return _neon_tail(fcvtns(_fp32_scaled(acc, q)).astype(np.int64), q, out_type)


# ---------------------------------------------------------------------------------------------------------------
# XNNPACK rndnu: a 24-bit multiplier and a shift taken from the float scale's bits

def _scale_bits(scale) -> np.ndarray:
    s = floats32(np.atleast_1d(np.asarray(scale)), "scale")
    bad = ~(s >= F32(2.0 ** -32)) | ~(s < F32(256.0))
    if bad.any():
        raise ValueError(f"scale {float(s[bad][0])!r}: XNNPACK's rndnu params assert 2^-32 <= scale < 256 "
                         f"(src/microparams-init.c xnn_init_qs8_conv_minmax_rndnu_*_params)")
    return s.view(np.uint32).astype(np.int64)


def xnnpack_rndnu_scalar_params(scale) -> dict:
    """xnn_init_qs8_conv_minmax_rndnu_scalar_params: multiplier = the 24-bit mantissa with its hidden bit,
    shift = 127 + 23 - biased exponent (16..55), rounding = 2^(shift - 1); per channel arrays.
    src/microparams-init.c @75db3c0 (rndnu_scalar)."""
    bits = _scale_bits(scale)
    shift = 127 + 23 - (bits >> 23)
    return {"multiplier": ((bits & 0x7FFFFF) | 0x800000), "shift": shift, "rounding": np.int64(1) << (shift - 1)}


def xnnpack_rndnu_neon_params(scale) -> dict:
    """xnn_init_qs8_conv_minmax_rndnu_neon_params: multiplier = mantissa24 << 7 (Q31, [2^30, 2^31 - 128]),
    shift = 127 + 31 - 32 - biased exponent (-8..31), post_shift = max(shift, 1), pre_shift = shift - post_shift;
    stored as right_pre_shift = -pre_shift (an SQSHL count: a left shift) and right_post_shift = -post_shift (an
    SRSHL count: a rounding right shift). src/microparams-init.c @75db3c0 (rndnu_neon)."""
    bits = _scale_bits(scale)
    shift = 127 + 31 - 32 - (bits >> 23)
    post = np.maximum(shift, 1)
    return {"multiplier": ((bits & 0x7FFFFF) | 0x800000) << 7, "right_pre_shift": -(shift - post),
            "right_post_shift": -post}


def _rndnu_clamp(y, q, out_type):
    zp = _int(q, "output_zero_point")
    y = np.minimum(np.maximum(y, _int(q, "output_min") - zp), _int(q, "output_max") - zp)
    return _store(y + zp, out_type)


def xnnpack_rndnu(acc, q, out_type):
    """rndnu as the real number rounds: floor((x * multiplier + 2^(shift-1)) / 2^shift) (ties up) in exact
    integers, clamped to [min - zp, max - zp], + zp. The scalar reference where that fits int32; the NEON
    kernels everywhere (their SQSHL/SQDMULH/SQXTN saturate). src/xnnpack/requantization.h L140-186."""
    x = biased(acc, q)
    p = xnnpack_rndnu_scalar_params(_row(q, "scale", x.shape[1], F32)[0])
    y = (x * p["multiplier"] + p["rounding"]) >> p["shift"]
    return _rndnu_clamp(y, q, out_type)


def xnnpack_rndnu_scalar(acc, q, out_type):
    """xnn_qs8_requantize_rndnu and the scalar rndnu kernels literally: (int32_t) math_asr_s64(x * m + rounding,
    shift), a narrowing that wraps (GCC/Clang) once |x * scale| >= 2^31, then the clamps.
    src/xnnpack/requantization.h L157-161; src/qs8-gemm/scalar.c.in L475-490."""
    x = biased(acc, q)
    p = xnnpack_rndnu_scalar_params(_row(q, "scale", x.shape[1], F32)[0])
    y = wrap32((x * p["multiplier"] + p["rounding"]) >> p["shift"])
    return _rndnu_clamp(y, q, out_type)


def _rndnu_neon(acc, q, out_type, left_shift):
    x = biased(acc, q)
    p = xnnpack_rndnu_neon_params(_row(q, "scale", x.shape[1], F32)[0])
    y = multiply_by_quantized_multiplier(wrap32(x), p["multiplier"], p["right_pre_shift"] + p["right_post_shift"],
                                         flavour="S_neon", left_shift=left_shift)
    return _neon_tail(np.asarray(y, np.int64), q, out_type)


def xnnpack_rndnu_neon(acc, q, out_type):
    """NEON rndnu: SQSHL by right_pre_shift (saturating), SQDMULH by the multiplier, SRSHL by right_post_shift,
    SQXTN, SQADD zp, SQXTN, SMAX/SMIN: MultiplyByQuantizedMultiplier flavour 'S_neon' with left_shift='saturate'.
    src/qs8-gemm/c4-neondot.c.in L555-620."""
    return _rndnu_neon(acc, q, out_type, "saturate")


def xnnpack_rndnu_neon_wrap(acc, q, out_type):
    """The NEON rndnu sequence with a wrapping pre-shift (SSHL / vshlq_s32 instead of SQSHL), as ruy's ARM
    kernels shift: for scales >= 0.5 the left shift of a large accumulator wraps and flips its sign."""
    return _rndnu_neon(acc, q, out_type, "wrap")


# ---------------------------------------------------------------------------------------------------------------
# XNNPACK rndnu16 (qu8 only): a 15-bit multiplier after a rounding pre-shift and a narrowing to int16

def xnnpack_rndnu16_params(scale) -> dict:
    """xnn_init_qu8_conv_minmax_rndnu16_scalar_params (src/microparams-init.c L124-154, via parse_f32 in
    src/xnnpack/requantization.h L65-82): exp = the scale's unbiased exponent, multiplier = the 24-bit mantissa
    rounded to 15 bits ((m + 2^8) >> 9, in [2^14, 2^15]; 2^15 becomes 2^14 with exp + 1), left_pre_shift =
    exp + 1 (a shift count: negative is a rounding right shift)."""
    bits = _scale_bits(scale)
    exp = (bits >> 23) - 127
    mult = (((bits & 0x7FFFFF) | 0x800000) + (1 << 8)) >> 9
    carry = mult == 1 << 15
    return {"multiplier": np.where(carry, 1 << 14, mult), "left_pre_shift": np.where(carry, exp + 1, exp) + 1}


def _rounding_shift_left(x, shift):
    """saturating_rounding_shift_left_s32 (src/xnnpack/math.h L154-161) = SQRSHL: a saturating left shift for
    shift >= 0, else ((int64) x + 2^(n-1)) >> n, n = -shift (ties up)."""
    x = np.asarray(x, np.int64)
    n = np.maximum(-shift, 1)
    right = (x + (np.int64(1) << (n - 1))) >> n
    return np.where(shift >= 0, _sat(x << np.maximum(shift, 0), INT32_MIN, INT32_MAX), right)


def xnnpack_rndnu16(acc, q, out_type):
    """xnn_qu8_requantize_rndnu16 (src/xnnpack/requantization.h L107-138) and the rndnu16 NEON kernels (SQRSHL by
    left_pre_shift, SQXTN to int16, SQRDMULH by the int16 multiplier, SQADD zp, SQXTUN, UMAX/UMIN:
    src/qu8-gemm/gen/qu8-gemm-1x16-minmax-rndnu16-neon-mlal-lane.c L216-248, the same arithmetic): it rounds twice
    (the pre-shift, then the product's high half) and saturates the pre-shifted value to int16, so it is not
    rndnu's single rounding."""
    x = biased(acc, q)
    p = xnnpack_rndnu16_params(_row(q, "scale", x.shape[1], F32)[0])
    x16 = _sat(_rounding_shift_left(x, p["left_pre_shift"]), -32768, 32767)
    upper = (x16 * p["multiplier"] + (1 << 14)) >> 15             # multiply_2x_high_s16 (PMULHRSW, SQRDMULH)
    s16 = sqadd_s16(upper, _int(q, "output_zero_point"))
    return _store(np.minimum(np.maximum(s16, _int(q, "output_min")), _int(q, "output_max")), out_type)


# ---------------------------------------------------------------------------------------------------------------
# RVV fixed point: XNNPACK's rndnu_neon params through vsmul and vnclip, each rounded by the vxrm CSR

RVV = "riscv/riscv-v-spec@v1.0 v-spec.adoc"


def _saturating_doublings(x, times):
    """vsadd.vv x, x repeated `times` (>= 0) times: RVV 1.0 section 12.1, Vector Single-Width Saturating Add. A
    saturated value stays saturated (INT32_MAX + INT32_MAX saturates to INT32_MAX), so the result is
    clip(x * 2^times), what SQSHL by a non-negative count gives."""
    y = np.asarray(x, np.int64) << np.asarray(times, np.int64)
    return np.clip(y, INT32_MIN, INT32_MAX).astype(np.int32)


def rvv_vnclip(acc, q, out_type, *, vxrm: str, vsmul_vxrm: str = "rdn"):
    """lowp's RVV requantization (kernels/riscv64/qs8_gemm_4x1v_rndnu_rvv.c) from XNNPACK's rndnu_neon params
    (xnnpack_rndnu_neon_params of the float scale): right_pre_shift saturating doublings (vsadd.vv), vsmul.vv by the
    Q31 multiplier under `vsmul_vxrm` (RVV 1.0 section 12.3), vnclip.wv by -right_post_shift int32 -> int16 under
    `vxrm` (section 12.5), vsadd.vx the zero point (int16, section 12.1), vnclip.wx by 0 to int8, vmax/vmin with
    output_min/output_max. vsmul and vnclip are lowp.isa_models.rvv's models; vxrm is section 3.8's mode."""
    if out_type != "s8":
        raise ValueError(f"rvv_vnclip: out_type {out_type!r}; this stage narrows with vnclip (signed): s8 only")
    from lowp.isa_models import rvv
    x = biased(acc, q)
    M, N = x.shape
    p = xnnpack_rndnu_neon_params(_row(q, "scale", N, F32)[0])
    per_element = lambda v, dtype: np.broadcast_to(np.asarray(v).reshape(1, N), (M, N)).astype(dtype)  # noqa: E731
    y = _saturating_doublings(x, per_element(p["right_pre_shift"], np.int64))
    y = rvv.vsmul_vv(y, per_element(p["multiplier"], np.int32), vxrm=vsmul_vxrm).result
    y = rvv.vnclip_wv(y, per_element(-p["right_post_shift"], np.uint16), vxrm=vxrm).result
    y = np.clip(y.astype(np.int64) + _int(q, "output_zero_point"), -32768, 32767).astype(np.int16)
    y = rvv.vnclip_wx(y, 0, vxrm=vxrm).result.astype(np.int64)
    y = np.minimum(np.maximum(y, _int(q, "output_min")), _int(q, "output_max"))
    return _store(y, out_type)


def _rvv_stage(vxrm, vsmul_vxrm="rdn"):
    def compute(acc, q, out_type):
        return rvv_vnclip(acc, q, out_type, vxrm=vxrm, vsmul_vxrm=vsmul_vxrm)
    compute.__name__ = f"rvv_vnclip_{vxrm}" + ("" if vsmul_vxrm == "rdn" else f"_vsmul_{vsmul_vxrm}")
    return compute


# ---------------------------------------------------------------------------------------------------------------
# TFLite / ruy MultiplyByQuantizedMultiplier + zero point + clamp, and gemmlowp's fixed-point pipeline

def _mbqm_stage(flavour, **flags):
    def compute(acc, q, out_type):
        x = biased(acc, q)
        N = x.shape[1]
        m, s = _row(q, "multiplier", N, np.int64), _row(q, "shift", N, np.int64)
        y = np.asarray(multiply_by_quantized_multiplier(x, m, s, flavour=flavour, **flags), np.int64)
        y = wrap32(y + _int(q, "output_zero_point"))            # acc += output_offset, int32
        y = np.minimum(np.maximum(y, _int(q, "output_min")), _int(q, "output_max"))
        return _store(y, out_type)
    compute.__name__ = f"tflite_{flavour}"
    return compute


# ---------------------------------------------------------------------------------------------------------------
# FBGEMM ReQuantizeOutput (u8): float multiplier (generic / AVX2 tails) and the fixed-point reference

def fbgemm_tail_generic(ab, zp: int, lo: int):
    """The generic path: lrintf(ab) + zp in int64, clamped to [lo, 255]. FBGEMM
    include/fbgemm/OutputProcessing-inl.h @71d6f8b L90-131 (lo = fuse_relu ? C_zero_point : 0)."""
    return (np.maximum(lo, np.minimum(255, rne_int(ab) + zp)) & 0xFF).astype(np.uint8)


def fbgemm_tail_avx2(ab, zp: int, lo: int):
    """requantizeOutputProcessingAvx2: CVTPS2DQ, PACKSSDW, PADDSW int16(zp), PACKUSWB, PMAXUB uint8(lo).
    FBGEMM src/QuantUtilsAvx2.cc @71d6f8b (docs/research/fbgemm-requantization.md#requantizeoutput)."""
    zp16 = ((zp + (1 << 15)) & 0xFFFF) - (1 << 15)                        # _mm256_set1_epi16
    u8 = packuswb(paddsw(packssdw(cvtps2dq(ab).astype(np.int64)), zp16))
    return np.maximum(u8, lo & 0xFF).astype(np.uint8)


FBGEMM_TAILS = {"generic": fbgemm_tail_generic, "avx2": fbgemm_tail_avx2}


def _fbgemm_float(path):
    def compute(acc, q, out_type):
        x = biased(acc, q)
        ab = f32(x) * _row(q, "scale", x.shape[1], F32)
        return FBGEMM_TAILS[path](ab, _int(q, "output_zero_point"), _int(q, "output_min"))
    compute.__name__ = f"fbgemm_float_{path}"
    return compute


def fbgemm_fixed(acc, q, out_type):
    """requantize_u8acc32_ref, fixed point: ((int64(raw) * C_multiplier + nudge) >> C_right_shift) + zp, nudge =
    1 << max(0, right_shift - 1), clamped to [lo, 255]; C_right_shift = 31 - shift (lowp's TFLite convention).
    Per tensor (FBGEMM takes one multiplier). FBGEMM src/RefImplementations.cc @71d6f8b L217-255."""
    x = biased(acc, q)
    m, s = _row(q, "multiplier", x.shape[1], np.int64), _row(q, "shift", x.shape[1], np.int64)
    rs = 31 - s
    nudge = np.int64(1) << np.maximum(0, rs - 1)
    r = ((x * m + nudge) >> rs) + _int(q, "output_zero_point")
    return (np.maximum(_int(q, "output_min"), np.minimum(255, r)) & 0xFF).astype(np.uint8)


# ---------------------------------------------------------------------------------------------------------------
# qd8: float output

def _qd8_parts(acc, q):
    a = _acc(acc)
    M, N = a.shape[-2:]
    v = f32(wrap32(a)) * _col(q, "a_inv_scale", M, F32)                  # one rounding
    return v, _row(q, "b_scale", N, F32), _row(q, "bias", N, F32)


def _float(q, key):
    """A float parameter (a qd8 clamp's bound) as float32: one, or a Batch's (n, 1, 1)."""
    v = F32(need(q, key))
    return v.reshape(-1, 1, 1) if isinstance(q, Batch) else v


def _qd8_clamp(v, q):
    lo, hi = _float(q, "output_min"), _float(q, "output_max")
    return np.minimum(np.maximum(v, lo), hi).astype(np.float32)


def qd8_f32_fma(acc, q, out_type):
    """XNNPACK qd8-f32 on AVX2/AVX-VNNI/AVX-512 and AArch64: VCVTDQ2PS, VMULPS by the row's inv_scale, VFMADD by
    the channel's filter scale plus bias (one rounding), MAXPS min, MINPS max.
    src/qs8-gemm/MRx8c8-avxvnni.c.in L432-464; c4-neondot.c.in L363-384 (vfmaq_f32 on ARM64)."""
    v, b, bias = _qd8_parts(acc, q)
    return _qd8_clamp(fma_f32(v, b, bias), q)       # the row and the bias broadcast over the rows inside fma_f32


def qd8_f32_unfused(acc, q, out_type):
    """The same with a separate multiply and add (two roundings): the scalar kernels (vout *= scale; vout +=
    bias) and AArch32 NEON (vmlaq_f32). src/qs8-gemm/scalar.c.in L307-335; c4-neondot.c.in L386-388."""
    v, b, bias = _qd8_parts(acc, q)
    with np.errstate(over="ignore", invalid="ignore"):      # inf and NaN as the float instructions give them
        return _qd8_clamp((v * b) + bias, q)


FLT_MIN = 2.0 ** -126


def _flushed(x):
    """Flush-to-zero (FPCR.FZ / the Standard FPSCR value): a value below 2^-126 in magnitude becomes a zero of its
    sign. Arm ARM DDI 0487, FPRound and FPUnpack (FZ == '1')."""
    x = np.asarray(x, np.float64)
    return np.where(np.abs(x) < FLT_MIN, np.copysign(0.0, x), x)


def _ftz_op(a, b, op):
    """One float32 operation under flush-to-zero: inputs flushed, the exact result (float64 holds a product of
    two float32 exactly) flushed when it is tiny before rounding, then rounded to float32."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _flushed(op(_flushed(a), _flushed(b))).astype(np.float32)


def qd8_f32_unfused_ftz(acc, q, out_type):
    """qd8-f32-unfused as AArch32 NEON computes it: VCVT.F32.S32, VMUL.F32 by the row's inv_scale, VMUL.F32 by the
    filter scale, VADD.F32 the bias, VMAX/VMIN, every Advanced SIMD float operation in AArch32 with the Standard
    FPSCR value (flush-to-zero: denormal inputs and tiny results are zeros). Arm ARM DDI 0406C.d A2.7.3 (Advanced
    SIMD "always uses the Standard FPSCR value"); src/qd8-f32-qc8w-gemm/gen/qd8-f32-qc8w-gemm-4x8-minmax-asm-
    aarch32-neonmlal-ld64.S (vmul.f32, vmul.f32, vadd.f32)."""
    a = _acc(acc)
    M, N = a.shape[-2:]
    v = f32(wrap32(a))
    v = _ftz_op(v, np.broadcast_to(_col(q, "a_inv_scale", M, F32), v.shape), np.multiply)
    v = _ftz_op(v, np.broadcast_to(_row(q, "b_scale", N, F32), v.shape), np.multiply)
    v = _ftz_op(v, np.broadcast_to(_row(q, "bias", N, F32), v.shape), np.add)
    return _ftz_clamp(v, q)


def _ftz_clamp(v, q):
    """VMAX.F32 / VMIN.F32 by output_min and output_max under flush-to-zero."""
    lo, hi = _float(q, "output_min"), _float(q, "output_max")
    return np.minimum(np.maximum(v, _flushed(lo).astype(np.float32)), _flushed(hi).astype(np.float32)).astype(
        np.float32)


def qd8_f32_scale_product_unfused_ftz(acc, q, out_type):
    """qd8-f32-scale-product-unfused as XNNPACK's AArch32 dot-product assembly computes it (4x8c4 cortex_a55, GEMM
    and IGEMM): VMUL.F32 the filter scale by the row's inv_scale, VCVT.F32.S32 and VMUL.F32 the accumulator by that
    product, VADD.F32 the bias, VMAX/VMIN, each under the Standard FPSCR value's flush-to-zero.
    src/qs8-gemm/4x8c4-aarch32-neondot-cortex-a55.S.in; src/qd8-f32-qc8w-gemm/gen/qd8-f32-qc8w-gemm-4x8c4-minmax-
    asm-aarch32-neondot-cortex-a55.S L197-245."""
    a = _acc(acc)
    M, N = a.shape[-2:]
    s = _ftz_op(np.broadcast_to(_row(q, "b_scale", N, F32), a.shape),
                np.broadcast_to(_col(q, "a_inv_scale", M, F32), a.shape), np.multiply)
    v = _ftz_op(f32(wrap32(a)), s, np.multiply)
    return _ftz_clamp(_ftz_op(v, np.broadcast_to(_row(q, "bias", N, F32), v.shape), np.add), q)


def qd8_f32_scale_product(acc, q, out_type):
    """A plausible mistake: float(acc) times the product a_inv_scale * b_scale (rounded once more), fused with
    the bias. Not XNNPACK's order."""
    a = _acc(acc)
    M, N = a.shape[-2:]
    s = _col(q, "a_inv_scale", M, F32) * _row(q, "b_scale", N, F32)
    return _qd8_clamp(fma_f32(f32(wrap32(a)), s, np.broadcast_to(_row(q, "bias", N, F32), s.shape)), q)


def half_output(compute, out_type: str, conversion: str):
    """A qd8 float stage stored as half precision: the float32 stage (its clamp included), then the store's
    conversion. out_type "f16": fp16_bits(v, conversion) as float16 values (VCVTPS2PH imm8 0 on x86, FCVTN
    vcvt_f16_f32 on AArch64, then FMAXNM/FMINNM in f16 there: the same values, as the clamp's bounds are halves and
    rounding is monotone; AArch32 NEON's VCVT.F16.F32 flushes its float32 input under the Standard FPSCR value,
    which the -ftz stages have flushed already, and never its half output: FPConvert rounds with FZ16 cleared, Arm
    ARM DDI 0487 FPRoundCV); "bf16": bf16_bits(v, conversion), the bits. XNNPACK @75db3c0
    src/qd8-f16-qc8w-gemm/gen/qd8-f16-qc8w-gemm-1x8c8-minmax-avx2.c (_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)
    after the f32 clamp), qd8-f16-qc8w-gemm-1x8c4-minmax-neondotfp16arith.c (vcvt_f16_f32, then vmaxq_f16 and
    vminq_f16); src/qd8-bf16-qb4w-gemm/gen/*-scalar.c (xnn_bfloat16_from_float)."""
    def stage(acc, q, _out_type):
        v = compute(acc, q, "f32")
        return f16_values(fp16_bits(v, conversion)) if out_type == "f16" else bf16_bits(v, conversion)
    return stage


def qd8_f32_scale_product_unfused(acc, q, out_type):
    """XNNPACK's xngen-templated qd8 AArch64 dot-product assembly (4x16c4: ld64, ld128, cortex_a55; GEMM and
    IGEMM, f32 and f16 outputs): FMUL the filter scale by the row's inv_scale first ("kernel_scale * scale"), FMUL
    SCVTF(acc) by that product, FADD the bias, FMAX/FMIN. Three roundings, in an order of its own: up to an ulp from
    qd8-f32-unfused. src/qs8-gemm/4x16c4-aarch64-neondot-ld128.S.in L267-300;
    src/qd8-f32-qc8w-gemm/gen/qd8-f32-qc8w-gemm-4x16c4-minmax-asm-aarch64-neondot-ld128.S."""
    a = _acc(acc)
    M, N = a.shape[-2:]
    s = _row(q, "b_scale", N, F32) * _col(q, "a_inv_scale", M, F32)
    with np.errstate(over="ignore", invalid="ignore"):
        return _qd8_clamp(f32(wrap32(a)) * s + _row(q, "bias", N, F32), q)


# ---------------------------------------------------------------------------------------------------------------
# qd8 with 2-bit weights (qd8-qc2w): a float weight zero point per channel, taken off in float with the row sums

def _fnmadd(a, b, c):
    """c - a * b with one rounding (VFNMADD, FMLS: both negate the exact product)."""
    return fma_f32(-a, b, c)


def _qd8_qc2w(acc, q, out_type, *, biased: bool, fused: str, kc_term: str, tail: str):
    """One of XNNPACK's qd8-qc2w float orders. acc: sum_k (A - zp) w, exact int32 (what every kernel's integer part
    holds, less 2 x the row sum where the crumbs stay w + 2). Each kernel then takes the float weight zero point
    kzp off as v - kzp * row_sum + kzp * (kc * zp), in its own order:
      biased: the int32 holds acc + 2 * row_sum (crumbs w + 2 multiplied as they are: the scalar and NEON dot
              kernels), and (kzp + 2) * row_sum is subtracted; else acc itself (the x86 madd / VNNI kernels
              subtract 2 from each crumb) and kzp * row_sum;
      fused:  which of the two zero-point steps are one rounding: "both" (VFNMADD, VFMADD), "row" (FMLS, then
              vmlaq_f32 as FMUL + FADD), "none";
      kc_term: "product": f32(f32(kc) * f32(zp)) first, then kzp times it; "scalar": (kzp * f32(kc)) * f32(zp);
      tail:   "fma" (* inv_scale, then FMA(b_scale, bias)) or "unfused" (* inv_scale, * b_scale, + bias).
    src/qd8-f32-qc2w-gemm/gen/qd8-f32-qc2w-gemm-1x8c8-minmax-avx2-madd.c L171-189, -avxvnni.c (the same),
    -1x4c8-minmax-ssse3-madd.c (mul, sub, mul, add), -1x8c4-minmax-neondot.c (vaddq kzp + 2, vfmsq, vmlaq, vfmaq),
    -2x2-minmax-scalar.c (vout -= (kzp + 2.0f) * row_sum; vout += kzp * (float) kc * (float) zp)."""
    a = _acc(acc)
    M, N = a.shape[-2:]
    kzp = _row(q, "b_float_zero_point", N, F32)
    rows = np.asarray(need(q, "a_row_sum"), np.int64).reshape(M, 1)
    zp = np.asarray(need(q, "a_zero_point"), np.int64).reshape(-1, 1) * np.ones((M, 1), np.int64)
    kc = F32(int(need(q, "kc")))
    with np.errstate(over="ignore", invalid="ignore"):
        k = (kzp + F32(2)).astype(F32) if biased else kzp
        v = f32(wrap32(a + 2 * rows)) if biased else f32(wrap32(a))
        rs = np.broadcast_to(f32(rows), v.shape)
        kb = np.broadcast_to(k, v.shape)
        v = _fnmadd(kb, rs, v) if fused in ("both", "row") else (v - (kb * rs).astype(F32)).astype(F32)
        kzb = np.broadcast_to(kzp, v.shape)
        if kc_term == "scalar":
            v = (v + ((kzb * kc).astype(F32) * np.broadcast_to(f32(zp), v.shape)).astype(F32)).astype(F32)
        else:
            t = np.broadcast_to((kc * f32(zp)).astype(F32), v.shape)
            v = fma_f32(kzb, t, v) if fused == "both" else (v + (kzb * t).astype(F32)).astype(F32)
        v = (v * _col(q, "a_inv_scale", M, F32)).astype(F32)
        b, bias = np.broadcast_to(_row(q, "b_scale", N, F32), v.shape), np.broadcast_to(_row(q, "bias", N, F32),
                                                                                          v.shape)
        v = fma_f32(v, b, bias) if tail == "fma" else ((v * b).astype(F32) + bias).astype(F32)
    return _qd8_clamp(v, q)


# name -> (biased, fused, kc_term, tail, description, the source whose order it is)
QC2W_ORDERS = {
    "fma": (False, "both", "product", "fma", "x86 AVX2 / AVX-VNNI: VFNMADD kzp * row_sum, VFMADD kzp * (kc * zp), "
            "* inv_scale, VFMADD", "src/qd8-f32-qc2w-gemm/gen/qd8-f32-qc2w-gemm-1x8c8-minmax-avx2-madd.c L171-189"),
    "unfused": (False, "none", "product", "unfused", "x86 SSSE3: every step a multiply, then an add",
                "src/qd8-f32-qc2w-gemm/gen/qd8-f32-qc2w-gemm-1x4c8-minmax-ssse3-madd.c"),
    "neon-fmla": (True, "both", "product", "fma", "AArch64 NEON dot as clang builds it: crumbs w + 2, FMLS (kzp + 2) "
                  "* row_sum, vmlaq_f32 contracted to FMLA (arm_neon.h's a + b * c under clang's default "
                  "-ffp-contract=on), * inv_scale, FMLA", "src/qd8-f32-qc2w-gemm/gen/qd8-f32-qc2w-gemm-1x8c4-"
                  "minmax-neondot.c"),
    "neon-fmul-fadd": (True, "row", "product", "fma", "the NEON order with vmlaq_f32 as FMUL + FADD (a GCC build: "
                       "XNNPACK's CMakeLists.txt L411 passes -ffp-contract=off to GCC)",
                       "src/qd8-f32-qc2w-gemm/gen/qd8-f32-qc2w-gemm-1x8c4-minmax-neondot.c"),
    "scalar": (True, "none", "scalar", "unfused", "scalar: crumbs w + 2, (kzp + 2) * row_sum subtracted, (kzp * kc) "
               "* zp added, * inv_scale, * b_scale, + bias", "src/qd8-f32-qc2w-gemm/gen/qd8-f32-qc2w-gemm-2x2-"
               "minmax-scalar.c"),
}


def _qc2w_stage(order: str):
    biased, fused, kc_term, tail, _, _ = QC2W_ORDERS[order]
    return lambda acc, q, out_type: _qd8_qc2w(acc, q, out_type, biased=biased, fused=fused, kc_term=kc_term,
                                              tail=tail)


# ---------------------------------------------------------------------------------------------------------------
# oneDNN scales: dst = f32_to_int8((src_scale * wei_scale[n] * s32_to_f32(acc) + bias) / dst_scale + zp_dst)

def _onednn_saturate_round(d, q, out_type, rounding):
    """saturate_and_round<dst_dt>: clamp in float to the type's range, then round (nearbyintf, ties to even).
    src/cpu/simple_q10n.hpp (docs/research/onednn.md#the-modern-matmul-reference)."""
    lo, hi = OUT_RANGE[out_type]
    d = np.clip(np.asarray(d, np.float64), lo, hi)
    r = np.rint(d) if rounding == "even" else np.sign(d) * np.floor(np.abs(d) + 0.5)
    return _store(r.astype(np.int64), out_type)


def _onednn_parts(acc, q):
    a = _acc(acc)
    N = a.shape[1]
    return (f32(wrap32(a)), F32(floats32(need(q, "src_scale"), "src_scale")), _row(q, "scale", N, F32),
            _row(q, "bias", N, F32), F32(floats32(need(q, "dst_scale"), "dst_scale")), _int(q, "output_zero_point"))


def onednn_ref(acc, q, out_type, *, dst="divide", rounding="even"):
    """ref_matmul_int8: d = f32(acc) * src_scale, * wei_scale[n] (sequential float multiplies), + bias, then
    / dst_scale ('divide', the v3.0-v3.4 reference) or * (1 / dst_scale) ('reciprocal', later versions that
    precompute it), + f32(zp), saturate and round. uxlfoundation/oneDNN src/cpu/matmul/ref_matmul_int8.cpp."""
    x, ss, ws, bias, ds, zp = _onednn_parts(acc, q)
    with np.errstate(over="ignore"):          # float overflow gives infinity, which then saturates
        d = (x * ss) * ws + bias
        d = d / ds if dst == "divide" else d * (F32(1) / ds)
    return _onednn_saturate_round(d + F32(zp), q, out_type, rounding)


def onednn_jit(acc, q, out_type):
    """The JIT kernels' order: one precomputed scale src_scale * wei_scale[n], f32(acc) times it, + bias, times
    the precomputed 1 / dst_scale, + zp, saturate (VMINPS/VMAXPS) and VCVTPS2DQ (ties to even)."""
    x, ss, ws, bias, ds, zp = _onednn_parts(acc, q)
    with np.errstate(over="ignore"):
        d = (x * (ss * ws) + bias) * (F32(1) / ds)
    return _onednn_saturate_round(d + F32(zp), q, out_type, "even")


# ---------------------------------------------------------------------------------------------------------------
# XNNPACK's 4-bit weights: the int32 accumulator holds 16x the sum

def acc28(compute):
    """A stage on XNNPACK's 4-bit (qc4w) accumulators: the packers multiply the int32 bias by 16 and the kernels
    shift each nibble into a byte's high half, so the int32 holds 16 x (bias + acc), which wraps, and is shifted
    right by 4 before the float step: the stage sees (bias + acc) sign-extended from 28 bits. The bias moves into
    the accumulator here (then out again: the stage adds it back in int32, exactly) so that the wrapped sum is what
    it scales. src/reference/packing.cc L459, L516-517; src/qs8-qc4w-gemm/gen/*-scalar-lrintf.c (math_asr_s32(vacc,
    4)); float biases (qd8) stay out of it: there the 28 bits hold acc alone."""
    def stage(acc, q, out_type):
        a = _acc(acc)
        bias = _row(q, "bias", a.shape[-1], np.int64) if np.asarray(need(q, "bias")).dtype.kind in "iu" else 0
        wrapped = ((a + bias + (1 << 27)) & ((1 << 28) - 1)) - (1 << 27)
        return compute(wrapped - bias, q, out_type)
    return stage


# ---------------------------------------------------------------------------------------------------------------
# The table

XQ = f"{XNNPACK} src/microparams-init.c"
OUTPUT_STAGES: dict[str, OutputStage] = {s.name: s for s in [
    OutputStage("xnnpack-fp32-lrintf", xnnpack_fp32_lrintf, "XNNPACK fp32 reference: clamp in float, lrintf, + zp",
                f"{XNNPACK} src/xnnpack/requantization.h L30-62"),
    OutputStage("xnnpack-fp32-fmagic", xnnpack_fp32_fmagic, "XNNPACK fp32 scalar fmagic: float clamp, magic bias",
                f"{XNNPACK} src/qs8-gemm/scalar.c.in L430-438; {XQ}"),
    OutputStage("xnnpack-fp32-imagic", xnnpack_fp32_imagic, "XNNPACK fp32 scalar imagic: magic bias, integer clamp",
                f"{XNNPACK} src/qs8-gemm/scalar.c.in L440-458; {XQ}"),
    OutputStage("xnnpack-fp32-x86", xnnpack_fp32_x86,
                "XNNPACK fp32 SSE4/AVX2/AVX-512: MINPS, CVTPS2DQ, PACKSSDW, PADDSW zp, PACKSSWB, PMAXSB",
                f"{XNNPACK} src/qs8-gemm/MRx8c8-avx2.c.in L441-471"),
    OutputStage("xnnpack-fp32-avxvnni-wrap", xnnpack_fp32_avxvnni_wrap,
                "CVTPS2DQ then a wrapping 32-bit add of the zero point (INT32_MIN + negative zp -> 127)",
                f"{XNNPACK} src/qs8-gemm/MRx8c8-avxvnni.c.in L535-558"),
    OutputStage("xnnpack-fp32-neonv8", xnnpack_fp32_neonv8, "XNNPACK fp32 NEONv8: FCVTNS, SQXTN, SQADD zp, SQXTN",
                f"{XNNPACK} src/qs8-gemm/c4-neondot.c.in L573-620"),
    OutputStage("xnnpack-fp32-armsimd32", xnnpack_fp32_armsimd32,
                "XNNPACK fp32 ARMv6 SIMD32: magic bias, QSUB, SSAT/USAT 8, SSUB8/USUB8 + SEL clamp",
                f"{XNNPACK} src/qs8-gemm/c4-armsimd32.c.in; {XQ} (fp32_armsimd32)"),
    OutputStage("xnnpack-fp32-neon", xnnpack_fp32_neon,
                "XNNPACK fp32 NEON (ARMv7 params): FMUL, FADD magic bias, SQSUB magic - zp, SQXTN, SQXTN, SMAX/SMIN",
                f"{XNNPACK} src/qs8-qc8w-gemm/gen/qs8-qc8w-gemm-1x8-minmax-fp32-neon-mlal-lane.c L153-185; "
                f"src/qs8-gemm/4x8-aarch32-neon-mlal-lane-cortex-a7.S.in; {XQ}"),
    OutputStage("xnnpack-fp32-hvx", xnnpack_fp32_hvx,
                "XNNPACK fp32 HVX (v68-v71): lrintf per lane, vpack w->h sat, vadd h sat zp, vpack h->b sat, vmax/vmin",
                f"{XNNPACK} src/qs8-gemm/c4-hvx.c.in L34-61, L222-263", ("s8",)),
    OutputStage("xnnpack-rndnu", xnnpack_rndnu, "XNNPACK rndnu, exact: (x*m + 2^(s-1)) >> s, clamp, + zp",
                f"{XNNPACK} src/xnnpack/requantization.h L140-186"),
    OutputStage("xnnpack-rndnu-scalar", xnnpack_rndnu_scalar,
                "XNNPACK rndnu reference and scalar kernels: the int64 result narrowed to int32 (wraps) before the "
                "clamp", f"{XNNPACK} src/xnnpack/requantization.h L157-161; src/qs8-gemm/scalar.c.in L475-490"),
    OutputStage("xnnpack-rndnu-neon", xnnpack_rndnu_neon, "XNNPACK rndnu NEON: SQSHL, SQDMULH, SRSHL, SQXTN, SQADD",
                f"{XNNPACK} src/qs8-gemm/c4-neondot.c.in L555-620; {XQ} (rndnu_neon)"),
    OutputStage("xnnpack-rndnu16", xnnpack_rndnu16,
                "XNNPACK rndnu16 (qu8): SQRSHL by exp + 1, SQXTN, SQRDMULH by a 15-bit multiplier, SQADD zp, clamp",
                f"{XNNPACK} src/xnnpack/requantization.h L107-138; src/microparams-init.c L124-154", ("u8",)),
    OutputStage("xnnpack-rndnu-neon-wrap", xnnpack_rndnu_neon_wrap,
                "the NEON rndnu sequence with a wrapping pre-shift (SSHL for SQSHL)",
                f"{XNNPACK} src/qs8-gemm/c4-neondot.c.in L562 (vqshlq_s32 is the saturating one)"),
    *[OutputStage(f"rvv-vnclip-{m}", _rvv_stage(m),
                  f"RVV rndnu_neon: vsadd doublings, vsmul (vxrm rdn), vnclip to int16 (vxrm {m}), vsadd zp, "
                  f"vnclip to int8", f"{RVV} sections 3.8, 12.1, 12.3, 12.5; lowp kernels/riscv64/"
                  f"qs8_gemm_4x1v_rndnu_rvv.c (LOWP_VXRM={i})", ("s8",)) for i, m in enumerate(
        ("rnu", "rne", "rdn", "rod"))],
    OutputStage("rvv-vnclip-rnu-vsmul-rnu", _rvv_stage("rnu", "rnu"),
                "the RVV sequence with vxrm rnu for vsmul too (one csrwi vxrm for both): SQRDMULH's rounding, then "
                "the rounding shift", f"{RVV} sections 3.8, 12.3, 12.5", ("s8",)),
    OutputStage("tflite-G", _mbqm_stage("G", left_shift="wrap", min_min="saturate"),
                "TFLite reference double rounding: SRDHM(x * (1 << L), m) (the product wraps), RDBPOT; + zp, clamp",
                "tflite-micro @90b983c tensorflow/lite/kernels/internal/common.cc L78-90"),
    OutputStage("tflite-G-satshift", _mbqm_stage("G", left_shift="saturate", min_min="saturate"),
                "gemmlowp scalar ScaleInt32ByFixedPointAndExponent: ShiftLeft saturates",
                "gemmlowp @16e8662 fixedpoint/fixedpoint.h L125-135; internal/output.h L150-221"),
    OutputStage("tflite-U", _mbqm_stage("U", left_shift="wrap", min_min="saturate"),
                "TFLite NEON MultiplyByQuantizedMultiplier4Rows: double rounding, ties up twice",
                "tflite-micro @90b983c tensorflow/lite/kernels/internal/common.h L412-445"),
    OutputStage("tflite-S", _mbqm_stage("S", overflow="wrap"),
                "single rounding (ruy since 2021, TFLITE_SINGLE_ROUNDING): (x*m + 2^(30-s)) >> (31-s)",
                "ruy ruy/apply_multiplier.cc L48-65; tflite-micro @90b983c common.cc L31-47"),
    OutputStage("tflite-S_neon", _mbqm_stage("S_neon", left_shift="wrap"),
                "ruy ARM kernels: SSHL (wraps) by max(s+1, 0), SQDMULH, SRSHL",
                "ruy ruy/kernel_arm64.cc ~L545-561"),
    OutputStage("tflite-S_neon-sat", _mbqm_stage("S_neon", left_shift="saturate"),
                "the same with SQSHL (saturating pre-shift), as XNNPACK's rndnu", f"{XNNPACK} c4-neondot.c.in L562"),
    OutputStage("gemmlowp-fixedpoint", _mbqm_stage("G", left_shift="saturate", min_min="saturate"),
                "gemmlowp OutputStageBiasAddition, QuantizeDownInt32ByFixedPoint (SRDHM, RDBPOT, + offset), Clamp, "
                "SaturatingCast", "gemmlowp @16e8662 public/output_stages.h L68-200; internal/output.h L121-354"),
    OutputStage("fbgemm-float-generic", _fbgemm_float("generic"),
                "FBGEMM ReQuantizeOutput, generic: f32(raw) * C_multiplier, lrintf, + zp, clamp [lo, 255]",
                "pytorch/FBGEMM @71d6f8b include/fbgemm/OutputProcessing-inl.h L90-131", ("u8",)),
    OutputStage("fbgemm-float-avx2", _fbgemm_float("avx2"),
                "FBGEMM ReQuantizeOutput, AVX2: CVTPS2DQ, PACKSSDW, PADDSW zp, PACKUSWB, PMAXUB",
                "pytorch/FBGEMM @71d6f8b src/QuantUtilsAvx2.cc requantizeOutputProcessingAvx2", ("u8",)),
    OutputStage("fbgemm-fixed", fbgemm_fixed, "FBGEMM requantize_u8acc32_ref, fixed-point multiplier",
                "pytorch/FBGEMM @71d6f8b src/RefImplementations.cc L217-255", ("u8",)),
    OutputStage("qd8-f32-fma", qd8_f32_fma, "XNNPACK qd8: f32(acc) * inv_scale, FMA(b_scale, bias), clamp",
                f"{XNNPACK} src/qs8-gemm/MRx8c8-avxvnni.c.in L432-464", ("f32",)),
    OutputStage("qd8-f32-unfused", qd8_f32_unfused, "XNNPACK qd8 scalar / AArch32: multiply, then add the bias",
                f"{XNNPACK} src/qs8-gemm/scalar.c.in L307-335", ("f32",)),
    OutputStage("qd8-f32-scale-product-unfused", qd8_f32_scale_product_unfused,
                "XNNPACK's xngen qd8 AArch64 assembly: FMUL b_scale * inv_scale, FMUL f32(acc) by it, FADD bias",
                f"{XNNPACK} src/qs8-gemm/4x16c4-aarch64-neondot-ld128.S.in L267-300", ("f32",)),
    OutputStage("qd8-f32-unfused-ftz", qd8_f32_unfused_ftz,
                "XNNPACK qd8 AArch32 NEON: multiply, multiply, add, each flushing denormals to zero",
                f"Arm ARM DDI 0406C.d A2.7.3; {XNNPACK} src/qd8-f32-qc8w-gemm/gen/*-asm-aarch32-neonmlal-ld64.S",
                ("f32",)),
    OutputStage("qd8-f32-scale-product-unfused-ftz", qd8_f32_scale_product_unfused_ftz,
                "XNNPACK's AArch32 qd8 dot-product assembly: VMUL b_scale * inv_scale, VMUL f32(acc) by it, VADD bias, "
                "each flushing denormals to zero",
                f"Arm ARM DDI 0406C.d A2.7.3; {XNNPACK} src/qs8-gemm/4x8c4-aarch32-neondot-cortex-a55.S.in", ("f32",)),
    OutputStage("qd8-f32-scale-product", qd8_f32_scale_product,
                "f32(acc) * f32(inv_scale * b_scale) fused with the bias (not XNNPACK's order)", "lowp", ("f32",)),
    OutputStage("onednn-ref", onednn_ref,
                "oneDNN reference: ((f32(acc) * src_scale) * wei_scale + bias) / dst_scale + zp, saturate, rne",
                "uxlfoundation/oneDNN src/cpu/matmul/ref_matmul_int8.cpp; doc/programming_model/"
                "attributes_quantization.md"),
    OutputStage("onednn-ref-reciprocal", lambda a, q, t: onednn_ref(a, q, t, dst="reciprocal"),
                "the reference with d * (1 / dst_scale)", "uxlfoundation/oneDNN src/cpu/matmul/ref_matmul_int8.cpp"),
    OutputStage("onednn-jit", onednn_jit, "oneDNN JIT order: f32(acc) * (src_scale * wei_scale) + bias, * 1/dst_scale",
                "uxlfoundation/oneDNN doc/programming_model/attributes_quantization.md (scales applied in f32)"),
    OutputStage("onednn-ties-away", lambda a, q, t: onednn_ref(a, q, t, rounding="away"),
                "the reference rounded half away from zero (the x64 GEMM driver's round_to_nearest)",
                "uxlfoundation/oneDNN src/cpu/x64/gemm/gemm_driver.cpp L104-114"),
]}


for _order, (*_, _what, _where) in QC2W_ORDERS.items():
    OUTPUT_STAGES[f"qd8-f32-qc2w-{_order}"] = OutputStage(
        f"qd8-f32-qc2w-{_order}", _qc2w_stage(_order), f"XNNPACK qd8-qc2w {_what}, clamp",
        f"{XNNPACK} {_where}; src/reference/packing.cc L791-888", ("f32",), reads_rows=True)

QC4W = f"{XNNPACK} src/reference/packing.cc L459, L516-517; src/qs8-qc4w-gemm/gen/qs8-qc4w-gemm-1x2-minmax-fp32-" \
       "scalar-lrintf.c (math_asr_s32(vacc, 4)); src/qd8-f32-qc4w-gemm/gen/qd8-f32-qc4w-gemm-1x2-minmax-scalar.c"
for _name in ("xnnpack-fp32-lrintf", "xnnpack-fp32-fmagic", "xnnpack-fp32-imagic", "xnnpack-fp32-x86",
              "xnnpack-fp32-avxvnni-wrap", "xnnpack-fp32-neonv8", "xnnpack-fp32-neon", "qd8-f32-fma",
              "qd8-f32-unfused", "qd8-f32-unfused-ftz"):
    _base = OUTPUT_STAGES[_name]
    OUTPUT_STAGES[f"{_name}-acc28"] = OutputStage(
        f"{_name}-acc28", acc28(_base.compute), f"{_base.description}, on XNNPACK's 4-bit accumulator: "
        "bias + acc wraps at 28 bits (16x in int32)", f"{_base.citation}; {QC4W}", _base.out_types)


HALF_F16 = f"{XNNPACK} src/qd8-f16-qc8w-gemm/gen/qd8-f16-qc8w-gemm-1x8c8-minmax-avx2.c (_mm256_cvtps_ph); " \
           "qd8-f16-qc8w-gemm-1x8c4-minmax-neondotfp16arith.c (vcvt_f16_f32)"
for _name in ("qd8-f32-fma", "qd8-f32-unfused", "qd8-f32-fma-acc28", "qd8-f32-unfused-acc28",
              "qd8-f32-scale-product-unfused", "qd8-f32-scale-product-unfused-ftz", "qd8-f32-unfused-ftz",
              "qd8-f32-unfused-ftz-acc28",
              *(f"qd8-f32-qc2w-{_order}" for _order in QC2W_ORDERS)):
    _base, _half = OUTPUT_STAGES[_name], _name.replace("qd8-f32", "qd8-f16")
    OUTPUT_STAGES[_half] = OutputStage(_half, half_output(_base.compute, "f16", "rne"),
                                       f"{_base.description}; stored as f16, rounded to nearest even",
                                       f"{_base.citation}; {HALF_F16}", ("f16",), _base.reads_rows)
    OUTPUT_STAGES[f"{_half}-trunc"] = OutputStage(
        f"{_half}-trunc", half_output(_base.compute, "f16", "trunc"),
        f"{_base.description}; stored as f16 rounded toward zero (VCVTPS2PH imm8 3 for 0; not XNNPACK's)",
        f"{_base.citation}; Intel SDM Vol. 2A VCVTPS2PH (imm8 rounding control)", ("f16",), _base.reads_rows)


# The stages that take a Batch (every case's parameters at once) with (n, M, N) accumulators, and the -acc28, f16
# and truncating-f16 forms of them; tests/test_requant.py checks each against the same stage case by case. The
# rest read a parameter as one number (rndnu's per-channel shifts, SIMD32's packed clamp).
_BATCHED_BASES = ("xnnpack-fp32-lrintf", "xnnpack-fp32-fmagic", "xnnpack-fp32-imagic", "xnnpack-fp32-x86",
                  "xnnpack-fp32-avxvnni-wrap",
                  "xnnpack-fp32-neonv8", "xnnpack-fp32-neon", "xnnpack-fp32-hvx", "qd8-f32-fma", "qd8-f32-unfused",
                  "qd8-f32-unfused-ftz", "qd8-f32-scale-product-unfused", "qd8-f32-scale-product-unfused-ftz",
                  "qd8-f32-scale-product")
BATCHED_STAGES = frozenset(name for name in OUTPUT_STAGES if name.removesuffix("-trunc").removesuffix("-acc28")
                           .replace("qd8-f16", "qd8-f32") in _BATCHED_BASES)


def output_stage(name: str) -> OutputStage:
    try:
        return OUTPUT_STAGES[name]
    except KeyError:
        raise KeyError(f"no output stage named {name!r}; known: {', '.join(OUTPUT_STAGES)}") from None
