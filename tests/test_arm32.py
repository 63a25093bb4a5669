"""32-bit Arm (AArch32) under qemu-arm (lowp.emulator.qemu, guest ARM; lowp.emulator.targets.arm): the machine's
calls (AAPCS: stack arguments, 4-byte pointer tables, seeded registers), its guarantees (an out-of-bounds read, a
runaway loop and an instruction the -cpu lacks each become their named error), the SIMD32 models against qemu-arm
(lowp.isa_models.arm32), the XNNPACK armsimd32 / AArch32 NEON output stages, and lowp's own SIMD32 and NEON GEMMs
(tests/arm32) through the conformance suite, with a one-bug version of each that must fail. Everything that runs
the guest skips where qemu-arm is absent."""
from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from lowp.emulator.errors import BudgetExceeded, OutOfBounds, UndefinedInstruction
from lowp.emulator.qemu import ARM, QemuMachine, build_for_qemu, seeded_registers_arm
from tests.conftest import load_kernels

ROOT = Path(__file__).resolve().parent
TOML = ROOT / "arm32" / "arm32.toml"
needs_qemu = pytest.mark.skipif(ARM.unavailable() is not None, reason=f"{ARM.unavailable()}")

GUEST_C = textwrap.dedent("""
    #include <arm_acle.h>
    #include <stdint.h>
    long lowp_ninth(long a, long b, long c, long d, long e, long f, long g, long h, long i) {
        return a + 10 * e + 100 * h + 1000 * i;          /* e..i on the stack */
    }
    long lowp_r12(void) { long r; __asm__ volatile("mov %0, r12" : "=r"(r)); return r; }
    long lowp_table(const int32_t **t, long n) { long s = 0; for (long i = 0; i < n; i++) s += *t[i]; return s; }
    void lowp_copy(int32_t *dst, const int32_t *src, long n) { for (long i = 0; i <= n; i++) dst[i] = src[i]; }
    void lowp_spin(volatile int32_t *p) { for (;;) *p += 1; }
    /* SEL after SSUB8 / USUB8: the GE flags the subtraction leaves pick each byte */
    uint32_t lowp_ssub8_sel(uint32_t a, uint32_t b, uint32_t x, uint32_t y) {
        __ssub8((int8x4_t)a, (int8x4_t)b);
        return __sel((uint8x4_t)x, (uint8x4_t)y);
    }
    uint32_t lowp_usub8_sel(uint32_t a, uint32_t b, uint32_t x, uint32_t y) {
        __usub8((uint8x4_t)a, (uint8x4_t)b);
        return __sel((uint8x4_t)x, (uint8x4_t)y);
    }
""")
# VCVTN.S32.F32 is ARMv8 (AArch32): qemu-arm -cpu cortex-a15 (ARMv7) has no such instruction
CVTN_S = textwrap.dedent("""
        .syntax unified
        .arch armv8-a
        .fpu crypto-neon-fp-armv8
        .arm
        .global lowp_cvtn
        .type lowp_cvtn, %function
    lowp_cvtn:
        vld1.32 {d0, d1}, [r1]
        vcvtn.s32.f32 q1, q0
        vst1.32 {d2, d3}, [r0]
        bx lr
        .size lowp_cvtn, . - lowp_cvtn
""")


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    if ARM.unavailable():
        pytest.skip(ARM.unavailable())
    source = tmp_path_factory.mktemp("arm") / "guest.c"
    source.write_text(GUEST_C)
    with QemuMachine(build_for_qemu(source, guest=ARM, cpu="arm1176jzf_s+dsp"), guest=ARM) as m:
        yield m


# -- the machine ---------------------------------------------------------------------------------------------------

@needs_qemu
def test_aapcs_calls_pass_stack_arguments_and_seeds(machine):
    assert machine.call("lowp_ninth", 1, 2, 3, 4, 5, 6, 7, 8, 9).ret == 1 + 50 + 800 + 9000
    assert machine.call("lowp_ninth", -1, 0, 0, 0, 0, 0, 0, 0, 0).ret == -1        # r0 sign-extended
    for seed in (3, 41):
        xs, _ = seeded_registers_arm(seed, 0)
        assert machine.call("lowp_r12", seed=seed).ret & 0xFFFFFFFF == xs[16]     # r12 is x[16]
    assert "armv6" in machine.features and "vfp" in machine.features


