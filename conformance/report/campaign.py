"""A campaign's report: many kernels of one library, each judged by the ordinary checks or skipped with a reason,
summed up per group (datatype, op, ISA) in `campaign.md` and `campaign.json` beside the run's report.md.

The report half of the campaign engine (lowp.conformance.run.campaign; the library half, what each kernel is, lives
in lowp.conformance.libraries): it knows kernels only as an `Item` (a name, the group it counts in, and why it was skipped, if it was) and the rows the
runner returned, so another library's campaign reports the same way.
"""
from __future__ import annotations

import json
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from tabulate import tabulate

from lowp.conformance.report import failure_lines, short_cause

GROUP_KEYS = ("datatype", "op", "isa")      # a library that says none (Library.group_keys) groups so
SCHEMA = "lowp-campaign/1"
JUDGED = ("passed", "failed", "unclaimed")   # the statuses of a kernel whose checks ran


@dataclass
class Item:
    """One kernel of the campaign: `skip` (category, message) if it never reached the checks."""
    name: str
    group: dict
    where: str = ""
    skip: tuple[str, str] | None = None
    build_seconds: float = 0.0
    status: str = ""                        # filled by summarize(): passed, failed, unclaimed, skipped, not run
    wrong: bool = False                     # an unclaimed kernel: one of its checks failed or crashed
    checks: list[str] = field(default_factory=list)
    seconds: float = 0.0
    reused: bool = False                    # every row of it a verdict an earlier campaign kept (run/verdicts.py)


def summarize(items: list[Item], rows: list[dict]) -> list[Item]:
    """Each item's status from its rows: failed (a claimed check FAILs or CRASHes), passed, unclaimed (judged,
    claiming nothing: a wasm relaxed-dot kernel under a behaviour XNNPACK does not dispatch it on; `wrong` if a check
    failed), skipped (before the run, or every check SKIPPED: no executor here) or not run (the run stopped
    first)."""
    by_kernel = defaultdict(list)
    for row in rows:
        by_kernel[row["kernel"]].append(row)
    for item in items:
        mine = by_kernel.get(item.name, [])
        item.checks = [r["id"] for r in mine]
        item.seconds = round(sum(r.get("seconds", 0.0) for r in mine), 3)
        item.reused = bool(mine) and all(r.get("reused") for r in mine)
        if item.skip is not None:
            item.status = "skipped"
        elif mine and all(r["verdict"] == "SKIPPED" for r in mine):
            item.status, item.skip = "skipped", ("cannot run here", mine[0].get("reason") or "SKIPPED")
        elif any(r["claimed"] and r["verdict"] in ("FAIL", "CRASH") for r in mine):
            item.status = "failed"
        elif not mine or any(r["verdict"] == "NOT RUN" for r in mine):
            item.status = "not run"
        elif not any(r["claimed"] for r in mine):
            item.status, item.wrong = "unclaimed", any(r["verdict"] in ("FAIL", "CRASH") for r in mine)
        else:
            item.status = "passed"
    return items


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timing(items: list[Item]) -> dict:
    """Per-kernel check seconds (the sum of its checks' own times) of the judged kernels: median, p90, max."""
    seconds = [i.seconds for i in items if i.status in JUDGED]
    return {"kernels": len(seconds), "median": round(statistics.median(seconds), 3) if seconds else 0.0,
            "p90": round(_quantile(seconds, 0.9), 3), "max": round(max(seconds, default=0.0), 3),
            "total": round(sum(seconds), 1)}


def groups(items: list[Item], keys: tuple[str, ...] = GROUP_KEYS) -> list[dict]:
    """found / judged / passed / failed / skipped / not run, and the median seconds a kernel took, per group (the
    values of `keys`)."""
    table = defaultdict(Counter)
    seconds = defaultdict(list)
    for i in items:
        key = tuple(i.group.get(k, "?") for k in keys)
        table[key]["found"] += 1
        table[key][i.status] += 1
        table[key]["unclaimed wrong"] += i.wrong
        if i.status in JUDGED:
            table[key]["judged"] += 1
            seconds[key].append(i.seconds)
    return [{**dict(zip(keys, key)), **{k: c[k] for k in ("found", "judged", "passed", "failed", "unclaimed",
                                                               "unclaimed wrong", "skipped", "not run")},
             "median_seconds": round(statistics.median(seconds[key]), 2) if seconds[key] else None}
            for key, c in sorted(table.items())]


def skip_reasons(items: list[Item]) -> list[dict]:
    """Skipped kernels by category, most first, with the first kernel's own message as the example."""
    by = defaultdict(list)
    for i in items:
        if i.status == "skipped":
            by[i.skip[0]].append(i)
    return [{"category": cat, "count": len(its), "isas": sorted({i.group.get("isa", "?") for i in its}),
             "example": {"kernel": its[0].name, "reason": its[0].skip[1]}}
            for cat, its in sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0]))]


