"""RISC-V 64 under qemu-riscv64 (lowp.emulator.qemu, guest RISCV64) and lowp's RVV qs8 GEMM with its vsmul + vnclip
requantization (kernels/riscv64): the machine calls, faults, budgets and undefined instructions as on AArch64; the
RVV decoder against the assembler; the rvv-vnclip output stages against XNNPACK's rndnu ones; the kernels through
the conformance suite at VLEN 128 and 256, and a kernel built with the wrong vxrm failing with a shrunk
counterexample. Everything that runs the guest skips where qemu-riscv64 is absent."""
from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lowp.emulator.errors import BudgetExceeded, OutOfBounds, UndefinedInstruction
from lowp.emulator.qemu import RISCV64, QemuMachine, build_for_qemu, seeded_registers_riscv64
from lowp.isa_models.requant import OUTPUT_STAGES, xnnpack_rndnu_neon_params
from tests.conftest import load_kernels

ROOT = Path(__file__).resolve().parents[1]
TOML = ROOT / "kernels" / "riscv64" / "riscv64.toml"
MODES = ("rnu", "rne", "rdn", "rod")
needs_qemu = pytest.mark.skipif(RISCV64.unavailable() is not None,
                                reason=f"{RISCV64.unavailable()} (apt-get install qemu-user)")

GUEST_C = textwrap.dedent("""
    #include <stddef.h>
    #include <stdint.h>
    void lowp_sum(const int32_t *x, long n, int32_t *out) {
        int32_t s = 0;
        for (long i = 0; i < n; i++) s += x[i];
        *out = s;
    }
    long lowp_tenth(long a, long b, long c, long d, long e, long f, long g, long h, long i, long j) {
        return a + 10 * h + 100 * i + 1000 * j;
    }
    void lowp_fill(int8_t *p, long n) {           /* RVV stores of n bytes of 7 */
        for (size_t vl; n > 0; n -= (long)vl, p += vl)
            __asm__ volatile("vsetvli %0, %1, e8, m8, ta, ma\\n vmv.v.i v8, 7\\n vse8.v v8, (%2)"
                             : "=r"(vl) : "r"(n), "r"(p) : "memory");
    }
    long lowp_t3(void) { long r; __asm__ volatile("mv %0, t3" : "=r"(r)); return r; }
    long lowp_v9(void) {
        long r;
        __asm__ volatile("vsetvli zero, zero, e64, m1, ta, ma\\n vmv.x.s %0, v9" : "=r"(r));
        return r;
    }
    long lowp_vlenb(void) { long r; __asm__ volatile("csrr %0, vlenb" : "=r"(r)); return r; }
    void lowp_spin(void) { for (;;) __asm__ volatile(""); }
    void lowp_reserved(void) { __asm__ volatile(".insn 0xfe000057"); }   /* OP-V OPIVV funct6 111111: reserved */
""")


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    if RISCV64.unavailable():
        pytest.skip(f"{RISCV64.unavailable()} (apt-get install qemu-user)")
    source = tmp_path_factory.mktemp("rv") / "guest.c"
    source.write_text(GUEST_C)
    with QemuMachine(build_for_qemu(source, guest=RISCV64), guest=RISCV64) as m:
        yield m


# -- the machine ---------------------------------------------------------------------------------------------------

@needs_qemu
def test_calls_return_results_with_buffers_and_stack_arguments(machine):
    x = np.random.default_rng(1).integers(-1000, 1000, 97).astype(np.int32)
    r = machine.call("lowp_sum", x, len(x), np.zeros(1, np.int32), names=["x", "n", "out"])
    assert r["out"][0] == x.sum() and np.array_equal(r["x"], x)
    assert machine.call("lowp_tenth", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10).ret == 1 + 80 + 900 + 10000   # a8, a9 on the stack
    assert machine.call("lowp_vlenb").ret == 16                         # the default -cpu: VLEN 128


@needs_qemu
def test_a_seed_chooses_integer_and_vector_registers(machine):
    for seed in (3, 41):
        xs, vs = seeded_registers_riscv64(seed, 0)
        assert machine.call("lowp_t3", seed=seed).ret & (2 ** 64 - 1) == xs[28]      # t3 is x28
        assert machine.call("lowp_v9", seed=seed).ret & (2 ** 64 - 1) == int.from_bytes(vs[144:152], "little")
    assert machine.call("lowp_t3").ret == 0                              # without a seed: zero


