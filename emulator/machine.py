"""Run functions of a bare ELF under Unicorn (AArch64 by default), called like C functions from Python.

    m = Machine(build("gemm.c"))
    r = m.call("gemm_sdot", A, B, np.zeros((M, N), np.int32), M, N, K)
    C = r.arrays[2]                      # copies of every array argument after the call

Calling convention: the `convention` object's (emulator/aarch64/aapcs64.py for AArch64; the core here names no register).
AAPCS64: integer and pointer arguments in X0..X7 in order, the rest in 8-byte stack slots
at SP; a numpy array is passed as a pointer to a copy of its bytes (C order) in its own mapping; a Python int
as a 64-bit two's-complement scalar. LR points at a return page: the call ends when the function returns there.
The caller's arrays are never modified: CallResult.arrays holds a copy of each array argument after the call.

Memory: every buffer is mapped between unmapped guard pages and ends exactly at its last page's end, so a load
or store one byte past the end faults at once (OutOfBounds names the buffer, the offset, read or write and the
faulting instruction). Below the start, the slack of its first page is filled with a canary and checked after
the call (writes only; reads there are caught only beyond the page). Buffers start above 4 GiB, so a kernel
that truncates a pointer to 32 bits faults too. The stack (1 MiB) has a guard page below it.

One emu_start per call. Modes (per Machine, or per call):
  budget     instruction budget (default 500 M); without `count` it is Unicorn's own emu_start(count=...),
             which costs a C callback per instruction, no Python.
  count      exact instruction count via a Python UC_HOOK_BLOCK (one call per executed block, adding the
             block's size / 4); the budget is then enforced by that hook, at Python's speed: a two-instruction
             loop takes minutes to spend 500 M. Give `seconds` too for a call that must stop soon.
  seconds    a wall-clock limit (Unicorn's own emu_start timeout, no Python): BudgetExceeded when it runs out,
             with the instructions counted so far (None: none).
  mnemonics  per-mnemonic counts (implies count): each executed block is disassembled once with capstone.
  lockstep   for every instruction lowp models (lowp.emulator.aarch64.a64) compare Unicorn's Vd with the model's,
             stopping at the first disagreement (LockstepMismatch): code hooks only at those addresses.
  trace      a callable trace(pc, text) for every instruction (a per-instruction Python hook; slow).
  budget=None and count=False: no hooks at all (the benchmark's "native Unicorn" speed; a runaway loop hangs).
FEAT_I8MM instructions Unicorn lacks always run on lowp's models (lowp.emulator.aarch64.i8mm); CallResult.modeled says
how many of each.
"""
from __future__ import annotations

import os
import pickle
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from unicorn import (UC_HOOK_BLOCK, UC_HOOK_CODE, UC_HOOK_INTR, UC_HOOK_MEM_FETCH_UNMAPPED, UC_HOOK_MEM_PROT,
                     UC_HOOK_MEM_READ_UNMAPPED, UC_HOOK_MEM_WRITE_UNMAPPED, UC_MEM_FETCH_PROT, UC_MEM_FETCH_UNMAPPED,
                     UC_MEM_READ_PROT, UC_MEM_READ_UNMAPPED, UC_MEM_WRITE_PROT, UC_MEM_WRITE_UNMAPPED, UC_PROT_ALL,
                     UC_PROT_EXEC, UC_PROT_READ, UC_PROT_WRITE, UC_QUERY_TIMEOUT, UcError)

from lowp.emulator.aarch64.aapcs64 import AAPCS64, REGISTER_STATES
from lowp.emulator.build import Binary
from lowp.emulator.placement import CANARY, canaries, check_alignment, padded_after
from lowp.emulator.errors import (BudgetExceeded, EmulationFailed, EmulatorError, LockstepMismatch, OutOfBounds, Trap,
                     UndefinedInstruction, describe_out_of_bounds, stopped_after)


# Ctrl-C or SIGTERM during emu_start stops the emulation and then reaches its handler. A Python handler runs inside
# whichever hook callback is executing, and an exception it raises there is lost: Unicorn's binding catches a hook's
# exception only inside its wrapper's `try`, and one raised at the wrapper's first bytecode goes to ctypes, which
# prints "Exception ignored" and goes on (measured: a SIGINT to `lowp emulate` on a runaway loop waited out the 60 s
# budget). So while emu_start runs, the handler only notes the signal and stops the CPU; the signal reaches the
# handler it stands in for once emu_start has returned. That handler (_dispatch) stays installed from one call to the
# next, passing a signal that comes between calls straight on: setting and restoring two handlers around every call
# was four sigaction calls, some 17 us of a call that emulates a small kernel in 40. A handler installed since
# (another's) is stood in for at the next call; an ignored signal stays ignored; off the main thread, where Python
# sets no handlers, nothing changes.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_STOOD_IN_FOR: dict = {}    # signal -> the handler _dispatch passes it to
_EMULATING: list = []       # [uc, signals noted] while emu_start runs on the main thread


