"""32-bit Arm (AArch32, ARM state, EABI hard float) on x86-64 under qemu-arm: a static Linux program (zig,
linux_runtime_arm.c, compiler-rt) with lowp's guest driver (qemu_driver_arm.c, AAPCS with the VFP variant). qemu's
-cpu gates the features (max: ARMv8 AArch32 with the dot product; cortex-a15 and cortex-a7: ARMv7 NEON; arm1176:
ARMv6 SIMD32 and VFPv2), and the build's -mcpu follows the kernel's features, so that neither the compiler nor the
assembler reaches past what the kernel claims."""
from __future__ import annotations

from lowp.emulator.build import ARM_LINUX as LINUX
from lowp.emulator.targets.base import register
from lowp.emulator.targets.qemu_user import QemuUserTarget

# zig's -mcpu for a kernel, by the first feature it lists that a row names (most demanding first): the CPUs XNNPACK
# tunes for and builds its AArch32 flavours with (CMakeLists.txt L1046-1066: -march=armv6 for armsimd32,
# armv7-a+neon for neon, armv8-a for neonv8, armv8.2-a+dotprod+fp16 for neondot and the assembly).
BUILD_CPUS = (
    (("asimdhp", "fphp"), "cortex_a55+fullfp16"),                # ARMv8.2-A half-precision arithmetic (optional)
    (("asimddp", "i8mm"), "cortex_a55"),                         # ARMv8.2-A: dot product
    (("armv8", "crc32", "aes", "sha2", "pmull"), "cortex_a53"),  # ARMv8-A AArch32
    (("neon", "armv7", "vfpv4", "vfpv3", "vfpd32", "idiva"), "cortex_a7"),   # ARMv7-A, NEON + VFPv4
    (("armv6", "edsp", "vfp"), "arm1176jzf_s+dsp"),               # ARMv6 SIMD32 (clang wants +dsp for __qsub)
)


def build_cpu(features=()) -> str:
    """zig's -mcpu for a kernel with `features`: the first row of BUILD_CPUS (most demanding first) naming one of
    them, whose CPU has that row's features and every row's below; ARMv7-A with NEON (the recipe's) for none."""
    wanted = set(features)
    for names, cpu in BUILD_CPUS:
        if wanted & set(names):
            return cpu
    return LINUX.cpu


class ArmQemu(QemuUserTarget):
    """Kernels run through lowp.emulator.qemu's ARM guest; features are the AT_HWCAP/AT_HWCAP2 names and the
    -cpu's architecture version (armv6, armv7, armv8)."""
    name, arch, isa, guest_name = "arm-qemu", "arm", "arm", "arm"
    recipe = LINUX

    def machine(self, sources, *, flags=(), depends=(), vector_bits=None, features=(), **options):
        from lowp.emulator.qemu import QemuMachine, build_for_qemu
        options["cpu"] = self.cpu(vector_bits, options.get("cpu"))
        binary = build_for_qemu(*sources, flags=flags, depends=depends, guest=self.guest, cpu=build_cpu(features))
        return QemuMachine(binary, guest=self.guest, **options)

    def intrinsic_backends(self) -> list:
        from lowp.emulator.arm32.intrinsics import ArmQemuBackend
        return [ArmQemuBackend()]


QEMU = register(ArmQemu())
