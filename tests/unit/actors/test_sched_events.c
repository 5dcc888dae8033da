/* test_sched_events.c — the scheduler's events (actors/sched_events.h, DESIGN.md
 * §13): a real scheduler over a fake tier actor hands its batches to a PULL socket
 * standing in for the publisher's input. Checks the framing ([topic][8-byte BE
 * sequence][EventBatch]), the topics, the sequence rule (epoch << 40 | n, one per
 * batch, gaps when the input is full) and the events a leader start, a tier up, a
 * put, a lookup, a remove and an eviction produce, decoded with bus_events. */
#include <inttypes.h>

#include "bus_events.h"
#include "sched_testkit.h"

#define S_EPOCH 7u
#define S_CAP 8u

static char s_input[128];

static uint32_t s_queue;

static void s_tweak(sched_config_t *cfg)
{
    cfg->max_batch = 32768; /* a lookup may be longer than the events' key pool */
    cfg->max_window_keys = 32768;
    snprintf(cfg->events_input, sizeof cfg->events_input, "%s", s_input);
    cfg->events_queue = s_queue;
    cfg->leader_epoch = S_EPOCH;
    cfg->previous_epoch = S_EPOCH - 2; /* told in the term's LeaderChanged */
}

typedef struct {
    char topic[128];
    uint64_t seq;
    kvtier_EventBatch batch;
    bus_event_t ev[64];
    uint32_t n;
    uint8_t pool[20000][16];
    bus_keys_t keys;
    uint32_t tok_pool[20000];
    bus_u32s_t tokens;
} s_batch_t;

/* Receives one batch (waiting up to wait_ms): 0, or -1 when none came. */
static int s_recv_within(zsock_t *pull, s_batch_t *b, int wait_ms)
{
    zpoller_t *p = zpoller_new(pull, NULL);
    void *which = zpoller_wait(p, wait_ms);
    zpoller_destroy(&p);
    if (!which)
        return -1;
    zmsg_t *m = zmsg_recv(pull);
    assert_non_null(m);
    assert_int_equal(zmsg_size(m), 3);
    zframe_t *t = zmsg_first(m), *s = zmsg_next(m), *pl = zmsg_next(m);
    assert_true(zframe_size(t) < sizeof b->topic);
    memcpy(b->topic, zframe_data(t), zframe_size(t));
    b->topic[zframe_size(t)] = '\0';
    assert_int_equal(zframe_size(s), 8);
    b->seq = 0;
    for (int i = 0; i < 8; i++)
        b->seq = b->seq << 8 | zframe_data(s)[i];
    b->keys = (bus_keys_t){.keys = b->pool, .cap = 20000};
    b->tokens = (bus_u32s_t){.v = b->tok_pool, .cap = 20000};
    kvtier_Status st;
    assert_int_equal(bus_events_decode_tokens(zframe_data(pl), zframe_size(pl), &b->batch, b->ev,
                                              64, &b->n, &b->keys, &b->tokens, &st),
                     0);
    zmsg_destroy(&m);
    return 0;
}

static int s_recv(zsock_t *pull, s_batch_t *b)
{
    return s_recv_within(pull, b, (int)TK_CALL_MS);
}

/* Receives batches until one with topic `topic` (others are checked for order). */
static void s_expect(zsock_t *pull, s_batch_t *b, const char *topic, uint64_t *last_seq)
{
    for (int i = 0; i < 32; i++) {
        assert_int_equal(s_recv(pull, b), 0);
        assert_true(b->seq > *last_seq);
        assert_int_equal(b->seq >> 40, S_EPOCH);
        assert_int_equal(b->batch.epoch, S_EPOCH);
        *last_seq = b->seq;
        if (strcmp(b->topic, topic) == 0)
            return;
    }
    fail_msg("no batch with topic %s", topic);
}

