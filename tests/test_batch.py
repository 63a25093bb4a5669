"""The batched path (issue 26, docs/batch.md): a batched run and a per-case run (LOWP_BATCH=0's path) give the same
verdicts and counterexamples on the mutation suite's native mutants; every fault is named for the case that made it;
a kernel that corrupts a batch (writes its inputs, damages a canary, keeps state between calls, hangs) gets the
per-case path's verdict; `lowp fuzz` finds the rare-value kernel (found, not timed: `lowp bench fuzz` measures)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib

import numpy as np
import pytest

from lowp.conformance.run import batch
from lowp.conformance.run.checks import Check, plan, run_check
from lowp.emulator.errors import BudgetExceeded, OutOfBounds
from lowp.kernels.executors import BatchStopped

from .conftest import CASES, registered

BATCH_TOML = CASES / "batch.toml"
# What a row must agree on; the seconds, the build and the count of search examples (hypothesis's shrinking stops on
# time) may differ between two runs of the same check.
COMPARED = ("verdict", "cause", "counterexample", "failed", "matched", "drawn", "reason")


@pytest.fixture(scope="module")
def misbehaving():
    from lowp.kernels import executor, load_toml
    from lowp.kernels.registry import _KERNELS
    for entry in tomllib.loads(BATCH_TOML.read_text())["kernel"]:
        _KERNELS.pop(entry["name"], None)
    out = {k.name: k for k in load_toml(BATCH_TOML)}
    reason = executor(out["tb_fault"]).unavailable()
    if reason:
        pytest.skip(reason)
    return out


def _cases(kern, n, shape=(3, 5, 7), seed=0):
    rng = np.random.default_rng(seed)
    M, N, K = shape
    return (rng.integers(0, 256, (n, M, K)).astype(kern.a_dtype),
            rng.integers(-128, 128, (n, K, N)).astype(kern.b_dtype))


def _row(check, monkeypatch, batched: bool, **options) -> dict:
    """The row of `check`, batched or not, run on a fresh copy of its kernel (a library loaded once per process
    keeps its static data from one run to the next: a kernel that keeps state would start the second run where the
    first left it)."""
    monkeypatch.setattr(batch, "ENABLED", batched)
    row = run_check(check, lambda event: None, fresh=True, **options)
    return _placeless({k: row.get(k) for k in COMPARED})


def _placeless(x):
    """x with what differs between two runs of the same per-case path taken out of its words: absolute addresses
    (a library copy loads elsewhere) and where a runaway loop was stopped."""
    if isinstance(x, dict):
        return {k: _placeless(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_placeless(v) for v in x]
    if isinstance(x, str):
        return re.sub(r"0x[0-9a-f]{8,}", "ADDRESS", re.sub(r"(runaway loop\?\); stopped at)[^;]*", r"\1 ...", x))
    return x


def test_every_fault_is_named_for_the_case_that_made_it(misbehaving):
    from lowp.kernels import executor
    k = misbehaving["tb_fault"]
    ex = executor(k)
    A, B = _cases(k, 40)
    A[:, 0, 0] = 1
    A[[3, 17, 39], 0, 0] = 77            # these three cases fault; the others must come back right
    seeds = list(range(100, 140))
    out = ex.run_many(A, B, seeds=seeds)
    for i, (a, b, seed) in enumerate(zip(A, B, seeds)):
        if i in (3, 17, 39):
            assert isinstance(out[i], OutOfBounds) and out[i].buffer == "C" and out[i].access == "write", (i, out[i])
            with pytest.raises(OutOfBounds) as alone:
                ex.run(a, b, seed=seed)
            assert (alone.value.buffer, alone.value.access, alone.value.offset) == \
                (out[i].buffer, out[i].access, out[i].offset)
        else:
            assert np.array_equal(out[i], ex.run(a, b, seed=seed)), i


def test_a_batch_returns_what_run_returns_poison_included(misbehaving):
    from lowp.kernels import executor, kernel
    ex = executor(kernel("u8s8s32_avx2"))
    if ex.unavailable():
        pytest.skip(ex.unavailable())
    A, B = _cases(ex.kernel, 25, (5, 19, 37))
    A &= 0x7F
    out = ex.run_many(list(A), list(B), seeds=list(range(25)))
    assert all(np.array_equal(c, ex.run(a, b, seed=s)) for c, a, b, s in zip(out, A, B, range(25)))


def test_a_kernel_that_writes_its_inputs_or_a_canary_is_rerun_case_by_case(misbehaving, monkeypatch):
    from lowp.kernels import executor, guard
    ran = []
    original = guard.call_batch
    monkeypatch.setattr(guard, "call_batch", lambda *a, **kw: ran.append(original(*a, **kw)) or ran[-1])
    for name in ("tb_inputs", "tb_canary"):
        k = misbehaving[name]
        ex = executor(k)
        A, B = _cases(k, 6)
        out = ex.run_many(A, B, seeds=list(range(6)))
        evidence = ran[-1]
        assert evidence.inputs_changed.all() if name == "tb_inputs" else evidence.canary is not None
        for c, a, b, s in zip(out, A, B, range(6)):
            if name == "tb_inputs":
                assert np.array_equal(c, ex.run(a.copy(), b, seed=s))
            else:
                assert isinstance(c, OutOfBounds) and "canary" in str(c)
        for check in (c for c in plan([k]) if c.claimed):
            assert _row(check, monkeypatch, True, examples=10, draws=300) == \
                _row(check, monkeypatch, False, examples=10, draws=300), check.id


def test_a_kernel_that_keeps_state_gets_the_per_case_verdict(misbehaving, monkeypatch):
    check = Check("tb_state", "exact", "claimed", True)
    batched = _row(check, monkeypatch, True, examples=10, draws=300)
    alone = _row(check, monkeypatch, False, examples=10, draws=300)
    assert batched["verdict"] == "FAIL" and batched["counterexample"]["kind"] == "state"
    assert batched == alone


def test_a_kernel_whose_state_shows_in_the_draws_is_diagnosed_in_the_per_case_state(misbehaving, monkeypatch):
    """tb_state_late goes wrong after the generated cases, by the low bit of the previous call's A[0][0]: the draws
    find it inside a batch that ran on past it, and the diagnosis (which reruns the call) must see the state the
    per-case path left, not the batch's last call."""
    check = Check("tb_state_late", "exact", "claimed", True)
    batched = _row(check, monkeypatch, True, examples=5, grid=False, draws=6000)
    alone = _row(check, monkeypatch, False, examples=5, grid=False, draws=6000)
    assert batched["verdict"] == "FAIL" and batched["counterexample"]["kind"] == "state"
    assert batched["drawn"] < 6000                      # found in the draws, which then stopped
    assert batched == alone


