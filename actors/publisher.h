/* publisher.h — the publisher actor (DESIGN.md §5, §13): takes ready-encoded
 * event batches from the scheduler, publishes them on an XPUB socket in the
 * framing of vLLM's KV events, and keeps the last ones in a bounded ring that a
 * ROUTER replay socket resends from; a mirror of the index it rebuilds from
 * them serves snapshots, and a second XPUB can carry them in vLLM's msgpack
 * layout. It never waits on a subscriber or on the scheduler.
 *
 * Endpoints (each must pass bus_endpoint_check(..., BUS_ENDPOINT_BIND); bind to
 * loopback — tcp://127.0.0.1:PORT, ipc://, inproc:// — unless the deployment says
 * otherwise: the sockets carry no authentication of their own):
 *   - cfg.input_endpoint (required): the actor BINDS a PULL there; the scheduler
 *     connects a PUSH with a small SNDHWM and sends with ZMQ_DONTWAIT, so a slow
 *     publisher costs the scheduler nothing: a batch it could not queue is a
 *     sequence gap here. The PULL's queue is cfg.input_hwm messages.
 *   - cfg.endpoint (required): XPUB; subscribers connect a SUB and subscribe to a
 *     topic prefix ("" for all).
 *   - cfg.replay_endpoint (optional, NULL or "" for none): ROUTER for replays.
 *
 * Input, from the scheduler: exactly 3 frames
 *     [topic][seq: 8 bytes, unsigned, big-endian][payload]
 * topic 1..PUBLISHER_TOPIC_MAX bytes of printable ASCII (0x20..0x7e), payload
 * 0..BUS_MAX_BLOB bytes, seq below UINT64_MAX. Sequences are strictly
 * increasing: a seq not above the last accepted one is bad input. Anything
 * else (frame count, sizes, topic bytes, order) is counted in bad_input and
 * dropped, logged once per PUBLISHER_LOG_EVERY. A seq above last + 1 is a gap:
 * gaps_in++, missing_in += the sequences skipped, and the batch is published.
 * Before the first batch, cfg.first_seq_hint (when not 0) stands for the
 * expected seq: a first seq above it counts as a gap too; the hint changes
 * nothing else (a first seq below it is accepted). Every socket has its
 * ZMQ_MAXMSGSIZE set before it binds (PULL: BUS_MAX_BLOB per frame), so over
 * tcp or ipc a larger frame closes the sender's connection instead (inproc has
 * no such limit: there the size check above counts it).
 *
 * Output on the XPUB: the same 3 frames [topic][seq BE][payload], byte for byte
 * (the payload is not copied: the ring and the sockets share the message).
 * Publishing never blocks: ZMQ_XPUB_NODROP is off and a subscriber more than
 * cfg.xpub_hwm messages behind loses batches (it sees a sequence gap and can
 * replay). The subscribers stat counts subscriptions (XPUB verbose and verboser:
 * every subscribe +1, every unsubscribe -1, and a SUB that goes away
 * unsubscribes its prefixes): a SUB with one prefix counts 1. A SUB is
 * connected only once that count shows it (ZeroMQ's slow joiner).
 *
 * Ring: the last accepted batches, at most cfg.ring_batches of them and at most
 * cfg.ring_bytes bytes (topic + payload per batch); the oldest are evicted
 * first. A batch larger than ring_bytes on its own is published but empties the
 * ring (a replay from before it then starts with GAP).
 *
 * Replay protocol, on the ROUTER. The requester uses a DEALER (not REQ: the
 * answer is many messages). Every message below is what the DEALER sends or
 * receives (the ROUTER's routing-id frame is not shown); seqs are 8 bytes BE.
 *   request:  ["REPLAY"][from_seq]
 *   answer:   ["GAP"][oldest_seq_in_ring]    only when the ring evicted batches at or
 *                                            after from_seq (from_seq is older than
 *                                            the ring's oldest batch and older ones
 *                                            existed): they are lost. With the ring
 *                                            empty it carries next_seq (below)
 *             ["BATCH"][topic][seq][payload] for each ring batch with seq >= from_seq,
 *                                            up to the last batch published when the
 *                                            request arrived, in seq order
 *             ["END"][next_seq]              next_seq = that last seq + 1, or
 *                                            from_seq when nothing was published
 *   errors:   ["ERROR"][text]                ends the request; text says what to fix:
 *                                            wrong frame count, unknown verb, a seq
 *                                            not 8 bytes, "busy: N replays in
 *                                            progress" (PUBLISHER_MAX_REPLAYS), or a
 *                                            replay to this requester already running.
 *                                            A request from a REQ (empty delimiter
 *                                            frame) is answered ERROR behind an empty
 *                                            frame, so the REQ can read why. With
 *                                            cfg.keys_only, a key not allowed gets
 *                                            "permission denied: ..." (and a vLLM
 *                                            replay the end marker with that reason).
 * A replay sends at most PUBLISHER_REPLAY_PER_TURN batches per loop turn (shared
 * by the replays in progress), so the actor keeps publishing meanwhile. If the
 * ring evicts batches a replay has not sent yet, the replay sends another
 * ["GAP"][oldest_seq_in_ring] and goes on from there. A requester that goes away
 * ends its replay; one that does not read for cfg.replay_stall_ms is given
 * up (its batches would be dropped at the ROUTER's high-water mark otherwise).
 * Both count in replay_errors. To converge, a consumer subscribes first, then
 * replays from the seq it needs, and drops duplicates by seq.
 *
 * Snapshot, on the same ROUTER (docs/EVENTS.md "Snapshot"):
 *   request:  ["SNAPSHOT"]
 *   answer:   ["SNAPSHOT"][at_seq][n_blocks] ["BLOCKS"][EventBatch of BlockStored]...
 *             ["END"][at_seq + 1]
 *   errors:   ["ERROR"][text]: the mirror is stale (publisher_mirror.h: why), at
 *             most PUBLISHER_MAX_SNAPSHOTS at once (each holds a copy of the mirror).
 * The mirror is kept when there is a replay socket or a vLLM stream: every
 * accepted batch is decoded and applied (an input gap or an undecodable batch
 * makes it stale until the next LeaderChanged).
 *
 * vLLM stream (cfg.vllm_endpoint): each batch's events in vLLM's msgpack layout
 * (events_vllm.h) on a second XPUB under the same topic, with its own dense
 * seq (epoch << 40 | m; a batch it could not derive skips one). Its ring has
 * the same bounds. cfg.vllm_replay_endpoint: a ROUTER speaking vLLM's replay
 * protocol: [""][start_seq] -> [""][seq][payload]... then [""][-1][""]; a bad
 * request gets [""][-1][reason].
 *
 * Pipe: "$TERM"; "STATS" -> one frame, publisher_stats_t; "ENDPOINTS" -> two
 * string frames, the XPUB and the replay endpoint as bound (ephemeral ports
 * resolved; "" when there is no replay socket); "VLLM_ENDPOINTS" -> the same
 * for the vLLM stream. */
