"""The process pool of this machine (lowp.conformance.run.runner chooses it or Ray): checks run in child processes,
one kernel's checks in one child (a native kernel that crashes or hangs becomes a CRASH row, its other checks go to
a new child, and the run goes on), up to one worker per core, every event streamed to a JSON Lines journal so an
interrupted run loses nothing and `--resume` picks up where it stopped.

A journal row carries what produced it (lowp.conformance.run.provenance); `--resume` keeps only the rows this run
would produce again and says how many it re-runs and why. The journal reader skips, counts and names the lines it
cannot read (cut by a kill, damaged by hand) instead of failing on them. A child and whatever its kernel starts
never outlive the run (lowp.conformance.run.processes); a row, once it came, is final; Ctrl-C, SIGTERM, SIGHUP or a
journal that cannot be written stop the run with RunStopped, which carries the rows that finished."""
from __future__ import annotations

import faulthandler
import gc
import json
import multiprocessing as mp
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path

from lowp.conformance.run.checks import Check, run_check
from lowp.conformance.run.processes import (become_child_of, exit_status, guarded, interruptible, kill_group, own_group,
                                            one_blas_thread, reap, signal_of)
from lowp.conformance.run.provenance import stale_reason
from lowp.conformance.report.rows import check_row

FINISH_SECONDS = 5.0      # how long a child that sent its row may take to exit before its group is killed


def _worker(checks: Check | list[Check], conn, options: dict, setup=None) -> None:
    """A child process running one check, or one kernel's checks in plan order (the process pool's jobs: a
    kernel's checks share the child's imports and caches). Each check runs a fresh copy of its kernel, from the
    static state a new process would see: not the parent's loaded library, whose state a fork would inherit, nor the
    one an earlier check of the job left. setup: called first (the Ray backend's children register the check's
    kernel)."""
    faulthandler.disable()   # a crashing kernel is reported as a CRASH row, not as a dump on the parent's stderr
    emit = _Messages(conn)
    try:
        if setup is not None:
            setup()
        for check in checks if isinstance(checks, list) else [checks]:
            try:
                _runner(check)(check, emit, **options, fresh=True)
            except BaseException as e:  # an exception in Python becomes a CRASH row with its traceback
                emit({"event": "error", "id": check.id, "error": f"{type(e).__name__}: {e}",
                      "traceback": traceback.format_exc(limit=6)})
    finally:
        emit.flush()
        from lowp.kernels.executors import remove_fresh_copies
        remove_fresh_copies()      # a forked worker ends with os._exit: no atexit handler would
        conn.close()


# A check's case outcomes go to the parent with its next other event (a case or batch starting, the row, an error),
# or CASES_A_MESSAGE of them at once: a message per case had the parent wake some 2,700 times a second on 2 cores,
# a third of a core the checks share. A start event is sent at once, so a child that dies in a generated case has
# sent every outcome before it and the case it died in; one that dies where no start precedes the calls (the search,
# the shrinking) may take up to CASES_A_MESSAGE - 1 unsent outcomes with it: its CRASH row's "executed" then counts
# fewer cases than ran, never more.
CASES_A_MESSAGE = 32


class _Messages:
    """A check process's emit(): events to the parent's pipe, case outcomes gathered (a list is one message)."""

    def __init__(self, conn):
        self.conn, self.pending = conn, []

    def __call__(self, event: dict) -> None:
        self.pending.append(event)
        if event["event"] != "case" or len(self.pending) >= CASES_A_MESSAGE:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.conn.send(self.pending[0] if len(self.pending) == 1 else self.pending)
            self.pending = []


def events_of(message) -> list[dict]:
    """A check process's message as its events: one event, or a list of them (_Messages)."""
    return message if isinstance(message, list) else [message]


