"""Output-stage families (conformance/diagnosis/stage_families.py, issue 23 part 4): every path without a bug is its stage, bit
for bit, on the contracts' own draws; a few members are written a second time here as plain Python, one element at a
time, and C from that reading is named with the right family; a correct stage is named by nothing on the cases lowp
draws; every member is a bug somewhere (it differs from the stage on some draw); and real C kernels with one-line
output-stage bugs (tests/stage_bugs/) are named by the right family, in their own instructions, while the same
kernels without the bug pass."""
from __future__ import annotations

import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lowp.conformance.diagnosis import stage_families as sf
from lowp.conformance.contracts.int32 import EXACT
from lowp.conformance.contracts.output import OUTPUT_CONTRACTS, STYLES, output_contract
from lowp.conformance.search.quantized import accumulators, from_json
from lowp.isa_models.requant import OUT_RANGE, OUTPUT_STAGES

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent / "stage_bugs"))
from kernels import claimed_row, entry, register  # noqa: E402  (tests/stage_bugs/kernels.py)

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
F32 = np.float32


def staged_contracts():
    """(contract, out type, accepted stage) of every accepted stage that has a path."""
    return [(c.name, t, s) for c in OUTPUT_CONTRACTS.values() for t in c.out_types for s in c.accepted
            if s in sf.PATHS]


def draws(contract, out_type, seeds, M=3, N=5):
    """(A, B, q, exact accumulator) as lowp draws a case of this contract: operands over the whole int8 range (and
    every element at one end now and then), zero points, parameters in each style; now and then a scale of 0.5,
    whose ties tell the roundings apart (0.25 for rndnu16)."""
    c = output_contract(contract)
    for seed in seeds:
        rng = np.random.default_rng(seed)
        K = int(rng.integers(1, 40))
        A = rng.integers(-128, 128, (M, K)).astype(np.int8)
        B = rng.integers(-128, 128, (K, N)).astype(np.int8)
        if seed % 4 == 0:
            A[:] = rng.choice([-128, 127])
            B[:] = rng.choice([-128, 127])
        zps = {"a_zero_point": np.asarray(rng.integers(-128, 128, M), np.int32) if contract == "qd8-f32"
               else int(rng.integers(-128, 128)), "b_zero_point": 0}
        acc = accumulators(EXACT, A, B, zps)
        q = {**c.draw(rng, M, N, out_type, STYLES[seed % 3], int(acc.min()), int(acc.max())), **zps}
        if seed % 5 == 1 and "scale" in q:
            # ties where the roundings differ: small accumulators, no bias, a scale of 0.5 (the clamp the type's)
            A, B = A // 16, B // 16
            acc = accumulators(EXACT, A, B, zps)
            lo, hi = OUT_RANGE.get(out_type, (None, None))
            # (rndnu16: 0.25, a pre-shift by one bit, whose ties its rounding members differ at; 0.5 shifts nothing)
            tie = 0.25 if contract == "xnnpack-rndnu16" else 0.5
            q.update(scale=np.full_like(q["scale"], F32(tie)), bias=np.zeros_like(q["bias"]))
            if lo is not None and contract != "fbgemm-requantize":
                q.update(output_zero_point=0 if lo < 0 else 128, output_min=lo, output_max=hi)
        if seed % 5 == 4 and contract == "xnnpack-rndnu16":
            # rndnu16's int16 zero-point add at its edge (conformance/search/stage_edges.py): the largest 15-bit
            # multiplier (mantissa 0xFFFE00 gives 32767), x16 saturated at 32767 by a large bias, zp 255
            q.update(scale=np.full_like(q["scale"], F32(0xFFFE00 * 2.0 ** -31)), bias=np.full_like(q["bias"], 1 << 30),
                     output_zero_point=255, output_min=0, output_max=255)
        if seed % 5 == 3 and "scale" in q and contract != "fbgemm-requantize":
            # a near tie (test_a_fused_scale_is_named_on_a_near_tie): 3 * scale = 3.5 - 2^-23 exactly
            A, B = np.full((M, 1), 3, np.int8), np.ones((1, N), np.int8)
            zps["a_zero_point"] = np.zeros(M, np.int32) if np.ndim(zps["a_zero_point"]) else 0
            acc = accumulators(EXACT, A, B, zps)
            q.update(zps, scale=np.full_like(q["scale"], F32(9786709 * 2.0 ** -23)), bias=np.zeros_like(q["bias"]),
                     output_zero_point=0, output_min=OUT_RANGE[out_type][0], output_max=OUT_RANGE[out_type][1])
        yield A, B, q, acc


