"""WebAssembly SIMD128 and relaxed SIMD: the integer and float instructions XNNPACK's wasm int8 GEMM kernels are
made of (src/qs8-gemm/*wasm*.c.in and src/qs8-qc8w-gemm/gen/*wasm*.c of google/XNNPACK @75db3c0), one function
each, mirroring the WebAssembly Core Specification's execution rules (section 4.4.3 "Vector Instructions" and the
numerics of 4.3). Operands are numpy arrays of lanes (the last axis; leading axes are a batch of v128 values) of
the lane type the instruction reads: a v128 is untyped in wasm, the model takes the interpretation the instruction
gives it. Nothing is cast silently. numpy only: no wasm kernel runs on the bit-vector backend (`lowp prove`).

The relaxed dot products are implementation-defined: `behaviour` names the result the caller wants
(RELAXED_DOT), and without one the model raises ImplementationDefined (lowp.isa_models.fixedpoint's, as every
implementation-defined corner does) where the behaviours differ, never picking one silently.

Citations: "Core 2.0 4.4.3" is WebAssembly Core Specification 2.0 (W3C, 2022), section 4.4.3; "Core 3.0" the 3.0
draft that adds relaxed SIMD (WebAssembly/spec document/core/exec/instructions.rst and numerics.rst,
op-irelaxed_dot_mul).
"""
from __future__ import annotations

import numpy as np

from lowp.isa_models.fixedpoint import ImplementationDefined
from lowp.isa_models.lanes import numpy_only, operand, same_register, saturate, wrap

V128 = (128,)

# The behaviours of the relaxed dot product real engines give (WebAssembly/spec test/core/relaxed-simd/
# relaxed_dot_product.wast accepts each; docs/research: wasmtime 50 and V8 measured).
RELAXED_DOT = {
    "sdot": "signed x signed, exact pair sums (the deterministic profile; ARM SDOT; wasmtime deterministic)",
    "pmaddubsw": "signed x unsigned, each 16-bit pair sum saturated (x86 PMADDUBSW + PMADDWD; wasmtime native on "
                 "x86, V8 without AVX-VNNI)",
    "vpdpbusd": "signed x unsigned, exact (x86 VPDPBUSD: V8 with AVX-VNNI); the i32x4 form only",
}


NUMPY_ONLY = "no symbolic wasm executor: lowp prove does not run wasm kernels"


def _v(x, name, dtype):
    numpy_only("lowp.isa_models.wasm", x, why=NUMPY_ONLY)
    return operand(x, name, dtype, widths=V128)


def _i(x):
    return np.asarray(x).astype(np.int64)


# ---- widening ------------------------------------------------------------------------------------------------
def i16x8_extend_low_i8x16_s(a):
    """i16x8.extend_low_i8x16_s: the low 8 lanes sign-extended to 16 bits.
    Core 2.0 4.4.3 (vcvtop extend_low, extend_s)."""
    a = _v(a, "a", np.int8)
    return a[..., :8].astype(np.int16)


def i16x8_extend_high_i8x16_s(a):
    """i16x8.extend_high_i8x16_s: the high 8 lanes sign-extended to 16 bits.
    Core 2.0 4.4.3 (vcvtop extend_high, extend_s)."""
    a = _v(a, "a", np.int8)
    return a[..., 8:].astype(np.int16)


def i16x8_extend_low_i8x16_u(a):
    """i16x8.extend_low_i8x16_u: the low 8 lanes zero-extended to 16 bits.
    Core 2.0 4.4.3 (vcvtop extend_low, extend_u)."""
    a = _v(a, "a", np.uint8)
    return a[..., :8].astype(np.int16)


def i16x8_extmul_low_i8x16_s(a, b):
    """i16x8.extmul_low_i8x16_s: the low 8 lanes' products, exact in 16 bits.
    Core 2.0 4.4.3 (vextmul: imul of the sign-extended halves)."""
    a, b = _v(a, "a", np.int8), _v(b, "b", np.int8)
    return (_i(a[..., :8]) * _i(b[..., :8])).astype(np.int16)


