/* test_migrator.c — the migrator actor (issue 4 §2; DESIGN.md §6; rules in
 * migrator.h) against real tier actors (host: POSIX shm; nvme: files in a
 * mkdtemp directory) on tcp://127.0.0.1:*. Where the order of events must be
 * pinned down, a first job copies to a scripted destination (a bus_server in
 * the test, on ipc) that holds the only in-flight slot until the test answers it. */
#include <errno.h>
#include <inttypes.h>

#include "bus_server.h"
#include "copy_testkit.h"
#include "migrator.h"

static char s_dir[128];
static int s_seq;

typedef struct {
    ck_tier_t host, nvme;
    zactor_t *mig;
    bus_client_t *cli; /* to the migrator's jobs ROUTER */
    bus_server_t *res; /* stands in for the scheduler's internal plane */
    char results_ep[64], jobs_ep[64];
} env_t;

/* Copy deadlines of the tier actors and the migrator unless a test sets its own.
 * They bound real copies (and the windows in which a scripted destination holds
 * one), so they are as generous as the test's own calls; the migrator's stays
 * above the tier actors' (migrator.h). A short deadline is only ever set where
 * nothing but a dead peer is bounded by it. */
#define S_TIER_COPY_MS CK_CALL_MS
#define S_MIG_COPY_MS (2u * CK_CALL_MS)

/* host_copy_ms: the host tier actor's copy_timeout_ms; 0: S_TIER_COPY_MS. */
static void s_env_start(env_t *e, const migrator_config_t *base, uint32_t host_copy_ms)
{
    memset(e, 0, sizeof *e);
    tier_actor_config_t hc = ck_cfg("host", 1, s_dir, s_seq++);
    tier_actor_config_t nc = ck_cfg("nvme", 2, s_dir, s_seq++);
    hc.copy_timeout_ms = host_copy_ms ? host_copy_ms : S_TIER_COPY_MS;
    nc.copy_timeout_ms = S_TIER_COPY_MS;
    ck_start(&e->host, &hc);
    ck_start(&e->nvme, &nc);
    snprintf(e->results_ep, sizeof e->results_ep, "inproc://mig-results-%d", s_seq++);
    snprintf(e->jobs_ep, sizeof e->jobs_ep, "inproc://mig-jobs-%d", s_seq++);
    e->res = bus_server_new(e->results_ep, "results");
    assert_non_null(e->res);
    migrator_config_t cfg = *base;
    if (!cfg.copy_timeout_ms)
        cfg.copy_timeout_ms = S_MIG_COPY_MS;
    cfg.endpoint = e->jobs_ep;
    cfg.results_endpoint = e->results_ep;
    e->mig = migrator_new(&cfg);
    assert_non_null(e->mig);
    e->cli = bus_client_new(e->jobs_ep, &(bus_client_config_t){.name = "test"});
    assert_non_null(e->cli);
}

static void s_env_stop(env_t *e)
{
    bus_client_destroy(&e->cli);
    zactor_destroy(&e->mig);
    bus_server_destroy(&e->res);
    ck_stop(&e->nvme);
    ck_stop(&e->host);
}

/* A job copying src slots (holding blocks `seeds`) from `from` to dst_ep. */
static migrator_job_t s_job(uint64_t id, migrator_priority_t prio, ck_tier_t *from,
                            const char *dst_ep, uint32_t dst_id, const uint64_t *slots,
                            const uint64_t *dslots, const uint32_t *seeds, uint32_t n)
{
    migrator_job_t j;
    memset(&j, 0, sizeof j);
    j.job_id = id;
    j.priority = prio;
    j.src_tier_id = from->cfg.tier_id;
    snprintf(j.src_endpoint, sizeof j.src_endpoint, "%.*s", MIGRATOR_ENDPOINT_MAX - 1, from->ep);
    j.dst_tier_id = dst_id;
    snprintf(j.dst_endpoint, sizeof j.dst_endpoint, "%.*s", MIGRATOR_ENDPOINT_MAX - 1, dst_ep);
    j.dst_state = kvtier_LocationState_LOCATION_SERVING;
    j.n = n;
    for (uint32_t i = 0; i < n; i++) {
        j.src_slots[i] = slots[i];
        j.dst_slots[i] = dslots[i];
        ck_key(seeds[i], j.keys[i]);
    }
    return j;
}

static void s_submit_ok(env_t *e, const migrator_job_t *j)
{
    char why[256];
    int rc = migrator_submit(e->cli, j, 0, why, sizeof why);
    if (rc != 0)
        fail_msg("submit job %" PRIu64 ": %s", j->job_id, why);
}

