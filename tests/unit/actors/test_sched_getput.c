/* test_sched_getput.c — a request in two round trips (issue 13 §2): the get+put
 * window of PrepareRequest / CompleteRequest, against the real scheduler actor over
 * real ZeroMQ, its tiers served by fake tier actors (sched_fake_tier.h: real ROUTER
 * peers that answer PutHeader). Each test names its rule: the prefix pinned and
 * the misses reserved under one token (n_get splits it), keys SERVING skipped,
 * every bad input INVALID_ARGUMENT with a message and nothing changed, the window
 * kinds excluding each other, one completion exactly, request_end releasing
 * everything, a lapse answering EXPIRED, pins surviving eviction, BUSY leaving
 * nothing held, a tier reset failing the put part, and a new leader answering
 * NOT_FOUND. */
#include <inttypes.h>

#include "sched_testkit.h"

#define S_CAP 64u

/* PrepareRequest of keys in request req; the reply in t->rep / t->arr. */
static int s_prepare_mode(tk_t *t, const char *req, uint8_t (*keys)[16], uint32_t n,
                          kvtier_LookupMode mode)
{
    kvtier_PrepareRequest *r = &tk_req(t, kvtier_Envelope_prepare_req_tag)->body.prepare_req;
    TK_FILL_IDS(r, TK_INST, req);
    r->mode = mode;
    bus_arrays_t ra = tk_keys_arr(keys, n);
    return tk_call(t, &ra);
}

static int s_prepare(tk_t *t, const char *req, uint8_t (*keys)[16], uint32_t n)
{
    return s_prepare_mode(t, req, keys, n, kvtier_LookupMode_LOOKUP_MODE_PREFIX);
}

/* CompleteRequest: mask NULL = all succeeded; n_ck checksums. */
static int s_complete(tk_t *t, const char *req, uint64_t token_id, bool *mask, uint32_t n_mask,
                      uint32_t n_ck)
{
    kvtier_CompleteRequest *r = &tk_req(t, kvtier_Envelope_complete_req_tag)->body.complete_req;
    TK_FILL_IDS(r, TK_INST, req);
    r->token_id = token_id;
    uint64_t ck[S_CAP];
    for (uint32_t i = 0; i < n_ck && i < S_CAP; i++)
        ck[i] = 0xFEED0000u + i;
    bus_arrays_t ra = {.mask = {.v = mask, .n = mask ? n_mask : 0, .cap = n_mask},
                       .checksums = {.v = ck, .n = n_ck, .cap = n_ck}};
    return tk_call(t, &ra);
}

/* The token of the last prepare reply, decoded. */
static void s_view(tk_t *t, bus_token_view_t *v)
{
    char err[160];
    if (bus_token_decode(t->arr->payload.data, t->arr->payload.len, v, err, sizeof err) < 0)
        fail_msg("token: %s", err);
}

static uint64_t s_token_id(const tk_t *t)
{
    return t->rep->body.prepare_rep.token.token_id;
}

static void s_expect(tk_t *t, int got, int want, const char *needle)
{
    if (got != want)
        fail_msg("status %d, want %d: %s", got, want, t->msg);
    if (needle && !strstr(t->msg, needle))
        fail_msg("message \"%s\" does not say \"%s\"", t->msg, needle);
}

static int setup(void **state)
{
    tk_env_t *e = calloc(1, sizeof *e);
    tk_env_start(e, S_CAP, NULL);
    assert_int_equal(tk_begin(e->t, TK_INST, "r", 0), 0);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    tk_env_t *e = *state;
    tk_env_stop(e);
    free(e);
    return 0;
}

/* Issue 13 §2: one call looks up the prefix, pins the hits and reserves the
 * misses, one token for both (kind get+put, n_get = the hits); one call completes
 * both: the pins released, the misses' headers written and committed. */
