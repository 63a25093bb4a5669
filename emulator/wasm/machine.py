"""Run functions of a wasm32 module under wasmtime (PyPI `wasmtime`), called like C functions from Python, with the
guarantees lowp's other machines give:

    m = WasmMachine(build_for_wasm("gemm.c"), relaxed="deterministic")
    r = m.call("gemm", A, B, np.zeros((M, N), np.int32), M, N, K)    # r.arrays: copies of A, B, C after the call

- Bounds: the module is rewritten (lowp.emulator.wasm.guard) so that every load and store is checked against the
  regions the call allows: the module's own static data and stack, and each buffer (its declared over-read for
  reads only). A read one byte past a buffer traps there, and OutOfBounds names the buffer, the byte offset, the
  access and the instruction (function, opcode, static offset). Buffers sit GAP bytes apart, past the module's
  heap base; address 0 up to the stack is no region, so a NULL pointer faults too.
- Poison: the memory between and around the buffers is filled with a canary before each call, so nothing of an
  earlier call shows through; C and the workspace are the caller's poison (lowp.kernels.invocation).
- Budget: wasmtime's fuel (about one unit per wasm instruction): a call gets `budget` units, a runaway loop stops
  with BudgetExceeded; CallResult.instructions is the fuel the call used.
- Traps: `unreachable` (__builtin_trap, abort()), a failed assert() (the words it wrote through WASI fd_write,
  which the machine gives it, then proc_exit), an integer
  division by zero, a call through a bad table entry, a call of an import (a WASI function the module needs)
  are Trap errors naming the trap; nothing ends the Python process.
- The engine and mode: `describe()` says which wasmtime, Cranelift, and how the relaxed SIMD instructions behave:
  `relaxed='deterministic'` (wasmtime's wasm_relaxed_simd_deterministic: the deterministic profile) or 'native'
  (the host's instructions).

Arguments: numpy arrays are passed as the (32-bit) address of a copy placed in linear memory, ints as the
function's parameter type (i32 or i64, two's complement), Pointers tables as 4-byte addresses (wasm32's
pointers). Static data persists from call to call, as a loaded library's. Wasm has no registers to seed: locals
start at zero (spec 4.4.10), so `seed` changes nothing here.

wasmtime's Config takes Cranelift flags by name and an unknown name ends the process (a panic in Rust): this
module sets none.
"""
from __future__ import annotations

import atexit
import ctypes
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from lowp.emulator.errors import BudgetExceeded, EmulationFailed, EmulatorError, OutOfBounds, Trap, \
    describe_out_of_bounds
from lowp.emulator.placement import CANARY, check_alignment, start_at
from lowp.emulator.machine import CallResult, call_each, pointer_tables, pointer_targets, split_arguments
from lowp.emulator.wasm import traps
from lowp.emulator.wasm.guard import FAULT_GLOBALS, REGIONS, instrument, region_globals

DEFAULT_BUDGET = 500_000_000       # fuel units per call (about wasm instructions), as Unicorn's instruction budget
GAP = 4096                         # bytes between buffers (canary)
PAGE = 65536                       # a wasm page
NULL_PAGE = 4096                   # addresses below it are in no region (zig's 16 MiB stack starts at 0)
MODES = ("deterministic", "native")
INSTALL = "pip install 'wasmtime>=50,<51' (lowp's pyproject lists it)"