@needs_qemu
def test_a_pointer_table_holds_4_byte_pointers(machine):
    from lowp.emulator.machine import Pointers
    x, y = np.array([5, 7, 11], np.int32), np.array([100], np.int32)
    table = Pointers((("x", 0), ("x", 8), ("y", 0), ("x", 4), ("y", 0)))
    r = machine.call("lowp_table", table, 5, names=["t", "n"], memory=[("x", x), ("y", y)])
    assert r.ret == 5 + 11 + 100 + 7 + 100


@needs_qemu
def test_an_out_of_bounds_read_names_the_buffer_and_instruction(machine):
    with pytest.raises(OutOfBounds) as e:
        machine.call("lowp_copy", np.zeros(4, np.int32), np.arange(4, dtype=np.int32), 4, names=["dst", "src", "n"])
    assert e.value.buffer == "src" and e.value.offset == 16 and e.value.access == "read"
    assert "ldr" in e.value.instruction


@needs_qemu
def test_a_runaway_loop_exhausts_its_budget_and_the_process_goes_on(machine):
    with pytest.raises(BudgetExceeded):
        machine.call("lowp_spin", np.zeros(1, np.int32), seconds=0.3)
    assert machine.call("lowp_ninth", 1, 0, 0, 0, 0, 0, 0, 0, 0).ret == 1


@needs_qemu
def test_an_instruction_the_cpu_lacks_is_an_undefined_instruction(tmp_path):
    source = tmp_path / "cvtn.S"
    source.write_text(CVTN_S)
    binary = build_for_qemu(source, guest=ARM, cpu="cortex_a53")
    f = np.array([1.5, 2.5, -1.5, 3.7], np.float32)
    assert list(QemuMachine(binary, guest=ARM).call("lowp_cvtn", np.zeros(4, np.int32), f).arrays[0]) == [2, 2, -2, 4]
    with QemuMachine(binary, guest=ARM, cpu="cortex-a15") as old:
        with pytest.raises(UndefinedInstruction) as e:
            old.call("lowp_cvtn", np.zeros(4, np.int32), f)
        assert "vcvtn" in e.value.instruction and "armv8" not in old.features


# -- the models against qemu-arm ---------------------------------------------------------------------------------

@needs_qemu
def test_every_simd32_intrinsic_agrees_with_qemu_arm():
    from lowp.emulator.arm32.intrinsics import ArmQemuBackend
    from lowp.isa_models import intrinsics
    from lowp.isa_models.verify.proof import verify
    backend = ArmQemuBackend()
    found = intrinsics("arm")
    assert len(found) == 13
    for intr in found:
        v = verify(intr, backend, random_registers=256, seed=1)
        assert v.status == "verified", (intr.name, v.reason, v.disagreement)


@needs_qemu
def test_sel_after_ssub8_and_usub8_agrees_with_qemu_arm(machine):
    from lowp.isa_models.arm32.simd32 import sel, ssub8_ge, usub8_ge
    rng = np.random.default_rng(7)
    words = rng.integers(0, 2 ** 32, (200, 4), dtype=np.uint64)
    words[:8, :2] = [[0x80808080, 0x7F7F7F7F], [0x7F7F7F7F, 0x80808080], [0, 0], [0x01FF807F, 0xFF017F80]] * 2
    calls = [tuple(int(w) for w in row) for row in words]
    lanes = words.astype(np.uint32).view(np.uint8).reshape(200, 4, 4)
    for symbol, ge, dtype in (("lowp_ssub8_sel", ssub8_ge, np.int8), ("lowp_usub8_sel", usub8_ge, np.uint8)):
        got = [r.ret & 0xFFFFFFFF for r in machine.call_many(symbol, calls)]
        flags = ge(lanes[:, 0].view(dtype), lanes[:, 1].view(dtype))[1]
        want = sel(lanes[:, 2], lanes[:, 3], flags).view(np.uint32)[:, 0]
        assert got == want.tolist(), symbol


