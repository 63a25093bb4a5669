"""What lowp guarantees for a run (docs/reliability.md): a verdict is reused only for what produced it, a damaged
journal costs its damaged lines only, no check process outlives the run however it ends, an interrupted run
reports what finished, one run at a time writes an output folder, and reports appear whole.

The kernels are tests/reliability/kernels.c: right (exact), spin (loops with every signal blocked), forker (exact,
but leaves a helper process holding the result pipe). Timings here are only generous timeouts."""
import errno
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lowp.conformance.report import outfolder
from lowp.conformance.run import provenance
from lowp.conformance.run import pool

from .conftest import scalar_kernels_toml

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or platform.machine() != "x86_64",
                                reason="the test kernels run natively on x86-64 Linux (/proc, prctl)")

HERE = Path(__file__).parent / "reliability"
KERNELS_TOML = scalar_kernels_toml("rel_", "kernels.c", ("right", "spin", "forker", "spawner"))
FAST = ("--examples", "0", "--no-grid")     # the generated cases only: a check of `right` takes a fraction of a second


@pytest.fixture
def toml(tmp_path):
    """A private copy of the test kernels (tests edit their source) and their TOML file."""
    d = tmp_path / "kernels"
    d.mkdir()
    for name in ("kernels.c", "offset.h"):
        shutil.copy(HERE / name, d / name)
    (d / "kernels.toml").write_text(KERNELS_TOML)
    return d / "kernels.toml"


def lowp(*args, env=None):
    return subprocess.run([sys.executable, "-m", "lowp", *map(str, args)], capture_output=True, text=True,
                          timeout=180, env=env)


