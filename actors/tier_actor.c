/* tier_actor.c — the tier actor's lifecycle: config checks, opening the tier,
 * binding the ROUTER, the pipe commands and the poll loop that hands each decoded
 * request to tier_actor_serve (tier_actor_serve.c). Owns the tier_t and the server
 * socket for the actor's whole life; nothing else touches them. Never ends on its
 * own: only "$TERM" (or a terminated ZeroMQ context) stops it. */
#include "tier_actor.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "bus_actor.h"
#include "bus_host.h"
#include "bus_log.h"
#include "tier_actor_int.h"

typedef tier_actor_self_t self_t;

#define S_LOG "tier"
/* Requests served per wake-up before the pipe is looked at again. */
#define S_BURST 32

/* ---- helpers shared with tier_actor_serve.c ---- */

int tier_actor_fail(self_t *self, kvtier_Status *st, bus_code_t code, const char *fmt, ...)
{
    char msg[sizeof st->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return bus_status_set(st, code, "tier %s: %s", self->name, msg);
}

static int s_count_serving(void *arg, uint64_t slot, const tier_slot_header_t *h)
{
    (void)slot;
    (void)h;
    (*(uint64_t *)arg)++;
    return 0;
}

void tier_actor_count_used(self_t *self)
{
    uint64_t used = 0;
    (void)tier_inventory(self->tier, s_count_serving, &used);
    self->used_slots = used;
}

uint32_t tier_actor_instance_hash(const char *instance_id)
{
    return tier_instance_hash(instance_id);
}

/* ---- construction ---- */

static int s_check_config(const tier_actor_config_t *cfg, char *why, size_t len)
{
    if (!cfg) {
        snprintf(why, len, "tier actor: no config");
        return -1;
    }
    const char *name = cfg->tier.name[0] ? cfg->tier.name : "?";
    if (cfg->tier_id == 0) {
        snprintf(why, len, "tier %s: tier id 0 is reserved (ids are 1 + index in \"tiers\")", name);
        return -1;
    }
    if (!cfg->endpoint || !cfg->endpoint[0]) {
        snprintf(why, len, "tier %s: no endpoint to bind", name);
        return -1;
    }
    if (strlen(cfg->endpoint) >= TIER_ACTOR_ENDPOINT_MAX) {
        snprintf(why, len, "tier %s: endpoint longer than %d bytes", name,
                 TIER_ACTOR_ENDPOINT_MAX - 1);
        return -1;
    }
    if (cfg->max_slots > BUS_MAX_ARRAY) {
        snprintf(why, len, "tier %s: max_slots %u is above the protocol bound %u", name,
                 cfg->max_slots, BUS_MAX_ARRAY);
        return -1;
    }
    return 0;
}

/* The backend's description gives the epoch clients compare against (a host
 * tier's is its segment's) and the same-host access descriptor. */
static int s_describe(self_t *self, char *why, size_t len)
{
    tier_describe(self->tier, &self->desc);
    self->epoch = self->desc.epoch;
    self->verify_reads |= self->desc.verify_reads; /* the backend's option, or the caller's */
    size_t wire = sizeof((kvtier_TierInfo *)0)->shm;
    if (self->desc.access_kind == TIER_ACCESS_SHM && strlen(self->desc.access) >= wire) {
        snprintf(why, len,
                 "tier %s: its shm name \"%.64s...\" is longer than the %zu bytes a TierInfo "
                 "carries: set a shorter one",
                 self->name, self->desc.access, wire - 1);
        return -1;
    }
    return 0;
}

static int s_alloc_scratch(self_t *self)
{
    uint32_t ms = self->max_slots;
    self->arr = bus_arrays_new(BUS_MAX_ARRAY, BUS_MAX_BLOB); /* payload: a request's token */
    self->rep_sizes = calloc(self->max_frames, sizeof *self->rep_sizes);
    self->rep_mask = calloc(ms, sizeof *self->rep_mask);
    self->payload = calloc(self->max_frames, sizeof *self->payload);
    self->block_size = calloc(ms, sizeof *self->block_size);
    self->block_sum = calloc(ms, sizeof *self->block_sum);
    self->bufs = calloc(ms, sizeof *self->bufs);
    self->gets = calloc(ms, sizeof *self->gets);
    self->get_iov = calloc(ms, sizeof *self->get_iov);
    self->instances = calloc(self->max_instances, sizeof *self->instances);
    if (!self->arr || !self->rep_sizes || !self->rep_mask || !self->payload || !self->block_size ||
        !self->block_sum || !self->bufs || !self->gets || !self->get_iov || !self->instances)
        return -1;
    self->rep_arr.sizes = (bus_u64s_t){.v = self->rep_sizes, .cap = self->max_frames};
    self->rep_arr.mask = (bus_bools_t){.v = self->rep_mask, .cap = ms};
    self->rep_arr.checksums = (bus_u64s_t){.v = self->block_sum, .cap = ms};
    return 0;
}

static void s_self_destroy(self_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    self_t *self = *self_p;
    bus_request_reset(&self->req);
    zframe_destroy(&self->sched_peer);
    tier_actor_copy_destroy(self);
    tier_actor_ucx_destroy(&self->ucx);
    tier_actor_auth_fini(self);
    bus_server_destroy(&self->server);
    tier_close(&self->tier);
    bus_arrays_destroy(&self->arr);
    free(self->rep_sizes);
    free(self->rep_mask);
    free(self->payload);
    free(self->block_size);
    free(self->block_sum);
    free(self->net_written);
    free(self->bufs);
    free(self->gets);
    free(self->get_iov);
    free(self->inv_records);
    free(self->instances);
    free(self);
    *self_p = NULL;
}

static void s_limits(self_t *self, const tier_actor_config_t *cfg)
{
    self->max_slots = cfg->max_slots ? cfg->max_slots : TIER_ACTOR_DEFAULT_MAX_SLOTS;
    self->max_bytes = cfg->max_bytes ? cfg->max_bytes : TIER_ACTOR_DEFAULT_MAX_BYTES;
    self->max_instances =
        cfg->max_instances ? cfg->max_instances : TIER_ACTOR_DEFAULT_MAX_INSTANCES;
    uint64_t frames = (uint64_t)self->max_slots * TIER_MAX_IOV;
    self->max_frames = frames < BUS_MAX_ARRAY ? (uint32_t)frames : BUS_MAX_ARRAY;
    self->verify_put = cfg->verify_put;
    self->verify_reads = cfg->verify_reads;
}

static int s_bind(self_t *self, const tier_actor_config_t *cfg, char *why, size_t len)
{
    /* A frame larger than any block or frame 0 is refused by libzmq (the peer is
     * disconnected) rather than buffered in memory: set before the bind. */
    uint64_t big =
        self->tier->cfg.slot_size > BUS_MAX_FRAME0 ? self->tier->cfg.slot_size : BUS_MAX_FRAME0;
    self->server = bus_server_new_bounded(cfg->endpoint, self->name, big);
    if (!self->server) {
        snprintf(why, len, "tier %s: cannot bind %s: %s", self->name, cfg->endpoint,
                 zmq_strerror(errno));
        return -1;
    }
    bus_server_set_max_connections(self->server, cfg->max_connections);
    return 0;
}

static self_t *s_self_new(zsock_t *pipe, const tier_actor_config_t *cfg, char *why, size_t len)
{
    if (s_check_config(cfg, why, len) < 0)
        return NULL;
    self_t *self = calloc(1, sizeof *self);
    if (!self) {
        snprintf(why, len, "tier %s: out of memory", cfg->tier.name);
        return NULL;
    }
    self->pipe = pipe;
    self->tier_id = cfg->tier_id;
    snprintf(self->name, sizeof self->name, "%s", cfg->tier.name[0] ? cfg->tier.name : "?");
    if (cfg->host)
        snprintf(self->host, sizeof self->host, "%s", cfg->host);
    else
        (void)bus_host_identity(NULL, self->host, sizeof self->host);
    s_limits(self, cfg);
    if (s_alloc_scratch(self) < 0) {
        snprintf(why, len, "tier %s: out of memory for request scratch", self->name);
        goto out_fail;
    }
    self->tier = tier_open(&cfg->tier, why, len);
    if (!self->tier)
        goto out_fail;
    if (s_describe(self, why, len) < 0 || s_bind(self, cfg, why, len) < 0)
        goto out_fail;
    if (tier_actor_ucx_new(&self->ucx, self->name, bus_server_endpoint(self->server),
                           self->desc.ucx_regions, self->desc.ucx_region_bytes, why, len) < 0)
        goto out_fail;
    if (tier_actor_copy_new(self, cfg, why, len) < 0 ||
        tier_actor_auth_init(self, cfg, why, len) < 0)
        goto out_fail;
    if (tier_slot_data(self->tier, 0)) { /* mapped: arrivals over the network are checked */
        self->net_written = calloc((self->tier->cfg.capacity + 7) / 8, 1);
        if (!self->net_written) {
            snprintf(why, len, "tier %s: out of memory for the arrival bitmap", self->name);
            goto out_fail;
        }
    }
    self->stats.capacity = self->tier->cfg.capacity;
    tier_actor_count_used(self);
    return self;

out_fail:
    s_self_destroy(&self);
    return NULL;
}

/* ---- pipe ---- */

static void s_on_pipe(self_t *self)
{
    zmsg_t *msg = zmsg_recv(self->pipe);
    if (!msg) {
        self->terminated = true; /* interrupted */
        return;
    }
    char *cmd = zmsg_popstr(msg);
    if (!cmd) {
        bus_warn(S_LOG, "tier %s: empty pipe command ignored", self->name);
    } else if (streq(cmd, "$TERM")) {
        self->terminated = true;
    } else if (streq(cmd, "ENDPOINT")) {
        zstr_send(self->pipe, bus_server_endpoint(self->server));
    } else if (streq(cmd, "EPOCH")) {
        zsock_send(self->pipe, "8", self->epoch);
    } else if (streq(cmd, "DESCRIBE")) {
        zsock_send(self->pipe, "b", &self->desc, sizeof self->desc);
    } else if (streq(cmd, "STATS")) {
        bus_server_stats_t ss;
        bus_server_stats(self->server, &ss);
        tier_actor_count_used(self);
        self->stats.rejected = ss.rejected;
        self->stats.used_slots = self->used_slots;
        zsock_send(self->pipe, "b", &self->stats, sizeof self->stats);
    } else {
        bus_warn(S_LOG, "tier %s: unknown pipe command '%s' ignored", self->name, cmd);
    }
    zstr_free(&cmd);
    zmsg_destroy(&msg);
}

/* ---- requests ---- */

static void s_on_requests(self_t *self)
{
    for (int i = 0; i < S_BURST; i++) {
        int rc = bus_server_recv(self->server, 0, &self->req, self->arr);
        if (rc <= 0)
            break;
        self->stats.requests++;
        tier_actor_serve(self, &self->req);
        bus_request_reset(&self->req);
    }
}

static void s_run(self_t *self)
{
    zsock_t *server = bus_server_sock(self->server);
    zsock_t *watch = bus_server_monitor_sock(self->server);
    zpoller_t *poller = zpoller_new(self->pipe, server, watch, NULL);
    if (!poller) {
        bus_error(S_LOG, "tier %s: no poller; stopping", self->name);
        return;
    }
    /* Signals belong to the process main, which sends $TERM. */
    zpoller_set_nonstop(poller, true);
    self->poller = poller; /* copy clients add their sockets */
    int *ucx_fd = tier_actor_ucx_fd(self->ucx);
    if (ucx_fd)
        zpoller_add(poller, ucx_fd);
    self->ucx_wait_ms = tier_actor_ucx_service(self->ucx);
    while (!self->terminated) {
        int wait = tier_actor_copy_wait_ms(self);
        if (self->ucx_wait_ms >= 0 && (wait < 0 || self->ucx_wait_ms < wait))
            wait = self->ucx_wait_ms;
        void *which = zpoller_wait(poller, wait);
        if (which == self->pipe)
            s_on_pipe(self);
        else if (which == server)
            s_on_requests(self);
        else if (which == watch)
            bus_server_watch(self->server); /* the bound on connections */
        else if (!which && zpoller_terminated(poller) && errno == ETERM)
            break; /* the context is gone; EINTR (a signal) is not a reason to stop */
        /* Copy replies are taken on every wake-up, so a busy server cannot starve them. */
        tier_actor_copy_service(self);
        /* UCX progress on every wake-up too (bounded), then the fd is armed again */
        self->ucx_wait_ms = tier_actor_ucx_service(self->ucx);
    }
    if (ucx_fd)
        zpoller_remove(poller, ucx_fd);
    tier_actor_copy_destroy(self); /* its sockets leave the poller first */
    self->poller = NULL;
    zpoller_destroy(&poller);
}

/* The start's outcome goes to tier_actor_new through bus_actor_ready. */
static void s_actor(zsock_t *pipe, void *args)
{
    const tier_actor_config_t *cfg = args;
    char why[512] = "";
    self_t *self = s_self_new(pipe, cfg, why, sizeof why);
    if (!self) {
        bus_error(S_LOG, "%s", why);
        (void)bus_actor_ready(pipe, false);
        return;
    }
    bus_info(S_LOG, "tier %s (id %u, %s, %" PRIu64 " x %" PRIu64 " bytes; %s) serving on %s",
             self->name, self->tier_id, self->tier->cfg.kind, self->tier->cfg.capacity,
             self->tier->cfg.slot_size, self->desc.detail[0] ? self->desc.detail : "-",
             bus_server_endpoint(self->server));
    snprintf(self->desc.ucx_address, sizeof self->desc.ucx_address, "%s",
             tier_actor_ucx_address(self->ucx));
    if (self->ucx)
        bus_info(S_LOG, "tier %s: UCX listener on %s (%u staging regions of %" PRIu64 " bytes)",
                 self->name, tier_actor_ucx_address(self->ucx), self->desc.ucx_regions,
                 self->desc.ucx_region_bytes);
    (void)bus_actor_ready(pipe, true);
    s_run(self);
    s_self_destroy(&self);
}

zactor_t *tier_actor_new(const tier_actor_config_t *cfg)
{
    return bus_actor_new(s_actor, (void *)cfg);
}

/* ---- pipe wrappers ---- */

static bool s_ask(zactor_t *actor, const char *cmd)
{
    return bus_actor_ask(actor, BUS_ACTOR_ASK_MS, "s", cmd) == 0;
}

int tier_actor_endpoint(zactor_t *actor, char *buf, size_t len)
{
    char *ep = s_ask(actor, "ENDPOINT") ? zstr_recv(actor) : NULL;
    int rc = ep ? 0 : -1;
    if (ep && buf && len)
        snprintf(buf, len, "%s", ep);
    zstr_free(&ep);
    return rc;
}

uint64_t tier_actor_epoch(zactor_t *actor)
{
    uint64_t e = 0;
    if (!s_ask(actor, "EPOCH") || zsock_recv(actor, "8", &e) < 0)
        return 0;
    return e;
}

int tier_actor_describe(zactor_t *actor, tier_desc_t *out)
{
    return bus_actor_ask_struct(actor, "DESCRIBE", out, sizeof *out);
}

void tier_actor_info_access(const tier_desc_t *d, kvtier_TierInfo *out)
{
    static const uint8_t zero[TIER_DESC_UUID_LEN];
    out->cuda_ipc_handle.size = 0;
    out->gpu_uuid.size = 0;
    out->slot_stride = d->slot_stride;
    if (d->access_kind == TIER_ACCESS_CUDA_IPC && d->handle_len &&
        d->handle_len <= sizeof out->cuda_ipc_handle.bytes) {
        memcpy(out->cuda_ipc_handle.bytes, d->handle, d->handle_len);
        out->cuda_ipc_handle.size = (pb_size_t)d->handle_len;
    }
    if (memcmp(d->gpu_uuid, zero, sizeof zero) != 0) {
        memcpy(out->gpu_uuid.bytes, d->gpu_uuid, sizeof d->gpu_uuid);
        out->gpu_uuid.size = sizeof d->gpu_uuid;
    }
}

int tier_actor_stats(zactor_t *actor, tier_actor_stats_t *out)
{
    return bus_actor_stats(actor, out, sizeof *out);
}
