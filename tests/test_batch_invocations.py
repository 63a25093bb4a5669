"""The batched path of quantized kernels (docs/batch.md, "Invocation batches"): a requantizing or float-output
kernel's generated cases, each with its own parameters and ABI options, run natively in batches of one invocation
layout (guard.c lowp_call_invocations). A batch returns per case what run() returns, and a batched check and a
per-case check (LOWP_BATCH=0's path) give the same rows, on correct XNNPACK-style kernels (GEMM, IGEMM, qd8, qu8,
4-bit) and on kernels with one planted bug each (tests/stage_bugs: output stages; tests/xnnpack: strides, a_offset,
store order), which must still be caught."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lowp.conformance.run import batch
from lowp.conformance.run.checks import Check, plan, run_check
from lowp.kernels.invocation import outcome

from .conftest import registered
from .stage_bugs.kernels import entry, register
from .test_batch import COMPARED, _placeless
from .test_stage_families import BUGS, CORRECT

XNNPACK_TOML = Path(__file__).resolve().parent / "xnnpack" / "kernels.toml"
# The x86-64 kernels of tests/xnnpack/kernels.toml: correct ones of every kind, and three with a planted ABI bug.
XNNPACK_KERNELS = ["xnn_qs8_qc8w_gemm_2x4_scalar", "xnn_qs8_qc8w_gemm_2x4_scalar_bug_a_stride",
                   "xnn_qs8_qc8w_gemm_2x4_scalar_bug_c_stride", "xnn_qs8_qc8w_igemm_2x4_scalar",
                   "xnn_qs8_qc8w_igemm_2x4_scalar_no_a_offset", "xnn_qs8_qc8w_igemm_2x4_scalar_store_order",
                   "xnn_qd8_f32_qc8w_igemm_2x4_scalar", "xnn_qs8_qc4w_gemm_2x4_scalar",
                   "xnn_qd8_f32_qc4w_gemm_2x4_scalar", "xnn_qu8_gemm_2x4_rndnu16_scalar"]


@pytest.fixture(scope="module")
def xnnpack_kernels():
    with registered(XNNPACK_TOML) as kernels:
        yield kernels


@pytest.fixture(scope="module")
def bug_kernels(tmp_path_factory):
    text = "".join(entry(k, b, pins) for k, b, pins, _ in BUGS) + "".join(entry(k, 0) for k in CORRECT)
    return register(text, tmp_path_factory.mktemp("stage_bugs_batched"))


def _native(kern):
    from lowp.kernels import executor
    ex = executor(kern)
    reason = ex.unavailable() if ex.backend == "native" else f"runs on {ex.backend}"
    if reason:
        pytest.skip(f"{kern.name}: {reason}")
    return ex


def _generated(kern, check: str = "model", domain: str = "full"):
    """The calls of a check's generated cases, and each one's run options (what Recorder.run passes)."""
    from lowp.conformance.run.checks import case_call, cases_for, run_options
    calls = [case_call(case, kern) for case in cases_for(kern, check, domain, grid=False, seed=0)]
    return calls, [run_options(c) for c in calls]


def _same_outcome(batched, alone) -> bool:
    if isinstance(alone, np.ndarray):
        return isinstance(batched, np.ndarray) and batched.dtype == alone.dtype and \
            batched.tobytes() == alone.tobytes() and batched.shape == alone.shape
    return type(batched) is type(alone) and _placeless(str(batched)) == _placeless(str(alone))


@pytest.mark.native
@pytest.mark.parametrize("name", ["xnn_qs8_qc8w_igemm_2x4_scalar", "xnn_qs8_qc8w_gemm_2x4_scalar_bug_c_stride",
                                  "xnn_qd8_f32_qc8w_igemm_2x4_scalar"])
def test_a_batch_of_invocations_returns_what_run_returns(xnnpack_kernels, monkeypatch, name):
    """Every generated case of the kernel's model check in one run_many, against run() per case (C's bytes, or the
    same exception: a write into a strided C's gaps is that case's OutOfBounds); and the batch did run in the guard
    library's invocation batches, several cases a call."""
    from lowp.kernels import guard
    kern = xnnpack_kernels[name]
    ex = _native(kern)
    calls, options = _generated(kern)
    sizes = []
    call_invocations = guard.call_invocations
    monkeypatch.setattr(guard, "call_invocations",
                        lambda calls, arena, inputs, *a, **k: sizes.append(len(next(iter(inputs.values())))) or
                        call_invocations(calls, arena, inputs, *a, **k))
    batched = ex.run_many([c.A for c in calls], [c.B for c in calls], seeds=[c.seed for c in calls], options=options)
    alone = [outcome(lambda: ex.run(c.A, c.B, seed=c.seed, **o)) for c, o in zip(calls, options)]
    assert len(batched) == len(alone) == len(calls)
    different = [calls[i].case for i, (b, a) in enumerate(zip(batched, alone)) if not _same_outcome(b, a)]
    assert not different, different[:5]
    assert sizes and max(sizes) > 1 and sum(sizes) >= len(calls) // 2, sizes


