"""Conformance cases: shapes from each kernel's tiles (as XNNPACK's tester) and from the seeds' grids, values
from four classes, every case reproducible from its id; the depth ladder derived from the checked domain (the
depths at which an int16 lane, a uint16 lane, a saturating int16 pair sum, an int16 column sum and an int32
accumulator would overflow, the depths where common blockings switch, the vector-width edges), with every element
at one end of its range; and the hypothesis strategy that searches for, and shrinks, counterexamples."""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from lowp.kernels.cases import edge_shapes

VALUE_CLASSES = ("uniform", "extremes", "realistic", "adversarial")
# Every element at one end of its range: "ends-lh" is A all at its low end, B all at its high end.
END_CLASSES = tuple(f"ends-{a}{b}" for a in "lh" for b in "lh")
# Depths where common GEMM blockings switch (K blocks of 256 .. 4096) and where vectors of 16 .. 128 bytes end.
BLOCKING_KS = (256, 384, 512, 768, 1024, 4096)
VECTOR_KS = (16, 32, 64, 128)
# The deepest ladder case: past int32 overflow for u8 x s8 products (65794), cheap natively and in Unicorn at 1x1.
MAX_LADDER_K = 1 << 17
FULL_TILE_MACS = 1 << 21      # deeper ladder steps run at 1x1 only
DEEP_K = 8192                 # deeper ladder steps: only the two sign extremes, at the overflow depth itself
SEED_GRID = [(h, w, d) for h, w, d in ((72, 24, 128), (120, 48, 256), (240, 72, 384), (360, 96, 512))]


@dataclass(frozen=True)
class Case:
    kernel: str
    check: str            # 'model' or a contract name
    domain: str           # 'claimed' or 'full'
    m: int
    n: int
    k: int
    values: str           # one of VALUE_CLASSES
    seed: int

    @property
    def id(self) -> str:
        return f"{self.kernel}:{self.check}:{self.domain}:{self.m}x{self.n}x{self.k}:{self.values}:{self.seed}"

    @classmethod
    def from_id(cls, text: str) -> "Case":
        try:
            kernel, check, domain, shape, values, seed = text.split(":")
            m, n, k = (int(x) for x in shape.split("x"))
            return cls(kernel, check, domain, m, n, k, values, int(seed))
        except ValueError:
            raise ValueError(f"not a case id: {text!r} (expected kernel:check:domain:MxNxK:values:seed)") from None

    def asdict(self) -> dict:
        return asdict(self)


def ranges(kernel, domain: str) -> tuple[tuple[int, int], tuple[int, int]]:
    if domain == "claimed":
        return kernel.domain.a, kernel.domain.b
    ia, ib = np.iinfo(kernel.a_dtype), np.iinfo(kernel.b_dtype)
    return (int(ia.min), int(ia.max)), (int(ib.min), int(ib.max))


def _values(rng, cls: str, lo_hi: tuple[int, int], shape, dtype, role: str):
    lo, hi = lo_hi
    if cls == "uniform":
        x = rng.integers(lo, hi, size=shape, endpoint=True)
    elif cls == "extremes":
        x = rng.integers(lo, hi, size=shape, endpoint=True)
        pick = rng.random(shape) < 0.5
        x[pick] = rng.choice([lo, hi, 0 if lo <= 0 <= hi else lo], size=int(pick.sum()))
    elif cls == "realistic":
        # Quantized normal values: activations skewed (post-ReLU, zero point at lo), weights centred.
        span = hi - lo
        if role == "A":
            x = lo + np.abs(rng.normal(0, span / 6, size=shape))
        else:
            x = (lo + hi) / 2 + rng.normal(0, span / 8, size=shape)
        x = np.clip(np.rint(x), lo, hi)
    elif cls.startswith("ends-") and len(cls) == 7:
        x = np.full(shape, lo if cls[5 if role == "A" else 6] == "l" else hi)
    elif cls == "adversarial":
        # Drive every pair sum and accumulator to its limit: A at its largest magnitude, B at the matching sign.
        big_a = hi if abs(hi) >= abs(lo) else lo
        x = np.full(shape, big_a) if role == "A" else np.where(rng.random(shape) < 0.85, hi, lo)
    else:
        raise ValueError(f"unknown value class {cls!r}; known: {', '.join(VALUE_CLASSES)}")
    return np.asarray(x, dtype=np.int64).astype(dtype)


