"""The AArch64 models against the Arm pseudocode, lane by lane in Python integers (independent of the numpy code
under test), at the corners docs/research/aarch64-int8-instructions.md#corners-worth-a-test lists, and the registry's
ACLE spellings."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from lowp.isa_models import arm, instruction, intrinsic, intrinsics

S8, S16, S32, S64 = np.int8, np.int16, np.int32, np.int64
U8, U16, U32 = np.uint8, np.uint16, np.uint32


def lanes(dtype, n):
    """Random lanes with the extremes (min, min+1, -1, 0, 1, max-1, max) weighted in."""
    info = np.iinfo(dtype)
    edges = sorted({int(info.min), int(info.min) + 1, -1 if info.min < 0 else 2, 0, 1, int(info.max) - 1, int(info.max)})
    one = st.one_of(st.sampled_from(edges), st.integers(int(info.min), int(info.max)))
    return st.lists(one, min_size=n, max_size=n).map(lambda v: np.array(v, dtype=dtype))


def wrap(x, bits, signed=True):
    x &= (1 << bits) - 1
    return x - (1 << bits) if signed and x >> (bits - 1) else x


def sat(x, bits, signed=True):
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return min(max(x, lo), hi)


# -- section 5 corners ------------------------------------------------------------------------------------------

def test_smlal_wraps_mod_2_16_as_measured():
    acc = np.full(8, 32767, S16)
    r = arm.smlal(acc, np.full(8, 127, S8), np.ones(8, S8))
    assert r.dtype == S16 and (r == -32642).all()


def test_smlal2_reads_upper_halves():
    a = np.arange(16, dtype=S8)
    r = arm.smlal2(np.zeros(8, S16), a, np.full(16, 2, S8))
    assert r.tolist() == [2 * v for v in range(8, 16)]


@pytest.mark.parametrize("dtype,bits", [(S16, 16), (S32, 32)])
def test_sqrdmulh_int_min_squared_saturates(dtype, bits):
    m = np.full(128 // bits, np.iinfo(dtype).min, dtype)
    assert (arm.sqrdmulh(m, m) == np.iinfo(dtype).max).all()
    assert (arm.sqdmulh(m, m) == np.iinfo(dtype).max).all()
    # one off the corner does not saturate: (-2^(E-1)) * (-2^(E-1) + 1) doubled fits
    r = arm.sqrdmulh(m, m + 1)
    assert (r == (2 * (1 << (bits - 1)) * ((1 << (bits - 1)) - 1) + (1 << (bits - 1))) >> bits).all()


def test_srshl_uses_only_the_low_byte_of_the_shift():
    a = np.array([5, 5, 5, 5], S32)
    r = arm.srshl(a, np.array([0x0101, 0x7F01, -0xFF, 0x00FF], S32))   # low bytes 1, 1, 1, -1
    assert r.tolist() == [10, 10, 10, 3]                                  # 5 >> 1 rounded = 3


def test_srshl_rounds_half_up_and_extreme_shifts():
    a = np.array([-5, 5, -(1 << 31), (1 << 31) - 1], S32)
    r = arm.srshl(a, np.array([-1, -32, -32, 32], S32))
    assert r.tolist() == [-2, 0, 0, 0]
    assert arm.urshl(np.array([0xFFFFFFFF] * 4, U32), np.array([-32] * 4, S32)).tolist() == [1] * 4


@pytest.mark.parametrize("src_t,bits", [(S16, 8), (S32, 16), (S64, 32)])
def test_sqrshrn_at_n_equal_esize(src_t, bits):
    info = np.iinfo(src_t)
    x = np.array([info.max, info.min, (1 << (bits - 1)) - 1, 1 << (bits - 1)] * (16 // np.dtype(src_t).itemsize // 2 + 0),
                 src_t)[:128 // (2 * bits)]
    r = arm.sqrshrn(x, bits)
    expect = [sat((int(v) + (1 << (bits - 1))) >> bits, bits) for v in x]
    assert r.tolist() == expect
    assert r.dtype == np.dtype(f"i{bits // 8}")


def test_sqrshrn_rejects_shift_beyond_esize():
    with pytest.raises(ValueError, match="shift"):
        arm.sqrshrn(np.zeros(8, S16), 9)
    with pytest.raises(ValueError, match="shift"):
        arm.srshr(np.zeros(4, S32), 0)


def test_mmla_right_operand_is_transposed():
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, 16, dtype=S8)
    b = rng.integers(-128, 128, 16, dtype=S8)
    acc = rng.integers(-1000, 1000, 4, dtype=S32)
    left, right_t = a.astype(np.int64).reshape(2, 8), b.astype(np.int64).reshape(2, 8)
    expect = (acc.astype(np.int64).reshape(2, 2) + left @ right_t.T).reshape(4)
    assert arm.smmla(acc, a, b).tolist() == expect.tolist()
    # not left @ right (untransposed) reading b as an 8x2 row-major matrix
    wrong = (acc.astype(np.int64).reshape(2, 2) + left @ b.astype(np.int64).reshape(8, 2)).reshape(4)
    assert arm.smmla(acc, a, b).tolist() != wrong.tolist()


def test_mmla_wraps_mod_2_32():
    a = np.full(16, -128, S8)
    acc = np.full(4, np.iinfo(S32).max, S32)
    r = arm.smmla(acc, a, a)                         # + 8 * 16384 = 131072
    assert r.tolist() == [wrap((1 << 31) - 1 + 131072, 32)] * 4
    u = arm.ummla(np.full(4, 0xFFFFFFFF, U32), np.full(16, 255, U8), np.full(16, 255, U8))
    assert u.tolist() == [(0xFFFFFFFF + 8 * 255 * 255) & 0xFFFFFFFF] * 4


def test_usdot_and_sudot_operand_roles():
    ones = np.full(16, 0xFF, U8)        # 255 as u8
    minus = np.full(16, -1, S8)         # the same bits as s8
    acc = np.zeros(4, S32)
    # USDOT: Vn (a) unsigned, Vm (b) signed: 255 * -1 * 4
    assert arm.usdot(acc, ones, minus).tolist() == [-1020] * 4
    # SUDOT: Vn (a) signed, Vm (b) unsigned: -1 * 255 * 4
    assert arm.sudot(acc, minus, ones, index=0).tolist() == [-1020] * 4
    # the signedness lives in the dtype: swapping roles is an error, never a silent cast
    with pytest.raises(ValueError, match="'a'"):
        arm.usdot(acc, minus, minus)
    with pytest.raises(ValueError, match="'b'"):
        arm.sudot(acc, minus, minus, index=0)
    a = np.array([200, 1, 2, 3] * 4, U8)
    b = np.array([-100, 5, 6, 7] * 4, S8)
    assert arm.usdot(acc, a, b).tolist() == [200 * -100 + 5 + 12 + 21] * 4
    us = arm.usmmla(acc, a, b)
    assert us[0] == 2 * (200 * -100 + 5 + 12 + 21)


def test_sdot_wraps_and_by_element_picks_a_group():
    acc = np.full(4, np.iinfo(S32).max, S32)
    a = np.full(16, -128, S8)
    assert arm.sdot(acc, a, a).tolist() == [wrap((1 << 31) - 1 + 4 * 16384, 32)] * 4
    b = np.arange(16, dtype=S8)
    r = arm.sdot(np.zeros(4, S32), np.ones(16, S8), b, index=2)
    assert r.tolist() == [8 + 9 + 10 + 11] * 4
    with pytest.raises(ValueError, match="index"):
        arm.sdot(np.zeros(4, S32), np.ones(16, S8), b, index=4)
    r64 = arm.sdot(np.zeros(2, S32), np.ones(8, S8), b[:8], index=1)
    assert r64.tolist() == [4 + 5 + 6 + 7] * 2


def test_operand_errors_name_the_operand():
    with pytest.raises(ValueError, match="'acc'"):
        arm.smlal(np.zeros(8, S32), np.zeros(8, S8), np.zeros(8, S8))
    with pytest.raises(ValueError, match="'b'"):
        arm.smlal(np.zeros(8, S16), np.zeros(8, S8), np.zeros(8, U8))
    with pytest.raises(ValueError, match="'a'"):
        arm.sqrdmulh(np.zeros(16, S8), np.zeros(16, S8))
    with pytest.raises(ValueError, match="'a'"):
        arm.sdot(np.zeros(4, S32), [0] * 16, np.zeros(16, S8))


# -- hypothesis: every lane against the pseudocode in Python integers --------------------------------------------

@settings(max_examples=60, deadline=None)
@given(lanes(S16, 8), lanes(S8, 8), lanes(S8, 8))
def test_smlal_lanes(acc, a, b):
    assert arm.smlal(acc, a, b).tolist() == [wrap(int(z) + int(x) * int(y), 16) for z, x, y in zip(acc, a, b)]


@settings(max_examples=60, deadline=None)
@given(lanes(S64, 2), lanes(S32, 4), lanes(S32, 4), st.integers(0, 3))
def test_smlal2_s32_by_element_lanes(acc, a, v, index):
    r = arm.smlal2(acc, a, v, index=index)
    assert r.tolist() == [wrap(int(z) + int(x) * int(v[index]), 64) for z, x in zip(acc, a[2:])]


@settings(max_examples=60, deadline=None)
@given(lanes(U32, 4), lanes(U16, 8))
def test_uadalp_lanes(acc, a):
    assert arm.uadalp(acc, a).tolist() == [wrap(int(acc[e]) + int(a[2 * e]) + int(a[2 * e + 1]), 32, False)
                                           for e in range(4)]


@settings(max_examples=60, deadline=None)
@given(lanes(S32, 4), lanes(S32, 4))
def test_sqrdmulh_lanes(a, b):
    expect = [sat((2 * int(x) * int(y) + (1 << 31)) >> 32, 32) for x, y in zip(a, b)]
    assert arm.sqrdmulh(a, b).tolist() == expect


@settings(max_examples=60, deadline=None)
@given(lanes(S16, 8), lanes(S16, 8))
def test_srshl_lanes(a, b):
    def one(x, s):
        s = wrap(s, 8)
        v = x << s if s >= 0 else (x + (1 << (-s - 1))) >> -s
        return wrap(v, 16)
    assert arm.srshl(a, b).tolist() == [one(int(x), int(s)) for x, s in zip(a, b)]


@settings(max_examples=60, deadline=None)
@given(lanes(S64, 2), lanes(S64, 2))
def test_srshl_64_and_sqadd_64_lanes(a, b):
    def one(x, s):
        s = wrap(s, 8)
        return wrap(x << s if s >= 0 else (x + (1 << (-s - 1))) >> -s, 64)
    assert arm.srshl(a, b).tolist() == [one(int(x), int(s)) for x, s in zip(a, b)]
    assert arm.sqadd(a, b).tolist() == [sat(int(x) + int(y), 64) for x, y in zip(a, b)]


@settings(max_examples=60, deadline=None)
@given(lanes(S32, 4), st.integers(1, 16), lanes(U16, 4))
def test_sqrshrun2_lanes(a, n, lo):
    r = arm.sqrshrun2(lo, a, n)
    assert r.tolist() == lo.tolist() + [sat((int(x) + (1 << (n - 1))) >> n, 16, False) for x in a]


@settings(max_examples=60, deadline=None)
@given(lanes(S32, 4), lanes(U8, 16), lanes(S8, 16), st.integers(0, 3))
def test_usdot_by_element_lanes(acc, a, b, index):
    expect = [wrap(int(acc[e]) + sum(int(a[4 * e + i]) * int(b[4 * index + i]) for i in range(4)), 32)
              for e in range(4)]
    assert arm.usdot(acc, a, b, index=index).tolist() == expect


@settings(max_examples=60, deadline=None)
@given(lanes(S32, 4), lanes(U8, 16), lanes(S8, 16))
def test_usmmla_lanes(acc, a, b):
    expect = [wrap(int(acc[2 * i + j]) + sum(int(a[8 * i + k]) * int(b[8 * j + k]) for k in range(8)), 32)
              for i in range(2) for j in range(2)]
    assert arm.usmmla(acc, a, b).tolist() == expect


@settings(max_examples=40, deadline=None)
@given(lanes(S64, 2), lanes(S32, 2))
def test_sqxtn2_sqxtun_lanes(a, lo):
    assert arm.sqxtn2(lo, a).tolist() == lo.tolist() + [sat(int(x), 32) for x in a]
    assert arm.sqxtun(a).tolist() == [sat(int(x), 32, False) for x in a]


@settings(max_examples=60, deadline=None)
@given(lanes(S32, 4), lanes(S32, 4), lanes(U32, 4))
def test_sqshl_sshl_uqshl_lanes(a, b, u):
    def shifted(x, s):                      # SInt(shift<7:0>); a negative shift is a truncating right shift
        s = wrap(s, 8)
        return x << s if s >= 0 else x >> -s
    assert arm.sqshl(a, b).tolist() == [sat(shifted(int(x), int(s)), 32) for x, s in zip(a, b)]
    assert arm.sshl(a, b).tolist() == [wrap(shifted(int(x), int(s)), 32) for x, s in zip(a, b)]
    assert arm.uqshl(u, b).tolist() == [sat(shifted(int(x), int(s)), 32, False) for x, s in zip(u, b)]


@settings(max_examples=40, deadline=None)
@given(lanes(S16, 8), st.integers(0, 15), lanes(U8, 8))
def test_sshll2_ushll_lanes(a, n, u):
    assert arm.sshll2(a, n).tolist() == [int(x) << n for x in a[4:]]
    assert arm.ushll(u, n % 8).tolist() == [int(x) << (n % 8) for x in u]


@settings(max_examples=40, deadline=None)
@given(lanes(S32, 4), lanes(S32, 4), lanes(S8, 8), lanes(S8, 8))
def test_addp_smax_smin_lanes(a, b, c, d):
    both = [int(x) for x in a] + [int(x) for x in b]
    assert arm.addp(a, b).tolist() == [wrap(both[2 * e] + both[2 * e + 1], 32) for e in range(4)]
    assert arm.smax(c, d).tolist() == [max(int(x), int(y)) for x, y in zip(c, d)]
    assert arm.smin(a, b).tolist() == [min(int(x), int(y)) for x, y in zip(a, b)]


def test_models_vectorize_over_leading_axes():
    rng = np.random.default_rng(0)
    acc = rng.integers(-2**15, 2**15, (5, 3, 8), dtype=S16)
    a = rng.integers(-128, 128, (5, 3, 8), dtype=S8)
    b = rng.integers(-128, 128, (5, 3, 8), dtype=S8)
    r = arm.smlal(acc, a, b)
    assert r.shape == (5, 3, 8)
    assert (r[2, 1] == arm.smlal(acc[2, 1], a[2, 1], b[2, 1])).all()


# -- the registry -------------------------------------------------------------------------------------------------

def test_registry_acle_intrinsics():
    f = intrinsic("vdotq_laneq_s32")
    assert f.features == ("asimd", "asimddp") and f.encoding == "a64" and f.mnemonic == "sdot"
    assert [p.kind for p in f.params] == ["vec", "vec", "vec", "imm"] and (f.params[3].lo, f.params[3].hi) == (0, 3)
    r = f(np.zeros(4, S32), np.ones(16, S8), np.arange(16, dtype=S8), 3)
    assert r.tolist() == [12 + 13 + 14 + 15] * 4
    with pytest.raises(ValueError, match="lane"):
        f(np.zeros(4, S32), np.ones(16, S8), np.arange(16, dtype=S8), 4)
    assert intrinsic("vsudotq_laneq_s32").features == ("asimd", "i8mm")
    assert intrinsic("vmmlaq_s32").instruction.extension == "FEAT_I8MM"
    assert intrinsic("vqrshrn_high_n_s32")(np.zeros(4, S16), np.full(4, 3, S32), 1).tolist() == [0] * 4 + [2] * 4
    assert instruction("smlal", "aarch64").arch == "aarch64"


def test_registry_covers_the_issue():
    names = {i.name for i in intrinsics("aarch64")}
    wanted = {"vmlal_s8", "vmlal_high_s8", "vmlal_u8", "vmlal_s16", "vmlal_high_u8", "vmull_s8", "vmull_high_s8",
              "vpadalq_s16", "vpadalq_s8", "vpadalq_u8", "vpadalq_u16", "vaddw_s8", "vaddw_high_s8", "vdotq_s32",
              "vdotq_u32", "vdot_s32", "vdotq_lane_s32", "vdotq_laneq_s32", "vusdotq_s32", "vsudotq_laneq_s32",
              "vmmlaq_s32", "vmmlaq_u32", "vusmmlaq_s32", "vqrdmulhq_s32", "vqrdmulhq_s16", "vqdmulhq_s32",
              "vqdmulhq_s16", "vrshlq_s32", "vrshrq_n_s32", "vqrshrn_n_s32", "vqrshrn_high_n_s32", "vqrshrun_n_s16",
              "vqrshrun_n_s32", "vqmovn_s32", "vqmovn_s16", "vqmovun_s16", "vqmovun_s32", "vqaddq_s32", "vqaddq_s16"}
    assert wanted <= names
    for i in intrinsics("aarch64"):
        if i.encoding != "a64":
            continue                     # the SVE/SME ones: tests/test_sve_models.py
        assert i.instruction.arch == "aarch64" and i.encoding == "a64"
        assert set(i.features) <= {"asimd", "asimddp", "i8mm"}
        assert i.instruction.citation.startswith("Arm Architecture Reference Manual")
        assert i.instruction.pseudocode == i.mnemonic.upper()
