"""Symbolic execution of x86-64 code (System V calls) for `lowp prove`: capstone decodes, the models execute.

The vector instructions whose arithmetic matters (VPMADDUBSW, VPMADDWD, VPDPBUSD and its family, VPADDD, VPADDSW,
VPMOVSX...) run through lowp.isa_models.x86 on symbolic lanes (lowp.isa_models.symbolic.bitvec): there is no second copy
of their semantics here. What is here is the plumbing a compiled kernel needs around them: moves, broadcasts,
loads and stores, the general registers and flags of its address arithmetic and loops, calls and returns.

General registers hold a concrete Python int (addresses, counters: the shape fixes them) or 8 symbolic bytes
(data a packing loop moves through them). Flags are concrete, or None after an operation on symbolic data: a
branch or cmov on such flags is a data-dependent branch, and the run stops with Unsupported.
"""
from __future__ import annotations

from collections import Counter
from functools import lru_cache

import capstone
import numpy as np
from capstone import x86_const as X

from lowp.isa_models import x86 as models
from lowp.isa_models.symbolic.bitvec import SymArray, SymInt, fit

from lowp.emulator.symbolic import (Byte, call_libc, Image, Memory, MemoryViolation, Region, StepLimit, Unsupported, concrete,
                       const_bytes, int_bytes, integer, lane_bytes, lanes)

RETURN = 0x7FFF_FFFF_0000      # where the top-level call returns to: the run ends there
CANARY = 0x2F8B_3C4D_5E6F_7081  # fs:0x28, the stack protector's value (any constant does)
MASK64 = (1 << 64) - 1

_GPR64 = ["rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp"] + [f"r{i}" for i in range(8, 16)]


def _gpr_table() -> dict[str, tuple[str, int, int]]:
    """Register name -> (64-bit register, byte offset, size)."""
    table = {}
    for full in _GPR64:
        table[full] = (full, 0, 8)
        if full.startswith("r") and full[1:].isdigit():
            table[full + "d"], table[full + "w"], table[full + "b"] = (full, 0, 4), (full, 0, 2), (full, 0, 1)
        else:
            stem = full[1:]                      # ax, bx, si, bp, ...
            table["e" + stem] = (full, 0, 4)
            table[stem] = (full, 0, 2)
            if stem in ("ax", "bx", "cx", "dx"):
                table[stem[0] + "l"], table[stem[0] + "h"] = (full, 0, 1), (full, 1, 1)
            else:
                table[stem + "l"] = (full, 0, 1)
    return table


GPR = _gpr_table()
VSIZE = {"xmm": 16, "ymm": 32, "zmm": 64}


@lru_cache(maxsize=None)
def _disassembler():
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    md.detail = True
    return md


@lru_cache(maxsize=1)
def _vex_to_evex() -> dict:
    """iced-x86 codes of the VEX-encoded AVX-VNNI dot products, and their EVEX twins (AVX512_VNNI), which capstone
    5 decodes: the same operation on the same operands."""
    import iced_x86
    out = {}
    for name in ("VPDPBUSD", "VPDPBUSDS", "VPDPWSSD", "VPDPWSSDS"):
        for reg, mem in (("XMM", "XMMM128"), ("YMM", "YMMM256")):
            out[getattr(iced_x86.Code, f"VEX_{name}_{reg}_{reg}_{mem}")] = \
                getattr(iced_x86.Code, f"EVEX_{name}_{reg}_K1Z_{reg}_{mem}B32")
    return out


class _Transcoded:
    """A capstone instruction decoded from another encoding of the same instruction; `next_address` is where the
    original one ends (RIP-relative operands were re-encoded for the new length, so they address the same bytes)."""

    def __init__(self, insn, next_address: int):
        self._insn, self.next_address = insn, next_address

    def __getattr__(self, name):
        return getattr(self._insn, name)


def _transcoded(code: bytes, pc: int):
    """What capstone cannot decode but iced-x86 can and has an EVEX twin for (VEX AVX-VNNI), as that twin."""
    try:
        import iced_x86
    except ImportError:
        return None
    insn = iced_x86.Decoder(64, code, ip=pc).decode()
    twin = _vex_to_evex().get(insn.code)
    if insn.is_invalid or twin is None:
        return None
    end = pc + insn.len
    insn.code = twin
    encoder = iced_x86.Encoder(64)
    encoder.encode(insn, pc)
    got = next(_disassembler().disasm(bytes(encoder.take_buffer()), pc, 1), None)
    return None if got is None else _Transcoded(got, end)


