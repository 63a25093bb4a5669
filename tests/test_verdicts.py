"""lowp's verdict machinery (issue 10), pinned down with small kernels written for it (tests/verdicts/): the native
guard (faults named by buffer, offset, access, size and instruction; budgets; over-reads a kernel declares), poison
in C and the workspace, fresh kernel state, the emulator's seeded registers and true access sizes, the depth ladder
against a brute-force search, the shrinker, and run_check's diagnosis of one-bug kernels. Expected values come from
independent arithmetic (x86/A64 operand sizes, products of the ranges), never from the code under test."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest

from lowp.conformance.search.cases import END_CLASSES, MAX_LADDER_K, Case, ladder_ks, overflow_depths
from lowp.conformance.run.checks import (Call, Check, Failure, Recorder, counterexample, diagnose, replay, run_check,
                                     search, shrink)
from lowp.emulator import Machine, build
from lowp.emulator.errors import BudgetExceeded, OutOfBounds
from lowp.kernels import Domain, Kernel, Tile, load_toml
from lowp.kernels.emulated import EmulatedExecutor
from lowp.kernels.executors import NativeExecutor, poison
from lowp.kernels.models import exact_gemm

HERE = Path(__file__).parent / "verdicts"
S16, U16, S32 = (-2 ** 15, 2 ** 15 - 1), (0, 2 ** 16 - 1), (-2 ** 31, 2 ** 31 - 1)
FAST = dict(examples=40, grid=False)


# ---- fixtures and helpers ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kernels():
    """The kernels of tests/verdicts/verdicts.toml, registered afresh (a re-run in one process replaces them)."""
    from lowp.kernels.registry import _KERNELS
    for entry in tomllib.loads((HERE / "verdicts.toml").read_text())["kernel"]:
        _KERNELS.pop(entry["name"], None)
    return {k.name: k for k in load_toml(HERE / "verdicts.toml")}


def native(kernel, **options) -> NativeExecutor:
    ex = NativeExecutor(kernel, **options)
    reason = ex.unavailable()
    if reason:
        pytest.skip(f"{kernel.name}: {reason}")
    return ex


def operands(m, n, k, seed):
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 255, (m, k), dtype=np.uint8, endpoint=True),
            rng.integers(-128, 127, (k, n), dtype=np.int8, endpoint=True))


def product(A, B):
    """The exact product; every test input here is small enough to fit int32."""
    return A.astype(np.int64) @ B.astype(np.int64)


_rows = {}


def row_of(name: str, **options) -> tuple[dict, list[dict]]:
    """run_check of `name`'s exact contract on its claimed domain (once per module), with the events it emitted."""
    if name not in _rows:
        events = []
        row = run_check(Check(name, "exact", "claimed", True), events.append, **{**FAST, **options})
        _rows[name] = row, events
    return _rows[name]


# ---- 1. the native guard -----------------------------------------------------------------------------------------
# A is 2x3 u8 (6 bytes), B 3x4 s8, C 2x4 int32 (32 bytes), the workspace M*N*4 + 8 = 40 bytes (guard.c).
M, N, K = 2, 4, 3
# (kernel, buffer, byte offset of the first byte outside it, access, bytes accessed, operand keyword capstone prints
# for that many bytes). How far past the end the access reaches is (start offset + size - nbytes): the load of mode 2
# starts at offset 0, every other access at the end itself.
FAULTS = [
    ("vt_guard_1", "A", M * K, "read", 1, "byte ptr"),             # A[M*K], one byte past A
    ("vt_guard_2", "A", M * K, "read", 32, "ymmword ptr"),         # one 32-byte load from A's start
    ("vt_guard_3", "C", M * N * 4, "write", 4, "dword ptr"),       # C[M*N], one int32 past C
    ("vt_guard_5", "work", M * N * 4 + 8, "write", 1, "byte ptr"),  # one byte past the declared workspace
]


