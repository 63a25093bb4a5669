"""lowp.conformance.contracts.less_than_8bit against the worked values of docs/research/less-than-8-bit.md, seed 000's
statements, exhaustive checks and scalar readings."""
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from lowp.conformance.contracts import less_than_8bit as l8
from lowp.conformance.contracts.gemmlowp import evaluate_pipeline, gemmlowp_accumulator, make_standard_output_pipeline


def half_away(q):
    return int(math.copysign(math.floor(abs(q) + Fraction(1, 2)), q)) if q else 0


def test_requantize_nearest_is_exact_round_to_nearest():
    # seed 000: rounding_offset = 127 achieves rounding-to-nearest; 255 is odd, so there are no ties
    src = np.arange(256)
    for bits in range(1, 8):
        maxval = 2 ** bits - 1
        got = l8.requantize(src, bits, 127)
        assert got.tolist() == [math.floor(Fraction(s * maxval, 255) + Fraction(1, 2)) for s in range(256)]
        assert l8.requantize(src, bits, 0).tolist() == [s * maxval // 255 for s in range(256)]   # toward zero
    assert l8.requantize(src, 8, 0).tolist() == list(range(256))                             # 8 bits: untouched


def test_probabilistic_offsets_are_unbiased_over_a_period():
    # seed 000: a random offset in [0, 254] "guarantees zero bias": over one full period of either generator the
    # mean requantized value equals src * maxval / 255 exactly
    for gen in (l8.xorshift_offsets(255), l8.addmod_offsets(255)):
        assert sorted(gen.tolist()) == list(range(255))
        for bits in (5, 7):
            for s in (0, 1, 77, 128, 200, 255):
                q = l8.requantize(np.full(255, s), bits, gen).astype(np.int64)
                assert Fraction(int(q.sum()), 255) == Fraction(s * (2 ** bits - 1), 255)


def test_generators_first_outputs_from_notes():
    assert l8.xorshift_offsets(10).tolist() == [127, 163, 168, 103, 50, 5, 53, 142, 118, 111]
    assert l8.addmod_offsets(8).tolist() == [98, 195, 37, 134, 231, 73, 170, 12]
    assert l8.nearest_offsets(3).tolist() == [127] * 3
    # add-mod is x = (x + 97) % 255 from 1 (seed 000)
    assert l8.addmod_offsets(600).tolist() == [(1 + 97 * (i + 1)) % 255 for i in range(600)]
    xs = l8.xorshift_offsets(510)
    assert (xs[:255] == xs[255:]).all() and len(set(xs[:255].tolist())) == 255          # period 255


def test_neon_generators():
    add = l8.neon_addmod_offsets(5)
    # lanes start one iteration apart from 128 (128, 225, 67, 164, ...) and each get() advances 16 iterations
    assert [(128 + 97 * i) % 255 for i in range(4)] == [128, 225, 67, 164]
    assert add.tolist() == [[(128 + 97 * (i + 16 * k)) % 255 for i in range(16)] for k in range(1, 6)]
    xo = l8.neon_xorshift_offsets(300)
    scalar = l8.xorshift_offsets(255).tolist()
    assert xo[:, 0].tolist()[:255] == scalar                  # lane 0 starts at 128, as the scalar generator
    for lane in range(16):                                    # every lane runs the same Xorshift8(7,5,3) cycle
        start = scalar.index(int(xo[0, lane]))
        assert xo[:255, lane].tolist() == (scalar[start:] + scalar[:start])
    assert len(set(xo[0].tolist())) == 16                     # ... from 16 different points


def test_div255_neon_exhaustive():
    y = np.arange(65535)
    assert (l8.div255_neon(y) == y // 255).all()


def test_rounding_mode_choice_and_bypass():
    assert l8.choose_rounding_mode(383, 7) == "nearest"
    assert l8.choose_rounding_mode(384, 7) == "addmod"
    assert l8.choose_rounding_mode(384, 5, large="xorshift") == "xorshift"
    assert l8.choose_rounding_mode(10000, 8) == "exact"
    assert l8.choose_rounding_mode(384, 7, design="2015") == "xorshift"
    assert l8.choose_rounding_mode(384, 8, design="2015") == "nearest"
    # square N x N: requantization only from N = 100 (2N^2 >= 2N * 100)
    assert not l8.is_requantization_worth_it(99, 99) and l8.is_requantization_worth_it(100, 100)
    assert l8.effective_bit_depths(99, 99, 7, 5) == (8, 8) and l8.effective_bit_depths(1000, 1000, 7, 5) == (7, 5)
    assert not l8.is_requantization_worth_it(1, 1000)      # 2000 < 1001 * 100


def test_pack_order_small_hand_trace():
    # width 3, depth 3, one 4-wide cell of depth 2: one 4 x 16 register block; cells by depth, then w, then d
    w, d = l8.pack_order(3, 3, cell_width=4, cells=1, cell_depth=2, l1_width=64, l1_depth=256)
    assert len(w) == 4 * 16
    first = list(zip(w[:16].tolist(), d[:16].tolist()))
    assert first == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1), (-1, -1), (-1, -1),
                     (0, 2), (-1, -1), (1, 2), (-1, -1), (2, 2), (-1, -1), (-1, -1), (-1, -1)]


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 40), st.integers(1, 70), st.sampled_from([(4, 3, 2), (4, 1, 2), (8, 1, 4), (1, 4, 1)]),
       st.sampled_from([(16, 32), (64, 256), (12, 16)]))
