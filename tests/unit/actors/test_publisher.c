/* test_publisher.c — the publisher actor (actors/publisher.h; DESIGN.md §5 and
 * §13) over real sockets: the test stands in for the scheduler with a PUSH to
 * the actor's PULL (inproc), subscribes with SUBs to its XPUB and replays with
 * DEALERs from its ROUTER (tcp://127.0.0.1:*, inproc where a bounded queue must
 * hold). Every wait is a poll with a deadline; no sleep is an assertion and no
 * time is measured. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus_arrays.h"
#include "bus_events.h"
#include "events_vllm.h"
#include "publisher.h"

#define S_WAIT_MS 10000

static int s_seq;

typedef struct {
    zactor_t *pub;
    zsock_t *push; /* the scheduler's side */
    char in_ep[64];
    char xpub_ep[256];
    char replay_ep[256];
} fx_t;

/* Starts a publisher from BASE (input: a fresh inproc name; endpoint and
 * replay_endpoint: tcp://127.0.0.1:* unless BASE sets them). */
static void s_start(fx_t *f, const publisher_config_t *base)
{
    memset(f, 0, sizeof *f);
    snprintf(f->in_ep, sizeof f->in_ep, "inproc://pub-in-%d-%d", (int)getpid(), s_seq++);
    publisher_config_t cfg = base ? *base : (publisher_config_t){0};
    cfg.input_endpoint = f->in_ep;
    if (!cfg.endpoint)
        cfg.endpoint = "tcp://127.0.0.1:*";
    if (!cfg.replay_endpoint)
        cfg.replay_endpoint = "tcp://127.0.0.1:*";
    f->pub = publisher_new(&cfg);
    assert_non_null(f->pub);
    assert_int_equal(publisher_endpoints(f->pub, f->xpub_ep, sizeof f->xpub_ep, f->replay_ep,
                                         sizeof f->replay_ep),
                     0);
    f->push = zsock_new(ZMQ_PUSH);
    assert_non_null(f->push);
    assert_int_equal(zsock_connect(f->push, "%s", f->in_ep), 0);
}

static void s_stop(fx_t *f)
{
    zsock_destroy(&f->push);
    zactor_destroy(&f->pub);
}

#define WAIT_STATS(f, st, cond)                                                                    \
    do {                                                                                           \
        int64_t dl_ = zclock_mono() + S_WAIT_MS;                                                   \
        while (true) {                                                                             \
            assert_int_equal(publisher_stats((f)->pub, &(st)), 0);                                 \
            if (cond)                                                                              \
                break;                                                                             \
            if (zclock_mono() > dl_)                                                               \
                fail_msg("timed out waiting for %s", #cond);                                       \
            zclock_sleep(1);                                                                       \
        }                                                                                          \
    } while (0)

/* ---- sending ---- */

static void s_be(uint8_t out[8], uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        out[i] = (uint8_t)v;
}

static uint64_t s_from_be(const uint8_t *in)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | in[i];
    return v;
}

/* Sends N raw frames on the PUSH. */
static void s_send_frames(fx_t *f, int n, const void *const *d, const size_t *l)
{
    void *h = zsock_resolve(f->push);
    for (int i = 0; i < n; i++)
        assert_true(zmq_send(h, d[i], l[i], i + 1 < n ? ZMQ_SNDMORE : 0) >= 0);
}

static void s_send(fx_t *f, const char *topic, uint64_t seq, const void *payload, size_t len)
{
    uint8_t be[8];
    s_be(be, seq);
    const void *d[3] = {topic, be, payload};
    size_t l[3] = {strlen(topic), 8, len};
    s_send_frames(f, 3, d, l);
}

/* A payload that differs per seq and per byte. */
static void s_pattern(uint64_t seq, uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)(seq * 31u + i * 7u);
}

static void s_send_pattern(fx_t *f, const char *topic, uint64_t seq, size_t len)
{
    uint8_t buf[512];
    assert_true(len <= sizeof buf);
    s_pattern(seq, buf, len);
    s_send(f, topic, seq, buf, len);
}

/* ---- receiving ---- */

static zmsg_t *s_recv(zsock_t *s)
{
    zpoller_t *p = zpoller_new(s, NULL);
    assert_non_null(p);
    void *which = zpoller_wait(p, S_WAIT_MS);
    zpoller_destroy(&p);
    if (which != s)
        fail_msg("nothing received within %d ms", S_WAIT_MS);
    zmsg_t *m = zmsg_recv(s);
    assert_non_null(m);
    return m;
}

static void s_frame_is(zframe_t *fr, const void *data, size_t len)
{
    assert_non_null(fr);
    assert_int_equal(zframe_size(fr), len);
    if (len)
        assert_memory_equal(zframe_data(fr), data, len);
}

static void s_frame_seq(zframe_t *fr, uint64_t seq)
{
    uint8_t be[8];
    s_be(be, seq);
    s_frame_is(fr, be, 8);
}

/* The next message on S is [verb?][topic][seq][payload] exactly (verb NULL: a SUB). */
static void s_expect_batch(zsock_t *s, const char *verb, const char *topic, uint64_t seq,
                           const void *payload, size_t len)
{
    zmsg_t *m = s_recv(s);
    assert_int_equal(zmsg_size(m), verb ? 4 : 3);
    zframe_t *fr = zmsg_first(m);
    if (verb) {
        s_frame_is(fr, verb, strlen(verb));
        fr = zmsg_next(m);
    }
    s_frame_is(fr, topic, strlen(topic));
    s_frame_seq(zmsg_next(m), seq);
    s_frame_is(zmsg_next(m), payload, len);
    zmsg_destroy(&m);
}

static void s_expect_pattern(zsock_t *s, const char *verb, const char *topic, uint64_t seq,
                             size_t len)
{
    uint8_t buf[512];
    s_pattern(seq, buf, len);
    s_expect_batch(s, verb, topic, seq, buf, len);
}

/* The next message is [verb][seq BE]: GAP and END. */
static void s_expect_seq(zsock_t *s, const char *verb, uint64_t seq)
{
    zmsg_t *m = s_recv(s);
    zframe_t *fr = zmsg_first(m);
    assert_non_null(fr);
    if (zframe_size(fr) != strlen(verb) || memcmp(zframe_data(fr), verb, strlen(verb)) != 0)
        fail_msg("expected %s, got a message starting '%.*s'", verb, (int)zframe_size(fr),
                 (const char *)zframe_data(fr));
    assert_int_equal(zmsg_size(m), 2);
    fr = zmsg_next(m);
    assert_int_equal(zframe_size(fr), 8);
    assert_int_equal(s_from_be(zframe_data(fr)), seq);
    zmsg_destroy(&m);
}

/* The next message is ["ERROR"][text] and text contains WANT. */
static void s_expect_error(zsock_t *s, const char *want)
{
    zmsg_t *m = s_recv(s);
    assert_int_equal(zmsg_size(m), 2);
    char *verb = zmsg_popstr(m);
    char *text = zmsg_popstr(m);
    assert_string_equal(verb, "ERROR");
    if (!strstr(text, want))
        fail_msg("error '%s' does not say '%s'", text, want);
    zstr_free(&verb);
    zstr_free(&text);
    zmsg_destroy(&m);
}