def _dispatch(signum, frame):
    if _EMULATING:
        _EMULATING[1].append(signum)
        _EMULATING[0].emu_stop()
    else:
        _deliver(signum, frame)


def _deliver(signum, frame) -> None:
    """What the signal would have done without _dispatch: its handler before, or the default action."""
    handler = _STOOD_IN_FOR.get(signum, signal.SIG_DFL)
    if callable(handler):
        handler(signum, frame)
    elif handler == signal.SIG_DFL:
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)


def _stopping_on_signals(uc) -> list | None:
    """Before emu_start: _dispatch in place (once), and the signals it notes from now on; None off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return None
    for signum in STOP_SIGNALS:
        handler = signal.getsignal(signum)
        if handler is not _dispatch and handler not in (signal.SIG_IGN, None):
            _STOOD_IN_FOR[signum] = handler
            signal.signal(signum, _dispatch)
    noted: list[int] = []
    _EMULATING[:] = [uc, noted]
    return noted


def _signals_noted(noted: list | None) -> None:
    """After emu_start: a signal noted during it goes to its handler now (KeyboardInterrupt from here, say)."""
    _EMULATING.clear()
    if noted:
        _deliver(noted[0], None)


DEFAULT_BUDGET = 500_000_000
STACK_TOP, STACK_SIZE = 0x7F00_0000, 1 << 20
RETURN = 0x7FF0_0000
BUFFERS = 0x1_0000_0000
MASK64 = (1 << 64) - 1
ENTERED = 256             # saved call contexts kept (Machine._enter): 12 KiB each


@dataclass
class CallResult:
    """What one call did. arrays: a copy of every array argument after the call, in argument order (also by
    name through result['name'] / .named); ret: X0 as a signed 64-bit int; instructions: executed instructions
    (None unless counted); modeled: {mnemonic: count} of instructions lowp's models executed in Unicorn's place;
    mnemonics: {mnemonic: count} when asked for; lockstep_checked: modeled instructions compared in lockstep."""
    arrays: list
    names: list
    ret: int = 0
    instructions: int | None = None
    modeled: dict = field(default_factory=dict)
    mnemonics: dict | None = None
    lockstep_checked: int | None = None
    seconds: float = 0.0
    fault: EmulatorError | None = None

    @property
    def named(self) -> dict:
        return dict(zip(self.names, self.arrays))

    def __getitem__(self, key):
        return self.arrays[key] if isinstance(key, int) else self.named[key]

    def summary(self) -> str:
        parts = [f"{self.instructions:,} instructions" if self.instructions is not None else "instructions not counted"]
        if self.modeled:
            parts.append("modeled by lowp (Unicorn lacks them): "
                         + ", ".join(f"{m} x{n}" for m, n in sorted(self.modeled.items())))
        if self.lockstep_checked is not None:
            parts.append(f"lockstep: {self.lockstep_checked:,} modeled instructions agreed")
        return "; ".join(parts)


@dataclass
class _Buffer:
    name: str
    index: int
    base: int        # address of element 0
    nbytes: int
    lo: int          # first mapped byte (page aligned)
    hi: int          # end of the mapping (page aligned) == base + nbytes + after
    array: np.ndarray
    after: int = 0   # bytes of allowed over-read between the end and the guard page


class Machine:
    """One Unicorn CPU with `binary`'s segments loaded; call() its functions. The core is architecture-neutral:
    `convention` (default AAPCS64, emulator/aarch64/aapcs64.py) creates the CPU, passes the arguments and knows the ISA's
    registers, disassembly and exceptions."""

    def __init__(self, binary: Binary, *, budget: int | None = DEFAULT_BUDGET, count: bool = False,
                 mnemonics: bool = False, lockstep: bool = False, trace=None, seconds: float | None = None,
                 convention=AAPCS64):
        if binary.target != "bare":
            raise ValueError(f"Machine runs 'bare' builds; {binary.path.name} is a {binary.target!r} build")
        self.binary = binary
        self.cc = convention
        self.defaults = dict(budget=budget, count=count, mnemonics=mnemonics, lockstep=lockstep, trace=trace,
                             seconds=seconds)
        self.uc = convention.create()
        self.page = self.uc.ctl_get_page_size()
        self._code = []
        for seg in binary.segments:
            lo, hi = self._down(seg.vaddr), self._up(seg.vaddr + seg.memsz)
            perms = (UC_PROT_READ if seg.flags & 4 else 0) | (UC_PROT_WRITE if seg.flags & 2 else 0) \
                | (UC_PROT_EXEC if seg.flags & 1 else 0)
            self.uc.mem_map(lo, hi - lo, perms or UC_PROT_READ)
            self.uc.mem_write(seg.vaddr, seg.data)
            if seg.flags & 1:
                self._code.append((seg.vaddr, seg.data))
        self.uc.mem_map(STACK_TOP - STACK_SIZE, STACK_SIZE, UC_PROT_READ | UC_PROT_WRITE)
        self.uc.mem_map(RETURN, self.page, UC_PROT_ALL)
        self.uc.hook_add(UC_HOOK_INTR, self._on_interrupt)
        self.uc.hook_add(UC_HOOK_MEM_READ_UNMAPPED | UC_HOOK_MEM_WRITE_UNMAPPED | UC_HOOK_MEM_FETCH_UNMAPPED
                         | UC_HOOK_MEM_PROT, self._on_memory)
        self._installed = None       # the hook configuration the translation cache was built with
        self._block_cache = {}
        self._hooks = []
        self._modeled_ops = None
        self._state = None
        self._pristine = self.uc.context_save()     # the CPU as created: every seeded state starts from it
        self._seeded = {}
        self._mapped = []       # the buffers' regions (address, size), kept from one call to the next
        self._intact = set()    # (lo, base, hi, nbytes) of the buffers whose canaries the last call found intact
        self._entered = {}      # (register state, arguments) -> the saved context a call starts from (_enter)

    # -- layout -------------------------------------------------------------------------------------------
    def _up(self, x):
        return -(-x // self.page) * self.page

    def _down(self, x):
        return x // self.page * self.page

    def _place(self, arrays, names, overread, tables=None, align=None):
        buffers, cursor, layout = [], BUFFERS, []
        for i, (name, a) in enumerate(zip(names, arrays)):
            nbytes = a.nbytes
            # allowed over-read and the slack an alignment needs: canary-filled, readable
            after = padded_after(name, nbytes, overread, align)
            size = self._up(max(nbytes + after, 1))
            lo = cursor + self.page                      # one unmapped guard page below
            hi = lo + size
            base = hi - after - nbytes                   # the buffer (and its over-read) ends at the mapping's end
            buffers.append(_Buffer(name, i, base, nbytes, lo, hi, a, after))
            layout.append((lo, size))
            cursor = self._up(hi + self.page + 0xFFFF) // 0x10000 * 0x10000   # guard page above, then align
        self._map(layout)
        relocate(buffers, tables or {})
        intact, self._intact = self._intact, set()
        for b in buffers:       # every byte of every mapping is written: nothing of an earlier call shows through
            data = np.ascontiguousarray(b.array).tobytes() if b.nbytes else b""
            # nbytes too: with an alignment's slack, one place can hold a buffer of another length
            if (b.lo, b.base, b.hi, b.nbytes) in intact:
                # the last call's check read these canaries back intact: only the data differs from a full write
                self.uc.mem_write(b.base, data)
            else:
                self.uc.mem_write(b.lo, canaries(b.base - b.lo) + data + canaries(b.after))
        return buffers

    def _map(self, layout: list[tuple[int, int]]) -> None:
        """Map exactly these (address, size) regions. The last call's regions that the layout repeats stay mapped
        (all of them for the calls of one case and a shape's value classes; a buffer of one page keeps its region
        across shapes): mapping and unmapping cost more than a small kernel's run (some 28 us each)."""
        if layout == self._mapped:
            return
        kept = set(layout) & set(self._mapped)
        for lo, size in self._mapped:
            if (lo, size) not in kept:
                self.uc.mem_unmap(lo, size)
        for lo, size in layout:
            if (lo, size) not in kept:
                self.uc.mem_map(lo, size, UC_PROT_READ | UC_PROT_WRITE)
        self._mapped = list(layout)
        # a new mapping is zeros: only a kept region's canaries are still as the last call's check read them
        self._intact = {b for b in self._intact if (b[0], b[2] - b[0]) in kept}

    # -- hooks --------------------------------------------------------------------------------------------
    def _configure(self, count, mnemonics, lockstep, trace, native_budget):
        config = (count, mnemonics, lockstep, trace, native_budget)
        if config == self._installed:
            return
        for h in self._hooks:
            self.uc.hook_del(h)
        self._hooks = []
        if count or mnemonics:
            self._hooks.append(self.uc.hook_add(UC_HOOK_BLOCK, self._on_block))
        if lockstep:
            if self._modeled_ops is None:
                self._modeled_ops = {}
                for base, code in self._code:
                    self._modeled_ops.update(self.cc.modelled_instructions(code, base))
            # a hook before each modeled instruction (compute the model's result) and before the next one (compare);
            # I8MM encodings are skipped: Unicorn cannot run them, the model is the only executor there is.
            step = self.cc.instruction_bytes
            points = sorted({a + d for a, op in self._modeled_ops.items() if not op.i8mm for d in (0, step)})
            for start, end in _runs(points, step):
                self._hooks.append(self.uc.hook_add(UC_HOOK_CODE, self._on_lockstep, None, start, end))
        if trace is not None:
            self._hooks.append(self.uc.hook_add(UC_HOOK_CODE, self._on_trace))
        # Unicorn compiles hook calls into its translated blocks and does not retranslate when hooks change.
        self.uc.ctl_flush_tb()
        self._installed = config

    def _on_block(self, uc, address, size, _):
        s = self._state
        s["blocks"][address, size] += 1
        s["total"] += size // self.cc.instruction_bytes
        if s["budget"] is not None and s["total"] > s["budget"]:
            s["error"] = self._budget_error(s["budget"], address)
            uc.emu_stop()

    def _on_trace(self, uc, address, size, _):
        self._state["trace"](address, self._disasm(address))

    def _on_lockstep(self, uc, address, size, _):
        s = self._state
        pending = s.get("pending")
        if pending is not None:
            s["pending"] = None
            self._check(pending)
            if s["error"] is not None:
                uc.emu_stop()
                return
        op = self._modeled_ops.get(address)
        if op is not None and not op.i8mm:
            read = lambda n: self.cc.read_vector(uc, n)
            s["pending"] = (address, op, op.inputs(read), op.execute(read))

    def _check(self, pending):
        address, op, inputs, expected = pending
        got = self.cc.read_vector(self.uc, op.rd)
        self._state["checked"] += 1
        if got != expected:
            out_t = np.dtype(self._result_dtype(op, inputs))
            uni, mod = np.frombuffer(got, out_t), np.frombuffer(expected, out_t)
            text = self._disasm(address)
            ins = "; ".join(f"v{o.reg}={x.tolist()}" for o, x in zip(op.operands, inputs))
            self._state["error"] = LockstepMismatch(
                f"lockstep: {text} at {address:#x} disagrees: inputs {ins}; Unicorn wrote {uni.tolist()}, "
                f"lowp's {op.mnemonic} model gives {mod.tolist()}",
                pc=address, instruction=text, inputs=inputs, unicorn=uni, model=mod)

    @staticmethod
    def _result_dtype(op, inputs):
        return op.model(*inputs, **dict(op.kwargs)).dtype

    def _on_interrupt(self, uc, intno, _):
        s = self._state
        pc = uc.reg_read(self.cc.pc)
        if intno == self.cc.UNDEFINED:
            word = int.from_bytes(uc.mem_read(pc, self.cc.instruction_bytes), "little")
            try:
                op = self.cc.fill_undefined(uc, pc, word)
            except Exception as e:                           # a model error must not escape into Unicorn
                s["error"] = EmulationFailed(f"modeling {self._disasm(pc)} at {pc:#x} failed: {e}")
                uc.emu_stop()
                return
            if op is not None:
                s["modeled"][op.mnemonic] += 1
                return
            text = self._disasm(pc)
            s["error"] = UndefinedInstruction(
                f"undefined instruction at {pc:#x}: encoding {word:#010x} ({text}); {self.cc.executor_name} does not "
                "implement it and lowp does not model it", pc=pc, encoding=word, instruction=text)
        else:
            kind, back = self.cc.TRAPS.get(intno, (f"exception {intno}", 0))
            at = pc - back                                       # a system call reports the return address
            text = self._disasm(at)
            s["error"] = Trap(f"the kernel executed {kind} at {at:#x} ({text}); there is no OS or debugger to take it",
                              pc=at, kind=kind, instruction=text)
        uc.emu_stop()

    def _on_memory(self, uc, access, address, size, value, _):
        s = self._state
        pc = uc.reg_read(self.cc.pc)
        kind = {UC_MEM_READ_UNMAPPED: "read", UC_MEM_WRITE_UNMAPPED: "write", UC_MEM_FETCH_UNMAPPED: "fetch",
                UC_MEM_READ_PROT: "read", UC_MEM_WRITE_PROT: "write", UC_MEM_FETCH_PROT: "fetch"}.get(access, "access")
        s["error"] = self._locate(kind, address, size, pc, protected=access in (UC_MEM_WRITE_PROT, UC_MEM_READ_PROT,
                                                                               UC_MEM_FETCH_PROT))
        return False

    def _locate(self, kind, address, size, pc, protected=False):
        text = self._disasm(pc) if kind != "fetch" else "(jump target)"
        where = f"by {text} at {pc:#x}"
        best = None
        for b in self._state["buffers"]:
            if b.lo - self.page <= address < b.hi + self.page:
                best = b
                break
        if best is None and STACK_TOP - STACK_SIZE - self.page <= address < STACK_TOP - STACK_SIZE:
            return OutOfBounds(f"stack overflow: {kind} of {size} bytes at {address:#x}, below the 1 MiB stack, {where}",
                               buffer="stack", access=kind, address=address, size=size, pc=pc, instruction=text)
        if best is None:
            what = "write to read-only memory" if protected else f"{kind} of unmapped memory"
            return OutOfBounds(f"{what}: {size} bytes at {address:#x}, in no buffer, {where}",
                               access=kind, address=address, size=size, pc=pc, instruction=text)
        b = best
        start = self._effective_address(pc) if kind != "fetch" else None
        # Unicorn reports the part of an access it split at a page boundary (8 bytes of a 16-byte `ldr q`):
        # the instruction says how many bytes the access really has.
        size = self.cc.access_size(self._insn(pc)) or size
        began = None
        if start is not None and 0 <= address - start < 256:
            # Unicorn splits an access that crosses into a guard page and may report any of its bytes (QEMU 5
            # stores cross-page bytes last to first): report the first byte outside the buffer instead.
            end = b.base + b.nbytes + b.after
            began = start - b.base
            address = end if b.base <= start < end <= address else start
        offset = address - b.base
        item = b.array.dtype.itemsize
        msg = describe_out_of_bounds(kind, size, offset, b.name, b.nbytes, b.array.dtype, b.array.shape, where,
                                     began, b.after)
        return OutOfBounds(msg, buffer=b.name, offset=offset, nbytes=b.nbytes, access=kind, address=address,
                           size=size, pc=pc, instruction=text, itemsize=item)

    def _insn(self, pc):
        try:
            return self.cc.instruction(bytes(self.uc.mem_read(pc, self.cc.instruction_bytes)), pc)
        except UcError:
            return None

    def _effective_address(self, pc):
        return self.cc.effective_address(self._insn(pc), self.uc)

    def _budget_error(self, budget, pc):
        text = self._disasm(pc)
        return BudgetExceeded(f"instruction budget of {budget:,} exhausted (a runaway loop?); stopped at {pc:#x}: {text}",
                              budget=budget, pc=pc, instruction=text)

    def _time_error(self, seconds, pc, counted):
        text = self._disasm(pc)
        ran = f" after {counted:,} instructions" if counted is not None else ""
        return BudgetExceeded(f"time budget of {seconds:g} s exhausted{ran} (a runaway loop?); stopped at {pc:#x}: "
                              f"{text}", budget=seconds, pc=pc, instruction=text)

    def _disasm(self, pc):
        try:
            word = bytes(self.uc.mem_read(pc, self.cc.instruction_bytes))
        except UcError:
            return "<unreadable>"
        return self.cc.disassemble(word, pc)

    # -- the call -----------------------------------------------------------------------------------------
    def call(self, symbol: str, *args, names=None, overread=None, seed=None, memory=(), align=None,
             **options) -> CallResult:
        """Call `symbol` with numpy arrays (passed as pointers to copies), Pointers (tables of addresses into the
        call's buffers) and ints (scalars); see the module doc. memory: (name, array) buffers placed like the
        arguments' but not passed (a Pointers table is how the kernel reaches them; CallResult lists them after the
        arguments' arrays). options override the Machine's: budget, count, mnemonics, lockstep, trace, seconds. overread: {buffer name: bytes}
        a kernel may read past that buffer's end (writes there are still caught, by a canary). seed: the CPU
        starts from the state it chooses (the other general and vector registers pseudo-random, the flags and the
        rest as created; one of REGISTER_STATES), not from the last call's, so a kernel that reads a register it
        never set behaves the same on replay. align: {buffer name: offset from a 64-byte boundary} its start is
        placed at (lowp.emulator.placement). Raises an EmulatorError (with
        .result) on a fault, a budget overrun, an undefined instruction or a lockstep mismatch."""
        unknown = set(options) - set(self.defaults)
        if unknown:
            raise TypeError(f"unknown option(s) {', '.join(sorted(unknown))}; expected {', '.join(self.defaults)}")
        opts = {**self.defaults, **options}
        count = bool(opts["count"] or opts["mnemonics"])
        entry = self.binary.symbol(symbol)
        names, arrays, array_names, scalars = split_arguments(args, names, memory)
        native_budget = bool(opts["budget"]) and not count
        self._configure(count, opts["mnemonics"], opts["lockstep"], opts["trace"], native_budget)
        buffers = self._place(arrays, array_names, overread or {}, pointer_tables(args, memory),
                              check_alignment(align))
        self._state = s = dict(buffers=buffers, blocks=Counter(), total=0, budget=opts["budget"] if count else None,
                               modeled=Counter(), error=None, pending=None, checked=0, trace=opts["trace"])
        values, it = [], iter(buffers)
        for v in scalars:
            values.append(next(it).base if v is None else v & MASK64)
        if seed is not None and len(values) <= self.cc.register_args:
            self._enter(seed, values)
        else:
            if seed is not None:
                self._seed_registers(seed, len(scalars))
            self.cc.pass_arguments(self.uc, values, STACK_TOP - 256, RETURN)
        error = None
        t0 = time.perf_counter()
        try:
            noted = _stopping_on_signals(self.uc)
            try:
                try:
                    self.uc.emu_start(entry, RETURN, timeout=int(opts["seconds"] * 1e6) if opts["seconds"] else 0,
                                      count=0 if count or not opts["budget"] else opts["budget"])
                finally:
                    _signals_noted(noted)
            except UcError as e:
                error = s["error"] or EmulationFailed(f"Unicorn stopped: {e} at pc {self.uc.reg_read(self.cc.pc):#x}")
            seconds = time.perf_counter() - t0
            error = error or s["error"]
            pc = self.uc.reg_read(self.cc.pc)
            if error is None and s["pending"] is not None:
                self._check(s["pending"])
                error = s["error"]
            if error is None and pc != RETURN and opts["seconds"] and self.uc.query(UC_QUERY_TIMEOUT):
                error = self._time_error(opts["seconds"], pc, s["total"] if count else None)
            if error is None and pc != RETURN:
                error = self._budget_error(opts["budget"], pc) if opts["budget"] else \
                    EmulationFailed(f"emulation stopped at {pc:#x} before the function returned")
            out = []
            for b in buffers:
                region = bytes(self.uc.mem_read(b.lo, b.hi - b.lo))     # one read: below, the buffer, its over-read
                start, end = b.base - b.lo, b.base - b.lo + b.nbytes
                below, data, over = region[:start], region[start:end], region[end:]
                out.append(np.frombuffer(data, b.array.dtype).reshape(b.array.shape).copy())
                if below == canaries(len(below)) and over == canaries(len(over)):
                    self._intact.add((b.lo, b.base, b.hi, b.nbytes))
                elif error is None:
                    error = canary_damage(b, below, over)
        finally:
            self._state = None
        instructions = s["total"] if count else None
        mnems = None
        if opts["mnemonics"]:
            mnems = Counter()
            for (address, size), n in s["blocks"].items():
                for m in self._block_mnemonics(address, size):
                    mnems[m] += n
            mnems = dict(mnems.most_common())
        result = CallResult(out, array_names, ret=_signed(self.uc.reg_read(self.cc.result)),
                            instructions=instructions, modeled=dict(s["modeled"]), mnemonics=mnems,
                            lockstep_checked=s["checked"] if opts["lockstep"] else None, seconds=seconds, fault=error)
        if error is not None:
            error.result = result
            raise error
        return result

    def call_many(self, symbol: str, calls, *, names=None, overread=None, seeds=None, **options) -> list:
        """call(symbol, *args, names=, overread=, seed=, **options) for each `args` of `calls` (and seed of
        `seeds`), in order: a CallResult per call, or the EmulatorError call() raised for it (returned, not
        raised). Nothing is rebuilt between the calls: the CPU, the loaded program and its translated code, the
        hooks and, while the array sizes repeat (a batch of one shape), the buffers' mappings stay; each call
        writes every byte of its mappings (poison, data, canaries), restores its seed's saved registers, passes
        its arguments and runs, exactly as call() does."""
        return call_each(self, symbol, calls, names=names, overread=overread, seeds=seeds, **options)

    def _enter(self, seed: int, values: list[int]) -> None:
        """The registers a call starts with: its seed's (_seed_registers) with its arguments passed (all in
        registers), restored from a context saved the first time (a batch's calls share their arguments: one
        restore instead of a restore and ten register writes). At most ENTERED contexts are kept."""
        key = (seed % REGISTER_STATES, tuple(values))
        ctx = self._entered.get(key)
        if ctx is None:
            self._seed_registers(seed, len(values))
            self.cc.pass_arguments(self.uc, values, STACK_TOP - 256, RETURN)
            if len(self._entered) >= ENTERED:
                self._entered.clear()
            ctx = self._entered[key] = self.uc.context_save()
        else:
            self.uc.context_restore(ctx)

    def _seed_registers(self, seed: int, nargs: int) -> None:
        """The CPU as created, with the registers past the arguments pseudo-random (the convention's seeded():
        X8 .. X28 and V0 .. V31 on AArch64): one of REGISTER_STATES states, chosen by `seed`, each saved as a
        context the first time. Restoring one is a single call into Unicorn; writing 53 registers costs 200 times
        that, more than a small kernel's run."""
        key = (seed % REGISTER_STATES, min(nargs, self.cc.register_args))
        ctx = self._seeded.get(key)
        if ctx is None:
            ctx = self._seeded[key] = _SEEDED.get((self.cc, key))
        if ctx is None:
            self.uc.context_restore(self._pristine)
            self.uc.reg_write_batch(self.cc.seeded(seed, nargs))
            if len(_SEEDED) >= SEEDED_KEPT:         # conventions made afresh (a test's) would otherwise pile up
                _SEEDED.clear()
            ctx = self._seeded[key] = _SEEDED[self.cc, key] = _detached(self.uc.context_save())
        self.uc.context_restore(ctx)

    def _block_mnemonics(self, address, size):
        key = (address, size)
        hit = self._block_cache.get(key)
        if hit is None:
            code = bytes(self.uc.mem_read(address, size))
            hit = self._block_cache[key] = self.cc.mnemonics(code, address)
        return hit


