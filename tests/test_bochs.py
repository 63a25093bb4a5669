"""The x86-64 Bochs target (lowp.emulator.x86.bochs): CPU models, guard pages and canaries, the fault classes, budgets,
exact counts, the ABI, seeds, AMX on lowp's models, the guest process's life, and the kernels it judges."""
import os
import signal
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

from lowp.emulator.x86 import bochs
from lowp.emulator.errors import (AlignmentFault, BudgetExceeded, BuildError, EmulationFailed, OutOfBounds, Trap,
                                  UndefinedInstruction)

HERE = Path(__file__).parent
FAULTS = HERE / "x86" / "bochs_faults.c"
pytestmark = pytest.mark.skipif(bochs.unavailable() is not None, reason=f"Bochs unavailable: {bochs.unavailable()}")


@pytest.fixture(scope="module")
def binary():
    return bochs.build_for_bochs(FAULTS, flags=("-O2",))


@pytest.fixture(scope="module")
def machine(binary):
    with bochs.BochsMachine(binary) as m:
        yield m


# -- the CPU models ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("model", sorted(bochs.MODELS))
def test_every_feature_a_model_claims_executes_and_no_other(binary, model):
    """One instruction of each feature in tests/x86/bochs_faults.c: the model's table says which run (and the
    rest raise #UD), so a kernel is never sent to a model that lacks what it needs."""
    probed = sorted(s[len("feature_"):] for s in binary.symbols if s.startswith("feature_"))
    ran, undefined = set(), set()
    with bochs.BochsMachine(binary, model=model) as m:
        for feature in probed:
            try:
                m.call(f"feature_{feature}")
                ran.add(feature)
            except UndefinedInstruction:
                undefined.add(feature)
    assert ran == set(probed) & bochs.MODELS[model]
    assert undefined == set(probed) - bochs.MODELS[model]


def test_a_kernel_goes_to_the_least_capable_model_with_all_its_features():
    assert bochs.model_for(("avx2",)) == "corei7_haswell_4770"
    assert bochs.model_for(("avx512f", "avx512bw")) == "corei7_skylake_x"
    assert bochs.model_for(("avx2", "avx512_vnni")) == "corei7_icelake_u"         # no AVX-VNNI to dispatch to
    assert bochs.model_for(("avx2", "avx_vnni")) == "arrow_lake"                    # AVX-VNNI without AVX-512
    assert bochs.model_for(("avx512_vnni", "avx_vnni")) == "sapphire_rapids"
    assert bochs.model_for(("avx2", "avx_vnni_int8")) == "arrow_lake"
    assert bochs.model_for(("amx_tile", "amx_int8")) == "corei7_haswell_4770"    # AMX: lowp's models on any
    assert bochs.model_for(("avx512f", "avx_vnni_int8")) == "sapphire_rapids"     # none has both: the default says
    from lowp.emulator.targets.x86_64 import BOCHS
    assert "lacks avx_vnni_int8" in BOCHS.cannot_run(("avx512f", "avx_vnni_int8"))
    assert BOCHS.cannot_run(("avx512f", "avx512_vnni")) is None


def test_unknown_model_is_refused(binary):
    with pytest.raises(ValueError, match="Bochs CPU models lowp knows"):
        bochs.BochsMachine(binary, model="pentium")


# -- faults --------------------------------------------------------------------------------------------------------

def test_read_one_element_past_the_end(machine):
    x = np.arange(10, dtype=np.int32)
    with pytest.raises(OutOfBounds) as e:
        machine.call("sum_off_by_one", x, 10, names=["x", "n"])
    err = e.value
    assert (err.buffer, err.offset, err.access, err.past_end) == ("x", 40, "read", 0)
    assert "sum_off_by_one+" in str(err) and "element 10" in str(err)
    assert machine.call("sum_off_by_one", x, 9).ret == 45


def test_write_past_the_end_names_the_first_byte(machine):
    with pytest.raises(OutOfBounds) as e:
        machine.call("fill_off_by_one", np.zeros(7, np.int16), 7, names=["y", "n"])
    assert (e.value.buffer, e.value.offset, e.value.access) == ("y", 14, "write")
    assert e.value.result["y"].tolist() == list(range(7))       # what the kernel wrote before the fault


