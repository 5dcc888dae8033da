/* test_sched_actor.c — the scheduler actor's meta plane over real sockets, against
 * a fake tier actor (tests/support/sched_fake_tier.h): start and bind, ClusterInfo,
 * stats and their pages, and malformed requests leaving stored blocks intact
 * (DESIGN.md §6). The index's and the requests module's rules are in
 * test_sched_index.c and test_sched_requests.c. */
#include "sched_testkit.h"

#include "tier_actor.h"

/* Issue 3 §1: the actor binds an ephemeral endpoint, reports it, and ClusterInfo
 * names the leader, the epoch and the tiers with their fill. */
static void test_start_reports_endpoint_and_cluster_info(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    assert_non_null(strstr(e.t->ep, "tcp://127.0.0.1:"));
    tk_req(e.t, kvtier_Envelope_cluster_info_req_tag);
    assert_int_equal(tk_call(e.t, NULL), 0);
    const kvtier_ClusterInfoReply *r = &e.t->rep->body.cluster_info_rep;
    assert_string_equal(r->cluster, "kvtier");
    assert_string_equal(r->leader_endpoint, e.t->ep);
    assert_int_equal(r->leader_epoch, 7);
    assert_int_equal(r->tiers_count, 1);
    assert_string_equal(r->tiers[0].name, "host0");
    assert_int_equal(r->tiers[0].kind, kvtier_TierKind_TIER_KIND_HOST);
    assert_string_equal(r->tiers[0].endpoint, sched_fake_tier_endpoint(e.ft));
    assert_string_equal(r->tiers[0].shm, "/kvtier-test-host0");
    assert_int_equal(r->tiers[0].capacity_slots, 16);
    assert_int_equal(r->tiers[0].used_slots, 0);
    assert_true(r->tiers[0].up);
    tk_env_stop(&e);
}

/* A bad config is refused: the constructor returns NULL. */
static void test_bad_config_returns_null(void **state)
{
    (void)state;
    sched_config_t cfg;
    tk_config(&cfg, 16, 4096);
    cfg.chains[0].tier_ids[0] = 5;
    char err[256];
    assert_int_not_equal(sched_config_check(&cfg, err, sizeof err), 0);
    assert_non_null(strstr(err, "chain"));
    assert_null(sched_actor_new(&cfg));
    tk_config(&cfg, 16, 4096);
    snprintf(cfg.tiers[0].policy, sizeof cfg.tiers[0].policy, "nope");
    assert_null(sched_actor_new(&cfg));
}

/* A meta endpoint already bound elsewhere: the constructor returns NULL. */
static void test_bind_failure_returns_null(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 4, NULL);
    sched_config_t cfg = e.cfg;
    snprintf(cfg.endpoint, sizeof cfg.endpoint, "%s", e.t->ep);
    assert_null(sched_actor_new(&cfg));
    tk_env_stop(&e);
}

/* DESIGN.md §5: malformed input gets INVALID_ARGUMENT (or NOT_FOUND for unknown
 * names) with a message, and stored blocks are intact afterwards. */
