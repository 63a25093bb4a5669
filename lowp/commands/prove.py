"""`lowp prove`: a proof for a shape, not a sample. For each kernel and shape: PROVED (every input of the domain
gives the contract, bit for bit), REFUTED (a counterexample the kernel reproduces on a real executor) or UNKNOWN
(with the reason: an instruction, a data-dependent branch, a solver timeout). docs/prove.md."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from tabulate import tabulate


def add_parser(sub) -> None:
    p = sub.add_parser("prove", help="prove (or refute) a compiled kernel against its contract for a fixed shape")
    p.add_argument("--kernel", action="append", default=[], metavar="NAME",
                   help="a registered kernel, or a glob (repeatable; default: every kernel lowp prove takes)")
    p.add_argument("--kernels", dest="toml", action="append", default=[], metavar="FILE.toml",
                   help="also register the kernels of this TOML file (repeatable)")
    p.add_argument("--shape", action="append", default=[], metavar="MxNxK",
                   help="the shape to prove (repeatable; default: one tile of the kernel at K=64)")
    p.add_argument("--domain", choices=("claimed", "full"), default="claimed",
                   help="quantify over the kernel's claimed input domain (default) or its operand types' full range")
    p.add_argument("--solver", choices=("z3", "bitwuzla"), default="z3", help="the SMT solver of the queries")
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS", help="per solver query (default 60)")
    p.add_argument("--no-replay", action="store_true",
                   help="do not run counterexamples on an executor (they are then UNKNOWN, never REFUTED)")
    p.add_argument("--params", default="typical", metavar="STYLE|FILE.json",
                   help="a requantizing kernel's fixed quantization parameters: a draw of the conformance style "
                        "'typical' (default), 'ends' or 'limits', or a JSON object of them (bias, scale, zero points, "
                        "clamp)")
    p.add_argument("--params-seed", type=int, default=0, metavar="N", help="the seed of the parameter draw")
    p.add_argument("--out", metavar="DIR", help="write prove.md, prove.json and junit.xml there")
    p.set_defaults(func=cmd_prove)


def parse_shape(text: str) -> tuple[int, int, int]:
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"--shape {text!r}: expected MxNxK with positive integers, e.g. 4x8x64")
    return tuple(int(p) for p in parts)


def parse_params(text: str):
    """A draw style, or the parameters of a JSON file."""
    from lowp.conformance.prove.quantized import STYLES, params_from_json
    if text in STYLES:
        return text
    path = Path(text)
    if not path.is_file():
        raise ValueError(f"--params {text!r}: not one of {', '.join(STYLES)} and not a file")
    try:
        return params_from_json(json.loads(path.read_text()))
    except (OSError, ValueError) as e:
        raise ValueError(f"--params {text}: not a JSON object of quantization parameters ({e})") from None


def default_shape(kernel) -> tuple[int, int, int]:
    """One micro-tile at K = 64 (capped for the big tiles, whose proofs grow with M x N)."""
    return min(kernel.tile.mr, 8), min(kernel.tile.nr, 16), 64


def cmd_prove(args) -> int:
    from lowp.conformance.prove import PROVED, REFUTED, provable
    from lowp.conformance.search.validate import select_kernels, validate_kernels
    from lowp.kernels import KernelConfigError, kernels, load_toml
    try:
        shapes = [parse_shape(s) for s in args.shape]
        args.quant = parse_params(args.params)
    except ValueError as e:
        args.parser.error(str(e))
    try:
        for path in args.toml:
            load_toml(path)
        validate_kernels(kernels())
        selected = select_kernels(args.kernel, kernels()) if args.kernel else \
            [k for k in kernels() if provable(k) is None]
    except KernelConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    proofs = []
    for kernel in selected:
        for shape in shapes or [default_shape(kernel)]:
            proof = _prove(kernel, shape, args)
            print(proof.summary(), flush=True)
            proofs.append(proof)
    rows = [(p.kernel, p.shape_text, p.domain["name"], p.verdict, f"{p.seconds:.2f}", _detail(p)) for p in proofs]
    print()
    print(tabulate(rows, headers=("kernel", "shape", "domain", "verdict", "seconds", "detail"), tablefmt="github"))
    counts = {v: sum(p.verdict == v for p in proofs) for v in ("PROVED", "REFUTED", "UNKNOWN")}
    print(f"\n{len(proofs)} proofs: {counts['PROVED']} PROVED, {counts['REFUTED']} REFUTED, "
          f"{counts['UNKNOWN']} UNKNOWN")
    if args.out:
        write_reports(Path(args.out), proofs)
        print(f"reports: {args.out}/prove.md, prove.json, junit.xml")
    return 1 if any(p.verdict == REFUTED for p in proofs) else 0 if all(p.verdict == PROVED for p in proofs) else 3


def _prove(kernel, shape, args):
    from lowp.conformance.prove import prove
    return prove(kernel, shape, domain=args.domain, solver=args.solver, timeout=args.timeout,
                 replay=not args.no_replay, quant=args.quant, quant_seed=args.params_seed)


def _detail(p) -> str:
    if p.verdict == "PROVED":
        lemmas = sum(lm.count for lm in p.lemmas)
        return f"{p.variant}; {p.outputs} outputs; {p.steps} instructions; {lemmas} lemma uses"
    where = f" at {p.address:#x}" if p.address is not None else ""
    return f"{p.reason}{where}" + (f": {p.instruction}" if p.instruction else "") + \
        (f"; {p.replay}" if p.replay else "")


def write_reports(out: Path, proofs) -> None:
    from lowp.conformance.prove import junit_xml, markdown
    out.mkdir(parents=True, exist_ok=True)
    (out / "prove.json").write_text(json.dumps([p.to_json() for p in proofs], indent=1, default=str))
    (out / "prove.md").write_text(markdown(proofs))
    (out / "junit.xml").write_text(junit_xml(proofs))
