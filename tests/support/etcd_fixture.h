/* etcd_fixture.h — runs a real single-member etcd (/usr/bin/etcd) on loopback for
 * tests: free ephemeral client and peer ports, its own mkdtemp data directory,
 * fast elections, output in <dir>/etcd.log. Usable from unit tests (one etcd per
 * group) and from multi-process integration/fault tests (stop, kill, pause,
 * restart on the same URL and data).
 *
 * Owns the etcd child process and its directory; never leaves either behind on a
 * normal teardown (the child also gets SIGKILL if the thread that started it
 * dies). Depends on libc only. Not thread-safe: drive one fixture from one thread. */
#ifndef KVT_TEST_ETCD_FIXTURE_H
#define KVT_TEST_ETCD_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct {
    const char *etcd_path;  /* NULL: $KVT_ETCD_BIN, else /usr/bin/etcd */
    int start_timeout_ms;   /* wait for health at start/restart; 0: 15000 */
    bool keep_dir;          /* keep the data dir at destroy (also $KVT_KEEP_ETCD_DIR=1) */
    const char *parent_dir; /* where the mkdtemp dir goes; NULL: $KVT_ETCD_TMPDIR, else
                               $TMPDIR, else /tmp (/dev/shm avoids fsync stalls on a busy
                               disk, at about 125 MB of memory per etcd) */
} etcd_fixture_opts_t;

typedef struct etcd_fixture etcd_fixture_t;

/* Starts etcd and waits until /health says true. NULL on failure, with the reason
 * (and the tail of etcd's log) on stderr. opts may be NULL. */
etcd_fixture_t *etcd_fixture_start(const etcd_fixture_opts_t *opts);

/* Stops etcd if running (etcd_fixture_stop), removes the directory unless kept,
 * frees and nulls *pf. NULL-safe, idempotent. */
void etcd_fixture_destroy(etcd_fixture_t **pf);

/* "http://127.0.0.1:<port>", stable across restarts. */
const char *etcd_fixture_url(const etcd_fixture_t *f);
/* The fixture's directory (data in <dir>/data, log in <dir>/etcd.log). */
const char *etcd_fixture_dir(const etcd_fixture_t *f);
const char *etcd_fixture_log_path(const etcd_fixture_t *f);
/* Child pid, 0 when not running. */
pid_t etcd_fixture_pid(const etcd_fixture_t *f);

/* Graceful stop: SIGTERM, wait up to 5 s, then SIGKILL. Data kept. 0 when it was
 * running and is now reaped, -ESRCH when it was not running. */
int etcd_fixture_stop(etcd_fixture_t *f);
/* Crash: SIGKILL and reap. Data kept. -ESRCH when not running. */
int etcd_fixture_kill(etcd_fixture_t *f);
/* SIGSTOP / SIGCONT: etcd keeps its sockets but answers nothing (a hung server).
 * Both return once the child is really stopped / running again. */
int etcd_fixture_pause(etcd_fixture_t *f);
int etcd_fixture_resume(etcd_fixture_t *f);
/* Starts a stopped/killed etcd again on the same ports and data and waits for
 * health. -EALREADY when running. */
int etcd_fixture_restart(etcd_fixture_t *f);
/* Polls /health until true: 0, -ETIMEDOUT, or -ECHILD if etcd exited. */
int etcd_fixture_wait_healthy(etcd_fixture_t *f, int timeout_ms);

/* A loopback TCP port that was free a moment ago (bind to port 0 and read it
 * back): for "nothing listens here" endpoints. 0 on failure. */
uint16_t etcd_fixture_free_port(void);

#endif
