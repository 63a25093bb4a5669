"""Seed 000: gemmlowp's requantization to fewer than 8 bits (L7R5), nearest against probabilistic rounding.

The seed claims: round-to-nearest requantization of already-quantized, non-uniformly distributed 8-bit values is
biased, so the GEMM error grows linearly with depth; probabilistic rounding is unbiased, its error grows with the
square root of the depth and its variance is 2x that of nearest; so probabilistic wins past some depth (gemmlowp
switched at 384). This study measures it with lowp's bit-exact model of the requantizing GEMM
(`lowp.conformance.contracts.less_than_8bit`: Requantize, the Xorshift and add-mod generators in the scalar packing order,
the exact kernel, the unpack-stage RoundingMultiplyByConstantFraction), against the exact 8-bit accumulator
(`output_stages.gemmlowp_accumulator`), and then the uint8 results against gemmlowp's own test bounds.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from lowp.conformance.contracts import less_than_8bit as l8
from lowp.conformance.contracts.gemmlowp import evaluate_pipeline, gemmlowp_accumulator, make_standard_output_pipeline
from lowp.conformance.studies import fig_link, md_table, pyplot, save

MODES = ("nearest", "xorshift", "addmod")
# The L7R5 kernel of the time (NEON 12x4, depth 2): LHS cells 4 wide x 2 deep, 3 of them; RHS one 4 x 2 cell.
# Block sizes as in lowp's test of the same model (L1: 48 wide, 256 deep). Notes 4.5-4.6.
FORMAT = dict(cell_depth=2, l1_width=48, l1_depth=256)
LHS_FORMAT = dict(cell_width=4, cells=3, **FORMAT)
RHS_FORMAT = dict(cell_width=4, cells=1, **FORMAT)
KINDS = {
    "uniform": "uniform uint8 on both sides (gemmlowp's random test matrices), offsets -75 / -91 (its generic set)",
    "skewed": "LHS weights round(84 + N(0, 20)), offset -84; RHS ReLU activations round(30 max(N(0,1), 0)), "
              "offset 0 (half of them 0): a synthetic stand-in for test_data.cc, whose offsets these are",
}


def draw(kind: str, rows: int, depth: int, cols: int, rng) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(lhs rows x depth, rhs depth x cols, lhs_offset, rhs_offset), uint8 values as int64."""
    if kind == "uniform":
        return rng.integers(0, 256, (rows, depth)), rng.integers(0, 256, (depth, cols)), -75, -91
    if kind == "skewed":
        w = np.clip(np.rint(84 + rng.normal(0, 20, (rows, depth))), 0, 255).astype(np.int64)
        x = np.clip(np.rint(30 * np.maximum(rng.normal(0, 1, (depth, cols)), 0)), 0, 255).astype(np.int64)
        return w, x, -84, 0
    raise ValueError(f"kind={kind!r}: expected one of {', '.join(KINDS)}")


def rounding_offsets(mode: str, rows: int, depth: int, cols: int):
    """Per-element rounding offsets of both sides, in gemmlowp's scalar packing order (one L2 block per side)."""
    lo = l8.pack_side_offsets(rows, depth, mode, **LHS_FORMAT)
    ro = l8.pack_side_offsets(cols, depth, mode, **RHS_FORMAT).T
    return lo, ro


def l7r5(a, b, lo_, ro_, mode: str):
    lo, ro = rounding_offsets(mode, a.shape[0], a.shape[1], b.shape[1])
    return l8.less_than_8bit_accumulator(a, b, lo_, ro_, 7, 5, lo, ro).astype(np.int64)


def _slope(x, y) -> float:
    """Least-squares slope of log y against log x."""
    lx, ly = np.log(np.asarray(x, float)), np.log(np.maximum(np.asarray(y, float), 1e-300))
    return float(np.polyfit(lx, ly, 1)[0])


