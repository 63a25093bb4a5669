"""`lowp conformance`: judge every registered kernel (built-in and the user's own) against the contracts it
claims, and write the report. `lowp conformance replay ID` re-runs one case or counterexample."""
from __future__ import annotations

from lowp.cli import seed as seed_type

import argparse
import importlib.util
import json
import os
import sys
import time
from contextlib import ExitStack
from pathlib import Path

# What --profile sets (explicit --examples and --grid/--no-grid override it): the search's examples per claimed
# check (a not-claimed probe gets a third), whether the seed grid's shapes run, and whether the search's examples
# are drawn directly from its distribution rather than through hypothesis's engine, which costs four times a case
# (drawn_search, run/checks.py _drawn_search: the quick profile, a pull request's CI minutes), and whether a
# not-claimed probe's tile edges take one value class each, rotating, rather than all four (probe_rotation: the quick
# profile; a probe fails nothing, and the depth ladder, the ABI cases and the parameters' ends stay whole).
PROFILES = {"quick": {"examples": 30, "grid": False, "drawn_search": True, "probe_rotation": True},
            "default": {"examples": 150, "grid": True, "drawn_search": False, "probe_rotation": False},
            "thorough": {"examples": 1000, "grid": True, "drawn_search": False, "probe_rotation": False}}


def search_name(options: dict) -> str:
    """How the run's search draws its examples, as report.json and campaign.json's settings say it."""
    return "drawn" if options["drawn_search"] else "hypothesis"


def add_parser(sub) -> None:
    p = sub.add_parser("conformance", help="judge the registered kernels against their contracts; write the report")
    p.add_argument("action", nargs="?", default="run", choices=("run", "replay", "list", "schema"),
                   help="run (default), list the planned checks (with --case: the matching case ids), replay ID, or "
                        "schema [report|peers]: the JSON Schema of report.json (or peers.json)")
    p.add_argument("ids", nargs="*", metavar="ID", help="replay: case ids, check ids or problem ids (from the "
                                                      "report's replay and repro lines)")
    p.positionals_after_options = "ids"
    add_run_options(p, out=Path("lowp-report"), resume="keep the journal's finished checks and run the rest",
                    seed="seed of the generated cases' values and of the search's random source (default 0)")
    p.add_argument("--json", action="store_true", help="replay: print the raw result as JSON")
    p.set_defaults(func=cmd_conformance)


def add_run_options(p, *, out: Path, resume: str, seed: str, first_seed: int = 0) -> None:
    """The options of a run of checks, shared by `lowp conformance` and `lowp fuzz`: which kernels, how hard to
    look, where to write, on what (processes, emulator, Ray), and the example database."""
    p.add_argument("--kernel", action="append", default=[], metavar="NAME",
                   help="only these kernels: a name or a shell glob such as 'u8s8s32_*' (repeatable; default: all "
                        "registered)")
    p.add_argument("--kernels", dest="toml", action="append", default=[], metavar="FILE.toml",
                   help="also register the kernels of this TOML file (repeatable)")
    p.add_argument("--no-builtin", action="store_true",
                   help="judge only the kernels of the --kernels files, not lowp's built-in ones too")
    p.add_argument("--out", type=Path, default=out, help=f"report folder (default ./{out})")
    p.add_argument("--jobs", type=int, default=None, help="parallel workers (default: one per core)")
    p.add_argument("--resume", action="store_true", help=resume)
    p.add_argument("--profile", choices=tuple(PROFILES), default="default",
                   help="how hard to look: " + "; ".join(f"{name}: {v['examples']} examples"
                                                         f"{'' if v['grid'] else ', no seed grid'}"
                                                         for name, v in PROFILES.items())
                        + " (default: default; --examples and --grid/--no-grid override it)")
    p.add_argument("--examples", type=int, default=None,
                   help="hypothesis search examples per claimed check (default: the profile's, 150; a not-claimed "
                        "probe gets a third; 0: no search; with --case, no search unless given)")
    p.add_argument("--seed", type=seed_type, default=first_seed, help=seed)
    p.add_argument("--timeout", type=float, default=600, help="seconds before a check counts as hung (default 600)")
    p.add_argument("--grid", action=argparse.BooleanOptionalAction, default=None,
                   help="run the seed grid's shapes (default: the profile's; --no-grid is faster)")
    p.add_argument("--case", dest="cases", action="append", default=[], metavar="PATTERN",
                   help="only the generated cases whose name (k_gt_spill, depth_int16_wrap, grid, ...) or whole id "
                        "matches this glob (repeatable); the search then runs only if --examples is given")
    p.add_argument("--shapes", type=Path, default=None, metavar="FILE",
                   help="also run these shapes (one MxNxK a line, # comments) in every value class, named shape_file")
    add_database_options(p)
    p.add_argument("--backend", choices=BACKENDS, default=None,
                   help="unicorn or qemu: run every AArch64 kernel on this emulator (default: the kernel's `backend`, "
                        "else Unicorn unless it lacks a feature qemu-aarch64 has); bochs: every x86-64 kernel on "
                        "Bochs, native: every x86-64 kernel on this CPU (SKIPPED where it lacks a feature; default: "
                        "natively, on Bochs what this CPU lacks); rows say which backend ran")
    p.add_argument("--ray", nargs="?", const="local", default=None, action=RayAddress, metavar="ADDRESS",
                   help="run the checks as Ray tasks on the cluster at ADDRESS (host:port, or 'auto'); without one, "
                        "on a Ray cluster of this machine started for the command. Native checks go to nodes that "
                        "advertise their CPU features (docs/scale-out.md); needs the ray extra")