class _RawCalls:
    """Setting an i32 global and calling a function through wasmtime-py's own C bindings (its `_ffi`, the calls
    Global.set_value and Func.__call__ make), without what those add per value: a type fetched from the store and
    compared by building ValType objects, about 20 us a value. Per call that was a third of a wasm kernel's check
    (a call sets some seven bounds globals and passes ten arguments). wasmtime is pinned (>=50,<51); `raw()` is None
    where its internals differ, and the public API serves. tests/test_wasm.py holds the two paths equal."""

    def __init__(self, store):
        import wasmtime
        from wasmtime import _ffi as ffi
        from wasmtime._extern import wrap_extern
        from wasmtime._func import enter_wasm
        self.ffi, self.enter_wasm, self.store, self.error = ffi, enter_wasm, store, wasmtime.WasmtimeError
        self.wrap_extern = wrap_extern
        self.i32, self.i64 = ffi.WASMTIME_I32.value, ffi.WASMTIME_I64.value

    @classmethod
    def raw(cls, store) -> "_RawCalls | None":
        try:
            made = cls(store)
            made.ffi.wasmtime_global_set, made.ffi.wasmtime_func_call, made.ffi.wasmtime_val_t, store._context
            made.ffi.wasmtime_instance_export_get, made.ffi.wasmtime_extern_t
        except (ImportError, AttributeError):
            return None
        return made

    def export(self, instance, name: str):
        """The instance's export `name` (a Func, Global, Memory, ...), or None."""
        item, data = self.ffi.wasmtime_extern_t(), name.encode()
        if not self.ffi.wasmtime_instance_export_get(self.store._context(), ctypes.byref(instance._instance), data,
                                                     len(data), ctypes.byref(item)):
            return None
        return self.wrap_extern(item)

    def set_i32(self, glob, value: int) -> None:
        raw = self.ffi.wasmtime_val_t(kind=self.i32)
        raw.of.i32 = value
        error = self.ffi.wasmtime_global_set(self.store._context(), ctypes.byref(glob._global), ctypes.byref(raw))
        if error:
            raise self.error._from_ptr(error)

    def call(self, func, kinds: tuple[int, ...], results: tuple[int, ...], values: list[int]) -> int:
        """Call `func` with `values` of `kinds` (i32 or i64 each); its first result (0 if none)."""
        ffi = self.ffi
        params = (ffi.wasmtime_val_t * len(values))()
        for param, kind, value in zip(params, kinds, values):
            param.kind = kind
            if kind == self.i32:
                param.of.i32 = value
            else:
                param.of.i64 = value
        out = (ffi.wasmtime_val_t * len(results))()
        with self.enter_wasm(self.store) as trap:
            error = ffi.wasmtime_func_call(self.store._context(), ctypes.byref(func._func), params, len(values),
                                           out, len(results), trap)
            if error:
                raise self.error._from_ptr(error)
        if not results:
            return 0
        return int(out[0].of.i32 if results[0] == self.i32 else out[0].of.i64)


def unavailable() -> str | None:
    """Why wasm modules cannot run here, or None."""
    try:
        import wasmtime  # noqa: F401
    except ImportError as e:
        return f"wasmtime is not installed ({INSTALL}): {e}"
    return None


def wasmtime_version() -> str:
    import importlib.metadata
    try:
        return importlib.metadata.version("wasmtime")
    except importlib.metadata.PackageNotFoundError:
        return "?"


@lru_cache(maxsize=None)
def engine(relaxed: str):
    """One wasmtime Engine per mode: SIMD and relaxed SIMD on, fuel on, the relaxed instructions deterministic or
    the host's. No Cranelift flag is named (an unknown one panics)."""
    import wasmtime
    if relaxed not in MODES:
        raise ValueError(f"relaxed={relaxed!r}: expected one of {', '.join(MODES)}")
    config = wasmtime.Config()
    config.wasm_simd = True
    config.wasm_relaxed_simd = True
    config.wasm_relaxed_simd_deterministic = relaxed == "deterministic"
    config.consume_fuel = True
    # No memfd image per module: with copy-on-write initialisation every compiled module held a file, and a
    # campaign that builds every wasm kernel of XNNPACK held hundreds (select() in a child stops at fd 1024). A
    # kernel module's data is small: copying it at instantiation costs nothing measurable.
    config.memory_init_cow = False
    made = wasmtime.Engine(config)
    traps.remember()          # the first Engine installs wasmtime's trap handlers: keep them (traps.py)
    return made