def test_a_canary_damaged_once_is_rerun_in_the_state_its_batch_started_from(misbehaving, monkeypatch):
    """tb_canary_once damages a canary on its 100th call only: the batch holding that call cannot pin it on one
    case, and its cases rerun one by one must start where the batch started (call 100 is still call 100), else the
    rerun would see no damage and pass."""
    check = Check("tb_canary_once", "exact", "claimed", True)
    batched = _row(check, monkeypatch, True, examples=5)
    alone = _row(check, monkeypatch, False, examples=5)
    assert batched["verdict"] == "FAIL" and "canary" in batched["cause"]
    assert batched == alone


def _hanging_batch(misbehaving):
    """tb_hang's executor with a 0.2 s budget, and a batch of 5 cases whose third loops forever (A[0, 0] == 77)."""
    from lowp.kernels import executor
    k = misbehaving["tb_hang"]
    ex = executor(k)
    ex.budget = 0.2
    A, B = _cases(k, 5)
    A[:, 0, 0] = 1
    A[2, 0, 0] = 77
    return ex, A, B


def test_a_runaway_loop_stops_the_batch_and_the_check(misbehaving, monkeypatch):
    ex, A, B = _hanging_batch(misbehaving)
    out = ex.run_many(A, B, seeds=list(range(5)))
    assert [type(x).__name__ for x in out] == ["ndarray", "ndarray", "BudgetExceeded", "BatchStopped", "BatchStopped"]
    assert isinstance(out[2], BudgetExceeded) and isinstance(out[3], BatchStopped)
    check = Check("tb_hang", "exact", "claimed", True)
    rows = [_row(check, monkeypatch, on, examples=5, budget=0.2) for on in (True, False)]
    assert rows[0] == rows[1] and "budget" in rows[0]["cause"]


