/* test_kvt_transport.c — the data path's choice of transport per token tier
 * (client/kvt_transport.c, the issue "the client's data path chooses a transport
 * through a small ops table"), without a service: a host tier opened in this
 * process owns a real segment, the handle is a bare kvt_client_t. The rule: shm
 * only for a put or a get with the client's host id, a shm name, a segment that
 * attaches with the token's slot size and epoch and is live, and shm not
 * disabled; every other tier goes by frames. A segment is mapped once per
 * (name, epoch) and reused. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus_host.h"
#include "kvt_internal.h"
#include "kvt_transport.h"
#include "tier.h"
#include "tier_seg.h"

#define T_SLOT 8192u
#define T_CAPACITY 8u
#define T_LIVE_OFF 76 /* superblock u32 live (tier_seg.h layout) */

typedef struct {
    tier_t *tier;
    char shm[64];
    uint64_t epoch;
    kvt_client_t c;
    kvti_job_t jobs[1];
    void *xs[KVTI_N_TRANSPORTS];
} t_env_t;

static int setup(void **state)
{
    static t_env_t e;
    memset(&e, 0, sizeof e);
    snprintf(e.shm, sizeof e.shm, "/kvtc-transport-%d", (int)getpid());
    tier_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.name, sizeof cfg.name, "host0");
    snprintf(cfg.kind, sizeof cfg.kind, "host");
    snprintf(cfg.path, sizeof cfg.path, "%s", e.shm);
    cfg.capacity = T_CAPACITY;
    cfg.slot_size = T_SLOT;
    if (tier_config_set(&cfg, "prefault", "false") != 0)
        return -1;
    char err[256];
    e.tier = tier_open(&cfg, err, sizeof err);
    if (!e.tier) {
        fprintf(stderr, "tier_open: %s\n", err);
        return -1;
    }
    tier_seg_t *seg = NULL;
    if (tier_seg_attach(e.shm, T_SLOT, 0, &seg, err, sizeof err) < 0)
        return -1;
    e.epoch = tier_seg_epoch(seg);
    tier_seg_detach(&seg);
    snprintf(e.c.name, sizeof e.c.name, "transport-test");
    bus_host_identity(NULL, e.c.host_id, sizeof e.c.host_id);
    e.c.timeout_ms = 1000;
    for (int x = 0; x < KVTI_N_TRANSPORTS; x++)
        if (!(e.xs[x] = kvti_transports[x]->open(&e.c, e.jobs, 1)))
            return -1;
    *state = &e;
    return 0;
}

static int teardown(void **state)
{
    t_env_t *e = *state;
    for (int x = 0; x < KVTI_N_TRANSPORTS; x++)
        kvti_transports[x]->close(&e->xs[x]);
    tier_close(&e->tier);
    return 0;
}

/* What a token minted for this host's tier says about it. */
static bus_token_tier_t t_tier(const t_env_t *e)
{
    bus_token_tier_t t;
    memset(&t, 0, sizeof t);
    t.tier_id = 1;
    t.slot_size = T_SLOT;
    t.epoch = e->epoch;
    snprintf(t.endpoint, sizeof t.endpoint, "tcp://127.0.0.1:1");
    snprintf(t.shm, sizeof t.shm, "%s", e->shm);
    snprintf(t.host, sizeof t.host, "%s", e->c.host_id);
    return t;
}

/* The name of the transport chosen for t in a new job of this kind; *at gets what
 * its attach gave. */
static const char *t_choose(t_env_t *e, bus_token_kind_t kind, const bus_token_tier_t *t, void **at)
{
    e->jobs[0].kind = kind;
    e->jobs[0].seq++;
    void *dummy;
    int x = kvti_transport_choose(e->xs, &e->c, &e->jobs[0], t, at ? at : &dummy);
    assert_true(x >= 0 && x < KVTI_N_TRANSPORTS);
    return kvti_transports[x]->name;
}

/* Makes the next choice with the token's epoch attach anew: the client checks a
 * segment once per (name, epoch), so a choice with another epoch resets it. */
static void t_fresh(t_env_t *e)
{
    bus_token_tier_t t = t_tier(e);
    t.epoch ^= 0x99;
    assert_string_equal(t_choose(e, BUS_TOKEN_PUT, &t, NULL), "frames");
}

