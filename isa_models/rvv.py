"""Bit-exact models of the RISC-V "V" 1.0 integer instructions int8 GEMM kernels and their requantization are
made of: the (widening) multiply-accumulates and the fixed-point narrowing clip and fractional multiply.

One function per instruction form (`vwmacc_vv` is vwmacc.vv), mirroring the one-line operation the RVV 1.0
specification gives (riscv/riscv-v-spec@v1.0, v-spec.adoc; section numbers as in the published v1.0 PDF).
A register group is a numpy array of elements on the last axis, element 0 first, vectorized over any leading
axes. The element count is the vector length: the model computes the body elements it is given (vl of them,
any VLEN, any LMUL); which VLEN and LMUL a register shape means is the intrinsic layer's business
(rvv_intrinsics.py). SEW comes from the dtype. A scalar operand x[rs1] is an int (or an integer array over the
leading axes) within the C type the intrinsic gives it.

The fixed-point instructions take the rounding mode as a required keyword, vxrm='rnu' | 'rne' | 'rdn' | 'rod'
(RVV 1.0 section 3.8; never a default), and return `Fixed(result, vxsat)`: vxsat is True for a register where
any element saturated, the bit the instruction ORs into the sticky vxsat CSR (section 3.9).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from lowp.isa_models.lanes import S8, S16, S32, S64, TYPE_NAMES, U8, U16, U32, U64, add_wrapping, is_lanes, symbolic, wrap

SPEC = "RISC-V V extension 1.0 (riscv/riscv-v-spec@v1.0 v-spec.adoc)"
VXRM = ("rnu", "rne", "rdn", "rod")          # vxrm[1:0] = 0, 1, 2, 3 (section 3.8, table 'vxrm encoding')
SIGNED, UNSIGNED = (S8, S16, S32), (U8, U16, U32)
_WIDER = {S8: S16, S16: S32, S32: S64, U8: U16, U16: U32, U32: U64}
_NARROWER = {v: k for k, v in _WIDER.items()}


class Fixed(NamedTuple):
    """What a fixed-point instruction produces: the destination elements and whether any of them saturated."""
    result: np.ndarray
    vxsat: np.ndarray          # bool over the leading axes


# -- operand checks --------------------------------------------------------------------------------------------

def _vector(x, name, allowed):
    if not is_lanes(x):
        raise ValueError(f"operand {name!r}: expected a numpy array of elements, got {type(x).__name__}")
    if x.dtype not in allowed:
        names = ", ".join(TYPE_NAMES[d] for d in allowed)
        raise ValueError(f"operand {name!r}: expected elements of {names}, got dtype {x.dtype}; "
                         "lowp never casts an operand")
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"operand {name!r}: expected at least one element on the last axis, got shape {x.shape}")
    return x


def _like(x, name, dtype, other):
    """An operand read element by element with `other`: this dtype, the same element count."""
    x = _vector(x, name, (np.dtype(dtype),))
    if x.shape[-1] != other.shape[-1]:
        raise ValueError(f"operand {name!r} has {x.shape[-1]} elements but the other sources have "
                         f"{other.shape[-1]}; one vl applies to every operand")
    return x


def _scalar(x, name, dtype):
    """x[rs1] as the intrinsic's C type: an int or an integer array over the leading axes, within the range
    (or symbolic lanes of that type)."""
    if symbolic(x):
        if x.dtype != np.dtype(dtype):
            raise ValueError(f"operand {name!r}: expected a {TYPE_NAMES[np.dtype(dtype)]} scalar, got symbolic "
                             f"lanes of {x.dtype}; lowp never casts an operand")
        return x[..., None]
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer, np.ndarray)):
        raise ValueError(f"operand {name!r}: expected an int (x[rs1]), got {type(x).__name__}")
    v = np.asarray(x)
    if v.dtype.kind not in "iu":
        raise ValueError(f"operand {name!r}: expected integers, got dtype {v.dtype}")
    info = np.iinfo(dtype)
    if v.size and (int(v.min()) < info.min or int(v.max()) > info.max):
        raise ValueError(f"operand {name!r}: {TYPE_NAMES[np.dtype(dtype)]} scalar must lie in "
                         f"[{info.min}, {info.max}], got {x!r}")
    return v.astype(dtype)[..., None]          # broadcast over the elements


def _rounding(vxrm):
    if not isinstance(vxrm, str) or vxrm not in VXRM:
        raise ValueError(f"vxrm: expected one of {', '.join(map(repr, VXRM))} (the fixed-point rounding mode, "
                         f"RVV 1.0 section 3.8), got {vxrm!r}")
    return vxrm


def _exact(x):
    """The element's value as an exact integer: int64, or uint64 for unsigned 64-bit elements (always >= 0);
    symbolic lanes as unbounded integers (numpy's object lanes), so a u32 x u32 product stays exact too."""
    if symbolic(x):
        return x.astype(object)
    return x.astype(np.uint64 if x.dtype == U64 else np.int64)


def _low_bits(x, dtype):
    """The low SEW bits of an integer (the destination element)."""
    dtype = np.dtype(dtype)
    if symbolic(x):
        return wrap(x, dtype)
    return x.astype(np.dtype(f"u{dtype.itemsize}")).view(dtype)


def _wrapping_sum(product, vd):
    """product + vd kept to vd's width: both as two's-complement uint64, whose addition wraps mod 2^64, a
    multiple of 2^SEW (an exact int64 sum could leave int64, and int64 + uint64 would make a float)."""
    return add_wrapping(vd, product)


# -- rounding and clipping (section 3.8 and chapter 12) ---------------------------------------------------------

def roundoff(v, d, vxrm):
    """roundoff_signed / roundoff_unsigned(v, d) = (v >> d) + r, r by vxrm (RVV 1.0 section 3.8):
    rnu: v[d-1]; rne: v[d-1] & (v[d-2:0] != 0 | v[d]); rdn: 0; rod: !v[d] & v[d-1:0] != 0. No bit is rounded
    off when d = 0 (r = 0). v exact (int64, or uint64 >= 0); d per element, 0 <= d < 64."""
    vxrm = _rounding(vxrm)
    one = v.dtype.type(1)
    d = (d if is_lanes(d) else np.asarray(d)).astype(v.dtype)
    shifted = v >> d
    if vxrm == "rdn":
        return shifted
    dm1 = np.maximum(d, one) - one                          # d-1, kept >= 0; d = 0 masked below
    bit_d = (v >> d) & one                                  # v[d]
    bit_dm1 = (v >> dm1) & one                              # v[d-1]
    below = (v & ((one << dm1) - one)) != 0                 # v[d-2:0] != 0
    rest = (v & ((one << dm1 << one) - one)) != 0           # v[d-1:0] != 0 (d = 63: 1 << 63 wraps, minus 1 is right)
    if vxrm == "rnu":
        r = bit_dm1
    elif vxrm == "rne":
        r = bit_dm1 & (below | (bit_d == one))
    else:                                                   # rod: jam the rounded-off bits into the LSB
        r = ((bit_d == 0) & rest).astype(v.dtype)
    return shifted + np.where(d == 0, v.dtype.type(0), r.astype(v.dtype))


def _clip(x, dtype):
    """clip(): saturate to the destination type; which elements saturated (they set vxsat)."""
    info = np.iinfo(dtype)
    lo, hi = x.dtype.type(info.min), x.dtype.type(info.max)
    clipped = np.minimum(np.maximum(x, lo), hi)
    return clipped.astype(dtype), (clipped != x).any(axis=-1)


# -- single-width multiply-add (section 11.13) ------------------------------------------------------------------

ALL_SEW = SIGNED + UNSIGNED


def vmacc_vv(vd, vs1, vs2):
    """vmacc.vv: vd[i] = +(vs1[i] * vs2[i]) + vd[i], the low SEW bits of the product (wraps mod 2^SEW); signed
    and unsigned are the same bits. RVV 1.0 section 11.13, Vector Single-Width Integer Multiply-Add."""
    vs2 = _vector(vs2, "vs2", ALL_SEW)
    vs1, vd = _like(vs1, "vs1", vs2.dtype, vs2), _like(vd, "vd", vs2.dtype, vs2)
    return _wrapping_sum(_exact(vs1) * _exact(vs2), vd)


def vmacc_vx(vd, rs1, vs2):
    """vmacc.vx: vd[i] = +(x[rs1] * vs2[i]) + vd[i], wrapping mod 2^SEW. RVV 1.0 section 11.13."""
    vs2 = _vector(vs2, "vs2", ALL_SEW)
    vd = _like(vd, "vd", vs2.dtype, vs2)
    return _wrapping_sum(_exact(_scalar(rs1, "rs1", vs2.dtype)) * _exact(vs2), vd)


# -- widening multiply-add (section 11.14) ----------------------------------------------------------------------

def _wmacc(vd, x, vs2, x_types, vs2_types, vd_signed, scalar):
    vs2 = _vector(vs2, "vs2", vs2_types)
    sew = vs2.dtype.itemsize
    x_t = next(t for t in x_types if t.itemsize == sew)
    x = _scalar(x, "rs1", x_t) if scalar else _like(x, "vs1", x_t, vs2)
    wide = np.dtype(f"{'i' if vd_signed else 'u'}{2 * sew}")
    vd = _like(vd, "vd", wide, vs2)
    # The 2*SEW-bit product in int64 is exact, or (u32 x u32) wraps mod 2^64: the same low 2*SEW bits vd keeps.
    return _wrapping_sum(_exact(x) * _exact(vs2), vd)


def vwmacc_vv(vd, vs1, vs2):
    """vwmacc.vv: vd[i] = +(vs1[i] * vs2[i]) + vd[i], signed SEW x signed SEW -> 2*SEW, the full product
    added to a 2*SEW vd, wrapping mod 2^(2*SEW). RVV 1.0 section 11.14, Vector Widening Integer Multiply-Add."""
    return _wmacc(vd, vs1, vs2, SIGNED, SIGNED, True, False)


def vwmacc_vx(vd, rs1, vs2):
    """vwmacc.vx: vd[i] = +(x[rs1] * vs2[i]) + vd[i], signed, widening, wrapping. RVV 1.0 section 11.14."""
    return _wmacc(vd, rs1, vs2, SIGNED, SIGNED, True, True)


def vwmaccu_vv(vd, vs1, vs2):
    """vwmaccu.vv: vd[i] = +(vs1[i] * vs2[i]) + vd[i], unsigned, widening, wrapping mod 2^(2*SEW).
    RVV 1.0 section 11.14."""
    return _wmacc(vd, vs1, vs2, UNSIGNED, UNSIGNED, False, False)


def vwmaccu_vx(vd, rs1, vs2):
    """vwmaccu.vx: vd[i] = +(x[rs1] * vs2[i]) + vd[i], unsigned, widening. RVV 1.0 section 11.14."""
    return _wmacc(vd, rs1, vs2, UNSIGNED, UNSIGNED, False, True)


def vwmaccsu_vv(vd, vs1, vs2):
    """vwmaccsu.vv: vd[i] = +(signed(vs1[i]) * unsigned(vs2[i])) + vd[i]: vs1 signed, vs2 unsigned, vd signed
    2*SEW, wrapping. RVV 1.0 section 11.14."""
    return _wmacc(vd, vs1, vs2, SIGNED, UNSIGNED, True, False)


def vwmaccsu_vx(vd, rs1, vs2):
    """vwmaccsu.vx: vd[i] = +(signed(x[rs1]) * unsigned(vs2[i])) + vd[i]. RVV 1.0 section 11.14."""
    return _wmacc(vd, rs1, vs2, SIGNED, UNSIGNED, True, True)


def vwmaccus_vx(vd, rs1, vs2):
    """vwmaccus.vx: vd[i] = +(unsigned(x[rs1]) * signed(vs2[i])) + vd[i] (there is no .vv form).
    RVV 1.0 section 11.14."""
    return _wmacc(vd, rs1, vs2, UNSIGNED, SIGNED, True, True)


# -- narrowing fixed-point clip (section 12.5) ------------------------------------------------------------------

def _nclip(vs2, shift, vxrm, signed, scalar):
    vxrm = _rounding(vxrm)
    vs2 = _vector(vs2, "vs2", (S16, S32, S64) if signed else (U16, U32, U64))
    narrow = _NARROWER[vs2.dtype]
    bits = 2 * narrow.itemsize * 8
    # Only the low lg2(2*SEW) bits of the shift amount count.
    if scalar:
        amount = _scalar(shift, "rs1", U64) & np.uint64(bits - 1)
    else:
        amount = _like(shift, "vs1", np.dtype(f"u{narrow.itemsize}"), vs2) & (bits - 1)
    return Fixed(*_clip(roundoff(_exact(vs2), amount, vxrm), narrow))


def vnclip_wv(vs2, vs1, *, vxrm):
    """vnclip.wv: vd[i] = clip(roundoff_signed(vs2[i], vs1[i])): 2*SEW signed vs2, the low lg2(2*SEW) bits of
    the unsigned SEW vs1[i] as the shift, rounded by vxrm before saturating to signed SEW; a saturated element
    sets vxsat. RVV 1.0 section 12.5, Vector Narrowing Fixed-Point Clip Instructions."""
    return _nclip(vs2, vs1, vxrm, True, False)


def vnclip_wx(vs2, rs1, *, vxrm):
    """vnclip.wx: vd[i] = clip(roundoff_signed(vs2[i], x[rs1])), the shift the low lg2(2*SEW) bits of x[rs1]
    (also the .wi form, whose uimm is x[rs1] here). RVV 1.0 section 12.5."""
    return _nclip(vs2, rs1, vxrm, True, True)


def vnclipu_wv(vs2, vs1, *, vxrm):
    """vnclipu.wv: vd[i] = clip(roundoff_unsigned(vs2[i], vs1[i])), unsigned 2*SEW -> unsigned SEW, saturating
    (and setting vxsat) above 2^SEW - 1. RVV 1.0 section 12.5."""
    return _nclip(vs2, vs1, vxrm, False, False)


def vnclipu_wx(vs2, rs1, *, vxrm):
    """vnclipu.wx: vd[i] = clip(roundoff_unsigned(vs2[i], x[rs1])). RVV 1.0 section 12.5."""
    return _nclip(vs2, rs1, vxrm, False, True)


# -- fractional multiply with rounding and saturation (section 12.3) ---------------------------------------------

def _smul(vs2, x, vxrm, scalar):
    vxrm = _rounding(vxrm)
    vs2 = _vector(vs2, "vs2", SIGNED)
    x = _scalar(x, "rs1", vs2.dtype) if scalar else _like(x, "vs1", vs2.dtype, vs2)
    sew = vs2.dtype.itemsize * 8
    # The 2*SEW product is exact in int64 for SEW <= 32; only (-2^(SEW-1))^2 leaves SEW bits after the shift.
    return Fixed(*_clip(roundoff(_exact(vs2) * _exact(x), sew - 1, vxrm), vs2.dtype))


def vsmul_vv(vs2, vs1, *, vxrm):
    """vsmul.vv: vd[i] = clip(roundoff_signed(vs2[i] * vs1[i], SEW-1)): the 2*SEW product shifted right by SEW-1,
    rounded by vxrm, saturated to SEW (only INT_MIN * INT_MIN saturates, setting vxsat).
    RVV 1.0 section 12.3, Vector Single-Width Fractional Multiply with Rounding and Saturation."""
    return _smul(vs2, vs1, vxrm, False)


def vsmul_vx(vs2, rs1, *, vxrm):
    """vsmul.vx: vd[i] = clip(roundoff_signed(vs2[i] * x[rs1], SEW-1)). RVV 1.0 section 12.3."""
    return _smul(vs2, rs1, vxrm, True)
