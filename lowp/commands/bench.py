"""`lowp bench`: benchmarks that report ratios measured side by side in one run (lowp.conformance.bench, one module per
target, all inside the installed package)."""
from __future__ import annotations

from pathlib import Path

from tabulate import tabulate

HEADLINE = ("_mm512_maddubs_epi16", "_mm256_maddubs_epi16", "_mm_maddubs_epi16", "_mm512_madd_epi16",
            "_mm512_dpbusd_epi32", "_mm256_dpbusd_avx_epi32", "_mm512_dpbusds_epi32", "_mm512_dpwssds_epi32",
            "_mm256_dpbssd_epi32", "_mm512_adds_epi16", "_mm512_cvtepi16_epi32", "_mm512_mask_dpbusd_epi32")


def add_parser(sub) -> None:
    bench = sub.add_parser("bench", help="benchmarks (ratios side by side in one run)")
    bench.add_argument("suite", nargs="?", default="gemm",
                       choices=("gemm", "isa", "emulator", "mutants", "conformance", "xnnpack", "ggml", "prove", "fuzz"),
                       help="gemm (default): seed 004's GEMM grid, ns per multiply-accumulate of numpy float32, the "
                            "x86 kernels and FBGEMM, side by side; isa: model vs native lanes/s; "
                            "emulator: the AArch64 executors' per-call cost, Unicorn vs qemu-user, on the SDOT GEMM at 64x64x256 and "
                            "1x1x1; mutants: the mutation suite's kill rate, time to "
                            "the first counterexample and counterexample sizes; conformance: `lowp conformance` "
                            "over 100 copies of real kernels (issue 11's targets: 10 minutes for 100, 2 s per kernel); "
                            "prove: lowp prove's targets (VNNI and SDOT kernels at 4x8x64 within 10 s, VPMADDUBSW on "
                            "u7 x s8 within 30 s) and the largest K each proves in 5 minutes; fuzz: cases checked "
                            "per second on one core, per case and batched, for a native and an emulated kernel, "
                            "beside a plain C harness on the native one (the target: a third of the harness's)")
    bench.add_argument("--quick", action="store_true",
                       help="gemm: 8 corner shapes of the grid, fewer rounds; emulator: one round (a smoke test, "
                            "not a measurement); conformance: 10 kernels; fuzz: 0.5 s a figure instead of 3")
    bench.add_argument("--kernel", action="append", default=[], metavar="NAME",
                       help="gemm: only this registered kernel (repeatable; default: every x86-64 kernel); "
                            "conformance --ray: only these kernels (default: the built-in suite); fuzz: the native "
                            "kernel measured (default u8s8s32_avx2) or, an AArch64 one, the emulated one (default "
                            "sdot_s8_neon)")
    bench.add_argument("--kernels", dest="kernel_files", action="extend", nargs="+", default=[], metavar="FILE.toml",
                       help="gemm, fuzz: also register the kernels of this TOML file (repeatable), as lowp "
                            "conformance does; a NAME here is the deprecated spelling of --kernel NAME; conformance: the "
                            "kernel files to copy (default: the packaged kernels/quantized/x86.toml and aarch64.toml)")
    bench.add_argument("--no-torch", action="store_true", help="gemm: leave FBGEMM (PyTorch) out")
    bench.add_argument("--rounds", type=int,
                       help="gemm: timing rounds per shape (default 7, quick 5); conformance --ray: runs of each "
                            "backend (default 2)")
    bench.add_argument("--all", action="store_true", help="isa: every x86 intrinsic, not just the headline ones")
    bench.add_argument("--registers", type=int, default=1 << 14, help="isa: registers per batch (default 16384)")
    bench.add_argument("--hooks", action="store_true",
                       help="emulator: what Unicorn's hooks cost instead (no hooks, the budget, exact and per-mnemonic "
                            "counts, lockstep), million instructions per second on the same GEMM")
    bench.add_argument("--x86", action="store_true",
                       help="emulator: the x86 kernels on Bochs instead, per call beside the native AVX2 kernel of the "
                            "same shape (and the VNNI kernel natively where this CPU has it)")
    bench.add_argument("--toml", type=Path, action="append", default=None,
                       help="mutants: a suite's kernels TOML, with expected.toml beside it (repeatable; default: "
                            "the two suites lowp ships, conformance/bench/mutation_suite/mutants.toml and "
                            "independent/mutants.toml)")
    bench.add_argument("--examples", type=int, default=None,
                       help="mutants: hypothesis examples per check (default 100); conformance: as lowp conformance "
                            "(default 150)")
    bench.add_argument("--copies", type=int, default=None, metavar="N",
                       help="conformance: kernels in total, cycling over the files' entries (default 100; --quick 10)")
    bench.add_argument("--jobs", type=int, default=None, help="conformance: parallel workers (default: one per core)")
    bench.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                       help="conformance: instead, the built-in suite (or the --kernel kernels) run by the process "
                            "pool and by the Ray backend side by side (issue 14: Ray within 10%%), --rounds times "
                            "each, alternating which goes first; on the Ray cluster at ADDRESS, else on one of this "
                            "machine")
    bench.add_argument("--checkout", type=Path, default=None, metavar="PATH",
                       help="xnnpack: the XNNPACK checkout whose kernels `lowp xnnpack` judges (issue 23: every "
                            "kernel of one datatype this machine can run, quick profile, within 60 minutes); ggml: the "
                            "ggml or llama.cpp checkout `lowp ggml` judges whole (issue 35: within 20 minutes)")
    bench.add_argument("--datatype", action="append", default=[], metavar="D",
                       help="xnnpack: the datatype (default qs8-qc8w); with --zoo: only these datatypes' groups "
                            "(repeatable; default: every datatype)")
    bench.add_argument("--zoo", action="store_true",
                       help="xnnpack: instead of one datatype, the whole campaign (every datatype) estimated from one "
                            "kernel of each (datatype, op, ISA) group, judged here (issue 36: the zoo within 30 "
                            "minutes on 2 cores, the per-kernel median within 1 s)")
    bench.add_argument("--cold", action="store_true",
                       help="xnnpack, ggml: on an empty build cache (a fresh LOWP_CACHE_DIR, removed after): every "
                            "build, zig's runtimes per target included, joins the time; default: the cache's builds "
                            "are reused (every verdict is judged again either way: the campaign runs with --fresh)")
    bench.add_argument("--isa", action="append", default=[], metavar="ISA",
                       help="xnnpack, ggml: only this ISA (XNNPACK's token) or variant (ggml's; repeatable), as the "
                            "library command takes it (default: all)")
    bench.set_defaults(func=cmd_bench)


