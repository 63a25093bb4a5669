"""wasm32 on wasmtime (lowp.emulator.wasm, emulator/targets/wasm32.py): the machine's guarantees (a read one byte
past a buffer, a write into its declared over-read, a NULL pointer: named OutOfBounds; a runaway loop: the fuel
budget; a failed assert: a Trap with its words), lowp's own wasm GEMMs through the conformance checks (an exact
SIMD128 kernel passes; a dropped tail, a relaxed dot where exact is needed, an over-read, a runaway loop and a trap
each fail naming why; the relaxed-dot kernel judged under each behaviour), the XNNPACK campaign over a small tree
of lowp's own wasm kernels (tests/xnnpack_wasm_tree: one row per relaxed-dot behaviour, right only under the one
XNNPACK dispatches on; IGEMMs through an indirection buffer of 4-byte wasm32 pointers, one exact, one that ignores
a_offset and reads out of bounds through its pointers, one that reads the pointers as 8 bytes), and the wasm fp32 output stage composed from the instruction models equal to the scalar
imagic stage. Everything that runs wasm skips with the reason without wasmtime."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from lowp.emulator.errors import BudgetExceeded, OutOfBounds, Trap
from lowp.emulator.wasm.machine import unavailable
from tests.conftest import load_kernels

HERE = Path(__file__).parent
TOML = HERE / "wasm" / "gemm.toml"
TREE = HERE / "xnnpack_wasm_tree"
needs_wasmtime = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))

GUEST_C = textwrap.dedent("""
    #include <assert.h>
    #include <stdint.h>
    int32_t sum(const int32_t *x, long n, int64_t scale) {
        int32_t s = 0;
        for (long i = 0; i < n; i++) s += x[i];
        return s * (int32_t) scale;
    }
    int32_t peek(const int8_t *x, long i) { return ((volatile const int8_t *) x)[i]; }
    void poke(int8_t *x, long i) { ((volatile int8_t *) x)[i] = 1; }
    int32_t deref(const int32_t **table, long i) { return *table[i]; }
    int32_t null_read(long i) { return ((volatile const int32_t *) 0)[i]; }
    void spin(long n) { while (*(volatile long *) &n) {} }
    void check(long n) { assert(n == 3); }
