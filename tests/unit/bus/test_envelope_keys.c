/* test_envelope_keys.c — the fast path of key decoding (bus_env_keys.h, issue 13
 * §3) against nanopb's field-by-field decoding of the same frames: every body kind
 * that carries keys, encoded with 0 .. 300 keys, then damaged (bytes changed,
 * cut short, key fields of other lengths or wire types inserted, the body
 * repeated): both paths give the same status, message, envelope and arrays on every
 * input; and the keys really come through the hand scan where it applies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bus_envelope.h"
#include "wire_testutil.h"

#define S_FRAME_MAX (64u << 10)
#define S_CASES 6000u

typedef struct {
    bus_arrays_t *src, *fast_arr, *slow_arr;
    kvtier_Envelope *a, *fast, *slow;
    uint8_t *buf, *bad;
} s_fix_t;

static uint64_t s_rng = 0x243f6a8885a308d3ull;
static uint32_t s_rand(void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return (uint32_t)(s_rng >> 16);
}

static int setup(void **state)
{
    s_fix_t *f = calloc(1, sizeof *f);
    f->src = bus_arrays_new(BUS_MAX_ARRAY, 256);
    f->fast_arr = bus_arrays_new(BUS_MAX_ARRAY, 256);
    f->slow_arr = bus_arrays_new(BUS_MAX_ARRAY, 256);
    f->a = calloc(1, sizeof *f->a);
    f->fast = calloc(1, sizeof *f->fast);
    f->slow = calloc(1, sizeof *f->slow);
    f->buf = malloc(S_FRAME_MAX);
    f->bad = malloc(S_FRAME_MAX + 64);
    *state = f;
    return f->src && f->fast_arr && f->slow_arr && f->buf && f->bad ? 0 : -1;
}

static int teardown(void **state)
{
    s_fix_t *f = *state;
    bus_env_set_fast_keys(true);
    bus_arrays_destroy(&f->src);
    bus_arrays_destroy(&f->fast_arr);
    bus_arrays_destroy(&f->slow_arr);
    free(f->a);
    free(f->fast);
    free(f->slow);
    free(f->buf);
    free(f->bad);
    free(f);
    return 0;
}

static const pb_size_t s_tags[] = {
    kvtier_Envelope_lookup_req_tag,           kvtier_Envelope_prepare_req_tag,
    kvtier_Envelope_prepare_get_req_tag,      kvtier_Envelope_prepare_put_req_tag,
    kvtier_Envelope_prepare_prefetch_req_tag, kvtier_Envelope_touch_req_tag,
    kvtier_Envelope_remove_req_tag,           kvtier_Envelope_read_slots_req_tag,
    kvtier_Envelope_put_header_req_tag,       kvtier_Envelope_copy_slots_req_tag,
    kvtier_Envelope_delete_slots_req_tag,     kvtier_Envelope_probe_req_tag,
};
#define S_NTAGS (sizeof s_tags / sizeof s_tags[0])

/* Decodes buf both ways; both must agree on everything. Returns the rc. */
static int s_both(s_fix_t *f, const uint8_t *buf, size_t len)
{
    kvtier_Status sf, ss;
    memset(f->fast, 0, sizeof *f->fast);
    memset(f->slow, 0, sizeof *f->slow);
    bus_env_set_fast_keys(true);
    int rf = bus_env_decode(buf, len, BUS_DIR_ANY, f->fast, f->fast_arr, &sf);
    bus_env_set_fast_keys(false);
    int rs = bus_env_decode(buf, len, BUS_DIR_ANY, f->slow, f->slow_arr, &ss);
    bus_env_set_fast_keys(true);
    assert_int_equal(rf, rs);
    assert_int_equal(sf.code, ss.code);
    assert_string_equal(sf.message, ss.message);
    if (rf != 0)
        return rf;
    assert_memory_equal(f->fast, f->slow, sizeof *f->fast);
    for (int r = 0; r < BUS_ROLE_COUNT; r++)
        if (!tu_role_equal(f->fast_arr, f->slow_arr, (bus_role_t)r))
            fail_msg("array %s differs", bus_role_name((bus_role_t)r));
    return 0;
}

static size_t s_encode(s_fix_t *f, pb_size_t tag, uint32_t nkeys, uint32_t seed)
{
    bus_env_init(f->a, tag, "keys-test");
    f->a->corr_id = 1000 + seed;
    tu_fill_msg(tu_body_desc(tag), &f->a->body, seed);
    tu_arrays_fill(f->src, nkeys, 32, seed);
    size_t len = 0;
    kvtier_Status st;
    if (bus_env_encode_buf(f->a, f->src, f->buf, S_FRAME_MAX, &len, &st) != 0)
        fail_msg("%s with %u keys: %s", bus_body_name(tag), nkeys, st.message);
    return len;
}

