/* The 4.6-bit kernels of seed 004 and their like-for-like exact 8-bit baselines: instantiations of gemm_q46.h
 * (same packing, same blocking, same 8x8 micro-kernel; only the step and the element transform differ). */

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

static inline int32_t q46_ld32(const void *p) { int32_t v; memcpy(&v, p, 4); return v; }
#define Q_ACC(op, acc, p) ({ __typeof__(acc) q_t = (acc); __asm__(op " %1, %0, %0" : "+v"(q_t) : "v"(p)); q_t; })
static inline long long q46_ld64(const void *p) { long long v; memcpy(&v, p, 8); return v; }

/* ================================ 256-bit (AVX2) ================================ */
#define V __m256i
#define VW 32
#define ZERO _mm256_setzero_si256
#define LOADU(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define BCAST(p) _mm256_set1_epi32(q46_ld32(p))
#define ADD32 _mm256_add_epi32
#define REDUCE(x) (x)
#define COLSUM(acc, v) _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), v), _mm256_set1_epi16(1)))

/* ---- 4.6-bit, AVX2: VPMADDUBSW(a + shift, b) + VPADDW, widened every `flush` k ---- */
#define NAME(x) lowp_q46_avx2_##x
#define TARGET "avx2"
#define KG 4
#define ES 1
#define PACK_A A_U8_SHIFT
#define ACC16
#define PARAMS
#define STEP(acc, a, b) Q_ACC("vpaddw", acc, _mm256_maddubs_epi16(a, b))
#define WIDEN(h) _mm256_madd_epi16(h, _mm256_set1_epi16(1))
#include "gemm_q46.h"
#undef NAME
#undef KG
#undef ES
#undef PACK_A
#undef ACC16
#undef PARAMS
#undef STEP
#undef WIDEN

/* ---- exact 8-bit, AVX2: int16 operands (VPMOVSXBW at packing), VPMADDWD + VPADDD ---- */
#define NAME(x) lowp_q8_avx2_##x
#define KG 2
#define ES 2
#define PACK_A A_S16
#define STEP(acc, a, b) Q_ACC("vpaddd", acc, _mm256_madd_epi16(a, b))
#include "gemm_q46.h"
#undef NAME
#undef TARGET
#undef KG
#undef ES
#undef PACK_A
#undef STEP
#undef V
#undef VW
#undef ZERO
#undef LOADU
#undef BCAST
#undef ADD32
#undef REDUCE
#undef COLSUM

/* ================================ 512-bit (AVX-512) ================================ */
#define V __m512i
#define VW 64
#define ZERO _mm512_setzero_si512
#define LOADU(p) _mm512_loadu_si512((const void *)(p))
#define BCAST(p) _mm512_set1_epi64(q46_ld64(p))
#define ADD32 _mm512_add_epi32
/* a column's two int32 lanes (2c, 2c+1) summed into lane 2c, then VPMOVQD keeps the low dword of each qword */
#define REDUCE(x) _mm512_cvtepi64_epi32(_mm512_add_epi32(x, _mm512_srli_epi64(x, 32)))
#define COLSUM(acc, v) _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_set1_epi8(1), v), _mm512_set1_epi16(1)))

/* ---- 4.6-bit, AVX-512BW ---- */
#define NAME(x) lowp_q46_avx512bw_##x
#define TARGET "avx512f,avx512bw"
#define KG 8
#define ES 1
#define PACK_A A_U8_SHIFT
#define ACC16
#define PARAMS
#define STEP(acc, a, b) Q_ACC("vpaddw", acc, _mm512_maddubs_epi16(a, b))
#define WIDEN(h) _mm512_madd_epi16(h, _mm512_set1_epi16(1))
#include "gemm_q46.h"
#undef NAME
#undef KG
#undef ES
#undef PACK_A
#undef ACC16
#undef PARAMS
#undef STEP
#undef WIDEN

/* ---- exact 8-bit, AVX-512BW: VPMADDWD + VPADDD ---- */
#define NAME(x) lowp_q8_avx512bw_##x
#define KG 4
#define ES 2
#define PACK_A A_S16
#define STEP(acc, a, b) Q_ACC("vpaddd", acc, _mm512_madd_epi16(a, b))
#include "gemm_q46.h"
#undef NAME
#undef TARGET
#undef KG
#undef ES
#undef PACK_A
#undef STEP

/* ---- exact 8-bit, AVX-512 VNNI: a XOR 0x80 (u8), VPDPBUSD, COMP = -128 * colsum(B) ---- */
#define NAME(x) lowp_q8_avx512vnni_##x
#define TARGET "avx512f,avx512bw,avx512vnni"
#define KG 8
#define ES 1
#define PACK_A A_U8_XOR
#define STEP(acc, a, b) _mm512_dpbusd_epi32(acc, a, b)
#include "gemm_q46.h"
