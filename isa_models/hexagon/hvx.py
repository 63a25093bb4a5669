"""Bit-exact models of the Hexagon HVX integer instructions int8 GEMM kernels are made of (XNNPACK's hvx ones:
src/qs8-gemm/c4-hvx.c.in and src/xnnpack/intrinsics-polyfill.h's Q6_V_vstu_variable), in 128-byte mode.

One function per instruction, named by its tag (V6_vrmpybv_acc is vrmpybv_acc), mirroring the behaviour section of
the "Qualcomm Hexagon V6x HVX Programmer's Reference Manual" (80-N2040-44 and its successors, one section per
instruction class: "HVX/MPY-DOUBLE", "HVX/ALU-RESOURCE", "HVX/PERMUTE-RESOURCE", ...), the pseudocode Qualcomm
also publishes in qemu as target/hexagon/imported/mmvec/ext.idef (each instruction's EXTINSN(V6_<tag>, ...) entry:
qemu/qemu @011b2512). Every model is verified against qemu-hexagon (tests/test_hexagon.py, `lowp isa verify
--arch hexagon`).

A register is a numpy array of lanes on the last axis, lane 0 first (the lowest-addressed byte in memory), over
any leading axes. A vector predicate (Q register) is a bool array of 128 entries, one per byte. A scalar register
operand Rt is an int (or integer array over the leading axes) holding the 32-bit register's value.
"""
from __future__ import annotations

import numpy as np

from lowp.isa_models.lanes import S8, S16, S32, U8, U32, add_wrapping, operand, saturate, widen, wrap

MANUAL = "Qualcomm Hexagon V6x HVX Programmer's Reference Manual"
IDEF = "qemu/qemu @011b2512 target/hexagon/imported/mmvec/ext.idef"
VBYTES = 128                        # 128-byte mode (hvx_length128b): the only one qemu-hexagon implements
VECTOR = (VBYTES * 8,)


def _v(x, name, dtype):
    return operand(x, name, dtype, widths=VECTOR)


def _bytes_of(rt, dtype) -> np.ndarray:
    """A 32-bit scalar register's lanes of `dtype` (little-endian: lane 0 is its low bits), over leading axes."""
    r = np.asarray(rt, np.int64) & 0xFFFFFFFF
    n = 4 // np.dtype(dtype).itemsize
    bits = 8 * np.dtype(dtype).itemsize
    return np.stack([wrap((r >> (bits * j)) & ((1 << bits) - 1), dtype) for j in range(n)], axis=-1)


def _reduce4(products) -> np.ndarray:
    """Sum each group of 4 adjacent byte products: the word lane i reads bytes 4i..4i+3."""
    return products.reshape(*products.shape[:-1], -1, 4).sum(axis=-1)


# ---- multiplies with 4-wide reduction (HVX/MPY) -----------------------------------------------------------------

def vrmpybv(vu, vv):
    """Vd.w=vrmpy(Vu.b,Vv.b): Vd.w[i] = sum_j Vu.b[4i+j] * Vv.b[4i+j], j = 0..3 (signed x signed; exact: 4 products
    of at most 2^14 fit 32 bits). ext.idef V6_vrmpybv."""
    vu, vv = _v(vu, "Vu", S8), _v(vv, "Vv", S8)
    return _reduce4(widen(vu) * widen(vv)).astype(S32)


def vrmpybv_acc(vx, vu, vv):
    """Vx.w+=vrmpy(Vu.b,Vv.b): Vx.w[i] += the 4-byte dot product of vrmpybv, modulo 2^32 (the accumulator wraps,
    no saturation). ext.idef V6_vrmpybv_acc."""
    vx = _v(vx, "Vx", S32)
    return add_wrapping(vx, vrmpybv(vu, vv).astype(np.int64))


def vrmpyubv(vu, vv):
    """Vd.uw=vrmpy(Vu.ub,Vv.ub): Vd.uw[i] = sum_j Vu.ub[4i+j] * Vv.ub[4i+j] (unsigned; exact). ext.idef
    V6_vrmpyubv."""
    vu, vv = _v(vu, "Vu", U8), _v(vv, "Vv", U8)
    return _reduce4(widen(vu) * widen(vv)).astype(U32)


