"""How long a run's processes live: a check's child process (and whatever its kernel starts) never outlives the run.

Each child is the leader of a process group of its own, so the parent can kill it with everything the kernel forked
(a helper that holds the result pipe, a grandchild that loops), and so the terminal's Ctrl-C, sent to the
foreground process group, reaches the parent only: the parent decides what an interrupt means (kill the children,
write the partial report). A child asks the kernel to send it SIGKILL when its parent dies (Linux's
PR_SET_PDEATHSIG), so `kill -9` of lowp, a cancelled CI job or the OOM killer leaves no child looping at 100% CPU.
SIGTERM and SIGHUP on the parent become an `Interrupted` exception (a KeyboardInterrupt, as Ctrl-C is), so every
way of stopping a run goes through the same cleanup.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import signal
import struct
import sys
from contextlib import contextmanager

from lowp.emulator.signal_handlers import handling

PR_SET_PDEATHSIG = 1          # <linux/prctl.h>
GROUP = struct.Struct("<i")   # a process group id as the guardian reads it: > 0 watch it, < 0 forget it
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: a KeyboardInterrupt, so what cleans up after Ctrl-C cleans up after them."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_received: list[int] = []      # the stop signals the handler took (a library may re-raise them as KeyboardInterrupt)


def signal_of(interrupt: BaseException) -> int:
    """The signal behind a KeyboardInterrupt: its own, else the last SIGTERM or SIGHUP taken (Ray's blocking calls
    turn any exception of a signal handler into a plain KeyboardInterrupt), else SIGINT (Ctrl-C)."""
    return getattr(interrupt, "signum", None) or (_received[-1] if _received else signal.SIGINT)


def exit_status(interrupt: BaseException) -> int:
    """What a shell reports for a process its signal stopped: 128 + the signal (130 Ctrl-C, 143 SIGTERM)."""
    return 128 + int(signal_of(interrupt))


def _raise_interrupted(signum, frame):
    _received.append(signum)
    raise Interrupted(signum)


@contextmanager
def interruptible():
    """SIGTERM and SIGHUP raise Interrupted inside the block (Ctrl-C raises KeyboardInterrupt anyway); the handlers
    before it come back after. A signal ignored before stays ignored (`nohup lowp fuzz ...` goes on after a
    hangup). Only the main thread can set handlers: elsewhere the block changes nothing."""
    with handling(STOP_SIGNALS, _raise_interrupted) as main:
        if main:
            _received.clear()
        yield


class Guardian:
    """A process of its own that kills every check's process group when the run's process dies.

    A check's process dies with the run (PR_SET_PDEATHSIG), but what its kernel forked does not: it is the child of
    the check's process, not of the run, and nothing asks the kernel to end it. The guardian is forked before any
    check; the run tells it each check's group as it starts (and forgets it as it ends) through a pipe whose write
    end only the run holds (every check closes its copy first thing). When the run dies, however it dies (kill -9,
    the OOM killer, a cancelled CI job), the pipe reads end-of-file and the guardian kills the groups it still
    holds, the kernel's forked children with them; at a run's normal end it finds them gone and exits."""

    def __init__(self):
        read, self._write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:                           # the guardian
            os.close(self._write)
            _guard(read)
        os.close(read)
        _GUARDIAN_FDS.add(self._write)

    def watch(self, pgid: int) -> None:
        self._send(pgid)

    def forget(self, pgid: int) -> None:
        self._send(-pgid)

    def _send(self, value: int) -> None:
        try:
            os.write(self._write, GROUP.pack(value))
        except OSError:
            pass                                    # the guardian is gone: nothing to tell

    def close(self) -> None:
        if self._write in _GUARDIAN_FDS:
            _GUARDIAN_FDS.discard(self._write)
            os.close(self._write)
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


_GUARDIAN_FDS: set[int] = set()       # the write ends a forked check must not keep open


def _guard(read: int) -> None:
    """The guardian's life: collect groups until end-of-file, then kill those left. Nothing but os calls: it is a
    fork of a process that may have threads."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)        # the terminal's Ctrl-C is the run's to handle
        os.setpgid(0, 0)
    except OSError:
        pass
    groups: set[int] = set()
    pending = b""
    while True:
        try:
            data = os.read(read, 4096)
        except InterruptedError:
            continue
        except OSError:
            break
        if not data:
            break
        pending += data
        while len(pending) >= GROUP.size:
            (value,), pending = GROUP.unpack(pending[:GROUP.size]), pending[GROUP.size:]
            (groups.add if value > 0 else groups.discard)(abs(value))
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
    os._exit(0)


