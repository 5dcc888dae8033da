/* bus_actor.h — how kvtier's actors (czmq zactor) start and are asked things.
 *
 * Start: czmq 4.2.1's zactor_new consumes the actor's first zsock_signal and
 * drops its status, so an actor that signals 1 on a failed start still yields a
 * live zactor_t. Every kvtier actor therefore starts through bus_actor_new and
 * reports its start once with bus_actor_ready: a handshake signal (the one
 * zactor_new eats) then the outcome (the one bus_actor_new reads). After a failed
 * start the actor waits for "$TERM", so bus_actor_new's zactor_destroy finds it.
 *
 * Pipe: "$TERM" ends the actor's loop, "STATS" is answered with one frame holding
 * the actor's stats struct (bus_actor_pipe). A question to an actor is bounded
 * (bus_actor_ask): a stuck actor is an error, never a hang. */
#ifndef KVT_BUS_ACTOR_H
#define KVT_BUS_ACTOR_H

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>

/* The wait of bus_actor_stats and of the actors' own question wrappers. */
#define BUS_ACTOR_ASK_MS 5000

/* Starts FN(pipe, ARGS) on its own thread and waits until it has called
 * bus_actor_ready: the actor, or NULL when it reported a failed start (it is
 * destroyed, FN has returned) or could not be made. ARGS need only live until
 * bus_actor_new returns. FN must call bus_actor_ready exactly once. A process
 * that catches SIGINT/SIGTERM starts actors with them blocked: zactor_new's own
 * handshake wait ends early on a signal. */
zactor_t *bus_actor_new(zactor_fn *fn, void *args);

/* The actor side of bus_actor_new, once its start is done: OK true reports a
 * started actor and returns 0 at once; false reports a failed start, waits for
 * "$TERM" (or a dead pipe) and returns -1, after which FN returns. */
int bus_actor_ready(zsock_t *pipe, bool ok);

/* Sends ACTOR a message built from PICTURE and the arguments (zsock_send's
 * pictures, e.g. "s", "STATS") and waits at most TIMEOUT_MS for its answer: 0 when
 * the answer is there to be read from ACTOR, -1 (no actor, the send failed, no
 * answer in time). After a -1 the actor's pipe is out of step (a late answer
 * would be read as the next one): the caller treats the actor as broken. */
int bus_actor_ask(zactor_t *actor, int timeout_ms, const char *picture, ...);

/* Reads one command from the actor's pipe (a zloop reader's body): -1 for
 * "$TERM" or a dead pipe (the loop ends), else 0; "STATS" sends stats[0..len);
 * anything else is logged under `log` and ignored. */
int bus_actor_pipe(zsock_t *pipe, const char *log, const void *stats, size_t len);

/* One pipe command of an actor's table: its name and what answers it (arg: the
 * actor's own state). A table ends with a NULL name. */
typedef struct {
    const char *name;
    void (*fn)(zsock_t *pipe, void *arg);
} bus_actor_cmd_t;

/* Reads one command from the actor's pipe and runs its entry of cmds: -1 for
 * "$TERM" or a dead pipe (the loop ends), else 0; an empty or unknown command
 * is logged under `log` and ignored. (bus_actor_pipe is this with one entry,
 * STATS.) */
int bus_actor_pipe_cmds(zsock_t *pipe, const char *log, const bus_actor_cmd_t *cmds, void *arg);

/* Asks an actor for its stats, bounded by BUS_ACTOR_ASK_MS: 0 and out[0..len)
 * filled, or -1 (no actor, no answer in time, or an answer of another size). */
int bus_actor_stats(zactor_t *actor, void *out, size_t len);

/* The same for any command answered with one struct frame ("DESCRIBE"...). */
int bus_actor_ask_struct(zactor_t *actor, const char *cmd, void *out, size_t len);

#endif
