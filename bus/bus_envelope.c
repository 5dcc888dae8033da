/* bus_envelope.c — frame 0 codec, payload-frame validation and zero-copy send.
 * Owns the table of body kinds: name, direction, which callback fields carry
 * which array role, and what payload frames the body declares. Every decode
 * path checks before it trusts; nothing here asserts on input. */
#include "bus_envelope.h"

#include "bus_env_keys.h"

#include <errno.h>
#include <inttypes.h>
#include <pb_decode.h>
#include <pb_encode.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

/* ---- the body table ---- */

typedef enum {
    S_PAYLOAD_NONE = 0, /* no payload frames */
    S_PAYLOAD_WRITE,    /* WriteSlotsRequest: slots x segments frames, sizes one per frame */
    S_PAYLOAD_SIZES,    /* ReadSlotsReply: one frame per entry of sizes */
} s_payload_rule_t;

#define S_MAX_BINDS 5

typedef struct {
    uint16_t offset; /* of the pb_callback_t inside the body struct */
    bus_role_t role;
    const char *field;
} s_bind_t;

typedef struct {
    const char *name;
    bus_dir_t dir;
    s_payload_rule_t payload;
    s_bind_t bind[S_MAX_BINDS + 1]; /* ends at field == NULL */
} s_body_t;

#define S_TAG_LIMIT 128

