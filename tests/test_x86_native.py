"""The x86 models proven against this CPU's own instructions: corners, the seeds' examples, hypothesis-drawn
registers, and VPMADDUBSW over all 2^32 pair inputs. An intrinsic the CPU lacks is skipped with the reason."""
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from lowp.isa_models import intrinsic, intrinsics
from lowp.isa_models.verify import proof
from tests.conftest import registers_for

pytestmark = pytest.mark.native
X86 = intrinsics("x86")


def runnable(native, intr):
    reason = native.unavailable(intr)
    if reason:
        pytest.skip(f"{intr.name}: {reason}")


@pytest.mark.parametrize("intr", X86, ids=lambda i: i.name)
def test_corners_and_examples_match_the_cpu(native, intr):
    runnable(native, intr)
    verdict = proof.verify(intr, native, random_registers=256)
    assert verdict.status == "verified", str(verdict.disagreement)
    assert verdict.registers >= 256


@pytest.mark.parametrize("intr", X86, ids=lambda i: i.name)
def test_hypothesis_registers_match_the_cpu(native, intr):
    runnable(native, intr)

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(registers_for(intr))
    def check(args):
        actual = native.run(intr, args)
        expected = intr(*args)
        assert np.array_equal(expected, actual), str(proof.first_disagreement(intr, args, expected, actual))
    check()


def test_hypothesis_registers_catch_a_madd_that_wraps_its_corner(native):
    """The drawn registers reach VPMADDWD's one overflowing input, a pair of -32768 * -32768 (2^31 wraps to
    -2^31): a model wrong only there is refuted by the CPU within the 40 examples (lanes_of repeats a drawn
    pattern across the register, so a pair of extremes is as likely as one)."""
    intr = intrinsic("_mm256_madd_epi16")
    runnable(native, intr)

    def wrong(*args):
        out = intr(*args)
        return np.where(out == np.iinfo(np.int32).min, np.int32(0), out)

    @settings(max_examples=40, deadline=None, derandomize=True, database=None)
    @given(registers_for(intr))
    def check(args):
        assert np.array_equal(wrong(*args), native.run(intr, args))
    with pytest.raises(AssertionError):
        check()


def test_seed002_example_on_the_cpu(native):
    intr = intrinsic("_mm_maddubs_epi16")
    runnable(native, intr)
    a = np.array([[255, 255, 0, 0] * 4], np.uint8)
    b = np.array([[127, 127, 0, 0] * 4], np.int8)
    assert native.run(intr, [a, b])[0, 0] == 32767


def test_native_catches_a_wrong_model(native):
    """The proof can fail: a model that wraps instead of saturating is refuted by the CPU with the input."""
    intr = intrinsic("_mm_maddubs_epi16")
    runnable(native, intr)
    args = proof.stack(proof.corner_batch(intr), intr)
    wrong = ((args[0].astype(np.int32) * args[1]).reshape(-1, 8, 2).sum(-1)).astype(np.int16)
    bad = proof.first_disagreement(intr, args, wrong, native.run(intr, args))
    assert bad is not None and "disagree" in str(bad)


def test_feature_switch_skips_with_the_reason(monkeypatch):
    from lowp.emulator.x86.native import NativeUnavailable, NativeX86
    monkeypatch.setenv("LOWP_DISABLE_FEATURES", "avx512bw")
    try:
        backend = NativeX86(intrinsics("x86")[:4])
    except NativeUnavailable as e:
        pytest.skip(str(e))
    assert backend.unavailable(intrinsic("_mm512_maddubs_epi16")) == "CPU lacks avx512bw"


def test_wrappers_execute_the_instruction_they_are_named_for(native):
    """The compiler may not substitute another instruction: disassemble every wrapper and find its mnemonic.
    capstone 5 cannot decode the VEX (AVX-VNNI) forms; those bytes are read with binutils' objdump instead."""
    capstone = pytest.importorskip("capstone")
    from elftools.elf.elffile import ELFFile
    with open(native.library_path, "rb") as f:
        elf = ELFFile(f)
        text = elf.get_section_by_name(".text")
        code, base = text.data(), text["sh_addr"]
        symbols = {s.name: (s["st_value"], s["st_size"]) for s in elf.get_section_by_name(".symtab").iter_symbols()}
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    md.skipdata = True
    missing, undecoded = [], []
    for intr in X86:
        addr, size = symbols[f"lowp_{intr.name}"]
        mnemonics = {i.mnemonic for i in md.disasm(code[addr - base: addr - base + size], addr)}
        want = {intr.mnemonic, intr.mnemonic.removeprefix("v")} if intr.encoding in ("legacy", "mmx") else {intr.mnemonic}
        if size <= 16 or want & mnemonics:  # size <= 16: the 'compiler cannot emit' stub
            continue
        (undecoded if ".byte" in mnemonics else missing).append(intr)
    assert not missing, [f"{i.name} has no {i.mnemonic}" for i in missing]
    if undecoded:
        dump = subprocess.run(["objdump", "-d", str(native.library_path)], capture_output=True, text=True).stdout
        for intr in undecoded:
            body = dump.split(f"<lowp_{intr.name}>:", 1)[1].split("\n\n", 1)[0]
            assert f"{intr.mnemonic} " in body, f"{intr.name} has no {intr.mnemonic}"


@pytest.mark.slow
def test_vpmaddubsw_exhaustively_over_all_pair_inputs(native):
    """All 2^32 (a0, a1, b0, b1): 256 slices of 2^24 pairs, CPU against model."""
    intr = proof.pick_exhaustive(native)
    if intr is None:
        pytest.skip("CPU has no SSSE3")
    result = proof.exhaustive_vpmaddubsw(native, intr)
    assert result.disagreement is None, str(result.disagreement)
    assert result.cases == 2 ** 32 and result.a0_values == list(range(256))


def test_cli_verify_passes_and_lists_skips():
    done = subprocess.run([sys.executable, "-m", "lowp", "isa", "verify", "vpmaddubsw", "vpdpbssd", "--registers", "64"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "_mm512_maddubs_epi16" in done.stdout and "intrinsics executed and compared" in done.stdout
