"""lowp.emulator: GEMMs written with ACLE intrinsics against the exact integer product, guard pages, budget,
undefined instructions, traps, the I8MM gap-filling, lockstep, counts, the calling convention and the build cache."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from lowp.emulator import (BudgetExceeded, LockstepMismatch, Machine, OutOfBounds, Trap, UndefinedInstruction,
                           build)
from lowp.emulator.aarch64.intrinsics import qemu_path

pytestmark = pytest.mark.emulated
KERNELS = Path(__file__).parent / "aarch64"


@pytest.fixture(scope="module")
def sdot():
    return Machine(build(KERNELS / "gemm_sdot.c"))


@pytest.fixture(scope="module")
def smmla():
    return Machine(build(KERNELS / "gemm_smmla.c"))


@pytest.fixture(scope="module")
def faults():
    return Machine(build(KERNELS / "faults.c"))


def operands(m, n, k, seed, a_type=np.int8):
    rng = np.random.default_rng(seed)
    info = np.iinfo(a_type)
    a = rng.integers(info.min, info.max, (m, k), dtype=a_type, endpoint=True)
    b = rng.integers(-128, 127, (k, n), dtype=np.int8, endpoint=True)
    a[0, :] = info.min if a_type == np.int8 else info.max    # extremes: saturating kernels would show here
    b[:, 0] = -128
    return a, b, a.astype(np.int64) @ b.astype(np.int64)


@pytest.mark.parametrize("m,n,k", [(8, 8, 64), (5, 12, 100), (16, 16, 256)])
def test_sdot_gemm_matches_exact_product(sdot, m, n, k):
    a, b, exact = operands(m, n, k, seed=m * n + k)
    c = np.zeros((m, n), np.int32)
    r = sdot.call("gemm_sdot", a, np.ascontiguousarray(b.T), c, m, n, k, count=True, mnemonics=True)
    assert (r.arrays[2] == exact).all()
    assert not c.any()                                       # the caller's array is not modified
    assert r.modeled == {}                                   # SDOT runs on Unicorn itself
    assert r.mnemonics["sdot"] == m * (n // 4) * (k // 16) * 4
    assert sum(r.mnemonics.values()) == r.instructions


def test_sdot_by_element_gemm(sdot):
    m, n, k = 6, 8, 64
    a, b, exact = operands(m, n, k, seed=7)
    packed = np.ascontiguousarray(b.reshape(k // 4, 4, n).transpose(0, 2, 1))   # (k/4, n, 4)
    r = sdot.call("gemm_sdot_lane", a, packed, np.zeros((m, n), np.int32), m, n, k)
    assert (r[2] == exact).all()


@pytest.mark.parametrize("m,n,k", [(2, 2, 8), (8, 6, 64), (16, 16, 128)])
def test_smmla_gemm_matches_exact_product_via_gap_filling(smmla, m, n, k):
    a, b, exact = operands(m, n, k, seed=k + n)
    r = smmla.call("gemm_smmla", a, np.ascontiguousarray(b.T), np.zeros((m, n), np.int32), m, n, k, count=True)
    assert (r[2] == exact).all()
    assert r.modeled == {"smmla": (m // 2) * (n // 2) * (k // 8)}
    assert "smmla" in r.summary()


def test_usmmla_gemm_unsigned_activations(smmla):
    m, n, k = 4, 4, 32
    a, b, exact = operands(m, n, k, seed=11, a_type=np.uint8)
    r = smmla.call("gemm_usmmla", a, np.ascontiguousarray(b.T), np.zeros((m, n), np.int32), m, n, k)
    assert (r[2] == exact).all()
    assert r.modeled == {"usmmla": (m // 2) * (n // 2) * (k // 8)}


def test_out_of_bounds_read_by_one_element(faults):
    x = np.arange(10, dtype=np.int32)
    assert faults.call("sum_off_by_one", x, 9).ret == 45
    with pytest.raises(OutOfBounds) as e:
        faults.call("sum_off_by_one", x, 10, names=["x", "n"])
    err = e.value
    assert (err.buffer, err.access, err.offset, err.past_end) == ("x", "read", 40, 0)
    assert "'x'" in str(err) and "element 10" in str(err) and "ldr" in err.instruction
    assert err.pc is not None and f"{err.pc:#x}" in str(err)


def test_out_of_bounds_write_reports_first_byte_past_end(faults):
    for n in (7, 64):
        with pytest.raises(OutOfBounds) as e:
            faults.call("fill_off_by_one", np.zeros(n, np.int16), n, names=["y", "n"])
        assert (e.value.buffer, e.value.access, e.value.offset) == ("y", "write", 2 * n)
        assert e.value.result.arrays[0][:4].tolist() == [0, 1, 2, 3]     # what it wrote before the fault


def test_write_before_start_is_caught_by_the_canary(faults):
    with pytest.raises(OutOfBounds) as e:
        faults.call("write_before_start", np.zeros(4, np.int32))
    assert e.value.offset == -4 and e.value.access == "write"


@pytest.mark.parametrize("count", [False, True])
def test_infinite_loop_stops_at_the_budget(faults, count):
    with pytest.raises(BudgetExceeded) as e:
        faults.call("spin", np.zeros(1, np.int64), budget=200_000, count=count)
    assert e.value.budget == 200_000 and e.value.pc is not None
    assert e.value.result.arrays[0][0] > 10_000            # it did run


def test_budget_is_exact_without_python_hooks(sdot):
    m, n, k = 4, 4, 32
    a, b, _ = operands(m, n, k, seed=1)
    bt = np.ascontiguousarray(b.T)
    counted = sdot.call("gemm_sdot", a, bt, np.zeros((m, n), np.int32), m, n, k, count=True).instructions
    sdot.call("gemm_sdot", a, bt, np.zeros((m, n), np.int32), m, n, k, budget=counted)
    with pytest.raises(BudgetExceeded):
        sdot.call("gemm_sdot", a, bt, np.zeros((m, n), np.int32), m, n, k, budget=counted - 1)


def test_undefined_instruction_and_trap(faults):
    with pytest.raises(UndefinedInstruction) as e:
        faults.call("undefined")
    assert e.value.encoding == 0 and e.value.pc == faults.binary.symbol("undefined") and "udf" in str(e.value)
    with pytest.raises(Trap) as t:
        faults.call("trap")
    assert t.value.kind == "brk"
    # the machine is still usable afterwards
    assert faults.call("sum_off_by_one", np.ones(3, np.int32), 2).ret == 3


def test_stack_overflow(faults):
    with pytest.raises(OutOfBounds, match="stack overflow"):
        faults.call("recurse", np.zeros(1, np.int64), 0)


def test_lockstep_agrees_on_sdot(sdot):
    m, n, k = 4, 8, 32
    a, b, exact = operands(m, n, k, seed=5)
    r = sdot.call("gemm_sdot", a, np.ascontiguousarray(b.T), np.zeros((m, n), np.int32), m, n, k, lockstep=True)
    tiles = m * (n // 4)                                    # per 4 columns: 4 SDOT per 16 k, then 3 ADDP (vpaddq)
    assert (r[2] == exact).all() and r.lockstep_checked == tiles * ((k // 16) * 4 + 3)


def test_lockstep_catches_a_wrong_model(monkeypatch):
    from lowp.isa_models import arm

    def broken_sdot(acc, a, b, *, index=None):
        r = arm_sdot(acc, a, b, index=index)
        return r + np.int32(1)
    arm_sdot = arm.sdot
    monkeypatch.setattr(arm, "sdot", broken_sdot)
    machine = Machine(build(KERNELS / "gemm_sdot.c"))
    a, b, _ = operands(4, 4, 16, seed=2)
    with pytest.raises(LockstepMismatch) as e:
        machine.call("gemm_sdot", a, np.ascontiguousarray(b.T), np.zeros((4, 4), np.int32), 4, 4, 16, lockstep=True)
    err = e.value
    assert err.instruction.startswith("sdot") and (err.model == err.unicorn + 1).all()
    assert "sdot" in str(err) and "Unicorn wrote" in str(err)


def test_many_arguments_go_on_the_stack():
    src = KERNELS / "abi.c"
    machine = Machine(build(src))
    args = [1, -2, 3, -4, 5, -6, 7, -8, 9, -10]
    assert machine.call("sum10", *args).ret == sum(args)
    out = np.zeros(3, np.int64)
    r = machine.call("store9", 0, 0, 0, 0, 0, 0, 0, 0, out)
    assert r[0].tolist() == [9, 8, 7]
    with pytest.raises(ValueError, match="argument 'arg0'"):
        machine.call("sum10", 1.5, *args[1:])


def test_build_cache_is_content_addressed(tmp_path):
    src = tmp_path / "k.c"
    src.write_text("long f(long x) { return x + 1; }\n")
    b1 = build(src, cache=tmp_path / "cache")
    mtime = b1.path.stat().st_mtime_ns
    assert build(src, cache=tmp_path / "cache").path == b1.path and b1.path.stat().st_mtime_ns == mtime
    b2 = build(src, flags=["-O1"], cache=tmp_path / "cache")
    assert b2.path != b1.path
    src.write_text("long f(long x) { return x + 2; }\n")
    b3 = build(src, cache=tmp_path / "cache")
    assert b3.path != b1.path and Machine(b3).call("f", 40).ret == 42
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.endswith(".tmp")]


@pytest.mark.skipif(qemu_path() is None, reason="qemu-aarch64 not installed (Debian: apt-get install qemu-user)")
def test_second_opinion_qemu_runs_the_same_gemm(tmp_path):
    """The SMMLA GEMM as a static Linux program under qemu-aarch64 -cpu max (which implements I8MM) against
    Unicorn + lowp's gap-filling."""
    m, n, k = 6, 8, 64
    a, b, exact = operands(m, n, k, seed=21)
    main = tmp_path / "main.c"
    main.write_text(
        "#include <stdint.h>\n"
        "long lowp_read(int, void *, long); long lowp_write(int, const void *, long);\n"
        "void gemm_smmla(const int8_t *, const int8_t *, int32_t *, long, long, long);\n"
        f"static int8_t a[{m * k}], bt[{n * k}]; static int32_t c[{m * n}];\n"
        "static void get(void *p, long n) { char *q = p; while (n > 0) { long g = lowp_read(0, q, n); if (g <= 0) return; q += g; n -= g; } }\n"
        f"int main(void) {{ get(a, sizeof a); get(bt, sizeof bt); gemm_smmla(a, bt, c, {m}, {n}, {k});\n"
        "  lowp_write(1, c, sizeof c); return 0; }\n")
    prog = build(main, KERNELS / "gemm_smmla.c", target="linux")
    proc = subprocess.run([qemu_path(), "-cpu", "max", str(prog.path)], capture_output=True,
                          input=a.tobytes() + np.ascontiguousarray(b.T).tobytes(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    qemu = np.frombuffer(proc.stdout, np.int32).reshape(m, n)
    unicorn = Machine(build(KERNELS / "gemm_smmla.c")).call(
        "gemm_smmla", a, np.ascontiguousarray(b.T), np.zeros((m, n), np.int32), m, n, k)[2]
    assert (qemu == exact).all() and (unicorn == qemu).all()


def test_a_new_layout_maps_only_the_regions_that_changed(sdot):
    """Between calls of different shapes the buffers' regions that repeat stay mapped (Machine._map): only the
    changed ones are mapped again, and every result is still the exact product (a kept region's bytes are all
    written again, canaries included)."""
    mapped = []
    uc = sdot.uc
    real_map = uc.mem_map
    uc.mem_map = lambda *a, **k: (mapped.append(a[:2]), real_map(*a, **k))[1]
    try:
        for m, n, k in [(8, 8, 64), (8, 8, 1024), (8, 8, 64), (4, 8, 64), (8, 8, 64)]:
            before, mapped[:] = list(sdot._mapped), []
            a, b, exact = operands(m, n, k, seed=m + n + k)
            r = sdot.call("gemm_sdot", a, np.ascontiguousarray(b.T), np.zeros((m, n), np.int32), m, n, k)
            assert (r[2] == exact).all(), (m, n, k)
            assert set(mapped) == set(sdot._mapped) - set(before)      # the new regions, and only those
    finally:
        uc.mem_map = real_map
