"""One WebAssembly instruction run on wasmtime over a batch of v128 operands: the executor the wasm instruction
models (lowp.isa_models.wasm) are proven against. The module is written in the text format (wasmtime.wat2wasm):
a loop that loads each operand's v128, applies the instruction and stores the result, so a batch of thousands of
registers is one call."""
from __future__ import annotations

import atexit
from functools import lru_cache

import numpy as np

from lowp.emulator.wasm import traps
from lowp.emulator.wasm.machine import engine

STRIDE = 1 << 20      # bytes between the operands' arrays (and the result's) in linear memory: 65536 registers


def _wat(instruction: str, arity: int) -> str:
    loads = "".join(f"(v128.load (i32.add (i32.const {k * STRIDE}) (local.get $o)))" for k in range(arity))
    return f"""(module (memory (export "memory") {(arity + 1) * STRIDE // 65536})
  (func (export "run") (param $n i32) (local $o i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $o) (i32.mul (local.get $n) (i32.const 16))))
      (v128.store (i32.add (i32.const {arity * STRIDE}) (local.get $o)) ({instruction} {loads}))
      (local.set $o (i32.add (local.get $o) (i32.const 16)))
      (br $next)))))"""


@lru_cache(maxsize=None)
def _module(instruction: str, arity: int, relaxed: str):
    import wasmtime
    return wasmtime.Module(engine(relaxed), wasmtime.wat2wasm(_wat(instruction, arity)))


atexit.register(_module.cache_clear)     # before wasmtime's teardown (see machine._release_modules)


def run(instruction: str, operands, result_dtype, *, relaxed: str = "deterministic") -> np.ndarray:
    """`instruction` (its text-format name, e.g. 'i32x4.dot_i16x8_s') on each row of the operands (arrays of
    (n, lanes), 16 bytes a row), under wasmtime in mode `relaxed`; the results as (n, lanes) of result_dtype."""
    import wasmtime
    operands = [np.ascontiguousarray(x) for x in operands]
    n = operands[0].shape[0]
    if n * 16 > STRIDE:
        raise ValueError(f"{n} registers: at most {STRIDE // 16} a batch")
    store = wasmtime.Store(engine(relaxed))
    store.set_fuel(1 << 40)
    traps.reinstate()
    instance = wasmtime.Instance(store, _module(instruction, len(operands), relaxed), [])
    memory = instance.exports(store)["memory"]
    for k, x in enumerate(operands):
        memory.write(store, x.tobytes(), k * STRIDE)
    instance.exports(store)["run"](store, n)
    raw = memory.read(store, len(operands) * STRIDE, len(operands) * STRIDE + 16 * n)
    return np.frombuffer(raw, result_dtype).reshape(n, -1).copy()


class WasmtimeBackend:
    """`lowp isa verify`'s executor of the wasm32 models (lowp.isa_models.verify.backend.Backend): each intrinsic's
    instruction run by run() in wasmtime's deterministic mode. The relaxed dot products (implementation-defined) and
    the float instructions are proven by tests/test_wasm_models.py (each behaviour against the engine mode or lowp's
    substitute that gives it; floats on their own corners)."""
    name, arch = "wasmtime", "wasm32"

    def unavailable(self, intr) -> str | None:
        from lowp.emulator.wasm.machine import unavailable
        if "relaxed" in intr.mnemonic:
            return "implementation-defined: each behaviour is proven by tests/test_wasm_models.py"
        if any(p.dtype.kind == "f" for p in (*intr.params, intr.result)):
            return "float lanes (the proof's corners are integer extremes): proven by tests/test_wasm_models.py"
        return unavailable()

    def run(self, intr, args) -> np.ndarray:
        return run(intr.mnemonic, [np.asarray(a) for a in args], intr.result.dtype)

    def describe(self) -> str:
        from lowp.emulator.wasm.machine import describe
        return describe("deterministic")
