/* bus_owner.c — who holds a TCP port (/proc/net/tcp{,6} -> socket inode ->
 * /proc/PID/fd), and a bind probe of an endpoint. */
#include "bus_owner.h"

#include <dirent.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bus_endpoint.h"

#define TCP_LISTEN 0x0A /* st column of /proc/net/tcp */

/* The inode of a socket on PORT in FILE's table: a listener first, else any
 * state when ANY. 0 when none. */
static unsigned long s_inode_in(const char *file, uint16_t port, bool any)
{
    FILE *f = fopen(file, "r");
    if (!f)
        return 0;
    char line[512];
    unsigned long found = 0;
    /* "  0: 0100007F:1E14 00000000:0000 0A 00000000:00000000 00:00000000 00000000  0  0 12345 ..."
     */
    while (!found && fgets(line, sizeof line, f)) {
        char local[80];
        unsigned st = 0;
        unsigned long inode = 0;
        if (sscanf(line, " %*d: %79s %*s %x %*s %*s %*s %*s %*s %lu", local, &st, &inode) != 3)
            continue;
        const char *colon = strrchr(local, ':');
        unsigned p = 0;
        if (!colon || sscanf(colon + 1, "%x", &p) != 1 || p != port)
            continue;
        if ((any || st == TCP_LISTEN) && inode != 0)
            found = inode;
    }
    fclose(f);
    return found;
}

/* Argument vector of PID joined by spaces into buf ("?" when unreadable). */
static void s_cmdline(long pid, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, len - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    while (n > 0 && buf[n - 1] == '\0')
        n--;
    for (size_t i = 0; i < n; i++) /* NUL-separated arguments; no control bytes */
        if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
            buf[i] = ' ';
    if (n == 0)
        snprintf(buf, len, "?");
}

/* The first process with an fd on socket INODE: its pid, or 0. */
static long s_pid_of_inode(unsigned long inode)
{
    char want[48];
    snprintf(want, sizeof want, "socket:[%lu]", inode);
    DIR *proc = opendir("/proc");
    long found = 0;
    struct dirent *d;
    while (proc && !found && (d = readdir(proc))) {
        char *end;
        long pid = strtol(d->d_name, &end, 10);
        if (*end || pid <= 0)
            continue;
        char dir[64];
        snprintf(dir, sizeof dir, "/proc/%ld/fd", pid);
        DIR *fds = opendir(dir);
        struct dirent *e;
        while (fds && !found && (e = readdir(fds))) {
            char link[320], target[64];
            snprintf(link, sizeof link, "%s/%s", dir, e->d_name);
            ssize_t n = readlink(link, target, sizeof target - 1);
            if (n > 0) {
                target[n] = '\0';
                if (strcmp(target, want) == 0)
                    found = pid;
            }
        }
        if (fds)
            closedir(fds);
    }
    if (proc)
        closedir(proc);
    return found;
}

int bus_owner_tcp_port(uint16_t port, char *buf, size_t len)
{
    if (!buf || len == 0)
        return -EINVAL;
    buf[0] = '\0';
    unsigned long inode = s_inode_in("/proc/net/tcp", port, false);
    if (!inode)
        inode = s_inode_in("/proc/net/tcp6", port, false);
    if (!inode)
        inode = s_inode_in("/proc/net/tcp", port, true);
    if (!inode)
        inode = s_inode_in("/proc/net/tcp6", port, true);
    if (!inode)
        return -ENOENT;
    long pid = s_pid_of_inode(inode);
    if (pid == 0) {
        snprintf(buf, len, "a process this user cannot see (socket inode %lu)", inode);
        return 0;
    }
    char cmd[BUS_OWNER_MAX - 32];
    s_cmdline(pid, cmd, sizeof cmd);
    snprintf(buf, len, "pid %ld (%s)", pid, cmd);
    return 0;
}

int bus_owner_check_bind(const char *endpoint, char *who, size_t wholen)
{
    bus_endpoint_t ep;
    if (who && wholen)
        who[0] = '\0';
    if (bus_endpoint_parse(endpoint, &ep, NULL, 0) < 0)
        return -EINVAL;
    if (ep.transport != BUS_ENDPOINT_TCP || ep.ephemeral_port || ep.port == 0)
        return 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char port[8];
    snprintf(port, sizeof port, "%u", (unsigned)ep.port);
    if (getaddrinfo(ep.wildcard_host ? NULL : ep.address, port, &hints, &res) != 0 || !res)
        return 0; /* a name that does not resolve: the bind will say so */
    int rc = 0;
    for (struct addrinfo *a = res; a && rc == 0; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0)
            continue;
        int one = 1; /* as ZeroMQ's listeners: a port in TIME_WAIT is free */
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) < 0 && errno == EADDRINUSE)
            rc = -EADDRINUSE;
        close(fd);
    }
    freeaddrinfo(res);
    if (rc == -EADDRINUSE && who && wholen && bus_owner_tcp_port(ep.port, who, wholen) < 0)
        snprintf(who, wholen, "unknown");
    return rc;
}