def cmd_bench(args) -> int:
    if args.suite == "gemm":
        return bench_gemm(args)
    if args.suite == "mutants":
        return bench_mutants(args)
    if args.suite == "conformance":
        return bench_conformance(args)
    if args.suite == "xnnpack":
        return bench_xnnpack(args)
    if args.suite == "ggml":
        return bench_ggml(args)
    if args.suite == "fuzz":
        return bench_fuzz(args)
    if args.suite == "prove":
        from lowp.conformance.bench.prove import prove_targets  # noqa: PLC0415
        rows = prove_targets(args.kernel or None, budget=300.0, largest=not args.quick)
        print(tabulate(rows, headers="keys"))
        return 0 if all(r["within"] for r in rows) else 1
    if args.suite == "emulator":
        from lowp.conformance.bench.emulator import (HOOK_REPEATS, ROUNDS, emulator_benchmark, hook_modes,  # noqa: PLC0415
                                                     x86_benchmark)
        if args.x86:
            rows = x86_benchmark(rounds=1 if args.quick else ROUNDS)
        elif args.hooks:
            rows = hook_modes(repeats=1 if args.quick else HOOK_REPEATS)
        else:
            rows = emulator_benchmark(rounds=1 if args.quick else ROUNDS)
        print(tabulate(rows, headers="keys", floatfmt=".3g"))
        return 0
    return bench_isa(args)


