/* opt_replay.c — replays through tier_slots engines; time stands still (no
 * deadlines, nothing expires). A policy replay reserves each run of a
 * request's consecutive missing blocks as one batch, as a put of the service
 * does (policies that take the batch's prefix order into account, s3fifo,
 * see it so); the chain model reserves one block at a time. */
#include "opt_replay.h"

#include <stdlib.h>
#include <string.h>

#include "tier_slots.h"

#define S_HASH_SEED 0x6b7674696572ull /* fixed: reproducible runs */

static tier_slots_t *s_engine(const opt_trace_t *t, const char *policy, uint64_t capacity)
{
    uint64_t distinct = opt_trace_distinct(t);
    uint64_t cap = capacity < distinct ? capacity : distinct;
    tier_slots_config_t cfg = {
        .policy = policy,
        .capacity = (uint32_t)(cap ? cap : 1),
        .max_batch = opt_trace_max_blocks(t) ? opt_trace_max_blocks(t) : 1,
        .hash_seed = S_HASH_SEED,
    };
    return cap <= (1u << 31) ? tier_slots_new(&cfg) : NULL;
}

static void s_key(const opt_trace_t *t, uint32_t b, tier_key_t *key, uint32_t *inst)
{
    memcpy(key->b, opt_trace_key(t, b, inst), TIER_KEY_BYTES);
}

static bool s_present(tier_slots_t *s, const opt_trace_t *t, uint32_t b)
{
    tier_key_t key;
    uint32_t inst;
    s_key(t, b, &key, &inst);
    return tier_slots_lookup(s, inst, &key, 0, NULL) == 0;
}

/* Reserves and commits KEY (absent from S); *VICTIM gets the evicted block, if any.
 * 1 when a block was evicted, 0 when not, -1 when the engine refused. */
static int s_admit(tier_slots_t *s, uint32_t inst, const tier_key_t *key, unsigned flags,
                   tier_victim_t *victim, bool *serving)
{
    tier_resv_t out;
    size_t nv = 0;
    if (serving)
        *serving = false;
    if (tier_slots_reserve(s, inst, key, 1, 0, 0, flags, &out, victim, &nv) < 0)
        return -1;
    if (out.kind == TIER_RESV_SERVING) {
        if (serving)
            *serving = true;
        return 0;
    }
    if (tier_slots_commit(s, inst, key, true, 0, NULL) < 0)
        return -1;
    return nv > 0;
}

/* Puts run[0..n) (missing blocks, in prefix order, one instance) as one batch,
 * committed in that order; a run longer than the engine (the only batch it
 * cannot place here: nothing is pinned) goes in one block at a time, as
 * before batches, without a failed try (its rollback would leave clock's hand
 * moved). 0, or -1 when the engine refuses. */
static int s_put_run(tier_slots_t *s, uint32_t inst, const tier_key_t *run, size_t n,
                     uint64_t slots, tier_resv_t *out)
{
    if (n == 0)
        return 0;
    if (n <= slots && tier_slots_reserve(s, inst, run, n, 0, 0, 0, out, NULL, NULL) == 0) {
        for (size_t i = 0; i < n; i++)
            if (tier_slots_commit(s, inst, &run[i], true, 0, NULL) < 0)
                return -1;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        tier_victim_t v;
        if (s_admit(s, inst, &run[i], 0, &v, NULL) < 0)
            return -1;
    }
    return 0;
}

static bool s_in_run(const tier_key_t *run, size_t n, uint32_t inst, uint32_t run_inst,
                     const tier_key_t *key)
{
    if (n == 0 || inst != run_inst)
        return n != 0; /* another instance ends the run */
    for (size_t i = 0; i < n; i++)
        if (tier_key_eq(&run[i], key))
            return true;
    return false;
}

int64_t opt_replay_policy(const opt_trace_t *t, const char *policy, uint64_t capacity,
                          uint32_t *req_hits)
{
    tier_slots_t *s = s_engine(t, policy, capacity);
    uint32_t max = opt_trace_max_blocks(t) ? opt_trace_max_blocks(t) : 1;
    uint64_t slots = capacity < opt_trace_distinct(t) ? capacity : opt_trace_distinct(t);
    tier_key_t *run = malloc(max * sizeof(*run));
    tier_resv_t *out = malloc(max * sizeof(*out));
    int64_t hits = 0;
    if (!s || !run || !out) {
        hits = -1;
        goto out;
    }
    for (size_t r = 0; r < opt_trace_requests(t); r++) {
        uint32_t n, h = 0;
        const uint32_t *blocks = opt_trace_blocks(t, r, &n);
        while (h < n && s_present(s, t, blocks[h]))
            h++;
        hits += h;
        if (req_hits)
            req_hits[r] = h;
        size_t nrun = 0;
        uint32_t run_inst = 0;
        for (uint32_t j = 0; j <= n; j++) {
            tier_key_t key;
            uint32_t inst = 0;
            if (j < n) {
                s_key(t, blocks[j], &key, &inst);
                /* A cached block, a block repeated inside the run, or one of
                 * another instance ends the run before it (one batch, one
                 * instance, no key twice; events in the blocks' order). */
                if (!s_in_run(run, nrun, inst, run_inst, &key) &&
                    tier_slots_lookup(s, inst, &key, 0, NULL) != 0) {
                    run[nrun++] = key;
                    run_inst = inst;
                    continue;
                }
            }
            if (s_put_run(s, run_inst, run, nrun, slots, out) < 0) {
                hits = -1;
                goto out;
            }
            nrun = 0;
            if (j < n && tier_slots_touch(s, inst, &key, 0, 0) != 0) {
                run[nrun++] = key; /* the run just put evicted it */
                run_inst = inst;
            }
        }
    }
out:
    free(run);
    free(out);
    tier_slots_destroy(&s);
    return hits;
}

