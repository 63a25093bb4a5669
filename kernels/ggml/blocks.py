"""ggml's block formats: each struct of ggml-common.h as a numpy record dtype, decoded to what ggml's kernels read.

A block decodes to `codes` (the small integers the kernels multiply: q - 8 for q4_0, the doubled E2M1 value for
mxfp4, the 6-bit q of q6_K minus 32), the float32 `scale` each code is multiplied by, and for the formats with a
minimum the float32 `offset` added after (x = scale * code + offset). scale and offset are computed in float32 in
the order ggml's dequantize_row_<type> (ggml-quants.c) computes them, so `dequantize` is that function bit for bit;
every such scale is exact in float32 (an fp16 times an integer of at most 8 bits), only the final product can round.
Any bytes are a valid block (ggml-common.h: plain structs), NaN and infinite fp16 scales included.

Sources: ggml-org/ggml @d99724f src/ggml-common.h (structs, kvalues tables), src/ggml-quants.c (dequantize_row_*),
src/ggml-impl.h L477-515 (E8M0 and UE4M3 decoding).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Callable

import numpy as np

from lowp.kernels.ggml.grids import KMASK, KSIGNS, Grids, from_gguf

QK_K = 256                                   # ggml-common.h: the K-quants' super-block
KVALUES_FP4 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], np.int32)   # E2M1 doubled
KVALUES_IQ4NL = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.int32)


@dataclass(frozen=True)
class Decoded:
    """One row of blocks, (nb, qk) each: x = f32(f32(scale * codes) + offset) as ggml dequantizes."""
    codes: np.ndarray                       # int32
    scale: np.ndarray                       # float32
    offset: np.ndarray | None = None        # float32, or None where the format has no minimum

    def dequantize(self) -> np.ndarray:
        with np.errstate(all="ignore"):
            x = (self.scale * self.codes.astype(np.float32)).astype(np.float32)
            return x if self.offset is None else (x + self.offset).astype(np.float32)


@dataclass(frozen=True)
class Format:
    """A block format: `qk` elements in `dtype.itemsize` bytes, read by `read` (records -> Decoded)."""
    name: str
    qk: int
    dtype: np.dtype
    read: Callable[[np.ndarray], Decoded]

    def decode(self, records: np.ndarray) -> Decoded:
        with np.errstate(all="ignore"):      # any bytes are a block: NaN and infinite scales included
            return self.read(records)

    def records(self, raw) -> np.ndarray:
        """The blocks of `raw` (bytes, or a uint8 array of a whole number of blocks) as records."""
        data = np.ascontiguousarray(np.frombuffer(raw, np.uint8) if isinstance(raw, (bytes, bytearray))
                                    else np.asarray(raw, np.uint8)).reshape(-1)
        if data.size % self.dtype.itemsize:
            raise ValueError(f"{self.name}: {data.size} bytes is not a whole number of "
                             f"{self.dtype.itemsize}-byte blocks")
        return data.view(self.dtype)

    def dequantize(self, raw) -> np.ndarray:
        """ggml's dequantize_row_<name>: the float32 values of the blocks in `raw`, flat."""
        return self.decode(self.records(raw)).dequantize().reshape(-1)


def _f16(field: np.ndarray) -> np.ndarray:
    return field.view(np.float16).astype(np.float32)


def _per_element(values: np.ndarray, repeat: int) -> np.ndarray:
    """(nb, groups) -> (nb, groups * repeat): each group's value for each of its elements."""
    return np.repeat(values.astype(np.float32), repeat, axis=-1)


