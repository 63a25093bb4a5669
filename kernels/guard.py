"""Guarded native calls: every buffer a native kernel gets (A, B, C, the workspace) lives in its own mapping that ends
exactly at an inaccessible guard page, with a canary in the slack below its start and in any over-read it is
allowed; a fault, a crash or a runaway loop inside the kernel comes back as the same exception the emulator raises
(lowp.emulator.errors): OutOfBounds names the buffer, the byte offset, how far past the end, read or write and the
faulting instruction, disassembled from the kernel's own code at the fault's RIP. See guard.c for the mechanism.
"""
from __future__ import annotations

import mmap
import signal
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import cffi
import numpy as np

from lowp.emulator.x86 import faults as x86_faults
from lowp.emulator.placement import CANARY, canaries, slack
from lowp.emulator.errors import BudgetExceeded, OutOfBounds, Trap, UndefinedInstruction

PAGE = mmap.PAGESIZE
MAX_ARGS = 16
# ucontext's general registers (glibc <sys/ucontext.h>, x86-64): REG_R8 = 0 ... REG_RIP = 16, REG_ERR = 19.
GREGS = ("r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rdi", "rsi", "rbp", "rbx", "rdx", "rax", "rcx",
         "rsp", "rip")
REG_RIP, REG_ERR, PF_WRITE = 16, 19, 2
SI_KERNEL = 0x80        # si_code of a SIGSEGV the kernel sends for a general-protection fault

_CDEF = """
typedef struct { int32_t signo; int32_t code; uint64_t address; int64_t gregs[23]; } lowp_fault;
int lowp_call(void *fn, const int64_t *args, int64_t budget_us, lowp_fault *out);
void *lowp_map(size_t pages);
void lowp_unmap(void *start, size_t pages);
int lowp_breakpoints(const uint64_t *addresses, int32_t n);
int lowp_breakpoint_hits(int32_t *hits);
int lowp_amx_permission(void);
typedef struct {
    uint8_t *a, *b, *c, *work;
    size_t a_bytes, b_bytes, c_bytes, work_bytes;
    const uint8_t *a_in, *b_in;
    uint8_t *c_out;
    const uint8_t *pool;
    size_t pool_bytes;
    const int64_t *c_poison, *work_poison;
    int32_t *inputs_changed;
    int32_t first, count;
} lowp_batch;
int lowp_call_batch(void *fn, const int64_t *args, int64_t budget_us, lowp_batch *batch, lowp_fault *out);
typedef struct { uint8_t *at; size_t bytes; const uint8_t *source; uint8_t *written; } lowp_buffer;
typedef struct {
    lowp_buffer *buffers;
    int32_t nbuffers;
    void *const *fns;
    const int64_t *args;
    int32_t ncalls;
    int32_t first, count;
} lowp_invocations;
int lowp_call_invocations(int64_t budget_us, lowp_invocations *batch, lowp_fault *out);
"""


@cache
def _library():
    from lowp.emulator.x86.native import build_shared_object
    ffi = cffi.FFI()
    ffi.cdef(_CDEF)
    path = build_shared_object(Path(__file__).with_name("guard.c").read_text(), "lowp-guard", ("-O2",))
    return ffi, ffi.dlopen(str(path))


@dataclass
class Region:
    """One buffer in its own guarded mapping: [start, base) canary, [base, base + nbytes) the data,
    [base + nbytes, end) the allowed over-read (canary too), then the guard page."""
    name: str
    array: np.ndarray          # the data, a view of the mapping (the caller's array is copied in)
    start: int
    base: int
    nbytes: int
    end: int
    pages: int
    _view: np.ndarray          # the whole accessible mapping as bytes

    def canary_damage(self) -> OutOfBounds | None:
        """A write into the slack below the start or into the over-read area, found after the call."""
        below = self._view[: self.base - self.start]
        above = self._view[self.base - self.start + self.nbytes:]
        for part, first in ((below, self.base - self.start), (above, 0)):
            if part.tobytes() == canaries(len(part)):     # every byte the canary (this runs per call)
                continue
            bad = np.flatnonzero(part != CANARY)
            if bad.size:
                offset = int(bad[0]) - first if part is below else self.nbytes + int(bad[0])
                where = "before its start" if offset < 0 else "past its end (into the allowed over-read)"
                return OutOfBounds(
                    f"out-of-bounds write {where}: byte offset {offset} of buffer {self.name!r} ({self.nbytes} bytes) "
                    "was modified (found after the call by a canary, not at the instruction)",
                    buffer=self.name, offset=offset, nbytes=self.nbytes, access="write", address=self.base + offset,
                    size=1, itemsize=self.array.dtype.itemsize)
        return None