def test_pack_order_visits_every_element_once(width, depth, fmt, l1):
    cw, cells, cd = fmt
    w, d = l8.pack_order(width, depth, cell_width=cw, cells=cells, cell_depth=cd, l1_width=l1[0], l1_depth=l1[1])
    real = w >= 0
    seen = set(zip(w[real].tolist(), d[real].tolist()))
    assert len(seen) == real.sum() == width * depth


def test_pack_side_offsets_nearest_and_restart_per_l2_block():
    kw = dict(cell_width=4, cells=1, cell_depth=2, l1_width=8, l1_depth=32)
    assert (l8.pack_side_offsets(9, 20, "nearest", **kw) == 127).all()
    a = l8.pack_side_offsets(8, 16, "addmod", l2_width=4, **kw)
    assert (a[:4] == a[4:]).all()                              # the generator restarts with each L2 block
    assert a[0, 0] == 98 and a[0, 1] == 195                    # first cell: w0 d0, w0 d1, ...


def test_rmbcf_constants_table_from_notes():
    assert l8.rmbcf_constants(65025, 3937) == (17, -1904, -1038559529)
    assert l8.rmbcf_constants(255, 127) == (2, 1, 16909320)
    assert l8.rmbcf_constants(255, 31) == (8, 7, 484915662)


@settings(max_examples=300, deadline=None)
@given(st.integers(-2 ** 24, 2 ** 24), st.sampled_from([(65025, 3937), (255, 127), (255, 31), (65025, 127 * 127)]))
def test_rmbcf_scalar_reading_and_accuracy(x, frac):
    num, den = frac
    q = (num + den // 2) // den
    srn = int(Fraction((num - q * den) * 2 ** 31, den))          # int() truncates toward zero, like C++ '/'
    want = x * q + half_away(Fraction(x * srn, 2 ** 31))
    assert int(l8.rounding_multiply_by_constant_fraction(x, num, den)) == want
    up = int(l8.rounding_multiply_by_constant_fraction(x, num, den, ties="up"))
    assert up == x * q + math.floor(Fraction(x * srn, 2 ** 31) + Fraction(1, 2))
    assert abs(want - Fraction(x * num, den)) <= 1                # a good approximation of x * num / den


def test_eight_bit_depths_reduce_to_the_exact_accumulator():
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 256, (6, 30)), rng.integers(0, 256, (30, 5))
    got = l8.less_than_8bit_accumulator(a, b, -75, -91, 8, 8, 0, 0)
    assert (got == gemmlowp_accumulator(a, b, -75, -91)).all()


