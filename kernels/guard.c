/* lowp's native guard: the emulator's guarantees for kernels that run on this CPU.
 *
 * lowp_map() gives a buffer its own mapping with an inaccessible guard page on each side, so a kernel that reads or
 * writes one byte past the end (or reaches below the start) faults at once. lowp_call() calls a kernel with up to
 * 16 integer or pointer arguments and turns a fault inside it (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP) or an
 * overrun of its time budget (SIGALRM) into a return value with the evidence: signal, fault address, and every
 * general register at the fault (RIP, and the registers the faulting instruction addressed memory with), so Python
 * can name the buffer, the offset and the instruction. The process goes on: the kernel's frame is abandoned with
 * siglongjmp, which is safe for the leaf computations kernels are (they hold no locks and no heap state of ours).
 *
 * The handlers are installed at every call and the ones they replaced (Python's faulthandler, wasmtime's trap
 * handlers: lowp's wasm executor runs in the same process) are put back when it returns, so a fault or a wasm trap
 * anywhere else is handled as it would have been without lowp. Should one of ours still run outside a call, it
 * restores the default action and returns, so the fault ends the process as usual.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

typedef struct {
    int32_t signo;          /* 0: the call returned */
    int32_t code;           /* si_code */
    uint64_t address;       /* si_addr: the faulting address (SIGSEGV/SIGBUS) or instruction (SIGILL/SIGFPE) */
    int64_t gregs[23];      /* the general registers at the fault, in ucontext's REG_* order (REG_RIP = 16) */
} lowp_fault;

static const int SIGNALS[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGALRM};
#define NSIGNALS (sizeof SIGNALS / sizeof SIGNALS[0])

static sigjmp_buf jump;
static volatile sig_atomic_t in_call;
/* The thread that calls the kernel. The budget timer's SIGALRM is process-directed: the kernel may have
 * blocked it (it then runs until the runner's timeout kills the process), and the kernel may share its process
 * with other threads (a BLAS pool) that do not block it; such a thread hands it on to the caller. */
static volatile pid_t call_tid;
static lowp_fault *fault_out;
static char altstack[1 << 16];   /* the handler must run even when the kernel overflowed its stack */
/* A batch (lowp_call_batch) arms one periodic timer for all its cases: each tick compares the running case's
 * time with its budget, instead of a setitimer per case. 0 outside a batch. */
static volatile int64_t batch_budget_ns;
static volatile int64_t case_started_ns;

/* One-shot breakpoints (INT3) at the instructions of a kernel's claimed path: a hit is counted, the original byte
 * put back and execution resumes at that instruction, so the kernel computes as it would have. Used on a private
 * copy of the kernel's library (the path probe), never on the copy whose results are judged. */
#define MAX_BREAKPOINTS 65536
static uint64_t bp_address[MAX_BREAKPOINTS];
static uint8_t bp_original[MAX_BREAKPOINTS];
static int32_t bp_hits[MAX_BREAKPOINTS];
static int32_t bp_count;

static int writable(uint64_t address, int on) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *start = (void *)(address & ~(uint64_t)(page - 1));
    return mprotect(start, page, PROT_READ | PROT_EXEC | (on ? PROT_WRITE : 0));
}

static int patch(uint64_t address, uint8_t byte) {
    if (writable(address, 1)) return -1;
    *(volatile uint8_t *)address = byte;
    return writable(address, 0);
}

static int breakpoint_at(uint64_t address) {
    for (int32_t i = 0; i < bp_count; ++i)
        if (bp_address[i] == address) return i;
    return -1;
}

