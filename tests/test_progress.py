"""Progress of a conformance run: plain lines without a terminal, a bar that fits the terminal with one."""
from __future__ import annotations

import io
import re

from lowp.conformance.run.progress import RunProgress

ROWS = [{"id": f"kernel_{i}:exact:claimed", "verdict": v, "claimed": c, "executed": 10 * i, "cases": 10 * i,
         "seconds": 0.5} for i, (v, c) in enumerate([("PASS", True), ("FAIL", False), ("FAIL", True)], 1)]


def test_without_a_terminal_one_plain_line_per_finished_check():
    out = io.StringIO()
    p = RunProgress(3, out)
    p.running(["kernel_1:exact:claimed"], 5, 10)          # nothing: a log gets no bar redraws
    for row in ROWS:
        p.step(row)
    p.close()
    lines = out.getvalue().splitlines()
    assert lines == ["[1/3] PASS kernel_1:exact:claimed: 10 of 10 cases, 0.5 s",
                     "[2/3] FAIL (not claimed) kernel_2:exact:claimed: 20 of 20 cases, 0.5 s",
                     "[3/3] FAIL kernel_3:exact:claimed: 30 of 30 cases, 0.5 s"]
    assert "\x1b[" not in out.getvalue()                      # no colour outside a terminal


def test_in_a_terminal_the_bar_fits_the_width_and_verdicts_are_coloured():
    out = io.StringIO()
    p = RunProgress(3, out, live=True, width=80)
    p.running(["a_very_long_kernel_name_that_would_wrap:xnnpack-rndnu:claimed", "another:model:full"], 123, 400)
    p.bar.refresh()
    for row in ROWS:
        p.step(row)
        p.running([], 0)
        p.bar.refresh()
    p.close()
    text = out.getvalue()
    assert "\x1b[32m" in text and "\x1b[31m" in text              # PASS green, claimed FAIL red
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    frames = [f for line in plain.split("\n") for f in line.split("\r") if f.strip()]
    assert frames and all(len(f) <= 80 for f in frames)          # no update wraps in an 80-column terminal
    assert any("ETA" in f and "/3" in f for f in frames)           # checks done of planned, ETA
    assert any("cases run" in f for f in frames)


def test_a_command_loop_counter_draws_only_in_a_terminal():
    from lowp.conformance.run.progress import Counter
    quiet, shown = io.StringIO(), io.StringIO()
    for stream, live in ((quiet, None), (shown, True)):
        with Counter("exhaustive", 1, stream, live=live) as tick:
            for i in range(4):
                tick(i + 1, f"a0 = {i}", total=4)
    assert quiet.getvalue() == ""
    assert "exhaustive" in shown.getvalue()
