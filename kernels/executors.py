"""Executors: run a registered kernel on real inputs, natively (x86-64 through cffi) or emulated (AArch64 under
Unicorn), behind one interface: `executor(kernel).run(A, B) -> C`. They only execute; what the result should
be is the behaviour model's and the contract's business.
"""
from __future__ import annotations

import re
import threading
from functools import cached_property
from pathlib import Path

import cffi
import numpy as np

from .registry import SIGNATURES, Kernel, workspace_symbol

_INCLUDE = re.compile(r'^#include "([^"]+)"\s*$', re.M)


def expand_includes(path: Path) -> str:
    """The kernel source with its local #include "x.h" files inlined, so the build cache key covers them."""
    text = Path(path).read_text()
    return _INCLUDE.sub(lambda m: expand_includes(Path(path).parent / m.group(1)), text)


class KernelUnavailable(RuntimeError):
    pass


def _prototype(kernel: Kernel) -> str:
    params = "".join(f", int64_t {p}" for p in kernel.params)
    return SIGNATURES[kernel.signature].format(symbol=kernel.symbol, params=params) + ";\n" + \
        f"size_t {workspace_symbol(kernel)}(int64_t M, int64_t N, int64_t K);"


class NativeExecutor:
    """Runs an x86-64 kernel in this process. (The conformance runner puts it in a child process, so that a
    crash becomes a row of the report rather than the end of the run.)

    Per-call overhead is kept small, since small GEMMs are timed through `run` (`lowp bench gemm`): `run` checks
    the CPU features once per executor (set LOWP_DISABLE_FEATURES before creating it; `unavailable()` always
    looks again), the entry points are looked up once, and the workspace is kept per thread and reused, grown
    when a call needs more. A reused workspace is not cleared between calls (it is zero when first allocated):
    a kernel must write the workspace it reads."""
    backend = "native"

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self._checked = False             # run() has seen the CPU features pass
        self._local = threading.local()   # .work, .cdata: this thread's workspace; .shape, .size: the last call's

    def unavailable(self) -> str | None:
        from lowp.isa_models.native import host_cpu_features
        missing = [f for f in self.kernel.features if f not in host_cpu_features()]
        return f"CPU lacks {', '.join(missing)}" if missing else None

    @cached_property
    def _lib(self):
        from lowp.isa_models.native import build_shared_object
        ffi = cffi.FFI()
        ffi.cdef(_prototype(self.kernel))
        path = build_shared_object(expand_includes(self.kernel.source), f"kernel-{Path(self.kernel.source).stem}",
                                   self.kernel.cflags)
        return ffi, ffi.dlopen(str(path))

    @cached_property
    def _entry(self):
        ffi, lib = self._lib
        return ffi, getattr(lib, self.kernel.symbol), getattr(lib, workspace_symbol(self.kernel))

    def workspace(self, size: int) -> np.ndarray:
        """This thread's workspace of at least `size` bytes (reused across calls, grown on demand)."""
        local = self._local
        work = getattr(local, "work", None)
        if work is None or work.size < size:
            work = local.work = np.zeros(max(size, 64), np.uint8)
            local.cdata = self._lib[0].from_buffer(work)
        return work

    def _workspace_for(self, M: int, N: int, K: int):
        local = self._local
        if getattr(local, "shape", None) != (M, N, K):
            local.size = int(self._entry[2](M, N, K))
            local.shape = (M, N, K)
        self.workspace(local.size)
        return local.cdata

    def run(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        k = self.kernel
        k.check_operands(A, B)
        if not self._checked:
            reason = self.unavailable()
            if reason:
                raise KernelUnavailable(f"{k.name} cannot run here: {reason}")
            self._checked = True
        ffi, fn, _ = self._entry
        A, B = np.ascontiguousarray(A), np.ascontiguousarray(B)
        M, K = A.shape
        N = B.shape[1]
        C = np.zeros((M, N), np.int32)
        work = self._workspace_for(M, N, K)
        fn(M, N, K, ffi.from_buffer(A), ffi.from_buffer(B), ffi.from_buffer("int32_t[]", C), work, *k.params.values())
        return C


def executor(kernel: Kernel):
    if kernel.target == "x86-64":
        return NativeExecutor(kernel)
    if kernel.target == "aarch64":
        from .emulated import EmulatedExecutor   # needs lowp.emulator
        return EmulatedExecutor(kernel)
    raise ValueError(f"{kernel.name}: unknown target {kernel.target!r}")
