/* test_tier_actor_ucx.c — the remote tier's transport ucx (issue 9 §4) in one
 * process: a real remote tier actor (transport ucx, the cluster secret, verify_put)
 * and a real UCX peer (bus_ucx_peer.h) over tcp on loopback. The rules it checks:
 * - bytes put into the staging region reach a slot only through a WriteSlots that
 *   names the region and passes the frames path's checks: a token authorizes each
 *   write (none, another slot's, an older leader's: refused, the slot unchanged);
 * - a commit whose checksum does not match the staged bytes is refused;
 * - ReadSlots over UCX places the block in the region, with its checksum, byte
 *   exact; a later rewrite of the slot does not change what was placed;
 * - a region id that is not current, or a range past its end, is INVALID_ARGUMENT;
 * - regions are bounded (the third Probe of two regions is UNAVAILABLE);
 * - a frames-only remote tier answers Probe{ucx} without UCX and refuses a region;
 * - UCX with no usable transport (UCX_TLS=bogus), or with none that reaches another
 *   host (UCX_NET_DEVICES naming a device that does not exist), stops the tier actor
 *   at start. */
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus_client.h"
#include "bus_token_mac.h"
#include "bus_ucx_peer.h"
#include "tier_actor.h"
#include "tier_checksum.h"

#define SLOT (64u * 1024u)
#define CAP 8u
#define T_MS 10000u
#define CLUSTER "ucx-test"
#define ST_OK kvtier_StatusCode_STATUS_OK
#define ST_DENIED kvtier_StatusCode_STATUS_PERMISSION_DENIED
#define ST_INVALID kvtier_StatusCode_STATUS_INVALID_ARGUMENT
#define ST_CONFLICT kvtier_StatusCode_STATUS_CONFLICT
#define ST_UNAVAILABLE kvtier_StatusCode_STATUS_UNAVAILABLE

static const uint8_t s_secret[BUS_SECRET_BYTES] = "tier-ucx-test-secret-32-bytes!!";
static int s_seq;

typedef struct {
    zactor_t *actor;
    bus_client_t *client;
    char ep[TIER_ACTOR_ENDPOINT_MAX];
    uint64_t epoch;
    bus_ucx_peer_t *peer;
    bus_ucx_conn_t *conn;
    kvtier_ProbeReply probe;
    uint8_t bytes[SLOT], other[SLOT];
    uint8_t key[16];
} fx_t;

static uint64_t s_wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000u + (uint64_t)tv.tv_usec / 1000u;
}

static uint32_t s_mint(const fx_t *fx, bus_token_kind_t kind, uint64_t slot, uint64_t leader,
                       uint8_t *buf, size_t cap)
{
    bus_token_tier_t tt = {.tier_id = 1, .slot_size = SLOT, .epoch = fx->epoch};
    snprintf(tt.endpoint, sizeof tt.endpoint, "%s", fx->ep);
    bus_token_entry_t e = {.tier = 0, .src_tier = BUS_TOKEN_NO_TIER, .size = SLOT, .slot = slot};
    bus_token_meta_t meta = {
        .issuer = 77, .leader_epoch = leader, .expiry_ms = s_wall_ms() + 60000};
    size_t len = 0;
    assert_int_equal(bus_token_encode(kind, &meta, &tt, 1, &e, 1, buf, cap, &len), 0);
    bus_token_key_t key;
    assert_int_equal(bus_token_key_derive(s_secret, CLUSTER, &key), 0);
    assert_int_equal(bus_token_seal(&key, buf, cap, &len), 0);
    return (uint32_t)len;
}

