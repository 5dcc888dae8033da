/* bench_main.c — `kvt-bench PART [options]`: dispatches to one benchmark part.
 * Every part measures a baseline in the same run and prints ratios against it;
 * figures go into docs/PERFORMANCE.md with the command that produced them. */
#include <stdio.h>
#include <string.h>

#include "bench.h"

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *what;
} s_parts[] = {
    {"slots", bench_slots, "slot engine ops/s per policy vs open-addressing hash lookup"},
    {"nvme", bench_nvme, "nvme tier put/get GB/s vs raw O_DIRECT"},
    {"bus", bench_bus, "bus request/reply rt/s and p50/p99 vs raw libzmq DEALER/ROUTER"},
    {"data", bench_data, "put+get GB/s: shm path vs memcpy, frame path vs raw ZeroMQ"},
    {"meta", bench_meta, "256-key prefix lookups keys/s and p50/p99 vs Redis EXISTS/MGET"},
    {"ops", bench_ops, "N single operations (lookup, put/get pairs, shm batches) for callgrind"},
    {"migrate", bench_migrate, "migrator demotion/promotion host<->nvme GB/s vs raw O_DIRECT"},
    {"events", bench_events, "publisher batches/s (mirror, vLLM stream) vs a raw ZeroMQ forwarder"},
    {"curve", bench_curve, "bus round trips/s and MB/s on CURVE sockets vs plain ones"},
    {"token", bench_token, "tier-plane token seal/open cost vs a ReadSlots round trip"},
    {"request", bench_request, "an engine request in two meta round trips vs five"},
    {"rebuild", bench_rebuild, "index rebuild from tier inventories vs 128-entry pages"},
    {"gpu", bench_gpu, "gpu tier H2D/D2H/D2D GB/s vs raw cudaMemcpyAsync, pinned"},
    {"index", bench_index, "scheduler RSS per slot and meta calls at 10M slots vs 64k"},
};
#define S_NPARTS (sizeof s_parts / sizeof s_parts[0])

static void s_usage(void)
{
    fprintf(stderr, "usage: kvt-bench PART [options]   (PART --help for its options)\n"
                    "       kvt-bench all               (every part with its defaults)\n");
    for (size_t i = 0; i < S_NPARTS; i++)
        fprintf(stderr, "  %-7s %s\n", s_parts[i].name, s_parts[i].what);
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        s_usage();
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "all") == 0) {
        int rc = 0;
        for (size_t i = 0; i < S_NPARTS; i++) {
            char name[16];
            snprintf(name, sizeof name, "%s", s_parts[i].name);
            char *sub[] = {name, NULL};
            printf("\n=== %s ===\n", s_parts[i].name);
            fflush(stdout);
            if (s_parts[i].fn(1, sub) != 0)
                rc = 1;
        }
        return rc;
    }
    for (size_t i = 0; i < S_NPARTS; i++)
        if (strcmp(argv[1], s_parts[i].name) == 0)
            return s_parts[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "kvt-bench: unknown part \"%s\"\n", argv[1]);
    s_usage();
    return 2;
}
