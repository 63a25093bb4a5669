"""lowp prove: built-in kernels PROVED at small shapes (on any x86-64 host: the proof executes no kernel code),
mutants REFUTED with a counterexample a real executor reproduces, memory violations REFUTED, an unmodelled
instruction UNKNOWN naming it, the local lemmas and their cache, the command and its reports."""
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest.importorskip("z3")

from lowp.cli import main  # noqa: E402
from lowp.conformance import prove as P  # noqa: E402
from lowp.kernels import load_toml  # noqa: E402
from lowp.kernels.registry import _KERNELS, kernel, kernels  # noqa: E402

MUTANTS = Path(P.__file__).parents[1] / "bench" / "mutation_suite" / "mutants.toml"
HERE = Path(__file__).parent

# Built-in kernels lowp prove does not prove yet, and why: each must stay UNKNOWN with this reason (a test fails
# when one starts to prove, so the list cannot go stale).
NOT_YET = {
    "u8s8s32_amx": "capstone cannot decode|does not model",     # AMX tiles: capstone 5, and no symbolic tile state
}


def _builtins(target):
    from lowp.kernels.registry import KERNELS_DIR, origin
    return sorted(k.name for k in kernels(target) if P.provable(k) is None
                  and KERNELS_DIR in Path(origin(k.name) or "/").parents)


def _x86_builtins():
    return _builtins("x86-64")


def _shapes(k):
    """A full tile and a tail in every dimension (the tester's edge cases)."""
    mr, nr, kr = min(k.tile.mr, 4), min(k.tile.nr, 16), k.tile.kr
    return [(mr, nr, 4 * kr), (mr + 1, nr + 1, 2 * kr + 3)]


@pytest.mark.parametrize("name", [n for n in _x86_builtins() if n not in NOT_YET])
def test_builtin_x86_kernel_proved(name):
    k = kernel(name)
    for shape in _shapes(k):
        proof = P.prove(k, shape, lemma_cache=False)
        assert proof.verdict == P.PROVED, proof.summary()
        assert proof.outputs == shape[0] * shape[1] and proof.steps > 0
        assert proof.variant == ("fbgemm-acc16" if k.contract == "fbgemm-acc16" else "exact")


@pytest.mark.parametrize("name", _builtins("aarch64"))
def test_builtin_aarch64_kernel_proved(name):
    """NEON SDOT, SMMLA, gemmlowp's SMULL+SMLAL+SADALP and seed 004's int16 SMLAL chains: on this x86 host."""
    k = kernel(name)
    for shape in _shapes(k):
        proof = P.prove(k, shape, lemma_cache=False)
        assert proof.verdict == P.PROVED and proof.variant == "exact", proof.summary()


def test_aarch64_full_domain_refuted_on_unicorn():
    """gemmlowp's kernel with -128 allowed in A: two (-128)^2 products wrap an int16 lane; Unicorn agrees."""
    proof = P.prove(kernel("gemmlowp_s8_neon"), (2, 2, 16), domain="full", lemma_cache=False)
    assert proof.verdict == P.REFUTED and "confirmed on unicorn" in proof.replay, proof.summary()
    assert proof.counterexample["matched"] == "int16-pair-wrap"


@pytest.mark.parametrize("name", sorted(NOT_YET))
def test_builtin_not_yet_proved_says_why(name):
    import re
    proof = P.prove(kernel(name), (2, 3, 8), lemma_cache=False, timeout=20)
    assert proof.verdict == P.UNKNOWN, proof.summary()
    assert re.search(NOT_YET[name], proof.summary()), proof.summary()