class X86:
    """One call's machine state and its run."""

    def __init__(self, image: Image, memory: Memory, *, max_steps: int):
        self.image, self.memory, self.max_steps = image, memory, max_steps
        self.gpr: dict[str, int | list[Byte]] = {name: 0 for name in _GPR64}
        self.vec = [const_bytes(0, 64) for _ in range(32)]
        self.k = [0] * 8                      # AVX-512 opmask registers: concrete (tail masks from the shape)
        self.flags: dict[str, bool] | None = {"cf": False, "zf": False, "sf": False, "of": False, "pf": False}
        self.mnemonics: Counter = Counter()
        self._decoded: dict[int, object] = {}
        self.insn = None

    # -- decoding -------------------------------------------------------------------------------------------------------
    def decode(self, pc: int):
        got = self._decoded.get(pc)
        if got is None:
            try:
                code = self.image.read(pc, 16)
            except KeyError:
                raise Unsupported("a jump outside the loaded code", pc) from None
            got = next(_disassembler().disasm(code, pc, 1), None) or _transcoded(code, pc)
            if got is None:
                raise Unsupported("an instruction capstone cannot decode", pc, code.hex())
            self._decoded[pc] = got
        return got

    def fail(self, reason: str):
        i = self.insn
        raise Unsupported(reason, i.address, f"{i.mnemonic} {i.op_str}".strip())

    # -- general registers ------------------------------------------------------------------------------------------------
    def get(self, name: str):
        """A general register's value: an int (unsigned, its size) or its symbolic bytes."""
        full, off, size = GPR[name]
        v = self.gpr[full]
        if isinstance(v, int):
            return (v >> (8 * off)) & ((1 << (8 * size)) - 1)
        part = v[off:off + size]
        c = concrete(part)
        return part if c is None else c

    def set(self, name: str, value) -> None:
        full, off, size = GPR[name]
        if size == 4:                     # a 32-bit write zero-extends to 64 bits
            off, size, value = 0, 8, self._extend(value, 4, 8)
        if size == 8:
            self.gpr[full] = value if isinstance(value, int) else list(value)
            return
        old = self.gpr[full]
        if isinstance(old, int) and isinstance(value, int):
            m = ((1 << (8 * size)) - 1) << (8 * off)
            self.gpr[full] = (old & ~m) | ((value << (8 * off)) & m)
            return
        data = const_bytes(old, 8) if isinstance(old, int) else list(old)
        data[off:off + size] = const_bytes(value, size) if isinstance(value, int) else value
        self.gpr[full] = data

    @staticmethod
    def _extend(value, size: int, to: int, signed: bool = False):
        if isinstance(value, int):
            if signed and value >> (8 * size - 1):
                value -= 1 << (8 * size)
            return value & ((1 << (8 * to)) - 1)
        if not signed:
            return list(value) + const_bytes(0, to - size)
        x = integer(value, signed=True)
        return int_bytes(fit(x, np.dtype(f"i{to}")), to)

    def address(self, op) -> int:
        m = op.mem
        if m.segment == X.X86_REG_FS:
            return ("fs", m.disp)
        total = m.disp
        if m.base:
            base = self.insn.reg_name(m.base)
            total += self.insn.address + self.insn.size if base == "rip" else self._concrete_gpr(base)
        if m.index:
            total += m.scale * self._concrete_gpr(self.insn.reg_name(m.index))
        return total & MASK64

    def _concrete_gpr(self, name: str) -> int:
        v = self.get(name)
        if not isinstance(v, int):
            self.fail("a data-dependent address")
        return v

    # -- operands --------------------------------------------------------------------------------------------------------
    def read(self, op, size: int | None = None):
        """An operand's value: an int (register or immediate, when concrete) or bytes."""
        size = size or op.size
        if op.type == X.X86_OP_IMM:
            return op.imm & ((1 << (8 * size)) - 1)
        if op.type == X.X86_OP_REG:
            name = self.insn.reg_name(op.reg)
            if name[:3] in VSIZE:
                return self.vec[int(name[3:])][:size]
            return self.get(name)
        addr = self.address(op)
        if isinstance(addr, tuple):
            if addr == ("fs", 0x28) and size == 8:
                return CANARY
            self.fail("a segment-relative load lowp does not model")
        data = self.load(addr, size)
        c = concrete(data)
        return data if c is None else c

    def load(self, addr: int, size: int) -> list[Byte]:
        i = self.insn
        return self.memory.load(addr, size, i.address, f"{i.mnemonic} {i.op_str}")

    def store(self, addr: int, data: list[Byte]) -> None:
        i = self.insn
        self.memory.store(addr, data, i.address, f"{i.mnemonic} {i.op_str}")

    def write(self, op, value, size: int | None = None) -> None:
        size = size or op.size
        if op.type == X.X86_OP_REG:
            name = self.insn.reg_name(op.reg)
            if name[:3] in VSIZE:
                self.write_vec(op, _as_bytes(value, size))
                return
            self.set(name, value)
            return
        addr = self.address(op)
        if isinstance(addr, tuple):
            self.fail("a segment-relative store")
        self.store(addr, _as_bytes(value, size))

    def vreg(self, op) -> int:
        return int(self.insn.reg_name(op.reg)[3:])

    def write_vec(self, op, data: list[Byte], legacy: bool | None = None) -> None:
        """A vector register write: VEX/EVEX forms zero the bits above it up to 512, legacy SSE keeps them."""
        n = self.vreg(op)
        legacy = not self.insn.mnemonic.startswith("v") if legacy is None else legacy
        rest = self.vec[n][len(data):] if legacy else const_bytes(0, 64 - len(data))
        self.vec[n] = list(data) + rest

    def vlanes(self, op, dtype, size: int | None = None) -> SymArray:
        value = self.read(op, size or op.size)
        return lanes(_as_bytes(value, size or op.size), dtype)

    # -- the run ---------------------------------------------------------------------------------------------------------
    def call(self, symbol: str, args: list[int], stack: Region) -> dict:
        for name, value in zip(("rdi", "rsi", "rdx", "rcx", "r8", "r9"), args):
            self.gpr[name] = value & MASK64
        rsp = stack.end - 64
        extra = args[6:]
        rsp -= 8 * len(extra) + (8 if len(extra) % 2 else 0)
        for i, value in enumerate(extra):
            self.memory.store(rsp + 8 * i, const_bytes(value & MASK64, 8))
        rsp -= 8
        self.memory.store(rsp, const_bytes(RETURN, 8))
        self.gpr["rsp"] = rsp
        pc, steps = self.image.symbol(symbol), 0
        while pc != RETURN:
            steps += 1
            if steps > self.max_steps:
                raise StepLimit(f"more than {self.max_steps} instructions (a loop the shape does not bound?)", pc)
            self.insn = insn = self.decode(pc)
            self.mnemonics[insn.mnemonic] += 1
            handler = HANDLERS.get(insn.mnemonic) or _family(insn.mnemonic)
            if handler is None:
                self.fail(f"an instruction lowp prove does not model ({insn.mnemonic})")
            nxt = handler(self, insn, insn.operands)
            pc = getattr(insn, "next_address", insn.address + insn.size) if nxt is None else nxt
        return {"steps": steps, "mnemonics": self.mnemonics, "result": self.get("rax")}


def _as_bytes(value, size: int) -> list[Byte]:
    return const_bytes(value, size) if isinstance(value, int) else list(value)[:size]


def _sym(value, size: int, signed: bool) -> SymInt:
    if isinstance(value, int):
        if signed and value >> (8 * size - 1):
            value -= 1 << (8 * size)
        return SymInt.const(value)
    return integer(value, signed)


# -- integer instructions -----------------------------------------------------------------------------------------------

def _setflags(m: X86, result: int, size: int, cf: bool, of: bool) -> None:
    bits = 8 * size
    r = result & ((1 << bits) - 1)
    m.flags = {"cf": cf, "zf": r == 0, "sf": bool(r >> (bits - 1)), "of": of, "pf": bin(r & 0xFF).count("1") % 2 == 0}


def _signed(v: int, size: int) -> int:
    return v - (1 << (8 * size)) if v >> (8 * size - 1) else v


def _arith(op_name: str, keep: bool = True):
    def run(m: X86, insn, ops):
        size = ops[0].size
        a, b = m.read(ops[0], size), m.read(ops[1], size) if len(ops) > 1 else None
        if op_name in ("xor", "sub") and len(ops) == 2 and ops[0].type == ops[1].type == X.X86_OP_REG \
                and ops[0].reg == ops[1].reg:
            a = b = 0                           # xor r, r / sub r, r: zero whatever r held
        if isinstance(a, int) and isinstance(b, int):
            r = _concrete_op(m, op_name, a, b, size)
        else:
            r = _symbolic_op(m, op_name, a, b, size)
            known = concrete(r) if op_name in ("and", "or", "xor") else None
            if known is not None:                # a bit-field test whose bits are all known
                _setflags(m, known, size, False, False)
                r = known
        if keep:
            m.write(ops[0], r, size)
    return run


def _concrete_op(m: X86, name: str, a: int, b: int, size: int) -> int:
    bits, mask = 8 * size, (1 << (8 * size)) - 1
    sa, sb = _signed(a, size), _signed(b, size)
    if name == "add":
        r = a + b
        _setflags(m, r, size, r > mask, not -(1 << (bits - 1)) <= sa + sb < (1 << (bits - 1)))
    elif name == "sub":
        r = a - b
        _setflags(m, r, size, a < b, not -(1 << (bits - 1)) <= sa - sb < (1 << (bits - 1)))
    elif name in ("and", "or", "xor"):
        r = {"and": a & b, "or": a | b, "xor": a ^ b}[name]
        _setflags(m, r, size, False, False)
    else:
        raise AssertionError(name)
    return r & mask


