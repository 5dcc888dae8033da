/* coord_curve.c — "security.curve" (see coord_curve.h). */
#include "coord_curve.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bus_curve.h"
#include "coord_proc.h"

#define S_FILE_MAX (COORD_PATH_MAX + COORD_CURVE_NAME_MAX + 16)

/* A key's name: letters, digits, '.', '-', '_'; not starting with '.'. */
static bool s_name_ok(const char *name)
{
    if (!name[0] || name[0] == '.')
        return false;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '-' || *p == '_'))
            return false;
    return true;
}

/* One "instances" entry: INSTANCE -> an array of key names or Z85 keys. */
static int s_read_acl_entry(const bus_config_node_t *inst, const char *instance,
                            coord_curve_config_t *out, char *err, size_t errlen)
{
    bus_config_node_t arr, kn;
    size_t n = 0;
    int rc = bus_config_get_array(inst, "", COORD_CURVE_MAX_ACL, &arr, &n, err, errlen);
    if (rc == 0 && n == 0)
        rc = bus_config_error(inst, "", err, errlen,
                              "no key listed (an instance nobody may use needs no entry)");
    if (rc == 0 && strlen(instance) >= COORD_INSTANCE_MAX)
        rc = bus_config_error(inst, "", err, errlen, "instance id longer than %d bytes",
                              COORD_INSTANCE_MAX - 1);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (out->n_acl == COORD_CURVE_MAX_ACL)
            return bus_config_error(inst, "", err, errlen,
                                    "more than %d (instance, key) pairs in all",
                                    COORD_CURVE_MAX_ACL);
        coord_curve_acl_t *a = &out->acl[out->n_acl];
        rc = bus_config_array_elem(&arr, i, &kn, err, errlen);
        if (rc == 0)
            rc = bus_config_get_string(&kn, "", a->key, sizeof a->key, err, errlen);
        if (rc == 0 && !bus_curve_is_z85(a->key) && !s_name_ok(a->key))
            rc = bus_config_error(&kn, "", err, errlen,
                                  "\"%s\": neither a Z85 public key (40 characters) nor the "
                                  "name of a key in the clients directory (letters, digits, "
                                  "'.', '-', '_')",
                                  a->key);
        if (rc == 0) {
            snprintf(a->instance, sizeof a->instance, "%s", instance);
            out->n_acl++;
        }
    }
    return rc;
}

static int s_read_acl(const bus_config_node_t *cn, coord_curve_config_t *out, char *err,
                      size_t errlen)
{
    bus_config_node_t obj, child;
    if (!bus_config_has(cn, "instances"))
        return 0;
    int rc = bus_config_get_object(cn, "instances", COORD_CURVE_MAX_ACL, &obj, err, errlen);
    void *it = NULL;
    const char *instance;
    out->acl_on = rc == 0;
    while (rc == 0 && bus_config_object_next(&obj, &it, &instance, &child))
        rc = s_read_acl_entry(&child, instance, out, err, errlen);
    return rc;
}

int coord_curve_read(const bus_config_node_t *security, coord_curve_config_t *out, char *err,
                     size_t errlen)
{
    static const char *const keys[] = {"keys", "clients", "auto", "instances", NULL};
    bus_config_node_t cn;
    memset(out, 0, sizeof *out);
    if (!bus_config_has(security, "curve"))
        return 0;
    int rc = bus_config_get_object(security, "curve", 8, &cn, err, errlen);
    if (rc == 0)
        rc = bus_config_check_keys(&cn, "", keys, err, errlen);
    if (rc == 0)
        rc = bus_config_get_string(&cn, "keys", out->keys, sizeof out->keys, err, errlen);
    if (rc == 0 && !out->keys[0])
        rc = bus_config_error(&cn, "keys", err, errlen,
                              "empty: the directory of the deployment's key pairs");
    char dflt[COORD_PATH_MAX];
    if (rc == 0 && (size_t)snprintf(dflt, sizeof dflt, "%s/clients", out->keys) >= sizeof dflt)
        rc = bus_config_error(&cn, "keys", err, errlen, "path too long");
    if (rc == 0)
        rc = bus_config_opt_string(&cn, "clients", dflt, out->clients, sizeof out->clients, err,
                                   errlen);
    if (rc == 0)
        rc = bus_config_opt_bool(&cn, "auto", false, &out->autogen, err, errlen);
    if (rc == 0)
        rc = s_read_acl(&cn, out, err, errlen);
    out->on = rc == 0;
    return rc;
}