def add_database_options(p) -> None:
    p.add_argument("--database", default=None, metavar="DIR|URL",
                   help="the example database: counterexamples kept there are replayed first by every later search "
                        "of the same check; a folder, or a Redis URL (redis://host:6379/0) shared by several "
                        "machines (default: $LOWP_DATABASE, else examples/ in lowp's cache folder)")
    p.add_argument("--no-database", action="store_true", help="keep no example database")


def database(args) -> str | None:
    """The example database the flags name (None: --no-database); a Redis URL whose server does not answer, or
    without the redis package, is a usage error (exit 2) before anything runs."""
    from lowp.conformance.run.example_database import DatabaseError, check_reachable, default_location
    if args.no_database:
        return None
    spec = args.database or default_location()
    try:
        check_reachable(spec)
    except DatabaseError as e:
        args.parser.error(f"--database: {e}")
    return spec


class RayAddress(argparse.Action):
    """--ray [ADDRESS]: what is no address, or Ray not installed, is a usage error (exit 2) before anything runs."""

    def __call__(self, parser, namespace, value, option_string=None):
        if not (value in ("local", "auto") or ":" in value):
            parser.error(f"{option_string}: {value!r} is not a Ray cluster's address (host:port, auto, "
                         "ray://host:port; none for a cluster of this machine)")
        if importlib.util.find_spec("ray") is None:
            parser.error(f"{option_string} needs Ray: pip install 'lowp[ray]'")
        setattr(namespace, self.dest, value)


# --backend: the backend's architecture (its environment variable: lowp.kernels.executors.BACKEND_ENVS)
BACKENDS = ("unicorn", "qemu", "bochs", "native")
BACKEND_ARCH = {"unicorn": "aarch64", "qemu": "aarch64", "bochs": "x86-64", "native": "x86-64"}


def set_backend(args) -> None:
    """--backend: every kernel of that backend's architecture on it, in the check workers too (they inherit the
    environment)."""
    if getattr(args, "backend", None):
        from lowp.kernels.executors import BACKEND_ENVS
        os.environ[BACKEND_ENVS[BACKEND_ARCH[args.backend]]] = args.backend


def database_note(args, spec: str | None) -> None:
    """A folder database with a remote Ray cluster: each machine keeps its own unless the folder is shared."""
    from lowp.conformance.run.example_database import is_url
    if spec and not is_url(spec) and args.ray not in (None, "local"):
        print(f"note: the example database {spec} is a folder: each machine of the cluster keeps its own unless "
              "it is on a shared file system; --database redis://HOST:6379/0 shares one", file=sys.stderr)


