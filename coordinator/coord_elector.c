/* coord_elector.c — the election actor (see coord_elector.h).
 *
 * Three threads: the actor (campaign, decisions, reports), the keepalive thread
 * (its own etcd handle; only keeps the lease alive and says when it is lost) and
 * the watch thread of coord_etcd (only says "the leader key changed"). The two
 * helper threads talk to the actor through PUSH sockets into one PULL inbox;
 * each PUSH is created by the actor before its thread starts and closed after
 * the thread is joined, so exactly one thread uses it at a time. Messages carry
 * the lease id or watch generation they belong to: stale ones are ignored.
 *
 * The campaign is level-triggered: whatever wakes the actor (start, a watch
 * event, the watch ending, a lost lease, a retry timer), it runs one
 * create-if-absent on the leader key and derives the state from the answer. */
#include "coord_elector.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bus_actor.h"
#include "bus_log.h"
#include "coord_config.h"
#include "coord_etcd.h"
#include "coord_proc.h"
#include "sched_actor.h"

#define S_COMP "elector"
#define S_VALUE_MAX 1024 /* bytes of the leader key's value we accept */
#define S_BACKOFF_MAX_MS 2000

static int64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- leader key value -------------------------------------------------------- */

int coord_leader_value_encode(const char *name, const char *endpoint, uint64_t epoch, char *buf,
                              size_t cap, size_t *len)
{
    json_t *v = json_pack("{s:s, s:s, s:I}", "name", name ? name : "", "endpoint",
                          endpoint ? endpoint : "", "epoch", (json_int_t)(epoch & INT64_MAX));
    if (!v)
        return -ENOMEM;
    size_t n = json_dumpb(v, NULL, 0, JSON_COMPACT);
    int rc = 0;
    if (len)
        *len = n;
    if (n == 0)
        rc = -ENOMEM;
    else if (n > cap)
        rc = -ENOBUFS;
    else
        json_dumpb(v, buf, cap, JSON_COMPACT);
    json_decref(v);
    return rc;
}

static int s_copy_str(const json_t *o, const char *key, char *out, size_t cap, bool required)
{
    const json_t *s = json_object_get(o, key);
    if (!s)
        return required ? -EBADMSG : 0;
    if (!json_is_string(s) || json_string_length(s) >= cap)
        return -EBADMSG;
    memcpy(out, json_string_value(s), json_string_length(s) + 1);
    return 0;
}

int coord_leader_value_decode(const void *buf, size_t len, char *name, size_t name_cap,
                              char *endpoint, size_t endpoint_cap, uint64_t *epoch)
{
    if (name_cap)
        name[0] = '\0';
    if (endpoint_cap)
        endpoint[0] = '\0';
    *epoch = 0;
    json_t *v = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
    if (!v || !json_is_object(v)) {
        json_decref(v);
        return -EBADMSG;
    }
    int rc = s_copy_str(v, "name", name, name_cap, false);
    if (rc == 0)
        rc = s_copy_str(v, "endpoint", endpoint, endpoint_cap, true);
    const json_t *e = json_object_get(v, "epoch");
    if (rc == 0 && e) {
        if (!json_is_integer(e) || json_integer_value(e) < 0)
            rc = -EBADMSG;
        else
            *epoch = (uint64_t)json_integer_value(e);
    }
    json_decref(v);
    return rc;
}

/* ---- keepalive thread -------------------------------------------------------- */

typedef struct {
    pthread_t thread;
    bool running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop; /* under mu */
    coord_etcd_t *etcd;
    zsock_t *push;
    int64_t lease;
    int64_t ttl_ms;
    _Atomic int64_t last_ok_sent; /* when the last confirmed keepalive (or the grant) was
                                     sent; read by the actor's step-down timer */
    _Atomic int64_t *until;       /* cfg.lease_until_ms (NULL: none) */
    _Atomic uint64_t term;        /* the epoch this lease leads (its bound is
                                     published), 0 while it leads none */
} s_keepalive_t;

/* The safety rule's bound (coord_elector.h): 3/4 of the TTL after a confirmed send. */
static int64_t s_until(int64_t sent, int64_t ttl_ms)
{
    return sent + ttl_ms - ttl_ms / 4;
}

int coord_lease_word_extend(_Atomic int64_t *word, uint64_t epoch, int64_t until)
{
    int64_t tag = sched_lease_word(epoch, 0), old = atomic_load(word);
    for (;;) {
        if (old == 0 || sched_lease_word_epoch(old) != sched_lease_word_epoch(tag) ||
            sched_lease_word_until(old) <= SCHED_LEASE_STEPPED_DOWN)
            return -ESTALE; /* no term, another term, or stepped down: never revived */
        if (sched_lease_word_until(old) >= until)
            return 0;
        if (atomic_compare_exchange_weak(word, &old, sched_lease_word(epoch, until)))
            return 0;
    }
}

