"""Fuzzing campaigns (`lowp fuzz`): the chosen checks, run round after round with a new seed each round (new values
in every generated case, a new random source for the hypothesis search) until a time budget is spent, on the same
backends as `lowp conformance` (the process pool, or Ray), with each new counterexample reported as it appears.

A round is one conformance run (runner.run) of the checks still in play, with its own journal in
OUT/rounds/seed-S/, so the round can resume and each of its counterexamples replays as any run's does (`lowp
conformance replay ID --out OUT/rounds/seed-S`); a finished round that found nothing deletes its journal (it holds
every case: hours of rounds would fill the disk). The campaign's own log, OUT/campaign.jsonl, records the rounds
started and ended (with the cases each check executed) and the counterexamples found; `--resume` reads it,
finishes the round the last session left (its finished checks are kept) and goes on with the next seed.

What is reported and what stays in play. A claimed check that fails or crashes has its counterexample: it is
reported once and leaves the campaign (the next rounds would replay it from the example database and find the same
bug). A check this machine cannot run (SKIPPED) leaves too. A not-claimed probe (`--probes`) fails by design; it
stays in play, and a failure of a kind it had not shown (another kind, another matched variant) is reported as a
new failure mode.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from lowp.conformance.run.checks import Check
from lowp.conformance.run.runner import run, stopped

LOG = "campaign.jsonl"


class LogUnwritable(OSError):
    """The campaign's log could not be written (a full disk): the campaign stops; --resume goes on from the log."""


def round_folder(out: Path, seed: int) -> Path:
    return out / "rounds" / f"seed-{seed}"


def signature(row: dict) -> tuple:
    """What makes a failure new: a claimed check's first one; a probe's kind of failure and matched variant."""
    if row["claimed"]:
        return (row["id"],)
    cx = row.get("counterexample") or {}
    return (row["id"], cx.get("kind") or row["verdict"], cx.get("matched"))


def is_failure(row: dict) -> bool:
    return row["verdict"] in ("FAIL", "CRASH")


@dataclass
class Campaign:
    """A campaign's state, as its log holds it: the rounds run (the last may be unfinished), with the cases each
    check executed in them, the failures found, and the checks that left it and why."""
    out: Path
    checks: list[Check]
    rounds: list[dict] = field(default_factory=list)  # {"round", "seed", "checks", "finished", "seconds", "executed"}
    found: list[dict] = field(default_factory=list)       # {"round", "seed", "row"}
    retired: dict[str, str] = field(default_factory=dict)  # check id -> why it left
    unreadable: list[int] = field(default_factory=list)    # numbers of the log's lines that could not be read

    @classmethod
    def load(cls, out: Path, checks: list[Check]) -> Campaign:
        """The campaign in `out` (a new one if it has no log). A line that cannot be read (cut by a kill, not
        UTF-8, not an event this log writes) is skipped and counted, not an error."""
        c = cls(out, checks)
        log = out / LOG
        for number, raw in enumerate(log.read_bytes().split(b"\n") if log.is_file() else (), 1):
            if not raw.strip():
                continue
            try:
                c._replay(json.loads(raw.decode("utf-8")))
            except (ValueError, TypeError, KeyError, IndexError, AttributeError):
                c.unreadable.append(number)
        return c

    def _replay(self, event: dict) -> None:
        kind = event["event"]
        if kind == "round":
            self.rounds.append({**{k: event[k] for k in ("round", "seed", "checks")}, "finished": False,
                                "seconds": 0.0, "executed": {}})
        elif kind == "round-end":
            rnd = self.rounds[-1]
            rnd.update(finished=event["finished"], seconds=rnd["seconds"] + event["seconds"])
            rnd["executed"].update(event["executed"])     # by check: a resumed round's rows come again, unchanged
        elif kind == "found":
            self.found.append(event)
        elif kind == "retired":
            self.retired[event["id"]] = event["why"]

    def write(self, event: dict) -> None:
        from lowp.conformance.run.runner import append_handle
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            with append_handle(self.out / LOG) as f:      # on a new line, after a line a kill cut short
                f.write(json.dumps(event) + "\n")
        except OSError as e:
            raise LogUnwritable(e.errno, f"cannot write the campaign log {self.out / LOG}: {e.strerror or e}") from e
        self._replay(event)

    def in_play(self) -> list[Check]:
        return [c for c in self.checks if c.id not in self.retired]

    def unfinished(self) -> dict | None:
        return self.rounds[-1] if self.rounds and not self.rounds[-1]["finished"] else None

    def next_seed(self, first_seed: int) -> int:
        return self.rounds[-1]["seed"] + 1 if self.rounds else first_seed

    def observe(self, rnd: dict, row: dict) -> dict | None:
        """Take a finished row of round `rnd`: a new failure is logged (and returned), a claimed check with a
        counterexample or one that cannot run here leaves the campaign."""
        new = None
        if is_failure(row) and signature(row) not in {signature(f["row"]) for f in self.found}:
            new = {"event": "found", "round": rnd["round"], "seed": rnd["seed"], "row": row}
            self.write(new)
        if row["id"] not in self.retired:
            if row["claimed"] and is_failure(row):
                self.write({"event": "retired", "id": row["id"], "why": f"{row['verdict']} in round {rnd['round']}"})
            elif row["verdict"] == "SKIPPED":
                self.write({"event": "retired", "id": row["id"], "why": f"SKIPPED: {row['reason']}"})
        return new

    def totals(self) -> dict[str, dict]:
        """Per check id: the rounds it ran in, the cases it executed."""
        out = {c.id: {"rounds": 0, "executed": 0} for c in self.checks}
        for rnd in self.rounds:
            for check_id, executed in rnd["executed"].items():
                if check_id in out:
                    out[check_id]["rounds"] += 1
                    out[check_id]["executed"] += executed
        return out

    def tidy(self, rnd: dict) -> None:
        """A finished round that found nothing leaves no journal behind (its every case is in it: a long campaign
        would fill the disk); one that found something keeps it, for `lowp conformance replay ID`."""
        if rnd["finished"] and not any(f["round"] == rnd["round"] for f in self.found):
            import shutil
            shutil.rmtree(round_folder(self.out, rnd["seed"]), ignore_errors=True)


