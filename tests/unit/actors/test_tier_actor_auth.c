/* test_tier_actor_auth.c — the tier plane opens only with a sealed token (issue 12
 * §1, docs/SECURITY.md): two real host tier actors with the cluster secret over
 * real ZeroMQ sockets, tokens minted with the scheduler's codec and seal. Each
 * hostile request (no token with epoch 0, a forged MAC, another cluster or
 * secret, a get token for a write, other slots, another tier epoch, an expired
 * token, an older leader, a CopySlots naming its own destination) is refused with
 * its status, and the stored block reads back unchanged; a granted copy goes to
 * the destination the token names and lands byte-exact. Probe and Inventory take
 * no token. A new leader's fence (an empty DeleteSlots under its admin token)
 * shuts out every mutation of an older leader; refusals are counted by reason. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus_client.h"
#include "bus_token_mac.h"
#include "tier_actor.h"
#include "tier_checksum.h"

#define SLOT (64u * 1024u)
#define CAP 8u
#define T_MS 10000u
#define CLUSTER "auth-test"

#define ST_OK kvtier_StatusCode_STATUS_OK
#define ST_DENIED kvtier_StatusCode_STATUS_PERMISSION_DENIED
#define ST_EXPIRED kvtier_StatusCode_STATUS_EXPIRED
#define ST_UNAVAILABLE kvtier_StatusCode_STATUS_UNAVAILABLE

static const uint8_t s_secret[BUS_SECRET_BYTES] = "tier-auth-test-secret-32-bytes!";
static const uint8_t s_other_secret[BUS_SECRET_BYTES] = "another-clusters-secret-32-byte";
static int s_seq;

typedef struct {
    zactor_t *actor;
    bus_client_t *client;
    char ep[TIER_ACTOR_ENDPOINT_MAX];
    uint32_t id;
    uint64_t epoch;
} t_tier_t;

typedef struct {
    t_tier_t src, dst;
    uint8_t bytes[SLOT], other[SLOT];
    uint8_t key[16];
    uint64_t sum;
} fx_t;

/* What a test token is made of; t_mint turns it into a payload. */
typedef struct {
    bus_token_kind_t kind;
    const t_tier_t *tier;    /* entries are on it (copy: the destination) */
    const t_tier_t *src;     /* copy: the source */
    uint64_t epoch_override; /* UINT64_MAX: the tier's own */
    uint64_t slot, src_slot;
    uint32_t size;
    int64_t expiry_delta_ms; /* from now */
    uint64_t leader_epoch;
    const uint8_t *secret; /* NULL: not sealed */
    const char *cluster;
} t_grant_t;

static t_grant_t t_grant(bus_token_kind_t kind, const t_tier_t *tier, uint64_t slot)
{
    return (t_grant_t){.kind = kind,
                       .tier = tier,
                       .epoch_override = UINT64_MAX,
                       .slot = slot,
                       .size = SLOT,
                       .expiry_delta_ms = 60000,
                       .leader_epoch = 5,
                       .secret = s_secret,
                       .cluster = CLUSTER};
}

static uint64_t t_wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000u + (uint64_t)tv.tv_usec / 1000u;
}

static void t_token_tier(const t_tier_t *t, uint64_t epoch, bus_token_tier_t *out)
{
    memset(out, 0, sizeof *out);
    out->tier_id = t->id;
    out->slot_size = SLOT;
    out->epoch = epoch == UINT64_MAX ? t->epoch : epoch;
    snprintf(out->endpoint, sizeof out->endpoint, "%s", t->ep);
}

static uint32_t t_mint(const t_grant_t *g, uint8_t *buf, size_t cap)
{
    bus_token_tier_t tt[2];
    uint32_t nt = 0;
    bus_token_entry_t e = {
        .tier = 0, .src_tier = BUS_TOKEN_NO_TIER, .size = g->size, .slot = g->slot};
    if (g->src) {
        t_token_tier(g->src, UINT64_MAX, &tt[nt++]);
        e.src_tier = 0;
        e.tier = 1;
        e.src_slot = g->src_slot;
    }
    t_token_tier(g->tier, g->epoch_override, &tt[nt++]);
    bus_token_meta_t meta = {.issuer = 77,
                             .leader_epoch = g->leader_epoch,
                             .expiry_ms = (uint64_t)((int64_t)t_wall_ms() + g->expiry_delta_ms)};
    size_t len = 0;
    assert_int_equal(bus_token_encode(g->kind, &meta, tt, nt, &e, 1, buf, cap, &len), 0);
    if (g->secret) {
        bus_token_key_t key;
        assert_int_equal(bus_token_key_derive(g->secret, g->cluster, &key), 0);
        assert_int_equal(bus_token_seal(&key, buf, cap, &len), 0);
    }
    return (uint32_t)len;
}

