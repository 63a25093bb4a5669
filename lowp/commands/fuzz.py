"""`lowp fuzz`: a long campaign over the chosen kernels' claimed checks, a new seed a round until the time budget is
spent, each new counterexample printed as it appears; `--resume` goes on where the last session stopped
(lowp.conformance.run.fuzz)."""
from __future__ import annotations

import re
import sys
import time
from pathlib import Path

from lowp.commands.conformance import (_kernels, _options, _settings, add_run_options, check_out, database_note, hold_out,
                          kernels_args, run_held, set_backend, write_reports)

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
LINE_SECONDS = 10.0
# Per check and round: the batched draws (docs/batch.md) run this long, at over a hundred thousand cases a second
# natively; the rest of a round (its process, the generated cases, the search) costs one to two seconds a check, so
# the draws are most of a round and end to end stays above half a plain C harness's rate (docs/batch.md).
DRAW_SECONDS = 3.0
DRAW_CASES = 10 ** 9          # the draws stop on time, not on count


def duration(text: str) -> float:
    """Seconds in '90', '90s', '10m', '2h', '1h30m'."""
    t = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", t):
        return float(t)
    parts = re.findall(r"(\d+(?:\.\d+)?)([smhd])", t)
    if not parts or "".join(n + u for n, u in parts) != t:
        raise ValueError(text)
    return sum(float(n) * UNITS[u] for n, u in parts)


duration.__name__ = "time (90s, 10m, 2h, 1h30m)"      # argparse names the type in its error


def add_parser(sub) -> None:
    p = sub.add_parser("fuzz", help="keep drawing new cases for the chosen kernels until a time budget; report "
                                    "each new counterexample as it appears (resumable)",
                       description="A fuzzing campaign: the chosen kernels' claimed checks (--probes: all) run round "
                                   "after round, each round with the next seed (new values in every generated "
                                   "case, a new search), on the process pool or Ray, until --budget. A claimed "
                                   "check's counterexample is printed as it appears and the check leaves the "
                                   "campaign; OUT/fuzz.md and fuzz.json sum it up, and --resume goes on from there.")
    add_run_options(p, out=Path("lowp-fuzz"),
                    resume="go on with the campaign in OUT: finish the round it left, then the next seeds",
                    seed="seed of the first round; each round takes the next (default 1: `lowp conformance` runs 0)",
                    first_seed=1)
    p.add_argument("--budget", type=duration, default=600.0, metavar="TIME",
                   help="how long to go on: no round or check starts after it, those running finish (90s, 10m, 2h, "
                        "1h30m; default 10m)")
    p.add_argument("--rounds", type=int, default=None, metavar="N",
                   help="also stop once N rounds have finished (default: only the budget stops)")
    p.add_argument("--draw-seconds", type=float, default=DRAW_SECONDS, metavar="S",
                   help="per check and round, how long to run cases drawn from the search's distribution through "
                        "the batched path before the search (docs/batch.md; default %(default)g; 0: none)")
    p.add_argument("--probes", action="store_true",
                   help="also fuzz the not-claimed probes (the exact contract on the full range, ...): they fail by "
                        "design, and a new kind of failure of theirs is reported")
    p.set_defaults(func=cmd_fuzz)


def cmd_fuzz(args) -> int:
    return run_held(_fuzz, args)


