"""The host CPU as an executor of x86 intrinsics: one tiny C wrapper per registered intrinsic, generated from
the registry, compiled once with per-function target attributes (so one shared object builds and loads on any
x86-64 CPU) and called through cffi over a batch of registers.

Only tests and `lowp isa verify` import this; the models never do.
"""
from __future__ import annotations

import functools
import os
import shutil
from functools import cached_property
from pathlib import Path
from typing import Sequence

import cffi
import numpy as np

from lowp.emulator import buildcache

from lowp.isa_models.registry import Intrinsic, intrinsics

# Feature names (Linux /proc/cpuinfo spelling) in the bit order of lowp_cpu_features() in cpu_features.c.
FEATURE_BITS = ("mmx", "sse2", "ssse3", "sse4_1", "avx2", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                "avx_vnni", "avx_vnni_int8", "avx10_2")
# The same features as GCC/clang target attributes.
TARGET = {"mmx": "mmx", "sse2": "sse2", "ssse3": "ssse3", "sse4_1": "sse4.1", "avx2": "avx2", "avx512f": "avx512f",
          "avx512bw": "avx512bw", "avx512vl": "avx512vl", "avx512_vnni": "avx512vnni", "avx_vnni": "avxvnni",
          "avx_vnni_int8": "avxvnniint8", "avx10_2": "avx10.2"}
# Compilers learn new extensions late: guard what an older one cannot emit rather than fail the whole build.
COMPILER_GUARD = {
    "avx10_2": "(defined(__clang__) && __clang_major__ >= 21) || (!defined(__clang__) && __GNUC__ >= 16)",
    "avx_vnni_int8": "(defined(__clang__) && __clang_major__ >= 16) || (!defined(__clang__) && __GNUC__ >= 13)",
    "avx_vnni": "(defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && __GNUC__ >= 11)",
}
CTYPE = {64: "__m64", 128: "__m128i", 256: "__m256i", 512: "__m512i"}
LOAD = {64: "lowp_ld64(p{j}, i)", 128: "_mm_loadu_si128((const __m128i *)((const char *)p{j} + i * 16))",
        256: "_mm256_loadu_si256((const __m256i *)((const char *)p{j} + i * 32))",
        512: "_mm512_loadu_si512((const char *)p{j} + i * 64)"}
STORE = {64: "memcpy((char *)out + i * 8, &r, 8)", 128: "_mm_storeu_si128((__m128i *)((char *)out + i * 16), r)",
         256: "_mm256_storeu_si256((__m256i *)((char *)out + i * 32), r)",
         512: "_mm512_storeu_si512((char *)out + i * 64, r)"}
PRELUDE = """#include <immintrin.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
static inline __m64 lowp_ld64(const void *p, size_t i) { __m64 v; memcpy(&v, (const char *)p + i * 8, 8); return v; }
"""


class NativeUnavailable(RuntimeError):
    """The host cannot build or run the native wrappers at all (not x86-64, no C compiler)."""


def wrapper_source(intr: Intrinsic) -> str:
    """C for one intrinsic: `int lowp_<name>(size_t n, const void *p0, ..., void *out)` runs it n times."""
    args, params, imm = [], [], None
    for j, p in enumerate(intr.params):
        params.append(f"const void *p{j}")
        if p.kind == "vec":
            args.append(LOAD[p.width].format(j=j))
        elif p.kind == "mask":
            args.append(f"(__mmask{p.bits})((const uint64_t *)p{j})[i]")
        elif p.kind == "imm" and imm is None:
            # an immediate is a compile-time constant: one call per value in [lo, hi], chosen by a switch on the
            # int64 the batch passes (the same for the whole batch)
            imm = (j, p)
            args.append("{imm}")
        else:
            raise ValueError(f"{intr.name}: x86 wrappers take one immediate at most")
    sig = f"int lowp_{intr.name}(size_t n, {', '.join(params)}, void *out)"
    target = ",".join(TARGET[f] for f in intr.features)
    call = f"{intr.name}({', '.join(args)})"
    if imm is None:
        compute = f"        {CTYPE[intr.result.width]} r = {call};\n"
    else:
        j, p = imm
        cases = "".join(f"            case {v}: r = {call.replace('{imm}', str(v))}; break;\n"
                        for v in range(p.lo, p.hi + 1))
        compute = (f"        {CTYPE[intr.result.width]} r;\n"
                   f"        switch (*(const int64_t *)p{j}) {{\n{cases}            default: return -2;\n        }}\n")
    body = (f"__attribute__((target(\"{target}\"))) {sig} {{\n"
            f"    for (size_t i = 0; i < n; ++i) {{\n"
            f"{compute}"
            f"        {STORE[intr.result.width]};\n    }}\n"
            + ("    _mm_empty();\n" if intr.width == 64 else "") + "    return 0;\n}\n")
    guards = [COMPILER_GUARD[f] for f in intr.features if f in COMPILER_GUARD]
    if not guards:
        return body
    cond = " && ".join(f"({g})" for g in guards)
    return f"#if {cond}\n{body}#else\n{sig} {{ (void)n; return -1; }}\n#endif\n"


