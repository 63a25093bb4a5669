"""Symbolic execution of compiled kernel code for one fixed shape: what `lowp prove` runs a kernel on.

Addresses, loop counters and control flow are concrete (the shape fixes them); the bytes of A and B (and any
byte read before it is written) are symbolic. Every value is a sequence of bytes, and each byte remembers the
lane it came from (`Byte`: the lane's exact integer, the lane's size, which byte of it): reading lanes of the
size they were written with gives back the very same exact integers, so an int16 pair sum that a model kept
exact (its interval fits) stays exact through registers, spills and stores. Other reads rebuild the lanes from
the bits.

The instruction semantics are the models' (lowp.isa_models, run on lowp.isa_models.symbolic.bitvec lanes); this module
has what both architectures share: the memory of a call (regions, over-read rules, a store outside the writable
regions is a violation), the loaded code image, and the reasons a run stops short of a verdict.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import z3

from lowp.isa_models.symbolic.bitvec import SymArray, SymInt, fit, within

# -- why a symbolic run stops ---------------------------------------------------------------------------------------


class Unsupported(Exception):
    """The run cannot go on: an instruction the models do not cover, a data-dependent branch or address, an
    indirect call to unknown code. A proof that meets one is UNKNOWN, never PROVED."""

    def __init__(self, reason: str, address: int | None = None, instruction: str = ""):
        self.reason, self.address, self.instruction = reason, address, instruction
        where = f" at {address:#x}" if address is not None else ""
        super().__init__(f"{reason}{where}" + (f": {instruction}" if instruction else ""))


class MemoryViolation(Exception):
    """A load outside every buffer (beyond its declared over-read) or a store outside the writable ones: the
    kernel is wrong for this shape whatever its inputs, a REFUTED proof."""

    def __init__(self, kind: str, address: int, size: int, where: str, pc: int | None, instruction: str = ""):
        self.kind, self.address, self.size, self.where, self.pc = kind, address, size, where, pc
        self.instruction = instruction
        at = f" at {pc:#x}" if pc is not None else ""
        super().__init__(f"{kind} of {size} bytes at {address:#x} ({where}){at}" +
                         (f": {instruction}" if instruction else ""))


class StepLimit(Unsupported):
    pass


# -- bytes that remember their lanes ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Byte:
    lane: SymInt       # the exact integer of the lane this byte belongs to
    size: int          # that lane's bytes
    index: int         # which byte of it (0 = least significant)

    def term(self):
        full = self.lane.bits(8 * self.size)
        return z3.Extract(8 * self.index + 7, 8 * self.index, full) if self.size > 1 else full

    @property
    def value(self) -> int | None:
        v = self.lane.value
        return None if v is None else (v >> (8 * self.index)) & 0xFF


_CONST = [Byte(SymInt.const(v), 1, 0) for v in range(256)]    # Byte is immutable: one per value, shared


def const_bytes(value: int, n: int) -> list[Byte]:
    return [_CONST[(value >> (8 * i)) & 0xFF] for i in range(n)]


def lane_bytes(lanes: SymArray) -> list[Byte]:
    """The bytes of a register's lanes, lane 0 first (little-endian, as x86 and AArch64 store them)."""
    n = lanes.dtype.itemsize
    return [Byte(cell, n, i) for cell in lanes.data.reshape(-1) for i in range(n)]


def int_bytes(x: SymInt, n: int) -> list[Byte]:
    return [Byte(x, n, i) for i in range(n)]


def concrete(data: list[Byte]) -> int | None:
    """The little-endian integer the bytes hold, or None if any is symbolic."""
    total = 0
    for i, b in enumerate(data):
        v = b.value
        if v is None:
            return None
        total |= v << (8 * i)
    return total