static int64_t now_ns(void) {       /* clock_gettime is async-signal-safe */
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int over_budget(void) { return now_ns() - case_started_ns >= batch_budget_ns; }

static void on_signal(int signo, siginfo_t *info, void *context) {
    if (signo == SIGTRAP) {
        ucontext_t *uc = (ucontext_t *)context;
        uint64_t at = (uint64_t)uc->uc_mcontext.gregs[REG_RIP] - 1;     /* INT3 leaves RIP after itself */
        int i = breakpoint_at(at);
        if (i >= 0 && bp_hits[i] == 0) {
            bp_hits[i] = 1;
            patch(at, bp_original[i]);
            uc->uc_mcontext.gregs[REG_RIP] = (greg_t)at;
            return;
        }
    }
    if (in_call && (pid_t)syscall(SYS_gettid) != call_tid) {          /* another thread got it */
        if (signo == SIGALRM) syscall(SYS_tgkill, getpid(), call_tid, SIGALRM);     /* the caller's (if blocked: */
        else signal(signo, SIG_DFL);                /* pending); a fault not the kernel's ends the process */
        return;
    }
    if (signo == SIGALRM && in_call && batch_budget_ns > 0 && !over_budget()) return;   /* a batch's tick */
    if (!in_call) {
        if (signo == SIGALRM) return;               /* a budget timer that fired just after the call: ignore */
        signal(signo, SIG_DFL);                     /* not ours: the fault repeats and ends the process as usual */
        return;
    }
    ucontext_t *uc = (ucontext_t *)context;
    fault_out->signo = signo;
    fault_out->code = info->si_code;
    fault_out->address = (uint64_t)info->si_addr;
    for (int i = 0; i < 23; ++i) fault_out->gregs[i] = uc->uc_mcontext.gregs[i];
    in_call = 0;
    siglongjmp(jump, 1);
}

static struct sigaction replaced[NSIGNALS];     /* what install() replaced, for restore() */

static void install(void) {
    stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_sp = altstack;
    ss.ss_size = sizeof altstack;
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NSIGNALS; ++i) sigaction(SIGNALS[i], &sa, &replaced[i]);
}

/* Puts back the handlers install() replaced; every timer is disarmed by then, so no SIGALRM of ours is left. */
static void restore(void) {
    for (size_t i = 0; i < NSIGNALS; ++i) sigaction(SIGNALS[i], &replaced[i], NULL);
}

static void set_periodic_timer(int64_t microseconds, int64_t interval_us) {
    struct itimerval t;
    memset(&t, 0, sizeof t);
    t.it_value.tv_sec = microseconds / 1000000;
    t.it_value.tv_usec = microseconds % 1000000;
    t.it_interval.tv_sec = interval_us / 1000000;
    t.it_interval.tv_usec = interval_us % 1000000;
    setitimer(ITIMER_REAL, &t, NULL);
}

static void set_timer(int64_t microseconds) { set_periodic_timer(microseconds, 0); }

typedef void (*kernel16)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                         int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);

/* Calls fn(args[0..15]): under the System V x86-64 ABI a callee with fewer integer/pointer parameters reads the
 * ones it has (registers, then stack slots in order) and ignores the rest, so one trampoline serves every
 * prototype made of integers and pointers. budget_us: wall-clock budget (0: none). Returns 0, or 1 with *out. */
int lowp_call(void *fn, const int64_t *args, int64_t budget_us, lowp_fault *out) {
    install();
    memset(out, 0, sizeof *out);
    fault_out = out;
    if (sigsetjmp(jump, 1)) {      /* 1: the signal mask is restored, so the next fault is delivered too */
        set_timer(0);
        restore();
        return 1;
    }
    call_tid = (pid_t)syscall(SYS_gettid);
    if (budget_us > 0) set_timer(budget_us);
    in_call = 1;
    ((kernel16)fn)(args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[7],
                   args[8], args[9], args[10], args[11], args[12], args[13], args[14], args[15]);
    in_call = 0;
    if (budget_us > 0) set_timer(0);
    restore();
    return 0;
}

/* Sets INT3 at each address (the first byte of an instruction); returns how many were set. */
int lowp_breakpoints(const uint64_t *addresses, int32_t n) {
    bp_count = 0;
    for (int32_t i = 0; i < n && i < MAX_BREAKPOINTS; ++i) {
        bp_address[i] = addresses[i];
        bp_original[i] = *(volatile uint8_t *)addresses[i];
        bp_hits[i] = 0;
        if (patch(addresses[i], 0xCC)) break;
        bp_count = i + 1;
    }
    return bp_count;
}

