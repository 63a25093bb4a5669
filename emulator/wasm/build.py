"""Compile C for wasm32 with zig (clang + wasm-ld, wasi-libc inside): a WASI reactor module (-mexec-model=reactor:
no main, `_initialize` runs the constructors) with SIMD128 and relaxed SIMD, every named function exported
(by lowp.emulator.wasm.guard: a kernel's ukernel is called by name), cached like every build (lowp.emulator.buildcache).

XNNPACK builds its wasm kernels with -msimd128 (wasmsimd) and -msimd128 -mrelaxed-simd (wasmrelaxedsimd,
wasmsdot, wasmusdot, wasmpshufb, wasmblendvps): CMakeLists.txt of google/XNNPACK @75db3c0, the
`XNNPACK_ENABLE_WASM_*` branches. The first build here compiles wasi-libc (about 40 s), later ones reuse it.

A module that calls into wasi-libc's I/O (a failed assert() writes its words with fd_write, then exits) imports
those WASI functions; the machine gives it fd_write (into a buffer it reads back) and proc_exit (a Trap naming the
words), nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from lowp.emulator import buildcache
from lowp.emulator.build import compiler_version, zig
from lowp.emulator.errors import BuildError

HERE = Path(__file__).resolve().parent
RELAXED_DOT_HEADER = HERE / "relaxed_dot.h"
TRIPLE = "wasm32-wasi"
# zig defines NDEBUG at -O2: -UNDEBUG keeps assert() on, as in lowp's other builds (a kernel's -DNDEBUG wins)
COMPILE_FLAGS = ("-target", TRIPLE, "-mexec-model=reactor", "-O2", "-msimd128", "-mrelaxed-simd", "-UNDEBUG")
# the layout symbols the machine reads (zig puts the stack first: [__stack_low, __global_base), then the data up
# to __heap_base); the functions are exported by lowp.emulator.wasm.guard from the module's "name" section, so a
# kernel's hidden (XNN_INTERNAL) ukernels are callable too
LINK_FLAGS = ("-Wl,--no-gc-sections", *(f"-Wl,--export={s}" for s in ("__heap_base", "__global_base", "__stack_low")))


@dataclass(frozen=True)
class WasmBinary:
    """A built wasm module: where it is and what it was built from."""
    path: Path
    sources: tuple[str, ...] = field(default=())
    target: str = "wasm32"

    @cached_property
    def symbols(self) -> dict[str, tuple[int, int]]:
        """Function name -> (function index, 0), from the module's "name" section (every function the machine can
        call: lowp.emulator.wasm.guard exports them all), as Binary.symbols gives an ELF's."""
        from lowp.emulator.wasm.guard import module_function_names
        return {name: (index, 0) for index, name in module_function_names(self.path.read_bytes()).items()}


def build_for_wasm(*sources, flags=(), depends=(), cache=None) -> WasmBinary:
    """Compile and link C sources into a cached wasm32 reactor module."""
    if not sources:
        raise ValueError("build_for_wasm() needs at least one source file")
    paths = [Path(s).resolve() for s in sources]
    for p in paths:
        if not p.is_file():
            raise FileNotFoundError(f"source {p} does not exist")
    directory = Path(cache) if cache else buildcache.cache_dir()
    try:
        out = buildcache.build(zig(directory), paths, directory=directory, stem=f"{paths[0].stem}-wasm32",
                               suffix=".wasm", compile_flags=(*COMPILE_FLAGS, *flags), link_flags=LINK_FLAGS,
                               inputs=[*depends, RELAXED_DOT_HEADER])
    except buildcache.BuildFailed as e:
        raise BuildError(f"{TRIPLE}: {e}", source=e.source) from None
    return WasmBinary(out, tuple(str(p) for p in paths))


def toolchain() -> str:
    return f"{compiler_version()} cc -target {TRIPLE}"
