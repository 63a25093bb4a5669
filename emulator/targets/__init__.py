"""Targets: where lowp builds and runs code. One object per (architecture, executor): x86-64 native, x86-64 on
Bochs, AArch64 on Unicorn, AArch64 on qemu-user, 32-bit Arm, RISC-V 64 and Hexagon on qemu-user, wasm32 on
wasmtime. A target says how its programs are built
(a build recipe: compiler triple, cpu, flags, runtime, ELF machine), which CPU features it gives a kernel, its
calling convention, the backends that prove instruction models on it (`lowp isa verify`) and how a kernel runs on
it (a machine with `call()`, or natively). kernels/executors.py and lowp isa verify ask the targets instead of
branching over hard-coded facts.

This is the catalogue: it imports every target module by name (the list below), and they register their targets
with lowp.emulator.targets.base, which holds Target and the registry. Adding a target is a module in this folder
that creates a Target subclass instance with `register()`, and its name in TARGET_MODULES. See docs/emulator.md,
"How to add a target".

The host's description and the build recipes live below the targets (lowp.emulator.host, lowp.emulator.build);
the names are re-exported here, where callers have always found them.
"""
from __future__ import annotations

from lowp.emulator.build import Recipe, recipe
from lowp.emulator.host import Host, disabled_features, host, host_arch, proc_cpuinfo, proc_cpuinfo_flags
from lowp.emulator.targets import aarch64, arm, hexagon, riscv64, wasm32, x86_64
from lowp.emulator.targets.base import _TARGETS, Target, register

# Every module that registers targets, imported above for that: all_targets() knows theirs and no others.
TARGET_MODULES = (aarch64, arm, hexagon, riscv64, wasm32, x86_64)

__all__ = ["Host", "Recipe", "Target", "all_targets", "arches", "backends", "choose", "disabled_features", "find",
           "get", "host", "host_arch", "of_arch", "proc_cpuinfo", "proc_cpuinfo_flags", "recipe", "register"]


def all_targets() -> list[Target]:
    """Every registered target, by architecture and then preference."""
    return sorted(_TARGETS.values(), key=lambda t: (t.arch, t.preference))


def get(name: str) -> Target:
    """The target called `name` ('aarch64-qemu'); ValueError naming the known ones."""
    try:
        return _TARGETS[name]
    except KeyError:
        raise ValueError(f"unknown target {name!r}; known: {', '.join(_TARGETS)}") from None


def of_arch(arch: str) -> list[Target]:
    """The targets that run `arch` kernels, in order of preference."""
    found = [t for t in all_targets() if t.arch == arch]
    if not found:
        raise ValueError(f"unknown target {arch!r}; known: {', '.join(arches())}")
    return found


def arches() -> list[str]:
    return list(dict.fromkeys(t.arch for t in all_targets()))


def backends(arch: str) -> list[str]:
    return [t.backend for t in of_arch(arch)]


def find(arch: str, backend: str) -> Target:
    for t in of_arch(arch):
        if t.backend == backend:
            return t
    known = backends(arch)
    where = "natively" if known == ["native"] else "on " + " or ".join(known)
    raise ValueError(f"unknown backend {backend!r}: {arch} kernels run {where}")


def choose(arch: str, features=(), vector_bits: int | None = None, backend: str | None = None) -> Target:
    """The target an `arch` kernel runs on: `backend`'s if given; else the first (by preference) that runs every
    one of its features itself (not on lowp's models only); else the first that runs them at all; else the most
    preferred, which then says why it cannot."""
    if backend is not None:
        return find(arch, backend)
    candidates = of_arch(arch)
    for t in candidates:
        if not set(features) & t.models_only and t.cannot_run(features, vector_bits) is None:
            return t
    for t in candidates:
        if t.cannot_run(features, vector_bits) is None:
            return t
    return candidates[0]
