"""Hexagon HVX under qemu-hexagon (lowp.emulator.qemu, guest HEXAGON; target hexagon-qemu): the HVX models against
the real instructions, the machine's calls and guarantees (an out-of-bounds read and a runaway loop are named
faults, 32-bit pointer tables), the HVX output stage against the reference, and lowp's own HVX GEMM
(tests/hexagon/qs8_gemm_1x32c4_hvx.c) through the conformance suite with its one-bug versions, each caught.
Everything that runs the guest skips where qemu-hexagon is absent."""
from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from lowp.emulator.errors import BudgetExceeded, OutOfBounds
from lowp.emulator.qemu import HEXAGON, QemuMachine, build_for_qemu
from lowp.isa_models import intrinsics
from tests.conftest import load_kernels

HERE = Path(__file__).resolve().parent / "hexagon"
TOML = HERE / "hvx.toml"
needs_qemu = pytest.mark.skipif(HEXAGON.unavailable() is not None,
                                reason=f"{HEXAGON.unavailable()} (apt-get install qemu-user)")

GUEST_C = textwrap.dedent("""
    #include <stdint.h>
    int lowp_tenth(int a, int b, int c, int d, int e, int f, int g, int h, int i, int j) {
        return a + 10 * g + 100 * h + 1000 * i + 10000 * j;      /* g.. come from the stack */
    }
    int lowp_negative(void) { return -5; }
    int lowp_table(const int8_t **t, int n) { int s = 0; for (int i = 0; i < n; i++) s += t[i][0]; return s; }
    int lowp_r9(void) { int r; __asm__ volatile("%0 = r9" : "=r"(r)); return r; }
    int lowp_read_past(const int8_t *a, int n) { int s = 0; for (int i = 0; i <= n; i++) s += a[i]; return s; }
    void lowp_spin(volatile int *p) { while (*p == 0) {} }
""")


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    if HEXAGON.unavailable():
        pytest.skip(f"{HEXAGON.unavailable()} (apt-get install qemu-user)")
    source = tmp_path_factory.mktemp("hexagon") / "guest.c"
    source.write_text(GUEST_C)
    with QemuMachine(build_for_qemu(source, guest=HEXAGON), guest=HEXAGON) as m:
        yield m


# -- the HVX models against qemu-hexagon ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hvx_backend():
    from lowp.emulator.hexagon import HvxQemuBackend
    backend = HvxQemuBackend()
    if backend.unavailable():
        pytest.skip(f"{backend.unavailable()} (apt-get install qemu-user)")
    yield backend
    backend.close()


@pytest.mark.parametrize("name", [i.name for i in intrinsics("hexagon")])
def test_each_hvx_model_is_the_instruction_on_qemu(hvx_backend, name):
    """128 register sets per intrinsic (the lanes' extremes first, the scalar's shift and length edges) give the
    model's result bit for bit."""
    from lowp.isa_models import intrinsic
    from lowp.isa_models.verify.hvx_proof import verify
    verdict = verify(intrinsic(name), hvx_backend, random_registers=128)
    assert verdict.mismatch is None, verdict.mismatch


def test_a_wrong_model_is_caught(hvx_backend):
    """The proof can fail: vlalign with its sources swapped (Rt = 0 gives Vv, not Vu) disagrees with qemu."""
    from dataclasses import replace

    from lowp.isa_models import intrinsic
    from lowp.isa_models.hexagon import hvx
    from lowp.isa_models.verify.hvx_proof import verify
    real = intrinsic("Q6_V_vlalign_VVR")
    swapped = replace(real, adapter=lambda vu, vv, rt: hvx.vlalignb(vv, vu, rt))
    assert verify(swapped, hvx_backend, random_registers=16).mismatch is not None


def test_the_models_registry_names_hvx_intrinsics():
    from lowp.isa_models import instruction, intrinsic
    assert instruction("vrmpybv_acc", "hexagon").extension == "HVX v60"
    vx, vu, vv = np.full(32, 2 ** 31 - 1, np.int32), np.full(128, -128, np.int8), np.full(128, -128, np.int8)
    assert intrinsic("Q6_Vw_vrmpyacc_VwVbVb")(vx, vu, vv)[0] == -(2 ** 31) + 4 * 2 ** 14 - 1   # wraps
    assert intrinsic("Q6_Q_vsetq2_R")(128).all() and not intrinsic("Q6_Q_vsetq_R")(128).any()


# -- the machine -------------------------------------------------------------------------------------------------

@needs_qemu
def test_calls_take_register_and_stack_arguments_and_signed_returns(machine):
    assert machine.call("lowp_tenth", *range(1, 11)).ret == 1 + 70 + 800 + 9000 + 100000
    assert machine.call("lowp_negative").ret == -5
    assert {"hvx", "hvxv68", "hvx_length128b", "v68"} <= machine.features and "v69" not in machine.features


@needs_qemu
def test_a_seed_chooses_the_scalar_registers(machine):
    a, b = machine.call("lowp_r9", seed=1).ret, machine.call("lowp_r9", seed=2).ret
    assert a != b and machine.call("lowp_r9", seed=1).ret == a


