"""The qemu-user kernel executor (lowp.emulator.qemu, lowp.kernels.emulated.QemuExecutor): one long-lived
qemu-aarch64 -cpu max process per executor, guard pages and canaries inside the guest, faults caught by the guest's
signal handler. Judged against the Unicorn executor on the registry's AArch64 kernels (same C, same instruction
counts), and on small programs whose faults are known by construction."""
from __future__ import annotations

import dataclasses
import os
import signal
from pathlib import Path

import numpy as np
import pytest

import lowp.kernels
from lowp.emulator import Machine, OutOfBounds, Trap, UndefinedInstruction, build
from lowp.emulator.errors import BudgetExceeded
from lowp.emulator.errors import EmulatorError
from lowp.emulator.qemu import AARCH64 as GUEST, LOG_IDLE, QemuDied, QemuMachine, build_for_qemu, cpu_features, \
    plugin_unavailable, unavailable
from lowp.emulator.qemu_batch import identify
from lowp.kernels import executor, kernel, kernels, load_toml
from lowp.kernels.emulated import EmulatedExecutor, QemuExecutor
from lowp.kernels.executors import BACKEND_ENV, aarch64_backend
from lowp.kernels.schema import KernelConfigError

pytestmark = pytest.mark.emulated
needs_qemu = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))

FAULTS = r"""
#include <stdint.h>
int64_t read_at(const int8_t *p, int64_t i) { return p[i]; }
void write_at(int8_t *p, int64_t i, int64_t v) { p[i] = (int8_t)v; }
int64_t load16(const int8_t *p, int64_t i) {
    int64_t a, b;
    __asm__ volatile("ldp %0, %1, [%2]" : "=r"(a), "=r"(b) : "r"(p + i) : "memory");
    return a ^ b;
}
void spin(void) { __asm__ volatile("1: b 1b"); }
void undefined(void) { __asm__ volatile(".inst 0x00000000"); }     /* UDF #0 */
void trap(void) { __builtin_trap(); }
void die(void) {                                                   /* exit_group(3): the guest ends mid-call */
    register long x8 __asm__("x8") = 94;
    register long x0 __asm__("x0") = 3;
    __asm__ volatile("svc #0" : : "r"(x8), "r"(x0));
}
int64_t vector_bytes(void) {                                       /* SVE: RDVL, the vector length in bytes */
    int64_t x;
    __asm__ volatile(".arch_extension sve\n\trdvl %0, #1" : "=r"(x));
    return x;
}
void deaf(void) {                        /* every signal blocked (rt_sigprocmask), then a runaway loop */
    unsigned long all = ~0ul;
    register long x8 __asm__("x8") = 135;
    register long x0 __asm__("x0") = 0, x1 __asm__("x1") = (long)&all, x2 __asm__("x2") = 0, x3 __asm__("x3") = 8;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
    for (;;) __asm__ volatile("");
}
int64_t x20(void) { int64_t x; __asm__ volatile("mov %0, x20" : "=r"(x)); return x; }
int64_t many(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e, int64_t f, int64_t g, int64_t h, int64_t i,
             int64_t j, const int8_t *p) { return a + 2*b + 3*c + 4*d + 5*e + 6*f + 7*g + 8*h + 9*i + 10*j + p[0]; }
"""


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    source = tmp_path_factory.mktemp("qemu") / "faults.c"
    source.write_text(FAULTS)
    return source


@pytest.fixture
def qemu(faults):
    if unavailable():
        pytest.skip(unavailable())
    with QemuMachine(build_for_qemu(faults), seconds=1.0) as m:
        yield m


@pytest.fixture(scope="module")
def unicorn(faults):
    return Machine(build(faults))


def operands(k, m, n, depth, seed):
    rng = np.random.default_rng(seed)
    (alo, ahi), (blo, bhi) = k.domain.a, k.domain.b
    return (rng.integers(alo, ahi, (m, depth), endpoint=True).astype(k.a_dtype),
            rng.integers(blo, bhi, (depth, n), endpoint=True).astype(k.b_dtype))


# ---- the registry's kernels: qemu computes what Unicorn computes -------------------------------------------------
AARCH64 = [k.name for k in kernels("aarch64") if not k.quantized]


