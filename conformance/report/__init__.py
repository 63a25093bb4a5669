"""Conformance reports: a Markdown summary a kernel author can act on, JSON for tools, JUnit XML for CI
dashboards. Every report says how many of how many cases actually executed."""
from __future__ import annotations

import json
import shlex
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
from tabulate import tabulate

from lowp.conformance.report.rows import VERDICTS


def summary(rows: list[dict]) -> dict:
    executed = sum(r.get("executed", 0) for r in rows)
    planned = sum(r.get("cases", 0) for r in rows)
    by = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
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


def _executed(row: dict) -> str:
    """'N of M' cases; a check whose search did not run (--case selected generated cases only) says so."""
    text = f"{row.get('executed', 0)} of {row.get('cases', 0)}"
    no_search = row.get("searched", 0) is None and row["verdict"] in ("PASS", "FAIL")
    return text + " (no search)" if no_search else text


def short_cause(cause: str | None, width: int = 64) -> str:
    """The head of a cause, for a table cell: up to its first ';', cut to `width`."""
    return _clip((cause or "").split(";", 1)[0], width)


def _path(row: dict, width: int = 48) -> str:
    return _clip(row.get("path") or "", width)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _matched(row: dict) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(row.get("matched", {}).items(), key=lambda kv: -kv[1]))


def markdown(rows: list[dict], seconds: float | None = None, replay_args: str | None = "") -> str:
    """The report. replay_args: what `lowp conformance replay ID` needs besides the id to find the kernels and
    the journal (e.g. "--kernels my.toml --out my-report"), so the printed command works as printed; None where
    there is no journal (pytest --lowp-report): then only the self-contained repro line is given."""
    lines = _head(rows, seconds)
    for r in rows:
        lines += failure_lines(r, replay_args)
    return "\n".join(lines)


def _head(rows: list[dict], seconds: float | None) -> list[str]:
    """The report's summary, what its columns mean, the table and the claimed contracts broken."""
    s = summary(rows)
    table = [(r["kernel"], r["check"], r["domain"], _backend(r), _verdict(r), _executed(r),
              _matched(r), _path(r)) for r in rows]
    lines = ["# lowp conformance report", "",
             f"{s['checks']} checks: {s['PASS']} PASS, {s['FAIL']} FAIL, {s['CRASH']} CRASH, {s['SKIPPED']} SKIPPED, "
             f"{s['NOT RUN']} NOT RUN; {s['cases_executed']} of {s['cases_planned']} cases executed"
             + (f"; {seconds:.1f} s" if seconds is not None else "") + ".",
             "",
             "A check is a kernel against its behaviour model ('model', on the full type range) or a contract, on "
             "the kernel's claimed domain or the full type range" + (
                 " ('outside': a requantizing kernel's parameters beyond its documented domain)"
                 if any(r.get("domain") == "outside" for r in rows) else "") + ". 'not claimed' failures show where "
             "a contract stops holding; they do not fail the run. 'results matched' counts the generated (and "
             "drawn) cases by the reading each matched ('none': a failing case); the hypothesis search's examples "
             "count in 'cases executed' only.", "",
             "'path' is what carried the kernel: the multiply and dot-product instructions present in its compiled "
             "code, or, for a kernel that declares `requires`, those that executed in three probe cases (breakpoints "
             "natively, instruction counts emulated); such a kernel fails when none of them ran.", "",
             tabulate(table, headers=("kernel", "check", "domain", "backend", "verdict", "cases executed",
                                      "results matched", "path"), tablefmt="github"), ""]
    emulators = sorted({r["emulator"] for r in rows if r.get("emulator")})
    if emulators:
        lines += ["Emulated kernels ran on: " + "; ".join(f"`{e}`" for e in emulators) + ".", ""]
    lines += [_host_line(), ""]
    if s["claimed_failures"]:
        lines += ["**Claimed contracts broken:** " + ", ".join(s["claimed_failures"]), ""]
    return lines


def _backend(r: dict) -> str:
    """The table's backend: 'native', 'unicorn', 'qemu', or 'bochs (<cpu model>)'."""
    backend, emulator = r.get("backend", "?"), r.get("emulator") or ""
    return f"{backend} ({emulator.rsplit('cpu model ', 1)[1]})" if backend == "bochs" and "cpu model " in emulator \
        else backend