static void s_result(env_t *e, migrator_result_t *r)
{
    assert_int_equal(migrator_result_recv(e->res, (int)CK_CALL_MS, r), 0);
}

/* No result is waiting (after the stats said every job completed). */
static void s_no_more_results(env_t *e)
{
    zpoller_t *p = zpoller_new(bus_server_sock(e->res), NULL);
    assert_non_null(p);
    assert_null(zpoller_wait(p, 0));
    zpoller_destroy(&p);
}

/* ---- a scripted destination that answers only when told ---- */

typedef struct {
    bus_server_t *srv;
    bus_arrays_t *arr;
    bus_request_t req;
    kvtier_Envelope rep;
} fake_t;

/* Bound on ipc in this process's mkdtemp directory, never on tcp://127.0.0.1:*:
 * "*" takes the lowest free port of the dynamic range, which other test processes
 * have just used and released, and their clients (a gc actor probing a stopped
 * tier, say) reconnect to whatever binds it next; their requests would then land
 * among the scripted ones this destination asserts on. */
static void s_fake_start(fake_t *f)
{
    memset(f, 0, sizeof *f);
    char ep[192];
    snprintf(ep, sizeof ep, "ipc://%s/fake-%d", s_dir, s_seq++);
    f->srv = bus_server_new(ep, "fake");
    assert_non_null(f->srv);
    f->arr = bus_arrays_new(CK_CAP, 0);
    assert_non_null(f->arr);
}

static void s_fake_stop(fake_t *f)
{
    bus_request_reset(&f->req);
    bus_arrays_destroy(&f->arr);
    bus_server_destroy(&f->srv);
}

/* Receives the next request. A Probe{ucx} (what a copying tier actor asks a new
 * destination first: does it serve UCX?) is answered as a frames-only tier actor
 * does, with no UCX fields, and the request after it is received instead. */
static void s_fake_recv(fake_t *f)
{
    bus_request_reset(&f->req);
    assert_int_equal(bus_server_recv(f->srv, (int)CK_CALL_MS, &f->req, f->arr), 1);
    if (f->req.env.which_body == kvtier_Envelope_probe_req_tag && f->req.env.body.probe_req.ucx) {
        bus_env_init_reply(&f->rep, &f->req.env, kvtier_Envelope_probe_rep_tag, "fake");
        assert_int_equal(bus_server_reply(f->srv, f->req.routing_id, &f->rep, NULL, NULL, 0, NULL),
                         0);
        bus_request_reset(&f->req);
        assert_int_equal(bus_server_recv(f->srv, (int)CK_CALL_MS, &f->req, f->arr), 1);
    }
}

static void s_fake_answer(fake_t *f, pb_size_t req_tag, pb_size_t rep_tag, uint32_t count)
{
    s_fake_recv(f);
    assert_int_equal(f->req.env.which_body, req_tag);
    bus_env_init_reply(&f->rep, &f->req.env, rep_tag, "fake");
    if (rep_tag == kvtier_Envelope_write_slots_rep_tag)
        f->rep.body.write_slots_rep.written = count;
    else
        f->rep.body.put_header_rep.written = count;
    assert_int_equal(bus_server_reply(f->srv, f->req.routing_id, &f->rep, NULL, NULL, 0, NULL), 0);
}

static void s_fake_wait_write(fake_t *f)
{
    s_fake_recv(f);
    assert_int_equal(f->req.env.which_body, kvtier_Envelope_write_slots_req_tag);
}

static void s_fake_finish(fake_t *f, uint32_t n)
{
    bus_env_init_reply(&f->rep, &f->req.env, kvtier_Envelope_write_slots_rep_tag, "fake");
    f->rep.body.write_slots_rep.written = n;
    assert_int_equal(bus_server_reply(f->srv, f->req.routing_id, &f->rep, NULL, NULL, 0, NULL), 0);
    s_fake_answer(f, kvtier_Envelope_put_header_req_tag, kvtier_Envelope_put_header_rep_tag, n);
}

/* ---- tests ---- */

/* issue 4 §2: a demotion job copies host blocks to nvme, tier to tier, byte-exact;
 * the result says which slots were copied. */
