"""lowp.conformance.contracts.fixedpoint against independent readings: exact rational re-derivations of the formulas in
docs/research/gemmlowp-fixedpoint.md, docs/research/tflite-ruy-rounding.md, the worked examples quoted there, and
properties."""
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from lowp.conformance.contracts import fixedpoint as fp
from lowp.conformance.contracts.fixedpoint import INT32_MAX, INT32_MIN, ImplementationDefined, OutOfDomain

# gemmlowp's own test values (test_fixedpoint.cc L437-476): +-(2^i + {-2..2}), the extremes, plus random ones
EDGE = sorted({v for i in range(31) for d in (-2, -1, 0, 1, 2) for v in (2 ** i + d, -(2 ** i + d))
               if INT32_MIN <= v <= INT32_MAX} | {INT32_MIN, INT32_MIN + 1, INT32_MIN + 2,
                                                  INT32_MAX, INT32_MAX - 1, INT32_MAX - 2, 0})
i32 = st.one_of(st.sampled_from(EDGE), st.integers(INT32_MIN, INT32_MAX))


# ------------------------------------------------------------------ scalar readings (Fractions, no lowp code)

def floor_half_up(q: Fraction) -> int:          # round to nearest, ties toward +inf
    return math.floor(q + Fraction(1, 2))


def half_away(q: Fraction) -> int:              # round to nearest, ties away from zero
    return int(math.copysign(math.floor(abs(q) + Fraction(1, 2)), q)) if q else 0


def ref_srdhm(a, b, minmin=INT32_MAX):
    if a == b == INT32_MIN:
        return minmin
    return floor_half_up(Fraction(a * b, 2 ** 31))


def ref_mbqm(x, m, shift, flavour, left="wrap"):
    L, R = max(shift, 0), max(-shift, 0)
    if flavour in ("G", "U"):
        v = x * 2 ** L
        if not INT32_MIN <= v <= INT32_MAX:
            v = max(INT32_MIN, min(INT32_MAX, v)) if left == "saturate" else (v + 2 ** 31) % 2 ** 32 - 2 ** 31
        h = ref_srdhm(v, m)
        return half_away(Fraction(h, 2 ** R)) if flavour == "G" else floor_half_up(Fraction(h, 2 ** R))
    if flavour in ("S", "S_neon"):
        return floor_half_up(Fraction(x * m) * Fraction(2) ** shift / 2 ** 31)
    raise AssertionError(flavour)


# ------------------------------------------------------------------ SRDHM

def test_srdhm_rounds_half_up_examples_from_notes():
    # a*b = -2^30 (-0.5) -> 0; -3*2^30 (-1.5) -> -1; +2^30 (+0.5) -> 1
    # (docs/research/gemmlowp-fixedpoint.md#saturatingroundingdoublinghighmul-srdhm)
    assert fp.srdhm(-(2 ** 15), 2 ** 15) == 0
    assert fp.srdhm(-3 * 2 ** 15, 2 ** 15) == -1
    assert fp.srdhm(2 ** 15, 2 ** 15) == 1
    assert fp.srdhm(INT32_MAX, INT32_MAX) == INT32_MAX - 1


def test_srdhm_min_min_is_flagged_and_both_variants_modelled():
    with pytest.raises(ImplementationDefined) as e:
        fp.srdhm(np.array([1, INT32_MIN]), np.array([1, INT32_MIN]))
    assert e.value.corner == "srdhm_min_min" and e.value.where.tolist() == [False, True]
    assert fp.srdhm(INT32_MIN, INT32_MIN, min_min="saturate") == INT32_MAX     # scalar / NEON / wasm
    assert fp.srdhm(INT32_MIN, INT32_MIN, min_min="sse") == INT32_MIN          # gemmlowp SSE4 / AVX2
    assert fp.srdhm(INT32_MIN, INT32_MIN + 1) == INT32_MAX                     # not the corner: exact
    assert fp.srdhm16(-32768, -32768, min_min="saturate") == 32767


@settings(max_examples=400, deadline=None)
@given(i32, i32)
def test_srdhm_matches_rational_reading(a, b):
    assert int(fp.srdhm(a, b, min_min="saturate")) == ref_srdhm(a, b)


