"""WebAssembly (wasm32: SIMD128 and relaxed SIMD) on wasmtime: a zig-built WASI reactor module, bounds-checked
and run by lowp.emulator.wasm.machine.WasmMachine. A kernel's features may name the relaxed dot's behaviour it is
judged under (relaxed_dot_sdot, _pmaddubsw, _vpdpbusd): the machine runs it in the wasmtime mode that gives it,
or substitutes it at compile time where no mode here does (lowp.emulator.wasm.relaxed)."""
from __future__ import annotations

from lowp.emulator.features import WASM32_FEATURES
from lowp.emulator.targets.base import Target, register


class Wasm32Wasmtime(Target):
    name, arch, isa, backend, preference = "wasm32-wasmtime", "wasm32", "wasm32", "wasmtime", 0

    def unavailable(self) -> str | None:
        from lowp.emulator.wasm.machine import unavailable
        return unavailable()

    def features(self, vector_bits=None, **options) -> frozenset[str]:
        return frozenset(WASM32_FEATURES) if self.unavailable() is None else frozenset()

    def describe(self, vector_bits=None, features=(), **options) -> str:
        from lowp.emulator.wasm import relaxed
        from lowp.emulator.wasm.machine import describe
        behaviour = relaxed.behaviour_of(features)
        mode, _ = relaxed.how(behaviour)
        return describe(mode) + relaxed.describe(behaviour)

    def machine(self, sources, *, flags=(), depends=(), vector_bits=None, features=(), **options):
        from lowp.emulator.wasm import relaxed
        from lowp.emulator.wasm.build import build_for_wasm
        from lowp.emulator.wasm.machine import WasmMachine
        mode, substitute = relaxed.how(relaxed.behaviour_of(features))
        flags = tuple(f for f in flags if f != "-g")      # DWARF is dropped by the bounds-check rewrite anyway
        return WasmMachine(build_for_wasm(*sources, flags=(*flags, *substitute), depends=depends), relaxed=mode,
                           **options)

    def intrinsic_backends(self) -> list:
        from lowp.emulator.wasm.instructions import WasmtimeBackend
        return [WasmtimeBackend()]


WASMTIME = register(Wasm32Wasmtime())
