"""The SME outer products (SMOPA/UMOPA/SUMOPA/USMOPA, 4-way into a 32-bit ZA tile) and the SME2 multi-vector SDOT.

qemu-aarch64 7.2 computes the 32-bit outer products wrongly (qemu issue #2083: per 64-bit chunk it forms the dot
products of groups (2R, 2C) and (2R+1, 2C+1) and writes both into slice 2R; slices 2R+1 never change). So here:
  - the models against a scalar reading of the Arm pseudocode (C9.2.225 and siblings), at SVL 128/256/512;
  - qemu against `qemu_2083`, the model with that bug applied: equal in every element proves the wrappers (ZA load,
    predicates, streaming mode, store) and the model's products for the group pairs qemu does compute, with every
    byte pair at every position pair (pair_sweep);
  - the model against qemu directly, which xfails naming the issue while this qemu has it;
  - SME2 SDOT (multiple vectors): a scalar reading, and qemu 11 (lowp.emulator.aarch64.qemu_sme2: $LOWP_QEMU_SME2 or
    the one fetched into the cache), or the default qemu where it runs SME2 (7.2 and 10.0.2 do not: SIGILL, and
    the proof is skipped naming the binary, its version and the fetch command).
"""
from __future__ import annotations

import numpy as np
import pytest

from lowp.emulator.aarch64.intrinsics import qemu_path
from lowp.emulator.qemu_batch import identify
from lowp.emulator.aarch64.sme2 import Sme2QemuBackend
from lowp.emulator.aarch64.sve import QEMU_2083, VLS, ScalableQemuBackend
from lowp.isa_models import intrinsic, sme
from lowp.isa_models.verify import sme2_proof
from lowp.isa_models.verify.proof import verify

from .test_sve_models import pair_sweep

pytestmark = pytest.mark.emulated
MOPA = {"svmopa_za32_s8_m": sme.smopa, "svmopa_za32_u8_m": sme.umopa, "svsumopa_za32_s8_m": sme.sumopa,
        "svusmopa_za32_u8_m": sme.usmopa}


@pytest.fixture(scope="module", params=VLS, ids=lambda vl: f"vl{vl}")
def qemu(request):
    if qemu_path() is None:
        pytest.skip("qemu-aarch64 not installed (Debian: apt-get install qemu-user); Unicorn cannot run SME")
    return ScalableQemuBackend(request.param)


def operands(name, vl, n, rng, active=0.8):
    intr = intrinsic(name).at_vl(vl)
    za_p, _, pn_p, _, zn_p, zm_p = intr.params
    info = np.iinfo(za_p.dtype)
    za = rng.integers(info.min, info.max, (n, za_p.lanes, za_p.lanes), endpoint=True, dtype=za_p.dtype)
    zn = rng.integers(np.iinfo(zn_p.dtype).min, np.iinfo(zn_p.dtype).max, (n, zn_p.lanes), endpoint=True, dtype=zn_p.dtype)
    zm = rng.integers(np.iinfo(zm_p.dtype).min, np.iinfo(zm_p.dtype).max, (n, zm_p.lanes), endpoint=True, dtype=zm_p.dtype)
    pn, pm = rng.random((n, pn_p.lanes)) < active, rng.random((n, pn_p.lanes)) < active
    return intr, [za, int(rng.integers(0, 4)), pn, pm, zn, zm]


def scalar_mopa(za, zn, zm, pn, pm):
    """C9.2.225 SMOPA (4-way) read literally, for whatever signedness the arrays carry."""
    dim = len(za)
    out = za.copy()
    for row in range(dim):
        for col in range(dim):
            s = int(za[row, col])
            for k in range(4):
                if pn[4 * row + k] and pm[4 * col + k]:
                    s += int(zn[4 * row + k]) * int(zm[4 * col + k])
            out[row, col] = np.array(s % 2 ** 32, np.uint64).astype(np.uint32).view(za.dtype)
    return out


@pytest.mark.parametrize("vl", VLS)
@pytest.mark.parametrize("name", list(MOPA))
def test_mopa_models_are_the_pseudocode(name, vl):
    intr, (za, tile, pn, pm, zn, zm) = operands(name, vl, 3, np.random.default_rng(vl))
    got = intr(za, tile, pn, pm, zn, zm)
    for i in range(3):
        assert (got[i] == scalar_mopa(za[i], zn[i], zm[i], pn[i], pm[i])).all()
        assert (MOPA[name](za[i], zn[i], zm[i], pn[i], pm[i]) == got[i]).all()


