/* The architecture-neutral part of lowp's qemu-user guest drivers (lowp.emulator.qemu): the protocol, the buffers
 * between guard pages and their canaries, the signal handler's bookkeeping, the serving loop and main(). It is
 * included at the end of the arch part (qemu_driver.c for AArch64, qemu_driver_riscv64.c for RISC-V 64), which
 * first defines:
 *
 *   NX, ARG_SLOT(i)      the words of x[] in a request and the x[] index of integer argument i < 8
 *   RET_SLOT             the reply word the return value goes to (the slot of the return register)
 *   JUMP_WORDS           the words lowpq_setjmp saves (the callee-saved registers, sp, the return address)
 *   SIGACTION_RESTORER   1 if the kernel's struct sigaction has sa_restorer (AArch64), 0 if not (RISC-V)
 *   lowpq_sys6, lowpq_setjmp, lowpq_longjmp, lowpq_invoke(frame)
 *   lowpq_capture(reply, context)   the pc (reply[4]) and the registers (reply[5...]) from a signal's ucontext
 *   LOWPQ_SETUP          optional: a function main() calls once the signal handlers are installed
 *
 * The protocol (little-endian 64-bit words, byte data padded to 8):
 *   request  op (OP_CALL, OP_HELLO or OP_EXIT), budget_us, count (1: block counts through lowp's TCG plugin),
 *            nargs, fn, x[0..NX-1], v[0..63] (32 registers' first 16 bytes), stack[0..15], per argument slot (24):
 *            kind (0 scalar, 1 buffer, 2 pointer table, 3 buffer placed but not passed), size, after (a scalar's
 *            value is in x[] / stack[]); the same size whatever the op; OP_CALL then each buffer's bytes. A pointer
 *            table's words are (slot << 48) | (offset mod 2^48): the driver replaces each, once every buffer is
 *            mapped, by that slot's base + offset (sign-extended from 48 bits), so the table holds guest addresses
 *            (an IGEMM's indirection buffer); a slot that is no buffer ends the driver (exit 8)
 *   reply    status (0 returned, 1 signal), signo, si_code, si_addr, pc, HEADER - 5 register words (the arch's),
 *            then per buffer: lo, base, hi, first damaged byte below base (index from lo, or -1), first damaged
 *            byte of the allowed over-read (index from its start, or -1), then its bytes
 *   OP_HELLO reply: pid, page size, AT_HWCAP, AT_HWCAP2 (the CPU features qemu's -cpu gives)
 *
 * The Linux system call numbers below are asm-generic's (include/uapi/asm-generic/unistd.h), which AArch64,
 * RISC-V 64 and Hexagon use (Hexagon's 222 is mmap2: the same call for offset 0); an arch part with its own table
 * (32-bit Arm, qemu_driver_arm.c) defines LOWPQ_ARCH_SYSCALLS and the SYS_* names itself.
 *
 * 32-bit guests (Arm, Hexagon): the protocol's words stay 64-bit (a pointer or scalar is a word's low half); what
 * the kernel's ABI lays out is the guest's own: siginfo's si_addr (SIGINFO_ADDR), stack_t, iovec, the signal mask
 * and the auxiliary vector in unsigned long, and a pointer table's entries in 32-bit words of
 * (slot << 27) | (offset mod 2^27) (sign-extended from 27 bits), which the driver replaces in place by 32-bit
 * addresses: the table the kernel is passed is exactly its 4n bytes, between its guard pages and canaries. */
#include <stddef.h>
#include <stdint.h>

#define GUEST64 (UINTPTR_MAX > 0xFFFFFFFFu)
#define SIGINFO_ADDR (GUEST64 ? 16 : 12)      /* si_signo, si_errno, si_code, then the union (pointer-aligned) */

long lowp_read(int fd, void *buf, long n);
long lowp_write(int fd, const void *buf, long n);
void lowp_exit(int code);

enum { OP_EXIT = 0, OP_CALL = 1, OP_HELLO = 2 };
enum { NV = 64, NSTACK = 16, MAX_ARGS = 8 + NSTACK };
#define CANARY 0xA5

