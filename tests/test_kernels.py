"""Every registered kernel (x86-64 natively, AArch64 under Unicorn) equals its behaviour model bit for bit on
every edge shape its tiles generate, on full-range, extreme and in-domain inputs; and where it claims 'exact',
it is exact on its domain. One tester over the declarative registry, as XNNPACK's GEMM micro-kernel tester.
Then the seeds' examples on the real kernels."""
import dataclasses

import numpy as np
import pytest

from tests.conftest import runner

from lowp.kernels import executor, kernel, kernels
from lowp.kernels.cases import edge_shapes, random_operands
from lowp.kernels.models import exact_gemm, outlier_split

ALL = kernels()


@pytest.mark.parametrize("k", ALL, ids=lambda k: k.name)
def test_kernel_equals_its_behaviour_model_on_every_edge_shape(k):
    ex = runner(k)
    rng = np.random.default_rng(abs(hash(k.name)) % 2 ** 32)
    for m, n, depth in edge_shapes(k):
        for domain, extremes in ((False, 0.0), (False, 0.5), (True, 0.2)):
            A, B = random_operands(k, m, n, depth, rng, domain=domain, extremes=extremes)
            got, want = ex.run(A, B), k.predict(A, B)
            assert np.array_equal(got, want), f"{k.name} {m}x{n}x{depth} domain={domain}: first diff at " \
                f"{np.argwhere(got != want)[0].tolist()}"


@pytest.mark.parametrize("k", [k for k in ALL if k.contract == "exact"], ids=lambda k: k.name)
def test_exact_kernels_are_exact_on_their_domain(k):
    ex = runner(k)
    rng = np.random.default_rng(7)
    for m, n, depth in [(5, 2 * k.tile.nr + 1, 301), (k.tile.mr, k.tile.nr, 1024), (k.tile.mr + 1, 3, 2053)]:
        A, B = random_operands(k, m, n, depth, rng, domain=True, extremes=0.5)
        assert np.array_equal(ex.run(A, B), exact_gemm(A, B))


@pytest.mark.parametrize("name", ["u8s8s32_ssse3", "u8s8s32_avx2", "u8s8s32_avx512bw", "acc16_avx2"])
def test_saturating_kernels_saturate_on_full_range_u8(name):
    """Seed 002: {255,255} x {127,127} gives 32767, not 64770, from the real kernel."""
    k = kernel(name)
    ex = runner(k)
    A = np.zeros((1, 4), np.uint8)
    B = np.zeros((4, 1), np.int8)
    A[0, :2], B[:2, 0] = 255, 127
    assert ex.run(A, B)[0, 0] == 32767 and exact_gemm(A, B)[0, 0] == 64770


@pytest.mark.parametrize("name,expected_vnni", [("s8s8s32_avx2", 255), ("s8s8s32_avx512vnni", 32258)])
def test_seed002_s8s8_compensation_example_on_real_kernels(name, expected_vnni):
    """Seed 002: s8s8 via +128 and compensation gives 255 instead of 32258 on AVX2, and 32258 with VNNI."""
    ex = runner(kernel(name))
    A = np.array([[127, 127, 0, 0]], np.int8)
    B = np.array([[127], [127], [0], [0]], np.int8)
    assert ex.run(A, B)[0, 0] == expected_vnni


def test_kernels_differ_from_exact_where_the_model_says_so():
    """The models are not the exact GEMM in disguise: on full-range input they predict saturation."""
    k = kernel("u8s8s32_avx2")
    A = np.full((4, 8), 255, np.uint8)
    B = np.full((8, 16), 127, np.int8)
    assert not np.array_equal(k.predict(A, B), exact_gemm(A, B))
    assert (k.predict(A, B) == 4 * 32767).all()


@pytest.mark.parametrize("nbits", [0, 5, 7])
def test_acc16_outlier_split(nbits):
    k = dataclasses.replace(kernel("acc16_avx2"), params={"nbits": nbits})
    ex = runner(k)
    rng = np.random.default_rng(nbits)
    A, B = random_operands(k, 9, 37, 531, rng, domain=False, extremes=0.3)
    main, out = outlier_split(B, nbits)
    assert (main.astype(np.int16) + out == B).all() and (out != 0).any()
    assert np.array_equal(ex.run(A, B), k.predict(A, B))
    if nbits == 0:  # everything is an outlier: exact
        assert np.array_equal(ex.run(A, B), exact_gemm(A, B))


def test_acc16_spills_every_256_k():
    """With all-255 A and all-127 B each pair saturates at 32767 and the int16 accumulator stays pinned, so the
    result counts the spills: one per 256 k (FBGEMM's KCB) plus the tail."""
    k = kernel("acc16_avx2")
    ex = runner(k)
    for depth, spills in ((256, 1), (260, 2), (600, 3)):
        A = np.full((1, depth), 255, np.uint8)
        B = np.full((depth, 1), 127, np.int8)
        assert ex.run(A, B)[0, 0] == spills * 32767 == k.predict(A, B)[0, 0]


def test_bad_operands_are_refused():
    k = kernel("u8s8s32_avx2")
    with pytest.raises(ValueError, match="A must have dtype uint8"):
        k.predict(np.zeros((2, 3), np.int8), np.zeros((3, 2), np.int8))
    with pytest.raises(ValueError, match="depths"):
        k.predict(np.zeros((2, 3), np.uint8), np.zeros((4, 2), np.int8))
    with pytest.raises(ValueError, match="2-d"):
        k.predict(np.zeros(3, np.uint8), np.zeros((3, 2), np.int8))


