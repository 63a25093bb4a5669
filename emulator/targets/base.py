"""What a target is (Target) and where targets are registered (register, the registry dict): the module every
target module imports. The catalogue that asks the registry (lowp.emulator.targets: all_targets, choose, ...)
imports the target modules; they import this, never the catalogue, so registering one is not a circle.
"""
from __future__ import annotations

from lowp.emulator.build import Recipe
from lowp.emulator.host import disabled_features


class Target:
    """One place lowp runs kernels. Subclasses set the attributes and override what differs."""
    name: str                     # 'aarch64-qemu'
    arch: str                     # the kernels' `target` field: 'x86-64', 'aarch64', 'riscv64'
    isa: str                      # the instruction registry's arch: 'x86', 'aarch64', 'riscv64'
    backend: str                  # what a report row names: 'native', 'unicorn', 'qemu'
    preference: int = 0           # lower first among one arch's targets
    recipe: Recipe | None = None  # None: built by the host's own compiler (native)
    convention = None             # the calling convention object its machine uses
    models_only: frozenset[str] = frozenset()   # features it runs only on lowp's models (not proof of a kernel)
    defects: dict = {}            # mnemonic -> how this executor runs it wrongly (a kernel's row says so)

    def unavailable(self) -> str | None:
        """Why this target cannot run anything here (and how to fix it), or None."""
        return None

    def features(self, vector_bits: int | None = None, **options) -> frozenset[str]:
        """The CPU features (Linux names) a kernel can use here, before LOWP_DISABLE_FEATURES. options: the
        machine's (qemu: `cpu`, `qemu`), where they change the answer."""
        raise NotImplementedError

    def cannot_run(self, features=(), vector_bits: int | None = None, **options) -> str | None:
        """Why a kernel needing `features` (at `vector_bits`) cannot run here, or None."""
        reason = self.unavailable()
        if reason:
            return reason
        have = self.features(vector_bits, **options) - disabled_features()
        missing = [f for f in features if f not in have]
        return f"{self.describe(vector_bits, **options)} lacks {', '.join(missing)}" if missing else None

    def describe(self, vector_bits: int | None = None, **options) -> str:
        return self.name

    def known_defect(self, features=(), vector_bits: int | None = None, **options) -> str | None:
        """Why this target, though it runs `features`, runs one of them wrongly here (so it cannot judge a kernel
        using it), or None. Not part of cannot_run: choose() still picks this target, whose row then says why."""
        return None

    def machine(self, sources, *, flags=(), depends=(), vector_bits: int | None = None, features=(), **options):
        """A machine with call() that runs functions of these sources (emulated targets)."""
        raise NotImplementedError(f"{self.name} runs kernels natively, not on a machine")

    def intrinsic_backends(self) -> list:
        """The executors `lowp isa verify` proves this ISA's models against here (each says when it cannot)."""
        return []


_TARGETS: dict[str, Target] = {}       # name -> target, in the order the catalogue imports their modules


def register(target: Target) -> Target:
    """Add `target` to the registry (under its name), for the catalogue to find; returns it."""
    _TARGETS[target.name] = target
    return target
