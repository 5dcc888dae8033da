/* cli_cmds.c — the small CLI commands: status, lookup, put, get, deployment, keygen.
 * Each runs one short session with the service through libkvtier and prints what a
 * person (or a script: stable "key value" lines) needs. */
#include "bus_client.h"
#include "bus_token_mac.h"
#include "cli_common.h"
#include "cli_trace.h"

#include "coord_config.h"
#include "coord_etcd.h"
#include "bus_owner.h"
#include "tier_host.h"

#include <errno.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>
#include <czmq.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Tries to read every counter while the list keeps growing (tiers joining). */
#define S_STATS_TRIES 4
#define S_WAIT_MS 30000
#define S_MAX_LOOKUP_TOKENS (1u << 24)

/* ---- status ---------------------------------------------------------------- */

enum { S_OPT_CHECK = CLI_OPT_FIRST_COMMAND_OPT, S_OPT_INSTANCE };

typedef struct {
    bool check;
    const char *instance; /* also print this instance's counters (quotas among them) */
} s_status_args_t;

static int s_status_opt(void *ctx, int opt, const char *arg)
{
    s_status_args_t *a = ctx;
    if (opt == S_OPT_CHECK)
        a->check = true;
    else if (opt == S_OPT_INSTANCE && arg && arg[0])
        a->instance = arg;
    else
        return -1;
    return 0;
}

static bool s_stat(const kvt_stat_t *st, uint32_t n, const char *name, uint64_t *v)
{
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(st[i].name, name)) {
            *v = st[i].value;
            return true;
        }
    return false;
}

static void s_print_size(FILE *out, uint64_t bytes)
{
    if (bytes >= (1ull << 30) && bytes % (1ull << 30) == 0)
        fprintf(out, "%llu GiB", (unsigned long long)(bytes >> 30));
    else if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0)
        fprintf(out, "%llu MiB", (unsigned long long)(bytes >> 20));
    else if (bytes >= 1024 && bytes % 1024 == 0)
        fprintf(out, "%llu KiB", (unsigned long long)(bytes >> 10));
    else
        fprintf(out, "%llu B", (unsigned long long)bytes);
}

static void s_print_tiers(const kvt_cluster_info_t *ci)
{
    if (ci->total_tiers > ci->n_tiers)
        printf("tiers        %u (%u listed: a ClusterInfo reply holds at most %u)\n",
               ci->total_tiers, ci->n_tiers, KVT_MAX_TIERS);
    else
        printf("tiers        %u\n", ci->n_tiers);
    for (uint32_t i = 0; i < ci->n_tiers && i < KVT_MAX_TIERS; i++) {
        const kvt_tier_info_t *t = &ci->tiers[i];
        double pct = t->capacity ? 100.0 * (double)t->used / (double)t->capacity : 0.0;
        printf("tier %u %s: kind %s, %s, endpoint %s, fill %llu/%llu slots (%.1f%%), slot ",
               t->tier_id, t->name, t->kind, t->up ? "up" : "DOWN", t->endpoint,
               (unsigned long long)t->used, (unsigned long long)t->capacity, pct);
        s_print_size(stdout, t->slot_size);
        if (t->drain == KVT_TIER_DRAINING)
            printf(", draining (kvtier drain: no new blocks, its blocks move down)");
        else if (t->drain == KVT_TIER_RETIRED)
            printf(", retired (kvtier drain: empty, nothing placed on it until --cancel)");
        if (t->pool[0])
            printf(", member of pool %s", t->pool);
        printf("\n");
    }
    /* pools (issue 9 §3): each with its members and their fill, summed (the
     * stats' pool.<name>.* counters include pools without a member) */
    for (uint32_t i = 0; i < ci->n_tiers && i < KVT_MAX_TIERS; i++) {
        const char *pool = ci->tiers[i].pool;
        bool seen = !pool[0];
        for (uint32_t j = 0; j < i && !seen; j++)
            seen = strcmp(ci->tiers[j].pool, pool) == 0;
        if (seen)
            continue;
        unsigned long long used = 0, cap = 0;
        uint32_t n = 0, up = 0;
        for (uint32_t j = i; j < ci->n_tiers && j < KVT_MAX_TIERS; j++)
            if (strcmp(ci->tiers[j].pool, pool) == 0) {
                n++;
                up += ci->tiers[j].up;
                used += ci->tiers[j].used;
                cap += ci->tiers[j].capacity;
            }
        printf("pool %s: %u members (%u up), fill %llu/%llu slots (%.1f%%):", pool, n, up, used,
               cap, cap ? 100.0 * (double)used / (double)cap : 0.0);
        for (uint32_t j = i; j < ci->n_tiers && j < KVT_MAX_TIERS; j++)
            if (strcmp(ci->tiers[j].pool, pool) == 0)
                printf(" %s %llu/%llu", ci->tiers[j].name, (unsigned long long)ci->tiers[j].used,
                       (unsigned long long)ci->tiers[j].capacity);
        printf("\n");
    }
}

/* The coordinator list this command was given (--coordinator, -c's coordinators,
 * $KVTIER_COORDINATOR), as cli_connect chose it; NULL when it found the leader
 * through etcd. */
static const char *s_coordinator_list(const cli_common_t *o)
{
    const char *env = getenv("KVTIER_COORDINATOR");
    if (o->coordinator)
        return o->coordinator;
    if (o->config)
        return o->cfg_endpoint;
    if (o->etcd)
        return NULL;
    return env && env[0] ? env : getenv("KVTIER_ETCD") ? NULL : CLI_DEFAULT_COORDINATOR;
}

/* Asks the coordinator at EP for ClusterInfo itself (no redirect followed): its
 * role is leader when it names itself, standby when it names another. */
static void s_print_coordinator(const cli_common_t *o, bus_curve_client_t *keys, bool curve,
                                const char *ep, const kvt_cluster_info_t *ci)
{
    bus_client_config_t bc = {.name = "kvtier-status",
                              .default_timeout_ms = o->timeout_ms ? o->timeout_ms : 2000,
                              .curve = curve ? keys : NULL};
    kvtier_Envelope *req = calloc(1, sizeof *req), *rep = calloc(1, sizeof *rep);
    bus_client_t *cl = req && rep ? bus_client_new(ep, &bc) : NULL;
    kvtier_Status st = {0};
    int rc = -1;
    if (cl) {
        bus_env_init(req, kvtier_Envelope_cluster_info_req_tag, "kvtier-status");
        uint32_t wait = o->timeout_ms && o->timeout_ms < 2000 ? o->timeout_ms : 2000;
        rc = bus_client_call(cl, req, NULL, NULL, 0, wait, rep, NULL, NULL, &st);
    }
    if (rc == 0) {
        const kvtier_ClusterInfoReply *r = &rep->body.cluster_info_rep;
        bool leads = r->leader_endpoint[0] && strcmp(r->leader_endpoint, ep) == 0;
        printf("coordinator  %s %s: %s (epoch %llu)", rep->sender[0] ? rep->sender : "?", ep,
               leads ? "leader" : "standby", (unsigned long long)r->leader_epoch);
        if (!leads)
            printf(", leader %s", r->leader_endpoint[0] ? r->leader_endpoint : "none known");
        if (r->resigning)
            printf(", resigning (kvtier leader resign: no new windows)");
        if (strcmp(r->cluster, ci->cluster) != 0)
            printf(", OTHER CLUSTER %s", r->cluster);
        printf("\n");
    } else {
        printf("coordinator  ? %s: unreachable (%s)\n", ep,
               cl ? (st.message[0] ? st.message : "no answer") : "cannot open a socket");
    }
    bus_client_destroy(&cl);
    free(req);
    free(rep);
}

