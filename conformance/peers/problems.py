"""Quantized problems for the peer libraries, generated deterministically from a seed: the parent process
generates them, the child runs them through the library, and the parent judges the outputs against lowp's models.

Every problem is a dict of numpy arrays and Python scalars, with 'id' (operator:seed:index) and 'kind' (the value
class). Value classes, cycled so every batch has each of them:
- random: A uniform over u8, W over s8, zero points over their whole range;
- reduce_range: activations in 0..127 (what a reduce_range observer produces): no u8*s8 pair can saturate;
- pairs: adversarial, A in 230..255 and both weights of many (k, k+1) pairs, k even, large with one sign, so
  VPMADDUBSW pair sums leave int16 (255*127*2 = 64770);
- odd_pairs: the same at odd k (pairs straddling the even-k pairing): only a kernel that pairs differently saturates;
- extreme_zp: zero points at the ends of their range (x_zp 0/255, w_zp -128/127);
- sparse: small values and many zeros.
Shapes run from 1x1x1 to a few hundred per side (M x N x K, a work cap keeps the batch fast).
"""
from __future__ import annotations

import numpy as np

F32 = np.float32
KINDS = ("random", "reduce_range", "pairs", "odd_pairs", "extreme_zp", "sparse")


def _shape(rng, i, max_side=300, work=200_000):
    """Tiny shapes first (1x1x1 ... 3x3x3), then log-uniform sides with a work cap; one in 25 is long in N or K."""
    tiny = [(1, 1, 1), (1, 1, 2), (2, 1, 1), (1, 2, 3), (3, 3, 3), (1, 1, 17), (2, 3, 64), (1, 300, 1)]
    if i < len(tiny):
        return tiny[i]
    while True:
        m = int(np.exp(rng.uniform(0, np.log(64))))
        n = int(np.exp(rng.uniform(0, np.log(max_side))))
        k = int(np.exp(rng.uniform(0, np.log(max_side))))
        if i % 25 == 0:
            m, n, k = int(rng.integers(1, 4)), int(rng.integers(50, max_side + 1)), int(rng.integers(250, 800))
        if m * n * k <= (work * 6 if i % 25 == 0 else work):
            return m, n, k


def _activations(rng, kind, m, k):
    if kind == "reduce_range":
        return rng.integers(0, 128, (m, k)).astype(np.uint8)
    if kind in ("pairs", "odd_pairs"):
        a = rng.integers(230, 256, (m, k))
        a[rng.random((m, k)) < 0.1] = 0
        return a.astype(np.uint8)
    if kind == "sparse":
        a = rng.integers(0, 9, (m, k))
        a[rng.random((m, k)) < 0.6] = 0
        return a.astype(np.uint8)
    a = rng.integers(0, 256, (m, k))
    if kind == "extreme_zp":
        a[rng.random((m, k)) < 0.3] = rng.choice([0, 255])
    return a.astype(np.uint8)


def _weights(rng, kind, n, k):
    """W is N x K int8 (PyTorch's layout)."""
    if kind in ("pairs", "odd_pairs"):
        w = rng.integers(-128, 128, (n, k))
        start = 0 if kind == "pairs" else 1
        for p in range(start, k - 1, 2):
            sign = rng.choice([-1, 1], n)
            big = rng.random(n) < 0.7
            for q in (p, p + 1):
                mag = rng.integers(100, 128, n) + (sign < 0)        # -128 reachable
                w[big, q] = (sign * mag)[big]
        return np.clip(w, -128, 127).astype(np.int8)
    if kind == "sparse":
        w = rng.integers(-4, 5, (n, k))
        w[rng.random((n, k)) < 0.6] = 0
        return w.astype(np.int8)
    return rng.integers(-128, 128, (n, k)).astype(np.int8)


def _log_uniform(rng, lo, hi, size=None):
    return np.exp(rng.uniform(np.log(lo), np.log(hi), size))