def qemu_2083(model, za, zn, zm, pn, pm):
    """What qemu 7.2 computes: slice 2R gets, at column 2C, the dot of groups (2R, 2C) and at 2C+1 that of
    (2R+1, 2C+1); odd slices keep ZA. Built from lowp's model of the products alone (ZA = 0)."""
    prods = model(np.zeros_like(za), zn, zm, pn, pm).astype(np.int64)
    out = za.astype(np.int64).copy()
    out[..., 0::2, 0::2] += prods[..., 0::2, 0::2]
    out[..., 0::2, 1::2] += prods[..., 1::2, 1::2]
    return (out % 2 ** 32).astype(np.uint32).view(za.dtype)


@pytest.mark.parametrize("name", list(MOPA))
def test_qemu_differs_from_the_model_exactly_by_issue_2083(qemu, name):
    if qemu.outer_products_right:
        pytest.skip("this qemu computes SMOPA right: test_mopa_model_matches_qemu proves the model")
    intr = intrinsic(name).at_vl(qemu.vl)
    zn_p, zm_p = intr.params[4:]
    zn, zm = pair_sweep(zn_p.dtype, zn_p.lanes, zm_p.dtype, zm_p.lanes)
    n, dim = len(zn), intr.result.lanes
    rng = np.random.default_rng(qemu.vl)
    za = rng.integers(-2 ** 31, 2 ** 31, (n, dim, dim)).astype(np.int64).astype(np.uint32).view(intr.params[0].dtype)
    pn, pm = rng.random(zn.shape) < 0.85, rng.random(zn.shape) < 0.85
    got = qemu.run(intr, [za, 0, pn, pm, zn, zm])
    assert (got == qemu_2083(MOPA[name], za, zn, zm, pn, pm)).all()
    assert not (got == intr(za, 0, pn, pm, zn, zm)).all()          # and it is not the architecture's answer


@pytest.mark.parametrize("name", list(MOPA))
def test_mopa_model_matches_qemu(qemu, name):
    if not qemu.outer_products_right:
        pytest.xfail(f"{identify(qemu.qemu)} {QEMU_2083}")
    v = verify(intrinsic(name).at_vl(qemu.vl), qemu, random_registers=256, seed=qemu.vl)
    assert v.status == "verified", str(v.disagreement)


def test_mopa_refuses_bad_input_clearly():
    zn, p = np.zeros(16, np.int8), np.ones(16, bool)
    with pytest.raises(ValueError, match=r"\(4, 4\) array of s32"):
        sme.smopa(np.zeros((4, 4), np.uint32), zn, zn, p, p)
    with pytest.raises(ValueError, match=r"\(4, 4\)"):
        sme.smopa(np.zeros((8, 8), np.int32), zn, zn, p, p)
    with pytest.raises(ValueError, match="bool"):
        sme.smopa(np.zeros((4, 4), np.int32), zn, zn, p.astype(np.uint8), p)
    with pytest.raises(ValueError, match="power of two"):
        sme.smopa(np.zeros((12, 12), np.int32), np.zeros(48, np.int8), np.zeros(48, np.int8), np.ones(48, bool),
                  np.ones(48, bool))
    with pytest.raises(ValueError, match="dtype"):
        sme.umopa(np.zeros((4, 4), np.uint32), zn, zn.view(np.uint8), p, p)
    with pytest.raises(ValueError, match="tile 'za'"):
        intrinsic("svmopa_za32_s8_m")(np.zeros((4, 5), np.int32), 0, p, p, zn, zn)


# -- SME2 SDOT (4-way, multiple vectors): the pseudocode ----------------------------------------------------------

def scalar_sdot_za(za, zn, zm, slice_index, offset):
    """C9.2.202 read literally."""
    vectors, nreg = za.shape[0], zn.shape[0]
    vstride = vectors // nreg
    vec = (slice_index + offset) % vstride
    out = za.copy()
    for r in range(nreg):
        for e in range(za.shape[1]):
            s = int(out[vec, e]) + sum(int(zn[r, 4 * e + i]) * int(zm[r, 4 * e + i]) for i in range(4))
            out[vec, e] = (s + 2 ** 31) % 2 ** 32 - 2 ** 31
        vec += vstride
    return out


