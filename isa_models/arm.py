"""Bit-exact models of the AArch64 Advanced SIMD (NEON) integer instructions int8 GEMM kernels and their
requantization stages are made of.

One function per instruction, mirroring the `execute` pseudocode of the Arm Architecture Reference Manual
(DDI 0487) / A64 ISA (DDI 0602), "SIMD&FP" instruction pages. Registers are numpy arrays of lanes on the last
axis (lane 0 = Elem[x, 0] = the least significant element), vectorized over any leading axes. The element size
comes from the dtype: s8 lanes are `Elem[.., 8]` read as Int(.., unsigned=FALSE). Every sum is formed exactly
(int64, or Python integers where 64-bit lanes need more room) and kept to its low bits (`<N-1:0>`) or
saturated (`SignedSatQ` / `UnsignedSatQ`) exactly where the pseudocode says. FPSR.QC, which the saturating
forms set, is not modeled.

Register shapes follow the instruction's arrangement: a 64-bit operand (Vpart[n, 0], e.g. `8B`) has 64 bits of
lanes, a 128-bit one (`16B`) 128. The "2" forms (SMLAL2, SQXTN2, ...) take the whole 128-bit source register
and read its upper half (Vpart[n, 1]); the narrowing "2" forms take the destination's lower half `lo`, which
they keep, and return the full 128-bit register.

By-element forms take the whole Vm register as `b` and the element (or, for the dot products, the 32-bit group)
number as `index=`; the encoding restricts Vm to V0-V15 for 16-bit elements, which is not a model matter.

Operand roles follow the pseudocode: USDOT/USMMLA read Vn (a) unsigned and Vm (b) signed; SUDOT reads Vn signed
and Vm unsigned; the MMLA right operand holds the 8x2 matrix column by column
(docs/research/aarch64-int8-instructions.md#widening-multiply-accumulate-and-dot-products-wrap).
"""
from __future__ import annotations

import numpy as np

from lowp.isa_models.lanes import S8, S16, S32, S64, TYPE_NAMES, U8, U16, U32, U64, is_lanes, operand, result_lanes, symbolic, wrap

D, Q = (64,), (128,)
DQ = (64, 128)
SIGNED = (S8, S16, S32, S64)
UNSIGNED = (U8, U16, U32, U64)
_WIDER = {S8: S16, S16: S32, S32: S64, U8: U16, U16: U32, U32: U64}
_NARROWER = {v: k for k, v in _WIDER.items()}
_UNSIGNED_OF = dict(zip(SIGNED, UNSIGNED))


# -- helpers: operand checks and exact integers ---------------------------------------------------------------

def _vec(x, name, allowed, widths=DQ, group=1):
    """An operand whose element type is one of `allowed` (the arrangement picks it), in a 64/128-bit register."""
    if is_lanes(x) and x.dtype not in allowed and len(allowed) > 1:
        names = ", ".join(TYPE_NAMES[d] for d in allowed)
        raise ValueError(f"operand {name!r}: expected lanes of one of {names}, got dtype {x.dtype}; "
                         "lowp never casts an operand")
    dtype = x.dtype if is_lanes(x) and x.dtype in allowed else allowed[0]
    return operand(x, name, dtype, widths, group)


def _same(name, x, dtype, lanes):
    """An operand that must have exactly this element type and lane count (accumulator, second source)."""
    return result_lanes(name, x, dtype, lanes)


def _int(*xs):
    """Int(x): exact integers. int64 holds every intermediate of <= 32-bit lanes; 64-bit lanes use Python ints."""
    if any(x.dtype.itemsize == 8 for x in xs):
        return [x.astype(object) for x in xs]
    return [x.astype(np.int64) for x in xs]


def _bits(x, dtype):
    """x<N-1:0>: the low N bits of an exact integer, as lanes of `dtype`."""
    dtype = np.dtype(dtype)
    if symbolic(x):
        return wrap(x, dtype)              # the exact value where it fits, its low bits where not
    n = dtype.itemsize * 8
    if n == 64 and x.dtype != object:      # an exact int64 already is its own low 64 bits
        return x.astype(np.int64).view(dtype)
    low = x & ((1 << n) - 1)
    return low.astype(np.dtype(f"u{dtype.itemsize}")).view(dtype)


