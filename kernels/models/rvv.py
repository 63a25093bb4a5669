"""Behaviour models of lowp's RISC-V V kernels, composed from lowp.isa_models.rvv in each kernel's order.

As for the Arm models, a chain of wrapping additions (the vwmacc accumulators) is summed exactly and wrapped once:
addition modulo 2^32 is associative, so each k's vwmacc.vx from a zero accumulator, summed, wraps to the same int32.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from lowp.isa_models import rvv
from lowp.isa_models.lanes import S32, wrap

from lowp.kernels.models import CHUNK_BYTES, _pad, _round_up


def vsext_vf2(x: np.ndarray) -> np.ndarray:
    """vsext.vf2: each int8 element sign-extended to int16. RVV 1.0 section 11.3, Vector Integer Extension."""
    return x.astype(np.int16)


def vwmacc_gemm(A: np.ndarray, B: np.ndarray, *, vector_bits: int) -> np.ndarray:
    """qs8_gemm_4x1v_rndnu_rvv.c's accumulation (without the packed bias) at VLEN `vector_bits`: per panel of
    nr = VLEN/8 columns (vsetvlmax_e32m4), per k, the panel's weights vsext.vf2 to int16 and vwmacc.vx with A's
    byte (an int16 x[rs1]) into int32 lanes. The padded columns of the last panel are computed and dropped (the
    kernel runs them at vl = nc: no lane past N exists)."""
    M, K = A.shape
    N = B.shape[1]
    nr = vector_bits // 8
    npad = _round_up(N, nr)
    b = vsext_vf2(_pad(B, K, npad))                                   # (K, npad): vs2 of each k
    a = A.astype(np.int16)                                            # x[rs1] of each row and k
    total = np.zeros((M, npad), np.int64)
    step = max(1, CHUNK_BYTES // max(1, M * npad * 8))
    for k0 in range(0, K, step):
        k1 = min(K, k0 + step)
        vs2 = np.broadcast_to(b[k0:k1, None, :], (k1 - k0, M, npad))
        acc = rvv.vwmacc_vx(np.zeros((k1 - k0, M, npad), np.int32), a[:, k0:k1].T, vs2)
        total += acc.sum(axis=0, dtype=np.int64)
    return wrap(total, S32)[:, :N]


vwmacc_gemm_vlen128 = partial(vwmacc_gemm, vector_bits=128)
vwmacc_gemm_vlen256 = partial(vwmacc_gemm, vector_bits=256)
