/* coord_metrics_feed.c — the metrics actor's etcd reader (see coord_metrics_feed.h).
 * One round per interval on this thread: keepalive (or register), two ranges, one
 * get; each call bounded by the etcd handle's timeout. */
#include "coord_metrics_feed.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_actor.h"
#include "bus_log.h"
#include "coord_config.h"
#include "coord_etcd.h"
#include "coord_membership.h"
#include "metrics.h"
#include "metrics_page.h"

#define S_COMP "metrics-feed"

typedef struct {
    coord_metrics_feed_config_t cfg;
    char cluster[COORD_CLUSTER_MAX], name[METRICS_NAME_MAX], address[METRICS_HTTP_ADDR_MAX];
    coord_etcd_t *etcd;
    char reg_key[COORD_ETCD_KEY_MAX], tiers_prefix[COORD_ETCD_KEY_MAX];
    char coords_prefix[COORD_ETCD_KEY_MAX], opt_key[COORD_ETCD_KEY_MAX];
    int64_t lease, next_keepalive;
    metrics_target_t targets[METRICS_MAX_TARGETS];
    uint32_t n_targets;
    bool warned_full, warned_etcd;
    char *opt; /* METRICS_OPT_MAX_BYTES */
    char events_key[COORD_ETCD_KEY_MAX];
    char events[1024];   /* the record to advertise ("" : none) */
    bool events_pending; /* not written under the current lease yet */
    bool events_withdraw;
} s_feed_t;

/* Puts (or withdraws) the events record once the lease exists. */
static void s_events(s_feed_t *f)
{
    if (f->events_withdraw) {
        /* only our own record (one transaction: compare the value, delete): a newer
         * leader may have written its own since. Retried every round until etcd
         * answers. */
        if (coord_etcd_delete_if_value(f->etcd, f->events_key, f->events, strlen(f->events), NULL) <
            0)
            return;
        f->events_withdraw = false;
        f->events[0] = '\0';
        return;
    }
    if (!f->events_pending || !f->lease || !f->events[0])
        return;
    if (coord_etcd_put(f->etcd, f->events_key, f->events, strlen(f->events), f->lease, NULL) == 0)
        f->events_pending = false;
}

static void s_register(s_feed_t *f)
{
    int64_t now = zclock_mono();
    if (f->lease) {
        if (now < f->next_keepalive)
            return;
        int64_t ttl = 0;
        int rc = coord_etcd_lease_keepalive(f->etcd, f->lease, &ttl);
        if (rc == 0 && ttl > 0) {
            f->next_keepalive = now + f->cfg.lease_ttl_s * 1000 / 3;
            return;
        }
        if (rc != -ENOENT && rc != 0)
            return; /* etcd unreachable: try again next round */
        f->lease = 0;
    }
    int64_t id = 0, ttl = 0;
    if (coord_etcd_lease_grant(f->etcd, f->cfg.lease_ttl_s, 0, &id, &ttl) < 0)
        return;
    if (coord_etcd_put(f->etcd, f->reg_key, f->address, strlen(f->address), id, NULL) < 0) {
        (void)coord_etcd_lease_revoke(f->etcd, id);
        return;
    }
    f->lease = id;
    f->next_keepalive = now + f->cfg.lease_ttl_s * 1000 / 3;
    f->events_pending = f->events[0] != '\0'; /* the old lease took the record along */
}

static metrics_target_t *s_add(s_feed_t *f)
{
    if (f->n_targets < METRICS_MAX_TARGETS)
        return &f->targets[f->n_targets++];
    if (!f->warned_full)
        bus_warn(S_COMP, "more than %u processes to scrape: the rest are not in /sd",
                 METRICS_MAX_TARGETS);
    f->warned_full = true;
    return NULL;
}

static int s_on_tier(const coord_etcd_kv_t *kv, void *arg)
{
    s_feed_t *f = arg;
    char addr[METRICS_HTTP_ADDR_MAX];
    if (coord_tier_value_metrics(kv->value, kv->value_len, addr, sizeof addr) < 0)
        return 0; /* a tier without metrics (or an older tier process) */
    metrics_target_t *t = s_add(f);
    if (t) {
        snprintf(t->role, sizeof t->role, "tier");
        snprintf(t->name, sizeof t->name, "%s", kv->key + strlen(f->tiers_prefix));
        snprintf(t->address, sizeof t->address, "%s", addr);
    }
    return 0;
}

static int s_on_coord(const coord_etcd_kv_t *kv, void *arg)
{
    s_feed_t *f = arg;
    if (kv->value_len == 0 || kv->value_len >= METRICS_HTTP_ADDR_MAX)
        return 0;
    metrics_target_t *t = s_add(f);
    if (t) {
        snprintf(t->role, sizeof t->role, "coordinator");
        snprintf(t->name, sizeof t->name, "%s", kv->key + strlen(f->coords_prefix));
        snprintf(t->address, sizeof t->address, "%.*s", (int)kv->value_len,
                 (const char *)kv->value);
    }
    return 0;
}

