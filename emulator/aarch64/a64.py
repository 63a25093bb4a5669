"""Decode the A64 encodings lowp models, into a call of the lowp.isa_models.arm function on register lanes.

Used by the emulator for two things: filling Unicorn's FEAT_I8MM gap (SMMLA, UMMLA, USMMLA, USDOT, SUDOT raise
an exception in Unicorn 2.1.4; lowp decodes and executes them) and lockstep mode (compare Unicorn's result
register with the model's for every modeled instruction a kernel runs).

Encodings from the Arm ARM (DDI 0487) C4.1.x "Advanced SIMD" encoding tables and the C7.2 instruction pages:
three different / three same / three same (extra) / two-register miscellaneous / shift by immediate / vector x
indexed element. Only the vector forms are decoded; scalar forms (bits 28:24 = 11110) are not.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from lowp.isa_models import arm

S = {0: np.int8, 1: np.int16, 2: np.int32, 3: np.int64}
U = {0: np.uint8, 1: np.uint16, 2: np.uint32, 3: np.uint64}
ARR = {(0, 0): "8b", (0, 1): "16b", (1, 0): "4h", (1, 1): "8h", (2, 0): "2s", (2, 1): "4s", (3, 1): "2d", (3, 0): "1d"}
I8MM = frozenset({"smmla", "ummla", "usmmla", "usdot", "sudot"})


@dataclass(frozen=True)
class Operand:
    reg: int          # V register number
    dtype: type       # lane type the model reads
    nbytes: int       # 8 = Vpart[n, 0] (64-bit), 16 = the whole register


@dataclass(frozen=True)
class Op:
    """One decoded instruction: model(*operands, **kwargs) gives the lanes written to Vd (64-bit results
    zero-extend the register, as every AdvSIMD write narrower than 128 bits does)."""
    mnemonic: str
    word: int
    rd: int
    operands: tuple[Operand, ...]
    model: Callable
    kwargs: tuple = ()

    @property
    def i8mm(self) -> bool:
        return self.mnemonic in I8MM

    def inputs(self, read_q: Callable[[int], bytes]) -> list[np.ndarray]:
        return [np.frombuffer(read_q(o.reg)[:o.nbytes], o.dtype).copy() for o in self.operands]

    def execute(self, read_q: Callable[[int], bytes]) -> bytes:
        """The new 16 bytes of Vd, from a function reading a V register's 16 bytes."""
        result = self.model(*self.inputs(read_q), **dict(self.kwargs))
        return result.tobytes().ljust(16, b"\0")


def _bits(w, hi, lo):
    return (w >> lo) & ((1 << (hi - lo + 1)) - 1)


def _hsb(x):
    return x.bit_length() - 1


