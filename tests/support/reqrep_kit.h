/* reqrep_kit.h — what the bus_client / bus_server tests share (test_reqrep.c,
 * test_reqrep_faults.c): a pending LookupRequest of 5 keys derived from its window,
 * its completion callback checking the reply's arrays, waiting for several, and a
 * test server (wire_testserver.h) started on a free port. Header-only (static
 * inline), test use only. */
#ifndef KVT_REQREP_KIT_H
#define KVT_REQREP_KIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bus_client.h"
#include "wire_testserver.h"
#include "wire_testutil.h"

#define LONG_TIMEOUT_MS 30000u
#define N_KEYS 5u

typedef struct {
    uint32_t window; /* request index, echoed as hit_count */
    uint8_t keys[N_KEYS][BUS_KEY_LEN];
    bool mask[N_KEYS];
    uint32_t tiers[N_KEYS];
    bus_arrays_t reply_arr; /* points at mask/tiers */
    int completions;
    kvtier_Status status;
    uint32_t hit_count;
    bool arrays_ok;
    int order; /* completion rank */
} pending_t;

static int s_rank; /* completion order, across the test file */

static inline void s_done(void *arg, bus_reply_t *r)
{
    pending_t *p = arg;
    p->completions++;
    p->status = r->status;
    p->order = s_rank++;
    if (!r->env)
        return;
    p->hit_count = r->env->body.lookup_rep.hit_count;
    p->arrays_ok = p->reply_arr.mask.n == N_KEYS && p->reply_arr.tier_ids.n == N_KEYS;
    for (uint32_t i = 0; p->arrays_ok && i < N_KEYS; i++)
        p->arrays_ok = p->mask[i] == (bool)(p->keys[i][0] & 1) && p->tiers[i] == p->keys[i][1];
}

/* Sends a LookupRequest with window `window` and 5 keys derived from it. */
static inline int s_send_lookup(bus_client_t *c, pending_t *p, uint32_t window, uint32_t timeout_ms,
                                kvtier_Status *st)
{
    memset(p, 0, sizeof *p);
    p->window = window;
    for (uint32_t i = 0; i < N_KEYS; i++)
        tu_key(window * 10 + i, p->keys[i]);
    p->reply_arr.mask = (bus_bools_t){.v = p->mask, .cap = N_KEYS};
    p->reply_arr.tier_ids = (bus_u32s_t){.v = p->tiers, .cap = N_KEYS};
    bus_arrays_t req_arr = {.keys = {.keys = p->keys, .n = N_KEYS, .cap = N_KEYS}};
    kvtier_Envelope *env = calloc(1, sizeof *env);
    bus_env_init(env, kvtier_Envelope_lookup_req_tag, NULL);
    strcpy(env->body.lookup_req.instance_id, "inst");
    env->body.lookup_req.window = window;
    int rc =
        bus_client_send(c, env, &req_arr, NULL, 0, timeout_ms, &p->reply_arr, s_done, p, NULL, st);
    free(env);
    return rc;
}

static inline void s_wait_all(bus_client_t *c, pending_t *p, uint32_t n)
{
    for (;;) {
        bool all = true;
        for (uint32_t i = 0; i < n; i++)
            all &= p[i].completions > 0;
        if (all)
            return;
        assert_true(bus_client_dispatch(c, -1) >= 0);
    }
}

typedef struct {
    zactor_t *server;
    char *endpoint;
    tu_server_args_t args;
} env_t;

static inline env_t *s_start(uint32_t reverse_batch)
{
    env_t *e = calloc(1, sizeof *e);
    e->args = (tu_server_args_t){.endpoint = "tcp://127.0.0.1:*", .reverse_batch = reverse_batch};
    e->server = tu_server_start(&e->args, &e->endpoint);
    assert_non_null(e->endpoint);
    return e;
}

static inline void s_stop(env_t **e_p)
{
    env_t *e = *e_p;
    zactor_destroy(&e->server);
    zstr_free(&e->endpoint);
    free(e);
    *e_p = NULL;
}

#endif
