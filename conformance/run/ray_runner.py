"""Campaigns beyond one machine (`lowp conformance --ray [ADDRESS]`): every check a Ray task, on a cluster of
machines (or a local one started for the run), its rows journaled and reported as the process pool's are.

Each check is one Ray task. The task runs the check as the process pool does, in a child process of its own
(runner.child_events: the child's events, a dead child or a timeout as a CRASH row), so a native kernel that kills
its process kills only that child. The children are forked by a check server, a fresh Python process each Ray
worker starts once, not by the Ray worker itself: Ray's documentation advises against
forking a worker (the child would share its sockets, and locks its other threads hold). The task streams the
check's events back in batches (a Ray streaming generator: at least every half second, the row at once), and the
driver journals each event as it arrives: the journal has every case of every finished check, an interrupted run
loses only the checks in flight, and `--resume` and the reports work on it unchanged.

Routing. Only native kernels (x86-64, run by the host's CPU) depend on the machine; emulated ones (AArch64 on
Unicorn or qemu-user, RISC-V on qemu) run on any node with lowp installed. An x86 kernel that no node runs natively
runs on Bochs, on any node (route()). Every node advertises Ray custom
resources named after its native architecture and CPU features (`lowp-arch:x86-64`, `lowp-feature:avx512_vnni`,
a large count of each: node_resources(); `python -m lowp.conformance.run.ray_runner` prints the `ray start` line for
a machine), and a native check's task asks for one unit of each resource its kernel needs, so Ray places it only on
a node that has them. Before anything is submitted the driver reads the cluster's nodes: a check no live node can
run natively goes to Bochs (`LOWP_X86_BACKEND=bochs` in its task), or, where Bochs cannot run it either, is a
SKIPPED row naming what each node lacks. A qemu-backed kernel on a node without qemu is SKIPPED by the
check itself, as on one machine.

Kernels from `--kernels FILE.toml` are registered on the driver only: each task carries the file that registered
its kernel (registry.origin) and the child loads it before running, so that file (and the sources it names) must
be at the same path on every node (a shared file system or the same checkout). Each row carries the fingerprint
of the node that ran it (`node`: hostname, Ray node id, CPU, features, compiler).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shlex
import socket
import subprocess
import sys
import time
from functools import cache, partial
from pathlib import Path

from lowp.conformance.run.checks import Check
from lowp.conformance.report.rows import check_row
from lowp.conformance.run.processes import interruptible, single_thread_blas
from lowp.conformance.run.pool import JournalUnwritable, RunLog, Tracked, child_events, stopped

ARCH = "lowp-arch:"           # a node runs native kernels of this architecture
FEATURE = "lowp-feature:"     # ... using this CPU feature
CAPACITY = 10_000             # units a node advertises of each: far more than it runs tasks at once (each asks 1)
FLUSH_SECONDS = 0.5           # a task passes its events on at least this often
LOCAL_OBJECT_STORE = 128 * 2 ** 20    # events are small: the local cluster's object store need not take 30% of RAM
INSTALL = "the Ray backend needs Ray: pip install 'lowp[ray]' (or pip install 'ray>=2.9')"


class RayUnavailable(RuntimeError):
    """Ray is not installed, or no cluster answers at the address given."""


def import_ray():
    """The ray module, or RayUnavailable saying how to install it."""
    try:
        import ray
    except ImportError as e:
        raise RayUnavailable(f"{INSTALL} ({e})") from None
    return ray


# -- what nodes advertise and checks need ----------------------------------------------------------------------
def node_resources() -> dict[str, float]:
    """The Ray custom resources this machine advertises: for each architecture it runs natively, the architecture
    and the CPU features lowp's native target uses here (less LOWP_DISABLE_FEATURES: a node can be told to act as
    if it lacked some)."""
    from lowp.emulator.targets import all_targets, disabled_features
    out: dict[str, float] = {}
    for t in all_targets():
        if t.backend == "native" and t.unavailable() is None:
            out[ARCH + t.arch] = CAPACITY
            out.update({FEATURE + f: CAPACITY for f in sorted(t.features() - disabled_features())})
    return out


def ray_start_command(address: str | None = None, num_cpus: int | None = None) -> str:
    """The `ray start` line that makes this machine a node lowp can route native checks to: the head node without
    an address, else a node joining the head at `address` (host:port)."""
    where = ["--head"] if address is None else [f"--address={address}"]
    cpus = [f"--num-cpus={num_cpus}"] if num_cpus else []
    return shlex.join(["ray", "start", *where, *cpus, f"--resources={json.dumps(node_resources())}"])


def requirements(kernel) -> dict[str, float]:
    """The resources a check of `kernel` asks for to run natively: its architecture and features, for a kernel of
    an architecture some machine runs natively (x86-64) and no backend chosen for it; none for one that is
    emulated anyway (AArch64 on Unicorn or qemu, any node runs it). Whether this driver's own CPU has them does not
    matter: a node that has them runs it (route() sends it to Bochs where none does)."""
    from lowp.emulator import targets
    from lowp.kernels.executors import BACKEND_ENVS
    chosen = kernel.backend or os.environ.get(BACKEND_ENVS.get(kernel.target, ""), "")
    native = any(t.backend == "native" for t in targets.of_arch(kernel.target))
    if not native or chosen not in ("", "native"):
        return {}
    return {ARCH + kernel.target: 1, **{FEATURE + f: 1 for f in kernel.features}}


def emulated_instead(kernel) -> dict[str, str] | None:
    """The environment that runs `kernel` on its architecture's emulator on any node (Bochs for x86-64), when no
    node runs it natively; None if that emulator cannot run it either (not installed here, or no CPU model of it
    has the kernel's features)."""
    from lowp.emulator import targets
    from lowp.kernels.executors import BACKEND_ENVS
    for t in targets.of_arch(kernel.target):
        if t.backend != "native" and kernel.target in BACKEND_ENVS and t.cannot_run(kernel.features) is None:
            return {BACKEND_ENVS[kernel.target]: t.backend}
    return None


def cannot_run(needs: dict[str, float], nodes: list[dict]) -> str | None:
    """Why no node of `nodes` (ray.nodes()) can run a task that needs `needs`, or None."""
    alive = [n for n in nodes if n.get("Alive")]
    if not needs or any(all(n["Resources"].get(r, 0) >= k for r, k in needs.items()) for n in alive):
        return None
    arch = next(r[len(ARCH):] for r in needs if r.startswith(ARCH))
    features = [r[len(FEATURE):] for r in needs if r.startswith(FEATURE)]
    lacks = []
    for n in alive:
        name = f"{n.get('NodeManagerHostname') or n.get('NodeManagerAddress')} ({n['NodeID'][:8]})"
        if n["Resources"].get(ARCH + arch, 0) < 1:
            lacks.append(f"{name} does not advertise {ARCH}{arch}")
        else:
            lacks.append(f"{name} lacks " + ", ".join(f for f in features if n["Resources"].get(FEATURE + f, 0) < 1))
    wanted = f"{arch}{' with ' + ', '.join(features) if features else ''}"
    return (f"no node of the Ray cluster runs native {wanted}: " + ("; ".join(lacks) if lacks else "no live node")
            + " (`python -m lowp.conformance.run.ray_runner` prints the `ray start` line a node needs)")


# -- on the node -----------------------------------------------------------------------------------------------
@cache
def fingerprint() -> dict:
    """The node this process runs on, as a row's `node` field says it (rows.Node)."""
    import platform

    import ray

    from lowp.emulator.targets import disabled_features, host

    from lowp.conformance.report.rows import compilers
    h = host()
    return {"hostname": socket.gethostname(), "ray_node": ray.get_runtime_context().get_node_id(), "arch": h.arch,
            "cpu": h.cpu_model, "features": sorted(h.x86_features - disabled_features()),
            "compiler": compilers()["native"], "python": platform.python_version()}


class _CheckServer:
    """This Ray worker's check server: a fresh Python process (none of the Ray worker's threads or sockets) that
    runs each check it is sent as the process pool does, in a child forked for it (runner.child_events), and sends
    back what to journal, the row last. One per Ray worker, started with its first check: forking the Ray worker
    itself is what Ray's documentation advises against. It ends when the Ray worker's end of the pipe closes."""

    def __init__(self):
        self.conn, theirs = mp.Pipe()
        fd = theirs.fileno()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", f"from lowp.conformance.run.ray_runner import serve; serve({fd})"], pass_fds=(fd,))
        theirs.close()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def died(self) -> str:
        try:
            status = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            status = "killed: it did not answer"
        return f"lowp's check server on this node died (exit status {status})"


_server: _CheckServer | None = None


def _check_server() -> _CheckServer:
    global _server
    if _server is None or not _server.alive():
        _server = _CheckServer()
    return _server


def serve(fd: int) -> None:
    """The check server's loop: (check, options, timeout, prepare) in on the pipe `fd`, the check's journal events
    out, until the pipe closes."""
    from multiprocessing.connection import Connection

    from lowp.kernels import kernels
    _end_with(os.getppid())
    conn = Connection(fd)
    kernels()       # the built-in kernels, registered once for every child
    single_thread_blas()    # the children fork at one thread (start_child), and no restore starts OpenBLAS's threads
    ctx = mp.get_context("fork")
    while True:
        try:
            check, options, timeout, prepare = conn.recv()
        except (EOFError, OSError):
            return      # the Ray worker is gone
        for event in child_events(check, ctx=ctx, timeout=timeout, options=options, args=(prepare,)):
            conn.send(event)


def _end_with(parent_pid: int, every: float = 1.0) -> None:
    """The check server ends, with the check it runs, when the Ray worker that started it is gone (a cancelled
    task's worker is killed): a thread looks every `every` s. (Not PR_SET_PDEATHSIG: that follows the thread that
    started the server, and a Ray worker's threads come and go.) The check's child has its own death signal."""
    import threading

    def watch():
        while os.getppid() == parent_pid:
            time.sleep(every)
        os._exit(1)
    threading.Thread(target=watch, daemon=True, name="lowp-parent-watch").start()


def _prepare(kernel: str, origin: str | None, env: dict) -> None:
    """In the check's child: the driver's environment for checks (the AArch64 backend it chose), and its kernel
    registered from the TOML file that registered it on the driver (`origin`), read afresh for every check (a
    long-lived cluster serves campaigns whose files change)."""
    os.environ.update(env)
    from lowp.kernels.ggml import kernel as ggml
    if ggml.registered(kernel) is not None or (origin and ggml.register_from_toml(Path(origin), kernel)):
        return                  # a ggml kernel (lowp ggml's campaign): its own registry
    from lowp.kernels import kernels, load_toml
    if kernel in {k.name for k in kernels()}:
        return
    if origin is None or not origin.endswith(".toml"):
        raise LookupError(f"kernel {kernel!r} was registered on the driver by {origin or 'Python code'}, which the "
                          "Ray backend cannot repeat on its nodes: register it from a TOML file (--kernels)")
    load_toml(origin)


def check_task(check: Check, options: dict, timeout: float, origin: str | None, env: dict):
    """The Ray task of one check (a generator: Ray streams what it yields): first [{'event': 'node', ...}], then
    the check's journal events in batches (at least every FLUSH_SECONDS), the row (with the node's fingerprint)
    in the last."""
    server = _check_server()          # first: a new one starts while this process probes its node
    node = fingerprint()
    yield [{"event": "node", "id": check.id, **node}]
    server.conn.send((check, options, timeout, partial(_prepare, check.kernel, origin, env)))
    tracked, batch, flushed = Tracked(check), [], time.monotonic()
    while True:
        event = None
        if server.conn.poll(FLUSH_SECONDS):
            try:
                event = tracked.observe(server.conn.recv())
            except (EOFError, OSError):
                event = tracked.crash(server.died())
            if event["event"] == "row":
                event["node"] = node
            batch.append(event)
        last = event is not None and event["event"] == "row"
        if batch and (last or event is None or time.monotonic() - flushed >= FLUSH_SECONDS):
            yield batch
            batch, flushed = [], time.monotonic()
        if last:
            return


# -- the driver ------------------------------------------------------------------------------------------------
def connect(address: str = "local", num_cpus: int | None = None) -> bool:
    """Connect to the cluster at `address`, or start a local one ('local': this machine, `num_cpus` of its cores,
    advertising its features). False when Ray was already initialised in this process (that cluster is used, and
    left running)."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    quiet = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
    if address == "local":
        ray.init(address="local", num_cpus=num_cpus or os.cpu_count(), resources=node_resources(),
                 object_store_memory=LOCAL_OBJECT_STORE, **quiet)
    else:
        _reachable(address)
        ray.init(address=address, **quiet)
    return True


def _reachable(address: str, seconds: float = 5.0) -> None:
    """RayUnavailable unless something listens at a host:port address (Ray itself waits minutes for a cluster
    that is not there)."""
    host, sep, port = address.rpartition(":")
    if address == "auto" or "://" in address or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=seconds).close()
    except OSError as e:
        raise RayUnavailable(f"no Ray cluster answers at {address} ({e}): is its head node started "
                             f"(docs/scale-out.md)?") from None


def run(checks: list[Check], journal: Path, *, address: str = "local", jobs: int | None = None,
        resume: bool = False, timeout: float = 600, options: dict | None = None,
        progress: bool = True, on_row=None, stop_at: float | None = None, reuse: bool | None = None) -> list[dict]:
    """runner.run on Ray: the rows in plan order, the journal written as the process pool writes it. jobs: at most
    this many checks submitted at once (default: all; Ray runs as many as the cluster has CPUs); a local cluster
    gets `jobs` CPUs (default: every core). Connected already (`lowp fuzz` keeps one cluster for all its rounds),
    it uses that cluster and leaves it running."""
    ray = import_ray()
    started_here = connect(address, jobs)       # first: a cluster that is not there leaves the journal as it was
    try:
        with interruptible():
            run_log = RunLog(checks, journal, resume, progress, on_row,
                             {**(options or {}), "timeout": timeout, "jobs": jobs}, reuse)  # what else decides a verdict
            flights: dict = {}
            try:
                return _run(ray, run_log, flights, jobs=jobs, timeout=timeout, options=options or {},
                            stop_at=stop_at)
            except (KeyboardInterrupt, JournalUnwritable) as e:
                _cancel(ray, flights)
                raise run_log.stopped(e) from None
    finally:
        if started_here:
            ray.shutdown()


def _cancel(ray, flights: dict) -> None:
    """Stop the tasks in flight: Ray kills their workers (force), whose check servers and children follow
    (serve's watch on its parent; the children's death signal)."""
    for gen in flights:
        try:
            ray.cancel(gen, force=True)
        except Exception:   # noqa: BLE001 - a task that already ended, or a cluster going away: nothing to stop
            pass


def _run(ray, run_log: RunLog, flights: dict, *, jobs, timeout, options, stop_at=None) -> list[dict]:
    """Submit the checks, journal their events as they come; `flights`: generator -> [Tracked, its node once the
    task started, whether its row came] (the caller cancels what is left in it if the run is interrupted)."""
    from lowp.kernels.executors import BACKEND_ENVS
    task = ray.remote(num_cpus=1, max_retries=0, num_returns="streaming")(check_task)
    env = {name: os.environ[name] for name in BACKEND_ENVS.values() if os.environ.get(name)}
    queue, skipped = route(run_log.pending, ray.nodes())
    for row in skipped:
        run_log.record(row)
    # With a time to stop, no more in flight than the cluster has CPUs: a submitted task would start after it.
    window = max(1, jobs or (int(ray.cluster_resources().get("CPU", 1)) if stop_at else len(queue)))
    while queue or flights:
        if stopped(stop_at):
            queue.clear()
        while queue and len(flights) < window:
            check, needs, where, emulated = queue.pop(0)
            flights[task.options(resources=needs).remote(check, options, timeout, where, {**env, **emulated})] = \
                [Tracked(check), None, False]
        ready, _ = ray.wait(list(flights), num_returns=1, timeout=1.0)
        for gen in ready:
            for event in _receive(ray, gen, flights):
                run_log.record(event)
        run_log.running([t for t, node, _ in flights.values() if node])
    return run_log.rows()


def route(checks: list[Check], nodes: list[dict]) -> tuple[list[tuple], list[dict]]:
    """(check, the resources it asks for, the file that registered its kernel, the environment it runs in) of
    every check some node of `nodes` (ray.nodes()) can run: natively on a node with its features, else on an
    emulator (an x86 kernel no node runs natively: on Bochs, on any node); the SKIPPED rows of the others."""
    from lowp.kernels import kernel
    from lowp.kernels.ggml import kernel as ggml
    from lowp.kernels.registry import origin
    queue, skipped = [], []
    for check in checks:
        if ggml.registered(check.kernel) is not None:
            # a ggml kernel chooses its executor on the node (natively, else Bochs or qemu, as on one machine): it
            # needs no node resources; the node registers it from the campaign's kernels.toml
            where = ggml.origin(check.kernel)
            queue.append((check, {}, None if where is None else str(where.resolve()), {}))
            continue
        k = kernel(check.kernel)
        needs, env = requirements(k), {}
        why = cannot_run(needs, nodes)
        if why:
            env = emulated_instead(k)
            if env is None:
                skipped.append(check_row(check, verdict="SKIPPED", reason=why, backend="native", target=k.target,
                                         contract_claimed=k.contract))
                continue
            needs = {}
        where = origin(check.kernel)
        queue.append((check, needs, None if where is None else str(where.resolve()), env))
    return queue, skipped


def _receive(ray, gen, flights: dict) -> list[dict]:
    """What to journal from the next batch of the task `gen`: its events (the row with its node), or the CRASH row
    of a task that failed (its worker or its node died); the task leaves `flights` when it ends."""
    state = flights[gen]            # [Tracked, its node, whether its row came]
    tracked, node, finished = state
    try:
        batch = ray.get(next(gen))
    except StopIteration:
        del flights[gen]
        return [] if finished else [tracked.crash("the Ray task ended without a row")]
    except Exception as e:  # noqa: BLE001 - any failure of the task is the check's CRASH row
        del flights[gen]
        row = tracked.crash(f"the Ray task failed: {_first_line(e)}")
        return [{**row, "node": node} if node else row]
    out = []
    for event in batch:
        if event["event"] == "node":
            state[1] = {k: v for k, v in event.items() if k not in ("event", "id")}
            continue
        event = tracked.observe(event)
        state[2] = state[2] or event["event"] == "row"
        out.append(event)
    return out


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def main(argv=None) -> int:
    """`python -m lowp.conformance.run.ray_runner [--address HEAD:PORT] [--num-cpus N]`."""
    p = argparse.ArgumentParser(prog="python -m lowp.conformance.run.ray_runner",
                                description="Print the `ray start` line that makes this machine a node of a lowp "
                                            "campaign, advertising its CPU features (the head node without "
                                            "--address). See docs/scale-out.md.")
    p.add_argument("--address", help="the head node's address (host:port); omit on the head node")
    p.add_argument("--num-cpus", type=int, help="CPUs this node gives the campaign (default: Ray's, every core)")
    args = p.parse_args(argv)
    print(ray_start_command(args.address, args.num_cpus))
    return 0


if __name__ == "__main__":
    sys.exit(main())