@pytest.mark.native
@pytest.mark.parametrize("name,buffer,offset,access,size,operand", FAULTS, ids=[f[0] for f in FAULTS])
def test_guard_names_the_out_of_bounds_access(kernels, name, buffer, offset, access, size, operand):
    A, B = operands(M, N, K, 1)
    with pytest.raises(OutOfBounds) as caught:
        native(kernels[name]).run(A, B)
    e = caught.value
    assert (e.buffer, e.offset, e.access, e.size) == (buffer, offset, access, size)
    assert e.nbytes == offset and e.past_end == 0
    began = 0 if name == "vt_guard_2" else offset
    reach = began + size - offset
    message = str(e)
    assert f"reaches {reach} byte{'s' if reach != 1 else ''} past its end" in message
    assert f"buffer {buffer!r}" in message and f"{access} of {size} byte" in message
    assert e.instruction and operand in e.instruction and e.instruction in message
    assert "vt_guard_gemm+0x" in message
    # The process goes on: the next call, of a right kernel, returns the right C.
    assert np.array_equal(native(kernels["vt_guard_0"]).run(A, B), product(A, B))


@pytest.mark.native
def test_guard_finds_a_write_before_the_start_of_c(kernels):
    A, B = operands(M, N, K, 2)
    with pytest.raises(OutOfBounds) as caught:
        native(kernels["vt_guard_4"]).run(A, B)
    e = caught.value
    # C[-1] = 0x7fffffff changes all four bytes below C (none of them is the canary byte 0xA5).
    assert (e.buffer, e.offset, e.access) == ("C", -4, "write")
    assert "before its start" in str(e) and "byte offset -4" in str(e)
    assert np.array_equal(native(kernels["vt_guard_0"]).run(A, B), product(A, B))


@pytest.mark.native
def test_guard_names_a_null_write(kernels):
    A, B = operands(M, N, K, 3)
    with pytest.raises(OutOfBounds) as caught:
        native(kernels["vt_guard_6"]).run(A, B)
    e = caught.value
    assert (e.buffer, e.address, e.access, e.size) == (None, 0, "write", 4)
    assert "write of unmapped memory at 0x0" in str(e) and "in no buffer" in str(e)
    assert "dword ptr" in e.instruction and e.instruction in str(e) and "vt_guard_gemm+0x" in str(e)
    assert np.array_equal(native(kernels["vt_guard_0"]).run(A, B), product(A, B))


@pytest.mark.native
def test_guard_stops_a_runaway_loop_at_its_budget(kernels):
    A, B = operands(M, N, K, 4)
    t0 = time.perf_counter()
    with pytest.raises(BudgetExceeded) as caught:
        native(kernels["vt_guard_7"], budget=0.5).run(A, B)
    elapsed = time.perf_counter() - t0
    assert 0.45 <= elapsed < 5
    e = caught.value
    assert e.budget == 0.5 and "budget of 0.5 s" in str(e)
    assert e.instruction and e.instruction in str(e) and "vt_guard_gemm+0x" in str(e)
    assert np.array_equal(native(kernels["vt_guard_0"]).run(A, B), product(A, B))


@pytest.mark.native
def test_declared_overread_lets_the_vector_load_through_but_not_a_write_there(kernels):
    A, B = operands(M, N, K, 5)
    assert kernels["vt_guard_2_overread"].overread == {"A": 32}
    assert np.array_equal(native(kernels["vt_guard_2_overread"]).run(A, B), product(A, B))
    # A write one byte past A: a fault at the instruction without the over-read, a canary found damaged with it.
    with pytest.raises(OutOfBounds) as caught:
        native(kernels["vt_guard_8"]).run(A, B)
    assert (caught.value.buffer, caught.value.offset, caught.value.access) == ("A", M * K, "write")
    assert caught.value.instruction is not None
    with pytest.raises(OutOfBounds) as caught:
        native(kernels["vt_guard_8_overread"]).run(A, B)
    assert (caught.value.buffer, caught.value.offset, caught.value.access) == ("A", M * K, "write")
    assert "over-read" in str(caught.value)
    assert np.array_equal(native(kernels["vt_guard_0"]).run(A, B), product(A, B))


@pytest.mark.native
def test_guarded_and_unguarded_calls_agree(kernels):
    guarded, plain = native(kernels["vt_guard_0"]), native(kernels["vt_guard_0"], guard=False)
    rng = np.random.default_rng(6)
    for trial in range(25):
        m, n, k = (int(x) for x in rng.integers(1, 40, 3))
        A, B = operands(m, n, k, 100 + trial)
        C = guarded.run(A, B, seed=trial)
        assert np.array_equal(C, plain.run(A, B, seed=trial)), (m, n, k)
        assert np.array_equal(C, product(A, B)), (m, n, k)