/* Nothing more is waiting on S (call after a later message proved the order). */
static void s_expect_nothing(zsock_t *s)
{
    zpoller_t *p = zpoller_new(s, NULL);
    assert_non_null(p);
    assert_null(zpoller_wait(p, 0));
    zpoller_destroy(&p);
}

/* ---- peers ---- */

static zsock_t *s_sub(const fx_t *f, const char *prefix)
{
    zsock_t *s = zsock_new(ZMQ_SUB);
    assert_non_null(s);
    zsock_set_subscribe(s, prefix);
    assert_int_equal(zsock_connect(s, "%s", f->xpub_ep), 0);
    return s;
}

/* Waits until the XPUB has seen N subscriptions (ZeroMQ's slow joiner). */
static void s_wait_subs(fx_t *f, uint64_t n)
{
    publisher_stats_t st;
    WAIT_STATS(f, st, st.subscribers == n);
}

static void s_wait_received(fx_t *f, uint64_t n)
{
    publisher_stats_t st;
    WAIT_STATS(f, st, st.received >= n);
    assert_int_equal(st.received, n);
}

static zsock_t *s_dealer(const char *ep)
{
    zsock_t *d = zsock_new(ZMQ_DEALER);
    assert_non_null(d);
    assert_int_equal(zsock_connect(d, "%s", ep), 0);
    return d;
}

static void s_replay(zsock_t *d, uint64_t from)
{
    uint8_t be[8];
    s_be(be, from);
    zmsg_t *m = zmsg_new();
    zmsg_addstr(m, "REPLAY");
    zmsg_addmem(m, be, 8);
    assert_int_equal(zmsg_send(&m, d), 0);
}

/* ---- tests ---- */

/* §5: [topic][8-byte BE seq][payload] goes out byte for byte, the payload
 * whatever its bytes (none, every byte value, a large one). */
static void test_publisher_publishes_byte_exact(void **state)
{
    (void)state;
    fx_t f;
    s_start(&f, NULL);
    zsock_t *sub = s_sub(&f, "");
    s_wait_subs(&f, 1);

    uint8_t all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (uint8_t)i;
    size_t big_len = 1u << 20;
    uint8_t *big = malloc(big_len);
    assert_non_null(big);
    s_pattern(3, big, big_len);
    const char *topic = "kv events@node-1";
    s_send(&f, topic, 1, all, sizeof all);
    s_send(&f, topic, 2, "", 0);
    s_send(&f, topic, 0x0102030405060708ull, big, big_len);

    s_expect_batch(sub, NULL, topic, 1, all, sizeof all);
    s_expect_batch(sub, NULL, topic, 2, "", 0);
    s_expect_batch(sub, NULL, topic, 0x0102030405060708ull, big, big_len);
    publisher_stats_t st;
    assert_int_equal(publisher_stats(f.pub, &st), 0);
    assert_int_equal(st.received, 3);
    assert_int_equal(st.published, 3);
    assert_int_equal(st.bad_input, 0);
    assert_int_equal(st.last_seq, 0x0102030405060708ull);
    assert_int_equal(st.ring_batches, 3);
    assert_int_equal(st.ring_first_seq, 1);
    assert_int_equal(st.ring_bytes, 3 * strlen(topic) + sizeof all + big_len);

    /* a SUB that goes away unsubscribes */
    zsock_destroy(&sub);
    s_wait_subs(&f, 0);
    free(big);
    s_stop(&f);
}

/* A SUB gets exactly the batches whose topic starts with its prefixes. */
static void test_publisher_filters_by_topic_prefix(void **state)
{
    (void)state;
    fx_t f;
    s_start(&f, NULL);
    zsock_t *a = s_sub(&f, "kv.a");
    zsock_set_subscribe(a, "end");
    zsock_t *b = s_sub(&f, "kv.b");
    zsock_set_subscribe(b, "end");
    s_wait_subs(&f, 4);

    s_send_pattern(&f, "kv.a", 1, 16);
    s_send_pattern(&f, "kv.b", 2, 16);
    s_send_pattern(&f, "kv.a.x", 3, 16);
    s_send_pattern(&f, "end", 4, 16);

    s_expect_pattern(a, NULL, "kv.a", 1, 16);
    s_expect_pattern(a, NULL, "kv.a.x", 3, 16);
    s_expect_pattern(a, NULL, "end", 4, 16);
    s_expect_pattern(b, NULL, "kv.b", 2, 16);
    s_expect_pattern(b, NULL, "end", 4, 16);
    s_expect_nothing(a);
    s_expect_nothing(b);
    zsock_destroy(&a);
    zsock_destroy(&b);
    s_stop(&f);
}

/* A seq above last + 1 is a gap, counted with the sequences it skipped, and the
 * batch is published; first_seq_hint stands for the expected first seq. */
static void test_publisher_counts_gap_and_publishes(void **state)
{
    (void)state;
    fx_t f;
    s_start(&f, NULL);
    zsock_t *sub = s_sub(&f, "");
    s_wait_subs(&f, 1);
    s_send_pattern(&f, "t", 1, 8);
    s_send_pattern(&f, "t", 2, 8);
    s_send_pattern(&f, "t", 5, 8);
    s_send_pattern(&f, "t", 6, 8);
    s_expect_pattern(sub, NULL, "t", 1, 8);
    s_expect_pattern(sub, NULL, "t", 2, 8);
    s_expect_pattern(sub, NULL, "t", 5, 8);
    s_expect_pattern(sub, NULL, "t", 6, 8);
    publisher_stats_t st;
    assert_int_equal(publisher_stats(f.pub, &st), 0);
    assert_int_equal(st.gaps_in, 1);
    assert_int_equal(st.missing_in, 2);
    assert_int_equal(st.published, 4);
    assert_int_equal(st.bad_input, 0);
    zsock_destroy(&sub);
    s_stop(&f);

    s_start(&f, &(publisher_config_t){.first_seq_hint = 10});
    s_send_pattern(&f, "t", 13, 8);
    s_wait_received(&f, 1);
    assert_int_equal(publisher_stats(f.pub, &st), 0);
    assert_int_equal(st.gaps_in, 1);
    assert_int_equal(st.missing_in, 3);
    assert_int_equal(st.published, 1);
    s_stop(&f);

    /* a first seq below the hint is accepted: the hint is only for stats */
    s_start(&f, &(publisher_config_t){.first_seq_hint = 10});
    s_send_pattern(&f, "t", 4, 8);
    s_wait_received(&f, 1);
    assert_int_equal(publisher_stats(f.pub, &st), 0);
    assert_int_equal(st.gaps_in, 0);
    assert_int_equal(st.published, 1);
    assert_int_equal(st.last_seq, 4);
    s_stop(&f);
}

/* Input is never trusted: a seq not above the last, a wrong frame count, a
 * seq frame not 8 bytes, a topic empty, too long or not printable, a payload
 * above BUS_MAX_BLOB are each counted bad and dropped; the actor goes on. */