#define B(msg, member, role)                                                                       \
    {                                                                                              \
        offsetof(kvtier_##msg, member), BUS_ROLE_##role, #member                                   \
    }
#define S_BODY(tag, msg, dir, rule, ...)                                                           \
    [kvtier_Envelope_##tag##_tag] = {#msg, BUS_DIR_##dir, S_PAYLOAD_##rule, {__VA_ARGS__}}
#define REQ(tag, msg, ...) S_BODY(tag, msg, REQUEST, NONE, __VA_ARGS__)
#define REP(tag, msg, ...) S_BODY(tag, msg, REPLY, NONE, __VA_ARGS__)

static const s_body_t s_bodies[S_TAG_LIMIT] = {
    /* meta plane */
    REQ(register_instance_req, RegisterInstanceRequest),
    REP(register_instance_rep, RegisterInstanceReply),
    REQ(request_begin_req, RequestBeginRequest),
    REP(request_begin_rep, RequestBeginReply),
    REQ(request_end_req, RequestEndRequest),
    REP(request_end_rep, RequestEndReply),
    REQ(lookup_req, LookupRequest, B(LookupRequest, keys, KEYS)),
    REP(lookup_rep, LookupReply, B(LookupReply, hit, MASK), B(LookupReply, tier_ids, TIER_IDS)),
    REQ(prepare_get_req, PrepareGetRequest, B(PrepareGetRequest, keys, KEYS)),
    REP(prepare_get_rep, PrepareGetReply, B(PrepareGetReply, token.keys, KEYS),
        B(PrepareGetReply, token.payload, PAYLOAD)),
    REQ(complete_get_req, CompleteGetRequest, B(CompleteGetRequest, success, MASK)),
    REP(complete_get_rep, CompleteGetReply),
    REQ(prepare_put_req, PreparePutRequest, B(PreparePutRequest, keys, KEYS),
        B(PreparePutRequest, token_ids, TOKEN_IDS)),
    REP(prepare_put_rep, PreparePutReply, B(PreparePutReply, token.keys, KEYS),
        B(PreparePutReply, token.payload, PAYLOAD)),
    REQ(complete_put_req, CompletePutRequest, B(CompletePutRequest, success, MASK),
        B(CompletePutRequest, checksums, CHECKSUMS)),
    REP(complete_put_rep, CompletePutReply),
    REQ(prepare_prefetch_req, PreparePrefetchRequest, B(PreparePrefetchRequest, keys, KEYS)),
    REP(prepare_prefetch_rep, PreparePrefetchReply, B(PreparePrefetchReply, token.keys, KEYS),
        B(PreparePrefetchReply, token.payload, PAYLOAD)),
    REQ(complete_prefetch_req, CompletePrefetchRequest, B(CompletePrefetchRequest, success, MASK)),
    REP(complete_prefetch_rep, CompletePrefetchReply),
    REQ(copy_prefetch_req, CopyPrefetchRequest),
    REP(copy_prefetch_rep, CopyPrefetchReply, B(CopyPrefetchReply, success, MASK)),
    REQ(prepare_req, PrepareRequest, B(PrepareRequest, keys, KEYS),
        B(PrepareRequest, token_ids, TOKEN_IDS)),
    REP(prepare_rep, PrepareReply, B(PrepareReply, token.keys, KEYS),
        B(PrepareReply, token.payload, PAYLOAD)),
    REQ(complete_req, CompleteRequest, B(CompleteRequest, success, MASK),
        B(CompleteRequest, checksums, CHECKSUMS)),
    REP(complete_rep, CompleteReply),
    REQ(touch_req, TouchRequest, B(TouchRequest, keys, KEYS)),
    REP(touch_rep, TouchReply),
    REQ(remove_req, RemoveRequest, B(RemoveRequest, keys, KEYS)),
    REP(remove_rep, RemoveReply),
    REQ(cluster_info_req, ClusterInfoRequest),
    REP(cluster_info_rep, ClusterInfoReply),
    REQ(stats_req, StatsRequest),
    REP(stats_rep, StatsReply),
    /* tier plane */
    S_BODY(write_slots_req, WriteSlotsRequest, REQUEST, WRITE, B(WriteSlotsRequest, slots, SLOTS),
           B(WriteSlotsRequest, sizes, SIZES), B(WriteSlotsRequest, token, PAYLOAD)),
    REP(write_slots_rep, WriteSlotsReply),
    REQ(read_slots_req, ReadSlotsRequest, B(ReadSlotsRequest, slots, SLOTS),
        B(ReadSlotsRequest, sizes, SIZES), B(ReadSlotsRequest, keys, KEYS),
        B(ReadSlotsRequest, token, PAYLOAD)),
    S_BODY(read_slots_rep, ReadSlotsReply, REPLY, SIZES, B(ReadSlotsReply, sizes, SIZES),
           B(ReadSlotsReply, checksums, CHECKSUMS)),
    REQ(put_header_req, PutHeaderRequest, B(PutHeaderRequest, slots, SLOTS),
        B(PutHeaderRequest, keys, KEYS), B(PutHeaderRequest, sizes, SIZES),
        B(PutHeaderRequest, checksums, CHECKSUMS), B(PutHeaderRequest, token, PAYLOAD)),
    REP(put_header_rep, PutHeaderReply),
    REQ(copy_slots_req, CopySlotsRequest, B(CopySlotsRequest, slots, SLOTS),
        B(CopySlotsRequest, dst_slots, DST_SLOTS), B(CopySlotsRequest, keys, KEYS),
        B(CopySlotsRequest, token, PAYLOAD)),
    REP(copy_slots_rep, CopySlotsReply, B(CopySlotsReply, success, MASK)),
    REQ(delete_slots_req, DeleteSlotsRequest, B(DeleteSlotsRequest, slots, SLOTS),
        B(DeleteSlotsRequest, keys, KEYS), B(DeleteSlotsRequest, token, PAYLOAD)),
    REP(delete_slots_rep, DeleteSlotsReply),
    REQ(probe_req, ProbeRequest, B(ProbeRequest, slots, SLOTS), B(ProbeRequest, keys, KEYS)),
    REP(probe_rep, ProbeReply, B(ProbeReply, present, MASK)),
    REQ(inventory_req, InventoryRequest),
    REP(inventory_rep, InventoryReply, B(InventoryReply, records, PAYLOAD)),
    REP(tier_notice, TierNotice), /* unsolicited (corr_id 0): bus_client_set_notice */
    /* internal plane */
    REQ(reclaim_candidates_req, ReclaimCandidatesRequest),
    REP(reclaim_candidates_rep, ReclaimCandidatesReply),
    REQ(demote_done_req, DemoteDoneRequest),
    REP(demote_done_rep, DemoteDoneReply),
    REQ(gc_scan_req, GcScanRequest),
    REP(gc_scan_rep, GcScanReply),
    REQ(gc_drop_req, GcDropRequest),
    REP(gc_drop_rep, GcDropReply),
    REQ(tier_membership_req, TierMembershipRequest),
    REP(tier_membership_rep, TierMembershipReply),
    REQ(quota_enforce_req, QuotaEnforceRequest),
    REP(quota_enforce_rep, QuotaEnforceReply),
    REQ(migrate_job_req, MigrateJobRequest),
    REP(migrate_job_rep, MigrateJobReply),
    /* admin */
    REQ(admin_status_req, AdminStatusRequest),
    REP(admin_status_rep, AdminStatusReply),
    REQ(admin_trim_req, AdminTrimRequest),
    REP(admin_trim_rep, AdminTrimReply),
    REQ(admin_resign_req, AdminResignRequest),
    REP(admin_resign_rep, AdminResignReply),
    REQ(admin_drain_req, AdminDrainRequest),
    REP(admin_drain_rep, AdminDrainReply),
};

static const s_body_t *s_body(uint32_t tag)
{
    if (tag >= S_TAG_LIMIT || !s_bodies[tag].name)
        return NULL;
    return &s_bodies[tag];
}

const char *bus_body_name(pb_size_t tag)
{
    const s_body_t *b = s_body(tag);
    return b ? b->name : NULL;
}

bus_dir_t bus_body_dir(pb_size_t tag)
{
    const s_body_t *b = s_body(tag);
    return b ? b->dir : BUS_DIR_ANY;
}

pb_size_t bus_body_reply_tag(pb_size_t req_tag)
{
    if (bus_body_dir(req_tag) != BUS_DIR_REQUEST || bus_body_dir(req_tag + 1) != BUS_DIR_REPLY)
        return 0;
    return (pb_size_t)(req_tag + 1);
}

uint32_t bus_body_count(void)
{
    uint32_t n = 0;
    for (uint32_t t = 0; t < S_TAG_LIMIT; t++)
        n += s_bodies[t].name != NULL;
    return n;
}

pb_size_t bus_body_tag_at(uint32_t i)
{
    for (uint32_t t = 0; t < S_TAG_LIMIT; t++) {
        if (s_bodies[t].name && i-- == 0)
            return (pb_size_t)t;
    }
    return 0;
}

uint32_t bus_body_arrays(pb_size_t tag, bus_role_t *roles, const char **fields, uint32_t max)
{
    const s_body_t *b = s_body(tag);
    uint32_t n = 0;
    if (!b)
        return 0;
    for (; b->bind[n].field; n++) {
        if (n < max && roles)
            roles[n] = b->bind[n].role;
        if (n < max && fields)
            fields[n] = b->bind[n].field;
    }
    return n;
}

static const char *s_name(pb_size_t tag)
{
    const char *name = bus_body_name(tag);
    return name ? name : "reply without body";
}

static pb_callback_t *s_cb(void *body, const s_bind_t *bind)
{
    return (pb_callback_t *)((uint8_t *)body + bind->offset);
}

/* Decoded or encoded envelopes keep no pointers to our arrays or stack: a
 * callback left set would be misread by a later pb_encode (funcs is a union). */
static void s_unbind(kvtier_Envelope *env)
{
    const s_body_t *b = s_body(env->which_body);
    env->cb_body.funcs.decode = NULL;
    env->cb_body.arg = NULL;
    if (!b)
        return;
    for (const s_bind_t *bind = b->bind; bind->field; bind++)
        *s_cb(&env->body, bind) = (pb_callback_t){0};
}

/* ---- status helpers ---- */

static int s_invalid(kvtier_Status *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int s_invalid(kvtier_Status *st, const char *fmt, ...)
{
    va_list ap;
    st->code = kvtier_StatusCode_STATUS_INVALID_ARGUMENT;
    va_start(ap, fmt);
    vsnprintf(st->message, sizeof st->message, fmt, ap);
    va_end(ap);
    return -(int)kvtier_StatusCode_STATUS_INVALID_ARGUMENT;
}

static void s_ok(kvtier_Status *st)
{
    st->code = kvtier_StatusCode_STATUS_OK;
    st->message[0] = '\0';
}

static int s_array_failure(kvtier_Status *st, const bus_arrays_t *arr, pb_size_t tag,
                           const char *verb)
{
    const s_body_t *b = s_body(tag);
    const char *field = bus_role_name(arr->error.role);
    for (const s_bind_t *bind = b ? b->bind : NULL; bind && bind->field; bind++)
        if (bind->role == arr->error.role)
            field = bind->field;
    char where[96], text[200];
    snprintf(where, sizeof where, "%s.%s", s_name(tag), field);
    bus_arrays_error_text(arr, where, text, sizeof text);
    return s_invalid(st, "%s: %s", verb, text);
}

/* ---- init ---- */

void bus_env_init(kvtier_Envelope *env, pb_size_t body_tag, const char *sender)
{
    memset(env, 0, sizeof *env);
    env->version = BUS_PROTOCOL_VERSION;
    env->which_body = body_tag;
    if (sender)
        snprintf(env->sender, sizeof env->sender, "%s", sender);
}

void bus_env_init_reply(kvtier_Envelope *rep, const kvtier_Envelope *req, pb_size_t body_tag,
                        const char *sender)
{
    uint64_t corr_id = req ? req->corr_id : 0;
    bus_env_init(rep, body_tag, sender);
    rep->corr_id = corr_id;
    rep->has_status = true;
    rep->status.code = kvtier_StatusCode_STATUS_OK;
}

/* ---- peek ---- */

int bus_env_peek(const void *buf, size_t len, bus_env_header_t *hdr)
{
    memset(hdr, 0, sizeof *hdr);
    if (!buf || len == 0)
        return 0;
    pb_istream_t s = pb_istream_from_buffer(buf, len);
    while (s.bytes_left > 0) {
        pb_wire_type_t wt;
        uint32_t tag;
        bool eof = false;
        if (!pb_decode_tag(&s, &wt, &tag, &eof)) {
            if (eof)
                break; /* a 0 byte ends a message, as in pb_decode */
            return -(int)kvtier_StatusCode_STATUS_INVALID_ARGUMENT;
        }
        uint64_t v;
        if (tag == kvtier_Envelope_corr_id_tag && wt == PB_WT_VARINT) {
            if (!pb_decode_varint(&s, &v))
                return -(int)kvtier_StatusCode_STATUS_INVALID_ARGUMENT;
            hdr->corr_id = v;
            hdr->has_corr_id = true;
            continue;
        }
        if (tag == kvtier_Envelope_version_tag && wt == PB_WT_VARINT) {
            if (!pb_decode_varint(&s, &v))
                return -(int)kvtier_StatusCode_STATUS_INVALID_ARGUMENT;
            hdr->version = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
            continue;
        }
        if (tag >= 16) {
            hdr->bodies++;
            if (s_body(tag))
                hdr->body_tag = (pb_size_t)tag;
            else if (!hdr->unknown_tag)
                hdr->unknown_tag = tag;
        }
        if (!pb_skip_field(&s, wt))
            return -(int)kvtier_StatusCode_STATUS_INVALID_ARGUMENT;
    }
    return 0;
}

/* ---- encode ---- */

static int s_encode_prepare(kvtier_Envelope *env, bus_arrays_t *arr, kvtier_Status *st)
{
    env->cb_body.funcs.encode = NULL;
    env->cb_body.arg = NULL;
    if (arr)
        arr->error = (bus_array_error_t){0};
    if (env->which_body == 0)
        return 0;
    const s_body_t *b = s_body(env->which_body);
    if (!b)
        return s_invalid(st, "cannot encode body kind %u: not a member of Envelope.body",
                         (unsigned)env->which_body);
    for (const s_bind_t *bind = b->bind; bind->field; bind++)
        bus_arrays_bind_encode(s_cb(&env->body, bind), arr, bind->role);
    return 0;
}

static int s_encode_failed(kvtier_Envelope *env, bus_arrays_t *arr, pb_ostream_t *s,
                           kvtier_Status *st)
{
    int rc;
    if (arr && arr->error.fault != BUS_ARRAY_OK)
        rc = s_array_failure(st, arr, env->which_body, "encode");
    else
        rc = s_invalid(st, "encode %s: %s", s_name(env->which_body), PB_GET_ERROR(s));
    s_unbind(env);
    return rc;
}

int bus_env_encoded_size(kvtier_Envelope *env, bus_arrays_t *arr, size_t *size, kvtier_Status *st)
{
    kvtier_Status scratch;
    if (!st)
        st = &scratch;
    int rc = s_encode_prepare(env, arr, st);
    if (rc < 0)
        return rc;
    pb_ostream_t s = PB_OSTREAM_SIZING;
    if (!pb_encode(&s, kvtier_Envelope_fields, env))
        return s_encode_failed(env, arr, &s, st);
    s_unbind(env);
    *size = s.bytes_written;
    s_ok(st);
    return 0;
}

int bus_env_encode_buf(kvtier_Envelope *env, bus_arrays_t *arr, uint8_t *buf, size_t cap,
                       size_t *len, kvtier_Status *st)
{
    kvtier_Status scratch;
    if (!st)
        st = &scratch;
    int rc = s_encode_prepare(env, arr, st);
    if (rc < 0)
        return rc;
    pb_ostream_t s = pb_ostream_from_buffer(buf, cap);
    if (!pb_encode(&s, kvtier_Envelope_fields, env))
        return s_encode_failed(env, arr, &s, st);
    s_unbind(env);
    *len = s.bytes_written;
    s_ok(st);
    return 0;
}

int bus_env_encode(kvtier_Envelope *env, bus_arrays_t *arr, zframe_t **frame_out, kvtier_Status *st)
{
    kvtier_Status scratch;
    if (!st)
        st = &scratch;
    *frame_out = NULL;
    size_t size = 0, len = 0;
    int rc = bus_env_encoded_size(env, arr, &size, st);
    if (rc < 0)
        return rc;
    zframe_t *frame = zframe_new(NULL, size);
    if (!frame)
        return bus_status_set(st, kvtier_StatusCode_STATUS_INTERNAL,
                              "out of memory for a %zu byte frame 0", size);
    rc = bus_env_encode_buf(env, arr, zframe_data(frame), size, &len, st);
    if (rc == 0 && len != size)
        rc = bus_status_set(st, kvtier_StatusCode_STATUS_INTERNAL,
                            "%s encoded to %zu bytes, sized %zu: arrays changed while encoding",
                            s_name(env->which_body), len, size);
    if (rc < 0) {
        zframe_destroy(&frame);
        return rc;
    }
    *frame_out = frame;
    return 0;
}

/* ---- decode ---- */

typedef struct {
    bus_arrays_t *arr;
    uint32_t bodies;
} s_dec_ctx_t;

/* Envelope.cb_body: runs when the decoder reaches a body, before the body's
 * fields, so the arrays of exactly that body kind get bound. */
static bool s_bind_body(pb_istream_t *stream, const pb_field_t *field, void **arg)
{
    s_dec_ctx_t *ctx = *arg;
    const s_body_t *b = s_body(field->tag);
    if (!b)
        PB_RETURN_ERROR(stream, "unknown body kind");
    if (++ctx->bodies > 1)
        PB_RETURN_ERROR(stream, "more than one body");
    for (const s_bind_t *bind = b->bind; bind->field; bind++)
        bus_arrays_bind_decode(s_cb(field->pData, bind), ctx->arr, bind->role);
    return true;
}

static int s_check_header(const void *buf, size_t len, bus_dir_t dir, bus_env_header_t *h,
                          kvtier_Status *st)
{
    if (!buf || len == 0)
        return s_invalid(st, "empty frame 0: the message carries no envelope");
    if (len > BUS_MAX_FRAME0)
        return s_invalid(st, "frame 0 is %zu bytes, over the %u byte limit", len, BUS_MAX_FRAME0);
    if (bus_env_peek(buf, len, h) < 0)
        return s_invalid(st,
                         "frame 0 (%zu bytes) is not a protobuf Envelope: truncated or "
                         "garbage bytes",
                         len);
    if (h->version == 0)
        return s_invalid(st, "protocol version missing (Envelope.version); this end speaks %d",
                         BUS_PROTOCOL_VERSION);
    if (h->version != BUS_PROTOCOL_VERSION)
        return s_invalid(st, "protocol version %u not supported; this end speaks %d", h->version,
                         BUS_PROTOCOL_VERSION);
    if (h->unknown_tag)
        return s_invalid(st,
                         "unknown body kind: Envelope field %u is not a message this end "
                         "knows (peer built from newer schemas?)",
                         h->unknown_tag);
    if (h->bodies > 1)
        return s_invalid(st, "%u bodies present; a message carries exactly one", h->bodies);
    if (h->bodies == 0 && dir == BUS_DIR_REQUEST)
        return s_invalid(st, "no body: a request must carry exactly one body kind");
    bus_dir_t got = bus_body_dir(h->body_tag);
    if (h->bodies == 1 && dir != BUS_DIR_ANY && got != dir)
        return s_invalid(st, "%s received where a %s was expected", s_name(h->body_tag),
                         dir == BUS_DIR_REQUEST ? "request" : "reply");
    return 0;
}

/* Bodies that carry their keys as a direct field: that field's number, for the
 * fast path (bus_env_keys.h); 0 for every other body. */
static const uint8_t s_keys_field[S_TAG_LIMIT] = {
    [kvtier_Envelope_lookup_req_tag] = kvtier_LookupRequest_keys_tag,
    [kvtier_Envelope_prepare_get_req_tag] = kvtier_PrepareGetRequest_keys_tag,
    [kvtier_Envelope_prepare_put_req_tag] = kvtier_PreparePutRequest_keys_tag,
    [kvtier_Envelope_prepare_prefetch_req_tag] = kvtier_PreparePrefetchRequest_keys_tag,
    [kvtier_Envelope_prepare_req_tag] = kvtier_PrepareRequest_keys_tag,
    [kvtier_Envelope_touch_req_tag] = kvtier_TouchRequest_keys_tag,
    [kvtier_Envelope_remove_req_tag] = kvtier_RemoveRequest_keys_tag,
    [kvtier_Envelope_read_slots_req_tag] = kvtier_ReadSlotsRequest_keys_tag,
    [kvtier_Envelope_put_header_req_tag] = kvtier_PutHeaderRequest_keys_tag,
    [kvtier_Envelope_copy_slots_req_tag] = kvtier_CopySlotsRequest_keys_tag,
    [kvtier_Envelope_delete_slots_req_tag] = kvtier_DeleteSlotsRequest_keys_tag,
    [kvtier_Envelope_probe_req_tag] = kvtier_ProbeRequest_keys_tag,
};

/* The envelope without its keys, when the fast path takes it: what is left of a
 * request is its small fields (ids, mode, counts), far under this. */
#define S_REST_MAX 4096u

static bool s_fast_keys = true;
static _Atomic uint64_t s_fast_taken;

void bus_env_set_fast_keys(bool on)
{
    s_fast_keys = on;
}

uint64_t bus_env_fast_keys_taken(void)
{
    return s_fast_taken;
}

static bool s_decode_pb(const void *buf, size_t len, kvtier_Envelope *env, bus_arrays_t *arr,
                        const char **why)
{
    s_dec_ctx_t ctx = {.arr = arr, .bodies = 0};
    env->cb_body.funcs.decode = s_bind_body;
    env->cb_body.arg = &ctx;
    pb_istream_t s = pb_istream_from_buffer(buf, len);
    bool ok = pb_decode(&s, kvtier_Envelope_fields, env);
    s_unbind(env);
    *why = ok ? NULL : PB_GET_ERROR(&s);
    return ok;
}

int bus_env_decode(const void *buf, size_t len, bus_dir_t dir, kvtier_Envelope *env,
                   bus_arrays_t *arr, kvtier_Status *st)
{
    kvtier_Status scratch;
    bus_arrays_t none = {0};
    if (!st)
        st = &scratch;
    if (!arr)
        arr = &none;
    bus_arrays_clear(arr);

    bus_env_header_t h;
    int rc = s_check_header(buf, len, dir, &h, st);
    if (rc < 0)
        return rc;

    /* the keys by hand, nanopb for the rest (bus_env_keys.h); on any doubt, or if
     * the rest fails, the whole frame the slow way, for the same error */
    bool ok = false;
    const char *why = NULL;
    uint32_t kf = h.body_tag < S_TAG_LIMIT ? s_keys_field[h.body_tag] : 0;
    if (s_fast_keys && kf) {
        uint8_t small[S_REST_MAX];
        /* the rest is never longer than the frame: a large one (a tier batch's
         * parallel arrays) goes to the heap */
        uint8_t *rest = len <= sizeof small ? small : malloc(len);
        size_t rest_len = 0;
        uint32_t n = 0, cap = arr->keys.keys ? arr->keys.cap : 0;
        if (cap > BUS_MAX_ARRAY)
            cap = BUS_MAX_ARRAY;
        if (rest && bus_env_keys_split(buf, len, h.body_tag, kf, arr->keys.keys, cap, &n, rest,
                                       rest == small ? sizeof small : len, &rest_len)) {
            ok = s_decode_pb(rest, rest_len, env, arr, &why);
            if (ok) {
                arr->keys.n = n;
                s_fast_taken++;
            } else {
                bus_arrays_clear(arr);
            }
        }
        if (rest != small)
            free(rest);
    }
    if (!ok)
        ok = s_decode_pb(buf, len, env, arr, &why);
    if (!ok) {
        if (arr->error.fault != BUS_ARRAY_OK)
            return s_array_failure(st, arr, h.body_tag, "decode");
        return s_invalid(st,
                         "frame 0 (%s): %s; a field is malformed or over its bound "
                         "(bounds: schemas/*.options)",
                         s_name(h.body_tag), why);
    }
    if (env->which_body == 0 &&
        (!env->has_status || env->status.code == kvtier_StatusCode_STATUS_OK))
        return s_invalid(st, "no body and no error status: a reply without a body must "
                             "carry a non-OK status");
    s_ok(st);
    return 0;
}

/* ---- payload frames ---- */

int bus_env_check_payload(const kvtier_Envelope *env, const bus_arrays_t *arr, uint32_t nframes,
                          size_t (*size_at)(void *ctx, uint32_t i), void *ctx, kvtier_Status *st)
{
    kvtier_Status scratch;
    if (!st)
        st = &scratch;
    const s_body_t *b = s_body(env->which_body);
    const char *name = s_name(env->which_body);
    s_payload_rule_t rule = b ? b->payload : S_PAYLOAD_NONE;
    uint32_t nsizes = arr ? arr->sizes.n : 0;

    if (rule == S_PAYLOAD_NONE) {
        if (nframes != 0)
            return s_invalid(st, "%s carries no payload but %u payload frame%s present", name,
                             nframes, nframes == 1 ? " is" : "s are");
        s_ok(st);
        return 0;
    }
    if (rule == S_PAYLOAD_WRITE) {
        const kvtier_WriteSlotsRequest *w = &env->body.write_slots_req;
        uint32_t segs = w->segments ? w->segments : 1;
        uint32_t nslots = arr ? arr->slots.n : 0;
        if (segs > BUS_MAX_SEGMENTS)
            return s_invalid(st, "%s: %u segments per slot, the limit is %u", name, segs,
                             BUS_MAX_SEGMENTS);
        uint64_t declared = (uint64_t)nslots * segs;
        /* transport ucx: the bytes wait in the sender's staging region, not in frames */
        if (w->ucx_region != 0 && nframes != 0)
            return s_invalid(st,
                             "%s names UCX staging region %016" PRIx64 " for its bytes but "
                             "carries %u payload frames: give one or the other",
                             name, w->ucx_region, nframes);
        if (w->ucx_region == 0 && declared != nframes)
            return s_invalid(st,
                             "%s: %u slots declared (%u segment%s each) but %u payload "
                             "frames present",
                             name, nslots, segs, segs == 1 ? "" : "s", nframes);
        if (nsizes != declared)
            return s_invalid(st,
                             "%s: %" PRIu64 " payload frames need %" PRIu64 " sizes, sizes has %u",
                             name, declared, declared, nsizes);
    } else if (nsizes != nframes) {
        return s_invalid(st, "%s: sizes declares %u payload frames but %u are present", name,
                         nsizes, nframes);
    }
    for (uint32_t i = 0; i < nframes; i++) {
        size_t got = size_at(ctx, i);
        if (got != arr->sizes.v[i])
            return s_invalid(st, "%s: payload frame %u is %zu bytes but sizes[%u] says %" PRIu64,
                             name, i, got, i, arr->sizes.v[i]);
    }
    s_ok(st);
    return 0;
}

static size_t s_payload_size_at(void *ctx, uint32_t i)
{
    return ((const bus_payload_t *)ctx)[i].size;
}

typedef struct {
    zmsg_t *msg;
    zframe_t *cur;
} s_frame_cursor_t;

/* bus_env_check_payload asks for frames in increasing order: walk the zmsg. */
static size_t s_frame_size_at(void *ctx, uint32_t i)
{
    s_frame_cursor_t *c = ctx;
    (void)i;
    c->cur = zmsg_next(c->msg);
    return c->cur ? zframe_size(c->cur) : 0;
}

void bus_payload_release(const bus_payload_t *payload, uint32_t npayload)
{
    for (uint32_t i = 0; payload && i < npayload; i++)
        if (payload[i].free_fn)
            payload[i].free_fn((void *)payload[i].data, payload[i].hint);
}

int bus_msg_encode(kvtier_Envelope *env, bus_arrays_t *arr, const bus_payload_t *payload,
                   uint32_t npayload, zmsg_t **msg_out, kvtier_Status *st)
{
    kvtier_Status scratch;
    if (!st)
        st = &scratch;
    *msg_out = NULL;
    zframe_t *f0 = NULL;
    zmsg_t *msg = NULL;
    int rc = bus_env_check_payload(env, arr, npayload, s_payload_size_at, (void *)payload, st);
    if (rc < 0)
        goto out_release;
    rc = bus_env_encode(env, arr, &f0, st);
    if (rc < 0)
        goto out_release;
    msg = zmsg_new();
    if (!msg || zmsg_append(msg, &f0) != 0)
        goto out_nomem;
    for (uint32_t i = 0; i < npayload; i++) {
        zframe_t *f = zframe_new(payload[i].data, payload[i].size);
        if (!f || zmsg_append(msg, &f) != 0)
            goto out_nomem;
    }
    bus_payload_release(payload, npayload);
    *msg_out = msg;
    return 0;

out_nomem:
    rc = bus_status_set(st, kvtier_StatusCode_STATUS_INTERNAL, "out of memory building a message");
    zframe_destroy(&f0);
    zmsg_destroy(&msg);
out_release:
    bus_payload_release(payload, npayload);
    return rc;
}

int bus_msg_decode(zmsg_t *msg, bus_dir_t dir, kvtier_Envelope *env, bus_arrays_t *arr,
                   kvtier_Status *st)
{
    kvtier_Status scratch;
    bus_arrays_t none = {0};
    if (!st)
        st = &scratch;
    if (!arr)
        arr = &none;
    if (!msg || zmsg_size(msg) == 0) {
        bus_arrays_clear(arr);
        return s_invalid(st, "empty message: no frames, not even an envelope");
    }
    zframe_t *f0 = zmsg_first(msg);
    int rc = bus_env_decode(zframe_data(f0), zframe_size(f0), dir, env, arr, st);
    if (rc < 0)
        return rc;
    s_frame_cursor_t cursor = {.msg = msg, .cur = f0};
    uint32_t nframes = (uint32_t)(zmsg_size(msg) - 1);
    return bus_env_check_payload(env, arr, nframes, s_frame_size_at, &cursor, st);
}

zframe_t *bus_msg_payload(zmsg_t *msg, uint32_t i)
{
    if (!msg)
        return NULL;
    zframe_t *f = zmsg_first(msg);
    for (uint32_t k = 0; f && k <= i; k++)
        f = zmsg_next(msg);
    return f;
}

/* ---- send ---- */

static int s_send_error(kvtier_Status *st, int err, const char *what)
{
    if (err == EAGAIN)
        return bus_status_set(st, kvtier_StatusCode_STATUS_UNAVAILABLE,
                              "send queue full (peer slow or absent); %s not sent", what);
    if (err == EHOSTUNREACH)
        return bus_status_set(st, kvtier_StatusCode_STATUS_UNAVAILABLE,
                              "peer gone (unknown routing id); %s not sent", what);
    if (err == ETERM)
        return bus_status_set(st, kvtier_StatusCode_STATUS_UNAVAILABLE,
                              "ZeroMQ context terminated; %s not sent", what);
    return bus_status_set(st, kvtier_StatusCode_STATUS_INTERNAL, "sending %s: %s", what,
                          zmq_strerror(err));
}

static int s_send_copy(void *handle, const void *data, size_t size, int flags)
{
    zmq_msg_t m;
    if (zmq_msg_init_size(&m, size) != 0)
        return -1;
    if (size)
        memcpy(zmq_msg_data(&m), data, size);
    if (zmq_msg_send(&m, handle, flags) < 0) {
        int err = errno;
        zmq_msg_close(&m);
        errno = err;
        return -1;
    }
    return 0;
}

/* Sends payload[i]; on failure its buffer has been released. */
static int s_send_payload(void *handle, const bus_payload_t *p, int flags)
{
    if (!p->free_fn)
        return s_send_copy(handle, p->data, p->size, flags);
    zmq_msg_t m;
    if (zmq_msg_init_data(&m, (void *)p->data, p->size, p->free_fn, p->hint) != 0) {
        int err = errno;
        p->free_fn((void *)p->data, p->hint);
        errno = err;
        return -1;
    }
    if (zmq_msg_send(&m, handle, flags) < 0) {
        int err = errno;
        zmq_msg_close(&m); /* runs free_fn */
        errno = err;
        return -1;
    }
    return 0;
}

/* Frame 0 for sending, with no allocation of ours: encoded on the stack when it
 * fits (the common case: 256 keys are under 5 KB), then copied into a libzmq
 * message (libzmq's own allocation); otherwise sized first and encoded straight
 * into a libzmq message of exactly that size. Copying even 16 KB costs less than
 * the sizing pass over the whole Envelope that it saves. */
#define S_SEND_STACK (16u << 10)

/* Fewest bytes the body's arrays can take: a frame 0 known to exceed the stack
 * buffer skips the attempt there, which would only be thrown away. */
static size_t s_arrays_min_bytes(const kvtier_Envelope *env, const bus_arrays_t *arr)
{
    static const uint8_t per_elem[BUS_ROLE_COUNT] = {
        [BUS_ROLE_KEYS] = 2 + BUS_KEY_LEN,
        [BUS_ROLE_TIER_IDS] = 1,
        [BUS_ROLE_SLOTS] = 1,
        [BUS_ROLE_DST_SLOTS] = 1,
        [BUS_ROLE_SIZES] = 1,
        [BUS_ROLE_CHECKSUMS] = 8,
        [BUS_ROLE_MASK] = 1,
        [BUS_ROLE_PAYLOAD] = 1,
        [BUS_ROLE_TOKEN_IDS] = 1,
    };
    const s_body_t *b = s_body(env->which_body);
    size_t bytes = 0;
    for (const s_bind_t *bind = b ? b->bind : NULL; arr && bind && bind->field; bind++)
        bytes += (size_t)per_elem[bind->role] * bus_arrays_count(arr, bind->role);
    return bytes;
}

static int s_frame0_sized(kvtier_Envelope *env, bus_arrays_t *arr, zmq_msg_t *m, kvtier_Status *st)
{
    size_t size = 0, len = 0;
    int rc = bus_env_encoded_size(env, arr, &size, st);
    if (rc < 0)
        return rc;
    if (size > BUS_MAX_FRAME0)
        return s_invalid(st, "encode %s: stream full (frame 0 of %zu bytes, the limit is %u)",
                         s_name(env->which_body), size, BUS_MAX_FRAME0);
    if (zmq_msg_init_size(m, size) != 0)
        return bus_status_set(st, kvtier_StatusCode_STATUS_INTERNAL,
                              "out of memory for a %zu byte frame 0", size);
    rc = bus_env_encode_buf(env, arr, zmq_msg_data(m), size, &len, st);
    if (rc == 0 && len != size)
        rc = bus_status_set(st, kvtier_StatusCode_STATUS_INTERNAL,
                            "%s encoded to %zu bytes, sized %zu: arrays changed while encoding",
                            s_name(env->which_body), len, size);
    if (rc < 0)
        zmq_msg_close(m);
    return rc;
}

static int s_frame0_msg(kvtier_Envelope *env, bus_arrays_t *arr, zmq_msg_t *m, kvtier_Status *st)
{
    uint8_t buf[S_SEND_STACK];
    if (s_arrays_min_bytes(env, arr) > sizeof buf)
        return s_frame0_sized(env, arr, m, st);
    int rc = s_encode_prepare(env, arr, st);
    if (rc < 0)
        return rc;
    pb_ostream_t s = pb_ostream_from_buffer(buf, sizeof buf);
    bool ok = pb_encode(&s, kvtier_Envelope_fields, env);
    s_unbind(env);
    if (!ok) /* too large for the stack, or invalid: the sized path says which */
        return s_frame0_sized(env, arr, m, st);
    if (zmq_msg_init_size(m, s.bytes_written) != 0)
        return bus_status_set(st, kvtier_StatusCode_STATUS_INTERNAL,
                              "out of memory for a %zu byte frame 0", s.bytes_written);
    memcpy(zmq_msg_data(m), buf, s.bytes_written);
    return 0;
}

int bus_msg_send(zsock_t *sock, const zframe_t *routing_id, kvtier_Envelope *env, bus_arrays_t *arr,
                 const bus_payload_t *payload, uint32_t npayload, kvtier_Status *st)
{
    kvtier_Status scratch;
    if (!st)
        st = &scratch;
    void *handle = zsock_resolve(sock);
    zmq_msg_t m0;
    const char *name = s_name(env->which_body);

    int rc = bus_env_check_payload(env, arr, npayload, s_payload_size_at, (void *)payload, st);
    if (rc < 0)
        goto out_release;
    rc = s_frame0_msg(env, arr, &m0, st);
    if (rc < 0)
        goto out_release;
    if (routing_id) {
        zframe_t *rid = (zframe_t *)routing_id;
        if (s_send_copy(handle, zframe_data(rid), zframe_size(rid), ZMQ_SNDMORE | ZMQ_DONTWAIT) <
            0) {
            rc = s_send_error(st, errno, name);
            goto out_close;
        }
    }
    if (zmq_msg_send(&m0, handle, (npayload ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0) {
        rc = s_send_error(st, errno, name);
        goto out_close;
    }
    /* Once frame 0 is queued, libzmq accepts the remaining parts of the message. */
    for (uint32_t i = 0; i < npayload; i++) {
        int flags = (i + 1 < npayload ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT;
        if (s_send_payload(handle, &payload[i], flags) < 0) {
            rc = s_send_error(st, errno, name);
            bus_payload_release(payload + i + 1, npayload - i - 1);
            return rc;
        }
    }
    s_ok(st);
    return 0;

out_close:
    zmq_msg_close(&m0);
out_release:
    bus_payload_release(payload, npayload);
    return rc;
}