def _output_qparams(rng, real):
    """y_scale and y_zp that put most of the real outputs inside the uint8 range (some clip at either end)."""
    lo, hi = (float(np.percentile(real, 2)), float(np.percentile(real, 98))) if real.size else (0.0, 1.0)
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    y_scale = max(hi - lo, 1e-6) / 255 * float(rng.uniform(0.7, 1.3))
    y_zp = int(np.clip(np.rint(-lo / y_scale) + rng.integers(-8, 9), 0, 255))
    return y_scale, y_zp


def linear_problems(seed: int, count: int, *, weight_zero_point: bool = True) -> list[dict]:
    """Problems for quantized::linear (prepacked weights). weight_zero_point=False: symmetric weights only (w_zp 0,
    as PyTorch's onednn engine requires)."""
    rng = np.random.default_rng([seed, 1])
    out = []
    for i in range(count):
        kind = KINDS[i % len(KINDS)]
        m, n, k = _shape(rng, i)
        A, W = _activations(rng, kind, m, k), _weights(rng, kind, n, k)
        per_channel = bool(rng.random() < 0.5)
        nq = n if per_channel else 1
        if kind == "extreme_zp":
            x_zp = int(rng.choice([0, 255, 128]))
            w_zp = rng.choice([-128, 127, 0], nq)
        elif kind == "pairs" or kind == "odd_pairs":
            x_zp = int(rng.integers(0, 40))
            w_zp = rng.integers(-5, 6, nq)
        else:
            x_zp = int(rng.integers(0, 256))
            w_zp = rng.integers(-128, 128, nq)
        if not weight_zero_point:
            w_zp = np.zeros(nq, np.int64)
        x_scale = float(_log_uniform(rng, 1e-3, 1.0))
        w_scale = _log_uniform(rng, 1e-4, 0.1, nq)
        w_zp = np.asarray(w_zp, np.int64).reshape(nq)
        exact = (A.astype(np.int64) - x_zp) @ (W.astype(np.int64) - (w_zp if per_channel else w_zp[:1])[:, None]).T
        real = exact * x_scale * (w_scale if per_channel else w_scale[:1])[None, :]
        bias = None
        if rng.random() < 0.6:
            spread = float(np.abs(real).mean()) + 1e-3 if real.size else 1.0
            bias = (rng.normal(0, spread, n)).astype(F32)
            real = real + bias[None, :]
        y_scale, y_zp = _output_qparams(rng, real)
        out.append({"id": f"linear:{seed}:{i}", "kind": kind, "A": A, "W": W, "x_scale": x_scale, "x_zp": x_zp,
                    "w_scale": w_scale, "w_zp": np.asarray(w_zp, np.int64), "per_channel": per_channel, "bias": bias,
                    "y_scale": y_scale, "y_zp": y_zp, "relu": bool(rng.random() < 0.2)})
    return out


