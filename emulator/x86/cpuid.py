"""Which x86 features this CPU and OS can run, by lowp's own CPUID + XGETBV probe (emulator/cpu_features.c, built
with the host compiler and called through cffi): /proc/cpuinfo alone does not say whether the OS saves the AVX-512
or AMX state, and older kernels do not print avx_vnni_int8.

Below both the host's description (lowp.emulator.host.host, which calls the probe) and the native executors
(lowp.emulator.x86.native): it imports neither, so neither is in a circle with the other.
"""
from __future__ import annotations

import functools
from pathlib import Path

import cffi

from lowp.emulator.native_build import build_shared_object

# Feature names (Linux /proc/cpuinfo spelling) in the bit order of lowp_cpu_features() in cpu_features.c.
FEATURE_BITS = ("mmx", "sse2", "ssse3", "sse4_1", "avx2", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                "avx_vnni", "avx_vnni_int8", "avx10_2")
PROBE = Path(__file__).resolve().parents[1] / "cpu_features.c"


@functools.lru_cache(maxsize=None)
def _detected_features() -> int:
    ffi = cffi.FFI()
    ffi.cdef("uint64_t lowp_cpu_features(void);")
    source = "#include <stdint.h>\n" + PROBE.read_text()
    return int(ffi.dlopen(str(build_shared_object(source, "cpu-features"))).lowp_cpu_features())


def detected_x86_features() -> frozenset[str]:
    """The x86 features this CPU and OS can run, by lowp's CPUID + XGETBV detection (cpu_features.c); raises
    NativeUnavailable if it cannot be built. The host's one description (lowp.emulator.host.host) calls it."""
    return frozenset(f for i, f in enumerate(FEATURE_BITS) if _detected_features() >> i & 1)