@lru_cache(maxsize=64)
def _compiled(path: str, mtime: float, relaxed: str):
    """The instrumented module of a built file and its sites: rewritten and compiled by Cranelift once (1-2 s for
    a module with wasi-libc), kept beside the build in lowp's cache (the sites pickled, the machine code as
    wasmtime serializes it, per mode and wasmtime version), then loaded in milliseconds by every process."""
    import pickle

    import wasmtime
    stem = Path(path)
    compiled = stem.with_name(f"{stem.name}.{relaxed}-wasmtime{wasmtime_version()}.cwasm")
    sites = stem.with_name(f"{stem.name}.sites.pickle")
    try:
        rewritten = pickle.loads(sites.read_bytes())
        return wasmtime.Module.deserialize(engine(relaxed), compiled.read_bytes()), rewritten
    except (OSError, pickle.PickleError, EOFError, wasmtime.WasmtimeError):
        pass
    rewritten = instrument(stem.read_bytes())
    module = wasmtime.Module(engine(relaxed), rewritten.wasm)
    _write_atomically(compiled, module.serialize())
    _write_atomically(sites, pickle.dumps(rewritten))
    return module, rewritten


@atexit.register
def _release_modules() -> None:
    """Drop the cached modules and engines while wasmtime's C library is still bound: left to the interpreter's
    teardown, each one's __del__ finds wasmtime's ctypes functions already None and prints a TypeError."""
    _compiled.cache_clear()
    engine.cache_clear()


def _write_atomically(path: Path, data: bytes) -> None:
    import os
    import tempfile
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:           # a read-only cache: compiled again next time
        pass


def describe(relaxed: str) -> str:
    import platform
    return f"wasmtime {wasmtime_version()} (Cranelift, {platform.machine()} host; relaxed SIMD {relaxed})"


@dataclass
class _Placed:
    name: str
    base: int
    nbytes: int
    after: int
    array: np.ndarray


class _Exports:
    """An instance's exports, each looked up by name when first asked: wasmtime-py's own mapping enumerates them
    all (an XNNPACK kernel's module exports some 800: 30 ms of a new machine's 39, and a kernel's checks and their
    diagnoses make a fresh machine a dozen times)."""

    def __init__(self, raw: _RawCalls, instance):
        self.raw, self.instance, self.found = raw, instance, {}

    def get(self, name: str, default=None):
        if name not in self.found:
            self.found[name] = self.raw.export(self.instance, name)
        hit = self.found[name]
        return default if hit is None else hit

    def __getitem__(self, name: str):
        hit = self.get(name)
        if hit is None:
            raise KeyError(name)
        return hit

    def __contains__(self, name: str) -> bool:
        return self.get(name) is not None


