"""`lowp isa list` and `lowp isa verify`: the instruction models, and their proof against real instructions."""
from __future__ import annotations

import sys
import time

import numpy as np
from tabulate import tabulate

from lowp.cli import seed as seed_type

from lowp.isa_models import instructions, intrinsics


ARCHES = ("x86", "aarch64", "riscv64", "arm", "wasm32", "hexagon")
AMX = ("tdpbssd", "tdpbsud", "tdpbusd", "tdpbuud")


def add_parser(sub) -> None:
    isa = sub.add_parser("isa", help="instruction models: list them, prove them against this machine")
    cmds = isa.add_subparsers(dest="isa_command", required=True, metavar="ACTION")
    ls = cmds.add_parser("list", help="print the registry of instruction models as a table")
    ls.add_argument("--arch", choices=ARCHES, help="only this architecture")
    ls.add_argument("--intrinsics", action="store_true", help="one row per intrinsic, with its signature")
    ls.set_defaults(func=cmd_list)
    v = cmds.add_parser("verify", help="prove the models against this CPU (x86) and the emulator (AArch64); "
                                       "exit 1 on any disagreement")
    v.add_argument("names", nargs="*", metavar="NAME", help="mnemonics or intrinsic names (default: all)")
    v.add_argument("--exhaustive", action="store_true",
                   help="also prove VPMADDUBSW over all 2^32 (a0, a1, b0, b1) pair inputs (about a minute)")
    v.add_argument("--registers", type=int, default=2048, help="random registers per intrinsic (default 2048)")
    v.add_argument("--seed", type=seed_type, default=0, help="random seed (default 0)")
    v.add_argument("--arch", choices=ARCHES, help="only this architecture")
    v.add_argument("--backend", action="append", default=[], metavar="NAME",
                   help="prove against these back ends only (repeatable): native, bochs (every Bochs CPU model), "
                        "unicorn, qemu; e.g. --backend bochs proves every x86 model on Bochs, whatever this CPU has")
    v.add_argument("--vlen", type=int, nargs="+", default=[128, 256],
                   help="RISC-V VLENs to prove the RVV models at under qemu-riscv64 (default 128 256)")
    v.set_defaults(func=cmd_verify)


def cmd_list(args) -> int:
    if args.intrinsics:
        rows = [(i.name, i.mnemonic, i.width, " ".join(i.features), i.encoding, "(" + i.signature.split("(", 1)[1])
                for i in intrinsics(args.arch)]
        print(tabulate(rows, headers=("intrinsic", "instruction", "bits", "features", "encoding", "arguments -> result")))
        return 0
    rows = [(i.mnemonic, i.extension, i.operands,
             "VL" if any(x.scalable for x in i.intrinsics) else "/".join(map(str, i.widths)), i.overflow,
             ", ".join(x.name for x in i.intrinsics[:3]) + (f" (+{len(i.intrinsics) - 3})" if len(i.intrinsics) > 3 else ""))
            for i in instructions(args.arch)]
    print(tabulate(rows, headers=("instruction", "extension", "types", "bits", "saturation / wrap", "intrinsics")))
    print(f"\n{len(rows)} instructions, {len(intrinsics(args.arch))} intrinsics")
    return 0


def select(names: list[str], arch: str | None):
    chosen = intrinsics(arch)
    if not names:
        return chosen
    known_mnemonics = {i.mnemonic for i in instructions()} | set(AMX)
    known_names = {i.name for i in chosen} | set(sme2_forms())
    unknown = [n for n in names if n.lower() not in known_mnemonics and n not in known_names]
    if unknown:
        raise SystemExit(f"lowp isa verify: no model named {', '.join(unknown)} (see `lowp isa list --intrinsics`)")
    return [i for i in chosen if i.name in names or i.mnemonic in {n.lower() for n in names}]


