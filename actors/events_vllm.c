/* events_vllm.c — msgpack encoders of vLLM's KVEventBatch (layouts and mapping
 * in events_vllm.h). Field names and order follow vllm/distributed/kv_events.py;
 * each encoder writes one whole batch, so a reader never sees half of one. */
#include "events_vllm.h"

#include <string.h>

typedef struct {
    msgpack_packer pk;
    events_vllm_layout_t layout;
    int rc; /* first failure of any pack call */
} s_out_t;

static void s_chk(s_out_t *o, int rc)
{
    if (rc != 0)
        o->rc = -1;
}

static void s_str(s_out_t *o, const char *s)
{
    s_chk(o, msgpack_pack_str_with_body(&o->pk, s, strlen(s)));
}

/* A field name: written in the map layout only (arrays are positional). */
static void s_field(s_out_t *o, const char *name)
{
    if (o->layout == EVENTS_VLLM_MAP)
        s_str(o, name);
}

static const char *s_medium(uint32_t medium)
{
    switch (medium) {
    case kvtier_Medium_MEDIUM_GPU:
        return "GPU";
    case kvtier_Medium_MEDIUM_CPU:
        return "CPU";
    case kvtier_Medium_MEDIUM_DISK:
        return "DISK";
    case kvtier_Medium_MEDIUM_REMOTE:
        return "REMOTE";
    default:
        return NULL;
    }
}

static void s_medium_field(s_out_t *o, uint32_t medium)
{
    s_field(o, "medium");
    const char *m = s_medium(medium);
    if (m)
        s_str(o, m);
    else
        s_chk(o, msgpack_pack_nil(&o->pk));
}

/* Opens an event of type TYPE with N_FIELDS fields after the tag. */
static void s_event_open(s_out_t *o, const char *type, uint32_t n_fields)
{
    if (o->layout == EVENTS_VLLM_MAP) {
        s_chk(o, msgpack_pack_map(&o->pk, n_fields + 1));
        s_str(o, "type");
    } else {
        s_chk(o, msgpack_pack_array(&o->pk, n_fields + 1));
    }
    s_str(o, type);
}

/* N keys of 16 bytes, the first at KEYS, each STRIDE bytes after the last. */
static void s_hashes(s_out_t *o, const uint8_t *keys, uint32_t n, size_t stride)
{
    s_field(o, "block_hashes");
    s_chk(o, msgpack_pack_array(&o->pk, n));
    for (uint32_t i = 0; i < n; i++) {
        s_chk(o, msgpack_pack_bin(&o->pk, BUS_KEY_LEN));
        s_chk(o, msgpack_pack_bin_body(&o->pk, keys + (size_t)i * stride, BUS_KEY_LEN));
    }
}

/* BlockStored: block_hashes, parent_block_hash, token_ids, block_size, lora_id,
 * medium (both layouts), lora_name (map layout: the current class has it). */
static void s_stored(s_out_t *o, const uint8_t *keys, uint32_t n, size_t stride,
                     const uint8_t *parent, size_t parent_len, const bus_u32s_t *ids,
                     uint32_t tokens, uint32_t medium)
{
    bool map = o->layout == EVENTS_VLLM_MAP;
    s_event_open(o, "BlockStored", map ? 7 : 6);
    s_hashes(o, keys, n, stride);
    s_field(o, "parent_block_hash");
    if (parent_len == BUS_KEY_LEN) {
        s_chk(o, msgpack_pack_bin(&o->pk, BUS_KEY_LEN));
        s_chk(o, msgpack_pack_bin_body(&o->pk, parent, BUS_KEY_LEN));
    } else {
        s_chk(o, msgpack_pack_nil(&o->pk));
    }
    s_field(o, "token_ids");
    uint32_t n_ids = ids ? ids->n : 0;
    s_chk(o, msgpack_pack_array(&o->pk, n_ids));
    for (uint32_t i = 0; i < n_ids; i++)
        s_chk(o, msgpack_pack_uint32(&o->pk, ids->v[i]));
    s_field(o, "block_size");
    s_chk(o, msgpack_pack_uint32(&o->pk, tokens));
    s_field(o, "lora_id");
    s_chk(o, msgpack_pack_nil(&o->pk));
    s_medium_field(o, medium);
    if (map) {
        s_field(o, "lora_name");
        s_chk(o, msgpack_pack_nil(&o->pk));
    }
}

