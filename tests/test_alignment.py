"""The alignment option (docs/alignment.md): every executor starts a buffer at the offset from a 64-byte boundary a
call asks for (native, Bochs, Unicorn, qemu-user AArch64 / 32-bit Arm / RISC-V / Hexagon, wasm), the XNNPACK ABI
cases draw each buffer's offset from what a caller may give it, and a kernel whose result depends on a buffer's
alignment FAILs naming the buffer and the offset, in the report, the repro line and the C reproducer. lowp's own
kernels (tests/alignment): two probes that write where their buffers are, a kernel with a MOVDQA on the packed
weights and one that reads its params at an address rounded down to 8 bytes; the right kernel passes at every
offset."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lowp.emulator.placement import ALIGNMENT, check_alignment, slack
from lowp.kernels import executor

from .conftest import registered

HERE = Path(__file__).resolve().parent / "alignment"
# (kernel suffix, backend) of every executor lowp has: the probes are built for each target
EXECUTORS = [("x86_64", "native"), ("x86_64", "bochs"), ("aarch64", "unicorn"), ("aarch64", "qemu"),
             ("arm", None), ("riscv64", None), ("hexagon", None), ("wasm32", None)]
PAGE_GRANULAR = {"native", "bochs", "unicorn", "qemu"}


@pytest.fixture(scope="module")
def ks():
    with registered(HERE / "kernels.toml") as kernels, registered(HERE / "probe.toml") as probes:
        yield {**kernels, **probes}


def _ready(k, backend=None):
    ex = executor(k, backend)
    reason = ex.unavailable()
    if reason:
        pytest.skip(f"{k.name} on {backend or k.target}: {reason}")
    return ex


def _quant(k, A, B, seed=0):
    from lowp.conformance.search.quantized import draw_params
    return draw_params(k, A, B, seed, "typical")


def _right(k, A, B, q, C) -> bool:
    from lowp.conformance.search.quantized import judge
    return judge(k.output, k, A, B, q, C)[0]


# ---- the option on every executor --------------------------------------------------------------------------------
def test_slack_puts_the_start_at_the_offset_and_bad_options_are_named():
    """On a page-granular executor the buffer (with its allowed over-read) ends `slack` bytes before a page's end:
    its start is then at the offset asked, whatever its length; without an offset nothing moves."""
    for nbytes in (0, 1, 63, 64, 65, 4097):
        for after in (0, 7, 128):
            assert slack(nbytes, after, None) == 0
            for offset in (0, 1, 4, 33, 63):
                pad = slack(nbytes, after, offset)
                assert 0 <= pad < ALIGNMENT and (8192 - pad - after - nbytes) % ALIGNMENT == offset
    assert check_alignment({"A": np.int64(3)}) == {"A": 3}
    for bad in ({"A": 64}, {"A": -1}, {"A": True}, {"A": 1.5}, [1]):
        with pytest.raises(ValueError, match="align"):
            check_alignment(bad)


def test_an_align_naming_no_buffer_is_refused(ks):
    k = ks["xnn_align_good"]
    A, B = np.zeros((2, 3), np.int8), np.zeros((3, 4), np.int8)
    with pytest.raises(ValueError, match=r"xnn_align_good: align names no buffer of the call: B \(its buffers: A, "
                                         r"w, C, params\)"):
        _ready(k).run(A, B, quant=_quant(k, A, B), align={"B": 1})


@pytest.mark.parametrize("target, backend", EXECUTORS)
def test_every_executor_places_each_calls_pointers_at_the_offsets(ks, target, backend):
    """The XNNPACK-ABI probe, 3 rows (a call each, handed A and C at its row): every executor hands row m's call
    a at A's offset + m * K, c at C's + m * N, and w and params at theirs, modulo 64, as XNNPACK's operator would
    on a caller's buffers placed there."""
    k = ks[f"xnn_align_probe_{target}"]
    ex = _ready(k, backend)
    M, N, K = 3, 4, 5
    A, B = np.zeros((M, K), np.int8), np.zeros((K, N), np.int8)
    align = {"A": 3, "w": 8, "C": 1, "params": 2}
    C = ex.run(A, B, quant=_quant(k, A, B), seed=1, align=align)
    assert C.tolist() == [[(3 + m * K) % 64, 8, (1 + m * N) % 64, 2] for m in range(M)]


