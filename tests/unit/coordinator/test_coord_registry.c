/* test_coord_registry.c — the instance registry in etcd (coordinator/coord_registry.h,
 * issue 9 §1) against a real etcd: a spec pushed to the actor's input is written
 * at /kvtier/<cluster>/instances/<id> as JSON without a lease, and read back by a
 * load; malformed records and records past the bound are skipped; the record
 * format round-trips and bad records are refused with a reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "coord_etcd.h"
#include "coord_registry.h"
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
        assert_int_equal(coord_registry_json(&s, rec, sizeof rec), 0);
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
    assert_int_equal(coord_registry_json(&s, rec, sizeof rec), 0);
    assert_int_equal(coord_registry_parse(rec, strlen(rec), "x", &back, why, sizeof why), 0);
    assert_memory_equal(&s, &back, sizeof s);
    assert_int_equal(coord_registry_parse(rec, strlen(rec), "y", &back, why, sizeof why), -1);
    assert_non_null(strstr(why, "not its key's"));
    const char *zero = "{\"instance_id\":\"x\",\"tokens_per_block\":0,\"bytes_per_block\":1}";
    assert_int_equal(coord_registry_parse(zero, strlen(zero), NULL, &back, why, sizeof why), -1);
    assert_non_null(strstr(why, "tokens_per_block"));
    const char *arr = "[1,2]";
    assert_int_equal(coord_registry_parse(arr, strlen(arr), NULL, &back, why, sizeof why), -1);
    assert_non_null(strstr(why, "not a JSON object"));
    char small[16];
    assert_int_equal(coord_registry_json(&s, small, sizeof small), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(pushed_spec_is_written_and_loaded, setup, teardown),
        cmocka_unit_test_setup_teardown(load_skips_bad_and_excess_records, setup, teardown),
        cmocka_unit_test(record_format_round_trips),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