/* ---- fixture ---- */

static void t_tier_start(t_tier_t *t, uint32_t id)
{
    tier_actor_config_t c;
    memset(&c, 0, sizeof c);
    int seq = s_seq++;
    snprintf(c.tier.name, sizeof c.tier.name, "auth%d", seq);
    snprintf(c.tier.kind, sizeof c.tier.kind, "host");
    snprintf(c.tier.path, sizeof c.tier.path, "/kvt-auth-%d-%d", (int)getpid(), seq);
    c.tier.capacity = CAP;
    c.tier.slot_size = SLOT;
    c.tier_id = id;
    c.endpoint = "tcp://127.0.0.1:*";
    c.secret = s_secret;
    c.cluster = CLUSTER;
    t->id = id;
    t->actor = tier_actor_new(&c);
    assert_non_null(t->actor);
    assert_int_equal(tier_actor_endpoint(t->actor, t->ep, sizeof t->ep), 0);
    t->epoch = tier_actor_epoch(t->actor);
    assert_true(t->epoch != 0);
    bus_client_config_t cc = {.name = "test", .default_timeout_ms = T_MS};
    t->client = bus_client_new(t->ep, &cc);
    assert_non_null(t->client);
}

static void t_tier_stop(t_tier_t *t)
{
    bus_client_destroy(&t->client);
    zactor_destroy(&t->actor);
}

static int t_call(t_tier_t *t, kvtier_Envelope *req, bus_arrays_t *arr, const bus_payload_t *pl,
                  uint32_t npl, kvtier_Envelope *rep, bus_arrays_t *rarr, zmsg_t **payload,
                  kvtier_Status *st)
{
    memset(rep, 0, sizeof *rep);
    int rc = bus_client_call(t->client, req, arr, pl, npl, T_MS, rep, rarr, payload, st);
    return rc < 0 ? (int)st->code : 0;
}

static bus_blob_t t_blob(uint8_t *tok, uint32_t len)
{
    return (bus_blob_t){.data = tok, .len = len, .cap = len};
}

/* WriteSlots of one block; returns the status code. */
static int t_write(t_tier_t *t, uint64_t slot, const uint8_t *bytes, uint64_t size, uint8_t *tok,
                   uint32_t tok_len, uint64_t epoch, kvtier_Status *st)
{
    static kvtier_Envelope req, rep;
    uint64_t slots[1] = {slot}, sizes[1] = {size};
    bus_payload_t pl = {(void *)bytes, size, NULL, NULL};
    bus_env_init(&req, kvtier_Envelope_write_slots_req_tag, "test");
    req.body.write_slots_req.tier_id = t->id;
    req.body.write_slots_req.epoch = epoch;
    bus_arrays_t arr = {
        .slots = {slots, 1, 1}, .sizes = {sizes, 1, 1}, .payload = t_blob(tok, tok_len)};
    int code = t_call(t, &req, &arr, &pl, 1, &rep, NULL, NULL, st);
    if (code != ST_OK)
        assert_int_equal(rep.body.write_slots_rep.written, 0);
    return code;
}

static int t_put(t_tier_t *t, uint64_t slot, const uint8_t key[16], uint64_t size, uint64_t sum,
                 uint8_t *tok, uint32_t tok_len, kvtier_Status *st)
{
    static kvtier_Envelope req, rep;
    uint64_t slots[1] = {slot}, sizes[1] = {size}, sums[1] = {sum};
    uint8_t keys[1][16];
    memcpy(keys[0], key, 16);
    bus_env_init(&req, kvtier_Envelope_put_header_req_tag, "test");
    kvtier_PutHeaderRequest *p = &req.body.put_header_req;
    p->tier_id = t->id;
    snprintf(p->instance_id, sizeof p->instance_id, "inst");
    p->state = kvtier_LocationState_LOCATION_SERVING;
    bus_arrays_t arr = {.slots = {slots, 1, 1},
                        .keys = {keys, 1, 1},
                        .sizes = {sizes, 1, 1},
                        .checksums = {sums, 1, 1},
                        .payload = t_blob(tok, tok_len)};
    return t_call(t, &req, &arr, NULL, 0, &rep, NULL, NULL, st);
}

