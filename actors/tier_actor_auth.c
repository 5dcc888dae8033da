/* tier_actor_auth.c — the tier plane's grants (docs/SECURITY.md): a tier actor
 * that has the cluster secret serves WriteSlots, ReadSlots, PutHeader,
 * DeleteSlots and CopySlots only under a token the scheduler minted and sealed
 * (bus_token_mac.h). Checked on receipt, before the request touches the tier:
 * the MAC under this cluster's key; the token's kind allows the access; the
 * token names this tier with this actor's epoch (0 grants nothing); it has not
 * expired (wall clocks within clock_skew_ms of each other: the one clock
 * assumption); its leader epoch is not below the highest this actor has seen;
 * and every requested slot (and size) is an entry of the token for this tier
 * (of a get+put token: of its get part to read, of its put part to write).
 * A refusal is PERMISSION_DENIED (EXPIRED for an expired token, UNAVAILABLE for
 * another epoch of this tier, as the fence always answered) and changes nothing;
 * it is counted by reason (tier_refusal_t). The leader fence: a token that
 * verifies raises leader_seen to its leader epoch (logged when it rises); one of
 * a lower epoch is PERMISSION_DENIED "... fenced: ..." (reason old_leader). A new
 * leader raises it on every tier before reading its inventory (sched_tiers.c),
 * so a deposed leader that resumes changes nothing on any tier it reaches.
 * Never trusts the request's own epoch or destination endpoint once tokens are
 * on; never allocates per request (the request's slots are sorted in place in
 * scratch sized at start from max_slots, and the token is scanned once). */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "bus_log.h"
#include "bus_token_mac.h"
#include "tier_actor_int.h"

typedef tier_actor_self_t self_t;

#define S_LOG "tier"

#define S_DENIED kvtier_StatusCode_STATUS_PERMISSION_DENIED
#define S_EXPIRED kvtier_StatusCode_STATUS_EXPIRED
#define S_UNAVAILABLE kvtier_StatusCode_STATUS_UNAVAILABLE

/* Which token kinds open which access (docs/SECURITY.md's table). */
static const uint8_t s_allowed[TIER_AUTH_COUNT] = {
    [TIER_AUTH_READ] = 1u << BUS_TOKEN_GET | 1u << BUS_TOKEN_GET_PUT,
    [TIER_AUTH_WRITE] = 1u << BUS_TOKEN_PUT | 1u << BUS_TOKEN_GET_PUT | 1u << BUS_TOKEN_COPY,
    [TIER_AUTH_HEADER] = 1u << BUS_TOKEN_ADMIN | 1u << BUS_TOKEN_COPY,
    [TIER_AUTH_DELETE] = 1u << BUS_TOKEN_ADMIN | 1u << BUS_TOKEN_COPY,
    [TIER_AUTH_COPY] = 1u << BUS_TOKEN_COPY,
};

static const char *s_access_name[TIER_AUTH_COUNT] = {
    [TIER_AUTH_READ] = "ReadSlots",   [TIER_AUTH_WRITE] = "WriteSlots",
    [TIER_AUTH_HEADER] = "PutHeader", [TIER_AUTH_DELETE] = "DeleteSlots",
    [TIER_AUTH_COPY] = "CopySlots",
};

static const char *s_kind_name(uint32_t kind)
{
    switch (kind) {
    case BUS_TOKEN_GET:
        return "get";
    case BUS_TOKEN_PUT:
        return "put";
    case BUS_TOKEN_PREFETCH:
        return "prefetch";
    case BUS_TOKEN_GET_PUT:
        return "get+put";
    case BUS_TOKEN_ADMIN:
        return "admin";
    case BUS_TOKEN_COPY:
        return "copy";
    default:
        return "?";
    }
}

