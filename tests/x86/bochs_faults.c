/* Kernels that misbehave on purpose, for the Bochs target's guard pages, budget and fault reporting, and one
   instruction of each SIMD feature the Bochs CPU models claim (tests/test_bochs.py). */
#include <immintrin.h>
#include <stdint.h>
#include <stddef.h>
#include <assert.h>

long sum_off_by_one(const int32_t *x, long n) {         /* reads x[n]: one element past the end */
    long s = 0;
    for (long i = 0; i <= n; i++) s += ((volatile const int32_t *)x)[i];
    return s;
}

void fill_off_by_one(int16_t *y, long n) {              /* writes y[n] */
    for (long i = 0; i <= n; i++) ((volatile int16_t *)y)[i] = (int16_t)i;
}

void write_before_start(int32_t *y) { ((volatile int32_t *)y)[-1] = 7; }

void spin(volatile long *x) { for (;;) *x += 1; }

void jump_to_self(void) { __asm__ volatile("1: jmp 1b"); }

void undefined(void) { __asm__ volatile("ud2"); }

void breakpoint(void) { __asm__ volatile("int3"); }

void aborts(void) { void abort(void); abort(); }

void asserts(int x) { assert(x == 42); }

long divide(long a, long b) { return a / b; }

long recurse(volatile long *x, long n) { x[0] += n; return n + recurse(x, n + 1) + x[0]; }

void call_null(void) { ((void (*)(void))0)(); }

/* An aligned 32-byte load of whatever address it gets. */
__attribute__((target("avx2")))
void aligned_load(const uint8_t *a, uint8_t *out) {
    _mm256_storeu_si256((__m256i *)out, _mm256_load_si256((const __m256i *)a));
}

/* Eight arguments: two go on the stack. */
long eight(long a, long b, long c, long d, long e, long f, long g, long h) {
    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h;
}

/* What the call found in r10 (never set by the ABI): the registers a seed chooses. */
long stray_register(void) {
    long v;
    __asm__ volatile("mov %%r10, %0" : "=r"(v));
    return v;
}

/* n iterations of a 3-instruction loop: 3 n + 2 instructions with the ret. */
__attribute__((naked)) void count_loop(long n) {
    __asm__ volatile("1: dec %rdi\n\tnop\n\tjnz 1b\n\tret");
}

