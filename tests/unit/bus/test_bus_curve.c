/* test_bus_curve.c — CurveZMQ on the bus (issue 12 §2, docs/SECURITY.md) over real
 * tcp sockets with the real zauth actor: a client with a listed key is served and
 * the server sees its key; a client without keys and one with an unlisted key get
 * no reply (their handshake fails: the monitor reports it) and nothing reaches the
 * server; keys written by bus_curve_keygen load back, and secrets others can read
 * are refused with a message saying what to do. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus_client.h"
#include "bus_curve.h"
#include "bus_server.h"

#define S_WAIT_MS 30000 /* an upper bound only: every wait ends on its event */

typedef struct {
    char dir[128];
    char clients[160];
    char path[512];
    char alice_pub[BUS_CURVE_KEY_TXT];   /* listed */
    char mallory_pub[BUS_CURVE_KEY_TXT]; /* not listed */
    bus_server_t *srv;
    bus_arrays_t *arr;
} fx_t;

static void s_path(fx_t *fx, const char *dir, const char *file)
{
    snprintf(fx->path, sizeof fx->path, "%s/%s", dir, file);
}

/* Copies DIR/NAME.key (the public half) into the clients directory. */
static void s_admit(fx_t *fx, const char *name)
{
    char from[256], to[256], cmd[600];
    snprintf(from, sizeof from, "%s/%s.key", fx->dir, name);
    snprintf(to, sizeof to, "%s/%s.key", fx->clients, name);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    assert_int_equal(system(cmd), 0);
}

static int s_setup(void **state)
{
    fx_t *fx = calloc(1, sizeof *fx);
    char err[512] = "";
    snprintf(fx->dir, sizeof fx->dir, "/tmp/kvt-curve-%d-XXXXXX", (int)getpid());
    assert_non_null(mkdtemp(fx->dir));
    snprintf(fx->clients, sizeof fx->clients, "%s/clients", fx->dir);
    assert_int_equal(mkdir(fx->clients, 0700), 0);
    assert_int_equal(bus_curve_keygen(fx->dir, "server", NULL, err, sizeof err), 0);
    assert_int_equal(bus_curve_keygen(fx->dir, "proc", NULL, err, sizeof err), 0);
    assert_int_equal(bus_curve_keygen(fx->dir, "alice", fx->alice_pub, err, sizeof err), 0);
    assert_int_equal(bus_curve_keygen(fx->dir, "mallory", fx->mallory_pub, err, sizeof err), 0);
    s_admit(fx, "alice");
    s_admit(fx, "proc");
    char cert[256], server[256];
    snprintf(cert, sizeof cert, "%s/proc.key", fx->dir);
    snprintf(server, sizeof server, "%s/server.key_secret", fx->dir);
    bus_curve_config_t cfg = {.cert = cert, .server_cert = server, .clients = fx->clients};
    int rc = bus_curve_start(&cfg, err, sizeof err);
    if (rc < 0)
        fprintf(stderr, "bus_curve_start: %s\n", err);
    assert_int_equal(rc, 0);
    fx->srv = bus_server_new("tcp://127.0.0.1:*", "curve-srv");
    assert_non_null(fx->srv);
    fx->arr = bus_arrays_new(BUS_MAX_ARRAY, BUS_MAX_BLOB);
    assert_non_null(fx->arr);
    *state = fx;
    return 0;
}

static int s_teardown(void **state)
{
    fx_t *fx = *state;
    bus_server_destroy(&fx->srv);
    bus_arrays_destroy(&fx->arr);
    bus_curve_stop();
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx->dir);
    assert_int_equal(system(cmd), 0);
    free(fx);
    return 0;
}

/* Keys of DIR/NAME as a connecting side, with the server's key. */
static void s_keys(fx_t *fx, const char *name, bus_curve_client_t *k)
{
    char err[512] = "", server_pub[BUS_CURVE_KEY_TXT];
    char file[160];
    snprintf(file, sizeof file, "%s.key", name);
    s_path(fx, fx->dir, file);
    assert_int_equal(bus_curve_load_pair(fx->path, k->public_key, k->secret_key, err, sizeof err),
                     0);
    s_path(fx, fx->dir, "server.key");
    assert_int_equal(bus_curve_load_public(fx->path, server_pub, err, sizeof err), 0);
    memcpy(k->server_key, server_pub, sizeof k->server_key);
}

typedef struct {
    int done;
    kvtier_Status st;
} s_done_t;

static void s_on_reply(void *arg, bus_reply_t *r)
{
    s_done_t *d = arg;
    d->done++;
    d->st = r->status;
}

static int s_send_info(bus_client_t *c, s_done_t *d, uint32_t timeout_ms)
{
    kvtier_Envelope *env = calloc(1, sizeof *env);
    bus_env_init(env, kvtier_Envelope_cluster_info_req_tag, NULL);
    kvtier_Status st;
    int rc = bus_client_send(c, env, NULL, NULL, 0, timeout_ms, NULL, s_on_reply, d, NULL, &st);
    free(env);
    return rc;
}