def bench_fuzz(args) -> int:
    """Cases per second per case, batched and in a C harness (lowp.conformance.bench.fuzz). --kernel NAME (a
    registered kernel, or one of a --kernels file): an AArch64 kernel is the emulated one (default sdot_s8_neon),
    any other the native one (default u8s8s32_avx2)."""
    import sys

    from lowp.conformance.bench.fuzz import END_TO_END_BUDGET, end_to_end, fuzz_benchmark  # noqa: PLC0415
    from lowp.kernels import KernelConfigError
    try:
        native, emulated = fuzz_kernels(args)
    except KernelConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    seconds = 0.5 if args.quick else 3.0
    print(f"measuring {native} (native) and {emulated} (Unicorn, qemu-user), {seconds:g} s a figure ...", flush=True)
    rows = fuzz_benchmark(native, emulated, seconds=seconds)
    print("cases checked per second, one core: per case (a guarded call, the model and the judge per case), batched "
          "(lowp's batched path, docs/batch.md) and, natively, a plain C harness (the same kernel called on the same "
          "cases, C poisoned, every element compared with a naive C loop); the target is batched/C harness >= 0.33")
    print(tabulate(_shown(rows), headers="keys", disable_numparse=True))
    print(f"\nlowp fuzz end to end ({END_TO_END_BUDGET * seconds:g} s budget, one job, default draws and search: every "
          "case its rounds executed per second of the campaign), then the C harness; the target is end-to-end/C "
          "harness >= 0.5 ...", flush=True)
    print(tabulate(_shown([end_to_end(native, seconds, args.kernel_files)]), headers="keys", disable_numparse=True))
    return 0


def _shown(rows: list[dict]) -> list[dict]:
    """Cases per second with thousands separators, ratios to two decimals."""
    return [{k: (f"{v:,.0f}" if k.endswith("/s") else f"{v:.2f}") if isinstance(v, float) else v
             for k, v in r.items()} for r in rows]


def fuzz_kernels(args) -> tuple[str, str]:
    """(native, emulated): the kernels `lowp bench fuzz` measures, after registering the --kernels files; each
    --kernel goes to the slot its target says (AArch64: emulated). KernelConfigError for a bad file, an unknown
    name, two kernels for one slot, or a kernel the batched path does not take (a requantizing one)."""
    from lowp.conformance.run.batch import batchable
    from lowp.conformance.bench.fuzz import EMULATED, NATIVE
    from lowp.conformance.search.validate import select_kernels
    from lowp.kernels import KernelConfigError, kernels, load_toml
    from lowp.kernels.schema import Problem
    for path in args.kernel_files:
        load_toml(path)
    chosen = {"native": [], "emulated": []}
    for k in select_kernels(args.kernel, kernels()) if args.kernel else []:
        chosen["emulated" if k.target == "aarch64" else "native"].append(k)
    problems = [Problem(None, None, "--kernel", f"{len(ks)} {slot} kernels ({', '.join(k.name for k in ks)}); "
                        "lowp bench fuzz measures one native and one emulated (AArch64) kernel")
                for slot, ks in chosen.items() if len(ks) > 1]
    problems += [Problem(None, k.name, None, f"a {k.signature} kernel{' with quantization parameters' * k.quantized}"
                         "; the batched path (and so this benchmark) takes plain gemm kernels (docs/batch.md)")
                 for ks in chosen.values() for k in ks if not batchable(k)]
    if problems:
        raise KernelConfigError(problems)
    return (chosen["native"][0].name if chosen["native"] else NATIVE,
            chosen["emulated"][0].name if chosen["emulated"] else EMULATED)


def bench_isa(args) -> int:
    from lowp.isa_models import intrinsic, intrinsics
    from lowp.emulator.x86.native import NativeUnavailable, NativeX86
    from lowp.conformance.bench.isa import measure
    try:
        backend = NativeX86()
    except NativeUnavailable as e:
        print(f"native back end unavailable ({e}); models only")
        backend = None
    chosen = intrinsics("x86") if args.all else [intrinsic(n) for n in HEADLINE]
    rows = []
    for intr in chosen:
        r = measure(intr, backend, registers=args.registers)
        reason = backend.unavailable(intr) if backend else "no native back end"
        rows.append((r["intrinsic"], r["lanes"], f"{r['model_lanes_per_s'] / 1e6:.1f}",
                     f"{r['native_lanes_per_s'] / 1e6:.1f}" if r["native_lanes_per_s"] else f"skipped: {reason}",
                     f"{r['native_over_model']:.1f}x" if r["native_over_model"] else "-"))
    print(tabulate(rows, headers=("intrinsic", "lanes/batch", "model M lanes/s", "native M lanes/s",
                                  "native / model")))
    if backend:
        print(f"\nnative: {backend.describe()}")
    return 0


