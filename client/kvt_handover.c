/* kvt_handover.c — tokens across processes (issue 11 §3, kvtier.h "Tokens across
 * processes"): a prepared token leaves its handle as bytes (kvt_export.h), another
 * handle imports it to run its jobs, and the jobs' result comes back as bytes to
 * the token it was exported from, which its handle then completes.
 *
 * Owns what the fields mean to a handle: the cluster and leader epoch an import
 * checks, the lease left, the token a result belongs to. Never applies anything
 * of bytes that failed a check, never lets an imported token complete a window
 * (the preparing handle does, once), and never trusts the scheduler's payload
 * inside the bytes further than bus_token_decode and the fields around it agree. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "kvt_export.h"
#include "kvt_internal.h"

static bool s_exportable_kind(bus_token_kind_t k)
{
    return k == BUS_TOKEN_GET || k == BUS_TOKEN_PUT || k == BUS_TOKEN_PREFETCH;
}

/* The common checks of a token handed to one of these calls. */
static int s_check_token(kvt_client_t *c, const char *what, const struct kvt_token *t)
{
    if (!t)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what, "no token");
    if (t->owner != c || !t->live)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                         "the token belongs to another handle or was already completed");
    if (t->parent || t->kind == BUS_TOKEN_GET_PUT)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                         "a kvt_prepare token (or a half of one) is never exported: one lease "
                         "and one complete at the scheduler that minted it; use prepare_get / "
                         "prepare_put for work another process does");
    if (!s_exportable_kind(t->kind))
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what, "a token of kind %d is not exported",
                         (int)t->kind);
    if (t->jobs > 0)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                         "a job on this token is still in flight: collect it with "
                         "kvt_get_finished or kvt_wait first");
    return 0;
}

static int s_stale(kvt_client_t *c, const char *what, const struct kvt_token *t)
{
    return kvti_fail(c, KVT_ABORTED, what,
                     "token %" PRIu64 " was minted by the leader of epoch %" PRIu64
                     ", which is gone (leader now %s, epoch %" PRIu64
                     "): complete it (ABORTED) where it was prepared and prepare again",
                     t->token_id, t->leader_epoch, c->leader, c->leader_epoch);
}

/* Size query, room check and the codec's own refusals. */
static int s_room(kvt_client_t *c, const char *what, int rc, const uint8_t *buf, size_t cap,
                  size_t need, const char *err)
{
    if (rc == 0)
        return 0;
    if (need == 0)
        return kvti_fail(c, KVT_INTERNAL, what, "%s", err);
    if (!buf && cap == 0)
        return 0; /* a size query: *len holds the size */
    return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                     "%zu bytes of room, the bytes take %zu (call with buf NULL and cap 0 "
                     "for the size)",
                     cap, need);
}

int kvt_token_export(kvt_client_t *c, const kvt_token_t *tok, uint8_t *buf, size_t cap, size_t *len)
{
    const char *W = "token_export";
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    if (!len)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "len is NULL");
    *len = 0;
    int rc = s_check_token(c, W, tok);
    if (rc < 0)
        return rc;
    if (tok->stale)
        return s_stale(c, W, tok);
    if (tok->kind == BUS_TOKEN_PUT && tok->segs && tok->segs->segments && tok->segs->next > 0)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "the token's layer-wise put stopped at segment %u of %u here: a put's "
                         "segments go in order in one process; export before its first "
                         "layer-wise job (or complete it and prepare again)",
                         tok->segs->next, tok->segs->segments);
    kvti_tokx_t x = {.kind = (uint16_t)tok->kind,
                     .n_keys = tok->n,
                     .token_id = tok->token_id,
                     .prepare_id = tok->prepare_id,
                     .lease_ms = tok->lease_ms,
                     .leader_epoch = tok->leader_epoch,
                     .keys = (const uint8_t *)tok->keys,
                     .payload = tok->payload,
                     .payload_len = tok->payload_len};
    int64_t age = 0;
    (void)kvti_token_lapsed(tok, &age);
    x.remaining_ms = age < 0                          ? tok->lease_ms
                     : (uint64_t)age >= tok->lease_ms ? 0
                                                      : tok->lease_ms - (uint64_t)age;
    x.segments = kvti_instance_segments(c, tok->instance_id, &x.bytes_per_block);
    if (x.segments == 0 && tok->imported) { /* passed on: as its exporter knew it */
        x.segments = tok->x_segments;
        x.bytes_per_block = tok->x_bpb;
    }
    snprintf(x.cluster, sizeof x.cluster, "%s", c->leader_cluster);
    snprintf(x.instance_id, sizeof x.instance_id, "%s", tok->instance_id);
    snprintf(x.request_id, sizeof x.request_id, "%s", tok->request_id);
    char err[256] = "";
    rc = kvti_tokx_encode(&x, buf, cap, len, err, sizeof err);
    rc = s_room(c, W, rc, buf, cap, *len, err);
    if (rc == 0)
        kvti_clear_error(c);
    return rc;
}

