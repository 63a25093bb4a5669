"""32-bit Arm (AArch32): models of the ARMv6 SIMD32 and saturating instructions (simd32.py) and their ACLE
intrinsics (intrinsics.py, registered under arch 'arm'). The AArch32 NEON instructions share their arithmetic with
the AArch64 models of lowp.isa_models.arm (VMLAL = SMLAL, VQMOVN = SQXTN, ...), which the kernels' output stages
compose."""
from lowp.isa_models.arm32 import intrinsics, simd32  # noqa: F401  (registers the models)

__all__ = ["intrinsics", "simd32"]