static void s_start(fx_t *fx, const char *transport, uint32_t regions)
{
    tier_actor_config_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.tier.name, sizeof c.tier.name, "ucx%d", s_seq++);
    snprintf(c.tier.kind, sizeof c.tier.kind, "remote");
    c.tier.capacity = CAP;
    c.tier.slot_size = SLOT;
    (void)tier_config_set(&c.tier, "transport", transport);
    (void)tier_config_set(&c.tier, "prefault", "false");
    char n[16];
    snprintf(n, sizeof n, "%u", regions);
    (void)tier_config_set(&c.tier, "ucx_regions", n);
    (void)tier_config_set(&c.tier, "ucx_region_mib", "1");
    c.tier_id = 1;
    c.endpoint = "tcp://127.0.0.1:*";
    c.secret = s_secret;
    c.cluster = CLUSTER;
    c.verify_put = true;
    fx->actor = tier_actor_new(&c);
    assert_non_null(fx->actor);
    assert_int_equal(tier_actor_endpoint(fx->actor, fx->ep, sizeof fx->ep), 0);
    fx->epoch = tier_actor_epoch(fx->actor);
    bus_client_config_t cc = {.name = "test", .default_timeout_ms = T_MS};
    fx->client = bus_client_new(fx->ep, &cc);
    assert_non_null(fx->client);
}

static int s_setup(void **state)
{
    fx_t *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    for (uint32_t i = 0; i < SLOT; i++) {
        fx->bytes[i] = (uint8_t)(i * 7 + 3);
        fx->other[i] = (uint8_t)(i * 13 + 5);
    }
    memset(fx->key, 0xA5, sizeof fx->key);
    *state = fx;
    return 0;
}

static int s_teardown(void **state)
{
    fx_t *fx = *state;
    bus_ucx_conn_close(&fx->conn);
    bus_ucx_peer_destroy(&fx->peer);
    bus_client_destroy(&fx->client);
    zactor_destroy(&fx->actor);
    free(fx);
    return 0;
}

/* Probe{ucx}; the reply's UCX fields in fx->probe. */
static int s_probe(fx_t *fx, kvtier_Status *st)
{
    kvtier_Envelope req, rep;
    bus_env_init(&req, kvtier_Envelope_probe_req_tag, "test");
    req.body.probe_req.ucx = true;
    bool mask[1];
    bus_arrays_t rarr = {.mask = {mask, 0, 1}};
    int rc = bus_client_call(fx->client, &req, NULL, NULL, 0, T_MS, &rep, &rarr, NULL, st);
    if (rc == 0)
        fx->probe = rep.body.probe_rep;
    return rc == 0 ? ST_OK : (int)st->code;
}

static void s_connect(fx_t *fx)
{
    kvtier_Status st;
    char why[256];
    assert_int_equal(s_probe(fx, &st), ST_OK);
    assert_true(fx->probe.ucx_address[0] && fx->probe.ucx_region && fx->probe.ucx_rkey.size);
    assert_int_equal(fx->probe.ucx_length, 1u << 20);
    fx->peer = bus_ucx_peer_new("test", why, sizeof why);
    assert_non_null(fx->peer);
    fx->conn = bus_ucx_conn_new(fx->peer, fx->probe.ucx_address, fx->probe.ucx_region,
                                fx->probe.ucx_base, fx->probe.ucx_length, fx->probe.ucx_rkey.bytes,
                                fx->probe.ucx_rkey.size, why, sizeof why);
    assert_non_null(fx->conn);
}

static void s_done(void *arg, int status, const char *msg)
{
    (void)msg;
    *(int *)arg = status == 0 ? 1 : -1;
}

/* Flushes the connection, progressing its worker on its event fd (bounded). */
static void s_flush(fx_t *fx)
{
    int done = 0;
    char why[128];
    assert_int_equal(bus_ucx_conn_flush(fx->conn, s_done, &done, why, sizeof why), 0);
    for (int i = 0; i < 2000 && done == 0; i++) {
        if (bus_ucx_peer_progress(fx->peer) < 0) {
            struct pollfd p = {.fd = bus_ucx_peer_fd(fx->peer), .events = POLLIN};
            (void)poll(&p, 1, 5);
        }
    }
    assert_int_equal(done, 1);
}