def backends_for(arch_needed: set[str]) -> tuple[dict[str, list], list[str]]:
    """Executors by ISA, in order of preference (the targets' intrinsic backends: lowp.emulator.targets), and
    notes on those that could not be set up."""
    from lowp.emulator.targets import all_targets
    found: dict[str, list] = {arch: [] for arch in ARCHES}
    notes = []
    for target in all_targets():
        if target.isa not in arch_needed:
            continue
        try:
            found[target.isa] += target.intrinsic_backends()
        except Exception as e:  # no compiler, not x86-64, no emulator: every row of that ISA says why
            notes.append(f"{target.name}: {e}")
    return found, notes


def verify_scalable(intr, backends, registers, seed):
    """An SVE/SME intrinsic at every vector length a back end runs (one verdict per VL, skipped ones say why)."""
    from lowp.isa_models.verify.proof import Verdict, verify
    verdicts = []
    for b in (b for b in backends if getattr(b, "vl", 0)):
        fixed = intr.at_vl(b.vl)
        reason = b.unavailable(fixed)
        verdicts.append(Verdict(fixed, b.name, "skipped", reason=reason) if reason
                        else verify(fixed, b, random_registers=registers, seed=seed))
    return verdicts or [Verdict(intr, "-", "skipped", reason="no back end runs SVE/SME here")]


def target_of(v) -> str:
    """A verdict's target in the per-target count: what executed it (or that nothing here can)."""
    intr = v.intrinsic
    if intr.instruction.arch == "riscv64":
        return "riscv64 (qemu)"
    if intr.instruction.arch == "arm":
        return "arm (qemu)"
    if intr.instruction.arch == "wasm32":
        return "wasm32 (wasmtime)"
    if intr.instruction.arch == "hexagon":
        return "hexagon (qemu)"
    if "avx10_2" in intr.features:
        return "x86 AVX10.2 (modelled)"
    if getattr(intr, "vl", 0):
        return f"aarch64 SVE/SME VL {intr.vl} (qemu)"
    if intr.instruction.arch == "x86":
        return f"x86 ({v.backend})" if v.backend != "-" else "x86 (no back end here)"
    return "aarch64"


def select_amx(names: list[str], arch: str | None) -> list[str]:
    if arch not in (None, "x86"):
        return []
    return list(AMX) if not names else [m for m in AMX if m in {n.lower() for n in names}]


def sme2_forms() -> tuple[str, ...]:
    from lowp.isa_models.verify.sme2_proof import FORMS
    return tuple(FORMS)


def select_sme2(names: list[str], arch: str | None) -> list[str]:
    """The SME2 forms (not in the intrinsic registry: lowp.isa_models.verify.sme2_proof) to prove: all of them, or those
    named (by ACLE name, or 'sdot')."""
    if arch not in (None, "aarch64"):
        return []
    asked = {n.lower() for n in names}
    return [f for f in sme2_forms() if not names or f in asked or "sdot" in asked]


def verify_sme2(forms, seed):
    """Each SME2 form at every VL (lowp.emulator.aarch64.sme2: qemu-aarch64), one verdict per VL."""
    from lowp.emulator.aarch64.sme2 import backends
    from lowp.isa_models.verify.sme2_proof import verify
    runners = backends()
    return [verify(f, r, seed=seed) for f in forms for r in runners], runners


def verify_amx(mnemonics):
    from lowp.isa_models.verify.amx_proof import verify
    from lowp.emulator.x86.native_amx import NativeAmx
    runner = NativeAmx()
    return [verify(m, runner) for m in mnemonics], runner


def verify_one(intr, backends, registers, seed):
    from lowp.isa_models.verify.proof import Verdict, verify
    reasons = []
    for backend in backends:
        # Unicorn runs FEAT_I8MM on lowp's own models: checking them there would compare the model with itself.
        reason = (f"{backend.name} runs it on lowp's own model" if intr.name in getattr(backend, "modeled", ())
                  else backend.unavailable(intr))
        if reason is None:
            return verify(intr, backend, random_registers=registers, seed=seed)
        reasons.append(f"{backend.name}: {reason}")
    return Verdict(intr, "-", "skipped", reason="; ".join(reasons) or "no back end can execute it here")