@pytest.mark.parametrize("nreg", [2, 4])
@pytest.mark.parametrize("vl", VLS)
def test_sme2_sdot_za_is_the_pseudocode(vl, nreg):
    rng = np.random.default_rng(vl + nreg)
    za = rng.integers(-2 ** 31, 2 ** 31, (vl // 8, vl // 32)).astype(np.int32)
    zn = rng.integers(-128, 128, (nreg, vl // 8)).astype(np.int8)
    zm = rng.integers(-128, 128, (nreg, vl // 8)).astype(np.int8)
    zn[0, :4] = zm[0, :4] = -128                                     # 4 * 2^14 on an accumulator near the top wraps
    za[:, 0] = 2 ** 31 - 1
    for slice_index, offset in ((0, 0), (5, 3), (vl, 7)):
        assert (sme.sdot_za(za, zn, zm, slice_index, offset) == scalar_sdot_za(za, zn, zm, slice_index, offset)).all()


# -- SME2 SDOT against qemu (lowp.emulator.aarch64.sme2, lowp.isa_models.verify.sme2_proof) -------------------------------------

@pytest.fixture(scope="module", params=VLS, ids=lambda vl: f"vl{vl}")
def sme2(request):
    backend = Sme2QemuBackend(request.param)
    if backend.qemu is None:
        pytest.skip("qemu-aarch64 not installed (Debian: apt-get install qemu-user, then python -m "
                    "lowp.emulator.aarch64.qemu_sme2 fetch); Unicorn cannot run SME2")
    return backend


@pytest.mark.parametrize("form", list(sme2_proof.FORMS))
def test_sme2_sdot_is_proven_where_qemu_runs_sme2_and_skipped_naming_the_qemu_elsewhere(sme2, form):
    """What the found qemu can do decides: a qemu with SME2 proves the model; one without (7.2, 10.0.2: SIGILL)
    gives a reason naming its binary and version, and never a verdict."""
    v = sme2_proof.verify(form, sme2, count=32, seed=sme2.vl)
    who = str(identify(sme2.qemu))
    if v.status == "skipped":
        assert v.reason.startswith(who) and "has no SME2" in v.reason and "SIGILL" in v.reason
        assert who in sme2.describe() and "qemu_sme2 fetch" in v.reason
        pytest.skip(v.reason)
    assert v.status == "verified", v.disagreement
    assert v.registers > 32 and v.lanes == v.registers * (sme2.vl // 8) * (sme2.vl // 32)


class ModelRunner:
    """An executor computing lowp's model with a chosen bug: what the proof must tell from the real thing."""
    name, vl = "model", 256

    def __init__(self, bug=None):
        self.bug = bug

    def unavailable(self, form):
        return None

    def run(self, form, za, zn, zm, slices):
        out = np.stack([sme.sdot_za(za[i], zn[i], zm[i], int(s)) for i, s in enumerate(slices)])
        return self.bug(out, za) if self.bug else out


def test_sme2_proof_passes_the_model_and_catches_a_wrong_executor():
    assert sme2_proof.verify("svdot_za32_s8_vg1x4", ModelRunner(), count=8).status == "verified"

    vstride = ModelRunner.vl // 8 // 2                  # VGx2: ZA vectors between the group's two accumulators

    def forgets_the_second_group_vector(out, za):      # slice 0's second vector keeps its old value
        out = out.copy()
        out[:, vstride] = za[:, vstride]
        return out
    v = sme2_proof.verify("svdot_za32_s8_vg1x2", ModelRunner(forgets_the_second_group_vector), count=8)
    assert v.status == "FAILED" and "ZA[" in v.disagreement and "the model says" in v.disagreement


def test_sme2_backend_refuses_bad_input_clearly():
    b = Sme2QemuBackend(128, qemu="/nonexistent/qemu-aarch64")
    with pytest.raises(ValueError, match="expected one of"):
        b.unavailable("svdot_za32_s8_vg1x8")
    with pytest.raises(ValueError, match=r"'zn' must be an \(N, 2, 16\) array of int8 at VL 128, got int8\[1, 4, 16\]"):
        b._run("svdot_za32_s8_vg1x2", np.zeros((1, 16, 4), np.int32), np.zeros((1, 4, 16), np.int8),
               np.zeros((1, 2, 16), np.int8), np.zeros(1, np.uint32))
    with pytest.raises(ValueError, match="vl: expected one of 128, 256, 512"):
        Sme2QemuBackend(384)
