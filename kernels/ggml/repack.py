"""ggml's repacked GEMV/GEMM kernels (src/ggml-cpu/repack.cpp), as lowp models them: which functions exist, how
their weights and activations are laid out, and what each output element is.

ggml's CPU backend can keep a weight matrix in an "extra" buffer type that repacks it at load time: N consecutive
weight rows (N = 4, 8 or 16) become one stream of interleaved blocks (block_<type>x<N>, repack.h), each holding
the N rows' scales first and then their quants interleaved in chunks of `blocklen` bytes. A matmul with such a
weight quantizes the activation rows four at a time into interleaved q8 blocks (block_q8_0x4, block_q8_Kx4) and
calls ggml_gemm_<type>_<N>x<blocklen>_<q8> on them; the 0-3 rows left over are quantized plainly (q8_0, q8_K)
and go one at a time through ggml_gemv_<...> (repack.cpp L4240-4250).

    void f(int n, float *s, size_t bs, const void *vx, const void *vy, int nr, int nc)

n: the length of a row (the dot product's length; a whole number of blocks). vx: nc weight rows, repacked
(nc a multiple of N; the x-th group of N rows is nb = n / qk interleaved blocks, one per block index).
vy: nr activation rows (gemv: nr == 1, one plain q8 row; gemm: nr a multiple of 4, group y is nb interleaved
q8 blocks of rows 4y .. 4y+3). s: the results, s[row * bs + col] = dot(activation row `row`, weight row `col`)
(repack.cpp L1707: s[(y * 4 + m) * bs + x * ncols_interleaved + j]); the gemv writes s[col] only and never reads
bs (L765, L795). ggml calls the gemm with bs = nb1 / nb0, the destination's row stride in floats (L4242).

Each element is a ggml vec_dot of one weight row by one activation row, so lowp's oracle is dot.exact_dot, and
the `exact` contract (exact.py) applies to every element: in the exact domain the float result must equal the
exact value bit for bit whatever the kernel's float order.

Sources: ggml-org/ggml @d99724f src/ggml-cpu/repack.cpp, repack.h, arch-fallback.h, arch/{x86,arm,riscv}/repack.cpp.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lowp.kernels.ggml.blocks import FORMATS, QK_K, _scale_min_k4
from lowp.kernels.ggml.dot import VEC_DOT_TYPE, cross_terms, exact_dot
from lowp.kernels.ggml.exact import _activations, cross_margin, draw
from lowp.kernels.ggml.executor import GgmlBuild, OnTarget, shim_file


@dataclass(frozen=True)
class Repacked:
    """One ggml_gemv_* / ggml_gemm_* function of repack.cpp."""
    name: str           # 'ggml_gemm_q4_0_4x8_q8_0'
    kind: str           # 'gemv' or 'gemm'
    x_type: str         # the weight's block format: 'q4_0'
    ncols: int          # weight rows interleaved into one block_<x>x<ncols> (N)
    blocklen: int       # bytes of one row taken at a time when interleaving (weights and, for gemm, activations)
    y_type: str         # the activation format: 'q8_0' or 'q8_K'
    rows: int           # activation rows interleaved: 1 (gemv: a plain row) or 4 (gemm: block_q8_0x4 / q8_Kx4)
    line: int           # repack.cpp line of its _generic definition
    riscv_zvfh: bool = False    # declared only under __riscv_zvfh (repack.h L176-189)


# (weight type, N, blocklen, gemv line, gemm line): repack.h L144-175 declares them; the lines are repack.cpp's
# _generic definitions. The name is ggml_<kind>_<x>_<N>x<blocklen>_<q8> (gemv/gemm<BLOC, INTER_SIZE=blocklen,
# NB_COLS=N> call it: repack.cpp L3963-4150).
FAMILIES = (
    ("q4_0", 4, 4, 754, 1658), ("q4_0", 4, 8, 799, 1714), ("q4_0", 8, 8, 843, 1768),
    ("q4_K", 8, 4, 887, 1822), ("q4_K", 8, 8, 958, 1905),
    ("q2_K", 8, 8, 1029, 1986),
    ("q5_K", 8, 4, 1105, 2076), ("q5_K", 8, 8, 1109, 2080),      # both through the _NxM_ templates L551, L647
    ("q6_K", 8, 4, 1114, 2084), ("q6_K", 8, 8, 1118, 2088),      # L357, L447
    ("iq4_nl", 4, 4, 1122, 2092), ("iq4_nl", 8, 8, 1160, 2148),
    ("mxfp4", 4, 4, 1198, 2192), ("mxfp4", 8, 8, 1236, 2236),
    ("q8_0", 4, 4, 1274, 2280), ("q8_0", 4, 8, 1321, 2334),
)
RISCV_FAMILIES = (     # the RVV outer-product layouts, interleave 1 (repack.cpp L1369-1656, L2387-2721)
    ("q4_0", 16, 1, 1370, 2388), ("q4_K", 16, 1, 1414, 2442), ("iq4_nl", 16, 1, 1487, 2536),
    ("q8_0", 16, 1, 1525, 2580), ("q2_K", 16, 1, 1566, 2627),
)


def _entries(families, zvfh: bool):
    for x_type, ncols, blocklen, gemv_line, gemm_line in families:
        y = VEC_DOT_TYPE[x_type]
        for kind, rows, line in (("gemv", 1, gemv_line), ("gemm", 4, gemm_line)):
            name = f"ggml_{kind}_{x_type}_{ncols}x{blocklen}_{y}"
            yield name, Repacked(name, kind, x_type, ncols, blocklen, y, rows, line, zvfh)


REPACKED: dict[str, Repacked] = dict(_entries(FAMILIES, False)) | dict(_entries(RISCV_FAMILIES, True))

# The activation quantizers of the gemm: ggml_quantize_mat_t<INTER_SIZE, PARAM_TYPE> (repack.cpp L318-353) calls
# ggml_quantize_mat_<q8>_4x<blocklen>: four rows into one interleaved block per block index.
QUANTIZE_MAT = {("q8_0", 4): ("ggml_quantize_mat_q8_0_4x4", 135), ("q8_0", 8): ("ggml_quantize_mat_q8_0_4x8", 173),
                ("q8_K", 4): ("ggml_quantize_mat_q8_K_4x4", 211), ("q8_K", 8): ("ggml_quantize_mat_q8_K_4x8", 262),
                ("q8_0", 1): ("ggml_quantize_mat_q8_0_4x1", 52), ("q8_K", 1): ("ggml_quantize_mat_q8_K_4x1", 90)}

# Which functions an arch file defines natively (the rest are the _generic ones renamed by arch-fallback.h), and
# the feature macros its fast path needs (without them the native definition calls the _generic one).
NATIVE = {
    # arch-fallback.h L84-111 renames all but these; arch/x86/repack.cpp L1448-6406
    "x86": {
        "ggml_gemv_q4_0_8x8_q8_0": "__AVX2__ || __AVX512F__ (L1449)",
        "ggml_gemv_q4_K_8x8_q8_K": "__AVX2__ (L1486)",
        "ggml_gemv_iq4_nl_8x8_q8_0": "__AVX2__ (L1688)",
        "ggml_gemv_mxfp4_8x8_q8_0": "__AVX2__ (L1701)",
        "ggml_gemv_q2_K_8x8_q8_K": "__AVX2__ (L1732)",
        "ggml_gemm_q4_0_8x8_q8_0": "__AVX2__ || __AVX512F__ (L2027)",
        "ggml_gemm_q4_K_8x8_q8_K": "__AVX2__ || __AVX512F__, AVX512BW+DQ path (L2065, L2077)",
        "ggml_gemm_iq4_nl_8x8_q8_0": "__AVX2__ || __AVX512F__ (L3497); without them it calls "
                                     "ggml_gemm_iq4_nl_4x4_q8_0, not the 8x8 _generic (L3508)",
        "ggml_gemm_mxfp4_8x8_q8_0": "__AVX2__ || __AVX512F__ (L3512)",
        "ggml_gemm_q2_K_8x8_q8_K": "__AVX2__ || __AVX512F__, AVX512BW+DQ path (L3546, L3570)",
    },
    # arch-fallback.h L74-83 renames only q8_K's quantizers and the iq4_nl/mxfp4/q2_K 8x8 ones; arch/arm/repack.cpp
    "arm": {
        "ggml_gemv_q4_0_4x4_q8_0": "__ARM_NEON && __ARM_FEATURE_DOTPROD (L231)",
        "ggml_gemv_q4_0_4x8_q8_0": "__ARM_NEON && __ARM_FEATURE_DOTPROD (L292)",
        "ggml_gemv_q4_0_8x8_q8_0": "__ARM_FEATURE_SVE, sve_cnt == 32 at run time (L359-360)",
        "ggml_gemv_iq4_nl_4x4_q8_0": "__ARM_NEON && __ARM_FEATURE_DOTPROD (L450)",
        "ggml_gemv_mxfp4_4x4_q8_0": "__ARM_NEON && __ARM_FEATURE_DOTPROD (L520)",
        "ggml_gemv_q4_K_8x4_q8_K": "__ARM_NEON && __ARM_FEATURE_DOTPROD (L590)",
        "ggml_gemv_q4_K_8x8_q8_K": "__ARM_NEON && __ARM_FEATURE_DOTPROD (L729)",
        "ggml_gemv_q5_K_8x4_q8_K": "__ARM_NEON && __ARM_FEATURE_DOTPROD (L883)",
        "ggml_gemv_q5_K_8x8_q8_K": "__ARM_NEON && __ARM_FEATURE_DOTPROD (L1042)",
        "ggml_gemv_q6_K_8x4_q8_K": "__ARM_NEON && __ARM_FEATURE_DOTPROD (L1329)",
        "ggml_gemv_q6_K_8x8_q8_K": "__ARM_NEON && __ARM_FEATURE_DOTPROD (L1518)",
        "ggml_gemv_q8_0_4x4_q8_0": "__ARM_NEON && __ARM_FEATURE_DOTPROD (L1718)",
        "ggml_gemv_q8_0_4x8_q8_0": "__ARM_NEON && __ARM_FEATURE_DOTPROD (L1776)",
        "ggml_gemm_q4_0_4x4_q8_0": "__ARM_NEON && __ARM_FEATURE_DOTPROD (L1846)",
        "ggml_gemm_q4_0_4x8_q8_0": "__ARM_NEON && __ARM_FEATURE_MATMUL_INT8 (L2327)",
        "ggml_gemm_q4_0_8x8_q8_0": "__ARM_FEATURE_SVE && __ARM_FEATURE_MATMUL_INT8, sve_cnt == 32 (L2749-2750)",
        "ggml_gemm_iq4_nl_4x4_q8_0": "__ARM_NEON && __ARM_FEATURE_DOTPROD (L3186)",
        "ggml_gemm_mxfp4_4x4_q8_0": "__ARM_NEON && __ARM_FEATURE_DOTPROD (L3262)",
        "ggml_gemm_q4_K_8x4_q8_K": "__ARM_NEON && __ARM_FEATURE_DOTPROD (L3338)",
        "ggml_gemm_q5_K_8x4_q8_K": "__ARM_NEON && __ARM_FEATURE_DOTPROD (L3544)",
        "ggml_gemm_q4_K_8x8_q8_K": "SVE && MATMUL_INT8 at 256 bits (L3773-3774), else NEON && MATMUL_INT8 (L4083)",
        "ggml_gemm_q5_K_8x8_q8_K": "__ARM_NEON && __ARM_FEATURE_MATMUL_INT8 (L4293)",
        "ggml_gemm_q6_K_8x4_q8_K": "__ARM_NEON && __ARM_FEATURE_DOTPROD (L4540)",
        "ggml_gemm_q6_K_8x8_q8_K": "__ARM_NEON && __ARM_FEATURE_MATMUL_INT8 (L4742)",
        "ggml_gemm_q8_0_4x4_q8_0": "__ARM_NEON && __ARM_FEATURE_DOTPROD (L4958)",
        "ggml_gemm_q8_0_4x8_q8_0": "SVE && MATMUL_INT8 at 256 bits (L5026-5027), else NEON && MATMUL_INT8 (L5091)",
    },
    # arch/riscv/repack.cpp: q4_0 8x8 under __riscv_v (L133, L690); the 16x1 family only exists under
    # __riscv_zvfh (L205-668, L896-1703)
    "riscv": {
        "ggml_gemv_q4_0_8x8_q8_0": "__riscv_v, VLEN >= 256 at run time (L133-134)",
        "ggml_gemm_q4_0_8x8_q8_0": "__riscv_v, VLEN >= 256 at run time (L690-691)",
        **{name: "__riscv_zvfh" for name, r in REPACKED.items() if r.riscv_zvfh},
    },
}


# Which layout ggml gives a weight of each type (ggml_repack_get_optimal_repack_type, repack.cpp L4528-4723): the
# first condition that holds, and only when the weight's row count is a multiple of N; no match leaves the weight
# unrepacked (the vec_dots then). ggml_cpu_has_* are compile-time facts of the build (ggml-cpu.c L3615-3621 for
# avx2), sve_cnt is the vector length in bytes at run time, VLEN RISC-V's (zvfh builds only).
SELECTED = {
    "q4_0": (("avx2, or sve && i8mm && sve_cnt == 32", "q4_0_8x8"), ("neon && i8mm", "q4_0_4x8"),
             ("neon && dotprod", "q4_0_4x4"), ("riscv_v, zvfh, VLEN 256", "q4_0_16x1")),
    "q4_K": (("avx2", "q4_K_8x8"), ("neon && i8mm", "q4_K_8x8"), ("neon && dotprod", "q4_K_8x4"),
             ("riscv_v, zvfh, VLEN 256", "q4_K_16x1")),
    "q2_K": (("avx512", "q2_K_8x8"), ("riscv_v, zvfh, VLEN 256", "q2_K_16x1")),
    "q5_K": (("neon && i8mm", "q5_K_8x8"), ("neon && dotprod", "q5_K_8x4")),
    "q6_K": (("neon && i8mm", "q6_K_8x8"), ("neon && dotprod", "q6_K_8x4")),
    "iq4_nl": (("avx2", "iq4_nl_8x8"), ("neon && dotprod", "iq4_nl_4x4"), ("riscv_v, zvfh, VLEN 256", "iq4_nl_16x1")),
    "mxfp4": (("avx2", "mxfp4_8x8"), ("neon && dotprod", "mxfp4_4x4")),
    "q8_0": (("neon && i8mm", "q8_0_4x8"), ("neon && dotprod", "q8_0_4x4"), ("riscv_v, zvfh, VLEN 256", "q8_0_16x1")),
}


# ---- the weights: make_block_<type>x<N> -------------------------------------------------------------------------
def interleave(fields: np.ndarray, blocklen: int) -> np.ndarray:
    """N rows' copies of one field, (N, F) bytes, interleaved as every make_block_* does: chunk i of the output is
    bytes (i / N) * blocklen .. + blocklen of row i % N (e.g. make_block_q4_0x4, repack.cpp L2766-2775)."""
    n, f = fields.shape
    if f % blocklen:
        raise ValueError(f"a {f}-byte field does not split into {blocklen}-byte chunks")
    return fields.reshape(n, f // blocklen, blocklen).transpose(1, 0, 2).reshape(-1)


def _bytes(records: np.ndarray, field: str) -> np.ndarray:
    """One field of N blocks as an (N, bytes) uint8 array (a scalar fp16 field gives its two bytes)."""
    return np.ascontiguousarray(records[field]).view(np.uint8).reshape(len(records), -1)


def pack_k4(scales: np.ndarray, mins: np.ndarray) -> np.ndarray:
    """Eight 6-bit scales and eight 6-bit mins into 12 bytes, q4_K's own packing (the inverse of
    get_scale_min_k4): make_block_q4_Kx8 packs sub-block sb of its 8 columns this way at sb * 12 (L2868-2907)."""
    s, m = scales.astype(np.uint8), mins.astype(np.uint8)
    return np.concatenate([(s[:4] & 63) | ((s[4:] & 48) << 2), (m[:4] & 63) | ((m[4:] & 48) << 2),
                           (s[4:] & 15) | ((m[4:] & 15) << 4)]).astype(np.uint8)


def _scales_q4_K(records: np.ndarray) -> np.ndarray:
    """make_block_q4_Kx8's 96 scale bytes (L2868-2907; q5_Kx8 alike, L3049-3087): for each sub-block sb, the 8
    columns' (scale, min) of that sub-block packed by pack_k4."""
    sc, mn = _scale_min_k4(records["scales"])                 # (8 columns, 8 sub-blocks) each
    return np.concatenate([pack_k4(sc[:, sb], mn[:, sb]) for sb in range(8)])


