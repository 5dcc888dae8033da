/* bus_fault.c — the fault point table (bus_fault.h). One static table per
 * process; every field a firing thread reads is an atomic, and a rule is
 * published by storing its action last (release), so a hit sees an older or a
 * newer rule whole. 1-in-N is a counter-based random stream (splitmix64 of the
 * seed and the hit number): no shared generator state, the same sequence of
 * injections for the same seed. Leaf code: libc only. */
#include "bus_fault.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bus_fault_armed_;
static int s_enabled;

typedef struct {
    int action; /* bus_fault_action_t; NONE: no rule */
    int err;
    uint32_t ms;
    uint32_t one_in;
    uint32_t next; /* 0: unlimited; else the hits still to fire */
    uint64_t seed;
    uint64_t hits;
    uint64_t injected;
} s_point_t;

static s_point_t s_points[BUS_FAULT_N_POINTS];

static const char *const s_point_names[BUS_FAULT_N_POINTS] = {
    [BUS_FAULT_NVME_WRITE] = "nvme.write",         [BUS_FAULT_NVME_READ] = "nvme.read",
    [BUS_FAULT_NVME_FSYNC] = "nvme.fsync",         [BUS_FAULT_HOST_READ] = "host.read",
    [BUS_FAULT_SERVER_REPLY] = "bus.server.reply", [BUS_FAULT_CLIENT_REPLY] = "bus.client.reply",
    [BUS_FAULT_ETCD_REQUEST] = "etcd.request",
};

static const char *const s_action_names[BUS_FAULT_N_ACTIONS] = {
    [BUS_FAULT_NONE] = "none",   [BUS_FAULT_ERROR] = "error",     [BUS_FAULT_SHORT] = "short",
    [BUS_FAULT_DELAY] = "delay", [BUS_FAULT_DROP] = "drop",       [BUS_FAULT_LATE] = "late",
    [BUS_FAULT_FLIP] = "flip",   [BUS_FAULT_TIMEOUT] = "timeout",
};

/* What each point can do (bit per action): the code at the point acts on these only. */
#define S_A(a) (1u << (a))
static const unsigned s_supported[BUS_FAULT_N_POINTS] = {
    [BUS_FAULT_NVME_WRITE] = S_A(BUS_FAULT_ERROR) | S_A(BUS_FAULT_DELAY),
    [BUS_FAULT_NVME_READ] =
        S_A(BUS_FAULT_ERROR) | S_A(BUS_FAULT_SHORT) | S_A(BUS_FAULT_DELAY) | S_A(BUS_FAULT_FLIP),
    [BUS_FAULT_NVME_FSYNC] = S_A(BUS_FAULT_ERROR) | S_A(BUS_FAULT_DELAY),
    [BUS_FAULT_HOST_READ] = S_A(BUS_FAULT_FLIP) | S_A(BUS_FAULT_DELAY),
    [BUS_FAULT_SERVER_REPLY] = S_A(BUS_FAULT_DROP) | S_A(BUS_FAULT_DELAY),
    [BUS_FAULT_CLIENT_REPLY] = S_A(BUS_FAULT_DROP) | S_A(BUS_FAULT_LATE),
    [BUS_FAULT_ETCD_REQUEST] = S_A(BUS_FAULT_ERROR) | S_A(BUS_FAULT_TIMEOUT) | S_A(BUS_FAULT_DELAY),
};

static const struct {
    const char *name;
    int value;
} s_errnos[] = {
    {"EIO", EIO},
    {"ENOSPC", ENOSPC},
    {"EROFS", EROFS},
    {"ENODATA", ENODATA},
    {"EAGAIN", EAGAIN},
    {"EBUSY", EBUSY},
    {"ETIMEDOUT", ETIMEDOUT},
    {"ECONNREFUSED", ECONNREFUSED},
    {"EPROTO", EPROTO},
    {"ENOMEM", ENOMEM},
    {"EBADMSG", EBADMSG},
};

static uint64_t s_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static void s_rearm(void)
{
    int any = 0;
    for (int i = 0; i < BUS_FAULT_N_POINTS; i++)
        any |= __atomic_load_n(&s_points[i].action, __ATOMIC_ACQUIRE) != BUS_FAULT_NONE;
    __atomic_store_n(&bus_fault_armed_, any, __ATOMIC_RELEASE);
}