def _as_a_terminal_job():
    """In the child: SIGINT and SIGHUP as a terminal's foreground job has them. A test run started in the
    background of a non-interactive shell (`bash .ci/run &`, nohup) inherits them ignored, and lowp keeps an
    ignored signal ignored, as it should; the tests are about a run that can be interrupted."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def start(*args, env=None):
    """lowp in a session of its own (as a shell's job: Ctrl-C goes to its whole process group)."""
    return subprocess.Popen([sys.executable, "-m", "lowp", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, env=env,
                            preexec_fn=_as_a_terminal_job)


def conformance(toml, out, *more):
    return tuple(map(str, ("conformance", "--kernels", toml, "--no-builtin", "--out", out, *FAST, *more)))


def events(journal: Path) -> list[dict]:
    out = []
    for line in journal.read_bytes().split(b"\n") if journal.is_file() else ():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def wait_until(condition, what: str, seconds: float = 60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaps is dead: this sandbox's init may not reap orphans)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def spinning(proc, journal: Path, checks: int = 1, finished: int = 0) -> list[int]:
    """Once `checks` checks of rel_spin are inside the kernel's endless loop and `finished` rows are journaled: the
    run's child processes. Beside another kernel, rel_spin's two checks run one after the other in one child while
    the other kernel's run in another (pool.jobs_of); alone, side by side."""
    def ready():
        seen = events(journal)
        started = {e["check"] for e in seen if e.get("event") == "start" and e.get("check", "").startswith("rel_spin")}
        rows = sum(e.get("event") == "row" for e in seen)
        kids = children(proc.pid)
        return kids if len(started) >= checks and len(kids) >= checks and rows >= finished else None
    return wait_until(ready, "the spin kernel's checks to start")


def _leads_its_group(pid: int) -> bool | None:
    """Whether process `pid` leads its process group; None once it has ended (rel_right's child ends when its
    kernel's checks are done, which can be between listing the children and asking)."""
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return None


def all_gone(pids, seconds: float = 15) -> None:
    wait_until(lambda: not any(alive(p) for p in pids), f"processes {pids} to end", seconds)


def report_rows(out: Path) -> dict[str, str]:
    return {r["id"]: r["verdict"] for r in json.loads((out / "report.json").read_text())["rows"]}


# -- stale verdicts ------------------------------------------------------------------------------------------------
def test_resume_reruns_what_changed_and_says_why(toml, tmp_path):
    """The issue's tries: --resume after the kernel's source changed (C += 1) reported the old PASS; --seed 7
    --resume after a seed-0 run reported the seed-0 rows without a word."""
    out = tmp_path / "out"
    first = lowp(*conformance(toml, out, "--kernel", "rel_right"))
    assert first.returncode == 0, first.stderr
    assert set(report_rows(out).values()) == {"PASS"}
    again = lowp(*conformance(toml, out, "--kernel", "rel_right", "--resume"))
    assert again.returncode == 0 and "kept 2 finished check(s)" in again.stderr and "re-running" not in again.stderr
    source = toml.parent / "kernels.c"
    source.write_text(source.read_text().replace("exact(M, N, K, A, B, C, OFFSET)", "exact(M, N, K, A, B, C, 1)"))
    edited = lowp(*conformance(toml, out, "--kernel", "rel_right", "--resume"))
    assert edited.returncode == 1, edited.stdout
    assert set(report_rows(out).values()) == {"FAIL"}
    assert "kept 0 finished check(s)" in edited.stderr
    assert "re-running 2 whose row is stale: 2 because the kernel changed" in edited.stderr
    longer = lowp(*conformance(toml, out, "--kernel", "rel_right", "--resume", "--timeout", "900"))
    assert "because timeout 600 -> 900" in longer.stderr, longer.stderr     # a hang's verdict depends on it
    seed = lowp(*conformance(toml, out, "--kernel", "rel_right", "--resume", "--seed", "7", "--timeout", "900"))
    assert seed.returncode == 1 and "2 because seed 0 -> 7" in seed.stderr
    rows = [e for e in events(out / "journal.jsonl") if e["event"] == "row"]
    assert [r["producer"]["options"]["seed"] for r in rows] == [0, 0, 0, 0, 0, 0, 7, 7]


def test_the_kernel_key_covers_headers_flags_and_model_but_not_the_description(toml, forget_kernels):
    from lowp.kernels import load_toml
    from lowp.kernels.registry import _KERNELS
    k, = [k for k in load_toml(toml) if k.name == "rel_right"]
    key = provenance.kernel_key(k.name)
    assert provenance.kernel_key(k.name) == key             # stable: nothing in it depends on the process
    (toml.parent / "offset.h").write_text("#define OFFSET 1\n")  # a header the compiler read, not named anywhere
    assert provenance.kernel_key(k.name) != key
    (toml.parent / "offset.h").write_text("#define OFFSET 0\n")
    assert provenance.kernel_key(k.name) == key
    for change in ({"description": "says something else"}, {"cflags": ("-O1",)}, {"contract": "wrapping"}):
        before = {name: getattr(k, name) for name in change}
        for name, value in change.items():
            setattr(_KERNELS[k.name], name, value)
        changed = provenance.kernel_key(k.name)
        for name, value in before.items():
            setattr(_KERNELS[k.name], name, value)
        assert (changed == key) == ("description" in change), change


# -- journal damage ------------------------------------------------------------------------------------------------
def test_a_damaged_journal_costs_only_its_damaged_lines(toml, tmp_path):
    """The issue's tries: a trailing non-object line, invalid UTF-8 or a row without an id made --resume fail with
    a traceback (AttributeError, UnicodeDecodeError, KeyError)."""
    out = tmp_path / "out"
    assert lowp(*conformance(toml, out, "--kernel", "rel_right")).returncode == 0
    journal = out / "journal.jsonl"
    with journal.open("ab") as f:
        f.write(b'[1, 2]\n\xff\xfe not text\n{"event": "row", "verdict": "PASS"}\n{"event": "row", "id": "x"}\n'
                b'{"event": "case", "check": "rel_')          # cut by a kill: no newline
    resumed = lowp(*conformance(toml, out, "--kernel", "rel_right", "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert "skipped 5 unreadable line(s)" in resumed.stderr and "(not UTF-8)" in resumed.stderr
    assert "(not an event object)" in resumed.stderr and "(a row without an id)" in resumed.stderr
    assert "kept 2 finished check(s)" in resumed.stderr
    assert set(report_rows(out).values()) == {"PASS"}


def test_an_append_after_a_cut_line_starts_a_new_line(tmp_path):
    journal = tmp_path / "journal.jsonl"
    journal.write_bytes(b'{"event": "plan", "check": "a:model:full", "cases": 3}\n{"event": "start", "che')
    with pool.append_handle(journal) as f:
        f.write(json.dumps({"event": "plan", "check": "b:model:full", "cases": 1}) + "\n")
    scan = pool.scan_journal(journal)
    assert scan.unreadable == [(2, "not JSON")]
    assert [json.loads(line)["check"] for line in journal.read_text().splitlines() if line.endswith("}")] == \
        ["a:model:full", "b:model:full"]


# -- processes and signals -----------------------------------------------------------------------------------------
def test_kill_9_leaves_no_check_process_and_no_lock(toml, tmp_path):
    """The issue's try: kill -9 on lowp conformance while a kernel loops left its workers at 100% CPU."""
    out = tmp_path / "out"
    proc = start(*conformance(toml, out, "--kernel", "rel_*[nt]", "--jobs", "2", "--timeout", "300"))
    try:
        workers = spinning(proc, out / "journal.jsonl", finished=2)
    finally:
        proc.kill()
        proc.communicate()
    all_gone(workers)
    # The lock went with the process; the finished checks are kept, the spinning ones were never finished.
    resumed = lowp(*conformance(toml, out, "--kernel", "rel_right", "--resume", "--jobs", "2", "--timeout", "300"))
    assert resumed.returncode == 0, resumed.stderr
    assert "kept 2 finished check(s)" in resumed.stderr


def test_kill_9_takes_what_the_kernel_forked_with_it(toml, tmp_path):
    """The issue's try: a kernel's forked child survived kill -9 of lowp (the check's process died with lowp, its
    child did not). The run's guardian kills every check's process group when lowp dies."""
    out, helpers = tmp_path / "out", tmp_path / "helpers"
    proc = start(*conformance(toml, out, "--kernel", "rel_spawner", "--jobs", "1", "--timeout", "300"),
                 env={**os.environ, "LOWP_TEST_HELPERS": str(helpers)})
    try:
        pids = wait_until(lambda: [int(p) for p in helpers.read_text().split()] if helpers.exists() else None,
                          "the kernel's helper to start")
    finally:
        proc.kill()
        proc.communicate()
    assert pids
    all_gone(pids)


def test_ctrl_c_kills_the_checks_and_writes_the_partial_report(toml, tmp_path):
    """The issue's try: Ctrl-C printed a KeyboardInterrupt traceback and wrote no report."""
    out = tmp_path / "out"
    proc = start(*conformance(toml, out, "--kernel", "rel_*[nt]", "--jobs", "2", "--timeout", "300"))
    workers = spinning(proc, out / "journal.jsonl", finished=2)
    leads = [_leads_its_group(w) for w in workers]              # each child leads a group of its own
    assert True in leads and False not in leads, leads
    os.killpg(proc.pid, signal.SIGINT)                         # the terminal's Ctrl-C: to the foreground group
    _, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted: --resume continues" in stderr
    assert report_rows(out) == {"rel_right:model:full": "PASS", "rel_right:exact:claimed": "PASS",
                                "rel_spin:model:full": "NOT RUN", "rel_spin:exact:claimed": "NOT RUN"}
    all_gone(workers)


def test_a_second_run_on_the_same_out_is_refused_and_sigterm_reports(toml, tmp_path):
    """The issue's tries: two runs with the same --out both exited 0, the second deleting the first's journal;
    SIGTERM left the workers running."""
    out = tmp_path / "out"
    first = start(*conformance(toml, out, "--kernel", "rel_*[nt]", "--jobs", "2", "--timeout", "300"))
    workers = spinning(first, out / "journal.jsonl", finished=2)
    before = (out / "journal.jsonl").read_bytes()
    second = lowp(*conformance(toml, out, "--kernel", "rel_right"))
    assert second.returncode == 2
    assert f"is in use by another lowp run (pid {first.pid}: lowp conformance" in second.stderr
    assert (out / "journal.jsonl").read_bytes().startswith(before)        # untouched by the refused run
    first.send_signal(signal.SIGTERM)
    _, stderr = first.communicate(timeout=180)
    assert first.returncode == 143 and "interrupted: --resume continues" in stderr, stderr
    assert sorted(report_rows(out).values()) == ["NOT RUN", "NOT RUN", "PASS", "PASS"]
    all_gone(workers)


def test_a_helper_holding_the_result_pipe_does_not_undo_a_finished_row(toml, tmp_path):
    """The issue's try: a kernel that starts a helper process holding the result pipe turned a finished PASS into
    'CRASH (timed out)'. The row is final; the helper goes with the check's process group."""
    out, helpers = tmp_path / "out", tmp_path / "helpers"
    result = lowp(*conformance(toml, out, "--kernel", "rel_forker", "--timeout", "60"),
                  env={**os.environ, "LOWP_TEST_HELPERS": str(helpers)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert set(report_rows(out).values()) == {"PASS"}
    pids = [int(p) for p in helpers.read_text().split()]
    assert pids
    all_gone(pids)


def test_a_full_disk_stops_the_run_with_the_partial_report(toml, tmp_path, monkeypatch, capsys, forget_kernels):
    """The issue's try: a full disk wrote no report. The journal's disk fills after the first row."""
    from lowp.cli import main
    real = pool.append_handle

    class FillsUp:
        def __init__(self, f):
            self.f, self.rows = f, 0

        def write(self, text):
            if self.rows:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self.rows += '"event": "row"' in text
            return self.f.write(text)

        def __getattr__(self, name):
            return getattr(self.f, name)

    monkeypatch.setattr(pool, "append_handle", lambda path: FillsUp(real(path)))
    out = tmp_path / "out"
    assert main([*conformance(toml, out, "--kernel", "rel_right", "--jobs", "1")]) == 1
    err = capsys.readouterr().err
    assert "No space left on device" in err and "interrupted: --resume continues" in err
    assert sorted(report_rows(out).values()) == ["NOT RUN", "PASS"]
    monkeypatch.setattr(pool, "append_handle", real)
    from lowp.kernels.registry import _KERNELS
    for name in [n for n in _KERNELS if n.startswith("rel_")]:
        _KERNELS.pop(name)                  # the next command registers them again
    assert main([*conformance(toml, out, "--kernel", "rel_right", "--resume", "--jobs", "1")]) == 0
    assert "kept 1 finished check(s)" in capsys.readouterr().err


def test_fuzz_is_locked_interruptible_and_reports(toml, tmp_path):
    out = tmp_path / "fuzz"
    args = ("fuzz", "--kernels", toml, "--no-builtin", "--kernel", "rel_spin", "--out", out, *FAST,
            "--budget", "10m", "--jobs", "2", "--timeout", "300")
    proc = start(*args)
    workers = spinning(proc, out / "rounds" / "seed-1" / "journal.jsonl", checks=2)
    refused = lowp(*args)
    assert refused.returncode == 2 and "is in use by another lowp run" in refused.stderr
    os.killpg(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr
    assert "interrupted: --resume continues" in stderr
    assert (out / "fuzz.md").is_file() and json.loads((out / "fuzz.json").read_text())["summary"]["rounds"] == 1
    all_gone(workers)


# -- the lock and the reports --------------------------------------------------------------------------------------
def test_the_lock_refuses_a_second_holder_and_frees_on_exit(tmp_path):
    with outfolder.exclusive(tmp_path, "lowp first"):
        with pytest.raises(outfolder.OutLocked, match=r"in use by another lowp run \(pid \d+: lowp first\)"):
            with outfolder.exclusive(tmp_path, "lowp second"):
                pass
    with outfolder.exclusive(tmp_path, "lowp third"):
        pass


def test_reports_are_renamed_into_place(tmp_path, monkeypatch):
    """A report is written whole under a temporary name and renamed: a failure mid-write leaves the old one."""
    path = tmp_path / "report.md"
    outfolder.write_text(path, "old\n")

    def no_rename(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "replace", no_rename)
    with pytest.raises(OSError):
        outfolder.write_text(path, "new\n")
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["report.md"]


def _report_frozen(check, conn, options):
    import gc
    conn.send(gc.get_freeze_count())
    conn.close()


def test_a_check_process_keeps_the_collector_off_its_parents_heap():
    """A check's child freezes what it inherited (pool._child): hypothesis's first PRNG seeding runs gc.collect() and
    gc.get_referrers(), which over a campaign parent's millions of objects took seconds per check."""
    import gc
    import multiprocessing as mp
    from lowp.conformance.run.checks import Check
    inherited = [[i] for i in range(10000)]
    conn, proc = pool.start_child(mp.get_context("fork"), Check("k", "exact", "claimed", True), {},
                                  target=_report_frozen)
    frozen = conn.recv()
    proc.join(10)
    assert gc.get_freeze_count() == 0 and frozen >= len(inherited), frozen


BLAS_THREADS_OF_FORKS = """
import os, sys, numpy as np
from pathlib import Path
from lowp.conformance.run import pool, processes
control = processes._blas_control()
if control is None or control[1]() < 2:
    sys.exit(3)                     # no known BLAS control, or a BLAS at one thread already
np.ones((64, 64)) @ np.ones((64, 64))
held = []
pool._run_pool = lambda *args, **kwargs: held.append(control[1]())
pool.run([], Path(sys.argv[1]), jobs=1, progress=False)
print("held", held, "after", control[1]())
with processes.one_blas_thread():     # the pool's parent: a child forked inside its own one_blas_thread
    for _ in range(3):
        with processes.one_blas_thread():
            pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        print("threads", len(os.listdir("/proc/self/task")))
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_a_parent_forking_check_processes_starts_no_blas_threads(tmp_path):
    """A run holds the BLAS at one thread while it forks its children, and a child's fork inside that sets nothing:
    OpenBLAS shuts its threads down at a fork, and any set call after it (even to one) starts them anew, each
    spinning some 50 ms, which was 14 CPU s of a 600-check campaign parent's 19."""
    done = subprocess.run([sys.executable, "-c", BLAS_THREADS_OF_FORKS, str(tmp_path / "journal.jsonl")],
                          capture_output=True, text=True, timeout=120)
    if done.returncode == 3:
        pytest.skip("numpy's BLAS has no known thread control here, or runs at one thread already")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("held [1] after ") and int(lines[0].split()[-1]) >= 2, lines   # and restored
    assert lines[1:] == ["threads 1"] * 3, lines
