/* test_sched_acl.c — per-instance isolation by CURVE key (issue 12 §1/§2,
 * docs/SECURITY.md "Isolation") on a real scheduler over tcp with the real zauth:
 * a key granted instance A can neither look up, nor prepare a get of, nor touch
 * instance B's blocks (PERMISSION_DENIED naming the instance and the key), while
 * B's key sees them; statistics over every instance need a "*" grant; cluster info
 * is for every admitted key; the process's own key (its metrics actor) passes. */
#include "sched_testkit.h"

#include <sys/stat.h>
#include <unistd.h>

#include "bus_curve.h"

#define S_OTHER "other-inst"

typedef struct {
    char dir[128];
    bus_curve_client_t alice, bob; /* alice: S_OTHER; bob: TK_INST */
    tk_env_t env;
    bus_client_t *own; /* the kit's client, on the process's key */
} fx_t;

static fx_t *g_fx;

static void s_pair(fx_t *fx, const char *name, bus_curve_client_t *k)
{
    char err[512], file[256], cmd[600];
    assert_int_equal(bus_curve_keygen(fx->dir, name, k ? k->public_key : NULL, err, sizeof err), 0);
    snprintf(cmd, sizeof cmd, "cp '%s/%s.key' '%s/clients/'", fx->dir, name, fx->dir);
    assert_int_equal(system(cmd), 0);
    if (!k)
        return;
    snprintf(file, sizeof file, "%s/%s.key", fx->dir, name);
    assert_int_equal(bus_curve_load_pair(file, k->public_key, k->secret_key, err, sizeof err), 0);
    snprintf(file, sizeof file, "%s/server.key", fx->dir);
    assert_int_equal(bus_curve_load_public(file, k->server_key, err, sizeof err), 0);
}

static void s_grant(sched_config_t *cfg, const char *instance, const char *key)
{
    sched_acl_entry_t *e = &cfg->acl[cfg->n_acl++];
    snprintf(e->instance, sizeof e->instance, "%s", instance);
    snprintf(e->key, sizeof e->key, "%s", key);
}

static void s_tweak(sched_config_t *cfg)
{
    cfg->acl_on = true;
    s_grant(cfg, S_OTHER, g_fx->alice.public_key);
    s_grant(cfg, TK_INST, g_fx->bob.public_key);
}

static int s_setup(void **state)
{
    fx_t *fx = calloc(1, sizeof *fx);
    g_fx = fx;
    snprintf(fx->dir, sizeof fx->dir, "/tmp/kvt-acl-%d-XXXXXX", (int)getpid());
    assert_non_null(mkdtemp(fx->dir));
    char clients[200], err[512], cert[256], server[256];
    snprintf(clients, sizeof clients, "%s/clients", fx->dir);
    assert_int_equal(mkdir(clients, 0700), 0);
    assert_int_equal(bus_curve_keygen(fx->dir, "server", NULL, err, sizeof err), 0);
    s_pair(fx, "proc", NULL);
    s_pair(fx, "alice", &fx->alice);
    s_pair(fx, "bob", &fx->bob);
    snprintf(cert, sizeof cert, "%s/proc.key", fx->dir);
    snprintf(server, sizeof server, "%s/server.key", fx->dir);
    bus_curve_config_t bc = {.cert = cert, .server_cert = server, .clients = clients};
    assert_int_equal(bus_curve_start(&bc, err, sizeof err), 0);
    tk_env_start(&fx->env, 64, s_tweak); /* registers TK_INST on the process's key */
    fx->own = fx->env.t->c;
    *state = fx;
    return 0;
}

static int s_teardown(void **state)
{
    fx_t *fx = *state;
    if (fx->env.t->c != fx->own)
        bus_client_destroy(&fx->env.t->c);
    fx->env.t->c = fx->own;
    tk_env_stop(&fx->env);
    bus_curve_stop();
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx->dir);
    assert_int_equal(system(cmd), 0);
    free(fx);
    return 0;
}

