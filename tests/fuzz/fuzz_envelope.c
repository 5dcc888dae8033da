/* fuzz_envelope.c — libFuzzer harness for the bus envelope (bus/bus_envelope.c,
 * bus/bus_arrays.c): frame 0 with every body kind and its callback arrays, and the
 * payload frames it declares. It decodes exactly as a server does (bus_server_recv:
 * bus_msg_decode with BUS_DIR_REQUEST into arrays of BUS_MAX_ARRAY elements, as the
 * tier actor and the scheduler allocate them; on failure bus_env_peek, as s_reject
 * does to echo corr_id), or as a client decodes a reply (BUS_DIR_REPLY, arrays with
 * a token payload). Property: whatever decodes re-encodes, and decodes again; an
 * InventoryReply's records (bus_inventory.h) read within their field.
 *
 * Input: byte 0 = mode (bit 0: reply; bits 1-3: payload frame count), then two
 * bytes (LE) of size per payload frame, then frame 0. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_envelope.h"
#include "bus_inventory.h"
#include "bus_token.h"

static bus_arrays_t *s_req_arr, *s_rep_arr, *s_again;
static uint8_t *s_buf;
#define S_BUF_CAP (BUS_MAX_FRAME0 + 1024u)

static void s_init(void)
{
    if (s_req_arr)
        return;
    s_req_arr = bus_arrays_new(BUS_MAX_ARRAY, 0);
    s_rep_arr = bus_arrays_new(BUS_MAX_ARRAY, BUS_MAX_BLOB);
    s_again = bus_arrays_new(BUS_MAX_ARRAY, BUS_MAX_BLOB);
    s_buf = malloc(S_BUF_CAP);
    if (!s_req_arr || !s_rep_arr || !s_again || !s_buf)
        abort();
}

/* Whatever decoded must encode and decode again to the same body kind. */
static void s_roundtrip(kvtier_Envelope *env, bus_arrays_t *arr, bus_dir_t dir)
{
    size_t len = 0;
    kvtier_Status st;
    pb_size_t tag = env->which_body;
    if (bus_env_encode_buf(env, arr, s_buf, S_BUF_CAP, &len, &st) < 0) {
        fprintf(stderr, "decoded envelope does not re-encode: %s\n", st.message);
        abort();
    }
    static kvtier_Envelope again;
    if (bus_env_decode(s_buf, len, dir, &again, s_again, &st) < 0 || again.which_body != tag) {
        fprintf(stderr, "re-encoded envelope does not decode: %s\n", st.message);
        abort();
    }
}

/* An InventoryReply's records as the scheduler reads them (bus_inventory.h): a
 * length that is not whole records is refused, anything else reads in bounds. */
static void s_records(const bus_arrays_t *arr)
{
    uint32_t n = 0;
    kvtier_Status st;
    if (bus_inv_records_count(arr->payload.len, BUS_MAX_INVENTORY_RECORDS, &n, &st) < 0)
        return;
    bus_inv_record_t r;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < n; i++) {
        bus_inv_record_get(arr->payload.data, i, &r);
        sum += r.slot + r.size + bus_inv_record_slot(arr->payload.data, i);
    }
    if (n && sum == 1) /* keeps the reads */
        fprintf(stderr, "%u records\n", n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    s_init();
    if (size < 1)
        return 0;
    bool reply = data[0] & 1u;
    uint32_t nframes = (data[0] >> 1) & 7u;
    size_t off = 1;
    if (size < off + 2u * nframes)
        return 0;
    zmsg_t *msg = zmsg_new();
    zframe_t *payload[8];
    for (uint32_t i = 0; i < nframes; i++, off += 2)
        payload[i] = zframe_new(NULL, (size_t)data[off] | (size_t)data[off + 1] << 8);
    zmsg_addmem(msg, data + off, size - off);
    for (uint32_t i = 0; i < nframes; i++)
        zmsg_append(msg, &payload[i]);

    static kvtier_Envelope env;
    kvtier_Status st;
    bus_dir_t dir = reply ? BUS_DIR_REPLY : BUS_DIR_REQUEST;
    bus_arrays_t *arr = reply ? s_rep_arr : s_req_arr;
    if (bus_msg_decode(msg, dir, &env, arr, &st) < 0) {
        bus_env_header_t h;
        zframe_t *f0 = zmsg_first(msg);
        (void)bus_env_peek(zframe_data(f0), zframe_size(f0), &h);
    } else {
        s_roundtrip(&env, arr, dir);
        if (env.which_body == kvtier_Envelope_inventory_rep_tag)
            s_records(arr);
    }
    zmsg_destroy(&msg);
    return 0;
}
