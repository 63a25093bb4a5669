// A one-line mutant of kernels/quantized/qs8_gemm_1x8c8_rndnu_neon.S for tests/test_prove_a64_quantized.py: the output
// zero point is added with ADD (wrapping in int16) where the original saturates (SQADD). It differs only where the
// scaled accumulator sits within |zero point| of an int16 limit: large scales (the 'limits' parameters) reach it.
//
// A qs8 GEMM micro-kernel in AArch64 assembly in the style of XNNPACK's "1x8c8 aarch64-neon-mlal" ones (mr=1,
// nr=8, kr=8), with XNNPACK's ukernel ABI (kernels/include/lowp/xnnpack.h) and its rndnu requantization. Written
// for lowp from XNNPACK's documented facts, not from its code:
//   - the packing (xnn_pack_qs8_gemm_goi_w, kr=8, sr=1): per block of 8 columns, 8 int32 (bias less the input zero
//     point times the column sums), then for each 8-k block the 8 columns' 8 bytes each (column n at +8n);
//   - kc is rounded up to 8 and A is read that far: up to 7 bytes past a row (XNN_OOB_READS); the packed weights
//     are zero there, so whatever A holds past K adds nothing;
//   - accumulation: 16 k per step, SMULL of the first 8 and SMLAL of the next 8 into one int16x8 per column, then
//     SADALP into that column's int32x4. Two products share an int16 lane: exact while they stay within int16,
//     which holds for XNNPACK's weight range [-127, 127] (its GemmMicrokernelTester draws weights there); a = b =
//     -128 twice in a lane gives 32768, which wraps;
//   - rndnu (src/xnnpack/microparams.h rndnu_neon, xnn_init_qs8_conv_minmax_rndnu_neon_params): SQSHL by
//     right_pre_shift, SQDMULH by multiplier, SRSHL by right_post_shift, SQXTN, SQADD output_zero_point, SQXTN,
//     SMAX output_min, SMIN output_max. (XNNPACK's own AArch64 .S rndnu kernels pre-shift with SSHL, which wraps;
//     its C kernels use SQSHL, which saturates. This kernel saturates, as its C siblings do.)
//
// void lowp_mut_qs8_gemm_rndnu_1x8c8_add_zp(
//     size_t mr,            x0 (1: one row)
//     size_t nc,            x1
//     size_t kc,            x2
//     const int8_t *a,      x3
//     size_t a_stride,      x4 (unused: one row)
//     const void *w,        x5
//     int8_t *c,            x6
//     size_t cm_stride,     x7 (unused: one row)
//     size_t cn_stride,     [sp]     -> x10
//     const struct lowp_xnn_qs8_rndnu_neon_params *params)  [sp + 8] -> x11
//
// Registers: accumulators v16-v23 (one int32x4 per column), params v24-v29, A v0 v1, weights v2-v5, products v6 v7.
// Only caller-saved registers are used (v8-v15 and x19-x28 are not touched).

        .text
        .globl  lowp_mut_qs8_gemm_rndnu_1x8c8_add_zp
        .type   lowp_mut_qs8_gemm_rndnu_1x8c8_add_zp, %function
        .p2align 4
lowp_mut_qs8_gemm_rndnu_1x8c8_add_zp:
        ldp     x10, x11, [sp]              // cn_stride, params
        add     x2, x2, #7                  // kc = round_up(kc, 8)
        bic     x2, x2, #7

        // The params, broadcast once (struct lowp_xnn_qs8_rndnu_neon_params: offsets 0, 4, 8, 12, 14, 15).
        ld1r    {v24.4s}, [x11]             // right_pre_shift
        add     x12, x11, #4
        ld1r    {v25.4s}, [x12]             // multiplier
        add     x12, x11, #8
        ld1r    {v26.4s}, [x12]             // right_post_shift
        add     x12, x11, #12
        ld1r    {v27.8h}, [x12]             // output_zero_point
        add     x12, x11, #14
        ld1r    {v28.8b}, [x12]             // output_min
        add     x12, x11, #15
        ld1r    {v29.8b}, [x12]             // output_max

