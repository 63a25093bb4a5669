"""What ggml_vec_dot_<x>_<y> computes, in exact arithmetic: lowp's oracle for ggml's dot products.

Every vec_dot multiplies integer codes of x (blocks.py) by the int8 codes of its activation type y (q8_0, q8_1 or
q8_K) and sums them exactly in integers within a group that shares one scale on each side, then scales the group's
sum: sum_g I_g * sx_g * sy_g. A format with a minimum adds sum_g offset_g * Y_g, where Y_g is what ggml stores for
the group's activation sum (q8_1's fp16 `s` = d * sum(qs), or q8_K's int16 `bsums` times d): the kernels read the
stored value and never recompute it, so the model reads it too (the precondition that it is consistent with qs is
the claimed domain's, docs/ggml.md).

The result here is the exact rational value (fractions.Fraction: every scale is a float, so exact). A kernel's
float result equals it bit for bit when every partial sum is representable (scales powers of two, sums below
2^24: the `exact` contract); where it is not, each ISA's float order is a named model of its own.

Sources: ggml-org/ggml @d99724f src/ggml-cpu/quants.c (the _generic vec_dots: the integer groups and which stored
sums they read), src/ggml-cpu/ggml-cpu.c type_traits_cpu (each type's vec_dot_type).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import gcd

import numpy as np

from lowp.kernels.ggml.blocks import FORMATS, IQ_FORMATS, QK_K, Format, with_grids
from lowp.kernels.ggml.grids import Grids

# type_traits_cpu[x].vec_dot_type: the activation format each weight format is multiplied with.
VEC_DOT_TYPE = {
    "q1_0": "q8_0", "q2_0": "q8_0", "q4_0": "q8_0", "q4_1": "q8_1", "mxfp4": "q8_0", "nvfp4": "q8_0",
    "q5_0": "q8_0", "q5_1": "q8_1", "q8_0": "q8_0", "tq1_0": "q8_K", "tq2_0": "q8_K", "q2_K": "q8_K",
    "q3_K": "q8_K", "q4_K": "q8_K", "q5_K": "q8_K", "q6_K": "q8_K", "iq4_nl": "q8_0", "iq4_xs": "q8_K",
    "iq2_xxs": "q8_K", "iq2_xs": "q8_K", "iq2_s": "q8_K", "iq3_xxs": "q8_K", "iq3_s": "q8_K", "iq1_s": "q8_K",
    "iq1_m": "q8_K",
}
SCALE_GROUP = {name: 16 for name in ("q2_K", "q3_K", "q6_K", "nvfp4", "iq2_xs", "iq2_s", "iq1_m")} | \
              {name: 32 for name in ("q4_K", "q5_K", "iq4_xs", "iq2_xxs", "iq3_xxs", "iq3_s", "iq1_s")}
MIN_GROUP = {"q4_1": 32, "q5_1": 32, "q2_K": 16, "q4_K": 32, "q5_K": 32, "iq1_s": 32}   # values sharing an offset


@dataclass(frozen=True)
class Terms:
    """A dot product as ggml's kernels build it: integer group sums times their two scales, plus the minimum
    terms. Arrays are flat over the row's groups, in order."""
    sums: np.ndarray            # int64: sum of x code * y code over each group
    x_scale: np.ndarray         # float32: the group's scale on the x side
    y_scale: np.ndarray         # float32: its activation block's d
    offsets: np.ndarray         # float32: each min group's offset (empty for a format without minimum)
    y_sums: list[Fraction]      # the stored activation sum each offset multiplies (d * sum(qs), as stored)
    abs_sums: np.ndarray | None = None   # int64: sum of |x code * y code| over each group (what a partial can reach)

    def exact(self) -> Fraction:
        total = sum((Fraction(int(i)) * Fraction(float(a)) * Fraction(float(b))
                     for i, a, b in zip(self.sums, self.x_scale, self.y_scale)), Fraction(0))
        return total + sum((Fraction(float(o)) * y for o, y in zip(self.offsets, self.y_sums)), Fraction(0))

    def crossed(self) -> "CrossTerms":
        """This pair as the CrossTerms of one activation row by one weight row (what exact.cross_margin reads)."""
        return CrossTerms(self.sums[None, None, :], self.abs_sums[None, None, :],
                          self.x_scale.astype(np.float64)[None, :], self.y_scale.astype(np.float64)[None, :],
                          self.offsets.astype(np.float64)[None, :],
                          np.array([float(v) for v in self.y_sums], np.float64).reshape(1, -1))


def formats_for(x_type: str, grids: Grids | None = None) -> dict[str, Format]:
    """The formats a dot product of x_type reads: an iq format's reads its grids (default gguf's)."""
    return with_grids(grids) if x_type in IQ_FORMATS else FORMATS


def blocks_of(name: str, n: int) -> int:
    """How many blocks of format `name` hold n values; n must be a whole number of them (ggml asserts it)."""
    qk = FORMATS[name].qk if name in FORMATS else QK_K
    if n <= 0 or n % qk:
        raise ValueError(f"{name}: n = {n} is not a positive multiple of its block size {qk}")
    return n // qk