def i16x8_extmul_high_i8x16_s(a, b):
    """i16x8.extmul_high_i8x16_s: the high 8 lanes' products, exact in 16 bits.
    Core 2.0 4.4.3 (vextmul: imul of the sign-extended halves)."""
    a, b = _v(a, "a", np.int8), _v(b, "b", np.int8)
    return (_i(a[..., 8:]) * _i(b[..., 8:])).astype(np.int16)


def i16x8_extadd_pairwise_i8x16_s(a):
    """i16x8.extadd_pairwise_i8x16_s: adjacent lanes sign-extended and added, exact.
    Core 2.0 4.4.3 (vextunop extadd_pairwise)."""
    a = _i(_v(a, "a", np.int8))
    return (a[..., 0::2] + a[..., 1::2]).astype(np.int16)


def i32x4_extadd_pairwise_i16x8_s(a):
    """i32x4.extadd_pairwise_i16x8_s: adjacent lanes sign-extended and added, exact.
    Core 2.0 4.4.3 (vextunop extadd_pairwise)."""
    a = _i(_v(a, "a", np.int16))
    return (a[..., 0::2] + a[..., 1::2]).astype(np.int32)


def i32x4_dot_i16x8_s(a, b):
    """i32x4.dot_i16x8_s: products of adjacent lane pairs added in 32 bits (iadd wraps: only -32768 * -32768 * 2
    leaves int32). Core 2.0 4.4.3 (i32x4.dot_i16x8_s: imul of extend_s, then iadd_32 of each pair)."""
    a, b = _v(a, "a", np.int16), _v(b, "b", np.int16)
    p = _i(a) * _i(b)
    return wrap(p[..., 0::2] + p[..., 1::2], np.int32)


# ---- narrowing, saturating --------------------------------------------------------------------------------------
def i16x8_narrow_i32x4_s(a, b):
    """i16x8.narrow_i32x4_s: a's lanes then b's, each saturated to int16.
    Core 2.0 4.4.3 (vnarrow: sat_s 16)."""
    a, b = _v(a, "a", np.int32), _v(b, "b", np.int32)
    return saturate(np.concatenate([_i(a), _i(b)], axis=-1), np.int16)


def i8x16_narrow_i16x8_s(a, b):
    """i8x16.narrow_i16x8_s: a's lanes then b's, each saturated to int8.
    Core 2.0 4.4.3 (vnarrow: sat_s 8)."""
    a, b = _v(a, "a", np.int16), _v(b, "b", np.int16)
    return saturate(np.concatenate([_i(a), _i(b)], axis=-1), np.int8)


def i8x16_narrow_i16x8_u(a, b):
    """i8x16.narrow_i16x8_u: a's (signed) lanes then b's, each saturated to uint8.
    Core 2.0 4.4.3 (vnarrow: sat_u 8 of the signed lanes)."""
    a, b = _v(a, "a", np.int16), _v(b, "b", np.int16)
    return saturate(np.concatenate([_i(a), _i(b)], axis=-1), np.uint8)


def i16x8_add_sat_s(a, b):
    """i16x8.add_sat_s: lane sums saturated to int16.
    Core 2.0 4.4.3 (vbinop add_sat_s: iadd_sat_s 16)."""
    a, b = _v(a, "a", np.int16), _v(b, "b", np.int16)
    same_register(("a", a), ("b", b))
    return saturate(_i(a) + _i(b), np.int16)


# ---- lane-wise integer ------------------------------------------------------------------------------------------
def i32x4_add(a, b):
    """i32x4.add: lane sums, wrapping. Core 2.0 4.4.3 (vbinop add: iadd 32)."""
    a, b = _v(a, "a", np.int32), _v(b, "b", np.int32)
    return wrap(_i(a) + _i(b), np.int32)


def i32x4_sub(a, b):
    """i32x4.sub: lane differences, wrapping. Core 2.0 4.4.3 (vbinop sub: isub 32)."""
    a, b = _v(a, "a", np.int32), _v(b, "b", np.int32)
    return wrap(_i(a) - _i(b), np.int32)


