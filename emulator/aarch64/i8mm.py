"""Close Unicorn 2.1.4's FEAT_I8MM gap with lowp's own models.

Unicorn 2.1.x is QEMU 5.0.1 underneath, which predates FEAT_I8MM: SMMLA, UMMLA, USMMLA, USDOT and SUDOT raise
an exception (interrupt 1, EXCP_UDEF) even with the MAX cpu model (measured; docs/findings.md). When that
happens, `fill` decodes the word at PC, computes the instruction with lowp.isa_models.arm on the register file,
writes Vd, advances PC by 4, and emulation goes on. Machine counts every such instruction per mnemonic and
reports it in CallResult.modeled, so a user knows which instructions ran on the models rather than on Unicorn.
"""
from __future__ import annotations

from functools import lru_cache

from unicorn.arm64_const import UC_ARM64_REG_PC, UC_ARM64_REG_Q0

from lowp.emulator.aarch64.a64 import I8MM, Op, decode

MNEMONICS = I8MM


def read_q(uc, n: int) -> bytes:
    return (uc.reg_read(UC_ARM64_REG_Q0 + n) & ((1 << 128) - 1)).to_bytes(16, "little")


def write_q(uc, n: int, value: bytes) -> None:
    uc.reg_write(UC_ARM64_REG_Q0 + n, int.from_bytes(value, "little"))


@lru_cache(maxsize=4096)
def decode_i8mm(word: int) -> Op | None:
    """The Op for an I8MM encoding, None for anything else."""
    o = decode(word)
    return o if o is not None and o.i8mm else None


def fill(uc, pc: int, word: int) -> Op | None:
    """Execute the I8MM instruction `word` at `pc` with the models; None if it is not one (left to the caller)."""
    o = decode_i8mm(word)
    if o is None:
        return None
    write_q(uc, o.rd, o.execute(lambda n: read_q(uc, n)))
    uc.reg_write(UC_ARM64_REG_PC, pc + 4)
    return o
