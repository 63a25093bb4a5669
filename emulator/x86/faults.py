"""What an x86-64 fault says about the kernel, for every executor that runs x86 code: the native guard
(lowp.kernels.guard: a signal's ucontext) and Bochs (lowp.emulator.x86.bochs: the exception frame the guest CPU
pushed). Both hand over the faulting RIP and the general registers; this module decodes the instruction there
(capstone), works out the address and size of its memory operand, and words a general-protection fault.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from lowp.emulator.errors import AlignmentFault, ExecutorDisagrees, OutOfBounds, describe_out_of_bounds

GPRS = ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13", "r14",
        "r15", "rip")
# 32-bit names of the 64-bit registers (a 32-bit address operand, `[esi + 4]`, zero-extends)
_ALIASES = {**{f"e{r[1:]}": r for r in ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp")},
            **{f"r{i}d": f"r{i}" for i in range(8, 16)}}


@cache
def _capstone():
    from capstone import CS_ARCH_X86, CS_MODE_64, Cs
    cs = Cs(CS_ARCH_X86, CS_MODE_64)
    cs.detail = True
    return cs


def decode(code: bytes, address: int):
    """The capstone instruction (with details) at the start of `code`, or None if capstone cannot decode it."""
    return next(_capstone().disasm(code, address), None)


def text(insn) -> str:
    return f"{insn.mnemonic} {insn.op_str}".strip() if insn is not None else "<undecodable>"


def register(insn, reg: int, regs: dict) -> int | None:
    """The value of a general register operand of `insn` (zero-extended for a 32-bit name), None for others."""
    name = insn.reg_name(reg)
    full = _ALIASES.get(name, name)
    if full not in regs:
        return None
    value = regs[full]
    return value & 0xFFFFFFFF if full != name else value


def memory_operand(insn, regs: dict) -> tuple[int | None, int | None]:
    """(first byte accessed, bytes accessed) of the instruction's memory operand, from the registers at the fault;
    (None, size) where the address cannot be known (a gather's vector index), (None, None) without one."""
    from capstone.x86_const import X86_OP_MEM, X86_REG_RIP
    for op in insn.operands:
        if op.type != X86_OP_MEM:
            continue
        mem, address = op.mem, op.mem.disp
        if mem.base == X86_REG_RIP:
            address += insn.address + insn.size
        elif mem.base:
            base = register(insn, mem.base, regs)
            if base is None:
                return None, op.size
            address += base
        if mem.index:
            index = register(insn, mem.index, regs)
            if index is None:        # a vector index (gather): the fault address is all there is
                return None, op.size
            address += index * mem.scale
        return address & (2 ** 64 - 1), op.size
    return None, None


def general_protection(start: int, size: int | None, instruction: str, where: str, rip: int,
                       buffer: str | None = None, base: int | None = None) -> AlignmentFault:
    """A general-protection fault of an access at `start` (inside `buffer`, whose element 0 is at `base`, if it
    is in one): in a kernel, an aligned-access instruction (MOVDQA, VMOVAPS, ...) on an unaligned address."""
    alignment = start & -start if start else 0
    if buffer is None:
        return AlignmentFault(f"general-protection fault {where}: the access at {start:#x} ({alignment}-byte "
                              "aligned) is in no buffer", address=start, pc=rip, instruction=instruction)
    offset = start - base
    need = f"a {size}-byte aligned address" if size else "an aligned address"
    return AlignmentFault(
        f"misaligned access {where}: it needs {need}, but byte offset {offset} of buffer {buffer!r} is at "
        f"{start:#x}, {min(alignment, 4096)}-byte aligned; lowp places each buffer to end at a page boundary (or "
        "at the offset from 64 bytes a case chooses), so a kernel may not assume its buffers are aligned",
        buffer=buffer, offset=offset, address=start, pc=rip,
        instruction=instruction)


@dataclass(frozen=True)
class Place:
    """Where a buffer lies for a fault's description: its mapping [lo, end) with guard pages around it, element 0
    at `base`, `nbytes` of data, then (up to `end`) the over-read it is allowed."""
    name: str
    lo: int
    base: int
    nbytes: int
    end: int
    dtype: np.dtype
    shape: tuple


def page_fault(access: str, address: int, start: int | None, size: int | None, instruction: str, where: str,
               rip: int, place: Place | None, page: int = 4096) -> OutOfBounds:
    """A page fault at `address` (the first byte the CPU could not reach) of an access that began at `start` (when
    the instruction's memory operand says), in or next to `place`'s buffer."""
    if place is None:
        return OutOfBounds(f"{access} of unmapped memory at {address:#x}, in no buffer, {where}", access=access,
                           address=address, size=size, pc=rip, instruction=instruction)
    if start is not None and size and place.base <= start and start + size <= place.end and \
            not place.base <= address < place.end:
        # The instruction's own operand lies inside the buffer, yet the CPU faulted outside it: the executor
        # computed another address than the instruction encodes (seen: Bochs on an EVEX VPINSRB with a disp8,
        # ggml's repack gemm built by clang for Sapphire Rapids). Not the kernel's fault: say so, never blame it.
        return ExecutorDisagrees(
            f"the executor faulted at {address:#x}, outside buffer {place.name!r}, {where}, but the instruction's "
            f"operand addresses bytes {start - place.base}..{start - place.base + size - 1} of it (inside its "
            f"{place.nbytes} bytes): the emulator disagrees with the instruction's encoding, a problem of lowp's "
            f"executor, not of the kernel")
    began = None
    if start is not None and place.lo - page <= start < place.end + page:
        # The fault names the first byte in the guard page; the access began at `start`, maybe inside the buffer.
        began = start - place.base
        address = place.end if place.base <= start < place.end <= address else start
    offset = address - place.base
    message = describe_out_of_bounds(access, size, offset, place.name, place.nbytes, place.dtype, place.shape, where,
                                     began, place.end - place.base - place.nbytes)
    return OutOfBounds(message, buffer=place.name, offset=offset, nbytes=place.nbytes, access=access,
                       address=address, size=size, pc=rip, instruction=instruction, itemsize=place.dtype.itemsize)
