"""lowp's own requantizing x86 kernels (kernels/quantized/x86.toml, issue 11 item 6), run natively through the
quantized signatures: each equals its behaviour model by parts (k.predict) bit for bit on shapes around its tile
edges with drawn quantization parameters (typical and at their limits), and an independent reading of its output
stage written here from the libraries' formulas (exact integers and Fractions, not lowp.isa_models.requant). The
seeded AVX-512 VNNI kernel differs from its AVX2 sibling exactly where the seeded corner is: a scaled value at or
below -2^31 with a negative output zero point."""
from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from lowp.kernels import executor, load_toml
from lowp.kernels.features import host_features
from lowp.kernels.registry import kernel as registered

TOML = Path(__file__).resolve().parents[1] / "kernels" / "quantized" / "x86.toml"
AVX2, VNNI = "qs8_qc8w_gemm_4x8c8_fp32_avx2", "qs8_qc8w_gemm_4x16c4_fp32_avx512vnni"
RUY, QD8 = "ruy_style_gemm_avx2", "qd8_f32_qc8w_gemm_4x8c8_avx2"
QU8 = "qu8_gemm_2x8c8_fp32_avx2"
NAMES = (AVX2, VNNI, RUY, QD8, QU8)
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


@pytest.fixture(scope="module")
def kernels():
    try:
        loaded = {k.name: k for k in load_toml(TOML)}
    except Exception as e:       # already registered by another test of this session: take the registry's
        if "already registered" not in str(e):
            raise
        loaded = {name: registered(name) for name in NAMES}
    return loaded


def runnable(k):
    missing = [f for f in k.features if f not in host_features("x86-64")]
    if missing:
        pytest.skip(f"{k.name}: this CPU lacks {', '.join(missing)}")
    return executor(k)


# ---- shapes and parameters ---------------------------------------------------------------------------------------
def edge_shapes(k):
    """M in 1..9 (two full MR=4 calls and a remainder), N and K around nr and kr, within N <= 17 and K <= 40."""
    nr, kr = k.tile.nr, k.tile.kr
    Ns = sorted({n for n in (1, 2, nr - 1, nr, nr + 1, 17) if 1 <= n <= 17})
    Ks = sorted({x for x in (1, kr - 1, kr, kr + 1, 2 * kr + 1, 17, 40) if 1 <= x <= 40})
    return [(M, N, K) for M in (1, 3, 4, 5, 8, 9) for N in Ns for K in Ks] + [(2, 17, 40), (6, 13, 23), (7, 11, 31)]


def operands(rng, M, N, K, k=None):
    if k is not None and k.a_type == "u8":
        return (rng.integers(0, 256, (M, K)).astype(np.uint8), rng.integers(0, 256, (K, N)).astype(np.uint8))
    return (rng.integers(-128, 128, (M, K)).astype(np.int8), rng.integers(-128, 128, (K, N)).astype(np.int8))


def typical_scale(K):
    """A scale putting sum_k a*b (std ~ 5500 sqrt(K) for uniform s8) around the output range."""
    return 40.0 / (5500.0 * math.sqrt(K))


def draw_s8(rng, M, N, K, limits: bool) -> dict:
    """bias, scale, multiplier/shift per channel, a_zero_point, output zero point and clamp. limits=True takes
    them to the ends of their domains (scale up to XNNPACK's 256, bias over all of int32, zero points at the ends
    of int8, any shift of [-31, 30])."""
    from lowp.isa_models.fixedpoint import quantize_multiplier
    if limits:
        scale = np.exp2(rng.uniform(-30, 7.99, N)).astype(np.float32)
        bias = rng.choice([INT32_MIN, INT32_MIN + 1, INT32_MAX, 0, -1], N).astype(np.int64)
        bias = np.where(rng.random(N) < 0.5, bias, rng.integers(INT32_MIN, INT32_MAX, N, endpoint=True))
        multiplier = rng.integers(0, INT32_MAX, N, endpoint=True)
        shift = rng.integers(-31, 30, N, endpoint=True)
        zp = int(rng.choice([-128, -1, 0, 127]))
        lo, hi = sorted(int(x) for x in rng.integers(-128, 128, 2))
    else:
        scale = (typical_scale(K) * rng.uniform(0.5, 2.0, N)).astype(np.float32)
        bias = (rng.integers(-3000, 3000, N) * math.sqrt(K)).astype(np.int64)
        pairs = [quantize_multiplier(float(s), single_rounding=True) for s in scale]
        multiplier = np.array([m for m, _ in pairs])
        shift = np.array([s for _, s in pairs])
        zp = int(rng.integers(-20, 20))
        lo, hi = (-128, 127) if rng.random() < 0.5 else (int(rng.integers(-128, -60)), int(rng.integers(60, 128)))
    return {"bias": bias.astype(np.int32), "scale": scale, "multiplier": multiplier.astype(np.int32),
            "shift": shift.astype(np.int32),
            "a_zero_point": int(rng.integers(-128, 128) if limits else rng.integers(-16, 16)),
            "output_zero_point": zp, "output_min": lo, "output_max": hi}


