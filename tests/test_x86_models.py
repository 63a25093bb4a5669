"""The x86 models on their own: the seeds' worked examples, a second (scalar, plain-int) reading of each
operation block, masking, the registry, and the errors a user gets for bad operands. These run on any machine;
test_x86_native.py proves the same models against the CPU."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lowp.isa_models import instruction, intrinsic, intrinsics, x86
from tests.conftest import lanes_of


def sat(x, lo, hi):
    return max(lo, min(hi, x))


def s32(x):
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >> 31 else x


# Scalar readings of the operation blocks: one Python int per lane, no numpy arithmetic.
def ref_pmaddubsw(a, b):
    return [sat(int(a[2 * j]) * int(b[2 * j]) + int(a[2 * j + 1]) * int(b[2 * j + 1]), -32768, 32767)
            for j in range(len(a) // 2)]


def ref_pmaddwd(a, b):
    return [s32(int(a[2 * j]) * int(b[2 * j]) + int(a[2 * j + 1]) * int(b[2 * j + 1])) for j in range(len(a) // 2)]


def ref_dot4(src, a, b, saturating, lo=-2 ** 31, hi=2 ** 31 - 1, wrap=s32):
    out = []
    for j in range(len(src)):
        t = int(src[j]) + sum(int(a[4 * j + k]) * int(b[4 * j + k]) for k in range(4))
        out.append(sat(t, lo, hi) if saturating else wrap(t))
    return out


def ref_dot2(src, a, b, saturating):
    out = []
    for j in range(len(src)):
        t = int(src[j]) + int(a[2 * j]) * int(b[2 * j]) + int(a[2 * j + 1]) * int(b[2 * j + 1])
        out.append(sat(t, -2 ** 31, 2 ** 31 - 1) if saturating else s32(t))
    return out


class TestSeedExamples:
    def test_seed002_vpmaddubsw_saturates_at_32767_not_64770(self):
        a = np.zeros(16, np.uint8)
        b = np.zeros(16, np.int8)
        a[:2], b[:2] = 255, 127
        r = intrinsic("_mm_maddubs_epi16")(a, b)
        assert r[0] == 32767 and r[0] != 255 * 127 * 2 == 64770

    def test_seed002_s8s8_compensation_gives_255_instead_of_32258(self):
        """oneDNN's s8s8 via u8s8: shift a by +128, VPMADDUBSW, VPMADDWD with ones, subtract 128 * sum(b)."""
        a_s8 = np.array([127, 127, 0, 0] * 4, np.int8)
        b_s8 = np.array([127, 127, 0, 0] * 4, np.int8)
        a_u8 = (a_s8.astype(np.int16) + 128).astype(np.uint8)
        pairs = intrinsic("_mm_maddubs_epi16")(a_u8, b_s8)
        quads = intrinsic("_mm_madd_epi16")(pairs, np.ones(8, np.int16))
        compensation = -128 * b_s8.astype(np.int32).reshape(4, 4).sum(axis=1)
        c = intrinsic("_mm_add_epi32")(quads, compensation.astype(np.int32))
        exact = (a_s8.astype(np.int32) * b_s8).reshape(4, 4).sum(axis=1)
        assert c[0] == 255 and exact[0] == 32258

    def test_vpdpbusd_is_exact_where_vpmaddubsw_saturates(self):
        a = np.full(16, 255, np.uint8)
        b = np.full(16, 127, np.int8)
        r = intrinsic("_mm_dpbusd_epi32")(np.zeros(4, np.int32), a, b)
        assert list(r) == [4 * 255 * 127] * 4


WIDTHS = [(16, 8), (32, 16), (64, 32), (8, 4)]


@settings(max_examples=200)
@given(st.sampled_from([8, 16, 32, 64]).flatmap(lambda n: st.tuples(lanes_of(np.uint8, n), lanes_of(np.int8, n))))
def test_vpmaddubsw_matches_scalar_reading(ab):
    a, b = ab
    assert x86.vpmaddubsw(a, b).tolist() == ref_pmaddubsw(a, b)


@settings(max_examples=200)
@given(st.sampled_from([8, 16, 32]).flatmap(lambda n: st.tuples(lanes_of(np.int16, n), lanes_of(np.int16, n))))
def test_vpmaddwd_matches_scalar_reading(ab):
    a, b = ab
    assert x86.vpmaddwd(a, b).tolist() == ref_pmaddwd(a, b)


BYTE_DOTS = [  # model, a type, b type, accumulator type, saturating, (lo, hi) for saturation
    (x86.vpdpbusd, np.uint8, np.int8, np.int32, False), (x86.vpdpbusds, np.uint8, np.int8, np.int32, True),
    (x86.vpdpbssd, np.int8, np.int8, np.int32, False), (x86.vpdpbssds, np.int8, np.int8, np.int32, True),
    (x86.vpdpbsud, np.int8, np.uint8, np.int32, False), (x86.vpdpbsuds, np.int8, np.uint8, np.int32, True),
    (x86.vpdpbuud, np.uint8, np.uint8, np.uint32, False), (x86.vpdpbuuds, np.uint8, np.uint8, np.uint32, True),
]