def _fuzz(args, held) -> int:
    from lowp.conformance import report
    from lowp.conformance.run import fuzz
    from lowp.conformance.run.checks import plan, probe_share
    from lowp.conformance.run.runner import RunStopped
    from lowp.kernels import KernelConfigError
    if args.budget <= 0 or (args.rounds is not None and args.rounds < 1):
        args.parser.error("--budget must be more than 0 s and --rounds at least 1")
    check_out(args)
    set_backend(args)
    try:
        selected = _kernels(args)
    except KernelConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    planned = plan(selected)
    checks, problem = _campaign_checks(args, [c for c in planned if c.claimed or args.probes], planned)
    if problem:
        print(f"error: --resume: {problem}", file=sys.stderr)
        return 2
    options = _options(args, checks)
    if not hold_out(held, args.out):     # one campaign at a time in OUT: refused before its log is touched
        return 2
    options["probe_examples"] = probe_share(options["examples"])
    if args.draw_seconds < 0:
        args.parser.error("--draw-seconds must be 0 or more")
    if args.draw_seconds > 0:
        options.update(draws=DRAW_CASES, draw_seconds=args.draw_seconds)
    kernels = kernels_args(args)
    started_ray = _connect(args)
    if started_ray is None:
        return 2
    database_note(args, options["database"])
    draws = f"{args.draw_seconds:g} s of batched draws and " if args.draw_seconds > 0 else ""
    kernel_count = len({c.kernel for c in checks})
    print(f"fuzzing {len(checks)} check(s) of {kernel_count} kernel(s) for {_hms(args.budget)}"
          f"{f' or {args.rounds} rounds' if args.rounds else ''} ({draws}{options['examples']} search examples a "
          f"check a round); campaign in {args.out}", flush=True)

    def found(event):
        row = event["row"]
        what = "COUNTEREXAMPLE" if row["claimed"] else "new failure mode of a not-claimed probe"
        print(f"\n{what} in round {event['round']} (seed {event['seed']}): {row['id']}")
        print("\n".join(report.failure_lines(row, fuzz.replay_args(args.out, event["seed"], kernels))),
              flush=True)

    shown = [0.0, 0, 0]      # when a line was last printed; rounds and cases since

    def finished(rnd, rows):
        """A line per round, at most one every LINE_SECONDS (short rounds come many a second) unless it was cut."""
        ran = [r for r in rows if r["verdict"] != "NOT RUN"]
        shown[1:] = [shown[1] + 1, shown[2] + sum(r["executed"] for r in ran)]
        if time.monotonic() - shown[0] < LINE_SECONDS and len(ran) == len(rows):
            return
        print(f"round {rnd['round']} (seed {rnd['seed']}): {len(ran)} of {len(rows)} checks; "
              f"{shown[1]} round(s), {shown[2]:,} cases since the last line"
              + ("" if len(ran) == len(rows) else "; the budget ran out (--resume finishes the round)"), flush=True)
        shown[:] = [time.monotonic(), 0, 0]
    start = time.perf_counter()
    stop = None          # (why, exit status) of a campaign stopped before its budget
    try:
        campaign = fuzz.campaign(checks, args.out, options=options, budget=args.budget, rounds=args.rounds,
                                 first_seed=args.seed, resume=args.resume, jobs=args.jobs, timeout=args.timeout,
                                 ray=args.ray, on_found=found, on_round=finished)
    except KeyboardInterrupt as e:      # between rounds (within one, the runner's RunStopped)
        import signal

        from lowp.conformance.run.processes import exit_status, signal_of
        stop = (f"interrupted by {signal.Signals(signal_of(e)).name}", exit_status(e))
    except RunStopped as e:
        stop = (e.why, e.status)
    except fuzz.LogUnwritable as e:     # a full disk
        stop = (str(e), 1)
    finally:
        if started_ray:
            import ray
            ray.shutdown()
    if stop is not None:
        campaign = fuzz.Campaign.load(args.out, checks)
    if campaign.unreadable:
        print(f"resume: skipped {len(campaign.unreadable)} unreadable line(s) of {args.out / fuzz.LOG} (lines "
              f"{', '.join(map(str, campaign.unreadable[:5]))}{', ...' if len(campaign.unreadable) > 5 else ''})",
              file=sys.stderr)
    seconds = time.perf_counter() - start
    settings = {**_settings(args, options), "budget": args.budget, "rounds": args.rounds, "probes": args.probes,
                "draw_seconds": args.draw_seconds}
    paths = write_reports(lambda: fuzz.write(campaign, settings, seconds, kernels), args.out)
    s = fuzz.summary(campaign)
    print(f"\n{s['rounds']} round(s), {s['executed']:,} cases executed on {s['checks']} checks; "
          f"{len(s['claimed_counterexamples'])} claimed check(s) with a counterexample, {s['probe_failure_modes']} "
          f"probe failure mode(s); {s['in_play']} check(s) still in play.")
    if paths:
        print(f"reports: {paths['markdown']}, {paths['json']}; campaign log: {args.out / fuzz.LOG}")
    if stop is not None or (s["in_play"] and not args.rounds):
        print(f"go on: lowp fuzz --resume --out {args.out}{' ' + kernels if kernels else ''} "
              "[--budget TIME]")
    if stop is not None:
        print(f"{'error: ' if stop[1] == 1 else ''}{stop[0]}", file=sys.stderr)
        print("interrupted: --resume continues", file=sys.stderr)
        return stop[1]
    return 1 if s["claimed_counterexamples"] or not paths else 0


def _campaign_checks(args, chosen: list, planned: list) -> tuple[list, str | None]:
    """(the checks to fuzz, None) or (_, why not): with --resume, those of the campaign in OUT (its first round
    names them), so that `lowp fuzz --resume --out OUT` goes on with the kernels it was started with; a --kernel
    or --probes that chooses other checks is refused rather than mixed into it. Without --resume, or with no
    campaign in OUT, `chosen`."""
    from lowp.conformance.run import fuzz
    from lowp.conformance.run.runner import listed
    if not args.resume:
        return chosen, None
    rounds = fuzz.Campaign.load(args.out, chosen).rounds
    if not rounds:
        return chosen, None
    recorded = set(rounds[0]["checks"])
    if args.kernel or args.probes:
        if {c.id for c in chosen} != recorded:
            return chosen, (f"the campaign in {args.out} fuzzes {len(recorded)} check(s) "
                            f"({listed(sorted(recorded))}); this --kernel/--probes choice names "
                            f"{len(chosen)} ({listed(sorted(c.id for c in chosen))}): resume it without them, or "
                            f"start a new campaign in another --out")
        return chosen, None
    missing = recorded - {c.id for c in planned}
    if missing:
        return chosen, (f"the campaign in {args.out} fuzzes {len(missing)} check(s) of kernels not registered here "
                        f"({listed(sorted(missing))}): give the --kernels files it was started with")
    return [c for c in planned if c.id in recorded], None


def _connect(args):
    """With --ray: connect once for every round (a local cluster is started once). True if it was started here,
    False if none is needed, None (after saying why) if no cluster answers."""
    if args.ray is None:
        return False
    from lowp.conformance.run.ray_runner import RayUnavailable, connect
    try:
        return connect(args.ray, args.jobs)
    except RayUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return None


def _hms(seconds: float) -> str:
    h, rest = divmod(int(round(seconds)), 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (s, "s")) if v) or "0s"
