"""The Ray backend (`lowp conformance --ray`, issue 14): on a 2-node Ray cluster started here (two nodes on this
machine advertising different CPU features), native checks go only to a node that advertises their kernel's
features, a check no node can run is SKIPPED naming what each lacks, the checks spread over both nodes, a kernel
that kills its process or hangs is a CRASH row while the run goes on, kernels from a TOML file are registered on the
nodes, the journal resumes and the reports validate, each row names its node. The tests that need Ray skip, with
the reason, where the ray extra is not installed; the routing rules and the command line's errors are tested
without it."""
from __future__ import annotations

import json
import shlex

import pytest

from lowp.cli import main
from lowp.conformance import report
from lowp.conformance.run import ray_runner
from lowp.conformance.run import runner
from lowp.conformance.bench import conformance as bench
from lowp.conformance.run.checks import Check, plan
from lowp.conformance.run.ray_runner import ARCH, CAPACITY, FEATURE, cannot_run, requirements
from lowp.kernels import kernel, load_toml

from .conftest import MISBEHAVING_C, scalar_kernels_toml

NO_RAY = "the ray extra is not installed (pip install 'lowp[ray]'): no Ray cluster to run on"


def _node(node_id: str, host: str, resources: dict) -> dict:
    """A node as ray.nodes() describes it."""
    return {"NodeID": node_id, "Alive": True, "NodeManagerHostname": host, "Resources": {"CPU": 2.0, **resources}}


def test_native_checks_need_their_features_and_emulated_ones_nothing():
    assert requirements(kernel("u8s8s32_avx512vnni")) == {ARCH + "x86-64": 1, **{FEATURE + f: 1 for f in
                                                           kernel("u8s8s32_avx512vnni").features}}
    assert FEATURE + "avx512_vnni" in requirements(kernel("u8s8s32_avx512vnni"))
    assert requirements(kernel("sdot_s8_neon")) == {}         # AArch64: emulated on any node


def test_an_x86_check_no_node_runs_natively_goes_to_bochs_and_one_bochs_cannot_run_is_skipped(monkeypatch):
    from lowp.emulator.x86 import bochs
    from lowp.kernels.executors import X86_BACKEND_ENV
    old = _node("a" * 56, "old-xeon", {ARCH + "x86-64": CAPACITY, FEATURE + "avx2": CAPACITY})
    vnni = kernel("u8s8s32_avx512vnni")
    queue, skipped = ray_runner.route(plan([vnni, kernel("u8s8s32_avx2")]), [old])
    by = {check.kernel: (needs, env) for check, needs, _, env in queue}
    if bochs.unavailable() is None:
        assert by["u8s8s32_avx512vnni"] == ({}, {X86_BACKEND_ENV: "bochs"}) and not skipped
    else:
        assert "u8s8s32_avx512vnni" not in by and all("lacks avx512f" in r["reason"] for r in skipped)
    assert by["u8s8s32_avx2"][0] == {ARCH + "x86-64": 1, FEATURE + "avx2": 1}
    monkeypatch.setenv(X86_BACKEND_ENV, "bochs")        # --backend bochs: every x86 check emulated, anywhere
    assert requirements(vnni) == {}


def test_a_check_no_node_can_run_is_explained_node_by_node():
    needs = {ARCH + "x86-64": 1, FEATURE + "avx2": 1, FEATURE + "avx512_vnni": 1}
    old = _node("a" * 56, "old-xeon", {ARCH + "x86-64": CAPACITY, FEATURE + "avx2": CAPACITY})
    arm = _node("b" * 56, "graviton", {})
    why = cannot_run(needs, [old, arm])
    assert "native x86-64 with avx2, avx512_vnni" in why
    assert "old-xeon (aaaaaaaa) lacks avx512_vnni" in why and "graviton (bbbbbbbb) does not advertise" in why
    assert cannot_run(needs, [old, {**_node("c" * 56, "sapphire", {r: CAPACITY for r in needs}), "Alive": False}])
    assert cannot_run(needs, [old, _node("c" * 56, "sapphire", {r: CAPACITY for r in needs})]) is None
    assert cannot_run({}, [arm]) is None                      # an emulated check runs anywhere
    assert "no live node" in cannot_run(needs, [])


