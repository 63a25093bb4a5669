"""Executors: run a registered kernel on real inputs, natively (x86-64 through cffi) or emulated (AArch64 under
Unicorn), behind one interface: `executor(kernel).run(A, B) -> C`. They only execute; what the result should
be is the behaviour model's and the contract's business.
"""
from __future__ import annotations

import itertools
import os
import shutil
import threading
from collections.abc import Sequence
from functools import cached_property, lru_cache
from pathlib import Path

import cffi
import numpy as np

from lowp.emulator.errors import BatchStopped, stopped_after  # noqa: F401 - BatchStopped: run_many's outcome

from lowp.kernels import abi
from lowp.kernels.entry import SIGNATURES, XNNPACK_SIGNATURES, Kernel, workspace_symbol
# Both executors' shared pieces live below them (the emulated executor imports them from there, not from here);
# re-exported here, where callers have always found them.
from lowp.kernels.entry import MAX_WORKSPACE_BYTES, WorkspaceTooLarge, checked_workspace  # noqa: F401
from lowp.kernels.invocation import POISON_POOL, outcome, poison, poison_start  # noqa: F401
from lowp.kernels.invocation import GEMM_BUFFERS, checked_align, layout_key, native_args, place_native, pointer_words


class KernelUnavailable(RuntimeError):
    pass


class BatchUnpinned(RuntimeError):
    """run_many(rerun=False) could not pin the batch's evidence on one case (a canary damaged, an input written):
    every case of the batch comes back as this, for the caller to rerun (conformance/run/batch.py reruns them on a
    fresh copy of the kernel brought to the state they started from)."""


class CleanBatch(Sequence):
    """run_many's answer where every case returned C: case i's C is `stacked[i]`, made only when asked for. A
    batch's screen compares the (n, M, N) array whole (conformance/run/batch.py); a Python object per case would
    cost about as much as running the case."""

    def __init__(self, stacked: np.ndarray):
        self.stacked = stacked

    def __len__(self) -> int:
        return len(self.stacked)

    def __getitem__(self, i):
        return list(self.stacked[i]) if isinstance(i, slice) else self.stacked[i]


def _prototype(kernel: Kernel) -> str:
    """The entry's (and workspace function's) declarations for cffi, and their function types (lowp_entry_fn,
    lowp_workspace_fn), through which a function the library does not export is called by its address."""
    params = "".join(f", int64_t {p}" for p in kernel.params)
    signature = SIGNATURES[kernel.signature]
    entry = signature.format(symbol=kernel.symbol, params=params) + ";\n"
    entry += "typedef " + signature.format(symbol="lowp_entry_fn", params=params) + ";\n"
    if kernel.signature in XNNPACK_SIGNATURES:     # no workspace: the weights arrive packed
        return entry
    return entry + (f"size_t {workspace_symbol(kernel)}(int64_t M, int64_t N, int64_t K);\n"
                    "typedef size_t lowp_workspace_fn(int64_t M, int64_t N, int64_t K);")


@lru_cache(maxsize=64)
def _declared(prototype: str):
    """A cffi FFI with `prototype` declared: one for every executor of a kernel in a process (each of a kernel's
    checks opens a fresh copy of its library through it; pycparser's parse was some 5 ms an executor)."""
    ffi = cffi.FFI()
    ffi.cdef(prototype)
    return ffi


def _fresh_copies() -> Path:
    """This process's folder of private library copies (fresh-state executors): one per process id, so a forked
    worker never shares its parent's; removed at exit, or by remove_fresh_copies() (a forked worker ends with
    os._exit, which runs no atexit handler)."""
    pid = os.getpid()
    if pid not in _FRESH_DIRS:
        import atexit
        import tempfile
        _FRESH_DIRS[pid] = Path(tempfile.mkdtemp(prefix=f"lowp-fresh-{pid}-"))
        atexit.register(shutil.rmtree, _FRESH_DIRS[pid], True)
    _FRESH_DIRS[pid].mkdir(exist_ok=True)
    return _FRESH_DIRS[pid]


_FRESH_DIRS: dict[int, Path] = {}
# A copy's name is never reused in a process: glibc's dlopen returns the loaded object for a name it has seen.
_FRESH_NUMBERS = itertools.count()


def remove_fresh_copies() -> None:
    """Delete this process's library copies (loaded ones stay mapped: Linux keeps an unlinked file's pages)."""
    directory = _FRESH_DIRS.get(os.getpid())
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


