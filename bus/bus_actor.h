/* bus_actor.h — the pipe protocol of kvtier's background actors (czmq zactor):
 * "$TERM" ends the actor's loop, "STATS" is answered with one frame holding the
 * actor's stats struct. Shared so each actor does not carry its own copy. */
#ifndef KVT_BUS_ACTOR_H
#define KVT_BUS_ACTOR_H

#include <czmq.h>
#include <stddef.h>

/* Reads one command from the actor's pipe (a zloop reader's body): -1 for
 * "$TERM" or a dead pipe (the loop ends), else 0; "STATS" sends stats[0..len);
 * anything else is logged under `log` and ignored. */
int bus_actor_pipe(zsock_t *pipe, const char *log, const void *stats, size_t len);

/* Asks an actor for its stats: 0 and out[0..len) filled, or -1 (no actor, no
 * answer, or an answer of another size). */
int bus_actor_stats(zactor_t *actor, void *out, size_t len);

#endif
