"""The domain where a ggml dot product is exact in float32 whatever its float order (the `exact` contract).

Every product of a vec_dot (dot.Terms: integer codes times two scales, or a minimum times a stored activation
sum) is an integer times a power of two when every fp16/fp32 scale is a power of two: the formats' sub-scales are
small integers (6-bit K-quant scales, iq's 2s + 1) and their codes integers. Then every partial sum and product a
kernel forms, in any order and any grouping, is a multiple of the smallest such power of two, `unit`; while the
sum of the products' magnitudes stays below 2^24 units, every one of them is a float32 number, so nothing rounds and
the kernel's float result must equal the exact value bit for bit. Saturation, a lost tail, a lane mix-up or a sign
trick then shows bit for bit; a float order does not.

`draw` makes such blocks: the scales powers of two within a small spread of exponents (so blocks still differ),
the activations consistent with their stored sums (ggml's precondition), and the activations' range halved until
the bound holds. `margin` says how far inside the bound a case is.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from lowp.kernels.ggml.dot import VEC_DOT_TYPE, CrossTerms, Terms, formats_for, terms
from lowp.kernels.ggml.grids import Grids

FLOAT32_INTEGERS = 1 << 24         # float32 holds every integer below this exactly
SCALE_EXPONENTS = (-6, 2)          # 2^e, e in this range, for the fp16 and fp32 scales (fp16 normals reach 2^-14)


def units_used(t: Terms) -> tuple[Fraction, Fraction]:
    """(what any partial sum can reach: the products' magnitudes, summed; the smallest power of two every product is
    a multiple of). A kernel's lanes sum products within a group in any split (AVX2's eight lanes of four), so a
    partial can exceed the group's sum: the bound takes each product's magnitude, not the group sum's."""
    values = [Fraction(int(i)) * Fraction(float(a)) * Fraction(float(b))
              for i, a, b in zip(t.abs_sums, t.x_scale, t.y_scale)]
    values += [Fraction(float(o)) * y for o, y in zip(t.offsets, t.y_sums)]
    scales = [Fraction(float(a)) * Fraction(float(b)) for a, b in zip(t.x_scale, t.y_scale)]
    scales += [Fraction(float(o)) * y for o, y in zip(t.offsets, t.y_sums) if o]
    unit = Fraction(1, max((s.denominator for s in scales if s), default=1))
    return sum((abs(v) for v in values), Fraction(0)), unit


def margin_exact(t: Terms) -> float:
    """How many times over the terms fit below 2^24 units (>= 1: exact in any order; < 1: may round), in exact
    rational arithmetic (units_used): margin's reference."""
    total, unit = units_used(t)
    return float(FLOAT32_INTEGERS * unit / total) if total else float("inf")


def _lowest_bit(values: np.ndarray) -> np.ndarray:
    """The exponent of the lowest set bit of each (exact, nonzero) float64: v = odd integer * 2^result."""
    mantissa, exponent = np.frexp(np.abs(values))
    integers = (mantissa * 2.0 ** 53).astype(np.int64)          # exact: a float64 has 53 bits
    trailing = np.log2((integers & -integers).astype(np.float64)).astype(np.int64)
    return exponent - 53 + trailing


def margin(t: Terms) -> float:
    """margin_exact in numpy (a case is drawn through it hundreds of times): cross_margin of the one pair."""
    return float(cross_margin(t.crossed())[0, 0])


def _lowest_bits_or(values: np.ndarray, used: np.ndarray, otherwise: int) -> np.ndarray:
    """_lowest_bit of each value where `used`, `otherwise` elsewhere (zeros have no lowest bit)."""
    out = np.full(values.shape, otherwise, np.int64)
    out[used] = _lowest_bit(values[used])
    return out


def cross_margin(t: CrossTerms, bits: int = 24) -> np.ndarray:
    """margin_exact of every pair of a CrossTerms at once ((nr, nc)), in numpy: the smallest unit from the
    exponents' lowest bits (a product's lowest bit is the sum of its factors'), the magnitudes summed in float64 and
    rounded up by far more than float64's error, so it never says >= 1 where margin_exact does not. bits = 53 says
    where summing the pair in float64 (CrossTerms.values) is exact."""
    never = 1 << 20                                     # above any exponent: a term that is zero bounds nothing
    a, b = t.x_scale[None, :, :], t.y_scale[:, None, :]
    low = np.minimum(0, (_lowest_bits_or(t.x_scale, t.x_scale != 0, never)[None, :, :]
                         + _lowest_bits_or(t.y_scale, t.y_scale != 0, never)[:, None, :]).min(axis=2, initial=never))
    total = (t.abs_sums * np.abs(a) * np.abs(b)).sum(axis=2)
    if t.offsets.shape[1]:
        o, y = t.offsets[None, :, :], t.y_sums[:, None, :]
        low = np.minimum(low, (_lowest_bits_or(t.offsets, t.offsets != 0, never)[None, :, :]
                               + _lowest_bits_or(t.y_sums, t.y_sums != 0, never)[:, None, :]).min(axis=2))
        total = total + np.abs(o * y).sum(axis=2)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total == 0, np.inf, np.ldexp(1.0, bits + low) / (total * (1 + 2.0 ** -40)))


