"""Lane arithmetic shared by every instruction model: operand checks, saturation, wrap-around, write masks.

Registers are numpy arrays whose last axis holds the lanes (lane 0 = least significant element = lowest
address on x86 and AArch64); any leading axes are a batch of registers. Nothing here casts an operand the
caller passed: a wrong dtype is an error, never a conversion.

Two backends run the same models: numpy arrays (the concrete one: what every check and proof against hardware
uses) and lowp.isa_models.symbolic.bitvec.SymArray (bit-vector terms for `lowp prove`), which has the numpy interface the
models use. The operations below are the only places where the two differ in how they compute.
"""
from __future__ import annotations

import numpy as np

U8, S8 = np.dtype(np.uint8), np.dtype(np.int8)
U16, S16 = np.dtype(np.uint16), np.dtype(np.int16)
U32, S32 = np.dtype(np.uint32), np.dtype(np.int32)
U64, S64 = np.dtype(np.uint64), np.dtype(np.int64)
F32 = np.dtype(np.float32)

TYPE_NAMES = {U8: "u8", S8: "s8", U16: "u16", S16: "s16", U32: "u32", S32: "s32", U64: "u64", S64: "s64", F32: "f32"}
DTYPES = {name: dtype for dtype, name in TYPE_NAMES.items()}


def symbolic(x) -> bool:
    """Lanes of the bit-vector backend (lowp.isa_models.symbolic.bitvec.SymArray), without importing it (or z3)."""
    return type(x).__name__ == "SymArray"


def numpy_only(model: str, *xs, why: str = "float32 arithmetic has no bit-vector model") -> None:
    """Refuse symbolic lanes in a model the bit-vector backend does not cover, naming it, rather than compute a
    wrong answer (or fail deep inside numpy)."""
    if any(symbolic(x) for x in xs):
        raise NotImplementedError(f"{model}: numpy only, not on the bit-vector backend (lowp prove): {why}")


def is_lanes(x) -> bool:
    """A register of either backend: a numpy array or symbolic lanes."""
    return isinstance(x, np.ndarray) or symbolic(x)


def operand(x, name: str, dtype, widths=(64, 128, 256, 512), group: int = 1) -> np.ndarray:
    """Check one register operand: exact dtype, a lane count that fills one of `widths` bits, and
    divisible by `group` (the lanes one result lane reads). Returns x as an ndarray, never converted."""
    dtype = np.dtype(dtype)
    if not isinstance(x, np.ndarray) and not symbolic(x):
        raise ValueError(f"operand {name!r}: expected a numpy array of {TYPE_NAMES[dtype]} lanes, got {type(x).__name__}")
    if x.dtype != dtype:
        raise ValueError(f"operand {name!r}: expected dtype {dtype} ({TYPE_NAMES[dtype]} lanes), got {x.dtype}; "
                         "lowp never casts an operand")
    if x.ndim == 0:
        raise ValueError(f"operand {name!r}: expected lanes on the last axis, got a 0-d array")
    lanes = x.shape[-1]
    bits = lanes * dtype.itemsize * 8
    if bits not in widths:
        allowed = ", ".join(f"{w // (dtype.itemsize * 8)} ({w}-bit)" for w in widths)
        raise ValueError(f"operand {name!r}: {lanes} {TYPE_NAMES[dtype]} lanes = {bits} bits does not fit a register; "
                         f"expected {allowed} lanes")
    if lanes % group:
        raise ValueError(f"operand {name!r}: {lanes} lanes do not divide into groups of {group}")
    return x


def same_register(*named) -> None:
    """Operands that are read lane by lane together must have the same lane count."""
    (first_name, first), *rest = named
    for name, x in rest:
        if x.shape[-1] != first.shape[-1]:
            raise ValueError(f"operand {name!r} has {x.shape[-1]} lanes but {first_name!r} has {first.shape[-1]}; "
                             "they must be the same register width")


def result_lanes(name: str, x: np.ndarray, dtype, lanes: int) -> np.ndarray:
    """Check an operand that has the result's shape (accumulator, merge source)."""
    x = operand(x, name, dtype, widths=(lanes * np.dtype(dtype).itemsize * 8,))
    return x


def saturate(x: np.ndarray, dtype) -> np.ndarray:
    """SaturateToSigned/UnsignedWord, Dword, ...: clamp an exact integer to the range of `dtype`."""
    info = np.iinfo(dtype)
    return np.clip(x, info.min, info.max).astype(dtype)


