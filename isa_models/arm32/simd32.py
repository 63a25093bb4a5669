"""The ARMv6 SIMD32 (and saturating) A32 instructions XNNPACK's armsimd32 kernels are made of, bit for bit.

A general-purpose register is lanes of one type on the last axis (leading axes are a batch of registers), 32 bits
in all: s8x4 / u8x4 (bytes 0..3, byte 0 the least significant), s16x2 / u16x2 (halfword 0 = bits 15:0), s32x1.
The ACLE spells each register operand as int8x4_t, int16x2_t, ... (arm_acle.h typedefs of int32_t); the models take
the lanes. Flags: the sticky Q flag (QADD, QSUB, SSAT, SMLAD's overflow) is not modelled (no kernel reads it); the
GE flags SSUB8/USUB8 set and SEL reads are: the *_ge models return them, `sel` takes them.

Every docstring starts with the pseudocode's name and ends with its citation: Arm Architecture Reference Manual
ARMv7-A and ARMv7-R edition (DDI 0406C.d), section A8.8 (the A32/T32 instruction descriptions' Operation), as also
given for AArch32 in DDI 0487 (F5.1).
"""
from __future__ import annotations

import numpy as np

from lowp.isa_models.lanes import operand, saturate, wrap

ARM_ARM = "Arm ARM DDI 0406C.d, A8.8"
W32 = (32,)


def _reg(x, name: str, dtype) -> np.ndarray:
    return operand(x, name, dtype, W32)


def _bytes(x, name: str) -> np.ndarray:
    """A register of bytes, signed or unsigned (the instructions that only move bytes take either)."""
    if not isinstance(x, np.ndarray) or x.dtype not in (np.int8, np.uint8):
        return _reg(x, name, np.int8)         # names the operand and what it expected
    return _reg(x, name, x.dtype)