/* A keepalive etcd confirmed: moves the bound on, only for the term this lease
 * still leads (a keepalive landing while the lease is dropped changes nothing). */
static void s_ka_confirmed(s_keepalive_t *ka, int64_t sent)
{
    atomic_store(&ka->last_ok_sent, sent);
    uint64_t term = atomic_load(&ka->term);
    if (ka->until && term)
        (void)coord_lease_word_extend(ka->until, term, s_until(sent, ka->ttl_ms));
}

/* Waits until deadline (monotonic ms) or stop; returns true when stopping. */
static bool s_ka_wait(s_keepalive_t *ka, int64_t deadline)
{
    struct timespec ts = {.tv_sec = deadline / 1000, .tv_nsec = (deadline % 1000) * 1000000L};
    pthread_mutex_lock(&ka->mu);
    while (!ka->stop && s_now_ms() < deadline)
        if (pthread_cond_timedwait(&ka->cv, &ka->mu, &ts) == ETIMEDOUT)
            break;
    bool stop = ka->stop;
    pthread_mutex_unlock(&ka->mu);
    return stop;
}

static void *s_ka_thread(void *arg)
{
    s_keepalive_t *ka = arg;
    int64_t interval = ka->ttl_ms / 4 > 0 ? ka->ttl_ms / 4 : 1;
    int64_t retry = interval < 100 ? interval : 100;
    int64_t next = atomic_load(&ka->last_ok_sent) + interval;
    for (;;) {
        if (s_ka_wait(ka, next))
            break;
        int64_t sent = s_now_ms();
        int64_t ttl = 0;
        int rc = coord_etcd_lease_keepalive(ka->etcd, ka->lease, &ttl);
        if (rc == 0 && ttl > 0) {
            s_ka_confirmed(ka, sent);
            next = sent + interval;
            continue;
        }
        const char *why = rc == 0 ? "lease expired" : coord_etcd_last_error(ka->etcd);
        if (rc == -ENOENT || rc == 0 ||
            s_now_ms() >= s_until(atomic_load(&ka->last_ok_sent), ka->ttl_ms)) {
            zsock_send(ka->push, "s8i8s", "KA_LOST", (uint64_t)ka->lease, rc, (uint64_t)0, why);
            break;
        }
        bus_warn(S_COMP, "keepalive of lease %" PRIx64 " failed (will retry): %s",
                 (uint64_t)ka->lease, why);
        next = s_now_ms() + retry;
    }
    return NULL;
}

/* ---- the actor ------------------------------------------------------------------ */

/* Every inbox message: command, lease id or watch generation, error, revision, text. */
#define S_INBOX_PIC "s8i8s"

typedef struct {
    zsock_t *push;
    uint64_t gen;
} s_watch_ctx_t;

typedef struct {
    zsock_t *pipe;
    zsock_t *inbox;
    zloop_t *loop;
    char inbox_ep[COORD_ELECTOR_INBOX_MAX];

    char eps[COORD_ETCD_MAX_ENDPOINTS][COORD_ETCD_ENDPOINT_MAX];
    const char *epp[COORD_ETCD_MAX_ENDPOINTS];
    coord_etcd_config_t ecfg;
    coord_etcd_t *etcd;

    char name[COORD_ELECTOR_NAME_MAX];
    char endpoint[BUS_ENDPOINT_MAX];
    char leader_key[COORD_ETCD_KEY_MAX];
    char term_key[COORD_ETCD_KEY_MAX]; /* term: the last term's epoch, kept (no lease) */
    char member_key[COORD_ETCD_KEY_MAX];
    char members_prefix[COORD_ETCD_KEY_MAX]; /* coordinators/: the standbys counted */
    _Atomic uint32_t *standbys;              /* cfg.standbys (NULL: not counted) */
    int64_t ttl_s;
    int retry_ms;
    int backoff_ms;
    int retry_timer;       /* zloop timer id, -1 when none */
    int lease_timer;       /* the step-down check (zloop timer id), -1 when none */
    int64_t holdoff_until; /* zclock_mono: no campaign before (after losing our lease) */

    int64_t lease;
    int64_t lease_ttl_ms; /* as granted */
    s_keepalive_t ka;

    coord_etcd_watch_t *watch;
    s_watch_ctx_t wctx; /* the watch thread's argument; rewritten only while none runs */
    uint64_t watch_gen;
    int64_t watch_min_rev; /* after a compaction: the oldest revision available */

    bool leader;
    uint64_t epoch;         /* ours while leader */
    bool follower_reported; /* a FOLLOWER event went out for (f_epoch, f_endpoint) */
    uint64_t f_epoch;
    char f_endpoint[BUS_ENDPOINT_MAX];
} self_t;