/* ReadSlots of one slot with a get token minted here; the bytes into out. */
static int t_read(t_tier_t *t, uint64_t slot, uint8_t *tok, uint32_t tok_len, uint8_t *out,
                  size_t *out_len, kvtier_Status *st)
{
    static kvtier_Envelope req, rep;
    uint64_t slots[1] = {slot}, rsz[4];
    bus_env_init(&req, kvtier_Envelope_read_slots_req_tag, "test");
    req.body.read_slots_req.tier_id = t->id;
    bus_arrays_t arr = {.slots = {slots, 1, 1}, .payload = t_blob(tok, tok_len)};
    bus_arrays_t rarr = {.sizes = {rsz, 0, 4}};
    zmsg_t *pl = NULL;
    int code = t_call(t, &req, &arr, NULL, 0, &rep, &rarr, &pl, st);
    if (code == ST_OK) {
        assert_non_null(pl);
        zframe_t *f = zmsg_first(pl);
        *out_len = zframe_size(f);
        memcpy(out, zframe_data(f), zframe_size(f));
    }
    zmsg_destroy(&pl);
    return code;
}

/* The block at slot of t reads back as `want` (a valid get token). */
static void t_expect(t_tier_t *t, uint64_t slot, const uint8_t *want)
{
    static uint8_t got[SLOT];
    uint8_t tok[1024];
    t_grant_t g = t_grant(BUS_TOKEN_GET, t, slot);
    uint32_t n = t_mint(&g, tok, sizeof tok);
    size_t len = 0;
    kvtier_Status st;
    int code = t_read(t, slot, tok, n, got, &len, &st);
    if (code != ST_OK)
        fail_msg("read back slot %" PRIu64 ": %s", slot, st.message);
    assert_int_equal(len, SLOT);
    assert_memory_equal(got, want, SLOT);
}

/* Stores fx->bytes at slot 1 of the source the way a client and the scheduler do. */
static void t_store(fx_t *fx, t_tier_t *t, uint64_t slot)
{
    uint8_t tok[1024];
    kvtier_Status st;
    t_grant_t g = t_grant(BUS_TOKEN_PUT, t, slot);
    uint32_t n = t_mint(&g, tok, sizeof tok);
    assert_int_equal(t_write(t, slot, fx->bytes, SLOT, tok, n, 0, &st), ST_OK);
    g = t_grant(BUS_TOKEN_ADMIN, t, slot);
    n = t_mint(&g, tok, sizeof tok);
    if (t_put(t, slot, fx->key, SLOT, fx->sum, tok, n, &st) != ST_OK)
        fail_msg("put header: %s", st.message);
    t_expect(t, slot, fx->bytes);
}

static int setup(void **state)
{
    fx_t *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    for (size_t i = 0; i < SLOT; i++) {
        fx->bytes[i] = (uint8_t)(i * 31u + 7u);
        fx->other[i] = (uint8_t)~fx->bytes[i];
    }
    memset(fx->key, 0xA5, sizeof fx->key);
    struct iovec iov = {fx->bytes, SLOT};
    fx->sum = tier_checksum(&iov, 1);
    t_tier_start(&fx->src, 1);
    t_tier_start(&fx->dst, 2);
    t_store(fx, &fx->src, 1);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fx_t *fx = *state;
    t_tier_stop(&fx->src);
    t_tier_stop(&fx->dst);
    free(fx);
    return 0;
}

/* A write with the grant g over slot 1 of the source is refused with `code`, and
 * the stored block is unchanged. */
static void t_write_refused(fx_t *fx, const t_grant_t *g, int code, const char *needle)
{
    uint8_t tok[1024];
    kvtier_Status st;
    uint32_t n = t_mint(g, tok, sizeof tok);
    int got = t_write(&fx->src, 1, fx->other, SLOT, tok, n, 0, &st);
    if (got != code)
        fail_msg("expected status %d, got %d: %s", code, got, st.message);
    if (needle && !strstr(st.message, needle))
        fail_msg("message \"%s\" does not say \"%s\"", st.message, needle);
    t_expect(&fx->src, 1, fx->bytes);
}

/* ---- tests ---- */

/* Issue 12: "a token-less WriteSlots with epoch 0 ... overwrites any block". */
static void test_tokenless_write_with_epoch_0_is_refused(void **state)
{
    fx_t *fx = *state;
    kvtier_Status st;
    assert_int_equal(t_write(&fx->src, 1, fx->other, SLOT, NULL, 0, 0, &st), ST_DENIED);
    assert_non_null(strstr(st.message, "without a token"));
    t_expect(&fx->src, 1, fx->bytes);
    /* the right epoch in the request's own field grants nothing either */
    assert_int_equal(t_write(&fx->src, 1, fx->other, SLOT, NULL, 0, fx->src.epoch, &st), ST_DENIED);
    t_expect(&fx->src, 1, fx->bytes);
}

