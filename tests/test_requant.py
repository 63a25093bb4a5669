"""lowp.isa_models.requant: every output stage against an independent reading (exact rationals, integer
re-derivations, the existing conformance models), the conversion primitives against the host CPU (cffi) and
the AArch64 narrows under Unicorn; the S_neon left-shift flag."""
from __future__ import annotations

import math
import platform
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from lowp.conformance.contracts import fbgemm as fq
from lowp.conformance.contracts import gemmlowp as gl
from lowp.isa_models import fixedpoint as fp
from lowp.isa_models import float32 as fl
from lowp.isa_models import requant as rq
from lowp.isa_models.requant import OUTPUT_STAGES

F32 = np.float32
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1


def round_f32(v: Fraction) -> Fraction:
    """The exact rational v rounded to the nearest float32, ties to even (normal range), by integer arithmetic."""
    if v == 0:
        return Fraction(0)
    sign = -1 if v < 0 else 1
    a = abs(v)
    e = math.floor(math.log2(a.numerator) - math.log2(a.denominator))
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    ulp = Fraction(2) ** (max(e, -126) - 23)
    return sign * round_half_even(a / ulp) * ulp


def round_half_even(v: Fraction) -> int:
    f = math.floor(v)
    d = v - f
    return f + 1 if d > Fraction(1, 2) or (d == Fraction(1, 2) and f % 2) else f


def floor_half_up(v: Fraction) -> int:
    return math.floor(v + Fraction(1, 2))


def wrap(v: int) -> int:
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


def q_of(bias, scale, zp, mn, mx, **extra):
    return {"bias": np.array([bias], np.int32), "scale": np.array([scale], F32), "output_zero_point": zp,
            "output_min": mn, "output_max": mx, **extra}


def fp32_reading(acc, bias, scale, zp, mn, mx) -> int:
    """XNNPACK fp32 read independently: x = float32(acc + bias), v = float32(x * scale), clamp to [min-zp, max-zp],
    round half to even, + zp."""
    x = round_f32(Fraction(wrap(acc + bias)))
    v = round_f32(x * Fraction(float(scale)))
    v = min(max(v, Fraction(mn - zp)), Fraction(mx - zp))
    return round_half_even(v) + zp


OUT = {"s8": (-128, 127), "u8": (0, 255)}
SCALES = st.one_of(st.sampled_from([2.0 ** -32, 0.5, 1.0, float(np.nextafter(F32(256), F32(0))), 1 / 3]),
                   st.floats(2.0 ** -32, 255.9, allow_nan=False)).map(lambda s: F32(s))
ACC = st.one_of(st.integers(I32_MIN, I32_MAX), st.integers(-5000, 5000),
                st.sampled_from([I32_MIN, I32_MAX, 0, -1, 1, 2 ** 24 + 1]))


@st.composite
def fp32_case(draw):
    t = draw(st.sampled_from(["s8", "u8"]))
    lo, hi = OUT[t]
    mn, mx = sorted(draw(st.integers(lo, hi)) for _ in range(2))
    return (t, draw(ACC), draw(st.one_of(st.integers(-10000, 10000), st.integers(I32_MIN, I32_MAX))), draw(SCALES),
            draw(st.integers(lo, hi)), mn, mx)


@settings(max_examples=400, deadline=None)
@given(fp32_case())
def test_xnnpack_fp32_paths_equal_the_rational_reading(case):
    t, acc, bias, scale, zp, mn, mx = case
    want = fp32_reading(acc, bias, scale, zp, mn, mx)
    q = q_of(bias, scale, zp, mn, mx)
    a = np.array([[acc]], np.int32)
    for name in ("xnnpack-fp32-lrintf", "xnnpack-fp32-fmagic", "xnnpack-fp32-imagic", "xnnpack-fp32-x86",
                 "xnnpack-fp32-neonv8"):
        assert int(OUTPUT_STAGES[name](a, q, t)[0, 0]) == want, name
    vnni = int(OUTPUT_STAGES["xnnpack-fp32-avxvnni-wrap"](a, q, t)[0, 0])
    x = round_f32(round_f32(Fraction(wrap(acc + bias))) * Fraction(float(scale)))
    if vnni != want:   # the wrap: CVTPS2DQ's INT32_MIN plus a negative zero point (s8 only)
        assert t == "s8" and zp < 0 and x <= I32_MIN and vnni == max(127, mn)