def native_library(kernel: Kernel) -> Path:
    """The kernel's x86-64 shared library as lowp builds it (cached): what runs natively and what lowp prove reads.
    -g: the entry's DWARF lets lowp check its prototype (lowp.kernels.prototype); the code is the same."""
    from lowp.emulator.x86.native import build_shared_library
    return Path(build_shared_library(kernel.sources, (*kernel.build_flags(), "-g"), f"kernel-{Path(kernel.source).stem}",
                                     depends=kernel.depends))


class NativeExecutor:
    """Runs an x86-64 kernel in this process: the conformance runner puts it in a child process.

    guard=True (the default): every call gets A, B, C and the workspace in fresh mappings that end at a guard page
    (kernels/guard.py), C and the workspace hold poison(seed), and a fault, a crash or an overrun of `budget`
    seconds raises the emulator's exceptions (OutOfBounds, BudgetExceeded, ...) naming the buffer and instruction.
    guard=False is the benchmark's path (`lowp bench gemm`): plain numpy buffers, no signal handling, the workspace
    reused per thread (poisoned when first allocated), so small GEMMs are timed without the guard's mappings.
    fresh=True loads a private copy of the kernel's library, with static state of its own: what a first call in a
    new process would see (used to tell a kernel that depends on earlier calls)."""
    backend = "native"
    elsewhere = ""            # why the other targets cannot run it either (executor())

    def __init__(self, kernel: Kernel, *, guard: bool = True, budget: float | None = 10.0, fresh: bool = False):
        self.kernel = kernel
        self.guard, self.budget, self.fresh = guard, budget, fresh
        self._checked = False             # run() has seen the CPU features pass
        self._local = threading.local()   # .work, .cdata: this thread's workspace; .shape, .size: the last call's
        self.library_path: Path | None = None
        self.artifact: Path | None = None     # the cached library (library_path may be a fresh copy of it)
        self._addresses: dict[str, int | None] = {}     # symbol -> its address in this process (address())

    def unavailable(self) -> str | None:
        from lowp.emulator.targets.x86_64 import NATIVE
        reason = NATIVE.cannot_run(self.kernel.features)
        if reason is None and "amx_tile" in self.kernel.features:
            from lowp.kernels.guard import amx_permission
            reason = amx_permission()
        return reason and reason + self.elsewhere

    @cached_property
    def _lib(self):
        ffi = _declared(_prototype(self.kernel))
        return ffi, self._open(ffi, native_library(self.kernel))

    def _open(self, ffi, path: Path):
        self.artifact = Path(path)
        if self.fresh:     # dlopen of the same file returns the loaded copy: a fresh one needs its own file
            copy = _fresh_copies() / f"{next(_FRESH_NUMBERS)}-{Path(path).name}"
            path = Path(shutil.copy(path, copy))
        self.library_path = Path(path)
        return ffi.dlopen(str(path))

    @cached_property
    def _entry(self):
        ffi, lib = self._lib
        workspace = None if self.kernel.signature in XNNPACK_SIGNATURES else \
            self.function(workspace_symbol(self.kernel), "lowp_workspace_fn")
        return ffi, self.function(self.kernel.symbol, "lowp_entry_fn"), workspace

    def address(self, symbol: str) -> int:
        """Where `symbol` is in this process: the loader's answer for an exported function, else the library's own
        symbol table plus its load address (a function of hidden or internal visibility, as every XNNPACK ukernel
        is: XNN_INTERNAL). AttributeError naming it if the library defines no such function."""
        # The library stays where it was loaded: look every symbol up once (reading /proc/self/maps per call cost
        # 3 ms and more where a campaign's parent has hundreds of kernels' libraries mapped; a failed getattr on
        # the cffi library, for every hidden XNNPACK ukernel, some 100 us per ukernel call).
        found = self._addresses.get(symbol)
        if found is None:
            found = self._addresses[symbol] = self._look_up(symbol)
        if found is None:
            raise AttributeError(f"{self.library_path.name} defines no function {symbol!r}")
        return found

    def _look_up(self, symbol: str) -> int | None:
        ffi, lib = self._lib
        try:
            return int(ffi.cast("uintptr_t", getattr(lib, symbol)))
        except AttributeError:
            from lowp.kernels.guard import function_address
            return function_address(self.library_path, symbol)

    def function(self, symbol: str, ctype: str):
        """`symbol` as a callable of the cdef'd function type `ctype`, exported or not (address())."""
        ffi, lib = self._lib
        try:
            return getattr(lib, symbol)
        except AttributeError:
            return ffi.cast(f"{ctype} *", self.address(symbol))

    def build(self) -> dict | None:
        """How the kernel was built: compiler and flags (lowp.emulator.buildcache.describe)."""
        from lowp.emulator.buildcache import describe
        self._lib
        return describe(self.artifact)

    def with_fresh_state(self) -> "NativeExecutor":
        return NativeExecutor(self.kernel, guard=self.guard, budget=self.budget, fresh=True)

    def workspace_bytes(self, M: int, N: int, K: int) -> int:
        local = self._local
        if getattr(local, "shape", None) != (M, N, K):
            local.size = checked_workspace(self.kernel, M, N, K, int(self._entry[2](M, N, K)))
            local.shape = (M, N, K)
        return local.size

    def _reused_workspace(self, size: int):
        local = self._local
        work = getattr(local, "work", None)
        if work is None or work.size < size:
            work = local.work = poison(max(size, 64), np.uint8, 0)
            local.cdata = self._lib[0].from_buffer(work)
        return local.cdata

    def run(self, A: np.ndarray, B: np.ndarray, *, seed: int = 0, work_seed: int | None = None,
            quant: dict | None = None, strides: dict | None = None, igemm: dict | None = None,
            align: dict | None = None) -> np.ndarray:
        """C for A x B (a quantized kernel: with the case's parameters `quant`; an XNNPACK ukernel: with the
        case's ABI options, strides {"a", "cm", "cn"} and igemm {"ks", "a_offset", "zero"}: see
        lowp.kernels.xnnpack). align: {buffer name: offset from a 64-byte boundary} a buffer starts at
        (lowp.emulator.placement; default: each ends at its guard page)."""
        k = self.kernel
        if k.quantized:
            return self._run_quantized(A, B, quant, seed, work_seed, strides=strides, igemm=igemm, align=align)
        k.check_operands(A, B)
        self._check_available()
        abi.reject_abi_options(k, strides, igemm)
        align = checked_align(k, align, GEMM_BUFFERS)
        ffi, fn, _ = self._entry
        A, B = np.ascontiguousarray(A), np.ascontiguousarray(B)
        M, K = A.shape
        N = B.shape[1]
        size = self.workspace_bytes(M, N, K)
        if not self.guard:
            C = poison((M, N), np.int32, seed)
            fn(M, N, K, ffi.from_buffer(A), ffi.from_buffer(B), ffi.from_buffer("int32_t[]", C),
               self._reused_workspace(size), *k.params.values())
            return C
        from lowp.kernels import guard
        allowed = k.overread
        with guard.Arena() as arena:
            a, b = (arena.place(name, x, allowed.get(name, 0), align.get(name)) for name, x in (("A", A), ("B", B)))
            c = arena.place("C", poison((M, N), np.int32, seed), allowed.get("C", 0), align.get("C"))
            w = arena.place("work", poison(size, np.uint8, seed + 1 if work_seed is None else work_seed),
                            allowed.get("work", 0), align.get("work"))
            address = int(ffi.cast("uintptr_t", fn))
            guard.call(address, [M, N, K, a.base, b.base, c.base, w.base, *k.params.values()], arena,
                       budget=self.budget, library=self.library_path)
            return c.array.copy()

    def _check_available(self) -> None:
        if not self._checked:
            reason = self.unavailable()
            if reason:
                raise KernelUnavailable(f"{self.kernel.name} cannot run here: {reason}")
            self._checked = True

    @property
    def runs_invocations(self) -> bool:
        """Whether run_many batches a quantized kernel's cases, parameters and ABI options (`options`) included."""
        return self.guard

    def run_many(self, As, Bs, *, seeds, rerun: bool = True, options=None) -> Sequence:
        """Per case, C exactly as run(A, B, seed=seed, **options[i]) gives it, or the exception run would raise for
        that case (never raised here; a CleanBatch where every case of a `gemm` batch returned C). A `gemm` kernel's cases (all of one shape) go through the guard library's
        batch entry, in one set of guarded buffers laid out once (guard.call_batch); a quantized kernel's
        (`options`: each case's quant, strides, igemm, align) in one such set per run of consecutive cases of one
        invocation layout (guard.call_invocations). Where the batch's evidence cannot be pinned on one case (a
        canary damaged, a kernel that wrote its inputs), every case is rerun by run() instead (rerun=False: every
        case comes back as BatchUnpinned, for a caller that reruns them in the state they started from). After a
        case overran its budget (a runaway loop) the rest are not run, each would cost the budget again: they come
        back as BatchStopped. guard=False, or a quantized kernel without `options`, runs case by case."""
        if not len(As):
            return []
        k = self.kernel
        options = options or [{}] * len(As)
        if not self.guard or (k.quantized and not any(options)):
            return self._one_by_one(As, Bs, seeds, options)
        if k.quantized:
            return self._many_invocations(As, Bs, seeds, options, rerun)
        try:
            A3, B3 = _stacked(k, As, Bs)
            self._check_available()
            done = self._batch(A3, B3, np.asarray(seeds, np.int64))
        except Exception as e:        # what every case of the batch would raise alike (a bad shape, no CPU feature)
            return [e] * len(As)
        return self._outcomes(done, done.C, As, Bs, seeds, options, rerun)

    def _one_by_one(self, As, Bs, seeds, options) -> list:
        return [outcome(lambda: self.run(A, B, seed=seed, **o)) for A, B, seed, o in zip(As, Bs, seeds, options)]

    def _outcomes(self, done, results, As, Bs, seeds, options, rerun: bool) -> Sequence:
        """Each case's outcome of a batch (`results`: each case's C or exception, where it ran; a gemm batch's C as
        one array), or what replaces them where the batch's evidence cannot be pinned on one case."""
        if done.canary is not None or done.inputs_changed.any():
            if not rerun:
                what = "a canary was damaged" if done.canary is not None else \
                    f"case {int(np.argmax(done.inputs_changed))} wrote its inputs"
                return [BatchUnpinned(f"{what} in a batch of {len(As)}: not pinned on one case")] * len(As)
            return self._one_by_one(As, Bs, seeds, options)
        if not done.faults and isinstance(results, np.ndarray):        # a gemm batch's (n, M, N) C, every case clean
            return CleanBatch(results)
        out = [done.faults.get(i, C) for i, C in enumerate(results)]
        return out if done.stopped is None else stopped_after(out[:done.stopped], len(out))

    def _many_invocations(self, As, Bs, seeds, options, rerun: bool) -> list:
        """run_many of a quantized kernel: each case's invocation built as run() builds it (an exception there is
        that case's outcome), then each run of consecutive cases of one layout (invocation.layout_key) in one
        guarded batch, laid out as run() lays out one case's."""
        prepared = [outcome(lambda: self._prepared(A, B, seed=seed, **o)) for A, B, seed, o in
                    zip(As, Bs, seeds, options)]
        out: list = list(prepared)
        start = 0
        while start < len(prepared):
            if isinstance(prepared[start], Exception):
                start += 1
                continue
            key = layout_key(*prepared[start])
            end = start + 1
            while end < len(prepared) and not isinstance(prepared[end], Exception) and \
                    layout_key(*prepared[end]) == key:
                end += 1
            part = slice(start, end)
            out[part] = self._invocation_batch(prepared[part], As[part], Bs[part], seeds[part], options[part], rerun)
            start = end
        return out

    def _invocation_batch(self, prepared, As, Bs, seeds, options, rerun: bool) -> list:
        try:
            done = self._run_invocations(prepared)
        except Exception as e:        # what every case of the batch would raise alike (a symbol the library lacks)
            return [e] * len(prepared)
        results = [outcome(lambda: inv.result({name: done.C[name][i] for name in inv.writable}))
                   for i, (inv, _) in enumerate(prepared)]
        return self._outcomes(done, results, As, Bs, seeds, options, rerun)

    def _run_invocations(self, prepared):
        from lowp.kernels import guard
        first, align = prepared[0]
        allowed = self.kernel.overread
        with guard.Arena() as arena:      # laid out as _run_quantized lays out one case's
            regions = place_native(first, lambda name, array: arena.place(name, array, allowed.get(name, 0),
                                                                          align.get(name)))
            calls = [(self.address(symbol), native_args(args, regions)) for symbol, args in first.calls]
            inputs = {name: np.stack([_case_bytes(inv, name, regions) for inv, _ in prepared]) for name in regions}
            return guard.call_invocations(calls, arena, inputs, first.writable, budget=self.budget,
                                          library=self.library_path)

    def _batch(self, A3: np.ndarray, B3: np.ndarray, seeds: list[int]):
        from lowp.kernels import guard
        k = self.kernel
        ffi, fn, _ = self._entry
        _, M, K = A3.shape
        N = B3.shape[2]
        size = self.workspace_bytes(M, N, K)
        allowed = k.overread
        with guard.Arena() as arena:      # laid out as run() lays out one case's
            regions = {name: arena.place(name, x, allowed.get(name, 0)) for name, x in (("A", A3[0]), ("B", B3[0]))}
            regions["C"] = arena.place("C", poison((M, N), np.int32, int(seeds[0])), allowed.get("C", 0))
            regions["work"] = arena.place("work", poison(size, np.uint8, int(seeds[0]) + 1), allowed.get("work", 0))
            r = regions
            starts, work_starts = poison_start(seeds), poison_start(seeds + 1)
            address = int(ffi.cast("uintptr_t", fn))
            return guard.call_batch(address, [M, N, K, r["A"].base, r["B"].base, r["C"].base, r["work"].base,
                                              *k.params.values()], arena, regions, A3, B3, starts, work_starts,
                                    POISON_POOL, budget=self.budget, library=self.library_path)

    def _prepared(self, A, B, *, seed: int, work_seed: int | None = None, quant=None, align=None, **options):
        """(the invocation, its checked alignment) of a quantized kernel's call, as run() prepares it."""
        self.kernel.check_operands(A, B)
        self._check_available()
        if quant is None:
            raise ValueError(f"{self.kernel.name}: a quantized kernel runs with the case's quantization parameters")
        self._lib
        inv = abi.invocation(self.kernel, A, B, quant, seed=seed, work_seed=work_seed,
                             workspace_bytes=self.workspace_bytes, **options)
        return inv, checked_align(self.kernel, align, inv.buffers)

    def _run_quantized(self, A, B, quant, seed, work_seed, align=None, **options) -> np.ndarray:
        """A quantized signature: its adapter's buffers, always behind guard pages (a ukernel call per MR rows),
        each at its `align` offset."""
        from lowp.kernels import guard
        from lowp.kernels.invocation import call_native
        inv, align = self._prepared(A, B, seed=seed, work_seed=work_seed, quant=quant, align=align, **options)
        allowed = self.kernel.overread
        with guard.Arena() as arena:
            regions = call_native(
                inv, self.address,
                lambda name, array: arena.place(name, array, allowed.get(name, 0), align.get(name)),
                lambda address, args: guard.call(address, args, arena, budget=self.budget, library=self.library_path))
            return inv.result({name: regions[name].array.copy() for name in inv.writable})


