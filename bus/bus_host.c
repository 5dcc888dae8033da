/* bus_host.c — this machine's host id (boot id, host name as fallback) and the host
 * identity a tier registers: configured host name + boot id hash. */
#include "bus_host.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int bus_host_id(char *buf, size_t len)
{
    if (!buf || len == 0)
        return -EINVAL;
    buf[0] = '\0';
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        char line[BUS_HOST_ID_MAX];
        char *ok = fgets(line, sizeof line, f);
        fclose(f);
        if (ok) {
            line[strcspn(line, " \r\n")] = '\0';
            if (line[0] && strlen(line) < len) {
                memcpy(buf, line, strlen(line) + 1);
                return 0;
            }
        }
    }
    if (gethostname(buf, len) != 0) {
        int err = errno;
        buf[0] = '\0';
        return -err;
    }
    buf[len - 1] = '\0';
    return 0;
}

bool bus_host_name_ok(const char *name)
{
    if (!name || !isalnum((unsigned char)name[0]) || strlen(name) >= BUS_HOST_NAME_MAX)
        return false;
    for (const char *p = name; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' && *p != '.')
            return false;
    return true;
}

int bus_host_default_name(char *buf, size_t len)
{
    char host[256];
    if (!buf || len == 0)
        return -EINVAL;
    buf[0] = '\0';
    if (gethostname(host, sizeof host) != 0)
        return -errno;
    host[sizeof host - 1] = '\0';
    host[strcspn(host, ".")] = '\0';
    if (host[0] && strlen(host) >= BUS_HOST_NAME_MAX)
        host[BUS_HOST_NAME_MAX - 1] = '\0';
    if (!bus_host_name_ok(host))
        snprintf(host, sizeof host, "localhost");
    snprintf(buf, len, "%s", host);
    return strlen(host) < len ? 0 : -EINVAL;
}

int bus_host_identity(const char *name, char *buf, size_t len)
{
    char dflt[BUS_HOST_NAME_MAX], boot[BUS_HOST_ID_MAX];
    if (!buf || len == 0)
        return -EINVAL;
    buf[0] = '\0';
    if (!name || !name[0]) {
        int rc = bus_host_default_name(dflt, sizeof dflt);
        if (rc < 0)
            return rc;
        name = dflt;
    }
    if (!bus_host_name_ok(name))
        return -EINVAL;
    int rc = bus_host_id(boot, sizeof boot);
    if (rc < 0)
        return rc;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (const char *p = boot; *p; p++)
        h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    int n = snprintf(buf, len, "%s/%016" PRIx64, name, h);
    if (n < 0 || (size_t)n >= len) {
        buf[0] = '\0';
        return -EINVAL;
    }
    return 0;
}