static void test_forged_or_altered_mac_is_refused(void **state)
{
    fx_t *fx = *state;
    uint8_t tok[1024];
    kvtier_Status st;
    t_grant_t g = t_grant(BUS_TOKEN_PUT, &fx->src, 1);
    uint32_t n = t_mint(&g, tok, sizeof tok);
    tok[n - 1] ^= 1; /* the MAC's last byte */
    assert_int_equal(t_write(&fx->src, 1, fx->other, SLOT, tok, n, 0, &st), ST_DENIED);
    assert_non_null(strstr(st.message, "MAC does not verify"));
    n = t_mint(&g, tok, sizeof tok);
    tok[BUS_TOKEN_HEADER_BYTES - 10] ^= 1; /* expiry_ms, under the MAC */
    assert_int_equal(t_write(&fx->src, 1, fx->other, SLOT, tok, n, 0, &st), ST_DENIED);
    t_grant_t none = g;
    none.secret = NULL; /* MAC none: what a coordinator without the secret mints */
    t_write_refused(fx, &none, ST_DENIED, "no MAC");
    t_expect(&fx->src, 1, fx->bytes);
}

static void test_token_of_another_cluster_or_secret_is_refused(void **state)
{
    fx_t *fx = *state;
    t_grant_t g = t_grant(BUS_TOKEN_PUT, &fx->src, 1);
    g.cluster = "another-cluster";
    t_write_refused(fx, &g, ST_DENIED, "another cluster");
    g = t_grant(BUS_TOKEN_PUT, &fx->src, 1);
    g.secret = s_other_secret;
    t_write_refused(fx, &g, ST_DENIED, "MAC does not verify");
}

static void test_get_token_does_not_grant_a_write(void **state)
{
    fx_t *fx = *state;
    t_grant_t g = t_grant(BUS_TOKEN_GET, &fx->src, 1);
    t_write_refused(fx, &g, ST_DENIED, "a get token does not grant it");
    g = t_grant(BUS_TOKEN_PREFETCH, &fx->src, 1);
    g.src = &fx->dst;
    t_write_refused(fx, &g, ST_DENIED, "prefetch token");
    /* and a put token does not read */
    uint8_t tok[1024], out[16];
    size_t len = 0;
    kvtier_Status st;
    g = t_grant(BUS_TOKEN_PUT, &fx->src, 1);
    uint32_t n = t_mint(&g, tok, sizeof tok);
    assert_int_equal(t_read(&fx->src, 1, tok, n, out, &len, &st), ST_DENIED);
}

static void test_token_for_other_slots_or_a_smaller_size_is_refused(void **state)
{
    fx_t *fx = *state;
    t_grant_t g = t_grant(BUS_TOKEN_PUT, &fx->src, 2);
    t_write_refused(fx, &g, ST_DENIED, "does not grant it");
    g = t_grant(BUS_TOKEN_PUT, &fx->src, 1);
    g.size = SLOT / 2;
    t_write_refused(fx, &g, ST_DENIED, "grants at most");
    /* a token for the same slot of another tier */
    g = t_grant(BUS_TOKEN_PUT, &fx->dst, 1);
    t_write_refused(fx, &g, ST_DENIED, "grants nothing on tier id 1");
}

static void test_token_for_another_tier_epoch_is_refused(void **state)
{
    fx_t *fx = *state;
    t_grant_t g = t_grant(BUS_TOKEN_PUT, &fx->src, 1);
    g.epoch_override = fx->src.epoch + 1;
    t_write_refused(fx, &g, ST_UNAVAILABLE, "restarted");
    g.epoch_override = 0; /* "epoch 0 means any" no more */
    t_write_refused(fx, &g, ST_DENIED, "epoch 0");
}

static void test_expired_token_is_refused(void **state)
{
    fx_t *fx = *state;
    t_grant_t g = t_grant(BUS_TOKEN_PUT, &fx->src, 1);
    g.expiry_delta_ms = -(int64_t)(TIER_ACTOR_DEFAULT_CLOCK_SKEW_MS + 1000);
    t_write_refused(fx, &g, ST_EXPIRED, "expired");
}

/* The keep-highest rule (issue 9's fencing): once a newer leader's token was
 * seen, an older leader's grants nothing. */
