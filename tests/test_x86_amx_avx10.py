"""AVX10.2 VPDPB[SS,SU,UU]D(S) at 128/256/512 bits with write masks, and AMX-INT8 TDPB*D tiles.

AVX10.2 has no executor here (this CPU lacks it, and so do the emulators): its models are checked against a scalar
reading of the pseudocode, a plain Python loop written apart from the vectorized model, and stay
modelled-not-proven. AMX-INT8 runs natively (isa_models/native_amx.py) where the CPU and kernel allow; elsewhere
those tests skip with the reason."""
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lowp.isa_models import instruction, intrinsic, x86

AVX10_STEMS = ("dpbssd", "dpbssds", "dpbsud", "dpbsuds", "dpbuud", "dpbuuds")
TYPES = {"ss": (np.int8, np.int8), "su": (np.int8, np.uint8), "uu": (np.uint8, np.uint8)}


# -- the scalar reading of VPDPB[SS,SU,UU]D[S] (ISE 319433 / AVX10.2 operation blocks) ------------------------------

def scalar_vpdpb(stem, w, a, b, k=None, zeroing=False):
    a_t, b_t = TYPES[stem[3:5]]
    saturate = stem.endswith("s") and len(stem) == 7
    unsigned_acc = stem[3:5] == "uu"
    out = []
    for j in range(len(w)):
        if k is not None and not (k >> j) & 1:
            out.append(0 if zeroing else int(w[j]))
            continue
        total = int(w[j])
        for i in range(4):
            total += int(a[4 * j + i]) * int(b[4 * j + i])      # bytes already sign/zero-extended by their dtype
        if saturate:
            lo, hi = (0, 2 ** 32 - 1) if unsigned_acc else (-2 ** 31, 2 ** 31 - 1)
            total = min(max(total, lo), hi)
        else:
            total %= 2 ** 32
            if not unsigned_acc and total >= 2 ** 31:
                total -= 2 ** 32
        out.append(total)
    return out


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(AVX10_STEMS), st.sampled_from([128, 256, 512]), st.sampled_from(["plain", "mask", "maskz"]),
       st.data())