def test_fp32_ties_round_to_even():
    # scale 0.5: odd accumulators are exact .5 ties; lrintf rounds them to even, on every accepted path
    acc = np.arange(-9, 10, dtype=np.int32).reshape(1, -1)
    q = {"bias": np.zeros(acc.shape[1], np.int32), "scale": np.full(acc.shape[1], 0.5, F32),
         "output_zero_point": 0, "output_min": -128, "output_max": 127}
    want = [round_half_even(Fraction(int(v), 2)) for v in acc[0]]
    for name in ("xnnpack-fp32-lrintf", "xnnpack-fp32-fmagic", "xnnpack-fp32-imagic", "xnnpack-fp32-x86",
                 "xnnpack-fp32-neonv8"):
        assert OUTPUT_STAGES[name](acc, q, "s8")[0].tolist() == want, name


def test_avxvnni_wrap_corner_1x1():
    # scale just below 256, a large negative bias, a negative zero point: CVTPS2DQ gives INT32_MIN, + zp wraps
    q = q_of(-(1 << 30), np.nextafter(F32(256), F32(0)), -1, -128, 127)
    acc = np.zeros((1, 1), np.int32)
    assert int(OUTPUT_STAGES["xnnpack-fp32-lrintf"](acc, q, "s8")[0, 0]) == -128
    assert int(OUTPUT_STAGES["xnnpack-fp32-x86"](acc, q, "s8")[0, 0]) == -128
    assert int(OUTPUT_STAGES["xnnpack-fp32-neonv8"](acc, q, "s8")[0, 0]) == -128
    assert int(OUTPUT_STAGES["xnnpack-fp32-avxvnni-wrap"](acc, q, "s8")[0, 0]) == 127
    # with zero point 0 there is nothing to wrap
    assert int(OUTPUT_STAGES["xnnpack-fp32-avxvnni-wrap"](acc, {**q, "output_zero_point": 0}, "s8")[0, 0]) == -128


# ---------------------------------------------------------------------------------------------------------------
# rndnu

@settings(max_examples=300, deadline=None)
@given(SCALES)
def test_rndnu_params_reconstruct_the_scale(scale):
    s = xs = np.array([scale], F32)
    p = rq.xnnpack_rndnu_scalar_params(s)
    assert Fraction(int(p["multiplier"][0]), 2 ** int(p["shift"][0])) == Fraction(float(xs[0]))
    assert 16 <= p["shift"][0] < 56 and 2 ** 23 <= p["multiplier"][0] < 2 ** 24
    n = rq.xnnpack_rndnu_neon_params(s)
    total = int(n["right_pre_shift"][0] + n["right_post_shift"][0])
    assert Fraction(int(n["multiplier"][0])) * Fraction(2) ** (total - 31) == Fraction(float(xs[0]))
    assert n["right_pre_shift"][0] >= 0 and n["right_post_shift"][0] <= -1


def test_rndnu_params_refuse_the_documented_outside():
    for bad in (256.0, 2.0 ** -33, 0.0, float("nan")):
        with pytest.raises(ValueError, match="2\\^-32 <= scale < 256"):
            rq.xnnpack_rndnu_neon_params(np.array([bad], F32))


@settings(max_examples=400, deadline=None)
@given(fp32_case())
def test_rndnu_stages_against_exact_integers(case):
    t, acc, bias, scale, zp, mn, mx = case
    x = wrap(acc + bias)
    y = floor_half_up(Fraction(x) * Fraction(float(scale)))          # rndnu: one rounding, ties up
    want = min(max(y, mn - zp), mx - zp) + zp
    q, a = q_of(bias, scale, zp, mn, mx), np.array([[acc]], np.int32)
    assert int(OUTPUT_STAGES["xnnpack-rndnu"](a, q, t)[0, 0]) == want
    assert int(OUTPUT_STAGES["xnnpack-rndnu-neon"](a, q, t)[0, 0]) == want        # saturating: equal everywhere
    scalar = int(OUTPUT_STAGES["xnnpack-rndnu-scalar"](a, q, t)[0, 0])
    if I32_MIN <= y <= I32_MAX:
        assert scalar == want
    else:                                                                          # (int32_t) narrowing wraps
        assert scalar == min(max(wrap(y), mn - zp), mx - zp) + zp


