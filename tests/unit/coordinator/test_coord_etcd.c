/* test_coord_etcd.c — the etcd client of coordinator/ (DESIGN.md §3 elector and
 * membership, §6 Failover): parsing rules of the JSON gateway checked with crafted
 * and malformed answers, then every call against a real etcd from the fixture,
 * plus a fake HTTP server for answers etcd would never give. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "coord_base64.h"
#include "coord_etcd.h"
#include "coord_etcd_json.h"
#include "etcd_fixture.h"

#define WAIT_MS 10000 /* upper bound of every poll; never a timing assertion */

/* assert_int_equal that also prints the handle's last error when it fails. */
#define ASSERT_ETCD(e, call, want)                                                                 \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != (want))                                                                         \
            print_message("etcd call returned %d: %s\n", rc_, coord_etcd_last_error(e));           \
        assert_int_equal(rc_, (want));                                                             \
    } while (0)

static etcd_fixture_t *g_etcd;

static int64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void s_nap_ms(int ms)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

static coord_etcd_config_t s_cfg(const char **eps, size_t n)
{
    /* Generous: an upper bound for a loaded machine, never a timing assertion. */
    coord_etcd_config_t cfg = {.endpoints = eps, .n_endpoints = n, .timeout_ms = 10000};
    return cfg;
}

static coord_etcd_t *s_client(void)
{
    const char *eps[] = {etcd_fixture_url(g_etcd)};
    coord_etcd_config_t cfg = s_cfg(eps, 1);
    coord_etcd_t *e = coord_etcd_new(&cfg);
    assert_non_null(e);
    return e;
}

static void s_dead_url(char *buf, size_t cap)
{
    uint16_t port = etcd_fixture_free_port();
    assert_true(port != 0);
    snprintf(buf, cap, "http://127.0.0.1:%u", (unsigned)port);
}

/* ---- unit: base64, numbers, JSON answers, stream framing ------------------ */

/* Keys and values travel as base64: every byte and length survives a round trip. */
static void test_base64_roundtrips_every_length_and_byte(void **state)
{
    (void)state;
    uint8_t src[300], back[300];
    char enc[512];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (uint8_t)(i * 7 + 3);
    for (size_t n = 0; n <= sizeof src; n++) {
        size_t len = coord_base64_encode(src, n, enc, sizeof enc);
        assert_int_equal(len, coord_base64_encoded_len(n));
        size_t out = 0;
        assert_int_equal(coord_base64_decode(enc, len, back, sizeof back, &out), 0);
        assert_int_equal(out, n);
        assert_memory_equal(back, src, n);
    }
    size_t out = 0;
    assert_int_equal(coord_base64_encode("foo", 3, enc, sizeof enc), 4);
    assert_string_equal(enc, "Zm9v");
    assert_int_equal(coord_base64_decode("AAEA", 4, back, sizeof back, &out), 0);
    assert_int_equal(out, 3);
    assert_int_equal(back[0], 0);
    assert_int_equal(back[1], 1);
    assert_int_equal(back[2], 0);
    assert_int_equal(coord_base64_decode("QQ", 2, back, sizeof back, &out), 0);
    assert_int_equal(out, 1);
    assert_int_equal(back[0], 'A');
}

/* Untrusted base64 is rejected, not guessed at; small buffers are reported. */
static void test_base64_rejects_malformed_input(void **state)
{
    (void)state;
    uint8_t b[16];
    size_t out = 0;
    const char *bad[] = {
        "Zm9", "Z", "Zm9v=", "Zm=v", "Z===", "Zm 9v", "Zm9v\n", "Zm-v", "QR==", "QUJ="};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(coord_base64_decode(bad[i], strlen(bad[i]), b, sizeof b, &out), -EINVAL);
    assert_int_equal(coord_base64_decode("Zm9vYmFy", 8, b, 2, &out), -ENOBUFS);
    assert_int_equal(out, 6);
    char small[4];
    assert_int_equal(coord_base64_encode("foo", 3, small, sizeof small), 0);
}