#ifndef KVT_PUBLISHER_H
#define KVT_PUBLISHER_H

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bus_curve.h"

#define PUBLISHER_TOPIC_MAX 96u /* "removed/" and a 64-byte instance id fit */
#define PUBLISHER_DEFAULT_RING_BATCHES 4096u
#define PUBLISHER_DEFAULT_RING_BYTES (64ull << 20)
#define PUBLISHER_MAX_RING_BATCHES (1u << 20)
#define PUBLISHER_DEFAULT_XPUB_HWM 1000
#define PUBLISHER_DEFAULT_INPUT_HWM 1000
#define PUBLISHER_MAX_REPLAYS 16u
#define PUBLISHER_MAX_SNAPSHOTS 2u /* each holds a copy of the mirror */
#define PUBLISHER_REPLAY_PER_TURN 256u
#define PUBLISHER_DEFAULT_REPLAY_STALL_MS 10000u
#define PUBLISHER_LOG_EVERY 1000u
#define PUBLISHER_MAX_KEYS 256u /* keys_only: the keys allowed (SCHED_ACL_MAX grants) */

typedef struct {
    const char *name;                 /* logs; NULL: "publisher" */
    const char *input_endpoint;       /* required: PULL bound here, the scheduler PUSHes */
    const char *endpoint;             /* required: XPUB bound here */
    const char *replay_endpoint;      /* NULL or "": no replay socket; else ROUTER bound here */
    uint32_t ring_batches;            /* 0: default; at most PUBLISHER_MAX_RING_BATCHES */
    uint64_t ring_bytes;              /* 0: default */
    uint64_t first_seq_hint;          /* the first seq expected (gap stats only); 0: none */
    int xpub_hwm;                     /* batches queued per subscriber; 0: default */
    int input_hwm;                    /* batches queued from the scheduler; 0: default */
    uint32_t replay_stall_ms;         /* a replay not read this long is given up; 0: default */
    uint32_t snapshot_blocks;         /* mirror bound (publisher_mirror.h); 0: default */
    const char *vllm_endpoint;        /* NULL or "": no vLLM stream; else its XPUB binds here */
    const char *vllm_replay_endpoint; /* NULL or "": none; else ROUTER, vLLM's replay */
    int vllm_layout;                  /* events_vllm_layout_t: 0 map, 1 array */
    /* Per-instance isolation (security.curve.instances, docs/SECURITY.md "Isolation"):
     * the streams carry every instance's events, so with keys_only a subscription
     * (both XPUBs, in manual mode) or a replay / snapshot request is served only
     * when its connection's CURVE key is one of keys[0..n_keys) (the keys granted
     * "*") or this process's own; others are ignored (subscriptions) or answered
     * ERROR (requests), and counted in `refused`. false: every admitted peer. */
    bool keys_only;
    const char (*keys)[BUS_CURVE_KEY_TXT];
    uint32_t n_keys; /* at most PUBLISHER_MAX_KEYS */
} publisher_config_t;

