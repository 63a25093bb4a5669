"""Run functions of an x86-64 kernel on the Bochs CPU emulator (bochscpu-python), called like C functions from
Python, so that an AVX-512, AVX-512 VNNI, AVX-VNNI or AVX-VNNI-INT8 kernel is judged on a host that lacks them:
the same interface and errors as the Unicorn Machine and QemuMachine.

    m = BochsMachine(build_for_bochs("gemm.c", flags=("-O2", "-mavx512vnni")))
    r = m.call("gemm", A, B, C, M, N, K)             # r.arrays: copies of A, B, C after the call

Build: the host's own C compiler (the native build's), the kernel's own flags, linked as a static program without
libc at a fixed address (runtime_x86.c: memset, memcpy, ..., and INT3 for abort, assert and a smashed stack), so
the code Bochs runs is the code the host compiler makes of the kernel.

Run: one long-lived guest process per machine (emulator/x86/bochs_guest.py says why a process and how the guest is set
up: long mode, lowp's own page tables, an IDT that delivers every exception to a HLT on a stack of its own). Each
call places every array in its own mapping between unmapped guard pages, ending at the mapping's end (after its
allowed over-read), with a canary below it and in the over-read, exactly as Machine lays them out; passes the
arguments by the System V AMD64 ABI (six in registers, the rest on the stack); and returns to a HLT.

Errors: OutOfBounds (a page fault: buffer, byte offset, read/write/fetch, the instruction; writes below the start
or into the over-read found by the canaries after the call), AlignmentFault (a general-protection fault of an
aligned access), UndefinedInstruction (#UD: an instruction this CPU model lacks), Trap (INT3: abort, a failed
assert, a smashed stack; a division fault), BudgetExceeded (the instruction budget, checked at every taken branch),
EmulationFailed otherwise (the guest process died, with its exit status).

CPU models (MODELS): Bochs's Haswell (AVX2), Skylake-X (AVX-512 F/CD/BW/DQ/VL), Ice Lake (AVX-512 VNNI, VBMI,
...), Sapphire Rapids (those and AVX-VNNI, BF16, FP16) and Arrow Lake (AVX-VNNI, AVX-VNNI-INT8, no AVX-512). A kernel
runs on the least capable one with all its features (model_for). AMX (no Bochs model has it) runs on lowp's models
(lowp.emulator.x86.amx): CallResult.modeled says so.
"""
from __future__ import annotations


import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from functools import lru_cache
from pathlib import Path

import numpy as np

from lowp.emulator import buildcache

from lowp.emulator.x86 import faults as x86_faults
from lowp.emulator.build import CXX_FLAGS, Binary, zig
from lowp.emulator.cpuflags import zig_cpu
from lowp.emulator.placement import check_alignment, padded_after
from lowp.emulator.errors import (BudgetExceeded, BuildError, EmulationFailed, EmulatorError,
                                  EmulatorLacksInstruction, OutOfBounds, Trap, UndefinedInstruction, guest_death)
from lowp.emulator.native_build import NativeUnavailable, build_shared_library, cache_dir, host_amx_intrinsics_unsafe, \
    toolchain
from lowp.emulator.machine import (CANARY, CallResult, call_each, GuestProcess, _Buffer, canary_damage, pointer_tables, relocate,
                      split_arguments)

HERE = Path(__file__).resolve().parents[1]      # lowp/emulator: the runtimes live there
RUNTIME = HERE / "runtime_x86.c"
CXX_RUNTIME = HERE / "runtime_cxx.cc"
SHIM = HERE / "glibc_compat.c"
WATCHDOG = HERE / "bochs_watchdog.c"
GUEST = HERE / "x86" / "bochs_guest.py"
# The guest process runs bochs_guest.py as a module of its own, not as lowp.emulator.x86.bochs_guest: importing
# the package first (lowp.emulator's build and build cache) was half of a guest's start, and a kernel's checks
# start several guests. It imports lowp itself only for AMX (lowp's AMX unit).
GUEST_BOOT = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('lowp_bochs_guest', "
              "sys.argv[1]); guest = importlib.util.module_from_spec(spec); spec.loader.exec_module(guest); "
              "guest.serve(int(sys.argv[2]), int(sys.argv[3]))")
