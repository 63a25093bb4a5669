"""What the qemu intrinsic backends share (QemuBackend in intrinsics.py, ScalableQemuBackend in sve.py,
RvvQemuBackend in rvv.py): the program of wrappers and the guest batch driver, and one long-lived qemu-user process
per (qemu, program, -cpu) serving every batch over a pipe.

    prog = program(wrappers_c, names, "lowp_w_", inputs=3, outputs=1, name="acle-qemu", target="linux")
    [result] = run(qemu, "max", prog, "vdotq_s32", imm=0, inputs=[acc, a, b], outputs=[(np.int32, (4,))])

program() builds the backend's wrappers with a generated dispatcher (`lowp_batch_call`: the wrapper at each index
called with its buffers, imm and n) and emulator/qemu_batch.c (the driver, whose protocol is described there) into
a static Linux program for the build target. run() chunks the batch to fit the driver's arena, sends each chunk as
one request and reads the outputs back. The process stays up for the next batch (qemu keeps its translated code);
it is started again after a crash, a hang (`timeout`) or in a forked child. Errors: qemu not installed names the
binary and `apt-get install qemu-user`; a guest that dies or does not answer raises EmulatorError naming the
intrinsic, the batch (registers, imm, -cpu) and qemu's exit status and last words.
"""
from __future__ import annotations

import atexit
import math
import os
import re
import select
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Sequence

import numpy as np

from lowp.emulator import buildcache


def ready(readers=(), writers=(), timeout: float = 0.0) -> tuple[set[int], set[int]]:
    """(the fds of `readers` that can be read: data or the end, the fds of `writers` that can be written), waiting
    up to `timeout` seconds for one: poll(), not select(), whose fd set ends at 1024 (a campaign's process holds
    more: wasmtime keeps a memfd per compiled module, and a check's child inherits them)."""
    poller = select.poll()
    for fd in readers:
        poller.register(fd, select.POLLIN)
    for fd in writers:
        poller.register(fd, select.POLLOUT)
    done = dict(poller.poll(max(0, math.ceil(timeout * 1000))))
    ended = select.POLLHUP | select.POLLERR     # as select() says: readable at the end, writable on an error
    return ({fd for fd in readers if done.get(fd, 0) & (select.POLLIN | ended)},
            {fd for fd in writers if done.get(fd, 0) & (select.POLLOUT | ended)})

from lowp.emulator.build import HERE, Binary, build, cache_dir
from lowp.emulator.errors import EmulatorError

DRIVER = HERE / "qemu_batch.c"
ARENA = 64 << 20          # the driver's LOWP_ARENA: every buffer of one request, each rounded up to ALIGN
ALIGN = 64
SLOTS = 8                 # the driver's LOWP_SLOTS: inputs + outputs of a wrapper
TIMEOUT = 300.0           # seconds one request may take
QEMU = {"linux": ("qemu-aarch64", "LOWP_QEMU_AARCH64"), "riscv64-linux": ("qemu-riscv64", "LOWP_QEMU_RISCV64"),
        "arm-linux": ("qemu-arm", "LOWP_QEMU_ARM")}
STATUS = {1: "the program has no wrapper at that index", 2: "too many buffers", 3: "larger than the driver's arena"}


def qemu_path(binary: str, env: str) -> str | None:
    """The qemu-user binary to run: $env if set, else `binary` on PATH, else None."""
    return os.environ.get(env) or shutil.which(binary)


@dataclass(frozen=True)
class QemuIdentity:
    """Which qemu-user binary this is: its path, name, version (`--version`'s first line and its numbers) and
    whether it has the TCG plugin loader (`-plugin` in its `-h`: Debian's static builds, qemu-user-static 7.2 and
    qemu-user 9.1+, have none)."""
    path: str
    name: str                          # 'qemu-aarch64'
    version: tuple[int, ...] | None    # (10, 0, 2); None when --version gave no number
    line: str                          # --version's first line, or the path when it gave none
    plugins: bool

    def __str__(self) -> str:
        """'qemu-aarch64 10.0.2 (/usr/bin/qemu-aarch64)': what rows and tables say ran."""
        number = ".".join(map(str, self.version)) if self.version else "(version unknown)"
        return f"{self.name} {number} ({self.path})"

    def at_least(self, *version: int) -> bool:
        return self.version is not None and self.version >= version