# Mappings of closed arenas, by page count, for the next call to reuse (every byte is rewritten before a kernel
# sees it): mmap + two mprotects + munmap per buffer per call cost more than the small kernels they guard.
_POOL: dict[int, list[tuple[int, np.ndarray]]] = {}
POOL_PAGES = 1 << 14            # at most 64 MiB of idle mappings are kept


def _pooled_pages() -> int:
    return sum(p * len(v) for p, v in _POOL.items())      # a few distinct sizes: cheap


def _take(pages: int) -> tuple[int, np.ndarray]:
    free = _POOL.get(pages)
    if free:
        return free.pop()
    ffi, lib = _library()
    start = lib.lowp_map(pages)
    if start == ffi.NULL:
        raise MemoryError(f"cannot map {pages} guarded pages")
    return int(ffi.cast("uintptr_t", start)), np.frombuffer(ffi.buffer(start, pages * PAGE), np.uint8)


def _give_back(start: int, pages: int, view: np.ndarray) -> None:
    if _pooled_pages() + pages <= POOL_PAGES:
        _POOL.setdefault(pages, []).append((start, view))
        return
    ffi, lib = _library()
    lib.lowp_unmap(ffi.cast("void *", start), pages)


class Arena:
    """The guarded buffers of one call; their mappings go back to the pool on close."""

    def __init__(self):
        self.regions: list[Region] = []

    def place(self, name: str, array: np.ndarray, after: int = 0, align: int | None = None) -> Region:
        """`array` in a mapping of its own, ending `after` bytes (its allowed over-read) before the guard page, or
        starting at `align` (an offset from a 64-byte boundary) with the slack that needs after the over-read
        (canary too: lowp.emulator.placement)."""
        array = np.ascontiguousarray(array)
        nbytes = array.nbytes
        after += slack(nbytes, after, align)
        pages = max(1, -(-(nbytes + after) // PAGE))
        start_addr, view = _take(pages)
        end = start_addr + pages * PAGE
        base = end - after - nbytes
        view[:] = CANARY
        data = view[base - start_addr: base - start_addr + nbytes].view(array.dtype).reshape(array.shape)
        data[...] = array
        region = Region(name, data, start_addr, base, nbytes, end, pages, view)
        self.regions.append(region)
        return region

    def close(self) -> None:
        for r in self.regions:
            _give_back(r.start, r.pages, r._view)
        self.regions = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def locate(self, address: int) -> Region | None:
        """The region whose mapping or guard pages hold `address`."""
        for r in self.regions:
            if r.start - PAGE <= address < r.end + PAGE:
                return r
        return None


# guard.c's signal handlers, jump buffer, alternate stack and budget timer are the process's, not a thread's: two
# guarded calls at once (a campaign's build threads probe kernels; cffi releases the GIL) would interleave install()
# and restore() and leave guard.c's handler in place after both, where it ends the process on the next fault that is
# not a kernel's (a wasm trap, which wasmtime's handler would have caught). One guarded call at a time.
_ONE_CALL_AT_A_TIME = threading.Lock()


def call(fn_address: int, args, arena: Arena, *, budget: float | None, library: Path | None = None):
    """Call the kernel at `fn_address` with integer/pointer `args`; raise the emulator's exceptions on a fault, an
    overrun of `budget` seconds or a canary found damaged after the call."""
    ffi, lib = _library()
    if len(args) > MAX_ARGS:
        raise ValueError(f"a guarded call takes at most {MAX_ARGS} integer or pointer arguments, got {len(args)}")
    argv = _argv(args)
    fault = ffi.new("lowp_fault *")
    with _ONE_CALL_AT_A_TIME:
        faulted = lib.lowp_call(ffi.cast("void *", fn_address), ffi.from_buffer("int64_t[]", argv),
                                int((budget or 0) * 1e6), fault)
    if faulted:
        raise _exception(fault, arena, budget, library)
    for r in arena.regions:
        damage = r.canary_damage()
        if damage is not None:
            raise damage


def _argv(args) -> np.ndarray:
    """The MAX_ARGS int64 words guard.c passes: each argument's low 64 bits (a pointer, or a negative int)."""
    argv = np.zeros(MAX_ARGS, np.uint64)
    argv[: len(args)] = [a & 0xFFFF_FFFF_FFFF_FFFF for a in args]
    return argv.view(np.int64)


@dataclass
class BatchOutcome:
    """What a batch of guarded calls did: every case's C (rows of a faulting case hold whatever the kernel left; an
    invocation batch's: {writable buffer: every case's bytes}),
    the fault of each case that faulted (by index), the cases whose kernel call changed A or B, the first
    canary found damaged after the batch (which case did it is not known: the caller reruns the batch), and where
    the batch stopped after a case overran its budget (None: every case ran)."""
    C: np.ndarray | dict[str, np.ndarray]
    faults: dict[int, Exception]
    inputs_changed: np.ndarray
    canary: OutOfBounds | None
    stopped: int | None = None


def call_batch(fn_address: int, args, arena: Arena, regions: dict[str, Region], A: np.ndarray, B: np.ndarray,
               c_starts: np.ndarray, work_starts: np.ndarray, pool: np.ndarray, *, budget: float | None,
               library: Path | None = None) -> BatchOutcome:
    """Call the kernel at `fn_address` once per case of A (n, M, K) and B (n, K, N), with `args` (pointing at
    `regions` "A", "B", "C", "work" of `arena`), in one native call per stretch of cases between faults
    (guard.c lowp_call_batch): case i's C and workspace start as the poison windows c_starts[i] and
    work_starts[i] of `pool`."""
    ffi, lib = _library()
    argv = _argv(args)
    n = len(A)
    c_region, w_region = regions["C"], regions["work"]
    C = np.empty((n, *c_region.array.shape), c_region.array.dtype)
    A, B = np.ascontiguousarray(A), np.ascontiguousarray(B)
    c_starts, work_starts = (np.ascontiguousarray(x, np.int64) for x in (c_starts, work_starts))
    changed = np.zeros(n, np.int32)
    batch = ffi.new("lowp_batch *")
    keep = []      # the cdata the struct points into must live through the call

    def pointer(array):
        data = ffi.from_buffer(array)
        keep.append(data)
        return ffi.cast("uint8_t *", data)
    batch.a, batch.b = ffi.cast("uint8_t *", regions["A"].base), ffi.cast("uint8_t *", regions["B"].base)
    batch.c, batch.work = ffi.cast("uint8_t *", c_region.base), ffi.cast("uint8_t *", w_region.base)
    batch.a_bytes, batch.b_bytes = regions["A"].nbytes, regions["B"].nbytes
    batch.c_bytes, batch.work_bytes = c_region.nbytes, w_region.nbytes
    batch.a_in, batch.b_in, batch.c_out = pointer(A), pointer(B), pointer(C)
    batch.pool, batch.pool_bytes = pointer(pool), pool.size
    batch.c_poison = ffi.cast("int64_t *", pointer(c_starts))
    batch.work_poison = ffi.cast("int64_t *", pointer(work_starts))
    batch.inputs_changed = ffi.cast("int32_t *", pointer(changed))
    fn, args_c = ffi.cast("void *", fn_address), ffi.from_buffer("int64_t[]", argv)

    def run_from(first: int, fault) -> int:
        batch.first, batch.count = first, n - first
        return lib.lowp_call_batch(fn, args_c, int((budget or 0) * 1e6), batch, fault)
    faults, stopped = _cases_between_faults(run_from, n, arena, budget, library)
    return BatchOutcome(C, faults, changed.astype(bool), _damaged_canary(arena), stopped)


def _cases_between_faults(run_from, n: int, arena: Arena, budget, library) -> tuple[dict[int, Exception], int | None]:
    """Run a batch's n cases, one native call (run_from(first, fault) -> the faulting case or -1) per stretch
    between faults: ({case: its fault}, where the batch stopped after a runaway loop or None)."""
    ffi, _ = _library()
    fault = ffi.new("lowp_fault *")
    faults: dict[int, Exception] = {}
    first = 0
    while first < n:
        with _ONE_CALL_AT_A_TIME:
            at = run_from(first, fault)
        if at < 0:
            break
        faults[at] = _exception(fault, arena, budget, library)
        first = at + 1
        if isinstance(faults[at], BudgetExceeded):      # a runaway loop: the next cases would cost the budget too
            break
    stopped = first if first < n and isinstance(faults.get(first - 1), BudgetExceeded) else None
    return faults, stopped


def _damaged_canary(arena: Arena) -> OutOfBounds | None:
    return next((d for d in (r.canary_damage() for r in arena.regions) if d is not None), None)


def call_invocations(calls, arena: Arena, inputs: dict[str, np.ndarray], writable, *, budget: float | None,
                     library: Path | None = None) -> BatchOutcome:
    """Many cases of one invocation layout (guard.c lowp_call_invocations), in one native call per stretch of cases
    between faults: per case every buffer of `arena` (its regions, by name) is filled with inputs[name][i], its
    case's bytes, then `calls`, [(address, int args)], the same for every case, are made in order. The `writable`
    buffers' bytes after each case's calls come back as BatchOutcome.C, {name: (n, bytes)}; inputs_changed stays
    False (every buffer is rewritten per case: a kernel that writes an input affects its own case only)."""
    ffi, lib = _library()
    regions = {r.name: r for r in arena.regions}
    inputs = {name: np.ascontiguousarray(data, np.uint8) for name, data in inputs.items()}
    n = len(next(iter(inputs.values())))
    written = {name: np.empty_like(inputs[name]) for name in writable}
    buffers = ffi.new("lowp_buffer[]", len(inputs))
    keep = [buffers]      # the cdata the structs point into must live through the call
    for b, (name, data) in enumerate(inputs.items()):
        buffers[b].at, buffers[b].bytes = ffi.cast("uint8_t *", regions[name].base), regions[name].nbytes
        keep.append(ffi.from_buffer(data))
        buffers[b].source = ffi.cast("uint8_t *", keep[-1])
        if name in written:
            keep.append(ffi.from_buffer(written[name]))
            buffers[b].written = ffi.cast("uint8_t *", keep[-1])
    fns = ffi.new("void *[]", [ffi.cast("void *", address) for address, _ in calls])
    args = np.concatenate([_argv(values) for _, values in calls])
    batch = ffi.new("lowp_invocations *", {"buffers": buffers, "nbuffers": len(inputs), "fns": fns,
                                           "args": ffi.cast("int64_t *", ffi.from_buffer(args)), "ncalls": len(calls)})
    keep.append(args)

    def run_from(first: int, fault) -> int:
        batch.first, batch.count = first, n - first
        return lib.lowp_call_invocations(int((budget or 0) * 1e6), batch, fault)
    faults, stopped = _cases_between_faults(run_from, n, arena, budget, library)
    return BatchOutcome(written, faults, np.zeros(n, bool), _damaged_canary(arena), stopped)


def _exception(fault, arena: Arena, budget, library):
    gregs = [int(fault.gregs[i]) for i in range(23)]
    rip = gregs[REG_RIP] & (2 ** 64 - 1)
    insn = _instruction_at(rip)
    text = x86_faults.text(insn)
    where = f"by {text} at {_symbolize(rip, library)}"
    signo = fault.signo
    if signo == signal.SIGALRM:
        return BudgetExceeded(f"the kernel ran longer than its budget of {budget:g} s (a runaway loop?); stopped at "
                              f"{_symbolize(rip, library)}: {text}", budget=budget, pc=rip, instruction=text)
    if signo == signal.SIGILL:
        return UndefinedInstruction(f"illegal instruction at {_symbolize(rip, library)}: {text} (the CPU does not "
                                    "implement it, or a ud2/__builtin_trap)", pc=rip, encoding=None, instruction=text)
    if signo in (signal.SIGFPE, signal.SIGTRAP):
        kind = "an arithmetic exception (integer division by zero or overflow)" if signo == signal.SIGFPE \
            else "a breakpoint trap"
        return Trap(f"the kernel raised {kind} {where}", pc=rip, kind=signal.Signals(signo).name, instruction=text)
    access = "write" if gregs[REG_ERR] & PF_WRITE else "read"
    address = int(fault.address)
    start, size = x86_faults.memory_operand(insn, dict(zip(GREGS, gregs))) if insn else (None, None)
    if fault.code == SI_KERNEL and start is not None:       # a general-protection fault, not a page fault
        region = arena.locate(start)
        return x86_faults.general_protection(start, size, text, where, rip, region and region.name,
                                             region and region.base)
    region = arena.locate(address)
    place = region and x86_faults.Place(region.name, region.start, region.base, region.nbytes, region.end,
                                        region.array.dtype, region.array.shape)
    return x86_faults.page_fault(access, address, start, size, text, where, rip, place, PAGE)


def _instruction_at(rip: int):
    ffi, _ = _library()
    try:
        code = bytes(ffi.buffer(ffi.cast("char *", rip), 15))
    except Exception:     # pragma: no cover - RIP in unreadable memory (a jump into the void)
        return None
    return x86_faults.decode(code, rip)


def _symbolize(rip: int, library: Path | None) -> str:
    """'symbol+0xNN' for an address inside `library` (local symbols included, from .symtab), else the address."""
    if library is not None:
        symbols, load = _symbols(str(library)), _load_address(str(library))   # a library may be reloaded elsewhere
        if load is not None:
            for name, (value, size) in symbols.items():
                if value <= rip - load < value + max(size, 1):
                    return f"{name}+{rip - load - value:#x} ({rip:#x})"
    return f"{rip:#x}"


@cache
def _symbols(library: str) -> dict:
    from elftools.elf.elffile import ELFFile
    symbols = {}
    with open(library, "rb") as f:
        elf = ELFFile(f)
        for section in ("symtab", "dynsym"):
            table = elf.get_section_by_name(f".{section}")
            for sym in (table.iter_symbols() if table else ()):
                if sym["st_info"]["type"] == "STT_FUNC" and sym["st_value"]:
                    symbols.setdefault(sym.name, (sym["st_value"], sym["st_size"]))
    return symbols


def _load_address(library: str) -> int | None:
    """Where the dynamic loader mapped `library` (its first mapping's start minus its file offset)."""
    real = str(Path(library).resolve())
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 6 and parts[5] == real:
                lo = int(parts[0].split("-")[0], 16)
                return lo - int(parts[2], 16)
    except OSError:      # pragma: no cover - no /proc
        pass
    return None


class Breakpoints:
    """One-shot INT3 breakpoints at `addresses` (runtime addresses of instruction starts) while the block runs:
    `.hits` is then the set of addresses whose instruction executed. Only for a private copy of a library (see
    NativeExecutor(fresh=True)): the code is patched in memory; bytes are restored when hit or at the end."""

    def __init__(self, addresses):
        self.addresses = [int(a) for a in addresses]
        self.hits: set[int] = set()

    def __enter__(self):
        ffi, lib = _library()
        argv = np.array(self.addresses, np.uint64)
        set_ = lib.lowp_breakpoints(ffi.from_buffer("uint64_t[]", argv), len(argv))
        if set_ != len(argv):
            raise RuntimeError(f"could only set {set_} of {len(argv)} breakpoints (mprotect refused, or too many)")
        return self

    def __exit__(self, *exc):
        ffi, lib = _library()
        flags = np.zeros(max(1, len(self.addresses)), np.int32)
        lib.lowp_breakpoint_hits(ffi.from_buffer("int32_t[]", flags))
        self.hits = {a for a, f in zip(self.addresses, flags) if f}


def function_address(library: Path, symbol: str) -> int | None:
    """Where a function of `library` is in this process, by its symbol table (hidden and internal ones too: dlsym
    finds only exported ones), or None if it defines none of that name or is not loaded."""
    entry = _symbols(str(library)).get(symbol)
    load = _load_address(str(library))
    return None if entry is None or load is None else load + entry[0]


@cache
def amx_permission() -> str | None:
    """Ask Linux for the AMX tile data state for this process (once): None when granted, else why not."""
    _, lib = _library()
    code = lib.lowp_amx_permission()
    return None if code == 0 else (f"Linux did not grant the AMX tile data state (arch_prctl ARCH_REQ_XCOMP_PERM, "
                                   f"XFEATURE_XTILEDATA: {code}); Linux 5.16 or newer is needed")


def load_address(library: Path) -> int | None:
    """Where the dynamic loader mapped `library` in this process."""
    return _load_address(str(library))
