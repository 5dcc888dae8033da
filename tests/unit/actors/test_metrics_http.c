/* test_metrics_http.c — the metrics HTTP server's bounds (issue 10 §2) over real
 * loopback sockets: a published document is served (GET and HEAD), an unknown
 * path is 404, a method other than GET/HEAD is 405, an over-long request is
 * refused (414 / 431), port 0 resolves to the kernel's port, and a bad address is
 * refused at start with a reason. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "metrics_http.h"

/* Sends req to addr ("IP:PORT"), reads the whole answer into out; the status. */
static int s_http(const char *addr, const char *req, size_t req_len, char *out, size_t cap)
{
    struct sockaddr_in sa;
    assert_int_equal(metrics_http_parse_addr(addr, &sa, NULL, 0), 0);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    size_t off = 0;
    while (off < req_len) {
        ssize_t n = send(fd, req + off, req_len - off, MSG_NOSIGNAL);
        if (n <= 0)
            break; /* the server may close early on an over-long request */
        off += (size_t)n;
    }
    size_t got = 0;
    ssize_t n;
    while (got + 1 < cap && (n = recv(fd, out + got, cap - 1 - got, 0)) > 0)
        got += (size_t)n;
    out[got] = '\0';
    close(fd);
    int status = 0;
    if (sscanf(out, "HTTP/1.%*d %d", &status) != 1)
        return -1;
    return status;
}

static int s_get(const char *addr, const char *method, const char *path, char *out, size_t cap)
{
    char req[512];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                     method, path);
    return s_http(addr, req, (size_t)n, out, cap);
}

static void test_serves_documents_and_refuses_the_rest(void **state)
{
    (void)state;
    char err[256], out[8192];
    metrics_http_config_t cfg = {.bind = "127.0.0.1:0"};
    metrics_http_t *h = metrics_http_new(&cfg, err, sizeof err);
    assert_non_null(h);
    const char *addr = metrics_http_address(h);
    assert_non_null(strstr(addr, "127.0.0.1:"));
    assert_string_not_equal(addr, "127.0.0.1:0");
    assert_int_equal(metrics_http_publish(h, "/metrics", 200, "text/plain", "kvtier_up 1\n", 12),
                     0);
    assert_int_equal(s_get(addr, "GET", "/metrics", out, sizeof out), 200);
    assert_non_null(strstr(out, "\r\n\r\nkvtier_up 1\n"));
    assert_non_null(strstr(out, "text/plain"));
    assert_int_equal(s_get(addr, "GET", "/metrics?x=1", out, sizeof out), 200);
    assert_int_equal(s_get(addr, "HEAD", "/metrics", out, sizeof out), 200);
    assert_null(strstr(out, "kvtier_up"));
    /* a document replaced is served new */
    assert_int_equal(metrics_http_publish(h, "/metrics", 503, "text/plain", "down\n", 5), 0);
    assert_int_equal(s_get(addr, "GET", "/metrics", out, sizeof out), 503);
    assert_int_equal(s_get(addr, "GET", "/nope", out, sizeof out), 404);
    assert_int_equal(s_get(addr, "POST", "/metrics", out, sizeof out), 405);
    assert_int_equal(s_get(addr, "DELETE", "/metrics", out, sizeof out), 405);
    /* an over-long URL: over METRICS_HTTP_URL_MAX, under the request bound */
    char path[METRICS_HTTP_URL_MAX + 100];
    memset(path, 'a', sizeof path - 1);
    path[0] = '/';
    path[sizeof path - 1] = '\0';
    char *req = malloc(64 * 1024);
    int n =
        snprintf(req, 64 * 1024, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    assert_int_equal(s_http(addr, req, (size_t)n, out, sizeof out), 414);
    /* a request beyond max_request_bytes: libmicrohttpd refuses it itself */
    memset(req, 0, 64 * 1024);
    n = snprintf(req, 64 * 1024, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(req + n, 'b', 40000);
    n += 40000;
    n += snprintf(req + n, 64 * 1024 - (size_t)n, "\r\nConnection: close\r\n\r\n");
    int st = s_http(addr, req, (size_t)n, out, sizeof out);
    assert_true(st == 431 || st == 414 || st == 413);
    free(req);
    metrics_http_stats_t hs;
    metrics_http_stats(h, &hs);
    assert_true(hs.not_found >= 1);
    assert_true(hs.refused >= 3);
    /* the bound address is taken: a second server there fails */
    metrics_http_config_t again = {.bind = addr};
    assert_null(metrics_http_new(&again, err, sizeof err));
    assert_non_null(strstr(err, "cannot listen"));
    metrics_http_destroy(&h);
    assert_null(h);
    metrics_http_destroy(&h);
}

static void test_bad_addresses_are_refused(void **state)
{
    (void)state;
    struct sockaddr_in sa;
    char why[128];
    assert_int_equal(metrics_http_parse_addr("127.0.0.1:7790", &sa, why, sizeof why), 0);
    assert_int_equal(ntohs(sa.sin_port), 7790);
    assert_int_equal(metrics_http_parse_addr("*:0", &sa, why, sizeof why), 0);
    assert_int_equal(metrics_http_parse_addr("localhost:1", &sa, why, sizeof why), 0);
    assert_int_equal(ntohl(sa.sin_addr.s_addr), INADDR_LOOPBACK);
    const char *bad[] = {"",
                         "7790",
                         ":7790",
                         "127.0.0.1:",
                         "127.0.0.1:70000",
                         "127.0.0.1:-1",
                         "127.0.0.1:12x",
                         "300.1.1.1:80",
                         "tcp://127.0.0.1:80",
                         "host:80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        assert_int_not_equal(metrics_http_parse_addr(bad[i], &sa, why, sizeof why), 0);
        assert_true(why[0] != '\0');
    }
    char err[256];
    metrics_http_config_t cfg = {.bind = "127.0.0.1:99999"};
    assert_null(metrics_http_new(&cfg, err, sizeof err));
    assert_non_null(strstr(err, "0..65535"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serves_documents_and_refuses_the_rest),
        cmocka_unit_test(test_bad_addresses_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