# A kernel's checks each run a fresh machine, and each wrote its seeded states anew (53 registers, some 0.2 ms a state,
# up to 64 states a machine). A state is the convention's CPU as created (the same on every machine of it: memory is
# not in a context) with the seed's registers: kept per process, by convention and state, as the binding's pickled
# form of a context (bytes it owns, not freed with the machine that saved it), which any machine of the convention
# restores.
_SEEDED: dict = {}
SEEDED_KEPT = 2048      # 12 KiB each: a convention's 64 states times the argument counts, several times over


def _detached(ctx):
    """A copy of a saved context that no Unicorn instance owns (UcContext's pickled form)."""
    return pickle.loads(pickle.dumps(ctx))


class GuestProcess:
    """What a machine whose guest is a process of its own (qemu-user, the Bochs guest) shares: a context manager
    and a finalizer that end it with close(), only in the process that started it (`_owner`: a forked copy of the
    machine must not end its parent's guest)."""
    _owner: int

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if self._owner == os.getpid():
                self.close()
        except Exception:
            pass


def call_each(machine, symbol: str, calls, *, seeds=None, **options) -> list:
    """machine.call(symbol, *args, seed=seed, **options) for each call, in order: its CallResult, or the
    EmulatorError it raised (a machine's call_many where a batch has nothing to share but the loop). After a call
    that overran its budget the rest are not run (stopped_after)."""
    seeds = list(seeds) if seeds is not None else [None] * len(calls)
    if len(seeds) != len(calls):
        raise ValueError(f"seeds: {len(seeds)} seeds for {len(calls)} calls")
    outcomes = []
    for args, seed in zip(calls, seeds):
        try:
            outcomes.append(machine.call(symbol, *args, seed=seed, **options))
        except EmulatorError as e:
            outcomes.append(e)
            if isinstance(e, BudgetExceeded):
                return stopped_after(outcomes, len(calls))
    return outcomes