static int s_campaign(self_t *self);
static void s_lose_leadership(self_t *self);

static void s_report(self_t *self, coord_elector_event_kind_t kind, uint64_t epoch,
                     const char *endpoint, const char *name, uint64_t previous)
{
    char prev[48] = "";
    if (kind == COORD_ELECTOR_LEADER)
        snprintf(prev, sizeof prev, ", after term %" PRIu64 "%s", previous,
                 previous ? "" : " (none known)");
    bus_info(S_COMP, "%s: %s epoch %" PRIu64 " %s (%s)%s", self->name,
             coord_elector_event_name(kind), epoch, endpoint, name, prev);
    zsock_send(self->pipe, "s8ss88", coord_elector_event_name(kind), epoch, endpoint, name,
               previous, coord_etcd_cluster_id(self->etcd));
}

/* --- retry timer --- */

static int s_on_retry(zloop_t *loop, int timer_id, void *arg)
{
    (void)loop;
    (void)timer_id;
    self_t *self = arg;
    self->retry_timer = -1;
    s_campaign(self);
    return 0;
}

static void s_schedule_retry(self_t *self)
{
    if (self->retry_timer >= 0)
        return;
    int64_t wait = self->backoff_ms, hold = self->holdoff_until - zclock_mono();
    if (hold > wait)
        wait = hold;
    self->retry_timer = zloop_timer(self->loop, (size_t)wait, 1, s_on_retry, self);
    self->backoff_ms =
        self->backoff_ms * 2 > S_BACKOFF_MAX_MS ? S_BACKOFF_MAX_MS : self->backoff_ms * 2;
}

/* --- keepalive --- */

static void s_ka_stop(self_t *self)
{
    s_keepalive_t *ka = &self->ka;
    if (ka->running) {
        pthread_mutex_lock(&ka->mu);
        ka->stop = true;
        pthread_cond_broadcast(&ka->cv);
        pthread_mutex_unlock(&ka->mu);
        pthread_join(ka->thread, NULL);
        ka->running = false;
    }
    zsock_destroy(&ka->push);
}

static int s_ka_start(self_t *self, int64_t grant_sent)
{
    s_keepalive_t *ka = &self->ka;
    ka->push = zsock_new_push(self->inbox_ep);
    if (!ka->push)
        return -ENOMEM;
    zsock_set_linger(ka->push, 0);
    ka->stop = false;
    ka->lease = self->lease;
    ka->ttl_ms = self->lease_ttl_ms;
    atomic_store(&ka->term, 0); /* a new lease leads nothing yet: publishes nothing */
    atomic_store(&ka->last_ok_sent, grant_sent);
    if (pthread_create(&ka->thread, NULL, s_ka_thread, ka) != 0) {
        zsock_destroy(&ka->push);
        return -EAGAIN;
    }
    ka->running = true;
    return 0;
}

/* --- lease --- */

/* Revokes the current lease if any (best effort: its keys vanish at once rather
 * than when it expires) and forgets it. */
static void s_drop_lease(self_t *self)
{
    s_ka_stop(self);
    if (self->lease) {
        int rc = coord_etcd_lease_revoke(self->etcd, self->lease);
        if (rc < 0 && rc != -ENOENT)
            bus_warn(S_COMP, "revoking lease %" PRIx64 ": %s", (uint64_t)self->lease,
                     coord_etcd_last_error(self->etcd));
    }
    self->lease = 0;
}

static int s_take_lease(self_t *self)
{
    int64_t sent = s_now_ms(), id = 0, ttl = 0;
    int rc = coord_etcd_lease_grant(self->etcd, self->ttl_s, 0, &id, &ttl);
    if (rc < 0) {
        bus_warn(S_COMP, "lease grant: %s", coord_etcd_last_error(self->etcd));
        return rc;
    }
    self->lease = id;
    self->lease_ttl_ms = (ttl > 0 ? ttl : self->ttl_s) * 1000;
    if (ttl > self->ttl_s)
        bus_warn(S_COMP,
                 "%s: etcd granted lease %" PRIx64 " a TTL of %" PRId64 " s, not the %" PRId64
                 " s asked: its minimum lease TTL is 3/2 of its election timeout, rounded up to a "
                 "second (run etcd with a shorter --election-timeout and --heartbeat-interval "
                 "for a shorter lease: docs/OPERATIONS.md)",
                 self->name, (uint64_t)id, ttl, self->ttl_s);
    rc = coord_etcd_put(self->etcd, self->member_key, self->endpoint, strlen(self->endpoint), id,
                        NULL);
    if (rc == 0)
        rc = s_ka_start(self, sent);
    if (rc < 0) {
        bus_warn(S_COMP, "registering %s: %s", self->member_key, coord_etcd_last_error(self->etcd));
        s_drop_lease(self);
        return rc;
    }
    bus_info(S_COMP,
             "%s: lease %" PRIx64 " granted by etcd with TTL %" PRId64 " s (asked %" PRId64
             " s; step down %" PRId64 " ms after the last confirmed keepalive), registered %s",
             self->name, (uint64_t)id, self->lease_ttl_ms / 1000, self->ttl_s,
             s_until(0, self->lease_ttl_ms), self->member_key);
    return 0;
}

