"""The SVE/SVE2 and SME intrinsics executed under qemu-aarch64 at a chosen vector length: the qemu route of
lowp.emulator.aarch64.intrinsics (a static AArch64 Linux program with lowp's batch driver, lowp.emulator.qemu_batch: one
long-lived process per vector length serves every batch) for scalable registers.

    ScalableQemuBackend(vl=256)   runs each intrinsic at VL = 256 bits: `qemu-aarch64 -cpu
                                  max,sve-default-vector-length=32,sme-default-vector-length=32` (the properties
                                  take bytes: qemu docs/system/arm/cpu-features.rst, "SVE User-mode Default
                                  Vector Length Property" and the SME one, qemu 7.1+; checked with 7.2.22).

Unicorn cannot run SVE (it is QEMU 5.0.1, without the SVE decoder: `rdvl` is undefined there).

The wrappers are vector-length agnostic C, so one build serves every VL. Each is
`void lowp_s_<name>(const void *p0, ..., const void *p5, void *out, long imm, long n)`: for i < n it loads the
register arguments of register set i with svld1 under svptrue (a predicate arrives as 0/1 elements of its size and
becomes svbool_t through svcmpne), calls the ACLE intrinsic, and stores the result with svst1. An immediate sits
in a switch over its legal values. The SME wrappers are `__arm_new("za") __arm_locally_streaming`: they load the ZA
tile row by row (svld1_hor_za32), run the outer product and store the tile back (svst1_hor_za32); the one SME ABI
routine that needs, __arm_tpidr2_save, is supplied here (no lazy ZA save is ever pending in this program).
"""
from __future__ import annotations

from functools import cached_property
from typing import Sequence

import numpy as np

from lowp.isa_models import intrinsics as all_intrinsics
from lowp.isa_models.registry import Intrinsic

from lowp.emulator import qemu_batch as batch
from lowp.emulator.aarch64.intrinsics import qemu_path, qemu_version  # noqa: F401  (qemu_path: public here as before)

VLS = (128, 256, 512)              # the vector lengths lowp proves at
CPU = "generic+sve2+i8mm+sme"      # zig's -mcpu: the wrappers' code, not the machine (qemu -cpu max runs it)

# qemu 7.2's 32-bit SMOPA computes two outputs per 64-bit chunk and writes them to the wrong ZA elements; qemu
# issue #2083, fixed by "target/arm: Fix 32-bit SMOPA" (d572bcb222, in 9.0 and stable 8.2.3). The test vector is
# that commit's sme-smopa-1 test: Zn = 0, 1, ..., Zm = Zn + 16, ZA0.S row r col c = sum_k Zn[4r+k] * Zm[4c+k].
QEMU_2083 = ("computes the 32-bit SME outer products wrongly (qemu issue #2083: two outputs per 64-bit "
             "chunk, written to the wrong ZA elements; fixed in qemu 9.0 / 8.2.3 by d572bcb222 'target/arm: Fix "
             "32-bit SMOPA'), so it cannot prove the model; point LOWP_QEMU_AARCH64 at a fixed qemu (Debian 12: "
             "qemu-user 10.0 from bookworm-backports)")


def _cname(dtype) -> tuple[str, str, int]:
    """(C element type, ACLE type suffix, bits): s8 -> int8_t, s8, 8."""
    kind = "u" if dtype.kind == "u" else "s"
    bits = dtype.itemsize * 8
    return f"{'uint' if kind == 'u' else 'int'}{bits}_t", f"{kind}{bits}", bits


COUNT = {8: "svcntb()", 16: "svcnth()", 32: "svcntw()", 64: "svcntd()"}


def _load(p, k: int) -> tuple[str, str]:
    """(declaration of argument k, the expression the call passes)."""
    et, sfx, bits = _cname(p.dtype)
    ptrue = f"svptrue_b{bits}()"
    if p.kind == "vec":
        vt = f"sv{et[:-2]}_t"
        return f"{vt} a{k} = svld1_{sfx}({ptrue}, (const {et} *)p{k} + {COUNT[bits]} * i);", f"a{k}"
    if p.kind in ("pred", "ptrue"):
        return (f"svbool_t a{k} = svcmpne_n_u{bits}({ptrue}, svld1_u{bits}({ptrue}, (const uint{bits}_t *)p{k} + "
                f"{COUNT[bits]} * i), 0);", f"a{k}")
    return "", ""