static void test_publisher_drops_bad_input(void **state)
{
    (void)state;
    fx_t f;
    s_start(&f, NULL);
    zsock_t *sub = s_sub(&f, "");
    s_wait_subs(&f, 1);
    s_send_pattern(&f, "t", 5, 8);

    uint8_t be[9] = {0};
    s_be(be, 9);
    char long_topic[PUBLISHER_TOPIC_MAX + 2];
    memset(long_topic, 'x', sizeof long_topic);
    long_topic[PUBLISHER_TOPIC_MAX + 1] = '\0'; /* one byte too long */
    size_t huge_len = BUS_MAX_BLOB + 1u;
    uint8_t *huge = calloc(1, huge_len);
    assert_non_null(huge);
    uint64_t n_bad = 0;

    s_send_pattern(&f, "t", 5, 8); /* not above the last */
    s_send_pattern(&f, "t", 3, 8); /* below it */
    n_bad += 2;
    {
        const void *d[4] = {"t", be, "p", "extra"};
        size_t l[4] = {1, 8, 1, 5};
        s_send_frames(&f, 1, d, l); /* 1 frame */
        s_send_frames(&f, 2, d, l); /* 2 frames */
        s_send_frames(&f, 4, d, l); /* 4 frames */
        n_bad += 3;
        size_t l9[3] = {1, 9, 1};
        s_send_frames(&f, 3, d, l9); /* a 9-byte seq */
        size_t l7[3] = {1, 7, 1};
        s_send_frames(&f, 3, d, l7); /* a 7-byte seq */
        n_bad += 2;
    }
    {
        const void *d[3] = {"", be, "p"};
        size_t l[3] = {0, 8, 1};
        s_send_frames(&f, 3, d, l); /* empty topic */
        d[0] = long_topic;
        l[0] = strlen(long_topic);
        s_send_frames(&f, 3, d, l); /* a topic one byte too long */
        d[0] = "kv\n";
        l[0] = 3;
        s_send_frames(&f, 3, d, l); /* not printable */
        n_bad += 3;
    }
    s_send(&f, "t", 10, huge, huge_len); /* payload above BUS_MAX_BLOB (inproc: no maxmsgsize) */
    s_send(&f, "t", UINT64_MAX, "p", 1); /* reserved */
    n_bad += 2;

    /* still serving: a 64-byte topic and a payload of exactly BUS_MAX_BLOB pass */
    long_topic[PUBLISHER_TOPIC_MAX] = '\0';
    s_send(&f, long_topic, 6, "ok", 2);
    s_send(&f, "t", 7, huge, BUS_MAX_BLOB);
    s_wait_received(&f, 1 + n_bad + 2);

    s_expect_pattern(sub, NULL, "t", 5, 8);
    s_expect_batch(sub, NULL, long_topic, 6, "ok", 2);
    s_expect_batch(sub, NULL, "t", 7, huge, BUS_MAX_BLOB);
    s_expect_nothing(sub);
    publisher_stats_t st;
    assert_int_equal(publisher_stats(f.pub, &st), 0);
    assert_int_equal(st.bad_input, n_bad);
    assert_int_equal(st.published, 3);
    assert_int_equal(st.last_seq, 7);
    assert_int_equal(st.gaps_in, 0);
    free(huge);
    zsock_destroy(&sub);
    s_stop(&f);
}

/* The ring keeps at most ring_batches, oldest evicted first; a replay from
 * before its start gets GAP(oldest) first, then the batches, then END. */
static void test_publisher_ring_bound_by_count(void **state)
{
    (void)state;
    fx_t f;
    s_start(&f, &(publisher_config_t){.ring_batches = 4});
    for (uint64_t s = 1; s <= 10; s++)
        s_send_pattern(&f, "t", s, 32);
    s_wait_received(&f, 10);
    publisher_stats_t st;
    assert_int_equal(publisher_stats(f.pub, &st), 0);
    assert_int_equal(st.ring_batches, 4);
    assert_int_equal(st.ring_first_seq, 7);
    assert_int_equal(st.ring_bytes, 4 * (1 + 32));

    zsock_t *d = s_dealer(f.replay_ep);
    s_replay(d, 0);
    s_expect_seq(d, "GAP", 7);
    for (uint64_t s = 7; s <= 10; s++)
        s_expect_pattern(d, "BATCH", "t", s, 32);
    s_expect_seq(d, "END", 11);

    /* from inside the ring: no GAP */
    s_replay(d, 8);
    for (uint64_t s = 8; s <= 10; s++)
        s_expect_pattern(d, "BATCH", "t", s, 32);
    s_expect_seq(d, "END", 11);
    s_expect_nothing(d);
    assert_int_equal(publisher_stats(f.pub, &st), 0);
    assert_int_equal(st.replays_served, 2);
    assert_int_equal(st.replay_batches_sent, 7);
    assert_int_equal(st.replay_errors, 0);
    zsock_destroy(&d);
    s_stop(&f);
}

/* The ring keeps at most ring_bytes (topic + payload); a batch larger than the
 * whole ring is published but empties it. */
static void test_publisher_ring_bound_by_bytes(void **state)
{
    (void)state;
    fx_t f;
    s_start(&f, &(publisher_config_t){.ring_bytes = 350});
    for (uint64_t s = 1; s <= 5; s++)
        s_send_pattern(&f, "t", s, 99); /* 100 bytes each */
    s_wait_received(&f, 5);
    publisher_stats_t st;
    assert_int_equal(publisher_stats(f.pub, &st), 0);
    assert_int_equal(st.ring_batches, 3);
    assert_int_equal(st.ring_bytes, 300);
    assert_int_equal(st.ring_first_seq, 3);

    zsock_t *d = s_dealer(f.replay_ep);
    s_replay(d, 2);
    s_expect_seq(d, "GAP", 3);
    for (uint64_t s = 3; s <= 5; s++)
        s_expect_pattern(d, "BATCH", "t", s, 99);
    s_expect_seq(d, "END", 6);

    s_send_pattern(&f, "t", 6, 400);
    s_wait_received(&f, 6);
    assert_int_equal(publisher_stats(f.pub, &st), 0);
    assert_int_equal(st.published, 6);
    assert_int_equal(st.ring_batches, 0);
    assert_int_equal(st.ring_bytes, 0);
    s_replay(d, 1);
    s_expect_seq(d, "GAP", 7);
    s_expect_seq(d, "END", 7);

    s_send_pattern(&f, "t", 7, 10);
    s_wait_received(&f, 7);
    s_replay(d, 6);
    s_expect_seq(d, "GAP", 7);
    s_expect_pattern(d, "BATCH", "t", 7, 10);
    s_expect_seq(d, "END", 8);
    s_expect_nothing(d);
    zsock_destroy(&d);
    s_stop(&f);
}

/* A replay returns exactly the ring batches from from_seq on, then END with
 * the next seq; nothing evicted means no GAP; before anything is published the
 * answer is END(from_seq). */
static void test_publisher_replay_from_the_middle(void **state)
{
    (void)state;
    fx_t f;
    s_start(&f, NULL);
    zsock_t *d = s_dealer(f.replay_ep);
    s_replay(d, 7);
    s_expect_seq(d, "END", 7);

    for (uint64_t s = 1; s <= 20; s++)
        s_send_pattern(&f, s % 2 ? "odd" : "even", s, (size_t)s * 10);
    s_wait_received(&f, 20);
    s_replay(d, 15);
    for (uint64_t s = 15; s <= 20; s++)
        s_expect_pattern(d, "BATCH", s % 2 ? "odd" : "even", s, (size_t)s * 10);
    s_expect_seq(d, "END", 21);

    s_replay(d, 0); /* older than the ring, but nothing older ever existed */
    for (uint64_t s = 1; s <= 20; s++)
        s_expect_pattern(d, "BATCH", s % 2 ? "odd" : "even", s, (size_t)s * 10);
    s_expect_seq(d, "END", 21);

    s_replay(d, 30); /* past the end */
    s_expect_seq(d, "END", 21);
    s_expect_nothing(d);
    zsock_destroy(&d);
    s_stop(&f);
}

