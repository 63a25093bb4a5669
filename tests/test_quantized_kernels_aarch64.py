"""lowp's own AArch64 rndnu kernels with XNNPACK's ukernel ABI (kernels/quantized/aarch64.toml), run under Unicorn
from the TOML alone: lowp packs the weights, builds the rndnu_neon params from the float scale and calls the ukernel
once per MR rows.

Each run is compared bit for bit with the kernel's own prediction (its model by parts) and with an independent
reading written here from XNNPACK's documented facts: the params from the float's bits as
xnn_init_qs8_conv_minmax_rndnu_neon_params computes them (google/XNNPACK src/microparams-init.c), then one exact
integer step per instruction. Shapes straddle the tiles (mr 4 or 1, nr 8, kr 1 or 8); scales reach both ends XNNPACK
accepts ([2^-32, 256)) and the 0.5 where the pre-shift starts; biases sit at the int32 limits.
"""
from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import runner

import lowp.kernels
from lowp.kernels import load_toml

pytestmark = pytest.mark.emulated

TOML = Path(lowp.kernels.__file__).parent / "quantized" / "aarch64.toml"
C_KERNEL = "xnn_qs8_rndnu_4x8_neon_mlal_lane"
ASM_KERNEL = "xnn_qs8_rndnu_1x8c8_neon_mlal_asm"
I32 = (-(1 << 31), (1 << 31) - 1)
# The ends of the scale range xnn_init_qs8_conv_minmax_rndnu_neon_params asserts (scale >= 0x1.0p-32f, < 256.0f),
# and around 0.5: below it the pre-shift is 0, from it on a left shift of 1..9 (SQSHL saturates there).
SCALE_ENDS = (np.float32(2.0 ** -32), np.nextafter(np.float32(2.0 ** -32), np.float32(1)),
              np.nextafter(np.float32(0.5), np.float32(0)), np.float32(0.5), np.float32(1.0),
              np.nextafter(np.float32(256), np.float32(0)))


@pytest.fixture(scope="module")
def kernels():
    from lowp.kernels.registry import _KERNELS
    for name in (C_KERNEL, ASM_KERNEL):
        _KERNELS.pop(name, None)
    return {k.name: k for k in load_toml(TOML)}


# ---- the independent reading ------------------------------------------------------------------------------------
def rndnu_fields(scale) -> tuple[int, int, int]:
    """(right_pre_shift, multiplier, right_post_shift) as xnn_init_qs8_conv_minmax_rndnu_neon_params derives them:
    multiplier = (mantissa | implicit 1) << 7, shift = 127 + 31 - 32 - biased exponent, post = max(shift, 1),
    pre = shift - post; the struct holds -pre and -post."""
    bits = int(np.float32(scale).view(np.uint32))
    multiplier = ((bits & 0x7FFFFF) | 0x800000) << 7
    shift = 127 + 31 - 32 - (bits >> 23)
    post = max(shift, 1)
    return -(shift - post), multiplier, -post


def clamp(x, lo, hi):
    return np.minimum(np.maximum(x, lo), hi)


def sqshl(x, n):                 # ARM SQSHL (register), n >= 0: x * 2^n saturated to int32
    return clamp(x * (1 << n), *I32)


def sshl(x, n):                  # ARM SSHL (register), n >= 0: x * 2^n wrapped to int32 (XNNPACK's .S kernels)
    return (x * (1 << n) - I32[0]) % (1 << 32) + I32[0]


def sqdmulh(x, m):               # ARM SQDMULH: (2 x m) >> 32, saturated (only INT32_MIN^2 saturates; m >= 2^30 here)
    return clamp((2 * x * m) >> 32, *I32)


def srshl_right(x, n):           # ARM SRSHL by -n (n >= 1): (x + 2^(n-1)) >> n, in wider precision
    return (x + (1 << (n - 1))) >> n


def rndnu(acc, q, pre_shift=sqshl) -> np.ndarray:
    """The NEON rndnu output stage on int32 accumulators (bias and zero points already in), one step a line."""
    right_pre, multiplier, right_post = rndnu_fields(np.asarray(q["scale"]).reshape(-1)[0])
    x = pre_shift(acc.astype(object), right_pre)
    x = sqdmulh(x, multiplier)
    x = srshl_right(x, -right_post)
    x = clamp(x, -(1 << 15), (1 << 15) - 1)                              # SQXTN to int16
    x = clamp(x + int(q["output_zero_point"]), -(1 << 15), (1 << 15) - 1)  # SQADD
    x = clamp(x, -128, 127)                                              # SQXTN to int8
    return clamp(x, int(q["output_min"]), int(q["output_max"])).astype(np.int8)   # SMAX, SMIN


