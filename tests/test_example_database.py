"""The shared example database (issue 14): one database, a folder or a Redis server, serves every search of a
check, wherever it runs: a counterexample one worker, run, pytest session or machine found is replayed first by
the next search of that check anywhere. The Redis tests start a redis-server of their own (they skip, with the
reason, without it or the redis package); tc_rare's bug needs tens of drawn examples to find, so a first
example that fails is a replay."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lowp.conformance.run import example_database
from lowp.conformance.run.checks import Check, Recorder, search
from lowp.conformance.run.example_database import DatabaseError, ExampleStore, check_reachable, describe, open_database
from lowp.kernels import executor

from .conftest import CASES

pytest_plugins = ["pytester"]


def _lowp(*args, cwd, env_db=None):
    import os
    env = {**os.environ, **({"LOWP_DATABASE": env_db} if env_db else {})}
    return subprocess.run([sys.executable, "-m", "lowp", *args], capture_output=True, text=True, timeout=600,
                          cwd=cwd, env=env)


def _rows(out) -> list[dict]:
    return json.loads((out / "report.json").read_text())["rows"]


def test_two_workers_share_a_redis_database(rare, redis_url):
    """What one search stored through Redis, another (a fresh store, as on another machine) replays first."""
    k = rare["tc_rare"]
    check = Check(k.name, "exact", "claimed", True)
    found, tried, replayed = search(check, k, Recorder(executor(k)), 150, 3, redis_url)
    assert found is not None and tried > 5 and replayed == 0
    assert len(ExampleStore(redis_url, check, k).replays()) == 1
    again, tried2, replayed2 = search(check, k, Recorder(executor(k)), 150, 4, redis_url)
    assert again is not None and tried2 == replayed2 == 1 and again.call.case.endswith(":replay")
    keys = open_database(redis_url).redis.keys(b"lowp-examples:*")
    assert keys and all(check.id.encode() in key for key in keys)


def test_the_command_line_shares_counterexamples_through_redis(rare, redis_url, tmp_path):
    """Two runs in different report folders (as two machines would be) replay through the Redis URL."""
    base = ["conformance", "--kernels", str(CASES / "rare.toml"), "--kernel", "tc_rare", "--case", "k_eq_kr",
            "--examples", "150", "--database", redis_url, "--jobs", "1"]
    first = _lowp(*base, "--out", str(tmp_path / "a"), "--seed", "11", cwd=tmp_path)
    assert first.returncode == 1, first.stderr
    second = _lowp(*base, "--out", str(tmp_path / "b"), "--seed", "12", cwd=tmp_path)
    assert second.returncode == 1, second.stderr
    rows = _rows(tmp_path / "b")
    assert rows and all(r["replayed"] >= 1 and r["searched"] == r["replayed"] for r in rows), rows
    settings = json.loads((tmp_path / "b" / "report.json").read_text())["settings"]
    assert settings["database"] == redis_url


def test_a_pytest_session_and_lowp_conformance_share_a_folder(pytester, tmp_path):
    """The plugin's --lowp-database and the command line's --database name one folder: what the test found, the
    command line replays."""
    shared = tmp_path / "shared"
    pytester.makepyfile(f"""
        import pytest
        from lowp.kernels import load_toml
        load_toml({str(CASES / "rare.toml")!r})

        @pytest.mark.lowp("tc_rare", "exact", examples=150)
        def test_rare():
            pass
        """)
    result = pytester.runpytest_subprocess(f"--lowp-database={shared}", "--lowp-report=rep.md")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert json.loads((pytester.path / "rep.md.json").read_text())["rows"][0]["searched"] > 1
    done = _lowp("conformance", "--kernels", str(CASES / "rare.toml"), "--kernel", "tc_rare", "--case", "k_eq_kr",
                 "--examples", "150", "--database", str(shared), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    exact = next(r for r in _rows(tmp_path / "out") if r["check"] == "exact" and r["domain"] == "claimed")
    assert exact["replayed"] == 1 and exact["searched"] == 1


def test_a_redis_url_where_no_server_answers_is_a_usage_error(tmp_path):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]           # closed again: nothing listens there
    pytest.importorskip("redis", reason="the redis package is not installed")
    done = _lowp("conformance", "--kernel", "u8s8s32_ssse3", "--database", f"redis://127.0.0.1:{port}/0",
                 "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 2 and f"no Redis server answers at redis://127.0.0.1:{port}/0" in done.stderr
    assert not (tmp_path / "out").exists()


def test_without_the_redis_package_the_error_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(DatabaseError, match=r"pip install 'lowp\[ray\]'"):
        check_reachable("redis://localhost:6379/0")
    check_reachable("/a/folder/is/made/when/needed")        # a folder needs nothing


def test_the_default_database_is_shared_by_every_run(monkeypatch, tmp_path):
    monkeypatch.delenv("LOWP_DATABASE")
    monkeypatch.setenv("LOWP_CACHE_DIR", str(tmp_path / "cache"))
    from lowp.emulator.buildcache import cache_dir
    cache_dir.cache_clear()         # it is read once a process
    try:
        assert example_database.default_location() == str(tmp_path / "cache" / "examples")
    finally:
        monkeypatch.undo()
        cache_dir.cache_clear()
    monkeypatch.setenv("LOWP_DATABASE", "redis://db:6379/1")
    assert example_database.default_location() == "redis://db:6379/1"


def test_reports_name_the_database_without_its_password():
    assert describe("redis://user:secret@db.example:6379/0") == "redis://***@db.example:6379/0"
    assert describe("redis://db.example:6379/0") == "redis://db.example:6379/0"
    assert describe(None) == "none"
