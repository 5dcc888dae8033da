/* fuzz_util.h — what several harnesses share: the input as a file, for decoders
 * whose service entry takes a path (trace loaders). The file is a memfd named by
 * /proc/self/fd, rewritten per input: nothing is left on disk. */
#ifndef KVT_FUZZ_UTIL_H
#define KVT_FUZZ_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Replaces the memfd's contents with data; returns its path (static storage). */
static inline const char *fuzz_as_file(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("kvt-fuzz", 0);
        if (fd < 0)
            abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
    return path;
}

#endif
