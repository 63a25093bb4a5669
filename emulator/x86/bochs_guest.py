"""The Bochs guest: one process (`python -m lowp.emulator.x86.bochs_guest`) that owns one Bochs CPU and serves the
calls of one lowp.emulator.x86.bochs.BochsMachine over a pipe. Only the host side (bochs.py) starts it.

Why a process of its own: bochscpu-python allows one Session per process (a second crashes in free()), crashes
at interpreter teardown unless the process leaves with os._exit, and its 0.4.0 wheel needs two glibc 2.38 symbols
that Debian 12 lacks (the host hands this process a shim, glibc_compat.c, to load first). A Bochs panic or a hang
then costs this process, never the caller's.

The guest machine (64-bit long mode, CPL 0, identity-mapped: a virtual address is its physical address):
  * physical memory is one anonymous mapping of this process (`Memory`): each 4 KiB page is handed to Bochs with
    page_insert, so a buffer is written and read with one slice, not page by page through the binding;
  * lowp writes the 4-level page tables itself (`Memory.map`): code read-only and executable, data read-write and
    no-execute, the guard pages simply absent. Bochs's own PageMapLevel4Table is not used: its tables die with
    the Python object, and a layout that changes per call would need a new one each time;
  * a GDT (64-bit code, data), an IDT whose 32 gates all go, on IST 1 of a TSS (a stack of their own, so a stack
    overflow is still reported), to a HLT of their own: an exception is delivered as on hardware, the CPU pushes
    the faulting instruction's RIP and the error code, and the HLT stops the run. This is how lowp reads the
    faulting RIP: the RIP bochscpu reports to its exception callback is already the next instruction's;
  * the kernel returns to a page holding HLT; FS points at a zeroed page (a stack protector's canary at %fs:0x28).

Budgets and counts. A call that asks for no counts runs with no per-instruction or per-branch callback at all,
at Bochs's full speed; its budget is time, kept by a thread of bochs_watchdog.c that stops the CPU (bochscpu's
kill bit) at the deadline, RIP then at the instruction it stopped before. A call that asks for counts runs with
Python hooks on taken conditional branches and on unconditional near branches (jmp, call, ret) only: between two
such events the CPU ran straight-line code from the last target to this branch, whose instructions are decoded
once (iced-x86) and cached per (start, branch): exact instruction counts, per-mnemonic counts and an exact
instruction budget (checked at every taken branch: a straight-line stretch cannot loop), for one small callback
per taken branch (about 3x slower on a tight loop).

AMX: no Bochs CPU model has AMX. An AMX instruction raises #UD; if the host enabled models, this process decodes
it (iced-x86), runs it on lowp's AMX unit (lowp.emulator.x86.amx: tiles and palette here, TDPB*D on
lowp.isa_models.x86) and resumes after it.

Protocol: pickled tuples over two pipes, one request, one reply (see serve()).
"""
from __future__ import annotations

import ctypes
import mmap
from array import array
import os
import pickle
import struct
import sys
import time
from collections import Counter

PAGE = 4096
PHYS_BASE = 0x0010_0000           # physical address of Memory's first page
SYSTEM = 0x6000_0000              # GDT, IDT, TSS, exception handlers (virtual = physical)
IST_STACK = 0x6010_0000           # 64 KiB exception stack, its top at IST_STACK + IST_BYTES
IST_BYTES = 0x1_0000
TLS = 0x6100_0000                 # FS base
RETURN = 0x7FF0_0000              # the return address: a page of HLT
HANDLER_STRIDE = 16
# How a handler (and the return page) stops the run: WBINVD, which changes nothing here (Bochs has no caches) and
# which bochscpu reports to the `cache_cntrl` callback (that stops the run, RIP past it), then a JMP to itself
# should it not. A kernel cannot execute WBINVD itself (it is privileged), so no kernel instruction stops a run.
# Not HLT: after a run ended in HLT, Bochs hangs delivering a later instruction-fetch fault; not OUT: bochscpu has
# no devices; not a prefetch: kernels prefetch (measured with bochscpu-python 0.4.0).
STOP = b"\x0f\x09\xeb\xfe"
STOP_AT = 2                       # RIP after the stop: past the WBINVD
P, RW, NX = 1, 2, 1 << 63
ERROR_CODE_VECTORS = frozenset({8, 10, 11, 12, 13, 14, 17, 21, 29, 30})
GPRS = ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13", "r14",
        "r15")