def test_full_domain_refuted_with_a_confirmed_counterexample():
    """u8 x s8 on VPMADDUBSW: the pair sum saturates. The refuted pair lemma gives the input; the CPU agrees."""
    k = kernel("u8s8s32_avx2")
    from lowp.kernels.executors import executor
    if executor(k).unavailable():
        pytest.skip("no executor for the replay here")
    proof = P.prove(k, (2, 3, 8), domain="full", lemma_cache=False)
    assert proof.verdict == P.REFUTED, proof.summary()
    cx = proof.counterexample
    i, j = cx["element"]
    assert cx["C"][i][j] != cx["expected"][i][j] and cx["matched"] == "pair-saturating"
    assert "confirmed on" in proof.replay
    assert any(not lm.proved for lm in proof.lemmas)


@pytest.fixture(scope="module")
def mutants():
    """The mutation suite's kernels: registered here unless another test of this process already did."""
    import tomllib
    from lowp.kernels.registry import _builtin
    _builtin()
    names = [e["name"] for e in tomllib.loads(MUTANTS.read_text())["kernel"]]
    ours = not any(n in _KERNELS for n in names)
    if ours:
        load_toml(MUTANTS)
    yield {n: kernel(n) for n in names}
    if ours:
        for n in names:
            _KERNELS.pop(n, None)


@pytest.mark.parametrize("name,shape,reason", [
    ("mut_x86_maddubs_m_tail", (5, 9, 11), "differs from exact"),
    ("mut_x86_vnni_c_accumulate", (4, 16, 16), "differs from exact"),
    ("mut_x86_scalar_a_signed", (4, 4, 16), "differs from exact"),
    ("mut_x86_maddubs_full_u8", (4, 8, 16), "leaves its range"),
    ("mut_x86_scalar_b_overread", (5, 5, 11), "load outside the buffers: B"),
    ("mut_x86_scalar_c_past", (4, 4, 16), "store outside the buffers: C"),
    ("mut_x86_scalar_work_short", (5, 5, 11), "store outside the buffers: work"),
])
def test_mutant_refuted_and_confirmed(mutants, name, shape, reason):
    from lowp.kernels.executors import executor
    k = mutants[name]
    if executor(k).unavailable():
        pytest.skip(f"no executor for the replay here: {executor(k).unavailable()}")
    proof = P.prove(k, shape, lemma_cache=False)
    assert proof.verdict == P.REFUTED, proof.summary()
    assert reason in proof.reason and "confirmed on" in proof.replay, proof.summary()


@pytest.mark.parametrize("name", ["ctl_x86_maddubs_u7", "ctl_x86_vnni_u8s8", "ctl_x86_scalar"])
def test_mutation_suite_controls_proved(mutants, name):
    k = mutants[name]
    proof = P.prove(k, (k.tile.mr + 1, k.tile.nr + 1, 11), lemma_cache=False)
    assert proof.verdict == P.PROVED, proof.summary()


def test_counterexample_not_confirmed_is_never_refuted(mutants):
    """Without a replay a solver's counterexample is UNKNOWN: REFUTED needs a real executor's C."""
    proof = P.prove(mutants["mut_x86_scalar_a_signed"], (2, 2, 4), lemma_cache=False, replay=False)
    assert proof.verdict == P.UNKNOWN and proof.counterexample and "not replayed" in proof.replay


def test_unmodelled_instruction_is_unknown_naming_it(tmp_path):
    toml = tmp_path / "k.toml"
    toml.write_text(f'''[[kernel]]
name = "prove_rdtsc"
target = "x86-64"
features = []
source = "{HERE / 'prove' / 'rdtsc.c'}"
symbol = "rdtsc_gemm"
signature = "gemm"
a_type = "u8"
b_type = "s8"
tile = {{mr = 1, nr = 1, kr = 1}}
packing = "A and B row-major, unpacked"
contract = "exact"
domain = {{a = [0, 255], b = [-128, 127]}}
model = "lowp.conformance.contracts.int32:exact"
''')
    (k,) = load_toml(toml)
    try:
        proof = P.prove(k, (2, 2, 2), lemma_cache=False)
    finally:
        _KERNELS.pop("prove_rdtsc", None)
    assert proof.verdict == P.UNKNOWN and "rdtsc" in proof.summary() and proof.address is not None