@needs_qemu
@pytest.mark.parametrize("name", AARCH64)
def test_same_results_as_unicorn(name):
    k = kernel(name)
    q, u = QemuExecutor(k), EmulatedExecutor(k)
    for reason in (q.unavailable(), u.unavailable()):
        if reason:
            pytest.skip(f"{name}: {reason}")
    pid = None          # the process of the first counted run (without the plugin loader the exec log starts there)
    t = k.tile
    for i, (m, n, depth) in enumerate([(1, 1, 1), (t.mr + 1, t.nr + 3, 4 * t.kr + 1), (2 * t.mr, 2 * t.nr, 64)]):
        A, B = operands(k, m, n, depth, i)
        C = q.run(A, B, seed=i, mnemonics=True)
        pid = pid or q.machine.pid
        assert np.array_equal(C, u.run(A, B, seed=i, mnemonics=True)), (name, m, n, depth)
        assert np.array_equal(C, k.predict(A, B))
        # the same build flags, the same code: the same executed instructions, mnemonic by mnemonic
        assert q.last.mnemonics == u.last.mnemonics and q.last.instructions == u.last.instructions > 0
    assert q.machine.pid == pid


@needs_qemu
def test_quantized_xnnpack_kernel_same_as_unicorn():
    from lowp.conformance.search import quantized
    from lowp.kernels.registry import _KERNELS
    toml = Path(lowp.kernels.__file__).parent / "quantized" / "aarch64.toml"
    loaded = {k.name: k for k in load_toml(toml)} if "xnn_qs8_rndnu_4x8_neon_mlal_lane" not in _KERNELS else _KERNELS
    k = loaded["xnn_qs8_rndnu_4x8_neon_mlal_lane"]
    A, B = operands(k, 5, 11, 13, 7)
    params = quantized.draw_params(k, A, B, 3, "typical")
    C = QemuExecutor(k).run(A, B, seed=3, quant=params)
    assert np.array_equal(C, EmulatedExecutor(k).run(A, B, seed=3, quant=params))
    assert np.array_equal(C, k.predict(A, B, params))


@needs_qemu
def test_i8mm_kernel_runs_on_qemus_smmla_not_lowps_model():
    """SMMLA (FEAT_I8MM): Unicorn 2.1.4 lacks it and runs lowp's model in its place; qemu 7.2 executes it."""
    k = kernel("smmla_s8_neon")
    assert "i8mm" in cpu_features()
    q = QemuExecutor(k)
    A, B = operands(k, 9, 7, 41, 1)
    A[0, :8], B[:8, 0] = -128, -128             # the extreme products, in one SMMLA block
    C = q.run(A, B, mnemonics=True)
    assert np.array_equal(C, A.astype(np.int64) @ B.astype(np.int64))
    assert q.last.mnemonics.get("smmla", 0) > 0 and q.last.modeled == {}
    u = EmulatedExecutor(k)
    assert np.array_equal(C, u.run(A, B, mnemonics=True)) and u.last.modeled.get("smmla", 0) > 0


# ---- faults ------------------------------------------------------------------------------------------------------
@needs_qemu
@pytest.mark.parametrize("call, buffer, offset", [(("read_at", 10), "A", 10), (("read_at", -4090), "A", -4090),
                                                  (("load16", 0), "A", 10), (("load16", 4), "A", 10)])
def test_out_of_bounds_read_names_buffer_and_offset(qemu, unicorn, call, buffer, offset):
    symbol, i = call
    A = np.arange(10, dtype=np.int8)
    with pytest.raises(OutOfBounds) as e:
        qemu.call(symbol, A, i, names=["A", "i"])
    assert (e.value.buffer, e.value.offset, e.value.access) == (buffer, offset, "read")
    assert e.value.pc in range(qemu.binary.symbol(symbol), qemu.binary.symbol(symbol) + 64)
    assert e.value.instruction.startswith(("ldrsb", "ldp"))
    if offset > 0:       # (below the start, Unicorn 2.1.4 reports an address in no buffer: 0xfffff7fc here)
        with pytest.raises(OutOfBounds) as same:
            unicorn.call(symbol, A, i, names=["A", "i"])
        assert str(same.value).split("; by ")[0] == str(e.value).split("; by ")[0]


