/* coord_proc.h — what the two process mains share (internal to coordinator/):
 * option parsing helpers, loading the deployment with the --etcd override, and
 * keeping SIGINT/SIGTERM on the main thread. Never used by actors. */
#ifndef KVT_COORD_PROC_H
#define KVT_COORD_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coord_config.h"

/* Exit codes of the process mains. */
#define COORD_EXIT_OK 0
#define COORD_EXIT_FAIL 1
#define COORD_EXIT_USAGE 2

/* Option I of ARGV: "--opt VALUE" or "--opt=VALUE" (also the short form SHORT_NAME,
 * may be NULL). Returns 1 and sets *value (advancing *i past a separate value),
 * 0 when argv[*i] is not this option, -1 when the value is missing. */
int coord_proc_opt(int argc, char **argv, int *i, const char *long_name, const char *short_name,
                   const char **value);

/* Loads FILE, applies the --etcd override (may be NULL), makes a relative
 * security.secret_file relative to FILE's directory, and requires at least one
 * etcd endpoint. 0, or -1 after printing "<prog>: <why>" to stderr. */
int coord_proc_config(const char *prog, const char *file, const char *etcd_override,
                      coord_config_t *cfg);

/* The cluster secret (docs/SECURITY.md) from `override` (--secret FILE) or else
 * security.secret_file into out (BUS_SECRET_BYTES): the tier plane opens only
 * with tokens sealed under it, so a process without one does not start. 0, or -1
 * after printing "<prog>: <why>" (naming the file and what to do) to stderr. */
int coord_proc_secret(const char *prog, const coord_config_t *cfg, const char *override,
                      uint8_t *out);

/* Blocks (true) or unblocks (false) SIGINT and SIGTERM in the calling thread.
 * Threads started while blocked inherit it, so the signal reaches the main
 * thread's poll and wakes it. */
void coord_proc_block_signals(bool block);

/* True once SIGINT/SIGTERM arrived (czmq's handler, zsys_interrupted). */
bool coord_proc_interrupted(void);

/* Monotonic milliseconds. */
int64_t coord_proc_now_ms(void);

#endif