def _host_line() -> str:
    """The machine that wrote the report: its CPU and the SIMD features lowp used of it (LOWP_DISABLE_FEATURES
    named when set: the run acted as if the CPU lacked them)."""
    from lowp.emulator.targets import disabled_features, host
    h = host()
    disabled = disabled_features()
    used = " ".join(sorted(f for f in h.x86_features - disabled if f.startswith(("avx", "ssse", "amx"))))
    line = f"Host: {h.cpu_model}" + (f"; SIMD features used natively: {used}" if used else "")
    if disabled:
        line += f"; acting as if it lacked {', '.join(sorted(disabled))} (LOWP_DISABLE_FEATURES)"
    return line + "."


def failure_lines(r: dict, replay_args: str | None = "") -> list[str]:
    """What the report says of one row beyond its table line: the minimal counterexample of a FAIL, the cause of
    a FAIL without one, the traceback of a CRASH; nothing for the rest."""
    cx = r.get("counterexample")
    if cx and "lines" in cx:            # a check that renders its own (a ggml vec_dot's blocks)
        return [f"## {r['id']}: minimal counterexample", "", f"Cause: {r.get('cause') or cx['cause']}", "",
                *cx["lines"], ""]
    if cx:
        return counterexample_lines(r, cx, replay_args)
    if r["verdict"] == "FAIL" and r.get("cause"):
        return [f"## {r['id']}: {r['cause']}", ""]
    if r["verdict"] == "CRASH":
        body = [r["reason"]] + ([r["traceback"].strip()] if r.get("traceback") else [])
        return [f"## {r['id']}: crash", "", "```", *body, "```", ""]
    return []


def _description(name: str | None) -> str | None:
    """The registered kernel's description, where this process knows the kernel."""
    from lowp.kernels import kernel
    try:
        return kernel(name).description or None if name else None
    except KeyError:
        return None


def counterexample_lines(r: dict, cx: dict, replay_args: str | None = "") -> list[str]:
    """The report's section for one counterexample (also what the terminal, the JUnit failure, a pytest failure
    and `lowp conformance replay` print): cause, operands, results, the first differing tile lane by lane, and the
    commands that rerun it."""
    m, n, k = cx["shape"]
    lines = [f"## {r['id']}: minimal counterexample", "",
             f"cause: {r.get('cause') or cx.get('cause') or 'wrong value'}", "",
             f"{m}x{n}x{k}, {cx['nonzero']} nonzero elements, poison seed {cx.get('seed', 0)}"
             + (f" (shrunk from case {cx['case']})" if cx.get("case") else "") + ".", ""]
    about = _description(r.get("kernel"))
    if about:           # what the kernel's author says of it (a seeded bug says so there)
        lines += [f"the kernel, as its entry describes it: {about}", ""]
    body = []
    if cx.get("previous"):
        p = cx["previous"]
        pm, pn, pk = p["shape"]
        body += [f"after the call ({pm}x{pn}x{pk}, case {p.get('case')}, poison seed {p['seed']}):",
                 f"  A = {array_text(p['A'])}", f"  B = {array_text(p['B'])}"]
    body += [f"A = {array_text(cx['A'])}", f"B = {array_text(cx['B'])}"]
    if cx.get("quant"):
        from lowp.conformance.search.quantized import describe, from_json
        body += [f"with {describe(from_json(cx['quant']))}"]
    options = dict(cx.get("options") or {})
    align = options.pop("align", None)
    if align:
        body += ["with its buffers' starts at " + ", ".join(f"{buffer} {offset}" for buffer, offset in align.items())
                 + " bytes past a 64-byte boundary"]
    if any(options.values()):
        from lowp.conformance.search.problem import abi_text
        body += [f"through the XNNPACK ABI with {abi_text(options).replace(',', ', ')} "
                 "(strides and a_offset in bytes)"]
    if cx.get("fault"):
        body += [f"the call faulted: {cx['fault']}"]
    else:
        body += [f"actual   C = {array_text(cx['actual'])}",
                 f"expected C = {array_text(cx['expected'])}  ({r['check']})",
                 f"first differing element {cx['first_diff']}: {cx['actual_at_first']} instead of "
                 f"{cx['expected_at_first']}"]
        body += tile_lines(cx)
    return lines + ["```", *body, "```", "", *commands(r, cx, replay_args), ""]


