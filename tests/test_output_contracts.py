"""lowp.conformance.contracts.output: domains at their ends, the named AVX-VNNI corner, draw() inside the domain,
outside() outside it, simplifications() inside it, and a hypothesis search that finds the corner on its own."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, find, settings

from lowp.conformance.contracts.output import OUTPUT_CONTRACTS, STYLES, BlockGeometry, output_contract
from lowp.isa_models.requant import OUTPUT_STAGES

F32 = np.float32
BELOW_256 = np.nextafter(F32(256), F32(0))


def fp32_q(N=2, **over):
    q = {"bias": np.zeros(N, np.int32), "scale": np.full(N, 0.5, F32), "output_zero_point": 0,
         "output_min": -128, "output_max": 127}
    q.update(over)
    return q


def test_unknown_contract_names_the_known_ones():
    with pytest.raises(KeyError, match="known: xnnpack-fp32, xnnpack-rndnu"):
        output_contract("xnnpack")


@pytest.mark.parametrize("name", ["xnnpack-fp32", "xnnpack-rndnu"])
def test_xnnpack_scale_domain_ends(name):
    c = output_contract(name)
    assert c.domain_problems(fp32_q(scale=np.array([BELOW_256, 2.0 ** -32], F32)), 1, 2, "s8") == []
    for bad in (256.0, np.nextafter(F32(2.0 ** -32), F32(0)), np.nan, -1.0):
        p = c.domain_problems(fp32_q(scale=np.array([0.5, bad], F32)), 1, 2, "s8")
        assert len(p) == 1 and p[0].startswith("scale[1]=") and "256" in p[0] and "XNNPACK" in p[0], p
    assert c.domain_problems(fp32_q(output_zero_point=-128), 1, 2, "s8") == []
    assert c.domain_problems(fp32_q(output_zero_point=127), 1, 2, "s8") == []
    assert "output_zero_point=128" in c.domain_problems(fp32_q(output_zero_point=128), 1, 2, "s8")[0]
    assert "output_zero_point=-1" in c.domain_problems(fp32_q(output_zero_point=-1, output_min=0, output_max=255),
                                                       1, 2, "u8")[0]
    assert c.domain_problems(fp32_q(output_min=5, output_max=5), 1, 2, "s8") == []
    assert "output_min=6 > output_max=5" in c.domain_problems(fp32_q(output_min=6, output_max=5), 1, 2, "s8")[0]


def test_bad_input_messages():
    c = output_contract("xnnpack-fp32")
    q = fp32_q()
    del q["scale"]
    assert c.domain_problems(q, 1, 2, "s8") == ["scale: missing (this contract needs bias, scale, output_zero_point, "
                                                "output_min, output_max)"]
    assert "expected float32 (2,), got dtype float64" in c.domain_problems(fp32_q(scale=np.ones(2)), 1, 2, "s8")[0]
    assert "expected shape (2,)" in c.domain_problems(fp32_q(bias=np.zeros(3, np.int32)), 1, 2, "s8")[0]
    assert "expected one integer" in c.domain_problems(fp32_q(output_zero_point=1.5), 1, 2, "s8")[0]
    assert "is for s8, u8" in c.domain_problems(fp32_q(), 1, 2, "f32")[0]


def test_fixed_point_domains():
    def fq(m, s, **over):
        return {"bias": np.zeros(1, np.int32), "multiplier": np.array([m], np.int32), "shift": np.array([s], np.int32),
                "output_zero_point": 0, "output_min": -128, "output_max": 127, **over}
    single, double, gl = (output_contract(n) for n in ("tflite-single-rounding", "tflite-double-rounding",
                                                      "gemmlowp-fixedpoint"))
    assert single.domain_problems(fq(1 << 30, 30), 1, 1, "s8") == []
    assert single.domain_problems(fq(1 << 30, -31), 1, 1, "s8") == []
    assert "shift[0]=31: outside [-31, 30]" in single.domain_problems(fq(1 << 30, 31), 1, 1, "s8")[0]
    assert "multiplier[0]=-1: below 0" in double.domain_problems(fq(-1, 0), 1, 1, "s8")[0]
    assert gl.domain_problems(fq(1 << 30, 0), 1, 1, "s8") == []
    assert "shift[0]=1: outside [-31, 0]" in gl.domain_problems(fq(1 << 30, 1), 1, 1, "s8")[0]
    fb = output_contract("fbgemm-requantize-fixed")
    u8 = dict(output_min=0, output_max=255)
    assert fb.domain_problems(fq(1 << 30, -20, **u8), 1, 1, "u8") == []
    p = fb.domain_problems(fq(1 << 30, -20, output_min=3, output_max=200, output_zero_point=7), 1, 1, "u8")
    assert any("output_max=200" in m for m in p) and any("output_min=3" in m for m in p)


def test_avxvnni_corner_is_named_and_refused():
    # a 1x1 accumulator; scale at the documented limit, a large negative bias, a negative output zero point
    c = output_contract("xnnpack-fp32")
    q = fp32_q(N=1, bias=np.array([-(1 << 30)], np.int32), scale=np.array([BELOW_256], F32), output_zero_point=-1)
    assert c.domain_problems(q, 1, 1, "s8") == []
    acc = np.zeros((1, 1), np.int32)
    wrapped = OUTPUT_STAGES["xnnpack-fp32-avxvnni-wrap"](acc, q, "s8")
    ok, matched, expected = c.judge(wrapped, acc, q, "s8")
    assert (ok, matched, int(wrapped[0, 0]), int(expected[0, 0])) == (False, "xnnpack-fp32-avxvnni-wrap", 127, -128)
    ok, matched, _ = c.judge(OUTPUT_STAGES["xnnpack-fp32-neonv8"](acc, q, "s8"), acc, q, "s8")
    assert ok and matched == "xnnpack-fp32-lrintf"        # equal to the first accepted result
    ok, matched, _ = c.judge(np.full((1, 1), 5, np.int8), acc, q, "s8")
    assert (ok, matched) == (False, None)


def test_rndnu_wrapping_preshift_is_named():
    c = output_contract("xnnpack-rndnu")
    q = fp32_q(N=1, scale=np.array([BELOW_256], F32))
    acc = np.array([[1 << 23]], np.int32)
    ok, matched, _ = c.judge(OUTPUT_STAGES["xnnpack-rndnu-neon-wrap"](acc, q, "s8"), acc, q, "s8")
    assert (ok, matched) == (False, "xnnpack-rndnu-neon-wrap")


def test_tflite_flavours_are_named():
    c = output_contract("tflite-double-rounding")
    # -3 * 2^30 / 2^31 / 2^1: -0.75 rounds ... a negative tie at the second step separates G from U
    q = {"bias": np.zeros(1, np.int32), "multiplier": np.array([1 << 30], np.int32), "shift": np.array([-1], np.int32),
         "output_zero_point": 0, "output_min": -128, "output_max": 127}
    acc = np.array([[-2]], np.int32)                         # SRDHM(-2, 2^30) = -1, then -1 / 2: a negative tie
    g, u = (OUTPUT_STAGES[n](acc, q, "s8") for n in ("tflite-G", "tflite-U"))
    assert int(g[0, 0]) != int(u[0, 0])
    assert c.judge(g, acc, q, "s8")[:2] == (True, "tflite-G")
    assert c.judge(u, acc, q, "s8")[:2] == (False, "tflite-U")


CASES = [(name, t) for name, c in OUTPUT_CONTRACTS.items() for t in c.out_types]


@pytest.mark.parametrize("name,out_type", CASES, ids=[f"{n}-{t}" for n, t in CASES])
def test_draw_stays_inside_outside_stays_out_simplifications_inside(name, out_type):
    c = output_contract(name)
    rng = np.random.default_rng(sum(map(ord, name + out_type)))
    for seed in range(40):
        M, N = int(rng.integers(1, 4)), int(rng.integers(1, 6))
        for style in STYLES:
            q = c.draw(np.random.default_rng(seed), M, N, out_type, style, -(1 << 20), 1 << 20)
            assert c.domain_problems(q, M, N, out_type) == [], (style, seed, q)
            if hasattr(c, "judge_blocks"):          # a blockwise (qb4w) contract judges A and B, not an int32
                A, B = rng.integers(-128, 128, (M, 64)).astype(np.int8), rng.integers(-8, 8, (64, N)).astype(np.int8)
                geometry = BlockGeometry(32, 8)
                assert c.judge_blocks(c.expected_blocks(A, B, q, out_type, geometry), A, B, q, out_type, geometry)[0]
            else:
                if OUTPUT_STAGES[c.accepted[0]].reads_rows:      # qd8-qc2w: the rows' sums and kc, derived from A
                    q = {**q, "a_row_sum": rng.integers(-(1 << 12), 1 << 12, M), "kc": 32}
                acc = rng.integers(-(1 << 20), 1 << 20, (M, N)).astype(np.int32)
                out = OUTPUT_STAGES[c.accepted[0]].compute(acc, q, out_type)
                assert c.judge(out, acc, q, out_type)[0]
            for s in c.simplifications(q, out_type):
                assert c.domain_problems(s, M, N, out_type) == [], (style, seed, s)
        o = c.outside(np.random.default_rng(seed), M, N, out_type)
        assert c.domain_problems(o, M, N, out_type), o


def test_simplifications_move_toward_simple_values():
    c = output_contract("xnnpack-fp32")
    q = fp32_q(bias=np.array([-9000, 7], np.int32), scale=np.array([0.3, 3.0], F32), output_zero_point=-5,
               output_min=-100, output_max=100)
    simpler = list(c.simplifications(q, "s8"))
    assert any(s["bias"].tolist() == [0, 7] for s in simpler)
    assert any(s["output_zero_point"] == 0 for s in simpler)
    assert any((s["output_min"], s["output_max"]) == (-128, 127) for s in simpler)
    assert any(s["scale"].tolist() == [0.25, 4.0] for s in simpler)


def _wraps(q, N):
    acc = np.zeros((1, N), np.int32)
    return not np.array_equal(OUTPUT_STAGES["xnnpack-fp32-avxvnni-wrap"](acc, q, "s8"),
                              OUTPUT_STAGES["xnnpack-fp32-lrintf"](acc, q, "s8"))


def test_limits_and_ends_include_the_avxvnni_corner():
    c = output_contract("xnnpack-fp32")
    hits = {style: sum(_wraps(c.draw(np.random.default_rng(seed), 1, 4, "s8", style), 4) for seed in range(10))
            for style in ("ends", "limits")}
    assert hits["limits"] >= 1 and hits["ends"] >= 1, hits


def test_search_finds_the_avxvnni_corner_within_100_examples():
    c = output_contract("xnnpack-fp32")
    found = find(c.strategy(1, 4, "s8"), lambda q: _wraps(q, 4),
                 settings=settings(max_examples=100, database=None, derandomize=True,
                                   suppress_health_check=list(HealthCheck)))
    assert c.domain_problems(found, 1, 4, "s8") == []


def test_qb4w_contract_accepts_the_kernels_orders_and_names_the_others():
    """qd8-f32-qb4w accepts the four float orders XNNPACK's blockwise kernels use and names the tester's reference
    order (not a kernel's) where it differs from them; a result with every block scaled by the first block's scales
    is neither. qd8-bf16-qb4w accepts each store conversion a bf16 kernel uses."""
    from lowp.kernels.models.quant import qb4w_output
    c, geometry = output_contract("qd8-f32-qb4w"), BlockGeometry(32, 8)
    rng = np.random.default_rng(4)
    named = set()
    for seed in range(20):
        A, B = rng.integers(-128, 128, (2, 128)).astype(np.int8), rng.integers(-8, 8, (128, 8)).astype(np.int8)
        q = c.draw(np.random.default_rng(seed), 2, 8, "f32", "typical")
        for stage in c.accepted:
            assert c.judge_blocks(qb4w_output(stage, A, B, q, "f32", bl=32, kr=8), A, B, q, "f32", geometry)[0]
        ok, matched, _ = c.judge_blocks(qb4w_output("qb4w-reference", A, B, q, "f32", bl=32, kr=8), A, B, q, "f32",
                                        geometry)
        named |= {matched} if not ok else set()
        first = {**q, "b_block_scale": np.repeat(q["b_block_scale"][:, :1], 4, axis=1)}
        wrong = qb4w_output("qb4w-unfused", A, B, first, "f32", bl=32, kr=8)
        assert c.judge_blocks(wrong, A, B, q, "f32", geometry)[:2] == (False, None)
    assert named == {"qb4w-reference"}
    bf16 = output_contract("qd8-bf16-qb4w")
    assert {name.split(":")[1] for name, accepted, _ in bf16.results(A, B, q, "bf16", geometry) if accepted} == {
        "rne", "rne-nonan", "rne-daz"}


def test_accumulators_computed_once_are_each_cases_own():
    """accumulators() keeps small cases' results by their contents (a check draws from them, then judges on them):
    a case with other operands or zero points gets its own, and a caller that changes what it got changes no
    later answer."""
    from lowp.conformance.contracts.output import exact_accumulators
    from lowp.kernels.models.quant import zero_point_corrected
    from lowp.conformance.contracts.int32 import EXACT
    rng = np.random.default_rng(5)
    A, B = rng.integers(-128, 128, (3, 7)).astype(np.int8), rng.integers(-128, 128, (7, 4)).astype(np.int8)
    per_row = np.array([3, -1, 0], np.int32)
    for q in ({"a_zero_point": 3}, {"a_zero_point": per_row}, {"a_zero_point": 3, "b_zero_point": 2}):
        want = zero_point_corrected(EXACT.compute(A, B).astype(np.int64), A, B, q)
        got = exact_accumulators(A, B, q)
        assert np.array_equal(got, want)
        got[...] = 0
        assert np.array_equal(exact_accumulators(A, B, q), want)
    B2 = B.copy()
    B2[0, 0] ^= 1
    q = {"a_zero_point": 3}
    assert not np.array_equal(exact_accumulators(A, B2, q), exact_accumulators(A, B, q))