@needs_qemu
def test_out_of_bounds_read_and_vector_write_name_the_buffer(machine):
    x = np.arange(100, dtype=np.int32)
    with pytest.raises(OutOfBounds) as e:
        machine.call("lowp_sum", x, 101, np.zeros(1, np.int32), names=["x", "n", "out"])
    assert e.value.buffer == "x" and e.value.offset == 400 and e.value.access == "read"
    with pytest.raises(OutOfBounds) as e:
        machine.call("lowp_fill", np.zeros(50, np.int8), 60, names=["p", "n"])
    assert e.value.buffer == "p" and e.value.offset == 50 and e.value.access == "write"
    assert "vse8.v" in str(e.value)


@needs_qemu
def test_a_runaway_loop_is_budget_exceeded_and_the_next_call_works(machine):
    starts = machine.starts
    with pytest.raises(BudgetExceeded) as e:
        machine.call("lowp_spin", seconds=0.5)
    assert "lowp_spin" in str(e.value)
    assert machine.call("lowp_tenth", 1, 0, 0, 0, 0, 0, 0, 0, 0, 0).ret == 1
    assert machine.starts == starts                                     # the guest's timer stopped it: same process


@needs_qemu
def test_an_illegal_instruction_is_undefined_instruction(machine):
    with pytest.raises(UndefinedInstruction) as e:
        machine.call("lowp_reserved")
    assert e.value.encoding == 0xFE000057 and "qemu-riscv64" in str(e.value)


@needs_qemu
def test_counts_and_mnemonics_include_the_vector_instructions(machine):
    from lowp.emulator.qemu import plugin_unavailable
    if plugin_unavailable():
        pytest.skip(plugin_unavailable())
    r = machine.call("lowp_fill", np.zeros(300, np.int8), 300, names=["p", "n"], mnemonics=True)
    assert r.mnemonics["vse8.v"] == 3 and r.mnemonics["vsetvli"] == 3      # VLEN 128, m8: 128 bytes a store
    assert r.instructions == sum(r.mnemonics.values())


@needs_qemu
def test_features_are_the_hwcap_letters_and_the_vlen_of_the_cpu_string(machine):
    """qemu-riscv64 puts IMAFDC (and V) in AT_HWCAP; nothing in the auxiliary vector says VLEN, so zvl<N>b come from
    the -cpu string, and the guest's vlenb agrees with them."""
    hwcap = machine.hwcap[0]
    letters = {chr(ord("a") + i) for i in range(26) if hwcap >> i & 1}
    assert {"i", "m", "a", "f", "d", "c"} <= letters <= machine.features
    assert {"v", "zvl128b"} <= machine.features and "zvl256b" not in machine.features
    assert machine.call("lowp_vlenb").ret * 8 == 128
    wide = QemuMachine(machine.binary, guest=RISCV64, cpu=RISCV64.vector_length_cpu(512), counts=False)
    with wide:
        assert wide.call("lowp_vlenb").ret * 8 == 512 and "zvl512b" in wide.features
    with pytest.raises(ValueError, match="V extension"):
        QemuMachine(machine.binary, guest=RISCV64, cpu="rv64,v=false")


def test_the_rvv_decoder_names_what_the_assembler_encodes():
    """lowp.emulator.riscv.vector_mnemonic against zig's clang: each instruction assembled, then decoded."""
    from lowp.emulator.build import build_text
    from lowp.emulator.riscv import mnemonic
    insns = ["vsetvli t0, a0, e8, m1, ta, ma", "vsetivli t0, 4, e32, m4, ta, ma", "vsetvl t0, a0, a1",
             "vle8.v v8, (a0)", "vle32.v v8, (a0)", "vse8.v v8, (a0)", "vse16.v v8, (a0)", "vl8re8.v v0, (a0)",
             "vs1r.v v8, (a0)", "vlse32.v v8, (a0), a1", "vluxei16.v v8, (a0), v16", "vlm.v v0, (a0)",
             "vle8ff.v v8, (a0)", "vlseg2e8.v v8, (a0)",
             "vsext.vf2 v8, v4", "vzext.vf4 v8, v4", "vwmacc.vx v8, a0, v4", "vwmacc.vv v8, v2, v4",
             "vwmaccu.vx v8, a0, v4", "vwmaccsu.vv v8, v2, v4", "vwmaccus.vx v8, a0, v4", "vwmul.vx v8, v4, a0",
             "vwadd.wv v8, v8, v4", "vmacc.vx v8, a0, v4", "vsmul.vx v8, v8, a0", "vsmul.vv v8, v8, v4",
             "vnclip.wx v8, v16, a0", "vnclip.wi v8, v16, 0", "vnclipu.wv v8, v16, v4", "vsadd.vx v8, v8, a0",
             "vsadd.vv v8, v8, v8", "vmax.vx v8, v8, a0", "vmin.vx v8, v8, a0", "vmv.v.i v8, 7",
             "vmv.v.x v8, a0", "vmv.x.s a0, v8", "vmv.s.x v8, a0", "vredsum.vs v8, v8, v9", "vmand.mm v0, v1, v2",
             "vadd.vi v8, v8, 3", "vmerge.vvm v8, v8, v9, v0", "vmv4r.v v8, v12", "vsll.vx v8, v8, a0"]
    body = "".join(f'    "{i}\\n"\n' for i in insns)
    binary = build_text(f'__attribute__((naked)) void lowp_insns(void) {{\n  __asm__(\n{body}  );\n}}\n'
                        "int main(void) { return 0; }\n", name="rvv-decoder", target="riscv64-linux")
    _, code = binary.code("lowp_insns")
    names = [mnemonic(code[i:i + 4]) for i in range(0, 4 * len(insns), 4)]
    expected = [i.split()[0] for i in insns]
    assert names == expected