static int s_write(fx_t *fx, uint64_t slot, uint64_t region, uint64_t off, const uint8_t *tok,
                   uint32_t ntok, kvtier_Status *st)
{
    kvtier_Envelope req, rep;
    bus_env_init(&req, kvtier_Envelope_write_slots_req_tag, "test");
    req.body.write_slots_req.tier_id = 1;
    req.body.write_slots_req.ucx_region = region;
    req.body.write_slots_req.ucx_offset = off;
    uint64_t slots[1] = {slot}, sizes[1] = {SLOT};
    bus_arrays_t arr = {
        .slots = {slots, 1, 1}, .sizes = {sizes, 1, 1}, .payload = {(uint8_t *)tok, ntok, ntok}};
    int rc = bus_client_call(fx->client, &req, &arr, NULL, 0, T_MS, &rep, NULL, NULL, st);
    return rc == 0 ? ST_OK : (int)st->code;
}

static int s_commit(fx_t *fx, uint64_t slot, uint64_t sum, kvtier_Status *st)
{
    uint8_t tok[1024];
    uint32_t n = s_mint(fx, BUS_TOKEN_ADMIN, slot, 5, tok, sizeof tok);
    kvtier_Envelope req, rep;
    bus_env_init(&req, kvtier_Envelope_put_header_req_tag, "test");
    req.body.put_header_req.tier_id = 1;
    req.body.put_header_req.state = kvtier_LocationState_LOCATION_SERVING;
    snprintf(req.body.put_header_req.instance_id, sizeof req.body.put_header_req.instance_id, "i");
    uint64_t slots[1] = {slot}, sizes[1] = {SLOT}, sums[1] = {sum};
    uint8_t keys[1][BUS_KEY_LEN];
    memcpy(keys[0], fx->key, BUS_KEY_LEN);
    bus_arrays_t arr = {.slots = {slots, 1, 1},
                        .sizes = {sizes, 1, 1},
                        .checksums = {sums, 1, 1},
                        .keys = {keys, 1, 1},
                        .payload = {tok, n, n}};
    int rc = bus_client_call(fx->client, &req, &arr, NULL, 0, T_MS, &rep, NULL, NULL, st);
    return rc == 0 ? ST_OK : (int)st->code;
}

/* ReadSlots over UCX into the region at off; the block's checksum in *sum. */
static int s_read(fx_t *fx, uint64_t slot, uint64_t off, uint64_t leader, uint64_t *sum,
                  kvtier_Status *st)
{
    uint8_t tok[1024];
    uint32_t n = s_mint(fx, BUS_TOKEN_GET, slot, leader, tok, sizeof tok);
    kvtier_Envelope req, rep;
    bus_env_init(&req, kvtier_Envelope_read_slots_req_tag, "test");
    req.body.read_slots_req.tier_id = 1;
    req.body.read_slots_req.checksums = true;
    req.body.read_slots_req.ucx_region = fx->probe.ucx_region;
    req.body.read_slots_req.ucx_offset = off;
    uint64_t slots[1] = {slot}, rsizes[4], rsums[1] = {0};
    bus_arrays_t arr = {.slots = {slots, 1, 1}, .payload = {tok, n, n}};
    bus_arrays_t rarr = {.sizes = {rsizes, 0, 4}, .checksums = {rsums, 0, 1}};
    zmsg_t *payload = NULL;
    int rc = bus_client_call(fx->client, &req, &arr, NULL, 0, T_MS, &rep, &rarr, &payload, st);
    zmsg_destroy(&payload);
    if (rc == 0) {
        assert_int_equal(rarr.sizes.n, 0); /* no frames: the bytes are in the region */
        *sum = rsums[0];
    }
    return rc == 0 ? ST_OK : (int)st->code;
}

static void s_fetch(fx_t *fx, uint64_t off, uint8_t *out)
{
    char why[128];
    assert_int_equal(bus_ucx_conn_get(fx->conn, out, SLOT, off, why, sizeof why), 0);
    s_flush(fx);
}

