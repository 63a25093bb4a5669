"""The registry of instruction models and of the intrinsics that map to them.

An `Instruction` is the truth about one instruction (one numpy model function plus its metadata); an
`Intrinsic` is one C spelling of it (register width, masking form, argument order). `intrinsic(name)`
returns the Intrinsic, which is callable with the intrinsic's own arguments in the intrinsic's own order,
so a user can mirror C code intrinsic by intrinsic.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from lowp.isa_models.lanes import TYPE_NAMES, is_lanes, operand, symbolic


@dataclass(frozen=True)
class Param:
    """One argument (or the result) of an intrinsic.

    kind: 'vec' (a register: numpy array of `lanes` elements of `dtype` on the last axis), 'mask' (an
    AVX-512 opmask of `bits` bits, as an int or integer array), 'imm' (an immediate int in [lo, hi]) or
    'scalar' (a run-time scalar register operand of C type `dtype`, e.g. RVV's x[rs1]: an int in [lo, hi]);
    for SVE/SME also 'pred' (a predicate: a bool array, one entry per `dtype` element, lanes as a vec),
    'ptrue' (a predicate that must be all-true: the _x forms, whose inactive lanes ACLE leaves unspecified)
    and 'tile' (an SME ZA tile: `lanes` x `lanes` elements of `dtype` on the last two axes).

    scalable: the register grows with the SVE vector length VL; `lanes` is then the count at VL = 128 and
    `at_vl(vl)` gives the fixed-width Param at one VL.
    """
    name: str
    kind: str
    dtype: np.dtype | None = None
    lanes: int = 0
    bits: int = 0
    lo: int = 0
    hi: int = 0
    scalable: bool = False

    @property
    def width(self) -> int:
        return self.lanes * self.dtype.itemsize * 8 if self.kind in REGISTERS else self.bits

    def at_vl(self, vl: int) -> "Param":
        return replace(self, lanes=self.lanes * vl // 128, scalable=False) if self.scalable else self

    def describe(self) -> str:
        t = TYPE_NAMES.get(self.dtype)
        n = f"(VL/{self.dtype.itemsize * 8})" if self.scalable else str(self.lanes)
        if self.kind == "vec":
            return f"{self.name}:{t}x{n}"
        if self.kind in ("pred", "ptrue"):
            return f"{self.name}:{self.kind}{self.dtype.itemsize * 8}x{n}"
        if self.kind == "tile":
            return f"{self.name}:{t}[{n.strip('()')}][{n.strip('()')}]"
        if self.kind == "mask":
            return f"{self.name}:mask{self.bits}"
        if self.kind == "scalar":
            return f"{self.name}:{TYPE_NAMES[self.dtype]}"
        return f"{self.name}:imm[{self.lo}..{self.hi}]"


REGISTERS = ("vec", "pred", "ptrue", "tile")      # the kinds held in a register (lanes of `dtype`)
SVE_VLS = tuple(range(128, 2049, 128))             # the vector lengths SVE permits (bits)


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
    encoding: 'mmx', 'legacy' (SSE), 'vex', 'evex', 'a64' (Advanced SIMD), 'sve' or 'sme'.
    adapter: maps the checked intrinsic arguments onto the instruction model.
    vl: for an SVE/SME intrinsic fixed at one vector length by at_vl(), that VL in bits; else 0.
    """
    name: str
    instruction: Instruction
    width: int
    features: tuple[str, ...]
    encoding: str
    params: tuple[Param, ...]
    result: Param
    adapter: Callable
    vl: int = 0

    @property
    def mnemonic(self) -> str:
        return self.instruction.mnemonic

    @property
    def scalable(self) -> bool:
        """Vector-length agnostic (SVE/SME): the lanes follow the arguments' VL; see at_vl()."""
        return any(p.scalable for p in (*self.params, self.result))

    def at_vl(self, vl: int) -> "Intrinsic":
        """This intrinsic at one vector length: fixed lane counts, as an executor at that VL runs it."""
        if not self.scalable:
            raise ValueError(f"{self.name} has a fixed width; at_vl() is for SVE/SME intrinsics")
        if vl not in SVE_VLS:
            raise ValueError(f"vl: {vl} is not an SVE vector length; expected a multiple of 128 up to 2048")
        return replace(self, params=tuple(p.at_vl(vl) for p in self.params), result=self.result.at_vl(vl),
                       width=vl, vl=vl)

    @property
    def signature(self) -> str:
        return f"{self.name}({', '.join(p.describe() for p in self.params)}) -> {self.result.describe()}"

    def __call__(self, *args):
        if len(args) != len(self.params):
            raise ValueError(f"{self.name} takes {len(self.params)} arguments ({self.signature}), got {len(args)}")
        checked = [check_argument(self.name, p, a) for p, a in zip(self.params, args)]
        if self.scalable:
            _same_vl(self.name, [(p, a) for p, a in zip(self.params, checked) if p.scalable])
        return self.adapter(*checked)


def _same_vl(where: str, pairs) -> None:
    """Every scalable argument of one call must imply the same vector length."""
    vls = {p.name: a.shape[-1] * 128 // p.lanes for p, a in pairs}
    if len(set(vls.values())) > 1:
        said = ", ".join(f"{k}: {v} bits" for k, v in vls.items())
        raise ValueError(f"{where}: the arguments imply different vector lengths ({said}); one call has one VL")


def check_argument(where: str, p: Param, value):
    if p.kind in REGISTERS:
        return _check_register(where, p, value)
    if symbolic(value):
        # A run-time scalar may be symbolic (lanes of its C type, over the batch axes); masks and immediates are
        # encoded or set before the instruction runs, so the models take them as numbers.
        if p.kind != "scalar":
            raise ValueError(f"{where}: argument {p.name!r} is a {p.kind}; the models take it as a concrete int, "
                             "not symbolic lanes")
        if value.dtype != p.dtype:
            raise ValueError(f"{where}: argument {p.name!r}: expected a {TYPE_NAMES[p.dtype]} scalar, got symbolic "
                             f"lanes of {value.dtype}; lowp never casts an operand")
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer, np.ndarray)):
        raise ValueError(f"{where}: argument {p.name!r} is a {p.kind}; expected an int, got {type(value).__name__}")
    v = np.asarray(value)
    if v.dtype.kind not in "iu":
        raise ValueError(f"{where}: argument {p.name!r} is a {p.kind}; expected integers, got dtype {v.dtype}")
    lo, hi = (0, 2 ** p.bits - 1) if p.kind == "mask" else (p.lo, p.hi)
    if v.size and (int(v.min()) < lo or int(v.max()) > hi):
        raise ValueError(f"{where}: argument {p.name!r} must lie in [{lo}, {hi}], got {value!r}")
    return value