ARGUMENT_REGISTERS = ("rdi", "rsi", "rdx", "rcx", "r8", "r9")    # System V AMD64 ABI, integer class
MXCSR_DEFAULT, FPCW_DEFAULT = 0x1F80, 0x037F
XCR0 = 0xE7                       # x87, SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM
ZERO_ZMM = [[0] * 8] * 32


class Memory:
    """Guest physical memory: the pages of a memfd the host shares (it writes a call's buffers there and reads
    them back, without copies through the pipe), each inserted into Bochs on first use, and the page tables lowp
    writes into it. The first PERMANENT pages hold what lives as long as the guest (page tables, system tables,
    the program, the stack); the pages after them hold one call's buffers, in the order of the call's regions, and
    are reused by the next call's layout (the host computes the same offsets: bochs.py)."""

    PERMANENT = 1 << 16           # pages (256 MiB of address space, committed only as used)

    def __init__(self, bochs_memory, fd: int, size: int):
        self.bochs = bochs_memory
        self.map_ = mmap.mmap(fd, size, flags=mmap.MAP_SHARED)
        self.view = memoryview(self.map_)
        self.host = ctypes.addressof(ctypes.c_char.from_buffer(self.map_))
        self.pages = size // PAGE
        self.next_permanent, self.next = 0, self.PERMANENT     # the next free page of each region
        self.inserted = {True: 0, False: self.PERMANENT}        # each region's pages handed to Bochs so far
        self.ranges = []              # (virtual, pages, physical) of every mapping
        self._last = (0, 0, 0)        # the range translate() found last
        self.per_call = []            # the current call's buffer mappings (virtual, pages)
        self.per_call_layout = None   # the (virtual, bytes) regions they were made for
        self.pml4 = self.allocate(1, permanent=True)

    def allocate(self, pages: int, permanent: bool) -> int:
        """`pages` new physical pages, contiguous; the physical address of the first. A permanent page is zero (a
        fresh page of the memfd: its memory is committed only when written, so a large .bss or heap costs
        nothing until used); a call's page may hold an earlier call's bytes and is written whole by the host."""
        start = self.next_permanent if permanent else self.next
        end = start + pages
        if end > (self.PERMANENT if permanent else self.pages):
            raise MemoryError(f"the guest's {'permanent ' if permanent else ''}physical memory is used up")
        if permanent:                 # never used before: the memfd's pages are zero until written
            self.next_permanent = end
        else:
            self.next = end
        for index in range(max(start, self.inserted[permanent]), end):
            self.bochs.page_insert(PHYS_BASE + index * PAGE, self.host + index * PAGE)
        self.inserted[permanent] = max(self.inserted[permanent], end)
        return PHYS_BASE + start * PAGE

    def offset(self, physical: int) -> int:
        return physical - PHYS_BASE

    def entry(self, table: int, index: int) -> int:
        o = self.offset(table) + 8 * index
        return int.from_bytes(self.view[o:o + 8], "little")

    def set_entry(self, table: int, index: int, value: int) -> None:
        o = self.offset(table) + 8 * index
        self.view[o:o + 8] = value.to_bytes(8, "little")

    def _leaf_table(self, virtual: int) -> int:
        table = self.pml4
        for shift in (39, 30, 21):
            index = virtual >> shift & 511
            e = self.entry(table, index)
            if not e & P:
                child = self.allocate(1, permanent=True)
                self.set_entry(table, index, child | P | RW)     # the leaf decides: upper levels allow all
                e = child | P | RW
            table = e & 0x000F_FFFF_FFFF_F000
        return table

    def _set_entries(self, virtual: int, pages: int, first: int | None, flags: int) -> None:
        """Leaf entries of `pages` pages from `virtual`: first + i * PAGE | flags, or 0 (first None), written a
        leaf table's run at a time."""
        done = 0
        while done < pages:
            va = virtual + done * PAGE
            index = va >> 12 & 511
            n = min(pages - done, 512 - index)
            if first is None:
                values = bytes(8 * n)
            else:
                base = (first + done * PAGE) | flags
                values = array("Q", range(base, base + n * PAGE, PAGE)).tobytes()
            o = self.offset(self._leaf_table(va)) + 8 * index
            self.view[o:o + 8 * n] = values
            done += n

    def map(self, virtual: int, pages: int, *, writable: bool, executable: bool, permanent: bool = True) -> None:
        """Map `pages` new physical pages at `virtual` (a call's buffers: permanent=False)."""
        first = self.allocate(pages, permanent)
        self._set_entries(virtual, pages, first, P | (RW if writable else 0) | (0 if executable else NX))
        self.ranges.append((virtual, pages, first))
        if not permanent:
            self.per_call.append((virtual, pages))

    def unmap_buffers(self) -> None:
        """Forget the last call's buffer mappings: their entries cleared, their physical pages free again."""
        for virtual, pages in self.per_call:
            self._set_entries(virtual, pages, None, 0)
        calls = set(self.per_call)
        self.ranges = [r for r in self.ranges if r[:2] not in calls]
        self._last = (0, 0, 0)
        self.per_call = []
        self.next = self.PERMANENT

    def translate(self, virtual: int) -> tuple[int, int] | None:
        """(physical address, bytes mapped from there on) of a virtual address, or None if it is not mapped. The
        mapping found last is asked first: an AMX tile's rows are read one by one from one buffer."""
        va, pages, physical = self._last
        if not va <= virtual < va + pages * PAGE:
            for va, pages, physical in self.ranges:
                if va <= virtual < va + pages * PAGE:
                    self._last = va, pages, physical
                    break
            else:
                return None
        return physical + virtual - va, va + pages * PAGE - virtual

    def write(self, virtual: int, data: bytes) -> None:
        """Write `data` at mapped virtual addresses (ValueError where nothing is mapped)."""
        data = memoryview(data)
        while data:
            where = self.translate(virtual)
            if where is None:
                raise ValueError(f"guest address {virtual:#x} is not mapped")
            o, n = self.offset(where[0]), min(len(data), where[1])
            self.view[o:o + n] = data[:n]
            virtual, data = virtual + n, data[n:]

    def read(self, virtual: int, n: int) -> bytes:
        out = []
        while n > 0:
            where = self.translate(virtual)
            if where is None:
                raise ValueError(f"guest address {virtual:#x} is not mapped")
            o, k = self.offset(where[0]), min(n, where[1])
            out.append(bytes(self.view[o:o + k]))
            virtual, n = virtual + k, n - k
        return b"".join(out)


