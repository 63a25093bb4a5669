/* tests/test_x86_float_models.py: the SSE float instructions of XNNPACK's fp32 requantization, run on arrays by the
 * host CPU (128-bit forms: every x86-64 has them; the models are width-agnostic lane by lane). */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#define UNARY(name, load, op, store)                                              \
  void name(const void *a, void *out, size_t n) {                                 \
    for (size_t i = 0; i + 4 <= n; i += 4) store(op(load(a, i)), out, i);         \
  }
#define BINARY(name, op)                                                          \
  void name(const void *pa, const void *pb, void *pout, size_t n) {                \
    const float *a = pa, *b = pb; float *out = pout;                              \
    for (size_t i = 0; i + 4 <= n; i += 4)                                        \
      _mm_storeu_ps(out + i, op(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i)));     \
  }

static inline __m128i load_i(const void *p, size_t i) { return _mm_loadu_si128((const __m128i *) p + i / 4); }
static inline __m128 load_f(const void *p, size_t i) { return _mm_loadu_ps((const float *) p + i); }
static inline void store_i(__m128i v, void *p, size_t i) { _mm_storeu_si128((__m128i *) p + i / 4, v); }
static inline void store_f(__m128 v, void *p, size_t i) { _mm_storeu_ps((float *) p + i, v); }

UNARY(lowp_cvtdq2ps, load_i, _mm_cvtepi32_ps, store_f)
UNARY(lowp_cvtps2dq, load_f, _mm_cvtps_epi32, store_i)
UNARY(lowp_cvttps2dq, load_f, _mm_cvttps_epi32, store_i)
BINARY(lowp_mulps, _mm_mul_ps)
BINARY(lowp_addps, _mm_add_ps)
BINARY(lowp_subps, _mm_sub_ps)
BINARY(lowp_minps, _mm_min_ps)
