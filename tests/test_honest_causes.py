"""A cause that several readings explain equally is stated as such (issue 34): every reading is tested against every
failing case, a tie is "one of these", a best that explains no more than half of the failing cases is "no named
variant explains it", not the counterexample's nearest. On lowp's own one-bug kernels (tests/stage_bugs/): a kernel
that clamps everything to output_min was named "output_min and output_max swapped" alone (the same function: no
case tells them apart), one that stores the upper half of its vector from the lower half was named "bias read from
the previous column"."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from lowp.conformance.run import checks

sys.path.insert(0, str(Path(__file__).parent / "stage_bugs"))
from kernels import claimed_row, entry, register  # noqa: E402  (tests/stage_bugs/kernels.py)


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    return register("".join(entry("scalar_fp32", bug) for bug in (13, 14)), tmp_path_factory.mktemp("honest"))


def claimed(kernels, name):
    return claimed_row(kernels, name)


@pytest.mark.native
def test_a_clamp_to_output_min_is_one_of_its_readings_not_a_swap(kernels):
    """min(v, output_min - zp) for min(v, output_max - zp): every output is output_min, which output_min and
    output_max swapped gives too, on every case in the domain; the cause says both, undecided."""
    cause = claimed(kernels, "sb_scalar_fp32_13")["cause"]
    assert cause.startswith("wrong value: the result matches"), cause
    assert "every output at output_min" in cause and "output_min and output_max swapped" in cause, cause
    assert cause.endswith(f"({checks.UNDECIDED})"), cause


@pytest.mark.native
def test_a_wrong_half_vector_store_is_named_as_such_not_as_a_bias_read(kernels):
    """Columns 2, 3 of each block stored from columns 0, 1: a 1x3 counterexample reads as a bias from column 0 or
    the previous column too, but the other failing cases do not; the store reads every one of them."""
    row = claimed(kernels, "sb_scalar_fp32_14")
    cause = row["cause"]
    assert "the right value of the element 2 columns to its left" in cause, cause
    assert "bias read from" not in cause and "one of these" not in cause, cause


# ------------------------------------------------------------------------------- the wording, reading by reading

class Kern:
    quantized = False


def readings_by_case(monkeypatch, table):
    """_readings answering from `table` (the call's seed -> its (key, name) readings)."""
    monkeypatch.setattr(checks, "_readings", lambda check, kern, call, C: table[call.seed])


def call(seed):
    return checks.Call(np.zeros((1, 1), np.int8), np.zeros((1, 1), np.int8), seed, None)


def variants(monkeypatch, table):
    readings_by_case(monkeypatch, table)
    others = [(call(s), None) for s in table if s != 0]
    return checks._variants(checks.Check("k", "exact", "claimed", True), Kern(), call(0), None, others)


def test_a_reading_every_failing_case_shows_is_named_alone(monkeypatch):
    x, y = ("x", "X"), ("y", "Y")
    assert variants(monkeypatch, {0: [x, y], 1: [x], 2: [x, y], 3: [x]}) == ": the result matches X"


def test_readings_every_case_shows_are_one_of_them(monkeypatch):
    x, y = ("x", "X"), ("y", "Y")
    assert variants(monkeypatch, {0: [x, y], 1: [x, y], 2: [y, x]}) == \
        f": the result matches X; Y ({checks.UNDECIDED})"


def test_a_reading_most_cases_show_says_how_many(monkeypatch):
    x, y = ("x", "X"), ("y", "Y")
    assert variants(monkeypatch, {0: [x, y], 1: [x], 2: [], 3: [x, y]}) == \
        ": the result matches X (on 3 of the 4 failing cases)"


def test_the_nearest_reading_of_the_counterexample_alone_is_no_name(monkeypatch):
    """The counterexample reads as X, the three other failing cases as nothing or something else: X is not the
    cause; the wording says so (the campaign's old "nearest" fallback named X)."""
    x, y = ("x", "X"), ("y", "Y")
    text = variants(monkeypatch, {0: [x], 1: [y], 2: [], 3: [y]})
    assert text.startswith(" (no named variant explains it") and "1 of the 4" in text, text


def test_findings_group_whatever_share_of_cases_a_reading_explains():
    from lowp.conformance.report.campaign import finding_key
    base = "wrong value: the result matches xnnpack-fp32 with bias read from the next column (n + 1)"
    keys = {finding_key({"cause": base}), finding_key({"cause": base + " (on 4 of the 5 failing cases)"}),
            finding_key({"cause": base + " (on 2 of the 3 failing cases)"})}
    assert len(keys) == 1, keys
    tie = f"wrong value: the result matches A; B ({checks.UNDECIDED})"
    assert finding_key({"cause": tie}) == finding_key({"cause": tie.replace(
        "(one", "(on 3 of the 4 failing cases; one")}) != finding_key({"cause": "wrong value: the result matches A"})


def test_a_known_variant_and_the_family_reading_that_describes_it_are_not_alternatives(monkeypatch):
    """The contract's known variant (a named implementation: XNNPACK's AVX-VNNI wrap, pair-saturating) beside a
    family reading of the same output is one cause in two words, not "one of these"; two families still are."""
    known, x, y = ("pair-saturating", "pair-saturating"), ("x", "X"), ("y", "Y")
    assert variants(monkeypatch, {0: [known, x], 1: [known, x]}) == ": the result matches pair-saturating; X"
    assert variants(monkeypatch, {0: [known, x, y], 1: [known, x, y]}).endswith(f"({checks.UNDECIDED})")