# -- the output stages -------------------------------------------------------------------------------------------

def _params(scale, zp=0, lo=-128, hi=127, N=1, bias=0):
    return {"bias": np.full(N, bias, np.int32), "scale": np.full(N, scale, np.float32), "output_zero_point": zp,
            "output_min": lo, "output_max": hi}


def _edge_accumulators(scale) -> np.ndarray:
    """int32 accumulators around every rounding boundary of this scale: the ends of int32, zero, and for the
    rndnu shift s (right_pre_shift + post) the ties k * 2^s / m +- a few, which the post-shift rounds."""
    p = xnnpack_rndnu_neon_params(np.float32(scale))
    m = int(p["multiplier"][0])
    post = -int(p["right_post_shift"][0])
    ends = [-(1 << 31), -(1 << 31) + 1, -1, 0, 1, (1 << 31) - 2, (1 << 31) - 1]
    # x such that x * m / 2^31 lands near a half-integer multiple of 2^post (the ties of the rounding shift)
    ties = []
    for k in range(-300, 301):
        centre = (2 * k + 1) * (1 << 30) * (1 << post) // m // 2
        ties += [centre + d for d in range(-3, 4)]
    x = np.clip(np.array(ends + ties, np.int64), -(1 << 31), (1 << 31) - 1)
    return x.astype(np.int32).reshape(-1, 1)


# Every float32 exponent of the rndnu domain [2^-32, 256), with the smallest, a middle and the largest mantissa.
F32 = np.float32
SCALES = [np.ldexp(f, e) for e in range(-32, 8) for f in (F32(1), F32(1.5), np.nextafter(F32(2), F32(0)))]


@pytest.mark.parametrize("zp", [-128, -1, 0, 5, 127])
def test_rvv_vnclip_rnu_equals_xnnpack_neon_rndnu_at_every_exponent(zp):
    """vsmul under rdn is SQDMULH and vnclip under rnu is SRSHL then SQXTN: the RVV sequence is XNNPACK's NEON rndnu
    bit for bit, over every scale exponent of the domain and the accumulators at its rounding ties and ends."""
    rnu, neon = OUTPUT_STAGES["rvv-vnclip-rnu"], OUTPUT_STAGES["xnnpack-rndnu-neon"]
    for scale in SCALES:
        acc = _edge_accumulators(scale)
        for lo, hi in ((-128, 127), (-20, 31)):
            q = _params(scale, zp, lo, hi)
            assert np.array_equal(rnu.compute(acc, q, "s8"), neon.compute(acc, q, "s8")), (scale, zp, lo, hi)


@settings(max_examples=300, deadline=None)
@given(st.integers(-(1 << 31), (1 << 31) - 1), st.integers(-32, 7), st.floats(1.0, 2.0, exclude_max=True),
       st.integers(-128, 127), st.integers(-(1 << 20), 1 << 20))
def test_rvv_vnclip_rnu_equals_xnnpack_neon_rndnu_hypothesis(acc, exponent, mantissa, zp, bias):
    scale = min(np.ldexp(F32(mantissa), exponent), np.nextafter(F32(256), F32(0)))    # F32(mantissa) may be 2
    q = _params(scale, zp, bias=bias)
    a = np.array([[acc]], np.int32)
    assert np.array_equal(OUTPUT_STAGES["rvv-vnclip-rnu"].compute(a, q, "s8"),
                          OUTPUT_STAGES["xnnpack-rndnu-neon"].compute(a, q, "s8"))


