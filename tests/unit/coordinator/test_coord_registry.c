/* test_coord_registry.c — the instance registry in etcd (coordinator/coord_registry.h,
 * issue 9 §1) against a real etcd: a spec pushed to the actor's input is written
 * at /kvtier/<cluster>/instances/<id> as JSON without a lease, and read back by a
 * load; malformed records and records past the bound are skipped; the record
 * format round-trips and bad records are refused with a reason. */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coord_etcd.h"
#include "coord_registry.h"
#include "tier_key.h"
#include "etcd_fixture.h"

typedef struct {
    etcd_fixture_t *f;
    coord_etcd_t *etcd;
    zactor_t *reg;
    char ep[96];
} t_env_t;

static kvtier_InstanceSpec t_spec(const char *id, uint64_t bpb)
{
    kvtier_InstanceSpec s = kvtier_InstanceSpec_init_zero;
    snprintf(s.instance_id, sizeof s.instance_id, "%s", id);
    snprintf(s.model, sizeof s.model, "llama-3-8b");
    snprintf(s.dtype, sizeof s.dtype, "bf16");
    s.tokens_per_block = 16;
    s.bytes_per_block = bpb;
    return s;
}

static int setup(void **state)
{
    t_env_t *e = calloc(1, sizeof *e);
    e->f = etcd_fixture_start(NULL);
    if (!e->f)
        return -1;
    const char *url = etcd_fixture_url(e->f);
    coord_etcd_config_t ec = {.endpoints = &url, .n_endpoints = 1};
    e->etcd = coord_etcd_new(&ec);
    coord_registry_config_t rc = {.etcd_endpoints = &url, .n_etcd = 1, .cluster = "regtest"};
    e->reg = coord_registry_new(&rc);
    if (!e->etcd || !e->reg || coord_registry_endpoint(e->reg, e->ep, sizeof e->ep) < 0)
        return -1;
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    t_env_t *e = *state;
    zactor_destroy(&e->reg);
    coord_etcd_destroy(&e->etcd);
    etcd_fixture_destroy(&e->f);
    free(e);
    return 0;
}

/* Writes at registration: the spec handed to the input is in etcd, as JSON that
 * etcdctl shows, with no lease (it outlives the leader); a load returns it. */
