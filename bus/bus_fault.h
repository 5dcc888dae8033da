/* bus_fault.h — faults on purpose (issue 12 §6, docs/RELIABILITY.md "Faults"): a
 * switch compiled into every process, off unless the deployment file says
 * `faults.enabled: true`. A fault point is a named place in the code (an nvme
 * read, a bus reply, an etcd request); a rule on it says what happens there (an
 * errno, a short read, a delay, a drop, a late delivery, a bit flip) and how
 * often (1 in N hits, the next K hits, every hit). Each point counts the hits
 * it saw while armed and the faults it injected, so a script can prove that
 * every injected fault was caught.
 *
 * Owns: the table of points (one per process), the rules' text form (shared by
 * the config file and the admin socket) and the counters. Never allocates, never
 * blocks (a delay is slept by the caller that asked for it), never logs.
 *
 * Cost when off: bus_fault_fire is one relaxed load of a global flag and a
 * predictable branch. The flag is set only while some point has a rule, and a
 * rule can be set only after bus_fault_enable (called by a process whose config
 * enables faults).
 *
 * Thread-safety: every function may be called from any thread; rules and
 * counters are atomics (a rule changed while a point fires is seen whole or not
 * at all by that hit, never half).
 *
 * Lower folders use it too: tiers/ includes this header (and links kvt_fault, a
 * leaf library of this file alone) so the nvme backend can have fault points. */
#ifndef KVT_BUS_FAULT_H
#define KVT_BUS_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The places faults can be put. Text names in bus_fault_point_name. */
typedef enum bus_fault_point {
    BUS_FAULT_NVME_WRITE = 0, /* "nvme.write": every data or header write op */
    BUS_FAULT_NVME_READ,      /* "nvme.read": every block read, before verification */
    BUS_FAULT_NVME_FSYNC,     /* "nvme.fsync": fdatasync and RWF_DSYNC writes */
    BUS_FAULT_HOST_READ,      /* "host.read": a host-tier block served by its tier actor */
    BUS_FAULT_SERVER_REPLY,   /* "bus.server.reply": a reply a bus server sends */
    BUS_FAULT_CLIENT_REPLY,   /* "bus.client.reply": a reply a bus client receives */
    BUS_FAULT_ETCD_REQUEST,   /* "etcd.request": one etcd gateway call */
    BUS_FAULT_N_POINTS
} bus_fault_point_t;

/* What a rule does where it fires. */
typedef enum bus_fault_action {
    BUS_FAULT_NONE = 0,
    BUS_FAULT_ERROR,   /* the op fails with errno `err` */
    BUS_FAULT_SHORT,   /* a read returns fewer bytes than asked (half, rounded down) */
    BUS_FAULT_DELAY,   /* the op is slowed by `ms` (it still completes) */
    BUS_FAULT_DROP,    /* the message is lost */
    BUS_FAULT_LATE,    /* the message is delivered `ms` later than it arrived */
    BUS_FAULT_FLIP,    /* one bit of the bytes read is inverted */
    BUS_FAULT_TIMEOUT, /* the call waits `ms` (its own timeout when 0) and fails ETIMEDOUT */
    BUS_FAULT_N_ACTIONS
} bus_fault_action_t;

#define BUS_FAULT_RATE_MAX 1000000000u /* 1 in N: N <= this */
#define BUS_FAULT_MS_MAX 600000u       /* delays and late deliveries: 10 min at most */
#define BUS_FAULT_CONFIG_MAX 16        /* rules given in a config file */
#define BUS_FAULT_NAME_MAX 64          /* process names */
#define BUS_FAULT_DIR_MAX 200          /* the admin socket directory */
#define BUS_FAULT_TEXT_MAX 256         /* a rule as text */

/* A rule: action with its argument, and a rate. */
typedef struct bus_fault_rule {
    bus_fault_action_t action;
    int err;         /* ERROR: a positive errno (EIO when 0) */
    uint32_t ms;     /* DELAY, LATE, TIMEOUT */
    uint32_t one_in; /* fire with probability 1/one_in (1: every hit) */
    uint32_t next;   /* > 0: fire on the next `next` hits only, then disarm */
    uint64_t seed;   /* the random stream of 1-in-N (deterministic per seed) */
} bus_fault_rule_t;

