"""What lowp's qemu-riscv64 guest needs to know about a RISC-V 64 instruction word, for fault messages and
per-mnemonic counts: its length, its text (capstone 5 for RV64GC; lowp's own decoder for the V extension, which
capstone 5 does not know), whether a load or store reads or writes, and the address it starts at.

Encodings: the RISC-V Unprivileged ISA (riscv/riscv-isa-manual, "RV32I Base Integer Instruction Set", "C"
Standard Extension for Compressed Instructions) for the scalar loads and stores and the 16/32-bit length rule
(chapter "Instruction Length Encoding": low bits 11 -> 32 bits, anything else -> 16 bits); the RVV 1.0
specification (riscv/riscv-v-spec@v1.0 v-spec.adoc) section 7 (vector loads and stores: LOAD-FP / STORE-FP with
width 0, 5, 6, 7; mop, lumop, nf), section 6 (vsetvli / vsetivli / vsetvl) and section 10 with its instruction
listing (inst-table.adoc: funct6 of OPIVV/OPIVX/OPIVI and OPMVV/OPMVX). Only the integer and configuration
instructions are named; a vector floating-point instruction reads as '.insn'.
"""
from __future__ import annotations

from functools import lru_cache

ABI = ("zero", "ra", "sp", "gp", "tp", "t0", "t1", "t2", "s0", "s1", "a0", "a1", "a2", "a3", "a4", "a5", "a6",
       "a7", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "t3", "t4", "t5", "t6")
LOAD, LOAD_FP, STORE, STORE_FP, AMO, OP_V = 0x03, 0x07, 0x23, 0x27, 0x2F, 0x57
VECTOR_WIDTHS = {0: 8, 5: 16, 6: 32, 7: 64}        # LOAD-FP / STORE-FP width field -> EEW (RVV 1.0 section 7.3)

# funct6 -> mnemonic stem, RVV 1.0 inst-table.adoc (OPI: OPIVV/OPIVX/OPIVI; OPM: OPMVV/OPMVX).
OPI = {0x00: "vadd", 0x02: "vsub", 0x03: "vrsub", 0x04: "vminu", 0x05: "vmin", 0x06: "vmaxu", 0x07: "vmax",
       0x09: "vand", 0x0A: "vor", 0x0B: "vxor", 0x0C: "vrgather", 0x0E: "vslideup", 0x0F: "vslidedown",
       0x10: "vadc", 0x11: "vmadc", 0x12: "vsbc", 0x13: "vmsbc", 0x17: "vmerge", 0x18: "vmseq", 0x19: "vmsne",
       0x1A: "vmsltu", 0x1B: "vmslt", 0x1C: "vmsleu", 0x1D: "vmsle", 0x1E: "vmsgtu", 0x1F: "vmsgt",
       0x20: "vsaddu", 0x21: "vsadd", 0x22: "vssubu", 0x23: "vssub", 0x25: "vsll", 0x27: "vsmul", 0x28: "vsrl",
       0x29: "vsra", 0x2A: "vssrl", 0x2B: "vssra", 0x2C: "vnsrl", 0x2D: "vnsra", 0x2E: "vnclipu", 0x2F: "vnclip",
       0x30: "vwredsumu", 0x31: "vwredsum"}
OPM = {0x00: "vredsum", 0x01: "vredand", 0x02: "vredor", 0x03: "vredxor", 0x04: "vredminu", 0x05: "vredmin",
       0x06: "vredmaxu", 0x07: "vredmax", 0x08: "vaaddu", 0x09: "vaadd", 0x0A: "vasubu", 0x0B: "vasub",
       0x0E: "vslide1up", 0x0F: "vslide1down", 0x17: "vcompress", 0x18: "vmandn", 0x19: "vmand", 0x1A: "vmor",
       0x1B: "vmxor", 0x1C: "vmorn", 0x1D: "vmnand", 0x1E: "vmnor", 0x1F: "vmxnor", 0x20: "vdivu", 0x21: "vdiv",
       0x22: "vremu", 0x23: "vrem", 0x24: "vmulhu", 0x25: "vmul", 0x26: "vmulhsu", 0x27: "vmulh", 0x29: "vmadd",
       0x2B: "vnmsub", 0x2D: "vmacc", 0x2F: "vnmsac", 0x30: "vwaddu", 0x31: "vwadd", 0x32: "vwsubu", 0x33: "vwsub",
       0x34: "vwaddu", 0x35: "vwadd", 0x36: "vwsubu", 0x37: "vwsub", 0x38: "vwmulu", 0x3A: "vwmulsu",
       0x3B: "vwmul", 0x3C: "vwmaccu", 0x3D: "vwmacc", 0x3E: "vwmaccus", 0x3F: "vwmaccsu"}