def _symbolic_op(m: X86, name: str, a, b, size: int):
    m.flags = _decided_flags(name, a, b, size)  # None where the inputs' intervals do not decide them
    if name in ("and", "or", "xor"):
        if name == "xor" and isinstance(b, int) and size == 4 and b == 0x80808080:
            return _flip_sign_bytes(a)
        merged = _bytewise(name, _as_bytes(a, size), _as_bytes(b, size))
        return merged if merged is not None else _bitwise(name, a, b, size)
    x, y = _sym(a, size, True), _sym(b, size, True)
    r = x + y if name == "add" else x - y
    return int_bytes(fit(r, np.dtype(f"i{size}")), size)


def _bitwise(name: str, a, b, size: int) -> list[Byte]:
    """and/or/xor on the raw bits (a bit-field update, a flag word): correct, but the result is a new value of
    its full type's range, no longer the exact lanes it came from."""
    import z3
    x, y = (_bits_term(v, size) for v in (a, b))
    term = z3.simplify({"and": x & y, "or": x | y, "xor": x ^ y, "andn": ~x & y}[name])
    return int_bytes(SymInt.from_bits(term, False), size)


def _bits_term(value, size: int):
    import z3
    if isinstance(value, int):
        return z3.BitVecVal(value, 8 * size)
    parts = [b.term() for b in reversed(_as_bytes(value, size))]
    return z3.Concat(*parts) if len(parts) > 1 else parts[0]


def _bytewise(name: str, a: list[Byte], b: list[Byte]) -> list[Byte] | None:
    """and/or/xor that only move whole bytes: a mask of 0x00 and 0xFF bytes, or two values where each byte is 0
    on one side (packing two bytes into a word). None for anything else."""
    out = []
    for x, y in zip(a, b):
        vx, vy = x.value, y.value
        if name == "and":
            if vx is not None and vy is not None:
                out.append(Byte(SymInt.const(vx & vy), 1, 0))
            elif vx in (0, 0xFF) or vy in (0, 0xFF):
                keep, mask = (y, vx) if vx is not None else (x, vy)
                out.append(keep if mask == 0xFF else Byte(SymInt.const(0), 1, 0))
            else:
                return None
        else:
            if vx == 0:
                out.append(y)
            elif vy == 0:
                out.append(x)
            elif vx is not None and vy is not None:
                out.append(Byte(SymInt.const(vx | vy if name == "or" else vx ^ vy), 1, 0))
            else:
                return None
    return out


def _decided_flags(name: str, a, b, size: int):
    """cmp/sub/test on symbolic data: the exact difference (signed and unsigned) as intervals, from which a
    condition may still be decided (a driver testing a weight against a range the domain already excludes);
    a condition the intervals do not decide is a data-dependent branch."""
    if name == "sub":
        return Compared(_sym(a, size, True) - _sym(b, size, True), _sym(a, size, False) - _sym(b, size, False))
    if name == "and" and not isinstance(b, int) and [id(v) for v in a] == [id(v) for v in b]:
        x = _sym(a, size, True)                 # test x, x: x against 0
        return Compared(x, _sym(a, size, False))
    return None


class Compared:
    """Flags of a comparison whose operands are symbolic: the intervals of a - b, signed (d) and unsigned (du)."""

    def __init__(self, d, du):
        self.d, self.du = d, du

    def decide(self, cc: str) -> bool | None:
        d, du = self.d, self.du
        tests = {"e": (d.lo == d.hi == 0, d.lo > 0 or d.hi < 0), "g": (d.lo > 0, d.hi <= 0),
                 "ge": (d.lo >= 0, d.hi < 0), "l": (d.hi < 0, d.lo >= 0), "le": (d.hi <= 0, d.lo > 0),
                 "a": (du.lo > 0, du.hi <= 0), "ae": (du.lo >= 0, du.hi < 0), "b": (du.hi < 0, du.lo >= 0),
                 "be": (du.hi <= 0, du.lo > 0)}
        alias = {"z": "e", "nle": "g", "nl": "ge", "nge": "l", "ng": "le", "nbe": "a", "nb": "ae", "nc": "ae",
                 "nae": "b", "c": "b", "na": "be"}
        negate = {"ne": "e", "nz": "e"}
        if cc in negate:
            got = self.decide(negate[cc])
            return None if got is None else not got
        yes, no = tests.get(alias.get(cc, cc), (False, False))
        return True if yes else False if no else None


def _flip_sign_bytes(data: list[Byte]) -> list[Byte]:
    """XOR 0x80 on each byte: an s8 read as u8 after adding 128 (oneDNN's s8s8 shift), as exact lanes."""
    out = []
    for b in data:
        s = fit(SymInt.from_bits(b.term(), True) if b.size != 1 else fit(b.lane, np.int8), np.int8)
        out.append(Byte(s + 128, 1, 0))
    return out


def _cmp(m, insn, ops):
    _arith("sub", keep=False)(m, insn, ops)


def _test(m, insn, ops):
    _arith("and", keep=False)(m, insn, ops)


def _mov(m, insn, ops):
    size = ops[0].size
    m.write(ops[0], m.read(ops[1], size), size)


def _movx(signed: bool):
    def run(m, insn, ops):
        value = m.read(ops[1], ops[1].size)
        m.write(ops[0], m._extend(value, ops[1].size, ops[0].size, signed), ops[0].size)
    return run


def _lea(m, insn, ops):
    """lea is arithmetic too (x - 128, 3x): on symbolic registers it computes base + index*scale + disp exactly."""
    size, mem = ops[0].size, ops[1].mem
    parts = [m.get(insn.reg_name(r)) if r else 0 for r in (mem.base, mem.index)]
    if all(isinstance(p, int) for p in parts) or mem.base and insn.reg_name(mem.base) == "rip":
        m.write(ops[0], m.address(ops[1]) & ((1 << (8 * size)) - 1), size)
        return
    base, index = (_sym(p, 8, True) if not isinstance(p, int) else SymInt.const(_signed(p, 8)) for p in parts)
    total = base + index * mem.scale + mem.disp
    m.write(ops[0], int_bytes(fit(total, np.dtype(f"i{size}")), size), size)


def _unary(name):
    def run(m, insn, ops):
        size = ops[0].size
        v = m.read(ops[0], size)
        mask = (1 << (8 * size)) - 1
        if not isinstance(v, int):
            if name == "neg":
                m.flags = None
                m.write(ops[0], int_bytes(fit(-_sym(v, size, True), np.dtype(f"i{size}")), size), size)
                return
            m.fail(f"{name} on symbolic data")
        cf = m.flags["cf"] if m.flags else False
        r = {"neg": -v, "inc": v + 1, "dec": v - 1, "not": ~v}[name] & mask
        if name != "not":
            sv = _signed(v, size)
            of = {"neg": sv == -(1 << (8 * size - 1)), "inc": sv == (1 << (8 * size - 1)) - 1,
                  "dec": sv == -(1 << (8 * size - 1))}[name]
            _setflags(m, r, size, v != 0 if name == "neg" else cf, of)
        m.write(ops[0], r, size)
    return run


