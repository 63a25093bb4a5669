"""lowp.conformance.contracts.gemmlowp against scalar Python readings of gemmlowp's stage formulas
(docs/research/gemmlowp-output-stages.md), gemmlowp's own hand-computed TestWithSmallData, and its stage tests."""
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from lowp.conformance.contracts import gemmlowp as os_
from lowp.conformance.contracts.fixedpoint import INT32_MAX, INT32_MIN, ImplementationDefined, OutOfDomain


def wrap(v):
    return (v + 2 ** 31) % 2 ** 32 - 2 ** 31


def half_away(q):
    return int(math.copysign(math.floor(abs(q) + Fraction(1, 2)), q)) if q else 0


def half_up(q):
    return math.floor(q + Fraction(1, 2))


def srdhm(a, b):
    return INT32_MAX if a == b == INT32_MIN else half_up(Fraction(a * b, 2 ** 31))


def scalar_accumulator(lhs, rhs, lo, ro):
    rows, depth = len(lhs), len(lhs[0])
    cols = len(rhs[0])
    acc = [[0] * cols for _ in range(rows)]
    for r in range(rows):
        for c in range(cols):
            t = 0
            for d in range(depth):
                t = wrap(t + wrap((lhs[r][d] + lo[r]) * (rhs[d][c] + ro[c])))   # int32 '+=' as the C++ loop
            acc[r][c] = t
    return acc


def test_small_data_hand_computed():
    # gemmlowp test/test.cc TestWithSmallData: results computed by hand in the test
    a = np.array([[7, 8, 9], [10, 11, 12], [13, 14, 15], [16, 17, 18]], np.uint8)
    b = np.array([[1, 2], [3, 4], [5, 6]], np.uint8)
    c = os_.reference_eight_bit_int_gemm(a, b, 0, 0, 0, 1, 0)
    assert c.dtype == np.uint8 and c.tolist() == [[76, 100], [103, 136], [130, 172], [157, 208]]
    p = os_.evaluate_pipeline(os_.gemmlowp_accumulator(a, b), os_.make_standard_output_pipeline(0, 1, 0))
    assert p.tolist() == c.tolist()


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(1, 7), st.integers(1, 5), st.integers(0, 2 ** 32 - 1))
def test_accumulator_matches_scalar_loop_even_when_it_wraps(rows, depth, cols, seed):
    rng = np.random.default_rng(seed)
    lhs = rng.integers(0, 256, (rows, depth))
    rhs = rng.integers(0, 256, (depth, cols))
    lo = rng.integers(-2 ** 24, 2 ** 24, rows)          # large offsets: intermediate sums wrap
    ro = rng.integers(-2 ** 24, 2 ** 24, cols)
    got = os_.gemmlowp_accumulator(lhs, rhs, lo, ro)
    assert got.dtype == np.int32
    assert got.tolist() == scalar_accumulator(lhs.tolist(), rhs.tolist(), lo.tolist(), ro.tolist())


def raw_case(seed=1, rows=7, cols=5):
    rng = np.random.default_rng(seed)
    return rng.integers(-300000, 300000, (rows, cols)), rng


def test_legacy_quantize_down_matches_test_cc_oracle():
    # TestOutputStages: RDBPOT((raw + result_offset) * result_mult_int, result_shift), offset 5, mult 17, shift 14
    raw, _ = raw_case()
    got = os_.quantize_down_int32_to_uint8_scale(raw, 5, 17, 14)
    want = [[half_away(Fraction((x + 5) * 17, 2 ** 14)) for x in row] for row in raw.tolist()]
    assert got.tolist() == want
    up = os_.quantize_down_int32_to_uint8_scale(raw, 5, 17, 14, rounding="up")
    assert up.tolist() == [[half_up(Fraction((x + 5) * 17, 2 ** 14)) for x in row] for row in raw.tolist()]


def test_legacy_rounding_variants_differ_only_at_negative_ties_and_not_after_uint8_clamp():
    x = np.array([[-3, -1, 1, 3, -5, -2, 0, 7]])
    away = os_.quantize_down_int32_to_uint8_scale(x, 0, 1, 1)
    up = os_.quantize_down_int32_to_uint8_scale(x, 0, 1, 1, rounding="up")
    assert away.tolist() == [[-2, -1, 1, 2, -3, -1, 0, 4]]
    assert up.tolist() == [[-1, 0, 1, 2, -2, -1, 0, 4]]
    assert (os_.saturating_cast_to_uint8(away) == os_.saturating_cast_to_uint8(up)).all()   # the fbf7914 rationale
    assert (os_.saturating_cast_to_int8(away) != os_.saturating_cast_to_int8(up)).any()


