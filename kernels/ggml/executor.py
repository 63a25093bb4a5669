"""Run ggml's vec_dot functions, as a checkout builds them for one variant, wherever lowp can: natively (x86-64 with
every feature of the variant: the host compiler, a shared object called through guarded buffers), else on the
variant's emulated target (Bochs for x86-64, qemu-user for AArch64 and RISC-V 64 at the vector length asked,
wasmtime for WebAssembly).

What is compiled: the checkout's arch/<arch>/quants.c and ggml-cpu/quants.c (the `_generic` twins), with ggml's
include folders and the variant's flags, and src/ggml-quants.c where the build has it (a campaign's builds do: the
reference quantizers the `_generic` quantize_row_<q8> wrappers call, so a variant's vec_dots and quantizers share
one build), plus lowp's shim (shim_source): the three conversion tables ggml-cpu.c fills at ggml_cpu_init (emitted
as initialised data, so every fresh process, restarted guest and fresh copy has them without an init call), a
trapping ggml_abort (GGML_ASSERT), trapping definitions of what the build references and does not compile (the
ggml-quants.c functions without it; ggml.c's row sizes and, on the guests without libc, the libc functions only
the unjudged quantizers call, with it), and, for the guests that have no libc, the few math functions the vec_dots
call.

    vd = VecDot(GgmlBuild(...), vector_bits=None)
    s = vd.call("ggml_vec_dot_q4_0_q8_0", x, y, n)      # a float32; EmulatorError on a fault

Every buffer ends at a guard page: ggml's precondition is that x and y hold exactly n / QK blocks, so a read past
them is a fault naming the buffer.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

import numpy as np

from lowp.kernels.ggml.blocks import _e8m0_half, _ue4m3_half
from lowp.kernels.ggml.variants import Variant

# ggml_vec_dot_t (ggml-cpu/ggml-cpu.h): every vec_dot has it.
SIGNATURE = ("void lowp_ggml_vec_dot(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, "
             "size_t by, int nrc);")
# ggml-cpu.c's ggml_cpu_get_sve_cnt: the SVE vector length in bytes, which ggml_cpu_init reads with svcntb().
SVE_COUNT = r"""
int ggml_cpu_get_sve_cnt(void) {
#if defined(__ARM_FEATURE_SVE)
    unsigned long bytes;
    __asm__ volatile("cntb %0" : "=r"(bytes));
    return (int)bytes;
#else
    return 0;
#endif
}"""
ARGUMENTS = ("n", "s", "bs", "x", "bx", "y", "by", "nrc")
LIBC_SHIM = r"""
/* The guests lowp builds for qemu-user have no libc; what ggml's vec_dots call of libm (fabsf in GGML_ASSERTs of
   the quantizers, ldexpf in the UE4M3 conversion of the non-table path) is here, exact for every finite input. */