def _scales_q2_K(records: np.ndarray) -> np.ndarray:
    """make_block_q2_Kx8's 128 scale bytes (L2996-3002): byte i is column (i % 16) / 2's scales[(i / 16) * 2 + i % 2],
    so each 16 bytes hold two consecutive sub-blocks of all 8 columns, column-major in pairs."""
    i = np.arange(128)
    return records["scales"][(i % 16) // 2, (i // 16) * 2 + i % 2].astype(np.uint8)


def _scales_q6_K(records: np.ndarray) -> np.ndarray:
    """make_block_q6_Kx8's scales (L3129-3133): out[j * 8 + i] = column i's scales[j]."""
    return np.ascontiguousarray(records["scales"].T).view(np.uint8).reshape(-1)


def _scales_q4_Kx16(records: np.ndarray) -> np.ndarray:
    """make_block_q4_Kx16's 192 scale bytes (L2940-2957): with s[sb * 16 + j], m[sb * 16 + j] column j's 6-bit
    scale and min of sub-block sb, byte i < 128 holds the low nibbles of s[i] and m[i], byte 128 + i (i < 64) the
    top two bits of s[i], m[i], s[64 + i] and m[64 + i]."""
    sc, mn = _scale_min_k4(records["scales"])                 # (16 columns, 8 sub-blocks)
    s, m = sc.T.reshape(-1), mn.T.reshape(-1)                # sub-block-major: [sb * 16 + j]
    low = (s & 15) | ((m & 15) << 4)
    high = ((s[:64] & 48) >> 4) | ((m[:64] & 48) >> 2) | (s[64:] & 48) | ((m[64:] & 48) << 2)
    return np.concatenate([low, high]).astype(np.uint8)


Q2_KX16_ORDER = (0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15)   # L3164-3195: even/odd, low/high


def _scales_q2_Kx16(records: np.ndarray) -> np.ndarray:
    """make_block_q2_Kx16's 256 scale bytes (L3160-3195): for each sub-block in Q2_KX16_ORDER, the 16 columns'
    scale byte of it."""
    return np.ascontiguousarray(records["scales"][:, list(Q2_KX16_ORDER)].T).reshape(-1).astype(np.uint8)


Q4_0_XOR = 0x88     # make_block_q4_0x4/x8 (L2752, L2765, L2795): each nibble's bias of 8 flipped into its sign bit


def make_block(x_type: str, records: np.ndarray, blocklen: int) -> np.ndarray:
    """block_<x_type>x<N> of N blocks (records, one per column), as repack.cpp's make_block_<x_type>x<N> builds
    it, as bytes."""
    n = len(records)
    if x_type in ("q4_0", "q8_0", "iq4_nl"):          # d[N], then qs (L2725-2834, L3512-3533, L3566-3713)
        qs = interleave(_bytes(records, "qs"), blocklen)
        if x_type == "q4_0":
            qs = qs ^ np.uint8(Q4_0_XOR)
        return np.concatenate([_bytes(records, "d").reshape(-1), qs])
    if x_type == "mxfp4":                              # e[N], then qs (L3748-3827)
        return np.concatenate([records["e"].astype(np.uint8), interleave(_bytes(records, "qs"), blocklen)])
    d = _bytes(records, "d").reshape(-1)
    if x_type == "q6_K":                               # d, scales, ql, qh (repack.h block_q6_Kx8; L3092-3136)
        return np.concatenate([d, _scales_q6_K(records), interleave(_bytes(records, "ql"), blocklen),
                               interleave(_bytes(records, "qh"), blocklen)])
    dmin = _bytes(records, "dmin").reshape(-1)
    if n == 16 and x_type in ("q4_K", "q2_K"):         # the RVV layouts: d, dmin, scales, qs (L2913-2963, L3138-3198)
        scales = _scales_q4_Kx16(records) if x_type == "q4_K" else _scales_q2_Kx16(records)
        return np.concatenate([d, dmin, scales, interleave(_bytes(records, "qs"), blocklen)])
    if x_type == "q4_K":                               # d, dmin, scales, qs (L2836-2911)
        return np.concatenate([d, dmin, _scales_q4_K(records), interleave(_bytes(records, "qs"), blocklen)])
    if x_type == "q5_K":                               # d, dmin, scales, qh, qs (L3007-3090)
        return np.concatenate([d, dmin, _scales_q4_K(records), interleave(_bytes(records, "qh"), blocklen),
                               interleave(_bytes(records, "qs"), blocklen)])
    if x_type == "q2_K":                               # d, dmin, scales, qs (L2965-3005: 8 bytes at a time)
        return np.concatenate([d, dmin, _scales_q2_K(records), interleave(_bytes(records, "qs"), blocklen)])
    raise ValueError(f"repack.cpp has no repacked layout of {x_type}")


def pack_weights(x_type: str, blocks: np.ndarray, ncols: int, blocklen: int) -> bytes:
    """vx of a gemv/gemm: `blocks` (nc rows x nb blocks x block bytes, uint8; nc a multiple of ncols) repacked as
    repack_<type>_to_<type>_<N>_bl does (e.g. L3217-3225): for each group of ncols rows, for each block index x,
    make_block of the group's blocks at x."""
    fmt = FORMATS[x_type]
    data = np.ascontiguousarray(blocks, np.uint8).reshape(blocks.shape[0], -1, fmt.dtype.itemsize)
    nc, nb = data.shape[:2]
    if nc % ncols:
        raise ValueError(f"{nc} rows are not whole groups of {ncols}")
    out = [make_block(x_type, data[g:g + ncols, b].reshape(-1).view(fmt.dtype), blocklen)
           for g in range(0, nc, ncols) for b in range(nb)]
    return b"".join(o.tobytes() for o in out)


# ---- the activations: ggml_quantize_mat_q8_<0,K>_4x<blocklen> ---------------------------------------------------
def _bsums_q8_Kx4(records: np.ndarray, blocklen: int) -> np.ndarray:
    """block_q8_Kx4's 64 bsums from four rows' 16 each, for the row's sum of elements 16g .. 16g + 15: at
    16 * (g / 4) + 4 * row + g % 4 (quantize_mat_q8_K_4x4 L253 `index`, 4x8 L304: the same map), and for the RVV
    4x1 interleave at 4 * g + row (quantize_mat_q8_K_4x1 L125)."""
    out = np.zeros(64, np.int16)
    g = np.arange(16)
    for row in range(4):
        at = 4 * g + row if blocklen == 1 else 16 * (g // 4) + 4 * row + g % 4
        out[at] = records["bsums"][row]
    return out


def pack_activations(y_type: str, rows: np.ndarray, blocklen: int) -> bytes:
    """vy of a gemm: `rows` (nr activation rows x nb blocks x block bytes of y_type, uint8; nr a multiple of 4),
    each group of four rows interleaved per block index as ggml_quantize_mat_<y>_4x<blocklen> lays them out:
    d[4] (fp16 for q8_0, float for q8_K), then qs where byte j is row (j % (4 bl)) / bl's element
    (j / (4 bl)) bl + j % bl (L162-169), then for q8_K the rows' stored bsums (_bsums_q8_Kx4). The quants and sums
    are the rows' own (drawn by lowp, not quantized here), so each output stays an exact_dot of stored blocks."""
    fmt = FORMATS[y_type]
    data = np.ascontiguousarray(rows, np.uint8).reshape(rows.shape[0], -1, fmt.dtype.itemsize)
    nr, nb = data.shape[:2]
    if nr % 4:
        raise ValueError(f"{nr} activation rows are not whole groups of 4")
    out = []
    for g in range(0, nr, 4):
        for b in range(nb):
            rec = data[g:g + 4, b].reshape(-1).view(fmt.dtype)
            parts = [_bytes(rec, "d").reshape(-1), interleave(_bytes(rec, "qs"), blocklen)]
            if y_type == "q8_K":
                parts.append(_bsums_q8_Kx4(rec, blocklen).view(np.uint8))
            out.append(np.concatenate(parts))
    return b"".join(o.tobytes() for o in out)


# ---- the activations from floats: ggml_quantize_mat_q8_0_4x<B> ---------------------------------------------------
# Each build's quantize_mat makes every block of every row as one of quantize.py's named quantize_row_q8_0 paths
# does, then interleaves the four rows: lowp reuses those paths and names which each build's quantize_mat is.
QUANTIZE_MAT_VARIANT = {
    "generic": "ref",           # repack.cpp L156-157, L168: id = 1 / d, roundf (as x86-64 compiles the C cast)
    "x86": "x86-avx",           # arch/x86/repack.cpp L211-212, L234 (__AVX__ || __AVX2__): 127 / amax, round_ps
    "arm": "neon",              # arch/arm/repack.cpp L76-77, L84 (__ARM_NEON): 1 / d, vcvtnq, lanes to int8
    "riscv": "rvv-rmm",         # arch/riscv/repack.cpp L47-53 (__riscv_v_intrinsic): 1 / d, vfncvt with rm = 4
}


def _rvv_rmm():
    """arch/riscv/repack.cpp's quantize_mat_q8_0_4x8 (L47-53): the reciprocal of d, __riscv_vfncvt_x_f_w_i16m4_rm
    with rm = 4 (RMM: to nearest, ties away from zero, as roundf) to int16, then vncvt to int8 (modulo): not
    quantize_row_q8_0's rvv (RNE) but the reference's rounding with RVV's conversions."""
    from lowp.kernels.ggml import quantize as q
    return q.QuantVariant("rvv-rmm", _rvv_rmm.__doc__, q.Q8Path(q._reciprocal_of_d, q._half_away, q._riscv_cvt16,
                                                               q._wrap8, sum_of_lanes=False))


def quantize_variant(name: str):
    """A quantize.py variant by name, or 'rvv-rmm' (_rvv_rmm)."""
    from lowp.kernels.ggml.quantize import VARIANTS
    return _rvv_rmm() if name == "rvv-rmm" else VARIANTS[name]


def quantize_mat_q8_0(x: np.ndarray, blocklen: int, variant: str = "ref") -> bytes:
    """What ggml_quantize_mat_q8_0_4x<blocklen> writes for four float32 rows x (4 x k): each row's q8_0 blocks as
    quantize variant `variant` makes them (QUANTIZE_MAT_VARIANT says whose is whose), interleaved as
    pack_activations lays them out (the generic's store order, L162-169)."""
    x = np.asarray(x, np.float32)
    k, path = x.shape[1], quantize_variant(variant)
    rows = np.stack([np.frombuffer(path.quantize("q8_0", row, k), np.uint8).reshape(k // 32, -1) for row in x])
    return pack_activations("q8_0", rows, blocklen)


def _inverse_split_block(rng) -> np.ndarray:
    """32 floats whose block quantizes differently with id = 127 / amax than with id = 1 / (amax / 127): an amax
    where the two float32 inverses differ, and values on the far side of a rounding boundary for one of them."""
    while True:
        amax = np.float32(rng.uniform(1, 100))
        reciprocal = np.float32(1) / np.float32(amax / np.float32(127))
        ratio = np.float32(127) / amax
        if reciprocal != ratio:
            break
    halves = ((np.arange(126) + 0.5) / np.float64(ratio)).astype(np.float32)
    candidates = np.concatenate([halves, np.nextafter(halves, np.float32(0)), np.nextafter(halves, np.float32(1e9))])
    split = candidates[(np.rint((candidates * reciprocal).astype(np.float32))
                        != np.rint((candidates * ratio).astype(np.float32))) & (candidates < amax)]
    block = rng.uniform(-amax, amax, 32).astype(np.float32)
    block[0] = amax
    block[1:1 + min(31, split.size)] = split[:31]
    return block


def quantize_cases(rng, blocks: int):
    """(kind, four float32 rows of `blocks` blocks) that tell the quantize_mat variants apart: 'normal' and 'wide' (rows
    scaled by 2^-20..2^20) random values, 'ties' (halves with amax 127, so d = id = 1 and x * id is exactly .5:
    ties away vs to even) and 'inverse' (_inverse_split_block: 127 / amax vs 1 / d)."""
    n = 32 * blocks
    yield "normal", rng.standard_normal((4, n)).astype(np.float32)
    yield "wide", (rng.standard_normal((4, n)) * np.exp2(rng.integers(-20, 20, (4, 1)))).astype(np.float32)
    ties = (rng.integers(-126, 126, (4, n)) + 0.5).astype(np.float32)
    ties[:, ::32] = 127
    yield "ties", ties
    yield "inverse", np.stack([np.concatenate([_inverse_split_block(rng) for _ in range(blocks)]) for _ in range(4)])


# ---- what each output element is ---------------------------------------------------------------------------------
def expected(function: str, x_blocks: np.ndarray, y_blocks: np.ndarray) -> np.ndarray:
    """The (nr x nc) float32 result of `function` on weight rows x_blocks (nc x nb x bytes, before repacking) and
    activation rows y_blocks (nr x nb' x bytes, before interleaving): element [r, c] is the exact value of the
    vec_dot of weight row c by activation row r (dot.exact_dot), rounded once to float32 (exact in the exact
    domain, where the `exact` contract says the kernel must give exactly it). All pairs are summed at once in
    float64 (dot.CrossTerms), exact wherever exact.cross_margin says so; a pair outside that takes the rational
    path."""
    r = REPACKED[function]
    x = np.asarray(x_blocks, np.uint8)
    y = np.asarray(y_blocks, np.uint8)
    n = x.reshape(x.shape[0], -1).shape[1] // FORMATS[r.x_type].dtype.itemsize * _qk(r.x_type)
    terms = cross_terms(r.x_type, x, y, n)
    with np.errstate(all="ignore"):
        out = terms.values().astype(np.float32)
        inexact = ~(cross_margin(terms, bits=53) >= 1)
    for i, j in np.argwhere(inexact):
        out[i, j] = np.float32(float(exact_dot(r.x_type, x[j].reshape(-1), y[i].reshape(-1), n)))
    return out


def _qk(name: str) -> int:
    return FORMATS[name].qk if name in FORMATS else QK_K


# ---- cases in the exact domain -----------------------------------------------------------------------------------
NARROW_EXPONENTS = (-1, 0, 1)    # the scales of a drawn gemm/gemv case: 2^e, e among these (see draw_case)


def narrow_scales(blocks: np.ndarray, name: str, rng) -> np.ndarray:
    """`blocks` (rows x nb x bytes of format `name`) with every block scale (d, dmin; mxfp4's e) a power of two
    2^e, e in NARROW_EXPONENTS: still different from block to block and row to row (a kernel that takes another
    column's or row's scale shows), but close enough that every weight row times every activation row stays in
    the exact domain with activations of useful range."""
    fmt = FORMATS[name]
    out = np.ascontiguousarray(blocks, np.uint8).copy()
    rec = out.reshape(-1).view(fmt.dtype)
    for field in ("d", "dmin"):
        if field in rec.dtype.names:
            e = rng.choice(NARROW_EXPONENTS, rec[field].shape)
            value = np.float64(2.0) ** e
            rec[field] = (value.astype(np.float16).view(np.uint16) if rec.dtype[field] == np.dtype("<u2")
                          else value.astype(np.float32))
    if name == "mxfp4":                         # E8M0: 2^(e - 127), halved by ggml's decoder
        rec["e"] = 127 + rng.choice(NARROW_EXPONENTS, rec["e"].shape)
    return out


def draw_case(function: str, blocks: int, nc: int, nr: int, rng, *, limit: int = 127):
    """(x_blocks (nc x blocks x bytes), y_blocks (nr x ... x bytes), n) in the exact domain for every one of the
    nr x nc dot products: weight rows drawn by exact.draw, activation rows by its q8 drawer (codes in
    [-limit, limit], stored sums consistent), every scale narrowed (narrow_scales), and the activations' range
    halved until all cross pairs fit."""
    r = REPACKED[function]
    n = blocks * _qk(r.x_type)
    xs = narrow_scales(np.stack([draw(r.x_type, blocks, rng)[0] for _ in range(nc)]), r.x_type, rng)
    while True:
        ys = np.stack([_activations(r.y_type, n // _qk(r.y_type), limit, rng) for _ in range(nr)])
        ys = narrow_scales(ys, r.y_type, rng)
        if limit == 0 or (cross_margin(cross_terms(r.x_type, xs, ys, n)) >= 1).all():
            return xs, ys, n
        limit //= 2


def operands(function: str, x_blocks: np.ndarray, y_blocks: np.ndarray) -> tuple[bytes, bytes]:
    """(vx, vy) of `function` for these rows: the weights repacked, the activations interleaved for a gemm and
    plain (the row's own blocks) for a gemv."""
    r = REPACKED[function]
    vx = pack_weights(r.x_type, x_blocks, r.ncols, r.blocklen)
    vy = (pack_activations(r.y_type, y_blocks, r.blocklen) if r.kind == "gemm"
          else np.ascontiguousarray(y_blocks, np.uint8).tobytes())
    return vx, vy


# ---- building and calling the real functions ---------------------------------------------------------------------
# repack.cpp is C++ and carries, after its extern "C" kernels (L1-2723), the backend-buffer machinery of the repack
# buffer type (make_block_*, tensor_traits, the buffer type: L2725-4836). A gemv/gemm calls none of it, but the
# object file references it, so lowp's stub supplies (as traps) what that machinery calls from the rest of ggml.
# Measured on ggml @d99724f (nm -u of repack.cpp + arch/<arch>/repack.cpp): these C functions of ggml.c,
# ggml-backend.cpp and ggml-cpu.c, ...
BACKEND_FUNCTIONS = (
    "ggml_backend_buft_alloc_buffer", "ggml_backend_buft_is_host", "ggml_backend_cpu_buffer_type",
    "ggml_backend_cpu_reg", "ggml_backend_reg_dev_get", "ggml_barrier", "ggml_cpu_has_avx2", "ggml_cpu_has_avx512",
    "ggml_cpu_has_dotprod", "ggml_cpu_has_matmul_int8", "ggml_cpu_has_neon", "ggml_cpu_has_riscv_v",
    "ggml_cpu_has_sve", "ggml_get_type_traits_cpu", "ggml_is_numa", "ggml_n_dims", "ggml_nbytes", "ggml_nelements",
    "ggml_nrows", "ggml_row_size", "ggml_threadpool_chunk_add", "ggml_threadpool_chunk_set", "ggml_type_name",
    "ggml_type_size",
)
# ... and the two virtual destructors of traits.cpp (whose other functions need ggml-cpu.c's std::vector): the
# classes' key functions, so defining them emits their vtables (and, natively, their typeinfo).
TRAITS_STUB = """// lowp's stub (kernels/ggml/repack.py): the key functions of ggml::cpu's two interfaces, empty as
// in traits.cpp.
#include "traits.h"
namespace ggml::cpu { tensor_traits::~tensor_traits() {} extra_buffer_type::~extra_buffer_type() {} }
"""
# The static guests have no C++ runtime (lowp.emulator.build: -fno-exceptions -fno-rtti -fno-threadsafe-statics):
# the machinery's `new` and its function-local statics' destructor registration are all that is left.
CXX_RUNTIME_STUB = """/* lowp's stub: the C++ runtime the repack buffer machinery references; no gemv/gemm
   reaches it. */
void *_Znwm(unsigned long n) { (void)n; __builtin_trap(); }
int __cxa_atexit(void (*f)(void *), void *p, void *d) { (void)f; (void)p; (void)d; return 0; }
void *__dso_handle = 0;
"""
# ggml-impl.h includes <array>, <initializer_list> and <vector> in C++ (L749-751) and the arch files <cmath>,
# <cstdio>, <cstdlib>: the freestanding guests have no C++ library, so lowp gives the little the declarations use.
CXX_HEADERS = {
    "initializer_list": """#pragma once
#include <stddef.h>
namespace std {   // the layout clang builds a braced list into: a pointer and a length
template <class E> class initializer_list {
    const E *b_; size_t n_;
    constexpr initializer_list(const E *b, size_t n) : b_(b), n_(n) {}
public:
    constexpr initializer_list() noexcept : b_(nullptr), n_(0) {}
    constexpr size_t size() const noexcept { return n_; }
    constexpr const E *begin() const noexcept { return b_; }
    constexpr const E *end() const noexcept { return b_ + n_; }
};
}
""",
    "array": """#pragma once
#include <stddef.h>
namespace std {
template <class T, size_t N> struct array {
    T elems[N];
    constexpr T &operator[](size_t i) { return elems[i]; }
    constexpr const T &operator[](size_t i) const { return elems[i]; }
    constexpr size_t size() const { return N; }
};
}
""",
    "vector": "#pragma once\nnamespace std { template <class T> class vector; }   // only named in declarations\n",
    "cmath": "#pragma once\n#include <math.h>\n",
    "cstdio": "#pragma once\n#include <stdio.h>\n",
    "cstdlib": "#pragma once\n#include <stdlib.h>\n",
}
ARCH_FOLDER = {"x86-64": "x86", "aarch64": "arm", "riscv64": "riscv"}


def backend_traps() -> str:
    return "/* lowp's stub: repack.cpp's buffer machinery calls these; no gemv/gemm does. */\n" + "\n".join(
        f"void {name}(void) {{ __builtin_trap(); }}" for name in BACKEND_FUNCTIONS) + "\n"


def _header_folder() -> Path:
    """CXX_HEADERS written to a folder of the build cache named by their content."""
    import hashlib

    from lowp.emulator import buildcache
    digest = hashlib.sha256(repr(sorted(CXX_HEADERS.items())).encode()).hexdigest()[:16]
    folder = buildcache.ready_folder(buildcache.cache_dir() / "src" / f"ggml-repack-include-{digest}")
    for name, text in CXX_HEADERS.items():
        if not (folder / name).is_file() or (folder / name).read_text() != text:
            buildcache.write_atomic(folder / name, text.encode())
    return folder


@dataclass(frozen=True)
class RepackBuild:
    """What lowp compiles of a checkout for one variant: repack.cpp (the _generic kernels) and
    arch/<arch>/repack.cpp (the native ones), with ggml's include folders, the variant's flags and lowp's stubs."""
    checkout: Path
    variant: str                # a ggml variant name (variants.py): 'haswell', 'armv8.2_1', 'armv8.6_1'
    extra_flags: tuple[str, ...] = ()   # after the variant's: ('-march=rv64gcv_zvfh',) for the RVV 16x1 family
                                        # (a GGML_RV_ZVFH build, ggml-cpu/CMakeLists.txt L476-477)

    @property
    def arch(self) -> str:
        from lowp.kernels.ggml.variants import variant
        return variant(self.variant).arch

    def ggml_sources(self) -> list[Path]:
        cpu = Path(self.checkout) / "src" / "ggml-cpu"
        return [cpu / "repack.cpp", cpu / "arch" / ARCH_FOLDER[self.arch] / "repack.cpp"]

    def flags(self) -> tuple[str, ...]:
        from lowp.kernels.ggml.variants import variant
        root = Path(self.checkout)
        includes = (root / "include", root / "src", root / "src" / "ggml-cpu")
        return ("-O2", *variant(self.variant).flags, *self.extra_flags, *(f"-I{d}" for d in includes))

    def stub_sources(self, libc: bool) -> list[Path]:
        from lowp.emulator import buildcache
        from lowp.emulator.native_build import cache_dir
        from lowp.kernels.ggml.variants import variant
        folder, src = cache_dir() / "src", Path(self.checkout) / "src"
        quants = GgmlBuild(src / "ggml-cpu" / "quants.c", src / "ggml-cpu" / "quants.c", (), src / "ggml-quants.h",
                           variant(self.variant))       # what the vec_dots' shim reads: ggml-quants.h's names
        stubs = [shim_file(quants, libc),
                 buildcache.source_file(backend_traps(), folder, "ggml-repack-traps"),
                 buildcache.source_file(TRAITS_STUB, folder, "ggml-repack-traits", ".cpp")]
        if not libc:
            stubs.append(buildcache.source_file(CXX_RUNTIME_STUB, folder, "ggml-repack-cxxrt"))
        return stubs

    def native(self) -> Path:
        """The shared object (host compiler, its C++ runtime linked)."""
        from lowp.emulator.native_build import build_shared_library
        return build_shared_library([*self.ggml_sources(), *self.stub_sources(True)], self.flags(),
                                    f"ggml-repack-{self.variant}")     # the cache key has the flags

    def guest_flags(self) -> tuple[tuple[str, ...], tuple[Path, ...]]:
        """(flags, depends) of the static guests: for qemu-user (zig c++, no C++ library) lowp's CXX_HEADERS
        first, which join the build's key, and musl's C headers last; Bochs builds x86-64 with the host's C++
        compiler and its headers (or zig's, with libc++'s, for the AMX flags), whose <cstdlib> lowp's would shadow
        (`std::abs` undeclared in libstdc++'s stdlib.h)."""
        from lowp.emulator.build import libc_header_flags
        if self.arch == "x86-64":
            return self.flags(), ()
        headers = _header_folder()
        return (("-isystem", str(headers), *self.flags(), *libc_header_flags(self.arch)),
                tuple(sorted(headers.iterdir())))


ARGUMENTS = ("n", "s", "bs", "x", "y", "nr", "nc")
ZVFH = ("-march=rv64gcv_zvfh",)


def repack_build(checkout: Path, variant_name: str) -> RepackBuild:
    """The RepackBuild lowp judges a variant's gemv/gemm functions in. A RISC-V V build is a GGML_RV_ZVFH one
    (ggml-cpu/CMakeLists.txt L476-477): the 16x1 layouts exist only there (repack.h L176-189)."""
    from lowp.kernels.ggml.variants import variant
    v = variant(variant_name)
    return RepackBuild(Path(checkout), variant_name, ZVFH if v.arch == "riscv64" and "v" in v.features else ())


class RepackRunner(OnTarget):
    """The gemv/gemm functions of one RepackBuild at one vector length, on the executor that runs them here (as
    lowp.kernels.ggml.executor.VecDot chooses: natively where the CPU has every feature of the variant, else on its
    emulated target: Bochs for x86-64, qemu-user for AArch64 and RISC-V at the vector length asked)."""

    def __init__(self, build: RepackBuild, vector_bits: int | None = None, *, backend: str | None = None,
                 budget: float = 10.0):
        from lowp.kernels.ggml.variants import variant
        self.build, self.vector_bits, self.budget, self._backend = build, vector_bits, budget, backend
        self.variant = variant(build.variant)
        self._library = self._machine = None

    def symbols(self) -> frozenset[str]:
        if self.backend == "native":
            from lowp.kernels import guard
            return frozenset(guard._symbols(str(self._native()[1])))
        return frozenset(self._guest().binary.symbols)

    def has(self, symbol: str) -> bool:
        return symbol in self.symbols()

    def _native(self):
        if self._library is None:
            import cffi
            ffi, path = cffi.FFI(), self.build.native()
            self._library = (ffi.dlopen(str(path)), path)     # loaded for its address; guard makes the call
        return self._library

    def _guest(self):
        if self._machine is None:
            flags, depends = self.build.guest_flags()
            self._machine = self.target.machine(
                [*self.build.ggml_sources(), *self.build.stub_sources(False)], flags=flags, depends=depends,
                vector_bits=self.vector_bits, features=self.variant.features)
        return self._machine

    def call(self, symbol: str, vx: bytes, vy: bytes, n: int, nr: int, nc: int, bs: int) -> np.ndarray:
        """symbol(n, s, bs, vx, vy, nr, nc) with s poisoned (NaN, max(nr, 1) * bs floats): all of s after the call.
        Every buffer ends at a guard page (native) or is checked for canaries (emulated): an over-read faults."""
        s = np.full(max(nr, 1) * bs, np.float32(np.nan), np.float32)
        x, y = np.frombuffer(vx, np.uint8).copy(), np.frombuffer(vy, np.uint8).copy()
        if self.backend == "native":
            from lowp.kernels import guard
            _, path = self._native()
            with guard.Arena() as arena:
                rs, rx, ry = arena.place("s", s), arena.place("x", x), arena.place("y", y)
                guard.call(guard.function_address(path, symbol), [n, rs.base, bs, rx.base, ry.base, nr, nc], arena,
                           budget=self.budget, library=path)
                return rs.array.copy()
        r = self._guest().call(symbol, n, s, bs, x, y, nr, nc, names=ARGUMENTS, **self.timing())
        return np.asarray(r["s"], np.float32)

    def quantize(self, symbol: str, x: np.ndarray) -> bytes:
        """ggml_quantize_mat_*(x, vy, k) on four float32 rows x (4 x k): the interleaved blocks it writes."""
        x = np.ascontiguousarray(x, np.float32)
        k = x.shape[1]
        size = (FORMATS["q8_0"].dtype.itemsize if "q8_0" in symbol else FORMATS["q8_K"].dtype.itemsize) * 4 * k // (
            32 if "q8_0" in symbol else QK_K)
        vy = np.zeros(size, np.uint8)
        if self.backend == "native":
            from lowp.kernels import guard
            _, path = self._native()
            with guard.Arena() as arena:
                rx, ry = arena.place("x", x.reshape(-1)), arena.place("y", vy)
                guard.call(guard.function_address(path, symbol), [rx.base, ry.base, k], arena, budget=self.budget,
                           library=path)
                return ry.array.tobytes()
        r = self._guest().call(symbol, x.reshape(-1), vy, k, names=("x", "y", "k"), **self.timing())
        return np.asarray(r["y"], np.uint8).tobytes()

    def close(self) -> None:
        if self._machine is not None and hasattr(self._machine, "close"):
            self._machine.close()


def result_matrix(function: str, s: np.ndarray, nr: int, nc: int, bs: int) -> tuple[np.ndarray, bool]:
    """(the nr x nc results read from s as ggml lays them out, whether every other float of s is still the NaN
    poison): the gemm stores s[row * bs + col] (L1707), the gemv s[col] only (L795)."""
    if REPACKED[function].kind == "gemv":
        return s[:nc].reshape(1, nc), bool(np.isnan(s[nc:]).all())
    grid = s.reshape(-1, bs)
    return grid[:nr, :nc], bool(np.isnan(grid[:, nc:]).all())


@dataclass
class Tally:
    """Cases of one function on one runner: how many equal `expected` bit for bit (with s untouched outside the
    results), and the first that did not (blocks, nc, nr, what happened)."""
    equal: int = 0
    total: int = 0
    first: tuple | None = None


def measure(runner: RepackRunner, function: str, rng, symbol: str | None = None,
            blocks=(1, 2, 3, 4, 5, 6, 7, 8), groups=(1, 2, 3), gemm_rows=(4, 8, 16, 20)) -> Tally:
    """`symbol` (default `function`; its _generic twin shares the model) on exact-domain cases: every block count,
    nc = groups x N, nr = 1 (gemv) or, for a gemm, the next of gemm_rows (x86's gemms work in tiles of 16 rows and
    16 columns with 4-row and 8-column tails, arch/x86/repack.cpp L662-664: 4, 8, 16 and 20 rows reach both);
    bs = nc + 3 so a row-stride error lands in poisoned floats."""
    from lowp.emulator.errors import EmulatorError
    r, tally = REPACKED[function], Tally()
    for nb in blocks:
        for g in groups:
            nc, nr = r.ncols * g, (1 if r.kind == "gemv" else gemm_rows[(nb + g) % len(gemm_rows)])
            xs, ys, n = draw_case(function, nb, nc, nr, rng)
            vx, vy = operands(function, xs, ys)
            tally.total += 1
            try:
                got, clean = result_matrix(function, runner.call(symbol or function, vx, vy, n, nr, nc, nc + 3),
                                           nr, nc, nc + 3)
            except EmulatorError as e:
                tally.first = tally.first or (nb, nc, nr, f"{type(e).__name__}: {e}")
                continue
            want = expected(function, xs, ys)
            if clean and np.array_equal(got.view(np.uint32), want.view(np.uint32)):
                tally.equal += 1
            elif tally.first is None:
                tally.first = (nb, nc, nr, f"got {got.ravel()[:4]} want {want.ravel()[:4]} clean={clean}")
    return tally
