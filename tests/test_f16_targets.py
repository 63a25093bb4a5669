"""XNNPACK's half-precision-output ISAs on the emulated targets: rvvfp16arith (RVV with Zvfh, on qemu-riscv64 with
zfh and zvfh turned on where the binary has them) and the AArch32 neonfp16arith / neondotfp16arith kernels (qemu-arm,
built for cortex_a55+fullfp16, judged with the flush-to-zero qd8 stage stored as f16). The ISA rows map, the -cpu
gives the features, and the campaign over a small tree of lowp's own qd8-f16 kernels (tests/xnnpack_f16_tree) runs
and passes each on its target; what needs qemu skips with the reason where it is missing."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lowp.emulator.qemu import ARM, RISCV64

TREE = Path(__file__).parent / "xnnpack_f16_tree"
RVV = "xnn_qd8_f16_qc8w_gemm_minmax_ukernel_1x2v__rvvfp16arith"
A32 = "xnn_qd8_f16_qc8w_gemm_minmax_ukernel_1x8__aarch32_neonfp16arith"


def test_the_riscv_half_options_give_zvfh_and_zfh():
    from lowp.emulator.qemu import RISCV64_HALF_OPTIONS, riscv64_features, riscv64_vector_length_cpu
    plain = riscv64_features(0, 0, riscv64_vector_length_cpu(128))
    half = riscv64_features(0, 0, riscv64_vector_length_cpu(128) + RISCV64_HALF_OPTIONS)
    assert "zvfh" not in plain and {"zvfh", "zvfhmin", "zfh", "zfhmin", "v", "zvl128b"} <= half
    assert "zvfh" not in riscv64_features(0, 0, "rv64,zvfh=true")         # Zvfh needs V


@pytest.mark.skipif(RISCV64.unavailable() is not None, reason=str(RISCV64.unavailable()))
def test_the_riscv_target_turns_zvfh_on_where_its_qemu_takes_it():
    """qemu-riscv64 10 takes zfh=true,zvfh=true (an unknown property would stop it: 7.2 has no zvfh); the target's
    -cpu has them exactly where the binary takes them, and its features say so."""
    from lowp.emulator.qemu import RISCV64_HALF_OPTIONS, riscv64_takes_options
    from lowp.emulator.targets.riscv64 import QEMU
    takes = riscv64_takes_options(RISCV64.path(), RISCV64_HALF_OPTIONS)
    assert not riscv64_takes_options(RISCV64.path(), ",lowp_no_such_extension=true")
    assert QEMU.cpu().endswith(RISCV64_HALF_OPTIONS) == takes
    assert ("zvfh" in QEMU.features()) == takes
    assert QEMU.cpu(cpu="rv64,v=true") == "rv64,v=true"                    # a -cpu asked for is taken as given


def test_the_half_precision_isa_rows_map_to_their_targets():
    from lowp.conformance.libraries.xnnpack import _base_stage, isa_of, parse_name
    rvv = parse_name(RVV)
    assert (isa_of(rvv).target, isa_of(rvv).copts[0]) == ("riscv64", "-march=rv64gcv_zvfh")
    assert "zvfh" in isa_of(rvv).features and _base_stage(rvv, "minmax_f16", isa_of(rvv)) == "qd8-f16-unfused"
    for name in (A32, "xnn_qd8_f16_qc8w_gemm_minmax_ukernel_4x8c4__asm_aarch32_neondotfp16arith_cortex_a55"):
        parsed = parse_name(name)
        assert isa_of(parsed).target == "arm" and {"fphp", "asimdhp"} <= set(isa_of(parsed).features)
        assert _base_stage(parsed, "minmax_f16", isa_of(parsed)) == "qd8-f16-unfused-ftz"


def test_the_arm_build_cpu_has_fullfp16_only_for_half_precision_kernels():
    from lowp.emulator.targets.arm import build_cpu
    assert build_cpu(["neon", "fphp", "asimdhp"]) == "cortex_a55+fullfp16"
    assert build_cpu(["neon", "asimddp", "fphp", "asimdhp"]) == "cortex_a55+fullfp16"
    assert build_cpu(["neon", "asimddp"]) == "cortex_a55"                  # VMAX.F16 does not assemble there


def test_the_aarch32_f16_stage_flushes_the_float32_steps_not_the_halves():
    """AArch32 NEON flushes float32 denormals (a denormal inv_scale is a zero: nothing reaches the half), but its
    VCVT.F16.F32 keeps half denormals (FPRoundCV rounds with FZ16 cleared): 2^-20 is stored as the half 2^-20."""
    from lowp.isa_models.requant import OUTPUT_STAGES
    from lowp.isa_models.float32 import fp16_bits
    q = {"a_zero_point": np.array([0], np.int32), "a_inv_scale": np.array([2.0 ** -127], np.float32),
         "b_scale": np.array([2.0 ** 110], np.float32), "bias": np.zeros(1, np.float32),
         "output_min": -np.inf, "output_max": np.inf}
    acc = np.array([[1]], np.int32)
    assert OUTPUT_STAGES["qd8-f16-unfused"](acc, q, "f16")[0, 0] == 2.0 ** -17
    assert OUTPUT_STAGES["qd8-f16-unfused-ftz"](acc, q, "f16")[0, 0] == 0
    q = {**q, "a_inv_scale": np.array([2.0 ** -20], np.float32), "b_scale": np.array([1.0], np.float32)}
    half = OUTPUT_STAGES["qd8-f16-unfused-ftz"](acc, q, "f16")
    assert half[0, 0] == 2.0 ** -20 and fp16_bits(np.float32(2.0 ** -20), "rne") < 0x400      # a half denormal


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    out = tmp_path_factory.mktemp("f16-campaign")
    result = subprocess.run([sys.executable, "-m", "lowp", "xnnpack", str(TREE), "--out", str(out), "--no-database",
                             "--jobs", "2", "--examples", "10", "--fresh"], capture_output=True, text=True, timeout=1200)
    doc = json.loads((out / "campaign.json").read_text()) if (out / "campaign.json").is_file() else {}
    return result, {k["name"]: k for k in doc.get("kernels", ())}


def _runs(name: str, kernels: dict, why_not: str | None):
    if why_not is not None:
        assert kernels[name]["status"] == "skipped", kernels[name]
        pytest.skip(why_not)


def test_the_campaign_runs_a_rvv_zvfh_kernel_on_qemu_riscv64(campaign):
    from lowp.emulator.qemu import RISCV64_HALF_OPTIONS, riscv64_takes_options
    result, kernels = campaign
    assert result.returncode == 0, result.stderr[-2000:]
    missing = RISCV64.unavailable() or (None if riscv64_takes_options(RISCV64.path(), RISCV64_HALF_OPTIONS) else
                                        f"{RISCV64.path()} has no zvfh (qemu 7.2)")
    _runs(RVV, kernels, missing)
    assert kernels[RVV]["status"] == "passed", kernels[RVV]


def test_the_campaign_runs_an_aarch32_fp16_kernel_on_qemu_arm(campaign):
    result, kernels = campaign
    _runs(A32, kernels, ARM.unavailable())
    assert kernels[A32]["status"] == "passed", kernels[A32]
