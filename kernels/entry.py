"""What one kernel entry is: the Kernel dataclass (with its Tile and Domain), the signature kinds its entry symbol
may have, and its workspace function's name and the bound on what that may ask. The registry (lowp.kernels.registry) holds the entries and the
schema (lowp.kernels.schema) checks them; both build on this module, which imports neither, so neither imports
the other's half. lowp.kernels.registry re-exports every name here (lowp.kernels.registry.Kernel is documented).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from lowp.isa_models.lanes import DTYPES

# The float output types a kernel may store and the numpy dtype of C for each: IEEE binary32 and binary16 as their
# numpy types, bfloat16 as its bits (numpy has no bfloat16; lowp.isa_models.float32.bf16_bits gives them).
FLOAT_OUTPUTS = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16), "bf16": np.dtype(np.uint16)}


@dataclass(frozen=True)
class Tile:
    mr: int          # rows of C per micro-kernel call
    nr: int          # columns of C per micro-kernel call (one packed B panel)
    kr: int          # k values consumed per dot-product step (4 for VPDPBUSD groups, 2 for pairs)
    spill: int = 0   # k values accumulated in a narrow accumulator before it is widened (0: never)


@dataclass(frozen=True)
class Domain:
    """Inclusive value ranges of A and B on which the kernel claims its contract."""
    a: tuple[int, int]
    b: tuple[int, int]

    def contains(self, A: np.ndarray, B: np.ndarray) -> bool:
        return bool(A.size == 0 or (A.min() >= self.a[0] and A.max() <= self.a[1])) and \
            bool(B.size == 0 or (B.min() >= self.b[0] and B.max() <= self.b[1]))


@dataclass
class Kernel:
    name: str
    target: str                       # 'x86-64' (native, cffi) or 'aarch64' (emulated, Unicorn)
    features: tuple[str, ...]         # CPU features (x86: /proc/cpuinfo names; AArch64: HWCAP names)
    sources: tuple[Path, ...]         # C, C++ (.cc .cpp .cxx) and assembly (.S .s) files, built into one library
                                      # or ELF; the entry symbol is `symbol` (Kernel(source=p) means sources=(p,))
    symbol: str
    signature: str                    # a key of SIGNATURES
    a_type: str                       # 'u8', 's8', ...
    b_type: str
    tile: Tile
    packing: str | None               # how A and B are laid out for the micro-kernel, in words (None with an
                                      # xnnpack table: lowp.kernels.xnnpack.describe_packing says it)
    contract: str                     # the contract the kernel claims (a name lowp.conformance knows)
    domain: Domain                    # inputs on which it claims it
    model: Callable                   # behaviour model: model(A, B, **params) -> int32 C, bit for bit
    params: dict = field(default_factory=dict)   # extra int arguments, passed to the symbol and the model
    cflags: tuple[str, ...] = ("-O3",)
    depends: tuple[Path, ...] = ()              # extra files whose bytes join the build key (headers need not be
                                                # listed: the compiler's -MMD output puts them in the key)
    include_dirs: tuple[Path, ...] = ()         # -I directories of every source's compile
    defines: tuple[str, ...] = ()               # "NAME" or "NAME=VALUE": -D of every source's compile
    description: str = ""
    # Mnemonics of the claimed path (e.g. ("vpdpbusd",)): a check where none of them executed (emulated) or is
    # present in the compiled code (native) fails with "the claimed path never ran".
    requires: tuple[str, ...] = ()
    # Bytes a kernel may read past the end of a buffer by design ({"A": 16}: XNNPACK over-reads A); both
    # executors honour it, and anything beyond it is still an out-of-bounds fault.
    overread: dict = field(default_factory=dict)
    # What `lowp bounds` proves ranges through: the accumulation pipeline, a name of lowp.conformance.search.bounds'
    # PIPELINES or the stages themselves ({what, terms, into, overflow}: terms a count, a param's name or "depth"),
    # and what the kernel adds to A before its instructions read it (an int, or the name of one of its params).
    pipeline: str | tuple | None = None
    a_shift: int | str = 0
    # Quantized kernels (signature 'xnnpack-gemm' or 'quant-gemm'): C's type, the output-stage contract claimed
    # (a name of lowp.conformance.contracts.output), and for the XNNPACK ABI its datatype, params layout and sr.
    c_type: str = "s32"
    output: str | None = None
    xnnpack: dict | None = None
    # Quantization parameters the kernel supports one value of (e.g. {output_zero_point = -1}, a clamp it
    # hard-codes): every case pins them; the rest are drawn from the output contract's documented domain.
    quant: dict = field(default_factory=dict)
    # The executor of an AArch64 kernel: 'unicorn' (lowp.emulator.Machine), 'qemu' (one long-lived qemu-aarch64
    # -cpu max process, lowp.emulator.qemu) or None: Unicorn unless it lacks one of the kernel's features and qemu
    # has them all (lowp.kernels.executors.aarch64_backend; `lowp conformance --backend` overrides).
    backend: str | None = None
    # The SVE / SME vector length (bits) a vector-length agnostic kernel is checked at: qemu's
    # sve-default-vector-length and sme-default-vector-length (None: qemu's default). One source registered
    # at several lengths is several entries.
    vector_bits: int | None = None
    # False: the kernel is judged but claims nothing, so each of its checks is a probe that cannot fail the run (a
    # wasm relaxed-dot kernel under a behaviour of the dot XNNPACK's dispatch never runs it on: the report still
    # says whether it is right there)
    claims: bool = True

    @property
    def quantized(self) -> bool:
        return self.signature in QUANTIZED_SIGNATURES

    def __post_init__(self):
        if not self.packing and isinstance(self.xnnpack, dict) and isinstance(self.tile, Tile):
            from lowp.kernels.xnnpack import describe_packing
            x = self.xnnpack
            try:
                self.packing = describe_packing(x["datatype"], x["params"], nr=self.tile.nr, kr=self.tile.kr,
                                                sr=x.get("sr", 1), igemm=self.signature == "xnnpack-igemm",
                                                a_shift=self.a_shift if isinstance(self.a_shift, int) else 0,
                                                bl=x.get("bl", 0), unsigned_nibbles=x.get("nibbles") == "unsigned",
                                                non_planar=x.get("non_planar", 0))
            except KeyError:          # an unknown datatype or layout: the schema names it
                pass
        if isinstance(self.sources, (str, Path)):        # one file given as a path: the one-file form
            self.sources = (self.sources,)
        elif isinstance(self.sources, list):
            self.sources = tuple(self.sources)

    @property
    def source(self) -> Path:
        """The first of `sources` (the one file of a one-file kernel)."""
        return self.sources[0]

    def build_flags(self) -> tuple[str, ...]:
        """The compile flags of every source: `cflags`, then -I for each include dir and -D for each define."""
        return (*self.cflags, *(f"-I{d}" for d in self.include_dirs), *(f"-D{d}" for d in self.defines))

    @property
    def operand_ranges(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """The values A and B can hold through the kernel's ABI: their types' ranges, B's narrowed to [-8, 7] for
        XNNPACK's 4-bit weights (the 'full' domain of the conformance probes)."""
        ia, ib = np.iinfo(self.a_dtype), np.iinfo(self.b_dtype)
        b = (int(ib.min), int(ib.max))
        if self.xnnpack:
            from lowp.kernels.xnnpack import DATATYPES
            d = DATATYPES.get(self.xnnpack.get("datatype"))
            b = d.weight_range if d is not None and d.weight_bits < 8 else b
        return (int(ia.min), int(ia.max)), b

    @property
    def a_dtype(self) -> np.dtype:
        return DTYPES[self.a_type]

    @property
    def b_dtype(self) -> np.dtype:
        return DTYPES[self.b_type]

    def check_operands(self, A, B) -> None:
        for name, x, dtype in (("A", A, self.a_dtype), ("B", B, self.b_dtype)):
            if not isinstance(x, np.ndarray) or x.ndim != 2:
                raise ValueError(f"{self.name}: {name} must be a 2-d numpy array, got "
                                 f"{type(x).__name__}{getattr(x, 'shape', '')}")
            if x.dtype != dtype:
                raise ValueError(f"{self.name}: {name} must have dtype {dtype} ({self.a_type if name == 'A' else self.b_type}),"
                                 f" got {x.dtype}; lowp never casts a kernel's operands")
        if A.shape[1] != B.shape[0]:
            raise ValueError(f"{self.name}: A is {A.shape[0]}x{A.shape[1]} and B is {B.shape[0]}x{B.shape[1]}: "
                             "the depths (A columns, B rows) differ")

    @property
    def c_dtype(self) -> np.dtype:
        return FLOAT_OUTPUTS[self.c_type] if self.float_output else DTYPES[self.c_type]

    @property
    def float_output(self) -> bool:
        """C holds floats (f32, f16, or bf16 bits): a clamp of float bounds, no output zero point."""
        return self.c_type in FLOAT_OUTPUTS

    def predict(self, A: np.ndarray, B: np.ndarray, quant: dict | None = None) -> np.ndarray:
        """What the kernel computes, bit for bit, according to its behaviour model (a quantized kernel's with the
        case's quantization parameters `quant`)."""
        self.check_operands(A, B)
        if not self.quantized:
            return self._checked_prediction(self.model(A, B, **self.params), A, B)
        if quant is None:
            raise ValueError(f"{self.name}: a quantized kernel's prediction needs the quantization parameters")
        return self._checked_prediction(self.model(A, B, quant, **self.params), A, B)

    def _checked_prediction(self, C, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """The model's result if it is what a kernel writes: an (M, N) numpy array of integers (of floats for an
        f32 output). ModelResultError naming the model otherwise, where it was returned, not an AttributeError
        deep in the comparison."""
        shape = (A.shape[0], B.shape[1])
        kinds = "f" if self.c_dtype.kind == "f" else "iu"
        what = "float" if kinds == "f" else "integer"
        if isinstance(C, np.ndarray) and C.shape == shape and C.dtype.kind in kinds:
            return C
        got = f"a {C.dtype} array of shape {C.shape}" if isinstance(C, np.ndarray) else \
            f"{type(C).__name__} {C!r}"[:120] if C is not None else "None"
        raise ModelResultError(f"kernel {self.name!r}: its model {model_name(self.model)} returned {got}; a model "
                               f"returns C as an {what} numpy array of shape (M, N) = {shape}")


# Signature kinds: the C prototype the entry symbol has, and how the executors call it.
#   gemm: void f(int64 M, int64 N, int64 K, const A*, const B*, int32 *C, void *work[, int64 param...])
#         size_t <prefix>_workspace(int64 M, int64 N, int64 K) gives the bytes of `work` (packing buffers).
#         A is M x K row-major, B is K x N row-major, C is M x N row-major. C and `work` arrive filled with poison
#         (not zeros): a kernel must write all of C and whatever workspace it reads. Every buffer ends at a guard
#         page (plus the kernel's declared `overread`).
#   quant-gemm: void f(int64 M, int64 N, int64 K, const A*, const B*, C*, void *work, const struct lowp_requant *q)
#         the same with C of the output type and the case's quantization parameters (kernels/include/lowp/quant.h).
#   xnnpack-gemm: XNNPACK's GEMM micro-kernel prototype (kernels/include/lowp/xnnpack.h); lowp packs the weights,
#         builds the params and calls the ukernel once per MR rows (lowp.kernels.xnnpack).
#   xnnpack-igemm: XNNPACK's IGEMM (convolution) prototype: the same, with the weights packed per tap (goki), an
#         indirection buffer of pointers into A and a zero buffer (lowp.kernels.xnnpack.Indirection).
SIGNATURES = {
    "gemm": "void {symbol}(int64_t M, int64_t N, int64_t K, const void *A, const void *B, int32_t *C, void *work{params})",
    "quant-gemm": "void {symbol}(int64_t M, int64_t N, int64_t K, const void *A, const void *B, void *C, void *work, "
                  "const void *q{params})",
    "xnnpack-gemm": "void {symbol}(size_t mr, size_t nc, size_t kc, const void *a, size_t a_stride, const void *w, "
                    "void *c, size_t cm_stride, size_t cn_stride, const void *params, ...)",
    "xnnpack-igemm": "void {symbol}(size_t mr, size_t nc, size_t kc, size_t ks, const void **a, const void *w, "
                     "void *c, size_t cm_stride, size_t cn_stride, size_t a_offset, const void *zero, ...)",
}
XNNPACK_SIGNATURES = ("xnnpack-gemm", "xnnpack-igemm")
QUANTIZED_SIGNATURES = ("quant-gemm", *XNNPACK_SIGNATURES)


class KeptForKernel:
    """Values kept for the kernel entry last asked about, at most about `max_bytes` of them (past that it starts
    afresh): what a kernel's checks compute alike when they run one after another in one process
    (lowp.conformance.run.pool.jobs_of). get() makes a value once per key; the caller hands out copies."""

    def __init__(self, max_bytes: int):
        self.max_bytes, self.kernel, self.values, self.bytes = max_bytes, None, {}, 0

    def get(self, kernel: "Kernel", key, make: Callable, size: Callable):
        if self.kernel is not kernel or self.bytes > self.max_bytes:
            self.kernel, self.values, self.bytes = kernel, {}, 0
        value = self.values.get(key)
        if value is None:
            value = self.values[key] = make()
            self.bytes += size(value)
        return value


class ModelResultError(TypeError):
    """A behaviour model returned something that is not C (None, a scalar, a list, the wrong shape or type)."""


def model_name(model) -> str:
    """How a model is named where it is configured: 'module:function' (a TOML entry's spelling), else its repr."""
    module, name = getattr(model, "__module__", None), getattr(model, "__qualname__", None)
    return f"{module}:{name}" if module and name else repr(model)


_kernel_init = Kernel.__init__


def _init_with_source(self, *args, source=None, **fields):
    """Kernel(source=p): the one-file form of sources=(p,), as a TOML entry's `source = "x.c"`."""
    if source is not None:
        if "sources" in fields:
            raise TypeError("Kernel() takes source (one file) or sources (several), not both")
        fields["sources"] = (source,)
    _kernel_init(self, *args, **fields)


Kernel.__init__ = _init_with_source


def workspace_symbol(kernel: Kernel) -> str:
    """The name of the kernel's workspace function (the `gemm` signature's <prefix>_workspace)."""
    return kernel.symbol.rsplit("_", 1)[0] + "_workspace"


class WorkspaceTooLarge(RuntimeError):
    """A kernel's workspace function asked for more than MAX_WORKSPACE_BYTES (checked_workspace: every executor
    asks it, so the bound sits here, beside the function's name)."""


# Every call maps the workspace between guard pages and fills it with poison: a request beyond 1 GiB, at the shapes
# lowp runs, is a size computed wrongly (garbage, a sign error through size_t), not memory to find.
MAX_WORKSPACE_BYTES = 1 << 30


def checked_workspace(kernel: Kernel, M: int, N: int, K: int, size: int) -> int:
    """`size`, the bytes `kernel`'s workspace function gave for (M, N, K), if lowp can give them; else
    WorkspaceTooLarge naming the function, the shape and the size (instead of a MemoryError with no words)."""
    if size > MAX_WORKSPACE_BYTES:
        raise WorkspaceTooLarge(f"{kernel.name}: {workspace_symbol(kernel)}({M}, {N}, {K}) asks for {size:,} bytes "
                                f"of workspace; lowp gives a kernel at most {MAX_WORKSPACE_BYTES:,} (1 GiB) per call: "
                                "is the size computed right?")
    return size
