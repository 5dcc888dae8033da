/* cli_common.c — connection and instance flags, connecting, registering, request ids. */
#include "cli_common.h"

#include "bus_arrays.h"
#include "bus_config.h"
#include "bus_curve.h"
#include "coord_config.h"
#include "coord_etcd.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

void cli_common_init(cli_common_t *o)
{
    memset(o, 0, sizeof *o);
    o->timeout_ms = 5000;
    o->instance = CLI_DEFAULT_INSTANCE;
    o->block_size = CLI_DEFAULT_BLOCK_SIZE;
    o->tokens_per_block = CLI_DEFAULT_TOKENS_PER_BLOCK;
}

int cli_parse_size(const char *flag, const char *text, uint64_t *out)
{
    char err[128];
    if (bus_config_parse_size(text, out, err, sizeof err) < 0) {
        fprintf(stderr, "kvtier: %s %s: %s\n", flag, text, err);
        return -1;
    }
    return 0;
}

int cli_parse_u64(const char *flag, const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end = NULL;
    /* digits only: strtoull would take a sign (and wrap a negative) or blanks */
    if (text[0] < '0' || text[0] > '9') {
        fprintf(stderr, "kvtier: %s: expected an integer in %llu..%llu, got \"%s\"%s\n", flag,
                (unsigned long long)min, (unsigned long long)max, text,
                text[0] == '-' ? " (negative)" : "");
        return -1;
    }
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (*end || errno == ERANGE || v < min || v > max) {
        fprintf(stderr, "kvtier: %s: expected an integer in %llu..%llu, got \"%s\"\n", flag,
                (unsigned long long)min, (unsigned long long)max, text);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_double(const char *flag, const char *text, double min, double max, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (!text[0] || *end || errno != 0 || !(v >= min && v <= max)) {
        fprintf(stderr, "kvtier: %s: expected a number in %g..%g, got \"%s\"\n", flag, min, max,
                text);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_common_option(cli_common_t *o, int opt, const char *arg)
{
    uint64_t v = 0;
    switch (opt) {
    case CLI_OPT_COORDINATOR:
        o->coordinator = arg;
        return 0;
    case CLI_OPT_ETCD:
        o->etcd = arg;
        return 0;
    case 'c':
        o->config = arg;
        return 0;
    case CLI_OPT_CLUSTER:
        o->cluster = arg;
        return 0;
    case CLI_OPT_TIMEOUT:
        if (cli_parse_u64("--timeout", arg, 1, 3600000, &v) < 0)
            return -1;
        o->timeout_ms = (uint32_t)v;
        return 0;
    case CLI_OPT_NO_SHM:
        o->no_shm = true;
        return 0;
    case CLI_OPT_INSTANCE:
        if (!arg[0]) {
            fprintf(stderr, "kvtier: --instance: empty id\n");
            return -1;
        }
        o->instance = arg;
        return 0;
    case CLI_OPT_BLOCK_SIZE:
        if (cli_parse_size("--block-size", arg, &v) < 0)
            return -1;
        if (v == 0 || v > CLI_MAX_BLOCK_SIZE) {
            fprintf(stderr, "kvtier: --block-size: %s is not in 1 B..1 GiB\n", arg);
            return -1;
        }
        o->block_size = v;
        return 0;
    case CLI_OPT_TOKENS_PER_BLOCK:
        if (cli_parse_u64("--tokens-per-block", arg, 1, UINT32_MAX, &v) < 0)
            return -1;
        o->tokens_per_block = (uint32_t)v;
        return 0;
    case CLI_OPT_HELP:
        o->help = true;
        return 0;
    case CLI_OPT_CERT:
        o->cert = arg;
        return 0;
    case CLI_OPT_SERVER_KEY:
        o->server_key = arg;
        return 0;
    default:
        return 1;
    }
}

int cli_parse(int argc, char **argv, const char *shortopts, const struct option *longopts,
              cli_common_t *o, int (*on_opt)(void *ctx, int opt, const char *arg), void *ctx)
{
    optind = 0; /* 0 also resets getopt's internal state (glibc) */
    opterr = 1;
    for (;;) {
        int opt = getopt_long(argc, argv, shortopts, longopts, NULL);
        if (opt == -1)
            break;
        if (opt == '?' || opt == ':')
            return -1;
        int rc = cli_common_option(o, opt, optarg);
        if (rc < 0)
            return -1;
        if (rc == 1 && (!on_opt || on_opt(ctx, opt, optarg) < 0))
            return -1;
    }
    return optind;
}

/* Reads the coordinator endpoint and cluster of the deployment file. */
static int s_load_config(cli_common_t *o)
{
    coord_config_t *cfg = calloc(1, sizeof *cfg);
    char err[512];
    if (!cfg) {
        fprintf(stderr, "kvtier: out of memory\n");
        return -1;
    }
    int rc = coord_config_load_file(o->config, cfg, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "kvtier: %s\n", err);
    } else {
        size_t off = 0;
        o->cfg_endpoint[0] = '\0';
        for (uint32_t i = 0; i < cfg->n_coordinators && off < sizeof o->cfg_endpoint; i++) {
            int n = snprintf(o->cfg_endpoint + off, sizeof o->cfg_endpoint - off, "%s%s",
                             i ? "," : "", cfg->coordinators[i].advertise);
            off += n > 0 ? (size_t)n : 0;
        }
        snprintf(o->cfg_cluster, sizeof o->cfg_cluster, "%s", cfg->cluster);
        if (cfg->curve.on)
            snprintf(o->cfg_server_key, sizeof o->cfg_server_key, "%s/server.key", cfg->curve.keys);
        /* etcd.tls: every etcd handle of this process (discovery, --publish) */
        coord_etcd_tls_t tls = {
            .ca_file = cfg->etcd_ca, .cert_file = cfg->etcd_cert, .key_file = cfg->etcd_key};
        if (coord_etcd_set_tls(&tls, err, sizeof err) < 0) {
            fprintf(stderr, "kvtier: %s: %s\n", o->config, err);
            rc = -1;
        }
    }
    free(cfg);
    return rc < 0 ? -1 : 0;
}

static const char *s_env(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] ? v : NULL;
}

/* --cert / --server-key, else their variables, else (server key) the deployment's. */
static void s_curve_names(cli_common_t *o, const char **cert, const char **server_key)
{
    *cert = o->cert ? o->cert : s_env("KVTIER_CERT");
    *server_key = o->server_key                ? o->server_key
                  : s_env("KVTIER_SERVER_KEY") ? s_env("KVTIER_SERVER_KEY")
                  : o->cfg_server_key[0]       ? o->cfg_server_key
                                               : NULL;
}

int cli_curve_keys(cli_common_t *o, bool *on, bus_curve_client_t *keys)
{
    const char *cert, *server;
    *on = false;
    if (o->config && !o->cfg_endpoint[0] && s_load_config(o) < 0)
        return -1;
    s_curve_names(o, &cert, &server);
    if (!cert && !server)
        return 0;
    char why[600];
    if (!cert || !server) {
        fprintf(stderr, "kvtier: %s\n",
                cert ? "--cert needs --server-key (or -c with a deployment that has "
                       "security.curve)"
                     : "the deployment has security.curve: give this client's pair with "
                       "--cert FILE (kvtier keygen makes one)");
        return -1;
    }
    if (bus_curve_load_pair(cert, keys->public_key, keys->secret_key, why, sizeof why) < 0 ||
        bus_curve_load_public(server, keys->server_key, why, sizeof why) < 0) {
        fprintf(stderr, "kvtier: %s\n", why);
        return -1;
    }
    *on = true;
    return 0;
}

zsock_t *cli_socket(const char *cmd, const bus_curve_client_t *keys, int type, const char *ep)
{
    char why[300] = "";
    zsock_t *s = zsock_new(type);
    /* the publisher's frames (events SUB, replay DEALER): [topic][seq][payload],
     * the payload at most BUS_MAX_BLOB (actors/publisher.h), the replay verbs
     * smaller: a larger frame drops the connection instead of being buffered (set
     * before the connect, so that it holds) */
    if (s)
        zsock_set_maxmsgsize(s, (int)BUS_MAX_BLOB);
    if (!s || bus_curve_connect_setup(s, ep, keys, why, sizeof why) < 0 ||
        zsock_connect(s, "%s", ep) < 0) {
        fprintf(stderr, "%s: cannot connect to %s%s%s\n", cmd, ep, why[0] ? ": " : "", why);
        zsock_destroy(&s);
    }
    return s;
}

kvt_client_t *cli_connect(cli_common_t *o, const char *name)
{
    kvt_options_t opts = {.timeout_ms = o->timeout_ms,
                          .failover_ms = o->failover_ms,
                          .disable_shm = o->no_shm,
                          .name = name};
    if (o->config && s_load_config(o) < 0)
        return NULL;
    s_curve_names(o, &opts.curve_cert, &opts.curve_server_key);
    if (opts.curve_server_key && !opts.curve_cert) {
        fprintf(stderr, "kvtier: the deployment has security.curve: give this client's pair "
                        "with --cert FILE (kvtier keygen makes one)\n");
        return NULL;
    }
    opts.cluster = o->cluster ? o->cluster : (o->config ? o->cfg_cluster : NULL);
    if (o->coordinator)
        opts.coordinators = o->coordinator;
    else if (o->config)
        opts.coordinators = o->cfg_endpoint;
    else if (o->etcd)
        opts.etcd_endpoints = o->etcd;
    else if (s_env("KVTIER_COORDINATOR"))
        opts.coordinators = s_env("KVTIER_COORDINATOR");
    else if (s_env("KVTIER_ETCD"))
        opts.etcd_endpoints = s_env("KVTIER_ETCD");
    else
        opts.coordinators = CLI_DEFAULT_COORDINATOR;
    char err[512] = "";
    kvt_client_t *c = kvt_connect(&opts, err, sizeof err);
    if (!c)
        fprintf(stderr, "kvtier: cannot connect to %s %s: %s\n",
                opts.coordinators ? "coordinator" : "etcd",
                opts.coordinators ? opts.coordinators : opts.etcd_endpoints, err);
    return c;
}

int cli_register(kvt_client_t *c, const cli_common_t *o)
{
    kvt_instance_t spec = {
        .instance_id = o->instance,
        .model = CLI_MODEL,
        .dtype = CLI_DTYPE,
        .tokens_per_block = o->tokens_per_block,
        .bytes_per_block = o->block_size,
    };
    int rc = kvt_register_instance(c, &spec);
    if (rc < 0) {
        fprintf(stderr, "kvtier: register instance %s (%llu bytes, %u tokens per block): %s: %s\n",
                o->instance, (unsigned long long)o->block_size, o->tokens_per_block,
                kvt_status_name(rc), kvt_last_error(c));
        if (rc == -KVT_CONFLICT)
            fprintf(stderr, "kvtier: the instance exists with another spec: pass the same "
                            "--block-size and --tokens-per-block, or another --instance\n");
    }
    return rc;
}

static uint32_t s_salt;
static pthread_once_t s_salt_once = PTHREAD_ONCE_INIT;

/* Random per process, so ids of two processes with a recycled pid still differ. */
static void s_salt_init(void)
{
    if (getrandom(&s_salt, sizeof s_salt, 0) != (ssize_t)sizeof s_salt)
        s_salt = (uint32_t)time(NULL) ^ (uint32_t)getpid();
}

void cli_request_id(char *buf, size_t len, const char *tag)
{
    static atomic_uint_fast64_t seq;
    pthread_once(&s_salt_once, s_salt_init);
    uint64_t n = atomic_fetch_add(&seq, 1);
    snprintf(buf, len, "%s-%ld-%llu-%08x", tag, (long)getpid(), (unsigned long long)n, s_salt);
}

void cli_report_error(const char *cmd, const char *what, kvt_client_t *c, int rc)
{
    fprintf(stderr, "kvtier %s: %s: %s: %s\n", cmd, what, kvt_status_name(rc),
            c ? kvt_last_error(c) : "");
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct coord_etcd *cli_etcd_open(const cli_common_t *o, int timeout_ms)
{
    const char *urls = o->etcd ? o->etcd : s_env("KVTIER_ETCD");
    if (!urls || !urls[0])
        return NULL;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", urls);
    const char *eps[COORD_ETCD_MAX_ENDPOINTS];
    size_t n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && n < COORD_ETCD_MAX_ENDPOINTS;
         t = strtok_r(NULL, ",", &save))
        eps[n++] = t;
    coord_etcd_config_t ec = {.endpoints = eps, .n_endpoints = n, .timeout_ms = timeout_ms};
    return n ? coord_etcd_new(&ec) : NULL; /* the handle copies the endpoints */
}