float fabsf(float x) { return __builtin_fabsf(x); }
float ldexpf(float x, int e) {
    while (e > 0) { x *= 2.0f; e--; }
    while (e < 0) { x *= 0.5f; e++; }
    return x;
}
float roundf(float x) {
    if (!(__builtin_fabsf(x) < 8388608.0f)) return x;            /* 2^23: already an integer, or inf or NaN */
    float t = (float)(long long)x;                                /* toward zero */
    if (__builtin_fabsf(x - t) >= 0.5f) t += (x < 0 ? -1.0f : 1.0f);
    return t;
}
"""
# What ggml-quants.c references of libc besides, where lowp compiles it for a quantizer's reference path: only its
# other quantizers (the iq types' lattice searches, the k-quants' make_qkx* fits) call these, and lowp judges none of
# them, so each traps: a judged function that reached one would fault naming the address, not compute silently.
LIBC_TRAPS = r"""
void *stderr;
void abort(void) { __builtin_trap(); }
int printf(const char *f, ...) { (void)f; __builtin_trap(); }
int fprintf(void *s, const char *f, ...) { (void)s; (void)f; __builtin_trap(); }
unsigned long fwrite(const void *p, unsigned long a, unsigned long b, void *s) { (void)p; (void)a; (void)b; (void)s; __builtin_trap(); }
int putchar(int c) { (void)c; __builtin_trap(); }
int puts(const char *s) { (void)s; __builtin_trap(); }
void *malloc(unsigned long n) { (void)n; __builtin_trap(); }
void free(void *p) { (void)p; __builtin_trap(); }
void qsort(void *b, unsigned long n, unsigned long w, int (*c)(const void *, const void *)) { (void)b; (void)n; (void)w; (void)c; __builtin_trap(); }
float log2f(float x) { (void)x; __builtin_trap(); }
float sqrtf(float x) { (void)x; __builtin_trap(); }
float floorf(float x) { (void)x; __builtin_trap(); }
long lroundf(float x) { (void)x; __builtin_trap(); }
"""
# ggml.c's, which ggml-quants.c references (row sizes of its whole-tensor quantizers): never called by a row quantizer.
GGML_TRAPS = ("ggml_row_size", "ggml_type_size", "ggml_type_name")


@dataclass(frozen=True)
class GgmlBuild:
    """What one variant of a checkout compiles: the two quants.c files, ggml's include folders, the variant."""
    arch_source: Path               # src/ggml-cpu/arch/<arch>/quants.c
    generic_source: Path            # src/ggml-cpu/quants.c
    include_dirs: tuple[Path, ...]  # include, src, src/ggml-cpu
    quants_header: Path             # src/ggml-quants.h: the functions the shim traps
    variant: Variant
    quants_source: Path | None = None   # src/ggml-quants.c, compiled where a quantizer's reference path is judged
                                        # (then its functions are not trapped)

    @property
    def sources(self) -> tuple[Path, ...]:
        return (self.arch_source, self.generic_source, *([self.quants_source] if self.quants_source else []))

    @property
    def flags(self) -> tuple[str, ...]:
        return ("-O2", "-std=gnu11", *self.variant.flags, *(f"-I{d}" for d in self.include_dirs))


def table_bits() -> dict[str, np.ndarray]:
    """The uint32 bits of the tables ggml_cpu_init fills: fp16 -> fp32 (IEEE, exact), e8m0 -> half its power of
    two, ue4m3 -> half its value (ggml-impl.h ggml_e8m0_to_fp32_half, ggml_ue4m3_to_fp32; lowp's decoders in
    blocks.py, verified against gguf)."""
    with np.errstate(all="ignore"):
        f16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    codes = np.arange(256, dtype=np.uint8)
    return {"ggml_table_f32_f16": f16.view(np.uint32),
            "ggml_table_f32_e8m0_half": np.asarray(_e8m0_half(codes), np.float32).view(np.uint32),
            "ggml_table_f32_ue4m3": np.asarray(_ue4m3_half(codes), np.float32).view(np.uint32)}


@cache
def _tables_text() -> str:
    lines = []
    for name, bits in table_bits().items():
        # a uint32 array under the float table's symbol: its bits exactly (NaN payloads included)
        body = ",".join(f"0x{b:08x}u" for b in bits.tolist())
        lines.append(f'unsigned int lowp_{name}[{bits.size}] __asm__("{name}") = {{{body}}};')
    return "\n".join(lines)


def trapped_functions(quants_header: Path) -> list[str]:
    """The functions ggml-quants.h declares: the shim defines each as a trap (quants.c references the reference
    quantizers; nothing a vec_dot runs calls them)."""
    text = quants_header.read_text(errors="replace")
    return sorted(set(re.findall(r"GGML_API\s+[\w\s\*]+?\b(\w+)\s*\(", text)))