static void test_migrator_demotion_copies_blocks_byte_exact(void **state)
{
    (void)state;
    env_t e;
    migrator_config_t cfg = {0};
    s_env_start(&e, &cfg, 0);
    uint64_t slots[3] = {0, 1, 2}, dslots[3] = {9, 10, 11};
    uint32_t seeds[3] = {101, 102, 103};
    for (int i = 0; i < 3; i++)
        ck_store(&e.host, slots[i], seeds[i], 0);
    migrator_job_t j = s_job(7, MIGRATOR_DEMOTE, &e.host, e.nvme.ep, 2, slots, dslots, seeds, 3);
    s_submit_ok(&e, &j);
    migrator_result_t r;
    s_result(&e, &r);
    assert_int_equal(r.job_id, 7);
    assert_int_equal(r.status, kvtier_StatusCode_STATUS_OK);
    assert_int_equal(r.n, 3);
    assert_int_equal(r.copied, 3);
    assert_int_equal(r.src_tier_id, 1);
    assert_int_equal(r.dst_tier_id, 2);
    for (int i = 0; i < 3; i++) {
        assert_true(r.ok[i]);
        assert_int_equal(ck_read_code(&e.nvme, dslots[i], seeds[i]), 0);
    }
    /* and promotion back up, as a prefetch job */
    uint64_t up[1] = {20};
    j = s_job(8, MIGRATOR_PREFETCH, &e.nvme, e.host.ep, 1, &dslots[1], up, &seeds[1], 1);
    s_submit_ok(&e, &j);
    s_result(&e, &r);
    assert_int_equal(r.job_id, 8);
    assert_true(r.ok[0]);
    assert_int_equal(ck_read_code(&e.host, 20, seeds[1]), 0);
    s_env_stop(&e);
}

/* issue 4 §2: prefetch before demotion — with one copy in flight, prefetch jobs
 * queued after demotions still run first. */
static void test_migrator_prefetch_runs_before_queued_demotions(void **state)
{
    (void)state;
    env_t e;
    fake_t f;
    migrator_config_t cfg = {.max_in_flight = 1};
    s_env_start(&e, &cfg, 0);
    s_fake_start(&f);
    uint32_t seeds[5] = {201, 202, 203, 204, 205};
    uint64_t hslots[5] = {0, 1, 2, 3, 4};
    for (int i = 0; i < 5; i++)
        ck_store(&e.host, hslots[i], seeds[i], 0);
    ck_store(&e.nvme, 5, 206, 0);
    ck_store(&e.nvme, 6, 207, 0);
    /* job 1 holds the only slot: its copy waits on the scripted destination */
    uint64_t d0[1] = {0};
    migrator_job_t j = s_job(1, MIGRATOR_DEMOTE, &e.host, bus_server_endpoint(f.srv), 2, &hslots[0],
                             d0, &seeds[0], 1);
    s_submit_ok(&e, &j);
    s_fake_wait_write(&f);
    /* demotions 2, 3, then prefetches 4, 5 (nvme -> host) */
    uint64_t dd[2] = {12, 13}, pu[2] = {21, 22}, ns[2] = {5, 6};
    uint32_t nseeds[2] = {206, 207};
    for (uint32_t k = 0; k < 2; k++) {
        j = s_job(2 + k, MIGRATOR_DEMOTE, &e.host, e.nvme.ep, 2, &hslots[1 + k], &dd[k],
                  &seeds[1 + k], 1);
        s_submit_ok(&e, &j);
    }
    for (uint32_t k = 0; k < 2; k++) {
        j = s_job(4 + k, MIGRATOR_PREFETCH, &e.nvme, e.host.ep, 1, &ns[k], &pu[k], &nseeds[k], 1);
        s_submit_ok(&e, &j);
    }
    migrator_stats_t ms;
    assert_int_equal(migrator_stats(e.mig, &ms), 0);
    assert_int_equal(ms.in_flight, 1);
    assert_int_equal(ms.queued_prefetch, 2);
    assert_int_equal(ms.queued_demote, 2);
    s_fake_finish(&f, 1);
    /* one at a time: completion order is dispatch order */
    const uint64_t want[5] = {1, 4, 5, 2, 3};
    for (int k = 0; k < 5; k++) {
        migrator_result_t r;
        s_result(&e, &r);
        assert_int_equal(r.job_id, want[k]);
        assert_int_equal(r.status, kvtier_StatusCode_STATUS_OK);
        assert_true(r.ok[0]);
    }
    assert_int_equal(ck_read_code(&e.host, 21, 206), 0);
    assert_int_equal(ck_read_code(&e.nvme, 13, 203), 0);
    s_fake_stop(&f);
    s_env_stop(&e);
}

/* migrator.h: every queued job gets exactly one result, whatever its outcome. */
/* migrator.h: "a demotion is never dispatched while a prefetch of the same
 * source waits": with the source at its per-source bound, a demotion queued
 * first and a prefetch from the same source queued after it, the prefetch goes
 * first once the source has room. */
