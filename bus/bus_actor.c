/* bus_actor.c — see bus_actor.h. */
#include "bus_actor.h"

#include <stdarg.h>
#include <string.h>

#include "bus_log.h"

zactor_t *bus_actor_new(zactor_fn *fn, void *args)
{
    zactor_t *actor = zactor_new(fn, args); /* takes the handshake signal */
    if (!actor)
        return NULL;
    /* The start's outcome. EINTR is not one: taken for a failed start, it would
     * destroy a started actor whose args the caller then frees. */
    int status;
    do
        status = zsock_wait(actor);
    while (status == -1 && zmq_errno() == EINTR);
    if (status != 0)
        zactor_destroy(&actor);
    return actor;
}

int bus_actor_ready(zsock_t *pipe, bool ok)
{
    zsock_signal(pipe, 0);
    zsock_signal(pipe, ok ? 0 : 1);
    if (ok)
        return 0;
    while (true) {
        char *cmd = zstr_recv(pipe);
        bool term = !cmd || streq(cmd, "$TERM");
        zstr_free(&cmd);
        if (term)
            return -1;
    }
}

int bus_actor_ask(zactor_t *actor, int timeout_ms, const char *picture, ...)
{
    if (!actor || !picture)
        return -1;
    va_list ap;
    va_start(ap, picture);
    int rc = zsock_vsend(actor, picture, ap);
    va_end(ap);
    if (rc < 0)
        return -1;
    zpoller_t *p = zpoller_new(actor, NULL);
    if (!p)
        return -1;
    zpoller_set_nonstop(p, true); /* a signal to the process is not the answer */
    bool ready = zpoller_wait(p, timeout_ms) == actor;
    zpoller_destroy(&p);
    return ready ? 0 : -1;
}

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

int bus_actor_pipe_cmds(zsock_t *pipe, const char *log, const bus_actor_cmd_t *cmds, void *arg)
{
    zmsg_t *msg = zmsg_recv(pipe);
    if (!msg)
        return -1;
    char *cmd = zmsg_popstr(msg);
    int rc = 0;
    if (!cmd) {
        bus_warn(log, "empty pipe command ignored");
    } else if (streq(cmd, "$TERM")) {
        rc = -1;
    } else {
        const bus_actor_cmd_t *c = cmds;
        while (c && c->name && !streq(c->name, cmd))
            c++;
        if (c && c->name)
            c->fn(pipe, arg);
        else
            bus_warn(log, "unknown pipe command '%s' ignored", cmd);
    }
    zstr_free(&cmd);
    zmsg_destroy(&msg);
    return rc;
}

int bus_actor_stats(zactor_t *actor, void *out, size_t len)
{
    return bus_actor_ask_struct(actor, "STATS", out, len);
}

int bus_actor_ask_struct(zactor_t *actor, const char *cmd, void *out, size_t len)
{
    if (!out || !cmd || bus_actor_ask(actor, BUS_ACTOR_ASK_MS, "s", cmd) < 0)
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
