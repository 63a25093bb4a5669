"""A standalone C reproducer of a counterexample: one file that calls the kernel's own code on the shrunk case and
prints what it computes against what its contract says, ready to attach to an upstream report.

It holds the bytes the kernel was handed (A with its strides, the packed weights, the params as its init writes
them, the indirection buffer's pointers and the zero buffer of an IGEMM, C's poison) and the calls the executor
made, argument for argument (lowp.kernels.abi.invocation, the same adapter every executor runs). The kernel is
declared by its ABI (size_t for every integer, pointers for buffers), so the file needs no header of the library:
it builds with the kernel's own sources and flags and nothing of lowp. It exits 1 and lists the elements that
differ while the bug is there, 0 once it is fixed. Every buffer starts where the case placed it (64-byte aligned, or
at its `align` offset from 64). Slack follows every buffer, as the library allows its kernels
to over-read, holding the executors' canary bytes: a kernel whose result depends on what it over-reads computes
here what it computed under lowp.
"""
from __future__ import annotations

import shlex
import subprocess
import tempfile
from pathlib import Path

import numpy as np

# CANARY: what every executor puts after a buffer: a kernel that lets over-read bytes into C must see the same ones
from lowp.emulator.placement import CANARY

SLACK = 128          # bytes after every buffer: the largest over-read XNNPACK allows (XNN_EXTRA_BYTES on Hexagon)
CROSS = {"aarch64": ("aarch64-linux-gnu-gcc -static", "qemu-aarch64 "), "riscv64":
         ("riscv64-linux-gnu-gcc -static", "qemu-riscv64 -cpu rv64,v=true,vlen=128 ")}


def invocation_of(kernel, cx: dict):
    """The buffers and calls the executor made for a counterexample (lowp.kernels.abi.invocation)."""
    from lowp.kernels.abi import invocation

    from lowp.conformance.search.quantized import from_json
    options = cx.get("options") or {}
    A = np.asarray(cx["A"]).astype(kernel.a_dtype)
    B = np.asarray(cx["B"]).astype(kernel.b_dtype)
    return invocation(kernel, A, B, from_json(cx.get("quant")), seed=cx.get("seed", 0), work_seed=None,
                      strides=options.get("strides"), igemm=options.get("igemm"))


def c_source(kernel, row: dict, title: str = "") -> str:
    """The reproducer's text for the FAIL row `row` of `kernel` (its counterexample shrunk, no earlier call)."""
    cx = row["counterexample"]
    inv = invocation_of(kernel, cx)
    expected = np.asarray(cx["expected"]).astype(kernel.c_dtype)
    out = [_comment(kernel, row, title), "#include <stddef.h>", "#include <stdint.h>", "#include <stdio.h>",
           "#include <string.h>", "", _prototype(inv), ""]
    align = (cx.get("options") or {}).get("align") or {}
    for name, array in inv.buffers.items():
        if name in inv.pointers:
            out.append(f"static const void *{_c(name)}[{len(inv.pointers[name])}];")
        else:
            out += _buffer(name, np.ascontiguousarray(array).reshape(-1).view(np.uint8), align.get(name, 0))
    layout = inv.layouts.get(inv.output)
    M, N = expected.shape
    offsets = layout.offsets() if layout is not None else np.arange(M * N).reshape(M, N) * expected.itemsize
    out += ["", f"static const size_t c_offset[{M}][{N}] = {{{_rows(offsets)}}};",
            f"static const uint8_t expected[{M}][{N}][{expected.itemsize}] = {{{_element_bytes(expected)}}};",
            "", "int main(void) {"]
    for name, array in inv.buffers.items():
        if name not in inv.pointers:
            out.append(f"    memset({_c(name)} + {np.asarray(array).nbytes}, {CANARY}, {SLACK});")
    for name, refs in inv.pointers.items():
        out += [f"    {_c(name)}[{i}] = {_pointer(r)};" for i, r in enumerate(refs)]
    for symbol, args in inv.calls:
        out.append(f"    {symbol}({', '.join(_argument(a) for a in args)});")
    out += _compare(_c(inv.output), kernel.c_type, expected.itemsize, M, N) + ["}", ""]
    return "\n".join(out)


def _buffer(name: str, data: np.ndarray, offset: int) -> list[str]:
    """A buffer's declaration: 64-byte aligned, or `offset` bytes past a 64-byte boundary where the case placed it
    there (its `align` option, docs/alignment.md: a kernel whose result depends on it shows it here too)."""
    if not offset:
        return [f"static uint8_t {_c(name)}[{data.size} + {SLACK}] __attribute__((aligned(64))) = "
                f"{{{_bytes(data)}}};"]
    lead = np.full(offset, CANARY, np.uint8)       # what an executor puts below a buffer's start
    return [f"static uint8_t {_c(name)}_storage[{offset} + {data.size} + {SLACK}] __attribute__((aligned(64))) = "
            f"{{{_bytes(np.concatenate([lead, data]))}}};",
            f"#define {_c(name)} ({_c(name)}_storage + {offset})    /* {offset} bytes past a 64-byte boundary */"]


