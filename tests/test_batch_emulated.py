"""run_many on the emulated executors (issue 26, item 2): a batch of cases of one shape gives, case by case, what
run() gives for the same cases in the same order on the same machine: the same C (poison included), the same
exception for a faulting case, and every fault attributed to its own case. qemu-user pipelines the calls over one
guest process (QemuMachine.call_many); Unicorn and Bochs run them one after another (call_each)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lowp.emulator.errors import BatchStopped, BudgetExceeded, EmulatorError, OutOfBounds, Trap
from lowp.emulator.qemu import QemuDied, unavailable
from lowp.kernels import kernel
from lowp.kernels.emulated import EmulatedExecutor, QemuExecutor
from lowp.kernels.executors import bench_cases_per_second, poison
from lowp.kernels.invocation import poison_rows

from .conftest import registered

pytestmark = pytest.mark.emulated
BACKENDS = [pytest.param("unicorn"),
            pytest.param("qemu", marks=pytest.mark.skipif(unavailable() is not None, reason=str(unavailable())))]
TRIGGER = 77            # A[0] == TRIGGER makes a kernel below misbehave in that case alone

# Plain-C GEMMs of the `gemm` signature, each misbehaving in its own way when A[0] == TRIGGER; the workspace
# functions are the entries' (<prefix>_workspace).
KERNELS = r"""
#include <stddef.h>
#include <stdint.h>
#define TRIGGER 77
#define WORKSPACE(prefix) size_t prefix##_workspace(int64_t M, int64_t N, int64_t K) { return 64; }
static void product(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C, int32_t add) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            int32_t s = add;
            for (int64_t k = 0; k < K; k++) s += (int32_t)A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
}
WORKSPACE(bb_good)
void bb_good_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C, void *w) {
    product(M, N, K, A, B, C, 0);
}
WORKSPACE(bb_overread)     /* reads one byte past A: the guard page */
void bb_overread_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C, void *w) {
    int32_t extra = A[0] == TRIGGER ? ((volatile const int8_t *)A)[M * K] : 0;
    product(M, N, K, A, B, C, extra);
}
WORKSPACE(bb_pastc)        /* writes one element past C: into the next case's C, were the cases packed */
void bb_pastc_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C, void *w) {
    product(M, N, K, A, B, C, 0);
    if (A[0] == TRIGGER) ((volatile int32_t *)C)[M * N] = 1;
}
WORKSPACE(bb_below)        /* writes below C's start: caught by the canary, after the call */
void bb_below_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C, void *w) {
    product(M, N, K, A, B, C, 0);
    if (A[0] == TRIGGER) ((volatile int32_t *)C)[-1] = 1;
}
WORKSPACE(bb_clobber)      /* changes its input A: the next case must not see it */
void bb_clobber_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C, void *w) {
    product(M, N, K, A, B, C, 0);
    ((int8_t *)A)[0] = TRIGGER;
}
static int32_t calls;
WORKSPACE(bb_stateful)     /* keeps state between calls: C depends on how many calls came before */
void bb_stateful_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C, void *w) {
    product(M, N, K, A, B, C, calls++);
}
WORKSPACE(bb_spin)         /* a runaway loop: the budget */
void bb_spin_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C, void *w) {
    if (A[0] == TRIGGER) for (;;) __asm__ volatile("");
    product(M, N, K, A, B, C, 0);
}
WORKSPACE(bb_die)          /* exit_group(3): qemu's guest process ends mid-case (Unicorn: an svc, a Trap) */
void bb_die_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C, void *w) {
    if (A[0] == TRIGGER) {
        register long x8 __asm__("x8") = 94;
        register long x0 __asm__("x0") = 3;
        __asm__ volatile("svc #0" : : "r"(x8), "r"(x0));
    }
    product(M, N, K, A, B, C, 0);
}
"""


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("batch") / "batch_bugs.c"
    path.write_text(KERNELS)
    return path


def variant(source, name: str):
    """sdot_s8_neon's entry with another source and symbol (a plain-C `gemm`)."""
    return dataclasses.replace(kernel("sdot_s8_neon"), name=f"bb_{name}", sources=(source,),
                               symbol=f"bb_{name}_gemm", features=("asimd",), requires=())