def test_rndnu_wrapping_preshift_is_a_different_result():
    # scale 255.99: pre-shift left by 9; acc + bias = 2^24 overflows int32 when shifted: SSHL wraps to 0 ... 
    q = q_of(0, np.nextafter(F32(256), F32(0)), 0, -128, 127)
    acc = np.array([[1 << 23]], np.int32)
    assert int(OUTPUT_STAGES["xnnpack-rndnu-neon"](acc, q, "s8")[0, 0]) == 127
    assert int(OUTPUT_STAGES["xnnpack-rndnu-neon-wrap"](acc, q, "s8")[0, 0]) != 127


# ---------------------------------------------------------------------------------------------------------------
# MultiplyByQuantizedMultiplier: S_neon's left shift flag (the bug: 'saturate' was silently ignored)

def test_s_neon_honours_left_shift():
    x, m, s = 2 ** 30 + 5, 2 ** 30, 0                     # x << 1 overflows int32
    wrapped = fp.multiply_by_quantized_multiplier(x, m, s, flavour="S_neon", left_shift="wrap")
    saturated = fp.multiply_by_quantized_multiplier(x, m, s, flavour="S_neon", left_shift="saturate")
    assert int(wrapped) == int(fp.multiply_by_quantized_multiplier(x, m, s, flavour="S_neon"))   # default: SSHL
    # SQSHL: t = INT32_MAX; SQDMULH floor(t * m / 2^31); SRSHL by 1 rounds half up
    assert int(saturated) == floor_half_up(Fraction(math.floor(Fraction(I32_MAX * m, 2 ** 31)), 2))
    assert int(wrapped) == floor_half_up(Fraction(math.floor(Fraction(wrap(2 * x) * m, 2 ** 31)), 2))
    assert int(saturated) != int(wrapped)
    with pytest.raises(ValueError, match="left_shift='clamp'"):
        fp.multiply_by_quantized_multiplier(x, m, s, flavour="S_neon", left_shift="clamp")
    for flavour, flag in (("S", {"left_shift": "wrap"}), ("S_neon", {"overflow": "wrap"}),
                          ("legacy", {"min_min": "saturate"}), ("G", {"overflow": "wrap"})):
        with pytest.raises(ValueError, match="has no corner"):
            fp.multiply_by_quantized_multiplier(x, m, -3, flavour=flavour, **flag)


@settings(max_examples=300, deadline=None)
@given(st.integers(I32_MIN, I32_MAX), st.integers(1 << 30, I32_MAX), st.integers(-31, 8))
def test_s_neon_saturate_is_single_rounding_of_the_saturated_shift(x, m, s):
    L = max(s + 1, 0)
    t = min(max(x * 2 ** L, I32_MIN), I32_MAX)
    post = max(-s, 1)
    want = floor_half_up(Fraction(math.floor(Fraction(t * m, 2 ** 31)), 2 ** post))
    assert int(fp.multiply_by_quantized_multiplier(x, m, s, flavour="S_neon", left_shift="saturate")) == want


@settings(max_examples=300, deadline=None)
@given(st.integers(-(1 << 24), 1 << 24), st.integers(-10000, 10000), st.integers(1 << 30, I32_MAX),
       st.integers(-31, 0), st.integers(-128, 127))
def test_tflite_single_rounding_stage(acc, bias, m, s, zp):
    q = {"bias": np.array([bias], np.int32), "multiplier": np.array([m], np.int32), "shift": np.array([s], np.int32),
         "output_zero_point": zp, "output_min": -128, "output_max": 127}
    y = floor_half_up(Fraction((acc + bias) * m) * Fraction(2) ** (s - 31))
    want = min(max(y + zp, -128), 127)
    assert int(OUTPUT_STAGES["tflite-S"](np.array([[acc]], np.int32), q, "s8")[0, 0]) == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(1 << 26), 1 << 26), min_size=6, max_size=6), st.integers(1 << 30, I32_MAX),
       st.integers(-31, 0), st.integers(0, 255), st.sampled_from(["s8", "u8"]))