/* The keys an Inventory is served to (meta_keys_only), copied. 0, or -1 (why). */
static int s_meta_keys_init(self_t *self, const tier_actor_config_t *cfg, char *why, size_t len)
{
    if (!cfg->meta_keys_only)
        return 0;
    if (cfg->n_meta_keys > TIER_ACTOR_MAX_META_KEYS || (cfg->n_meta_keys && !cfg->meta_keys)) {
        snprintf(why, len, "tier %s: %u keys allowed an Inventory: at most %u", self->name,
                 cfg->n_meta_keys, TIER_ACTOR_MAX_META_KEYS);
        return -1;
    }
    self->meta_keys = calloc(cfg->n_meta_keys ? cfg->n_meta_keys : 1, sizeof *self->meta_keys);
    if (!self->meta_keys) {
        snprintf(why, len, "tier %s: out of memory for the keys allowed an Inventory", self->name);
        return -1;
    }
    for (uint32_t i = 0; i < cfg->n_meta_keys; i++)
        snprintf(self->meta_keys[i], sizeof self->meta_keys[i], "%s", cfg->meta_keys[i]);
    self->n_meta_keys = cfg->n_meta_keys;
    self->meta_keys_only = true;
    return 0;
}

int tier_actor_auth_meta(self_t *self, const bus_request_t *req, const char *what,
                         kvtier_Status *st)
{
    if (!self->meta_keys_only)
        return 0;
    /* with CURVE on every tcp connection carries a key: none means ipc:// or
     * inproc://, which the file system's permissions guard (docs/SECURITY.md) */
    if (!req->peer_key[0] && bus_curve_on())
        return 0;
    for (uint32_t i = 0; req->peer_key[0] && i < self->n_meta_keys; i++)
        if (!strcmp(self->meta_keys[i], req->peer_key))
            return 0;
    const char *key = req->peer_key[0] ? req->peer_key : "(none: not a CURVE connection)";
    if (self->inventory_refused++ % 1000 == 0)
        bus_warn(S_LOG, "tier %s: %s refused to key %s (%" PRIu64 " so far): only the "
                        "coordinators and keys granted \"*\" may list the tier",
                 self->name, what, key, self->inventory_refused);
    st->code = S_DENIED;
    snprintf(st->message, sizeof st->message,
             "tier %s: %s lists every instance's blocks: only the coordinators and keys granted "
             "\"*\" (security.curve.instances) may ask; key %s may not",
             self->name, what, key);
    return -1;
}

int tier_actor_auth_init(self_t *self, const tier_actor_config_t *cfg, char *why, size_t len)
{
    if (s_meta_keys_init(self, cfg, why, len) < 0)
        return -1;
    if (!cfg->secret)
        return 0;
    if (!cfg->cluster || !cfg->cluster[0]) {
        snprintf(why, len,
                 "tier %s: a cluster secret needs the cluster name (the MAC key binds it)",
                 self->name);
        return -1;
    }
    if (bus_token_key_derive(cfg->secret, cfg->cluster, &self->key) < 0) {
        snprintf(why, len, "tier %s: cannot derive the token key (libsodium did not start)",
                 self->name);
        return -1;
    }
    self->auth = true;
    self->clock_skew_ms =
        cfg->clock_skew_ms ? cfg->clock_skew_ms : TIER_ACTOR_DEFAULT_CLOCK_SKEW_MS;
    self->pairs = calloc(self->max_slots, sizeof *self->pairs);
    self->grant = calloc(self->max_slots, sizeof *self->grant);
    if (!self->pairs || !self->grant) {
        snprintf(why, len, "tier %s: out of memory for token checks", self->name);
        return -1;
    }
    return 0;
}

void tier_actor_auth_fini(self_t *self)
{
    free(self->meta_keys);
    self->meta_keys = NULL;
    free(self->pairs);
    free(self->grant);
    self->pairs = NULL;
    self->grant = NULL;
    bus_secret_wipe(&self->key, sizeof self->key);
}

static uint64_t s_wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000u + (uint64_t)tv.tv_usec / 1000u;
}

/* Index of tier_id in the token's tier table, or BUS_TOKEN_NO_TIER. */
static uint16_t s_find_tier(const bus_token_view_t *v, uint32_t tier_id)
{
    for (uint32_t i = 0; i < v->n_tiers; i++)
        if (v->tiers[i].tier_id == tier_id)
            return (uint16_t)i;
    return BUS_TOKEN_NO_TIER;
}