def dynamic_problems(seed: int, count: int, *, weight_zero_point: bool = True) -> list[dict]:
    """Problems for quantized::linear_dynamic: float32 X (quantized by the library itself), reduce_range on and
    off. The adversarial kinds put most of X at its maximum, so the library quantizes it to 255 (or 127)."""
    rng = np.random.default_rng([seed, 2])
    out = []
    for i in range(count):
        kind = KINDS[i % len(KINDS)]
        m, n, k = _shape(rng, i)
        W = _weights(rng, kind, n, k)
        per_channel = bool(rng.random() < 0.5)
        nq = n if per_channel else 1
        w_zp = rng.integers(-128, 128, nq) if kind in ("random", "extreme_zp") else rng.integers(-5, 6, nq)
        if kind == "extreme_zp":
            w_zp = rng.choice([-128, 127, 0], nq)
        if not weight_zero_point:
            w_zp = np.zeros(nq, np.int64)
        w_scale = _log_uniform(rng, 1e-4, 0.1, nq)
        scale = float(_log_uniform(rng, 1e-2, 10.0))
        if kind in ("pairs", "odd_pairs"):
            X = np.full((m, k), scale, F32)
            X[rng.random((m, k)) < 0.1] = F32(0)
        elif kind == "sparse":
            X = (rng.integers(0, 9, (m, k)) * scale / 8).astype(F32)
            X[rng.random((m, k)) < 0.6] = F32(0)
        elif kind == "extreme_zp":
            X = (rng.uniform(0, 1, (m, k)) * scale * rng.choice([-1, 1])).astype(F32)   # all one sign: zp 0 or 255
        else:
            X = (rng.normal(rng.uniform(-1, 1) * scale, scale, (m, k))).astype(F32)
        bias = rng.normal(0, 1, n).astype(F32) if rng.random() < 0.6 else None
        reduce_range = bool(i % 2) if kind != "reduce_range" else True
        out.append({"id": f"linear_dynamic:{seed}:{i}", "kind": kind, "X": X, "W": W, "w_scale": w_scale,
                    "w_zp": np.asarray(w_zp, np.int64), "per_channel": per_channel, "bias": bias,
                    "reduce_range": reduce_range, "relu": bool(rng.random() < 0.2)})
    return out


ORT_TYPES = {"u8": np.uint8, "s8": np.int8}


def _ints(rng, dtype, shape, kind):
    info = np.iinfo(dtype)
    if kind == "sparse":
        v = rng.integers(-4 if info.min < 0 else 0, 5, shape)
        v[rng.random(shape) < 0.6] = 0
        return v.astype(dtype)
    v = rng.integers(int(info.min), int(info.max) + 1, shape)
    if kind in ("pairs", "odd_pairs", "extreme_zp"):
        ends = rng.random(shape) < 0.5
        v[ends] = rng.choice([int(info.min), int(info.max)], int(ends.sum()))
    return v.astype(dtype)


def _zp(rng, dtype, kind, size=None):
    info = np.iinfo(dtype)
    if kind == "extreme_zp":
        return rng.choice([int(info.min), int(info.max)], size).astype(dtype)
    return rng.integers(int(info.min), int(info.max) + 1, size).astype(dtype)


def _matmul_operands(rng, i, combos):
    """Problem i's value kind, types, A (M x K), B (K x N) and zero points (b's per column 40% of the time), drawn
    in one fixed order so a problem id always regenerates the same data."""
    kind = KINDS[i % len(KINDS)]
    ta, tb = combos[i % len(combos)]
    m, n, k = _shape(rng, i)
    A, B = _ints(rng, ORT_TYPES[ta], (m, k), kind), _ints(rng, ORT_TYPES[tb], (k, n), kind)
    per_col = bool(rng.random() < 0.4)
    a_zp, b_zp = _zp(rng, ORT_TYPES[ta], kind), _zp(rng, ORT_TYPES[tb], kind, n if per_col else None)
    return kind, ta, tb, A, B, a_zp, b_zp, per_col


def matmul_integer_problems(seed: int, count: int, combos) -> list[dict]:
    """MatMulInteger: A (M x K) and B (K x N) of the types in `combos` ((a, b) names from ORT_TYPES), a_zp scalar,
    b_zp scalar or per column."""
    rng = np.random.default_rng([seed, 3])
    out = []
    for i in range(count):
        kind, ta, tb, A, B, a_zp, b_zp, per_col = _matmul_operands(rng, i, combos)
        out.append({"id": f"MatMulInteger:{seed}:{i}", "kind": kind, "types": (ta, tb), "A": A, "B": B,
                    "a_zp": a_zp, "b_zp": b_zp, "m2": int(rng.integers(1, 9))})
    return out