def verify_rvv(intr, backends, vlens, registers, seed):
    """One verdict per VLEN: results and vxsat under each vxrm (lowp.isa_models.verify.rvv_proof)."""
    from lowp.isa_models.verify import rvv_proof
    from lowp.isa_models.verify.proof import Verdict
    if not backends:
        return [Verdict(intr, "-", "skipped", reason="no RISC-V back end")]
    return [rvv_proof.verify(intr, backends[0], vlen, random_registers=max(16, registers // 4), seed=seed)
            for vlen in vlens]


def verify_hvx(intr, backends, registers, seed):
    """An HVX intrinsic on qemu-hexagon, lane by lane against its model (lowp.isa_models.verify.hvx_proof: the
    lanes' extremes, the scalar's shift and length edges, then random registers)."""
    from lowp.isa_models.verify import hvx_proof
    from lowp.isa_models.verify.proof import Verdict
    ready = [b for b in backends if not b.unavailable(intr)]
    if not ready:
        reasons = "; ".join(f"{b.name}: {b.unavailable(intr)}" for b in backends)
        return Verdict(intr, "-", "skipped", reason=reasons or "no Hexagon back end here")
    start = time.perf_counter()
    v = hvx_proof.verify(intr, ready[0], random_registers=registers, seed=seed)
    lanes = v.registers * int(np.asarray(intr(*hvx_proof.registers(intr, 1, seed)[0])).size)     # result lanes
    return Verdict(intr, ready[0].name, "verified" if v.mismatch is None else "FAILED", v.registers, lanes,
                   reason=v.mismatch or "", seconds=time.perf_counter() - start)


def modelled_not_proven(v):
    """An AVX10.2 intrinsic no executor here runs: checked against the scalar reading of the pseudocode in the
    tests only (tests/test_x86_amx_avx10.py), so it is reported as such, not as an ordinary skip."""
    if v.status == "skipped" and "avx10_2" in v.intrinsic.features:
        v.status = "modelled"
        v.reason = f"modelled, not proven ({v.reason}); checked against a scalar reading of the pseudocode"
    return v


def cmd_verify(args) -> int:
    if args.registers < 1:
        args.parser.input_error(f"--registers {args.registers}: the random registers per intrinsic must be 1 or more")
    if any(v < 1 for v in args.vlen):
        args.parser.input_error(f"--vlen {' '.join(map(str, args.vlen))}: a VLEN is a positive number of bits")
    selected = select(args.names, args.arch)
    amx = select_amx(args.names, args.arch)
    sme2 = select_sme2(args.names, args.arch)
    backends, notes = backends_for({i.instruction.arch for i in selected})
    if args.backend:
        backends = {arch: [b for b in found if b.name.split()[0] in args.backend] for arch, found in backends.items()}
    start = time.perf_counter()
    verdicts = []
    for i in selected:
        if i.instruction.arch == "riscv64":
            verdicts += verify_rvv(i, backends["riscv64"], args.vlen, args.registers, args.seed)
        elif i.instruction.arch == "hexagon":
            verdicts.append(verify_hvx(i, backends["hexagon"], args.registers, args.seed))
        elif i.scalable:
            verdicts += verify_scalable(i, backends[i.instruction.arch], args.registers, args.seed)
        else:
            verdicts.append(modelled_not_proven(verify_one(
                i, [b for b in backends[i.instruction.arch] if not getattr(b, "vl", 0)], args.registers, args.seed)))
    rows = [(v.intrinsic.name, v.intrinsic.mnemonic, v.backend, v.status, v.registers, v.lanes, v.reason)
            for v in verdicts]
    amx_verdicts, amx_runner = verify_amx(amx) if amx else ([], None)
    rows += [(v.mnemonic, v.mnemonic, "native", v.status, v.tiles, v.elements, v.reason) for v in amx_verdicts]
    sme2_verdicts, sme2_runners = verify_sme2(sme2, args.seed) if sme2 else ([], [])
    rows += [(v.form, "sdot", v.backend, v.status, v.registers, v.lanes, v.reason) for v in sme2_verdicts]
    exhaustive = None
    if args.exhaustive and any(i.mnemonic == "vpmaddubsw" for i in selected) and backends["x86"]:
        runner = backends["x86"][0]
        exhaustive = run_exhaustive(runner)
        if exhaustive is not None:
            rows.append((exhaustive.intrinsic, "vpmaddubsw", runner.name,
                         "exhaustive" if exhaustive.disagreement is None else "FAILED", exhaustive.registers,
                         exhaustive.cases, f"all 2^32 pair inputs in {exhaustive.seconds:.1f} s "
                         f"({'CPU' if runner.name == 'native' else runner.name} {exhaustive.native_seconds:.1f} s)"))
    print(tabulate(rows, headers=("intrinsic", "instruction", "back end", "status", "registers", "lanes", "note")))
    for b in sum(backends.values(), []) + ([amx_runner] if amx_runner else []) + sme2_runners:
        print(f"\n{b.name} ({b.arch}): {b.describe()}")
    for note in notes:
        print(f"not available: {note}")
    ran = [v for v in verdicts if v.status not in ("skipped", "modelled")]
    failed = [v for v in verdicts if v.status == "FAILED"]
    print_targets(verdicts, amx_verdicts, sme2_verdicts)
    print(f"\n{len(ran)} of {len(verdicts)} intrinsics executed and compared "
          f"({sum(v.lanes for v in ran)} lanes), {len(verdicts) - len(ran)} skipped or modelled-not-proven, "
          f"{len(failed)} disagreed; "
          f"{time.perf_counter() - start:.1f} s")
    for v in failed:
        print(f"\nFIRST DISAGREEMENT\n{v.disagreement or v.reason}", file=sys.stderr)
    for v in amx_verdicts:
        if v.status == "FAILED":
            print(f"\nFIRST DISAGREEMENT (AMX)\n{v.disagreement}", file=sys.stderr)
    for v in sme2_verdicts:
        if v.status == "FAILED":
            print(f"\nFIRST DISAGREEMENT (SME2)\n{v.disagreement}", file=sys.stderr)
    if any(v.status == "FAILED" for v in [*amx_verdicts, *sme2_verdicts]):
        return 1
    if exhaustive is not None and exhaustive.disagreement is not None:
        print(f"\nFIRST DISAGREEMENT (exhaustive)\n{exhaustive.disagreement}", file=sys.stderr)
        return 1
    return 1 if failed else 0


def print_targets(verdicts, amx_verdicts, sme2_verdicts=()) -> None:
    """Executed / skipped / modelled-not-proven per target (an RVV intrinsic counts once per VLEN)."""
    counts: dict[str, dict[str, int]] = {}
    for v in verdicts:
        c = counts.setdefault(target_of(v), {"executed": 0, "skipped": 0, "modelled": 0, "failed": 0})
        c["failed" if v.status == "FAILED" else v.status if v.status in ("skipped", "modelled") else "executed"] += 1
    for v in amx_verdicts:
        c = counts.setdefault("x86 AMX-INT8 (native)", {"executed": 0, "skipped": 0, "modelled": 0, "failed": 0})
        c["failed" if v.status == "FAILED" else "skipped" if v.status == "skipped" else "executed"] += 1
    for v in sme2_verdicts:
        c = counts.setdefault(f"aarch64 SME2 VL {v.vl} (qemu)", {"executed": 0, "skipped": 0, "modelled": 0,
                                                                "failed": 0})
        c["failed" if v.status == "FAILED" else "skipped" if v.status == "skipped" else "executed"] += 1
    print()
    print(tabulate([(t, c["executed"], c["skipped"], c["modelled"], c["failed"]) for t, c in counts.items()],
                   headers=("target", "executed", "skipped", "modelled, not proven", "disagreed")))


def run_exhaustive(backend):
    from lowp.isa_models.verify.proof import exhaustive_vpmaddubsw, pick_exhaustive
    intr = pick_exhaustive(backend)
    if intr is None:
        print(f"exhaustive: skipped, {backend.name} runs no VPMADDUBSW", file=sys.stderr)
        return None

    from lowp.conformance.run.progress import Counter
    with Counter(f"exhaustive {intr.name}", 256) as tick:
        return exhaustive_vpmaddubsw(backend, intr, progress=lambda a0: tick(a0 + 1, f"a0 = {a0}"))