def _rotate(x: np.ndarray, rotation: int) -> np.ndarray:
    """ROR(R[m], rotation) on byte lanes: rotation 0, 8, 16 or 24 moves byte i + rotation/8 to byte i."""
    if rotation not in (0, 8, 16, 24):
        raise ValueError(f"rotation: expected 0, 8, 16 or 24 (the A32 encodings' ROR #n), got {rotation!r}")
    return np.roll(x, -(rotation // 8), axis=-1)


def smlad(a, b, acc):
    """SMLAD: product1 = SInt(R[n]<15:0>) * SInt(R[m]<15:0>); product2 = SInt(R[n]<31:16>) * SInt(R[m]<31:16>);
    result = product1 + product2 + SInt(R[a]); R[d] = result<31:0> (wraps mod 2^32; Q is set where it does not fit).
    Arm ARM DDI 0406C.d, A8.8 SMLAD."""
    a, b = _reg(a, "a", np.int16), _reg(b, "b", np.int16)
    acc = _reg(acc, "acc", np.int32)
    total = (a.astype(np.int64) * b.astype(np.int64)).sum(axis=-1, keepdims=True) + acc.astype(np.int64)
    return wrap(total, np.int32)


def sxtb16(a, rotation: int = 0):
    """SXTB16: rotated = ROR(R[m], rotation); R[d]<15:0> = SignExtend(rotated<7:0>, 16); R[d]<31:16> =
    SignExtend(rotated<23:16>, 16). Arm ARM DDI 0406C.d, A8.8 SXTB16."""
    r = _rotate(_bytes(a, "a"), rotation).view(np.int8)
    return r[..., 0::2].astype(np.int16)


def uxtb16(a, rotation: int = 0):
    """UXTB16: rotated = ROR(R[m], rotation); R[d]<15:0> = ZeroExtend(rotated<7:0>, 16); R[d]<31:16> =
    ZeroExtend(rotated<23:16>, 16). Arm ARM DDI 0406C.d, A8.8 UXTB16."""
    r = _rotate(_bytes(a, "a"), rotation).view(np.uint8)
    return r[..., 0::2].astype(np.uint16)


def uxtab16(a, b, rotation: int = 0):
    """UXTAB16: rotated = ROR(R[m], rotation); R[d]<15:0> = R[n]<15:0> + ZeroExtend(rotated<7:0>, 16);
    R[d]<31:16> = R[n]<31:16> + ZeroExtend(rotated<23:16>, 16) (each halfword wraps mod 2^16). R[n] as s16x2 or
    u16x2 lanes: the result has its type. Arm ARM DDI 0406C.d, A8.8 UXTAB16."""
    dtype = np.int16 if isinstance(a, np.ndarray) and a.dtype == np.int16 else np.uint16
    a = _reg(a, "a", dtype)
    return wrap(a.astype(np.int64) + uxtb16(b, rotation).astype(np.int64), dtype)


def sxtab16(a, b, rotation: int = 0):
    """SXTAB16: rotated = ROR(R[m], rotation); R[d]<15:0> = R[n]<15:0> + SignExtend(rotated<7:0>, 16);
    R[d]<31:16> = R[n]<31:16> + SignExtend(rotated<23:16>, 16) (each halfword wraps mod 2^16).
    Arm ARM DDI 0406C.d, A8.8 SXTAB16."""
    a = _reg(a, "a", np.int16)
    return wrap(a.astype(np.int64) + sxtb16(b, rotation).astype(np.int64), np.int16)


def qadd16(a, b):
    """QADD16: sum1 = SInt(R[n]<15:0>) + SInt(R[m]<15:0>); R[d]<15:0> = SignedSat(sum1, 16); the same for bits
    31:16. Arm ARM DDI 0406C.d, A8.8 QADD16."""
    a, b = _reg(a, "a", np.int16), _reg(b, "b", np.int16)
    return saturate(a.astype(np.int64) + b.astype(np.int64), np.int16)


def qsub16(a, b):
    """QSUB16: diff1 = SInt(R[n]<15:0>) - SInt(R[m]<15:0>); R[d]<15:0> = SignedSat(diff1, 16); the same for bits
    31:16. Arm ARM DDI 0406C.d, A8.8 QSUB16."""
    a, b = _reg(a, "a", np.int16), _reg(b, "b", np.int16)
    return saturate(a.astype(np.int64) - b.astype(np.int64), np.int16)


def qadd(a, b):
    """QADD: (R[d], sat) = SignedSatQ(SInt(R[m]) + SInt(R[n]), 32) (Q set on saturation).
    Arm ARM DDI 0406C.d, A8.8 QADD."""
    a, b = _reg(a, "a", np.int32), _reg(b, "b", np.int32)
    return saturate(a.astype(np.int64) + b.astype(np.int64), np.int32)


def qsub(a, b):
    """QSUB: (R[d], sat) = SignedSatQ(SInt(R[m]) - SInt(R[n]), 32), the first operand minus the second (Q set on
    saturation). Arm ARM DDI 0406C.d, A8.8 QSUB."""
    a, b = _reg(a, "a", np.int32), _reg(b, "b", np.int32)
    return saturate(a.astype(np.int64) - b.astype(np.int64), np.int32)


def _saturate_bits(x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return np.minimum(np.maximum(x.astype(np.int64), lo), hi).astype(np.int32)


def ssat(a, saturate_to: int):
    """SSAT: operand = Shift(R[n], shift_t, shift_n); (result, sat) = SignedSatQ(SInt(operand), saturate_to);
    R[d] = SignExtend(result, 32): clamp to [-2^(saturate_to-1), 2^(saturate_to-1) - 1], saturate_to 1..32 (the
    intrinsic __ssat has no shift). Arm ARM DDI 0406C.d, A8.8 SSAT."""
    a = _reg(a, "a", np.int32)
    if not 1 <= saturate_to <= 32:
        raise ValueError(f"saturate_to: expected 1..32, got {saturate_to!r}")
    return _saturate_bits(a, -(1 << (saturate_to - 1)), (1 << (saturate_to - 1)) - 1)


def usat(a, saturate_to: int):
    """USAT: operand = Shift(R[n], shift_t, shift_n); (result, sat) = UnsignedSatQ(SInt(operand), saturate_to);
    R[d] = ZeroExtend(result, 32): clamp to [0, 2^saturate_to - 1], saturate_to 0..31.
    Arm ARM DDI 0406C.d, A8.8 USAT."""
    a = _reg(a, "a", np.int32)
    if not 0 <= saturate_to <= 31:
        raise ValueError(f"saturate_to: expected 0..31, got {saturate_to!r}")
    return _saturate_bits(a, 0, (1 << saturate_to) - 1)


def ssub8_ge(a, b):
    """SSUB8: diff_i = SInt(R[n]<8i+7:8i>) - SInt(R[m]<8i+7:8i>); R[d]<8i+7:8i> = diff_i<7:0>; APSR.GE<i> =
    (diff_i >= 0): the difference (s8x4, wrapping) and the GE flags (bool x4).
    Arm ARM DDI 0406C.d, A8.8 SSUB8."""
    a, b = _reg(a, "a", np.int8), _reg(b, "b", np.int8)
    diff = a.astype(np.int64) - b.astype(np.int64)
    return wrap(diff, np.int8), diff >= 0


def ssub8(a, b):
    """SSUB8: R[d]<8i+7:8i> = (SInt(R[n]<8i+7:8i>) - SInt(R[m]<8i+7:8i>))<7:0> (the GE flags: ssub8_ge).
    Arm ARM DDI 0406C.d, A8.8 SSUB8."""
    return ssub8_ge(a, b)[0]


def usub8_ge(a, b):
    """USUB8: diff_i = UInt(R[n]<8i+7:8i>) - UInt(R[m]<8i+7:8i>); R[d]<8i+7:8i> = diff_i<7:0>; APSR.GE<i> =
    (diff_i >= 0), i.e. a_i >= b_i unsigned: the difference (u8x4, wrapping) and the GE flags (bool x4).
    Arm ARM DDI 0406C.d, A8.8 USUB8."""
    a, b = _reg(a, "a", np.uint8), _reg(b, "b", np.uint8)
    diff = a.astype(np.int64) - b.astype(np.int64)
    return wrap(diff, np.uint8), diff >= 0


def usub8(a, b):
    """USUB8: R[d]<8i+7:8i> = (UInt(R[n]<8i+7:8i>) - UInt(R[m]<8i+7:8i>))<7:0> (the GE flags: usub8_ge).
    Arm ARM DDI 0406C.d, A8.8 USUB8."""
    return usub8_ge(a, b)[0]


def sel(a, b, ge):
    """SEL: R[d]<8i+7:8i> = if APSR.GE<i> == '1' then R[n]<8i+7:8i> else R[m]<8i+7:8i>: byte i of a where GE<i>,
    else of b (ge: bool x4, as ssub8_ge / usub8_ge give them). Arm ARM DDI 0406C.d, A8.8 SEL."""
    a = _bytes(a, "a")
    b = _reg(b, "b", a.dtype)
    ge = np.asarray(ge, bool)
    if ge.shape[-1:] != (4,):
        raise ValueError(f"ge: expected 4 GE flags on the last axis, got shape {ge.shape}")
    return np.where(ge, a, b)


__all__ = ["qadd", "qadd16", "qsub", "qsub16", "sel", "smlad", "ssat", "ssub8", "ssub8_ge", "sxtab16", "sxtb16",
           "usat", "usub8", "usub8_ge", "uxtab16", "uxtb16"]