static void s_lose_leadership(self_t *self)
{
    if (!self->leader)
        return;
    atomic_store(&self->ka.term, 0); /* before the marker: no keepalive extends it after */
    if (self->ka.until)              /* the scheduler stops granting now, before it reads LOST */
        atomic_store(self->ka.until, sched_lease_word(self->epoch, SCHED_LEASE_STEPPED_DOWN));
    self->leader = false;
    if (self->standbys) /* counted again when a term begins */
        atomic_store(self->standbys, 0);
    s_report(self, COORD_ELECTOR_LOST, self->epoch, "", self->name, 0);
    self->epoch = 0;
    self->follower_reported = false;
}

/* --- watch --- */

static int s_on_watch_event(const coord_etcd_event_t *ev, void *arg)
{
    (void)ev;
    const s_watch_ctx_t *ctx = arg;
    zsock_send(ctx->push, S_INBOX_PIC, "WATCH", ctx->gen, 0, (uint64_t)0, "");
    return 0;
}

static void s_on_watch_end(const coord_etcd_watch_end_t *end, void *arg)
{
    const s_watch_ctx_t *ctx = arg;
    uint64_t compact =
        end->err == -ERANGE && end->compact_revision > 0 ? (uint64_t)end->compact_revision : 0;
    zsock_send(ctx->push, S_INBOX_PIC, "WEND", ctx->gen, end->err, compact,
               end->message ? end->message : "");
}

static void s_watch_stop(self_t *self)
{
    coord_etcd_watch_destroy(&self->watch);
    zsock_destroy(&self->wctx.push);
}

static void s_watch_start(self_t *self, int64_t from_rev)
{
    if (self->watch)
        return;
    self->wctx.push = zsock_new_push(self->inbox_ep);
    if (!self->wctx.push)
        return;
    zsock_set_linger(self->wctx.push, 0);
    self->wctx.gen = ++self->watch_gen;
    if (from_rev < self->watch_min_rev)
        from_rev = self->watch_min_rev;
    coord_etcd_watch_spec_t spec = {.key = self->leader_key,
                                    .prefix = false,
                                    .start_revision = from_rev > 0 ? from_rev : 0,
                                    .on_event = s_on_watch_event,
                                    .on_end = s_on_watch_end,
                                    .arg = &self->wctx};
    self->watch = coord_etcd_watch_new(&self->ecfg, &spec);
    if (!self->watch) {
        zsock_destroy(&self->wctx.push);
        s_schedule_retry(self);
    }
}

/* --- standbys (kvtier leader resign) --- */

static int s_count_other(const coord_etcd_kv_t *kv, void *arg)
{
    const self_t *self = ((void **)arg)[0];
    uint32_t *n = ((void **)arg)[1];
    if (kv->key_len != strlen(self->member_key) || memcmp(kv->key, self->member_key, kv->key_len))
        (*n)++;
    return 0;
}

/* The other coordinators registered now into *standbys; left as it was when etcd
 * does not answer (a resign then goes by the last count: the lease hold-off is
 * the safety net). One range read of a handful of keys, once a second, on this
 * thread like the campaign's calls (bounded by the call timeout): the keepalive
 * has its own thread, and the scheduler checks the lease bound by itself. */
static void s_count_standbys(self_t *self)
{
    if (!self->standbys || !self->leader)
        return;
    uint32_t n = 0;
    void *arg[2] = {self, &n};
    coord_etcd_range_info_t info = {0};
    if (coord_etcd_range(self->etcd, self->members_prefix, NULL, s_count_other, arg, &info) < 0)
        return;
    if (atomic_exchange(self->standbys, n) != n)
        bus_info(S_COMP, "%s: %u standby coordinators registered", self->name, n);
}

static int s_on_standbys_timer(zloop_t *loop, int timer_id, void *arg)
{
    (void)loop;
    (void)timer_id;
    s_count_standbys(arg);
    return 0;
}