def _runner(check: Check):
    """The run_check of the check's kind: a ggml vec_dot's (lowp.conformance.run.ggml) for a kernel the ggml room
    registered, else the GEMM kernels' (lowp.conformance.run.checks)."""
    from lowp.kernels.ggml.kernel import registered
    if registered(check.kernel) is not None:
        from lowp.conformance.run import ggml
        return ggml.run_check
    return run_check


@dataclass
class JournalScan:
    """What a journal holds: its finished rows by check id (the last of each), and the lines it could not read,
    as (line number, why)."""
    rows: dict[str, dict] = field(default_factory=dict)
    unreadable: list[tuple[int, str]] = field(default_factory=list)

    def note(self, journal: Path) -> str | None:
        """'skipped N unreadable line(s) of JOURNAL: line 4 (not JSON), ...', or None."""
        if not self.unreadable:
            return None
        shown = ", ".join(f"line {n} ({why})" for n, why in self.unreadable[:5])
        more = f", and {len(self.unreadable) - 5} more" if len(self.unreadable) > 5 else ""
        return f"skipped {len(self.unreadable)} unreadable line(s) of {journal}: {shown}{more}"


def scan_journal(path: Path) -> JournalScan:
    """Read a journal line by line; a line that is not a UTF-8 JSON object with an 'event', or a row that does not
    fit the row schema, is skipped and counted (a line cut by a kill, a file damaged by hand), never an error."""
    scan = JournalScan()
    data = path.read_bytes() if path.is_file() else b""
    for number, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        event, why = _event(raw)
        if event is None:
            scan.unreadable.append((number, why))
        elif event["event"] == "row":
            scan.rows[event["id"]] = event
    return scan


def _event(raw: bytes) -> tuple[dict | None, str]:
    """(the journal event on one line, '') or (None, why it is not one)."""
    try:
        event = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "not UTF-8"
    except ValueError:
        return None, "not JSON"
    if not isinstance(event, dict) or not isinstance(event.get("event"), str):
        return None, "not an event object"
    if event["event"] == "row":
        from pydantic import ValidationError

        from lowp.conformance.report.rows import validate_row
        if not isinstance(event.get("id"), str):
            return None, "a row without an id"
        try:
            validate_row(event)
        except ValidationError as e:
            return None, f"a row that does not fit the schema: {_first_error(e)}"
    return event, ""


def _first_error(e) -> str:
    first = e.errors()[0]
    return f"{'.'.join(map(str, first['loc']))}: {first['msg']}"


def read_journal(path: Path) -> dict[str, dict]:
    """The finished rows of a journal, by check id (lines it cannot read are skipped: scan_journal)."""
    return scan_journal(path).rows


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


def _child(parent_pid: int, target, *args) -> None:
    """A check process's first steps: a process group of its own, death with its parent, no copy of OUT's lock
    (lowp.conformance.run.processes, outfolder); then `target`."""
    # Everything inherited from the parent is frozen out of the collector's reach: hypothesis runs gc.collect() and
    # gc.get_referrers() when a process first seeds its PRNG (entropy.register_random), and over a campaign parent's
    # heap (millions of objects: every kernel entry and check) those took seconds per check, and touched (so
    # copied) every page the child shared with its parent.
    gc.freeze()
    become_child_of(parent_pid)
    from lowp.conformance.report.outfolder import close_lock_in_child
    close_lock_in_child()
    target(*args)


def start_child(ctx, check: Check, options: dict, target=_worker, args: tuple = ()):
    """The child process running `target(check, conn, options, *args)`, in a process group of its own, and the end
    of the pipe its events come from. The child is forked with the BLAS at one thread (one_blas_thread)."""
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(os.getpid(), target, check, child, options, *args), daemon=True)
    with one_blas_thread():
        proc.start()
    own_group(proc.pid)
    child.close()
    return parent, proc


