"""A run's output folder (`--out`): one run at a time writes there, and its reports appear whole or not at all.

The lock is flock(2) on OUT/.lowp.lock, taken without waiting: a second run there is refused with the first one's
pid and command, before it deletes any journal. The kernel drops the lock when the process holding it ends, however
it ends (kill -9 included), so a stale lock cannot outlive its run; the file itself stays (removing it would let
two runs lock two different files). Check processes close their copy of the lock at once (close_lock_in_child):
only the run's own process holds it.

Reports are written to a temporary name in the same folder and renamed into place (rename is atomic on POSIX):
a reader, or a run killed while writing, sees the old report or the new one, never half of one.
"""
from __future__ import annotations

import fcntl
import os
import secrets
import sys
from contextlib import contextmanager
from pathlib import Path

LOCK = ".lowp.lock"
_held: list = []          # the lock files this process holds (a forked child closes its copies)


class OutLocked(RuntimeError):
    """Another run is writing to this output folder."""


@contextmanager
def exclusive(out: Path, command: str):
    """Hold OUT's lock for the block; OutLocked at once if another process holds it."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK
    f = open(path, "a+", encoding="utf-8")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "a process that has not said which"
        f.close()
        raise OutLocked(f"{out} is in use by another lowp run ({holder}); wait for it to end, or give another "
                        f"--out") from None
    f.truncate(0)
    f.write(f"pid {os.getpid()}: {command}\n")
    f.flush()
    _held.append(f)
    try:
        yield
    finally:
        _held.remove(f)
        f.close()


def close_lock_in_child() -> None:
    """In a forked check process: close the inherited lock files, so that a process the kernel left behind cannot
    keep OUT locked after the run is gone (the parent's own descriptor keeps the lock)."""
    if not _held:
        return
    null = os.open(os.devnull, os.O_RDONLY)
    for f in _held:
        os.dup2(null, f.fileno())     # the number stays valid (a later close is harmless); the lock's reference goes
    os.close(null)


def command_line() -> str:
    """This process's command, for the lock's holder line."""
    return " ".join(["lowp", *sys.argv[1:]])[:300]


def write_text(path: Path, text: str) -> Path:
    """Write `text` to `path` through a temporary file in the same folder, flushed to disk, and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)     # the umask's mode, as write_text's would be
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