def campaign(checks: list[Check], out: Path, *, options: dict, budget: float, rounds: int | None = None,
             first_seed: int = 1, resume: bool = False, jobs: int | None = None, timeout: float = 600,
             ray: str | None = None, on_found=None, on_round=None) -> Campaign:
    """Run rounds until `budget` seconds have passed (no round or check starts after; those in flight finish),
    `rounds` rounds have finished in this call, or no check is left in play. on_found(event) is called with each
    new failure as it comes, on_round(round, rows) after each round. resume: go on with the campaign in `out`;
    else any campaign there is replaced."""
    if not resume:
        _clear(out)
    c = Campaign.load(out, checks)
    stop_at = time.monotonic() + budget
    done = 0
    while not stopped(stop_at) and (rounds is None or done < rounds) and c.in_play():
        rnd = c.unfinished()
        resumed = rnd is not None          # a round cut short: its journal's finished checks are kept
        if rnd is None:
            seed = c.next_seed(first_seed)
            c.write({"event": "round", "round": len(c.rounds) + 1, "seed": seed,
                     "checks": [k.id for k in c.in_play()]})
            rnd = c.rounds[-1]
        todo = [k for k in c.in_play() if k.id in rnd["checks"]]
        started = time.monotonic()

        def take(row, rnd=rnd):
            new = c.observe(rnd, row)
            if new and on_found:
                on_found(new)
        rows = run(todo, round_folder(out, rnd["seed"]) / "journal.jsonl", jobs=jobs, resume=resumed, timeout=timeout,
                   options={**options, "seed": rnd["seed"]}, progress=False, ray=ray, on_row=take, stop_at=stop_at)
        ran = [r for r in rows if r["verdict"] != "NOT RUN"]
        c.write({"event": "round-end", "round": rnd["round"], "seed": rnd["seed"], "finished": len(ran) == len(rows),
                 "seconds": round(time.monotonic() - started, 3),
                 "executed": {r["id"]: r["executed"] for r in ran if r["verdict"] != "SKIPPED"}})
        c.tidy(rnd)
        if on_round:
            on_round(rnd, rows)
        done += rnd["finished"]
    return c


def _clear(out: Path) -> None:
    """A new campaign in `out`: the old one's log and round journals go (its reports are overwritten)."""
    import shutil
    (out / LOG).unlink(missing_ok=True)
    shutil.rmtree(out / "rounds", ignore_errors=True)


