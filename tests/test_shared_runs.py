"""A kernel's runs shared by its checks (conformance/run/shared_runs.py, docs/batch.md "Shared runs"): a later check
whose generated cases are the calls the kernel's first check ran judges that check's outcomes; its rows are the
rows it gets running every call itself, a kernel that keeps state between calls included, and the kernel runs
fewer calls."""
from __future__ import annotations

import numpy as np
import pytest

from lowp.conformance.run import shared_runs
from lowp.conformance.run.checks import plan, run_check
from lowp.emulator.errors import OutOfBounds

from .test_batch import COMPARED, _placeless

# A control, a wrong value, an over-read, state kept between calls (one that the first check's own calls show), C
# read before it is written, a runaway loop.
NATIVE = ["ctl_x86_scalar", "mut_x86_maddubs_full_u8", "mut_x86_maddubs_block_overread", "x86_stale_avx2",
          "mut_x86_vnni_stale_b", "mut_x86_vnni_c_accumulate", "mut_x86_scalar_hang"]
# Their calls are deterministic and never stop a batch (the over-read damages a canary: the engine reruns that
# batch, and nothing after it is shared; the runaway loop ends the log likewise).
EVERY_CASE_SHARED = {"ctl_x86_scalar", "mut_x86_maddubs_full_u8", "mut_x86_vnni_c_accumulate"}
_LAYER = shared_runs.layer
EMULATED = ["arm_ctl_sdot_4x8", "mut_arm_sdot_static_b", "mut_arm_sdot_a_overread"]


def _rows(kernel, monkeypatch, sharing: bool, events: list | None = None) -> tuple[list[dict], int]:
    """The rows of every check of `kernel`, one after another on fresh copies in this process (as the pool runs
    them), and how many cases the kernel ran (events: the checks' events, appended)."""
    ran = [0]

    def counted(kern, ex, fresh):
        ex = _Counting(ex, ran)
        return _LAYER(kern, ex, fresh) if sharing else ex
    monkeypatch.setattr(shared_runs, "layer", counted)
    monkeypatch.setattr(shared_runs, "_LOG", None)
    rows = []
    for check in plan([kernel]):
        row = run_check(check, (lambda event: None) if events is None else events.append, fresh=True, examples=10,
                        grid=False)
        rows.append(row)
    return rows, ran[0]


class _Counting:
    """An executor that counts the cases it runs (run: one; run_many: its cases)."""

    def __init__(self, ex, ran):
        self.ex, self.ran = ex, ran

    def __getattr__(self, name):
        if name == "run_many" and hasattr(self.ex, "run_many"):
            return self._run_many
        return getattr(self.ex, name)

    def run(self, A, B, **options):
        self.ran[0] += 1
        return self.ex.run(A, B, **options)

    def _run_many(self, As, Bs, **kwargs):
        self.ran[0] += len(As)
        return self.ex.run_many(As, Bs, **kwargs)


def _compared(rows):
    return [_placeless({k: row.get(k) for k in (*COMPARED, "executed", "cases")}) for row in rows]


def _agree(kernel, monkeypatch):
    alone, ran_alone = _rows(kernel, monkeypatch, False)
    shared, ran_shared = _rows(kernel, monkeypatch, True)
    assert _compared(shared) == _compared(alone), kernel.name
    assert not any(row.get("shared_runs") for row in alone)
    return alone, shared, ran_alone, ran_shared


@pytest.mark.parametrize("name", NATIVE)
def test_a_later_check_judges_the_first_checks_runs_and_gets_its_own_rows(mutation_suite, monkeypatch, name):
    from lowp.kernels import executor
    kernel = mutation_suite[name]
    if executor(kernel).backend != "native" or executor(kernel).unavailable():
        pytest.skip(f"{name} does not run natively here")
    alone, shared, ran_alone, ran_shared = _agree(kernel, monkeypatch)
    first, second = shared[0], shared[1]
    assert (first["check"], second["domain"]) == ("model", "claimed") and "shared_runs" not in first
    if name in EVERY_CASE_SHARED:   # every generated case of the claimed check (full range: the model's calls)
        assert second["shared_runs"] == second["cases"] - (second["searched"] or 0) > 100
    if all(row["verdict"] == "PASS" for row in shared):    # the kernel ran each shared call once
        assert ran_shared == ran_alone - sum(row.get("shared_runs", 0) for row in shared)
    else:           # a failure among them is diagnosed in the state they leave: the copy ran them before
        assert ran_shared <= ran_alone
    if "depends on earlier calls" in (first.get("cause") or ""):     # its outcomes depend on more than the calls
        assert not any(row.get("shared_runs") for row in shared)


@pytest.mark.emulated
@pytest.mark.parametrize("name", EMULATED)
def test_an_emulated_kernels_later_check_shares_the_first_checks_runs(mutation_suite, monkeypatch, name):
    from lowp.kernels import executor
    kernel = mutation_suite[name]
    if executor(kernel).unavailable():
        pytest.skip(f"{name} cannot run here: {executor(kernel).unavailable()}")
    alone, shared, ran_alone, ran_shared = _agree(kernel, monkeypatch)
    if all(row["verdict"] == "PASS" for row in shared):    # the control: its claimed check ran no case twice
        assert shared[1]["shared_runs"] > 100
        assert ran_shared == ran_alone - sum(row.get("shared_runs", 0) for row in shared)
    assert ran_shared <= ran_alone