static void test_token_of_an_older_leader_is_refused(void **state)
{
    fx_t *fx = *state;
    t_grant_t g = t_grant(BUS_TOKEN_GET, &fx->src, 1);
    g.leader_epoch = 9;
    uint8_t tok[1024], out[SLOT];
    size_t len = 0;
    kvtier_Status st;
    uint32_t n = t_mint(&g, tok, sizeof tok);
    assert_int_equal(t_read(&fx->src, 1, tok, n, out, &len, &st), ST_OK);
    g = t_grant(BUS_TOKEN_PUT, &fx->src, 1);
    g.leader_epoch = 8;
    uint32_t m = t_mint(&g, tok, sizeof tok);
    assert_int_equal(t_write(&fx->src, 1, fx->other, SLOT, tok, m, 0, &st), ST_DENIED);
    assert_non_null(strstr(st.message, "newer leader"));
    g = t_grant(BUS_TOKEN_GET, &fx->src, 1);
    g.leader_epoch = 9;
    n = t_mint(&g, tok, sizeof tok);
    assert_int_equal(t_read(&fx->src, 1, tok, n, out, &len, &st), ST_OK);
    assert_memory_equal(out, fx->bytes, SLOT); /* the refused write changed nothing */
}

/* CopySlots: issue 12's "names its destination endpoint itself". */
static int t_copy(fx_t *fx, const char *dst_ep, uint8_t *tok, uint32_t n, uint64_t dst_slot,
                  bool *ok, kvtier_Status *st)
{
    static kvtier_Envelope req, rep;
    uint64_t slots[1] = {1}, dsts[1] = {dst_slot};
    uint8_t keys[1][16];
    bool mask[1] = {false};
    memcpy(keys[0], fx->key, 16);
    bus_env_init(&req, kvtier_Envelope_copy_slots_req_tag, "test");
    kvtier_CopySlotsRequest *c = &req.body.copy_slots_req;
    c->tier_id = fx->src.id;
    c->dst_tier_id = fx->dst.id;
    snprintf(c->dst_endpoint, sizeof c->dst_endpoint, "%s", dst_ep);
    c->dst_state = kvtier_LocationState_LOCATION_SERVING;
    bus_arrays_t arr = {.slots = {slots, 1, 1},
                        .dst_slots = {dsts, 1, 1},
                        .keys = {keys, 1, 1},
                        .payload = t_blob(tok, n)};
    bus_arrays_t rarr = {.mask = {mask, 0, 1}};
    int code = t_call(&fx->src, &req, &arr, NULL, 0, &rep, &rarr, NULL, st);
    *ok = rarr.mask.n == 1 && mask[0];
    return code;
}

/* DeleteSlots of n slots (n = 0: the new leader's fence) under tok. */
static int t_delete(t_tier_t *t, const uint64_t *slots, uint32_t n, uint8_t *tok, uint32_t tok_len,
                    uint32_t *deleted, kvtier_Status *st)
{
    static kvtier_Envelope req, rep;
    bus_env_init(&req, kvtier_Envelope_delete_slots_req_tag, "test");
    req.body.delete_slots_req.tier_id = t->id;
    bus_arrays_t arr = {.slots = {(uint64_t *)slots, n, n}, .payload = t_blob(tok, tok_len)};
    int code = t_call(t, &req, &arr, NULL, 0, &rep, NULL, NULL, st);
    *deleted = rep.body.delete_slots_rep.deleted;
    return code;
}

/* An admin token with no entries (what sched_tiers.c's s_raise_fence mints). */
static uint32_t t_mint_fence(const t_tier_t *t, uint64_t leader_epoch, uint8_t *buf, size_t cap)
{
    bus_token_tier_t tt;
    t_token_tier(t, UINT64_MAX, &tt);
    bus_token_meta_t meta = {
        .issuer = 78, .leader_epoch = leader_epoch, .expiry_ms = t_wall_ms() + 60000};
    size_t len = 0;
    assert_int_equal(bus_token_encode(BUS_TOKEN_ADMIN, &meta, &tt, 1, NULL, 0, buf, cap, &len), 0);
    bus_token_key_t key;
    assert_int_equal(bus_token_key_derive(s_secret, CLUSTER, &key), 0);
    assert_int_equal(bus_token_seal(&key, buf, cap, &len), 0);
    return (uint32_t)len;
}

static tier_actor_stats_t t_stats(t_tier_t *t)
{
    tier_actor_stats_t s;
    assert_int_equal(tier_actor_stats(t->actor, &s), 0);
    return s;
}

/* Issue 9 §2: a new leader raises the fence with an empty DeleteSlots before it
 * sends the tier anything else; from then on every mutation a deposed leader's
 * token allows (WriteSlots, PutHeader, DeleteSlots, CopySlots) is refused with
 * PERMISSION_DENIED "... fenced", counted under reason old_leader, and the block
 * is untouched — though the new leader has granted nothing on it yet. */