# -- the campaign's report -----------------------------------------------------------------------------------------
def replay_args(out: Path, seed: int, kernels_args: str = "") -> str:
    """What `lowp conformance replay ID` needs to find a round's journal."""
    return " ".join(filter(None, [kernels_args, f"--out {round_folder(out, seed)}"]))


def status(c: Campaign, check: Check) -> str:
    found = [f for f in c.found if f["row"]["id"] == check.id]
    if check.claimed and found:
        return f"{found[0]['row']['verdict']} in round {found[0]['round']} (seed {found[0]['seed']})"
    why = c.retired.get(check.id, "")
    if why.startswith("SKIPPED"):
        return why
    if found:
        return f"{len(found)} failure mode(s), as a probe may"
    return "no counterexample"


def summary(c: Campaign) -> dict:
    totals = c.totals()
    finished = [r for r in c.rounds if r["finished"]]
    claimed = [f for f in c.found if f["row"]["claimed"]]
    return {"rounds": len(c.rounds), "rounds_finished": len(finished),
            "seeds": [c.rounds[0]["seed"], c.rounds[-1]["seed"]] if c.rounds else [],
            "seconds": round(sum(r["seconds"] for r in c.rounds), 3), "checks": len(c.checks),
            "in_play": len(c.in_play()), "executed": sum(t["executed"] for t in totals.values()),
            "claimed_counterexamples": [f["row"]["id"] for f in claimed],
            "probe_failure_modes": len(c.found) - len(claimed)}


def markdown(c: Campaign, kernels_args: str = "") -> str:
    from tabulate import tabulate

    from lowp.conformance.report import failure_lines, short_cause
    s, totals = summary(c), c.totals()
    seeds = f"seeds {s['seeds'][0]} to {s['seeds'][1]}" if s["seeds"] else "no seeds"
    lines = ["# lowp fuzz campaign", "",
             f"{s['rounds']} round(s) ({seeds}; {s['rounds_finished']} finished), {s['executed']:,} cases executed "
             f"on {s['checks']} checks in {s['seconds']:.1f} s of running rounds; {s['in_play']} check(s) still in "
             f"play.", "",
             f"**{len(s['claimed_counterexamples'])} claimed check(s) with a counterexample**"
             + (f": {', '.join(s['claimed_counterexamples'])}" if s["claimed_counterexamples"] else "")
             + f"; {s['probe_failure_modes']} failure mode(s) of not-claimed probes.", ""]
    table = [[k.kernel, k.check, k.domain, "yes" if k.claimed else "no", totals[k.id]["rounds"],
              f"{totals[k.id]['executed']:,}", short_cause(status(c, k), 72)] for k in c.checks]
    lines += [tabulate(table, headers=("kernel", "check", "domain", "claimed", "rounds", "cases executed", "status"),
                       tablefmt="github"), ""]
    for f in c.found:
        lines += [f"Found in round {f['round']} (seed {f['seed']}):", ""]
        lines += failure_lines(f["row"], replay_args(c.out, f["seed"], kernels_args))
    return "\n".join(lines).rstrip() + "\n"


def document(c: Campaign, settings: dict, seconds: float) -> dict:
    """fuzz.json: the report header, the summary, the rounds, every check's totals and the found rows (each
    validated as report.json's rows are)."""
    from lowp.conformance.report.rows import header, validate_row
    for f in c.found:
        validate_row(f["row"])
    totals = c.totals()
    return {**header(settings, seconds), "summary": summary(c), "rounds": c.rounds,
            "checks": [{"id": k.id, "claimed": k.claimed, "status": status(c, k), **totals[k.id]} for k in c.checks],
            "found": c.found}


def write(c: Campaign, settings: dict, seconds: float, kernels_args: str = "") -> dict[str, Path]:
    """fuzz.md and fuzz.json, each written whole and renamed into place (outfolder.write_text)."""
    from lowp.conformance.report.outfolder import write_text
    paths = {"markdown": c.out / "fuzz.md", "json": c.out / "fuzz.json"}
    c.out.mkdir(parents=True, exist_ok=True)
    write_text(paths["markdown"], markdown(c, kernels_args))
    write_text(paths["json"], json.dumps(document(c, settings, seconds), indent=1))
    return paths