@pytest.mark.parametrize("backend", ["unicorn", "qemu"])
def test_a_shorter_buffer_at_the_same_place_gets_its_canaries_rewritten(ks, backend):
    """At one offset, buffers of different lengths start at the same address (the slack takes up the difference):
    the next call's shorter A must not find the last call's longer A in its slack (Unicorn kept canaries it had
    found intact by place alone, and read the stale bytes as a write past A's end)."""
    k = ks["xnn_align_probe_aarch64"]
    ex = _ready(k, backend)
    for K in (9, 5, 2):
        A, B = np.full((1, K), 7, np.int8), np.zeros((K, 4), np.int8)
        assert ex.run(A, B, quant=_quant(k, A, B), seed=1, align={"A": 1})[0, 0] == 1


@pytest.mark.parametrize("target, backend", [("x86_64", "native"), ("aarch64", "unicorn"), ("wasm32", None)])
def test_the_gemm_signature_places_a_b_c_and_the_workspace(ks, target, backend):
    """lowp's own `gemm` signature takes the option for its four buffers. Without it a page-granular executor ends
    each buffer at its guard page (its start then follows its length: 1 byte of A at 63, 4 of B at 60, 16 of C
    and of the workspace at 48); wasm, whose bounds are byte-exact, starts each 16-byte aligned."""
    k = ks[f"align_probe_{target}"]
    ex = _ready(k, backend)
    A, B = np.zeros((1, 1), np.int8), np.zeros((1, 4), np.int8)
    assert ex.run(A, B, seed=1, align={"A": 1, "B": 7, "C": 4, "work": 33})[0].tolist() == [1, 7, 4, 33]
    natural = ex.run(A, B, seed=1)[0].tolist()
    if ex.backend in PAGE_GRANULAR:
        assert natural == [63, 60, 48, 48]
    else:
        assert [a % 16 for a in natural] == [0, 0, 0, 0]


@pytest.mark.parametrize("target, backend", [("x86_64", "native"), ("x86_64", "bochs"), ("aarch64", "unicorn"),
                                             ("aarch64", "qemu")])
def test_a_read_into_the_slack_below_reads_canaries_alike_everywhere(ks, target, backend):
    """The kernel that reads params at their address rounded down to 8: at offset 0 it is right; at offset 4 it
    reads 4 bytes below the start, which hold the canary on every page-granular executor, so every one computes
    the same wrong C (the native one's)."""
    k = ks["xnn_align_bug_rounded_params" + ("" if target == "x86_64" else "_aarch64")]
    ex = _ready(k, backend)
    rng = np.random.default_rng(3)
    A, B = rng.integers(-128, 128, (5, 9)).astype(np.int8), rng.integers(-128, 128, (9, 9)).astype(np.int8)
    q = _quant(k, A, B)
    assert _right(k, A, B, q, ex.run(A, B, quant=q, seed=1, align={"params": 0}))
    assert _right(k, A, B, q, ex.run(A, B, quant=q, seed=1, align={"params": 8}))
    wrong = ex.run(A, B, quant=q, seed=1, align={"params": 4})
    assert not _right(k, A, B, q, wrong)
    native = _ready(ks["xnn_align_bug_rounded_params"], "native").run(A, B, quant=q, seed=1, align={"params": 4})
    assert wrong.tobytes() == native.tobytes()


def test_wasm_bounds_stay_byte_exact_at_an_offset(ks):
    """wasm's bounds checks need no slack: the read 4 bytes below params' start traps, named."""
    from lowp.emulator.errors import OutOfBounds
    k = ks["xnn_align_bug_rounded_params_wasm32"]
    ex = _ready(k)
    A, B = np.ones((2, 3), np.int8), np.ones((3, 4), np.int8)
    q = _quant(k, A, B)
    assert _right(k, A, B, q, ex.run(A, B, quant=q, seed=1, align={"params": 0}))
    with pytest.raises(OutOfBounds, match=r"before its start|byte offset -"):
        ex.run(A, B, quant=q, seed=1, align={"params": 4})