typedef struct {
    char *buf;
    size_t cap, off;
} s_join_t;

/* Appends a registered coordinator's endpoint (the value of its etcd key). */
static int s_join_endpoint(const coord_etcd_kv_t *kv, void *arg)
{
    s_join_t *j = arg;
    int n = snprintf(j->buf + j->off, j->cap - j->off, "%s%.*s", j->off ? "," : "",
                     (int)kv->value_len, (const char *)kv->value);
    if (n < 0 || (size_t)n >= j->cap - j->off)
        return 1; /* full: the ones joined so far */
    j->off += (size_t)n;
    return 0;
}

/* The advertised endpoints of the coordinators registered in etcd right now
 * (/kvtier/<cluster>/coordinators/<name>, under each one's lease) into BUF. */
static int s_etcd_coordinators(const cli_common_t *o, const char *cluster, char *buf, size_t cap)
{
    char prefix[COORD_ETCD_KEY_MAX];
    coord_etcd_t *e = cli_etcd_open(o, 2000);
    s_join_t j = {buf, cap, 0};
    buf[0] = '\0';
    int rc = e && coord_cluster_key(prefix, sizeof prefix, cluster, "coordinators/") == 0
                 ? coord_etcd_range(e, prefix, NULL, s_join_endpoint, &j, NULL)
                 : -EINVAL;
    coord_etcd_destroy(&e);
    return rc < 0 || !buf[0] ? -1 : 0;
}

/* --check with --etcd (the flag, not $KVTIER_ETCD: an explicit claim): the leader answering was
 * elected by that etcd, not by another deployment's of the same cluster name
 * (ClusterInfo.etcd_cluster_id against the id in etcd's own answer). 0 (also when
 * there is nothing to compare), or -1 with the reason printed. */
static int s_check_etcd(const cli_common_t *o, const kvt_cluster_info_t *ci)
{
    if (!ci->etcd_cluster_id || !o->etcd)
        return 0; /* a coordinator that does not say (a standby, an older one), or no etcd given */
    coord_etcd_t *e = cli_etcd_open(o, 2000);
    if (!e) {
        fprintf(stderr, "kvtier status: --etcd %s: no usable etcd URL to check the leader against\n",
                o->etcd);
        return -1;
    }
    char key[COORD_ETCD_KEY_MAX];
    int rc = coord_cluster_key(key, sizeof key, ci->cluster, "leader");
    if (rc == 0) {
        rc = coord_etcd_get(e, key, NULL, 0, NULL, NULL);
        rc = rc == -ENOENT ? 0 : rc; /* any answer carries the id */
    }
    uint64_t id = coord_etcd_cluster_id(e);
    if (rc < 0 || !id) {
        fprintf(stderr, "kvtier status: cannot read etcd to check the leader: %s\n",
                coord_etcd_last_error(e));
        coord_etcd_destroy(&e);
        return -1;
    }
    coord_etcd_destroy(&e);
    if (id == ci->etcd_cluster_id)
        return 0;
    fprintf(stderr,
            "kvtier status: the coordinator at %s was elected by etcd cluster %016" PRIx64
            ", not by the etcd given (%s, cluster %016" PRIx64
            "): another deployment of cluster \"%s\" holds this endpoint\n",
            ci->leader_endpoint[0] ? ci->leader_endpoint : "(none)", ci->etcd_cluster_id,
            o->etcd, id, ci->cluster);
    return -1;
}

/* Every coordinator of the list (or, found through etcd, every one registered
 * there) with its role (issue 9 §1). */
static void s_print_coordinators(cli_common_t *o, const kvt_cluster_info_t *ci)
{
    const char *list = s_coordinator_list(o);
    bool curve = false;
    bus_curve_client_t keys;
    char buf[2048];
    if ((!list || strchr(list, '*')) && s_etcd_coordinators(o, ci->cluster, buf, sizeof buf) < 0) {
        printf("coordinators (none listed, none read from etcd: give --etcd URLS)\n");
        return;
    }
    if (list && !strchr(list, '*'))
        snprintf(buf, sizeof buf, "%s", list);
    if (cli_curve_keys(o, &curve, &keys) < 0)
        return;
    uint32_t n = 0;
    for (const char *p = buf; *p; p++)
        n += *p == ',';
    printf("coordinators %u\n", n + 1);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        s_print_coordinator(o, &keys, curve, t, ci);
}

/* Every counter of the scheduler (or of one instance), however many pages they
 * take: *st (the caller frees it) grows to the total kvt_stats_page reports. 0 with
 * *n < *total only when the list kept growing on every try. */
static int s_all_stats(kvt_client_t *c, const char *instance, kvt_stat_t **st, uint32_t *n,
                       uint32_t *total)
{
    uint32_t cap = KVT_STATS_PAGE;
    for (int i = 0; i < S_STATS_TRIES; i++) {
        kvt_stat_t *grown = realloc(*st, (size_t)cap * sizeof *grown);
        if (!grown) {
            fprintf(stderr, "kvtier status: no memory for %u counters\n", cap);
            return -KVT_INTERNAL;
        }
        *st = grown;
        int rc = kvt_stats_page(c, instance, 0, *st, cap, n, total);
        if (rc < 0 || *total <= *n)
            return rc;
        cap = *total;
    }
    return 0;
}

/* Counter names of the scheduler (actors/sched_actor.c, StatsReply). */
static void s_print_stats(const kvt_stat_t *st, uint32_t n, uint32_t total)
{
    uint64_t hits = 0, keys = 0, blocks = 0;
    if (s_stat(st, n, "blocks", &blocks))
        printf("blocks       %llu\n", (unsigned long long)blocks);
    if (s_stat(st, n, "hits", &hits) && s_stat(st, n, "lookup_keys", &keys))
        printf("hit rate     %.1f%% (%llu of %llu looked-up blocks)\n",
               keys ? 100.0 * (double)hits / (double)keys : 0.0, (unsigned long long)hits,
               (unsigned long long)keys);
    if (total > n)
        printf("counters     %u (%u shown: the list grew while it was read)\n", total, n);
    else
        printf("counters     %u\n", n);
    for (uint32_t i = 0; i < n; i++)
        printf("  %-28s %llu\n", st[i].name, (unsigned long long)st[i].value);
}

/* The live optimizer's figures (docs/OPTIMIZER.md "Live"), read from etcd when this
 * command knows it (--etcd or $KVTIER_ETCD): the same three numbers as the metrics
 * and the status page. */