/* Lease IDs exceed 2^53: int64 fields are parsed as decimal text, exactly. */
static void test_int64_parse_is_exact_above_2_53(void **state)
{
    (void)state;
    int64_t v = 0;
    assert_int_equal(coord_json_parse_int64("9007199254740993", 16, &v), 0);
    assert_true(v == INT64_C(9007199254740993));
    assert_int_equal(coord_json_parse_int64("9223372036854775807", 19, &v), 0);
    assert_true(v == INT64_MAX);
    assert_int_equal(coord_json_parse_int64("-9223372036854775808", 20, &v), 0);
    assert_true(v == INT64_MIN);
    assert_int_equal(coord_json_parse_int64("0", 1, &v), 0);
    assert_true(v == 0);
    const char *bad[] = {"9223372036854775808",
                         "-9223372036854775809",
                         "",
                         "-",
                         "+1",
                         " 1",
                         "1 ",
                         "01",
                         "1.0",
                         "1e3",
                         "0x10",
                         "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(coord_json_parse_int64(bad[i], strlen(bad[i]), &v), -EBADMSG);

    json_t *root = NULL;
    const char *grant =
        "{\"header\":{\"revision\":\"7\"},\"ID\":\"7587869497498523271\",\"TTL\":\"5\"}";
    assert_int_equal(coord_json_load(grant, strlen(grant), &root, NULL, 0), 0);
    int64_t id = 0, ttl = 0;
    assert_int_equal(coord_json_lease_grant(root, &id, &ttl), 0);
    assert_true(id == INT64_C(7587869497498523271));
    assert_true(ttl == 5);
    json_decref(root);
}

static int s_load_and(const char *text, int (*fn)(const json_t *root))
{
    json_t *root = NULL;
    int rc = coord_json_load(text, strlen(text), &root, NULL, 0);
    if (rc < 0)
        return rc;
    rc = fn(root);
    json_decref(root);
    return rc;
}

static int s_grant(const json_t *r)
{
    int64_t id, ttl;
    return coord_json_lease_grant(r, &id, &ttl);
}

static int s_keepalive(const json_t *r)
{
    int64_t ttl;
    return coord_json_lease_keepalive(r, &ttl);
}

static int s_count_kv(const coord_etcd_kv_t *kv, void *arg)
{
    (void)kv;
    (*(int *)arg)++;
    return 0;
}

static int s_range(const json_t *r)
{
    coord_scratch_t s = {.max = 1 << 16};
    int n = 0;
    int rc = coord_json_range(r, &s, s_count_kv, &n, NULL, NULL, NULL);
    coord_scratch_free(&s);
    return rc;
}

static int s_txn(const json_t *r)
{
    coord_scratch_t s = {.max = 1 << 16};
    bool won;
    coord_etcd_kv_t kv;
    int rc = coord_json_txn_create(r, &s, &won, &kv);
    coord_scratch_free(&s);
    return rc;
}

/* Malformed answers are errors, never crashes or asserts (STYLE rule 5). */
static void test_json_rejects_malformed_answers(void **state)
{
    (void)state;
    char err[128] = "";
    json_t *root = NULL;
    assert_int_equal(coord_json_load("{bad", 4, &root, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "malformed"));
    assert_int_equal(coord_json_load("[1]", 3, &root, err, sizeof err), -EBADMSG);
    assert_int_equal(coord_json_load("", 0, &root, err, sizeof err), -EBADMSG);

    assert_int_equal(s_load_and("{\"ID\":12.5,\"TTL\":\"5\"}", s_grant), -EBADMSG);
    assert_int_equal(s_load_and("{\"ID\":\"abc\",\"TTL\":\"5\"}", s_grant), -EBADMSG);
    assert_int_equal(s_load_and("{\"ID\":\"5\",\"TTL\":[1]}", s_grant), -EBADMSG);
    assert_int_equal(s_load_and("{\"TTL\":\"5\"}", s_grant), -EBADMSG); /* no ID */
    assert_int_equal(s_load_and("{\"ID\":\"-5\",\"TTL\":\"5\"}", s_grant), -EBADMSG);

    /* Keepalive: TTL missing or 0 means the lease is gone. */
    assert_int_equal(s_load_and("{\"result\":{\"ID\":\"5\",\"TTL\":\"3\"}}", s_keepalive), 0);
    assert_int_equal(s_load_and("{\"result\":{\"ID\":\"5\"}}", s_keepalive), -ENOENT);
    assert_int_equal(s_load_and("{\"ID\":\"5\",\"TTL\":\"0\"}", s_keepalive), -ENOENT);
    assert_int_equal(s_load_and("{\"result\":\"x\"}", s_keepalive), -EBADMSG);
    assert_int_equal(s_load_and("{\"result\":{\"TTL\":\"x\"}}", s_keepalive), -EBADMSG);

    assert_int_equal(s_load_and("{\"header\":{\"revision\":\"3\"}}", s_range), 0);
    assert_int_equal(s_load_and("{\"kvs\":{}}", s_range), -EBADMSG);
    assert_int_equal(s_load_and("{\"kvs\":[1]}", s_range), -EBADMSG);
    assert_int_equal(s_load_and("{\"kvs\":[{\"value\":\"AA==\"}]}", s_range), -EBADMSG);
    assert_int_equal(s_load_and("{\"kvs\":[{\"key\":\"*!\"}]}", s_range), -EBADMSG);
    assert_int_equal(s_load_and("{\"kvs\":[{\"key\":\"YQ==\",\"value\":7}]}", s_range), -EBADMSG);
    assert_int_equal(s_load_and("{\"kvs\":[{\"key\":\"YQ==\",\"mod_revision\":\"-1\"}]}", s_range),
                     -EBADMSG);
    assert_int_equal(s_load_and("{\"header\":[],\"kvs\":[]}", s_range), -EBADMSG);
    assert_int_equal(s_load_and("{\"more\":\"yes\"}", s_range), -EBADMSG);

    assert_int_equal(s_load_and("{\"succeeded\":true}", s_txn), -EBADMSG);
    assert_int_equal(s_load_and("{\"responses\":[{\"response_put\":{}}]}", s_txn), -EBADMSG);
    assert_int_equal(s_load_and("{\"responses\":[{\"response_range\":{}}]}", s_txn), -EBADMSG);
    assert_int_equal(
        s_load_and("{\"responses\":[{\"response_range\":{\"kvs\":[{\"key\":\"YQ==\"}]}}]}", s_txn),
        0);

    /* A scratch limit bounds what a huge value may make us allocate. */
    coord_scratch_t tiny = {.max = 8};
    coord_etcd_kv_t kv;
    const char *big = "{\"key\":\"YQ==\",\"value\":\"QUFBQUFBQUFBQUFBQUFBQQ==\"}";
    assert_int_equal(coord_json_load(big, strlen(big), &root, NULL, 0), 0);
    assert_int_equal(coord_json_kv(root, &tiny, &kv), -EMSGSIZE);
    json_decref(root);
    coord_scratch_free(&tiny);
}

static int s_err(const json_t *r)
{
    char msg[64];
    return coord_json_error(r, msg, sizeof msg);
}

/* etcd's errors (unary and stream forms) become errno codes a caller can act on. */
static void test_json_error_maps_grpc_codes(void **state)
{
    (void)state;
    assert_int_equal(s_load_and("{\"header\":{}}", s_err), 0);
    assert_int_equal(s_load_and("{\"error\":\"etcdserver: requested lease not found\","
                                "\"message\":\"etcdserver: requested lease not found\",\"code\":5}",
                                s_err),
                     -ENOENT);
    assert_int_equal(s_load_and("{\"error\":\"x\",\"code\":11}", s_err), -ERANGE);
    assert_int_equal(s_load_and("{\"error\":\"x\",\"code\":14}", s_err), -EAGAIN);
    assert_int_equal(s_load_and("{\"error\":\"x\",\"code\":3}", s_err), -EINVAL);
    assert_int_equal(s_load_and("{\"error\":\"x\"}", s_err), -EIO);
    assert_int_equal(s_load_and("{\"error\":\"x\",\"code\":\"q\"}", s_err), -EBADMSG);
    assert_int_equal(s_load_and("{\"error\":{\"grpc_code\":4,\"message\":\"slow\"}}", s_err),
                     -ETIMEDOUT);
    assert_int_equal(s_load_and("{\"error\":17}", s_err), -EBADMSG);
    char msg[64];
    json_t *root = NULL;
    const char *t = "{\"error\":\"e\",\"message\":\"etcdserver: no leader\",\"code\":14}";
    assert_int_equal(coord_json_load(t, strlen(t), &root, NULL, 0), 0);
    assert_int_equal(coord_json_error(root, msg, sizeof msg), -EAGAIN);
    assert_string_equal(msg, "etcdserver: no leader");
    json_decref(root);
}

static int s_watch_parse(const char *line, coord_watch_msg_t *m, json_t **root)
{
    int rc = coord_json_load(line, strlen(line), root, NULL, 0);
    return rc < 0 ? rc : coord_json_watch_msg(*root, m);
}

/* The watch stream: "result" wrapper, created/canceled/compaction, PUT omitted as
 * the zero type, DELETE named; anything else is an error. */
static void test_watch_lines_parse_per_gateway_framing(void **state)
{
    (void)state;
    coord_watch_msg_t m;
    json_t *root = NULL;
    assert_int_equal(
        s_watch_parse("{\"result\":{\"header\":{\"revision\":\"9\"},\"created\":true}}", &m, &root),
        0);
    assert_true(m.created && !m.canceled && m.header_revision == 9 && m.events == NULL);
    json_decref(root);

    assert_int_equal(
        s_watch_parse("{\"result\":{\"canceled\":true,\"compact_revision\":\"5\"}}", &m, &root), 0);
    assert_true(m.canceled && m.compact_revision == 5);
    json_decref(root);

    const char *ev = "{\"result\":{\"events\":[{\"kv\":{\"key\":\"dzE=\",\"create_revision\":\"8\","
                     "\"mod_revision\":\"8\",\"version\":\"1\",\"value\":\"eA==\"}},"
                     "{\"type\":\"DELETE\",\"kv\":{\"key\":\"dzE=\",\"mod_revision\":\"9\"}}]}}";
    assert_int_equal(s_watch_parse(ev, &m, &root), 0);
    assert_int_equal(json_array_size(m.events), 2);
    coord_scratch_t s = {.max = 1024};
    coord_etcd_event_t e;
    assert_int_equal(coord_json_event(json_array_get(m.events, 0), &s, &e), 0);
    assert_int_equal(e.type, COORD_ETCD_EVENT_PUT);
    assert_string_equal(e.kv.key, "w1");
    assert_int_equal(e.kv.value_len, 1);
    assert_int_equal(e.kv.value[0], 'x');
    assert_true(e.kv.mod_revision == 8);
    assert_int_equal(coord_json_event(json_array_get(m.events, 1), &s, &e), 0);
    assert_int_equal(e.type, COORD_ETCD_EVENT_DELETE);
    assert_true(e.kv.mod_revision == 9 && e.kv.value_len == 0);
    json_decref(root);

    const char *bad_type = "{\"type\":\"MERGE\",\"kv\":{\"key\":\"dzE=\"}}";
    assert_int_equal(coord_json_load(bad_type, strlen(bad_type), &root, NULL, 0), 0);
    assert_int_equal(coord_json_event(root, &s, &e), -EBADMSG);
    json_decref(root);
    coord_scratch_free(&s);

    assert_int_equal(
        s_watch_parse("{\"error\":{\"grpc_code\":14,\"message\":\"no leader\"}}", &m, &root),
        -EAGAIN);
    assert_string_equal(m.reason, "no leader");
    json_decref(root);
    assert_int_equal(s_watch_parse("{\"hello\":1}", &m, &root), -EBADMSG);
    json_decref(root);
    assert_int_equal(s_watch_parse("{\"result\":{\"events\":{}}}", &m, &root), -EBADMSG);
    json_decref(root);
    assert_int_equal(s_watch_parse("{\"result\":{\"created\":\"yes\"}}", &m, &root), -EBADMSG);
    json_decref(root);
}

typedef struct {
    char lines[8][64];
    int n;
} s_lines_t;

static int s_collect_line(char *line, size_t len, void *arg)
{
    s_lines_t *l = arg;
    if (l->n >= 8 || len >= sizeof l->lines[0])
        return -E2BIG;
    memcpy(l->lines[l->n++], line, len + 1);
    return 0;
}

/* Stream lines are reassembled across chunks and bounded (an over-long line is
 * rejected cleanly, not buffered without limit). */
static void test_linebuf_splits_chunks_and_bounds_lines(void **state)
{
    (void)state;
    coord_linebuf_t lb;
    s_lines_t got = {.n = 0};
    assert_int_equal(coord_linebuf_init(&lb, 16), 0);
    assert_int_equal(coord_linebuf_feed(&lb, "{\"a\"", 4, s_collect_line, &got), 0);
    assert_int_equal(got.n, 0);
    const char *chunk = ":1}\r\n\n{\"b\":2}\n{\"c";
    assert_int_equal(coord_linebuf_feed(&lb, chunk, strlen(chunk), s_collect_line, &got), 0);
    assert_int_equal(got.n, 2);
    assert_string_equal(got.lines[0], "{\"a\":1}");
    assert_string_equal(got.lines[1], "{\"b\":2}");
    assert_int_equal(coord_linebuf_flush(&lb, s_collect_line, &got), 0);
    assert_int_equal(got.n, 3);
    assert_string_equal(got.lines[2], "{\"c");
    /* Exactly cap bytes fit; one more does not. */
    assert_int_equal(coord_linebuf_feed(&lb, "0123456789abcdef\n", 17, s_collect_line, &got), 0);
    assert_int_equal(got.n, 4);
    assert_int_equal(coord_linebuf_feed(&lb, "0123456789abcdefX", 17, s_collect_line, &got),
                     -EMSGSIZE);
    coord_linebuf_free(&lb);
}

/* ---- a fake HTTP server for answers etcd never gives ---------------------- */

typedef struct {
    int lfd;
    uint16_t port;
    const char *response; /* full HTTP response, sent to every request */
    bool accept;          /* false: listen but never accept (a hung server) */
    pthread_t thread;
} s_fake_t;

/* Reads headers and the Content-Length body so closing does not reset the
 * connection before the client has read our answer. */
static void s_fake_read_request(int fd)
{
    char buf[8192];
    size_t len = 0;
    ssize_t r;
    while (len < sizeof buf - 1 && (r = recv(fd, buf + len, sizeof buf - 1 - len, 0)) > 0) {
        len += (size_t)r;
        buf[len] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        if (!end)
            continue;
        char *cl = strcasestr(buf, "Content-Length:");
        size_t body = cl ? strtoul(cl + 15, NULL, 10) : 0;
        if (len >= (size_t)(end + 4 - buf) + body)
            return;
    }
}

static void *s_fake_thread(void *arg)
{
    s_fake_t *f = arg;
    for (;;) {
        int fd = accept(f->lfd, NULL, NULL);
        if (fd < 0)
            return NULL; /* shutdown() of the listener ends the server */
        s_fake_read_request(fd);
        send(fd, f->response, strlen(f->response), MSG_NOSIGNAL);
        close(fd);
    }
}

static void s_fake_start(s_fake_t *f, const char *response, bool do_accept)
{
    f->response = response;
    f->accept = do_accept;
    f->lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(f->lfd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&a, &len), 0);
    assert_int_equal(listen(f->lfd, 16), 0);
    f->port = ntohs(a.sin_port);
    if (do_accept)
        assert_int_equal(pthread_create(&f->thread, NULL, s_fake_thread, f), 0);
}