static void s_removed(s_out_t *o, const uint8_t *keys, uint32_t n, size_t stride, uint32_t medium)
{
    s_event_open(o, "BlockRemoved", 2);
    s_hashes(o, keys, n, stride);
    s_medium_field(o, medium);
}

static void s_cleared(s_out_t *o)
{
    s_event_open(o, "AllBlocksCleared", 0);
}

/* Opens the batch: ts, then the events array of N. */
static void s_batch_open(s_out_t *o, msgpack_sbuffer *out, events_vllm_layout_t layout, double ts,
                         uint32_t n)
{
    *o = (s_out_t){.layout = layout};
    msgpack_packer_init(&o->pk, out, msgpack_sbuffer_write);
    if (layout == EVENTS_VLLM_MAP)
        s_chk(o, msgpack_pack_map(&o->pk, 2));
    else
        s_chk(o, msgpack_pack_array(&o->pk, 2));
    s_field(o, "ts");
    s_chk(o, msgpack_pack_double(&o->pk, ts));
    s_field(o, "events");
    s_chk(o, msgpack_pack_array(&o->pk, n));
}

const char *events_vllm_layout_name(events_vllm_layout_t layout)
{
    return layout == EVENTS_VLLM_ARRAY ? "array" : "map";
}

int events_vllm_layout_parse(const char *name, events_vllm_layout_t *out)
{
    if (name && strcmp(name, "map") == 0)
        *out = EVENTS_VLLM_MAP;
    else if (name && strcmp(name, "array") == 0)
        *out = EVENTS_VLLM_ARRAY;
    else
        return -1;
    return 0;
}

static uint32_t s_count_one(const kvtier_Event *e)
{
    switch (e->which_kind) {
    case kvtier_Event_block_stored_tag:
    case kvtier_Event_block_removed_tag:
    case kvtier_Event_leader_changed_tag:
    case kvtier_Event_all_cleared_tag:
        return 1;
    case kvtier_Event_block_moved_tag:
        return 2;
    default:
        return 0;
    }
}

uint32_t events_vllm_count(const bus_event_t *events, uint32_t n)
{
    uint32_t c = 0;
    for (uint32_t i = 0; i < n; i++)
        c += s_count_one(&events[i].ev);
    return c;
}

int events_vllm_batch(events_vllm_layout_t layout, const bus_event_t *events, uint32_t n,
                      msgpack_sbuffer *out)
{
    s_out_t o;
    double ts = n ? (double)events[0].ev.ts_us / 1e6 : 0.0;
    s_batch_open(&o, out, layout, ts, events_vllm_count(events, n));
    for (uint32_t i = 0; i < n; i++) {
        const kvtier_Event *e = &events[i].ev;
        const bus_keys_t *k = &events[i].keys;
        const uint8_t *keys = k->n ? k->keys[0] : NULL;
        switch (e->which_kind) {
        case kvtier_Event_block_stored_tag: {
            const kvtier_BlockStored *s = &e->kind.block_stored;
            s_stored(&o, keys, k->n, BUS_KEY_LEN, s->parent_key.bytes, s->parent_key.size,
                     &events[i].tokens, s->tokens_per_block, s->medium);
            break;
        }
        case kvtier_Event_block_removed_tag:
            s_removed(&o, keys, k->n, BUS_KEY_LEN, e->kind.block_removed.medium);
            break;
        case kvtier_Event_block_moved_tag: {
            const kvtier_BlockMoved *m = &e->kind.block_moved;
            s_removed(&o, keys, k->n, BUS_KEY_LEN, m->src_medium);
            s_stored(&o, keys, k->n, BUS_KEY_LEN, NULL, 0, NULL, m->tokens_per_block,
                     m->dst_medium);
            break;
        }
        case kvtier_Event_leader_changed_tag:
        case kvtier_Event_all_cleared_tag:
            s_cleared(&o);
            break;
        default:
            break;
        }
    }
    return o.rc;
}

int events_vllm_removed(events_vllm_layout_t layout, double ts, const uint8_t (*keys)[BUS_KEY_LEN],
                        uint32_t n, uint32_t medium, msgpack_sbuffer *out)
{
    s_out_t o;
    s_batch_open(&o, out, layout, ts, 1);
    s_removed(&o, n ? keys[0] : NULL, n, BUS_KEY_LEN, medium);
    return o.rc;
}