/* Valid frames: the same decode both ways, the keys as sent. */
static void test_fast_keys_decode_like_nanopb(void **state)
{
    s_fix_t *f = *state;
    for (size_t t = 0; t < S_NTAGS; t++) {
        for (uint32_t n = 0; n <= 300; n += n < 4 ? 1 : 37) {
            size_t len = s_encode(f, s_tags[t], n, (uint32_t)t * 1000 + n);
            uint64_t taken = bus_env_fast_keys_taken();
            assert_int_equal(s_both(f, f->buf, len), 0);
            /* the hand scan took every frame with keys (and none is needed without) */
            if (bus_env_fast_keys_taken() - taken != (n > 0 ? 1u : 0u))
                fail_msg("%s with %u keys (%zu bytes): the hand scan did not take it",
                         bus_body_name(s_tags[t]), n, len);
            assert_int_equal(f->fast_arr->keys.n, n);
            assert_memory_equal(f->fast_arr->keys.keys, f->src->keys.keys, (size_t)n * BUS_KEY_LEN);
        }
    }
}

/* One damage of frame (len bytes) into f->bad; returns its length. */
static size_t s_damage(s_fix_t *f, size_t len)
{
    memcpy(f->bad, f->buf, len);
    switch (s_rand() % 6) {
    case 0: /* a few bytes changed */
        for (uint32_t i = 0, m = 1 + s_rand() % 3; i < m; i++)
            f->bad[s_rand() % len] = (uint8_t)s_rand();
        return len;
    case 1: /* cut short */
        return s_rand() % len;
    case 2:   /* one byte changed to a key field tag byte or a length of 15 / 17 */
    case 3: { /* ... or a varint continuation */
        static const uint8_t v[] = {0x2a, 0x22, 0x1a, 0x12, 0x0f, 0x11, 0x80, 0xff, 0x28};
        f->bad[s_rand() % len] = v[s_rand() % sizeof v];
        return len;
    }
    case 4: /* the body field repeated (the frame appended to itself, minus the header) */
        if (2 * len > S_FRAME_MAX)
            return len;
        memcpy(f->bad + len, f->buf, len);
        return 2 * len;
    default: /* a byte inserted */
    {
        size_t at = s_rand() % len;
        memmove(f->bad + at + 1, f->buf + at, len - at);
        f->bad[at] = (uint8_t)s_rand();
        return len + 1;
    }
    }
}

/* Damaged frames: whatever the outcome, both ways agree (status, message, data). */
static void test_fast_keys_agree_on_damaged_frames(void **state)
{
    s_fix_t *f = *state;
    uint32_t ok = 0, refused = 0;
    for (uint32_t c = 0; c < S_CASES; c++) {
        pb_size_t tag = s_tags[s_rand() % S_NTAGS];
        size_t len = s_encode(f, tag, s_rand() % 40, c);
        size_t bl = s_damage(f, len);
        if (s_both(f, f->bad, bl) == 0)
            ok++;
        else
            refused++;
    }
    print_message("      %u damaged frames: %u decoded, %u refused, alike both ways\n", S_CASES, ok,
                  refused);
    assert_true(ok > 0 && refused > 0);
}

/* Too many keys for the caller's array, and keys of the wrong length: the same
 * INVALID_ARGUMENT as before (the fast path declines and nanopb reports it). */
static void test_fast_keys_leave_errors_to_nanopb(void **state)
{
    s_fix_t *f = *state;
    size_t len = s_encode(f, kvtier_Envelope_lookup_req_tag, 40, 7);
    bus_arrays_t *small = bus_arrays_new(8, 0);
    kvtier_Status st;
    memset(f->fast, 0, sizeof *f->fast);
    assert_int_equal(bus_env_decode(f->buf, len, BUS_DIR_REQUEST, f->fast, small, &st),
                     -(int)kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(st.message, "keys"));
    bus_arrays_destroy(&small);
    /* a 15-byte key by hand: tag 5, wire type 2, length 15 */
    tu_writer_t w;
    tu_w_init(&w);
    tu_w_header(&w, 9, BUS_PROTOCOL_VERSION);
    uint8_t body[64], k15[15] = {1};
    size_t bl = 0;
    body[bl++] = (kvtier_LookupRequest_keys_tag << 3) | 2;
    body[bl++] = 15;
    memcpy(body + bl, k15, 15);
    bl += 15;
    tu_w_bytes(&w, kvtier_Envelope_lookup_req_tag, body, bl);
    assert_int_equal(s_both(f, w.buf, tu_w_len(&w)),
                     -(int)kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_keys_decode_like_nanopb),
        cmocka_unit_test(test_fast_keys_agree_on_damaged_frames),
        cmocka_unit_test(test_fast_keys_leave_errors_to_nanopb),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