static void test_migrator_prefetch_before_demotion_of_the_same_source(void **state)
{
    (void)state;
    env_t e;
    fake_t f;
    migrator_config_t cfg = {.max_in_flight = 2, .max_per_source = 1};
    s_env_start(&e, &cfg, 0);
    s_fake_start(&f);
    uint32_t seeds[3] = {301, 302, 303};
    uint64_t hs[3] = {0, 1, 2}, d0 = 0, d1 = 11, d2 = 12;
    for (int i = 0; i < 3; i++)
        ck_store(&e.host, hs[i], seeds[i], 0);
    /* job 1 holds host's only per-source slot on the scripted destination */
    migrator_job_t j = s_job(1, MIGRATOR_DEMOTE, &e.host, bus_server_endpoint(f.srv), 2, &hs[0],
                             &d0, &seeds[0], 1);
    s_submit_ok(&e, &j);
    s_fake_wait_write(&f);
    j = s_job(2, MIGRATOR_DEMOTE, &e.host, e.nvme.ep, 2, &hs[1], &d1, &seeds[1], 1);
    s_submit_ok(&e, &j);
    j = s_job(3, MIGRATOR_PREFETCH, &e.host, e.nvme.ep, 2, &hs[2], &d2, &seeds[2], 1);
    s_submit_ok(&e, &j);
    s_fake_finish(&f, 1);
    const uint64_t want[3] = {1, 3, 2};
    for (int k = 0; k < 3; k++) {
        migrator_result_t r;
        s_result(&e, &r);
        assert_int_equal(r.job_id, want[k]);
        assert_int_equal(r.status, kvtier_StatusCode_STATUS_OK);
    }
    assert_int_equal(ck_read_code(&e.nvme, 12, 303), 0);
    assert_int_equal(ck_read_code(&e.nvme, 11, 302), 0);
    s_fake_stop(&f);
    s_env_stop(&e);
}

static void test_migrator_reports_each_job_exactly_once(void **state)
{
    (void)state;
    env_t e;
    migrator_config_t cfg = {.max_in_flight = 3, .max_per_source = 2};
    s_env_start(&e, &cfg, 0);
    enum { N = 8 };
    for (uint32_t k = 0; k < N; k++)
        ck_store(&e.host, k, 300 + k, 0);
    for (uint32_t k = 0; k < N; k++) {
        uint64_t s = k, d = k;
        uint32_t seed = k % 3 == 2 ? 999u : 300 + k; /* every third expects a wrong key */
        migrator_job_t j = s_job(100 + k, k % 2 ? MIGRATOR_PREFETCH : MIGRATOR_DEMOTE, &e.host,
                                 e.nvme.ep, 2, &s, &d, &seed, 1);
        s_submit_ok(&e, &j);
    }
    int seen[N] = {0};
    for (uint32_t k = 0; k < N; k++) {
        migrator_result_t r;
        s_result(&e, &r);
        assert_true(r.job_id >= 100 && r.job_id < 100 + N);
        uint32_t idx = (uint32_t)(r.job_id - 100);
        seen[idx]++;
        assert_int_equal(r.ok[0], idx % 3 != 2);
    }
    for (uint32_t k = 0; k < N; k++)
        assert_int_equal(seen[k], 1);
    migrator_stats_t ms;
    assert_int_equal(migrator_stats(e.mig, &ms), 0);
    assert_int_equal(ms.submitted, N);
    assert_int_equal(ms.completed, N);
    assert_int_equal(ms.in_flight, 0);
    s_no_more_results(&e);
    s_env_stop(&e);
}

/* STYLE.md §7 / issue 4 §4: the queue is bounded; at the bound a submission is
 * refused with UNAVAILABLE and counted; accepted jobs still complete. */
