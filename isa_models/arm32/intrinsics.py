"""Registry entries for the 32-bit Arm (AArch32) models: the ACLE data-processing intrinsics of arm_acle.h that spell
each SIMD32 and saturating instruction (ACLE section "Data-processing intrinsics": __smlad, __sxtb16, __qsub, ...),
with the CPU features they need: armv6 for the SIMD32 instructions (lowp's name for the architecture version:
lowp.emulator.features.ARM_ARCHITECTURES), edsp for QADD/QSUB (the ARMv5TE DSP extension).

Registers are 32 bits of lanes (lowp.isa_models.arm32.simd32). SEL reads the GE flags that SSUB8/USUB8 leave, which
no intrinsic argument carries: SEL is registered as an instruction without an intrinsic (its model takes the flags;
tests/test_arm32_models.py checks it after SSUB8 and USUB8 on qemu-arm).
"""
from __future__ import annotations

import re

from lowp.isa_models.arm32 import simd32
from lowp.isa_models.lanes import DTYPES
from lowp.isa_models.registry import Instruction, Intrinsic, Param, add_instruction, add_intrinsic

SIMD32, DSP = ("armv6",), ("edsp",)
EXTENSION = {SIMD32: "ARMv6 SIMD32", DSP: "ARMv5TE DSP"}


def _p(spec: str) -> Param:
    """'a:s16x2' -> a register param; 'n:1..32' -> an immediate."""
    name, kind = spec.split(":")
    if ".." in kind:
        lo, hi = kind.split("..")
        return Param(name, "imm", lo=int(lo), hi=int(hi))
    t, lanes = kind.split("x")
    return Param(name, "vec", DTYPES[t], int(lanes))


def _instruction(mnemonic: str, features, operands: str, overflow: str, model=None) -> Instruction:
    model = model or getattr(simd32, mnemonic)
    return add_instruction(Instruction(
        mnemonic=mnemonic, arch="arm", extension=EXTENSION[features], operands=operands, overflow=overflow,
        pseudocode=re.split(r"[,:]", model.__doc__)[0].strip(), citation=simd32.ARM_ARM, model=model))


def _add(name: str, mnemonic: str, features, result: str, params, adapter, *, operands: str, overflow: str):
    inst = _instruction(mnemonic, features, operands, overflow)
    add_intrinsic(Intrinsic(name, inst, 32, features, "a32", tuple(_p(s) for s in params), _p("result:" + result),
                            adapter))


def _register():
    _add("__smlad", "smlad", SIMD32, "s32x1", ["a:s16x2", "b:s16x2", "acc:s32x1"], simd32.smlad,
         operands="s16 x s16 (2 pairs) + s32 -> s32", overflow="wraps mod 2^32 (sets Q)")
    _add("__sxtb16", "sxtb16", SIMD32, "s16x2", ["a:s8x4"], simd32.sxtb16,
         operands="s8 bytes 0, 2 -> s16", overflow="none (sign extension)")
    _add("__uxtb16", "uxtb16", SIMD32, "u16x2", ["a:u8x4"], simd32.uxtb16,
         operands="u8 bytes 0, 2 -> u16", overflow="none (zero extension)")
    _add("__uxtab16", "uxtab16", SIMD32, "u16x2", ["a:u16x2", "b:u8x4"], simd32.uxtab16,
         operands="16 + u8 bytes 0, 2 -> 16", overflow="wraps mod 2^16")
    _add("__sxtab16", "sxtab16", SIMD32, "s16x2", ["a:s16x2", "b:s8x4"], simd32.sxtab16,
         operands="16 + s8 bytes 0, 2 -> 16", overflow="wraps mod 2^16")
    for mnemonic in ("qadd16", "qsub16"):
        _add(f"__{mnemonic}", mnemonic, SIMD32, "s16x2", ["a:s16x2", "b:s16x2"], getattr(simd32, mnemonic),
             operands=f"s16 {'+' if 'add' in mnemonic else '-'} s16 -> s16", overflow="saturates to int16")
    for mnemonic in ("qadd", "qsub"):
        _add(f"__{mnemonic}", mnemonic, DSP, "s32x1", ["a:s32x1", "b:s32x1"], getattr(simd32, mnemonic),
             operands=f"s32 {'+' if 'add' in mnemonic else '-'} s32 -> s32", overflow="saturates to int32 (sets Q)")
    _add("__ssat", "ssat", SIMD32, "s32x1", ["a:s32x1", "n:1..32"], simd32.ssat,
         operands="s32 -> s32 in [-2^(n-1), 2^(n-1) - 1]", overflow="saturates to n bits (sets Q)")
    _add("__usat", "usat", SIMD32, "s32x1", ["a:s32x1", "n:0..31"], simd32.usat,
         operands="s32 -> u32 in [0, 2^n - 1]", overflow="saturates to n bits unsigned (sets Q)")
    _add("__ssub8", "ssub8", SIMD32, "s8x4", ["a:s8x4", "b:s8x4"], simd32.ssub8,
         operands="s8 - s8 -> s8, GE = difference >= 0", overflow="wraps mod 2^8")
    _add("__usub8", "usub8", SIMD32, "u8x4", ["a:u8x4", "b:u8x4"], simd32.usub8,
         operands="u8 - u8 -> u8, GE = a >= b", overflow="wraps mod 2^8")
    _instruction("sel", SIMD32, "bytes of a where GE, else of b", "none (a selection)")


_register()
