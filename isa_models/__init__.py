"""lowp.isa_models: bit-exact numpy models of SIMD integer instructions, and the registry that maps the
intrinsics of C code onto them. Pure numpy, no I/O."""
from lowp.isa_models import x86, x86_intrinsics  # noqa: F401  (registers the x86 models)
from lowp.isa_models import arm, arm_intrinsics  # noqa: F401  (registers the AArch64 models)
from lowp.isa_models import sme, sve, sve_intrinsics  # noqa: F401  (registers the SVE/SVE2 and SME models)
from lowp.isa_models import rvv, rvv_intrinsics  # noqa: F401  (registers the RISC-V V 1.0 models)
from lowp.isa_models import arm32  # noqa: F401  (registers the 32-bit Arm SIMD32 models)
from lowp.isa_models import hexagon  # noqa: F401  (registers the Hexagon HVX models)
from lowp.isa_models import wasm  # noqa: F401  (registers the WebAssembly SIMD128 and relaxed SIMD models)
from lowp.isa_models.registry import Instruction, Intrinsic, Param, instruction, instructions, intrinsic, intrinsics

__all__ = ["Instruction", "Intrinsic", "Param", "instruction", "instructions", "intrinsic", "intrinsics", "x86"]