static void s_print_optimizer(const cli_common_t *o, const char *cluster)
{
    coord_etcd_t *e = cli_etcd_open(o, 2000);
    if (!e) {
        printf("optimizer    (its figures are in etcd: give --etcd URLS or $KVTIER_ETCD)\n");
        return;
    }
    char key[COORD_ETCD_KEY_MAX];
    char *val = malloc(65536);
    size_t len = 0;
    int rc = e && val && coord_cluster_key(key, sizeof key, cluster, "optimizer") == 0
                 ? coord_etcd_get(e, key, val, 65535, &len, NULL)
                 : -EINVAL;
    json_t *j = rc == 0 ? json_loadb(val, len, 0, NULL) : NULL;
    json_t *live = json_object_get(j, "live_hit_rate"), *lru = json_object_get(j, "lru_hit_rate"),
           *bel = json_object_get(j, "belady_hit_rate"),
           *cap = json_object_get(j, "capacity_blocks"),
           *reqs = json_object_get(j, "window_requests"), *ts = json_object_get(j, "ts_ms"),
           *last = json_object_get(j, "last_event_ms");
    if (rc == -ENOENT)
        printf("optimizer    no figures yet (optimizer.enabled, events on)\n");
    else if (rc < 0)
        printf("optimizer    etcd: %s\n", e ? coord_etcd_last_error(e) : "bad URLs");
    else if (!json_is_number(live) || !json_is_number(lru) || !json_is_number(bel) ||
             !json_is_integer(cap) || !json_is_integer(reqs) || !json_is_integer(ts))
        printf("optimizer    a record that is not the optimizer's (%s)\n", key);
    else {
        printf("optimizer    live %.2f%%, lru %.2f%%, belady reference %.2f%% at %lld blocks, "
               "over the last %lld lookups (retrospective, %.0f s old",
               100 * json_number_value(live), 100 * json_number_value(lru),
               100 * json_number_value(bel), (long long)json_integer_value(cap),
               (long long)json_integer_value(reqs),
               (double)(zclock_time() - json_integer_value(ts)) / 1000.0);
        /* the window stops moving when the optimizer hears nothing: say since when */
        if (json_is_integer(last) && json_integer_value(last) > 0)
            printf("; last event %.0f s ago",
                   (double)(zclock_time() - json_integer_value(last)) / 1000.0);
        printf(")\n");
    }
    json_decref(j);
    free(val);
    coord_etcd_destroy(&e);
}

int cli_cmd_status(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_COMMON_LONGOPTS,
        {"check", no_argument, NULL, S_OPT_CHECK},
        {"instance-stats", required_argument, NULL, S_OPT_INSTANCE},
        {0, 0, 0, 0}};
    cli_common_t o;
    s_status_args_t a = {0};
    cli_common_init(&o);
    int first = cli_parse(argc, argv, "c:", longopts, &o, s_status_opt, &a);
    if (first < 0 || o.help || first != argc) {
        fprintf(o.help ? stdout : stderr,
                "usage: kvtier status [--check] [--instance-stats ID] [connection flags]\n"
                "  --check              exit 1 unless a leader answers, every tier is up and\n"
                "                       the cluster is the one named (--cluster, -c FILE);\n"
                "                       with --etcd URLS, also elected by that etcd\n"
                "  --instance-stats ID  also the counters of instance ID (its quota usage\n"
                "                       among them)\n" CLI_COMMON_USAGE);
        return o.help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    kvt_client_t *c = cli_connect(&o, "kvtier-status");
    if (!c)
        return CLI_EXIT_FAIL;
    int status = CLI_EXIT_FAIL;
    kvt_cluster_info_t *ci = calloc(1, sizeof *ci);
    kvt_stat_t *st = NULL;
    uint32_t n_st = 0, total = 0;
    if (!ci)
        goto out;
    int rc = kvt_cluster_info(c, ci);
    if (rc < 0) {
        cli_report_error("status", "cluster info", c, rc);
        goto out;
    }
    printf("cluster      %s\n", ci->cluster);
    printf("leader       %s (epoch %llu)%s\n",
           ci->leader_endpoint[0] ? ci->leader_endpoint : "none",
           (unsigned long long)ci->leader_epoch,
           ci->resigning ? ", resigning: handing over to a standby (kvtier leader resign)" : "");
    s_print_coordinators(&o, ci);
    printf("events       %s\n", ci->event_endpoint[0] ? ci->event_endpoint : "off");
    printf("replay       %s\n", ci->event_replay_endpoint[0] ? ci->event_replay_endpoint : "off");
    printf("vllm-events  %s (replay %s)\n",
           ci->vllm_event_endpoint[0] ? ci->vllm_event_endpoint : "off",
           ci->vllm_replay_endpoint[0] ? ci->vllm_replay_endpoint : "off");
    s_print_optimizer(&o, ci->cluster);
    s_print_tiers(ci);
    rc = s_all_stats(c, NULL, &st, &n_st, &total);
    if (rc < 0) {
        cli_report_error("status", "stats", c, rc);
        goto out;
    }
    s_print_stats(st, n_st, total);
    if (a.instance) {
        rc = s_all_stats(c, a.instance, &st, &n_st, &total);
        if (rc < 0) {
            cli_report_error("status", "instance stats", c, rc);
            goto out;
        }
        printf("instance     %s\n", a.instance);
        s_print_stats(st, n_st, total);
    }
    status = CLI_EXIT_OK;
    if (a.check) {
        bool all_up = ci->n_tiers > 0 && ci->leader_endpoint[0] && ci->total_tiers <= ci->n_tiers;
        for (uint32_t i = 0; i < ci->n_tiers && i < KVT_MAX_TIERS; i++)
            all_up = all_up && ci->tiers[i].up;
        if (!all_up) {
            fprintf(stderr, "kvtier status: not ready (no leader, no tiers or a tier down)\n");
            status = CLI_EXIT_FAIL;
        }
        /* the cluster asked for (--cluster, or the deployment file's): a coordinator of
         * another deployment answering at this endpoint is not this one being ready */
        const char *want = o.cluster ? o.cluster : o.cfg_cluster[0] ? o.cfg_cluster : NULL;
        if (want && strcmp(want, ci->cluster) != 0) {
            fprintf(stderr,
                    "kvtier status: the coordinator at %s belongs to cluster \"%s\", not "
                    "\"%s\": another deployment holds this endpoint\n",
                    ci->leader_endpoint[0] ? ci->leader_endpoint : "(none)", ci->cluster, want);
            status = CLI_EXIT_FAIL;
        }
        if (s_check_etcd(&o, ci) < 0)
            status = CLI_EXIT_FAIL;
    }
out:
    free(st);
    free(ci);
    kvt_close(&c);
    return status;
}

/* ---- key operands ----------------------------------------------------------- */

/* Comma- or space-separated uint32 token ids; a count or -1. */
static long s_parse_tokens(const char *text, uint32_t *out, size_t cap)
{
    size_t n = 0;
    const char *p = text;
    while (*p) {
        while (*p == ',' || *p == ' ')
            p++;
        if (!*p)
            break;
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p || errno || v > UINT32_MAX || *p == '-' || n == cap)
            return -1;
        out[n++] = (uint32_t)v;
        p = end;
        if (*p && *p != ',' && *p != ' ')
            return -1;
    }
    return (long)n;
}

/* ---- lookup ---------------------------------------------------------------- */

enum { S_OPT_MODE = CLI_OPT_FIRST_COMMAND_OPT, S_OPT_WINDOW, S_OPT_TOKENS };

