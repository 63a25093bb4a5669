"""Seeds 002 and 003: how often VPMADDUBSW's pair sum saturates, and what it costs, on u8 x s8 inputs drawn as
networks draw them versus uniform ones; what reduce_range (u7 activations) and FBGEMM's acc16 outlier split cost
and save.

Contracts and models: `contracts.exact` (VPDPBUSD, VNNI), `contracts.pair_saturating` (VPMADDUBSW + VPMADDWD +
VPADDD, oneDNN/FBGEMM AVX2), `contracts.shifted_pair_saturating` (oneDNN's s8 x s8 through u8 x s8, seed 002
section 2), `kernels.models.acc16_gemm` (FBGEMM's acc16 with the outlier split, seed 003). Where this CPU runs
them, the real kernels (`u8s8s32_avx2`, `u8s8s32_avx512vnni`, `acc16_avx2`) run on the same inputs and their
results are compared with the contract or model the table uses.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from lowp.conformance.contracts import int32 as C
from lowp.conformance.studies import fig_link, md_table, pyplot, save

DISTS = {
    "uniform": "A uniform on [0, 255], B uniform on [-128, 127] (the type ranges; what a fuzzer draws)",
    "relu/gauss": "A = ReLU(N(0,1)) quantized u8 with zero point 0, scale max/255; B = N(0,1) quantized s8 "
                  "symmetric, scale max|w|/127 (min/max calibration, per tensor)",
    "relu/gauss clip": "as relu/gauss, but both scales from the 99.9th percentile and values clipped "
                       "(what L2-minimising calibration, FBGEMM's recommendation, tends to do)",
    "relu/laplace": "as relu/gauss with Laplace weights (heavier tails, so most weights are small)",
    "no-relu zp128": "A = N(0,1) quantized u8 with zero point 128 (activations without ReLU); B as relu/gauss",
}
INT16 = (-32768, 32767)


def _q_u8(x, scale, zp, hi=255):
    return np.clip(np.rint(x / scale) + zp, 0, hi).astype(np.uint8)


def _q_s8(w, scale, lo=-127, hi=127):
    return np.clip(np.rint(w / scale), lo, hi).astype(np.int8)


def draw(dist: str, M: int, K: int, N: int, rng) -> dict:
    """Float X (M x K) and W (K x N) and their u8 / s8 quantizations, with the scales and the zero point, and the
    reduce_range (u7: [0, 127], scale doubled, zero point halved) and symmetric-s8 activation variants."""
    if dist == "uniform":
        A = rng.integers(0, 256, (M, K)).astype(np.uint8)
        B = rng.integers(-128, 128, (K, N)).astype(np.int8)
        X, W, sa, zp, sw = A.astype(float), B.astype(float), 1.0, 0, 1.0
    else:
        X = rng.normal(0, 1, (M, K))
        W = rng.laplace(0, 1, (K, N)) if dist == "relu/laplace" else rng.normal(0, 1, (K, N))
        if dist == "no-relu zp128":
            sa, zp = np.abs(X).max() / 127.5, 128
        else:
            X = np.maximum(X, 0)
            top = np.quantile(X, 0.999) if dist == "relu/gauss clip" else X.max()
            sa, zp = top / 255, 0
        wtop = np.quantile(np.abs(W), 0.999) if dist == "relu/gauss clip" else np.abs(W).max()
        sw = wtop / 127
        A, B = _q_u8(X, sa, zp), _q_s8(W, sw)
    A7 = _q_u8(X, 2 * sa, zp // 2, hi=127) if dist != "uniform" else (A >> 1).astype(np.uint8)
    sas = np.abs(X).max() / 127 if dist != "uniform" else 1.0
    As8 = _q_s8(X, sas) if dist != "uniform" else (A.astype(np.int16) - 128).astype(np.int8)
    return dict(X=X, W=W, A=A, B=B, sa=sa, zp=zp, sw=sw, A7=A7, sa7=2 * sa, zp7=zp // 2, As8=As8, sas=sas)


def dequant(acc, B, scale_a, zp, scale_w):
    return scale_a * scale_w * (acc.astype(np.float64) - zp * B.astype(np.int64).sum(axis=0)[None, :])


def rel_err(C_hat, C_f) -> float:
    return float(np.sqrt(np.mean((C_hat - C_f) ** 2)) / np.sqrt(np.mean(C_f ** 2)))


def _real(name: str, A, B, expected, params=None):
    """Run a registered kernel (if this CPU can) and say whether it equals `expected`: True/False, or the reason
    it did not run."""
    from lowp.kernels import executor, kernel
    k = kernel(name)
    if params is not None:
        k = dataclasses.replace(k, params=params)
    ex = executor(k)
    why = ex.unavailable()
    if why:
        return why
    return bool(np.array_equal(ex.run(A, B), expected))


def study_dist(dist: str, M: int, K: int, N: int, seed: int, real: bool) -> dict:
    from lowp.kernels import models
    rng = np.random.default_rng([seed, len(dist), sum(map(ord, dist))])
    d = draw(dist, M, K, N, rng)
    A, B = d["A"], d["B"]
    pairs = C._pair_sums(A, B)
    sat = (pairs < INT16[0]) | (pairs > INT16[1])
    exact = C.exact(A, B).astype(np.int64)
    avx2 = C.pair_saturating(A, B).astype(np.int64)
    err = avx2 - exact
    C_f = d["X"] @ d["W"]
    row = {"dist": dist, "shape": [M, K, N], "pairs": int(pairs.size), "pair_saturation_rate": float(sat.mean()),
           "saturated_pairs": int(sat.sum()), "outputs_affected": float((err != 0).mean()),
           "max_abs_error": int(np.abs(err).max()),
           "mean_abs_error_affected": float(np.abs(err[err != 0]).mean()) if (err != 0).any() else 0.0,
           "a_mean": float(A.mean()), "b_mean_abs": float(np.abs(B.astype(np.int16)).mean()),
           "pair_sum_p999": float(np.quantile(np.abs(pairs), 0.999)), "pair_sum_max": int(np.abs(pairs).max())}
    row["rel_exact"] = rel_err(dequant(exact, B, d["sa"], d["zp"], d["sw"]), C_f)
    row["rel_avx2"] = rel_err(dequant(avx2, B, d["sa"], d["zp"], d["sw"]), C_f)
    u7 = C.pair_saturating(d["A7"], B).astype(np.int64)
    row["u7_saturated_pairs"] = int(((C._pair_sums(d["A7"], B) < INT16[0]) | (C._pair_sums(d["A7"], B) > INT16[1])).sum())
    row["u7_equals_exact"] = bool(np.array_equal(u7, C.exact(d["A7"], B)))
    row["rel_u7"] = rel_err(dequant(u7, B, d["sa7"], d["zp7"], d["sw"]), C_f)
    s8 = C.shifted_pair_saturating(d["As8"], B).astype(np.int64)
    s8_exact = C.exact(d["As8"], B).astype(np.int64)
    shifted = C._pair_sums(d["As8"].astype(np.int16) + 128, B)
    row["s8s8_pair_saturation_rate"] = float(((shifted < INT16[0]) | (shifted > INT16[1])).mean())
    row["s8s8_outputs_affected"] = float((s8 != s8_exact).mean())
    C_f8 = d["As8"].astype(float) @ d["W"] if dist == "uniform" else C_f    # uniform: the exact s8 x s8 product
    row["rel_s8s8_exact"] = rel_err(dequant(s8_exact, B, d["sas"], 0, d["sw"]), C_f8)
    row["rel_s8s8"] = rel_err(dequant(s8, B, d["sas"], 0, d["sw"]), C_f8)
    acc16 = []
    for nbits in (8, 7, 6, 5, 4):
        a16 = models.acc16_gemm(A, B, width=256, brow=256, nbits=nbits).astype(np.int64)
        _, outl = models.outlier_split(B, nbits)
        acc16.append({"nbits": nbits, "outlier_density": float((outl != 0).mean()),
                      "outputs_affected": float((a16 != exact).mean()),
                      "rel": rel_err(dequant(a16, B, d["sa"], d["zp"], d["sw"]), C_f),
                      "real_acc16_avx2": _real("acc16_avx2", A, B, a16, {"nbits": nbits}) if real else "not run"})
    row["acc16"] = acc16
    if real:
        row["real_u8s8s32_avx2"] = _real("u8s8s32_avx2", A, B, avx2.astype(np.int32))
        row["real_u8s8s32_avx512vnni"] = _real("u8s8s32_avx512vnni", A, B, exact.astype(np.int32))
        row["real_s8s8s32_avx2"] = _real("s8s8s32_avx2", d["As8"], B, s8.astype(np.int32))
    hist_edges = np.linspace(-65536, 65536, 257)
    row["pair_hist"] = np.histogram(pairs, bins=hist_edges)[0].tolist()
    row["pair_hist_edges"] = hist_edges.tolist()
    return row


def compute(small: bool = False, seed: int = 0, real: bool = True) -> dict:
    M, K, N = (32, 256, 32) if small else (128, 1024, 128)
    rows = [study_dist(dist, M, K, N, seed, real) for dist in DISTS]
    return {"study": "seed002", "small": small, "seed": seed, "shape": [M, K, N], "dists": DISTS, "rows": rows}


# ---------------------------------------------------------------------------------------------------------------

def plot(n: dict, out_dir: Path) -> list[Path]:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4))
    for r, color in zip(n["rows"], ("black", "tab:blue", "tab:green", "tab:purple", "tab:orange")):
        edges = np.asarray(r["pair_hist_edges"])
        h = np.asarray(r["pair_hist"], float) / r["pairs"]
        ax.step((edges[:-1] + edges[1:]) / 2, np.where(h > 0, h, np.nan), where="mid", color=color,
                label=f"{r['dist']}: {100 * r['pair_saturation_rate']:.3g}% of pairs saturate")
    for x in INT16:
        ax.axvline(x, color="red", lw=1)
    ax.text(INT16[1] * 1.03, 0.2, "int16 limits:\nVPMADDUBSW\nsaturates beyond", color="red", fontsize=8, va="top")
    ax.set_yscale("log")
    ax.set_xlabel("VPMADDUBSW pair sum a[k] b[k] + a[k+1] b[k+1] (exact)")
    ax.set_ylabel("fraction of pairs")
    ax.set_title("Where u8 x s8 pair sums fall: type-range inputs against inputs drawn as networks draw them")
    ax.legend(fontsize=8, loc="upper left")
    f1 = save(fig, out_dir / "seed002-pair-sums.png")

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for r, color in zip(n["rows"], ("black", "tab:blue", "tab:green", "tab:purple", "tab:orange")):
        a = r["acc16"]
        dens = [100 * x["outlier_density"] for x in a]
        axes[0].plot(dens, [100 * x["outputs_affected"] for x in a], "o-", color=color, label=r["dist"])
        if r["dist"] != "uniform":         # its float reference is the exact integer product: error 0 at the end
            axes[1].plot(dens, [x["rel"] for x in a], "o-", color=color, label=r["dist"])
        for x, y, nb in zip(dens, [100 * x["outputs_affected"] for x in a], [x["nbits"] for x in a]):
            axes[0].annotate(str(nb), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
            axes[1].axhline(r["rel_exact"], color=color, lw=0.8, ls=":")
    axes[0].set_xscale("symlog", linthresh=0.1)
    axes[1].set_xscale("symlog", linthresh=0.1)
    for ax in axes:
        ax.set_xlim(-0.02, 130)
    axes[1].set_yscale("log")
    axes[0].set_xlabel("outlier density (% of weights in the int32 sparse pass)")
    axes[1].set_xlabel("outlier density (% of weights in the int32 sparse pass)")
    axes[0].set_ylabel("% of outputs different from exact")
    axes[1].set_ylabel("relative RMS error vs float (dotted: exact int32)")
    axes[0].set_title("acc16: nbits_in_non_outlier 8 (left) ... 4 (right)")
    axes[1].set_title("acc16: error of the result in float terms")
    axes[0].legend(fontsize=8)
    f2 = save(fig, out_dir / "seed002-acc16-outliers.png")
    return [f1, f2]


def _real_cell(v):
    if v is True:
        return "yes"
    if v is False:
        return "**NO**"
    return f"not run ({v})"


def page(n: dict, figures: list[Path]) -> str:
    M, K, N = n["shape"]
    rows = {r["dist"]: r for r in n["rows"]}
    uni = rows["uniform"]
    real_rows = [r for r in n["rows"] if r["dist"] != "uniform"]
    worst_real = max(real_rows, key=lambda r: r["pair_saturation_rate"])
    lines = [
        "# Seeds 002 and 003: VPMADDUBSW saturation on real and uniform inputs; reduce_range and acc16",
        "",
        "*Generated by `lowp study seed002`" + (" (small configuration)" if n["small"] else "") +
        "; do not edit: every number below comes from that command ([data](seed002.json)).*",
        "",
        "Without VNNI, u8 x s8 GEMMs (oneDNN, FBGEMM) multiply with VPMADDUBSW, which sums two products into "
        "int16 *with saturation*: {255, 255} . {127, 127} gives 32767, not 64770 (seed 002). oneDNN leaves avoiding "
        "it to the user (u7 activations, or s7 weights); PyTorch's `reduce_range` quantizes activations to "
        "[0, 127]; FBGEMM's acc16 path (seed 003) goes further, accumulating 128 pair sums in int16 (VPADDSW, "
        "saturating) and moving the large weights (the outliers) to an exact int32 sparse pass. How often does "
        "any of this bite? It depends entirely on how the inputs are drawn.",
        "",
        f"Each input set is a {M}x{K} by {K}x{N} GEMM:",
        "",
    ]
    lines += [f"- **{k}**: {v}." for k, v in n["dists"].items()]
    lines += ["", fig_link(figures, "pair-sums", "pair sums"), "", "## VPMADDUBSW (AVX2 u8s8s32) and reduce_range",
              ""]
    table = []
    for r in n["rows"]:
        table.append([r["dist"], f"{r['pair_saturation_rate']:.2e}", r["saturated_pairs"],
                      f"{100 * r['outputs_affected']:.3g}%", r["max_abs_error"], f"{r['rel_exact']:.3g}",
                      f"{r['rel_avx2']:.3g}", f"{r['rel_u7']:.3g}", "yes" if r["u7_equals_exact"] else "**NO**",
                      _real_cell(r.get("real_u8s8s32_avx2", "not run")),
                      _real_cell(r.get("real_u8s8s32_avx512vnni", "not run"))])
    lines += [md_table(table, ["inputs", "saturating pairs (rate)", "saturating pairs", "outputs wrong",
                               "max abs error (int32)", "rel. error exact (VNNI)", "rel. error AVX2",
                               "rel. error u7 (reduce_range)", "u7 exact", "u8s8s32_avx2 kernel = contract",
                               "u8s8s32_avx512vnni kernel = exact"]), ""]
    lines += ["Relative errors are RMS(result - float GEMM) / RMS(float GEMM), the result dequantized; for the "
              "uniform inputs the \"float GEMM\" is the exact integer one, so its exact column is 0.", ""]
    ratio_u7 = [r["rel_u7"] / r["rel_exact"] for r in real_rows]
    lines += [
        "What it says:",
        "",
        f"- On uniform inputs {100 * uni['pair_saturation_rate']:.3g}% of the pairs saturate and "
        f"{100 * uni['outputs_affected']:.3g}% of the outputs are wrong, by up to {uni['max_abs_error']} "
        f"(relative error {uni['rel_avx2']:.3g}). This is the case seed 002 warns about, and the one a fuzzer "
        "over the type range finds at once.",
        f"- On inputs drawn as networks draw them the rate is at most {worst_real['pair_saturation_rate']:.2g} "
        f"per pair ({worst_real['dist']}: {worst_real['saturated_pairs']} of {worst_real['pairs']} pairs; "
        f"{100 * worst_real['outputs_affected']:.3g}% of outputs off, by up to {worst_real['max_abs_error']}); "
        "the 99.9th percentile of |pair sum| is "
        + ", ".join(f"{r['pair_sum_p999']:.0f} ({r['dist']})" for r in real_rows) +
        ", far below 32767. Saturation needs two large activations meeting two large same-signed weights.",
        f"- reduce_range (u7) removes saturation entirely (u7 = exact on every input set: "
        f"{all(r['u7_equals_exact'] for r in n['rows'])}) and costs "
        f"{min(ratio_u7):.2f}x to {max(ratio_u7):.2f}x the relative error of exact u8 on the realistic sets "
        "(one bit of activation resolution). " + (
            "On every realistic set that is a larger error than the saturation it prevents: "
            if all(r["rel_u7"] > r["rel_avx2"] for r in real_rows) else "Against the saturation it prevents: ")
        + ", ".join(f"{r['dist']}: AVX2 u8 {r['rel_avx2']:.3g} vs u7 {r['rel_u7']:.3g}" for r in real_rows) + ".",
        "",
        "## s8 x s8 through u8 x s8 (oneDNN's +128 shift, seed 002 section 2)",
        "",
        "Activations quantized s8 symmetric, shifted by +128 to u8 for VPMADDUBSW, compensated by "
        "`-128 * colsum(B)`. The shift makes every activation large, so the pair sums grow with |w| alone:",
        "",
    ]
    table = [[r["dist"], f"{r['s8s8_pair_saturation_rate']:.2e}", f"{100 * r['s8s8_outputs_affected']:.3g}%",
              f"{r['rel_s8s8_exact']:.3g}", f"{r['rel_s8s8']:.3g}", _real_cell(r.get("real_s8s8s32_avx2", "not run"))]
             for r in n["rows"]]
    lines += [md_table(table, ["inputs", "saturating pairs (rate)", "outputs wrong", "rel. error exact s8s8",
                               "rel. error via u8s8 (AVX2)", "s8s8s32_avx2 kernel = contract"]), ""]
    worst_s8 = max(real_rows, key=lambda r: r["s8s8_outputs_affected"])
    lines += [("The shift multiplies the damage" if worst_s8["s8s8_outputs_affected"] > worst_s8["outputs_affected"]
               else "The shift does not add damage here") + f": on {worst_s8['dist']} {100 * worst_s8['s8s8_outputs_affected']:.3g}% "
              f"of outputs are wrong (against {100 * worst_s8['outputs_affected']:.3g}% for u8 activations). oneDNN's "
              "convolutions halve the weights on this path, and its s8s8 GEMM asks for s7 weights, for this reason.",
              "", "## acc16 and the outlier split (seed 003)", "",
              fig_link(figures, "acc16-outliers", "acc16 outliers"), ""]
    table = []
    for r in n["rows"]:
        for a in r["acc16"]:
            table.append([r["dist"], a["nbits"], f"{100 * a['outlier_density']:.3g}%", f"{100 * a['outputs_affected']:.3g}%",
                          f"{a['rel']:.3g}", f"{r['rel_exact']:.3g}", _real_cell(a["real_acc16_avx2"])])
    lines += [md_table(table, ["inputs", "nbits_in_non_outlier", "outlier density", "outputs wrong",
                               "rel. error acc16", "rel. error exact", "acc16_avx2 kernel = model"]), ""]
    def exact_from(dist):
        """The largest nbits at which acc16 equals exact on `dist`, and its outlier density."""
        ok = [a for a in rows[dist]["acc16"] if a["outputs_affected"] == 0]
        return max(ok, key=lambda a: a["nbits"]) if ok else None
    rg = rows["relu/gauss"]["acc16"]
    at8 = rg[0]
    lines += [
        f"On relu/gauss at depth {K}, acc16 without outliers (nbits 8, FBGEMM's default) leaves "
        f"{100 * at8['outputs_affected']:.3g}% of outputs wrong (relative error {at8['rel']:.3g} against "
        f"{rows['relu/gauss']['rel_exact']:.3g} exact): 128 pair sums of non-negative activations times "
        "symmetric weights random-walk past 32767. By split:",
        "",
    ]
    for dist in rows:
        e = exact_from(dist)
        seq = ", ".join(f"nbits {a['nbits']}: {100 * a['outputs_affected']:.3g}% wrong with "
                        f"{100 * a['outlier_density']:.3g}% outliers" for a in rows[dist]["acc16"])
        lines.append(f"- {dist}: {seq}; " + (f"exact from nbits {e['nbits']} ({100 * e['outlier_density']:.3g}% of "
                                             "the weights in the sparse pass)." if e else "never exact."))
    lines += [
        "",
        "Seed 003's \"16-bit accumulation can lead to frequent saturation and hence a big accuracy drop\" is what the "
        "numbers show. The split buys exactness only by moving a large share of the weights to the sparse int32 "
        "pass, which then is not sparse (DNNLOWP falls back to acc32 above an outlier-density threshold, "
        "`caffe2_dnnlowp_acc16_density_threshold`); activations with a large zero point are the worst case, "
        "because the u8 values themselves are large.",
        "",
        "Regenerate: `lowp study seed002` (about 15 s; `--no-real` to skip running the kernels).",
        "",
    ]
    return "\n".join(lines)