def identify(qemu: str) -> QemuIdentity:
    """The identity of the qemu-user binary at `qemu`, asked once per binary (cached by path and mtime)."""
    try:
        stamp = os.stat(qemu).st_mtime_ns
    except OSError:
        stamp = None
    return _identify(qemu, stamp)


@lru_cache(maxsize=None)
def _identify(qemu: str, stamp) -> QemuIdentity:
    def ask(flag):
        try:
            return subprocess.run([qemu, flag], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return ""
    line = next(iter(ask("--version").splitlines()), "") or qemu
    m = re.match(r"(\S+) version (\d+(?:\.\d+)*)", line)
    name = os.path.basename(m.group(1)) if m else os.path.basename(qemu)
    version = tuple(int(x) for x in m.group(2).split(".")) if m else None
    return QemuIdentity(qemu, name, version, line, "-plugin" in ask("-h"))


def qemu_version(qemu: str) -> str:
    """The first line of `qemu --version` (every qemu backend's describe() starts with it), else the path."""
    return identify(qemu).line


def not_installed(binary: str) -> str:
    """The reason a backend gives when its qemu-user binary is missing, and the fix."""
    return f"{binary} not installed (Debian: apt-get install qemu-user)"


def registers(name: str, p, a, shape: tuple, dtype, where: str = "") -> np.ndarray:
    """Argument `p` of intrinsic `name` as a C-contiguous (N, *shape) array of `dtype`, else a ValueError saying
    what it must be (`where`: at which vector length, for the scalable ones)."""
    a = np.ascontiguousarray(a)
    if a.dtype != dtype or a.shape[1:] != tuple(shape):
        raise ValueError(f"{name}: argument {p.name!r} must be an (N, {', '.join(map(str, shape))}) array of "
                         f"{np.dtype(dtype)}{where}, got {a.dtype}{list(a.shape)}")
    return a


def immediate(name: str, p, value) -> int:
    """An immediate argument, checked against its legal range (the wrappers switch over exactly those)."""
    imm = int(value)
    if not p.lo <= imm <= p.hi:
        raise ValueError(f"{name}: {p.name}={imm} outside [{p.lo}, {p.hi}]")
    return imm


@dataclass(frozen=True)
class Program:
    """A built batch program: which wrapper sits at which index, and how many input and output buffers each has."""
    binary: Binary
    names: tuple[str, ...]
    inputs: int
    outputs: int

    @property
    def qemu(self) -> str:
        """The qemu-user binary that runs it."""
        return QEMU[self.binary.target][0]

    def index(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise EmulatorError(f"{name} has no wrapper in this program ({self.binary.path.name})") from None


def dispatcher(symbols: Sequence[str], buffers: int) -> str:
    """lowp_batch_call: the wrapper at `index` called with its buffers, imm and n; 1 when there is none."""
    args = ", ".join([f"b[{k}]" for k in range(buffers)] + ["imm", "n"])
    cases = [f"    case {i}: {s}({args}); return 0;" for i, s in enumerate(symbols)]
    return "\n".join(["", "int lowp_batch_call(long index, void *const *b, long imm, long n) {",
                      "    switch (index) {", *cases, "    }", "    return 1;", "}", ""])


@lru_cache(maxsize=8)
def program(wrappers: str, names: tuple[str, ...], prefix: str, *, inputs: int, outputs: int, name: str,
            target: str, cpu: str | None = None) -> Program:
    """Build (cached) the wrappers (C text defining `prefix + name` for each name, each taking `inputs` then
    `outputs` buffers, imm and n) with their dispatcher and the batch driver, for a target of emulator.build."""
    if target not in QEMU:
        raise ValueError(f"target: expected one of {', '.join(QEMU)}, got {target!r}")
    if not 0 < inputs + outputs <= SLOTS:
        raise ValueError(f"a wrapper takes 1 to {SLOTS} buffers, not {inputs} + {outputs}")
    text = wrappers + dispatcher([prefix + n for n in names], inputs + outputs)
    source = buildcache.source_file(text, cache_dir() / "src", name, ".c")
    return Program(build(source, DRIVER, target=target, cpu=cpu), tuple(names), inputs, outputs)


class _Process:
    """One qemu-user process running a program at one -cpu, serving requests one at a time."""

    def __init__(self, qemu: str, cpu: str, program: Program):
        self.command = [qemu, "-cpu", cpu, str(program.binary.path)]
        self.lock = threading.Lock()
        self.proc = None

    def start(self) -> subprocess.Popen:
        if self.proc is None or self.proc.poll() is not None:
            self.stop()
            try:
                self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, bufsize=0)
            except OSError as e:
                raise EmulatorError(f"cannot start {self.command[0]}: {e}") from None
        return self.proc

    def stop(self) -> str:
        """End the process (closing its input ends it; killed if it does not); its exit and last words."""
        proc, self.proc = self.proc, None
        if proc is None:
            return ""
        try:
            proc.stdin.close()
            proc.wait(timeout=2.0)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        code = proc.returncode
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        tail = proc.stderr.read().decode(errors="replace").strip()[-500:]
        proc.stdout.close()
        proc.stderr.close()
        return how + (f": {tail}" if tail else "")

    def request(self, head: np.ndarray, payload: list[np.ndarray], reply: int, timeout: float) -> bytearray:
        """Send the header words and the inputs; the `reply` bytes of outputs that follow a status of 0, or an
        EmulatorError saying how the guest failed (the process is ended: the next request starts another)."""
        proc = self.start()
        try:
            for part in (head, *payload):
                view = memoryview(np.ascontiguousarray(part).reshape(-1).view(np.uint8))
                while view:
                    view = view[os.write(proc.stdin.fileno(), view):]
            status = self._read(proc, 8, timeout)
            code = int(np.frombuffer(status, "<u8")[0])
            if code:
                raise EmulatorError(f"the guest refused the request: {STATUS.get(code, code)}")
            return self._read(proc, reply, timeout)
        except (OSError, EOFError, TimeoutError, EmulatorError) as e:
            why = (f"did not answer within {timeout:g} s" if isinstance(e, TimeoutError) else
                   "ended" if isinstance(e, (OSError, EOFError)) else str(e))
            if isinstance(e, TimeoutError):
                proc.kill()
            raise EmulatorError(f"{why} ({self.stop()})") from None

    @staticmethod
    def _read(proc, n: int, timeout: float) -> bytearray:
        out = bytearray(n)
        view, got = memoryview(out), 0
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0 or not ready([fd], timeout=left)[0]:
                raise TimeoutError
            k = os.readv(fd, [view[got:]])
            if k == 0:
                raise EOFError
            got += k
        return out


_processes: dict[tuple, _Process] = {}
_owner = os.getpid()


def _process(qemu: str, cpu: str, program: Program) -> _Process:
    global _owner
    if _owner != os.getpid():       # a forked child: the parent's pipes are not ours to use
        _processes.clear()
        _owner = os.getpid()
    key = (qemu, cpu, program.binary.path)
    if key not in _processes:
        _processes[key] = _Process(qemu, cpu, program)
    return _processes[key]


@atexit.register
def close() -> None:
    """End every batch process this Python process started."""
    if _owner == os.getpid():
        for p in _processes.values():
            p.stop()
    _processes.clear()


def run(qemu: str, cpu: str, program: Program, name: str, *, inputs: Sequence[np.ndarray | None],
        outputs: Sequence[tuple], imm: int = 0, timeout: float = TIMEOUT) -> list[np.ndarray]:
    """Run wrapper `name` of `program` under `qemu -cpu cpu` over a batch: inputs are arrays with the registers on
    axis 0 (None: a buffer the wrapper does not read), outputs are (dtype, shape of one register); returns one
    array (n, *shape) per output."""
    index = program.index(name)
    if len(inputs) != program.inputs or len(outputs) != program.outputs:
        raise ValueError(f"{name}: the program's wrappers take {program.inputs} inputs and {program.outputs} outputs, "
                         f"not {len(inputs)} and {len(outputs)}")
    given = [np.ascontiguousarray(a) for a in inputs if a is not None]
    n = {len(a) for a in given}
    if len(n) != 1:
        raise ValueError(f"{name}: arguments have different batch sizes {sorted(n)}")
    n = n.pop()
    arrays = [np.ascontiguousarray(a) if a is not None else np.zeros((n, 0), np.uint8) for a in inputs]
    outputs = [(np.dtype(dt), tuple(shape)) for dt, shape in outputs]
    per = sum(a[0:1].nbytes for a in arrays) + sum(dt.itemsize * int(np.prod(s)) for dt, s in outputs)
    chunk = max(1, (ARENA - SLOTS * ALIGN) // max(per, 1))
    if per > ARENA - SLOTS * ALIGN:
        raise ValueError(f"{name}: one register set takes {per} bytes, more than the driver's {ARENA}")
    process = _process(qemu, cpu, program)
    results = [[] for _ in outputs]
    for start in range(0, n, chunk):
        part = [a[start:start + chunk] for a in arrays]
        m = len(part[0])
        sizes = [a.nbytes for a in part] + [m * dt.itemsize * int(np.prod(s)) for dt, s in outputs]
        head = np.array([1, index, imm, m, len(part), len(outputs), *sizes], "<i8")
        with process.lock:
            try:
                reply = process.request(head, part, sum(sizes[len(part):]), timeout)
            except EmulatorError as e:
                raise EmulatorError(f"{program.qemu} -cpu {cpu} running {name} on registers {start}..{start + m - 1} "
                                    f"of a batch of {n} (imm={imm}): {e}; the next batch starts a new process") from None
        offset = 0
        for k, (dt, s) in enumerate(outputs):
            size = sizes[len(part) + k]
            results[k].append(np.frombuffer(reply, dt, size // dt.itemsize, offset).reshape((m, *s)))
            offset += size
    return [np.concatenate(r) if r else np.zeros((0, *s), dt) for r, (dt, s) in zip(results, outputs)]


def split_operands(intr, args: Sequence):
    """An intrinsic's arguments as its batch of vector registers (each (n, lanes)) and its immediate; (vectors,
    immediate, n). ValueError where the vectors' batch sizes differ."""
    vecs, imm = [], 0
    for p, a in zip(intr.params, args):
        if p.kind == "vec":
            vecs.append(registers(intr.name, p, a, (p.lanes,), p.dtype))
        else:
            imm = immediate(intr.name, p, args[intr.params.index(p)])
    n = {len(v) for v in vecs}
    if len(n) != 1:
        raise ValueError(f"{intr.name}: vector arguments have different batch sizes {sorted(n)}")
    return vecs, imm, n.pop()


class BatchBackend:
    """The part of a qemu intrinsic backend that is not its family's: the qemu binary (`qemu`, None when absent),
    the program of its wrappers, and a batch through it. A subclass gives its build (`target`, `build_name`,
    `build_cpu`), its wrappers' C (`wrappers`, each `prefix + name` taking `inputs` then `outputs` buffers, imm
    and n), how it checks and lays out arguments, and its -cpu."""
    modeled: set = set()
    target: str
    build_name: str
    build_cpu: str | None = None
    prefix = "lowp_w_"
    inputs: int
    outputs: int

    def __init__(self, intrinsics, qemu: str | None = None):
        self._intrinsics = list(intrinsics)
        self.qemu = qemu or qemu_path(*QEMU[self.target])

    def wrappers(self, intrinsics) -> str:
        raise NotImplementedError

    @cached_property
    def program(self) -> Program:
        return program(self.wrappers(self._intrinsics), tuple(i.name for i in self._intrinsics), self.prefix,
                       inputs=self.inputs, outputs=self.outputs, name=self.build_name, target=self.target,
                       cpu=self.build_cpu)

    @property
    def binary(self) -> Binary:
        return self.program.binary

    def run(self, intr, args: Sequence) -> np.ndarray:
        """One intrinsic over a batch: its vector operands (up to `inputs`) and immediate in, one result register
        out (the fixed-width families; SVE, SME2 and RVV lay theirs out themselves)."""
        vecs, imm, _ = split_operands(intr, args)
        return self.batch(self.cpu, intr.name, vecs + [None] * (self.inputs - len(vecs)),
                          [(intr.result.dtype, (intr.result.lanes,))], imm)[0]

    def missing_qemu(self) -> str | None:
        """Why nothing runs here (qemu-user absent, and how to install it), or None."""
        return None if self.qemu else not_installed(QEMU[self.target][0])

    def batch(self, cpu: str, name: str, inputs, outputs, imm: int = 0) -> list[np.ndarray]:
        """run() under this backend's qemu (EmulatorError when it is not installed)."""
        if self.qemu is None:
            raise EmulatorError(self.missing_qemu())
        return run(self.qemu, cpu, self.program, name, inputs=inputs, outputs=outputs, imm=imm)