def depth_sweep(kind: str, depths, size: int, trials: int, seed: int) -> dict:
    """Bias (mean signed error) and RMS error of the L7R5 accumulator against the exact one, per mode and depth."""
    out = {m: {"bias": [], "rms": [], "sd": []} for m in MODES}
    for depth in depths:
        rng = np.random.default_rng([seed, depth, len(kind)])
        errs = {m: [] for m in MODES}
        for _ in range(trials):
            a, b, lo_, ro_ = draw(kind, size, depth, size, rng)
            exact = gemmlowp_accumulator(a, b, lo_, ro_).astype(np.int64)
            for m in MODES:
                errs[m].append((l7r5(a, b, lo_, ro_, m) - exact).ravel())
        for m in MODES:
            e = np.concatenate(errs[m]).astype(float)
            out[m]["bias"].append(float(e.mean()))
            out[m]["rms"].append(float(np.sqrt((e ** 2).mean())))
            out[m]["sd"].append(float(e.std()))
    return out


def crossing(depths, sweep: dict, prob: str = "addmod") -> dict:
    """Where nearest's error overtakes `prob`'s: the measured crossing (log-interpolated between grid depths)
    and the one the seed's model predicts, MSE_nearest = mu^2 k^2 + s_n^2 k against MSE_prob = s_p^2 k."""
    k = np.asarray(depths, float)
    bn, rn = np.asarray(sweep["nearest"]["bias"]), np.asarray(sweep["nearest"]["rms"])
    rp = np.asarray(sweep[prob]["rms"])
    mu = float((bn * k).sum() / (k * k).sum())                  # bias per unit depth, fit through the origin
    s_n2 = float(np.mean((rn ** 2 - bn ** 2) / k))              # nearest's variance per unit depth
    s_p2 = float(np.mean(rp ** 2 / k))                          # probabilistic MSE per unit depth
    predicted = (s_p2 - s_n2) / mu ** 2 if mu and s_p2 > s_n2 else math.inf
    measured = None
    d = np.log(rn / rp)
    for i in range(len(k) - 1):
        if d[i] < 0 <= d[i + 1]:
            t = -d[i] / (d[i + 1] - d[i])
            measured = float(np.exp(np.log(k[i]) + t * (np.log(k[i + 1]) - np.log(k[i]))))
            break
    return {"prob": prob, "mu": mu, "var_nearest_per_k": s_n2, "mse_prob_per_k": s_p2,
            "variance_ratio": s_p2 / s_n2 if s_n2 > 0 else math.inf, "predicted": predicted, "measured": measured}


def choose_shift(acc, result_offset: int, mult: int) -> int:
    """gemmlowp's test harness bisection of result_shift over [0, 31]: until the median output lies in [32, 224]
    (test/test.cc test_gemm_impl, docs/research/gemmlowp-output-stages.md#the-legacy-eightbitintgemm)."""
    lo, hi = 0, 31
    while True:
        mid = (lo + hi) // 2
        med = np.median(evaluate_pipeline(acc, make_standard_output_pipeline(result_offset, mult, mid),
                                          overflow="wrap"))
        if med < 32 and hi != mid:
            hi = mid
        elif med > 224 and lo != mid:
            lo = mid
        else:
            return mid


OUTPUT = {"uniform": (74980, 123), "skewed": (74980, 3401)}   # (result_offset, result_mult_int): test.cc, test_data.cc


def output_accuracy(kind: str, rows: int, depth: int, cols: int, seed: int, bounds: str = "random") -> list[dict]:
    """uint8 results of the L7R5 GEMM in each mode against the exact 8-bit reference, with gemmlowp's test bounds
    ('random': the L7R5 bounds of test_gemm_impl; 'real': TestWithRealData's)."""
    rng = np.random.default_rng([seed, depth, rows, 7])
    a, b, lo_, ro_ = draw(kind, rows, depth, cols, rng)
    exact = gemmlowp_accumulator(a, b, lo_, ro_)
    offset, mult = OUTPUT[kind]
    shift = choose_shift(exact, offset, mult)
    pipe = make_standard_output_pipeline(offset, mult, shift)
    expected = evaluate_pipeline(exact, pipe, overflow="wrap")
    rows_out = []
    for m in MODES:
        actual = evaluate_pipeline(l8.less_than_8bit_accumulator(a, b, lo_, ro_, 7, 5, *rounding_offsets(
            m, rows, depth, cols)), pipe, overflow="wrap")
        if bounds == "real":
            stats = l8.result_stats(actual, expected)
            bnd = l8.real_data_bounds()
            ok = l8.check_result_stats_bounds(stats, bnd)
        else:
            ok, stats, bnd = l8.check_less_than_8bit_accuracy(actual, expected)
        rows_out.append({"kind": kind, "shape": [rows, depth, cols], "mode": m, "shift": shift,
                         "gemmlowp_mode": l8.choose_rounding_mode(depth, 7),
                         "med_val": stats.med_val, "max_abs": stats.max_unsigned_diff,
                         "med_abs": stats.med_unsigned_diff, "med_signed": stats.med_signed_diff,
                         "mean_signed": stats.mean_signed_diff, "bound_max": bnd.max_unsigned_diff,
                         "bound_med": bnd.med_unsigned_diff, "bound_med_signed": bnd.med_signed_diff,
                         "bound_mean_signed": bnd.mean_signed_diff, "passes": bool(ok),
                         "violates": violated(stats, bnd)})
    return rows_out