def test_a_quantized_kernel_is_batched_where_its_executor_takes_options(xnnpack_kernels):
    """Natively and on every emulated executor (test_batched_and_per_case_rows_agree_on_an_emulated_xnnpack_kernel);
    not on an executor whose run_many takes no options."""
    from lowp.kernels import executor
    kern = xnnpack_kernels["xnn_qs8_qc8w_gemm_2x4_scalar"]
    assert batch.batches_invocations(kern, executor(kern))
    assert not batch.batches_invocations(kern, type("Other", (), {"run_many": None})())
    assert not batch.batchable(kern)            # its draws still go one by one (they draw parameters per case)


def _row(check, monkeypatch, batched: bool) -> dict:
    """The row of `check`, batched or per case, on a fresh copy of its kernel (test_batch's rule), with a float
    output's NaN as a string (NaN equals nothing, itself included)."""
    from lowp.conformance.run import checks
    from lowp.kernels import executor
    monkeypatch.setattr(batch, "ENABLED", batched)
    monkeypatch.setattr(checks, "executor", lambda kern: executor(kern).with_fresh_state())
    row = run_check(check, lambda event: None, examples=8, grid=False)
    return json.loads(json.dumps(_placeless({k: row.get(k) for k in COMPARED}), sort_keys=True).replace("NaN", '"NaN"'))


@pytest.mark.native
@pytest.mark.parametrize("name", XNNPACK_KERNELS)
def test_batched_and_per_case_rows_agree_on_xnnpack_kernels(xnnpack_kernels, monkeypatch, name):
    """Every check of each kernel: the same verdict, cause, counterexample, failures and readings, batched or not."""
    kern = xnnpack_kernels[name]
    _native(kern)
    for check in plan([kern]):
        assert _row(check, monkeypatch, True) == _row(check, monkeypatch, False), check.id


# Whether a batch is clean, and the outcomes it hands the per-case judge, do not depend on which output-stage bug
# a kernel has: CI runs one bug of each stage family (a pinned-parameter one among them), the nightly job every one.
# tests/test_stage_families.py names every bug in CI.
AGREEMENT_SAMPLE = {("avx2_fp32", 10), ("scalar_fp32", 2), ("rndnu", 4), ("tflite", 2), ("qd8", 2)}


def test_the_ci_sample_names_bugs_of_every_stage_family():
    assert AGREEMENT_SAMPLE <= {b[:2] for b in BUGS} and {k for k, _ in AGREEMENT_SAMPLE} == {b[0] for b in BUGS}


@pytest.mark.native
@pytest.mark.parametrize("kernel,bug,pins,words", [
    pytest.param(*b, marks=() if b[:2] in AGREEMENT_SAMPLE else pytest.mark.nightly, id=f"{b[0]}-{b[1]}")
    for b in BUGS])
def test_a_one_bug_kernel_fails_alike_batched_and_per_case(bug_kernels, monkeypatch, kernel, bug, pins, words):
    """The claimed check of every one-bug output-stage kernel: FAIL with the cause naming its bug, batched, and the
    row the per-case path gives."""
    kern = bug_kernels[f"sb_{kernel}_{bug}{'_pinned' if pins else ''}"]
    _native(kern)
    check = Check(kern.name, kern.output, "claimed", True)
    batched = _row(check, monkeypatch, True)
    assert batched["verdict"] == "FAIL" and words in batched["cause"], batched["cause"]
    assert batched == _row(check, monkeypatch, False)


EMULATED_TOML = Path(__file__).resolve().parents[1] / "kernels" / "quantized" / "aarch64.toml"


def test_batched_and_per_case_rows_agree_on_an_emulated_xnnpack_kernel(monkeypatch):
    """An emulated quantized kernel's generated cases are screened in batches too (run one by one on its machine,
    judged together): every check's row is the per-case path's, on Unicorn."""
    from lowp.kernels import executor
    with registered(EMULATED_TOML) as kernels:
        kern = kernels["xnn_qs8_rndnu_4x8_neon_mlal_lane"]
        ex = executor(kern)
        if ex.backend != "unicorn" or ex.unavailable():
            pytest.skip(f"{kern.name}: runs on {ex.backend}: {ex.unavailable()}")
        assert batch.batches_invocations(kern, ex)
        screened = []
        screen = batch.screen
        monkeypatch.setattr(batch, "screen", lambda *a, **k: screened.append(len(a[3])) or screen(*a, **k))
        for check in plan([kern]):
            assert _row(check, monkeypatch, True) == _row(check, monkeypatch, False), check.id
        assert screened and sum(screened) > 100, screened       # its generated cases did go through batches