static void test_prepare_pins_the_prefix_and_reserves_the_misses(void **state)
{
    tk_env_t *e = *state;
    tk_t *t = e->t;
    assert_int_equal(tk_put(t, "r", 0, 4), 0);
    uint8_t keys[8][16];
    tk_keys(0, 8, keys);
    s_expect(t, s_prepare(t, "r", keys, 8), 0, NULL);
    assert_int_equal(t->rep->which_body, kvtier_Envelope_prepare_rep_tag);
    assert_int_equal(t->rep->body.prepare_rep.hit_count, 4);
    assert_int_equal(t->rep->body.prepare_rep.skipped, 0);
    assert_int_equal(t->arr->keys.n, 8);
    for (uint32_t i = 0; i < 8; i++)
        assert_memory_equal(t->arr->keys.keys[i], keys[i], 16);
    bus_token_view_t v;
    s_view(t, &v);
    assert_int_equal(v.kind, BUS_TOKEN_GET_PUT);
    assert_int_equal(v.meta.n_get, 4);
    assert_int_equal(v.n_entries, 8);
    assert_true(v.meta.token_id == s_token_id(t));
    assert_int_equal(v.meta.flags & BUS_TOKEN_F_EXPORTABLE, 0);
    uint64_t tok = s_token_id(t); /* before tk_stat replaces the reply */
    assert_int_equal(tk_stat(t, "pinned"), 4);
    assert_int_equal(tk_stat(t, "reserved"), 4);
    sched_fake_tier_stats_t before, after;
    sched_fake_tier_stats(e->ft, &before);
    s_expect(t, s_complete(t, "r", tok, NULL, 0, 4), 0, NULL);
    assert_int_equal(t->rep->which_body, kvtier_Envelope_complete_rep_tag);
    assert_int_equal(t->rep->body.complete_rep.released, 4);
    assert_int_equal(t->rep->body.complete_rep.committed, 4);
    assert_int_equal(t->rep->body.complete_rep.failed, 0);
    sched_fake_tier_stats(e->ft, &after);
    assert_int_equal(after.headers - before.headers, 4);
    assert_int_equal(tk_stat(t, "pinned"), 0);
    assert_int_equal(tk_stat(t, "reserved"), 0);
    assert_int_equal(tk_prefix(t, keys, 8), 8);
    /* all cached now: a token of hits only */
    s_expect(t, s_prepare(t, "r", keys, 8), 0, NULL);
    assert_int_equal(t->rep->body.prepare_rep.hit_count, 8);
    s_view(t, &v);
    assert_int_equal(v.meta.n_get, 8);
    s_expect(t, s_complete(t, "r", s_token_id(t), NULL, 0, 0), 0, NULL);
    assert_int_equal(t->rep->body.complete_rep.released, 8);
    assert_int_equal(t->rep->body.complete_rep.committed, 0);
}

/* As prepare_put: misses already SERVING are left out of the put part (counted
 * in skipped); the prefix stops at the first miss. A failed put key releases its
 * reservation; a failed get key still releases its pin. */
static void test_keys_serving_are_skipped_and_failures_released(void **state)
{
    tk_env_t *e = *state;
    tk_t *t = e->t;
    assert_int_equal(tk_put(t, "r", 0, 2), 0);
    assert_int_equal(tk_put(t, "r", 5, 1), 0);
    uint8_t keys[8][16];
    tk_keys(0, 8, keys);
    s_expect(t, s_prepare(t, "r", keys, 8), 0, NULL);
    assert_int_equal(t->rep->body.prepare_rep.hit_count, 2);
    assert_int_equal(t->rep->body.prepare_rep.skipped, 1);
    static const uint32_t want[] = {0, 1, 2, 3, 4, 6, 7};
    assert_int_equal(t->arr->keys.n, 7);
    for (uint32_t i = 0; i < 7; i++)
        assert_memory_equal(t->arr->keys.keys[i], keys[want[i]], 16);
    bool mask[7] = {false, true, true, false, true, true, true};
    s_expect(t, s_complete(t, "r", s_token_id(t), mask, 7, 5), 0, NULL);
    assert_int_equal(t->rep->body.complete_rep.released, 2);
    assert_int_equal(t->rep->body.complete_rep.committed, 4);
    assert_int_equal(t->rep->body.complete_rep.failed, 1);
    assert_true(tk_cached(t, 2) && tk_cached(t, 4) && tk_cached(t, 6) && tk_cached(t, 7));
    assert_false(tk_cached(t, 3));
    assert_int_equal(tk_stat(t, "reserved"), 0);
    assert_int_equal(tk_stat(t, "pinned"), 0);
}