def accumulators(A, B, q, *, int16_pairs=False) -> np.ndarray:
    """bias + sum_k (A - a_zp) B, modulo 2^32 (int32 lanes; XNNPACK packs bias - a_zp * column sums). int16_pairs:
    the 1x8c8 kernel's SMULL + SMLAL, which adds products k and k + 8 of each 16-k block in one int16 lane first."""
    a, b = A.astype(object), B.astype(object)
    if int16_pairs:
        K = A.shape[1]
        Kp = -(-K // 16) * 16
        a = np.pad(a, ((0, 0), (0, Kp - K)), constant_values=0)
        b = np.pad(b, ((0, Kp - K), (0, 0)), constant_values=0)
        prods = a[:, :, None] * b[None, :, :]                              # (M, Kp, N)
        blocks = prods.reshape(A.shape[0], Kp // 16, 2, 8, B.shape[1])
        lanes = blocks[:, :, 0] + blocks[:, :, 1]
        lanes = (lanes + (1 << 15)) % (1 << 16) - (1 << 15)
        raw = lanes.sum(axis=(1, 2))
    else:
        raw = a @ b
    acc = raw - int(q["a_zero_point"]) * b.sum(axis=0) + np.asarray(q["bias"]).astype(object)
    return (acc - I32[0]) % (1 << 32) + I32[0]


# ---- cases ------------------------------------------------------------------------------------------------------
def operands(rng, M, N, K, b_lo=-128):
    return (rng.integers(-128, 128, (M, K)).astype(np.int8), rng.integers(b_lo, 128, (K, N)).astype(np.int8))


def quant(rng, N, scale, *, bias=None, a_zp=None, c_zp=None, lo=-128, hi=127) -> dict:
    if bias is None:
        bias = rng.integers(-20000, 20000, N)
    return {"bias": np.broadcast_to(np.asarray(bias, np.int64), (N,)).astype(np.int32),
            "scale": np.full(N, scale, np.float32),
            "a_zero_point": int(rng.integers(-128, 128)) if a_zp is None else a_zp,
            "output_zero_point": int(rng.integers(-128, 128)) if c_zp is None else c_zp,
            "output_min": lo, "output_max": hi}


def run_and_compare(kern, A, B, q, seed):
    C = runner(kern).run(A, B, seed=seed, quant=q)
    assert C.dtype == np.int8 and C.shape == (A.shape[0], B.shape[1])
    predicted = kern.predict(A, B, q)
    mine = rndnu(accumulators(A, B, q), q)
    where = f"{kern.name} {A.shape[0]}x{B.shape[1]}x{A.shape[1]} scale={q['scale'][0]!r} q={q}"
    np.testing.assert_array_equal(C, predicted, err_msg=f"kernel vs its model: {where}")
    np.testing.assert_array_equal(C, mine, err_msg=f"kernel vs the independent reading: {where}")
    return C


# Shapes around the tiles: M across mr (4) and 2 mr, N across nr (8) and 2 nr, K across 8 (the C kernel's unrolling
# and the .S kernel's kr) and 16 (the .S kernel's SMLAL step), with the remainders 1..7.
MS = (1, 3, 4, 5, 8, 9)
NS = (1, 7, 8, 9, 16, 17)
KS = (1, 2, 7, 8, 9, 15, 16, 17, 24, 31, 40)


@pytest.mark.parametrize("name", [C_KERNEL, ASM_KERNEL])
def test_tile_edges_match_the_model_and_the_reading_bit_for_bit(kernels, name):
    kern = kernels[name]
    b_lo = kern.domain.b[0]
    rng = np.random.default_rng(11)
    for i, (N, K) in enumerate(itertools.product(NS, KS)):
        M = MS[i % len(MS)]
        scale = np.float32(2.0 ** rng.uniform(-18, -6))     # outputs spread over int8, not all saturated
        A, B = operands(rng, M, N, K, b_lo)
        run_and_compare(kern, A, B, quant(rng, N, scale), seed=i)


@pytest.mark.parametrize("name", [C_KERNEL, ASM_KERNEL])
def test_scale_ends_and_int32_biases(kernels, name):
    """Scales at XNNPACK's ends with biases at the int32 limits and zero points at both ends of int8: the pre-shift
    saturates (SQSHL), SQADD saturates in int16, the int32 lanes wrap where bias - a_zp * colsum leaves int32."""
    kern = kernels[name]
    rng = np.random.default_rng(5)
    biases = (I32[1], I32[0], I32[1] - 3000, I32[0] + 3000, 0)
    pre_shift_mattered = False
    for i, (scale, bias) in enumerate(itertools.product(SCALE_ENDS, biases)):
        M, N, K = (5, 9, 17) if i % 2 else (4, 8, 16)
        A, B = operands(rng, M, N, K, kern.domain.b[0])
        q = quant(rng, N, scale, bias=bias, a_zp=(-128, 127)[i % 2], c_zp=(-128, 127, 0)[i % 3],
                  lo=(-128, -100)[i % 2], hi=(127, 100)[i % 2])
        C = run_and_compare(kern, A, B, q, seed=100 + i)
        acc = accumulators(A, B, q)
        pre_shift_mattered |= bool((rndnu(acc, q, pre_shift=sshl) != C).any())
    # These cases tell a saturating pre-shift from XNNPACK's .S kernels' wrapping SSHL: a kernel doing that fails.
    assert pre_shift_mattered


def test_the_asm_kernel_wraps_outside_its_weight_domain(kernels):
    """b = -128 against a = -128 in both halves of a 16-k block: 2 * 16384 = 32768 wraps in the int16 lane. The
    claimed domain (b in [-127, 127], XNNPACK's tester's weight range) excludes it; the kernel's model follows it."""
    kern = kernels[ASM_KERNEL]
    assert kern.domain.b == (-127, 127)
    rng = np.random.default_rng(3)
    A = np.full((2, 16), -128, np.int8)
    B = rng.integers(-128, 128, (16, 9)).astype(np.int8)
    B[:, 0] = -128
    q = quant(rng, 9, np.float32(2.0 ** -12), bias=0, a_zp=0, c_zp=0)
    C = runner(kern).run(A, B, seed=7, quant=q)
    wrapped = rndnu(accumulators(A, B, q, int16_pairs=True), q)
    exact = rndnu(accumulators(A, B, q), q)
    np.testing.assert_array_equal(C, wrapped)
    np.testing.assert_array_equal(C, kern.predict(A, B, q))
    assert (C[:, 0] != exact[:, 0]).all()


@pytest.mark.parametrize("name", [C_KERNEL, ASM_KERNEL])
def test_the_declared_over_read_is_what_the_kernel_needs(kernels, name):
    """K = 9: the last row's A is read 8 bytes from k = 8, 7 bytes past its end. Declared 7 it runs; 6 faults on A."""
    from lowp.emulator.errors import OutOfBounds
    kern = kernels[name]
    assert kern.overread == {"A": 7}
    rng = np.random.default_rng(9)
    A, B = operands(rng, 5, 8, 9, kern.domain.b[0])
    q = quant(rng, 8, np.float32(0.01))
    run_and_compare(kern, A, B, q, seed=1)
    tight = dataclasses.replace(kern, overread={"A": 6})
    with pytest.raises(OutOfBounds) as e:
        runner(tight).run(A, B, seed=1, quant=q)
    assert e.value.buffer == "A" and e.value.access == "read"


@pytest.mark.parametrize("name", [C_KERNEL, ASM_KERNEL])
def test_the_claimed_instructions_run_once_per_lane_group(kernels, name):
    """A 4x8x64 GEMM: one SQSHL, SQDMULH and SRSHL per 4 outputs (both kernels requantize 4 int32 lanes at a time);
    SMLAL 2 per row per k (C: by lane, 4 columns each) or 1 per column per 16 k (.S: 8 lanes of two k)."""
    kern = kernels[name]
    rng = np.random.default_rng(2)
    M, N, K = 4, 8, 64
    A, B = operands(rng, M, N, K, kern.domain.b[0])
    ex = runner(kern)
    ex.run(A, B, seed=0, quant=quant(rng, N, np.float32(0.003)), mnemonics=True)
    counts = ex.last.mnemonics
    for mnemonic in ("sqshl", "sqdmulh", "srshl"):
        assert counts[mnemonic] == M * N // 4, (mnemonic, counts)
    smlal = counts.get("smlal", 0) + counts.get("smlal2", 0)
    assert smlal == (M * K * 2 if kern.tile.kr == 1 else M * N * K // 16), counts
    assert set(kern.requires) <= set(counts)
