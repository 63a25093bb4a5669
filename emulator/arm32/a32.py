"""A32 instructions as a fault report needs them (capstone's ARM mode): the text, the mnemonic, whether an access
reads or writes, and the address it starts at (base register + immediate offset, before any writeback)."""
from __future__ import annotations

from functools import lru_cache

MASK32 = (1 << 32) - 1
# capstone's register names of r0..r15 (the reply's registers, in order)
REGISTERS = ("r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "sb", "sl", "fp", "ip", "sp", "lr", "pc")
ALIASES = {"r9": "sb", "r10": "sl", "r11": "fp", "r12": "ip", "r13": "sp", "r14": "lr", "r15": "pc"}


@lru_cache(maxsize=2)
def _capstone(detail: bool = False):
    from capstone import CS_ARCH_ARM, CS_MODE_ARM, CS_MODE_V8, Cs
    cs = Cs(CS_ARCH_ARM, CS_MODE_ARM | CS_MODE_V8)      # V8: the ARMv8 A32 encodings too (VCVTN, VSDOT, ...)
    cs.detail = detail
    return cs


def instruction(word: bytes, pc: int):
    """capstone's detailed instruction, or None."""
    return next(_capstone(True).disasm(word, pc), None)


def disassemble(word: bytes, pc: int = 0) -> str:
    """capstone's text for one A32 instruction, or '.inst 0x...' if capstone does not know it."""
    for insn in _capstone().disasm(word, pc):
        return f"{insn.mnemonic} {insn.op_str}".strip()
    return f".inst {int.from_bytes(word, 'little'):#010x}"


def mnemonic(word: bytes, pc: int = 0) -> str:
    """The mnemonic without condition or data-type suffix ('vld1.8' -> 'vld1', 'smladne' stays as capstone says
    it), lower case: what `requires` names."""
    for insn in _capstone().disasm(word, pc):
        return insn.mnemonic.split(".", 1)[0]
    return f".inst {int.from_bytes(word, 'little'):#010x}"


def access_kind(insn) -> str:
    """read or write, from the mnemonic (qemu's siginfo does not say which)."""
    if insn is None:
        return "access"
    m = insn.mnemonic
    return "write" if m.startswith(("st", "vst", "push", "vpush", "swp")) else "read"


def effective_address(insn, regs) -> int | None:
    """The first address a load or store accesses: its base register (from the registers at the fault, r0..r15
    in order) plus its immediate offset, or plus/minus its index register unshifted; None if unsure (a shifted
    index, a multiple with decrement-before addressing)."""
    if insn is None:
        return None
    from capstone import arm_const as a
    for o in insn.operands:
        if o.type != a.ARM_OP_MEM:
            continue
        base = insn.reg_name(o.mem.base)
        base = ALIASES.get(base, base)
        if base not in REGISTERS:
            return None
        addr = regs[REGISTERS.index(base)] + o.mem.disp
        if o.mem.index:
            index = insn.reg_name(o.mem.index)
            index = ALIASES.get(index, index)
            if index not in REGISTERS or o.shift.type:
                return None
            value = regs[REGISTERS.index(index)]
            addr += -value if o.subtracted else value
        return addr & MASK32
    return None
