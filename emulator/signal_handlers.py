"""Signal handlers for the length of a block, taken back after: what a run of checks
(lowp.conformance.run.processes.interruptible) needs. (A Unicorn call keeps a handler standing in for the one before
it instead, from one call to the next: lowp.emulator.machine._dispatch.)"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


@contextmanager
def handling(signals, handler):
    """`handler` for each of `signals` inside the block; the handlers before it come back after. A signal ignored
    before stays ignored (`nohup lowp fuzz ...` goes on after a hangup), as does one whose handler is not Python's
    to restore. Only the main thread can set handlers: elsewhere the block changes nothing. Yields whether it could
    (whether this is the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield False
        return
    before = {s: signal.signal(s, handler) for s in signals if signal.getsignal(s) not in (signal.SIG_IGN, None)}
    try:
        yield True
    finally:
        for s, old in before.items():
            signal.signal(s, old)