def _kernels(args):
    """The kernels to judge, checked before anything runs: every --kernels file against the kernel schema, every
    registered kernel's contract, every --kernel name. One KernelConfigError lists all the problems found."""
    from lowp.conformance.search.validate import build_problems, select_kernels, validate_kernels
    from lowp.kernels import KernelConfigError, kernels, load_toml
    problems = []
    for path in args.toml:
        try:
            load_toml(path)
        except KernelConfigError as e:
            problems += e.problems
    registered = kernels()
    if args.no_builtin:
        registered = _from_files(args, registered)
    try:
        validate_kernels(registered)
    except KernelConfigError as e:
        problems += e.problems
    try:
        selected = select_kernels(args.kernel, registered) if args.kernel else registered
    except KernelConfigError as e:
        problems += e.problems
    if not problems:
        problems += build_problems(selected)
    if problems:
        raise KernelConfigError(problems)
    return selected


def _from_files(args, registered):
    """--no-builtin: the registered kernels that came from the --kernels files (a usage error without any)."""
    from lowp.kernels.registry import origin
    if not args.toml:
        args.parser.error("--no-builtin judges only the kernels of --kernels files: give at least one --kernels FILE")
    files = {Path(p).resolve() for p in args.toml}
    return [k for k in registered if origin(k.name) is not None and Path(origin(k.name)).resolve() in files]


def kernels_args(args) -> str:
    """The --kernels options the run was given, as a command line repeats them."""
    return " ".join([*(f"--kernels {p}" for p in args.toml), *(["--no-builtin"] if args.no_builtin else [])])


def _replay_args(args) -> str:
    """What `lowp conformance replay ID` needs besides the id: the same --kernels files and --out folder."""
    out = "" if args.out == Path("lowp-report") else f"--out {args.out}"
    return " ".join(filter(None, [kernels_args(args), out]))


def _replay(args, journal: dict) -> int:
    """Re-run each id; print the verdict and the counterexample as the report shows them (--json: the raw
    result). Exit 1 if any fails, 2 for an id that names no case, check or problem."""
    from lowp.conformance.run.checks import replay
    from lowp.conformance.report import counterexample_lines
    from lowp.kernels.registry import origin
    status = 0
    for case_id in args.ids:
        try:
            result = replay(case_id, journal)
        except (ValueError, KeyError) as e:
            known = f"; checks in {args.out / 'journal.jsonl'}: {', '.join(sorted(journal)) or 'none'}" if journal \
                else (f"; and no journal in {args.out} to find a check id in: give the --out of the run that wrote "
                      "it" if case_id.count(":") == 2 else "")
            print(f"error: {e.args[0] if e.args else e}{known}", file=sys.stderr)
            status = 2
            continue
        if args.json:
            print(json.dumps(result, indent=1))
        else:
            print(f"{case_id}: {result['verdict']}" + (f" ({result['reason']})" if result.get("reason") else ""))
            if result["verdict"] == "FAIL":
                row = {**result, "id": case_id, "origin": _str(origin(result["kernel"]))}
                print("\n".join(counterexample_lines(row, result, _replay_args(args))[2:]))
        status = max(status, int(result["verdict"] == "FAIL"))
    return status


def _schema(args) -> int:
    from lowp.conformance.report.rows import json_schema
    kind = args.ids[0] if args.ids else "report"
    if kind not in ("report", "peers") or len(args.ids) > 1:
        args.parser.error(f"schema takes 'report' (default) or 'peers', not {' '.join(args.ids)!r}")
    print(json.dumps(json_schema(kind), indent=1))
    return 0


def _str(path) -> str | None:
    return None if path is None else str(path)


