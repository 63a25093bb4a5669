"""Output-stage edge cases (conformance/search/stage_edges.py): each intermediate of a requantizing stage is put at its
saturation or wrap edge by parameters and biases solved from the stage's model; checked against the stages of
lowp.isa_models.requant (not against the solver), and on a one-bug rndnu16 kernel of lowp's own whose int16
zero-point add wraps, which the search without these cases passes and with them fails."""
from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from lowp.conformance.contracts.output import OUTPUT_CONTRACTS, output_contract
from lowp.conformance.search import stage_edges as se
from lowp.conformance.search.quantized import draw_params, exact_accumulators
from lowp.isa_models.requant import OUT_RANGE, OUTPUT_STAGES, sqadd_s16

sys.path.insert(0, str(Path(__file__).parent / "stage_bugs"))
from kernels import entry  # noqa: E402  (tests/stage_bugs/kernels.py)


class Kern:
    """What draw_params reads of a kernel: a lowp driver-ABI kernel (no XNNPACK params, no pins)."""
    def __init__(self, output, c_type, a_dtype=np.int8):
        self.output, self.c_type, self.xnnpack, self.quant, self.signature = output, c_type, None, {}, "quant-gemm"
        self.a_dtype = self.b_dtype = a_dtype
        self.quantized, self.float_output = True, False


def edge_case(contract, out_type, edge, seed=1, N=8, K=3):
    kern = Kern(contract, out_type, np.uint8 if out_type == "u8" else np.int8)
    rng = np.random.default_rng(seed)
    A = rng.integers(0, 100, (1, K)).astype(kern.a_dtype)
    B = rng.integers(0, 100, (K, N)).astype(kern.b_dtype)
    q = draw_params(kern, A, B, seed, "typical", edge=edge)
    return kern, A, B, q, exact_accumulators(A, B, q)


def integer_contracts():
    return [(c.name, t) for c in OUTPUT_CONTRACTS.values() if se.stage_family(c) for t in c.out_types]


@pytest.mark.parametrize("contract,out_type", integer_contracts())
def test_every_edge_case_is_in_the_domain_and_every_stage_computes_it(contract, out_type):
    """The solved parameters stay inside the contract's documented domain, and every accepted stage is defined on
    them (an edge case no stage can compute would be a case the domain does not promise)."""
    c = output_contract(contract)
    for name in se.edge_names(Kern(contract, out_type), "claimed"):
        kern, A, B, q, acc = edge_case(contract, out_type, se.edge_of(name))
        assert not c.domain_problems(q, 1, 8, out_type), (name, c.domain_problems(q, 1, 8, out_type))
        for stage in c.accepted:
            OUTPUT_STAGES[stage].compute(acc, q, out_type)


def test_the_rndnu16_zero_point_add_reaches_its_int16_edge():
    """The case puts (x16 * m + 2^14) >> 15 + zp on both sides of 32767: the stage's output is 255 on all of its
    columns, and with the zero point's add wrapping instead (as a kernel with ADD for SQADD computes it) some
    columns fall to 0, the first at the edge's first x; the one before it stays 255 under both."""
    kern, A, B, q, acc = edge_case("xnnpack-rndnu16", "u8", "zero_point_add_high")
    x = acc[0] + q["bias"].astype(np.int64)
    high = np.array([se.rndnu16_high(int(v), q) for v in x])
    zp = int(q["output_zero_point"])
    sums = high + zp
    assert (sums == 32768).any() and (sums <= 32767).any(), sums        # past the edge, and inside it
    assert (OUTPUT_STAGES["xnnpack-rndnu16"].compute(acc, q, "u8") == 255).all()
    wrapped = (sums + 32768) % 65536 - 32768
    assert (np.clip(wrapped, q["output_min"], q["output_max"]) == 0).any()
    assert (sqadd_s16(high, zp) == np.minimum(sums, 32767)).all()      # the model's SQADD saturates exactly there


