"""lowp.conformance.contracts.fbgemm against exact rational readings (Fractions rounded to float32 by a neighbour
search, not by numpy arithmetic), the worked examples of docs/research/fbgemm-requantization.md and the seeds, and
properties."""
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from lowp.conformance.contracts import fbgemm as fq
from lowp.conformance.contracts.fixedpoint import ImplementationDefined, OutOfDomain
from lowp.isa_models import x86

F = np.float32


# ------------------------------------------------------------------ exact float32 rounding, independently

def rn32(q: Fraction) -> np.float32:
    """The float32 nearest to the rational q, ties to even: try the neighbours of a first guess."""
    guess = F(float(q)) if q else F(0)
    cands = {guess, np.nextafter(guess, F(np.inf)), np.nextafter(guess, F(-np.inf))}
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - q), int(np.array(c).view(np.int32)) & 1))
    return F(best)


def rne(q: Fraction) -> int:
    f = math.floor(q)
    r = q - f
    return f + (1 if r > Fraction(1, 2) or (r == Fraction(1, 2) and f % 2) else 0)


def fr(x) -> Fraction:
    return Fraction(float(x))


finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-2.0 ** 100, max_value=2.0 ** 100)


# ------------------------------------------------------------------ fused multiply-add

def test_fma_double_rounding_trap():
    # a*b = 3 * (2^23 + 1) = 25165827 is a float32 midpoint (25 significant bits); c = -2^-30 is below half an
    # ulp of float64 there, so float64(a*b + c) == a*b and a second rounding to float32 goes to the even 25165828,
    # while the true value lies below the midpoint: the correct FMA is 25165826
    a, b, c = F(2 ** 23 + 1), F(3), F(-(2.0 ** -30))
    naive = F(np.float64(a) * np.float64(b) + np.float64(c))
    assert naive == F(25165828)
    assert fq.fma_f32(a, b, c) == F(25165826) == rn32(fr(a) * fr(b) + fr(c))
    assert fq.fma_f32(a, b, -c) == F(25165828)


@settings(max_examples=500, deadline=None)
@given(finite32, finite32, finite32)
def test_fma_matches_exact_rounding(a, b, c):
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if abs(exact) > Fraction(float(np.finfo(F).max)):
        return
    assert fq.fma_f32(F(a), F(b), F(c)) == rn32(exact)


def test_fma_refuses_non_float32():
    with pytest.raises(ValueError):
        fq.fma_f32(np.float64(1), F(1), F(1))


# ------------------------------------------------------------------ offsets and requantize_u8acc32_ref