static void s_stage(fx_t *fx, const uint8_t *bytes, uint64_t off)
{
    char why[128];
    assert_int_equal(bus_ucx_conn_put(fx->conn, bytes, SLOT, off, why, sizeof why), 0);
    s_flush(fx);
}

static uint64_t s_sum(const uint8_t *b)
{
    struct iovec iov = {(void *)b, SLOT};
    return tier_checksum(&iov, 1);
}

static void test_ucx_round_trip_keeps_every_rule(void **state)
{
    fx_t *fx = *state;
    s_start(fx, "ucx", 2);
    s_connect(fx);
    kvtier_Status st;
    uint8_t tok[1024], out[SLOT];
    /* staged, then written under a put token, committed with its checksum */
    s_stage(fx, fx->bytes, 0);
    uint32_t n = s_mint(fx, BUS_TOKEN_PUT, 2, 5, tok, sizeof tok);
    assert_int_equal(s_write(fx, 2, fx->probe.ucx_region, 0, tok, n, &st), ST_OK);
    assert_int_equal(s_commit(fx, 2, s_sum(fx->other), &st), ST_CONFLICT); /* wrong checksum */
    assert_int_equal(s_commit(fx, 2, s_sum(fx->bytes), &st), ST_OK);
    uint64_t sum = 0;
    assert_int_equal(s_read(fx, 2, 256u << 10, 5, &sum, &st), ST_OK);
    assert_int_equal(sum, s_sum(fx->bytes));
    /* what was placed stays as read even when the slot is rewritten after */
    s_stage(fx, fx->other, 0);
    n = s_mint(fx, BUS_TOKEN_PUT, 2, 5, tok, sizeof tok);
    assert_int_equal(s_write(fx, 2, fx->probe.ucx_region, 0, tok, n, &st), ST_OK);
    s_fetch(fx, 256u << 10, out);
    assert_memory_equal(out, fx->bytes, SLOT);
    tier_actor_stats_t ts;
    assert_int_equal(tier_actor_stats(fx->actor, &ts), 0);
    assert_int_equal(ts.ucx_bytes_written, 2 * SLOT);
    assert_int_equal(ts.ucx_bytes_read, SLOT);
    assert_int_equal(ts.ucx_regions_granted, 1);
}

static void test_ucx_writes_need_their_token(void **state)
{
    fx_t *fx = *state;
    s_start(fx, "ucx", 2);
    s_connect(fx);
    kvtier_Status st;
    uint8_t tok[1024], out[SLOT];
    uint64_t sum = 0;
    s_stage(fx, fx->bytes, 0);
    uint32_t n = s_mint(fx, BUS_TOKEN_PUT, 1, 5, tok, sizeof tok);
    assert_int_equal(s_write(fx, 1, fx->probe.ucx_region, 0, tok, n, &st), ST_OK);
    assert_int_equal(s_commit(fx, 1, s_sum(fx->bytes), &st), ST_OK);
    s_stage(fx, fx->other, 0);
    /* no token; another slot's token; a get token */
    assert_int_equal(s_write(fx, 1, fx->probe.ucx_region, 0, NULL, 0, &st), ST_DENIED);
    n = s_mint(fx, BUS_TOKEN_PUT, 3, 5, tok, sizeof tok);
    assert_int_equal(s_write(fx, 1, fx->probe.ucx_region, 0, tok, n, &st), ST_DENIED);
    n = s_mint(fx, BUS_TOKEN_GET, 1, 5, tok, sizeof tok);
    assert_int_equal(s_write(fx, 1, fx->probe.ucx_region, 0, tok, n, &st), ST_DENIED);
    /* a newer leader's token is seen: an older one's write is refused (fencing) */
    assert_int_equal(s_read(fx, 1, 128u << 10, 9, &sum, &st), ST_OK);
    n = s_mint(fx, BUS_TOKEN_PUT, 1, 8, tok, sizeof tok);
    assert_int_equal(s_write(fx, 1, fx->probe.ucx_region, 0, tok, n, &st), ST_DENIED);
    assert_non_null(strstr(st.message, "newer leader"));
    /* the slot still holds the first block */
    assert_int_equal(s_read(fx, 1, 128u << 10, 9, &sum, &st), ST_OK);
    s_fetch(fx, 128u << 10, out);
    assert_memory_equal(out, fx->bytes, SLOT);
}