# -- the output stages ---------------------------------------------------------------------------------------------

def test_the_armsimd32_and_neon_stages_equal_the_reference_on_the_domain():
    from lowp.isa_models.requant import OUTPUT_STAGES
    rng = np.random.default_rng(3)
    acc = rng.integers(-2 ** 31, 2 ** 31, (6, 5)).astype(np.int32)
    for _ in range(100):
        for out, zp, lo, hi in (("s8", int(rng.integers(-128, 128)), -100, 90), ("u8", int(rng.integers(0, 256)), 3, 250)):
            q = {"bias": rng.integers(-1000, 1000, 5).astype(np.int32), "output_zero_point": zp,
                 "scale": np.full(5, rng.uniform(1e-6, 1e-2), np.float32), "output_min": lo, "output_max": hi}
            want = OUTPUT_STAGES["xnnpack-fp32-lrintf"](acc, q, out)
            for stage in ("xnnpack-fp32-armsimd32", "xnnpack-fp32-neon"):
                assert np.array_equal(OUTPUT_STAGES[stage](acc, q, out), want), stage


def test_the_armsimd32_clamp_is_the_packed_byte_select():
    """SSUB8 + SEL on four packed bytes: a value below output_min takes output_min, above output_max output_max."""
    from lowp.isa_models.requant import OUTPUT_STAGES
    q = {"bias": np.zeros(3, np.int32), "scale": np.ones(3, np.float32), "output_zero_point": 0,
         "output_min": -5, "output_max": 6}
    acc = np.array([[-100, 3, 100]], np.int32)
    assert OUTPUT_STAGES["xnnpack-fp32-armsimd32"](acc, q, "s8").tolist() == [[-5, 3, 6]]


def test_the_aarch32_qd8_stage_flushes_denormals():
    """AArch32 NEON's float operations flush denormals (the kernel gave 0.0 where the reference gives -4.2e-45:
    qd8-f32-qc8w 1x8 neonmlal on qemu-arm)."""
    from lowp.isa_models.requant import OUTPUT_STAGES
    q = {"a_zero_point": np.array([-128], np.int32), "a_inv_scale": np.array([1.1754943508222875e-38], np.float32),
         "b_scale": np.array([2.3283064365386963e-10], np.float32), "bias": np.zeros(1, np.float32),
         "output_min": -np.inf, "output_max": np.inf}
    acc = np.array([[-1408]], np.int32)           # 11 * 128 with B = -11: the kernel's counterexample
    assert OUTPUT_STAGES["qd8-f32-unfused"](acc, q, "f32")[0, 0] != 0
    assert OUTPUT_STAGES["qd8-f32-unfused-ftz"](acc, q, "f32")[0, 0] == 0


def test_the_aarch32_dot_product_assembly_multiplies_the_scales_first_and_flushes():
    """XNNPACK's qd8-f32-qc8w 4x8c4 cortex_a55 AArch32 assembly VMULs b_scale by inv_scale first, as the AArch64 xngen
    assembly does, under flush-to-zero (the campaign on qemu-arm: 479.66275 where the inv_scale-first order gives
    479.66278); lowp maps it there, and its MLAL sibling to the inv_scale-first order."""
    from lowp.conformance.libraries.xnnpack import _base_stage, isa_of, parse_name
    from lowp.isa_models.requant import OUTPUT_STAGES
    q = {"a_zero_point": np.array([-9], np.int32), "a_inv_scale": np.array([0.22938543558120728], np.float32),
         "b_scale": np.array([0.7975124716758728], np.float32), "bias": np.zeros(1, np.float32),
         "output_min": -np.inf, "output_max": np.inf}
    acc = np.array([[(37 + 9) * 57]], np.int32)          # A = [[37]], B = [[57]]: the kernel's counterexample
    assert OUTPUT_STAGES["qd8-f32-scale-product-unfused-ftz"](acc, q, "f32")[0, 0] == np.float32(479.6627502441406)
    assert OUTPUT_STAGES["qd8-f32-unfused-ftz"](acc, q, "f32")[0, 0] == np.float32(479.66278076171875)
    tiny = {**q, "a_inv_scale": np.array([2.0 ** -100], np.float32), "b_scale": np.array([2.0 ** -30], np.float32)}
    assert OUTPUT_STAGES["qd8-f32-scale-product-unfused-ftz"](acc, tiny, "f32")[0, 0] == 0        # 2^-130 flushed
    assert OUTPUT_STAGES["qd8-f32-scale-product-unfused"](acc, tiny, "f32")[0, 0] != 0
    for op in ("gemm", "igemm"):
        a55 = parse_name(f"xnn_qd8_f32_qc8w_{op}_minmax_ukernel_4x8c4__asm_aarch32_neondot_cortex_a55")
        assert _base_stage(a55, "minmax_f32", isa_of(a55)) == "qd8-f32-scale-product-unfused-ftz"
    mlal = parse_name("xnn_qd8_f32_qc8w_gemm_minmax_ukernel_4x8__asm_aarch32_neonmlal_ld64")
    assert _base_stage(mlal, "minmax_f32", isa_of(mlal)) == "qd8-f32-unfused-ftz"