def exact_products(A, B) -> np.ndarray:
    """A @ B of integer lanes (leading axes a batch), exactly, as int64 without wrapping. Through float64 (BLAS)
    where every partial sum is an integer below 2^53 whatever the order of summation (the operands' largest
    magnitudes, by type or, for 64-bit ones, by value, times the depth), which is exact and 3-8x faster than
    numpy's int64 product loops from some BLAS_PRODUCTS products on; int64 otherwise (a small product's
    conversions cost more than its loops), and for symbolic lanes."""
    if symbolic(A) or symbolic(B):
        return A.astype(np.int64) @ B.astype(np.int64)
    A, B = np.asarray(A), np.asarray(B)
    if A.size * B.shape[-1] >= BLAS_PRODUCTS and A.dtype.kind in "iu" and B.dtype.kind in "iu" and \
            _magnitude(A) * _magnitude(B) * A.shape[-1] < 1 << 53:
        return (A.astype(np.float64) @ B.astype(np.float64)).astype(np.int64)
    return A.astype(np.int64) @ B.astype(np.int64)


BLAS_PRODUCTS = 4096
_TYPE_MAGNITUDE = {np.dtype(t): max(-int(np.iinfo(t).min), int(np.iinfo(t).max))
                   for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32)}


def _magnitude(x: np.ndarray) -> int:
    """The largest |value| x can hold: by its type up to 32 bits, by its values beyond."""
    by_type = _TYPE_MAGNITUDE.get(x.dtype)
    if by_type is not None:
        return by_type
    return max(-int(x.min()), int(x.max())) if x.size else 0


def wrap(x: np.ndarray, dtype) -> np.ndarray:
    """Keep the low bits of an exact integer (x<N-1:0> in the Arm ASL; the truncation the SDM implies)."""
    dtype = np.dtype(dtype)
    if symbolic(x):
        return x.astype(dtype)     # the backend keeps the low bits where the exact value does not fit
    bits = dtype.itemsize * 8
    unsigned = np.dtype(f"u{dtype.itemsize}")
    low = np.asarray(x).astype(np.int64, copy=False) & ((1 << bits) - 1) if bits < 64 else np.asarray(x)
    return low.astype(unsigned).view(dtype)


def add_wrapping(acc, total):
    """acc + an exact integer total, kept to acc's width: bits(N) + integer in the Arm ASL, vd + product in RVV.
    numpy: both as two's-complement uint64, whose sum wraps mod 2^64, a multiple of 2^N (an exact int64 sum could
    leave int64). Symbolic lanes: the exact sum, wrapped only where its interval leaves acc's type."""
    if symbolic(acc) or symbolic(total):
        return wrap(acc.astype(object) + total.astype(object), acc.dtype)
    unsigned = np.dtype(f"u{acc.dtype.itemsize}")
    s = acc.astype(np.uint64) + total.astype(np.uint64)    # both casts are modulo 2^64, as is the sum
    return s.astype(unsigned).view(acc.dtype)


def widen(x: np.ndarray) -> np.ndarray:
    """Exact arithmetic room: every model computes in int64 before it saturates or wraps."""
    return x.astype(np.int64)


def pairs(x):
    """Sum of adjacent lanes 2j and 2j+1: the horizontal step of PMADDUBSW/PMADDWD, SADALP, ADDP."""
    return x[..., 0::2] + x[..., 1::2]


def quads(x):
    """Sum of lanes 4j..4j+3, in that order: the four products of a VNNI dword or an SDOT lane."""
    return x[..., 0::4] + x[..., 1::4] + x[..., 2::4] + x[..., 3::4]


def dot(x, y):
    """Sum over the last axis of x[..., r, k] * y[..., c, k], for every (r, c): the row-by-column sums of the
    outer-product and tile instructions (SMOPA, TDPB*D), exact in x's and y's dtype (int64 or wider)."""
    if symbolic(x) or symbolic(y):
        return (x[..., :, None, :] * y[..., None, :, :]).sum(axis=-1)
    return np.einsum("...rk,...ck->...rc", x, y)


def interleave(even, odd):
    """Lanes 2e from `even`, 2e+1 from `odd`: the SVE2 bottom/top (B/T) narrowing forms' destinations."""
    both = np.stack(np.broadcast_arrays(even, odd), axis=-1)
    return both.reshape(both.shape[:-2] + (2 * both.shape[-2],))


