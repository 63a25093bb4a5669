"""Shared libraries built with the host's own C and C++ compilers (not zig), cached in lowp's build cache: the
native kernels, lowp's x86 intrinsic wrappers and CPUID probe, the qemu plugin, the Bochs watchdog.

Its own module, below everything that builds natively, because the host's description (lowp.emulator.host) needs
it for the CPUID probe (lowp.emulator.x86.cpuid) while the native executors (lowp.emulator.x86.native) need the
host: neither may be where the other imports from.
"""
from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path
from typing import Sequence

from lowp.emulator import buildcache
from lowp.emulator.build import zig


class NativeUnavailable(RuntimeError):
    """The host cannot build or run the native wrappers at all (not x86-64, no C compiler)."""


def compiler() -> list[str]:
    """The C driver: $CC, else cc, gcc or clang."""
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
    """The host's C (or C++) driver with its identity, which joins every native build's cache key."""
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