#ifndef LOWPQ_ARCH_SYSCALLS
enum { SYS_SIGALTSTACK = 132, SYS_RT_SIGACTION = 134, SYS_RT_SIGPROCMASK = 135, SYS_SETITIMER = 103,
       SYS_GETPID = 172, SYS_MUNMAP = 215, SYS_MMAP = 222, SYS_MPROTECT = 226, SYS_READV = 65, SYS_WRITEV = 66,
       LOWP_COUNTS = 0x10C0DE /* not a Linux call: lowp's qemu plugin (qemu_plugin.c) resets (1) or dumps (2) */ };
#endif

struct frame {
    uint64_t fn, x[NX];
    uint64_t v[NV];
    uint64_t stack[NSTACK];
};

struct buffer {               /* one argument's mapping, kept while its size repeats */
    char *map;                /* the whole mapping: guard page, [lo, hi), guard page */
    uint64_t total;           /* bytes of the whole mapping */
    char *intact_base;        /* the base and size of this slot's buffer if the last call found its canaries */
    uint64_t intact_size;     /* (below the base, the over-read) intact after it; base 0: fill them this call */
};

static struct buffer buffers[MAX_ARGS];
static uint64_t page = 4096;
static uint64_t jump[JUMP_WORDS];
static volatile int armed;
static uint64_t lowpq_hwcap;              /* AT_HWCAP, read once at the start (an arch part may need it) */
static uint64_t reply[HEADER];          /* status, signo, code, addr, pc, the arch's registers */

/* ---- the signal handler ---- */
/* The kernel's siginfo_t: si_signo @0, si_code @8, si_addr after the three ints, aligned to a pointer
 * (SIGINFO_ADDR: @16 on 64-bit, @12 on 32-bit; include/uapi/asm-generic/siginfo.h). The signal mask is 64 bits in
 * unsigned longs. */
struct kernel_sigaction {
    void (*handler)(int, void *, void *);
    unsigned long flags;
#if SIGACTION_RESTORER
    void (*restorer)(void);
#endif
    unsigned long mask[8 / sizeof(unsigned long)];
};
enum { SA_SIGINFO = 4, SA_ONSTACK = 0x08000000, SA_NODEFER = 0x40000000 };
enum { SIGILL = 4, SIGTRAP = 5, SIGBUS = 7, SIGFPE = 8, SIGSEGV = 11, SIGALRM = 14 };
static const int SIGNALS[] = {SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV, SIGALRM};
static char altstack[1 << 16];

static void lowpq_on_signal(int signo, void *info, void *context) {
    if (!armed) {
        if (signo == SIGALRM) return;          /* the budget's timer fired just after the call returned */
        lowp_exit(128 + signo);                /* a fault in the driver itself: the host sees the process die */
    }
    armed = 0;
    reply[0] = 1;
    reply[1] = (uint64_t)signo;
    reply[2] = (uint64_t)*(const int32_t *)((const char *)info + 8);
    reply[3] = (uint64_t)*(const uintptr_t *)((const char *)info + SIGINFO_ADDR);
    lowpq_capture(reply, context);
    lowpq_longjmp(jump, 1);
}

static void lowpq_install(void) {
    struct { void *sp; int flags; unsigned long size; } ss = {altstack, 0, sizeof altstack};
    lowpq_sys6(SYS_SIGALTSTACK, (long)&ss, 0, 0, 0, 0, 0);
    /* SA_NODEFER: the signal stays unblocked after the handler siglongjmps away (the mask is also reset then). */
    struct kernel_sigaction sa = {0};
    sa.handler = lowpq_on_signal;
    sa.flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    for (unsigned i = 0; i < sizeof SIGNALS / sizeof SIGNALS[0]; i++)
        lowpq_sys6(SYS_RT_SIGACTION, SIGNALS[i], (long)&sa, 0, 8, 0, 0);
}

/* it_interval, it_value */
static void lowpq_set_timer(const long *t) {
    lowpq_sys6(SYS_SETITIMER, 0, (long)t, 0, 0, 0, 0);
}

