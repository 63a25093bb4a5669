"""What each library promises: one module per library or family.

- int32: the accumulation contracts (exact, pair-saturating, acc16, int16 lanes): what a kernel's int32 result is;
- output: the output-stage contracts of requantizing kernels (XNNPACK/TFLite, gemmlowp, FBGEMM, oneDNN styles);
- gemmlowp: gemmlowp's output stages and pipelines; less_than_8bit: its less-than-8-bit requantization;
- fbgemm, onednn: those libraries' reference arithmetic; fixedpoint: gemmlowp's fixed-point primitives.

`lowp.conformance.contracts` itself is the int32 family, as it was before the contracts had a folder.
"""
from lowp.conformance.contracts.int32 import (  # noqa: F401 - the public path docs and users name
    I32, exact, exact_zero_points, pair_saturating, pair_saturating_k_blocks, onednn_igemm_k_blocks,
    pair_saturating_folded_zero_points, pair_saturating_shifted_zero_points, shifted_pair_saturating, fbgemm_acc16,
    int16_lanes_wrapping, gemmlowp_lhs_nonzero_wrap, Variant, Contract, Judgement, EXACT, PAIR_SAT, SHIFTED_PAIR_SAT,
    ACC16, LHS_WRAP, Q46_LANES, U4_LANES, CONTRACTS, contract)