# ---- 2. poison, 3. fresh state -------------------------------------------------------------------------------------
def probe(kernels, target: str, mode: int):
    k = kernels[f"vt_probe_{target}_{mode}"]
    return native(k) if target == "x86" else EmulatedExecutor(k)


@pytest.mark.parametrize("target", ["x86", pytest.param("a64", marks=pytest.mark.emulated)])
def test_c_and_the_workspace_arrive_poisoned(kernels, target):
    A, B = operands(3, 5, 2, 7)
    leave, copy = probe(kernels, target, 0), probe(kernels, target, 1)
    C = leave.run(A, B, seed=11)
    assert np.array_equal(C, poison((3, 5), np.int32, 11)) and np.all(C != 0)
    assert np.array_equal(leave.run(A, B, seed=11), C)                 # the same seed, the same poison
    assert np.any(leave.run(A, B, seed=12) != C)                       # another seed, other poison
    work = copy.run(A, B, seed=11, work_seed=21).view(np.uint8).ravel()
    assert np.array_equal(work, poison(3 * 5 * 4, np.uint8, 21)) and np.all(work != 0)
    assert np.array_equal(copy.run(A, B, seed=99, work_seed=21).view(np.uint8).ravel(), work)
    assert np.any(copy.run(A, B, seed=11, work_seed=22).view(np.uint8).ravel() != work)


@pytest.mark.parametrize("target", ["x86", pytest.param("a64", marks=pytest.mark.emulated)])
def test_fresh_state_is_a_first_call(kernels, target):
    A, B = operands(2, 2, 2, 8)
    ex = probe(kernels, target, 2)
    first = int(ex.run(A, B)[0, 0])
    assert int(ex.run(A, B)[0, 0]) == first + 1
    fresh = ex.with_fresh_state()
    assert [int(fresh.run(A, B)[0, 0]) for _ in range(2)] == [1, 2]    # its own counter, from the start
    assert int(ex.run(A, B)[0, 0]) == first + 2                        # and the old copy's is untouched


# ---- 4. the emulator ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def machine():
    return Machine(build(HERE / "registers.c", flags=("-O2",)))


@pytest.mark.emulated
@pytest.mark.parametrize("symbol", ["vt_x9", "vt_v9"])
def test_registers_at_entry_follow_the_seed(machine, symbol):
    a = machine.call(symbol, seed=3).ret
    b = machine.call(symbol, seed=4).ret
    c = machine.call(symbol, seed=3).ret
    assert a == c and a != b



@pytest.mark.emulated
@pytest.mark.parametrize("symbol", ["vt_x9", "vt_v9"])
def test_a_fresh_machine_takes_the_seeded_states_another_machine_wrote(machine, symbol):
    """A seed's register state is written once a process (emulator.machine._SEEDED) and restored into every machine
    of the convention: a machine made after the states were kept sees what a machine that wrote them itself sees,
    for every state, and two states still differ."""
    from lowp.emulator import machine as machines
    seeds = range(machines.REGISTER_STATES)
    writer = Machine(machine.binary)
    for s in seeds:
        writer.call(symbol, seed=s)
    assert all((machines.AAPCS64, (s, 0)) in machines._SEEDED for s in seeds)
    kept = [Machine(machine.binary).call(symbol, seed=s).ret for s in seeds]      # each restores the kept state
    saved = dict(machines._SEEDED)
    machines._SEEDED.clear()
    try:
        written = [Machine(machine.binary).call(symbol, seed=s).ret for s in seeds]
    finally:
        machines._SEEDED.update(saved)
    assert kept == written and len(set(kept)) > 1

@pytest.mark.emulated
def test_emulator_reports_the_true_size_of_ldr_q_and_honours_overread(machine):
    A = np.arange(1, 7, dtype=np.uint8)
    with pytest.raises(OutOfBounds) as caught:
        machine.call("vt_ldr_q", A, names=["A"])
    e = caught.value
    assert (e.buffer, e.offset, e.access, e.size) == ("A", 6, "read", 16)
    assert "reaches 10 bytes past its end" in str(e) and e.instruction.startswith("ldr q0")
    assert machine.call("vt_ldr_q", A, names=["A"], overread={"A": 16}).ret == 1
    ok = machine.call("vt_ldr_q_then_store", A, 5, names=["A", "n"], overread={"A": 16})
    assert ok["A"][5] == 1
    with pytest.raises(OutOfBounds) as caught:
        machine.call("vt_ldr_q_then_store", A, 6, names=["A", "n"], overread={"A": 16})
    assert (caught.value.buffer, caught.value.offset, caught.value.access) == ("A", 6, "write")