/* MAC, kind, expiry and leader epoch: what a token says about itself. */
static int s_check_token(self_t *self, tier_actor_access_t access, const bus_blob_t *tok,
                         bus_token_view_t *v, kvtier_Status *st)
{
    const char *what = s_access_name[access];
    char err[160];
    self->refusal = TIER_REFUSAL_MISSING;
    if (tok->len == 0)
        return tier_actor_fail(self, st, S_DENIED,
                               "%s without a token: the tier plane opens only with a grant the "
                               "scheduler minted (prepare at the coordinator first)",
                               what);
    self->refusal = TIER_REFUSAL_MALFORMED;
    if (bus_token_decode(tok->data, tok->len, v, err, sizeof err) < 0)
        return tier_actor_fail(self, st, S_DENIED, "%s: the token is not valid: %s", what, err);
    self->refusal = TIER_REFUSAL_MAC;
    int rc = bus_token_verify(&self->key, v, tok->data);
    if (rc == -EPERM)
        return tier_actor_fail(self, st, S_DENIED,
                               "%s: the token carries no MAC (minted by a coordinator without "
                               "this cluster's secret: give both the same security.secret_file)",
                               what);
    if (rc < 0)
        return tier_actor_fail(self, st, S_DENIED,
                               "%s: the token's MAC does not verify (forged or altered, or "
                               "minted under another cluster's name or secret)",
                               what);
    self->refusal = TIER_REFUSAL_KIND;
    if (!(s_allowed[access] & (1u << v->kind)))
        return tier_actor_fail(self, st, S_DENIED, "%s: a %s token does not grant it", what,
                               s_kind_name(v->kind));
    uint64_t now = s_wall_ms();
    self->refusal = TIER_REFUSAL_EXPIRED;
    if (v->meta.expiry_ms == 0)
        return tier_actor_fail(self, st, S_DENIED, "%s: the token has no expiry", what);
    if (now > v->meta.expiry_ms + self->clock_skew_ms)
        return tier_actor_fail(self, st, S_EXPIRED,
                               "%s: the token expired %" PRIu64
                               " ms ago (clock skew allowed: %u ms): prepare again",
                               what, now - v->meta.expiry_ms, self->clock_skew_ms);
    self->refusal = TIER_REFUSAL_OLD_LEADER;
    if (v->meta.leader_epoch < self->leader_seen)
        return tier_actor_fail(self, st, S_DENIED,
                               "%s fenced: the token is from leader epoch %" PRIu64
                               ", a newer leader (epoch %" PRIu64
                               ") has granted since: prepare again at the current leader",
                               what, v->meta.leader_epoch, self->leader_seen);
    if (v->meta.leader_epoch > self->leader_seen) {
        /* the fence rises: from now on no token of an older leader changes this tier */
        bus_info(S_LOG,
                 "tier %s: leader epoch %" PRIu64 " (was %" PRIu64
                 "): tokens of older leaders are refused from now on",
                 self->name, v->meta.leader_epoch, self->leader_seen);
        self->leader_seen = v->meta.leader_epoch;
        self->stats.leader_seen = self->leader_seen;
    }
    return 0;
}

static int s_auth(self_t *self, tier_actor_access_t access, const bus_blob_t *tok,
                  uint32_t dst_tier_id, tier_actor_grant_t *g, kvtier_Status *st)
{
    g->on = false;
    if (!self->auth)
        return 0;
    const char *what = s_access_name[access];
    bus_token_view_t *v = &g->view;
    int rc = s_check_token(self, access, tok, v, st);
    if (rc < 0)
        return rc;
    self->refusal = TIER_REFUSAL_TIER;
    g->here = s_find_tier(v, self->tier_id);
    if (g->here == BUS_TOKEN_NO_TIER)
        return tier_actor_fail(self, st, S_DENIED, "%s: the token grants nothing on tier id %u",
                               what, self->tier_id);
    uint64_t epoch = v->tiers[g->here].epoch;
    if (epoch == 0)
        return tier_actor_fail(self, st, S_DENIED,
                               "%s: the token names tier epoch 0, which grants nothing", what);
    if (epoch != self->epoch)
        return tier_actor_fail(self, st, S_UNAVAILABLE,
                               "%s: the token is for epoch %016" PRIx64
                               ", this is epoch %016" PRIx64
                               ": the tier actor restarted and the blocks placed before are "
                               "gone; refresh its locations",
                               what, epoch, self->epoch);
    g->dst = BUS_TOKEN_NO_TIER;
    self->refusal = TIER_REFUSAL_GRANT;
    if (access == TIER_AUTH_COPY) {
        g->dst = s_find_tier(v, dst_tier_id);
        if (g->dst == BUS_TOKEN_NO_TIER || g->dst == g->here)
            return tier_actor_fail(self, st, S_DENIED,
                                   "CopySlots to tier id %u: the token does not name it as a "
                                   "destination",
                                   dst_tier_id);
        if (v->tiers[g->dst].epoch == 0 || !v->tiers[g->dst].endpoint[0])
            return tier_actor_fail(self, st, S_DENIED,
                                   "CopySlots to tier id %u: the token names no epoch or endpoint "
                                   "for it",
                                   dst_tier_id);
    }
    /* a combined window reads its pinned hits and writes its reserved misses, never
     * the other way round */
    g->first = 0;
    g->end = v->n_entries;
    if (v->kind == BUS_TOKEN_GET_PUT && access == TIER_AUTH_READ)
        g->end = v->meta.n_get;
    else if (v->kind == BUS_TOKEN_GET_PUT)
        g->first = v->meta.n_get;
    g->token = tok;
    g->on = true;
    return 0;
}