/* A next:K rule takes one of its K; false when another thread took the last. */
static bool s_take_next(s_point_t *p)
{
    uint32_t left = __atomic_load_n(&p->next, __ATOMIC_ACQUIRE);
    while (left > 0)
        if (__atomic_compare_exchange_n(&p->next, &left, left - 1, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            if (left == 1) { /* the last one: the rule is spent */
                __atomic_store_n(&p->action, BUS_FAULT_NONE, __ATOMIC_RELEASE);
                s_rearm();
            }
            return true;
        }
    return false;
}

bool bus_fault_fire_slow(bus_fault_point_t point, bus_fault_hit_t *hit)
{
    if ((unsigned)point >= BUS_FAULT_N_POINTS)
        return false;
    s_point_t *p = &s_points[point];
    int action = __atomic_load_n(&p->action, __ATOMIC_ACQUIRE);
    if (action == BUS_FAULT_NONE)
        return false;
    uint64_t h = __atomic_fetch_add(&p->hits, 1, __ATOMIC_RELAXED);
    uint32_t one_in = __atomic_load_n(&p->one_in, __ATOMIC_RELAXED);
    bool limited = __atomic_load_n(&p->next, __ATOMIC_RELAXED) > 0;
    if (limited) {
        if (!s_take_next(p))
            return false;
    } else if (one_in > 1 &&
               s_mix(__atomic_load_n(&p->seed, __ATOMIC_RELAXED) ^ s_mix(h)) % one_in != 0) {
        return false;
    }
    hit->action = (bus_fault_action_t)action;
    hit->err = __atomic_load_n(&p->err, __ATOMIC_RELAXED);
    hit->ms = __atomic_load_n(&p->ms, __ATOMIC_RELAXED);
    hit->n = __atomic_add_fetch(&p->injected, 1, __ATOMIC_RELAXED);
    return true;
}

void bus_fault_enable(void)
{
    __atomic_store_n(&s_enabled, 1, __ATOMIC_RELEASE);
}

bool bus_fault_enabled(void)
{
    return __atomic_load_n(&s_enabled, __ATOMIC_ACQUIRE) != 0;
}

static void s_supported_list(bus_fault_point_t point, char *out, size_t outlen)
{
    size_t n = 0;
    out[0] = '\0';
    for (int a = 1; a < BUS_FAULT_N_ACTIONS && n < outlen; a++)
        if (s_supported[point] & S_A(a))
            n += (size_t)snprintf(out + n, outlen - n, "%s%s", n ? ", " : "", s_action_names[a]);
}

int bus_fault_check(bus_fault_point_t point, const bus_fault_rule_t *rule, char *err, size_t errlen)
{
    if ((unsigned)point >= BUS_FAULT_N_POINTS || !rule) {
        snprintf(err, errlen, "no such fault point");
        return -EINVAL;
    }
    if (rule->action == BUS_FAULT_NONE || (unsigned)rule->action >= BUS_FAULT_N_ACTIONS ||
        !(s_supported[point] & S_A(rule->action))) {
        char list[128];
        s_supported_list(point, list, sizeof list);
        snprintf(err, errlen, "%s cannot %s (it supports: %s)", s_point_names[point],
                 (unsigned)rule->action < BUS_FAULT_N_ACTIONS ? s_action_names[rule->action] : "?",
                 list);
        return -EINVAL;
    }
    return 0;
}

int bus_fault_set(bus_fault_point_t point, const bus_fault_rule_t *rule, char *err, size_t errlen)
{
    if (!bus_fault_enabled()) {
        snprintf(err, errlen,
                 "faults are not enabled in this process (the deployment's faults.enabled is "
                 "false)");
        return -EPERM;
    }
    int rc = bus_fault_check(point, rule, err, errlen);
    if (rc < 0)
        return rc;
    s_point_t *p = &s_points[point];
    __atomic_store_n(&p->action, BUS_FAULT_NONE, __ATOMIC_RELEASE);
    __atomic_store_n(&p->err, rule->err > 0 ? rule->err : EIO, __ATOMIC_RELAXED);
    __atomic_store_n(&p->ms, rule->ms, __ATOMIC_RELAXED);
    __atomic_store_n(&p->one_in, rule->one_in ? rule->one_in : 1, __ATOMIC_RELAXED);
    __atomic_store_n(&p->next, rule->next, __ATOMIC_RELAXED);
    __atomic_store_n(&p->seed, rule->seed, __ATOMIC_RELAXED);
    __atomic_store_n(&p->action, (int)rule->action, __ATOMIC_RELEASE);
    s_rearm();
    return 0;
}

void bus_fault_clear(bus_fault_point_t point)
{
    for (int i = 0; i < BUS_FAULT_N_POINTS; i++)
        if (point == BUS_FAULT_N_POINTS || (int)point == i)
            __atomic_store_n(&s_points[i].action, BUS_FAULT_NONE, __ATOMIC_RELEASE);
    s_rearm();
}

void bus_fault_show(bus_fault_point_t point, bus_fault_state_t *out)
{
    memset(out, 0, sizeof *out);
    if ((unsigned)point >= BUS_FAULT_N_POINTS)
        return;
    const s_point_t *p = &s_points[point];
    out->point = point;
    out->rule.action = (bus_fault_action_t)__atomic_load_n(&p->action, __ATOMIC_ACQUIRE);
    out->rule.err = __atomic_load_n(&p->err, __ATOMIC_RELAXED);
    out->rule.ms = __atomic_load_n(&p->ms, __ATOMIC_RELAXED);
    out->rule.one_in = __atomic_load_n(&p->one_in, __ATOMIC_RELAXED);
    out->rule.next = __atomic_load_n(&p->next, __ATOMIC_RELAXED);
    out->rule.seed = __atomic_load_n(&p->seed, __ATOMIC_RELAXED);
    out->hits = __atomic_load_n(&p->hits, __ATOMIC_RELAXED);
    out->injected = __atomic_load_n(&p->injected, __ATOMIC_RELAXED);
}

void bus_fault_reset(void)
{
    bus_fault_clear(BUS_FAULT_N_POINTS);
    for (int i = 0; i < BUS_FAULT_N_POINTS; i++) {
        __atomic_store_n(&s_points[i].hits, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&s_points[i].injected, 0, __ATOMIC_RELAXED);
    }
}

/* --- text form ------------------------------------------------------------ */

const char *bus_fault_point_name(bus_fault_point_t point)
{
    return (unsigned)point < BUS_FAULT_N_POINTS ? s_point_names[point] : "?";
}

const char *bus_fault_action_name(bus_fault_action_t action)
{
    return (unsigned)action < BUS_FAULT_N_ACTIONS ? s_action_names[action] : "?";
}

int bus_fault_point_parse(const char *name, bus_fault_point_t *out, char *err, size_t errlen)
{
    for (int i = 0; name && i < BUS_FAULT_N_POINTS; i++)
        if (!strcmp(name, s_point_names[i])) {
            *out = (bus_fault_point_t)i;
            return 0;
        }
    size_t n =
        (size_t)snprintf(err, errlen, "unknown fault point \"%s\" (points: ", name ? name : "");
    for (int i = 0; i < BUS_FAULT_N_POINTS && n < errlen; i++)
        n += (size_t)snprintf(err + n, errlen - n, "%s%s", i ? ", " : "", s_point_names[i]);
    if (n < errlen)
        snprintf(err + n, errlen - n, ")");
    return -EINVAL;
}

/* A decimal in [min, max], the whole string. */
static bool s_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return false;
    *out = (uint32_t)v;
    return true;
}

