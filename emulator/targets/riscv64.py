"""RISC-V 64 (RV64GC + V 1.0) on x86-64 under qemu-riscv64: a static Linux program (zig, linux_runtime_riscv64.c);
RVV instruction models proven at VLEN 128 and 256 (lowp.emulator.rvv.RvvQemuBackend)."""
from __future__ import annotations

from lowp.emulator.build import RISCV64_LINUX as LINUX
from lowp.emulator.targets.base import register
from lowp.emulator.targets.qemu_user import QemuUserTarget


class Riscv64Qemu(QemuUserTarget):
    """Kernels run through lowp.emulator.qemu's RISCV64 guest (qemu_driver_riscv64.c, LP64D); features are the
    AT_HWCAP letters and the -cpu's V and Zvl*b (qemu 7.2 reports no VLEN)."""
    name, arch, isa, guest_name = "riscv64-qemu", "riscv64", "riscv64", "riscv64"
    recipe = LINUX

    def cpu(self, vector_bits=None, cpu=None) -> str:
        """The guest's -cpu at the kernel's vector length, with half precision (Zfh, Zvfh) where this qemu has it
        (lowp.emulator.qemu.RISCV64_HALF_OPTIONS: not 7.2's, whose rvvfp16arith kernels then skip lacking zvfh)."""
        from lowp.emulator.qemu import RISCV64_HALF_OPTIONS, riscv64_takes_options
        chosen = super().cpu(vector_bits, cpu)
        qemu = None if cpu else self.guest.path()
        if qemu and riscv64_takes_options(qemu, RISCV64_HALF_OPTIONS):
            return chosen + RISCV64_HALF_OPTIONS
        return chosen

    def intrinsic_backends(self) -> list:
        from lowp.emulator.rvv import RvvQemuBackend
        return [RvvQemuBackend()]


QEMU = register(Riscv64Qemu())
