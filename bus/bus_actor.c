/* bus_actor.c — see bus_actor.h. */
#include "bus_actor.h"

#include <string.h>

#include "bus_log.h"

int bus_actor_pipe(zsock_t *pipe, const char *log, const void *stats, size_t len)
{
    char *cmd = zstr_recv(pipe);
    if (!cmd)
        return -1;
    int rc = 0;
    if (streq(cmd, "$TERM"))
        rc = -1;
    else if (streq(cmd, "STATS"))
        zsock_send(pipe, "b", stats, len);
    else
        bus_warn(log, "unknown pipe command '%s' ignored", cmd);
    zstr_free(&cmd);
    return rc;
}

int bus_actor_stats(zactor_t *actor, void *out, size_t len)
{
    if (!actor || !out || zstr_send(actor, "STATS") < 0)
        return -1;
    zframe_t *f = zframe_recv(actor);
    int rc = -1;
    if (f && zframe_size(f) == len) {
        memcpy(out, zframe_data(f), len);
        rc = 0;
    }
    zframe_destroy(&f);
    return rc;
}