# ---- 5. the depth ladder ----------------------------------------------------------------------------------------------
RANGES = {"u8xs8": ((0, 255), (-128, 127)), "s8xs8": ((-128, 127), (-128, 127)), "|11|x|11|": ((-11, 11), (-11, 11)),
          "u4xu4": ((0, 15), (0, 15)), "u7xs8": ((0, 127), (-128, 127))}


def first_depth_leaving(lo: int, hi: int, into: tuple[int, int]) -> int | None:
    """Brute force: the first K (up to the deepest ladder step) at which K terms all at `lo` or all at `hi` leave
    `into`."""
    ks = np.arange(1, MAX_LADDER_K + 1, dtype=np.int64)
    out = np.flatnonzero((ks * hi > into[1]) | (ks * lo < into[0]))
    return int(ks[out[0]]) if out.size else None


def brute_depths(a, b) -> dict[str, int]:
    products = np.outer(np.arange(a[0], a[1] + 1), np.arange(b[0], b[1] + 1))
    lo, hi = int(products.min()), int(products.max())
    out = {"int16 lane": first_depth_leaving(lo, hi, S16), "int32 accumulator": first_depth_leaving(lo, hi, S32)}
    if lo >= 0:
        out["uint16 lane"] = first_depth_leaving(lo, hi, U16)
    if 2 * hi > S16[1] or 2 * lo < S16[0]:
        out["int16 pair sum"] = 2
    for name, r in (("int16 column sums of B", b), ("int16 row sums of A", a)):
        if r != (0, 0):
            out[name] = first_depth_leaving(r[0], r[1], S16)
    return {what: k for what, k in out.items() if k is not None}


def claim(name: str, a, b, tile=Tile(2, 2, 1)) -> Kernel:
    """An unregistered kernel with this claim (the ladder and the search read only its domain, types and tile)."""
    return Kernel(name=name, target="x86-64", features=(), source=HERE / "buggy.c", symbol="vt_accum_gemm",
                  signature="gemm", a_type="u8" if a[0] >= 0 else "s8", b_type="u8" if b[0] >= 0 else "s8",
                  tile=tile, packing="none", contract="exact", domain=Domain(a, b), model=exact_gemm)


@pytest.mark.parametrize("label", RANGES)
def test_overflow_depths_match_a_brute_force_search(label):
    assert overflow_depths(*RANGES[label]) == brute_depths(*RANGES[label])


def test_overflow_depths_hand_checked():
    # 271 * 121 = 32791 > 32767 >= 270 * 121; 257 * -128 < -32768 <= 256 * -128; 292 * 225 > 65535 >= 291 * 225.
    assert overflow_depths((-11, 11), (-11, 11))["int16 lane"] == 271
    assert overflow_depths((0, 255), (-128, 127))["int16 column sums of B"] == 257
    assert overflow_depths((0, 15), (0, 15))["uint16 lane"] == 292


@pytest.mark.parametrize("label", RANGES)
def test_ladder_visits_every_overflow_depth_and_the_blocking_and_vector_edges(label):
    ks = set(ladder_ks(claim("vt_ladder", *RANGES[label]), "claimed"))
    for depth in brute_depths(*RANGES[label]).values():
        # (the ladder stops at its deepest step, MAX_LADDER_K: s8 x s8 wraps int32 there, at 2**31 / 128**2)
        assert {d for d in (depth - 1, depth, depth + 1) if 1 <= d <= MAX_LADDER_K} <= ks, depth
    assert {255, 256, 257, 1023, 1024, 1025, 4095, 4096, 4097, 31, 32, 33} <= ks


class Exact:
    """An executor that is always right and remembers the shapes it was asked for."""

    def __init__(self):
        self.shapes = []

    def run(self, A, B, *, seed=0, work_seed=None):
        self.shapes.append((A.shape[0], B.shape[1], A.shape[1]))
        return product(A, B).astype(np.int32)


def searched_shapes(kernel) -> list:
    ex = Exact()
    found, tried, _ = search(Check(kernel.name, "exact", "claimed", True), kernel, Recorder(ex), 30, 0)
    assert found is None and tried == len(ex.shapes) > 0
    return ex.shapes


