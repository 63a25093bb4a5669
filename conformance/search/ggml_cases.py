"""The cases a ggml vec_dot is run on, and how a failing one shrinks to a block count and block values.

Where real bugs hide (docs/ggml.md): tails (block counts 1 to 9, odd counts, 2^k +- 1: a two-blocks-a-step loop
without a tail, a 4-way unrolled one), extreme values (every code at its lowest or highest LUT entry against
activations of +-127: the maddubs pair saturation; bsums at their ends), and scales at their edges (0, subnormal,
the fp16 maximum). The exact contract's cases stay on the exact domain (lowp.kernels.ggml.exact); the float
contracts' cases draw scales of every size; the probes go outside ggml's preconditions (a q8 code of -128).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lowp.kernels.ggml.dot import VEC_DOT_TYPE, formats_for, terms
from lowp.kernels.ggml.exact import draw, margin

TAIL_COUNTS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 32, 33)
EXTREME_COUNTS = (1, 2, 3)
X_FILLS = (0x00, 0xFF, 0x88, 0x77)          # every code at an end of its range, and alternating ends
FP16_EDGES = {"zero": 0.0, "subnormal": 2.0 ** -20, "max": 65504.0}


@dataclass
class Case:
    name: str
    x: np.ndarray           # uint8, whole blocks
    y: np.ndarray
    n: int

def _formats(x_type: str):
    formats = formats_for(x_type)
    return formats[x_type], formats[VEC_DOT_TYPE[x_type]]


def restamp(y_type: str, y: np.ndarray) -> np.ndarray:
    """y with its stored sums made consistent with its codes again (ggml's precondition): q8_1's s = fp16(d *
    sum(qs)), q8_K's bsums = sums of 16 codes."""
    yf = formats_for(y_type)[y_type]
    rec = y.reshape(-1).view(yf.dtype).copy()
    if y_type == "q8_K":
        rec["bsums"] = rec["qs"].astype(np.int64).reshape(len(rec), -1, 16).sum(axis=2)
    elif y_type == "q8_1":
        d = rec["d"].view(np.float16).astype(np.float64).reshape(-1)
        total = rec["qs"].astype(np.int64).sum(axis=1)
        with np.errstate(all="ignore"):
            rec["s"] = (d * total).astype(np.float16).view(np.uint16).reshape(rec["s"].shape)
    return rec.view(np.uint8).reshape(y.shape)


def _with_codes(x_type: str, y: np.ndarray, codes) -> np.ndarray:
    y_type = VEC_DOT_TYPE[x_type]
    yf = formats_for(y_type)[y_type]
    rec = y.reshape(-1).view(yf.dtype).copy()
    rec["qs"] = codes if np.ndim(codes) == 0 else np.asarray(codes).reshape(rec["qs"].shape)
    return restamp(y_type, rec.view(np.uint8).reshape(y.shape))


def _fill_codes(x_type: str, x: np.ndarray, fill: int, rng) -> np.ndarray:
    """x with every byte but its scales set to `fill` (then its scales powers of two again, as draw() makes them)."""
    from lowp.kernels.ggml.exact import _exact_scales
    xf, _ = _formats(x_type)
    out = np.full_like(x, fill)
    _exact_scales(out.reshape(-1).view(xf.dtype), x_type, rng)
    return out


def exact_cases(x_type: str, seed: int = 0) -> list[Case]:
    """The exact contract's generated cases: the tail counts, then the extremes (skipped where the extreme
    activations would leave the exact domain)."""
    rng = np.random.default_rng(seed)
    out = [Case(f"blocks-{nb}", *draw(x_type, nb, rng)) for nb in TAIL_COUNTS]
    for nb in EXTREME_COUNTS:
        for fill in X_FILLS:
            for value in (127, -127):
                x, y, n = draw(x_type, nb, rng)
                x, y = _fill_codes(x_type, x, fill, rng), _with_codes(x_type, y, value)
                if margin(terms(x_type, x, y, n)) >= 1:
                    out.append(Case(f"extreme-x{fill:02x}-y{value:+d}-blocks-{nb}", x, y, n))
    return out


@dataclass
class PairCase:
    """An nrc == 2 case: two weight rows and two activation rows of one block count, every one of the four dot
    products on the exact domain."""
    name: str
    xs: tuple
    ys: tuple
    n: int


def pair_cases(x_type: str, seed: int = 0, counts=TAIL_COUNTS[:9]) -> list[PairCase]:
    rng = np.random.default_rng(seed + 3)
    out = []
    for nb in counts:
        (x0, y0, n), (x1, y1, _) = draw(x_type, nb, rng, limit=31), draw(x_type, nb, rng, limit=31)
        if all(margin(terms(x_type, x, y, n)) >= 1 for x in (x0, x1) for y in (y0, y1)):
            out.append(PairCase(f"pairs-blocks-{nb}", (x0, x1), (y0, y1), n))
    return out


def random_exact(x_type: str, rng, most_blocks: int = 40) -> Case:
    nb = int(rng.integers(1, most_blocks + 1))
    return Case(f"drawn-{nb}", *draw(x_type, nb, rng))


def _scaled(x_type: str, x: np.ndarray, y: np.ndarray, rng, edge: str | None) -> tuple[np.ndarray, np.ndarray]:
    """x and y with every fp16/fp32 scale drawn from the normal range (or set to an fp16 edge), y's stored sums
    consistent again."""
    xf, yf = _formats(x_type)
    y_type = VEC_DOT_TYPE[x_type]
    xr, yr = x.reshape(-1).view(xf.dtype).copy(), y.reshape(-1).view(yf.dtype).copy()

    def values(shape, at_edge=False):
        if at_edge:
            return np.full(shape, FP16_EDGES[edge])
        return rng.uniform(0.5, 1.0, shape) * 2.0 ** rng.integers(-12, 2, shape) * rng.choice([-1, 1], shape)
    # the edges are the weights' scales: an activation's d comes from its values (amax / 127), and q8_1's stored
    # s = d * sum must stay finite
    for field in ("d", "m", "dmin"):
        if field in xr.dtype.names and xr.dtype[field].base == np.dtype("<u2"):
            xr[field] = values(xr[field].shape, edge is not None).astype(np.float16).view(np.uint16)
    if x_type == "iq1_m":           # its fp16 d lives in the top nibbles of the four scale words
        words = xr["scales"].copy().view("<u2").reshape(len(xr), 4)
        d = values(len(xr), edge is not None).astype(np.float16).view(np.uint16)
        for w in range(4):
            words[:, w] = (words[:, w] & 0x0FFF) | (((d >> (4 * w)) & 0xF) << 12)
        xr["scales"] = words.view(np.uint8).reshape(xr["scales"].shape)
    if x_type == "mxfp4":           # E8M0: a power of two 2^(e - 127), from the normal range of the others
        xr["e"] = 127 + rng.integers(-12, 3, xr["e"].shape)
    if x_type == "nvfp4":           # UE4M3 sub-block scales: exponent fields 1..14 (not NaN), any mantissa
        xr["d"] = (rng.integers(1, 15, xr["d"].shape) << 3) | rng.integers(0, 8, xr["d"].shape)
    if y_type == "q8_K":
        yr["d"] = np.abs(values(yr["d"].shape)).astype(np.float32)
    else:
        yr["d"] = np.abs(values(yr["d"].shape)).astype(np.float16).view(np.uint16)
    y = restamp(y_type, yr.view(np.uint8).reshape(y.shape))
    return xr.view(np.uint8).reshape(x.shape), y


def scaled_cases(x_type: str, seed: int = 0) -> list[Case]:
    """The float contracts' generated cases: full-range activations, scales of every size, the tail counts and the
    fp16 edges."""
    rng = np.random.default_rng(seed + 1)
    out = []
    for nb in TAIL_COUNTS:
        x, y, n = _full_range(x_type, nb, rng)
        out.append(Case(f"scaled-blocks-{nb}", *_scaled(x_type, x, y, rng, None), n))
    for edge in FP16_EDGES:
        for nb in (1, 3):
            x, y, n = _full_range(x_type, nb, rng)
            out.append(Case(f"scale-{edge}-blocks-{nb}", *_scaled(x_type, x, y, rng, edge), n))
    return out


def _full_range(x_type: str, nb: int, rng):
    """Random x blocks and activations over all of [-127, 127] (scales set afterwards)."""
    xf, yf = _formats(x_type)
    n = nb * xf.qk
    x = rng.integers(0, 256, (nb, xf.dtype.itemsize), dtype=np.uint8)
    y = np.zeros((n // yf.qk, yf.dtype.itemsize), np.uint8)
    y = _with_codes(x_type, y, rng.integers(-127, 128, (n // yf.qk, yf.qk)))
    return x, y, n


def random_scaled(x_type: str, rng, most_blocks: int = 40) -> Case:
    nb = int(rng.integers(1, most_blocks + 1))
    x, y, n = _full_range(x_type, nb, rng)
    return Case(f"drawn-scaled-{nb}", *_scaled(x_type, x, y, rng, None), n)


def outside_cases(x_type: str, seed: int = 0) -> list[Case]:
    """Probes outside ggml's preconditions, on the exact domain otherwise: activation codes of -128 (the AVX2
    sign trick's blind spot: ggml-quants.c limits q8 to +-127 for it)."""
    rng = np.random.default_rng(seed + 2)
    out = []
    for nb in (1, 2, 3):
        x, y, n = draw(x_type, nb, rng, limit=1)
        _, yf = _formats(x_type)
        codes = y.reshape(-1).view(yf.dtype)["qs"].copy()
        codes.reshape(-1)[:: max(1, codes.size // 8)] = -128
        y = _with_codes(x_type, y, codes)
        if margin(terms(x_type, x, y, n)) >= 1:
            out.append(Case(f"q8-minus128-blocks-{nb}", x, y, n))
    return out


def shrink(fails, x_type: str, case: Case, tries: int = 200) -> Case:
    """A smaller case that still fails (fails(case) -> bool): runs of blocks dropped (halves first, then smaller
    runs down to single blocks: an odd-count bug needs two dropped at a time), each with the activation blocks it
    pairs with; then activation blocks zeroed."""
    xf, yf = _formats(x_type)
    ratio = xf.qk // yf.qk
    best = case
    size = max(1, len(best.x) // 2)
    while size >= 1 and tries > 0:
        start = len(best.x) - size
        while start >= 0 and len(best.x) > size and tries > 0:
            keep = [b for b in range(len(best.x)) if not start <= b < start + size]
            ykeep = [b * ratio + j for b in keep for j in range(ratio)]
            trial = Case(best.name, best.x[keep], best.y[ykeep], best.n - size * xf.qk)
            tries -= 1
            if fails(trial):
                best = trial
            start = min(start - size, len(best.x) - size)
        size //= 2
    for b in range(len(best.y)):
        if tries <= 0:
            break
        codes = best.y.reshape(-1, best.y.shape[-1]).view(yf.dtype)["qs"].copy()
        if not codes[b].any():
            continue
        codes[b] = 0
        trial = Case(best.name, best.x, _with_codes(x_type, best.y, codes), best.n)
        tries -= 1
        if fails(trial):
            best = trial
    return best


@dataclass
class Row:
    """A quantizer's case: a row of k floats (whole activation blocks)."""
    name: str
    x: np.ndarray           # float32
    k: int


QUANTIZER_BLOCKS = (1, 2, 3, 5, 8)


def quantizer_rows(y_type: str, seed: int = 0) -> list[Row]:
    """Where the quantizers' named variants part: ties (x * id exactly on .5 once amax is 127: the half-even
    against half-away split), amax chosen so 127/amax and 1/(amax/127) differ, zero blocks (the bsums left or
    cleared), a largest |x| with both signs (q8_K's signed max), tiny and huge magnitudes, and plain normals."""
    qk = formats_for(y_type)[y_type].qk
    rng = np.random.default_rng(seed + 4)
    out = []
    for nb in QUANTIZER_BLOCKS:
        k = nb * qk
        normal = rng.normal(0, 1, k).astype(np.float32)
        ties = np.resize(np.array([127, 2.5, -2.5, 3.5, -0.5, 0.5, 126.5, -126.5], np.float32), k)
        split = (rng.integers(-127, 128, k) * np.float32(0.37)).astype(np.float32)
        split[::qk] = np.float32(0.37 * 127)
        zeros = normal.copy()
        zeros[: qk] = 0
        signs = normal.copy()
        signs[0], signs[1] = np.float32(3.0), np.float32(-3.0)
        tiny = (normal * np.float32(1e-30)).astype(np.float32)
        huge = (normal * np.float32(1e30)).astype(np.float32)
        out += [Row(f"{what}-blocks-{nb}", x, k) for what, x in
                (("normal", normal), ("ties", ties), ("multiplier-split", split), ("zero-block", zeros),
                 ("both-signs-max", signs), ("tiny", tiny), ("huge", huge))]
    return out