/* What fired, for the caller to act on. */
typedef struct bus_fault_hit {
    bus_fault_action_t action;
    int err; /* positive errno */
    uint32_t ms;
    uint64_t n; /* which injection this is (1, 2, ...): picks the flipped bit */
} bus_fault_hit_t;

/* A point's rule and counters (bus_fault_show). */
typedef struct bus_fault_state {
    bus_fault_point_t point;
    bus_fault_rule_t rule; /* action NONE: no rule */
    uint64_t hits;         /* times reached while a rule was set */
    uint64_t injected;     /* faults injected */
} bus_fault_state_t;

/* A config file's `faults` section (coord_config.c reads it with bus_fault_config_read). */
typedef struct bus_fault_config_rule {
    char process[BUS_FAULT_NAME_MAX]; /* empty: every process */
    bus_fault_point_t point;
    bus_fault_rule_t rule;
} bus_fault_config_rule_t;

typedef struct bus_fault_config {
    bool enabled;
    char dir[BUS_FAULT_DIR_MAX]; /* admin sockets; empty: $KVTIER_RUN_DIR/faults */
    uint32_t n_rules;
    bus_fault_config_rule_t rules[BUS_FAULT_CONFIG_MAX];
} bus_fault_config_t;

/* --- the switch ------------------------------------------------------------ */

extern int bus_fault_armed_; /* private: non-zero while some point has a rule */

bool bus_fault_fire_slow(bus_fault_point_t point, bus_fault_hit_t *hit);

/* Called at a fault point: true when a fault fires now, *hit says which. */
static inline bool bus_fault_fire(bus_fault_point_t point, bus_fault_hit_t *hit)
{
    if (__builtin_expect(__atomic_load_n(&bus_fault_armed_, __ATOMIC_RELAXED) == 0, 1))
        return false;
    return bus_fault_fire_slow(point, hit);
}

/* Allows rules from now on (a process whose config enables faults). Until then
 * bus_fault_set refuses every rule. */
void bus_fault_enable(void);
bool bus_fault_enabled(void);

/* Sets the rule of a point (replacing its rule; counters are kept). 0, or
 * -EPERM when faults are not enabled, -EINVAL for an action the point does not
 * support (err names both and what the point supports). */
int bus_fault_set(bus_fault_point_t point, const bus_fault_rule_t *rule, char *err, size_t errlen);
/* The checks of bus_fault_set but the first: -EINVAL with err, or 0. */
int bus_fault_check(bus_fault_point_t point, const bus_fault_rule_t *rule, char *err,
                    size_t errlen);
/* Clears the rule of one point, or of all when point is BUS_FAULT_N_POINTS. */
void bus_fault_clear(bus_fault_point_t point);
/* Rule and counters of a point. */
void bus_fault_show(bus_fault_point_t point, bus_fault_state_t *out);
/* Zeroes every point's counters and rules (tests). */
void bus_fault_reset(void);

/* --- text form ------------------------------------------------------------ */

const char *bus_fault_point_name(bus_fault_point_t point);
const char *bus_fault_action_name(bus_fault_action_t action);
/* The point of a name: 0, or -EINVAL with the names there are in err. */
int bus_fault_point_parse(const char *name, bus_fault_point_t *out, char *err, size_t errlen);
/* A rule from its action and rate text:
 *   action: error[:ERRNO] (EIO, ENOSPC, EROFS, ENODATA, EAGAIN... or a number),
 *           short, delay:MS, drop, late:MS, flip, timeout[:MS]
 *   rate:   1/N (random, 1 in N hits), next:K (the next K hits), always
 * NULL rate: always. 0, or -EINVAL with a message for a person in err. */
int bus_fault_rule_parse(const char *action, const char *rate, bus_fault_rule_t *out, char *err,
                         size_t errlen);
/* "error:EIO 1/100", "delay:50 next:3": the form bus_fault_rule_parse reads. */
void bus_fault_rule_format(const bus_fault_rule_t *rule, char *out, size_t outlen);

#endif