@needs_qemu
def test_read_within_the_allowed_overread_passes_and_past_it_faults(qemu):
    A = np.arange(10, dtype=np.int8)
    assert qemu.call("read_at", A, 15, names=["A", "i"], overread={"A": 6}).ret == -0x5B     # the canary, 0xA5
    with pytest.raises(OutOfBounds) as e:
        qemu.call("read_at", A, 16, names=["A", "i"], overread={"A": 6})
    assert (e.value.offset, e.value.past_end) == (16, 6) and "beyond the 6 bytes of over-read" in str(e.value)


@needs_qemu
@pytest.mark.parametrize("i", [12, -1])
def test_writes_into_the_overread_or_below_the_start_are_caught_by_canaries(qemu, i):
    A = np.arange(10, dtype=np.int8)
    with pytest.raises(OutOfBounds) as e:
        qemu.call("write_at", A, i, 7, names=["A", "i", "v"], overread={"A": 8})
    assert (e.value.buffer, e.value.offset, e.value.access) == ("A", i, "write")
    assert "canary" in str(e.value)
    assert e.value.result["A"].tolist() == list(range(10))      # the buffer itself as the kernel left it


@needs_qemu
def test_undefined_instruction_is_sigill_with_pc_and_disassembly(qemu):
    with pytest.raises(UndefinedInstruction) as e:
        qemu.call("undefined")
    assert e.value.encoding == 0 and e.value.instruction == "udf #0"
    assert qemu.binary.symbol("undefined") <= e.value.pc < qemu.binary.symbol("undefined") + 16
    with pytest.raises(Trap) as t:
        qemu.call("trap")
    assert t.value.kind == "brk" and t.value.instruction.startswith("brk")


@needs_qemu
def test_runaway_loop_stops_at_the_budget_and_the_process_serves_on(qemu):
    pid = qemu.pid
    with pytest.raises(BudgetExceeded) as e:
        qemu.call("spin", seconds=0.3)
    assert e.value.pc == qemu.binary.symbol("spin") and e.value.budget == 0.3
    assert qemu.call("read_at", np.arange(5, dtype=np.int8), 4).ret == 4
    assert qemu.pid == pid and qemu.restarts == 0


@needs_qemu
def test_a_guest_that_dies_names_the_call_and_the_next_call_restarts(qemu):
    first = qemu.pid
    with pytest.raises(QemuDied) as e:
        qemu.call("die")
    assert "calling die()" in str(e.value) and "exit status 3" in str(e.value)
    assert qemu.call("read_at", np.arange(5, dtype=np.int8), 2).ret == 2
    assert qemu.pid != first and qemu.restarts == 1
    os.kill(qemu.pid, signal.SIGKILL)            # killed from outside between calls: the next call restarts it
    qemu._proc.wait()
    assert qemu.call("read_at", np.arange(5, dtype=np.int8), 3).ret == 3 and qemu.restarts == 2


@needs_qemu
def test_a_guest_that_hangs_is_killed_by_the_host_and_restarted(faults):
    with QemuMachine(build_for_qemu(faults), seconds=0.2, grace=0.5) as m:
        first = m.pid
        with pytest.raises(BudgetExceeded) as e:
            m.call("deaf")
        assert "did not answer within 0.7 s while calling deaf()" in str(e.value) and e.value.budget == 0.2
        assert m.call("read_at", np.arange(5, dtype=np.int8), 1).ret == 1 and m.pid != first and m.restarts == 1


@needs_qemu
def test_one_process_serves_many_calls_with_fresh_buffers(qemu):
    pid = qemu.pid
    rng = np.random.default_rng(0)
    for n in rng.integers(1, 9000, 200).tolist():
        A = rng.integers(-128, 128, n).astype(np.int8)
        i = int(rng.integers(0, n))
        assert qemu.call("read_at", A, i).ret == A[i]
    assert qemu.pid == pid and qemu.restarts == 0


@needs_qemu
def test_seeded_registers_and_stack_arguments_as_unicorn(qemu, unicorn):
    for seed in (0, 1, 63, 64):
        assert qemu.call("x20", seed=seed).ret == unicorn.call("x20", seed=seed).ret
    args = (*range(1, 11), np.array([5], np.int8))
    assert qemu.call("many", *args).ret == unicorn.call("many", *args).ret == 390


@needs_qemu
def test_an_sve_instruction_runs_on_qemu_and_is_undefined_in_unicorn(qemu, unicorn):
    assert "sve" in cpu_features()
    r = qemu.call("vector_bytes", mnemonics=True)
    assert r.ret % 16 == 0 and 16 <= r.ret <= 256 and r.mnemonics.get("rdvl") == 1
    with pytest.raises(UndefinedInstruction):
        unicorn.call("vector_bytes")


