// A C++ kernel (templates, constexpr, <limits>, <algorithm>, <type_traits>, <cassert>) with extern "C" entry
// symbols: natively it builds with g++ and libstdc++'s headers, for AArch64 with zig c++ and lowp's
// freestanding headers (-fno-exceptions -fno-rtti, no C++ runtime).
#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "bs_cxx.h"

namespace {

// The widest possible product of two A and B values fits the accumulator with room for many terms.
template <class Acc, class T>
constexpr bool roomy() {
    return std::is_signed<Acc>::value && std::numeric_limits<Acc>::digits >= 2 * std::numeric_limits<T>::digits + 16;
}

template <class Acc, class T>
Acc dot(const T *a, const T *b, std::int64_t stride, std::int64_t K) {
    static_assert(std::is_integral<T>::value && roomy<Acc, T>(), "the accumulator must hold K products");
    Acc sum = 0;
    for (std::int64_t k = 0; k < K; ++k)
        sum += static_cast<Acc>(a[k]) * static_cast<Acc>(b[k * stride]);
    return sum;
}

}  // namespace

extern "C" std::size_t bs_cxx_workspace(std::int64_t, std::int64_t, std::int64_t) { return 0; }

extern "C" void bs_cxx_gemm(std::int64_t M, std::int64_t N, std::int64_t K, const void *A, const void *B,
                            std::int32_t *C, void *) {
    assert(M >= 0 && N >= 0 && K >= 0);
    const auto *a = static_cast<const std::int8_t *>(A);
    const auto *b = static_cast<const std::int8_t *>(B);
    for (std::int64_t m0 = 0; m0 < M; m0 += kRowsPerStep) {
        const std::int64_t rows = std::min<std::int64_t>(kRowsPerStep, M - m0);
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t n = 0; n < N; ++n)
                C[(m0 + r) * N + n] = dot<std::int32_t>(a + (m0 + r) * K, b + n, N, K);
    }
}