def gemm_kernels(args) -> list[str] | None:
    """The names of the kernels `lowp bench gemm` times (None: every x86-64 kernel registered), after registering
    the --kernels files and checking everything before anything is timed: KernelConfigError for a bad file, an
    unknown name or a kernel that does not build. A --kernels value that is no file and no .toml is the deprecated
    spelling of --kernel NAME (one release): it still selects, with a warning."""
    import sys

    from lowp.conformance.search.validate import build_problems, select_kernels, validate_kernels
    from lowp.kernels import KernelConfigError, kernels, load_toml
    files = [v for v in args.kernel_files if v.endswith(".toml") or "/" in v or Path(v).is_file()]
    old = [v for v in args.kernel_files if v not in files]
    if old:
        print(f"warning: `lowp bench gemm --kernels {' '.join(old)}` is deprecated: --kernels now takes a TOML file; "
              f"select kernels with {' '.join(f'--kernel {n}' for n in old)}", file=sys.stderr)
    for path in files:
        load_toml(path)
    validate_kernels(kernels())
    names = [*args.kernel, *old]
    selected = select_kernels(names, kernels()) if names else kernels("x86-64")
    for k in selected:
        if k.target != "x86-64":
            print(f"note: {k.name} is an {k.target} kernel; lowp bench gemm times x86-64 kernels on this CPU",
                  file=sys.stderr)
    problems = build_problems([k for k in selected if k.target == "x86-64"])
    if problems:
        raise KernelConfigError(problems)
    return [k.name for k in selected] if names else None


def bench_gemm(args) -> int:
    import sys
    import time

    from lowp.kernels import KernelConfigError
    from lowp.conformance.bench.gemm import gemm_benchmark, per_call_overhead, summarize
    try:
        names = gemm_kernels(args)
    except KernelConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    from lowp.conformance.run.progress import Counter
    start = time.perf_counter()
    with Counter("shapes", 1) as tick:
        def progress(i, n, shape):
            tick(i + 1, f"{shape[0]}x{shape[2]} x {shape[2]}x{shape[1]}", total=n)
        result = gemm_benchmark(quick=args.quick, names=names, rounds=args.rounds, torch=not args.no_torch,
                                progress=progress)
    rows, ratios = summarize(result)
    grid = result["grid"]
    print(f"seed 004 grid{' (quick: corners)' if args.quick else ''}: {len(grid)} shapes, C = A(HxD) x B(DxW); "
          f"mean over the grid of time per call / (H W D); single-threaded; median of {result['rounds']} rounds")
    print(tabulate([[r[h] if r[h] is not None else "" for h in r] for r in rows], headers=list(rows[0]),
                   floatfmt=(None, None, ".4f", ".0f", ".1f", None)))
    print()
    print(tabulate(ratios, headers=("ratio (side by side, this run)", "value", "compare")))
    live = [r["contender"] for r in rows if r["ns/MAC (grid mean)"] is not None and r["group"] != "float"
            and not r["contender"].startswith("fbgemm")]
    if live:
        o = per_call_overhead("q8_avx512vnni" if "q8_avx512vnni" in live else live[0])
        print(f"\nper-call cost on 8x8x8 ({o['kernel']}): bare C call through cffi {o['bare_call_us']:.1f} us, "
              f"executor.run unguarded (timed here) {o['run_us']:.1f} us, guarded (conformance) "
              f"{o['guarded_run_us']:.1f} us")
    for note in result["notes"]:
        print(f"note: {note}")
    print(f"{time.perf_counter() - start:.0f} s")
    return 0


