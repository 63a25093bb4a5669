"""Edge-case shapes and inputs generated from a kernel's tile sizes, as XNNPACK's GEMM micro-kernel tester
generates them: m and n below, at and above the tile and with remainders; k below, at, above and a multiple
of kr, odd, and around the spill interval of a narrow accumulator. Each shape is named, as XNNPACK's tests are
(`k_lt_8`, `n_gt_8`), by how it stands to the tile: `edge_name`."""
from __future__ import annotations

from itertools import product

import numpy as np

from lowp.kernels.registry import Kernel


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


def _relation(x: int, r: int) -> str:
    return "lt" if x < r else "eq" if x == r else "gt"


def k_edge_name(k: int, kr: int, spill: int | None) -> str:
    """How a depth stands to the tile: around the spill interval of a narrow accumulator (`k_lt_spill`,
    `k_eq_spill`, `k_gt_spill`; `k_gt_2spill` for two intervals and a remainder), else to kr (`k_lt_kr`,
    `k_eq_kr`, `k_div_kr` for a multiple of kr > 1, `k_gt_kr`)."""
    if spill:
        if k == 2 * spill + 3:
            return "k_gt_2spill"
        if abs(k - spill) <= 1:
            return f"k_{_relation(k, spill)}_spill"
    if kr > 1 and k > kr and k % kr == 0:
        return "k_div_kr"
    return f"k_{_relation(k, kr)}_kr"


def edge_name(kernel: Kernel, m: int, n: int, k: int) -> str:
    """The name of a shape by how it stands to the kernel's tile, XNNPACK-style: `m_lt_mr`/`m_gt_mr` and
    `n_lt_nr`/`n_gt_nr` where m or n is not a full tile (a dimension not named is at its tile), then the depth's
    `k_edge_name`: `k_eq_kr`, `m_gt_mr_n_lt_nr_k_lt_kr`, `k_gt_spill`."""
    t = kernel.tile
    parts = [f"m_{_relation(m, t.mr)}_mr"] if m != t.mr else []
    parts += [f"n_{_relation(n, t.nr)}_nr"] if n != t.nr else []
    return "_".join(parts + [k_edge_name(k, t.kr, t.spill)])


def edge_cases(kernel: Kernel) -> list[tuple[str, tuple[int, int, int]]]:
    """(name, (m, n, k)) of every edge shape."""
    return [(edge_name(kernel, *shape), shape) for shape in edge_shapes(kernel)]


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