def _case_bytes(inv, name: str, regions: dict) -> np.ndarray:
    """What buffer `name` of a case's invocation holds before its calls, as bytes: its array, or a pointer table's
    addresses into the placed `regions`."""
    if name in inv.pointers:
        return pointer_words(inv.pointers[name], regions).view(np.uint8)
    return np.ascontiguousarray(inv.buffers[name]).reshape(-1).view(np.uint8)


def _stacked(kernel: Kernel, As, Bs) -> tuple[np.ndarray, np.ndarray]:
    """As and Bs as (n, M, K) and (n, K, N) arrays (as given where they are: conformance/run/batch.py passes its
    batches so), after the checks run() makes of one case's operands."""
    kernel.check_operands(As[0], Bs[0])
    A3, B3 = (X if isinstance(X, np.ndarray) and X.ndim == 3 else np.stack(X) for X in (As, Bs))
    if A3.shape[1:] != As[0].shape or B3.shape[1:] != Bs[0].shape:
        raise ValueError(f"{kernel.name}: run_many takes cases of one shape")
    return A3, B3


# `lowp conformance --backend qemu` (or bochs, native) sets them, so the check workers (other processes) choose
# the same.
BACKEND_ENV = "LOWP_AARCH64_BACKEND"
X86_BACKEND_ENV = "LOWP_X86_BACKEND"
BACKEND_ENVS = {"aarch64": BACKEND_ENV, "x86-64": X86_BACKEND_ENV}