def bench_mutants(args) -> int:
    """Run the claimed checks of every mutant and control (child processes, one per core) and print, per kernel,
    whether lowp killed it with the named cause, then the kill rate, false alarms, median time to the first
    counterexample and median counterexample size."""
    import sys
    import tempfile
    import time

    from lowp.conformance.bench import mutants
    tomls = args.toml or list(mutants.SUITES.values())
    missing = [f for t in tomls for f in (t, t.with_name("expected.toml")) if not f.is_file()]
    if missing:
        print(f"error: no mutation suite at {', '.join(map(str, missing))}; pass --toml FILE (with expected.toml "
              "beside it)", file=sys.stderr)
        return 2
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        expected, rows = mutants.run_suites(tomls, Path(tmp) / "journal.jsonl",
                                            examples=100 if args.examples is None else args.examples)
    seconds = time.perf_counter() - start
    s = mutants.summary(expected, rows)
    table = [(name, expected[name].kind, expected[name].cause or "", "yes" if ok else "NO", why[:110])
             for name, (ok, why) in s["verdicts"].items()]
    print(tabulate(table, headers=("kernel", "kind", "cause", "as expected", "what lowp said"), tablefmt="github"))
    print(f"\nkilled {s['killed']} of {s['mutants']} mutants ({100 * s['killed'] / max(1, s['mutants']):.0f}%), "
          f"{s['false_alarms']} false alarms in {s['controls']} controls; median time to the first counterexample "
          f"{s['median_first_failure_seconds']} s; median counterexample {s['median_counterexample_elements']} "
          f"elements ({s['median_counterexample_nonzero']} nonzero); {len(rows)} checks in {seconds:.1f} s")
    return 0 if s["killed"] == s["mutants"] and not s["false_alarms"] else 1


def _s(x) -> str:
    return "" if x is None else f"{x:.2f}"


