/* kvt_handover_worker.c — the data-role process of test_kvt_handover.c (issue 11
 * §3): its own libkvtier handle connected to the test's scheduler, it reads an
 * exported token on stdin, imports it, runs its jobs and writes the exported
 * result on stdout. Blocks carry a pattern both processes compute (s_byte), so a
 * get checks here that the bytes are the ones the other process stored.
 *
 *   kvt_handover_worker ENDPOINT MODE DISABLE_SHM SEED BLOCK SEGMENTS
 *     put       one whole-block put job            get       one whole-block get
 *     put-segs  a layer-wise put in two jobs       get-segs  layer-wise, last half first
 *     refuse    complete is refused, release works (no result written)
 *     die       submits the put, then exits 3 without collecting or exporting
 * Exit 0 on success; 1 with a message on stderr. It registers no instance: the
 * layer-wise modes run on the segments the exported token carries. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvtier.h"

static int s_fail(kvt_client_t *c, const char *what)
{
    fprintf(stderr, "kvt_handover_worker: %s: %s\n", what, c ? kvt_last_error(c) : "");
    return 1;
}

static uint8_t s_byte(uint32_t seed, uint32_t key, size_t j)
{
    return (uint8_t)(seed * 13u + key * 31u + (uint32_t)j * 7u + 1u);
}

static uint8_t *s_read_all(size_t *len)
{
    size_t cap = 4096, n = 0;
    uint8_t *b = malloc(cap);
    for (ssize_t r; b && (r = read(0, b + n, cap - n)) > 0;) {
        n += (size_t)r;
        if (n == cap)
            b = realloc(b, cap *= 2);
    }
    *len = n;
    return b;
}

static int s_wait(kvt_client_t *c, uint64_t job, uint32_t n)
{
    kvt_job_result_t r;
    if (kvt_wait(c, &job, 1, 10000, &r) != 0)
        return s_fail(c, "wait");
    if (r.status != 0 || r.n_failed != 0 || r.n_keys != n) {
        fprintf(stderr,
                "kvt_handover_worker: job %" PRIu64 ": status %d, %u of %u keys failed: %s\n", job,
                r.status, r.n_failed, r.n_keys, kvt_last_error(c));
        return 1;
    }
    /* reported exactly once: nothing more to collect */
    uint32_t more = 1;
    kvt_job_result_t extra;
    if (kvt_get_finished(c, &extra, 1, &more) != 0 || more != 0) {
        fprintf(stderr, "kvt_handover_worker: job %" PRIu64 " reported again\n", job);
        return 1;
    }
    return 0;
}

