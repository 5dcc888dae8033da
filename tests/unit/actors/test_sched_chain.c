/* test_sched_chain.c — the scheduler with a two-tier chain (host0 -> nvme0) served
 * by real tier actors (host: POSIX shm; nvme: a file in a mkdtemp directory):
 * prefetch (promotion, DESIGN.md §6, issue 4 §3). Blocks are stored on the nvme
 * tier actor through the tier plane and adopted by the scheduler from its
 * inventory when the tier comes up; the copy is either CopyPrefetch (the
 * scheduler has the migrator copy, what libkvtier's submit_prefetch sends) or a
 * CopySlots the test sends itself (a client that copies on its own).
 * And demotion (issue 4 §4): the reclaimer drains the full host tier through
 * the scheduler's migrator down to nvme. */
#include <errno.h>
#include <inttypes.h>
#include <time.h>

#include "bus_events.h"
#include "copy_testkit.h"
#include "tier_seg.h"
#include "migrator.h"
#include "reclaimer.h"
#include "sched_testkit.h"

#define S_NB 4u /* blocks stored on nvme */

static char s_dir[] = "/tmp/kvt-schedchain-XXXXXX";
static int s_seq;

typedef struct {
    ck_tier_t host, nvme;
    tk_t *t;
    uint8_t keys[S_NB + 1][16]; /* S_NB stored, one never stored */
} s_env_t;

static int s_lookup(s_env_t *e, uint32_t n)
{
    return tk_lookup(e->t, CK_INST, NULL, kvtier_LookupMode_LOOKUP_MODE_PER_KEY, 0, e->keys, n);
}

static bool s_adopted(tk_t *t, void *arg)
{
    s_env_t *e = arg;
    (void)t;
    return s_lookup(e, S_NB) == 0 && e->t->rep->body.lookup_rep.hit_count == S_NB;
}

/* placement: the chain's (0: the default, exclusive); events_input: where the
 * scheduler hands its event batches (NULL: events off). */
static void s_start_cfg(s_env_t *e, const char *migrator_endpoint, uint64_t pin_lease_ms,
                        uint32_t placement, const char *events_input)
{
    memset(e, 0, sizeof *e);
    tier_actor_config_t hc = ck_cfg("host", 1, s_dir, s_seq++);
    tier_actor_config_t nc = ck_cfg("nvme", 2, s_dir, s_seq++);
    ck_start(&e->host, &hc);
    ck_start(&e->nvme, &nc);
    for (uint32_t i = 0; i <= S_NB; i++)
        ck_key(i, e->keys[i]);
    for (uint32_t i = 0; i < S_NB; i++)
        ck_store(&e->nvme, 10 + i, i, 0);

    sched_config_t cfg;
    tk_config(&cfg, CK_CAP, CK_SLOT);
    cfg.n_tiers = 2;
    cfg.tiers[1] = (sched_tier_config_t){.tier_id = 2, .capacity = CK_CAP, .slot_size = CK_SLOT};
    snprintf(cfg.tiers[1].name, sizeof cfg.tiers[1].name, "nvme0");
    snprintf(cfg.tiers[1].kind, sizeof cfg.tiers[1].kind, "nvme");
    cfg.chains[0].n_tiers = 2;
    cfg.chains[0].tier_ids[1] = 2;
    if (migrator_endpoint)
        snprintf(cfg.migrator_endpoint, sizeof cfg.migrator_endpoint, "%s", migrator_endpoint);
    if (pin_lease_ms)
        cfg.pin_lease_ms = pin_lease_ms;
    cfg.chains[0].placement = placement;
    if (events_input)
        snprintf(cfg.events_input, sizeof cfg.events_input, "%s", events_input);
    e->t = tk_new(&cfg);
    assert_int_equal(tk_register(e->t, CK_INST, CK_SLOT), 0);
    tk_tier_up(e->t, 1, e->host.ep, tier_actor_epoch(e->host.actor), CK_CAP, CK_SLOT);
    tk_tier_up(e->t, 2, e->nvme.ep, tier_actor_epoch(e->nvme.actor), CK_CAP, CK_SLOT);
    assert_true(tk_poll(s_adopted, e->t, e));
    assert_int_equal(tk_begin(e->t, CK_INST, "r1", 0), 0);
}

static void s_start_with(s_env_t *e, const char *migrator_endpoint, uint64_t pin_lease_ms)
{
    s_start_cfg(e, migrator_endpoint, pin_lease_ms, 0, NULL);
}

static void s_start(s_env_t *e)
{
    s_start_with(e, NULL, 0);
}

static void s_stop(s_env_t *e)
{
    tk_destroy(&e->t);
    ck_stop(&e->host);
    ck_stop(&e->nvme);
}

/* The copy the client's submit_prefetch sends: CopySlots to the source tier
 * actor, destination header WRITING. Returns the status code. */
static int s_copy(s_env_t *e, const bus_token_view_t *v)
{
    uint64_t src[S_NB], dst[S_NB];
    uint8_t keys[S_NB][16];
    uint32_t n = v->n_entries;
    assert_true(n <= S_NB);
    for (uint32_t i = 0; i < n; i++) {
        bus_token_entry_t en;
        bus_token_entry_at(v, i, &en);
        src[i] = en.src_slot;
        dst[i] = en.slot;
        memcpy(keys[i], e->t->arr->keys.keys[i], 16);
    }
    ck_copy_req(&e->nvme, e->host.ep, 1, kvtier_LocationState_LOCATION_WRITING);
    bus_arrays_t arr = {.slots = {src, n, n}, .dst_slots = {dst, n, n}, .keys = {keys, n, n}};
    bool m[S_NB];
    bus_arrays_t rarr = {.mask = {m, 0, S_NB}};
    kvtier_Status st = {0};
    int rc = bus_client_call(e->nvme.client, &e->nvme.req, &arr, NULL, 0, CK_CALL_MS, &e->nvme.rep,
                             &rarr, NULL, &st);
    return rc == 0 ? 0 : (int)st.code;
}

static int s_complete(s_env_t *e, uint64_t token, bool *mask, uint32_t n_mask)
{
    kvtier_CompletePrefetchRequest *r =
        &tk_req(e->t, kvtier_Envelope_complete_prefetch_req_tag)->body.complete_prefetch_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", CK_INST);
    snprintf(r->request_id, sizeof r->request_id, "%s", "r1");
    r->token_id = token;
    bus_arrays_t ra = {.mask = {.v = mask, .n = mask ? n_mask : 0, .cap = n_mask}};
    return tk_call(e->t, &ra);
}

/* CopyPrefetch of the open window (token): the reply's status code; its flags
 * are in e->t->arr->mask. */
static int s_copy_prefetch(s_env_t *e, uint64_t token)
{
    kvtier_CopyPrefetchRequest *r =
        &tk_req(e->t, kvtier_Envelope_copy_prefetch_req_tag)->body.copy_prefetch_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", CK_INST);
    snprintf(r->request_id, sizeof r->request_id, "%s", "r1");
    r->token_id = token;
    return tk_call(e->t, NULL);
}

/* prepare_prefetch's token: decoded into *v (payload copied into buf). */
static void s_token(s_env_t *e, bus_token_view_t *v, uint8_t *buf, size_t cap)
{
    assert_true(e->t->arr->payload.len <= cap);
    memcpy(buf, e->t->arr->payload.data, e->t->arr->payload.len);
    assert_int_equal(bus_token_decode(buf, e->t->arr->payload.len, v, NULL, 0), 0);
}

/* issue 4 §3: blocks only below the head are advised for prefetch; prepare pins
 * the lower copies and reserves head slots; after the copy, complete commits
 * them on the head, the next lookup reports the head tier, the head copy is
 * byte-exact and (inclusive chain) the lower copy stays. */
static void test_prefetch_promotes_lower_blocks_to_the_head(void **state)
{
    (void)state;
    s_env_t e;
    s_start_cfg(&e, NULL, 0, SCHED_PLACEMENT_INCLUSIVE, NULL);
    assert_int_equal(s_lookup(&e, S_NB), 0);
    assert_true(e.t->rep->body.lookup_rep.prefetch_advised);
    for (uint32_t i = 0; i < S_NB; i++)
        assert_int_equal(e.t->arr->tier_ids.v[i], 2);

    /* the never-stored key is left out of the token */
    assert_int_equal(
        tk_prepare(e.t, kvtier_Envelope_prepare_prefetch_req_tag, CK_INST, "r1", e.keys, S_NB + 1),
        0);
    uint64_t token = e.t->rep->body.prepare_prefetch_rep.token.token_id;
    assert_int_equal(e.t->arr->keys.n, S_NB);
    uint8_t buf[4096];
    bus_token_view_t v;
    s_token(&e, &v, buf, sizeof buf);
    assert_int_equal(v.kind, BUS_TOKEN_PREFETCH);
    assert_int_equal(v.n_entries, S_NB);
    for (uint32_t i = 0; i < S_NB; i++) {
        bus_token_entry_t en;
        bus_token_entry_at(&v, i, &en);
        assert_int_equal(v.tiers[en.src_tier].tier_id, 2);
        assert_int_equal(v.tiers[en.tier].tier_id, 1);
        assert_int_equal(en.src_slot, 10 + i);
        assert_int_equal(en.size, ck_size(i));
        assert_memory_equal(e.t->arr->keys.keys[i], e.keys[i], 16);
    }
    assert_int_equal(tk_stat(e.t, "pinned"), S_NB);
    assert_int_equal(tk_stat(e.t, "reserved"), S_NB);

    assert_int_equal(s_copy(&e, &v), 0);
    /* not committed yet: still served from the lower tier */
    assert_int_equal(s_lookup(&e, S_NB), 0);
    assert_int_equal(e.t->arr->tier_ids.v[0], 2);

    assert_int_equal(s_complete(&e, token, NULL, 0), 0);
    assert_int_equal(e.t->rep->body.complete_prefetch_rep.committed, S_NB);
    assert_int_equal(tk_stat(e.t, "pinned"), 0);
    assert_int_equal(tk_stat(e.t, "reserved"), 0);
    assert_int_equal(tk_stat(e.t, "blocks"), 2 * S_NB); /* the lower copy stays */
    assert_int_equal(s_lookup(&e, S_NB), 0);
    assert_false(e.t->rep->body.lookup_rep.prefetch_advised);
    for (uint32_t i = 0; i < S_NB; i++) {
        assert_int_equal(e.t->arr->tier_ids.v[i], 1);
        bus_token_entry_t en;
        bus_token_entry_at(&v, i, &en);
        assert_int_equal(ck_read_code(&e.host, en.slot, i), 0);
        assert_int_equal(ck_read_code(&e.nvme, 10 + i, i), 0);
    }
    /* a second prefetch has nothing left to promote */
    assert_int_equal(
        tk_prepare(e.t, kvtier_Envelope_prepare_prefetch_req_tag, CK_INST, "r1", e.keys, S_NB), 0);
    assert_int_equal(e.t->arr->keys.n, 0);
    assert_int_equal(s_complete(&e, e.t->rep->body.prepare_prefetch_rep.token.token_id, NULL, 0),
                     0);
    assert_int_equal(tk_stat(e.t, "prefetch_committed"), S_NB);
    s_stop(&e);
}

