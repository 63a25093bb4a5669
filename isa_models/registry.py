"""The registry of instruction models and of the intrinsics that map to them.

An `Instruction` is the truth about one instruction (one numpy model function plus its metadata); an
`Intrinsic` is one C spelling of it (register width, masking form, argument order). `intrinsic(name)`
returns the Intrinsic, which is callable with the intrinsic's own arguments in the intrinsic's own order,
so a user can mirror C code intrinsic by intrinsic.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .lanes import TYPE_NAMES, operand


@dataclass(frozen=True)
class Param:
    """One argument (or the result) of an intrinsic.

    kind: 'vec' (a register: numpy array of `lanes` elements of `dtype` on the last axis), 'mask' (an
    AVX-512 opmask of `bits` bits, as an int or integer array), 'imm' (an immediate int in [lo, hi]) or
    'scalar' (a run-time scalar register operand of C type `dtype`, e.g. RVV's x[rs1]: an int in [lo, hi]).
    """
    name: str
    kind: str
    dtype: np.dtype | None = None
    lanes: int = 0
    bits: int = 0
    lo: int = 0
    hi: int = 0

    @property
    def width(self) -> int:
        return self.lanes * self.dtype.itemsize * 8 if self.kind == "vec" else self.bits

    def describe(self) -> str:
        if self.kind == "vec":
            return f"{self.name}:{TYPE_NAMES[self.dtype]}x{self.lanes}"
        if self.kind == "mask":
            return f"{self.name}:mask{self.bits}"
        if self.kind == "scalar":
            return f"{self.name}:{TYPE_NAMES[self.dtype]}"
        return f"{self.name}:imm[{self.lo}..{self.hi}]"


@dataclass
class Instruction:
    """One instruction's model and what a user needs to know about it."""
    mnemonic: str
    arch: str                 # 'x86', 'aarch64' or 'riscv64'
    extension: str            # vendor name of the ISA extension, e.g. 'AVX512_VNNI'
    operands: str             # element types read, e.g. 'u8 x s8 -> s16'
    overflow: str             # where it saturates or wraps
    pseudocode: str           # name of the vendor pseudocode the model mirrors
    citation: str             # where that pseudocode is
    model: Callable
    intrinsics: list["Intrinsic"] = field(default_factory=list)

    @property
    def widths(self) -> tuple[int, ...]:
        return tuple(sorted({i.width for i in self.intrinsics}))

    @property
    def features(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for i in self.intrinsics:
            seen.update(dict.fromkeys(i.features))
        return tuple(seen)


@dataclass
class Intrinsic:
    """One intrinsic: callable with the intrinsic's own arguments in order, returning the result lanes.

    features: CPU feature flags (Linux /proc/cpuinfo spelling) the intrinsic's instruction needs.
    encoding: 'mmx', 'legacy' (SSE), 'vex', 'evex' or 'a64'.
    adapter: maps the checked intrinsic arguments onto the instruction model.
    """
    name: str
    instruction: Instruction
    width: int
    features: tuple[str, ...]
    encoding: str
    params: tuple[Param, ...]
    result: Param
    adapter: Callable

    @property
    def mnemonic(self) -> str:
        return self.instruction.mnemonic

    @property
    def signature(self) -> str:
        return f"{self.name}({', '.join(p.describe() for p in self.params)}) -> {self.result.describe()}"

    def __call__(self, *args):
        if len(args) != len(self.params):
            raise ValueError(f"{self.name} takes {len(self.params)} arguments ({self.signature}), got {len(args)}")
        checked = [check_argument(self.name, p, a) for p, a in zip(self.params, args)]
        return self.adapter(*checked)


def check_argument(where: str, p: Param, value):
    if p.kind == "vec":
        return operand(value, p.name, p.dtype, widths=(p.width,))
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer, np.ndarray)):
        raise ValueError(f"{where}: argument {p.name!r} is a {p.kind}; expected an int, got {type(value).__name__}")
    v = np.asarray(value)
    if v.dtype.kind not in "iu":
        raise ValueError(f"{where}: argument {p.name!r} is a {p.kind}; expected integers, got dtype {v.dtype}")
    lo, hi = (0, 2 ** p.bits - 1) if p.kind == "mask" else (p.lo, p.hi)
    if v.size and (int(v.min()) < lo or int(v.max()) > hi):
        raise ValueError(f"{where}: argument {p.name!r} must lie in [{lo}, {hi}], got {value!r}")
    return value


_INSTRUCTIONS: dict[tuple[str, str], Instruction] = {}
_INTRINSICS: dict[str, Intrinsic] = {}


def add_instruction(inst: Instruction) -> Instruction:
    key = (inst.arch, inst.mnemonic)
    if key in _INSTRUCTIONS:
        raise ValueError(f"instruction {inst.mnemonic} ({inst.arch}) registered twice")
    _INSTRUCTIONS[key] = inst
    return inst


def add_intrinsic(intr: Intrinsic) -> Intrinsic:
    if intr.name in _INTRINSICS:
        raise ValueError(f"intrinsic {intr.name} registered twice")
    _INTRINSICS[intr.name] = intr
    intr.instruction.intrinsics.append(intr)
    return intr


def intrinsic(name: str) -> Intrinsic:
    """The model of a C intrinsic, by its exact name: `intrinsic('_mm512_mask_dpbusd_epi32')(src, k, a, b)`."""
    try:
        return _INTRINSICS[name]
    except KeyError:
        close = [n for n in _INTRINSICS if name.strip("_").split("_")[-2:-1] and name.strip("_").split("_")[-2] in n]
        hint = f"; similar: {', '.join(sorted(close)[:6])}" if close else ""
        raise KeyError(f"no model for intrinsic {name!r}{hint}") from None


def instruction(mnemonic: str, arch: str | None = None) -> Instruction:
    hits = [i for (a, m), i in _INSTRUCTIONS.items() if m == mnemonic.lower() and arch in (None, a)]
    if not hits:
        raise KeyError(f"no model for instruction {mnemonic!r}")
    if len(hits) > 1:
        raise KeyError(f"{mnemonic!r} exists for several architectures; pass arch=")
    return hits[0]


def instructions(arch: str | None = None) -> list[Instruction]:
    return [i for (a, _), i in _INSTRUCTIONS.items() if arch in (None, a)]


def intrinsics(arch: str | None = None) -> list[Intrinsic]:
    return [i for i in _INTRINSICS.values() if arch in (None, i.instruction.arch)]