def tile_lines(cx: dict, most: int = 16) -> list[str]:
    """The tile of C (mr x nr, the kernel's register tile) holding the first differing element, lane by lane:
    each lane's actual and expected value, the differing ones marked, as SIMDe's test assertions print a vector."""
    if cx.get("first_diff") is None or cx.get("actual") is None:
        return []
    actual, expected = np.asarray(cx["actual"]), np.asarray(cx["expected"])
    mr, nr = cx.get("tile") or (1, 1)
    i, j = cx["first_diff"]
    rows = range(i - i % mr, min(i - i % mr + mr, actual.shape[0]))
    cols = range(j - j % nr, min(j - j % nr + nr, actual.shape[1]))
    lanes = [(a, b) for a in rows for b in cols]
    shown = [lane for lane in lanes if actual[lane] != expected[lane]][:most]
    same = len(lanes) - sum(actual[lane] != expected[lane] for lane in lanes)
    out = [f"first differing tile: C[{rows.start}:{rows.stop}, {cols.start}:{cols.stop}] (tile {mr}x{nr}); "
           f"{len(lanes) - same} of {len(lanes)} lanes differ:"]
    out += [f"  C[{a}][{b}]: actual {actual[a, b]}, expected {expected[a, b]}" for a, b in shown]
    if len(lanes) - same > len(shown):
        out.append(f"  ... and {len(lanes) - same - len(shown)} more")
    return out


def commands(r: dict, cx: dict, replay_args: str | None = "") -> list[str]:
    """The commands that rerun a counterexample, verbatim: by id from the run's journal (`replay_args` names its
    folder and kernel files; None: no journal), and the self-contained repro line that needs nothing but the
    kernel (its TOML file, if it is not built in; a kernel registered from Python is rerun by its pytest test)."""
    from lowp.conformance.search.problem import encode
    out = []
    if replay_args is not None:
        out.append(f"replay: `lowp conformance replay {shlex.quote(r['id'])}"
                   f"{' ' + replay_args if replay_args else ''}`")
    if cx.get("previous"):
        out.append("repro: none on one line: the failure depends on the call before it (replay by id)")
    else:
        problem = encode(r["kernel"], r["check"], r["domain"], cx["A"], cx["B"], cx.get("seed", 0), cx.get("quant"),
                         cx.get("options"))
        kernels = _kernels_option(r)
        if kernels is None:
            out.append(f"repro: the kernel was registered from Python ({r.get('origin')}): "
                       + (f"`pytest '{r['test']}'`" if r.get("test") else "register it, then replay below"))
        if kernels is not None or not r.get("test"):
            out.append(f"repro: `lowp conformance replay {kernels or ''}{shlex.quote(problem)}`")
    return out


def _kernels_option(r: dict) -> str | None:
    """'--kernels FILE ' for a kernel from a TOML file, '' for one lowp registers itself (its built-in modules),
    None for one registered from Python elsewhere (a test's conftest)."""
    origin = r.get("origin")
    if not origin:
        return ""
    path = Path(origin)
    if path.suffix == ".toml":
        return f"--kernels {shlex.quote(origin)} "
    return "" if _PACKAGE in path.resolve().parents else None


_PACKAGE = Path(__file__).resolve().parents[2]     # the folder holding lowp's component folders


def terminal(rows: list[dict], seconds: float | None, replay_args: str) -> str:
    """What `lowp conformance` prints: the report's head (summary and table), then every claimed failure in full
    (its minimal counterexample and the commands that rerun it); not-claimed failures stay table lines."""
    out = _head(rows, seconds)
    for r in rows:
        if r["claimed"] and r["verdict"] in ("FAIL", "CRASH"):
            out += failure_lines(r, replay_args)
    return "\n".join(out).rstrip() + "\n"


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