def test_search_draws_per_kernel_shapes():
    a, b = RANGES["u8xs8"]
    one, other = claim("vt_twin_one", a, b), claim("vt_twin_other", a, b)
    assert one.tile == other.tile
    shapes = searched_shapes(one)
    assert searched_shapes(one) == shapes                 # seeded by the check: the same kernel, the same shapes
    assert searched_shapes(other) != shapes               # another kernel of the same tile: others


# ---- 6. the shrinker ------------------------------------------------------------------------------------------------
def test_shrink_reaches_the_fewest_nonzeros_and_the_smallest_failing_depth():
    rng = np.random.default_rng(9)
    A = rng.integers(1, 255, (5, 127), dtype=np.uint8)        # K = 127: 127 % 32 == 31
    A.flat[rng.choice(A.size, 9, replace=False)] = 255
    B = rng.integers(-128, 127, (127, 6), dtype=np.int8)
    B[B == 0] = 1

    def fails(A, B):
        return np.count_nonzero(A == 255) >= 3 and A.shape[1] % 32 == 31
    assert fails(A, B)
    A, B = shrink(fails, A, B)
    assert A.shape[1] == 31 and B.shape[0] == 31
    assert np.count_nonzero(A) == 3 and np.count_nonzero(A == 255) == 3
    assert not B.any()


def test_shrink_runs_no_operands_twice_and_ends_where_running_every_attempt_ends():
    rng = np.random.default_rng(9)
    A = rng.integers(1, 255, (5, 127), dtype=np.uint8)
    A.flat[rng.choice(A.size, 9, replace=False)] = 255
    B = rng.integers(-128, 127, (127, 6), dtype=np.int8)
    B[B == 0] = 1
    q = {"scale": np.full(6, 0.5, np.float32), "output_zero_point": 3}
    ran = []

    def fails(A2, B2, q2):
        ran.append((A2.tobytes(), A2.shape, B2.tobytes(), B2.shape, q2["scale"].tobytes(), q2["output_zero_point"]))
        return np.count_nonzero(A2 == 255) >= 3 and A2.shape[1] % 32 == 31 and q2["output_zero_point"] != 0

    def simpler(q2):
        return [{**q2, "output_zero_point": 0}] if q2["output_zero_point"] else []
    A2, B2, q2 = shrink(fails, A.copy(), B.copy(), quant=q, simpler=simpler)
    assert len(ran) == len(set(ran)) > 0                  # each distinct attempt ran once

    every = []                  # the same shrink with every attempt run: a key that never repeats
    def fails_every(A3, B3, q3):
        every.append(1)
        return fails(A3, B3, q3)
    import lowp.conformance.run.checks as checks_module
    original, count = checks_module._attempt_key, iter(range(10 ** 9))
    checks_module._attempt_key = lambda *a: next(count)
    try:
        A3, B3, q3 = shrink(fails_every, A.copy(), B.copy(), quant=q, simpler=simpler)
    finally:
        checks_module._attempt_key = original
    assert len(every) > len(set(ran))                     # the plain shrink repeats attempts
    assert np.array_equal(A2, A3) and np.array_equal(B2, B3) and q2["output_zero_point"] == q3["output_zero_point"]
    assert A2.shape[1] == 31 and np.count_nonzero(A2) == 3


# ---- 7. diagnosis through run_check ---------------------------------------------------------------------------------
@pytest.mark.native
def test_accumulating_into_c_is_named(kernels):
    row, _ = row_of("vt_accum")
    assert row["verdict"] == "FAIL" and "accumulates into C" in row["cause"], row["cause"]
    assert "never written" not in row["cause"]


@pytest.mark.native
def test_unwritten_last_column_is_named(kernels):
    row, _ = row_of("vt_lastcol")
    cx = row["counterexample"]
    assert row["verdict"] == "FAIL" and "never written" in row["cause"]
    assert cx["first_diff"][1] == cx["shape"][1] - 1               # the first wrong element is in the last column


@pytest.mark.native
def test_workspace_read_before_written_is_named(kernels):
    row, _ = row_of("vt_dirtywork")
    assert row["verdict"] == "FAIL" and "reads workspace it did not write" in row["cause"]


