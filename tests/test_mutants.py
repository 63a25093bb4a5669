"""The mutation suites: lowp conformance kills every mutant with a claimed FAIL or CRASH whose message names the
cause (expected.toml), and passes every control. The suites ship inside lowp (conformance/bench/mutation_suite, the
folder conformance/bench/mutation_suite of a checkout), so these tests run the suites `lowp bench mutants` runs, from the lowp
under test: the authors' was written with lowp's checks in view; the independent one by an engineer who had not
seen it, as a new user, with every bug noted before lowp ran on it. Their kill rates are what a PASS is worth."""
import tomllib

import pytest

from lowp.conformance.bench import mutants

SUITES = {suite: toml.parent for suite, toml in mutants.SUITES.items()}
EXPECTED = {suite: mutants.load_expected(folder / "expected.toml") for suite, folder in SUITES.items()}


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    from lowp.kernels.registry import _KERNELS
    for suite in SUITES:
        for name in EXPECTED[suite]:
            _KERNELS.pop(name, None)
    _, out = mutants.run_suites([folder / "mutants.toml" for folder in SUITES.values()],
                                tmp_path_factory.mktemp("mutants") / "journal.jsonl", jobs=2, progress=False)
    by = {}
    for r in out:
        by.setdefault(r["kernel"], []).append(r)
    return by


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_every_kernel_of_a_suite_has_an_expectation(suite):
    names = {k["name"] for k in tomllib.loads((SUITES[suite] / "mutants.toml").read_text())["kernel"]}
    assert names == set(EXPECTED[suite])
    kinds = [e.kind for e in EXPECTED[suite].values()]
    assert kinds.count("mutant") >= (30 if suite == "authors" else 12) and kinds.count("control") >= 3


@pytest.mark.parametrize("suite,name", sorted((s, n) for s in SUITES for n in EXPECTED[s]))
def test_mutant_killed_or_control_passes(rows, suite, name):
    kernel_rows = rows[name]
    if all(r["verdict"] == "SKIPPED" for r in kernel_rows):
        pytest.skip(f"{name}: {kernel_rows[0]['reason']}")
    expectation = EXPECTED[suite][name]
    ok, why = mutants.judge(expectation, kernel_rows)
    assert ok, f"{name} ({expectation.kind}: {expectation.bug}): {why}"