def make(backend: str, k, **options):
    return (QemuExecutor if backend == "qemu" else EmulatedExecutor)(k, **options)


def cases(n: int, shape=(3, 5, 7), seed: int = 0, trigger_at=()):
    rng = np.random.default_rng(seed)
    M, N, K = shape
    As = [rng.integers(-128, 128, (M, K), dtype=np.int8) for _ in range(n)]
    Bs = [rng.integers(-128, 128, (K, N), dtype=np.int8) for _ in range(n)]
    for i in trigger_at:
        As[i][0, 0] = 77
    for i, A in enumerate(As):
        if i not in trigger_at and A[0, 0] == 77:
            A[0, 0] = 0
    return As, Bs


def per_case(ex, As, Bs, seeds) -> list:
    """What run() gives case by case: C, or the exception it raises."""
    out = []
    for A, B, seed in zip(As, Bs, seeds):
        try:
            out.append(ex.run(A, B, seed=seed))
        except EmulatorError as e:
            out.append(e)
    return out


def assert_same(batched, single):
    assert len(batched) == len(single)
    for i, (b, s) in enumerate(zip(batched, single)):
        if isinstance(s, BaseException):
            assert type(b) is type(s) and str(b) == str(s), f"case {i}: {b!r} != {s!r}"
        else:
            assert isinstance(b, np.ndarray) and b.dtype == s.dtype and np.array_equal(b, s), f"case {i}"