def _settings(args, options: dict) -> dict:
    """What the run was asked, for report.json and the JUnit properties."""
    from lowp.conformance.run.example_database import describe
    return {"profile": args.profile, "examples": options["examples"], "probe_examples": options["probe_examples"],
            "search": search_name(options), "seed": args.seed, "grid": options["grid"], "cases": list(args.cases),
            "shapes": [list(s) for s in options.get("shapes", ())], "shapes_file": _str(args.shapes),
            "database": describe(options["database"]), "jobs": args.jobs, "timeout": args.timeout,
            "backend": args.backend,
            "kernels": args.kernel, "kernels_files": [str(p) for p in args.toml], "no_builtin": args.no_builtin,
            "out": str(args.out),
            "resume": args.resume, "ray": args.ray}


def _options(args, checks) -> dict:
    """run_check's options from the flags: the profile's examples and grid unless given, the --shapes file's
    shapes, the --case globs (each must match a generated case of some check: else a usage error, exit 2, naming
    it with the known names), the example database."""
    profile = PROFILES[args.profile]
    examples = args.examples if args.examples is not None else 0 if args.cases else profile["examples"]
    if examples < 0:
        args.parser.error(f"--examples must be 0 or more, not {examples}")
    options = {"examples": examples, "seed": args.seed,
               "grid": profile["grid"] if args.grid is None else args.grid,
               "database": database(args), "drawn_search": profile["drawn_search"],
               "probe_rotation": profile["probe_rotation"]}
    if args.shapes is not None:
        from lowp.conformance.search.cases import read_shapes
        try:
            options["shapes"] = read_shapes(args.shapes)
        except ValueError as e:
            args.parser.error(str(e))
    if args.cases:
        options["only"] = list(args.cases)
        _check_patterns(args, [case for c in checks for case in _cases(c, {**options, "only": ()})])
    return options


def _cases(check, options: dict):
    """The generated cases of one check under these options."""
    from lowp.conformance.search.cases import cases_for
    from lowp.kernels import kernel
    return cases_for(kernel(check.kernel), check.check, check.domain, grid=options["grid"], seed=options["seed"],
                     shapes=options.get("shapes", ()), only=options.get("only", ()))