# ---- the cases ------------------------------------------------------------------------------------------------------
def test_alignment_cases_give_each_buffer_what_a_caller_may(ks):
    """align_element puts every buffer at its element size (A and C int8: 1; w: its int32 words, 4; params: the
    qc8w union's 4), align_64 at 0, align_drawn at multiples of those drawn from the case's seed; the options
    follow from the id alone, and a shrunk case keeps them."""
    from lowp.conformance.run.checks import Call, shrunk_options
    from lowp.conformance.search.cases import Case, abi_options, cases_for
    k = ks["xnn_align_good"]
    cases = [c for c in cases_for(k, k.output, "claimed", grid=False) if c.name.startswith("align_")]
    assert sorted({c.name for c in cases}) == ["align_64", "align_drawn", "align_element"]
    assert not [c for c in cases_for(k, k.output, "outside", grid=False) if c.name.startswith("align_")]
    units = {"A": 1, "w": 4, "C": 1, "params": 4}
    drawn = []
    for case in cases:
        align = abi_options(case, k)["align"]
        assert abi_options(Case.from_id(case.id), k)["align"] == align
        assert set(align) == set(units) and all(align[b] % units[b] == 0 and 0 <= align[b] < 64 for b in units)
        if case.name == "align_element":
            assert align == units
        elif case.name == "align_64":
            assert set(align.values()) == {0}
        else:
            drawn.append(align)
            A, B = np.zeros((1, 1), np.int8), np.zeros((1, 1), np.int8)
            call = Call(np.zeros((case.m, case.k), np.int8), B, case.seed, case.id, None, abi_options(case, k))
            assert shrunk_options(call, k, A, B)["align"] == align
    assert len({tuple(d.values()) for d in drawn}) == len(drawn)       # each drawn case its own offsets


def test_a_dynamic_kernel_aligns_its_quantization_params_and_lowps_own_abi_gets_no_cases():
    from lowp.kernels import abi
    from lowp.kernels.registry import kernel as get_kernel
    from lowp.kernels.xnnpack import Ukernel, caller_alignment
    u = Ukernel("f", "qd8-f32-qc8w", "minmax_f32", 1, 4, 1)
    assert caller_alignment(u, 1, 4, "aarch64") == {"A": 1, "w": 4, "C": 4, "params": 4, "quantization_params": 4}
    assert caller_alignment(Ukernel("f", "qs8", "fp32_scalar", 1, 4, 1), 1, 1, "x86-64")["params"] == 8  # rndnu
    # the packed weights: whole column blocks into an allocation of XNN_ALLOCATION_ALIGNMENT
    hvx = Ukernel("f", "qs8-qc8w", "fp32_scalar", 1, 32, 4)        # 32 x (4 + 4 k + 4) bytes a block
    assert [caller_alignment(hvx, 1, 1, t)["w"] for t in ("hexagon", "x86-64", "aarch64", "wasm32")] == [128, 64, 16, 4]
    avx512 = Ukernel("f", "qs8-qc8w", "fp32_scalar", 4, 16, 8)    # 16 x (4 + 8 k + 4)
    assert caller_alignment(avx512, 1, 1, "x86-64")["w"] == 64
    assert abi.caller_alignment(get_kernel("u8s8s32_avx2")) == {}


@pytest.mark.parametrize("datatype, layout, nr, kr, sr, non_planar", [
    ("qs8-qc8w", "fp32_scalar", 8, 8, 1, 0), ("qd8-f32-qc8w", "minmax_f32", 16, 4, 1, 0),
    ("qd8-f16-qc2w", "minmax_f16", 8, 8, 1, 0), ("qs8-qc2w", "fp32_scalar", 4, 8, 1, 0),
    ("qd8-f32-qc4w", "minmax_f32", 16, 4, 1, 0), ("qd8-f32-qc4w", "minmax_f32", 16, 8, 1, 0),
    ("qs8-qc4w", "fp32_scalar", 8, 2, 4, 0), ("qd8-f32-qc4w", "minmax_f32", 16, 4, 1, 16)])
