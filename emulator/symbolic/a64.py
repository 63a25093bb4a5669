"""Symbolic execution of one AArch64 call (AAPCS64), for `lowp prove`.

The shape is fixed, so addresses, loop counters and control flow are concrete Python integers; the bytes of A and
B are symbolic (lowp.emulator.symbolic.Byte). A general register holds a concrete int (its 64 bits) or, when data
went through it, 8 Bytes; a V register holds 16 Bytes. Moving data (LDRB then STRB, LDR Q then STP Q, INS, ZIP2,
DUP) moves the Bytes themselves, so the exact lanes the models computed reach C unchanged.

Decoding is capstone's (detail on, cached per address). The vector arithmetic lowp models (SMLAL, SMULL, SADALP,
SDOT and its lane forms, SMMLA, SADDW, ...) is decoded by emulator/aarch64/a64.py, the same decoder the Unicorn emulator
uses, and runs on the models in lowp.isa_models.arm with bit-vector lanes. Everything else the kernels and their
compiled drivers execute has a handler here (HANDLERS, by capstone's mnemonic; the bitfield, conditional-select
and conditional-compare families by their encoding, because capstone prints them under many alias names).

A run stops short with Unsupported (an UNKNOWN verdict): an instruction without a handler (named with its
address), a conditional branch or select on flags computed from symbolic data ("data-dependent branch"), an address
computed from symbolic data ("data-dependent address"). Memory faults are symbolic.Memory's MemoryViolation.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import capstone
import numpy as np
import z3
from capstone import arm64 as cs

from lowp.isa_models.symbolic.bitvec import SymArray, SymInt

from lowp.emulator.aarch64 import a64
from lowp.emulator.symbolic import (LIBC, Byte, Image, Memory, Region, StepLimit, Unsupported, call_libc, concrete, const_bytes,
                       int_bytes, integer, lane_bytes, lanes)

MASK64 = (1 << 64) - 1
SENTINEL = 0x7FFF_DEAD_0000        # the return address: the call is over when the pc reaches it


const = const_bytes     # registers and the image move many constant bytes: one shared Byte per value


ZERO = const(0, 16)

_md = capstone.Cs(capstone.CS_ARCH_ARM64, capstone.CS_MODE_ARM)
_md.detail = True


# -- the machine state ----------------------------------------------------------------------------------------------

@dataclass
class State:
    image: Image
    memory: Memory
    x: list                  # x0..x30: int (64 bits, unsigned) or a list of 8 Byte
    sp: int
    v: list                  # v0..v31: 16 Byte each
    flags: tuple | None = (0, 0, 0, 0)     # N, Z, C, V; None = computed from symbolic data
    pc: int = 0
    steps: int = 0
    mnemonics: Counter = field(default_factory=Counter)


@dataclass(frozen=True)
class Insn:
    address: int
    word: int
    mnemonic: str
    text: str
    ops: tuple               # capstone operands
    writeback: bool
    handler: Callable
    model: a64.Op | None = None


# -- registers --------------------------------------------------------------------------------------------------------

_NAME = re.compile(r"([xwvqdshb])(\d+)$")
_FP_BYTES = {"q": 16, "d": 8, "s": 4, "h": 2, "b": 1}
_VAS = {cs.ARM64_VAS_16B: (1, 16), cs.ARM64_VAS_8B: (1, 8), cs.ARM64_VAS_4B: (1, 4), cs.ARM64_VAS_1B: (1, 1),
        cs.ARM64_VAS_8H: (2, 8), cs.ARM64_VAS_4H: (2, 4), cs.ARM64_VAS_2H: (2, 2), cs.ARM64_VAS_1H: (2, 1),
        cs.ARM64_VAS_4S: (4, 4), cs.ARM64_VAS_2S: (4, 2), cs.ARM64_VAS_1S: (4, 1),
        cs.ARM64_VAS_2D: (8, 2), cs.ARM64_VAS_1D: (8, 1), cs.ARM64_VAS_1Q: (16, 1)}


_SPECIAL = {"fp": ("x", 29), "lr": ("x", 30), "sp": ("sp", 64), "wsp": ("sp", 32), "xzr": ("zr", 64),
            "wzr": ("zr", 32)}


def reg_id(rid: int) -> tuple[str, int]:
    """A capstone register as (kind, number): x/w n for the general registers, (sp|zr, bits) for SP and the zero
    register, v/q/d/s/h/b n for the SIMD&FP ones."""
    name = _md.reg_name(rid)
    if name in _SPECIAL:
        return _SPECIAL[name]
    m = _NAME.match(name or "")
    if not m:
        raise Unsupported(f"register {name}")
    return m.group(1), int(m.group(2))


def reg(op) -> tuple[str, int]:
    return reg_id(op.reg)


def bits_of(kind: str, n: int) -> int:
    return 32 if kind == "w" else n if kind in ("sp", "zr") else 64


def width(op) -> int:
    return bits_of(*reg(op))


def is_gpr(op) -> bool:
    return op.type == cs.ARM64_OP_REG and reg(op)[0] in ("x", "w", "sp", "zr")


def read(st: State, op):
    return read_reg(st, *reg(op))


def write(st: State, op, value) -> None:
    write_reg(st, *reg(op), value)


def read_reg(st: State, kind: str, n: int):
    """A general register's value at its width: an int, or a list of Byte (8, or 4 for a w register)."""
    if kind == "zr":
        return 0
    if kind == "sp":
        return st.sp & (MASK64 if n == 64 else 0xFFFFFFFF)
    value = st.x[n]
    if kind == "w":
        return value & 0xFFFFFFFF if isinstance(value, int) else value[:4]
    return value