@dataclass(frozen=True)
class Pointers:
    """An array argument of pointers into the call's own buffers (an indirection buffer: XNNPACK's IGEMM takes
    one), of the machine's pointer size (8 bytes; 4 on the 32-bit qemu guests and wasm32), given as (buffer name,
    byte offset) per entry: the name of an array argument or of a `memory` buffer, the offset from that buffer's
    start (negative or past its end too: only the address is computed). The machine places it like any buffer and
    writes the addresses once every buffer has its place: where a buffer lands is the machine's business
    (Unicorn's and Bochs's layouts, qemu's mmap in the guest, wasm32's linear memory)."""
    targets: tuple[tuple[str, int], ...]

    def placeholder(self) -> np.ndarray:
        return np.zeros(len(self.targets), np.uint64)


def split_arguments(args, names=None, memory=()) -> tuple[list, list, list, list]:
    """A call's arguments as every machine takes them: (names, the arrays, their names, one value per argument:
    None for an array (passed as a pointer), a 64-bit two's-complement int for an int). A Pointers argument is an
    array of uint64 (its addresses are written by relocate()); the `memory` buffers ((name, array): placed, not
    passed) follow the arguments' arrays. ValueError for anything else, or a count of names that does not
    match."""
    names = list(names) if names is not None else [f"arg{i}" for i in range(len(args))]
    if len(names) != len(args):
        raise ValueError(f"names: {len(names)} names for {len(args)} arguments")
    arrays, array_names, values = [], [], []
    for name, a in zip(names, args):
        if isinstance(a, Pointers):
            a = a.placeholder()
        if isinstance(a, np.ndarray) and a.ndim > 0:
            arrays.append(a)
            array_names.append(name)
            values.append(None)
        elif isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)):
            if not -(1 << 63) <= int(a) <= MASK64:
                raise ValueError(f"argument {name!r}: {a} does not fit a 64-bit register")
            values.append(int(a) & MASK64)
        else:
            raise ValueError(f"argument {name!r}: expected a numpy array (passed as a pointer) or an int, "
                             f"got {type(a).__name__}")
    for name, a in memory:
        if not isinstance(a, np.ndarray) or a.ndim == 0:
            raise ValueError(f"memory buffer {name!r}: expected a numpy array, got {type(a).__name__}")
        arrays.append(a)
        array_names.append(name)
    return names, arrays, array_names, values


