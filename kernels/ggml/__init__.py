"""ggml's quantized block formats and dot products, as lowp models them (docs/ggml.md).

blocks: each block struct of ggml-common.h as a numpy record, decoded to integer codes and scales, and
dequantized in ggml's own float order. dot: the integer block sums of every ggml_vec_dot_<x>_q8_<y> and the exact
value of the dot product they make. lowp's models, never the compiled `_generic` (docs/ggml.md says why), are the
oracle of `lowp ggml`.
"""
