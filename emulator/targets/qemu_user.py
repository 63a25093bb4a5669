"""What every qemu-user target shares: one long-lived qemu process per machine (lowp.emulator.qemu.QemuMachine),
with the guest architecture's facts (binary, -cpu, driver, registers) in a QemuGuest. A new qemu-user target is a
QemuGuest and a subclass naming it."""
from __future__ import annotations

from lowp.emulator.targets.base import Target


class QemuUserTarget(Target):
    backend = "qemu"
    guest_name: str               # a key of lowp.emulator.qemu.GUESTS

    @property
    def guest(self):
        from lowp.emulator.qemu import GUESTS
        return GUESTS[self.guest_name]

    def unavailable(self) -> str | None:
        return self.guest.unavailable()

    def qemu_for(self, features=(), qemu: str | None = None) -> str | None:
        """The qemu binary a kernel needing `features` runs on: the one asked for, else the guest's default
        (None). A guest whose newer features need another qemu overrides this (AArch64: SME2)."""
        return qemu

    def cannot_run(self, features=(), vector_bits=None, qemu=None, **options) -> str | None:
        return super().cannot_run(features, vector_bits, qemu=self.qemu_for(features, qemu), **options)

    def cpu(self, vector_bits=None, cpu=None) -> str:
        """qemu's -cpu: the one asked for, else the guest's default at the kernel's vector length."""
        return cpu or (self.guest.vector_length_cpu(vector_bits) if vector_bits else self.guest.cpu)

    def features(self, vector_bits=None, cpu=None, qemu=None, **options) -> frozenset[str]:
        from lowp.emulator.qemu import cpu_features
        if self.unavailable() is not None:
            return frozenset()
        return cpu_features(self.cpu(vector_bits, cpu), qemu, self.guest)

    def describe(self, vector_bits=None, cpu=None, qemu=None, features=(), **options) -> str:
        """'qemu-aarch64 10.0.2 (/usr/bin/qemu-aarch64) -cpu max,...': which qemu binary runs, and how."""
        qemu = self.qemu_for(features, qemu)
        return f"{self.identity(qemu) or self.guest.qemu} -cpu {self.cpu(vector_bits, cpu)}"

    def identity(self, qemu=None):
        """The qemu-user binary that runs here (lowp.emulator.qemu_batch.QemuIdentity), None when there is none."""
        from lowp.emulator.qemu_batch import identify
        path = qemu or self.guest.path()
        return identify(path) if path else None

    def machine(self, sources, *, flags=(), depends=(), vector_bits=None, features=(), **options):
        from lowp.emulator.qemu import QemuMachine, build_for_qemu
        options["cpu"] = self.cpu(vector_bits, options.get("cpu"))
        options["qemu"] = self.qemu_for(features, options.get("qemu"))
        binary = build_for_qemu(*sources, flags=flags, depends=depends, guest=self.guest)
        return QemuMachine(binary, guest=self.guest, **options)
