/* bus_host.h — identity of this machine, used to decide whether a client shares a
 * host with a tier actor (and so may map its shared memory). */
#ifndef KVT_BUS_HOST_H
#define KVT_BUS_HOST_H

#include <stdbool.h>
#include <stddef.h>

#define BUS_HOST_ID_MAX 64
/* A host name: 1..46 letters, digits, '_', '-', '.' (a leading letter or digit), so
 * that "<name>/<16 hex digits>" fits a TierInfo.host (63 bytes). NUL included. */
#define BUS_HOST_NAME_MAX 47

/* The kernel's boot id (/proc/sys/kernel/random/boot_id, a UUID): unique per machine
 * and per boot. Falls back to the host name when the file is unreadable. Returns 0,
 * or -errno with buf set to "". */
int bus_host_id(char *buf, size_t len);

/* Is NAME a valid host name (the rule of BUS_HOST_NAME_MAX)? */
bool bus_host_name_ok(const char *name);

/* This machine's host name as a default for the configured one: gethostname cut at
 * the first '.', then at BUS_HOST_NAME_MAX - 1 bytes. 0, or -errno with buf "". */
int bus_host_default_name(char *buf, size_t len);

/* The host identity a tier actor registers (TierInfo.host) and a client compares:
 * "<name>/<boot>" where NAME is the configured host name (NULL or "": the default
 * name) and BOOT 16 hex digits of a hash of the boot id (bus_host_id). Network
 * namespaces share the boot id, so the name tells them apart; the boot id tells a
 * rebooted or another machine of the same name apart. 0, or -EINVAL (bad name, buf
 * too small: buf ""), or -errno. */
int bus_host_identity(const char *name, char *buf, size_t len);

#endif
