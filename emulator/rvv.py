"""RISC-V V 1.0 intrinsics executed under qemu-riscv64 (Debian qemu-user 7.2), for `lowp isa verify` and the
tests: the Backend protocol of lowp.isa_models.backend, plus the vxsat bit each register's instruction set.

    RvvQemuBackend()   one static riscv64 Linux program (emulator/build.py target 'riscv64-linux', zig's clang
                       with -mcpu=baseline_rv64+v) holding a wrapper per registered RVV intrinsic, run as
                       `qemu-riscv64 -cpu rv64,v=true,vlen=<VLEN>,elen=64,vext_spec=v1.0` (QEMU 7.2 accepts
                       VLEN a power of two in [128, 1024] and vext_spec 'v1.0' only: target/riscv/cpu.c,
                       riscv_cpu_realize, v7.2.0), one process per batch of up to a few MiB.

Each wrapper is `void lowp_w_<name>(p0, p1, p2, const int64_t *scalar, const uint8_t *vxrm, void *out,
uint8_t *sat, long n)`: for register i < n it loads the vector arguments with vl = VLMAX, clears vxsat (csrwi),
calls the intrinsic with x[rs1] = scalar[i] and the rounding mode vxrm[i] (a compile-time constant in C, so
the call sits in a switch over the four modes; the intrinsic itself writes vxrm with csrwi), reads vxsat
(csrr) and stores the result and the bit. The asm statements take the vector operands and result as operands,
so the compiler cannot move the instruction out from between them. The RVV intrinsic spec leaves vxsat
UNSPECIFIED after an intrinsic; the one instruction each wrapper compiles to defines it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from functools import cached_property
from typing import Sequence

import numpy as np

from lowp.isa_models import intrinsics as all_intrinsics
from lowp.isa_models.registry import Intrinsic

from .build import build_text
from .intrinsics import qemu_version
from .errors import EmulatorError

VLENS = (128, 256, 512, 1024)      # what qemu-riscv64 7.2 accepts
CTYPE = {"i": "int", "u": "uint"}


def _ctype(dtype) -> str:
    return f"{CTYPE['i' if dtype.kind == 'i' else 'u']}{dtype.itemsize * 8}_t"


def _vtype(dtype, lmul) -> tuple[str, str]:
    """(vector type, type suffix) of an RVV register group: s16, m1 -> vint16m1_t, i16m1."""
    from lowp.isa_models.rvv_intrinsics import _type_name
    suffix = _type_name(dtype, lmul)
    return f"v{CTYPE[suffix[0]]}{suffix[1:]}_t", suffix


def wrapper(intr) -> str:
    """The C wrapper of one RVV intrinsic (see the module doc)."""
    rt, rsuf = _vtype(intr.result.dtype, intr.result_lmul)
    sew, lmul = intr.result.dtype.itemsize * 8, rsuf[len(str(intr.result.dtype.itemsize * 8)) + 1:]
    lines = [f"void lowp_w_{intr.name}(const void *p0, const void *p1, const void *p2, const int64_t *scalar,",
             "        const uint8_t *vxrm, void *out, uint8_t *sat, long n) {",
             "    (void)p0; (void)p1; (void)p2; (void)scalar; (void)vxrm;",
             f"    size_t vl = __riscv_vsetvlmax_e{sew}{lmul}();",
             "    for (long i = 0; i < n; i++) {"]
    args, vecs, k = [], [], 0
    for p, l in zip(intr.params, intr.lmuls):
        if p.kind == "vec":
            vt, suf = _vtype(p.dtype, l)
            lines.append(f"        {vt} a{k} = __riscv_vle{p.dtype.itemsize * 8}_v_{suf}("
                         f"(const {_ctype(p.dtype)} *)p{k} + vl * i, vl);")
            args.append(f"a{k}")
            vecs.append(f"a{k}")
            k += 1
        elif p.kind == "scalar":
            args.append(f"({_ctype(p.dtype)})scalar[i]")
        elif p.name == "vxrm":
            args.append("VXRM")
        else:
            args.append("vl")
    ties = ", ".join(f'"+vr"({v})' for v in vecs)
    lines += [f"        {rt} r;",
              "        unsigned long s;",
              f'        __asm__ volatile("csrwi vxsat, 0" : {ties});']
    call = f"{intr.name}({', '.join(args)})"
    if "VXRM" in call:
        lines.append("        switch (vxrm[i]) {")
        for v in range(4):
            lines.append(f"        case {v}: r = {call.replace('VXRM', str(v))}; break;")
        lines.append("        default: __builtin_trap();")
        lines.append("        }")
    else:
        lines.append(f"        r = {call};")
    lines += ['        __asm__ volatile("csrr %0, vxsat" : "=r"(s) : "vr"(r));',
              f"        __riscv_vse{sew}_v_{rsuf}(({_ctype(intr.result.dtype)} *)out + vl * i, r, vl);",
              "        sat[i] = (uint8_t)s;", "    }", "}", ""]
    return "\n".join(lines)


DRIVER = r"""
long lowp_read(int fd, void *buf, long n);
long lowp_write(int fd, const void *buf, long n);
typedef void (*lowp_fn)(const void *, const void *, const void *, const int64_t *, const uint8_t *, void *,
                        uint8_t *, long);
