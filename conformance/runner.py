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


def _worker(check: Check, conn, options: dict, setup=None) -> None:
    """A check's child process. setup: called first (the Ray backend's children register the check's kernel)."""
    faulthandler.disable()   # a crashing kernel is reported as a CRASH row, not as a dump on the parent's stderr

    def emit(event: dict) -> None:
        conn.send(event)
    try:
        if setup is not None:
            setup()
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


class Tracked:
    """What the parent knows of a check running in a child, from the child's events: the case it started last, the
    cases executed and planned. observe() gives the event to journal (an error becomes a CRASH row); crash() the
    CRASH row of a child that died or hung. The process pool and the Ray backend's tasks both keep one per check."""

    def __init__(self, check: Check):
        self.check, self.last_case, self.executed, self.planned = check, None, 0, None

    def observe(self, event: dict) -> dict:
        kind = event["event"]
        if kind == "plan":
            self.planned = event["cases"]
        elif kind == "start":
            self.last_case = event["case"]
        elif kind == "case":
            self.executed += 1
        elif kind == "error":
            row = self.crash(event["error"])
            row["traceback"] = event["traceback"]
            return row
        return event

    def crash(self, reason: str) -> dict:
        return _crash_row(self.check, reason, self.last_case, self.executed, self.planned)


def _died(proc) -> str:
    return f"the worker died (exit status {proc.exitcode}" + (
        f", signal {-proc.exitcode})" if proc.exitcode and proc.exitcode < 0 else ")")


def _timed_out(timeout: float) -> str:
    return f"timed out after {timeout:.0f} s (a kernel that loops forever?)"


def start_child(ctx, check: Check, options: dict, target=_worker, args: tuple = ()):
    """The child process running `target(check, conn, options, *args)`, and the end of the pipe its events come
    from."""
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=target, args=(check, child, options, *args), daemon=True)
    proc.start()
    child.close()
    return parent, proc


def child_events(check: Check, *, ctx, timeout: float, options: dict, target=_worker, args: tuple = ()):
    """Run one check in a child process (`ctx`'s) and yield what to journal as it happens: the child's events, an
    error or the child's death or a timeout as a CRASH row, the row last (the Ray backend's check server runs each
    check so; the process pool watches many children at once)."""
    conn, proc = start_child(ctx, check, options, target, args)
    tracked, started = Tracked(check), time.monotonic()
    try:
        while True:
            left = timeout - (time.monotonic() - started)
            if left <= 0:
                proc.kill()
                proc.join(5)
                yield tracked.crash(_timed_out(timeout))
                return
            if not conn.poll(left):
                continue            # the time is up
            try:
                event = tracked.observe(conn.recv())
            except (EOFError, OSError):
                proc.join(5)
                yield tracked.crash(_died(proc))
                return
            yield event
            if event["event"] == "row":
                proc.join(5)
                return
    finally:
        conn.close()
        if proc.is_alive():
            proc.kill()
            proc.join(5)


def open_journal(journal: Path, resume: bool) -> dict[str, dict]:
    """The rows to keep (resume: the journal's finished checks; else none, and the old journal goes)."""
    journal.parent.mkdir(parents=True, exist_ok=True)
    done = read_journal(journal) if resume else {}
    if not resume and journal.exists():
        journal.unlink()
    return done


class RunLog:
    """A run's journal as it is written, the rows it holds (with resume, the journal's finished checks first) and
    its progress display: the process pool and the Ray backend both write through one. record() appends an event
    (a row is also kept, shown, and handed to `on_row` as it comes: `lowp fuzz` reports counterexamples so);
    rows() closes it and gives the rows in plan order."""

    def __init__(self, checks: list[Check], journal: Path, resume: bool, progress: bool, on_row=None):
        from .progress import RunProgress
        self.checks, self.on_row = checks, on_row
        self.done = open_journal(journal, resume)
        self.pending = [c for c in checks if c.id not in self.done]
        self.bar = RunProgress(len(self.pending)) if progress else None
        self.log = journal.open("a")

    def record(self, event: dict) -> None:
        self.log.write(json.dumps(event) + "\n")
        self.log.flush()
        if event["event"] == "row":
            self.done[event["id"]] = event
            if self.bar:
                self.bar.step(event)
            if self.on_row:
                self.on_row(event)

    def running(self, tracked: list[Tracked]) -> None:
        """Show the checks in flight, with their cases executed of planned."""
        if self.bar:
            self.bar.running([t.check.id for t in tracked], sum(t.executed for t in tracked),
                             sum(t.planned or 0 for t in tracked))

    def rows(self) -> list[dict]:
        self.log.close()
        if self.bar:
            self.bar.close()
        return [self.done.get(c.id) or _not_run(c) for c in self.checks]


def run(checks: list[Check], journal: Path, *, jobs: int | None = None, resume: bool = False, timeout: float = 600,
        options: dict | None = None, progress: bool = True, ray: str | None = None, on_row=None,
        stop_at: float | None = None) -> list[dict]:
    """Run `checks` (in child processes) and return their rows in plan order. ray: run them as Ray tasks instead,
    on the cluster at this address ('local': a cluster of this machine started for the run; see ray_runner).
    on_row(row): called with each row as it comes. stop_at: a time.monotonic() after which no check starts (those
    in flight finish; the others are NOT RUN rows, and `resume` runs them later)."""
    if ray is not None:
        from .ray_runner import run as run_on_ray
        return run_on_ray(checks, journal, address=ray, jobs=jobs, resume=resume, timeout=timeout, options=options,
                          progress=progress, on_row=on_row, stop_at=stop_at)
    run_log = RunLog(checks, journal, resume, progress, on_row)
    jobs = max(1, jobs or os.cpu_count() or 1)
    ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    running: dict = {}   # conn -> (process, started, Tracked)
    queue = list(run_log.pending)
    while queue or running:
        if stopped(stop_at):
            queue.clear()
        while queue and len(running) < jobs:
            check = queue.pop(0)
            conn, proc = start_child(ctx, check, options or {})
            running[conn] = (proc, time.monotonic(), Tracked(check))
        for conn in wait(list(running), timeout=1.0):
            proc, _, tracked = running[conn]
            try:
                event = conn.recv()
            except (EOFError, OSError):
                proc.join(5)
                if tracked.check.id not in run_log.done:
                    run_log.record(tracked.crash(_died(proc)))
                del running[conn]
                continue
            run_log.record(tracked.observe(event))
        run_log.running([t for _, _, t in running.values()])
        now = time.monotonic()
        for conn, (proc, started, tracked) in list(running.items()):
            if now - started > timeout:
                proc.kill()
                proc.join(5)
                run_log.record(tracked.crash(_timed_out(timeout)))
                del running[conn]
    return run_log.rows()


def stopped(stop_at: float | None) -> bool:
    """Is the time to start checks up?"""
    return stop_at is not None and time.monotonic() >= stop_at


def _not_run(check: Check) -> dict:
    return check_row(check, reason="not run")