def shim_source(quants_header: Path, libc: bool, with_quants: bool = False) -> str:
    """lowp's shim (the module's doc). with_quants: ggml-quants.c is compiled too: its own functions are not
    trapped, what it references of ggml.c and (without libc) of libc is."""
    names = GGML_TRAPS if with_quants else trapped_functions(quants_header)
    traps = "\n".join(f"void {name}(void) {{ __builtin_trap(); }}" for name in names)
    return "\n".join([
        "/* lowp's shim for ggml's vec_dots (lowp.kernels.ggml.executor): not ggml code. */",
        _tables_text(),
        "void ggml_abort(const char *file, int line, const char *fmt, ...) "
        "{ (void)file; (void)line; (void)fmt; __builtin_trap(); }",
        "void ggml_log_internal(int level, const char *fmt, ...) { (void)level; (void)fmt; }",
        SVE_COUNT,
        traps,
        "" if libc else LIBC_SHIM, "" if libc or not with_quants else LIBC_TRAPS, ""])


def shim_file(build: "GgmlBuild", libc: bool) -> Path:
    from lowp.emulator import buildcache
    from lowp.emulator.native_build import cache_dir
    text = shim_source(build.quants_header, libc, build.quants_source is not None)
    return buildcache.source_file(text, cache_dir() / "src", "ggml-shim")


class OnTarget:
    """The executor lowp chooses for one ggml variant at one vector length (lowp.emulator.targets.choose: natively
    where this CPU has every feature, else the variant's emulated target, or `backend` if given): what VecDot and
    the repacked kernels' RepackRunner share. A subclass sets `variant`, `vector_bits` and `_backend`."""
    variant: Variant
    vector_bits: int | None
    _backend: str | None

    @cached_property
    def target(self):
        from lowp.emulator.targets import choose
        return choose(self.variant.arch, self.variant.features, self.vector_bits, self._backend)

    @property
    def backend(self) -> str:
        return self.target.backend

    def unavailable(self) -> str | None:
        """Why no executor here runs this variant (at this vector length), or None."""
        return self.target.cannot_run(self.variant.features, self.vector_bits)

    def describe(self) -> str:
        return self.target.describe(self.vector_bits, features=self.variant.features)

    def timing(self) -> dict:
        """The time budget a call passes to an emulated machine that keeps one (Bochs, qemu-user)."""
        return {"seconds": self.budget} if self.backend in ("qemu", "bochs") else {}