def cdef_line(intr: Intrinsic) -> str:
    return f"int lowp_{intr.name}(size_t, {', '.join('const void *' for _ in intr.params)}, void *);"


def compiler() -> list[str]:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise NativeUnavailable("no C compiler found (set CC or install gcc)")
    return cc.split()


def cxx_compiler() -> list[str]:
    """The C++ driver: $CXX, else c++, g++ or clang++ (it compiles the C++ sources and links their library)."""
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if not cxx:
        raise NativeUnavailable("no C++ compiler found (set CXX or install g++)")
    return cxx.split()


def cache_dir() -> Path:
    """The native builds' part of lowp's one build cache (lowp.emulator.buildcache.cache_dir)."""
    return buildcache.cache_dir() / "native"


def toolchain(cxx: bool = False) -> buildcache.Toolchain:
    cc = tuple(cxx_compiler() if cxx else compiler())
    return buildcache.Toolchain(cc, buildcache.compiler_identity(cc))


# Compiles only where the compiler takes _tile_loadd to read no memory: the stores to a buffer only a tile load reads
# are then dead, and with them the calls to the const function that computes them; where the load is seen to read
# the buffer a call survives, and its error attribute fails the compile. (A compiler without the error attribute
# cannot tell: #error, as for a compiler that knows no AMX.)
AMX_LOAD_PROBE = """#include <immintrin.h>
#if !defined(__has_attribute) || !__has_attribute(__error__)
#error "no error attribute: the probe cannot tell"
#endif
__attribute__((__const__, __error__("the tile load reads the buffer"))) char lowp_amx_probe_byte(int);
__attribute__((target("amx-tile"))) void lowp_amx_probe(void) {
    __attribute__((aligned(64))) char buffer[1024];
    for (int i = 0; i < 1024; ++i) buffer[i] = lowp_amx_probe_byte(i);
    _tile_loadd(0, buffer, 64);
}
"""


@functools.lru_cache(maxsize=None)
def host_amx_intrinsics_unsafe() -> bool:
    """Whether the host compiler's AMX intrinsics hide their memory accesses from it. GCC 12's amxtileintrin.h
    (L59-65, L75-80) makes _tile_loadd and _tile_stored `asm volatile` statements whose only operands are the
    address and the stride: the compiler does not know they read or write memory, so it drops or moves the stores
    of a buffer that only a tile load reads. XNNPACK's qd8-f32-qc4w AMX kernels unpack their nibbles into such a
    stack buffer: built by GCC 12 their tiles load stale stack bytes (wrong results that depend on earlier calls);
    built by clang, whose intrinsics are builtins, they are right. So lowp builds -mamx-tile sources with zig's
    clang where the host compiler is of that kind (natively and for Bochs). Asked of the compiler itself, not of
    its header's text: AMX_LOAD_PROBE builds (through the build cache, so once per compiler) only where the
    compiler drops such stores; a compiler that cannot build it (no AMX, no compiler) is taken as safe."""
    try:
        build_shared_object(AMX_LOAD_PROBE, "amx-load-probe")
    except (NativeUnavailable, OSError):
        return False
    return True


def build_shared_library(sources: Sequence[str | os.PathLike], flags: Sequence[str] = ("-O2",),
                         stem: str | None = None, depends: Sequence[str | os.PathLike] = ()) -> Path:
    """Compile C, C++ (.cc, .cpp, .cxx) and assembly (.S, .s) sources with `flags` into a shared object in the
    cache, keyed by everything that goes into it (lowp.emulator.buildcache: the compilers, the flags, the sources, the
    headers the compiler reports reading, `depends`). With a C++ source, the C++ driver compiles it and links the
    library (so its C++ runtime comes along); C stays with the C compiler. The compile runs in the first source's
    directory, so relative -I and -include paths resolve there.
    Raises lowp.emulator.buildcache.BuildFailed naming the file, with the compiler's message."""
    sources = list(sources)
    cxx = any(buildcache.language(s) == "c++" for s in sources)
    tools, target = (toolchain(), toolchain(cxx=True) if cxx else None), ()
    if "-mamx-tile" in flags and host_amx_intrinsics_unsafe():
        from lowp.emulator.build import zig
        tools, target = (zig(cache_dir()), zig(cache_dir(), "c++") if cxx else None), ("-target", "x86_64-linux-gnu")
    return buildcache.build(tools[0], sources, directory=cache_dir(), stem=stem or Path(sources[0]).stem,
                            suffix=".so", compile_flags=(*target, *flags, "-fPIC"), link_flags=("-shared",),
                            inputs=depends, cxx=tools[1])