def test_gemmlowp_stage_equals_the_pipeline_model(vals, m, s, zp, t):
    acc = np.array(vals, np.int32).reshape(2, 3)
    bias = np.array([5, -7, 100000], np.int32)
    lo, hi = OUT[t]
    zp = zp + lo
    q = {"bias": bias, "multiplier": np.full(3, m, np.int32), "shift": np.full(3, s, np.int32),
         "output_zero_point": zp, "output_min": lo, "output_max": hi}
    cast = gl.SaturatingCastToInt8() if t == "s8" else gl.SaturatingCastToUint8()
    pipe = (gl.BiasAddition(bias, "Row"), gl.QuantizeDownInt32ByFixedPoint(m, -s, zp), gl.Clamp(lo, hi), cast)
    assert np.array_equal(OUTPUT_STAGES["gemmlowp-fixedpoint"](acc, q, t), gl.evaluate_pipeline(acc, pipe))


# ---------------------------------------------------------------------------------------------------------------
# FBGEMM, qd8, oneDNN

@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2 ** 32 - 1))
def test_fbgemm_stages_equal_fbgemm_quant(seed):
    rng = np.random.default_rng(seed)
    acc = rng.integers(-(1 << 24), 1 << 24, (3, 4)).astype(np.int32)
    bias = rng.integers(-10000, 10000, 4).astype(np.int32)
    scale = rng.uniform(1e-5, 0.1, 4).astype(F32)
    zp = int(rng.integers(0, 256))
    relu = bool(rng.random() < 0.5)
    q = {"bias": bias, "scale": scale, "output_zero_point": zp, "output_min": zp if relu else 0, "output_max": 255}
    for path in ("generic", "avx2"):
        want = fq.requantize_output(acc, C_multiplier=scale, C_zero_point=zp, Aq_zero_point=0, Bq_zero_point=0,
                                    bias=bias, granularity="out_channel", fuse_relu=relu, path=path)
        assert np.array_equal(OUTPUT_STAGES[f"fbgemm-float-{path}"](acc, q, "u8"), want)
    m, s = int(rng.integers(1 << 30, I32_MAX)), int(rng.integers(-31, 0))
    qf = {**q, "multiplier": np.full(4, m, np.int32), "shift": np.full(4, s, np.int32)}
    want = fq.requantize_u8acc32_ref_fixed(acc, C_multiplier=m, C_right_shift=31 - s, C_zero_point=zp, A_zero_point=0,
                                           B_zero_point=0, bias=bias, fuse_relu=relu)
    assert np.array_equal(OUTPUT_STAGES["fbgemm-fixed"](acc, qf, "u8"), want)


def qd8_q(rng, M, N):
    return {"bias": rng.uniform(-10, 10, N).astype(F32), "a_zero_point": rng.integers(-128, 128, M).astype(np.int32),
            "a_inv_scale": rng.uniform(1e-3, 1, M).astype(F32), "b_scale": rng.uniform(1e-3, 1, N).astype(F32),
            "output_min": -50.0, "output_max": 50.0}


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2 ** 32 - 1))
def test_qd8_fused_and_unfused_against_rationals(seed):
    rng = np.random.default_rng(seed)
    acc = rng.integers(-(1 << 20), 1 << 20, (2, 3)).astype(np.int32)
    q = qd8_q(rng, 2, 3)
    fused, unfused = OUTPUT_STAGES["qd8-f32-fma"](acc, q, "f32"), OUTPUT_STAGES["qd8-f32-unfused"](acc, q, "f32")
    for i in range(2):
        for j in range(3):
            v = round_f32(round_f32(Fraction(int(acc[i, j]))) * Fraction(float(q["a_inv_scale"][i])))
            b, c = Fraction(float(q["b_scale"][j])), Fraction(float(q["bias"][j]))
            clamp = lambda r: min(max(float(r), -50.0), 50.0)          # noqa: E731
            assert float(fused[i, j]) == clamp(round_f32(v * b + c))
            assert float(unfused[i, j]) == clamp(round_f32(round_f32(v * b) + c))