/* Serves until the client's request completes; the peer key of what arrived in
 * PEER ("" when nothing did). */
static void s_serve_until_done(fx_t *fx, bus_client_t *c, s_done_t *d, char *peer, int *served)
{
    bus_request_t *req = calloc(1, sizeof *req);
    peer[0] = '\0';
    while (!d->done) {
        int rc = bus_server_recv(fx->srv, 20, req, fx->arr);
        assert_true(rc >= 0);
        if (rc == 1) {
            (*served)++;
            snprintf(peer, BUS_CURVE_KEY_TXT, "%s", req->peer_key);
            kvtier_Envelope *rep = calloc(1, sizeof *rep);
            bus_env_init_reply(rep, &req->env, kvtier_Envelope_cluster_info_rep_tag, NULL);
            assert_int_equal(bus_server_reply(fx->srv, req->routing_id, rep, NULL, NULL, 0, NULL),
                             0);
            free(rep);
        }
        assert_true(bus_client_dispatch(c, 20) >= 0);
    }
    bus_request_reset(req);
    free(req);
}

/* Waits for the server's monitor to report a failed handshake (libzmq reports
 * HANDSHAKE_FAILED_AUTH for a key zauth refused, _PROTOCOL for a client without
 * CURVE). */
static void s_expect_handshake_failure(zactor_t *mon)
{
    zsock_set_rcvtimeo(mon, S_WAIT_MS);
    for (;;) {
        zmsg_t *ev = zmsg_recv(mon);
        assert_non_null(ev);
        char *name = zmsg_popstr(ev);
        bool failed = name && !strncmp(name, "HANDSHAKE_FAILED", 16);
        zstr_free(&name);
        zmsg_destroy(&ev);
        if (failed)
            return;
    }
}

static zactor_t *s_monitor(bus_server_t *srv)
{
    zactor_t *mon = zactor_new(zmonitor, bus_server_sock(srv));
    assert_non_null(mon);
    zstr_sendx(mon, "LISTEN", "HANDSHAKE_FAILED_NO_DETAIL", "HANDSHAKE_FAILED_PROTOCOL",
               "HANDSHAKE_FAILED_AUTH", NULL);
    zstr_sendx(mon, "START", NULL);
    zsock_wait(mon);
    return mon;
}

/* Rule: a listed client key is served, and the server knows which key it was. */
static void test_listed_client_served_with_its_key(void **state)
{
    fx_t *fx = *state;
    bus_curve_client_t k;
    s_keys(fx, "alice", &k);
    bus_client_t *c = bus_client_new(bus_server_endpoint(fx->srv),
                                     &(bus_client_config_t){.name = "alice", .curve = &k});
    assert_non_null(c);
    s_done_t d = {0};
    assert_int_equal(s_send_info(c, &d, S_WAIT_MS), 0);
    char peer[BUS_CURVE_KEY_TXT];
    int served = 0;
    s_serve_until_done(fx, c, &d, peer, &served);
    assert_int_equal(d.st.code, kvtier_StatusCode_STATUS_OK);
    assert_int_equal(served, 1);
    assert_string_equal(peer, fx->alice_pub);
    bus_client_destroy(&c);
}

/* Rule: the process's own key (bus_curve_start) is used by a client given none. */
static void test_process_keys_used_by_default(void **state)
{
    fx_t *fx = *state;
    bus_client_t *c = bus_client_new(bus_server_endpoint(fx->srv), NULL);
    assert_non_null(c);
    s_done_t d = {0};
    assert_int_equal(s_send_info(c, &d, S_WAIT_MS), 0);
    char peer[BUS_CURVE_KEY_TXT];
    int served = 0;
    s_serve_until_done(fx, c, &d, peer, &served);
    assert_int_equal(d.st.code, kvtier_StatusCode_STATUS_OK);
    assert_string_equal(peer, bus_curve_process_keys()->public_key);
    bus_client_destroy(&c);
}

/* Rule: an unlisted key is refused: the handshake fails, no request reaches the
 * server, the client's call ends in TIMEOUT. */
static void test_unlisted_key_refused(void **state)
{
    fx_t *fx = *state;
    bus_curve_client_t k;
    s_keys(fx, "mallory", &k);
    zactor_t *mon = s_monitor(fx->srv);
    bus_client_t *c = bus_client_new(bus_server_endpoint(fx->srv),
                                     &(bus_client_config_t){.name = "mallory", .curve = &k});
    assert_non_null(c);
    s_done_t d = {0};
    assert_int_equal(s_send_info(c, &d, 1000), 0);
    s_expect_handshake_failure(mon);
    char peer[BUS_CURVE_KEY_TXT];
    int served = 0;
    s_serve_until_done(fx, c, &d, peer, &served);
    assert_int_equal(served, 0);
    assert_int_equal(d.st.code, kvtier_StatusCode_STATUS_TIMEOUT);
    zactor_destroy(&mon);
    bus_client_destroy(&c);
}

