"""pytest plugin (installed with lowp; pytest loads it automatically):

- fixture `lowp_check`: `lowp_check(kernel, contract=None, domain='claimed', examples=100, seed=0, grid=False,
  timeout=600)` runs a conformance check and returns its row;
- marker `@pytest.mark.lowp(kernel, contract=None, domain='claimed', ...)` (the same keywords): the same check runs
  before the test body;
- `pytest --lowp-report=FILE`: a Markdown conformance report (and FILE.json, in the schema of report.json) of
  every check the session made, those that failed or crashed included; each failure with the one-line repro that
  `lowp conformance replay` runs (a kernel registered from Python: the pytest node that reruns it).

The example database (lowp.conformance.run.example_database) is `--lowp-database=DIR|URL` if given, else
$LOWP_DATABASE, else pytest's cache folder (.pytest_cache/d/lowp-examples, as hypothesis keeps its own in
.hypothesis): a rerun replays the counterexamples earlier sessions found before it searches anew; give the folder
or Redis URL `lowp conformance` uses to share them with its runs (`-p no:cacheprovider` and no database named:
none).

Each check runs in a child process through the conformance runner, as `lowp conformance` runs it, so a kernel that
segfaults or hangs fails its test and the session goes on. The test's outcome follows the row: FAIL is a failed
test whose message is the minimal counterexample (`ConformanceFailure`, with `.row`); CRASH (the kernel died,
Python raised, or it ran past `timeout` seconds) is a failed test whose message gives the reason, the case it was
running and any traceback; SKIPPED (this machine cannot run the kernel) is a skipped test with the reason.
`lowp.conformance.check()` is the same check in the calling process, for use outside pytest.

Under pytest-xdist (`pytest -n 2 --lowp-report=FILE`) each worker hands its rows to the controller when it finishes,
and the controller writes one merged report; rows are in the order of the tests that made them, as in a run without
xdist.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

_rows = pytest.StashKey[list]()    # (test position in the collection, test node id, row), in the order run
_positions = pytest.StashKey[dict]()


def pytest_addoption(parser):
    parser.getgroup("lowp").addoption("--lowp-report", metavar="FILE", default=None,
                                      help="write a Markdown report (and FILE.json) of the lowp checks run")
    parser.getgroup("lowp").addoption("--lowp-database", metavar="DIR|URL", default=None,
                                      help="the example database of lowp's checks: a folder or a Redis URL "
                                           "(default: $LOWP_DATABASE, else .pytest_cache/d/lowp-examples)")


def pytest_configure(config):
    config.addinivalue_line("markers", "lowp(kernel, contract=None, domain='claimed', examples=100, seed=0, "
                                       "grid=False, timeout=600): run a lowp conformance check in a child process")
    config.stash[_rows] = []
    config.stash[_positions] = {}


def pytest_collection_finish(session):
    # xdist workers all collect the same items in the same order, so positions sort the merged report like a
    # run without xdist.
    session.config.stash[_positions] = {item.nodeid: i for i, item in enumerate(session.items)}


def run_in_child(kernel, contract=None, domain="claimed", *, examples: int = 100, seed: int = 0,
                 grid: bool = False, timeout: float = 600, database: str | None = None) -> dict:
    """One check, run by the conformance runner in a forked child (a crash or a hang becomes a CRASH row);
    returns its row. database: the example database, a folder or a Redis URL (earlier counterexamples replayed
    first)."""
    from lowp.conformance import check_for
    from lowp.conformance.run import runner
    check = check_for(kernel, contract, domain)    # registers a Kernel object here; the forked child inherits it
    with tempfile.TemporaryDirectory(prefix="lowp-pytest-") as tmp:
        row, = runner.run([check], Path(tmp) / "journal.jsonl", jobs=1, timeout=timeout, progress=False,
                          options={"examples": examples, "seed": seed, "grid": grid, "database": database})
    return row


def _database(config) -> str | None:
    """The example database of a session: --lowp-database, $LOWP_DATABASE, else in pytest's cache folder; none
    when none is named and the cache plugin is off (-p no:cacheprovider)."""
    from lowp.conformance.run.example_database import ENV
    named = config.getoption("--lowp-database", None) or os.environ.get(ENV)
    cache = getattr(config, "cache", None)
    return named or (None if cache is None else str(cache.mkdir("lowp-examples")))


def _check(config, nodeid: str, *args, **kwargs) -> dict:
    from lowp.conformance import raise_for_verdict
    kwargs.setdefault("database", _database(config))
    row = {**run_in_child(*args, **kwargs), "test": nodeid}
    config.stash[_rows].append((config.stash[_positions].get(nodeid, -1), nodeid, row))
    if row["verdict"] == "SKIPPED":
        pytest.skip(f"{row['id']}: {row['reason']}")
    return raise_for_verdict(row)


@pytest.fixture
def lowp_check(request):
    """`lowp_check(kernel, contract=None, domain='claimed', examples=100, seed=0, grid=False, timeout=600)`: the
    check's row; a FAIL or CRASH raises ConformanceFailure, a SKIPPED row skips the test."""
    return lambda *args, **kwargs: _check(request.config, request.node.nodeid, *args, **kwargs)


@pytest.fixture
def lowp_prove():
    """`lowp_prove(kernel, shape, domain='claimed', **options)`: lowp prove's Proof (lowp.conformance.prove). A
    REFUTED proof fails the test with its counterexample, an UNKNOWN one skips it with the reason; PROVED returns it."""
    def prove(kernel, shape, domain="claimed", **options):
        from lowp.conformance.prove import PROVED, REFUTED, prove as run
        from lowp.kernels.registry import kernel as registered
        proof = run(registered(kernel) if isinstance(kernel, str) else kernel, tuple(shape), domain=domain,
                    **options)
        if proof.verdict == REFUTED:
            pytest.fail(f"lowp prove: {proof.summary()}", pytrace=False)
        if proof.verdict != PROVED:
            pytest.skip(f"lowp prove: {proof.summary()}")
        return proof
    return prove


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    marker = item.get_closest_marker("lowp")
    if marker is not None:
        _check(item.config, item.nodeid, *marker.args, **marker.kwargs)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist controller: take the rows a worker handed over (none if it died before finishing)."""
    rows = getattr(node, "workeroutput", {}).pop("lowp_rows", None)   # pop: this hook can run twice for a node
    if rows:
        node.config.stash[_rows].extend(tuple(entry) for entry in json.loads(rows))


def pytest_sessionfinish(session):
    config = session.config
    path = config.getoption("--lowp-report", None)
    if path and hasattr(config, "workeroutput"):    # an xdist worker: its controller writes the report
        config.workeroutput["lowp_rows"] = json.dumps(config.stash[_rows])
    elif path:
        from lowp.conformance.report import document, markdown
        entries = sorted(config.stash.get(_rows, []), key=lambda entry: entry[0])   # stable: calls keep their order
        rows = [row for _, _, row in entries]
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(markdown(rows, replay_args=None))     # no journal: each failure's repro line
        settings = {"pytest_args": list(config.invocation_params.args)}
        Path(str(path) + ".json").write_text(json.dumps(document(rows, None, settings), indent=1))
