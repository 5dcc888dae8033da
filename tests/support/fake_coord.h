/* fake_coord.h — a scripted coordinator for the client library's tests: a real
 * bus_server on tcp://127.0.0.1:* in its own thread (zactor) that speaks the meta
 * plane just enough to check the client's side of it — discovery, NOT_LEADER
 * following, retries, token handling. It is NOT a scheduler: no index, no slot
 * engine; tokens map key k to slot k.b[0] of one configured tier.
 *
 * Modes (fc_mode):
 *   FC_LEADER   answers everything itself (ClusterInfo names its own endpoint);
 *   FC_STANDBY  ClusterInfo names the configured leader; every other request gets
 *               NOT_LEADER with the leader in Envelope.leader_endpoint;
 *   FC_SILENT   reads requests and never answers (a hung coordinator).
 * Leader replies: RegisterInstance created; RequestBegin/End empty; Lookup hit[i] =
 * key[i][0] & 1, tier 1 where hit, hit_count = hits; Touch/Remove count the keys;
 * Stats two counters, unpaged like an older scheduler (after fc_set_counters: n
 * counters "c<i>" = 1000 + i, paged by offset / max_counters with total and
 * next_offset, the list one longer on every request when `growing`); Prepare* a token over the
 * request keys (FC_TOKEN_* corrupts it on purpose); CompletePut writes SERVING headers through the
 * tier actor named by fc_set_tier (PutHeader) for the keys marked successful; CopyPrefetch OK with
 * every key of the last prepare not copied (no migrator); Complete* record the success mask they
 * got.
 * Test use only. */
#ifndef KVT_FAKE_COORD_H
#define KVT_FAKE_COORD_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

#include "bus_token.h"

typedef enum { FC_LEADER = 0, FC_STANDBY = 1, FC_SILENT = 2 } fc_mode_t;
typedef enum {
    FC_TOKEN_GOOD = 0,
    FC_TOKEN_GARBAGE = 1,    /* payload is not a token */
    FC_TOKEN_SHORT = 2,      /* one entry fewer than keys */
    FC_TOKEN_WRONG_KIND = 3, /* a PUT payload for a GET and vice versa */
    FC_TOKEN_V1 = 4,         /* a version 1 payload (an older coordinator's) */
} fc_token_mode_t;

typedef struct {
    uint64_t requests;       /* requests received (any mode) */
    uint64_t served;         /* requests answered in LEADER mode */
    uint64_t not_leader;     /* NOT_LEADER answers */
    uint64_t completes;      /* Complete* received */
    uint64_t last_success_n; /* success flags in the last Complete* */
    uint64_t last_success_true;
    uint64_t headers_put; /* SERVING headers the tier actor accepted */
    uint64_t begins;      /* RequestBegin received */
    uint64_t stats_reqs;  /* StatsRequest received */
    uint64_t copies;      /* CopyPrefetch received (answered OK, nothing copied) */
} fc_stats_t;

/* Starts the fake (tcp://127.0.0.1:*, FC_LEADER, FC_TOKEN_GOOD, block size 4096,
 * no tier); zactor_destroy stops it. */
zactor_t *fc_new(void);
/* Its bound endpoint, copied into buf (len bytes); returns buf. */
char *fc_endpoint(zactor_t *a, char *buf, size_t len);
/* leader: the endpoint FC_STANDBY names (NULL: none). */
void fc_set_mode(zactor_t *a, fc_mode_t mode, const char *leader);
void fc_set_token_mode(zactor_t *a, fc_token_mode_t mode);
/* Tokens point at tier t, blocks of block_size bytes; headers: CompletePut writes
 * SERVING headers through the tier actor at t->endpoint. */
void fc_set_tier(zactor_t *a, const bus_token_tier_t *t, uint32_t block_size, bool headers);
/* Stats from now on: n paged counters (0: the two unpaged ones), one more on every
 * StatsRequest when growing. */
void fc_set_counters(zactor_t *a, uint32_t n, bool growing);
fc_stats_t fc_stats(zactor_t *a);

#endif
