"""The SME2 multi-vector instructions lowp models (lowp.isa_models.sme: SDOT (4-way, multiple vectors) into ZA),
executed under qemu-aarch64 at a chosen streaming vector length, for `lowp isa verify` (lowp.isa_models.verify.sme2_proof).

    Sme2QemuBackend(vl=256).run("svdot_za32_s8_vg1x2", za, zn, zm, slices)

They are not in the intrinsic registry (a register group and the whole ZA array are operand kinds it does not
have), so the backend takes the ACLE name of a form and the operands as the model takes them: za (N, SVL/8,
SVL/32) s32, the whole ZA array; zn, zm (N, nreg, SVL/8) s8, the register groups; slices (N,) the W8-W11 value.

Each wrapper is `__arm_new("za") __arm_locally_streaming`: it fills ZA vector by vector (svldr_za, an SME LDR of
one ZA array vector), loads the groups (svld1 under svptrue, svcreate2/4), calls the ACLE intrinsic and stores ZA
back (svstr_za). clang computes `slice` into W8 (the instruction's immediate offset stays 0): the model's offset is
checked against the pseudocode in the tests, the slice arithmetic (mod vstride, the vstride between the group's
vectors) here. qemu 7.2 and 10.0.2 have no SME2 (SIGILL; measured): unavailable() asks the qemu by running one SDOT
(its HWCAP2 does not say: 10.0.2 reports no sme2 bit) and says why, naming the binary and version.
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

from lowp.isa_models.verify.sme2_proof import FORMS      # ACLE name -> registers per group

from lowp.emulator import qemu_batch as batch
from lowp.emulator.errors import EmulatorError
from lowp.emulator.aarch64.qemu_sme2 import HOW, sme2_qemu
from lowp.emulator.aarch64.sve import SME_SUPPORT, VLS

CPU = "generic+sve2+i8mm+sme2"     # zig's -mcpu (clang's +sme2): the wrappers' code; qemu -cpu max runs it
NO_SME2 = ("has no SME2: SDOT (4-way, multiple vectors) is an undefined instruction there (SIGILL; so are Debian 12's "
           "qemu-user 7.2 and bookworm-backports' 10.0.2; qemu 11.1.3 runs it): " + HOW)


def wrapper(name: str, nreg: int) -> str:
    loads = {side: ", ".join(f"svld1_s8(pt, (const int8_t *)p{k} + ({nreg} * i + {r}) * b)" for r in range(nreg))
             for side, k in (("zn", 1), ("zm", 2))}
    return "\n".join([
        f"__arm_new(\"za\") __arm_locally_streaming void lowp_m_{name}(const void *p0, const void *p1, "
        "const void *p2, const void *p3, void *out, long imm, long n) {",
        "    (void)imm;",
        "    uint64_t b = svcntb();",
        "    svbool_t pt = svptrue_b8();",
        "    for (long i = 0; i < n; i++) {",
        "        for (uint64_t v = 0; v < b; v++) svldr_za(v, (const uint8_t *)p0 + (i * b + v) * b);",
        f"        svint8x{nreg}_t zn = svcreate{nreg}({loads['zn']});",
        f"        svint8x{nreg}_t zm = svcreate{nreg}({loads['zm']});",
        f"        {name}(((const uint32_t *)p3)[i], zn, zm);",
        "        for (uint64_t v = 0; v < b; v++) svstr_za(v, (uint8_t *)out + (i * b + v) * b);",
        "    }", "}", ""])


def source() -> str:
    head = "#include <arm_sve.h>\n#include <arm_sme.h>\n#include <stdint.h>\n" + SME_SUPPORT
    return head + "\n".join(wrapper(name, nreg) for name, nreg in FORMS.items())


class Sme2QemuBackend(batch.BatchBackend):
    """The SME2 forms of FORMS as a static Linux program under qemu-aarch64 at one streaming vector length."""
    arch = "aarch64"
    target, build_name, build_cpu, prefix, inputs, outputs = "linux", "acle-sme2-qemu", CPU, "lowp_m_", 4, 1

    def __init__(self, vl: int = 128, qemu: str | None = None):
        if vl not in VLS:
            raise ValueError(f"vl: expected one of {', '.join(map(str, VLS))} bits, got {vl}")
        self.vl = vl
        self.name = f"qemu-sme2-vl{vl}"
        super().__init__([], qemu or sme2_qemu())

    @cached_property
    def program(self) -> batch.Program:
        return batch.program(source(), tuple(FORMS), self.prefix, inputs=self.inputs, outputs=self.outputs,
                             name=self.build_name, target=self.target, cpu=self.build_cpu)

    @property
    def cpu(self) -> str:
        from lowp.emulator.qemu import vector_length_cpu
        return vector_length_cpu(self.vl)

    def unavailable(self, form: str) -> str | None:
        if form not in FORMS:
            raise ValueError(f"form: expected one of {', '.join(FORMS)}, got {form!r}")
        return self.missing_qemu() or self._no_sme2

    @cached_property
    def _no_sme2(self) -> str | None:
        """Why this qemu cannot run SME2 (asked by running one SDOT: qemu 10.0 does not list sme2 in HWCAP2 though
        it runs it), or None."""
        b = self.vl // 8
        try:
            self._run("svdot_za32_s8_vg1x2", np.zeros((1, b, b // 4), np.int32), np.zeros((1, 2, b), np.int8),
                      np.zeros((1, 2, b), np.int8), np.zeros(1, np.uint32))
        except EmulatorError as e:
            if "SIGILL" not in str(e):
                raise
            return f"{batch.identify(self.qemu)} {NO_SME2}"
        return None

    def run(self, form: str, za, zn, zm, slices) -> np.ndarray:
        """The ZA array after `form` (FORMS) on each register set; ValueError naming an operand of the wrong
        type or shape at this VL."""
        reason = self.unavailable(form)
        if reason:
            raise EmulatorError(reason)
        return self._run(form, za, zn, zm, slices)

    def _run(self, form, za, zn, zm, slices) -> np.ndarray:
        b, nreg = self.vl // 8, FORMS[form]
        where = f" at VL {self.vl}"
        za = _operand(form, "za", za, (b, b // 4), np.int32, where)
        zn = _operand(form, "zn", zn, (nreg, b), np.int8, where)
        zm = _operand(form, "zm", zm, (nreg, b), np.int8, where)
        slices = _operand(form, "slices", slices, (), np.uint32, where)
        return self.batch(self.cpu, form, [za, zn, zm, slices], [(np.int32, (b, b // 4))])[0]

    def describe(self) -> str:
        if self.qemu is None:
            return "qemu-aarch64 not installed"
        return f"{batch.identify(self.qemu)}, -cpu {self.cpu} (SME2 at SVL {self.vl})"


def _operand(form, name, a, shape, dtype, where) -> np.ndarray:
    a = np.ascontiguousarray(a)
    if a.dtype != dtype or a.shape[1:] != shape:
        raise ValueError(f"{form}: {name!r} must be an (N, {', '.join(map(str, shape))}) array of {np.dtype(dtype)}"
                         f"{where}, got {a.dtype}{list(a.shape)}")
    return a


def backends(qemu: str | None = None) -> list[Sme2QemuBackend]:
    """One backend per vector length lowp proves at."""
    return [Sme2QemuBackend(vl, qemu=qemu) for vl in VLS]
