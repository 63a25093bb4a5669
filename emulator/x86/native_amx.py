"""The host CPU as an executor of AMX-INT8 TDPBSSD/TDPBSUD/TDPBUSD/TDPBUUD, beside native.py's NativeX86: a small
C library (compiled once with -mamx-tile -mamx-int8, cached like the intrinsic wrappers) called through cffi.

Linux hands out the 8 KiB tile-data state on request only: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA = 18)
before the first tile instruction (Linux Documentation/arch/x86/xstate.rst; without it the first tile
instruction faults). Each call configures the tiles with LDTILECFG from a 64-byte palette-1 config (byte 0
palette_id = 1, bytes 16..47 colsb[16] as u16, bytes 48..63 rows[16]): tmm0 = C (M rows x 4N bytes), tmm1 = A
(M x K), tmm2 = B (K/4 x 4N); then per tile triple TILELOADD C, A, B, TDPB*D tmm0, tmm1, tmm2, TILESTORED C;
TILERELEASE at the end. Intel SDM Vol. 1 ch. 18 (Intel AMX), Vol. 2 LDTILECFG.

Only tests and `lowp isa verify` import this; the models (x86.tdpb*d) never do.
"""
from __future__ import annotations

from functools import cached_property

import cffi
import numpy as np

from lowp.isa_models.x86 import AMX_TYPES

from lowp.emulator.host import host
from lowp.emulator.native_build import NativeUnavailable, build_shared_object
from lowp.emulator.x86.native import unavailable

OPS = ("tdpbssd", "tdpbsud", "tdpbusd", "tdpbuud")
TYPES = AMX_TYPES

SOURCE = r"""
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

#define LOWP_ARCH_GET_XCOMP_PERM 0x1022
#define LOWP_ARCH_REQ_XCOMP_PERM 0x1023
#define LOWP_XFEATURE_XTILEDATA 18

/* 0 when this process may use the tile data state; < 0 why not. */
int lowp_amx_enable(void) {
    unsigned long granted = 0;
    if (syscall(SYS_arch_prctl, LOWP_ARCH_REQ_XCOMP_PERM, LOWP_XFEATURE_XTILEDATA)) return -1;
    if (syscall(SYS_arch_prctl, LOWP_ARCH_GET_XCOMP_PERM, &granted)) return -2;
    return (granted >> LOWP_XFEATURE_XTILEDATA) & 1 ? 0 : -3;
}

struct lowp_tilecfg {
    uint8_t palette_id, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

/* count independent tile triples: c (m x n dwords), a (m x k bytes), b (k/4 x 4n bytes), each contiguous. */
int lowp_amx_tdpb(int op, int m, int k, int n, const void *a, const void *b, void *c, long count) {
    struct lowp_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette_id = 1;
    cfg.rows[0] = (uint8_t)m;     cfg.colsb[0] = (uint16_t)(4 * n);
    cfg.rows[1] = (uint8_t)m;     cfg.colsb[1] = (uint16_t)k;
    cfg.rows[2] = (uint8_t)(k / 4); cfg.colsb[2] = (uint16_t)(4 * n);
    _tile_loadconfig(&cfg);
    for (long i = 0; i < count; i++) {
        char *ci = (char *)c + i * m * 4 * n;
        const char *ai = (const char *)a + i * m * k, *bi = (const char *)b + i * (k / 4) * 4 * n;
        _tile_loadd(0, ci, 4 * n);
        _tile_loadd(1, ai, k);
        _tile_loadd(2, bi, 4 * n);
        switch (op) {
        case 0: _tile_dpbssd(0, 1, 2); break;
        case 1: _tile_dpbsud(0, 1, 2); break;
        case 2: _tile_dpbusd(0, 1, 2); break;
        case 3: _tile_dpbuud(0, 1, 2); break;
        default: _tile_release(); return -1;
        }
        _tile_stored(0, ci, 4 * n);
    }
    _tile_release();
    return 0;
}
"""


def cpu_flags() -> frozenset[str]:
    """This host's /proc/cpuinfo flags, where the AMX check looks for amx_tile and amx_int8."""
    return host().flags


class NativeAmx:
    """Run TDPB*D on this CPU over a batch of tile triples."""
    name = "native"
    arch = "x86"

    @cached_property
    def _reason(self) -> str | None:
        reason = unavailable()
        if reason:
            return reason
        missing = [f for f in ("amx_tile", "amx_int8") if f not in cpu_flags()]
        if missing:
            return f"CPU lacks {', '.join(missing)} (/proc/cpuinfo)"
        try:
            self._ffi = cffi.FFI()
            self._ffi.cdef("int lowp_amx_enable(void); int lowp_amx_tdpb(int, int, int, int, const void *, "
                           "const void *, void *, long);")
            self._lib = self._ffi.dlopen(str(build_shared_object(SOURCE, "amx-int8",
                                                                 flags=("-O2", "-mamx-tile", "-mamx-int8"))))
        except NativeUnavailable as e:
            return str(e)
        code = self._lib.lowp_amx_enable()
        if code:
            return (f"the kernel did not grant the AMX tile data state (arch_prctl ARCH_REQ_XCOMP_PERM, "
                    f"XFEATURE_XTILEDATA: {code}); Linux >= 5.16 needed")
        return None

    def unavailable(self, mnemonic: str = "tdpbssd") -> str | None:
        if mnemonic not in OPS:
            return f"{mnemonic} is not an AMX-INT8 dot product"
        return self._reason

    def run(self, mnemonic: str, c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """C + A.B per TDPB*D for tile triples c (N, M, n) int32, a (N, M, K), b (N, K/4, 4n) bytes."""
        reason = self.unavailable(mnemonic)
        if reason:
            raise RuntimeError(f"{mnemonic} cannot run natively: {reason}")
        a_t, b_t = TYPES[mnemonic]
        c, a, b = (np.ascontiguousarray(x) for x in (c, a, b))
        if c.dtype != np.int32 or a.dtype != a_t or b.dtype != b_t or c.ndim != 3 or a.ndim != 3 or b.ndim != 3:
            raise ValueError(f"{mnemonic}: expected c (N, M, n) int32, a (N, M, K) {np.dtype(a_t)}, "
                             f"b (N, K/4, 4n) {np.dtype(b_t)}; got {c.dtype}{c.shape}, {a.dtype}{a.shape}, "
                             f"{b.dtype}{b.shape}")
        from lowp.isa_models.x86 import _tdpb
        _tdpb(c, a, b, a_t, b_t)          # its tile checks refuse what would #UD (SIGILL) before the CPU sees it
        count, m, k = a.shape
        out = c.copy()
        rc = self._lib.lowp_amx_tdpb(OPS.index(mnemonic), m, k, c.shape[2], self._ffi.from_buffer(a),
                                     self._ffi.from_buffer(b), self._ffi.from_buffer(out), count)
        if rc:
            raise RuntimeError(f"{mnemonic}: the AMX runner returned {rc}")
        return out

    def describe(self) -> str:
        return f"{host().cpu_model}; AMX-INT8 via LDTILECFG / TILELOADD / TDPB*D / TILESTORED"
