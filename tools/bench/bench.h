/* bench.h — the parts of kvt-bench. Each takes argv[0] = its part name and its own
 * options after it, measures a baseline in the same run and prints ratios. */
#ifndef KVT_BENCH_H
#define KVT_BENCH_H

#include <stdbool.h>
#include <stdint.h>

int bench_slots(int argc, char **argv);
int bench_nvme(int argc, char **argv);
int bench_bus(int argc, char **argv);
int bench_data(int argc, char **argv);
int bench_meta(int argc, char **argv);
int bench_migrate(int argc, char **argv);
int bench_ops(int argc, char **argv);
int bench_events(int argc, char **argv);
int bench_curve(int argc, char **argv);
int bench_token(int argc, char **argv);
int bench_request(int argc, char **argv);
int bench_rebuild(int argc, char **argv);
int bench_index(int argc, char **argv);
int bench_gpu(int argc, char **argv);

/* GB/s of one sequential O_DIRECT pass (io_uring at depth qd, no checksum, no
 * headers) over DIR/kvt-bench-raw.dat of `total` bytes in `block` I/Os; fresh
 * recreates the file first (unwritten extents). The caller removes the file.
 * -1 after printing why on failure. bench_nvme.c */
double bench_nvme_raw_pass(const char *dir, uint64_t total, uint64_t block, uint32_t qd, bool write,
                           bool dsync, bool fresh);

#endif
