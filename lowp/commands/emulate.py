"""`lowp emulate kernel.c --function NAME --arg ...`: cross-compile an AArch64 kernel, call one of its functions
under Unicorn (lowp.emulator; `--backend qemu`: qemu-aarch64, for SVE and SME) and print what ran it, the result
arrays, the instruction count and any fault. `--backend bochs` (the default for a registered x86-64 kernel): an x86
kernel, built by the host compiler, on Bochs (AVX-512, AVX-VNNI, AVX-VNNI-INT8; AMX on lowp's models).
`lowp emulate --kernels my.toml --kernel NAME --arg ...` builds a registered kernel as its entry says (sources,
include_dirs, defines, cflags) and calls its entry symbol (or --function)."""
from __future__ import annotations

from lowp.cli import seed as seed_type

import argparse
import re
import sys

import numpy as np

ARG_HELP = """\
arguments, in the C function's order (repeat --arg once per parameter):
  --arg n=64                     an integer (passed in an X register)
  --arg a=s8:16x64:random        an array, passed as a pointer: TYPE:SHAPE[:FILL]
        TYPE   s8 u8 s16 u16 s32 u32 s64 u64 f32 (an XNNPACK params blob or per-channel scales)
        SHAPE  dimensions joined by x (64, 16x64, 2x3x4); the buffer is exactly that many elements,
               between guard pages: one element past the end faults
        FILL   zeros (default) | ones | random (full range of TYPE, seeded by --seed; f32: uniform in [-1, 1)) |
               arange | min | max | a number (every element)
  --arg a=@input.npy             an array from a .npy file (its own dtype and shape)

example:
  lowp emulate tests/aarch64/gemm_sdot.c --function gemm_sdot \\
      --arg a=s8:8x64:random --arg bt=s8:8x64:random --arg c=s32:8x8 --arg m=8 --arg n=8 --arg k=64
  lowp emulate --kernels docs/examples/kernels.toml --kernel my_sdot_neon --arg M=2 --arg N=8 --arg K=16 \\
      --arg A=s8:2x16:random --arg B=s8:16x8:random --arg C=s32:2x8 --arg work=u8:256

budget: the call stops when it has run --budget instructions or --seconds of wall-clock time, whichever comes
first. On Unicorn, lowp emulate counts every instruction exactly, in a Python hook per executed block: some 6 M
instructions a second for a SIMD kernel, 1-2 M in a tight loop, so 500 M would take minutes. The time limit is
what stops a runaway loop: by default the budget at 100 M instructions a second (5 s for the default budget), at
least 2 s; a longer legitimate call needs --seconds.

exit status: 0 when the call returned, 1 on a fault (out-of-bounds access, budget, undefined instruction,
trap, lockstep mismatch), 2 on a usage or build error."""

# How --budget becomes a wall-clock limit on Unicorn when --seconds is not given. Not a measured speed (the counting
# hook runs 1-7 M instructions a second): a runaway loop should stop within seconds, as `lowp conformance` stops it
# (Unicorn's own count, no hook), and a call that runs longer than that is asked to say so with --seconds.
COUNTED_INSTRUCTIONS_PER_SECOND = 100_000_000
MIN_SECONDS = 2.0

TYPES = {"s8": np.int8, "u8": np.uint8, "s16": np.int16, "u16": np.uint16, "s32": np.int32, "u32": np.uint32,
         "s64": np.int64, "u64": np.uint64, "f32": np.float32}


# An emulated call copies every array into guest memory between guard pages: more than this is a typo in a shape,
# not a kernel's operand (and would end in numpy's MemoryError traceback).
MAX_ARGUMENT_BYTES = 1 << 30


