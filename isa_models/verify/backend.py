"""What `lowp isa verify` needs from an executor of real instructions (the host CPU through cffi, AArch64 under
Unicorn): say whether it can run an intrinsic, and run it over a batch of registers.

Executors live outside the models (lowp.emulator.x86.native for x86, lowp.emulator for AArch64); the models
never import them.
"""
from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np

from lowp.isa_models.registry import Intrinsic


class Backend(Protocol):
    name: str          # 'native', 'unicorn', 'qemu', ...
    arch: str          # the registry arch it executes: 'x86' or 'aarch64'

    def unavailable(self, intr: Intrinsic) -> str | None:
        """None when `intr` can run here; otherwise why not (CPU lacks avx_vnni_int8, compiler lacks it...)."""

    def run(self, intr: Intrinsic, args: Sequence) -> np.ndarray:
        """Execute `intr` once per register of a batch and return the result lanes, shape (N, result lanes).

        args follow intr.params: 'vec' -> array (N, lanes) of the param's dtype; 'mask' -> uint64 array (N,);
        'imm' -> a Python int, the same for the whole batch (immediates are compile-time constants in C)."""

    def describe(self) -> str:
        """What executed: CPU model and flags, or emulator and version."""