/* ---- I/O: readv/writev over every piece of a request or reply, whatever the pipe's chunking ---- */
struct iovec { void *base; unsigned long len; };
enum { MAX_IOV = 1 + 3 * MAX_ARGS };

static void lowpq_transfer(long nr, int fd, struct iovec *iov, int n) {
    while (n) {
        long done = lowpq_sys6(nr, fd, (long)iov, n, 0, 0, 0);
        if (done <= 0) lowp_exit(done == 0 ? 0 : nr == SYS_READV ? 3 : 4);   /* the host closed the pipe: done */
        while (n && (unsigned long)done >= iov->len) {
            done -= (long)iov->len;
            iov++;
            n--;
        }
        if (n) {
            iov->base = (char *)iov->base + done;
            iov->len -= (unsigned long)done;
        }
    }
}

static void lowpq_read_all(void *buf, uint64_t n) {
    struct iovec v = {buf, n};
    lowpq_transfer(SYS_READV, 0, &v, 1);
}

static void lowpq_write_all(const void *buf, uint64_t n) {
    struct iovec v = {(void *)buf, n};
    lowpq_transfer(SYS_WRITEV, 1, &v, 1);
}

/* m a power of two (the page size): no division, which a 32-bit guest would call compiler-rt for */
static uint64_t up(uint64_t x, uint64_t m) { return (x + m - 1) & ~(m - 1); }

/* ---- buffers ---- */
enum { PROT_NONE = 0, PROT_RW = 3, MAP_PRIVATE_ANONYMOUS = 0x22 };

static char *lowpq_place(int i, uint64_t size) {
    uint64_t total = size + 2 * page;
    struct buffer *b = &buffers[i];
    if (b->map && b->total != total) {
        lowpq_sys6(SYS_MUNMAP, (long)b->map, (long)b->total, 0, 0, 0, 0);
        b->map = 0;
    }
    if (!b->map) {
#if GUEST64
        /* above 4 GiB (a hint): a kernel that truncates a pointer to 32 bits faults */
        long hint = 0x100000000L + (long)i * 0x40000000L;
#else
        long hint = 0;                  /* a 32-bit guest: wherever the kernel puts it */
#endif
        long m = lowpq_sys6(SYS_MMAP, hint, (long)total, PROT_NONE, MAP_PRIVATE_ANONYMOUS, -1, 0);
        if (m < 0 && m > -4096) lowp_exit(5);
        if (lowpq_sys6(SYS_MPROTECT, m + (long)page, (long)size, PROT_RW, 0, 0, 0)) lowp_exit(6);
        b->map = (char *)m;
        b->total = total;
        b->intact_base = 0;             /* a new mapping is zeros: its canaries are to be written */
    }
    return b->map + page;
}

/* The canary areas are up to a page per buffer and every guest instruction is translated code: the areas are
 * written and checked 64 bytes a loop step (the block's words OR-ed, one branch), byte by byte only at the ends
 * and within the first damaged block. */
static const uint64_t CANARY8 = 0x0101010101010101ull * CANARY;

static int64_t lowpq_first_damaged(const unsigned char *p, uint64_t n) {
    uint64_t i = 0;
    for (; i < n && ((uintptr_t)(p + i) & 7); i++)
        if (p[i] != CANARY) return (int64_t)i;
    for (; i + 64 <= n; i += 64) {
        const uint64_t *w = (const uint64_t *)(p + i);
        uint64_t diff = (w[0] ^ CANARY8) | (w[1] ^ CANARY8) | (w[2] ^ CANARY8) | (w[3] ^ CANARY8)
                        | (w[4] ^ CANARY8) | (w[5] ^ CANARY8) | (w[6] ^ CANARY8) | (w[7] ^ CANARY8);
        if (diff) break;
    }
    for (; i + 8 <= n; i += 8)
        if (*(const uint64_t *)(p + i) != CANARY8) break;
    for (; i < n; i++)
        if (p[i] != CANARY) return (int64_t)i;
    return -1;
}