def parse_arg(spec: str, rng) -> tuple[str, object]:
    """'n=64' -> ('n', 64); 'a=s8:4x8:random' -> ('a', array); 'a=@x.npy' -> ('a', np.load(...))."""
    if "=" not in spec:
        raise ValueError(f"--arg {spec!r}: expected NAME=VALUE")
    name, value = spec.split("=", 1)
    if not name.isidentifier():
        raise ValueError(f"--arg {spec!r}: {name!r} is not a name")
    if value.startswith("@"):
        return name, np.load(value[1:])
    if re.fullmatch(r"[-+]?(0x[0-9a-fA-F]+|\d+)", value):
        return name, int(value, 0)
    parts = value.split(":")
    if len(parts) not in (2, 3) or parts[0] not in TYPES:
        raise ValueError(f"--arg {spec!r}: expected an integer or TYPE:SHAPE[:FILL] with TYPE one of "
                         f"{', '.join(TYPES)}")
    dtype = np.dtype(TYPES[parts[0]])
    try:
        shape = tuple(int(d) for d in parts[1].lower().split("x"))
    except ValueError:
        raise ValueError(f"--arg {spec!r}: bad shape {parts[1]!r} (use e.g. 16x64)") from None
    if any(d <= 0 for d in shape):
        raise ValueError(f"--arg {spec!r}: shape {parts[1]!r} has a dimension below 1")
    size = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if size > MAX_ARGUMENT_BYTES:
        raise ValueError(f"--arg {spec!r}: {size:,} bytes; lowp emulate places at most {MAX_ARGUMENT_BYTES:,} (1 GiB) "
                         "per array between its guard pages")
    fill = parts[2] if len(parts) == 3 else "zeros"
    if dtype.kind == "f":
        return name, _float_fill(spec, fill, shape, dtype, rng)
    info = np.iinfo(dtype)
    if fill == "zeros":
        return name, np.zeros(shape, dtype)
    if fill == "ones":
        return name, np.ones(shape, dtype)
    if fill == "random":
        return name, rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    if fill == "arange":
        return name, (np.arange(int(np.prod(shape))) % (int(info.max) + 1)).astype(dtype).reshape(shape)
    if fill in ("min", "max"):
        return name, np.full(shape, getattr(info, fill), dtype)
    if re.fullmatch(r"[-+]?\d+", fill) and info.min <= int(fill) <= info.max:
        return name, np.full(shape, int(fill), dtype)
    raise ValueError(f"--arg {spec!r}: unknown fill {fill!r}")


def _float_fill(spec: str, fill: str, shape, dtype, rng) -> np.ndarray:
    """An f32 array: zeros, ones, random (uniform in [-1, 1)), arange, min / max (the finite extremes), or a
    number in every element."""
    info = np.finfo(dtype)
    n = int(np.prod(shape))
    values = {"zeros": lambda: np.zeros(n), "ones": lambda: np.ones(n), "random": lambda: rng.uniform(-1, 1, n),
              "arange": lambda: np.arange(n), "min": lambda: np.full(n, info.min), "max": lambda: np.full(n, info.max)}
    if fill in values:
        return values[fill]().astype(dtype).reshape(shape)
    try:
        return np.full(shape, float(fill), dtype)
    except ValueError:
        raise ValueError(f"--arg {spec!r}: unknown fill {fill!r}") from None


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "emulate", help="compile an AArch64 C/assembly kernel and run one function under Unicorn",
        description=__doc__, epilog=ARG_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", nargs="*", help="C (.c), C++ (.cc, .cpp, .cxx) or assembly (.S, .s) sources, compiled "
                                             "together with zig (or give --kernel)")
    p.add_argument("--kernel", "-k", metavar="NAME",
                   help="instead of sources: build this registered kernel as its entry says and call its symbol")
    p.add_argument("--kernels", dest="toml", action="append", default=[], metavar="FILE.toml",
                   help="register the kernels of this TOML file first (repeatable), as lowp conformance does")
    p.add_argument("--function", "-f", help="the exported function to call (default with --kernel: its symbol)")
    p.add_argument("--arg", "-a", action="append", default=[], metavar="NAME=VALUE",
                   help="one argument of the function, in order (see below)")
    p.add_argument("--flags", default="", help="extra compiler flags, e.g. '-O3 -DTILE=4'")
    p.add_argument("--budget", type=int, default=500_000_000, help="instruction budget (default 500,000,000)")
    p.add_argument("--seconds", type=float, default=None,
                   help="wall-clock budget of the call (default on Unicorn: the instruction budget at 100 M/s, 5 s, at "
                        "least 2 s; on qemu and Bochs: theirs)")
    p.add_argument("--mnemonics", action="store_true", help="print instruction counts per mnemonic")
    p.add_argument("--backend", choices=("unicorn", "qemu", "bochs"), default=None,
                   help="run on Unicorn (the default for AArch64), qemu-aarch64 (SVE, SME; --kernel: at its "
                        "vector_bits) or Bochs (x86-64: the default for an x86-64 --kernel)")
    p.add_argument("--lockstep", action="store_true",
                   help="compare every instruction lowp models with Unicorn's result as it runs (slow)")
    p.add_argument("--seed", type=seed_type, default=0, help="seed of the random fills")
    p.add_argument("--show", choices=("changed", "all", "none"), default="changed",
                   help="which arrays to print after the call (default: those the call changed)")
    p.set_defaults(func=run)