typedef struct {
    uint64_t received;             /* input messages, good or bad */
    uint64_t published;            /* batches sent on the XPUB */
    uint64_t bad_input;            /* input messages dropped */
    uint64_t gaps_in;              /* input seqs that skipped ahead */
    uint64_t missing_in;           /* sequences those gaps skipped */
    uint64_t last_seq;             /* last accepted seq (0 before the first) */
    uint64_t ring_batches;         /* now */
    uint64_t ring_bytes;           /* now */
    uint64_t ring_first_seq;       /* oldest seq in the ring; 0 when it is empty */
    uint64_t replays_served;       /* replays that ended with END */
    uint64_t replay_batches_sent;  /* BATCH messages */
    uint64_t replay_errors;        /* ERROR answers, replays given up */
    uint64_t subscribers;          /* subscriptions now (keys_only: those applied; a peer
                                      that leaves counts its own down, a refused one may
                                      count others', never below 0) */
    uint64_t replays_active;       /* replays in progress now */
    uint64_t snapshots_served;     /* snapshots that ended with END */
    uint64_t snapshot_blocks_sent; /* locations in them */
    uint64_t mirror_blocks;        /* locations in the mirror now */
    uint64_t mirror_stale;         /* 1: the mirror serves no snapshot (see docs) */
    uint64_t undecodable;          /* batches published that the mirror could not read */
    uint64_t vllm_published;       /* batches sent on the vLLM XPUB */
    uint64_t vllm_last_seq;        /* its last sequence */
    uint64_t vllm_replays_served;  /* vLLM replays that ended with the end marker */
    uint64_t refused;              /* subscriptions and requests of keys not allowed (keys_only) */
} publisher_stats_t;

/* Starts the actor. NULL (after logging why) on a bad config or a failed bind. */
zactor_t *publisher_new(const publisher_config_t *cfg);

/* Counters. 0, or -1 when the actor does not answer. */
int publisher_stats(zactor_t *publisher, publisher_stats_t *out);

/* The XPUB and replay endpoints as bound into xpub[0..xlen) and
 * replay[0..rlen) ("" without a replay socket). 0, or -1 when the actor does
 * not answer or an endpoint does not fit. */
int publisher_endpoints(zactor_t *publisher, char *xpub, size_t xlen, char *replay, size_t rlen);

/* The same for the vLLM stream ("" for each socket it does not have). */
int publisher_vllm_endpoints(zactor_t *publisher, char *xpub, size_t xlen, char *replay,
                             size_t rlen);

#endif
