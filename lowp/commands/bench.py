"""`lowp bench`: benchmarks that report ratios measured side by side in one run."""
from __future__ import annotations

from tabulate import tabulate

HEADLINE = ("_mm512_maddubs_epi16", "_mm256_maddubs_epi16", "_mm_maddubs_epi16", "_mm512_madd_epi16",
            "_mm512_dpbusd_epi32", "_mm256_dpbusd_avx_epi32", "_mm512_dpbusds_epi32", "_mm512_dpwssds_epi32",
            "_mm256_dpbssd_epi32", "_mm512_adds_epi16", "_mm512_cvtepi16_epi32", "_mm512_mask_dpbusd_epi32")


def add_parser(sub) -> None:
    bench = sub.add_parser("bench", help="benchmarks (ratios side by side in one run)")
    bench.add_argument("suite", nargs="?", default="isa", choices=("isa", "emulator"),
                       help="isa: model vs native lanes/s; emulator: emulated instructions/s")
    bench.add_argument("--all", action="store_true", help="isa: every x86 intrinsic, not just the headline ones")
    bench.add_argument("--registers", type=int, default=1 << 14, help="isa: registers per batch (default 16384)")
    bench.set_defaults(func=cmd_bench)


def cmd_bench(args) -> int:
    if args.suite == "emulator":
        from lowp.emulator.bench import emulator_benchmark  # noqa: PLC0415 (only when asked)
        rows = emulator_benchmark()
        print(tabulate(rows, headers="keys", floatfmt=".3g"))
        return 0
    return bench_isa(args)


def bench_isa(args) -> int:
    from lowp.isa_models import intrinsic, intrinsics
    from lowp.isa_models.native import NativeUnavailable, NativeX86
    from lowp.isa_models.throughput import measure
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
