"""The mutation suite: kernels that are each a correct kernel with one realistic bug, and correct controls, with
what a kernel author should be told about each (mutation_suite/expected.toml, beside this module). `lowp
conformance` must kill every mutant (a claimed check FAILs or CRASHes, and its message names the cause) and pass
every control: a PASS is only worth what the suite can kill. Used by tests/test_mutants.py and `lowp bench
mutants`.

The suite ships inside the package (package data), so `lowp bench mutants` runs from an installed lowp. Two
suites: the authors' (mutation_suite/), written with lowp's checks in view, and the independent one
(mutation_suite/independent/), written by an engineer who had not seen it, with every bug noted first."""
from __future__ import annotations

import re
import statistics
import tomllib
from dataclasses import dataclass
from pathlib import Path

SUITE = Path(__file__).resolve().parent / "mutation_suite"
# Each suite: its kernels' TOML, with its expected.toml beside it.
SUITES = {"authors": SUITE / "mutants.toml", "independent": SUITE / "independent" / "mutants.toml"}

# What a row must say for each kind of bug (expected.toml's `cause`); {buffer} is the expectation's buffer.
CAUSES = {
    "oob-read": r"out-of-bounds read[^;]*buffer '{buffer}'",
    "oob-write": r"out-of-bounds write[^;]*buffer '{buffer}'",
    "state": r"depends on earlier calls|reads workspace it did not write|non-deterministic",
    "poison-C": r"accumulates into C|reads C before writing it",
    "unwritten": r"never written",
    "poison-work": r"reads workspace it did not write",
    "wrong-value": r"wrong value|accumulates into C|never written",
    "path": r"the claimed path never ran",
    "hang": r"budget of|timed out",
    "misaligned": r"misaligned access[^;]*buffer '{buffer}'",
}


@dataclass
class Expectation:
    name: str
    kind: str                 # 'mutant', 'control', or 'equivalent' (a bug that changes nothing a run can see)
    bug: str
    cause: str | None = None
    buffer: str | None = None
    variant: str | None = None
    first_k: int | None = None
    # A CPU feature on which the bug changes nothing (a dispatch that tests the wrong CPUID bit takes the right path
    # on a CPU with both bits): there the mutant counts as equivalent, elsewhere it must be killed.
    equivalent_on: str | None = None

    @property
    def pattern(self) -> re.Pattern:
        return re.compile(CAUSES[self.cause].format(buffer=re.escape(self.buffer or "")), re.S)


def load_expected(path: Path) -> dict[str, Expectation]:
    data = tomllib.loads(Path(path).read_text())
    out = {}
    for name, entry in data.items():
        known = {k: entry[k] for k in ("kind", "bug", "cause", "buffer", "variant", "first_k", "equivalent_on")
                 if k in entry}
        e = out[name] = Expectation(name, **known)
        if e.kind == "mutant" and e.equivalent_on and _host_has(e.equivalent_on):
            e.kind = "equivalent"
            e.bug += f" (equivalent on this CPU: it has {e.equivalent_on})"
        if e.kind == "mutant" and e.cause not in CAUSES:
            raise ValueError(f"{path}: {name}: cause {e.cause!r} is not one of {', '.join(CAUSES)}")
    return out


def _host_has(feature: str) -> bool:
    from lowp.kernels.features import host_features
    return feature in host_features("x86-64")


def run_suites(tomls, journal: Path, *, examples: int = 100, jobs: int | None = None,
               progress: bool = True) -> tuple[dict[str, Expectation], list[dict]]:
    """Register each suite's kernels (a mutants TOML with expected.toml beside it) and run their claimed checks
    in child processes: (expectations, rows)."""
    from lowp.kernels import load_toml

    from lowp.conformance.run.checks import plan
    from lowp.conformance.run.runner import run
    expected, kernels = {}, []
    for toml in map(Path, tomls):
        expected.update(load_expected(toml.with_name("expected.toml")))
        kernels += load_toml(toml)
    checks = [c for c in plan(kernels) if c.claimed]
    return expected, run(checks, journal, jobs=jobs, progress=progress, options={"examples": examples, "grid": False})


def row_text(row: dict) -> str:
    """Everything a row tells its reader about why it failed."""
    cx = row.get("counterexample") or {}
    return " | ".join(str(x) for x in (row.get("verdict"), row.get("reason"), row.get("cause"), cx.get("cause"),
                                       cx.get("fault")) if x)


def judge(expectation: Expectation, rows: list[dict]) -> tuple[bool, str]:
    """(as expected?, why): a control passes every claimed check; a mutant fails one of them, naming its cause."""
    claimed = [r for r in rows if r["claimed"]]
    if not claimed:
        return False, "no claimed check ran"
    bad = [r for r in claimed if r["verdict"] in ("FAIL", "CRASH")]
    if expectation.kind == "equivalent":
        return True, "an equivalent mutant: not counted"
    if expectation.kind == "control":
        skipped = [r for r in claimed if r["verdict"] not in ("PASS",) and r not in bad]
        if bad or skipped:
            r = (bad or skipped)[0]
            return False, f"control {r['id']}: {row_text(r)}"
        return True, "passes"
    if not bad:
        return False, "survived: every claimed check " + "/".join(sorted({r["verdict"] for r in claimed}))
    for r in bad:
        if expectation.pattern.search(row_text(r)):
            return True, f"{r['id']}: {row_text(r)}"
    return False, f"killed without naming the cause ({expectation.cause}): {row_text(bad[0])}"


def summary(expectations: dict[str, Expectation], rows: list[dict]) -> dict:
    """Kill rate, false alarms, time to the first counterexample and counterexample sizes."""
    by_kernel: dict[str, list[dict]] = {}
    for r in rows:
        by_kernel.setdefault(r["kernel"], []).append(r)
    verdicts = {name: judge(e, by_kernel.get(name, [])) for name, e in expectations.items()}
    mutants = [n for n, e in expectations.items() if e.kind == "mutant"]
    controls = [n for n, e in expectations.items() if e.kind == "control"]
    firsts = [r["first_failure_seconds"] for n in mutants for r in by_kernel.get(n, [])
              if r["claimed"] and "first_failure_seconds" in r]
    sizes = [(r["counterexample"]["shape"], r["counterexample"]["nonzero"]) for n in mutants
             for r in by_kernel.get(n, []) if r["claimed"] and r.get("counterexample")]
    return {"mutants": len(mutants), "killed": sum(verdicts[n][0] for n in mutants),
            "equivalent": sum(e.kind == "equivalent" for e in expectations.values()),
            "controls": len(controls), "false_alarms": sum(not verdicts[n][0] for n in controls),
            "median_first_failure_seconds": statistics.median(firsts) if firsts else None,
            "median_counterexample_elements": statistics.median(m * k + k * n for (m, n, k), _ in sizes)
            if sizes else None,
            "median_counterexample_nonzero": statistics.median(z for _, z in sizes) if sizes else None,
            "verdicts": verdicts}
