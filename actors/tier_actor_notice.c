/* tier_actor_notice.c — a tier actor tells the scheduler by itself that it dropped
 * a block (issue 12 §4: "a slot that a tier drops leaves the index at once").
 *
 * The tier plane is request/reply, the scheduler its client; but a ROUTER may send
 * to any peer it has heard from, so the actor remembers the routing id of the last
 * request only a scheduler sends — a PutHeader or DeleteSlots under its admin token
 * when tokens are on (anyone could send an Inventory) — and sends a TierNotice there: a reply
 * envelope without corr_id, which the scheduler's bus_client hands to its notice handler. No new
 * socket, endpoint or configuration; a notice lost (no scheduler yet, a full queue,
 * a leader change in between) leaves the block to the gc's probes, as before. */
#include "tier_actor_int.h"

#include <string.h>

#include "bus_log.h"

#define S_LOG "tier"

void tier_actor_notice_peer(tier_actor_self_t *self, const bus_request_t *req,
                            const tier_actor_grant_t *g)
{
    pb_size_t tag = req->env.which_body;
    if (tag != kvtier_Envelope_put_header_req_tag && tag != kvtier_Envelope_delete_slots_req_tag &&
        tag != kvtier_Envelope_inventory_req_tag)
        return;
    if (self->auth && (!g || !g->on || g->view.kind != BUS_TOKEN_ADMIN))
        return; /* not proven to be the scheduler: whoever it is gets no notices */
    if (self->sched_peer && zframe_eq(self->sched_peer, req->routing_id))
        return;
    zframe_destroy(&self->sched_peer);
    self->sched_peer = zframe_dup(req->routing_id);
}

void tier_actor_notice_dropped(tier_actor_self_t *self, uint64_t slot, const uint8_t *key,
                               const char *cause)
{
    if (!self->sched_peer || !key) {
        self->stats.drops_unnoticed++;
        return;
    }
    kvtier_Envelope env;
    bus_env_init_reply(&env, NULL, kvtier_Envelope_tier_notice_tag, self->name);
    kvtier_TierNotice *n = &env.body.tier_notice;
    n->tier_id = self->tier_id;
    n->epoch = self->epoch;
    n->dropped_count = 1;
    n->dropped[0].slot = slot;
    memcpy(n->dropped[0].key, key, sizeof n->dropped[0].key);
    snprintf(n->cause, sizeof n->cause, "%s", cause ? cause : "");
    kvtier_Status st = {0};
    if (bus_server_reply(self->server, self->sched_peer, &env, NULL, NULL, 0, &st) < 0) {
        self->stats.drops_unnoticed++;
        bus_warn(S_LOG, "tier %s: could not tell the scheduler that slot %llu was dropped: %s",
                 self->name, (unsigned long long)slot, st.message);
        return;
    }
    self->stats.drops_noticed++;
}
