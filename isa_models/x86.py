"""Bit-exact models of the x86 integer instructions int8 GEMM kernels are made of.

One function per instruction, mirroring the operation block of Intel's SDM (Vol. 2, "Instruction Set
Reference") or of the ISA Extensions reference for AVX-VNNI-INT8. Registers are numpy arrays of lanes on the
last axis, vectorized over any leading axes. Every sum is formed exactly in int64 and only then saturated or
wrapped, exactly where the pseudocode does.

Operand roles follow the pseudocode, not intuition: PMADDUBSW and VPDPBUSD read their *first* source as
unsigned bytes; VPDPBSUD reads its first source as *signed* bytes
(docs/research/x86-int8-instructions.md#operand-roles).
"""
from __future__ import annotations

import numpy as np

from lowp.isa_models.lanes import (F32, S8, S16, S32, S64, U8, U32, dot, f32_arith, f32_from_int32, f32_pick_less, f32_to_int32,
                    is_lanes, operand, pairs, quads, result_lanes, same_register, saturate, widen, wrap, writemask)

W = (128, 256, 512)          # SSE/AVX/AVX-512 register widths
W_MMX = (64, 128, 256, 512)  # PMADDUBSW and friends also have an MMX form


def vpmaddubsw(a, b, *, mask=None, zeroing=False, merge=None):
    """PMADDUBSW / VPMADDUBSW, Multiply and Add Packed Signed and Unsigned Bytes.
    DEST.word[j] := SaturateToSignedWord(SRC2.byte[2j+1]*SRC1.byte[2j+1] + SRC2.byte[2j]*SRC1.byte[2j]);
    SRC1 (a) unsigned, SRC2 (b) signed. Intel SDM Vol. 2B, PMADDUBSW."""
    a, b = operand(a, "a", U8, W_MMX, 2), operand(b, "b", S8, W_MMX, 2)
    same_register(("a", a), ("b", b))
    # int32 is exact here (|pair sum| <= 65280) and keeps the 2^32-input proof fast.
    return writemask(saturate(pairs(a.astype(np.int32) * b), S16), mask, zeroing, merge)


def vpmaddwd(a, b, *, mask=None, zeroing=False, merge=None):
    """PMADDWD / VPMADDWD, Multiply and Add Packed Integers.
    DEST.dword[j] := SRC1.word[2j+1]*SRC2.word[2j+1] + SRC1.word[2j]*SRC2.word[2j], kept to 32 bits: the one
    overflow, four words of 0x8000, gives 0x80000000. Intel SDM Vol. 2B, PMADDWD."""
    a, b = operand(a, "a", S16, W, 2), operand(b, "b", S16, W, 2)
    same_register(("a", a), ("b", b))
    return writemask(wrap(pairs(widen(a) * widen(b)), S32), mask, zeroing, merge)


