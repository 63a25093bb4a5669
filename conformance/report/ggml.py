"""A ggml finding's standalone reproducer: a C file that calls the checkout's own vec_dot on the shrunk blocks and
prints the float it returns against the one lowp's contract expects, ready to attach to an upstream report. It
includes nothing of lowp; the command that builds it (the variant's flags, ggml's include folders, the two
quants.c files and the few definitions ggml-cpu.c would supply) is in its head comment.
"""
from __future__ import annotations

from pathlib import Path

from lowp.conformance.report.outfolder import write_text

TEMPLATE = """/* {title}
 *
 * {kernel}: {cause}
 *
 * Calls the vec_dot of {x_type} through ggml's public CPU API (ggml-cpu.h: ggml_get_type_traits_cpu) on the
 * blocks lowp shrank the failure to, and prints what it returns against lowp's exact or ordered value.
 * Build ggml's CPU backend as the variant {variant} ({flags}), e.g. from the checkout's root:
 *   cmake -B build -DGGML_NATIVE=OFF {cmake} && cmake --build build
 *   cc repro.c -Iinclude -Lbuild/src -lggml-cpu -lggml-base -lm -o repro
 * (llama.cpp: -Iggml/include and -Lbuild/bin; another arch: the cross toolchain, and run under {runner}.)
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ggml.h"
#include "ggml-cpu.h"

static const uint8_t x[{x_bytes}] = {{{x}}};   /* {blocks} block(s) of {x_type} */
static const uint8_t y[{y_bytes}] = {{{y}}};   /* the {y_type} activation blocks */

int main(void) {{
    ggml_cpu_init();
    const struct ggml_type_traits_cpu *traits = ggml_get_type_traits_cpu({ggml_type});
    float s = 0.0f;
    traits->vec_dot({n}, &s, 0, x, 0, y, 0, 1);
    uint32_t bits;
    memcpy(&bits, &s, 4);
    printf("actual   s = %.9g (0x%08x)\\n", s, bits);
    printf("expected s = {expected!r} ({expected_bits})  [lowp: {check}]\\n");
    return bits != {expected_bits}u;
}}
"""

REPACK_TEMPLATE = """/* {title}
 *
 * {kernel}: {cause}
 *
 * Calls the checkout's {symbol} (repack.cpp / arch/<arch>/repack.cpp; libggml-cpu exports it) on the weight and
 * activation rows lowp shrank the failure to, repacked and interleaved as ggml lays them out, with s filled with
 * NaN, and prints every result that is not lowp's exact value, and any float written between rows.
 * Build ggml's CPU backend as the variant {variant} ({flags}), e.g. from the checkout's root:
 *   cmake -B build -DGGML_NATIVE=OFF {cmake} && cmake --build build
 *   cc repro.c -Lbuild/src -lggml-cpu -lggml-base -lm -o repro
 * (llama.cpp: -Lbuild/bin; another arch: the cross toolchain, and run under {runner}.)
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void {symbol}(int n, float *s, size_t bs, const void *vx, const void *vy, int nr, int nc);

static const uint8_t vx[{vx_bytes}] = {{{vx}}};   /* {nc} {x_type} rows of {blocks} block(s), repacked */
static const uint8_t vy[{vy_bytes}] = {{{vy}}};   /* {nr} {y_type} row(s) */
static const float expected[{nr}][{nc}] = {{{expected}}};

int main(void) {{
    enum {{ NR = {nr}, NC = {nc}, BS = {bs}, ROWS = {rows} }};
    float s[ROWS * BS];
    for (int i = 0; i < ROWS * BS; i++) s[i] = NAN;
    {symbol}({n}, s, BS, vx, vy, NR, NC);
    int wrong = 0;
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < BS; c++) {{
            float got = s[r * BS + c];
            if (c >= NC) {{
                if (!isnan(got)) {{ printf("s[%d * bs + %d] = %.9g: written between rows\\n", r, c, got); wrong++; }}
            }} else if (memcmp(&got, &expected[r][c], 4)) {{
                printf("s[%d * bs + %d] = %.9g, expected %.9g\\n", r, c, got, expected[r][c]);
                wrong++;
            }}
        }}
    printf("%d of %d results wrong  [lowp: {check}]\\n", wrong, NR * NC);
    return wrong != 0;
}}
"""

QUANTIZER_TEMPLATE = """/* {title}
 *
 * {kernel}: {cause}
 *
 * Calls the checkout's {symbol} through ggml's public CPU API (ggml_get_type_traits_cpu(GGML_TYPE_{upper})
 * ->from_float) on the row lowp found, with y filled with 0x{poison:02x}, and compares the bytes it writes with those
 * of the rounding variant its path claims ({variant}: lowp.kernels.ggml.quantize).
 * Build ggml's CPU backend as the variant {variant_name} ({flags}), e.g. from the checkout's root:
 *   cmake -B build -DGGML_NATIVE=OFF {cmake} && cmake --build build
 *   cc repro.c -Iinclude -Lbuild/src -lggml-cpu -lggml-base -lm -o repro
 * (llama.cpp: -Iggml/include and -Lbuild/bin; another arch: the cross toolchain, and run under {runner}.)
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ggml.h"
#include "ggml-cpu.h"

static const uint8_t x_bytes[{x_size}] = {{{x}}};   /* {k} float32, little-endian */
static const uint8_t expected[{y_size}] = {{{expected}}};

int main(void) {{
    float x[{k}];
    uint8_t y[{y_size}];
    memcpy(x, x_bytes, sizeof x);
    memset(y, 0x{poison:02x}, sizeof y);
    ggml_cpu_init();
    ggml_get_type_traits_cpu(GGML_TYPE_{upper})->from_float(x, y, {k});
    int wrong = 0;
    for (int i = 0; i < {y_size}; i++)
        if (y[i] != expected[i] && wrong++ < 8) printf("y[%d] = 0x%02x, {variant} writes 0x%02x\\n", i, y[i], expected[i]);
    printf("%d of {y_size} bytes differ  [lowp: variant {variant}]\\n", wrong);
    return wrong != 0;
}}
"""

