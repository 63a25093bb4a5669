"""The contracts a ggml vec_dot is judged under: exact where the math is exact, named where it is not, and never a
bare tolerance.

- `exact`: on the exact domain (lowp.kernels.ggml.exact: power-of-two scales, every partial sum below 2^24 units)
  the float result must be the exact value, bit for bit, whatever the kernel's float order. Saturation, a lost
  tail, a lane mix-up and a sign trick show here.
- `ordered:<order>`: with any scales, the result must be what the named float order (lowp.kernels.ggml.orders)
  makes of the exact block sums, bit for bit. A kernel claims the order ggml's code for its ISA takes.
- `bounded`: where no order is modelled yet, |s - S| <= (k + 3) * 2^-24 * M, with S the exact value, M the sum
  of every product's magnitude times its scales (each group's sum of |x code * y code| times |sx * sy|, plus the
  minimum terms' magnitudes) and k the most float terms a kernel can add: one per product (a kernel's lanes may
  split a block's integer sum into partials larger than the sum: AVX2 forms eight per block), plus the minimum
  terms. What any order of k float additions of terms each rounded twice (dx*dy, then times the integer) stays
  within, with room for the final reduction. Reported as a bound, never as a pass of the exact contract.

A wrong result is named where a simple reading explains it (`readings`): the last blocks dropped, only the first
blocks summed, zero, or an unwritten result.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from lowp.kernels.ggml.dot import VEC_DOT_TYPE, formats_for, terms

UNIT_ROUNDOFF = Fraction(1, 1 << 24)        # float32: 2^-24


@dataclass(frozen=True)
class Judgement:
    ok: bool
    expected: float             # what the contract says (the exact value, the order's result, or S for a bound)
    matched: str | None         # the contract's name when ok, else a reading that explains the result, or None
    detail: str = ""            # the bound and the distance, for `bounded`


def _bits(v) -> str:
    return f"0x{int(np.float32(v).view(np.uint32)):08x}"


def same_float(a, b) -> bool:
    """Bit for bit (a NaN equals nothing: a vec_dot on finite blocks never returns one)."""
    return bool(np.float32(a).view(np.uint32) == np.float32(b).view(np.uint32)) and not np.isnan(np.float32(a))


def exact(x_type: str, x, y, n: int, s, grids=None) -> Judgement:
    """The exact contract: s is the exact value (representable on the exact domain)."""
    value = np.float32(float(terms(x_type, x, y, n, grids).exact()))
    ok = same_float(s, value)
    return Judgement(ok, float(value), "exact" if ok else reading(x_type, x, y, n, s, grids))


def ordered(order: str, x_type: str, x, y, n: int, s, grids=None) -> Judgement:
    """The ordered contract: s is the named order's result, bit for bit."""
    from lowp.kernels.ggml.orders import ORDERS
    value = np.float32(ORDERS[order].value(x_type, x, y, n, grids))
    ok = same_float(s, value)
    return Judgement(ok, float(value), f"ordered:{order}" if ok else reading(x_type, x, y, n, s, grids))


def bound(x_type: str, x, y, n: int, grids=None) -> tuple[Fraction, Fraction]:
    """(S, the bound): the exact value and (k + 3) * 2^-24 * M (the module's doc). ValueError for blocks whose
    scales are not finite (outside every contract: no float result is right or wrong there)."""
    t = terms(x_type, x, y, n, grids)
    scales = np.concatenate([t.x_scale, t.y_scale, np.asarray(t.offsets, np.float32)]).astype(np.float64)
    if not np.isfinite(scales).all():
        raise ValueError(f"{x_type}: a scale of the case is not finite")
    products = [Fraction(float(a)) * Fraction(float(b)) for a, b in zip(t.x_scale, t.y_scale)]
    minimums = [Fraction(float(o)) * v for o, v in zip(t.offsets, t.y_sums)]
    exact_value = sum((int(i) * p for i, p in zip(t.sums, products)), Fraction(0)) + sum(minimums, Fraction(0))
    magnitude = sum((int(i) * abs(p) for i, p in zip(t.abs_sums, products)), Fraction(0)) + \
        sum((abs(m) for m in minimums), Fraction(0))
    k = n + len(minimums)
    return exact_value, (k + 3) * UNIT_ROUNDOFF * magnitude


def bounded(x_type: str, x, y, n: int, s, grids=None) -> Judgement:
    """The bounded contract: s within the bound of the exact value."""
    exact_value, limit = bound(x_type, x, y, n, grids)
    if not np.isfinite(np.float32(s)):
        return Judgement(False, float(exact_value), reading(x_type, x, y, n, s, grids),
                         f"not finite; the bound is {float(limit):.3g}")
    distance = abs(Fraction(float(np.float32(s))) - exact_value)
    ok = distance <= limit
    return Judgement(ok, float(exact_value), "bounded" if ok else reading(x_type, x, y, n, s, grids),
                     f"|s - S| = {float(distance):.6g}, bound {float(limit):.6g}")


def judge(contract: str, x_type: str, x, y, n: int, s, grids=None) -> Judgement:
    """`contract`: 'exact', 'bounded' or 'ordered:<order>'."""
    if contract == "exact":
        return exact(x_type, x, y, n, s, grids)
    if contract == "bounded":
        return bounded(x_type, x, y, n, s, grids)
    if contract.startswith("ordered:"):
        return ordered(contract.split(":", 1)[1], x_type, x, y, n, s, grids)
    raise ValueError(f"unknown ggml contract {contract!r}: exact, bounded or ordered:<order>")


def block_ratio(x_type: str) -> int:
    """Activation blocks per weight block (q1_0's 128 values span four q8_0 blocks)."""
    formats = formats_for(x_type)
    return formats[x_type].qk // formats[VEC_DOT_TYPE[x_type]].qk


def head(x_type: str, x, y, blocks: int):
    """The first `blocks` weight blocks of x and the activation blocks they pair with, and their n."""
    formats = formats_for(x_type)
    xf, yf = formats[x_type], formats[VEC_DOT_TYPE[x_type]]
    r = block_ratio(x_type)
    x = np.asarray(x, np.uint8).reshape(-1, xf.dtype.itemsize)[:blocks]
    y = np.asarray(y, np.uint8).reshape(-1, yf.dtype.itemsize)[:blocks * r]
    return x, y, blocks * xf.qk


def reading(x_type: str, x, y, n: int, s, grids=None) -> str | None:
    """A simple reading of a wrong s: what a kernel that skips work or never stores would give, or None."""
    s = np.float32(s)
    if np.isnan(s):
        return "the result was never written (s keeps lowp's NaN poison) or is NaN"
    nb = n // formats_for(x_type)[x_type].qk
    for kept in range(nb - 1, -1, -1):
        hx, hy, hn = head(x_type, x, y, kept)
        part = np.float32(float(terms(x_type, hx, hy, hn, grids).exact())) if kept else np.float32(0)
        if same_float(s, part) and (kept or nb % 2):
            dropped = nb - kept
            tail = "; an odd block count's tail" if nb % 2 and dropped == 1 else ""
            return f"the last {dropped} of {nb} block(s) dropped (the sum of the first {kept}){tail}"
    if s == 0 and nb:
        return f"0 for {nb} block(s): no block summed"
    return None