def lanes(data: list[Byte], dtype) -> SymArray:
    """The bytes read as lanes of `dtype`: the written lanes themselves where sizes match, else from the bits."""
    dtype = np.dtype(dtype)
    n = dtype.itemsize
    if len(data) % n:
        raise ValueError(f"{len(data)} bytes are not whole {dtype} lanes")
    cells = []
    for j in range(0, len(data), n):
        cells.append(_lane(data[j:j + n], dtype))
    return SymArray.of(cells, dtype)


def _lane(part: list[Byte], dtype) -> SymInt:
    n = len(part)
    first = part[0]
    if first.size == n and first.index == 0 and all(b.lane is first.lane and b.index == i for i, b in enumerate(part)):
        return fit(first.lane, dtype)
    value = concrete(part)
    if value is not None:
        return fit(SymInt.const(value), dtype)
    terms = _runs(part)[::-1]
    term = z3.simplify(z3.Concat(*terms) if len(terms) > 1 else terms[0])
    if n == 1:
        offset = _byte_plus_constant(term)
        if offset is not None:
            lo, hi = (int(v) for v in (np.iinfo(dtype).min, np.iinfo(dtype).max))
            kept = within(offset, lo, hi)     # by its interval, or a lemma over t's domain
            # untrimmed: the exact sum's own term, so products of it stay sums of monomials for the solver
            return SymInt(offset.term, kept.lo, kept.hi) if kept is not None else fit(offset, dtype)
    return SymInt.from_bits(term, dtype.kind == "i")


def _byte_plus_constant(term) -> SymInt | None:
    """A byte that is t + c (or t XOR 0x80, t + 128) mod 256 for a byte t, as z3 simplifies the low byte of a
    general register's zext(t) + c (a packing loop's `lea edx, [rsi - 0x80]` or `add edx, 127` on a movzx'd s8):
    the exact integer signed(t) + c, which lies in the 8 bits' range in the kernel's domain (then the lane keeps
    it; fit keeps its bits, the same mod 256, where it does not)."""
    if term.size() != 8 or term.num_args() != 2 or not (z3.is_app_of(term, z3.Z3_OP_BADD)
                                                        or z3.is_app_of(term, z3.Z3_OP_BXOR)):
        return None
    a, b = term.children()
    c, t = (a, b) if z3.is_bv_value(a) else (b, a) if z3.is_bv_value(b) else (None, None)
    if c is None or (z3.is_app_of(term, z3.Z3_OP_BXOR) and c.as_long() != 0x80):
        return None
    return SymInt.from_bits(t, True) + c.as_long()


def _runs(part: list[Byte]) -> list:
    """The bytes' terms, lowest first, with each run of consecutive bytes of one lane taken as one piece of that
    lane's bits (a whole lane as the lane itself): a qword of two int32 sums is Concat(sum1, sum0), whose low
    dword z3 then reads back as sum0 itself, not as four byte extracts of it it can no longer reassemble."""
    out, j = [], 0
    while j < len(part):
        b, k = part[j], j + 1
        while k < len(part) and part[k].lane is b.lane and part[k].size == b.size and \
                part[k].index == b.index + (k - j):
            k += 1
        full = b.lane.bits(8 * b.size)
        lo, hi = 8 * b.index, 8 * (b.index + k - j) - 1
        out.append(full if (lo, hi) == (0, 8 * b.size - 1) else z3.Extract(hi, lo, full))
        j = k
    return out


def integer(data: list[Byte], signed: bool = False) -> SymInt:
    return _lane(data, np.dtype(f"{'i' if signed else 'u'}{len(data)}")) if len(data) in (1, 2, 4, 8) else \
        SymInt.from_bits(z3.simplify(z3.Concat(*[b.term() for b in reversed(data)])), signed)


# -- memory ---------------------------------------------------------------------------------------------------------

