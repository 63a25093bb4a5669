"""float32 -> binary16 and float32 -> bfloat16, the stores of XNNPACK's qd8-f16 and qd8-bf16 kernels
(lowp.isa_models.float32 fp16_bits, bf16_bits): each against its definition (an exact rational reading, numpy's
IEEE cast, XNNPACK's integer recipe written out per element), against the host CPU's F16C VCVTPS2PH and
AVX512-BF16 VCVTNEPS2BF16 (where it has them), FCVTN under Unicorn and BFCVTN under qemu-aarch64."""
from __future__ import annotations

import platform
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from lowp.isa_models.float32 import BF16_CONVERSIONS, _fp16_bits_scaled, bf16_bits, bf16_to_f32, f16_values, fp16_bits

HERE = Path(__file__).resolve().parent
F32 = np.float32


def _patterns(seed: int = 7) -> np.ndarray:
    """float32 bit patterns: a stride through all of them, every f16 rounding tie and its neighbours in the
    normal, subnormal and overflow ranges, signed zeros, infinities, NaNs, random words; a multiple of 4."""
    rng = np.random.default_rng(seed)
    stride = np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32)
    halves = np.arange(0, 0x7C01, dtype=np.float64)                      # every finite half magnitude
    values = f16_values(halves.astype(np.uint16)).astype(np.float64)
    ties = ((values[:-1] + values[1:]) / 2).astype(F32).view(np.uint32).astype(np.int64)   # exact in float32
    near = (ties[:, None] + np.arange(-2, 3)).reshape(-1)
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFC12345, 0x7FFFFFFF,
                        0x00000001, 0x807FFFFF, 0x477FEFFF, 0x477FF000, 0x477FF001, 0x7F7FFFFF, 0x3F808000,
                        0x3F818000, 0x3F80FFFF], np.int64)
    words = np.concatenate([stride, near.astype(np.uint32), (near | 0x80000000).astype(np.uint32),
                            special.astype(np.uint32), rng.integers(0, 1 << 32, 1 << 15, dtype=np.uint64).astype(np.uint32)])
    return words[:words.size - words.size % 4].copy()


def _nan(bits) -> np.ndarray:
    return ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x7FFFFF) != 0)


# ---- against the definitions -------------------------------------------------------------------------------
def test_fp16_rne_is_numpys_ieee_cast_and_nan_keeps_its_payload_top():
    w = _patterns()
    x = w.view(F32)
    with np.errstate(all="ignore"):
        ieee = x.astype(np.float16).view(np.uint16)
    got = fp16_bits(x)
    nan = _nan(w)
    assert np.array_equal(got[~nan], ieee[~nan])
    assert np.array_equal(got[nan], ((w[nan] >> 16) & 0x8000 | 0x7E00 | ((w[nan] & 0x7FFFFF) >> 13)).astype(np.uint16))
    # the exact scaling, which fp16_bits takes where an input is not finite, agrees with the cast on every pattern
    scaled = _fp16_bits_scaled(x, "rne")
    assert np.array_equal(scaled[~nan], ieee[~nan]) and np.array_equal(scaled[nan], got[nan])
    assert np.array_equal(fp16_bits(x[~nan]), ieee[~nan])        # no NaN among them: the cast's path


def _exact_half(value: Fraction, rounding: str) -> int:
    """The binary16 bits of a nonnegative rational: the least grid point at or below (trunc) or the nearest (ties
    to even) on the half grid (2^-24 below 2^-14, else 2^(e-10)), infinity (or 65504 for trunc) past it."""
    if value == 0:
        return 0
    e = value.numerator.bit_length() - value.denominator.bit_length()
    while Fraction(2) ** e > value:
        e -= 1
    while Fraction(2) ** (e + 1) <= value:
        e += 1
    ulp = Fraction(2) ** (max(e, -14) - 10)
    q, r = divmod(value, ulp)
    q = int(q)
    if rounding == "rne" and (r > ulp / 2 or (r == ulp / 2 and q % 2)):
        q += 1
    bits = ((max(e, -14) + 15) << 10) + q - 1024
    return min(bits, 0x7C00 if rounding == "rne" else 0x7BFF)