def pointer_tables(args, memory=()) -> dict[int, Pointers]:
    """{position among the call's arrays (split_arguments' order): its Pointers} for every Pointers argument."""
    tables, position = {}, 0
    for a in args:
        if isinstance(a, Pointers):
            tables[position] = a
        if isinstance(a, (np.ndarray, Pointers)) and getattr(a, "ndim", 1) > 0:
            position += 1
    return tables


def pointer_targets(table: Pointers, array_names: list[str]) -> list[tuple[int, int]]:
    """(array position, offset) of each entry; ValueError naming an entry whose buffer is not one of the call's
    arrays, or a name two arrays share (the address would be ambiguous)."""
    out = []
    for name, offset in table.targets:
        where = [i for i, n in enumerate(array_names) if n == name]
        if len(where) != 1:
            raise ValueError(f"pointer table entry into {name!r}: "
                             + ("no array of the call has that name" if not where else
                                f"{len(where)} arrays of the call have that name") +
                             f" (the call's arrays: {', '.join(array_names)})")
        out.append((where[0], int(offset)))
    return out


def relocate(buffers, tables: dict[int, Pointers]) -> None:
    """Write the addresses into the placed pointer tables: each _Buffer of `buffers` (in array order) whose
    position has a table gets, as its array, base of the target + offset per entry (mod 2^64)."""
    names = [b.name for b in buffers]
    for position, table in tables.items():
        words = [(buffers[i].base + offset) & MASK64 for i, offset in pointer_targets(table, names)]
        buffers[position].array = np.array(words, np.uint64)