/* Many cases of one shape through one kernel, in the same guarded buffers lowp_call's caller laid out (A, B, C and
 * the workspace each end at a guard page): per case, A and B are copied in from the batch's packed inputs, C and
 * the workspace are filled with their poison (a window into the pool, as executors.poison), the kernel is called,
 * A and B are compared with what was copied in (a kernel that writes its inputs is flagged in inputs_changed), and
 * C is copied out. Canaries are not rewritten between cases, so the caller checks them once, after the batch.
 * The batch stops at the first fault: it returns the index of the faulting case with *out filled (the caller
 * names the buffer and instruction from the same regions, and goes on with the next case in a new call), or -1
 * when every case of [first, first + count) returned. One sigsetjmp and one timer for the whole batch: the timer
 * ticks at a quarter of the budget and the handler stops the case that has run past it. */
typedef struct {
    uint8_t *a, *b, *c, *work;                  /* the guarded buffers */
    size_t a_bytes, b_bytes, c_bytes, work_bytes;
    const uint8_t *a_in, *b_in;                 /* case i's inputs at a_in + i * a_bytes, b_in + i * b_bytes */
    uint8_t *c_out;                             /* case i's C goes to c_out + i * c_bytes */
    const uint8_t *pool;                        /* the poison pool, and each case's window start into it */
    size_t pool_bytes;
    const int64_t *c_poison, *work_poison;
    int32_t *inputs_changed;
    int32_t first, count;
} lowp_batch;

typedef struct {
    uint8_t *at;                                /* the guarded buffer */
    size_t bytes;
    const uint8_t *source;                      /* case i's contents at source + i * bytes */
    uint8_t *written;                           /* writable (else NULL): case i's contents after its calls go to
                                                   written + i * bytes */
} lowp_buffer;

typedef struct {
    lowp_buffer *buffers;
    int32_t nbuffers;
    void *const *fns;                           /* call j: fns[j](args[16 j], ..., args[16 j + 15]) */
    const int64_t *args;
    int32_t ncalls;
    int32_t first, count;
} lowp_invocations;

static void fill_poison(uint8_t *dst, size_t nbytes, const uint8_t *pool, size_t pool_bytes, size_t start) {
    while (nbytes) {                            /* pool[(start + j) % pool_bytes]: np.resize(np.roll(...)) */
        size_t run = pool_bytes - start < nbytes ? pool_bytes - start : nbytes;
        memcpy(dst, pool + start, run);
        dst += run;
        nbytes -= run;
        start = 0;
    }
}

static int32_t batch_case;      /* volatile across siglongjmp: read through this static, not a local */

/* One kernel call of a case: its budget runs from here (the batch's timer compares against it). */
static void call_kernel(void *fn, const int64_t *args) {
    case_started_ns = now_ns();
    call_tid = (pid_t)syscall(SYS_gettid);
    in_call = 1;
    ((kernel16)fn)(args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[7],
                   args[8], args[9], args[10], args[11], args[12], args[13], args[14], args[15]);
    in_call = 0;
}

/* Runs run_case(batch, i) for the cases [first, first + count) under one sigsetjmp and one periodic timer: returns
 * the index of the case that faulted (*out filled), or -1 when every case returned. */
static int32_t run_cases(void (*run_case)(void *, size_t), void *batch, int32_t first, int32_t count,
                         int64_t budget_us, lowp_fault *out) {
    install();
    memset(out, 0, sizeof *out);
    fault_out = out;
    batch_case = first;
    if (sigsetjmp(jump, 1)) {
        set_timer(0);
        batch_budget_ns = 0;
        restore();
        return batch_case;
    }
    if (budget_us > 0) {
        batch_budget_ns = budget_us * 1000;
        int64_t tick = budget_us / 4 > 0 ? budget_us / 4 : 1;
        set_periodic_timer(tick, tick);
    }
    for (; batch_case < first + count; ++batch_case) run_case(batch, (size_t)batch_case);
    if (budget_us > 0) set_timer(0);
    batch_budget_ns = 0;
    restore();
    return -1;
}

typedef struct {
    void *fn;
    const int64_t *args;
    lowp_batch *batch;
} gemm_batch;

