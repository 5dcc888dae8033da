/* sched_acl.c — which instance a meta-plane request acts on, and whether the CURVE
 * key it came with (bus_request_t.peer_key, set by zauth's handshake) is granted
 * that instance in cfg.acl. Never trusts anything the request says about who sent
 * it: the key is the connection's, not the envelope's sender. */
#include "sched_acl.h"

#include <string.h>

#include "bus_curve.h"

/* The instance the request names; NULL: not instance-scoped (cluster info, admin
 * status); "" for a StatsRequest over every instance. */
static const char *s_instance(const kvtier_Envelope *env)
{
    switch (env->which_body) {
    case kvtier_Envelope_register_instance_req_tag:
        return env->body.register_instance_req.spec.instance_id;
    case kvtier_Envelope_request_begin_req_tag:
        return env->body.request_begin_req.instance_id;
    case kvtier_Envelope_request_end_req_tag:
        return env->body.request_end_req.instance_id;
    case kvtier_Envelope_lookup_req_tag:
        return env->body.lookup_req.instance_id;
    case kvtier_Envelope_prepare_get_req_tag:
        return env->body.prepare_get_req.instance_id;
    case kvtier_Envelope_complete_get_req_tag:
        return env->body.complete_get_req.instance_id;
    case kvtier_Envelope_prepare_put_req_tag:
        return env->body.prepare_put_req.instance_id;
    case kvtier_Envelope_complete_put_req_tag:
        return env->body.complete_put_req.instance_id;
    case kvtier_Envelope_prepare_prefetch_req_tag:
        return env->body.prepare_prefetch_req.instance_id;
    case kvtier_Envelope_copy_prefetch_req_tag:
        return env->body.copy_prefetch_req.instance_id;
    case kvtier_Envelope_complete_prefetch_req_tag:
        return env->body.complete_prefetch_req.instance_id;
    case kvtier_Envelope_prepare_req_tag:
        return env->body.prepare_req.instance_id;
    case kvtier_Envelope_complete_req_tag:
        return env->body.complete_req.instance_id;
    case kvtier_Envelope_touch_req_tag:
        return env->body.touch_req.instance_id;
    case kvtier_Envelope_remove_req_tag:
        return env->body.remove_req.instance_id;
    case kvtier_Envelope_stats_req_tag:
        return env->body.stats_req.instance_id;
    case kvtier_Envelope_admin_trim_req_tag:
        return env->body.admin_trim_req.instance_id;
    case kvtier_Envelope_admin_resign_req_tag:
    case kvtier_Envelope_admin_drain_req_tag:
        return ""; /* the whole cluster's: a "*" grant */
    default:
        return NULL;
    }
}

/* KEY is granted INSTANCE ("" asks for every instance: only a "*" grant). */
static bool s_granted(const sched_config_t *cfg, const char *key, const char *instance)
{
    const bus_curve_client_t *own = bus_curve_process_keys();
    if (own && !strcmp(key, own->public_key))
        return true; /* this process's own actors (metrics) */
    for (uint32_t i = 0; i < cfg->n_acl; i++) {
        const sched_acl_entry_t *e = &cfg->acl[i];
        if (!strcmp(e->key, key) &&
            (!strcmp(e->instance, "*") || (instance[0] && !strcmp(e->instance, instance))))
            return true;
    }
    return false;
}

bool sched_acl_allows(sched_t *self, sched_call_t *call)
{
    if (!self->cfg.acl_on || call->srv != self->server)
        return true;
    const char *instance = s_instance(&call->req.env);
    bool all = call->req.env.which_body == kvtier_Envelope_stats_req_tag ||
               call->req.env.which_body == kvtier_Envelope_admin_resign_req_tag ||
               call->req.env.which_body == kvtier_Envelope_admin_drain_req_tag;
    if (!instance || (!instance[0] && !all))
        return true; /* not instance-scoped; an empty id is the handler's INVALID_ARGUMENT */
    const char *key = call->req.peer_key;
    if (!key[0]) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_PERMISSION_DENIED,
                          "%s for instance \"%s\": this connection has no CURVE key (isolation "
                          "by key is on: connect over tcp with a key granted the instance)",
                          bus_body_name(call->req.env.which_body), instance);
        return false;
    }
    if (s_granted(&self->cfg, key, instance))
        return true;
    if (instance[0])
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_PERMISSION_DENIED,
                          "%s: key %s is not granted instance \"%s\" (security.curve.instances "
                          "of the deployment)",
                          bus_body_name(call->req.env.which_body), key, instance);
    else
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_PERMISSION_DENIED,
                          "%s over all instances: key %s is not granted \"*\" (ask for one "
                          "instance, or grant the key \"*\" in security.curve.instances)",
                          bus_body_name(call->req.env.which_body), key);
    return false;
}