# How a guest process starts: "fork" (a fork of this process, which has Python, numpy and, for AMX, lowp's AMX unit
# and iced-x86 loaded already: a new interpreter took some 60 ms and an AMX guest's imports 0.25 s more, and a
# kernel's checks start several guests) or "exec" (a new interpreter running GUEST_BOOT). LOWP_BOCHS_GUEST=exec
# chooses the second; tests/test_bochs.py holds the two equal.
GUEST_START = os.environ.get("LOWP_BOCHS_GUEST", "fork")
PAGE = 4096
BUFFERS = 0x1_0000_0000
STACK_TOP, STACK_SIZE = 0x7F00_0000, 1 << 20
TEXT = 0x40_0000
DEFAULT_BUDGET = 500_000_000
# An instruction budget without counts is kept as time, at this conservative speed (Bochs runs 30-60 M/s)
INSTRUCTIONS_PER_SECOND = 25_000_000
MEMORY_BYTES = 4 << 30                # the guest's physical memory: a sparse memfd, committed only as used
REGISTER_STATES = 64
MASK64 = (1 << 64) - 1
INSTALL = "pip install 'bochscpu-python>=0.4,<0.5' iced-x86 (lowp installs them on x86-64 Linux)"
LINK_FLAGS = ("-static", "-nostdlib", "-no-pie", f"-Wl,-Ttext-segment={TEXT:#x}", "-Wl,--no-gc-sections",
              "-Wl,--build-id=none", "-lgcc")
ZIG_LINK_FLAGS = ("-static", "-nostdlib", "-fno-pie", "-Wl,--no-gc-sections")

# The CPU features (Linux names) each Bochs model gives a kernel: Bochs 3.0's cpudb (bochs/cpu/cpudb/intel/*.cc) as
# bochscpu-python 0.4.0 builds it. tests/test_bochs.py executes an instruction of every feature listed here on every
# model (tests/x86/bochs_faults.c) and checks that the others raise #UD: the tables are what runs, not what CPUID
# says (arrow_lake's CPUID reports AVX-VNNI-INT8 absent though the instructions run).
_BASE = ("fpu", "tsc", "cx8", "cmov", "mmx", "fxsr", "sse", "sse2", "syscall", "nx", "lm", "pni", "ssse3", "cx16",
         "sse4_1", "sse4_2", "popcnt", "movbe", "aes", "pclmulqdq", "xsave", "avx", "f16c", "fma", "abm", "bmi1",
         "avx2", "bmi2", "lahf_lm")
_AVX512 = ("avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl")
_ICELAKE = ("avx512ifma", "avx512vbmi", "avx512_vbmi2", "avx512_vnni", "avx512_bitalg", "avx512_vpopcntdq", "gfni",
            "vaes", "vpclmulqdq", "sha_ni")
MODELS = {
    "corei7_haswell_4770": frozenset(_BASE),                                          # AVX2 only
    "corei7_skylake_x": frozenset(_BASE + ("adx",) + _AVX512),                        # AVX-512, no VNNI
    "corei7_icelake_u": frozenset(_BASE + ("adx",) + _AVX512 + _ICELAKE),             # AVX-512 VNNI, no AVX-VNNI
    "sapphire_rapids": frozenset(_BASE + ("adx",) + _AVX512 + _ICELAKE
                                 + ("avx_vnni", "avx512_bf16", "avx512_fp16")),
    "arrow_lake": frozenset(_BASE + ("adx", "gfni", "vaes", "vpclmulqdq", "sha_ni", "avx_vnni", "avx_vnni_int8")),
}
DEFAULT_MODEL = "sapphire_rapids"
# What lowp runs on its own models where no Bochs model has the feature (not proof of a kernel: rows say so).
MODELED = frozenset({"amx_tile", "amx_int8"})
# Instructions Bochs executes wrongly (measured against hardware; docs/findings.md): `lowp isa verify` does not
# prove a model against them, and a kernel row whose path ran one says so.
DEFECTS = {
    "vpdpwssds": "its VPDPWSSDS wraps the pair sum 2^31 ((-32768)*(-32768) twice) in 32 bits before the "
                 "saturating add: 0x80000000 where CPUs give 0x7FFFFFFF (docs/findings.md)",
}


def model_for(features) -> str:
    """The Bochs CPU model a kernel needing `features` runs on: of those with all of them (AMX aside, which is
    lowp's models on any), the one with the fewest features, else the default one (which then says what it
    lacks). The least capable CPU that has what the kernel declares: a kernel whose run-time dispatch tests a
    feature it does not declare (AVX-VNNI for an AVX-512 VNNI path) takes the path such a CPU gives it."""
    needed = set(features) - MODELED
    fits = [name for name, has in MODELS.items() if needed <= has]
    return min(fits, key=lambda name: len(MODELS[name])) if fits else DEFAULT_MODEL