def _byte_dot(src, a, b, a_type, b_type, acc_type, saturating, mask, zeroing, widths=W):
    """ORIGDEST.dword[j] + tmp1 + tmp2 + tmp3 + tmp4, tmpk = a.byte[4j+k] * b.byte[4j+k], exact."""
    a, b = operand(a, "a", a_type, widths, 4), operand(b, "b", b_type, widths, 4)
    same_register(("a", a), ("b", b))
    src = result_lanes("src", src, acc_type, a.shape[-1] // 4)
    # The four products and their sum are exact in int32 (|sum| < 2^18); the accumulation is exact in int64.
    total = widen(src) + quads(a.astype(np.int32) * b.astype(np.int32))
    r = saturate(total, acc_type) if saturating else wrap(total, acc_type)
    return writemask(r, mask, zeroing, None if mask is None or zeroing else src)


def vpdpbusd(src, a, b, *, mask=None, zeroing=False):
    """VPDPBUSD, Multiply and Add Unsigned and Signed Bytes: DEST.dword[j] := ORIGDEST.dword[j] + sum of four
    ZeroExtend16(SRC2.byte) * SignExtend16(SRC3.byte), wrapping. a (SRC2) unsigned, b (SRC3) signed; masked-off
    lanes keep the accumulator. Intel SDM Vol. 2C, VPDPBUSD."""
    return _byte_dot(src, a, b, U8, S8, S32, False, mask, zeroing)


def vpdpbusds(src, a, b, *, mask=None, zeroing=False):
    """VPDPBUSDS: as VPDPBUSD, then SIGNED_DWORD_SATURATE(ORIGDEST + tmp1..tmp4). Intel SDM Vol. 2C, VPDPBUSDS."""
    return _byte_dot(src, a, b, U8, S8, S32, True, mask, zeroing)


def _word_dot(src, a, b, saturating, mask, zeroing):
    a, b = operand(a, "a", S16, W, 2), operand(b, "b", S16, W, 2)
    same_register(("a", a), ("b", b))
    src = result_lanes("src", src, S32, a.shape[-1] // 2)
    total = widen(src) + pairs(widen(a) * widen(b))
    r = saturate(total, S32) if saturating else wrap(total, S32)
    return writemask(r, mask, zeroing, None if mask is None or zeroing else src)


def vpdpwssd(src, a, b, *, mask=None, zeroing=False):
    """VPDPWSSD, Multiply and Add Signed Word Integers: DEST.dword[j] := ORIGDEST.dword[j] +
    SRC2.word[2j]*SRC3.word[2j] + SRC2.word[2j+1]*SRC3.word[2j+1], wrapping. Intel SDM Vol. 2C, VPDPWSSD."""
    return _word_dot(src, a, b, False, mask, zeroing)


def vpdpwssds(src, a, b, *, mask=None, zeroing=False):
    """VPDPWSSDS: SIGNED_DWORD_SATURATE(ORIGDEST + tmp1 + tmp2) with the pair sum exact, so two products of
    (-32768)*(-32768) give 2^31 and saturate (measured on hardware,
    docs/research/x86-int8-instructions.md#the-vpdpwssds-pair-sum-corner). Intel SDM Vol. 2C."""
    return _word_dot(src, a, b, True, mask, zeroing)


# VPDPB[SS,SU,UU]D[S]: AVX-VNNI-INT8 has the VEX forms at 128/256 bits; AVX10.2 adds EVEX forms at 128/256/512
# with write masks (masked-off dwords keep W, or are zeroed). The operation per dword is the same.
AVX10 = "Intel Advanced Vector Extensions 10.2 (AVX10.2) Architecture Specification, VPDPB[SU,UU,SS]D[,S]"


def vpdpbssd(src, a, b, *, mask=None, zeroing=False):
    """VPDPBSSD: W.dword[j] + sum of SignExtend16(A.byte) * SignExtend16(B.byte), wrapping.
    Intel ISA Extensions Programming Reference (319433), VPDPB[SU,UU,SS]D[,S]; EVEX/512 and masks: AVX10.2."""
    return _byte_dot(src, a, b, S8, S8, S32, False, mask, zeroing)


def vpdpbssds(src, a, b, *, mask=None, zeroing=False):
    """VPDPBSSDS: SIGNED_DWORD_SATURATE(W.dword[j] + four s8*s8 products).
    Intel ISA Extensions Programming Reference (319433), VPDPB[SU,UU,SS]D[,S]; EVEX/512 and masks: AVX10.2."""
    return _byte_dot(src, a, b, S8, S8, S32, True, mask, zeroing)


def vpdpbsud(src, a, b, *, mask=None, zeroing=False):
    """VPDPBSUD: W.dword[j] + sum of SignExtend16(A.byte) * ZeroExtend16(B.byte): A *signed*, B unsigned
    (the opposite order to VPDPBUSD), wrapping.
    Intel ISA Extensions Programming Reference (319433), VPDPB[SU,UU,SS]D[,S]; EVEX/512 and masks: AVX10.2."""
    return _byte_dot(src, a, b, S8, U8, S32, False, mask, zeroing)


def vpdpbsuds(src, a, b, *, mask=None, zeroing=False):
    """VPDPBSUDS: SIGNED_DWORD_SATURATE(W.dword[j] + four s8*u8 products).
    Intel ISA Extensions Programming Reference (319433), VPDPB[SU,UU,SS]D[,S]; EVEX/512 and masks: AVX10.2."""
    return _byte_dot(src, a, b, S8, U8, S32, True, mask, zeroing)


def vpdpbuud(src, a, b, *, mask=None, zeroing=False):
    """VPDPBUUD: W.dword[j] + sum of ZeroExtend16(A.byte) * ZeroExtend16(B.byte), wrapping mod 2^32.
    Intel ISA Extensions Programming Reference (319433), VPDPB[SU,UU,SS]D[,S]; EVEX/512 and masks: AVX10.2."""
    return _byte_dot(src, a, b, U8, U8, U32, False, mask, zeroing)


def vpdpbuuds(src, a, b, *, mask=None, zeroing=False):
    """VPDPBUUDS: UNSIGNED_DWORD_SATURATE(W.dword[j] + four u8*u8 products), W read as u32.
    Intel ISA Extensions Programming Reference (319433), VPDPB[SU,UU,SS]D[,S]; EVEX/512 and masks: AVX10.2."""
    return _byte_dot(src, a, b, U8, U8, U32, True, mask, zeroing)


# -- AMX-INT8 -----------------------------------------------------------------------------------------------------
# A tile is `rows` x `colsb` bytes (palette 1: at most 16 rows of 64 bytes). TDPB*D reads tsrc1 (A) as rows x K
# bytes, tsrc2 (B) as K/4 rows of dwords each holding 4 bytes of one column group, and accumulates into
# tsrcdest (C) as rows x N dwords. As arrays: a (..., M, K), b (..., K/4, 4N), c (..., M, N) int32 (uint32 is not
# a thing here: every TDPB*D accumulator is a signed dword that wraps).
TILE_ROWS, TILE_COLSB = 16, 64


def _tile(x, name, dtype):
    if not is_lanes(x):
        raise ValueError(f"tile {name!r}: expected a numpy array (rows, bytes per row), got {type(x).__name__}")
    if x.dtype != np.dtype(dtype):
        raise ValueError(f"tile {name!r}: expected dtype {np.dtype(dtype)}, got {x.dtype}; lowp never casts a tile")
    if x.ndim < 2:
        raise ValueError(f"tile {name!r}: expected (..., rows, columns), got shape {x.shape}")
    rows, colsb = x.shape[-2], x.shape[-1] * x.dtype.itemsize
    if not 1 <= rows <= TILE_ROWS or not 1 <= colsb <= TILE_COLSB:
        raise ValueError(f"tile {name!r}: {rows} rows x {colsb} bytes; a palette-1 tile holds 1..{TILE_ROWS} rows "
                         f"of 1..{TILE_COLSB} bytes")
    if colsb % 4:
        raise ValueError(f"tile {name!r}: {colsb} bytes per row is not a whole number of dwords (#UD)")
    return x


def _tdpb(c, a, b, a_type, b_type):
    c, a, b = _tile(c, "c", S32), _tile(a, "a", a_type), _tile(b, "b", b_type)
    m, k = a.shape[-2:]
    if c.shape[-2] != m:
        raise ValueError(f"tiles: c has {c.shape[-2]} rows but a has {m}; tsrcdest.rows must equal tsrc1.rows (#UD)")
    if b.shape[-2] != k // 4:
        raise ValueError(f"tiles: b has {b.shape[-2]} rows but a has {k} bytes per row; tsrc2.rows must be "
                         f"tsrc1.colsb / 4 = {k // 4} (#UD)")
    if b.shape[-1] != 4 * c.shape[-1]:
        raise ValueError(f"tiles: b has {b.shape[-1]} bytes per row but c has {4 * c.shape[-1]}; tsrc2.colsb must "
                         "equal tsrcdest.colsb (#UD)")
    n = c.shape[-1]
    x = a.astype(np.int64)                                                    # [m, 4*kk + byte]
    y = b.astype(np.int64).reshape(b.shape[:-1] + (n, 4)).swapaxes(-3, -2)   # [n, kk, byte]
    # DPBD(tmp.dword[n], tsrc1.row[m].dword[kk], tsrc2.row[kk].dword[n]) over kk and the 4 bytes of each dword:
    # exact (|sum| < 2^23), then the dword accumulate keeps the low 32 bits.
    return wrap(widen(c) + dot(x, y.reshape(y.shape[:-3] + (n, k))), S32)


def tdpbssd(c, a, b):
    """TDPBSSD: FOR m, FOR k < tsrc1.colsb/4, FOR n < tsrcdest.colsb/4: DPBD(tmp.dword[n], tsrc1.row[m].dword[k],
    tsrc2.row[k].dword[n]), DPBD adding the four SignExtend(a.byte[i]) * SignExtend(b.byte[i]) to the dword,
    wrapping. Intel SDM Vol. 2C, TDPBSSD/TDPBSUD/TDPBUSD/TDPBUUD (Dot Product of Signed/Unsigned Bytes with
    Dword Accumulation); Intel ISE (319433) chapter 3, AMX."""
    return _tdpb(c, a, b, S8, S8)


def tdpbsud(c, a, b):
    """TDPBSUD: as TDPBSSD with tsrc1 (a) signed and tsrc2 (b) unsigned bytes. Intel SDM Vol. 2C, TDPBSSD/TDPBSUD/
    TDPBUSD/TDPBUUD."""
    return _tdpb(c, a, b, S8, U8)


def tdpbusd(c, a, b):
    """TDPBUSD: as TDPBSSD with tsrc1 (a) unsigned and tsrc2 (b) signed bytes (VPDPBUSD's roles). Intel SDM Vol. 2C,
    TDPBSSD/TDPBSUD/TDPBUSD/TDPBUUD."""
    return _tdpb(c, a, b, U8, S8)


def tdpbuud(c, a, b):
    """TDPBUUD: as TDPBSSD with both tiles unsigned bytes; the dword accumulator still wraps as a signed dword.
    Intel SDM Vol. 2C, TDPBSSD/TDPBSUD/TDPBUSD/TDPBUUD."""
    return _tdpb(c, a, b, U8, U8)


def _lanewise(a, b, dtype, saturating, mask, zeroing, merge):
    a, b = operand(a, "a", dtype, W), operand(b, "b", dtype, W)
    same_register(("a", a), ("b", b))
    total = widen(a) + widen(b)
    return writemask(saturate(total, dtype) if saturating else wrap(total, dtype), mask, zeroing, merge)


def vpaddsw(a, b, *, mask=None, zeroing=False, merge=None):
    """PADDSW / VPADDSW, Add Packed Signed Integers with Signed Saturation (words):
    DEST.word[j] := SaturateToSignedWord(SRC1.word[j] + SRC2.word[j]). Intel SDM Vol. 2B, PADDSB/PADDSW."""
    return _lanewise(a, b, S16, True, mask, zeroing, merge)


def vpaddw(a, b, *, mask=None, zeroing=False, merge=None):
    """PADDW / VPADDW, Add Packed Integers (words), wrapping mod 2^16. Intel SDM Vol. 2B, PADDB/PADDW/PADDD/PADDQ."""
    return _lanewise(a, b, S16, False, mask, zeroing, merge)


def vpsubsw(a, b, *, mask=None, zeroing=False, merge=None):
    """PSUBSW / VPSUBSW, Subtract Packed Signed Integers with Signed Saturation (words):
    DEST.word[j] := SaturateToSignedWord(SRC1.word[j] - SRC2.word[j]). Intel SDM Vol. 2B, PSUBSB/PSUBSW."""
    a, b = operand(a, "a", S16, W), operand(b, "b", S16, W)
    same_register(("a", a), ("b", b))
    return writemask(saturate(widen(a) - widen(b), S16), mask, zeroing, merge)


def vpaddb(a, b, *, mask=None, zeroing=False, merge=None):
    """PADDB / VPADDB, Add Packed Integers (bytes), wrapping mod 2^8. Intel SDM Vol. 2B, PADDB/PADDW/PADDD/PADDQ."""
    return _lanewise(a, b, S8, False, mask, zeroing, merge)


def vpaddd(a, b, *, mask=None, zeroing=False, merge=None):
    """PADDD / VPADDD, Add Packed Integers (dwords), wrapping mod 2^32. Intel SDM Vol. 2B, PADDB/PADDW/PADDD/PADDQ."""
    return _lanewise(a, b, S32, False, mask, zeroing, merge)


def vpshufb(a, b, *, mask=None, zeroing=False, merge=None):
    """PSHUFB / VPSHUFB, Packed Shuffle Bytes.
    Per 128-bit lane: DEST.byte[i] := 0 IF SRC2.byte[i][7] = 1 ELSE SRC1.byte[lane + SRC2.byte[i][3:0]]; the
    MMX form indexes its 64-bit register with SRC2.byte[i][2:0]. Bytes never cross a 128-bit lane. a (SRC1) is
    the table, b (SRC2) the control bytes; both u8 (s8 data is shuffled through a .view(np.uint8), a
    reinterpretation, not a cast). Intel SDM Vol. 2B, PSHUFB."""
    a, b = operand(a, "a", U8, W_MMX), operand(b, "b", U8, W_MMX)
    same_register(("a", a), ("b", b))
    a, b = np.broadcast_arrays(a, b)
    lanes = a.shape[-1]
    span = min(lanes, 16)                            # 8 for MMX, else one 128-bit lane
    index = (np.arange(lanes) // span) * span + (b & np.uint8(span - 1))
    picked = np.take_along_axis(a, index.astype(np.intp), axis=-1)
    return writemask(np.where(b & np.uint8(0x80), np.uint8(0), picked).astype(U8), mask, zeroing, merge)


def _extend(a, from_type, to_type, mask, zeroing, merge):
    # The source is the low half of a register: SSE4.1's 128-bit form reads 64 bits, so 32 bits is allowed.
    a = operand(a, "a", from_type, (32, 64, 128, 256))
    return writemask(a.astype(to_type), mask, zeroing, merge)


def vpmovsxwd(a, *, mask=None, zeroing=False, merge=None):
    """PMOVSXWD / VPMOVSXWD, Packed Move with Sign Extend, word to dword: DEST.dword[j] := SignExtend(SRC.word[j]);
    how int16 accumulators are spilled into int32. a holds just the words read. Intel SDM Vol. 2B, PMOVSX."""
    return _extend(a, S16, S32, mask, zeroing, merge)


def vpmovsxbw(a, *, mask=None, zeroing=False, merge=None):
    """PMOVSXBW / VPMOVSXBW, sign extend bytes to words: the exact (slower) 8-bit path of seed 002.
    Intel SDM Vol. 2B, PMOVSX."""
    return _extend(a, S8, S16, mask, zeroing, merge)


def vpmovzxbw(a, *, mask=None, zeroing=False, merge=None):
    """PMOVZXBW / VPMOVZXBW, zero extend unsigned bytes to words. Intel SDM Vol. 2B, PMOVZX."""
    return _extend(a, U8, S16, mask, zeroing, merge)


# The operand types TDPB[SU][SU]D read from A and B (the mnemonic's letters: s = int8, u = uint8).
AMX_TYPES = {"tdpbssd": (np.int8, np.int8), "tdpbsud": (np.int8, np.uint8), "tdpbusd": (np.uint8, np.int8),
             "tdpbuud": (np.uint8, np.uint8)}


# -- the fp32 requantization's instructions (XNNPACK's fp32 x86 output stage) -------------------------------------------
# Packs, shuffles and clamps are integer models like the ones above; the float ones compute IEEE binary32 with the
# MXCSR default (round to nearest even), through lanes.f32_* (numpy float32, or z3 floating-point terms).

INT32_INDEFINITE = -(1 << 31)        # 80000000H, what CVTPS2DQ gives for NaN and out-of-range values


def _by_128(x, per):
    """x's lanes as (..., 128-bit lanes, lanes per 128 bits): the packs and horizontal adds never cross them."""
    return x.reshape(x.shape[:-1] + (x.shape[-1] // per, per))


def _pack(a, b, from_type, to_type):
    a, b = operand(a, "a", from_type, W), operand(b, "b", from_type, W)
    same_register(("a", a), ("b", b))
    per = 16 // np.dtype(from_type).itemsize
    both = np.concatenate([_by_128(a, per), _by_128(b, per)], axis=-1)
    return saturate(widen(both.reshape(a.shape[:-1] + (2 * a.shape[-1],))), to_type)


def vpackssdw(a, b):
    """PACKSSDW / VPACKSSDW, Pack with Signed Saturation (dwords to words): per 128-bit lane,
    DEST.word[0..3] := SaturateSignedDwordToSignedWord(SRC1.dword[0..3]), DEST.word[4..7] := the same of
    SRC2.dword[0..3]. Intel SDM Vol. 2B, PACKSSWB/PACKSSDW."""
    return _pack(a, b, S32, S16)


def vpacksswb(a, b):
    """PACKSSWB / VPACKSSWB, Pack with Signed Saturation (words to bytes): per 128-bit lane, SRC1's 8 words then
    SRC2's, each SaturateSignedWordToSignedByte. Intel SDM Vol. 2B, PACKSSWB/PACKSSDW."""
    return _pack(a, b, S16, S8)


def vpackuswb(a, b):
    """PACKUSWB / VPACKUSWB, Pack with Unsigned Saturation: per 128-bit lane, SRC1's 8 signed words then SRC2's,
    each SaturateSignedWordToUnsignedByte. Intel SDM Vol. 2B, PACKUSWB."""
    return _pack(a, b, S16, U8)


def _max(a, b, dtype):
    a, b = operand(a, "a", dtype, W), operand(b, "b", dtype, W)
    same_register(("a", a), ("b", b))
    return np.maximum(a, b)


def vpmaxsb(a, b):
    """PMAXSB / VPMAXSB, Maximum of Packed Signed Integers (bytes): DEST.byte[j] := MAX(SRC1.byte[j], SRC2.byte[j]).
    Intel SDM Vol. 2B, PMAXSB/PMAXSW/PMAXSD/PMAXSQ."""
    return _max(a, b, S8)


def vpmaxub(a, b):
    """PMAXUB / VPMAXUB, Maximum of Packed Unsigned Integers (bytes): DEST.byte[j] := MAX(SRC1.byte[j],
    SRC2.byte[j]). Intel SDM Vol. 2B, PMAXUB/PMAXUW."""
    return _max(a, b, U8)


def vphaddd(a, b):
    """PHADDD / VPHADDD, Packed Horizontal Add (dwords): per 128-bit lane, DEST.dword[0] := SRC1.dword[1] +
    SRC1.dword[0], [1] := SRC1[3] + SRC1[2], [2] := SRC2[1] + SRC2[0], [3] := SRC2[3] + SRC2[2], wrapping mod
    2^32. Intel SDM Vol. 2B, PHADDW/PHADDD."""
    a, b = operand(a, "a", S32, (128, 256)), operand(b, "b", S32, (128, 256))
    same_register(("a", a), ("b", b))
    both = np.concatenate([pairs(widen(_by_128(a, 4))), pairs(widen(_by_128(b, 4)))], axis=-1)
    return wrap(both.reshape(a.shape), S32)


def vpermd(a, idx):
    """VPERMD, Permute Packed Doubleword Elements (_mm256_permutevar8x32_epi32(a, idx): a the table, idx the
    indices): DEST.dword[i] := SRC2.dword[SRC1.dword[i] & 7] (the index's low 3 bits; 4 with 16 lanes). Intel SDM
    Vol. 2B, VPERMD/VPERMW."""
    a, idx = operand(a, "a", S32, (256, 512)), operand(idx, "idx", S32, (256, 512))
    same_register(("a", a), ("idx", idx))
    a, idx = np.broadcast_arrays(a, idx)
    lanes = a.shape[-1]
    return np.take_along_axis(a, (idx & np.int32(lanes - 1)).astype(np.intp), axis=-1)


def vpsubw(a, b):
    """PSUBW / VPSUBW, Subtract Packed Integers (words), wrapping mod 2^16: DEST.word[j] := SRC1.word[j] -
    SRC2.word[j]. Intel SDM Vol. 2B, PSUBB/PSUBW/PSUBD."""
    a, b = operand(a, "a", S16, W), operand(b, "b", S16, W)
    same_register(("a", a), ("b", b))
    return wrap(widen(a) - widen(b), S16)


def vcvtdq2ps(a):
    """CVTDQ2PS / VCVTDQ2PS, Convert Packed Doubleword Integers to Packed Single Precision Floating-Point Values:
    DEST[i] := Convert_Integer_To_Single_Precision_Floating_Point(SRC[i]), rounded as MXCSR says (nearest even).
    Intel SDM Vol. 2A, CVTDQ2PS."""
    return f32_from_int32(operand(a, "a", S32, W))


def vcvtps2dq(a):
    """CVTPS2DQ / VCVTPS2DQ, Convert Packed Single Precision Floating-Point Values to Packed Signed Doubleword
    Integer Values: DEST[i] := Convert_Single_Precision_Floating_Point_To_Integer(SRC[i]), rounded as MXCSR says
    (nearest even); NaN or out of range gives the integer indefinite 80000000H. Intel SDM Vol. 2A, CVTPS2DQ."""
    return f32_to_int32(operand(a, "a", F32, W), "nearest", INT32_INDEFINITE)


def vcvttps2dq(a):
    """CVTTPS2DQ / VCVTTPS2DQ, Convert with Truncation Packed Single Precision Floating-Point Values to Packed
    Signed Doubleword Integer Values: DEST[i] := Convert_Single_Precision_Floating_Point_To_Integer_Truncate(SRC[i]);
    NaN or out of range gives the integer indefinite 80000000H. Intel SDM Vol. 2A, CVTTPS2DQ."""
    return f32_to_int32(operand(a, "a", F32, W), "zero", INT32_INDEFINITE)


def _float_binary(op, a, b):
    a, b = operand(a, "a", F32, W), operand(b, "b", F32, W)
    same_register(("a", a), ("b", b))
    return f32_arith(op, a, b)


def vmulps(a, b):
    """MULPS / VMULPS, Multiply Packed Single Precision Floating-Point Values: DEST[i] := SRC1[i] * SRC2[i], IEEE
    binary32 rounded as MXCSR says (nearest even). Intel SDM Vol. 2B, MULPS."""
    return _float_binary("mul", a, b)


def vaddps(a, b):
    """ADDPS / VADDPS, Add Packed Single Precision Floating-Point Values: DEST[i] := SRC1[i] + SRC2[i], IEEE
    binary32 rounded to nearest even. Intel SDM Vol. 2A, ADDPS."""
    return _float_binary("add", a, b)


def vsubps(a, b):
    """SUBPS / VSUBPS, Subtract Packed Single Precision Floating-Point Values: DEST[i] := SRC1[i] - SRC2[i], IEEE
    binary32 rounded to nearest even. Intel SDM Vol. 2B, SUBPS."""
    return _float_binary("sub", a, b)


def vminps(a, b):
    """MINPS / VMINPS, Minimum of Packed Single Precision Floating-Point Values: MIN(SRC1, SRC2) := IF (SRC1 <
    SRC2) THEN SRC1 ELSE SRC2, so a NaN in either or two zeros of either sign give SRC2. Intel SDM Vol. 2B, MINPS."""
    a, b = operand(a, "a", F32, W), operand(b, "b", F32, W)
    same_register(("a", a), ("b", b))
    return f32_pick_less(a, b)


# -- seed 004's q4.6 / q8 drivers (kernels/x86/gemm_q46.h): the column-sum compensation, the tail mask, REDUCE ------

def vpmulld(a, b, *, mask=None, zeroing=False, merge=None):
    """PMULLD / VPMULLD, Multiply Packed Signed Dword Integers and Store Low Result:
    TEMP[63:0] := SRC1.dword[j] * SRC2.dword[j]; DEST.dword[j] := TEMP[31:0]. Intel SDM Vol. 2B, PMULLD/PMULLQ."""
    a, b = operand(a, "a", S32, W), operand(b, "b", S32, W)
    same_register(("a", a), ("b", b))
    return writemask(wrap(widen(a) * widen(b), S32), mask, zeroing, merge)


def vpsubd(a, b, *, mask=None, zeroing=False, merge=None):
    """PSUBD / VPSUBD, Subtract Packed Integers (dwords), wrapping mod 2^32: DEST.dword[j] := SRC1.dword[j] -
    SRC2.dword[j]. Intel SDM Vol. 2B, PSUBB/PSUBW/PSUBD."""
    a, b = operand(a, "a", S32, W), operand(b, "b", S32, W)
    same_register(("a", a), ("b", b))
    return writemask(wrap(widen(a) - widen(b), S32), mask, zeroing, merge)


def vpcmpgtd(a, b):
    """PCMPGTD / VPCMPGTD (VEX), Compare Packed Signed Integers for Greater Than (dwords):
    DEST.dword[j] := FFFFFFFFH IF SRC1.dword[j] > SRC2.dword[j] ELSE 0. Intel SDM Vol. 2B, PCMPGTB/PCMPGTW/PCMPGTD."""
    a, b = operand(a, "a", S32, (128, 256)), operand(b, "b", S32, (128, 256))
    same_register(("a", a), ("b", b))
    return np.where(a > b, np.int32(-1), np.int32(0)).astype(S32)


def vpmovqd(a, *, mask=None, zeroing=False, merge=None):
    """VPMOVQD, Down Convert QWord to DWord (truncating): DEST.dword[j] := TruncateQuadWordToDWord(SRC.qword[j]),
    the low 32 bits. a holds the qwords read (8 of a zmm for the ymm result). Intel SDM Vol. 2C, VPMOVQD/VPMOVSQD/
    VPMOVUSQD."""
    a = operand(a, "a", S64, (128, 256, 512))
    return writemask(wrap(a, S32), mask, zeroing, merge)


def _byte_shift(a, count, right: bool):
    """The bytes of each 128-bit lane moved by `count` (an immediate; above 15 the lane is zeroed)."""
    a = operand(a, "a", U8, W)
    n = min(int(count), 16)
    per = _by_128(a, 16)
    zeros = np.zeros_like(per[..., :n])
    moved = np.concatenate([per[..., n:], zeros], axis=-1) if right else \
        np.concatenate([zeros, per[..., :16 - n]], axis=-1)
    return moved.reshape(a.shape)


def vpsrldq(a, imm):
    """PSRLDQ / VPSRLDQ, Shift Double Quadword Right Logical, per 128-bit lane: TEMP := COUNT (> 15 gives 16);
    DEST := SRC >> (TEMP * 8), zeros shifted in. a as u8 lanes. Intel SDM Vol. 2B, PSRLDQ."""
    return _byte_shift(a, imm, True)


def vpslldq(a, imm):
    """PSLLDQ / VPSLLDQ, Shift Double Quadword Left Logical, per 128-bit lane: TEMP := COUNT (> 15 gives 16);
    DEST := SRC << (TEMP * 8), zeros shifted in. a as u8 lanes. Intel SDM Vol. 2B, PSLLDQ."""
    return _byte_shift(a, imm, False)