def same(x, y) -> bool:
    x, y = np.asarray(x), np.asarray(y)
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def names(contract, A, B, q, C, out_type, isa="c", blocks=None):
    return dict(sf.matches(contract, A, B, q, C, out_type, acc_variants=(EXACT,), isa=isa, blocks=blocks))


# ------------------------------------------------------------------------------------ the paths are the stages

@pytest.mark.parametrize("contract,out_type,stage", staged_contracts())
def test_every_path_without_a_bug_is_its_stage(contract, out_type, stage):
    """So that a member is the stage with exactly one thing changed: on the contract's typical, ends and limits
    draws (biases driving the accumulator to the int32 ends, the largest scales), bit for bit."""
    compared = 0
    for A, B, q, acc in draws(contract, out_type, range(150)):
        try:
            want = OUTPUT_STAGES[stage].compute(acc, q, out_type)
        except (ArithmeticError, ValueError):
            continue
        for path in sf.PATHS[stage]:
            assert same(path.run(acc, q, out_type), want), (path.name, q)
            compared += 1
    assert compared > 100


# ------------------------------------------------------------------------ members read a second time, by hand

def f32_times(x: int, scale) -> float:
    """float32(x) * scale in float32, as one element's VCVTDQ2PS and VMULPS give it."""
    return float(F32(F32(x) * F32(scale)))


def clamp(v, lo, hi):
    return max(lo, min(hi, v))