def finish_child(proc) -> None:
    """After a child's row: let it exit (it removes its library copies), then kill its group: a process its kernel
    started may still hold the pipe or loop, and nothing it does now can change the row."""
    reap(proc, FINISH_SECONDS)
    kill_group(proc)


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
                kill_group(proc)
                yield tracked.crash(_timed_out(timeout))
                return
            if not conn.poll(left):
                continue            # the time is up
            try:
                message = events_of(conn.recv())
            except (EOFError, OSError):
                reap(proc, 5)
                yield tracked.crash(_died(proc))
                return
            for event in map(tracked.observe, message):
                yield event
            if event["event"] == "row":       # final: what the child's group does later cannot replace it
                conn.close()
                finish_child(proc)
                return
    finally:
        conn.close()
        kill_group(proc)


class RunStopped(Exception):
    """The run stopped before its end: Ctrl-C, SIGTERM or SIGHUP (`status` 128 + the signal), or a journal that
    could not be written (a full disk: status 1). `rows`: those that finished, the rest NOT RUN; `--resume`
    continues from the journal."""

    def __init__(self, rows: list[dict], why: str, status: int):
        super().__init__(why)
        self.rows, self.why, self.status = rows, why, status


class JournalUnwritable(OSError):
    """The journal could not be written (ENOSPC, EIO, ...): the run stops, as nothing it does now would last."""


def open_journal(journal: Path, resume: bool, producers: dict[str, dict] | None = None) -> tuple[dict, list[str]]:
    """The rows to keep and what to tell the user about them. resume: the journal's finished checks whose row this
    run would produce again (producers: by check id; lowp.conformance.run.provenance); else none, and the old journal
    goes."""
    journal.parent.mkdir(parents=True, exist_ok=True)
    if not resume:
        journal.unlink(missing_ok=True)
        return {}, []
    scan = scan_journal(journal)
    notes = [scan.note(journal)] if scan.unreadable else []
    if producers is None:
        return scan.rows, notes
    kept, stale = {}, {}
    for check_id, row in scan.rows.items():
        if check_id not in producers:
            continue            # a check this run does not plan: neither kept nor re-run
        why = stale_reason(row, producers[check_id])
        if why is None:
            kept[check_id] = row
        else:
            stale.setdefault(why, []).append(check_id)
    notes.append(_resume_note(journal, len(kept), stale))
    return kept, notes


def _resume_note(journal: Path, kept: int, stale: dict[str, list[str]]) -> str:
    """'kept N finished check(s) of JOURNAL; re-running M whose row is stale: K because WHY (ids), ...'."""
    text = f"kept {kept} finished check(s) of {journal}"
    if stale:
        reasons = "; ".join(f"{len(ids)} because {why} ({listed(ids)})" for why, ids in stale.items())
        text += f"; re-running {sum(map(len, stale.values()))} whose row is stale: {reasons}"
    return text


def listed(ids: list[str], most: int = 3) -> str:
    """The first `most` ids, and how many more."""
    return ", ".join(ids[:most]) + (f", and {len(ids) - most} more" if len(ids) > most else "")


def append_handle(journal: Path):
    """The journal opened for appending, on a new line: a line a kill cut short stays one unreadable line instead
    of swallowing the next event."""
    f = journal.open("a", encoding="utf-8")
    if f.tell() > 0:
        with journal.open("rb") as r:
            r.seek(-1, os.SEEK_END)
            if r.read(1) != b"\n":
                f.write("\n")
                f.flush()
    return f


# A case's outcome (some thousand events a kernel) reaches the journal's file with the next event that says what runs
# now (a case or batch starting, a row, an error or crash: someone watching the journal sees those at once): a write
# per event was a sixth of a campaign parent's CPU, which the check processes share the cores with. A run cut short
# loses only outcomes of checks it has no row of (which a resume runs again anyway).
PROGRESS_EVENTS = ("case",)