def test_a_call_that_differs_anywhere_is_not_the_logged_one():
    """The digest covers the operands' bytes, shape and type, and every run option, nested dicts included."""
    A, B = np.zeros((2, 3), np.uint8), np.ones((3, 4), np.int8)
    q = {"a_zero_point": np.array([3, 4], np.int32), "scale": 0.5}
    key = shared_runs.call_key(A, B, {"seed": 1, "quant": q})
    assert key == shared_runs.call_key(A.copy(), B.copy(), {"quant": dict(q), "seed": 1, "align": None})
    A2 = A.copy()
    A2[1, 2] = 1
    for other in [(A2, B, {"seed": 1, "quant": q}), (A.astype(np.int8), B, {"seed": 1, "quant": q}),
                  (A.reshape(3, 2), B, {"seed": 1, "quant": q}), (A, B, {"seed": 2, "quant": q}),
                  (A, B, {"seed": 1, "quant": {**q, "scale": 0.25}}),
                  (A, B, {"seed": 1, "quant": {**q, "a_zero_point": np.array([3, 5], np.int32)}}),
                  (A, B, {"seed": 1, "quant": q, "strides": {"a": 7}})]:
        assert shared_runs.call_key(*other) != key


@pytest.mark.parametrize("types", [(np.uint8, np.int8), (np.int16, np.int16), (np.float32, np.float32)])
def test_a_batch_of_draws_has_each_calls_own_digest(types):
    """A batch's digests in one pass (shape and type hashed once) are call_key's of each of its calls, for any
    operand layout: a fuzz round logs a million draws, and the log compares the two kinds of digest."""
    rng = np.random.default_rng(3)
    As = rng.integers(0, 100, (9, 5, 40)).astype(types[0])
    Bs = rng.integers(-100, 100, (9, 40, 11)).astype(types[1])
    seeds = np.arange(9, dtype=np.uint64) * 2 ** 40
    one_by_one = [shared_runs.call_key(A, B, {"seed": int(s)}) for A, B, s in zip(As, Bs, seeds)]
    assert len(set(one_by_one)) == 9
    assert shared_runs.many_call_keys(As, Bs, seeds, None) == one_by_one
    assert shared_runs.many_call_keys(np.asfortranarray(As), Bs[:, ::-1][:, ::-1], seeds, None) == one_by_one
    assert shared_runs.many_call_keys(As, Bs, seeds + 1, None) != one_by_one


def test_the_log_takes_outcomes_in_order_and_stops_at_the_first_call_that_differs(monkeypatch):
    """A later check takes the logged outcomes (copies; a fault raised again) while its calls are the log's, in
    order; at the first that is not, the copy runs the calls it took, then every call; a check that failed runs
    them when it stops."""
    class Kernel:
        pass

    class Executor:
        budget, machine_options = 1.0, {}

        def __init__(self):
            self.calls = []

        def run(self, A, B, *, seed=0):
            self.calls.append(seed)
            if seed == 2:
                raise OutOfBounds("read past A")
            return np.full((1, 1), seed, np.int32)

    monkeypatch.setattr(shared_runs, "_LOG", None)
    kern, A, B = Kernel(), np.zeros((1, 1), np.int8), np.zeros((1, 1), np.int8)
    first = shared_runs.layer(kern, Executor(), True)
    assert isinstance(first, shared_runs.Logging)
    for seed in (0, 1, 2, 3):
        try:
            first.run(A, B, seed=seed)
        except OutOfBounds:
            pass
    first.stop()
    assert not hasattr(first, "run_many")          # the executor has none: batch.run_many goes case by case
    ex = Executor()
    later = shared_runs.layer(kern, ex, True)
    assert isinstance(later, shared_runs.Reusing)
    C = later.run(A, B, seed=0)
    C[0, 0] = 99                                    # a copy: the log keeps its own
    assert int(later.run(A, B, seed=1)[0, 0]) == 1
    with pytest.raises(OutOfBounds):
        later.run(A, B, seed=2)
    assert ex.calls == []
    assert int(later.run(A, B, seed=5)[0, 0]) == 5      # 5 is not the log's next: the copy runs 0, 1 and 2 first
    assert int(later.run(A, B, seed=3)[0, 0]) == 3
    assert ex.calls == [0, 1, 2, 5, 3] and later.stop() == 3
    ex = Executor()
    failing = shared_runs.layer(kern, ex, True)
    failing.run(A, B, seed=0)
    assert ex.calls == [] and failing.stop(failed=True) == 1 and ex.calls == [0]     # diagnosed in its state
    assert shared_runs.layer(kern, Executor(), False).__class__ is Executor     # not a fresh copy: its own runs
    shared_runs.forget()
    assert isinstance(shared_runs.layer(kern, Executor(), True), shared_runs.Logging)


@pytest.mark.emulated
def test_a_case_the_log_answers_sends_no_start_event(mutation_suite, monkeypatch):
    """A start event goes to the run before a case's (or a batch's) kernel call, so that a crash names the case; a
    case the log answers calls nothing, and sends none (each start costs the parent a message). The claimed check
    of the control sends starts for the cases it runs itself (and its draws), not for the ones it shares."""
    from lowp.kernels import executor
    kernel = mutation_suite["arm_ctl_sdot_4x8"]
    if executor(kernel).unavailable():
        pytest.skip(f"cannot run here: {executor(kernel).unavailable()}")
    starts = {}
    for sharing in (False, True):
        events = []
        rows, _ = _rows(kernel, monkeypatch, sharing, events)
        claimed = rows[1]
        starts[sharing] = sum(e["event"] == "start" and e["check"] == claimed["id"] for e in events)
        assert any(e["event"] == "start" and e["check"] == rows[0]["id"] for e in events)     # the logging check's
        if sharing:
            assert claimed["shared_runs"] > 100
            assert starts[True] <= claimed["cases"] - claimed["shared_runs"] + 2     # and the search's draws
    assert starts[True] < starts[False]