def wrap(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def by_element(acc, q, element):
    M, N = acc.shape
    return np.array([[element(int(acc[i, j]), j) for j in range(N)] for i in range(M)], np.int64).astype(np.int8)


def truncating_reference(acc, q):
    """XNNPACK's lrintf reference with an (int32_t) cast: clamp the float, truncate toward zero, + zp."""
    zp, mn, mx = q["output_zero_point"], q["output_min"], q["output_max"]

    def element(a, j):
        v = clamp(f32_times(wrap(a + int(q["bias"][j]), 32), q["scale"][j]), mn - zp, mx - zp)
        return int(v) + zp
    return by_element(acc, q, element)


def x86_int16_wrapping_zero_point(acc, q):
    """The x86 path with VPADDW: MINPS max - zp, CVTPS2DQ (INT32_MIN out of range), PACKSSDW, a wrapping int16
    add of zp, PACKSSWB, PMAXSB min."""
    zp, mn, mx = q["output_zero_point"], q["output_min"], q["output_max"]

    def element(a, j):
        v = min(f32_times(wrap(a + int(q["bias"][j]), 32), q["scale"][j]), mx - zp)
        r = Fraction(v)
        i = round(r)                                   # Python rounds ties to even, as CVTPS2DQ
        i = i if -2 ** 31 <= i < 2 ** 31 else -2 ** 31
        return max(clamp(wrap(clamp(i, -32768, 32767) + zp, 16), -128, 127), mn)
    return by_element(acc, q, element)


def rndnu_sqrdmulh(acc, q):
    """XNNPACK's NEON rndnu with SQRDMULH: SQSHL by the pre-shift, (2xm + 2^31) >> 32, SRSHL, SQXTN, SQADD zp,
    SQXTN, SMAX, SMIN; the params from the scale's bits as microparams-init.c computes them."""
    zp, mn, mx = q["output_zero_point"], q["output_min"], q["output_max"]

    def element(a, j):
        bits = int(np.asarray(q["scale"][j], F32).view(np.uint32))
        shift = 127 + 31 - 32 - (bits >> 23)
        post = max(shift, 1)
        m = ((bits & 0x7FFFFF) | 0x800000) << 7
        x = clamp(wrap(a + int(q["bias"][j]), 32) << (post - shift), -2 ** 31, 2 ** 31 - 1)
        h = (2 * x * m + 2 ** 31) >> 32
        r = (h + (1 << (post - 1))) >> post
        return clamp(clamp(clamp(r, -32768, 32767) + zp, -32768, 32767), -128, 127) if mn <= -128 and mx >= 127 \
            else clamp(clamp(clamp(clamp(r, -32768, 32767) + zp, -32768, 32767), -128, 127), mn, mx)
    return by_element(acc, q, element)


def fused_scale(acc, q):
    """The imagic path with the multiply and the magic-bias add contracted into an FMA: the exact product of
    float32(x) and the scale rounded once, to the nearest integer, ties to even; then the clamp, + zp."""
    zp, mn, mx = q["output_zero_point"], q["output_min"], q["output_max"]

    def element(a, j):
        p = Fraction(float(F32(wrap(a + int(q["bias"][j]), 32)))) * Fraction(float(F32(q["scale"][j])))
        return clamp(round(p), mn - zp, mx - zp) + zp
    return by_element(acc, q, element)


def column_zero_scale(acc, q):
    """Every column's scale read from column 0 (one block: N <= nr), the lrintf reference otherwise."""
    zp, mn, mx = q["output_zero_point"], q["output_min"], q["output_max"]

    def element(a, j):
        v = clamp(f32_times(wrap(a + int(q["bias"][j]), 32), q["scale"][0]), mn - zp, mx - zp)
        return round(Fraction(v)) + zp
    return by_element(acc, q, element)


HAND_READINGS = [
    ("xnnpack-fp32", truncating_reference, "float-to-int:trunc", "c", None),
    ("xnnpack-fp32", x86_int16_wrapping_zero_point, "zero-point:wrap16", "x86", None),
    ("xnnpack-rndnu", rndnu_sqrdmulh, "doubling-high:round", "arm", None),
    ("xnnpack-fp32", fused_scale, "float-order:fused", "c", None),
    ("xnnpack-fp32", column_zero_scale, "per-channel:scale:first", "c", (4, 8)),
]


@pytest.mark.parametrize("contract,reading,key,isa,blocks", HAND_READINGS, ids=[r[2] for r in HAND_READINGS])
@SETTINGS
@given(seed=st.integers(0, 2 ** 32 - 1))
def test_a_bug_read_by_hand_is_named_by_its_family(contract, reading, key, isa, blocks, seed):
    """On every draw where the reading differs from the stage, matches() names it with the family and parameter;
    where it does not, nothing is named (a member that coincides with the right answer is no reading)."""
    (A, B, q, acc), = draws(contract, "s8", [seed], N=4)
    C = reading(acc, q)
    right = OUTPUT_STAGES[output_contract(contract).accepted[0]].compute(acc, q, "s8")
    found = names(contract, A, B, q, C, "s8", isa, blocks)
    if same(C, right):
        assert found == {}
    else:
        assert key in found, (found, q)


def test_a_fused_scale_is_named_on_a_near_tie():
    """scale = 9786709 * 2^-23 (float32, in [1, 2)) times 3 is 3.5 - 2^-23 exactly: float32's product, half way
    between 3.5 - 2^-22 and 3.5, rounds to the even 3.5, which lrintf rounds to 4; the exact product rounded once
    (an FMA with the magic bias) is 3."""
    scale = F32(9786709 * 2.0 ** -23)
    assert Fraction(float(scale)) * 3 == Fraction(7, 2) - Fraction(1, 2 ** 23)
    q = {"bias": np.zeros(1, np.int32), "scale": np.array([scale], F32), "output_zero_point": 0,
         "output_min": -128, "output_max": 127, "a_zero_point": 0, "b_zero_point": 0}
    A, B = np.full((1, 1), 3, np.int8), np.ones((1, 1), np.int8)
    acc = accumulators(EXACT, A, B, q)
    right, fused = OUTPUT_STAGES["xnnpack-fp32-lrintf"].compute(acc, q, "s8"), fused_scale(acc, q)
    assert (right[0, 0], fused[0, 0]) == (4, 3)
    assert "float-order:fused" in names("xnnpack-fp32", A, B, q, fused, "s8")


# ------------------------------------------------------------------------------------------ no false names

@pytest.mark.parametrize("contract,out_type,stage", staged_contracts())
def test_a_correct_stage_is_named_by_nothing(contract, out_type, stage):
    """Any accepted stage's output, on lowp's draws of the contract, is no member of any family: a correct kernel
    (or one correct but for its accumulation) is never told its output stage is wrong."""
    for A, B, q, acc in draws(contract, out_type, range(60)):
        try:
            C = OUTPUT_STAGES[stage].compute(acc, q, out_type)
        except (ArithmeticError, ValueError):
            continue
        assert names(contract, A, B, q, C, out_type, blocks=(2, 4)) == {}, q


def members_of(path):
    for knob, values in path.members.items():
        for value in values:
            yield f"{knob}={value}", sf.Bug(**{knob: value})


@pytest.mark.parametrize("stage", sorted(sf.PATHS))
def test_every_member_is_a_bug_somewhere(stage):
    """A member that equalled its stage on every draw would name nothing ever: each differs on some draw."""
    contract = next(c for c in OUTPUT_CONTRACTS.values() if stage in c.accepted)
    out_type = contract.out_types[0]
    for path in sf.PATHS[stage]:
        for label, bug in members_of(path):
            for A, B, q, acc in draws(contract.name, out_type, range(300)):
                try:
                    if not same(path.run(acc, q, out_type, bug), path.run(acc, q, out_type)):
                        break
                except (ArithmeticError, ValueError):
                    continue
            else:
                pytest.fail(f"{stage} {path.name}: {label} never differs from the stage")


def test_every_member_has_words():
    for paths in sf.PATHS.values():
        for path in paths:
            for knob, values in path.members.items():
                family = next(f for f in sf.FAMILIES if f.knob == knob)
                for value in values:
                    assert family.describe(value, path.isa)


# ------------------------------------------------------------------------------------ real kernels, one bug each

X86_FP32 = "xnnpack-fp32 with "
BUGS = [
    # (kernel, LOWP_BUG, pinned parameters, the name the cause must give)
    ("avx2_fp32", 1, "", "the float->int conversion truncating (cvttps2dq for cvtps2dq)"),
    ("avx2_fp32", 2, "", "the output_min clamp missing (no VPMAXSB)"),
    ("avx2_fp32", 3, "", "the output_max clamp missing (no VMINPS)"),
    ("avx2_fp32", 4, "", "the zero point added wrapping in int16 (VPADDW for VPADDSW)"),
    ("avx2_fp32", 5, "", "the zero point subtracted (VPSUBSW for VPADDSW)"),
    ("avx2_fp32", 6, "", "the zero point not added"),
    ("avx2_fp32", 7, "", "the zero point added wrapping after the narrowing to 8 bits (VPADDB after VPACKSSWB)"),
    ("avx2_fp32", 8, "", "output_min and output_max swapped"),
    ("avx2_fp32", 9, "", "the clamp applied before the zero point is added"),
    ("avx2_fp32", 10, "", "scale read from column 0 for every column of its block of 8"),
    ("avx2_fp32", 11, "", "bias read from the other column of its pair (n xor 1)"),
    ("avx2_fp32", 12, "", "the zero point added wrapping in int32, before the narrowing (VPADDD before VPACKSSDW"),
    ("scalar_fp32", 1, "", "the float->int conversion truncating (an (int32_t) cast for lrintf)"),
    ("scalar_fp32", 2, "{scale = 0.5}", "the float->int conversion rounding half away from zero (lroundf for lrintf)"),
    ("scalar_fp32", 3, "{scale = 0.5}", "the float->int conversion rounding half up (floorf(v + 0.5f) for lrintf)"),
    ("scalar_fp32", 4, "", "the output_min clamp missing (no max with output_min)"),
    ("scalar_fp32", 5, "", "the clamp applied before the zero point is added"),
    ("scalar_fp32", 6, "", "clamped to the type's range instead of [output_min, output_max]"),
    ("scalar_fp32", 7, "", "the zero point added twice"),
    ("scalar_fp32", 8, "", "the zero point subtracted"),
    ("scalar_fp32", 9, "", "scale read from column 0 for every column of its block of 4"),
    ("scalar_fp32", 10, "", "scale read from the next column (n + 1)"),
    ("scalar_fp32", 11, "", "bias read from the other column of its pair (n xor 1)"),
    ("scalar_fp32", 12, "", "the output_max clamp missing (no min with output_max)"),
    ("rndnu", 1, "", "the doubling high multiply rounding (SQRDMULH for SQDMULH)"),
    ("rndnu", 2, "", "the right shift not rounding"),
    ("rndnu", 3, "", "the right shift one bit too far"),
    ("rndnu", 4, "", "the zero point added wrapping in int16 (ADD for SQADD)"),
    ("rndnu", 5, "", "the output_min clamp missing (no SMAX)"),
    ("rndnu", 6, "", "the zero point added wrapping after the narrowing to 8 bits (ADD .16B after SQXTN)"),
    ("rndnu", 7, "", "output_min and output_max swapped"),
    ("tflite", 1, "", "the right shift not rounding (a plain >> without the rounding term)"),
    ("tflite", 2, "", "multiplier read from column 0 for every column"),
    ("tflite", 3, "", "the right shift one bit too far"),
    ("tflite", 4, "", "the output_min clamp missing (no max with output_min)"),
    ("tflite", 5, "", "the zero point subtracted"),
    ("tflite", 6, "", "bias read from column 0 for every column"),
    ("qd8", 1, "", "b_scale read from column 0 for every column of its block of 4"),
    ("qd8", 2, "", "a_inv_scale read from row 0 for every row of its block of 2"),
    ("qd8", 3, "", "the output_max clamp missing (no min with output_max)"),
    ("qd8", 4, "", "the filter scale applied before the row's inv_scale"),
]
CORRECT = sorted({k for k, *_ in BUGS})


@pytest.fixture(scope="module")
def bug_kernels(tmp_path_factory):
    """Every kernel of BUGS and CORRECT, registered afresh from one TOML file."""
    text = "".join(entry(k, b, pins) for k, b, pins, _ in BUGS) + "".join(entry(k, 0) for k in CORRECT)
    return register(text, tmp_path_factory.mktemp("stage_bugs"))


@pytest.mark.native
@pytest.mark.parametrize("kernel,bug,pins,words", BUGS, ids=[f"{k}-{b}" for k, b, *_ in BUGS])
def test_a_one_line_output_stage_bug_is_named(bug_kernels, kernel, bug, pins, words):
    """The kernel FAILs its claimed contract, and the cause names the family and parameter of its bug, in its
    instructions; the name is one the counterexample shown reads as (its own readings, recomputed here)."""
    from lowp.conformance.search.quantized import named_readings
    name = f"sb_{kernel}_{bug}{'_pinned' if pins else ''}"
    row = claimed_row(bug_kernels, name)
    k = bug_kernels[name]
    assert row["verdict"] == "FAIL" and row["cause"].startswith("wrong value: the result matches"), row["cause"]
    expected = f"{k.output} with {words}"
    assert expected in row["cause"], row["cause"]
    cx = row["counterexample"]
    A = np.asarray(cx["A"]).astype(np.int8).reshape(cx["shape"][0], cx["shape"][2])
    B = np.asarray(cx["B"]).astype(np.int8).reshape(cx["shape"][2], cx["shape"][1])
    C = np.asarray(cx["actual"], np.float32 if k.c_type == "f32" else np.int8)
    shown = [n for _, n in named_readings(k.output, k, A, B, from_json(cx["quant"]), C)]
    assert any(n.startswith(expected) for n in shown), shown
    assert cx["shape"][0] * cx["shape"][1] <= 2, cx["shape"]     # one element, or the two a column bug needs


@pytest.mark.native
@pytest.mark.parametrize("kernel", CORRECT)
def test_the_same_kernel_without_the_bug_passes(bug_kernels, kernel):
    row = claimed_row(bug_kernels, f"sb_{kernel}_0")
    assert row["verdict"] == "PASS" and row["executed"] > 40, row.get("cause")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 32 - 1), style=st.sampled_from(STYLES), K=st.sampled_from([2, 5, 17, 40]))
