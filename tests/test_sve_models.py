"""The SVE/SVE2 models against qemu-aarch64 at VL 128, 256 and 512 (Unicorn has no SVE), against a scalar reading
of the Arm pseudocode at a VL no executor here runs (384), and their refusal of bad input.

The 8-bit pair forms are swept: 2^16 registers in which every (Zn byte position, Zm byte position) pair takes all
2^16 byte-value pairs (see pair_sweep), at every VL and every lane index; the 16-bit-input narrows see all 2^16
values in every lane. Wider forms get corners, extremes and random registers (proof.verify) plus hypothesis.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lowp.emulator.aarch64.intrinsics import qemu_path
from lowp.emulator.aarch64.sve import VLS, ScalableQemuBackend, scalable_intrinsics
from lowp.isa_models import intrinsic, sve
from lowp.isa_models.verify.proof import verify

pytestmark = pytest.mark.emulated
SVE = [i for i in scalable_intrinsics() if i.encoding == "sve"]
NO_QEMU = "qemu-aarch64 not installed (Debian: apt-get install qemu-user); Unicorn cannot run SVE"


@pytest.fixture(scope="module", params=VLS, ids=lambda vl: f"vl{vl}")
def qemu(request):
    if qemu_path() is None:
        pytest.skip(NO_QEMU)
    return ScalableQemuBackend(request.param)


def pair_sweep(a_dtype, a_lanes, b_dtype, b_lanes):
    """2^16 registers: A[r, j] = (r >> 8) + 37 j, B[r, j'] = r + 101 j' (mod 256). For any positions j, j' the map
    r -> (A[r, j], B[r, j']) is a bijection onto all byte pairs, so every pairing of an A byte with a B byte sees
    every (a, b) value pair once."""
    r = np.arange(1 << 16)
    a = (((r[:, None] >> 8) + 37 * np.arange(a_lanes)) & 255).astype(np.uint8).view(a_dtype)
    b = ((r[:, None] + 101 * np.arange(b_lanes)) & 255).astype(np.uint8).view(b_dtype)
    return a, b


def all_values_16(dtype, lanes):
    """2^16 registers in which every lane takes every 16-bit value once."""
    r = np.arange(1 << 16)
    return ((r[:, None] + 977 * np.arange(lanes)) & 0xFFFF).astype(np.uint16).view(dtype)


def accumulators(p, n, rng):
    info = np.iinfo(p.dtype)
    x = rng.integers(info.min, info.max, (n, p.lanes), endpoint=True, dtype=p.dtype)
    pick = rng.random(x.shape) < 0.3
    x[pick] = rng.choice(np.array([info.min, info.max, 0, -1 if info.min else 1], p.dtype), pick.sum())
    return x


def agree(backend, intr, args, what):
    got = backend.run(intr, args)
    want = intr(*args)
    bad = np.argwhere((got != want).reshape(len(got), -1))
    assert not len(bad), (f"{intr.name} VL {backend.vl} ({what}): register {bad[0][0]} lane {bad[0][1]}: qemu "
                          f"{got[bad[0][0]].tolist()}, model {want[bad[0][0]].tolist()}")
    return got.size


def test_pair_sweep_covers_every_byte_pair_at_every_position_pair():
    a, b = pair_sweep(np.uint8, 64, np.int8, 64)
    for j, k in ((0, 0), (5, 63), (63, 17)):
        pairs = a[:, j].astype(np.int64) * 256 + b[:, k].view(np.uint8)
        assert len(np.unique(pairs)) == 1 << 16


DOTS = ["svdot_s32", "svdot_u32", "svusdot_s32", "svsudot_s32", "svdot_lane_s32", "svdot_lane_u32",
        "svusdot_lane_s32", "svsudot_lane_s32", "svmmla_s32", "svmmla_u32", "svusmmla_s32"]


@pytest.mark.parametrize("name", DOTS)
def test_8bit_dot_and_mmla_forms_every_byte_pair(qemu, name):
    """op2 x op3 byte pairs exhaustively at every position pair, accumulators with the extremes, every index."""
    intr = intrinsic(name).at_vl(qemu.vl)
    acc_p, a_p, b_p = intr.params[:3]
    a, b = pair_sweep(a_p.dtype, a_p.lanes, b_p.dtype, b_p.lanes)
    acc = accumulators(acc_p, len(a), np.random.default_rng(qemu.vl))
    imm = intr.params[3] if len(intr.params) > 3 else None
    lanes = 0
    for i in (range(imm.lo, imm.hi + 1) if imm else [None]):
        lanes += agree(qemu, intr, [acc, a, b] + ([i] if imm else []), f"pair sweep, index {i}")
    assert lanes == (1 << 16) * acc_p.lanes * (imm.hi - imm.lo + 1 if imm else 1)


@pytest.mark.parametrize("name", ["svqrdmulh_s8", "svrshl_s8_m", "svrshl_s8_z", "svrshl_s8_x"])
def test_8bit_elementwise_every_pair(qemu, name):
    intr = intrinsic(name).at_vl(qemu.vl)
    vecs = [p for p in intr.params if p.kind == "vec"]
    a, b = pair_sweep(vecs[0].dtype, vecs[0].lanes, vecs[1].dtype, vecs[1].lanes)
    if intr.params[0].kind in ("pred", "ptrue"):
        rng = np.random.default_rng(7)
        pg = (rng.random(a.shape) < 0.8) | (intr.params[0].kind == "ptrue")
        args = [pg, a, b]
    else:
        args = [a, b]
    assert agree(qemu, intr, args, "every (a, b) pair") == (1 << 16) * vecs[0].lanes


@pytest.mark.parametrize("name", ["svqxtnb_s16", "svqxtnt_s16", "svqrshrnb_n_s16", "svqrshrnt_n_s16"])
def test_16bit_narrows_every_input(qemu, name):
    intr = intrinsic(name).at_vl(qemu.vl)
    src = next(p for p in intr.params if p.kind == "vec" and p.dtype == np.int16)
    x = all_values_16(np.int16, src.lanes)
    rng = np.random.default_rng(3)
    even = [rng.integers(-128, 128, (len(x), intr.result.lanes), dtype=np.int8)] if intr.params[0].name == "even" else []
    imm = next((p for p in intr.params if p.kind == "imm"), None)
    for n in (range(imm.lo, imm.hi + 1) if imm else [None]):
        agree(qemu, intr, even + [x] + ([n] if imm else []), f"every s16 input, shift {n}")


@pytest.mark.parametrize("intr", SVE, ids=lambda i: i.name)
def test_every_sve_intrinsic_corners_and_random(qemu, intr):
    v = verify(intr.at_vl(qemu.vl), qemu, random_registers=256, seed=qemu.vl)
    assert v.status == "verified", str(v.disagreement)
    assert v.lanes > 0


HYPO = ["svqrdmulh_s32", "svqrdmulh_lane_s16", "svqrdmulh_s64", "svrshl_s32_m", "svrshl_s64_z", "svqrshrnt_n_s64",
        "svqxtnb_s64", "svdot_s64", "svdot_lane_u64"]


@pytest.mark.parametrize("name", HYPO)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 64))
def test_hypothesis_batches(qemu, name, seed, n):
    from lowp.isa_models.verify.proof import random_batch
    intr = intrinsic(name).at_vl(qemu.vl)
    agree(qemu, intr, random_batch(intr, n, np.random.default_rng(seed)), f"hypothesis seed {seed}")


def test_sve2_srshl_reads_the_whole_shift_element_unlike_neon():
    """SRSHL (SVE2) clamps the whole element (ShiftSat); Advanced SIMD SRSHL reads only its low byte."""
    from lowp.isa_models import arm
    a, s = np.full(4, 5, np.int32), np.array([0x0101, -1, 0x7F01, -0xFF], np.int32)
    assert sve.srshl(a, s).tolist() == [0, 3, 0, 0]
    assert arm.srshl(a, s).tolist() == [10, 3, 10, 10]


# -- a scalar reading of the pseudocode, at a VL qemu is not asked for ------------------------------------------

def test_indexed_dot_at_vl_384_scalar_reading():
    rng = np.random.default_rng(1)
    acc = rng.integers(-2 ** 31, 2 ** 31, 12).astype(np.int32)
    a, b = rng.integers(-128, 128, 48).astype(np.int8), rng.integers(0, 256, 48).astype(np.uint8)
    for index in range(4):
        got = sve.sudot(acc, a, b, index=index)
        for e in range(12):
            s = e - e % 4 + index                                  # segmentbase + index
            res = int(acc[e]) + sum(int(a[4 * e + i]) * int(b[4 * s + i]) for i in range(4))
            assert got[e] == (res + 2 ** 31) % 2 ** 32 - 2 ** 31


def test_narrow_top_keeps_even_elements_scalar_reading():
    rng = np.random.default_rng(2)
    x = rng.integers(-2 ** 63, 2 ** 63, 6, dtype=np.int64)
    even = rng.integers(-2 ** 31, 2 ** 31, 12).astype(np.int32)
    got = sve.sqrshrnt(even, x, 32)
    for e in range(6):
        assert got[2 * e] == even[2 * e]
        assert got[2 * e + 1] == min(max((int(x[e]) + 2 ** 31) >> 32, -2 ** 31), 2 ** 31 - 1)
    assert sve.sqxtnb(x).tolist()[1::2] == [0] * 6


def test_mmla_is_the_neon_matrix_per_segment():
    from lowp.isa_models import arm
    rng = np.random.default_rng(4)
    acc, a, b = (rng.integers(-9, 9, 12).astype(np.int32), rng.integers(-128, 128, 48).astype(np.int8),
                 rng.integers(-128, 128, 48).astype(np.int8))
    got = sve.smmla(acc, a, b)
    for s in range(3):
        assert got[4 * s:4 * s + 4].tolist() == arm.smmla(acc[4 * s:4 * s + 4], a[16 * s:16 * s + 16],
                                                          b[16 * s:16 * s + 16]).tolist()


# -- bad input -------------------------------------------------------------------------------------------------

def test_models_refuse_bad_input_clearly():
    z8, z32 = np.zeros(32, np.int8), np.zeros(8, np.int32)
    with pytest.raises(ValueError, match="not an SVE vector length"):
        sve.sdot(np.zeros(5, np.int32), np.zeros(20, np.int8), np.zeros(20, np.int8))
    with pytest.raises(ValueError, match="dtype"):
        sve.sdot(z32, z8.astype(np.uint8), z8)
    with pytest.raises(ValueError, match="'acc'"):
        sve.sdot(np.zeros(4, np.int32), z8, z8)                    # 128-bit accumulator, 256-bit sources
    with pytest.raises(ValueError, match="0..3"):
        sve.sdot(z32, z8, z8, index=4)
    with pytest.raises(ValueError, match="no 8-bit form"):
        sve.sqrdmulh(z8, z8, index=0)
    with pytest.raises(ValueError, match="1..16"):
        sve.sqrshrnb(np.zeros(8, np.int32), 17)
    with pytest.raises(ValueError, match="bool"):
        sve.srshl(z32, z32, pg=np.ones(8, np.int32))


def test_registry_refuses_bad_input_clearly():
    f = intrinsic("svdot_lane_s32")
    with pytest.raises(ValueError, match="different vector lengths"):
        f(np.zeros(4, np.int32), np.zeros(32, np.int8), np.zeros(32, np.int8), 0)
    with pytest.raises(ValueError, match="int8"):
        f(np.zeros(8, np.int32), np.zeros(32, np.int16)[:32], np.zeros(32, np.int8), 0)
    with pytest.raises(ValueError, match="must lie in"):
        f(np.zeros(8, np.int32), np.zeros(32, np.int8), np.zeros(32, np.int8), 4)
    fixed = f.at_vl(256)
    with pytest.raises(ValueError, match="lanes"):
        fixed(np.zeros(4, np.int32), np.zeros(16, np.int8), np.zeros(16, np.int8), 0)   # VL 128 into the VL-256 view
    with pytest.raises(ValueError, match="must be all-true"):
        intrinsic("svrshl_s32_x")(np.array([True, False, True, True]), np.zeros(4, np.int32), np.zeros(4, np.int32))
    with pytest.raises(ValueError, match="multiple of 128"):
        f.at_vl(200)
    with pytest.raises(ValueError, match="fixed width"):
        intrinsic("vdotq_s32").at_vl(256)


def test_backend_refuses_wrong_shapes_and_names_missing_qemu():
    b = ScalableQemuBackend(256, qemu=None)
    b.qemu = None
    assert b.unavailable(intrinsic("svdot_s32")).startswith("qemu-aarch64 not installed")
    assert "not an SVE/SME" in ScalableQemuBackend(128, qemu="/bin/false").unavailable(intrinsic("vdotq_s32"))
    if qemu_path() is None:
        pytest.skip(NO_QEMU)
    with pytest.raises(ValueError, match="at VL 256"):
        ScalableQemuBackend(256).run(intrinsic("svdot_s32"), [np.zeros((1, 4), np.int32), np.zeros((1, 16), np.int8),
                                                               np.zeros((1, 16), np.int8)])
