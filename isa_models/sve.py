"""Bit-exact models of the SVE and SVE2 integer instructions int8 GEMM kernels and their requantization are made
of, for any vector length.

One function per instruction, mirroring the `Operation` pseudocode of the Arm Architecture Reference Manual for
A-profile, DDI 0487 M.a.a, chapter C8 (SVE instructions); section numbers are in each docstring. A Z register is
a numpy array with its elements on the last axis (element 0 = Elem[x, 0, esize]), vectorized over any leading
axes. Nothing is fixed at 128 bits: the vector length VL (CurrentVL) is the last axis' lanes x esize, any multiple
of 128 up to 2048, and the operands of one call must agree on it. The "indexed" forms pick their element within
each 128-bit segment (`segmentbase + index`), as the pseudocode does.

Predicates: SDOT, MMLA, SQRDMULH and the narrowing forms are unpredicated. SRSHL is predicated and merging
(`Pg/M`); `pg=None` is the all-true predicate the kernels use (svptrue), else a bool array, one entry per element
(ActivePredicateElement(mask, e, esize)); inactive elements keep operand1.
"""
from __future__ import annotations

import numpy as np

from lowp.isa_models.arm import _bits, _int, _sat, smmla as _neon_smmla, ummla as _neon_ummla, usmmla as _neon_usmmla
from lowp.isa_models.lanes import S8, S16, S32, S64, TYPE_NAMES, U8, U16, U32, U64, add_wrapping, interleave, is_lanes, result_lanes

SIGNED = (S8, S16, S32, S64)
_NARROWER = {S16: S8, S32: S16, S64: S32}
_DOT_ACC = {S8: S32, S16: S64, U8: U32, U16: U64}      # 4-way dot products: 8 -> 32 and 16 -> 64 bits


def _z(x, name, allowed, group=1):
    """A Z register of one of the `allowed` element types, VL a multiple of 128 bits (at most 2048)."""
    if not is_lanes(x):
        raise ValueError(f"operand {name!r}: expected a numpy array of lanes, got {type(x).__name__}")
    if x.dtype not in allowed:
        names = ", ".join(TYPE_NAMES[d] for d in allowed)
        raise ValueError(f"operand {name!r}: expected lanes of {names}, got dtype {x.dtype}; lowp never casts an operand")
    if x.ndim == 0:
        raise ValueError(f"operand {name!r}: expected lanes on the last axis, got a 0-d array")
    bits = x.shape[-1] * x.dtype.itemsize * 8
    if bits % 128 or not 128 <= bits <= 2048:
        raise ValueError(f"operand {name!r}: {x.shape[-1]} {TYPE_NAMES[x.dtype]} lanes = {bits} bits is not an SVE "
                         f"vector length (a multiple of 128 bits up to 2048: {128 // (bits // x.shape[-1])} lanes per "
                         "128 bits)")
    if x.shape[-1] % group:
        raise ValueError(f"operand {name!r}: {x.shape[-1]} lanes do not divide into groups of {group}")
    return x


def _index(index, count, what):
    if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
        raise ValueError(f"index: expected an int (the {what}), got {type(index).__name__}")
    if not 0 <= index < count:
        raise ValueError(f"index: {what} {index} does not exist; expected 0..{count - 1}")
    return int(index)


def _segment_pick(b, index, per_segment, width=1):
    """Elem[operand2, s] with s = segmentbase + index: in every 128-bit segment, the index-th group of `width`
    elements, repeated across that segment."""
    i = _index(index, per_segment, "element within each 128-bit segment")
    seg = b.reshape(b.shape[:-1] + (-1, per_segment, width))
    return np.broadcast_to(seg[..., i:i + 1, :], seg.shape).reshape(b.shape)


def _predicate(pg, lanes):
    """None (all-true, svptrue) or a bool array with one entry per element."""
    if pg is None:
        return None
    if not is_lanes(pg) or pg.dtype != np.bool_:
        raise ValueError(f"pg: expected a bool array (one entry per element) or None for all-true, got "
                         f"{getattr(pg, 'dtype', type(pg).__name__)}")
    if pg.shape[-1] != lanes:
        raise ValueError(f"pg: {pg.shape[-1]} entries, but the operands have {lanes} elements")
    return pg


def _add_wrapping(acc, total):
    """Elem[operand3, e, esize] + the exact integer total, kept to esize bits (bits(esize) + integer wraps)."""
    return add_wrapping(acc, total)


# -- dot products and matrix multiply-accumulate --------------------------------------------------------------