static void s_fake_stop(s_fake_t *f)
{
    shutdown(f->lfd, SHUT_RDWR);
    if (f->accept)
        pthread_join(f->thread, NULL);
    close(f->lfd);
}

static coord_etcd_t *s_fake_client(const s_fake_t *f, char *url, size_t cap, int timeout_ms)
{
    snprintf(url, cap, "http://127.0.0.1:%u", (unsigned)f->port);
    const char *eps[] = {url};
    coord_etcd_config_t cfg = s_cfg(eps, 1);
    cfg.timeout_ms = timeout_ms;
    cfg.max_response = 1024;
    coord_etcd_t *e = coord_etcd_new(&cfg);
    assert_non_null(e);
    return e;
}

static int s_fake_grant(const char *response, char *err, size_t cap)
{
    s_fake_t f;
    char url[64];
    s_fake_start(&f, response, true);
    coord_etcd_t *e = s_fake_client(&f, url, sizeof url, 5000);
    int64_t id = 0, ttl = 0;
    int rc = coord_etcd_lease_grant(e, 5, 0, &id, &ttl);
    snprintf(err, cap, "%s", coord_etcd_last_error(e));
    coord_etcd_destroy(&e);
    s_fake_stop(&f);
    return rc;
}

#define HTTP200 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"

/* A server that answers garbage gets an error with a reason, never a crash. */
static void test_client_reports_malformed_http_answers(void **state)
{
    (void)state;
    char err[COORD_ETCD_ERR_MAX];
    assert_int_equal(s_fake_grant(HTTP200 "Content-Length: 4\r\n\r\n{bad", err, sizeof err),
                     -EBADMSG);
    assert_non_null(strstr(err, "malformed"));
    assert_non_null(strstr(err, "lease/grant"));
    assert_int_equal(s_fake_grant(HTTP200 "Content-Length: 2\r\n\r\n[]", err, sizeof err),
                     -EBADMSG);
    assert_int_equal(s_fake_grant(HTTP200 "Content-Length: 20\r\n\r\n{\"ID\":1.5,\"TTL\":\"5\"}",
                                  err, sizeof err),
                     -EBADMSG);
    assert_int_equal(s_fake_grant("HTTP/1.1 404 Not Found\r\nConnection: close\r\n"
                                  "Content-Length: 9\r\n\r\nNot Found",
                                  err, sizeof err),
                     -EPROTO);
    assert_non_null(strstr(err, "HTTP 404"));
    /* An answer past max_response (1024 here) is cut off, not buffered. */
    static char big[4096];
    int n = snprintf(big, sizeof big, HTTP200 "Content-Length: 2000\r\n\r\n{\"ID\":\"");
    memset(big + n, '1', 2000 - 7);
    memcpy(big + n + 2000 - 7, "\"}", 3);
    assert_int_equal(s_fake_grant(big, err, sizeof err), -EMSGSIZE);
    assert_int_equal(s_fake_grant(HTTP200 "Content-Length: 0\r\n\r\n", err, sizeof err), -EBADMSG);
    /* The server closes before the promised body is complete. */
    assert_int_equal(s_fake_grant(HTTP200 "Content-Length: 30\r\n\r\n{\"ID\":", err, sizeof err),
                     -ECONNRESET);
    assert_non_null(strstr(err, "connection broken"));
}

/* A server that accepts but never answers fails the call with -ETIMEDOUT within
 * the configured timeout (the call returns; no retry of a request that left). */
static void test_hung_server_times_out(void **state)
{
    (void)state;
    s_fake_t f;
    char url[64];
    s_fake_start(&f, NULL, false);
    coord_etcd_t *e = s_fake_client(&f, url, sizeof url, 300);
    int64_t ttl = 0;
    ASSERT_ETCD(e, coord_etcd_lease_keepalive(e, 42, &ttl), -ETIMEDOUT);
    assert_non_null(strstr(coord_etcd_last_error(e), url));
    assert_non_null(strstr(coord_etcd_last_error(e), "timed out"));
    coord_etcd_destroy(&e);
    s_fake_stop(&f);
}

/* ---- watch collector ------------------------------------------------------ */

