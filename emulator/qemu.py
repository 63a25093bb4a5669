"""Run functions of an AArch64 (or RISC-V 64) kernel under qemu-aarch64 (qemu-user, `-cpu max`; qemu-riscv64),
called like C functions from
Python, in ONE long-lived process that serves every call: the same interface and errors as the Unicorn Machine.

    m = QemuMachine(build_for_qemu("gemm.c"))
    r = m.call("gemm", A, B, np.zeros((M, N), np.int32), M, N, K)    # r.arrays: copies of A, B, C after the call

Why: Unicorn 2.1.4 is QEMU 5.0.1 and lacks SVE, SME and FEAT_I8MM (lowp models I8MM in its place); qemu 7.2's
`-cpu max` implements them, so a kernel that needs them runs for real here.

How: the kernel's sources are linked with a guest driver (emulator/qemu_driver.c, a static Linux program without
libc) that reads call requests from stdin and writes replies to stdout (the binary protocol is described there).
The host sends the entry's address from the ELF symbol table, the scalars, and each buffer's bytes; the guest places
every buffer in its own mapping between PROT_NONE guard pages, ending at the mapping's end (after its allowed
over-read), with a canary below it and in the over-read, exactly as Machine lays them out. A fault in the kernel
(SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGFPE) or the budget's SIGALRM is caught in the guest by a SA_SIGINFO handler
that reads si_addr and the registers from the ucontext and siglongjmps back to the serving loop: the process goes on.
If the guest dies, QemuDied names the call and the exit status; if it stops answering (the budget + `grace`
seconds: the guest's own timer did not stop the kernel), the host kills it and raises BudgetExceeded naming the
call. Either way the next call starts a new process.

Errors are Machine's: OutOfBounds (buffer, byte offset, read/write, the instruction; writes into the over-read or
below the start found by the canaries after the call), UndefinedInstruction (SIGILL: pc, encoding, capstone's
text), Trap (BRK), BudgetExceeded (a time budget per call, `seconds`; an instruction `budget` is converted at
INSTRUCTIONS_PER_SECOND), EmulationFailed otherwise.

Counts: with `count=True` (executed instructions) or `mnemonics=True` (per mnemonic), the call runs with lowp's TCG
plugin (emulator/qemu_plugin.c, built for the host with its C compiler: Debian's qemu-user has the plugin loader,
-plugin, but ships no plugin): an inline counter per translated block, reset before the call and dumped after it
through a system call the driver makes. Blocks that start in the driver (lowpq_* functions) are left out, so the
counts are the kernel's own, from its entry to its return, as Machine counts them. The plugin is loaded when the
process starts, if it can be built (plugin_unavailable() says why not); it costs an add per executed block. A qemu
without the plugin loader (Debian's static builds: qemu-user-static 7.2, qemu-user 10) counts through its own exec
log instead (`-d in_asm,exec,nochain`; counting() says which), from the first counted call on.

Guests: QemuMachine(binary, guest=RISCV64) runs a RISC-V 64 program (build_for_qemu(..., guest=RISCV64): target
'riscv64-linux', the driver emulator/qemu_driver_riscv64.c) under qemu-riscv64 -cpu rv64,v=true,vlen=128,...: the
same protocol, guard pages, canaries and errors (both drivers share emulator/qemu_driver_common.h); a QemuGuest
says what differs (the qemu binary, the -cpu, the driver, the registers, the disassembler, the CPU features).
AARCH64 is the default everywhere, so callers that name no guest run AArch64 as before.
QemuMachine(binary, guest=ARM) runs a 32-bit Arm program (target 'arm-linux', emulator/qemu_driver_arm.c) under
qemu-arm, and guest=HEXAGON a Hexagon program (target 'hexagon-linux', emulator/qemu_driver_hexagon.c) under
qemu-hexagon -cpu v68: both 32-bit guests, so a pointer table's entries are 4 bytes (QemuGuest.pointer_bytes: the
host sends 32-bit words of slot and offset, the driver replaces them in place) and the scalars and addresses are
the protocol words' low halves. On Hexagon no disassembler knows Hexagon here (capstone 5 has none), so a
fault names the instruction word, not its text.

Registers: `seed` chooses X(nargs)..X28 and V0..V31 as Machine does (emulator.aapcs64.seeded_registers: the same
values), except X30 (the return address) and X29 (the frame pointer). Without a seed they are zero. Flags, FPCR
and the SVE/SME state are qemu's at process start. Static data persists from call to call, as a loaded library's.
RISC-V 64: `seed` chooses a(nargs)..a7, t0..t6, s0..s11 (seeded_registers_riscv64) and v0..v31 (each register's
16 bytes of Machine's V state repeated over VLENB); ra, sp, gp and tp are the driver's; vtype, vl, vxrm and
vxsat are what the last call left (a kernel sets them: vsetvl, csrw vxrm).
"""
from __future__ import annotations

import os
import struct
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

from lowp.emulator import buildcache
from lowp.emulator.build import HERE, INCLUDE, Binary, build, include_files
from lowp.emulator.features import AARCH64_HWCAPS, ARM_ARCHITECTURES, ARM_HWCAPS, ARM_HWCAPS2
from lowp.emulator.native_build import NativeUnavailable, build_shared_library
from lowp.emulator.qemu_batch import identify, ready
from lowp.emulator.placement import check_alignment, padded_after
from lowp.emulator.errors import BudgetExceeded, EmulationFailed, EmulatorError, OutOfBounds, Trap, UndefinedInstruction, \
    describe_out_of_bounds, guest_death, stopped_after
from lowp.emulator.aarch64.aapcs64 import REGISTER_STATES, _access_size, _capstone, disassemble, effective_address, \
    seeded_registers, mnemonic as aarch64_mnemonic
from lowp.emulator.machine import CallResult, GuestProcess, Pointers, call_each, pointer_targets

DRIVER = HERE / "qemu_driver.c"
DEFAULT_SECONDS = 10.0            # time budget per call
INSTRUCTIONS_PER_SECOND = 25_000_000   # a conservative qemu TCG speed: an instruction budget -> seconds
LOG_IDLE = 8                      # uncounted calls in a row after which a logging process restarts without the log
RESTART_GRACE = 5.0               # seconds past the budget before the host gives up on the guest and kills it
OP_EXIT, OP_CALL, OP_HELLO = 0, 1, 2
PLUGIN = HERE / "qemu_plugin.c"
NX, NV, NSTACK = 29, 64, 16
MAX_ARGS = 8 + NSTACK
REQUEST_WORDS = 5 + NX + NV + NSTACK + 3 * MAX_ARGS     # the fixed part of every request (qemu_driver.c)
HEADER = 37                       # reply words: status, signo, code, addr, pc, x0..x30, sp
MASK64 = (1 << 64) - 1
SIGNAL_NAMES = {4: "SIGILL", 5: "SIGTRAP", 7: "SIGBUS", 8: "SIGFPE", 11: "SIGSEGV", 14: "SIGALRM"}
# every function kept: the entry symbols are called by address, nothing in the program references them
KEEP = ("-Wl,--no-gc-sections",)
INSTALL = "apt-get install qemu-user (Debian/Ubuntu), or set LOWP_QEMU_AARCH64 to a qemu-aarch64 binary"
COMMON = HERE / "qemu_driver_common.h"
RISCV64_VLENS = (128, 256, 512, 1024)     # what qemu-riscv64 7.2 accepts (as lowp.emulator.rvv.VLENS)
PIPE_BYTES = 1 << 20              # the pipes' size for pipelined calls (call_many, call_batch)
WRITE_BYTES = 64 << 10            # requests gathered into one write (call_many, call_batch)
BATCH_BYTES = 16 << 20            # call_batch's requests laid out at once


def vector_length_cpu(bits: int) -> str:
    """qemu-aarch64's -cpu for SVE and streaming SVE (SME) at `bits` (qemu takes the lengths in bytes)."""
    n = bits // 8
    return f"max,sve-default-vector-length={n},sme-default-vector-length={n}"