/* ---- placement (issue 14 §1): exclusive moves a promoted block, inclusive copies it ---- */

/* The events of the batches the scheduler hands to `pull`, until one of kind
 * `until` (a kvtier_Event tag): per kind, the keys of the events on (src tier,
 * dst tier) — stored / removed: dst 0 and src their tier; moved: from, to — with a
 * moved event's reason. */
typedef struct {
    uint32_t stored_on[3];  /* keys stored, by tier id */
    uint32_t removed_on[3]; /* keys removed, by tier id */
    uint32_t promoted;      /* keys moved 2 -> 1, reason PROMOTED */
    uint32_t other_moves;   /* any other move */
} s_seen_t;

static void s_events_until(zsock_t *pull, pb_size_t until, s_seen_t *seen)
{
    static kvtier_EventBatch batch;
    static bus_event_t ev[64];
    static uint8_t pool[4096][16];
    for (int round = 0; round < 64; round++) {
        zpoller_t *p = zpoller_new(pull, NULL);
        void *which = zpoller_wait(p, (int)TK_CALL_MS);
        zpoller_destroy(&p);
        assert_non_null(which);
        zmsg_t *m = zmsg_recv(pull);
        assert_non_null(m);
        assert_int_equal(zmsg_size(m), 3);
        zframe_t *pl = zmsg_last(m);
        bus_keys_t keys = {.keys = pool, .cap = 4096};
        uint32_t n = 0;
        kvtier_Status st;
        assert_int_equal(
            bus_events_decode(zframe_data(pl), zframe_size(pl), &batch, ev, 64, &n, &keys, &st), 0);
        zmsg_destroy(&m);
        bool done = false;
        for (uint32_t i = 0; i < n; i++) {
            const kvtier_Event *x = &ev[i].ev;
            uint32_t k = ev[i].keys.n;
            if (x->which_kind == kvtier_Event_block_stored_tag && x->kind.block_stored.tier_id < 3)
                seen->stored_on[x->kind.block_stored.tier_id] += k;
            else if (x->which_kind == kvtier_Event_block_removed_tag &&
                     x->kind.block_removed.tier_id < 3)
                seen->removed_on[x->kind.block_removed.tier_id] += k;
            else if (x->which_kind == kvtier_Event_block_moved_tag) {
                const kvtier_BlockMoved *mv = &x->kind.block_moved;
                if (mv->src_tier_id == 2 && mv->dst_tier_id == 1 &&
                    mv->reason == kvtier_MoveReason_MOVE_REASON_PROMOTED &&
                    mv->src_medium == kvtier_Medium_MEDIUM_DISK &&
                    mv->dst_medium == kvtier_Medium_MEDIUM_CPU)
                    seen->promoted += k;
                else
                    seen->other_moves += k;
            }
            done = done || x->which_kind == until;
        }
        if (done)
            return;
    }
    fail_msg("no event of kind %u", (unsigned)until);
}

static zsock_t *s_events_pull(char *ep, size_t len)
{
    static int seq;
    snprintf(ep, len, "inproc://test-sched-chain-events-%d-%d", (int)getpid(), seq++);
    zsock_t *pull = zsock_new(ZMQ_PULL);
    assert_non_null(pull);
    assert_int_equal(zsock_bind(pull, "%s", ep), 0);
    return pull;
}

/* prepare_prefetch + CopyPrefetch + complete_prefetch of the first n stored keys
 * in request r1: every one committed on the head. */
static void s_promote(s_env_t *e, uint32_t n)
{
    assert_int_equal(
        tk_prepare(e->t, kvtier_Envelope_prepare_prefetch_req_tag, CK_INST, "r1", e->keys, n), 0);
    uint64_t token = e->t->rep->body.prepare_prefetch_rep.token.token_id;
    assert_int_equal(e->t->arr->keys.n, n);
    assert_int_equal(s_copy_prefetch(e, token), 0);
    assert_int_equal(e->t->rep->body.copy_prefetch_rep.copied, n);
    assert_int_equal(s_complete(e, token, NULL, 0), 0);
    assert_int_equal(e->t->rep->body.complete_prefetch_rep.committed, n);
}

static bool s_nvme_slot_gone(tk_t *t, void *arg)
{
    s_env_t *e = arg;
    (void)t;
    for (uint32_t i = 0; i < S_NB; i++)
        if (ck_read_code(&e->nvme, 10 + i, i) == 0)
            return false;
    return true;
}

/* Exclusive (the default): complete_prefetch moves each committed block — its nvme
 * copy is freed in the index and on the tier (DeleteSlots), the event stream says
 * BlockMoved nvme0 -> host0 with reason PROMOTED (and no BlockStored on host0:
 * one location), prefetch_moved counts them, and the head copy loads byte-exact. */
static void test_exclusive_prefetch_moves_the_block(void **state)
{
    (void)state;
    char ep[128];
    zsock_t *pull = s_events_pull(ep, sizeof ep);
    s_env_t e;
    s_start_cfg(&e, NULL, 0, SCHED_PLACEMENT_EXCLUSIVE, ep);
    s_promote(&e, S_NB);
    assert_int_equal(tk_stat(e.t, "blocks"), S_NB); /* one copy each */
    assert_int_equal(tk_stat(e.t, "tier.nvme0.used"), 0);
    assert_int_equal(tk_stat(e.t, "deleting"), 0);
    assert_int_equal(tk_stat(e.t, "prefetch_moved"), S_NB);
    assert_int_equal(s_lookup(&e, S_NB), 0);
    assert_int_equal(e.t->rep->body.lookup_rep.hit_count, S_NB);
    for (uint32_t i = 0; i < S_NB; i++)
        assert_int_equal(e.t->arr->tier_ids.v[i], 1);
    assert_true(tk_poll(s_nvme_slot_gone, e.t, &e)); /* DeleteSlots reached nvme0 */
    /* everything from the start: the adoption (stored on nvme0) and its lookups,
     * the moves, then the lookup above */
    s_seen_t seen = {0};
    while (seen.promoted < S_NB)
        s_events_until(pull, kvtier_Event_block_moved_tag, &seen);
    s_events_until(pull, kvtier_Event_cache_get_tag, &seen);
    assert_int_equal(seen.stored_on[2], S_NB);
    assert_int_equal(seen.promoted, S_NB);
    assert_int_equal(seen.other_moves, 0);
    assert_int_equal(seen.stored_on[1], 0);
    assert_int_equal(seen.removed_on[2], 0); /* a move, not a removal */
    s_stop(&e);
    zsock_destroy(&pull);
}

static bool s_none_deleting(tk_t *t, void *arg)
{
    (void)arg;
    return tk_stat(t, "deleting") == 0;
}

/* Exclusive, with a reader on the nvme copy: the promoted block serves from the
 * head at once; the held nvme copy is DELETING (no longer served) and freed when
 * the reader completes, never under it. */
static void test_exclusive_prefetch_frees_a_held_copy_after_its_reader(void **state)
{
    (void)state;
    s_env_t e;
    s_start_cfg(&e, NULL, 0, SCHED_PLACEMENT_EXCLUSIVE, NULL);
    assert_int_equal(tk_begin(e.t, CK_INST, "r2", 0), 0);
    assert_int_equal(tk_prepare(e.t, kvtier_Envelope_prepare_get_req_tag, CK_INST, "r2", e.keys, 1),
                     0);
    uint64_t get_token = e.t->rep->body.prepare_get_rep.token.token_id;
    s_promote(&e, S_NB);
    assert_int_equal(tk_stat(e.t, "deleting"), 1);          /* key 0: held by r2 */
    assert_int_equal(tk_stat(e.t, "tier.nvme0.used"), 1);   /* slot not reused yet */
    assert_int_equal(ck_read_code(&e.nvme, 10, 0), 0);      /* the reader's bytes */
    assert_int_equal(tk_stat(e.t, "prefetch_moved"), S_NB); /* all moved */
    kvtier_CompleteGetRequest *cg =
        &tk_req(e.t, kvtier_Envelope_complete_get_req_tag)->body.complete_get_req;
    TK_FILL_IDS(cg, CK_INST, "r2");
    cg->token_id = get_token;
    assert_int_equal(tk_call(e.t, NULL), 0);
    assert_true(tk_poll(s_none_deleting, e.t, NULL)); /* freed at the next tick */
    assert_int_equal(tk_stat(e.t, "tier.nvme0.used"), 0);
    assert_int_equal(tk_stat(e.t, "blocks"), S_NB);
    s_stop(&e);
}

/* Inclusive: complete_prefetch copies — the nvme copy stays (two locations, lookups
 * report the head), the events say BlockStored on host0 and no move, and
 * prefetch_moved stays 0. */