def _run_many_in_a_thread(ex, A, B, out) -> None:
    """ex.run_many from a thread that is not the process's main one (which then waits, not blocking SIGALRM), in a
    forked child: the outcomes' type names go to `out`."""
    import threading
    got = []
    worker = threading.Thread(target=lambda: got.extend(ex.run_many(A, B, seeds=list(range(len(A))))))
    worker.start()
    worker.join()
    out.put([type(x).__name__ for x in got])


def test_the_budget_signal_reaches_the_kernel_thread_when_another_thread_takes_it(misbehaving):
    """The guard's budget timer (SIGALRM) is process-directed: Linux gives it to the main thread first, and a BLAS
    pool's threads take it too. A kernel called from another thread must still be stopped where it loops (the
    guard hands the signal on to the thread that made the call), not have another thread's handler jump into its
    frame."""
    import multiprocessing as mp
    ex, A, B = _hanging_batch(misbehaving)
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_run_many_in_a_thread, args=(ex, A, B, out))
    child.start()
    try:
        names = out.get(timeout=60)
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
    assert names == ["ndarray", "ndarray", "BudgetExceeded", "BatchStopped", "BatchStopped"]
    assert child.exitcode == 0


def _native_mutants():
    from lowp.conformance.bench import mutants
    out = []
    for suite, toml in mutants.SUITES.items():
        for entry in tomllib.loads(toml.read_text())["kernel"]:
            if entry["target"] == "x86-64":
                out.append((suite, entry["name"]))
    return out


# The x86 mutants that still run where the CPU lacks their features (on Bochs, some 25 s each): a wrong value, a
# dispatch, a control.
BOCHS_SAMPLE = {"mut_x86_vnni_kblock_store", "x86_vnni_dispatch_avx512", "x86_ctl_vnni_avx512"}


# One x86 mutant of each way a kernel fails (CI); the nightly job runs every one. What the batched path decides (a
# clean batch, or the outcomes the per-case judge gets) depends on how a case fails, not on which wrong value it is.
AGREEMENT_SAMPLE = {
    "ctl_x86_scalar", "x86_ctl_vnni_avx512",                    # controls: every batch clean
    "mut_x86_maddubs_full_u8", "mut_x86_vnni_colsum16",          # wrong values (one a rare one, found by the draws)
    "mut_x86_maddubs_block_overread", "mut_x86_scalar_c_before",  # out of bounds: a read, a write before C
    "mut_x86_scalar_hang",                                       # a runaway loop stops the batch
    "mut_x86_vnni_stale_b", "x86_stale_avx2",                    # state kept between calls
    "mut_x86_vnni_colsum_uninit", "mut_x86_vnni_c_accumulate",   # workspace read unwritten; C read before written
    "x86_vnni_dispatch_avx512", "mut_x86_dot_claims_vnni",       # dispatch and the claimed path
} | BOCHS_SAMPLE


def test_the_ci_sample_names_mutants_of_the_suite():
    assert AGREEMENT_SAMPLE <= {name for _, name in _native_mutants()}


@pytest.mark.parametrize("suite,name", [
    pytest.param(suite, name, marks=() if name in AGREEMENT_SAMPLE else pytest.mark.nightly, id=f"{suite}-{name}")
    for suite, name in _native_mutants()])
