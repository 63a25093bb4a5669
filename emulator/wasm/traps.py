"""wasmtime's trap handlers, kept in place for every wasm call.

wasmtime turns a trap in compiled code (an out-of-bounds access the module rewrite reports, `unreachable`, a
division by zero) into a Python exception with the signal handlers it installs when its first Engine is made
(SIGILL, SIGSEGV, SIGBUS, SIGFPE); a fault that is not its own it hands to the handler it replaced. Anything that
installs a handler of its own afterwards and leaves it there (a native kernel's guard that was interrupted, a
library) takes the trap instead: the process dies of "Illegal instruction" on the next wasm trap, which CI saw
once in the middle of the test suite. So the handlers in place right after the first Engine are remembered, and
each wasm call puts back any that changed, for its own duration and after (wasmtime's chain to what they replaced,
so nothing of the others' is lost for faults outside wasm code).
"""
from __future__ import annotations

import ctypes
import signal

TRAP_SIGNALS = (signal.SIGILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE)


class _SigAction(ctypes.Structure):
    """glibc's struct sigaction on Linux (x86-64 and AArch64 hosts): handler, 1024-bit mask, flags, restorer."""
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16), ("flags", ctypes.c_int),
                ("restorer", ctypes.c_void_p)]


_libc = ctypes.CDLL(None, use_errno=True)
_wasmtimes: dict[int, _SigAction] = {}


def _current(signo: int) -> _SigAction:
    action = _SigAction()
    _libc.sigaction(int(signo), None, ctypes.byref(action))
    return action


def remember() -> None:
    """Called right after the process's first wasmtime Engine: its handlers are the ones in place now."""
    if not _wasmtimes:
        _wasmtimes.update({int(s): _current(s) for s in TRAP_SIGNALS})


def reinstate() -> list[int]:
    """Put wasmtime's handlers back where another took their place; the signals that were changed."""
    changed = [s for s, action in _wasmtimes.items() if _current(s).handler != action.handler]
    for s in changed:
        _libc.sigaction(s, ctypes.byref(_wasmtimes[s]), None)
    return changed