NARROWING = {"vnsrl", "vnsra", "vnclipu", "vnclip"}
VXUNARY0 = {2: "vzext.vf8", 3: "vsext.vf8", 4: "vzext.vf4", 5: "vsext.vf4", 6: "vzext.vf2", 7: "vsext.vf2"}


def length(low: bytes) -> int:
    """Bytes of the instruction whose first bytes are `low`: 4 when its low two bits are 11, else 2 (C)."""
    return 4 if low[0] & 3 == 3 else 2


def _bits(word: int, hi: int, lo: int) -> int:
    return (word >> lo) & ((1 << (hi - lo + 1)) - 1)


def vector_mnemonic(word: int) -> str | None:
    """The mnemonic of a 32-bit RVV 1.0 instruction (integer arithmetic, configuration, loads and stores), or
    None if it is not one lowp names."""
    opcode = word & 0x7F
    if opcode in (LOAD_FP, STORE_FP):
        return _memory_mnemonic(word)
    if opcode != OP_V:
        return None
    funct3, funct6 = _bits(word, 14, 12), _bits(word, 31, 26)
    vm, vs1, vs2 = _bits(word, 25, 25), _bits(word, 19, 15), _bits(word, 24, 20)
    if funct3 == 7:                                   # OPCFG (section 6)
        return "vsetvli" if not word >> 31 else "vsetivli" if _bits(word, 31, 30) == 3 else \
            "vsetvl" if _bits(word, 30, 25) == 0 else None
    if funct3 in (0, 3, 4):                           # OPIVV, OPIVI, OPIVX
        operand = {0: "v", 3: "i", 4: "x"}[funct3]
        stem = OPI.get(funct6)
        if stem is None:
            return None
        if funct6 == 0x27 and funct3 == 3:            # OPIVI 100111: vmv<nr>r.v, nr = simm5 + 1
            return f"vmv{vs1 + 1}r.v"
        if stem == "vmerge":
            return f"vmv.v.{operand}" if vm else f"vmerge.v{operand}m"
        if stem in ("vadc", "vsbc"):
            return f"{stem}.v{operand}m"
        if stem in ("vmadc", "vmsbc"):
            return f"{stem}.v{operand}m" if not vm else f"{stem}.v{operand}"
        if stem.startswith("vwred"):
            return f"{stem}.vs"
        return f"{stem}.{'w' if stem in NARROWING else 'v'}{operand}"
    if funct3 in (2, 6):                              # OPMVV, OPMVX
        operand = "v" if funct3 == 2 else "x"
        if funct6 == 0x10:                            # VWXUNARY0 / VRXUNARY0
            if funct3 == 6:
                return "vmv.s.x" if vs2 == 0 else None
            return {0: "vmv.x.s", 16: "vcpop.m", 17: "vfirst.m"}.get(vs1)
        if funct6 == 0x12 and funct3 == 2:
            return VXUNARY0.get(vs1)
        stem = OPM.get(funct6)
        if stem is None:
            return None
        if funct6 <= 0x07:
            return f"{stem}.vs"
        if 0x18 <= funct6 <= 0x1F:
            return f"{stem}.mm"
        if stem == "vcompress":
            return "vcompress.vm"
        if 0x34 <= funct6 <= 0x37:                     # vwadd.w and friends: a 2*SEW vs2
            return f"{stem}.w{operand}"
        return f"{stem}.v{operand}"
    return None


def _memory_mnemonic(word: int) -> str | None:
    eew = VECTOR_WIDTHS.get(_bits(word, 14, 12))
    if eew is None:
        return None                                   # a scalar FP load / store (capstone's)
    store = word & 0x7F == STORE_FP
    nf, mop, umop = _bits(word, 31, 29) + 1, _bits(word, 27, 26), _bits(word, 24, 20)
    seg = f"seg{nf}" if nf > 1 else ""
    if mop == 0:                                       # unit-stride
        if umop == 8:
            return f"vs{nf}r.v" if store else f"vl{nf}re{eew}.v"
        if umop == 11:
            return "vsm.v" if store else "vlm.v"
        if umop == 16 and not store:
            return f"vl{seg}e{eew}ff.v"
        return f"v{'s' if store else 'l'}{seg}e{eew}.v" if umop == 0 else None
    if mop == 2:
        return f"v{'s' if store else 'l'}s{seg}e{eew}.v"
    return f"v{'s' if store else 'l'}{'u' if mop == 1 else 'o'}x{seg}ei{eew}.v"


@lru_cache(maxsize=None)
def _capstone():
    from capstone import CS_ARCH_RISCV, CS_MODE_RISCV64, CS_MODE_RISCVC, Cs
    return Cs(CS_ARCH_RISCV, CS_MODE_RISCV64 | CS_MODE_RISCVC)