def _shift(name):
    def run(m, insn, ops):
        size = ops[0].size
        v = m.read(ops[0], size)
        count = m.read(ops[1], 1) if len(ops) > 1 else 1
        if not isinstance(count, int):
            m.fail("a data-dependent shift count")
        count &= 63 if size == 8 else 31
        if count == 0:
            return
        bits, mask = 8 * size, (1 << (8 * size)) - 1
        if not isinstance(v, int):
            m.flags = None
            if count % 8 == 0 and name in ("shl", "shr"):     # whole bytes move: keep them as they are
                data, k = _as_bytes(v, size), count // 8
                zero = const_bytes(0, k)
                moved = (zero + data)[:size] if name == "shl" else (data + zero)[k:]
                m.write(ops[0], moved, size)
                return
            x = _sym(v, size, name != "shl")
            r = fit(x * (1 << count), np.dtype(f"i{size}")) if name == "shl" else x >> count
            m.write(ops[0], int_bytes(fit(r, np.dtype(f"i{size}")), size), size)
            return
        if name == "shl":
            r, cf = (v << count) & mask, bool((v >> (bits - count)) & 1)
        elif name == "shr":
            r, cf = v >> count, bool((v >> (count - 1)) & 1)
        else:
            r, cf = (_signed(v, size) >> count) & mask, bool((_signed(v, size) >> (count - 1)) & 1)
        _setflags(m, r, size, cf, False)
        m.write(ops[0], r, size)
    return run


def _imul(m, insn, ops):
    size = ops[0].size
    if len(ops) == 1:
        m.fail("one-operand imul")
    a, b = (m.read(ops[0], size), m.read(ops[1], size)) if len(ops) == 2 else \
        (m.read(ops[1], size), m.read(ops[2], size))
    if isinstance(a, int) and isinstance(b, int):
        exact = _signed(a, size) * _signed(b, size)
        r = exact & ((1 << (8 * size)) - 1)
        over = exact != _signed(r, size)
        _setflags(m, r, size, over, over)
        m.write(ops[0], r, size)
        return
    m.flags = None
    r = fit(_sym(a, size, True) * _sym(b, size, True), np.dtype(f"i{size}"))
    m.write(ops[0], int_bytes(r, size), size)


CONDITIONS = {
    "o": lambda f: f["of"], "no": lambda f: not f["of"], "b": lambda f: f["cf"], "c": lambda f: f["cf"],
    "nae": lambda f: f["cf"], "ae": lambda f: not f["cf"], "nb": lambda f: not f["cf"], "nc": lambda f: not f["cf"],
    "e": lambda f: f["zf"], "z": lambda f: f["zf"], "ne": lambda f: not f["zf"], "nz": lambda f: not f["zf"],
    "be": lambda f: f["cf"] or f["zf"], "na": lambda f: f["cf"] or f["zf"],
    "a": lambda f: not f["cf"] and not f["zf"], "nbe": lambda f: not f["cf"] and not f["zf"],
    "s": lambda f: f["sf"], "ns": lambda f: not f["sf"], "p": lambda f: f["pf"], "np": lambda f: not f["pf"],
    "l": lambda f: f["sf"] != f["of"], "nge": lambda f: f["sf"] != f["of"],
    "ge": lambda f: f["sf"] == f["of"], "nl": lambda f: f["sf"] == f["of"],
    "le": lambda f: f["zf"] or f["sf"] != f["of"], "ng": lambda f: f["zf"] or f["sf"] != f["of"],
    "g": lambda f: not f["zf"] and f["sf"] == f["of"], "nle": lambda f: not f["zf"] and f["sf"] == f["of"],
}


def _condition(m: X86, cc: str) -> bool:
    if isinstance(m.flags, Compared):
        got = m.flags.decide(cc)
        if got is None:
            m.fail("a data-dependent branch (flags computed from the inputs)")
        return got
    try:
        if m.flags is None:
            raise KeyError
        return bool(CONDITIONS[cc](_Known(m.flags)))
    except KeyError:
        m.fail("a data-dependent branch (flags computed from the inputs)")


class _Known(dict):
    """Flags as a condition reads them: a flag the intervals left undecided (None) is a data-dependent one."""

    def __getitem__(self, key):
        value = dict.__getitem__(self, key)
        if value is None:
            raise KeyError(key)
        return value


def _jcc(cc):
    def run(m, insn, ops):
        return ops[0].imm if _condition(m, cc) else None
    return run


def _setcc(cc):
    def run(m, insn, ops):
        m.write(ops[0], int(_condition(m, cc)), 1)
    return run


def _cmovcc(cc):
    def run(m, insn, ops):
        size = ops[0].size
        if _condition(m, cc):
            m.write(ops[0], m.read(ops[1], size), size)
        elif size == 4:
            m.write(ops[0], m.read(ops[0], 4), 4)        # a 32-bit cmov zero-extends even when it does not move
    return run


def _jmp(m, insn, ops):
    if ops[0].type != X.X86_OP_IMM:
        m.fail("an indirect jump")
    if ops[0].imm in m.image.imports:          # a tail call into libc: its model, then our caller's return
        _libc(m, insn, m.image.imports[ops[0].imm])
        return _ret(m, insn, ())
    return ops[0].imm


def _libc(m, insn, name: str) -> None:
    args = [m.get(r) for r in ("rdi", "rsi", "rdx")]
    call_libc(m.memory, name, args, insn.address, f"{insn.mnemonic} {insn.op_str}")
    m.gpr["rax"] = args[0]


def _push(m, insn, ops):
    rsp = m.gpr["rsp"] - 8
    m.store(rsp, _as_bytes(m.read(ops[0], 8), 8))
    m.gpr["rsp"] = rsp


def _pop(m, insn, ops):
    rsp = m.gpr["rsp"]
    data = m.load(rsp, 8)
    c = concrete(data)
    m.write(ops[0], data if c is None else c, 8)
    m.gpr["rsp"] = rsp + 8


def _ret(m, insn, ops):
    rsp = m.gpr["rsp"]
    target = concrete(m.load(rsp, 8))
    if target is None:
        m.fail("a return to a data-dependent address")
    m.gpr["rsp"] = rsp + 8 + (ops[0].imm if ops else 0)
    return target


def _call(m, insn, ops):
    if ops[0].type != X.X86_OP_IMM:
        m.fail("an indirect call")
    target = ops[0].imm
    name = m.image.imports.get(target)
    if name is not None:
        _libc(m, insn, name)
        return None
    rsp = m.gpr["rsp"] - 8
    m.store(rsp, const_bytes(insn.address + insn.size, 8))
    m.gpr["rsp"] = rsp
    return target


def _rep(unit: int, store_only: bool):
    def run(m, insn, ops):
        count, rdi = m.get("rcx"), m.get("rdi")
        if not isinstance(count, int) or not isinstance(rdi, int):
            m.fail("a data-dependent string length")
        if store_only:
            fill = _as_bytes(m.get({8: "rax", 4: "eax", 2: "ax", 1: "al"}[unit]), unit)
            for i in range(count):
                m.store(rdi + unit * i, fill)
        else:
            rsi = m.get("rsi")
            for i in range(count):
                m.store(rdi + unit * i, m.load(rsi + unit * i, unit))
            m.gpr["rsi"] = rsi + unit * count
        m.gpr["rdi"] = rdi + unit * count
        m.gpr["rcx"] = 0
    return run