/* A replay longer than PUBLISHER_REPLAY_PER_TURN goes on over several turns,
 * complete and in order, while the actor keeps publishing. */
static void test_publisher_replay_spans_turns(void **state)
{
    (void)state;
    fx_t f;
    s_start(&f, NULL);
    uint64_t n = 3 * PUBLISHER_REPLAY_PER_TURN + 17;
    for (uint64_t s = 1; s <= n; s++)
        s_send_pattern(&f, "t", s, 24);
    s_wait_received(&f, n);
    zsock_t *sub = s_sub(&f, "");
    s_wait_subs(&f, 1);
    zsock_t *d = s_dealer(f.replay_ep);
    s_replay(d, 1);
    s_send_pattern(&f, "t", n + 1, 24); /* published during the replay */
    s_expect_pattern(sub, NULL, "t", n + 1, 24);
    /* the replay covers what was published when it came: n, or n + 1 */
    uint64_t s = 1;
    while (true) {
        zmsg_t *m = s_recv(d);
        char *verb = zmsg_popstr(m);
        zframe_t *fr = zmsg_first(m);
        if (streq(verb, "END")) {
            assert_true(s == n + 1 || s == n + 2);
            s_frame_seq(fr, s);
            zstr_free(&verb);
            zmsg_destroy(&m);
            break;
        }
        assert_string_equal(verb, "BATCH");
        assert_int_equal(zmsg_size(m), 3);
        s_frame_seq(zmsg_next(m), s);
        uint8_t buf[24];
        s_pattern(s, buf, sizeof buf);
        s_frame_is(zmsg_next(m), buf, sizeof buf);
        zstr_free(&verb);
        zmsg_destroy(&m);
        s++;
    }
    publisher_stats_t st;
    assert_int_equal(publisher_stats(f.pub, &st), 0);
    assert_int_equal(st.replays_served, 1);
    assert_int_equal(st.replay_batches_sent, s - 1);
    zsock_destroy(&d);
    zsock_destroy(&sub);
    s_stop(&f);
}

/* A malformed request gets ["ERROR"][why]: frame count, verb, seq size; a REQ
 * is told to use a DEALER. The socket keeps serving. */
static void test_publisher_replay_malformed_gets_error(void **state)
{
    (void)state;
    fx_t f;
    s_start(&f, NULL);
    s_send_pattern(&f, "t", 1, 8);
    s_wait_received(&f, 1);
    zsock_t *d = s_dealer(f.replay_ep);
    uint8_t be[8];
    s_be(be, 1);

    zstr_send(d, "REPLAY");
    s_expect_error(d, "1 frames, expected 2");
    zsock_send(d, "sbs", "REPLAY", be, (size_t)8, "more");
    s_expect_error(d, "3 frames, expected 2");
    zsock_send(d, "sb", "REPLAI", be, (size_t)8);
    s_expect_error(d, "unknown verb 'REPLAI'");
    zsock_send(d, "sb", "REPLAY", be, (size_t)7);
    s_expect_error(d, "from_seq of 7 bytes, expected 8");

    zsock_t *req = zsock_new(ZMQ_REQ);
    assert_non_null(req);
    assert_int_equal(zsock_connect(req, "%s", f.replay_ep), 0);
    zsock_send(req, "sb", "REPLAY", be, (size_t)8);
    s_expect_error(req, "use a DEALER");
    zsock_destroy(&req);

    s_replay(d, 1);
    s_expect_pattern(d, "BATCH", "t", 1, 8);
    s_expect_seq(d, "END", 2);
    publisher_stats_t st;
    assert_int_equal(publisher_stats(f.pub, &st), 0);
    assert_int_equal(st.replay_errors, 5);
    assert_int_equal(st.replays_served, 1);
    zsock_destroy(&d);
    s_stop(&f);
}

/* At most PUBLISHER_MAX_REPLAYS replays are in progress; one more is answered
 * "busy", and a requester that goes away ends its replay. The replay socket is
 * inproc so that requesters that do not read hold their replays at the
 * ROUTER's high-water mark (tcp's kernel buffers would absorb them). */
static void test_publisher_replay_busy_bound(void **state)
{
    (void)state;
    fx_t f;
    char rep[64];
    snprintf(rep, sizeof rep, "inproc://pub-replay-%d-%d", (int)getpid(), s_seq++);
    uint32_t n = 4000; /* above a replay's queue (ROUTER SNDHWM + DEALER RCVHWM) */
    s_start(&f, &(publisher_config_t){
                    .replay_endpoint = rep, .ring_batches = n, .replay_stall_ms = 3600000});
    for (uint64_t s = 1; s <= n; s++)
        s_send_pattern(&f, "t", s, 1);
    s_wait_received(&f, n);

    zsock_t *d[PUBLISHER_MAX_REPLAYS];
    for (uint32_t i = 0; i < PUBLISHER_MAX_REPLAYS; i++) {
        d[i] = zsock_new(ZMQ_DEALER);
        assert_non_null(d[i]);
        zsock_set_rcvhwm(d[i], 1);
        assert_int_equal(zsock_connect(d[i], "%s", rep), 0);
        s_replay(d[i], 1);
    }
    publisher_stats_t st;
    WAIT_STATS(&f, st, st.replays_active == PUBLISHER_MAX_REPLAYS);
    zsock_t *extra = s_dealer(rep);
    s_replay(extra, 1);
    s_expect_error(extra, "busy: 16 replays in progress");
    assert_int_equal(publisher_stats(f.pub, &st), 0);
    assert_int_equal(st.replays_active, PUBLISHER_MAX_REPLAYS);
    assert_int_equal(st.replays_served, 0);

    for (uint32_t i = 0; i < PUBLISHER_MAX_REPLAYS; i++)
        zsock_destroy(&d[i]);
    WAIT_STATS(&f, st, st.replays_active == 0);
    assert_int_equal(st.replay_errors, 1 + PUBLISHER_MAX_REPLAYS);
    s_replay(extra, n);
    s_expect_pattern(extra, "BATCH", "t", n, 1);
    s_expect_seq(extra, "END", n + 1);
    zsock_destroy(&extra);
    s_stop(&f);
}

/* ENDPOINTS gives the endpoints as bound (ephemeral ports resolved); without a
 * replay endpoint there is no replay socket and publishing works alike. */