def test_the_ray_start_line_advertises_this_machines_features():
    line = shlex.split(ray_runner.ray_start_command("10.0.0.1:6379", num_cpus=4))
    assert line[:4] == ["ray", "start", "--address=10.0.0.1:6379", "--num-cpus=4"]
    advertised = json.loads(line[4].removeprefix("--resources="))
    assert advertised == ray_runner.node_resources()
    from lowp.emulator.targets import host
    if host().arch == "x86-64":
        assert advertised[ARCH + "x86-64"] == CAPACITY
        from lowp.emulator.targets import disabled_features
        assert {FEATURE + f for f in host().x86_features - disabled_features()} <= set(advertised)
    assert shlex.split(ray_runner.ray_start_command())[2] == "--head"


def test_disabled_features_are_not_advertised(monkeypatch):
    have = ray_runner.node_resources()
    if FEATURE + "avx2" not in have:
        pytest.skip("the host does not run AVX2")
    monkeypatch.setenv("LOWP_DISABLE_FEATURES", "avx2")
    assert set(have) - set(ray_runner.node_resources()) == {FEATURE + "avx2"}


def test_a_python_registered_kernel_cannot_be_repeated_on_a_node():
    with pytest.raises(LookupError, match="register it from a TOML file"):
        ray_runner._prepare("no_such_kernel_anywhere", "/somewhere/register.py", {})


def test_an_address_where_no_cluster_answers_is_named_at_once():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]           # free once closed: nothing listens there
    with pytest.raises(ray_runner.RayUnavailable, match=f"no Ray cluster answers at 127.0.0.1:{port}"):
        ray_runner._reachable(f"127.0.0.1:{port}")


def test_the_command_line_says_how_to_get_ray_and_what_an_address_is(monkeypatch, capsys):
    import importlib.util
    with pytest.raises(SystemExit) as e:
        main(["conformance", "--ray", "run"])           # the action is no address: put --ray after it
    assert e.value.code == 2 and "'run' is not a Ray cluster's address" in capsys.readouterr().err
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    with pytest.raises(SystemExit) as e:
        main(["conformance", "--ray"])
    assert e.value.code == 2 and "pip install 'lowp[ray]'" in capsys.readouterr().err


# -- on a cluster ------------------------------------------------------------------------------------------------
OLD_CPU = ("sse2", "ssse3")     # the small node: a CPU without AVX


@pytest.fixture(scope="module")
def cluster():
    """Two Ray nodes on this machine, one CPU each: 'big' advertises this host's features but AVX-512 VNNI (as if
    it lacked it), 'small' only SSE2 and SSSE3. {'big': node id, 'small': node id}."""
    ray = pytest.importorskip("ray", reason=NO_RAY)
    from ray.cluster_utils import Cluster
    everything = ray_runner.node_resources()
    if not {FEATURE + "avx2", *(FEATURE + f for f in OLD_CPU)} <= set(everything):
        pytest.skip("the routing tests run native x86-64 kernels up to AVX2: this host does not run them")
    if ray.is_initialized():
        pytest.skip("Ray is already initialised in this process (another test's cluster)")
    big = {r: n for r, n in everything.items() if r != FEATURE + "avx512_vnni"}
    small = {ARCH + "x86-64": CAPACITY, **{FEATURE + f: CAPACITY for f in OLD_CPU}}
    store = ray_runner.LOCAL_OBJECT_STORE
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": big, "include_dashboard": False,
                                                      "object_store_memory": store})
    node = c.add_node(num_cpus=1, resources=small, object_store_memory=store)
    ray.init(address=c.address, log_to_driver=False, logging_level="ERROR")
    try:
        yield {"big": c.head_node.node_id, "small": node.node_id}
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture(scope="module")
def bad_kernels(tmp_path_factory):
    """Kernels that abort, hang and compute wrong, registered on the driver from a TOML file (the nodes register
    them from the same file)."""
    from lowp.kernels.registry import _KERNELS, _ORIGINS
    d = tmp_path_factory.mktemp("ray-bad")
    (d / "bad.c").write_text(MISBEHAVING_C)
    (d / "bad.toml").write_text(scalar_kernels_toml("ray_", "bad.c", ("aborter", "hanger", "offbyone")))
    names = [k.name for k in load_toml(d / "bad.toml")]
    yield names
    for name in names:
        _KERNELS.pop(name, None)
        _ORIGINS.pop(name, None)