typedef struct {
    kvt_lookup_mode_t mode;
    uint32_t window;
    const char *tokens;
} s_lookup_args_t;

static int s_lookup_opt(void *ctx, int opt, const char *arg)
{
    s_lookup_args_t *a = ctx;
    uint64_t v = 0;
    switch (opt) {
    case S_OPT_MODE:
        if (!strcmp(arg, "prefix"))
            a->mode = KVT_LOOKUP_PREFIX;
        else if (!strcmp(arg, "reverse"))
            a->mode = KVT_LOOKUP_REVERSE;
        else if (!strcmp(arg, "per-key"))
            a->mode = KVT_LOOKUP_PER_KEY;
        else {
            fprintf(stderr, "kvtier lookup: --mode: expected prefix, reverse or per-key\n");
            return -1;
        }
        return 0;
    case S_OPT_WINDOW:
        if (cli_parse_u64("--window", arg, 1, KVT_MAX_KEYS, &v) < 0)
            return -1;
        a->window = (uint32_t)v;
        return 0;
    case S_OPT_TOKENS:
        a->tokens = arg;
        return 0;
    default:
        return -1;
    }
}

/* Keys from hex operands or from --tokens; count or -1 (message printed). */
static long s_lookup_keys(const s_lookup_args_t *a, const cli_common_t *o, char **operands,
                          int n_operands, kvt_key_t *keys)
{
    if (a->tokens) {
        uint32_t *tokens = malloc(S_MAX_LOOKUP_TOKENS * sizeof *tokens);
        long nt = tokens ? s_parse_tokens(a->tokens, tokens, S_MAX_LOOKUP_TOKENS) : -1;
        int nk = nt >= 0 ? kvt_block_keys(tokens, (size_t)nt, o->tokens_per_block, NULL, keys,
                                          KVT_MAX_KEYS)
                         : -1;
        free(tokens);
        if (nt < 0 || nk < 0 || nk > KVT_MAX_KEYS) {
            fprintf(stderr,
                    "kvtier lookup: --tokens: expected comma-separated token ids "
                    "(at most %u blocks)\n",
                    (unsigned)KVT_MAX_KEYS);
            return -1;
        }
        return nk;
    }
    if (n_operands > KVT_MAX_KEYS)
        return -1;
    for (int i = 0; i < n_operands; i++)
        if (cli_key_parse_hex(operands[i], &keys[i]) < 0) {
            fprintf(stderr, "kvtier lookup: \"%s\" is not a key (32 hex digits)\n", operands[i]);
            return -1;
        }
    return n_operands;
}

static void s_print_lookup(const kvt_key_t *keys, uint32_t n, const kvt_lookup_result_t *r)
{
    for (uint32_t i = 0; i < n; i++) {
        char hex[2 * KVT_KEY_BYTES + 1];
        cli_key_format_hex(&keys[i], hex);
        if (r->hit[i])
            printf("%s hit tier %u\n", hex, r->tier_ids[i]);
        else
            printf("%s miss\n", hex);
    }
    printf("hits %u of %u\n", r->hit_count, n);
}

int cli_cmd_lookup(int argc, char **argv)
{
    static const struct option longopts[] = {CLI_COMMON_LONGOPTS,
                                             {"mode", required_argument, NULL, S_OPT_MODE},
                                             {"window", required_argument, NULL, S_OPT_WINDOW},
                                             {"tokens", required_argument, NULL, S_OPT_TOKENS},
                                             {0, 0, 0, 0}};
    cli_common_t o;
    s_lookup_args_t a = {.mode = KVT_LOOKUP_PREFIX, .window = 1};
    cli_common_init(&o);
    int first = cli_parse(argc, argv, "c:", longopts, &o, s_lookup_opt, &a);
    if (first < 0 || o.help || (first == argc) == !a.tokens) {
        fprintf(o.help ? stdout : stderr,
                "usage: kvtier lookup [--mode prefix|reverse|per-key] [--window N] "
                "(KEYHEX... | --tokens ID,ID,...)\n"
                "  keys are 32 hex digits; --tokens derives them with kvt_block_keys "
                "(--tokens-per-block)\n" CLI_COMMON_USAGE);
        return o.help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    int status = CLI_EXIT_FAIL;
    kvt_client_t *c = NULL;
    kvt_key_t *keys = calloc(KVT_MAX_KEYS, sizeof *keys);
    bool *hit = calloc(KVT_MAX_KEYS, sizeof *hit);
    uint32_t *tiers = calloc(KVT_MAX_KEYS, sizeof *tiers);
    if (!keys || !hit || !tiers)
        goto out;
    long n = s_lookup_keys(&a, &o, argv + first, argc - first, keys);
    if (n < 0) {
        status = CLI_EXIT_USAGE;
        goto out;
    }
    c = cli_connect(&o, "kvtier-lookup");
    if (!c)
        goto out;
    kvt_lookup_result_t r = {.hit = hit, .tier_ids = tiers};
    int rc = kvt_lookup(c, o.instance, NULL, a.mode, a.window, keys, (uint32_t)n, &r);
    /* An instance nobody registered yet: register it (nothing can hit) and ask again,
     * so the answer is a plain miss. Registering first could conflict with the spec
     * of an existing instance when only the lookup flags differ. */
    if (rc == -KVT_NOT_FOUND) {
        if (cli_register(c, &o) < 0)
            goto out;
        rc = kvt_lookup(c, o.instance, NULL, a.mode, a.window, keys, (uint32_t)n, &r);
    }
    if (rc < 0) {
        cli_report_error("lookup", "lookup", c, rc);
        goto out;
    }
    s_print_lookup(keys, (uint32_t)n, &r);
    status = CLI_EXIT_OK;
out:
    kvt_close(&c);
    free(tiers);
    free(hit);
    free(keys);
    return status;
}

/* ---- put / get ---------------------------------------------------------------- */

/* Exit statuses of get beyond the common ones. */
#define S_EXIT_NOT_FOUND 3
#define S_EXIT_VERIFY 4

enum {
    S_OPT_KEY = CLI_OPT_FIRST_COMMAND_OPT,
    S_OPT_FILE,
    S_OPT_OUT,
    S_OPT_PATTERN,
    S_OPT_VERIFY,
    S_OPT_KEYS,
};

typedef struct {
    kvt_key_t key;
    bool have_key;
    const char *file; /* put: source; get: destination */
    bool pattern;     /* put: key-derived bytes; get: verify them */
    const char *keys; /* get --keys: a file of keys, one a line */
} s_block_args_t;

static int s_block_opt(void *ctx, int opt, const char *arg)
{
    s_block_args_t *a = ctx;
    switch (opt) {
    case S_OPT_KEY:
        if (cli_key_parse_hex(arg, &a->key) < 0) {
            fprintf(stderr, "kvtier: --key: \"%s\" is not a key (32 hex digits)\n", arg);
            return -1;
        }
        a->have_key = true;
        return 0;
    case S_OPT_FILE:
    case S_OPT_OUT:
        a->file = arg;
        return 0;
    case S_OPT_PATTERN:
    case S_OPT_VERIFY:
        a->pattern = true;
        return 0;
    case S_OPT_KEYS:
        a->keys = arg;
        return 0;
    default:
        return -1;
    }
}

/* Reads exactly LEN bytes of PATH into BUF. */
static int s_read_block(const char *path, void *buf, uint64_t len)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        fprintf(stderr, "kvtier put: --file %s: %s, not a file holding one block\n", path,
                S_ISDIR(st.st_mode) ? "a directory" : "not a regular file");
        return -1;
    }
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "kvtier put: --file %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t got = fread(buf, 1, len, fp);
    int extra = fgetc(fp);
    fclose(fp);
    if (got != len || extra != EOF) {
        fprintf(stderr,
                "kvtier put: %s is %s %llu bytes, the instance's block size "
                "(--block-size)\n",
                path, got < len ? "shorter than" : "longer than", (unsigned long long)len);
        return -1;
    }
    return 0;
}

