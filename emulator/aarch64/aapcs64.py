"""AArch64 for the Unicorn Machine: its calling convention (AAPCS64) and the few facts of the ISA the
architecture-neutral core (machine.py) needs to report a fault: the program counter, the disassembler, how many
bytes a load or store accesses and where, what an exception number means, and which undefined instructions lowp
fills in with its own models (FEAT_I8MM, which Unicorn 2.1.4 lacks).

A target on another architecture gives Machine an object with the same attributes (see docs/emulator.md, "How to
add a target"); nothing in machine.py names an AArch64 register.

AAPCS64 (Arm IHI 0055, "Parameter passing"): integer and pointer arguments in X0..X7, the rest in 8-byte stack
slots at SP (16-byte aligned); the result in X0; the return address in X30 (LR).
"""
from __future__ import annotations

import numpy as np
from unicorn import UC_ARCH_ARM64, UC_MODE_ARM, Uc
from unicorn.arm64_const import (UC_ARM64_REG_FP, UC_ARM64_REG_LR, UC_ARM64_REG_PC, UC_ARM64_REG_SP,
                                 UC_ARM64_REG_V0, UC_ARM64_REG_X0, UC_CPU_ARM64_MAX)

from lowp.emulator.aarch64 import a64
from lowp.emulator.aarch64 import i8mm

MASK64 = (1 << 64) - 1
REGISTER_STATES = 64      # the register states a seed chooses from (a saved context is 12 KiB)


