/* lowp's TCG plugin for qemu-aarch64 (host side, loaded with -plugin): executed-block counts for lowp.emulator.qemu.
 *
 * Every translated block gets a record (its guest address, its instruction count, an execution counter) and an
 * inline ADD_U64 on that counter, so counting costs one add per executed block and no callback. The guest driver
 * asks for a reset before a counted call and a dump after it through a system call qemu does not implement
 * (LOWP_COUNTS, answered with ENOSYS; plugins see every system call): the dump writes the records whose counter
 * is non-zero to the file named by the plugin's `out=` argument as little-endian (address, instructions, count)
 * triples.
 *
 * The plugin API (QEMU 7.2, include/qemu/qemu-plugin.h, API version 1) is declared here by hand, only the calls
 * used: Debian's qemu-user ships the plugin loader but not the header. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
typedef struct qemu_info_t qemu_info_t;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_syscall_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index, int64_t num,
                                              uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5,
                                              uint64_t a6, uint64_t a7, uint64_t a8);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_syscall_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_syscall_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op, void *ptr,
                                              uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

#define LOWP_COUNTS 0x10C0DE     /* the system call number the driver uses (no Linux call has it) */
#define LOWP_COUNTS_ARM 0xC0DE   /* 32-bit Arm's (qemu-arm aborts on numbers above 0xf07ff: ARM private calls) */
#define CHUNK 4096               /* records per allocation: a record's address never changes */

struct record { uint64_t vaddr, insns, count; };
static struct record **chunks;
static size_t nrecords, nchunks;
static char *out_path;

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    if (nrecords == nchunks * CHUNK) {
        chunks = realloc(chunks, (nchunks + 1) * sizeof *chunks);
        chunks[nchunks++] = calloc(CHUNK, sizeof(struct record));
    }
    struct record *r = &chunks[nrecords / CHUNK][nrecords % CHUNK];
    nrecords++;
    r->vaddr = qemu_plugin_tb_vaddr(tb);
    r->insns = qemu_plugin_tb_n_insns(tb);
    r->count = 0;
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &r->count, 1);
}

static void dump(void) {
    int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return;
    struct record buf[256];
    size_t n = 0;
    for (size_t i = 0; i < nrecords; i++) {
        struct record *r = &chunks[i / CHUNK][i % CHUNK];
        if (!r->count) continue;
        buf[n++] = *r;
        if (n == 256) {
            if (write(fd, buf, sizeof buf) < 0) break;
            n = 0;
        }
    }
    if (n && write(fd, buf, n * sizeof buf[0]) < 0) n = 0;
    close(fd);
}

static void on_syscall(qemu_plugin_id_t id, unsigned int vcpu, int64_t num, uint64_t a1, uint64_t a2, uint64_t a3,
                       uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7, uint64_t a8) {
    (void)id; (void)vcpu; (void)a2; (void)a3; (void)a4; (void)a5; (void)a6; (void)a7; (void)a8;
    if (num != LOWP_COUNTS && num != LOWP_COUNTS_ARM) return;
    if (a1 == 1) {
        for (size_t i = 0; i < nrecords; i++) chunks[i / CHUNK][i % CHUNK].count = 0;
    } else if (a1 == 2) {
        dump();
    }
}

__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
    (void)info;
    for (int i = 0; i < argc; i++)
        if (!strncmp(argv[i], "out=", 4)) out_path = strdup(argv[i] + 4);
    if (!out_path) return -1;
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
    return 0;
}