# What ggml's CMake options are for a variant's features (ggml/CMakeLists.txt option names).
CMAKE_OPTIONS = {"sse4_2": "GGML_SSE42", "avx": "GGML_AVX", "f16c": "GGML_F16C", "fma": "GGML_FMA", "bmi2": "GGML_BMI2",
                 "avx2": "GGML_AVX2", "avx_vnni": "GGML_AVX_VNNI", "avx512f": "GGML_AVX512",
                 "avx512vbmi": "GGML_AVX512_VBMI", "avx512_vnni": "GGML_AVX512_VNNI",
                 "avx512_bf16": "GGML_AVX512_BF16", "amx_tile": "GGML_AMX_TILE", "amx_int8": "GGML_AMX_INT8",
                 "v": "GGML_RVV"}


def _cmake(variant) -> str:
    if variant.arch == "aarch64":
        march = next((f.split("=", 1)[1] for f in variant.flags if f.startswith("-march=")), "armv8-a")
        return f"-DGGML_CPU_ARM_ARCH={march}"
    return " ".join(f"-D{CMAKE_OPTIONS[f]}=ON" for f in variant.features if f in CMAKE_OPTIONS) or "(no options)"


def _bytes_text(hex_text: str) -> str:
    data = bytes.fromhex(hex_text)
    return ",".join(f"0x{b:02x}" for b in data)


def c_source(row: dict, title: str) -> str:
    import numpy as np
    from lowp.kernels.ggml.kernel import get
    cx = row["counterexample"]
    k = get(row["kernel"])
    v = k.build.variant
    expected_bits = f"0x{int(np.float32(cx['expected']).view(np.uint32)):08x}"
    return TEMPLATE.format(title=title, kernel=f"{k.name} ({row['id']})", cause=" ".join(row["cause"].split()),
                           variant=k.label, flags=" ".join(v.flags) or "no flags", cmake=_cmake(v),
                           runner=row.get("emulator") or "the CPU", ggml_type=f"GGML_TYPE_{cx['x_type'].upper()}",
                           x_bytes=len(cx["x"]) // 2, y_bytes=len(cx["y"]) // 2, x=_bytes_text(cx["x"]),
                           y=_bytes_text(cx["y"]), blocks=cx["blocks"], x_type=cx["x_type"], y_type=cx["y_type"],
                           n=row["counterexample"]["shape"][2], expected=cx["expected"],
                           expected_bits=expected_bits, check=row["check"])


def repack_source(row: dict, title: str) -> str:
    from lowp.kernels.ggml.kernel import get
    cx = row["counterexample"]
    k = get(row["kernel"])
    v = k.build.variant
    rows = 1 if k.kind == "gemv" else cx["nr"]
    values = ", ".join(f"{{{', '.join(repr(x) + 'f' for x in line)}}}" for line in cx["expected"])
    return REPACK_TEMPLATE.format(
        title=title, kernel=f"{k.name} ({row['id']})", cause=" ".join(row["cause"].split()), symbol=k.symbol,
        variant=k.label, flags=" ".join(v.flags) or "no flags", cmake=_cmake(v), runner=row.get("emulator") or "the CPU",
        vx_bytes=len(cx["vx"]) // 2, vy_bytes=len(cx["vy"]) // 2, vx=_bytes_text(cx["vx"]), vy=_bytes_text(cx["vy"]),
        nc=cx["nc"], nr=cx["nr"], bs=cx["bs"], rows=rows, blocks=cx["blocks"], x_type=cx["x_type"],
        y_type=cx["y_type"], n=cx["shape"][2], expected=values, check=row["check"])


def quantizer_source(row: dict, title: str) -> str:
    from lowp.kernels.ggml.kernel import get
    cx = row["counterexample"]
    k = get(row["kernel"])
    v = k.build.variant
    return QUANTIZER_TEMPLATE.format(
        title=title, kernel=f"{k.name} ({row['id']})", cause=" ".join(row["cause"].split()), symbol=k.symbol,
        upper=cx["y_type"].upper(), poison=cx["poison"], variant=cx["variant"], variant_name=k.label,
        flags=" ".join(v.flags) or "no flags", cmake=_cmake(v), runner=row.get("emulator") or "the CPU",
        x_size=len(cx["x"]) // 2, x=_bytes_text(cx["x"]), k=cx["k"], y_size=len(cx["expected"]) // 2,
        expected=_bytes_text(cx["expected"]))


def reproducers(found: list[dict], rows: list[dict], folder: Path) -> list[dict]:
    """Each finding's reproducer, written to folder/<id>.c (not run here: it links the checkout's whole CPU
    backend, which lowp does not build)."""
    by_id = {r["id"]: r for r in rows}
    for f in found:
        row = by_id[f["example"]]
        cx = row.get("counterexample") or {}
        source = (quantizer_source if cx.get("variant") else c_source if cx.get("x") else
                  repack_source if cx.get("vx") and cx.get("expected") else None)
        if source is None:
            continue
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{f['id']}.c"
        write_text(path, source(row, f"lowp finding {f['id']}: {f['cause']}"))
        f["reproducer"], f["reproduced"] = str(path), "written; build it as its head comment says"
    return found
