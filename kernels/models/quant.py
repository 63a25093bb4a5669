"""Behaviour models of requantizing kernels, composed from lowp's pieces: the kernel's raw int32 accumulation (one
of the accumulation models, A x B as the kernel's instructions compute it), the zero-point terms every int8 library
adds as corrections (ruy, XNNPACK's packed bias, gemmlowp's UnpackResultBlock: exact modulo 2^32), and the output
stage with the kernel's own flavour (lowp.isa_models.requant.OUTPUT_STAGES). A TOML entry names them:
`model = {accumulate = "lowp.kernels.models:exact_gemm", output = "xnnpack-fp32-x86"}`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from lowp.isa_models.lanes import S32, wrap


def zero_point_corrected(raw: np.ndarray, A: np.ndarray, B: np.ndarray, q: dict) -> np.ndarray:
    """sum_k (A - a_zp)(B - b_zp) from raw = sum_k A*B (as the kernel computed it): raw - a_zp * colsum(B) -
    b_zp * rowsum(A) + K * a_zp * b_zp, wrapped to int32. a_zp is a scalar or one per row of A (qd8)."""
    a_zp = np.asarray(q.get("a_zero_point", 0), np.int64).reshape(-1, 1)
    b_zp = np.int64(q.get("b_zero_point", 0))
    K = A.shape[1]
    colsum = B.astype(np.int64).sum(axis=0)[None, :]
    rowsum = A.astype(np.int64).sum(axis=1)[:, None]
    return wrap(raw.astype(np.int64) - a_zp * colsum - b_zp * rowsum + K * a_zp * b_zp, S32)


@dataclass(frozen=True)
class ModelParts:
    """model(A, B, q, **params): the output stage `output` applied to the zero-point corrected `accumulate`.
    datatype: an XNNPACK kernel's (its xnnpack table's); a stage that reads the rows' sums (qd8-qc2w) gets them as
    the ukernel is handed them (lowp.kernels.xnnpack.row_terms)."""
    accumulate: Callable
    output: str
    c_type: str
    datatype: str | None = None

    def __call__(self, A, B, q, **params):
        from lowp.isa_models.requant import OUTPUT_STAGES
        acc = zero_point_corrected(self.accumulate(A, B, **params), A, B, q)
        stage = OUTPUT_STAGES[self.output]
        if stage.reads_rows and self.datatype:
            from lowp.kernels.xnnpack import row_terms
            q = {**q, **row_terms(self.datatype, A, q)}
        return stage.compute(acc, q, self.c_type)

    def __str__(self) -> str:
        name = getattr(self.accumulate, "__name__", repr(self.accumulate))
        return f"{name} + zero points + {self.output}"


# ---- XNNPACK's blockwise 4-bit weights (qd8-f32-qb4w) ------------------------------------------------------------
# A qb4w kernel scales every block of bl k by its own bf16 scale, in float, so no single int32 accumulator and no
# output stage of lowp.isa_models.requant describes it: the order of the float steps is the kernel's. XNNPACK's
# tester compares within a tolerance; lowp names each order it has read and computes it bit for bit.

def qb4w_block_sums(A: np.ndarray, B: np.ndarray, bl: int) -> tuple[np.ndarray, np.ndarray]:
    """(raw (M, N, blocks): sum over each block of A * B without zero points, ksum (N, blocks): each block's sum
    of B), exact (a kernel's int32 holds 16x raw: exact while |raw| < 2^27)."""
    M, K = A.shape
    nb = K // bl
    a = A.astype(np.int64).reshape(M, nb, bl)
    b = B.astype(np.int64).reshape(nb, bl, -1)
    return np.einsum("mbk,bkn->mnb", a, b), b.sum(axis=1).T


def _scales(q, K: int, bl: int) -> np.ndarray:
    """The case's (N, K / bl) block scales (lowp.kernels.xnnpack.block_scales: drawn ones repeat along k)."""
    from lowp.kernels.xnnpack import block_scales
    return block_scales(q["b_block_scale"], K, bl)


def _qd8_rows(q, M):
    zp = np.broadcast_to(np.asarray(q["a_zero_point"], np.int64).reshape(-1), (M,))[:, None]
    inv = np.broadcast_to(np.asarray(q["a_inv_scale"], np.float32).reshape(-1), (M,))[:, None]
    return zp, inv


def _clamped(v, q):
    lo, hi = np.float32(q["output_min"]), np.float32(q["output_max"])
    return np.minimum(np.maximum(v, lo), hi).astype(np.float32)


def qd8_f32_qb4w_reference(A, B, q, *, bl: int, **_) -> np.ndarray:
    """XNNPACK's tester (test/gemm-microkernel-tester.cc L2626-2654 @75db3c0): c = sum_b f32(raw_b) * s_b and
    kfsum = sum_b s_b * ksum_b in float from 0, c -= zp * kfsum, c *= inv_scale, c += bias, clamp."""
    raw, ksum = qb4w_block_sums(A, B, bl)
    s = _scales(q, A.shape[1], bl)
    zp, inv = _qd8_rows(q, A.shape[0])
    c = np.zeros(raw.shape[:2], np.float32)
    kfsum = np.zeros(raw.shape[1], np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for b in range(raw.shape[2]):
            c = c + raw[:, :, b].astype(np.float32) * s[:, b]
            kfsum = kfsum + s[:, b] * ksum[:, b].astype(np.float32)
        c = c - zp.astype(np.float32) * kfsum
        return _clamped((c * inv) + np.asarray(q["bias"], np.float32), q)


def qd8_f32_qb4w_scalar(A, B, q, *, bl: int, kr: int = 1, sr: int = 1, **_) -> np.ndarray:
    """XNNPACK's scalar qb4w kernels (src/qd8-f32-qb4w-gemm/gen/*-scalar.c @75db3c0): vout = vksum * zp with the
    packer's float vksum (lowp.kernels.xnnpack.qb4w_ksums: per chunk of 2*kr, in packing order), then per block
    vout += f32(16 raw_b) * (s_b / 16) (a product and a sum, each rounded), then * inv_scale, + bias, clamp."""
    from lowp.kernels.xnnpack import qb4w_ksums
    raw, _ = qb4w_block_sums(A, B, bl)
    s = _scales(q, A.shape[1], bl) / np.float32(16)
    zp, inv = _qd8_rows(q, A.shape[0])
    vksum = qb4w_ksums(B, np.asarray(q["b_block_scale"], np.float32), kr=kr, sr=sr, bl=bl)
    with np.errstate(over="ignore", invalid="ignore"):
        v = vksum * zp.astype(np.float32)
        for b in range(raw.shape[2]):
            v = v + (16 * raw[:, :, b]).astype(np.float32) * s[:, b]
        return _clamped((v * inv) + np.asarray(q["bias"], np.float32), q)


def qd8_f32_qb4w_exact(A, B, q, *, bl: int, **_) -> np.ndarray:
    """The real number each order approximates: (sum_b s_b * sum_(k in b) (A - zp) * B) * inv_scale + bias, in
    float64 (then clamped and rounded once to float32): what XNNPACK's tolerance is measured from."""
    raw, ksum = qb4w_block_sums(A, B, bl)
    s = _scales(q, A.shape[1], bl).astype(np.float64)
    zp, inv = _qd8_rows(q, A.shape[0])
    with np.errstate(over="ignore", invalid="ignore"):
        exact = ((raw - zp[:, :, None] * ksum[None]) * s[None]).sum(axis=2) * inv.astype(np.float64)
        return _clamped((exact + np.asarray(q["bias"], np.float64)).astype(np.float32), q)


QB4W_ORDERS = {"qb4w-reference": qd8_f32_qb4w_reference, "qb4w-scalar": qd8_f32_qb4w_scalar,
               "qb4w-exact": qd8_f32_qb4w_exact}


# ---- the qb4w output stage: the float orders XNNPACK's blockwise kernels use ------------------------------------
# Every qd8/qdu8-{f32,f16,bf16}-qb4w kernel of google/XNNPACK @75db3c0 computes, per output (m, n):
#   vout = vksum[n] * f32(zp[m])                       the packer's float column sum (qb4w_ksums), times the row's zp
#   per block b of bl k:   acc_b = 16 * sum_(k in b) A[m,k] * B[k,n]   in int32 (nibbles shifted into a byte's
#                          high half), exact, then f32(acc_b) * s16[n,b] added to vout, s16 = bf16(s / 16)
#                          (xnn_init_blockwise_scale_bf16_params, src/microparams-init.c L462-487)
#   vout = vout * inv_scale[m] + bias[n]; clamp (max by output_min, then min by output_max); store.
# What differs between kernels is the float rounding: the per-block step fused (one rounding: VFMADD, FMLA) or not
# (a multiply and an add), the final step fused or not, and whether the block's int32 is whole when it is converted
# or split over SIMD lanes that are summed in float only at the end (the AVX2 kernels). Each variant is named here;
# lowp.conformance.contracts.output's qb4w contracts accept the ones XNNPACK's kernels use (docs/xnnpack-abi.md).

@dataclass(frozen=True)
class Qb4wOrder:
    """One float order of the qb4w output stage. block_fma: the per-block step is one fused multiply-add; final_fma:
    vout * inv_scale + bias is one; lanes: int32 partial sums per column that the float steps see (1: the block's
    whole sum; 4: the AVX2 c8 kernels' PMADDWD pairs, lane (k mod 8) // 2, each scaled and accumulated on its own
    and summed (l0 + l1) + (l2 + l3) by two VHADDPS after the last block, lane 0 starting from vksum * zp and the
    others from 0 * zp). where: the kernels that compute it."""
    name: str
    block_fma: bool
    final_fma: bool
    lanes: int
    where: str

    def floats(self, A, B, q, *, bl: int, kr: int = 1, sr: int = 1) -> np.ndarray:
        """The clamped float32 (M, N) before the store."""
        from lowp.isa_models.float32 import fma_f32
        M, K = A.shape
        s16 = _packed_scales(q, K, bl)                                     # (N, blocks) as the kernel reads them
        zp, inv = _qd8_rows(q, M)
        vksum = _vksum(B, q, bl=bl, kr=kr, sr=sr)
        raws = _lane_sums(A, B, bl, self.lanes)                            # lanes x (M, N, blocks), exact
        with np.errstate(over="ignore", invalid="ignore"):
            zpf = zp.astype(np.float32)
            v = [vksum * zpf] + [np.zeros((M, B.shape[1]), np.float32) * zpf for _ in range(1, self.lanes)]
            for b in range(s16.shape[1]):
                for lane, raw in enumerate(raws):
                    f = (16 * raw[:, :, b]).astype(np.float32)
                    scale = np.broadcast_to(s16[:, b], f.shape)
                    v[lane] = fma_f32(f, scale, v[lane]) if self.block_fma else (v[lane] + f * scale).astype(np.float32)
            while len(v) > 1:                                              # VHADDPS: adjacent pairs, then again
                v = [(v[i] + v[i + 1]).astype(np.float32) for i in range(0, len(v), 2)]
            out, bias = v[0], np.broadcast_to(np.asarray(q["bias"], np.float32), v[0].shape)
            inv = np.broadcast_to(inv, out.shape)
            out = fma_f32(out, inv, bias) if self.final_fma else ((out * inv).astype(np.float32) + bias)
            return _clamped(out.astype(np.float32), q)


def _packed_scales(q, K: int, bl: int) -> np.ndarray:
    """bf16(s / 16) as float32: the scales the packed weights hold (the kernels' 16x nibbles undone)."""
    from lowp.isa_models.float32 import bf16_bits
    from lowp.kernels.xnnpack import block_scales
    s = block_scales(q["b_block_scale"], K, bl)
    return (bf16_bits(s / np.float32(16)).astype(np.uint32) << 16).view(np.float32)


def _vksum(B, q, *, bl: int, kr: int, sr: int) -> np.ndarray:
    from lowp.kernels.xnnpack import qb4w_ksums
    return qb4w_ksums(B, np.asarray(q["b_block_scale"], np.float32), kr=kr, sr=sr, bl=bl)


def _lane_sums(A, B, bl: int, lanes: int) -> list[np.ndarray]:
    """Per lane, the (M, N, blocks) exact sums of A * B over the block's k in that lane (lane (k mod 2 lanes) // 2:
    PMADDWD pairs; one lane: the whole block)."""
    if lanes == 1:
        return [qb4w_block_sums(A, B, bl)[0]]
    lane = (np.arange(A.shape[1]) % (2 * lanes)) // 2
    return [qb4w_block_sums(A, np.where((lane == l)[:, None], B, 0), bl)[0] for l in range(lanes)]


QB4W_STAGES = {o.name: o for o in (
    Qb4wOrder("qb4w-unfused", False, False, 1,
              "scalar (vf *= scale; vout += vf; vout *= inv_scale; vout += bias), SSE2, SSE4.1, AVX "
              "(_mm_add_ps(vout, _mm_mul_ps(...)); _mm_mul_ps; _mm_add_ps)"),
    Qb4wOrder("qb4w-fma", True, False, 1,
              "NEON dot and i8mm (vfmaq_f32 per block; vmulq_f32, vaddq_f32), AVX-512 VNNI "
              "(_mm512_fmadd_ps per block; _mm512_mul_ps, _mm512_add_ps)"),
    Qb4wOrder("qb4w-fma-fused", True, True, 1,
              "NEON MLAL-lane on AArch64 (vfmaq_f32 per block; vfmaq_f32(bias, vout, inv_scale))"),
    Qb4wOrder("qb4w-fma-fused-lanes4", True, True, 4,
              "AVX2 c8 (_mm256_fmadd_ps per block on each column's 4 PMADDWD lanes; two _mm256_hadd_ps; "
              "_mm256_fmadd_ps(vout, inv_scale, bias))"),
    # not a kernel's: the orders a wrong kernel may take
    Qb4wOrder("qb4w-unfused-fused", False, True, 1, "no XNNPACK kernel"),
    Qb4wOrder("qb4w-fma-lanes4", True, False, 4, "no XNNPACK kernel"),
)}
BF16_STORES = ("rne", "rne-nonan", "rne-daz")


def qb4w_floats(stage: str, A, B, q, *, bl: int, kr: int = 1, sr: int = 1) -> np.ndarray:
    """The clamped float32 (M, N) of the qb4w stage `stage` (QB4W_STAGES, or a name of QB4W_ORDERS: the tester's
    order, the exact real), before the store; a depth that is not a whole number of blocks padded with zeros, as
    the executor pads it for an entry with xnnpack.depth = "padded" (lowp.kernels.xnnpack.pad_to_blocks)."""
    from lowp.kernels.xnnpack import pad_to_blocks
    A, B = pad_to_blocks(np.asarray(A), np.asarray(B), bl)
    if stage in QB4W_STAGES:
        return QB4W_STAGES[stage].floats(A, B, q, bl=bl, kr=kr, sr=sr)
    return QB4W_ORDERS[stage](A, B, q, bl=bl, kr=kr, sr=sr)


def qb4w_store(v: np.ndarray, out_type: str, store: str = "rne") -> np.ndarray:
    """The float32 v stored as out_type: f32 as is, f16 rounded by `store` ('rne': VCVTPS2PH, FCVTN,
    xnn_float16_from_float, the f16 clamp after it giving the same halves; 'trunc' a wrong one), bf16 as bits by
    `store` (lowp.isa_models.float32.BF16_CONVERSIONS)."""
    from lowp.isa_models.float32 import bf16_bits, f16_values, fp16_bits
    if out_type == "f32":
        return v
    if out_type == "f16":
        return f16_values(fp16_bits(v, "rne" if store in BF16_STORES else store))
    return bf16_bits(v, store)


def qb4w_output(stage: str, A, B, q, out_type: str, *, bl: int, kr: int = 1, sr: int = 1,
                store: str = "rne") -> np.ndarray:
    """The qb4w output stage `stage` stored as out_type (qb4w_floats, then qb4w_store)."""
    return qb4w_store(qb4w_floats(stage, A, B, q, bl=bl, kr=kr, sr=sr), out_type, store)


@dataclass(frozen=True)
class Qb4wModel:
    """A qb4w kernel's behaviour model (an entry's `model = {output = "qb4w-..."}`): the stage with the kernel's
    block size, k shuffle and output type."""
    output: str
    c_type: str
    bl: int
    kr: int
    sr: int = 1
    store: str = "rne"

    def __call__(self, A, B, q, **_):
        return qb4w_output(self.output, A, B, q, self.c_type, bl=self.bl, kr=self.kr, sr=self.sr, store=self.store)

    def __str__(self) -> str:
        return f"{self.output} (bl {self.bl}, kr {self.kr}, sr {self.sr})"


def qb4w_stage_names(stores: bool = False) -> list[str]:
    """The names a qb4w model's `output` may take: a stage of QB4W_STAGES or QB4W_ORDERS, and with stores=True each
    with an explicit store (`qb4w-fma:rne-nonan`: the bf16 conversion, lowp.isa_models.float32.BF16_CONVERSIONS)."""
    names = [*QB4W_STAGES, *QB4W_ORDERS]
    return names + [f"{n}:{s}" for n in names for s in BF16_STORES + ("trunc",)] if stores else names
