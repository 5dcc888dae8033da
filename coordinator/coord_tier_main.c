/* coord_tier_main.c — `kvtier tier` (see coord_main.h): one tier actor and its
 * registration in etcd. The tier actor serves on its own thread; the main thread
 * only keeps the registration alive, so a slow etcd call never delays the data
 * plane.
 *
 * Registration: grant a lease, put /kvtier/<cluster>/tiers/<name> under it, keep
 * it alive every TTL/4. A keepalive that says the lease is gone (expired during
 * an etcd outage, revoked by an operator) makes it register again with a new
 * lease, same record (same epoch: the memory is intact). Never: exits because
 * etcd is unreachable (it keeps retrying with backoff).
 *
 * A pool's member (--pool NAME, issue 9 §3): before the actor starts, the lowest
 * free id of the pool's range is claimed under the lease with one transaction per
 * id (coord_etcd_create_if_absent on /kvtier/<cluster>/tier_ids/<id> =
 * {"name","pool"}); a key holding this member's own name is taken again (a
 * restart before the old lease lapsed). No free id: the start is refused, naming
 * the members. A new lease after a lapse claims the same id again; another
 * member holding it by then ends the process (its blocks were dropped from the
 * index with the lapse anyway). */
#include "coord_main.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <czmq.h>

#include "bus_curve.h"
#include "bus_fault_admin.h"
#include "bus_host.h"
#include "bus_log.h"
#include "bus_token_mac.h"
#include "coord_config.h"
#include "coord_curve.h"
#include "coord_etcd.h"
#include "coord_membership.h"
#include "coord_proc.h"
#include "metrics.h"
#include "tier_actor.h"

#define S_COMP "tier-main"
#define S_BACKOFF_MAX_MS 2000

typedef struct {
    coord_config_t cfg;
    const coord_tier_config_t *tier;
    zactor_t *actor;
    char host[BUS_HOST_ID_MAX]; /* the identity it registers (bus_host_identity) */
    zactor_t *faults;           /* the fault admin socket (bus_fault_admin.h); NULL: faults off */
    zactor_t *metrics;          /* HTTP /metrics, /readyz (issue 10); NULL: tiers[i].metrics "" */
    char metrics_addr[METRICS_HTTP_ADDR_MAX];
    int64_t next_stats_ms; /* next tier actor stats handed to it */
    coord_etcd_t *etcd;
    char key[COORD_ETCD_KEY_MAX];
    char value[COORD_TIER_VALUE_MAX];
    size_t value_len;
    int64_t lease;
    int64_t ttl_ms;
    int64_t next_ms; /* next keepalive or registration attempt */
    /* a pool's member: its pool, its entry as run, the lease of its id claim
     * (used by the first registration), the id key's value */
    const coord_pool_config_t *pool;
    coord_tier_config_t member;
    int64_t claim_lease, claim_ttl;
    bool lost_id; /* the id went to another member: stop */
    int backoff_ms;
    bool warned;                      /* one warning per outage */
    uint8_t secret[BUS_SECRET_BYTES]; /* the tier plane opens only with tokens sealed under it */
} s_proc_t;

static void s_usage(FILE *out)
{
    fprintf(out,
            "usage: kvtier tier -c FILE --name TIER [--etcd URLS] [--host NAME] [--cert FILE]\n"
            "                   [--secret FILE]\n"
            "       kvtier tier -c FILE --pool POOL --name NAME --endpoint EP [--advertise EP]\n"
            "                   [--capacity SLOTS] [--host NAME] [--etcd URLS] ...\n"
            "  -c, --config FILE  deployment file (JSON)\n"
            "  --name TIER        the entry of \"tiers\" to run (with --pool: the new member's\n"
            "                     name, unique in the cluster)\n"
            "  --pool POOL        join the entry of \"pools\" named POOL: a tier id of its\n"
            "                     range is claimed in etcd (refused when the pool is full)\n"
            "  --endpoint EP      a member's tier-plane endpoint to bind (with --pool)\n"
            "  --advertise EP     what a member registers for others to connect to\n"
            "                     (default the bound endpoint)\n"
            "  --capacity SLOTS   a member's capacity (default the pool's)\n"
            "  --host NAME        its host name (overrides tiers[i].host; default the\n"
            "                     machine's): only clients of that host name map its shm\n"
            "  --etcd URLS        comma-separated etcd URLs (overrides etcd.endpoints)\n"
            "  --cert FILE        its CURVE pair when security.curve is on\n"
            "                     (default <keys>/<TIER>.key)\n"
            "  --secret FILE      cluster secret (overrides security.secret_file)\n");
}

