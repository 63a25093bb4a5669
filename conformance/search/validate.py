"""Configuration checks that need the conformance suite's own names: the contract a kernel claims, and the
kernels a run selects. Kernels cannot check their contract themselves (lowp.kernels does not import
lowp.conformance: data flows isa_models <- kernels <- conformance), so `lowp conformance` calls these after
loading, before anything runs. Problems raise lowp.kernels.KernelConfigError, like the kernel schema's."""
from __future__ import annotations

from lowp.kernels import KernelConfigError, Kernel
from lowp.kernels.features import did_you_mean
from lowp.kernels.registry import origin
from lowp.kernels.schema import Problem

from lowp.conformance.contracts.int32 import CONTRACTS


def contract_problem(kernel: Kernel) -> Problem | None:
    """The Problem with the contract `kernel` claims, or None if lowp.conformance knows it."""
    if kernel.contract in CONTRACTS:
        return None
    names = did_you_mean(str(kernel.contract), CONTRACTS)
    hint = f"; did you mean {' or '.join(map(repr, names))}? Accepted: " if names else "; accepted: "
    return Problem(origin(kernel.name), kernel.name, "contract",
                   f"unknown contract {kernel.contract!r}{hint}{', '.join(CONTRACTS)}")


def output_problem(kernel: Kernel) -> Problem | None:
    """The Problem with a requantizing kernel's output-stage claim: none claimed, an unknown contract, an output
    type the contract does not produce, or parameters the kernel's ABI cannot hand the kernel."""
    if not kernel.quantized:
        return None
    from lowp.conformance.contracts.output import OUTPUT_CONTRACTS
    where = origin(kernel.name)
    if kernel.output is None:
        return Problem(where, kernel.name, "output", "a requantizing kernel (signature "
                       f"{kernel.signature!r}) claims an output-stage contract: output = one of "
                       f"{', '.join(OUTPUT_CONTRACTS)}")
    if kernel.output not in OUTPUT_CONTRACTS:
        names = did_you_mean(str(kernel.output), OUTPUT_CONTRACTS)
        hint = f"; did you mean {' or '.join(map(repr, names))}? Accepted: " if names else "; accepted: "
        return Problem(where, kernel.name, "output", f"unknown output-stage contract {kernel.output!r}{hint}"
                                                     f"{', '.join(OUTPUT_CONTRACTS)}")
    contract = OUTPUT_CONTRACTS[kernel.output]
    if kernel.c_type not in contract.out_types:
        return Problem(where, kernel.name, "c_type", f"{kernel.output!r} produces {', '.join(contract.out_types)}, "
                                                     f"not {kernel.c_type}")
    if kernel.quant:
        from lowp.conformance.search.quantized import pin_problems
        problems = pin_problems(kernel)
        if problems:
            key, message = problems[0]
            return Problem(where, kernel.name, key, message)
    if kernel.xnnpack is not None:
        from lowp.kernels.xnnpack import required_keys
        passed = set(required_keys(kernel.xnnpack["datatype"], kernel.xnnpack["params"])) | {"a_zero_point",
                                                                                              "b_zero_point"}
        lost = [key for key in contract.keys if key not in passed]
        if lost:
            return Problem(where, kernel.name, "xnnpack.params",
                           f"params layout {kernel.xnnpack['params']!r} cannot carry {', '.join(lost)}, which "
                           f"{kernel.output!r} needs")
    return None


