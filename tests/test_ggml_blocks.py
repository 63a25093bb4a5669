"""lowp's models of ggml's block formats (lowp.kernels.ggml): checked bit for bit against gguf, llama.cpp's own numpy
dequantizers (PyPI), on blocks of random bytes; the formats gguf does not dequantize against their struct's
documented bit layout; the dot products' exact value against the sum of the dequantized products."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from lowp.kernels.ggml.blocks import FORMATS, IQ_FORMATS
from lowp.kernels.ggml.dot import VEC_DOT_TYPE, exact_dot, formats_for, terms
from lowp.kernels.ggml.grids import GRID_TABLES, KSIGNS, from_gguf, from_header

gguf = pytest.importorskip("gguf", reason="gguf (llama.cpp's numpy quants, the second opinion) is not installed")


def random_blocks(name: str, nb: int, rng, finite: bool = True) -> np.ndarray:
    """nb blocks of random bytes; with `finite`, every fp16 scale a finite value (gguf warns on overflow)."""
    fmt = formats_for(name)[name]
    raw = rng.integers(0, 256, (nb, fmt.dtype.itemsize), dtype=np.uint8)
    rec = raw.reshape(-1).view(fmt.dtype)
    if finite:
        for field in ("d", "m", "dmin", "s"):
            if field in fmt.dtype.names and fmt.dtype[field].base == np.dtype("<u2"):
                rec[field] = rng.uniform(-4, 4, rec[field].shape).astype(np.float16).view(np.uint16)
        if name == "q8_K":
            rec["d"] = rng.uniform(-4, 4, nb).astype(np.float32)
    return raw


GGUF_TYPES = [name for name in [*FORMATS, *IQ_FORMATS] if name not in ("q1_0", "q2_0", "q8_1", "q8_K")]


@pytest.mark.parametrize("name", GGUF_TYPES)
def test_dequantize_matches_gguf_bit_for_bit(name):
    from gguf.quants import dequantize
    qtype = getattr(gguf.GGMLQuantizationType, name.upper())
    rng = np.random.default_rng(sum(map(ord, name)))
    raw = random_blocks(name, 96, rng)
    with np.errstate(all="ignore"):
        theirs = dequantize(raw, qtype).reshape(-1)
    ours = formats_for(name)[name].dequantize(raw)
    differ = (theirs.view(np.uint32) != ours.view(np.uint32)) & ~(np.isnan(theirs) & np.isnan(ours))
    assert not differ.any(), f"{name}: {differ.sum()} values differ, first at {np.flatnonzero(differ)[:5]}"


def test_q1_0_and_q2_0_read_their_fields_lowest_bit_first():
    """ggml-common.h: q1_0 holds element j in bit j % 8 of byte j / 8 (1 = +d, 0 = -d); q2_0 holds it in bits
    2(j % 4) of byte j / 4, 00 = -1 ... 11 = +2 (dequantize_row_q1_0/q2_0)."""
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2, 128)
    block = np.zeros(1, FORMATS["q1_0"].dtype)
    block["d"] = np.float16(0.5).view(np.uint16)
    block["qs"] = np.packbits(bits.reshape(16, 8)[:, ::-1], axis=1).reshape(1, 16)
    assert np.array_equal(FORMATS["q1_0"].dequantize(block.view(np.uint8)), np.where(bits == 1, 0.5, -0.5))
    fields = rng.integers(0, 4, 64)
    block = np.zeros(1, FORMATS["q2_0"].dtype)
    block["d"] = np.float16(2.0).view(np.uint16)
    block["qs"] = (fields.reshape(16, 4) << np.array([0, 2, 4, 6])).sum(axis=1)
    assert np.array_equal(FORMATS["q2_0"].dequantize(block.view(np.uint8)), (fields - 1) * 2.0)


def test_a_block_of_the_wrong_length_is_named():
    with pytest.raises(ValueError, match="q4_0: 19 bytes is not a whole number of 18-byte blocks"):
        FORMATS["q4_0"].records(bytes(19))


def consistent_activations(y_type: str, nb: int, rng) -> np.ndarray:
    """q8 blocks whose stored sums agree with their codes (ggml's precondition): d a power of two, so
    q8_1's s = d * sum(qs) is exact in fp16, and q8_K's bsums the sums of its groups of 16."""
    raw = random_blocks(y_type, nb, rng)
    rec = raw.reshape(-1).view(FORMATS[y_type].dtype)
    rec["qs"] = rng.integers(-127, 128, rec["qs"].shape)
    if y_type == "q8_K":
        rec["d"] = np.float32(2.0) ** rng.integers(-8, 4, nb)
        rec["bsums"] = rec["qs"].astype(np.int64).reshape(nb, 16, 16).sum(axis=2)
    else:
        d = np.float16(2.0) ** rng.integers(-8, 4, nb).astype(np.float16)
        rec["d"] = d.view(np.uint16)
        if y_type == "q8_1":
            rec["s"] = (d * rec["qs"].astype(np.float16).sum(axis=1)).astype(np.float16).view(np.uint16)
    return raw


def exact_values(name: str, raw) -> list[Fraction]:
    fmt = formats_for(name)[name]
    x = fmt.decode(fmt.records(raw))
    scale, codes = x.scale.reshape(-1), x.codes.reshape(-1)
    offset = np.zeros_like(scale) if x.offset is None else x.offset.reshape(-1)
    return [Fraction(float(s)) * int(c) + Fraction(float(o)) for s, c, o in zip(scale, codes, offset)]


@pytest.mark.parametrize("x_type", sorted(VEC_DOT_TYPE))
def test_exact_dot_is_the_sum_of_the_dequantized_products(x_type):
    y_type = VEC_DOT_TYPE[x_type]
    rng = np.random.default_rng(sum(map(ord, x_type)))
    formats = formats_for(x_type)
    qk = max(formats[x_type].qk, formats[y_type].qk)
    for blocks in (1, 3):
        n = qk * blocks
        x = random_blocks(x_type, n // formats[x_type].qk, rng)
        y = consistent_activations(y_type, n // formats[y_type].qk, rng)
        expected = sum((a * b for a, b in zip(exact_values(x_type, x), exact_values(y_type, y))), Fraction(0))
        assert exact_dot(x_type, x, y, n) == expected, f"{x_type} x {y_type}, n = {n}"


def test_the_minimum_term_reads_the_stored_activation_sum():
    """q4_1 x q8_1 multiplies m by q8_1's stored s, not by a sum it recomputes: a stale s changes the result by
    exactly m * (new s - old s)."""
    rng = np.random.default_rng(7)
    x, y = random_blocks("q4_1", 1, rng), consistent_activations("q8_1", 1, rng)
    before = exact_dot("q4_1", x, y, 32)
    rec = y.reshape(-1).view(FORMATS["q8_1"].dtype)
    old = Fraction(float(rec["s"].view(np.float16)[0]))
    rec["s"] = np.float16(float(old) + 1).view(np.uint16)
    m = Fraction(float(x.reshape(-1).view(FORMATS["q4_1"].dtype)["m"].view(np.float16)[0]))
    assert exact_dot("q4_1", x, y, 32) - before == m * (Fraction(float(rec["s"].view(np.float16)[0])) - old)


def test_n_must_be_whole_blocks():
    with pytest.raises(ValueError, match="q4_0: n = 48 is not a positive multiple of its block size 32"):
        terms("q4_0", bytes(36), bytes(68), 48)


def test_the_sign_table_is_the_even_parity_completion():
    """ksigns_iq2xs, defined by lowp (grids.py) as the 7 sign bits plus an eighth of even parity, is gguf's."""
    assert KSIGNS.tobytes() == gguf.quants.IQ2_XXS.ksigns


def write_header(path, tables: dict) -> None:
    """A ggml-common.h-shaped file holding `tables` as GGML_TABLE_BEGIN ... END blocks of little-endian words."""
    text = ["#define GGML_TABLE_BEGIN(type, name, size) static const type name[size] = {"]
    for name, entries in tables.items():
        kind, count = GRID_TABLES[name]
        words = np.ascontiguousarray(entries).view(np.uint8).reshape(len(entries), -1).copy().view(kind).reshape(-1)
        text += [f"GGML_TABLE_BEGIN({'uint64_t' if kind == '<u8' else 'uint32_t'}, {name}, {count})",
                 ", ".join(f"0x{int(w):x}" for w in words), "GGML_TABLE_END()"]
    path.write_text("\n".join(text) + "\n")


def test_grids_read_from_a_header_equal_ggufs_and_a_missing_table_is_named(tmp_path):
    ours = from_gguf()
    header = tmp_path / "ggml-common.h"
    write_header(header, ours.tables)
    parsed = from_header(header)
    assert all(np.array_equal(parsed[name], ours[name]) for name in GRID_TABLES)
    write_header(header, {k: v for k, v in ours.tables.items() if k != "iq3s_grid"})
    with pytest.raises(ValueError, match="no table iq3s_grid"):
        from_header(header)
