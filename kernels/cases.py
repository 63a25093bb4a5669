"""Edge-case shapes and inputs generated from a kernel's tile sizes, as XNNPACK's GEMM micro-kernel tester
generates them: m and n below, at and above the tile and with remainders; k below, at, above and a multiple
of kr, odd, and around the spill interval of a narrow accumulator."""
from __future__ import annotations

from itertools import product

import numpy as np

from .registry import Kernel


def edge_ks(kernel: Kernel) -> list[int]:
    kr, spill = kernel.tile.kr, kernel.tile.spill
    ks = {1, kr - 1, kr, kr + 1, 2 * kr, 3 * kr + 1, 7, 33}
    if spill:
        ks |= {spill - 1, spill, spill + 1, 2 * spill + 3}
    return sorted(k for k in ks if k >= 1)


def edge_shapes(kernel: Kernel) -> list[tuple[int, int, int]]:
    """(m, n, k) triples: every k edge at a full tile, and m/n remainders at a few k."""
    mr, nr = kernel.tile.mr, kernel.tile.nr
    ms = sorted({1, mr - 1, mr, mr + 1, 2 * mr + 1} - {0})
    ns = sorted({1, nr - 1, nr, nr + 1, 2 * nr + 3} - {0})
    ks = edge_ks(kernel)
    shapes = {(mr, nr, k) for k in ks}
    shapes |= set(product(ms, ns, [ks[0], kernel.tile.kr * 4 + 3]))
    return sorted(shapes)


def random_operands(kernel: Kernel, m: int, n: int, k: int, rng: np.random.Generator, *, domain: bool,
                    extremes: float = 0.0):
    """A (m x k) and B (k x n) uniformly over the kernel's claimed domain (domain=True) or the types' full range;
    a fraction `extremes` of the elements is set to the range's ends."""
    def draw(dtype, lo_hi, shape):
        info = np.iinfo(dtype)
        lo, hi = lo_hi if domain else (int(info.min), int(info.max))
        x = rng.integers(lo, hi, size=shape, endpoint=True)
        if extremes:
            pick = rng.random(shape) < extremes
            x[pick] = rng.choice([lo, hi], size=int(pick.sum()))
        return x.astype(dtype)
    return draw(kernel.a_dtype, kernel.domain.a, (m, k)), draw(kernel.b_dtype, kernel.domain.b, (k, n))