typedef struct {
    coord_etcd_event_type_t type;
    char key[64];
    char value[64];
    size_t value_len;
    int64_t rev;
} s_ev_t;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    s_ev_t ev[32];
    int n;
    int ends;
    coord_etcd_watch_end_t end;
    char end_msg[COORD_ETCD_ERR_MAX];
} s_watch_log_t;

static void s_log_init(s_watch_log_t *l)
{
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
}

static void s_log_fini(s_watch_log_t *l)
{
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
}

static int s_on_event(const coord_etcd_event_t *ev, void *arg)
{
    s_watch_log_t *l = arg;
    pthread_mutex_lock(&l->mu);
    if (l->n < 32) {
        s_ev_t *o = &l->ev[l->n++];
        o->type = ev->type;
        snprintf(o->key, sizeof o->key, "%s", ev->kv.key);
        o->value_len = ev->kv.value_len < sizeof o->value ? ev->kv.value_len : sizeof o->value;
        memcpy(o->value, ev->kv.value, o->value_len);
        o->rev = ev->kv.mod_revision;
    }
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return 0;
}

static void s_on_end(const coord_etcd_watch_end_t *end, void *arg)
{
    s_watch_log_t *l = arg;
    pthread_mutex_lock(&l->mu);
    l->ends++;
    l->end = *end;
    snprintf(l->end_msg, sizeof l->end_msg, "%s", end->message);
    l->end.message = l->end_msg;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

/* Waits until at least n events (or an end, when n < 0) were logged. */
static bool s_log_wait(s_watch_log_t *l, int n)
{
    int64_t deadline = s_now_ms() + WAIT_MS;
    pthread_mutex_lock(&l->mu);
    while ((n >= 0 ? l->n < n : l->ends == 0) && s_now_ms() < deadline) {
        pthread_mutex_unlock(&l->mu);
        s_nap_ms(2);
        pthread_mutex_lock(&l->mu);
    }
    bool ok = n >= 0 ? l->n >= n : l->ends > 0;
    pthread_mutex_unlock(&l->mu);
    return ok;
}

static coord_etcd_watch_t *s_watch(const char **eps, size_t n, size_t max_line, const char *key,
                                   bool prefix, int64_t rev, s_watch_log_t *log)
{
    coord_etcd_config_t cfg = s_cfg(eps, n);
    cfg.max_response = max_line;
    coord_etcd_watch_spec_t spec = {.key = key,
                                    .prefix = prefix,
                                    .start_revision = rev,
                                    .on_event = s_on_event,
                                    .on_end = s_on_end,
                                    .arg = log};
    coord_etcd_watch_t *w = coord_etcd_watch_new(&cfg, &spec);
    assert_non_null(w);
    return w;
}

/* A garbage line on the watch stream ends the watch with -EBADMSG via on_end. */
static void test_watch_malformed_stream_line_ends_watch(void **state)
{
    (void)state;
    s_fake_t f;
    s_fake_start(&f,
                 HTTP200 "\r\n{\"result\":{\"created\":true}}\n{\"result\":{\"events\":[{\"kv\""
                         ":{\"key\":\"%%%\"}}]}}\n",
                 true);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u", (unsigned)f.port);
    const char *eps[] = {url};
    s_watch_log_t log;
    s_log_init(&log);
    coord_etcd_watch_t *w = s_watch(eps, 1, 0, "/x", true, 0, &log);
    assert_true(s_log_wait(&log, -1));
    assert_int_equal(log.end.err, -EBADMSG);
    assert_int_equal(log.n, 0);
    assert_non_null(strstr(log.end_msg, "malformed"));
    coord_etcd_watch_destroy(&w);
    assert_null(w);
    assert_int_equal(log.ends, 1);
    s_log_fini(&log);
    s_fake_stop(&f);

    /* Something that is not etcd's gateway answers: -EPROTO, not a parse error. */
    s_fake_start(&f, "HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\nNot Found", true);
    snprintf(url, sizeof url, "http://127.0.0.1:%u", (unsigned)f.port);
    s_log_init(&log);
    w = s_watch(eps, 1, 0, "/x", true, 0, &log);
    assert_true(s_log_wait(&log, -1));
    assert_int_equal(log.end.err, -EPROTO);
    assert_non_null(strstr(log.end_msg, "HTTP 404"));
    coord_etcd_watch_destroy(&w);
    s_log_fini(&log);
    s_fake_stop(&f);
}

/* ---- against a real etcd -------------------------------------------------- */

/* Leases (DESIGN §3: tiers register under a lease; the elector keeps one alive):
 * grant, keepalive, revoke; keepalive of a revoked lease says "gone". */
static void test_lease_grant_keepalive_revoke(void **state)
{
    (void)state;
    coord_etcd_t *e = s_client();
    int64_t id = 0, ttl = 0, left = 0;
    ASSERT_ETCD(e, coord_etcd_lease_grant(e, 5, 0, &id, &ttl), 0);
    assert_true(id > 0);
    assert_true(ttl == 5);
    ASSERT_ETCD(e, coord_etcd_lease_keepalive(e, id, &left), 0);
    assert_true(left > 0 && left <= 5);
    assert_string_equal(coord_etcd_last_error(e), "");
    ASSERT_ETCD(e, coord_etcd_lease_revoke(e, id), 0);
    ASSERT_ETCD(e, coord_etcd_lease_keepalive(e, id, &left), -ENOENT);
    assert_non_null(strstr(coord_etcd_last_error(e), "gone"));
    ASSERT_ETCD(e, coord_etcd_lease_revoke(e, id), -ENOENT);
    assert_non_null(strstr(coord_etcd_last_error(e), "lease not found"));
    coord_etcd_destroy(&e);
    assert_null(e);
    coord_etcd_destroy(&e);
}

/* Lease IDs above 2^53 round-trip exactly through the gateway (a double would
 * turn 2^53 + 1 into 2^53). */
static void test_lease_id_above_2_53_round_trips(void **state)
{
    (void)state;
    coord_etcd_t *e = s_client();
    const int64_t want = (INT64_C(1) << 53) + 1;
    int64_t id = 0, ttl = 0, left = 0;
    ASSERT_ETCD(e, coord_etcd_lease_grant(e, 5, want, &id, &ttl), 0);
    assert_true(id == want);
    ASSERT_ETCD(e, coord_etcd_lease_keepalive(e, want, &left), 0);
    ASSERT_ETCD(e, coord_etcd_lease_keepalive(e, want - 1, &left), -ENOENT);
    ASSERT_ETCD(e, coord_etcd_lease_grant(e, 5, want, &id, &ttl), -EEXIST);
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/bigid/k", "v", 1, want, NULL), 0);
    coord_etcd_meta_t meta;
    size_t len = 0;
    char buf[8];
    ASSERT_ETCD(e, coord_etcd_get(e, "/t/bigid/k", buf, sizeof buf, &len, &meta), 0);
    assert_true(meta.lease == want);
    ASSERT_ETCD(e, coord_etcd_lease_revoke(e, want), 0);
    coord_etcd_destroy(&e);
}

/* Polls get until the key is gone (-ENOENT) or WAIT_MS passes. */
static int s_wait_gone(coord_etcd_t *e, const char *key)
{
    int64_t deadline = s_now_ms() + WAIT_MS;
    int rc;
    size_t len;
    while ((rc = coord_etcd_get(e, key, NULL, 0, &len, NULL)) == 0 && s_now_ms() < deadline)
        s_nap_ms(20);
    return rc;
}

/* Membership rule: a key put under a lease disappears with the lease, whether it
 * is revoked or it expires. */
static void test_leased_key_vanishes_with_lease(void **state)
{
    (void)state;
    coord_etcd_t *e = s_client();
    int64_t id = 0, ttl = 0;
    size_t len = 0;
    ASSERT_ETCD(e, coord_etcd_lease_grant(e, 30, 0, &id, &ttl), 0);
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/lease/revoked", "x", 1, id, NULL), 0);
    ASSERT_ETCD(e, coord_etcd_get(e, "/t/lease/revoked", NULL, 0, &len, NULL), 0);
    ASSERT_ETCD(e, coord_etcd_lease_revoke(e, id), 0);
    assert_int_equal(s_wait_gone(e, "/t/lease/revoked"), -ENOENT);

    ASSERT_ETCD(e, coord_etcd_lease_grant(e, 1, 0, &id, &ttl), 0);
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/lease/expired", "y", 1, id, NULL), 0);
    assert_int_equal(s_wait_gone(e, "/t/lease/expired"), -ENOENT);
    int64_t left = 0;
    ASSERT_ETCD(e, coord_etcd_lease_keepalive(e, id, &left), -ENOENT);

    /* A put on a lease that does not exist fails and leaves nothing behind. */
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/lease/none", "z", 1, id, NULL), -ENOENT);
    ASSERT_ETCD(e, coord_etcd_get(e, "/t/lease/none", NULL, 0, &len, NULL), -ENOENT);
    coord_etcd_destroy(&e);
}

/* put_prev returns the value the same write replaced: none for a new key, the old
 * bytes after, an error with the size for a small buffer (the write done anyway). */
static void test_put_prev_returns_old_value(void **state)
{
    (void)state;
    coord_etcd_t *e = s_client();
    char buf[16];
    size_t len = 99;
    bool had = true;
    assert_int_equal(coord_etcd_cluster_id(e), 0); /* no answer yet */
    ASSERT_ETCD(e, coord_etcd_delete(e, "/t/prev/k", NULL), 0);
    assert_true(coord_etcd_cluster_id(e) != 0); /* the etcd cluster that answered */
    ASSERT_ETCD(e, coord_etcd_put_prev(e, "/t/prev/k", "first", 5, 0, buf, sizeof buf, &len, &had), 0);
    assert_false(had);
    ASSERT_ETCD(e, coord_etcd_put_prev(e, "/t/prev/k", "second", 6, 0, buf, sizeof buf, &len, &had), 0);
    assert_true(had);
    assert_int_equal(len, 5);
    assert_memory_equal(buf, "first", 5);
    ASSERT_ETCD(e, coord_etcd_put_prev(e, "/t/prev/k", "3", 1, 0, buf, 2, &len, &had), -ENOBUFS);
    assert_true(had);
    assert_int_equal(len, 6);
    ASSERT_ETCD(e, coord_etcd_get(e, "/t/prev/k", buf, sizeof buf, &len, NULL), 0);
    assert_int_equal(len, 1);
    assert_memory_equal(buf, "3", 1);
    ASSERT_ETCD(e, coord_etcd_put_prev(e, "/t/prev/k", "x", 1, 0, buf, sizeof buf, &len, NULL), -EINVAL);
    coord_etcd_destroy(&e);
}

/* Values are bytes: zeros inside, 0xff, and the empty value survive; revisions are
 * reported; a small buffer is an error with the size needed. */
static void test_put_get_binary_values(void **state)
{
    (void)state;
    coord_etcd_t *e = s_client();
    const uint8_t val[] = {0, 1, 0, 0xff, 'a', 0, 0x80, 0};
    uint8_t buf[64];
    size_t len = 0;
    int64_t rev1 = 0, rev2 = 0;
    coord_etcd_meta_t m1, m2;
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/bin/k", val, sizeof val, 0, &rev1), 0);
    ASSERT_ETCD(e, coord_etcd_get(e, "/t/bin/k", buf, sizeof buf, &len, &m1), 0);
    assert_int_equal(len, sizeof val);
    assert_memory_equal(buf, val, sizeof val);
    assert_true(m1.create_revision == rev1 && m1.mod_revision == rev1 && m1.version == 1);
    assert_true(m1.lease == 0);

    ASSERT_ETCD(e, coord_etcd_put(e, "/t/bin/k", val, 3, 0, &rev2), 0);
    ASSERT_ETCD(e, coord_etcd_get(e, "/t/bin/k", buf, sizeof buf, &len, &m2), 0);
    assert_int_equal(len, 3);
    assert_true(m2.create_revision == rev1 && m2.mod_revision == rev2 && rev2 > rev1);
    assert_true(m2.version == 2);

    ASSERT_ETCD(e, coord_etcd_put(e, "/t/bin/k", val, sizeof val, 0, NULL), 0);
    ASSERT_ETCD(e, coord_etcd_get(e, "/t/bin/k", buf, 4, &len, NULL), -ENOBUFS);
    assert_int_equal(len, sizeof val);
    ASSERT_ETCD(e, coord_etcd_get(e, "/t/bin/k", NULL, 0, &len, NULL), 0);
    assert_int_equal(len, sizeof val);

    ASSERT_ETCD(e, coord_etcd_put(e, "/t/bin/empty", NULL, 0, 0, NULL), 0);
    ASSERT_ETCD(e, coord_etcd_get(e, "/t/bin/empty", buf, sizeof buf, &len, NULL), 0);
    assert_int_equal(len, 0);

    ASSERT_ETCD(e, coord_etcd_get(e, "/t/bin/missing", buf, sizeof buf, &len, NULL), -ENOENT);
    assert_non_null(strstr(coord_etcd_last_error(e), "/t/bin/missing"));
    ASSERT_ETCD(e, coord_etcd_put(e, "", "x", 1, 0, NULL), -EINVAL);
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/bin/k", NULL, 3, 0, NULL), -EINVAL);
    coord_etcd_destroy(&e);
}

typedef struct {
    char keys[16][32];
    int n;
    int stop_after;
} s_keys_t;

static int s_collect_key(const coord_etcd_kv_t *kv, void *arg)
{
    s_keys_t *k = arg;
    if (k->n < 16)
        snprintf(k->keys[k->n], sizeof k->keys[0], "%s", kv->key);
    k->n++;
    return k->stop_after && k->n >= k->stop_after ? 7 : 0;
}

/* Range over a prefix is bounded per call (limit) and pages consistently at one
 * revision; keys outside the prefix never appear. */
static void test_range_prefix_pages_with_limit(void **state)
{
    (void)state;
    coord_etcd_t *e = s_client();
    const char *names[] = {"/t/range/a", "/t/range/b", "/t/range/c", "/t/range/d", "/t/range/e"};
    for (int i = 0; i < 5; i++)
        ASSERT_ETCD(e, coord_etcd_put(e, names[i], "v", 1, 0, NULL), 0);
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/range0", "out", 3, 0, NULL), 0);
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/rang", "out", 3, 0, NULL), 0);

    s_keys_t got = {.n = 0};
    coord_etcd_range_info_t info;
    coord_etcd_range_opts_t opts = {.limit = 2};
    ASSERT_ETCD(e, coord_etcd_range(e, "/t/range/", &opts, s_collect_key, &got, &info), 0);
    assert_int_equal(info.count, 2);
    assert_true(info.more);
    assert_true(info.revision > 0);
    opts.revision = info.revision;
    while (info.more) {
        opts.after_key = got.keys[got.n - 1];
        ASSERT_ETCD(e, coord_etcd_range(e, "/t/range/", &opts, s_collect_key, &got, &info), 0);
        assert_true(info.count <= 2);
    }
    assert_int_equal(got.n, 5);
    for (int i = 0; i < 5; i++)
        assert_string_equal(got.keys[i], names[i]);

    /* A callback's non-zero return stops the range and is returned. */
    s_keys_t stop = {.n = 0, .stop_after = 1};
    ASSERT_ETCD(e, coord_etcd_range(e, "/t/range/", NULL, s_collect_key, &stop, &info), 7);
    assert_int_equal(stop.n, 1);
    assert_true(info.more);
    /* Empty prefix range: every key; bad after_key is refused. */
    s_keys_t all = {.n = 0};
    ASSERT_ETCD(e, coord_etcd_range(e, "", NULL, s_collect_key, &all, &info), 0);
    assert_true(all.n >= 7);
    opts.after_key = "/elsewhere";
    ASSERT_ETCD(e, coord_etcd_range(e, "/t/range/", &opts, s_collect_key, &got, &info), -EINVAL);
    coord_etcd_destroy(&e);
}

/* delete removes one key; delete_prefix removes the subtree and nothing else. */
static void test_delete_and_delete_prefix(void **state)
{
    (void)state;
    coord_etcd_t *e = s_client();
    size_t len;
    int64_t n = -1;
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/del/a", "1", 1, 0, NULL), 0);
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/del/b", "2", 1, 0, NULL), 0);
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/del/c/d", "3", 1, 0, NULL), 0);
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/delx", "4", 1, 0, NULL), 0);
    ASSERT_ETCD(e, coord_etcd_delete(e, "/t/del/a", &n), 0);
    assert_true(n == 1);
    ASSERT_ETCD(e, coord_etcd_get(e, "/t/del/a", NULL, 0, &len, NULL), -ENOENT);
    ASSERT_ETCD(e, coord_etcd_delete(e, "/t/del/a", &n), 0);
    assert_true(n == 0);
    ASSERT_ETCD(e, coord_etcd_delete_prefix(e, "/t/del/", &n), 0);
    assert_true(n == 2);
    ASSERT_ETCD(e, coord_etcd_get(e, "/t/del/c/d", NULL, 0, &len, NULL), -ENOENT);
    ASSERT_ETCD(e, coord_etcd_get(e, "/t/delx", NULL, 0, &len, NULL), 0);
    ASSERT_ETCD(e, coord_etcd_delete_prefix(e, "", &n), -EINVAL);
    coord_etcd_destroy(&e);
}

/* Withdrawing a record only while it is one's own (the leader's events record):
 * one transaction compares the value, so another writer's record survives. */
static void test_delete_if_value_keeps_another_writers_record(void **state)
{
    (void)state;
    coord_etcd_t *e = s_client();
    size_t len;
    bool deleted = true;
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/div", "newer", 5, 0, NULL), 0);
    ASSERT_ETCD(e, coord_etcd_delete_if_value(e, "/t/div", "mine", 4, &deleted), 0);
    assert_false(deleted);
    ASSERT_ETCD(e, coord_etcd_get(e, "/t/div", NULL, 0, &len, NULL), 0);
    assert_true(len == 5);
    ASSERT_ETCD(e, coord_etcd_delete_if_value(e, "/t/div", "newer", 5, &deleted), 0);
    assert_true(deleted);
    ASSERT_ETCD(e, coord_etcd_get(e, "/t/div", NULL, 0, &len, NULL), -ENOENT);
    /* absent: nothing to delete, no error */
    ASSERT_ETCD(e, coord_etcd_delete_if_value(e, "/t/div", "newer", 5, &deleted), 0);
    assert_false(deleted);
    coord_etcd_destroy(&e);
}

/* Election (DESIGN §6 Failover): the first campaign wins, the second loses and
 * sees the winner; when the winner's lease is revoked a new campaign wins. */
static void test_create_if_absent_elects_one_leader(void **state)
{
    (void)state;
    coord_etcd_t *a = s_client(), *b = s_client();
    int64_t la = 0, lb = 0, ttl = 0;
    ASSERT_ETCD(a, coord_etcd_lease_grant(a, 10, 0, &la, &ttl), 0);
    ASSERT_ETCD(b, coord_etcd_lease_grant(b, 10, 0, &lb, &ttl), 0);
    const char ka[] = "coord-a\0tcp://a", kb[] = "coord-b\0tcp://b";
    bool won = false;
    char cur[64];
    size_t len = 0;
    coord_etcd_meta_t ma, mb;
    ASSERT_ETCD(a,
                coord_etcd_create_if_absent(a, "/t/elect/leader", ka, sizeof ka, la, &won, cur,
                                            sizeof cur, &len, &ma),
                0);
    assert_true(won);
    assert_int_equal(len, sizeof ka);
    assert_memory_equal(cur, ka, sizeof ka);
    assert_true(ma.lease == la && ma.create_revision > 0);

    won = true;
    ASSERT_ETCD(b,
                coord_etcd_create_if_absent(b, "/t/elect/leader", kb, sizeof kb, lb, &won, cur,
                                            sizeof cur, &len, &mb),
                0);
    assert_false(won);
    assert_int_equal(len, sizeof ka);
    assert_memory_equal(cur, ka, sizeof ka);
    assert_true(mb.create_revision == ma.create_revision && mb.lease == la);

    /* Too small a buffer still tells who won. */
    won = true;
    ASSERT_ETCD(b,
                coord_etcd_create_if_absent(b, "/t/elect/leader", kb, sizeof kb, lb, &won, cur, 2,
                                            &len, NULL),
                -ENOBUFS);
    assert_false(won);
    assert_int_equal(len, sizeof ka);

    ASSERT_ETCD(a, coord_etcd_lease_revoke(a, la), 0);
    ASSERT_ETCD(b,
                coord_etcd_create_if_absent(b, "/t/elect/leader", kb, sizeof kb, lb, &won, cur,
                                            sizeof cur, &len, &mb),
                0);
    assert_true(won);
    assert_memory_equal(cur, kb, sizeof kb);
    assert_true(mb.create_revision > ma.create_revision && mb.lease == lb);
    ASSERT_ETCD(b, coord_etcd_lease_revoke(b, lb), 0);
    coord_etcd_destroy(&a);
    coord_etcd_destroy(&b);
}

/* Membership watch: PUT and DELETE events arrive in order with their revisions
 * (list at revision R, watch from R + 1: nothing missed); stop ends it with 0. */
static void test_watch_delivers_put_and_delete_in_order(void **state)
{
    (void)state;
    coord_etcd_t *e = s_client();
    const char *eps[] = {etcd_fixture_url(g_etcd)};
    coord_etcd_range_info_t info;
    s_keys_t none = {.n = 0};
    ASSERT_ETCD(e, coord_etcd_range(e, "/t/watch/", NULL, s_collect_key, &none, &info), 0);
    s_watch_log_t log;
    s_log_init(&log);
    coord_etcd_watch_t *w = s_watch(eps, 1, 0, "/t/watch/", true, info.revision + 1, &log);
    const uint8_t bin[] = {'v', 0, '1'};
    int64_t r1 = 0, r2 = 0;
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/watch/m1", bin, sizeof bin, 0, &r1), 0);
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/watchx", "no", 2, 0, NULL), 0); /* outside */
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/watch/m2", "b", 1, 0, NULL), 0);
    ASSERT_ETCD(e, coord_etcd_delete(e, "/t/watch/m1", NULL), 0);
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/watch/m3", "c", 1, 0, &r2), 0);
    assert_true(s_log_wait(&log, 4));
    assert_int_equal(coord_etcd_watch_wait_created(w, WAIT_MS), 0);
    pthread_mutex_lock(&log.mu);
    assert_int_equal(log.n, 4);
    assert_int_equal(log.ev[0].type, COORD_ETCD_EVENT_PUT);
    assert_string_equal(log.ev[0].key, "/t/watch/m1");
    assert_int_equal(log.ev[0].value_len, sizeof bin);
    assert_memory_equal(log.ev[0].value, bin, sizeof bin);
    assert_true(log.ev[0].rev == r1);
    assert_string_equal(log.ev[1].key, "/t/watch/m2");
    assert_int_equal(log.ev[2].type, COORD_ETCD_EVENT_DELETE);
    assert_string_equal(log.ev[2].key, "/t/watch/m1");
    assert_int_equal(log.ev[2].value_len, 0);
    assert_string_equal(log.ev[3].key, "/t/watch/m3");
    assert_true(log.ev[3].rev == r2);
    for (int i = 1; i < 4; i++)
        assert_true(log.ev[i].rev > log.ev[i - 1].rev);
    pthread_mutex_unlock(&log.mu);

    coord_etcd_watch_destroy(&w);
    assert_null(w);
    assert_int_equal(log.ends, 1);
    assert_int_equal(log.end.err, 0);
    assert_true(log.end.last_revision == r2);
    coord_etcd_watch_destroy(&w);
    s_log_fini(&log);
    coord_etcd_destroy(&e);
}

/* An idle watch (start revision 0, "from now") is confirmed, sees what follows,
 * and stops on request without waiting for traffic. */
static void test_watch_from_now_and_stop_when_idle(void **state)
{
    (void)state;
    coord_etcd_t *e = s_client();
    const char *eps[] = {etcd_fixture_url(g_etcd)};
    s_watch_log_t log;
    s_log_init(&log);
    coord_etcd_watch_t *w = s_watch(eps, 1, 0, "/t/idle/key", false, 0, &log);
    assert_int_equal(coord_etcd_watch_wait_created(w, WAIT_MS), 0);
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/idle/key2", "x", 1, 0, NULL), 0); /* not watched */
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/idle/key", "y", 1, 0, NULL), 0);
    assert_true(s_log_wait(&log, 1));
    assert_string_equal(log.ev[0].key, "/t/idle/key");
    coord_etcd_watch_destroy(&w);
    assert_int_equal(log.ends, 1);
    assert_int_equal(log.end.err, 0);
    assert_int_equal(log.n, 1);
    s_log_fini(&log);
    coord_etcd_destroy(&e);
}

/* A watch from a compacted revision ends with -ERANGE and the oldest revision
 * still available, so the caller re-lists instead of missing events. */
static void test_watch_from_compacted_revision_fails_with_erange(void **state)
{
    (void)state;
    coord_etcd_t *e = s_client();
    const char *eps[] = {etcd_fixture_url(g_etcd)};
    int64_t r1 = 0, r2 = 0;
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/compact/a", "1", 1, 0, &r1), 0);
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/compact/a", "2", 1, 0, &r2), 0);
    ASSERT_ETCD(e, coord_etcd_compact(e, r2), 0);
    s_watch_log_t log;
    s_log_init(&log);
    coord_etcd_watch_t *w = s_watch(eps, 1, 0, "/t/compact/", true, r1, &log);
    assert_true(s_log_wait(&log, -1));
    assert_int_equal(log.end.err, -ERANGE);
    assert_true(log.end.compact_revision >= r2);
    assert_non_null(strstr(log.end_msg, "compacted"));
    assert_int_equal(coord_etcd_watch_wait_created(w, WAIT_MS), -ERANGE);
    coord_etcd_watch_destroy(&w);
    assert_int_equal(log.ends, 1);
    /* Reading at a compacted revision is -ERANGE too. */
    coord_etcd_range_opts_t opts = {.revision = r1};
    s_keys_t got = {.n = 0};
    ASSERT_ETCD(e, coord_etcd_range(e, "/t/compact/", &opts, s_collect_key, &got, NULL), -ERANGE);
    s_log_fini(&log);
    coord_etcd_destroy(&e);
}

/* Stream lines are bounded: an event larger than max_response ends the watch
 * with -EMSGSIZE instead of growing a buffer without limit. */
static void test_watch_rejects_overlong_line(void **state)
{
    (void)state;
    coord_etcd_t *e = s_client();
    const char *eps[] = {etcd_fixture_url(g_etcd)};
    s_watch_log_t log;
    s_log_init(&log);
    coord_etcd_watch_t *w = s_watch(eps, 1, 512, "/t/long/", true, 0, &log);
    assert_int_equal(coord_etcd_watch_wait_created(w, WAIT_MS), 0);
    static uint8_t big[2048];
    memset(big, 'z', sizeof big);
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/long/k", big, sizeof big, 0, NULL), 0);
    assert_true(s_log_wait(&log, -1));
    assert_int_equal(log.end.err, -EMSGSIZE);
    assert_int_equal(log.n, 0);
    coord_etcd_watch_destroy(&w);
    s_log_fini(&log);
    coord_etcd_destroy(&e);
}

/* Endpoint lists: a dead first endpoint is skipped (connection refused is safe
 * to retry elsewhere), for calls and watches; later calls stay on the live one. */
static void test_dead_first_endpoint_fails_over(void **state)
{
    (void)state;
    char dead[64];
    s_dead_url(dead, sizeof dead);
    const char *eps[] = {dead, etcd_fixture_url(g_etcd)};
    coord_etcd_config_t cfg = s_cfg(eps, 2);
    coord_etcd_t *e = coord_etcd_new(&cfg);
    assert_non_null(e);
    char buf[8];
    size_t len = 0;
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/failover/k", "ok", 2, 0, NULL), 0);
    assert_string_equal(coord_etcd_endpoint(e), etcd_fixture_url(g_etcd));
    ASSERT_ETCD(e, coord_etcd_get(e, "/t/failover/k", buf, sizeof buf, &len, NULL), 0);
    assert_int_equal(len, 2);

    s_watch_log_t log;
    s_log_init(&log);
    coord_etcd_watch_t *w = s_watch(eps, 2, 0, "/t/failover/", true, 0, &log);
    assert_int_equal(coord_etcd_watch_wait_created(w, WAIT_MS), 0);
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/failover/k2", "x", 1, 0, NULL), 0);
    assert_true(s_log_wait(&log, 1));
    coord_etcd_watch_destroy(&w);
    s_log_fini(&log);
    coord_etcd_destroy(&e);
}

/* A dead etcd gives a clear error naming the endpoint, within the timeout, for
 * calls and for watches. */
static void test_dead_etcd_gives_clear_error(void **state)
{
    (void)state;
    char dead[64], dead2[64];
    s_dead_url(dead, sizeof dead);
    s_dead_url(dead2, sizeof dead2);
    const char *eps[] = {dead};
    coord_etcd_config_t cfg = s_cfg(eps, 1);
    cfg.timeout_ms = 1000;
    coord_etcd_t *e = coord_etcd_new(&cfg);
    int64_t id = 0;
    ASSERT_ETCD(e, coord_etcd_lease_grant(e, 5, 0, &id, NULL), -ECONNREFUSED);
    const char *msg = coord_etcd_last_error(e);
    assert_non_null(strstr(msg, dead));
    assert_non_null(strstr(msg, "connection refused"));
    coord_etcd_destroy(&e);

    const char *both[] = {dead, dead2};
    cfg = s_cfg(both, 2);
    e = coord_etcd_new(&cfg);
    ASSERT_ETCD(e, coord_etcd_put(e, "/k", "v", 1, 0, NULL), -ECONNREFUSED);
    assert_non_null(strstr(coord_etcd_last_error(e), "no endpoint could be reached"));
    coord_etcd_destroy(&e);

    s_watch_log_t log;
    s_log_init(&log);
    coord_etcd_watch_t *w = s_watch(both, 2, 0, "/k", false, 0, &log);
    assert_int_equal(coord_etcd_watch_wait_created(w, WAIT_MS), -ECONNREFUSED);
    assert_true(s_log_wait(&log, -1));
    assert_int_equal(log.end.err, -ECONNREFUSED);
    assert_non_null(strstr(log.end_msg, "connection refused"));
    coord_etcd_watch_destroy(&w);
    s_log_fini(&log);
}

/* Bad configurations are refused at construction, not at first use. */
static void test_bad_config_is_refused(void **state)
{
    (void)state;
    coord_etcd_config_t none = {.endpoints = NULL, .n_endpoints = 0};
    assert_null(coord_etcd_new(&none));
    assert_null(coord_etcd_new(NULL));
    const char *empty[] = {""};
    coord_etcd_config_t cfg = s_cfg(empty, 1);
    assert_null(coord_etcd_new(&cfg));
    const char *many[COORD_ETCD_MAX_ENDPOINTS + 1];
    for (int i = 0; i <= COORD_ETCD_MAX_ENDPOINTS; i++)
        many[i] = "http://127.0.0.1:1";
    cfg = s_cfg(many, COORD_ETCD_MAX_ENDPOINTS + 1);
    assert_null(coord_etcd_new(&cfg));
    cfg = s_cfg(many, 1);
    coord_etcd_watch_spec_t spec = {.key = "/k", .on_event = NULL};
    assert_null(coord_etcd_watch_new(&cfg, &spec));
}

/* The fixture supports fault tests: a stopped etcd refuses, a restarted one
 * (same URL, same data) serves the same handle again; a paused one times out. */
static void test_etcd_restart_keeps_data_and_client_recovers(void **state)
{
    etcd_fixture_t *f = *state;
    const char *eps[] = {etcd_fixture_url(f)};
    coord_etcd_config_t cfg = s_cfg(eps, 1);
    coord_etcd_t *e = coord_etcd_new(&cfg);
    cfg.timeout_ms = 300; /* only for the paused etcd, which never answers */
    coord_etcd_t *quick = coord_etcd_new(&cfg);
    char buf[8];
    size_t len = 0;
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/restart/k", "kept", 4, 0, NULL), 0);

    assert_int_equal(etcd_fixture_pause(f), 0);
    ASSERT_ETCD(quick, coord_etcd_get(quick, "/t/restart/k", buf, sizeof buf, &len, NULL),
                -ETIMEDOUT);
    assert_int_equal(etcd_fixture_resume(f), 0);
    coord_etcd_destroy(&quick);

    assert_int_equal(etcd_fixture_stop(f), 0);
    assert_int_equal(etcd_fixture_pid(f), 0);
    ASSERT_ETCD(e, coord_etcd_get(e, "/t/restart/k", buf, sizeof buf, &len, NULL), -ECONNREFUSED);
    assert_int_equal(etcd_fixture_restart(f), 0);
    ASSERT_ETCD(e, coord_etcd_get(e, "/t/restart/k", buf, sizeof buf, &len, NULL), 0);
    assert_memory_equal(buf, "kept", 4);

    assert_int_equal(etcd_fixture_kill(f), 0);
    assert_int_equal(etcd_fixture_kill(f), -ESRCH);
    assert_int_equal(etcd_fixture_restart(f), 0);
    assert_int_equal(etcd_fixture_restart(f), -EALREADY);
    ASSERT_ETCD(e, coord_etcd_get(e, "/t/restart/k", buf, sizeof buf, &len, NULL), 0);
    coord_etcd_destroy(&e);
    char dir[256];
    snprintf(dir, sizeof dir, "%s", etcd_fixture_dir(f));
    etcd_fixture_destroy(&f);
    *state = NULL;
    assert_null(f);
    assert_int_equal(access(dir, F_OK), -1);
}

/* Fail-over only when etcd cannot have seen the request: a connect that times out
 * (full accept queue) moves on; a request sent on a live connection that then
 * times out (etcd hung) is not replayed on another endpoint — a replayed
 * create_if_absent could report "lost" for a campaign it had won. */
static void test_only_unsent_requests_fail_over(void **state)
{
    etcd_fixture_t *f = *state;
    /* A listener whose accept queue is full: SYNs are dropped, connect hangs. */
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &alen), 0);
    assert_int_equal(listen(lfd, 0), 0);
    int fill[4];
    for (int i = 0; i < 4; i++) {
        fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        connect(fill[i], (struct sockaddr *)&a, sizeof a);
    }
    char full[64];
    snprintf(full, sizeof full, "http://127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
    const char *eps1[] = {full, etcd_fixture_url(g_etcd)};
    coord_etcd_config_t cfg = s_cfg(eps1, 2);
    cfg.connect_timeout_ms = 200;
    coord_etcd_t *e = coord_etcd_new(&cfg);
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/unsent/k", "v", 1, 0, NULL), 0);
    assert_string_equal(coord_etcd_endpoint(e), etcd_fixture_url(g_etcd));
    coord_etcd_destroy(&e);
    for (int i = 0; i < 4; i++)
        close(fill[i]);
    close(lfd);

    /* Connected to f, f hangs after the request left: -ETIMEDOUT, no replay. */
    const char *eps2[] = {etcd_fixture_url(f), etcd_fixture_url(g_etcd)};
    cfg = s_cfg(eps2, 2);
    cfg.timeout_ms = 300;
    e = coord_etcd_new(&cfg);
    /* Open the connection to f; a slow first write may time out, so poll. */
    int rc;
    int64_t deadline = s_now_ms() + WAIT_MS;
    while ((rc = coord_etcd_put(e, "/t/sent/a", "1", 1, 0, NULL)) == -ETIMEDOUT &&
           s_now_ms() < deadline) {
    }
    ASSERT_ETCD(e, rc, 0);
    assert_string_equal(coord_etcd_endpoint(e), etcd_fixture_url(f));
    assert_int_equal(etcd_fixture_pause(f), 0);
    ASSERT_ETCD(e, coord_etcd_put(e, "/t/sent/b", "2", 1, 0, NULL), -ETIMEDOUT);
    assert_int_equal(etcd_fixture_resume(f), 0);
    assert_string_equal(coord_etcd_endpoint(e), etcd_fixture_url(f));
    coord_etcd_t *g = s_client();
    size_t len = 0;
    ASSERT_ETCD(g, coord_etcd_get(g, "/t/sent/b", NULL, 0, &len, NULL), -ENOENT);
    coord_etcd_destroy(&g);
    coord_etcd_destroy(&e);
}