def test_onednn_orders_agree_on_powers_of_two():
    # with power-of-two scales every product is exact, so all three accepted orders give rne(acc * s + bias + zp)
    acc = np.array([[-300, -2, 5, 1000, 7]], np.int32)
    q = {"bias": np.array([0.5, 0.0, 2.5, 0.0, 0.25], F32), "scale": np.full(5, 0.25, F32),
         "src_scale": F32(0.5), "dst_scale": F32(0.5), "output_zero_point": 3}
    want = [min(max(round_half_even((Fraction(int(a)) / 8 + Fraction(float(b))) * 2 + 3), -128), 127)
            for a, b in zip(acc[0], q["bias"])]
    for name in ("onednn-ref", "onednn-ref-reciprocal", "onednn-jit"):
        assert OUTPUT_STAGES[name](acc, q, "s8")[0].tolist() == want, name
    assert OUTPUT_STAGES["onednn-ties-away"](acc, q, "s8")[0].tolist() != want      # -2/8*2 + 3 = 2.5: a tie


def test_stage_errors_name_the_problem():
    with pytest.raises(KeyError, match="'scale' is missing"):
        OUTPUT_STAGES["xnnpack-fp32-lrintf"](np.zeros((1, 1), np.int32), {"bias": np.zeros(1, np.int32)}, "s8")
    with pytest.raises(ValueError, match="scale: expected float32"):
        OUTPUT_STAGES["xnnpack-fp32-lrintf"](np.zeros((1, 1), np.int32), q_of(0, 1.0, 0, -128, 127) |
                                             {"scale": np.ones(1)}, "s8")
    with pytest.raises(ValueError, match="out_type 'f32'"):
        OUTPUT_STAGES["xnnpack-fp32-lrintf"](np.zeros((1, 1), np.int32), q_of(0, 1.0, 0, -128, 127), "f32")
    with pytest.raises(KeyError, match="known: xnnpack-fp32-lrintf"):
        rq.output_stage("nope")


# ---------------------------------------------------------------------------------------------------------------
# The primitives against the host CPU (x86, cffi) and Unicorn (AArch64)

NATIVE_C = """
#include <immintrin.h>
#include <stdint.h>
#include <stddef.h>
__attribute__((target("sse4.1"))) void lowp_rq_cvtps2dq(size_t n, const float *x, int32_t *out) {
    for (size_t i = 0; i < n; i += 4) _mm_storeu_si128((__m128i *)(out + i), _mm_cvtps_epi32(_mm_loadu_ps(x + i)));
}
__attribute__((target("sse4.1"))) void lowp_rq_packs(size_t n, const int32_t *x, const int16_t *zp, int16_t *s16,
                                                     int16_t *s16zp, int8_t *s8, uint8_t *u8) {
    for (size_t i = 0; i < n; i += 8) {
        __m128i a = _mm_loadu_si128((const __m128i *)(x + i)), b = _mm_loadu_si128((const __m128i *)(x + i + 4));
        __m128i w = _mm_packs_epi32(a, b);
        __m128i wz = _mm_adds_epi16(w, _mm_loadu_si128((const __m128i *)(zp + i)));
        _mm_storeu_si128((__m128i *)(s16 + i), w);
        _mm_storeu_si128((__m128i *)(s16zp + i), wz);
        _mm_storel_epi64((__m128i *)(s8 + i), _mm_packs_epi16(w, w));
        _mm_storel_epi64((__m128i *)(u8 + i), _mm_packus_epi16(w, w));
    }
}
"""


@pytest.fixture(scope="module")
def host():
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the x86 primitives need an x86-64 host")
    import cffi
    from lowp.emulator.x86 import native
    try:
        path = native.build_shared_object(NATIVE_C, stem="requant-primitives")
    except native.NativeUnavailable as e:
        pytest.skip(str(e))
    ffi = cffi.FFI()
    ffi.cdef("void lowp_rq_cvtps2dq(size_t, const float *, int32_t *);"
             "void lowp_rq_packs(size_t, const int32_t *, const int16_t *, int16_t *, int16_t *, int8_t *, uint8_t *);")
    return ffi, ffi.dlopen(str(path))