/* Bad input is INVALID_ARGUMENT with a message a person can act on, and changes
 * nothing: no keys, a mode other than prefix, a parent key of the wrong length, a
 * second prepare while one is open, prepare_get / prepare_put beside it, a prepare
 * beside an open put window, a complete with another token, flags or checksums of
 * the wrong count, a complete_put of the combined token. The window then
 * completes as if none of it happened. */
static void test_bad_input_is_refused_and_changes_nothing(void **state)
{
    tk_env_t *e = *state;
    tk_t *t = e->t;
    assert_int_equal(tk_put(t, "r", 0, 2), 0);
    uint8_t keys[4][16];
    tk_keys(0, 4, keys);
    s_expect(t, s_prepare(t, "r", keys, 0), kvtier_StatusCode_STATUS_INVALID_ARGUMENT, "no keys");
    s_expect(t, s_prepare_mode(t, "r", keys, 4, kvtier_LookupMode_LOOKUP_MODE_REVERSE),
             kvtier_StatusCode_STATUS_INVALID_ARGUMENT, "LOOKUP_MODE_PREFIX");
    kvtier_PrepareRequest *pr = &tk_req(t, kvtier_Envelope_prepare_req_tag)->body.prepare_req;
    TK_FILL_IDS(pr, TK_INST, "r");
    pr->parent_key.size = 3;
    bus_arrays_t ra = tk_keys_arr(keys, 4);
    s_expect(t, tk_call(t, &ra), kvtier_StatusCode_STATUS_INVALID_ARGUMENT, "parent_key");
    s_expect(t, s_prepare(t, "nope", keys, 4), kvtier_StatusCode_STATUS_NOT_FOUND, "not open");
    assert_int_equal(tk_stat(t, "pinned"), 0);
    assert_int_equal(tk_stat(t, "reserved"), 0);

    /* a put window open: no get+put beside it */
    s_expect(t, tk_prepare_put(t, "r", &keys[2], 1), 0, NULL);
    uint64_t put_tok = t->rep->body.prepare_put_rep.token.token_id;
    s_expect(t, s_prepare(t, "r", keys, 4), kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
             "open put window");
    uint64_t ck = 1;
    s_expect(t, tk_complete_put(t, "r", put_tok, NULL, 0, &ck, 1), 0, NULL);

    s_expect(t, s_prepare(t, "r", keys, 4), 0, NULL);
    uint64_t tok = s_token_id(t);
    s_expect(t, s_prepare(t, "r", keys, 4), kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
             "already has an open get+put window");
    s_expect(t, tk_prepare_get(t, "r", keys, 1), kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
             "cannot open beside it");
    s_expect(t, tk_prepare_put(t, "r", &keys[3], 1), kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
             "cannot open beside it");
    s_expect(t, s_complete(t, "r", tok + 1, NULL, 0, 1), kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
             "is not the open get+put window's token");
    bool mask[3] = {true, true, true};
    s_expect(t, s_complete(t, "r", tok, mask, 3, 1), kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
             "success has 3 flags");
    s_expect(t, s_complete(t, "r", tok, NULL, 0, 2), kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
             "checksums has 2 values");
    s_expect(t, tk_complete_put(t, "r", tok, NULL, 0, &ck, 1),
             kvtier_StatusCode_STATUS_INVALID_ARGUMENT, "no open put window");
    s_expect(t, tk_complete(t, kvtier_Envelope_complete_get_req_tag, "r", tok),
             kvtier_StatusCode_STATUS_INVALID_ARGUMENT, "no open get window");
    /* nothing changed: 3 hits (2 stored, 1 put above) pinned, 1 miss reserved */
    assert_int_equal(tk_stat(t, "pinned"), 3);
    assert_int_equal(tk_stat(t, "reserved"), 1);
    s_expect(t, s_complete(t, "r", tok, NULL, 0, 1), 0, NULL);
    assert_int_equal(t->rep->body.complete_rep.released, 3);
    assert_int_equal(t->rep->body.complete_rep.committed, 1);
}

/* Exactly-once completion: the window closes with its one complete; the same
 * complete again is a resend (its reply was lost, issue 9 §1): answered OK with
 * the same counts, and it concludes nothing twice. */