static void test_migrator_queue_bound_refuses_and_counts(void **state)
{
    (void)state;
    env_t e;
    fake_t f;
    migrator_config_t cfg = {.max_in_flight = 1, .max_queued = 2};
    s_env_start(&e, &cfg, 0);
    s_fake_start(&f);
    uint64_t s[4] = {0, 1, 2, 3}, d[4] = {0, 1, 2, 3};
    uint32_t seeds[4] = {401, 402, 403, 404};
    for (int i = 0; i < 4; i++)
        ck_store(&e.host, s[i], seeds[i], 0);
    migrator_job_t j = s_job(1, MIGRATOR_DEMOTE, &e.host, bus_server_endpoint(f.srv), 2, &s[0],
                             &d[0], &seeds[0], 1);
    s_submit_ok(&e, &j);
    s_fake_wait_write(&f); /* job 1 in flight, nothing queued */
    for (int k = 1; k < 3; k++) {
        j = s_job(1 + (uint64_t)k, MIGRATOR_DEMOTE, &e.host, e.nvme.ep, 2, &s[k], &d[k], &seeds[k],
                  1);
        s_submit_ok(&e, &j);
    }
    j = s_job(4, MIGRATOR_PREFETCH, &e.host, e.nvme.ep, 2, &s[3], &d[3], &seeds[3], 1);
    char why[256];
    assert_int_equal(migrator_submit(e.cli, &j, 0, why, sizeof why),
                     -kvtier_StatusCode_STATUS_UNAVAILABLE);
    assert_non_null(strstr(why, "max_queued"));
    migrator_stats_t ms;
    assert_int_equal(migrator_stats(e.mig, &ms), 0);
    assert_int_equal(ms.refused_full, 1);
    assert_int_equal(ms.submitted, 3);
    s_fake_finish(&f, 1);
    for (int k = 0; k < 3; k++) {
        migrator_result_t r;
        s_result(&e, &r);
        assert_true(r.job_id >= 1 && r.job_id <= 3);
        assert_true(r.ok[0]);
    }
    assert_int_equal(migrator_stats(e.mig, &ms), 0);
    assert_int_equal(ms.completed, 3);
    s_no_more_results(&e);
    s_fake_stop(&f);
    s_env_stop(&e);
}

/* issue 4 §2: a failed copy leaves the source serving (dead destination, a source
 * that is not the expected block). The dead destination fails the copy after the
 * host's short copy_timeout_ms; the real copy after it runs in an environment of
 * its own, where no short deadline bounds it. */
static void test_migrator_failed_copy_leaves_source_serving(void **state)
{
    (void)state;
    env_t e;
    migrator_config_t cfg = {0};
    s_env_start(&e, &cfg, 500); /* bounds only the copy to the dead destination */
    uint64_t s[2] = {3, 4}, d[2] = {3, 4};
    uint32_t seeds[2] = {501, 502};
    ck_store(&e.host, 3, 501, 0);
    ck_store(&e.host, 4, 502, 0);
    char dead[256];
    snprintf(dead, sizeof dead, "ipc://%s/nobody-%d", s_dir, s_seq++);
    migrator_job_t j = s_job(1, MIGRATOR_DEMOTE, &e.host, dead, 2, s, d, seeds, 2);
    s_submit_ok(&e, &j);
    migrator_result_t r;
    s_result(&e, &r);
    assert_int_equal(r.job_id, 1);
    assert_int_equal(r.status, kvtier_StatusCode_STATUS_TIMEOUT);
    assert_int_equal(r.copied, 0);
    assert_false(r.ok[0]);
    assert_false(r.ok[1]);
    assert_int_equal(ck_read_code(&e.host, 3, 501), 0);
    assert_int_equal(ck_read_code(&e.host, 4, 502), 0);
    s_env_stop(&e);
    /* the source holds another block than the job expects: that slot fails */
    s_env_start(&e, &cfg, 0);
    ck_store(&e.host, 3, 501, 0);
    ck_store(&e.host, 4, 502, 0);
    uint32_t wrong[2] = {501, 777};
    j = s_job(2, MIGRATOR_DEMOTE, &e.host, e.nvme.ep, 2, s, d, wrong, 2);
    s_submit_ok(&e, &j);
    s_result(&e, &r);
    assert_int_equal(r.job_id, 2);
    assert_int_equal(r.status, kvtier_StatusCode_STATUS_OK);
    assert_true(r.ok[0]);
    assert_false(r.ok[1]);
    assert_int_equal(ck_read_code(&e.host, 4, 502), 0);
    kvtier_InventoryEntry ie;
    assert_false(ck_inventory_find(&e.nvme, 4, &ie));
    s_env_stop(&e);
}

/* migrator.h: a source that does not answer fails its job with TIMEOUT after
 * copy_timeout_ms; the migrator goes on with other sources. The short deadline
 * that fails the dead source bounds the live copies after it too, so a live job
 * that misses it (a loaded machine) is answered TIMEOUT, counted, and submitted
 * again (to a fresh destination slot: the late copy may still land), a bounded
 * number of times: what is asserted is that every job gets its one result, that
 * every timeout is counted, and that a live copy gets through. */
