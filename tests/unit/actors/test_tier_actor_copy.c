/* test_tier_actor_copy.c — CopySlots, tier to tier (issue 4 §2; DESIGN.md §6
 * "Reclaim and demotion", "Prefetch / promotion"; rules in tier_actor.h) between
 * real tier actors (host: POSIX shm; nvme: files in a mkdtemp directory) over
 * tcp://127.0.0.1:*, plus a scripted destination (a bus_server in the test) where
 * the order of events matters: byte-exact copies with their headers both ways,
 * the unchanged-source check before and after the copy, a dead destination, bad
 * requests and the in-flight bound. */
#include <errno.h>
#include <inttypes.h>

#include "bus_server.h"
#include "copy_testkit.h"

static char s_dir[128];
static int s_seq;

typedef struct {
    bool done;
    int code;
    uint32_t copied;
    bool mask[CK_CAP];
    uint32_t nmask;
    bool maskbuf[CK_CAP];
    bus_arrays_t rarr;
} async_t;

static void s_async_done(void *arg, bus_reply_t *r)
{
    async_t *a = arg;
    a->done = true;
    a->code = (int)r->status.code;
    if (r->env && r->env->which_body == kvtier_Envelope_copy_slots_rep_tag) {
        a->copied = r->env->body.copy_slots_rep.copied;
        a->nmask = a->rarr.mask.n;
        memcpy(a->mask, a->maskbuf, sizeof a->mask);
    }
}

/* Sends CopySlots without waiting; s_async_wait collects the reply. */
static void s_copy_async(ck_tier_t *src, const char *dst_ep, uint32_t dst_id, const uint64_t *slots,
                         const uint64_t *dst_slots, uint8_t (*keys)[16], uint32_t n, async_t *a)
{
    memset(a, 0, sizeof *a);
    a->rarr.mask = (bus_bools_t){a->maskbuf, 0, CK_CAP};
    ck_copy_req(src, dst_ep, dst_id, kvtier_LocationState_LOCATION_SERVING);
    bus_arrays_t arr = {.slots = {(uint64_t *)slots, n, n},
                        .dst_slots = {(uint64_t *)dst_slots, n, n},
                        .keys = {keys, n, n}};
    kvtier_Status st;
    assert_int_equal(bus_client_send(src->client, &src->req, &arr, NULL, 0, CK_CALL_MS, &a->rarr,
                                     s_async_done, a, NULL, &st),
                     0);
}

static void s_async_wait(ck_tier_t *src, async_t *a)
{
    while (!a->done)
        assert_true(bus_client_dispatch(src->client, -1) >= 0);
}

/* ---- a scripted destination ---- */

typedef struct {
    bus_server_t *srv;
    bus_arrays_t *arr;
    bus_request_t req;
    kvtier_Envelope rep;
} fake_t;