@pytest.mark.native
def test_diagnose_names_a_stale_cache_right_after_it_shows(kernels):
    """diagnose() on a failure found right after the call it depends on (as run_check's generated cases find it):
    'depends on earlier calls', a counterexample with the call before it, that replays as FAIL."""
    kern = kernels["vt_stale"]
    check = Check(kern.name, "exact", "claimed", True)
    rec = Recorder(native(kern))
    A, B1 = operands(3, 4, 5, 10)
    _, B2 = operands(3, 4, 5, 11)
    first = Call(A, B1, 1, "first")
    assert np.array_equal(rec.run(first).C, product(A, B1))
    second = Call(A, B2, 2, "second")
    out = rec.run(second)
    assert np.array_equal(out.C, product(A, B1))                        # the old B's product
    failure = Failure(second, out, first)
    kind, cause = diagnose(check, kern, rec, failure)
    assert kind == "state" and "depends on earlier calls" in cause, cause
    cx = counterexample(check, kern, failure, kind, cause)
    assert cx["previous"] is not None and cx["previous"]["B"] == B1.tolist()
    row = {"kernel": kern.name, "check": "exact", "domain": "claimed", "claimed": True, "counterexample": cx}
    assert replay(check.id, {check.id: row})["verdict"] == "FAIL"


@pytest.mark.native
def test_the_second_poison_rerun_is_no_earlier_call_of_the_kernel(kernels, monkeypatch):
    """_at_sight reruns a call whose wrong elements hold their poison with a second poison, to tell elements never
    written from wrong values that equal it. The rerun runs on a fresh copy of the kernel: the kernel under
    diagnosis does not run it (its next call follows the same earlier calls) and its Recorder's last call stays the
    failing one, so a later "depends on earlier calls" diagnosis can neither name it nor be caused by it.
    vt_probe_x86_2 writes C[0] = its calls so far and zeros: with the poison taken as zeros, the zeros read as
    poison left in C and the rerun runs."""
    from lowp.conformance.run import checks
    kern = kernels["vt_probe_x86_2"]
    check = Check(kern.name, "exact", "claimed", True)
    rec = Recorder(native(kern, fresh=True))     # its own counter: vt_probe_x86_0/1 load the same library
    A, B = operands(2, 3, 4, 12)
    first, failing = Call(A, B, 1, "first"), Call(A, B, 2, "failing")
    rec.run(first)
    out = rec.run(failing)
    assert out.C[0, 0] == 2 and not out.C.reshape(-1)[1:].any()       # the second call of this copy
    monkeypatch.setattr(checks, "poison", lambda shape, dtype, seed: np.zeros(shape, dtype))
    assert checks._at_sight(check, kern, failing, out, rec)[0] == "unwritten"
    assert rec.last is failing
    assert rec.run(Call(A, B, 3, "next")).C[0, 0] == 3                 # the rerun was not one of its calls


REPLAY_IN_A_NEW_PROCESS = """
import json, sys
from lowp.conformance.run.checks import replay
from lowp.kernels import load_toml
load_toml(sys.argv[1])
row = json.loads(open(sys.argv[2]).read())
print(replay(row["id"], {row["id"]: row})["verdict"])
"""