@lru_cache(maxsize=1)
def unavailable() -> str | None:
    """Why kernels cannot run under Bochs here (and how to fix it), or None. Checked without importing bochscpu
    into this process (it belongs in the guest process only)."""
    import importlib.util
    missing = [name for name, module in (("bochscpu-python", "bochscpu"), ("iced-x86", "iced_x86"))
               if importlib.util.find_spec(module) is None]
    if missing:
        return f"{' and '.join(missing)} not installed ({INSTALL})"
    try:
        watchdog()
        if needs_shim():
            shim()
    except EmulatorError as e:
        return str(e)
    return None


@lru_cache(maxsize=1)
def bochscpu_version() -> str:
    import importlib.metadata
    try:
        return importlib.metadata.version("bochscpu-python")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def describe(model: str = DEFAULT_MODEL) -> str:
    """What a row names as the CPU that ran a kernel."""
    return f"Bochs (bochscpu-python {bochscpu_version()}), cpu model {model}"


def needs_shim() -> bool:
    """Whether this C library lacks the glibc 2.38 symbols the bochscpu wheel imports (Debian 12: glibc 2.36)."""
    try:
        major, minor = (int(x) for x in os.confstr("CS_GNU_LIBC_VERSION").split()[1].split(".")[:2])
    except (ValueError, IndexError, OSError):
        return False                  # not glibc: nothing lowp can say
    return (major, minor) < (2, 38)


@lru_cache(maxsize=1)
def watchdog() -> Path:
    """bochs_watchdog.c built for this host (cached): the guest's time budget."""
    try:
        return build_shared_library([WATCHDOG], ("-O2", "-pthread"), "lowp-bochs-watchdog")
    except (NativeUnavailable, buildcache.BuildFailed) as e:
        raise EmulatorError(f"lowp's Bochs watchdog cannot be built: {e}") from None


@lru_cache(maxsize=1)
def shim() -> Path:
    """glibc_compat.c built for this host (cached): what the guest process loads before bochscpu on glibc < 2.38."""
    try:
        return build_shared_library([SHIM], ("-O2",), "lowp-glibc-compat")
    except (NativeUnavailable, buildcache.BuildFailed) as e:
        raise EmulatorError(f"bochscpu-python needs glibc 2.38 symbols this system lacks, and lowp's shim for them "
                            f"cannot be built: {e}") from None


def build_for_bochs(*sources, flags=(), depends=(), compiler: str = "auto") -> Binary:
    """Compile the kernel's sources with `flags` (its -O and -m flags, as the native build has them) and link them
    with runtime_x86.c into a static program; cached as every build. compiler: 'host', the host's C (and C++)
    compiler, as the native build (a kernel is judged as the host compiler makes it); 'zig', zig's clang
    (lowp's own intrinsic wrappers: it emits every extension lowp models, AVX-VNNI-INT8 included, which GCC 12
    does not); 'auto', the host's, and zig's where the host's rejects one of the flags (a -mavxvnniint8 that
    Debian 12's GCC does not know: the row's `build` then names zig). Raises BuildError naming the file, with the
    compiler's message."""
    if compiler == "auto":
        if "-mamx-tile" in flags and host_amx_intrinsics_unsafe():
            return build_for_bochs(*sources, flags=flags, depends=depends, compiler="zig")
        try:
            return build_for_bochs(*sources, flags=flags, depends=depends, compiler="host")
        except BuildError as e:
            if not _unknown_option(str(e)):
                raise
            return build_for_bochs(*sources, flags=flags, depends=depends, compiler="zig")
    paths = [Path(s).resolve() for s in sources]
    if not paths:
        raise ValueError("build_for_bochs() needs at least one source file")
    cxx = any(buildcache.language(p) == "c++" for p in paths)
    runtime = [RUNTIME, *([CXX_RUNTIME] if cxx else [])]
    if compiler == "host":
        tools = dict(toolchain=toolchain(), cxx=toolchain(cxx=True) if cxx else None)
        compile_flags, link_flags = (*flags, "-fPIC"), LINK_FLAGS
    elif compiler == "zig":
        directory = cache_dir() / "bochs"
        tools = dict(toolchain=zig(directory), cxx=zig(directory, "c++") if cxx else None)
        cpu, rest = zig_cpu("x86_64-linux-gnu", "", flags)        # -march=skylake-avx512 as zig spells it
        compile_flags = ("-target", "x86_64-linux-gnu", *([f"-mcpu={cpu}"] if cpu else []), *rest)
        link_flags = ZIG_LINK_FLAGS
    else:
        raise ValueError(f"compiler: 'host' or 'zig', got {compiler!r}")
    try:
        out = buildcache.build(
            tools["toolchain"], [*paths, *runtime], directory=cache_dir() / "bochs",
            stem=f"{paths[0].stem}-bochs", suffix=".elf", compile_flags=compile_flags, link_flags=link_flags,
            inputs=depends, cxx=tools["cxx"], language_flags={"c++": CXX_FLAGS})
    except NativeUnavailable as e:
        raise BuildError(str(e)) from None
    except buildcache.BuildFailed as e:
        raise BuildError(f"x86-64 for Bochs: {e}", source=e.source) from None
    return Binary(out, "x86-64-static", tuple(str(p) for p in paths))