def _comment(kernel, row: dict, title: str) -> str:
    cx = row["counterexample"]
    m, n, k = cx["shape"]
    build = build_line(kernel, "repro.c")
    lines = [title or f"lowp: {row['id']}", "", f"kernel: {kernel.name} ({kernel.symbol})",
             *([f"entry: {kernel.description}"] if kernel.description else []),
             f"check: {row['check']} on the {row['domain']} domain", f"cause: {row.get('cause') or ''}",
             f"counterexample: {m}x{n}x{k}, {cx.get('nonzero', '?')} nonzero elements"
             + (f" (shrunk from case {cx['case']})" if cx.get("case") else ""),
             "", "Build and run, from this file's folder:", f"    {build}",
             "It prints each element of C that differs from what the contract gives, and exits 1 while one does."]
    body = "\n".join(" * " + line if line else " *" for line in lines).replace("*/", "* /")
    return "/*\n" + body + "\n */"


def build_line(kernel, source: str, output: str = "./repro") -> str:
    """The command that builds and runs the reproducer with the kernel's own sources, include folders, defines and
    flags: the host's cc for an x86-64 kernel, the target's cross gcc and qemu-user for the others."""
    cc, run = ("cc", "") if kernel.target == "x86-64" else CROSS.get(kernel.target, (f"<{kernel.target} cc>", ""))
    words = [*shlex.split(cc), *kernel.cflags, *(f"-I{d}" for d in kernel.include_dirs),
             *(f"-D{d}" for d in kernel.defines), source, *(str(s) for s in kernel.sources), "-o", output]
    return f"{shlex.join(words)} && {run}{shlex.quote(output)}"


def _prototype(inv) -> str:
    """The kernel's declaration by its ABI: size_t integers, const pointers to what it reads, void * to what it
    writes, const void ** to a pointer table (an IGEMM's indirection buffer)."""
    symbol, args = inv.calls[0]
    names = list(inv.arg_names) + [f"arg{i}" for i in range(len(inv.arg_names), len(args))]
    kinds = []
    for name, a in zip(names, args):
        if not hasattr(a, "buffer"):
            kinds.append(f"size_t {name}")
        elif a.buffer in inv.pointers:
            kinds.append(f"const void **{name}")
        else:
            kinds.append(f"{'' if a.buffer in inv.writable else 'const '}void *{name}")
    return f"void {symbol}({', '.join(kinds)});"


def _argument(a) -> str:
    if hasattr(a, "buffer"):
        return _pointer(a)
    return f"(size_t) {int(a) & 0xFFFF_FFFF_FFFF_FFFF}u"


def _pointer(ref) -> str:
    """A buffer's address plus the offset: through uintptr_t, as an IGEMM's rows point before A by a_offset."""
    return f"(void *) ((uintptr_t) {_c(ref.buffer)} + {int(ref.offset)})" if ref.offset else f"(void *) {_c(ref.buffer)}"


def _compare(c_buffer: str, c_type: str, itemsize: int, M: int, N: int) -> list[str]:
    """Bits compared; values printed as the type's (f16 and bf16 as their bits, which C has no type for)."""
    bits = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}[itemsize]
    fmt = {"f32": ("float", "%.9g"), "s8": ("int8_t", "%d"), "u8": ("uint8_t", "%d"), "s32": ("int32_t", "%d")}.get(
        c_type, (bits, f"0x%0{2 * itemsize}x"))
    return [f"    int differ = 0;",
            f"    for (int i = 0; i < {M}; i++) for (int j = 0; j < {N}; j++) {{",
            f"        {fmt[0]} got, want;",
            f"        memcpy(&got, {c_buffer} + c_offset[i][j], sizeof got);",
            "        memcpy(&want, expected[i][j], sizeof want);",
            "        if (memcmp(&got, &want, sizeof got) != 0) {",
            f"            if (differ < 32) printf(\"C[%d][%d] = {fmt[1]}, expected {fmt[1]}\\n\", i, j, got, want);",
            "            differ++;",
            "        }",
            "    }",
            f"    printf(\"%d of {M * N} elements of C differ from the contract\\n\", differ);",
            "    return differ != 0;"]


def _c(name: str) -> str:
    return "buf_" + "".join(ch if ch.isalnum() else "_" for ch in name)


def _bytes(data: np.ndarray) -> str:
    return ",".join(str(int(b)) for b in data) if data.size else "0"


def _rows(offsets: np.ndarray) -> str:
    return ",".join("{" + ",".join(str(int(v)) for v in row) + "}" for row in offsets)


def _element_bytes(matrix: np.ndarray) -> str:
    return ",".join("{" + ",".join("{" + ",".join(str(int(b)) for b in np.asarray(v).reshape(1).view(np.uint8))
                                   + "}" for v in row) + "}" for row in matrix)


def run_here(kernel, path: Path, timeout: float = 120) -> str:
    """Build and run the reproducer on this machine where it can (an x86-64 kernel whose features this CPU has):
    what it said ('exit 1: 3 of 16 elements of C differ'), or why it was not run."""
    from lowp.kernels.features import host_features
    if kernel.target != "x86-64":
        return f"not run here: a {kernel.target} kernel (the build line names the cross compiler and qemu-user)"
    missing = [f for f in kernel.features if f not in host_features("x86-64")]
    if missing:
        return f"not run here: this CPU lacks {', '.join(missing)}"
    with tempfile.TemporaryDirectory() as tmp:
        command = build_line(kernel, str(path), str(Path(tmp) / "repro"))
        try:
            done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return f"ran here: no answer within {timeout:.0f} s"
    if done.returncode not in (0, 1):
        said = (done.stderr or done.stdout).strip().splitlines()
        return f"did not build or run here (exit {done.returncode}): {said[0] if said else ''}"
    lines = done.stdout.strip().splitlines()
    return f"ran here: exit {done.returncode}: {lines[-1] if lines else ''}"