def _check_register(where: str, p: Param, value):
    widths = SVE_VLS if p.scalable else (p.width,)
    if p.kind == "vec":
        return operand(value, p.name, p.dtype, widths=widths)
    esize = p.dtype.itemsize * 8
    if not is_lanes(value) or value.ndim < (2 if p.kind == "tile" else 1):
        raise ValueError(f"{where}: argument {p.name!r} is a {p.kind}; expected a numpy array, got "
                         f"{type(value).__name__ if not is_lanes(value) else f'{value.ndim}-d array'}")
    if p.kind == "tile":
        if value.dtype != p.dtype:
            raise ValueError(f"{where}: ZA tile {p.name!r}: expected dtype {p.dtype}, got {value.dtype}; "
                             "lowp never casts an operand")
        rows, cols = value.shape[-2:]
        if rows != cols or rows * esize not in widths:
            raise ValueError(f"{where}: ZA tile {p.name!r}: expected (VL/{esize}, VL/{esize}) elements, "
                             f"got {rows} x {cols}")
        return value
    if value.dtype != np.bool_:
        raise ValueError(f"{where}: predicate {p.name!r}: expected a bool array (one entry per {esize}-bit "
                         f"element), got dtype {value.dtype}")
    if value.shape[-1] * esize not in widths:
        raise ValueError(f"{where}: predicate {p.name!r}: {value.shape[-1]} entries govern "
                         f"{value.shape[-1] * esize} bits, not a vector length here")
    if p.kind == "ptrue" and not _all_true(value):
        raise ValueError(f"{where}: predicate {p.name!r} must be all-true: the _x form leaves inactive lanes "
                         "unspecified (ACLE), so lowp models it with svptrue only; use the _m or _z form")
    return value


def _all_true(pred) -> bool:
    """Every element active; a symbolic predicate only if each of its lanes is known to be."""
    if symbolic(pred):
        known = pred.values()
        return known is not None and bool(known.all())
    return bool(pred.all())


# Keyed by (arch, mnemonic, extension): SVE SDOT and Advanced SIMD SDOT are one mnemonic, two instructions.
_INSTRUCTIONS: dict[tuple[str, str, str], Instruction] = {}
_INTRINSICS: dict[str, Intrinsic] = {}


def add_instruction(inst: Instruction) -> Instruction:
    key = (inst.arch, inst.mnemonic, inst.extension)
    if key in _INSTRUCTIONS:
        raise ValueError(f"instruction {inst.mnemonic} ({inst.arch}, {inst.extension}) registered twice")
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
    if not isinstance(name, str):
        raise TypeError(f"intrinsic() takes an intrinsic's name as a str (e.g. '_mm256_maddubs_epi16'), "
                        f"not {name!r}")
    try:
        return _INTRINSICS[name]
    except KeyError:
        close = [n for n in _INTRINSICS if name.strip("_").split("_")[-2:-1] and name.strip("_").split("_")[-2] in n]
        hint = f"; similar: {', '.join(sorted(close)[:6])}" if close else ""
        raise KeyError(f"no model for intrinsic {name!r}{hint}") from None


def instruction(mnemonic: str, arch: str | None = None, extension: str | None = None) -> Instruction:
    if not isinstance(mnemonic, str):
        raise TypeError(f"instruction() takes a mnemonic as a str (e.g. 'vpmaddubsw'), not {mnemonic!r}")
    hits = [i for (a, m, e), i in _INSTRUCTIONS.items()
            if m == mnemonic.lower() and arch in (None, a) and extension in (None, e)]
    if not hits:
        raise KeyError(f"no model for instruction {mnemonic!r}")
    if len(hits) > 1:
        where = ", ".join(f"{i.arch} {i.extension}" for i in hits)
        raise KeyError(f"{mnemonic!r} exists several times ({where}); pass arch= and extension=")
    return hits[0]


def instructions(arch: str | None = None) -> list[Instruction]:
    return [i for (a, _, _), i in _INSTRUCTIONS.items() if arch in (None, a)]


def intrinsics(arch: str | None = None) -> list[Intrinsic]:
    return [i for i in _INTRINSICS.values() if arch in (None, i.instruction.arch)]
