"""`lowp prove` on lowp's AArch64 requantizing kernels (kernels/quantized/aarch64.toml: XNNPACK's GEMM ukernel ABI,
rndnu output stage), run by the AArch64 symbolic executor: the accumulator by the solver, the output stage swept over
every value the accumulator takes, each NEON instruction through lowp.isa_models.arm on bit-vector lanes.

Both kernels PROVED at a full tile and across tails, with the typical and the extreme ('limits': scale near 256, so
SQSHL pre-shifts) parameters; two one-line mutants of their output stages (made at test time) REFUTED with a counterexample
that Unicorn reproduces, and one of them PROVED where its parameters cannot reach the mutation.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import lowp.kernels
from lowp.conformance import prove as P

from .conftest import registered

pytestmark = pytest.mark.emulated

TOML = Path(lowp.kernels.__file__).parent / "quantized" / "aarch64.toml"
C_KERNEL = "xnn_qs8_rndnu_4x8_neon_mlal_lane"
ASM_KERNEL = "xnn_qs8_rndnu_1x8c8_neon_mlal_asm"
# The rndnu stage and the widening/reduction around it, as the symbolic run executed them (through the models).
REQUANT = {"sqshl", "sqdmulh", "srshl", "sqxtn", "sqxtn2", "sqadd", "smax", "smin"}
WIDEN = {C_KERNEL: {"sshll", "smlal", "smlal2"}, ASM_KERNEL: {"smull", "smlal", "sadalp", "addp"}}


@pytest.fixture(scope="module")
def kernels():
    """The two kernels: registered here unless another test of this process already did (conftest.registered)."""
    with registered(TOML) as loaded:
        yield {n: loaded[n] for n in (C_KERNEL, ASM_KERNEL)}


def mutant(original, name: str, line: str, mutated: str, folder: Path):
    """A copy of a kernel built from its source with one line changed (`line` -> `mutated`, which must occur once),
    written to `folder` beside the original's name (not registered: prove takes the Kernel)."""
    [source] = original.sources
    text = Path(source).read_text()
    assert text.count(line) == 1, f"{line!r} occurs {text.count(line)} times in {source}"
    copy = folder / Path(source).name
    copy.write_text(text.replace(line, mutated))
    return dataclasses.replace(original, name=name, sources=(copy,))


def confirmed(proof) -> bool:
    return proof.verdict == P.REFUTED and "confirmed on" in proof.replay and \
        any(e in proof.replay for e in ("unicorn", "qemu"))


@pytest.mark.parametrize("name", [C_KERNEL, ASM_KERNEL])
def test_proved_at_the_tile(kernels, name):
    k = kernels[name]
    proof = P.prove(k, (k.tile.mr, k.tile.nr, 16), lemma_cache=False)
    assert proof.verdict == P.PROVED, proof.summary()
    assert proof.variant == "exact + xnnpack-rndnu" and proof.outputs == k.tile.mr * k.tile.nr
    assert proof.sweep_values > 0 and proof.params is not None
    ran = set(proof.instructions)
    assert REQUANT | WIDEN[name] <= ran, (REQUANT | WIDEN[name]) - ran


@pytest.mark.parametrize("name,shape", [(C_KERNEL, (5, 9, 11)), (ASM_KERNEL, (2, 9, 19))])
def test_proved_across_tails(kernels, name, shape):
    """Two ukernel calls in M, a column tail (the ST1 lane stores) and a K tail (the over-read of A)."""
    proof = P.prove(kernels[name], shape, lemma_cache=False)
    assert proof.verdict == P.PROVED, proof.summary()


@pytest.mark.parametrize("name", [C_KERNEL, ASM_KERNEL])
def test_proved_with_a_saturating_pre_shift(kernels, name):
    """scale just under 256: right_pre_shift is a left shift by SQSHL, the int16 narrowing saturates."""
    k = kernels[name]
    proof = P.prove(k, (1, k.tile.nr, 16), lemma_cache=False, quant="limits")
    assert proof.verdict == P.PROVED, proof.summary()
    assert min(proof.params["scale"]) > 128


def test_rounding_doubling_multiply_refuted(kernels, tmp_path):
    """SQRDMULH for SQDMULH in the C kernel's rndnu_scale: refuted in the output stage, confirmed on Unicorn."""
    m = mutant(kernels[C_KERNEL], "mut_qs8_rndnu_4x8_mlal_lane_sqrdmulh", "x = vqdmulhq_s32(x, mul);",
               "x = vqrdmulhq_s32(x, mul);", tmp_path)
    proof = P.prove(m, (4, 8, 16), lemma_cache=False)
    assert confirmed(proof), proof.summary()
    assert "xnnpack-rndnu" in proof.reason and proof.counterexample["element"] == [0, 0]
    assert "sqrdmulh" in proof.instructions and "sqdmulh" not in proof.instructions


def test_wrapping_zero_point_refuted_only_where_reachable(kernels, tmp_path):
    """ADD for SQADD of the output zero point in the .S kernel: with typical parameters the scaled accumulator never
    comes near an int16 limit, so the mutant computes the contract there (PROVED); with a scale near 256 it wraps,
    and the counterexample is confirmed on Unicorn."""
    m = mutant(kernels[ASM_KERNEL], "mut_qs8_rndnu_1x8c8_add_zp", "sqadd   v0.8h, v0.8h, v27.8h",
               "add     v0.8h, v0.8h, v27.8h", tmp_path)
    typical = P.prove(m, (1, 8, 16), lemma_cache=False)
    assert typical.verdict == P.PROVED, typical.summary()
    extreme = P.prove(m, (1, 3, 16), lemma_cache=False, quant="limits")
    assert confirmed(extreme), extreme.summary()
    assert "sqadd" not in extreme.instructions
