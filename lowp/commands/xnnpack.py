"""`lowp xnnpack PATH`: judge every int8 GEMM micro-kernel of an XNNPACK checkout that lowp can run, as a campaign.

Reads the checkout's test YAMLs and kernel names (lowp.conformance.libraries.xnnpack), makes a lowp kernel entry of each
(written to OUT/kernels.toml, which the report's repro lines name), registers them in memory, builds them against
the checkout's own headers, runs the ordinary checks on the process pool (lowp.conformance.run.runner, with its journal
and --resume) and writes report.md/report.json/junit.xml of every check and campaign.md/campaign.json of every
kernel: judged, passed, failed, or skipped with the reason. Exit 2 for a PATH that is not a checkout or a bad
option, 1 when a kernel fails a claimed check, 0 otherwise.
"""
from __future__ import annotations

import fnmatch
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lowp.commands.conformance import (BACKENDS, PROFILES, add_database_options, database, hold_out, run_held, set_backend,
                          stopped)


def add_parser(sub) -> None:
    p = sub.add_parser("xnnpack", help="judge the int8 GEMM micro-kernels of an XNNPACK checkout, as a campaign")
    p.add_argument("path", type=Path, metavar="PATH", help="an XNNPACK checkout (test/*gemm*.yaml, src/, include/)")
    p.add_argument("--datatype", action="append", default=[], metavar="D",
                   help="only this datatype's YAMLs (repeatable; e.g. qs8-qc8w, qu8, qd8-f32-qc8w; default: every "
                        "int8 one)")
    p.add_argument("--isa", action="append", default=[], metavar="ISA",
                   help="only kernels of this ISA (XNNPACK's token: avx2, avx512vnni, neondot, scalar, rvv, ...; "
                        "repeatable)")
    p.add_argument("--kernel", action="append", default=[], metavar="GLOB",
                   help="only kernels whose name matches this shell glob (repeatable), e.g. '*_4x16c4__*'")
    p.add_argument("--out", type=Path, default=Path("lowp-xnnpack"), help="report folder (default ./lowp-xnnpack)")
    p.add_argument("--profile", choices=tuple(PROFILES), default="quick",
                   help="how hard to look per kernel (default quick: 30 search examples, no seed grid)")
    p.add_argument("--examples", type=int, default=None, help="search examples per claimed check (default: the "
                                                              "profile's)")
    p.add_argument("--jobs", type=int, default=None, help="parallel workers for builds and checks (default: one "
                                                          "per core)")
    p.add_argument("--resume", action="store_true", help="keep the journal's finished checks and run the rest")
    p.add_argument("--seed", type=int, default=0, help="seed of the cases' values and of the search (default 0)")
    p.add_argument("--timeout", type=float, default=600, help="seconds before a check counts as hung (default 600)")
    p.add_argument("--backend", choices=BACKENDS, default=None,
                   help="run every x86-64 (bochs, native) or AArch64 (unicorn, qemu) kernel there")
    p.add_argument("--write-toml", type=Path, default=None, metavar="FILE",
                   help="also write what lowp made of each kernel to FILE ([[kernel]] tables; `lowp conformance "
                        "--kernels FILE --no-builtin` judges them again)")
    add_database_options(p)
    p.set_defaults(func=cmd_xnnpack)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def cmd_xnnpack(args) -> int:
    return run_held(_xnnpack, args)