def test_the_packed_weights_alignment_is_what_every_depth_of_the_real_packing_keeps(datatype, layout, nr, kr, sr,
                                                                                   non_planar):
    """packed_alignment against the packer itself: one block of nr columns at every depth up to three padded
    k-chunks; the gcd of those sizes (and the allocation's 64 bytes) is where the next block may start. It once
    took a planar 2- or 4-bit packer's k bytes to be kr * sr / planes, a quarter of the kr * sr * planes k it pads
    to: the qc2w AVX2 and qc4w AVX-512 kernels, whose aligned loads XNNPACK's packing keeps aligned, were failed at
    a w offset no caller gives."""
    import math
    from lowp.kernels.xnnpack import Ukernel, _weights, packed_alignment
    u = Ukernel("f", datatype, layout, 1, nr, kr, sr, non_planar=non_planar)
    lo, hi = u.d.weight_range
    sizes = []
    for K in range(1, 3 * kr * sr * u.d.planes + 1):
        B = np.full((K, nr), lo, np.int64)
        q = {"bias": np.zeros(nr, np.int32 if u.d.int_bias else np.float32), "scale": np.ones(nr, np.float32),
             "b_scale": np.ones(nr, np.float32), "a_zero_point": 0, "b_float_zero_point": np.zeros(nr, np.float32)}
        sizes.append(_weights(u, B, q, 1).size)
    assert packed_alignment(u, "x86-64") == math.gcd(64, *sizes), sizes


def test_the_repro_line_carries_the_alignment():
    from lowp.conformance.search.problem import abi_options, abi_text, decode, encode
    options = {"strides": {"a": 17}, "align": {"A": 1, "quantization_params": 4}}
    assert abi_text(options) == "a=17,align_A=1,align_quantization_params=4"
    assert abi_options(abi_text(options)) == options
    line = encode("k", "exact", "claimed", [[1]], [[2]], 3, None, {"align": {"C": 5}})
    assert decode(line)["options"] == {"align": {"C": 5}}


# ---- a failure that depends only on alignment ---------------------------------------------------------------------
def _check(name, cases="align_*"):
    from lowp.conformance import check_for, run_check
    return run_check(check_for(name, None, "claimed"), lambda event: None, examples=0, grid=False, only=(cases,))


def test_an_aligned_load_is_caught_only_misaligned_and_named(ks):
    """MOVDQA on the packed weights: right where w is 16-byte aligned (one block, K % 4 == 0), a
    general-protection fault at w's offset 4; the check FAILs on the alignment cases naming w and its offset."""
    from lowp.emulator.errors import AlignmentFault
    k = ks["xnn_align_bug_movdqa_w"]
    ex = _ready(k, "native")
    rng = np.random.default_rng(5)
    A, B = rng.integers(-128, 128, (3, 8)).astype(np.int8), rng.integers(-128, 128, (8, 4)).astype(np.int8)
    q = _quant(k, A, B)
    for offset in (0, 16, 32, 48):
        assert _right(k, A, B, q, ex.run(A, B, quant=q, seed=1, align={"w": offset}))
    for offset in (4, 8, 60):
        with pytest.raises(AlignmentFault, match="movdqa.*buffer 'w'"):
            ex.run(A, B, quant=q, seed=1, align={"w": offset})
    row = _check(k.name)
    assert row["verdict"] == "FAIL", row
    assert row["cause"].startswith("depends on the alignment of w: offset 4 from 64 (with w 64-byte aligned, the "
                                   "same call gives the right C"), row["cause"]
    assert "AlignmentFault" in row["cause"] and row["counterexample"]["options"]["align"]["w"] == 4


