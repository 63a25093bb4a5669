"""`lowp study NAME`: reproduce a seed's claims with lowp's models and kernels; write the page, its numbers (JSON)
and its figures (PNG, with the optional matplotlib: `pip install 'lowp[plots]'`) into docs/studies/."""
from __future__ import annotations

from lowp.cli import seed as seed_type

from pathlib import Path


def default_out() -> Path:
    """docs/studies of the checkout lowp runs from (an editable install), else ./docs/studies."""
    import lowp
    repo = Path(lowp.__file__).resolve().parent.parent
    return repo / "docs" / "studies" if (repo / "docs").is_dir() else Path("docs") / "studies"


def add_parser(sub) -> None:
    from lowp.conformance.studies import STUDIES
    p = sub.add_parser("study", help="reproduce a seed's claims: write a docs page with tables and figures",
                       description="\n".join(f"{k}: {v}" for k, v in STUDIES.items()))
    p.add_argument("names", nargs="*", metavar="NAME", help=f"{', '.join(STUDIES)}, or all (default: list them)")
    p.add_argument("--out", type=Path, default=None, help="folder for NAME.md, NAME.json, NAME-*.png "
                                                          "(default: the repository's docs/studies)")
    p.add_argument("--small", action="store_true", help="the small configuration the tests use (seconds)")
    p.add_argument("--seed", type=seed_type, default=0, help="random seed (default 0)")
    p.add_argument("--no-plots", action="store_true", help="write the tables only")
    p.add_argument("--no-bench", action="store_true", help="seed004: leave out `lowp bench gemm --quick`")
    p.add_argument("--no-real", action="store_true", help="seed002: do not run the real kernels")
    p.set_defaults(func=cmd_study)


def cmd_study(args) -> int:
    from lowp.conformance.studies import STUDIES, run
    names = list(STUDIES) if args.names == ["all"] else args.names
    if not names:
        for k, v in STUDIES.items():
            print(f"{k:8s} {v}")
        return 0
    unknown = [n for n in names if n not in STUDIES]
    if unknown:
        raise SystemExit(f"lowp study: no study named {', '.join(unknown)}; known: {', '.join(STUDIES)}")
    out = args.out or default_out()
    for name in names:
        options = {"seed": args.seed}
        if name == "seed004":
            options["run_bench"] = not args.no_bench
        if name == "seed002":
            options["real"] = not args.no_real
        r = run(name, out, small=args.small, plots=not args.no_plots, **options)
        print(f"{name}: {r.page} ({r.seconds:.1f} s); numbers: {r.data}")
        for f in r.figures:
            print(f"  figure: {f}")
        if r.plots_skipped:
            print(f"  figures skipped: {r.plots_skipped}")
    return 0
