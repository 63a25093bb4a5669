/* lowp's freestanding runtime for x86-64 kernels run under Bochs (lowp.emulator.bochs): the libc functions a
   compiler emits calls to (zero-fills, struct copies), the ones a kernel's error paths reach, and a heap (a kernel
   may allocate, e.g. to cache packed weights between calls, as a loaded library would keep them). There is no OS:
   abort, a failed assert and a smashed stack execute INT3, which lowp reports as a Trap naming the function.
   REP STOSB / MOVSB rather than C loops: GCC at -O2 turns a byte loop back into a call to memset. Every symbol is
   weak: a kernel's own definition wins. */
#include <stddef.h>
#include <stdint.h>

__attribute__((weak)) void *memset(void *dst, int c, size_t n) {
    void *d = dst;
    __asm__ volatile("rep stosb" : "+D"(d), "+c"(n) : "a"(c) : "memory");
    return dst;
}

__attribute__((weak)) void *memcpy(void *restrict dst, const void *restrict src, size_t n) {
    void *d = dst;
    __asm__ volatile("rep movsb" : "+D"(d), "+S"(src), "+c"(n) : : "memory");
    return dst;
}

__attribute__((weak)) void *memmove(void *dst, const void *src, size_t n) {
    if ((uintptr_t)dst - (uintptr_t)src >= n)         /* no overlap that a forward copy would destroy */
        return memcpy(dst, src, n);
    unsigned char *d = (unsigned char *)dst + n - 1;
    const unsigned char *s = (const unsigned char *)src + n - 1;
    __asm__ volatile("std\n\trep movsb\n\tcld" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
    return dst;
}

__attribute__((weak)) int memcmp(const void *a, const void *b, size_t n) {
    const unsigned char *x = a, *y = b;
    for (; n--; x++, y++)
        if (*x != *y) return *x - *y;
    return 0;
}

/* The heap: first fit over a static arena (in .bss: the guest commits its pages only when written), blocks in
   address order, freed neighbours merged. Every pointer handed out has its block's address in the word below it,
   so free() and realloc() work for malloc'd and aligned allocations alike. Static: it persists from call to call,
   and a fresh machine (a new guest process) starts with an empty one. */
#define HEAP_BYTES (32u << 20)
typedef struct block { size_t size; struct block *next; size_t used, pad; } block;   /* 32 bytes, then `size` */
static unsigned char heap[HEAP_BYTES] __attribute__((aligned(64)));
static block *first;

static void *lowp_alloc(size_t align, size_t n) {
    if (!first) {
        first = (block *)heap;
        first->size = HEAP_BYTES - sizeof(block);
        first->next = 0;
        first->used = 0;
    }
    if (align < 16) align = 16;
    if (n > HEAP_BYTES) return 0;
    size_t need = (n + align + sizeof(void *) + 15) & ~(size_t)15;
    for (block *b = first; b; b = b->next) {
        if (b->used || b->size < need) continue;
        if (b->size >= need + sizeof(block) + 64) {              /* split: the rest becomes a free block */
            block *rest = (block *)((unsigned char *)(b + 1) + need);
            rest->size = b->size - need - sizeof(block);
            rest->next = b->next;
            rest->used = 0;
            b->size = need;
            b->next = rest;
        }
        b->used = 1;
        uintptr_t p = ((uintptr_t)(b + 1) + sizeof(void *) + align - 1) & ~(uintptr_t)(align - 1);
        ((block **)p)[-1] = b;
        return (void *)p;
    }
    return 0;
}

__attribute__((weak)) void free(void *p) {
    if (!p) return;
    ((block **)p)[-1]->used = 0;
    for (block *b = first; b && b->next; ) {
        if (!b->used && !b->next->used) {
            b->size += sizeof(block) + b->next->size;
            b->next = b->next->next;
        } else {
            b = b->next;
        }
    }
}

__attribute__((weak)) void *malloc(size_t n) { return lowp_alloc(16, n); }
__attribute__((weak)) void *aligned_alloc(size_t align, size_t n) { return lowp_alloc(align, n); }
__attribute__((weak)) void *memalign(size_t align, size_t n) { return lowp_alloc(align, n); }

__attribute__((weak)) int posix_memalign(void **out, size_t align, size_t n) {
    *out = lowp_alloc(align, n);
    return *out ? 0 : 12;                                        /* ENOMEM */
}

__attribute__((weak)) void *calloc(size_t count, size_t n) {
    if (n && count > (size_t)-1 / n) return 0;
    void *p = lowp_alloc(16, count * n);
    return p ? memset(p, 0, count * n) : 0;
}

__attribute__((weak)) void *realloc(void *p, size_t n) {
    if (!p) return malloc(n);
    block *b = ((block **)p)[-1];
    size_t have = b->size - (size_t)((unsigned char *)p - (unsigned char *)(b + 1));
    void *q = malloc(n);
    if (q) {
        memcpy(q, p, have < n ? have : n);
        free(p);
    }
    return q;
}

__attribute__((weak)) __attribute__((noreturn)) void abort(void) { for (;;) __asm__ volatile("int3"); }

__attribute__((weak)) __attribute__((noreturn)) void __assert_fail(const char *expr, const char *file, unsigned line, const char *fn) {
    (void)expr; (void)file; (void)line; (void)fn;
    for (;;) __asm__ volatile("int3");
}

__attribute__((weak)) __attribute__((noreturn)) void __stack_chk_fail(void) { for (;;) __asm__ volatile("int3"); }

__attribute__((weak)) void _start(void) { for (;;) __asm__ volatile("int3"); }
