"""Progress of a conformance run, on rich: in a terminal a width-aware bar with the checks running now, checks and
cases done of planned and an ETA, and each finished check's verdict (coloured) above it; without a terminal (CI, a
pipe) one plain line per finished check and nothing else, so a log reads top to bottom."""
from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
    TimeRemainingColumn

COLOURS = {"PASS": "green", "FAIL": "red", "CRASH": "bold red", "SKIPPED": "yellow", "NOT RUN": "yellow"}


def verdict_line(row: dict, done: int, total: int) -> str:
    """'[3/69] PASS kernel:check:domain: 351 of 351 cases, 1.2 s' (the not-claimed FAILs say so)."""
    verdict = row.get("verdict", "?")
    if verdict == "FAIL" and not row.get("claimed", True):
        verdict = "FAIL (not claimed)"
    cases = f"{row.get('executed', 0)} of {row.get('cases', 0)} cases"
    seconds = f", {row['seconds']:.1f} s" if isinstance(row.get("seconds"), (int, float)) else ""
    return f"[{done}/{total}] {verdict} {row.get('id', '?')}: {cases}{seconds}"


class RunProgress:
    """step(row) for every finished check; running(ids, cases_done, cases_planned) as work goes on; close()."""

    def __init__(self, total: int, stream=None, *, live: bool | None = None, width: int | None = None):
        self.stream = stream or sys.stderr
        self.total, self.done = total, 0
        self.cases_finished = 0       # cases executed by the finished checks
        self.live = self.stream.isatty() if live is None else live
        self.console = Console(file=self.stream, force_terminal=self.live, width=width,
                               no_color=not self.live, highlight=False, soft_wrap=False)
        self.bar = None
        if self.live:
            self.bar = Progress(
                TextColumn("{task.description}"), BarColumn(bar_width=None),
                MofNCompleteColumn(), TextColumn("checks, {task.fields[cases]} cases run"), TimeElapsedColumn(),
                TextColumn("ETA"), TimeRemainingColumn(), console=self.console, transient=True, expand=True)
            self.task = self.bar.add_task("starting", total=total, cases="0")
            self.bar.start()

    def running(self, ids: list[str], cases_done: int, cases_planned: int | None = None) -> None:
        """The checks running now, and the cases they have executed of those they planned."""
        if self.bar is None:
            return
        now = ", ".join(ids) or "finishing"
        self.bar.update(self.task, description=_shorten(now, 40), cases=f"{self.cases_finished + cases_done:,}")

    def step(self, row: dict) -> None:
        self.done += 1
        self.cases_finished += int(row.get("executed") or 0)
        line = verdict_line(row, self.done, self.total)
        if self.bar is not None:
            verdict = row.get("verdict", "")
            colour = COLOURS.get(verdict, "white") if row.get("claimed", True) or verdict != "FAIL" else "magenta"
            self.bar.console.print(f"[{colour}]{escape(line)}[/{colour}]")
            self.bar.advance(self.task)
        else:
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


class Counter:
    """A bar for one long loop of a command (`with Counter("exhaustive", 256) as tick: ... tick(i, text)`): in a
    terminal a width-aware rich bar with an ETA, gone when done; without one, nothing (the command prints its
    result)."""

    def __init__(self, description: str, total: int, stream=None, *, live: bool | None = None):
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.description, self.total = description, total
        self.bar = None

    def __enter__(self):
        if self.live:
            console = Console(file=self.stream, force_terminal=True, highlight=False)
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(bar_width=None), MofNCompleteColumn(),
                                TextColumn("ETA"), TimeRemainingColumn(), console=console, transient=True,
                                expand=True)
            self.task = self.bar.add_task(self.description, total=self.total)
            self.bar.start()
        return self.tick

    def tick(self, done: int, text: str = "", total: int | None = None) -> None:
        """`done` of the total (a new `total` where the loop learns it late), `text`: what it is at."""
        if self.bar is not None:
            label = f"{self.description}: {text}" if text else self.description
            self.bar.update(self.task, completed=done, description=_shorten(label, 50), total=total or self.total)
            self.total = total or self.total

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