typedef struct {
    const char *pool, *endpoint, *advertise, *capacity;
} s_member_args_t;

static int s_parse(int argc, char **argv, const char **file, const char **name, const char **etcd,
                   const char **host, const char **cert, const char **secret, s_member_args_t *m)
{
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            s_usage(stdout);
            return 1;
        }
        if ((r = coord_proc_opt(argc, argv, &i, "--config", "-c", &v)) != 0)
            *file = v;
        else if ((r = coord_proc_opt(argc, argv, &i, "--name", NULL, &v)) != 0)
            *name = v;
        else if ((r = coord_proc_opt(argc, argv, &i, "--etcd", NULL, &v)) != 0)
            *etcd = v;
        else if ((r = coord_proc_opt(argc, argv, &i, "--host", NULL, &v)) != 0)
            *host = v;
        else if ((r = coord_proc_opt(argc, argv, &i, "--cert", NULL, &v)) != 0)
            *cert = v;
        else if ((r = coord_proc_opt(argc, argv, &i, "--secret", NULL, &v)) != 0)
            *secret = v;
        else if ((r = coord_proc_opt(argc, argv, &i, "--pool", NULL, &v)) != 0)
            m->pool = v;
        else if ((r = coord_proc_opt(argc, argv, &i, "--endpoint", NULL, &v)) != 0)
            m->endpoint = v;
        else if ((r = coord_proc_opt(argc, argv, &i, "--advertise", NULL, &v)) != 0)
            m->advertise = v;
        else if ((r = coord_proc_opt(argc, argv, &i, "--capacity", NULL, &v)) != 0)
            m->capacity = v;
        else {
            fprintf(stderr, "kvtier tier: unknown option \"%s\"\n", argv[i]);
            s_usage(stderr);
            return -1;
        }
        if (r < 0) {
            fprintf(stderr, "kvtier tier: %s needs a value\n", argv[i]);
            return -1;
        }
    }
    if (!*file || !*name) {
        fprintf(stderr, "kvtier tier: -c FILE and --name TIER are required\n");
        s_usage(stderr);
        return -1;
    }
    if (!m->pool && (m->endpoint || m->advertise || m->capacity)) {
        fprintf(stderr, "kvtier tier: --endpoint, --advertise and --capacity are a pool member's "
                        "(--pool POOL); a tier of \"tiers\" takes them from its entry\n");
        return -1;
    }
    if (m->pool && !m->endpoint) {
        fprintf(stderr,
                "kvtier tier: --pool %s: a member needs its endpoint (--endpoint EP, "
                "e.g. tcp://0.0.0.0:7301 with --advertise tcp://HOST:7301)\n",
                m->pool);
        return -1;
    }
    return 0;
}

static int s_start_actor(s_proc_t *p)
{
    const coord_tier_config_t *t = p->tier;
    /* the host identity (bus_host.h): the configured host name with the boot id, so
     * that only clients of that host name map its shm */
    if (bus_host_identity(t->host, p->host, sizeof p->host) < 0) {
        bus_warn(S_COMP, "tier %s: no host identity: same-host clients will use the frame path",
                 t->name);
        p->host[0] = '\0';
    }
    /* per-instance isolation: an Inventory lists every instance's keys */
    _Static_assert(1 + COORD_MAX_COORDINATORS + COORD_CURVE_MAX_ACL <= TIER_ACTOR_MAX_META_KEYS,
                   "every coordinator and \"*\" key fits a tier's list");
    const char *cnames[COORD_MAX_COORDINATORS];
    for (uint32_t i = 0; i < p->cfg.n_coordinators && i < COORD_MAX_COORDINATORS; i++)
        cnames[i] = p->cfg.coordinators[i].name;
    char(*mkeys)[BUS_CURVE_KEY_TXT] = calloc(TIER_ACTOR_MAX_META_KEYS, sizeof *mkeys);
    bool meta_only = false;
    uint32_t n_mkeys = 0;
    char why[512];
    if (!mkeys ||
        coord_curve_meta_keys(&p->cfg.curve, cnames, p->cfg.n_coordinators, &meta_only, mkeys,
                              TIER_ACTOR_MAX_META_KEYS, &n_mkeys, why, sizeof why) < 0) {
        fprintf(stderr, "kvtier tier: %s\n", mkeys ? why : "out of memory");
        free(mkeys);
        return -1;
    }
    tier_actor_config_t ac = {.tier_id = t->id,
                              .meta_keys_only = meta_only,
                              .n_meta_keys = n_mkeys,
                              .meta_keys = (const char(*)[BUS_CURVE_KEY_TXT])mkeys,
                              .host = p->host,
                              .endpoint = t->endpoint,
                              .max_connections = t->max_connections,
                              .tier = t->backend,
                              .secret = p->secret,
                              .cluster = p->cfg.cluster,
                              .clock_skew_ms = (uint32_t)p->cfg.clock_skew_ms};
    coord_proc_block_signals(true);
    p->actor = tier_actor_new(&ac);
    coord_proc_block_signals(false);
    free(mkeys); /* copied by the actor */
    return p->actor ? 0 : -1;
}