def qlinear_matmul_problems(seed: int, count: int, combos) -> list[dict]:
    """QLinearMatMul: (a, b, y) types, scales, zero points (b per column or per tensor), y_scale so most outputs
    land inside the output type, and the opset the model imports (20 or 21)."""
    rng = np.random.default_rng([seed, 4])
    out = []
    for i in range(count):
        kind, ta, tb, A, B, a_zp, b_zp, per_col = _matmul_operands(rng, i, combos)
        n = B.shape[1]
        a_scale = F32(_log_uniform(rng, 1e-3, 1.0))
        b_scale = _log_uniform(rng, 1e-4, 0.1, n if per_col else None)
        b_scale = np.asarray(b_scale, F32)
        acc = (A.astype(np.int64) - int(a_zp)) @ (B.astype(np.int64) - np.asarray(b_zp, np.int64))
        real = acc * float(a_scale) * np.atleast_1d(b_scale).astype(np.float64)[None, :]
        y_dtype = ORT_TYPES[ta]
        y_scale, y_zp = _output_qparams(rng, real)
        if y_dtype == np.int8:
            y_zp -= 128
        # Every other u8-A problem imports opset 20 (QLinearMatMul's opset-10 definition, which ORT's
        # x64quantprecision rewrite covers) instead of 21; s8-A problems stay at 21, because at 20 that rewrite turns
        # an s8 x s8 node into s8 x u8, which ORT cannot run (docs/findings.md 4.5).
        opset = 20 if ta == "u8" and (i // len(combos)) % 2 else 21
        out.append({"id": f"QLinearMatMul:{seed}:{i}", "kind": kind, "types": (ta, tb), "A": A, "B": B,
                    "a_zp": a_zp, "b_zp": b_zp, "a_scale": a_scale, "b_scale": b_scale, "y_scale": F32(y_scale),
                    "y_zp": y_dtype(y_zp), "y_dtype": y_dtype, "m2": int(rng.integers(1, 9)), "opset": opset})
    return out


def conv_integer_problems(seed: int, count: int, combos) -> list[dict]:
    """ConvInteger (2-D, NCHW): kernel 1..5, strides, dilations, pads, groups; x_zp scalar, w_zp scalar or per
    output channel."""
    rng = np.random.default_rng([seed, 5])
    out = []
    for i in range(count):
        kind = KINDS[i % len(KINDS)]
        tx, tw = combos[i % len(combos)]
        g = int(rng.choice([1, 1, 1, 2, 3]))
        cg, og = int(rng.integers(1, 9)), int(rng.integers(1, 9))
        kh, kw = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        sh, sw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        dh, dw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        pads = [int(v) for v in rng.integers(0, 3, 4)]
        h = int(rng.integers(dh * (kh - 1) + 1, 14))
        w = int(rng.integers(dw * (kw - 1) + 1, 14))
        n = int(rng.integers(1, 3))
        X = _ints(rng, ORT_TYPES[tx], (n, g * cg, h, w), kind)
        Wt = _ints(rng, ORT_TYPES[tw], (g * og, cg, kh, kw), kind)
        per_ch = False      # ORT's ConvInteger refuses per-channel w_zp (conv_integer.cc: per-tensor only)
        out.append({"id": f"ConvInteger:{seed}:{i}", "kind": kind, "types": (tx, tw), "X": X, "W": Wt,
                    "x_zp": _zp(rng, ORT_TYPES[tx], kind), "w_zp": _zp(rng, ORT_TYPES[tw], kind, g * og if per_ch else None),
                    "group": g, "strides": (sh, sw), "dilations": (dh, dw), "pads": tuple(pads)})
    return out


# ---------------------------------------------------------------------------------------------------------------
# Tie seekers: nudge a problem's float parameters so that the float-epilogue variants a library might implement
# give different outputs on some elements (otherwise random data almost never tells them apart).

def seek_float_bias_ties(p: dict, rng, tries: int = 256) -> dict:
    """FBGEMM's per-tensor float bias (docs/research/fbgemm-requantization.md#requantizeoutput): per column, try `tries`
    biases near the drawn one and keep one
    for which 'divide', 'reciprocal' and 'reciprocal_fma' requantize some element of that column differently."""
    from lowp.conformance.contracts.fbgemm import f32, fma_f32
    from lowp.conformance.peers.models import _fbgemm_scales
    if p["per_channel"]:          # the per-tensor epilogue is the one whose float-bias rounding varies by build
        p = dict(p, per_channel=False, w_scale=p["w_scale"][:1], w_zp=p["w_zp"][:1])
    if p["bias"] is None:
        p = dict(p, bias=rng.normal(0, 1, p["W"].shape[0]).astype(F32))
    A, W = p["A"].astype(np.int64), p["W"].astype(np.int64)
    K = A.shape[1]
    wzp = int(p["w_zp"][0])
    raw = A @ W.T - int(p["x_zp"]) * (W.sum(axis=1) - wzp * K)[None, :] - A.sum(axis=1)[:, None] * wzp
    raw = ((raw + 2 ** 31) % 2 ** 32 - 2 ** 31)
    act_w, mult = _fbgemm_scales(p)
    aw, m = act_w[0], mult[0]
    rcp = F32(1.0 / float(aw))
    xf = f32(raw)[None]                                                     # 1 x M x N
    drawn = (p["bias"][None, None, :] * (1 + rng.uniform(-0.3, 0.3, (tries, 1, raw.shape[1])))).astype(F32)
    first = np.full(raw.shape[1], -1)           # per column, the first try whose variants differ
    # The tries in chunks, in order, until every column has one: the same first tries as all at once (the fma
    # emulation is most of the cost, and most columns differ within the first few dozen tries).
    for start in range(0, tries, TIE_CHUNK):
        chunk = drawn[start:start + TIE_CHUNK]
        b = np.broadcast_to(chunk, (len(chunk),) + raw.shape)
        div = f32(xf + f32(b / aw))
        rec = f32(xf + f32(b * rcp))
        fma = fma_f32(b, np.broadcast_to(rcp, b.shape), np.broadcast_to(xf, b.shape))
        codes = [np.rint(f32(v * m).astype(np.float64)) for v in (div, rec, fma)]
        differ = ((codes[0] != codes[1]) | (codes[1] != codes[2])).any(axis=1)   # tries x N
        hit = differ.any(axis=0) & (first < 0)
        first[hit] = start + differ[:, hit].argmax(axis=0)
        if (first >= 0).all():
            break
    bias = p["bias"].copy()
    found = first >= 0
    bias[found] = drawn[first[found], 0, np.flatnonzero(found)]
    return dict(p, bias=bias, kind="bias_tie")


TIE_CHUNK = 32


def seek_qlinear_ties(p: dict, rng, tries: int = 64) -> dict:
    """QLinearMatMul: try `tries` output scales near the drawn one and keep the one for which MLAS's float32
    product and the ONNX reference's float64 product round the most elements differently."""
    acc = (p["A"].astype(np.int64) - int(p["a_zp"])) @ (p["B"].astype(np.int64) - np.asarray(p["b_zp"], np.int64))
    a, bs = F32(p["a_scale"]), np.atleast_1d(np.asarray(p["b_scale"], F32))
    ys = (F32(p["y_scale"]) * (1 + rng.uniform(-0.02, 0.02, tries))).astype(F32)
    best, best_n = p["y_scale"], 0
    for y in ys:
        m = ((a * bs).astype(F32) / y).astype(F32)
        f = np.rint((acc.astype(np.float64).astype(F32) * m[None, :]).astype(F32).astype(np.float64))
        d = np.rint(acc.astype(np.float64) * m.astype(np.float64)[None, :])
        n = int((f != d).sum())
        if n > best_n:
            best, best_n = y, n
    return dict(p, y_scale=F32(best), kind="scale_tie") if best_n else p