/* A scheduler's hand-over (coord_elector.h): the term ends now, and no campaign
 * for one lease TTL so that a standby wins. */
static void s_on_resign(self_t *self, uint64_t epoch, const char *who)
{
    if (!self->leader || epoch != self->epoch) {
        bus_warn(S_COMP, "%s: a hand-over for epoch %" PRIu64 " (from %s) while %s: ignored",
                 self->name, epoch, who, self->leader ? "leading another epoch" : "not leading");
        return;
    }
    int64_t ttl = self->lease_ttl_ms > 0 ? self->lease_ttl_ms : self->ttl_s * 1000;
    bus_info(S_COMP,
             "%s: handing leadership over (kvtier leader resign, epoch %" PRIu64
             "): revoking lease %" PRIx64 ", no campaign for %" PRId64 " ms",
             self->name, epoch, (uint64_t)self->lease, ttl);
    s_lose_leadership(self);
    self->holdoff_until = zclock_mono() + ttl;
    s_drop_lease(self);
    /* registered again at once under a fresh lease (a standby the next leader
     * counts), campaigning only past the hold-off */
    (void)s_take_lease(self);
    s_campaign(self); /* follows the new leader meanwhile; campaigns past the hold-off */
}

/* --- campaign --- */

/* The term before this one, as etcd ordered the writes: one put of our epoch to
 * /kvtier/<cluster>/term returning the value it replaced (0: none, or etcd did
 * not answer: logged). The new term's LeaderChanged carries it, so a subscriber
 * that missed a whole term knows (docs/EVENTS.md "Failover"). */
static uint64_t s_chain_term(self_t *self, uint64_t epoch)
{
    char v[24], prev[24];
    size_t plen = 0;
    bool had = false;
    int n = snprintf(v, sizeof v, "%" PRIu64, epoch);
    if (coord_etcd_put_prev(self->etcd, self->term_key, v, (size_t)n, 0, prev, sizeof prev - 1,
                            &plen, &had) < 0) {
        bus_warn(S_COMP, "%s: writing %s: %s (the previous term is unknown)", self->name,
                 self->term_key, coord_etcd_last_error(self->etcd));
        return 0;
    }
    if (!had)
        return 0;
    prev[plen] = '\0';
    char *end = NULL;
    errno = 0;
    unsigned long long pe = strtoull(prev, &end, 10);
    if (errno || end == prev || *end || pe >= epoch) {
        bus_warn(S_COMP, "%s: %s held '%s', not an epoch before %" PRIu64 ": ignored", self->name,
                 self->term_key, prev, epoch);
        return 0;
    }
    return (uint64_t)pe;
}

static void s_become_leader(self_t *self, uint64_t epoch)
{
    if (self->leader && self->epoch == epoch)
        return;
    if (self->leader)
        s_lose_leadership(self); /* our key was replaced by a newer one of ours */
    char value[S_VALUE_MAX];
    size_t len = 0;
    /* The create could not know its own revision: write the epoch in now. */
    if (coord_leader_value_encode(self->name, self->endpoint, epoch, value, sizeof value, &len) ==
            0 &&
        coord_etcd_put(self->etcd, self->leader_key, value, len, self->lease, NULL) < 0)
        bus_warn(S_COMP, "writing the epoch into %s: %s", self->leader_key,
                 coord_etcd_last_error(self->etcd));
    self->leader = true;
    self->epoch = epoch;
    self->follower_reported = false;
    /* This term's bound, from the lease's last confirmed keepalive; from now on
     * the keepalive thread moves it on (for this epoch only). */
    if (self->ka.until)
        atomic_store(self->ka.until,
                     sched_lease_word(
                         epoch, s_until(atomic_load(&self->ka.last_ok_sent), self->lease_ttl_ms)));
    atomic_store(&self->ka.term, epoch);
    s_report(self, COORD_ELECTOR_LEADER, epoch, self->endpoint, self->name, s_chain_term(self, epoch));
    s_count_standbys(self);
}

static void s_follow(self_t *self, const uint8_t *value, size_t len, uint64_t epoch)
{
    char name[COORD_ELECTOR_NAME_MAX], ep[BUS_ENDPOINT_MAX];
    uint64_t vepoch = 0;
    if (coord_leader_value_decode(value, len, name, sizeof name, ep, sizeof ep, &vepoch) < 0) {
        bus_warn(S_COMP,
                 "%s holds a value that is not a leader record; treating the leader "
                 "as unknown",
                 self->leader_key);
        name[0] = ep[0] = '\0';
    }
    s_lose_leadership(self);
    if (self->follower_reported && self->f_epoch == epoch && strcmp(self->f_endpoint, ep) == 0)
        return;
    self->follower_reported = true;
    self->f_epoch = epoch;
    snprintf(self->f_endpoint, sizeof self->f_endpoint, "%s", ep);
    s_report(self, COORD_ELECTOR_FOLLOWER, epoch, ep, name, 0);
}

