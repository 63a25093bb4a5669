"""pytest plugin (installed with lowp; pytest loads it automatically):

- fixture `lowp_check`: `lowp_check(kernel, contract=None, domain='claimed')` runs a conformance check and
  fails the test with the minimal counterexample in the assertion message;
- marker `@pytest.mark.lowp(kernel, contract=None, domain='claimed')`: the same check runs before the test body;
- `pytest --lowp-report=FILE`: a Markdown conformance report (and FILE.json) of every check the session made.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

def pytest_addoption(parser):
    parser.getgroup("lowp").addoption("--lowp-report", metavar="FILE", default=None,
                                      help="write a Markdown report (and FILE.json) of the lowp checks run")


def pytest_configure(config):
    config.addinivalue_line("markers", "lowp(kernel, contract=None, domain='claimed'): run a lowp conformance check")
    config.stash[_rows] = []


_rows = pytest.StashKey[list]()


def _run(config, kernel, contract=None, domain="claimed", **options):
    from lowp.conformance import ConformanceFailure, check
    try:
        row = check(kernel, contract, domain=domain, **options)
    except ConformanceFailure as failure:
        config.stash[_rows].append(failure.row)
        raise
    config.stash[_rows].append(row)
    if row["verdict"] == "SKIPPED":
        pytest.skip(f"{row['id']}: {row['reason']}")
    return row


@pytest.fixture
def lowp_check(request):
    return lambda kernel, contract=None, domain="claimed", **options: _run(request.config, kernel, contract, domain,
                                                                         **options)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    marker = item.get_closest_marker("lowp")
    if marker is not None:
        _run(item.config, *marker.args, **marker.kwargs)


def pytest_sessionfinish(session):
    path = session.config.getoption("--lowp-report", None)
    rows = session.config.stash.get(_rows, [])
    if path:
        from lowp.conformance.report import markdown, summary
        Path(path).write_text(markdown(rows))
        Path(str(path) + ".json").write_text(json.dumps({"summary": summary(rows), "rows": rows}, indent=1))