struct lowp_entry { const char *name; lowp_fn fn; };
static const struct lowp_entry lowp_table[] = {
%s
};
#define LOWP_BUF (4L << 20)
static unsigned char lowp_in[3][LOWP_BUF], lowp_out[LOWP_BUF];
static int64_t lowp_scalar[LOWP_BUF / 8];
static uint8_t lowp_vxrm[LOWP_BUF / 8], lowp_sat[LOWP_BUF / 8];
static int lowp_streq(const char *a, const char *b) { while (*a && *a == *b) { a++; b++; } return *a == *b; }
static long lowp_num(const char *s) { long v = 0; while (*s) v = 10 * v + (*s++ - '0'); return v; }
static int lowp_read_all(void *buf, long n) {
    unsigned char *p = buf;
    while (n > 0) { long got = lowp_read(0, p, n); if (got <= 0) return 0; p += got; n -= got; }
    return 1;
}
static int lowp_write_all(const void *buf, long n) {
    const unsigned char *p = buf;
    while (n > 0) { long w = lowp_write(1, p, n); if (w <= 0) return 0; p += w; n -= w; }
    return 1;
}
/* argv: name n bytes0 bytes1 bytes2 out_bytes; stdin: the three inputs, n int64 scalars, n vxrm bytes;
   stdout: the results, then n vxsat bytes. */