static void t_set_live(const t_env_t *e, uint32_t live)
{
    int fd = shm_open(e->shm, O_RDWR, 0);
    assert_true(fd >= 0);
    uint8_t *p = mmap(NULL, TIER_SEG_SUPER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    assert_true(p != MAP_FAILED);
    memcpy(p + T_LIVE_OFF, &live, sizeof live);
    munmap(p, TIER_SEG_SUPER_SIZE);
}

/* The rule's one yes: same host, shm name, the token's epoch, shm allowed, for
 * both kinds that copy; and the segment is mapped once, not per job. */
static void same_host_segment_with_token_epoch_chooses_shm(void **state)
{
    t_env_t *e = *state;
    t_fresh(e);
    bus_token_tier_t t = t_tier(e);
    void *a1 = NULL, *a2 = NULL;
    assert_string_equal(t_choose(e, BUS_TOKEN_PUT, &t, &a1), "shm");
    assert_non_null(a1);
    assert_string_equal(t_choose(e, BUS_TOKEN_GET, &t, &a2), "shm");
    assert_ptr_equal(a1, a2);
}

/* shm has no prefetch op (the tier actors copy between themselves). */
static void prefetch_goes_by_frames(void **state)
{
    t_env_t *e = *state;
    bus_token_tier_t t = t_tier(e);
    void *at = &at;
    assert_string_equal(t_choose(e, BUS_TOKEN_PREFETCH, &t, &at), "frames");
    assert_null(at);
}

/* kvt_options_t.disable_shm */
static void disabled_shm_goes_by_frames(void **state)
{
    t_env_t *e = *state;
    bus_token_tier_t t = t_tier(e);
    e->c.disable_shm = true;
    const char *put = t_choose(e, BUS_TOKEN_PUT, &t, NULL);
    const char *get = t_choose(e, BUS_TOKEN_GET, &t, NULL);
    e->c.disable_shm = false;
    assert_string_equal(put, "frames");
    assert_string_equal(get, "frames");
    assert_string_equal(t_choose(e, BUS_TOKEN_PUT, &t, NULL), "shm");
}

/* Wave rule "same host": another host id in the token, or none known here. */
static void other_or_unknown_host_goes_by_frames(void **state)
{
    t_env_t *e = *state;
    bus_token_tier_t t = t_tier(e);
    snprintf(t.host, sizeof t.host, "another-host");
    assert_string_equal(t_choose(e, BUS_TOKEN_PUT, &t, NULL), "frames");
    /* issue 9 §3: the same machine (boot id, /dev/shm) under another host name, as a
     * network namespace is: frames, though the segment would attach */
    char other[BUS_HOST_ID_MAX], mine[BUS_HOST_ID_MAX];
    assert_int_equal(bus_host_identity("ns-other", other, sizeof other), 0);
    snprintf(t.host, sizeof t.host, "%s", other);
    assert_string_equal(t_choose(e, BUS_TOKEN_GET, &t, NULL), "frames");
    assert_string_equal(t_choose(e, BUS_TOKEN_PUT, &t, NULL), "frames");
    /* and a client configured with that name uses the segment */
    memcpy(mine, e->c.host_id, sizeof mine);
    snprintf(e->c.host_id, sizeof e->c.host_id, "%s", other);
    const char *same = t_choose(e, BUS_TOKEN_GET, &t, NULL);
    memcpy(e->c.host_id, mine, sizeof mine);
    assert_string_equal(same, "shm");
    t = t_tier(e);
    t.host[0] = '\0';
    assert_string_equal(t_choose(e, BUS_TOKEN_GET, &t, NULL), "frames");
    t = t_tier(e);
    char keep[BUS_HOST_ID_MAX];
    memcpy(keep, e->c.host_id, sizeof keep);
    e->c.host_id[0] = '\0';
    const char *none = t_choose(e, BUS_TOKEN_PUT, &t, NULL);
    memcpy(e->c.host_id, keep, sizeof keep);
    assert_string_equal(none, "frames");
}

/* A tier that names no segment (not a host tier), or one that does not exist. */
static void no_segment_goes_by_frames(void **state)
{
    t_env_t *e = *state;
    bus_token_tier_t t = t_tier(e);
    t.shm[0] = '\0';
    assert_string_equal(t_choose(e, BUS_TOKEN_PUT, &t, NULL), "frames");
    snprintf(t.shm, sizeof t.shm, "/kvtc-transport-none-%d", (int)getpid());
    assert_string_equal(t_choose(e, BUS_TOKEN_PUT, &t, NULL), "frames");
    assert_string_equal(t_choose(e, BUS_TOKEN_GET, &t, NULL), "frames"); /* and stays so */
}

/* A segment other than the token says: another slot size does not attach, and
 * attaching is not tried again for that epoch. */
static void segment_of_other_geometry_goes_by_frames(void **state)
{
    t_env_t *e = *state;
    t_fresh(e);
    bus_token_tier_t t = t_tier(e);
    t.slot_size = 2 * T_SLOT;
    assert_string_equal(t_choose(e, BUS_TOKEN_PUT, &t, NULL), "frames");
    t = t_tier(e);
    assert_string_equal(t_choose(e, BUS_TOKEN_PUT, &t, NULL), "frames");
    t_fresh(e);
    assert_string_equal(t_choose(e, BUS_TOKEN_PUT, &t, NULL), "shm");
}

/* The tier restarted since (or before) the token was minted: the segment's epoch
 * is not the token's. Checked again when the token's epoch changes back. */
static void segment_of_other_epoch_goes_by_frames(void **state)
{
    t_env_t *e = *state;
    bus_token_tier_t t = t_tier(e);
    t.epoch ^= 0x1234;
    assert_string_equal(t_choose(e, BUS_TOKEN_PUT, &t, NULL), "frames");
    assert_string_equal(t_choose(e, BUS_TOKEN_GET, &t, NULL), "frames");
    t = t_tier(e);
    assert_string_equal(t_choose(e, BUS_TOKEN_GET, &t, NULL), "shm");
}

/* tier_seg.h live: a segment its owner has closed is orphaned memory. */
static void segment_not_live_goes_by_frames(void **state)
{
    t_env_t *e = *state;
    t_fresh(e);
    bus_token_tier_t t = t_tier(e);
    t_set_live(e, 0);
    const char *dead = t_choose(e, BUS_TOKEN_PUT, &t, NULL);
    t_set_live(e, 1);
    assert_string_equal(dead, "frames");
    t_fresh(e);
    assert_string_equal(t_choose(e, BUS_TOKEN_PUT, &t, NULL), "shm");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_host_segment_with_token_epoch_chooses_shm),
        cmocka_unit_test(prefetch_goes_by_frames),
        cmocka_unit_test(disabled_shm_goes_by_frames),
        cmocka_unit_test(other_or_unknown_host_goes_by_frames),
        cmocka_unit_test(no_segment_goes_by_frames),
        cmocka_unit_test(segment_of_other_geometry_goes_by_frames),
        cmocka_unit_test(segment_of_other_epoch_goes_by_frames),
        cmocka_unit_test(segment_not_live_goes_by_frames),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