def mask_bits(mask, lanes: int) -> np.ndarray:
    """An AVX-512 write mask (a Python int or an integer array over the batch axes) as booleans per lane.
    Bits above the lane count are ignored, as the hardware ignores them."""
    if isinstance(mask, (bool, np.bool_)) or not isinstance(mask, (int, np.integer, np.ndarray)):
        raise ValueError(f"mask: expected an int (bit j selects lane j) or an integer array, got {type(mask).__name__}")
    m = np.asarray(mask)
    if m.dtype.kind not in "iu":
        raise ValueError(f"mask: expected integer bits below 2**64, got {m.dtype}")
    if m.dtype.kind == "i" and (m < 0).any():
        raise ValueError("mask: bits must be non-negative")
    m = m.astype(np.uint64)
    return ((m[..., None] >> np.arange(lanes, dtype=np.uint64)) & np.uint64(1)).astype(bool)


def writemask(result: np.ndarray, mask, zeroing: bool, merge) -> np.ndarray:
    """AVX-512 {k} / {k}{z}: lanes whose mask bit is 0 take the merge source (merge-masking) or 0 (zeroing).
    Intel SDM Vol. 1, 15.6.1 'Opmask register usage'; the per-lane `IF k1[j] OR *no writemask*` blocks."""
    if mask is None:
        if zeroing or merge is not None:
            raise ValueError("zeroing= and merge= only apply with a write mask (mask=...)")
        return result
    keep = mask_bits(mask, result.shape[-1])
    if zeroing:
        if merge is not None:
            raise ValueError("zeroing=True takes no merge source")
        other = np.zeros((), result.dtype)
    else:
        if merge is None:
            raise ValueError("merge-masking (mask= without zeroing=True) needs the merge source: the old destination")
        other = result_lanes("merge", merge, result.dtype, result.shape[-1])
    return np.where(keep, result, other).astype(result.dtype, copy=False)


# -- IEEE binary32 lanes (the fp32 requantization) -------------------------------------------------------------------
# numpy float32 arithmetic is IEEE binary32 with round to nearest even, the MXCSR / FPCR default every library here
# runs under; the bit-vector backend builds the same operations as z3 floating-point terms on the lanes' bits.
# A symbolic operand's own class (SymArray) carries its side of each operation, so this module dispatches through
# the operand and never imports the backend (which imports this module for the numpy side: folding constant lanes).

def _symbolic_one(*xs):
    """The first symbolic operand (None if every one is numpy): the one whose class builds the bit-vector form."""
    return next((x for x in xs if symbolic(x)), None)


def f32_from_int32(x):
    """int32 -> float32, one rounding to nearest even (through float64, which holds every int32 exactly)."""
    if symbolic(x):
        return x.f32_from_int32(x)
    return x.astype(np.float64).astype(F32)


def f32_arith(op: str, a, b):
    """a op b for op in 'add', 'sub', 'mul': IEEE binary32, rounded to nearest even."""
    sym = _symbolic_one(a, b)
    if sym is not None:
        return sym.f32_arith(op, a, b)
    with np.errstate(all="ignore"):
        return {"add": np.add, "sub": np.subtract, "mul": np.multiply}[op](a, b).astype(F32)


def f32_pick_less(a, b):
    """(a < b) ? a : b lane by lane, comparing as IEEE floats and moving bits: an unordered pair (a NaN) or equal
    values (+0 and -0) give b."""
    sym = _symbolic_one(a, b)
    if sym is not None:
        return sym.f32_pick_less(a, b)
    return np.where(a < b, a, b).astype(F32)


def f32_to_int32(x, rounding: str, invalid: int):
    """float32 -> int32 rounding to nearest even ('nearest') or toward zero ('zero'); NaN or a rounded value outside
    int32 gives `invalid` (x86's integer indefinite 0x80000000)."""
    if symbolic(x):
        return x.f32_to_int32(x, rounding, invalid)
    with np.errstate(invalid="ignore"):           # a signalling NaN is a value here, not an event
        a = x.astype(np.float64)
        r = {"nearest": np.rint, "zero": np.trunc}[rounding](np.where(np.isfinite(a), a, 0.0))
        bad = ~np.isfinite(a) | (r < -(1 << 31)) | (r > (1 << 31) - 1)
    return np.where(bad, invalid, r).astype(np.int32)