def decode(word: int) -> Op | None:
    """The Op for a 32-bit A64 instruction word if lowp models it, else None."""
    q, u, size = _bits(word, 30, 30), _bits(word, 29, 29), _bits(word, 23, 22)
    rm, rn, rd = _bits(word, 20, 16), _bits(word, 9, 5), _bits(word, 4, 0)
    T = U if u else S
    half = 16 if q else 8

    def op(name, *operands, **kwargs):
        return Op(name, word, rd, tuple(Operand(*o) for o in operands), getattr(arm, name), tuple(kwargs.items()))

    # Advanced SIMD three different: 0 Q U 01110 size 1 Rm opcode 00 Rn Rd
    if word & 0x9F200C00 == 0x0E200000 and size < 3:
        opcode = _bits(word, 15, 12)
        wide, sfx = T[size + 1], "2" if q else ""
        p = "u" if u else "s"
        if opcode == 0b1000:
            return op(f"{p}mlal{sfx}", (rd, wide, 16), (rn, T[size], half), (rm, T[size], half))
        if opcode == 0b1100:
            return op(f"{p}mull{sfx}", (rn, T[size], half), (rm, T[size], half))
        if opcode == 0b0001:
            return op(f"{p}addw{sfx}", (rn, wide, 16), (rm, T[size], half))
        return None
    # Advanced SIMD three same: 0 Q U 01110 size 1 Rm opcode 1 Rn Rd
    if word & 0x9F200400 == 0x0E200400:
        opcode = _bits(word, 15, 11)
        if size == 3 and not q:
            return None
        if opcode == 0b00001:
            return op("uqadd" if u else "sqadd", (rn, T[size], half), (rm, T[size], half))
        if opcode == 0b01010:
            return op("urshl" if u else "srshl", (rn, T[size], half), (rm, S[size], half))
        if opcode == 0b10110 and size in (1, 2):
            return op("sqrdmulh" if u else "sqdmulh", (rn, S[size], half), (rm, S[size], half))
        if opcode in (0b01000, 0b01001):
            name = ("u" if u else "s") + ("qshl" if opcode & 1 else "shl")
            return op(name, (rn, T[size], half), (rm, S[size], half))
        if opcode in (0b01100, 0b01101) and size < 3:
            name = ("u" if u else "s") + ("min" if opcode & 1 else "max")
            return op(name, (rn, T[size], half), (rm, T[size], half))
        if opcode == 0b10111 and not u:
            return op("addp", (rn, S[size], half), (rm, S[size], half))
        return None
    # Advanced SIMD three same (extra): 0 Q U 01110 size 0 Rm 1 opcode 1 Rn Rd
    if word & 0x9F208400 == 0x0E008400:
        opcode = _bits(word, 14, 11)
        if size != 2:
            return None
        acc = U[2] if u else S[2]
        if opcode == 0b0010:
            return op("udot" if u else "sdot", (rd, acc, half), (rn, T[0], half), (rm, T[0], half))
        if opcode == 0b0011 and not u:
            return op("usdot", (rd, S[2], half), (rn, U[0], half), (rm, S[0], half))
        if opcode == 0b0100 and q:
            return op("ummla" if u else "smmla", (rd, acc, 16), (rn, T[0], 16), (rm, T[0], 16))
        if opcode == 0b0101 and q and not u:
            return op("usmmla", (rd, S[2], 16), (rn, U[0], 16), (rm, S[0], 16))
        return None
    # Advanced SIMD two-register miscellaneous: 0 Q U 01110 size 10000 opcode 10 Rn Rd
    if word & 0x9F3E0C00 == 0x0E200800:
        opcode = _bits(word, 16, 12)
        if opcode == 0b00110 and size < 3:
            return op("uadalp" if u else "sadalp", (rd, T[size + 1], half), (rn, T[size], half))
        if size == 3:
            return None
        name = {(0b10100, 0): "sqxtn", (0b10100, 1): "uqxtn", (0b10010, 1): "sqxtun"}.get((opcode, u))
        if name is None:
            return None
        src = (rn, (U if name == "uqxtn" else S)[size + 1], 16)
        if q:
            lo_t = (U if name != "sqxtn" else S)[size]
            return op(name + "2", (rd, lo_t, 8), src)
        return op(name, src)
    # Advanced SIMD shift by immediate: 0 Q U 011110 immh immb opcode 1 Rn Rd (immh != 0)
    if word & 0x9F800400 == 0x0F000400 and _bits(word, 22, 19):
        immh, immhb, opcode = _bits(word, 22, 19), _bits(word, 22, 16), _bits(word, 15, 11)
        esize_log = _hsb(immh)                     # esize = 8 << HighestSetBit(immh)
        esize = 8 << esize_log
        if opcode == 0b00100:
            if esize_log == 3 and not q:
                return None
            return op("urshr" if u else "srshr", (rn, T[esize_log], half), shift=2 * esize - immhb)
        if opcode == 0b10100:                      # SSHLL/USHLL(2), SXTL/UXTL(2) at shift 0
            if esize_log == 3:
                return None
            return op(("u" if u else "s") + "shll" + ("2" if q else ""), (rn, T[esize_log], half),
                      shift=immhb - esize)
        name = {(0b10011, 0): "sqrshrn", (0b10011, 1): "uqrshrn", (0b10001, 1): "sqrshrun"}.get((opcode, u))
        if name is None or esize_log == 3:
            return None
        shift = 2 * esize - immhb
        src = (rn, (U if name == "uqrshrn" else S)[esize_log + 1], 16)
        if q:
            return op(name + "2", (rd, (S if name == "sqrshrn" else U)[esize_log], 8), src, shift=shift)
        return op(name, src, shift=shift)
    # Advanced SIMD vector x indexed element: 0 Q U 01111 size L M Rm opcode H 0 Rn Rd
    if word & 0x9F000400 == 0x0F000000:
        opcode = _bits(word, 15, 12)
        h, lo, m = _bits(word, 11, 11), _bits(word, 21, 21), _bits(word, 20, 20)
        if size == 1:
            index, vm = (h << 2) | (lo << 1) | m, rm & 0xF
        else:
            index, vm = (h << 1) | lo, rm
        p = "u" if u else "s"
        sfx = "2" if q else ""
        if opcode in (0b0010, 0b1010) and size in (1, 2):
            if opcode == 0b0010:
                return op(f"{p}mlal{sfx}", (rd, T[size + 1], 16), (rn, T[size], half), (vm, T[size], 16), index=index)
            return op(f"{p}mull{sfx}", (rn, T[size], half), (vm, T[size], 16), index=index)
        if opcode in (0b1100, 0b1101) and not u and size in (1, 2):
            return op("sqdmulh" if opcode == 0b1100 else "sqrdmulh", (rn, S[size], half), (vm, S[size], 16), index=index)
        if opcode == 0b1110 and size == 2:
            acc = U[2] if u else S[2]
            return op("udot" if u else "sdot", (rd, acc, half), (rn, T[0], half), (vm, T[0], 16), index=index)
        if opcode == 0b1111 and not u and size in (0, 2):
            if size == 0:
                return op("sudot", (rd, S[2], half), (rn, S[0], half), (vm, U[0], 16), index=index)
            return op("usdot", (rd, S[2], half), (rn, U[0], half), (vm, S[0], 16), index=index)
        return None
    return None


def scan(code: bytes, base: int) -> dict[int, Op]:
    """Every modeled instruction in a stretch of code: address -> Op (data words may decode too; harmless)."""
    words = np.frombuffer(code[:len(code) // 4 * 4], "<u4")
    found = {}
    for i, w in enumerate(words.tolist()):
        o = decode(w)
        if o is not None:
            found[base + 4 * i] = o
    return found
