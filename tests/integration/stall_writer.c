/* stall_writer.c — a libkvtier writer that is stopped in the middle of its copy
 * (issue 12 §4: "a writer stopped (SIGSTOP) in the middle of a copy past its lease,
 * then resumed, can never make any reader receive wrong bytes").
 *
 *   kvt_stall_writer COORDINATOR INSTANCE BLOCK_BYTES N KEYHEX_PREFIX READY_FILE
 *
 * Registers INSTANCE (BLOCK_BYTES per block), prepares a put of N keys
 * (KEYHEX_PREFIX, 28 hex digits, then the index in 4 hex digits) and submits their
 * bytes (0xEE: never a key's pattern) from buffers whose second page is PROT_NONE.
 * The library's same-host copy faults on that page; the SIGSEGV handler writes
 * READY_FILE and stops the process (SIGSTOP) right there, in the middle of the
 * memcpy; after SIGCONT it opens the page and the copy goes on where it was.
 * Then it completes the put and prints one line:
 *   stall_writer: job <status> <n_failed>/<n> failed, complete <status>
 * Exit 0 when it ran to the end, 2 on a setup error. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kvtier.h"

static uint8_t *s_guard; /* the PROT_NONE page */
static long s_page;
static const char *s_ready;

static void s_on_segv(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    (void)ctx;
    uint8_t *a = si->si_addr;
    if (!s_guard || a < s_guard || a >= s_guard + s_page)
        _exit(3); /* a real crash */
    int fd = open(s_ready, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0)
        close(fd);
    raise(SIGSTOP);
    mprotect(s_guard, (size_t)s_page, PROT_READ | PROT_WRITE);
    s_guard = NULL; /* returning retries the access, which now succeeds */
}

static int s_hex(const char *h, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(h + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (uint8_t)v;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: %s COORDINATOR INSTANCE BLOCK_BYTES N KEYHEX_PREFIX READY_FILE\n",
                argv[0]);
        return 2;
    }
    const char *instance = argv[2];
    size_t block = strtoull(argv[3], NULL, 10);
    uint32_t n = (uint32_t)strtoul(argv[4], NULL, 10);
    s_ready = argv[6];
    s_page = sysconf(_SC_PAGESIZE);
    if (n == 0 || n > 64 || block < 2 * (size_t)s_page || strlen(argv[5]) != 28) {
        fprintf(stderr, "stall_writer: bad arguments\n");
        return 2;
    }
    kvt_key_t keys[64];
    for (uint32_t i = 0; i < n; i++) {
        char hex[33];
        snprintf(hex, sizeof hex, "%s%04x", argv[5], i);
        if (s_hex(hex, keys[i].b, KVT_KEY_BYTES) < 0)
            return 2;
    }
    size_t len = (block + (size_t)s_page - 1) / (size_t)s_page * (size_t)s_page;
    uint8_t *mem = mmap(NULL, len * n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return 2;
    memset(mem, 0xEE, len * n);
    s_guard = mem + s_page; /* inside block 0 */
    if (mprotect(s_guard, (size_t)s_page, PROT_NONE) < 0)
        return 2;
    struct sigaction sa = {.sa_sigaction = s_on_segv, .sa_flags = SA_SIGINFO};
    sigaction(SIGSEGV, &sa, NULL);

    char err[512] = "";
    kvt_options_t o = {.coordinators = argv[1], .name = "stall-writer", .timeout_ms = 10000};
    kvt_client_t *c = kvt_connect(&o, err, sizeof err);
    if (!c) {
        fprintf(stderr, "stall_writer: %s\n", err);
        return 2;
    }
    /* the kvtier CLI's spec, so the test's CLI puts and gets share the instance */
    kvt_instance_t spec = {.instance_id = instance,
                           .model = "kvtier-demo",
                           .dtype = "u8",
                           .tokens_per_block = 16,
                           .bytes_per_block = block};
    kvt_request_t rq = {.instance_id = instance, .request_id = "stall"};
    kvt_token_t *tok = NULL;
    if (kvt_register_instance(c, &spec) < 0 || kvt_request_begin(c, &rq) < 0 ||
        kvt_prepare_put(c, instance, "stall", keys, n, &tok) < 0 || kvt_token_count(tok) != n) {
        fprintf(stderr, "stall_writer: %s\n", kvt_last_error(c));
        kvt_close(&c);
        return 2;
    }
    const void *bufs[64];
    for (uint32_t i = 0; i < n; i++)
        bufs[i] = mem + (size_t)i * len;
    int rc = kvt_submit_put(c, 1, tok, bufs, block);
    kvt_job_result_t r = {0};
    uint64_t id = 1;
    if (rc == 0)
        rc = kvt_wait(c, &id, 1, 30000, &r);
    if (rc < 0)
        fprintf(stderr, "stall_writer: submit: %s\n", kvt_last_error(c));
    else if (r.status < 0)
        fprintf(stderr, "stall_writer: job: %s\n", kvt_last_error(c));
    int crc = kvt_complete_put(c, &tok, NULL);
    printf("stall_writer: job %s %u/%u failed, complete %s\n", kvt_status_name(r.status),
           r.n_failed, r.n_keys, kvt_status_name(crc));
    if (crc < 0)
        fprintf(stderr, "stall_writer: complete: %s\n", kvt_last_error(c));
    kvt_close(&c);
    munmap(mem, len * n);
    return 0;
}
