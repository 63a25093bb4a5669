"""The guest batch driver and its runner (lowp.emulator.qemu_batch), which the three qemu intrinsic backends share:
a batch round-trips through one long-lived process per -cpu, a crash or a hang is an error naming the wrapper
and the batch and the next batch starts a new process, and a missing qemu says how to install it."""
import numpy as np
import pytest

from lowp.emulator import qemu_batch as batch
from lowp.emulator.build import Binary
from lowp.emulator.errors import EmulatorError

# Two inputs (bytes, int32 per register), two outputs: out = a + b + imm per register and its low byte doubled.
# imm 99 traps, imm 98 never returns: what a broken wrapper does.
WRAPPERS = r"""
#include <stdint.h>
void lowp_t_add(const void *a, const void *b, void *out, void *low, long imm, long n) {
    if (imm == 99) __builtin_trap();
    while (imm == 98) __asm__ volatile("" ::: "memory");
    for (long i = 0; i < n; i++) {
        int32_t r = ((const uint8_t *)a)[i] + ((const int32_t *)b)[i] + (int32_t)imm;
        ((int32_t *)out)[i] = r;
        ((uint8_t *)low)[i] = (uint8_t)(2 * r);
    }
}
void lowp_t_nothing(const void *a, const void *b, void *out, void *low, long imm, long n) {
    (void)a; (void)b; (void)out; (void)low; (void)imm; (void)n;
}
"""
TARGETS = {"linux": ("qemu-aarch64", "LOWP_QEMU_AARCH64"), "riscv64-linux": ("qemu-riscv64", "LOWP_QEMU_RISCV64")}


@pytest.fixture(scope="module", params=list(TARGETS))
def guest(request):
    qemu = batch.qemu_path(*TARGETS[request.param])
    if qemu is None:
        pytest.skip(batch.not_installed(TARGETS[request.param][0]))
    prog = batch.program(WRAPPERS, ("add", "nothing"), "lowp_t_", inputs=2, outputs=2, name="batch-test",
                         target=request.param)
    return qemu, prog


def cpu(prog):
    """The program is built for zig's baseline_rv64+v: the driver's loops may use V."""
    return "max" if prog.qemu == "qemu-aarch64" else "rv64,v=true,vlen=128,elen=64,vext_spec=v1.0"


def add(qemu, prog, a, b, imm=0, **kwargs):
    return batch.run(qemu, cpu(prog), prog, "add", inputs=[a, b], outputs=[(np.int32, ()), (np.uint8, ())],
                     imm=imm, **kwargs)


def test_a_batch_round_trips_and_the_process_serves_the_next(guest):
    qemu, prog = guest
    rng = np.random.default_rng(1)
    pids = set()
    for imm in (0, -7, 1 << 40):
        a = rng.integers(0, 256, 1000, dtype=np.uint8)
        b = rng.integers(-2**31, 2**31, 1000, dtype=np.int64).astype(np.int32)
        out, low = add(qemu, prog, a, b, imm)
        want = (a.astype(np.int64) + b + imm).astype(np.int32)
        assert np.array_equal(out, want) and np.array_equal(low, (2 * want).astype(np.uint8))
        pids.add(batch._process(qemu, cpu(prog), prog).proc.pid)
    assert len(pids) == 1


def test_a_batch_larger_than_the_arena_goes_in_chunks(guest, monkeypatch):
    qemu, prog = guest
    monkeypatch.setattr(batch, "ARENA", batch.SLOTS * batch.ALIGN + 9 * 100)   # 100 registers of 9 bytes a chunk
    a = np.arange(1234, dtype=np.int64).astype(np.uint8)
    b = np.arange(1234, dtype=np.int32) * 1000
    out, _ = add(qemu, prog, a, b)
    assert np.array_equal(out, a.astype(np.int32) + b)


def test_outputs_start_zeroed(guest):
    qemu, prog = guest
    add(qemu, prog, np.full(8, 5, np.uint8), np.full(8, 5, np.int32))
    out, low = batch.run(qemu, cpu(prog), prog, "nothing",
                         inputs=[np.zeros(8, np.uint8), None], outputs=[(np.int32, ()), (np.uint8, ())])
    assert not out.any() and not low.any()


def test_a_crash_names_the_wrapper_and_the_batch_and_the_next_batch_runs(guest):
    qemu, prog = guest
    a, b = np.zeros(300, np.uint8), np.zeros(300, np.int32)
    with pytest.raises(EmulatorError, match=r"running add on registers 0\.\.299 of a batch of 300 \(imm=99\).*"
                                            r"killed by SIG(TRAP|ILL)"):
        add(qemu, prog, a, b, 99)
    assert add(qemu, prog, a, b, 3)[0].tolist() == [3] * 300


def test_a_hang_is_killed_and_named(guest):
    qemu, prog = guest
    with pytest.raises(EmulatorError, match=r"running add .*\(imm=98\): did not answer within 0\.5 s"):
        add(qemu, prog, np.zeros(1, np.uint8), np.zeros(1, np.int32), 98, timeout=0.5)
    assert add(qemu, prog, np.ones(2, np.uint8), np.ones(2, np.int32))[0].tolist() == [2, 2]


def test_bad_requests_are_refused_on_the_host(guest):
    qemu, prog = guest
    with pytest.raises(EmulatorError, match="no wrapper"):
        batch.run(qemu, "max", prog, "sub", inputs=[None, None], outputs=[])
    with pytest.raises(ValueError, match="2 inputs and 2 outputs"):
        batch.run(qemu, "max", prog, "add", inputs=[np.zeros(1, np.uint8)], outputs=[(np.int32, ())])
    with pytest.raises(ValueError, match="different batch sizes"):
        add(qemu, prog, np.zeros(2, np.uint8), np.zeros(3, np.int32))


def test_a_missing_qemu_says_how_to_install_it(tmp_path):
    class Backend(batch.BatchBackend):
        target, build_name, inputs, outputs = "riscv64-linux", "batch-test", 2, 2

    b = Backend([], qemu=None)
    b.qemu = None
    assert b.missing_qemu() == "qemu-riscv64 not installed (Debian: apt-get install qemu-user)"
    with pytest.raises(EmulatorError, match="apt-get install qemu-user"):
        b.batch("rv64", "add", [None, None], [])
    prog = batch.Program(Binary(tmp_path / "add.elf", "riscv64-linux"), ("add",), 2, 0)
    with pytest.raises(EmulatorError, match=f"cannot start {tmp_path / 'qemu-riscv64'}"):
        batch.run(str(tmp_path / "qemu-riscv64"), "rv64", prog, "add", inputs=[np.zeros(1, np.uint8), None],
                  outputs=[])