def riscv64_vector_length_cpu(bits: int) -> str:
    """qemu-riscv64's -cpu for the V extension at VLEN `bits`: QEMU 7.2 accepts VLEN a power of two in
    [128, 1024] and vext_spec 'v1.0' only (target/riscv/cpu.c riscv_cpu_realize, v7.2.0); ELEN 64."""
    if bits not in RISCV64_VLENS:
        raise ValueError(f"VLEN={bits}: qemu-riscv64 7.2 takes VLEN {', '.join(map(str, RISCV64_VLENS))}")
    return f"rv64,v=true,vlen={bits},elen=64,vext_spec=v1.0"


# The -cpu options of RISC-V half precision: scalar Zfh and vector Zvfh (which implies Zvfhmin and Zfhmin). QEMU
# 10.0 has both as rv64 properties; 7.2 has no zvfh (an unknown property stops qemu before it loads the program),
# so they are added only where the binary takes them (riscv64_takes_options).
RISCV64_HALF_OPTIONS = ",zfh=true,zvfh=true"


def riscv64_takes_options(qemu: str, options: str) -> bool:
    """Whether the qemu-riscv64 binary at `qemu` accepts the -cpu options `options` (',name=value...') on an rv64:
    asked once per binary (its path and mtime), by starting it on no program: qemu applies the -cpu's properties
    before it opens the program and names an unknown one ("can't apply global ...: Property ... not found")."""
    try:
        stamp = os.stat(qemu).st_mtime_ns
    except OSError:
        return False
    return _takes_options(qemu, stamp, options)