def _xnnpack(args, held) -> int:
    from lowp.conformance.libraries.xnnpack import ISAS, Checkout, NotACheckout
    try:
        checkout = Checkout(args.path)
    except NotACheckout as e:
        return _fail(str(e))
    known = checkout.datatypes()
    unknown = [d for d in args.datatype if d not in known]
    if unknown:
        return _fail(f"--datatype {', '.join(unknown)}: no int8 GEMM YAML of that datatype in {checkout.root / 'test'}"
                     f"; it has {', '.join(known)}")
    bad_isas = [i for i in args.isa if i not in ISAS]
    if bad_isas:
        return _fail(f"--isa {', '.join(bad_isas)}: not an XNNPACK ISA lowp knows; known: {', '.join(ISAS)}")
    set_backend(args)
    if not hold_out(held, args.out):     # one run at a time in OUT: refused before its journal is touched
        return 2
    started = time.perf_counter()
    items, entries = _map(checkout, args)
    if not items:
        return _fail("no kernel of the checkout matches --datatype/--isa/--kernel")
    toml = args.out / "kernels.toml"
    mapping = time.perf_counter() - started
    kernels = _register(items, entries, toml)
    build_started = time.perf_counter()
    kernels = _build(items, kernels, args.jobs)
    build = time.perf_counter() - build_started
    for path in filter(None, (toml, args.write_toml)):
        _write_toml(path, [entries[k.name] for k in kernels], items, checkout)
    rows, checks_seconds, settings, stop = _judge(args, kernels, toml)
    status = _report(args, checkout, items, rows, settings, toml,
                     {"wall": round(time.perf_counter() - started, 1), "mapping": round(mapping, 1),
                      "build": round(build, 1), "checks": round(checks_seconds, 1)})
    return stopped(stop, rows) if stop is not None else status


def _map(checkout, args):
    """The campaign's items (one per selected YAML entry) and the kernel entries lowp made, by name."""
    from lowp.conformance.report.campaign import Item
    from lowp.conformance.libraries.xnnpack import Skip, parse_name, translate
    found, unreadable = checkout.entries(args.datatype)
    kinds = {path: (datatype, op) for path, datatype, op in checkout.yaml_files()}
    items = [Item(path.name, {"datatype": kinds[path][0], "op": kinds[path][1], "isa": "?"}, f"test/{path.name}",
                  ("YAML unreadable", f"test/{path.name}: {why}")) for path, why in unreadable]
    entries = {}
    for entry in found:
        try:
            isa = parse_name(entry.name).isa or "?"
        except ValueError:
            isa = "?"
        if (args.isa and isa not in args.isa) or \
                (args.kernel and not any(fnmatch.fnmatchcase(entry.name, g) for g in args.kernel)):
            continue
        item = Item(entry.name, {"datatype": entry.datatype, "op": entry.op, "isa": isa}, entry.where)
        items.append(item)
        if entry.name in entries:
            item.skip = ("duplicate", f"{entry.where} repeats a kernel of an earlier entry")
            continue
        result = translate(entry, checkout)
        if isinstance(result, Skip):
            item.skip = (result.category, result.message)
        else:
            entries[entry.name] = result.entry
    return items, entries


def _write_toml(path: Path, entries: list[dict], items, checkout) -> None:
    """The kernel entries that reached the checks, as [[kernel]] tables, and why each other kernel did not, as
    comments: `lowp conformance --kernels FILE --no-builtin` judges the same kernels again."""
    import tomli_w
    path.parent.mkdir(parents=True, exist_ok=True)
    head = (f"# What lowp made of the int8 GEMM micro-kernels of the XNNPACK checkout {checkout.root} (`lowp xnnpack`):"
            f"\n# one [[kernel]] table per kernel it judges, paths absolute; the skipped ones at the end, with why.\n"
            f"# `lowp conformance --kernels {path} --no-builtin` judges them again.\n\n")
    skipped = [f"# skipped: {i.name} ({i.where}): {' '.join(i.skip[1].split())}" for i in items if i.skip]
    text = tomli_w.dumps({"kernel": entries}) if entries else ""
    from lowp.conformance.report.outfolder import write_text      # whole or not at all: a later --resume reads it
    write_text(path, head + text + ("\n" + "\n".join(skipped) + "\n" if skipped else ""))


def _register(items, entries: dict, toml: Path):
    """Register the entries in memory (each checked by the kernel schema and lowp.conformance's own checks); an entry
    that fails them is a skipped item naming the problem."""
    from lowp.conformance.search.validate import validate_kernels
    from lowp.kernels import KernelConfigError
    from lowp.kernels.registry import register_entries
    kernels, problems = register_entries(list(entries.values()), toml)
    by_name = {i.name: i for i in items}
    for name, found in problems.items():
        by_name[name].skip = ("lowp entry invalid", "; ".join(p.message for p in found))
    valid = []
    for k in kernels:
        try:
            validate_kernels([k])
        except KernelConfigError as e:
            by_name[k.name].skip = ("lowp entry invalid", "; ".join(f"{p.key}: {p.message}" for p in e.problems))
            continue
        valid.append(k)
    return valid


