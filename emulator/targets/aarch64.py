"""AArch64 on x86-64: Unicorn (lowp.emulator.Machine, a 'bare' freestanding build, AAPCS64 in aapcs64.py) and
qemu-user (lowp.emulator.qemu.QemuMachine, a static Linux program with lowp's guest driver). Unicorn is preferred
where it runs a kernel's features itself; qemu where Unicorn lacks one (SVE, SME) or has it only through lowp's
own models (FEAT_I8MM: a verdict would then rest on the models it checks)."""
from __future__ import annotations

from functools import lru_cache

from lowp.emulator.build import BARE, LINUX
from lowp.emulator.targets.base import Target, register
from lowp.emulator.targets.qemu_user import QemuUserTarget

# What Unicorn 2.1.4 (cpu model MAX, as Machine sets it up) executes: probed by running one instruction of each
# feature (tests/test_schema.py repeats the probe). The ID registers of the model also say SVE, but Machine never
# enables it (PTRUE raises), so sve is not claimed; PACGA, BFDOT and the FEAT_I8MM instructions raise. i8mm is
# listed because lowp runs SMMLA/UMMLA/USMMLA/USDOT/SUDOT on its own bit-exact models (lowp.emulator.aarch64.i8mm).
# evtstrm and cpuid are services of the Linux kernel, not of a CPU.
UNICORN_FEATURES = (
    "fp", "asimd", "fphp", "asimdhp", "aes", "pmull", "sha1", "sha2", "sha512", "sha3", "sm3", "sm4", "crc32",
    "atomics", "asimdrdm", "asimddp", "asimdfhm", "jscvt", "fcma", "lrcpc", "ilrcpc", "dcpop", "dcpodp", "frint",
    "sb", "flagm", "flagm2", "rng", "paca", "bti", "i8mm",
)


class Aarch64Unicorn(Target):
    name, arch, isa, backend, preference = "aarch64-unicorn", "aarch64", "aarch64", "unicorn", 0
    recipe = BARE
    models_only = frozenset({"i8mm"})

    @property
    def convention(self):
        from lowp.emulator.aarch64.aapcs64 import AAPCS64
        return AAPCS64

    def unavailable(self) -> str | None:
        try:
            import unicorn
            del unicorn
        except ImportError as e:   # pragma: no cover - unicorn is a dependency
            return f"the emulator cannot load: {e}"
        return None

    def features(self, vector_bits=None, **options) -> frozenset[str]:
        return frozenset(UNICORN_FEATURES)

    def describe(self, vector_bits=None, **options) -> str:
        return "Unicorn 2.1.4 (cpu model MAX)"

    def machine(self, sources, *, flags=(), depends=(), vector_bits=None, features=(), **options):
        from lowp.emulator.build import build
        from lowp.emulator.machine import Machine
        return Machine(build(*sources, flags=flags, depends=depends), convention=self.convention, **options)

    def intrinsic_backends(self) -> list:
        from lowp.emulator.aarch64.intrinsics import UnicornBackend
        return [UnicornBackend()]


class Aarch64Qemu(QemuUserTarget):
    name, arch, isa, preference, guest_name = "aarch64-qemu", "aarch64", "aarch64", 1, "aarch64"
    recipe = LINUX

    def qemu_for(self, features=(), qemu=None) -> str | None:
        """SME2 and SME2.1 kernels run on the qemu that has them (lowp.emulator.aarch64.qemu_sme2: $LOWP_QEMU_SME2,
        or the fetched qemu 11), where there is one; the rest on the default qemu."""
        from lowp.emulator.aarch64.qemu_sme2 import qemu_for
        return qemu or qemu_for(features)

    def cannot_run(self, features=(), vector_bits=None, qemu=None, **options) -> str | None:
        reason = super().cannot_run(features, vector_bits, qemu, **options)
        if reason and "lacks sme2" in reason and not self.qemu_for(features, qemu):
            from lowp.emulator.aarch64.qemu_sme2 import HOW
            reason += f" (qemu 11 has SME2 and SME2.1: {HOW})"
        return reason

    def known_defect(self, features=(), vector_bits=None, qemu=None, **options) -> str | None:
        """A qemu that executes a feature wrongly cannot judge a kernel using it: its verdict would be qemu's bug.
        SME: qemu 7.2's 32-bit SMOPA (issue #2083), probed with the fix's own test vector."""
        if "sme" not in features:
            return None
        qemu = self.qemu_for(features, qemu)
        from lowp.emulator.aarch64.sve import QEMU_2083
        right = _outer_products_right(vector_bits or 512, qemu)
        return None if right else f"a kernel with SME outer products: {self.identity(qemu)} {QEMU_2083}"

    def intrinsic_backends(self) -> list:
        from lowp.emulator.aarch64 import sve
        from lowp.emulator.aarch64.intrinsics import QemuBackend
        return [QemuBackend(), *sve.backends()]     # one per vector length; they say why when qemu is absent


@lru_cache(maxsize=None)
def _outer_products_right(vector_bits: int, qemu: str | None) -> bool:
    """Whether this qemu computes SMOPA right, once per process (each probe starts qemu on the wrappers' ELF)."""
    from lowp.emulator.aarch64.sve import ScalableQemuBackend
    return ScalableQemuBackend(vector_bits, qemu=qemu).outer_products_right


UNICORN = register(Aarch64Unicorn())
QEMU = register(Aarch64Qemu())