def _switch(imm, body) -> list[str]:
    """body(value) for every legal immediate, selected at run time."""
    if imm is None:
        return [body(None)]
    lines = ["switch (imm) {"]
    lines += [f"case {v}: {{ {body(v)} }} break;" for v in range(imm.lo, imm.hi + 1)]
    return lines + ["default: __builtin_trap();", "}"]


def sve_wrapper(intr: Intrinsic) -> str:
    loads, args, k = [], [], 0
    for p in intr.params:
        if p.kind == "imm":
            args.append("IMM")
            continue
        decl, name = _load(p, k)
        loads.append(decl)
        args.append(name)
        k += 1
    et, sfx, bits = _cname(intr.result.dtype)
    imm = next((p for p in intr.params if p.kind == "imm"), None)
    call = f"{intr.name}({', '.join(args)})"
    store = lambda v: (f"svst1_{sfx}(svptrue_b{bits}(), ({et} *)out + {COUNT[bits]} * i, "   # noqa: E731
                       f"{call.replace('IMM', str(v))});")
    lines = [f"void lowp_s_{intr.name}(const void *p0, const void *p1, const void *p2, const void *p3, const void *p4,"
             " const void *p5, void *out, long imm, long n) {",
             "    (void)p0; (void)p1; (void)p2; (void)p3; (void)p4; (void)p5; (void)imm;",
             "    for (long i = 0; i < n; i++) {", *("        " + x for x in loads),
             *("        " + x for x in _switch(imm, store)), "    }", "}", ""]
    return "\n".join(lines)


def sme_wrapper(intr: Intrinsic) -> str:
    """za (the tile before), tile (ZA0..ZA3), pn, pm, zn, zm -> the tile after."""
    za, tile, *rest = intr.params
    loads, args = [], []
    for k, p in enumerate(rest):
        decl, name = _load(p, k + 1)      # p0 is the tile; the immediate has no buffer
        loads.append(decl)
        args.append(name)
    et = _cname(za.dtype)[0]

    def body(t):
        return (f"for (uint64_t r = 0; r < d; r++) svld1_hor_za32({t}, r, svptrue_b32(), tile_in + r * d); "
                f"{intr.name}({t}, {', '.join(args)}); "
                f"for (uint64_t r = 0; r < d; r++) svst1_hor_za32({t}, r, svptrue_b32(), tile_out + r * d);")
    lines = [f"__arm_new(\"za\") __arm_locally_streaming void lowp_s_{intr.name}(const void *p0, const void *p1, "
             "const void *p2, const void *p3, const void *p4, const void *p5, void *out, long imm, long n) {",
             "    (void)p5; (void)imm;",
             "    uint64_t d = svcntw();",
             "    for (long i = 0; i < n; i++) {",
             f"        const {et} *tile_in = (const {et} *)p0 + d * d * i;",
             f"        {et} *tile_out = ({et} *)out + d * d * i;",
             *("        " + x for x in loads),
             *("        " + x for x in _switch(tile, body)), "    }", "}", ""]
    return "\n".join(lines)


SME_SUPPORT = r"""
/* __arm_tpidr2_save (AAPCS64, SME support routines): commits a pending lazy save of ZA. Nothing in this program
   sets one up, so TPIDR2_EL0 stays 0 and the routine returns; it traps if that ever stops being true. It may
   only use x16/x17 (its custom calling convention). */
__attribute__((naked)) void __arm_tpidr2_save(void) {
    __asm__ volatile("mrs x16, tpidr2_el0\n\tcbnz x16, 1f\n\tret\n1:\tbrk #1");
}
"""

def scalable_intrinsics() -> list[Intrinsic]:
    return [i for i in all_intrinsics("aarch64") if i.encoding in ("sve", "sme")]


def source(intrs) -> str:
    head = "#include <arm_sve.h>\n#include <arm_sme.h>\n#include <stdint.h>\n" + SME_SUPPORT
    return head + "\n".join(sme_wrapper(i) if i.encoding == "sme" else sve_wrapper(i) for i in intrs)