def _build(items, kernels, jobs: int | None):
    """Build every kernel that can run here (the checks' builds come from the same cache), `jobs` at a time; a
    source that does not build or a symbol the build lacks is a skipped item with the compiler's first lines."""
    import os

    from lowp.conformance.search.validate import build_problems
    by_name = {i.name: i for i in items}

    def one(kernel):
        start = time.perf_counter()
        problems = build_problems([kernel])
        by_name[kernel.name].build_seconds = time.perf_counter() - start
        return kernel, problems
    results = []
    print(f"building {len(kernels)} kernels (cached builds are instant)", file=sys.stderr, flush=True)
    with ThreadPoolExecutor(max(1, jobs or os.cpu_count() or 1)) as pool:
        for done, result in enumerate(pool.map(one, kernels), 1):
            results.append(result)
            if done % 100 == 0 or done == len(kernels):      # a cold build of a datatype takes minutes: say so
                print(f"  built {done}/{len(kernels)}", file=sys.stderr, flush=True)
    built = []
    for kernel, problems in results:
        if problems:
            first = problems[0]
            lines = [line.strip() for line in first.message.splitlines()]
            error = next((line for line in lines[1:] if "error" in line), "")     # the compiler's own words
            by_name[kernel.name].skip = ("does not build" if first.key in ("source", "sources") else
                                         "symbol problem", " ".join(filter(None, [lines[0], error])))
        else:
            built.append(kernel)
    return built


def _judge(args, kernels, toml: Path):
    """The ordinary checks of the built kernels on the process pool; (rows, seconds, settings, the RunStopped of a
    run that Ctrl-C, SIGTERM or a full disk stopped, else None)."""
    from lowp.conformance.run import runner
    from lowp.conformance.run.checks import plan, probe_share
    profile = PROFILES[args.profile]
    examples = profile["examples"] if args.examples is None else args.examples
    options = {"examples": examples, "seed": args.seed, "grid": profile["grid"], "database": database(args),
               "probe_examples": probe_share(examples)}
    checks = plan(kernels)
    start = time.perf_counter()
    stop = None
    try:
        rows = runner.run(checks, args.out / "journal.jsonl", jobs=args.jobs, resume=args.resume,
                          timeout=args.timeout, options=options) if checks else []
    except runner.RunStopped as e:
        rows, stop = e.rows, e
    settings = {"profile": args.profile, "examples": examples, "probe_examples": options["probe_examples"],
                "seed": args.seed, "grid": options["grid"], "jobs": args.jobs, "timeout": args.timeout,
                "backend": args.backend, "datatypes": args.datatype, "isas": args.isa, "kernels": args.kernel,
                "kernels_files": [str(toml)], "out": str(args.out), "resume": args.resume}
    return rows, time.perf_counter() - start, settings, stop


def _report(args, checkout, items, rows, settings: dict, toml: Path, seconds: dict) -> int:
    from lowp.conformance import report
    from lowp.conformance.report import campaign
    from lowp.conformance.report.campaign import summarize
    replay_args = f"--kernels {toml} --no-builtin --out {args.out}"
    paths = report.write(rows, args.out, seconds["checks"], replay_args, {**settings, "kernels": []}) if rows else {}
    summarize(items, rows)
    source = {"path": str(checkout.root), "commit": checkout.commit()}
    cpaths = campaign.write(args.out, items, rows, library="XNNPACK", source=source, settings=settings,
                            seconds=seconds, replay_args=replay_args)
    text = cpaths["markdown"].read_text()
    print(text.split("\n## Every skipped kernel", 1)[0].rstrip())
    print(f"\nreports: {', '.join(str(p) for p in [*cpaths.values(), *paths.values()])}; kernels: {toml}")
    failed = [i.name for i in items if i.status == "failed"]
    if failed:
        print(f"FAILED: {len(failed)} kernel(s) broke a claimed check", file=sys.stderr)
    return 1 if failed else 0