def test_write_before_the_start_is_caught_by_the_canary(machine):
    with pytest.raises(OutOfBounds) as e:
        machine.call("write_before_start", np.zeros(4, np.int32), names=["y"])
    assert (e.value.buffer, e.value.offset, e.value.access) == ("y", -4, "write")
    assert "canary" in str(e.value)


def test_allowed_overread_is_readable_but_writes_there_are_caught(machine):
    x = np.arange(10, dtype=np.int32)
    machine.call("sum_off_by_one", x, 10, names=["x", "n"], overread={"x": 4})     # reads the canary: no fault
    with pytest.raises(OutOfBounds, match="allowed over-read"):
        machine.call("fill_off_by_one", np.zeros(7, np.int16), 7, names=["y", "n"], overread={"y": 2})


def test_misaligned_aligned_load_is_an_alignment_fault(machine):
    a = np.arange(33, dtype=np.uint8)[1:]          # 32 bytes: ends at a page end, so 32-byte aligned
    machine.call("aligned_load", a, np.zeros(32, np.uint8))
    with pytest.raises(AlignmentFault) as e:
        machine.call("aligned_load", np.arange(31, dtype=np.uint8), np.zeros(32, np.uint8), names=["a", "out"])
    assert e.value.buffer == "a" and "32-byte aligned address" in str(e.value)


def test_undefined_instruction_and_traps(machine):
    with pytest.raises(UndefinedInstruction, match="ud2"):
        machine.call("undefined")
    with pytest.raises(Trap, match="a breakpoint"):
        machine.call("breakpoint")
    with pytest.raises(Trap, match=r"abort\(\)"):
        machine.call("aborts")
    with pytest.raises(Trap, match=r"a failed assert\(\)"):
        machine.call("asserts", 41)
    machine.call("asserts", 42)
    with pytest.raises(Trap, match="divide error"):
        machine.call("divide", 1, 0)
    assert machine.call("divide", -7, 2).ret == -3


def test_stack_overflow_and_a_jump_into_the_void(machine):
    with pytest.raises(OutOfBounds, match="stack overflow") as e:
        machine.call("recurse", np.zeros(1, np.int64), 1)
    assert e.value.buffer == "stack"
    with pytest.raises(OutOfBounds, match="instruction fetch from 0x0"):
        machine.call("call_null")


def test_an_instruction_the_model_lacks_names_the_model(binary):
    with bochs.BochsMachine(binary, model="arrow_lake") as m:
        with pytest.raises(UndefinedInstruction, match="arrow_lake does not implement it") as e:
            m.call("feature_avx512_vnni")
    assert "vpdpbusd" in str(e.value)


# -- budgets and counts --------------------------------------------------------------------------------------------

def test_a_runaway_loop_stops_at_the_time_budget_and_the_machine_goes_on(machine):
    for fn in ("spin", "jump_to_self"):
        args = (np.zeros(1, np.int64),) if fn == "spin" else ()
        with pytest.raises(BudgetExceeded, match="ran longer than 1 s") as e:
            machine.call(fn, *args, budget=1_000_000)
        assert e.value.pc in range(machine.binary.symbol(fn), machine.binary.symbol(fn) + 64)
    assert machine.call("divide", 9, 3).ret == 3