/* The scheduler's payload inside the bytes, against the fields around it. */
static int s_check_payload(kvt_client_t *c, const char *W, const kvti_tokx_t *x,
                           bus_token_view_t *v)
{
    if (x->payload_len == 0 && x->n_keys == 0)
        return 0; /* an empty window (every key already SERVING): nothing to move */
    if (x->payload_len > BUS_MAX_BLOB)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "a %u-byte token payload, above the protocol's %u", x->payload_len,
                         (unsigned)BUS_MAX_BLOB);
    char err[256];
    if (bus_token_decode(x->payload, x->payload_len, v, err, sizeof err) < 0)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "the scheduler's token inside: %s", err);
    if ((int)v->kind != (int)x->kind || v->n_entries != x->n_keys)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "the scheduler's token inside is of kind %d with %u entries, the "
                         "bytes say kind %u with %u keys",
                         (int)v->kind, v->n_entries, x->kind, x->n_keys);
    if (!(v->meta.flags & BUS_TOKEN_F_EXPORTABLE))
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "the scheduler did not mark token %" PRIu64 " exportable", x->token_id);
    if (v->meta.token_id != x->token_id || v->meta.leader_epoch != x->leader_epoch)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "the scheduler's token inside is token %" PRIu64 " of leader epoch "
                         "%" PRIu64 ", the bytes say token %" PRIu64 " of epoch %" PRIu64,
                         v->meta.token_id, v->meta.leader_epoch, x->token_id, x->leader_epoch);
    return 0;
}

/* The leader that minted the token against the one this handle knows. */
static int s_check_epoch(kvt_client_t *c, const char *W, const kvti_tokx_t *x)
{
    if (x->leader_epoch == 0)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "token %" PRIu64 " names no leader epoch",
                         x->token_id);
    if (x->leader_epoch > c->leader_epoch) { /* this handle may not have seen it yet */
        int rc = kvti_refresh_leader(c, W);
        if (rc < 0)
            return rc;
    }
    if (x->leader_epoch < c->leader_epoch)
        return kvti_fail(c, KVT_ABORTED, W,
                         "token %" PRIu64 " was minted by the leader of epoch %" PRIu64
                         ", which is gone (leader now %s, epoch %" PRIu64
                         "): its window went with it; prepare again",
                         x->token_id, x->leader_epoch, c->leader, c->leader_epoch);
    if (x->leader_epoch > c->leader_epoch)
        return kvti_fail(c, KVT_UNAVAILABLE, W,
                         "token %" PRIu64 " comes from leader epoch %" PRIu64
                         ", but this handle's leader (%s) is at epoch %" PRIu64
                         ": it has not found the new leader yet; try again",
                         x->token_id, x->leader_epoch, c->leader, c->leader_epoch);
    return 0;
}