def draw_qd8(rng, M, N, K, limits: bool) -> dict:
    inv = (np.exp2(rng.uniform(-20, 0, M)) if limits else rng.uniform(1e-3, 2e-2, M)).astype(np.float32)
    if limits:
        lo, hi = (-np.inf, np.inf) if rng.random() < 0.5 else sorted(rng.normal(0, 30, 2))
    else:
        lo, hi = -50.0, 50.0
    return {"a_zero_point": rng.integers(-128, 128, M).astype(np.int32), "a_inv_scale": inv,
            "b_scale": rng.uniform(1e-3, 2e-2 if not limits else 4.0, N).astype(np.float32),
            "bias": rng.normal(0, 10, N).astype(np.float32),
            "output_min": np.float32(lo), "output_max": np.float32(hi)}


def draw_qu8(rng, M, N, K, limits: bool) -> dict:
    """XNNPACK qu8: uint8 zero points of A, the weights and C, one scale for all channels."""
    q = draw_s8(rng, M, N, K, limits)
    q["scale"] = np.full(N, q["scale"][0] * (4 if not limits else 1), np.float32)   # u8 x u8 sums are larger
    ends = [0, 1, 128, 254, 255]
    zps = [int(rng.choice(ends)) if limits else int(rng.integers(100, 156)) for _ in range(3)]
    lo, hi = sorted(int(x) for x in rng.integers(0, 256, 2)) if limits else (0, 255)
    q.update(a_zero_point=zps[0], b_zero_point=zps[1], output_zero_point=zps[2], output_min=lo, output_max=hi)
    return q


def draw(k, rng, M, N, K, limits):
    if k.a_type == "u8":
        return draw_qu8(rng, M, N, K, limits)
    q = (draw_qd8 if k.c_type == "f32" else draw_s8)(rng, M, N, K, limits)
    if k.signature == "quant-gemm":          # lowp's driver ABI also takes a zero point of B (XNNPACK's has none)
        q["b_zero_point"] = int(rng.integers(-128, 128) if limits else rng.integers(-16, 16))
    return q


def bits(C: np.ndarray) -> np.ndarray:
    return C.view(np.uint32) if C.dtype == np.float32 else C.view(np.uint8)


def assert_same(C, P, what):
    assert C.dtype == P.dtype and C.shape == P.shape, (what, C.dtype, P.dtype, C.shape, P.shape)
    bad = np.argwhere(bits(C) != bits(P))
    assert bad.size == 0, f"{what}: {len(bad)} of {C.size} outputs differ, first at {tuple(bad[0])}: " \
                          f"kernel {C[tuple(bad[0])]!r}, expected {P[tuple(bad[0])]!r}"


# ---- independent readings of the output stages ------------------------------------------------------------------
def exact_acc(A, B, a_zp, with_bias=None, b_zp=0) -> list[list[int]]:
    """sum_k (A - a_zp)(B - b_zp) (+ bias), as Python ints wrapped to int32 (a_zp scalar or one per row)."""
    zps = np.broadcast_to(np.asarray(a_zp, np.int64), (A.shape[0],))
    out = []
    for m in range(A.shape[0]):
        row = []
        for n in range(B.shape[1]):
            s = sum((int(A[m, k]) - int(zps[m])) * (int(B[k, n]) - b_zp) for k in range(A.shape[1]))
            s += 0 if with_bias is None else int(with_bias[n])
            row.append((s - INT32_MIN) % (1 << 32) + INT32_MIN)
        out.append(row)
    return out