def _nop(m, insn, ops):
    return None


def _cdqe(m, insn, ops):
    m.set("rax", m._extend(m.get("eax"), 4, 8, True))


def _cqo(m, insn, ops):
    v = m.get("rax")
    if not isinstance(v, int):
        m.fail("cqo on symbolic data")
    m.set("rdx", MASK64 if v >> 63 else 0)


# -- vector instructions --------------------------------------------------------------------------------------------

def _width(ops) -> int:
    return max(op.size for op in ops if op.type != X.X86_OP_IMM)


def _mask_of(m, ops):
    """An EVEX {k} operand (capstone lists it after the operand it masks): (mask bits, the other operands)."""
    for n, op in enumerate(ops):
        if op.type == X.X86_OP_REG and m.insn.reg_name(op.reg).startswith("k"):
            return m.k[int(m.insn.reg_name(op.reg)[1:])], ops[:n] + ops[n + 1:]
    return None, ops


def _unmasked(m, ops) -> None:
    """Stop the run at an EVEX {k}-masked form of an instruction lowp prove models only unmasked."""
    if _mask_of(m, ops)[0] is not None:
        m.fail("a masked form lowp prove does not model")


def _bytes_from(data: list, source) -> list:
    """The bytes a byte move leaves: source[i] = j + 1 takes data[j], 0 a zero byte (a model run on the byte
    numbers 1..n says where each byte comes from, so the bytes keep their lanes)."""
    return [data[s - 1] if s else Byte(SymInt.const(0), 1, 0) for s in source.tolist()]


ELEMENT = {"vmovdqu8": 1, "vmovdqu16": 2, "vmovdqu32": 4, "vmovdqa32": 4, "vmovdqu64": 8, "vmovdqa64": 8,
           "vmovups": 4, "vmovaps": 4, "vmovupd": 8, "vmovapd": 8}


