"""Registry entries for the WebAssembly models: the C spellings of clang's wasm_simd128.h (the header XNNPACK's
wasm kernels include), each with the lane types the instruction reads. A v128_t is untyped in C; an intrinsic
here takes the interpretation its instruction gives the operand (wasm_i8x16_min: s8 lanes)."""
from __future__ import annotations

import re

from lowp.isa_models.lanes import DTYPES
from lowp.isa_models.registry import Instruction, Intrinsic, Param, add_instruction, add_intrinsic
from lowp.isa_models.wasm import simd128 as w

SIMD, RELAXED = ("simd128",), ("simd128", "relaxed_simd")
EXTENSION = {SIMD: "SIMD128", RELAXED: "relaxed-simd"}
CITATION = "WebAssembly Core Specification (2.0; 3.0 for relaxed SIMD), 4.4.3 Vector Instructions"
WRAP, SAT, EXACT = "wraps mod 2^{}", "saturates to {}", "exact (cannot overflow)"

# intrinsic, model, features, operands (name:type x lanes), result, operand types, overflow
TABLE = (
    ("wasm_i16x8_extend_low_i8x16", w.i16x8_extend_low_i8x16_s, SIMD, ["a:s8x16"], "s16x8", "s8 -> s16", EXACT),
    ("wasm_i16x8_extend_high_i8x16", w.i16x8_extend_high_i8x16_s, SIMD, ["a:s8x16"], "s16x8", "s8 -> s16", EXACT),
    ("wasm_u16x8_extend_low_u8x16", w.i16x8_extend_low_i8x16_u, SIMD, ["a:u8x16"], "s16x8", "u8 -> s16", EXACT),
    ("wasm_i16x8_extmul_low_i8x16", w.i16x8_extmul_low_i8x16_s, SIMD, ["a:s8x16", "b:s8x16"], "s16x8",
     "s8 x s8 -> s16", EXACT),
    ("wasm_i16x8_extmul_high_i8x16", w.i16x8_extmul_high_i8x16_s, SIMD, ["a:s8x16", "b:s8x16"], "s16x8",
     "s8 x s8 -> s16", EXACT),
    ("wasm_i16x8_extadd_pairwise_i8x16", w.i16x8_extadd_pairwise_i8x16_s, SIMD, ["a:s8x16"], "s16x8",
     "s8 pairs -> s16", EXACT),
    ("wasm_i32x4_extadd_pairwise_i16x8", w.i32x4_extadd_pairwise_i16x8_s, SIMD, ["a:s16x8"], "s32x4",
     "s16 pairs -> s32", EXACT),
    ("wasm_i32x4_dot_i16x8", w.i32x4_dot_i16x8_s, SIMD, ["a:s16x8", "b:s16x8"], "s32x4", "s16 x s16 pairs -> s32",
     WRAP.format(32) + " (only -32768 * -32768 * 2)"),
    ("wasm_i16x8_narrow_i32x4", w.i16x8_narrow_i32x4_s, SIMD, ["a:s32x4", "b:s32x4"], "s16x8", "s32 -> s16",
     SAT.format("s16")),
    ("wasm_i8x16_narrow_i16x8", w.i8x16_narrow_i16x8_s, SIMD, ["a:s16x8", "b:s16x8"], "s8x16", "s16 -> s8",
     SAT.format("s8")),
    ("wasm_u8x16_narrow_i16x8", w.i8x16_narrow_i16x8_u, SIMD, ["a:s16x8", "b:s16x8"], "u8x16", "s16 -> u8",
     SAT.format("u8")),
    ("wasm_i16x8_add_sat", w.i16x8_add_sat_s, SIMD, ["a:s16x8", "b:s16x8"], "s16x8", "s16 + s16 -> s16",
     SAT.format("s16")),
    ("wasm_i32x4_add", w.i32x4_add, SIMD, ["a:s32x4", "b:s32x4"], "s32x4", "s32 + s32 -> s32", WRAP.format(32)),
    ("wasm_i32x4_sub", w.i32x4_sub, SIMD, ["a:s32x4", "b:s32x4"], "s32x4", "s32 - s32 -> s32", WRAP.format(32)),
    ("wasm_i32x4_max", w.i32x4_max_s, SIMD, ["a:s32x4", "b:s32x4"], "s32x4", "s32 -> s32", EXACT),
    ("wasm_i32x4_min", w.i32x4_min_s, SIMD, ["a:s32x4", "b:s32x4"], "s32x4", "s32 -> s32", EXACT),
    ("wasm_i8x16_min", w.i8x16_min_s, SIMD, ["a:s8x16", "b:s8x16"], "s8x16", "s8 -> s8", EXACT),
    ("wasm_i8x16_max", w.i8x16_max_s, SIMD, ["a:s8x16", "b:s8x16"], "s8x16", "s8 -> s8", EXACT),
    ("wasm_i8x16_swizzle", w.i8x16_swizzle, SIMD, ["a:s8x16", "s:u8x16"], "s8x16", "s8 by u8 index -> s8",
     "indices >= 16 give 0"),
    ("wasm_f32x4_convert_i32x4", w.f32x4_convert_i32x4_s, SIMD, ["a:s32x4"], "f32x4", "s32 -> f32",
     "rounds to nearest even"),
    ("wasm_f32x4_mul", w.f32x4_mul, SIMD, ["a:f32x4", "b:f32x4"], "f32x4", "f32 x f32 -> f32",
     "IEEE binary32, round to nearest even"),
    ("wasm_f32x4_add", w.f32x4_add, SIMD, ["a:f32x4", "b:f32x4"], "f32x4", "f32 + f32 -> f32",
     "IEEE binary32, round to nearest even"),
    ("wasm_f32x4_nearest", w.f32x4_nearest, SIMD, ["a:f32x4"], "f32x4", "f32 -> f32", "ties to even"),
    ("wasm_i32x4_trunc_sat_f32x4", w.i32x4_trunc_sat_f32x4_s, SIMD, ["a:f32x4"], "s32x4", "f32 -> s32",
     SAT.format("s32") + ", NaN -> 0"),
    ("wasm_i16x8_relaxed_dot_i8x16_i7x16", w.i16x8_relaxed_dot_i8x16_i7x16_s, RELAXED, ["a:s8x16", "b:s8x16"],
     "s16x8", "s8 x s7 (or u8) pairs -> s16", "implementation-defined where b >= 128: wraps (sdot) or saturates "
     "(pmaddubsw)"),
    ("wasm_i32x4_relaxed_dot_i8x16_i7x16_add", w.i32x4_relaxed_dot_i8x16_i7x16_add_s, RELAXED,
     ["a:s8x16", "b:s8x16", "c:s32x4"], "s32x4", "s8 x s7 (or u8) (4 per lane) + s32 -> s32",
     WRAP.format(32) + "; implementation-defined where b >= 128 (sdot, pmaddubsw, vpdpbusd)"),
)


def _p(spec: str) -> Param:
    name, kind = spec.split(":")
    t, lanes = kind.split("x")
    return Param(name, "vec", DTYPES[t], int(lanes))


def _register() -> None:
    for name, model, features, params, result, operands, overflow in TABLE:
        mnemonic = re.split(r"[,:]", model.__doc__)[0].strip()
        inst = add_instruction(Instruction(
            mnemonic=mnemonic, arch="wasm32", extension=EXTENSION[features], operands=operands, overflow=overflow,
            pseudocode=mnemonic, citation=CITATION, model=model))
        add_intrinsic(Intrinsic(name, inst, 128, features, "wasm", tuple(_p(p) for p in params), _p("r:" + result),
                                lambda *args, m=model: m(*args)))


_register()