def f32_round(x: Fraction) -> Fraction:
    """x rounded to the nearest float32 (ties to even), as an exact Fraction (no overflow: |x| < 2^100 here)."""
    if x == 0:
        return Fraction(0)
    sign, x = (-1 if x < 0 else 1), abs(x)
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** e > x:
        e -= 1
    quantum = Fraction(2) ** (max(e, -126) - 23)
    q, r = divmod(x / quantum, 1)
    q = int(q) + (1 if r > Fraction(1, 2) or (r == Fraction(1, 2) and int(q) % 2) else 0)
    return sign * q * quantum


def round_half_even(x: Fraction) -> int:
    q, r = divmod(x, 1)
    return int(q) + (1 if r > Fraction(1, 2) or (r == Fraction(1, 2) and int(q) % 2) else 0)


def xnnpack_fp32_reading(A, B, q) -> np.ndarray:
    """XNNPACK's fp32 contract (xnn_qs8_requantize_fp32, xnn_qu8_requantize_fp32): float32(acc + bias) * scale in
    float32, clamped to [min - zp, max - zp], rounded to nearest even, + zp; qu8 with the weights' zero point."""
    acc = exact_acc(A, B, q["a_zero_point"], q["bias"], q.get("b_zero_point", 0))
    zp, lo, hi = q["output_zero_point"], q["output_min"], q["output_max"]
    out = np.zeros((A.shape[0], B.shape[1]), np.uint8 if A.dtype == np.uint8 else np.int8)
    for m, row in enumerate(acc):
        for n, x in enumerate(row):
            v = f32_round(f32_round(Fraction(x)) * Fraction(float(q["scale"][n])))
            out[m, n] = round_half_even(min(max(v, Fraction(lo - zp)), Fraction(hi - zp))) + zp
    return out


def tflite_single_rounding_reading(A, B, q) -> np.ndarray:
    """TFLite/ruy single rounding: (x * m + 2^(30 - s)) >> (31 - s), static_cast to int32, + zp (int32), clamp."""
    acc = exact_acc(A, B, q["a_zero_point"], q["bias"], q.get("b_zero_point", 0))
    out = np.zeros((A.shape[0], B.shape[1]), np.int8)
    wrap = lambda v: (v - INT32_MIN) % (1 << 32) + INT32_MIN          # noqa: E731
    for m, row in enumerate(acc):
        for n, x in enumerate(row):
            s, mult = int(q["shift"][n]), int(q["multiplier"][n])
            y = wrap(wrap((x * mult + (1 << (30 - s))) >> (31 - s)) + q["output_zero_point"])
            out[m, n] = min(max(y, q["output_min"]), q["output_max"])
    return out


def qd8_reading(A, B, q) -> np.ndarray:
    """XNNPACK qd8-f32: v = float32(float32(acc) * inv_scale[m]), then fma(v, b_scale[n], bias[n]) rounded once,
    clamped to [min, max]."""
    acc = exact_acc(A, B, q["a_zero_point"])
    out = np.zeros((A.shape[0], B.shape[1]), np.float32)
    for m, row in enumerate(acc):
        for n, x in enumerate(row):
            v = f32_round(f32_round(Fraction(x)) * Fraction(float(q["a_inv_scale"][m])))
            r = float(f32_round(v * Fraction(float(q["b_scale"][n])) + Fraction(float(q["bias"][n]))))
            out[m, n] = min(max(np.float32(r), q["output_min"]), q["output_max"])
    return out


READINGS = {AVX2: xnnpack_fp32_reading, VNNI: xnnpack_fp32_reading, RUY: tflite_single_rounding_reading,
            QD8: qd8_reading, QU8: xnnpack_fp32_reading}


def seeded_corner(A, B, q) -> np.ndarray:
    """Where the seeded kernel departs from the contract: float32(acc + bias) * scale <= -2^31 (VCVTPS2DQ gives
    INT_MIN) with a negative output zero point."""
    acc = np.array(exact_acc(A, B, q["a_zero_point"], q["bias"]), np.int64).reshape(A.shape[0], B.shape[1])
    scaled = acc.astype(np.float32) * q["scale"][None, :]
    return (scaled <= np.float32(-2.0 ** 31)) & (q["output_zero_point"] < 0)


