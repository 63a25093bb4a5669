"""The conformance runner: where a run's checks go. This machine's process pool (run/pool.py: a child process per
check, the JSON Lines journal, resume) by default, or a Ray cluster (run/ray_runner.py), which reuses the pool's
journal and child processes. Both return the same rows in plan order.
"""
from __future__ import annotations

from pathlib import Path

from lowp.conformance.run import pool, ray_runner
from lowp.conformance.run.pool import (  # noqa: F401 - the runner's public names, as before the split
    JournalScan, JournalUnwritable, RunLog, RunStopped, Tracked, append_handle, child_events, listed, open_journal,
    read_journal, scan_journal, stopped)


def run(checks: list, journal: Path, *, jobs: int | None = None, resume: bool = False, timeout: float = 600,
        options: dict | None = None, progress: bool = True, ray: str | None = None, on_row=None,
        stop_at: float | None = None, reuse: bool | None = None) -> list[dict]:
    """Run `checks` (in child processes) and return their rows in plan order. ray: run them as Ray tasks instead,
    on the cluster at this address ('local': a cluster of this machine started for the run; see ray_runner).
    on_row(row): called with each row as it comes. stop_at: a time.monotonic() after which no check starts (those
    in flight finish; the others are NOT RUN rows, and `resume` runs them later). Ctrl-C, SIGTERM, SIGHUP or a
    journal that cannot be written: the children are killed and RunStopped raised, with the rows that finished.
    reuse: None, no verdict store; False, keep this run's PASS and FAIL verdicts for later runs; True, also take
    the verdicts kept for the same check and producer instead of running them (lowp.conformance.run.verdicts: the
    library campaigns keep, and take unless --fresh)."""
    if ray is not None:
        return ray_runner.run(checks, journal, address=ray, jobs=jobs, resume=resume, timeout=timeout,
                              options=options, progress=progress, on_row=on_row, stop_at=stop_at, reuse=reuse)
    return pool.run(checks, journal, jobs=jobs, resume=resume, timeout=timeout, options=options, progress=progress,
                    on_row=on_row, stop_at=stop_at, reuse=reuse)