static void test_malformed_requests_leave_blocks_intact(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 4), 0);
    uint8_t keys[4][16];
    tk_keys(0, 4, keys);

    /* more keys than max_batch: refused by the decoder */
    kvtier_Envelope *env = tk_req(t, kvtier_Envelope_lookup_req_tag);
    snprintf(env->body.lookup_req.instance_id, 64, "%s", TK_INST);
    uint8_t(*big)[16] = calloc(2000, 16);
    bus_arrays_t ra = tk_keys_arr(big, 2000); /* over max_batch 1024 */
    assert_int_equal(tk_call(t, &ra), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    free(big);
    /* empty ids, unknown request, empty key lists */
    assert_int_equal(tk_begin(t, "", "x", 0), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(tk_begin(t, TK_INST, "", 0), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(tk_begin(t, TK_INST, "x", 1ull << 50),
                     kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(tk_prepare_put(t, "r1", keys, 0), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(tk_prepare_get(t, "r1", keys, 0), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    /* a key twice in one put batch */
    uint8_t dup[2][16];
    tk_key(9, dup[0]);
    tk_key(9, dup[1]);
    assert_int_equal(tk_prepare_put(t, "r1", dup, 2), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    /* complete_put with a wrong mask length or without checksums: window stays open */
    uint8_t nk[2][16];
    tk_keys(20, 2, nk);
    assert_int_equal(tk_prepare_put(t, "r1", nk, 2), 0);
    uint64_t tok = t->rep->body.prepare_put_rep.token.token_id;
    bool mask[3] = {true, true, true};
    uint64_t ck[2] = {1, 2};
    assert_int_equal(tk_complete_put(t, "r1", tok, mask, 3, ck, 2),
                     kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(tk_complete_put(t, "r1", tok, NULL, 0, ck, 1),
                     kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(t->msg, "checksums"));
    assert_int_equal(tk_complete_put(t, "r1", tok, mask, 2, ck, 2), 0);
    assert_int_equal(t->rep->body.complete_put_rep.committed, 2);
    /* tier-plane and membership bodies are not served here */
    tk_req(t, kvtier_Envelope_inventory_req_tag);
    assert_int_equal(tk_call(t, NULL), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    tk_req(t, kvtier_Envelope_tier_membership_req_tag);
    assert_int_equal(tk_call(t, NULL), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    /* raw garbage on the socket is answered and dropped */
    zsock_t *raw_sock = zsock_new_dealer(t->ep);
    assert_non_null(raw_sock);
    zstr_send(raw_sock, "\x08\x01\xff\xff\xff garbage");
    zsock_set_rcvtimeo(raw_sock, TK_CALL_MS);
    zmsg_t *m = zmsg_recv(raw_sock);
    assert_non_null(m);
    zmsg_destroy(&m);
    zsock_destroy(&raw_sock);

    assert_int_equal(tk_prefix(t, keys, 4), 4);
    assert_int_equal(tk_stat(t, "blocks"), 6);
    assert_true(tk_stat(t, "invalid_requests") >= 8);
    tk_env_stop(&e);
}

/* Stats and AdminStatus report what happened; per-instance counters too. */
static void test_stats_and_admin_status(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 2), 0);
    uint8_t keys[3][16];
    tk_keys(0, 3, keys);
    assert_int_equal(tk_prefix(t, keys, 3), 2);
    assert_int_equal(tk_stat(t, "lookups"), 1);
    assert_int_equal(tk_stat(t, "lookup_keys"), 3);
    assert_int_equal(tk_stat(t, "hits"), 2);
    assert_int_equal(tk_stat(t, "misses"), 1);
    assert_int_equal(tk_stat(t, "tier.host0.used"), 2);
    assert_int_equal(tk_stat(t, "tier.host0.capacity"), 16);
    assert_int_equal(tk_stat(t, "open_requests"), 1);
    assert_int_equal(tk_stat(t, "instances"), 1);
    kvtier_StatsRequest *sr = &tk_req(t, kvtier_Envelope_stats_req_tag)->body.stats_req;
    snprintf(sr->instance_id, sizeof sr->instance_id, "%s", TK_INST);
    assert_int_equal(tk_call(t, NULL), 0);
    assert_true(t->rep->body.stats_rep.counters_count > 0);
    snprintf(tk_req(t, kvtier_Envelope_stats_req_tag)->body.stats_req.instance_id, 64, "ghost");
    assert_int_equal(tk_call(t, NULL), kvtier_StatusCode_STATUS_NOT_FOUND);
    tk_req(t, kvtier_Envelope_admin_status_req_tag);
    assert_int_equal(tk_call(t, NULL), 0);
    const kvtier_AdminStatusReply *a = &t->rep->body.admin_status_rep;
    assert_true(a->leader);
    assert_string_equal(a->node_id, "test-coord");
    assert_int_equal(a->blocks, 2);
    assert_int_equal(a->instances, 1);
    assert_int_equal(a->open_requests, 1);
    assert_int_equal(a->tiers, 1);
    tk_env_stop(&e);
}

/* One StatsRequest page; returns the reply. */
static const kvtier_StatsReply *s_stats_page(tk_t *t, const char *inst, uint32_t offset,
                                             uint32_t max)
{
    kvtier_StatsRequest *sr = &tk_req(t, kvtier_Envelope_stats_req_tag)->body.stats_req;
    snprintf(sr->instance_id, sizeof sr->instance_id, "%s", inst);
    sr->offset = offset;
    sr->max_counters = max;
    assert_int_equal(tk_call(t, NULL), 0);
    return &t->rep->body.stats_rep;
}

/* Walks the pages of `max` counters from 0 by next_offset and checks they are, in
 * order, the counters of one whole-list reply `all` (names and values), each page
 * at most `max` long and reporting the same total. */
static void s_check_pages(tk_t *t, const char *inst, const kvtier_StatsReply *all, uint32_t max)
{
    uint32_t off = 0, pages = 0;
    while (off < all->total) {
        const kvtier_StatsReply *r = s_stats_page(t, inst, off, max);
        assert_int_equal(r->total, all->total);
        assert_true(r->counters_count >= 1 && r->counters_count <= max);
        assert_int_equal(r->next_offset, off + r->counters_count);
        for (pb_size_t i = 0; i < r->counters_count; i++) {
            assert_string_equal(r->counters[i].name, all->counters[off + i].name);
            assert_int_equal(r->counters[i].value, all->counters[off + i].value);
        }
        off = r->next_offset;
        pages++;
    }
    assert_int_equal(off, all->total);
    assert_int_equal(pages, (all->total + max - 1) / max);
}

/* Issue "one source for shared identities and limits": StatsReply never drops
 * counters silently (nor ClusterInfoReply tiers). Every reply says how many counters there are
 * (total) and where the next page starts; pages of any size, walked by next_offset, give every
 * counter of the list exactly once and in order; a page is never longer than asked nor than the
 * reply's bound (StatsReply.counters); an offset past the end is an empty page. */
static void test_stats_are_paged_and_report_their_total(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 2), 0);
    static kvtier_StatsReply all, inst;
    all = *s_stats_page(t, "", 0, 0); /* 0: a whole page, as an older client asks */
    assert_true(all.total > 7 && all.total <= BUS_STATS_PAGE_MAX);
    assert_int_equal(all.counters_count, all.total);
    assert_int_equal(all.next_offset, all.total);
    assert_string_equal(all.counters[all.total - 2].name, "tier.host0.evictions");
    assert_string_equal(all.counters[all.total - 1].name, "branch.default.requests");
    assert_int_equal(all.counters[all.total - 1].value, 1);
    s_check_pages(t, "", &all, 7);
    s_check_pages(t, "", &all, 1);
    inst = *s_stats_page(t, TK_INST, 0, 0);
    assert_int_equal(inst.counters_count, inst.total);
    s_check_pages(t, TK_INST, &inst, 5);
    const kvtier_StatsReply *r = s_stats_page(t, "", all.total + 10, 7);
    assert_int_equal(r->counters_count, 0);
    assert_int_equal(r->total, all.total);
    assert_int_equal(r->next_offset, all.total);
    r = s_stats_page(t, "", 0, 100000);
    assert_int_equal(r->counters_count, all.total);
    /* ClusterInfo says how many tiers there are, too: all of them listed */
    tk_req(t, kvtier_Envelope_cluster_info_req_tag);
    assert_int_equal(tk_call(t, NULL), 0);
    assert_int_equal(t->rep->body.cluster_info_rep.total_tiers, 1);
    assert_int_equal(t->rep->body.cluster_info_rep.tiers_count, 1);
    tk_env_stop(&e);
}

/* Issue 10 §2: a detail StatsRequest adds a latency histogram per meta-plane call
 * kind (each call counted once in exactly one bucket, sum in microseconds) and
 * names the registered instances; hits are counted per tier and add up to "hits". */
static void test_stats_detail_latency_and_tier_hits(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 2), 0);
    uint8_t keys[3][16];
    tk_keys(0, 3, keys);
    assert_int_equal(tk_prefix(t, keys, 3), 2);
    assert_int_equal(tk_prefix(t, keys, 3), 2);
    assert_int_equal(tk_stat(t, "tier.host0.hits"), 4);
    assert_int_equal(tk_stat(t, "hits"), 4);
    assert_int_equal(tk_stat(t, "tier.host0.blocks"), 2);
    assert_int_equal(tk_stat(t, "tier.host0.up"), 1);
    /* without detail: no latency counters */
    const kvtier_StatsReply *r = s_stats_page(t, "", 0, 0);
    for (pb_size_t i = 0; i < r->counters_count; i++)
        assert_null(strstr(r->counters[i].name, "lat."));
    assert_int_equal(r->instance_ids_count, 0);
    /* with detail, walked page by page */
    uint64_t count = 0, sum_buckets = 0, lookups_seen = 0;
    uint32_t off = 0, total = 1, ids = 0;
    while (off < total) {
        kvtier_StatsRequest *sr = &tk_req(t, kvtier_Envelope_stats_req_tag)->body.stats_req;
        sr->offset = off;
        sr->detail = true;
        assert_int_equal(tk_call(t, NULL), 0);
        r = &t->rep->body.stats_rep;
        total = r->total;
        ids = r->instance_ids_count;
        if (ids)
            assert_string_equal(r->instance_ids[0], TK_INST);
        assert_int_equal(r->instance_total, 1);
        for (pb_size_t i = 0; i < r->counters_count; i++) {
            const char *n = r->counters[i].name;
            if (!strncmp(n, "lat.lookup.b", 12))
                sum_buckets += r->counters[i].value;
            else if (!strcmp(n, "lat.lookup.count"))
                count = r->counters[i].value, lookups_seen++;
        }
        off = r->next_offset;
    }
    assert_int_equal(ids, 1);
    assert_int_equal(lookups_seen, 1);
    assert_int_equal(count, 2);
    assert_int_equal(sum_buckets, 2);
    assert_true(total > BUS_STATS_PAGE_MAX);
    tk_env_stop(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_reports_endpoint_and_cluster_info),
        cmocka_unit_test(test_bad_config_returns_null),
        cmocka_unit_test(test_bind_failure_returns_null),
        cmocka_unit_test(test_malformed_requests_leave_blocks_intact),
        cmocka_unit_test(test_stats_and_admin_status),
        cmocka_unit_test(test_stats_are_paged_and_report_their_total),
        cmocka_unit_test(test_stats_detail_latency_and_tier_hits),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