static bool s_pair_less(const tier_actor_pair_t *x, const tier_actor_pair_t *y)
{
    return x->a < y->a || (x->a == y->a && x->b < y->b);
}

static void s_sift(tier_actor_pair_t *p, uint32_t root, uint32_t n)
{
    for (uint32_t child; (child = 2 * root + 1) < n; root = child) {
        if (child + 1 < n && s_pair_less(&p[child], &p[child + 1]))
            child++;
        if (!s_pair_less(&p[root], &p[child]))
            return;
        tier_actor_pair_t t = p[root];
        p[root] = p[child];
        p[child] = t;
    }
}

/* In place (heapsort): qsort may allocate, and this runs on every request. */
static void s_pairs_sort(tier_actor_pair_t *p, uint32_t n)
{
    for (uint32_t i = n / 2; i-- > 0;)
        s_sift(p, i, n);
    for (uint32_t end = n; end-- > 1;) {
        tier_actor_pair_t t = p[0];
        p[0] = p[end];
        p[end] = t;
        s_sift(p, 0, end);
    }
}

/* The request's slots as pairs sorted by (a, b): a = slot (copy: source slot),
 * b = 0 (copy: destination slot), i = the request's index; grant[i] cleared. */
static void s_request_pairs(self_t *self, const bus_u64s_t *a, const bus_u64s_t *b)
{
    for (uint32_t i = 0; i < a->n; i++) {
        self->pairs[i] = (tier_actor_pair_t){.a = a->v[i], .b = b ? b->v[i] : 0, .i = i};
        self->grant[i] = 0;
    }
    s_pairs_sort(self->pairs, a->n);
}

/* The first request pair not less than (a, b), or n. */
static uint32_t s_lower(const self_t *self, uint32_t n, uint64_t a, uint64_t b)
{
    tier_actor_pair_t key = {.a = a, .b = b};
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s_pair_less(&self->pairs[mid], &key))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* One pass over the token's entries from src (BUS_TOKEN_NO_TIER: any) to tier:
 * every request pair an entry matches gets grant = 1 + the largest entry size.
 * Sorting the request (at most max_slots) rather than the token keeps the cost
 * of a long token, sent whole with every chunk of a request, to one scan. */
static uint32_t s_match(self_t *self, const tier_actor_grant_t *g, uint16_t src, uint16_t tier,
                        uint32_t n)
{
    uint32_t here = 0;
    for (uint32_t k = g->first; k < g->end; k++) {
        bus_token_entry_t e;
        bus_token_entry_at(&g->view, k, &e);
        if (e.tier != tier || (src != BUS_TOKEN_NO_TIER && e.src_tier != src))
            continue;
        here++;
        uint64_t a = src == BUS_TOKEN_NO_TIER ? e.slot : e.src_slot;
        uint64_t b = src == BUS_TOKEN_NO_TIER ? 0 : e.slot;
        for (uint32_t j = s_lower(self, n, a, b);
             j < n && self->pairs[j].a == a && self->pairs[j].b == b; j++) {
            uint64_t *gr = &self->grant[self->pairs[j].i];
            *gr = *gr > (uint64_t)e.size + 1 ? *gr : (uint64_t)e.size + 1;
        }
    }
    return here;
}