def test_missing_feature_is_a_skip_reason_natively_and_bochs_runs_it(monkeypatch):
    monkeypatch.setenv("LOWP_DISABLE_FEATURES", "avx2")
    assert executor(kernel("u8s8s32_avx2"), "native").unavailable() == "CPU lacks avx2"
    from lowp.emulator.x86 import bochs
    if bochs.unavailable() is None:
        assert executor(kernel("u8s8s32_avx2")).backend == "bochs"      # the CPU lacks it: Bochs runs it


# ---- AArch64 kernels: where their models part from the exact GEMM ----

def test_gemmlowp_kernel_wraps_only_when_both_products_are_minus128_squared():
    k = kernel("gemmlowp_s8_neon")
    ex = runner(k)
    A = np.zeros((1, 16), np.int8)
    B = np.zeros((16, 1), np.int8)
    A[0, [0, 8]], B[[0, 8], 0] = -128, -128          # one int16 lane: 16384 + 16384 wraps to -32768
    assert ex.run(A, B)[0, 0] == -32768 == k.predict(A, B)[0, 0]
    assert exact_gemm(A, B)[0, 0] == 32768
    A[0, 8] = -127                                   # in gemmlowp's LhsNonzero domain: exact
    assert ex.run(A, B)[0, 0] == exact_gemm(A, B)[0, 0] == 16384 + 127 * 128


@pytest.mark.parametrize("name", ["q46_mlal_24x8_neon", "u4_mlal_24x8_neon"])
def test_mlal_kernels_wrap_int16_outside_their_domain(name):
    k = kernel(name)
    ex = runner(k)
    depth = k.params["flush"]
    hi = np.iinfo(k.a_dtype).max
    A = np.full((24, depth), hi, k.a_dtype)
    B = np.full((depth, 8), hi, k.b_dtype)
    got = ex.run(A, B)
    assert np.array_equal(got, k.predict(A, B)) and not np.array_equal(got, exact_gemm(A, B))


def test_flush_depth_is_validated_by_the_model():
    with pytest.raises(ValueError, match="even depth"):
        dataclasses.replace(kernel("u4_mlal_24x8_neon"), params={"flush": 145}).predict(
            np.zeros((1, 2), np.uint8), np.zeros((2, 1), np.uint8))


def test_smmla_kernel_runs_on_lowps_model_and_says_so():
    """Under Unicorn (asked for by name: by default an I8MM kernel runs on qemu where it is installed)."""
    from lowp.kernels.emulated import EmulatedExecutor
    k = kernel("smmla_s8_neon")
    ex = EmulatedExecutor(k)
    A = np.ones((4, 16), np.int8)
    B = np.ones((16, 4), np.int8)
    assert (ex.run(A, B) == 16).all()
    assert ex.last.modeled.get("smmla") == 2 * 2 * 2   # 2x2 accumulator blocks x 2 k-blocks of 8


def test_i8mm_kernel_runs_on_qemu_by_default_where_qemu_is_installed():
    """Its verdict then rests on qemu's SMMLA, not on the model it is checked against."""
    from lowp.emulator import qemu
    from lowp.kernels.executors import aarch64_backend
    expected = "qemu" if qemu.unavailable() is None else "unicorn"
    assert aarch64_backend(kernel("smmla_s8_neon")) == expected
    assert aarch64_backend(kernel("sdot_s8_neon")) == "unicorn"      # Unicorn runs SDOT itself: it stays there


def test_a_kernel_of_internal_visibility_runs_natively_as_on_bochs(tmp_path, forget_kernels):
    """XNNPACK declares every ukernel XNN_INTERNAL (visibility "internal"): dlsym cannot find it, the static Bochs
    build can. The native executor takes its address from the library's symbol table, so the same entry runs on
    every machine."""
    from lowp.conformance.search.validate import build_problems
    from lowp.kernels import load_toml
    from .conftest import scalar_kernels_toml
    (tmp_path / "hidden.c").write_text(
        "#include <stdint.h>\n#include <stddef.h>\n"
        "__attribute__((visibility(\"internal\"))) size_t internal_workspace(int64_t M, int64_t N, int64_t K)"
        " { return 0; }\n"
        "__attribute__((visibility(\"internal\"))) void internal_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A,"
        " const int8_t *B, int32_t *C, void *w) {\n"
        "    for (int64_t i = 0; i < M; ++i) for (int64_t j = 0; j < N; ++j) { int32_t s = 0;\n"
        "        for (int64_t k = 0; k < K; ++k) s += A[i * K + k] * B[k * N + j]; C[i * N + j] = s; } }\n")
    (tmp_path / "hidden.toml").write_text(scalar_kernels_toml("vis_", "hidden.c", ("internal",)))
    (k,) = load_toml(tmp_path / "hidden.toml")
    assert build_problems([k]) == []
    ex = executor(k, "native")
    rng = np.random.default_rng(3)
    A, B = rng.integers(0, 256, (3, 5)).astype(np.uint8), rng.integers(-128, 128, (5, 4)).astype(np.int8)
    assert np.array_equal(ex.run(A, B), A.astype(np.int32) @ B.astype(np.int32))
