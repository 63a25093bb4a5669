"""RISC-V V 1.0 intrinsics executed under qemu-riscv64 (Debian qemu-user 7.2), for `lowp isa verify` and the
tests: the Backend protocol of lowp.isa_models.verify.backend, plus the vxsat bit each register's instruction set.

    RvvQemuBackend()   one static riscv64 Linux program (emulator/build.py target 'riscv64-linux', zig's clang
                       with -mcpu=baseline_rv64+v) holding a wrapper per registered RVV intrinsic, run as
                       `qemu-riscv64 -cpu rv64,v=true,vlen=<VLEN>,elen=64,vext_spec=v1.0` (QEMU 7.2 accepts
                       VLEN a power of two in [128, 1024] and vext_spec 'v1.0' only: target/riscv/cpu.c,
                       riscv_cpu_realize, v7.2.0), with lowp's batch driver (lowp.emulator.qemu_batch: one
                       long-lived process per VLEN serves every batch).

Each wrapper is `void lowp_w_<name>(p0, p1, p2, const int64_t *scalar, const uint8_t *vxrm, void *out,
uint8_t *sat, long imm, long n)` (imm unused: vxrm travels per register): for register i < n it loads the vector arguments with vl = VLMAX, clears vxsat (csrwi),
calls the intrinsic with x[rs1] = scalar[i] and the rounding mode vxrm[i] (a compile-time constant in C, so
the call sits in a switch over the four modes; the intrinsic itself writes vxrm with csrwi), reads vxsat
(csrr) and stores the result and the bit. The asm statements take the vector operands and result as operands,
so the compiler cannot move the instruction out from between them. The RVV intrinsic spec leaves vxsat
UNSPECIFIED after an intrinsic; the one instruction each wrapper compiles to defines it.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lowp.isa_models import intrinsics as all_intrinsics
from lowp.isa_models.registry import Intrinsic

from lowp.emulator import qemu_batch as batch
from lowp.emulator.qemu_batch import qemu_version
from lowp.emulator.errors import EmulatorError

VLENS = (128, 256, 512, 1024)      # what qemu-riscv64 7.2 accepts
CTYPE = {"i": "int", "u": "uint"}


def _ctype(dtype) -> str:
    return f"{CTYPE['i' if dtype.kind == 'i' else 'u']}{dtype.itemsize * 8}_t"


def _vtype(dtype, lmul) -> tuple[str, str]:
    """(vector type, type suffix) of an RVV register group: s16, m1 -> vint16m1_t, i16m1."""
    from lowp.isa_models.rvv_intrinsics import _type_name
    suffix = _type_name(dtype, lmul)
    return f"v{CTYPE[suffix[0]]}{suffix[1:]}_t", suffix


def wrapper(intr) -> str:
    """The C wrapper of one RVV intrinsic (see the module doc)."""
    rt, rsuf = _vtype(intr.result.dtype, intr.result_lmul)
    sew, lmul = intr.result.dtype.itemsize * 8, rsuf[len(str(intr.result.dtype.itemsize * 8)) + 1:]
    lines = [f"void lowp_w_{intr.name}(const void *p0, const void *p1, const void *p2, const int64_t *scalar,",
             "        const uint8_t *vxrm, void *out, uint8_t *sat, long imm, long n) {",
             "    (void)p0; (void)p1; (void)p2; (void)scalar; (void)vxrm; (void)imm;",
             f"    size_t vl = __riscv_vsetvlmax_e{sew}{lmul}();",
             "    for (long i = 0; i < n; i++) {"]
    args, vecs, k = [], [], 0
    for p, l in zip(intr.params, intr.lmuls):
        if p.kind == "vec":
            vt, suf = _vtype(p.dtype, l)
            lines.append(f"        {vt} a{k} = __riscv_vle{p.dtype.itemsize * 8}_v_{suf}("
                         f"(const {_ctype(p.dtype)} *)p{k} + vl * i, vl);")
            args.append(f"a{k}")
            vecs.append(f"a{k}")
            k += 1
        elif p.kind == "scalar":
            args.append(f"({_ctype(p.dtype)})scalar[i]")
        elif p.name == "vxrm":
            args.append("VXRM")
        else:
            args.append("vl")
    ties = ", ".join(f'"+vr"({v})' for v in vecs)
    lines += [f"        {rt} r;",
              "        unsigned long s;",
              f'        __asm__ volatile("csrwi vxsat, 0" : {ties});']
    call = f"{intr.name}({', '.join(args)})"
    if "VXRM" in call:
        lines.append("        switch (vxrm[i]) {")
        for v in range(4):
            lines.append(f"        case {v}: r = {call.replace('VXRM', str(v))}; break;")
        lines.append("        default: __builtin_trap();")
        lines.append("        }")
    else:
        lines.append(f"        r = {call};")
    lines += ['        __asm__ volatile("csrr %0, vxsat" : "=r"(s) : "vr"(r));',
              f"        __riscv_vse{sew}_v_{rsuf}(({_ctype(intr.result.dtype)} *)out + vl * i, r, vl);",
              "        sat[i] = (uint8_t)s;", "    }", "}", ""]
    return "\n".join(lines)


def wrappers_source(intrs) -> str:
    return ("#include <riscv_vector.h>\n#include <stdint.h>\n#include <stddef.h>\n\n"
            + "\n".join(wrapper(i) for i in intrs))


def qemu_path() -> str | None:
    return batch.qemu_path("qemu-riscv64", "LOWP_QEMU_RISCV64")


class RvvQemuBackend(batch.BatchBackend):
    """Run RVV 1.0 intrinsics as a static Linux program under qemu-riscv64 at the VLEN the arguments have: the
    wrappers take vs2/vs1/vd, x[rs1] and vxrm per register, and give the result and vxsat."""
    name = "qemu"
    arch = "riscv64"
    target, build_name, inputs, outputs = "riscv64-linux", "rvv-qemu", 5, 2

    def __init__(self, intrinsics=None, qemu: str | None = None):
        super().__init__(intrinsics if intrinsics is not None else all_intrinsics("riscv64"), qemu)
        self.last_vxsat = None

    def wrappers(self, intrinsics) -> str:
        return wrappers_source(intrinsics)

    def unavailable(self, intr: Intrinsic) -> str | None:
        if self.missing_qemu():
            return self.missing_qemu()
        if intr.instruction.arch != "riscv64":
            return f"{intr.name} is not a RISC-V intrinsic"
        if intr.name not in {i.name for i in self._intrinsics}:
            return f"{intr.name} has no wrapper in this backend"
        if intr.vlen is not None and intr.vlen not in VLENS:
            return f"qemu-riscv64 7.2 runs VLEN 128..1024 only, not {intr.vlen}"
        return None

    def cpu(self, vlen: int) -> str:
        return f"rv64,v=true,vlen={vlen},elen=64,vext_spec=v1.0"

    def run(self, intr, args: Sequence) -> np.ndarray:
        result, self.last_vxsat = self.run_with_vxsat(intr, args)
        return result

    def run_with_vxsat(self, intr, args: Sequence) -> tuple[np.ndarray, np.ndarray]:
        """Result registers (N, VLMAX) and vxsat (N,) bool. args follow intr.params: vectors (N, elements);
        x[rs1] and vxrm an int or an (N,) array each; vl an int (VLMAX)."""
        if self.qemu is None:
            raise EmulatorError(self.missing_qemu())
        view = intr if intr.vlen is not None else intr.at(intr.vlen_of(args))
        if view.vlen not in VLENS:
            raise EmulatorError(f"qemu-riscv64 7.2 runs VLEN 128..1024 only, not {view.vlen}")
        vecs, scalar, vxrm = [], 0, 0
        for p, a in zip(view.params, args):
            if p.kind == "vec":
                vecs.append(batch.registers(intr.name, p, a, (p.lanes,), p.dtype, f" at VLEN={view.vlen}"))
            elif p.kind == "scalar":
                scalar = a
            elif p.name == "vxrm":
                vxrm = a
        n = len(vecs[0])
        scalars = np.broadcast_to(np.asarray(scalar).astype(np.uint64).view(np.int64)
                                  if np.asarray(scalar).dtype == np.uint64 else np.asarray(scalar, np.int64), (n,))
        modes = np.broadcast_to(np.asarray(vxrm, np.uint8), (n,))
        inputs = vecs + [None] * (3 - len(vecs)) + [scalars, modes]
        result, sat = self.batch(self.cpu(view.vlen), intr.name, inputs,
                                 [(view.result.dtype, (view.result.lanes,)), (np.uint8, ())])
        return result, sat != 0

    def describe(self) -> str:
        if self.qemu is None:
            return "qemu-riscv64 not installed"
        version = batch.identify(self.qemu)
        return f"{version}, -cpu {self.cpu(0).replace('vlen=0', 'vlen=<VLEN>')}"