def _descriptor_tables(memory: Memory) -> None:
    """GDT (null, 64-bit code 0x08, data 0x10, TSS 0x18), TSS with IST1, IDT of 32 interrupt gates on IST 1, and
    the handlers: HLT each, 16 bytes apart, so the stopped RIP tells the vector."""
    memory.map(SYSTEM, 4, writable=False, executable=True)
    memory.map(IST_STACK, IST_BYTES // PAGE, writable=True, executable=False)
    memory.map(TLS, 1, writable=True, executable=False)
    tss = SYSTEM + 2 * PAGE
    # accessed bits preset (type 0x9B, 0x93): the CPU never writes these read-only pages
    gdt = [0, 0x00AF9B000000FFFF, 0x00CF93000000FFFF]
    limit = 103
    gdt += [(limit & 0xFFFF) | (tss & 0xFFFFFF) << 16 | 0x89 << 40 | (tss >> 24 & 0xFF) << 56, tss >> 32]
    memory.write(SYSTEM, struct.pack(f"<{len(gdt)}Q", *gdt))
    image = bytearray(104)
    struct.pack_into("<Q", image, 36, IST_STACK + IST_BYTES)        # IST1 (64-bit TSS: Intel SDM Vol. 3A 8.7)
    struct.pack_into("<H", image, 102, 104)                          # I/O map base: none
    memory.write(tss, bytes(image))
    idt = b""
    handlers = SYSTEM + 3 * PAGE
    for vector in range(32):
        h = handlers + HANDLER_STRIDE * vector
        low = (h & 0xFFFF) | 0x08 << 16 | 1 << 32 | 0x8E << 40 | (h >> 16 & 0xFFFF) << 48
        idt += struct.pack("<QQ", low, h >> 32)
    memory.write(SYSTEM + PAGE, idt)
    memory.write(handlers, (STOP + b"\x90" * (HANDLER_STRIDE - len(STOP))) * 32)


class Guest:
    """The Bochs CPU, its memory and the loaded program."""

    def __init__(self, bochscpu, model: str, segments, memory_fd: int, memory_bytes: int, amx: bool,
                 watchdog: str):
        self.bx = bochscpu
        self.watchdog = ctypes.CDLL(watchdog)
        kill = ctypes.cast(ctypes.CDLL(bochscpu._bochscpu.__file__).cpu_set_killbit, ctypes.c_void_p)
        self.watchdog.lowp_watchdog_start.argtypes = [ctypes.c_void_p]
        if self.watchdog.lowp_watchdog_start(kill):
            raise RuntimeError("the watchdog thread (bochs_watchdog.c) could not start")
        self.model = model
        self.session = bochscpu.Session()
        self.session.missing_page_handler = self._missing_page
        self.memory = Memory(bochscpu.memory, memory_fd, memory_bytes)
        _descriptor_tables(self.memory)
        for vaddr, data, memsz, flags in segments:
            lo, hi = vaddr & ~(PAGE - 1), -(-(vaddr + memsz) // PAGE) * PAGE
            self.memory.map(lo, (hi - lo) // PAGE, writable=bool(flags & 2), executable=bool(flags & 1))
            self.memory.write(vaddr, data)
        self.memory.map(RETURN, 1, writable=False, executable=True)
        self.memory.write(RETURN, STOP * (PAGE // len(STOP)))
        self.stack_top = self.stack_bytes = None
        self.amx_enabled, self._amx = amx, None
        self.segments = {}            # (start, branch) -> instructions in [start, branch]
        self.code = [(v, d) for v, d, _, f in segments if f & 1]
        self._addresses = {}          # (start, branch) -> the instruction addresses between
        self.zmm_seed = "unset"       # the seed whose vector registers `base` holds
        self.base = self._base_state()

    @property
    def amx(self):
        """lowp's AMX unit, made at the first AMX instruction: it imports numpy, which was most of a guest's start
        (0.1-0.2 s of each of the several guests an x86 kernel's checks start)."""
        if self._amx is None and self.amx_enabled:
            from lowp.emulator.x86.amx import AmxUnit
            self._amx = AmxUnit()
        return self._amx

    def _missing_page(self, gpa):          # every page lowp maps is backed: this is lowp's bug, not the kernel's
        raise RuntimeError(f"Bochs asked for physical page {gpa:#x}, which lowp never mapped")

    def map_stack(self, top: int, size: int) -> None:
        self.memory.map(top - size, size // PAGE, writable=True, executable=False)
        self.stack_top, self.stack_bytes = top, size

    def _base_state(self):
        bx = self.bx
        state = bx.State()
        bx.cpu.set_long_mode(state)
        cr4 = bx.cpu.ControlRegister(0)
        cr4.PAE = cr4.OSFXSR = cr4.OSXMMEXCPT = cr4.OSXSAVE = True
        state.cr4 = int(cr4)
        state.cr3 = self.memory.pml4
        state.xcr0 = XCR0
        state.mxcsr = MXCSR_DEFAULT
        state.mxcsr_mask = 0xFFFF
        state.fpcw = FPCW_DEFAULT
        state.rflags = 0x2
        code = self._segment(0x08, 0x209B)
        data = self._segment(0x10, 0xC093)
        state.cs = code
        state.ss = state.ds = state.es = state.gs = data
        fs = self._segment(0x10, 0xC093)
        fs.base = TLS
        state.fs = fs
        tr = self._segment(0x18, 0x008B)
        tr.base, tr.limit = SYSTEM + 2 * PAGE, 103
        state.tr = tr
        gdtr = bx.GlobalSegment()
        gdtr.base, gdtr.limit = SYSTEM, 5 * 8 - 1
        state.gdtr = gdtr
        idtr = bx.GlobalSegment()
        idtr.base, idtr.limit = SYSTEM + PAGE, 32 * 16 - 1
        state.idtr = idtr
        return state

    def _segment(self, selector: int, attr: int):
        s = self.bx.Segment()
        s.present, s.selector, s.base, s.limit, s.attr = True, selector, 0, 0xFFFF_FFFF, attr
        return s

    # -- counting -----------------------------------------------------------------------------------------
    def _stretch(self, start: int, branch: int) -> list[int]:
        """The address of every instruction from `start` straight to the branch at `branch` (inclusive), decoded
        with iced-x86 (it knows VEX AVX-VNNI, AVX-VNNI-INT8 and AMX, which capstone 5 does not)."""
        if branch < start:
            return [branch]
        try:
            code = self.memory.read(start, branch - start + 15)
        except ValueError:
            return [branch]
        import iced_x86
        out = []
        for insn in iced_x86.Decoder(64, code, ip=start):
            out.append(insn.ip)
            if insn.ip >= branch or insn.is_invalid:
                break
        if out[-1] != branch:         # undecodable bytes: count the branch itself at least
            out.append(branch)
        return out

    def instructions(self, start: int, branch: int) -> int:
        """Instructions executed from `start` straight to the branch at `branch` (inclusive), decoded once."""
        key = (start, branch)
        n = self.segments.get(key)
        if n is None:
            n = self.segments[key] = len(self.addresses(start, branch))
        return n

    def addresses(self, start: int, branch: int) -> list[int]:
        key = (start, branch)
        hit = self._addresses.get(key)
        if hit is None:
            hit = self._addresses[key] = self._stretch(start, branch)
        return hit

    # -- a call -------------------------------------------------------------------------------------------
    def call(self, entry: int, args, regions, seed, budget, seconds, mnemonics, count, stack_args) -> dict:
        """regions: (virtual address, bytes) of each buffer mapping, whose bytes the host has written at the next
        physical pages of the per-call region, in this order. seed: None (the free registers zero) or the
        register state to start from (seeded_registers)."""
        if list(regions) != self.memory.per_call_layout:      # the same layout: the same pages, still mapped
            self.memory.unmap_buffers()
            for lo, size in regions:
                self.memory.map(lo, size // PAGE, writable=True, executable=False, permanent=False)
            self.memory.per_call_layout = list(regions)
        state = self.base
        gprs, zmm = seeded_registers(seed, len(args) + len(stack_args))
        for name, value in gprs.items():
            setattr(state, name, value)
        if self.zmm_seed != seed:                 # 32 registers of 8 words: set only when the seed changes
            regs = state.zmm
            for i, words in enumerate(zmm):
                regs[i].q = list(words)
            state.zmm = regs
            self.zmm_seed = seed
        for name, value in zip(ARGUMENT_REGISTERS, args):
            setattr(state, name, value)
        rsp = self.stack_top - 264          # the ABI's alignment at entry: rsp + 8 a multiple of 16
        frame = struct.pack("<Q", RETURN) + b"".join(struct.pack("<Q", v) for v in stack_args)
        self.memory.write(rsp, frame)
        state.rsp = rsp
        state.rip = entry
        state.rflags = 0x2
        self.session.cpu.state = state
        if self._amx is not None:
            self._amx.reset()
        counting = bool(count or mnemonics)
        run = Run(self, entry, budget if counting else None, mnemonics, counting)
        t0 = time.perf_counter()
        if seconds and not counting:
            self.watchdog.lowp_watchdog_arm(ctypes.c_double(seconds))
        try:
            outcome = run.go()
        finally:
            timed_out = bool(self.watchdog.lowp_watchdog_disarm()) if seconds and not counting else False
        if timed_out and outcome["status"] != "return":
            outcome = {"status": "timeout", "rip": self.session.cpu.rip, "regs": _gprs(self.session.cpu)}
        elapsed = time.perf_counter() - t0
        reply = {"seconds": elapsed, "instructions": run.total if counting else None,
                 "modeled": dict(run.modeled), "budget": budget, "time_budget": seconds, **outcome}
        if mnemonics:
            reply["addresses"] = run.address_counts()
        return reply


class Run:
    """One call's execution: the hooks, the budget, the stops (return, exception, budget, AMX trap)."""

    def __init__(self, guest: Guest, entry: int, budget: int | None, mnemonics: bool, counting: bool):
        self.guest, self.budget, self.mnemonics, self.counting = guest, budget, mnemonics, counting
        self.start = entry            # where the current straight-line stretch began
        self.total = 0
        self.stretches = Counter() if mnemonics else None
        self.modeled = Counter()
        self.over_budget = False
        self.exceptions = []          # what bochscpu's exception callback saw (vector, error code)
        bx = guest.bx
        hook = bx.Hook()
        if counting:                  # no budget and no counts: no callback but at the stops, full speed
            hook.cnear_branch_taken = self._branch
            hook.ucnear_branch = self._unconditional
        hook.hlt = self._hlt
        hook.cache_cntrl = self._stop
        hook.exception = self._exception
        self.hooks = [hook]

    def _branch(self, session, cpu, branch, target):
        self._stretch(session, branch, target)

    def _unconditional(self, session, cpu, what, branch, target):
        self._stretch(session, branch, target)

    def _stretch(self, session, branch, target):
        key = (self.start, branch)
        self.total += self.guest.instructions(self.start, branch)
        if self.stretches is not None:
            self.stretches[key] += 1
        self.start = target
        if self.budget is not None and self.total > self.budget:
            self.over_budget = True
            session.stop()

    def _hlt(self, session, cpu):
        session.stop()

    def _stop(self, session, cpu, what):
        session.stop()

    def _exception(self, session, cpu, vector, error):
        self.exceptions.append((vector, error))
        if len(self.exceptions) > 2:          # a fault while delivering a fault (#DF, then worse): stop
            session.stop()

    def go(self) -> dict:
        g = self.guest
        handlers = SYSTEM + 3 * PAGE
        while True:
            g.session.run(self.hooks)
            cpu = g.session.cpu
            rip = cpu.rip
            if self.over_budget:
                return {"status": "budget", "rip": rip, "regs": _gprs(cpu)}
            if rip == RETURN + STOP_AT:
                return {"status": "return", "rax": cpu.rax}
            if handlers < rip <= handlers + HANDLER_STRIDE * 32:
                vector = (rip - STOP_AT - handlers) // HANDLER_STRIDE
                modeled = self._model(self._ud_frame()) if vector == 6 and g.amx_enabled else None
                if modeled is True:
                    self.exceptions.clear()         # delivered and handled: only nested faults count
                    continue
                fault = self._fault(vector)
                if modeled:
                    fault.update(modeled)
                return {"status": "fault", **fault}
            return {"status": "stopped", "rip": rip, "regs": _gprs(cpu), "exceptions": self.exceptions}

    def _fault(self, vector: int) -> dict:
        """The exception frame the CPU pushed on IST 1: the faulting RIP, the error code, the interrupted RSP."""
        g = self.guest
        cpu = g.session.cpu
        has_code = vector in ERROR_CODE_VECTORS
        n = 6 if has_code else 5
        frame = struct.unpack(f"<{n}Q", g.memory.read(IST_STACK + IST_BYTES - 8 * n, 8 * n))
        code, (rip, _cs, rflags, rsp, _ss) = (frame[0], frame[1:]) if has_code else (None, frame)
        regs = _gprs(cpu)
        regs["rsp"] = rsp
        return {"vector": vector, "error_code": code, "rip": rip, "rflags": rflags, "cr2": cpu.cr2, "regs": regs,
                "start": self.start}

    def _ud_frame(self) -> dict:
        """What an AMX instruction's #UD needs of the exception frame: the faulting RIP, RFLAGS and the interrupted
        registers (RSP from the frame, the rest read from the CPU only if the instruction addresses memory by them:
        _fault reads all 16 for a fault that is reported)."""
        g = self.guest
        rip, _cs, rflags, rsp, _ss = struct.unpack("<5Q", g.memory.read(IST_STACK + IST_BYTES - 40, 40))
        return {"rip": rip, "rflags": rflags, "regs": _Registers(g.session.cpu, rsp)}

    def _model(self, fault: dict):
        """An AMX instruction Bochs lacks: run it on lowp's AMX unit and resume after it (True); not one (None: the
        #UD stands); or the fault the instruction raises on AMX hardware (the fields that replace the #UD's). The
        stretch up to it counts as executed, it too."""
        from lowp.emulator.x86.amx import AmxFault
        g = self.guest
        rip = fault["rip"]
        try:
            code = g.memory.read(rip, 15)
        except ValueError:
            return None
        try:
            done = g.amx.execute(code, rip, fault["regs"], g.memory.read, g.memory.write)
        except AmxFault as e:
            out = {"vector": e.vector, "modeled_fault": str(e)}
            if e.vector == 14:
                out.update(cr2=e.address, error_code=2 if e.write else 0, access_start=e.start,
                           access_size=e.size)
            return out
        if done is None:
            return None
        mnemonic, length = done
        self.modeled[mnemonic] += 1
        self.total += g.instructions(self.start, rip) if rip > self.start else 1
        if self.stretches is not None:
            self.stretches[(self.start, rip)] += 1
        # Delivering the #UD changed only RSP (the handler's stack), RFLAGS and RIP: the handler touches no other
        # register, and an AMX instruction writes none. Three registers, not the whole state (its 32 ZMMs too).
        cpu = g.session.cpu
        cpu.rsp = fault["regs"]["rsp"]
        cpu.rflags = fault["rflags"]
        cpu.rip = rip + length
        self.start = rip + length
        return True

    def address_counts(self) -> dict[int, int]:
        counts = Counter()
        for (start, branch), n in self.stretches.items():
            for address in self.guest.addresses(start, branch):
                counts[address] += n
        return dict(counts)


REGISTER_STATES = 64             # the register states a seed chooses from (as Unicorn's machine)
SEEDED = ("rax", "rbx", "rbp", "r10", "r11", "r12", "r13", "r14", "r15")
_SEEDED_STATES = {}


def seeded_registers(seed: int | None, nargs: int) -> tuple[dict[str, int], list]:
    """The registers a call starts with: the argument registers the call leaves free, rax, rbx, rbp and r10..r15
    (general) and zmm0..zmm31 (8 words each), pseudo-random as seed % REGISTER_STATES chooses, the same for every
    call with that seed (a kernel reading a register it never set replays); all zero without a seed."""
    free = ARGUMENT_REGISTERS[min(nargs, 6):]
    if seed is None:
        return dict.fromkeys(GPRS, 0), ZERO_ZMM
    key = (seed % REGISTER_STATES, len(free))
    if key not in _SEEDED_STATES:
        import random
        rng = random.Random(0x5EED_0086 * REGISTER_STATES + key[0])
        gprs = dict.fromkeys(GPRS, 0)
        gprs.update((name, rng.getrandbits(63)) for name in (*free, *SEEDED))
        _SEEDED_STATES[key] = gprs, [[rng.getrandbits(63) for _ in range(8)] for _ in range(32)]
    return _SEEDED_STATES[key]


class _Registers(dict):
    """The general registers of an interrupted instruction, read from the CPU when asked (RSP: the frame's)."""

    def __init__(self, cpu, rsp: int):
        super().__init__(rsp=rsp)
        self.cpu = cpu

    def __contains__(self, name) -> bool:
        return name in GPRS

    def __missing__(self, name: str) -> int:
        if name not in GPRS:
            raise KeyError(name)
        value = self[name] = getattr(self.cpu, name)
        return value


def _gprs(cpu) -> dict[str, int]:
    return {name: getattr(cpu, name) for name in GPRS}


# Bochs's cpudb order, the index bochscpu's `cpu.model` enum takes (its list in bochscpu's src/sim.rs; the enum's
# own name table cannot be used: in bochscpu-python 0.4.0 its strings are dangling, so find_by_name fails).
MODEL_INDEX = {"corei7_haswell_4770": 24, "broadwell_ult": 25, "corei7_skylake_x": 26, "corei3_cnl": 27,
               "corei7_icelake_u": 28, "tigerlake": 29, "sapphire_rapids": 30, "arrow_lake": 31}


def set_model(bochscpu_module, model: str) -> str:
    """Select Bochs's CPU model before the Session exists: the `cpu.model` parameter bochscpu keeps, set by index
    through the library's exported Bochs functions (bx_param_num_c::set)."""
    if model not in MODEL_INDEX:
        raise ValueError(f"Bochs CPU model {model!r}: lowp knows {', '.join(MODEL_INDEX)}")
    lib = ctypes.CDLL(bochscpu_module._bochscpu.__file__)
    get = lib.sim_get_param_enum
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
    param = get(b"cpu.model")
    if not param:
        raise RuntimeError("this bochscpu has no cpu.model parameter")
    set_value = lib._ZN14bx_param_num_c3setEl
    set_value.restype, set_value.argtypes = None, [ctypes.c_void_p, ctypes.c_long]
    set_value(param, MODEL_INDEX[model])
    return model


def load_bochscpu(shim: str | None):
    """Import bochscpu, after the glibc shim if the host gave one (its symbols must be global before the
    extension module's are resolved)."""
    if shim:
        ctypes.CDLL(shim, mode=ctypes.RTLD_GLOBAL)
    import bochscpu
    import bochscpu.cpu
    import bochscpu.memory
    bochscpu._bochscpu.bochscpu_log_set_level(0)
    return bochscpu


def serve(rfd: int, wfd: int) -> None:
    """Requests: ('init', dict) once, then ('call', dict), ('read', address, n), ('exit',). Every reply is
    ('ok', value) or ('error', kind, message)."""
    from multiprocessing.connection import Connection
    conn_in, conn_out = Connection(rfd, writable=False), Connection(wfd, readable=False)
    guest = None
    while True:
        try:
            request = pickle.loads(conn_in.recv_bytes())
        except EOFError:
            break
        op = request[0]
        try:
            if op == "init":
                options = request[1]
                bx = load_bochscpu(options.get("shim"))
                set_model(bx, options["model"])
                guest = Guest(bx, options["model"], options["segments"], options["memory_fd"],
                              options["memory_bytes"], options.get("amx", False), options["watchdog"])
                guest.map_stack(options["stack_top"], options["stack_bytes"])
                value = {"pid": os.getpid(), "bochscpu": bx._bochscpu.__version__,
                         "call_pages": Memory.PERMANENT}
            elif op == "call":
                value = guest.call(**request[1])
            elif op == "read":
                value = guest.memory.read(request[1], request[2])
            elif op == "exit":
                conn_out.send_bytes(pickle.dumps(("ok", None)))
                break
            else:
                raise ValueError(f"unknown request {op!r}")
            reply = ("ok", value)
        except Exception as e:       # noqa: BLE001 - every error goes back to the host, which raises it there
            reply = ("error", type(e).__name__, str(e))
        conn_out.send_bytes(pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)               # bochscpu crashes at interpreter teardown


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
