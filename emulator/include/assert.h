/* lowp's freestanding <assert.h> for AArch64 kernels run under Unicorn: a failed assert executes a trap
   instruction (__builtin_trap, BRK on AArch64), which lowp.emulator reports as a Trap fault at that address.
   There is no stderr to print to, so the expression is not printed. No include guard: as C requires
   (C17 7.2), each inclusion redefines assert by the NDEBUG of that point. */
#undef assert
#ifdef NDEBUG
#define assert(expression) ((void)0)
#else
#define assert(expression) ((expression) ? (void)0 : __builtin_trap())
#endif
#if !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && __STDC_VERSION__ < 202311L
#ifndef static_assert
#define static_assert _Static_assert
#endif
#endif