static void test_completes_exactly_once(void **state)
{
    tk_env_t *e = *state;
    tk_t *t = e->t;
    assert_int_equal(tk_put(t, "r", 0, 2), 0);
    uint8_t keys[4][16];
    tk_keys(0, 4, keys);
    s_expect(t, s_prepare(t, "r", keys, 4), 0, NULL);
    uint64_t tok = s_token_id(t);
    s_expect(t, s_complete(t, "r", tok, NULL, 0, 2), 0, NULL);
    kvtier_CompleteReply first = t->rep->body.complete_rep;
    uint64_t committed = tk_stat(t, "puts_committed");
    sched_fake_tier_stats_t before, after;
    sched_fake_tier_stats(e->ft, &before);
    memset(&t->rep->body, 0, sizeof t->rep->body);
    s_expect(t, s_complete(t, "r", tok, NULL, 0, 2), 0, NULL);
    assert_int_equal(t->rep->body.complete_rep.released, first.released);
    assert_int_equal(t->rep->body.complete_rep.committed, first.committed);
    assert_int_equal(t->rep->body.complete_rep.failed, first.failed);
    s_expect(t, s_complete(t, "r", tok + 1, NULL, 0, 2), kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
             "no open get+put window");
    sched_fake_tier_stats(e->ft, &after);
    assert_int_equal(after.put_headers, before.put_headers);
    assert_int_equal(tk_stat(t, "puts_committed"), committed);
    assert_int_equal(tk_stat(t, "pinned"), 0);
}

/* request_end with the window open (the safety net): the pins are released and
 * the reservations aborted, reported as one get+put window; the misses are not
 * stored, and a late complete finds no request. */
static void test_request_end_releases_everything(void **state)
{
    tk_env_t *e = *state;
    tk_t *t = e->t;
    assert_int_equal(tk_put(t, "r", 0, 4), 0);
    assert_int_equal(tk_begin(t, TK_INST, "q", 0), 0);
    uint8_t keys[8][16];
    tk_keys(0, 8, keys);
    s_expect(t, s_prepare(t, "q", keys, 8), 0, NULL);
    uint64_t tok = s_token_id(t);
    s_expect(t, tk_end(t, TK_INST, "q"), 0, NULL);
    const kvtier_RequestEndReply *r = &t->rep->body.request_end_rep;
    assert_int_equal(r->closed_windows_count, 1);
    assert_int_equal(r->closed_windows[0], kvtier_WindowKind_WINDOW_KIND_GET_PUT);
    assert_int_equal(r->released_pins, 4);
    assert_int_equal(r->aborted_reservations, 4);
    assert_int_equal(tk_stat(t, "pinned"), 0);
    assert_int_equal(tk_stat(t, "reserved"), 0);
    assert_int_equal(tk_prefix(t, keys, 8), 4);
    s_expect(t, s_complete(t, "q", tok, NULL, 0, 4), kvtier_StatusCode_STATUS_NOT_FOUND,
             "not open");
}

/* Pins held by an open get+put window keep their blocks through eviction: a
 * full tier's writes evict every other block, never a pinned one, until the
 * complete; a batch that only the pinned slots could hold is NO_SPACE, nothing
 * reserved. */
static void test_pinned_hits_survive_eviction(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 8, NULL);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "a", 0), 0);
    assert_int_equal(tk_begin(t, TK_INST, "b", 0), 0);
    assert_int_equal(tk_put(t, "b", 0, 8), 0);
    uint8_t keys[4][16];
    tk_keys(0, 4, keys);
    s_expect(t, s_prepare(t, "a", keys, 4), 0, NULL);
    assert_int_equal(t->rep->body.prepare_rep.hit_count, 4);
    uint64_t tok = s_token_id(t);
    assert_int_equal(tk_put(t, "b", 10, 4), 0); /* evicts 4..7 */
    assert_int_equal(tk_put(t, "b", 20, 2), 0); /* evicts two of 10..13 */
    for (uint32_t i = 0; i < 4; i++)
        assert_true(tk_cached(t, i));
    for (uint32_t i = 4; i < 8; i++)
        assert_false(tk_cached(t, i));
    uint8_t big[5][16];
    tk_keys(30, 5, big);
    s_expect(t, s_prepare(t, "b", big, 5), kvtier_StatusCode_STATUS_NO_SPACE, "no room");
    assert_int_equal(tk_stat(t, "pinned"), 4);
    assert_int_equal(tk_stat(t, "reserved"), 0);
    s_expect(t, s_complete(t, "a", tok, NULL, 0, 0), 0, NULL);
    assert_int_equal(t->rep->body.complete_rep.released, 4);
    assert_int_equal(tk_stat(t, "pinned"), 0);
    tk_env_stop(&e);
}