def test_legacy_overflow_is_flagged_then_wraps():
    x = np.array([[2 ** 20]])
    with pytest.raises(ImplementationDefined) as e:
        os_.quantize_down_int32_to_uint8_scale(x, 74980, 123 * 2 ** 8, 20)
    assert e.value.corner == "int32_overflow"
    got = os_.quantize_down_int32_to_uint8_scale(x, 74980, 123 * 2 ** 8, 20, overflow="wrap")
    assert int(got[0, 0]) == half_away(Fraction(wrap((2 ** 20 + 74980) * 123 * 2 ** 8), 2 ** 20))
    with pytest.raises(OutOfDomain):
        os_.quantize_down_int32_to_uint8_scale(x, 0, 1, 32)


def test_legacy_pc_stage():
    raw, rng = raw_case(2, rows=4, cols=3)
    off, mult = rng.integers(-50, 50, 4), rng.integers(1, 40, 4)
    got = os_.quantize_down_int32_to_uint8_scale(raw, off, mult, 12, vector_shape="Col")
    want = [[half_away(Fraction((x + off[r]) * mult[r], 2 ** 12)) for x in row] for r, row in enumerate(raw.tolist())]
    assert got.tolist() == want
    with pytest.raises(ValueError):
        os_.quantize_down_int32_to_uint8_scale(raw, off, mult, 12)      # a vector without its shape


def test_fixed_point_stage_as_test_cc_derives_it():
    # test.cc L1457-1500: M = result_mult_int doubled until >= 2^30, shift = result_shift - 31 + doublings,
    # offset_after_shift = round(result_offset * result_mult_int / 2^result_shift)
    raw, _ = raw_case(3)
    M, s = 17, 14 - 31
    while M < 2 ** 30:
        M, s = M * 2, s + 1
    off = round(5 * 17 / 2 ** 14)
    got = os_.quantize_down_int32_by_fixed_point(raw, M, s, off)
    want = [[off + half_away(Fraction(srdhm(x, M), 2 ** s)) for x in row] for row in raw.tolist()]
    assert got.tolist() == want
    # and it approximates the legacy stage within one unit (two roundings vs one)
    legacy = os_.quantize_down_int32_to_uint8_scale(raw, 5, 17, 14)
    assert np.abs(got.astype(np.int64) - legacy).max() <= 1


@pytest.mark.parametrize("exponent", [-2, -1, 0, 1, 2])
def test_scale_by_fixed_point_and_exponent_oracle(exponent):
    # test.cc L1505-1541: offset + RDBPOT(SRDHM((1 << L) * raw, M), R), exponents -2..2
    raw, _ = raw_case(4)
    M, off = 1518500250, 3
    L, R = max(exponent, 0), max(-exponent, 0)
    got = os_.scale_int32_by_fixed_point_and_exponent(raw, M, exponent, off)
    want = [[off + half_away(Fraction(srdhm(x * 2 ** L, M), 2 ** R)) for x in row] for row in raw.tolist()]
    assert got.tolist() == want


def test_scale_by_fixed_point_left_shift_corner():
    x = np.array([[2 ** 30, 5]])
    with pytest.raises(ImplementationDefined) as e:
        os_.scale_int32_by_fixed_point_and_exponent(x, 2 ** 30, 1, 0)
    assert e.value.corner == "left_shift_overflow"
    sat = os_.scale_int32_by_fixed_point_and_exponent(x, 2 ** 30, 1, 0, left_shift="saturate")
    wr = os_.scale_int32_by_fixed_point_and_exponent(x, 2 ** 30, 1, 0, left_shift="wrap")
    assert sat.tolist() == [[srdhm(INT32_MAX, 2 ** 30), 5]] and wr.tolist() == [[srdhm(INT32_MIN, 2 ** 30), 5]]


