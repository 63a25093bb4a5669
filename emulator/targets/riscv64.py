"""RISC-V 64 (RV64GC + V 1.0) on x86-64 under qemu-riscv64: a static Linux program (zig, linux_runtime_riscv64.c);
RVV instruction models proven at VLEN 128 and 256 (lowp.emulator.rvv.RvvQemuBackend)."""
from __future__ import annotations

from . import EMULATOR, Recipe, Target, register

# zig's spelling of -march=rv64gcv: RV64GC plus the V 1.0 extension
LINUX = Recipe("riscv64-linux", "riscv64-linux-none", "baseline_rv64+v", EMULATOR / "linux_runtime_riscv64.c",
               "EM_RISCV")


class Riscv64Qemu(Target):
    name, arch, isa, backend = "riscv64-qemu", "riscv64", "riscv64", "qemu"
    recipe = LINUX

    def unavailable(self) -> str | None:
        from lowp.emulator.rvv import qemu_path
        if qemu_path() is None:
            return ("qemu-riscv64 is not installed (apt-get install qemu-user, or set LOWP_QEMU_RISCV64 to a "
                    "qemu-riscv64 binary)")
        return None

    def features(self, vector_bits=None, **options) -> frozenset[str]:
        return frozenset({"v"}) if self.unavailable() is None else frozenset()

    def intrinsic_backends(self) -> list:
        from lowp.emulator.rvv import RvvQemuBackend
        return [RvvQemuBackend()]


QEMU = register(Riscv64Qemu())