class RunLog:
    """A run's journal as it is written, the rows it holds (with resume, the journal's finished checks this run
    would produce again first) and its progress display: the process pool and the Ray backend both write through
    one. record() appends an event (a row is stamped with its producer, kept, shown, and handed to `on_row` as it
    comes: `lowp fuzz` reports counterexamples so); rows() closes it and gives the rows in plan order."""

    def __init__(self, checks: list[Check], journal: Path, resume: bool, progress: bool, on_row=None,
                 options: dict | None = None, reuse: bool | None = None):
        from lowp.conformance.run.progress import RunProgress
        from lowp.conformance.run.provenance import producers
        # reuse: None, no verdict store (conformance, fuzz); False, keep this run's verdicts for later campaigns
        # (--fresh); True, also take the verdicts kept for the same check and producer (run/verdicts.py)
        self.checks, self.on_row, self.journal, self.reuse = checks, on_row, journal, reuse
        self.producers = producers(checks, options)
        self.done, notes = open_journal(journal, resume, self.producers)
        for note in notes:
            print(f"resume: {note}", file=sys.stderr, flush=True)
        self.bar = None
        self.log = append_handle(journal)
        if reuse:
            self._reuse_kept_verdicts()
        self.pending = [c for c in checks if c.id not in self.done]
        self.bar = RunProgress(len(self.pending)) if progress else None

    def _reuse_kept_verdicts(self) -> None:
        """Journal, as this run's, every verdict an earlier campaign kept for the same check and producer
        (lowp.conformance.run.verdicts), and say how many."""
        from lowp.conformance.run import verdicts
        reused = 0
        for check in self.checks:
            if check.id not in self.done:
                row = verdicts.lookup(check.id, self.producers.get(check.id))
                if row is not None:
                    self.record(row)
                    reused += 1
        if reused:
            print(f"reused {reused} of {len(self.checks)} verdict(s) kept by earlier campaigns (same kernel, lowp "
                  f"and options; --fresh judges them again)", file=sys.stderr, flush=True)

    def record(self, event: dict) -> None:
        if event["event"] == "row":
            event["producer"] = self.producers.get(event["id"])
            if event["producer"] is None:
                del event["producer"]
        try:
            self.log.write(json.dumps(event) + "\n")
            if event["event"] not in PROGRESS_EVENTS:
                self.log.flush()
        except OSError as e:
            raise JournalUnwritable(e.errno, f"cannot write the journal {self.journal}: {e.strerror or e}") from e
        if event["event"] == "row":
            self.done[event["id"]] = event
            if self.reuse is not None:
                from lowp.conformance.run import verdicts
                verdicts.keep(event)
            if self.bar:
                self.bar.step(event)
            if self.on_row:
                self.on_row(event)

    def running(self, tracked: list[Tracked]) -> None:
        """Show the checks in flight, with their cases executed of planned."""
        if self.bar:
            self.bar.running([t.check.id for t in tracked], sum(t.executed for t in tracked),
                             sum(t.planned or 0 for t in tracked))

    def rows(self, reason: str = "not run") -> list[dict]:
        """The rows in plan order; a check without one is NOT RUN for `reason`."""
        try:
            self.log.close()
        except OSError:
            pass                # what was left in the buffer of a journal that cannot be written stays unwritten
        if self.bar:
            self.bar.close()
        return [self.done.get(c.id) or _not_run(c, reason) for c in self.checks]

    def stopped(self, error: BaseException) -> RunStopped:
        """The RunStopped of an interrupt or a journal that cannot be written, with the rows that finished."""
        import signal
        if isinstance(error, KeyboardInterrupt):
            name = signal.Signals(signal_of(error)).name
            return RunStopped(self.rows(f"interrupted ({name})"), f"interrupted by {name}", exit_status(error))
        return RunStopped(self.rows("the journal could not be written"), str(error), 1)