static void test_inclusive_prefetch_keeps_the_lower_copy(void **state)
{
    (void)state;
    char ep[128];
    zsock_t *pull = s_events_pull(ep, sizeof ep);
    s_env_t e;
    s_start_cfg(&e, NULL, 0, SCHED_PLACEMENT_INCLUSIVE, ep);
    s_promote(&e, S_NB);
    assert_int_equal(tk_stat(e.t, "blocks"), 2 * S_NB);
    assert_int_equal(tk_stat(e.t, "tier.nvme0.used"), S_NB);
    assert_int_equal(tk_stat(e.t, "prefetch_moved"), 0);
    assert_int_equal(s_lookup(&e, S_NB), 0);
    for (uint32_t i = 0; i < S_NB; i++) {
        assert_int_equal(e.t->arr->tier_ids.v[i], 1);
        assert_int_equal(ck_read_code(&e.nvme, 10 + i, i), 0);
    }
    s_seen_t seen = {0};
    while (seen.stored_on[1] < S_NB)
        s_events_until(pull, kvtier_Event_block_stored_tag, &seen);
    s_events_until(pull, kvtier_Event_cache_get_tag, &seen);
    assert_int_equal(seen.stored_on[1], S_NB);
    assert_int_equal(seen.stored_on[2], S_NB);
    assert_int_equal(seen.promoted + seen.other_moves, 0);
    s_stop(&e);
    zsock_destroy(&pull);
}

/* A placement out of the enum is refused by the config check, naming it. */
static void test_bad_placement_is_refused(void **state)
{
    (void)state;
    sched_config_t cfg;
    tk_config(&cfg, CK_CAP, CK_SLOT);
    cfg.chains[0].placement = 3;
    char err[256];
    assert_int_equal(sched_config_check(&cfg, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "placement"));
}

/* issue 4 §3: complete_prefetch(failure) rolls back: the head reservation is
 * released, the pin dropped, and the block is still served from the lower tier. */
static void test_failed_prefetch_rolls_back(void **state)
{
    (void)state;
    s_env_t e;
    s_start(&e);
    assert_int_equal(
        tk_prepare(e.t, kvtier_Envelope_prepare_prefetch_req_tag, CK_INST, "r1", e.keys, 2), 0);
    uint64_t token = e.t->rep->body.prepare_prefetch_rep.token.token_id;
    uint8_t buf[4096];
    bus_token_view_t v;
    s_token(&e, &v, buf, sizeof buf);
    assert_int_equal(s_copy(&e, &v), 0);
    bool mask[2] = {true, false};
    assert_int_equal(s_complete(&e, token, mask, 2), 0);
    assert_int_equal(e.t->rep->body.complete_prefetch_rep.committed, 1);
    assert_int_equal(tk_stat(e.t, "pinned"), 0);
    assert_int_equal(tk_stat(e.t, "reserved"), 0);
    assert_int_equal(tk_stat(e.t, "prefetch_failed"), 1);
    assert_int_equal(s_lookup(&e, 2), 0);
    assert_int_equal(e.t->arr->tier_ids.v[0], 1);
    assert_int_equal(e.t->arr->tier_ids.v[1], 2);
    assert_int_equal(ck_read_code(&e.nvme, 11, 1), 0);
    s_stop(&e);
}

/* Window rules as for get/put (DESIGN.md §6): one open prefetch window per
 * request; request_end closes it, releasing the pins and the reservations. */