int main(int argc, char **argv) {
    if (argc != 7) return 2;
    long n = lowp_num(argv[2]), sizes[3] = {lowp_num(argv[3]), lowp_num(argv[4]), lowp_num(argv[5])};
    long out = lowp_num(argv[6]);
    if (out > LOWP_BUF || n > LOWP_BUF / 8) return 3;
    for (int k = 0; k < 3; k++)
        if (sizes[k] > LOWP_BUF || !lowp_read_all(lowp_in[k], sizes[k])) return 4;
    if (!lowp_read_all(lowp_scalar, 8 * n) || !lowp_read_all(lowp_vxrm, n)) return 4;
    for (unsigned i = 0; i < sizeof lowp_table / sizeof lowp_table[0]; i++)
        if (lowp_streq(lowp_table[i].name, argv[1])) {
            lowp_table[i].fn(lowp_in[0], lowp_in[1], lowp_in[2], lowp_scalar, lowp_vxrm, lowp_out, lowp_sat, n);
            return lowp_write_all(lowp_out, out) && lowp_write_all(lowp_sat, n) ? 0 : 5;
        }
    return 6;
}
"""


def wrappers_source(intrs) -> str:
    table = "\n".join(f'    {{"{i.name}", (lowp_fn)lowp_w_{i.name}}},' for i in intrs)
    return ("#include <riscv_vector.h>\n#include <stdint.h>\n#include <stddef.h>\n\n"
            + "\n".join(wrapper(i) for i in intrs) + DRIVER % table)


def qemu_path() -> str | None:
    return os.environ.get("LOWP_QEMU_RISCV64") or shutil.which("qemu-riscv64")


class RvvQemuBackend:
    """Run RVV 1.0 intrinsics as a static Linux program under qemu-riscv64 at the VLEN the arguments have."""
    name = "qemu"
    arch = "riscv64"
    modeled: set = set()
    LIMIT = 4 << 20               # the driver's buffer per operand

    def __init__(self, intrinsics=None, qemu: str | None = None):
        self._intrinsics = list(intrinsics) if intrinsics is not None else list(all_intrinsics("riscv64"))
        self.qemu = qemu or qemu_path()
        self.last_vxsat = None

    @cached_property
    def binary(self):
        return build_text(wrappers_source(self._intrinsics), name="rvv-qemu", target="riscv64-linux")

    def unavailable(self, intr: Intrinsic) -> str | None:
        if self.qemu is None:
            return "qemu-riscv64 not installed (Debian: apt-get install qemu-user)"
        if intr.instruction.arch != "riscv64":
            return f"{intr.name} is not a RISC-V intrinsic"
        if intr.name not in {i.name for i in self._intrinsics}:
            return f"{intr.name} has no wrapper in this backend"
        if intr.vlen is not None and intr.vlen not in VLENS:
            return f"qemu-riscv64 7.2 runs VLEN 128..1024 only, not {intr.vlen}"
        return None

    def cpu(self, vlen: int) -> str:
        return f"rv64,v=true,vlen={vlen},elen=64,vext_spec=v1.0"

    def run(self, intr, args: Sequence) -> np.ndarray:
        result, self.last_vxsat = self.run_with_vxsat(intr, args)
        return result

    def run_with_vxsat(self, intr, args: Sequence) -> tuple[np.ndarray, np.ndarray]:
        """Result registers (N, VLMAX) and vxsat (N,) bool. args follow intr.params: vectors (N, elements);
        x[rs1] and vxrm an int or an (N,) array each; vl an int (VLMAX)."""
        if self.qemu is None:
            raise EmulatorError("qemu-riscv64 not installed")
        view = intr if intr.vlen is not None else intr.at(intr.vlen_of(args))
        if view.vlen not in VLENS:
            raise EmulatorError(f"qemu-riscv64 7.2 runs VLEN 128..1024 only, not {view.vlen}")
        vecs, n = [], None
        scalar, vxrm = 0, 0
        for p, a in zip(view.params, args):
            if p.kind == "vec":
                a = np.ascontiguousarray(a)
                if a.dtype != p.dtype or a.ndim != 2 or a.shape[1] != p.lanes:
                    raise ValueError(f"{intr.name}: argument {p.name!r} must be an (N, {p.lanes}) array of "
                                     f"{p.dtype} at VLEN={view.vlen}, got {a.dtype}{list(a.shape)}")
                vecs.append(a)
                n = a.shape[0] if n is None else n
                if a.shape[0] != n:
                    raise ValueError(f"{intr.name}: vector arguments have different batch sizes")
            elif p.kind == "scalar":
                scalar = a
            elif p.name == "vxrm":
                vxrm = a
        scalars = np.broadcast_to(np.asarray(scalar).astype(np.uint64).view(np.int64)
                                  if np.asarray(scalar).dtype == np.uint64 else np.asarray(scalar, np.int64), (n,))
        modes = np.broadcast_to(np.asarray(vxrm, np.uint8), (n,))
        lanes, dtype = view.result.lanes, view.result.dtype
        per_register = max([v.itemsize * v.shape[1] for v in vecs] + [lanes * dtype.itemsize])
        chunk = max(1, self.LIMIT // per_register)
        outs, sats = [], []
        for start in range(0, n, chunk):
            stop = min(n, start + chunk)
            m = stop - start
            part = [v[start:stop] for v in vecs]
            sizes = [v.nbytes for v in part] + [0] * (3 - len(part))
            out_bytes = m * lanes * dtype.itemsize
            stdin = (b"".join(v.tobytes() for v in part) + np.ascontiguousarray(scalars[start:stop]).tobytes()
                     + np.ascontiguousarray(modes[start:stop]).tobytes())
            proc = subprocess.run([self.qemu, "-cpu", self.cpu(view.vlen), str(self.binary.path), intr.name, str(m),
                                   *map(str, sizes), str(out_bytes)], input=stdin, capture_output=True, timeout=300)
            if proc.returncode != 0 or len(proc.stdout) != out_bytes + m:
                raise EmulatorError(f"qemu-riscv64 running {intr.name} at VLEN={view.vlen} failed "
                                    f"(exit {proc.returncode}): {proc.stderr.decode(errors='replace').strip()[:500]}")
            outs.append(np.frombuffer(proc.stdout[:out_bytes], dtype).reshape(m, lanes))
            sats.append(np.frombuffer(proc.stdout[out_bytes:], np.uint8) != 0)
        if not outs:
            return np.zeros((0, lanes), dtype), np.zeros(0, bool)
        return np.concatenate(outs), np.concatenate(sats)

    def describe(self) -> str:
        if self.qemu is None:
            return "qemu-riscv64 not installed"
        version = qemu_version(self.qemu)
        return f"{version}, -cpu {self.cpu(0).replace('vlen=0', 'vlen=<VLEN>')}"