static void test_publisher_endpoints_resolved(void **state)
{
    (void)state;
    fx_t f;
    s_start(&f, NULL);
    assert_non_null(strstr(f.xpub_ep, "tcp://127.0.0.1:"));
    assert_null(strchr(f.xpub_ep, '*'));
    assert_non_null(strstr(f.replay_ep, "tcp://127.0.0.1:"));
    assert_null(strchr(f.replay_ep, '*'));
    assert_string_not_equal(f.xpub_ep, f.replay_ep);
    s_stop(&f);

    s_start(&f, &(publisher_config_t){.replay_endpoint = ""});
    assert_string_equal(f.replay_ep, "");
    zsock_t *sub = s_sub(&f, "");
    s_wait_subs(&f, 1);
    s_send_pattern(&f, "t", 1, 8);
    s_expect_pattern(sub, NULL, "t", 1, 8);
    zsock_destroy(&sub);
    s_stop(&f);
}

/* A bad config or a failed bind is a NULL start, never a half-started actor. */
/* keys_only (per-instance isolation): a peer without a CURVE key — tcp without
 * CURVE here, as an ipc or plain tcp client would be — gets nothing on the XPUB
 * (its subscription is dropped, counted in refused, not in subscribers) and its
 * replay and snapshot requests are answered ERROR saying why; the keys given are
 * checked at start. (test_curve.sh runs the keyed case: a "*" key served, an
 * instance-scoped one refused.) */
static void test_publisher_keys_only_refuses_unkeyed_peers(void **state)
{
    (void)state;
    static const char keys[1][BUS_CURVE_KEY_TXT] = {"not a key"};
    assert_null(publisher_new(&(publisher_config_t){.input_endpoint = "inproc://pub-bad-in",
                                                    .endpoint = "tcp://127.0.0.1:*",
                                                    .keys_only = true,
                                                    .keys = keys,
                                                    .n_keys = 1}));
    fx_t f;
    s_start(&f, &(publisher_config_t){.keys_only = true});
    zsock_t *sub = s_sub(&f, "");
    publisher_stats_t st;
    WAIT_STATS(&f, st, st.refused == 1);
    assert_int_equal(st.subscribers, 0);
    s_send_pattern(&f, "stored/a", 1, 16);
    s_wait_received(&f, 1);
    zsock_t *d = s_dealer(f.replay_ep);
    s_replay(d, 1);
    s_expect_error(d, "permission denied");
    zstr_send(d, "SNAPSHOT");
    s_expect_error(d, "not a CURVE connection");
    /* the batch went to no one: the dealer's answers above prove the turns ran */
    s_expect_nothing(sub);
    assert_int_equal(publisher_stats(f.pub, &st), 0);
    assert_int_equal(st.refused, 3);
    assert_int_equal(st.replays_served, 0);
    zsock_destroy(&d);
    zsock_destroy(&sub);
    s_stop(&f);
}

static void test_publisher_failed_start_is_null(void **state)
{
    (void)state;
    assert_null(publisher_new(NULL));
    assert_null(publisher_new(&(publisher_config_t){.endpoint = "tcp://127.0.0.1:*"}));
    assert_null(publisher_new(&(publisher_config_t){.input_endpoint = "inproc://pub-x"}));
    const char *bad[] = {"tcp://127.0.0.1:99999", "bogus://x", "tcp://127.0.0.1", "inproc://",
                         "tcp://127.0.0.1:*x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_null(publisher_new(
            &(publisher_config_t){.input_endpoint = "inproc://pub-bad-in", .endpoint = bad[i]}));
        assert_null(publisher_new(
            &(publisher_config_t){.input_endpoint = bad[i], .endpoint = "tcp://127.0.0.1:*"}));
        assert_null(publisher_new(&(publisher_config_t){.input_endpoint = "inproc://pub-bad-in",
                                                        .endpoint = "tcp://127.0.0.1:*",
                                                        .replay_endpoint = bad[i]}));
    }
    assert_null(
        publisher_new(&(publisher_config_t){.input_endpoint = "inproc://pub-bad-in",
                                            .endpoint = "tcp://127.0.0.1:*",
                                            .ring_batches = PUBLISHER_MAX_RING_BATCHES + 1}));

    /* binds that fail: an inproc name and a tcp port already taken (each other
     * endpoint a fresh name, so only the taken one can fail) */
    fx_t f;
    s_start(&f, NULL);
    char in1[64], in2[64];
    snprintf(in1, sizeof in1, "inproc://pub-in-%d-%d", (int)getpid(), s_seq++);
    snprintf(in2, sizeof in2, "inproc://pub-in-%d-%d", (int)getpid(), s_seq++);
    assert_null(publisher_new(
        &(publisher_config_t){.input_endpoint = f.in_ep, .endpoint = "tcp://127.0.0.1:*"}));
    assert_null(publisher_new(&(publisher_config_t){.input_endpoint = in1, .endpoint = f.xpub_ep}));
    assert_null(publisher_new(&(publisher_config_t){
        .input_endpoint = in2, .endpoint = "tcp://127.0.0.1:*", .replay_endpoint = f.replay_ep}));
    /* the first still serves */
    zsock_t *d = s_dealer(f.replay_ep);
    s_replay(d, 3);
    s_expect_seq(d, "END", 3);
    zsock_destroy(&d);
    s_stop(&f);
}

/* ---- derived streams: snapshot and vLLM (docs/EVENTS.md) ---- */

#define S_KEYS_MAX 64

static void s_tkey(uint8_t out[BUS_KEY_LEN], uint32_t i)
{
    memset(out, 0, BUS_KEY_LEN);
    out[0] = 0xab;
    memcpy(out + 8, &i, sizeof i);
}

/* Sends one real EventBatch of one event: KIND for instance "a" with keys
 * first..first+n-1 and the kind's fields from EV (its which_kind and keys are set here). */
static void s_send_event(fx_t *f, const char *topic, uint64_t seq, pb_size_t kind, kvtier_Event ev,
                         uint32_t first, uint32_t n)
{
    static uint8_t keys[S_KEYS_MAX][BUS_KEY_LEN];
    assert_true(n <= S_KEYS_MAX);
    for (uint32_t i = 0; i < n; i++)
        s_tkey(keys[i], first + i);
    bus_event_t e = {.ev = ev, .keys = {.keys = keys, .n = n, .cap = S_KEYS_MAX}};
    e.ev.which_kind = kind;
    e.ev.ts_us = 1700000000000000ull + seq;
    if (kind != kvtier_Event_leader_changed_tag && kind != kvtier_Event_tier_changed_tag)
        snprintf(e.ev.instance_id, sizeof e.ev.instance_id, "a");
    kvtier_EventBatch b = {.epoch = seq >> 40};
    zframe_t *fr = NULL;
    kvtier_Status st;
    assert_int_equal(bus_events_encode(&b, &e, 1, &fr, &st), 0);
    s_send(f, topic, seq, zframe_data(fr), zframe_size(fr));
    zframe_destroy(&fr);
}

#define S_T1 (1ull << 40)

/* The history the snapshot tests feed: a term starts, keys 0..9 stored on tier 1,
 * 0..2 removed, 3..4 moved to tier 2 (DISK). Leaves 5..9 on tier 1 and 3..4 on 2. */