static void lowpq_fill(unsigned char *p, uint64_t n) {
    uint64_t i = 0;
    for (; i < n && ((uintptr_t)(p + i) & 7); i++) p[i] = CANARY;
    for (; i + 64 <= n; i += 64) {
        uint64_t *w = (uint64_t *)(p + i);
        w[0] = w[1] = w[2] = w[3] = w[4] = w[5] = w[6] = w[7] = CANARY8;
    }
    for (; i + 8 <= n; i += 8) *(uint64_t *)(p + i) = CANARY8;
    for (; i < n; i++) p[i] = CANARY;
}

/* A request: fixed-size words, then the buffers' bytes. */
static struct request {
    uint64_t op, budget_us, count, nargs;
    struct frame frame;
    uint64_t args[MAX_ARGS][3];     /* kind (0 scalar, 1 buffer), size, allowed over-read */
} request;

static void lowpq_serve_call(void) {
    static char *lo[MAX_ARGS], *base[MAX_ARGS];
    static uint64_t tails[MAX_ARGS][5], pad;
    static struct iovec iov[MAX_IOV];
    uint64_t nargs = request.nargs;
    if (nargs > MAX_ARGS) lowp_exit(7);
    /* what the last call's check found holds for the next call only: a slot that is no buffer in this call is
       not checked after it, and its mapping (still there) could be written meanwhile */
    for (uint64_t i = nargs; i < MAX_ARGS; i++) buffers[i].intact_base = 0;
    int n = 0;
    for (uint64_t i = 0; i < nargs; i++) {
        uint64_t size = request.args[i][1], after = request.args[i][2], kind = request.args[i][0];
        if (kind == 0) {
            buffers[i].intact_base = 0;
            continue;
        }
        uint64_t mapped = up(size + after ? size + after : 1, page);
        lo[i] = lowpq_place((int)i, mapped);
        base[i] = lo[i] + mapped - after - size;
        struct buffer *b = &buffers[i];       /* (a new mapping has no intact canaries: lowpq_place) */
        int intact = b->intact_base == base[i] && b->intact_size == size;
        b->intact_base = 0;                   /* until this call's check finds them intact */
        if (!intact) {
            /* a batch of one shape skips this: the last call's check found these canaries intact */
            lowpq_fill((unsigned char *)lo[i], (uint64_t)(base[i] - lo[i]));
            lowpq_fill((unsigned char *)base[i] + size, after);
        }
        iov[n++] = (struct iovec){base[i], size};
        if (size % 8) iov[n++] = (struct iovec){&pad, 8 - size % 8};
        uint64_t address = (uint64_t)(uintptr_t)base[i];
        if (kind == 3) continue;
        if (i < 8) request.frame.x[ARG_SLOT(i)] = address; else request.frame.stack[i - 8] = address;
    }
    lowpq_transfer(SYS_READV, 0, iov, n);
    for (uint64_t i = 0; i < nargs; i++) {
        if (request.args[i][0] != 2) continue;
#if GUEST64
        uint64_t *word = (uint64_t *)base[i];
        for (uint64_t j = 0; j < request.args[i][1] / 8; j++) {
            uint64_t slot = word[j] >> 48, offset = word[j] & 0xFFFFFFFFFFFFull;
            if (slot >= nargs || request.args[slot][0] == 0) lowp_exit(8);
            if (offset >> 47) offset |= 0xFFFF000000000000ull;      /* a negative offset */
            word[j] = (uint64_t)base[slot] + offset;
        }
#else
        uint32_t *word = (uint32_t *)base[i];
        for (uint64_t j = 0; j < request.args[i][1] / 4; j++) {
            uint32_t slot = word[j] >> 27, offset = word[j] & 0x7FFFFFFu;
            if (slot >= nargs || request.args[slot][0] == 0) lowp_exit(8);
            if (offset >> 26) offset |= 0xF8000000u;                 /* a negative offset */
            word[j] = (uint32_t)(uintptr_t)base[slot] + offset;
        }
#endif
    }
    for (int i = 0; i < HEADER; i++) reply[i] = 0;
    uint64_t budget_us = request.budget_us, count = request.count;
#if !GUEST64
    /* 32-bit: a 64-bit division is a call into compiler-rt, which qemu's exec log would count as the kernel's;
       a 32-bit division by a constant is a multiplication (the budget is then at most 71 minutes) */
    uint32_t us = budget_us > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)budget_us;