static int s_errno_parse(const char *s, int *out)
{
    uint32_t v;
    if (s_u32(s, 1, 4095, &v)) {
        *out = (int)v;
        return 0;
    }
    for (size_t i = 0; i < sizeof s_errnos / sizeof s_errnos[0]; i++)
        if (!strcmp(s, s_errnos[i].name)) {
            *out = s_errnos[i].value;
            return 0;
        }
    return -EINVAL;
}

static const char *s_errno_name(int e)
{
    for (size_t i = 0; i < sizeof s_errnos / sizeof s_errnos[0]; i++)
        if (s_errnos[i].value == e)
            return s_errnos[i].name;
    return NULL;
}

static int s_action_parse(const char *text, bus_fault_rule_t *r, char *err, size_t errlen)
{
    char name[32];
    const char *colon = strchr(text, ':');
    size_t len = colon ? (size_t)(colon - text) : strlen(text);
    const char *arg = colon ? colon + 1 : NULL;
    snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), text);
    int a = 0;
    for (int i = 1; i < BUS_FAULT_N_ACTIONS; i++)
        if (!strcmp(name, s_action_names[i]))
            a = i;
    if (!a) {
        snprintf(err, errlen,
                 "unknown fault action \"%s\" (actions: error[:ERRNO], short, delay:MS, drop, "
                 "late:MS, flip, timeout[:MS])",
                 text);
        return -EINVAL;
    }
    r->action = (bus_fault_action_t)a;
    bool needs_ms = a == BUS_FAULT_DELAY || a == BUS_FAULT_LATE;
    bool takes_ms = needs_ms || a == BUS_FAULT_TIMEOUT;
    if (a == BUS_FAULT_ERROR) {
        r->err = EIO;
        if (arg && s_errno_parse(arg, &r->err) < 0) {
            snprintf(err, errlen,
                     "error:%s: not an errno (a name like EIO, ENOSPC, EROFS or a number 1..4095)",
                     arg);
            return -EINVAL;
        }
    } else if (takes_ms) {
        if ((needs_ms && !arg) ||
            (arg && !s_u32(arg, needs_ms ? 1 : 0, BUS_FAULT_MS_MAX, &r->ms))) {
            snprintf(err, errlen, "%s needs a time in milliseconds, 1..%u (\"%s:50\")", name,
                     BUS_FAULT_MS_MAX, name);
            return -EINVAL;
        }
    } else if (arg) {
        snprintf(err, errlen, "%s takes no argument (got \"%s\")", name, text);
        return -EINVAL;
    }
    return 0;
}