def test_srdhm_vectorized_over_edge_grid():
    a, b = np.meshgrid(EDGE, EDGE)
    got = fp.srdhm(a, b, min_min="saturate")
    want = [[ref_srdhm(x, y) for x, y in zip(ra, rb)] for ra, rb in zip(a.tolist(), b.tolist())]
    assert got.dtype == np.int32 and got.tolist() == want


# ------------------------------------------------------------------ RDBPOT / SRMPOT / ShiftLeft

def test_rdbpot_examples_from_notes():
    assert [int(fp.rounding_divide_by_pot(x, 1)) for x in (3, -3, -1, 1)] == [2, -2, -1, 1]
    assert [int(fp.rounding_divide_by_pot(INT32_MAX, e)) for e in (1, 5, 31)] == [2 ** 30, 2 ** 26, 1]
    assert fp.rounding_divide_by_pot(-3, 1, ties="up") == -1        # ARM RSHL ground truth before gemmlowp#65
    assert fp.rounding_divide_by_pot(12345, 0) == 12345


@settings(max_examples=400, deadline=None)
@given(i32, st.integers(0, 31))
def test_rdbpot_is_std_round_of_quotient(x, e):
    # gemmlowp's unit-test oracle: std::round(double(x) / 2^e), ties away from zero (test_fixedpoint.cc L168-183)
    assert int(fp.rounding_divide_by_pot(x, e)) == half_away(Fraction(x, 2 ** e))
    assert int(fp.rounding_divide_by_pot(x, e, ties="up")) == floor_half_up(Fraction(x, 2 ** e))


def test_rdbpot_exponent_outside_0_31_is_out_of_domain():
    for e in (-1, 32):
        with pytest.raises(OutOfDomain) as err:
            fp.rounding_divide_by_pot(5, e)
        assert err.value.corner == "shift_range"


@settings(max_examples=300, deadline=None)
@given(i32, st.integers(-31, 31))
def test_srmpot_is_saturated_rounded_product(x, E):
    # test_fixedpoint.cc L185-200: round(clamp(x * 2^E, INT32_MIN, INT32_MAX))
    want = half_away(max(Fraction(INT32_MIN), min(Fraction(INT32_MAX), Fraction(x) * Fraction(2) ** E)))
    assert int(fp.saturating_rounding_multiply_by_pot(x, E)) == want


def test_shift_left_overflow_flagged_and_variants():
    assert fp.shift_left(3, 4) == 48
    assert fp.shift_left(-(2 ** 30), 1) == INT32_MIN                  # exact, not a corner
    with pytest.raises(ImplementationDefined) as e:
        fp.shift_left(2 ** 30, 1)
    assert e.value.corner == "left_shift_overflow"
    assert fp.shift_left(2 ** 30, 1, left_shift="saturate") == INT32_MAX
    assert fp.shift_left(2 ** 30, 1, left_shift="wrap") == INT32_MIN
    assert fp.shift_left(3 * 2 ** 29, 2, left_shift="wrap") == INT32_MIN     # 3 * 2^31 mod 2^32


def test_rounding_half_sum():
    assert fp.rounding_half_sum(3, 4) == 4 and fp.rounding_half_sum(2, 4) == 3
    with pytest.raises(ImplementationDefined):
        fp.rounding_half_sum(-3, 0)
    assert fp.rounding_half_sum(-3, 0, ties="away") == -2 and fp.rounding_half_sum(-3, 0, ties="up") == -1


# ------------------------------------------------------------------ MultiplyByQuantizedMultiplier

def test_tflite_issue_25087_worked_example():
    # x=7984, m=1583594044, shift=-9: exact 11.4991; double rounding gives 12, single 11
    # (docs/research/tflite-ruy-rounding.md#the-flavours-side-by-side)
    x, m, s = 7984, 1583594044, -9
    assert float(Fraction(x * m, 2 ** 40)) == pytest.approx(11.4991, abs=1e-4)
    got = {f: int(fp.multiply_by_quantized_multiplier(x, m, s, flavour=f)) for f in ("G", "U", "S", "S_neon")}
    assert got == {"G": 12, "U": 12, "S": 11, "S_neon": 11}
    # why: SRDHM lands exactly on 5888 = 11.5 * 512, a tie the second rounding breaks upward
    assert int(fp.srdhm(x, m)) == 5888 == ref_srdhm(x, m)