# ---- which qemu, and counting without the plugin ----------------------------------------------------------------
def test_a_qemu_says_its_version_and_whether_it_loads_plugins(tmp_path):
    fake = tmp_path / "qemu-aarch64"
    fake.write_text("#!/bin/sh\n[ \"$1\" = --version ] && echo 'qemu-aarch64 version 9.2.1 (Debian 1:9.2.1)'\n"
                    "[ \"$1\" = -h ] && echo '-plugin [file=]<file>[,<argname>=<argvalue>]'\nexit 0\n")
    fake.chmod(0o755)
    who = identify(str(fake))
    assert (who.name, who.version, who.plugins) == ("qemu-aarch64", (9, 2, 1), True)
    assert str(who) == f"qemu-aarch64 9.2.1 ({fake})" and who.at_least(9) and not who.at_least(10)
    missing = identify(str(tmp_path / "nothing"))
    assert missing.version is None and not missing.plugins and "version unknown" in str(missing)


# Both formats the exec log comes in: qemu 7.2 (64-bit flags word) and 10.0 (32-bit), with a block translated
# before the call (only its in_asm listing precedes) and one line still being written.
LOGS = {"7.2": "[0000000001009331/{pc:016x}/00000001/00000200]", "10.0": "[81009331/{pc:016x}/00000001/00000200]"}


@pytest.mark.parametrize("version", list(LOGS))
def test_the_exec_log_gives_each_blocks_instructions_and_executions(tmp_path, version, faults):
    m = QemuMachine(build_for_qemu(faults), qemu="/nonexistent/qemu-aarch64")
    m._log = tmp_path / "log"
    trace = lambda pc: f"Trace 0: 0x7f0000000100 {LOGS[version].format(pc=pc)} f\n"      # noqa: E731
    m._log.write_text("----------------\nIN: f\n0x00401000:  d2800000  mov x0, #0\n0x00401004:  d65f03c0  ret\n\n"
                      + trace(0x401000))
    assert m._read_log() == {0x401000: 1}                     # before the call: read, then counted no more
    with open(m._log, "a") as f:
        f.write("----------------\nIN: g\n0x00402000:  91000400  add x0, x0, #1\n\n" + trace(0x402000)
                + trace(0x401000) + trace(0x402000) + "Trace 0: 0x7f00")
    assert m._read_log() == {0x402000: 2, 0x401000: 1} and m._tb == {0x401000: 2, 0x402000: 1}
    with open(m._log, "a") as f:                           # a listing cut by a read goes on in the next
        f.write("00000100 " + LOGS[version].format(pc=0x402000) + " g\n----------------\nIN: h\n"
                "0x00404000:  d2800000  mov x0, #0\n")
    assert m._read_log() == {0x402000: 1}
    with open(m._log, "a") as f:
        f.write("0x00404004:  d65f03c0  ret\n\n" + trace(0x404000))
    assert m._read_log() == {0x404000: 1} and m._tb[0x404000] == 2
    with open(m._log, "a") as f:
        f.write(trace(0x403000))
    with pytest.raises(EmulatorError, match="no in_asm listing of the block at 0x403000"):
        m._read_log()


@needs_qemu
def test_counts_come_from_the_plugin_or_the_exec_log_as_this_qemu_allows(faults):
    with QemuMachine(build_for_qemu(faults)) as m:
        way = m.counting()
        assert way == ("plugin" if identify(m.qemu).plugins and plugin_unavailable() is None else "log")
        r = m.call("read_at", np.arange(8, dtype=np.int8), 3, count=True, mnemonics=True)
        assert r.ret == 3 and r.instructions == sum(r.mnemonics.values()) > 0 and "ret" in r.mnemonics
        if way == "log":                       # the log runs from the first counted call; a run of uncounted
            counted = m.pid                    # calls restarts the process without it
            for _ in range(LOG_IDLE + 1):
                m.call("read_at", np.arange(8, dtype=np.int8), 1)
            assert m.pid != counted and m._log is None


