"""Conformance cases: shapes from each kernel's tiles (as XNNPACK's tester) and from the seeds' grids, values
from four classes, every case reproducible from its id; and the hypothesis strategy that searches for, and
shrinks, counterexamples."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from lowp.kernels.cases import edge_shapes

VALUE_CLASSES = ("uniform", "extremes", "realistic", "adversarial")
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


def cases_for(kernel, check: str, domain: str, *, grid: bool = True, seed: int = 0) -> list[Case]:
    shapes = list(edge_shapes(kernel)) + (SEED_GRID[:2] if grid else [])
    out = []
    for i, (m, n, k) in enumerate(shapes):
        for values in VALUE_CLASSES:
            out.append(Case(kernel.name, check, domain, m, n, k, values, seed * 100003 + i * 7 + VALUE_CLASSES.index(values)))
    return out


def problems(kernel, domain: str, max_m: int | None = None, max_n: int | None = None, max_k: int | None = None):
    """Hypothesis strategy of (A, B) for the search: small shapes around the tiles, elements from the domain
    with its ends weighted in. Hypothesis shrinks shapes and elements towards the smallest and towards zero,
    so a counterexample comes out with the fewest rows, columns, depth and nonzero elements."""
    (alo, ahi), (blo, bhi) = ranges(kernel, domain)
    max_m = max_m or 2 * kernel.tile.mr + 1
    max_n = max_n or 2 * kernel.tile.nr + 1
    max_k = max_k or max(4 * kernel.tile.kr + 3, kernel.tile.spill + 3 if kernel.tile.spill else 0, 40)

    def elements(lo, hi):
        ends = ([0] if lo <= 0 <= hi else []) + [lo, hi]      # hypothesis shrinks towards the first
        return st.one_of(st.sampled_from(ends), st.integers(lo, hi))

    @st.composite
    def build(draw):
        m, n, k = draw(st.integers(1, max_m)), draw(st.integers(1, max_n)), draw(st.integers(1, max_k))
        A = draw(hnp.arrays(kernel.a_dtype, (m, k), elements=elements(alo, ahi)))
        B = draw(hnp.arrays(kernel.b_dtype, (k, n), elements=elements(blo, bhi)))
        return A, B
    return build()