def build_shared_object(source: str, stem: str = "x86-wrappers", flags: Sequence[str] = ("-O2",)) -> Path:
    """build_shared_library() for generated C text: the text becomes a file in the cache, named by its content.
    A compile failure here means the host cannot build lowp's own wrappers: NativeUnavailable."""
    path = buildcache.source_file(source, cache_dir() / "src", stem)
    try:
        return build_shared_library([path], flags, stem)
    except buildcache.BuildFailed as e:
        raise NativeUnavailable(f"compiling {stem} failed:\n{e}") from None


@functools.lru_cache(maxsize=None)
def _detected_features() -> int:
    ffi = cffi.FFI()
    ffi.cdef("uint64_t lowp_cpu_features(void);")
    source = "#include <stdint.h>\n" + (Path(__file__).resolve().parents[1] / "cpu_features.c").read_text()
    return int(ffi.dlopen(str(build_shared_object(source, "cpu-features"))).lowp_cpu_features())


def detected_x86_features() -> frozenset[str]:
    """The x86 features this CPU and OS can run, by lowp's CPUID + XGETBV detection (cpu_features.c); raises
    NativeUnavailable if it cannot be built. The host's one description (lowp.emulator.targets.host) calls it."""
    return frozenset(f for i, f in enumerate(FEATURE_BITS) if _detected_features() >> i & 1)


def host_cpu_features() -> frozenset[str]:
    """The x86 features this CPU and OS can run, less those named in LOWP_DISABLE_FEATURES (empty off x86-64)."""
    from lowp.emulator.targets import disabled_features, host
    return host().x86_features - disabled_features()


def marshal(intr: Intrinsic, args: Sequence) -> tuple[int, list[np.ndarray], np.ndarray]:
    """A batch of registers as the wrappers take it: (n, one contiguous array per parameter, the result array):
    vectors (n, lanes) of the parameter's type, masks one uint64 per register (a single mask is broadcast)."""
    n = None
    buffers = []
    for p, a in zip(intr.params, args, strict=True):
        if p.kind == "vec":
            a = np.ascontiguousarray(a, dtype=p.dtype).reshape(-1, p.lanes)
            n = a.shape[0] if n is None else n
            if a.shape[0] != n:
                raise ValueError(f"{intr.name}: operand {p.name!r} has {a.shape[0]} registers, expected {n}")
        buffers.append(a)
    buffers = [np.ascontiguousarray(np.broadcast_to(np.asarray(b, np.uint64), (n,))) if p.kind == "mask"
               else np.array([int(b)], np.int64) if p.kind == "imm" else b for p, b in zip(intr.params, buffers)]
    return n, buffers, np.empty((n, intr.result.lanes), intr.result.dtype)


class NativeX86:
    """Backend (see backend.py) that runs x86 intrinsics on this CPU.

    LOWP_DISABLE_FEATURES=avx512_vnni,... makes the back end act as if the CPU lacked those features, so the
    skip paths can be exercised on any machine."""
    name = "native"
    arch = "x86"

    def __init__(self, selection: Sequence[Intrinsic] | None = None):
        from lowp.emulator.targets.x86_64 import NATIVE
        reason = NATIVE.unavailable()
        if reason:
            raise NativeUnavailable(reason)
        self.intrinsics = list(selection if selection is not None else intrinsics("x86"))
        self._ffi = cffi.FFI()
        self._ffi.cdef("\n".join(map(cdef_line, self.intrinsics)))
        self.library_path = build_shared_object(self.source())
        self._lib = self._ffi.dlopen(str(self.library_path))

    def source(self) -> str:
        return PRELUDE + "\n".join(map(wrapper_source, self.intrinsics))

    @cached_property
    def cpu_features(self) -> frozenset[str]:
        return host_cpu_features()

    @cached_property
    def cpu_model(self) -> str:
        from lowp.emulator.targets import host
        return host().cpu_model

    def describe(self) -> str:
        return f"{self.cpu_model}; features: {' '.join(f for f in FEATURE_BITS if f in self.cpu_features)}"

    def unavailable(self, intr: Intrinsic) -> str | None:
        missing = [f for f in intr.features if f not in self.cpu_features]
        if missing:
            return f"CPU lacks {', '.join(missing)}"
        if not self._compiled(intr):
            return f"compiler {compiler()[0]} cannot emit {', '.join(intr.features)}"
        return None

    def _compiled(self, intr: Intrinsic) -> bool:
        # A stub from the #else branch returns -1 without touching anything, even for n = 0.
        null = [self._ffi.NULL] * (len(intr.params) + 1)
        return getattr(self._lib, f"lowp_{intr.name}")(0, *null) == 0

    def run(self, intr: Intrinsic, args: Sequence) -> np.ndarray:
        reason = self.unavailable(intr)
        if reason:
            raise RuntimeError(f"{intr.name} cannot run natively: {reason}")
        n, buffers, out = marshal(intr, args)
        fn = getattr(self._lib, f"lowp_{intr.name}")
        fn(n, *(self._ffi.from_buffer(b) for b in buffers), self._ffi.from_buffer(out))
        return out
