/* u8s8s32 GEMMs for every x86 dot-product path: instantiations of gemm_u8s8s32.h. */

/* ---- SSSE3: PMADDUBSW + PMADDWD + PADDD (pair-saturating) ---- */
#define NAME(x) lowp_u8s8s32_ssse3_##x
#define TARGET "ssse3"
#define V __m128i
#define VW 16
#define SET1_32 _mm_set1_epi32
#define LOADU(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define STOREU(p, x) _mm_storeu_si128((__m128i *)(void *)(p), x)
#define ADD32 _mm_add_epi32
#define ZERO _mm_setzero_si128
#define DOT(acc, a, b) _mm_add_epi32(acc, _mm_madd_epi16(_mm_maddubs_epi16(a, b), _mm_set1_epi16(1)))
#include "gemm_u8s8s32.h"
#undef NAME
#undef TARGET
#undef V
#undef VW
#undef SET1_32
#undef LOADU
#undef STOREU
#undef ADD32
#undef ZERO
#undef DOT

/* ---- AVX2: VPMADDUBSW + VPMADDWD + VPADDD (pair-saturating) ---- */
#define V __m256i
#define VW 32
#define SET1_32 _mm256_set1_epi32
#define LOADU(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define STOREU(p, x) _mm256_storeu_si256((__m256i *)(void *)(p), x)
#define ADD32 _mm256_add_epi32
#define ZERO _mm256_setzero_si256
#define DOT(acc, a, b) _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1)))
#define NAME(x) lowp_u8s8s32_avx2_##x
#define TARGET "avx2"
#include "gemm_u8s8s32.h"
#undef NAME
#define NAME(x) lowp_s8s8s32_avx2_##x
#define SIGNED_A
#include "gemm_u8s8s32.h"
#undef SIGNED_A
#undef NAME
#undef TARGET
#undef DOT

/* ---- AVX-VNNI (VEX): VPDPBUSD ymm, exact ---- */
#define DOT(acc, a, b) _mm256_dpbusd_avx_epi32(acc, a, b)
#define NAME(x) lowp_u8s8s32_avxvnni_##x
#define TARGET "avx2,avxvnni"
#include "gemm_u8s8s32.h"
#undef NAME
#undef TARGET
#undef DOT
#undef V
#undef VW
#undef SET1_32
#undef LOADU
#undef STOREU
#undef ADD32
#undef ZERO

/* ---- AVX-512BW: VPMADDUBSW + VPMADDWD + VPADDD zmm (pair-saturating) ---- */
#define V __m512i
#define VW 64
#define SET1_32 _mm512_set1_epi32
#define LOADU(p) _mm512_loadu_si512((const void *)(p))
#define STOREU(p, x) _mm512_storeu_si512((void *)(p), x)
#define ADD32 _mm512_add_epi32
#define ZERO _mm512_setzero_si512
#define DOT(acc, a, b) _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(a, b), _mm512_set1_epi16(1)))
#define NAME(x) lowp_u8s8s32_avx512bw_##x
#define TARGET "avx512f,avx512bw"
#include "gemm_u8s8s32.h"
#undef NAME
#undef TARGET
#undef DOT

/* ---- AVX-512 VNNI: VPDPBUSD zmm, exact ---- */
#define DOT(acc, a, b) _mm512_dpbusd_epi32(acc, a, b)
#define NAME(x) lowp_u8s8s32_avx512vnni_##x
#define TARGET "avx512f,avx512bw,avx512vnni"
#include "gemm_u8s8s32.h"
#undef NAME
#define NAME(x) lowp_s8s8s32_avx512vnni_##x
#define SIGNED_A
#include "gemm_u8s8s32.h"