def _ptr(ffi, a):
    return ffi.cast(f"{ {np.float32: 'float', np.int32: 'int32_t', np.int16: 'int16_t', np.int8: 'int8_t', np.uint8: 'uint8_t'}[a.dtype.type]} *",
                    a.ctypes.data)


@pytest.mark.native
def test_cvtps2dq_matches_the_host(host):
    ffi, lib = host
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.standard_normal(4000) * 10.0 ** rng.integers(0, 11, 4000),
                        np.arange(-8, 8) + 0.5, [2.0 ** 31, -2.0 ** 31, np.nextafter(-2.0 ** 31, 0), 2.0 ** 31 - 128,
                                                -2.0 ** 32, np.inf, -np.inf, np.nan, -0.0, 2.0 ** 40]]).astype(F32)
    x = np.concatenate([x, np.zeros(-len(x) % 4, F32)])
    out = np.zeros(len(x), np.int32)
    lib.lowp_rq_cvtps2dq(len(x), _ptr(ffi, x), _ptr(ffi, out))
    assert np.array_equal(fl.cvtps2dq(x), out)


@pytest.mark.native
def test_packs_and_paddsw_match_the_host(host):
    ffi, lib = host
    rng = np.random.default_rng(8)
    n = 8000
    x = np.where(rng.random(n) < 0.5, rng.integers(I32_MIN, I32_MAX, n), rng.integers(-40000, 40000, n)).astype(np.int32)
    x[:8] = [I32_MIN, I32_MAX, -32769, -32768, 32767, 32768, -129, 256]
    zp = rng.integers(-32768, 32768, n).astype(np.int16)
    s16, s16zp = np.zeros(n, np.int16), np.zeros(n, np.int16)
    s8, u8 = np.zeros(n, np.int8), np.zeros(n, np.uint8)
    lib.lowp_rq_packs(n, _ptr(ffi, x), _ptr(ffi, zp), _ptr(ffi, s16), _ptr(ffi, s16zp), _ptr(ffi, s8), _ptr(ffi, u8))
    w = rq.packssdw(x)
    assert np.array_equal(w, s16)
    assert np.array_equal(rq.paddsw(w, zp), s16zp)
    assert np.array_equal(rq.packsswb(w), s8)
    assert np.array_equal(rq.packuswb(w), u8)


@pytest.mark.emulated
def test_neon_narrows_match_unicorn():
    from lowp.emulator.aarch64.intrinsics import UnicornBackend
    from lowp.isa_models import intrinsics
    arm = {i.name: i for i in intrinsics("aarch64")}
    backend = UnicornBackend()
    rng = np.random.default_rng(9)
    x32 = rng.integers(I32_MIN, I32_MAX, (64, 4), endpoint=True).astype(np.int32)
    x32[0] = [I32_MIN, I32_MAX, -32769, 32768]
    assert np.array_equal(backend.run(arm["vqmovn_s32"], [x32]), rq.sqxtn_s32(x32))
    x16 = rng.integers(-32768, 32768, (64, 8)).astype(np.int16)
    assert np.array_equal(backend.run(arm["vqmovn_s16"], [x16]), rq.sqxtn_s16(x16))
    assert np.array_equal(backend.run(arm["vqmovun_s16"], [x16]), rq.sqxtun_s16(x16))
    y16 = rng.integers(-32768, 32768, (64, 8)).astype(np.int16)
    assert np.array_equal(backend.run(arm["vqaddq_s16"], [x16, y16]), rq.sqadd_s16(x16, y16))


def test_fcvtns_and_lrintf_definitions():
    x = np.array([2.5, -2.5, 3.5, -0.5, 2.0 ** 31, -2.0 ** 32, np.nan, np.inf, -np.inf], F32)
    assert fl.fcvtns(x).tolist() == [2, -2, 4, 0, I32_MAX, I32_MIN, 0, I32_MAX, I32_MIN]
    assert fl.cvtps2dq(x).tolist() == [2, -2, 4, 0, I32_MIN, I32_MIN, I32_MIN, I32_MIN, I32_MIN]
    assert fl.lrintf(x[:4]).tolist() == [2, -2, 4, 0]
    with pytest.raises(ArithmeticError):
        fl.lrintf(x[4:5])
    v = np.array([-3.5, -2.5, 0.5, 1.5, 4194303.0], F32)                 # |x| <= 2^22: bits are 0x4B400000 + rint(x)
    assert (fl.magic_bias_bits(v) - fl.MAGIC_BIAS_BITS).tolist() == [-4, -2, 0, 2, 4194303]


