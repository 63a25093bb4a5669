/* What KleidiAI's kai/kai_common.h needs of <stdio.h> (its KAI_ERROR prints before it aborts), for lowp's libc-free
   AArch64 builds under qemu: there is no stderr, so the print is dropped and the abort (stdlib.h: a trap) remains,
   which lowp reports as a Trap fault at that address. Used only where a KleidiAI kernel is built. */
#ifndef LOWP_KLEIDIAI_STDIO_H
#define LOWP_KLEIDIAI_STDIO_H
typedef struct lowp_file FILE;
#define stdout ((FILE *) 0)
#define stderr ((FILE *) 0)
#define fflush(file) ((void) (file), 0)
#define fprintf(file, ...) ((void) (file), 0)
#endif