@pytest.mark.parametrize("model,a_t,b_t,acc_t,saturating", BYTE_DOTS, ids=lambda v: getattr(v, "__name__", ""))
@settings(max_examples=100)
@given(data=st.data())
def test_byte_dot_products_match_scalar_reading(model, a_t, b_t, acc_t, saturating, data):
    n = data.draw(st.sampled_from([4, 8]))
    src, a, b = data.draw(lanes_of(acc_t, n)), data.draw(lanes_of(a_t, 4 * n)), data.draw(lanes_of(b_t, 4 * n))
    info = np.iinfo(acc_t)
    wrap = s32 if acc_t == np.int32 else (lambda t: t & 0xFFFFFFFF)
    assert model(src, a, b).tolist() == ref_dot4(src, a, b, saturating, int(info.min), int(info.max), wrap)


@pytest.mark.parametrize("model,saturating", [(x86.vpdpwssd, False), (x86.vpdpwssds, True)])
@settings(max_examples=100)
@given(data=st.data())
def test_word_dot_products_match_scalar_reading(model, saturating, data):
    src, a, b = data.draw(lanes_of(np.int32, 4)), data.draw(lanes_of(np.int16, 8)), data.draw(lanes_of(np.int16, 8))
    assert model(src, a, b).tolist() == ref_dot2(src, a, b, saturating)


def test_vpdpwssds_pair_sum_is_exact_before_saturation():
    """Hardware finding (docs/research/x86-int8-instructions.md#the-vpdpwssds-pair-sum-corner): 2 x (-32768)^2 = 2^31 is
    not wrapped before saturating."""
    a = np.full(8, -32768, np.int16)
    src = np.array([0, -1, -2 ** 31, -2 ** 31 + 1], np.int32)
    assert x86.vpdpwssds(src, a, a).tolist() == [2 ** 31 - 1, 2 ** 31 - 1, 0, 1]
    assert x86.vpdpwssd(src, a, a).tolist() == [s32(2 ** 31 + int(s)) for s in src]


def test_vpmaddwd_only_overflow_wraps_to_int32_min():
    a = np.full(8, -32768, np.int16)
    assert x86.vpmaddwd(a, a).tolist() == [-2 ** 31] * 4


def test_lanes_are_vectorized_over_leading_axes():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, (3, 5, 32)).astype(np.uint8)
    b = rng.integers(-128, 128, (3, 5, 32)).astype(np.int8)
    batched = x86.vpmaddubsw(a, b)
    assert batched.shape == (3, 5, 16)
    assert all(batched[i, j].tolist() == ref_pmaddubsw(a[i, j], b[i, j]) for i in range(3) for j in range(5))


class TestMasking:
    def test_merge_masking_takes_the_merge_source(self):
        a, b = np.full(32, 1, np.uint8), np.full(32, 3, np.int8)
        old = np.arange(16, dtype=np.int16) - 100
        r = intrinsic("_mm256_mask_maddubs_epi16")(old, 0b1010_0000_0000_0101, a, b)
        expect = [6 if (0b1010_0000_0000_0101 >> j) & 1 else int(old[j]) for j in range(16)]
        assert r.tolist() == expect

    def test_zero_masking_zeroes(self):
        a, b = np.full(64, 2, np.uint8), np.full(64, 5, np.int8)
        r = intrinsic("_mm512_maskz_maddubs_epi16")(0xF0F0F0F0, a, b)
        assert r.tolist() == [20 if (0xF0F0F0F0 >> j) & 1 else 0 for j in range(32)]

    def test_vpdpbusd_mask_merges_from_the_accumulator(self):
        src = np.arange(16, dtype=np.int32)
        a, b = np.full(64, 1, np.uint8), np.full(64, 1, np.int8)
        r = intrinsic("_mm512_mask_dpbusd_epi32")(src, 0x00FF, a, b)
        assert r.tolist() == [j + 4 for j in range(8)] + list(range(8, 16))
        z = intrinsic("_mm512_maskz_dpbusd_epi32")(0x00FF, src, a, b)
        assert z.tolist() == [j + 4 for j in range(8)] + [0] * 8

    def test_mask_bits_above_the_lane_count_are_ignored(self):
        src, a, b = np.zeros(4, np.int32), np.ones(16, np.uint8), np.ones(16, np.int8)
        assert intrinsic("_mm_maskz_dpbusd_epi32")(0xF3, src, a, b).tolist() == [4, 4, 0, 0]

    def test_per_register_masks_over_a_batch(self):
        a, b = np.ones((2, 16), np.uint8), np.ones((2, 16), np.int8)
        r = x86.vpmaddubsw(a, b, mask=np.array([1, 2], np.uint64), zeroing=True)
        assert r.tolist() == [[2, 0, 0, 0, 0, 0, 0, 0], [0, 2, 0, 0, 0, 0, 0, 0]]


