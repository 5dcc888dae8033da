/* kvt_transport.c — the registry of the data path's transports and the rule that
 * picks one per token tier (kvt_transport.h). Knows each transport by its ops
 * only: adding one (gpu ipc, remote) is a line in kvti_transports. */
#include "kvt_transport.h"

const kvti_transport_t *const kvti_transports[KVTI_N_TRANSPORTS] = {
    &kvti_transport_cuda, &kvti_transport_shm, &kvti_transport_frames};

kvti_move_fn kvti_transport_move_op(const kvti_transport_t *x, bus_token_kind_t kind)
{
    return kind == BUS_TOKEN_PUT ? x->put : kind == BUS_TOKEN_GET ? x->get : x->prefetch;
}

int kvti_transport_choose(void *const xs[KVTI_N_TRANSPORTS], kvt_client_t *c, const kvti_job_t *j,
                          const bus_token_tier_t *t, void **at)
{
    for (int x = 0; x < KVTI_N_TRANSPORTS; x++) {
        const kvti_transport_t *tr = kvti_transports[x];
        if (!kvti_transport_move_op(tr, j->kind) || (tr->usable && !tr->usable(c, t)))
            continue;
        *at = tr->attach ? tr->attach(xs[x], j, t) : NULL;
        if (tr->attach && !*at)
            continue;
        return x;
    }
    *at = NULL;
    return -1;
}