static zsock_t *s_bind_input(void)
{
    static int seq;
    snprintf(s_input, sizeof s_input, "inproc://test-sched-events-%d-%d", (int)getpid(), seq++);
    zsock_t *pull = zsock_new(ZMQ_PULL);
    assert_non_null(pull);
    assert_int_equal(zsock_bind(pull, "%s", s_input), 0);
    return pull;
}

/* A leader's first batch, a tier up, and the block events of a put, a lookup and
 * a remove, in order, under their topics. */
static void test_events_of_a_put_a_lookup_and_a_remove(void **state)
{
    (void)state;
    zsock_t *pull = s_bind_input();
    tk_env_t e;
    tk_env_start(&e, S_CAP, s_tweak);
    s_batch_t *b = calloc(1, sizeof *b);
    uint64_t last = 0;
    s_expect(pull, b, "leader", &last);
    assert_int_equal(b->seq, (uint64_t)S_EPOCH << 40 | 1); /* the term's first batch */
    assert_int_equal(b->n, 1);
    assert_int_equal(b->ev[0].ev.which_kind, kvtier_Event_leader_changed_tag);
    assert_int_equal(b->ev[0].ev.kind.leader_changed.epoch, S_EPOCH);
    assert_int_equal(b->ev[0].ev.kind.leader_changed.previous_epoch, S_EPOCH - 2);
    s_expect(pull, b, "tier", &last);
    assert_int_equal(b->ev[0].ev.which_kind, kvtier_Event_tier_changed_tag);
    assert_true(b->ev[0].ev.kind.tier_changed.up);
    assert_int_equal(b->ev[0].ev.kind.tier_changed.tier_id, 1);
    assert_int_equal(b->ev[0].ev.kind.tier_changed.capacity_slots, S_CAP);

    assert_int_equal(tk_begin(e.t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(e.t, "r1", 0, 3), 0);
    s_expect(pull, b, "stored/" TK_INST, &last);
    assert_int_equal(b->n, 1); /* three keys of one put: one event */
    const kvtier_Event *ev = &b->ev[0].ev;
    assert_int_equal(ev->which_kind, kvtier_Event_block_stored_tag);
    assert_string_equal(ev->instance_id, TK_INST);
    assert_int_equal(ev->kind.block_stored.tier_id, 1);
    assert_int_equal(ev->kind.block_stored.block_bytes, 4096);
    assert_int_equal(b->ev[0].keys.n, 3);
    uint8_t keys[3][16];
    tk_keys(0, 3, keys);
    assert_memory_equal(b->ev[0].keys.keys, keys, sizeof keys);

    assert_int_equal(tk_prefix(e.t, keys, 3), 3);
    s_expect(pull, b, "lookup/" TK_INST, &last);
    const kvtier_CacheGet *g = &b->ev[0].ev.kind.cache_get;
    assert_int_equal(b->ev[0].ev.which_kind, kvtier_Event_cache_get_tag);
    assert_int_equal(g->hit_count, 3);
    assert_int_equal(g->key_count, 3);
    assert_int_equal(g->head_hits, 3);
    assert_int_equal(g->tier_hits_count, 1);
    assert_int_equal(g->tier_hits[0].tier_id, 1);
    assert_int_equal(g->tier_hits[0].hits, 3);
    assert_int_equal(g->mode, kvtier_LookupMode_LOOKUP_MODE_PREFIX);

    assert_int_equal(tk_remove(e.t, keys, 1), 0);
    s_expect(pull, b, "removed/" TK_INST, &last);
    assert_int_equal(b->ev[0].ev.kind.block_removed.reason,
                     kvtier_RemoveReason_REMOVE_REASON_REMOVED);
    assert_int_equal(b->ev[0].keys.n, 1);
    assert_memory_equal(b->ev[0].keys.keys, keys[0], 16);
    assert_true(tk_stat(e.t, "events_batches") >= 5);
    assert_int_equal(tk_stat(e.t, "events_dropped"), 0);
    free(b);
    tk_env_stop(&e);
    zsock_destroy(&pull);
}

/* A lookup longer than the events' key pool keeps its first 16384 keys, and its
 * key_count says how many it had. */
static void test_a_long_lookup_is_cut_and_says_so(void **state)
{
    (void)state;
    zsock_t *pull = s_bind_input();
    tk_env_t e;
    tk_env_start(&e, S_CAP, s_tweak);
    s_batch_t *b = calloc(1, sizeof *b);
    uint64_t last = 0;
    uint32_t n = 20000;
    uint8_t(*keys)[16] = calloc(n, 16);
    tk_keys(0, n, keys);
    assert_int_equal(
        tk_lookup(e.t, TK_INST, NULL, kvtier_LookupMode_LOOKUP_MODE_PER_KEY, 0, keys, n), 0);
    s_expect(pull, b, "lookup/" TK_INST, &last);
    assert_int_equal(b->ev[0].ev.kind.cache_get.key_count, n);
    assert_int_equal(b->ev[0].keys.n, 16384);
    assert_memory_equal(b->ev[0].keys.keys, keys, 16384 * 16);
    free(keys);
    free(b);
    tk_env_stop(&e);
    zsock_destroy(&pull);
}

/* A put into a full tier evicts: the victim's removal says EVICTED. */
static void test_eviction_is_an_event(void **state)
{
    (void)state;
    zsock_t *pull = s_bind_input();
    tk_env_t e;
    tk_env_start(&e, S_CAP, s_tweak);
    s_batch_t *b = calloc(1, sizeof *b);
    uint64_t last = 0;
    s_expect(pull, b, "tier", &last);
    assert_int_equal(tk_begin(e.t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(e.t, "r1", 0, S_CAP), 0);
    assert_int_equal(tk_put(e.t, "r1", 100, 2), 0); /* two of the first put go */
    uint32_t evicted = 0;
    while (evicted < 2) {
        s_expect(pull, b, "removed/" TK_INST, &last);
        for (uint32_t i = 0; i < b->n; i++) {
            assert_int_equal(b->ev[i].ev.kind.block_removed.reason,
                             kvtier_RemoveReason_REMOVE_REASON_EVICTED);
            evicted += b->ev[i].keys.n;
        }
    }
    assert_int_equal(evicted, 2);
    free(b);
    tk_env_stop(&e);
    zsock_destroy(&pull);
}

/* Nobody takes the batches: the scheduler neither blocks nor grows; the batches
 * it could not hand over are counted, and their numbers are skipped (a gap). */
static void test_a_full_input_drops_and_leaves_a_gap(void **state)
{
    (void)state;
    snprintf(s_input, sizeof s_input, "inproc://test-sched-events-none-%d", (int)getpid());
    s_queue = 2; /* the input queues two batches while nobody reads */
    tk_env_t e;
    tk_env_start(&e, S_CAP, s_tweak);
    s_queue = 0;
    assert_int_equal(tk_begin(e.t, TK_INST, "r1", 0), 0);
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(tk_put(e.t, "r1", 10 * i, 2), 0);
    uint64_t dropped = tk_stat(e.t, "events_dropped");
    assert_true(dropped >= 3); /* leader, tier, four puts: two fit */
    assert_int_equal(tk_stat(e.t, "events_batches") + dropped, 6);
    /* the publisher comes up: the next batch's number shows what was missed */
    zsock_t *pull = zsock_new(ZMQ_PULL);
    assert_int_equal(zsock_bind(pull, "%s", s_input), 0);
    s_batch_t *b = calloc(1, sizeof *b);
    bool stored = false;
    uint64_t last = 0;
    /* the input attaches in the background: put until a stored batch comes */
    for (uint32_t i = 0; i < 100 && !stored; i++) {
        assert_int_equal(tk_put(e.t, "r1", 100 + i, 1), 0);
        while (!stored && s_recv_within(pull, b, 50) == 0) {
            assert_true(b->seq > last);
            last = b->seq;
            stored = strcmp(b->topic, "stored/" TK_INST) == 0 &&
                     (b->seq & ((1ull << 40) - 1)) > 6; /* one of the puts after the bind */
        }
    }
    assert_true(stored);
    /* two batches waited in the queue; those dropped meanwhile are missing */
    assert_true((b->seq & ((1ull << 40) - 1)) > dropped);
    free(b);
    tk_env_stop(&e);
    zsock_destroy(&pull);
}

/* ---- parents and token ids of puts (issue 10 §1) ---- */

#define S_TPB 16u /* the testkit's instance: tokens_per_block */
#define S_BIG 256u

static uint32_t s_put_tokens;

static void s_tweak_tokens(sched_config_t *cfg)
{
    s_tweak(cfg);
    cfg->events_put_tokens = s_put_tokens;
}

/* Token id j of key i: distinct everywhere. */
static uint32_t s_tok(uint32_t i, uint32_t j)
{
    return i * 1000u + j;
}

/* prepare_put of keys first..first+n-1 with parent key `parent` (UINT32_MAX:
 * none) and their token ids (tokens false: none): its reply's code. */
static int s_prepare_meta(tk_t *t, const char *req, uint32_t first, uint32_t n, uint32_t parent,
                          bool tokens)
{
    uint8_t(*keys)[16] = calloc(n, 16);
    uint32_t *tok = calloc((size_t)n * S_TPB, sizeof *tok);
    tk_keys(first, n, keys);
    for (uint32_t i = 0; i < n && tokens; i++)
        for (uint32_t j = 0; j < S_TPB; j++)
            tok[i * S_TPB + j] = s_tok(first + i, j);
    kvtier_PreparePutRequest *r =
        &tk_req(t, kvtier_Envelope_prepare_put_req_tag)->body.prepare_put_req;
    TK_FILL_IDS(r, TK_INST, req);
    if (parent != UINT32_MAX) {
        r->parent_key.size = 16;
        tk_key(parent, r->parent_key.bytes);
    }
    bus_arrays_t ra = tk_keys_arr(keys, n);
    ra.token_ids = (bus_u32s_t){.v = tok, .n = tokens ? n * S_TPB : 0, .cap = n * S_TPB};
    int rc = tk_call(t, &ra);
    free(keys);
    free(tok);
    return rc;
}

/* complete_put of the last prepare's token; mask NULL: all written. */
static int s_complete(tk_t *t, const char *req, bool *mask)
{
    uint64_t token = t->rep->body.prepare_put_rep.token.token_id;
    uint32_t m = t->arr->keys.n;
    uint64_t ck[S_BIG];
    for (uint32_t i = 0; i < m; i++)
        ck[i] = 0xC0FFEE00u + i;
    return tk_complete_put(t, req, token, mask, mask ? m : 0, ck, m);
}

/* The next stored event (from the batches to come): its index in b, or fails. */
static uint32_t s_next_stored(zsock_t *pull, s_batch_t *b, uint32_t *at, uint64_t *last)
{
    if (*at < b->n && b->ev[*at].ev.which_kind == kvtier_Event_block_stored_tag)
        return (*at)++;
    s_expect(pull, b, "stored/" TK_INST, last);
    *at = 1;
    return 0;
}

/* Checks event ev: keys first.. (n), its parent (UINT32_MAX: none), its token ids
 * (those of its keys, or none). */
static void s_check_stored(const bus_event_t *ev, uint32_t first, uint32_t n, uint32_t parent,
                           bool tokens)
{
    uint8_t k[16];
    assert_int_equal(ev->ev.which_kind, kvtier_Event_block_stored_tag);
    assert_int_equal(ev->keys.n, n);
    for (uint32_t i = 0; i < n; i++) {
        tk_key(first + i, k);
        assert_memory_equal(ev->keys.keys[i], k, 16);
    }
    const kvtier_BlockStored *bs = &ev->ev.kind.block_stored;
    assert_int_equal(bs->tokens_per_block, S_TPB);
    if (parent == UINT32_MAX) {
        assert_int_equal(bs->parent_key.size, 0);
    } else {
        assert_int_equal(bs->parent_key.size, 16);
        tk_key(parent, k);
        assert_memory_equal(bs->parent_key.bytes, k, 16);
    }
    assert_int_equal(ev->tokens.n, tokens ? n * S_TPB : 0);
    for (uint32_t i = 0; i < n && tokens; i++)
        for (uint32_t j = 0; j < S_TPB; j++)
            assert_int_equal(ev->tokens.v[i * S_TPB + j], s_tok(first + i, j));
}

/* A put with a parent and token ids commits: its stored event carries the parent
 * and exactly its keys' token ids. */
static void test_put_parent_and_tokens_reach_the_stored_event(void **state)
{
    (void)state;
    zsock_t *pull = s_bind_input();
    tk_env_t e;
    tk_env_start(&e, S_BIG, s_tweak);
    s_batch_t *b = calloc(1, sizeof *b);
    uint64_t last = 0;
    uint32_t at = 0;
    assert_int_equal(tk_begin(e.t, TK_INST, "r1", 0), 0);
    assert_int_equal(s_prepare_meta(e.t, "r1", 0, 3, 99, true), 0);
    assert_int_equal(s_complete(e.t, "r1", NULL), 0);
    s_check_stored(&b->ev[s_next_stored(pull, b, &at, &last)], 0, 3, 99, true);
    /* without a parent: none for keys[0]; without tokens: none */
    assert_int_equal(s_prepare_meta(e.t, "r1", 10, 2, UINT32_MAX, true), 0);
    assert_int_equal(s_complete(e.t, "r1", NULL), 0);
    s_check_stored(&b->ev[s_next_stored(pull, b, &at, &last)], 10, 2, UINT32_MAX, true);
    assert_int_equal(s_prepare_meta(e.t, "r1", 20, 2, 7, false), 0);
    assert_int_equal(s_complete(e.t, "r1", NULL), 0);
    s_check_stored(&b->ev[s_next_stored(pull, b, &at, &last)], 20, 2, 7, false);
    assert_int_equal(tk_stat(e.t, "events_tokens_dropped"), 0);
    free(b);
    tk_env_stop(&e);
    zsock_destroy(&pull);
}

/* A get+put prepare (issue 13 §2) stands for the request's lookup and its put: it
 * records one CacheGet of the whole request (its hits by tier), and the misses it
 * stores carry the parent (the last hit) and their own token ids, as a lookup
 * followed by prepare_put would have recorded. */
static void test_a_prepare_records_its_lookup_and_its_stored_blocks(void **state)
{
    (void)state;
    zsock_t *pull = s_bind_input();
    tk_env_t e;
    tk_env_start(&e, S_BIG, s_tweak);
    s_batch_t *b = calloc(1, sizeof *b);
    uint64_t last = 0;
    uint32_t at = 0;
    assert_int_equal(tk_begin(e.t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(e.t, "r1", 0, 2), 0);
    s_expect(pull, b, "stored/" TK_INST, &last);
    uint8_t keys[5][16];
    tk_keys(0, 5, keys);
    uint32_t tok[5 * S_TPB];
    for (uint32_t i = 0; i < 5; i++)
        for (uint32_t j = 0; j < S_TPB; j++)
            tok[i * S_TPB + j] = s_tok(i, j);
    kvtier_PrepareRequest *r = &tk_req(e.t, kvtier_Envelope_prepare_req_tag)->body.prepare_req;
    TK_FILL_IDS(r, TK_INST, "r1");
    bus_arrays_t ra = tk_keys_arr(keys, 5);
    ra.token_ids = (bus_u32s_t){.v = tok, .n = 5 * S_TPB, .cap = 5 * S_TPB};
    assert_int_equal(tk_call(e.t, &ra), 0);
    assert_int_equal(e.t->rep->body.prepare_rep.hit_count, 2);
    uint64_t token = e.t->rep->body.prepare_rep.token.token_id;
    s_expect(pull, b, "lookup/" TK_INST, &last);
    const kvtier_CacheGet *g = &b->ev[0].ev.kind.cache_get;
    assert_int_equal(b->ev[0].ev.which_kind, kvtier_Event_cache_get_tag);
    assert_string_equal(g->request_id, "r1");
    assert_int_equal(g->mode, kvtier_LookupMode_LOOKUP_MODE_PREFIX);
    assert_int_equal(g->hit_count, 2);
    assert_int_equal(g->key_count, 5);
    assert_int_equal(g->head_hits, 2);
    assert_int_equal(b->ev[0].keys.n, 5);
    assert_memory_equal(b->ev[0].keys.keys, keys, sizeof keys);
    assert_int_equal(tk_stat(e.t, "lookups"), 1);
    assert_int_equal(tk_stat(e.t, "hits"), 2);
    kvtier_CompleteRequest *c = &tk_req(e.t, kvtier_Envelope_complete_req_tag)->body.complete_req;
    TK_FILL_IDS(c, TK_INST, "r1");
    c->token_id = token;
    uint64_t ck[3] = {1, 2, 3};
    bus_arrays_t ca = {.checksums = {.v = ck, .n = 3, .cap = 3}};
    assert_int_equal(tk_call(e.t, &ca), 0);
    assert_int_equal(e.t->rep->body.complete_rep.committed, 3);
    s_check_stored(&b->ev[s_next_stored(pull, b, &at, &last)], 2, 3, 1, true);
    free(b);
    tk_env_stop(&e);
    zsock_destroy(&pull);
}

/* A partial commit: each committed run's parent is the key before it in the put's
 * order (the put's parent at keys[0]) and it carries exactly its keys' token
 * ids; keys already stored are left out the same way. */
static void test_partial_commit_slices_tokens_and_parents(void **state)
{
    (void)state;
    zsock_t *pull = s_bind_input();
    tk_env_t e;
    tk_env_start(&e, S_BIG, s_tweak);
    s_batch_t *b = calloc(1, sizeof *b);
    uint64_t last = 0;
    uint32_t at = 0;
    assert_int_equal(tk_begin(e.t, TK_INST, "r1", 0), 0);
    assert_int_equal(s_prepare_meta(e.t, "r1", 0, 5, 99, true), 0);
    bool mask[5] = {true, false, true, true, false};
    assert_int_equal(s_complete(e.t, "r1", mask), 0);
    s_check_stored(&b->ev[s_next_stored(pull, b, &at, &last)], 0, 1, 99, true);
    s_check_stored(&b->ev[s_next_stored(pull, b, &at, &last)], 2, 2, 1, true);
    /* keys 0, 2, 3 are stored: a put of 0..5 writes 1, 4, 5 only */
    assert_int_equal(s_prepare_meta(e.t, "r1", 0, 6, 99, true), 0);
    assert_int_equal(e.t->arr->keys.n, 3);
    assert_int_equal(s_complete(e.t, "r1", NULL), 0);
    s_check_stored(&b->ev[s_next_stored(pull, b, &at, &last)], 1, 1, 0, true);
    s_check_stored(&b->ev[s_next_stored(pull, b, &at, &last)], 4, 2, 3, true);
    free(b);
    tk_env_stop(&e);
    zsock_destroy(&pull);
}

/* The put token pool is full: that put keeps no token ids (counted), still
 * commits; an aborted window gives its room back. */
static void test_full_token_pool_drops_tokens_never_the_put(void **state)
{
    (void)state;
    zsock_t *pull = s_bind_input();
    s_put_tokens = 4096; /* one chunk (SCHED_TOK_CHUNK): 195 keys of 16 token ids */
    tk_env_t e;
    tk_env_start(&e, S_BIG, s_tweak_tokens);
    s_put_tokens = 0;
    s_batch_t *b = calloc(1, sizeof *b);
    uint64_t last = 0;
    uint32_t at = 0;
    assert_int_equal(tk_begin(e.t, TK_INST, "hold", 0), 0);
    assert_int_equal(tk_begin(e.t, TK_INST, "r2", 0), 0);
    assert_int_equal(s_prepare_meta(e.t, "hold", 100, 150, UINT32_MAX, true), 0); /* the chunk */
    assert_int_equal(s_prepare_meta(e.t, "r2", 0, 2, 99, true), 0);
    assert_int_equal(s_complete(e.t, "r2", NULL), 0);
    assert_int_equal(tk_stat(e.t, "events_tokens_dropped"), 1);
    bus_event_t *ev = &b->ev[s_next_stored(pull, b, &at, &last)];
    assert_int_equal(ev->keys.n, 2);
    assert_int_equal(ev->tokens.n, 0);
    assert_true(tk_cached(e.t, 0) && tk_cached(e.t, 1));
    /* the holder's window ends (request_end aborts it): the room comes back */
    assert_int_equal(tk_end(e.t, TK_INST, "hold"), 0);
    assert_int_equal(s_prepare_meta(e.t, "r2", 10, 2, 99, true), 0);
    assert_int_equal(s_complete(e.t, "r2", NULL), 0);
    s_check_stored(&b->ev[s_next_stored(pull, b, &at, &last)], 10, 2, 99, true);
    assert_int_equal(tk_stat(e.t, "events_tokens_dropped"), 1);
    free(b);
    tk_env_stop(&e);
    zsock_destroy(&pull);
}

/* Bad token counts and parents are refused before anything is reserved. */
static void test_bad_put_meta_is_refused_nothing_reserved(void **state)
{
    (void)state;
    zsock_t *pull = s_bind_input();
    tk_env_t e;
    tk_env_start(&e, S_BIG, s_tweak);
    assert_int_equal(tk_begin(e.t, TK_INST, "r1", 0), 0);
    uint8_t keys[2][16];
    tk_keys(0, 2, keys);
    uint32_t tok[40] = {0};
    kvtier_PreparePutRequest *r =
        &tk_req(e.t, kvtier_Envelope_prepare_put_req_tag)->body.prepare_put_req;
    TK_FILL_IDS(r, TK_INST, "r1");
    bus_arrays_t ra = tk_keys_arr(keys, 2);
    ra.token_ids = (bus_u32s_t){.v = tok, .n = 31, .cap = 40};
    assert_int_equal(tk_call(e.t, &ra), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(e.t->msg, "31 token ids for 2 keys"));
    r = &tk_req(e.t, kvtier_Envelope_prepare_put_req_tag)->body.prepare_put_req;
    TK_FILL_IDS(r, TK_INST, "r1");
    r->parent_key.size = 8;
    ra.token_ids.n = 0;
    assert_int_equal(tk_call(e.t, &ra), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(e.t->msg, "parent_key is 8 bytes"));
    assert_int_equal(tk_stat(e.t, "reserved"), 0);
    assert_int_equal(tk_stat(e.t, "window_keys"), 0);
    tk_env_stop(&e);
    zsock_destroy(&pull);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events_of_a_put_a_lookup_and_a_remove),
        cmocka_unit_test(test_eviction_is_an_event),
        cmocka_unit_test(test_a_long_lookup_is_cut_and_says_so),
        cmocka_unit_test(test_a_full_input_drops_and_leaves_a_gap),
        cmocka_unit_test(test_put_parent_and_tokens_reach_the_stored_event),
        cmocka_unit_test(test_a_prepare_records_its_lookup_and_its_stored_blocks),
        cmocka_unit_test(test_partial_commit_slices_tokens_and_parents),
        cmocka_unit_test(test_full_token_pool_drops_tokens_never_the_put),
        cmocka_unit_test(test_bad_put_meta_is_refused_nothing_reserved),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
