/* fuzz_etcd_json.c — libFuzzer harness for the etcd gateway's JSON answers
 * (coordinator/coord_etcd_json.c), read as coord_etcd.c reads them: a unary answer
 * goes through coord_json_load, coord_json_error and then every answer parser
 * (lease grant / keepalive, range, delete, txn create, header revision); a watch
 * stream goes through the line buffer and each line through coord_json_watch_msg
 * and coord_json_event, with the scratch bounded by COORD_ETCD_MAX_RESPONSE_DEFAULT.
 * The tier record codec (coordinator/coord_membership.c) is read the same way the
 * membership actor reads it: the whole input, and each value a range answer
 * carries, through coord_tier_value_decode and coord_tier_value_metrics.
 * Properties: a decoded key is NUL-terminated at its length; a tier record that
 * decodes has a tier id, and encoding it gives a record that decodes to the same
 * name, kind, id, endpoint, epoch, capacity and slot size. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "coord_etcd.h"
#include "coord_etcd_json.h"
#include "coord_membership.h"

static coord_scratch_t s_scratch = {.max = COORD_ETCD_MAX_RESPONSE_DEFAULT};

static void s_check_kv(const coord_etcd_kv_t *kv)
{
    if (kv->key && kv->key[kv->key_len] != '\0')
        abort();
}

/* A tier record: decodes, or not; one that does survives encode + decode. */
static void s_tier_record(const void *buf, size_t len)
{
    static kvtier_TierInfo a, b;
    static char enc[8192];
    char err[256], metrics[256];
    (void)coord_tier_value_metrics(buf, len, metrics, sizeof metrics);
    if (coord_tier_value_decode(buf, len, &a, err, sizeof err) != 0)
        return;
    if (a.tier_id == 0 || memchr(a.name, 0, sizeof a.name) == NULL ||
        memchr(a.endpoint, 0, sizeof a.endpoint) == NULL)
        abort();
    size_t n = 0;
    if (coord_tier_value_encode(&a, enc, sizeof enc, &n) != 0)
        abort(); /* every record it decoded, it can write */
    if (coord_tier_value_decode(enc, n, &b, err, sizeof err) != 0)
        abort();
    if (strcmp(a.name, b.name) || strcmp(a.kind_name, b.kind_name) || a.tier_id != b.tier_id ||
        strcmp(a.endpoint, b.endpoint) || a.epoch != b.epoch ||
        a.capacity_slots != b.capacity_slots || a.slot_bytes != b.slot_bytes)
        abort();
}

static int s_on_kv(const coord_etcd_kv_t *kv, void *arg)
{
    (void)arg;
    s_check_kv(kv);
    if (kv->value)
        s_tier_record(kv->value, kv->value_len);
    return 0;
}

static void s_unary(const json_t *root)
{
    char msg[256];
    int64_t a, b;
    bool won, more;
    size_t count;
    coord_etcd_kv_t kv;
    (void)coord_json_error(root, msg, sizeof msg);
    (void)coord_json_header_revision(root, &a);
    (void)coord_json_lease_grant(root, &a, &b);
    (void)coord_json_lease_keepalive(root, &a);
    (void)coord_json_range(root, &s_scratch, s_on_kv, NULL, &count, &more, &a);
    (void)coord_json_deleted(root, &a);
    if (coord_json_txn_create(root, &s_scratch, &won, &kv) == 0)
        s_check_kv(&kv);
}

static int s_watch_line(char *line, size_t len, void *arg)
{
    (void)arg;
    json_t *root = NULL;
    char jerr[200];
    if (coord_json_load(line, len, &root, jerr, sizeof jerr) < 0)
        return 0;
    coord_watch_msg_t m;
    if (coord_json_watch_msg(root, &m) == 0 && m.events) {
        size_t n = json_array_size(m.events);
        for (size_t i = 0; i < n; i++) {
            coord_etcd_event_t ev;
            if (coord_json_event(json_array_get(m.events, i), &s_scratch, &ev) == 0)
                s_check_kv(&ev.kv);
        }
    }
    json_decref(root);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    s_tier_record(data, size);
    json_t *root = NULL;
    char jerr[200];
    if (coord_json_load((const char *)data, size, &root, jerr, sizeof jerr) == 0) {
        s_unary(root);
        json_decref(root);
    }
    coord_linebuf_t lb;
    if (coord_linebuf_init(&lb, 1u << 16) == 0) {
        /* fed in two pieces, as curl hands a stream over in chunks */
        size_t half = size / 2;
        if (coord_linebuf_feed(&lb, (const char *)data, half, s_watch_line, NULL) == 0 &&
            coord_linebuf_feed(&lb, (const char *)data + half, size - half, s_watch_line, NULL) ==
                0)
            (void)coord_linebuf_flush(&lb, s_watch_line, NULL);
        coord_linebuf_free(&lb);
    }
    return 0;
}