def _powers_of_two(shape, rng, dtype) -> np.ndarray:
    e = rng.integers(SCALE_EXPONENTS[0], SCALE_EXPONENTS[1] + 1, shape)
    return (np.float64(2.0) ** e).astype(dtype)


SCALE_FIELDS = ("d", "m", "dmin")


def _exact_scales(rec: np.ndarray, name: str, rng) -> None:
    """Every scale field of x's blocks a power of two (signs kept random where the field is signed)."""
    for field in SCALE_FIELDS:
        if field in rec.dtype.names and rec.dtype[field].base == np.dtype("<u2"):
            sign = np.where(rng.random(rec[field].shape) < 0.5, -1.0, 1.0) if field == "m" else 1.0
            rec[field] = (sign * _powers_of_two(rec[field].shape, rng, np.float64)).astype(np.float16).view(np.uint16)
    if name == "mxfp4":
        rec["e"] = 128 + rng.integers(SCALE_EXPONENTS[0], SCALE_EXPONENTS[1] + 1, rec["e"].shape)
    if name == "nvfp4":             # UE4M3 with a zero mantissa: 2^(exp - 7), halved by ggml's decoder
        rec["d"] = (rng.integers(7 + SCALE_EXPONENTS[0] + 1, 7 + SCALE_EXPONENTS[1] + 2, rec["d"].shape) << 3)
    if name == "iq1_m":             # its fp16 d lives in the top nibbles of the four scale words
        words = rec["scales"].copy().view("<u2").reshape(len(rec), 4)
        d = _powers_of_two(len(rec), rng, np.float16).view(np.uint16)
        for w in range(4):
            words[:, w] = (words[:, w] & 0x0FFF) | (((d >> (4 * w)) & 0xF) << 12)
        rec["scales"] = words.view(np.uint8).reshape(rec["scales"].shape)


def _activations(y_type: str, nb: int, limit: int, rng) -> np.ndarray:
    """q8 blocks with codes in [-limit, limit], d a power of two, the stored sums consistent with the codes."""
    fmt = formats_for(y_type)[y_type]
    rec = np.zeros(nb, fmt.dtype)
    rec["qs"] = rng.integers(-limit, limit + 1, rec["qs"].shape)
    if y_type == "q8_K":
        rec["d"] = _powers_of_two(nb, rng, np.float32)
        rec["bsums"] = rec["qs"].astype(np.int64).reshape(nb, -1, 16).sum(axis=2)
        return rec.view(np.uint8).reshape(nb, -1)
    d = _powers_of_two(nb, rng, np.float16)
    rec["d"] = d.view(np.uint16)
    if y_type == "q8_1":
        total = rec["qs"].astype(np.int64).sum(axis=1)
        s = (d.astype(np.float64) * total).astype(np.float16)
        exact = s.astype(np.float64) == d.astype(np.float64) * total
        rec["qs"][~exact] = 0                        # a sum fp16 cannot hold exactly: that block's codes to 0
        rec["s"] = np.where(exact, s, np.float16(0)).view(np.uint16)
    return rec.view(np.uint8).reshape(nb, -1)


def draw(x_type: str, blocks: int, rng, grids: Grids | None = None, *, limit: int = 127):
    """(x bytes, y bytes, n) of `blocks` x blocks inside the exact domain; y's range halves until it fits."""
    formats = formats_for(x_type, grids)
    xf, y_type = formats[x_type], VEC_DOT_TYPE[x_type]
    yf = formats[y_type]
    n = blocks * xf.qk
    if n % yf.qk:
        raise ValueError(f"{x_type}: {blocks} blocks of {xf.qk} are not whole {y_type} blocks of {yf.qk}")
    x = rng.integers(0, 256, (blocks, xf.dtype.itemsize), dtype=np.uint8)
    _exact_scales(x.reshape(-1).view(xf.dtype), x_type, rng)
    while True:
        y = _activations(y_type, n // yf.qk, limit, rng)
        if margin(terms(x_type, x, y, n, grids)) >= 1 or limit == 0:
            return x, y, n
        limit //= 2