/* The record the coordinator's membership reads (coord_membership.h). */
static int s_build_record(s_proc_t *p)
{
    const coord_tier_config_t *t = p->tier;
    kvtier_TierInfo info = kvtier_TierInfo_init_zero;
    info.tier_id = t->id;
    snprintf(info.name, sizeof info.name, "%s", t->name);
    info.kind = (kvtier_TierKind)tier_kind_wire(t->kind_name);
    snprintf(info.kind_name, sizeof info.kind_name, "%s", t->kind_name);
    tier_desc_t d;
    if (tier_actor_endpoint(p->actor, info.endpoint, sizeof info.endpoint) < 0 ||
        tier_actor_describe(p->actor, &d) < 0)
        return -1;
    if (t->advertise[0]) /* peers connect there; the actor binds t->endpoint */
        snprintf(info.endpoint, sizeof info.endpoint, "%.*s", (int)sizeof info.endpoint - 1,
                 t->advertise);
    if (d.access_kind == TIER_ACCESS_SHM)
        snprintf(info.shm, sizeof info.shm, "%.*s", (int)sizeof info.shm - 1, d.access);
    tier_actor_info_access(&d, &info);
    snprintf(info.ucx_address, sizeof info.ucx_address, "%.*s", (int)sizeof info.ucx_address - 1,
             d.ucx_address);
    snprintf(info.host, sizeof info.host, "%.*s", (int)sizeof info.host - 1, p->host);
    info.epoch = d.epoch;
    info.capacity_slots = t->capacity;
    info.slot_bytes = t->slot_size;
    info.up = true;
    if (p->pool)
        snprintf(info.pool, sizeof info.pool, "%s", p->pool->name);
    char suffix[COORD_TIER_NAME_MAX + 8];
    snprintf(suffix, sizeof suffix, "tiers/%s", t->name);
    if (coord_cluster_key(p->key, sizeof p->key, p->cfg.cluster, suffix) < 0)
        return -1;
    bus_info(S_COMP, "tier %s (id %u, %s%s%s) on %s, host %s, epoch %" PRIu64, t->name, t->id,
             t->kind_name, p->pool ? ", member of pool " : "", p->pool ? p->pool->name : "",
             info.endpoint, info.host[0] ? info.host : "(none)", info.epoch);
    return coord_tier_value_encode_metrics(&info, p->metrics_addr, p->value, sizeof p->value,
                                           &p->value_len);
}

static void s_etcd_failed(s_proc_t *p, const char *what)
{
    if (!p->warned)
        bus_warn(S_COMP, "%s: %s (retrying)", what, coord_etcd_last_error(p->etcd));
    p->warned = true;
    p->next_ms = coord_proc_now_ms() + p->backoff_ms;
    p->backoff_ms = p->backoff_ms * 2 > S_BACKOFF_MAX_MS ? S_BACKOFF_MAX_MS : p->backoff_ms * 2;
}

/* ---- a pool member's tier id ---- */

static int s_claim_id(s_proc_t *p, int64_t lease, uint32_t want, uint32_t *got, char *why,
                      size_t whylen)
{
    return coord_pool_claim_id(p->etcd, p->cfg.cluster, p->pool->name, p->pool->first_id,
                               p->pool->max_members, p->member.name, lease, want, got, why, whylen);
}

/* At start: a lease and the member's id, retried while etcd cannot be reached.
 * 0, or -1 after a stderr line (the pool is full, interrupted). */