static int s_write_block(const char *path, const void *buf, uint64_t len)
{
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(buf, 1, len, fp) != len || fclose(fp) != 0) {
        fprintf(stderr, "kvtier get: %s: %s\n", path, strerror(errno));
        if (fp)
            fclose(fp);
        return -1;
    }
    return 0;
}

/* Runs one data job and reports its outcome; 0 when every key moved. */
static int s_run_job(kvt_client_t *c, const char *cmd, bool put, kvt_token_t *tok, void *buf,
                     uint64_t len)
{
    static uint64_t job;
    job++;
    void *bufs[1] = {buf};
    int rc = put ? kvt_submit_put(c, job, tok, (const void *const *)bufs, len)
                 : kvt_submit_get(c, job, tok, bufs, len);
    if (rc < 0) {
        cli_report_error(cmd, put ? "submit put" : "submit get", c, rc);
        return rc;
    }
    kvt_job_result_t res;
    rc = kvt_wait(c, &job, 1, S_WAIT_MS, &res);
    if (rc < 0) {
        cli_report_error(cmd, "wait", c, rc);
        return rc;
    }
    if (res.status < 0 || res.n_failed) {
        /* the job's own message names the cause (a tier's "slot N failed its
         * checksum ..." for a damaged block) */
        fprintf(stderr, "kvtier %s: transfer failed: %s (%u of %u keys failed): %s\n", cmd,
                kvt_status_name(res.status), res.n_failed, res.n_keys, kvt_last_error(c));
        return res.status < 0 ? res.status : -KVT_INTERNAL;
    }
    return 0;
}

/* The usage of put and get, which differ only in the data flags. */
static int s_block_usage(bool put, bool help)
{
    fprintf(help ? stdout : stderr,
            put ? "usage: kvtier put --key HEX (--file F | --pattern)\n"
                  "  --file F   the block's bytes (exactly --block-size bytes)\n"
                  "  --pattern  bytes derived from the key (as replay writes them)\n"
                : "usage: kvtier get --key HEX (--out F | --verify)\n"
                  "       kvtier get --keys FILE --verify\n"
                  "  --out F    write the block's bytes to F\n"
                  "  --verify   check the bytes against the key-derived pattern (exit 4 if "
                  "they differ)\n"
                  "  --keys FILE  every key of FILE (one a line, 32 hex digits; - for stdin),\n"
                  "             64 to a window: a line per key not served as stored (missing,\n"
                  "             wrong, failed KEY), then the counts\n"
                  "  exit 3 when a key is not cached\n");
    fputs(CLI_COMMON_USAGE, help ? stdout : stderr);
    return help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}

/* A session around one block: begin, prepare, move, complete, end. */
static int s_block_session(kvt_client_t *c, const cli_common_t *o, const s_block_args_t *a,
                           bool put, void *buf)
{
    const char *cmd = put ? "put" : "get";
    char rid[96];
    cli_request_id(rid, sizeof rid, cmd);
    kvt_request_t req = {.instance_id = o->instance, .request_id = rid, .total_blocks = 1};
    int rc = kvt_request_begin(c, &req);
    if (rc < 0) {
        cli_report_error(cmd, "request begin", c, rc);
        return CLI_EXIT_FAIL;
    }
    int status = CLI_EXIT_FAIL;
    kvt_token_t *tok = NULL;
    rc = put ? kvt_prepare_put(c, o->instance, rid, &a->key, 1, &tok)
             : kvt_prepare_get(c, o->instance, rid, &a->key, 1, &tok);
    if (rc == -KVT_NOT_FOUND || (rc == 0 && kvt_token_count(tok) == 0)) {
        printf(put ? "already stored\n" : "not found\n");
        status = put ? CLI_EXIT_OK : S_EXIT_NOT_FOUND;
        goto out_complete;
    }
    if (rc < 0) {
        cli_report_error(cmd, put ? "prepare put" : "prepare get", c, rc);
        goto out_end;
    }
    uint32_t tier = kvt_token_tier(tok, 0);
    if (s_run_job(c, cmd, put, tok, buf, o->block_size) < 0)
        goto out_complete;
    status = CLI_EXIT_OK;
    printf("%s %llu bytes %s tier %u\n", put ? "stored" : "loaded",
           (unsigned long long)o->block_size, put ? "on" : "from", tier);
out_complete:
    if (tok) {
        rc = put ? kvt_complete_put(c, &tok, NULL) : kvt_complete_get(c, &tok, NULL);
        if (rc < 0) {
            cli_report_error(cmd, put ? "complete put" : "complete get", c, rc);
            status = CLI_EXIT_FAIL;
        }
    }
out_end:
    rc = kvt_request_end(c, o->instance, rid, NULL);
    if (rc < 0)
        cli_report_error(cmd, "request end", c, rc);
    return status;
}

/* ---- get --keys FILE: many keys, each checked ---------------------------------- */

#define S_KEYS_BATCH 64

typedef struct {
    uint64_t read, loaded, missing, wrong, failed;
} s_keys_counts_t;

/* Gets KEYS[0..N) in one window and checks each against its pattern; a window
 * refused NOT_FOUND (a key gone since the lookup: prepare_get is all or nothing)
 * is tried again one key at a time. */
static int s_keys_window(kvt_client_t *c, const cli_common_t *o, const char *rid,
                         const kvt_key_t *keys, uint32_t n, uint8_t *data, void **bufs,
                         s_keys_counts_t *k)
{
    char hex[2 * KVT_KEY_BYTES + 1];
    kvt_token_t *tok = NULL;
    int rc = kvt_prepare_get(c, o->instance, rid, keys, n, &tok);
    if (rc == -KVT_NOT_FOUND && n > 1) {
        for (uint32_t i = 0; i < n; i++)
            if (s_keys_window(c, o, rid, &keys[i], 1, data, bufs, k) < 0)
                return -1;
        return 0;
    }
    if (rc == -KVT_NOT_FOUND) {
        cli_key_format_hex(&keys[0], hex);
        printf("missing %s\n", hex);
        k->missing++;
        return 0;
    }
    if (rc < 0) {
        cli_report_error("get", "prepare get", c, rc);
        return -1;
    }
    static uint64_t job;
    job++;
    for (uint32_t i = 0; i < n; i++)
        bufs[i] = data + (size_t)i * o->block_size;
    kvt_job_result_t res = {0};
    rc = kvt_submit_get(c, job, tok, bufs, o->block_size);
    if (rc == 0)
        rc = kvt_wait(c, &job, 1, S_WAIT_MS, &res);
    bool moved = rc == 0 && res.status >= 0 && res.n_failed == 0;
    for (uint32_t i = 0; i < n; i++) {
        cli_key_format_hex(&keys[i], hex);
        if (!moved) {
            printf("failed %s\n", hex);
            k->failed++;
        } else if (!cli_block_verify(&keys[i], bufs[i], o->block_size)) {
            printf("wrong %s\n", hex);
            k->wrong++;
        } else {
            k->loaded++;
        }
    }
    if (!moved)
        fprintf(stderr, "kvtier get: a load of %u keys failed: %s: %s\n", n,
                kvt_status_name(rc < 0 ? rc : res.status), kvt_last_error(c));
    rc = kvt_complete_get(c, &tok, NULL);
    if (rc < 0) {
        cli_report_error("get", "complete get", c, rc);
        return -1;
    }
    return 0;
}

