/* test_bus_server_conns.c — the bound on connections of a bus_server (issue 12 §3)
 * over real TCP: connections past max_connections are closed at once and counted,
 * the ones within it stay open, a connection that leaves gives its place back, and
 * a DEALER within the bound is answered while the server is full of idle peers. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus_server.h"

#define S_WAIT_MS 5000

static int s_port(bus_server_t *srv)
{
    const char *ep = bus_server_endpoint(srv);
    return atoi(strrchr(ep, ':') + 1);
}

static int s_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

/* Watches the server until its stats satisfy open == want_open and refused ==
 * want_refused, or the wait ends. */
static bool s_wait_stats(bus_server_t *srv, uint64_t want_open, uint64_t want_refused)
{
    bus_server_stats_t st;
    for (int64_t end = zclock_mono() + S_WAIT_MS; zclock_mono() < end;) {
        zmq_pollitem_t item = {zsock_resolve(bus_server_monitor_sock(srv)), 0, ZMQ_POLLIN, 0};
        (void)zmq_poll(&item, 1, 50);
        bus_server_watch(srv);
        bus_server_stats(srv, &st);
        if (st.connections == want_open && st.connections_refused == want_refused)
            return true;
    }
    bus_server_stats(srv, &st);
    print_error("connections %llu refused %llu, wanted %llu and %llu\n",
                (unsigned long long)st.connections, (unsigned long long)st.connections_refused,
                (unsigned long long)want_open, (unsigned long long)want_refused);
    return false;
}

/* Has the peer closed fd (EOF or reset) within the wait? Bytes it sent (the
 * server's ZMTP greeting) are read and skipped. */
static bool s_closed(int fd, int wait_ms)
{
    for (int64_t end = zclock_mono() + wait_ms; zclock_mono() < end;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        char buf[256];
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN))
            return true;
    }
    return false;
}

static void test_connections_past_the_bound_are_closed_and_counted(void **state)
{
    (void)state;
    bus_server_t *srv = bus_server_new("tcp://127.0.0.1:*", "conns");
    assert_non_null(srv);
    bus_server_set_max_connections(srv, 3);
    int port = s_port(srv);
    int fd[5];
    for (int i = 0; i < 3; i++)
        fd[i] = s_connect(port);
    assert_true(s_wait_stats(srv, 3, 0));
    fd[3] = s_connect(port);
    fd[4] = s_connect(port);
    /* both refused: counted open until libzmq reports them gone */
    assert_true(s_wait_stats(srv, 3, 2));
    assert_true(s_closed(fd[3], S_WAIT_MS));
    assert_true(s_closed(fd[4], S_WAIT_MS));
    for (int i = 0; i < 3; i++)
        assert_false(s_closed(fd[i], 200));
    /* one leaves: its place is given back, a new one stays */
    close(fd[0]);
    assert_true(s_wait_stats(srv, 2, 2));
    fd[0] = s_connect(port);
    assert_true(s_wait_stats(srv, 3, 2));
    assert_false(s_closed(fd[0], 300));
    for (int i = 0; i < 5; i++)
        close(fd[i]);
    assert_true(s_wait_stats(srv, 0, 2));
    bus_server_destroy(&srv);
}

static void test_a_zero_bound_is_the_default(void **state)
{
    (void)state;
    bus_server_t *srv = bus_server_new("tcp://127.0.0.1:*", "conns");
    assert_non_null(srv);
    bus_server_set_max_connections(srv, 0);
    int port = s_port(srv);
    int fd[8];
    for (int i = 0; i < 8; i++)
        fd[i] = s_connect(port);
    assert_true(s_wait_stats(srv, 8, 0)); /* BUS_MAX_CONNECTIONS is far above 8 */
    for (int i = 0; i < 8; i++)
        close(fd[i]);
    assert_true(s_wait_stats(srv, 0, 0));
    bus_server_watch(srv); /* nothing pending: a no-op */
    bus_server_destroy(&srv);
}

/* A DEALER within the bound is answered while idle raw peers fill the rest, and
 * bus_server_recv keeps the count by itself (no poll of the monitor). */
static void s_ask(bus_server_t *srv, zsock_t *dealer, bus_request_t *req, bus_arrays_t *arr,
                  uint64_t rejected)
{
    zstr_send(dealer, "not an envelope"); /* rejected by the server: its answer proves it read it */
    bus_server_stats_t st = {0};
    for (int64_t end = zclock_mono() + S_WAIT_MS; zclock_mono() < end && st.rejected < rejected;) {
        (void)bus_server_recv(srv, 50, req, arr);
        bus_server_stats(srv, &st);
    }
    assert_int_equal(st.rejected, rejected);
    zsock_set_rcvtimeo(dealer, S_WAIT_MS);
    zmsg_t *rep = zmsg_recv(dealer);
    assert_non_null(rep); /* the INVALID_ARGUMENT answer */
    zmsg_destroy(&rep);
}

static void test_a_peer_within_the_bound_is_served_while_full(void **state)
{
    (void)state;
    bus_server_t *srv = bus_server_new("tcp://127.0.0.1:*", "conns");
    assert_non_null(srv);
    bus_server_set_max_connections(srv, 2);
    bus_arrays_t *arr = bus_arrays_new(BUS_MAX_ARRAY, BUS_MAX_BLOB);
    bus_request_t *req = calloc(1, sizeof *req);
    assert_non_null(arr);
    assert_non_null(req);
    zsock_t *dealer = zsock_new_dealer(bus_server_endpoint(srv));
    assert_non_null(dealer);
    s_ask(srv, dealer, req, arr, 1); /* connected before the others */
    int fd[4];
    for (int i = 0; i < 4; i++)
        fd[i] = s_connect(s_port(srv));
    bus_server_stats_t st = {0};
    for (int64_t end = zclock_mono() + S_WAIT_MS;
         zclock_mono() < end && st.connections_refused < 3;) {
        (void)bus_server_recv(srv, 50, req, arr);
        bus_server_stats(srv, &st);
    }
    assert_int_equal(st.connections_refused, 3);
    s_ask(srv, dealer, req, arr, 2); /* still answered */
    bus_request_reset(req);
    free(req);
    bus_arrays_destroy(&arr);
    for (int i = 0; i < 4; i++)
        close(fd[i]);
    zsock_destroy(&dealer);
    bus_server_destroy(&srv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_connections_past_the_bound_are_closed_and_counted),
        cmocka_unit_test(test_a_zero_bound_is_the_default),
        cmocka_unit_test(test_a_peer_within_the_bound_is_served_while_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