def i32x4_max_s(a, b):
    """i32x4.max_s: the signed maximum of each lane pair. Core 2.0 4.4.3 (vbinop max_s: imax_s 32)."""
    a, b = _v(a, "a", np.int32), _v(b, "b", np.int32)
    return np.maximum(a, b)


def i32x4_min_s(a, b):
    """i32x4.min_s: the signed minimum of each lane pair. Core 2.0 4.4.3 (vbinop min_s: imin_s 32)."""
    a, b = _v(a, "a", np.int32), _v(b, "b", np.int32)
    return np.minimum(a, b)


def i8x16_min_s(a, b):
    """i8x16.min_s: the signed minimum of each lane pair. Core 2.0 4.4.3 (vbinop min_s: imin_s 8)."""
    a, b = _v(a, "a", np.int8), _v(b, "b", np.int8)
    return np.minimum(a, b)


def i8x16_max_s(a, b):
    """i8x16.max_s: the signed maximum of each lane pair. Core 2.0 4.4.3 (vbinop max_s: imax_s 8)."""
    a, b = _v(a, "a", np.int8), _v(b, "b", np.int8)
    return np.maximum(a, b)


def i8x16_swizzle(a, s):
    """i8x16.swizzle: lane i of the result is a[s[i]] where s[i] < 16, else 0 (s read unsigned).
    Core 2.0 4.4.3 (i8x16.swizzle)."""
    a, s = _v(a, "a", np.int8), _v(s, "s", np.uint8)
    idx = np.minimum(s, 15).astype(np.intp)
    return np.where(s < 16, np.take_along_axis(a, idx, axis=-1), np.int8(0)).astype(np.int8)


# ---- float -------------------------------------------------------------------------------------------------------
def f32x4_convert_i32x4_s(a):
    """f32x4.convert_i32x4_s: each lane converted to the nearest float32, ties to even.
    Core 2.0 4.4.3 (vcvtop convert_s: fconvert_s, 4.3.4 round-to-nearest ties-to-even)."""
    a = _v(a, "a", np.int32)
    return a.astype(np.float32)


def f32x4_mul(a, b):
    """f32x4.mul: IEEE 754 binary32 products, round to nearest even.
    Core 2.0 4.4.3 (vbinop mul: fmul 32; NaN payloads are nondeterministic, 4.3.3)."""
    a, b = _v(a, "a", np.float32), _v(b, "b", np.float32)
    with np.errstate(over="ignore", invalid="ignore"):      # +-inf and NaN are results, as in IEEE 754
        return (a * b).astype(np.float32)