static int s_join_pool(s_proc_t *p, uint32_t *id)
{
    int backoff = 100;
    while (!coord_proc_interrupted()) {
        int64_t lease = 0, ttl = 0;
        char why[768];
        int rc =
            coord_etcd_lease_grant(p->etcd, coord_config_lease_ttl_s(&p->cfg), 0, &lease, &ttl);
        if (rc == 0) {
            rc = s_claim_id(p, lease, 0, id, why, sizeof why);
            if (rc == 0) {
                p->claim_lease = lease;
                p->claim_ttl = ttl;
                return 0;
            }
            (void)coord_etcd_lease_revoke(p->etcd, lease);
            if (rc == -EBUSY) {
                fprintf(stderr, "kvtier tier: --pool %s --name %s: %s\n", p->pool->name,
                        p->member.name, why);
                return -1;
            }
        }
        bus_warn(S_COMP, "pool %s: claiming a tier id: %s (retrying)", p->pool->name,
                 coord_etcd_last_error(p->etcd));
        zclock_sleep(backoff);
        backoff = backoff * 2 > S_BACKOFF_MAX_MS ? S_BACKOFF_MAX_MS : backoff * 2;
    }
    return -1;
}

static void s_register(s_proc_t *p)
{
    int64_t id = p->claim_lease, ttl = p->claim_ttl;
    p->claim_lease = 0;
    if (!id) {
        if (coord_etcd_lease_grant(p->etcd, coord_config_lease_ttl_s(&p->cfg), 0, &id, &ttl) < 0) {
            s_etcd_failed(p, "lease grant");
            return;
        }
        char why[768];
        uint32_t got = 0;
        int rc = p->pool ? s_claim_id(p, id, p->tier->id, &got, why, sizeof why) : 0;
        if (rc == -EBUSY) {
            bus_error(S_COMP, "%s: stopping", why);
            (void)coord_etcd_lease_revoke(p->etcd, id);
            p->lost_id = true;
            return;
        }
        if (rc < 0) {
            s_etcd_failed(p, "tier id claim");
            (void)coord_etcd_lease_revoke(p->etcd, id);
            return;
        }
    }
    if (coord_etcd_put(p->etcd, p->key, p->value, p->value_len, id, NULL) < 0) {
        s_etcd_failed(p, p->key);
        (void)coord_etcd_lease_revoke(p->etcd, id);
        return;
    }
    p->lease = id;
    p->ttl_ms = (ttl > 0 ? ttl : coord_config_lease_ttl_s(&p->cfg)) * 1000;
    p->next_ms = coord_proc_now_ms() + p->ttl_ms / 4;
    p->backoff_ms = 100;
    p->warned = false;
    bus_info(S_COMP, "registered %s under lease %" PRIx64 " (ttl %" PRId64 " s)", p->key,
             (uint64_t)id, p->ttl_ms / 1000);
}

static void s_keepalive(s_proc_t *p)
{
    int64_t ttl = 0;
    int rc = coord_etcd_lease_keepalive(p->etcd, p->lease, &ttl);
    if (rc == 0 && ttl > 0) {
        p->next_ms = coord_proc_now_ms() + p->ttl_ms / 4;
        p->warned = false;
        return;
    }
    if (rc == -ENOENT || rc == 0) {
        bus_warn(S_COMP, "lease %" PRIx64 " of %s is gone: registering again", (uint64_t)p->lease,
                 p->key);
        p->lease = 0;
        s_register(p);
        return;
    }
    s_etcd_failed(p, "keepalive");
    if (p->next_ms > coord_proc_now_ms() + p->ttl_ms / 8)
        p->next_ms = coord_proc_now_ms() + p->ttl_ms / 8;
}

/* The tier process's metrics actor (issue 10 §2). 0, or -1 after a stderr line. */
static int s_start_metrics(s_proc_t *p)
{
    const coord_tier_config_t *t = p->tier;
    if (!t->metrics[0])
        return 0;
    metrics_config_t mc = {.role = METRICS_ROLE_TIER,
                           .name = t->name,
                           .cluster = p->cfg.cluster,
                           .bind = t->metrics,
                           .max_connections = p->cfg.metrics_max_connections,
                           .timeout_s = p->cfg.metrics_timeout_s,
                           .refresh_ms = p->cfg.metrics_refresh_ms};
    coord_proc_block_signals(true);
    p->metrics = metrics_new(&mc);
    coord_proc_block_signals(false);
    if (!p->metrics || metrics_address(p->metrics, p->metrics_addr, sizeof p->metrics_addr) < 0) {
        fprintf(stderr,
                "kvtier tier: tiers[%u].metrics: the metrics actor did not start (cannot "
                "listen on %s? see the log above)\n",
                t->id - 1, t->metrics);
        return -1;
    }
    return 0;
}