static void test_migrator_dead_source_times_out_the_job(void **state)
{
    (void)state;
    enum { TRIES = (int)CK_CAP - 1 }; /* destination slots 1..CK_CAP-1 */
    env_t e;
    migrator_config_t cfg = {.copy_timeout_ms = 300};
    s_env_start(&e, &cfg, 0);
    ck_store(&e.host, 0, 601, 0);
    uint64_t s = 0, d = 0;
    uint32_t seed = 601;
    migrator_job_t j = s_job(1, MIGRATOR_DEMOTE, &e.host, e.nvme.ep, 2, &s, &d, &seed, 1);
    snprintf(j.src_endpoint, sizeof j.src_endpoint, "ipc://%.64s/no-source-%d", s_dir, s_seq++);
    s_submit_ok(&e, &j);
    migrator_result_t r;
    s_result(&e, &r);
    assert_int_equal(r.job_id, 1);
    assert_int_equal(r.status, kvtier_StatusCode_STATUS_TIMEOUT);
    assert_false(r.ok[0]);
    uint64_t timeouts = 1;
    bool copied = false;
    for (int k = 0; k < TRIES && !copied; k++) {
        d = 1 + (uint64_t)k;
        j = s_job(2 + (uint64_t)k, MIGRATOR_DEMOTE, &e.host, e.nvme.ep, 2, &s, &d, &seed, 1);
        s_submit_ok(&e, &j);
        s_result(&e, &r);
        assert_int_equal(r.job_id, 2 + (uint64_t)k);
        if (r.status == kvtier_StatusCode_STATUS_TIMEOUT) {
            assert_false(r.ok[0]);
            timeouts++;
            continue;
        }
        assert_int_equal(r.status, kvtier_StatusCode_STATUS_OK);
        assert_true(r.ok[0]);
        copied = true;
    }
    if (!copied)
        fail_msg("no live copy got through in %d tries of %u ms each", TRIES, cfg.copy_timeout_ms);
    assert_int_equal(ck_read_code(&e.nvme, d, seed), 0);
    migrator_stats_t ms;
    assert_int_equal(migrator_stats(e.mig, &ms), 0);
    assert_int_equal(ms.timeouts, timeouts);
    s_env_stop(&e);
}

/* migrator.h "Deadlines": a job still queued dispatch_within_ms after it arrived
 * fails TIMEOUT without a copy (here it waits behind a copy to a dead source
 * with max_in_flight 1); the job in flight is not affected. */
static void test_migrator_undispatched_job_expires(void **state)
{
    (void)state;
    env_t e;
    migrator_config_t cfg = {.copy_timeout_ms = 2000, .max_in_flight = 1}; /* bounds the dead one */
    s_env_start(&e, &cfg, 0);
    ck_store(&e.host, 0, 611, 0);
    uint64_t s = 0, d = 0;
    uint32_t seed = 611;
    migrator_job_t dead = s_job(1, MIGRATOR_PREFETCH, &e.host, e.nvme.ep, 2, &s, &d, &seed, 1);
    snprintf(dead.src_endpoint, sizeof dead.src_endpoint, "ipc://%.64s/no-source-%d", s_dir,
             s_seq++);
    s_submit_ok(&e, &dead);
    migrator_stats_t ms = {0};
    int64_t until = zclock_mono() + CK_CALL_MS;
    while (migrator_stats(e.mig, &ms) == 0 && ms.dispatched < 1 && zclock_mono() < until)
        zclock_sleep(5);
    assert_int_equal(ms.dispatched, 1); /* in flight: the next job has to wait */
    migrator_job_t late = s_job(2, MIGRATOR_PREFETCH, &e.host, e.nvme.ep, 2, &s, &d, &seed, 1);
    late.dispatch_within_ms = 100;
    s_submit_ok(&e, &late);
    migrator_result_t r;
    s_result(&e, &r); /* the queued one first: it expires long before the copy times out */
    assert_int_equal(r.job_id, 2);
    assert_int_equal(r.status, kvtier_StatusCode_STATUS_TIMEOUT);
    assert_false(r.ok[0]);
    assert_non_null(strstr(r.message, "not dispatched within 100 ms"));
    assert_int_not_equal(ck_read_code(&e.nvme, 0, 611), 0); /* never copied */
    s_result(&e, &r);
    assert_int_equal(r.job_id, 1);
    assert_int_equal(r.status, kvtier_StatusCode_STATUS_TIMEOUT);
    assert_int_equal(migrator_stats(e.mig, &ms), 0);
    assert_int_equal(ms.expired, 1);
    assert_int_equal(ms.dispatched, 1);
    /* the bound round-trips through the envelope */
    kvtier_Envelope env;
    migrator_job_encode(&late, &env, "test");
    migrator_job_t back;
    char why[200];
    assert_int_equal(migrator_job_decode(&env.body.migrate_job_req, &back, why, sizeof why), 0);
    assert_int_equal(back.dispatch_within_ms, 100);
    s_env_stop(&e);
}