def test_native_checks_go_where_their_features_are_and_spread_over_both_nodes(cluster, tmp_path):
    checks = plan([kernel("u8s8s32_ssse3"), kernel("u8s8s32_avx2"), kernel("u8s8s32_avx512vnni")])
    rows = runner.run(checks, tmp_path / "journal.jsonl", timeout=120, progress=False, ray="local",
                      options={"examples": 5, "grid": False})
    by_kernel: dict[str, list] = {}
    for r in rows:
        by_kernel.setdefault(r["kernel"], []).append(r)
    # No node advertises VNNI: the VNNI kernel runs on Bochs, on either node.
    for r in by_kernel["u8s8s32_avx512vnni"]:
        assert r["verdict"] == "PASS" and r["backend"] == "bochs" and r["node"]["ray_node"] in cluster.values()
    # AVX2 only where it is advertised; SSSE3 anywhere, and both nodes worked.
    ran = [r for r in rows if r["kernel"] != "u8s8s32_avx512vnni"]
    assert all(r["verdict"] in ("PASS", "FAIL") and r["executed"] > 0 for r in ran), ran
    assert {r["node"]["ray_node"] for r in by_kernel["u8s8s32_avx2"]} == {cluster["big"]}
    assert {r["node"]["ray_node"] for r in rows} == {cluster["big"], cluster["small"]}
    assert all(r["node"]["cpu"] and r["node"]["compiler"] and "avx2" in r["node"]["features"] for r in ran)
    # The same verdicts as the process pool (the native kernels': a CPU without VNNI would run that one on Bochs
    # again, for a verdict the comparison leaves out).
    native = [c for c in checks if c.kernel != "u8s8s32_avx512vnni"]
    pool = runner.run(native, tmp_path / "pool.jsonl", timeout=120, progress=False,
                      options={"examples": 5, "grid": False})
    assert [r["verdict"] for r in ran] == [r["verdict"] for r in pool]


def test_crashes_and_hangs_stay_rows_and_the_journal_resumes(cluster, bad_kernels, tmp_path):
    checks = [Check("ray_aborter", "model", "full", True), Check("ray_offbyone", "exact", "claimed", True),
              Check("u8s8s32_ssse3", "exact", "claimed", True)]
    journal = tmp_path / "out" / "journal.jsonl"
    options = {"examples": 20, "grid": False, "budget": 1.0}
    rows = runner.run(checks, journal, timeout=120, progress=False, ray="local", options=options)
    by = {r["id"]: r for r in rows}
    crash = by["ray_aborter:model:full"]          # abort() killed the check's process, not the node's server
    assert crash["verdict"] == "CRASH" and "signal 6" in crash["reason"] and "while running case" in crash["reason"]
    assert 0 < crash["executed"] < crash["cases"] and crash["node"]["ray_node"] in cluster.values()
    off = by["ray_offbyone:exact:claimed"]        # registered on the node from the driver's TOML file
    assert off["verdict"] == "FAIL" and off["counterexample"]["shape"] == [1, 1, 1]
    assert off["origin"].endswith("bad.toml")
    assert by["u8s8s32_ssse3:exact:claimed"]["verdict"] == "PASS"
    # The journal has every case of every finished check, as the process pool's does; resume (with the same options)
    # runs nothing twice.
    events = [json.loads(line) for line in journal.read_text().splitlines()]
    assert not {"node"} & {e["event"] for e in events}
    def count(kind, check_id):
        return sum(e["event"] == kind and e.get("check") == check_id for e in events)
    for r in rows:
        assert count("case", r["id"]) > 0
    # the case (or the batch of cases: conformance/run/batch.py) it died in was started last, and the row names it
    starts = [e["case"] for e in events if e["event"] == "start" and e.get("check") == crash["id"]]
    assert starts and starts[-1] in crash["reason"]
    assert count("case", crash["id"]) == crash["executed"]
    again = runner.run(checks, journal, resume=True, timeout=120, progress=False, ray="local",
                       options=options)     # the same timeout: part of a verdict's key
    assert [r["verdict"] for r in again] == [r["verdict"] for r in rows]
    assert len(journal.read_text().splitlines()) == len(events)
    # The reports take the rows with their node (report.json is validated against the row's type).
    paths = report.write(rows, tmp_path / "out")
    doc = json.loads(paths["json"].read_text())
    assert {r["node"]["hostname"] for r in doc["rows"]} == {crash["node"]["hostname"]}
    # A kernel that loops forever, with no per-call budget: the task's timeout ends it as a CRASH row.
    hang, = runner.run([Check("ray_hanger", "model", "full", True)], tmp_path / "hang.jsonl", timeout=3,
                       progress=False, ray="local", options={"examples": 5, "grid": False, "budget": None})
    assert hang["verdict"] == "CRASH" and "timed out after 3 s" in hang["reason"], hang
    assert "while running case" in hang["reason"]