def terms(x_type: str, x_raw, y_raw, n: int, grids: Grids | None = None) -> Terms:
    """The terms of ggml_vec_dot_<x_type>_<vec_dot_type>(n, x, y): x_raw and y_raw hold its blocks (the one pair
    of cross_terms of one row each)."""
    return cross_terms(x_type, [x_raw], [y_raw], n, grids).pair(0, 0)


def _stored_sums(x_type: str, yr: np.ndarray, y_type: str) -> np.ndarray:
    """float64, exact: the stored activation sum each of x_type's min groups multiplies, from y's records yr (one
    row, or rows along a leading axis)."""
    if y_type == "q8_1":        # one stored s = d * sum(qs) per 32-value block
        return yr["s"].view(np.float16).astype(np.float64)
    pieces = MIN_GROUP[x_type] // 16        # q8_K: bsums per 16 values, times the block's d
    bsums = yr["bsums"].astype(np.int64).reshape(*yr.shape, -1, pieces).sum(axis=-1)
    d = np.repeat(yr["d"].astype(np.float64)[..., None], bsums.shape[-1], axis=-1)
    return (bsums * d).reshape(*yr.shape[:-1], -1)


@dataclass(frozen=True)
class CrossTerms:
    """The Terms of every activation row r by every weight row c at once (a repacked gemm's nr x nc dot products):
    one decode of all rows, the group sums in one integer einsum. Scales and stored sums are float64, each exactly
    the float32, fp16 or int16-times-float32 value it stands for."""
    sums: np.ndarray            # int64 (nr, nc, G)
    abs_sums: np.ndarray        # int64 (nr, nc, G)
    x_scale: np.ndarray         # float64 (nc, G)
    y_scale: np.ndarray         # float64 (nr, G)
    offsets: np.ndarray         # float64 (nc, M): M = 0 for a format without minimum
    y_sums: np.ndarray          # float64 (nr, M)

    def values(self) -> np.ndarray:
        """(nr, nc) float64: each dot product summed in float64, which is its exact value wherever
        exact.cross_margin(self, 53) >= 1 (the caller's to check)."""
        scaled = self.sums * self.x_scale[None, :, :] * self.y_scale[:, None, :]
        return scaled.sum(axis=2) + self.y_sums @ self.offsets.T

    def pair(self, r: int, c: int) -> Terms:
        """The Terms of activation row r by weight row c (scales back in float32, stored sums as Fractions: each
        value exact)."""
        return Terms(self.sums[r, c], self.x_scale[c].astype(np.float32), self.y_scale[r].astype(np.float32),
                     self.offsets[c].astype(np.float32), [Fraction(float(v)) for v in self.y_sums[r]],
                     self.abs_sums[r, c])


def cross_terms(x_type: str, x_rows, y_rows, n: int, grids: Grids | None = None) -> CrossTerms:
    """The CrossTerms of weight rows x_rows (each the blocks of ggml_vec_dot_<x_type>'s x for n values) by
    activation rows y_rows (its y's)."""
    y_type = VEC_DOT_TYPE[x_type]
    formats = formats_for(x_type, grids)
    xf, yf = formats[x_type], formats[y_type]
    xr = np.stack([xf.records(r)[: blocks_of(x_type, n)] for r in x_rows])      # (nc, nb)
    yr = np.stack([yf.records(r)[: blocks_of(y_type, n)] for r in y_rows])
    if xr.shape[1] * xf.qk != n or yr.shape[1] * yf.qk != n:
        raise ValueError(f"{x_type} x {y_type}: {xr.shape[1]} and {yr.shape[1]} blocks given for n = {n}")
    x, y = xf.decode(xr.reshape(-1)), yf.decode(yr.reshape(-1))
    group = gcd(SCALE_GROUP.get(x_type, xf.qk), yf.qk)
    xc = x.codes.astype(np.int64).reshape(len(xr), -1, group)
    yc = y.codes.astype(np.int64).reshape(len(yr), -1, group)
    minimum = x_type in MIN_GROUP
    offsets = x.offset.reshape(len(xr), -1)[:, ::MIN_GROUP[x_type]] if minimum else np.zeros((len(xr), 0))
    y_sums = _stored_sums(x_type, yr, y_type) if minimum else np.zeros((len(yr), 0))
    return CrossTerms(np.einsum("cgk,rgk->rcg", xc, yc), np.einsum("cgk,rgk->rcg", np.abs(xc), np.abs(yc)),
                      x.scale.astype(np.float64).reshape(len(xr), -1)[:, ::group],
                      y.scale.astype(np.float64).reshape(len(yr), -1)[:, ::group],
                      offsets.astype(np.float64), y_sums)


def exact_dot(x_type: str, x_raw, y_raw, n: int, grids: Grids | None = None) -> Fraction:
    """The exact value of ggml_vec_dot_<x_type>_<its q8 type>(n, x, y), with the stored activation sums."""
    return terms(x_type, x_raw, y_raw, n, grids).exact()