def test_the_old_draws_never_reach_the_rndnu16_zero_point_edge():
    """The contract's own draws (every style, 3000 seeds) never put rndnu16's int16 zero-point add past 32767: its
    multiplier must be within zp of 2^15 while the pre-shifted value is at int16's top."""
    c = output_contract("xnnpack-rndnu16")
    from lowp.isa_models.requant import xnnpack_rndnu16_params
    reached = 0
    for seed in range(3000):
        rng = np.random.default_rng(seed)
        acc = rng.integers(-(1 << 20), 1 << 20, (1, 8))
        q = c.draw(rng, 1, 8, "u8", ("typical", "ends", "limits")[seed % 3], int(acc.min()), int(acc.max()))
        m = int(np.asarray(xnnpack_rndnu16_params(q["scale"][0])["multiplier"]).reshape(-1)[0])
        top = (32767 * m + (1 << 14)) >> 15             # the largest value SQADD is handed at this multiplier
        reached += top + int(q["output_zero_point"]) > 32767
    assert reached < 30, reached          # 9 of 3000: a few in a thousand, and only where x16 is at its top


def test_edge_values_sit_on_the_edge():
    """edge_xs: the last x the intermediate holds and the first it does not, per side, checked on the fp32 stage's
    own arithmetic (float32 product, round to nearest even) at the largest scale."""
    q = {"scale": np.full(4, se.LARGEST_BELOW_256, np.float32)}
    xs = se.edge_xs(lambda x: se.fp32_rounded(x, q), (-32768, 32767), -(1 << 31), (1 << 31) - 1)
    v = [float(np.rint(np.float64(np.float32(x) * q["scale"][0]))) for x in xs]
    assert v[0] <= 32767 < v[1] and v[4] >= -32768 > v[5], (xs, v)


# ------------------------------------------------------------------------------- a one-bug kernel of lowp's own

@pytest.fixture(scope="module")
def rndnu16_kernels(tmp_path_factory):
    from lowp.kernels import load_toml
    from lowp.kernels.registry import _KERNELS
    text = "".join(entry("rndnu16", bug) for bug in (0, 1, 2))
    toml = tmp_path_factory.mktemp("stage_edges") / "stage_edges.toml"
    toml.write_text(text)
    for kernel in tomllib.loads(text)["kernel"]:
        _KERNELS.pop(kernel["name"], None)
    return {k.name: k for k in load_toml(toml)}


def claimed(kernels, name, monkeypatch=None, edges=True):
    from lowp.conformance.run.checks import Check, run_check
    from lowp.kernels import executor
    k = kernels[name]
    reason = executor(k).unavailable()
    if reason:
        pytest.skip(f"{name}: {reason}")
    if not edges:
        import lowp.conformance.search.cases as cases
        monkeypatch.setattr(cases, "stage_edge_cases", lambda kernel, domain: [])
    return run_check(Check(name, k.output, "claimed", True), lambda e: None, examples=40, grid=False)


@pytest.mark.native
def test_a_wrapping_rndnu16_zero_point_add_passes_without_the_edges_and_fails_with_them(rndnu16_kernels,
                                                                                        monkeypatch):
    """The whole check (generated cases and a 40-example search) FAILs; the edge case alone FAILs on replay while
    the correct kernel PASSes it; without the edge cases the same check PASSes."""
    from lowp.conformance.run.checks import replay
    from lowp.conformance.search.cases import cases_for
    row = claimed(rndnu16_kernels, "sb_rndnu16_1")
    assert row["verdict"] == "FAIL", row
    assert "xnnpack-rndnu16 with the zero point added wrapping in int16 (ADD for SQADD)" in row["cause"], row["cause"]
    for bug, verdict in ((1, "FAIL"), (0, "PASS")):
        k = rndnu16_kernels[f"sb_rndnu16_{bug}"]
        case = next(c for c in cases_for(k, k.output, "claimed") if c.name == "stage_zero_point_add_high")
        assert replay(case.id)["verdict"] == verdict, case.id
    old = claimed(rndnu16_kernels, "sb_rndnu16_1", monkeypatch, edges=False)
    assert old["verdict"] == "PASS", old.get("cause")


@pytest.mark.native
@pytest.mark.parametrize("bug,verdict", [(0, "PASS"), (2, "FAIL")])
def test_the_correct_rndnu16_kernel_passes_the_edges_and_a_wrapping_narrowing_fails(rndnu16_kernels, bug, verdict):
    row = claimed(rndnu16_kernels, f"sb_rndnu16_{bug}")
    assert row["verdict"] == verdict, row.get("cause")
    if bug == 2:        # named by its stage family (conformance/diagnosis/stage_families.py), not "no known variant"
        assert "with the pre-shifted value narrowed to int16 wrapping (XTN for SQXTN)" in row["cause"], row["cause"]