def time_budget(args, backend: str) -> dict:
    """The `seconds` option of the call: --seconds if given; on Unicorn, which counts every instruction in Python
    here, the instruction budget as time (COUNTED_INSTRUCTIONS_PER_SECOND); qemu and Bochs convert it themselves."""
    if args.seconds is not None:
        return {"seconds": args.seconds}
    if backend == "unicorn":
        return {"seconds": max(MIN_SECONDS, args.budget / COUNTED_INSTRUCTIONS_PER_SECOND)}
    return {}


def run(args) -> int:
    from lowp.emulator import BuildError, EmulatorError, targets
    if args.budget < 1:
        args.parser.input_error(f"--budget {args.budget}: the instruction budget must be 1 or more")
    if args.seconds is not None and not args.seconds > 0:
        args.parser.input_error(f"--seconds {args.seconds:g}: the time budget must be more than 0 s")
    rng = np.random.default_rng(args.seed)
    try:
        parsed = [parse_arg(s, rng) for s in args.arg]
    except (ValueError, OSError) as e:
        print(f"lowp emulate: {e}", file=sys.stderr)
        return 2
    if bool(args.source) == bool(args.kernel):
        print("lowp emulate: give source files or --kernel NAME (not both)", file=sys.stderr)
        return 2
    if args.kernel:
        kernel, status = _registered(args)
        if kernel is None:
            return status
        sources, flags, depends = kernel.sources, kernel.build_flags(), kernel.depends
        vector_bits, features, arch = kernel.vector_bits, kernel.features, kernel.target
        what = f"kernel {kernel.name!r}: "
        args.function = args.function or kernel.symbol
    else:
        if not args.function:
            print("lowp emulate: --function NAME is required with source files", file=sys.stderr)
            return 2
        sources, flags, depends, what, vector_bits, features = args.source, (), (), "", None, ()
        arch = "x86-64" if args.backend == "bochs" else "aarch64"
    backend = args.backend or {"aarch64": "unicorn", "x86-64": "bochs"}[arch]
    try:
        target = targets.find(arch, backend)
    except ValueError as e:
        print(f"lowp emulate: {what}{e}", file=sys.stderr)
        return 2
    reason = target.unavailable() or (args.lockstep and target.backend != "unicorn"
                                      and "--lockstep needs Unicorn's hooks (--backend unicorn)") \
        or (args.kernel and target.cannot_run(features, vector_bits))
    if reason:
        print(f"lowp emulate: {reason}", file=sys.stderr)
        return 2
    try:
        # -g: the function's DWARF says how many arguments it takes (kernels/prototype.py); the code is the same
        machine = target.machine(sources, flags=[*flags, *args.flags.split(), "-g"], depends=depends,
                                 vector_bits=vector_bits, features=features)
    except (BuildError, FileNotFoundError, ValueError) as e:
        print(f"lowp emulate: {what}{e}", file=sys.stderr)
        return 2
    wrong = _argument_count_problem(machine.binary, args.function, parsed)
    if wrong:
        print(f"lowp emulate: {what}{wrong}", file=sys.stderr)
        return 2
    names = [n for n, _ in parsed]
    values = [v for _, v in parsed]
    lockstep = {"lockstep": True} if args.lockstep else {}
    print(f"ran on: {target.describe(vector_bits, features=features)}")
    try:
        result, fault = machine.call(args.function, *values, names=names, budget=args.budget, count=True,
                                     mnemonics=args.mnemonics, **lockstep, **time_budget(args, target.backend)), None
    except KeyError as e:
        print(f"lowp emulate: {e.args[0]}", file=sys.stderr)
        return 2
    except EmulatorError as e:
        result, fault = e.result, e
    np.set_printoptions(threshold=2000, linewidth=120)
    if result is not None:
        inputs = {n: v for n, v in parsed if isinstance(v, np.ndarray)}
        for name, array in result.named.items():
            changed = not np.array_equal(array, inputs[name])
            if args.show == "all" or (args.show == "changed" and changed):
                print(f"{name} ({array.dtype}{list(array.shape)}{', changed' if changed else ''}):")
                print(array)
        print(f"returned {'rax' if arch == 'x86-64' else 'x0'} = {result.ret}")
        print(result.summary() + f"; {result.seconds * 1e3:.1f} ms")
        if result.mnemonics:
            print("per mnemonic: " + ", ".join(f"{m} {n:,}" for m, n in result.mnemonics.items()))
    if fault is not None:
        print(f"fault: {type(fault).__name__}: {fault}", file=sys.stderr)
        if "time budget" in str(fault) and args.seconds is None and target.backend == "unicorn":
            print(f"(the time budget came from --budget {args.budget:,}; --seconds S gives the call more time)",
                  file=sys.stderr)
        return 1
    return 0