def _masked_move(m, insn, mask: int, dst, src):
    """A masked load, store or move: only the selected elements are read and written (a masked-off element past
    a buffer's end is never touched); a register destination keeps (merge) or zeroes ({z}) the others."""
    unit = ELEMENT.get(insn.mnemonic)
    if unit is None:
        m.fail("a masked form lowp prove does not model")
    width = max(dst.size, src.size)
    selected = [(mask >> e) & 1 for e in range(width // unit)]
    if dst.type == X.X86_OP_MEM:
        data = _as_bytes(m.read(src, width), width)
        base = m.address(dst)
        for e, on in enumerate(selected):
            if on:
                m.store(base + e * unit, data[e * unit:(e + 1) * unit])
        return
    zeroing = "{z}" in insn.op_str
    old = m.vec[m.vreg(dst)][:width]
    out = []
    for e, on in enumerate(selected):
        if on:
            part = m.load(m.address(src) + e * unit, unit) if src.type == X.X86_OP_MEM else \
                m.vec[m.vreg(src)][e * unit:(e + 1) * unit]
        else:
            part = const_bytes(0, unit) if zeroing else old[e * unit:(e + 1) * unit]
        out += part
    m.write_vec(dst, out)


def _vpmaskmov(unit: int):
    """VPMASKMOVD/Q: a load or store of the elements whose mask element has its sign bit set (a masked-off element
    is never touched, so a tail past a buffer's end is no access; a load zeroes it). The mask must be concrete
    (a tail mask from the shape), else the accesses depend on the data."""
    def run(m, insn, ops):
        dst, mask_op, src = ops
        width = mask_op.size
        mask = _as_bytes(m.read(mask_op, width), width)
        selected = []
        for e in range(width // unit):
            top = mask[e * unit + unit - 1].value
            if top is None:
                m.fail("a data-dependent mask")
            selected.append(top >> 7)
        if dst.type == X.X86_OP_MEM:
            data, base = _as_bytes(m.read(src, width), width), m.address(dst)
            for e, on in enumerate(selected):
                if on:
                    m.store(base + e * unit, data[e * unit:(e + 1) * unit])
            return
        base, out = m.address(src), []
        for e, on in enumerate(selected):
            out += m.load(base + e * unit, unit) if on else const_bytes(0, unit)
        m.write_vec(dst, out)
    return run


def _kmov(m, insn, ops):
    dst, src = ops
    bits = {"kmovb": 8, "kmovw": 16, "kmovd": 32, "kmovq": 64}[insn.mnemonic]
    if src.type == X.X86_OP_REG and m.insn.reg_name(src.reg).startswith("k"):
        value = m.k[int(m.insn.reg_name(src.reg)[1:])]
    else:
        value = m.read(src, min(src.size, bits // 8))
        if not isinstance(value, int):
            m.fail("a data-dependent mask")
    value &= (1 << bits) - 1
    if dst.type == X.X86_OP_REG and m.insn.reg_name(dst.reg).startswith("k"):
        m.k[int(m.insn.reg_name(dst.reg)[1:])] = value
    else:
        m.write(dst, value, dst.size)


def _vmov(m, insn, ops):
    """VMOVDQA/U[8,16,32,64], VMOVAPS/UPS, MOVDQA/U, and the 32/64-bit MOVD/MOVQ forms."""
    mask, ops = _mask_of(m, ops)
    if mask is not None:
        _masked_move(m, insn, mask, *ops)
        return
    dst, src = ops
    size = min(dst.size, src.size)
    value = m.read(src, size)
    if dst.type == X.X86_OP_REG and m.insn.reg_name(dst.reg)[:3] in VSIZE:
        data = _as_bytes(value, size)
        if insn.mnemonic in ("movd", "movq", "vmovd", "vmovq") or insn.mnemonic.startswith("v") \
                or dst.size > size:
            m.write_vec(dst, data + const_bytes(0, dst.size - size) if dst.size > size else data,
                        legacy=False if insn.mnemonic in ("movd", "movq") else None)
        else:
            m.write_vec(dst, data)
        return
    m.write(dst, value, size)


def _vxor_like(name):
    def run(m, insn, ops):
        width = ops[0].size
        srcs = ops[1:] if len(ops) == 3 else ops
        same = len({(o.type, o.reg) for o in srcs}) == 1 and srcs[0].type == X.X86_OP_REG
        if same and name in ("xor", "andn", "sub"):
            m.write_vec(ops[0], const_bytes(0, width))
            return
        a, b = (m.read(o, width) for o in srcs)
        # a register of constant bytes (a mask loaded once) is a number here
        a, b = (v if isinstance(v, int) or concrete(v) is None else concrete(v) for v in (a, b))
        if isinstance(a, int) and isinstance(b, int):
            r = {"xor": a ^ b, "and": a & b, "or": a | b, "andn": ~a & b}[name] & ((1 << (8 * width)) - 1)
            m.write_vec(ops[0], const_bytes(r, width))
            return
        signs = int.from_bytes(b"\x80" * width, "little")
        if name == "xor" and signs in (a, b):             # either operand may be the mask of sign bits
            m.write_vec(ops[0], _flip_sign_bytes(b if a == signs else a))
            return
        a, b = _as_bytes(a, width), _as_bytes(b, width)
        merged = _bytewise(name, a, b) if name != "andn" else None
        m.write_vec(ops[0], merged if merged is not None else
                    [x for i in range(0, width, 8) for x in _bitwise(name, a[i:i + 8], b[i:i + 8], 8)])
    return run


def _broadcast(unit: int):
    def run(m, insn, ops):
        dst, src = ops
        value = _as_bytes(m.read(src, unit), unit)
        m.write_vec(dst, value * (dst.size // unit))
    return run


def _pshufd(m, insn, ops):
    dst, src, imm = ops
    data = _as_bytes(m.read(src, dst.size), dst.size)
    order = [(imm.imm >> (2 * j)) & 3 for j in range(4)]
    out = []
    for lane in range(0, dst.size, 16):
        for j in order:
            out += data[lane + 4 * j: lane + 4 * j + 4]
    m.write_vec(dst, out)


def _extract(unit: int):
    def run(m, insn, ops):
        dst, src, imm = ops
        data = _as_bytes(m.read(src, src.size), src.size)
        part = data[unit * imm.imm: unit * (imm.imm + 1)]
        if dst.type == X.X86_OP_REG:
            m.write_vec(dst, part)
        else:
            m.write(dst, part, unit)
    return run


def _insert(unit: int):
    def run(m, insn, ops):
        dst, src1, src2, imm = ops
        data = _as_bytes(m.read(src1, dst.size), dst.size)
        piece = _as_bytes(m.read(src2, unit), unit)
        k = imm.imm % (dst.size // unit)
        data[unit * k: unit * (k + 1)] = piece
        m.write_vec(dst, data)
    return run


def _unpack(unit: int, high: bool):
    """PUNPCKL/H[BW,WD,DQ,QDQ]: per 128-bit lane, interleave the low (or high) halves of the two sources."""
    def run(m, insn, ops):
        dst = ops[0]
        a_op, b_op = (ops[1], ops[2]) if len(ops) == 3 else (ops[0], ops[1])
        width = dst.size
        a, b = _as_bytes(m.read(a_op, width), width), _as_bytes(m.read(b_op, width), width)
        out = []
        for lane in range(0, width, 16):
            start = lane + (8 if high else 0)
            for e in range(0, 8, unit):
                out += a[start + e:start + e + unit] + b[start + e:start + e + unit]
        m.write_vec(dst, out)
    return run


def _pinsr(unit: int):
    def run(m, insn, ops):
        dst, src1, src2, imm = ops if len(ops) == 4 else (ops[0], ops[0], ops[1], ops[2])
        data = _as_bytes(m.read(src1, 16), 16)
        k = imm.imm % (16 // unit)
        data[unit * k:unit * (k + 1)] = _as_bytes(m.read(src2, unit), unit)
        m.write_vec(dst, data)
    return run


def _pextr(unit: int):
    def run(m, insn, ops):
        dst, src, imm = ops
        data = _as_bytes(m.read(src, 16), 16)
        k = imm.imm % (16 // unit)
        part = data[unit * k:unit * (k + 1)]
        if dst.type == X.X86_OP_REG and dst.size > unit:
            part = part + const_bytes(0, dst.size - unit)       # zero-extended into the general register
        m.write(dst, part, max(dst.size, unit) if dst.type == X.X86_OP_REG else unit)
    return run


def _pshufb(m, insn, ops):
    """VPSHUFB. Concrete control bytes (a shuffle pattern from the code's constants, in memory or in a register):
    the model itself says where each byte comes from, run on the byte numbers 1..n (0 = zeroed), so the bytes
    keep their lanes. Symbolic control bytes: the model on the lanes (on the bit-vector backend its gather is a
    select over the 16 table bytes of the 128-bit lane, and bit 7 gives 0)."""
    _unmasked(m, ops)
    dst = ops[0]
    a_op, b_op = (ops[1], ops[2]) if len(ops) == 3 else (ops[0], ops[1])
    width = dst.size
    control = m.read(b_op, width)
    if not isinstance(control, int):
        control = concrete(control)
    if control is None:
        m.write_vec(dst, lane_bytes(models.vpshufb(m.vlanes(a_op, U8, width), m.vlanes(b_op, U8, width))))
        return
    b = np.frombuffer(control.to_bytes(width, "little"), np.uint8)
    source = models.vpshufb(np.arange(1, width + 1, dtype=np.uint8), b)
    a = _as_bytes(m.read(a_op, width), width)
    m.write_vec(dst, _bytes_from(a, source))


def _byte_shift(fn):
    """VPSRLDQ / VPSLLDQ by an immediate: the model says where each byte comes from (run on the byte numbers 1..n,
    0 = a zero shifted in), so the bytes keep their lanes."""
    def run(m, insn, ops):
        _unmasked(m, ops)
        dst, src, count = (ops[0], ops[1], ops[2]) if len(ops) == 3 else (ops[0], ops[0], ops[1])
        width = dst.size
        source = fn(np.arange(1, width + 1, dtype=np.uint8), count.imm)
        data = _as_bytes(m.read(src, width), width)
        m.write_vec(dst, _bytes_from(data, source))
    return run


def _vmovd_gpr(m, insn, ops):
    """VMOVD/VMOVQ from a vector register to a general register or memory."""
    dst, src = ops
    m.write(dst, m.read(src, dst.size), dst.size)


def _model(fn, types, accumulate=False):
    """A model-backed vector instruction: VEX/EVEX `dst, src1, src2` (accumulate: dst is also the first model
    operand, as VPDPBUSD's accumulator), or legacy SSE `dst, src` (dst is src1)."""
    def run(m, insn, ops):
        _unmasked(m, ops)
        sources = ([ops[0]] if accumulate else []) + list(ops[1:]) if insn.mnemonic.startswith("v") else list(ops)
        width = ops[0].size
        result = fn(*[_vector_lanes(m, op, dtype, width) for op, dtype in zip(sources, types)])
        m.write_vec(ops[0], lane_bytes(result))
    return run


def _vector_lanes(m, op, dtype, width):
    """An operand's lanes; float32 lanes are read as their bits (int32) and viewed as floats, as the models take."""
    if np.dtype(dtype) == F32:
        return m.vlanes(op, S32, width).view(F32)
    return m.vlanes(op, dtype, width)


def _convert_model(fn, from_type):
    """VCVTDQ2PS / VCVTPS2DQ: dst, src (a register or memory of the destination's size)."""
    def run(m, insn, ops):
        _unmasked(m, ops)
        dst, src = ops[0], ops[-1]
        m.write_vec(dst, lane_bytes(fn(_vector_lanes(m, src, from_type, dst.size))))
    return run


def _vpermq(m, insn, ops):
    """VPERMQ ymm, ymm/m256, imm8: DEST.qword[i] := SRC.qword[imm8 >> 2i & 3] (a byte move)."""
    dst, src, imm = ops
    data = _as_bytes(m.read(src, dst.size), dst.size)
    out = []
    for lane in range(0, dst.size, 32):
        for i in range(4):
            j = (imm.imm >> (2 * i)) & 3
            out += data[lane + 8 * j: lane + 8 * j + 8]
    m.write_vec(dst, out)


def _vshift_imm(direction: str, unit: int):
    """VPSRLQ/VPSLLQ/... by an immediate: each lane shifted as an unsigned integer (a count >= its bits gives 0)."""
    dtype = np.dtype(f"u{unit}")

    def run(m, insn, ops):
        dst, src, count = (ops[0], ops[1], ops[2]) if len(ops) == 3 else (ops[0], ops[0], ops[1])
        if count.type != X.X86_OP_IMM:
            m.fail("a vector shift by a register count lowp prove does not model")
        n = count.imm
        if n >= 8 * unit:
            m.write_vec(dst, const_bytes(0, dst.size))
            return
        if n % 8 == 0:          # whole bytes move within each lane: keep them as they are (REDUCE's >> 32)
            data, k = _as_bytes(m.read(src, dst.size), dst.size), n // 8
            zero = const_bytes(0, k)
            moved = [data[i + k:i + unit] + zero if direction == "right" else zero + data[i:i + unit - k]
                     for i in range(0, dst.size, unit)]
            m.write_vec(dst, [b for lane in moved for b in lane])
            return
        x = m.vlanes(src, dtype, dst.size)
        m.write_vec(dst, lane_bytes(x >> n if direction == "right" else x << n))
    return run


def _vmovddup(m, insn, ops):
    """VMOVDDUP: per 128 bits, the even qword twice (an xmm destination reads 8 bytes of memory)."""
    dst, src = ops
    data = _as_bytes(m.read(src, 8 if dst.size == 16 and src.type != X.X86_OP_REG else dst.size),
                     8 if dst.size == 16 and src.type != X.X86_OP_REG else dst.size)
    out = []
    for lane in range(0, dst.size, 16):
        out += data[lane:lane + 8] * 2
    m.write_vec(dst, out)


def _vmovhps(m, insn, ops):
    """VMOVHPS xmm1, xmm2, m64 (the low qword of xmm2, then 8 bytes of memory) or VMOVHPS m64, xmm (the high qword)."""
    if len(ops) == 2:
        dst, src = ops
        m.write(dst, _as_bytes(m.read(src, 16), 16)[8:16], 8)
        return
    dst, low, high = ops
    m.write_vec(dst, _as_bytes(m.read(low, 16), 16)[:8] + _as_bytes(m.read(high, 8), 8))


def _vcvtsi2ss(m, insn, ops):
    """VCVTSI2SS xmm1, xmm2, r/m32: the low float of xmm1 := the integer rounded to nearest even (MXCSR), the rest
    from xmm2. A parameter lowp keeps concrete (an output bound less a zero point); symbolic: not modelled."""
    dst, keep, src = ops
    value = m.read(src, src.size)
    if not isinstance(value, int):
        m.fail("an integer-to-float conversion of symbolic data outside the models")
    signed = value - (1 << (8 * src.size)) if value >> (8 * src.size - 1) else value
    bits = int(np.array([signed], np.float64).astype(np.float32).view(np.uint32)[0])
    m.write_vec(dst, const_bytes(bits, 4) + _as_bytes(m.read(keep, 16), 16)[4:16])


def _xchg(m, insn, ops):
    """XCHG: two general registers swap (XCHG AX, AX is a 2-byte nop)."""
    a, b = ops
    if a.type != X.X86_OP_REG or b.type != X.X86_OP_REG:
        m.fail("an exchange with memory (a lock) lowp prove does not model")
    va, vb = m.read(a), m.read(b)
    m.write(a, vb)
    m.write(b, va)


def _narrow_model(fn, from_type):
    """VPMOVQD and its kind: dst (a register or memory of half the source's size), src (a register)."""
    def run(m, insn, ops):
        _unmasked(m, ops)
        dst, src = ops
        result = lane_bytes(fn(m.vlanes(src, from_type, src.size)))
        if dst.type == X.X86_OP_REG:
            m.write_vec(dst, result)
        else:
            m.write(dst, result, len(result))
    return run


def _extend_model(fn, from_type):
    """VPMOVSX/ZX: the source is the low half of a register (or half as many bytes of memory)."""
    def run(m, insn, ops):
        dst, src = ops
        m.write_vec(dst, lane_bytes(fn(m.vlanes(src, from_type, dst.size // 2))))
    return run


S8, U8, S16, S32, F32 = np.int8, np.uint8, np.int16, np.int32, np.float32

HANDLERS = {
    "mov": _mov, "movabs": _mov, "movzx": _movx(False), "movsx": _movx(True), "movsxd": _movx(True),
    "lea": _lea, "add": _arith("add"), "sub": _arith("sub"), "and": _arith("and"), "or": _arith("or"),
    "xor": _arith("xor"), "cmp": _cmp, "test": _test, "neg": _unary("neg"), "inc": _unary("inc"),
    "dec": _unary("dec"), "not": _unary("not"), "shl": _shift("shl"), "sal": _shift("shl"), "sar": _shift("sar"),
    "shr": _shift("shr"), "imul": _imul, "jmp": _jmp, "call": _call, "ret": _ret, "push": _push, "pop": _pop,
    "kmovb": _kmov, "kmovw": _kmov, "kmovd": _kmov, "kmovq": _kmov,
    "nop": _nop, "endbr64": _nop, "vzeroupper": _nop, "cdqe": _cdqe, "cqo": _cqo,
    "rep movsq": _rep(8, False), "rep movsd": _rep(4, False), "rep movsb": _rep(1, False),
    "rep stosq": _rep(8, True), "rep stosd": _rep(4, True), "rep stosb": _rep(1, True),
    # vector moves
    **{name: _vmov for name in ("vmovdqa", "vmovdqu", "vmovdqa32", "vmovdqa64", "vmovdqu8", "vmovdqu16",
                                "vmovdqu32", "vmovdqu64", "vmovaps", "vmovups", "vmovapd", "vmovupd",
                                "movdqa", "movdqu", "movaps", "movups", "movapd", "movupd")},
    "vpxor": _vxor_like("xor"), "vpxord": _vxor_like("xor"), "vpxorq": _vxor_like("xor"), "pxor": _vxor_like("xor"),
    "vxorps": _vxor_like("xor"), "xorps": _vxor_like("xor"),
    "vpbroadcastb": _broadcast(1), "vpbroadcastw": _broadcast(2), "vpbroadcastd": _broadcast(4),
    "vpbroadcastq": _broadcast(8), "vbroadcasti128": _broadcast(16), "vbroadcasti32x4": _broadcast(16),
    "vbroadcastss": _broadcast(4),
    "pshufd": _pshufd, "vpshufd": _pshufd,
    "vextracti128": _extract(16), "vextracti32x4": _extract(16), "vextracti64x4": _extract(32),
    "vinserti128": _insert(16), "vinserti32x4": _insert(16), "vinserti64x4": _insert(32),
    **{f"{v}punpck{h}{n}": _unpack(u, h == "h") for v in ("", "v") for h in ("l", "h")
       for n, u in (("bw", 1), ("wd", 2), ("dq", 4), ("qdq", 8))},
    **{f"{v}pinsr{n}": _pinsr(u) for v in ("", "v") for n, u in (("b", 1), ("w", 2), ("d", 4), ("q", 8))},
    **{f"{v}pextr{n}": _pextr(u) for v in ("", "v") for n, u in (("b", 1), ("w", 2), ("d", 4), ("q", 8))},
    "pshufb": _pshufb, "vpshufb": _pshufb,
    # the models
    "vpmaddubsw": _model(models.vpmaddubsw, (U8, S8)), "pmaddubsw": _model(models.vpmaddubsw, (U8, S8)),
    "vpmaddwd": _model(models.vpmaddwd, (S16, S16)), "pmaddwd": _model(models.vpmaddwd, (S16, S16)),
    "vpaddd": _model(models.vpaddd, (S32, S32)), "paddd": _model(models.vpaddd, (S32, S32)),
    "vpaddw": _model(models.vpaddw, (S16, S16)), "paddw": _model(models.vpaddw, (S16, S16)),
    "vpaddsw": _model(models.vpaddsw, (S16, S16)), "paddsw": _model(models.vpaddsw, (S16, S16)),
    "vpdpbusd": _model(models.vpdpbusd, (S32, U8, S8), accumulate=True),
    "vpdpbusds": _model(models.vpdpbusds, (S32, U8, S8), accumulate=True),
    "vpdpwssd": _model(models.vpdpwssd, (S32, S16, S16), accumulate=True),
    "vpdpwssds": _model(models.vpdpwssds, (S32, S16, S16), accumulate=True),
    "vpdpbssd": _model(models.vpdpbssd, (S32, S8, S8), accumulate=True),
    "vpdpbsud": _model(models.vpdpbsud, (S32, S8, U8), accumulate=True),
    "vpdpbuud": _model(models.vpdpbuud, (np.uint32, U8, U8), accumulate=True),
    "vpmovsxwd": _extend_model(models.vpmovsxwd, S16), "pmovsxwd": _extend_model(models.vpmovsxwd, S16),
    "vpmovsxbw": _extend_model(models.vpmovsxbw, S8), "pmovsxbw": _extend_model(models.vpmovsxbw, S8),
    "vpmovzxbw": _extend_model(models.vpmovzxbw, U8), "pmovzxbw": _extend_model(models.vpmovzxbw, U8),
    # the fp32 requantization
    "vpackssdw": _model(models.vpackssdw, (S32, S32)), "packssdw": _model(models.vpackssdw, (S32, S32)),
    "vpacksswb": _model(models.vpacksswb, (S16, S16)), "packsswb": _model(models.vpacksswb, (S16, S16)),
    "vpackuswb": _model(models.vpackuswb, (S16, S16)), "packuswb": _model(models.vpackuswb, (S16, S16)),
    "vpmaxsb": _model(models.vpmaxsb, (S8, S8)), "pmaxsb": _model(models.vpmaxsb, (S8, S8)),
    "vpmaxub": _model(models.vpmaxub, (U8, U8)), "pmaxub": _model(models.vpmaxub, (U8, U8)),
    "vphaddd": _model(models.vphaddd, (S32, S32)), "phaddd": _model(models.vphaddd, (S32, S32)),
    "vpermd": _model(lambda idx, a: models.vpermd(a, idx), (S32, S32)),     # Intel order: indices first
    "vpsubw": _model(models.vpsubw, (S16, S16)), "psubw": _model(models.vpsubw, (S16, S16)),
    "vmulps": _model(models.vmulps, (F32, F32)), "mulps": _model(models.vmulps, (F32, F32)),
    "vaddps": _model(models.vaddps, (F32, F32)), "addps": _model(models.vaddps, (F32, F32)),
    "vsubps": _model(models.vsubps, (F32, F32)), "subps": _model(models.vsubps, (F32, F32)),
    "vminps": _model(models.vminps, (F32, F32)), "minps": _model(models.vminps, (F32, F32)),
    "vcvtdq2ps": _convert_model(models.vcvtdq2ps, S32), "cvtdq2ps": _convert_model(models.vcvtdq2ps, S32),
    "vcvtps2dq": _convert_model(models.vcvtps2dq, F32), "cvtps2dq": _convert_model(models.vcvtps2dq, F32),
    "vcvttps2dq": _convert_model(models.vcvttps2dq, F32), "cvttps2dq": _convert_model(models.vcvttps2dq, F32),
    "vpsubsw": _model(models.vpsubsw, (S16, S16)), "psubsw": _model(models.vpsubsw, (S16, S16)),
    "vpaddb": _model(models.vpaddb, (S8, S8)), "paddb": _model(models.vpaddb, (S8, S8)),
    "vpmulld": _model(models.vpmulld, (S32, S32)), "pmulld": _model(models.vpmulld, (S32, S32)),
    "vpsubd": _model(models.vpsubd, (S32, S32)), "psubd": _model(models.vpsubd, (S32, S32)),
    "vpcmpgtd": _model(models.vpcmpgtd, (S32, S32)), "pcmpgtd": _model(models.vpcmpgtd, (S32, S32)),
    "vpmovqd": _narrow_model(models.vpmovqd, np.int64),
    "vpsrldq": _byte_shift(models.vpsrldq), "psrldq": _byte_shift(models.vpsrldq),
    "vpslldq": _byte_shift(models.vpslldq), "pslldq": _byte_shift(models.vpslldq),
    "vpmaskmovd": _vpmaskmov(4), "vpmaskmovq": _vpmaskmov(8),
    "vpermq": _vpermq, "vmovddup": _vmovddup, "vmovhps": _vmovhps, "vcvtsi2ss": _vcvtsi2ss, "xchg": _xchg,
    **{f"{v}ps{d}l{u}": _vshift_imm("right" if d == "r" else "left", {"w": 2, "d": 4, "q": 8}[u])
       for v in ("", "v") for d in ("r", "l") for u in ("w", "d", "q")},
}


def _movd_family(m, insn, ops):
    dst = ops[0]
    if dst.type == X.X86_OP_REG and m.insn.reg_name(dst.reg)[:3] in VSIZE:
        src = ops[1]
        size = src.size if src.type != X.X86_OP_REG or m.insn.reg_name(src.reg)[:3] not in VSIZE else \
            (4 if insn.mnemonic.endswith("d") else 8)
        value = _as_bytes(m.read(src, size), size)
        m.write_vec(dst, value + const_bytes(0, 16 - size), legacy=False)
        return
    _vmovd_gpr(m, insn, ops)


for _name in ("vmovd", "vmovq", "movd", "movq"):
    HANDLERS[_name] = _movd_family


def _family(mnemonic: str):
    """Condition-code families: jcc, setcc, cmovcc."""
    for prefix, make in (("cmov", _cmovcc), ("set", _setcc), ("j", _jcc)):
        if mnemonic.startswith(prefix) and mnemonic[len(prefix):] in CONDITIONS:
            handler = HANDLERS[mnemonic] = make(mnemonic[len(prefix):])
            return handler
    return None


def call(image: Image, memory: Memory, symbol: str, args: list[int], *, stack: Region,
         max_steps: int = 2_000_000) -> dict:
    """Run `symbol(*args)` (integer and pointer arguments) symbolically to its return."""
    return X86(image, memory, max_steps=max_steps).call(symbol, args, stack)


__all__ = ["call", "X86", "MemoryViolation", "Unsupported"]