class Aapcs64:
    name = "AAPCS64"
    arch = "aarch64"
    register_args = 8          # X0..X7
    instruction_bytes = 4
    pc, sp, link, result = UC_ARM64_REG_PC, UC_ARM64_REG_SP, UC_ARM64_REG_LR, UC_ARM64_REG_X0
    # Unicorn's exception numbers (QEMU's EXCP_*): what the kernel executed, and where the pc then points
    UNDEFINED = 1
    TRAPS = {2: ("svc", 4), 3: ("hvc", 4), 7: ("brk", 0)}    # kind, bytes the reported pc is past the instruction
    executor_name = "Unicorn 2.1.4"

    def create(self) -> Uc:
        uc = Uc(UC_ARCH_ARM64, UC_MODE_ARM)
        uc.ctl_set_cpu_model(UC_CPU_ARM64_MAX)   # before anything else: DotProd needs MAX (A72 lacks it)
        return uc

    def pass_arguments(self, uc, values: list[int], stack_top: int, return_address: int) -> None:
        """X0..X7, then 8-byte stack slots at a 16-byte aligned SP below stack_top; LR = return_address."""
        sp = stack_top
        stack_args = values[self.register_args:]
        sp -= -(-8 * len(stack_args) // 16) * 16
        for k, v in enumerate(stack_args):
            uc.mem_write(sp + 8 * k, v.to_bytes(8, "little"))
        for k, v in enumerate(values[:self.register_args]):
            uc.reg_write(UC_ARM64_REG_X0 + k, v)
        uc.reg_write(UC_ARM64_REG_SP, sp)
        uc.reg_write(UC_ARM64_REG_LR, return_address)

    def seeded(self, seed: int, nargs: int) -> list[tuple[int, int]]:
        """(register, value) for every register seed_registers() chooses."""
        xs, vs = seeded_registers(seed, nargs)
        values = [(UC_ARM64_REG_X0 + k, v) for k, v in xs.items()]
        return values + [(UC_ARM64_REG_V0 + k, int.from_bytes(vs[16 * k:16 * k + 16], "little")) for k in range(32)]

    def register(self, uc, name: str) -> int | None:
        """The value of x0..x30, w0..w30 or sp by capstone's name; None for any other name."""
        if name == "sp":
            return uc.reg_read(UC_ARM64_REG_SP)
        if name and name[0] in "xw" and name[1:].isdigit():
            n = int(name[1:])
            v = uc.reg_read(UC_ARM64_REG_X0 + n if n < 29 else {29: UC_ARM64_REG_FP, 30: UC_ARM64_REG_LR}[n])
            return v & 0xFFFFFFFF if name[0] == "w" else v
        return None

    def disassemble(self, word: bytes, pc: int = 0) -> str:
        return disassemble(word, pc)

    def instruction(self, word: bytes, pc: int):
        """capstone's detailed instruction, or None."""
        return next(_capstone(detail=True).disasm(word, pc), None)

    def mnemonics(self, code: bytes, address: int) -> list[str]:
        return [insn.mnemonic for insn in _capstone().disasm(code, address)]

    def effective_address(self, insn, uc) -> int | None:
        return effective_address(insn, lambda name: self.register(uc, name))

    def access_size(self, insn) -> int | None:
        return _access_size(insn)

    # -- lowp's models in Unicorn's place -----------------------------------------------------------------
    def fill_undefined(self, uc, pc: int, word: int):
        """Execute an instruction Unicorn lacks on lowp's model; the op (with .mnemonic) or None."""
        return i8mm.fill(uc, pc, word)

    def modelled_instructions(self, code: bytes, base: int) -> dict:
        """{address: op} of the instructions lowp can check in lockstep (lowp.emulator.aarch64.a64)."""
        return a64.scan(code, base)

    def read_vector(self, uc, n: int) -> bytes:
        return i8mm.read_q(uc, n)


AAPCS64 = Aapcs64()


def seeded_registers(seed: int, nargs: int) -> tuple[dict[int, int], bytes]:
    """The register state a seed chooses (one of REGISTER_STATES): {k: Xk} for X(nargs) .. X28 (nargs capped at 8)
    and V0 .. V31's 512 bytes; the same for every executor, so a kernel reading a register it never set replays."""
    rng = np.random.default_rng([0x5EED, seed % REGISTER_STATES])
    xs = range(min(nargs, 8), 29)
    return dict(zip(xs, rng.integers(0, 2 ** 63, len(xs)).tolist())), rng.bytes(16 * 32)


def effective_address(insn, xreg) -> int | None:
    """The address a load/store (a capstone instruction with details) accesses first (base + scaled index +
    offset; post-index forms use the base), from xreg(name) -> the value of x0..x30/w0..w30/sp before the
    faulting access (None if unknown); None if unsure."""
    if insn is None:
        return None
    for o in insn.operands:
        if o.type != 3:             # ARM64_OP_MEM
            continue
        base = xreg(insn.reg_name(o.mem.base))
        if base is None:
            return None
        addr = base + o.mem.disp
        if o.mem.index:
            name = insn.reg_name(o.mem.index)
            index = xreg(name)
            if index is None:
                return None
            if o.ext in (5, 6, 7):      # SXTB/SXTH/SXTW
                bits = {5: 8, 6: 16, 7: 32}[o.ext]
                index &= (1 << bits) - 1
                index -= (index >> (bits - 1)) << bits
            elif name.startswith("w") or o.ext in (1, 2, 3):
                index &= {1: 0xFF, 2: 0xFFFF}.get(o.ext, 0xFFFFFFFF)
            addr += index << (o.shift.value if o.shift.type == 1 else 0)
        return addr & MASK64
    return None


_REG_BYTES = {"b": 1, "h": 2, "s": 4, "d": 8, "q": 16, "w": 4, "x": 8}


def _access_size(insn) -> int | None:
    """Bytes one AArch64 load or store accesses, from its mnemonic and registers (A64: LDR/STR by register size,
    B/H/SB/SH/SW suffixes, pairs, and the LD1-4/ST1-4 structure forms by arrangement or lane); None if unsure."""
    if insn is None:
        return None
    from capstone import arm64_const as a
    m = insn.mnemonic
    regs = [insn.reg_name(o.reg) for o in insn.operands if o.type == a.ARM64_OP_REG]
    if m[:3] in ("ld1", "ld2", "ld3", "ld4", "st1", "st2", "st3", "st4"):
        vas = {a.ARM64_VAS_16B: 16, a.ARM64_VAS_8H: 16, a.ARM64_VAS_4S: 16, a.ARM64_VAS_2D: 16, a.ARM64_VAS_1Q: 16,
               a.ARM64_VAS_8B: 8, a.ARM64_VAS_4H: 8, a.ARM64_VAS_2S: 8, a.ARM64_VAS_1D: 8,
               a.ARM64_VAS_1B: 1, a.ARM64_VAS_1H: 2, a.ARM64_VAS_1S: 4}
        lane = {"b": 1, "h": 2, "s": 4, "d": 8}
        vecs = [o for o in insn.operands if o.type == a.ARM64_OP_REG and insn.reg_name(o.reg).startswith("v")]
        if not vecs:
            return None
        one = vecs[0]
        if m.endswith("r") or getattr(one, "vector_index", -1) != -1:   # replicate or single lane: one element
            arrangement = insn.op_str.split(".", 1)[1][:3].rstrip("}, ") if "." in insn.op_str else ""
            size = lane.get(arrangement[-1:]) if arrangement else None
        else:
            size = vas.get(one.vas)
        return size * len(vecs) if size else None
    if not (m.startswith(("ldr", "str", "ldur", "stur", "ldp", "stp", "ldnp", "stnp", "ldxr", "stxr", "ldar",
                          "stlr")) and regs):
        return None
    core = m.rstrip("0123456789")
    if core.endswith(("sw",)):
        size = 4
    elif core.endswith(("b", "sb")) and not core.endswith("stnp"):
        size = 1
    elif core.endswith(("h", "sh")):
        size = 2
    else:
        size = _REG_BYTES.get(regs[0][0])
    pair = core.startswith(("ldp", "stp", "ldnp", "stnp"))
    return size * 2 if size and pair else size


_CS = {}


def _capstone(detail=False):
    if detail not in _CS:
        from capstone import CS_ARCH_ARM64, CS_MODE_ARM, Cs
        _CS[detail] = Cs(CS_ARCH_ARM64, CS_MODE_ARM)
        _CS[detail].detail = detail
    return _CS[detail]


def disassemble(word: bytes, pc: int = 0) -> str:
    """capstone's text for one instruction, or '.inst 0x...' if capstone does not know it."""
    for insn in _capstone().disasm(word, pc):
        return f"{insn.mnemonic} {insn.op_str}".strip()
    return f".inst {int.from_bytes(word, 'little'):#010x}"


def _fixed(word: int, *free: tuple[int, int]) -> tuple[int, int]:
    """(mask, value) of an encoding: `word`'s bits except the free fields (hi, lo): its operands."""
    mask = 0xFFFFFFFF
    for hi, lo in free:
        mask &= ~(((1 << (hi - lo + 1)) - 1) << lo)
    return mask, word & mask


# The SME2 instructions lowp's code uses that capstone 5 cannot decode (measured: clang's encodings of the ACLE
# forms, read against Arm ARM DDI 0487 M.a.a): (mask, value, mnemonic). Free fields: Zm, Wv, Zn, U, offset;
# MOVA: Wv, offset, Zd. U (bit 4) tells SDOT from UDOT.
SME2_ENCODINGS = tuple((*_fixed(word, *free), name) for word, free, name in (
    (0xC1A51400, ((20, 18), (14, 13), (9, 7), (2, 0)), "sdot"),      # SDOT (4-way, multiple vectors) VGx4, 8 -> 32
    (0xC1A51410, ((20, 18), (14, 13), (9, 7), (2, 0)), "udot"),      # UDOT, the same with U = 1
    (0xC1B21600, ((20, 17), (14, 13), (9, 6), (2, 0)), "sdot"),      # SDOT (4-way, multiple vectors) VGx2
    (0xC1B21610, ((20, 17), (14, 13), (9, 6), (2, 0)), "udot"),
    (0xC0060C20, ((14, 13), (7, 5), (4, 2)), "mova"),                # MOVA (array to vector, four registers)
    (0xC00608A4, ((14, 13), (7, 5), (4, 1)), "mova"),                # MOVA (array to vector, two registers)
))


def mnemonic(word: bytes, pc: int = 0) -> str:
    """The mnemonic of one instruction: capstone's, else SME2_ENCODINGS', else '.inst 0x...'."""
    insn = next(_capstone().disasm(word, pc), None)
    if insn is not None:
        return insn.mnemonic
    value = int.from_bytes(word, "little")
    return next((name for mask, fixed, name in SME2_ENCODINGS if value & mask == fixed), f".inst {value:#010x}")