class WasmMachine:
    """One wasmtime instance of `binary` (a build_for_wasm module); call() its exported functions."""

    def __init__(self, binary, *, relaxed: str = "deterministic", budget: int | None = DEFAULT_BUDGET):
        reason = unavailable()
        if reason:
            raise EmulatorError(reason)
        import wasmtime
        self.binary, self.relaxed, self.budget = binary, relaxed, budget
        path = Path(binary.path)
        self.module, self.rewritten = _compiled(str(path), path.stat().st_mtime, relaxed)
        self.store = wasmtime.Store(engine(relaxed))
        self.store.set_fuel(DEFAULT_BUDGET)
        self.stderr = bytearray()         # what the module wrote through WASI fd_write (a failed assert's words)
        linker = wasmtime.Linker(engine(relaxed))
        for imp in self.module.imports:
            if isinstance(imp.type, wasmtime.FuncType):
                host = {"fd_write": self._fd_write, "proc_exit": _proc_exit}.get(imp.name) \
                    if imp.module.startswith("wasi") else None
                linker.define_func(imp.module, imp.name, imp.type, host or _refuse(imp.module, imp.name),
                                   access_caller=imp.name == "fd_write")
        self.instance = linker.instantiate(self.store, self.module)
        self._raw = _RawCalls.raw(self.store)
        self.exports = self.instance.exports(self.store) if self._raw is None else _Exports(self._raw, self.instance)
        self.memory = self.exports["memory"]
        self.globals = {g: self.exports[g] for r in range(REGIONS) for g in region_globals(r)}
        self.globals.update({g: self.exports[g] for g in FAULT_GLOBALS})
        self._globals_set = {g: 0 for g in self.globals}    # what the globals hold (the module starts them at 0)
        self._regions = None          # the regions the globals hold
        self._signatures = {}         # symbol -> what _signature() returns
        self.heap_base = self._address("__heap_base", 0)
        # the stack's bottom, but never the first page: a NULL pointer (plus a small offset) is no region
        self.lowest_static = max(self._address("__stack_low", 0), NULL_PAGE)
        if "_initialize" in self.exports:             # the constructors: the whole memory but the first page
            size = self.memory.data_len(self.store)
            self._set_regions([], module=(self.lowest_static, size, size))
            self.exports["_initialize"](self.store)

    def _address(self, symbol: str, default: int) -> int:
        """The value of an exported global (a layout symbol the build exports), or `default`."""
        g = self.exports.get(symbol)
        return default if g is None else int(g.value(self.store))

    def describe(self) -> str:
        return describe(self.relaxed)

    # -- layout --------------------------------------------------------------------------------------------------
    def _place(self, arrays, array_names, overread, tables, align=None) -> list[_Placed]:
        cursor = -(-self.heap_base // 16) * 16 + GAP
        placed = []
        for name, a in zip(array_names, arrays):
            nbytes = a.nbytes
            after = int(overread.get(name, 0))
            base = start_at(cursor, (align or {}).get(name))
            placed.append(_Placed(name, base, nbytes, after, a))
            cursor = base + nbytes + after + GAP
        if len(placed) > REGIONS - 1:
            raise EmulatorError(f"a call with {len(placed)} buffers: lowp's wasm bounds checks hold {REGIONS - 1}")
        end = cursor
        size = self.memory.data_len(self.store)
        if end > size:
            self.memory.grow(self.store, -(-(end - size) // PAGE))
        names = [p.name for p in placed]
        for position, table in tables.items():          # wasm32 pointers: 4-byte addresses
            words = [(placed[i].base + offset) & 0xFFFF_FFFF for i, offset in pointer_targets(table, names)]
            placed[position].array = np.array(words, np.uint32)
            placed[position].nbytes = placed[position].array.nbytes
        start = -(-self.heap_base // 16) * 16
        image = np.full(end - start, CANARY, np.uint8)
        for p in placed:
            raw = np.ascontiguousarray(p.array).reshape(-1).view(np.uint8)
            image[p.base - start:p.base - start + p.nbytes] = raw
        self.memory.write(self.store, image.tobytes(), start)
        self._set_regions(placed)
        return placed

    def _set_regions(self, placed, module=None) -> None:
        """The allowed regions into the check's globals: only those that changed since the last call (a global's
        set costs about 20 us through the Python API, and a case's calls repeat their layout)."""
        regions = [module or (self.lowest_static, self.heap_base, self.heap_base)]
        regions += [(p.base, p.base + p.nbytes + p.after, p.base + p.nbytes) for p in placed]
        regions += [(0, 0, 0)] * (REGIONS - len(regions))
        if regions == self._regions and "lowp_fault_site" in self._globals_set:    # the last call's, unfaulted
            return
        self._regions = regions
        values = {g: _i32(v) for r, bounds in enumerate(regions) for g, v in zip(region_globals(r), bounds)}
        values["lowp_fault_site"] = -1
        for g, v in values.items():
            if self._globals_set.get(g) != v:
                if self._raw is not None:
                    self._raw.set_i32(self.globals[g], v)
                else:
                    self.globals[g].set_value(self.store, v)
                self._globals_set[g] = v

    # -- the call ------------------------------------------------------------------------------------------------
    def call(self, symbol: str, *args, names=None, overread=None, seed=None, budget: int | None = None,
             count: bool = False, mnemonics: bool = False, memory=(), align=None, **options) -> CallResult:
        """Call the exported function `symbol`: arrays by address of a copy, ints by value; `memory` buffers are
        placed but not passed. budget: fuel for this call (default the machine's). align: {buffer name: offset
        from a 64-byte boundary} its start is placed at (its bounds stay byte-exact: no slack). Raises an
        EmulatorError (with .result) on an out-of-bounds access, a trap or a budget overrun."""
        import wasmtime
        if options:
            raise TypeError(f"unknown option(s) {', '.join(sorted(options))} (the wasm machine has no hooks)")
        names, arrays, array_names, scalars = split_arguments(args, names, memory)
        tables = pointer_tables(args, memory)
        func, params, kinds = self._signature(symbol)
        if len(params) != len(scalars):
            raise EmulatorError(f"{symbol} takes {len(params)} arguments, the call passes {len(scalars)}")
        placed = self._place(arrays, array_names, overread or {}, tables, check_alignment(align))
        values, k = [], 0
        for value, ptype in zip(scalars, params):
            if value is None:
                value = placed[k].base
                k += 1
            values.append(_i32(value) if ptype == "i32" else _i64(value))
        fuel = budget or self.budget or DEFAULT_BUDGET
        self.store.set_fuel(fuel)
        traps.reinstate()
        t0 = time.perf_counter()
        error = None
        ret = 0
        try:
            if kinds is not None:
                ret = self._raw.call(func, *kinds, values)
            else:
                out = func(self.store, *values)
                ret = int(out) if isinstance(out, int) else 0
        except (wasmtime.Trap, wasmtime.WasmtimeError) as e:
            error = e
        seconds = time.perf_counter() - t0
        used = fuel - self.store.get_fuel()
        result = CallResult(self._read(placed), array_names, ret, used, seconds=seconds)
        if error is not None:
            fault = self._fault(error, symbol, placed, fuel)
            fault.result = result
            result.fault = fault
            raise fault
        return result

    def call_many(self, symbol: str, calls, *, seeds=None, **options) -> list:
        return call_each(self, symbol, calls, seeds=seeds, **options)

    def _signature(self, symbol: str):
        """(the exported function, its parameters' type names, (their kinds, its results' kinds) for _RawCalls or
        None), asked once."""
        hit = self._signatures.get(symbol)
        if hit is None:
            import wasmtime
            try:
                func = self.exports[symbol]
            except KeyError:
                known = ", ".join(sorted(n for n in self._functions() if not n.startswith(("lowp_", "_")))[:20])
                raise EmulatorError(f"{self.binary.path.name}: no exported function {symbol!r}; functions: {known}")
            if not isinstance(func, wasmtime.Func):
                raise EmulatorError(f"{self.binary.path.name}: {symbol!r} is exported, but not as a function")
            ty = func.type(self.store)
            params, results = [str(t) for t in ty.params], [str(t) for t in ty.results]
            kinds = None          # a signature of other types than i32 and i64 goes through the public API
            if self._raw is not None and all(t in ("i32", "i64") for t in params + results):
                codes = {"i32": self._raw.i32, "i64": self._raw.i64}
                kinds = (tuple(codes[t] for t in params), tuple(codes[t] for t in results))
            hit = self._signatures[symbol] = (func, params, kinds)
        return hit

    def _read(self, placed) -> list:
        out = []
        for p in placed:
            raw = np.frombuffer(self.memory.read(self.store, p.base, p.base + p.nbytes), np.uint8)
            out.append(raw.copy().view(p.array.dtype).reshape(p.array.shape))
        return out

    def _functions(self) -> list[str]:
        import wasmtime
        return [e.name for e in self.module.exports if isinstance(e.type, wasmtime.FuncType)]

    # -- what went wrong -----------------------------------------------------------------------------------------
    def _fault(self, error, symbol: str, placed, fuel: int) -> EmulatorError:
        text = str(error)
        site = int(self.globals["lowp_fault_site"].value(self.store))
        self._globals_set.pop("lowp_fault_site", None)         # a check wrote it: set again by the next call
        if site >= 0:
            return self._out_of_bounds(site, placed)
        if "fuel" in text:
            return BudgetExceeded(f"{symbol}: ran out of its budget of {fuel:,} fuel units (about wasm "
                                  "instructions; a runaway loop?) under wasmtime", budget=fuel)
        written = self.stderr.decode(errors="replace").strip()
        self.stderr.clear()
        if "lowp: the module exited" in text:
            what = f"it wrote {written!r} and exited" if written else "it exited"
            return Trap(f"{symbol}: trap: {what} (a failed assert() writes its words, then aborts) under "
                        f"wasmtime", pc=None, kind="exit")
        if "unreachable" in text:
            what = f"wasm `unreachable` after writing {written!r} (a failed assert())" if written else \
                "wasm `unreachable` (__builtin_trap, abort() or undefined behaviour the compiler trapped)"
            return Trap(f"{symbol}: trap: {what} under wasmtime\n{_first_lines(text)}", pc=None, kind="unreachable")
        if "lowp: the module called the import" in text:
            return Trap(f"{symbol}: {_first_lines(text, 1)}", pc=None, kind="import")
        if "out of bounds memory access" in text:
            return OutOfBounds(f"{symbol}: out-of-bounds memory access beyond the end of linear memory (no lowp "
                               f"buffer): {_first_lines(text, 1)}", access="read")
        for key, kind in (("divide by zero", "integer divide by zero"), ("integer overflow", "integer overflow"),
                          ("indirect call", "bad indirect call"), ("call stack exhausted", "stack overflow")):
            if key in text:
                return Trap(f"{symbol}: trap: {kind} under wasmtime\n{_first_lines(text)}", pc=None, kind=kind)
        return EmulationFailed(f"{symbol}: wasmtime stopped the call: {_first_lines(text)}")

    def _out_of_bounds(self, site: int, placed) -> OutOfBounds:
        s = self.rewritten.sites[site]
        addr = int(self.globals["lowp_fault_addr"].value(self.store)) & 0xFFFF_FFFF
        size = int(self.globals["lowp_fault_size"].value(self.store)) & 0xFFFF_FFFF
        where = f"{s.describe()} (wasm, under wasmtime)"
        near = _nearest(placed, addr)
        if near is None:
            return OutOfBounds(f"out-of-bounds {s.access} of {size} bytes at address {addr:#x}, in no buffer "
                               f"(below the first: the module's static data ends at {self.heap_base:#x}); {where}",
                               access=s.access, address=addr, size=size, instruction=s.instruction)
        offset = addr - near.base
        if 0 <= offset < near.nbytes:            # began inside: it reaches past the end
            start, first_out = offset, near.nbytes + (near.after if s.access == "read" else 0)
        else:
            start, first_out = None, offset
        message = describe_out_of_bounds(s.access, size, first_out if start is not None else offset, near.name,
                                         near.nbytes, near.array.dtype, near.array.shape, where, start=start,
                                         allowed=near.after if s.access == "read" else 0)
        return OutOfBounds(message, buffer=near.name, offset=first_out if start is not None else offset,
                           nbytes=near.nbytes, access=s.access, address=addr, size=size, instruction=s.instruction,
                           itemsize=near.array.dtype.itemsize)

    def _fd_write(self, caller, fd, iovs, count, written) -> int:
        """WASI fd_write: the bytes of every iovec appended to self.stderr (any fd); 0 (success)."""
        memory = caller["memory"]
        total = 0
        for k in range(count):
            ptr, length = np.frombuffer(memory.read(caller, iovs + 8 * k, iovs + 8 * k + 8), np.uint32).tolist()
            self.stderr += memory.read(caller, ptr, ptr + length)
            total += length
        memory.write(caller, int(total).to_bytes(4, "little"), written)
        return 0


def _nearest(placed, addr: int):
    """The buffer the address belongs to or is closest to (by distance from its extent)."""
    best, distance = None, None
    for p in placed:
        d = 0 if p.base <= addr < p.base + max(p.nbytes, 1) else min(abs(addr - p.base), abs(addr - p.base - p.nbytes))
        if distance is None or d < distance:
            best, distance = p, d
    return best if distance is not None and distance <= GAP else None


def _proc_exit(code):
    import wasmtime
    raise wasmtime.Trap(f"lowp: the module exited with status {code}")


def _refuse(module: str, name: str):
    def refused(*args):
        import wasmtime
        raise wasmtime.Trap(f"lowp: the module called the import {module}.{name}: the machine gives a kernel no "
                            "imports (no WASI, no host functions)")
    return refused


def _first_lines(text: str, n: int = 3) -> str:
    return "\n".join(text.strip().splitlines()[:n])


def _i32(v: int) -> int:
    v &= 0xFFFF_FFFF
    return v - (1 << 32) if v >> 31 else v


def _i64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v
