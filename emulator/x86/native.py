"""The host CPU as an executor of x86 intrinsics: one tiny C wrapper per registered intrinsic, generated from
the registry, compiled once with per-function target attributes (so one shared object builds and loads on any
x86-64 CPU) and called through cffi over a batch of registers.

Only tests and `lowp isa verify` import this; the models never do.
"""
from __future__ import annotations

from functools import cached_property
from typing import Sequence

import cffi
import numpy as np

from lowp.emulator.host import disabled_features, host
# The host-compiler builds and the CPUID probe live below this module (the host's description needs the probe,
# and this module needs the host); their names stay importable from here, where tests and callers found them.
from lowp.emulator.native_build import (NativeUnavailable, build_shared_library, build_shared_object,  # noqa: F401
                                        cache_dir, compiler, cxx_compiler, host_amx_intrinsics_unsafe, toolchain)
from lowp.emulator.x86.cpuid import FEATURE_BITS, detected_x86_features  # noqa: F401

from lowp.isa_models.registry import Intrinsic, intrinsics

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


def unavailable() -> str | None:
    """Why this host cannot run x86 code natively (it is not x86-64), or None. The x86-64-native target says so too
    (lowp.emulator.targets.x86_64 asks this)."""
    h = host()
    return None if h.arch == "x86-64" else f"the host is {h.machine}, not x86-64"


def host_cpu_features() -> frozenset[str]:
    """The x86 features this CPU and OS can run, less those named in LOWP_DISABLE_FEATURES (empty off x86-64)."""
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
        reason = unavailable()
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