def _dot(acc, a, b, a_types, b_of, index, acc_of=_DOT_ACC):
    a = _z(a, "a", a_types, group=4)
    acc_t = acc_of[a.dtype]
    acc = result_lanes("acc", acc, acc_t, a.shape[-1] // 4)
    b = result_lanes("b", b, b_of[a.dtype], a.shape[-1])
    if index is not None:
        b = _segment_pick(b, index, 128 // (acc_t.itemsize * 8), 4)
    p = a.astype(np.int64) * b.astype(np.int64)              # exact: |8-bit products| <= 2^14, 16-bit <= 2^30
    total = p.reshape(p.shape[:-1] + (-1, 4)).sum(axis=-1)  # four of them: exact in int64
    return _add_wrapping(acc, total)


def sdot(acc, a, b, *, index=None):
    """SDOT (4-way): Elem[result, e, esize] = Elem[operand3, e, esize] + sum over i<4 of SInt(Elem[operand1, 4e+i,
    esize/4]) * SInt(Elem[operand2, 4e+i, esize/4]), wrapping mod 2^esize: s8 -> s32 or s16 -> s64; index= the
    indexed form, operand2's group s = segmentbase + index (0..3 for s8, 0..1 for s16).
    Arm ARM DDI 0487 M.a.a, C8.2.573 SDOT (4-way, vectors), C8.2.574 SDOT (4-way, indexed)."""
    return _dot(acc, a, b, (S8, S16), {S8: S8, S16: S16}, index)


def udot(acc, a, b, *, index=None):
    """UDOT (4-way): as SDOT with UInt elements: u8 -> u32 or u16 -> u64, wrapping.
    Arm ARM DDI 0487 M.a.a, C8.2.815 UDOT (4-way, vectors), C8.2.816 UDOT (4-way, indexed)."""
    return _dot(acc, a, b, (U8, U16), {U8: U8, U16: U16}, index)


def usdot(acc, a, b, *, index=None):
    """USDOT: as SDOT with operand1 (Zn, a) UInt and operand2 (Zm, b) SInt, u8 x s8 -> s32, wrapping.
    Arm ARM DDI 0487 M.a.a, C8.2.890 USDOT (vectors), C8.2.891 USDOT (indexed); FEAT_I8MM."""
    return _dot(acc, a, b, (U8,), {U8: S8}, index, {U8: S32})


def sudot(acc, a, b, *, index):
    """SUDOT: indexed only: operand1 (Zn, a) SInt, Elem[operand2, 4s+i, 8] (Zm, b) UInt, s8 x u8 -> s32, wrapping.
    Arm ARM DDI 0487 M.a.a, C8.2.787 SUDOT; FEAT_I8MM."""
    return _dot(acc, a, b, (S8,), {S8: U8}, index)


def _mmla(acc, a, b, neon, a_t, acc_t):
    # for s = 0 to segments-1: Elem[result, s, 128] = MatMulAdd(Elem[operand3, s, 128], Elem[operand1, s, 128], ...):
    # each 128-bit segment is the Advanced SIMD instruction's whole register.
    a = _z(a, "a", (a_t,))
    acc = result_lanes("acc", acc, acc_t, a.shape[-1] // 4)
    b = result_lanes("b", b, b.dtype if is_lanes(b) else a_t, a.shape[-1])
    segments = a.shape[-1] // 16
    per_segment = lambda x, n: x.reshape(x.shape[:-1] + (segments, n))  # noqa: E731
    return neon(per_segment(acc, 4), per_segment(a, 16), per_segment(b, 16)).reshape(acc.shape)


def smmla(acc, a, b):
    """SMMLA (SVE): in every 128-bit segment, MatMulAdd(addend, op1, op2, FALSE, FALSE): the 2x2 s32 addend plus the
    2x8 s8 row-major a times the 8x2 s8 b stored column by column; wraps mod 2^32.
    Arm ARM DDI 0487 M.a.a, C8.2.604 SMMLA; FEAT_I8MM (SVE)."""
    return _mmla(acc, a, b, _neon_smmla, S8, S32)


def ummla(acc, a, b):
    """UMMLA (SVE): per 128-bit segment, MatMulAdd(addend, op1, op2, TRUE, TRUE), u32 wrapping.
    Arm ARM DDI 0487 M.a.a, C8.2.838 UMMLA; FEAT_I8MM (SVE)."""
    return _mmla(acc, a, b, _neon_ummla, U8, U32)


def usmmla(acc, a, b):
    """USMMLA (SVE): per 128-bit segment, MatMulAdd(addend, op1, op2, TRUE, FALSE): a (Zn) unsigned, b (Zm) signed.
    Arm ARM DDI 0487 M.a.a, C8.2.894 USMMLA; FEAT_I8MM (SVE)."""
    return _mmla(acc, a, b, _neon_usmmla, U8, S32)


# -- requantization ------------------------------------------------------------------------------------------

def sqrdmulh(a, b, *, index=None):
    """SQRDMULH (SVE2): res = 2 * element1 * element2; Elem[result, e, esize] = SignedSat((res + (1 << (esize-1)))
    >> esize, esize), s8/s16/s32/s64; INT_MIN * INT_MIN saturates to INT_MAX. index= the indexed form (s16 0..7,
    s32 0..3, s64 0..1 within each 128-bit segment).
    Arm ARM DDI 0487 M.a.a, C8.2.660 SQRDMULH (vectors), C8.2.661 SQRDMULH (indexed)."""
    a = _z(a, "a", SIGNED)
    b = result_lanes("b", b, a.dtype, a.shape[-1])
    esize = a.dtype.itemsize * 8
    if index is not None:
        if esize == 8:
            raise ValueError("index: SQRDMULH (indexed) has no 8-bit form; expected s16, s32 or s64 lanes")
        b = _segment_pick(b, index, 128 // esize)
    x, y = _int(a, b)
    # (2xy + 2^(esize-1)) >> esize computed halved, (xy + 2^(esize-2)) >> (esize-1): the same integer, and within
    # int64 up to 32-bit lanes (64-bit lanes are Python integers).
    return _sat((x * y + (1 << (esize - 2))) >> (esize - 1), a.dtype)


def srshl(a, b, *, pg=None):
    """SRSHL (SVE2, predicated, merging): shift = ShiftSat(SInt(Elem[operand2, e, esize]), esize), i.e. the whole
    element clamped to +-(esize+1) (not the low byte, as Advanced SIMD SRSHL reads); res = element << shift, or for
    a negative shift (element + (1 << (-shift-1))) >> -shift; Elem[result, e, esize] = res<esize-1:0>. Inactive
    elements (pg False) keep operand1. Arm ARM DDI 0487 M.a.a, C8.2.688 SRSHL."""
    a = _z(a, "a", SIGNED)
    b = result_lanes("b", b, a.dtype, a.shape[-1])
    pg = _predicate(pg, a.shape[-1])
    esize = a.dtype.itemsize * 8
    shift = np.clip(b.astype(np.int64), -(esize + 1), esize + 1)
    (x,) = _int(a)
    if esize == 64:
        shift = shift.astype(object)
    left = x << np.maximum(shift, 0) if esize == 64 else \
        (x.astype(np.uint64) << np.maximum(shift, 0).astype(np.uint64))   # low esize bits are all that is kept
    right_by = np.maximum(-shift, 1)
    right = (x + (np.ones_like(x) << (right_by - 1))) >> right_by
    result = np.where(shift >= 0, _bits(left, a.dtype), _bits(right, a.dtype))
    return result if pg is None else np.where(pg, result, a)


def _narrow_bottom(narrow):
    """The B forms: Elem[result, 2e, esize] = the narrowed element, Elem[result, 2e+1, esize] = Zeros."""
    return interleave(narrow, np.zeros_like(narrow))


def _narrow_top(even, narrow):
    """The T forms: result = Z[d] (`even`), then Elem[result, 2e+1, esize] = the narrowed element: the even
    elements keep the destination's."""
    even = result_lanes("even", even, narrow.dtype, 2 * narrow.shape[-1])
    return interleave(even[..., 0::2], narrow)


def _qrshrn(a, shift):
    a = _z(a, "a", (S16, S32, S64))
    out_t = _NARROWER[a.dtype]
    esize = out_t.itemsize * 8
    if isinstance(shift, (bool, np.bool_)) or not isinstance(shift, (int, np.integer)):
        raise ValueError(f"shift: expected an int, got {type(shift).__name__}")
    if not 1 <= shift <= esize:
        raise ValueError(f"shift: {shift} is not encodable; expected 1..{esize}")
    (x,) = _int(a)
    return _sat((x + (1 << (int(shift) - 1))) >> int(shift), out_t)   # SignedSat((SInt(element) + round) >> shift)


def sqrshrnb(a, shift):
    """SQRSHRNB: res = (SInt(Elem[operand, e, 2*esize]) + (1 << (shift-1))) >> shift; Elem[result, 2e, esize] =
    SignedSat(res, esize), Elem[result, 2e+1, esize] = Zeros: s16 -> s8, s32 -> s16, s64 -> s32, shift 1..esize.
    Arm ARM DDI 0487 M.a.a, C8.2.665 SQRSHRNB."""
    return _narrow_bottom(_qrshrn(a, shift))


def sqrshrnt(even, a, shift):
    """SQRSHRNT: as SQRSHRNB into the odd elements, Elem[result, 2e+1, esize]; the even elements keep Z[d]
    (`even`, the destination before). Arm ARM DDI 0487 M.a.a, C8.2.666 SQRSHRNT."""
    return _narrow_top(even, _qrshrn(a, shift))


def _qxtn(a):
    a = _z(a, "a", (S16, S32, S64))
    (x,) = _int(a)
    return _sat(x, _NARROWER[a.dtype])                       # SignedSat(SInt(Elem[operand1, e, esize]), halfesize)


def sqxtnb(a):
    """SQXTNB: Elem[result, 2e, halfesize] = SignedSat(SInt(Elem[operand1, e, esize]), halfesize),
    Elem[result, 2e+1, halfesize] = Zeros. Arm ARM DDI 0487 M.a.a, C8.2.682 SQXTNB."""
    return _narrow_bottom(_qxtn(a))


def sqxtnt(even, a):
    """SQXTNT: Elem[result, 2e+1, halfesize] = SignedSat(SInt(Elem[operand1, e, esize]), halfesize); the even
    elements keep Z[d] (`even`). Arm ARM DDI 0487 M.a.a, C8.2.683 SQXTNT."""
    return _narrow_top(even, _qxtn(a))