def write_reg(st: State, kind: str, n: int, value) -> None:
    """Set a general register from an int, bytes or a z3 term (a w register's write zero-extends to 64 bits)."""
    if kind == "zr":
        return
    bits = bits_of(kind, n)
    if not isinstance(value, (int, list)):     # a z3 term
        value = _from_term(value, bits)
    if isinstance(value, list):
        value = (value + ZERO)[:bits // 8] + ZERO[:8 - bits // 8]
        c = concrete(value)
        value = value if c is None else c
    if isinstance(value, int):
        value &= MASK64 if bits == 64 else 0xFFFFFFFF
    if kind == "sp":
        if not isinstance(value, int):
            raise Unsupported("data-dependent stack pointer", st.pc)
        st.sp = value
    else:
        st.x[n] = value


def _xreg(n: int, bits: int) -> tuple[str, int]:
    """Register number n of an encoding's Rd/Rn/Rm field where 31 is the zero register."""
    return ("zr", bits) if n == 31 else ("x" if bits == 64 else "w", n)


def vread(st: State, op) -> list[Byte]:
    return st.v[reg(op)[1]]


def vwrite(st: State, op, data: list[Byte]) -> None:
    """Write a SIMD&FP register: bytes past the data are zero (every write narrower than 128 bits clears them)."""
    st.v[reg(op)[1]] = list(data[:16]) + ZERO[len(data):]


def lane_size(op) -> int:
    """Bytes per element of a vector operand (its arrangement or element suffix), or of a scalar FP register."""
    if op.vas in _VAS:
        return _VAS[op.vas][0]
    kind, _ = reg(op)
    return _FP_BYTES.get(kind, 0)


def vbytes(op) -> int:
    """Bytes of a vector operand's arrangement (8 or 16), or of a scalar FP register."""
    if op.vas in _VAS:
        size, count = _VAS[op.vas]
        return size * count
    return _FP_BYTES[reg(op)[0]]


# -- values: int or bytes, and their z3 terms --------------------------------------------------------------------------

def term(value, bits: int):
    """A value as a z3 bit-vector of `bits` bits."""
    if isinstance(value, int):
        return z3.BitVecVal(value & ((1 << bits) - 1), bits)
    parts = [b.term() for b in reversed(value[:bits // 8])]
    return z3.simplify(z3.Concat(*parts) if len(parts) > 1 else parts[0])


def _from_term(t, bits: int):
    t = z3.simplify(t)
    if z3.is_bv_value(t):
        return t.as_long()
    return int_bytes(SymInt.from_bits(t, False), bits // 8)


def signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _shifted(v, kind: int, amount: int, bits: int):
    """A register operand's shift (LSL/LSR/ASR/ROR #amount) on an int or a z3 term."""
    if not amount:
        return v
    mask = (1 << bits) - 1
    if isinstance(v, int):
        if kind == cs.ARM64_SFT_LSL:
            return (v << amount) & mask
        if kind == cs.ARM64_SFT_LSR:
            return v >> amount
        if kind == cs.ARM64_SFT_ASR:
            return (signed(v, bits) >> amount) & mask
        if kind == cs.ARM64_SFT_ROR:
            return ((v >> amount) | (v << (bits - amount))) & mask
    else:
        if kind == cs.ARM64_SFT_LSL:
            return v << amount
        if kind == cs.ARM64_SFT_LSR:
            return z3.LShR(v, amount)
        if kind == cs.ARM64_SFT_ASR:
            return v >> amount
        if kind == cs.ARM64_SFT_ROR:
            return z3.RotateRight(v, amount)
    raise Unsupported(f"shift kind {kind}")


_EXTEND = {cs.ARM64_EXT_UXTB: (8, False), cs.ARM64_EXT_UXTH: (16, False), cs.ARM64_EXT_UXTW: (32, False),
           cs.ARM64_EXT_UXTX: (64, False), cs.ARM64_EXT_SXTB: (8, True), cs.ARM64_EXT_SXTH: (16, True),
           cs.ARM64_EXT_SXTW: (32, True), cs.ARM64_EXT_SXTX: (64, True)}


def _extended(v, ext: int, bits: int):
    n, sign = _EXTEND[ext]
    if n >= bits:
        return v
    if isinstance(v, int):
        v &= (1 << n) - 1
        return (signed(v, n) if sign else v) & ((1 << bits) - 1)
    low = z3.Extract(n - 1, 0, v)
    return z3.SignExt(bits - n, low) if sign else z3.ZeroExt(bits - n, low)


def operand(st: State, op, bits: int):
    """A source operand (register with its shift or extension, or immediate) as an int, or a z3 term when symbolic."""
    if op.type == cs.ARM64_OP_IMM:
        v = op.imm
        if op.shift.type == cs.ARM64_SFT_LSL:
            v <<= op.shift.value
        return v & ((1 << bits) - 1)
    v = read(st, op)
    src_bits = width(op)
    if not isinstance(v, int):
        v = term(v, src_bits)
        if src_bits < bits:
            v = z3.ZeroExt(bits - src_bits, v)
    if op.ext:
        v = _extended(v, op.ext, bits)
    if op.shift.type:
        v = _shifted(v, op.shift.type, op.shift.value, bits)
    return v


def _both_int(a, b) -> bool:
    return isinstance(a, int) and isinstance(b, int)


def _z(v, bits: int):
    return z3.BitVecVal(v, bits) if isinstance(v, int) else v


# -- flags and conditions ---------------------------------------------------------------------------------------------

def add_flags(a: int, b: int, carry: int, bits: int) -> tuple[int, tuple]:
    """a + b + carry and its NZCV (AddWithCarry)."""
    mask = (1 << bits) - 1
    total = a + b + carry
    result = total & mask
    exact = signed(a, bits) + signed(b, bits) + carry
    return result, (result >> (bits - 1), int(result == 0), int(total > mask), int(signed(result, bits) != exact))


def holds(st: State, cond: int, insn: Insn) -> bool:
    """ConditionHolds(cond) on NZCV; unknown flags are a data-dependent branch."""
    if cond >> 1 == 7:
        return True
    if st.flags is None:
        raise Unsupported("data-dependent branch", insn.address, insn.text)
    n, z, c, v = st.flags
    result = [z == 1, c == 1, n == 1, v == 1, c == 1 and z == 0, n == v, n == v and z == 0][cond >> 1]
    return not result if cond & 1 else result


# -- scalar integer instructions ---------------------------------------------------------------------------------------

def _arith(st: State, insn: Insn, dst, a, b, subtract: bool, set_flags: bool) -> None:
    bits = width(dst) if dst is not None else width(insn.ops[0])
    if _both_int(a, b):
        result, flags = add_flags(a, (~b if subtract else b) & ((1 << bits) - 1), int(subtract), bits)
        if set_flags:
            st.flags = flags
    else:
        result = _z(a, bits) - _z(b, bits) if subtract else _z(a, bits) + _z(b, bits)
        if set_flags:
            st.flags = None
    if dst is not None:
        write(st, dst, result)


def _add_sub(subtract: bool, set_flags: bool):
    def handler(st: State, insn: Insn):
        d, n, m = insn.ops
        bits = width(d)
        _arith(st, insn, d, operand(st, n, bits), operand(st, m, bits), subtract, set_flags)
    return handler


def _compare(negate: bool):
    def handler(st: State, insn: Insn):        # CMP = SUBS zr, CMN = ADDS zr
        n, m = insn.ops
        bits = width(n)
        _arith(st, insn, None, operand(st, n, bits), operand(st, m, bits), not negate, True)
    return handler


def _neg(st: State, insn: Insn):
    d, m = insn.ops
    bits = width(d)
    _arith(st, insn, d, 0, operand(st, m, bits), True, insn.mnemonic == "negs")


_LOGIC = {"and": (lambda a, b: a & b), "ands": (lambda a, b: a & b), "orr": (lambda a, b: a | b),
          "eor": (lambda a, b: a ^ b), "bic": (lambda a, b: a & ~b), "bics": (lambda a, b: a & ~b),
          "orn": (lambda a, b: a | ~b), "eon": (lambda a, b: a ^ ~b)}


def _logic_flags(st: State, result, bits: int) -> None:
    if isinstance(result, int):
        st.flags = (result >> (bits - 1), int(result == 0), 0, 0)
    else:
        st.flags = None


def _logical(st: State, insn: Insn):
    if insn.ops[0].vas:                         # a vector AND/ORR/EOR/BIC
        return _vector_bitwise(st, insn)
    d, n, m = insn.ops
    bits = width(d)
    a, b = operand(st, n, bits), operand(st, m, bits)
    fn = _LOGIC[insn.mnemonic]
    result = fn(a, b) & ((1 << bits) - 1) if _both_int(a, b) else fn(_z(a, bits), _z(b, bits))
    if insn.mnemonic in ("ands", "bics"):
        _logic_flags(st, result, bits)
    write(st, d, result)


def _tst(st: State, insn: Insn):
    n, m = insn.ops
    bits = width(n)
    a, b = operand(st, n, bits), operand(st, m, bits)
    _logic_flags(st, a & b if _both_int(a, b) else _z(a, bits) & _z(b, bits), bits)


def _mvn(st: State, insn: Insn):
    d, m = insn.ops
    bits = width(d)
    v = operand(st, m, bits)
    write(st, d, ~v & ((1 << bits) - 1) if isinstance(v, int) else ~v)


def _shift_reg(kind: int):
    def handler(st: State, insn: Insn):        # LSLV/LSRV/ASRV/RORV (the immediate forms are bitfield moves)
        d, n, m = insn.ops
        bits = width(d)
        amount = operand(st, m, bits)
        if not isinstance(amount, int):
            raise Unsupported("shift by a symbolic amount", insn.address, insn.text)
        v = operand(st, n, bits)
        write(st, d, _shifted(v, kind, amount % bits, bits))
    return handler


def _mul_add(subtract: bool):
    def handler(st: State, insn: Insn):        # MADD/MSUB (MUL/MNEG: accumulator zr)
        d, n, m, *acc = insn.ops
        bits = width(d)
        a, b = operand(st, n, bits), operand(st, m, bits)
        c = operand(st, acc[0], bits) if acc else 0
        if _both_int(a, b) and isinstance(c, int):
            p = a * b
            result = (c - p if subtract else c + p) & ((1 << bits) - 1)
        else:
            p = _z(a, bits) * _z(b, bits)
            result = _z(c, bits) - p if subtract else _z(c, bits) + p
        if insn.mnemonic == "mneg":
            result = (-result) & ((1 << bits) - 1) if isinstance(result, int) else -result
        write(st, d, result)
    return handler


def _concrete_ops(st: State, insn: Insn, *ops) -> list[int]:
    values = [operand(st, op, width(op)) for op in ops]
    if not all(isinstance(v, int) for v in values):
        raise Unsupported(f"{insn.mnemonic} of symbolic data", insn.address, insn.text)
    return values


def _mulh(sign: bool):
    def handler(st: State, insn: Insn):
        d, n, m = insn.ops
        a, b = _concrete_ops(st, insn, n, m)
        if sign:
            a, b = signed(a, 64), signed(b, 64)
        write(st, d, ((a * b) >> 64) & MASK64)
    return handler


def _divide(sign: bool):
    def handler(st: State, insn: Insn):        # division by zero gives 0; the quotient rounds toward zero
        d, n, m = insn.ops
        bits = width(d)
        a, b = _concrete_ops(st, insn, n, m)
        if sign:
            a, b = signed(a, bits), signed(b, bits)
        q = 0 if b == 0 else abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        write(st, d, q & ((1 << bits) - 1))
    return handler


def _long_mul(sign: bool, subtract: bool = False):
    def handler(st: State, insn: Insn):        # SMADDL/UMADDL/SMSUBL (SMULL/UMULL Xd, Wn, Wm: accumulator zr)
        d, n, m, *acc = insn.ops
        a, b = _concrete_ops(st, insn, n, m)
        c = _concrete_ops(st, insn, acc[0])[0] if acc else 0
        if sign:
            a, b = signed(a, 32), signed(b, 32)
        write(st, d, (c - a * b if subtract else c + a * b) & MASK64)
    return handler


def _mov(st: State, insn: Insn):
    d, s = insn.ops
    if d.vas or s.vas or not is_gpr(d) or (s.type == cs.ARM64_OP_REG and not is_gpr(s)):
        return _vector_mov(st, insn)
    if s.type == cs.ARM64_OP_IMM:               # MOVZ/MOVN/ORR immediate: capstone gives the value
        write(st, d, s.imm & MASK64)
    else:                                      # ORR Xd, XZR, Xm / ADD Xd, SP, #0: the bytes move unchanged
        write(st, d, read(st, s))


def _movz(st: State, insn: Insn):
    d, s = insn.ops
    write(st, d, operand(st, s, width(d)))


def _movn(st: State, insn: Insn):
    d, s = insn.ops
    bits = width(d)
    write(st, d, ~operand(st, s, bits) & ((1 << bits) - 1))


def _movk(st: State, insn: Insn):
    d, s = insn.ops
    shift = s.shift.value if s.shift.type else 0
    old = read(st, d)
    if not isinstance(old, int):
        raise Unsupported("movk into symbolic data", insn.address, insn.text)
    write(st, d, (old & ~(0xFFFF << shift)) | ((s.imm & 0xFFFF) << shift))


def _adr(st: State, insn: Insn):
    d, s = insn.ops
    write(st, d, s.imm & MASK64)


def _nop(st: State, insn: Insn):
    pass


# bitfield moves by encoding: sf opc 100110 N immr imms Rn Rd (SBFM 00, BFM 01, UBFM 10). capstone names them
# LSL/LSR/ASR (immediate), UBFX/UBFIZ/SBFX/SBFIZ/BFI/BFXIL/SXTB/SXTH/SXTW/UXTB/UXTH.

def _bits(w: int, hi: int, lo: int) -> int:
    return (w >> lo) & ((1 << (hi - lo + 1)) - 1)


def _bitfield(st: State, insn: Insn):
    w = insn.word
    bits = 64 if w >> 31 else 32
    opc, immr, imms = _bits(w, 30, 29), _bits(w, 21, 16), _bits(w, 15, 10)
    src = read_reg(st, *_xreg(_bits(w, 9, 5), 64))
    rd = _bits(w, 4, 0)
    old = read_reg(st, *_xreg(rd, 64))
    if imms >= immr:                           # field src<imms:immr> to bit 0 (UBFX, SBFX, LSR, ASR, BFXIL, SXT*)
        lsb, size, dest = immr, imms - immr + 1, 0
    else:                                      # field src<imms:0> to bit bits-immr (UBFIZ, SBFIZ, LSL, BFI)
        lsb, size, dest = 0, imms + 1, bits - immr
    moved = _byte_move(src, opc, lsb, size, dest, bits)
    if moved is not None:
        result = moved
    elif isinstance(src, int) and (opc != 1 or isinstance(old, int)):
        result = _bitfield_int(src, old if opc == 1 else 0, opc, lsb, size, dest, bits)
    else:
        result = _bitfield_term(term(src, 64), term(old, 64), opc, lsb, size, dest, bits)
    write_reg(st, *_xreg(rd, bits), result)


def _byte_move(src, opc: int, lsb: int, size: int, dest: int, bits: int):
    """UXTB/UXTH/UBFX #0 and SXTB/SXTH/SXTW of a symbolic register: move its bytes (keeping the lanes they came
    from) rather than rebuild a term."""
    if isinstance(src, int) or lsb or dest or size % 8 or opc == 1:
        return None
    n = size // 8
    low = src[:n]
    if opc == 2 or size == bits:
        return low
    wide = integer(low, signed=True)               # SBFM: sign-extend the exact lane
    return low + [Byte(wide, bits // 8, i) for i in range(n, bits // 8)] if wide.value is None else \
        wide.value & ((1 << bits) - 1)


def _bitfield_int(src: int, old: int, opc: int, lsb: int, size: int, dest: int, bits: int) -> int:
    field_ = (src >> lsb) & ((1 << size) - 1)
    mask = (1 << bits) - 1
    if opc == 1:                               # BFM: insert, keep the other bits
        keep = old & ~(((1 << size) - 1) << dest)
        return (keep | (field_ << dest)) & mask
    if opc == 0 and field_ >> (size - 1):      # SBFM: sign-extend above the field
        field_ -= 1 << size
    return (field_ << dest) & mask


def _bitfield_term(src, old, opc: int, lsb: int, size: int, dest: int, bits: int):
    f = z3.Extract(lsb + size - 1, lsb, src)
    if opc == 1:
        parts = []
        if dest + size < bits:
            parts.append(z3.Extract(bits - 1, dest + size, old))
        parts.append(f)
        if dest:
            parts.append(z3.Extract(dest - 1, 0, old))
        return z3.Concat(*parts) if len(parts) > 1 else parts[0]
    ext = z3.SignExt if opc == 0 else z3.ZeroExt
    wide = ext(bits - size, f) if size < bits else f
    return wide << dest


# conditional select by encoding: sf op S 11010100 Rm cond o2 Rn Rd: CSEL, CSINC, CSINV, CSNEG (and the aliases
# CSET, CSETM, CINC, CINV, CNEG).

def _csel(st: State, insn: Insn):
    w = insn.word
    bits = 64 if w >> 31 else 32
    op, o2 = _bits(w, 30, 30), _bits(w, 10, 10)
    rm, rn, rd = _bits(w, 20, 16), _bits(w, 9, 5), _bits(w, 4, 0)
    mask = (1 << bits) - 1
    if holds(st, _bits(w, 15, 12), insn):
        value = read_reg(st, *_xreg(rn, bits))
    else:
        value = read_reg(st, *_xreg(rm, bits))
        if op or o2:
            t = term(value, bits) if not isinstance(value, int) else value & mask
            if isinstance(t, int):
                t = {(0, 1): t + 1, (1, 0): ~t, (1, 1): -t}[(op, o2)] & mask
            else:
                t = {(0, 1): t + 1, (1, 0): ~t, (1, 1): -t}[(op, o2)]
            value = t
    write_reg(st, *_xreg(rd, bits), value)


# conditional compare by encoding: sf op 1 11010010 Rm|imm5 cond i 0 Rn 0 nzcv (CCMN op=0, CCMP op=1).

def _ccmp(st: State, insn: Insn):
    w = insn.word
    bits = 64 if w >> 31 else 32
    if st.flags is None:                       # the comparison may or may not happen: the flags stay unknown
        return
    if not holds(st, _bits(w, 15, 12), insn):
        nzcv = _bits(w, 3, 0)
        st.flags = (nzcv >> 3, (nzcv >> 2) & 1, (nzcv >> 1) & 1, nzcv & 1)
        return
    a = read_reg(st, *_xreg(_bits(w, 9, 5), bits))
    b = _bits(w, 20, 16) if _bits(w, 11, 11) else read_reg(st, *_xreg(_bits(w, 20, 16), bits))
    if not _both_int(a, b):
        st.flags = None
        return
    mask = (1 << bits) - 1
    subtract = bool(_bits(w, 30, 30))
    _, st.flags = add_flags(a & mask, (~b if subtract else b) & mask, int(subtract), bits)


# -- branches ---------------------------------------------------------------------------------------------------------

def _b(st: State, insn: Insn):
    return insn.ops[0].imm


def _bl(st: State, insn: Insn):
    st.x[30] = insn.address + 4
    return insn.ops[0].imm


def _b_cond(st: State, insn: Insn):
    return insn.ops[0].imm if holds(st, insn.word & 0xF, insn) else None


def _target(st: State, insn: Insn, op) -> int:
    value = read(st, op)
    if not isinstance(value, int):
        raise Unsupported("data-dependent branch target", insn.address, insn.text)
    return value


def _br(st: State, insn: Insn):
    return _target(st, insn, insn.ops[0])


def _blr(st: State, insn: Insn):
    target = _target(st, insn, insn.ops[0])
    st.x[30] = insn.address + 4
    return target


def _ret(st: State, insn: Insn):
    if insn.ops:
        return _target(st, insn, insn.ops[0])
    if not isinstance(st.x[30], int):
        raise Unsupported("data-dependent return address", insn.address, insn.text)
    return st.x[30]


def _known(st: State, insn: Insn, op):
    value = read(st, op)
    if not isinstance(value, int):
        value = concrete(value)
        if value is None:
            raise Unsupported("data-dependent branch", insn.address, insn.text)
    return value


def _cbz(zero: bool):
    def handler(st: State, insn: Insn):
        r, target = insn.ops
        return target.imm if (_known(st, insn, r) == 0) == zero else None
    return handler


def _tbz(zero: bool):
    def handler(st: State, insn: Insn):
        r, bit, target = insn.ops
        value = read(st, r)
        if isinstance(value, int):
            set_ = (value >> bit.imm) & 1
        else:
            byte = value[bit.imm // 8].value
            if byte is None:
                raise Unsupported("data-dependent branch", insn.address, insn.text)
            set_ = (byte >> (bit.imm % 8)) & 1
        return target.imm if (set_ == 0) == zero else None
    return handler


# -- loads and stores -------------------------------------------------------------------------------------------------

def _address_of(st: State, insn: Insn, value) -> int:
    if isinstance(value, int):
        return value
    c = concrete(value)
    if c is None:
        raise Unsupported("data-dependent address", insn.address, insn.text)
    return c


def address(st: State, insn: Insn) -> int:
    """The effective address of the memory operand; pre- and post-index writebacks update the base register.
    capstone gives a post-index amount as an operand after the memory operand, a pre-index one as its disp."""
    i = next(k for k, op in enumerate(insn.ops) if op.type == cs.ARM64_OP_MEM)
    mem = insn.ops[i]
    base_reg = reg_id(mem.mem.base)
    base = _address_of(st, insn, read_reg(st, *base_reg))
    offset = mem.mem.disp
    if mem.mem.index:
        idx_reg = reg_id(mem.mem.index)
        idx = _address_of(st, insn, read_reg(st, *idx_reg))
        bits = bits_of(*idx_reg)
        if mem.ext:
            idx = _extended(idx, mem.ext, 64)
        elif bits == 32:
            idx &= 0xFFFFFFFF
        if mem.shift.type == cs.ARM64_SFT_LSL:
            idx <<= mem.shift.value
        offset += idx
    ea = (base + offset) & MASK64
    post = insn.ops[i + 1:] if insn.writeback else ()
    if post:                                   # post-index: access at base, then base += amount
        amount = post[0].imm if post[0].type == cs.ARM64_OP_IMM else _address_of(st, insn, read(st, post[0]))
        write_reg(st, *base_reg, (base + amount) & MASK64)
        return base
    if insn.writeback:                         # pre-index: base = base + disp, access there
        write_reg(st, *base_reg, ea)
    return ea


_SIZED = {"b": 1, "h": 2, "sb": 1, "sh": 2, "sw": 4}


def _access_size(insn: Insn, op) -> int:
    """Bytes per register of a load/store: LDRB/LDRSH/... by suffix, else the register's size."""
    m = re.match(r"(?:ldr|str|ldur|stur)(s?[bhw])$", insn.mnemonic)
    if m:
        return _SIZED[m.group(1)]
    if insn.mnemonic == "ldpsw":
        return 4
    kind, _ = reg(op)
    return _FP_BYTES.get(kind) or width(op) // 8


def _loaded_into(st: State, insn: Insn, op, data: list[Byte]) -> None:
    """Put loaded bytes in a register: zero-extended, or sign-extended for LDRS*/LDPSW (the extension bytes are
    bytes of the exact sign-extended lane, the loaded ones stay the memory's own)."""
    if not is_gpr(op):
        vwrite(st, op, data)
        return
    bits = width(op)
    if insn.mnemonic.startswith(("ldrs", "ldurs", "ldpsw")) and len(data) * 8 < bits:
        c = concrete(data)
        if c is not None:
            write(st, op, signed(c, len(data) * 8) & ((1 << bits) - 1))
            return
        wide = integer(data, signed=True)
        data = data + [Byte(wide, bits // 8, k) for k in range(len(data), bits // 8)]
    write(st, op, data + ZERO[:8 - len(data)])


def _stored_from(st: State, op, n: int) -> list[Byte]:
    if not is_gpr(op):
        return vread(st, op)[:n]
    value = read(st, op)
    return const(value, n) if isinstance(value, int) else value[:n]


def _load(st: State, insn: Insn):
    regs = [op for op in insn.ops if op.type == cs.ARM64_OP_REG][:2 if insn.mnemonic.startswith("ldp")
                                                                     or insn.mnemonic == "ldnp" else 1]
    n = _access_size(insn, regs[0])
    ea = address(st, insn)
    data = st.memory.load(ea, n * len(regs), insn.address, insn.text)
    for k, op in enumerate(regs):
        _loaded_into(st, insn, op, data[k * n:(k + 1) * n])


def _store(st: State, insn: Insn):
    pair = insn.mnemonic in ("stp", "stnp")
    regs = [op for op in insn.ops if op.type == cs.ARM64_OP_REG][:2 if pair else 1]
    n = _access_size(insn, regs[0])
    data = [b for op in regs for b in _stored_from(st, op, n)]   # read before the writeback changes a base
    ea = address(st, insn)
    st.memory.store(ea, data, insn.address, insn.text)


def _vector_list(insn: Insn) -> list:
    return [op for op in insn.ops if op.type == cs.ARM64_OP_REG and not is_gpr(op)]


def _structure_address(st: State, insn: Insn, nbytes: int) -> int:
    """LD1/ST1/LD1R: [Xn|SP], post-indexed (bit 23) by the bytes transferred (Rm = 31) or by Xm. capstone 5 leaves
    the immediate post-index amount out of its operands, so the encoding decides."""
    w = insn.word
    rn = _bits(w, 9, 5)
    base_reg = ("sp", 64) if rn == 31 else ("x", rn)
    base = _address_of(st, insn, read_reg(st, *base_reg))
    if _bits(w, 23, 23):
        rm = _bits(w, 20, 16)
        amount = nbytes if rm == 31 else _address_of(st, insn, read_reg(st, "x", rm))
        write_reg(st, *base_reg, (base + amount) & MASK64)
    return base


def _ld1(st: State, insn: Insn):
    """LD1 {Vt.T, ...} (multiple structures, 1-4 registers), LD1 {Vt.T}[i] (one lane) and LD1R (replicate)."""
    regs = _vector_list(insn)
    if insn.mnemonic == "ld1r":
        size, count = _VAS[regs[0].vas]
        data = st.memory.load(_structure_address(st, insn, size), size, insn.address, insn.text)
        vwrite(st, regs[0], data * count)
    elif regs[0].vector_index != -1:
        size = lane_size(regs[0])
        _insert(st, regs[0], st.memory.load(_structure_address(st, insn, size), size, insn.address, insn.text))
    else:
        n = vbytes(regs[0])
        data = st.memory.load(_structure_address(st, insn, n * len(regs)), n * len(regs), insn.address, insn.text)
        for k, op in enumerate(regs):
            vwrite(st, op, data[k * n:(k + 1) * n])


def _st1(st: State, insn: Insn):
    regs = _vector_list(insn)
    if regs[0].vector_index != -1:
        size = lane_size(regs[0])
        i = regs[0].vector_index * size
        data = vread(st, regs[0])[i:i + size]
    else:
        n = vbytes(regs[0])
        data = [b for op in regs for b in vread(st, op)[:n]]
    st.memory.store(_structure_address(st, insn, len(data)), data, insn.address, insn.text)


# -- vector moves and permutations (bytes move unchanged) --------------------------------------------------------------

def _element(st: State, op) -> list[Byte]:
    size = lane_size(op)
    i = op.vector_index * size
    return vread(st, op)[i:i + size]


def _insert(st: State, op, data: list[Byte]) -> None:
    size = lane_size(op)
    i = op.vector_index * size
    old = list(vread(st, op))
    old[i:i + size] = data[:size]
    st.v[reg(op)[1]] = old


def _vector_mov(st: State, insn: Insn):
    """The MOV aliases on SIMD registers: ORR Vd, Vn, Vn (whole register), INS (element from an element or a
    general register), UMOV (element to a general register), DUP Vd.T scalar form (element to a scalar)."""
    d, s = insn.ops
    if is_gpr(d):                              # UMOV Wd/Xd, Vn.T[i]
        data = _element(st, s)
        write(st, d, data + ZERO[:8 - len(data)])
    elif d.vector_index != -1:                 # INS Vd.T[i], Vn.T[j] / Rn
        _insert(st, d, _element(st, s) if not is_gpr(s) else _stored_from(st, s, lane_size(d)))
    elif s.vector_index != -1:                 # DUP Sd, Vn.S[i]
        vwrite(st, d, _element(st, s))
    else:                                      # ORR Vd.T, Vn.T, Vn.T
        vwrite(st, d, vread(st, s)[:vbytes(d)])


def _umov(st: State, insn: Insn):
    return _vector_mov(st, insn)


def _smov(st: State, insn: Insn):
    d, s = insn.ops
    data = _element(st, s)
    bits = width(d)
    c = concrete(data)
    if c is not None:
        write(st, d, signed(c, 8 * len(data)) & ((1 << bits) - 1))
        return
    wide = integer(data, signed=True)
    write(st, d, data + [Byte(wide, bits // 8, k) for k in range(len(data), bits // 8)])


def _fmov(st: State, insn: Insn):
    """FMOV between general and SIMD&FP registers (bits unchanged), or between two FP registers."""
    d, s = insn.ops
    if s.type != cs.ARM64_OP_REG:
        raise Unsupported("fmov of an immediate", insn.address, insn.text)
    if is_gpr(d):
        data = _element(st, s) if s.vector_index != -1 else vread(st, s)[:width(d) // 8]
        write(st, d, data + ZERO[:8 - len(data)])
    else:
        data = _stored_from(st, s, vbytes(d) if d.vector_index == -1 else lane_size(d))
        _insert(st, d, data) if d.vector_index != -1 else vwrite(st, d, data)


def _dup(st: State, insn: Insn):
    d, s = insn.ops
    size, count = _VAS[d.vas]
    elem = _element(st, s) if not is_gpr(s) else _stored_from(st, s, size)
    vwrite(st, d, elem * count)


def _movi(st: State, insn: Insn):
    """MOVI/MVNI: an immediate in every element (capstone gives the element value and its LSL/MSL shift)."""
    d, imm = insn.ops
    size, count = _VAS.get(d.vas, (8, 1))
    value = imm.imm
    if imm.shift.type == cs.ARM64_SFT_LSL:
        value <<= imm.shift.value
    elif imm.shift.type == cs.ARM64_SFT_MSL:
        value = (value << imm.shift.value) | ((1 << imm.shift.value) - 1)
    if insn.mnemonic == "mvni":
        value = ~value
    value &= (1 << (8 * size)) - 1
    vwrite(st, d, const(value, size) * count)


def _elements(data: list[Byte], size: int) -> list[list[Byte]]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def _permute(kind: str):
    def handler(st: State, insn: Insn):        # ZIP1/ZIP2/UZP1/UZP2/TRN1/TRN2
        d, n, m = insn.ops
        size, count = _VAS[d.vas]
        a = _elements(vread(st, n)[:size * count], size)
        b = _elements(vread(st, m)[:size * count], size)
        half = count // 2
        if kind in ("zip1", "zip2"):
            base = 0 if kind == "zip1" else half
            out = [e for i in range(half) for e in (a[base + i], b[base + i])]
        elif kind in ("uzp1", "uzp2"):
            out = (a + b)[kind == "uzp2"::2]
        else:
            odd = kind == "trn2"
            out = [e for i in range(0, count, 2) for e in (a[i + odd], b[i + odd])]
        vwrite(st, d, [x for e in out for x in e])
    return handler


def _ext(st: State, insn: Insn):
    d, n, m, imm = insn.ops
    total = vbytes(d)
    data = (vread(st, n)[:total] + vread(st, m)[:total])[imm.imm:imm.imm + total]
    vwrite(st, d, data)


# -- vector arithmetic the models do not cover as instructions: on bit-vector lanes ---------------------------------

_SIGNED = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}


def _vlanes(st: State, op) -> SymArray:
    return lanes(vread(st, op)[:vbytes(op)], _SIGNED[lane_size(op)])


def _addv(st: State, insn: Insn):
    """ADDV: the sum of the lanes, modulo the element size (numpy's fixed-width sum does that)."""
    d, s = insn.ops
    vwrite(st, d, lane_bytes(_vlanes(st, s).sum()))


def _vector_add(subtract: bool):
    def handler(st: State, insn: Insn):        # ADD/SUB Vd.T, Vn.T, Vm.T: lanes wrap at their size
        d, n, m = insn.ops
        if not d.vas:
            return _add_sub(subtract, False)(st, insn)
        a, b = _vlanes(st, n), _vlanes(st, m)
        vwrite(st, d, lane_bytes(a - b if subtract else a + b))
    return handler


def _vector_bitwise(st: State, insn: Insn):
    d, n, m = insn.ops
    total = vbytes(d)
    fn = _LOGIC[insn.mnemonic]
    out = []
    for x, y in zip(vread(st, n)[:total], vread(st, m)[:total]):
        if x.value is not None and y.value is not None:
            out.extend(const(fn(x.value, y.value) & 0xFF, 1))
        else:
            out.append(Byte(SymInt.from_bits(z3.simplify(fn(x.term(), y.term())), False), 1, 0))
    vwrite(st, d, out)


def _model(st: State, insn: Insn):
    """An instruction lowp models (emulator/aarch64/a64.py decodes it): the model on bit-vector lanes of the operand
    registers; the result's lanes are written as they are (exact where their intervals fit)."""
    op = insn.model
    inputs = [lanes(st.v[o.reg][:o.nbytes], o.dtype) for o in op.operands]
    result = op.model(*inputs, **dict(op.kwargs))
    st.v[op.rd] = lane_bytes(result) + ZERO[result.size * result.dtype.itemsize:]


# -- the dispatch table -----------------------------------------------------------------------------------------------

HANDLERS: dict[str, Callable] = {
    "add": _vector_add(False), "sub": _vector_add(True), "adds": _add_sub(False, True),
    "subs": _add_sub(True, True), "cmp": _compare(False), "cmn": _compare(True), "neg": _neg, "negs": _neg,
    **{name: _logical for name in _LOGIC}, "tst": _tst, "mvn": _mvn,
    "lsl": _shift_reg(cs.ARM64_SFT_LSL), "lsr": _shift_reg(cs.ARM64_SFT_LSR), "asr": _shift_reg(cs.ARM64_SFT_ASR),
    "ror": _shift_reg(cs.ARM64_SFT_ROR),
    "madd": _mul_add(False), "msub": _mul_add(True), "mul": _mul_add(False), "mneg": _mul_add(False),
    "smulh": _mulh(True), "umulh": _mulh(False), "sdiv": _divide(True), "udiv": _divide(False),
    "smaddl": _long_mul(True), "umaddl": _long_mul(False), "smull": _long_mul(True), "umull": _long_mul(False),
    "smsubl": _long_mul(True, True), "umsubl": _long_mul(False, True),
    "mov": _mov, "movz": _movz, "movn": _movn, "movk": _movk, "adr": _adr, "adrp": _adr, "nop": _nop,
    "b": _b, "bl": _bl, **{f"b.{c}": _b_cond for c in ("eq", "ne", "hs", "cs", "lo", "cc", "mi", "pl", "vs", "vc",
                                                       "hi", "ls", "ge", "lt", "gt", "le", "al", "nv")}, "br": _br, "blr": _blr, "ret": _ret, "cbz": _cbz(True), "cbnz": _cbz(False),
    "tbz": _tbz(True), "tbnz": _tbz(False),
    **{m: _load for m in ("ldr", "ldur", "ldrb", "ldurb", "ldrh", "ldurh", "ldrsb", "ldursb", "ldrsh", "ldursh",
                          "ldrsw", "ldursw", "ldp", "ldnp", "ldpsw")},
    **{m: _store for m in ("str", "stur", "strb", "sturb", "strh", "sturh", "stp", "stnp")},
    "ld1": _ld1, "ld1r": _ld1, "st1": _st1,
    "ins": _vector_mov, "umov": _umov, "smov": _smov, "fmov": _fmov, "dup": _dup, "movi": _movi, "mvni": _movi,
    **{k: _permute(k) for k in ("zip1", "zip2", "uzp1", "uzp2", "trn1", "trn2")}, "ext": _ext,
    "addv": _addv,
}

# (mask, value) -> handler: families decoded from the word, whatever alias capstone prints
ENCODED = [
    (0x1F800000, 0x13000000, _bitfield),       # SBFM/BFM/UBFM
    (0x3FE00800, 0x1A800000, _csel),           # CSEL/CSINC/CSINV/CSNEG
    (0x3FE00410, 0x3A400000, _ccmp),           # CCMN/CCMP (register and immediate)
]


def decode(image: Image, address: int) -> Insn:
    word_bytes = image.read(address, 4)
    word = int.from_bytes(word_bytes, "little")
    found = list(_md.disasm(word_bytes, address, 1))
    if not found:
        raise Unsupported(f"undecodable word {word:#010x}", address)
    i = found[0]
    text = f"{i.mnemonic} {i.op_str}".strip()
    model = a64.decode(word)
    handler = _model if model is not None else next((h for mask, value, h in ENCODED if word & mask == value),
                                                    HANDLERS.get(i.mnemonic))
    if handler is None:
        raise Unsupported(f"unsupported instruction {i.mnemonic}", address, text)
    return Insn(address, word, i.mnemonic, text, tuple(i.operands), i.writeback, handler, model)


# -- the call ---------------------------------------------------------------------------------------------------------

_CACHE: dict[tuple[str, int], Insn] = {}


def _image_regions(image: Image, memory: Memory) -> None:
    """The image's loaded segments (constants a kernel loads by ADRP + LDR), unless the caller added them."""
    for region in image.regions():
        if not any(r.base == region.base for r in memory.regions):
            memory.add(region)


def _initial_registers() -> tuple[list, list]:
    """Registers the caller did not set hold free symbols named after them: a result that depends on one is not
    proved, and an address computed from one is a data-dependent address."""
    x = [int_bytes(SymInt.from_bits(z3.BitVec(f"x{n}.in", 64), False), 8) for n in range(31)]
    v = [int_bytes(SymInt.from_bits(z3.BitVec(f"v{n}.in", 128), False), 16) for n in range(32)]
    return x, v


def _libc_entries(image: Image) -> dict[int, str]:
    entries = {addr: name for addr, name in image.imports.items() if name in LIBC}
    entries.update({image.symbols[name][0]: name for name in LIBC if name in image.symbols})
    return entries


def _intercept(st: State, name: str) -> int:
    """A call of memcpy/memmove/memset: symbolic.LIBC's model on the concrete arguments, then return."""
    call_libc(st.memory, name, [st.x[k] for k in range(3)], st.pc)
    if not isinstance(st.x[30], int):
        raise Unsupported("data-dependent return address", st.pc)
    return st.x[30]


def call(image: Image, memory: Memory, symbol: str, args: list[int], *, stack: Region,
         max_steps: int = 2_000_000) -> dict:
    """Run `symbol`(*args) (integer and pointer arguments, AAPCS64: x0..x7, then 8-byte stack slots) until it
    returns. memory holds the call's buffers; `stack` is a writable region (added to memory if it is not there).
    Returns {"steps": instructions executed, "mnemonics": Counter, "x0": the result register (int, or bytes)}."""
    if stack not in memory.regions:
        memory.add(stack)
    _image_regions(image, memory)
    x, v = _initial_registers()
    sp = (stack.end - 8 * max(0, len(args) - 8)) & ~15
    for k, a in enumerate(args[8:]):
        memory.store(sp + 8 * k, const(a & MASK64, 8))
    for k, a in enumerate(args[:8]):
        x[k] = a & MASK64
    x[30] = SENTINEL
    st = State(image, memory, x, sp, v, pc=image.symbol(symbol))
    libc = _libc_entries(image)
    key = str(image.path)
    while st.pc != SENTINEL:
        if st.steps >= max_steps:
            raise StepLimit(f"no return after {max_steps} instructions", st.pc)
        if st.pc in libc:
            st.pc = _intercept(st, libc[st.pc])
            continue
        insn = _CACHE.get((key, st.pc))
        if insn is None:
            insn = _CACHE[(key, st.pc)] = decode(image, st.pc)
        st.steps += 1
        st.mnemonics[insn.mnemonic] += 1
        target = insn.handler(st, insn)
        st.pc = insn.address + 4 if target is None else target
    return {"steps": st.steps, "mnemonics": st.mnemonics, "x0": st.x[0], "result": st.x[0]}