def violated(stats, bnd) -> list[str]:
    """Which of gemmlowp's four bounds a result breaks (CheckResultStatsBounds, test/test.cc L327-333)."""
    out = []
    if stats.max_unsigned_diff > bnd.max_unsigned_diff:
        out.append("max abs")
    if stats.med_unsigned_diff > bnd.med_unsigned_diff:
        out.append("median abs")
    if abs(stats.med_signed_diff) > bnd.med_signed_diff:
        out.append("median signed")
    if abs(stats.mean_signed_diff) > bnd.mean_signed_diff:
        out.append("mean signed")
    return out


def per_value_error(bits: int = 5) -> dict:
    """Requantization error of each uint8 value under Nearest, in 8-bit units: q * 255/(2^bits-1) - v."""
    v = np.arange(256)
    q = l8.requantize(v, bits, 127).astype(float)
    return {"values": v.tolist(), "error": (q * 255 / ((1 << bits) - 1) - v).tolist()}


def compute(small: bool = False, seed: int = 0) -> dict:
    depths = (16, 64, 256, 1024) if small else (16, 32, 64, 128, 256, 384, 512, 768, 1024, 2048, 4096)
    size, trials = (24, 1) if small else (48, 2)
    sweeps = {kind: depth_sweep(kind, depths, size, trials, seed) for kind in KINDS}
    fits = {}
    for kind, sw in sweeps.items():
        big = [i for i, d in enumerate(depths) if d >= 64]
        fits[kind] = {
            "nearest_bias_exponent": _slope([depths[i] for i in big], [abs(sw["nearest"]["bias"][i]) for i in big]),
            "nearest_rms_exponent": _slope([depths[i] for i in big], [sw["nearest"]["rms"][i] for i in big]),
            **{f"{m}_rms_exponent": _slope([depths[i] for i in big], [sw[m]["rms"][i] for i in big])
               for m in ("xorshift", "addmod")},
            **{f"{m}_bias_over_rms": float(np.max(np.abs(sw[m]["bias"]) / np.asarray(sw[m]["rms"])))
               for m in ("xorshift", "addmod")},
            "crossing": crossing(depths, sw, "addmod"),
            "crossing_xorshift": crossing(depths, sw, "xorshift"),
        }
    out_depths = (64, 384, 1152) if not small else (64, 384)
    osize = 48 if not small else 24
    outputs = [r for kind in KINDS for d in out_depths for r in output_accuracy(kind, osize, d, osize, seed)]
    real_shape = (48, 1152, 64) if small else (192, 1152, 256)
    real = output_accuracy("skewed", *real_shape, seed, bounds="real")
    return {"study": "seed000", "small": small, "seed": seed, "depths": list(depths), "size": size,
            "trials": trials, "kinds": KINDS, "sweeps": sweeps, "fits": fits, "outputs": outputs,
            "real_data": real, "per_value_error": per_value_error(5),
            "threshold": l8.ROUNDING_MODE_SIZE_THRESHOLD}


# ---------------------------------------------------------------------------------------------------------------

COLORS = {"nearest": "tab:red", "xorshift": "tab:orange", "addmod": "tab:blue"}