/* Hands the tier actor's counters to the metrics actor, every metrics.refresh. */
static void s_feed_metrics(s_proc_t *p)
{
    int64_t now = coord_proc_now_ms();
    if (!p->metrics || now < p->next_stats_ms)
        return;
    p->next_stats_ms = now + p->cfg.metrics_refresh_ms;
    tier_actor_stats_t st;
    memset(&st, 0, sizeof st);
    bool ok = tier_actor_stats(p->actor, &st) == 0;
    (void)metrics_set_tier(p->metrics, &st, ok, p->lease != 0, p->tier->kind_name,
                           p->tier->slot_size);
}

static void s_run(s_proc_t *p)
{
    zpoller_t *poller = zpoller_new(p->actor, NULL);
    p->backoff_ms = 100;
    while (!coord_proc_interrupted() && !p->lost_id) {
        s_feed_metrics(p);
        int64_t now = coord_proc_now_ms();
        if (now >= p->next_ms) {
            if (p->lease)
                s_keepalive(p);
            else
                s_register(p);
            continue;
        }
        /* The tier actor sends nothing unasked; the wait ends on a signal or the
         * next etcd deadline. Anything that does arrive is read and dropped. */
        int64_t wait = p->next_ms - now;
        if (zpoller_wait(poller, (int)(wait < 200 ? wait : 200)) == p->actor) {
            zmsg_t *m = zmsg_recv(p->actor);
            zmsg_destroy(&m);
        }
    }
    zpoller_destroy(&poller);
}

