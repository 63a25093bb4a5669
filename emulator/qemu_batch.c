/* lowp's guest batch driver for the intrinsic proofs (lowp.emulator.qemu_batch): one long-lived qemu-user process
 * (qemu-aarch64, qemu-riscv64 or qemu-arm) serves many batches. Architecture-neutral C: it needs only lowp_read/lowp_write
 * (linux_runtime.c, linux_runtime_riscv64.c) and lowp_batch_call, the dispatcher generated with the wrappers.
 *
 * Every wrapper is `void w(buffer 0, ..., buffer k-1, long imm, long n)`: its inputs, then its outputs, each holding
 * n registers back to back. The protocol on stdin/stdout, little-endian 64-bit words:
 *
 *   request  1 (a batch), index (the wrapper's place in the dispatcher), imm, n, inputs i, outputs o,
 *            the byte size of each of the i + o buffers, then the i inputs' bytes back to back
 *   reply    status (0 done, 1 no such wrapper, 2 too many buffers, 3 larger than the arena), and after 0
 *            the o outputs' bytes back to back
 *
 * End of input (or any first word but 1) ends the process; so does a refused request (the rest of it is unread).
 * Outputs start zeroed, so a wrapper that skips an element shows as a disagreement, not as the last batch's value. */
long lowp_read(int fd, void *buf, long n);
long lowp_write(int fd, const void *buf, long n);
int lowp_batch_call(long index, void *const *buffers, long imm, long n);
typedef unsigned long long lowp_word;   /* a protocol word: 64 bits on a 32-bit guest (qemu-arm) too */

#define LOWP_SLOTS 8
#define LOWP_ALIGN 64
#define LOWP_ARENA (64L << 20)          /* lowp.emulator.qemu_batch.ARENA */
enum { BATCH = 1, DONE = 0, NO_WRAPPER = 1, TOO_MANY = 2, TOO_LARGE = 3 };

static unsigned char lowp_arena[LOWP_ARENA] __attribute__((aligned(LOWP_ALIGN)));

static int read_all(void *buf, long n) {
    unsigned char *p = buf;
    while (n > 0) { long got = lowp_read(0, p, n); if (got <= 0) return 0; p += got; n -= got; }
    return 1;
}

static int write_all(const void *buf, long n) {
    const unsigned char *p = buf;
    while (n > 0) { long put = lowp_write(1, p, n); if (put <= 0) return 0; p += put; n -= put; }
    return 1;
}

static int refuse(lowp_word status) { write_all(&status, 8); return (int)status; }

int main(int argc, char **argv) {
    (void)argc; (void)argv;
    for (;;) {
        lowp_word head[6], size[LOWP_SLOTS];
        if (!read_all(head, sizeof head) || head[0] != BATCH) return 0;
        lowp_word inputs = head[4], buffers = head[4] + head[5];
        if (buffers > LOWP_SLOTS || buffers < inputs) return refuse(TOO_MANY);
        if (!read_all(size, 8 * (long)buffers)) return 0;
        void *b[LOWP_SLOTS];
        lowp_word used = 0;
        for (unsigned k = 0; k < LOWP_SLOTS; k++) {
            b[k] = lowp_arena + used;
            if (k < buffers) used += (size[k] + LOWP_ALIGN - 1) / LOWP_ALIGN * LOWP_ALIGN;
            if (used > LOWP_ARENA) return refuse(TOO_LARGE);
        }
        for (unsigned k = 0; k < buffers; k++) {
            if (k < inputs && !read_all(b[k], (long)size[k])) return 0;
            /* word stores (a buffer's room is a multiple of 8); volatile keeps them from becoming a byte-wise
               memset call */
            volatile lowp_word *p = b[k];
            for (lowp_word w = 0; k >= inputs && w < (size[k] + 7) / 8; w++) p[w] = 0;
        }
        lowp_word status = lowp_batch_call((long)head[1], b, (long)head[2], (long)head[3]) ? NO_WRAPPER : DONE;
        if (!write_all(&status, 8)) return 0;
        for (unsigned k = inputs; status == DONE && k < buffers; k++)
            if (!write_all(b[k], (long)size[k])) return 0;
    }
}
