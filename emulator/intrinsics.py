"""Executors of ACLE intrinsics for `lowp isa verify` and the tests (the Backend protocol of
lowp.isa_models.backend): a generated C wrapper per intrinsic, compiled once (cached), run over a batch.

    UnicornBackend()  runs the wrappers under Machine (Unicorn 2.1.4, cpu MAX). FEAT_I8MM intrinsics run through
                      the gap-filling, i.e. on lowp's own models: they are listed in `modeled`, and checking them
                      here compares the model with itself. Use QemuBackend for an independent opinion on those.
    QemuBackend()     runs a static AArch64 Linux build of the same wrappers under `qemu-aarch64 -cpu max`
                      (Debian qemu-user), one process per batch; unavailable() says why when it is not installed.

Each wrapper is `void lowp_w_<name>(const void *p0, const void *p1, const void *p2, void *out, long imm, long n)`:
it loads the vector arguments of register i from p0..p2 (vld1/vld1q), calls the intrinsic and stores the result
(vst1/vst1q) to out, for i < n. An immediate must be a compile-time constant in C, so the call sits in a switch
over every legal value of the immediate (a wrong one reaches __builtin_trap).
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
from .a64 import I8MM
from .errors import EmulatorError

CTYPE = {"s": "int", "u": "uint"}


def _vtype(p) -> tuple[str, str, str]:
    """(vector type, element pointer type, load/store suffix) of a vec Param: s8x16 -> int8x16_t, int8_t, q_s8."""
    kind = "u" if p.dtype.kind == "u" else "s"
    bits = p.dtype.itemsize * 8
    q = "q" if p.width == 128 else ""
    return f"{CTYPE[kind]}{bits}x{p.lanes}_t", f"{CTYPE[kind]}{bits}_t", f"{q}_{kind}{bits}"


def wrapper(intr: Intrinsic) -> str:
    """The C wrapper of one intrinsic (see the module doc)."""
    lines = [f"void lowp_w_{intr.name}(const void *p0, const void *p1, const void *p2, void *out, long imm, long n) {{",
             "    (void)p0; (void)p1; (void)p2; (void)imm;",
             "    for (long i = 0; i < n; i++) {"]
    call_args, k = [], 0
    for p in intr.params:
        if p.kind == "vec":
            vt, et, sfx = _vtype(p)
            lines.append(f"        {vt} a{k} = vld1{sfx}((const {et} *)p{k} + {p.lanes} * i);")
            call_args.append(f"a{k}")
            k += 1
        else:
            call_args.append("IMM")
    rt, ret, rsfx = _vtype(intr.result)
    lines.append(f"        {rt} r;")
    imm = next((p for p in intr.params if p.kind == "imm"), None)
    call = f"{intr.name}({', '.join(call_args)})"
    if imm is None:
        lines.append(f"        r = {call};")
    else:
        lines.append("        switch (imm) {")
        for v in range(imm.lo, imm.hi + 1):
            lines.append(f"        case {v}: r = {call.replace('IMM', str(v))}; break;")
        lines.append("        default: __builtin_trap();")
        lines.append("        }")
    lines.append(f"        vst1{rsfx}(({ret} *)out + {intr.result.lanes} * i, r);")
    lines += ["    }", "}", ""]
    return "\n".join(lines)


def wrappers_source(intrs) -> str:
    return "#include <arm_neon.h>\n#include <stdint.h>\n\n" + "\n".join(wrapper(i) for i in intrs)


QEMU_DRIVER = r"""
long lowp_read(int fd, void *buf, long n);
long lowp_write(int fd, const void *buf, long n);
typedef void (*lowp_fn)(const void *, const void *, const void *, void *, long, long);
struct lowp_entry { const char *name; lowp_fn fn; };
static const struct lowp_entry lowp_table[] = {
%s
};
static unsigned char lowp_in[3][1 << 20], lowp_out[1 << 20];
static int lowp_streq(const char *a, const char *b) { while (*a && *a == *b) { a++; b++; } return *a == *b; }
static long lowp_num(const char *s) { long v = 0, sign = 1; if (*s == '-') { sign = -1; s++; } while (*s) v = 10 * v + (*s++ - '0'); return sign * v; }
static int lowp_read_all(void *buf, long n) {
    unsigned char *p = buf;
    while (n > 0) { long got = lowp_read(0, p, n); if (got <= 0) return 0; p += got; n -= got; }
    return 1;
}
/* argv: name imm n bytes0 bytes1 bytes2 out_bytes; stdin: the three inputs back to back; stdout: the result. */
int main(int argc, char **argv) {
    if (argc != 8) return 2;
    long sizes[3] = {lowp_num(argv[4]), lowp_num(argv[5]), lowp_num(argv[6])}, out = lowp_num(argv[7]);
    if (out > (long)sizeof lowp_out) return 3;
    for (int k = 0; k < 3; k++)
        if (sizes[k] > (long)sizeof lowp_in[k] || !lowp_read_all(lowp_in[k], sizes[k])) return 4;
    for (unsigned i = 0; i < sizeof lowp_table / sizeof lowp_table[0]; i++)
        if (lowp_streq(lowp_table[i].name, argv[1])) {
            lowp_table[i].fn(lowp_in[0], lowp_in[1], lowp_in[2], lowp_out, lowp_num(argv[2]), lowp_num(argv[3]));
            for (long done = 0; done < out;) { long w = lowp_write(1, lowp_out + done, out - done); if (w <= 0) return 5; done += w; }
            return 0;
        }
    return 6;
}
"""


def _aarch64_intrinsics():
    """The Advanced SIMD ones: SVE/SME intrinsics run through lowp.emulator.sve (qemu at a chosen VL)."""
    return [i for i in all_intrinsics("aarch64") if i.encoding == "a64"]


def _split(intr: Intrinsic, args: Sequence):
    vecs, imm = [], 0
    for p, a in zip(intr.params, args):
        if p.kind == "vec":
            a = np.ascontiguousarray(a)
            if a.dtype != p.dtype or a.ndim != 2 or a.shape[1] != p.lanes:
                raise ValueError(f"{intr.name}: argument {p.name!r} must be an (N, {p.lanes}) array of {p.dtype}, "
                                 f"got {a.dtype}{list(a.shape)}")
            vecs.append(a)
        else:
            imm = int(args[intr.params.index(p)])
            if not p.lo <= imm <= p.hi:
                raise ValueError(f"{intr.name}: {p.name}={imm} outside [{p.lo}, {p.hi}]")
    n = {len(v) for v in vecs}
    if len(n) != 1:
        raise ValueError(f"{intr.name}: vector arguments have different batch sizes {sorted(n)}")
    return vecs, imm, n.pop()


class UnicornBackend:
    """Run AArch64 intrinsics under Unicorn (lowp.emulator.Machine), batch by batch."""
    name = "unicorn"
    arch = "aarch64"

    def __init__(self, intrinsics=None):
        self._intrinsics = list(intrinsics) if intrinsics is not None else _aarch64_intrinsics()

    @property
    def modeled(self) -> set[str]:
        """Intrinsics whose instruction Unicorn lacks (FEAT_I8MM): they run on lowp's models (gap-filling)."""
        return {i.name for i in self._intrinsics if i.mnemonic in I8MM}

    @cached_property
    def binary(self):
        return build_text(wrappers_source(self._intrinsics), name="acle-wrappers")

    @cached_property
    def machine(self):
        from .machine import Machine
        return Machine(self.binary)

    def unavailable(self, intr: Intrinsic) -> str | None:
        return _no_wrapper(self._intrinsics, intr)

    def run(self, intr: Intrinsic, args: Sequence) -> np.ndarray:
        vecs, imm, n = _split(intr, args)
        out = np.zeros((n, intr.result.lanes), intr.result.dtype)
        pointers = vecs + [0] * (3 - len(vecs))
        r = self.machine.call(f"lowp_w_{intr.name}", *pointers, out, imm, n)
        self.last_modeled = r.modeled
        return r.arrays[len(vecs)]

    def describe(self) -> str:
        import unicorn
        return (f"Unicorn {unicorn.__version__} (QEMU 5.0.1 TCG), AArch64 cpu model MAX; FEAT_I8MM intrinsics "
                f"({len(self.modeled)}) run on lowp's models through the I8MM gap-filling, not on Unicorn")