def _check_patterns(args, cases) -> None:
    """Every --case glob must match some case: one that matches none is a usage error naming it and a few names."""
    from lowp.conformance.search.cases import case_names
    for pattern in args.cases:
        if not any(case.matches([pattern]) for case in cases):
            names = case_names(cases)
            some = [names[i * len(names) // 12] for i in range(min(12, len(names)))]   # from every family
            args.parser.error(f"--case {pattern!r} matches no generated case of the selected kernels; case names "
                              f"include {', '.join(some)}{', ...' if len(names) > 12 else ''} (a glob matches a "
                              f"case's name or its whole id, e.g. 'k_*' or '*:4x8x*')")


def check_out(args) -> None:
    """--out names the report folder: a file there is an input error (exit 2) before anything runs, not a
    traceback when the journal is opened."""
    if args.out.exists() and not args.out.is_dir():
        args.parser.input_error(f"--out {args.out}: is a file; --out names the report folder (it is created if "
                                "missing)")


def cmd_conformance(args) -> int:
    from lowp.conformance.run.processes import interruptible
    try:
        with interruptible():
            return _conformance(args)
    except KeyboardInterrupt as e:  # before any check ran, or while the reports were written (they are whole)
        return interrupted(e)


def _conformance(args) -> int:
    from lowp.conformance.run import runner
    from lowp.conformance.run.checks import plan
    from lowp.kernels import KernelConfigError
    if args.action == "schema":
        return _schema(args)
    check_out(args)
    set_backend(args)
    try:
        selected = _kernels(args)
    except KernelConfigError as e:          # a bad configuration: exit 2 before anything runs
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.action == "replay":
        if not args.ids:
            args.parser.error("replay needs the id of a case or check (the report's replay lines give them)")
        return _replay(args, runner.read_journal(args.out / "journal.jsonl"))
    checks = plan(selected)
    options = _options(args, checks)
    if args.action == "list":
        for c in checks:
            lines = [case.id for case in _cases(c, options)] if args.cases else \
                [f"{c.id}{'' if c.claimed else '  (not claimed)'}"]
            for line in lines:
                print(line)
        return 0
    with ExitStack() as held:
        if not hold_out(held, args.out):
            return 2
        return _run(args, checks, options)


def hold_out(held: ExitStack, out: Path) -> bool:
    """Take OUT's lock until `held` closes (lowp.conformance.report.outfolder): False, after saying why, where another
    run holds it (refused before its journal is touched) or the folder cannot be made."""
    from lowp.conformance.report.outfolder import OutLocked, command_line, exclusive
    try:
        held.enter_context(exclusive(out, command_line()))
    except OutLocked as e:
        print(f"error: {e}", file=sys.stderr)
        return False
    except OSError as e:
        print(f"error: --out {out}: cannot write there: {e.strerror or e}", file=sys.stderr)
        return False
    return True


def _run(args, checks, options: dict) -> int:
    """Run the checks and write the reports; a run stopped by Ctrl-C, SIGTERM or a full disk reports what
    finished and exits 128 + the signal, or 1."""
    from lowp.conformance import report
    from lowp.conformance.run import runner
    from lowp.conformance.run.checks import probe_share
    from lowp.conformance.run.ray_runner import RayUnavailable
    start = time.perf_counter()
    database_note(args, options["database"])
    options["probe_examples"] = probe_share(options["examples"])
    settings = _settings(args, options)
    stop = None
    try:
        rows = runner.run(checks, args.out / "journal.jsonl", jobs=args.jobs, resume=args.resume,
                          timeout=args.timeout, options=options, ray=args.ray)
    except RayUnavailable as e:          # --ray ADDRESS where no cluster answers: exit 2 before any check ran
        print(f"error: {e}", file=sys.stderr)
        return 2
    except runner.RunStopped as e:
        rows, stop = e.rows, e
    seconds = time.perf_counter() - start
    written = write_reports(lambda: report.write(rows, args.out, seconds, _replay_args(args), settings), args.out)
    print(report.terminal(rows, seconds, _replay_args(args)))
    if written:
        print(f"reports: {', '.join(str(p) for p in written.values())}; journal: {args.out / 'journal.jsonl'}")
    if stop is not None:
        return stopped(stop, rows)
    failures = report.summary(rows)["claimed_failures"]
    if failures:
        print(f"FAILED: {len(failures)} claimed check(s) broken: {', '.join(failures)}", file=sys.stderr)
    return 1 if failures or not written else 0


def write_reports(write, out: Path) -> dict | None:
    """write() (the reports, each written whole or not at all); None, after saying why, where the disk refuses."""
    try:
        return write()
    except OSError as e:
        print(f"error: cannot write the reports in {out}: {e}", file=sys.stderr)
        return None


def run_held(body, args) -> int:
    """body(args, held) with Ctrl-C and SIGTERM turned into an interrupt that ends in one line (no traceback) and
    an ExitStack `held` for what the run holds (the lock on --out), released however it ends."""
    from contextlib import ExitStack

    from lowp.conformance.run.processes import interruptible
    try:
        with interruptible(), ExitStack() as held:
            return body(args, held)
    except KeyboardInterrupt as e:      # before the run started, or while its reports were written
        return interrupted(e)


def interrupted(e: KeyboardInterrupt) -> int:
    """Ctrl-C or SIGTERM outside the checks' run: a line, no traceback; 128 + the signal."""
    import signal

    from lowp.conformance.run.processes import exit_status, signal_of
    print(f"interrupted by {signal.Signals(signal_of(e)).name}", file=sys.stderr)
    return exit_status(e)


def stopped(stop, rows: list[dict]) -> int:
    """Say why the run stopped and how to go on; its exit status (130 Ctrl-C, 143 SIGTERM, 1 a full disk)."""
    finished = sum(r["verdict"] != "NOT RUN" for r in rows)
    print(f"{'error: ' if stop.status == 1 else ''}{stop.why}; the reports have the {finished} of {len(rows)} "
          "check(s) that finished", file=sys.stderr)
    print("interrupted: --resume continues", file=sys.stderr)
    return stop.status