class _Child:
    """A child process running a job (one kernel's checks, in order: jobs_of()): the process, the pipe its events
    come on, and the check it is on: when that started and what the parent knows of it (Tracked)."""

    def __init__(self, ctx, job: list[Check], options: dict):
        self.job, self.at = job, 0
        self.conn, self.proc = start_child(ctx, job, options)
        self.started, self.tracked = time.monotonic(), Tracked(job[0])

    def next_check(self) -> bool:
        """After the current check's row: go on to the job's next check (False: the job is done)."""
        self.at += 1
        if self.at == len(self.job):
            return False
        self.started, self.tracked = time.monotonic(), Tracked(self.job[self.at])
        return True

    def rest(self) -> list[Check]:
        """The checks of the job after the current one (run in a new child when this one dies or hangs)."""
        return self.job[self.at + 1:]

    def stop(self) -> None:
        self.conn.close()
        kill_group(self.proc)


def jobs_of(checks: list[Check], workers: int) -> list[list[Check]]:
    """The process pool's jobs: each run of consecutive checks of one kernel (plan order keeps a kernel's checks
    together) as one child's, which pays the child's start (imports, the kernel's library, caches: some 0.3 s a
    check) once a kernel instead of once a check; one check a job where there are fewer kernels than workers, so
    a single kernel's checks still run side by side."""
    grouped: list[list[Check]] = []
    for check in checks:
        if grouped and grouped[-1][0].kernel == check.kernel:
            grouped[-1].append(check)
        else:
            grouped.append([check])
    return grouped if len(grouped) >= workers else [[check] for check in checks]


# What a check imports on first use (cffi and its C parser, pyelftools, the guard's and the stage edges' modules, the
# builtin kernels and with them Unicorn, the output stages: some 0.2 s of a process's first check), imported once by
# the pool's parent so that every child forked from it has them.
WARM_MODULES = ("cffi", "cffi.cparser", "elftools.elf.elffile", "lowp.kernels.guard", "lowp.emulator.x86.native",
                "lowp.conformance.search.stage_edges", "lowp.conformance.search.bounds",
                "lowp.conformance.run.identity", "lowp.kernels.builtin", "lowp.emulator.x86.bochs",
                "lowp.conformance.search.quantized", "lowp.conformance.contracts.output", "lowp.isa_models.requant",
                "lowp.kernels.xnnpack", "lowp.kernels.abi",
                # the claimed path's disassemblers, the emulated executors and the diagnosis: an XNNPACK kernel's
                # child imported these after its fork (capstone's 35 modules, iced-x86's 40 in 0.13 s), some 30-60 ms
                # a kernel with bytecode cached and 0.15 s where PYTHONDONTWRITEBYTECODE leaves none (an editable
                # install on such a machine)
                "capstone", "lowp.kernels.disasm", "lowp.kernels.emulated", "lowp.emulator.qemu",
                "lowp.emulator.qemu_batch", "lowp.emulator.aarch64.qemu_sme2", "lowp.emulator.wasm.machine",
                "lowp.emulator.wasm.relaxed", "lowp.emulator.wasm.build", "wasmtime", "unicorn.unicorn_py3.arch.arm64",
                "iced_x86", "lowp.conformance.diagnosis.variants", "lowp.conformance.diagnosis.stage_families",
                # numpy imports numpy.ma at a child's first np.unique (the diagnosis, the shrink): 30-70 ms a kernel
                "numpy.ma")


def _warm() -> None:
    """WARM_MODULES, and what a check's process loads once: the host's CPU features (CPUID), the guard library and
    the batch readings' C (each built into the cache if it is not there, loaded): 0.1-0.3 s of every child's first
    check before. Whatever fails here fails again in the check that needs it, which reports it."""
    import importlib
    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:     # a platform without that wheel: the kernels that need it skip, naming it
            pass
    from lowp.conformance.run import batch
    from lowp.emulator.host import host
    from lowp.kernels import guard
    for load in (host, guard._library, batch._compiled_readings):
        try:
            load()
        except Exception:       # noqa: BLE001 -- the check that needs it meets the same error and reports it
            pass


