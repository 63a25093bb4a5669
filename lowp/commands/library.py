"""What every library command (`lowp xnnpack PATH`, and the next library's) shares: the campaign options, and the
run of the engine (lowp.conformance.run.campaign) on the library the command names. A library command adds its own
selectors (XNNPACK's --datatype and --isa) and hands them over as the selection."""
from __future__ import annotations

from lowp.cli import seed as seed_type

import sys
from pathlib import Path

from lowp.commands.conformance import (BACKENDS, PROFILES, RayAddress, add_database_options, database, hold_out,
                                       run_held, search_name, set_backend, stopped)


def add_campaign_options(p, default_out: str) -> None:
    """The options of every library campaign, after the library's own PATH and selectors."""
    p.add_argument("--kernel", action="append", default=[], metavar="GLOB",
                   help="only kernels whose name matches this shell glob (repeatable), e.g. '*_4x16c4__*'")
    p.add_argument("--out", type=Path, default=Path(default_out), help=f"report folder (default ./{default_out})")
    p.add_argument("--profile", choices=tuple(PROFILES), default="quick",
                   help="how hard to look per kernel (default quick: 30 search examples, drawn directly rather "
                        "than by hypothesis; no seed grid)")
    p.add_argument("--examples", type=int, default=None, help="search examples per claimed check (default: the "
                                                              "profile's)")
    p.add_argument("--jobs", type=int, default=None, help="parallel workers for builds and checks (default: one "
                                                          "per core)")
    p.add_argument("--resume", action="store_true", help="keep the journal's finished checks and run the rest")
    p.add_argument("--fresh", action="store_true",
                   help="judge every kernel again: no verdict an earlier campaign kept (same kernel sources and "
                        "build, lowp code and options) is reused")
    p.add_argument("--since", default=None, metavar="REV",
                   help="only the kernels whose files changed since the git revision REV (committed, staged, "
                        "unstaged or untracked: a pull request's `--since origin/main`): a kernel whose build "
                        "compiles a changed file, or that may include a changed header; the rest are not judged")
    p.add_argument("--seed", type=seed_type, default=0, help="seed of the cases' values and of the search (default 0)")
    p.add_argument("--timeout", type=float, default=600, help="seconds before a check counts as hung (default 600)")
    p.add_argument("--backend", choices=BACKENDS, default=None,
                   help="run every x86-64 (bochs, native) or AArch64 (unicorn, qemu) kernel there")
    p.add_argument("--write-toml", type=Path, default=None, metavar="FILE",
                   help="also write what lowp made of each kernel to FILE ([[kernel]] tables; `lowp conformance "
                        "--kernels FILE --no-builtin` judges them again)")
    add_database_options(p)
    p.add_argument("--ray", nargs="?", const="local", default=None, action=RayAddress, metavar="ADDRESS",
                   help="run the checks as Ray tasks on the cluster at ADDRESS (host:port, or 'auto'); without one, "
                        "on a Ray cluster of this machine started for the command (docs/scale-out.md); the kernels "
                        "are built here, and every node must see the checkout and the cache at the same paths")


def run_library(library, args, selection: dict) -> int:
    """Judge the kernels of the checkout at args.path that `selection` ({group key: [values]}) and --kernel select:
    exit 2 for a PATH that is not a checkout or a selection that names nothing, 1 when a kernel fails a claimed
    check, 0 otherwise."""
    return run_held(lambda args, held: _campaign(library, args, selection, held), args)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _campaign(library, args, selection: dict, held) -> int:
    from lowp.conformance.run import campaign
    from lowp.conformance.run.checks import probe_share
    try:
        checkout = library.open(args.path)
    except campaign.NotACheckout as e:
        return _fail(str(e))
    refusal = library.refuse(checkout, selection)
    if refusal:
        return _fail(refusal)
    set_backend(args)
    if not hold_out(held, args.out):     # one run at a time in OUT: refused before its journal is touched
        return 2
    profile = PROFILES[args.profile]
    examples = profile["examples"] if args.examples is None else args.examples
    options = {"examples": examples, "seed": args.seed, "grid": profile["grid"], "database": database(args),
               "drawn_search": profile["drawn_search"], "probe_rotation": profile["probe_rotation"],
               "probe_examples": probe_share(examples)}
    settings = {"profile": args.profile, "examples": examples, "probe_examples": options["probe_examples"],
                "search": search_name(options), "seed": args.seed, "grid": options["grid"], "jobs": args.jobs,
                "timeout": args.timeout,
                "backend": args.backend, **{f"{key}s": values for key, values in selection.items()},
                "kernels": args.kernel, "kernels_files": [str(args.out / "kernels.toml")], "out": str(args.out),
                "resume": args.resume, "fresh": args.fresh, "ray": args.ray, "since": args.since}
    run = campaign.Campaign(library, checkout, args.out, selection={k: v for k, v in selection.items() if v},
                            kernel_globs=tuple(args.kernel), options=options, jobs=args.jobs, resume=args.resume,
                            timeout=args.timeout, write_toml=args.write_toml, settings=settings,
                            reuse=not args.fresh, ray=args.ray, since=args.since)
    try:
        status, stop = campaign.run(run)
    except campaign.SinceError as e:
        return _fail(str(e))
    return stopped(stop, stop.rows) if stop is not None else status
