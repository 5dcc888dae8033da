/* bus_host.c — this machine's host id (boot id, host name as fallback). */
#include "bus_host.h"

#include <errno.h>
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
