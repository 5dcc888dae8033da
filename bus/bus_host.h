/* bus_host.h — identity of this machine, used to decide whether a client shares a
 * host with a tier actor (and so may map its shared memory). */
#ifndef KVT_BUS_HOST_H
#define KVT_BUS_HOST_H

#include <stddef.h>

#define BUS_HOST_ID_MAX 64

/* The kernel's boot id (/proc/sys/kernel/random/boot_id, a UUID): unique per machine
 * and per boot. Falls back to the host name when the file is unreadable. Returns 0,
 * or -errno with buf set to "". */
int bus_host_id(char *buf, size_t len);

#endif
