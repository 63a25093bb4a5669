/* lowp's freestanding runtime for bare AArch64 kernels run under Unicorn: the few libc functions a compiler
   emits calls to even with -ffreestanding (zero-fills, struct copies), and an entry symbol so the linker has
   one. Kernels are called by symbol, never through _start. */
#include "runtime_libc.h"

void _start(void) { __builtin_trap(); }