def test_offsets_match_loops():
    rng = np.random.default_rng(0)
    A = rng.integers(0, 256, (5, 9))
    B = rng.integers(-128, 128, (9, 6))
    assert fq.row_offsets_u8acc32_ref(A).tolist() == [sum(r) for r in A.tolist()]
    zp = [3, -7, 11]     # per group of 2 columns
    want = [sum(B[k][j] for k in range(9)) - zp[j // 2] * 9 for j in range(6)]
    assert fq.col_offsets_with_zero_pt_s8acc32_ref(B, zp, ncols_per_quant_group=2).tolist() == want
    assert fq.col_offsets_with_zero_pt_s8acc32_ref(B, 5).tolist() == [sum(B[:, j]) - 45 for j in range(6)]


def test_requantize_fixed_half_up_and_shift_zero_quirk():
    inp = np.array([[5, -5, 3, -3]])
    # multiplier 1, shift 1: (x + 1) >> 1 is floor(x/2 + 1/2): ties go up, not away from zero
    got = fq.requantize_u8acc32_ref_fixed(inp, C_multiplier=1, C_right_shift=1, C_zero_point=10, A_zero_point=0,
                                          B_zero_point=0)
    assert got.tolist() == [[10 + 3, 10 - 2, 10 + 2, 10 - 1]]
    # shift 0 still adds the nudge 1 << max(0, -1) = 1
    # (docs/research/fbgemm-requantization.md#the-reference-requantizations)
    got = fq.requantize_u8acc32_ref_fixed(inp, C_multiplier=1, C_right_shift=0, C_zero_point=10, A_zero_point=0,
                                          B_zero_point=0)
    assert got.tolist() == [[16, 6, 14, 8]]


def test_int32_corrections_overflow_is_flagged():
    # raw - A_zp * col_offsets is plain int32 arithmetic in the C++ (wraps in the AVX2 code, UB in the scalar)
    inp, col = np.array([[2 ** 31 - 10]]), np.array([-1])
    with pytest.raises(ImplementationDefined) as e:
        fq.requantize_u8acc32_ref_fixed(inp, C_multiplier=2 ** 30, C_right_shift=31, C_zero_point=0,
                                        A_zero_point=20, B_zero_point=0, col_offsets=col)
    assert e.value.corner == "int32_overflow"
    got = fq.requantize_u8acc32_ref_fixed(inp, C_multiplier=2 ** 30, C_right_shift=31, C_zero_point=0,
                                          A_zero_point=20, B_zero_point=0, col_offsets=col, overflow="wrap")
    assert got[0, 0] == 0          # 2^31 + 10 wraps to -2^31 + 10, which requantizes below 0


def test_requantize_fixed_reading_with_offsets_bias_relu():
    rng = np.random.default_rng(1)
    M, N = 4, 5
    inp = rng.integers(-50000, 50000, (M, N))
    row, col, bias = rng.integers(0, 3000, M), rng.integers(-3000, 3000, N), rng.integers(-500, 500, N)
    za, zb, zc, mult, sh = 43, -17, 100, 1356797312, 40
    for relu in (False, True):
        got = fq.requantize_u8acc32_ref_fixed(inp, C_multiplier=mult, C_right_shift=sh, C_zero_point=zc,
                                              A_zero_point=za, B_zero_point=zb, row_offsets=row, col_offsets=col,
                                              bias=bias, fuse_relu=relu)
        for i in range(M):
            for j in range(N):
                raw = int(inp[i, j]) - za * int(col[j]) - zb * int(row[i]) + int(bias[j])
                r = math.floor(Fraction(raw * mult, 2 ** sh) + Fraction(1, 2)) + zc
                assert got[i, j] == max(zc if relu else 0, min(255, r))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.floats(2.0 ** -17, 0.125, width=32))
def test_requantize_float_reading(seed, m):
    rng = np.random.default_rng(seed)
    M, N = 3, 4
    inp = rng.integers(-2 ** 28, 2 ** 28, (M, N))
    row, col = rng.integers(0, 3000, M), rng.integers(-3000, 3000, N)
    mult = np.array([m, m * 1.5], F)
    zb = np.array([-3, 4])
    got = fq.requantize_u8acc32_ref_float(inp, C_multiplier=mult, C_zero_point=7, A_zero_point=43, B_zero_point=zb,
                                          row_offsets=row, col_offsets=col, ncols_per_quant_group=2)
    for i in range(M):
        for j in range(N):
            raw = int(inp[i, j]) - 43 * int(col[j]) - int(zb[j // 2]) * int(row[i])
            res = rn32(fr(rn32(Fraction(raw))) * fr(mult[j // 2]))
            assert got[i, j] == max(0, min(255, rne(fr(res)) + 7))


# ------------------------------------------------------------------ ReQuantizeOutput

def reading_requantize_output(raw, mult, zc, bias_f, act_w, variant):
    """One element of the float-bias epilogue, exactly, for each variant
    (docs/research/fbgemm-requantization.md#requantizeoutput)."""
    x = rn32(Fraction(raw))
    if variant == "divide":
        xf = rn32(fr(x) + fr(rn32(fr(bias_f) / fr(act_w))))
    else:
        rcp = F(1.0 / float(act_w))                   # f32(1.0 / (double)act_w): a double division, then float
        if variant == "reciprocal":
            xf = rn32(fr(x) + fr(rn32(fr(bias_f) * fr(rcp))))
        else:
            xf = rn32(fr(x) + fr(bias_f) * fr(rcp))
    return rne(fr(rn32(fr(xf) * fr(mult)))) + zc


@settings(max_examples=150, deadline=None)
@given(st.integers(-2 ** 20, 2 ** 20), st.floats(-500, 500, width=32), st.floats(2.0 ** -13, 1.0, width=32),
       st.floats(2.0 ** -10, 2.0, width=32), st.sampled_from(sorted(fq.FLOAT_BIAS)))
def test_requantize_output_float_bias_variants(raw, bias, act_w, ratio, variant):
    mult = F(F(act_w) * F(ratio) * F(0.01))
    got = fq.requantize_output(np.array([[raw]]), C_multiplier=np.array([mult]), C_zero_point=5, Aq_zero_point=0,
                               Bq_zero_point=[0], bias=np.array([bias], F), act_times_w_scale=np.array([act_w], F),
                               float_bias=variant)
    assert int(got[0, 0]) == max(0, min(255, reading_requantize_output(raw, mult, 5, F(bias), F(act_w), variant)))


def test_float_bias_variants_are_distinguishable_and_required():
    # raw = 1 and bias / act_w just above 0.5: the sum lies in [1.5, 1.5 + 2^-16), where one float32 ulp is 2^-23;
    # a multiplier of 2^23 (exact) and zero point -3*2^22 + 50 turn each ulp of the sum into one output code, so
    # the last-bit differences of the three roundings become visible in uint8
    rng = np.random.default_rng(5)
    n = 2000
    act_w = rng.uniform(0.01, 0.1, n).astype(F)
    bias = ((0.5 + rng.uniform(0, 2 ** -16, n)) * act_w).astype(F)
    raw = np.ones((1, n), np.int64)
    outs = {v: fq.requantize_output(raw, C_multiplier=np.full(n, 2.0 ** 23, F), C_zero_point=-(3 << 22) + 50,
                                    Aq_zero_point=0, Bq_zero_point=np.zeros(n, int), bias=bias,
                                    act_times_w_scale=act_w, granularity="out_channel", float_bias=v)
            for v in fq.FLOAT_BIAS}
    assert (outs["divide"] != outs["reciprocal"]).sum() > 50
    assert (outs["reciprocal"] != outs["reciprocal_fma"]).sum() > 50
    for i in range(0, n, 97):                       # each against the exact reading
        for v in fq.FLOAT_BIAS:
            want = reading_requantize_output(1, F(2.0 ** 23), -(3 << 22) + 50, bias[i], act_w[i], v)
            assert outs[v][0, i] == max(0, min(255, want))
    raw = np.zeros((1, 3), np.int64)
    bias, act_w = bias[:3], act_w[:1]
    with pytest.raises(ValueError, match="float_bias"):
        fq.requantize_output(raw, C_multiplier=np.array([F(1)], F), C_zero_point=0, Aq_zero_point=0,
                             Bq_zero_point=[0], bias=bias, act_times_w_scale=act_w)
    assert fq.float_bias_variant("avx2", "tensor", fp_contract=True) == "reciprocal_fma"
    assert fq.float_bias_variant("avx2", "out_channel", fp_contract=True) == "divide"


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.integers(0, 255), st.booleans(),
       st.sampled_from(["tensor", "group", "out_channel"]))
def test_generic_and_avx2_paths_agree_in_range(seed, zc, relu, gran):
    rng = np.random.default_rng(seed)
    M, N = 3, 6
    inp = rng.integers(-2 ** 20, 2 ** 20, (M, N))
    n_q = {"tensor": 1, "group": 3, "out_channel": N}[gran]
    kw = dict(C_multiplier=rng.uniform(1e-5, 1e-3, n_q).astype(F), C_zero_point=zc, Aq_zero_point=12,
              Bq_zero_point=rng.integers(-20, 20, n_q), row_offsets=rng.integers(0, 5000, M),
              col_offsets=rng.integers(-5000, 5000, N), bias=rng.integers(-1000, 1000, N), granularity=gran,
              groups=3, fuse_relu=relu)
    g = fq.requantize_output(inp, path="generic", **kw)
    assert (g == fq.requantize_output(inp, path="avx2", **kw)).all()
    # and the generic path is the scalar formula, element by element
    idx = {"tensor": [0] * N, "group": [j // 2 for j in range(N)], "out_channel": list(range(N))}[gran]
    for i in range(M):
        for j in range(N):
            raw = int(inp[i, j]) - 12 * int(kw["col_offsets"][j]) - int(kw["row_offsets"][i]) * int(
                kw["Bq_zero_point"][idx[j]]) + int(kw["bias"][j])
            r = rne(fr(rn32(fr(rn32(Fraction(raw))) * fr(kw["C_multiplier"][idx[j]])))) + zc
            assert g[i, j] == max(zc if relu else 0, min(255, r))


def test_avx2_path_differs_out_of_int32_range():
    # cvtps2dq of a product beyond int32 gives INT32_MIN (the 'integer indefinite'), which saturates to 0, while
    # lrintf in the generic code gives a large value that clamps to 255
    kw = dict(C_multiplier=np.array([F(1e6)], F), C_zero_point=3, Aq_zero_point=0, Bq_zero_point=[0])
    x = np.array([[30000]])
    assert fq.requantize_output(x, path="generic", **kw)[0, 0] == 255
    assert fq.requantize_output(x, path="avx2", **kw)[0, 0] == 0


# ------------------------------------------------------------------ quantization parameters, quantizers

def test_quantize_tie_examples_from_notes():
    # FBGEMM QuantUtils.h comment: scale 0.00214854861, src 0.273939937: src * (1/scale) = 127.5 -> 128, but
    # src / scale = 127.499992 -> 127 (ONNX / MLAS divide)
    s, x = F(0.00214854861), F(0.273939937)
    assert F(x * F(F(1) / s)) == F(127.5) and F(x / s) < F(127.5)
    assert fq.quantize(x, s, 0, variant="fbgemm") == 128
    assert fq.quantize(x, s, 0, variant="divide") == 127
    # zero point after rounding (PyTorch, FBGEMM since #362) vs before (LEGACY): quantize_per_tensor(0.5, 1, 1) = 1
    assert fq.quantize(F(0.5), F(1), 1, variant="fbgemm") == 1
    assert fq.quantize(F(0.5), F(1), 1, variant="fbgemm_legacy") == 2
    assert fq.quantize(np.array([1.5, 2.5, -0.5, -1.5], F), F(1), 10, variant="fbgemm").tolist() == [12, 12, 10, 8]
    assert fq.quantize(np.array([-1e9, 1e9], F), F(1), 0, variant="fbgemm", signed=True).tolist() == [-128, 127]
    with pytest.raises(OutOfDomain):
        fq.quantize(np.array([np.nan], F), F(1), 0, variant="fbgemm")


def test_dequantize_and_requantize_helpers():
    assert fq.dequantize([10, 12, 0], 0.5, 10).tolist() == [0.0, 1.0, -5.0]
    assert fq.requantize_fixed_point([100, -100, 3], 10, 2 ** 30, 31).tolist() == [60, 0, 12]   # x/2 half-up + 10
    assert fq.requantize_float([100, -100, 5], 10, F(0.5)).tolist() == [60, 0, 12]            # 2.5 -> 2 (even)


@settings(max_examples=300, deadline=None)
@given(st.floats(2.0 ** -32, 2.0 ** 20, width=32))
def test_choose_requantization_multiplier_is_exact(real):
    m, s = fq.choose_requantization_multiplier(real)
    assert Fraction(m, 2 ** s) == Fraction(float(F(real)))      # a float32 has 24 bits: the Q31 form is exact
    assert 2 ** 30 <= m < 2 ** 31


def test_choose_requantization_multiplier_examples():
    with pytest.raises(ValueError):
        fq.choose_requantization_multiplier(2.0 ** -40)          # right shift 71: FBGEMM asserts s < 64
    assert fq.choose_requantization_multiplier(1.0) == (2 ** 30, 30)
    assert fq.choose_requantization_multiplier(0.5) == (2 ** 30, 31)
    assert fq.choose_requantization_multiplier(0.75) == (3 * 2 ** 29, 31)


def test_choose_quantization_params_examples():
    p = fq.choose_quantization_params(-1.0, 3.0, 0, 255, variant="fbgemm")
    assert p.scale == F(4 / 255) and isinstance(p.scale, np.float32)
    assert p.zero_point == 64                                     # 1/scale = 63.75 -> 64
    p = fq.choose_quantization_params(-1.0, 3.0, 0, 255, variant="pytorch", reduce_range=True)
    assert p.scale == 4 / 127 and p.zero_point == 32              # 0..127: 31.75 -> 32, scale stays a double
    with pytest.raises(ValueError):
        fq.choose_quantization_params(-1.0, 3.0, 0, 255, variant="fbgemm", reduce_range=True)
    # symmetric: scale from float divisions, zero point (qmin + qmax) / 2 = -0.5 -> nearbyint -> 0 (ties to even)
    p = fq.choose_quantization_params(-1.0, 3.0, -128, 127, preserve_sparsity=True, variant="fbgemm")
    mx = F(float(F(F(3) / F(127))) * 127)
    mn = F(float(F(F(3) / F(127))) * -128)
    assert p.scale == F((float(mx) - float(mn)) / 255) and p.zero_point == 0
    assert fq.choose_quantization_params(0.0, 0.0, 0, 255, variant="fbgemm").scale == F(0.1)
    p = fq.choose_quantization_params(0.0, 1.0, 0, 255, force_scale_power_of_two=True, variant="fbgemm")
    assert p.scale == F(1 / 128) and p.zero_point == 0            # 1/255 -> 2^-floor(log2 255) = 2^-7
    assert fq.choose_quantization_params(0.0, 1000.0, 0, 255, force_scale_power_of_two=True,
                                         variant="fbgemm").scale == F(4)
    p = fq.choose_quantization_params(0.0, 1e-3, 0, 255, variant="fbgemm")
    assert p.scale == F(6.1e-5) and p.zero_point == 0             # SMALL_SCALE_THRESHOLD cut-off


@settings(max_examples=200, deadline=None)
@given(st.floats(-1e4, 0, width=32), st.floats(0, 1e4, width=32), st.sampled_from(["fbgemm", "pytorch"]))
def test_choose_quantization_params_represents_zero(lo, hi, variant):
    p = fq.choose_quantization_params(lo, hi, 0, 255, variant=variant)
    assert 0 <= p.zero_point <= 255 and p.scale > 0
    assert fq.quantize(F(0), F(p.scale), p.zero_point, variant="fbgemm") == p.zero_point


# ------------------------------------------------------------------ oneDNN

def test_onednn_weight_halving():
    w = np.array([1, 3, -1, -3, 127, -128, 2, 5, 0])
    assert fq.onednn_reorder_weights_s8(w, has_vnni=False).tolist() == [0, 2, 0, -2, 64, -64, 1, 2, 0]
    assert fq.onednn_reorder_weights_s8(w, has_vnni=True).tolist() == w.tolist()
    assert fq.onednn_scale_adjust(has_vnni=False) == 0.5
    # oneDNN#375: weights all 1 -> 0 after the reorder, so the convolution outputs 0
    assert not fq.onednn_reorder_weights_s8(np.ones(9, int), has_vnni=False).any()


def test_onednn_s8s8_compensation_identity():
    rng = np.random.default_rng(2)
    a, b = rng.integers(-128, 128, (4, 12)), rng.integers(-128, 128, (12, 3))
    assert (fq.onednn_s8s8_via_u8s8(a, b) == a @ b).all()
    assert fq.onednn_s8s8_compensation(b).tolist() == (-128 * b.sum(axis=0)).tolist()


def test_onednn_seed_example_with_pair_saturation():
    # seed 002: {127,127,0,0} . {127,127,0,0} through u8s8 on AVX2 gives 255 = 32767 - 128 * 254, not 32258
    def maddubs_u8s8(a_u8, b_s8):
        pairs = x86.vpmaddubsw(a_u8.reshape(-1).astype(np.uint8), b_s8.reshape(-1).astype(np.int8))
        return np.array([[int(pairs.astype(np.int64).sum())]])
    a = np.array([[127, 127, 0, 0, 0, 0, 0, 0]])
    b = np.array([[127], [127], [0], [0], [0], [0], [0], [0]])
    assert fq.onednn_s8s8_via_u8s8(a, b)[0, 0] == 32258
    assert fq.onednn_s8s8_via_u8s8(a, b, u8s8=maddubs_u8s8)[0, 0] == 255