/* Reads PATH (one key a line: 32 hex digits; blank lines skipped) and loads every
 * key, checking its bytes: a line per key not served as stored ("missing KEY",
 * "wrong KEY", "failed KEY"), then the counts. */
static int s_get_keys(cli_common_t *o, const char *path)
{
    FILE *fp = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!fp) {
        fprintf(stderr, "kvtier get: --keys %s: %s\n", path, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    int status = CLI_EXIT_FAIL;
    kvt_key_t keys[S_KEYS_BATCH];
    void *bufs[S_KEYS_BATCH];
    uint8_t *data = malloc((size_t)S_KEYS_BATCH * o->block_size);
    kvt_client_t *c = NULL;
    s_keys_counts_t k = {0};
    char line[256], rid[96];
    bool begun = false;
    if (!data) {
        fprintf(stderr, "kvtier get: cannot allocate %d blocks of %llu bytes\n", S_KEYS_BATCH,
                (unsigned long long)o->block_size);
        goto out;
    }
    c = cli_connect(o, "kvtier-get");
    if (!c || cli_register(c, o) < 0)
        goto out;
    cli_request_id(rid, sizeof rid, "get-keys");
    kvt_request_t req = {.instance_id = o->instance, .request_id = rid};
    int rc = kvt_request_begin(c, &req);
    if (rc < 0) {
        cli_report_error("get", "request begin", c, rc);
        goto out;
    }
    begun = true;
    uint32_t n = 0;
    for (unsigned lineno = 1; fgets(line, sizeof line, fp); lineno++) {
        line[strcspn(line, " \t\r\n")] = '\0';
        if (!line[0])
            continue;
        if (cli_key_parse_hex(line, &keys[n]) < 0) {
            fprintf(stderr, "kvtier get: --keys %s line %u: \"%s\" is not a key (32 hex digits)\n",
                    path, lineno, line);
            goto out;
        }
        k.read++;
        if (++n == S_KEYS_BATCH) {
            if (s_keys_window(c, o, rid, keys, n, data, bufs, &k) < 0)
                goto out;
            n = 0;
        }
    }
    if (n && s_keys_window(c, o, rid, keys, n, data, bufs, &k) < 0)
        goto out;
    printf("keys: %llu read, %llu loaded and verified, %llu missing, %llu wrong bytes, "
           "%llu failed loads\n",
           (unsigned long long)k.read, (unsigned long long)k.loaded, (unsigned long long)k.missing,
           (unsigned long long)k.wrong, (unsigned long long)k.failed);
    status = k.wrong     ? S_EXIT_VERIFY
             : k.missing ? S_EXIT_NOT_FOUND
             : k.failed  ? CLI_EXIT_FAIL
                         : CLI_EXIT_OK;
out:
    if (begun && (rc = kvt_request_end(c, o->instance, rid, NULL)) < 0)
        cli_report_error("get", "request end", c, rc);
    kvt_close(&c);
    free(data);
    if (fp != stdin)
        fclose(fp);
    return status;
}

static int s_block_cmd(int argc, char **argv, bool put)
{
    static const struct option put_opts[] = {CLI_COMMON_LONGOPTS,
                                             {"key", required_argument, NULL, S_OPT_KEY},
                                             {"file", required_argument, NULL, S_OPT_FILE},
                                             {"pattern", no_argument, NULL, S_OPT_PATTERN},
                                             {0, 0, 0, 0}};
    static const struct option get_opts[] = {CLI_COMMON_LONGOPTS,
                                             {"key", required_argument, NULL, S_OPT_KEY},
                                             {"out", required_argument, NULL, S_OPT_OUT},
                                             {"verify", no_argument, NULL, S_OPT_VERIFY},
                                             {"keys", required_argument, NULL, S_OPT_KEYS},
                                             {0, 0, 0, 0}};
    cli_common_t o;
    s_block_args_t a = {0};
    cli_common_init(&o);
    int first = cli_parse(argc, argv, "c:", put ? put_opts : get_opts, &o, s_block_opt, &a);
    if (!put && first >= 0 && !o.help && a.keys) {
        if (first != argc || a.have_key || a.file || !a.pattern) {
            fprintf(stderr, "kvtier get: --keys FILE takes --verify and no --key or --out\n");
            return CLI_EXIT_USAGE;
        }
        return s_get_keys(&o, a.keys);
    }
    if (first < 0 || o.help || first != argc || !a.have_key || !a.file == !a.pattern)
        return s_block_usage(put, o.help);
    int status = CLI_EXIT_FAIL;
    kvt_client_t *c = NULL;
    void *buf = malloc(o.block_size);
    if (!buf) {
        fprintf(stderr, "kvtier: cannot allocate a %llu-byte block\n",
                (unsigned long long)o.block_size);
        return CLI_EXIT_FAIL;
    }
    if (put && a.pattern)
        cli_block_fill(&a.key, buf, o.block_size);
    else if (put && s_read_block(a.file, buf, o.block_size) < 0)
        goto out;
    c = cli_connect(&o, put ? "kvtier-put" : "kvtier-get");
    if (!c || cli_register(c, &o) < 0)
        goto out;
    status = s_block_session(c, &o, &a, put, buf);
    if (put || status != CLI_EXIT_OK)
        goto out;
    if (a.pattern && !cli_block_verify(&a.key, buf, o.block_size)) {
        fprintf(stderr, "kvtier get: verify FAILED: the bytes differ from the key's pattern\n");
        status = S_EXIT_VERIFY;
    } else if (a.pattern) {
        printf("verified\n");
    } else if (s_write_block(a.file, buf, o.block_size) < 0) {
        status = CLI_EXIT_FAIL;
    }
out:
    kvt_close(&c);
    free(buf);
    return status;
}

int cli_cmd_put(int argc, char **argv)
{
    return s_block_cmd(argc, argv, true);
}

int cli_cmd_get(int argc, char **argv)
{
    return s_block_cmd(argc, argv, false);
}

/* ---- deployment --------------------------------------------------------------- */

#define S_DASH(s) ((s)[0] ? (s) : "-") /* an empty field of a line, for `read` */

enum { D_OPT_CHECK_FREE = CLI_OPT_FIRST_COMMAND_OPT, D_OPT_HOST };

typedef struct {
    bool check_free;
    const char *host; /* --host: check only the processes of that host */
} s_deployment_args_t;

static int s_deployment_opt(void *ctx, int opt, const char *arg)
{
    s_deployment_args_t *a = ctx;
    if (opt == D_OPT_CHECK_FREE)
        a->check_free = true;
    else if (opt == D_OPT_HOST && arg && arg[0])
        a->host = arg;
    else
        return -1;
    return 0;
}

/* Does a process with host H (its "host", "" for none) run on HOST (NULL: all)? */
static bool s_on_host(const coord_config_t *cfg, const char *h, const char *host)
{
    const char *resolved = h[0] ? h : cfg->first_host;
    return !host || !resolved[0] || strcmp(resolved, host) == 0;
}

/* One address the deployment binds: in use by another process is reported. An
 * HTTP address ("IPV4:PORT", port 0 = any) is checked as tcp://IPV4:PORT. */
static int s_check_bind(const char *key, const char *addr, bool http)
{
    char ep[BUS_ENDPOINT_MAX + 8], who[BUS_OWNER_MAX];
    if (!addr[0])
        return 0;
    snprintf(ep, sizeof ep, "%s%s", http ? "tcp://" : "", addr);
    if (bus_owner_check_bind(ep, who, sizeof who) != -EADDRINUSE)
        return 0;
    fprintf(stderr, "kvtier deployment: %s %s is in use by %s\n", key, addr, who);
    return 1;
}

/* An advertised endpoint of a process of this host: peers connect there, so its host
 * must resolve (here: an error) and should be an address of this host. One no
 * interface here has (binding it fails EADDRNOTAVAIL) is only warned about: behind
 * NAT or a port mapping that is what "advertise" is for. Returns 1 when it does not
 * resolve. */
static int s_check_advertise(const char *key, const char *adv)
{
    bus_endpoint_t ep;
    if (!adv[0] || bus_endpoint_parse(adv, &ep, NULL, 0) < 0 || ep.transport != BUS_ENDPOINT_TCP ||
        ep.wildcard_host)
        return 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(ep.address, NULL, &hints, &res);
    if (rc != 0) {
        fprintf(stderr,
                "kvtier deployment: %s %s: host \"%s\" does not resolve here (%s): peers "
                "could not connect; advertise an address (tcp://A.B.C.D:PORT) or a name "
                "every host resolves\n",
                key, adv, ep.address, gai_strerror(rc));
        return 1;
    }
    bool local = false;
    for (const struct addrinfo *ai = res; ai && !local; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        local = bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno != EADDRNOTAVAIL;
        close(fd);
    }
    freeaddrinfo(res);
    if (!local)
        fprintf(stderr,
                "kvtier deployment: warning: %s %s: %s is not an address of this host: peers "
                "connecting there reach this process only through NAT or a port mapping\n",
                key, adv, ep.address);
    return 0;
}

/* --check-free: every fixed TCP address and shm name of CFG is free on this host
 * (issue 12 §8: a second deployment on the same ports or names, or any other
 * program there, is named before anything starts). Returns how many are not. */
static int s_check_free(const coord_config_t *cfg, const char *host)
{
    int held = 0;
    for (uint32_t i = 0; i < cfg->n_coordinators; i++) {
        const coord_coordinator_config_t *e = &cfg->coordinators[i];
        if (!s_on_host(cfg, e->host, host))
            continue;
        char key[64 + COORD_TIER_NAME_MAX];
        snprintf(key, sizeof key, "%s.endpoint%s%s%s",
                 cfg->coordinators_listed ? "coordinators[]" : "coordinator",
                 cfg->coordinators_listed ? " (" : "", cfg->coordinators_listed ? e->name : "",
                 cfg->coordinators_listed ? ")" : "");
        held += s_check_bind(key, e->endpoint, false);
        snprintf(key, sizeof key, "%s.metrics%s%s%s",
                 cfg->coordinators_listed ? "coordinators[]" : "coordinator",
                 cfg->coordinators_listed ? " (" : "", cfg->coordinators_listed ? e->name : "",
                 cfg->coordinators_listed ? ")" : "");
        held += s_check_bind(key, e->metrics, true);
        snprintf(key, sizeof key, "%s.advertise%s%s%s",
                 cfg->coordinators_listed ? "coordinators[]" : "coordinator",
                 cfg->coordinators_listed ? " (" : "", cfg->coordinators_listed ? e->name : "",
                 cfg->coordinators_listed ? ")" : "");
        held += s_check_advertise(key, e->advertise);
    }
    /* the events sockets move with the leader: with --host, a coordinator of another
     * "host" of this machine may hold them (network namespaces as hosts do not) */
    if (!host)
        held += s_check_bind("events.endpoint", cfg->events_endpoint, false) +
                s_check_bind("events.replay_endpoint", cfg->events_replay, false) +
                s_check_bind("events.vllm_endpoint", cfg->events_vllm, false) +
                s_check_bind("events.vllm_replay_endpoint", cfg->events_vllm_replay, false);
    for (uint32_t i = 0; i < cfg->n_tiers; i++) {
        const coord_tier_config_t *t = &cfg->tiers[i];
        if (!s_on_host(cfg, t->host, host))
            continue;
        char key[64 + COORD_TIER_NAME_MAX];
        snprintf(key, sizeof key, "tiers[%u].endpoint (%s)", i, t->name);
        held += s_check_bind(key, t->endpoint, false);
        snprintf(key, sizeof key, "tiers[%u].metrics (%s)", i, t->name);
        held += s_check_bind(key, t->metrics, true);
        snprintf(key, sizeof key, "tiers[%u].advertise (%s)", i, t->name);
        held += s_check_advertise(key, t->advertise);
        const struct tier_ops *ops = tier_find(t->kind_name);
        char who[192];
        if (ops && ops->path_access == TIER_ACCESS_SHM && t->backend.path[0] &&
            tier_host_owner(t->backend.path, who, sizeof who) == 0) {
            fprintf(stderr, "kvtier deployment: tiers[%u].shm (%s) %s is in use by %s\n", i,
                    t->name, t->backend.path, who);
            held++;
        }
    }
    for (uint32_t i = 0; i < cfg->n_pools; i++) /* the members a supervisor starts */
        for (uint32_t k = 0; k < cfg->pools[i].n_members; k++) {
            const coord_pool_member_t *m = &cfg->pools[i].members[k];
            if (!s_on_host(cfg, m->host, host))
                continue;
            char key[64 + COORD_TIER_NAME_MAX];
            snprintf(key, sizeof key, "pools[%u].members[%u].endpoint (%s)", i, k, m->name);
            held += s_check_bind(key, m->endpoint, false);
        }
    return held;
}

/* The "route" and "branch" lines of kvtier deployment (docs/OPERATIONS.md "Branches"). */
static void s_print_branches(const coord_config_t *cfg)
{
    static const char *const routes[] = {"none", "ttl", "length", "instance"};
    printf("route %s\n", cfg->route < 4 ? routes[cfg->route] : "?");
    for (uint32_t i = 0; i < cfg->n_chains; i++) {
        const coord_chain_config_t *ch = &cfg->chains[i];
        printf("branch %s ", ch->name);
        for (uint32_t j = 0; j < ch->n_tiers; j++) {
            const coord_tier_config_t *t = coord_config_tier_by_id(cfg, ch->tier_ids[j]);
            printf("%s%s", j ? "," : "", t ? t->name : "?");
        }
        if (cfg->route == COORD_ROUTE_NONE)
            printf(" %s\n", i == 0 ? "all" : "-");
        else if (i == cfg->route_fallback)
            printf(" fallback\n");
        else if (cfg->route == COORD_ROUTE_TTL)
            printf(" ttl>%llu\n", (unsigned long long)ch->above);
        else if (cfg->route == COORD_ROUTE_LENGTH)
            printf(" blocks>%llu\n", (unsigned long long)ch->above);
        else {
            const char *sep = " instances=";
            for (uint32_t k = 0; k < cfg->n_route_instances; k++)
                if (cfg->route_instances[k].chain == i) {
                    printf("%s%s", sep, cfg->route_instances[k].instance);
                    sep = ",";
                }
            printf("\n");
        }
    }
}

int cli_cmd_deployment(int argc, char **argv)
{
    static const struct option longopts[] = {CLI_COMMON_LONGOPTS,
                                             {"check-free", no_argument, NULL, D_OPT_CHECK_FREE},
                                             {"host", required_argument, NULL, D_OPT_HOST},
                                             {0, 0, 0, 0}};
    cli_common_t o;
    s_deployment_args_t a = {0};
    cli_common_init(&o);
    int first = cli_parse(argc, argv, "c:", longopts, &o, s_deployment_opt, &a);
    if (first < 0 || o.help || first != argc || !o.config) {
        fprintf(o.help ? stdout : stderr,
                "usage: kvtier deployment -c FILE [--etcd URLS] [--check-free [--host NAME]]\n"
                "  validates FILE and prints one line per item, for scripts:\n"
                "    cluster NAME | coordinator ENDPOINT | etcd URL | lease_ttl_ms N\n"
                "    coord NAME ENDPOINT ADVERTISE HOST METRICS   (one per coordinator; the\n"
                "      shorthand's is named \"coordinator\"; LISTED 0/1 on the coordinators line)\n"
                "    coordinators N LISTED ADVERTISED,...   (clients' coordinator list)\n"
                "    tier NAME KIND ENDPOINT SHM ADVERTISE HOST   (SHM \"-\" for tiers without\n"
                "      one, ADVERTISE \"-\": the bound endpoint)\n"
                "    hosts FIRST ETCD OPTIMIZER   (deploy/supervise --host; \"-\": one host)\n"
                "    route none|ttl|length|instance   (how requests pick a branch)\n"
                "    branch NAME TIERS WHEN   (one per chain, in order; TIERS head first,\n"
                "      comma-separated; WHEN ttl>MS, blocks>N, instances=A,B, fallback;\n"
                "      without a route: all on the first chain, - on the others)\n"
                "    optimizer EVERY_S WINDOW CAPACITY HOST   (the live optimizer; absent when\n"
                "      off)\n"
                "    curve KEYS CLIENTS AUTO   (security.curve: directories, auto 0/1; absent "
                "when off)\n"
                "    secret_file PATH   (security.secret_file; absent when none is set)\n"
                "  --check-free  also exit 1 when a TCP address or shm name it binds on this\n"
                "                host is in use, naming the process that holds it; with\n"
                "                --host NAME, only those of the processes of host NAME\n");
        return o.help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    coord_config_t *cfg = calloc(1, sizeof *cfg);
    char err[512];
    int status = CLI_EXIT_FAIL;
    if (!cfg)
        return CLI_EXIT_FAIL;
    if (coord_config_load_file(o.config, cfg, err, sizeof err) < 0 ||
        (o.etcd && coord_config_set_etcd(cfg, o.etcd, err, sizeof err) < 0)) {
        fprintf(stderr, "kvtier deployment: %s\n", err);
        goto out;
    }
    printf("cluster %s\ncoordinator %s\nlease_ttl_ms %llu\n", cfg->cluster, cfg->endpoint,
           (unsigned long long)cfg->lease_ttl_ms);
    for (uint32_t i = 0; i < cfg->n_etcd; i++)
        printf("etcd %s\n", cfg->etcd[i]);
    printf("coordinators %u %d ", cfg->n_coordinators, cfg->coordinators_listed);
    for (uint32_t i = 0; i < cfg->n_coordinators; i++)
        printf("%s%s", i ? "," : "", cfg->coordinators[i].advertise);
    printf("\n");
    for (uint32_t i = 0; i < cfg->n_coordinators; i++) {
        const coord_coordinator_config_t *e = &cfg->coordinators[i];
        printf("coord %s %s %s %s %s\n", e->name, e->endpoint, e->advertise, S_DASH(e->host),
               S_DASH(e->metrics));
    }
    for (uint32_t i = 0; i < cfg->n_tiers; i++) {
        const coord_tier_config_t *t = &cfg->tiers[i];
        const struct tier_ops *ops = tier_find(t->kind_name);
        bool shm = ops && ops->path_access == TIER_ACCESS_SHM && t->backend.path[0];
        printf("tier %s %s %s %s %s %s\n", t->name, t->kind_name, t->endpoint,
               shm ? t->backend.path : "-", S_DASH(t->advertise), S_DASH(t->host));
    }
    /* pools: name, kind, max_members, the id range, a member's default capacity
     * (members start by hand: kvtier tier --pool NAME; docs/OPERATIONS.md "Pools") */
    for (uint32_t i = 0; i < cfg->n_pools; i++) {
        const coord_pool_config_t *p = &cfg->pools[i];
        printf("pool %s %s %u %u %u %llu\n", p->name, p->member.kind_name, p->max_members,
               p->first_id, p->first_id + p->max_members - 1,
               (unsigned long long)p->member.capacity);
        /* the members deploy/supervise starts: the columns of a tier line (no shm) */
        for (uint32_t k = 0; k < p->n_members; k++) {
            const coord_pool_member_t *m = &p->members[k];
            printf("member %s %s %s - %s %s\n", m->name, p->name, m->endpoint, S_DASH(m->advertise),
                   S_DASH(m->host));
        }
    }
    printf("hosts %s %s %s\n", S_DASH(cfg->first_host), S_DASH(cfg->etcd_host),
           S_DASH(cfg->optimizer_host));
    s_print_branches(cfg);
    if (cfg->optimizer_enabled && cfg->events_endpoint[0])
        printf("optimizer %llu %llu %llu %s\n",
               (unsigned long long)(cfg->optimizer_every_ms / 1000),
               (unsigned long long)cfg->optimizer_window,
               (unsigned long long)cfg->optimizer_capacity, S_DASH(cfg->optimizer_host));
    if (cfg->curve.on)
        printf("curve %s %s %d\n", cfg->curve.keys, cfg->curve.clients, cfg->curve.autogen);
    if (cfg->secret_file[0])
        printf("secret_file %s\n", cfg->secret_file);
    int held = a.check_free ? s_check_free(cfg, a.host) : 0;
    if (held > 0) {
        fprintf(stderr,
                "kvtier deployment: %s: %d address%s or name%s in use on this host (or an "
                "advertised endpoint that does not resolve): another deployment (or program) "
                "runs there; stop it, or give this one its own ports and shm names\n",
                o.config, held, held == 1 ? "" : "es", held == 1 ? "" : "s");
        goto out;
    }
    status = CLI_EXIT_OK;
out:
    free(cfg);
    return status;
}