/* One instruction of each feature, on zeroed registers (the result does not matter, the #UD does). */
__attribute__((target("avx2"))) void feature_avx2(void) { __asm__ volatile("vpmaddubsw %ymm1, %ymm2, %ymm0"); }
__attribute__((target("avx512f"))) void feature_avx512f(void) { __asm__ volatile("vpaddd %zmm1, %zmm2, %zmm0"); }
__attribute__((target("avx512bw"))) void feature_avx512bw(void) { __asm__ volatile("vpmaddubsw %zmm1, %zmm2, %zmm0"); }
__attribute__((target("avx512vl"))) void feature_avx512vl(void) { __asm__ volatile("vpaddd %ymm17, %ymm18, %ymm16"); }
__attribute__((target("avx512vnni"))) void feature_avx512_vnni(void) { __asm__ volatile("vpdpbusd %zmm1, %zmm2, %zmm0"); }
__attribute__((target("avx512dq"))) void feature_avx512dq(void) { __asm__ volatile("vpmullq %zmm1, %zmm2, %zmm0"); }
__attribute__((target("avx512cd"))) void feature_avx512cd(void) { __asm__ volatile("vpconflictd %zmm1, %zmm0"); }
__attribute__((target("avx512ifma"))) void feature_avx512ifma(void) { __asm__ volatile("vpmadd52luq %zmm1, %zmm2, %zmm0"); }
__attribute__((target("avx512vbmi"))) void feature_avx512vbmi(void) { __asm__ volatile("vpermb %zmm1, %zmm2, %zmm0"); }
__attribute__((target("avx512vbmi2"))) void feature_avx512_vbmi2(void) { __asm__ volatile("vpshldw $1, %zmm1, %zmm2, %zmm0"); }
__attribute__((target("avx512bitalg"))) void feature_avx512_bitalg(void) { __asm__ volatile("vpopcntb %zmm1, %zmm0"); }
__attribute__((target("avx512vpopcntdq"))) void feature_avx512_vpopcntdq(void) { __asm__ volatile("vpopcntd %zmm1, %zmm0"); }
__attribute__((target("avx512bf16"))) void feature_avx512_bf16(void) { __asm__ volatile("vdpbf16ps %zmm1, %zmm2, %zmm0"); }
__attribute__((target("avx512fp16"))) void feature_avx512_fp16(void) { __asm__ volatile("vaddph %zmm1, %zmm2, %zmm0"); }
__attribute__((target("avxvnni"))) void feature_avx_vnni(void) { __asm__ volatile("{vex} vpdpbusd %ymm1, %ymm2, %ymm0"); }
/* VPDPBSSD ymm0, ymm1, ymm2 (VEX.256.F2.0F38.W0 50 /r), as bytes: GCC 12's assembler predates AVX-VNNI-INT8 */
void feature_avx_vnni_int8(void) { __asm__ volatile(".byte 0xc4, 0xe2, 0x77, 0x50, 0xc2"); }
__attribute__((target("fma"))) void feature_fma(void) { __asm__ volatile("vfmadd231ps %ymm1, %ymm2, %ymm0"); }
__attribute__((target("gfni"))) void feature_gfni(void) { __asm__ volatile("gf2p8mulb %xmm1, %xmm0"); }
__attribute__((target("vaes"))) void feature_vaes(void) { __asm__ volatile("vaesenc %ymm1, %ymm2, %ymm0"); }
__attribute__((target("vpclmulqdq"))) void feature_vpclmulqdq(void) { __asm__ volatile("vpclmulqdq $0, %ymm1, %ymm2, %ymm0"); }
__attribute__((target("bmi2"))) void feature_bmi2(void) { __asm__ volatile("pdep %%rax, %%rbx, %%rcx" ::: "rcx"); }
__attribute__((target("sha"))) void feature_sha_ni(void) { __asm__ volatile("sha256msg1 %xmm1, %xmm0"); }
__attribute__((target("ssse3"))) void feature_ssse3(void) { __asm__ volatile("pmaddubsw %xmm1, %xmm0"); }
__attribute__((target("sse4.1"))) void feature_sse4_1(void) { __asm__ volatile("pmulld %xmm1, %xmm0"); }
__attribute__((target("sse4.2"))) void feature_sse4_2(void) { __asm__ volatile("pcmpgtq %xmm1, %xmm0"); }
__attribute__((target("popcnt"))) void feature_popcnt(void) { __asm__ volatile("popcnt %%rax, %%rcx" ::: "rcx"); }
__attribute__((target("movbe"))) void feature_movbe(void) {
    long x = 0; __asm__ volatile("movbe %0, %%rcx" :: "m"(x) : "rcx"); }
__attribute__((target("aes"))) void feature_aes(void) { __asm__ volatile("aesenc %xmm1, %xmm0"); }
__attribute__((target("pclmul"))) void feature_pclmulqdq(void) { __asm__ volatile("pclmulqdq $0, %xmm1, %xmm0"); }
__attribute__((target("f16c"))) void feature_f16c(void) { __asm__ volatile("vcvtph2ps %xmm1, %ymm0"); }
__attribute__((target("bmi"))) void feature_bmi1(void) { __asm__ volatile("andn %%rax, %%rbx, %%rcx" ::: "rcx"); }
__attribute__((target("lzcnt"))) void feature_abm(void) { __asm__ volatile("lzcnt %%rax, %%rcx" ::: "rcx"); }
__attribute__((target("adx"))) void feature_adx(void) { __asm__ volatile("adcx %%rax, %%rcx" ::: "rcx", "cc"); }
__attribute__((target("avx"))) void feature_avx(void) { __asm__ volatile("vaddps %ymm1, %ymm2, %ymm0"); }

/* The runtime's heap: allocate, touch, free, in a pattern that needs free() to work (64 MiB in all, the heap is
   32), and keep one allocation across calls (static state, as a loaded library keeps it). */
#include <stdlib.h>
#include <string.h>
long heap_churn(long rounds) {
    long sum = 0;
    for (long r = 0; r < rounds; r++) {
        unsigned char *a = malloc(1 << 20), *b = aligned_alloc(4096, 3 << 20);
        if (!a || !b || ((unsigned long)b & 4095)) return -1;
        memset(a, 1, 1 << 20); memset(b, 2, 3 << 20);
        a = realloc(a, 2 << 20);
        sum += a[12345] + b[3 << 19];
        free(a); free(b);
    }
    return sum;
}
static int *kept;
long heap_kept(int value) {
    if (!kept) { kept = calloc(16, sizeof *kept); kept[0] = value; }
    return kept[0];
}
