/* wire_testserver.h — a real bus_server in its own thread (zactor) for the
 * request/reply and bad-input tests. It answers:
 *   LookupRequest  -> LookupReply: hit_count = request window, hit[i] = key[i][0] & 1,
 *                     tier_ids[i] = key[i][1];
 *                     window TU_HOLD: held unanswered until a window TU_FLUSH arrives,
 *                     which first answers every held request (late), then itself;
 *                     with reverse_batch N: lookups are queued and answered N at a
 *                     time in reverse order of arrival.
 *   WriteSlotsRequest -> WriteSlotsReply.written = sum of payload bytes, checked
 *                     against each frame's pattern (byte = slot + segment).
 *   ReadSlotsRequest  -> ReadSlotsReply with one zero-copy frame per slot of
 *                     sizes[i] bytes, each byte = slot & 0xff.
 *   anything else  -> NOT_FOUND without body.
 * Pipe commands: "STATS" -> "<accepted> <rejected>". Test use only. */
#ifndef KVT_WIRE_TESTSERVER_H
#define KVT_WIRE_TESTSERVER_H

#include <czmq.h>
#include <stdint.h>

#define TU_HOLD 999u
#define TU_FLUSH 1000u

typedef struct {
    const char *endpoint;
    uint32_t reverse_batch;
} tu_server_args_t;

/* Starts the server; *endpoint_out gets its bound endpoint (free with zstr_free).
 * args must outlive the actor. */
zactor_t *tu_server_start(tu_server_args_t *args, char **endpoint_out);
/* The server's accepted / rejected request counts (bus_server_stats). */
void tu_server_counts(zactor_t *actor, uint64_t *accepted, uint64_t *rejected);

#endif
