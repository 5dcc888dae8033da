/* kvtier_main.c — the `kvtier` executable: the service processes
 * (`kvtier coordinator`, `kvtier tier`, in coordinator/coord_main.h) and the
 * client commands (tools/kvtier/cli.h: status, lookup, put, get, replay, ...). */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "coord_main.h"

#if __has_include("cli.h")
#include "cli.h"
#define KVT_HAVE_CLI 1
#endif

/* Block-sized buffers (ZeroMQ message bodies of 64 KiB .. 2 MiB, read buffers)
 * come and go at a high rate: with glibc's defaults each one above 128 KiB is a
 * fresh mmap with its page faults and munmap, and freed heap is trimmed back to
 * the kernel. Keeping them in the heap made block copies between tier actors
 * 4-10x cheaper in CPU (kvt-bench migrate --default-malloc, docs/PERFORMANCE.md).
 * The heap keeps at most what the process once had in use. */
static void s_tune_malloc(void)
{
    (void)mallopt(M_MMAP_THRESHOLD, 64 * 1024 * 1024);
    (void)mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
}

int main(int argc, char **argv)
{
    s_tune_malloc();
    if (argc >= 2 && strcmp(argv[1], "coordinator") == 0)
        return coord_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "tier") == 0)
        return coord_tier_main(argc - 1, argv + 1);
#ifdef KVT_HAVE_CLI
    return cli_main(argc, argv);
#else
    fprintf(argc >= 2 && strcmp(argv[1], "--help") == 0 ? stdout : stderr,
            "usage: kvtier coordinator -c FILE [--etcd URLS] [--name NAME] [--endpoint EP]\n"
            "       kvtier tier -c FILE --name TIER [--etcd URLS]\n");
    return argc >= 2 && strcmp(argv[1], "--help") == 0 ? 0 : 2;
#endif
}