/* migrator.h: a job whose source is at max_per_source waits without holding up
 * jobs of other sources. The busy source here is scripted (it answers CopySlots
 * only when told). */
static void test_migrator_busy_source_does_not_hold_up_others(void **state)
{
    (void)state;
    env_t e;
    fake_t f;
    migrator_config_t cfg = {.max_in_flight = 2, .max_per_source = 1};
    s_env_start(&e, &cfg, 0);
    s_fake_start(&f);
    ck_store(&e.host, 0, 701, 0);
    uint64_t s = 0, d = 0;
    uint32_t seed = 701;
    const char *busy = bus_server_endpoint(f.srv);
    migrator_job_t j = s_job(1, MIGRATOR_PREFETCH, &e.host, e.nvme.ep, 2, &s, &d, &seed, 1);
    snprintf(j.src_endpoint, sizeof j.src_endpoint, "%.*s", MIGRATOR_ENDPOINT_MAX - 1, busy);
    s_submit_ok(&e, &j);
    bus_request_reset(&f.req);
    assert_int_equal(bus_server_recv(f.srv, (int)CK_CALL_MS, &f.req, f.arr), 1);
    assert_int_equal(f.req.env.which_body, kvtier_Envelope_copy_slots_req_tag);
    j.job_id = 2; /* same busy source: waits */
    s_submit_ok(&e, &j);
    migrator_job_t other = s_job(3, MIGRATOR_DEMOTE, &e.host, e.nvme.ep, 2, &s, &d, &seed, 1);
    s_submit_ok(&e, &other);
    migrator_result_t r;
    s_result(&e, &r);
    assert_int_equal(r.job_id, 3);
    assert_true(r.ok[0]);
    /* the busy source answers job 1 (nothing copied); job 2 goes out next */
    bus_env_init_reply(&f.rep, &f.req.env, kvtier_Envelope_copy_slots_rep_tag, "fake");
    bool no[1] = {false};
    bus_arrays_t rarr = {.mask = {no, 1, 1}};
    assert_int_equal(bus_server_reply(f.srv, f.req.routing_id, &f.rep, &rarr, NULL, 0, NULL), 0);
    s_result(&e, &r);
    assert_int_equal(r.job_id, 1);
    assert_int_equal(r.status, kvtier_StatusCode_STATUS_OK);
    assert_false(r.ok[0]);
    bus_request_reset(&f.req);
    assert_int_equal(bus_server_recv(f.srv, (int)CK_CALL_MS, &f.req, f.arr), 1);
    assert_int_equal(f.req.env.which_body, kvtier_Envelope_copy_slots_req_tag);
    bus_env_init_reply(&f.rep, &f.req.env, kvtier_Envelope_copy_slots_rep_tag, "fake");
    assert_int_equal(bus_server_reply(f.srv, f.req.routing_id, &f.rep, &rarr, NULL, 0, NULL), 0);
    s_result(&e, &r);
    assert_int_equal(r.job_id, 2);
    s_fake_stop(&f);
    s_env_stop(&e);
}