def operands(case: Case, kernel) -> tuple[np.ndarray, np.ndarray]:
    """The case's A and B, regenerated from its id."""
    rng = np.random.default_rng(case.seed)
    ra, rb = ranges(kernel, case.domain)
    return (_values(rng, case.values, ra, (case.m, case.k), kernel.a_dtype, "A"),
            _values(rng, case.values, rb, (case.k, case.n), kernel.b_dtype, "B"))


def overflow_depths(a: tuple[int, int], b: tuple[int, int]) -> dict[str, int]:
    """The first depth at which a sum of products (or of one operand's values) drawn from these ranges, every term
    at its extreme, leaves each accumulator type a kernel might keep it in (lowp bounds' arithmetic:
    conformance/bounds.py). A kernel exact on the domain survives them all; one with a narrower accumulator than it
    admits fails at the first it cannot hold."""
    from .bounds import capacity, product_range
    p = product_range(a, b)
    out = {"int16 lane": capacity(p, "s16") + 1, "int32 accumulator": capacity(p, "s32") + 1}
    if p[0] >= 0:
        out["uint16 lane"] = capacity(p, "u16") + 1
    if capacity(p, "s16") < 2:
        out["int16 pair sum"] = 2
    for name, r in (("int16 column sums of B", b), ("int16 row sums of A", a)):
        if r != (0, 0):
            out[name] = capacity(r, "s16") + 1
    return {what: k for what, k in out.items() if 1 <= k <= MAX_LADDER_K}


def ladder_ks(kernel, domain: str) -> list[int]:
    """Every depth the ladder visits: each overflow depth and its neighbours, the blocking switches +-1, the
    vector-width edges +-1, whatever tile the kernel declares."""
    ks = set()
    for k in overflow_depths(*ranges(kernel, domain)).values():
        ks |= {k - 1, k, k + 1}
    for k in BLOCKING_KS + VECTOR_KS:
        ks |= {k - 1, k, k + 1}
    return sorted(k for k in ks if 1 <= k <= MAX_LADDER_K)


def _ladder_shapes(kernel, domain: str) -> list[tuple[tuple[int, int, int], str]]:
    """(shape, value class) of the ladder: all-ends operands at each overflow depth and its neighbours (1x1, and a
    full tile at the depth itself), at the blocking and vector-width edges uniform values on a full tile and
    extreme values at 1x1, and 2*mr - 1 by 2*nr - 1 remainders."""
    mr, nr = kernel.tile.mr, kernel.tile.nr
    a, b = ranges(kernel, domain)
    out = []
    for k in sorted(set(overflow_depths(a, b).values())):
        if k > DEEP_K:    # past the deep limit: only the two sign extremes, at 1x1 and the depth itself
            out += [((1, 1, k), cls) for cls in _sign_extremes(a, b)]
            continue
        for kk in (k - 1, k, k + 1):
            out += [((1, 1, kk), cls) for cls in END_CLASSES if kk >= 1]
        if mr * nr * k <= FULL_TILE_MACS:
            out += [((mr, nr, k), cls) for cls in END_CLASSES]
    for base in BLOCKING_KS + VECTOR_KS:
        for k in (base - 1, base, base + 1):
            out += [((mr, nr, k), "uniform"), ((1, 1, k), "extremes")]
    for k in (1, 2 * kernel.tile.kr - 1, 17):
        out.append(((2 * mr - 1, 2 * nr - 1, k), "uniform"))
    return out


def _sign_extremes(a, b) -> list[str]:
    """The END_CLASSES whose products are the largest positive and the most negative."""
    prods = {f"ends-{x}{y}": (a[0] if x == "l" else a[1]) * (b[0] if y == "l" else b[1]) for x in "lh" for y in "lh"}
    return sorted({max(prods, key=prods.get), min(prods, key=prods.get)})


