"""Which instructions a native kernel's compiled code contains, so that a kernel entry's `requires` (the
mnemonics of its claimed path, e.g. ["vpdpbusd"]) can be checked against the code that really runs.

`native_instructions(library, symbol)` disassembles the entry and every function of the same shared object it
reaches through direct calls and jumps (static helpers the compiler did not inline, tail calls, `.cold` parts),
each function once, and counts the mnemonics, spelled as Intel spells them. `requires_met(present, requires)`
matches the requirement names against such counts (native: present in the code; emulated: executed) and says
why in one line.

This is static: it says the instruction is in the reachable code, not that a given call executed it (a kernel
with a run-time dispatch may carry both paths). Indirect calls (function pointers) are not followed, and a
stripped object (no .symtab) only knows its exported functions.
"""
from __future__ import annotations

import bisect
import ctypes
import difflib
import fnmatch
import re
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import capstone
from elftools.elf.elffile import ELFFile


class Instructions(Counter):
    """Mnemonic -> how many times it occurs in the reachable code. Besides the counts: `functions`, the names of
    the functions disassembled (the entry first); `external`, the PLT targets called but not followed (memcpy);
    `undecoded`, addresses neither capstone nor objdump could decode (nothing is counted for them). A function
    that identical code folding shares between symbols is named by all of them, "a/b"."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.functions: list[str] = []
        self.external: set[str] = set()
        self.undecoded: list[int] = []


# ---------------------------------------------------------------------------------------------------------------
# Mnemonic names

# Prefixes a disassembler prints in front of the mnemonic; they do not change which instruction it is. The braced
# ones are assembler pseudo-prefixes ("{vex} vpdpbusd" is how binutils marks the AVX-VNNI form).
_PREFIXES = {"rep", "repe", "repz", "repne", "repnz", "lock", "bnd", "notrack", "data16", "data32", "addr16",
             "addr32", "cs", "ds", "es", "fs", "gs", "ss", "xacquire", "xrelease", "rex", "rex.w"}
# EVEX spellings that only add an element size to the VEX instruction's name (the element size matters only
# for masking): one name, so that a requirement written with the VEX name finds both. Intel SDM vol. 2, the
# MOVDQA/MOVDQU and PAND/PANDN/POR/PXOR pages list them together.
_ALIASES = [(re.compile(r"^(vmovdq[au])(?:8|16|32|64)$"), r"\1"),
            (re.compile(r"^(vp(?:and|andn|or|xor))[dq]$"), r"\1")]


def canonical(mnemonic: str) -> str:
    """The instruction's name as Intel spells it, lower case, without prefixes or operands:
    "{vex} vpdpbusd ymm0, ymm2, [rsi]" -> "vpdpbusd", "notrack jmp" -> "jmp", "vmovdqu32" -> "vmovdqu"."""
    tokens = [t for t in mnemonic.lower().split()
              if not (t in _PREFIXES or t.startswith("{") or t.startswith("rex."))]
    name = tokens[0] if tokens else ""
    for pattern, replacement in _ALIASES:
        name = pattern.sub(replacement, name)
    return name


# ---------------------------------------------------------------------------------------------------------------
# The shared object

@dataclass(frozen=True)
class _Function:
    start: int
    size: int
    names: tuple[str, ...]   # every symbol at this address (identical code folding gives several)

    @property
    def end(self) -> int:
        return self.start + self.size


class _SharedObject:
    """The parts of an ELF file the walk needs: functions by address, code bytes, PLT stubs by target."""

    def __init__(self, path: Path):
        self.path = path
        with open(path, "rb") as f:
            elf = ELFFile(f)
            if elf["e_machine"] != "EM_X86_64":
                raise ValueError(f"{path}: machine {elf['e_machine']}, not x86-64")
            self.functions = self._functions(elf)
            self._sections = [(s["sh_addr"], s.data()) for s in elf.iter_sections()
                              if s["sh_flags"] & 0x4 and s["sh_type"] == "SHT_PROGBITS"]   # SHF_EXECINSTR
            self._got_slots = self._plt_relocations(elf)
        self._starts = sorted(self.functions)

    @staticmethod
    def _functions(elf: ELFFile) -> dict[int, _Function]:
        names: dict[int, list[str]] = {}
        sizes: dict[int, int] = {}
        for table in (".symtab", ".dynsym"):   # .symtab has the static functions; .dynsym survives stripping
            section = elf.get_section_by_name(table)
            for sym in section.iter_symbols() if section else ():
                if sym["st_info"]["type"] != "STT_FUNC" or sym["st_shndx"] == "SHN_UNDEF" or not sym["st_size"]:
                    continue
                address = sym["st_value"]
                sizes[address] = max(sizes.get(address, 0), sym["st_size"])
                if sym.name not in names.setdefault(address, []):
                    names[address].append(sym.name)
        return {a: _Function(a, sizes[a], tuple(names[a])) for a in names}

    @staticmethod
    def _plt_relocations(elf: ELFFile) -> dict[int, tuple[str, bool]]:
        """GOT slot address -> (symbol name, defined in this object) for the PLT's jump-slot relocations."""
        slots = {}
        for section in elf.iter_sections():
            if section["sh_type"] not in ("SHT_RELA", "SHT_REL") or not section["sh_link"]:
                continue
            symbols = elf.get_section(section["sh_link"])
            for rel in section.iter_relocations():
                if rel["r_info_sym"]:
                    sym = symbols.get_symbol(rel["r_info_sym"])
                    slots[rel["r_offset"]] = (sym.name, sym["st_shndx"] != "SHN_UNDEF")
        return slots

    def function(self, symbol: str) -> _Function:
        for fn in self.functions.values():
            if symbol in fn.names:
                return fn
        every = sorted({n for fn in self.functions.values() for n in fn.names})
        near = difflib.get_close_matches(symbol, every, n=3)
        raise KeyError(f"{self.path.name} has no function {symbol!r}"
                       + (f"; did you mean {', '.join(near)}?" if near else ""))

    def containing(self, address: int) -> _Function | None:
        i = bisect.bisect_right(self._starts, address) - 1
        if i >= 0 and address < self.functions[self._starts[i]].end:
            return self.functions[self._starts[i]]
        return None

    def code(self, start: int, end: int) -> bytes:
        for base, data in self._sections:
            if base <= start and end <= base + len(data):
                return data[start - base:end - base]
        raise ValueError(f"{self.path.name}: {start:#x}..{end:#x} is not in an executable section")

    def plt_target(self, stub: int) -> tuple[str, bool] | None:
        """The symbol a PLT stub jumps to (name, defined here), read from the stub's `jmp [rip + disp]`."""
        try:
            code = self.code(stub, stub + 16)
        except ValueError:
            return None
        for address, size, mnemonic, operands in _md().disasm_lite(code, stub):
            if canonical(mnemonic) == "jmp":
                m = re.fullmatch(r"qword ptr \[rip ([+-]) (0x[0-9a-f]+|\d+)\]", operands)
                if not m:
                    return None
                slot = address + size + int(m[1] + m[2], 0)
                return self._got_slots.get(slot)
        return None


