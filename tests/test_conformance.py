"""The conformance suite: contracts against independent readings, the search finding the seeds' failure modes
with minimal counterexamples, the runner surviving crashing and hanging kernels, the journal, the reports, replay
(the pytest plugin: tests/test_pytest_plugin.py)."""
import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from lowp.conformance import ConformanceFailure, check, report
from lowp.conformance.contracts import int32 as contracts
from lowp.conformance.run import pool, runner
from lowp.conformance.search.cases import Case, cases_for, operands
from lowp.conformance.run.checks import Check, plan, replay, run_check
from lowp.isa_models import x86
from lowp.kernels import executor, kernel, load_toml

from .conftest import MISBEHAVING_C, scalar_kernels_toml

def runnable(name):
    ex = executor(kernel(name))
    if ex.unavailable():
        pytest.skip(f"{name}: {ex.unavailable()}")
    return kernel(name)


def small(dtype, max_side=6):
    return st.tuples(st.integers(1, max_side), st.integers(1, max_side), st.integers(1, 40)).flatmap(
        lambda s: st.tuples(hnp.arrays(np.uint8, (s[0], s[2])), hnp.arrays(dtype, (s[2], s[1]))))


@settings(max_examples=60, deadline=None)
@given(small(np.int8))
def test_pair_saturating_contract_equals_the_vpmaddubsw_composition(ab):
    """The contract (written from seed 002's pseudo-code) and the instruction models agree."""
    A, B = ab
    K = A.shape[1] + A.shape[1] % 2
    a = np.zeros((A.shape[0], K), np.uint8)
    a[:, :A.shape[1]] = A
    b = np.zeros((K, B.shape[1]), np.int8)
    b[:B.shape[0]] = B
    expect = np.zeros((A.shape[0], B.shape[1]), np.int64)
    for i in range(A.shape[0]):
        for j in range(B.shape[1]):
            lanes = np.zeros(-(-K // 32) * 32, np.uint8), np.zeros(-(-K // 32) * 32, np.int8)
            lanes[0][:K], lanes[1][:K] = a[i], b[:, j]
            expect[i, j] = x86.vpmaddubsw(lanes[0].reshape(-1, 32), lanes[1].reshape(-1, 32)).astype(np.int64).sum()
    assert np.array_equal(contracts.pair_saturating(A, B), contracts._wrap32(expect))


def acc16_scalar(A, B, brow):
    """FBGEMM's matmul_u8i8acc16_ref, read line by line (docs/research/fbgemm-accumulation.md#acc16)."""
    M, K = A.shape
    N = B.shape[1]
    C = np.zeros((M, N), np.int64)
    clip = lambda x: max(-32768, min(32767, x))  # noqa: E731
    for i in range(M):
        for j in range(N):
            s16 = s32 = 0
            for k in range(0, K, 2):
                a0, b0 = int(A[i, k]), int(B[k, j])
                a1, b1 = (int(A[i, k + 1]), int(B[k + 1, j])) if k + 1 < K else (0, 0)
                s16 = clip(s16 + clip(a0 * b0 + a1 * b1))
                if k % brow == brow - 2:
                    s32 += s16
                    s16 = 0
            C[i, j] = s32 + s16
    return contracts._wrap32(C)


@settings(max_examples=30, deadline=None)
@given(small(np.int8, 3), st.sampled_from([4, 8, 256]))
def test_fbgemm_acc16_contract_matches_a_scalar_reading(ab, brow):
    A, B = ab
    A = np.full_like(A, 255) if A.size and A[0, 0] % 2 else A     # saturating inputs half the time
    assert np.array_equal(contracts.fbgemm_acc16(A, B, brow), acc16_scalar(A, B, brow))


@pytest.mark.parametrize("brow", [6, 7, 130, 256])
def test_fbgemm_acc16_over_long_blocks_matches_the_scalar_reading(brow):
    """Blocks longer than saturating_sum's in-place loop (its composed maps), an odd brow, a last block cut short,
    inputs that saturate both ways and mid-block (u8 255 against s8 -128 / 127 runs)."""
    rng = np.random.default_rng(brow)
    A = rng.choice(np.array([0, 1, 200, 255], np.uint8), (2, 601))
    B = np.repeat(rng.choice(np.array([-128, -3, 5, 127], np.int8), (41, 3)), 15, axis=0)[:601]
    assert np.array_equal(contracts.fbgemm_acc16(A, B, brow), acc16_scalar(A, B, brow))


def test_contract_judgement_names_the_variant():
    A = np.array([[255, 255]], np.uint8)
    B = np.array([[127], [127]], np.int8)
    C = np.array([[32767]], np.int32)
    j = contracts.contract("exact").judge(C, A, B)
    assert not j.ok and j.matched == "pair-saturating" and j.expected[0, 0] == 64770
    j = contracts.contract("onednn-u8s8s32").judge(C, A, B)
    assert j.ok and j.matched == "pair-saturating"
    assert contracts.contract("exact").judge(C + 1, A, B).matched is None


def test_seed002_s8s8_variant():
    A = np.array([[127, 127, 0, 0]], np.int8)
    B = np.array([[127], [127], [0], [0]], np.int8)
    assert contracts.shifted_pair_saturating(A, B)[0, 0] == 255 and contracts.exact(A, B)[0, 0] == 32258


def test_cases_regenerate_from_their_ids():
    k = kernel("u8s8s32_avx2")
    for case in cases_for(k, "exact", "full")[:12]:
        again = Case.from_id(case.id)
        assert again == case
        A1, B1 = operands(case, k)
        A2, B2 = operands(again, k)
        assert np.array_equal(A1, A2) and np.array_equal(B1, B2) and A1.dtype == np.uint8
    with pytest.raises(ValueError, match="not a case id"):
        Case.from_id("nonsense")


def test_finds_vpmaddubsw_saturation_with_a_minimal_counterexample():
    """The issue's bar: on its own, on full-range u8, one or two nonzero pairs; u7 passes; VNNI passes."""
    k = runnable("u8s8s32_avx2")
    row = run_check(Check(k.name, "exact", "full", False), lambda e: None, examples=120, grid=False)
    cx = row["counterexample"]
    assert row["verdict"] == "FAIL" and cx["matched"] == "pair-saturating"
    assert cx["shape"][:2] == [1, 1] and cx["nonzero"] <= 4
    A, B = np.array(cx["A"], np.int64), np.array(cx["B"], np.int64)
    assert cx["expected_at_first"] == (A @ B)[0, 0] and abs(cx["expected_at_first"]) > 32767
    assert cx["actual_at_first"] in (32767, -32768)
    assert run_check(Check(k.name, "exact", "claimed", True), lambda e: None, examples=60, grid=False)["verdict"] == "PASS"
    vnni = runnable("u8s8s32_avx512vnni")
    assert run_check(Check(vnni.name, "exact", "full", True), lambda e: None, examples=60,
                     grid=False)["verdict"] == "PASS"


def test_check_api_raises_with_the_counterexample():
    runnable("u8s8s32_avx2")
    with pytest.raises(ConformanceFailure, match=r"minimal counterexample[\s\S]*pair-saturating") as e:
        check("u8s8s32_avx2", "exact", domain="full", examples=80)
    assert e.value.row["verdict"] == "FAIL"
    assert check("u8s8s32_avx2", examples=30)["verdict"] == "PASS"


def test_emulated_kernel_counterexample():
    row = run_check(Check("gemmlowp_s8_neon", "exact", "full", False), lambda e: None, examples=100, grid=False)
    cx = row["counterexample"]
    assert row["verdict"] == "FAIL" and cx["matched"] == "int16-pair-wrap" and cx["nonzero"] == 4
    assert sorted(set(np.array(cx["A"]).ravel().tolist()) - {0}) == [-128]


def test_plan_claims_model_and_contract_and_probes_exact():
    ids = {c.id: c.claimed for c in plan([kernel("u8s8s32_avx2"), kernel("sdot_s8_neon")])}
    assert ids == {"u8s8s32_avx2:model:full": True, "u8s8s32_avx2:exact:claimed": True,
                   "u8s8s32_avx2:exact:full": False, "sdot_s8_neon:model:full": True,
                   "sdot_s8_neon:exact:claimed": True}


BAD_KERNELS = scalar_kernels_toml("test_", "bad.c", ("crasher", "hanger", "offbyone", "aborter", "tired"))


@pytest.fixture(scope="module")
def bad_kernels(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    (d / "bad.c").write_text(MISBEHAVING_C)
    (d / "bad.toml").write_text(BAD_KERNELS)
    from lowp.kernels.registry import _KERNELS
    for name in ("test_crasher", "test_hanger", "test_offbyone", "test_aborter", "test_tired"):
        _KERNELS.pop(name, None)
    return {k.name: k for k in load_toml(d / "bad.toml")}


def test_runner_turns_crashes_and_hangs_into_rows_and_goes_on(bad_kernels, tmp_path):
    checks = [Check("test_crasher", "model", "full", True), Check("test_hanger", "model", "full", True),
              Check("test_offbyone", "exact", "claimed", True), Check("u8s8s32_ssse3", "exact", "claimed", True),
              Check("test_aborter", "model", "full", True)]
    options = {"examples": 40, "grid": False, "budget": 1.0}
    rows = runner.run(checks, tmp_path / "journal.jsonl", jobs=2, timeout=8, progress=False, options=options)
    by = {r["id"]: r for r in rows}
    # A segfault inside the kernel is caught by the guard: a FAIL naming the fault, shrunk to the first K that does it.
    segv = by["test_crasher:model:full"]
    assert segv["verdict"] == "FAIL" and "write of unmapped memory at 0x0" in segv["cause"]
    assert "crasher_gemm" in segv["cause"] and segv["counterexample"]["shape"] == [1, 1, 6]
    # A process death no guard can take is a CRASH row that counts what ran, of what was planned.
    crash = by["test_aborter:model:full"]
    assert crash["verdict"] == "CRASH" and "signal 6" in crash["reason"] and "while running case" in crash["reason"]
    assert 0 < crash["executed"] < crash["cases"]
    # A runaway loop exceeds the per-call budget: a FAIL naming it (the check's own timeout stays the last resort).
    hang = by["test_hanger:model:full"]
    assert hang["verdict"] == "FAIL" and "budget of 1 s" in hang["cause"], hang
    off = by["test_offbyone:exact:claimed"]
    assert off["verdict"] == "FAIL" and off["counterexample"]["shape"] == [1, 1, 1]
    assert off["counterexample"]["nonzero"] == 2
    assert by["u8s8s32_ssse3:exact:claimed"]["verdict"] in ("PASS", "SKIPPED")
    # The journal has every case and row; resume with the same options keeps what was done and runs nothing twice.
    events = [json.loads(line) for line in (tmp_path / "journal.jsonl").read_text().splitlines()]
    assert sum(e["event"] == "row" for e in events) == 5
    assert sum(e["event"] == "case" for e in events) >= off["executed"] - 40
    # The aborter died in a generated case: every outcome before it reached the parent (case outcomes travel with
    # the start event that follows them), and the row names the case that started last.
    aborted = [e for e in events if e.get("check") == "test_aborter:model:full"]
    assert crash["executed"] == sum(e["event"] == "case" for e in aborted)
    assert crash["reason"].endswith(next(e["case"] for e in reversed(aborted) if e["event"] == "start")), crash
    again = runner.run(checks, tmp_path / "journal.jsonl", resume=True, jobs=2, timeout=8, progress=False,
                       options=options)     # the same options: the timeout and jobs are part of a verdict's key
    assert [r["verdict"] for r in again] == [r["verdict"] for r in rows]
    assert len((tmp_path / "journal.jsonl").read_text().splitlines()) == len(events)
    # Reports: a claimed failure and a crash show, with executed counts, in every format.
    paths = report.write(rows, tmp_path / "report")
    md = paths["markdown"].read_text()
    assert "CRASH" in md and "cases executed" in md and "minimal counterexample" in md
    suite = ET.parse(paths["junit"]).getroot()
    assert suite.get("failures") == "3" and suite.get("errors") == "1"
    assert json.loads(paths["json"].read_text())["summary"]["claimed_failures"] == [
        "test_crasher:model:full", "test_hanger:model:full", "test_offbyone:exact:claimed", "test_aborter:model:full"]
    assert replay("test_offbyone:exact:claimed", runner.read_journal(tmp_path / "journal.jsonl"))["verdict"] == "FAIL"


def test_a_check_process_sends_case_outcomes_with_the_event_after_them():
    """pool._Messages: a case outcome waits for the next other event (or CASES_A_MESSAGE outcomes), which goes at
    once with it; the parent (events_of) reads the events back in the order they were emitted."""
    sent = []

    class Pipe:
        send = staticmethod(sent.append)
    emit = pool._Messages(Pipe())
    emitted = [{"event": "plan", "cases": 45}, {"event": "start", "case": "c0"}]
    emitted += [{"event": "case", "case": f"c{i}", "ok": True} for i in range(pool.CASES_A_MESSAGE + 8)]
    emitted += [{"event": "start", "case": "c40"}, {"event": "row", "id": "k:model:full"}]
    for i, event in enumerate(emitted):
        emit(event)
        if event["event"] != "case":        # what says what runs now is never held back
            assert sent and pool.events_of(sent[-1])[-1] is event, i
    emit.flush()
    assert [e for message in sent for e in pool.events_of(message)] == emitted
    assert len(sent) == 5 and len(sent[2]) == pool.CASES_A_MESSAGE and len(sent[3]) == 9


def test_a_kernels_checks_share_a_child_with_the_rows_of_a_child_each(bad_kernels, tmp_path):
    """The pool runs a kernel's checks one after another in one child (pool.jobs_of). A death or a timeout ends
    only its own check: the kernel's other checks go to a new child. Every check runs a fresh copy of the kernel,
    so a kernel with static state (tired: wrong after its first 60 elements) gets the rows a child each gives it,
    whether or not this process has loaded it before (the fork would hand the children its state)."""
    executor(bad_kernels["test_tired"]).run(np.ones((8, 8), np.uint8), np.ones((8, 8), np.int8))     # 64 calls
    checks = [Check(f"test_{what}", *c) for what in ("tired", "aborter", "hanger")
              for c in (("model", "full", True), ("exact", "claimed", True))]
    assert [len(job) for job in pool.jobs_of(checks, 2)] == [2, 2, 2]
    assert [len(job) for job in pool.jobs_of(checks, 4)] == [1] * 6       # fewer kernels than workers
    # The generated cases only: a search's shrinking stops after SEARCH_SHRINK_SECONDS, which a loaded machine
    # reaches at another step. No per-call budget: the hanger times out.
    options = {"examples": 0, "grid": False, "budget": None}
    shared, alone = (runner.run(checks, tmp_path / f"{name}.jsonl", jobs=jobs, timeout=4, progress=False,
                                options=options) for name, jobs in (("shared", 2), ("alone", 6)))
    keys = ("id", "verdict", "cases", "executed", "failed", "matched", "cause", "counterexample")
    assert [{k: r[k] for k in keys} for r in shared] == [{k: r[k] for k in keys} for r in alone]
    tired, _, aborted, aborted_too, hung, hung_too = shared
    assert tired["verdict"] == "FAIL" and 0 < tired["failed"] < tired["executed"]     # not every case: fresh
    assert aborted["verdict"] == aborted_too["verdict"] == "CRASH" and "signal 6" in aborted_too["reason"]
    assert all(r["verdict"] == "CRASH" and "timed out after 4 s" in r["reason"] for r in (hung, hung_too))


def test_cli_runs_and_exits_zero_when_nothing_claimed_fails(tmp_path):
    from lowp.cli import main
    status = main(["conformance", "--kernel", "u8s8s32_avx2", "--kernel", "sdot_s8_neon", "--out", str(tmp_path),
                   "--examples", "30", "--no-grid"])
    md = (tmp_path / "report.md").read_text()
    assert status == 0 and "| u8s8s32_avx2" in md and "of" in md
    assert json.loads((tmp_path / "report.json").read_text())["summary"]["checks"] == 5


@settings(max_examples=50, deadline=None)
@given(small(np.int8), st.integers(-255, 255), st.integers(-255, 255))
def test_offsets_added_and_zero_points_subtracted_are_one_contract(ab, za, zb):
    A, B = ab
    assert np.array_equal(contracts.exact(A, B, -za, -zb), contracts.exact_zero_points(A, B, za, zb))
    direct = np.array([[sum((int(A[i, k]) - za) * (int(B[k, j]) - zb) for k in range(A.shape[1]))
                        for j in range(B.shape[1])] for i in range(A.shape[0])])
    assert np.array_equal(contracts.exact_zero_points(A, B, za, zb), contracts._wrap32(direct))