def _unknown_option(message: str) -> bool:
    """Whether a compiler's message says it does not know a command-line option (GCC, clang)."""
    return "unrecognized command-line option" in message or "unknown argument" in message


class BochsDied(EmulationFailed):
    """The guest process died or stopped answering during a call (the next call starts a new one)."""


@lru_cache(maxsize=1)
def _guest_module():
    """bochs_guest.py loaded as GUEST_BOOT loads it (a module of its own, not lowp.emulator.x86.bochs_guest), once
    a process: a forked guest finds it loaded."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("lowp_bochs_guest", GUEST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _signals_of_a_new_interpreter() -> None:
    """The signal dispositions an exec'd interpreter would have: what this process ignores stays ignored (exec
    keeps SIG_IGN), every handler goes back to the default action, and SIGPIPE and SIGXFSZ are ignored and SIGINT
    raises KeyboardInterrupt, as Python's start-up sets them."""
    for number in signal.valid_signals():
        if number in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            ignored = signal.getsignal(number) is signal.SIG_IGN
            if number in (signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(number, signal.SIG_IGN)
            elif number == signal.SIGINT and not ignored:
                signal.signal(number, signal.default_int_handler)
            elif not ignored:
                signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError):
            pass                    # a signal number Python cannot set (the real-time ones glibc reserves)


