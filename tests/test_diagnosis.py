"""A row's cause is the counterexample's own (issue 23 part 4, item 2): the shrunk case the report shows is
diagnosed again, so its fault message, its variant names and its kind are its own, never those of the case the
search or the generated cases found first. The kernels (tests/diagnosis/) are scalar C whose failure reads
differently once shrunk: a fault whose offset and buffer shape follow the case, and int16 lanes flushed every 300 k,
which a deep case pins to N=300 and a shrunk one cannot."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

from lowp.conformance.run.checks import Call, Check, Failure, Recorder, _readings, explain, run_check
from lowp.kernels import load_toml
from lowp.kernels.executors import NativeExecutor

HERE = Path(__file__).parent / "diagnosis"


@pytest.fixture(scope="module")
def kernels():
    from lowp.kernels.registry import _KERNELS
    for entry in tomllib.loads((HERE / "diagnosis.toml").read_text())["kernel"]:
        _KERNELS.pop(entry["name"], None)
    return {k.name: k for k in load_toml(HERE / "diagnosis.toml")}


def native(kernel) -> NativeExecutor:
    ex = NativeExecutor(kernel)
    reason = ex.unavailable()
    if reason:
        pytest.skip(f"{kernel.name}: {reason}")
    return ex


@pytest.mark.native
def test_a_fault_is_named_as_the_shrunk_case_makes_it(kernels):
    """The first faulting generated case is wider or deeper than the shrunk 1x1x5: its offset (M * K) and A's shape
    are not the counterexample's. The cause is the counterexample's fault, word for word."""
    native(kernels["dx_overread"])
    row = run_check(Check("dx_overread", "exact", "claimed", True), lambda e: None, examples=20, grid=False)
    cx = row["counterexample"]
    assert row["verdict"] == "FAIL" and cx["shape"] == [1, 1, 5], cx["shape"]
    assert cx["case"] and not cx["case"].endswith(":1x1x5:"), cx["case"]
    found = re.search(r":(\d+)x(\d+)x(\d+):", cx["case"])
    assert found and [int(v) for v in found.groups()] != [1, 1, 5]      # the case it was shrunk from
    assert row["cause"] == cx["fault"], (row["cause"], cx["fault"])
    assert "byte offset 5 of buffer 'A' (5 bytes, uint8[1, 5])" in row["cause"]


@pytest.mark.native
def test_variant_names_are_the_shrunk_cases(kernels):
    """A deep random case of the int16-lanes kernel names its flush interval exactly; the counterexample it shrinks
    to names a range. Every name in the cause is one the counterexample itself reads as."""
    kern = kernels["dx_lanes"]
    rec = Recorder(native(kern))
    check = Check(kern.name, "exact", "claimed", True)
    rng = np.random.default_rng(300)
    A = rng.integers(0, 256, (8, 700)).astype(np.uint8)
    B = rng.integers(-128, 128, (700, 8)).astype(np.int8)
    found = Failure(Call(A, B, 5, "deep"), rec.run(Call(A, B, 5, "deep")), None)
    found_names = [name for _, name in _readings(check, kern, found.call, found.outcome.C)]
    assert "int16-lanes-flush(N=300)" in found_names, found_names
    kind, cause, shrunk = explain(check, kern, rec, found)
    assert kind == "value" and shrunk.call.A.size < A.size
    shown = [name for _, name in _readings(check, kern, shrunk.call, shrunk.outcome.C)]
    notes = r"( \(on \d+ of the \d+ failing cases[^)]*\)| \(one of these[^)]*\))?$"   # how far the cases agree
    named = re.sub(r" \(and \d+ more\)$", "", re.sub(notes, "", cause.removeprefix("wrong value: the result matches "))
                   ).split("; ")
    assert "int16-lanes-flush(N=300)" not in cause, cause
    assert named and all(name in shown for name in named), (cause, shown)
    assert any(name.startswith("int16-lanes-flush") for name in named), cause


def test_a_wrong_value_equal_to_its_poison_is_not_called_unwritten(monkeypatch):
    """An 8-bit output's wrong value can equal the poison byte of its element (the campaign over XNNPACK @75db3c0:
    a wrapping zero-point add gave 127 where seed 17's poison was 127): an element counts as never written only if
    it follows another poison too."""
    from lowp.conformance.run.checks import Outcome, _at_sight, poison

    class Kernel:          # what _at_sight reads of a kernel: a plain exact int8 "kernel" through reference()
        quantized = False
    C = poison((1, 5), np.int8, 17)          # [[124, -77, 14, 19, 127]]: every element holds its poison ...

    class Same:                              # ... and a rerun with another poison gives the same bytes: written
        def fresh(self):
            return self

        def run(self, call, work_seed=None):
            return Outcome(C.copy())

    class Follows:                           # ... or follows the new poison: never written
        def fresh(self):
            return self

        def run(self, call, work_seed=None):
            return Outcome(poison((1, 5), np.int8, call.seed))
    check = Check("k", "exact", "claimed", True)
    call = Call(np.zeros((1, 1), np.int8), np.zeros((1, 5), np.int8), 17)
    monkeypatch.setattr("lowp.conformance.run.checks.reference", lambda *a: np.zeros((1, 5), np.int8))  # all 5 wrong
    assert _at_sight(check, Kernel(), call, Outcome(C))[0] == "unwritten"          # without a rerun: at sight
    assert _at_sight(check, Kernel(), call, Outcome(C), Same()) is None            # the rerun says: written
    assert _at_sight(check, Kernel(), call, Outcome(C), Follows())[0] == "unwritten"