def f32x4_add(a, b):
    """f32x4.add: IEEE 754 binary32 sums, round to nearest even.
    Core 2.0 4.4.3 (vbinop add: fadd 32; NaN payloads are nondeterministic, 4.3.3)."""
    a, b = _v(a, "a", np.float32), _v(b, "b", np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        return (a + b).astype(np.float32)


def f32x4_nearest(a):
    """f32x4.nearest: round to the nearest integral value, ties to even.
    Core 2.0 4.4.3 (vunop nearest: fnearest 32)."""
    a = _v(a, "a", np.float32)
    return np.rint(a).astype(np.float32)


def i32x4_trunc_sat_f32x4_s(a):
    """i32x4.trunc_sat_f32x4_s: truncate toward zero, saturate to int32, NaN -> 0.
    Core 2.0 4.4.3 (vcvtop trunc_sat_s: trunc_sat_s 32)."""
    a = _v(a, "a", np.float32)
    x = np.trunc(np.nan_to_num(a.astype(np.float64), nan=0.0))
    return np.clip(x, -2.0 ** 31, 2.0 ** 31 - 1).astype(np.int32)


# ---- relaxed SIMD: the dot products -----------------------------------------------------------------------------
def _behaviour(behaviour, allowed, b, what: str) -> str | None:
    if behaviour is None:
        if (b < 0).any():
            raise ImplementationDefined(
                "relaxed_dot", f"{what}: b has lanes with the high bit set, where the result is implementation-defined (Core 3.0 "
                f"irelaxed_dot_mul); name the behaviour: behaviour= one of {', '.join(allowed)}", where=b < 0)
        return None
    if behaviour not in allowed:
        raise ValueError(f"{what}: behaviour {behaviour!r}: expected one of {', '.join(allowed)}")
    return behaviour


def i16x8_relaxed_dot_i8x16_i7x16_s(a, b, behaviour: str | None = None):
    """i16x8.relaxed_dot_i8x16_i7x16_s: products of adjacent lane pairs (a signed, b signed or unsigned by the
    engine's choice) added into 16 bits. sdot: signed x signed, the pair sum wraps (SMULL + ADDP; wasmtime
    deterministic); pmaddubsw: signed x unsigned, the pair sum saturates. Lanes of b below 128 give one answer.
    Core 3.0 4.4.3 (relaxed_dot: irelaxed_dot_mul 8 16, then the pairs added)."""
    a, b = _v(a, "a", np.int8), _v(b, "b", np.int8)
    chosen = _behaviour(behaviour, ("sdot", "pmaddubsw"), b, "i16x8.relaxed_dot_i8x16_i7x16_s")
    if chosen == "pmaddubsw":
        p = _i(a) * _i(b.view(np.uint8))
        return saturate(p[..., 0::2] + p[..., 1::2], np.int16)
    p = _i(a) * _i(b)
    return wrap(p[..., 0::2] + p[..., 1::2], np.int16)


def i32x4_relaxed_dot_i8x16_i7x16_add_s(a, b, c, behaviour: str | None = None):
    """i32x4.relaxed_dot_i8x16_i7x16_add_s: c plus the four products a[4j+k] * b[4j+k] of each lane (a signed, b
    signed or unsigned by the engine's choice; the 16-bit pair sums may saturate), wrapping in 32 bits.
    sdot: signed x signed, exact; pmaddubsw: signed x unsigned, each pair sum saturated to int16; vpdpbusd:
    signed x unsigned, exact. Lanes of b below 128 give one answer for every behaviour.
    Core 3.0 4.4.3 (relaxed_dot_add: irelaxed_dot_mul 8 16, pairs, extadd_pairwise, iadd 32)."""
    a, b, c = _v(a, "a", np.int8), _v(b, "b", np.int8), _v(c, "c", np.int32)
    chosen = _behaviour(behaviour, tuple(RELAXED_DOT), b, "i32x4.relaxed_dot_i8x16_i7x16_add_s")
    p = _i(a) * (_i(b.view(np.uint8)) if chosen in ("pmaddubsw", "vpdpbusd") else _i(b))
    pairs = p[..., 0::2] + p[..., 1::2]
    if chosen == "pmaddubsw":
        pairs = _i(saturate(pairs, np.int16))
    return wrap(_i(c) + pairs[..., 0::2] + pairs[..., 1::2], np.int32)


MODELS = (i16x8_extend_low_i8x16_s, i16x8_extend_high_i8x16_s, i16x8_extend_low_i8x16_u, i16x8_extmul_low_i8x16_s,
          i16x8_extmul_high_i8x16_s, i16x8_extadd_pairwise_i8x16_s, i32x4_extadd_pairwise_i16x8_s, i32x4_dot_i16x8_s,
          i16x8_narrow_i32x4_s, i8x16_narrow_i16x8_s, i8x16_narrow_i16x8_u, i16x8_add_sat_s, i32x4_add, i32x4_sub,
          i32x4_max_s, i32x4_min_s, i8x16_min_s, i8x16_max_s, i8x16_swizzle, f32x4_convert_i32x4_s, f32x4_mul,
          f32x4_add, f32x4_nearest, i32x4_trunc_sat_f32x4_s, i16x8_relaxed_dot_i8x16_i7x16_s,
          i32x4_relaxed_dot_i8x16_i7x16_add_s)