def junit(rows: list[dict], settings: dict | None = None, created: str | None = None,
          replay_args: str | None = "") -> str:
    """JUnit XML as pytest writes it (valid against the junit-10.xsd schema pytest's own tests use): one
    <testsuite> per check, so each carries its properties (kernel, contract, domain, claimed, backend, target, what
    ran, cases executed, how it was built), with one <testcase>. A claimed FAIL is a <failure> whose body is the
    minimal counterexample and the commands that rerun it; a CRASH an <error>; a not-claimed FAIL is <skipped
    type="lowp.not-claimed"> (like pytest's xfail: reported, not failing CI); SKIPPED and NOT RUN are <skipped>."""
    import socket
    from datetime import datetime, timezone
    created = created or datetime.now(timezone.utc).isoformat(timespec="seconds")
    settings = settings or {}
    root = ET.Element("testsuites", name="lowp conformance", tests=str(len(rows)),
                      failures=str(sum(_outcome(r) == "failure" for r in rows)),
                      errors=str(sum(_outcome(r) == "error" for r in rows)),
                      time=_time(sum(r.get("seconds", 0) for r in rows)))
    for r in rows:
        outcome = _outcome(r)
        suite = ET.SubElement(root, "testsuite", name=r["id"], tests="1", failures=str(int(outcome == "failure")),
                              errors=str(int(outcome == "error")), skipped=str(int(outcome == "skipped")),
                              time=_time(r.get("seconds", 0)), timestamp=created, hostname=socket.gethostname())
        props = ET.SubElement(suite, "properties")
        for name, value in _properties(r, settings):
            ET.SubElement(props, "property", name=name, value=str(value))
        case = ET.SubElement(suite, "testcase", classname=f"lowp.{r['kernel']}", name=f"{r['check']}:{r['domain']}",
                             time=_time(r.get("seconds", 0)))
        body = "\n".join(failure_lines(r, replay_args)).strip()
        if outcome == "failure":
            ET.SubElement(case, "failure", type="lowp.fail",
                          message=f"{r['id']} fails a claimed check: {r.get('cause') or 'wrong value'}").text = body
        elif outcome == "error":
            ET.SubElement(case, "error", type="lowp.crash", message=r["reason"]).text = body
        elif r["verdict"] == "FAIL":
            ET.SubElement(case, "skipped", type="lowp.not-claimed",
                          message=f"FAIL, not claimed: {short_cause(r.get('cause'), 200) or 'wrong value'}").text = body
        elif outcome == "skipped":
            ET.SubElement(case, "skipped", type=f"lowp.{r['verdict'].lower().replace(' ', '-')}",
                          message=r.get("reason") or r["verdict"])
        ET.SubElement(case, "system-out").text = _what_ran(r)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


def _outcome(r: dict) -> str:
    """failure (a claimed FAIL), error (CRASH), skipped (SKIPPED, NOT RUN, a not-claimed FAIL) or passed."""
    if r["verdict"] == "FAIL":
        return "failure" if r["claimed"] else "skipped"
    return {"CRASH": "error", "SKIPPED": "skipped", "NOT RUN": "skipped"}.get(r["verdict"], "passed")


def _time(seconds: float) -> str:
    return f"{seconds:.3f}"     # the schema's SUREFIRE_TIME: at most three decimals


def _what_ran(r: dict) -> str:
    where = r.get("emulator") or r.get("backend")
    return (f"{r['verdict']}: {r.get('executed', 0)} of {r.get('cases', 0)} cases executed on {where}"
            + (f"; path: {r['path']}" if r.get("path") else ""))


def _properties(r: dict, settings: dict) -> list[tuple[str, object]]:
    build = r.get("build") or {}
    out = [("kernel", r["kernel"]), ("contract", r["check"]), ("domain", r["domain"]), ("claimed", r["claimed"]),
           ("verdict", r["verdict"]), ("backend", r.get("backend")), ("target", r.get("target")),
           ("emulator", r.get("emulator")), ("cases_executed", r.get("executed", 0)),
           ("cases_planned", r.get("cases", 0)), ("path", r.get("path") or ""), ("origin", r.get("origin") or "")]
    if build:
        out += [("compiler", build["compiler"]), ("compile_flags", " ".join(build["compile_flags"]))]
    from lowp import __version__
    out += [("lowp_version", __version__), *((key, settings[key]) for key in ("seed", "examples") if key in settings)]
    return [(name, "" if value is None else value) for name, value in out]


def document(rows: list[dict], seconds: float | None, settings: dict) -> dict:
    """report.json: versions, time, settings, machine fingerprint, summary and rows, checked against the schema."""
    from lowp.conformance.report.rows import header, validate_report
    doc = {**header(settings, seconds), "summary": summary(rows), "rows": rows}
    validate_report(doc)
    return doc


def write(rows: list[dict], out: Path, seconds: float | None = None, replay_args: str = "",
          settings: dict | None = None) -> dict[str, Path]:
    """report.md, report.json and junit.xml in `out`, each written whole under a temporary name and renamed into
    place (outfolder.write_text): a reader or a kill mid-write never sees half a report."""
    from lowp.conformance.report.outfolder import write_text
    out.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": out / "report.md", "json": out / "report.json", "junit": out / "junit.xml"}
    doc = document(rows, seconds, settings or {})
    write_text(paths["markdown"], markdown(rows, seconds, replay_args))
    write_text(paths["json"], json.dumps(doc, indent=1))
    write_text(paths["junit"], junit(rows, settings, doc["created"], replay_args))
    return paths