def plot(n: dict, out_dir: Path) -> list[Path]:
    plt = pyplot()
    depths = n["depths"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.3), sharey=False)
    for ax, kind in zip(axes, n["kinds"]):
        sw, cr = n["sweeps"][kind], n["fits"][kind]["crossing"]
        for m in MODES:
            ax.loglog(depths, sw[m]["rms"], "o-", color=COLORS[m], label=f"{m}: RMS error")
        ax.loglog(depths, np.abs(sw["nearest"]["bias"]), "s--", color=COLORS["nearest"], alpha=0.6,
                  label="nearest: |mean error| (bias)")
        k = np.asarray(depths, float)
        r0 = sw["addmod"]["rms"][0]
        ax.loglog(k, r0 * np.sqrt(k / k[0]), ":", color="gray", label="slope 1/2")
        b0 = abs(sw["nearest"]["bias"][-1])
        ax.loglog(k, b0 * k / k[-1], "-.", color="gray", label="slope 1")
        ax.axvline(n["threshold"], color="black", lw=1)
        ax.text(n["threshold"] * 1.05, ax.get_ylim()[0] * 1.5, "gemmlowp: 384", fontsize=8)
        if cr["measured"]:
            ax.axvline(cr["measured"], color=COLORS["nearest"], lw=1, ls=":")
            ax.text(cr["measured"] * 1.05, ax.get_ylim()[1] / 3, f"crossing ~{cr['measured']:.0f}", fontsize=8,
                    color=COLORS["nearest"])
        ax.set_title(f"{kind} inputs")
        ax.set_xlabel("GEMM depth k")
        ax.set_ylabel("error of the int32 accumulator")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=6, bbox_to_anchor=(0.5, -0.06))
    fig.suptitle("L7R5 requantized GEMM against the exact 8-bit GEMM (lowp's bit-exact model of gemmlowp)", y=1.02)
    f1 = save(fig, out_dir / "seed000-error-vs-depth.png")

    fig, ax1 = plt.subplots(figsize=(8, 3.6))
    pv = n["per_value_error"]
    v = np.asarray(pv["values"])
    lim = 90
    ax1.bar(v[:lim], np.asarray(pv["error"])[:lim], color=COLORS["nearest"], width=0.8,
            label="nearest: requantized value - original (8-bit units)")
    ax1.set_xlabel("uint8 value (RHS, 5 bits)")
    ax1.set_ylabel("rounding error")
    ax2 = ax1.twinx()
    rng = np.random.default_rng(0)
    x = np.clip(np.rint(30 * np.maximum(rng.normal(0, 1, 200000), 0)), 0, 255).astype(int)
    hist = np.bincount(x, minlength=256)[:lim] / x.size
    ax2.step(v[:lim], hist, where="mid", color="black", lw=1, label="how often the skewed RHS takes the value")
    ax2.set_yscale("log")
    ax2.set_ylabel("frequency")
    ax2.grid(False)
    h1, l1 = ax1.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax1.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper right")
    mean = float((np.bincount(x, minlength=256) / x.size * np.asarray(pv["error"])).sum())
    ax1.set_title(f"Why nearest is biased: the frequent values 1-4 all round down (mean error {mean:.2f})")
    f2 = save(fig, out_dir / "seed000-why-bias.png")
    return [f1, f2]


def _versus_threshold(threshold, values) -> str:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return f"gemmlowp switched at {threshold}; no crossing was measured here."
    lo, hi = min(vals), max(vals)
    if lo <= threshold <= hi:
        return f"gemmlowp's empirical choice, {threshold}, lies in that range."
    far = threshold / hi if threshold > hi else lo / threshold
    return (f"gemmlowp's empirical choice, {threshold} (picked from network accuracy, \"comfortably in the middle of "
            f"a plateau\" between 64 and 1024), is {far:.2f}x {'above' if threshold > hi else 'below'} these.")


def _fmt(x, digits=3):
    if x is None:
        return "none in range"
    if isinstance(x, float) and math.isinf(x):
        return "never"
    return f"{x:.{digits}g}"


