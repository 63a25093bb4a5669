"""The one-bug output-stage kernels of tests/test_stage_families.py as TOML entries: each C file here compiled once
per LOWP_BUG value (0 is the correct kernel), with the ABI facts of its family of kernels."""
from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
INCLUDE = HERE.parents[1] / "kernels" / "include"

# name: (source, symbol, signature, xnnpack (datatype, params) or None, tile (mr, nr, kr), c_type, output contract,
#        model output stage, features, cflags, overread of A)
KERNELS = {
    "scalar_fp32": ("qs8_qc8w_gemm_2x4_fp32_scalar_lrintf.c", "lowp_qs8_qc8w_gemm_minmax_fp32_ukernel_2x4__scalar_lrintf",
                    "xnnpack-gemm", ("qs8-qc8w", "fp32_scalar"), (2, 4, 1), "s8", "xnnpack-fp32",
                    "xnnpack-fp32-lrintf", [], ["-O2"], 0),
    "avx2_fp32": ("qs8_qc8w_gemm_4x8c8_fp32_avx2.c", "lowp_sb_qs8_qc8w_gemm_minmax_fp32_ukernel_4x8c8__avx2",
                  "xnnpack-gemm", ("qs8-qc8w", "fp32_scalar"), (4, 8, 8), "s8", "xnnpack-fp32", "xnnpack-fp32-x86",
                  ["avx2"], ["-O2", "-mavx2"], 8),
    "rndnu": ("qs8_gemm_2x4_rndnu_neon_scalar.c", "lowp_qs8_gemm_minmax_rndnu_ukernel_2x4__scalar_neon",
              "xnnpack-gemm", ("qs8", "rndnu_neon"), (2, 4, 1), "s8", "xnnpack-rndnu", "xnnpack-rndnu-neon",
              [], ["-O2"], 0),
    "tflite": ("tflite_gemm_scalar.c", "sb_tflite_gemm", "quant-gemm", None, (1, 1, 1), "s8",
               "tflite-single-rounding", "tflite-S", [], ["-O2"], 0),
    "rndnu16": ("qu8_gemm_2x4_rndnu16_scalar.c", "lowp_sb_qu8_gemm_minmax_rndnu16_ukernel_2x4__scalar",
                "xnnpack-gemm", ("qu8", "rndnu16_scalar"), (2, 4, 1), "u8", "xnnpack-rndnu16", "xnnpack-rndnu16",
                [], ["-O2"], 0),
    "qd8": ("qd8_f32_qc8w_gemm_2x4_scalar.c", "lowp_qd8_f32_qc8w_gemm_minmax_ukernel_2x4__scalar", "xnnpack-gemm",
            ("qd8-f32-qc8w", "minmax_f32"), (2, 4, 1), "f32", "qd8-f32", "qd8-f32-unfused", [], ["-O2"], 0),
}

# The input types and their domain where a kernel's are not s8 x s8 (XNNPACK's qu8 kinds).
INPUTS = {"rndnu16": ("u8", "u8", "[0, 255]")}


def entry(kernel: str, bug: int, pins: str = "") -> str:
    """The TOML entry of `kernel` built with LOWP_BUG=bug (named sb_<kernel>_<bug>), `pins` its quant table."""
    source, symbol, signature, xnn, (mr, nr, kr), c_type, output, model, features, cflags, overread = KERNELS[kernel]
    a_type, b_type, span = INPUTS.get(kernel, ("s8", "s8", "[-128, 127]"))
    lines = [
        "[[kernel]]", f'name = "sb_{kernel}_{bug}{"_pinned" if pins else ""}"', 'target = "x86-64"',
        f'source = "{HERE / source}"', f'symbol = "{symbol}"', f'signature = "{signature}"',
        f'a_type = "{a_type}"', f'b_type = "{b_type}"', f'c_type = "{c_type}"', f"features = {features!r}".replace("'", '"'),
        f"cflags = {cflags + ['-I' + str(INCLUDE)]!r}".replace("'", '"'), f'defines = ["LOWP_BUG={bug}"]',
        'packing = "XNNPACK goi" ' if xnn else 'packing = "none: A and B row-major"',
        f"tile = {{mr = {mr}, nr = {nr}, kr = {kr}}}", 'contract = "exact"',
        f"domain = {{a = {span}, b = {span}}}", f'output = "{output}"',
        f'model = {{accumulate = "lowp.kernels.models:exact_gemm", output = "{model}"}}',
    ]
    if xnn:
        lines.append(f'xnnpack = {{datatype = "{xnn[0]}", params = "{xnn[1]}", sr = 1}}')
    if overread:
        lines.append(f"overread = {{A = {overread}}}")
    if pins:
        lines.append(f"quant = {pins}")
    return "\n".join(lines) + "\n"


def register(text: str, folder: Path) -> dict:
    """The kernels of TOML `text` (entry()'s tables), registered afresh (a re-run in one process replaces them)."""
    import tomllib

    from lowp.kernels import load_toml
    from lowp.kernels.registry import _KERNELS
    toml = folder / "stage_bugs.toml"
    toml.write_text(text)
    for kernel in tomllib.loads(text)["kernel"]:
        _KERNELS.pop(kernel["name"], None)
    return {k.name: k for k in load_toml(toml)}


def claimed_row(kernels: dict, name: str) -> dict:
    """The row of kernel `name`'s claimed check (40 examples, no grid); a skip naming why where it cannot run here."""
    import pytest

    from lowp.conformance.run.checks import Check, run_check
    from lowp.kernels import executor
    k = kernels[name]
    reason = executor(k).unavailable()
    if reason:
        pytest.skip(f"{name}: {reason}")
    return run_check(Check(name, k.output, "claimed", True), lambda e: None, examples=40, grid=False)
