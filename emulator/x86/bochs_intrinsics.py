"""Bochs as an executor of x86 intrinsics (`lowp isa verify`), beside native.py's NativeX86: the same generated
C wrappers (one per intrinsic, per-function target attributes), built for Bochs (lowp.emulator.x86.bochs) and called
on a batch of registers, so every x86 model is proven on any x86-64 host, the instructions its CPU lacks included.

One backend per Bochs CPU model: Sapphire Rapids runs AVX2, AVX-VNNI and AVX-512 (F/BW/VL/VNNI, ...), Arrow Lake
runs AVX-VNNI-INT8. A batch runs with no callbacks (no budget, no counts: Bochs's full speed) and its registers
cross through the guest's shared memory, so even the exhaustive VPMADDUBSW proof (2^24 pairs a call) is possible.

Only tests and `lowp isa verify` import this; the models never do.
"""
from __future__ import annotations

from functools import cached_property
from typing import Sequence

import numpy as np

from lowp.isa_models.registry import Intrinsic, intrinsics

from lowp.emulator.x86 import bochs
from lowp.emulator import buildcache
from lowp.emulator.native_build import cache_dir
from lowp.emulator.x86.native import PRELUDE, marshal, wrapper_source


class BochsX86:
    """Backend (see lowp.isa_models.verify.backend) running x86 intrinsics on one Bochs CPU model."""
    arch = "x86"

    def __init__(self, model: str = bochs.DEFAULT_MODEL):
        if model not in bochs.MODELS:
            raise ValueError(f"model {model!r}: Bochs CPU models lowp knows: {', '.join(bochs.MODELS)}")
        self.model = model
        self.name = f"bochs ({model})"
        self._compiled = {}

    @cached_property
    def _intrinsics(self) -> list[Intrinsic]:
        return list(intrinsics("x86"))

    @cached_property
    def machine(self):
        source = buildcache.source_file(PRELUDE + "\n".join(map(wrapper_source, self._intrinsics)),
                                        cache_dir() / "src", "x86-wrappers")
        return bochs.BochsMachine(bochs.build_for_bochs(source, flags=("-O2",), compiler="zig"), model=self.model,
                                  budget=None)

    def unavailable(self, intr: Intrinsic) -> str | None:
        reason = bochs.unavailable()
        if reason:
            return reason
        missing = [f for f in intr.features if f not in bochs.MODELS[self.model]]
        if missing:
            return f"Bochs's {self.model} lacks {', '.join(missing)}"
        if intr.mnemonic in bochs.DEFECTS:
            return f"a known Bochs defect: {bochs.DEFECTS[intr.mnemonic]}"
        if not self._wrapped(intr):
            return f"zig's clang cannot emit {', '.join(intr.features)}"
        return None

    def _wrapped(self, intr: Intrinsic) -> bool:
        """Whether the compiler built the wrapper (a stub from the #else branch returns -1 for n = 0)."""
        if intr.name not in self._compiled:
            null = [0] * (len(intr.params) + 1)
            self._compiled[intr.name] = self.machine.call(f"lowp_{intr.name}", 0, *null).ret == 0
        return self._compiled[intr.name]

    def run(self, intr: Intrinsic, args: Sequence) -> np.ndarray:
        reason = self.unavailable(intr)
        if reason:
            raise RuntimeError(f"{intr.name} cannot run on Bochs: {reason}")
        n, buffers, out = marshal(intr, args)
        names = [p.name for p in intr.params] + ["out"]
        result = self.machine.call(f"lowp_{intr.name}", n, *buffers, out, names=["n", *names])
        return result["out"]

    def describe(self) -> str:
        return bochs.describe(self.model)