@pytest.mark.parametrize("rounding", ["rne", "trunc"])
def test_fp16_matches_an_exact_rational_reading(rounding):
    w = _patterns(11)
    w = w[((w & 0x7F800000) != 0x7F800000)][::17]                       # finite
    got = fp16_bits(w.view(F32), rounding)
    for word, bits in zip(w.tolist(), got.tolist()):
        value = Fraction(float(np.uint32(word).view(F32)))
        want = _exact_half(abs(value), rounding) | (0x8000 if word >> 31 else 0)
        assert bits == want, f"{word:#010x}: {bits:#06x}, the rational reading {want:#06x}"


def _bf16_recipe(word: int, conversion: str) -> int:
    """XNNPACK's math_cvt_bf16_fp32 (src/xnnpack/math.h L467-483) and Intel's convert_fp32_to_bfloat16
    (VCVTNEPS2BF16), element by element in Python integers."""
    exponent, mantissa = (word >> 23) & 0xFF, word & 0x7FFFFF
    if conversion == "rne-daz" and exponent == 0:
        return (word >> 16) & 0x8000
    if exponent == 0xFF and mantissa and conversion != "rne-nonan":
        return ((word | 0x400000) >> 16) & 0xFFFF
    return (((word + 0x7FFF + ((word >> 16) & 1)) & 0xFFFFFFFF) >> 16)


@pytest.mark.parametrize("conversion", sorted(BF16_CONVERSIONS))
def test_bf16_conversions_are_their_integer_recipes(conversion):
    w = _patterns(13)[::7]
    got = bf16_bits(w.view(F32), conversion)
    assert got.tolist() == [_bf16_recipe(int(v), conversion) for v in w.tolist()]


def test_bf16_rne_is_the_nearest_bfloat16_and_the_conversions_differ_only_where_named():
    w = _patterns(17)
    x = w.view(F32)
    finite = (w & 0x7F800000) != 0x7F800000
    got = bf16_bits(x)
    with np.errstate(all="ignore"):          # NaN inputs: excluded by `ok`
        back = bf16_to_f32(got).astype(np.float64)
        below = bf16_to_f32((w >> 16).astype(np.uint16)).astype(np.float64)
        above = bf16_to_f32(((w >> 16) + 1).astype(np.uint16)).astype(np.float64)
        x64 = x.astype(np.float64)
        ok = finite & np.isfinite(above) & np.isfinite(back)
        nearest = np.minimum(np.abs(x64 - below), np.abs(x64 - above))
        assert (np.abs(x64 - back)[ok] <= nearest[ok]).all()
    subnormal = ((w & 0x7F800000) == 0) & ((w & 0x7FFFFF) != 0)
    assert np.array_equal(bf16_bits(x, "rne-daz") != got, subnormal & ((got & 0x7FFF) != 0))
    assert not (bf16_bits(x, "rne-nonan") != got)[~_nan(w)].any()


# ---- against the instructions --------------------------------------------------------------------------------
def _native(source_flags, names):
    cffi = pytest.importorskip("cffi")
    from lowp.emulator.x86.native import NativeUnavailable, build_shared_library
    define, flags, stem = source_flags
    try:
        path = build_shared_library([HERE / "x86" / "float_half.c"], ("-O2", f"-D{define}", *flags), stem)
    except NativeUnavailable as e:
        pytest.skip(str(e))
    ffi = cffi.FFI()
    ffi.cdef("\n".join(f"void lowp_{n}(const float *, uint16_t *, size_t);" for n in names))
    lib = ffi.dlopen(str(path))

    def run(name, x):
        out = np.zeros(x.size, np.uint16)
        getattr(lib, f"lowp_{name}")(ffi.cast("const float *", ffi.from_buffer(x)),
                                     ffi.cast("uint16_t *", ffi.from_buffer(out)), x.size)
        return out
    return run


