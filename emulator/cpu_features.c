/* CPU feature detection for the native x86 back end: CPUID for the instruction sets and XGETBV for the
 * register state the OS saves (an AVX-512 CPU under an OS that does not save ZMM state cannot run EVEX code).
 * Linux's /proc/cpuinfo is not enough: older kernels do not list avx_vnni or avx_vnni_int8. */
#include <cpuid.h>
#include <stdint.h>

static uint64_t xcr0(void) {
    uint32_t eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
}

/* Bit order must match FEATURE_BITS in native.py. */
uint64_t lowp_cpu_features(void) {
    unsigned a, b, c, d;
    uint64_t f = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int osxsave = (c >> 27) & 1;
    uint64_t x = osxsave ? xcr0() : 0;
    int ymm = (x & 0x6) == 0x6, zmm = (x & 0xe6) == 0xe6;
    f |= (uint64_t)((d >> 23) & 1) << 0;   /* mmx */
    f |= (uint64_t)((d >> 26) & 1) << 1;   /* sse2 */
    f |= (uint64_t)((c >> 9) & 1) << 2;    /* ssse3 */
    f |= (uint64_t)((c >> 19) & 1) << 3;   /* sse4_1 */
    if (__get_cpuid_max(0, 0) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        f |= (uint64_t)(ymm && ((b >> 5) & 1)) << 4;    /* avx2 */
        f |= (uint64_t)(zmm && ((b >> 16) & 1)) << 5;   /* avx512f */
        f |= (uint64_t)(zmm && ((b >> 30) & 1)) << 6;   /* avx512bw */
        f |= (uint64_t)(zmm && ((b >> 31) & 1)) << 7;   /* avx512vl */
        f |= (uint64_t)(zmm && ((c >> 11) & 1)) << 8;   /* avx512_vnni */
        __cpuid_count(7, 1, a, b, c, d);
        f |= (uint64_t)(ymm && ((a >> 4) & 1)) << 9;    /* avx_vnni */
        f |= (uint64_t)(ymm && ((d >> 4) & 1)) << 10;   /* avx_vnni_int8 */
        /* AVX10: CPUID.(7,1):EDX[19], its version in CPUID.(0x24,0):EBX[7:0]; AVX10.2 has 512-bit EVEX. */
        if (((d >> 19) & 1) && __get_cpuid_max(0, 0) >= 0x24) {
            __cpuid_count(0x24, 0, a, b, c, d);
            f |= (uint64_t)(zmm && (b & 0xff) >= 2) << 11;  /* avx10_2 */
        }
    }
    return f;
}