def test_the_watchdog_sets_the_kill_bit_again_until_disarmed():
    """One kill can be lost to the CPU thread (bochs_watchdog.c says how): the watchdog repeats it every 20 ms
    from the deadline until the call disarms it, then stops, and a disarm before the deadline fires nothing."""
    import ctypes
    import time
    library = ctypes.CDLL(str(bochs.watchdog()))
    kills = []
    killer = ctypes.CFUNCTYPE(None, ctypes.c_uint)(kills.append)
    library.lowp_watchdog_start.argtypes = [ctypes.c_void_p]
    assert library.lowp_watchdog_start(ctypes.cast(killer, ctypes.c_void_p)) == 0
    library.lowp_watchdog_arm(ctypes.c_double(0.05))
    time.sleep(0.4)
    assert library.lowp_watchdog_disarm() == 1
    fired = len(kills)
    assert fired >= 3 and set(kills) == {0}
    time.sleep(0.1)
    assert len(kills) == fired
    library.lowp_watchdog_arm(ctypes.c_double(5.0))
    assert library.lowp_watchdog_disarm() == 0
    time.sleep(0.1)
    assert len(kills) == fired
    pid = os.fork()             # a fork (a forked Bochs guest) has no thread of the library's: it starts its own
    if pid == 0:
        try:
            fired = []
            callback = ctypes.CFUNCTYPE(None, ctypes.c_uint)(fired.append)
            ok = library.lowp_watchdog_start(ctypes.cast(callback, ctypes.c_void_p)) == 0
            library.lowp_watchdog_arm(ctypes.c_double(0.05))
            time.sleep(0.3)
            os._exit(0 if ok and library.lowp_watchdog_disarm() == 1 and fired else 1)
        finally:
            os._exit(2)
    assert os.waitpid(pid, 0)[1] == 0
    assert bochs.ForkedGuest.pristine()


def test_a_counted_call_keeps_an_exact_instruction_budget(machine):
    with pytest.raises(BudgetExceeded, match="instruction budget of 1,000 exhausted"):
        machine.call("jump_to_self", budget=1000, count=True)
    with pytest.raises(BudgetExceeded, match="instruction budget of 1,000 exhausted"):
        machine.call("spin", np.zeros(1, np.int64), budget=1000, count=True)


@pytest.mark.parametrize("n", [1, 2, 1000])
def test_counts_are_exact(machine, n):
    """count_loop runs 3 instructions n times, then ret: counted at the taken branches only."""
    r = machine.call("count_loop", n, count=True)
    assert r.instructions == 3 * n + 1
    r = machine.call("count_loop", n, mnemonics=True)
    assert r.mnemonics == {"dec": n, "nop": n, "jne": n, "ret": 1}
    assert machine.call("count_loop", n).instructions is None       # not asked: not counted, full speed


# -- the ABI, seeds ------------------------------------------------------------------------------------------------

def test_arguments_past_the_sixth_go_on_the_stack(machine):
    assert machine.call("eight", *range(1, 9)).ret == sum(i * i for i in range(1, 9))
    assert machine.call("eight", -1, 0, 0, 0, 0, 0, 0, -1).ret == -9


def test_a_seed_chooses_the_free_registers_and_replays(machine):
    first = machine.call("stray_register", seed=3).ret
    assert machine.call("stray_register", seed=3).ret == first
    assert machine.call("stray_register", seed=4).ret != first
    assert machine.call("stray_register").ret == 0


# -- the guest process ---------------------------------------------------------------------------------------------

def test_a_guest_that_dies_in_a_call_is_named_and_the_next_call_starts_another(binary):
    import threading
    with bochs.BochsMachine(binary, seconds=60) as m:
        assert m.call("divide", 8, 2).ret == 4
        pid = m._proc.pid
        threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()
        with pytest.raises(bochs.BochsDied, match="killed by SIGKILL.*the next call starts a new one"):
            m.call("spin", np.zeros(1, np.int64))
        assert m.call("divide", 8, 2).ret == 4
        assert m.restarts == 1 and m._proc.pid != pid


