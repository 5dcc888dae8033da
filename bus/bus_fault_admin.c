/* bus_fault_admin.c — the `faults` config section and the per-process admin
 * socket (bus_fault_admin.h). The actor owns one REP socket and answers one
 * request at a time; it never touches anything but the fault table. The
 * socket's directory is checked before the bind and the socket file is made
 * 0600 under a 077 umask, so no other user can reach it even for a moment. */
#include "bus_fault_admin.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "bus_log.h"

#define S_COMP "fault"

/* --- the config section ---------------------------------------------------- */

static int s_read_rule(const bus_config_node_t *pts, size_t i, bus_fault_config_rule_t *r,
                       char *err, size_t errlen)
{
    static const char *const keys[] = {"point", "action", "rate", "process", "seed", NULL};
    bus_config_node_t n;
    char point[64], action[64], rate[64], why[BUS_FAULT_TEXT_MAX];
    int rc = bus_config_array_elem(pts, i, &n, err, errlen);
    if (rc == 0)
        rc = bus_config_check_keys(&n, "", keys, err, errlen);
    if (rc == 0)
        rc = bus_config_get_string(&n, "point", point, sizeof point, err, errlen);
    if (rc == 0)
        rc = bus_config_get_string(&n, "action", action, sizeof action, err, errlen);
    if (rc == 0)
        rc = bus_config_opt_string(&n, "rate", "always", rate, sizeof rate, err, errlen);
    if (rc == 0)
        rc = bus_config_opt_string(&n, "process", "", r->process, sizeof r->process, err, errlen);
    if (rc < 0)
        return rc;
    if (bus_fault_point_parse(point, &r->point, why, sizeof why) < 0)
        return bus_config_error(&n, "point", err, errlen, "%s", why);
    if (bus_fault_rule_parse(action, rate, &r->rule, why, sizeof why) < 0 ||
        bus_fault_check(r->point, &r->rule, why, sizeof why) < 0)
        return bus_config_error(&n, "", err, errlen, "%s", why);
    uint64_t seed = r->rule.seed;
    rc = bus_config_opt_u64(&n, "seed", 0, INT64_MAX, seed, &seed, err, errlen);
    r->rule.seed = seed;
    return rc;
}

int bus_fault_config_read(const bus_config_node_t *root, bus_fault_config_t *out, char *err,
                          size_t errlen)
{
    static const char *const keys[] = {"enabled", "dir", "points", NULL};
    memset(out, 0, sizeof *out);
    if (!bus_config_has(root, "faults"))
        return 0;
    bus_config_node_t f, pts;
    size_t n = 0;
    int rc = bus_config_get_object(root, "faults", 8, &f, err, errlen);
    if (rc == 0)
        rc = bus_config_check_keys(&f, "", keys, err, errlen);
    if (rc == 0)
        rc = bus_config_opt_bool(&f, "enabled", false, &out->enabled, err, errlen);
    if (rc == 0)
        rc = bus_config_opt_string(&f, "dir", "", out->dir, sizeof out->dir, err, errlen);
    if (rc < 0 || !bus_config_has(&f, "points"))
        return rc;
    rc = bus_config_get_array(&f, "points", BUS_FAULT_CONFIG_MAX, &pts, &n, err, errlen);
    if (rc < 0)
        return rc;
    if (n && !out->enabled)
        return bus_config_error(&f, "points", err, errlen,
                                "faults are listed but faults.enabled is not true: enable them or "
                                "remove the list");
    for (size_t i = 0; i < n; i++)
        if ((rc = s_read_rule(&pts, i, &out->rules[i], err, errlen)) < 0)
            return rc;
    out->n_rules = (uint32_t)n;
    return 0;
}

int bus_fault_admin_dir(const bus_fault_config_t *cfg, char *out, size_t outlen)
{
    if (cfg->dir[0]) {
        snprintf(out, outlen, "%s", cfg->dir);
        return 0;
    }
    const char *run = getenv(BUS_FAULT_ENV_RUN_DIR);
    if (!run || !*run)
        return -ENOENT;
    snprintf(out, outlen, "%s/faults", run);
    return 0;
}

/* --- requests ------------------------------------------------------------- */

static void s_answer_error(char *out, size_t outlen, const char *code, const char *why)
{
    json_t *o = json_pack("{s:b,s:s,s:s}", "ok", 0, "code", code, "error", why);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    snprintf(out, outlen, "%s", s ? s : "{\"ok\":false,\"code\":\"INTERNAL\"}");
    free(s);
    json_decref(o);
}

