"""WebAssembly SIMD128 and relaxed SIMD models (simd128.py: one function per instruction; RELAXED_DOT names the
relaxed dot product's behaviours) and their C intrinsics (intrinsics.py: wasm_simd128.h's spellings)."""
from lowp.isa_models.wasm import intrinsics, simd128  # noqa: F401  (registers the wasm models)
from lowp.isa_models.wasm.simd128 import RELAXED_DOT, ImplementationDefined

__all__ = ["RELAXED_DOT", "ImplementationDefined", "intrinsics", "simd128"]
