/* kvtier_main.c — the `kvtier` executable: the service processes
 * (`kvtier coordinator`, `kvtier tier`, in coordinator/coord_main.h) and the
 * client commands (tools/kvtier/cli.h: status, lookup, put, get, replay, ...). */
#include <stdio.h>
#include <string.h>

#include "coord_main.h"

#if __has_include("cli.h")
#include "cli.h"
#define KVT_HAVE_CLI 1
#endif

int main(int argc, char **argv)
{
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
