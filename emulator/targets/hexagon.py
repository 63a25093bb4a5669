"""Hexagon (v68, HVX with 128-byte vectors) on x86-64 under qemu-hexagon: a static Linux program (zig, target
hexagon-linux-musl with musl's headers and no libc; linux_runtime_hexagon.c), the driver qemu_driver_hexagon.c.

What qemu-hexagon 10 runs right and what it does not (measured on qemu-user 10.0.2 and 11.1.3; the HVX models'
proof is tests/test_hexagon.py): integer HVX is right; HVX floating point is not usable (the qfloat
instructions of v73 abort qemu 10.0.2 and raise SIGILL in 11.1.3; `v.sf = v.w` returns wrong bits in both). So a
kernel that lists hvx_qfloat, hvx_ieee_fp or an HVX version past v71 is a known defect here: its row names why,
rather than a result judged on instructions qemu gets wrong.
"""
from __future__ import annotations

from lowp.emulator.build import HEXAGON_LINUX
from lowp.emulator.targets.base import register
from lowp.emulator.targets.qemu_user import QemuUserTarget

# HVX features qemu-hexagon 10 does not execute right: floating point (v68's IEEE HVX float, v73's qfloat) and the
# v73 level, whose XNNPACK kernels take the qfloat path (src/qs8-gemm/c4-hvx.c.in: __HVX_ARCH__ >= 73).
FLOAT_HVX = ("hvx_qfloat", "hvx_ieee_fp", "v73", "hvxv73")


class HexagonQemu(QemuUserTarget):
    """Kernels run through lowp.emulator.qemu's HEXAGON guest (32-bit, 4-byte pointers); features are the -cpu's
    versions and HVX (lowp.emulator.qemu.hexagon_features)."""
    name, arch, isa, guest_name = "hexagon-qemu", "hexagon", "hexagon", "hexagon"
    recipe = HEXAGON_LINUX

    def known_defect(self, features=(), vector_bits=None, **options) -> str | None:
        bad = [f for f in features if f in FLOAT_HVX]
        if bad:
            return (f"{', '.join(bad)}: qemu-hexagon cannot execute HVX floating point (qfloat aborts qemu 10.0.2 "
                    "and raises SIGILL in 11.1.3; vsf = vw returns wrong bits): a v73 build's rescale uses it")
        return None

    def intrinsic_backends(self) -> list:
        from lowp.emulator.hexagon import HvxQemuBackend
        return [HvxQemuBackend()]


QEMU = register(HexagonQemu())