# ---- the tests ----------------------------------------------------------------------------------------------------
def test_entries_carry_their_abi_facts(kernels):
    """The entries say what the adapters need: tile, XNNPACK datatype/params, a_shift, over-read, models by parts."""
    assert set(kernels) == set(NAMES)
    assert (kernels[AVX2].tile.mr, kernels[AVX2].tile.nr, kernels[AVX2].tile.kr) == (4, 8, 8)
    assert (kernels[VNNI].tile.mr, kernels[VNNI].tile.nr, kernels[VNNI].tile.kr) == (4, 16, 4)
    assert kernels[VNNI].a_shift == 128 and kernels[AVX2].a_shift == 0
    assert kernels[AVX2].overread == {"A": 8} and kernels[QD8].xnnpack["datatype"] == "qd8-f32-qc8w"
    assert kernels[RUY].signature == "quant-gemm" and kernels[QD8].c_type == "f32"
    assert kernels[QU8].xnnpack["datatype"] == "qu8" and (kernels[QU8].a_type, kernels[QU8].c_type) == ("u8", "u8")
    assert {k.model.output for k in kernels.values()} == {"xnnpack-fp32-x86", "xnnpack-fp32-avxvnni-wrap",
                                                          "tflite-S", "qd8-f32-fma"}


@pytest.mark.parametrize("name", NAMES)
def test_kernel_equals_its_model_around_the_tile_edges(kernels, name):
    k = kernels[name]
    ex = runnable(k)
    rng = np.random.default_rng(sum(map(ord, name)))
    for i, (M, N, K) in enumerate(edge_shapes(k)):
        A, B = operands(rng, M, N, K, k)
        for limits in (False, True):
            q = draw(k, rng, M, N, K, limits)
            C = ex.run(A, B, seed=i, quant=q)
            assert_same(C, k.predict(A, B, q), f"{name} {M}x{N}x{K} limits={limits} q={q}")


@pytest.mark.parametrize("name", NAMES)
def test_kernel_equals_an_independent_reading_of_its_stage(kernels, name):
    """Outside the seeded corner every kernel computes its library's formula, re-derived here exactly."""
    k = kernels[name]
    ex = runnable(k)
    rng = np.random.default_rng(7 + sum(map(ord, name)))
    shapes = [(1, 1, 1), (3, k.tile.nr + 1, k.tile.kr + 1), (5, 17, 40), (9, 7, 3)]
    for i, (M, N, K) in enumerate(shapes):
        A, B = operands(rng, M, N, K, k)
        for limits in (False, True):
            q = draw(k, rng, M, N, K, limits)
            C, expected = ex.run(A, B, seed=i, quant=q), READINGS[name](A, B, q)
            if name == VNNI:          # the seeded corner aside
                corner = seeded_corner(A, B, q)
                C, expected = C[~corner], expected[~corner]
            assert_same(C, expected, f"{name} {M}x{N}x{K} limits={limits} q={q}")


def corner_case():
    """1x1x1: acc = bias + a * b near INT32_MIN, scale near XNNPACK's limit 256, output zero point -1."""
    A, B = np.array([[1]], np.int8), np.array([[-3]], np.int8)
    q = {"bias": np.array([INT32_MIN + 7], np.int32), "scale": np.array([255.5], np.float32),
         "multiplier": np.array([1 << 30], np.int32), "shift": np.array([0], np.int32), "a_zero_point": 0,
         "output_zero_point": -1, "output_min": -128, "output_max": 127}
    return A, B, q


def test_seeded_kernel_returns_127_on_the_corner_where_its_sibling_and_the_contract_give_minus_128(kernels):
    seeded, sibling = runnable(kernels[VNNI]), runnable(kernels[AVX2])
    A, B, q = corner_case()
    assert seeded_corner(A, B, q).all()
    assert xnnpack_fp32_reading(A, B, q)[0, 0] == -128
    assert sibling.run(A, B, quant=q)[0, 0] == -128
    assert seeded.run(A, B, quant=q)[0, 0] == 127
    assert kernels[VNNI].predict(A, B, q)[0, 0] == 127          # its model knows the corner
    # one step off the corner (zero point 0: INT_MIN + 0 does not wrap) both give -128 again
    q0 = dict(q, output_zero_point=0)
    assert seeded.run(A, B, quant=q0)[0, 0] == sibling.run(A, B, quant=q0)[0, 0] == -128