/* A coordinator whose lease lapsed (or was revoked) was likely the sick one:
 * it waits a quarter of its lease TTL before campaigning again, so a healthy
 * standby that saw the leader key go takes over first. */
static void s_hold_off(self_t *self)
{
    int64_t ttl = self->lease_ttl_ms > 0 ? self->lease_ttl_ms : self->ttl_s * 1000;
    int64_t hold = ttl / 4 > self->retry_ms ? ttl / 4 : self->retry_ms;
    self->holdoff_until = zclock_mono() + hold;
}

/* During a hand-over's hold-off (a lease held, no campaign): the leader of the
 * moment is read and followed, so that this standby redirects to it at once. */
static void s_follow_current(self_t *self)
{
    char cur[S_VALUE_MAX];
    size_t len = 0;
    coord_etcd_meta_t meta = {0};
    int rc = coord_etcd_get(self->etcd, self->leader_key, cur, sizeof cur, &len, &meta);
    if (rc == 0 && meta.lease != self->lease)
        s_follow(self, (const uint8_t *)cur, len, (uint64_t)meta.create_revision);
    if (!self->watch) /* it runs on across a hand-over; else from now on */
        s_watch_start(self, rc == 0 ? meta.mod_revision + 1 : 0);
}

static int s_campaign(self_t *self)
{
    if (zclock_mono() < self->holdoff_until) {
        if (self->lease)
            s_follow_current(self);
        s_schedule_retry(self);
        return -1;
    }
    if (!self->lease && s_take_lease(self) < 0) {
        s_schedule_retry(self);
        return -1;
    }
    char value[S_VALUE_MAX], cur[S_VALUE_MAX];
    size_t len = 0, cur_len = 0;
    bool won = false;
    coord_etcd_meta_t meta = {0};
    coord_leader_value_encode(self->name, self->endpoint, 0, value, sizeof value, &len);
    int rc = coord_etcd_create_if_absent(self->etcd, self->leader_key, value, len, self->lease,
                                         &won, cur, sizeof cur, &cur_len, &meta);
    if (rc < 0 && rc != -ENOBUFS) {
        bus_warn(S_COMP, "campaign: %s", coord_etcd_last_error(self->etcd));
        if (rc == -ENOENT) { /* our lease is gone: nothing attached to it counts any more */
            s_lose_leadership(self);
            s_hold_off(self);
            s_drop_lease(self);
        }
        s_schedule_retry(self);
        return -1;
    }
    self->backoff_ms = self->retry_ms;
    if (won || meta.lease == self->lease)
        s_become_leader(self, (uint64_t)meta.create_revision);
    else
        s_follow(self, (const uint8_t *)cur, rc == -ENOBUFS ? 0 : cur_len,
                 (uint64_t)meta.create_revision);
    s_watch_start(self, meta.mod_revision + 1);
    return 0;
}

/* --- inbox and pipe --- */

/* The safety rule's timer: a leader whose last confirmed keepalive is older than
 * 3/4 of the TTL steps down now, whatever the keepalive thread is doing. */
static int s_on_lease_check(zloop_t *loop, int timer_id, void *arg)
{
    (void)loop;
    (void)timer_id;
    self_t *self = arg;
    if (!self->leader || !self->lease || !self->ka.running)
        return 0;
    int64_t last = atomic_load(&self->ka.last_ok_sent), now = s_now_ms();
    if (now <= s_until(last, self->lease_ttl_ms))
        return 0;
    /* worded as the keepalive thread's loss (s_on_lease_lost): one line to look for */
    bus_warn(S_COMP,
             "%s: lease %" PRIx64 " lost: the last keepalive etcd confirmed was sent %" PRId64
             " ms ago, the TTL is %" PRId64 " ms: stepping down before the lease can lapse "
             "(epoch %" PRIu64 ")",
             self->name, (uint64_t)self->lease, now - last, self->lease_ttl_ms, self->epoch);
    s_lose_leadership(self);
    s_hold_off(self);
    s_drop_lease(self);
    s_campaign(self);
    return 0;
}

static void s_on_lease_lost(self_t *self, uint64_t lease, const char *why)
{
    if ((int64_t)lease != self->lease)
        return; /* an older lease's thread */
    bus_warn(S_COMP, "%s: lease %" PRIx64 " lost: %s", self->name, lease, why);
    s_lose_leadership(self);
    s_hold_off(self);
    s_drop_lease(self);
    s_campaign(self);
}