int coord_curve_start(const coord_curve_config_t *cc, const char *name, const char *cert,
                      bool serves, char *err, size_t errlen)
{
    if (!cc->on) {
        if (cert)
            snprintf(err, errlen, "--cert: the deployment has no security.curve");
        return cert ? -1 : 0;
    }
    char own[S_FILE_MAX], server[S_FILE_MAX];
    if (!cert)
        snprintf(own, sizeof own, "%s/%s.key", cc->keys, name);
    snprintf(server, sizeof server, "%s/server.key", cc->keys);
    bus_curve_config_t bc = {.cert = cert ? cert : own,
                             .server_cert = serves ? server : NULL,
                             .server_key = serves ? NULL : server,
                             .clients = cc->clients};
    char why[512];
    coord_proc_block_signals(true); /* the zauth thread leaves SIGINT/SIGTERM to main */
    int rc = bus_curve_start(&bc, why, sizeof why);
    coord_proc_block_signals(false);
    if (rc < 0) {
        snprintf(err, errlen, "security.curve: %s", why);
        return -1;
    }
    return 0;
}

_Static_assert(COORD_CURVE_MAX_ACL <= SCHED_ACL_MAX, "the deployment's grants fit the scheduler's");

int coord_curve_sched_acl(const coord_curve_config_t *cc, bool *on, sched_acl_entry_t *acl,
                          uint32_t *n, char *err, size_t errlen)
{
    *on = cc->on && cc->acl_on;
    *n = 0;
    for (uint32_t i = 0; *on && i < cc->n_acl; i++) {
        const coord_curve_acl_t *a = &cc->acl[i];
        sched_acl_entry_t *e = &acl[*n];
        char file[S_FILE_MAX], why[512];
        if (bus_curve_is_z85(a->key))
            snprintf(file, sizeof file, "%s", a->key);
        else
            snprintf(file, sizeof file, "%s/%s.key", cc->clients, a->key);
        if (bus_curve_load_public(file, e->key, why, sizeof why) < 0) {
            snprintf(err, errlen, "security.curve.instances.%s: %s", a->instance, why);
            return -1;
        }
        snprintf(e->instance, sizeof e->instance, "%s", a->instance);
        (*n)++;
    }
    return 0;
}

int coord_curve_meta_keys(const coord_curve_config_t *cc, const char *const *names,
                          uint32_t n_names, bool *on, char (*keys)[BUS_CURVE_KEY_TXT],
                          uint32_t cap, uint32_t *n, char *err, size_t errlen)
{
    *on = cc->on && cc->acl_on;
    *n = 0;
    if (!*on)
        return 0;
    char file[S_FILE_MAX], why[512], first_why[512] = "";
    for (uint32_t i = 0; i <= n_names && *n < cap; i++) { /* coordinator.key, then names */
        snprintf(file, sizeof file, "%s/%s.key", cc->keys, i ? names[i - 1] : "coordinator");
        if (access(file, F_OK) != 0 && i > 0)
            continue; /* that name's coordinator runs with the shared pair */
        if (bus_curve_load_public(file, keys[*n], why, sizeof why) < 0) {
            if (!first_why[0])
                snprintf(first_why, sizeof first_why, "%s", why);
            continue;
        }
        (*n)++;
    }
    if (*n == 0) {
        snprintf(err, errlen, "security.curve: no coordinator key to serve a tier's Inventory to: %s",
                 first_why[0] ? first_why : "no room");
        return -1;
    }
    for (uint32_t i = 0; i < cc->n_acl; i++) {
        const coord_curve_acl_t *a = &cc->acl[i];
        if (strcmp(a->instance, "*") != 0)
            continue;
        if (*n == cap) {
            snprintf(err, errlen,
                     "security.curve.instances.*: a tier serves its Inventory to at most %u "
                     "keys, the coordinators' and those granted \"*\" together",
                     cap);
            return -1;
        }
        if (bus_curve_is_z85(a->key))
            snprintf(file, sizeof file, "%s", a->key);
        else
            snprintf(file, sizeof file, "%s/%s.key", cc->clients, a->key);
        if (bus_curve_load_public(file, keys[*n], why, sizeof why) < 0) {
            snprintf(err, errlen, "security.curve.instances.*: %s", why);
            return -1;
        }
        (*n)++;
    }
    return 0;
}