class VecDot(OnTarget):
    """The vec_dots of one build at one vector length, on the executor that runs it here."""

    def __init__(self, build: GgmlBuild, vector_bits: int | None = None, *, budget: float = 5.0,
                 backend: str | None = None):
        self.build, self.vector_bits, self.budget = build, vector_bits, budget
        self.variant, self._backend = build.variant, backend

    @cached_property
    def _native(self):
        import cffi

        from lowp.emulator.native_build import build_shared_library
        b = self.build
        path = build_shared_library([*b.sources, shim_file(b, True)], (*b.flags, "-g"), f"ggml-{b.variant.name}")
        ffi = cffi.FFI()            # loaded for its address; the guard library makes the call
        return ffi, ffi.dlopen(str(path)), Path(path)

    @cached_property
    def _machine(self):
        b = self.build
        libc = self.target.arch == "wasm32"        # the static guests (Bochs, qemu-user) link no libc
        sources = (*b.sources, shim_file(b, libc))
        return self.target.machine(sources, flags=self._guest_flags(), vector_bits=self.vector_bits,
                                   features=b.variant.features)

    def _guest_flags(self) -> tuple[str, ...]:
        """The variant's flags, and musl's headers after everything else for the guests without libc (ggml.h
        includes stdio.h; nothing of libc is linked)."""
        from lowp.emulator.build import libc_header_flags
        return (*self.build.flags, *libc_header_flags(self.target.arch))

    def symbols(self) -> list[str]:
        """The functions the build defines (what the campaign may call)."""
        if self.backend == "native":
            from lowp.kernels.guard import _symbols
            return sorted(_symbols(str(self._native[2])))
        return sorted(self._machine.binary.symbols)

    def call(self, symbol: str, x: np.ndarray, y: np.ndarray, n: int, nrc: int = 1) -> np.float32:
        """ggml's vec_dot `symbol`(n, &s, 0, x, 0, y, 0, nrc) on blocks x and y (uint8 arrays of whole blocks)."""
        x, y = (np.ascontiguousarray(a, np.uint8).reshape(-1) for a in (x, y))
        s = np.full(max(nrc, 1), np.float32(np.nan), np.float32)     # poison: an unwritten result shows as NaN
        if self.backend == "native":
            return self._call_native(symbol, x, y, n, nrc, s)
        r = self._machine.call(symbol, n, s, 0, x, 0, y, 0, nrc, names=ARGUMENTS, **self.timing())
        return np.float32(r["s"][0])

    def call_pairs(self, symbol: str, xs: tuple, ys: tuple, n: int, bs: int = 3) -> tuple[np.ndarray, np.ndarray]:
        """The nrc == 2 call: two x rows by two y rows, each row's blocks `bx` (`by`) bytes after the first's:
        ((2, 2) results [i, j] = x_i . y_j read from s[j * bs + i], all of s). bs = 3 leaves s[2] between them,
        poisoned: a store there is a stride error."""
        x = np.concatenate([np.ascontiguousarray(a, np.uint8).reshape(-1) for a in xs])
        y = np.concatenate([np.ascontiguousarray(a, np.uint8).reshape(-1) for a in ys])
        bx, by = x.size // 2, y.size // 2
        s = np.full(bs + 2, np.float32(np.nan), np.float32)
        if self.backend == "native":
            out = self._call_native(symbol, x, y, n, 2, s, strides=(bs, bx, by), whole=True)
        else:
            out = self._machine.call(symbol, n, s, bs, x, bx, y, by, 2, names=ARGUMENTS, **self.timing())["s"]
        return np.array([[out[0], out[bs]], [out[1], out[bs + 1]]], np.float32), np.asarray(out, np.float32)

    def _call_native(self, symbol, x, y, n, nrc, s, strides=(0, 0, 0), whole=False):
        from lowp.kernels import guard
        ffi, lib, path = self._native
        address = guard.function_address(path, symbol)
        if address is None:
            raise KeyError(f"{path.name}: no function {symbol!r}")
        with guard.Arena() as arena:
            rs, rx, ry = arena.place("s", s), arena.place("x", x), arena.place("y", y)
            bs, bx, by = strides
            guard.call(address, [n, rs.base, bs, rx.base, bx, ry.base, by, nrc], arena, budget=self.budget,
                       library=path)
            return rs.array.copy() if whole else np.float32(rs.array[0])

    def quantize(self, symbol: str, x: np.ndarray, k: int, prior: np.ndarray) -> np.ndarray:
        """ggml's quantize_row_<q8>(x, y, k): the bytes it leaves in y, which starts as `prior` (whole blocks)."""
        x = np.ascontiguousarray(x, np.float32).reshape(-1)
        y = np.array(prior, np.uint8).reshape(-1)
        if self.backend == "native":
            from lowp.kernels import guard
            ffi, lib, path = self._native
            address = guard.function_address(path, symbol)
            if address is None:
                raise KeyError(f"{path.name}: no function {symbol!r}")
            with guard.Arena() as arena:
                rx, ry = arena.place("x", x), arena.place("y", y)
                guard.call(address, [rx.base, ry.base, k], arena, budget=self.budget, library=path)
                return ry.array.copy()
        return np.asarray(self._machine.call(symbol, x, y, k, names=("x", "y", "k"), **self.timing())["y"], np.uint8)

    def close(self) -> None:
        m = self.__dict__.get("_machine")
        if m is not None and hasattr(m, "close"):
            m.close()


__all__ = ["GgmlBuild", "OnTarget", "VecDot", "SIGNATURE", "shim_source", "table_bits"]