static void test_fence_refuses_every_mutation_of_a_deposed_leader(void **state)
{
    fx_t *fx = *state;
    uint8_t tok[1024];
    kvtier_Status st;
    uint32_t deleted = 99;
    tier_actor_stats_t before = t_stats(&fx->src);
    assert_int_equal(before.leader_seen, 5); /* the setup's tokens */
    uint32_t n = t_mint_fence(&fx->src, 9, tok, sizeof tok);
    assert_int_equal(t_delete(&fx->src, NULL, 0, tok, n, &deleted, &st), ST_OK);
    assert_int_equal(deleted, 0);
    assert_int_equal(t_stats(&fx->src).leader_seen, 9);

    /* the deposed leader (epoch 5) resumes */
    t_grant_t g = t_grant(BUS_TOKEN_PUT, &fx->src, 1);
    n = t_mint(&g, tok, sizeof tok);
    assert_int_equal(t_write(&fx->src, 1, fx->other, SLOT, tok, n, 0, &st), ST_DENIED);
    assert_non_null(strstr(st.message, "WriteSlots fenced"));
    g = t_grant(BUS_TOKEN_ADMIN, &fx->src, 1);
    n = t_mint(&g, tok, sizeof tok);
    uint8_t key2[16];
    memset(key2, 0x5A, sizeof key2);
    assert_int_equal(t_put(&fx->src, 1, key2, SLOT, fx->sum, tok, n, &st), ST_DENIED);
    assert_non_null(strstr(st.message, "PutHeader fenced"));
    uint64_t one[1] = {1};
    assert_int_equal(t_delete(&fx->src, one, 1, tok, n, &deleted, &st), ST_DENIED);
    assert_non_null(strstr(st.message, "DeleteSlots fenced"));
    assert_int_equal(deleted, 0);
    g = t_grant(BUS_TOKEN_COPY, &fx->dst, 2);
    g.src = &fx->src;
    g.src_slot = 1;
    n = t_mint(&g, tok, sizeof tok);
    bool ok = true;
    assert_int_equal(t_copy(fx, fx->dst.ep, tok, n, 2, &ok, &st), ST_DENIED);
    assert_non_null(strstr(st.message, "CopySlots fenced"));
    assert_false(ok);
    /* and its own fence (an older epoch) lowers nothing */
    n = t_mint_fence(&fx->src, 5, tok, sizeof tok);
    assert_int_equal(t_delete(&fx->src, NULL, 0, tok, n, &deleted, &st), ST_DENIED);

    tier_actor_stats_t after = t_stats(&fx->src);
    assert_int_equal(after.leader_seen, 9);
    assert_int_equal(
        after.refusals[TIER_REFUSAL_OLD_LEADER] - before.refusals[TIER_REFUSAL_OLD_LEADER], 5);
    assert_int_equal(after.tokens_refused - before.tokens_refused, 5);
    assert_int_equal(after.slots_deleted, before.slots_deleted);
    assert_int_equal(after.headers_put, before.headers_put);
    assert_int_equal(t_stats(&fx->dst).slots_written, 0);
    g = t_grant(BUS_TOKEN_GET, &fx->src, 1);
    g.leader_epoch = 9;
    n = t_mint(&g, tok, sizeof tok);
    uint8_t out[SLOT];
    size_t len = 0;
    assert_int_equal(t_read(&fx->src, 1, tok, n, out, &len, &st), ST_OK);
    assert_memory_equal(out, fx->bytes, SLOT); /* same bytes, same header */
}

/* kvtier_tier_actor_token_refusals_total{reason}: each refusal under its own. */
static void test_refusals_are_counted_by_reason(void **state)
{
    fx_t *fx = *state;
    tier_actor_stats_t before = t_stats(&fx->src);
    t_grant_t g = t_grant(BUS_TOKEN_PUT, &fx->src, 1);
    g.secret = NULL;
    t_write_refused(fx, &g, ST_DENIED, "no MAC");
    g = t_grant(BUS_TOKEN_GET, &fx->src, 1);
    t_write_refused(fx, &g, ST_DENIED, "does not grant");
    g = t_grant(BUS_TOKEN_PUT, &fx->src, 1);
    g.expiry_delta_ms = -(int64_t)(TIER_ACTOR_DEFAULT_CLOCK_SKEW_MS + 1000);
    t_write_refused(fx, &g, ST_EXPIRED, "expired");
    g = t_grant(BUS_TOKEN_PUT, &fx->src, 3);
    t_write_refused(fx, &g, ST_DENIED, "does not grant it");
    g = t_grant(BUS_TOKEN_PUT, &fx->src, 1);
    g.epoch_override = fx->src.epoch + 1;
    t_write_refused(fx, &g, ST_UNAVAILABLE, "restarted");
    kvtier_Status st;
    assert_int_equal(t_write(&fx->src, 1, fx->other, SLOT, NULL, 0, 0, &st), ST_DENIED);
    tier_actor_stats_t after = t_stats(&fx->src);
    static const uint32_t want[TIER_REFUSAL_COUNT] = {
        [TIER_REFUSAL_MISSING] = 1, [TIER_REFUSAL_MAC] = 1,   [TIER_REFUSAL_KIND] = 1,
        [TIER_REFUSAL_EXPIRED] = 1, [TIER_REFUSAL_GRANT] = 1, [TIER_REFUSAL_TIER] = 1,
    };
    uint64_t sum = 0;
    for (uint32_t r = 0; r < TIER_REFUSAL_COUNT; r++) {
        uint64_t d = after.refusals[r] - before.refusals[r];
        if (d != want[r])
            fail_msg("reason %s: %" PRIu64 " refusals, expected %u", tier_refusal_name(r), d,
                     want[r]);
        sum += d;
    }
    assert_int_equal(after.tokens_refused - before.tokens_refused, sum);
    assert_string_equal(tier_refusal_name(TIER_REFUSAL_OLD_LEADER), "old_leader");
}