// One column pair of a 16-k step: columns 2j, 2j+1, their weights at w + 16j (first 8 k) and w + 64 + 16j (next 8).
.macro  PAIR16 j, acca, accb
        ldp     d2, d3, [x5, #16*\j]
        ldp     d4, d5, [x5, #64+16*\j]
        smull   v6.8h, v2.8b, v0.8b
        smull   v7.8h, v3.8b, v0.8b
        smlal   v6.8h, v4.8b, v1.8b
        smlal   v7.8h, v5.8b, v1.8b
        sadalp  \acca\().4s, v6.8h
        sadalp  \accb\().4s, v7.8h
.endm

// One column pair of an 8-k step.
.macro  PAIR8 j, acca, accb
        ldp     d2, d3, [x5, #16*\j]
        smull   v6.8h, v2.8b, v0.8b
        smull   v7.8h, v3.8b, v0.8b
        sadalp  \acca\().4s, v6.8h
        sadalp  \accb\().4s, v7.8h
.endm

0:      // A block of 8 columns. The bias of column n goes to lane 0 of its accumulator (LDR s zeroes the rest).
        ldp     s16, s17, [x5], #8
        ldp     s18, s19, [x5], #8
        ldp     s20, s21, [x5], #8
        ldp     s22, s23, [x5], #8
        mov     x9, x3                      // this block's walk along the row of A
        subs    x8, x2, #16                 // k left after one 16-k step
        b.lo    2f

1:      // 16 k: SMULL + SMLAL into int16, SADALP into int32.
        ldp     d0, d1, [x9], #16
        PAIR16  0, v16, v17
        PAIR16  1, v18, v19
        PAIR16  2, v20, v21
        PAIR16  3, v22, v23
        add     x5, x5, #128
        subs    x8, x8, #16
        b.hs    1b

2:      // kc is a multiple of 8: 8 k are left iff bit 3 of (k left - 16) is set (-8 has it, -16 does not).
        tbz     x8, #3, 3f
        ldr     d0, [x9], #8
        PAIR8   0, v16, v17
        PAIR8   1, v18, v19
        PAIR8   2, v20, v21
        PAIR8   3, v22, v23
        add     x5, x5, #64

3:      // Reduce each column's four partial sums: v16 = columns 0-3, v20 = columns 4-7.
        addp    v16.4s, v16.4s, v17.4s
        addp    v18.4s, v18.4s, v19.4s
        addp    v20.4s, v20.4s, v21.4s
        addp    v22.4s, v22.4s, v23.4s
        addp    v16.4s, v16.4s, v18.4s
        addp    v20.4s, v20.4s, v22.4s

        // rndnu
        sqshl   v16.4s, v16.4s, v24.4s      // pre-shift (left, saturating)
        sqshl   v20.4s, v20.4s, v24.4s
        sqdmulh v16.4s, v16.4s, v25.4s      // doubling high half of the product, no rounding
        sqdmulh v20.4s, v20.4s, v25.4s
        srshl   v16.4s, v16.4s, v26.4s      // rounding right shift (a negative amount)
        srshl   v20.4s, v20.4s, v26.4s
        sqxtn   v0.4h, v16.4s
        sqxtn2  v0.8h, v20.4s
        add     v0.8h, v0.8h, v27.8h        // the mutation: + output zero point, wrapping (SQADD in the original)
        sqxtn   v0.8b, v0.8h
        smax    v0.8b, v0.8b, v28.8b
        smin    v0.8b, v0.8b, v29.8b

        subs    x1, x1, #8
        b.lo    4f
        st1     {v0.8b}, [x6], x10          // 8 columns, then c += cn_stride
        b.ne    0b
        ret

4:      // The last 1-7 columns: nc - 8 < 0 has nc's low three bits.
        tbz     x1, #2, 5f
        st1     {v0.s}[0], [x6], #4
        ext     v0.8b, v0.8b, v0.8b, #4
5:      tbz     x1, #1, 6f
        st1     {v0.h}[0], [x6], #2
        ext     v0.8b, v0.8b, v0.8b, #2
6:      tbz     x1, #0, 7f
        st1     {v0.b}[0], [x6]
7:      ret
        .size   lowp_mut_qs8_gemm_rndnu_1x8c8_add_zp, . - lowp_mut_qs8_gemm_rndnu_1x8c8_add_zp

        .section .note.GNU-stack, "", %progbits