def _host_has(flag: str) -> bool:
    from lowp.emulator.host import proc_cpuinfo_flags
    return flag in proc_cpuinfo_flags()


x86 = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="needs an x86-64 host")


@x86
@pytest.mark.parametrize("rounding", ["rne", "trunc"])
def test_fp16_is_f16c_vcvtps2ph(rounding):
    if not _host_has("f16c"):
        pytest.skip("this CPU has no F16C (VCVTPS2PH)")
    run = _native(("LOWP_F16C", ("-mf16c",), "float-half-f16c"), ["vcvtps2ph_rne", "vcvtps2ph_trunc"])
    x = _patterns().view(F32)
    assert np.array_equal(run(f"vcvtps2ph_{rounding}", x), fp16_bits(x, rounding))


@x86
def test_bf16_daz_is_avx512bf16_vcvtneps2bf16():
    if not _host_has("avx512_bf16"):
        pytest.skip("this CPU has no AVX512-BF16 (VCVTNEPS2BF16); Bochs does not model it")
    run = _native(("LOWP_AVX512BF16", ("-mavx512bf16", "-mavx512vl", "-mavx512f"), "float-half-bf16"),
                  ["vcvtneps2bf16"])
    x = _patterns().view(F32)
    got = run("vcvtneps2bf16", x)
    assert np.array_equal(got, bf16_bits(x, "rne-daz"))
    assert not np.array_equal(got, bf16_bits(x, "rne"))          # the patterns reach the subnormal difference


def _aarch64_source():
    return HERE / "aarch64" / "half_convert.c"


def _call(machine, name, x):
    out = np.zeros(x.size, np.uint16)
    r = machine.call(name, x, out, x.size)
    return r.arrays[1]


def test_fp16_is_fcvtn_under_unicorn():
    from lowp.emulator import Machine, build
    x = _patterns()[:1 << 14].view(F32).copy()
    machine = Machine(build(_aarch64_source()))
    assert np.array_equal(_call(machine, "lowp_fcvtn", x), fp16_bits(x))


def test_bf16_rne_is_bfcvtn_under_qemu():
    from lowp.emulator.qemu import QemuMachine, build_for_qemu, unavailable
    if unavailable():
        pytest.skip(unavailable())
    x = _patterns()[:1 << 14].view(F32).copy()
    with QemuMachine(build_for_qemu(_aarch64_source(), cpu="cortex_a76+i8mm+bf16")) as m:
        got = _call(m, "lowp_bfcvtn", x)
        assert np.array_equal(got, bf16_bits(x, "rne"))
        assert np.array_equal(_call(m, "lowp_fcvtn", x), fp16_bits(x))


# ---- the qd8-f16 stages and contracts --------------------------------------------------------------------------
def test_qd8_f16_stages_are_the_f32_stages_stored_as_halves():
    from lowp.conformance.contracts.output import OUTPUT_CONTRACTS
    from lowp.isa_models.requant import OUTPUT_STAGES
    rng = np.random.default_rng(3)
    for name in ("qd8-f16", "qdu8-f16", "qd8-f16-qc4w"):
        contract = OUTPUT_CONTRACTS[name]
        for style in ("typical", "ends", "limits"):
            q = contract.draw(rng, 3, 5, "f16", style)
            acc = rng.integers(-(1 << 24), 1 << 24, (3, 5))
            for stage in contract.accepted:
                f32 = OUTPUT_STAGES[stage.replace("qd8-f16", "qd8-f32")].compute(acc, q, "f32")
                got = OUTPUT_STAGES[stage].compute(acc, q, "f16")
                assert got.dtype == np.float16
                assert np.array_equal(got.view(np.uint16), fp16_bits(f32))
                with np.errstate(over="ignore"):
                    assert np.array_equal(got.view(np.uint16), f32.astype(np.float16).view(np.uint16))
            assert not contract.domain_problems(q, 3, 5, "f16")
        assert contract.domain_problems({**q, "output_min": F32(0.1), "output_max": F32(1)}, 3, 5, "f16")
