/* What KleidiAI's kai/kai_common.h needs of <stdlib.h>: abort(), here a trap (lowp reports it as a Trap fault). */
#ifndef LOWP_KLEIDIAI_STDLIB_H
#define LOWP_KLEIDIAI_STDLIB_H
#include <stddef.h>
#define abort() __builtin_trap()
#endif