def _nibbles(qs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    q = qs.astype(np.int32)
    return q & 0xF, q >> 4


def _low_then_high(qs: np.ndarray) -> np.ndarray:
    """The q4_0 order: byte j holds element j (low nibble) and element j + qk/2 (high nibble)."""
    low, high = _nibbles(qs)
    return np.concatenate([low, high], axis=-1)


def _bits(data: np.ndarray, width: int) -> np.ndarray:
    """The `width`-bit fields of each byte, lowest first: (..., n) bytes -> (..., n * 8 / width)."""
    q = data.astype(np.int32)[..., None] >> np.arange(0, 8, width)
    return (q & ((1 << width) - 1)).reshape(*data.shape[:-1], -1)


def _fifth_bits(qh: np.ndarray) -> np.ndarray:
    """q5_0/q5_1: bit j of the little-endian uint32 qh is bit 4 of element j."""
    return _bits(qh, 1) << 4


def _e8m0_half(e: np.ndarray) -> np.ndarray:
    """GGML_E8M0_TO_FP32_HALF (ggml-impl.h L477): 2^(e - 128) as float32, denormal for e < 2."""
    e = e.astype(np.uint32)
    bits = np.where(e < 2, np.uint32(0x00200000) << e, (e - 1) << 23).astype(np.uint32)
    return bits.view(np.float32)


def _ue4m3_half(x: np.ndarray) -> np.ndarray:
    """ggml_ue4m3_to_fp32 (ggml-impl.h L502): the UE4M3 value times 0.5; 0 and 0x7F decode to 0."""
    x = x.astype(np.int32)
    exp, man = (x >> 3) & 0xF, x & 7
    raw = np.where(exp == 0, np.ldexp(man.astype(np.float32), -9),
                   np.ldexp(1.0 + man.astype(np.float32) / 8.0, exp - 7)).astype(np.float32)
    return np.where((x == 0) | (x == 0x7F), np.float32(0), raw * np.float32(0.5)).astype(np.float32)


def _scale_min_k4(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """get_scale_min_k4 (ggml-quants.c L880) for j = 0..7: the 6-bit scales and mins of q4_K and q5_K."""
    q = scales.astype(np.int32)
    sc = np.concatenate([q[:, 0:4] & 63, (q[:, 8:12] & 0xF) | ((q[:, 0:4] >> 6) << 4)], axis=1)
    mn = np.concatenate([q[:, 4:8] & 63, (q[:, 8:12] >> 4) | ((q[:, 4:8] >> 6) << 4)], axis=1)
    return sc, mn


# ---- the formats, in ggml-common.h's order ------------------------------------------------------------------------
def _q1_0(b):
    """block_q1_0: bit j of qs is element j; 1 is +d, 0 is -d."""
    return Decoded(_bits(b["qs"], 1) * 2 - 1, _per_element(_f16(b["d"])[:, None], 128))


def _q2_0(b):
    """block_q2_0: 2-bit fields lowest first, 00 = -1 ... 11 = +2."""
    return Decoded(_bits(b["qs"], 2) - 1, _per_element(_f16(b["d"])[:, None], 64))


def _q4_0(b):
    return Decoded(_low_then_high(b["qs"]) - 8, _per_element(_f16(b["d"])[:, None], 32))


def _q4_1(b):
    return Decoded(_low_then_high(b["qs"]), _per_element(_f16(b["d"])[:, None], 32),
                   _per_element(_f16(b["m"])[:, None], 32))


def _q5_0(b):
    return Decoded((_low_then_high(b["qs"]) | _fifth_bits(b["qh"])) - 16, _per_element(_f16(b["d"])[:, None], 32))


def _q5_1(b):
    return Decoded(_low_then_high(b["qs"]) | _fifth_bits(b["qh"]), _per_element(_f16(b["d"])[:, None], 32),
                   _per_element(_f16(b["m"])[:, None], 32))


def _q8_0(b):
    return Decoded(b["qs"].astype(np.int32), _per_element(_f16(b["d"])[:, None], 32))


def _q8_1(b):
    """block_q8_1: s = d * sum(qs) is a stored field (the kernels read it, never recompute it); not in x."""
    return _q8_0(b)


def _mxfp4(b):
    return Decoded(KVALUES_FP4[_low_then_high(b["qs"])], _per_element(_e8m0_half(b["e"])[:, None], 32))


def _nvfp4(b):
    """block_nvfp4: four 16-element sub-blocks, each with its UE4M3 scale and the q4_0 nibble order within it."""
    nb = b.shape[0]
    codes = KVALUES_FP4[_low_then_high(b["qs"].reshape(nb, 4, 8))].reshape(nb, 64)
    return Decoded(codes, _per_element(_ue4m3_half(b["d"]), 16))


def _tq_trits(q: np.ndarray, n: int) -> np.ndarray:
    """tq1_0's base-3 digits: digit n of byte q is ((uint8)(q * 3^n) * 3) >> 8 (dequantize_row_tq1_0)."""
    return ((q.astype(np.int32) * 3 ** n & 0xFF) * 3) >> 8


def _tq1_0(b):
    """block_tq1_0: qs[0:32] gives elements 0..159 (digit n of byte m is element 32n + m), qs[32:48] gives 160..239
    (16 a digit), qh[0:4] gives 240..255 (digit n of byte j is element 240 + 4n + j)."""
    qs, qh = b["qs"], b["qh"]
    parts = [_tq_trits(qs[:, 0:32], n) for n in range(5)] + [_tq_trits(qs[:, 32:48], n) for n in range(5)] + \
            [_tq_trits(qh, n) for n in range(4)]
    return Decoded(np.concatenate(parts, axis=1) - 1, _per_element(_f16(b["d"])[:, None], QK_K))


def _tq2_0(b):
    """block_tq2_0: in each 32-byte chunk, the 2-bit field l of byte m is element 32l + m (of the chunk's 128)."""
    nb = b.shape[0]
    q = b["qs"].astype(np.int32).reshape(nb, 2, 1, 32) >> (2 * np.arange(4)).reshape(1, 1, 4, 1)
    return Decoded((q & 3).reshape(nb, QK_K) - 1, _per_element(_f16(b["d"])[:, None], QK_K))


def _k_quant_low_bits(qs: np.ndarray, width: int) -> np.ndarray:
    """q2_K/q3_K's 2-bit fields: in each 32-byte chunk of qs (128 elements), field `shift` of byte l is element
    32 * shift + l. (q4_K/q5_K use 4-bit fields the same way, 64 elements a chunk.)"""
    nb = qs.shape[0]
    fields = 8 // width
    q = qs.astype(np.int32).reshape(nb, -1, 1, 32) >> (width * np.arange(fields)).reshape(1, 1, fields, 1)
    return (q & ((1 << width) - 1)).reshape(nb, -1)


def _q2_K(b):
    """block_q2_K: 16 groups of 16; scales[g] holds the group's 4-bit scale (low) and min (high)."""
    d, dmin = _f16(b["d"])[:, None], _f16(b["dmin"])[:, None]
    sc = b["scales"].astype(np.int32)
    return Decoded(_k_quant_low_bits(b["qs"], 2), _per_element(d * (sc & 0xF), 16),
                   -_per_element(dmin * (sc >> 4), 16))


def _q3_K_scales(scales: np.ndarray) -> np.ndarray:
    """The 16 6-bit scales of block_q3_K as dequantize_row_q3_K rebuilds them from 12 bytes (minus 32)."""
    aux = scales.view("<u4").astype(np.uint32)
    k1, k2 = np.uint32(0x03030303), np.uint32(0x0f0f0f0f)
    tmp = aux[:, 2]
    out = np.stack([(aux[:, 0] & k2) | (((tmp >> 0) & k1) << 4), (aux[:, 1] & k2) | (((tmp >> 2) & k1) << 4),
                    ((aux[:, 0] >> 4) & k2) | (((tmp >> 4) & k1) << 4),
                    ((aux[:, 1] >> 4) & k2) | (((tmp >> 6) & k1) << 4)], axis=1).astype("<u4")
    return out.view(np.int8).astype(np.int32).reshape(-1, 16) - 32


def _q3_K(b):
    """block_q3_K: the 2 low bits as q2_K; hmask bit (element // 32) of byte (element % 32) set means +0, clear -4."""
    high = _bits(b["hmask"], 1).reshape(-1, 32, 8).transpose(0, 2, 1).reshape(-1, QK_K)
    codes = _k_quant_low_bits(b["qs"], 2) - np.where(high == 1, 0, 4)
    return Decoded(codes, _per_element(_f16(b["d"])[:, None] * _q3_K_scales(b["scales"]), 16))


def _q4_K(b):
    """block_q4_K: 8 groups of 32 with get_scale_min_k4's 6-bit scales and mins."""
    d, dmin = _f16(b["d"])[:, None], _f16(b["dmin"])[:, None]
    sc, mn = _scale_min_k4(b["scales"])
    return Decoded(_k_quant_low_bits(b["qs"], 4), _per_element(d * sc, 32), -_per_element(dmin * mn, 32))


def _q5_K(b):
    """block_q5_K: q4_K plus a fifth bit: bit (element // 32) of qh[element % 32]."""
    decoded = _q4_K(b)
    high = _bits(b["qh"], 1).reshape(-1, 32, 8).transpose(0, 2, 1).reshape(-1, QK_K)
    return Decoded(decoded.codes + 16 * high, decoded.scale, decoded.offset)


def _q6_K(b):
    """block_q6_K: per 128 elements, 64 bytes of low nibbles and 32 of 2-bit high parts; 16 int8 scales of 16."""
    nb = b.shape[0]
    ql = b["ql"].astype(np.int32).reshape(nb, 2, 2, 32)          # half, (l or l+32), l
    qh = b["qh"].astype(np.int32).reshape(nb, 2, 1, 32)
    low = np.stack([ql[:, :, 0] & 0xF, ql[:, :, 1] & 0xF, ql[:, :, 0] >> 4, ql[:, :, 1] >> 4], axis=2)
    high = (qh >> (2 * np.arange(4)).reshape(1, 1, 4, 1)) & 3
    codes = (low | (high << 4)).reshape(nb, QK_K) - 32
    return Decoded(codes, _per_element(_f16(b["d"])[:, None] * b["scales"].astype(np.int32), 16))


def _q8_K(b):
    """block_q8_K: float32 d; bsums[g] is the sum of qs[16g:16g+16] (a stored field the kernels trust)."""
    return Decoded(b["qs"].astype(np.int32), _per_element(b["d"][:, None], QK_K))


def _iq4_nl(b):
    return Decoded(KVALUES_IQ4NL[_low_then_high(b["qs"])], _per_element(_f16(b["d"])[:, None], 32))


def _iq4_xs(b):
    """block_iq4_xs: 8 groups of 32, the 6-bit scale of group g from scales_l (4 bits) and scales_h (2 bits)."""
    nb = b.shape[0]
    g = np.arange(8)
    low = (b["scales_l"].astype(np.int32)[:, g // 2] >> (4 * (g % 2))) & 0xF
    high = (b["scales_h"].astype(np.int32)[:, None] >> (2 * g)) & 3
    codes = KVALUES_IQ4NL[_low_then_high(b["qs"].reshape(nb, 8, 16))].reshape(nb, QK_K)
    return Decoded(codes, _per_element(_f16(b["d"])[:, None] * ((low | (high << 4)) - 32), 32))


def _struct(*fields) -> np.dtype:
    return np.dtype([(name, kind, (n,)) if n > 1 else (name, kind) for name, kind, n in fields])


H = "<u2"   # ggml_half, read as bits
FORMATS: dict[str, Format] = {f.name: f for f in [
    Format("q1_0", 128, _struct(("d", H, 1), ("qs", "u1", 16)), _q1_0),
    Format("q2_0", 64, _struct(("d", H, 1), ("qs", "u1", 16)), _q2_0),
    Format("q4_0", 32, _struct(("d", H, 1), ("qs", "u1", 16)), _q4_0),
    Format("q4_1", 32, _struct(("d", H, 1), ("m", H, 1), ("qs", "u1", 16)), _q4_1),
    Format("mxfp4", 32, _struct(("e", "u1", 1), ("qs", "u1", 16)), _mxfp4),
    Format("nvfp4", 64, _struct(("d", "u1", 4), ("qs", "u1", 32)), _nvfp4),
    Format("q5_0", 32, _struct(("d", H, 1), ("qh", "u1", 4), ("qs", "u1", 16)), _q5_0),
    Format("q5_1", 32, _struct(("d", H, 1), ("m", H, 1), ("qh", "u1", 4), ("qs", "u1", 16)), _q5_1),
    Format("q8_0", 32, _struct(("d", H, 1), ("qs", "i1", 32)), _q8_0),
    Format("q8_1", 32, _struct(("d", H, 1), ("s", H, 1), ("qs", "i1", 32)), _q8_1),
    Format("tq1_0", QK_K, _struct(("qs", "u1", 48), ("qh", "u1", 4), ("d", H, 1)), _tq1_0),
    Format("tq2_0", QK_K, _struct(("qs", "u1", 64), ("d", H, 1)), _tq2_0),
    Format("q2_K", QK_K, _struct(("scales", "u1", 16), ("qs", "u1", 64), ("d", H, 1), ("dmin", H, 1)), _q2_K),
    Format("q3_K", QK_K, _struct(("hmask", "u1", 32), ("qs", "u1", 64), ("scales", "u1", 12), ("d", H, 1)), _q3_K),
    Format("q4_K", QK_K, _struct(("d", H, 1), ("dmin", H, 1), ("scales", "u1", 12), ("qs", "u1", 128)), _q4_K),
    Format("q5_K", QK_K, _struct(("d", H, 1), ("dmin", H, 1), ("scales", "u1", 12), ("qh", "u1", 32),
                                 ("qs", "u1", 128)), _q5_K),
    Format("q6_K", QK_K, _struct(("ql", "u1", 128), ("qh", "u1", 64), ("scales", "i1", 16), ("d", H, 1)), _q6_K),
    Format("q8_K", QK_K, _struct(("d", "<f4", 1), ("qs", "i1", 256), ("bsums", "<i2", 16)), _q8_K),
    Format("iq4_nl", 32, _struct(("d", H, 1), ("qs", "u1", 16)), _iq4_nl),
    Format("iq4_xs", QK_K, _struct(("d", H, 1), ("scales_h", H, 1), ("scales_l", "u1", 4), ("qs", "u1", 128)),
           _iq4_xs),
]}


# ---- the iq formats: entries of a lattice table (grids.py), signs, and a 4- or 3-bit scale per group ----------------
def _signed(entries: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """entries (..., 8) bytes of grid entries, signs (...) sign bytes: bit j set negates byte j."""
    return np.where(signs[..., None] & KMASK, -1, 1) * entries.astype(np.int32)


def _words(field: np.ndarray, dtype: str) -> np.ndarray:
    return np.ascontiguousarray(field).view(dtype).astype(np.int64)


def _iq2_xxs(b, grids: Grids):
    """block_iq2_xxs: per 32 values two uint32: bytes 0-3 of the first index the grid, the second holds four
    7-bit sign indices (ksigns_iq2xs) and a 4-bit scale in bits 28-31: db = d * (0.5 + s) * 0.25."""
    nb = b.shape[0]
    aux = _words(b["qs"], "<u4").reshape(nb, 8, 2)
    index = b["qs"].view(np.uint8).reshape(nb, 8, 8)[:, :, 0:4]
    signs = KSIGNS[(aux[:, :, 1:2] >> (7 * np.arange(4))) & 127]
    codes = _signed(grids["iq2xxs_grid"][index], signs).reshape(nb, QK_K)
    db = _f16(b["d"])[:, None] * (0.5 + (aux[:, :, 1] >> 28)) * 0.25
    return Decoded(codes, _per_element(db, 32))


def _half_group_scales(d: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """iq2_xs/iq2_s: per 32 values a byte of two 4-bit scales, one for each 16: d * (0.5 + s) * 0.25."""
    s = scales.astype(np.int32)
    halves = np.stack([s & 0xF, s >> 4], axis=2).reshape(s.shape[0], -1)
    return _per_element(d[:, None] * (0.5 + halves) * 0.25, 16)


def _iq2_xs(b, grids: Grids):
    """block_iq2_xs: a uint16 per 8 values: a 9-bit grid index and a 7-bit sign index."""
    nb = b.shape[0]
    q = b["qs"].astype(np.int64)
    codes = _signed(grids["iq2xs_grid"][q & 511], KSIGNS[q >> 9]).reshape(nb, QK_K)
    return Decoded(codes, _half_group_scales(_f16(b["d"]), b["scales"]))


def _iq2_s(b, grids: Grids):
    """block_iq2_s: qs[0:32] the low 8 bits of the grid indices, qs[32:64] one sign byte per 8 values, qh[g] the
    2 high index bits of each 8 of group g (bits 2l, 2l+1 for entry l)."""
    nb = b.shape[0]
    qs = b["qs"].astype(np.int64)
    high = (b["qh"].astype(np.int64)[:, :, None] >> (2 * np.arange(4))) & 3           # (nb, 8 groups, 4)
    index = qs[:, :32].reshape(nb, 8, 4) | (high << 8)
    codes = _signed(grids["iq2s_grid"][index], qs[:, 32:].reshape(nb, 8, 4)).reshape(nb, QK_K)
    return Decoded(codes, _half_group_scales(_f16(b["d"]), b["scales"]))


def _iq3_xxs(b, grids: Grids):
    """block_iq3_xxs: qs[0:64] a grid index per 4 values; then per 32 values a uint32 of four 7-bit sign indices
    and a 4-bit scale in bits 28-31: db = d * (0.5 + s) * 0.5."""
    nb = b.shape[0]
    entries = grids["iq3xxs_grid"][b["qs"][:, :64].astype(np.int64)].reshape(nb, 8, 4, 8)   # 2 entries per 8
    aux = _words(b["qs"][:, 64:], "<u4").reshape(nb, 8)
    signs = KSIGNS[(aux[:, :, None] >> (7 * np.arange(4))) & 127]
    codes = _signed(entries, signs).reshape(nb, QK_K)
    return Decoded(codes, _per_element(_f16(b["d"])[:, None] * (0.5 + (aux >> 28)) * 0.5, 32))


def _iq3_s(b, grids: Grids):
    """block_iq3_s: qs a grid index's low 8 bits per 4 values, its ninth bit in qh (bit k of qh[g] for the k-th
    4 of group g), a sign byte per 8 values, and a 4-bit scale per 32: db = d * (1 + 2s)."""
    nb = b.shape[0]
    high = (b["qh"].astype(np.int64)[:, :, None] >> np.arange(8)) & 1                # (nb, 8 groups, 8)
    index = b["qs"].astype(np.int64).reshape(nb, 8, 8) | (high << 8)
    entries = grids["iq3s_grid"][index].reshape(nb, 8, 4, 8)
    codes = _signed(entries, b["signs"].reshape(nb, 8, 4)).reshape(nb, QK_K)
    s = b["scales"].astype(np.int32)
    group = np.stack([s & 0xF, s >> 4], axis=2).reshape(nb, 8)
    return Decoded(codes, _per_element(_f16(b["d"])[:, None] * (1 + 2 * group), 32))


IQ1_DELTA = 0.125      # IQ1S_DELTA, IQ1M_DELTA (ggml-common.h)


def _iq1_s(b, grids: Grids):
    """block_iq1_s: per 32 values a uint16 qh: three index bits per 8 values (bits 3l..3l+2), a 3-bit scale
    (bits 12-14: dl = d * (2s + 1)) and the sign of its delta (bit 15); x = dl * (grid + delta). The delta part is
    the offset: ggml_vec_dot_iq1_s multiplies it by the activation's stored bsums."""
    nb = b.shape[0]
    qh = b["qh"].astype(np.int64)
    index = b["qs"].astype(np.int64).reshape(nb, 8, 4) | (((qh[:, :, None] >> (3 * np.arange(4))) & 7) << 8)
    codes = grids["iq1s_grid"][index].astype(np.int32).reshape(nb, QK_K)
    dl = _f16(b["d"])[:, None] * (2 * ((qh >> 12) & 7) + 1)
    delta = np.where(qh & 0x8000, -IQ1_DELTA, IQ1_DELTA)
    return Decoded(codes, _per_element(dl, 32), _per_element(dl * delta, 32))


def _iq1_m_scale(scales: np.ndarray) -> np.ndarray:
    """iq1_m's fp16 d, spread over the top 4 bits of its four uint16 scale words (iq1m_scale_t)."""
    sc = _words(scales, "<u2")
    bits = (sc[:, 0] >> 12) | ((sc[:, 1] >> 8) & 0x00F0) | ((sc[:, 2] >> 4) & 0x0F00) | (sc[:, 3] & 0xF000)
    return bits.astype(np.uint16).view(np.float16).astype(np.float32)


def _iq1_m(b, grids: Grids):
    """block_iq1_m: per 8 values a grid index (8 bits in qs, 3 in a nibble of qh) and a delta sign (the nibble's
    top bit); a 3-bit scale per 16 (dl = d * (2s + 1)). ggml_vec_dot_iq1_m sums the delta with the codes (not
    from bsums), so the code here is 8 * (grid + delta) and the scale dl / 8: the same products, exactly."""
    nb = b.shape[0]
    nibble = (b["qh"].astype(np.int64)[:, :, None] >> np.array([0, 4])).reshape(nb, 32) & 0xF
    index = b["qs"].astype(np.int64) | ((nibble & 7) << 8)
    grid = grids["iq1s_grid"][index].astype(np.int32)                                  # (nb, 32, 8)
    codes = (8 * grid + np.where(nibble & 8, -1, 1)[:, :, None]).reshape(nb, QK_K)
    sc = _words(b["scales"], "<u2")                                                     # (nb, 4)
    three = (sc[:, :, None] >> np.array([0, 3, 6, 9])) & 7                             # 4 scales a word
    dl = _iq1_m_scale(b["scales"])[:, None] * (2 * three.reshape(nb, 16) + 1) / 8
    return Decoded(codes, _per_element(dl, 16))


IQ_FORMATS = {
    "iq2_xxs": (_struct(("d", H, 1), ("qs", "<u2", 32)), _iq2_xxs),
    "iq2_xs": (_struct(("d", H, 1), ("qs", "<u2", 32), ("scales", "u1", 8)), _iq2_xs),
    "iq2_s": (_struct(("d", H, 1), ("qs", "u1", 64), ("qh", "u1", 8), ("scales", "u1", 8)), _iq2_s),
    "iq3_xxs": (_struct(("d", H, 1), ("qs", "u1", 96)), _iq3_xxs),
    "iq3_s": (_struct(("d", H, 1), ("qs", "u1", 64), ("qh", "u1", 8), ("signs", "u1", 32), ("scales", "u1", 4)),
              _iq3_s),
    "iq1_s": (_struct(("d", H, 1), ("qs", "u1", 32), ("qh", "<u2", 8)), _iq1_s),
    "iq1_m": (_struct(("qs", "u1", 32), ("qh", "u1", 16), ("scales", "u1", 8)), _iq1_m),
}


@lru_cache(maxsize=8)
def with_grids(grids: Grids | None = None) -> dict[str, Format]:
    """Every format, the iq ones reading `grids` (default: gguf's, grids.from_gguf)."""
    grids = grids or from_gguf()
    return FORMATS | {name: Format(name, QK_K, dtype, partial(decode, grids=grids))
                      for name, (dtype, decode) in IQ_FORMATS.items()}
