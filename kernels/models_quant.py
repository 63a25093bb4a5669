"""Behaviour models of requantizing kernels, composed from lowp's pieces: the kernel's raw int32 accumulation (one
of the accumulation models, A x B as the kernel's instructions compute it), the zero-point terms every int8 library
adds as corrections (ruy, XNNPACK's packed bias, gemmlowp's UnpackResultBlock: exact modulo 2^32), and the output
stage with the kernel's own flavour (lowp.isa_models.requant.OUTPUT_STAGES). A TOML entry names them:
`model = {accumulate = "lowp.kernels.models:exact_gemm", output = "xnnpack-fp32-cvt-sat"}`.
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
    """model(A, B, q, **params): the output stage `output` applied to the zero-point corrected `accumulate`."""
    accumulate: Callable
    output: str
    c_type: str

    def __call__(self, A, B, q, **params):
        from lowp.isa_models.requant import OUTPUT_STAGES
        acc = zero_point_corrected(self.accumulate(A, B, **params), A, B, q)
        return OUTPUT_STAGES[self.output].compute(acc, q, self.c_type)

    def __str__(self) -> str:
        name = getattr(self.accumulate, "__name__", repr(self.accumulate))
        return f"{name} + zero points + {self.output}"
