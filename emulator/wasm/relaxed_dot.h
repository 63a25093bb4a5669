/* lowp: the relaxed dot product with one named behaviour, in plain SIMD128, substituted at compile time
 * (-include this file, -DLOWP_RELAXED_DOT_<BEHAVIOUR>) where the engine cannot be asked for that behaviour.
 *
 * i32x4.relaxed_dot_i8x16_i7x16_add_s(a, b, c): lane j = c[j] + sum of a[4j+k] * b[4j+k], k = 0..3, where the
 * spec lets b's lanes be read signed or unsigned (irelaxed_dot_mul, WebAssembly Core Specification 3.0, 4.3.2)
 * and the 16-bit pair sums saturate or not (relaxed-simd proposal Overview.md; spec test relaxed_dot_product.wast
 * accepts -66047, -65535, 65025 and 66049 for a = -128, b = 0x81 four times, c = 1).
 *   SDOT       signed x signed, exact (the deterministic profile; ARM SDOT)
 *   PMADDUBSW  signed x unsigned, each pair sum saturated to int16 (x86 PMADDUBSW + PMADDWD + PADDD)
 *   VPDPBUSD   signed x unsigned, exact (x86 VNNI VPDPBUSD)
 * lowp.isa_models.wasm.simd128.i32x4_relaxed_dot_i8x16_i7x16_add_s models the same three. */
#ifndef LOWP_RELAXED_DOT_H
#define LOWP_RELAXED_DOT_H
#include <wasm_simd128.h>

/* The eight pair sums (products of a signed by b extended as `extend`) of the low and high halves, as int32. */
static inline v128_t lowp_pairs_lo(v128_t a, v128_t b, int b_unsigned) {
  v128_t b16 = b_unsigned ? wasm_u16x8_extend_low_u8x16(b) : wasm_i16x8_extend_low_i8x16(b);
  return wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(a), b16);
}
static inline v128_t lowp_pairs_hi(v128_t a, v128_t b, int b_unsigned) {
  v128_t b16 = b_unsigned ? wasm_u16x8_extend_high_u8x16(b) : wasm_i16x8_extend_high_i8x16(b);
  return wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(a), b16);
}
static inline v128_t lowp_relaxed_dot(v128_t a, v128_t b, v128_t c, int b_unsigned, int saturate) {
  v128_t lo = lowp_pairs_lo(a, b, b_unsigned), hi = lowp_pairs_hi(a, b, b_unsigned);
  if (saturate) {
    const v128_t min16 = wasm_i32x4_splat(-32768), max16 = wasm_i32x4_splat(32767);
    lo = wasm_i32x4_min(wasm_i32x4_max(lo, min16), max16);
    hi = wasm_i32x4_min(wasm_i32x4_max(hi, min16), max16);
  }
  v128_t even = wasm_i32x4_shuffle(lo, hi, 0, 2, 4, 6), odd = wasm_i32x4_shuffle(lo, hi, 1, 3, 5, 7);
  return wasm_i32x4_add(c, wasm_i32x4_add(even, odd));
}

#if defined(LOWP_RELAXED_DOT_SDOT)
#define LOWP_DOT_B_UNSIGNED 0
#define LOWP_DOT_SATURATE 0
#elif defined(LOWP_RELAXED_DOT_PMADDUBSW)
#define LOWP_DOT_B_UNSIGNED 1
#define LOWP_DOT_SATURATE 1
#elif defined(LOWP_RELAXED_DOT_VPDPBUSD)
#define LOWP_DOT_B_UNSIGNED 1
#define LOWP_DOT_SATURATE 0
#else
#error "relaxed_dot.h: define one of LOWP_RELAXED_DOT_SDOT, LOWP_RELAXED_DOT_PMADDUBSW, LOWP_RELAXED_DOT_VPDPBUSD"
#endif

static inline v128_t lowp_relaxed_dot_add(v128_t a, v128_t b, v128_t c) {
  return lowp_relaxed_dot(a, b, c, LOWP_DOT_B_UNSIGNED, LOWP_DOT_SATURATE);
}
#define wasm_i32x4_relaxed_dot_i8x16_i7x16_add lowp_relaxed_dot_add
#endif