def vrmpyubv_acc(vx, vu, vv):
    """Vx.uw+=vrmpy(Vu.ub,Vv.ub): the unsigned dot added modulo 2^32. ext.idef V6_vrmpyubv_acc."""
    vx = _v(vx, "Vx", U32)
    return add_wrapping(vx, vrmpyubv(vu, vv).astype(np.int64))


def vrmpybusv(vu, vv):
    """Vd.w=vrmpy(Vu.ub,Vv.b): Vd.w[i] = sum_j Vu.ub[4i+j] * Vv.b[4i+j] (unsigned x signed; exact). ext.idef
    V6_vrmpybusv."""
    vu, vv = _v(vu, "Vu", U8), _v(vv, "Vv", S8)
    return _reduce4(widen(vu) * widen(vv)).astype(S32)


def vrmpybusv_acc(vx, vu, vv):
    """Vx.w+=vrmpy(Vu.ub,Vv.b): the unsigned x signed dot added modulo 2^32. ext.idef V6_vrmpybusv_acc."""
    vx = _v(vx, "Vx", S32)
    return add_wrapping(vx, vrmpybusv(vu, vv).astype(np.int64))


def vrmpybus(vu, rt):
    """Vd.w=vrmpy(Vu.ub,Rt.b): Vd.w[i] = sum_j Vu.ub[4i+j] * Rt.b[j]: every word lane against the same 4 signed
    bytes of the scalar register. ext.idef V6_vrmpybus."""
    vu = _v(vu, "Vu", U8)
    rb = _bytes_of(rt, S8)
    return _reduce4(widen(vu) * np.tile(widen(rb), VBYTES // 4)).astype(S32)


def vrmpybus_acc(vx, vu, rt):
    """Vx.w+=vrmpy(Vu.ub,Rt.b): vrmpybus added modulo 2^32. ext.idef V6_vrmpybus_acc."""
    vx = _v(vx, "Vx", S32)
    return add_wrapping(vx, vrmpybus(vu, rt).astype(np.int64))


# ---- splats, logic, min/max, add/sub (HVX/ALU) -------------------------------------------------------------------

def lvsplatw(rt):
    """Vd=vsplat(Rt): every word lane = Rt. ext.idef V6_lvsplatw."""
    return np.repeat(_bytes_of(rt, S32), VBYTES // 4, axis=-1)


def lvsplath(rt):
    """Vd.h=vsplat(Rt): every halfword lane = Rt.h[0], the register's low 16 bits (V62). ext.idef V6_lvsplath."""
    return np.repeat(_bytes_of(rt, S16)[..., :1], VBYTES // 2, axis=-1)


def lvsplatb(rt):
    """Vd.b=vsplat(Rt): every byte lane = Rt.b[0], the register's low byte (V62). ext.idef V6_lvsplatb."""
    return np.repeat(_bytes_of(rt, S8)[..., :1], VBYTES, axis=-1)


def vand(vu, vv):
    """Vd=vand(Vu,Vv): bitwise and. ext.idef V6_vand."""
    return _v(vu, "Vu", U8) & _v(vv, "Vv", U8)


def vor(vu, vv):
    """Vd=vor(Vu,Vv): bitwise or. ext.idef V6_vor."""
    return _v(vu, "Vu", U8) | _v(vv, "Vv", U8)


def vmaxb(vu, vv):
    """Vd.b=vmax(Vu.b,Vv.b): signed byte maximum (V62). ext.idef V6_vmaxb."""
    return np.maximum(_v(vu, "Vu", S8), _v(vv, "Vv", S8))


def vminb(vu, vv):
    """Vd.b=vmin(Vu.b,Vv.b): signed byte minimum (V62). ext.idef V6_vminb."""
    return np.minimum(_v(vu, "Vu", S8), _v(vv, "Vv", S8))


def vaddhsat(vu, vv):
    """Vd.h=vadd(Vu.h,Vv.h):sat: halfword sum saturated to [-32768, 32767]. ext.idef V6_vaddhsat."""
    return saturate(widen(_v(vu, "Vu", S16)) + widen(_v(vv, "Vv", S16)), S16)


def vsubhsat(vu, vv):
    """Vd.h=vsub(Vu.h,Vv.h):sat: halfword difference saturated. ext.idef V6_vsubhsat."""
    return saturate(widen(_v(vu, "Vu", S16)) - widen(_v(vv, "Vv", S16)), S16)


def vaddw(vu, vv):
    """Vd.w=vadd(Vu.w,Vv.w): word sum modulo 2^32. ext.idef V6_vaddw."""
    return wrap(widen(_v(vu, "Vu", S32)) + widen(_v(vv, "Vv", S32)), S32)


def vsubw(vu, vv):
    """Vd.w=vsub(Vu.w,Vv.w): word difference modulo 2^32. ext.idef V6_vsubw."""
    return wrap(widen(_v(vu, "Vu", S32)) - widen(_v(vv, "Vv", S32)), S32)


def vaddwsat(vu, vv):
    """Vd.w=vadd(Vu.w,Vv.w):sat: word sum saturated to int32. ext.idef V6_vaddwsat."""
    return saturate(widen(_v(vu, "Vu", S32)) + widen(_v(vv, "Vv", S32)), S32)


# ---- shifts (HVX/SHIFT) -----------------------------------------------------------------------------------------

def vaslw(vu, rt):
    """Vd.w=vasl(Vu.w,Rt): each word shifted left by Rt & 31, the bits shifted out lost. ext.idef V6_vaslw."""
    s = np.asarray(rt, np.int64)[..., None] & 31
    return wrap(widen(_v(vu, "Vu", S32)) << s, S32)


def vasrw(vu, rt):
    """Vd.w=vasr(Vu.w,Rt): each word shifted right arithmetically by Rt & 31. ext.idef V6_vasrw."""
    s = np.asarray(rt, np.int64)[..., None] & 31
    return (widen(_v(vu, "Vu", S32)) >> s).astype(S32)


def vasrwh_rnd_sat(vu, vv, rt):
    """Vd.h=vasr(Vu.w,Vv.w,Rt):rnd:sat: shift = Rt & 15; each word rounded (+ 2^(shift-1) when shift > 0) and
    shifted right arithmetically, then saturated to int16; Vv's word i goes to halfword 2i, Vu's to 2i+1 (the even
    halfwords from Vv). ext.idef V6_vasrwhrndsat (NARROWING_SHIFT with fVSATH, fVROUND)."""
    s = np.asarray(rt, np.int64)[..., None] & 15
    bias = np.where(s > 0, np.left_shift(1, np.maximum(s - 1, 0)), 0)
    lo = saturate((widen(_v(vv, "Vv", S32)) + bias) >> s, S16)
    hi = saturate((widen(_v(vu, "Vu", S32)) + bias) >> s, S16)
    return np.stack([lo, hi], axis=-1).reshape(*lo.shape[:-1], -1)


# ---- packs, shuffles, alignment (HVX/PERMUTE) -------------------------------------------------------------------

def vpackwh_sat(vu, vv):
    """Vd.h=vpack(Vu.w,Vv.w):sat: Vd.h[i] = sat16(Vv.w[i]) and Vd.h[i + 32] = sat16(Vu.w[i]): the low half from
    Vv, the high half from Vu, in order (no interleave). ext.idef V6_vpackwh_sat."""
    vu, vv = _v(vu, "Vu", S32), _v(vv, "Vv", S32)
    return np.concatenate([saturate(widen(vv), S16), saturate(widen(vu), S16)], axis=-1)


def vpackhb_sat(vu, vv):
    """Vd.b=vpack(Vu.h,Vv.h):sat: Vd.b[i] = sat8(Vv.h[i]), Vd.b[i + 64] = sat8(Vu.h[i]). ext.idef V6_vpackhb_sat."""
    vu, vv = _v(vu, "Vu", S16), _v(vv, "Vv", S16)
    return np.concatenate([saturate(widen(vv), S8), saturate(widen(vu), S8)], axis=-1)


def vpackhub_sat(vu, vv):
    """Vd.ub=vpack(Vu.h,Vv.h):sat: Vd.ub[i] = usat8(Vv.h[i]), Vd.ub[i + 64] = usat8(Vu.h[i]). ext.idef
    V6_vpackhub_sat."""
    vu, vv = _v(vu, "Vu", S16), _v(vv, "Vv", S16)
    return np.concatenate([saturate(widen(vv), U8), saturate(widen(vu), U8)], axis=-1)


def vshuffb(vu):
    """Vd.b=vshuff(Vu.b): interleave the halves: Vd.b[2i] = Vu.b[i], Vd.b[2i+1] = Vu.b[i + 64]. ext.idef
    V6_vshuffb."""
    vu = _v(vu, "Vu", S8)
    half = VBYTES // 2
    return np.stack([vu[..., :half], vu[..., half:]], axis=-1).reshape(vu.shape)


def vdealb(vu):
    """Vd.b=vdeal(Vu.b): the inverse of vshuffb: Vd.b[i] = Vu.b[2i], Vd.b[i + 64] = Vu.b[2i+1]. ext.idef
    V6_vdealb."""
    vu = _v(vu, "Vu", S8)
    return np.concatenate([vu[..., 0::2], vu[..., 1::2]], axis=-1)


def vlalignb(vu, vv, rt):
    """Vd=vlalign(Vu,Vv,Rt): s = Rt & 127; Vd.ub[i] = Vu.ub[i - s] for i >= s, else Vv.ub[128 + i - s] (so s = 0
    gives Vu): the pair Vu:Vv shifted left by s bytes; vlalign(v, v, addr) rotates v so that lane 0 lands at addr's
    offset in its 128-byte block. ext.idef V6_vlalignb (shift = 128 - s; i + shift >= 128 ? Vu : Vv)."""
    vu, vv = _v(vu, "Vu", U8), _v(vv, "Vv", U8)
    shift = np.asarray(rt, np.int64)[..., None] & (VBYTES - 1)
    i = np.arange(VBYTES)
    src = i - shift
    from_v = np.take_along_axis(np.broadcast_to(vv, np.broadcast_shapes(vv.shape, src.shape)),
                                np.broadcast_to(src % VBYTES, np.broadcast_shapes(vv.shape, src.shape)), -1)
    from_u = np.take_along_axis(np.broadcast_to(vu, np.broadcast_shapes(vu.shape, src.shape)),
                                np.broadcast_to(src % VBYTES, np.broadcast_shapes(vu.shape, src.shape)), -1)
    return np.where(src >= 0, from_u, from_v)


# ---- vector predicates and the masked store (HVX/ALU, HVX/LOAD-STORE) --------------------------------------------

def vsetq(rt):
    """Qd4=vsetq(Rt): Qd[i] = i < (Rt & 127): the first Rt bytes (none for Rt = 128). ext.idef V6_pred_scalar2."""
    n = np.asarray(rt, np.int64)[..., None] & (VBYTES - 1)
    return np.arange(VBYTES) < n


def vsetq2(rt):
    """Qd4=vsetq2(Rt): Qd[i] = i <= ((Rt - 1) & 127): the first Rt bytes, all 128 for Rt = 128 (V62). ext.idef
    V6_pred_scalar2v2."""
    n = (np.asarray(rt, np.int64)[..., None] - 1) & (VBYTES - 1)
    return np.arange(VBYTES) <= n


def veqb(vu, vv):
    """Qd4=vcmp.eq(Vu.b,Vv.b): Qd[i] = Vu.b[i] == Vv.b[i]. ext.idef V6_veqb."""
    return _v(vu, "Vu", S8) == _v(vv, "Vv", S8)


def pred_or_n(qs, qt):
    """Qd4=or(Qs4,!Qt4): bytewise Qs | ~Qt. ext.idef V6_pred_or_n."""
    return np.asarray(qs, bool) | ~np.asarray(qt, bool)


def vS32b_qpred_ai(qv, block, vs):
    """if (Qv4) vmem(Rt+#s4)=Vs32: the aligned 128-byte block at Rt (Rt's low 7 bits ignored) gets Vs's bytes
    where Qv is set and keeps its own elsewhere. `block`: the memory's bytes before the store. ext.idef
    V6_vS32b_qpred_ai (fSTOREMMVQ)."""
    block, vs = _v(block, "block", U8), _v(vs, "Vs", U8)
    return np.where(np.asarray(qv, bool), vs, block)


def vS32b_nqpred_ai(qv, block, vs):
    """if (!Qv4) vmem(Rt+#s4)=Vs32: the bytes where Qv is clear. ext.idef V6_vS32b_nqpred_ai (fSTOREMMVNQ)."""
    block, vs = _v(block, "block", U8), _v(vs, "Vs", U8)
    return np.where(np.asarray(qv, bool), block, vs)