static int s_on_inbox(zloop_t *loop, zsock_t *sock, void *arg)
{
    (void)loop;
    self_t *self = arg;
    char *cmd = NULL, *text = NULL;
    uint64_t id = 0, rev = 0;
    int err = 0;
    if (zsock_recv(sock, S_INBOX_PIC, &cmd, &id, &err, &rev, &text) < 0 || !cmd || !text) {
        /* nothing: a malformed internal message */
    } else if (streq(cmd, "KA_LOST")) {
        s_on_lease_lost(self, id, text);
    } else if (streq(cmd, "RESIGN")) {
        s_on_resign(self, id, text);
    } else if (id == self->watch_gen && streq(cmd, "WATCH")) {
        s_campaign(self);
    } else if (id == self->watch_gen && streq(cmd, "WEND")) {
        if (err != 0)
            bus_warn(S_COMP, "watch of %s ended: %s", self->leader_key, text);
        if (rev > 0)
            self->watch_min_rev = (int64_t)rev;
        s_watch_stop(self);
        s_campaign(self);
    }
    zstr_free(&cmd);
    zstr_free(&text);
    return 0;
}

static int s_on_pipe(zloop_t *loop, zsock_t *sock, void *arg)
{
    (void)loop;
    (void)arg;
    char *cmd = zstr_recv(sock);
    int rc = !cmd || streq(cmd, "$TERM") ? -1 : 0;
    zstr_free(&cmd);
    return rc;
}

/* SIGINT/SIGTERM go to the process main (which stops the actors): a signal
 * landing here would only cut a poll short (zloop ends on EINTR). Threads this
 * actor starts inherit the mask. */
static void s_actor(zsock_t *pipe, void *arg)
{
    self_t *self = arg;
    coord_proc_block_signals(true);
    self->pipe = pipe;
    self->retry_timer = -1;
    self->backoff_ms = self->retry_ms;
    static atomic_uint counter;
    if (!self->inbox_ep[0])
        snprintf(self->inbox_ep, sizeof self->inbox_ep, "inproc://kvt-elector-%u-%p",
                 atomic_fetch_add(&counter, 1), (void *)self);
    self->inbox = zsock_new_pull(self->inbox_ep);
    self->loop = zloop_new();
    self->etcd = coord_etcd_new(&self->ecfg);
    s_keepalive_t *ka = &self->ka;
    pthread_mutex_init(&ka->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ka->cv, &ca);
    pthread_condattr_destroy(&ca);
    ka->etcd = coord_etcd_new(&self->ecfg);
    bool ok = self->inbox && self->loop && self->etcd && ka->etcd &&
              zloop_reader(self->loop, pipe, s_on_pipe, self) == 0 &&
              zloop_reader(self->loop, self->inbox, s_on_inbox, self) == 0;
    if (!ok)
        bus_error(S_COMP, "%s: cannot start: %s", self->name,
                  !self->inbox || !self->loop
                      ? "no inbox socket or loop"
                      : "no etcd handle (an etcd endpoint is empty, or curl could not start)");
    if (bus_actor_ready(pipe, ok) == 0) {
        zloop_set_nonstop(self->loop, true); /* stop on $TERM only: the owner decides */
        int64_t every = self->ttl_s * 1000 / 20;
        self->lease_timer =
            zloop_timer(self->loop, (size_t)(every > 5 ? every : 5), 0, s_on_lease_check, self);
        if (self->standbys)
            zloop_timer(self->loop, COORD_ELECTOR_STANDBYS_MS, 0, s_on_standbys_timer, self);
        s_campaign(self);
        zloop_start(self->loop);
    }
    s_watch_stop(self);
    if (self->leader && self->ka.until) /* the lease is revoked next: the term ends here */
        atomic_store(self->ka.until, sched_lease_word(self->epoch, SCHED_LEASE_STEPPED_DOWN));
    atomic_store(&self->ka.term, 0);
    s_drop_lease(self); /* also stops the keepalive */
    if (self->leader)
        bus_info(S_COMP, "%s: resigned (epoch %" PRIu64 ")", self->name, self->epoch);
    coord_etcd_destroy(&ka->etcd);
    pthread_cond_destroy(&ka->cv);
    pthread_mutex_destroy(&ka->mu);
    coord_etcd_destroy(&self->etcd);
    zloop_destroy(&self->loop);
    zsock_destroy(&self->inbox);
    if (ok) /* a failed start leaves self to coord_elector_new */
        free(self);
}