class ForkedGuest:
    """A guest process forked from this one, with subprocess.Popen's poll/wait/kill/returncode (what the machine
    and guest_death use). The child keeps only its two pipe ends and the memory's memfd (with stdin on /dev/null,
    stdout and stderr on the machine's stderr file), has the signal dispositions a new interpreter would, freezes
    what it inherited out of the collector's reach (nothing of this process's may be finalized there), and leaves
    by os._exit only: no handler of this process runs in it."""

    def __init__(self, pid: int):
        self.pid, self.returncode = pid, None

    @staticmethod
    def pristine() -> bool:
        """Can a guest be forked from this process? Not where it has imported bochscpu itself (a guest's CPU state
        would start from this process's): there a guest is started by exec. (The watchdog library, which a test
        loads and starts here, resets itself in a fork: bochs_watchdog.c.)"""
        return "bochscpu" not in sys.modules

    @classmethod
    def start(cls, rfd: int, wfd: int, memory: int, stderr) -> "ForkedGuest":
        module = _guest_module()
        from lowp.emulator.x86 import amx     # every guest has an AMX unit ("amx": True at init): what it
        amx.preload()                         # imports at its first AMX instruction, imported before the fork
        keep = {0, 1, 2, rfd, wfd, memory}
        pid = os.fork()
        if pid:
            return cls(pid)
        try:                                    # the guest
            import gc
            import io
            gc.freeze()
            _signals_of_a_new_interpreter()
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(stderr.fileno(), 1)
            os.dup2(stderr.fileno(), 2)
            for fd in map(int, os.listdir("/proc/self/fd")):
                if fd not in keep:
                    try:
                        os.close(fd)
                    except OSError:
                        pass            # the listing's own descriptor, closed already
            # this process's stdout and stderr objects may hold unwritten output of the parent's: never flushed here
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
            sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
            module.serve(rfd, wfd)
        except BaseException:               # as a new interpreter would: the traceback to the machine's stderr file
            import traceback
            traceback.print_exc()
        finally:
            os._exit(70)

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:   # reaped elsewhere: what subprocess.Popen says then
                self.returncode = 0
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"bochs guest {self.pid}", timeout)
            time.sleep(0.002)
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class BochsMachine(GuestProcess):
    """One Bochs CPU (in a process of its own) running `binary` (a build_for_bochs() program); call() its
    functions. model: a key of MODELS; budget: instructions per call (None: none), exact when the call counts,
    else kept as time (budget / INSTRUCTIONS_PER_SECOND seconds) unless `seconds` says; count/mnemonics: the
    defaults of call()'s options."""

    def __init__(self, binary: Binary, *, model: str = DEFAULT_MODEL, budget: int | None = DEFAULT_BUDGET,
                 seconds: float | None = None, count: bool = False, mnemonics: bool = False):
        if binary.target != "x86-64-static":
            raise ValueError(f"BochsMachine runs build_for_bochs() programs; {binary.path.name} is a "
                             f"{binary.target!r} build")
        if model not in MODELS:
            raise ValueError(f"model {model!r}: Bochs CPU models lowp knows: {', '.join(MODELS)}")
        self.binary, self.model = binary, model
        self.defaults = dict(budget=budget, seconds=seconds, count=count, mnemonics=mnemonics)
        self.starts = 0
        self._proc = self._conn_in = self._conn_out = None
        self._memory = None           # the guest's physical memory, shared (mmap of its memfd)
        self._call_pages = 0          # the page index where a call's buffers start
        self._stderr = None
        self._owner = os.getpid()
        self._text = {}           # address -> (mnemonic, text) decoded on the host
        self._derived = True      # the last call's time budget came from its instruction budget

    @property
    def restarts(self) -> int:
        return max(0, self.starts - 1)

    def describe(self) -> str:
        return describe(self.model)

    # -- the guest process ------------------------------------------------------------------------------------
    def _process(self):
        if self._owner != os.getpid():         # a forked copy: the parent's guest is not ours
            self._proc = self._conn_in = self._conn_out = None
            self._owner, self.starts = os.getpid(), 0
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        reason = unavailable()
        if reason:
            raise EmulatorError(f"Bochs cannot run here: {reason}")
        self._reap()
        import mmap
        from multiprocessing.connection import Connection
        to_guest_r, to_guest_w = os.pipe()
        from_guest_r, from_guest_w = os.pipe()
        memory = os.memfd_create("lowp-bochs-memory")
        os.ftruncate(memory, MEMORY_BYTES)
        self._memory = mmap.mmap(memory, MEMORY_BYTES, flags=mmap.MAP_SHARED)
        self._stderr = tempfile.TemporaryFile()
        if GUEST_START == "fork" and ForkedGuest.pristine():
            self._proc = ForkedGuest.start(to_guest_r, from_guest_w, memory, self._stderr)
        else:
            self._proc = subprocess.Popen([sys.executable, "-c", GUEST_BOOT, str(GUEST), str(to_guest_r),
                                           str(from_guest_w)], pass_fds=(to_guest_r, from_guest_w, memory),
                                          stdin=subprocess.DEVNULL, stdout=self._stderr, stderr=self._stderr,
                                          close_fds=True)
        for fd in (to_guest_r, from_guest_w):
            os.close(fd)
        self._conn_out = Connection(to_guest_w, readable=False)
        self._conn_in = Connection(from_guest_r, writable=False)
        self.starts += 1
        segments = [(s.vaddr, s.data, s.memsz, s.flags) for s in self.binary.segments]
        try:
            hello = self._request(("init", {"model": self.model, "segments": segments, "shim": str(shim())
                                            if needs_shim() else None, "stack_top": STACK_TOP,
                                            "stack_bytes": STACK_SIZE, "memory_fd": memory,
                                            "watchdog": str(watchdog()),
                                            "memory_bytes": MEMORY_BYTES, "amx": True}), 60.0, "starting")
        finally:
            os.close(memory)          # both processes keep their mappings
        self._call_pages = hello["call_pages"]
        return self._proc

    def _request(self, message, timeout: float, what: str):
        try:
            self._conn_out.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))
            if not self._conn_in.poll(timeout):
                raise self._died(what, f"did not answer within {timeout:g} s", kill=True)
            reply = pickle.loads(self._conn_in.recv_bytes())
        except (EOFError, OSError, BrokenPipeError):
            raise self._died(what, "ended") from None
        if reply[0] == "error":
            raise EmulationFailed(f"the Bochs guest failed {what}: {reply[1]}: {reply[2]}")
        return reply[1]

    def _died(self, what: str, cause: str, kill: bool = False) -> BochsDied:
        if kill and self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
        how = guest_death(self._proc, "ended" if kill else cause, self._stderr, wait=5.0)
        self._reap()
        return BochsDied(f"the Bochs guest {cause} while {what} {how}; the next call starts a new one")

    def _reap(self) -> None:
        proc, self._proc = self._proc, None
        if self._memory is not None:
            try:
                self._memory.close()
            except BufferError:       # a view still lives (an error's traceback): unmapped when it goes
                pass
            self._memory = None
        for conn in (self._conn_in, self._conn_out):
            if conn is not None:
                conn.close()
        self._conn_in = self._conn_out = None
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait()

    def close(self) -> None:
        if self._proc is not None and self._owner == os.getpid():
            try:
                if self._proc.poll() is None:
                    self._conn_out.send_bytes(pickle.dumps(("exit",)))
                    self._proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired, AttributeError):
                pass
            self._reap()

    # -- the call ---------------------------------------------------------------------------------------------
    def call(self, symbol: str, *args, names=None, overread=None, seed=None, memory=(), align=None,
             **options) -> CallResult:
        """Call `symbol` with numpy arrays (passed as pointers to copies), Pointers and ints (64-bit scalars), and
        place the `memory` buffers (every buffer at `align`'s offset), as Machine.call. options: budget
        (instructions; None: none), seconds (the time budget of a call that counts nothing; default budget /
        INSTRUCTIONS_PER_SECOND), count (executed instructions), mnemonics
        (per-mnemonic counts). seed: the registers the arguments leave free start pseudo-random, as that seed
        chooses. Raises an EmulatorError (with .result) on a fault, a budget overrun, an undefined instruction or
        a dead guest."""
        unknown = set(options) - set(self.defaults)
        if unknown:
            raise TypeError(f"unknown option(s) {', '.join(sorted(unknown))}; expected {', '.join(self.defaults)}")
        opts = {**self.defaults, **options}
        entry = self.binary.symbol(symbol)
        names, arrays, array_names, values = split_arguments(args, names, memory)
        buffers = _place(arrays, array_names, overread or {}, check_alignment(align))
        relocate(buffers, pointer_tables(args, memory))
        it = iter(buffers)
        values = [next(it).base if v is None else v for v in values]
        budget = opts["budget"] or None
        seconds = opts["seconds"] or (max(1.0, budget / INSTRUCTIONS_PER_SECOND) if budget else None)
        self._derived = not opts["seconds"]       # the time budget says what it came from
        request = {"entry": entry, "args": values[:6], "stack_args": values[6:],
                   "regions": [(b.lo, b.hi - b.lo) for b in buffers],
                   "seed": None if seed is None else seed % REGISTER_STATES, "budget": budget,
                   "seconds": seconds, "mnemonics": bool(opts["mnemonics"]), "count": bool(opts["count"])}
        what = f"calling {symbol}({', '.join(names)})"
        self._process()
        self._write_buffers(buffers)
        timeout = 60.0 + (seconds or 0) + (budget / 2_000_000 if budget else 3600.0)
        try:
            reply = self._request(("call", request), timeout, what)
        except BochsDied as e:
            raise BudgetExceeded(f"{e} (a runaway loop the branch budget missed?)", budget=budget) \
                if "did not answer" in str(e) else e
        return self._result(reply, buffers, array_names, opts, symbol)

    def call_many(self, symbol: str, calls, *, seeds=None, **options) -> list:
        """call() for each call, in order: its CallResult or the EmulatorError it raised. Bochs stays one call
        at a time: its guest takes one pickled request per call with the buffers at one place of the shared
        memory, so a batch would need a second protocol in bochs_guest.py for little (a Bochs call costs
        milliseconds, the request microseconds)."""
        return call_each(self, symbol, calls, seeds=seeds, **options)

    def _shared(self, buffers):
        """Each buffer's mapping as a view of the shared physical memory: the guest gives a call's regions the
        physical pages from _call_pages on, in order (bochs_guest.Memory)."""
        page = self._call_pages
        views = []
        for b in buffers:
            size = b.hi - b.lo
            views.append(np.frombuffer(self._memory, np.uint8, size, page * PAGE))
            page += size // PAGE
        return views

    def _write_buffers(self, buffers) -> None:
        """Every byte of every mapping: the canary below, the data, the canary in the over-read."""
        for b, view in zip(buffers, self._shared(buffers)):
            start = b.base - b.lo
            view[:start] = CANARY
            view[start:start + b.nbytes] = np.ascontiguousarray(b.array).reshape(-1).view(np.uint8)
            view[start + b.nbytes:] = CANARY

    def _result(self, reply: dict, buffers, array_names, opts, symbol) -> CallResult:
        error = self._error(reply, buffers)
        out = []
        for b, region in zip(buffers, self._shared(buffers)):
            start, end = b.base - b.lo, b.base - b.lo + b.nbytes
            below, data, over = region[:start], region[start:end], region[end:]
            out.append(data.view(b.array.dtype).reshape(b.array.shape).copy())
            error = error or canary_damage(b, below.tobytes(), over.tobytes())
        mnemonics = None
        if opts["mnemonics"]:
            mnemonics = Counter()
            for address, n in reply.get("addresses", {}).items():      # modeled ones included: they ran too
                mnemonics[self._decode(address)[0]] += n
            mnemonics = dict(mnemonics.most_common())
        # counted at every taken branch (bochs_guest.py): exact, and there whenever a budget is
        result = CallResult(out, array_names, ret=_signed(reply.get("rax", 0)), instructions=reply["instructions"],
                            modeled=dict(reply.get("modeled", {})), mnemonics=mnemonics, seconds=reply["seconds"],
                            fault=error)
        if error is not None:
            error.result = result
            raise error
        return result

    # -- what went wrong ----------------------------------------------------------------------------------------
    def _decode(self, address: int) -> tuple[str, str]:
        """(mnemonic, text) of the kernel's instruction at `address`: capstone, else iced-x86 (AMX, and whatever
        is newer than capstone), else '<undecodable>'."""
        hit = self._text.get(address)
        if hit is None:
            code = self._code(address)
            insn = x86_faults.decode(code, address) if code else None
            if insn is not None:
                hit = (insn.mnemonic, x86_faults.text(insn))
            else:
                hit = _iced_text(code, address) if code else ("<unreadable>", "<unreadable>")
            self._text[address] = hit
        return hit

    def _code(self, address: int) -> bytes:
        for s in self.binary.segments:
            if s.vaddr <= address < s.vaddr + len(s.data):
                return s.data[address - s.vaddr:address - s.vaddr + 15]
        return b""

    def _symbolize(self, address: int) -> str:
        for name, (value, size) in self.binary.symbols.items():
            if value <= address < value + max(size, 1):
                return f"{name}+{address - value:#x} ({address:#x})"
        return f"{address:#x}"

    def _error(self, reply: dict, buffers) -> EmulatorError | None:
        status = reply["status"]
        if status == "return":
            return None
        rip = reply.get("rip", 0)
        _, text = self._decode(rip)
        where = f"by {text} at {self._symbolize(rip)}"
        if status == "budget":
            budget = reply["budget"]
            return BudgetExceeded(f"instruction budget of {budget:,} exhausted (a runaway loop?); "
                                  f"stopped at {self._symbolize(rip)}: {text}", budget=budget, pc=rip,
                                  instruction=text)
        if status == "timeout":
            seconds, budget = reply["time_budget"], reply["budget"]
            why = f" (its budget of {budget:,} instructions at {INSTRUCTIONS_PER_SECOND / 1e6:g} M/s)" \
                if budget and self._derived else " (its time budget on Bochs)"
            return BudgetExceeded(f"the kernel ran longer than {seconds:g} s{why}: a runaway loop?; stopped at "
                                  f"{self._symbolize(rip)}: {text}", budget=budget, pc=rip, instruction=text)
        if status != "fault":
            return EmulationFailed(f"Bochs stopped at {rip:#x} before the function returned "
                                   f"(exceptions: {reply.get('exceptions')})")
        vector, code = reply["vector"], reply.get("error_code") or 0
        regs = {**reply["regs"], "rip": rip}
        if reply.get("modeled_fault"):
            text = f"{text} (on lowp's AMX models: {reply['modeled_fault']})"
            where = f"by {text} at {self._symbolize(rip)}"
        if vector == 14:
            return self._page_fault(reply, code, rip, text, where, regs, buffers)
        if vector in (13, 12, 17):
            insn = x86_faults.decode(self._code(rip), rip)
            start, size = x86_faults.memory_operand(insn, regs) if insn is not None else (None, None)
            if start is None:
                return EmulationFailed(f"general-protection fault (vector {vector}, error code {code}) {where}")
            b = _locate(buffers, start)
            return x86_faults.general_protection(start, size, text, where, rip, b and b.name, b and b.base)
        if vector == 6:
            if reply.get("modeled_fault"):
                return UndefinedInstruction(f"{reply['modeled_fault']} {where}", pc=rip, encoding=None,
                                            instruction=text)
            trap = text.startswith("ud2")
            cause = "a ud2 (__builtin_trap)" if trap else \
                f"Bochs's {self.model} does not implement it and lowp does not model it"
            kind = UndefinedInstruction if trap else EmulatorLacksInstruction
            return kind(f"undefined instruction at {self._symbolize(rip)}: {text} ({cause})",
                        pc=rip, encoding=self._code(rip).hex(), instruction=text)
        if vector == 3:
            at = rip - 1                # INT3 is a trap: the pushed RIP is past it
            _, text = self._decode(at)
            function = self._symbolize(at).split("+")[0]
            meaning = {"abort": "abort()", "__assert_fail": "a failed assert()",
                       "__stack_chk_fail": "a smashed stack (stack protector)"}.get(function, "a breakpoint (int3)")
            return Trap(f"the kernel reached {meaning} at {self._symbolize(at)}; there is no OS or debugger to take "
                        "it", pc=at, kind="int3", instruction=text)
        if vector == 0:
            return Trap(f"the kernel raised a divide error (integer division by zero or overflow) {where}", pc=rip,
                        kind="divide error", instruction=text)
        return EmulationFailed(f"exception vector {vector} (error code {code}) {where}")

    def _page_fault(self, reply, code, rip, text, where, regs, buffers) -> OutOfBounds:
        address = reply["cr2"]
        access = "fetch" if code & 0x10 else "write" if code & 0x2 else "read"
        if access == "fetch":
            where = f"by a jump to {address:#x}"
            return OutOfBounds(f"instruction fetch from {address:#x}, which holds no code, {where}", access="fetch",
                               address=address, pc=rip, instruction="(jump target)")
        if STACK_TOP - STACK_SIZE - PAGE <= address < STACK_TOP - STACK_SIZE:
            return OutOfBounds(f"stack overflow: {access} at {address:#x}, below the 1 MiB stack, {where}",
                               buffer="stack", access=access, address=address, pc=rip, instruction=text)
        insn = x86_faults.decode(self._code(rip), rip)
        start, size = x86_faults.memory_operand(insn, regs) if insn is not None else (None, None)
        if reply.get("modeled_fault") and reply.get("access_start") is not None:
            start, size = reply["access_start"], reply.get("access_size")
        b = _locate(buffers, address)
        if code & 0x1 and b is None:         # present but refused: a write to the program's read-only pages
            return OutOfBounds(f"write to read-only memory: {address:#x}, in no buffer, {where}", access=access,
                               address=address, size=size, pc=rip, instruction=text)
        return x86_faults.page_fault(access, address, start, size, text, where, rip, b and _place_of(b), PAGE)