def test_seeded_kernel_differs_from_its_sibling_exactly_on_the_corner(kernels):
    """On parameters at their limits (where the corner is frequent) the two kernels differ at precisely the
    outputs whose scaled value is <= -2^31 with a negative zero point, and there the seeded one says 127."""
    seeded, sibling = runnable(kernels[VNNI]), runnable(kernels[AVX2])
    rng = np.random.default_rng(11)
    hits = 0
    for i in range(60):
        M, N, K = int(rng.integers(1, 10)), int(rng.integers(1, 18)), int(rng.integers(1, 41))
        A, B = operands(rng, M, N, K)
        q = draw_s8(rng, M, N, K, limits=True)
        q["output_zero_point"] = int(rng.choice([-128, -1, 5]))
        q["output_min"], q["output_max"] = -128, 127
        Cs, Cb = seeded.run(A, B, seed=i, quant=q), sibling.run(A, B, seed=i, quant=q)
        corner = seeded_corner(A, B, q)
        assert np.array_equal(Cs != Cb, corner), f"{M}x{N}x{K} q={q}"
        assert (Cs[corner] == 127).all() and (Cb[corner] == -128).all()
        hits += int(corner.sum())
    assert hits > 0, "the draws never reached the corner: the test shows nothing"


# ---- against the claimed output-stage contract (lowp.conformance), on the contract's own parameter draws ----------
EXPECTED_MATCH = {AVX2: "xnnpack-fp32-lrintf", RUY: "tflite-S", QD8: "qd8-f32-fma", QU8: "xnnpack-fp32-lrintf"}


@pytest.mark.parametrize("name", NAMES)
def test_kernel_meets_its_claimed_output_contract_except_the_seeded_corner(kernels, name):
    """Cases drawn as lowp conformance draws them (typical, the domain's ends, accumulators at int32's limits):
    the three correct kernels are accepted every time, matching the stage their library documents; the seeded
    one fails only on cases holding the corner, and the verdict names the known variant it matched."""
    from lowp.conformance.search.quantized import draw_params, judge
    k = kernels[name]
    ex = runnable(k)
    rng = np.random.default_rng(3)
    failed = 0
    for seed in range(90):
        M, N, K = int(rng.integers(1, 10)), int(rng.integers(1, 18)), int(rng.integers(1, 41))
        A, B = operands(rng, M, N, K, k)
        q = draw_params(k, A, B, seed, ("typical", "ends", "limits")[seed % 3])
        ok, matched, _ = judge(k.output, k, A, B, q, ex.run(A, B, seed=seed, quant=q))
        if name != VNNI:
            assert ok and matched == EXPECTED_MATCH[name], (name, M, N, K, q, matched)
            continue
        corner = seeded_corner(A, B, q).any()
        assert ok != corner, (M, N, K, q, matched)
        if not ok:
            assert "xnnpack-fp32-avxvnni-wrap" in matched
            failed += 1
    assert name != VNNI or failed > 0, "the contract's draws never reached the seeded corner"


def test_the_1x1x1_corner_is_judged_as_the_known_avxvnni_variant(kernels):
    """The corner lies inside XNNPACK's documented domain (scale < 256), so the claim is broken there; the verdict
    names the variant, and the AVX2 sibling passes the same case."""
    from lowp.conformance.contracts.output import OUTPUT_CONTRACTS
    from lowp.conformance.search.quantized import judge
    A, B, q = corner_case()
    q = {key: q[key] for key in ("bias", "scale", "a_zero_point", "output_zero_point", "output_min", "output_max")}
    assert OUTPUT_CONTRACTS["xnnpack-fp32"].domain_problems(q, 1, 1, "s8") == []
    seeded, sibling = kernels[VNNI], kernels[AVX2]
    ok, matched, expected = judge(seeded.output, seeded, A, B, q, runnable(seeded).run(A, B, quant=q))
    assert not ok and "xnnpack-fp32-avxvnni-wrap" in matched and expected[0, 0] == -128
    ok, matched, _ = judge(sibling.output, sibling, A, B, q, runnable(sibling).run(A, B, quant=q))
    assert ok and matched == "xnnpack-fp32-lrintf"