def _guest_run(binary, amx_binary, start: str) -> tuple:
    """What a guest started by `start` gives: an AMX call's C and modeled counts, an out-of-bounds fault, the kinds
    of the descriptors it holds, and a guest killed (named, and the next call starts another)."""
    rng = np.random.default_rng(7)
    a = rng.integers(0, 256, (16, 64), dtype=np.uint8)
    b = rng.integers(-128, 128, (16, 64), dtype=np.int8)
    c = rng.integers(-2 ** 31, 2 ** 31, (16, 16), dtype=np.int32)
    with bochs.BochsMachine(amx_binary) as m:
        r = m.call("tile_dot", a, b, c, 64, names=["a", "b", "c", "stride"])
        assert isinstance(m._proc, bochs.ForkedGuest if start == "fork" else subprocess.Popen)
        held = sorted(os.readlink(f"/proc/{m._proc.pid}/fd/{fd}").split(":")[0].split("#")[0]
                      for fd in os.listdir(f"/proc/{m._proc.pid}/fd"))
        with pytest.raises(OutOfBounds) as e:
            m.call("tile_dot", a[:15], b, c, 64, names=["a", "b", "c", "stride"])
    with bochs.BochsMachine(binary, seconds=60) as m:
        assert m.call("divide", 8, 2).ret == 4
        threading.Timer(0.3, os.kill, (m._proc.pid, signal.SIGKILL)).start()
        with pytest.raises(bochs.BochsDied, match="killed by SIGKILL") as died:
            m.call("spin", np.zeros(1, np.int64))
        assert m.call("divide", 8, 2).ret == 4 and m.restarts == 1
    return r["c"].tobytes(), r.modeled, (e.value.buffer, e.value.offset), held, "SIGKILL" in str(died.value)


def test_a_forked_guest_is_a_new_interpreters_guest(binary, amx_binary, monkeypatch, tmp_path):
    """GUEST_START 'fork' (the default: a fork of this process, imports and all) and 'exec' (a new interpreter)
    give the same results, faults and deaths, and their guests hold the same kinds of descriptors: a forked guest
    keeps none of this process's (here a file opened for the purpose, as a run's pipes would be)."""
    from lowp.isa_models.x86 import tdpbusd
    runs = {}
    decoy = os.open(tmp_path / "decoy", os.O_CREAT | os.O_RDWR)
    try:
        for start in ("exec", "fork"):
            monkeypatch.setattr(bochs, "GUEST_START", start)
            runs[start] = _guest_run(binary, amx_binary, start)
    finally:
        os.close(decoy)
    assert runs["fork"] == runs["exec"]
    rng = np.random.default_rng(7)
    a, b = rng.integers(0, 256, (16, 64), dtype=np.uint8), rng.integers(-128, 128, (16, 64), dtype=np.int8)
    assert runs["fork"][0] == tdpbusd(rng.integers(-2 ** 31, 2 ** 31, (16, 16), dtype=np.int32), a, b).tobytes()
    assert not any("decoy" in kind for kind in runs["fork"][3]), runs["fork"][3]


def test_build_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.c"
    bad.write_text("int f(void) { return missing; }\n")
    with pytest.raises(BuildError, match="bad.c") as e:
        bochs.build_for_bochs(bad)
    assert e.value.source == bad
    calls = tmp_path / "calls.c"
    calls.write_text("int puts(const char *); int f(void) { return puts(\"no libc in the guest\"); }\n")
    with pytest.raises(BuildError, match="puts"):
        bochs.build_for_bochs(calls)


def test_glibc_shim_gives_the_c23_functions():
    """The wheel's two glibc 2.38 symbols, for glibc 2.36 (Debian 12): strtoull with C23's 0b prefix."""
    import ctypes
    lib = ctypes.CDLL(str(bochs.shim()))
    lib.__isoc23_strtoull.restype = ctypes.c_ulonglong
    lib.__isoc23_strtoull.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    assert [lib.__isoc23_strtoull(s, None, 0) for s in (b"0b101", b"0x1f", b"17", b" -0b1")] == [5, 31, 17, 2 ** 64 - 1]
    value = ctypes.c_int()
    assert lib.__isoc23_sscanf(b"42", b"%d", ctypes.byref(value)) == 1 and value.value == 42


def test_missing_package_is_a_reason_with_the_install_line(monkeypatch):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "bochscpu" else real(name, *a))
    bochs.unavailable.cache_clear()
    try:
        assert "bochscpu-python not installed (pip install" in bochs.unavailable()
    finally:
        monkeypatch.undo()
        bochs.unavailable.cache_clear()


# -- AMX on lowp's models ------------------------------------------------------------------------------------------