static void s_answer_show(const char *process, char *out, size_t outlen)
{
    json_t *pts = json_array();
    for (int i = 0; pts && i < BUS_FAULT_N_POINTS; i++) {
        bus_fault_state_t st;
        char rule[BUS_FAULT_TEXT_MAX] = "none";
        bus_fault_show((bus_fault_point_t)i, &st);
        if (st.rule.action != BUS_FAULT_NONE)
            bus_fault_rule_format(&st.rule, rule, sizeof rule);
        json_array_append_new(pts, json_pack("{s:s,s:s,s:I,s:I}", "point",
                                             bus_fault_point_name((bus_fault_point_t)i), "rule",
                                             rule, "hits", (json_int_t)st.hits, "injected",
                                             (json_int_t)st.injected));
    }
    json_t *o = json_pack("{s:b,s:s,s:o}", "ok", 1, "process", process, "points", pts);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (s && strlen(s) < outlen)
        snprintf(out, outlen, "%s", s);
    else
        s_answer_error(out, outlen, "INTERNAL", "the answer does not fit");
    free(s);
    json_decref(o);
}

static int s_handle_set(json_t *req, char *why, size_t whylen)
{
    const char *point = json_string_value(json_object_get(req, "point"));
    const char *action = json_string_value(json_object_get(req, "action"));
    const char *rate = json_string_value(json_object_get(req, "rate"));
    bus_fault_point_t p;
    bus_fault_rule_t r;
    if (bus_fault_point_parse(point, &p, why, whylen) < 0 ||
        bus_fault_rule_parse(action, rate, &r, why, whylen) < 0)
        return -EINVAL;
    json_t *seed = json_object_get(req, "seed");
    if (seed && json_is_integer(seed) && json_integer_value(seed) >= 0)
        r.seed = (uint64_t)json_integer_value(seed);
    return bus_fault_set(p, &r, why, whylen);
}

void bus_fault_admin_handle(const char *process, const char *text, size_t len, char *out,
                            size_t outlen)
{
    json_error_t jerr;
    json_t *req = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    const char *op = json_string_value(json_object_get(req, "op"));
    char why[BUS_FAULT_TEXT_MAX * 2] = "";
    int rc = 0;
    if (!req || !json_is_object(req)) {
        snprintf(why, sizeof why, "not a JSON object: %s", req ? "another value" : jerr.text);
        rc = -EINVAL;
    } else if (!op) {
        snprintf(why, sizeof why, "no \"op\" (set, clear or show)");
        rc = -EINVAL;
    } else if (!strcmp(op, "set")) {
        rc = s_handle_set(req, why, sizeof why);
    } else if (!strcmp(op, "clear")) {
        const char *point = json_string_value(json_object_get(req, "point"));
        bus_fault_point_t p = BUS_FAULT_N_POINTS;
        if (point && (rc = bus_fault_point_parse(point, &p, why, sizeof why)) == 0)
            bus_fault_clear(p);
        else if (!point)
            bus_fault_clear(BUS_FAULT_N_POINTS);
    } else if (strcmp(op, "show") != 0) {
        snprintf(why, sizeof why, "unknown op \"%s\" (set, clear or show)", op);
        rc = -EINVAL;
    }
    json_decref(req);
    if (rc == -EPERM)
        s_answer_error(out, outlen, "PERMISSION_DENIED", why);
    else if (rc < 0)
        s_answer_error(out, outlen, "INVALID_ARGUMENT", why);
    else
        s_answer_show(process, out, outlen);
}

/* --- the actor ------------------------------------------------------------ */

typedef struct {
    char process[BUS_FAULT_NAME_MAX];
    char endpoint[BUS_FAULT_DIR_MAX + BUS_FAULT_NAME_MAX + 16];
    zsock_t *sock; /* bound by the starting thread, handed to the actor */
} s_admin_args_t;

/* The directory exists (created 0700 when missing), is a directory, is ours and
 * no one else can write to it. */
