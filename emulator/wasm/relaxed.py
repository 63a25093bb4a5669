"""Which behaviour of the relaxed dot product an engine mode gives, and how a kernel is made to run under a
behaviour no mode gives here (relaxed_dot.h, substituted at compile time).

i32x4.relaxed_dot_i8x16_i7x16_add_s is implementation-defined where the second operand's lanes have the high bit
set (WebAssembly Core Specification 3.0, irelaxed_dot_mul: signed x signed or signed x unsigned products; the
relaxed-simd proposal's Overview.md: the 16-bit pair sums may saturate). The spec test relaxed_dot_product.wast
names four answers for a = -128, b = 0x81 (four lanes), c = 1; PROBE_ANSWERS maps each to lowp's name (the
models in lowp.isa_models.wasm name the same behaviours). XNNPACK asks the engine the same question at start-up
(src/configs/hardware-config.c, google/XNNPACK @75db3c0: use_wasm_sdot, use_wasm_usdot) and dispatches wasmsdot
and wasmusdot kernels on its answer.
"""
from __future__ import annotations

from functools import lru_cache

from lowp.emulator.wasm.build import RELAXED_DOT_HEADER

BEHAVIOURS = ("sdot", "pmaddubsw", "vpdpbusd")
PROBE_ANSWERS = {65025: "sdot", -65535: "pmaddubsw", -66047: "vpdpbusd", 66049: "unsigned x unsigned"}
FEATURE_PREFIX = "relaxed_dot_"

PROBE = """(module (memory (export "memory") 1)
  (func (export "dot") (result i32)
    (i32x4.extract_lane 0 (i32x4.relaxed_dot_i8x16_i7x16_add_s
      (v128.const i8x16 -128 -128 -128 -128 0 0 0 0 0 0 0 0 0 0 0 0)
      (v128.const i8x16 0x81 0x81 0x81 0x81 0 0 0 0 0 0 0 0 0 0 0 0)
      (v128.const i32x4 1 0 0 0)))))"""


@lru_cache(maxsize=None)
def engine_behaviour(relaxed: str) -> str:
    """The relaxed dot's behaviour wasmtime gives in mode `relaxed` on this host (its answer to the probe)."""
    import wasmtime

    from lowp.emulator.wasm.machine import engine
    store = wasmtime.Store(engine(relaxed))
    store.set_fuel(10_000)
    instance = wasmtime.Instance(store, wasmtime.Module(store.engine, wasmtime.wat2wasm(PROBE)), [])
    answer = int(instance.exports(store)["dot"](store))
    return PROBE_ANSWERS.get(answer, f"unknown ({answer})")


def behaviour_of(features) -> str | None:
    """The relaxed-dot behaviour a kernel's features name (relaxed_dot_<behaviour>), or None."""
    named = [f[len(FEATURE_PREFIX):] for f in features if f.startswith(FEATURE_PREFIX)]
    if len(named) > 1:
        raise ValueError(f"features name {len(named)} relaxed-dot behaviours ({', '.join(named)}): one at most")
    return named[0] if named else None


def how(behaviour: str | None) -> tuple[str, tuple[str, ...]]:
    """(the engine mode, the extra compile flags) that make a kernel run under `behaviour`: the mode whose own
    relaxed dot behaves so (deterministic first), else the deterministic mode with the behaviour substituted at
    compile time (relaxed_dot.h)."""
    if behaviour is None:
        return "deterministic", ()
    if behaviour not in BEHAVIOURS:
        raise ValueError(f"relaxed dot behaviour {behaviour!r}: expected one of {', '.join(BEHAVIOURS)}")
    for mode in ("deterministic", "native"):
        if engine_behaviour(mode) == behaviour:
            return mode, ()
    return "deterministic", ("-include", str(RELAXED_DOT_HEADER), f"-DLOWP_RELAXED_DOT_{behaviour.upper()}")


def describe(behaviour: str | None) -> str:
    """'relaxed dot: sdot (wasmtime's own, deterministic mode)' or '... substituted at compile time ...'."""
    if behaviour is None:
        return ""
    mode, flags = how(behaviour)
    if flags:
        return f"; relaxed dot: {behaviour} (substituted: plain SIMD128 at compile time, emulator/wasm/relaxed_dot.h)"
    return f"; relaxed dot: {behaviour} (wasmtime's own, {mode} mode)"