@pytest.mark.native
def test_stale_cache_is_named_with_the_call_before_it_and_replays(kernels, tmp_path):
    row, _ = row_of("vt_stale")
    cx = row["counterexample"]
    assert row["verdict"] == "FAIL" and "depends on earlier calls" in row["cause"], row["cause"]
    assert cx["kind"] == "state" and cx["previous"] is not None
    assert cx["previous"]["shape"] == cx["shape"]          # the cache is by shape: the call before had the same
    # As `lowp replay` does it, in a process of its own: the previous call, then the counterexample, FAIL.
    (tmp_path / "row.json").write_text(json.dumps(row))
    out = subprocess.run([sys.executable, "-c", REPLAY_IN_A_NEW_PROCESS, str(HERE / "verdicts.toml"),
                          str(tmp_path / "row.json")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == "FAIL"


@pytest.mark.native
def test_stale_cache_replays_as_fail_in_process_whatever_ran_before(kernels):
    row, _ = row_of("vt_stale")
    cx = row["counterexample"]
    m, n, k = cx["shape"]
    A, B = np.array(cx["A"], np.uint8).reshape(m, k), np.array(cx["B"], np.int8).reshape(k, n)
    native(kernels["vt_stale"]).run(A, B)        # the library in this process now caches this B for this shape
    assert replay(row["id"], {row["id"]: row})["verdict"] == "FAIL"


@pytest.mark.native
def test_stale_cache_cause_claims_nothing_else(kernels):
    row, _ = row_of("vt_stale")
    assert "reads C before writing it" not in row["cause"] and "reads workspace" not in row["cause"], row["cause"]


@pytest.mark.native
def test_claimed_path_that_never_ran_fails_with_right_values(kernels):
    row, _ = row_of("vt_maddubs_u7")
    assert row["verdict"] == "FAIL" and row["failed"] == 0 and row["executed"] > 0
    assert row["counterexample"] is None                                # every value was right
    assert "the claimed path never ran" in row["cause"]
    assert "vpdpbusd" in row["path"] and "vpmaddubsw" in row["path"]


@pytest.mark.native
def test_a_native_kernels_path_is_probed_once_and_kept_for_its_build(kernels, monkeypatch):
    """The claimed path of a native kernel is the same for each of its checks: the second check reads it from the
    cache (the probe would now fail the test), a kernel of other requires probes again."""
    from dataclasses import replace

    from lowp.conformance.run import checks
    from lowp.kernels import executor
    k = kernels["vt_maddubs_u7"]
    ex = executor(k)
    ex._lib
    kept = checks._path_file(checks._path_key(k, ex, checks._path_probes(k)))
    kept.unlink(missing_ok=True)
    first = checks.claimed_path(k, ex)
    assert first[0] is False and "vpdpbusd" in first[1] and kept.exists()

    def probe(*args):
        raise AssertionError("probed again")
    monkeypatch.setattr(checks, "_native_path", probe)
    assert checks.claimed_path(k, executor(k)) == first
    other = replace(k, requires=("vpmaddubsw",))
    with pytest.raises(AssertionError, match="probed again"):
        checks.claimed_path(other, executor(other))


def test_an_emulated_kernels_path_is_probed_on_a_fresh_machine_once_and_kept(monkeypatch):
    """An emulated kernel's path probes run on a copy of its machine, not the check's (whose cases then meet the
    state they would without them), and are kept for its other checks: the second asks no machine."""
    from lowp.conformance.run import checks
    from lowp.kernels import executor, kernel
    k = kernel("sdot_s8_neon")
    ex = executor(k)
    if ex.backend == "native" or ex.unavailable():
        pytest.skip(f"sdot_s8_neon runs on {ex.backend}: {ex.unavailable()}")
    kept = checks._path_file(checks._path_key(k, ex, checks._path_probes(k)))
    kept.unlink(missing_ok=True)
    first = checks.claimed_path(k, ex)
    assert first[0] is True and "sdot" in first[1] and kept.exists()
    assert ex.last is None                      # the check's machine ran nothing

    def probe(*args):
        raise AssertionError("probed again")
    monkeypatch.setattr(checks, "_emulated_path", probe)
    assert checks.claimed_path(k, executor(k)) == first


SMLAL_WRAP = 32767 // 121 + 1     # the first depth at which 11 * 11 products wrap an int16 lane: 271


@pytest.mark.emulated
def test_narrow_accumulator_is_found_by_the_ladder_at_the_first_wrapping_depth(kernels):
    row, events = row_of("vt_smlal_flush300")
    assert row["verdict"] == "FAIL"
    cases = [e for e in events if e.get("event") == "case"]
    depth = [Case.from_id(e["case"]).k for e in cases]
    failing = [d for d, e in zip(depth, cases) if not e["ok"]]
    assert failing and failing[0] == SMLAL_WRAP
    assert all(e["ok"] for d, e in zip(depth, cases) if d < SMLAL_WRAP)
    assert any(d == SMLAL_WRAP - 1 for d in depth)


@pytest.mark.emulated
def test_narrow_accumulator_counterexample_has_the_first_wrapping_depth(kernels):
    row, _ = row_of("vt_smlal_flush300")
    cx = row["counterexample"]
    assert cx["shape"][2] == SMLAL_WRAP, cx["shape"]
    case = Case.from_id(cx["case"])              # a ladder case at the int16 lane's depth, every element at an end
    assert (case.name, case.k) == ("depth_int16_wrap", SMLAL_WRAP) and case.values in END_CLASSES
    A, B = np.array(cx["A"]), np.array(cx["B"])
    assert np.all(np.abs(A) == 11) and np.all(np.abs(B) == 11)