@dataclass
class Region:
    """A buffer of the call. writable: stores allowed. overread: bytes past the end a load may touch (their
    values are free symbols: the result must not depend on them). fresh: bytes never written read as free
    symbols named after their place (C before the kernel writes it, the workspace, the stack)."""
    name: str
    base: int
    size: int
    writable: bool = False
    overread: int = 0
    fresh: bool = True
    backing: bytes | None = None      # constant content (the image's code and read-only data)

    @property
    def end(self) -> int:
        return self.base + self.size

    def holds(self, address: int, size: int, slack: int = 0) -> bool:
        return self.base <= address and address + size <= self.end + slack


@dataclass
class Memory:
    regions: list[Region] = field(default_factory=list)
    data: dict[int, Byte] = field(default_factory=dict)
    free: dict[str, int] = field(default_factory=dict)       # names of the free symbols read, -> their address
    written: set[int] = field(default_factory=set)

    def add(self, region: Region, content: list[Byte] | None = None) -> Region:
        for other in self.regions:
            if region.base < other.end + other.overread and other.base < region.end + region.overread:
                raise ValueError(f"regions {region.name} and {other.name} overlap")
        self.regions.append(region)
        if content is not None:
            for i, b in enumerate(content):
                self.data[region.base + i] = b
        return region

    def region_of(self, address: int, size: int, kind: str) -> tuple[Region, bool]:
        """(the region, whether the access is in its declared over-read tail)."""
        for r in self.regions:
            if r.holds(address, size):
                return r, False
            if kind == "load" and r.overread and r.holds(address, size, r.overread) and address < r.end + r.overread:
                return r, True
        return None, False

    def nearest(self, address: int) -> str:
        best = min(self.regions, key=lambda r: 0 if r.holds(address, 1) else
                   min(abs(address - r.base), abs(address - r.end)))
        if best.holds(address, 1):
            return f"{best.name}[{address - best.base}]"
        off = address - best.base
        return f"{best.name}{'+' if off >= 0 else ''}{off} (outside {best.name}'s {best.size} bytes)"

    def load(self, address: int, size: int, pc: int | None = None, insn: str = "") -> list[Byte]:
        region, tail = self.region_of(address, size, "load")
        if region is None:
            raise MemoryViolation("load", address, size, self.nearest(address), pc, insn)
        out = []
        for a in range(address, address + size):
            b = self.data.get(a)
            if b is None and region.backing is not None and region.holds(a, 1):
                b = Byte(SymInt.const(region.backing[a - region.base]), 1, 0)
            if b is None:
                if region.holds(a, 1) and not region.fresh:
                    raise Unsupported(f"read of {region.name}[{a - region.base}] with no known content", pc, insn)
                where = f"{region.name}[{a - region.base}]" if region.holds(a, 1) else \
                    f"{region.name}_overread[{a - region.end}]"
                b = Byte(SymInt.from_bits(z3.BitVec(where, 8), False), 1, 0)
                self.free[where] = a
                self.data[a] = b
            out.append(b)
        return out

    def store(self, address: int, data: list[Byte], pc: int | None = None, insn: str = "") -> None:
        region, _ = self.region_of(address, len(data), "store")
        if region is None or not region.writable:
            where = self.nearest(address)
            raise MemoryViolation("store", address, len(data), where + ("" if region is None else " (read-only)"),
                                  pc, insn)
        for i, b in enumerate(data):
            self.data[address + i] = b
            self.written.add(address + i)


# -- the code ---------------------------------------------------------------------------------------------------------

