"""Seed 004: 4.6-bit quantization (Smart Engines). The (Nx, Nw) pairs with their bits per value, product bound
and int16-safe depth (`kernels.models_q46.pair_table`); the quantization error of 4-bit against 4.6-bit on
normally distributed values (the article: 23 levels instead of 16, "1.47x less quantization error"); and
`lowp bench gemm --quick` (`lowp.conformance.bench.gemm.gemm_benchmark`) against the article's Table 1.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from lowp.conformance.studies import fig_link, md_table, pyplot, save

ARTICLE_RATIO = 1.468      # the article: "23/16 = 1.468" (23/16 is 1.4375; 22/15, the ratio of the steps, is 1.467)


def levels(n: int, scale: float) -> np.ndarray:
    """The n quantization levels of a uniform quantizer with step `scale` and zero exactly representable:
    symmetric -(n//2)..(n//2) for odd n (4.6-bit), q - n//2 for q in 0..n-1 for even n (4-bit: -8..7)."""
    return (np.arange(n) - n // 2) * scale


def quantize(x: np.ndarray, n: int, scale: float) -> np.ndarray:
    lo, hi = -(n // 2), n - 1 - n // 2
    return np.clip(np.rint(x / scale), lo, hi) * scale


def rmse(x, n, scale) -> float:
    return float(np.sqrt(np.mean((quantize(x, n, scale) - x) ** 2)))


def best_scale(x: np.ndarray, n: int) -> float:
    """The step that minimises the RMS quantization error of x (grid search, then a finer one around the best)."""
    top = np.abs(x).max()
    grid = np.linspace(top / (n // 2) / 8, top / (n // 2) * 1.05, 80)
    errs = [rmse(x, n, s) for s in grid]
    i = int(np.argmin(errs))
    fine = np.linspace(grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)], 40)
    return float(fine[int(np.argmin([rmse(x, n, s) for s in fine]))])


def rmse_span(x, n) -> float:
    """n levels spread evenly over [-max|x|, max|x|] (no zero level needed): step 2 max / (n - 1)."""
    c = np.abs(x).max()
    step = 2 * c / (n - 1)
    return float(np.sqrt(np.mean((-c + np.clip(np.rint((x + c) / step), 0, n - 1) * step - x) ** 2)))


def max_scale(x: np.ndarray, n: int) -> float:
    """Min/max calibration: the step that puts max |x| on the outermost level of the shorter side."""
    return float(np.abs(x).max() / ((n - 1) // 2 if n % 2 else n // 2 - 1))


def level_errors(x: np.ndarray, counts) -> list[dict]:
    out = []
    for n in counts:
        sb, sm = best_scale(x, n), max_scale(x, n)
        out.append({"levels": n, "rmse_best": rmse(x, n, sb), "scale_best": sb, "clip_best": sb * (n // 2),
                    "rmse_max": rmse(x, n, sm), "scale_max": sm, "rmse_span": rmse_span(x, n)})
    return out


def pair_gemm_errors(rng, pairs, depth: int, size: int) -> list[dict]:
    """Relative RMS error of a (size x depth) x (depth x size) GEMM of N(0,1) values when activations get Nx
    levels and weights Nw (each with its RMS-optimal step), against the float product."""
    X, W = rng.normal(0, 1, (size, depth)), rng.normal(0, 1, (depth, size))
    C = X @ W
    out = []
    for nx, nw in pairs:
        Xq, Wq = quantize(X, nx, best_scale(X.ravel(), nx)), quantize(W, nw, best_scale(W.ravel(), nw))
        err = Xq @ Wq - C
        out.append({"nx": nx, "nw": nw, "bits": (np.log2(nx) + np.log2(nw)) / 2,
                    "rel": float(np.sqrt(np.mean(err ** 2)) / np.sqrt(np.mean(C ** 2)))})
    return out


def bench(names=None, torch: bool = True) -> dict:
    """`lowp bench gemm --quick`, summarised per group beside the article's Table 1 (x86)."""
    from lowp.conformance.bench.gemm import ARTICLE_NS, gemm_benchmark, summarize
    result = gemm_benchmark(quick=True, names=names, torch=torch)
    rows, ratios = summarize(result)
    groups = {}
    for r in rows:
        ns = r["ns/MAC (grid mean)"]
        if ns is None:
            continue
        g = groups.setdefault(r["group"], {"best": None, "best_ns": None, "all": {}})
        g["all"][r["contender"]] = ns
        if g["best_ns"] is None or ns < g["best_ns"]:
            g["best"], g["best_ns"] = r["contender"], ns
        if r["group"] == "8-bit" and "vnni" not in r["contender"]:     # the article's 8-bit kernel had no VNNI
            g = groups.setdefault("8-bit, no VNNI", {"best": None, "best_ns": None, "all": {}})
            g["all"][r["contender"]] = ns
            if g["best_ns"] is None or ns < g["best_ns"]:
                g["best"], g["best_ns"] = r["contender"], ns
    return {"rows": rows, "ratios": [list(x) for x in ratios], "groups": groups, "article_ns": ARTICLE_NS,
            "grid": [list(s) for s in result["grid"]], "notes": result["notes"], "machine": machine()}


def machine() -> str:
    from lowp.emulator.targets import host
    return host().summary(("avx", "ssse"))


def compute(small: bool = False, seed: int = 0, run_bench: bool = True, torch: bool = True) -> dict:
    from lowp.kernels.models.q46 import pair_table
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, 20_000 if small else 200_000)
    counts = (3, 5, 7, 9, 15, 16, 23, 31, 63, 127, 255) if small else \
        (3, 5, 7, 9, 11, 13, 15, 16, 17, 19, 21, 23, 25, 29, 31, 37, 43, 51, 63, 85, 127, 255)
    errs = level_errors(x, counts)
    by = {e["levels"]: e for e in errs}
    table = pair_table()
    pairs = [(r["nx"], r["nw"]) for r in table if r["nx"] <= 255 and r["nw"] <= 255 and r["source"] != "baseline (code)"]
    pairs.append((16, 16))
    gemm = pair_gemm_errors(rng, pairs, 256 if not small else 64, 64 if not small else 16)
    out = {"study": "seed004", "small": small, "seed": seed, "samples": int(x.size), "pair_table": table,
           "level_errors": errs,
           "ratio_16_23_best": by[16]["rmse_best"] / by[23]["rmse_best"],
           "ratio_16_23_max": by[16]["rmse_max"] / by[23]["rmse_max"],
           "ratio_16_23_span": by[16]["rmse_span"] / by[23]["rmse_span"],
           "article_ratio": ARTICLE_RATIO, "pair_gemm": gemm}
    out["bench"] = bench(torch=torch) if run_bench else None
    return out


# ---------------------------------------------------------------------------------------------------------------

def plot(n: dict, out_dir: Path) -> list[Path]:
    plt = pyplot()
    by = {e["levels"]: e for e in n["level_errors"]}
    figs = []
    fig, axes = plt.subplots(2, 1, figsize=(9, 4.2), sharex=True)
    t = np.linspace(-4, 4, 400)
    for ax, nl, color in zip(axes, (16, 23), ("tab:red", "tab:blue")):
        ax.plot(t, np.exp(-t * t / 2) / np.sqrt(2 * np.pi), color="gray")
        lv = levels(nl, by[nl]["scale_best"])
        ax.vlines(lv, 0, 0.42, color=color, lw=1.2)
        ax.set_ylim(0, 0.45)
        ax.set_yticks([])
        ax.set_title(f"{nl} levels ({'4-bit, q - 8 for q in 0..15' if nl == 16 else '4.6-bit (23, 23): -11..11'}): "
                     f"RMS error {by[nl]['rmse_best']:.4f} of N(0, 1)", fontsize=9)
    axes[1].set_xlabel("value (standard deviations); steps chosen to minimise the RMS error")
    figs.append(save(fig, out_dir / "seed004-levels.png"))

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ls = np.array([e["levels"] for e in n["level_errors"]])
    axes[0].loglog(ls, [e["rmse_max"] for e in n["level_errors"]], "o-", color="tab:gray", label="min/max calibration")
    axes[0].loglog(ls, [e["rmse_best"] for e in n["level_errors"]], "o-", color="black", label="RMS-optimal step")
    for nl, color in ((16, "tab:red"), (23, "tab:blue")):
        axes[0].plot([nl, nl], [by[nl]["rmse_best"], by[nl]["rmse_max"]], "s", color=color, label=f"{nl} levels")
    axes[0].set_xlabel("number of levels")
    axes[0].set_ylabel("RMS quantization error of N(0, 1)")
    axes[0].set_title(f"16 -> 23 levels: error / {n['ratio_16_23_max']:.2f} (min/max), "
                      f"/ {n['ratio_16_23_best']:.2f} (optimal)", fontsize=9)
    axes[0].legend(fontsize=8)
    g = n["pair_gemm"]
    base = next(p for p in g if (p["nx"], p["nw"]) == (16, 16))
    pts = [p for p in g if p is not base]
    axes[1].scatter([p["bits"] for p in pts], [p["rel"] for p in pts], color="tab:blue", zorder=3)
    for p in pts:
        if p["nx"] <= p["nw"]:          # one label per mirrored pair: (Nx, Nw) and (Nw, Nx) sit on top of each other
            axes[1].annotate(f"({p['nx']}, {p['nw']}) and mirror", (p["bits"], p["rel"]), fontsize=7, xytext=(5, -3),
                             textcoords="offset points")
    axes[1].axhline(base["rel"], color="tab:red", label=f"4-bit (16, 16): {base['rel']:.4f}")
    axes[1].set_yscale("log")
    axes[1].set_xlabel("bits per value, (log2 Nx + log2 Nw) / 2")
    axes[1].set_ylabel("relative RMS error of the GEMM")
    axes[1].set_title("GEMM of N(0, 1) values, per (Nx, Nw) pair", fontsize=9)
    axes[1].legend(fontsize=8)
    figs.append(save(fig, out_dir / "seed004-error.png"))

    b = n.get("bench")
    if b:
        groups = [gname for gname in ("float", "8-bit, no VNNI", "8-bit", "4.6-bit") if gname in b["groups"]]
        art = [b["article_ns"][gname.split(",")[0]] / b["article_ns"]["float"] for gname in groups]
        mine = [b["groups"][gname]["best_ns"] / b["groups"]["float"]["best_ns"] for gname in groups] \
            if "float" in b["groups"] else None
        fig, ax = plt.subplots(figsize=(9, 3.6))
        xs = np.arange(len(groups))
        ax.bar(xs - 0.2, art, 0.4, label="article, Table 1 (Ryzen 9 5950X)", color="tab:gray")
        if mine:
            ax.bar(xs + 0.2, mine, 0.4, label="lowp bench gemm --quick (this machine)", color="tab:blue")
            for xx, v, gname in zip(xs, mine, groups):
                ax.text(xx + 0.2, v + 0.02, b["groups"][gname]["best"], ha="center", fontsize=7, rotation=0)
        ax.set_xticks(xs, groups)
        ax.set_ylabel("time per MAC, relative to float32")
        ax.set_title("Seed 004's Table 1 (x86) against lowp's kernels; lower is faster", fontsize=9)
        ax.legend(fontsize=8)
        figs.append(save(fig, out_dir / "seed004-bench.png"))
    return figs


def page(n: dict, figures: list[Path]) -> str:
    by = {e["levels"]: e for e in n["level_errors"]}
    lines = [
        "# Seed 004: 4.6-bit quantization",
        "",
        "*Generated by `lowp study seed004`" + (" (small configuration)" if n["small"] else "") +
        "; do not edit: every number below comes from that command ([data](seed004.json)); the speed table is "
        "this machine's and changes from run to run.*",
        "",
        "The scheme: activations in [-xmax, xmax] (Nx = 2 xmax + 1 levels) and weights in [-wmax, wmax] "
        "(Nw = 2 wmax + 1), with xmax wmax <= 127 so that every product fits int8. The kernels are described in "
        "[q46-kernels.md](../q46-kernels.md).",
        "",
        "## The (Nx, Nw) pairs",
        "",
        "From `lowp.kernels.models.q46.pair_table()`: \"int16 depth\" is floor(32767 / max|x w|), the article's "
        "notion (258 for 127); the x86 kernels shift activations to unsigned (x + xmax), which doubles the product "
        "bound (\"lane products\"), and flush every \"flush\" values of k.",
        "",
    ]
    rows = [[r["nx"], r["nw"], r["source"], r["bits"], r["max_product"], r["int16_depth"],
             r["shifted_product"] if r["shifted_product"] is not None else "-",
             r["shifted_depth"] if r["shifted_depth"] is not None else "-",
             r["flush_256"] if r["flush_256"] is not None else "-",
             r["flush_512"] if r["flush_512"] is not None else "-"] for r in n["pair_table"]]
    lines += [md_table(rows, ["Nx", "Nw", "source", "bits", "max abs(x w)", "int16 depth", "max abs(u w)",
                              "lane products", "flush 256", "flush 512"]), ""]
    art = [r for r in n["pair_table"] if r["source"] != "baseline (code)"]
    bits = [r["bits"] for r in art]
    depth = [r["int16_depth"] for r in art]
    lines += [f"The {len(art)} pairs carry {min(bits):.3f} to {max(bits):.3f} bits per value (the article's "
              "\"about 4.6\"); every one has an int16-safe depth of at least "
              f"{min(depth)} (the article's 258 is the worst pair, max|xw| = 127), against "
              f"{next(r['int16_depth'] for r in n['pair_table'] if (r['nx'], r['nw']) == (16, 16))} for unsigned "
              "4-bit (the article's 145).", ""]
    lines += ["## 4-bit against 4.6-bit quantization error", "",
              fig_link(figures, "levels", "levels on a Gaussian"), ""]
    rb, rm, rs = n["ratio_16_23_best"], n["ratio_16_23_max"], n["ratio_16_23_span"]
    lines += [
        f"On {n['samples']} samples of N(0, 1), 16 levels (4-bit) against 23 levels (the (23, 23) pair), with the "
        "step chosen three ways:",
        "",
        md_table([["levels spread over [-max, max] (no zero level)", f"{by[16]['rmse_span']:.4f}",
                   f"{by[23]['rmse_span']:.4f}", f"{rs:.3f}"],
                  ["min/max, zero representable (4-bit: q - 8, max on level 7)", f"{by[16]['rmse_max']:.4f}",
                   f"{by[23]['rmse_max']:.4f}", f"{rm:.3f}"],
                  ["RMS-optimal step, zero representable", f"{by[16]['rmse_best']:.4f}", f"{by[23]['rmse_best']:.4f}",
                   f"{rb:.3f}"]],
                 ["step chosen by", "RMS error, 16 levels", "RMS error, 23 levels", "ratio"]),
        "",
        f"The article writes \"23/16 = {n['article_ratio']}\" (23/16 is {23 / 16:.4f}). Its {n['article_ratio']} is "
        f"what spreading the levels over the range gives ({rs:.3f} here: the error follows the step, and 22 steps "
        "against 15 is 1.467). A 4-bit scheme with a zero point wastes a level on symmetric data, so against it "
        f"4.6-bit gains more, {rm:.3f}x. With the step chosen to minimise the error, as trained or L2-calibrated "
        f"networks effectively do, the gain is {rb:.3f}x: more levels also widen the best clipping range, and the "
        "clipping error does not shrink in proportion.",
        "",
        fig_link(figures, "error", "error against levels"),
        "",
    ]
    g = n["pair_gemm"]
    base = next(p for p in g if (p["nx"], p["nw"]) == (16, 16))
    pts = sorted((p for p in g if p is not base), key=lambda p: p["rel"])
    lines += [f"For a whole GEMM of N(0, 1) values (each side with its RMS-optimal step) the best pair is "
              f"({pts[0]['nx']}, {pts[0]['nw']}) with relative error {pts[0]['rel']:.4f}, the worst "
              f"({pts[-1]['nx']}, {pts[-1]['nw']}) with {pts[-1]['rel']:.4f}, against {base['rel']:.4f} for 4-bit "
              f"(16, 16): {sum(p['rel'] < base['rel'] for p in pts)} of {len(pts)} pairs beat 4-bit. Balanced pairs win "
              "on Gaussian data; the lopsided ones pay for their 3- or 5-level side.", ""]
    lines += [md_table([[f"({p['nx']}, {p['nw']})", f"{p['bits']:.3f}", f"{p['rel']:.4f}",
                         f"{base['rel'] / p['rel']:.3f}"] for p in pts],
                       ["pair", "bits", "relative GEMM error", "4-bit error / this"]), ""]
    b = n.get("bench")
    lines += ["## Speed: `lowp bench gemm --quick` against Table 1", ""]
    if not b:
        lines += ["*(not run: `--no-bench`)*", ""]
        return "\n".join(lines)
    lines += [f"Machine: {b['machine']}. Grid: the {len(b['grid'])} corner shapes of the article's grid (H in "
              "{72, 360}, W in {24, 96}, D in {128, 512}), single-threaded, ns per multiply-accumulate averaged "
              "over the grid as the article does. The article measured an AMD Ryzen 9 5950X (AVX2, no VNNI).", "",
              fig_link(figures, "bench", "speed against Table 1"), ""]
    rows = []
    for gname in ("float", "8-bit, no VNNI", "8-bit", "4.6-bit", "fbgemm"):
        if gname not in b["groups"]:
            continue
        gr = b["groups"][gname]
        art = b["article_ns"].get(gname.split(",")[0])
        rows.append([gname, f"{art:.5f}" if art else "-", gr["best"], f"{gr['best_ns']:.5f}",
                     f"{art / b['article_ns']['float']:.3f}" if art else "-",
                     f"{gr['best_ns'] / b['groups']['float']['best_ns']:.3f}" if "float" in b["groups"] else "-"])
    lines += [md_table(rows, ["group", "article ns/MAC", "lowp's fastest here", "lowp ns/MAC",
                              "article, relative to float", "lowp, relative to float"]), ""]
    lines += [md_table(b["ratios"], ["ratio (side by side, this run)", "value", "compare"]), ""]
    lines += ["Every contender (ns/MAC over the grid):", "",
              md_table([[r["contender"], r["group"], f"{r['ns/MAC (grid mean)']:.5f}" if r["ns/MAC (grid mean)"]
                         else "", r["note"]] for r in b["rows"]], ["contender", "group", "ns/MAC", "note"]), "",
              "Regenerate: `lowp study seed004` (about 15 s; `--no-bench` leaves the speed section out).", ""]
    return "\n".join(lines)
