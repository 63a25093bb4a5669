"""The mutation suite (tests/mutants/): lowp conformance kills every mutant with a claimed FAIL or CRASH whose
message names the cause (expected.toml), and passes every control. Its kill rate is what a PASS is worth."""
from pathlib import Path

import pytest

from lowp.conformance import mutants, runner
from lowp.conformance.checks import plan
from lowp.kernels import executor, load_toml

HERE = Path(__file__).parent / "mutants"
EXPECTED = mutants.load_expected(HERE / "expected.toml")


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    from lowp.kernels.registry import _KERNELS
    for name in EXPECTED:
        _KERNELS.pop(name, None)
    kernels = load_toml(HERE / "mutants.toml")
    checks = [c for c in plan(kernels) if c.claimed]
    out = runner.run(checks, tmp_path_factory.mktemp("mutants") / "journal.jsonl", jobs=2, progress=False,
                     options={"examples": 100, "grid": False})
    by = {}
    for r in out:
        by.setdefault(r["kernel"], []).append(r)
    return by


def test_every_kernel_of_the_suite_has_an_expectation():
    names = {k["name"] for k in __import__("tomllib").loads((HERE / "mutants.toml").read_text())["kernel"]}
    assert names == set(EXPECTED)
    assert sum(e.kind == "mutant" for e in EXPECTED.values()) >= 30
    assert sum(e.kind == "control" for e in EXPECTED.values()) >= 6


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_mutant_killed_or_control_passes(rows, name):
    kernel_rows = rows[name]
    if all(r["verdict"] == "SKIPPED" for r in kernel_rows):
        pytest.skip(f"{name}: {kernel_rows[0]['reason']}")
    ok, why = mutants.judge(EXPECTED[name], kernel_rows)
    assert ok, f"{name} ({EXPECTED[name].kind}: {EXPECTED[name].bug}): {why}"