def bench_conformance(args) -> int:
    """`lowp conformance` over N copies of real kernels (lowp.conformance.bench.conformance): the wall time against issue 11's
    10 minutes, per-check and per-kernel seconds native and emulated, verdict counts, and one kernel of each entry
    against the 2 s target. Exits 0 whatever the verdicts (a benchmark, not a test); 2 for a bad configuration."""
    import sys

    from lowp.conformance.bench import conformance as bench
    from lowp.kernels import KernelConfigError
    if args.ray is not None:
        return bench_ray(args)
    n = args.copies or (bench.QUICK_COPIES if args.quick else bench.DEFAULT_COPIES)
    try:
        result = bench.run(args.kernel_files or None, n=n, jobs=args.jobs,
                           examples=150 if args.examples is None else args.examples)
    except (KernelConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    s = bench.summarize(result)
    t = s["seconds"]
    target = bench.RUN_TARGET_SECONDS
    print(f"lowp conformance over {s['kernels']} kernels ({s['backends']['native']} native, "
          f"{s['backends']['emulated']} emulated; copies of {', '.join(result['tomls'])}), {s['checks']} checks, "
          f"{s['jobs']} jobs on {s['cores']} cores, {result['examples']} search examples per check"
          f"{'' if result['grid'] else ', no grid'}; the run had {100 * result['cpu_share']:.0f}% of its "
          f"{s['jobs']} workers' cores (CPU seconds / jobs x wall; 1-minute load average "
          f"{result['load']['before']:.1f} before)" + (": other work shared the cores, the timings are inflated"
                                                        if result["cpu_share"] < 0.8 else "") + "\n")
    print(tabulate([("total (check + build, plan, run, report)", f"{t['total']:.1f}",
                     f"{'within' if s['within_target'] else 'OVER'} {target / 60:.0f} min"
                     + ("" if s["kernels"] == 100 else
                        f" (for 100 kernels; {t['total'] * 100 / s['kernels']:.0f} s scaled)")),
                    ("  check the configuration and build (cache)", f"{t['build']:.1f}", ""),
                    ("  run the checks (child processes)", f"{t['run']:.1f}", ""),
                    ("  write the report", f"{t['report']:.1f}", ""),
                    ("sum of the rows' seconds", f"{s['check_seconds']:.1f}", "cases, search, shrinking"),
                    ("outside the rows (jobs x run - sum)", f"{s['overhead']:.1f}",
                     f"{s['overhead'] / max(1, s['checks']):.2f} s per check: worker start, kernel load, cases "
                     "generated, idle workers at the end")],
                   headers=("wall time", "seconds", "target"), tablefmt="github"))
    print()
    print(tabulate([(r["measure"], r["backend"], r["n"], _s(r["median"]), _s(r["p90"]), _s(r["max"]))
                    for r in s["timings"]],
                   headers=("seconds", "backend", "n", "median", "p90", "max"), tablefmt="github"))
    print()
    print(tabulate([(v, c, n) for (v, c), n in sorted(s["verdicts"].items())],
                   headers=("verdict", "check", "count"), tablefmt="github"))
    if s["by_design"]:
        kernels = sorted({i.split(":")[0] for i in s["by_design"]})
        print(f"\n{len(s['by_design'])} claimed check(s) FAIL by design, not a benchmark failure: the seeded "
              f"kernel's claimed contract check ({len(kernels)} "
              f"cop{'y' if len(kernels) == 1 else 'ies'} of it; "
              f"{result['expected'][kernels[0]]}).")
    if s["probes_failed"]:
        print("not-claimed probes that FAIL (where exactness ends, outside the claims: informative, not failures): "
              + ", ".join(f"{e} {c}:{d} x{n}" for (e, c, d), n in s["probes_failed"].items()))
    if s["unexpected"]:
        print(f"\nunexpected claimed failures: {', '.join(s['unexpected'])}")
    cases = ("the default cases" if result["examples"] == 150 and result["grid"]
             else f"{result['examples']} search examples (not the default 150)")
    print(f"\none kernel of each entry, {cases}, measured in this run (target: "
          f"{bench.KERNEL_TARGET_SECONDS:.0f} s per kernel, all its checks)")
    print(tabulate([(e["entry"], e["backend"], e["checks"], f"{e['seconds']:.2f}", _s(e["claimed seconds"]),
                     f"{e['median of its copies']:.2f} ({e['copies']})", "yes" if e["within 2 s"] else "NO",
                     "yes" if (e["claimed seconds"] or 0) <= bench.KERNEL_TARGET_SECONDS else "NO",
                     "claimed check FAILs by design" if e["by design"] else "")
                    for e in s["entries"]],
                   headers=("entry", "backend", "checks", "seconds", "claimed check", "median of its copies",
                            "all within 2 s", "claimed within 2 s", "note"), tablefmt="github"))
    return 0


XNNPACK_TARGET_SECONDS = 3600      # issue 23: one datatype's kernels, quick profile, within 60 minutes


def bench_xnnpack(args) -> int:
    """`lowp xnnpack --checkout PATH --datatype D --profile quick` in a child, timed: the wall time against the 60
    minutes, per kernel the median and p90 seconds and the mean CPU seconds, the CPU share the run had, the cases
    checked per second. A cold run (an empty build cache)
    counts its builds; run it twice to see both. Exits 0 whatever the verdicts; 2 without a checkout."""
    if args.zoo:
        return bench_zoo(args)
    datatypes = args.datatype or ["qs8-qc8w"]
    return bench_library(args, "xnnpack", [word for d in datatypes for word in ("--datatype", d)],
                         XNNPACK_TARGET_SECONDS, "".join(f"--datatype {d} " for d in datatypes))


ZOO_TARGET_SECONDS, KERNEL_MEDIAN_TARGET = 30 * 60, 1.0     # issue 36: the whole int8 zoo, and per kernel


def bench_zoo(args) -> int:
    """`lowp xnnpack` over every datatype, estimated: one kernel of each (datatype, op, ISA) group judged in a child
    (lowp.conformance.bench.zoo), each group counted once per kernel it holds: the checks' minutes on the run's jobs
    against issue 36's 30, the per-kernel median against its 1 s, per backend. --isa narrows the groups."""
    import glob
    import os
    import sys
    from lowp.conformance.bench import zoo
    from lowp.conformance.libraries.xnnpack import Xnnpack
    from lowp.conformance.run.campaign import NotACheckout
    if args.checkout is None:
        print("error: lowp bench xnnpack --zoo needs --checkout PATH (an XNNPACK checkout)", file=sys.stderr)
        return 2
    library = Xnnpack()
    try:
        checkout = library.open(args.checkout)
    except NotACheckout as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    selection = {"datatype": args.datatype, "isa": args.isa}
    refusal = library.refuse(checkout, selection)
    if refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return 2
    groups, unmapped = zoo.strata(library, checkout, selection)
    if not groups:
        print("error: no kernel of the checkout's selection maps", file=sys.stderr)
        return 2
    picks = [word for g in groups for word in ("--kernel", glob.escape(g.pick))]
    done = _library_campaign(args, "xnnpack", picks)
    if done is None:
        return 2
    doc, report, _ = done
    jobs = doc["settings"].get("jobs") or os.cpu_count()
    e = zoo.estimate(groups, doc["kernels"], report["rows"] if report else [], jobs)
    k = e["per_kernel"]
    print(f"lowp xnnpack {args.checkout} --profile quick, estimated from a sample: {e['kernels']:,} kernels map "
          f"({unmapped} do not) in {e['groups']} (datatype, op, ISA) groups; one kernel of each judged here "
          f"({e['judged_groups']} groups, {e['judged_kernels']:,} kernels; {e['skipped_groups']} groups, "
          f"{e['skipped_kernels']:,} kernels, this machine cannot run); {jobs} jobs on {os.cpu_count()} cores, "
          f"{'an empty build cache' if args.cold else 'builds from the cache where it has them'}\n")
    if e["missing"]:
        print(f"not in the sample's campaign (counted as nothing): {', '.join(e['missing'])}\n")
    print(tabulate([("the sample's wall time", f"{doc['seconds']['wall']:.1f}", ""),
                    ("the zoo's checks, estimated (CPU s)", f"{e['checks_seconds']:,.0f}", ""),
                    (f"the zoo's checks on {jobs} jobs, minutes", f"{e['checks_minutes']:.1f}",
                     f"{'within' if e['checks_minutes'] * 60 <= ZOO_TARGET_SECONDS else 'OVER'} "
                     f"{ZOO_TARGET_SECONDS // 60} min"),
                    ("the zoo's builds, estimated (s)", f"{e['build_seconds']:,.0f}",
                     "cold" if args.cold else "cached where built before"),
                    ("per kernel (checks + build): median", _s(k["median"]),
                     f"{'within' if (k['median'] or 0) <= KERNEL_MEDIAN_TARGET else 'OVER'} {KERNEL_MEDIAN_TARGET:g} s"),
                    ("per kernel: p90", _s(k["p90"]), ""), ("per kernel: max", _s(k["max"]), "")],
                   headers=("", "seconds", "target"), tablefmt="github"))
    print()
    print(tabulate([(name, f"{b['kernels']:,}", f"{b['checks']:,.0f}", f"{b['mean']:.2f}")
                    for name, b in e["backends"].items()],
                   headers=("backend", "kernels", "checks' CPU s, estimated", "per kernel, mean"), tablefmt="github"))
    return 0


def bench_ggml(args) -> int:
    """`lowp ggml --checkout PATH` whole (every type, every variant this machine can run, quick profile) in a
    child, timed against issue 35's 20 minutes, as bench_xnnpack reports."""
    return bench_library(args, "ggml", [], GGML_TARGET_SECONDS)


GGML_TARGET_SECONDS = 20 * 60


def bench_library(args, library: str, options: list[str], target: int, spelt: str = "") -> int:
    """`lowp LIBRARY CHECKOUT OPTIONS --profile quick` in a child, timed: the wall time against `target` seconds,
    per kernel the median and p90 seconds, the CPU share the run had."""
    import os
    import sys
    if args.checkout is None:
        print(f"error: lowp bench {library} needs --checkout PATH (a {library} checkout)", file=sys.stderr)
        return 2
    isas = [word for isa in args.isa for word in ("--isa", isa)]
    done = _library_campaign(args, library, [*options, *isas])
    if done is None:
        return 2
    doc, report, cpu_seconds = done
    cases, check_seconds = _cases_checked(report)
    t, s, k = doc["totals"], doc["seconds"], doc["per_kernel_seconds"]
    jobs = doc["settings"].get("jobs") or os.cpu_count()
    share = cpu_seconds / max(1e-9, jobs * s["wall"])
    spelt += "".join(f"--isa {isa} " for isa in args.isa)
    print(f"lowp {library} {args.checkout} {spelt}--profile quick: {t['found']} kernels found, "
          f"{t['judged']} judged ({t['passed']} passed, {t['failed']} failed), {t['skipped']} skipped; {jobs} jobs "
          f"on {os.cpu_count()} cores, {100 * share:.0f}% of their CPU time; "
          f"{'an empty build cache' if args.cold else 'builds from the cache where it has them'}, every verdict "
          f"judged again\n")
    print(tabulate([("wall time", f"{s['wall']:.1f}", f"{'within' if s['wall'] <= target else 'OVER'}"
                     f" {target // 60} min"),
                    ("  mapping", f"{s['mapping']:.1f}", ""),
                    ("  builds", f"{s['build']:.1f}", "cold" if args.cold else "cached where built before"),
                    ("  checks", f"{s['checks']:.1f}", ""),
                    ("per judged kernel: median", _s(k["median"]), f"{k['kernels']} kernels"),
                    ("per judged kernel: p90", _s(k["p90"]), ""), ("per judged kernel: max", _s(k["max"]), ""),
                    # CPU time is what a machine shared with other work does not inflate as much as wall time
                    ("per judged kernel: CPU, mean", _s(cpu_seconds / max(1, t["judged"])),
                     "every process of the run, mapping and builds included")],
                   headers=("", "seconds", "target"), tablefmt="github"))
    if cases:
        print(f"\n{cases:,} cases checked in {check_seconds:.1f} s of checks (the rows' seconds summed): "
              f"{cases / max(check_seconds, 1e-9):,.0f} cases/s per worker")
    return 0


def _library_campaign(args, library: str, options: list[str]):
    """Run `lowp LIBRARY CHECKOUT OPTIONS --profile quick --fresh --no-database` in a child (on an empty build cache
    with --cold): (campaign.json, report.json, the child's CPU seconds); None (the child's error printed) where it
    refused."""
    import json
    import os
    import subprocess
    import sys
    import tempfile
    with tempfile.TemporaryDirectory(prefix=f"lowp-bench-{library}-") as out:
        command = [sys.executable, "-m", "lowp", library, str(args.checkout), *options,
                   "--profile", "quick", "--out", out, "--no-database", "--fresh",
                   *(["--jobs", str(args.jobs)] if args.jobs else [])]
        env = dict(os.environ, LOWP_CACHE_DIR=str(Path(out) / "cache")) if args.cold else None
        cpu = os.times()
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        used = os.times()
        if done.returncode == 2:
            print(done.stderr.strip(), file=sys.stderr)
            return None
        doc = json.loads((Path(out) / "campaign.json").read_text())
        report = Path(out) / "report.json"
        rows = json.loads(report.read_text()) if report.is_file() else None
    cpu_seconds = used.children_user - cpu.children_user + used.children_system - cpu.children_system
    return doc, rows, cpu_seconds


def _cases_checked(report: dict | None) -> tuple[int, float]:
    """(cases executed, the seconds of every check summed) of a run's report.json; (0, 0) without one."""
    if not report:
        return 0, 0.0
    return int(report["summary"].get("cases_executed", 0)), sum(row.get("seconds") or 0 for row in report["rows"])


def bench_ray(args) -> int:
    """`lowp bench conformance --ray`: the process pool and the Ray backend on the same checks, side by side; the
    wall time of each run, Ray's over the pool's against issue 14's 10%, the cluster's start apart."""
    import sys

    from lowp.conformance.bench import conformance as bench
    from lowp.conformance.run.ray_runner import RayUnavailable
    from lowp.kernels import KernelConfigError
    try:
        result = bench.compare_ray(args.kernel or None, address=args.ray, jobs=args.jobs,
                                   examples=150 if args.examples is None else args.examples,
                                   rounds=args.rounds or 2)
    except (KernelConfigError, RayUnavailable, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    s = bench.summarize_ray(result)
    n = result["checks"]
    print(f"lowp conformance over {'the built-in suite' if not args.kernel else ', '.join(args.kernel)}: "
          f"{result['kernels']} kernels, {n} checks, {result['examples']} search examples per claimed check, "
          f"{result['jobs']} workers (child processes, or Ray tasks at once) on {result['cores']} cores; Ray at "
          f"{result['address']}" + (f", started in {result['cluster_start']:.1f} s (not in the runs)"
                                    if result["cluster_started"] else ", already running") + "\n")
    print(tabulate([(r["round"] + 1, r["backend"], f"{r['seconds']:.1f}", f"{r['seconds'] / n:.2f}",
                     f"{r['check_seconds']:.1f}", f"{r['load']:.1f}", ", ".join(r["nodes"]))
                    for r in result["runs"]],
                   headers=("round", "backend", "wall s", "s per check", "sum of rows' s", "load before", "nodes"),
                   tablefmt="github"))
    ratio = s["ratio"]
    print(f"\nRay / process pool (median wall time over {len(result['runs']) // 2} round(s)): {ratio:.3f} "
          f"({100 * (ratio - 1):+.1f}%; target within {100 * (bench.RAY_TARGET_RATIO - 1):.0f}%: "
          f"{'yes' if s['within_target'] else 'NO'})")
    if s["verdicts_differ"]:
        print(f"verdicts differ between the backends: {', '.join(s['verdicts_differ'])}")
    else:
        print("every check has the same verdict on both backends")
    return 0