static void s_send_history(fx_t *f)
{
    s_send_event(f, "leader", S_T1 | 1, kvtier_Event_leader_changed_tag, (kvtier_Event){0}, 0, 0);
    kvtier_Event ev = {.kind.block_stored = {.tier_id = 1,
                                             .block_bytes = 4096,
                                             .medium = kvtier_Medium_MEDIUM_CPU,
                                             .tokens_per_block = 16}};
    s_send_event(f, "stored/a", S_T1 | 2, kvtier_Event_block_stored_tag, ev, 0, 10);
    ev = (kvtier_Event){.kind.block_removed = {.tier_id = 1, .medium = kvtier_Medium_MEDIUM_CPU}};
    s_send_event(f, "removed/a", S_T1 | 3, kvtier_Event_block_removed_tag, ev, 0, 3);
    ev = (kvtier_Event){.kind.block_moved = {.src_tier_id = 1,
                                             .dst_tier_id = 2,
                                             .src_medium = kvtier_Medium_MEDIUM_CPU,
                                             .dst_medium = kvtier_Medium_MEDIUM_DISK,
                                             .tokens_per_block = 16}};
    s_send_event(f, "moved/a", S_T1 | 4, kvtier_Event_block_moved_tag, ev, 3, 2);
}

/* Rule (issue 10 §1): a subscriber that fell behind asks for a snapshot: the
 * index as stored-events, paged, and the seq to continue from, served from the
 * publisher's own mirror. */
static void test_publisher_snapshot_serves_the_index(void **state)
{
    (void)state;
    fx_t f;
    s_start(&f, NULL);
    s_send_history(&f);
    s_wait_received(&f, 4);
    zsock_t *d = s_dealer(f.replay_ep);
    zstr_send(d, "SNAPSHOT");
    zmsg_t *m = s_recv(d);
    assert_int_equal(zmsg_size(m), 3);
    s_frame_is(zmsg_first(m), "SNAPSHOT", 8);
    s_frame_seq(zmsg_next(m), S_T1 | 4);
    s_frame_seq(zmsg_next(m), 7);
    zmsg_destroy(&m);
    bool on1[10] = {0}, on2[10] = {0};
    uint32_t got = 0;
    for (;;) {
        m = s_recv(d);
        zframe_t *verb = zmsg_first(m);
        if (zframe_streq(verb, "END")) {
            s_frame_seq(zmsg_next(m), (S_T1 | 4) + 1);
            zmsg_destroy(&m);
            break;
        }
        assert_true(zframe_streq(verb, "BLOCKS"));
        zframe_t *pl = zmsg_next(m);
        kvtier_EventBatch b;
        bus_event_t ev[8];
        uint8_t pool[64][BUS_KEY_LEN];
        bus_keys_t keys = {.keys = pool, .cap = 64};
        uint32_t n;
        kvtier_Status st;
        assert_int_equal(
            bus_events_decode(zframe_data(pl), zframe_size(pl), &b, ev, 8, &n, &keys, &st), 0);
        for (uint32_t i = 0; i < n; i++) {
            assert_int_equal(ev[i].ev.which_kind, kvtier_Event_block_stored_tag);
            assert_string_equal(ev[i].ev.instance_id, "a");
            const kvtier_BlockStored *bs = &ev[i].ev.kind.block_stored;
            assert_int_equal(bs->block_bytes, 4096);
            assert_int_equal(bs->tokens_per_block, 16);
            for (uint32_t k = 0; k < ev[i].keys.n; k++) {
                uint32_t id;
                memcpy(&id, ev[i].keys.keys[k] + 8, sizeof id);
                assert_true(id < 10);
                bool *on = bs->tier_id == 1 ? on1 : on2;
                assert_false(on[id]);
                on[id] = true;
                got++;
            }
        }
        zmsg_destroy(&m);
    }
    assert_int_equal(got, 7);
    for (uint32_t i = 0; i < 10; i++) {
        assert_true(on1[i] == (i >= 5));
        assert_true(on2[i] == (i == 3 || i == 4));
    }
    publisher_stats_t st;
    assert_int_equal(publisher_stats(f.pub, &st), 0);
    assert_int_equal(st.snapshots_served, 1);
    assert_int_equal(st.snapshot_blocks_sent, 7);
    assert_int_equal(st.mirror_blocks, 7);
    assert_int_equal(st.mirror_stale, 0);
    zsock_destroy(&d);
    s_stop(&f);
}

/* Rule: a mirror that missed batches serves no snapshot (an error that says
 * why, never a wrong index); bad snapshot requests get an error reply. */
static void test_publisher_snapshot_refused_when_stale(void **state)
{
    (void)state;
    fx_t f;
    s_start(&f, NULL);
    zsock_t *d = s_dealer(f.replay_ep);
    zmsg_t *m = zmsg_new();
    zmsg_addstr(m, "SNAPSHOT");
    zmsg_addstr(m, "now");
    assert_int_equal(zmsg_send(&m, d), 0);
    s_expect_error(d, "expected 1");
    s_send_event(&f, "leader", S_T1 | 1, kvtier_Event_leader_changed_tag, (kvtier_Event){0}, 0, 0);
    kvtier_Event ev = {.kind.block_stored = {.tier_id = 1}};
    s_send_event(&f, "stored/a", S_T1 | 3, kvtier_Event_block_stored_tag, ev, 0, 2); /* 2 lost */
    s_wait_received(&f, 2);
    zstr_send(d, "SNAPSHOT");
    s_expect_error(d, "dropped batches");
    s_send(&f, "stored/a", S_T1 | 4, "not protobuf \xff\xff", 15);
    s_wait_received(&f, 3);
    publisher_stats_t st;
    assert_int_equal(publisher_stats(f.pub, &st), 0);
    assert_int_equal(st.undecodable, 1);
    assert_int_equal(st.mirror_stale, 1);
    assert_int_equal(st.published, 3); /* published all the same */
    /* a new term makes the mirror whole again */
    s_send_event(&f, "leader", 2 * S_T1 | 1, kvtier_Event_leader_changed_tag, (kvtier_Event){0}, 0,
                 0);
    s_wait_received(&f, 4);
    zstr_send(d, "SNAPSHOT");
    m = s_recv(d);
    s_frame_is(zmsg_first(m), "SNAPSHOT", 8);
    s_frame_seq(zmsg_next(m), 2 * S_T1 | 1);
    s_frame_seq(zmsg_next(m), 0);
    zmsg_destroy(&m);
    s_expect_seq(d, "END", (2 * S_T1 | 1) + 1);
    zsock_destroy(&d);
    s_stop(&f);
}

/* ---- the vLLM stream ---- */

/* msgpack helpers: the value under key K of map O (NULL when absent). */
static const msgpack_object *s_mp_get(const msgpack_object *o, const char *k)
{
    assert_int_equal(o->type, MSGPACK_OBJECT_MAP);
    for (uint32_t i = 0; i < o->via.map.size; i++) {
        const msgpack_object *key = &o->via.map.ptr[i].key;
        if (key->type == MSGPACK_OBJECT_STR && key->via.str.size == strlen(k) &&
            memcmp(key->via.str.ptr, k, key->via.str.size) == 0)
            return &o->via.map.ptr[i].val;
    }
    return NULL;
}

static void s_mp_str_is(const msgpack_object *o, const char *s)
{
    assert_non_null(o);
    assert_int_equal(o->type, MSGPACK_OBJECT_STR);
    assert_int_equal(o->via.str.size, strlen(s));
    assert_memory_equal(o->via.str.ptr, s, strlen(s));
}