/* DESIGN.md §5: a malformed job is refused INVALID_ARGUMENT, counted, no result. */
static void test_migrator_bad_jobs_are_invalid_argument(void **state)
{
    (void)state;
    env_t e;
    migrator_config_t cfg = {0};
    s_env_start(&e, &cfg, 0);
    uint64_t s = 0, d = 0;
    uint32_t seed = 1;
    migrator_job_t good = s_job(1, MIGRATOR_DEMOTE, &e.host, e.nvme.ep, 2, &s, &d, &seed, 1);
    migrator_job_t bad[5];
    for (int k = 0; k < 5; k++)
        bad[k] = good;
    bad[0].n = 0;
    bad[1].n = MIGRATOR_MAX_JOB_SLOTS + 1;
    bad[2].priority = 7;
    bad[3].dst_endpoint[0] = '\0';
    bad[4].dst_state = kvtier_LocationState_LOCATION_STATE_NONE;
    char why[256];
    for (int k = 0; k < 5; k++)
        assert_int_equal(migrator_submit(e.cli, &bad[k], 0, why, sizeof why),
                         -kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    migrator_stats_t ms;
    assert_int_equal(migrator_stats(e.mig, &ms), 0);
    /* bad[0] and bad[1] never reach the wire (migrator_submit refuses a slot
     * count the envelope cannot carry); the other three are refused by the actor */
    assert_int_equal(ms.refused_invalid, 3);
    assert_int_equal(ms.submitted, 0);
    s_no_more_results(&e);
    s_env_stop(&e);
}

/* DESIGN.md §5 / STYLE 5: a malformed MigrateJob envelope (arrays of different
 * lengths, a body the migrator does not serve, bytes that do not decode) is
 * refused INVALID_ARGUMENT, and never queued or answered with a result. */
static void test_migrator_malformed_envelope_is_invalid_argument(void **state)
{
    (void)state;
    env_t e;
    migrator_config_t cfg = {0};
    s_env_start(&e, &cfg, 0);
    uint64_t s[2] = {0, 1}, d[2] = {0, 1};
    uint32_t seeds[2] = {1, 2};
    migrator_job_t good = s_job(1, MIGRATOR_DEMOTE, &e.host, e.nvme.ep, 2, s, d, seeds, 2);
    static kvtier_Envelope req, rep;
    kvtier_Status st;
    migrator_job_encode(&good, &req, "test");
    req.body.migrate_job_req.dst_slots_count = 1; /* 2 sources, 1 destination */
    assert_int_not_equal(
        bus_client_call(e.cli, &req, NULL, NULL, 0, CK_CALL_MS, &rep, NULL, NULL, &st), 0);
    assert_int_equal(st.code, kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    migrator_job_encode(&good, &req, "test");
    req.body.migrate_job_req.keys_count = 0;
    assert_int_not_equal(
        bus_client_call(e.cli, &req, NULL, NULL, 0, CK_CALL_MS, &rep, NULL, NULL, &st), 0);
    assert_int_equal(st.code, kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    bus_env_init(&req, kvtier_Envelope_gc_drop_req_tag, "test"); /* not a job */
    assert_int_not_equal(
        bus_client_call(e.cli, &req, NULL, NULL, 0, CK_CALL_MS, &rep, NULL, NULL, &st), 0);
    assert_int_equal(st.code, kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    /* raw bytes that are no envelope, on a DEALER of our own */
    char ep[64];
    assert_int_equal(migrator_endpoint(e.mig, ep, sizeof ep), 0);
    zsock_t *raw = zsock_new_dealer(ep);
    assert_non_null(raw);
    zsock_set_rcvtimeo(raw, (int)CK_CALL_MS);
    assert_int_equal(zstr_send(raw, "\xff\xff\xff garbage"), 0);
    zmsg_t *answer = zmsg_recv(raw); /* the server answers what it can read */
    zmsg_destroy(&answer);
    zsock_destroy(&raw);
    migrator_stats_t ms;
    assert_int_equal(migrator_stats(e.mig, &ms), 0);
    assert_int_equal(ms.refused_invalid, 2);
    assert_int_equal(ms.submitted, 0);
    /* still serving: a good job after the bad ones is queued and reported */
    s_submit_ok(&e, &good);
    migrator_result_t r;
    s_result(&e, &r);
    assert_int_equal(r.job_id, 1);
    s_env_stop(&e);
}

static int s_setup(void **state)
{
    (void)state;
    snprintf(s_dir, sizeof s_dir, "/tmp/kvt-mig-XXXXXX");
    return mkdtemp(s_dir) ? 0 : -1;
}

static int s_teardown(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_migrator_demotion_copies_blocks_byte_exact),
        cmocka_unit_test(test_migrator_prefetch_runs_before_queued_demotions),
        cmocka_unit_test(test_migrator_prefetch_before_demotion_of_the_same_source),
        cmocka_unit_test(test_migrator_reports_each_job_exactly_once),
        cmocka_unit_test(test_migrator_queue_bound_refuses_and_counts),
        cmocka_unit_test(test_migrator_failed_copy_leaves_source_serving),
        cmocka_unit_test(test_migrator_dead_source_times_out_the_job),
        cmocka_unit_test(test_migrator_busy_source_does_not_hold_up_others),
        cmocka_unit_test(test_migrator_undispatched_job_expires),
        cmocka_unit_test(test_migrator_bad_jobs_are_invalid_argument),
        cmocka_unit_test(test_migrator_malformed_envelope_is_invalid_argument),
    };
    int rc = cmocka_run_group_tests(tests, s_setup, s_teardown);
    zsys_shutdown();
    return rc;
}