static void s_round(s_feed_t *f, zsock_t *pipe)
{
    s_register(f);
    s_events(f);
    f->n_targets = 0;
    int rc = coord_etcd_range(f->etcd, f->coords_prefix, NULL, s_on_coord, f, NULL);
    if (rc == 0)
        rc = coord_etcd_range(f->etcd, f->tiers_prefix, NULL, s_on_tier, f, NULL);
    if (rc == 0) {
        zframe_t *fr = zframe_new(f->targets, f->n_targets * sizeof f->targets[0]);
        zsock_send(pipe, "sf", "TARGETS", fr);
        zframe_destroy(&fr);
    }
    size_t len = 0;
    int g = coord_etcd_get(f->etcd, f->opt_key, f->opt, METRICS_OPT_MAX_BYTES, &len, NULL);
    if (g == 0 || g == -ENOENT || g == -ENOBUFS) {
        /* too large: handed on as is, for the metrics actor to refuse (and log once) */
        zframe_t *fr = zframe_new(g == 0 ? f->opt : "{", g == 0 ? len : g == -ENOBUFS ? 1 : 0);
        zsock_send(pipe, "sf", "OPTIMIZER", fr);
        zframe_destroy(&fr);
    }
    bool failed = rc < 0 || (g < 0 && g != -ENOENT && g != -ENOBUFS);
    if (failed && !f->warned_etcd)
        bus_warn(S_COMP, "etcd: %s (retrying every round)", coord_etcd_last_error(f->etcd));
    f->warned_etcd = failed;
}

static void s_destroy(s_feed_t **fp)
{
    s_feed_t *f = *fp;
    if (!f)
        return;
    if (f->lease)
        (void)coord_etcd_lease_revoke(f->etcd, f->lease);
    coord_etcd_destroy(&f->etcd);
    free(f->opt);
    free(f);
    *fp = NULL;
}

static s_feed_t *s_new(const coord_metrics_feed_config_t *cfg)
{
    s_feed_t *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->cfg = *cfg;
    snprintf(f->cluster, sizeof f->cluster, "%s", cfg->cluster);
    snprintf(f->name, sizeof f->name, "%s", cfg->name);
    snprintf(f->address, sizeof f->address, "%s", cfg->address);
    if (!f->cfg.interval_ms)
        f->cfg.interval_ms = 1000;
    if (f->cfg.lease_ttl_s < 1)
        f->cfg.lease_ttl_s = 3;
    char suffix[COORD_ETCD_KEY_MAX];
    snprintf(suffix, sizeof suffix, "metrics/coordinators/%s", f->name);
    f->opt = malloc(METRICS_OPT_MAX_BYTES);
    int call_ms = f->cfg.interval_ms < 2000 ? (int)f->cfg.interval_ms : 2000;
    coord_etcd_config_t ec = {.endpoints = cfg->etcd_endpoints,
                              .n_endpoints = cfg->n_etcd,
                              .timeout_ms = call_ms,
                              .connect_timeout_ms = call_ms};
    f->etcd = f->opt ? coord_etcd_new(&ec) : NULL;
    if (!f->etcd || coord_cluster_key(f->reg_key, sizeof f->reg_key, f->cluster, suffix) < 0 ||
        coord_cluster_key(f->tiers_prefix, sizeof f->tiers_prefix, f->cluster, "tiers/") < 0 ||
        coord_cluster_key(f->coords_prefix, sizeof f->coords_prefix, f->cluster,
                          "metrics/coordinators/") < 0 ||
        coord_cluster_key(f->opt_key, sizeof f->opt_key, f->cluster, "optimizer") < 0 ||
        coord_cluster_key(f->events_key, sizeof f->events_key, f->cluster, "events") < 0) {
        bus_error(S_COMP, "cannot start (no etcd handle, or names too long)");
        s_destroy(&f);
    }
    return f;
}

static void s_actor(zsock_t *pipe, void *args)
{
    s_feed_t *f = s_new(args);
    if (bus_actor_ready(pipe, f != NULL) < 0)
        return;
    zpoller_t *poller = zpoller_new(pipe, NULL);
    int64_t next = 0;
    while (poller) {
        int64_t now = zclock_mono();
        if (now >= next) {
            s_round(f, pipe);
            next = zclock_mono() + f->cfg.interval_ms;
            continue;
        }
        if (zpoller_wait(poller, (int)(next - now)) == pipe) {
            char *cmd = NULL, *rec = NULL;
            if (zsock_recv(pipe, "ss", &cmd, &rec) < 0 || !cmd || strcmp(cmd, "$TERM") == 0) {
                zstr_free(&cmd);
                zstr_free(&rec);
                break;
            }
            if (strcmp(cmd, "EVENTS") == 0 && rec && strlen(rec) < sizeof f->events) {
                if (rec[0]) {
                    snprintf(f->events, sizeof f->events, "%s", rec);
                    f->events_pending = true;
                    f->events_withdraw = false;
                } else {
                    f->events_withdraw = f->events[0] != '\0';
                }
                next = 0; /* now, not at the next round */
            }
            zstr_free(&cmd);
            zstr_free(&rec);
        } else if (zpoller_terminated(poller)) {
            break;
        }
    }
    zpoller_destroy(&poller);
    s_destroy(&f);
}

zactor_t *coord_metrics_feed_new(const coord_metrics_feed_config_t *cfg)
{
    return cfg && cfg->n_etcd && cfg->cluster && cfg->name && cfg->address
               ? bus_actor_new(s_actor, (void *)cfg)
               : NULL;
}

int coord_metrics_feed_events(zactor_t *feed, const char *record)
{
    if (!feed || (record && strlen(record) >= 1024))
        return -1;
    return zstr_sendx(feed, "EVENTS", record ? record : "", NULL);
}

void coord_metrics_feed_destroy(zactor_t **pa)
{
    zactor_destroy(pa);
}
