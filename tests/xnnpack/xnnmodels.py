"""Behaviour models of the test kernels that no model by parts describes: the qb4w kernel's float order (one bf16
scale per block of 32 k, kr 1), as lowp.kernels.models.quant reads XNNPACK's scalar qb4w kernels."""
from lowp.kernels.models.quant import qd8_f32_qb4w_scalar


def qb4w_scalar_bl32(A, B, q):
    return qd8_f32_qb4w_scalar(A, B, q, bl=32, kr=1, sr=1)