def failures(items: list[Item], rows: list[dict]) -> list[dict]:
    """Every claimed check that failed or crashed, with its kernel's group and the head of its cause."""
    group = {i.name: i.group for i in items}
    return [{"kernel": r["kernel"], "check": r["id"], "verdict": r["verdict"], **group.get(r["kernel"], {}),
             "cause": r.get("cause") or r.get("reason") or ""}
            for r in rows if r["claimed"] and r["verdict"] in ("FAIL", "CRASH")]


# How many of the failing cases a reading explains (run/checks.py _variants): a detail of one kernel's run, not of
# the bug: "(on 4 of the 5 failing cases)", alone or before the undecided note.
SHARE_NOTE = r" \(on \d+ of the \d+ failing cases\)$|on \d+ of the \d+ failing cases; "


def finding_key(row: dict) -> str:
    """What a failure is, without what one case of it was: its cause up to the details (the kind and the readings
    that explain it: 'wrong value: the result matches X; Y', without how many failing cases they explain), every
    number in it a '#'. The same bug in 204
    kernels (one wrapping zero-point add in a template) is one key, whichever of a kernel's checks showed it."""
    cause = row.get("cause") or row.get("reason") or row["verdict"]
    cause = re.sub(SHARE_NOTE, "", cause)
    return re.sub(r"(?<![\w.])-?\d+(\.\d+)?(?!\w)", "#", ": ".join(cause.split(": ")[:2]))


def findings(items: list[Item], rows: list[dict]) -> list[dict]:
    """The claimed failures grouped by cause (finding_key), most kernels first: each with the kernels it covers
    and, as its example, the failure with the smallest counterexample (the fewest elements, then nonzero ones, a
    contract's check before the behaviour model's: the contract is what a maintainer acts on)."""
    group = {i.name: i.group for i in items}
    by = defaultdict(list)
    for r in rows:
        if r["claimed"] and r["verdict"] in ("FAIL", "CRASH"):
            by[finding_key(r)].append(r)

    def size(r):
        cx = r.get("counterexample") or {}
        shape = cx.get("shape") or (1 << 30, 1, 1)
        return (shape[0] * shape[1] * shape[2], cx.get("nonzero", 0), r["check"] == "model", r["id"])
    out = []
    for key, found in sorted(by.items(), key=lambda kv: (-len({r["kernel"] for r in kv[1]}), kv[0])):
        example = min(found, key=size)
        kernels = sorted({r["kernel"] for r in found})
        out.append({"id": f"F{len(out) + 1}", "cause": key, "kernels": kernels, "checks": len(found),
                    "isas": sorted({group.get(k, {}).get("isa", "?") for k in kernels}),
                    "example": example["id"], "example_cause": example.get("cause") or example.get("reason") or ""})
    return out


def document(items: list[Item], rows: list[dict], *, library: str, source: dict, settings: dict,
             seconds: dict, group_keys: tuple[str, ...] = GROUP_KEYS, found: list[dict] | None = None) -> dict:
    totals = Counter(i.status for i in items)
    return {"schema": SCHEMA, "library": library, "source": source, "settings": settings, "seconds": seconds,
            "group_keys": list(group_keys),
            "totals": {"found": len(items), "judged": sum(totals[s] for s in JUDGED), "passed": totals["passed"],
                       "failed": totals["failed"], "unclaimed": totals["unclaimed"],
                       "unclaimed_wrong": sum(i.wrong for i in items), "skipped": totals["skipped"],
                       "not_run": totals["not run"]},
            "per_kernel_seconds": timing(items), "groups": groups(items, group_keys), "skipped_by_reason": skip_reasons(items),
            "failures": failures(items, rows), "findings": findings(items, rows) if found is None else found,
            "kernels": [{"name": i.name, **i.group, "where": i.where, "status": i.status,
                         **({"wrong": i.wrong} if i.status == "unclaimed" else {}),
                         "category": i.skip[0] if i.skip else None, "reason": i.skip[1] if i.skip else None,
                         "checks": i.checks, "seconds": i.seconds, "build_seconds": round(i.build_seconds, 3),
                         "reused": i.reused}
                        for i in items]}


def _unclaimed(group: dict) -> str:
    """'28 (20)': the kernels judged claiming nothing, and how many of them a check found wrong."""
    return f"{group['unclaimed']} ({group['unclaimed wrong']})" if group.get("unclaimed") else ""


def _reused_line(doc: dict) -> str:
    reused = sum(1 for k in doc["kernels"] if k.get("reused"))
    return (f" {reused} of {doc['totals']['judged']} judged kernels' verdicts were reused from earlier campaigns "
            f"(nothing they depend on changed; --fresh judges them again).") if reused else ""