/* Segment pointers of keys [0, n), segments [first, first + count), into blocks. */
static void s_seg_ptrs(uint8_t **blocks, uint32_t n, uint32_t first, uint32_t count, uint64_t seg,
                       void **ptrs)
{
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t s = 0; s < count; s++)
            ptrs[(size_t)i * count + s] = blocks[i] + (size_t)(first + s) * seg;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr,
                "usage: kvt_handover_worker ENDPOINT MODE DISABLE_SHM SEED BLOCK SEGMENTS\n");
        return 2;
    }
    const char *mode = argv[2];
    uint32_t seed = (uint32_t)strtoul(argv[4], NULL, 10);
    char err[512];
    kvt_options_t o = {.coordinators = argv[1],
                       .name = "worker",
                       .timeout_ms = 5000,
                       .disable_shm = strcmp(argv[3], "1") == 0};
    kvt_client_t *c = kvt_connect(&o, err, sizeof err);
    if (!c) {
        fprintf(stderr, "kvt_handover_worker: connect: %s\n", err);
        return 1;
    }
    size_t len = 0;
    uint8_t *bytes = s_read_all(&len);
    kvt_token_t *tok = NULL;
    if (!bytes || kvt_token_import(c, bytes, len, &tok) != 0)
        return s_fail(c, "import");
    free(bytes);
    if (strcmp(mode, "refuse") == 0) {
        if (kvt_complete_put(c, &tok, NULL) != -KVT_INVALID_ARGUMENT || !tok ||
            !strstr(kvt_last_error(c), "imported"))
            return s_fail(c, "complete of an imported token was not refused");
        if (kvt_token_release(c, &tok) != 0 || tok)
            return s_fail(c, "release");
        kvt_close(&c);
        return 0;
    }
    uint32_t n = kvt_token_count(tok);
    /* the instance's block layout, as an engine's worker knows its own KV cache */
    size_t block = (size_t)strtoul(argv[5], NULL, 10);
    uint32_t segs = (uint32_t)strtoul(argv[6], NULL, 10);
    uint8_t **blocks = calloc(n ? n : 1, sizeof *blocks);
    for (uint32_t i = 0; i < n; i++) {
        blocks[i] = malloc(block);
        for (size_t j = 0; j < block; j++)
            blocks[i][j] =
                strncmp(mode, "put", 3) == 0 || strcmp(mode, "die") == 0 ? s_byte(seed, i, j) : 0;
    }
    int rc = 0;
    uint64_t seg = segs ? block / segs : block;
    void **ptrs = calloc((size_t)(n ? n : 1) * segs, sizeof *ptrs);
    if (strcmp(mode, "die") == 0) {
        if (kvt_submit_put(c, 1, tok, (const void *const *)blocks, block) != 0)
            return s_fail(c, "submit_put");
        _exit(3); /* no collect, no result, no release: the process is gone */
    }
    if (strcmp(mode, "put") == 0) {
        if (kvt_submit_put(c, 1, tok, (const void *const *)blocks, block) != 0)
            return s_fail(c, "submit_put");
        rc = s_wait(c, 1, n);
    } else if (strcmp(mode, "get") == 0) {
        if (kvt_submit_get(c, 1, tok, (void *const *)blocks, block) != 0)
            return s_fail(c, "submit_get");
        rc = s_wait(c, 1, n);
    } else if (strcmp(mode, "put-segs") == 0) {
        uint32_t half = segs / 2;
        s_seg_ptrs(blocks, n, 0, half, seg, ptrs);
        if (kvt_submit_put_segments(c, 1, tok, 0, half, (const void *const *)ptrs) != 0)
            return s_fail(c, "submit_put_segments (first half)");
        rc = s_wait(c, 1, n);
        s_seg_ptrs(blocks, n, half, segs - half, seg, ptrs);
        if (rc == 0 &&
            kvt_submit_put_segments(c, 2, tok, half, segs - half, (const void *const *)ptrs) != 0)
            return s_fail(c, "submit_put_segments (second half)");
        if (rc == 0)
            rc = s_wait(c, 2, n);
    } else if (strcmp(mode, "get-segs") == 0) {
        uint32_t half = segs / 2;
        s_seg_ptrs(blocks, n, half, segs - half, seg, ptrs); /* the last layers first */
        if (kvt_submit_get_segments(c, 1, tok, half, segs - half, ptrs) != 0)
            return s_fail(c, "submit_get_segments (second half)");
        rc = s_wait(c, 1, n);
        s_seg_ptrs(blocks, n, 0, half, seg, ptrs);
        if (rc == 0 && kvt_submit_get_segments(c, 2, tok, 0, half, ptrs) != 0)
            return s_fail(c, "submit_get_segments (first half)");
        if (rc == 0)
            rc = s_wait(c, 2, n);
    } else {
        fprintf(stderr, "kvt_handover_worker: unknown mode %s\n", mode);
        return 2;
    }
    if (rc == 0 && strncmp(mode, "get", 3) == 0)
        for (uint32_t i = 0; i < n && rc == 0; i++)
            for (size_t j = 0; j < block; j++)
                if (blocks[i][j] != s_byte(seed, i, j)) {
                    fprintf(stderr, "kvt_handover_worker: key %u byte %zu is %u, stored %u\n", i, j,
                            blocks[i][j], s_byte(seed, i, j));
                    rc = 1;
                    break;
                }
    if (rc != 0)
        return rc;
    size_t need = 0;
    if (kvt_token_result_export(c, tok, NULL, 0, &need) != 0 || need == 0)
        return s_fail(c, "result size");
    uint8_t *out = malloc(need);
    if (kvt_token_result_export(c, tok, out, need, &len) != 0 || len != need)
        return s_fail(c, "result export");
    if (kvt_token_release(c, &tok) != 0)
        return s_fail(c, "release");
    for (size_t w = 0; w < len;) {
        ssize_t r = write(1, out + w, len - w);
        if (r <= 0)
            return s_fail(NULL, "write");
        w += (size_t)r;
    }
    for (uint32_t i = 0; i < n; i++)
        free(blocks[i]);
    free(blocks);
    free(ptrs);
    free(out);
    kvt_close(&c);
    return 0;
}
