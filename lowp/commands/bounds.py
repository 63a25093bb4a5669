"""`lowp bounds`: static range proofs. For operand ranges and an accumulation pipeline (a kernel's, or a plain
accumulator), the largest depth at which nothing saturates or wraps, or the first step that can."""
from __future__ import annotations

from tabulate import tabulate


def add_parser(sub) -> None:
    p = sub.add_parser("bounds", help="prove, for operand ranges, that no intermediate saturates or wraps")
    p.add_argument("kernels", nargs="*", metavar="KERNEL", help="registered kernels (default: all, unless --acc)")
    p.add_argument("--a", help="range of A: u8, s8, u7, s7, u4 or lo:hi (default: the kernel's claimed domain)")
    p.add_argument("--b", help="range of B, as --a")
    p.add_argument("--acc", help="no kernel: products summed straight into this accumulator type (s16, u16, s32)")
    p.add_argument("--kernels", dest="toml", action="append", default=[], metavar="FILE.toml",
                   help="also register the kernels of this TOML file (repeatable), as lowp conformance does")
    p.set_defaults(func=cmd_bounds)


def cmd_bounds(args) -> int:
    from lowp.conformance.search import bounds
    try:
        a = bounds.parse_range(args.a) if args.a else None
        b = bounds.parse_range(args.b) if args.b else None
    except ValueError as e:
        args.parser.error(str(e))
    if args.acc:
        if not (a and b):
            args.parser.error("--acc needs --a and --b (the operand ranges whose products it sums)")
        if args.acc not in bounds.DTYPES:
            from lowp.cli import suggest
            args.parser.error(f"--acc: unknown accumulator type {args.acc!r}{suggest(args.acc, bounds.DTYPES)}; "
                              f"known: {', '.join(bounds.DTYPES)}")
        stage = bounds.Stage(f"sum of products into {args.acc}", bounds.DEPTH, args.acc, "wrap")
        depth, _ = bounds.safe_depth(a, b, [stage])
        lo, hi = bounds.product_range(a, b)
        print(f"products of A in [{a[0]}, {a[1]}] and B in [{b[0]}, {b[1]}] lie in [{lo}, {hi}]; "
              f"the largest depth that provably fits {args.acc} is {depth}")
        return 0
    import sys

    from lowp.conformance.search.validate import select_kernels, validate_kernels
    from lowp.kernels import KernelConfigError, kernels, load_toml
    try:
        for path in args.toml:
            load_toml(path)
        validate_kernels(kernels())
        selected = select_kernels(args.kernels, kernels()) if args.kernels else kernels()
    except KernelConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rows = []
    for k in selected:
        try:
            stages, params = bounds.kernel_pipeline(k)
        except KeyError as e:
            rows.append((k.name, "-", "-", str(e.args[0]), "", ""))
            continue
        ka, kb = bounds.operand_ranges(k, a, b)
        depth, first = bounds.safe_depth(ka, kb, stages, params)
        steps = "; ".join(f"{sb.stage.what}: terms in [{sb.term_range[0]}, {sb.term_range[1]}], fits "
                          f"{sb.capacity}" + ("" if sb.safe is None else f" (uses {sb.terms})")
                          for sb in bounds.propagate(ka, kb, stages, params))
        verdict = f"safe to depth {depth}" if first is None else f"can saturate/wrap at: {first}"
        hint = "" if first is None else "; ".join(bounds.advice(k, stages, params))
        rows.append((k.name, f"[{ka[0]}, {ka[1]}]", f"[{kb[0]}, {kb[1]}]", verdict, steps, hint))
    print(tabulate(rows, headers=("kernel", "A (as read)", "B", "verdict", "pipeline", "advice"),
                   maxcolwidths=[None, None, None, 30, 60, 40]))
    return 0