def test_the_dropped_k_readings_computed_as_one_stack_are_the_ones_computed_one_by_one(seed, style, K):
    """quantized._listed_outputs: the listed variants' accumulators as prefix sums of one product, each stage run
    once on the stack, give every variant's outputs bit for bit as accumulators() and the stage give them one at a
    time, for every int32 output contract; and a C that is a dropped-k variant's output is named so."""
    from types import SimpleNamespace

    from lowp.conformance.diagnosis.variants import listed_variants
    from lowp.conformance.search import quantized
    rng = np.random.default_rng(seed)
    M, N = 3, 4
    A = rng.integers(-128, 128, (M, K)).astype(np.int8)
    B = rng.integers(-128, 128, (K, N)).astype(np.int8)
    for contract in OUTPUT_CONTRACTS.values():
        if hasattr(contract, "judge_blocks"):
            continue
        for out_type in contract.out_types:
            q = dict(contract.draw(rng, M, N, out_type, style))
            q.setdefault("a_zero_point", int(rng.integers(-128, 128)))
            q.update(a_row_sum=A.astype(np.int64).sum(axis=1), kc=K)      # what a qd8-qc2w stage reads (with_rows)
            stages = [OUTPUT_STAGES[s] for s in contract.accepted]
            listed = listed_variants(A, B)
            stacked = [list(outs) for outs in quantized._listed_outputs(listed, A, B, q, stages, out_type)]
            alone = [quantized._outputs(accumulators(v, A, B, q), stages, q, out_type) for v in listed]
            assert len(stacked) == len(alone)
            for got, want in zip(stacked, alone):
                assert len(got) == len(want) and all(quantized.same(g, w) for g, w in zip(got, want)), contract.name
            rights = quantized._outputs(accumulators(EXACT, A, B, q), stages, q, out_type)
            planted = next(((v, outs[0]) for v, outs in zip(listed, alone) if outs and
                            not any(quantized.same(outs[0], r) for r in rights)), None)
            if planted is not None:
                kern = SimpleNamespace(c_type=out_type)
                named = quantized.accumulation_readings(contract.name, kern, A, B, q, planted[1], (EXACT,))
                assert planted[0].key in dict(named), (contract.name, named)
