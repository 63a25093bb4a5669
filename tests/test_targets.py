"""The target seam (lowp.emulator.targets): one object per place kernels run, asked instead of if-chains."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lowp.emulator import Machine, build, targets
from lowp.emulator.aarch64.aapcs64 import Aapcs64
from lowp.emulator.errors import BuildError
from lowp.kernels.executors import executor, target_of
from lowp.kernels.registry import kernel


def test_every_target_is_registered_with_what_it_must_say():
    names = {t.name for t in targets.all_targets()}
    assert {"x86-64-native", "aarch64-unicorn", "aarch64-qemu", "riscv64-qemu"} <= names
    for t in targets.all_targets():
        assert t.arch in targets.arches() and t.backend and t.isa
        reason = t.unavailable()
        assert reason is None or isinstance(reason, str)


def test_recipes_come_from_the_targets():
    assert targets.recipe("bare").triple == "aarch64-freestanding"
    assert targets.recipe("riscv64-linux").elf_machine == "EM_RISCV"
    with pytest.raises(ValueError, match="expected one of .*bare.*got 'sparc'"):
        targets.recipe("sparc")
    with pytest.raises(ValueError, match="expected one of"):
        build("whatever.c", target="sparc")


def test_an_elf_of_another_machine_is_refused(tmp_path):
    src = tmp_path / "f.c"
    src.write_text("int f(int x) { return x + 1; }\nint main(void) { return 0; }\n")
    rv = build(src, target="riscv64-linux")
    assert rv.symbol("f")                                     # its own recipe's machine: fine
    with pytest.raises(BuildError, match="not an EM_AARCH64 ELF"):
        dataclasses.replace(rv, target="bare").symbols


def test_choice_prefers_a_target_that_runs_the_features_itself():
    unicorn, qemu = targets.find("aarch64", "unicorn"), targets.find("aarch64", "qemu")
    assert targets.choose("aarch64", ["asimddp"]) is unicorn
    if qemu.unavailable() is None:
        assert targets.choose("aarch64", ["i8mm"]) is qemu          # Unicorn has I8MM only through lowp's models
        assert targets.choose("aarch64", ["sve"], 256) is qemu
    else:
        assert targets.choose("aarch64", ["i8mm"]) is unicorn
    assert targets.choose("aarch64", ["i8mm"], backend="unicorn") is unicorn
    assert targets.choose("x86-64", ["avx2"]).backend == "native"
    assert targets.choose("x86-64", ["avx2"], backend="bochs").backend == "bochs"
    with pytest.raises(ValueError, match="x86-64 kernels run on native or bochs"):
        targets.choose("x86-64", [], backend="qemu")
    with pytest.raises(ValueError, match="unknown target 'mips'"):
        targets.choose("mips")


def test_a_new_target_is_one_registration_away(monkeypatch):
    """What docs/emulator.md's "How to add a target" promises: register it and executors and the isa verifier see it."""
    class Preferred(targets.Target):
        name, arch, isa, backend, preference = "aarch64-test", "aarch64", "aarch64", "unicorn-test", -1

        def features(self, vector_bits=None, **options):
            return frozenset({"asimd", "asimddp"})

        def machine(self, sources, **kw):
            return targets.find("aarch64", "unicorn").machine(sources, **kw)

        def intrinsic_backends(self):
            return ["a backend"]

    monkeypatch.setitem(targets._TARGETS, "aarch64-test", Preferred())
    k = kernel("sdot_s8_neon")
    assert target_of(k).name == "aarch64-test"
    ex = executor(k)
    assert ex.backend == "unicorn-test"
    A = np.arange(12, dtype=np.int8).reshape(3, 4)
    B = np.ones((4, 5), np.int8)
    assert np.array_equal(ex.run(A, B), A.astype(np.int32) @ B.astype(np.int32))
    from lowp.commands.isa import backends_for
    assert "a backend" in backends_for({"aarch64"})[0]["aarch64"]


def test_machine_asks_its_convention(monkeypatch):
    """Machine names no AArch64 register: the convention object passes the arguments and reads the result."""
    calls = []

    class Recording(Aapcs64):
        def pass_arguments(self, uc, values, stack_top, return_address):
            calls.append(list(values))
            super().pass_arguments(uc, values, stack_top, return_address)

    m = Machine(build_text_add(), convention=Recording())
    assert m.call("add3", 1, 2, 3).ret == 6 and calls == [[1, 2, 3]]


def build_text_add():
    from lowp.emulator import build_text
    return build_text("long add3(long a, long b, long c) { return a + b + c; }\n", name="add3")


def test_host_is_described_once():
    h = targets.host()
    env = h.environment()
    assert env["machine"] == h.machine and env["cpu"] == h.cpu_model
    if h.arch == "x86-64" and h.x86_error is None:
        assert "sse2" in h.x86_features and "sse2" in h.flags
        from lowp.emulator.x86.native import host_cpu_features
        assert host_cpu_features() == h.x86_features - targets.disabled_features()