def test_ruy_227_example_and_a_negative_tie():
    # ruy#227: x=1, m=2^30, shift=-1: exact 0.25; double rounding 1, single 0
    assert [int(fp.multiply_by_quantized_multiplier(1, 2 ** 30, -1, flavour=f)) for f in "GUS"] == [1, 1, 0]
    # x=-3: SRDHM(-3, 2^30) = -1 (a tie, rounded up), then -1/2: G rounds away (-1), U rounds up (0); exact -0.75
    assert [int(fp.multiply_by_quantized_multiplier(-3, 2 ** 30, -1, flavour=f)) for f in "GUS"] == [-1, 0, -1]


MULT = st.integers(2 ** 30, INT32_MAX)   # what QuantizeMultiplier produces


@settings(max_examples=500, deadline=None)
@given(i32, MULT, st.integers(-31, 0))
def test_flavours_match_rational_readings(x, m, shift):
    for f in ("G", "U", "S"):
        assert int(fp.multiply_by_quantized_multiplier(x, m, shift, flavour=f)) == ref_mbqm(x, m, shift, f), f
    # the ARM construction's headroom (docs/research/tflite-ruy-rounding.md#ruy)
    if INT32_MIN <= x * 2 ** max(shift + 1, 0) <= INT32_MAX:
        assert int(fp.multiply_by_quantized_multiplier(x, m, shift, flavour="S_neon")) == ref_mbqm(x, m, shift, "S")


@settings(max_examples=300, deadline=None)
@given(st.integers(-(2 ** 20), 2 ** 20), MULT, st.integers(1, 10))
def test_flavours_with_left_shift(x, m, shift):
    fits = INT32_MIN <= x * 2 ** shift <= INT32_MAX
    for f in ("G", "U"):
        if fits:
            assert int(fp.multiply_by_quantized_multiplier(x, m, shift, flavour=f)) == ref_mbqm(x, m, shift, f)
        else:
            with pytest.raises(ImplementationDefined):
                fp.multiply_by_quantized_multiplier(x, m, shift, flavour=f)
            for left in ("wrap", "saturate"):
                got = fp.multiply_by_quantized_multiplier(x, m, shift, flavour=f, left_shift=left)
                assert int(got) == ref_mbqm(x, m, shift, f, left)
    exact = floor_half_up(Fraction(x * m * 2 ** shift, 2 ** 31))
    if INT32_MIN <= exact <= INT32_MAX:
        assert int(fp.multiply_by_quantized_multiplier(x, m, shift, flavour="S")) == exact


@settings(max_examples=500, deadline=None)
@given(i32, MULT, st.integers(-31, 0))
def test_flavours_agree_off_ties_and_differ_by_at_most_one(x, m, shift):
    g, u, s = (int(fp.multiply_by_quantized_multiplier(x, m, shift, flavour=f)) for f in "GUS")
    assert abs(g - s) <= 1 and abs(u - s) <= 1 and abs(g - u) <= 1
    R = -shift
    h = ref_srdhm(x, m)
    negative_tie = R > 0 and h < 0 and h % 2 ** R == 2 ** (R - 1)
    assert (g != u) == negative_tie           # G and U differ exactly at negative ties of the second step
    if R == 0:
        assert g == u == s                    # one rounding only: all flavours are SRDHM


def test_s_neon_loses_one_bit_of_headroom():
    # ruy ARM: SSHL by max(shift+1, 0) wraps; with shift=0 that is x << 1, which overflows for |x| >= 2^30
    x, m = 2 ** 30 + 5, 2 ** 30
    assert fp.multiply_by_quantized_multiplier(x, m, 0, flavour="S") == floor_half_up(Fraction(x, 2))
    assert fp.multiply_by_quantized_multiplier(x, m, 0, flavour="S_neon") != fp.multiply_by_quantized_multiplier(
        x, m, 0, flavour="S")