def _md() -> capstone.Cs:
    return capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)


# ---------------------------------------------------------------------------------------------------------------
# Decoding one function

@dataclass(frozen=True)
class _Insn:
    address: int
    size: int
    name: str        # canonical mnemonic; "" when undecodable
    operands: str


def _decode(so: _SharedObject, fn: _Function) -> list[_Insn]:
    """Every instruction of `fn`. capstone 5 stops at bytes it cannot decode (the VEX-encoded AVX-VNNI forms
    such as `{vex} vpdpbusd`). There the instruction is taken from binutils' objdump over the same function:
    its mnemonic and, from the address of objdump's next instruction, its length; capstone resumes after it.
    So every counted name comes from a disassembler; bytes that objdump cannot decode either ("(bad)") are
    recorded as undecoded, not counted."""
    code = so.code(fn.start, fn.end)
    md, out, address, fallback = _md(), [], fn.start, None
    while address < fn.end:
        for a, size, mnemonic, operands in md.disasm_lite(code[address - fn.start:], address):
            out.append(_Insn(a, size, canonical(mnemonic), operands))
            address = a + size
        if address >= fn.end:
            break
        if fallback is None:
            fallback = _objdump(so.path, fn.start, fn.end)
        name, operands, following = _objdump_at(fallback, address, fn.end)
        out.append(_Insn(address, following - address, name, operands))
        address = following
    return out