def test_a_rounded_down_read_is_named_reported_and_reproduced(ks, tmp_path):
    """The params read at an address rounded down to 8: a wrong value (no fault) at params' offset 4, named as
    alignment (params alone), shown in the report with the offsets, and the C reproducer places the buffers at
    the same offsets: it exits 1 there and 0 with every buffer 64-byte aligned."""
    from lowp.conformance.report import failure_lines
    from lowp.conformance.report.reproducer import c_source, run_here
    k = ks["xnn_align_bug_rounded_params"]
    row = _check(k.name, "align_element")
    assert row["verdict"] == "FAIL", row
    assert row["cause"].startswith("depends on the alignment of params: offset 4 from 64"), row["cause"]
    cx = row["counterexample"]
    assert cx["options"]["align"] == {"A": 1, "w": 4, "C": 1, "params": 4}
    text = "\n".join(failure_lines(row))
    assert "starts at A 1, w 4, C 1, params 4 bytes past a 64-byte boundary" in text
    assert "align_params=4" in text                          # the repro line replays it
    source = c_source(k, row)
    assert "#define buf_params (buf_params_storage + 4)" in source
    (tmp_path / "repro.c").write_text(source)
    said = run_here(k, tmp_path / "repro.c")
    if said.startswith("did not build"):
        pytest.skip(said)
    assert said.startswith("ran here: exit 1"), said
    aligned = {**row, "counterexample": {**cx, "options": {"align": {b: 0 for b in cx["options"]["align"]}}}}
    (tmp_path / "aligned.c").write_text(c_source(k, aligned))
    assert run_here(k, tmp_path / "aligned.c").startswith("ran here: exit 0")


def test_an_unaligned_safe_kernel_passes_at_every_offset(ks):
    """The right kernel gives the right C with each buffer at every offset a caller may give, and passes the
    alignment cases."""
    k = ks["xnn_align_good"]
    ex = _ready(k, "native")
    rng = np.random.default_rng(9)
    A, B = rng.integers(-128, 128, (3, 7)).astype(np.int8), rng.integers(-128, 128, (7, 9)).astype(np.int8)
    q = _quant(k, A, B)
    for offset in range(64):
        align = {"A": offset, "w": offset // 4 * 4, "C": (offset * 7) % 64, "params": (offset * 4) % 64}
        assert _right(k, A, B, q, ex.run(A, B, quant=q, seed=offset, align=align)), align
    assert _check(k.name)["verdict"] == "PASS"


def test_a_wasm_trap_after_a_native_call_is_still_a_trap():
    """The native guard installs its signal handlers for a call and puts back the ones it replaced: a wasm trap
    (wasmtime's handlers, installed when its first engine was made) after a native call is the trap it was, not a
    SIGILL that ends the process. In a child process: where that breaks, the process dies."""
    import subprocess
    import sys
    script = f"""
import numpy as np
from lowp.kernels import executor, load_toml
from lowp.emulator.errors import OutOfBounds
ks = {{k.name: k for k in load_toml({str(HERE / "kernels.toml")!r})}}
ks.update({{k.name: k for k in load_toml({str(HERE / "probe.toml")!r})}})
wasm = executor(ks["xnn_align_bug_rounded_params_wasm32"])
if wasm.unavailable():
    print("skip", wasm.unavailable()); raise SystemExit
from lowp.conformance.search.quantized import draw_params
A, B = np.ones((2, 3), np.int8), np.ones((3, 4), np.int8)
q = draw_params(ks["xnn_align_bug_rounded_params_wasm32"], A, B, 0, "typical")
wasm.run(A, B, quant=q, seed=1, align={{"params": 0}})            # wasmtime's handlers are in
executor(ks["align_probe_x86_64"], "native").run(np.zeros((1, 1), np.int8), np.zeros((1, 4), np.int8))
try:
    wasm.run(A, B, quant=q, seed=1, align={{"params": 4}})
except OutOfBounds:
    print("trapped")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    if done.stdout.startswith("skip"):
        pytest.skip(done.stdout.strip())
    assert done.returncode == 0 and done.stdout.strip().endswith("trapped"), (done.returncode, done.stderr[-2000:])