@pytest.mark.emulated
def test_sqsub_matches_unicorn():
    from pathlib import Path
    from lowp.emulator import Machine, build
    rng = np.random.default_rng(12)
    a = rng.integers(I32_MIN, I32_MAX, 4096, endpoint=True).astype(np.int32)
    b = rng.integers(I32_MIN, I32_MAX, 4096, endpoint=True).astype(np.int32)
    a[:8], b[:8] = [I32_MIN, I32_MAX, 0, -1, I32_MIN, I32_MAX, 5, -5], [1, -1, I32_MIN, I32_MAX, I32_MIN, I32_MAX,
                                                                         I32_MIN, I32_MAX]
    machine = Machine(build(Path(__file__).resolve().parent / "aarch64" / "sqsub.c"))
    out = machine.call("lowp_sqsub_s32", a, b, np.zeros_like(a), a.size).arrays[2]
    assert np.array_equal(out, rq.sqsub_s32(a, b))


def _fp32_neon_by_hand(acc, bias, scale, zp, lo, hi, out_type):
    """XNNPACK's fp32_neon sequence read element by element: the float32 product and magic sum (numpy float32
    scalars are IEEE), the sum's bits as int32, saturating int32 and int16 steps in Python integers."""
    total = (int(acc) + bias + (1 << 31)) % (1 << 32) - (1 << 31)          # the int32 accumulator wraps
    v = np.float32(float(total)) * np.float32(scale)
    bits = int(np.array([v + np.float32(12582912.0)], np.float32).view(np.int32)[0])
    x = max(I32_MIN, min(I32_MAX, bits - (0x4B400000 - zp)))
    x = max(-32768, min(32767, x))
    x = max(-128, min(127, x)) if out_type == "s8" else max(0, min(255, x))
    return max(lo, min(hi, x))


@pytest.mark.parametrize("out_type", ["s8", "u8"])
def test_fp32_neon_stage_is_its_sequence_and_the_reference_on_the_domain(out_type):
    from lowp.conformance.contracts.output import OUTPUT_CONTRACTS
    contract = OUTPUT_CONTRACTS["xnnpack-fp32"]
    assert "xnnpack-fp32-neon" in contract.accepted
    rng = np.random.default_rng(21)
    for i in range(60):
        q = contract.draw(rng, 3, 4, out_type, ("typical", "ends", "limits")[i % 3], I32_MIN, I32_MAX)
        acc = rng.integers(I32_MIN, I32_MAX, (3, 4), endpoint=True)
        acc[0, :2] = [I32_MIN, I32_MAX]
        got = rq.OUTPUT_STAGES["xnnpack-fp32-neon"].compute(acc, q, out_type)
        assert np.array_equal(got, rq.OUTPUT_STAGES["xnnpack-fp32-lrintf"].compute(acc, q, out_type))
        want = [[_fp32_neon_by_hand(acc[m, n], int(q["bias"][n]), q["scale"][n], int(q["output_zero_point"]),
                                    int(q["output_min"]), int(q["output_max"]), out_type) for n in range(4)]
                for m in range(3)]
        assert got.tolist() == want


