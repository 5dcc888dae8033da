/* test_tier_seg_writers.c — the host segment's writer word (tier_seg.h "Writers",
 * issue 12 §4): a writer stopped past its lease can never change a slot that was
 * given to another writer. Real processes: a forked writer claims a slot, writes a
 * chunk and is stopped (SIGSTOP) either between chunks or inside one; another
 * writer (and the tier's own WriteSlots path) then takes the slot, or is kept out;
 * the stopped writer resumes (SIGCONT) and the committed bytes stay exactly the
 * later writer's. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tier.h"
#include "tier_host.h"
#include "tier_seg.h"
#include "tier_seg_int.h"

#define SLOT_SIZE (64u << 10)
#define CAPACITY 4
#define CHUNK (16u << 10)

static char s_name[128];

static tier_t *s_open(void)
{
    static int n;
    snprintf(s_name, sizeof s_name, "/kvt-test-writers-%d-%d", (int)getpid(), n++);
    tier_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.name, sizeof cfg.name, "host0");
    snprintf(cfg.kind, sizeof cfg.kind, "host");
    snprintf(cfg.path, sizeof cfg.path, "%s", s_name);
    cfg.capacity = CAPACITY;
    cfg.slot_size = SLOT_SIZE;
    assert_int_equal(tier_config_set(&cfg, "prefault", "false"), 0);
    char err[256] = "";
    tier_t *t = tier_open(&cfg, err, sizeof err);
    if (!t)
        fail_msg("tier_open: %s", err);
    return t;
}

static tier_seg_t *s_attach(void)
{
    char err[256] = "";
    tier_seg_t *seg = NULL;
    if (tier_seg_attach(s_name, SLOT_SIZE, CAPACITY, &seg, err, sizeof err) != 0)
        fail_msg("attach: %s", err);
    return seg;
}

/* The stale writer, in a child: claims slot 0, writes its first chunk of 0xAA,
 * then (INSIDE: still BUSY, else after releasing) tells the parent through the pipe
 * and stops itself; once resumed it tries every further chunk, as a copy does, and
 * exits 0 when it was refused (ESTALE) before writing anything more, 1 if it wrote. */
static int s_stale_child(int fd, bool inside)
{
    tier_seg_t *seg = s_attach();
    uint8_t *dst = tier_seg_slot(seg, 0);
    uint64_t me = tier_seg_writer_id(1, 100);
    if (tier_seg_claim(seg, 0, me, 100, NULL) != 0)
        return 2;
    memset(dst, 0xAA, CHUNK);
    if (!inside)
        tier_seg_release(seg, 0, me);
    if (write(fd, "c", 1) != 1)
        return 3;
    raise(SIGSTOP);
    if (inside) { /* resumed inside its chunk: it finishes that chunk, then checks */
        memset(dst + CHUNK, 0xAA, CHUNK);
        tier_seg_release(seg, 0, me);
    }
    for (uint32_t off = 2 * CHUNK; off < SLOT_SIZE; off += CHUNK) {
        if (tier_seg_hold(seg, 0, me) < 0)
            return 0;
        memset(dst + off, 0xAA, CHUNK);
        tier_seg_release(seg, 0, me);
    }
    return inside ? 0 : 1;
}

static pid_t s_start_stale(bool inside)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        _exit(s_stale_child(p[1], inside));
    }
    close(p[1]);
    char c;
    assert_int_equal(read(p[0], &c, 1), 1);
    close(p[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, WUNTRACED), pid); /* it is stopped now */
    assert_true(WIFSTOPPED(st));
    return pid;
}