static int s_auth_slots(self_t *self, const tier_actor_grant_t *g, const bus_u64s_t *slots,
                        const uint64_t *sizes, const char *what, kvtier_Status *st)
{
    if (!g->on)
        return 0;
    if (slots->n > self->max_slots) /* the callers bound it first; the scratch is this big */
        return tier_actor_fail(self, st, S_DENIED, "%s of %u slots, at most %u", what, slots->n,
                               self->max_slots);
    s_request_pairs(self, slots, NULL);
    uint32_t here = s_match(self, g, BUS_TOKEN_NO_TIER, g->here, slots->n);
    for (uint32_t i = 0; i < slots->n; i++) {
        if (self->grant[i] == 0)
            return tier_actor_fail(self, st, S_DENIED,
                                   "%s of slot %" PRIu64
                                   ": the token does not grant it (it grants %u slots here)",
                                   what, slots->v[i], here);
        if (sizes && sizes[i] > self->grant[i] - 1)
            return tier_actor_fail(self, st, S_DENIED,
                                   "%s of slot %" PRIu64 ": %" PRIu64
                                   " bytes, the token grants at most %" PRIu64,
                                   what, slots->v[i], sizes[i], self->grant[i] - 1);
    }
    return 0;
}

static int s_auth_pairs(self_t *self, const tier_actor_grant_t *g, const bus_u64s_t *src,
                        const bus_u64s_t *dst, kvtier_Status *st)
{
    if (!g->on)
        return 0;
    if (src->n > self->max_slots || dst->n != src->n)
        return tier_actor_fail(self, st, S_DENIED, "CopySlots of %u slots to %u, at most %u",
                               src->n, dst->n, self->max_slots);
    s_request_pairs(self, src, dst);
    (void)s_match(self, g, g->here, g->dst, src->n);
    for (uint32_t i = 0; i < src->n; i++)
        if (self->grant[i] == 0)
            return tier_actor_fail(self, st, S_DENIED,
                                   "CopySlots of slot %" PRIu64 " to slot %" PRIu64
                                   ": the token does not grant that copy",
                                   src->v[i], dst->v[i]);
    return 0;
}

/* Counts a refusal (rc < 0) under self->refusal, the reason its check set, and
 * logs it the 1st, 2nd, 4th, 8th... time for that reason (bounded under a flood). */
static int s_count(self_t *self, int rc, const kvtier_Status *st)
{
    if (rc < 0) {
        self->stats.tokens_refused++;
        uint64_t n = ++self->stats.refusals[self->refusal];
        if ((n & (n - 1)) == 0)
            bus_warn(S_LOG, "token refused (%s, %" PRIu64 " so far): %s",
                     tier_refusal_name(self->refusal), n, st->message);
    }
    return rc;
}

int tier_actor_auth_slots(self_t *self, const tier_actor_grant_t *g, const bus_u64s_t *slots,
                          const uint64_t *sizes, const char *what, kvtier_Status *st)
{
    self->refusal = TIER_REFUSAL_GRANT;
    return s_count(self, s_auth_slots(self, g, slots, sizes, what, st), st);
}

int tier_actor_auth_pairs(self_t *self, const tier_actor_grant_t *g, const bus_u64s_t *src,
                          const bus_u64s_t *dst, kvtier_Status *st)
{
    self->refusal = TIER_REFUSAL_GRANT;
    return s_count(self, s_auth_pairs(self, g, src, dst, st), st);
}

int tier_actor_auth(self_t *self, tier_actor_access_t access, const bus_blob_t *tok,
                    uint32_t dst_tier_id, tier_actor_grant_t *g, kvtier_Status *st)
{
    return s_count(self, s_auth(self, access, tok, dst_tier_id, g, st), st);
}

const char *tier_refusal_name(tier_refusal_t r)
{
    static const char *names[TIER_REFUSAL_COUNT] = {
        [TIER_REFUSAL_MISSING] = "missing", [TIER_REFUSAL_MALFORMED] = "malformed",
        [TIER_REFUSAL_MAC] = "mac",         [TIER_REFUSAL_KIND] = "kind",
        [TIER_REFUSAL_EXPIRED] = "expired", [TIER_REFUSAL_OLD_LEADER] = "old_leader",
        [TIER_REFUSAL_TIER] = "tier",       [TIER_REFUSAL_GRANT] = "grant",
    };
    return (unsigned)r < TIER_REFUSAL_COUNT ? names[r] : "?";
}