def test_xngen_scale_product_order_is_named_and_accepted():
    """XNNPACK's xngen qd8 AArch64 assembly multiplies the scales first: FMUL(b_scale, inv_scale), FMUL by
    f32(acc), FADD the bias. The stage is that sequence in float32 scalars; the campaign's counterexample of it
    (1x1x1, A = -33, B = 5, a_zero_point -75: acc 210) is 29.3654003 there, 29.3654022 in the other qd8 orders; the
    qd8 contracts accept it as XNNPACK's own order (docs/output-stages.md)."""
    from lowp.conformance.contracts.output import OUTPUT_CONTRACTS
    q = {"a_zero_point": np.array([-75], np.int32), "a_inv_scale": np.array([0.35022738], F32),
         "b_scale": np.array([0.39926988], F32), "bias": np.array([0.0], F32),
         "output_min": F32(-np.inf), "output_max": F32(np.inf)}
    acc = np.array([[210]])
    got = rq.OUTPUT_STAGES["qd8-f32-scale-product-unfused"].compute(acc, q, "f32")
    by_hand = F32(F32(210) * F32(F32(0.39926988) * F32(0.35022738))) + F32(0)
    assert got[0, 0] == by_hand == F32(29.3654003)
    assert rq.OUTPUT_STAGES["qd8-f32-unfused"].compute(acc, q, "f32")[0, 0] == F32(29.3654022)
    for name in ("qd8-f32", "qdu8-f32"):
        assert "qd8-f32-scale-product-unfused" in OUTPUT_CONTRACTS[name].accepted
    assert OUTPUT_CONTRACTS["qd8-f32"].judge(got, acc, q, "f32")[:2] == (True, "qd8-f32-scale-product-unfused")
    half = rq.OUTPUT_STAGES["qd8-f16-scale-product-unfused"].compute(acc, q, "f16")
    assert half.dtype == np.float16 and half[0, 0] == np.float16(got[0, 0])


def _case_params(rng, M, N, out_type, qd8: bool) -> dict:
    """One case's parameters for a stage, spread wide enough to reach the clamps, the saturations and the int32
    ends (the scales from 2^-30 to 2^4, zero points over the output type, biases over int32 or large floats)."""
    scale = (2.0 ** rng.uniform(-30, 4, N)).astype(np.float32)
    if qd8:
        lo, hi = sorted(rng.normal(0, 1e3, 2).astype(np.float32))
        return {"a_inv_scale": (2.0 ** rng.uniform(-20, 2, M)).astype(np.float32), "b_scale": scale,
                "bias": rng.normal(0, 1e4, N).astype(np.float32), "output_min": np.float32(lo),
                "output_max": np.float32(hi)}
    tlo, thi = rq.OUT_RANGE[out_type]
    lo, hi = sorted(int(x) for x in rng.integers(tlo, thi + 1, 2))
    return {"bias": rng.integers(-2 ** 31, 2 ** 31, N).astype(np.int32), "scale": scale,
            "output_zero_point": int(rng.integers(tlo, thi + 1)), "output_min": lo, "output_max": hi}


@pytest.mark.parametrize("name", sorted(rq.BATCHED_STAGES))
def test_batched_stages_equal_the_stage_case_by_case(name):
    """Each stage of BATCHED_STAGES computes a Batch of cases (each with its own parameters) exactly as it computes
    each case alone (lowp.conformance.run.batch judges a batch so): bit for bit, and undefined (raising) for the
    batch where it is for a case."""
    stage = OUTPUT_STAGES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    qd8 = name.startswith("qd8")
    extreme = np.array([-2 ** 31, 2 ** 31 - 1, 0, -1, 1], np.int64)
    compared = raised = 0
    for trial in range(40):
        out_type = stage.out_types[trial % len(stage.out_types)]
        n, M, N = int(rng.integers(2, 6)), int(rng.integers(1, 5)), int(rng.integers(1, 9))
        acc = rng.integers(-2 ** 31, 2 ** 31, (n, M, N)).astype(np.int64)
        acc[rng.random((n, M, N)) < 0.2] = rng.choice(extreme)
        acc[rng.random((n, M, N)) < 0.3] //= 1 << int(rng.integers(8, 28))
        cases = [_case_params(rng, M, N, out_type, qd8) for _ in range(n)]
        try:
            alone = [stage.compute(acc[i].astype(np.int32), cases[i], out_type) for i in range(n)]
        except (ArithmeticError, ValueError):
            with pytest.raises((ArithmeticError, ValueError)):
                stage.compute(acc.astype(np.int32), rq.Batch({k: np.stack([np.asarray(c[k]) for c in cases])
                                                              for k in cases[0]}), out_type)
            raised += 1
            continue
        together = stage.compute(acc.astype(np.int32), rq.Batch({k: np.stack([np.asarray(c[k]) for c in cases])
                                                                 for k in cases[0]}), out_type)
        assert together.dtype == alone[0].dtype and together.shape == (n, M, N)
        assert together.tobytes() == np.stack(alone).tobytes(), name
        compared += 1
    assert compared >= 20, (compared, raised)