static void test_copy_goes_only_where_the_token_says(void **state)
{
    fx_t *fx = *state;
    /* an attacker's listener: a copy must never reach it */
    zsock_t *trap = zsock_new(ZMQ_ROUTER);
    assert_non_null(trap);
    int port = zsock_bind(trap, "tcp://127.0.0.1:*");
    assert_true(port > 0);
    char trap_ep[64];
    snprintf(trap_ep, sizeof trap_ep, "tcp://127.0.0.1:%d", port);
    uint8_t tok[1024];
    kvtier_Status st;
    bool ok = false;
    assert_int_equal(t_copy(fx, trap_ep, NULL, 0, 3, &ok, &st), ST_DENIED);
    t_grant_t g = t_grant(BUS_TOKEN_COPY, &fx->dst, 3);
    g.src = &fx->src;
    g.src_slot = 1;
    uint32_t n = t_mint(&g, tok, sizeof tok);
    assert_int_equal(t_copy(fx, trap_ep, tok, n, 3, &ok, &st), ST_DENIED);
    assert_non_null(strstr(st.message, "goes only where the token says"));
    assert_false(ok);
    /* a copy to a slot pair the token does not name */
    assert_int_equal(t_copy(fx, "", tok, n, 4, &ok, &st), ST_DENIED);
    /* a put token does not copy */
    t_grant_t p = t_grant(BUS_TOKEN_PUT, &fx->src, 1);
    uint32_t pn = t_mint(&p, tok, sizeof tok);
    assert_int_equal(t_copy(fx, "", tok, pn, 3, &ok, &st), ST_DENIED);
    zpoller_t *poller = zpoller_new(trap, NULL);
    assert_null(zpoller_wait(poller, 200)); /* nothing ever arrived there */
    zpoller_destroy(&poller);
    zsock_destroy(&trap);
    /* the granted copy: to the destination of the token, byte-exact there */
    n = t_mint(&g, tok, sizeof tok);
    if (t_copy(fx, "", tok, n, 3, &ok, &st) != ST_OK)
        fail_msg("granted copy: %s", st.message);
    assert_true(ok);
    t_expect(&fx->dst, 3, fx->bytes);
    t_expect(&fx->src, 1, fx->bytes);
}

/* A token of many entries in no order (what a prepare of a long prompt gives one
 * tier): every slot it lists is granted, in any order, and one it does not is not. */
static void test_a_long_token_grants_exactly_its_slots(void **state)
{
    fx_t *fx = *state;
    enum { N = 200 };
    static bus_token_entry_t e[N];
    static uint8_t tok[BUS_TOKEN_MAX_BYTES(1, N)];
    bus_token_tier_t tt;
    t_token_tier(&fx->src, UINT64_MAX, &tt);
    for (uint32_t i = 0; i < N; i++) /* slots 7, 5, 3, 1, ... of CAP, repeated */
        e[i] = (bus_token_entry_t){.tier = 0,
                                   .src_tier = BUS_TOKEN_NO_TIER,
                                   .size = SLOT,
                                   .slot = (uint64_t)(CAP - 1 - (i * 2) % CAP) % CAP};
    e[N / 2].slot = 6; /* the one even slot */
    bus_token_meta_t meta = {.leader_epoch = 5, .expiry_ms = t_wall_ms() + 60000};
    size_t len = 0;
    bus_token_key_t key;
    assert_int_equal(bus_token_key_derive(s_secret, CLUSTER, &key), 0);
    assert_int_equal(bus_token_encode(BUS_TOKEN_PUT, &meta, &tt, 1, e, N, tok, sizeof tok, &len),
                     0);
    assert_int_equal(bus_token_seal(&key, tok, sizeof tok, &len), 0);
    kvtier_Status st;
    static const uint64_t granted[] = {7, 1, 6, 3, 5};
    for (size_t i = 0; i < sizeof granted / sizeof granted[0]; i++)
        if (t_write(&fx->src, granted[i], fx->other, SLOT, tok, (uint32_t)len, 0, &st) != ST_OK)
            fail_msg("slot %" PRIu64 ": %s", granted[i], st.message);
    assert_int_equal(t_write(&fx->src, 2, fx->other, SLOT, tok, (uint32_t)len, 0, &st), ST_DENIED);
    assert_int_equal(t_write(&fx->src, 0, fx->other, SLOT, tok, (uint32_t)len, 0, &st), ST_DENIED);
}