def test_the_benchmark_runs_both_backends_side_by_side(cluster):
    result = bench.compare_ray(["u8s8s32_ssse3"], examples=5, grid=False, jobs=2)
    s = bench.summarize_ray(result)
    assert [r["backend"] for r in result["runs"]] == ["pool", "ray"] and result["checks"] == 3
    assert not result["cluster_started"]                 # it used the cluster that was there
    assert s["verdicts_differ"] == [] and s["ratio"] == s["median"]["ray"] / s["median"]["pool"]
    assert result["runs"][1]["nodes"] and not result["runs"][0]["nodes"]


def test_lowp_conformance_ray_writes_the_reports_with_each_rows_node(cluster, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["conformance", "--ray", "--kernel", "u8s8s32_ssse3", "--examples", "5", "--no-grid",
                 "--out", str(out)]) == 0
    assert "3 checks: " in capsys.readouterr().out
    rows = json.loads((out / "report.json").read_text())["rows"]
    assert len(rows) == 3 and all(r["node"]["ray_node"] in cluster.values() for r in rows)


def test_a_campaign_on_both_nodes_shares_one_redis_database(cluster, rare, redis_url, tmp_path):
    """What a task found through the Redis database, the next campaign's tasks (on whichever node) replay first."""
    check = Check("tc_rare", "exact", "claimed", True)
    options = {"examples": 150, "grid": False, "only": ["k_eq_kr"], "database": redis_url}
    first, = runner.run([check], tmp_path / "a.jsonl", timeout=300, progress=False, ray="local",
                        options={**options, "seed": 0})
    assert first["verdict"] == "FAIL" and first["searched"] > 5 and "replayed" not in first
    again, = runner.run([check], tmp_path / "b.jsonl", timeout=300, progress=False, ray="local",
                        options={**options, "seed": 2})
    assert again["replayed"] == again["searched"] == 1 and again["verdict"] == "FAIL", again
    assert again["counterexample"]["case"] == "tc_rare:exact:claimed:replay"


def test_a_fuzzing_campaign_runs_its_rounds_on_the_cluster(cluster, tmp_path):
    """`lowp fuzz --ray`: every round's checks are Ray tasks on the one cluster (left running between rounds)."""
    import ray

    from lowp.conformance.run import fuzz
    checks = [c for c in plan([kernel("u8s8s32_ssse3"), kernel("u8s8s32_avx2")]) if c.claimed]
    nodes = []
    c = fuzz.campaign(checks, tmp_path / "fz", options={"examples": 5, "grid": False}, budget=600, rounds=2,
                      ray="local", on_round=lambda rnd, rows: nodes.extend(r["node"]["ray_node"] for r in rows))
    assert [r["seed"] for r in c.rounds] == [1, 2] and all(r["finished"] for r in c.rounds)
    assert len(nodes) == 2 * len(checks) and set(nodes) <= {cluster["big"], cluster["small"]}
    assert ray.is_initialized()