static void pushed_spec_is_written_and_loaded(void **state)
{
    t_env_t *e = *state;
    zsock_t *push = zsock_new_push(e->ep);
    assert_non_null(push);
    kvtier_InstanceSpec s = t_spec("inst-a", 4096);
    s.segment_bytes_count = 2;
    s.segment_bytes[0] = 1024;
    s.segment_bytes[1] = 3072;
    assert_int_equal(zsock_send(push, "b", &s, sizeof s), 0);
    char buf[COORD_REGISTRY_JSON_MAX];
    size_t len = 0;
    coord_etcd_meta_t meta;
    int rc = -1;
    for (int i = 0; i < 500 && rc != 0; i++)
        if ((rc = coord_etcd_get(e->etcd, "/kvtier/regtest/instances/inst-a", buf, sizeof buf - 1,
                                 &len, &meta)) != 0)
            zclock_sleep(10);
    assert_int_equal(rc, 0);
    buf[len] = '\0';
    assert_non_null(strstr(buf, "\"instance_id\":\"inst-a\""));
    assert_non_null(strstr(buf, "\"bytes_per_block\":4096"));
    assert_non_null(strstr(buf, "\"segment_bytes\":[1024,3072]"));
    assert_int_equal(meta.lease, 0);
    kvtier_InstanceSpec out[4];
    uint32_t n = 0;
    assert_int_equal(coord_registry_load(e->reg, out, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(out[0].instance_id, "inst-a");
    assert_string_equal(out[0].model, "llama-3-8b");
    assert_int_equal(out[0].tokens_per_block, 16);
    assert_int_equal(out[0].bytes_per_block, 4096);
    assert_int_equal(out[0].segment_bytes_count, 2);
    assert_int_equal(out[0].segment_bytes[1], 3072);
    zsock_destroy(&push);
}

/* A layer-wise spec's segments travel in the record; a record written before them
 * (no "segments") is one part; a count above the bound is refused. */
static void segments_round_trip(void **state)
{
    (void)state;
    kvtier_InstanceSpec s = t_spec("inst-lw", 8192), out;
    s.segments = 16;
    char rec[COORD_REGISTRY_JSON_MAX], why[256];
    assert_int_equal(coord_registry_json(&s, 1, rec, sizeof rec), 0);
    assert_non_null(strstr(rec, "\"segments\":16"));
    assert_int_equal(coord_registry_parse(rec, strlen(rec), "inst-lw", &out, NULL, why, sizeof why),
                     0);
    assert_int_equal(out.segments, 16);
    const char *old = "{\"instance_id\":\"inst-lw\",\"tokens_per_block\":16,"
                      "\"bytes_per_block\":8192}";
    assert_int_equal(coord_registry_parse(old, strlen(old), "inst-lw", &out, NULL, why, sizeof why),
                     0);
    assert_int_equal(out.segments, 0);
    const char *big = "{\"instance_id\":\"inst-lw\",\"tokens_per_block\":16,"
                      "\"bytes_per_block\":8192,\"segments\":5000}";
    assert_int_not_equal(
        coord_registry_parse(big, strlen(big), "inst-lw", &out, NULL, why, sizeof why), 0);
    assert_non_null(strstr(why, "segments"));
}

/* Bounded and checked: a malformed record (not JSON, a field missing, an id that
 * is not its key's) is skipped; past `max` the rest is skipped; good ones load. */
static void load_skips_bad_and_excess_records(void **state)
{
    t_env_t *e = *state;
    const char *bad[][2] = {
        {"/kvtier/regtest/instances/b-notjson", "{not json"},
        {"/kvtier/regtest/instances/b-nobytes", "{\"instance_id\":\"b-nobytes\","
                                                "\"tokens_per_block\":16}"},
        {"/kvtier/regtest/instances/b-otherid", "{\"instance_id\":\"someone\",\"tokens_per_block\""
                                                ":16,\"bytes_per_block\":8}"},
    };
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(coord_etcd_put(e->etcd, bad[i][0], bad[i][1], strlen(bad[i][1]), 0, NULL),
                         0);
    for (int i = 0; i < 3; i++) {
        char key[96], rec[COORD_REGISTRY_JSON_MAX];
        snprintf(key, sizeof key, "/kvtier/regtest/instances/good-%d", i);
        char id[32];
        snprintf(id, sizeof id, "good-%d", i);
        kvtier_InstanceSpec s = t_spec(id, 512 + (uint64_t)i);
        assert_int_equal(coord_registry_json(&s, zclock_time(), rec, sizeof rec), 0);
        assert_int_equal(coord_etcd_put(e->etcd, key, rec, strlen(rec), 0, NULL), 0);
    }
    kvtier_InstanceSpec out[8];
    uint32_t n = 0;
    assert_int_equal(coord_registry_load(e->reg, out, 8, &n), 0);
    assert_int_equal(n, 3);
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(strncmp(out[i].instance_id, "good-", 5), 0);
    assert_int_equal(coord_registry_load(e->reg, out, 2, &n), 0);
    assert_int_equal(n, 2);
}

/* The record format: a spec round-trips; bad records say what is wrong. */
static void record_format_round_trips(void **state)
{
    (void)state;
    kvtier_InstanceSpec s = t_spec("x", 65536), back;
    char rec[COORD_REGISTRY_JSON_MAX], why[200];
    assert_int_equal(coord_registry_json(&s, zclock_time(), rec, sizeof rec), 0);
    assert_int_equal(coord_registry_parse(rec, strlen(rec), "x", &back, NULL, why, sizeof why), 0);
    assert_memory_equal(&s, &back, sizeof s);
    assert_int_equal(coord_registry_parse(rec, strlen(rec), "y", &back, NULL, why, sizeof why), -1);
    assert_non_null(strstr(why, "not its key's"));
    const char *zero = "{\"instance_id\":\"x\",\"tokens_per_block\":0,\"bytes_per_block\":1}";
    assert_int_equal(coord_registry_parse(zero, strlen(zero), NULL, &back, NULL, why, sizeof why),
                     -1);
    assert_non_null(strstr(why, "tokens_per_block"));
    const char *arr = "[1,2]";
    assert_int_equal(coord_registry_parse(arr, strlen(arr), NULL, &back, NULL, why, sizeof why),
                     -1);
    assert_non_null(strstr(why, "not a JSON object"));
    /* the number stored must be the id's slot-header number */
    const char *num = "{\"instance_id\":\"x\",\"tokens_per_block\":1,\"bytes_per_block\":1,"
                      "\"number\":1}";
    assert_int_equal(coord_registry_parse(num, strlen(num), NULL, &back, NULL, why, sizeof why),
                     -1);
    assert_non_null(strstr(why, "slot-header number"));
    int64_t when = 0;
    assert_int_equal(coord_registry_json(&s, 12345, rec, sizeof rec), 0);
    assert_int_equal(coord_registry_parse(rec, strlen(rec), "x", &back, &when, why, sizeof why), 0);
    assert_int_equal(when, 12345);
    char small[16];
    assert_int_equal(coord_registry_json(&s, 1, small, sizeof small), -1);
}

/* Puts spec s's record, written at `when` (0: an older coordinator's record,
 * without written_ms), straight into etcd. */
static void t_put_record(t_env_t *e, const kvtier_InstanceSpec *s, int64_t when)
{
    char key[128], rec[COORD_REGISTRY_JSON_MAX];
    snprintf(key, sizeof key, "/kvtier/regtest/instances/%s", s->instance_id);
    if (when > 0) {
        assert_int_equal(coord_registry_json(s, when, rec, sizeof rec), 0);
    } else {
        snprintf(rec, sizeof rec,
                 "{\"instance_id\":\"%s\",\"tokens_per_block\":%u,\"bytes_per_block\":%" PRIu64 "}",
                 s->instance_id, s->tokens_per_block, s->bytes_per_block);
    }
    assert_int_equal(coord_etcd_put(e->etcd, key, rec, strlen(rec), 0, NULL), 0);
}

/* Whether key is in etcd; its value into buf (NUL-terminated) when it is. */
static bool t_get(t_env_t *e, const char *id, char *buf, size_t cap)
{
    char key[128];
    snprintf(key, sizeof key, "/kvtier/regtest/instances/%s", id);
    size_t len = 0;
    coord_etcd_meta_t meta;
    int rc = coord_etcd_get(e->etcd, key, buf, cap - 1, &len, &meta);
    assert_true(rc == 0 || rc == -ENOENT);
    buf[rc == 0 ? len : 0] = '\0';
    return rc == 0;
}

typedef struct {
    uint32_t h;
    uint32_t i;
} t_hash_t;

static int t_hash_cmp(const void *a, const void *b)
{
    const t_hash_t *x = a, *y = b;
    return x->h < y->h ? -1 : x->h > y->h;
}

/* Two ids with one slot-header number (a 32-bit collision, found by the
 * birthday bound among 2^18 ids). */
static void t_colliding_ids(char *a, char *b, size_t cap)
{
    uint32_t n = 1u << 18;
    t_hash_t *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (uint32_t i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof id, "pod-%u", i);
        v[i] = (t_hash_t){tier_instance_hash(id), i};
    }
    qsort(v, n, sizeof *v, t_hash_cmp);
    bool found = false;
    for (uint32_t i = 1; i < n && !found; i++)
        if (v[i].h == v[i - 1].h) {
            snprintf(a, cap, "pod-%u", v[i - 1].i);
            snprintf(b, cap, "pod-%u", v[i].i);
            found = true;
        }
    free(v);
    assert_true(found);
    assert_int_equal(tier_instance_hash(a), tier_instance_hash(b));
}

/* Review finding 5: a record older than COORD_REGISTRY_MAX_AGE_MS is skipped at
 * load and deleted; a fresh one loads; one without written_ms (an older
 * coordinator's) loads and is stamped, so that it ages too. */
static void load_skips_and_deletes_stale_records(void **state)
{
    t_env_t *e = *state;
    int64_t now = zclock_time();
    kvtier_InstanceSpec old = t_spec("gone-pod", 512), fresh = t_spec("live-pod", 512),
                        legacy = t_spec("legacy-pod", 512);
    t_put_record(e, &old, now - COORD_REGISTRY_MAX_AGE_MS - 60000);
    t_put_record(e, &fresh, now - 60000);
    t_put_record(e, &legacy, 0);
    kvtier_InstanceSpec out[8];
    uint32_t n = 0;
    assert_int_equal(coord_registry_load(e->reg, out, 8, &n), 0);
    assert_int_equal(n, 2);
    for (uint32_t i = 0; i < n; i++)
        assert_string_not_equal(out[i].instance_id, "gone-pod");
    char buf[COORD_REGISTRY_JSON_MAX];
    assert_false(t_get(e, "gone-pod", buf, sizeof buf));
    assert_true(t_get(e, "live-pod", buf, sizeof buf));
    assert_true(t_get(e, "legacy-pod", buf, sizeof buf));
    kvtier_InstanceSpec back;
    int64_t when = 0;
    char why[200];
    assert_int_equal(
        coord_registry_parse(buf, strlen(buf), "legacy-pod", &back, &when, why, sizeof why), 0);
    assert_true(when >= now); /* stamped at the load */
}

/* Review finding 5: past max, the newest records are kept, not the first keys. */
static void load_keeps_the_newest_past_max(void **state)
{
    t_env_t *e = *state;
    int64_t now = zclock_time();
    kvtier_InstanceSpec a = t_spec("a-oldest", 512), b = t_spec("b-newest", 512),
                        c = t_spec("c-middle", 512);
    t_put_record(e, &a, now - 3000000);
    t_put_record(e, &b, now - 1000);
    t_put_record(e, &c, now - 2000000);
    kvtier_InstanceSpec out[2];
    uint32_t n = 0;
    assert_int_equal(coord_registry_load(e->reg, out, 2, &n), 0);
    assert_int_equal(n, 2);
    bool got_b = false, got_c = false;
    for (uint32_t i = 0; i < n; i++) {
        got_b |= strcmp(out[i].instance_id, "b-newest") == 0;
        got_c |= strcmp(out[i].instance_id, "c-middle") == 0;
    }
    assert_true(got_b && got_c);
}

/* Review finding 5: two records whose ids share a slot-header number: the load
 * keeps the newer only (never both: the blocks of one would be the other's). */
static void load_refuses_a_number_collision(void **state)
{
    t_env_t *e = *state;
    char ida[32], idb[32];
    t_colliding_ids(ida, idb, sizeof ida);
    int64_t now = zclock_time();
    kvtier_InstanceSpec a = t_spec(ida, 512), b = t_spec(idb, 512);
    t_put_record(e, &a, now - 5000);
    t_put_record(e, &b, now - 10000);
    kvtier_InstanceSpec out[4];
    uint32_t n = 0;
    assert_int_equal(coord_registry_load(e->reg, out, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(out[0].instance_id, ida);
}

/* Review finding 5, at write time: a new id whose number is that of another
 * instance's live record is not written (the scheduler of another term may not
 * have known that one); a stale such record is deleted and the new one written. */
static void write_refuses_a_number_collision(void **state)
{
    t_env_t *e = *state;
    char ida[32], idb[32];
    t_colliding_ids(ida, idb, sizeof ida);
    kvtier_InstanceSpec a = t_spec(ida, 512), b = t_spec(idb, 512), c = t_spec("marker", 512);
    t_put_record(e, &a, zclock_time() - 5000);
    zsock_t *push = zsock_new_push(e->ep);
    assert_non_null(push);
    assert_int_equal(zsock_send(push, "b", &b, sizeof b), 0);
    assert_int_equal(zsock_send(push, "b", &c, sizeof c), 0);
    char buf[COORD_REGISTRY_JSON_MAX];
    for (int i = 0; i < 500 && !t_get(e, "marker", buf, sizeof buf); i++)
        zclock_sleep(10);
    assert_true(t_get(e, "marker", buf, sizeof buf)); /* written after b was handled */
    assert_false(t_get(e, idb, buf, sizeof buf));
    assert_true(t_get(e, ida, buf, sizeof buf));

    /* a's record gone stale: b's first write deletes it (a new term: LOAD) */
    t_put_record(e, &a, zclock_time() - COORD_REGISTRY_MAX_AGE_MS - 60000);
    kvtier_InstanceSpec out[4];
    uint32_t n = 0;
    assert_int_equal(coord_registry_load(e->reg, out, 4, &n), 0); /* deletes a's, too */
    t_put_record(e, &a, zclock_time() - COORD_REGISTRY_MAX_AGE_MS - 60000);
    kvtier_InstanceSpec d = t_spec("marker2", 512);
    assert_int_equal(zsock_send(push, "b", &b, sizeof b), 0);
    assert_int_equal(zsock_send(push, "b", &d, sizeof d), 0);
    for (int i = 0; i < 500 && !t_get(e, "marker2", buf, sizeof buf); i++)
        zclock_sleep(10);
    assert_true(t_get(e, idb, buf, sizeof buf));
    assert_false(t_get(e, ida, buf, sizeof buf));
    zsock_destroy(&push);
}

/* Review finding 8: a load that timed out leaves its answer to come; the next
 * load drops it (another tag) and returns its own snapshot. The registry actor
 * is kept busy past COORD_REGISTRY_LOAD_MS by writes to a stopped etcd. */
static void late_load_answer_is_dropped(void **state)
{
    t_env_t *e = *state;
    int64_t now = zclock_time();
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "three-%d", i);
        kvtier_InstanceSpec s = t_spec(id, 512);
        t_put_record(e, &s, now);
    }
    assert_int_equal(etcd_fixture_pause(e->f), 0);
    zsock_t *push = zsock_new_push(e->ep);
    assert_non_null(push);
    for (int i = 0; i < 2; i++) { /* each: a scan and three puts, each its etcd timeout */
        char id[16];
        snprintf(id, sizeof id, "busy-%d", i);
        kvtier_InstanceSpec s = t_spec(id, 512);
        assert_int_equal(zsock_send(push, "b", &s, sizeof s), 0);
    }
    zclock_sleep(200); /* the specs reach the actor before the load (order, not timing) */
    kvtier_InstanceSpec out[8];
    uint32_t n = 0;
    assert_int_equal(coord_registry_load(e->reg, out, 1, &n), -1); /* timed out */
    assert_int_equal(etcd_fixture_resume(e->f), 0);
    /* the late answer of that load has at most 1 spec; this one's has the 3 */
    assert_int_equal(coord_registry_load(e->reg, out, 8, &n), 0);
    assert_true(n >= 3);
    zsock_destroy(&push);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(pushed_spec_is_written_and_loaded, setup, teardown),
        cmocka_unit_test_setup_teardown(load_skips_bad_and_excess_records, setup, teardown),
        cmocka_unit_test(record_format_round_trips),
        cmocka_unit_test(segments_round_trip),
        cmocka_unit_test_setup_teardown(load_skips_and_deletes_stale_records, setup, teardown),
        cmocka_unit_test_setup_teardown(load_keeps_the_newest_past_max, setup, teardown),
        cmocka_unit_test_setup_teardown(load_refuses_a_number_collision, setup, teardown),
        cmocka_unit_test_setup_teardown(write_refuses_a_number_collision, setup, teardown),
        cmocka_unit_test_setup_teardown(late_load_answer_is_dropped, setup, teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