def _sat(x, dtype):
    """SignedSatQ / UnsignedSatQ(x, N) by the destination's type: clamp an exact integer to its range."""
    info = np.iinfo(dtype)
    return np.minimum(np.maximum(x, int(info.min)), int(info.max)).astype(dtype)


def _index(index, count, what="element"):
    if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
        raise ValueError(f"index: expected an int (the {what} number), got {type(index).__name__}")
    if not 0 <= index < count:
        raise ValueError(f"index: {what} {index} does not exist; expected 0..{count - 1}")
    return int(index)


def _upper(x):
    """Vpart[n, 1]: the upper 64 bits of a 128-bit register."""
    return x[..., x.shape[-1] // 2:]


def _elements(a, b, name_b, index):
    """operand2 of a vector form (same shape as a), or Elem[operand2, index, esize] broadcast (by element)."""
    if index is None:
        b = _same(name_b, b, a.dtype, a.shape[-1])
        return b
    b = operand(b, name_b, a.dtype, DQ) if is_lanes(b) and b.dtype == a.dtype \
        else _same(name_b, b, a.dtype, a.shape[-1])
    i = _index(index, b.shape[-1])
    return b[..., i:i + 1]


def _rshr(x, n):
    """RShr(x, n, round=TRUE) on exact integers: (x + (1 << (n-1))) >> n, n >= 1."""
    return (x + (1 << (n - 1))) >> n


def _shift_count(shift, esize, lo=1):
    if isinstance(shift, (bool, np.bool_)) or not isinstance(shift, (int, np.integer)):
        raise ValueError(f"shift: expected an int, got {type(shift).__name__}")
    if not lo <= shift <= esize:
        raise ValueError(f"shift: {shift} is not encodable; expected {lo}..{esize}")
    return int(shift)


# -- widening multiply-accumulate -----------------------------------------------------------------------------

def _mlal(acc, a, b, index, types, part, accumulate=True):
    a = _vec(a, "a", types, Q if part else D)
    half = _upper(a) if part else a
    b = _elements(a, b, "b", index)
    b = _upper(b) if part and index is None else b
    out_t = _WIDER[a.dtype]
    x, y = _int(half, b)
    product = x * y                        # (element1 * element2)<2*esize-1:0>: exact, never overflows
    if not accumulate:
        return _bits(product, out_t)
    acc = _same("acc", acc, out_t, half.shape[-1])
    (z,) = _int(acc)
    return _bits(z + product, out_t)       # Elem[operand3, e, 2*esize] + product, bits + bits: wraps


def smlal(acc, a, b, *, index=None):
    """SMLAL: Elem[result, e, 2*esize] = Elem[operand3, e, 2*esize] + (Int(element1) * Int(element2))<2*esize-1:0>,
    operands Vpart[n, 0] / Vpart[m, 0] (s8x8, s16x4, s32x2), accumulator wrapping mod 2^(2*esize); with index=, the
    by-element form reads element2 = Elem[V[m], index, esize]. Arm ARM DDI 0487, C7.2 SMLAL, SMLAL2 (vector / by element)."""
    return _mlal(acc, a, b, index, SIGNED[:3], 0)


def smlal2(acc, a, b, *, index=None):
    """SMLAL2: as SMLAL on Vpart[n, 1] (and Vpart[m, 1]) of 128-bit sources (s8x16, s16x8, s32x4), wrapping.
    Arm ARM DDI 0487, C7.2 SMLAL, SMLAL2 (vector / by element)."""
    return _mlal(acc, a, b, index, SIGNED[:3], 1)


def umlal(acc, a, b, *, index=None):
    """UMLAL: Elem[result, e, 2*esize] = Elem[operand3, e, 2*esize] + (UInt(element1) * UInt(element2))<2*esize-1:0>,
    wrapping mod 2^(2*esize). Arm ARM DDI 0487, C7.2 UMLAL, UMLAL2 (vector / by element)."""
    return _mlal(acc, a, b, index, UNSIGNED[:3], 0)


def umlal2(acc, a, b, *, index=None):
    """UMLAL2: as UMLAL on the upper halves (Vpart[n, 1]) of 128-bit sources.
    Arm ARM DDI 0487, C7.2 UMLAL, UMLAL2 (vector / by element)."""
    return _mlal(acc, a, b, index, UNSIGNED[:3], 1)


def smull(a, b, *, index=None):
    """SMULL: Elem[result, e, 2*esize] = (Int(element1) * Int(element2))<2*esize-1:0>, exact (cannot overflow).
    Arm ARM DDI 0487, C7.2 SMULL, SMULL2 (vector / by element)."""
    return _mlal(None, a, b, index, SIGNED[:3], 0, accumulate=False)


def smull2(a, b, *, index=None):
    """SMULL2: as SMULL on the upper halves (Vpart[n, 1]) of 128-bit sources.
    Arm ARM DDI 0487, C7.2 SMULL, SMULL2 (vector / by element)."""
    return _mlal(None, a, b, index, SIGNED[:3], 1, accumulate=False)


def umull(a, b, *, index=None):
    """UMULL: Elem[result, e, 2*esize] = (UInt(element1) * UInt(element2))<2*esize-1:0>, exact.
    Arm ARM DDI 0487, C7.2 UMULL, UMULL2 (vector / by element)."""
    return _mlal(None, a, b, index, UNSIGNED[:3], 0, accumulate=False)


def umull2(a, b, *, index=None):
    """UMULL2: as UMULL on the upper halves (Vpart[n, 1]) of 128-bit sources.
    Arm ARM DDI 0487, C7.2 UMULL, UMULL2 (vector / by element)."""
    return _mlal(None, a, b, index, UNSIGNED[:3], 1, accumulate=False)


def _adalp(acc, a, types):
    a = _vec(a, "a", types, DQ, 2)
    out_t = _WIDER[a.dtype]
    acc = _same("acc", acc, out_t, a.shape[-1] // 2)
    x, z = _int(a, acc)
    pair = x[..., 0::2] + x[..., 1::2]     # sum = op1 + op2, then sum<2*esize-1:0> (exact: it fits)
    return _bits(z + pair, out_t)          # Elem[result, e, 2*esize] + sum: wraps


def sadalp(acc, a):
    """SADALP: sum = Int(Elem[operand, 2e, esize]) + Int(Elem[operand, 2e+1, esize]);
    Elem[result, e, 2*esize] = Elem[operand2, e, 2*esize] + sum<2*esize-1:0>, wrapping mod 2^(2*esize).
    Arm ARM DDI 0487, C7.2 SADALP."""
    return _adalp(acc, a, SIGNED[:3])


def uadalp(acc, a):
    """UADALP: as SADALP with UInt elements. Arm ARM DDI 0487, C7.2 UADALP."""
    return _adalp(acc, a, UNSIGNED[:3])


def _addw(a, b, types, part):
    b = _vec(b, "b", types, Q if part else D)
    half = _upper(b) if part else b
    a = _same("a", a, _WIDER[b.dtype], half.shape[-1])
    x, y = _int(a, half)
    return _bits(x + y, a.dtype)


def saddw(a, b):
    """SADDW: Elem[result, e, 2*esize] = (Int(Elem[operand1, e, 2*esize]) + Int(Elem[Vpart[m, 0], e, esize]))<2*esize-1:0>,
    wrapping. Arm ARM DDI 0487, C7.2 SADDW, SADDW2."""
    return _addw(a, b, SIGNED[:3], 0)


def saddw2(a, b):
    """SADDW2: as SADDW with the narrow operand Vpart[m, 1], the upper half of a 128-bit b.
    Arm ARM DDI 0487, C7.2 SADDW, SADDW2."""
    return _addw(a, b, SIGNED[:3], 1)


def uaddw(a, b):
    """UADDW: as SADDW with UInt elements, wrapping. Arm ARM DDI 0487, C7.2 UADDW, UADDW2."""
    return _addw(a, b, UNSIGNED[:3], 0)


def uaddw2(a, b):
    """UADDW2: as UADDW on the upper half of b. Arm ARM DDI 0487, C7.2 UADDW, UADDW2."""
    return _addw(a, b, UNSIGNED[:3], 1)


def _shll(a, shift, types, part):
    a = _vec(a, "a", types, Q if part else D)
    half = _upper(a) if part else a
    n = _shift_count(shift, a.dtype.itemsize * 8 - 1, lo=0)
    (x,) = _int(half)
    return _bits(x << n, _WIDER[a.dtype])   # exact: an esize-bit element shifted by < esize fits 2*esize bits


def sshll(a, shift):
    """SSHLL: Elem[result, e, 2*esize] = (SInt(Elem[Vpart[n, 0], e, esize]) << shift)<2*esize-1:0>, shift 0..esize-1
    (SXTL is SSHLL #0). Arm ARM DDI 0487, C7.2 SSHLL, SSHLL2."""
    return _shll(a, shift, SIGNED[:3], 0)


def sshll2(a, shift):
    """SSHLL2: as SSHLL on Vpart[n, 1], the upper half of a 128-bit a (SXTL2 is SSHLL2 #0).
    Arm ARM DDI 0487, C7.2 SSHLL, SSHLL2."""
    return _shll(a, shift, SIGNED[:3], 1)


def ushll(a, shift):
    """USHLL: as SSHLL with UInt(element) (UXTL is USHLL #0). Arm ARM DDI 0487, C7.2 USHLL, USHLL2."""
    return _shll(a, shift, UNSIGNED[:3], 0)


def ushll2(a, shift):
    """USHLL2: as USHLL on the upper half of a (UXTL2 is USHLL2 #0). Arm ARM DDI 0487, C7.2 USHLL, USHLL2."""
    return _shll(a, shift, UNSIGNED[:3], 1)


def addp(a, b):
    """ADDP: concat = operand2:operand1; Elem[result, e, esize] = (Elem[concat, 2e, esize] +
    Elem[concat, 2e+1, esize])<esize-1:0>: the pair sums of a, then of b, wrapping (signed or unsigned lanes alike).
    Arm ARM DDI 0487, C7.2 ADDP (vector)."""
    a = _vec(a, "a", SIGNED + UNSIGNED, DQ, 2)
    b = _same("b", b, a.dtype, a.shape[-1])
    x, y = _int(a, b)
    concat = np.concatenate([x, y], axis=-1)           # lane 0 = operand1's lane 0
    return _bits(concat[..., 0::2] + concat[..., 1::2], a.dtype)


def _minmax(a, b, types, pick):
    a = _vec(a, "a", types, DQ)
    b = _same("b", b, a.dtype, a.shape[-1])
    x, y = _int(a, b)
    return _bits(pick(x, y), a.dtype)      # one of the two elements: it fits


def smax(a, b):
    """SMAX: Elem[result, e, esize] = Max(SInt(element1), SInt(element2))<esize-1:0>, 8/16/32-bit lanes.
    Arm ARM DDI 0487, C7.2 SMAX."""
    return _minmax(a, b, SIGNED[:3], np.maximum)


def smin(a, b):
    """SMIN: Elem[result, e, esize] = Min(SInt(element1), SInt(element2))<esize-1:0>. Arm ARM DDI 0487, C7.2 SMIN."""
    return _minmax(a, b, SIGNED[:3], np.minimum)


def umax(a, b):
    """UMAX: Elem[result, e, esize] = Max(UInt(element1), UInt(element2))<esize-1:0>. Arm ARM DDI 0487, C7.2 UMAX."""
    return _minmax(a, b, UNSIGNED[:3], np.maximum)


def umin(a, b):
    """UMIN: Elem[result, e, esize] = Min(UInt(element1), UInt(element2))<esize-1:0>. Arm ARM DDI 0487, C7.2 UMIN."""
    return _minmax(a, b, UNSIGNED[:3], np.minimum)


# -- dot products and matrix multiply-accumulate --------------------------------------------------------------

def _dot(acc, a, b, a_t, b_t, index, acc_t=S32):
    a = operand(a, "a", a_t, DQ, 4)
    if index is None:
        b = _same("b", b, b_t, a.shape[-1])
        y = b.astype(np.int64)
    else:
        b = operand(b, "b", b_t, DQ, 4)
        i = _index(index, b.shape[-1] // 4, "32-bit group")
        y = np.tile(b[..., 4 * i:4 * i + 4].astype(np.int64), a.shape[-1] // 4)   # Elem[operand2, 4*index+i, 8]
    acc = _same("acc", acc, acc_t, a.shape[-1] // 4)
    p = a.astype(np.int64) * y
    total = acc.astype(np.int64) + p[..., 0::4] + p[..., 1::4] + p[..., 2::4] + p[..., 3::4]
    return _bits(total, acc_t)             # res: bits(32) + integer products: wraps mod 2^32


def sdot(acc, a, b, *, index=None):
    """SDOT: Elem[result, e, 32] = Elem[operand3, e, 32] + sum over i<4 of SInt(Elem[operand1, 4e+i, 8]) *
    SInt(Elem[operand2, 4e+i, 8]), wrapping mod 2^32; by element (index=) operand2's group 4*index+i.
    Arm ARM DDI 0487, C7.2 SDOT (vector / by element), FEAT_DotProd."""
    return _dot(acc, a, b, S8, S8, index)


def udot(acc, a, b, *, index=None):
    """UDOT: as SDOT with UInt elements; the u32 accumulator wraps mod 2^32.
    Arm ARM DDI 0487, C7.2 UDOT (vector / by element), FEAT_DotProd."""
    return _dot(acc, a, b, U8, U8, index, U32)


def usdot(acc, a, b, *, index=None):
    """USDOT: as SDOT with operand1 (Vn, a) UInt and operand2 (Vm, b) SInt, wrapping mod 2^32.
    Arm ARM DDI 0487, C7.2 USDOT (vector / by element), FEAT_I8MM."""
    return _dot(acc, a, b, U8, S8, index)


def sudot(acc, a, b, *, index):
    """SUDOT: by element only: operand1 (Vn, a) SInt, Elem[operand2, 4*index+i, 8] (Vm, b) UInt, wrapping mod 2^32.
    Arm ARM DDI 0487, C7.2 SUDOT (by element), FEAT_I8MM."""
    return _dot(acc, a, b, S8, U8, index)


def _mmla(acc, a, b, a_t, b_t, acc_t=S32):
    a, b = operand(a, "a", a_t, Q), operand(b, "b", b_t, Q)
    acc = _same("acc", acc, acc_t, 4)
    left = a.astype(np.int64).reshape(a.shape[:-1] + (2, 8))     # Elem[op1, 8*i+k]: row i
    right = b.astype(np.int64).reshape(b.shape[:-1] + (2, 8))    # Elem[op2, 8*j+k]: column j
    prods = (left[..., :, None, :] * right[..., None, :, :]).sum(axis=-1)   # [i, j]
    total = acc.astype(np.int64) + prods.reshape(prods.shape[:-2] + (4,))  # Elem[addend, 2*i+j, 32]
    return _bits(total, acc_t)


def smmla(acc, a, b):
    """SMMLA: MatMulAdd(addend, op1, op2, FALSE, FALSE): Elem[result, 2i+j, 32] = Elem[addend, 2i+j, 32] + sum over
    k<8 of SInt(Elem[op1, 8i+k, 8]) * SInt(Elem[op2, 8j+k, 8]): a is a 2x8 row-major matrix, b the 8x2 right matrix
    stored column by column; wraps mod 2^32. Arm ARM DDI 0487, C7.2 SMMLA (vector), FEAT_I8MM."""
    return _mmla(acc, a, b, S8, S8)


def ummla(acc, a, b):
    """UMMLA: MatMulAdd(addend, op1, op2, TRUE, TRUE), u32 accumulator wrapping mod 2^32.
    Arm ARM DDI 0487, C7.2 UMMLA (vector), FEAT_I8MM."""
    return _mmla(acc, a, b, U8, U8, U32)


def usmmla(acc, a, b):
    """USMMLA: MatMulAdd(addend, op1, op2, TRUE, FALSE): op1 (Vn, a) unsigned, op2 (Vm, b) signed; wraps mod 2^32.
    Arm ARM DDI 0487, C7.2 USMMLA (vector), FEAT_I8MM."""
    return _mmla(acc, a, b, U8, S8)


# -- requantization: doubling high multiplies, rounding shifts, saturating narrows ----------------------------

def _dmulh(a, b, index, rounding):
    a = _vec(a, "a", (S16, S32), DQ)
    b = _elements(a, b, "b", index)
    esize = a.dtype.itemsize * 8
    x, y = a.astype(np.int64), b.astype(np.int64)
    # (2*e1*e2 + round_const) >> esize, computed halved: (e1*e2 + round_const/2) >> (esize-1) is the same integer
    # and cannot leave int64 even for (-2^31) * (-2^31).
    product = x * y + ((1 << (esize - 2)) if rounding else 0)
    return _sat(product >> (esize - 1), a.dtype)


def sqdmulh(a, b, *, index=None):
    """SQDMULH: product = 2 * element1 * element2; Elem[result, e, esize] = SignedSatQ(product >> esize, esize):
    saturates only for element1 = element2 = INT_MIN. s16 or s32 lanes; index= the by-element form.
    Arm ARM DDI 0487, C7.2 SQDMULH (vector / by element)."""
    return _dmulh(a, b, index, False)


def sqrdmulh(a, b, *, index=None):
    """SQRDMULH: product = 2 * element1 * element2 + (1 << (esize - 1)); Elem[result, e, esize] =
    SignedSatQ(product >> esize, esize): the gemmlowp SaturatingRoundingDoublingHighMul; INT_MIN * INT_MIN
    saturates to INT_MAX. Arm ARM DDI 0487, C7.2 SQRDMULH (vector / by element)."""
    return _dmulh(a, b, index, True)


def _rshl(a, b, types):
    a = _vec(a, "a", types, DQ)
    b = _same("b", b, SIGNED[types.index(a.dtype)], a.shape[-1])
    esize = a.dtype.itemsize * 8
    # shift = SInt(Elem[operand2, e, esize]<7:0>): only the low byte counts.
    shift = b.astype(np.uint8).view(np.int8).astype(np.int64)    # astype keeps the low byte: a truncation, here wanted
    (x,) = _int(a)
    if esize == 64:
        shift = shift.astype(object)
    left = shift >= 0
    # shift >= 0: element << shift, kept to <esize-1:0>; a shift of esize or more leaves no low bits, so capping
    # it at esize changes nothing and keeps int64 exact.
    shifted = x << np.where(left, np.minimum(shift, esize), 0)
    # shift < 0: (element + (1 << (-shift - 1))) >> -shift, in unbounded precision. For -shift > esize the result
    # is 0 whatever the element (|element| < 2^(-shift-1)), so capping -shift at esize + 1 changes nothing.
    s = np.where(left, 1, np.minimum(-shift, esize + 1))
    rounded = (x + (np.ones_like(x) << (s - 1))) >> s
    return _bits(np.where(left, shifted, rounded), a.dtype)


def srshl(a, b):
    """SRSHL: shift = SInt(Elem[operand2, e, esize]<7:0>); element = (SInt(Elem[operand1, e, esize]) + round_const)
    << shift with round_const = 1 << (-shift - 1) for right shifts (a negative shift is a rounding right shift);
    Elem[result, e, esize] = element<esize-1:0>. Arm ARM DDI 0487, C7.2 SRSHL."""
    return _rshl(a, b, SIGNED)


def urshl(a, b):
    """URSHL: as SRSHL with UInt(element); the shift (b) is still signed and only its low byte counts.
    Arm ARM DDI 0487, C7.2 URSHL."""
    return _rshl(a, b, UNSIGNED)


def _shl(a, b, types, saturating):
    a = _vec(a, "a", types, DQ)
    b = _same("b", b, SIGNED[types.index(a.dtype)], a.shape[-1])
    esize = a.dtype.itemsize * 8
    shift = b.astype(np.uint8).view(np.int8).astype(np.int64)    # SInt(Elem[operand2, e, esize]<7:0>)
    (x,) = _int(a)
    if esize >= 32:                        # u32 << 32 leaves int64: Python integers
        x, shift = x.astype(object), shift.astype(object)
    left = shift >= 0
    # A left shift of esize or more saturates every nonzero element (and leaves no low bits), a right shift of
    # esize or more gives 0 or -1: capping the amount at esize changes no result and keeps the lanes exact.
    shifted = x << np.where(left, np.minimum(shift, esize), 0)
    floored = x >> np.where(left, 0, np.minimum(-shift, esize))
    element = np.where(left, shifted, floored)
    return _sat(element, a.dtype) if saturating else _bits(element, a.dtype)


def sshl(a, b):
    """SSHL: (register) shift = SInt(Elem[operand2, e, esize]<7:0>); element = SInt(Elem[operand1, e, esize]) << shift
    (a negative shift is an arithmetic right shift, truncating); Elem[result, e, esize] = element<esize-1:0>: left
    shifts wrap. Arm ARM DDI 0487, C7.2 SSHL."""
    return _shl(a, b, SIGNED, False)


def ushl(a, b):
    """USHL: (register) as SSHL with UInt(element); the shift (b) is signed, its low byte counts.
    Arm ARM DDI 0487, C7.2 USHL."""
    return _shl(a, b, UNSIGNED, False)


def sqshl(a, b):
    """SQSHL: (register) element = SInt(Elem[operand1, e, esize]) << SInt(Elem[operand2, e, esize]<7:0>) (negative:
    right, truncating); Elem[result, e, esize] = SignedSatQ(element, esize). Arm ARM DDI 0487, C7.2 SQSHL (register)."""
    return _shl(a, b, SIGNED, True)


def uqshl(a, b):
    """UQSHL: (register) as SQSHL with UInt(element) and UnsignedSatQ. Arm ARM DDI 0487, C7.2 UQSHL (register)."""
    return _shl(a, b, UNSIGNED, True)


def _rshr_imm(a, shift, types):
    a = _vec(a, "a", types, DQ)
    esize = a.dtype.itemsize * 8
    n = _shift_count(shift, esize)
    (x,) = _int(a)
    return _bits(_rshr(x, n), a.dtype)


def srshr(a, shift):
    """SRSHR: element = (SInt(Elem[operand, e, esize]) + (1 << (shift - 1))) >> shift; result element<esize-1:0>,
    shift 1..esize. Arm ARM DDI 0487, C7.2 SRSHR."""
    return _rshr_imm(a, shift, SIGNED)


def urshr(a, shift):
    """URSHR: as SRSHR with UInt(element); shift = esize can round up to 1. Arm ARM DDI 0487, C7.2 URSHR."""
    return _rshr_imm(a, shift, UNSIGNED)


def _narrow_upper(lo, narrow):
    """The "2" forms: Vpart[d, 1] = the narrowed lanes, Vpart[d, 0] = lo kept; returns the 128-bit register."""
    lo = _same("lo", lo, narrow.dtype, narrow.shape[-1])
    return np.concatenate(np.broadcast_arrays(lo, narrow), axis=-1)


def _qrshrn(a, shift, in_types, out_of):
    a = _vec(a, "a", in_types, Q)
    out_t = out_of(a.dtype)
    n = _shift_count(shift, out_t.itemsize * 8)
    (x,) = _int(a)
    return _sat(_rshr(x, n), out_t)        # SatQ(RShr(Int(element), shift, TRUE), esize, unsigned)


def sqrshrn(a, shift):
    """SQRSHRN: Elem[result, e, esize] = SignedSatQ((SInt(Elem[operand, e, 2*esize]) + (1 << (shift-1))) >> shift, esize),
    shift 1..esize; writes Vpart[d, 0] (the upper half of Vd becomes 0). Arm ARM DDI 0487, C7.2 SQRSHRN, SQRSHRN2."""
    return _qrshrn(a, shift, SIGNED[1:], lambda t: _NARROWER[t])


def sqrshrn2(lo, a, shift):
    """SQRSHRN2: as SQRSHRN into Vpart[d, 1], keeping Vpart[d, 0] = lo. Arm ARM DDI 0487, C7.2 SQRSHRN, SQRSHRN2."""
    return _narrow_upper(lo, sqrshrn(a, shift))


def uqrshrn(a, shift):
    """UQRSHRN: UnsignedSatQ((UInt(Elem[operand, e, 2*esize]) + (1 << (shift-1))) >> shift, esize), shift 1..esize.
    Arm ARM DDI 0487, C7.2 UQRSHRN, UQRSHRN2."""
    return _qrshrn(a, shift, UNSIGNED[1:], lambda t: _NARROWER[t])


def uqrshrn2(lo, a, shift):
    """UQRSHRN2: as UQRSHRN into Vpart[d, 1], keeping lo. Arm ARM DDI 0487, C7.2 UQRSHRN, UQRSHRN2."""
    return _narrow_upper(lo, uqrshrn(a, shift))


def sqrshrun(a, shift):
    """SQRSHRUN: Elem[result, e, esize] = UnsignedSatQ((SInt(Elem[operand, e, 2*esize]) + (1 << (shift-1))) >> shift,
    esize): signed in, unsigned out, shift 1..esize. Arm ARM DDI 0487, C7.2 SQRSHRUN, SQRSHRUN2."""
    return _qrshrn(a, shift, SIGNED[1:], lambda t: _UNSIGNED_OF[_NARROWER[t]])


def sqrshrun2(lo, a, shift):
    """SQRSHRUN2: as SQRSHRUN into Vpart[d, 1], keeping lo. Arm ARM DDI 0487, C7.2 SQRSHRUN, SQRSHRUN2."""
    return _narrow_upper(lo, sqrshrun(a, shift))


def _qxtn(a, in_types, out_of):
    a = _vec(a, "a", in_types, Q)
    (x,) = _int(a)
    return _sat(x, out_of(a.dtype))        # SatQ(Int(Elem[operand, e, 2*esize]), esize, unsigned)


def sqxtn(a):
    """SQXTN: Elem[result, e, esize] = SignedSatQ(SInt(Elem[operand, e, 2*esize]), esize) into Vpart[d, 0].
    Arm ARM DDI 0487, C7.2 SQXTN, SQXTN2."""
    return _qxtn(a, SIGNED[1:], lambda t: _NARROWER[t])


def sqxtn2(lo, a):
    """SQXTN2: as SQXTN into Vpart[d, 1], keeping lo. Arm ARM DDI 0487, C7.2 SQXTN, SQXTN2."""
    return _narrow_upper(lo, sqxtn(a))


def uqxtn(a):
    """UQXTN: Elem[result, e, esize] = UnsignedSatQ(UInt(Elem[operand, e, 2*esize]), esize).
    Arm ARM DDI 0487, C7.2 UQXTN, UQXTN2."""
    return _qxtn(a, UNSIGNED[1:], lambda t: _NARROWER[t])


def uqxtn2(lo, a):
    """UQXTN2: as UQXTN into Vpart[d, 1], keeping lo. Arm ARM DDI 0487, C7.2 UQXTN, UQXTN2."""
    return _narrow_upper(lo, uqxtn(a))


def sqxtun(a):
    """SQXTUN: Elem[result, e, esize] = UnsignedSatQ(SInt(Elem[operand, e, 2*esize]), esize): negative lanes give 0.
    Arm ARM DDI 0487, C7.2 SQXTUN, SQXTUN2."""
    return _qxtn(a, SIGNED[1:], lambda t: _UNSIGNED_OF[_NARROWER[t]])


def sqxtun2(lo, a):
    """SQXTUN2: as SQXTUN into Vpart[d, 1], keeping lo. Arm ARM DDI 0487, C7.2 SQXTUN, SQXTUN2."""
    return _narrow_upper(lo, sqxtun(a))


def _qadd(a, b, types):
    a = _vec(a, "a", types, DQ)
    b = _same("b", b, a.dtype, a.shape[-1])
    x, y = _int(a, b)
    return _sat(x + y, a.dtype)


def sqadd(a, b):
    """SQADD: Elem[result, e, esize] = SignedSatQ(SInt(element1) + SInt(element2), esize).
    Arm ARM DDI 0487, C7.2 SQADD."""
    return _qadd(a, b, SIGNED)


def uqadd(a, b):
    """UQADD: Elem[result, e, esize] = UnsignedSatQ(UInt(element1) + UInt(element2), esize).
    Arm ARM DDI 0487, C7.2 UQADD."""
    return _qadd(a, b, UNSIGNED)