AMX = r"""
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
struct cfg { uint8_t palette, start, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; };
__attribute__((target("amx-tile,amx-int8")))
void tile_dot(const uint8_t *a, const int8_t *b, int32_t *c, long stride_a) {
    struct cfg cfg; memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    cfg.rows[0] = 16; cfg.colsb[0] = 64; cfg.rows[1] = 16; cfg.colsb[1] = 64; cfg.rows[2] = 16; cfg.colsb[2] = 64;
    _tile_loadconfig(&cfg);
    _tile_loadd(0, c, 64);
    _tile_loadd(1, a, stride_a);
    _tile_loadd(2, b, 64);
    _tile_dpbusd(0, 1, 2);
    _tile_stored(0, c, 64);
    _tile_release();
}
__attribute__((target("amx-tile"))) void unconfigured(void) { _tile_zero(0); }
"""


@pytest.fixture(scope="module")
def amx_binary(tmp_path_factory):
    source = tmp_path_factory.mktemp("amx") / "amx.c"
    source.write_text(AMX)
    return bochs.build_for_bochs(source, flags=("-O2",))


@pytest.fixture(scope="module")
def amx(amx_binary):
    with bochs.BochsMachine(amx_binary) as m:
        yield m


def test_amx_runs_on_lowps_models_and_says_so(amx):
    from lowp.isa_models.x86 import tdpbusd
    rng = np.random.default_rng(5)
    a = rng.integers(0, 256, (16, 64), dtype=np.uint8)
    b = rng.integers(-128, 128, (16, 64), dtype=np.int8)
    c = rng.integers(-2 ** 31, 2 ** 31, (16, 16), dtype=np.int32)
    r = amx.call("tile_dot", a, b, c, 64, names=["a", "b", "c", "stride"], mnemonics=True)
    assert np.array_equal(r["c"], tdpbusd(c, a, b))       # the model is proven natively on AMX hosts
    assert r.modeled == {"ldtilecfg": 1, "tileloadd": 3, "tdpbusd": 1, "tilestored": 1, "tilerelease": 1}
    assert r.mnemonics["tdpbusd"] == 1


def test_amx_faults_as_hardware_would(amx):
    with pytest.raises(UndefinedInstruction, match="unconfigured"):
        amx.call("unconfigured")
    a = np.zeros((15, 64), np.uint8)       # a 16-row tile load from a 15-row buffer: row 15 is in the guard page
    with pytest.raises(OutOfBounds) as e:
        amx.call("tile_dot", a, np.zeros((16, 64), np.int8), np.zeros((16, 16), np.int32), 64,
                 names=["a", "b", "c", "stride"])
    assert (e.value.buffer, e.value.access, e.value.offset) == ("a", "read", 960)


STACK_TILE = r"""
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
struct cfg { uint8_t palette, start, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; };
// XNNPACK's qc4w AMX kernels' pattern: a local buffer written by vector stores and read only by a tile load
void stack_tile(const int8_t *b, int32_t *out) {
    struct cfg cfg; memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1; cfg.rows[0] = 16; cfg.colsb[0] = 64;
    _tile_loadconfig(&cfg);
    __attribute__((aligned(64))) int8_t buffer[16 * 64];
    __attribute__((aligned(64))) int32_t res[16 * 16];
    for (int r = 0; r < 16; r++)
        _mm512_store_si512(buffer + 64 * r, _mm512_add_epi8(_mm512_loadu_si512(b + 64 * r), _mm512_set1_epi8(1)));
    _tile_loadd(0, buffer, 64);
    _tile_stored(0, res, 64);
    memcpy(out, res, sizeof res);
    _tile_release();
}
"""


