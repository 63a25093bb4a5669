"""Conformance reports: a Markdown summary a kernel author can act on, JSON for tools, JUnit XML for CI
dashboards. Every report says how many of how many cases actually executed."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
from tabulate import tabulate


def environment() -> dict:
    from lowp.emulator.targets import host
    return host().environment()


def summary(rows: list[dict]) -> dict:
    executed = sum(r.get("executed", 0) for r in rows)
    planned = sum(r.get("cases", 0) for r in rows)
    by = {v: sum(r["verdict"] == v for r in rows) for v in ("PASS", "FAIL", "CRASH", "SKIPPED", "NOT RUN")}
    claimed_failures = [r["id"] for r in rows if r["claimed"] and r["verdict"] in ("FAIL", "CRASH")]
    return {"checks": len(rows), **by, "cases_executed": executed, "cases_planned": planned,
            "claimed_failures": claimed_failures}


def _verdict(row: dict) -> str:
    v = row["verdict"]
    if v == "SKIPPED":
        return f"SKIPPED ({row['reason']})"
    if v == "CRASH":
        return f"CRASH ({row['reason']})"
    if v == "FAIL":
        cause = short_cause(row.get("cause"))
        return f"FAIL ({'not claimed: ' if not row['claimed'] else ''}{cause})" if cause else \
            ("FAIL (not claimed)" if not row["claimed"] else "FAIL")
    return v


def short_cause(cause: str | None, width: int = 64) -> str:
    """The head of a cause, for a table cell: up to its first ';', cut to `width`."""
    return _clip((cause or "").split(";", 1)[0], width)


def _path(row: dict, width: int = 48) -> str:
    return _clip(row.get("path") or "", width)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _matched(row: dict) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(row.get("matched", {}).items(), key=lambda kv: -kv[1]))


def markdown(rows: list[dict], seconds: float | None = None, replay_args: str = "") -> str:
    """The report. replay_args: what `lowp conformance replay ID` needs besides the id to find the kernels and
    the journal (e.g. "--kernels my.toml --out my-report"), so the printed command works as printed."""
    s = summary(rows)
    table = [(r["kernel"], r["check"], r["domain"], r.get("backend", "?"), _verdict(r),
              f"{r.get('executed', 0)} of {r.get('cases', 0)}", _matched(r), _path(r)) for r in rows]
    lines = ["# lowp conformance report", "",
             f"{s['checks']} checks: {s['PASS']} PASS, {s['FAIL']} FAIL, {s['CRASH']} CRASH, {s['SKIPPED']} SKIPPED, "
             f"{s['NOT RUN']} NOT RUN; {s['cases_executed']} of {s['cases_planned']} cases executed"
             + (f"; {seconds:.1f} s" if seconds is not None else "") + ".",
             "",
             "A check is a kernel against its behaviour model ('model', on the full type range) or a contract, on "
             "the kernel's claimed domain or the full type range. 'not claimed' failures show where a contract "
             "stops holding; they do not fail the run.", "",
             "'path' is what carried the kernel: the multiply and dot-product instructions present in its compiled "
             "code, or, for a kernel that declares `requires`, those that executed in three probe cases (breakpoints "
             "natively, instruction counts emulated); such a kernel fails when none of them ran.", "",
             tabulate(table, headers=("kernel", "check", "domain", "backend", "verdict", "cases executed",
                                      "results matched", "path"), tablefmt="github"), ""]
    if s["claimed_failures"]:
        lines += ["**Claimed contracts broken:** " + ", ".join(s["claimed_failures"]), ""]
    for r in rows:
        cx = r.get("counterexample")
        if cx:
            lines += counterexample_lines(r, cx, replay_args)
        elif r["verdict"] == "FAIL" and r.get("cause"):
            lines += [f"## {r['id']}: {r['cause']}", ""]
    for r in rows:
        if r.get("traceback"):
            lines += [f"## {r['id']}: crash", "", "```", r["traceback"].strip(), "```", ""]
    return "\n".join(lines)


def counterexample_lines(r: dict, cx: dict, replay_args: str = "") -> list[str]:
    """The report's section for one counterexample (also what `lowp conformance replay` prints)."""
    m, n, k = cx["shape"]
    extra = f" {replay_args}" if replay_args else ""
    lines = [f"## {r['id']}: minimal counterexample", "",
             f"cause: {r.get('cause') or cx.get('cause') or 'wrong value'}", "",
             f"{m}x{n}x{k}, {cx['nonzero']} nonzero elements, poison seed {cx.get('seed', 0)}; replay with "
             f"`lowp conformance replay {r['id']}{extra}`.", ""]
    body = []
    if cx.get("previous"):
        p = cx["previous"]
        pm, pn, pk = p["shape"]
        body += [f"after the call ({pm}x{pn}x{pk}, case {p.get('case')}, poison seed {p['seed']}):",
                 f"  A = {array_text(p['A'])}", f"  B = {array_text(p['B'])}"]
    body += [f"A = {array_text(cx['A'])}", f"B = {array_text(cx['B'])}"]
    if cx.get("quant"):
        from .quantized import describe, from_json
        body += [f"with {describe(from_json(cx['quant']))}"]
    if cx.get("fault"):
        body += [f"the call faulted: {cx['fault']}"]
    else:
        body += [f"actual   C = {array_text(cx['actual'])}",
                 f"expected C = {array_text(cx['expected'])}  ({r['check']})",
                 f"first differing element {cx['first_diff']}: {cx['actual_at_first']} instead of "
                 f"{cx['expected_at_first']}"]
    return lines + ["```", *body, "```", ""]