_OBJDUMP_LINE = re.compile(r"^\s*([0-9a-f]+):\s+(\S.*)$")


def _objdump(path: Path, start: int, end: int) -> dict[int, str]:
    """address -> instruction text (Intel syntax) for [start, end)."""
    try:
        done = subprocess.run(["objdump", "-d", "-M", "intel", "--no-show-raw-insn", f"--start-address={start:#x}",
                               f"--stop-address={end:#x}", str(path)], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return {}   # no binutils: the rest of the function is reported undecoded
    lines = (_OBJDUMP_LINE.match(line) for line in done.stdout.splitlines())
    return {int(m[1], 16): m[2].strip() for m in lines if m}


def _objdump_at(listing: dict[int, str], address: int, end: int) -> tuple[str, str, int]:
    """(canonical mnemonic or "" if undecodable, operands, address of the next instruction) at `address`."""
    following = min((a for a in listing if a > address), default=end)
    text = listing.get(address)
    if text is None or "(bad)" in text:
        return "", "", following
    tokens = text.split(None, 1)
    while tokens and canonical(tokens[0]) == "" and len(tokens) > 1:   # a prefix: look past it
        tokens = tokens[1].split(None, 1)
    operands = tokens[1] if len(tokens) > 1 else ""
    # objdump writes a branch target as "1130 <f+0x30>"; capstone as "0x1130".
    operands = re.sub(r"^([0-9a-f]+) <[^>]*>$", r"0x\1", operands)
    return canonical(text), operands, following


def _direct_target(insn: _Insn) -> int | None:
    """The target of a direct call or jump (conditional jumps included: gcc emits conditional tail calls)."""
    if insn.name == "call" or insn.name.startswith("j"):
        if re.fullmatch(r"0x[0-9a-f]+", insn.operands):
            return int(insn.operands, 16)
    return None


# ---------------------------------------------------------------------------------------------------------------
# The walk

def native_instructions(library_path: str | Path, symbol: str) -> Instructions:
    """The mnemonics (canonical(): Intel's names, lower case) of the code reachable from `symbol` in an x86-64
    shared object: the function and, transitively, every function of the same object that a direct call or
    jump reaches, each once. A call through the PLT is followed only when the PLT slot's symbol is defined in
    this object (an exported helper called with -fPIC's default interposable call); calls into other libraries
    (memcpy) are listed in `.external`."""
    found = Instructions()
    for insn in _walk(Path(library_path), symbol, found):
        found[insn.name] += 1
    return found


def instruction_sites(library_path: str | Path, symbol: str, requires) -> list[tuple[int, str]]:
    """(address in the file's virtual layout, mnemonic) of every instruction reachable from `symbol` that matches
    one of the `requires` patterns: where to set breakpoints to learn whether the claimed path executes."""
    wanted = [_name(p) for p in ([requires] if isinstance(requires, str) else requires)]
    return [(insn.address, insn.name) for insn in _walk(Path(library_path), symbol, Instructions())
            if any(fnmatch.fnmatchcase(insn.name, w) for w in wanted)]


def _walk(path: Path, symbol: str, found: Instructions):
    """Every decoded instruction of the code reachable from `symbol` (see native_instructions); the functions
    visited, undecodable addresses and external calls are recorded in `found`."""
    so = _SharedObject(path)
    entry = so.function(symbol)
    seen, todo = {entry.start}, [entry]
    while todo:
        fn = todo.pop(0)
        found.functions.append(symbol if fn is entry else "/".join(fn.names))
        for insn in _decode(so, fn):
            if not insn.name:
                found.undecoded.append(insn.address)
                continue
            yield insn
            target = _direct_target(insn)
            callee = so.containing(target) if target is not None else None
            if callee is None and target is not None:
                callee = _through_plt(so, target, found)
            if callee is not None and callee.start not in seen:
                seen.add(callee.start)
                todo.append(callee)


def _through_plt(so: _SharedObject, stub: int, found: Instructions) -> _Function | None:
    resolved = so.plt_target(stub)
    if resolved is None:
        return None
    name, defined_here = resolved
    if defined_here:
        return so.function(name)
    found.external.add(name)
    return None


def loaded_from(address: int) -> Path:
    """The file of the shared object loaded in this process that contains `address` (e.g. a cffi function
    pointer's, `int(ffi.cast("uintptr_t", fn))`), through dladdr(3)."""
    class DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]
    info = DlInfo()
    dladdr = ctypes.CDLL(None).dladdr
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
    if not dladdr(ctypes.c_void_p(address), ctypes.byref(info)) or not info.dli_fname:
        raise ValueError(f"{address:#x} is in no loaded shared object")
    return Path(info.dli_fname.decode())