def target_of(kernel: Kernel, backend: str | None = None):
    """The target (lowp.emulator.targets) `kernel` runs on: `backend` if given, else $LOWP_AARCH64_BACKEND (AArch64)
    or $LOWP_X86_BACKEND (x86-64), else the kernel's own `backend`, else the first of its architecture's targets
    that runs every feature itself (the CPU for x86-64, then Bochs for what the CPU lacks; Unicorn for AArch64
    unless it lacks one, or has it only through lowp's models: I8MM; then qemu-aarch64 where it is there with all
    of them)."""
    from lowp.emulator import targets
    if kernel.target in BACKEND_ENVS:
        backend = backend or os.environ.get(BACKEND_ENVS[kernel.target])
    choice = backend or kernel.backend
    try:
        return targets.choose(kernel.target, kernel.features, kernel.vector_bits, choice)
    except ValueError as e:
        raise ValueError(f"{kernel.name}: {e}") from None


def aarch64_backend(kernel: Kernel, backend: str | None = None) -> str:
    """The backend name ('unicorn' or 'qemu') an AArch64 kernel runs on (target_of)."""
    return target_of(kernel, backend).backend


def backend_of(kernel: Kernel, backend: str | None = None) -> str:
    """The backend name a kernel runs on: 'native', 'bochs', 'unicorn' or 'qemu' (target_of)."""
    return target_of(kernel, backend).backend