def test_batched_and_per_case_runs_agree_on_the_mutation_suite(mutation_suite, monkeypatch, suite, name):
    """Every x86 mutant and control, each claimed check, the generated cases, 2,000 draws and the search: the
    same verdict, cause and counterexample batched or not (a kernel that depends on earlier calls included: the
    batch's extra calls are replayed away, docs/batch.md)."""
    from lowp.kernels import executor
    k = mutation_suite[name]
    ex = executor(k)
    if ex.unavailable():
        pytest.skip(f"{name} cannot run here: {ex.unavailable()}")
    if ex.backend != "native" and name not in BOCHS_SAMPLE:
        pytest.skip(f"{name} runs on {ex.backend} here (a CPU without its features): BOCHS_SAMPLE stands for those")
    for check in (c for c in plan([k]) if c.claimed):
        alone = _row(check, monkeypatch, False, examples=10, grid=False, draws=2000)
        batched = _row(check, monkeypatch, True, examples=10, grid=False, draws=2000)
        assert batched == alone, check.id


# AArch64 mutants, one of each kind of failure: state (a static cache of B), an over-read, a runaway loop, elements
# never written, C accumulated into, a wrong value at depth, workspace read before written, and a control.
EMULATED_MUTANTS = ["mut_arm_sdot_static_b", "mut_arm_sdot_a_overread", "mut_arm_sdot_hang",
                    "mut_arm_sdot_n_tail_unwritten", "mut_arm_widen_c_accumulate", "mut_arm_smlal_flush300",
                    "mut_arm_smlal_acc_uninit", "arm_ctl_sdot_4x8"]


@pytest.mark.emulated
@pytest.mark.parametrize("backend", ["unicorn", "qemu"])
@pytest.mark.parametrize("name", EMULATED_MUTANTS)
def test_batched_and_per_case_runs_agree_on_emulated_mutants(mutation_suite, monkeypatch, name, backend):
    """The same for AArch64 mutants on Unicorn and on qemu-user: run_many's batches (pipelined on qemu), and the
    engine's replay on a fresh machine, give the per-case rows."""
    from lowp.kernels import executor
    monkeypatch.setenv("LOWP_AARCH64_BACKEND", backend)
    ex = executor(mutation_suite[name])
    if ex.unavailable():
        pytest.skip(f"{name} cannot run here: {ex.unavailable()}")
    for check in (c for c in plan([mutation_suite[name]]) if c.claimed):
        alone = _row(check, monkeypatch, False, examples=5, grid=False, draws=600)
        batched = _row(check, monkeypatch, True, examples=5, grid=False, draws=600)
        assert batched == alone, check.id


def test_lowp_fuzz_finds_the_rare_value_kernel_in_its_first_round(tmp_path):
    """tc_needle (tests/cases/rare.c) is wrong for about 64 of the 65,536 values of (A[0][0], B[0][0]): the draws of
    round 1 find it (one run of the search misses it: tests/test_fuzz.py). Found, not timed."""
    done = subprocess.run([sys.executable, "-m", "lowp", "fuzz", "--kernels", str(CASES / "rare.toml"), "--kernel",
                           "tc_needle", "--budget", "10m", "--rounds", "1", "--draw-seconds", "2", "--database",
                           str(tmp_path / "db"), "--out", str(tmp_path / "fz")],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path, env=os.environ)
    found = re.findall(r"^COUNTEREXAMPLE in round (\d+) \(seed \d+\): (\S+)$", done.stdout, re.M)
    assert done.returncode == 1 and {f[1] for f in found} == {"tc_needle:model:full", "tc_needle:exact:claimed"}, \
        done.stdout + done.stderr
    assert {f[0] for f in found} == {"1"}


def _bench_fuzz(*args, cwd):
    return subprocess.run([sys.executable, "-m", "lowp", "bench", "fuzz", "--quick", *args], capture_output=True,
                          text=True, timeout=900, cwd=cwd, env=os.environ)


