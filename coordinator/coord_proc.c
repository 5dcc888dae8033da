/* coord_proc.c — helpers of the process mains (see coord_proc.h). */
#include "coord_proc.h"

#include "bus_config.h"
#include "bus_token_mac.h"

#include <czmq.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int coord_proc_opt(int argc, char **argv, int *i, const char *long_name, const char *short_name,
                   const char **value)
{
    const char *a = argv[*i];
    size_t n = strlen(long_name);
    if (strncmp(a, long_name, n) == 0 && a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    if (strcmp(a, long_name) != 0 && !(short_name && strcmp(a, short_name) == 0))
        return 0;
    if (*i + 1 >= argc)
        return -1;
    *value = argv[++*i];
    return 1;
}

int coord_proc_config(const char *prog, const char *file, const char *etcd_override,
                      coord_config_t *cfg)
{
    char err[BUS_CONFIG_ERR_MAX + 64];
    if (coord_config_load_file(file, cfg, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return -1;
    }
    if (etcd_override && coord_config_set_etcd(cfg, etcd_override, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return -1;
    }
    /* a relative security.secret_file is the deployment file's neighbour, whatever
     * directory the process runs in */
    if (cfg->secret_file[0] && cfg->secret_file[0] != '/') {
        const char *slash = strrchr(file, '/');
        char path[sizeof cfg->secret_file];
        int n = snprintf(path, sizeof path, "%.*s%s", slash ? (int)(slash - file + 1) : 0, file,
                         cfg->secret_file);
        if (n < 0 || (size_t)n >= sizeof path) {
            fprintf(stderr, "%s: security.secret_file: path too long next to %s\n", prog, file);
            return -1;
        }
        memcpy(cfg->secret_file, path, sizeof path);
    }
    if (cfg->n_etcd == 0) {
        fprintf(stderr,
                "%s: no etcd endpoints: pass --etcd URLS or set etcd.endpoints in %s (the "
                "supervisor passes the etcd it starts)\n",
                prog, file);
        return -1;
    }
    coord_etcd_tls_t tls = {
        .ca_file = cfg->etcd_ca, .cert_file = cfg->etcd_cert, .key_file = cfg->etcd_key};
    if (coord_etcd_set_tls(&tls, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, file, err);
        return -1;
    }
    return 0;
}

int coord_proc_secret(const char *prog, const coord_config_t *cfg, const char *override,
                      uint8_t *out)
{
    const char *path = override ? override : cfg->secret_file;
    if (!path[0]) {
        fprintf(stderr,
                "%s: no cluster secret: set security.secret_file in the deployment or pass "
                "--secret FILE (kvtier keygen --secret FILE writes one; deploy/supervise makes "
                "one in its run directory); the tier plane opens only with tokens sealed under "
                "it\n",
                prog);
        return -1;
    }
    char err[COORD_PATH_MAX + 256];
    if (bus_secret_load(path, out, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return -1;
    }
    return 0;
}

void coord_proc_block_signals(bool block)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(block ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

bool coord_proc_interrupted(void)
{
    return zsys_interrupted != 0;
}

int64_t coord_proc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