def mnemonic(word: bytes, pc: int = 0) -> str:
    """The mnemonic of one instruction (2 or 4 bytes): capstone's, lowp's for RVV, else '.insn 0x...'."""
    insn = next(_capstone().disasm(word, pc), None)
    if insn is not None:
        return insn.mnemonic
    value = int.from_bytes(word, "little")
    return (vector_mnemonic(value) if len(word) == 4 else None) or f".insn {value:#0{2 + 2 * len(word)}x}"


def disassemble(word: bytes, pc: int = 0) -> str:
    """Text of one instruction: capstone's mnemonic and operands, or lowp's RVV mnemonic with its registers'
    numbers (vd, rs1, vs2 fields), or '.insn 0x...'."""
    insn = next(_capstone().disasm(word, pc), None)
    if insn is not None:
        return f"{insn.mnemonic} {insn.op_str}".strip()
    value = int.from_bytes(word, "little")
    name = vector_mnemonic(value) if len(word) == 4 else None
    if name is None:
        return f".insn {value:#0{2 + 2 * len(word)}x}"
    if value & 0x7F in (LOAD_FP, STORE_FP):
        return f"{name} v{_bits(value, 11, 7)}, ({ABI[_bits(value, 19, 15)]})"
    return f"{name} (vd/rd {_bits(value, 11, 7)}, vs2 {_bits(value, 24, 20)}, vs1/rs1 {_bits(value, 19, 15)})"


# -- loads and stores ----------------------------------------------------------------------------------------------

def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value >> (bits - 1) else value


def memory_access(word: bytes) -> tuple[str, int, int, int | None] | None:
    """(kind, base register number, offset, bytes accessed or None) of a load, store or AMO; None if the word is
    none. kind is 'read', 'write' or 'read-modify-write'. A vector access starts at x[rs1] (vstart 0 assumed);
    its size depends on vl, not in the word (None)."""
    if len(word) == 2:
        return _compressed_access(int.from_bytes(word, "little"))
    w = int.from_bytes(word, "little")
    opcode, funct3, rs1 = w & 0x7F, _bits(w, 14, 12), _bits(w, 19, 15)
    if opcode == LOAD:
        return "read", rs1, _signed(_bits(w, 31, 20), 12), 1 << (funct3 & 3)
    if opcode == STORE:
        return "write", rs1, _signed((_bits(w, 31, 25) << 5) | _bits(w, 11, 7), 12), 1 << (funct3 & 3)
    if opcode == LOAD_FP:
        return "read", rs1, (0 if funct3 in VECTOR_WIDTHS else _signed(_bits(w, 31, 20), 12)), \
            (None if funct3 in VECTOR_WIDTHS else 1 << (funct3 & 3))
    if opcode == STORE_FP:
        return "write", rs1, (0 if funct3 in VECTOR_WIDTHS else _signed((_bits(w, 31, 25) << 5) | _bits(w, 11, 7), 12)), \
            (None if funct3 in VECTOR_WIDTHS else 1 << (funct3 & 3))
    if opcode == AMO:
        return ("read" if _bits(w, 31, 27) == 2 else "write" if _bits(w, 31, 27) == 3 else "read-modify-write",
                rs1, 0, 1 << (funct3 & 3))
    return None


def _compressed_access(h: int):
    """c.lw / c.ld / c.fld / c.sw / c.sd / c.fsd (rs1' = x8 + bits 9:7) and the sp-relative forms."""
    quadrant, funct3 = h & 3, _bits(h, 15, 13)
    if quadrant == 0 and funct3 in (1, 2, 3, 5, 6, 7):
        rs1 = 8 + _bits(h, 9, 7)
        if funct3 in (2, 6):                         # c.lw / c.sw: uimm[5:3|2|6]
            off = (_bits(h, 12, 10) << 3) | (_bits(h, 6, 6) << 2) | (_bits(h, 5, 5) << 6)
            size = 4
        else:                                         # c.ld / c.sd / c.fld / c.fsd: uimm[5:3|7:6]
            off = (_bits(h, 12, 10) << 3) | (_bits(h, 6, 5) << 6)
            size = 8
        return ("read" if funct3 < 4 else "write"), rs1, off, size
    if quadrant == 2 and funct3 in (1, 2, 3):         # c.fldsp / c.lwsp / c.ldsp
        if funct3 == 2:
            off = (_bits(h, 12, 12) << 5) | (_bits(h, 6, 4) << 2) | (_bits(h, 3, 2) << 6)
            return "read", 2, off, 4
        off = (_bits(h, 12, 12) << 5) | (_bits(h, 6, 5) << 3) | (_bits(h, 4, 2) << 6)
        return "read", 2, off, 8
    if quadrant == 2 and funct3 in (5, 6, 7):         # c.fsdsp / c.swsp / c.sdsp
        if funct3 == 6:
            return "write", 2, (_bits(h, 12, 9) << 2) | (_bits(h, 8, 7) << 6), 4
        return "write", 2, (_bits(h, 12, 10) << 3) | (_bits(h, 9, 7) << 6), 8
    return None
