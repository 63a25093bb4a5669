"""Requantizing kernels through the conformance suite, as `lowp conformance --kernels` runs them: the generator
draws the quantization parameters with the operands and finds the seeded AVX-VNNI corner on its own, shrunk to
1x1x1 with the parameters that trigger it, named by the known stage, replayable from the report; correct kernels
pass their output-stage claims natively and emulated; a bad output claim or prototype is named before a case runs."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lowp.conformance import check
from lowp.conformance.run.checks import Check, replay, run_check
from lowp.conformance.search.quantized import from_json
from lowp.kernels import KernelConfigError, executor, load_toml

from .conftest import load_kernels

QUANTIZED = Path(__file__).resolve().parents[1] / "kernels" / "quantized"
VNNI, AVX2 = "qs8_qc8w_gemm_4x16c4_fp32_avx512vnni", "qs8_qc8w_gemm_4x8c8_fp32_avx2"
NEON_C = "xnn_qs8_rndnu_4x8_neon_mlal_lane"


@pytest.fixture(scope="module")
def kernels():
    return {**load_kernels(QUANTIZED / "x86.toml"), **load_kernels(QUANTIZED / "aarch64.toml")}


def _runnable(k):
    reason = executor(k).unavailable()
    if reason:
        pytest.skip(f"{k.name}: {reason}")


def test_generator_finds_the_seeded_corner_shrunk_to_1x1x1(kernels):
    _runnable(kernels[VNNI])
    row = run_check(Check(VNNI, "xnnpack-fp32", "claimed", True), lambda e: None, examples=100)
    assert row["verdict"] == "FAIL" and row["executed"] == row["cases"] > 100
    assert "xnnpack-fp32-avxvnni-wrap" in row["cause"]
    cx = row["counterexample"]
    assert cx["shape"] == [1, 1, 1]
    q = from_json(cx["quant"])
    # the corner: a scaled accumulator at or below -2^31 and a negative output zero point
    assert q["output_zero_point"] < 0
    A, B = np.asarray(cx["A"], np.int64), np.asarray(cx["B"], np.int64)
    acc = int(((A - q["a_zero_point"]) @ (B - q["b_zero_point"]))[0, 0] + q["bias"][0])
    assert np.float32(acc) * q["scale"][0] <= -2.0 ** 31
    assert cx["actual"] == [[127]] and cx["expected"] == [[-128]]
    # the replay of the stored counterexample reproduces it, parameters included
    again = replay(row["id"], {row["id"]: json.loads(json.dumps(row))})
    assert again["verdict"] == "FAIL" and again["actual"] == [[127]]


def test_the_seeded_kernel_still_equals_its_own_model(kernels):
    _runnable(kernels[VNNI])
    assert check(VNNI, "model", domain="full", examples=40)["verdict"] == "PASS"


@pytest.mark.parametrize("name", [AVX2, "ruy_style_gemm_avx2", "qd8_f32_qc8w_gemm_4x8c8_avx2"])
def test_correct_x86_kernels_pass_their_output_claims(kernels, name):
    _runnable(kernels[name])
    row = check(name, examples=60)
    assert row["verdict"] == "PASS" and row["executed"] == row["cases"]
    assert set(row["matched"]) <= set(__import__("lowp.conformance.contracts.output", fromlist=["x"])
                                       .output_contract(kernels[name].output).accepted)


@pytest.mark.emulated
def test_emulated_rndnu_kernel_passes_its_output_claim(kernels):
    _runnable(kernels[NEON_C])
    row = check(NEON_C, examples=30)
    assert row["verdict"] == "PASS" and row["path"].startswith("executed:") and "sqdmulh" in row["path"]


def test_outside_probe_draws_parameters_beyond_the_documented_domain(kernels):
    from lowp.conformance.search.quantized import domain_problems, draw_params
    k = kernels[AVX2]
    A, B = np.ones((2, 3), np.int8), np.ones((3, 5), np.int8)
    for seed in range(10):
        q = draw_params(k, A, B, seed, "typical", "outside")
        assert domain_problems(k, q, 2, 5), q
        assert not domain_problems(k, draw_params(k, A, B, seed, "ends"), 2, 5)


ENTRY = """
[[kernel]]
name = "{name}"
target = "x86-64"
source = "{source}"
symbol = "{symbol}"
signature = "{signature}"
a_type = "s8"
b_type = "s8"
c_type = "{c_type}"
cflags = ["-O1"]
packing = "none"
tile = {{mr = 1, nr = 1, kr = 1}}
contract = "exact"
{output}
domain = {{a = [-128, 127], b = [-128, 127]}}
model = {{output = "xnnpack-fp32-x86"}}
"""


def _entry(tmp_path, name, *, signature="quant-gemm", c_type="s8", output='output = "xnnpack-fp32"',
           body="void {s}(long M, long N, long K, const void *A, const void *B, void *C, void *w, const void *q) {{}}\n"
                "unsigned long {p}_workspace(long M, long N, long K) {{ return 0; }}"):
    symbol = f"{name}_gemm"
    src = tmp_path / f"{name}.c"
    src.write_text(body.format(s=symbol, p=name))
    toml = tmp_path / f"{name}.toml"
    toml.write_text(ENTRY.format(name=name, source=src.name, symbol=symbol, signature=signature, c_type=c_type,
                                 output=output))
    return toml


@pytest.mark.parametrize("output,c_type,expect", [
    ('output = "xnnpack-fp33"', "s8", "unknown output-stage contract 'xnnpack-fp33'; did you mean 'xnnpack-fp32'"),
    ("", "s8", "claims an output-stage contract"),
    ('output = "xnnpack-fp32"', "f32", "produces s8, u8, not f32"),
])
def test_bad_output_claims_are_named(tmp_path, forget_kernels, output, c_type, expect):
    from lowp.conformance.search.validate import validate_kernels
    name = f"badout_{abs(hash((output, c_type))) % 10 ** 6}"
    ks = load_toml(_entry(tmp_path, name, c_type=c_type, output=output))
    with pytest.raises(KernelConfigError, match=expect.replace("(", r"\(").replace(")", r"\)")):
        validate_kernels(ks)


def test_schema_refuses_a_c_type_the_signature_cannot_return(tmp_path, forget_kernels):
    with pytest.raises(KernelConfigError, match="signature 'quant-gemm' returns the requantized output"):
        load_toml(_entry(tmp_path, "bad_ctype", c_type="s32"))


def test_a_ukernel_with_the_wrong_prototype_is_named_before_any_case(tmp_path, forget_kernels):
    from lowp.conformance.search.validate import build_problems
    ks = load_toml(_entry(tmp_path, "wrong_proto", body="void {s}(long M, long N, long K, const void *A, "
                          "const void *B, void *C, void *w) {{}}\nunsigned long {p}_workspace(long M, long N, "
                          "long K) {{ return 0; }}"))
    problems = [str(p) for p in build_problems(ks)]
    assert len(problems) == 1
    assert "wrong_proto_gemm has the wrong prototype for signature 'quant-gemm': expected 8 parameters" in problems[0]
    assert "found 7" in problems[0]


def _pinned_entry(tmp_path, name, pins):
    src = QUANTIZED / "qs8_qc8w_gemm_4x8c8_fp32_avx2.c"
    text = (QUANTIZED / "x86.toml").read_text().split("[[kernel]]")[1]
    text = text.replace('name = "qs8_qc8w_gemm_4x8c8_fp32_avx2"', f'name = "{name}"')
    text = text.replace('source = "qs8_qc8w_gemm_4x8c8_fp32_avx2.c"', f'source = "{src}"')
    text = text.replace('"-I../include"', f'"-I{QUANTIZED.parent / "include"}"')
    toml = tmp_path / f"{name}.toml"
    toml.write_text("[[kernel]]" + text + f"\nquant = {pins}\n")
    return toml


def test_pinned_parameters_hold_in_every_case(tmp_path, forget_kernels):
    from lowp.conformance.search.quantized import draw_params
    from lowp.conformance.search.validate import validate_kernels
    (k,) = load_toml(_pinned_entry(tmp_path, "pinned_zp", "{output_zero_point = -1, output_min = -100}"))
    validate_kernels([k])
    A, B = np.ones((3, 4), np.int8), np.ones((4, 9), np.int8)
    for seed in range(20):
        for style in ("typical", "ends", "limits"):
            q = draw_params(k, A, B, seed, style)
            assert q["output_zero_point"] == -1 and q["output_min"] == -100


@pytest.mark.parametrize("pins,key,expect", [
    ("{output_zero_point = 300}", "quant.output_zero_point", "outside the documented domain"),
    ("{zero_point = 1}", "quant.zero_point", "'zero_point' is not a parameter of 'xnnpack-fp32'"),
])
def test_bad_pinned_parameters_are_named(tmp_path, forget_kernels, pins, key, expect):
    from lowp.conformance.search.validate import validate_kernels
    (k,) = load_toml(_pinned_entry(tmp_path, f"badpin_{abs(hash(pins)) % 10 ** 6}", pins))
    with pytest.raises(KernelConfigError) as e:
        validate_kernels([k])
    assert e.value.key == key and expect in str(e.value)
