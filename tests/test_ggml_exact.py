"""The exact domain of ggml's dot products (lowp.kernels.ggml.exact): blocks drawn there give a dot product that
float32 computes exactly in any order, which is what lets the `exact` contract ask for bit-exact results."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from lowp.kernels.ggml.dot import VEC_DOT_TYPE, exact_dot, terms
from lowp.kernels.ggml.exact import FLOAT32_INTEGERS, draw, margin, units_used

pytest.importorskip("gguf", reason="the iq formats' grids come from gguf without a ggml checkout")
F32 = np.float32


def float32_in_some_order(t, rng) -> np.float32:
    """The terms multiplied out and summed in float32 in a random order and grouping, as some kernel might."""
    values = []
    for i, a, b in zip(t.sums, t.x_scale, t.y_scale):
        factors = [F32(i), F32(a), F32(b)]
        rng.shuffle(factors)
        values.append(F32(F32(factors[0] * factors[1]) * factors[2]))
    values += [F32(F32(o) * F32(float(y))) for o, y in zip(t.offsets, t.y_sums)]
    rng.shuffle(values)
    while len(values) > 1:                          # pairwise in a random tree
        k = int(rng.integers(len(values) - 1))
        values[k:k + 2] = [F32(values[k] + values[k + 1])]
    return values[0] if values else F32(0)


@pytest.mark.parametrize("x_type", sorted(VEC_DOT_TYPE))
def test_drawn_blocks_are_exact_in_every_float_order(x_type):
    rng = np.random.default_rng(sum(map(ord, x_type)))
    for blocks in (1, 2, 3, 5):
        x, y, n = draw(x_type, blocks, rng)
        t = terms(x_type, x, y, n)
        assert margin(t) >= 1, (x_type, blocks)
        exact = exact_dot(x_type, x, y, n)
        assert Fraction(float(F32(float(exact)))) == exact, "the exact value is a float32 number"
        for _ in range(5):
            assert float32_in_some_order(t, rng) == F32(float(exact)), (x_type, blocks)


def test_past_the_bound_some_order_rounds():
    """The bound is what it says: q6_K with full-range activations over 4 blocks is past 2^24 units, and a float32
    evaluation of its terms rounds in some order."""
    rng = np.random.default_rng(3)
    from lowp.kernels.ggml import exact as ex
    x, _, n = draw("q6_K", 4, rng)
    y = ex._activations("q8_K", 4, 127, rng)
    t = terms("q6_K", x, y, n)
    total, unit = units_used(t)
    assert total / unit > FLOAT32_INTEGERS and margin(t) < 1
    exact = F32(float(exact_dot("q6_K", x, y, n)))
    assert any(float32_in_some_order(t, rng) != exact for _ in range(50))


def test_the_fast_margin_never_says_exact_where_the_rational_one_does_not():
    from lowp.kernels.ggml.exact import margin_exact
    rng = np.random.default_rng(11)
    agree = 0
    for x_type in ("q4_0", "q4_1", "q8_0", "q4_K", "q5_K", "q2_K", "iq1_s", "mxfp4", "nvfp4"):
        for blocks in (1, 3, 7):
            for limit in (127, 31, 3):
                x, y, n = draw(x_type, blocks, rng, limit=limit)
                t = terms(x_type, x, y, n)
                fast, exact = margin(t), margin_exact(t)
                assert fast <= exact * (1 + 1e-9), (x_type, blocks, limit, fast, exact)
                agree += (fast >= 1) == (exact >= 1)
    assert agree >= 75          # of 81: only cases within a hair of the bound may differ


@pytest.mark.parametrize("x_type", sorted(VEC_DOT_TYPE))
def test_cross_terms_are_every_pairs_terms(x_type):
    """dot.CrossTerms (all rows by all columns in one einsum, summed in float64) against the per-pair rational
    path: the same margin for every pair, and a float64 sum equal to the exact value wherever cross_margin at 53
    bits says so, in the exact domain and far outside it (full-range activations, scales left as drawn)."""
    from lowp.kernels.ggml import exact as ex
    from lowp.kernels.ggml.dot import cross_terms
    from lowp.kernels.ggml.exact import margin_exact
    rng = np.random.default_rng(sum(map(ord, x_type)) + 35)
    for blocks, limit in ((1, 127), (3, 127), (2, 1)):
        xs = [draw(x_type, blocks, rng)[0] for _ in range(3)]
        _, y0, n = draw(x_type, blocks, rng)
        ys = [y0, ex._activations(VEC_DOT_TYPE[x_type], len(y0), limit, rng)]
        cross = cross_terms(x_type, xs, ys, n)
        margins, values = ex.cross_margin(cross), cross.values()
        float64_exact = ex.cross_margin(cross, bits=53) >= 1
        assert float64_exact.any()
        for r, y in enumerate(ys):
            for c, x in enumerate(xs):
                t = terms(x_type, x, y, n)
                assert margins[r, c] == margin(t), (x_type, blocks, r, c)
                assert margins[r, c] <= margin_exact(t) * (1 + 1e-9), (x_type, blocks, r, c)   # the rational one
                if float64_exact[r, c]:
                    assert Fraction(float(values[r, c])) == exact_dot(x_type, x, y, n), (x_type, blocks, r, c)
