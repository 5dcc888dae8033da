/* fuzz_config.c — libFuzzer harness for the deployment config: the whole
 * deployment parse and validation as the coordinator does it at start
 * (coordinator/coord_config.c, coord_config_load_string: the same rules as
 * coord_config_load_file without the file), and bus/bus_config.c's generic
 * reader: every node of the document is walked and read with each typed getter
 * and unit parser, as the actors' config sections read theirs. Property: every
 * error message is a NUL-terminated string within its buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_config.h"
#include "coord_config.h"

static coord_config_t s_cfg;

static void s_check_err(const char *err, size_t cap)
{
    if (strnlen(err, cap) == cap)
        abort();
}

static void s_read_scalar(const bus_config_node_t *n)
{
    char err[BUS_CONFIG_ERR_MAX] = "", s[256];
    bool b;
    int64_t i;
    uint64_t u;
    double d;
    static const char *const names[] = {"auto", "uring", "sync", NULL};
    int e;
    (void)bus_config_get_string(n, "", s, sizeof s, err, sizeof err);
    (void)bus_config_get_bool(n, "", &b, err, sizeof err);
    (void)bus_config_get_i64(n, "", INT64_MIN, INT64_MAX, &i, err, sizeof err);
    (void)bus_config_get_u64(n, "", 1, 1000, &u, err, sizeof err);
    (void)bus_config_get_positive(n, "", &u, err, sizeof err);
    (void)bus_config_get_double(n, "", -1.0, 1.0, &d, err, sizeof err);
    (void)bus_config_get_size(n, "", &u, err, sizeof err);
    (void)bus_config_get_duration_ms(n, "", &u, err, sizeof err);
    (void)bus_config_get_enum(n, "", names, &e, err, sizeof err);
    (void)bus_config_get_endpoint(n, "", BUS_ENDPOINT_BIND, s, sizeof s, err, sizeof err);
    (void)bus_config_get_endpoint(n, "", BUS_ENDPOINT_CONNECT, s, sizeof s, err, sizeof err);
    s_check_err(err, sizeof err);
}

static void s_walk(const bus_config_node_t *n, int depth)
{
    char err[BUS_CONFIG_ERR_MAX] = "";
    bus_config_node_t child;
    void *it = NULL;
    const char *key;
    static const char *const allowed[] = {"tiers", "chains", "scheduler", NULL};
    if (depth > 64)
        return;
    (void)bus_config_node_path(n);
    (void)bus_config_check_keys(n, "", allowed, err, sizeof err);
    s_check_err(err, sizeof err);
    while (bus_config_object_next(n, &it, &key, &child))
        s_walk(&child, depth + 1);
    size_t len = 0;
    bus_config_node_t arr;
    if (bus_config_get_array(n, "", 1024, &arr, &len, err, sizeof err) == 0)
        for (size_t k = 0; k < len; k++)
            if (bus_config_array_elem(&arr, k, &child, err, sizeof err) == 0)
                s_walk(&child, depth + 1);
    s_read_scalar(n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > BUS_CONFIG_MAX_BYTES)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char err[BUS_CONFIG_ERR_MAX] = "";

    (void)coord_config_load_string("fuzz.json", text, &s_cfg, err, sizeof err);
    s_check_err(err, sizeof err);

    err[0] = '\0';
    bus_config_t *doc = bus_config_load_string("fuzz.json", text, err, sizeof err);
    s_check_err(err, sizeof err);
    if (doc) {
        s_walk(bus_config_root(doc), 0);
        bus_config_destroy(&doc);
    }
    uint64_t u;
    (void)bus_config_parse_size(text, &u, err, sizeof err);
    (void)bus_config_parse_duration_ms(text, &u, err, sizeof err);
    s_check_err(err, sizeof err);
    free(text);
    return 0;
}