static int s_resume(pid_t pid)
{
    assert_int_equal(kill(pid, SIGCONT), 0);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* The later writer: claims, writes the whole slot with 0x55, commits SERVING. */
static int s_write_all(tier_seg_t *seg, uint8_t byte)
{
    uint64_t me = tier_seg_writer_id(2, 200);
    int rc = tier_seg_claim(seg, 0, me, 100, NULL);
    if (rc < 0)
        return rc;
    uint8_t *dst = tier_seg_slot(seg, 0);
    for (uint32_t off = 0; off < SLOT_SIZE; off += CHUNK) {
        if (off && tier_seg_hold(seg, 0, me) < 0)
            return -ESTALE;
        memset(dst + off, byte, CHUNK);
        tier_seg_release(seg, 0, me);
    }
    struct iovec v = {dst, SLOT_SIZE};
    tier_slot_header_t h = {.state = TIER_SLOT_SERVING, .size = SLOT_SIZE};
    h.checksum = tier_checksum(&v, 1);
    return tier_seg_put_header(seg, 0, &h);
}

static void s_expect_all(tier_seg_t *seg, uint8_t byte)
{
    const uint8_t *p = tier_seg_slot(seg, 0);
    for (uint32_t i = 0; i < SLOT_SIZE; i++)
        if (p[i] != byte)
            fail_msg("byte %u is 0x%02x, want 0x%02x", i, p[i], byte);
}

/* Stopped between chunks past its lease: the slot goes to the next writer, and the
 * resumed writer's next chunk is refused; the later writer's bytes are intact. */
static void test_writer_stopped_between_chunks_loses_the_slot(void **state)
{
    (void)state;
    tier_t *t = s_open();
    tier_seg_t *seg = s_attach();
    pid_t stale = s_start_stale(false);
    assert_int_equal(s_write_all(seg, 0x55), 0);
    assert_int_equal(s_resume(stale), 0);
    s_expect_all(seg, 0x55);
    tier_slot_header_t h;
    assert_int_equal(tier_seg_get_header(seg, 0, &h), 0);
    struct iovec v = {tier_seg_slot(seg, 0), SLOT_SIZE};
    assert_int_equal(h.checksum, tier_checksum(&v, 1));
    tier_seg_detach(&seg);
    tier_close(&t);
}

/* Stopped inside a chunk (BUSY): a later client writer and the tier's own write
 * path are kept out with -EBUSY naming the holder, never interleaved with it; once
 * resumed it finishes that chunk, and its next chunk is refused after another
 * writer took the slot. */
static void test_writer_stopped_inside_a_chunk_keeps_others_out(void **state)
{
    (void)state;
    tier_t *t = s_open();
    tier_seg_t *seg = s_attach();
    pid_t stale = s_start_stale(true);
    uint32_t holder = 0;
    assert_int_equal(tier_seg_claim(seg, 0, tier_seg_writer_id(3, 300), 50, &holder), -EBUSY);
    assert_int_equal(holder, (uint32_t)stale);
    static uint8_t buf[SLOT_SIZE];
    memset(buf, 0x66, sizeof buf);
    struct iovec w = {buf, sizeof buf};
    assert_int_equal(tier_write(t, 0, &w, 1), -EBUSY); /* the tier actor's WriteSlots path */
    kill(stale, SIGCONT);
    int st;
    /* it finishes the chunk and, with nobody claiming, writes on: let it end */
    assert_int_equal(waitpid(stale, &st, 0), stale);
    assert_true(WIFEXITED(st));
    assert_int_equal(s_write_all(seg, 0x55), 0);
    s_expect_all(seg, 0x55);
    tier_seg_detach(&seg);
    tier_close(&t);
}

/* A writer whose process died inside a chunk does not lock the slot forever. */
static void test_dead_writer_inside_a_chunk_is_taken_over(void **state)
{
    (void)state;
    tier_t *t = s_open();
    tier_seg_t *seg = s_attach();
    pid_t stale = s_start_stale(true);
    assert_int_equal(kill(stale, SIGKILL), 0);
    int st;
    assert_int_equal(waitpid(stale, &st, 0), stale);
    assert_int_equal(s_write_all(seg, 0x77), 0);
    s_expect_all(seg, 0x77);
    static uint8_t buf[SLOT_SIZE];
    memset(buf, 0x66, sizeof buf);
    struct iovec w = {buf, sizeof buf};
    assert_int_equal(tier_write(t, 0, &w, 1), 0);
    tier_seg_detach(&seg);
    tier_close(&t);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    tier_t *t = s_open();
    tier_seg_t *seg = s_attach();
    assert_int_equal(tier_seg_claim(seg, 0, 0, 0, NULL), -EINVAL);
    assert_int_equal(tier_seg_claim(seg, 0, TIER_SEG_WRITER_BUSY | 5, 0, NULL), -EINVAL);
    assert_int_equal(tier_seg_claim(seg, CAPACITY, 5, 0, NULL), -ERANGE);
    assert_int_equal(tier_seg_hold(seg, CAPACITY, 5), -ERANGE);
    assert_int_equal(tier_seg_hold(seg, 1, 5), -ESTALE); /* never claimed by 5 */
    uint64_t id = tier_seg_writer_id(0, 0);
    assert_true(id != 0 && !(id & TIER_SEG_WRITER_BUSY));
    assert_int_equal(id & ((1u << TIER_SEG_WRITER_PID_BITS) - 1), (uint64_t)getpid());
    tier_seg_detach(&seg);
    tier_close(&t);
}

/* A header record left busy (odd seqlock: its writer died in the middle of it,
 * or a hostile segment) gives readers -EAGAIN after a bounded wait, every time,
 * and the other slots read as usual; a header write repairs it. fuzz_host found
 * a segment of 64 such records that held a reader for 12 s (10,000 yields each). */
static void test_a_header_left_busy_is_eagain_not_a_hang(void **state)
{
    (void)state;
    tier_t *t = s_open();
    tier_seg_t *seg = s_attach();
    assert_int_equal(s_write_all(seg, 0x5a), 0);
    tier_slot_header_t h;
    assert_int_equal(tier_seg_get_header(seg, 0, &h), 0);
    uint32_t seq = __atomic_load_n(&seg->hdrs[0].seq, __ATOMIC_RELAXED);
    __atomic_store_n(&seg->hdrs[0].seq, seq | 1u, __ATOMIC_RELEASE); /* a writer inside */
    for (int i = 0; i < 3; i++)
        assert_int_equal(tier_seg_get_header(seg, 0, &h), -EAGAIN);
    assert_int_equal(tier_seg_get_header(seg, 1, &h), 0); /* the others read */
    __atomic_store_n(&seg->hdrs[0].seq, (seq | 1u) + 1u, __ATOMIC_RELEASE);
    assert_int_equal(tier_seg_get_header(seg, 0, &h), 0);
    assert_int_equal(h.state, TIER_SLOT_SERVING);
    tier_seg_detach(&seg);
    tier_close(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writer_stopped_between_chunks_loses_the_slot),
        cmocka_unit_test(test_writer_stopped_inside_a_chunk_keeps_others_out),
        cmocka_unit_test(test_dead_writer_inside_a_chunk_is_taken_over),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_a_header_left_busy_is_eagain_not_a_hang),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