""")


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    if unavailable():
        pytest.skip(unavailable())
    from lowp.emulator.wasm.build import build_for_wasm
    from lowp.emulator.wasm.machine import WasmMachine
    source = tmp_path_factory.mktemp("wasm") / "guest.c"
    source.write_text(GUEST_C)
    return WasmMachine(build_for_wasm(source))


# ---- the machine ---------------------------------------------------------------------------------------------
@needs_wasmtime
def test_calls_pass_arrays_by_address_and_ints_by_the_functions_types(machine):
    x = np.arange(-50, 47, dtype=np.int32)
    r = machine.call("sum", x, len(x), 3, names=["x", "n", "scale"])
    assert r.ret == 3 * int(x.sum()) and np.array_equal(r["x"], x) and r.instructions > len(x)
    assert "wasmtime" in machine.describe() and "relaxed SIMD deterministic" in machine.describe()


@needs_wasmtime
def test_raw_calls_set_globals_and_call_as_wasmtimes_public_api_does(machine):
    """The machine's calls go through wasmtime-py's C bindings directly (_RawCalls: the public API's per-value type
    lookups were a third of a wasm kernel's check); a global set that way reads back through the public API, a
    call returns what the public call returns, i64 arguments and negative values included, and a trap still
    raises wasmtime's Trap."""
    import wasmtime
    from lowp.emulator.wasm.machine import _RawCalls
    raw = machine._raw
    assert isinstance(raw, _RawCalls)               # wasmtime 50's internals as lowp pins them: the fast path runs
    public = machine.instance.exports(machine.store)     # exports looked up by name, as the public mapping has them
    for name in ("memory", "sum", "lowp_fault_site", "__heap_base"):
        assert type(machine.exports[name]) is type(public[name]) and name in machine.exports
    assert "no_such_export" not in machine.exports and machine.exports.get("no_such_export", 7) == 7
    glob = machine.globals["lowp_fault_site"]
    for value in (-1, 0, 123456, -2 ** 31, 2 ** 31 - 1):
        raw.set_i32(glob, value)
        assert glob.value(machine.store) == value
    machine._globals_set.pop("lowp_fault_site", None)
    func, params, kinds = machine._signature("sum")
    assert params == ["i32", "i32", "i64"] and kinds is not None
    from lowp.emulator.wasm.machine import GAP
    x = np.arange(-7, 9, dtype=np.int32)
    first = machine.call("sum", x, len(x), 1, names=["x", "n", "scale"])     # x placed and allowed, as _place does
    at = -(-machine.heap_base // 16) * 16 + GAP
    assert np.array_equal(np.frombuffer(machine.memory.read(machine.store, at, at + x.nbytes), np.int32), x)
    for n, scale in ((16, 1), (5, -3), (0, 2 ** 40 + 7)):
        public = func(machine.store, at, n, scale)
        assert raw.call(func, *kinds, [at, n, scale]) == public == int(x[:n].sum()) * scale % 2 ** 32 - (
            2 ** 32 if int(x[:n].sum()) * scale % 2 ** 32 >= 2 ** 31 else 0)
    assert first.ret == int(x.sum())
    spin, _, spin_kinds = machine._signature("spin")
    machine.store.set_fuel(10_000)
    with pytest.raises(wasmtime.Trap):
        raw.call(spin, *spin_kinds, [1])


@needs_wasmtime
def test_a_read_one_byte_past_a_buffer_is_a_named_fault(machine):
    x = np.arange(10, dtype=np.int8)
    assert machine.call("peek", x, 9).ret == 9
    with pytest.raises(OutOfBounds) as e:
        machine.call("peek", x, 10, names=["x", "i"])
    assert e.value.buffer == "x" and e.value.offset == 10 and e.value.access == "read"
    assert "reaches 1 byte past its end" in str(e.value) and "in function peek" in str(e.value)
    with pytest.raises(OutOfBounds, match="1 bytes before its start"):
        machine.call("peek", x, -1, names=["x", "i"])


@needs_wasmtime
def test_a_declared_over_read_may_be_read_but_not_written(machine):
    x = np.zeros(10, np.int8)
    assert machine.call("peek", x, 12, names=["x", "i"], overread={"x": 4}).ret == np.int8(-91)   # the canary, 0xA5
    with pytest.raises(OutOfBounds) as e:
        machine.call("peek", x, 14, names=["x", "i"], overread={"x": 4})
    assert "beyond the 4 bytes of over-read the kernel declares" in str(e.value)
    with pytest.raises(OutOfBounds) as e:
        machine.call("poke", x, 10, names=["x", "i"], overread={"x": 4})
    assert e.value.access == "write" and e.value.offset == 10


@needs_wasmtime
def test_a_null_pointer_and_a_pointer_table_of_4_byte_addresses(machine):
    from lowp.emulator.machine import Pointers
    value = np.array([7, 42], np.int32)
    r = machine.call("deref", Pointers((("v", 4), ("v", 0))), 0, names=["table", "i"], memory=[("v", value)])
    assert r.ret == 42
    with pytest.raises(OutOfBounds, match="at address 0x4, in no buffer"):
        machine.call("null_read", 1)


@needs_wasmtime
def test_a_runaway_loop_spends_its_fuel_and_an_assert_is_a_trap(machine):
    with pytest.raises(BudgetExceeded, match="runaway loop"):
        machine.call("spin", 1, budget=200_000)
    with pytest.raises(Trap, match="Assertion failed: n == 3"):
        machine.call("check", 2)
    assert machine.call("check", 3).ret == 0        # the machine goes on after a trap


# ---- lowp's own kernels through the checks ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def wasm_kernels():
    if unavailable():
        pytest.skip(unavailable())
    return load_kernels(TOML)


EXPECTED = {               # kernel -> (verdict of its claimed exact check, words its cause must hold)
    "wasm_simd": ("PASS", ""),
    "wasm_notail": ("FAIL", "k value dropped"),
    "wasm_relaxed_sdot": ("PASS", ""),
    "wasm_relaxed_pmaddubsw": ("FAIL", "B read as u8"),
    "wasm_relaxed_vpdpbusd": ("FAIL", "B read as u8"),
    "wasm_overread": ("FAIL", "OutOfBounds: out-of-bounds read of 1 byte"),
    "wasm_spin": ("FAIL", "BudgetExceeded"),
    "wasm_trap": ("FAIL", "Trap: trap_gemm: trap: wasm `unreachable`"),
}


@needs_wasmtime
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_lowps_own_wasm_kernels_get_the_right_verdicts(wasm_kernels, name):
    from lowp.conformance.run.checks import Check, run_check
    verdict, cause = EXPECTED[name]
    row = run_check(Check(name, "exact", "claimed", True), lambda e: None, examples=30)
    assert row["verdict"] == verdict, row
    assert cause in (row.get("cause") or ""), row["cause"]
    assert row["target"] == "wasm32" and row["backend"] == "wasmtime"


@needs_wasmtime
def test_each_relaxed_row_says_how_its_behaviour_was_given(wasm_kernels):
    from lowp.kernels import executor
    from lowp.emulator.wasm.relaxed import engine_behaviour
    sdot = executor(wasm_kernels["wasm_relaxed_sdot"]).describe()
    assert "relaxed dot: sdot (wasmtime's own, deterministic mode)" in sdot
    vpdpbusd = executor(wasm_kernels["wasm_relaxed_vpdpbusd"]).describe()
    if engine_behaviour("native") != "vpdpbusd":
        assert "relaxed dot: vpdpbusd (substituted: plain SIMD128 at compile time" in vpdpbusd


# ---- XNNPACK-shaped kernels: the campaign ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    if unavailable():
        pytest.skip(unavailable())
    out = tmp_path_factory.mktemp("wasm-campaign")
    result = subprocess.run([sys.executable, "-m", "lowp", "xnnpack", str(TREE), "--out", str(out), "--no-database",
                             "--jobs", "2", "--fresh"], capture_output=True, text=True, timeout=1200)
    return out, result


@needs_wasmtime
def test_the_campaign_judges_each_relaxed_kernel_under_each_behaviour(campaign):
    out, result = campaign
    assert result.returncode == 1, result.stderr[-2000:]
    doc = json.loads((out / "campaign.json").read_text())
    # a behaviour XNNPACK's dispatch never runs a kernel on: judged, claiming nothing ("wrong": a check failed)
    status = {k["name"]: k["status"] + (" wrong" if k.get("wrong") else "") for k in doc["kernels"]}
    prefix = "xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_"
    assert status == {
        prefix + "1x4c8__wasmsimd_dot16x2_ld64": "passed",
        prefix + "1x4c8__wasmsimd_dot16x2_ld128": "failed",          # drops the last block of k
        prefix + "1x4c16__wasmsdot+sdot": "passed",                   # XNNPACK dispatches wasmsdot here only
        prefix + "1x4c16__wasmsdot+pmaddubsw": "unclaimed wrong",
        prefix + "1x4c16__wasmsdot+vpdpbusd": "unclaimed wrong",
        prefix + "1x4c16__wasmusdot+sdot": "unclaimed wrong",
        prefix + "1x4c16__wasmusdot+pmaddubsw": "unclaimed wrong",
        prefix + "1x4c16__wasmusdot+vpdpbusd": "passed",              # ... and wasmusdot here only
        IGEMM + "2x4c8__wasmsimd_dot16x2_ld64": "passed",             # 4-byte pointers, a_offset, zero, junk rows
        IGEMM + "2x4c8__wasmsimd_dot16x2_ld128": "failed",            # ignores a_offset
        IGEMM + "1x4c8__wasmsimd_dot16x2_ld64": "failed"}             # reads the pointers as 8 bytes
    rows = {r["id"]: r for r in json.loads((out / "report.json").read_text())["rows"]}
    dropped = rows[prefix + "1x4c8__wasmsimd_dot16x2_ld128:xnnpack-fp32:claimed"]
    assert dropped["counterexample"]["shape"][2] % 8 and dropped["cause"].startswith("wrong value")   # K % 8 != 0
    usdot = rows[prefix + "1x4c16__wasmusdot+vpdpbusd:xnnpack-fp32:claimed"]
    assert usdot["target"] == "wasm32" and "relaxed dot: vpdpbusd" in usdot["emulator"]
    import tomllib
    kept = {k["name"]: k for k in tomllib.loads((out / "kernels.toml").read_text())["kernel"]}
    sdot = kept[prefix + "1x4c16__wasmsdot+pmaddubsw"]
    assert sdot["target"] == "wasm32" and sdot["cflags"][-2:] == ["-msimd128", "-mrelaxed-simd"]
    assert "relaxed_dot_pmaddubsw" in sdot["features"] and sdot["model"]["output"] == "xnnpack-fp32-imagic"
    assert "dispatches it only under sdot" in sdot["description"] and sdot["claims"] is False
    assert "claims" not in kept[prefix + "1x4c16__wasmsdot+sdot"]
    assert not rows[prefix + "1x4c16__wasmsdot+pmaddubsw:model:full"]["claimed"]


IGEMM = "xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_"


@needs_wasmtime
def test_a_wasm_igemm_that_ignores_a_offset_reads_out_of_bounds_through_its_pointers(campaign):
    """The indirection buffer holds wasm32 addresses less a_offset: a kernel that does not add a_offset back reads
    before A, which the bounds-checked module names (buffer A, a negative offset, the load, the function). Its
    checks at a_offset 0 pass: only the a_offset cases (XNNPACK's a_offset and zero_index tests) catch it."""
    out, _ = campaign
    rows = {r["id"]: r for r in json.loads((out / "report.json").read_text())["rows"]}
    row = rows[IGEMM + "2x4c8__wasmsimd_dot16x2_ld128:xnnpack-fp32:claimed"]
    assert row["verdict"] == "FAIL" and row["target"] == "wasm32", row
    cause = row["cause"]
    assert cause.startswith("OutOfBounds: out-of-bounds read of 8 bytes at byte offset -"), cause
    assert "of buffer 'A'" in cause and "bytes before its start" in cause and "in function igemm_mrx4c8" in cause
    assert row["counterexample"]["options"]["igemm"]["a_offset"] > 0, row["counterexample"]
    eight = rows[IGEMM + "1x4c8__wasmsimd_dot16x2_ld64:xnnpack-fp32:claimed"]
    assert eight["verdict"] == "FAIL" and eight["cause"].startswith("wrong value"), eight["cause"]
    exact = rows[IGEMM + "2x4c8__wasmsimd_dot16x2_ld64:xnnpack-fp32:claimed"]
    assert exact["verdict"] == "PASS" and exact["executed"] == exact["cases"] > 100, exact


# ---- the output stage ----------------------------------------------------------------------------------------------
def test_the_wasm_fp32_stage_is_the_scalar_imagic_stage():
    """XNNPACK's wasm stage composed from the instruction models (convert, mul, the magic bias, i32x4.max with
    magic_min, i32x4.sub, the saturating narrows, i8x16.min with output_max) equals xnnpack-fp32-imagic, on
    accumulators from 0 to beyond the magic bias's exact range, at every zero point and clamp."""
    from lowp.isa_models.float32 import MAGIC_BIAS_BITS
    from lowp.isa_models.requant import xnnpack_fp32_imagic
    from lowp.isa_models.wasm import simd128 as w
    rng = np.random.default_rng(7)
    n = 4000
    acc = np.concatenate([rng.integers(-2 ** 31, 2 ** 31, n), rng.integers(-5000, 5000, n)]).astype(np.int32)
    for _ in range(30):
        zp = int(rng.integers(-128, 128))
        lo, hi = sorted(int(v) for v in rng.integers(-128, 128, 2))
        scale = np.float32(2.0 ** rng.uniform(-24, 2))
        q = {"bias": np.zeros(4, np.int32), "scale": np.full(4, scale, np.float32), "output_zero_point": zp,
             "output_min": lo, "output_max": hi}
        want = xnnpack_fp32_imagic(acc.reshape(-1, 4), q, "s8").reshape(-1, 4)
        v = w.f32x4_mul(w.f32x4_convert_i32x4_s(acc.reshape(-1, 4)), np.full((1, 4), scale, np.float32))
        v = w.f32x4_add(v, np.full((1, 4), 12582912.0, np.float32)).view(np.int32)
        magic_min = np.float32(12582912.0 + (lo - zp)).view(np.int32)
        v = w.i32x4_max_s(v, np.full((1, 4), magic_min, np.int32))
        v = w.i32x4_sub(v, np.full((1, 4), MAGIC_BIAS_BITS - zp, np.int32))
        s16 = w.i16x8_narrow_i32x4_s(v, v)
        s8 = w.i8x16_narrow_i16x8_s(s16, s16)
        got = w.i8x16_min_s(s8, np.full((1, 16), hi, np.int8))[:, :4]
        assert np.array_equal(got, want), (zp, lo, hi, scale)


@needs_wasmtime
def test_a_trap_is_a_trap_after_another_handler_took_sigill(machine):
    """wasmtime's trap handlers are put back for each wasm call (lowp.emulator.wasm.traps): a handler installed
    after them (here the default action, as a native guard that was cut short leaves it) would take the trap and
    end the process with "Illegal instruction". In a child process."""
    import subprocess
    import sys
    script = f"""
import signal, numpy as np
from lowp.emulator.wasm.machine import WasmMachine
from lowp.emulator.wasm.build import build_for_wasm
from lowp.emulator.errors import OutOfBounds
m = WasmMachine(build_for_wasm({str(machine.binary.sources[0])!r}))
x = np.zeros(10, np.int8)
for label in ("first trap", "trapped"):
    try:
        m.call("poke", x, 10, names=["x", "i"])
    except OutOfBounds:
        print(label)
    signal.signal(signal.SIGILL, signal.SIG_DFL)      # not wasmtime's any more
    signal.signal(signal.SIGSEGV, signal.SIG_DFL)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.split()[:3] == ["first", "trap", "trapped"], \
        (done.returncode, done.stdout, done.stderr[-1500:])


@needs_wasmtime
def test_machines_hold_no_file_each(machine):
    """A campaign's process builds and keeps a machine per wasm kernel: with wasmtime's copy-on-write memory images
    each held a memfd, and hundreds of them pushed the process past select()'s 1024 files."""
    from lowp.emulator.wasm.machine import WasmMachine, _compiled

    def files() -> int:
        return len(os.listdir("/proc/self/fd"))

    def another():          # a module of its own each time, as each kernel's is (loaded from its compiled copy)
        _compiled.cache_clear()
        return WasmMachine(machine.binary)
    before = files()
    kept = [another() for _ in range(20)]
    assert files() - before < 5, files() - before
    assert len(kept) == 20