def _counterexample(stage, other):
    """The first (scale, accumulator) of the edge sets where two stages differ, or None."""
    for scale in SCALES:
        acc = _edge_accumulators(scale)
        q = _params(scale)
        a, b = OUTPUT_STAGES[stage].compute(acc, q, "s8"), OUTPUT_STAGES[other].compute(acc, q, "s8")
        bad = np.flatnonzero(a != b)
        if bad.size:
            return float(scale), int(acc[bad[0], 0]), int(a[bad[0], 0]), int(b[bad[0], 0])
    return None


SCALE_STAGES = [n for n, s in OUTPUT_STAGES.items() if "s8" in s.out_types and n.startswith(("xnnpack-", "rvv-"))
                and not n.startswith("xnnpack-fp32-avxvnni")]


@pytest.mark.parametrize("stage", ["rvv-vnclip-rne", "rvv-vnclip-rdn", "rvv-vnclip-rod", "rvv-vnclip-rnu-vsmul-rnu"])
def test_the_other_vxrm_modes_equal_no_existing_stage(stage):
    """rne, rdn, rod (and rnu for vsmul too) each differ from every other scale-keyed s8 stage: a counterexample at
    a rounding tie or an end is found for each."""
    for other in SCALE_STAGES:
        if other != stage:
            assert _counterexample(stage, other) is not None, (stage, other)


# -- the kernels through the conformance suite ------------------------------------------------------------------

@pytest.fixture(scope="module")
def rv_kernels():
    return load_kernels(TOML)


def _runnable(k):
    from lowp.kernels import executor
    reason = executor(k).unavailable()
    if reason:
        pytest.skip(f"{k.name}: {reason} (apt-get install qemu-user)")


@needs_qemu
@pytest.mark.parametrize("vlen", [128, 256])
@pytest.mark.parametrize("mode", ["rnu", "rne"])
def test_the_kernels_pass_their_model_and_claimed_contract(rv_kernels, mode, vlen):
    from lowp.conformance.run.checks import Check, run_check
    k = rv_kernels[f"rvv_qs8_rndnu_4x1v_vnclip_{mode}_vlen{vlen}"]
    _runnable(k)
    for check in ("model", k.output):
        row = run_check(Check(k.name, check, "full" if check == "model" else "claimed", True), lambda e: None,
                        examples=40)
        assert row["verdict"] == "PASS", row
        assert row["backend"] == "qemu" and row["target"] == "riscv64" and "vwmacc.vx" in row["path"]


@needs_qemu
def test_the_kernel_runs_at_its_vlen(rv_kernels):
    """The VLEN 256 entry's qemu has VLEN 256 (its nr = 32 packing would be wrong at 128) and features zvl256b."""
    from lowp.kernels import executor
    ex = executor(rv_kernels["rvv_qs8_rndnu_4x1v_vnclip_rnu_vlen256"])
    _runnable(ex.kernel)
    assert "vlen=256" in ex.machine.cpu
    ex.machine.pid
    assert "zvl256b" in ex.machine.features


@needs_qemu
def test_a_kernel_built_with_rne_fails_the_rnu_contract_with_a_shrunk_counterexample(rv_kernels):
    """The rne build claiming the rnu contract: the search finds a tie that vnclip rounds to even, shrinks it, and
    names the stage the kernel's output equals."""
    from dataclasses import replace

    from lowp.conformance.run.checks import Check, run_check
    from lowp.kernels.registry import _KERNELS, register
    base = rv_kernels["rvv_qs8_rndnu_4x1v_vnclip_rne_vlen128"]
    _runnable(base)
    name = "rvv_qs8_rndnu_4x1v_rne_claiming_rnu_vlen128"
    if name not in _KERNELS:
        register(replace(base, name=name, output="rvv-vnclip-rnu"))
    row = run_check(Check(name, "rvv-vnclip-rnu", "claimed", True), lambda e: None, examples=100)
    assert row["verdict"] == "FAIL", row
    assert "rvv-vnclip-rne" in row["cause"]
    cx = row["counterexample"]
    assert cx["shape"][0] * cx["shape"][1] <= 4, cx["shape"]          # shrunk to a few outputs
    assert cx["actual"] != cx["expected"]