def known_mnemonics(target: str) -> set[str]:
    """Every instruction name capstone knows for the target, and lowp's own instruction models' (capstone 5
    lacks a few new ones, the AVX-VNNI-INT8 forms and AMX among them)."""
    from capstone import arm64_const, x86_const

    from lowp.isa_models import intrinsics
    if target == "hexagon":             # no disassembler knows Hexagon here: lowp's HVX models' names only
        return {i.mnemonic for i in intrinsics("hexagon")}
    if target == "riscv64":             # capstone 5's RV64GC names and lowp's RVV decoder's (lowp.emulator.riscv)
        from capstone import riscv_const

        from lowp.emulator.riscv import OPI, OPM, VXUNARY0
        names = {n[len("RISCV_INS_"):].lower().replace("_", ".") for n in dir(riscv_const)
                 if n.startswith("RISCV_INS_")}
        stems = set(OPI.values()) | set(OPM.values())
        names |= {f"{s}.{form}" for s in stems for form in ("vv", "vx", "vi", "wv", "wx", "wi", "vs", "mm")}
        names |= set(VXUNARY0.values()) | {"vsetvli", "vsetivli", "vsetvl", "vle8.v", "vle16.v", "vle32.v",
                                           "vle64.v", "vse8.v", "vse16.v", "vse32.v", "vse64.v"}
        return names | {i.mnemonic for i in intrinsics("riscv64")}
    if target == "arm":                 # capstone 5's A32 names (VMLAL, VSDOT, SMLAD; no data-type suffix)
        from capstone import arm_const
        names = {n[len("ARM_INS_"):].lower() for n in dir(arm_const) if n.startswith("ARM_INS_")}
        return names | {i.mnemonic for i in intrinsics("arm")}
    module, prefix, arch = (x86_const, "X86_INS_", "x86") if target == "x86-64" else (arm64_const, "ARM64_INS_",
                                                                                       "aarch64")
    names = {n[len(prefix):].lower() for n in dir(module) if n.startswith(prefix)}
    if target == "x86-64":              # AMX (capstone 5 lacks it): lowp's AMX models and the tile instructions
        from lowp.emulator.x86.amx import MNEMONICS as AMX
        names |= AMX
    return names | {i.mnemonic for i in intrinsics(arch)}


def requires_problem(kernel: Kernel) -> Problem | None:
    """The Problem with a `requires` pattern that names no instruction of the kernel's target (a typo that would
    otherwise surface only as 'the claimed path never ran')."""
    import fnmatch
    if not kernel.requires:
        return None
    known = known_mnemonics(kernel.target)
    bad = [p for p in kernel.requires if not fnmatch.filter(known, p.lower())]
    if not bad:
        return None
    notes = [f"{p!r}{_suggestion(did_you_mean(p.lower(), known))}" for p in bad]
    return Problem(origin(kernel.name), kernel.name, "requires",
                   f"{', '.join(notes)} names no {kernel.target} instruction (mnemonics as capstone spells them, "
                   "lower case; shell patterns such as 'smlal*' allowed)")


def pipeline_problem(kernel: Kernel) -> Problem | None:
    """The Problem with the accumulation pipeline the kernel declares for lowp bounds: an unknown pipeline name,
    or a stage whose terms name no parameter of the kernel."""
    from lowp.conformance.search.bounds import DEPTH, PIPELINES
    declared = kernel.pipeline
    if isinstance(declared, str) and declared not in PIPELINES:
        return Problem(origin(kernel.name), kernel.name, "pipeline",
                       f"unknown pipeline {declared!r}{_suggestion(did_you_mean(declared, PIPELINES))}; accepted: "
                       f"{', '.join(PIPELINES)}, or a list of stages {{what, terms, into, overflow}}")
    if isinstance(declared, (tuple, list)):
        known = {DEPTH, "pairs_per_spill", "steps_per_flush", *kernel.params}
        bad = [d["terms"] for d in declared if isinstance(d["terms"], str) and d["terms"] not in known]
        if bad:
            return Problem(origin(kernel.name), kernel.name, "pipeline",
                           f"stage terms {', '.join(map(repr, bad))} name no parameter; a stage's terms are a count, "
                           f"'depth', or one of {', '.join(sorted(known - {DEPTH}))}")
    return None


def _suggestion(names) -> str:
    return f" (did you mean {' or '.join(map(repr, names))}?)" if names else ""


def validate_kernels(kernels) -> None:
    """KernelConfigError listing every kernel whose claimed contract or pipeline lowp.conformance does not know,
    or whose `requires` names no instruction of its target."""
    problems = [p for k in kernels
                for p in (contract_problem(k), requires_problem(k), pipeline_problem(k), output_problem(k))
                if p is not None]
    if problems:
        raise KernelConfigError(problems)