static int s_check_dir(const char *dir, char *err, size_t errlen)
{
    struct stat st;
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "faults: cannot create the admin directory %s: %s", dir,
                 strerror(errno));
        return -errno;
    }
    if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "faults: %s is not a directory", dir);
        return -ENOTDIR;
    }
    if (st.st_uid != geteuid() || (st.st_mode & 022)) {
        snprintf(err, errlen,
                 "faults: the admin directory %s must be owned by uid %u and writable by no one "
                 "else (it is uid %u, mode %03o)",
                 dir, (unsigned)geteuid(), (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
        return -EPERM;
    }
    return 0;
}

static zsock_t *s_bind(const s_admin_args_t *a)
{
    zsock_t *sock = zsock_new(ZMQ_REP);
    if (!sock)
        return NULL;
    int uid = (int)geteuid();
    /* Peer credentials where libzmq has them; the file modes hold regardless. */
    if (zmq_setsockopt(zsock_resolve(sock), ZMQ_IPC_FILTER_UID, &uid, sizeof uid) < 0)
        bus_debug(S_COMP, "ZMQ_IPC_FILTER_UID not available: %s", zmq_strerror(errno));
    zsock_set_maxmsgsize(sock, BUS_FAULT_ADMIN_MAX);
    const char *path = a->endpoint + strlen("ipc://");
    (void)unlink(path); /* a socket left by a killed process of this name */
    mode_t old = umask(077);
    int rc = zsock_bind(sock, "%s", a->endpoint);
    umask(old);
    if (rc < 0 || chmod(path, 0600) < 0) {
        bus_error(S_COMP, "cannot bind the fault admin socket %s: %s", a->endpoint,
                  zmq_strerror(errno));
        zsock_destroy(&sock);
    }
    return sock;
}

static void s_admin_actor(zsock_t *pipe, void *arg)
{
    s_admin_args_t *a = arg;
    zsock_t *sock = a->sock;
    zsock_signal(pipe, 0);
    bus_info(S_COMP, "faults enabled; admin socket %s", a->endpoint);
    zpoller_t *poller = zpoller_new(pipe, sock, NULL);
    char *out = malloc(BUS_FAULT_ADMIN_MAX);
    while (poller && out) {
        void *which = zpoller_wait(poller, -1);
        if (which == pipe || (!which && zpoller_terminated(poller)))
            break; /* $TERM, or the process is stopping */
        if (!which)
            continue; /* another signal */
        zframe_t *f = zframe_recv(sock);
        if (!f)
            continue;
        bus_fault_admin_handle(a->process, (const char *)zframe_data(f), zframe_size(f), out,
                               BUS_FAULT_ADMIN_MAX);
        bus_info(S_COMP, "admin request %.*s: %s",
                 (int)(zframe_size(f) < 200 ? zframe_size(f) : 200), (const char *)zframe_data(f),
                 strncmp(out, "{\"ok\":true", 10) ? out : "ok");
        zframe_destroy(&f);
        zstr_send(sock, out);
    }
    free(out);
    zpoller_destroy(&poller);
    (void)unlink(a->endpoint + strlen("ipc://"));
    zsock_destroy(&sock);
    free(a);
}

int bus_fault_start(const bus_fault_config_t *cfg, const char *process, zactor_t **admin, char *err,
                    size_t errlen)
{
    *admin = NULL;
    if (!cfg->enabled)
        return 0;
    char dir[BUS_FAULT_DIR_MAX];
    if (bus_fault_admin_dir(cfg, dir, sizeof dir) < 0) {
        snprintf(err, errlen,
                 "faults.enabled is true but there is no admin directory: set faults.dir or run "
                 "under deploy/supervise (it sets $%s)",
                 BUS_FAULT_ENV_RUN_DIR);
        return -ENOENT;
    }
    int rc = s_check_dir(dir, err, errlen);
    if (rc < 0)
        return rc;
    bus_fault_enable();
    for (uint32_t i = 0; i < cfg->n_rules; i++) {
        const bus_fault_config_rule_t *r = &cfg->rules[i];
        if (r->process[0] && strcmp(r->process, process) != 0)
            continue;
        if ((rc = bus_fault_set(r->point, &r->rule, err, errlen)) < 0)
            return rc;
    }
    s_admin_args_t *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(err, errlen, "faults: out of memory");
        return -ENOMEM;
    }
    snprintf(a->process, sizeof a->process, "%s", process);
    snprintf(a->endpoint, sizeof a->endpoint, "ipc://%s/%s.sock", dir, process);
    a->sock = s_bind(a);
    if (!a->sock) {
        snprintf(err, errlen, "faults: cannot bind the admin socket %s (see the log above)",
                 a->endpoint);
        free(a);
        return -EIO;
    }
    *admin = zactor_new(s_admin_actor, a); /* the actor owns a and its socket */
    if (!*admin) {
        snprintf(err, errlen, "faults: cannot start the admin actor");
        zsock_destroy(&a->sock);
        free(a);
        return -ENOMEM;
    }
    return 0;
}

/* --- the client ----------------------------------------------------------- */

int bus_fault_admin_call(const char *path, const char *req, int timeout_ms, char *out,
                         size_t outlen, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISSOCK(st.st_mode)) {
        snprintf(err, errlen,
                 "no fault admin socket at %s: that process is not running, or faults are off in "
                 "its config (faults.enabled is not true)",
                 path);
        return -ENOENT;
    }
    zsock_t *sock = zsock_new(ZMQ_REQ);
    if (!sock) {
        snprintf(err, errlen, "cannot create a socket");
        return -EIO;
    }
    zsock_set_linger(sock, 0);
    zsock_set_rcvtimeo(sock, timeout_ms);
    zsock_set_sndtimeo(sock, timeout_ms);
    int rc = 0;
    char *ans = NULL;
    if (zsock_connect(sock, "ipc://%s", path) < 0 || zstr_send(sock, req) < 0) {
        snprintf(err, errlen, "cannot send to %s: %s", path, zmq_strerror(errno));
        rc = -EIO;
    } else if (!(ans = zstr_recv(sock))) {
        snprintf(err, errlen, "no answer from %s within %d ms", path, timeout_ms);
        rc = -ETIMEDOUT;
    } else {
        snprintf(out, outlen, "%s", ans);
    }
    zstr_free(&ans);
    zsock_destroy(&sock);
    return rc;
}
