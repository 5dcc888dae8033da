/* bench.h — the parts of kvt-bench. Each takes argv[0] = its part name and its own
 * options after it, measures a baseline in the same run and prints ratios. */
#ifndef KVT_BENCH_H
#define KVT_BENCH_H

int bench_slots(int argc, char **argv);
int bench_nvme(int argc, char **argv);
int bench_bus(int argc, char **argv);
int bench_data(int argc, char **argv);
int bench_meta(int argc, char **argv);

#endif