def test_unpack_scalar_reading_tiny_l7r5():
    a = [[200, 3, 77], [0, 255, 128]]
    b = [[10, 250], [99, 1], [255, 0]]
    lo, ro = -30, -7
    aq = [[(v * 127 + 127) // 255 for v in row] for row in a]
    bq = [[(v * 31 + 127) // 255 for v in row] for row in b]
    want = []
    for r in range(2):
        row = []
        for c in range(2):
            xx = sum(aq[r][d] * bq[d][c] for d in range(3))
            ls, rs = sum(aq[r]), sum(bq[d][c] for d in range(3))

            def rm(x, num, den):
                q = (num + den // 2) // den
                return x * q + half_away(Fraction(x * int(Fraction((num - q * den) * 2 ** 31, den)), 2 ** 31))
            row.append(rm(xx, 65025, 127 * 31) + rm(ls * ro, 255, 127) + rm(rs * lo, 255, 31) + lo * ro * 3)
        want.append(row)
    got = l8.less_than_8bit_accumulator(a, b, lo, ro, 7, 5, 127, 127)
    assert got.tolist() == want


def test_result_stats_and_bounds_by_hand():
    s = l8.result_stats([[1, 2], [3, 4]], [[1, 1], [5, 4]])
    assert (s.count, s.med_val, s.med_signed_diff, s.med_unsigned_diff, s.max_unsigned_diff) == (4, 3, 0, 1, 2)
    assert s.mean_signed_diff == -0.25
    b = l8.less_than_8bit_bounds(1, 1, 10)
    assert (b.max_unsigned_diff, b.med_unsigned_diff, b.med_signed_diff, b.mean_signed_diff) == (1000, 1000, 1000, 1000)
    b = l8.less_than_8bit_bounds(37, 73, 169)
    assert (b.max_unsigned_diff, b.med_unsigned_diff, b.med_signed_diff, b.mean_signed_diff) == (84, 21, 2, 2.0)
    assert l8.check_result_stats_bounds(s, l8.ResultStatsBounds(2, 1, 0, 0.25))
    assert not l8.check_result_stats_bounds(s, l8.ResultStatsBounds(1, 1, 0, 0.25))
    r = l8.real_data_bounds()
    assert (r.med_unsigned_diff, r.max_unsigned_diff, r.med_signed_diff) == (2, 10, 0)
    assert r.mean_signed_diff == pytest.approx(0.2)
    ok, _, bounds = l8.check_less_than_8bit_accuracy(np.array([[1, 2]]), np.array([[1, 3]]), lhs_bits=8, rhs_bits=8)
    assert not ok and bounds == l8.EXACT_BOUNDS


@pytest.mark.parametrize("mode", ["nearest", "xorshift", "addmod"])
def test_l7r5_model_meets_gemmlowps_bounds(mode):
    # a 57 x 417 x 61 GEMM with the generic legacy parameters, packed in a fixed configuration
    rng = np.random.default_rng(11)
    rows, depth, cols = 57, 417, 61
    a, b = rng.integers(0, 256, (rows, depth)), rng.integers(0, 256, (depth, cols))
    fmt = dict(cell_depth=2, l1_width=48, l1_depth=256)
    lo = l8.pack_side_offsets(rows, depth, mode, cell_width=4, cells=3, **fmt)
    ro = l8.pack_side_offsets(cols, depth, mode, cell_width=4, cells=1, **fmt).T
    pipe = make_standard_output_pipeline(74980, 123, 19)
    expected = evaluate_pipeline(gemmlowp_accumulator(a, b, -75, -91), pipe, overflow="wrap")
    actual = evaluate_pipeline(l8.less_than_8bit_accumulator(a, b, -75, -91, 7, 5, lo, ro), pipe, overflow="wrap")
    assert 32 < np.median(expected) < 224                 # the test harness's bisection target
    ok, stats, bounds = l8.check_less_than_8bit_accuracy(actual, expected)
    assert ok, (stats, bounds)
    assert stats.max_unsigned_diff > 0                    # requantization really happened