def canary_damage(b, below: bytes, over: bytes) -> OutOfBounds | None:
    """A write found after the call by the canaries of buffer `b` (a _Buffer): in its allowed over-read (`over`,
    the bytes past its end) or in the slack below its start (`below`), else None."""
    if b.after:
        bad = _first_damaged(over)
        if bad is not None:
            return OutOfBounds(
                f"out-of-bounds write past the end of buffer {b.name!r} (into its allowed over-read): byte offset "
                f"{b.nbytes + bad} was modified (found after the call by a canary)", buffer=b.name,
                offset=b.nbytes + bad, nbytes=b.nbytes, access="write", address=b.base + b.nbytes + bad, size=1,
                itemsize=b.array.dtype.itemsize)
    if b.base > b.lo:
        bad = _first_damaged(below)
        if bad is not None:
            offset = b.lo + bad - b.base
            return OutOfBounds(
                f"out-of-bounds write before the start of buffer {b.name!r}: byte offset {offset} was modified "
                "(found after the call: writes below a buffer are caught by a canary, not at the instruction)",
                buffer=b.name, offset=offset, nbytes=b.nbytes, access="write", address=b.lo + bad, size=1,
                itemsize=b.array.dtype.itemsize)
    return None


def _first_damaged(canary: bytes) -> int | None:
    """The index of the first byte of a canary area that is no longer CANARY (a write landed there), or None."""
    canary = bytes(canary)
    if canary == canaries(len(canary)):     # one memcmp; the scan below is some 30 times slower (a page: 9 us)
        return None
    intact = len(canary) - len(canary.lstrip(bytes([CANARY])))
    return None if intact == len(canary) else intact


def _runs(points, step=4):
    """Contiguous runs of instruction addresses (`step` bytes apart) as inclusive (start, end) ranges."""
    runs = []
    for p in points:
        if runs and p == runs[-1][1] + step:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return [tuple(r) for r in runs]


def _signed(x):
    x &= MASK64
    return x - (1 << 64) if x >> 63 else x