def test_amx_sources_are_built_where_the_tile_intrinsics_see_memory(tmp_path):
    """GCC 12's _tile_loadd is an asm statement with no memory operand: a buffer only a tile load reads has its
    stores dropped or moved (XNNPACK's qd8-f32-qc4w AMX kernels returned stale stack bytes). lowp builds
    -mamx-tile sources with zig's clang where the host's header is of that kind; the tile then holds the stores."""
    source = tmp_path / "stack_tile.c"
    source.write_text(STACK_TILE)
    binary = bochs.build_for_bochs(source, flags=("-O2", "-mavx512f", "-mavx512bw", "-mamx-tile"))
    header = __import__("subprocess").run(["cc", "-print-file-name=include/amxtileintrin.h"], capture_output=True,
                                          text=True).stdout.strip()
    text = Path(header).read_text() if Path(header).is_file() else ""
    from lowp.emulator.x86.native import host_amx_intrinsics_unsafe
    assert host_amx_intrinsics_unsafe() == ("tileloadd\\t(%0,%1,1)" in text and '"memory"' not in text[
        text.find("#define _tile_loadd_internal"):][:400])
    b = np.random.default_rng(9).integers(-128, 127, (16, 64), dtype=np.int8)
    with bochs.BochsMachine(binary) as m:
        out = m.call("stack_tile", b, np.zeros(256, np.int32), names=["b", "out"])["out"]
    assert np.array_equal(out.view(np.int8).reshape(16, 64), b + 1)
    # the native build (an AMX host runs it there) is made the same way: all 16 rows stored before the tile load
    from lowp.emulator.x86.native import build_shared_library
    so = build_shared_library([source], ("-O2", "-mavx512f", "-mavx512bw", "-mamx-tile"))
    listing = __import__("subprocess").run(["objdump", "-d", "--no-show-raw-insn", f"--disassemble=stack_tile",
                                            str(so)], capture_output=True, text=True).stdout
    code = [line.split("\t")[1].split()[0] for line in listing.splitlines() if line.count("\t") >= 1 and ":\t" in line]
    assert "tileloadd" in code and sum(m.startswith("vmovdqa") for m in code[:code.index("tileloadd")]) >= 16


# -- kernels judged on Bochs ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["u8s8s32_avx512vnni", "u8s8s32_avxvnni", "acc16_avx512bw", "u8s8s32_amx"])
def test_builtin_kernels_on_bochs_match_their_models(name):
    from lowp.kernels import executor, kernel
    k = kernel(name)
    ex = executor(k, "bochs")
    assert ex.backend == "bochs" and ex.unavailable() is None
    rng = np.random.default_rng(1)
    for m, n, kk in ((1, 1, 1), (5, 19, 67), (17, 33, 130)):
        A = rng.integers(0, 256, (m, kk)).astype(k.a_dtype)
        B = rng.integers(-128, 128, (kk, n)).astype(k.b_dtype)
        assert np.array_equal(ex.run(A, B, seed=m), k.model(A, B, **k.params))


def test_bochs_and_the_cpu_agree_where_the_cpu_runs_the_kernel():
    """The same sources and flags, natively and on Bochs: the same C, on the same cases (skips without the CPU's
    features)."""
    from lowp.kernels import executor, kernel
    k = kernel("u8s8s32_avx512vnni")
    native = executor(k, "native")
    if native.unavailable():
        pytest.skip(native.unavailable())
    emulated = executor(k, "bochs")
    rng = np.random.default_rng(2)
    for m, n, kk in ((3, 7, 9), (8, 64, 300)):
        A = rng.integers(0, 256, (m, kk)).astype(np.uint8)
        B = rng.integers(-128, 128, (kk, n)).astype(np.int8)
        assert np.array_equal(native.run(A, B, seed=1), emulated.run(A, B, seed=1))


def test_a_host_without_the_features_runs_the_kernel_on_bochs(monkeypatch):
    from lowp.kernels import executor, kernel
    monkeypatch.setenv("LOWP_DISABLE_FEATURES", "avx512f,avx512bw,avx512_vnni,avx_vnni")
    assert executor(kernel("u8s8s32_avx512vnni")).backend == "bochs"
    assert executor(kernel("u8s8s32_avx2")).backend == "native"
    forced = executor(kernel("u8s8s32_avx512vnni"), "native")
    assert forced.unavailable().startswith("CPU lacks avx512f")


