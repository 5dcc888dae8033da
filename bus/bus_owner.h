/* bus_owner.h — who holds a TCP port on this host, and is an endpoint free to
 * bind: the answer a careless start gets instead of "Address already in use"
 * (issue 12 §8: two deployments on one host must refuse each other clearly).
 *
 * Owns: reading /proc/net/tcp{,6} and /proc/PID/fd to name the process that
 * listens on a port. Never changes a socket it does not create; the probe of
 * bus_owner_check_bind binds a throwaway socket and closes it at once. Linux only;
 * elsewhere (or without /proc) the owner is just "unknown". */
#ifndef KVT_BUS_OWNER_H
#define KVT_BUS_OWNER_H

#include <stddef.h>
#include <stdint.h>

/* Longest owner description written, including the NUL. */
#define BUS_OWNER_MAX 224

/* Names the process listening on TCP PORT (any address, IPv4 or IPv6):
 * "pid N (ARGV joined by spaces, cut to fit)", or "a process this user cannot
 * see (socket inode N)". 0 when a listener was found, -ENOENT when none is, with
 * buf "" then. */
int bus_owner_tcp_port(uint16_t port, char *buf, size_t len);

/* Can ENDPOINT be bound here now? 0: yes (or it is not a fixed TCP address of this
 * host: inproc, ipc, an ephemeral port, an address no interface here has, which a
 * bind would refuse for its own reason); -EADDRINUSE: no, with WHO set to the
 * owner (bus_owner_tcp_port, or "unknown" when it cannot be told); -EINVAL: ENDPOINT
 * does not parse. */
int bus_owner_check_bind(const char *endpoint, char *who, size_t wholen);

#endif
