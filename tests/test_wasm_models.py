"""The WebAssembly SIMD128 and relaxed SIMD models (lowp.isa_models.wasm) against wasmtime: every instruction on
every combination of its lane types' extremes and on random registers (lowp.emulator.wasm.instructions runs the
instruction itself); the relaxed dot products under each behaviour: sdot against wasmtime's deterministic mode,
pmaddubsw against its native mode where this host's lowering gives it, vpdpbusd against lowp's plain-SIMD128
substitute (emulator/wasm/relaxed_dot.h) run on wasmtime. Skips with the reason without wasmtime."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from lowp.emulator.wasm.machine import unavailable
from lowp.isa_models.registry import instructions
from lowp.isa_models.wasm import simd128 as w

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))

RNG = np.random.default_rng(34)
WASM = [i for i in instructions() if i.arch == "wasm32"]


def _lanes(dtype, n, rng=RNG):
    """n random registers of dtype lanes, a third of the lanes at the type's extremes; floats finite (wasm leaves
    NaN payloads nondeterministic), a sixth of them at ties (x.5) and near int32's edge."""
    dtype = np.dtype(dtype)
    lanes = 16 // dtype.itemsize
    if dtype.kind == "f":
        x = rng.normal(0, 1e4, (n, lanes)).astype(np.float32)
        ties = rng.random((n, lanes)) < 1 / 6
        x[ties] = rng.integers(-1000, 1000, ties.sum()) + np.float32(0.5)
        edge = rng.random((n, lanes)) < 1 / 12
        x[edge] = rng.choice(np.array([2.0 ** 31, -2.0 ** 31, 2.0 ** 31 - 128, 3e9, -3e9], np.float32), edge.sum())
        return x
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (n, lanes), endpoint=True, dtype=np.int64)
    extreme = rng.random((n, lanes)) < 1 / 3
    x[extreme] = rng.choice([info.min, info.min + 1, -1 if info.min else 1, 0, info.max - 1, info.max], extreme.sum())
    return x.astype(dtype)


def _corners(params) -> list[np.ndarray]:
    """Every combination of each operand's extremes, one register per combination (all lanes alike)."""
    values = []
    for p in params:
        if p.dtype.kind == "f":
            values.append(np.array([0.0, -0.0, 0.5, -2.5, 2.0 ** 31, -2.0 ** 31, 1e38], np.float32))
        else:
            info = np.iinfo(p.dtype)
            values.append(np.array(sorted({info.min, info.min + 1, -1 if info.min else 1, 0, 1, info.max}),
                                   p.dtype))
    rows = list(itertools.product(*values))
    return [np.array([[r[k]] * p.lanes for r in rows], p.dtype) for k, p in enumerate(params)]


def _operands(intr, n=2048):
    corners = _corners(intr.params)
    return [np.concatenate([c, _lanes(p.dtype, n)]) for c, p in zip(corners, intr.params)]


DETERMINISTIC = [i for i in WASM if "relaxed" not in i.mnemonic]


@pytest.mark.parametrize("inst", DETERMINISTIC, ids=[i.mnemonic for i in DETERMINISTIC])
def test_model_matches_wasmtime(inst):
    from lowp.emulator.wasm.instructions import run
    intr = inst.intrinsics[0]
    ops = _operands(intr)
    want = inst.model(*ops)
    got = run(inst.mnemonic, ops, want.dtype)
    if want.dtype.kind == "f":
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), inst.mnemonic
    else:
        bad = np.flatnonzero((got != want).any(axis=-1))
        assert not bad.size, f"{inst.mnemonic}: first mismatch at {[o[bad[0]] for o in ops]}: wasmtime " \
                             f"{got[bad[0]]}, model {want[bad[0]]}"


def test_the_models_cover_the_instructions_xnnpacks_qs8_kernels_use():
    names = {i.mnemonic for i in WASM}
    for needed in ("i16x8.extend_low_i8x16_s", "i16x8.extend_high_i8x16_s", "i32x4.dot_i16x8_s",
                   "i16x8.extmul_low_i8x16_s", "i32x4.extadd_pairwise_i16x8_s", "i16x8.narrow_i32x4_s",
                   "i8x16.narrow_i16x8_s", "f32x4.convert_i32x4_s", "f32x4.nearest", "i32x4.max_s", "i8x16.min_s",
                   "i8x16.swizzle", "i32x4.relaxed_dot_i8x16_i7x16_add_s", "i16x8.relaxed_dot_i8x16_i7x16_s"):
        assert needed in names