@dataclass
class Image:
    """A loaded ELF's bytes and symbols (a shared object at its link addresses, or a static executable)."""
    path: Path
    segments: list[tuple[int, bytes, int, int]]          # (vaddr, file bytes, memsz, p_flags)
    symbols: dict[str, tuple[int, int]]                  # function -> (address, size)
    imports: dict[int, str]                              # PLT slot address -> imported function

    @staticmethod
    def load(path) -> "Image":
        from elftools.common.exceptions import ELFError
        from elftools.elf.elffile import ELFFile
        path = Path(path)
        try:
            with open(path, "rb") as f:
                elf = ELFFile(f)
                segments = [(s["p_vaddr"], s.data(), s["p_memsz"], s["p_flags"]) for s in elf.iter_segments()
                            if s["p_type"] == "PT_LOAD"]
                symbols = {}
                for name in (".symtab", ".dynsym"):
                    table = elf.get_section_by_name(name)
                    for sym in (table.iter_symbols() if table else ()):
                        if sym["st_info"]["type"] in ("STT_FUNC", "STT_GNU_IFUNC") and sym["st_value"] and sym.name:
                            symbols.setdefault(sym.name, (sym["st_value"], sym["st_size"]))
                imports = _plt_imports(elf)
        except (ELFError, OSError, ValueError) as e:
            raise ValueError(f"{path}: not a readable ELF ({e})") from None
        return Image(path, segments, symbols, imports)

    def read(self, address: int, size: int) -> bytes:
        for vaddr, data, memsz, _ in self.segments:
            if vaddr <= address < vaddr + memsz:
                off = address - vaddr
                chunk = data[off:off + size]
                return chunk + bytes(max(0, min(size, memsz - off) - len(chunk)))
        raise KeyError(f"{address:#x} is in no loaded segment of {self.path.name}")

    def regions(self) -> list[Region]:
        """The loaded segments as regions of a call's memory: code and constants read-only, .data/.bss writable
        (a kernel's static state, at its initial values: what a first call in a fresh process sees)."""
        return [Region(f"{self.path.name}@{vaddr:#x}", vaddr, memsz, writable=bool(flags & 2), fresh=False,
                       backing=data + bytes(memsz - len(data))) for vaddr, data, memsz, flags in self.segments
                if memsz]

    def symbol(self, name: str) -> int:
        try:
            return self.symbols[name][0]
        except KeyError:
            raise KeyError(f"{self.path.name} defines no function {name!r}") from None

    def name_at(self, address: int) -> str | None:
        for name, (start, size) in self.symbols.items():
            if start == address:
                return name
        return self.imports.get(address)


def _plt_imports(elf) -> dict[int, str]:
    """PLT entry address -> imported function, for a shared object's calls into libc (memcpy, memset): x86-64's
    .plt (16-byte entries after a 16-byte header) and .plt.sec, in .rela.plt's order."""
    rela = elf.get_section_by_name(".rela.plt")
    if rela is None:
        return {}
    dynsym = elf.get_section(rela["sh_link"])
    names = [dynsym.get_symbol(r["r_info_sym"]).name for r in rela.iter_relocations()]
    out = {}
    sec = elf.get_section_by_name(".plt.sec")
    if sec is not None:
        for i, name in enumerate(names):
            out[sec["sh_addr"] + 16 * i] = name
    plt = elf.get_section_by_name(".plt")
    if plt is not None:
        for i, name in enumerate(names):
            out[plt["sh_addr"] + 16 * (i + 1)] = name
    return out


# -- calls into libc: the few a kernel's driver makes ------------------------------------------------------------------

def memcpy(memory: Memory, dst: int, src: int, n: int, pc=None) -> None:
    if n:
        memory.store(dst, memory.load(src, n, pc, "memcpy"), pc, "memcpy")


def memset(memory: Memory, dst: int, value: int, n: int, pc=None) -> None:
    if n:
        memory.store(dst, const_bytes(int.from_bytes(bytes([value & 0xFF]) * n, "little"), n), pc, "memset")


LIBC = {"memcpy": memcpy, "memmove": memcpy, "memset": memset}


def call_libc(memory: Memory, name: str, args: list, pc: int, instruction: str = "") -> None:
    """A kernel's call into libc: its model on concrete arguments; anything else stops the run (UNKNOWN)."""
    model = LIBC.get(name)
    if model is None:
        raise Unsupported(f"a call to {name}, which lowp prove does not model", pc, instruction)
    if not all(isinstance(a, int) for a in args):
        raise Unsupported(f"a call to {name} with data-dependent arguments", pc, instruction)
    model(memory, *args, pc=pc)