def array_text(values, limit: int = 64) -> str:
    """A matrix as Python can read it back: in full up to `limit` elements, else as np.full(...) when every
    element is equal, else its shape with the nonzero elements listed (all of it is in report.json)."""
    x = np.asarray(values)
    if x.size <= limit:
        return str(x.tolist())
    flat = x.ravel()
    if (flat == flat[0]).all():
        return f"np.full({x.shape}, {int(flat[0])})"
    common = int(np.bincount(flat - flat.min()).argmax() + flat.min())
    others = np.argwhere(x != common)
    listed = ", ".join(f"{tuple(int(i) for i in idx)}: {int(x[tuple(idx)])}" for idx in others[:12])
    more = f", ... ({len(others) - 12} more)" if len(others) > 12 else ""
    return f"np.full({x.shape}, {common}) except {{{listed}{more}}}  (in full in report.json)"


def junit(rows: list[dict]) -> str:
    suite = ET.Element("testsuite", name="lowp-conformance", tests=str(len(rows)),
                       failures=str(sum(r["verdict"] == "FAIL" and r["claimed"] for r in rows)),
                       errors=str(sum(r["verdict"] == "CRASH" for r in rows)),
                       skipped=str(sum(r["verdict"] in ("SKIPPED", "NOT RUN") for r in rows)))
    for r in rows:
        case = ET.SubElement(suite, "testcase", classname=r["kernel"], name=f"{r['check']}:{r['domain']}",
                             time=str(r.get("seconds", 0)))
        if r["verdict"] == "FAIL" and r["claimed"]:
            cx = r.get("counterexample") or {}
            ET.SubElement(case, "failure", message=f"{r['id']} fails a claimed check: {r.get('cause') or 'wrong value'}"
                          ).text = json.dumps({k: cx.get(k) for k in ("shape", "A", "B", "actual", "expected",
                                                                       "first_diff", "matched", "cause", "fault")})
        elif r["verdict"] == "CRASH":
            ET.SubElement(case, "error", message=r["reason"])
        elif r["verdict"] in ("SKIPPED", "NOT RUN"):
            ET.SubElement(case, "skipped", message=r.get("reason") or r["verdict"])
        ET.SubElement(case, "system-out").text = f"{r.get('executed', 0)} of {r.get('cases', 0)} cases executed"
    return ET.tostring(suite, encoding="unicode")


def write(rows: list[dict], out: Path, seconds: float | None = None, replay_args: str = "") -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": out / "report.md", "json": out / "report.json", "junit": out / "junit.xml"}
    paths["markdown"].write_text(markdown(rows, seconds, replay_args))
    paths["json"].write_text(json.dumps({"summary": summary(rows), "environment": environment(),
                                         "seconds": seconds, "rows": rows}, indent=1))
    paths["junit"].write_text(junit(rows))
    return paths