def test_lemmas_prove_cache_and_refute(tmp_path):
    """A term whose interval is too coarse (a correlated expression) is proved in range by the solver, the fact is
    cached under its shape (another term of the same shape is a cache hit, also in a new run via the file), and a
    term that does leave the range gives the input that shows it."""
    k = kernel("u8s8s32_avx2")
    inputs = P.Inputs(k, 1, 2, 2, P.domain_of(k, "full"))
    A, B = inputs.cells["A"], inputs.cells["B"]
    path = tmp_path / "lemmas.json"
    lemmas = P.Lemmas(inputs, 10, "z3", path)
    x = A[0, 0] * B[0, 0] - A[0, 0] * B[0, 0] + B[1, 0]        # really in [-128, 127]; the interval says more
    y = A[0, 1] * B[0, 1] - A[0, 1] * B[0, 1] + B[1, 1]
    assert x.hi > 127 and lemmas(x, -128, 127) and lemmas(y, -128, 127)
    assert len(lemmas.kinds) == 1 and next(iter(lemmas.kinds.values())).count == 2
    lemmas.save()
    again = P.Lemmas(inputs, 10, "z3", path)
    assert again(x, -128, 127) and next(iter(again.kinds.values())).cached == 1
    pair = A[0, 0] * B[0, 0] + A[0, 1] * B[1, 0]
    assert not lemmas(pair, -32768, 32767) and lemmas.refuted
    a0, b0 = lemmas.refuted[-1]["A[0][0]"], lemmas.refuted[-1]["B[0][0]"]
    assert a0 > 0 and b0 is not None


def test_bitwuzla_agrees_with_z3():
    pytest.importorskip("bitwuzla")
    k = kernel("u8s8s32_avx2")
    inputs = P.Inputs(k, 1, 1, 2, P.domain_of(k, "full"))
    A, B = inputs.cells["A"], inputs.cells["B"]
    pair = A[0, 0] * B[0, 0] + A[0, 1] * B[1, 0]
    for solver in ("z3", "bitwuzla"):
        lemmas = P.Lemmas(inputs, 10, solver, None)
        assert not lemmas(pair, -32768, 32767)
        m = lemmas.refuted[0]
        a = [m.get(f"A[0][{c}]", 0) for c in range(2)]
        b = [(v - 256 if v >= 128 else v) for v in (m.get("B[0][0]", 0), m.get("B[1][0]", 0))]
        assert not -32768 <= a[0] * b[0] + a[1] * b[1] <= 32767, (solver, m)


def test_command_reports_and_exit_codes(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["prove", "--kernel", "u8s8s32_avx2", "--shape", "2x3x5", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "1 proofs: 1 PROVED" in text
    rows = json.loads((out / "prove.json").read_text())
    assert rows[0]["verdict"] == "PROVED" and rows[0]["shape"] == "2x3x5"
    suite = ET.parse(out / "junit.xml").getroot()
    assert suite.get("tests") == "1" and suite.get("failures") == "0"
    assert "PROVED" in (out / "prove.md").read_text()
    with pytest.raises(SystemExit) as e:
        main(["prove", "--kernel", "u8s8s32_avx2", "--shape", "2x3"])
    assert e.value.code == 2
    assert "MxNxK" in capsys.readouterr().err


def test_bad_elf_and_missing_symbol_are_named(tmp_path):
    from lowp.emulator.symbolic import Image
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"\x7fELF garbage")
    with pytest.raises(ValueError, match="not a readable ELF"):
        Image.load(bad)
    image = Image.load(P.binary_path(kernel("u8s8s32_avx2")))
    with pytest.raises(KeyError, match="defines no function 'nope'"):
        image.symbol("nope")


def test_pytest_fixture(lowp_prove):
    proof = lowp_prove("u8s8s32_avx512vnni", (2, 3, 5))
    assert proof.verdict == "PROVED" and proof.outputs == 6