/* A get+put token (a combined window) reads only its get part and writes only
 * its put part: slot 1 (a pinned hit) reads and is refused a write, slot 3 (a
 * reserved miss) is written and refused a read; the stored block is unchanged. */
static void test_get_put_token_reads_its_hits_and_writes_its_misses(void **state)
{
    fx_t *fx = *state;
    bus_token_tier_t tt;
    t_token_tier(&fx->src, UINT64_MAX, &tt);
    bus_token_entry_t e[2] = {{.tier = 0, .src_tier = BUS_TOKEN_NO_TIER, .size = SLOT, .slot = 1},
                              {.tier = 0, .src_tier = BUS_TOKEN_NO_TIER, .size = SLOT, .slot = 3}};
    bus_token_meta_t meta = {.leader_epoch = 5, .n_get = 1, .expiry_ms = t_wall_ms() + 60000};
    uint8_t tok[1024];
    size_t len = 0;
    bus_token_key_t key;
    assert_int_equal(bus_token_key_derive(s_secret, CLUSTER, &key), 0);
    assert_int_equal(
        bus_token_encode(BUS_TOKEN_GET_PUT, &meta, &tt, 1, e, 2, tok, sizeof tok, &len), 0);
    assert_int_equal(bus_token_seal(&key, tok, sizeof tok, &len), 0);
    static uint8_t got[SLOT];
    size_t got_len = 0;
    kvtier_Status st;
    assert_int_equal(t_read(&fx->src, 1, tok, (uint32_t)len, got, &got_len, &st), ST_OK);
    assert_memory_equal(got, fx->bytes, SLOT);
    assert_int_equal(t_write(&fx->src, 1, fx->other, SLOT, tok, (uint32_t)len, 0, &st), ST_DENIED);
    assert_non_null(strstr(st.message, "does not grant it"));
    assert_int_equal(t_write(&fx->src, 3, fx->other, SLOT, tok, (uint32_t)len, 0, &st), ST_OK);
    assert_int_equal(t_read(&fx->src, 3, tok, (uint32_t)len, got, &got_len, &st), ST_DENIED);
    /* nor does it write a header (that is the scheduler's admin token) */
    assert_int_equal(t_put(&fx->src, 3, fx->key, SLOT, fx->sum, tok, (uint32_t)len, &st),
                     ST_DENIED);
    t_expect(&fx->src, 1, fx->bytes);
}

/* Probe and Inventory are read-only metadata: no token (docs/SECURITY.md). */
static void test_probe_needs_no_token(void **state)
{
    fx_t *fx = *state;
    static kvtier_Envelope req, rep;
    uint64_t slots[1] = {1};
    bool present[1] = {false};
    kvtier_Status st;
    bus_env_init(&req, kvtier_Envelope_probe_req_tag, "test");
    req.body.probe_req.tier_id = fx->src.id;
    bus_arrays_t arr = {.slots = {slots, 1, 1}};
    bus_arrays_t rarr = {.mask = {present, 0, 1}};
    assert_int_equal(t_call(&fx->src, &req, &arr, NULL, 0, &rep, &rarr, NULL, &st), ST_OK);
    assert_true(present[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_tokenless_write_with_epoch_0_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_forged_or_altered_mac_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_of_another_cluster_or_secret_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_get_token_does_not_grant_a_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_for_other_slots_or_a_smaller_size_is_refused,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_for_another_tier_epoch_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_expired_token_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_of_an_older_leader_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_copy_goes_only_where_the_token_says, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_long_token_grants_exactly_its_slots, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_get_put_token_reads_its_hits_and_writes_its_misses,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_probe_needs_no_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fence_refuses_every_mutation_of_a_deposed_leader,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals_are_counted_by_reason, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
