"""`lowp fuzz` (issue 14): round after round with a new seed until a time budget, new counterexamples reported as
they appear, resumable. tc_needle (tests/cases/rare.c) is wrong for about 64 of the 65,536 values of
(A[0][0], B[0][0]): `lowp conformance` at seed 0 passes it, a campaign's search finds it a few rounds in (its
batched draws find it in round 1: tests/test_batch.py)."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from lowp.commands.fuzz import duration
from lowp.conformance.run import fuzz
from lowp.conformance.run import pool
from lowp.conformance.run.checks import plan
from lowp.kernels import kernel

from .conftest import CASES

RARE = str(CASES / "rare.toml")


def _lowp(*args, cwd):
    return subprocess.run([sys.executable, "-m", "lowp", *args], capture_output=True, text=True, timeout=900,
                          cwd=cwd, env=os.environ)


def test_budgets_read_as_a_person_writes_them():
    assert [duration(t) for t in ("90", "90s", "10m", "2h", "1h30m", "1.5m")] == [90, 90, 600, 7200, 5400, 90]
    for bad in ("", "10x", "m10", "1h 30m"):
        with pytest.raises(ValueError):
            duration(bad)


def test_a_campaign_finds_what_one_run_misses_and_says_how_to_replay_it(tmp_path):
    one_run = _lowp("conformance", "--kernels", RARE, "--kernel", "tc_needle", "--profile", "quick", "--out",
                    str(tmp_path / "once"), cwd=tmp_path)
    assert one_run.returncode == 0, one_run.stdout        # seed 0 misses the needle
    # --draw-seconds 0: the search alone, round after round (the draws find it in round 1: tests/test_batch.py)
    done = _lowp("fuzz", "--kernels", RARE, "--kernel", "tc_needle", "--kernel", "tc_right", "--profile", "quick",
                 "--budget", "10m", "--rounds", "30", "--draw-seconds", "0", "--out", str(tmp_path / "fz"),
                 cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    found = re.findall(r"^COUNTEREXAMPLE in round (\d+) \(seed (\d+)\): (\S+)$", done.stdout, re.M)
    assert {f[2] for f in found} == {"tc_needle:model:full", "tc_needle:exact:claimed"}, done.stdout
    assert all(int(r) > 1 for r, _, _ in found)
    doc = json.loads((tmp_path / "fz" / "fuzz.json").read_text())
    totals = {c["id"]: c for c in doc["checks"]}
    assert totals["tc_right:exact:claimed"]["rounds"] == 30 and totals["tc_right:exact:claimed"]["executed"] > 30 * 200
    assert totals["tc_needle:exact:claimed"]["rounds"] <= max(int(r) for r, _, _ in found)
    assert doc["summary"]["claimed_counterexamples"] and doc["summary"]["in_play"] == 2
    # Only the rounds that found something keep their journal; their replay lines work.
    assert {p.name for p in (tmp_path / "fz" / "rounds").iterdir()} == {f"seed-{s}" for _, s, _ in found}
    replays = re.findall(r"^repro: `lowp (conformance replay .*)`$", done.stdout, re.M)
    assert len(replays) == 2
    for line in replays + [re.search(r"^replay: `lowp (conformance replay .*)`$", done.stdout, re.M).group(1)]:
        again = _lowp(*shlex.split(line), cwd=tmp_path)
        assert again.returncode == 1 and ": FAIL" in again.stdout, (line, again.stdout, again.stderr)
    assert "tc_needle | exact" in (tmp_path / "fz" / "fuzz.md").read_text().replace("  ", " ").replace("  ", " ")


def test_a_cut_round_is_finished_by_resume_without_running_a_check_twice(tmp_path, monkeypatch):
    """The budget runs out after the round's first check (forced here): the rest are NOT RUN and the round is
    unfinished; --resume runs just those, with the same seed, and the round ends; then new seeds follow."""
    checks = [c for c in plan([kernel("u8s8s32_ssse3"), kernel("u8s8s32_avx2")]) if c.claimed]
    ran = []            # the rows the runner made, round by round
    original = fuzz.run

    def run(todo, journal, *, on_row, **kwargs):
        def note(row):
            ran.append((kwargs["options"]["seed"], row["id"]))
            on_row(row)
        return original(todo, journal, on_row=note, **kwargs)
    monkeypatch.setattr(fuzz, "run", run)
    options = {"examples": 5, "grid": False}
    out = tmp_path / "fz"
    with monkeypatch.context() as m:
        m.setattr(pool, "stopped", lambda stop_at: bool(ran))       # the time is up once a row came
        m.setattr(fuzz, "stopped", lambda stop_at: bool(ran))
        c = fuzz.campaign(checks, out, options=options, budget=3600, jobs=1, first_seed=4)
    assert [(r["seed"], r["finished"]) for r in c.rounds] == [(4, False)] and len(ran) == 1
    assert list(c.rounds[0]["executed"]) == [ran[0][1]]
    c = fuzz.campaign(checks, out, options=options, budget=3600, jobs=1, rounds=1, resume=True)
    assert [(r["seed"], r["finished"]) for r in c.rounds] == [(4, True)]
    assert sorted(ran) == sorted((4, k.id) for k in checks)          # each check of seed 4 once
    assert not any((out / "rounds").iterdir())        # a finished round that found nothing keeps no journal
    c = fuzz.campaign(checks, out, options=options, budget=3600, jobs=1, rounds=2, resume=True)
    assert [r["seed"] for r in c.rounds] == [4, 5, 6] and len(ran) == 3 * len(checks)
    assert all(t["rounds"] == 3 for t in c.totals().values())
    log = [json.loads(line) for line in (out / fuzz.LOG).read_text().splitlines()]
    assert [e["seed"] for e in log if e["event"] == "round"] == [4, 5, 6]


def test_probes_stay_in_play_and_a_failure_mode_is_reported_once(tmp_path):
    checks = plan([kernel("u8s8s32_ssse3")])
    probe = next(c for c in checks if not c.claimed)
    events = []
    c = fuzz.campaign(checks, tmp_path / "fz", options={"examples": 20, "grid": False}, budget=3600, rounds=2,
                      on_found=events.append)
    assert c.totals()[probe.id]["rounds"] == 2 and probe.id not in c.retired
    modes = [e for e in events if e["row"]["id"] == probe.id]
    assert modes and len(modes) == len({fuzz.signature(e["row"]) for e in modes}) < 3
    assert all(not e["row"]["claimed"] for e in events)


def test_bad_budgets_rounds_and_kernels_are_usage_errors(tmp_path, capsys):
    from lowp.cli import main
    for args in (["--budget", "0"], ["--rounds", "0"], ["--budget", "ten minutes"]):
        with pytest.raises(SystemExit) as e:
            main(["fuzz", *args, "--out", str(tmp_path / "fz")])
        assert e.value.code == 2, args
    assert main(["fuzz", "--kernel", "no_such_kernel", "--out", str(tmp_path / "fz")]) == 2
    assert "no kernel of this name" in capsys.readouterr().err and not (tmp_path / "fz").exists()


def test_resume_goes_on_with_the_kernels_the_campaign_was_started_with(tmp_path):
    """`lowp fuzz --resume --out F`, as the end of a campaign prints it, fuzzes the campaign's own checks (its first
    round names them), not every registered kernel; a --kernel that chooses others is refused (exit 2), so two
    campaigns are never mixed in one log. A new round says nothing about resuming."""
    out = str(tmp_path / "fz")
    common = ("--kernels", RARE, "--profile", "quick", "--draw-seconds", "0.2", "--out", out)
    first = _lowp("fuzz", "--kernel", "tc_right", "--budget", "10m", "--rounds", "1", *common, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "fuzzing 2 check(s) of 1 kernel(s)" in first.stdout and "resume:" not in first.stderr
    again = _lowp("fuzz", "--resume", "--budget", "10m", "--rounds", "1", *common, cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "fuzzing 2 check(s) of 1 kernel(s)" in again.stdout, again.stdout
    doc = json.loads((tmp_path / "fz" / "fuzz.json").read_text())
    assert {c["id"] for c in doc["checks"]} == {"tc_right:model:full", "tc_right:exact:claimed"}
    assert doc["summary"]["rounds"] == 2
    other = _lowp("fuzz", "--resume", "--kernel", "tc_needle", "--budget", "10m", *common, cwd=tmp_path)
    assert other.returncode == 2 and "error: --resume: the campaign in" in other.stderr, other.stderr
    assert "tc_right:exact:claimed" in other.stderr and "tc_needle" in other.stderr
    unknown = _lowp("fuzz", "--resume", "--budget", "10m", "--profile", "quick", "--out", out, cwd=tmp_path)
    assert unknown.returncode == 2 and "not registered here" in unknown.stderr and "--kernels" in unknown.stderr