def executor(kernel: Kernel, backend: str | None = None):
    """The executor of `kernel` on its target (target_of): natively in this process, or a machine's calls. Where no
    target of its architecture can run it and none was asked for, its unavailable() names why each cannot."""
    target = target_of(kernel, backend)
    if target.backend == "native":
        ex = NativeExecutor(kernel)
    else:
        from lowp.kernels.emulated import EmulatedExecutor, QemuExecutor   # needs lowp.emulator
        ex = (QemuExecutor if target.backend == "qemu" else EmulatedExecutor)(kernel, target=target)
    chosen = backend or os.environ.get(BACKEND_ENVS.get(kernel.target, ""), "") or kernel.backend
    if not chosen:
        ex.elsewhere = _elsewhere(kernel, target)
    return ex


def _elsewhere(kernel: Kernel, chosen) -> str:
    """'; <target>: why it cannot run the kernel' for each other target of its architecture (what a SKIPPED row
    adds when none can: 'CPU lacks avx512_vnni; Bochs ..., cpu model sapphire_rapids lacks avx_vnni_int8')."""
    from lowp.emulator import targets
    notes = []
    for t in targets.of_arch(kernel.target):
        if t is not chosen:
            reason = t.cannot_run(kernel.features, kernel.vector_bits)
            if reason:
                notes.append(reason if t.backend in reason or "lacks" in reason else f"{t.backend}: {reason}")
    return "".join(f"; {n}" for n in notes)


