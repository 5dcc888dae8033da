/* bus_envelope.h — the bus message codec (DESIGN.md §5). A bus message is
 * multipart: [routing id (ROUTER side only)] [frame 0: protobuf Envelope]
 * [payload frames 1..n: raw block bytes]. This file pair owns encoding and
 * validating decoding of that layout, and sending it with zero-copy payloads.
 * It never trusts input: every failure returns a negative code and fills a
 * kvtier_Status with INVALID_ARGUMENT and a message a person can act on. It never
 * asserts on, or crashes from, bytes that came off a socket.
 *
 * Body kinds are the members of Envelope.body (schemas/envelope.proto); a
 * request with field number N is answered by the reply with field number N + 1. */
#ifndef KVT_BUS_ENVELOPE_H
#define KVT_BUS_ENVELOPE_H

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bus.h"
#include "bus_arrays.h"
#include "bus_status.h"
#include "envelope.pb.h"

/* Frame 0 larger than this is refused before parsing (65,536 keys and four
 * parallel per-key arrays fit with room to spare). */
#define BUS_MAX_FRAME0 (16u << 20)
/* Frames per slot in WriteSlots/ReadSlots (segments, e.g. layer groups). */
#define BUS_MAX_SEGMENTS 1024u

typedef enum {
    BUS_DIR_ANY = 0,     /* decode: accept requests and replies */
    BUS_DIR_REQUEST = 1, /* decode: a request body must be present */
    BUS_DIR_REPLY = 2,   /* decode: a reply body, or none with a non-OK status */
} bus_dir_t;

/* ---- body kinds ---- */

/* Message name of a body kind ("LookupRequest"), NULL if the tag is not one. */
const char *bus_body_name(pb_size_t tag);
/* BUS_DIR_REQUEST or BUS_DIR_REPLY; BUS_DIR_ANY (0) for an unknown tag. */
bus_dir_t bus_body_dir(pb_size_t tag);
/* Reply kind of a request kind (tag + 1); 0 if `req_tag` is not a request. */
pb_size_t bus_body_reply_tag(pb_size_t req_tag);
/* All body kinds in field-number order: for i in [0, bus_body_count()). */
uint32_t bus_body_count(void);
pb_size_t bus_body_tag_at(uint32_t i);
/* Callback (array) fields of a body: role and field name, for i < n. Returns n. */
uint32_t bus_body_arrays(pb_size_t tag, bus_role_t *roles, const char **fields, uint32_t max);

/* ---- envelopes ---- */

/* Zeroes *env and sets version, sender and body kind (the body struct is zeroed;
 * fill it after). The client assigns corr_id when it sends. */
void bus_env_init(kvtier_Envelope *env, pb_size_t body_tag, const char *sender);
/* Zeroes *rep and makes it the reply to `req`: same corr_id, version, status OK,
 * the given body kind (0 for none: only with a non-OK status). */
void bus_env_init_reply(kvtier_Envelope *rep, const kvtier_Envelope *req, pb_size_t body_tag,
                        const char *sender);

/* What can be read from frame 0 without decoding its body (used to match a reply
 * to its request before decoding, and to echo corr_id on undecodable input). */
typedef struct {
    uint64_t corr_id;
    uint32_t version;
    pb_size_t body_tag;   /* last body field seen, known or not; 0 if none */
    uint32_t bodies;      /* body fields seen (field numbers >= 16) */
    uint32_t unknown_tag; /* first field number >= 16 that is not a body kind; 0 if none */
    bool has_corr_id;
} bus_env_header_t;

/* Scans the top level of frame 0. Fills what it saw even on failure (so corr_id
 * survives a body that is cut short). 0, or -INVALID_ARGUMENT if it does not parse. */
int bus_env_peek(const void *buf, size_t len, bus_env_header_t *hdr);

/* Tests only: off, bus_env_decode takes every body's keys through nanopb's field
 * callbacks instead of the hand scan of bus_env_keys.h (on by default), so the
 * two can be compared on the same input. Not thread-safe. */
void bus_env_set_fast_keys(bool on);
/* Frames of this process whose keys came through the hand scan (tests). */
uint64_t bus_env_fast_keys_taken(void);