# ---- the registry's SDOT kernel: random cases, random shapes ------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_run_many_equals_run_case_by_case_on_random_cases(backend):
    k = kernel("sdot_s8_neon")
    batched, single = make(backend, k), make(backend, k)
    rng = np.random.default_rng(26)
    for b in range(6):
        shape = (int(rng.integers(1, 10)), int(rng.integers(1, 18)), int(rng.integers(1, 65)))
        As, Bs = cases(40, shape, seed=b)
        seeds = [int(s) for s in rng.integers(0, 2 ** 31, 40)]
        got = batched.run_many(As, Bs, seeds=seeds)
        assert_same(got, per_case(single, As, Bs, seeds))
        for A, B, C in zip(As, Bs, got):          # and it is the product (the kernel is exact on s8)
            assert np.array_equal(C, A.astype(np.int32) @ B.astype(np.int32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_untouched_elements_keep_the_seeds_poison(backend, source):
    """A kernel that writes nothing leaves C as poison(seed): run_many's C is that poison, as run()'s is."""
    k = dataclasses.replace(variant(source, "good"), symbol="bb_good_workspace")   # returns at once, writes nothing
    As, Bs = cases(5, (2, 3, 4))
    batched = make(backend, k).run_many(As, Bs, seeds=[11, 12, 13, 14, 15])
    assert_same(batched, per_case(make(backend, k), As, Bs, [11, 12, 13, 14, 15]))
    assert np.array_equal(batched[2], poison((2, 3), np.int32, 13))


def test_poison_rows_are_the_seeds_poison_windows_wrapping_ones_too():
    pool = 1 << 20
    wrapping = [s for s in range(400_000) if (s * 7919) % pool > pool - 4000][:4]
    seeds = [0, 1, 13, 2 ** 40 + 3, *wrapping]
    for shape, dtype in (((7, 143), np.int32), (3999, np.uint8), ((1,), np.uint8)):
        rows = poison_rows(shape, dtype, seeds)
        assert np.array_equal(rows, np.stack([poison(shape, dtype, s) for s in seeds]))


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
def test_a_batchs_requests_are_the_bytes_call_sends(source):
    """call_batch lays out many requests with numpy: each is, byte for byte, the request call() builds."""
    from lowp.emulator.qemu import _Rows
    ex = QemuExecutor(variant(source, "good"))
    m = ex.machine
    As, Bs = cases(6, (2, 3, 5))
    seeds = [0, 1, 64, 65, 1000, 7]
    C, W = poison_rows((2, 3), np.int32, seeds), poison_rows(64, np.uint8, [s + 1 for s in seeds])
    names = ["M", "N", "K", "A", "B", "C", "work"]
    template = m._request("bb_good_gemm", (2, 3, 5, As[0], Bs[0], C[0], W[0]), names, {}, None, (), 10.0, False)
    rows = _Rows(m, template, seeds, {"A": np.stack(As), "B": np.stack(Bs), "C": C, "work": W})
    for i, seed in enumerate(seeds):
        single = m._request("bb_good_gemm", (2, 3, 5, As[i], Bs[i], C[i], W[i]), names, {}, seed, (), 10.0, False)
        assert bytes(rows[i].data) == single.data and rows[i].reply_bytes == single.reply_bytes


# ---- faults: each is its own case's, the others get their C -------------------------------------------------------
FAULTS = {"overread": (OutOfBounds, "A"), "pastc": (OutOfBounds, "C"), "below": (OutOfBounds, "C")}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bug", sorted(FAULTS))
def test_a_fault_in_one_case_is_that_cases_and_the_others_get_their_c(backend, source, bug):
    k = variant(source, bug)
    As, Bs = cases(12, trigger_at=(0, 5, 11))
    seeds = list(range(100, 112))
    got = make(backend, k).run_many(As, Bs, seeds=seeds)
    assert_same(got, per_case(make(backend, k), As, Bs, seeds))
    kind, buffer = FAULTS[bug]
    for i, outcome in enumerate(got):
        if i in (0, 5, 11):
            assert isinstance(outcome, kind) and outcome.buffer == buffer, (i, outcome)
        else:
            assert np.array_equal(outcome, As[i].astype(np.int32) @ Bs[i].astype(np.int32)), i


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_kernel_that_changes_its_input_does_not_change_the_next_case(backend, source):
    """Every case's A is written afresh: the clobbered A[0] (= 77) of one case is not the next one's."""
    k = variant(source, "clobber")
    As, Bs = cases(6)
    got = make(backend, k).run_many(As, Bs, seeds=list(range(6)))
    for A, B, C in zip(As, Bs, got):
        assert np.array_equal(C, A.astype(np.int32) @ B.astype(np.int32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_kernel_that_keeps_state_gives_what_the_same_run_calls_give(backend, source):
    """Static data persists from case to case as from call to call: run_many is the run() sequence, and a
    fresh-state executor (what the engine compares with) sees the difference from the second case on."""
    k = variant(source, "stateful")
    As, Bs = cases(5)
    got = make(backend, k).run_many(As, Bs, seeds=list(range(5)))
    assert_same(got, per_case(make(backend, k), As, Bs, list(range(5))))
    for i, (A, B, C) in enumerate(zip(As, Bs, got)):
        fresh = make(backend, k).run(A, B, seed=i)
        assert np.array_equal(C, fresh + i)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_runaway_case_exhausts_its_own_budget(backend, source):
    k = variant(source, "spin")
    options = {"seconds": 0.5} if backend == "qemu" else {"budget": 200_000}
    As, Bs = cases(6, trigger_at=(2,))
    ex = make(backend, k, **options)
    got = ex.run_many(As, Bs, seeds=list(range(6)))
    assert isinstance(got[2], BudgetExceeded)
    for i in (0, 1):
        assert np.array_equal(got[i], As[i].astype(np.int32) @ Bs[i].astype(np.int32)), i
    # the rest are not run (each would cost the budget again, as the native batch stops too), and the machine
    # serves the next batch
    assert all(isinstance(got[i], BatchStopped) and "call 2" in str(got[i]) for i in (3, 4, 5))
    again = ex.run_many(As[3:], Bs[3:], seeds=[3, 4, 5])
    assert all(np.array_equal(C, A.astype(np.int32) @ B.astype(np.int32)) for C, A, B in zip(again, As[3:], Bs[3:]))


def test_without_a_machine_budget_a_runaway_case_stops_at_its_work_budget(source):
    """No budget in the machine's options: a case's budget follows from its size (work_budget), so the runaway
    case stops after 20 M instructions and some, not the machine's default 500 M; a deep case of the real SDOT
    kernel, well within its own budget, runs to the end; the default stays the cap."""
    from lowp.kernels.emulated import WORK_BUDGET_FLOOR, WORK_BUDGET_PER_MAC
    from lowp.emulator import DEFAULT_BUDGET
    spin = EmulatedExecutor(variant(source, "spin"))
    As, Bs = cases(2, trigger_at=(1,))
    got = spin.run_many(As, Bs, seeds=[0, 1])
    budget = spin.work_budget(3, 5, 7)["budget"]
    assert WORK_BUDGET_FLOOR < budget < WORK_BUDGET_FLOOR + 4096 * WORK_BUDGET_PER_MAC
    assert isinstance(got[1], BudgetExceeded) and got[1].budget == budget, got[1]
    sdot = EmulatedExecutor(kernel("sdot_s8_neon"))
    A, B = cases(1, shape=(16, 16, 2048))
    C = sdot.run(A[0], B[0], mnemonics=False)
    assert np.array_equal(C, A[0].astype(np.int32) @ B[0].astype(np.int32))
    assert sdot.work_budget(512, 512, 4096) == {"budget": DEFAULT_BUDGET}
    assert EmulatedExecutor(kernel("sdot_s8_neon"), budget=1000).work_budget(1, 1, 1) == {}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_case_that_kills_the_guest_is_that_cases_and_the_rest_run_on_a_new_one(backend, source):
    k = variant(source, "die")
    As, Bs = cases(8, trigger_at=(3, 6))
    ex = make(backend, k)
    got = ex.run_many(As, Bs, seeds=list(range(8)))
    expected = QemuDied if backend == "qemu" else Trap
    assert [i for i, o in enumerate(got) if isinstance(o, BaseException)] == [3, 6]
    assert all(isinstance(got[i], expected) for i in (3, 6))
    for i in (0, 1, 2, 4, 5, 7):
        assert np.array_equal(got[i], As[i].astype(np.int32) @ Bs[i].astype(np.int32)), i
    if backend == "qemu":
        assert ex.machine.restarts == 2


def test_a_guest_that_does_not_answer_is_killed_and_the_batch_stops(source):
    """Signals blocked, then a runaway loop: the guest's timer cannot stop it; the host kills the process after
    the budget and the grace, that case is BudgetExceeded, the rest of the batch is not run, and the next batch
    runs on a new process."""
    if unavailable():
        pytest.skip(unavailable())
    deaf = KERNELS.replace("if (A[0] == TRIGGER) for (;;)", "if (A[0] == TRIGGER) deaf(); if (0) for (;;)")
    deaf = deaf.replace("WORKSPACE(bb_spin)", r"""
static void deaf(void) {
    unsigned long all = ~0ul;
    register long x8 __asm__("x8") = 135;
    register long x0 __asm__("x0") = 0, x1 __asm__("x1") = (long)&all, x2 __asm__("x2") = 0, x3 __asm__("x3") = 8;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
    for (;;) __asm__ volatile("");
}
WORKSPACE(bb_spin)""")
    path = source.parent / "deaf.c"
    path.write_text(deaf)
    ex = QemuExecutor(variant(path, "spin"), seconds=0.3, grace=0.5)
    As, Bs = cases(4, trigger_at=(1,))
    got = ex.run_many(As, Bs, seeds=list(range(4)))
    assert isinstance(got[1], BudgetExceeded) and "did not answer" in str(got[1])
    assert np.array_equal(got[0], As[0].astype(np.int32) @ Bs[0].astype(np.int32))
    assert all(isinstance(got[i], BatchStopped) for i in (2, 3))
    again = ex.run_many(As[2:], Bs[2:], seeds=[2, 3])          # on a new process
    assert all(np.array_equal(C, A.astype(np.int32) @ B.astype(np.int32)) for C, A, B in zip(again, As[2:], Bs[2:]))


# ---- the interface -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_operands_are_that_cases_and_one_shape_per_batch(backend):
    k = kernel("sdot_s8_neon")
    As, Bs = cases(3)
    As[1] = As[1].astype(np.int16)
    got = make(backend, k).run_many(As, Bs, seeds=[0, 1, 2])
    assert isinstance(got[1], ValueError) and "dtype" in str(got[1])
    assert isinstance(got[0], np.ndarray) and isinstance(got[2], np.ndarray)
    with pytest.raises(ValueError, match="one \\(M, N, K\\)"):
        make(backend, k).run_many([As[0], As[0][:2]], [Bs[0], Bs[0]], seeds=[0, 1])
    assert make(backend, k).run_many([], [], seeds=[]) == []


def test_no_qemu_is_the_batchs_failure_not_its_cases(monkeypatch):
    k = kernel("sdot_s8_neon")
    ex = QemuExecutor(k)
    monkeypatch.setattr(type(ex.target), "unavailable", lambda self: "qemu-aarch64 is not installed (test)")
    with pytest.raises(EmulatorError, match="not installed"):
        ex.run_many(*cases(2), seeds=[0, 1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_bench_cases_per_second_runs_and_counts(backend):
    rate = bench_cases_per_second(kernel("sdot_s8_neon"), 200, seed=1, backend=backend, batch=50)
    assert rate > 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_quantized_kernel_runs_case_by_case_with_each_cases_parameters(backend):
    """An XNNPACK-ABI kernel stays per case (several ukernel calls a case): run_many is run() with each case's
    `options` (its quant here)."""
    from pathlib import Path

    import lowp.kernels
    toml = Path(lowp.kernels.__file__).parent / "quantized" / "aarch64.toml"
    with registered(toml) as kernels:
        _quantized_case_by_case(backend, kernels["xnn_qs8_rndnu_4x8_neon_mlal_lane"])


def _quantized_case_by_case(backend, k):
    from lowp.conformance.search import quantized
    rng = np.random.default_rng(3)
    As = [rng.integers(-128, 128, (5, 13), dtype=np.int8) for _ in range(3)]
    Bs = [rng.integers(-128, 128, (13, 11), dtype=np.int8) for _ in range(3)]
    quants = [quantized.draw_params(k, A, B, i, "typical") for i, (A, B) in enumerate(zip(As, Bs))]
    got = make(backend, k).run_many(As, Bs, seeds=[0, 1, 2], options=[{"quant": q} for q in quants])
    single = make(backend, k)
    for i, (A, B, q) in enumerate(zip(As, Bs, quants)):
        assert np.array_equal(got[i], single.run(A, B, seed=i, quant=q))
    missing = make(backend, k).run_many(As[:1], Bs[:1], seeds=[0])
    assert isinstance(missing[0], ValueError) and "quantization parameters" in str(missing[0])


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
def test_a_batch_longer_than_the_pipes_hold_survives_deaths_in_its_middle(source):
    """1,500 requests of ~1.6 KiB fill the 1 MiB pipes twice over: the guest dies at cases 400 and 1100, with
    requests written past them; each death is its case's, and every other case gets its C."""
    ex = QemuExecutor(variant(source, "die"))
    As, Bs = cases(1500, (2, 3, 4), trigger_at=(400, 1100))
    got = ex.run_many(As, Bs, seeds=list(range(1500)))
    assert [i for i, o in enumerate(got) if isinstance(o, BaseException)] == [400, 1100]
    assert all(isinstance(got[i], QemuDied) for i in (400, 1100))
    expected = np.einsum("imk,ikn->imn", np.stack(As).astype(np.int32), np.stack(Bs).astype(np.int32))
    assert all(np.array_equal(got[i], expected[i]) for i in range(1500) if i not in (400, 1100))


def test_bochs_runs_a_batch_call_by_call_with_the_same_outcomes():
    """Bochs stays one call at a time (BochsMachine.call_many is call() in a loop): the same outcomes as run()."""
    from lowp.emulator.x86.bochs import unavailable as bochs_unavailable
    from lowp.kernels import executor
    if bochs_unavailable():
        pytest.skip(bochs_unavailable())
    k = kernel("u8s8s32_avx512vnni")
    rng = np.random.default_rng(5)
    As = [rng.integers(0, 256, (3, 9), dtype=np.uint8) for _ in range(3)]
    Bs = [rng.integers(-128, 128, (9, 5), dtype=np.int8) for _ in range(3)]
    got = executor(k, "bochs").run_many(As, Bs, seeds=[4, 5, 6])
    assert_same(got, per_case(executor(k, "bochs"), As, Bs, [4, 5, 6]))