def bench_cases_per_second(kernel: Kernel, n: int, seed: int = 0, *, backend: str | None = None, batch: int = 100,
                           largest: tuple[int, int, int] = (9, 17, 64)) -> float:
    """Cases per second of `kernel`'s executor (executor(kernel, backend)) through run_many: n random
    cases drawn from `seed` in batches of `batch` cases of one random shape M x N x K up to `largest` (issue 26's
    4x8 SDOT target: M <= 9, N <= 17, K <= 64), operands over the kernel's domain. Only run_many is timed
    (execution and transfer, the machine's start and the kernel's build left out): the model comparison is the
    engine's. A case that faults counts as run."""
    import time

    ex = executor(kernel, backend)
    rng = np.random.default_rng(seed)
    (alo, ahi), (blo, bhi) = kernel.domain.a, kernel.domain.b
    batches = []
    for start in range(0, n, batch):
        size = min(batch, n - start)
        M, N, K = (int(rng.integers(1, top + 1)) for top in largest)
        As = [rng.integers(alo, ahi, (M, K), endpoint=True).astype(kernel.a_dtype) for _ in range(size)]
        Bs = [rng.integers(blo, bhi, (K, N), endpoint=True).astype(kernel.b_dtype) for _ in range(size)]
        batches.append((As, Bs, list(range(start, start + size))))
    ex.run_many(batches[0][0][:1], batches[0][1][:1], seeds=[0])       # build, start the machine
    elapsed = 0.0
    for As, Bs, seeds in batches:
        t0 = time.perf_counter()
        ex.run_many(As, Bs, seeds=seeds)
        elapsed += time.perf_counter() - t0
    return n / elapsed if elapsed else float("inf")