static void test_ucx_regions_and_ranges_are_checked(void **state)
{
    fx_t *fx = *state;
    s_start(fx, "ucx", 2);
    s_connect(fx);
    kvtier_Status st;
    uint8_t tok[1024];
    uint32_t n = s_mint(fx, BUS_TOKEN_PUT, 1, 5, tok, sizeof tok);
    assert_int_equal(s_write(fx, 1, fx->probe.ucx_region ^ 1, 0, tok, n, &st), ST_INVALID);
    assert_non_null(strstr(st.message, "no longer"));
    assert_int_equal(s_write(fx, 1, fx->probe.ucx_region, (1u << 20) - SLOT + 1, tok, n, &st),
                     ST_INVALID);
    assert_non_null(strstr(st.message, "do not fit"));
    /* two regions: the second Probe gets the other, the third none */
    kvtier_ProbeReply first = fx->probe;
    assert_int_equal(s_probe(fx, &st), ST_OK);
    assert_true(fx->probe.ucx_region != first.ucx_region);
    assert_int_equal(s_probe(fx, &st), ST_UNAVAILABLE);
    assert_non_null(strstr(st.message, "all 2 UCX staging regions"));
}

static void test_frames_only_remote_tier_has_no_ucx(void **state)
{
    fx_t *fx = *state;
    s_start(fx, "zmq", 2);
    kvtier_Status st;
    assert_int_equal(s_probe(fx, &st), ST_OK);
    assert_string_equal(fx->probe.ucx_address, "");
    assert_int_equal(fx->probe.ucx_region, 0);
    uint8_t tok[1024];
    uint32_t n = s_mint(fx, BUS_TOKEN_PUT, 1, 5, tok, sizeof tok);
    assert_int_equal(s_write(fx, 1, 42, 0, tok, n, &st), ST_INVALID);
    assert_non_null(strstr(st.message, "serves no UCX"));
}

static void test_ucx_without_a_usable_transport_stops_the_start(void **state)
{
    (void)state;
    tier_actor_config_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.tier.name, sizeof c.tier.name, "bogus");
    snprintf(c.tier.kind, sizeof c.tier.kind, "remote");
    c.tier.capacity = CAP;
    c.tier.slot_size = SLOT;
    (void)tier_config_set(&c.tier, "transport", "ucx");
    (void)tier_config_set(&c.tier, "prefault", "false");
    c.tier_id = 1;
    c.endpoint = "tcp://127.0.0.1:*";
    setenv("UCX_TLS", "bogus", 1);
    zactor_t *a = tier_actor_new(&c);
    unsetenv("UCX_TLS");
    assert_null(a);
    /* a device that does not exist leaves only shared memory: no peer could reach it */
    setenv("UCX_NET_DEVICES", "nosuch0", 1);
    a = tier_actor_new(&c);
    unsetenv("UCX_NET_DEVICES");
    assert_null(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ucx_round_trip_keeps_every_rule, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_ucx_writes_need_their_token, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_ucx_regions_and_ranges_are_checked, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_frames_only_remote_tier_has_no_ucx, s_setup,
                                        s_teardown),
        cmocka_unit_test(test_ucx_without_a_usable_transport_stops_the_start),
    };
#ifndef KVT_HAVE_UCX
    (void)tests;
    printf("UCX is not in this build: nothing to test\n");
    return 0;
#else
    return cmocka_run_group_tests(tests, NULL, NULL);
#endif
}