int kvt_token_import(kvt_client_t *c, const uint8_t *bytes, size_t len, kvt_token_t **tokp)
{
    const char *W = "token_import";
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    if (!tokp)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "tok is NULL");
    *tokp = NULL;
    kvti_tokx_t *x = calloc(1, sizeof *x);
    bus_token_view_t *v = calloc(1, sizeof *v);
    if (!x || !v) {
        free(x);
        free(v);
        return kvti_fail(c, KVT_INTERNAL, W, "out of memory");
    }
    char err[256];
    int rc = 0;
    if (kvti_tokx_decode(bytes, len, x, err, sizeof err) < 0)
        rc = kvti_fail(c, KVT_INVALID_ARGUMENT, W, "%s", err);
    else if (strcmp(x->cluster, c->leader_cluster) != 0)
        rc = kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                       "token %" PRIu64 " is of cluster \"%s\", this handle's leader serves "
                       "\"%s\": import it on a handle connected to its own cluster",
                       x->token_id, x->cluster, c->leader_cluster);
    else if (x->instance_id[0] == '\0' || strlen(x->instance_id) > KVT_ID_MAX ||
             x->request_id[0] == '\0' || strlen(x->request_id) > KVT_ID_MAX)
        rc = kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                       "the instance and request ids must be 1..%d bytes (\"%s\", \"%s\")",
                       KVT_ID_MAX, x->instance_id, x->request_id);
    if (rc == 0)
        rc = s_check_payload(c, W, x, v);
    if (rc == 0)
        rc = s_check_epoch(c, W, x);
    struct kvt_token *t = NULL;
    if (rc == 0 && !(t = kvti_token_acquire(c, x->n_keys)))
        rc = kvti_fail(c, KVT_INTERNAL, W, "out of memory for a token of %u keys", x->n_keys);
    if (rc == 0 && x->payload_len > t->payload_cap) {
        rc = kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                       "a %u-byte payload for %u keys, at most %u: not a scheduler's token",
                       x->payload_len, x->n_keys, t->payload_cap);
        kvti_token_release(c, t);
    }
    if (rc < 0) {
        free(x);
        free(v);
        return rc;
    }
    t->kind = (bus_token_kind_t)x->kind;
    /* both checked to fit (KVT_ID_MAX) above */
    memcpy(t->instance_id, x->instance_id, strlen(x->instance_id) + 1);
    memcpy(t->request_id, x->request_id, strlen(x->request_id) + 1);
    t->token_id = x->token_id;
    t->prepare_id = x->prepare_id;
    t->lease_ms = x->lease_ms;
    /* the lease runs from the prepare: what was left at export is left now */
    t->minted_ms = zclock_mono() - (int64_t)(x->lease_ms - x->remaining_ms);
    t->leader_epoch = x->leader_epoch;
    t->n = x->n_keys;
    memcpy(t->keys, x->keys, (size_t)t->n * sizeof *t->keys);
    memset(t->ok, 0, (size_t)t->n * sizeof *t->ok);
    memset(t->checksums, 0, (size_t)t->n * sizeof *t->checksums);
    t->payload_len = x->payload_len;
    if (x->payload_len)
        memcpy(t->payload, x->payload, x->payload_len);
    memset(&t->view, 0, sizeof t->view);
    t->view.kind = t->kind;
    if (t->payload_len) /* the view points into the token's own copy */
        (void)bus_token_decode(t->payload, t->payload_len, &t->view, err, sizeof err);
    t->imported = true;
    t->x_segments = x->segments;
    t->x_bpb = x->bytes_per_block;
    free(x);
    free(v);
    *tokp = t;
    kvti_clear_error(c);
    return 0;
}

int kvt_token_result_export(kvt_client_t *c, const kvt_token_t *tok, uint8_t *buf, size_t cap,
                            size_t *len)
{
    const char *W = "token_result_export";
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    if (!len)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "len is NULL");
    *len = 0;
    int rc = s_check_token(c, W, tok);
    if (rc < 0)
        return rc;
    if (tok->stale)
        return s_stale(c, W, tok);
    uint8_t *out = NULL;
    if (tok->n > 0 && !(out = malloc(tok->n)))
        return kvti_fail(c, KVT_INTERNAL, W, "out of memory");
    const kvti_segs_t *g = tok->segs && tok->segs->segments ? tok->segs : NULL;
    for (uint32_t i = 0; i < tok->n; i++)
        out[i] = (uint8_t)((tok->ok[i] ? KVTI_OUT_MOVED : 0u) |
                           (g && g->failed[i] ? KVTI_OUT_SEG_FAILED : 0u));
    kvti_tokr_t r = {.kind = (uint16_t)tok->kind,
                     .n_keys = tok->n,
                     .token_id = tok->token_id,
                     .prepare_id = tok->prepare_id,
                     .segments = g ? g->segments : 0,
                     .seg_next = g ? g->next : 0,
                     .seg_bytes = g ? g->seg_bytes : 0,
                     .keys = (const uint8_t *)tok->keys,
                     .outcome = out,
                     .sums = tok->kind == BUS_TOKEN_PUT ? tok->checksums : NULL};
    char err[256] = "";
    rc = kvti_tokr_encode(&r, buf, cap, len, err, sizeof err);
    free(out);
    rc = s_room(c, W, rc, buf, cap, *len, err);
    if (rc == 0)
        kvti_clear_error(c);
    return rc;
}