/* Encoded size of frame 0 for env with the arrays its body uses. */
int bus_env_encoded_size(kvtier_Envelope *env, bus_arrays_t *arr, size_t *size, kvtier_Status *st);
/* Encodes frame 0 into buf (at most cap bytes); *len gets the size. */
int bus_env_encode_buf(kvtier_Envelope *env, bus_arrays_t *arr, uint8_t *buf, size_t cap,
                       size_t *len, kvtier_Status *st);
/* Encodes frame 0 into a new frame of exactly the encoded size. */
int bus_env_encode(kvtier_Envelope *env, bus_arrays_t *arr, zframe_t **frame_out,
                   kvtier_Status *st);

/* Decodes and validates frame 0: size, parse, protocol version, exactly one known
 * body of direction `dir`, field bounds, array capacities (arrays go into `arr`,
 * cleared first; NULL means no capacity). Payload frames are not checked here. */
int bus_env_decode(const void *buf, size_t len, bus_dir_t dir, kvtier_Envelope *env,
                   bus_arrays_t *arr, kvtier_Status *st);

/* ---- whole messages: frame 0 + payload frames ---- */

/* Called once when the bus no longer needs a payload buffer. May run on a
 * ZeroMQ I/O thread (zmq_free_fn semantics): keep it short and thread-safe. */
typedef void(bus_free_fn)(void *data, void *hint);

/* One payload frame to send. free_fn NULL: the bytes are copied and the caller
 * keeps its buffer. free_fn set: zero-copy, the buffer must stay unchanged until
 * free_fn(data, hint) runs. Ownership passes on every call that takes payloads,
 * success or failure: free_fn is called exactly once. */
typedef struct {
    const void *data;
    size_t size;
    bus_free_fn *free_fn;
    void *hint;
} bus_payload_t;

/* Checks that `nframes` payload frames of the given sizes are what env's body
 * declares (WriteSlotsRequest and ReadSlotsReply carry one frame per entry of
 * `sizes`; every other body carries none). `size_at(ctx, i)` gives frame i's size. */
int bus_env_check_payload(const kvtier_Envelope *env, const bus_arrays_t *arr, uint32_t nframes,
                          size_t (*size_at)(void *ctx, uint32_t i), void *ctx, kvtier_Status *st);

/* Builds [frame 0][payload...] in a new zmsg (payload bytes are copied, then
 * handed back through their free_fn). For tests and tools; bus_msg_send avoids
 * the copy. */
int bus_msg_encode(kvtier_Envelope *env, bus_arrays_t *arr, const bus_payload_t *payload,
                   uint32_t npayload, zmsg_t **msg_out, kvtier_Status *st);

/* Decodes a received [frame 0][payload...] (routing id already removed) and
 * checks the payload against the body. msg is left intact: payload frame i is the
 * (i+1)-th frame (bus_msg_payload). */
int bus_msg_decode(zmsg_t *msg, bus_dir_t dir, kvtier_Envelope *env, bus_arrays_t *arr,
                   kvtier_Status *st);

/* Payload frame i (0-based, i.e. message frame i + 1) of a decoded msg; NULL if none. */
zframe_t *bus_msg_payload(zmsg_t *msg, uint32_t i);

/* Encodes and sends [routing id][frame 0][payload...] on sock without blocking
 * (ZMQ_DONTWAIT; a full queue is UNAVAILABLE). routing_id: ROUTER sockets only,
 * else NULL. Payloads with a free_fn go out zero-copy (zmq_msg_init_data on
 * zsock_resolve(sock): czmq 4.2.1 has no zframe_frommem outside its draft API).
 * Checks the payload against the body before sending anything. */
int bus_msg_send(zsock_t *sock, const zframe_t *routing_id, kvtier_Envelope *env, bus_arrays_t *arr,
                 const bus_payload_t *payload, uint32_t npayload, kvtier_Status *st);

/* Calls free_fn of every payload (used when a payload-taking call refuses early). */
void bus_payload_release(const bus_payload_t *payload, uint32_t npayload);

#endif