def select_kernels(names, registered, *, globs: bool = True) -> list[Kernel]:
    """The registered kernels named in `names`, in that order, each once; a name with a shell wildcard (* ? [...])
    selects every registered kernel it matches (globs=False: names only, for a command that runs one kernel).
    KernelConfigError for every name that is not registered (with did-you-mean) and every glob that matches none."""
    import fnmatch
    by_name = {k.name: k for k in registered}
    problems, selected = [], {}
    for name in names:
        if globs and _is_glob(name):
            matched = [k for k in registered if fnmatch.fnmatchcase(k.name, name)]
            if not matched:
                problems.append(Problem(None, name, None, "no registered kernel matches this pattern; registered: "
                                                          f"{', '.join(sorted(by_name))}"))
            selected.update((k.name, k) for k in matched)
        elif name not in by_name:
            close = did_you_mean(name, by_name)
            hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
            problems.append(Problem(None, name, None, f"no kernel of this name is registered; {hint}"
                                    f"registered: {', '.join(sorted(by_name))}"))
        else:
            selected[name] = by_name[name]
    if problems:
        raise KernelConfigError(problems)
    return list(selected.values())


def _is_glob(name: str) -> bool:
    return any(ch in name for ch in "*?[")


def build_problems(kernels) -> list[Problem]:
    """Build every kernel that can run here (the build cache makes this the workers' build too) and look up its
    entry and workspace symbols: a source that does not compile (named, with the compiler's message), a link that
    fails or a symbol that is missing is a configuration error named before any case runs, not a CRASH row per
    check."""
    from lowp.emulator.buildcache import CacheError
    from lowp.emulator.errors import BuildError
    from lowp.kernels import executor
    from lowp.kernels.registry import workspace_symbol
    problems = []
    for k in kernels:
        ex = executor(k)
        if ex.unavailable():
            continue
        try:
            wanted = (k.symbol,) if k.xnnpack is not None else (k.symbol, workspace_symbol(k))
            missing = _missing(ex, wanted)
            symbols = _symbols(ex) if missing else set()
        except CacheError:
            raise             # the cache folder, not the kernel: the command names it (lowp.cli.main)
        except (BuildError, RuntimeError, OSError, ValueError) as e:
            problems.append(_build_problem(k, e))
            continue
        wrong = None if missing else _prototype_mismatch(k, ex)
        if wrong:
            problems.append(Problem(origin(k.name), k.name, "symbol", wrong))
        for name in missing:
            close = did_you_mean(name, symbols)
            hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
            files = ", ".join(map(str, k.sources))
            problems.append(Problem(origin(k.name), k.name, "symbol", f"{files}: no function {name!r} in the built "
                                    f"{'library' if ex.backend == 'native' else 'ELF'}{hint}"))
    return problems


def _build_problem(kernel: Kernel, error: Exception) -> Problem:
    """'<file> does not build: <the compiler's message>' (the file whose compile failed; a failed link names
    every source), under the key the entry names its files by."""
    text = str(error).strip().splitlines()
    failed = getattr(error, "source", None)
    what = str(failed) if failed else ", ".join(map(str, kernel.sources))
    verb = "does not build" if failed or len(kernel.sources) == 1 else "do not link"
    return Problem(origin(kernel.name), kernel.name, "sources" if len(kernel.sources) > 1 else "source",
                   f"{what} {verb}: " + "\n    ".join(text[:20] + (["..."] if len(text) > 20 else [])))


def _prototype_mismatch(kernel, ex) -> str | None:
    from lowp.kernels.prototype import mismatch
    path = ex.library_path if ex.backend == "native" else ex.machine.binary.path
    return mismatch(kernel, path) if path else None


def _missing(ex, wanted) -> list[str]:
    """The functions of `wanted` a caller cannot find in the build."""
    if ex.backend == "native":
        ex._lib
        return [name for name in wanted if not _callable(ex, name)]
    return [name for name in wanted if name not in ex.machine.binary.symbols]


def _symbols(ex) -> set[str]:
    """The functions the build defines, for a missing one's "did you mean" (read only then: reading a library's
    symbol table is some 30 ms, a campaign's parent checks thousands of builds)."""
    if ex.backend == "native":
        from lowp.kernels.disasm import _SharedObject
        return {n for fn in _SharedObject(ex.library_path).functions.values() for n in fn.names}
    return set(ex.machine.binary.symbols)


def _callable(ex, name: str) -> bool:
    """Whether the native executor can call `name` (exported, or found in the library's symbol table)."""
    try:
        ex.address(name)
    except AttributeError:
        return False
    return True


__all__ = ["build_problems", "contract_problem", "known_mnemonics", "output_problem", "pipeline_problem",
           "requires_problem",
           "select_kernels", "validate_kernels"]
