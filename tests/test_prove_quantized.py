"""lowp prove on requantizing XNNPACK-ABI kernels: the split proof (the accumulator each output factors through,
then the output stage on every value it takes), its pieces (factor, sweep.evaluate, canonical), the correct kernels
PROVED, one-line output-stage bugs REFUTED with counterexamples the CPU reproduces, parameters that hide a bug
PROVED (a proof is for its parameters), and the command's --params."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

z3 = pytest.importorskip("z3")

from lowp.cli import main  # noqa: E402
from lowp.conformance import prove as P  # noqa: E402
from lowp.conformance.prove import quantized as pq  # noqa: E402
from lowp.isa_models import x86
from lowp.isa_models.symbolic import sweep  # noqa: E402
from lowp.isa_models.symbolic.bitvec import SymArray, SymInt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
QUANTIZED = ROOT / "kernels" / "quantized" / "x86.toml"
sys.path.insert(0, str(ROOT))
from tests.conftest import registered  # noqa: E402
from tests.stage_bugs.kernels import entry  # noqa: E402

# A wrap the seeded kernels show only where the scaled accumulator leaves int32: a bias far below zero, the
# largest scale XNNPACK takes and a negative zero point.
WRAPPING = {"bias": [-10_000_000] * 16, "scale": [255.0] * 16, "output_zero_point": -1, "output_min": -128,
            "output_max": 127, "a_zero_point": 0, "b_zero_point": 0}


@pytest.fixture(scope="module")
def quantized():
    with registered(QUANTIZED) as kernels:
        yield kernels


@pytest.fixture(scope="module")
def stage_bugs(tmp_path_factory):
    path = tmp_path_factory.mktemp("stage_bugs") / "avx2_fp32.toml"
    path.write_text("".join(entry("avx2_fp32", bug) for bug in range(13)))
    with registered(path) as kernels:
        yield kernels


# -- the pieces ------------------------------------------------------------------------------------------------------

def test_evaluate_matches_the_numpy_models():
    """The fp32 requantization's term on every sampled int32, as sweep.evaluate computes it, equals the numpy
    models run on the same values."""
    x = z3.BitVec("x", 32)
    lanes = SymArray.of([SymInt(x, -(1 << 31), (1 << 31) - 1)] * 8, np.int32)
    scale, cap, floor = np.full(8, 0.0123, np.float32), np.full(8, 120.0, np.float32), np.full(32, -100, np.int8)

    def stage(v):
        s = x86.vcvtps2dq(x86.vminps(x86.vmulps(x86.vcvtdq2ps(v), scale), cap))
        p = x86.vpackssdw(s, s)
        return x86.vpmaxsb(x86.vpacksswb(p, p), floor)

    term = stage(lanes).data[0].bits(8)
    values = np.arange(-(1 << 31), 1 << 31, 4099, dtype=np.int64)
    got = sweep.evaluate(term, {"x": values.astype(np.uint64) & np.uint64(0xFFFFFFFF)})
    want = stage(np.repeat(values.astype(np.int32)[:, None], 8, axis=1))[:, 0]
    assert (got.astype(np.uint8).view(np.int8) == want).all()


def test_evaluate_integer_operations():
    x = z3.BitVec("x", 16)
    term = z3.If(x < 100, z3.ZeroExt(4, z3.Extract(15, 4, x * 3 + 7)), z3.LShR(x, 3) ^ 0x5A)
    values = np.arange(-(1 << 15), 1 << 15, dtype=np.int64)
    got = sweep.evaluate(term, {"x": values.astype(np.uint64) & np.uint64(0xFFFF)})
    u = values & 0xFFFF
    want = np.where(values < 100, ((u * 3 + 7) & 0xFFFF) >> 4, (u >> 3) ^ 0x5A)
    assert (got == want).all()


def test_evaluate_refuses_what_it_does_not_model():
    f = z3.FP("f", z3.Float32())
    with pytest.raises(NotImplementedError, match="rounding mode"):
        sweep.evaluate(z3.fpToIEEEBV(z3.fpMul(z3.RTP(), f, f)), {"f": np.zeros(4, np.float32)})


def _sum(*names):
    vs = [z3.SignExt(24, z3.BitVec(n, 8)) for n in names]
    return vs[0] * vs[1] + vs[2] * vs[3]


def test_factor_finds_the_accumulator():
    s = _sum("a0", "b0", "a1", "b1")
    out = z3.If(s > 1000, z3.BitVecVal(127, 8), z3.Extract(7, 0, s >> 3))
    X, F = pq.factor(out)
    assert X.eq(s)
    assert [str(v) for v in P.variables(F)] == ["x"]


def test_factor_refuses_two_accumulators():
    s, t = _sum("a0", "b0", "a1", "b1"), _sum("a2", "b2", "a3", "b3")
    with pytest.raises(pq.NotFactored, match="more than one path"):
        pq.factor(z3.If(s > 0, z3.Extract(7, 0, t), z3.BitVecVal(0, 8)))


def test_canonical_ignores_argument_order_only():
    p, q = z3.Bool("p"), z3.Bool("q")
    x = z3.BitVec("x", 8)
    one = z3.If(z3.Or(p, q), x, x + 1)
    two = z3.If(z3.Or(q, p), x, x + 1)
    three = z3.If(z3.Or(q, p), x, x + 2)
    digest = [sweep.canonical(sweep.post_order(t)) for t in (one, two, three)]
    assert digest[0] == digest[1] != digest[2]


# -- proofs ------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, shape", [("qs8_qc8w_gemm_4x8c8_fp32_avx2", (2, 8, 8)),
                                         ("qs8_qc8w_gemm_4x8c8_fp32_avx2", (5, 9, 11)),
                                         ("qu8_gemm_2x8c8_fp32_avx2", (2, 8, 16)),
                                         ("qs8_qc8w_gemm_4x16c4_fp32_avx512vnni", (1, 16, 8))])
def test_requantizing_kernel_proved(quantized, name, shape):
    """Any x86-64 host: the proof runs no kernel code (the VNNI kernel too)."""
    proof = P.prove(quantized[name], shape, lemma_cache=False)
    assert proof.verdict == P.PROVED, proof.summary()
    assert proof.variant.startswith("exact + xnnpack-fp32")
    assert proof.outputs == shape[0] * shape[1] and proof.sweep_values > 1000
    assert set(proof.params) >= {"bias", "scale", "output_zero_point"}


# (bug, parameter style): each bug shows under that style's parameters (docs/prove.md: a proof is for its parameters)
REFUTED = [(1, "typical"), (5, "typical"), (6, "typical"), (7, "typical"), (8, "typical"), (11, "typical"),
           (2, "ends"), (3, "ends"), (4, "ends"), (9, "ends"), (10, "ends")]


@pytest.mark.parametrize("bug, style", REFUTED)
def test_output_stage_bug_refuted_and_confirmed(stage_bugs, bug, style):
    proof = P.prove(stage_bugs[f"sb_avx2_fp32_{bug}"], (2, 8, 8), quant=style, lemma_cache=False)
    assert proof.verdict == P.REFUTED, proof.summary()
    assert "confirmed on native" in proof.replay
    i, j = proof.counterexample["element"]
    assert proof.counterexample["C"][i][j] != proof.counterexample["expected"][i][j]


def test_a_proof_is_for_its_parameters(stage_bugs, tmp_path):
    """Bug 12 (the zero point added with a wrapping VPADDD before the pack) is right wherever the scaled
    accumulator stays inside int32: PROVED for the tester's parameters, REFUTED (and reproduced) for ones that
    reach the wrap."""
    k = stage_bugs["sb_avx2_fp32_12"]
    assert P.prove(k, (1, 8, 8), lemma_cache=False).verdict == P.PROVED
    wrapping = pq.params_from_json({key: value[:8] if isinstance(value, list) else value
                                    for key, value in WRAPPING.items()})
    proof = P.prove(k, (1, 8, 8), quant=wrapping, lemma_cache=False)
    assert proof.verdict == P.REFUTED and "confirmed on native" in proof.replay, proof.summary()


def test_seeded_vnni_wrap_found(quantized):
    """The VNNI kernel's seeded wrap (VPADDD of the zero point after VCVTPS2DQ): a counterexample on parameters
    that reach INT_MIN, replayed where an executor for AVX-512 VNNI exists (natively or on Bochs)."""
    proof = P.prove(quantized["qs8_qc8w_gemm_4x16c4_fp32_avx512vnni"], (1, 16, 4),
                    quant=pq.params_from_json(WRAPPING), lemma_cache=False)
    assert proof.counterexample is not None, proof.summary()
    assert proof.verdict == P.REFUTED or "not confirmed" in proof.replay, proof.summary()


def test_command_takes_parameters_from_a_file(quantized, tmp_path, capsys):
    params = tmp_path / "q.json"
    params.write_text(json.dumps({key: value[:8] if isinstance(value, list) else value
                                  for key, value in WRAPPING.items()} | {"bias": [100] * 8, "scale": [0.01] * 8}))
    out = tmp_path / "out"
    code = main(["prove", "--kernel", "qs8_qc8w_gemm_4x8c8_fp32_avx2",
                 "--shape", "1x8x8", "--params", str(params), "--out", str(out)])
    assert code == 0, capsys.readouterr().out
    [row] = json.loads((out / "prove.json").read_text())
    assert row["verdict"] == "PROVED" and row["params"]["bias"] == [100] * 8
    assert "accumulator values" in row["summary"]
    assert '"bias": [100, 100' in (out / "prove.md").read_text().split("## Quantization parameters")[1]


def test_bad_parameters_are_named(quantized, tmp_path, capsys):
    missing = tmp_path / "q.json"
    missing.write_text(json.dumps({"bias": [0] * 8}))
    code = main(["prove", "--kernel", "qs8_qc8w_gemm_4x8c8_fp32_avx2",
                 "--shape", "1x8x8", "--params", str(missing)])
    assert code == 3
    assert "scale" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main(["prove", "--kernel", "x", "--params", str(tmp_path / "nowhere.json")])
    assert e.value.code == 2