/* Makes the kit talk as K from now on. */
static void s_as(fx_t *fx, const bus_curve_client_t *k)
{
    tk_t *t = fx->env.t;
    if (t->c != fx->own)
        bus_client_destroy(&t->c);
    bus_client_config_t cc = {
        .name = "acl-test", .max_in_flight = 16, .default_timeout_ms = TK_CALL_MS, .curve = k};
    t->c = k ? bus_client_new(t->ep, &cc) : fx->own;
    assert_non_null(t->c);
}

static int s_lookup(tk_t *t, const char *inst, uint32_t n)
{
    uint8_t(*keys)[16] = calloc(n, 16);
    tk_keys(0, n, keys);
    int rc = tk_lookup(t, inst, NULL, kvtier_LookupMode_LOOKUP_MODE_PER_KEY, 0, keys, n);
    free(keys);
    return rc;
}

static int s_stats(tk_t *t, const char *inst)
{
    kvtier_StatsRequest *sr = &tk_req(t, kvtier_Envelope_stats_req_tag)->body.stats_req;
    snprintf(sr->instance_id, sizeof sr->instance_id, "%s", inst);
    return tk_call(t, NULL);
}

/* Rule: a key granted only another instance cannot see or read this one's blocks. */
static void test_foreign_key_cannot_look_up_or_read(void **state)
{
    fx_t *fx = *state;
    tk_t *t = fx->env.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 4), 0); /* stored on the process's key */

    s_as(fx, &fx->alice);
    assert_int_equal(s_lookup(t, TK_INST, 4), kvtier_StatusCode_STATUS_PERMISSION_DENIED);
    assert_non_null(strstr(t->msg, "\"" TK_INST "\""));
    assert_non_null(strstr(t->msg, fx->alice.public_key));
    uint8_t keys[4][16];
    tk_keys(0, 4, keys);
    assert_int_equal(tk_begin(t, TK_INST, "r2", 0), kvtier_StatusCode_STATUS_PERMISSION_DENIED);
    assert_int_equal(tk_prepare(t, kvtier_Envelope_prepare_get_req_tag, TK_INST, "r1", keys, 4),
                     kvtier_StatusCode_STATUS_PERMISSION_DENIED);
    assert_int_equal(tk_touch(t, keys, 4, 1000), kvtier_StatusCode_STATUS_PERMISSION_DENIED);
    assert_int_equal(tk_remove(t, keys, 4), kvtier_StatusCode_STATUS_PERMISSION_DENIED);
    assert_int_equal(s_stats(t, TK_INST), kvtier_StatusCode_STATUS_PERMISSION_DENIED);
    /* its own instance works */
    assert_int_equal(tk_register(t, S_OTHER, 4096), 0);
    assert_int_equal(s_lookup(t, S_OTHER, 4), 0);
    assert_int_equal(t->rep->body.lookup_rep.hit_count, 0);

    s_as(fx, &fx->bob); /* the blocks are still there for the key granted them */
    assert_int_equal(s_lookup(t, TK_INST, 4), 0);
    assert_int_equal(t->rep->body.lookup_rep.hit_count, 4);
    assert_int_equal(tk_remove(t, keys, 4), 0);
    assert_int_equal(s_lookup(t, S_OTHER, 1), kvtier_StatusCode_STATUS_PERMISSION_DENIED);
}

/* Rule: counters over every instance need "*"; cluster info needs only admission;
 * the process's own key is granted everything. */
static void test_stats_all_and_cluster_info(void **state)
{
    fx_t *fx = *state;
    tk_t *t = fx->env.t;
    s_as(fx, &fx->bob);
    assert_int_equal(s_stats(t, ""), kvtier_StatusCode_STATUS_PERMISSION_DENIED);
    assert_non_null(strstr(t->msg, "\"*\""));
    assert_int_equal(s_stats(t, TK_INST), 0);
    tk_req(t, kvtier_Envelope_cluster_info_req_tag);
    assert_int_equal(tk_call(t, NULL), 0);
    s_as(fx, NULL);
    assert_int_equal(s_stats(t, ""), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_foreign_key_cannot_look_up_or_read, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_stats_all_and_cluster_info, s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