def test_scale_pc_stage_indexes_by_shape():
    raw, rng = raw_case(5, rows=3, cols=4)
    Ms = rng.integers(2 ** 30, 2 ** 31 - 1, 4)
    es = np.array([-3, 0, 2, -1])
    got = os_.scale_int32_by_fixed_point_and_exponent(raw, Ms, es, -7, vector_shape="Row")
    want = [[-7 + half_away(Fraction(srdhm(x * 2 ** max(es[c], 0), Ms[c]), 2 ** max(-es[c], 0)))
             for c, x in enumerate(row)] for row in raw.tolist()]
    assert got.tolist() == want
    stage = os_.ScaleInt32ByFixedPointAndExponentPC(Ms, es, -7, vector_shape="Row")
    assert os_.evaluate_pipeline(raw, [stage]).tolist() == want


def test_bias_clamp_casts():
    x = np.array([[1, 2, 3], [4, 5, 6]])
    assert os_.bias_addition(x, [10, 20, 30], vector_shape="Row").tolist() == [[11, 22, 33], [14, 25, 36]]
    assert os_.bias_addition(x, [100, 200], vector_shape="Col").tolist() == [[101, 102, 103], [204, 205, 206]]
    with pytest.raises(ValueError):
        os_.bias_addition(x, [1, 2], vector_shape="Row")
    with pytest.raises(ImplementationDefined):
        os_.bias_addition(np.array([[INT32_MAX]]), [1], vector_shape="Row")
    assert os_.clamp(np.array([-5, 0, 5, 50]), 0, 10).tolist() == [0, 0, 5, 10]
    assert os_.clamp(np.array([-5, 5]), 10, 0).tolist() == [0, 0]                  # max applied last wins
    v = np.array([-40000, -129, -1, 0, 127, 128, 255, 256, 40000])
    assert os_.saturating_cast_to_uint8(v).tolist() == [0, 0, 0, 0, 127, 128, 255, 255, 255]
    assert os_.saturating_cast_to_int8(v).tolist() == [-128, -128, -1, 0, 127, 127, 127, 127, 127]
    assert os_.saturating_cast_to_int16(v).tolist() == [-32768, -129, -1, 0, 127, 128, 255, 256, 32767]
    assert os_.truncating_cast_to_uint8(v).tolist() == [x & 255 for x in v.tolist()]


def test_pipeline_order_and_tflite_shape():
    # TFLite through gemmlowp: (BiasAddition<Col>, ScaleInt32ByFixedPointAndExponent, Clamp, SaturatingCastToInt8)
    raw, rng = raw_case(6, rows=4, cols=3)
    bias = rng.integers(-1000, 1000, 4)
    M, e, zp = 1395864371, -9, -3
    stages = [os_.BiasAddition(bias, "Col"), os_.ScaleInt32ByFixedPointAndExponent(M, e, zp), os_.Clamp(-100, 90),
              os_.SaturatingCastToInt8()]
    got = os_.evaluate_pipeline(raw, stages)
    want = [[min(max(zp + half_away(Fraction(srdhm(x + bias[r], M), 2 ** 9)), -100), 90) for x in row]
            for r, row in enumerate(raw.tolist())]
    assert got.dtype == np.int8 and got.tolist() == want
    assert os_.evaluate_pipeline(raw, []).tolist() == raw.tolist()                  # empty: raw int32
    with pytest.raises(ValueError):
        os_.evaluate_pipeline(raw, [os_.SaturatingCastToUint8(), os_.Clamp(0, 1)])


def test_reference_eight_bit_int_gemm_generic_params_wrap():
    # the generic test parameters (-75, -91, 74980, 123) overflow int32 at large depth: the C++ relies on wrap
    rng = np.random.default_rng(9)
    a = rng.integers(150, 256, (3, 2000))
    b = rng.integers(150, 256, (2000, 2))
    with pytest.raises(ImplementationDefined):
        os_.reference_eight_bit_int_gemm(a, b, -75, -91, 74980, 123, 20)
    got = os_.reference_eight_bit_int_gemm(a, b, -75, -91, 74980, 123, 20, overflow="wrap")
    acc = scalar_accumulator(a.tolist(), b.tolist(), [-75] * 3, [-91] * 2)
    want = [[min(max(wrap(wrap((t + 74980) * 123) + 2 ** 19) >> 20, 0), 255) for t in row] for row in acc]
    assert got.tolist() == want