def test_xnnpack_aarch32_names_map_to_the_arm_target():
    from lowp.conformance.libraries.xnnpack import _base_stage, isa_of, parse_name
    simd = parse_name("xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_2x2c4__armsimd32")
    assert isa_of(simd).target == "arm" and isa_of(simd).features == ("armv6",)
    assert _base_stage(simd, "fp32_armsimd32", isa_of(simd)) == "xnnpack-fp32-armsimd32"
    a7 = parse_name("xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_4x8__asm_aarch32_neon_mlal_lane_cortex_a7")
    assert isa_of(a7).target == "arm" and _base_stage(a7, "fp32_neon", isa_of(a7)) == "xnnpack-fp32-neon"
    v8 = parse_name("xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_4x8__asm_aarch32_neonv8_mlal_lane_cortex_a53")
    assert "armv8" in isa_of(v8).features and _base_stage(v8, "fp32_neonv8", isa_of(v8)) == "xnnpack-fp32-neonv8"
    aarch64 = parse_name("xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x8__neon_mlal_lane")
    assert isa_of(aarch64).target == "aarch64"


def test_the_build_cpu_follows_the_features():
    from lowp.emulator.targets.arm import build_cpu
    assert build_cpu(["armv6"]) == "arm1176jzf_s+dsp"
    assert build_cpu(["neon"]) == "cortex_a7"
    assert build_cpu(["neon", "armv8"]) == "cortex_a53"
    assert build_cpu(["neon", "asimddp"]) == "cortex_a55"


# -- lowp's own kernels through the conformance suite -------------------------------------------------------------

@pytest.fixture(scope="module")
def own_kernels():
    return load_kernels(TOML)


def _check(name: str, check: str, domain: str):
    from lowp.conformance.run.checks import Check, run_check
    return run_check(Check(name, check, domain, True), lambda e: None, examples=20)


@needs_qemu
@pytest.mark.parametrize("name, instruction", [("arm32_simd32_s8_gemm", "smlad"), ("arm32_neon_s8_gemm", "vmlal")])
def test_the_own_kernels_pass(own_kernels, name, instruction):
    for check, domain in (("model", "full"), ("exact", "claimed")):
        row = _check(name, check, domain)
        assert row["verdict"] == "PASS", row
        assert row["backend"] == "qemu" and row["target"] == "arm" and instruction in row["path"]


@needs_qemu
@pytest.mark.parametrize("name, cause", [("arm32_simd32_s8_gemm_no_ror", "wrong value"),
                                         ("arm32_neon_s8_gemm_s16_acc", "int16-lanes")])
def test_the_one_bug_kernels_fail_with_a_counterexample(own_kernels, name, cause):
    row = _check(name, "exact", "claimed")
    assert row["verdict"] == "FAIL", row
    assert cause in row["cause"]
    assert row["counterexample"]["actual"] != row["counterexample"]["expected"]