static void test_prefetch_window_closed_by_request_end(void **state)
{
    (void)state;
    s_env_t e;
    s_start(&e);
    assert_int_equal(
        tk_prepare(e.t, kvtier_Envelope_prepare_prefetch_req_tag, CK_INST, "r1", e.keys, S_NB), 0);
    assert_int_equal(
        tk_prepare(e.t, kvtier_Envelope_prepare_prefetch_req_tag, CK_INST, "r1", e.keys, S_NB),
        kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(tk_stat(e.t, "pinned"), S_NB);
    assert_int_equal(tk_end(e.t, CK_INST, "r1"), 0);
    assert_int_equal(e.t->rep->body.request_end_rep.closed_windows_count, 1);
    assert_int_equal(e.t->rep->body.request_end_rep.closed_windows[0],
                     kvtier_WindowKind_WINDOW_KIND_PREFETCH);
    assert_int_equal(e.t->rep->body.request_end_rep.released_pins, S_NB);
    assert_int_equal(e.t->rep->body.request_end_rep.aborted_reservations, S_NB);
    assert_int_equal(tk_stat(e.t, "pinned"), 0);
    assert_int_equal(tk_stat(e.t, "reserved"), 0);
    assert_int_equal(s_lookup(&e, S_NB), 0);
    assert_int_equal(e.t->arr->tier_ids.v[0], 2);
    s_stop(&e);
}

/* DESIGN.md §6: CopyPrefetch has the migrator copy the window's blocks tier actor
 * to tier actor (prefetch priority) and answers once they are copied, one flag
 * per token key; complete then commits them on the head, byte-exact. */
static void test_prefetch_copies_through_the_migrator(void **state)
{
    (void)state;
    s_env_t e;
    s_start(&e);
    assert_int_equal(
        tk_prepare(e.t, kvtier_Envelope_prepare_prefetch_req_tag, CK_INST, "r1", e.keys, S_NB + 1),
        0);
    uint64_t token = e.t->rep->body.prepare_prefetch_rep.token.token_id;
    uint8_t buf[4096];
    bus_token_view_t v;
    s_token(&e, &v, buf, sizeof buf);
    assert_int_equal(s_copy_prefetch(&e, token), 0);
    assert_int_equal(e.t->rep->body.copy_prefetch_rep.copied, S_NB);
    assert_int_equal(e.t->arr->mask.n, S_NB);
    for (uint32_t i = 0; i < S_NB; i++)
        assert_true(e.t->arr->mask.v[i]);
    assert_int_equal(tk_stat(e.t, "prefetch_copied"), S_NB);
    assert_true(tk_stat(e.t, "prefetch_copy_jobs") >= 1);
    assert_int_equal(tk_stat(e.t, "pinned"), S_NB); /* held until complete */
    assert_int_equal(s_complete(&e, token, NULL, 0), 0);
    assert_int_equal(e.t->rep->body.complete_prefetch_rep.committed, S_NB);
    assert_int_equal(tk_stat(e.t, "pinned"), 0);
    assert_int_equal(tk_stat(e.t, "reserved"), 0);
    assert_int_equal(s_lookup(&e, S_NB), 0);
    for (uint32_t i = 0; i < S_NB; i++) {
        assert_int_equal(e.t->arr->tier_ids.v[i], 1);
        bus_token_entry_t en;
        bus_token_entry_at(&v, i, &en);
        assert_int_equal(ck_read_code(&e.host, en.slot, i), 0);
    }
    /* the window is closed: a CopyPrefetch of it now is refused */
    assert_int_equal(s_copy_prefetch(&e, token), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    s_stop(&e);
}

/* A block whose source changed under the copy is not copied (the tier actor's
 * unchanged-source check); complete commits only what the migrator copied, even
 * when the caller says every key succeeded. */
static void test_prefetch_commits_only_what_was_copied(void **state)
{
    (void)state;
    s_env_t e;
    s_start(&e);
    assert_int_equal(
        tk_prepare(e.t, kvtier_Envelope_prepare_prefetch_req_tag, CK_INST, "r1", e.keys, S_NB), 0);
    uint64_t token = e.t->rep->body.prepare_prefetch_rep.token.token_id;
    /* another block behind the scheduler's back in the last key's source slot */
    ck_store(&e.nvme, 10 + S_NB - 1, 0, 0);
    assert_int_equal(s_copy_prefetch(&e, token), 0);
    assert_int_equal(e.t->rep->body.copy_prefetch_rep.copied, S_NB - 1);
    assert_int_equal(e.t->arr->mask.n, S_NB);
    assert_false(e.t->arr->mask.v[S_NB - 1]);
    assert_int_equal(tk_stat(e.t, "prefetch_copy_failed"), 1);
    bool all[S_NB] = {true, true, true, true};
    assert_int_equal(s_complete(&e, token, all, S_NB), 0);
    assert_int_equal(e.t->rep->body.complete_prefetch_rep.committed, S_NB - 1);
    assert_int_equal(tk_stat(e.t, "reserved"), 0);
    assert_int_equal(s_lookup(&e, S_NB), 0);
    assert_int_equal(e.t->arr->tier_ids.v[0], 1);
    assert_int_equal(e.t->arr->tier_ids.v[S_NB - 1], 2);
    s_stop(&e);
}

/* A stand-in migrator the test drives: takes one job (answers OK) and sends its
 * result when told, so a copy can be held in flight. */
typedef struct {
    bus_server_t *srv;
    bus_request_t req;
    bus_arrays_t *arr;
    migrator_job_t job;
} s_mig_t;

static void s_mig_take_job_answering(s_mig_t *m, bus_code_t answer)
{
    int64_t until = zclock_mono() + TK_CALL_MS;
    int rc = 0;
    while ((rc = bus_server_recv(m->srv, 100, &m->req, m->arr)) == 0 && zclock_mono() < until)
        ;
    assert_int_equal(rc, 1);
    assert_int_equal(m->req.env.which_body, kvtier_Envelope_migrate_job_req_tag);
    char why[200];
    assert_int_equal(
        migrator_job_decode(&m->req.env.body.migrate_job_req, &m->job, why, sizeof why), 0);
    assert_int_equal(m->job.priority, MIGRATOR_PREFETCH);
    assert_true(m->job.dispatch_within_ms > 0); /* a late copy is refused, not run */
    kvtier_Status st;
    if (answer == kvtier_StatusCode_STATUS_OK) {
        kvtier_Envelope rep;
        bus_env_init_reply(&rep, &m->req.env, kvtier_Envelope_migrate_job_rep_tag, "test-migrator");
        assert_int_equal(bus_server_reply(m->srv, m->req.routing_id, &rep, NULL, NULL, 0, &st), 0);
    } else {
        assert_int_equal(bus_server_reply_error(m->srv, m->req.routing_id, m->req.env.corr_id,
                                                answer, "test-migrator: queue full"),
                         0);
    }
    bus_request_reset(&m->req);
}

static void s_mig_take_job(s_mig_t *m)
{
    s_mig_take_job_answering(m, kvtier_StatusCode_STATUS_OK);
}

/* Sends the held job's result (every slot copied; dst_tier_id 0: the job's) to
 * the scheduler's internal plane: the answer's status code. */
static int s_mig_result_as(s_mig_t *m, tk_t *t, uint32_t dst_tier_id)
{
    char ep[256];
    assert_int_equal(sched_actor_internal_endpoint(t->sched, ep, sizeof ep), 0);
    bus_client_config_t cc = {.name = "test-migrator", .max_in_flight = 1};
    bus_client_t *cl = bus_client_new(ep, &cc);
    assert_non_null(cl);
    kvtier_Envelope *env = calloc(1, sizeof *env), *rep = calloc(1, sizeof *rep);
    assert_true(env && rep);
    bus_env_init(env, kvtier_Envelope_demote_done_req_tag, "test-migrator");
    kvtier_DemoteDoneRequest *d = &env->body.demote_done_req;
    d->job_id = m->job.job_id;
    d->priority = m->job.priority;
    d->src_tier_id = m->job.src_tier_id;
    d->dst_tier_id = dst_tier_id ? dst_tier_id : m->job.dst_tier_id;
    d->has_status = true;
    d->results_count = (pb_size_t)m->job.n;
    for (uint32_t i = 0; i < m->job.n; i++) {
        d->results[i].has_block = true;
        d->results[i].block.tier_id = m->job.src_tier_id;
        d->results[i].block.slot = m->job.src_slots[i];
        memcpy(d->results[i].block.key, m->job.keys[i], 16);
        d->results[i].dst_slot = m->job.dst_slots[i];
        d->results[i].ok = true;
    }
    kvtier_Status st = {0};
    int rc = bus_client_call(cl, env, NULL, NULL, 0, TK_CALL_MS, rep, NULL, NULL, &st);
    free(env);
    free(rep);
    bus_client_destroy(&cl);
    return rc == 0 ? 0 : (int)st.code;
}

static void s_mig_result(s_mig_t *m, tk_t *t)
{
    assert_int_equal(s_mig_result_as(m, t, 0), 0);
}

static bool s_copy_mask[S_NB];
static uint32_t s_copy_mask_n;

static int s_copy_reply_code = -1;
static bus_arrays_t s_copy_arr = {.mask = {s_copy_mask, 0, S_NB}};
static void s_copy_replied(void *arg, bus_reply_t *r)
{
    (void)arg;
    s_copy_reply_code = (int)r->status.code;
    s_copy_mask_n = s_copy_arr.mask.n;
}

/* CopyPrefetch of r1's window sent without waiting (s_copy_replied takes the answer). */
static void s_copy_prefetch_async(s_env_t *e, uint64_t token)
{
    kvtier_CopyPrefetchRequest *r =
        &tk_req(e->t, kvtier_Envelope_copy_prefetch_req_tag)->body.copy_prefetch_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", CK_INST);
    snprintf(r->request_id, sizeof r->request_id, "%s", "r1");
    r->token_id = token;
    kvtier_Status st;
    s_copy_reply_code = -1;
    s_copy_arr.mask.n = 0;
    assert_int_equal(bus_client_send(e->t->c, e->t->req, NULL, NULL, 0, TK_CALL_MS, &s_copy_arr,
                                     s_copy_replied, NULL, NULL, &st),
                     0);
}

static void s_copy_reply_wait(s_env_t *e)
{
    int64_t until = zclock_mono() + TK_CALL_MS;
    while (s_copy_reply_code < 0 && zclock_mono() < until)
        bus_client_dispatch(e->t->c, 50);
}

/* The window copies until the migrator's result: no complete (BUSY), no second
 * copy; request_end mid-copy frees the request's name at once and keeps its pins
 * and head reservations until the copy ends, then releases them and tells the
 * CopyPrefetch caller nothing was promoted. */
static void test_request_end_mid_copy_holds_the_slots(void **state)
{
    (void)state;
    s_mig_t m = {.arr = bus_arrays_new(256, 0)};
    m.srv = bus_server_new("tcp://127.0.0.1:*", "test-migrator");
    assert_non_null(m.srv);
    s_env_t e;
    s_start_with(&e, bus_server_endpoint(m.srv), 0);
    assert_int_equal(
        tk_prepare(e.t, kvtier_Envelope_prepare_prefetch_req_tag, CK_INST, "r1", e.keys, S_NB), 0);
    uint64_t token = e.t->rep->body.prepare_prefetch_rep.token.token_id;
    /* CopyPrefetch sent without waiting: its answer comes when the copy ends */
    s_copy_prefetch_async(&e, token);
    s_mig_take_job(&m);
    assert_int_equal(m.job.n, S_NB);
    assert_int_equal(s_complete(&e, token, NULL, 0), kvtier_StatusCode_STATUS_BUSY);
    assert_int_equal(s_copy_prefetch(&e, token), kvtier_StatusCode_STATUS_BUSY);
    assert_int_equal(tk_end(e.t, CK_INST, "r1"), 0);
    assert_int_equal(e.t->rep->body.request_end_rep.closed_windows_count, 1);
    assert_int_equal(tk_stat(e.t, "pinned"), S_NB); /* the copy still writes */
    assert_int_equal(tk_stat(e.t, "reserved"), S_NB);
    assert_int_equal(tk_begin(e.t, CK_INST, "r1", 0), 0); /* the name is free */
    assert_int_equal(s_copy_reply_code, -1);
    /* a result naming other tiers is not this job's */
    assert_int_equal(s_mig_result_as(&m, e.t, 7), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(tk_stat(e.t, "pinned"), S_NB);
    s_mig_result(&m, e.t);
    assert_int_equal(tk_stat(e.t, "pinned"), 0);
    assert_int_equal(tk_stat(e.t, "reserved"), 0);
    s_copy_reply_wait(&e);
    assert_int_equal(s_copy_reply_code, kvtier_StatusCode_STATUS_NOT_FOUND);
    assert_int_equal(s_lookup(&e, S_NB), 0); /* nothing promoted */
    for (uint32_t i = 0; i < S_NB; i++)
        assert_int_equal(e.t->arr->tier_ids.v[i], 2);
    assert_int_equal(tk_end(e.t, CK_INST, "r1"), 0);
    s_stop(&e);
    bus_server_destroy(&m.srv);
    bus_arrays_destroy(&m.arr);
}

/* A job the migrator refuses (its queue is full) waits in the window and goes
 * again at a later tick; when the copy ends the window's lease starts again, so a
 * copy that took longer than the lease still leaves time to complete. */
static void test_refused_copy_waits_and_the_lease_restarts(void **state)
{
    (void)state;
    s_mig_t m = {.arr = bus_arrays_new(256, 0)};
    m.srv = bus_server_new("tcp://127.0.0.1:*", "test-migrator");
    assert_non_null(m.srv);
    s_env_t e;
    s_start_with(&e, bus_server_endpoint(m.srv), 1500);
    assert_int_equal(
        tk_prepare(e.t, kvtier_Envelope_prepare_prefetch_req_tag, CK_INST, "r1", e.keys, S_NB), 0);
    uint64_t token = e.t->rep->body.prepare_prefetch_rep.token.token_id;
    s_copy_prefetch_async(&e, token);
    s_mig_take_job_answering(&m, kvtier_StatusCode_STATUS_UNAVAILABLE);
    s_mig_take_job(&m); /* the same pairs, again */
    assert_int_equal(m.job.n, S_NB);
    /* the copy runs past the lease (1.5 s) before its result comes */
    zclock_sleep(2000);
    assert_int_equal(tk_stat(e.t, "pinned"), S_NB); /* no lapse while copying */
    s_mig_result(&m, e.t);
    s_copy_reply_wait(&e);
    assert_int_equal(s_copy_reply_code, 0);
    assert_int_equal(s_copy_mask_n, S_NB);
    for (uint32_t i = 0; i < S_NB; i++)
        assert_true(s_copy_mask[i]);
    /* a few lease-scan ticks (at most 250 ms each) well inside the restarted lease:
     * a lease counted from the prepare would lapse the window here */
    zclock_sleep(500);
    assert_int_equal(tk_stat(e.t, "pinned"), S_NB);
    /* the stand-in copied nothing really: complete fails the headers' check or
     * commits; either way the window was still open to complete */
    assert_int_not_equal(s_complete(&e, token, NULL, 0), kvtier_StatusCode_STATUS_EXPIRED);
    assert_int_equal(tk_stat(e.t, "pinned"), 0);
    s_stop(&e);
    bus_server_destroy(&m.srv);
    bus_arrays_destroy(&m.arr);
}

/* ---- demotion ---- */

#define S_PUTS 24u /* blocks written to a 32-slot host tier */
#define S_PINNED 4u

static void s_demote_cfg(s_env_t *e, sched_config_t *cfg)
{
    tier_actor_config_t hc = ck_cfg("host", 1, s_dir, s_seq++);
    tier_actor_config_t nc = ck_cfg("nvme", 2, s_dir, s_seq++);
    ck_start(&e->host, &hc);
    ck_start(&e->nvme, &nc);
    tk_config(cfg, CK_CAP, CK_SLOT);
    cfg->n_tiers = 2;
    cfg->tiers[1] = (sched_tier_config_t){.tier_id = 2, .capacity = CK_CAP, .slot_size = CK_SLOT};
    snprintf(cfg->tiers[1].name, sizeof cfg->tiers[1].name, "nvme0");
    snprintf(cfg->tiers[1].kind, sizeof cfg->tiers[1].kind, "nvme");
    cfg->chains[0].n_tiers = 2;
    cfg->chains[0].tier_ids[1] = 2;
    cfg->demote = true;
    cfg->delete_delay_ms = 10;
}

/* A put through the scheduler with real bytes: prepare_put, WriteSlots to the
 * tier actor its token names (the head: host unless drained; the client's frames
 * path), complete_put with the checksum. Returns the tier id it went to. */
static uint32_t s_put_block(s_env_t *e, uint32_t seed, uint8_t *buf)
{
    uint8_t key[1][16];
    ck_key(seed, key[0]);
    int rc;
    /* BUSY: the full head tier is demoting to make room; retried like libkvtier
     * does (bounded: the demotion completes or the test fails) */
    for (int i = 0; (rc = tk_prepare(e->t, kvtier_Envelope_prepare_put_req_tag, CK_INST, "w", key,
                                     1)) == kvtier_StatusCode_STATUS_BUSY &&
                    i < 4000;
         i++)
        zclock_sleep(5);
    assert_int_equal(rc, 0);
    uint64_t token = e->t->rep->body.prepare_put_rep.token.token_id;
    uint8_t tb[512];
    bus_token_view_t v;
    s_token(e, &v, tb, sizeof tb);
    assert_int_equal(v.n_entries, 1);
    bus_token_entry_t en;
    bus_token_entry_at(&v, 0, &en);
    ck_fill(buf, CK_SLOT, seed);
    uint64_t slot = en.slot, sz = CK_SLOT;
    kvtier_Status st;
    bus_payload_t pl = {buf, CK_SLOT, NULL, NULL};
    uint32_t tier_id = v.tiers[en.tier].tier_id;
    ck_tier_t *dst = tier_id == 2 ? &e->nvme : &e->host;
    bus_env_init(&dst->req, kvtier_Envelope_write_slots_req_tag, "test");
    dst->req.body.write_slots_req.tier_id = tier_id;
    bus_arrays_t arr = {.slots = {&slot, 1, 1}, .sizes = {&sz, 1, 1}};
    assert_int_equal(bus_client_call(dst->client, &dst->req, &arr, &pl, 1, CK_CALL_MS, &dst->rep,
                                     NULL, NULL, &st),
                     0);
    struct iovec iov = {buf, CK_SLOT};
    uint64_t ck = tier_checksum(&iov, 1);
    kvtier_CompletePutRequest *r =
        &tk_req(e->t, kvtier_Envelope_complete_put_req_tag)->body.complete_put_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", CK_INST);
    snprintf(r->request_id, sizeof r->request_id, "w");
    r->token_id = token;
    bus_arrays_t ra = {.checksums = {.v = &ck, .n = 1, .cap = 1}};
    assert_int_equal(tk_call(e->t, &ra), 0);
    assert_int_equal(e->t->rep->body.complete_put_rep.committed, 1);
    return tier_id;
}

/* Reads `slot` of tier actor t (key of seed) and compares with the seed's bytes. */
static void s_read_exact(ck_tier_t *t, uint64_t slot, uint32_t seed, uint8_t *want)
{
    uint8_t key[1][16];
    ck_key(seed, key[0]);
    uint64_t sizes[4];
    bus_arrays_t rarr = {.sizes = {sizes, 0, 4}};
    zmsg_t *payload = NULL;
    kvtier_Status st = {0};
    bus_env_init(&t->req, kvtier_Envelope_read_slots_req_tag, "test");
    t->req.body.read_slots_req.tier_id = t->cfg.tier_id;
    bus_arrays_t arr = {.slots = {&slot, 1, 1}, .keys = {key, 1, 1}};
    int rc = bus_client_call(t->client, &t->req, &arr, NULL, 0, CK_CALL_MS, &t->rep, &rarr,
                             &payload, &st);
    if (rc != 0)
        fail_msg("read slot %" PRIu64 " of tier %u: %s", slot, t->cfg.tier_id, st.message);
    ck_fill(want, CK_SLOT, seed);
    assert_int_equal(zmsg_size(payload), 1);
    zframe_t *f = zmsg_first(payload);
    assert_int_equal(zframe_size(f), CK_SLOT);
    assert_memory_equal(zframe_data(f), want, CK_SLOT);
    zmsg_destroy(&payload);
}

static void s_complete_get(s_env_t *e, uint64_t token)
{
    kvtier_CompleteGetRequest *r =
        &tk_req(e->t, kvtier_Envelope_complete_get_req_tag)->body.complete_get_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", CK_INST);
    snprintf(r->request_id, sizeof r->request_id, "g");
    r->token_id = token;
    assert_int_equal(tk_call(e->t, NULL), 0);
}

/* The scheduler of a demote config with both tier actors up and request "w" open. */
static void s_demote_up(s_env_t *e, const sched_config_t *cfg)
{
    e->t = tk_new(cfg);
    assert_int_equal(tk_register(e->t, CK_INST, CK_SLOT), 0);
    tk_tier_up(e->t, 1, e->host.ep, tier_actor_epoch(e->host.actor), CK_CAP, CK_SLOT);
    tk_tier_up(e->t, 2, e->nvme.ep, tier_actor_epoch(e->nvme.actor), CK_CAP, CK_SLOT);
    assert_int_equal(tk_begin(e->t, CK_INST, "w", 0), 0);
}

/* A get of KEY (request "g") through the tier its token names, which must be
 * tier_id; its bytes must be SEED's. */
static void s_get_exact(s_env_t *e, const uint8_t key[16], uint32_t tier_id, uint32_t seed,
                        uint8_t *buf)
{
    uint8_t k[1][16];
    memcpy(k[0], key, 16);
    assert_int_equal(tk_prepare(e->t, kvtier_Envelope_prepare_get_req_tag, CK_INST, "g", k, 1), 0);
    uint64_t tok = e->t->rep->body.prepare_get_rep.token.token_id;
    uint8_t tb[512];
    bus_token_view_t v;
    s_token(e, &v, tb, sizeof tb);
    bus_token_entry_t en;
    bus_token_entry_at(&v, 0, &en);
    assert_int_equal(v.tiers[en.tier].tier_id, tier_id);
    s_read_exact(tier_id == 2 ? &e->nvme : &e->host, en.slot, seed, buf);
    s_complete_get(e, tok);
}

typedef struct {
    uint64_t demoted;
} s_demote_want_t;

static bool s_demoted(tk_t *t, void *arg)
{
    const s_demote_want_t *w = arg;
    return tk_stat(t, "demoted") >= w->demoted && tk_stat(t, "deleting") == 0 &&
           tk_stat(t, "tier.host0.used") <= CK_CAP / 4;
}

/* issue 4 §4 / DESIGN.md §6: above its high watermark the host tier's coldest
 * unpinned blocks are demoted to nvme (copied tier to tier, then switched; the
 * source freed after the delete delay) until below the low watermark; lookups
 * then find them on tier 2 with prefetch advised and gets from nvme are
 * byte-exact; pinned blocks are never demoted. */
static void test_reclaimer_demotes_cold_blocks_to_the_next_tier(void **state)
{
    (void)state;
    s_env_t e;
    memset(&e, 0, sizeof e);
    sched_config_t cfg;
    s_demote_cfg(&e, &cfg);
    s_demote_up(&e, &cfg);
    uint8_t *buf = malloc(CK_SLOT);
    assert_non_null(buf);
    for (uint32_t i = 0; i < S_PUTS; i++)
        s_put_block(&e, 100 + i, buf);
    /* the oldest (coldest) blocks are pinned by an open get window */
    uint8_t keys[S_PUTS][16];
    for (uint32_t i = 0; i < S_PUTS; i++)
        ck_key(100 + i, keys[i]);
    assert_int_equal(tk_begin(e.t, CK_INST, "g", 0), 0);
    assert_int_equal(
        tk_prepare(e.t, kvtier_Envelope_prepare_get_req_tag, CK_INST, "g", keys, S_PINNED), 0);
    uint64_t gtok = e.t->rep->body.prepare_get_rep.token.token_id;

    reclaimer_config_t rc;
    memset(&rc, 0, sizeof rc);
    assert_int_equal(
        sched_actor_internal_endpoint(e.t->sched, rc.sched_endpoint, sizeof rc.sched_endpoint), 0);
    rc.interval_ms = 10;
    rc.n_tiers = 2;
    rc.tiers[0] = (reclaimer_tier_t){1, 500, 250, false};
    rc.tiers[1] = (reclaimer_tier_t){2, 900, 800, false};
    zactor_t *rec = reclaimer_actor_new(&rc);
    assert_non_null(rec);
    /* 24 of 32 slots used, 4 pinned: at most 8 may stay, so 16 or more go down */
    s_demote_want_t w = {S_PUTS - CK_CAP / 4};
    assert_true(tk_poll(s_demoted, e.t, &w));
    zactor_destroy(&rec);
    assert_int_equal(tk_stat(e.t, "demote_failed"), 0);

    assert_int_equal(
        tk_lookup(e.t, CK_INST, NULL, kvtier_LookupMode_LOOKUP_MODE_PER_KEY, 0, keys, S_PUTS), 0);
    assert_int_equal(e.t->rep->body.lookup_rep.hit_count, S_PUTS);
    assert_true(e.t->rep->body.lookup_rep.prefetch_advised);
    uint8_t tiers[S_PUTS];
    uint32_t lower = 0;
    for (uint32_t i = 0; i < S_PUTS; i++) {
        tiers[i] = (uint8_t)e.t->arr->tier_ids.v[i];
        lower += tiers[i] == 2;
    }
    /* exactly down to the low watermark: 8 of 32 slots stay */
    assert_int_equal(lower, S_PUTS - CK_CAP / 4);
    assert_int_equal(tk_stat(e.t, "demoted"), S_PUTS - CK_CAP / 4);
    assert_int_equal(tk_stat(e.t, "tier.host0.used"), CK_CAP / 4);
    assert_int_equal(tk_stat(e.t, "tier.nvme0.used"), S_PUTS - CK_CAP / 4);
    for (uint32_t i = 0; i < S_PINNED; i++)
        assert_int_equal(tiers[i], 1); /* pinned: never demoted */
    s_complete_get(&e, gtok);

    /* gets: the token names each block's tier; every load is byte-exact */
    for (uint32_t i = 0; i < S_PUTS; i++) {
        s_get_exact(&e, keys[i], tiers[i], 100 + i, buf);
    }
    free(buf);
    s_stop(&e);
}

/* A demoted block keeps its deadline: blocks put with a request TTL and demoted
 * to nvme expire there when the TTL passes (before, the demotion's reservation
 * had no deadline and the nvme copy never expired in the index). */
static void test_demoted_blocks_keep_their_ttl(void **state)
{
    (void)state;
    s_env_t e;
    memset(&e, 0, sizeof e);
    sched_config_t cfg;
    s_demote_cfg(&e, &cfg);
    e.t = tk_new(&cfg);
    assert_int_equal(tk_register(e.t, CK_INST, CK_SLOT), 0);
    tk_tier_up(e.t, 1, e.host.ep, tier_actor_epoch(e.host.actor), CK_CAP, CK_SLOT);
    tk_tier_up(e.t, 2, e.nvme.ep, tier_actor_epoch(e.nvme.actor), CK_CAP, CK_SLOT);
    const uint64_t ttl_ms = 8000;
    int64_t t0 = zclock_mono();
    assert_int_equal(tk_begin(e.t, CK_INST, "w", ttl_ms), 0);
    uint8_t *buf = malloc(CK_SLOT);
    assert_non_null(buf);
    for (uint32_t i = 0; i < S_PUTS; i++)
        s_put_block(&e, 300 + i, buf);
    uint8_t keys[S_PUTS][16];
    for (uint32_t i = 0; i < S_PUTS; i++)
        ck_key(300 + i, keys[i]);
    reclaimer_config_t rc;
    memset(&rc, 0, sizeof rc);
    assert_int_equal(
        sched_actor_internal_endpoint(e.t->sched, rc.sched_endpoint, sizeof rc.sched_endpoint), 0);
    rc.interval_ms = 10;
    rc.n_tiers = 2;
    rc.tiers[0] = (reclaimer_tier_t){1, 500, 250, false};
    rc.tiers[1] = (reclaimer_tier_t){2, 900, 800, false};
    zactor_t *rec = reclaimer_actor_new(&rc);
    assert_non_null(rec);
    s_demote_want_t w = {S_PUTS - CK_CAP / 4};
    assert_true(tk_poll(s_demoted, e.t, &w));
    zactor_destroy(&rec);
    /* still alive on nvme: the TTL has not passed (skip the rest if this machine
     * was too slow to demote within it: nothing to tell then) */
    assert_int_equal(
        tk_lookup(e.t, CK_INST, NULL, kvtier_LookupMode_LOOKUP_MODE_PER_KEY, 0, keys, S_PUTS), 0);
    uint32_t lower = 0;
    for (uint32_t i = 0; i < S_PUTS; i++)
        lower += e.t->arr->mask.v[i] && e.t->arr->tier_ids.v[i] == 2;
    if (zclock_mono() - t0 < (int64_t)ttl_ms - 500) {
        assert_int_equal(lower, S_PUTS - CK_CAP / 4);
        while (zclock_mono() - t0 < (int64_t)ttl_ms + 200)
            zclock_sleep(50);
        assert_int_equal(
            tk_lookup(e.t, CK_INST, NULL, kvtier_LookupMode_LOOKUP_MODE_PER_KEY, 0, keys, S_PUTS),
            0);
        assert_int_equal(e.t->rep->body.lookup_rep.hit_count, 0); /* every copy expired */
    } else {
        free(buf);
        s_stop(&e);
        skip(); /* demotion took longer than the TTL here: nothing to tell */
    }
    free(buf);
    s_stop(&e);
}

static int s_touch(s_env_t *e, uint8_t (*keys)[16], uint32_t n, uint64_t ttl_ms)
{
    kvtier_TouchRequest *r = &tk_req(e->t, kvtier_Envelope_touch_req_tag)->body.touch_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", CK_INST);
    r->ttl_ms = ttl_ms;
    bus_arrays_t ra = tk_keys_arr(keys, n);
    return tk_call(e->t, &ra);
}

static int64_t s_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* issue 9 §1: "a touch that extends a deadline reaches the tier's header (today
 * a touched block can expire early after re-adoption)". Blocks put with a 30 s
 * TTL, touched with a 1 h one: their host-tier headers carry the new deadline (an
 * index rebuilt from the inventory keeps it); a touch that does not extend (a
 * shorter TTL) leaves them as they are. */
static void test_touch_that_extends_reaches_the_tier_header(void **state)
{
    (void)state;
    s_env_t e;
    memset(&e, 0, sizeof e);
    sched_config_t cfg;
    s_demote_cfg(&e, &cfg);
    cfg.demote = false;
    e.t = tk_new(&cfg);
    assert_int_equal(tk_register(e.t, CK_INST, CK_SLOT), 0);
    tk_tier_up(e.t, 1, e.host.ep, tier_actor_epoch(e.host.actor), CK_CAP, CK_SLOT);
    tk_tier_up(e.t, 2, e.nvme.ep, tier_actor_epoch(e.nvme.actor), CK_CAP, CK_SLOT);
    assert_int_equal(tk_begin(e.t, CK_INST, "w", 30000), 0);
    uint8_t *buf = malloc(CK_SLOT);
    assert_non_null(buf);
    enum { N = 6 };
    uint8_t keys[N][16];
    for (uint32_t i = 0; i < N; i++) {
        s_put_block(&e, 700 + i, buf);
        ck_key(700 + i, keys[i]);
    }
    char err[256];
    tier_seg_t *seg = NULL;
    assert_int_equal(tier_seg_attach(e.host.cfg.tier.path, CK_SLOT, CK_CAP, &seg, err, sizeof err),
                     0);
    /* the deadlines of the N SERVING headers, in slot order */
    uint64_t before[N], after[N];
    uint32_t nb = 0;
    for (uint64_t slot = 0; slot < CK_CAP && nb < N; slot++) {
        tier_slot_header_t h;
        if (tier_seg_get_header(seg, slot, &h) == 0 && h.state == TIER_SLOT_SERVING)
            before[nb++] = h.deadline_ms;
    }
    assert_int_equal(nb, N);
    int64_t wall = s_wall_ms();
    for (uint32_t i = 0; i < N; i++)
        assert_true(before[i] > 0 && before[i] <= (uint64_t)wall + 30000);
    assert_int_equal(s_touch(&e, keys, N, 3600000), 0);
    assert_int_equal(e.t->rep->body.touch_rep.touched, N);
    /* the rewrite is sent with the touch, answered after its reply: wait for it */
    uint32_t na = 0;
    for (int tries = 0; tries < 500; tries++) {
        na = 0;
        for (uint64_t slot = 0; slot < CK_CAP && na < N; slot++) {
            tier_slot_header_t h;
            if (tier_seg_get_header(seg, slot, &h) == 0 && h.state == TIER_SLOT_SERVING &&
                h.deadline_ms > (uint64_t)wall + 3000000)
                after[na++] = h.deadline_ms;
        }
        if (na == N)
            break;
        zclock_sleep(10);
    }
    assert_int_equal(na, N);
    for (uint32_t i = 0; i < N; i++)
        assert_true(after[i] <= (uint64_t)s_wall_ms() + 3600000);
    /* a shorter TTL extends nothing, and nothing is rewritten */
    assert_int_equal(s_touch(&e, keys, N, 1000), 0);
    assert_int_equal(e.t->rep->body.touch_rep.touched, N);
    zclock_sleep(100);
    assert_int_equal(tk_stat(e.t, "tier_errors"), 0);
    assert_int_equal(tk_stat(e.t, "touch_rewrites_skipped"), 0);
    for (uint64_t slot = 0, j = 0; slot < CK_CAP && j < N; slot++) {
        tier_slot_header_t h;
        if (tier_seg_get_header(seg, slot, &h) == 0 && h.state == TIER_SLOT_SERVING)
            assert_true(h.deadline_ms == after[j++]);
    }
    tier_seg_detach(&seg);
    free(buf);
    s_stop(&e);
}

/* STYLE 5 / migrator.h: the internal plane serves DemoteDone now, and never
 * trusts it: a result of a job not in flight is NOT_FOUND, a malformed one
 * (unknown priority) INVALID_ARGUMENT, and neither changes a location. */
static void test_demote_done_is_checked_on_the_internal_plane(void **state)
{
    (void)state;
    s_env_t e;
    memset(&e, 0, sizeof e);
    sched_config_t cfg;
    s_demote_cfg(&e, &cfg);
    s_demote_up(&e, &cfg);
    char ep[SCHED_ENDPOINT_MAX];
    assert_int_equal(sched_actor_internal_endpoint(e.t->sched, ep, sizeof ep), 0);
    bus_client_t *c = bus_client_new(ep, &(bus_client_config_t){.name = "test"});
    assert_non_null(c);
    static kvtier_Envelope req, rep;
    kvtier_Status st;
    bus_env_init(&req, kvtier_Envelope_demote_done_req_tag, "test");
    req.body.demote_done_req.job_id = 999;
    req.body.demote_done_req.src_tier_id = 1;
    req.body.demote_done_req.dst_tier_id = 2;
    req.body.demote_done_req.priority = MIGRATOR_DEMOTE;
    assert_int_not_equal(bus_client_call(c, &req, NULL, NULL, 0, CK_CALL_MS, &rep, NULL, NULL, &st),
                         0);
    assert_int_equal(st.code, kvtier_StatusCode_STATUS_NOT_FOUND);
    req.body.demote_done_req.priority = 9;
    assert_int_not_equal(bus_client_call(c, &req, NULL, NULL, 0, CK_CALL_MS, &rep, NULL, NULL, &st),
                         0);
    assert_int_equal(st.code, kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(tk_stat(e.t, "demoted"), 0);
    bus_client_destroy(&c);
    s_stop(&e);
}

/* A max_batch below a migrator job's 64 blocks: demotion jobs stay within it
 * (the scheduler's scratch arrays are max_batch long; ASan checks) and the
 * reclaimer still drains the tier to its low watermark. */
static void test_demotion_respects_max_batch(void **state)
{
    (void)state;
    s_env_t e;
    memset(&e, 0, sizeof e);
    sched_config_t cfg;
    s_demote_cfg(&e, &cfg);
    cfg.max_batch = 8;
    s_demote_up(&e, &cfg);
    uint8_t *buf = malloc(CK_SLOT);
    assert_non_null(buf);
    for (uint32_t i = 0; i < S_PUTS; i++)
        s_put_block(&e, 700 + i, buf);
    reclaimer_config_t rc;
    memset(&rc, 0, sizeof rc);
    assert_int_equal(
        sched_actor_internal_endpoint(e.t->sched, rc.sched_endpoint, sizeof rc.sched_endpoint), 0);
    rc.interval_ms = 10;
    rc.n_tiers = 2;
    rc.tiers[0] = (reclaimer_tier_t){1, 500, 250, false};
    rc.tiers[1] = (reclaimer_tier_t){2, 900, 800, false};
    zactor_t *rec = reclaimer_actor_new(&rc);
    assert_non_null(rec);
    s_demote_want_t w = {S_PUTS - CK_CAP / 4};
    assert_true(tk_poll(s_demoted, e.t, &w));
    zactor_destroy(&rec);
    assert_int_equal(tk_stat(e.t, "demoted"), S_PUTS - CK_CAP / 4);
    assert_int_equal(tk_stat(e.t, "demote_failed"), 0);
    assert_int_equal(tk_stat(e.t, "tier.nvme0.used"), S_PUTS - CK_CAP / 4);
    free(buf);
    s_stop(&e);
}

/* issue 4 §6 "nothing is lost while the NVMe tier has room": a write that finds
 * the head tier full (no reclaimer running here) is answered BUSY while the
 * scheduler demotes the head's coldest blocks at once; retried, it lands, and no
 * block is ever dropped: all 56 blocks written to a 32-slot host tier chained to
 * a 32-slot nvme tier are found and load byte-exact. Pinned blocks stay. */
static void test_full_head_demotes_instead_of_dropping(void **state)
{
    (void)state;
    enum { N = 56 };
    s_env_t e;
    memset(&e, 0, sizeof e);
    sched_config_t cfg;
    s_demote_cfg(&e, &cfg);
    s_demote_up(&e, &cfg);
    uint8_t *buf = malloc(CK_SLOT);
    assert_non_null(buf);
    uint8_t keys[N][16];
    for (uint32_t i = 0; i < N; i++)
        ck_key(200 + i, keys[i]);
    for (uint32_t i = 0; i < CK_CAP; i++)
        s_put_block(&e, 200 + i, buf);
    /* the oldest blocks are pinned by an open get window: never demoted */
    assert_int_equal(tk_begin(e.t, CK_INST, "g", 0), 0);
    assert_int_equal(
        tk_prepare(e.t, kvtier_Envelope_prepare_get_req_tag, CK_INST, "g", keys, S_PINNED), 0);
    uint64_t gtok = e.t->rep->body.prepare_get_rep.token.token_id;
    /* the head is full: the next put is told to retry, and demotion starts */
    assert_int_equal(
        tk_prepare(e.t, kvtier_Envelope_prepare_put_req_tag, CK_INST, "w", &keys[CK_CAP], 1),
        kvtier_StatusCode_STATUS_BUSY);
    assert_true(tk_stat(e.t, "room_demotions") > 0);
    assert_int_equal(tk_stat(e.t, "put_busy"), 1);
    for (uint32_t i = CK_CAP; i < N; i++)
        s_put_block(&e, 200 + i, buf);
    assert_int_equal(tk_stat(e.t, "evictions"), 0);
    assert_int_equal(tk_stat(e.t, "demote_failed"), 0);
    assert_int_equal(
        tk_lookup(e.t, CK_INST, NULL, kvtier_LookupMode_LOOKUP_MODE_PER_KEY, 0, keys, N), 0);
    assert_int_equal(e.t->rep->body.lookup_rep.hit_count, N);
    uint8_t tiers[N];
    for (uint32_t i = 0; i < N; i++)
        tiers[i] = (uint8_t)e.t->arr->tier_ids.v[i];
    for (uint32_t i = 0; i < S_PINNED; i++)
        assert_int_equal(tiers[i], 1);
    s_complete_get(&e, gtok);
    for (uint32_t i = 0; i < N; i++) {
        s_get_exact(&e, keys[i], tiers[i], 200 + i, buf);
    }
    free(buf);
    s_stop(&e);
}

/* A head reclaimed on demand (cfg.room_on_demand): a write that finds it full
 * has exactly its need demoted, not a sixteenth of the head more, and lands once
 * it is done; the head is full again after it (no room kept idle). */
static bool s_demotions_done(tk_t *t, void *arg)
{
    (void)arg;
    return tk_stat(t, "demoted") == tk_stat(t, "demote_submitted");
}

static void test_on_demand_head_demotes_exactly_the_need(void **state)
{
    (void)state;
    enum { M = 3 };
    s_env_t e;
    memset(&e, 0, sizeof e);
    sched_config_t cfg;
    s_demote_cfg(&e, &cfg);
    cfg.tiers[0].room_on_demand = true;
    s_demote_up(&e, &cfg);
    uint8_t *buf = malloc(CK_SLOT);
    assert_non_null(buf);
    uint8_t keys[M][16];
    for (uint32_t i = 0; i < M; i++)
        ck_key(500 + i, keys[i]);
    for (uint32_t i = 0; i < CK_CAP; i++)
        s_put_block(&e, 300 + i, buf);
    assert_int_equal(tk_prepare(e.t, kvtier_Envelope_prepare_put_req_tag, CK_INST, "w", keys, M),
                     kvtier_StatusCode_STATUS_BUSY);
    assert_int_equal(tk_stat(e.t, "room_demotions"), M); /* CK_CAP / 16 more without it */
    assert_true(tk_poll(s_demotions_done, e.t, NULL));
    for (uint32_t i = 0; i < M; i++)
        s_put_block(&e, 500 + i, buf);
    assert_int_equal(tk_stat(e.t, "room_demotions"), M);
    assert_int_equal(tk_stat(e.t, "tier.host0.used"), CK_CAP);
    assert_int_equal(tk_stat(e.t, "evictions"), 0);
    free(buf);
    s_stop(&e);
}

/* Fairness under pressure: the largest write told BUSY is the one room is kept
 * for; a smaller write or a prefetch of another request may not take the slots
 * being freed first (BUSY too), so a big write is not starved by small ones.
 * Deterministic: the full head's blocks are all pinned, nothing can go until the
 * get window closes; then the big write lands first, then the small one. */
static void test_room_is_kept_for_the_largest_busy_write(void **state)
{
    (void)state;
    enum { BIG = 8 };
    s_env_t e;
    memset(&e, 0, sizeof e);
    sched_config_t cfg;
    s_demote_cfg(&e, &cfg);
    ck_store(&e.nvme, 3, 900, 0); /* a block only below the head: prefetchable */
    s_demote_up(&e, &cfg);
    uint8_t *buf = malloc(CK_SLOT);
    assert_non_null(buf);
    uint8_t keys[CK_CAP][16];
    for (uint32_t i = 0; i < CK_CAP; i++) {
        ck_key(300 + i, keys[i]);
        s_put_block(&e, 300 + i, buf);
    }
    assert_int_equal(tk_begin(e.t, CK_INST, "g", 0), 0);
    assert_int_equal(
        tk_prepare(e.t, kvtier_Envelope_prepare_get_req_tag, CK_INST, "g", keys, CK_CAP), 0);
    uint64_t gtok = e.t->rep->body.prepare_get_rep.token.token_id;
    /* the big write: BUSY (blocks are held, they will be released) */
    uint8_t big[BIG][16], small[1][16], lower[1][16];
    for (uint32_t i = 0; i < BIG; i++)
        ck_key(500 + i, big[i]);
    ck_key(600, small[0]);
    ck_key(900, lower[0]);
    assert_int_equal(tk_begin(e.t, CK_INST, "big", 0), 0);
    assert_int_equal(tk_begin(e.t, CK_INST, "small", 0), 0);
    assert_int_equal(tk_prepare(e.t, kvtier_Envelope_prepare_put_req_tag, CK_INST, "big", big, BIG),
                     kvtier_StatusCode_STATUS_BUSY);
    /* room is kept for it: a smaller write and a prefetch of others wait too */
    assert_int_equal(
        tk_prepare(e.t, kvtier_Envelope_prepare_put_req_tag, CK_INST, "small", small, 1),
        kvtier_StatusCode_STATUS_BUSY);
    assert_non_null(strstr(e.t->msg, "earlier write of 8 blocks"));
    /* a re-put of blocks already on the head takes no slot: not held back */
    assert_int_equal(tk_begin(e.t, CK_INST, "again", 0), 0);
    assert_int_equal(
        tk_prepare(e.t, kvtier_Envelope_prepare_put_req_tag, CK_INST, "again", keys, 2), 0);
    assert_int_equal(e.t->rep->body.prepare_put_rep.skipped, 2);
    assert_int_equal(
        tk_prepare(e.t, kvtier_Envelope_prepare_prefetch_req_tag, CK_INST, "small", lower, 1),
        kvtier_StatusCode_STATUS_BUSY);
    assert_int_equal(tk_stat(e.t, "pinned"), CK_CAP); /* the prefetch's source pin undone */
    s_complete_get(&e, gtok);
    /* the big write lands (once demotion made room), then the small one */
    int rc;
    for (int i = 0; (rc = tk_prepare(e.t, kvtier_Envelope_prepare_put_req_tag, CK_INST, "big", big,
                                     BIG)) == kvtier_StatusCode_STATUS_BUSY &&
                    i < 4000;
         i++)
        zclock_sleep(5);
    assert_int_equal(rc, 0);
    for (int i = 0; (rc = tk_prepare(e.t, kvtier_Envelope_prepare_put_req_tag, CK_INST, "small",
                                     small, 1)) == kvtier_StatusCode_STATUS_BUSY &&
                    i < 4000;
         i++)
        zclock_sleep(5);
    assert_int_equal(rc, 0);
    assert_int_equal(tk_stat(e.t, "evictions"), 0);
    free(buf);
    s_stop(&e);
}

/* ---- kvtier drain (issue 9 §3) ---- */

/* AdminDrainRequest for TIER; returns the status code, the reply in e->t->rep. */
static int s_drain(s_env_t *e, const char *tier, bool status_only, bool cancel)
{
    kvtier_AdminDrainRequest *r =
        &tk_req(e->t, kvtier_Envelope_admin_drain_req_tag)->body.admin_drain_req;
    snprintf(r->tier, sizeof r->tier, "%s", tier);
    r->status_only = status_only;
    r->cancel = cancel;
    return tk_call(e->t, NULL);
}

typedef struct {
    uint64_t host_used, nvme_used;
} s_used_want_t;

static bool s_used_is(tk_t *t, void *arg)
{
    const s_used_want_t *w = arg;
    return tk_stat(t, "tier.host0.used") == w->host_used &&
           tk_stat(t, "tier.nvme0.used") == w->nvme_used;
}

static bool s_retired(tk_t *t, void *arg)
{
    (void)arg;
    tk_req(t, kvtier_Envelope_admin_drain_req_tag);
    snprintf(t->req->body.admin_drain_req.tier, sizeof t->req->body.admin_drain_req.tier, "host0");
    t->req->body.admin_drain_req.status_only = true;
    return tk_call(t, NULL) == 0 &&
           t->rep->body.admin_drain_rep.state == kvtier_TierDrain_TIER_DRAIN_RETIRED;
}

#define S_DRAIN_PUTS 8u
#define S_DRAIN_PINNED 2u

/* Draining host0 (chain host0 -> nvme0): refusals (unknown tier, the chain's last
 * tier, a second drain); new puts land on nvme0 at once; the unpinned blocks move
 * down through the migrator, the pinned ones wait for their pins; once empty host0
 * is retired (ClusterInfo says so too); every block reads byte-exact from nvme0;
 * a cancel brings host0 back as the head. */
static void test_drain_moves_blocks_down_and_retires(void **state)
{
    (void)state;
    s_env_t e;
    memset(&e, 0, sizeof e);
    sched_config_t cfg;
    s_demote_cfg(&e, &cfg);
    s_demote_up(&e, &cfg);
    uint8_t *buf = malloc(CK_SLOT);
    assert_non_null(buf);
    uint8_t keys[S_DRAIN_PUTS + 1][16];
    for (uint32_t i = 0; i < S_DRAIN_PUTS; i++) {
        assert_int_equal(s_put_block(&e, 700 + i, buf), 1);
        ck_key(700 + i, keys[i]);
    }
    assert_int_equal(tk_begin(e.t, CK_INST, "g", 0), 0);
    assert_int_equal(
        tk_prepare(e.t, kvtier_Envelope_prepare_get_req_tag, CK_INST, "g", keys, S_DRAIN_PINNED),
        0);
    uint64_t gtok = e.t->rep->body.prepare_get_rep.token.token_id;

    assert_int_equal(s_drain(&e, "host9", false, false), kvtier_StatusCode_STATUS_NOT_FOUND);
    assert_non_null(strstr(e.t->msg, "no tier named \"host9\""));
    assert_int_equal(s_drain(&e, "nvme0", false, false), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(e.t->msg, "last tier of chain"));
    assert_int_equal(s_drain(&e, "", false, false), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(s_drain(&e, "host0", true, true), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(s_drain(&e, "host0", true, false), 0);
    assert_int_equal(e.t->rep->body.admin_drain_rep.state, kvtier_TierDrain_TIER_DRAIN_NONE);

    assert_int_equal(s_drain(&e, "host0", false, false), 0);
    assert_int_equal(e.t->rep->body.admin_drain_rep.state, kvtier_TierDrain_TIER_DRAIN_DRAINING);
    assert_string_equal(e.t->rep->body.admin_drain_rep.next_tier, "nvme0");
    assert_int_equal(s_drain(&e, "host0", false, false), kvtier_StatusCode_STATUS_CONFLICT);
    assert_non_null(strstr(e.t->msg, "already draining"));

    /* placements stop: a new put goes to nvme0 */
    assert_int_equal(s_put_block(&e, 800, buf), 2);
    ck_key(800, keys[S_DRAIN_PUTS]);

    /* the unpinned blocks move down; the pinned ones wait */
    s_used_want_t w = {S_DRAIN_PINNED, S_DRAIN_PUTS - S_DRAIN_PINNED + 1};
    assert_true(tk_poll(s_used_is, e.t, &w));
    assert_int_equal(s_drain(&e, "host0", true, false), 0);
    assert_int_equal(e.t->rep->body.admin_drain_rep.state, kvtier_TierDrain_TIER_DRAIN_DRAINING);
    assert_int_equal(e.t->rep->body.admin_drain_rep.blocks_left, S_DRAIN_PINNED);
    assert_int_equal(e.t->rep->body.admin_drain_rep.blocks_moved, S_DRAIN_PUTS - S_DRAIN_PINNED);
    assert_int_equal(tk_tier(e.t, 1)->drain, kvtier_TierDrain_TIER_DRAIN_DRAINING);

    /* the pins go: the rest moves, then host0 is retired */
    s_complete_get(&e, gtok);
    assert_true(tk_poll(s_retired, e.t, NULL));
    assert_int_equal(e.t->rep->body.admin_drain_rep.blocks_left, 0);
    assert_int_equal(e.t->rep->body.admin_drain_rep.blocks_moved, S_DRAIN_PUTS);
    assert_int_equal(tk_tier(e.t, 1)->drain, kvtier_TierDrain_TIER_DRAIN_RETIRED);
    assert_int_equal(tk_stat(e.t, "tier.nvme0.used"), S_DRAIN_PUTS + 1);
    assert_int_equal(tk_stat(e.t, "demote_failed"), 0);
    assert_int_equal(s_drain(&e, "host0", false, false), kvtier_StatusCode_STATUS_CONFLICT);
    assert_non_null(strstr(e.t->msg, "already retired"));

    /* nothing lost: every block is on nvme0, byte-exact */
    assert_int_equal(tk_lookup(e.t, CK_INST, NULL, kvtier_LookupMode_LOOKUP_MODE_PER_KEY, 0, keys,
                               S_DRAIN_PUTS + 1),
                     0);
    assert_int_equal(e.t->rep->body.lookup_rep.hit_count, S_DRAIN_PUTS + 1);
    /* nvme0 is the head now: nothing to promote */
    assert_false(e.t->rep->body.lookup_rep.prefetch_advised);
    for (uint32_t i = 0; i <= S_DRAIN_PUTS; i++)
        assert_int_equal(e.t->arr->tier_ids.v[i], 2);
    for (uint32_t i = 0; i < S_DRAIN_PUTS; i++)
        s_get_exact(&e, keys[i], 2, 700 + i, buf);
    s_get_exact(&e, keys[S_DRAIN_PUTS], 2, 800, buf);
    /* a retired tier takes nothing: still a put to nvme0 */
    assert_int_equal(s_put_block(&e, 801, buf), 2);

    /* cancel: host0 is the head again */
    assert_int_equal(s_drain(&e, "host0", false, true), 0);
    assert_int_equal(e.t->rep->body.admin_drain_rep.state, kvtier_TierDrain_TIER_DRAIN_NONE);
    assert_int_equal(tk_tier(e.t, 1)->drain, kvtier_TierDrain_TIER_DRAIN_NONE);
    assert_int_equal(s_put_block(&e, 802, buf), 1);
    free(buf);
    s_stop(&e);
}

/* A drain needs demotion (the scheduler's migrator moves the blocks): without it
 * CONFLICT, and the tier keeps taking blocks. */
static void test_drain_without_demotion_is_refused(void **state)
{
    (void)state;
    s_env_t e;
    s_start(&e);
    assert_int_equal(s_drain(&e, "host0", false, false), kvtier_StatusCode_STATUS_CONFLICT);
    assert_non_null(strstr(e.t->msg, "without demotion"));
    assert_int_equal(tk_tier(e.t, 1)->drain, kvtier_TierDrain_TIER_DRAIN_NONE);
    s_stop(&e);
}

static int s_setup(void **state)
{
    (void)state;
    return mkdtemp(s_dir) ? 0 : -1;
}

static int s_teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefetch_promotes_lower_blocks_to_the_head),
        cmocka_unit_test(test_exclusive_prefetch_moves_the_block),
        cmocka_unit_test(test_exclusive_prefetch_frees_a_held_copy_after_its_reader),
        cmocka_unit_test(test_inclusive_prefetch_keeps_the_lower_copy),
        cmocka_unit_test(test_bad_placement_is_refused),
        cmocka_unit_test(test_demote_done_is_checked_on_the_internal_plane),
        cmocka_unit_test(test_failed_prefetch_rolls_back),
        cmocka_unit_test(test_prefetch_window_closed_by_request_end),
        cmocka_unit_test(test_prefetch_copies_through_the_migrator),
        cmocka_unit_test(test_prefetch_commits_only_what_was_copied),
        cmocka_unit_test(test_request_end_mid_copy_holds_the_slots),
        cmocka_unit_test(test_refused_copy_waits_and_the_lease_restarts),
        cmocka_unit_test(test_reclaimer_demotes_cold_blocks_to_the_next_tier),
        cmocka_unit_test(test_demoted_blocks_keep_their_ttl),
        cmocka_unit_test(test_touch_that_extends_reaches_the_tier_header),
        cmocka_unit_test(test_demotion_respects_max_batch),
        cmocka_unit_test(test_full_head_demotes_instead_of_dropping),
        cmocka_unit_test(test_on_demand_head_demotes_exactly_the_need),
        cmocka_unit_test(test_room_is_kept_for_the_largest_busy_write),
        cmocka_unit_test(test_drain_moves_blocks_down_and_retires),
        cmocka_unit_test(test_drain_without_demotion_is_refused),
    };
    int rc = cmocka_run_group_tests(tests, s_setup, s_teardown);
    zsys_shutdown();
    return rc;
}