/* Rule: a client without keys (plain ZeroMQ) is refused the same way. */
static void test_client_without_keys_refused(void **state)
{
    fx_t *fx = *state;
    bus_curve_stop(); /* a process without the setting: its client has no keys */
    zactor_t *mon = s_monitor(fx->srv);
    bus_client_t *c = bus_client_new(bus_server_endpoint(fx->srv), NULL);
    assert_non_null(c);
    s_done_t d = {0};
    assert_int_equal(s_send_info(c, &d, 1000), 0);
    s_expect_handshake_failure(mon);
    zactor_destroy(&mon);
    /* the server socket still has its CURVE options (set at its bind) */
    char peer[BUS_CURVE_KEY_TXT];
    int served = 0;
    s_serve_until_done(fx, c, &d, peer, &served);
    assert_int_equal(served, 0);
    assert_int_equal(d.st.code, kvtier_StatusCode_STATUS_TIMEOUT);
    bus_client_destroy(&c);
}

/* Rule: fail closed: with the zauth actor gone (ZAP enforced), even a listed key
 * is refused rather than admitted unchecked. */
static void test_no_zap_handler_refuses_all(void **state)
{
    fx_t *fx = *state;
    bus_curve_client_t k;
    s_keys(fx, "alice", &k);
    bus_curve_stop(); /* the server socket keeps its CURVE options; no ZAP handler now */
    zactor_t *mon = s_monitor(fx->srv);
    bus_client_t *c = bus_client_new(bus_server_endpoint(fx->srv),
                                     &(bus_client_config_t){.name = "alice", .curve = &k});
    assert_non_null(c);
    s_done_t d = {0};
    assert_int_equal(s_send_info(c, &d, 1000), 0);
    s_expect_handshake_failure(mon);
    zactor_destroy(&mon);
    char peer[BUS_CURVE_KEY_TXT];
    int served = 0;
    s_serve_until_done(fx, c, &d, peer, &served);
    assert_int_equal(served, 0);
    assert_int_equal(d.st.code, kvtier_StatusCode_STATUS_TIMEOUT);
    bus_client_destroy(&c);
}

/* Rule: keys added to the clients directory are admitted without a restart. */
static void test_key_admitted_later(void **state)
{
    fx_t *fx = *state;
    s_admit(fx, "mallory");
    bus_curve_client_t k;
    s_keys(fx, "mallory", &k);
    bus_client_t *c = bus_client_new(bus_server_endpoint(fx->srv),
                                     &(bus_client_config_t){.name = "mallory", .curve = &k});
    assert_non_null(c);
    s_done_t d = {0};
    assert_int_equal(s_send_info(c, &d, S_WAIT_MS), 0);
    char peer[BUS_CURVE_KEY_TXT];
    int served = 0;
    s_serve_until_done(fx, c, &d, peer, &served);
    assert_int_equal(d.st.code, kvtier_StatusCode_STATUS_OK);
    assert_string_equal(peer, fx->mallory_pub);
    bus_client_destroy(&c);
}

/* Rule: secrets are never taken from a file others can read; public keys load
 * from a file or as Z85 text; keygen never overwrites a pair. */
static void test_key_files(void **state)
{
    fx_t *fx = *state;
    char err[512] = "", pub[BUS_CURVE_KEY_TXT], sec[BUS_CURVE_KEY_TXT];
    s_path(fx, fx->dir, "alice.key_secret");
    struct stat sb;
    assert_int_equal(stat(fx->path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    assert_int_equal(bus_curve_load_pair(fx->path, pub, sec, err, sizeof err), 0);
    assert_string_equal(pub, fx->alice_pub);
    assert_int_equal(chmod(fx->path, 0644), 0);
    assert_true(bus_curve_load_pair(fx->path, pub, sec, err, sizeof err) < 0);
    assert_non_null(strstr(err, "chmod 600"));
    /* a public cert alone is not a pair */
    s_path(fx, fx->clients, "alice.key");
    assert_true(bus_curve_load_pair(fx->path, pub, sec, err, sizeof err) < 0);
    assert_int_equal(bus_curve_load_public(fx->path, pub, err, sizeof err), 0);
    assert_string_equal(pub, fx->alice_pub);
    assert_int_equal(bus_curve_load_public(fx->alice_pub, pub, err, sizeof err), 0);
    assert_true(bus_curve_load_public("not-a-key", pub, err, sizeof err) < 0);
    assert_non_null(strstr(err, "not-a-key"));
    assert_true(bus_curve_keygen(fx->dir, "alice", NULL, err, sizeof err) < 0);
    assert_non_null(strstr(err, "exists"));
    assert_true(bus_curve_keygen(fx->dir, "../x", NULL, err, sizeof err) < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_listed_client_served_with_its_key, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_process_keys_used_by_default, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_unlisted_key_refused, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_client_without_keys_refused, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_no_zap_handler_refuses_all, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_key_admitted_later, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_key_files, s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