@needs_qemu
def test_pointer_tables_are_32_bit_addresses(machine):
    from lowp.emulator.machine import Pointers
    A = np.arange(10, 20, dtype=np.int8)
    r = machine.call("lowp_table", Pointers((("A", 1), ("A", 5), ("A", 0))), 3, names=["t", "n"],
                     memory=[("A", A)])
    assert r.ret == 11 + 15 + 10 and r.arrays[0].dtype == np.uint32


@needs_qemu
def test_an_out_of_bounds_read_names_the_buffer_and_the_byte(machine):
    with pytest.raises(OutOfBounds) as e:
        machine.call("lowp_read_past", np.ones(64, np.int8), 64, names=["A", "n"])
    assert e.value.buffer == "A" and e.value.offset == 64
    assert e.value.pc and e.value.instruction.startswith(".word ")    # the pc calibrated at start-up
    assert machine.call("lowp_read_past", np.ones(64, np.int8), 63, names=["A", "n"]).ret == 64


@needs_qemu
def test_a_runaway_loop_is_budget_exceeded_and_the_next_call_works(machine):
    with pytest.raises(BudgetExceeded, match="runaway"):
        machine.call("lowp_spin", np.zeros(1, np.int32), seconds=0.5)
    assert machine.call("lowp_negative").ret == -5


def test_hvx_float_features_are_a_known_defect():
    from lowp.emulator.targets import get
    target = get("hexagon-qemu")
    assert "qfloat" in target.known_defect(["hvx", "hvxv73"])
    assert target.known_defect(["hvx", "hvxv68", "hvx_length128b"]) is None


# -- the output stage ----------------------------------------------------------------------------------------------

def test_the_hvx_stage_equals_the_reference_on_xnnpacks_domain():
    """Within XNNPACK's documented parameters the HVX sequence (no float clamp, lrintf, packs with saturation)
    gives the reference's results; beyond int32 it saturates where the reference clamps first."""
    from lowp.isa_models.requant import OUTPUT_STAGES
    rng = np.random.default_rng(0)
    acc = rng.integers(-2 ** 31, 2 ** 31, (64, 32)).astype(np.int32)
    for scale in (1e-6, 1e-3, 0.5, 255.0):
        for zp, lo, hi in ((0, -128, 127), (-1, -128, 127), (5, -100, 90), (127, 127, 127)):
            q = {"bias": rng.integers(-10000, 10000, 32).astype(np.int32), "scale": np.full(32, scale, np.float32),
                 "output_zero_point": zp, "output_min": lo, "output_max": hi}
            hvx = OUTPUT_STAGES["xnnpack-fp32-hvx"](acc, q, "s8")
            assert np.array_equal(hvx, OUTPUT_STAGES["xnnpack-fp32-lrintf"](acc, q, "s8")), (scale, zp)


# -- lowp's own HVX GEMM and its one-bug versions ------------------------------------------------------------------

@pytest.fixture(scope="module")
def hvx_kernels():
    return load_kernels(TOML)


def _row(kernel, check, examples=25):
    from lowp.conformance.run.checks import Check, run_check
    from lowp.kernels import executor
    reason = executor(kernel).unavailable()
    if reason:
        pytest.skip(f"{kernel.name}: {reason} (apt-get install qemu-user)")
    return run_check(Check(kernel.name, check, "full" if check == "model" else "claimed", True), lambda e: None,
                     examples=examples)


@needs_qemu
def test_the_hvx_gemm_passes_its_model_and_claimed_contract(hvx_kernels):
    k = hvx_kernels["hvx_qs8_1x32c4"]
    for check in ("model", k.output):
        row = _row(k, check)
        assert row["verdict"] == "PASS", row
        assert row["backend"] == "qemu" and row["target"] == "hexagon"


@needs_qemu
@pytest.mark.parametrize("bug, cause", [("a_stride16", "wrong value"), ("zp_wrap", "wrong value"),
                                        ("pack_order", "wrong value"), ("store_all", "out-of-bounds access")])
def test_each_one_bug_version_is_caught(hvx_kernels, bug, cause):
    """Each bug is a FAIL naming its cause (a store past C's row: an out-of-bounds access of C; whether it read or
    wrote is not said, as no decoder here knows Hexagon's packets)."""
    row = _row(hvx_kernels[f"hvx_qs8_1x32c4_bug_{bug}"], "model")
    assert row["verdict"] == "FAIL", row
    assert cause in row["cause"], row["cause"]


def test_every_registered_arch_is_one_lowp_isa_verify_knows():
    """`lowp isa verify` (all ISAs) died with KeyError 'hexagon' when it reached the HVX intrinsics: every arch an
    intrinsic is registered under must be one the command takes."""
    from lowp.commands.isa import ARCHES
    from lowp.isa_models import intrinsics
    assert {i.instruction.arch for i in intrinsics()} <= set(ARCHES)


def test_lowp_isa_verify_runs_the_hvx_intrinsics_on_qemu(hvx_backend, capsys):
    """The HVX models through `lowp isa verify --arch hexagon`: every one executed on qemu-hexagon and equal."""
    from lowp.cli import main
    assert main(["isa", "verify", "--arch", "hexagon", "--registers", "64"]) == 0
    out = capsys.readouterr().out
    count = len(intrinsics("hexagon"))
    assert f"{count} of {count} intrinsics executed and compared" in out and "0 disagreed" in out