def test_lowp_fuzz_ray_uses_the_cluster_that_is_there(cluster, tmp_path, capsys):
    import ray
    out = tmp_path / "fz"
    assert main(["fuzz", "--ray", "--kernel", "u8s8s32_ssse3", "--rounds", "2", "--profile", "quick",
                 "--no-database", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "fuzzing 2 check(s) of 1 kernel(s)" in printed and "2 round(s)" in printed
    doc = json.loads((out / "fuzz.json").read_text())
    assert doc["settings"]["ray"] == "local" and [r["seed"] for r in doc["rounds"]] == [1, 2]
    assert ray.is_initialized()            # not started by the command: left running


def test_sigterm_cancels_the_tasks_and_no_check_process_outlives_the_run(cluster, tmp_path, forget_kernels):
    """A run on Ray stopped by SIGTERM (or Ctrl-C) cancels its tasks; the check servers of their workers end, and
    with them the check processes: no kernel loops on after the run (docs/reliability.md)."""
    import os
    import shutil
    import signal
    import threading
    import time
    from pathlib import Path

    from .test_reliability import HERE, KERNELS_TOML, all_gone, children, events
    for name in ("kernels.c", "offset.h"):
        shutil.copy(HERE / name, tmp_path / name)
    (tmp_path / "kernels.toml").write_text(KERNELS_TOML)
    load_toml(tmp_path / "kernels.toml")
    journal, found = tmp_path / "journal.jsonl", []

    def servers() -> list[int]:
        return [int(p.parent.name) for p in Path("/proc").glob("[0-9]*/cmdline")
                if b"ray_runner import serve" in _read(p)]

    def interrupt_once_spinning():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not found:
            if any(e.get("event") == "start" for e in events(journal)):
                found.extend(pid for server in servers() for pid in children(server))
            time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGTERM)
    threading.Thread(target=interrupt_once_spinning, daemon=True).start()
    with pytest.raises(runner.RunStopped) as stop:
        runner.run([Check("rel_spin", "model", "full", True)], journal, timeout=300, progress=False, ray="local",
                   options={"examples": 0, "grid": False})
    assert stop.value.status == 143 and [r["verdict"] for r in stop.value.rows] == ["NOT RUN"]
    assert found, "no check process was seen spinning"
    all_gone(found, seconds=30)


def _read(path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def test_a_ggml_campaign_on_the_cluster_gives_the_process_pools_verdicts(cluster, tmp_path):
    """`lowp ggml --ray`: the kernels are built and registered on the driver, each node registers a check's kernel
    from the campaign's kernels.toml, and the verdicts are the process pool's, row for row, each with its node."""
    from tests.test_ggml_tree import TREE
    argv = ["ggml", str(TREE), "--type", "q4_0", "--isa", "x64", "--isa", "haswell", "--examples", "2", "--fresh"]
    assert main([*argv, "--out", str(tmp_path / "pool")]) == 1
    assert main([*argv, "--out", str(tmp_path / "ray"), "--ray"]) == 1
    pool, ray_rows = ({r["id"]: r for r in json.loads((tmp_path / out / "report.json").read_text())["rows"]}
                      for out in ("pool", "ray"))
    assert pool.keys() == ray_rows.keys() and len(pool) >= 10
    assert {i: r["verdict"] for i, r in ray_rows.items()} == {i: r["verdict"] for i, r in pool.items()}
    assert all(r["node"]["ray_node"] in cluster.values() for r in ray_rows.values())


def test_an_interrupted_ggml_campaign_on_the_cluster_resumes(cluster, tmp_path):
    """Issue 36: a library campaign on Ray that stopped half way (its journal cut after the middle row, which is
    what a run killed there leaves) resumes on the cluster: every check has one row in the end, the kept ones are
    not run again, and the verdicts are the whole run's."""
    from tests.test_ggml_tree import TREE
    out = tmp_path / "ray"
    argv = ["ggml", str(TREE), "--type", "q4_0", "--isa", "x64", "--isa", "haswell", "--examples", "2", "--fresh",
            "--out", str(out), "--ray"]
    assert main(argv) == 1
    whole = {r["id"]: r["verdict"] for r in json.loads((out / "report.json").read_text())["rows"]}
    journal = out / "journal.jsonl"
    lines = journal.read_text().splitlines()
    row_lines = [i for i, line in enumerate(lines) if json.loads(line)["event"] == "row"]
    cut = row_lines[len(row_lines) // 2]
    journal.write_text("\n".join(lines[:cut + 1]) + "\n")
    kept = {json.loads(line)["id"] for line in lines[:cut + 1] if json.loads(line)["event"] == "row"}
    assert 0 < len(kept) < len(whole)
    assert main([*argv, "--resume"]) == 1
    events = [json.loads(line) for line in journal.read_text().splitlines()]
    ids = [e["id"] for e in events if e["event"] == "row"]
    assert sorted(ids) == sorted(whole), "every check has exactly one row"
    assert not {e.get("check") for e in events[cut + 1:] if e["event"] == "case"} & kept, "a kept check ran again"
    assert {r["id"]: r["verdict"] for r in json.loads((out / "report.json").read_text())["rows"]} == whole
