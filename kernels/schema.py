"""The kernel schema: what a kernel entry (a [[kernel]] table of a TOML file, or a Kernel(...) registered from
Python) may say, checked with pydantic before anything builds or runs.

Unknown keys, wrong types, an unknown target, operand type, signature or CPU feature, a malformed tile, a domain
outside its type or with lo > hi, non-int params, an unknown over-read buffer, a missing source, header or
include directory, a source of no known language, a define that is not NAME or NAME=VALUE, both or neither of
`source` and `sources`, a `model` that does not import: each is a Problem naming the file, the kernel, the key,
what is wrong, what is accepted and the nearest accepted names. One KernelConfigError carries every problem of a
file at once.
(Contract names are checked by lowp.conformance.search.validate: the contracts live there, downstream of the kernels.)
"""
from __future__ import annotations

import dataclasses
import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr,
                      StringConstraints, ValidationError, ValidationInfo, field_validator)
from pydantic_core import PydanticCustomError

from lowp.isa_models.lanes import DTYPES

from lowp.emulator.targets import all_targets, backends

from lowp.kernels.entry import SIGNATURES, XNNPACK_SIGNATURES, Domain, Kernel, Tile
from lowp.kernels.features import TARGETS, did_you_mean, known_features, suggest_feature

# Operand types a GEMM kernel can take: the 8- and 16-bit lane types (wider ones overflow an int32 C at once).
OPERAND_TYPES = tuple(name for name, dtype in DTYPES.items() if dtype.itemsize <= 2)
# The buffers a kernel is handed (Kernel.overread keys): the gemm signatures' and the XNNPACK ABI's.
BUFFERS = ("A", "B", "C", "work", "q", "w", "params", "quantization_params", "indirection", "zero", "zero_data")
C_TYPES = ("s32", "s8", "u8", "f32", "f16", "bf16")
# Options whose argument is a path, in the order they are matched (longest first: -isystem before -I).
INCLUDE_OPTIONS = ("-isystem", "-idirafter", "-iquote", "-include", "-imacros", "-I")


# ---- the error ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Problem:
    """One thing wrong with one kernel entry."""
    path: Path | str | None     # the TOML file, or the Python file that registered the kernel
    kernel: str | None          # its name, or '#3' for the third entry of a file when it has no usable name
    key: str | None             # 'features', 'tile.mr', 'overread.D', ...
    message: str

    def __str__(self) -> str:
        parts = [str(self.path)] if self.path else []
        if self.kernel:
            parts.append(f"kernel {self.kernel}" if self.kernel.startswith("#") else f"kernel {self.kernel!r}")
        if self.key:
            parts.append(self.key)
        return ": ".join(parts + [self.message])


class KernelConfigError(ValueError):
    """A kernel entry is malformed: nothing of it ran. `.problems` lists every problem found (a whole file's);
    `.path`, `.kernel` and `.key` are the first one's."""

    def __init__(self, problems: list[Problem] | Problem):
        self.problems = [problems] if isinstance(problems, Problem) else list(problems)
        first = self.problems[0]
        self.path, self.kernel, self.key = first.path, first.kernel, first.key
        lines = [str(p) for p in self.problems]
        head = f"{len(lines)} problems in the kernel configuration:\n  " if len(lines) > 1 else ""
        super().__init__(head + "\n  ".join(lines))

    def __reduce__(self):                  # picklable (child processes hand errors back): rebuild from problems
        return type(self), (self.problems,)


def _custom(kind: str, message: str) -> PydanticCustomError:
    # The message goes through the context: a literal template would read its braces as placeholders.
    return PydanticCustomError(kind, "{message}", {"message": message})


def _suggestion(names: list[str]) -> str:
    return f"; did you mean {' or '.join(repr(n) for n in names)}?" if names else ""


def _known_name(code: str, what: str, value: str, names) -> str:
    """`value` if it is one of `names`, else the schema error `code`: 'unknown <what> ...; did you mean ...?'."""
    if value not in names:
        raise _custom(code, _unknown(what, value, did_you_mean(value, names), ", ".join(names)))
    return value


def _unknown(what: str, value, suggestions: list[str], accepted: str) -> str:
    """'unknown <what> <value>; did you mean ...? Accepted: ...' (the accepted values after the suggestion)."""
    then = " Accepted: " if suggestions else "; accepted: "
    return f"unknown {what} {_show(value)}{_suggestion(suggestions)}{then}{accepted}"