/* A head tier that keeps its blocks (a next tier, demotion on) and is full of
 * pinned blocks: the misses cannot be reserved, the answer is BUSY (retry), and
 * the prefix the prepare had pinned is released again: all or nothing. */
static void test_busy_head_pins_nothing(void **state)
{
    (void)state;
    sched_config_t cfg;
    tk_config(&cfg, 4, 4096);
    cfg.n_tiers = 2;
    cfg.tiers[1] = (sched_tier_config_t){.tier_id = 2, .capacity = 64, .slot_size = 4096};
    snprintf(cfg.tiers[1].name, sizeof cfg.tiers[1].name, "lower0");
    snprintf(cfg.tiers[1].kind, sizeof cfg.tiers[1].kind, "host");
    cfg.chains[0].n_tiers = 2;
    cfg.chains[0].tier_ids[1] = 2;
    cfg.demote = true;
    sched_fake_tier_t *head = sched_fake_tier_new(1, 4), *lower = sched_fake_tier_new(2, 64);
    assert_true(head && lower);
    tk_t *t = tk_new(&cfg);
    tk_tier_up(t, 1, sched_fake_tier_endpoint(head), 1, 4, 4096);
    tk_tier_up(t, 2, sched_fake_tier_endpoint(lower), 1, 64, 4096);
    assert_int_equal(tk_register(t, TK_INST, 4096), 0);
    assert_int_equal(tk_begin(t, TK_INST, "a", 0), 0);
    assert_int_equal(tk_begin(t, TK_INST, "b", 0), 0);
    assert_int_equal(tk_put(t, "a", 0, 4), 0);
    uint8_t keys[4][16];
    tk_keys(0, 4, keys);
    s_expect(t, s_prepare(t, "a", keys, 4), 0, NULL);
    uint64_t tok = s_token_id(t);
    uint8_t more[4][16];
    tk_keys(0, 2, more);
    tk_keys(10, 2, &more[2]);
    s_expect(t, s_prepare(t, "b", more, 4), kvtier_StatusCode_STATUS_BUSY, "retry shortly");
    assert_int_equal(tk_stat(t, "pinned"), 4); /* a's only: b's two were released */
    assert_int_equal(tk_stat(t, "reserved"), 0);
    s_expect(t, s_complete(t, "b", 1, NULL, 0, 0), kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
             "no open get+put window");
    s_expect(t, s_complete(t, "a", tok, NULL, 0, 0), 0, NULL);
    assert_int_equal(tk_stat(t, "pinned"), 0);
    tk_destroy(&t);
    sched_fake_tier_destroy(&head);
    sched_fake_tier_destroy(&lower);
}

static void s_short_leases(sched_config_t *cfg)
{
    cfg->pin_lease_ms = 300; /* the get+put window lapses at the shorter lease */
    cfg->write_grace_ms = 60000;
}

static bool s_lapsed(tk_t *t, void *arg)
{
    (void)arg;
    return tk_stat(t, "reservations_lapsed") >= 2 && tk_stat(t, "pins_lapsed") >= 2;
}

/* Lease lapse: the window lapses at the shorter of its leases (pins and
 * reservations together), the scheduler releases both, and the late complete is
 * EXPIRED naming the lapse. */
static void test_lapse_expires_the_window(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, S_CAP, s_short_leases);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r", 0), 0);
    assert_int_equal(tk_put(t, "r", 0, 2), 0);
    uint8_t keys[4][16];
    tk_keys(0, 4, keys);
    s_expect(t, s_prepare(t, "r", keys, 4), 0, NULL);
    assert_int_equal(t->rep->body.prepare_rep.token.lease_ms, 300);
    uint64_t tok = s_token_id(t);
    assert_true(tk_poll(s_lapsed, t, NULL));
    assert_int_equal(tk_stat(t, "pinned"), 0);
    assert_int_equal(tk_stat(t, "reserved"), 0);
    s_expect(t, s_complete(t, "r", tok, NULL, 0, 2), kvtier_StatusCode_STATUS_EXPIRED, "lapsed");
    assert_int_equal(tk_prefix(t, keys, 4), 2);
    tk_env_stop(&e);
}