@lru_cache(maxsize=None)
def _takes_options(qemu: str, stamp, options: str) -> bool:
    try:
        run = subprocess.run([qemu, "-cpu", "rv64,v=true" + options, os.devnull], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "can't apply global" not in run.stderr


@dataclass(frozen=True)
class QemuGuest:
    """What one guest architecture of QemuMachine is: the qemu-user binary (and the environment variable that
    overrides it), its default -cpu and the -cpu of a vector length, the build target and the driver linked into
    every kernel, the request's register words, the reply's, the disassembler, and how the CPU features are read
    from the HELLO reply (AT_HWCAP, AT_HWCAP2) and the -cpu string."""
    name: str
    qemu: str                       # the qemu-user binary's name
    env: str                        # the environment variable naming another binary
    cpu: str                        # the default -cpu
    vector_length_cpu: Callable[[int], str]
    target: str                     # lowp.emulator.build's target
    driver: Path
    nx: int                         # words of x[] in a request (qemu_driver*.c NX)
    arg_base: int                   # x[] index of integer argument 0
    ret_index: int                  # register (index into the reply's registers) of the return value
    sp_index: int                   # ... of the stack pointer
    header: int                     # reply words before the buffers
    features_of: Callable[[int, int, str], frozenset]   # (AT_HWCAP, AT_HWCAP2, -cpu) -> feature names
    install: str
    pointer_bytes: int = 8          # a pointer's size in the guest (a pointer table's entries)

    def path(self) -> str | None:
        """The qemu-user binary: $env, else on PATH; None if neither."""
        from lowp.emulator.qemu_batch import qemu_path
        return qemu_path(self.qemu, self.env)

    def unavailable(self) -> str | None:
        return None if self.path() else f"{self.qemu} is not installed ({self.install})"


def riscv64_features(hwcap: int, hwcap2: int, cpu: str) -> frozenset[str]:
    """RISC-V features: the single-letter extensions of AT_HWCAP (bit i: the letter 'a' + i; Linux
    arch/riscv/include/uapi/asm/hwcap.h), plus 'v' and zvl<N>b for N = 32 .. VLEN when the -cpu string enables V.
    Debian's qemu-user 7.2 reports IMAFDC and V in AT_HWCAP (linux-user/elfload.c get_elf_hwcap: misa masked to
    those letters), but nothing says VLEN (no hwcap bits for Zvl*b; no riscv_hwprobe in qemu 7.2): the vector
    length is the -cpu's vlen (qemu's default 128), which the guest's csrr vlenb confirms (tests)."""
    names = {chr(ord("a") + i) for i in range(26) if hwcap >> i & 1}
    options = dict(o.partition("=")[::2] for o in cpu.split(",")[1:])
    if options.get("v") in ("true", "on"):
        vlen = int(options.get("vlen", 128))
        names |= {"v", *(f"zvl{n}b" for n in (32, 64, 128, 256, 512, 1024, 2048, 4096) if n <= vlen)}
        if options.get("zvfh") in ("true", "on"):
            names |= {"zvfh", "zvfhmin", "zfhmin"}
    if options.get("zfh") in ("true", "on"):
        names |= {"zfh", "zfhmin"}
    return frozenset(names)


# qemu-arm's -cpu models by Arm architecture version (qemu target/arm/tcg/cpu32.c: arm926/946/1026 ARMv5TE, the
# ARM11s ARMv6 (arm1176: ARMv6KZ with VFPv2), cortex-a7/a8/a9/a15 ARMv7-A, max an ARMv8 AArch32 core with every
# extension qemu implements); 'any' is max in user mode.
ARM_CPU_VERSIONS = {"arm926": 5, "arm946": 5, "arm1026": 5, "arm1136": 6, "arm1136-r2": 6, "arm1176": 6,
                    "arm11mpcore": 6, "cortex-a7": 7, "cortex-a8": 7, "cortex-a9": 7, "cortex-a15": 7, "max": 8,
                    "any": 8}


def arm_features(hwcap: int, hwcap2: int, cpu: str) -> frozenset[str]:
    """32-bit Arm features: the AT_HWCAP and AT_HWCAP2 bits by Linux's names (lowp.emulator.features.ARM_HWCAPS,
    ARM_HWCAPS2), plus armv5 .. armvN for the -cpu's architecture version N (no HWCAP bit says it)."""
    names = {n for i, n in enumerate(ARM_HWCAPS) if hwcap >> i & 1}
    names |= {n for i, n in enumerate(ARM_HWCAPS2) if hwcap2 >> i & 1}
    version = ARM_CPU_VERSIONS.get(cpu.split(",", 1)[0], 0)
    names |= {a for a in ARM_ARCHITECTURES if int(a[4:]) <= version}
    return frozenset(names)


def _no_vector_length(bits: int) -> str:
    raise ValueError(f"vector_bits={bits}: qemu-arm has no vector-length option (NEON is 128-bit)")


AARCH64 = QemuGuest(
    "aarch64", "qemu-aarch64", "LOWP_QEMU_AARCH64", "max", vector_length_cpu, "linux", DRIVER, NX, 0, 0, 31, HEADER,
    lambda hwcap, hwcap2, cpu: hwcap_names(hwcap, hwcap2), INSTALL)
RISCV64 = QemuGuest(
    "riscv64", "qemu-riscv64", "LOWP_QEMU_RISCV64", riscv64_vector_length_cpu(128), riscv64_vector_length_cpu,
    "riscv64-linux", HERE / "qemu_driver_riscv64.c", 32, 10, 10, 2, 37, riscv64_features,
    "apt-get install qemu-user (Debian/Ubuntu), or set LOWP_QEMU_RISCV64 to a qemu-riscv64 binary")
# The request's x[] is the 8 argument words (r0..r3, then 4 stack slots), then r4..r11 and r12 (qemu_driver_arm.c);
# the reply's registers r0..r15 and cpsr.
ARM = QemuGuest(
    "arm", "qemu-arm", "LOWP_QEMU_ARM", "max", _no_vector_length, "arm-linux", HERE / "qemu_driver_arm.c", 17, 0, 0,
    13, 22, arm_features, "apt-get install qemu-user (Debian/Ubuntu), or set LOWP_QEMU_ARM to a qemu-arm binary",
    pointer_bytes=4)
HEXAGON_CPUS = ("v66", "v67", "v68", "v69", "v71", "v73")     # qemu-hexagon 10's -cpu help


def hexagon_features(hwcap: int, hwcap2: int, cpu: str) -> frozenset[str]:
    """Hexagon features of qemu-hexagon -cpu vNN: the architecture versions up to NN and HVX at the same versions
    with 128-byte vectors (qemu's HVX is always the 128-byte mode: target/hexagon/mmvec/mmvec.h MAX_VEC_SIZE_BYTES
    128), named as zig's -mcpu names them (v68, hvxv68, hvx_length128b). Nothing comes from AT_HWCAP (Linux gives
    Hexagon none). HVX floating point (hvx_qfloat, hvx_ieee_fp) is left out: lowp.emulator.targets.hexagon says
    why."""
    if cpu not in HEXAGON_CPUS:
        raise ValueError(f"-cpu {cpu!r}: qemu-hexagon takes {', '.join(HEXAGON_CPUS)}")
    versions = HEXAGON_CPUS[:HEXAGON_CPUS.index(cpu) + 1]
    return frozenset({"hvx", "hvx_length128b", *versions, *(f"hvx{v}" for v in versions)})


def seeded_registers_hexagon(seed: int, nargs: int) -> tuple[dict[int, int], bytes]:
    """The Hexagon register state a seed chooses: r(nargs)..r27 (r0..r5 are arguments, r6 and r7 the 7th and 8th
    when there are that many; r28 carries the entry, r29..r31 are the driver's), random 32-bit values from the
    seed, and Machine's V state (16 bytes per vector register, repeated over HVX's 128 by the driver)."""
    _, vs = seeded_registers(seed, nargs)
    rng = np.random.default_rng([0x5EED, 0x6E8, seed % REGISTER_STATES])
    regs = list(range(min(nargs, 8), 28))
    return dict(zip(regs, rng.integers(0, 2 ** 32, len(regs)).tolist())), vs


HEXAGON = QemuGuest(
    "hexagon", "qemu-hexagon", "LOWP_QEMU_HEXAGON", "v68", lambda bits: "v68", "hexagon-linux",
    HERE / "qemu_driver_hexagon.c", 32, 0, 0, 29, 37, hexagon_features,
    "apt-get install qemu-user (Debian/Ubuntu; qemu-hexagon is in it since qemu 6), or set LOWP_QEMU_HEXAGON to a "
    "qemu-hexagon binary", pointer_bytes=4)
GUESTS = {g.name: g for g in (AARCH64, RISCV64, ARM, HEXAGON)}


def qemu_path(guest: QemuGuest = AARCH64) -> str | None:
    return guest.path()


def unavailable(guest: QemuGuest = AARCH64) -> str | None:
    """Why kernels cannot run under qemu here (and how to fix it), or None."""
    return guest.unavailable()


def build_for_qemu(*sources, flags=(), depends=(), guest: QemuGuest = AARCH64, **kwargs) -> Binary:
    """A kernel's sources linked with the guest driver into a static Linux program (target 'linux' for AArch64,
    'riscv64-linux' for RISC-V 64), with lowp's freestanding headers (assert.h, string.h, ...) as for the bare
    target."""
    return build(*sources, guest.driver, target=guest.target, flags=(*flags, "-isystem", str(INCLUDE), *KEEP),
                 depends=(*depends, *include_files(), COMMON), **kwargs)


def plugin() -> Path:
    """lowp's TCG plugin, built for this host (cached); EmulatorError saying why if it cannot be."""
    try:
        return build_shared_library([PLUGIN], ("-O2", "-Wall"), "lowp-qemu-plugin")
    except (NativeUnavailable, buildcache.BuildFailed) as e:
        raise EmulatorError(f"lowp's qemu plugin (instruction counts) cannot be built: {e}") from None


def plugin_unavailable() -> str | None:
    """Why instruction counts are not available under qemu here, or None."""
    try:
        plugin()
    except EmulatorError as e:
        return str(e)
    return None


def hwcap_names(hwcap: int, hwcap2: int) -> frozenset[str]:
    """Linux's feature names of AT_HWCAP and AT_HWCAP2 bits (arch/arm64/include/uapi/asm/hwcap.h: HWCAP bit i is
    AARCH64_HWCAPS[i] for i < 33, HWCAP2 bit i is AARCH64_HWCAPS[33 + i], the order /proc/cpuinfo prints)."""
    names = [n for i, n in enumerate(AARCH64_HWCAPS[:33]) if hwcap >> i & 1]
    names += [n for i, n in enumerate(AARCH64_HWCAPS[33:]) if hwcap2 >> i & 1]
    return frozenset(names)


@lru_cache(maxsize=None)
def cpu_features(cpu: str | None = None, qemu: str | None = None, guest: QemuGuest = AARCH64) -> frozenset[str]:
    """The CPU features (Linux HWCAP names; RISC-V: riscv64_features) qemu -cpu `cpu` (default: the guest's)
    gives a program: asked of the driver alone."""
    with QemuMachine(build(guest.driver, target=guest.target, flags=KEEP, depends=(COMMON,)), cpu=cpu, qemu=qemu,
                     counts=False, guest=guest) as m:
        m.pid
        return m.features


class QemuDied(EmulationFailed):
    """The qemu-user process died or stopped answering during a call (it is restarted by the next call)."""


class QemuMachine(GuestProcess):
    """One qemu-user process (qemu-aarch64 -cpu max; guest=RISCV64: qemu-riscv64 -cpu rv64,v=true,...) running
    `binary` (a build_for_qemu() program of that guest); call() its functions.
    counts=False starts it without the counting plugin (a call that asks for counts restarts it with the plugin);
    grace: seconds past a call's budget before the host kills a guest that does not answer."""

    def __init__(self, binary: Binary, *, seconds: float = DEFAULT_SECONDS, qemu: str | None = None,
                 cpu: str | None = None, counts: bool = True, grace: float = RESTART_GRACE,
                 guest: QemuGuest = AARCH64):
        if binary.target != guest.target:
            raise ValueError(f"QemuMachine(guest={guest.name}) runs {guest.target!r} builds (build_for_qemu(..., "
                             f"guest={guest.name.upper()})); {binary.path.name} is a {binary.target!r} build")
        self.guest = guest
        self.binary, self.seconds, self.cpu, self.counts, self.grace = binary, seconds, cpu or guest.cpu, counts, grace
        if guest is RISCV64 and "v" not in riscv64_features(0, 0, self.cpu):
            raise ValueError(f"cpu={self.cpu!r}: lowp's RISC-V driver needs the V extension (it seeds v0..v31 and is "
                             "built for rv64gcv): give v=true, e.g. " + riscv64_vector_length_cpu(128))
        self.qemu = qemu or guest.path()
        self.starts = 0               # processes started (the first, then one after each death, hang or kill)
        self._proc = None
        self._stderr = None
        self._code = [(s.vaddr, s.data) for s in binary.segments if s.flags & 1]
        self._counts = None           # the plugin's dump file (None: started without the plugin)
        self._log = None              # qemu's exec log when counting without the plugin (None: not logging)
        self._log_at = 0              # bytes of it read so far
        self._tb = {}                 # the logging process's translated blocks: address -> instructions
        self._listing = None          # the addresses of an in_asm listing not yet ended
        self._uncounted = 0           # uncounted calls in a row
        self._log_wanted = False      # no plugin: start the exec log (only once a call asks for counts)
        self._owner = os.getpid()     # the process whose child the qemu process is
        self._mnemonic = {}           # instruction word -> mnemonic
        self._fixed = {}              # a request's fixed words by what they hold (_fixed_words)

    # -- the process ------------------------------------------------------------------------------------------
    @property
    def restarts(self) -> int:
        """Processes started after the first: deaths, hangs and kills survived."""
        return max(0, self.starts - 1)

    @property
    def pid(self) -> int:
        """The process serving calls (started if none is)."""
        return self._process().pid

    def _process(self):
        if self._owner != os.getpid():     # a forked copy: the parent's process and counts file are not ours
            self._proc, self._counts, self._log, self._owner, self.starts = None, None, None, os.getpid(), 0
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        if self.qemu is None:
            raise EmulatorError(f"{self.guest.qemu} is not installed ({self.guest.install})")
        if self._proc is not None:
            self._reap()
        self.starts += 1
        self._stderr = tempfile.TemporaryFile()
        command = [self.qemu, "-cpu", self.cpu]
        self._drop_log()
        if self.counts and self.counting() == "plugin":
            if self._counts is None:
                self._counts = _temporary("lowp-qemu-counts-")
            command += ["-plugin", f"{plugin()},out={self._counts}"]
        elif self.counts and self._log_wanted:
            # No plugin loader (Debian's static qemu-user): qemu logs each translated block's instructions
            # (in_asm) and every block it executes (exec; nochain, so chained blocks are logged too)
            self._log, self._log_at, self._tb, self._listing = _temporary("lowp-qemu-log-"), 0, {}, None
            command += ["-d", "in_asm,exec,nochain", "-D", str(self._log)]
        self._proc = subprocess.Popen([*command, str(self.binary.path)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._stderr, bufsize=0)
        self._send(_op(OP_HELLO, self.guest.nx))
        _, self.page, hwcap, hwcap2 = np.frombuffer(self._receive(32, 30.0, "starting"), np.uint64).tolist()
        self.hwcap = (hwcap, hwcap2)            # as the auxiliary vector gives them (RISC-V: see riscv64_features)
        self.features = self.guest.features_of(hwcap, hwcap2, self.cpu)
        return self._proc

    def close(self) -> None:
        """End the process (it ends by itself too when this object is collected: its stdin closes)."""
        if self._proc is None:
            return
        try:
            if self._proc.poll() is None:
                self._proc.stdin.write(_op(OP_EXIT, self.guest.nx))
                self._proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self._reap()
        self._drop_log()
        if self._counts is not None:
            self._counts.unlink(missing_ok=True)
            self._counts = None

    def counting(self) -> str:
        """How this machine counts instructions: 'plugin' (lowp's TCG plugin: an add per executed block) where
        the qemu binary has the plugin loader and the plugin builds, else 'log' (qemu's exec log, parsed after
        the call: about a system call per executed block, so the log starts with the first counted call and a
        run of LOG_IDLE uncounted calls restarts the process without it)."""
        if self.qemu is not None and identify(self.qemu).plugins and plugin_unavailable() is None:
            return "plugin"
        return "log"

    def _drop_log(self) -> None:
        if self._log is not None:
            self._log.unlink(missing_ok=True)
            self._log = None

    def _reap(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for f in (proc.stdin, proc.stdout):
            f.close()

    def _died(self, what: str, cause: str) -> QemuDied:
        how = guest_death(self._proc, cause, self._stderr)
        self._reap()
        return QemuDied(f"{self.guest.qemu} {cause} while {what} {how}; the next call starts a new process")

    def _send(self, data: bytes) -> None:
        view = memoryview(data)
        fd = self._proc.stdin.fileno()
        while view:
            view = view[os.write(fd, view):]

    def _receive(self, n: int, timeout: float, what: str) -> bytes | None:
        """n bytes of the reply, or None when the guest did not answer within `timeout` (it is killed)."""
        out = bytearray(n)
        view, got = memoryview(out), 0
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0 or not ready([fd], timeout=left)[0]:
                if what == "starting":
                    raise self._died(what, f"did not answer within {timeout:g} s")
                self._reap()        # the guest's own timer did not stop the kernel (signals blocked?)
                return None
            k = os.readv(fd, [view[got:]])
            if k == 0:
                raise self._died(what, "ended")
            got += k
        return bytes(out)

    # -- the call ---------------------------------------------------------------------------------------------
    def call(self, symbol: str, *args, names=None, overread=None, seed=None, budget: int | None = None,
             seconds: float | None = None, count: bool = False, mnemonics: bool = False, memory=(), align=None,
             **options) -> CallResult:
        """Call `symbol` with numpy arrays (passed as pointers to copies), Pointers (whose addresses the guest
        driver writes, once it has mapped every buffer) and ints (64-bit scalars), and place the `memory` buffers,
        as Machine.call. seconds: the time budget (default the machine's); budget: an instruction budget, converted
        to seconds at INSTRUCTIONS_PER_SECOND (at least 1 s) when `seconds` is not given. align: {buffer name:
        offset from a 64-byte boundary} (lowp.emulator.placement: the driver ends each mapping at a page, the
        slack after the buffer holds canaries). Raises an EmulatorError (with .result) on a fault, a budget
        overrun, an undefined instruction or a dead guest."""
        if options:
            raise TypeError(f"unknown option(s) {', '.join(sorted(options))} (qemu runs without Unicorn's hooks: "
                            "no lockstep or trace)")
        counted = bool(count or mnemonics)
        seconds = self._seconds(seconds, budget)
        request = self._request(symbol, args, names, overread, seed, memory, seconds, counted,
                                check_alignment(align))
        t0 = time.perf_counter()
        self._log_wanted |= counted
        self._process()
        if counted and self._counts is None and self._log is None:     # started without counting: restart
            self.counts = True
            self._reap()
            self._process()
        elif not counted and self._log is not None:
            # the exec log slows every block: a run of uncounted calls (not the workspace query between counted
            # calls) restarts the process without it
            self._uncounted += 1
            if self._uncounted > LOG_IDLE:
                self._log_wanted = False
                self._reap()
                self._process()
        if counted:
            self._uncounted = 0
        if self._log is not None:
            self._read_log()                    # translations so far; the executions before this call are not its
        try:
            self._send(request.data)
        except OSError as e:
            raise self._died(request.what, f"stopped reading requests ({e})") from None
        reply = self._receive(request.reply_bytes, seconds + self.grace, request.what)
        if reply is None:
            raise self._unanswered(request.what, seconds)
        elapsed = time.perf_counter() - t0
        blocks = self._blocks() if counted else None
        return self._result(symbol, reply, request.arrays, request.names, seconds, elapsed, blocks, mnemonics)

    def _seconds(self, seconds: float | None, budget: int | None) -> float:
        """A call's time budget: `seconds`, else an instruction `budget` converted, else the machine's."""
        if seconds is None:
            seconds = max(1.0, budget / INSTRUCTIONS_PER_SECOND) if budget else self.seconds
        return seconds

    def _unanswered(self, what: str, seconds: float) -> BudgetExceeded:
        return BudgetExceeded(f"{self.guest.qemu} did not answer within {seconds + self.grace:g} s while {what} (the "
                              f"time budget of {seconds:g} s did not stop it in the guest: signals blocked?); "
                              "killed, the next call starts a new process", budget=seconds)

    def _request(self, symbol, args, names, overread, seed, memory, seconds, counted, align=None) -> "_Request":
        """One OP_CALL request's bytes (qemu_driver_common.h's protocol) and what its reply holds."""
        entry = self.binary.symbol(symbol)
        names = list(names) if names is not None else [f"arg{i}" for i in range(len(args))]
        if len(names) != len(args):
            raise ValueError(f"names: {len(names)} names for {len(args)} arguments")
        if len(args) + len(memory) > MAX_ARGS:
            raise ValueError(f"{symbol}: {len(args)} arguments and {len(memory)} memory buffers; the qemu driver "
                             f"places at most {MAX_ARGS}")
        overread = overread or {}
        scalars, kinds, arrays, array_names, data = [], [], [], [], []
        entries = [(name, a, 1) for name, a in zip(names, args)] + [(name, a, 3) for name, a in memory]
        for i, (name, a, kind) in enumerate(entries):
            if isinstance(a, Pointers):         # the driver writes the addresses: (slot, offset) words here
                a, kind = _pointer_words(a, entries, self.guest.pointer_bytes), 2
            if isinstance(a, np.ndarray) and a.ndim > 0:
                raw = a.tobytes()               # C order, whatever a's
                after = padded_after(name, len(raw), overread, align)
                kinds += [kind, len(raw), after]
                arrays.append(a)
                array_names.append(name)
                data.append(raw + bytes(-len(raw) % 8) if len(raw) % 8 else raw)
            elif kind == 3:
                raise ValueError(f"memory buffer {name!r}: expected a numpy array, got {type(a).__name__}")
            elif isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)):
                if not -(1 << 63) <= int(a) <= MASK64:
                    raise ValueError(f"argument {name!r}: {a} does not fit a 64-bit register")
                scalars.append((i, int(a) & MASK64))
                kinds += [0, 0, 0]
            else:
                raise ValueError(f"argument {name!r}: expected a numpy array (passed as a pointer) or an int, "
                                 f"got {type(a).__name__}")
        state = None if seed is None else (seed % REGISTER_STATES, min(len(args), 8))
        frame = (entry, tuple(scalars), tuple(kinds), max(1, int(seconds * 1e6)), counted)
        fixed = self._fixed_words(frame, state)
        reply_bytes = 8 * self.guest.header + sum(40 + len(d) for d in data)
        return _Request(b"".join([fixed, *data]), reply_bytes, arrays, array_names,
                        f"calling {symbol}({', '.join(names)})", frame)

    def _fixed_words(self, frame: tuple, state: tuple | None) -> bytes:
        """A request's fixed words (op .. the argument slots) as bytes, from its frame (entry, the scalar arguments
        by position, the argument slots' words, the budget in us, whether counted) and its seed's register state:
        the same for every call of a batch of one shape and one state, so kept (REGISTER_STATES x the shapes)."""
        key = (frame, state)
        words = self._fixed.get(key)
        if words is not None:
            return words
        entry, scalars, kinds, micro, counted = frame
        g = self.guest
        x, v = _seeded_words(*state, g.name) if state is not None else ((0,) * g.nx, bytes(8 * NV))
        x, stack = list(x), [0] * NSTACK
        for i, value in scalars:
            if i < 8:
                x[g.arg_base + i] = value
            else:
                stack[i - 8] = value
        slots = (*kinds, *(0,) * (3 * MAX_ARGS - len(kinds)))
        words = b"".join([struct.pack(f"<{5 + g.nx}Q", OP_CALL, micro, counted, len(kinds) // 3, entry, *x), v,
                          struct.pack(f"<{NSTACK + 3 * MAX_ARGS}Q", *stack, *slots)])
        if len(self._fixed) >= 4096:
            self._fixed.clear()
        self._fixed[key] = words
        return words

    # -- many calls: pipelined requests ---------------------------------------------------------------------------
    def call_many(self, symbol: str, calls, *, names=None, overread=None, seeds=None,
                  seconds: float | None = None, budget: int | None = None) -> list:
        """call(symbol, *args, names=, overread=, seed=) for each `args` of `calls` (and seed of `seeds`), in
        order, on this process: a CallResult per call, or the EmulatorError that call() would have raised for it
        (never raised here). The requests are pipelined: written back to back while the replies are read, so the
        round trip of the pipe is paid once per batch rather than per call; each reply still stands alone (the
        driver serves them one by one, a fault in call i is call i's reply), and a guest that dies or stops
        answering in call i costs call i (QemuDied, BudgetExceeded) and a new process for calls i+1 on, as it
        would one call at a time. Uncounted (no instruction counts). EmulatorError only if qemu cannot start."""
        seeds = list(seeds) if seeds is not None else [None] * len(calls)
        if len(seeds) != len(calls):
            raise ValueError(f"seeds: {len(seeds)} seeds for {len(calls)} calls")
        if self._log is not None:
            # a logging process restarts after LOG_IDLE uncounted calls: call() one by one keeps that as it is
            return call_each(self, symbol, calls, seeds=seeds, names=names, overread=overread, seconds=seconds,
                             budget=budget)
        seconds = self._seconds(seconds, budget)
        requests = _Built(lambda i: self._request(symbol, calls[i], names, overread, seeds[i], (), seconds, False),
                          len(calls))
        results = [None] * len(calls)

        def parse(i, reply, elapsed):
            r = requests[i]
            results[i] = self._outcome(lambda: self._result(symbol, reply, r.arrays, r.names, seconds, elapsed))
            return isinstance(results[i], BudgetExceeded)

        return self._pipelined(requests, results, seconds, parse)

    def _pipelined(self, requests, results, seconds, on_reply) -> list:
        """results, after the requests went through _pipeline (again with a new process after one died), up to a
        call that overran its budget: the rest are not run (errors.stopped_after)."""
        done = 0
        while done < len(requests):
            done = self._pipeline(requests, done, results, seconds, on_reply)
            if isinstance(results[done - 1], BudgetExceeded):
                return stopped_after(results[:done], len(requests))
        return results

    def call_batch(self, symbol: str, args, *, names, seeds, varying: dict, overread=None,
                   seconds: float | None = None, budget: int | None = None) -> list:
        """call_many's outcomes for calls that differ only in their seeds and in the contents of some array
        arguments: call i is call(symbol, *args, seed=seeds[i]) with each array argument named in `varying`
        replaced by varying[name][i] (an array of len(seeds) rows of that argument's shape and dtype). Every
        request then has the same size and layout, so they are laid out with numpy for many calls at once (the
        fixed words per register state, each array's bytes per call: the bytes call() would send), and so are
        the replies of the calls that returned with every canary intact; a reply reporting a signal or a damaged
        canary is parsed by call()'s own _result, so its error is the one call() raises."""
        n = len(seeds)
        names = list(names)
        if self._log is not None:
            calls = [tuple(varying[name][i] if name in varying else a for name, a in zip(names, args))
                     for i in range(n)]
            return self.call_many(symbol, calls, names=names, overread=overread, seeds=seeds, seconds=seconds,
                                  budget=budget)
        seconds = self._seconds(seconds, budget)
        template = self._request(symbol, args, names, overread, None, (), seconds, False)
        chunk = max(1, BATCH_BYTES // len(template.data))      # requests laid out at once, at most BATCH_BYTES
        results = []
        for start in range(0, n, chunk):
            part = {name: rows[start:start + chunk] for name, rows in varying.items()}
            results += self._call_rows(symbol, template, seeds[start:start + chunk], part, seconds)
            stopped = [i for i, r in enumerate(results) if isinstance(r, BudgetExceeded)]
            if stopped:
                return stopped_after(results[:stopped[0] + 1], n)
        return results

    def _call_rows(self, symbol, template: "_Request", seeds, varying: dict, seconds: float) -> list:
        rows = _Rows(self, template, seeds, varying)
        replies, times = [None] * len(rows), [0.0] * len(rows)
        results = [None] * len(rows)

        def keep(i, reply, elapsed):
            if any(reply[:8]):         # a signal: parsed now, since a runaway loop stops the batch
                results[i] = self._outcome(lambda: self._result(symbol, reply, template.arrays, template.names,
                                                                seconds, elapsed))
                return isinstance(results[i], BudgetExceeded)
            replies[i], times[i] = reply, elapsed
            return False

        results = self._pipelined(rows, results, seconds, keep)
        returned = [i for i, r in enumerate(replies) if r is not None]
        if not returned:
            return results
        block = np.frombuffer(b"".join(replies[i] for i in returned), np.uint8).reshape(len(returned), -1)
        words = block.view(np.uint64)
        clean = words[:, 0] == 0                              # status: returned, no signal
        stacked, at = [], 8 * self.guest.header
        for a in template.arrays:                             # each buffer: lo, base, hi, below, over, its bytes
            clean &= (words[:, at // 8 + 3] == MASK64) & (words[:, at // 8 + 4] == MASK64)
            n = a.nbytes
            stacked.append(block[:, at + 40:at + 40 + n].copy().view(a.dtype).reshape(len(returned), *a.shape))
            at += 40 + n + (-n % 8)
        ret = words[:, 5 + self.guest.ret_index]         # the return register (status 0: it returned)
        ret = ret.view(np.int64).tolist()
        for k, i in enumerate(returned):
            if clean[k]:
                results[i] = CallResult([s[k] for s in stacked], template.names, ret=ret[k], seconds=times[i])
            else:
                results[i] = self._outcome(lambda: self._result(symbol, replies[i], template.arrays, template.names,
                                                                seconds, times[i]))
        return results

    @staticmethod
    def _outcome(call):
        try:
            return call()
        except EmulatorError as e:
            return e

    def _pipeline(self, requests, first, results, seconds, on_reply) -> int:
        """Send requests[first:] to the process while reading their replies: on_reply(i, reply, seconds) for each;
        a call in which the guest died or stopped answering gets its error in results. The index after the last
        call answered or failed (all of them, unless the process died or hung, or on_reply said the call overran
        its budget while more were queued: then it was reaped, and the caller goes on from there with a new one)."""
        proc = self._process()
        to_guest, from_guest = proc.stdin.fileno(), proc.stdout.fileno()
        _widen(to_guest, from_guest)
        writer = _Writer(requests, first)
        received, at = bytearray(), 0          # the replies read so far; `at`: the first not yet taken
        i, n = first, len(requests)
        deadline = time.monotonic() + seconds + self.grace    # for call i's reply: calls run one after another
        t0 = time.perf_counter()
        os.set_blocking(to_guest, False)
        try:
            while i < n:
                left = deadline - time.monotonic()
                ready_now, can_write = ready([from_guest], [to_guest] if writer.pending() else [], max(0.0, left))
                if not ready_now and not can_write:
                    if time.monotonic() >= deadline:
                        self._reap()            # the guest's own timer did not stop the kernel (signals blocked?)
                        results[i] = self._unanswered(requests[i].what, seconds)
                        return i + 1
                    continue
                if can_write:
                    writer.write_some(to_guest)
                if not ready_now:
                    continue
                chunk = os.read(from_guest, 1 << 20)
                if not chunk:
                    results[i] = self._died(requests[i].what, "ended")
                    return i + 1
                del received[:at]
                received += chunk
                at = 0
                while i < n and len(received) - at >= requests[i].reply_bytes:
                    r = requests[i]
                    reply = received[at:at + r.reply_bytes]
                    at += r.reply_bytes
                    now = time.perf_counter()
                    if on_reply(i, reply, now - t0) and i + 1 < n:
                        self._reap()            # the guest would run the queued calls, each to its budget
                        return i + 1
                    t0, i = now, i + 1
                    deadline = time.monotonic() + seconds + self.grace
            return i
        finally:
            if self._proc is proc:
                os.set_blocking(to_guest, True)

    # -- counts -----------------------------------------------------------------------------------------------
    @cached_property
    def _driver_code(self) -> list[tuple[int, int]]:
        """(start, end) of the driver's functions: blocks that start there are not the kernel's."""
        return [(a, a + n) for name, (a, n) in self.binary.symbols.items() if name.startswith("lowpq_")
                or name == "main"]

    def _blocks(self) -> np.ndarray:
        """The executed blocks of the last call as (address, instructions, count) rows, the driver's left out."""
        if self._log is not None:
            executed = self._read_log()
            rows = np.array([(pc, self._tb[pc], n) for pc, n in executed.items()], np.uint64).reshape(-1, 3)
        else:
            rows = np.fromfile(self._counts, np.uint64).reshape(-1, 3)
        keep = np.ones(len(rows), bool)
        for lo, hi in self._driver_code:
            keep &= ~((rows[:, 0] >= lo) & (rows[:, 0] < hi))
        return rows[keep]

    def _read_log(self) -> Counter:
        """The exec log since the last read: each block's instructions (from its in_asm listing: 'IN:', one
        '0x<address>:' line per instruction, a blank line) into self._tb, and how often each block ran ('Trace
        <cpu>: <host> [<flags>/<guest pc>/...]'), whatever qemu 7.2 or 10 prints around them."""
        with open(self._log, "rb") as f:
            f.seek(self._log_at)
            text = f.read()
        text = text[:text.rfind(b"\n") + 1]          # a line still being written waits for the next read
        self._log_at += len(text)
        executed, block = Counter(), self._listing
        for line in text.decode(errors="replace").splitlines():
            if line.startswith("Trace "):
                executed[int(line.split("[", 1)[1].split("/", 2)[1], 16)] += 1
            elif line.startswith("IN:"):
                block = []
            elif block is not None and line.startswith("0x"):
                block.append(int(line.split(":", 1)[0], 16))
            elif block is not None and not line.strip():
                if block:
                    self._tb[block[0]] = len(block)
                block = None
        self._listing = block                        # a listing the last read cut (qemu writes it in one piece)
        missing = [pc for pc in executed if pc not in self._tb]
        if missing:
            raise EmulatorError(f"{self.guest.qemu}'s exec log has no in_asm listing of the block at {missing[0]:#x} "
                                "(a log format lowp does not know?): instruction counts cannot be given")
        return executed

    def _mnemonics(self, blocks: np.ndarray) -> dict:
        counts = Counter()
        riscv = self.guest is RISCV64
        for address, n, times in blocks.tolist():
            pc = address
            for _ in range(n):
                word = self._word(pc) or b"\0\0\0\0"
                m = self._mnemonic.get(word)
                if m is None:
                    if riscv:
                        from lowp.emulator.riscv import mnemonic
                        m = self._mnemonic[word] = mnemonic(word, pc)
                    elif self.guest is ARM:
                        from lowp.emulator.arm32.a32 import mnemonic as arm_mnemonic
                        m = self._mnemonic[word] = arm_mnemonic(word, pc)
                    elif self.guest is HEXAGON:
                        m = self._mnemonic[word] = self._disasm(pc)
                    else:
                        m = self._mnemonic[word] = aarch64_mnemonic(word, pc)
                counts[m] += times
                pc += len(word)
        return dict(counts.most_common())

    def _result(self, symbol, reply, arrays, names, seconds, elapsed, blocks=None, mnemonics=False) -> CallResult:
        g = self.guest
        head = struct.unpack_from(f"<{g.header}Q", reply)
        status, signo, code, addr, pc = head[:5]
        regs = head[5:]             # AArch64: x0..x30, sp; RISC-V 64: x0..x31
        out, buffers, at = [], [], 8 * g.header
        for a, name in zip(arrays, names):
            lo, base, hi, below, over = struct.unpack_from("<5Q", reply, at)
            at += 40
            n = a.nbytes
            out.append(np.frombuffer(reply, a.dtype, a.size, at).reshape(a.shape).copy())
            at += n + (-n % 8)
            buffers.append((name, a, lo, base, hi, _index(below), _index(over)))
        error = None
        if status == 1:
            error = self._signal_error(symbol, signo, code, addr, pc, regs, buffers, seconds)
        if error is None:
            error = _canary_damage(buffers)
        r = regs[g.ret_index]
        ret = r - (1 << 64) if r >> 63 else r
        instructions = int((blocks[:, 1] * blocks[:, 2]).sum()) if blocks is not None else None
        result = CallResult(out, names, ret=ret if status == 0 else 0, seconds=elapsed, fault=error,
                            instructions=instructions, mnemonics=self._mnemonics(blocks) if mnemonics else None)
        if error is not None:
            error.result = result
            raise error
        return result

    # -- faults -----------------------------------------------------------------------------------------------
    def _word(self, pc: int) -> bytes | None:
        """The instruction at pc: 4 bytes (AArch64), 2 or 4 (RISC-V with C); None outside the code."""
        for base, code in self._code:
            if base <= pc and pc + 2 <= base + len(code):
                n = 4
                if self.guest is RISCV64:
                    from lowp.emulator.riscv import length
                    n = length(code[pc - base:pc - base + 1])
                if pc + n <= base + len(code):
                    return code[pc - base:pc - base + n]
        return None

    def _disasm(self, pc: int) -> str:
        word = self._word(pc)
        if word is None:
            return "<not in the kernel's code>"
        if self.guest is HEXAGON:               # capstone 5 has no Hexagon: the word itself
            return f".word {int.from_bytes(word, 'little'):#010x}"
        if self.guest is ARM:
            from lowp.emulator.arm32.a32 import disassemble as text
            return text(word, pc)
        if self.guest is RISCV64:
            from lowp.emulator.riscv import disassemble as text
            return text(word, pc)
        return disassemble(word, pc)

    def _insn(self, pc: int):
        word = self._word(pc)
        if self.guest is ARM:
            from lowp.emulator.arm32.a32 import instruction
            return instruction(word, pc) if word is not None else None
        if self.guest is not AARCH64:
            return None
        return next(_capstone(detail=True).disasm(word, pc), None) if word is not None else None

    def _signal_error(self, symbol, signo, code, addr, pc, regs, buffers, seconds) -> EmulatorError:
        name = SIGNAL_NAMES.get(signo, f"signal {signo}")
        text = self._disasm(pc)
        if signo == 14:
            return BudgetExceeded(f"time budget of {seconds:g} s exhausted in {symbol} (a runaway loop?); stopped at "
                                  f"{pc:#x}: {text}", budget=seconds, pc=pc, instruction=text)
        if signo == 4:
            word = self._word(pc)
            encoding = int.from_bytes(word, "little") if word else None
            enc = f"encoding {encoding:#010x} " if encoding is not None else ""
            enc = f"encoding {encoding:#0{2 + 2 * len(word)}x} " if encoding is not None else ""
            return UndefinedInstruction(f"undefined instruction at {pc:#x}: {enc}({text}); {self.guest.qemu} -cpu "
                                        f"{self.cpu} does not implement it", pc=pc, encoding=encoding,
                                        instruction=text)
        if signo == 5:
            brk = {"riscv64": "ebreak", "arm": "bkpt", "hexagon": "trap0"}.get(self.guest.name, "brk")
            return Trap(f"the kernel executed {brk} at {pc:#x} ({text}): SIGTRAP under qemu, no debugger to take "
                        "it", pc=pc, kind=brk, instruction=text)
        if signo in (7, 11):
            return self._locate(name, addr, pc, regs, buffers)
        return EmulationFailed(f"{name} (si_code {code}) at {pc:#x} ({text}) in {symbol}, address {addr:#x}")

    def _locate(self, name, address, pc, regs, buffers) -> OutOfBounds:
        fetch = address == pc or self._word(pc) is None
        insn = None if fetch else self._insn(pc)
        access = None
        if self.guest is RISCV64 and not fetch:
            from lowp.emulator.riscv import memory_access
            access = memory_access(self._word(pc))
        if self.guest is ARM:
            from lowp.emulator.arm32.a32 import access_kind
            kind = "fetch" if fetch else access_kind(insn)
        else:
            kind = "fetch" if fetch else access[0] if access else "access" if self.guest is not AARCH64 else \
                _access_kind(insn)
        text = "(jump target)" if fetch else self._disasm(pc)
        where = f"by {text} at {pc:#x}"
        size = None if self.guest is ARM else _access_size(insn) if insn is not None else access[3] if access else None
        page = self.page
        hit = next((b for b in buffers if b[2] - page <= address < b[4] + page), None)
        if hit is None:
            return OutOfBounds(f"{name}: {kind} of unmapped or protected memory at {address:#x}, in no buffer, "
                               f"{where}", access=kind, address=address, size=size, pc=pc, instruction=text)
        bname, array, lo, base, hi, _, _ = hit
        nbytes = array.nbytes
        if self.guest is ARM:
            from lowp.emulator.arm32.a32 import effective_address as arm_address
            start = arm_address(insn, regs)
        else:
            start = effective_address(insn, lambda r: _xreg(regs, r)) if insn is not None else None
        if access is not None:                  # RISC-V: x[rs1] + offset (the registers at the fault)
            start = (regs[access[1]] + access[2]) & MASK64
        began = None
        if start is not None and 0 <= address - start < 256:
            # qemu reports the first byte of the page it could not access: report the first byte outside the
            # buffer (and its over-read) that the access touched instead
            end = hi
            began = start - base
            address = end if base <= start < end <= address else start
        offset = address - base
        msg = describe_out_of_bounds(kind, size, offset, bname, nbytes, array.dtype, array.shape, where, began,
                                     hi - base - nbytes)
        return OutOfBounds(msg, buffer=bname, offset=offset, nbytes=nbytes, access=kind, address=address, size=size,
                           pc=pc, instruction=text, itemsize=array.dtype.itemsize)


def _widen(*pipes: int) -> None:
    """Pipes of 1 MiB (Linux's default /proc/sys/fs/pipe-max-size) instead of 64 KiB: a batch's requests and
    replies then move in a few large reads and writes rather than one wake-up per ten calls."""
    import fcntl
    for fd in pipes:
        try:
            if fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) < PIPE_BYTES:
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except (OSError, AttributeError):       # a lower limit here, or not Linux: the default size works too
            pass


class _Rows:
    """call_batch's requests: row i is call i's request, as call() would build it, laid out with numpy for all the
    calls at once (they differ only in their seeds' fixed words and the varying arrays' bytes)."""

    def __init__(self, machine: "QemuMachine", template: "_Request", seeds, varying: dict):
        self.template, n = template, len(seeds)
        fixed = len(template.data) - sum(a.nbytes + (-a.nbytes % 8) for a in template.arrays)
        rows = np.empty((n, len(template.data)), np.uint8)
        rows[:] = np.frombuffer(template.data, np.uint8)      # the arrays that do not vary, the padding
        self._seed(rows, machine.guest, seeds)
        at = fixed
        for a, name in zip(template.arrays, template.names):
            if name in varying:
                value = np.ascontiguousarray(varying[name])
                if value.shape != (n, *a.shape) or value.dtype != a.dtype:
                    raise ValueError(f"varying[{name!r}]: expected {n} rows of {a.dtype}{list(a.shape)}, got "
                                     f"{value.dtype}{list(value.shape)}")
                rows[:, at:at + a.nbytes] = value.reshape(n, -1).view(np.uint8)
            at += a.nbytes + (-a.nbytes % 8)
        self.rows = rows

    def _seed(self, rows: np.ndarray, guest: QemuGuest, seeds) -> None:
        """The x and v words of each seeded call: its state's registers (_seeded_state), the scalar arguments in
        theirs, as _fixed_words writes them (the template's are a call without a seed: zeros and the scalars)."""
        seeded = [k for k, s in enumerate(seeds) if s is not None]
        if not seeded:
            return
        _, scalars, kinds, _, _ = self.template.frame
        xs, vs = _seeded_table(min(len(kinds) // 3, 8), guest.name)
        states = np.array([seeds[k] % REGISTER_STATES for k in seeded], np.int64)
        x = xs[states]
        for i, value in scalars:
            if i < 8:
                x[:, guest.arg_base + i] = value
        at = 8 * 5                                  # op, budget_us, count, nargs, fn; then x[], v[]
        rows[seeded, at:at + 8 * guest.nx] = x.view(np.uint8)
        at += 8 * guest.nx
        rows[seeded, at:at + 8 * NV] = vs[states].view(np.uint8)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> "_Request":
        t = self.template
        return _Request(memoryview(self.rows[i]), t.reply_bytes, t.arrays, t.names, t.what, t.frame)


class _Built:
    """requests[i], built when first asked for (by the writer, as the pipe takes it: building call i + k's request
    overlaps with the guest running call i) and kept (its reply is read later; a new process is sent it again)."""

    def __init__(self, build: Callable[[int], "_Request"], n: int):
        self._build, self._items = build, [None] * n

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i: int) -> "_Request":
        item = self._items[i]
        if item is None:
            item = self._items[i] = self._build(i)
        return item


class _Writer:
    """The requests from `first` on not yet written to the guest, written as far as its pipe takes them, up to
    WRITE_BYTES at a time in one writev (a write per request would wake the guest once per call)."""

    def __init__(self, requests: "_Built | _Rows", first: int):
        self.requests, self.next, self.views = requests, first, []

    def pending(self) -> bool:
        return bool(self.views) or self.next < len(self.requests)

    def write_some(self, fd: int) -> None:
        try:
            while self.pending():
                queued = sum(len(v) for v in self.views)
                while queued < WRITE_BYTES and self.next < len(self.requests) and len(self.views) < 512:
                    view = memoryview(self.requests[self.next].data)
                    self.views.append(view)
                    self.next += 1
                    queued += len(view)
                k = os.writev(fd, self.views)
                while self.views and k >= len(self.views[0]):
                    k -= len(self.views.pop(0))
                if k:
                    self.views[0] = self.views[0][k:]
        except BlockingIOError:
            pass
        except OSError:
            # the guest no longer reads (it died): its replies so far are still read, then its end
            self.next, self.views = len(self.requests), []


@dataclass
class _Request:
    """One call's request to the guest driver: its bytes, the bytes of its reply, the arrays it sends (and their
    names) and what it is, for an error ('calling f(M, N, ...)')."""
    data: bytes
    reply_bytes: int
    arrays: list
    names: list
    what: str
    frame: tuple = ()       # what its fixed words are made of (QemuMachine._fixed_words)


def _temporary(prefix: str) -> Path:
    fd, name = tempfile.mkstemp(prefix=prefix)
    os.close(fd)
    return Path(name)


# RISC-V registers a seed fills (by number): t0..t2, s0, s1, a0..a7 (from a(nargs)), s2..s11, t3..t6.
RISCV64_SEEDED = (5, 6, 7, 8, 9, *range(10, 18), *range(18, 28), *range(28, 32))


def seeded_registers_riscv64(seed: int, nargs: int) -> tuple[dict[int, int], bytes]:
    """The RISC-V register state a seed chooses: {number: value} for a(nargs)..a7, t0..t6, s0..s11 (random
    64-bit values from the seed, as seeded_registers draws AArch64's X registers) and Machine's V state (the
    same 512 bytes: 16 per vector register)."""
    _, vs = seeded_registers(seed, nargs)
    rng = np.random.default_rng([0x5EED, 0x5C5, seed % REGISTER_STATES])
    regs = [r for r in RISCV64_SEEDED if not 10 <= r < 10 + min(nargs, 8)]
    return dict(zip(regs, rng.integers(0, 2 ** 63, len(regs)).tolist())), vs


def seeded_registers_arm(seed: int, nargs: int) -> tuple[dict[int, int], bytes]:
    """The 32-bit Arm register state a seed chooses, as x[] indices of the ARM guest's request: the argument
    words nargs..7 (r(nargs)..r3, the unused stack argument slots) and r4..r12 (x[8..16]), random 32-bit values
    from the seed; and Machine's V state (d0..d31 are its first 256 bytes)."""
    _, vs = seeded_registers(seed, nargs)
    rng = np.random.default_rng([0x5EED, 0xA32, seed % REGISTER_STATES])
    regs = [r for r in range(ARM.nx) if not r < min(nargs, 8)]
    return dict(zip(regs, rng.integers(0, 2 ** 32, len(regs)).tolist())), vs


SEEDED_REGISTERS = {"aarch64": seeded_registers, "riscv64": seeded_registers_riscv64, "arm": seeded_registers_arm,
                    "hexagon": seeded_registers_hexagon}


@lru_cache(maxsize=None)
def _seeded_state(state: int, nargs: int, guest: str = "aarch64") -> tuple[np.ndarray, np.ndarray]:
    xs, vs = SEEDED_REGISTERS[guest](state, nargs)
    x = np.zeros(GUESTS[guest].nx, np.uint64)
    x[list(xs)] = list(xs.values())
    return x, np.frombuffer(vs, np.uint64)


@lru_cache(maxsize=None)
def _seeded_table(nargs: int, guest: str = "aarch64") -> tuple[np.ndarray, np.ndarray]:
    """Every register state's x words and v words, one row per state (call_batch's requests)."""
    states = [_seeded_state(state, nargs, guest) for state in range(REGISTER_STATES)]
    return np.stack([x for x, _ in states]), np.stack([v for _, v in states])


@lru_cache(maxsize=None)
def _seeded_words(state: int, nargs: int, guest: str = "aarch64") -> tuple[tuple[int, ...], bytes]:
    """The seeded registers as a request's x words and v bytes."""
    x, v = _seeded_state(state, nargs, guest)
    return tuple(x.tolist()), v.tobytes()


def _op(op: int, nx: int = NX) -> bytes:
    """A request without a call (HELLO, EXIT): the fixed words, whatever the op (the driver reads them all)."""
    return op.to_bytes(8, "little") + bytes(8 * (REQUEST_WORDS - NX + nx - 1))


def _index(word: int) -> int | None:
    return None if word == MASK64 else word


def _xreg(regs, name):
    if name == "sp":
        return regs[31]
    if name and name[0] in "xw" and name[1:].isdigit() and int(name[1:]) < 31:
        v = regs[int(name[1:])]
        return v & 0xFFFFFFFF if name[0] == "w" else v
    return None


def _access_kind(insn) -> str:
    """read or write, from the mnemonic (qemu's siginfo does not say which)."""
    if insn is None:
        return "access"
    m = insn.mnemonic
    if m.startswith(("st", "swp", "cas", "ldadd", "ldclr", "ldeor", "ldset", "ldsmax", "ldsmin", "ldumax", "ldumin")):
        return "write" if m.startswith(("st", "swp", "cas")) else "read-modify-write"
    return "read"


def _pointer_words(table: Pointers, entries, pointer_bytes: int = 8) -> np.ndarray:
    """A pointer table as the guest driver takes it: each entry (slot of its target << 48) | (offset mod 2^48); in
    a 32-bit guest (pointer_bytes 4) a 32-bit word (slot << 27) | (offset mod 2^27)."""
    slot_of = [i for i, (_, a, _) in enumerate(entries) if isinstance(a, (np.ndarray, Pointers)) and
               getattr(a, "ndim", 1) > 0]
    bits = 48 if pointer_bytes == 8 else 27
    if slot_of and slot_of[-1] >> (8 * pointer_bytes - bits):
        raise ValueError(f"pointer table: argument slot {slot_of[-1]} does not fit the driver's "
                         f"{8 * pointer_bytes - bits} bits")
    words = []
    for position, offset in pointer_targets(table, [entries[i][0] for i in slot_of]):
        if not -(1 << (bits - 1)) <= offset < (1 << (bits - 1)):
            raise ValueError(f"pointer table entry: offset {offset} does not fit the driver's {bits} bits")
        words.append((slot_of[position] << bits) | (offset & ((1 << bits) - 1)))
    return np.array(words, np.uint64 if pointer_bytes == 8 else np.uint32)


def _canary_damage(buffers) -> OutOfBounds | None:
    """A write into a buffer's allowed over-read or below its start, found after the call by the canaries."""
    for name, array, lo, base, hi, below, over in buffers:
        nbytes = array.nbytes
        if over is not None:
            return OutOfBounds(
                f"out-of-bounds write past the end of buffer {name!r} (into its allowed over-read): byte offset "
                f"{nbytes + over} was modified (found after the call by a canary)", buffer=name,
                offset=nbytes + over, nbytes=nbytes, access="write", address=base + nbytes + over, size=1,
                itemsize=array.dtype.itemsize)
        if below is not None:
            offset = lo + below - base
            return OutOfBounds(
                f"out-of-bounds write before the start of buffer {name!r}: byte offset {offset} was modified (found "
                "after the call: writes below a buffer are caught by a canary, not at the instruction)",
                buffer=name, offset=offset, nbytes=nbytes, access="write", address=lo + below, size=1,
                itemsize=array.dtype.itemsize)
    return None


__all__ = ["QemuMachine", "QemuDied", "QemuGuest", "AARCH64", "RISCV64", "ARM", "HEXAGON", "GUESTS", "arm_features",
           "seeded_registers_arm", "build_for_qemu", "unavailable",
           "qemu_path", "cpu_features", "riscv64_vector_length_cpu", "seeded_registers_riscv64", "DRIVER",
           "DEFAULT_SECONDS"]