static int s_clamp(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

zactor_t *coord_elector_new(const coord_elector_config_t *cfg)
{
    if (!cfg || !cfg->cluster || !cfg->name || !cfg->endpoint || cfg->n_etcd == 0 ||
        cfg->n_etcd > COORD_ETCD_MAX_ENDPOINTS || cfg->lease_ttl_s < 1 || !cfg->name[0] ||
        strlen(cfg->name) >= COORD_ELECTOR_NAME_MAX || strlen(cfg->endpoint) >= BUS_ENDPOINT_MAX ||
        (cfg->inbox_endpoint && strlen(cfg->inbox_endpoint) >= COORD_ELECTOR_INBOX_MAX))
        return NULL;
    self_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    for (size_t i = 0; i < cfg->n_etcd; i++) {
        if (!cfg->etcd_endpoints[i] || strlen(cfg->etcd_endpoints[i]) >= COORD_ETCD_ENDPOINT_MAX)
            goto out_free;
        snprintf(self->eps[i], sizeof self->eps[i], "%s", cfg->etcd_endpoints[i]);
        self->epp[i] = self->eps[i];
    }
    snprintf(self->name, sizeof self->name, "%s", cfg->name);
    snprintf(self->endpoint, sizeof self->endpoint, "%s", cfg->endpoint);
    char suffix[COORD_ELECTOR_NAME_MAX + 16];
    snprintf(suffix, sizeof suffix, "coordinators/%s", cfg->name);
    if (coord_cluster_key(self->leader_key, sizeof self->leader_key, cfg->cluster, "leader") < 0 ||
        coord_cluster_key(self->term_key, sizeof self->term_key, cfg->cluster, "term") < 0 ||
        coord_cluster_key(self->member_key, sizeof self->member_key, cfg->cluster, suffix) < 0 ||
        coord_cluster_key(self->members_prefix, sizeof self->members_prefix, cfg->cluster,
                          "coordinators/") < 0)
        goto out_free;
    if (cfg->inbox_endpoint)
        snprintf(self->inbox_ep, sizeof self->inbox_ep, "%s", cfg->inbox_endpoint);
    self->standbys = cfg->standbys;
    self->ttl_s = cfg->lease_ttl_s;
    /* One etcd call must end well inside the lease (see the safety rule). */
    int call_ms = cfg->etcd_timeout_ms > 0 ? cfg->etcd_timeout_ms
                                           : s_clamp((int)(cfg->lease_ttl_s * 1000 / 6), 200, 2000);
    self->ecfg = (coord_etcd_config_t){.endpoints = self->epp,
                                       .n_endpoints = cfg->n_etcd,
                                       .timeout_ms = call_ms,
                                       .connect_timeout_ms = call_ms};
    self->retry_ms = cfg->retry_ms > 0 ? cfg->retry_ms : 100;
    self->ka.until = cfg->lease_until_ms;
    zactor_t *actor = bus_actor_new(s_actor, self);
    if (!actor)
        goto out_free; /* the actor has ended, or never ran */
    return actor;
out_free:
    free(self);
    return NULL;
}

void coord_elector_destroy(zactor_t **pa)
{
    zactor_destroy(pa);
}

const char *coord_elector_event_name(coord_elector_event_kind_t kind)
{
    switch (kind) {
    case COORD_ELECTOR_LEADER:
        return "LEADER";
    case COORD_ELECTOR_LOST:
        return "LOST";
    case COORD_ELECTOR_FOLLOWER:
        return "FOLLOWER";
    }
    return "?";
}

int coord_elector_recv(zactor_t *elector, coord_elector_event_t *ev)
{
    char *kind = NULL, *ep = NULL, *name = NULL;
    uint64_t epoch = 0, previous = 0, etcd_id = 0;
    memset(ev, 0, sizeof *ev);
    if (zsock_recv(elector, "s8ss88", &kind, &epoch, &ep, &name, &previous, &etcd_id) < 0 || !kind ||
        !ep || !name)
        goto out_bad;
    if (streq(kind, "LEADER"))
        ev->kind = COORD_ELECTOR_LEADER;
    else if (streq(kind, "LOST"))
        ev->kind = COORD_ELECTOR_LOST;
    else if (streq(kind, "FOLLOWER"))
        ev->kind = COORD_ELECTOR_FOLLOWER;
    else
        goto out_bad;
    ev->epoch = epoch;
    ev->previous_epoch = previous;
    ev->etcd_cluster_id = etcd_id;
    snprintf(ev->endpoint, sizeof ev->endpoint, "%s", ep);
    snprintf(ev->name, sizeof ev->name, "%s", name);
    zstr_free(&kind);
    zstr_free(&ep);
    zstr_free(&name);
    return 0;
out_bad:
    zstr_free(&kind);
    zstr_free(&ep);
    zstr_free(&name);
    return -1;
}