def page(n: dict, figures: list[Path]) -> str:
    depths = n["depths"]
    f = n["fits"]
    sk, un = f["skewed"], f["uniform"]
    lines = [
        "# Seed 000: requantizing to fewer than 8 bits (gemmlowp's L7R5)",
        "",
        "*Generated by `lowp study seed000`" + (" (small configuration)" if n["small"] else "") +
        "; do not edit: every number below comes from that command ([data](seed000.json)).*",
        "",
        "gemmlowp's less-than-8-bit mode (2015-2017) requantized uint8 operands to 7 bits (LHS) and 5 bits (RHS) "
        "while packing, `(src * (2^bits - 1) + offset) // 255`, ran an exact kernel on them and rescaled the result "
        "(seed 000; [contracts](../contracts.md#less-than-8-bits)). With `offset = 127` this is round-to-nearest; "
        "with an offset from an 8-bit Xorshift or the add-mod sequence `(x + 97) % 255` it is probabilistic. The seed "
        "says nearest is biased on real (non-uniform) data, so its error grows *linearly* with depth, while the "
        "probabilistic error is unbiased, twice the variance, and grows with the *square root* of depth, so "
        f"probabilistic rounding wins past some depth: gemmlowp switched at {n['threshold']}.",
        "",
        "The study runs lowp's bit-exact model of the requantizing GEMM (requantization, the generators in the "
        "scalar packing order of the NEON 12x4 L7R5 kernel, exact kernel, unpack rescaling) and compares its int32 "
        "accumulator with the exact 8-bit one (`gemmlowp_accumulator`), on "
        f"{n['size']}x{n['size']} results ({n['trials']} draw(s) per depth) at depths {', '.join(map(str, depths))}.",
        "",
    ]
    for kind, desc in n["kinds"].items():
        lines.append(f"- **{kind}**: {desc}.")
    lines += ["", fig_link(figures, "error-vs-depth", "error against depth"), "", "## What the numbers say", ""]
    cr = sk["crossing"]
    lines += [
        f"- **Skewed inputs, nearest**: the bias grows as depth^{sk['nearest_bias_exponent']:.2f} "
        f"(the seed: linearly), {cr['mu']:.3g} per unit of depth; the error is almost all bias at large depth "
        f"(RMS grows as depth^{sk['nearest_rms_exponent']:.2f}).",
        f"- **Skewed inputs, probabilistic**: RMS error grows as depth^{sk['addmod_rms_exponent']:.2f} (add-mod) and "
        f"depth^{sk['xorshift_rms_exponent']:.2f} (Xorshift) (the seed: square root); the mean error stays within "
        f"{max(sk['addmod_bias_over_rms'], sk['xorshift_bias_over_rms']):.2f} x the RMS error at every depth.",
        f"- **Variance**: add-mod's mean squared error per unit depth is {cr['variance_ratio']:.2f}x nearest's "
        "variance per unit depth (the seed: 2x).",
        f"- **Crossing (skewed)**: nearest's RMS error overtakes add-mod's at depth **{_fmt(cr['measured'])}** "
        f"(measured, interpolated between grid depths; against Xorshift: {_fmt(sk['crossing_xorshift']['measured'])}); "
        f"the seed's model `mu^2 k^2 + s_n^2 k = s_p^2 k` with the fitted constants predicts "
        f"{_fmt(cr['predicted'])}. " + _versus_threshold(n["threshold"], [cr["measured"],
                                                                       sk["crossing_xorshift"]["measured"],
                                                                       cr["predicted"]]),
        f"- **Uniform inputs**: nearest's bias is {_fmt(un['crossing']['mu'])} per unit depth, "
        f"{abs(un['crossing']['mu'] / cr['mu']) if cr['mu'] else float('nan'):.2g}x the skewed one, so nearest "
        + (f"stays ahead at every depth measured (up to {depths[-1]})" if un['crossing']['measured'] is None else
           f"overtakes add-mod only at depth {_fmt(un['crossing']['measured'])}")
        + f"; the model predicts the crossing at {_fmt(un['crossing']['predicted'])}. The bias is a property of the "
        "data, as the seed says, not of rounding to nearest as such.",
        f"- **Xorshift vs add-mod on uniform inputs**: at depth {depths[-1]} Xorshift's RMS error is "
        f"{n['sweeps']['uniform']['xorshift']['rms'][-1] / n['sweeps']['uniform']['addmod']['rms'][-1]:.2f}x "
        f"add-mod's (its RMS grows as depth^{un['xorshift_rms_exponent']:.2f} against add-mod's "
        f"depth^{un['addmod_rms_exponent']:.2f}): the low-discrepancy sequence, gemmlowp's final default, is the "
        "better generator here.",
        "",
        fig_link(figures, "why-bias", "per-value rounding error"),
        "",
        "## The error table",
        "",
    ]
    rows = []
    for i, d in enumerate(depths):
        row = [d]
        for kind in n["kinds"]:
            sw = n["sweeps"][kind]
            row += [sw["nearest"]["bias"][i], sw["nearest"]["rms"][i], sw["xorshift"]["rms"][i], sw["addmod"]["rms"][i]]
        rows.append(row)
    heads = ["depth"] + [f"{k}: {c}" for k in n["kinds"] for c in ("nearest bias", "nearest RMS", "xorshift RMS",
                                                                    "addmod RMS")]
    lines += [md_table(rows, heads, ".4g"), "",
              "Errors are in units of the int32 accumulator (products of offset uint8 values).", "",
              "## gemmlowp's own accuracy bounds", "",
              "gemmlowp's tests compared uint8 results with the exact 8-bit reference and were, in their own words, "
              "very lax on the unsigned difference and tighter on the signed one (bias): `max|diff| <= med_val/2`, "
              "`median|diff| <= med_val/8`, `|median signed diff| <= 2`, `|mean signed diff| <= 2` (plus a size "
              "allowance of `1000 // (rows*cols)`). Here each mode's uint8 result under the test harness's output "
              "stage (result_shift bisected until the median output lies in [32, 224]):", ""]
    rows = [[r["kind"], "x".join(map(str, r["shape"])), r["mode"] + (" (gemmlowp's)" if r["mode"] == r["gemmlowp_mode"]
             else ""), r["med_val"], r["max_abs"], r["med_abs"], r["med_signed"], f"{r['mean_signed']:.3f}",
             f"{r['bound_max']} / {r['bound_med']} / {r['bound_med_signed']} / {r['bound_mean_signed']:g}",
             "pass" if r["passes"] else "**FAIL**: " + ", ".join(r["violates"])] for r in n["outputs"]]
    lines += [md_table(rows, ["inputs", "shape", "mode", "med_val", "max abs", "median abs", "median signed",
                              "mean signed", "bounds (max / med / med signed / mean)", "verdict"]), ""]
    rd = n["real_data"]
    lines += ["`TestWithRealData` held the real-data GEMM (192x1152 by 1152x256, captured from a network) to "
              "`median|diff| <= 2`, `max|diff| <= 10`, median signed diff 0 and `|mean signed diff| <= 0.2`. On the "
              f"skewed stand-in of shape {'x'.join(map(str, rd[0]['shape']))}:", ""]
    rows = [[r["mode"] + (" (gemmlowp's)" if r["mode"] == r["gemmlowp_mode"] else ""), r["med_val"], r["max_abs"],
             r["med_abs"], r["med_signed"], f"{r['mean_signed']:.3f}",
             "pass" if r["passes"] else "**FAIL**: " + ", ".join(r["violates"])] for r in rd]
    lines += [md_table(rows, ["mode", "med_val", "max abs", "median abs", "median signed", "mean signed", "verdict"]),
              ""]
    fails = [r for r in n["outputs"] if not r["passes"]]
    lines += ["Random-matrix bounds broken: " + ("; ".join(
        f"{r['mode']} on {r['kind']} inputs at depth {r['shape'][1]} ({', '.join(r['violates'])}"
        f"{', mean signed diff ' + format(r['mean_signed'], '.2f') if 'mean signed' in r['violates'] else ''})"
        for r in fails) if fails else "none") + ". Only the signed (bias) bounds can catch a biased rounding; "
        "the unsigned ones, at half and an eighth of the median output, catch a broken kernel.", ""]
    fails = [r for r in rd if not r["passes"]]
    lines += ["Real-data bounds broken on the stand-in: " + ("; ".join(
        f"{r['mode']} ({', '.join(r['violates'])})" for r in fails) if fails else "none") + "." +
        (" The stand-in is synthetic (test_data.cc is not in lowp): a probabilistic mode that misses only the "
         "unsigned bounds says more about the stand-in's output scale than about gemmlowp; a broken signed bound "
         "(bias) is the robust signal." if any(r["mode"] != "nearest" for r in fails) else ""),
        "", "Regenerate: `lowp study seed000` (about 20 s).", ""]
    return "\n".join(lines)