/* Tests that stop or kill etcd get their own, so the shared one stays up. */
static int s_own_etcd_setup(void **state)
{
    *state = etcd_fixture_start(NULL);
    return *state ? 0 : -1;
}

static int s_own_etcd_teardown(void **state)
{
    etcd_fixture_t *f = *state;
    etcd_fixture_destroy(&f);
    return 0;
}

static int s_group_setup(void **state)
{
    (void)state;
    g_etcd = etcd_fixture_start(NULL);
    return g_etcd ? 0 : -1;
}

static int s_group_teardown(void **state)
{
    (void)state;
    etcd_fixture_destroy(&g_etcd);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base64_roundtrips_every_length_and_byte),
        cmocka_unit_test(test_base64_rejects_malformed_input),
        cmocka_unit_test(test_int64_parse_is_exact_above_2_53),
        cmocka_unit_test(test_json_rejects_malformed_answers),
        cmocka_unit_test(test_json_error_maps_grpc_codes),
        cmocka_unit_test(test_watch_lines_parse_per_gateway_framing),
        cmocka_unit_test(test_linebuf_splits_chunks_and_bounds_lines),
        cmocka_unit_test(test_client_reports_malformed_http_answers),
        cmocka_unit_test(test_hung_server_times_out),
        cmocka_unit_test(test_watch_malformed_stream_line_ends_watch),
        cmocka_unit_test(test_bad_config_is_refused),
        cmocka_unit_test(test_lease_grant_keepalive_revoke),
        cmocka_unit_test(test_lease_id_above_2_53_round_trips),
        cmocka_unit_test(test_leased_key_vanishes_with_lease),
        cmocka_unit_test(test_put_get_binary_values),
        cmocka_unit_test(test_range_prefix_pages_with_limit),
        cmocka_unit_test(test_delete_and_delete_prefix),
        cmocka_unit_test(test_delete_if_value_keeps_another_writers_record),
        cmocka_unit_test(test_create_if_absent_elects_one_leader),
        cmocka_unit_test(test_watch_delivers_put_and_delete_in_order),
        cmocka_unit_test(test_watch_from_now_and_stop_when_idle),
        cmocka_unit_test(test_watch_from_compacted_revision_fails_with_erange),
        cmocka_unit_test(test_watch_rejects_overlong_line),
        cmocka_unit_test(test_dead_first_endpoint_fails_over),
        cmocka_unit_test(test_dead_etcd_gives_clear_error),
        cmocka_unit_test(test_put_prev_returns_old_value),
        cmocka_unit_test_setup_teardown(test_only_unsent_requests_fail_over, s_own_etcd_setup,
                                        s_own_etcd_teardown),
        cmocka_unit_test_setup_teardown(test_etcd_restart_keeps_data_and_client_recovers,
                                        s_own_etcd_setup, s_own_etcd_teardown),
    };
    return cmocka_run_group_tests(tests, s_group_setup, s_group_teardown);
}