def _filled(dtype, shape, fill, spots) -> np.ndarray:
    x = np.full(int(np.prod(shape)), fill, np.int64)
    for i, v in spots:
        x[i] = v
    return x.astype(dtype).reshape(shape)


def cases_for(kernel, check: str, domain: str, *, grid: bool = True, seed: int = 0) -> list[Case]:
    shapes = list(edge_shapes(kernel)) + (SEED_GRID[:2] if grid else [])
    out = []
    for i, (m, n, k) in enumerate(shapes):
        for values in VALUE_CLASSES:
            out.append(Case(kernel.name, check, domain, m, n, k, values, seed * 100003 + i * 7 + VALUE_CLASSES.index(values)))
    for i, ((m, n, k), values) in enumerate(_ladder_shapes(kernel, domain)):
        out.append(Case(kernel.name, check, domain, m, n, k, values, seed * 100003 + 50000 + i))
    return out


def problems(kernel, domain: str, max_m: int | None = None, max_n: int | None = None, max_k: int | None = None):
    """Hypothesis strategy of (A, B) for the search: small shapes around the tiles, elements from the domain
    with its ends weighted in. Hypothesis shrinks shapes and elements towards the smallest and towards zero,
    so a counterexample comes out with the fewest rows, columns, depth and nonzero elements."""
    (alo, ahi), (blo, bhi) = ranges(kernel, domain)
    max_m = max_m or 2 * kernel.tile.mr + 1
    max_n = max_n or 2 * kernel.tile.nr + 1
    max_k = max_k or max(4 * kernel.tile.kr + 3, kernel.tile.spill + 3 if kernel.tile.spill else 0, 40)
    # The search reaches the ladder's depths too (small shapes there: a deep case costs m * n * k).
    deep = [k for k in ladder_ks(kernel, domain) if max_k < k <= DEEP_K]

    def ends(lo, hi):
        return ([0] if lo <= 0 <= hi else []) + [lo, hi]      # hypothesis shrinks towards the first

    def elements(lo, hi):
        return st.one_of(st.sampled_from(ends(lo, hi)), st.integers(lo, hi))

    @functools.lru_cache(maxsize=None)      # one strategy a shape: building them per example is hypothesis's cost
    def array(dtype, shape, lo, hi, sparse):
        if not sparse:
            return hnp.arrays(dtype, shape, elements=elements(lo, hi))
        # Deep operands: one fill value (an end of the range, often) and a few drawn elements, as an adversary that
        # drives every product to its extreme would choose them; drawn as such, since hypothesis draws dense
        # arrays element by element.
        size = int(np.prod(shape))
        spots = st.lists(st.tuples(st.integers(0, size - 1), elements(lo, hi)), max_size=8)
        return st.tuples(st.sampled_from(ends(lo, hi)), spots).map(
            lambda fs: _filled(dtype, shape, fs[0], fs[1]))

    quick, which = st.integers(0, 3), st.integers(0, 2 ** 32 - 1)
    small, deep_ks = st.integers(1, 2), st.sampled_from(deep or [1])
    ms, ns, ks = st.integers(1, max_m), st.integers(1, max_n), st.integers(1, max_k)
    params = None
    if kernel.quantized and domain != "outside":
        from .quantized import quant_strategy
        params = quant_strategy(kernel, domain)

    @st.composite
    def build(draw):
        if deep and draw(quick) == 0:
            m, n, k = draw(small), draw(small), draw(deep_ks)
        else:
            m, n, k = draw(ms), draw(ns), draw(ks)
        sparse = m * n * k > 4096
        A = draw(array(np.dtype(kernel.a_dtype), (m, k), alo, ahi, sparse))
        B = draw(array(np.dtype(kernel.b_dtype), (k, n), blo, bhi, sparse))
        if not kernel.quantized:
            return A, B
        if domain == "outside":     # beyond the documented domain: drawn by the contract, from a seed
            from .quantized import draw_params
            return A, B, draw_params(kernel, A, B, draw(which), "typical", domain)
        return A, B, params(draw, m, n)
    return build()
