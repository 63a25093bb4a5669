/* Kernels of tests/test_reliability.py: what a run must survive without losing a verdict or leaving a process.
   right: exact (OFFSET from offset.h, 0: the tests edit it); spin: loops forever with every signal blocked (only
   SIGKILL ends it: no guard budget, no Ctrl-C); forker: exact, but its first call forks a helper that sleeps holding
   every descriptor it inherited, the result pipe too (its pid is appended to $LOWP_TEST_HELPERS); spawner: forks a
   helper that sleeps (its pid appended there too), then loops as spin does. */
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "offset.h"

static void exact(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, int32_t add) {
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            int32_t s = 0;
            for (int64_t k = 0; k < K; ++k) s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s + add;
        }
}

size_t right_workspace(int64_t M, int64_t N, int64_t K) { return 0; }
void right_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *w) {
    exact(M, N, K, A, B, C, OFFSET);
}

size_t spin_workspace(int64_t M, int64_t N, int64_t K) { return 0; }
void spin_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *w) {
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL);
    for (;;) __asm__ volatile("");
}

static void helper(void) {
    pid_t pid = fork();
    if (pid == 0) {
        sleep(300);
        _exit(0);
    }
    const char *path = getenv("LOWP_TEST_HELPERS");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (f) {
        fprintf(f, "%d\n", (int)pid);
        fclose(f);
    }
}

size_t spawner_workspace(int64_t M, int64_t N, int64_t K) { return 0; }
void spawner_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *w) {
    helper();
    spin_gemm(M, N, K, A, B, C, w);
}

size_t forker_workspace(int64_t M, int64_t N, int64_t K) { return 0; }
void forker_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *w) {
    static int forked;
    if (!forked) {
        forked = 1;
        pid_t pid = fork();
        if (pid == 0) {
            sleep(60);
            _exit(0);
        }
        const char *path = getenv("LOWP_TEST_HELPERS");
        FILE *f = path ? fopen(path, "a") : NULL;
        if (f) {
            fprintf(f, "%d\n", (int)pid);
            fclose(f);
        }
    }
    exact(M, N, K, A, B, C, 0);
}