# ---------------------------------------------------------------------------------------------------------------
# Requirements

# Multiply and dot-product names, listed first when a requirement is missing: they show which path was taken
# instead (vpmaddubsw + vpmaddwd where vpdpbusd was claimed; smlal where sdot was).
_ARITHMETIC = re.compile(r"mul|madd|mla|dp|dot|sad|mmla")
_SHOWN = 8


def requires_met(present: Counter, requires: str | Iterable[str], seen: str = "present") -> tuple[bool, str]:
    """Whether any of `requires` occurs in `present` (mnemonic -> count), and a one-line explanation.

    A requirement is a mnemonic or a shell-style pattern ("vpdpbus*", "*pmaddubsw" for the SSE and VEX forms),
    case insensitive, spelled as Intel (or Arm) spells it; `seen` is the verb of the explanation ("present" for
    native code, "executed" for emulated runs). No requirements: met."""
    patterns = [requires] if isinstance(requires, str) else list(requires)
    if not patterns:
        return True, "no instructions required"
    wanted = [_name(p) for p in patterns]
    names = Counter()
    for n, count in present.items():
        names[_name(n)] += count
    matched = {n: c for n, c in names.items() if c and any(fnmatch.fnmatchcase(n, w) for w in wanted)}
    if matched:
        return True, f"{seen}: " + ", ".join(f"{n} x{c}" for n, c in sorted(matched.items(), key=_by_count))
    return False, f"none of {', '.join(patterns)} is {seen}; " + _summary(names, seen)


def _name(mnemonic: str) -> str:
    """canonical(), or the lower-case text where that leaves nothing (a pattern, or an Arm name such as "cs")."""
    return canonical(mnemonic) or mnemonic.strip().lower()


def _by_count(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]


def _summary(names: dict[str, int], seen: str) -> str:
    if not any(names.values()):
        return "no instructions at all"
    ranked = sorted(((n, c) for n, c in names.items() if c),
                    key=lambda item: (not _ARITHMETIC.search(item[0]), not item[0].startswith("v"), *_by_count(item)))
    shown = ", ".join(f"{n} x{c}" for n, c in ranked[:_SHOWN])
    more = f", ... ({len(ranked) - _SHOWN} more)" if len(ranked) > _SHOWN else ""
    return (f"the code has {shown}" if seen == "present" else f"{seen}: {shown}") + more
