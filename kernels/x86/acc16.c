/* FBGEMM-style acc16 GEMMs with outlier split: instantiations of gemm_acc16.h for AVX2 and AVX-512BW. */

/* ---- AVX2 ---- */
#define NAME(x) lowp_acc16_avx2_##x
#define TARGET "avx2"
#define V __m256i
#define VW 32
#define SET1_16 _mm256_set1_epi16
#define LOADU(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define STOREU(p, x) _mm256_storeu_si256((__m256i *)(void *)(p), x)
#define ZERO _mm256_setzero_si256
#define ADDS16 _mm256_adds_epi16
#define MADDUBS _mm256_maddubs_epi16
#define ADD32 _mm256_add_epi32
#define WIDEN_LO(x) _mm256_cvtepi16_epi32(_mm256_castsi256_si128(x))
#define WIDEN_HI(x) _mm256_cvtepi16_epi32(_mm256_extracti128_si256(x, 1))
#include "gemm_acc16.h"
#undef NAME
#undef TARGET
#undef V
#undef VW
#undef SET1_16
#undef LOADU
#undef STOREU
#undef ZERO
#undef ADDS16
#undef MADDUBS
#undef ADD32
#undef WIDEN_LO
#undef WIDEN_HI

/* ---- AVX-512BW ---- */
#define NAME(x) lowp_acc16_avx512bw_##x
#define TARGET "avx512f,avx512bw"
#define V __m512i
#define VW 64
#define SET1_16 _mm512_set1_epi16
#define LOADU(p) _mm512_loadu_si512((const void *)(p))
#define STOREU(p, x) _mm512_storeu_si512((void *)(p), x)
#define ZERO _mm512_setzero_si512
#define ADDS16 _mm512_adds_epi16
#define MADDUBS _mm512_maddubs_epi16
#define ADD32 _mm512_add_epi32
#define WIDEN_LO(x) _mm512_cvtepi16_epi32(_mm512_castsi512_si256(x))
#define WIDEN_HI(x) _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(x, 1))
#include "gemm_acc16.h"