def markdown(doc: dict, rows: list[dict], replay_args: str = "") -> str:
    t, s, k = doc["totals"], doc["seconds"], doc["per_kernel_seconds"]
    keys = tuple(doc.get("group_keys", GROUP_KEYS))
    lines = [f"# lowp campaign: {doc['library']}", "",
             f"{doc['source'].get('path')}" + (f" @ {doc['source']['commit']}" if doc["source"].get("commit") else "")
             + f"; settings: {_settings_line(doc['settings'])}.", "",
             f"{t['found']} kernels found: {t['judged']} judged ({t['passed']} passed, {t['failed']} failed"
             + (f", {t['unclaimed']} claiming nothing, {t['unclaimed_wrong']} of them wrong somewhere"
                if t.get("unclaimed") else "") + "), "
             f"{t['skipped']} skipped" + (f", {t['not_run']} not run" if t["not_run"] else "")
             + f"; wall time {s['wall']:.1f} s (mapping {s['mapping']:.1f} s, builds {s['build']:.1f} s, "
             f"checks {s['checks']:.1f} s)." + _reused_line(doc), "",
             f"Per judged kernel, the seconds of its checks: median {k['median']:.2f}, p90 {k['p90']:.2f}, max "
             f"{k['max']:.2f} ({k['kernels']} kernels).", "",
             "A kernel is judged when its checks ran (its behaviour model, its claimed output contract, the probes "
             "outside it: report.md has every row); it failed when a claimed check failed or crashed.", "",
             f"## Per {_spoken(keys)}", "",
             tabulate([[g[key] for key in (*keys, "found", "judged", "passed", "failed")]
                       + [_unclaimed(g), g["skipped"], g["median_seconds"] if g["median_seconds"] is not None else ""]
                       for g in doc["groups"]],
                      headers=(*keys, "found", "judged", "passed", "failed", "unclaimed (wrong)", "skipped",
                               "median s"),
                      tablefmt="github"), ""]
    if doc["skipped_by_reason"]:
        lines += ["## Skipped, by reason", "",
                  tabulate([[r["category"], r["count"], ", ".join(r["isas"]), _clip(f"{r['example']['kernel']}: "
                                                                              f"{r['example']['reason']}", 200)]
                            for r in doc["skipped_by_reason"]],
                           headers=("reason", "kernels", "ISAs", "example"), tablefmt="github"), ""]
    lines += _failure_lines(doc, rows, replay_args)
    skipped = [i for i in doc["kernels"] if i["status"] == "skipped"]
    if skipped:
        lines += ["## Every skipped kernel", "",
                  tabulate([[i["name"], i["where"], _clip(i["reason"], 240)] for i in skipped],
                           headers=("kernel", "entry", "why"), tablefmt="github"), ""]
    return "\n".join(lines).rstrip() + "\n"


def _failure_lines(doc: dict, rows: list[dict], replay_args: str) -> list[str]:
    """The failures: how many share each cause, a line each, then each one's minimal counterexample and the
    commands that rerun it (report.py's sections)."""
    if not doc["failures"]:
        return ["No claimed check failed.", ""]
    found = doc["findings"]
    lines = [f"## Findings: {len(doc['failures'])} failed checks, {len(found)} causes", "",
             "One finding per cause (the contract and what explains the result, numbers aside): the kernels it "
             "covers, and the smallest counterexample among them in full below.", "",
             tabulate([[f["id"], len(f["kernels"]), f["checks"], ", ".join(f["isas"]), _clip(f["cause"], 120)]
                       for f in found], headers=("finding", "kernels", "checks", "ISAs", "cause"),
                      tablefmt="github"), ""]
    for f in found:
        lines += [f"### {f['id']}: {_clip(f['cause'], 200)}", "",
                  f"{len(f['kernels'])} kernel(s): " + ", ".join(f["kernels"]), ""]
        if f.get("reproducer"):
            lines += [f"standalone reproducer: {f['reproducer']} ({f['reproduced']})", ""]
    examples = {f["example"] for f in found}
    lines += ["## Every failed check", "",
              tabulate([[f["kernel"], f["check"].split(":", 1)[1], f["isa"], short_cause(f["cause"], 90)]
                        for f in doc["failures"]], headers=("kernel", "check", "ISA", "cause"), tablefmt="github"), ""]
    for r in rows:
        if r["id"] in examples:
            lines += failure_lines(r, replay_args)
    return lines


def _spoken(keys: tuple[str, ...]) -> str:
    """('datatype', 'op', 'isa') -> 'datatype, op and ISA'."""
    words = [k.upper() if k == "isa" else k for k in keys]
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)


def _clip(text: str, width: int) -> str:
    """A table cell's text on one line, cut to `width` (campaign.json has it whole)."""
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:width - 3] + "..."


def _settings_line(settings: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in settings.items() if v not in (None, [], "", False))


def write(out: Path, items: list[Item], rows: list[dict], *, library: str, source: dict, settings: dict,
          seconds: dict, replay_args: str = "", group_keys: tuple[str, ...] = GROUP_KEYS,
          found: list[dict] | None = None) -> dict[str, Path]:
    """campaign.json and campaign.md in `out`, grouped by `group_keys` (the library's); `found`: the findings with
    their reproducers (default: findings(items, rows) without)."""
    doc = document(items, rows, library=library, source=source, settings=settings, seconds=seconds,
                   group_keys=group_keys, found=found)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "campaign.json", "markdown": out / "campaign.md"}
    from lowp.conformance.report.outfolder import write_text      # each whole or not at all
    write_text(paths["json"], json.dumps(doc, indent=1))
    write_text(paths["markdown"], markdown(doc, rows, replay_args))
    return paths