static void s_fake_start(fake_t *f)
{
    memset(f, 0, sizeof *f);
    f->srv = bus_server_new("tcp://127.0.0.1:*", "fake");
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

/* Receives the next request, which must be of kind `tag`. A Probe{ucx} (what a
 * copying tier actor asks a new destination first: does it serve UCX?) is
 * answered as a frames-only tier actor does, with no UCX fields. */
static void s_fake_expect(fake_t *f, pb_size_t tag)
{
    bus_request_reset(&f->req);
    assert_int_equal(bus_server_recv(f->srv, (int)CK_CALL_MS, &f->req, f->arr), 1);
    if (f->req.env.which_body == kvtier_Envelope_probe_req_tag && tag != f->req.env.which_body) {
        assert_true(f->req.env.body.probe_req.ucx);
        bus_env_init_reply(&f->rep, &f->req.env, kvtier_Envelope_probe_rep_tag, "fake");
        assert_int_equal(bus_server_reply(f->srv, f->req.routing_id, &f->rep, NULL, NULL, 0, NULL),
                         0);
        bus_request_reset(&f->req);
        assert_int_equal(bus_server_recv(f->srv, (int)CK_CALL_MS, &f->req, f->arr), 1);
    }
    assert_int_equal(f->req.env.which_body, tag);
}

static void s_fake_reply(fake_t *f, pb_size_t tag, uint32_t count)
{
    bus_env_init_reply(&f->rep, &f->req.env, tag, "fake");
    if (tag == kvtier_Envelope_write_slots_rep_tag)
        f->rep.body.write_slots_rep.written = count;
    else if (tag == kvtier_Envelope_put_header_rep_tag)
        f->rep.body.put_header_rep.written = count;
    else
        f->rep.body.delete_slots_rep.deleted = count;
    assert_int_equal(bus_server_reply(f->srv, f->req.routing_id, &f->rep, NULL, NULL, 0, NULL), 0);
}

/* ---- tests ---- */

/* A copy's direction: source and destination tier kinds. */
typedef struct {
    const char *src, *dst;
} direction_t;

/* issue 4 §2: bytes go tier to tier; the copy carries the header (DESIGN.md §6).
 * issue 4 §3: promotion copies nvme blocks back up to host memory. */
static void test_copy_is_byte_exact_with_headers(void **state)
{
    const direction_t *d = *state;
    const char *src_kind = d->src, *dst_kind = d->dst;
    ck_tier_t src, dst;
    tier_actor_config_t sc = ck_cfg(src_kind, 1, s_dir, s_seq++);
    tier_actor_config_t dc = ck_cfg(dst_kind, 2, s_dir, s_seq++);
    ck_start(&src, &sc);
    ck_start(&dst, &dc);
    uint64_t slots[3] = {0, 7, 31}, dslots[3] = {4, 5, 30};
    uint32_t seeds[3] = {11, 12, 13};
    uint64_t deadline = 4102444800000ull; /* 2100-01-01 */
    uint8_t keys[3][16];
    for (int i = 0; i < 3; i++) {
        ck_store(&src, slots[i], seeds[i], i == 2 ? 0 : deadline + (uint64_t)i);
        ck_key(seeds[i], keys[i]);
    }
    bool mask[3];
    uint32_t copied = 0;
    assert_int_equal(ck_copy(&src, dst.ep, 2, slots, dslots, keys, 3, mask, &copied), 0);
    assert_int_equal(copied, 3);
    for (int i = 0; i < 3; i++) {
        assert_true(mask[i]);
        /* the destination serves the same bytes under the same key ... */
        assert_int_equal(ck_read_code(&dst, dslots[i], seeds[i]), 0);
        /* ... with the source's header (instance, size, checksum, deadline) */
        kvtier_InventoryEntry se, de;
        assert_true(ck_inventory_find(&src, slots[i], &se));
        assert_true(ck_inventory_find(&dst, dslots[i], &de));
        assert_memory_equal(de.key, keys[i], 16);
        assert_string_equal(de.instance_id, CK_INST);
        assert_int_equal(de.size, se.size);
        assert_int_equal(de.checksum, se.checksum);
        assert_int_equal(de.ttl_deadline_ms, se.ttl_deadline_ms);
        /* and the source still serves */
        assert_int_equal(ck_read_code(&src, slots[i], seeds[i]), 0);
    }
    tier_actor_stats_t ts;
    assert_int_equal(tier_actor_stats(src.actor, &ts), 0);
    assert_int_equal(ts.copies, 1);
    assert_int_equal(ts.slots_copied, 3);
    assert_int_equal(ts.copy_slot_failures, 0);
    ck_stop(&dst);
    ck_stop(&src);
}

/* issue 4 §2: the source must be the expected SERVING block; only that slot fails. */
static void test_copy_wrong_expected_key_fails_that_slot_only(void **state)
{
    (void)state;
    ck_tier_t src, dst;
    tier_actor_config_t sc = ck_cfg("host", 1, s_dir, s_seq++);
    tier_actor_config_t dc = ck_cfg("nvme", 2, s_dir, s_seq++);
    ck_start(&src, &sc);
    ck_start(&dst, &dc);
    ck_store(&src, 1, 21, 0);
    ck_store(&src, 2, 22, 0);
    uint64_t slots[3] = {1, 2, 3}, dslots[3] = {1, 2, 3};
    uint8_t keys[3][16];
    ck_key(21, keys[0]);
    ck_key(99, keys[1]); /* slot 2 holds block 22 */
    ck_key(23, keys[2]); /* slot 3 holds nothing */
    bool mask[3];
    uint32_t copied = 0;
    assert_int_equal(ck_copy(&src, dst.ep, 2, slots, dslots, keys, 3, mask, &copied), 0);
    assert_int_equal(copied, 1);
    assert_true(mask[0]);
    assert_false(mask[1]);
    assert_false(mask[2]);
    assert_int_equal(ck_read_code(&dst, 1, 21), 0);
    kvtier_InventoryEntry e;
    assert_false(ck_inventory_find(&dst, 2, &e));
    assert_false(ck_inventory_find(&dst, 3, &e));
    assert_int_equal(ck_read_code(&src, 2, 22), 0); /* untouched */
    ck_stop(&dst);
    ck_stop(&src);
}

/* issue 4 §2: a failed copy leaves the source serving; a destination that does not
 * answer fails the copy within copy_timeout_ms, and the actor copies again after. */
static void test_copy_to_dead_destination_times_out_and_source_serves(void **state)
{
    (void)state;
    ck_tier_t src, dst;
    tier_actor_config_t sc = ck_cfg("host", 1, s_dir, s_seq++);
    sc.copy_timeout_ms = 300; /* the test's own calls wait CK_CALL_MS */
    tier_actor_config_t dc = ck_cfg("host", 2, s_dir, s_seq++);
    ck_start(&src, &sc);
    ck_start(&dst, &dc);
    ck_store(&src, 5, 31, 0);
    char dead[256];
    snprintf(dead, sizeof dead, "ipc://%s/nobody-%d", s_dir, s_seq++);
    uint64_t slots[1] = {5}, dslots[1] = {6};
    uint8_t keys[1][16];
    ck_key(31, keys[0]);
    bool mask[1] = {true};
    uint32_t copied = 9;
    assert_int_equal(ck_copy(&src, dead, 2, slots, dslots, keys, 1, mask, &copied),
                     kvtier_StatusCode_STATUS_TIMEOUT);
    assert_int_equal(copied, 0);
    assert_false(mask[0]);
    assert_int_equal(ck_read_code(&src, 5, 31), 0);
    /* the actor is not stuck: a copy to a live destination works */
    assert_int_equal(ck_copy(&src, dst.ep, 2, slots, dslots, keys, 1, mask, &copied), 0);
    assert_true(mask[0]);
    assert_int_equal(ck_read_code(&dst, 6, 31), 0);
    ck_stop(&dst);
    ck_stop(&src);
}

/* DESIGN.md §5: bad input is INVALID_ARGUMENT, nothing is done. */
static void test_copy_bad_requests_are_invalid_argument(void **state)
{
    (void)state;
    ck_tier_t src, dst;
    tier_actor_config_t sc = ck_cfg("host", 1, s_dir, s_seq++);
    sc.copy_max_slots = 2;
    tier_actor_config_t dc = ck_cfg("host", 2, s_dir, s_seq++);
    ck_start(&src, &sc);
    ck_start(&dst, &dc);
    ck_store(&src, 0, 41, 0);
    uint64_t slots[3] = {0, 1, 2}, far[1] = {CK_CAP}, dslots[3] = {0, 1, 2};
    uint8_t keys[3][16];
    ck_key(41, keys[0]);
    const int inval = kvtier_StatusCode_STATUS_INVALID_ARGUMENT;
    /* slot out of range */
    assert_int_equal(ck_copy(&src, dst.ep, 2, far, dslots, keys, 1, NULL, NULL), inval);
    /* more slots than copy_max_slots */
    assert_int_equal(ck_copy(&src, dst.ep, 2, slots, dslots, keys, 3, NULL, NULL), inval);
    /* no destination endpoint, no destination tier id */
    assert_int_equal(ck_copy(&src, "", 2, slots, dslots, keys, 1, NULL, NULL), inval);
    assert_int_equal(ck_copy(&src, dst.ep, 0, slots, dslots, keys, 1, NULL, NULL), inval);
    /* another tier's id as the source */
    src.cfg.tier_id = 9;
    assert_int_equal(ck_copy(&src, dst.ep, 2, slots, dslots, keys, 1, NULL, NULL), inval);
    src.cfg.tier_id = 1;
    kvtier_Status st;
    /* count mismatches: dst_slots, keys; and a state that is not a header state */
    for (int k = 0; k < 3; k++) {
        ck_copy_req(&src, dst.ep, 2,
                    k == 2 ? kvtier_LocationState_LOCATION_STATE_NONE
                           : kvtier_LocationState_LOCATION_SERVING);
        bus_arrays_t arr = {.slots = {slots, 1, 1},
                            .dst_slots = {dslots, k == 0 ? 2u : 1u, 2},
                            .keys = {keys, k == 1 ? 0u : 1u, 1}};
        assert_int_equal(bus_client_call(src.client, &src.req, &arr, NULL, 0, CK_CALL_MS, &src.rep,
                                         NULL, NULL, &st),
                         -inval);
    }
    kvtier_InventoryEntry e;
    assert_false(ck_inventory_find(&dst, 0, &e));
    assert_int_equal(ck_read_code(&src, 0, 41), 0);
    ck_stop(&dst);
    ck_stop(&src);
}

/* issue 4 §2 / DESIGN.md §6: a source rewritten while its copy is in flight fails
 * that slot and the destination copy is deleted again; the actor keeps serving
 * while the copy waits on its destination. */
static void test_copy_source_rewritten_during_copy_fails_and_deletes_copy(void **state)
{
    (void)state;
    ck_tier_t src;
    fake_t f;
    tier_actor_config_t sc = ck_cfg("host", 1, s_dir, s_seq++);
    ck_start(&src, &sc);
    s_fake_start(&f);
    ck_store(&src, 0, 51, 0);
    ck_store(&src, 1, 52, 0);
    uint64_t slots[2] = {0, 1}, dslots[2] = {10, 11};
    uint8_t keys[2][16];
    ck_key(51, keys[0]);
    ck_key(52, keys[1]);
    async_t a;
    s_copy_async(&src, bus_server_endpoint(f.srv), 2, slots, dslots, keys, 2, &a);

    s_fake_expect(&f, kvtier_Envelope_write_slots_req_tag);
    assert_int_equal(f.req.env.body.write_slots_req.tier_id, 2);
    assert_int_equal(f.arr->slots.n, 2);
    assert_int_equal(f.arr->slots.v[0], 10);
    assert_int_equal(f.arr->slots.v[1], 11);
    for (uint32_t i = 0; i < 2; i++) {
        uint32_t seed = 51 + i;
        uint8_t *want = malloc(ck_size(seed));
        assert_non_null(want);
        ck_fill(want, ck_size(seed), seed);
        zframe_t *fr = bus_msg_payload(f.req.msg, i);
        assert_non_null(fr);
        assert_int_equal(zframe_size(fr), ck_size(seed));
        assert_memory_equal(zframe_data(fr), want, ck_size(seed));
        free(want);
    }
    /* while the copy waits, the source slot 1 gets another block */
    ck_store(&src, 1, 53, 0);
    assert_false(a.done);
    s_fake_reply(&f, kvtier_Envelope_write_slots_rep_tag, 2);

    s_fake_expect(&f, kvtier_Envelope_put_header_req_tag);
    assert_int_equal(f.req.env.body.put_header_req.state, kvtier_LocationState_LOCATION_SERVING);
    assert_string_equal(f.req.env.body.put_header_req.instance_id, CK_INST);
    assert_int_equal(f.arr->keys.n, 2);
    assert_memory_equal(f.arr->keys.keys[1], keys[1], 16);
    s_fake_reply(&f, kvtier_Envelope_put_header_rep_tag, 2);

    /* the copy of the rewritten slot is deleted, by its key */
    s_fake_expect(&f, kvtier_Envelope_delete_slots_req_tag);
    assert_int_equal(f.arr->slots.n, 1);
    assert_int_equal(f.arr->slots.v[0], 11);
    assert_int_equal(f.arr->keys.n, 1);
    assert_memory_equal(f.arr->keys.keys[0], keys[1], 16);
    s_fake_reply(&f, kvtier_Envelope_delete_slots_rep_tag, 1);

    s_async_wait(&src, &a);
    assert_int_equal(a.code, kvtier_StatusCode_STATUS_OK);
    assert_int_equal(a.copied, 1);
    assert_int_equal(a.nmask, 2);
    assert_true(a.mask[0]);
    assert_false(a.mask[1]);
    assert_int_equal(ck_read_code(&src, 1, 53), 0);
    s_fake_stop(&f);
    ck_stop(&src);
}

/* STYLE.md §7: copies in flight are bounded; at the bound UNAVAILABLE, counted. */
static void test_copy_in_flight_bound_refuses_with_unavailable(void **state)
{
    (void)state;
    ck_tier_t src;
    fake_t f;
    tier_actor_config_t sc = ck_cfg("nvme", 1, s_dir, s_seq++);
    sc.copy_max_in_flight = 1;
    ck_start(&src, &sc);
    s_fake_start(&f);
    ck_store(&src, 3, 61, 0);
    uint64_t slots[1] = {3}, dslots[1] = {8};
    uint8_t keys[1][16];
    ck_key(61, keys[0]);
    async_t a;
    s_copy_async(&src, bus_server_endpoint(f.srv), 2, slots, dslots, keys, 1, &a);
    s_fake_expect(&f, kvtier_Envelope_write_slots_req_tag);
    /* the first copy is in flight: the second is refused, nothing sent */
    assert_int_equal(
        ck_copy(&src, bus_server_endpoint(f.srv), 2, slots, dslots, keys, 1, NULL, NULL),
        kvtier_StatusCode_STATUS_UNAVAILABLE);
    s_fake_reply(&f, kvtier_Envelope_write_slots_rep_tag, 1);
    s_fake_expect(&f, kvtier_Envelope_put_header_req_tag);
    s_fake_reply(&f, kvtier_Envelope_put_header_rep_tag, 1);
    s_async_wait(&src, &a);
    assert_int_equal(a.code, kvtier_StatusCode_STATUS_OK);
    assert_true(a.mask[0]);
    tier_actor_stats_t ts;
    assert_int_equal(tier_actor_stats(src.actor, &ts), 0);
    assert_int_equal(ts.copies, 1);
    assert_int_equal(ts.copies_refused, 1);
    assert_int_equal(ts.slots_copied, 1);
    s_fake_stop(&f);
    ck_stop(&src);
}

/* tier_actor.h: a block whose instance string the source no longer knows (nvme,
 * written before a restart) reaches the destination with the same instance hash. */
static void test_copy_keeps_the_instance_hash_across_a_restart(void **state)
{
    (void)state;
    ck_tier_t src, dst;
    tier_actor_config_t sc = ck_cfg("nvme", 1, s_dir, s_seq++);
    tier_actor_config_t dc = ck_cfg("host", 2, s_dir, s_seq++);
    ck_start(&src, &sc);
    ck_store(&src, 4, 81, 0);
    ck_stop(&src);
    ck_start(&src, &sc); /* recovers slot 4 from the file, without the id string */
    ck_start(&dst, &dc);
    char hashed[16];
    snprintf(hashed, sizeof hashed, "#%08x", tier_actor_instance_hash(CK_INST));
    kvtier_InventoryEntry e;
    assert_true(ck_inventory_find(&src, 4, &e));
    assert_string_equal(e.instance_id, hashed);
    uint64_t slots[1] = {4}, dslots[1] = {1};
    uint8_t keys[1][16];
    ck_key(81, keys[0]);
    bool mask[1];
    assert_int_equal(ck_copy(&src, dst.ep, 2, slots, dslots, keys, 1, mask, NULL), 0);
    assert_true(mask[0]);
    assert_int_equal(ck_read_code(&dst, 1, 81), 0);
    assert_true(ck_inventory_find(&dst, 1, &e));
    assert_string_equal(e.instance_id, hashed);
    ck_stop(&dst);
    ck_stop(&src);
}

/* tier_actor.h: stopping an actor with a copy in flight drops it cleanly (no reply,
 * nothing leaked: checked by the sanitizer build). */
static void test_copy_in_flight_at_stop_is_dropped(void **state)
{
    (void)state;
    ck_tier_t src;
    fake_t f;
    tier_actor_config_t sc = ck_cfg("nvme", 1, s_dir, s_seq++);
    ck_start(&src, &sc);
    s_fake_start(&f);
    ck_store(&src, 2, 71, 0);
    uint64_t slots[1] = {2}, dslots[1] = {2};
    uint8_t keys[1][16];
    ck_key(71, keys[0]);
    async_t a;
    s_copy_async(&src, bus_server_endpoint(f.srv), 2, slots, dslots, keys, 1, &a);
    s_fake_expect(&f, kvtier_Envelope_write_slots_req_tag);
    assert_false(a.done);
    zactor_destroy(&src.actor);
    bus_client_destroy(&src.client);
    s_fake_stop(&f);
}

static int s_setup(void **state)
{
    (void)state;
    snprintf(s_dir, sizeof s_dir, "/tmp/kvt-copy-XXXXXX");
    return mkdtemp(s_dir) ? 0 : -1;
}

static int s_teardown(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* The round trip's directions: demotion and promotion. */
static const direction_t s_host_to_nvme = {"host", "nvme"};
static const direction_t s_nvme_to_host = {"nvme", "host"};
/* issue 11 §1: a gpu tier's demotion to host and nvme, and promotion back */
static const direction_t s_gpu_to_host = {"gpu", "host"};
static const direction_t s_host_to_gpu = {"host", "gpu"};
static const direction_t s_gpu_to_nvme = {"gpu", "nvme"};
static const direction_t s_nvme_to_gpu = {"nvme", "gpu"};

/* A test run in direction s_<d> (the test's state), named after it. */
#define IN_DIRECTION(f, d)                                                                         \
    {                                                                                              \
        .name = #f "/" #d, .test_func = f, .initial_state = (void *)&s_##d                         \
    }

int main(void)
{
    const struct CMUnitTest tests[] = {
        IN_DIRECTION(test_copy_is_byte_exact_with_headers, host_to_nvme),
        IN_DIRECTION(test_copy_is_byte_exact_with_headers, nvme_to_host),
        IN_DIRECTION(test_copy_is_byte_exact_with_headers, gpu_to_host),
        IN_DIRECTION(test_copy_is_byte_exact_with_headers, host_to_gpu),
        IN_DIRECTION(test_copy_is_byte_exact_with_headers, gpu_to_nvme),
        IN_DIRECTION(test_copy_is_byte_exact_with_headers, nvme_to_gpu),
        cmocka_unit_test(test_copy_wrong_expected_key_fails_that_slot_only),
        cmocka_unit_test(test_copy_to_dead_destination_times_out_and_source_serves),
        cmocka_unit_test(test_copy_bad_requests_are_invalid_argument),
        cmocka_unit_test(test_copy_source_rewritten_during_copy_fails_and_deletes_copy),
        cmocka_unit_test(test_copy_in_flight_bound_refuses_with_unavailable),
        cmocka_unit_test(test_copy_keeps_the_instance_hash_across_a_restart),
        cmocka_unit_test(test_copy_in_flight_at_stop_is_dropped),
    };
    int rc = cmocka_run_group_tests(tests, s_setup, s_teardown);
    zsys_shutdown();
    return rc;
}