def test_lowp_bench_fuzz_measures_a_users_kernel_and_names_bad_choices(tmp_path):
    """`lowp bench fuzz --kernels FILE --kernel NAME`: the user's native kernel beside the emulated default, and
    `lowp fuzz` end to end on it beside the C harness, every figure a number (not timed: the ratios are the
    benchmark's business); a kernel it cannot measure is one line naming why, exit 2."""
    done = _bench_fuzz("--kernels", str(CASES / "rare.toml"), "--kernel", "tc_right", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith(("tc_right", "sdot_s8_neon"))]
    assert [(r[0], r[1]) for r in rows] == [("tc_right", "native"), ("tc_right", "native"), ("sdot_s8_neon", "unicorn"),
                                            ("sdot_s8_neon", "qemu"), ("tc_right", "lowp")], done.stdout
    assert float(rows[0][9].replace(",", "")) > 0        # batched / C harness, measured
    command = "lowp fuzz --kernel tc_right --jobs 1 --budget 5s".split()
    assert rows[4][1:9] == command and float(rows[4][11]) > 0, done.stdout     # end to end / C harness, measured
    for args, words in ((("--kernel", "nosuch"), "no kernel of this name"),
                        (("--kernel", "u8s8s32_avx2", "--kernel", "u8s8s32_ssse3"), "2 native kernels"),
                        (("--kernels", str(tmp_path / "none.toml")), "cannot read the kernels file")):
        bad = _bench_fuzz(*args, cwd=tmp_path)
        assert bad.returncode == 2 and words in bad.stderr and "Traceback" not in bad.stderr, (args, bad.stderr)


@pytest.fixture(scope="module")
def requantizing():
    """kernels/quantized/x86.toml's kernels, registered for this module (conftest.registered)."""
    with registered(CASES.parent.parent / "kernels" / "quantized" / "x86.toml") as kernels:
        yield kernels


def test_a_requantizing_kernel_is_drawn_case_by_case_with_parameters_of_its_own(requantizing, monkeypatch):
    """`lowp fuzz`'s draws reach a requantizing kernel too: its cases, each with the search's parameters, run one by
    one through the per-case path (no batch: they carry parameters of their own), counted as drawn and matched."""
    from lowp.kernels import executor
    k = requantizing["qs8_qc8w_gemm_4x8c8_fp32_avx2"]
    if executor(k).unavailable():
        pytest.skip(executor(k).unavailable())
    claimed = next(c for c in plan([k]) if c.claimed and c.check != "model")
    row = run_check(claimed, lambda event: None, examples=5, grid=False, draws=300, draw_seconds=60)
    assert row["verdict"] == "PASS" and row["drawn"] == 300, row
    assert sum(row["matched"].values()) == row["executed"] - row["searched"]
    shapes = set()
    original = batch.draw_case

    def seen(*args):
        A, B, quant = original(*args)
        shapes.add((A.shape, B.shape, repr(quant)))
        return A, B, quant
    monkeypatch.setattr(batch, "draw_case", seen)
    run_check(claimed, lambda event: None, examples=0, grid=False, draws=50, draw_seconds=60)
    assert len(shapes) > 25                     # shapes and parameters vary from case to case


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (3, 5, 7), (9, 17, 40), (2, 2, 201), (4, 16, 64)])
def test_the_compiled_pair_saturating_reading_is_the_contracts_case_by_case(m, n, k):
    """batch_readings.c against contracts.pair_saturating on each case and against the numpy batched form: u8 x s8
    drawn half from the ends (255 x 127 pairs saturate high, 255 x -128 low), odd and even K."""
    from lowp.conformance.contracts.int32 import _pair_sums, pair_saturating
    if batch._compiled_readings() is None:
        pytest.skip("the host cannot build C: the numpy form computes the reading")
    rng = np.random.default_rng(k)
    A3 = batch.elements(rng, 0, 255, (64, m, k), np.uint8)
    B3 = batch.elements(rng, -128, 127, (64, k, n), np.int8)
    compiled = batch.pair_saturating3(A3, B3)
    assert compiled.dtype == np.int32 and compiled.shape == (64, m, n)
    assert np.array_equal(compiled, batch.pair_saturating3_numpy(A3, B3))
    assert all(np.array_equal(c, pair_saturating(A, B)) for c, A, B in zip(compiled, A3, B3))
    pair_sums = np.stack([_pair_sums(A, B) for A, B in zip(A3, B3)])
    assert k == 1 or (np.abs(pair_sums + 0.5) > 32767.5).any(), "the draw must reach the saturation edges"