def _relaxed_operands(n=3000):
    a, b = _lanes(np.int8, n), _lanes(np.int8, n)
    a[:4], b[:4] = -128, np.int8(-127)           # the spec test's corner: -66047 / -65535 / 65025 by behaviour
    return a, b, _lanes(np.int32, n)


@pytest.mark.parametrize("mode", ["deterministic", "native"])
def test_relaxed_dot_add_matches_the_engines_behaviour(mode):
    from lowp.emulator.wasm.instructions import run
    from lowp.emulator.wasm.relaxed import engine_behaviour
    behaviour = engine_behaviour(mode)
    if behaviour not in w.RELAXED_DOT:
        pytest.skip(f"wasmtime's {mode} mode gives {behaviour} here, a behaviour lowp does not model")
    a, b, c = _relaxed_operands()
    got = run("i32x4.relaxed_dot_i8x16_i7x16_add_s", [a, b, c], np.int32, relaxed=mode)
    assert np.array_equal(got, w.i32x4_relaxed_dot_i8x16_i7x16_add_s(a, b, c, behaviour))
    others = [x for x in w.RELAXED_DOT if x != behaviour]
    assert all(not np.array_equal(got, w.i32x4_relaxed_dot_i8x16_i7x16_add_s(a, b, c, x)) for x in others)
    if mode == "deterministic":
        assert behaviour == "sdot"                   # the deterministic profile is signed x signed (Core 3.0)


@pytest.mark.parametrize("mode", ["deterministic", "native"])
def test_relaxed_dot_i16_matches_the_engines_behaviour(mode):
    from lowp.emulator.wasm.instructions import run
    from lowp.emulator.wasm.relaxed import engine_behaviour
    behaviour = engine_behaviour(mode)
    if behaviour not in ("sdot", "pmaddubsw"):
        pytest.skip(f"wasmtime's {mode} mode gives {behaviour} here")
    a, b, _ = _relaxed_operands()
    got = run("i16x8.relaxed_dot_i8x16_i7x16_s", [a, b], np.int16, relaxed=mode)
    assert np.array_equal(got, w.i16x8_relaxed_dot_i8x16_i7x16_s(a, b, behaviour))


SUBSTITUTE = """
#include <stdint.h>
#include <wasm_simd128.h>
void dots(const int8_t *a, const int8_t *b, const int32_t *c, int32_t *out, long n) {
    for (long i = 0; i < n; i++)
        wasm_v128_store(out + 4 * i, wasm_i32x4_relaxed_dot_i8x16_i7x16_add(
            wasm_v128_load(a + 16 * i), wasm_v128_load(b + 16 * i), wasm_v128_load(c + 4 * i)));
}
"""


@pytest.mark.parametrize("behaviour", sorted(w.RELAXED_DOT))
def test_the_compile_time_substitutes_compute_each_behaviour(behaviour, tmp_path):
    """relaxed_dot.h (what the wasm target compiles in where no engine mode gives a behaviour) against the model."""
    from lowp.emulator.wasm.build import RELAXED_DOT_HEADER, build_for_wasm
    from lowp.emulator.wasm.machine import WasmMachine
    source = tmp_path / "dots.c"
    source.write_text(SUBSTITUTE)
    binary = build_for_wasm(source, flags=("-include", str(RELAXED_DOT_HEADER),
                                           f"-DLOWP_RELAXED_DOT_{behaviour.upper()}"))
    a, b, c = _relaxed_operands(500)
    n = len(a)
    r = WasmMachine(binary).call("dots", a, b, c, np.zeros((n, 4), np.int32), n, names=["a", "b", "c", "out", "n"])
    assert np.array_equal(r["out"], w.i32x4_relaxed_dot_i8x16_i7x16_add_s(a, b, c, behaviour))


def test_a_relaxed_dot_without_a_behaviour_is_implementation_defined_only_where_it_is():
    a, b, c = _relaxed_operands(50)
    with pytest.raises(w.ImplementationDefined, match="behaviour="):
        w.i32x4_relaxed_dot_i8x16_i7x16_add_s(a, b, c)
    low = np.abs(b.astype(np.int16)).clip(0, 127).astype(np.int8)             # b < 128: one answer
    assert np.array_equal(w.i32x4_relaxed_dot_i8x16_i7x16_add_s(a, low, c),
                          w.i32x4_relaxed_dot_i8x16_i7x16_add_s(a, low, c, "vpdpbusd"))