class TestBadInput:
    def test_wrong_dtype_names_the_operand_and_never_casts(self):
        with pytest.raises(ValueError, match=r"operand 'b'.*int8.*got int16"):
            x86.vpmaddubsw(np.zeros(32, np.uint8), np.zeros(32, np.int16))

    def test_signed_where_unsigned_is_read(self):
        with pytest.raises(ValueError, match=r"operand 'a'.*uint8"):
            intrinsic("_mm_maddubs_epi16")(np.zeros(16, np.int8), np.zeros(16, np.int8))

    def test_lane_count_that_fits_no_register(self):
        with pytest.raises(ValueError, match=r"operand 'a': 24 u8 lanes = 192 bits does not fit a register"):
            x86.vpmaddubsw(np.zeros(24, np.uint8), np.zeros(24, np.int8))

    def test_intrinsic_width_is_enforced(self):
        with pytest.raises(ValueError, match=r"operand 'a'.*expected 64 \(512-bit\)"):
            intrinsic("_mm512_maddubs_epi16")(np.zeros(32, np.uint8), np.zeros(32, np.int8))

    def test_operands_of_different_widths(self):
        with pytest.raises(ValueError, match=r"'b' has 16 lanes but 'a' has 32"):
            x86.vpmaddubsw(np.zeros(32, np.uint8), np.zeros(16, np.int8))

    def test_accumulator_lanes_must_match(self):
        with pytest.raises(ValueError, match=r"operand 'src'"):
            x86.vpdpbusd(np.zeros(8, np.int32), np.zeros(16, np.uint8), np.zeros(16, np.int8))

    def test_python_lists_are_refused(self):
        with pytest.raises(ValueError, match=r"expected a numpy array"):
            x86.vpmaddwd([1] * 8, np.zeros(8, np.int16))

    def test_wrong_argument_count_shows_the_signature(self):
        with pytest.raises(ValueError, match=r"takes 4 arguments .*src:s32x16, k:mask16"):
            intrinsic("_mm512_mask_dpbusd_epi32")(np.zeros(16, np.int32), np.zeros(64, np.uint8), np.zeros(64, np.int8))

    def test_mask_out_of_range_and_of_wrong_type(self):
        with pytest.raises(ValueError, match=r"'k' must lie in \[0, 255\]"):
            intrinsic("_mm_maskz_dpbusd_epi32")(256, np.zeros(4, np.int32), np.zeros(16, np.uint8), np.zeros(16, np.int8))
        with pytest.raises(ValueError, match=r"'k' is a mask; expected an int"):
            intrinsic("_mm_maskz_dpbusd_epi32")(1.0, np.zeros(4, np.int32), np.zeros(16, np.uint8), np.zeros(16, np.int8))

    def test_merge_masking_without_merge_source(self):
        with pytest.raises(ValueError, match="needs the merge source"):
            x86.vpmaddubsw(np.zeros(16, np.uint8), np.zeros(16, np.int8), mask=3)

    def test_unknown_intrinsic(self):
        with pytest.raises(KeyError, match="no model for intrinsic"):
            intrinsic("_mm512_dpbusd_epi64")


ISSUE_INTRINSICS = ["_mm_maddubs_epi16", "_mm256_maddubs_epi16", "_mm512_maddubs_epi16", "_mm256_madd_epi16",
                    "_mm512_dpbusd_epi32", "_mm256_dpbusd_avx_epi32", "_mm512_mask_dpbusd_epi32"]


@pytest.mark.parametrize("name", ISSUE_INTRINSICS)
def test_the_intrinsics_the_issue_names_are_registered(name):
    assert intrinsic(name).name == name


def test_every_family_the_issue_names_is_modelled():
    for m in ["vpmaddubsw", "vpmaddwd", "vpdpbusd", "vpdpbusds", "vpdpwssd", "vpdpwssds", "vpdpbssd", "vpdpbssds",
              "vpdpbsud", "vpdpbsuds", "vpdpbuud", "vpdpbuuds", "vpaddsw", "vpaddw", "vpmovsxwd"]:
        inst = instruction(m)
        assert inst.model.__doc__ and "Intel" in inst.model.__doc__, m
        assert inst.intrinsics and inst.features and inst.overflow


def test_vpmaddubsw_register_widths():
    assert instruction("vpmaddubsw").widths == (64, 128, 256, 512)
    feats = {i.name: i.features for i in instruction("vpmaddubsw").intrinsics}
    assert feats["_mm_maddubs_epi16"] == ("ssse3",) and feats["_mm256_maddubs_epi16"] == ("avx2",)
    assert feats["_mm512_maddubs_epi16"] == ("avx512bw",) and feats["_mm_mask_maddubs_epi16"] == ("avx512bw", "avx512vl")


def test_every_intrinsic_runs_on_zero_registers():
    for intr in intrinsics("x86"):
        args = [np.zeros(p.lanes, p.dtype) if p.kind == "vec" else 0 for p in intr.params]
        r = intr(*args)
        assert r.dtype == intr.result.dtype and r.shape == (intr.result.lanes,), intr.name
