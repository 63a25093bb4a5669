/* lowp's freestanding <string.h> for AArch64 kernels: the four functions lowp.emulator's runtime defines
   (emulator/runtime_libc.h), nothing else. */
#ifndef LOWP_STRING_H
#define LOWP_STRING_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
void *memset(void *dst, int c, size_t n);
void *memcpy(void *__restrict dst, const void *__restrict src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
int memcmp(const void *a, const void *b, size_t n);
#ifdef __cplusplus
}
#endif
#endif
