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
import os
import signal
import sys
import threading
from contextlib import contextmanager

PR_SET_PDEATHSIG = 1          # <linux/prctl.h>
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
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, _raise_interrupted) for s in STOP_SIGNALS
              if signal.getsignal(s) is not signal.SIG_IGN}
    _received.clear()
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


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


def own_group(pid: int) -> None:
    """From the parent, right after the fork: the child leads its own group (the child does it too; whichever runs
    first wins the race with a kill of the group)."""
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass                # the child did it already, or has exec'd (spawn): it sets it itself


def kill_group(proc) -> None:
    """SIGKILL to the child's whole process group (the child and whatever its kernel forked), then reap it."""
    if proc.pid is None:
        return
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
