// lowp's ggml-shaped test tree (tests/ggml_tree/README.md): not ggml's code. An arch folder no lowp target runs
// (POWER): a campaign lists it and says so. Only the q8_0 dot is here; arch-fallback.h renames the other generics.
#include "ggml-common.h"
#include "quants.h"

void ggml_vec_dot_q8_0_q8_0(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc) {
    // POWER9 VSX would go here; the block loop of the generic one stands in for it
    ggml_vec_dot_q8_0_q8_0_generic(n, s, bs, vx, bx, vy, by, nrc);
}