def test_avx10_2_models_match_the_scalar_reading(stem, width, form, data):
    prefix = {128: "_mm_", 256: "_mm256_", 512: "_mm512_"}[width]
    if form == "plain" and width < 512:
        name = f"{prefix}{stem}_epi32"             # the AVX-VNNI-INT8 spelling, same operation
    else:
        name = f"{prefix}{'' if form == 'plain' else form + '_'}{stem}_epi32"
    intr = intrinsic(name)
    a_t, b_t = TYPES[stem[3:5]]
    w_t = np.uint32 if stem[3:5] == "uu" else np.int32
    n = width // 8

    def lanes(t, count):
        info = np.iinfo(t)
        return np.array(data.draw(st.lists(st.one_of(st.sampled_from([int(info.min), int(info.max), 0]),
                                                     st.integers(int(info.min), int(info.max))),
                                           min_size=count, max_size=count)), dtype=np.int64).astype(t)
    w, a, b = lanes(w_t, n // 4), lanes(a_t, n), lanes(b_t, n)
    k = data.draw(st.integers(0, 2 ** (n // 4) - 1))
    if form == "plain":
        got, expected = intr(w, a, b), scalar_vpdpb(stem, w, a, b)
    elif form == "mask":
        got, expected = intr(w, k, a, b), scalar_vpdpb(stem, w, a, b, k)
    else:
        got, expected = intr(k, w, a, b), scalar_vpdpb(stem, w, a, b, k, zeroing=True)
    assert got.dtype == w_t and got.tolist() == expected


def test_avx10_2_registration():
    assert intrinsic("_mm512_dpbssd_epi32").features == ("avx10_2",)
    assert intrinsic("_mm512_maskz_dpbsuds_epi32").signature == \
        "_mm512_maskz_dpbsuds_epi32(k:mask16, src:s32x16, a:s8x64, b:u8x64) -> result:s32x16"
    assert intrinsic("_mm256_mask_dpbuud_epi32").features == ("avx10_2",)      # no avx512vl in AVX10
    assert intrinsic("_mm256_dpbuud_epi32").features == ("avx_vnni_int8",)   # the VEX form, reused
    assert instruction("vpdpbssd").widths == (128, 256, 512)


def test_avx10_2_is_reported_modelled_not_proven():
    from lowp.emulator.x86.native import NativeUnavailable, NativeX86
    try:
        native = NativeX86()
    except NativeUnavailable as e:
        pytest.skip(f"native x86 back end unavailable: {e}")
    if "avx10_2" in native.cpu_features:
        pytest.skip("this CPU has AVX10.2: the model can be proven here (lowp isa verify vpdpbssd)")
    assert native.unavailable(intrinsic("_mm512_dpbssd_epi32")) == "CPU lacks avx10_2"
    done = subprocess.run([sys.executable, "-m", "lowp", "isa", "verify", "_mm512_dpbssd_epi32",
                           "_mm512_mask_dpbuuds_epi32", "--arch", "x86"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "modelled, not proven" in done.stdout and "x86 AVX10.2 (modelled)" in done.stdout


# -- AMX-INT8: the scalar reading of TDPB*D ----------------------------------------------------------------------------

def scalar_tdpb(c, a, b):
    """FOR m, FOR k < tsrc1.colsb/4, FOR n < tsrcdest.colsb/4: DPBD(tmp.dword[n], tsrc1.row[m].dword[k],
    tsrc2.row[k].dword[n]); DPBD adds the four byte products to the dword, which wraps."""
    rows, n_dw = c.shape
    out = c.astype(np.int64).tolist()
    for m in range(rows):
        for k in range(a.shape[1] // 4):
            for n in range(n_dw):
                for i in range(4):
                    out[m][n] += int(a[m, 4 * k + i]) * int(b[k, 4 * n + i])
                out[m][n] = (out[m][n] + 2 ** 31) % 2 ** 32 - 2 ** 31
    return out


AMX_TYPES = {"tdpbssd": (np.int8, np.int8), "tdpbsud": (np.int8, np.uint8), "tdpbusd": (np.uint8, np.int8),
             "tdpbuud": (np.uint8, np.uint8)}


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(list(AMX_TYPES)), st.integers(1, 16), st.integers(1, 16), st.integers(1, 16),
       st.integers(0, 2 ** 32))
def test_amx_models_match_the_scalar_reading(mnemonic, m, k4, n, seed):
    rng = np.random.default_rng(seed)
    a_t, b_t = AMX_TYPES[mnemonic]
    a = rng.integers(np.iinfo(a_t).min, np.iinfo(a_t).max, size=(m, 4 * k4), endpoint=True).astype(a_t)
    b = rng.integers(np.iinfo(b_t).min, np.iinfo(b_t).max, size=(k4, 4 * n), endpoint=True).astype(b_t)
    c = rng.choice(np.array([-2 ** 31, 2 ** 31 - 1, 0, -1], np.int64), size=(m, n)).astype(np.int32)
    if seed % 2:
        c = rng.integers(-2 ** 31, 2 ** 31, size=(m, n)).astype(np.int32)
    assert getattr(x86, mnemonic)(c, a, b).tolist() == scalar_tdpb(c, a, b)


def test_amx_bad_tiles_are_refused():
    c, a, b = np.zeros((4, 4), np.int32), np.zeros((4, 16), np.int8), np.zeros((4, 16), np.int8)
    x86.tdpbssd(c, a, b)
    with pytest.raises(ValueError, match="tile 'a': expected dtype int8, got uint8"):
        x86.tdpbssd(c, a.view(np.uint8), b)
    with pytest.raises(ValueError, match="a palette-1 tile holds 1..16 rows"):
        x86.tdpbssd(np.zeros((17, 4), np.int32), np.zeros((17, 16), np.int8), b)
    with pytest.raises(ValueError, match="1..64 bytes"):
        x86.tdpbssd(c, np.zeros((4, 68), np.int8), np.zeros((17, 16), np.int8))
    with pytest.raises(ValueError, match="not a whole number of dwords"):
        x86.tdpbssd(c, np.zeros((4, 6), np.int8), b)
    with pytest.raises(ValueError, match="tsrcdest.rows must equal tsrc1.rows"):
        x86.tdpbssd(np.zeros((3, 4), np.int32), a, b)
    with pytest.raises(ValueError, match="tsrc2.rows must be tsrc1.colsb / 4 = 4"):
        x86.tdpbssd(c, a, np.zeros((3, 16), np.int8))
    with pytest.raises(ValueError, match="tsrc2.colsb must equal tsrcdest.colsb"):
        x86.tdpbssd(c, a, np.zeros((4, 12), np.int8))
    with pytest.raises(ValueError, match="expected \\(..., rows, columns\\)"):
        x86.tdpbssd(c, np.zeros(16, np.int8), b)


@pytest.fixture(scope="module")
def amx():
    from lowp.emulator.x86.native_amx import NativeAmx
    runner = NativeAmx()
    reason = runner.unavailable()
    if reason:
        pytest.skip(f"AMX-INT8 cannot run here: {reason}")
    return runner


@pytest.mark.parametrize("mnemonic", list(AMX_TYPES))
def test_amx_models_match_the_cpu(mnemonic, amx):
    from lowp.isa_models.verify.amx_proof import verify
    verdict = verify(mnemonic, amx, count=32)
    assert verdict.status == "verified", verdict.disagreement
    assert verdict.tiles > 200


def test_amx_proof_can_fail(amx):
    """The comparison is real: a runner that forgets the accumulator disagrees."""
    from lowp.isa_models.verify.amx_proof import verify

    class Forgetful:
        def unavailable(self, mnemonic):
            return None

        def run(self, mnemonic, c, a, b):
            return amx.run(mnemonic, np.zeros_like(c), a, b)
    verdict = verify("tdpbusd", Forgetful(), count=4)
    assert verdict.status == "FAILED" and "model" in verdict.disagreement