def _argument_count_problem(binary, function: str, parsed) -> str | None:
    """Why the --arg list cannot be the function's arguments (too few leave registers the caller never set: the
    run would look fine on garbage), or None; unknown for a function without DWARF (assembly)."""
    from lowp.kernels.prototype import parameters
    try:
        params = parameters(binary.path, function)
    except Exception:  # noqa: BLE001 - unreadable DWARF: the call itself still reports a missing symbol
        return None
    if params is None or len(params) == len(parsed):
        return None
    wanted = ", ".join(f"{t} {n}" for n, _, t in params)
    given = ", ".join(n for n, _ in parsed) or "none"
    return (f"{function}({wanted}) takes {len(params)} argument(s); {len(parsed)} given with --arg ({given}): "
            "give one --arg NAME=VALUE per parameter, in order")


def _registered(args):
    """(the --kernel kernel, 0) after registering the --kernels files and checking the configuration, as lowp
    bounds does; (None, 2) with the problems printed for a bad file, an unknown name or an x86-64 kernel."""
    from lowp.conformance.search.validate import select_kernels, validate_kernels
    from lowp.kernels import KernelConfigError, kernels, load_toml
    try:
        for path in args.toml:
            load_toml(path)
        validate_kernels(kernels())
        (kernel,) = select_kernels([args.kernel], kernels(), globs=False)
    except KernelConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return None, 2
    if kernel.target not in ("aarch64", "x86-64"):
        print(f"lowp emulate: kernel {kernel.name!r} is a {kernel.target} kernel; lowp emulate runs AArch64 "
              "kernels (Unicorn, qemu) and x86-64 kernels (Bochs)", file=sys.stderr)
        return None, 2
    return kernel, 0
