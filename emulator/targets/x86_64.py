"""x86-64, natively: kernels built by the host's C compiler into a shared library and called in-process through cffi
(lowp.kernels.executors.NativeExecutor, behind guard pages in a child process); instruction models proven against
this CPU's own instructions (lowp.emulator.native.NativeX86)."""
from __future__ import annotations

from . import Target, host, register


class NativeX86_64(Target):
    name, arch, isa, backend = "x86-64-native", "x86-64", "x86", "native"

    def unavailable(self) -> str | None:
        h = host()
        if h.arch != "x86-64":
            return f"the host is {h.machine}, not x86-64"
        return None

    def features(self, vector_bits=None, **options) -> frozenset[str]:
        """lowp's CPUID + XGETBV detection and the flags of /proc/cpuinfo (nothing on a host that is not x86-64)."""
        h = host()
        return h.x86_features | h.flags if h.arch == "x86-64" else frozenset()

    def describe(self, vector_bits=None, **options) -> str:
        return "CPU"

    def intrinsic_backends(self) -> list:
        from lowp.emulator.native import NativeX86
        return [NativeX86()]


NATIVE = register(NativeX86_64())