@settings(max_examples=200, deadline=None)
@given(st.lists(i32, min_size=2, max_size=2), MULT, st.integers(-31, 0), st.sampled_from(["G", "U", "S"]))
def test_monotone_in_x_for_nonnegative_multiplier(xs, m, shift, f):
    lo, hi = sorted(xs)
    assert int(fp.multiply_by_quantized_multiplier(lo, m, shift, flavour=f)) <= int(
        fp.multiply_by_quantized_multiplier(hi, m, shift, flavour=f))


def test_single_rounding_domain_and_narrowing():
    with pytest.raises(OutOfDomain) as e:
        fp.multiply_by_quantized_multiplier(5, -(2 ** 30), -1, flavour="S")
    assert e.value.corner == "negative_multiplier"
    with pytest.raises(OutOfDomain):
        fp.multiply_by_quantized_multiplier(5, 2 ** 30, 31, flavour="S")
    with pytest.raises(ImplementationDefined) as e:
        fp.multiply_by_quantized_multiplier(INT32_MAX, INT32_MAX, 30, flavour="S")
    assert e.value.corner == "int32_overflow"
    exact = floor_half_up(Fraction(INT32_MAX * INT32_MAX * 2 ** 30, 2 ** 31))
    assert int(fp.multiply_by_quantized_multiplier(INT32_MAX, INT32_MAX, 30, flavour="S", overflow="wrap")) == (
        (exact + 2 ** 31) % 2 ** 32 - 2 ** 31)


def test_mbqm_min_min_corner_in_double_rounding():
    with pytest.raises(ImplementationDefined):
        fp.multiply_by_quantized_multiplier(INT32_MIN, INT32_MIN, -1, flavour="G")
    assert fp.multiply_by_quantized_multiplier(INT32_MIN, INT32_MIN, -1, flavour="G", min_min="saturate") == 2 ** 30
    assert fp.multiply_by_quantized_multiplier(INT32_MIN, INT32_MIN, -1, flavour="G", min_min="sse") == -(2 ** 30)


def test_mbqm_corners_masks():
    x = np.array([1, 2 ** 30, -5, INT32_MIN])
    c = fp.mbqm_corners(x, np.array([2 ** 30, 2 ** 30, 2 ** 30, INT32_MIN]), 1, "G")
    assert c["left_shift_overflow"].tolist() == [False, True, False, True]
    assert c["srdhm_min_min"].tolist() == [False, False, False, True]


def test_legacy_flavours():
    # y = (x * mult) / 2^s: 'legacy' rounds ties away from zero (RDBPOT), 'legacy_up' ties up; only negative ties differ
    for x in range(-40, 41):
        for mult, s in ((3, 2), (5, 3), (1, 1)):
            q = Fraction(x * mult, 2 ** s)
            assert int(fp.multiply_by_quantized_multiplier(x, mult, -s, flavour="legacy")) == half_away(q)
            assert int(fp.multiply_by_quantized_multiplier(x, mult, -s, flavour="legacy_up")) == floor_half_up(q)
    with pytest.raises(ImplementationDefined):
        fp.multiply_by_quantized_multiplier(3 * 2 ** 18, 2 ** 12, -3, flavour="legacy")
    # 3 * 2^30 wraps to -2^30 (what the C++ does in practice), then / 8
    got = fp.multiply_by_quantized_multiplier(3 * 2 ** 18, 2 ** 12, -3, flavour="legacy", overflow="wrap")
    assert got == -(2 ** 27)


def test_quantize_multiplier_reading():
    assert fp.quantize_multiplier(0.5) == (2 ** 30, 0)
    assert fp.quantize_multiplier(1.0) == (2 ** 30, 1)
    assert fp.quantize_multiplier(0.0) == (0, 0)
    assert fp.quantize_multiplier(2.0 ** -40) == (0, 0)                   # shift < -31 flushes to zero
    assert fp.quantize_multiplier(2.0 ** 40, single_rounding=True) == (INT32_MAX, 30)
    assert fp.quantize_multiplier(1 - 2.0 ** -40) == (2 ** 30, 1)         # rounds to 2^31: renormalised
    rng = np.random.default_rng(7)
    for d in rng.uniform(1e-6, 10, 200):
        m, s = fp.quantize_multiplier(d)
        q = Fraction(d) / Fraction(2) ** s * 2 ** 31
        assert m == half_away(q) and 2 ** 30 <= m < 2 ** 31
