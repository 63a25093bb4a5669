"""CPU feature names a kernel entry may list in `features`, and the features this host can run per target.

Names are the ones Linux prints in /proc/cpuinfo: the x86 "flags" line (arch/x86/include/asm/cpufeatures.h) and the
AArch64 "Features" line (HWCAP and HWCAP2 names, arch/arm64/kernel/cpuinfo.c). A name outside these lists is a
typo or a flag no CPU reports, and the kernel schema rejects it (with did-you-mean) instead of letting the kernel
be SKIPPED forever for want of a feature that cannot exist.

The tables (and their sources) are the emulator's, lowp.emulator.features, and which names this host knows is
lowp.emulator.host's: the emulator needs them too (qemu's AT_HWCAP bits, LOWP_DISABLE_FEATURES) and never imports
lowp.kernels. This module is the kernel side of them, under the names the schema and kernel authors use.
"""
from __future__ import annotations

from lowp.emulator.features import (AARCH64_HWCAPS, COMPILER_NAMES, RISCV64_EXTENSIONS, TARGETS,  # noqa: F401
                                    X86_LINUX_FLAGS, did_you_mean)
from lowp.emulator.host import disabled_features, host_arch, known_features, proc_cpuinfo_flags  # noqa: F401
from lowp.emulator.targets import of_arch
from lowp.emulator.targets.aarch64 import UNICORN_FEATURES

# What Unicorn runs for an AArch64 kernel: the Unicorn target's fact (lowp.emulator.targets.aarch64).
EMULATED_AARCH64 = UNICORN_FEATURES


def host_features(target: str) -> frozenset[str]:
    """The features kernels of `target` can use here (on the target lowp prefers for them: the CPU for x86-64,
    Unicorn for AArch64), less those in LOWP_DISABLE_FEATURES."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; known: {', '.join(TARGETS)}")
    return of_arch(target)[0].features() - disabled_features()


def suggest_feature(name: str, target: str) -> list[str]:
    """did_you_mean for a CPU feature of `target`, compiler spellings included ('dotprod' -> 'asimddp')."""
    return did_you_mean(name, known_features(target), aliases=COMPILER_NAMES.get(target))