#else
    uint64_t us = budget_us;
#endif
    long timer[4] = {0, 0, (long)(us / 1000000), (long)(us % 1000000)}, off[4] = {0, 0, 0, 0};
    if (count) lowpq_sys6(LOWP_COUNTS, 1, 0, 0, 0, 0, 0);
    if (lowpq_setjmp(jump) == 0) {
        if (budget_us) lowpq_set_timer(timer);
        armed = 1;
        uint64_t ret = lowpq_invoke(&request.frame);
        armed = 0;
        if (budget_us) lowpq_set_timer(off);
        reply[RET_SLOT] = ret;          /* the return register; the others are not reported for a return */
    } else {
        if (budget_us) lowpq_set_timer(off);
        uint64_t empty = 0;
        lowpq_sys6(SYS_RT_SIGPROCMASK, 2 /* SIG_SETMASK */, (long)&empty, 0, 8, 0, 0);
    }
    if (count) lowpq_sys6(LOWP_COUNTS, 2, 0, 0, 0, 0, 0);
    n = 0;
    iov[n++] = (struct iovec){reply, sizeof reply};
    pad = 0;
    for (uint64_t i = 0; i < nargs; i++) {
        uint64_t size = request.args[i][1], after = request.args[i][2];
        if (request.args[i][0] == 0) continue;
        uint64_t *t = tails[i];
        t[0] = (uintptr_t)lo[i];
        t[1] = (uintptr_t)base[i];
        t[2] = (uintptr_t)base[i] + size + after;
        t[3] = (uint64_t)lowpq_first_damaged((unsigned char *)lo[i], (uint64_t)(base[i] - lo[i]));
        t[4] = (uint64_t)lowpq_first_damaged((unsigned char *)base[i] + size, after);
        int intact = t[3] == (uint64_t)-1 && t[4] == (uint64_t)-1;
        buffers[i].intact_base = intact ? base[i] : 0;
        buffers[i].intact_size = size;
        iov[n++] = (struct iovec){t, sizeof tails[i]};
        iov[n++] = (struct iovec){base[i], size};
        if (size % 8) iov[n++] = (struct iovec){&pad, 8 - size % 8};
    }
    lowpq_transfer(SYS_WRITEV, 1, iov, n);
}

/* An entry of the auxiliary vector (after argv's and envp's NULLs; pairs of unsigned longs): AT_PAGESZ 6, AT_HWCAP
   16, AT_HWCAP2 26. */
static uint64_t lowpq_auxv(char **argv, unsigned long type, uint64_t otherwise) {
    char **p = argv;
    while (*p) p++;
    p++;
    while (*p) p++;
    for (unsigned long *aux = (unsigned long *)(p + 1); aux[0]; aux += 2)
        if (aux[0] == type) return aux[1];
    return otherwise;
}

int main(int argc, char **argv) {
    (void)argc;
    page = lowpq_auxv(argv, 6, 4096);
    lowpq_hwcap = lowpq_auxv(argv, 16, 0);
    lowpq_install();
#ifdef LOWPQ_SETUP
    LOWPQ_SETUP();                      /* the arch part's own start-up (Hexagon: where the context keeps the pc) */
#endif
    for (;;) {
        lowpq_read_all(&request, sizeof request);
        uint64_t op = request.op;
        if (op == OP_CALL) {
            lowpq_serve_call();
        } else if (op == OP_HELLO) {
            uint64_t hello[4] = {(uint64_t)lowpq_sys6(SYS_GETPID, 0, 0, 0, 0, 0, 0), page, lowpq_auxv(argv, 16, 0),
                                 lowpq_auxv(argv, 26, 0)};
            lowpq_write_all(hello, sizeof hello);
        } else {
            return op == OP_EXIT ? 0 : 8;
        }
    }
}
