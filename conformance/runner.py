"""The conformance runner: every check in its own child process (a native kernel that crashes or hangs becomes a
CRASH row, and the run goes on), up to one worker per core, every event streamed to a JSON Lines journal so an
interrupted run loses nothing and `--resume` picks up where it stopped."""
from __future__ import annotations

import faulthandler
import json
import multiprocessing as mp
import os
import sys
import time
import traceback
from multiprocessing.connection import wait
from pathlib import Path

from .checks import Check, run_check
from .rows import check_row


def _worker(check: Check, conn, options: dict) -> None:
    faulthandler.disable()   # a crashing kernel is reported as a CRASH row, not as a dump on the parent's stderr

    def emit(event: dict) -> None:
        conn.send(event)
    try:
        run_check(check, emit, **options)
    except BaseException as e:  # an exception in Python becomes a CRASH row with its traceback
        conn.send({"event": "error", "id": check.id, "error": f"{type(e).__name__}: {e}",
                   "traceback": traceback.format_exc(limit=6)})
    finally:
        from lowp.kernels.executors import remove_fresh_copies
        remove_fresh_copies()      # a forked worker ends with os._exit: no atexit handler would
        conn.close()


def read_journal(path: Path) -> dict[str, dict]:
    """The finished rows of a journal, by check id (a truncated last line is ignored)."""
    rows = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if event.get("event") == "row":
                rows[event["id"]] = event
    return rows


def _crash_row(check: Check, reason: str, last_case: str | None, executed: int, planned: int | None = None) -> dict:
    """A check that did not finish: `executed` cases ran (the last one, `last_case`, did not return), of the
    `planned` it announced (at least as many as ran: a crash in the search leaves no plan behind it)."""
    return check_row(check, verdict="CRASH", cases=max(planned or 0, executed), executed=executed,
                     reason=reason + (f"; while running case {last_case}" if last_case else ""))


def run(checks: list[Check], journal: Path, *, jobs: int | None = None, resume: bool = False, timeout: float = 600,
        options: dict | None = None, progress: bool = True) -> list[dict]:
    """Run `checks` (in child processes) and return their rows in plan order."""
    journal.parent.mkdir(parents=True, exist_ok=True)
    done = read_journal(journal) if resume else {}
    if not resume and journal.exists():
        journal.unlink()
    pending = [c for c in checks if c.id not in done]
    jobs = max(1, jobs or os.cpu_count() or 1)
    ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    from .progress import RunProgress
    bar = RunProgress(len(pending)) if progress else None
    running: dict = {}   # conn -> (check, process, started, last_case, executed)
    with journal.open("a") as log:
        def record(event: dict) -> None:
            log.write(json.dumps(event) + "\n")
            log.flush()

        queue = list(pending)
        while queue or running:
            while queue and len(running) < jobs:
                check = queue.pop(0)
                parent, child = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_worker, args=(check, child, options or {}), daemon=True)
                proc.start()
                child.close()
                running[parent] = [check, proc, time.monotonic(), None, 0, None]   # ..., last case, executed, planned
            for conn in wait(list(running), timeout=1.0):
                state = running[conn]
                check, proc = state[0], state[1]
                try:
                    event = conn.recv()
                except (EOFError, OSError):
                    proc.join(5)
                    if check.id not in done:
                        how = f"the worker died (exit status {proc.exitcode}" + (
                            f", signal {-proc.exitcode})" if proc.exitcode and proc.exitcode < 0 else ")")
                        row = _crash_row(check, how, state[3], state[4], state[5])
                        record(row)
                        done[check.id] = row
                        bar and bar.step(row)
                    del running[conn]
                    continue
                if event["event"] == "plan":
                    state[5] = event["cases"]
                elif event["event"] == "start":
                    state[3] = event["case"]
                elif event["event"] == "case":
                    state[4] += 1
                elif event["event"] == "error":
                    row = _crash_row(check, event["error"], state[3], state[4], state[5])
                    row["traceback"] = event["traceback"]
                    event = row
                if event["event"] == "row":
                    done[check.id] = event
                    bar and bar.step(event)
                record(event)
            if bar:
                states = list(running.values())
                bar.running([st[0].id for st in states], sum(st[4] for st in states),
                            sum(st[5] or 0 for st in states))
            now = time.monotonic()
            for conn, state in list(running.items()):
                if now - state[2] > timeout:
                    state[1].kill()
                    state[1].join(5)
                    row = _crash_row(state[0], f"timed out after {timeout:.0f} s (a kernel that loops forever?)",
                                     state[3], state[4], state[5])
                    record(row)
                    done[state[0].id] = row
                    bar and bar.step(row)
                    del running[conn]
    if bar:
        bar.close()
    return [done.get(c.id) or _not_run(c) for c in checks]


def _not_run(check: Check) -> dict:
    return check_row(check, reason="not run")