def _iced_text(code: bytes, address: int) -> tuple[str, str]:
    try:
        import iced_x86
    except ImportError:
        return "<undecodable>", "<undecodable>"
    insn = next(iter(iced_x86.Decoder(64, code, ip=address)))
    if insn.is_invalid:
        return "<undecodable>", "<undecodable>"
    text = iced_x86.Formatter(iced_x86.FormatterSyntax.INTEL).format(insn)
    return text.split()[0], text


def _place(arrays, names, overread, align=None) -> list[_Buffer]:
    """Machine's layout: each buffer in its own mapping with an unmapped guard page on each side, ending at the
    mapping's end (after its allowed over-read and the slack its alignment needs: lowp.emulator.placement), the
    mappings 64 KiB apart from BUFFERS (above 4 GiB, so a pointer truncated to 32 bits faults)."""
    buffers, cursor = [], BUFFERS
    for name, a in zip(names, arrays):
        after = padded_after(name, a.nbytes, overread, align)
        size = -(-max(a.nbytes + after, 1) // PAGE) * PAGE
        lo = cursor + PAGE
        hi = lo + size
        base = hi - after - a.nbytes
        buffers.append(_Buffer(name, len(buffers), base, a.nbytes, lo, hi, a, after))
        cursor = (hi + PAGE + 0xFFFF) // 0x10000 * 0x10000
    return buffers


def _place_of(b: _Buffer) -> x86_faults.Place:
    return x86_faults.Place(b.name, b.lo, b.base, b.nbytes, b.hi, b.array.dtype, b.array.shape)


def _locate(buffers, address: int) -> _Buffer | None:
    for b in buffers:
        if b.lo - PAGE <= address < b.hi + PAGE:
            return b
    return None


def _signed(x: int) -> int:
    x &= MASK64
    return x - (1 << 64) if x >> 63 else x