def become_child_of(parent_pid: int) -> None:
    """In a freshly forked child: lead a process group of its own, die with the parent, and take the default
    action on SIGINT, SIGTERM and SIGHUP (not the parent's Python handlers, which would turn them into an
    exception the check catches and reports)."""
    try:
        os.setpgid(0, 0)
    except OSError:
        pass                # already a group leader (the parent set it first)
    for s in (signal.SIGINT, *STOP_SIGNALS):
        if signal.getsignal(s) is not signal.SIG_IGN:     # nohup's ignored SIGHUP stays ignored
            signal.signal(s, signal.SIG_DFL)
    for fd in list(_GUARDIAN_FDS):                  # only the run may hold the guardian's pipe open
        try:
            os.close(fd)
        except OSError:
            pass
    _GUARDIAN_FDS.clear()
    die_with_parent(parent_pid)


def die_with_parent(parent_pid: int) -> None:
    """Ask the kernel for SIGKILL when the parent dies (Linux; elsewhere nothing); if it died before the request
    took effect, go now."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


_guardians: list[Guardian] = []        # the guardian of the run in progress in this process (guarded())


@contextmanager
def guarded():
    """A Guardian for the block (a run of checks): every group own_group() makes in it is watched."""
    guardian = Guardian()
    _guardians.append(guardian)
    try:
        yield guardian
    finally:
        _guardians.remove(guardian)
        guardian.close()


def own_group(pid: int) -> None:
    """From the parent, right after the fork: the child leads its own group (the child does it too; whichever runs
    first wins the race with a kill of the group), which the run's guardian watches."""
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass                # the child did it already, or has exec'd (spawn): it sets it itself
    for guardian in _guardians:
        guardian.watch(pid)


def kill_group(proc) -> None:
    """SIGKILL to the child's whole process group (the child and whatever its kernel forked), then reap it."""
    if proc.pid is None:
        return
    for guardian in _guardians:
        guardian.forget(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass                # the group is gone (or the child never became its leader: kill it alone)
    try:
        proc.kill()
    except (ProcessLookupError, OSError, AttributeError, ValueError):
        pass
    reap(proc, 5)


def reap(proc, seconds: float) -> bool:
    """Wait up to `seconds` for the child to exit (True if it did), by its exit status: not Process.join, which
    waits for its sentinel pipe to close, and a process the kernel forked may hold that pipe open long after."""
    import time
    deadline = time.monotonic() + seconds
    while proc.exitcode is None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


# OpenBLAS's controls (as numpy's wheels name them) and MKL's: (get, set) of the thread count.
BLAS_CONTROLS = (("openblas_get_num_threads", "openblas_set_num_threads"),
                 ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
                 ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
                 ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
                 ("MKL_Get_Max_Threads", "MKL_Set_Num_Threads"))


@functools.cache
def _blas_control():
    """(name, get, set) of the thread count of the BLAS numpy loaded, or None (as threadpoolctl finds it, without
    it: the BLAS libraries this process has mapped)."""
    try:
        libs = {line.split()[-1] for line in open("/proc/self/maps") if "blas" in line.lower() and "/" in line}
    except OSError:
        return None
    for path in sorted(libs):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for get, put in BLAS_CONTROLS:
            if hasattr(lib, get) and hasattr(lib, put):
                return put, getattr(lib, get), getattr(lib, put)
    return None


def single_thread_blas() -> str:
    """Limit the BLAS numpy loaded to one thread for good; returns what was done (the benchmarks' setting)."""
    control = _blas_control()
    if control is None:
        return "BLAS thread count not limited (no known BLAS control found)"
    name, _, put = control
    put(1)
    return f"BLAS limited to 1 thread ({name})"


@contextmanager
def one_blas_thread():
    """The BLAS numpy loaded limited to one thread for the block, then as it was: a run's parent holds it while it
    forks check children, which inherit it. A run's parallelism is its processes: OpenBLAS's threads, started in a
    child by a batch's readings (batch.exact3), spin on the other core after each call (a kernel's checks took
    20-30% more CPU with them), and a thread that does not block SIGALRM can take the guard's budget signal (the
    guard hands it on, kernels/guard.c). Set in the parent, not the child: OpenBLAS starts a thread of its own when
    a forked child sets its count. Held for as long as the parent forks: each restore to more threads starts
    OpenBLAS's threads again, and they spin some 50 ms before they sleep."""
    control = _blas_control()
    if control is None:
        yield
        return
    _, get, put = control
    before = get()
    if before == 1:     # not set again: after a fork OpenBLAS's set call starts its threads anew, even to one
        yield
        return
    put(1)
    try:
        yield
    finally:
        put(before)