/* ---- chain ---- */

typedef struct {
    const opt_trace_t *t;
    tier_slots_t *l[2];
    opt_chain_result_t *res;
    bool inclusive;
    uint8_t *level; /* per block of the request: 1 or 2 where found */
} s_chain_t;

/* Puts block B into level 1; its victim, if any, is demoted into level 2. */
static int s_put_head(s_chain_t *c, uint32_t b)
{
    tier_key_t key;
    uint32_t inst;
    tier_victim_t v, v2;
    bool serving;
    s_key(c->t, b, &key, &inst);
    int rc = s_admit(c->l[0], inst, &key, 0, &v, NULL);
    if (rc <= 0)
        return rc;
    rc = s_admit(c->l[1], v.instance, &v.key, TIER_RESERVE_SKIP_SERVING, &v2, &serving);
    if (rc < 0)
        return rc;
    c->res->demoted += !serving;
    c->res->dropped += (uint64_t)rc;
    return 0;
}

static int s_chain_request(s_chain_t *c, size_t r, uint32_t *req_hits)
{
    uint32_t n, h = 0, per[2] = {0, 0};
    const uint32_t *blocks = opt_trace_blocks(c->t, r, &n);
    for (; h < n; h++) {
        if (s_present(c->l[0], c->t, blocks[h]))
            c->level[h] = 0;
        else if (s_present(c->l[1], c->t, blocks[h]))
            c->level[h] = 1;
        else
            break;
    }
    for (uint32_t k = 0; k < h; k++) {
        tier_key_t key;
        uint32_t inst;
        s_key(c->t, blocks[k], &key, &inst);
        (void)tier_slots_touch(c->l[c->level[k]], inst, &key, 0, 0);
        per[c->level[k]]++;
    }
    /* promotion: exclusive, the lower copy goes first (its slot takes the head's
     * victim); inclusive, it stays */
    for (uint32_t k = 0; k < h; k++)
        if (c->level[k] == 1 && !s_present(c->l[0], c->t, blocks[k])) {
            if (!c->inclusive) {
                tier_key_t key;
                uint32_t inst;
                s_key(c->t, blocks[k], &key, &inst);
                (void)tier_slots_remove(c->l[1], inst, &key);
            }
            if (s_put_head(c, blocks[k]) < 0)
                return -1;
            c->res->promoted++;
        }
    for (uint32_t k = h; k < n; k++)
        if (!s_present(c->l[0], c->t, blocks[k]) && !s_present(c->l[1], c->t, blocks[k]) &&
            s_put_head(c, blocks[k]) < 0)
            return -1;
    c->res->hits[0] += per[0];
    c->res->hits[1] += per[1];
    if (req_hits) {
        req_hits[2 * r] = per[0];
        req_hits[2 * r + 1] = per[1];
    }
    return 0;
}

int opt_replay_chain(const opt_trace_t *t, const opt_chain_config_t *cfg, opt_chain_result_t *res,
                     uint32_t *req_hits)
{
    memset(res, 0, sizeof *res);
    s_chain_t c = {.t = t, .res = res, .inclusive = cfg->inclusive};
    c.l[0] = s_engine(t, cfg->policy[0], cfg->capacity[0]);
    c.l[1] = s_engine(t, cfg->policy[1], cfg->capacity[1]);
    c.level = malloc(opt_trace_max_blocks(t) + 1u);
    int rc = -1;
    if (!c.l[0] || !c.l[1] || !c.level)
        goto out;
    rc = 0;
    for (size_t r = 0; r < opt_trace_requests(t) && rc == 0; r++)
        rc = s_chain_request(&c, r, req_hits);
out:
    free(c.level);
    tier_slots_destroy(&c.l[0]);
    tier_slots_destroy(&c.l[1]);
    return rc;
}