def test_runner_on_bochs_turns_crashes_aborts_and_hangs_into_rows(tmp_path, monkeypatch, forget_kernels):
    """The native runner test's misbehaving kernels, judged on Bochs: a fault, abort() and a hang each become a
    FAIL naming it (abort is the runtime's INT3 there, not a dead process), and the run goes on."""
    import json
    from lowp.conformance.run import runner
    from lowp.conformance.run.checks import Check
    from lowp.kernels import load_toml
    from .conftest import MISBEHAVING_C, scalar_kernels_toml
    (tmp_path / "bad.c").write_text(MISBEHAVING_C)
    (tmp_path / "bad.toml").write_text(scalar_kernels_toml("bochs_", "bad.c", ("crasher", "hanger", "offbyone",
                                                                               "aborter")))
    load_toml(tmp_path / "bad.toml")
    monkeypatch.setenv("LOWP_X86_BACKEND", "bochs")
    checks = [Check("bochs_crasher", "model", "full", True), Check("bochs_hanger", "model", "full", True),
              Check("bochs_offbyone", "exact", "claimed", True), Check("bochs_aborter", "model", "full", True)]
    # timeout: the pool's backstop for a check whose child stops answering. The hanger is stopped by the per-call
    # budget ("ran longer than 5 s"); at 60 s a loaded 2-core machine timed a whole Bochs check out (a row of
    # backend '?': CI failed so twice).
    rows = runner.run(checks, tmp_path / "journal.jsonl", jobs=2, timeout=600, progress=False,
                      options={"examples": 20, "grid": False, "budget": 1.0})
    by = {r["kernel"]: r for r in rows}
    assert {r["backend"] for r in rows} == {"bochs"} and all("cpu model" in r["emulator"] for r in rows)
    assert by["bochs_crasher"]["verdict"] == "FAIL" and "write of unmapped memory at 0x0" in by["bochs_crasher"]["cause"]
    assert by["bochs_crasher"]["counterexample"]["shape"] == [1, 1, 6]
    assert by["bochs_aborter"]["verdict"] == "FAIL" and "abort()" in by["bochs_aborter"]["cause"]
    assert by["bochs_hanger"]["verdict"] == "FAIL" and "ran longer than 5 s" in by["bochs_hanger"]["cause"]
    off = by["bochs_offbyone"]
    assert off["verdict"] == "FAIL" and off["counterexample"]["shape"] == [1, 1, 1]
    assert sum(json.loads(line)["event"] == "row" for line in (tmp_path / "journal.jsonl").open()) == 4


def test_the_runtime_has_a_heap_that_frees_and_persists_across_calls(machine):
    assert machine.call("heap_churn", 16).ret == 16 * 3              # 64 MiB through a 32 MiB heap: free() works
    assert machine.call("heap_kept", 7).ret == 7
    assert machine.call("heap_kept", 9).ret == 7                      # static state persists from call to call


# -- the models proven against Bochs (lowp isa verify) ---------------------------------------------------------------