/* The hashes of an event: n 16-byte bins whose ids are first.. */
static void s_mp_hashes_are(const msgpack_object *o, uint32_t first, uint32_t n)
{
    assert_non_null(o);
    assert_int_equal(o->type, MSGPACK_OBJECT_ARRAY);
    assert_int_equal(o->via.array.size, n);
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object *h = &o->via.array.ptr[i];
        assert_int_equal(h->type, MSGPACK_OBJECT_BIN);
        assert_int_equal(h->via.bin.size, BUS_KEY_LEN);
        uint8_t want[BUS_KEY_LEN];
        s_tkey(want, first + i);
        assert_memory_equal(h->via.bin.ptr, want, BUS_KEY_LEN);
    }
}

/* A vLLM replay from seq 0 over DEALER d: every [""][seq][payload] until the end
 * marker, unpacked into zone-backed objects; their seqs into seqs[]. */
static uint32_t s_vllm_replay(zsock_t *d, msgpack_zone *z, msgpack_object *out, uint64_t *seqs,
                              uint32_t cap)
{
    uint8_t be[8] = {0};
    zmsg_t *m = zmsg_new();
    zmsg_addmem(m, "", 0);
    zmsg_addmem(m, be, 8);
    assert_int_equal(zmsg_send(&m, d), 0);
    for (uint32_t n = 0;; n++) {
        m = s_recv(d);
        assert_int_equal(zmsg_size(m), 3);
        s_frame_is(zmsg_first(m), "", 0);
        zframe_t *seq = zmsg_next(m), *pl = zmsg_next(m);
        assert_int_equal(zframe_size(seq), 8);
        if (s_from_be(zframe_data(seq)) == UINT64_MAX) {
            assert_int_equal(zframe_size(pl), 0);
            zmsg_destroy(&m);
            return n;
        }
        assert_true(n < cap);
        seqs[n] = s_from_be(zframe_data(seq));
        size_t off = 0;
        /* copy out of the frame: the zone keeps references into the buffer */
        char *buf = msgpack_zone_malloc(z, zframe_size(pl));
        memcpy(buf, zframe_data(pl), zframe_size(pl));
        assert_int_equal(msgpack_unpack(buf, zframe_size(pl), &off, z, &out[n]),
                         MSGPACK_UNPACK_SUCCESS);
        assert_int_equal(off, zframe_size(pl));
        zmsg_destroy(&m);
    }
}

/* Rule (issue 10 §1): the vLLM encoding is msgpack KVEventBatch in vLLM's map
 * layout: {"ts", "events"}, each event a map tagged "type"; block hashes as
 * 16-byte bins, medium GPU/CPU/DISK/REMOTE, block_size the tokens per block;
 * moved is removed + stored, a new term is AllBlocksCleared, a tier down is
 * BlockRemoved of what the tier held; lookups are not in it; its sequences
 * are dense and monotonic; the replay socket speaks vLLM's protocol. */
static void test_publisher_vllm_map_layout(void **state)
{
    (void)state;
    fx_t f;
    s_start(&f, &(publisher_config_t){.vllm_endpoint = "tcp://127.0.0.1:*",
                                      .vllm_replay_endpoint = "tcp://127.0.0.1:*"});
    char vx[256], vr[256];
    assert_int_equal(publisher_vllm_endpoints(f.pub, vx, sizeof vx, vr, sizeof vr), 0);
    assert_true(strncmp(vr, "tcp://127.0.0.1:", 16) == 0);
    s_send_history(&f);
    kvtier_Event ev = {.kind.cache_get = {.hit_count = 1}};
    s_send_event(&f, "lookup/a", S_T1 | 5, kvtier_Event_cache_get_tag, ev, 0, 4);
    ev = (kvtier_Event){.kind.tier_changed = {.tier_id = 2, .up = false}};
    s_send_event(&f, "tier", S_T1 | 6, kvtier_Event_tier_changed_tag, ev, 0, 0);
    s_wait_received(&f, 6);
    publisher_stats_t st;
    assert_int_equal(publisher_stats(f.pub, &st), 0);
    assert_int_equal(st.vllm_published, 5);
    zsock_t *d = s_dealer(vr);
    msgpack_zone z;
    msgpack_zone_init(&z, 4096);
    msgpack_object b[8];
    uint64_t seqs[8];
    assert_int_equal(s_vllm_replay(d, &z, b, seqs, 8), 5);
    for (uint32_t i = 0; i < 5; i++)
        assert_int_equal(seqs[i], S_T1 | (i + 1));
    const char *types[5][2] = {{"AllBlocksCleared", NULL},
                               {"BlockStored", NULL},
                               {"BlockRemoved", NULL},
                               {"BlockRemoved", "BlockStored"},
                               {"BlockRemoved", NULL}};
    for (uint32_t i = 0; i < 5; i++) {
        assert_int_equal(b[i].via.map.size, 2);
        const msgpack_object *ts = s_mp_get(&b[i], "ts");
        assert_non_null(ts);
        assert_int_equal(ts->type, MSGPACK_OBJECT_FLOAT64);
        const msgpack_object *evs = s_mp_get(&b[i], "events");
        assert_non_null(evs);
        assert_int_equal(evs->via.array.size, types[i][1] ? 2 : 1);
        for (uint32_t k = 0; k < evs->via.array.size; k++) {
            const msgpack_object *e = &evs->via.array.ptr[k];
            s_mp_str_is(&e->via.map.ptr[0].key, "type"); /* the tag comes first */
            s_mp_str_is(s_mp_get(e, "type"), types[i][k]);
        }
    }
    const msgpack_object *stored = &s_mp_get(&b[1], "events")->via.array.ptr[0];
    assert_int_equal(stored->via.map.size, 8);
    s_mp_hashes_are(s_mp_get(stored, "block_hashes"), 0, 10);
    assert_int_equal(s_mp_get(stored, "parent_block_hash")->type, MSGPACK_OBJECT_NIL);
    assert_int_equal(s_mp_get(stored, "token_ids")->via.array.size, 0);
    assert_int_equal(s_mp_get(stored, "block_size")->via.u64, 16);
    assert_int_equal(s_mp_get(stored, "lora_id")->type, MSGPACK_OBJECT_NIL);
    assert_int_equal(s_mp_get(stored, "lora_name")->type, MSGPACK_OBJECT_NIL);
    s_mp_str_is(s_mp_get(stored, "medium"), "CPU");
    const msgpack_object *moved = s_mp_get(&b[3], "events")->via.array.ptr;
    s_mp_hashes_are(s_mp_get(&moved[0], "block_hashes"), 3, 2);
    s_mp_str_is(s_mp_get(&moved[0], "medium"), "CPU");
    s_mp_str_is(s_mp_get(&moved[1], "medium"), "DISK");
    const msgpack_object *down = &s_mp_get(&b[4], "events")->via.array.ptr[0];
    s_mp_hashes_are(s_mp_get(down, "block_hashes"), 3, 2); /* what tier 2 held */
    s_mp_str_is(s_mp_get(down, "medium"), "DISK");
    msgpack_zone_destroy(&z);

    /* a bad request: the end marker with the reason */
    zmsg_t *m = zmsg_new();
    zmsg_addstr(m, "seven");
    assert_int_equal(zmsg_send(&m, d), 0);
    m = s_recv(d);
    assert_int_equal(zmsg_size(m), 2);
    s_frame_seq(zmsg_first(m), UINT64_MAX);
    zframe_t *why = zmsg_next(m);
    assert_non_null(memmem(zframe_data(why), zframe_size(why), "8-byte", 6));
    zmsg_destroy(&m);
    zsock_destroy(&d);
    s_stop(&f);
}

