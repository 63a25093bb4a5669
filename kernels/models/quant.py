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
    s = np.asarray(q["b_block_scale"], np.float32)
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
    s = np.asarray(q["b_block_scale"], np.float32) / np.float32(16)
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
    s = np.asarray(q["b_block_scale"], np.float64)
    zp, inv = _qd8_rows(q, A.shape[0])
    exact = ((raw - zp[:, :, None] * ksum[None]) * s[None]).sum(axis=2) * inv.astype(np.float64)
    return _clamped((exact + np.asarray(q["bias"], np.float64)).astype(np.float32), q)


QB4W_ORDERS = {"qb4w-reference": qd8_f32_qb4w_reference, "qb4w-scalar": qd8_f32_qb4w_scalar,
               "qb4w-exact": qd8_f32_qb4w_exact}