def test_isa_verify_proves_the_x86_models_on_bochs(capsys):
    """--backend bochs: every x86 model on Bochs whatever this CPU has: VNNI forms on Sapphire Rapids, VNNI-INT8 on
    Arrow Lake, VPDPWSSDS a named Bochs defect, never a disagreement."""
    from lowp.cli import main
    assert main(["isa", "verify", "vpdpbusd", "vpdpbssd", "vpdpwssds", "vpmaddubsw", "--backend", "bochs",
                 "--registers", "64"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("_mm")}
    assert "bochs (sapphire_rapids)  verified" in rows["_mm256_dpbusd_avx_epi32"]
    assert "bochs (arrow_lake)       verified" in rows["_mm256_dpbssd_epi32"]
    assert "a known Bochs defect: its VPDPWSSDS wraps the pair sum" in rows["_mm256_dpwssds_avx_epi32"]
    assert "native" not in "".join(rows.values()) and ", 0 disagreed;" in out


def test_a_wrong_model_is_refuted_by_bochs():
    from lowp.emulator.x86.bochs_intrinsics import BochsX86
    from lowp.isa_models import intrinsic
    from lowp.isa_models.verify import proof
    intr = intrinsic("_mm512_dpbusd_epi32")
    args = proof.stack(proof.corner_batch(intr), intr)
    actual = BochsX86().run(intr, args)
    assert np.array_equal(actual, intr(*args))
    wrong = intr(*args) + 1
    assert "disagree" in str(proof.first_disagreement(intr, args, wrong, actual))


@pytest.mark.slow
def test_vpmaddubsw_on_bochs_over_every_pair_input_of_five_a0_slices():
    """The exhaustive proof's machinery on Bochs: 2^24 (a1, b0, b1) for each a0 given, 2^24 pairs a call through
    the guest's shared memory (all 256 slices: `lowp isa verify --exhaustive --backend bochs`, about 4 minutes)."""
    from lowp.emulator.x86.bochs_intrinsics import BochsX86
    from lowp.isa_models.verify import proof
    backend = BochsX86()
    intr = proof.pick_exhaustive(backend)
    result = proof.exhaustive_vpmaddubsw(backend, intr, a0_values=[0, 1, 127, 128, 255])
    assert result.disagreement is None and result.cases == 5 << 24


VNNI_INT8 = r"""
#include <immintrin.h>
#include <stdint.h>
void dot(const int8_t *a, const int8_t *b, int32_t *c) {
    __m256i acc = _mm256_loadu_si256((const __m256i *)c);
    acc = _mm256_dpbssd_epi32(acc, _mm256_loadu_si256((const __m256i *)a), _mm256_loadu_si256((const __m256i *)b));
    _mm256_storeu_si256((__m256i *)c, acc);
}
"""


def test_an_avx_vnni_int8_kernel_builds_whatever_the_host_compiler_and_runs_on_arrow_lake(tmp_path):
    """-mavxvnniint8: GCC 13 and clang 16 know it, Debian 12's GCC 12 does not: the build falls back to zig's clang
    there (and says so: the build's compiler), and the kernel runs on the model that has the instructions."""
    from lowp.emulator.buildcache import describe
    from lowp.isa_models import intrinsic
    source = tmp_path / "vnniint8.c"
    source.write_text(VNNI_INT8)
    binary = bochs.build_for_bochs(source, flags=("-O2", "-mavx2", "-mavxvnniint8"))
    assert describe(binary.path)["compiler"]
    rng = np.random.default_rng(8)
    a, b = rng.integers(-128, 128, 32, dtype=np.int8), rng.integers(-128, 128, 32, dtype=np.int8)
    c = rng.integers(-2 ** 31, 2 ** 31, 8, dtype=np.int32)
    with bochs.BochsMachine(binary, model=bochs.model_for(("avx2", "avx_vnni_int8"))) as m:
        assert np.array_equal(m.call("dot", a, b, c)[2], intrinsic("_mm256_dpbssd_epi32")(c, a, b))


def test_a_fault_outside_a_buffer_the_instruction_addresses_inside_is_the_executors():
    """The CPU's fault address and the instruction's own operand must agree before lowp blames the kernel: an
    operand wholly inside the buffer with the fault outside it is ExecutorDisagrees (seen on Bochs: an EVEX
    VPINSRB with a disp8), and an operand that crosses the end is the kernel's over-read."""
    from lowp.emulator.errors import ExecutorDisagrees
    from lowp.emulator.x86.faults import Place, page_fault
    place = Place("y", lo=0x10000, base=0x10f78, nbytes=136, end=0x11000, dtype=np.dtype(np.uint8), shape=(136,))
    inside = page_fault("read", 0x11001, 0x10f78 + 73, 1, "vpinsrb", "at f+0x3bd", 0x1000, place)
    assert isinstance(inside, ExecutorDisagrees) and "bytes 73..73" in str(inside)
    crossing = page_fault("read", 0x11000, 0x10f78 + 130, 16, "vmovdqu", "at f+0x10", 0x1000, place)
    assert isinstance(crossing, OutOfBounds) and not isinstance(crossing, ExecutorDisagrees)