/* A tier reset while the window is open (another tier actor epoch): the put
 * part's entries are stale and fail at complete (nothing committed onto the new
 * incarnation), the reply still comes once. */
static void test_tier_reset_fails_the_put_part(void **state)
{
    tk_env_t *e = *state;
    tk_t *t = e->t;
    assert_int_equal(tk_put(t, "r", 0, 2), 0);
    uint8_t keys[4][16];
    tk_keys(0, 4, keys);
    s_expect(t, s_prepare(t, "r", keys, 4), 0, NULL);
    uint64_t tok = s_token_id(t);
    tk_tier_down(t, 1);
    sched_fake_tier_clear(e->ft);
    tk_tier_up(t, 1, sched_fake_tier_endpoint(e->ft), 2, S_CAP, 4096);
    s_expect(t, s_complete(t, "r", tok, NULL, 0, 2), 0, NULL);
    assert_int_equal(t->rep->body.complete_rep.committed, 0);
    assert_int_equal(t->rep->body.complete_rep.failed, 2);
    assert_int_equal(tk_stat(t, "reserved"), 0);
}

/* Failover: a new leader knows nothing of the window (its requests are not
 * carried over): a complete sent there without the token's epoch is NOT_FOUND or
 * INVALID_ARGUMENT, one with it (libkvtier sends it) is ABORTED (issue 9 §1);
 * nothing changes, and the new leader's own prepare works. */
static void test_a_new_leader_answers_not_found(void **state)
{
    tk_env_t *e = *state;
    tk_t *t = e->t;
    assert_int_equal(tk_put(t, "r", 0, 2), 0);
    uint8_t keys[4][16];
    tk_keys(0, 4, keys);
    s_expect(t, s_prepare(t, "r", keys, 4), 0, NULL);
    uint64_t tok = s_token_id(t);
    sched_config_t cfg = e->cfg;
    cfg.leader_epoch = 8;
    sched_fake_tier_t *ft = sched_fake_tier_new(1, S_CAP);
    assert_non_null(ft);
    tk_t *b = tk_new(&cfg);
    tk_tier_up(b, 1, sched_fake_tier_endpoint(ft), 3, S_CAP, 4096);
    assert_int_equal(tk_register(b, TK_INST, 4096), 0);
    s_expect(b, s_complete(b, "r", tok, NULL, 0, 2), kvtier_StatusCode_STATUS_NOT_FOUND,
             "not open");
    assert_int_equal(tk_stat(b, "reserved"), 0);
    assert_int_equal(tk_begin(b, TK_INST, "r", 0), 0);
    s_expect(b, s_complete(b, "r", tok, NULL, 0, 2), kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
             "no open get+put window");
    kvtier_CompleteRequest *cr = &tk_req(b, kvtier_Envelope_complete_req_tag)->body.complete_req;
    TK_FILL_IDS(cr, TK_INST, "r");
    cr->token_id = tok;
    cr->leader_epoch = 7;
    s_expect(b, tk_call(b, NULL), kvtier_StatusCode_STATUS_ABORTED, "epoch 7");
    assert_int_equal(tk_stat(b, "reserved"), 0);
    s_expect(b, s_prepare(b, "r", keys, 4), 0, NULL);
    bus_token_view_t v;
    s_view(b, &v);
    assert_true(v.meta.leader_epoch == 8);
    tk_destroy(&b);
    sched_fake_tier_destroy(&ft);
    s_expect(t, s_complete(t, "r", tok, NULL, 0, 2), 0, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_prepare_pins_the_prefix_and_reserves_the_misses, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_keys_serving_are_skipped_and_failures_released, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_bad_input_is_refused_and_changes_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_completes_exactly_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_end_releases_everything, setup, teardown),
        cmocka_unit_test(test_pinned_hits_survive_eviction),
        cmocka_unit_test(test_busy_head_pins_nothing),
        cmocka_unit_test(test_lapse_expires_the_window),
        cmocka_unit_test_setup_teardown(test_tier_reset_fails_the_put_part, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_new_leader_answers_not_found, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
