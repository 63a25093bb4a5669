"""Executors of ACLE intrinsics for `lowp isa verify` and the tests (the Backend protocol of
lowp.isa_models.verify.backend): a generated C wrapper per intrinsic, compiled once (cached), run over a batch.

    UnicornBackend()  runs the wrappers under Machine (Unicorn 2.1.4, cpu MAX). FEAT_I8MM intrinsics run through
                      the gap-filling, i.e. on lowp's own models: they are listed in `modeled`, and checking them
                      here compares the model with itself. Use QemuBackend for an independent opinion on those.
    QemuBackend()     runs a static AArch64 Linux build of the same wrappers under `qemu-aarch64 -cpu max`
                      (Debian qemu-user) with lowp's batch driver (qemu_batch.py: one long-lived process serves
                      every batch); unavailable() says why when it is not installed.

Each wrapper is `void lowp_w_<name>(const void *p0, const void *p1, const void *p2, void *out, long imm, long n)`:
it loads the vector arguments of register i from p0..p2 (vld1/vld1q), calls the intrinsic and stores the result
(vst1/vst1q) to out, for i < n. An immediate must be a compile-time constant in C, so the call sits in a switch
over every legal value of the immediate (a wrong one reaches __builtin_trap).
"""
from __future__ import annotations

from functools import cached_property
from typing import Sequence

import numpy as np

from lowp.isa_models import intrinsics as all_intrinsics
from lowp.isa_models.registry import Intrinsic

from lowp.emulator import qemu_batch as batch
from lowp.emulator.build import build_text
from lowp.emulator.aarch64.a64 import I8MM
from lowp.emulator.qemu_batch import qemu_version  # noqa: F401  (public here: the qemu backends' describe() use it)

CTYPE = {"s": "int", "u": "uint"}


def _vtype(p) -> tuple[str, str, str]:
    """(vector type, element pointer type, load/store suffix) of a vec Param: s8x16 -> int8x16_t, int8_t, q_s8."""
    kind = "u" if p.dtype.kind == "u" else "s"
    bits = p.dtype.itemsize * 8
    q = "q" if p.width == 128 else ""
    return f"{CTYPE[kind]}{bits}x{p.lanes}_t", f"{CTYPE[kind]}{bits}_t", f"{q}_{kind}{bits}"


def wrapper(intr: Intrinsic) -> str:
    """The C wrapper of one intrinsic (see the module doc)."""
    lines = [f"void lowp_w_{intr.name}(const void *p0, const void *p1, const void *p2, void *out, long imm, long n) {{",
             "    (void)p0; (void)p1; (void)p2; (void)imm;",
             "    for (long i = 0; i < n; i++) {"]
    call_args, k = [], 0
    for p in intr.params:
        if p.kind == "vec":
            vt, et, sfx = _vtype(p)
            lines.append(f"        {vt} a{k} = vld1{sfx}((const {et} *)p{k} + {p.lanes} * i);")
            call_args.append(f"a{k}")
            k += 1
        else:
            call_args.append("IMM")
    rt, ret, rsfx = _vtype(intr.result)
    lines.append(f"        {rt} r;")
    imm = next((p for p in intr.params if p.kind == "imm"), None)
    call = f"{intr.name}({', '.join(call_args)})"
    if imm is None:
        lines.append(f"        r = {call};")
    else:
        lines.append("        switch (imm) {")
        for v in range(imm.lo, imm.hi + 1):
            lines.append(f"        case {v}: r = {call.replace('IMM', str(v))}; break;")
        lines.append("        default: __builtin_trap();")
        lines.append("        }")
    lines.append(f"        vst1{rsfx}(({ret} *)out + {intr.result.lanes} * i, r);")
    lines += ["    }", "}", ""]
    return "\n".join(lines)


def wrappers_source(intrs) -> str:
    return "#include <arm_neon.h>\n#include <stdint.h>\n\n" + "\n".join(wrapper(i) for i in intrs)


def _aarch64_intrinsics():
    """The Advanced SIMD ones: SVE/SME intrinsics run through lowp.emulator.aarch64.sve (qemu at a chosen VL)."""
    return [i for i in all_intrinsics("aarch64") if i.encoding == "a64"]


class UnicornBackend:
    """Run AArch64 intrinsics under Unicorn (lowp.emulator.Machine), batch by batch."""
    name = "unicorn"
    arch = "aarch64"

    def __init__(self, intrinsics=None):
        self._intrinsics = list(intrinsics) if intrinsics is not None else _aarch64_intrinsics()

    @property
    def modeled(self) -> set[str]:
        """Intrinsics whose instruction Unicorn lacks (FEAT_I8MM): they run on lowp's models (gap-filling)."""
        return {i.name for i in self._intrinsics if i.mnemonic in I8MM}

    @cached_property
    def binary(self):
        return build_text(wrappers_source(self._intrinsics), name="acle-wrappers")

    @cached_property
    def machine(self):
        from lowp.emulator.machine import Machine
        return Machine(self.binary)

    def unavailable(self, intr: Intrinsic) -> str | None:
        return _no_wrapper(self._intrinsics, intr)

    def run(self, intr: Intrinsic, args: Sequence) -> np.ndarray:
        vecs, imm, n = batch.split_operands(intr, args)
        out = np.zeros((n, intr.result.lanes), intr.result.dtype)
        pointers = vecs + [0] * (3 - len(vecs))
        r = self.machine.call(f"lowp_w_{intr.name}", *pointers, out, imm, n)
        self.last_modeled = r.modeled
        return r.arrays[len(vecs)]

    def describe(self) -> str:
        import unicorn
        return (f"Unicorn {unicorn.__version__} (QEMU 5.0.1 TCG), AArch64 cpu model MAX; FEAT_I8MM intrinsics "
                f"({len(self.modeled)}) run on lowp's models through the I8MM gap-filling, not on Unicorn")


def _no_wrapper(wrapped, intr: Intrinsic) -> str | None:
    """Why a backend built for the intrinsics `wrapped` cannot run `intr`, or None."""
    if intr.instruction.arch != "aarch64":
        return f"{intr.name} is not an AArch64 intrinsic"
    if intr.name not in {i.name for i in wrapped}:
        return f"{intr.name} has no wrapper in this backend"
    return None


def qemu_path() -> str | None:
    return batch.qemu_path("qemu-aarch64", "LOWP_QEMU_AARCH64")


class QemuBackend(batch.BatchBackend):
    """Run AArch64 intrinsics as a static Linux program under qemu-aarch64 -cpu max (lowp.emulator.qemu_batch: one
    long-lived process serves every batch)."""
    name = "qemu"
    arch = "aarch64"
    cpu = "max"
    target, build_name, inputs, outputs = "linux", "acle-qemu", 3, 1

    def __init__(self, intrinsics=None, qemu: str | None = None):
        super().__init__(intrinsics if intrinsics is not None else _aarch64_intrinsics(), qemu)

    def wrappers(self, intrinsics) -> str:
        return wrappers_source(intrinsics)

    def unavailable(self, intr: Intrinsic) -> str | None:
        return self.missing_qemu() or _no_wrapper(self._intrinsics, intr)

    def describe(self) -> str:
        if self.qemu is None:
            return "qemu-aarch64 not installed"
        return f"{batch.identify(self.qemu)}, -cpu max (implements FEAT_DotProd and FEAT_I8MM)"
