"""Bit-exact models of the SME integer outer products (and the SME2 multi-vector dot product) into ZA.

ZA is architectural state, not an operand: each model takes the part of ZA the instruction reads as its first
argument and returns the new contents, the pattern of the narrowing "top" forms' destination. Arm ARM DDI 0487
M.a.a, chapter C9 (SME instructions); section numbers in each docstring.

Shapes follow the streaming vector length SVL (CurrentVL in streaming mode), any power of two from 128 to 2048
bits: Zn and Zm hold SVL/8 bytes; a 32-bit tile ZAda.S is a (SVL/32, SVL/32) array, row `row` = horizontal slice
ZAdaH.S[row] (ZAtile element row*dim + col); the governing predicates Pn and Pm are bool arrays with one entry per
byte of Zn and Zm (ActivePredicateElement(mask, 4*row + k, esize DIV 4)).
"""
from __future__ import annotations

import numpy as np

from lowp.isa_models.arm import _bits
from lowp.isa_models.lanes import S8, S32, TYPE_NAMES, U8, U32, dot, is_lanes, result_lanes
from lowp.isa_models.sve import _z


def _pred(p, name, lanes):
    if not is_lanes(p) or p.dtype != np.bool_:
        raise ValueError(f"predicate {name!r}: expected a bool array, one entry per byte of the vector, got "
                         f"{getattr(p, 'dtype', type(p).__name__)}")
    if p.shape[-1] != lanes:
        raise ValueError(f"predicate {name!r}: {p.shape[-1]} entries, but the vectors have {lanes} bytes")
    return p


def _tile(za, dtype, dim):
    if not is_lanes(za) or za.dtype != dtype or za.ndim < 2 or za.shape[-2:] != (dim, dim):
        got = f"{za.dtype}{list(za.shape)}" if is_lanes(za) else type(za).__name__
        raise ValueError(f"za: expected the ZA tile as a ({dim}, {dim}) array of {TYPE_NAMES[np.dtype(dtype)]} "
                         f"(SVL/32 rows of SVL/32 elements for these {4 * dim}-byte vectors), got {got}; lowp never "
                         "casts an operand")
    return za


def _mopa(za, zn, zm, pn, pm, n_t, m_t, za_t):
    zn = _z(zn, "zn", (n_t,), group=4)
    bits = zn.shape[-1] * 8
    if bits & (bits - 1):
        raise ValueError(f"zn: {bits} bits is not a streaming vector length (SVL is a power of two, 128 to 2048)")
    zm = result_lanes("zm", zm, m_t, zn.shape[-1])
    pn, pm = _pred(pn, "pn", zn.shape[-1]), _pred(pm, "pm", zn.shape[-1])
    dim = zn.shape[-1] // 4
    za = _tile(za, za_t, dim)
    # A product counts only where both predicate elements are active: zeroing each operand's inactive bytes
    # drops exactly those products.
    x = np.where(pn, zn, 0).astype(np.int64).reshape(zn.shape[:-1] + (dim, 4))     # Elem[operand1, 4*row + k]
    y = np.where(pm, zm, 0).astype(np.int64).reshape(zm.shape[:-1] + (dim, 4))     # Elem[operand2, 4*col + k]
    prods = dot(x, y)                                       # [row, col], exact: |sum| <= 4 * 255 * 255
    return _bits(za.astype(np.int64) + prods, za_t)         # sum: bits(32) + integer, wraps mod 2^32


def smopa(za, zn, zm, pn, pm):
    """SMOPA (4-way, 32-bit): for every row, col < dim = SVL/32: Elem[result, row*dim+col, 32] = Elem[operand3,
    row*dim+col, 32] + sum over k<4, where Pn[4*row+k] and Pm[4*col+k] are active, of SInt(Elem[operand1, 4*row+k,
    8]) * SInt(Elem[operand2, 4*col+k, 8]); wraps mod 2^32. Arm ARM DDI 0487 M.a.a, C9.2.225 SMOPA (4-way)."""
    return _mopa(za, zn, zm, pn, pm, S8, S8, S32)


def umopa(za, zn, zm, pn, pm):
    """UMOPA (4-way, 32-bit): as SMOPA with UInt elements; the u32 tile wraps mod 2^32.
    Arm ARM DDI 0487 M.a.a, C9.2.314 UMOPA (4-way)."""
    return _mopa(za, zn, zm, pn, pm, U8, U8, U32)


def sumopa(za, zn, zm, pn, pm):
    """SUMOPA (4-way, 32-bit): Zn (zn) SInt, Zm (zm) UInt; wraps mod 2^32. Arm ARM DDI 0487 M.a.a, C9.2.278 SUMOPA."""
    return _mopa(za, zn, zm, pn, pm, S8, U8, S32)


def usmopa(za, zn, zm, pn, pm):
    """USMOPA (4-way, 32-bit): Zn (zn) UInt, Zm (zm) SInt; wraps mod 2^32. Arm ARM DDI 0487 M.a.a, C9.2.333 USMOPA."""
    return _mopa(za, zn, zm, pn, pm, U8, S8, S32)


def sdot_za(za, zn, zm, slice_index, offset=0):
    """SDOT (4-way, multiple vectors), SME2, 32-bit: vstride = (SVL/8) / nreg; vec = (slice + offset) MOD vstride;
    for r < nreg: ZAvector[vec] (as s32 elements) += sum over i<4 of SInt(Elem[Z(n+r), 4e+i, 8]) *
    SInt(Elem[Z(m+r), 4e+i, 8]), then vec += vstride; wraps mod 2^32.

    za: the whole ZA array as (SVL/8, SVL/32) s32 (ZA vector v = za[..., v, :]); zn, zm: the register groups as
    (nreg, SVL/8) s8, nreg 2 (VGx2) or 4 (VGx4); slice_index: the W8-W11 value, offset the immediate 0..7.
    Arm ARM DDI 0487 M.a.a, C9.2.202 SDOT (4-way, multiple vectors). Proven on qemu 11 (verify/sme2_proof.py);
    qemu 7.2 and 10.0.2 have no SME2."""
    zn = _z(zn, "zn", (S8,), group=4)
    if zn.ndim < 2 or zn.shape[-2] not in (2, 4):
        raise ValueError(f"zn: expected a group of 2 or 4 vectors as (nreg, SVL/8) s8, got shape {list(zn.shape)}")
    nreg, vectors = zn.shape[-2], zn.shape[-1]
    zm = result_lanes("zm", zm, S8, vectors)
    if zm.shape[-2] != nreg:
        raise ValueError(f"zm: expected {nreg} vectors like zn, got {zm.shape[-2]}")
    za = result_lanes("za", za, S32, vectors // 4)
    if za.shape[-2] != vectors:
        raise ValueError(f"za: expected the whole ZA array, {vectors} vectors of {vectors // 4} s32, got {za.shape[-2]}")
    if not 0 <= offset <= 7:
        raise ValueError(f"offset: {offset} is not encodable; expected 0..7")
    vstride = vectors // nreg
    rows = (int(slice_index) + offset) % vstride + vstride * np.arange(nreg)
    p = zn.astype(np.int64) * zm.astype(np.int64)
    dots = p.reshape(p.shape[:-1] + (-1, 4)).sum(axis=-1)   # (nreg, SVL/32)
    out = np.broadcast_to(za, np.broadcast_shapes(za.shape[:-2], dots.shape[:-2]) + za.shape[-2:]).copy()
    out[..., rows, :] = _bits(out[..., rows, :].astype(np.int64) + dots, S32)
    return out