# ---- the schema -----------------------------------------------------------------------------------------------
Identifier = Annotated[StrictStr, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
# A kernel name goes into check ids ('name:contract:domain') and report file names: no ':', '/' or blanks.
KernelName = Annotated[StrictStr, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")]
Word = Annotated[StrictStr, StringConstraints(pattern=r"^\S+$")]
# A -D argument: a C identifier, optionally =value (any text on one line).
Define = Annotated[StrictStr, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(=[^\n]*)?$")]
Positive = Annotated[StrictInt, Field(ge=1)]
NonNegative = Annotated[StrictInt, Field(ge=0)]
Target = Literal[TARGETS]
OperandType = Literal[OPERAND_TYPES]
Buffer = Literal[BUFFERS]
# The emulators a kernel entry may name (the targets' backends other than the CPU itself); which of them runs a
# given architecture is the targets' business too (_backend_of_target).
EMULATED_BACKENDS = tuple(dict.fromkeys(t.backend for t in all_targets() if t.backend != "native"))
VECTOR_BITS = (128, 256, 512, 1024, 2048)      # the SVE / SME vector lengths qemu-aarch64 can be given


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, hide_input_in_errors=False)


def _source_file(path: Path) -> Path:
    from lowp.emulator.buildcache import LANGUAGES
    if path.suffix not in LANGUAGES:
        accepted = ", ".join(f"{suffix} ({lang})" for suffix, lang in LANGUAGES.items())
        raise _custom("bad_source", f"{path.name}: unknown source language {path.suffix or '(no suffix)'!r}; "
                                    f"accepted: {accepted}")
    if not path.is_file():
        raise _custom("file_not_found", f"no such file: {path}")
    return path


def _directory(path: Path) -> Path:
    if not path.is_dir():
        raise _custom("file_not_found", f"no such directory: {path}")
    return path


SourceFile = Annotated[Path, AfterValidator(_source_file)]
Directory = Annotated[Path, AfterValidator(_directory)]


class TileSpec(_Strict):
    mr: Positive
    nr: Positive
    kr: Positive
    spill: NonNegative = 0


class StageSpec(_Strict):
    """One narrowing step of an accumulation pipeline (lowp.conformance.search.bounds.Stage)."""
    what: StrictStr
    terms: StrictInt | Identifier       # a count, the name of one of the kernel's params, or "depth"
    into: OperandType | Literal["s32", "u32"]
    overflow: Literal["saturate", "wrap"]


class XnnpackSpec(_Strict):
    """The XNNPACK ABI facts of a ukernel (lowp.kernels.xnnpack): its datatype, params layout and k shuffle; a qb4w
    kernel's block size `bl`; what a 4-bit params struct is told the weights' zero point is (0 or 8); how 4-bit
    weights are packed: `nibbles` "signed" (two's complement nibbles a kernel shifts into a byte's high half: 16x
    sums) or "unsigned" (XNNPACK's qc4uw packers for madd kernels: w + 8, the int32 bias not scaled); of 2-bit
    weights (qc2w): "signed" crumbs, or "unsigned" w + 2 (the qs8_to_qu8 packer; qd8-qc2w packs so always);
    `non_planar`, the register_bytes of XNNPACK's non-planar 4-bit packers (16: aarch64, 64: avx512), whose bytes
    pair column n with column n + non_planar / kr at one k (0: planar, a byte pairs k and k + kr of one column)."""
    datatype: StrictStr
    params: StrictStr
    sr: Positive = 1
    bl: Annotated[NonNegative, Field(validate_default=True)] = 0
    kernel_zero_point: Literal[0, 8] = 8
    nibbles: Literal["signed", "unsigned"] = "signed"
    depth: Literal["whole-blocks", "padded"] = "whole-blocks"     # qb4w: K not a whole number of blocks refused,
    # or padded with zero weights and zero activations to the next block (the campaign's entries: lowp's cases draw
    # every depth; lowp.kernels.xnnpack.pad_to_blocks)
    non_planar: NonNegative = 0

    @field_validator("nibbles")
    @classmethod
    def _nibbles_are_4_bit(cls, nibbles, info: ValidationInfo):
        from lowp.kernels.xnnpack import DATATYPES
        datatype = DATATYPES.get(info.data.get("datatype"))
        if datatype is not None and nibbles == "unsigned" and (datatype.weight_bits == 8 or datatype.blockwise):
            raise _custom("bad_xnnpack", f"nibbles = 'unsigned' (qc4uw, qc2w's w + 2) is for the 4-bit qc4w and "
                                         f"2-bit qc2w datatypes, not {datatype.name}")
        return nibbles

    @field_validator("non_planar")
    @classmethod
    def _non_planar_is_signed_4_bit(cls, non_planar, info: ValidationInfo):
        from lowp.kernels.xnnpack import DATATYPES
        datatype = DATATYPES.get(info.data.get("datatype"))
        if non_planar and ((datatype is not None and (datatype.weight_bits != 4 or datatype.blockwise))
                           or info.data.get("nibbles") == "unsigned"):
            raise _custom("bad_xnnpack", "non_planar (XNNPACK's non-planar 4-bit packers) is for signed nibbles of "
                                         "the 4-bit qc4w datatypes")
        return non_planar

    @field_validator("datatype")
    @classmethod
    def _known_datatype(cls, datatype):
        from lowp.kernels.xnnpack import DATATYPES
        return _known_name("unknown_datatype", "XNNPACK datatype", datatype, DATATYPES)

    @field_validator("params")
    @classmethod
    def _known_layout(cls, params, info: ValidationInfo):
        from lowp.kernels.xnnpack import DATATYPES
        datatype = DATATYPES.get(info.data.get("datatype"))
        if datatype is None:
            return params
        return _known_name("unknown_params", f"params layout for {datatype.name}", params, datatype.params)

    @field_validator("bl")
    @classmethod
    def _block_size(cls, bl, info: ValidationInfo):
        from lowp.kernels.xnnpack import DATATYPES, MIN_BLOCKSIZE
        datatype = DATATYPES.get(info.data.get("datatype"))
        if datatype is None:
            return bl
        if datatype.blockwise and (bl == 0 or bl % MIN_BLOCKSIZE):
            raise _custom("bad_xnnpack", f"bl = {bl}: a {datatype.name} kernel's block size, a multiple of "
                                         f"{MIN_BLOCKSIZE} (XNNPACK's XNN_MIN_BLOCKSIZE)")
        if not datatype.blockwise and bl:
            raise _custom("bad_xnnpack", f"bl = {bl}: a block size is for blockwise datatypes (qb4w), not "
                                         f"{datatype.name}")
        return bl


class ModelPartsSpec(_Strict):
    """A quantized kernel's behaviour model by parts: its raw int32 accumulation ('module:function', A x B ->
    int32) and the output stage (a name of lowp.isa_models.requant.OUTPUT_STAGES) with the kernel's flavour."""
    accumulate: Annotated[Any, Field(validate_default=True)] = "lowp.kernels.models:exact_gemm"
    output: StrictStr

    @field_validator("accumulate", mode="before")
    @classmethod
    def _accumulation(cls, accumulate):
        return import_model(accumulate) if isinstance(accumulate, str) else accumulate

    @field_validator("output")
    @classmethod
    def _known_stage(cls, output):
        from lowp.isa_models.requant import OUTPUT_STAGES
        from lowp.kernels.models.quant import qb4w_stage_names
        if output.split(":")[0] in qb4w_stage_names():      # a blockwise (qb4w) stage, `stage[:store]`
            return _known_name("unknown_stage", "qb4w output stage", output, qb4w_stage_names(stores=True))
        return _known_name("unknown_stage", "output stage", output, OUTPUT_STAGES)


class DomainSpec(_Strict):
    a: tuple[StrictInt, StrictInt]
    b: tuple[StrictInt, StrictInt]


class KernelSpec(_Strict):
    """The fields of lowp.kernels.Kernel, typed; validators check what types alone cannot."""
    name: KernelName
    target: Target
    features: tuple[Word, ...] = ()
    source: SourceFile | None = None          # the one-file form of `sources` (an entry gives exactly one of them)
    sources: Annotated[tuple[SourceFile, ...], Field(min_length=1)] | None = None
    symbol: Identifier
    signature: StrictStr
    a_type: OperandType
    b_type: OperandType
    tile: TileSpec
    # how A and B are laid out, in words; an XNNPACK ukernel's entry leaves it out (its xnnpack table says it)
    packing: Annotated[StrictStr | None, Field(validate_default=True)] = None
    contract: Annotated[StrictStr, StringConstraints(min_length=1)]
    domain: DomainSpec
    model: Any
    params: dict[Identifier, StrictInt] = {}
    cflags: tuple[StrictStr, ...] = ("-O3",)
    depends: tuple[Path, ...] = ()
    include_dirs: tuple[Directory, ...] = ()
    defines: tuple[Define, ...] = ()
    description: StrictStr = ""
    requires: tuple[Word, ...] = ()
    overread: dict[Buffer, NonNegative] = {}
    pipeline: Identifier | tuple[StageSpec, ...] | None = None
    a_shift: StrictInt | Identifier = 0
    c_type: Literal[C_TYPES] = "s32"
    output: Annotated[StrictStr, StringConstraints(min_length=1)] | None = None
    xnnpack: XnnpackSpec | None = None
    quant: dict[Identifier, StrictInt | StrictFloat] = {}
    backend: Literal[EMULATED_BACKENDS] | None = None
    vector_bits: Literal[VECTOR_BITS] | None = None
    claims: StrictBool = True

    @field_validator("vector_bits")
    @classmethod
    def _vector_bits_on_qemu(cls, vector_bits, info: ValidationInfo):
        if info.data.get("target") == "riscv64":       # VLEN: qemu-riscv64 7.2 takes 128 .. 1024
            if vector_bits is not None and vector_bits > 1024:
                raise _custom("bad_backend", f"vector_bits = {vector_bits}: qemu-riscv64 7.2 takes VLEN 128, 256, "
                                             "512 or 1024")
            return vector_bits
        if vector_bits is not None and (info.data.get("target") != "aarch64" or info.data.get("backend") == "unicorn"):
            raise _custom("bad_backend", f"vector_bits = {vector_bits} sets qemu-aarch64's SVE/SME vector length: "
                                         "for aarch64 kernels on backend 'qemu' (Unicorn has no SVE)")
        return vector_bits

    @field_validator("backend")
    @classmethod
    def _backend_of_target(cls, backend, info: ValidationInfo):
        target = info.data.get("target")     # None if the target itself is wrong (its own problem)
        known = backends(target) if target else []
        if backend is not None and target and backend not in known:
            where = "natively" if known == ["native"] else "on " + " or ".join(map(repr, known))
            article = "a" if target.startswith("r") else "an"
            raise _custom("bad_backend", f"backend = {backend!r} is not one of {target}'s: {article} {target} kernel "
                                         f"runs {where}")
        return backend

    @field_validator("c_type")
    @classmethod
    def _c_type_of_signature(cls, c_type, info: ValidationInfo):
        signature = info.data.get("signature")
        if signature == "gemm" and c_type != "s32":
            raise _custom("bad_c_type", f"the gemm signature returns int32 (s32); a kernel with {c_type} output has "
                                        "signature 'quant-gemm' (a driver of yours) or 'xnnpack-gemm' / "
                                        "'xnnpack-igemm' (a ukernel)")
        if signature in ("quant-gemm", "xnnpack-gemm", "xnnpack-igemm") and c_type == "s32":
            raise _custom("bad_c_type", f"signature {signature!r} returns the requantized output: c_type is one of "
                                        "s8, u8, f32")
        return c_type

    @field_validator("output")
    @classmethod
    def _output_of_signature(cls, output, info: ValidationInfo):
        if output is not None and info.data.get("signature") == "gemm":
            raise _custom("bad_output", "an output-stage contract is for quantized signatures ('quant-gemm', "
                                        "'xnnpack-gemm', 'xnnpack-igemm'); the gemm signature stops at int32")
        return output

    @field_validator("xnnpack")
    @classmethod
    def _xnnpack_types(cls, xnnpack, info: ValidationInfo):
        from lowp.kernels.xnnpack import DATATYPES
        signature = info.data.get("signature")
        if xnnpack is not None and signature not in (None, *XNNPACK_SIGNATURES):
            raise _custom("bad_xnnpack", f"an xnnpack table is for signatures 'xnnpack-gemm' and 'xnnpack-igemm', "
                                         f"not {signature!r}")
        if xnnpack is None:
            if signature in XNNPACK_SIGNATURES:
                raise _custom("bad_xnnpack", f"signature {signature!r} needs an xnnpack table: xnnpack = "
                                             "{datatype = ..., params = ...}")
            return xnnpack
        d = DATATYPES[xnnpack.datatype]
        wrong = [f"{key} = {info.data.get(key)!r}" for key, want in (("a_type", d.a_type), ("b_type", d.b_type),
                                                                     ("c_type", d.c_type))
                 if info.data.get(key) not in (None, want)]
        if wrong:
            raise _custom("bad_xnnpack", f"datatype {d.name} takes a_type {d.a_type}, b_type {d.b_type}, c_type "
                                         f"{d.c_type}; the entry says {', '.join(wrong)}")
        for problem in (_shift_problem(d, info.data.get("a_shift")), _weights_problem(d, info.data.get("domain"))):
            if problem:
                raise _custom("bad_xnnpack", problem)
        return xnnpack

    @field_validator("packing")
    @classmethod
    def _packing_said(cls, packing, info: ValidationInfo):
        if packing is None and info.data.get("signature") not in XNNPACK_SIGNATURES:
            raise _custom("missing_packing", "missing (required): how A and B are laid out, in words (an XNNPACK "
                                             "ukernel's entry may leave it out: its xnnpack table says it)")
        return packing

    @field_validator("a_shift")
    @classmethod
    def _shift_param(cls, a_shift, info: ValidationInfo):
        params = info.data.get("params") or {}
        if isinstance(a_shift, str) and a_shift not in params:
            raise _custom("unknown_param", f"{a_shift!r} is not one of the kernel's params "
                                           f"({', '.join(params) or 'it has none'})")
        return a_shift

    @field_validator("features")
    @classmethod
    def _known_features(cls, features, info: ValidationInfo):
        target = info.data.get("target")      # None if the target itself is wrong (its own problem)
        known = known_features(target) if target else frozenset().union(*map(known_features, TARGETS))
        unknown = [f for f in features if f not in known]
        if unknown:
            raise _custom("unknown_feature", _features_problem(unknown, target))
        return features

    @field_validator("signature")
    @classmethod
    def _known_signature(cls, signature):
        return _known_name("unknown_signature", "signature kind", signature, SIGNATURES)

    @field_validator("depends")
    @classmethod
    def _depends_exist(cls, depends):
        missing = [str(p) for p in depends if not p.is_file()]
        if missing:
            raise _custom("file_not_found", f"no such file: {', '.join(missing)}")
        return depends

    @field_validator("domain")
    @classmethod
    def _domain_in_types(cls, domain, info: ValidationInfo):
        problems = []
        for operand, (lo, hi) in (("a", domain.a), ("b", domain.b)):
            if lo > hi:
                problems.append(f"{operand} = [{lo}, {hi}] is empty (lo > hi)")
            type_name = info.data.get(f"{operand}_type")
            if type_name is None:
                continue
            info_ = _type_range(type_name)
            if lo < info_[0] or hi > info_[1]:
                problems.append(f"{operand} = [{lo}, {hi}] leaves {operand}_type {type_name}'s range "
                                f"[{info_[0]}, {info_[1]}]")
        if problems:
            raise _custom("bad_domain", "; ".join(problems))
        return domain

    @field_validator("model", mode="before")
    @classmethod
    def _callable_model(cls, model, info: ValidationInfo):
        if isinstance(model, str) and (info.context or {}).get("toml"):
            return import_model(model)
        if isinstance(model, dict):
            return ModelPartsSpec.model_validate(model)
        if isinstance(model, ModelPartsSpec):
            return model
        if not callable(model):
            hint = " (a 'module:function' string is for TOML entries)" if isinstance(model, str) else ""
            raise _custom("not_callable", f"must be a callable model(A, B, **params) -> C, got {_show(model)}{hint}")
        return model

    def to_kernel(self):
        """The Kernel (lowp.kernels.entry) of this entry, as the registry holds it."""
        fields = {name: getattr(self, name) for name in KernelSpec.model_fields if name != "source"}
        fields["sources"] = self.sources or (self.source,)
        fields["tile"] = Tile(**self.tile.model_dump())
        fields["domain"] = Domain(tuple(self.domain.a), tuple(self.domain.b))
        fields["params"], fields["overread"], fields["quant"] = dict(self.params), dict(self.overread), dict(self.quant)
        if isinstance(self.pipeline, tuple):
            fields["pipeline"] = tuple(stage.model_dump() for stage in self.pipeline)
        fields["xnnpack"] = self.xnnpack.model_dump() if self.xnnpack else None
        if isinstance(self.model, ModelPartsSpec):
            from lowp.kernels.models.quant import ModelParts, Qb4wModel, qb4w_stage_names
            if self.model.output.split(":")[0] in qb4w_stage_names():
                stage, _, store = self.model.output.partition(":")
                x = self.xnnpack
                fields["model"] = Qb4wModel(stage, self.c_type, x.bl if x else 0, self.tile.kr, x.sr if x else 1,
                                            store or "rne")
            else:
                fields["model"] = ModelParts(self.model.accumulate, self.model.output, self.c_type,
                                             self.xnnpack.datatype if self.xnnpack else None)
        return Kernel(**fields)


def _shift_problem(d, a_shift) -> str | None:
    """a_shift says the kernel reads A + 128 and the packing takes it off, as XNNPACK's qs8_to_qu8 packers do;
    datatypes without such a packer would ignore it."""
    if not a_shift or d.shiftable:
        return None
    why = ("XNNPACK's qd8 packers have no qs8_to_qu8 form: a kernel that reads A as u8 (VPDPBUSD) is a qdu8 kernel, "
           f"datatype '{d.name.replace('qd8', 'qdu8')}' (u8 A, u8 zero points: XNNPACK's unsigned-inputs)"
           if d.name.startswith("qd8") else f"{d.name} A is u8 already; no XNNPACK packer shifts it"
           if d.a_type == "u8" else "no XNNPACK packer of it compensates a shift")
    return f"a_shift = {a_shift!r}: datatype {d.name} takes no shift of A ({why})"


def _weights_problem(d, domain) -> str | None:
    """A claimed domain of B the datatype's packing cannot hold (4-bit weights: [-8, 7])."""
    lo, hi = d.weight_range
    if domain is None or (lo <= domain.b[0] and domain.b[1] <= hi):
        return None
    return (f"domain.b = [{domain.b[0]}, {domain.b[1]}]: a {d.name} weight is {d.weight_bits}-bit, in [{lo}, {hi}] "
            "(lowp's B holds w = nibble - kernel zero point: both of XNNPACK's encodings pack to the same nibbles)")


def _type_range(type_name: str) -> tuple[int, int]:
    import numpy as np
    info = np.iinfo(DTYPES[type_name])
    return int(info.min), int(info.max)


def _features_problem(features: list[str], target: str | None) -> str:
    """Why the names in `features` are not ones a kernel of `target` (None: the target is unknown) may list."""
    targets = [target] if target else list(TARGETS)
    notes = []
    for feature in features:
        other = [t for t in TARGETS if t not in targets and feature in known_features(t)]
        if other:
            notes.append(f"{feature!r} (an {other[0]} feature, not an {target} one)")
            continue
        names = list(dict.fromkeys(n for t in targets for n in suggest_feature(feature, t)))[:3]
        notes.append(f"{feature!r}" + (f" (did you mean {' or '.join(map(repr, names))}?)" if names else ""))
    accepted = {"x86-64": "the flags of Linux's /proc/cpuinfo (lowp.kernels.features.X86_LINUX_FLAGS, e.g. avx2, "
                          "avx512_vnni)",
                "aarch64": "the HWCAP names of Linux's /proc/cpuinfo (lowp.kernels.features.AARCH64_HWCAPS, e.g. "
                           "asimd, asimddp, i8mm)",
                "riscv64": "RISC-V extension names in lower case (lowp.kernels.features.RISCV64_EXTENSIONS, e.g. v, "
                           "zvl128b, zvl256b)"}.get(target, "the names Linux's /proc/cpuinfo prints")
    return f"unknown CPU feature{'s' if len(notes) > 1 else ''} {', '.join(notes)}; accepted: {accepted}"


def import_model(spec: str):
    """The function a TOML `model = 'module:function'` names; PydanticCustomError saying why if it does not
    import."""
    module_name, sep, func_name = spec.partition(":")
    if not sep or not module_name or not func_name:
        raise _custom("bad_model", f"expected 'module:function' (e.g. 'lowp.kernels.models:exact_gemm'), "
                                   f"got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:           # any import-time failure of the user's module is a configuration problem
        raise _custom("bad_model", f"cannot import module {module_name!r} ({type(e).__name__}: {e})") from None
    func = getattr(module, func_name, None)
    if func is None:
        public = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))]
        raise _custom("bad_model", f"module {module_name!r} has no {func_name!r}"
                                   f"{_suggestion(did_you_mean(func_name, public))}")
    if not callable(func):
        raise _custom("bad_model", f"{spec!r} is a {type(func).__name__}, not a function")
    return func