# ---- choosing the backend ----------------------------------------------------------------------------------------
def test_backend_choice(monkeypatch):
    k = kernel("sdot_s8_neon")
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    assert aarch64_backend(k) == "unicorn" and type(executor(k)) is EmulatedExecutor
    assert type(executor(dataclasses.replace(k, backend="qemu"))) is QemuExecutor
    assert executor(k, "qemu").backend == "qemu"
    monkeypatch.setenv(BACKEND_ENV, "qemu")          # lowp conformance --backend qemu
    assert type(executor(k)) is QemuExecutor
    with pytest.raises(ValueError, match="unknown backend 'bochs'"):
        executor(k, "bochs")
    with pytest.raises(ValueError, match="x86-64 kernels run on native or bochs"):
        executor(kernel("u8s8s32_avx2"), "qemu")


@needs_qemu
def test_a_feature_unicorn_lacks_chooses_qemu(monkeypatch):
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    sve = dataclasses.replace(kernel("sdot_s8_neon"), features=("asimd", "sve"))
    assert aarch64_backend(sve) == "qemu"
    assert EmulatedExecutor(sve).unavailable() and QemuExecutor(sve).unavailable() is None
    sme2 = dataclasses.replace(sve, features=("sme2",))
    reason = QemuExecutor(sme2).unavailable()
    qemu = QemuExecutor(sme2).target.qemu_for(sme2.features)   # qemu 11 where it was fetched, else None: the default
    if "sme2" in cpu_features(qemu=qemu):                     # a qemu whose HWCAP2 says SME2
        assert reason is None
    else:                                                     # 7.2, 10.0: which one lacks it, by path and version
        assert reason.startswith(f"{identify(qemu or GUEST.path())} -cpu max lacks sme2")


def test_backend_in_a_toml_entry(tmp_path):
    base = Path(lowp.kernels.__file__).parent / "aarch64"
    entry = f"""
[[kernel]]
name = "{{name}}"
target = "{{target}}"
features = ["asimd"]
source = "{base / 'sdot_s8.c'}"
symbol = "lowp_sdot_s8_gemm"
signature = "gemm"
a_type = "s8"
b_type = "s8"
tile = {{{{ mr = 4, nr = 8, kr = 4 }}}}
packing = "p"
contract = "exact"
domain = {{{{ a = [-128, 127], b = [-128, 127] }}}}
model = "lowp.kernels.models.arm:sdot_gemm"
backend = "{{backend}}"
"""
    good = tmp_path / "good.toml"
    good.write_text(entry.format(name="qemu_sdot_test", target="aarch64", backend="qemu"))
    from lowp.kernels.registry import _KERNELS
    _KERNELS.pop("qemu_sdot_test", None)
    try:
        (k,) = load_toml(good)
        assert k.backend == "qemu" and type(executor(k)) is QemuExecutor
    finally:
        _KERNELS.pop("qemu_sdot_test", None)
    bad = tmp_path / "bad.toml"
    bad.write_text(entry.format(name="a", target="aarch64", backend="qemuu")
                   + entry.format(name="b", target="x86-64", backend="qemu").replace('"asimd"', '"avx2"'))
    with pytest.raises(KernelConfigError) as e:
        load_toml(bad)
    text = str(e.value)
    assert "qemuu" in text and "did you mean 'qemu'" in text and "an x86-64 kernel runs on 'native' or 'bochs'" in text


def test_unavailable_says_how_to_install(monkeypatch):
    import shutil
    monkeypatch.delenv("LOWP_QEMU_AARCH64", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    reason = QemuExecutor(kernel("sdot_s8_neon")).unavailable()
    assert "qemu-aarch64 is not installed" in reason and "apt-get install qemu-user" in reason


@needs_qemu
def test_a_process_holding_more_than_1024_files_still_runs_qemu_kernels():
    """A campaign's process held over a thousand files (wasmtime keeps a memfd per compiled module), and every qemu
    call then failed with select()'s "filedescriptor out of range": the guest's pipes are polled (qemu_batch.ready)."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the file limit here ({hard}) keeps a process below 1200 files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        k = kernel(AARCH64[0])
        q = QemuExecutor(k)
        if q.unavailable():
            pytest.skip(q.unavailable())
        A, B = operands(k, 3, 5, 7, 0)
        assert np.array_equal(q.run(A, B, seed=0), k.predict(A, B))
        assert q.machine._proc.stdout.fileno() > 1024         # the guest's pipes are where select() cannot go
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