/* Rule: the older array layout (array_like): [ts, events], each event
 * [type, fields...] in vLLM's field order; a gap on the input is a gap in the
 * vLLM stream's sequence too. */
static void test_publisher_vllm_array_layout(void **state)
{
    (void)state;
    fx_t f;
    s_start(&f, &(publisher_config_t){.vllm_endpoint = "tcp://127.0.0.1:*",
                                      .vllm_replay_endpoint = "tcp://127.0.0.1:*",
                                      .vllm_layout = EVENTS_VLLM_ARRAY});
    char vx[256], vr[256];
    assert_int_equal(publisher_vllm_endpoints(f.pub, vx, sizeof vx, vr, sizeof vr), 0);
    kvtier_Event ev = {.kind.block_stored = {.tier_id = 1,
                                             .medium = kvtier_Medium_MEDIUM_GPU,
                                             .tokens_per_block = 32}};
    s_send_event(&f, "stored/a", S_T1 | 1, kvtier_Event_block_stored_tag, ev, 0, 2);
    s_send_event(&f, "stored/a", S_T1 | 3, kvtier_Event_block_stored_tag, ev, 2, 1); /* 2 lost */
    s_wait_received(&f, 2);
    zsock_t *d = s_dealer(vr);
    msgpack_zone z;
    msgpack_zone_init(&z, 4096);
    msgpack_object b[4];
    uint64_t seqs[4];
    assert_int_equal(s_vllm_replay(d, &z, b, seqs, 4), 2);
    assert_int_equal(seqs[0], S_T1 | 1);
    assert_int_equal(seqs[1], S_T1 | 3); /* the input's gap shows */
    assert_int_equal(b[0].type, MSGPACK_OBJECT_ARRAY);
    assert_int_equal(b[0].via.array.size, 2);
    assert_int_equal(b[0].via.array.ptr[0].type, MSGPACK_OBJECT_FLOAT64);
    const msgpack_object *e = &b[0].via.array.ptr[1].via.array.ptr[0];
    assert_int_equal(e->type, MSGPACK_OBJECT_ARRAY);
    assert_int_equal(e->via.array.size, 7);
    s_mp_str_is(&e->via.array.ptr[0], "BlockStored");
    s_mp_hashes_are(&e->via.array.ptr[1], 0, 2);
    assert_int_equal(e->via.array.ptr[2].type, MSGPACK_OBJECT_NIL); /* parent */
    assert_int_equal(e->via.array.ptr[3].via.array.size, 0);        /* token_ids */
    assert_int_equal(e->via.array.ptr[4].via.u64, 32);              /* block_size */
    assert_int_equal(e->via.array.ptr[5].type, MSGPACK_OBJECT_NIL); /* lora_id */
    s_mp_str_is(&e->via.array.ptr[6], "GPU");
    msgpack_zone_destroy(&z);
    zsock_destroy(&d);
    s_stop(&f);
}

/* Issue 10 §1: a stored event's token ids and parent fill vLLM's token_ids and
 * parent_block_hash, in both layouts. */
static void test_vllm_stored_carries_tokens_and_parent(void **state)
{
    (void)state;
    uint8_t keys[2][BUS_KEY_LEN];
    s_tkey(keys[0], 0);
    s_tkey(keys[1], 1);
    uint32_t ids[4] = {11, 12, 70000, 4000000000u};
    bus_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.ev.which_kind = kvtier_Event_block_stored_tag;
    ev.ev.kind.block_stored.tokens_per_block = 2;
    ev.ev.kind.block_stored.medium = kvtier_Medium_MEDIUM_CPU;
    ev.ev.kind.block_stored.parent_key.size = BUS_KEY_LEN;
    s_tkey(ev.ev.kind.block_stored.parent_key.bytes, 9);
    ev.keys = (bus_keys_t){.keys = keys, .n = 2, .cap = 2};
    ev.tokens = (bus_u32s_t){.v = ids, .n = 4, .cap = 4};
    for (int layout = EVENTS_VLLM_MAP; layout <= EVENTS_VLLM_ARRAY; layout++) {
        msgpack_sbuffer buf;
        msgpack_sbuffer_init(&buf);
        assert_int_equal(events_vllm_batch((events_vllm_layout_t)layout, &ev, 1, &buf), 0);
        msgpack_unpacked u;
        msgpack_unpacked_init(&u);
        assert_int_equal(msgpack_unpack_next(&u, buf.data, buf.size, NULL), MSGPACK_UNPACK_SUCCESS);
        const msgpack_object *e, *parent, *tok;
        if (layout == EVENTS_VLLM_MAP) {
            e = &s_mp_get(&u.data, "events")->via.array.ptr[0];
            parent = s_mp_get(e, "parent_block_hash");
            tok = s_mp_get(e, "token_ids");
        } else {
            e = &u.data.via.array.ptr[1].via.array.ptr[0];
            parent = &e->via.array.ptr[2];
            tok = &e->via.array.ptr[3];
        }
        uint8_t want[BUS_KEY_LEN];
        s_tkey(want, 9);
        assert_int_equal(parent->type, MSGPACK_OBJECT_BIN);
        assert_int_equal(parent->via.bin.size, BUS_KEY_LEN);
        assert_memory_equal(parent->via.bin.ptr, want, BUS_KEY_LEN);
        assert_int_equal(tok->type, MSGPACK_OBJECT_ARRAY);
        assert_int_equal(tok->via.array.size, 4);
        for (uint32_t i = 0; i < 4; i++)
            assert_int_equal(tok->via.array.ptr[i].via.u64, ids[i]);
        msgpack_unpacked_destroy(&u);
        msgpack_sbuffer_destroy(&buf);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vllm_stored_carries_tokens_and_parent),
        cmocka_unit_test(test_publisher_publishes_byte_exact),
        cmocka_unit_test(test_publisher_filters_by_topic_prefix),
        cmocka_unit_test(test_publisher_counts_gap_and_publishes),
        cmocka_unit_test(test_publisher_drops_bad_input),
        cmocka_unit_test(test_publisher_ring_bound_by_count),
        cmocka_unit_test(test_publisher_ring_bound_by_bytes),
        cmocka_unit_test(test_publisher_replay_from_the_middle),
        cmocka_unit_test(test_publisher_replay_spans_turns),
        cmocka_unit_test(test_publisher_replay_malformed_gets_error),
        cmocka_unit_test(test_publisher_replay_busy_bound),
        cmocka_unit_test(test_publisher_endpoints_resolved),
        cmocka_unit_test(test_publisher_failed_start_is_null),
        cmocka_unit_test(test_publisher_keys_only_refuses_unkeyed_peers),
        cmocka_unit_test(test_publisher_snapshot_serves_the_index),
        cmocka_unit_test(test_publisher_snapshot_refused_when_stale),
        cmocka_unit_test(test_publisher_vllm_map_layout),
        cmocka_unit_test(test_publisher_vllm_array_layout),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