static int s_rate_parse(const char *rate, bus_fault_rule_t *r, char *err, size_t errlen)
{
    r->one_in = 1;
    r->next = 0;
    if (!rate || !strcmp(rate, "always"))
        return 0;
    if (!strncmp(rate, "1/", 2) && s_u32(rate + 2, 1, BUS_FAULT_RATE_MAX, &r->one_in))
        return 0;
    if (!strncmp(rate, "next:", 5) && s_u32(rate + 5, 1, BUS_FAULT_RATE_MAX, &r->next))
        return 0;
    snprintf(err, errlen,
             "rate \"%s\": expected 1/N (N in 1..%u: one hit in N at random), next:K (the next K "
             "hits) or always",
             rate, BUS_FAULT_RATE_MAX);
    return -EINVAL;
}

int bus_fault_rule_parse(const char *action, const char *rate, bus_fault_rule_t *out, char *err,
                         size_t errlen)
{
    bus_fault_rule_t r = {.seed = 0x6b7674696572ULL}; /* "kvtier" */
    if (!action || !*action) {
        snprintf(err, errlen, "no fault action given");
        return -EINVAL;
    }
    int rc = s_action_parse(action, &r, err, errlen);
    if (rc == 0)
        rc = s_rate_parse(rate, &r, err, errlen);
    if (rc == 0)
        *out = r;
    return rc;
}

void bus_fault_rule_format(const bus_fault_rule_t *r, char *out, size_t outlen)
{
    char act[48], rate[32];
    const char *an = bus_fault_action_name(r->action);
    if (r->action == BUS_FAULT_ERROR) {
        const char *en = s_errno_name(r->err);
        if (en)
            snprintf(act, sizeof act, "error:%s", en);
        else
            snprintf(act, sizeof act, "error:%d", r->err);
    } else if (r->action == BUS_FAULT_DELAY || r->action == BUS_FAULT_LATE ||
               (r->action == BUS_FAULT_TIMEOUT && r->ms)) {
        snprintf(act, sizeof act, "%s:%" PRIu32, an, r->ms);
    } else {
        snprintf(act, sizeof act, "%s", an);
    }
    if (r->next)
        snprintf(rate, sizeof rate, "next:%" PRIu32, r->next);
    else if (r->one_in > 1)
        snprintf(rate, sizeof rate, "1/%" PRIu32, r->one_in);
    else
        snprintf(rate, sizeof rate, "always");
    snprintf(out, outlen, "%s %s", act, rate);
}