def run(checks: list[Check], journal: Path, *, jobs: int | None = None, resume: bool = False, timeout: float = 600,
        options: dict | None = None, progress: bool = True, on_row=None, stop_at: float | None = None,
        reuse: bool | None = None) -> list[dict]:
    """Run `checks` in child processes of this machine and return their rows in plan order (runner.run: the
    options)."""
    # the BLAS at one thread for the whole run, not only while each child forks: after a fork any set call starts
    # OpenBLAS's threads anew, which spin some 50 ms each time (14 CPU s of a 600-check sample's parent's 19)
    with interruptible(), guarded(), one_blas_thread():
        jobs = max(1, jobs or os.cpu_count() or 1)
        keyed = {**(options or {}), "timeout": timeout, "jobs": jobs}     # what else decides a verdict
        run_log = RunLog(checks, journal, resume, progress, on_row, keyed, reuse)
        try:
            _run_pool(run_log, jobs=jobs, timeout=timeout, options=options or {},
                      stop_at=stop_at)
        except (KeyboardInterrupt, JournalUnwritable) as e:
            raise run_log.stopped(e) from None
    return run_log.rows()


def _run_pool(run_log: RunLog, *, jobs: int, timeout: float, options: dict, stop_at: float | None) -> None:
    """The process pool: up to `jobs` children at once, each running a job (jobs_of), each check's events
    journaled as they come; a check has `timeout` seconds from its start; whatever ends the loop, no child is left
    running."""
    ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    running: dict = {}   # conn -> _Child
    queue = jobs_of(run_log.pending, jobs)
    if queue:
        _warm()
    try:
        while queue or running:
            if stopped(stop_at):
                queue.clear()
            while queue and len(running) < jobs:
                child = _Child(ctx, queue.pop(0), options)
                running[child.conn] = child
            for conn in wait(list(running), timeout=1.0):
                _take_event(run_log, running, running[conn], queue, stop_at)
            run_log.running([c.tracked for c in running.values()])
            now = time.monotonic()
            for conn, child in list(running.items()):
                if now - child.started > timeout:
                    del running[conn]
                    child.stop()
                    run_log.record(child.tracked.crash(_timed_out(timeout)))
                    _requeue(queue, child, stop_at)
    finally:
        for child in running.values():
            child.stop()


def _take_event(run_log: RunLog, running: dict, child: _Child, queue: list, stop_at: float | None) -> None:
    """Journal the child's next message (an event, or a check's case outcomes and the event after them). A row (final,
    a message's last) moves the child on to its job's next check, or ends it (its
    group goes); its death is the current check's CRASH row, and the job's other checks go to a new child."""
    try:
        message = events_of(child.conn.recv())
    except (EOFError, OSError):
        del running[child.conn]
        reap(child.proc, 5)
        row = child.tracked.crash(_died(child.proc))
        child.stop()
        run_log.record(row)
        _requeue(queue, child, stop_at)
        return
    for event in map(child.tracked.observe, message):      # a row (or an error's CRASH row) comes last
        run_log.record(event)
    if event["event"] != "row":
        return
    if child.next_check() and not stopped(stop_at):
        return                          # on to the job's next check, in the same child
    del running[child.conn]
    if child.at < len(child.job):       # the time to start checks is up: the check it began goes unrun
        child.stop()
        return
    child.conn.close()
    finish_child(child.proc)


def _requeue(queue: list, child: _Child, stop_at: float | None) -> None:
    """The rest of a dead or hung child's job, first in the queue (unless the time to start checks is up)."""
    if child.rest() and not stopped(stop_at):
        queue.insert(0, child.rest())


def stopped(stop_at: float | None) -> bool:
    """Is the time to start checks up?"""
    return stop_at is not None and time.monotonic() >= stop_at


def _not_run(check: Check, reason: str = "not run") -> dict:
    return check_row(check, reason=reason)