static void run_gemm_case(void *context, size_t i) {
    gemm_batch *g = context;
    lowp_batch *batch = g->batch;
    const uint8_t *a_in = batch->a_in + i * batch->a_bytes, *b_in = batch->b_in + i * batch->b_bytes;
    memcpy(batch->a, a_in, batch->a_bytes);
    memcpy(batch->b, b_in, batch->b_bytes);
    fill_poison(batch->c, batch->c_bytes, batch->pool, batch->pool_bytes, (size_t)batch->c_poison[i]);
    fill_poison(batch->work, batch->work_bytes, batch->pool, batch->pool_bytes, (size_t)batch->work_poison[i]);
    call_kernel(g->fn, g->args);
    batch->inputs_changed[i] = memcmp(batch->a, a_in, batch->a_bytes) || memcmp(batch->b, b_in, batch->b_bytes);
    memcpy(batch->c_out + i * batch->c_bytes, batch->c, batch->c_bytes);
}

int lowp_call_batch(void *fn, const int64_t *args, int64_t budget_us, lowp_batch *batch, lowp_fault *out) {
    gemm_batch g = {fn, args, batch};
    return run_cases(run_gemm_case, &g, batch->first, batch->count, budget_us, out);
}

/* Many cases of one invocation layout (lowp.kernels.invocation: the same buffers, of the same sizes, and the same
 * calls with the same arguments: a quantized kernel's, an XNNPACK ukernel's MR rows at a time), in the guarded
 * buffers the caller laid out once: per case every buffer is copied in from that case's bytes (C's poison, the
 * packed weights, the params, the pointer tables are each case's own), the calls are made in order and the
 * writable buffers are copied out. Canaries are checked by the caller after the batch; a fault stops it as in
 * lowp_call_batch. Every buffer is rewritten per case, so a kernel that writes its inputs affects its own case
 * only, as it does one case at a time. */
static void run_invocation_case(void *context, size_t i) {
    lowp_invocations *batch = context;
    for (int32_t b = 0; b < batch->nbuffers; ++b) {
        lowp_buffer *buffer = &batch->buffers[b];
        memcpy(buffer->at, buffer->source + i * buffer->bytes, buffer->bytes);
    }
    for (int32_t j = 0; j < batch->ncalls; ++j) call_kernel(batch->fns[j], batch->args + 16 * (size_t)j);
    for (int32_t b = 0; b < batch->nbuffers; ++b) {
        lowp_buffer *buffer = &batch->buffers[b];
        if (buffer->written) memcpy(buffer->written + i * buffer->bytes, buffer->at, buffer->bytes);
    }
}

int lowp_call_invocations(int64_t budget_us, lowp_invocations *batch, lowp_fault *out) {
    return run_cases(run_invocation_case, batch, batch->first, batch->count, budget_us, out);
}

/* Writes each breakpoint's hit flag to hits[], puts back the bytes of those never hit, and forgets them all. */
int lowp_breakpoint_hits(int32_t *hits) {
    int32_t total = 0;
    for (int32_t i = 0; i < bp_count; ++i) {
        hits[i] = bp_hits[i];
        total += bp_hits[i];
        if (!bp_hits[i]) patch(bp_address[i], bp_original[i]);
    }
    bp_count = 0;
    return total;
}

/* A mapping of `pages` accessible pages between two inaccessible guard pages; returns the first accessible byte. */
void *lowp_map(size_t pages) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *p = mmap(NULL, (pages + 2) * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    if (mprotect(p, page, PROT_NONE) || mprotect(p + (pages + 1) * page, page, PROT_NONE)) {
        munmap(p, (pages + 2) * page);
        return NULL;
    }
    return p + page;
}

void lowp_unmap(void *start, size_t pages) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    munmap((char *)start - page, (pages + 2) * page);
}

/* AMX: Linux hands out the tile data state on request only (Documentation/arch/x86/xstate.rst): arch_prctl
 * ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA (18) before the first tile instruction, else it raises SIGILL.
 * 0 when granted, < 0 why not (the kernel too old, or refused: e.g. a sigaltstack too small for the state). */
int lowp_amx_permission(void) {
    unsigned long granted = 0;
    if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18)) return -1;
    if (syscall(SYS_arch_prctl, 0x1022 /* ARCH_GET_XCOMP_PERM */, &granted)) return -2;
    return (granted >> 18) & 1 ? 0 : -3;
}