int coord_tier_main(int argc, char **argv)
{
    const char *file = NULL, *name = NULL, *etcd = NULL, *cert = NULL, *secret = NULL;
    const char *host = NULL;
    s_member_args_t ma = {0};
    int r = s_parse(argc, argv, &file, &name, &etcd, &host, &cert, &secret, &ma);
    if (r != 0)
        return r > 0 ? COORD_EXIT_OK : COORD_EXIT_USAGE;
    s_proc_t *p = calloc(1, sizeof *p);
    if (!p)
        return COORD_EXIT_FAIL;
    int rc = COORD_EXIT_USAGE;
    if (coord_proc_config("kvtier tier", file, etcd, &p->cfg) < 0 ||
        coord_proc_secret("kvtier tier", &p->cfg, secret, p->secret) < 0)
        goto out;
    uint64_t capacity = 0;
    char why[768];
    const coord_pool_config_t *listed_pool = NULL;
    const coord_pool_member_t *listed = coord_config_tier(&p->cfg, name)
                                            ? NULL
                                            : coord_config_pool_entry(&p->cfg, name, &listed_pool);
    if (ma.pool && listed) {
        fprintf(stderr,
                "kvtier tier: --pool %s --name %s: %s lists %s in pools[].members (pool %s), "
                "which deploy/supervise runs; run that entry with kvtier tier -c FILE --name %s, "
                "or give a new member another name\n",
                ma.pool, name, file, name, listed_pool->name, name);
        goto out;
    }
    if (listed) { /* a member the deployment lists: its entry's endpoint, host, capacity */
        ma.pool = listed_pool->name;
        ma.endpoint = listed->endpoint;
        ma.advertise = listed->advertise;
        capacity = listed->capacity;
        if (!host && listed->host[0])
            host = listed->host;
    }
    if (ma.pool) {
        p->pool = coord_config_pool(&p->cfg, ma.pool);
        if (!p->pool) {
            fprintf(stderr, "kvtier tier: --pool %s: %s has no pool of that name (\"pools\")\n",
                    ma.pool, file);
            goto out;
        }
        if (!listed && ma.capacity &&
            (bus_config_parse_size(ma.capacity, &capacity, why, sizeof why) < 0 || !capacity)) {
            fprintf(stderr, "kvtier tier: --capacity \"%s\": a number of slots, at least 1\n",
                    ma.capacity);
            goto out;
        }
        /* checked in full before anything starts; the id is claimed later */
        if (coord_config_pool_member(&p->cfg, p->pool, name, p->pool->first_id, ma.endpoint,
                                     ma.advertise, host, capacity, &p->member, why,
                                     sizeof why) < 0) {
            fprintf(stderr, "kvtier tier: %s\n", why);
            goto out;
        }
        p->tier = &p->member;
    } else {
        p->tier = coord_config_tier(&p->cfg, name);
        if (!p->tier) {
            fprintf(stderr, "kvtier tier: %s has no tier named \"%s\"%s\n", file, name,
                    p->cfg.n_pools ? " (a new member of a pool: --pool POOL --name NAME "
                                     "--endpoint EP)"
                                   : "");
            goto out;
        }
    }
    if (host && !bus_host_name_ok(host)) {
        fprintf(stderr,
                "kvtier tier: --host \"%s\": a host name is 1..%d letters, digits, '_', '-' or "
                "'.', starting with a letter or digit\n",
                host, BUS_HOST_NAME_MAX - 1);
        goto out;
    }
    if (host && !p->pool) /* the entry is this process's copy of the file */
        snprintf(p->cfg.tiers[p->tier->id - 1].host, sizeof p->cfg.tiers[0].host, "%s", host);
    if (coord_curve_start(&p->cfg.curve, name, cert, true, why, sizeof why) < 0) {
        fprintf(stderr, "kvtier tier: %s\n", why);
        goto out;
    }
    zsys_init(); /* installs the SIGINT/SIGTERM handler that sets zsys_interrupted */
    rc = COORD_EXIT_FAIL;
    char fname[BUS_FAULT_NAME_MAX], ferr[BUS_CONFIG_ERR_MAX];
    snprintf(fname, sizeof fname, "tier-%s", name); /* deploy/supervise's name for it */
    if (bus_fault_start(&p->cfg.faults, fname, &p->faults, ferr, sizeof ferr) < 0) {
        fprintf(stderr, "kvtier tier: %s\n", ferr);
        goto out_stop;
    }
    const char *eps[COORD_ETCD_MAX_ENDPOINTS];
    for (uint32_t i = 0; i < p->cfg.n_etcd; i++)
        eps[i] = p->cfg.etcd[i];
    int call_ms = (int)(coord_config_lease_ttl_s(&p->cfg) * 1000 / 6);
    call_ms = call_ms < 200 ? 200 : call_ms > 2000 ? 2000 : call_ms;
    coord_etcd_config_t ec = {.endpoints = eps,
                              .n_endpoints = p->cfg.n_etcd,
                              .timeout_ms = call_ms,
                              .connect_timeout_ms = call_ms};
    p->etcd = coord_etcd_new(&ec);
    if (!p->etcd) {
        fprintf(stderr, "kvtier tier: tier %s: no etcd handle (curl did not start)\n", name);
        goto out_stop;
    }
    if (p->pool) {
        uint32_t id = 0;
        rc = COORD_EXIT_USAGE;
        if (s_join_pool(p, &id) < 0)
            goto out_stop;
        rc = COORD_EXIT_FAIL;
        if (coord_config_pool_member(&p->cfg, p->pool, name, id, ma.endpoint, ma.advertise, host,
                                     capacity, &p->member, why, sizeof why) < 0) {
            fprintf(stderr, "kvtier tier: %s\n", why);
            goto out_stop;
        }
        bus_info(S_COMP, "pool %s: member %s has tier id %u (/kvtier/%s/tier_ids/%u)",
                 p->pool->name, name, id, p->cfg.cluster, id);
    }
    if (s_start_actor(p) < 0) {
        fprintf(stderr, "kvtier tier: tier %s: the tier actor did not start (see the log above)\n",
                name);
        goto out_stop;
    }
    if (s_start_metrics(p) < 0)
        goto out_stop;
    if (s_build_record(p) < 0) {
        fprintf(stderr, "kvtier tier: tier %s: cannot build its etcd record\n", name);
        goto out_stop;
    }
    s_run(p);
    rc = p->lost_id ? COORD_EXIT_FAIL : COORD_EXIT_OK;
    bus_info(S_COMP, "tier %s: stopping", name);
out_stop:
    /* Deregister first: the coordinator drops the tier before its memory goes. */
    if (p->claim_lease) /* a member that claimed its id but never registered */
        (void)coord_etcd_lease_revoke(p->etcd, p->claim_lease);
    if (p->lease && coord_etcd_lease_revoke(p->etcd, p->lease) < 0)
        bus_warn(S_COMP, "revoking lease %" PRIx64 ": %s", (uint64_t)p->lease,
                 coord_etcd_last_error(p->etcd));
    zactor_destroy(&p->metrics);
    zactor_destroy(&p->actor);
    coord_etcd_destroy(&p->etcd);
    zactor_destroy(&p->faults);
out:
    bus_curve_stop();
    bus_secret_wipe(p->secret, sizeof p->secret);
    free(p);
    return rc;
}
