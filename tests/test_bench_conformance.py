"""`lowp bench conformance` on a few kernels: the copies are real kernels run as `lowp conformance` runs them, the
tables are all there and every count adds up (no timing is asserted: this is a benchmark's smoke test)."""
from __future__ import annotations

import tomllib

import pytest

from lowp.cli import main
from lowp.conformance.bench import conformance as bench
from lowp.conformance.run.checks import plan
from lowp.kernels import kernels
from lowp.kernels.schema import specs_from_toml

AARCH64, X86 = reversed(bench.default_tomls())


def native_or_emulated(specs) -> dict[str, int]:
    """How many of these kernels run natively here and how many emulated (the AArch64 ones always; an x86 one on
    Bochs where this CPU lacks a feature: the VNNI kernel on an AVX2-only host)."""
    from lowp.kernels import executor
    backends = [executor(spec.to_kernel()).backend for spec in specs]
    return {"native": backends.count("native"), "emulated": len(backends) - backends.count("native")}


@pytest.fixture(scope="module")
def quick():
    """4 kernels, the AArch64 file first: two emulated, then the AVX2 one and the seeded VNNI one, natively."""
    result = bench.run([AARCH64, X86], n=4, jobs=2, examples=10, progress=False)
    return result, bench.summarize(result)


def test_copies_cycle_over_the_entries_with_distinct_names_and_absolute_paths():
    entries = bench.read_entries([X86, AARCH64])
    n = len(entries) + 3
    made = bench.copies(entries, n)
    assert [entry for entry, _ in made] == [e["name"] for e in entries] + [e["name"] for e in entries[:3]]
    assert len({e["name"] for _, e in made}) == n
    reread = tomllib.loads(bench.toml_text([e for _, e in made]))["kernel"]
    assert reread == [e for _, e in made]                  # the TOML written is the entries, value for value
    for e in reread:
        assert e["source"].startswith("/") and all(not f.startswith("-I..") for f in e["cflags"])
    with pytest.raises(ValueError, match="--copies"):
        bench.copies(entries, 0)


def test_the_run_is_lowp_conformances_plan_over_the_copies_and_leaves_the_registry_as_it_was(quick):
    result, s = quick
    assert s["kernels"] == 4
    assert s["backends"] == native_or_emulated(specs_from_toml(AARCH64) + specs_from_toml(X86)[:2])
    assert not any(k.name in result["entry_of"] for k in kernels())        # the copies are unregistered again
    per_entry = {}
    for r in result["rows"]:
        per_entry.setdefault(result["entry_of"][r["kernel"]], set()).add((r["check"], r["domain"], r["claimed"]))
    originals = [s.to_kernel() for s in specs_from_toml(AARCH64) + specs_from_toml(X86)[:2]]   # not registered
    assert per_entry == {k.name: {(c.check, c.domain, c.claimed) for c in plan([k])} for k in originals}


def test_the_counts_add_up(quick):
    result, s = quick
    rows = result["rows"]
    assert s["checks"] == len(rows) == sum(s["verdicts"].values())
    checks = {t["backend"]: t["n"] for t in s["timings"] if t["measure"] == "per check"}
    assert sum(checks.values()) == len(rows)
    for measure in ("per kernel (all its checks)", "per kernel (claimed check)"):
        assert {t["backend"]: t["n"] for t in s["timings"] if t["measure"] == measure} == s["backends"]
    for t in s["timings"]:
        assert t["median"] <= t["p90"] <= t["max"]
    assert sum(e["copies"] for e in s["entries"]) == s["kernels"] and len(s["entries"]) == 4
    assert sum(e["checks"] for e in s["entries"]) == len(rows)      # each entry has one copy here
    assert 0 < result["cpu_share"] and s["seconds"]["run"] <= s["seconds"]["total"]
    assert s["check_seconds"] == pytest.approx(sum(r["seconds"] for r in rows))
    assert s["check_seconds"] == pytest.approx(sum(e["seconds"] for e in s["entries"]))
    claimed_failures = sum(n for (v, c), n in s["verdicts"].items() if c == "claimed" and v in ("FAIL", "CRASH"))
    assert claimed_failures == len(s["by_design"]) + len(s["unexpected"])
    # The seeded VNNI kernel's claimed contract check is the one failure its own model predicts, and it fails.
    seeded = [e["kernel"] for e in s["entries"] if e["by design"]]
    assert seeded == [k for k, why in result["expected"].items() if why]
    assert s["by_design"] == [f"{seeded[0]}:xnnpack-fp32:claimed"] and not s["unexpected"]
    assert sum(s["probes_failed"].values()) == s["verdicts"].get(("FAIL", "not claimed"), 0)


def test_the_cli_prints_the_tables_and_exits_0_despite_the_seeded_failure(capsys):
    assert main(["bench", "conformance", "--copies", "2", "--examples", "5", "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    n = native_or_emulated(specs_from_toml(X86)[:2])
    assert f"lowp conformance over 2 kernels ({n['native']} native, {n['emulated']} emulated" in out
    for header in ("| wall time", "| seconds ", "| verdict", "| entry "):
        assert header in out
    assert "FAIL by design, not a benchmark failure" in out
    assert "qs8_qc8w_gemm_4x16c4_fp32_avx512vnni " in out


def test_a_bad_kernels_file_exits_2_naming_it(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[[kernel]]\nname = 'x'\n")
    assert main(["bench", "conformance", "--kernels", str(bad), "--copies", "1"]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "bad.toml" in err
    assert main(["bench", "conformance", "--kernels", str(tmp_path / "missing.toml")]) == 2
    assert "missing.toml" in capsys.readouterr().err