# ---- turning pydantic's errors into Problems -----------------------------------------------------------------
_SUBMODELS = {"tile": TileSpec, "domain": DomainSpec, "xnnpack": XnnpackSpec, "model": ModelPartsSpec}
_CHOICES = {"target": TARGETS, "a_type": OPERAND_TYPES, "b_type": OPERAND_TYPES, "overread": BUFFERS,
            "backend": EMULATED_BACKENDS, "vector_bits": VECTOR_BITS}
_KIND = {"target": "target", "a_type": "operand type", "b_type": "operand type", "overread": "buffer",
         "backend": "backend", "vector_bits": "vector length"}


def _show(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _key(loc: tuple) -> str:
    parts = []
    for part in loc:
        if part == "[key]":
            continue
        parts.append(f"[{part}]" if isinstance(part, int) else ("." if parts else "") + str(part))
    return "".join(parts)


def _message(error: dict) -> str:
    loc, kind, value = error["loc"], error["type"], error.get("input")
    if kind == "extra_forbidden":
        model = _SUBMODELS.get(loc[0], KernelSpec) if len(loc) > 1 else KernelSpec
        accepted = list(model.model_fields)
        return _unknown("key", loc[-1], did_you_mean(str(loc[-1]), accepted), ", ".join(accepted))
    if kind == "missing":                   # a key, or an item of a fixed-size tuple (the domain's [lo, hi])
        return "missing: a domain bound is [lo, hi], two ints" if isinstance(loc[-1], int) else "missing (required)"
    if kind == "literal_error":
        choices = _CHOICES.get(loc[0], ())
        return _unknown(_KIND.get(loc[0], "value"), value, did_you_mean(str(value), choices), ", ".join(choices))
    if kind == "string_pattern_mismatch":
        rule = {"name": "letters, digits and _ . + - (no ':' or blanks)",
                "symbol": "a C identifier", "params": "a C identifier",
                "defines": "NAME or NAME=VALUE, NAME a C identifier"}.get(loc[0], "one word, no blanks")
        return f"{_show(value)} is not a valid {loc[0]} entry: {rule}"
    if error["type"] in ("unknown_feature", "unknown_signature", "file_not_found", "bad_domain", "not_callable",
                         "bad_model", "unknown_datatype", "unknown_params", "unknown_stage", "bad_c_type", "bad_output",
                         "bad_xnnpack", "bad_source", "bad_backend", "missing_packing"):
        return error["msg"]
    return f"{error['msg'][0].lower()}{error['msg'][1:]}, got {_show(value)}"


def _problems(error: ValidationError, path, kernel: str) -> list[Problem]:
    return [Problem(path, kernel, _key(e["loc"]) or None, _message(e)) for e in error.errors()]


# ---- entry points ------------------------------------------------------------------------------------------------
def entry_label(entry, index: int) -> str:
    """The kernel's name for messages: its `name` if usable, else '#<1-based index in the file>'."""
    name = entry.get("name") if isinstance(entry, dict) else None
    return name if isinstance(name, str) and name else f"#{index + 1}"


def validate_entry(entry: dict, *, path=None, kernel: str | None = None, toml: bool = False):
    """KernelSpec of one entry, or the list of its Problems."""
    kernel = kernel or entry_label(entry, 0)
    given = [key for key in ("source", "sources") if isinstance(entry, dict) and entry.get(key) is not None]
    problems = [] if len(given) == 1 else [Problem(
        path, kernel, "source", "give either source = \"x.c\" (one file) or sources = [...] (several), not both"
        if given else "missing (required): source = \"x.c\", or sources = [\"a.c\", \"b.S\", ...]")]
    try:
        spec = KernelSpec.model_validate(entry, context={"toml": toml})
    except ValidationError as e:
        return problems + _problems(e, path, kernel)
    return problems or spec


def validate_kernel(kernel, path=None) -> None:
    """Check a Kernel object registered from Python; KernelConfigError with every problem if it is malformed."""
    entry, problems = {}, []
    label = kernel.name if isinstance(kernel.name, str) and kernel.name else "#1"
    for name in KernelSpec.model_fields:
        if name == "source":                    # a property of Kernel: its first file
            continue
        value = getattr(kernel, name)
        if name in ("tile", "domain"):
            cls = Tile if name == "tile" else Domain
            if not isinstance(value, cls):
                problems.append(Problem(path, label, name, f"must be a lowp.kernels.{cls.__name__}, got {_show(value)}"))
                continue
            value = dataclasses.asdict(value)
        entry[name] = _plain(value)
    result = validate_entry(entry, path=path, kernel=label)
    problems += [] if isinstance(result, KernelSpec) else result
    if problems:
        raise KernelConfigError(problems)


def specs_from_toml(path: str | Path) -> list[KernelSpec]:
    """The validated entries of a kernels TOML file ([[kernel]] tables), paths resolved against the file's folder;
    KernelConfigError with every problem of the file if anything is wrong."""
    import tomllib
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as e:
        raise KernelConfigError(Problem(path, None, None, f"cannot read the kernels file: {e.strerror or e}")) from None
    except tomllib.TOMLDecodeError as e:
        raise KernelConfigError(Problem(path, None, None, f"not valid TOML: {e}")) from None
    problems = [Problem(path, None, key, _unknown("top-level key", key, did_you_mean(key, ["kernel"]),
                                                  "kernel (a kernels file holds [[kernel]] tables only)"))
                for key in data if key != "kernel"]
    entries = data.get("kernel", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        problems.append(Problem(path, None, "kernel", "write each kernel as a [[kernel]] table (an array of tables)"))
        entries = []
    elif not entries and not problems:
        problems.append(Problem(path, None, None, "no [[kernel]] tables: the file declares no kernel"))
    specs, seen = [], {}
    base = path.resolve().parent
    if str(base) not in sys.path:      # a `model = "mymodels:f"` module beside the TOML imports, as its sources do
        sys.path.append(str(base))
    for index, entry in enumerate(entries):
        label = entry_label(entry, index)
        if label in seen:
            problems.append(Problem(path, label, "name", f"entries #{seen[label] + 1} and #{index + 1} have "
                                                         "the same name"))
        seen.setdefault(label, index)
        result = validate_entry(resolve_paths(entry, base), path=path, kernel=label, toml=True)
        if isinstance(result, list):
            problems += result
        else:
            specs.append(result)
    if problems:
        raise KernelConfigError(problems)
    return specs


def _plain(value):
    """numpy integer scalars as ints (np.int64(4) is a fine tile size from Python; the schema's ints are strict
    so that True or 4.0 are not), inside tuples, lists and dicts too."""
    import numpy as np
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (tuple, list)):
        return type(value)(map(_plain, value))
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def resolve_paths(entry: dict, base: Path) -> dict:
    """A TOML entry with `source`, `sources`, `include_dirs`, `depends` and the path arguments of include options
    in `cflags` made absolute relative to `base` (the TOML file's folder). Values of the wrong type are left for
    the schema to report."""
    entry = dict(entry)
    if isinstance(entry.get("source"), str):
        entry["source"] = _absolute(entry["source"], base)
    for key in ("sources", "include_dirs", "depends"):
        if isinstance(entry.get(key), list):
            entry[key] = [_absolute(p, base) if isinstance(p, str) else p for p in entry[key]]
    if isinstance(entry.get("cflags"), list) and all(isinstance(f, str) for f in entry["cflags"]):
        entry["cflags"] = resolve_cflags(entry["cflags"], base)
    return entry


def _absolute(path: str, base: Path) -> Path:
    return (base / Path(path).expanduser()).resolve()


def resolve_cflags(cflags, base: Path) -> list[str]:
    """-I dir, -Idir, -isystem dir, -iquote dir, -idirafter dir, -include file and -imacros file with relative
    paths made absolute against `base`. Sysroot-relative paths ('=dir', '$SYSROOT/dir') stay as they are."""
    out, expect_path = [], False
    for flag in cflags:
        if expect_path:
            out.append(_include_path(flag, base))
            expect_path = False
            continue
        option = next((o for o in INCLUDE_OPTIONS if flag.startswith(o)), None)
        if option is None:
            out.append(flag)
        elif flag == option:
            out.append(flag)
            expect_path = True
        elif flag[len(option):].startswith("-"):          # another option sharing the prefix (-include-pch)
            out.append(flag)
        else:
            out.append(option + _include_path(flag[len(option):], base))
    return out


def _include_path(value: str, base: Path) -> str:
    if value.startswith(("=", "$SYSROOT")) or Path(value).is_absolute():
        return value
    return str(_absolute(value, base))


__all__ = ["BUFFERS", "KernelConfigError", "KernelSpec", "OPERAND_TYPES", "Problem", "import_model", "resolve_cflags",
           "resolve_paths", "specs_from_toml", "validate_entry", "validate_kernel"]