/* A decoded result against the token it is applied to. */
static int s_check_result(kvt_client_t *c, const char *W, const struct kvt_token *t,
                          const kvti_tokr_t *r)
{
    if (r->token_id != t->token_id || r->prepare_id != t->prepare_id)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "the result is of token %" PRIu64 " (prepare %" PRIu64
                         "), this token is %" PRIu64 " (prepare %" PRIu64 ")",
                         r->token_id, r->prepare_id, t->token_id, t->prepare_id);
    if (r->kind != (uint16_t)t->kind || r->n_keys != t->n)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "the result is of kind %u over %u keys, the token of kind %d over %u",
                         r->kind, r->n_keys, (int)t->kind, t->n);
    for (uint32_t i = 0; i < t->n; i++)
        if (memcmp(r->keys + (size_t)i * KVT_KEY_BYTES, t->keys[i].b, KVT_KEY_BYTES) != 0)
            return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                             "key %u of the result is not the token's key %u", i, i);
    for (uint32_t i = 0; t->kind != BUS_TOKEN_PUT && i < t->n; i++)
        if (kvti_tokr_checksum(r, i) != 0)
            return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                             "key %u: a checksum in the result of a %s token (only puts have)", i,
                             t->kind == BUS_TOKEN_GET ? "get" : "prefetch");
    if (r->segments) {
        uint64_t bpb = 0;
        uint32_t segs = kvti_instance_segments(c, t->instance_id, &bpb);
        if (r->segments < 2 || (segs > 1 && (segs != r->segments || bpb / segs != r->seg_bytes)))
            return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                             "the result's layer-wise state is %u segments of %" PRIu64
                             " bytes, the instance has %u of %" PRIu64,
                             r->segments, r->seg_bytes, segs, segs ? bpb / segs : 0);
        if (t->kind != BUS_TOKEN_PUT && r->seg_next != 0)
            return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                             "a next segment (%u) in the result of a get", r->seg_next);
    }
    return 0;
}

int kvt_token_result_import(kvt_client_t *c, kvt_token_t *tok, const uint8_t *bytes, size_t len)
{
    const char *W = "token_result_import";
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    int rc = s_check_token(c, W, tok);
    if (rc < 0)
        return rc;
    if (tok->imported)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "the token was imported here: its result goes back to the process "
                         "that prepared it (kvt_token_result_export)");
    kvti_tokr_t r;
    char err[256];
    if (kvti_tokr_decode(bytes, len, &r, err, sizeof err) < 0)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "%s", err);
    rc = s_check_result(c, W, tok, &r);
    if (rc < 0)
        return rc;
    if (r.segments) {
        bool *failed = malloc(tok->n ? tok->n : 1);
        if (!failed)
            return kvti_fail(c, KVT_INTERNAL, W, "out of memory");
        for (uint32_t i = 0; i < tok->n; i++)
            failed[i] = (r.outcome[i] & KVTI_OUT_SEG_FAILED) != 0;
        rc = kvti_segs_adopt(tok, r.segments, r.seg_bytes, r.seg_next, failed);
        free(failed);
        if (rc < 0)
            return kvti_fail(c, KVT_INTERNAL, W, "out of memory for the layer-wise state");
    } else if (tok->segs) {
        tok->segs->segments = 0; /* the worker moved whole blocks */
    }
    for (uint32_t i = 0; i < tok->n; i++) {
        tok->ok[i] = (r.outcome[i] & KVTI_OUT_MOVED) != 0;
        tok->checksums[i] = kvti_tokr_checksum(&r, i);
    }
    kvti_clear_error(c);
    return 0;
}

int kvt_token_release(kvt_client_t *c, kvt_token_t **tokp)
{
    const char *W = "token_release";
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    if (!tokp || !*tokp)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "no token");
    struct kvt_token *t = *tokp;
    if (t->owner != c || !t->live)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "the token belongs to another handle or was already released");
    if (!t->imported)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "this handle prepared the token: complete it (kvt_complete_*), which "
                         "closes its window; only an imported token is released");
    if (t->jobs > 0)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "a job on this token is still in flight: collect it with "
                         "kvt_get_finished or kvt_wait first (the token is kept)");
    kvti_token_release(c, t);
    *tokp = NULL;
    kvti_clear_error(c);
    return 0;
}