class ScalableQemuBackend(batch.BatchBackend):
    """SVE/SVE2 and SME intrinsics as a static Linux program under qemu-aarch64 at one vector length. The wrappers
    are vector-length agnostic, so the backends of every VL share one build (qemu_batch.program caches it)."""
    arch = "aarch64"
    target, build_name, build_cpu, prefix, inputs, outputs = "linux", "acle-sve-qemu", CPU, "lowp_s_", 6, 1

    def __init__(self, vl: int = 128, intrinsics=None, qemu: str | None = None):
        if vl not in VLS:
            raise ValueError(f"vl: expected one of {', '.join(map(str, VLS))} bits, got {vl}")
        self.vl = vl
        self.name = f"qemu-vl{vl}"
        super().__init__(intrinsics if intrinsics is not None else scalable_intrinsics(), qemu)

    def wrappers(self, intrinsics) -> str:
        return source(intrinsics)

    @property
    def cpu(self) -> str:
        from lowp.emulator.qemu import vector_length_cpu
        return vector_length_cpu(self.vl)

    def unavailable(self, intr: Intrinsic) -> str | None:
        if self.missing_qemu():
            return self.missing_qemu()
        if intr.encoding not in ("sve", "sme"):
            return f"{intr.name} is not an SVE/SME intrinsic"
        if intr.name not in {i.name for i in self._intrinsics}:
            return f"{intr.name} has no wrapper in this backend"
        if intr.vl not in (0, self.vl):
            return f"{intr.name} is fixed at VL {intr.vl}, this backend runs VL {self.vl}"
        if intr.encoding == "sme" and not self.outer_products_right:
            return f"{batch.identify(self.qemu)} {QEMU_2083}"
        return None

    @cached_property
    def outer_products_right(self) -> bool:
        """Whether this qemu's SMOPA gives qemu's own regression test's answer (see QEMU_2083)."""
        from lowp.isa_models import intrinsic
        smopa = intrinsic("svmopa_za32_s8_m")
        if smopa.name not in {i.name for i in self._intrinsics}:
            return True
        d, b = self.vl // 32, self.vl // 8
        zn = np.arange(b, dtype=np.int64).astype(np.int8)[None]
        zm = (zn.astype(np.int64) + 16).astype(np.int8)
        za = np.zeros((1, d, d), np.int32)
        every = np.ones((1, b), bool)
        args = [za, 0, every, every, zn, zm]
        return bool((self.run(smopa, args) == smopa.at_vl(self.vl)(*args)).all())

    def _at_vl(self, intr: Intrinsic) -> Intrinsic:
        return intr.at_vl(self.vl) if intr.vl == 0 else intr

    def run(self, intr: Intrinsic, args: Sequence) -> np.ndarray:
        """args follow intr.params, batched: vec (N, lanes), pred/ptrue (N, lanes) bool, tile (N, d, d), imm int."""
        fixed = self._at_vl(intr)
        arrays, imm = [], 0
        for p, a in zip(fixed.params, args):
            if p.kind == "imm":
                imm = batch.immediate(intr.name, p, a)
                continue
            shape = (p.lanes, p.lanes) if p.kind == "tile" else (p.lanes,)
            want = np.bool_ if p.kind in ("pred", "ptrue") else p.dtype
            a = batch.registers(intr.name, p, a, shape, want, f" at VL {self.vl}")
            if want is np.bool_:          # a predicate travels as 0/1 elements of the size it governs
                a = a.astype(np.dtype(f"u{p.dtype.itemsize}"))
            arrays.append(a)
        r = fixed.result
        out_shape = (r.lanes, r.lanes) if r.kind == "tile" else (r.lanes,)
        return self.batch(self.cpu, intr.name, arrays + [None] * (6 - len(arrays)), [(r.dtype, out_shape)], imm)[0]

    def describe(self) -> str:
        if self.qemu is None:
            return "qemu-aarch64 not installed"
        version = batch.identify(self.qemu)
        return f"{version}, -cpu {self.cpu} (SVE2, SVE I8MM, SME at VL {self.vl})"


def backends(qemu: str | None = None) -> list[ScalableQemuBackend]:
    """One backend per vector length lowp proves at."""
    return [ScalableQemuBackend(vl, qemu=qemu) for vl in VLS]