def _no_wrapper(wrapped, intr: Intrinsic) -> str | None:
    """Why a backend built for the intrinsics `wrapped` cannot run `intr`, or None."""
    if intr.instruction.arch != "aarch64":
        return f"{intr.name} is not an AArch64 intrinsic"
    if intr.name not in {i.name for i in wrapped}:
        return f"{intr.name} has no wrapper in this backend"
    return None


def qemu_version(qemu: str) -> str:
    """The first line of `qemu --version` (every qemu backend's describe() starts with it), else the path."""
    try:
        return subprocess.run([qemu, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        return qemu


def qemu_path() -> str | None:
    return os.environ.get("LOWP_QEMU_AARCH64") or shutil.which("qemu-aarch64")


class QemuBackend:
    """Run AArch64 intrinsics as a static Linux program under qemu-aarch64 -cpu max (one process per batch)."""
    name = "qemu"
    arch = "aarch64"
    modeled: set = set()
    CHUNK = 4096          # registers per process: the driver's buffers hold 1 MiB per operand

    def __init__(self, intrinsics=None, qemu: str | None = None):
        self._intrinsics = list(intrinsics) if intrinsics is not None else _aarch64_intrinsics()
        self.qemu = qemu or qemu_path()

    @cached_property
    def binary(self):
        table = "\n".join(f'    {{"{i.name}", (lowp_fn)lowp_w_{i.name}}},' for i in self._intrinsics)
        return build_text(wrappers_source(self._intrinsics) + QEMU_DRIVER % table, name="acle-qemu",
                                 target="linux")

    def unavailable(self, intr: Intrinsic) -> str | None:
        if self.qemu is None:
            return "qemu-aarch64 not installed (Debian: apt-get install qemu-user)"
        return _no_wrapper(self._intrinsics, intr)

    def run(self, intr: Intrinsic, args: Sequence) -> np.ndarray:
        vecs, imm, n = _split(intr, args)
        if self.qemu is None:
            raise EmulatorError("qemu-aarch64 not installed")
        outs = []
        for start in range(0, n, self.CHUNK):
            part = [v[start:start + self.CHUNK] for v in vecs]
            m = len(part[0])
            sizes = [v.nbytes for v in part] + [0] * (3 - len(part))
            out_bytes = m * intr.result.lanes * intr.result.dtype.itemsize
            proc = subprocess.run([self.qemu, "-cpu", "max", str(self.binary.path), intr.name, str(imm), str(m),
                                   *map(str, sizes), str(out_bytes)],
                                  input=b"".join(v.tobytes() for v in part), capture_output=True, timeout=120)
            if proc.returncode != 0 or len(proc.stdout) != out_bytes:
                raise EmulatorError(f"qemu-aarch64 running {intr.name} failed (exit {proc.returncode}): "
                                    f"{proc.stderr.decode(errors='replace').strip()[:500]}")
            outs.append(np.frombuffer(proc.stdout, intr.result.dtype).reshape(m, intr.result.lanes))
        return np.concatenate(outs) if outs else np.zeros((0, intr.result.lanes), intr.result.dtype)

    def describe(self) -> str:
        if self.qemu is None:
            return "qemu-aarch64 not installed"
        version = qemu_version(self.qemu)
        return f"{version}, -cpu max (implements FEAT_DotProd and FEAT_I8MM)"
