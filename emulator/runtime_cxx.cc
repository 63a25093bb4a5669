// What a freestanding C++ kernel can reference without a C++ runtime (linked in only when a source is C++;
// built with -fno-exceptions -fno-rtti, no libc++/libc++abi). A pure virtual call and a delete expression have
// no meaning under Unicorn (there is no heap): both trap, which lowp.emulator reports as a Trap fault. A class
// with a virtual destructor references operator delete even if nothing is ever deleted, so it must exist.
#include <stddef.h>

extern "C" void __cxa_pure_virtual() { __builtin_trap(); }
void operator delete(void *) noexcept { __builtin_trap(); }
void operator delete(void *, size_t) noexcept { __builtin_trap(); }
void operator delete[](void *) noexcept { __builtin_trap(); }
void operator delete[](void *, size_t) noexcept { __builtin_trap(); }
