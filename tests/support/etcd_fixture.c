/* etcd_fixture.c — starts, watches and stops a real etcd child for tests.
 * Owns the child and its mkdtemp directory; waits by polling /health (never a
 * fixed sleep); libc only (raw HTTP/1.0 over a socket for the health probe). */
#include "etcd_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S_ARGS_MAX 24
#define S_STOP_GRACE_MS 5000
#define S_START_TRIES 3 /* a free port can be taken between probe and etcd's bind */

struct etcd_fixture {
    char etcd_path[256];
    char dir[256];
    char data_dir[300];
    char log_path[300];
    char url[64];
    char peer_url[64];
    char name_arg[64];
    uint16_t client_port;
    uint16_t peer_port;
    int start_timeout_ms;
    bool keep_dir;
    pid_t pid;
    bool paused; /* SIGSTOPped by etcd_fixture_pause */
    char args[S_ARGS_MAX][400];
    char *argv[S_ARGS_MAX + 1];
};

static int64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void s_nap_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

/* Binds a loopback socket to port 0; returns the fd (caller closes) and the port. */
static int s_bound_socket(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

uint16_t etcd_fixture_free_port(void)
{
    uint16_t port = 0;
    int fd = s_bound_socket(&port);
    if (fd < 0)
        return 0;
    close(fd);
    return port;
}

/* Two distinct free ports (both sockets held until both are known). */
static int s_pick_ports(etcd_fixture_t *f)
{
    int a = s_bound_socket(&f->client_port);
    int b = a >= 0 ? s_bound_socket(&f->peer_port) : -1;
    if (a >= 0)
        close(a);
    if (b >= 0)
        close(b);
    return b >= 0 ? 0 : -1;
}

static void s_arg(etcd_fixture_t *f, int *n, const char *fmt, const char *v)
{
    snprintf(f->args[*n], sizeof f->args[*n], fmt, v);
    f->argv[*n] = f->args[*n];
    (*n)++;
}

static void s_build_argv(etcd_fixture_t *f)
{
    int n = 0;
    snprintf(f->url, sizeof f->url, "http://127.0.0.1:%u", (unsigned)f->client_port);
    snprintf(f->peer_url, sizeof f->peer_url, "http://127.0.0.1:%u", (unsigned)f->peer_port);
    s_arg(f, &n, "%s", f->etcd_path);
    s_arg(f, &n, "--name=%s", "kvt-fixture");
    s_arg(f, &n, "--data-dir=%s", f->data_dir);
    s_arg(f, &n, "--listen-client-urls=%s", f->url);
    s_arg(f, &n, "--advertise-client-urls=%s", f->url);
    s_arg(f, &n, "--listen-peer-urls=%s", f->peer_url);
    s_arg(f, &n, "--initial-advertise-peer-urls=%s", f->peer_url);
    char cluster[128];
    snprintf(cluster, sizeof cluster, "kvt-fixture=%s", f->peer_url);
    s_arg(f, &n, "--initial-cluster=%s", cluster);
    s_arg(f, &n, "--heartbeat-interval=%s", "10");
    s_arg(f, &n, "--election-timeout=%s", "100");
    s_arg(f, &n, "--logger=%s", "zap");
    s_arg(f, &n, "--log-outputs=%s", "stderr");
    f->argv[n] = NULL;
}

/* fork + exec with output appended to the log; only async-signal-safe calls in
 * the child (the test process may have threads). */
static int s_spawn(etcd_fixture_t *f)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int log = open(f->log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int null = open("/dev/null", O_RDONLY);
        if (log < 0 || null < 0)
            _exit(127);
        dup2(null, 0);
        dup2(log, 1);
        dup2(log, 2);
        /* Sockets of the test must not live on in etcd. */
        if (close_range(3, ~0U, 0) < 0)
            for (int fd = 3; fd < 1024; fd++)
                close(fd);
        execv(f->etcd_path, f->argv);
        _exit(127);
    }
    f->pid = pid;
    return 0;
}

/* GET /health over HTTP/1.0; true when etcd says {"health":"true"}. */
static bool s_healthy(const etcd_fixture_t *f)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    struct timeval tv = {.tv_sec = 0, .tv_usec = 500000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(f->client_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char buf[2048];
    size_t len = 0;
    bool ok = false;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
        goto out;
    static const char req[] = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (send(fd, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof req - 1))
        goto out;
    for (;;) {
        ssize_t r = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (r <= 0)
            break;
        len += (size_t)r;
        if (len == sizeof buf - 1)
            break;
    }
    buf[len] = '\0';
    ok = strstr(buf, " 200 ") && strstr(buf, "\"health\":\"true\"");
out:
    close(fd);
    return ok;
}

/* Reaps the child if it exited; true when it is gone. */
static bool s_reaped(etcd_fixture_t *f, int *status)
{
    if (f->pid <= 0)
        return true;
    pid_t r = waitpid(f->pid, status, WNOHANG);
    if (r == f->pid || (r < 0 && errno == ECHILD)) {
        f->pid = 0;
        return true;
    }
    return false;
}

int etcd_fixture_wait_healthy(etcd_fixture_t *f, int timeout_ms)
{
    int64_t deadline = s_now_ms() + timeout_ms;
    for (;;) {
        int status = 0;
        if (s_reaped(f, &status))
            return -ECHILD;
        if (s_healthy(f))
            return 0;
        if (s_now_ms() >= deadline)
            return -ETIMEDOUT;
        s_nap_ms(5);
    }
}

/* Prints the last lines of etcd's log to stderr, to explain a failed start. */
static void s_dump_log_tail(const etcd_fixture_t *f)
{
    FILE *fp = fopen(f->log_path, "r");
    if (!fp)
        return;
    char buf[4096];
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fseek(fp, size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0, SEEK_SET);
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    fprintf(stderr, "etcd_fixture: last lines of %s:\n%s\n", f->log_path, buf);
}

static int s_start_once(etcd_fixture_t *f)
{
    int rc = s_spawn(f);
    if (rc < 0)
        return rc;
    rc = etcd_fixture_wait_healthy(f, f->start_timeout_ms);
    if (rc == -ETIMEDOUT)
        etcd_fixture_stop(f);
    return rc;
}

static int s_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void s_init_paths(etcd_fixture_t *f, const etcd_fixture_opts_t *opts)
{
    const char *path = opts && opts->etcd_path ? opts->etcd_path : getenv("KVT_ETCD_BIN");
    snprintf(f->etcd_path, sizeof f->etcd_path, "%s", path && path[0] ? path : "/usr/bin/etcd");
    f->start_timeout_ms = opts && opts->start_timeout_ms > 0 ? opts->start_timeout_ms : 15000;
    const char *keep = getenv("KVT_KEEP_ETCD_DIR");
    f->keep_dir = (opts && opts->keep_dir) || (keep && strcmp(keep, "1") == 0);
    snprintf(f->data_dir, sizeof f->data_dir, "%s/data", f->dir);
    snprintf(f->log_path, sizeof f->log_path, "%s/etcd.log", f->dir);
}

static const char *s_parent_dir(const etcd_fixture_opts_t *opts)
{
    const char *d = opts && opts->parent_dir ? opts->parent_dir : getenv("KVT_ETCD_TMPDIR");
    if (d && d[0])
        return d;
    d = getenv("TMPDIR");
    return d && d[0] ? d : "/tmp";
}

etcd_fixture_t *etcd_fixture_start(const etcd_fixture_opts_t *opts)
{
    etcd_fixture_t *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    snprintf(f->dir, sizeof f->dir, "%s/kvt-etcd-XXXXXX", s_parent_dir(opts));
    if (!mkdtemp(f->dir)) {
        fprintf(stderr, "etcd_fixture: mkdtemp %s: %s\n", f->dir, strerror(errno));
        free(f);
        return NULL;
    }
    s_init_paths(f, opts);
    if (access(f->etcd_path, X_OK) != 0) {
        fprintf(stderr, "etcd_fixture: %s is not executable (install etcd-server)\n", f->etcd_path);
        goto out_fail;
    }
    int rc = -ECHILD;
    for (int i = 0; i < S_START_TRIES && rc == -ECHILD; i++) {
        if (s_pick_ports(f) < 0) {
            fprintf(stderr, "etcd_fixture: no free loopback port: %s\n", strerror(errno));
            goto out_fail;
        }
        s_build_argv(f);
        rc = s_start_once(f);
    }
    if (rc < 0) {
        fprintf(stderr, "etcd_fixture: etcd at %s did not become healthy: %s\n", f->url,
                rc == -ECHILD ? "it exited" : strerror(-rc));
        s_dump_log_tail(f);
        goto out_fail;
    }
    return f;
out_fail:
    etcd_fixture_destroy(&f);
    return NULL;
}

void etcd_fixture_destroy(etcd_fixture_t **pf)
{
    if (!pf || !*pf)
        return;
    etcd_fixture_t *f = *pf;
    etcd_fixture_stop(f);
    if (f->keep_dir)
        fprintf(stderr, "etcd_fixture: kept %s\n", f->dir);
    else
        nftw(f->dir, s_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    *pf = NULL;
}

const char *etcd_fixture_url(const etcd_fixture_t *f)
{
    return f->url;
}

const char *etcd_fixture_dir(const etcd_fixture_t *f)
{
    return f->dir;
}

const char *etcd_fixture_log_path(const etcd_fixture_t *f)
{
    return f->log_path;
}

pid_t etcd_fixture_pid(const etcd_fixture_t *f)
{
    return f->pid;
}

static int s_signal_and_reap(etcd_fixture_t *f, int sig, int grace_ms)
{
    int status = 0;
    if (s_reaped(f, &status))
        return -ESRCH;
    kill(f->pid, sig);
    kill(f->pid, SIGCONT); /* a paused etcd handles SIGTERM only once it runs */
    f->paused = false;
    int64_t deadline = s_now_ms() + grace_ms;
    while (!s_reaped(f, &status)) {
        if (s_now_ms() >= deadline) {
            kill(f->pid, SIGKILL);
            waitpid(f->pid, &status, 0);
            f->pid = 0;
            break;
        }
        s_nap_ms(2);
    }
    return 0;
}

int etcd_fixture_stop(etcd_fixture_t *f)
{
    return f ? s_signal_and_reap(f, SIGTERM, S_STOP_GRACE_MS) : -EINVAL;
}

int etcd_fixture_kill(etcd_fixture_t *f)
{
    return f ? s_signal_and_reap(f, SIGKILL, S_STOP_GRACE_MS) : -EINVAL;
}

/* Sends sig and waits for the state change it causes: kill() only queues a
 * signal, and a request sent right after SIGSTOP could still be served. */
static int s_signal_state(etcd_fixture_t *f, int sig, int wait_flag)
{
    if (!f || f->pid <= 0)
        return -ESRCH;
    if (kill(f->pid, sig) < 0)
        return -errno;
    int status = 0;
    for (;;) {
        pid_t r = waitpid(f->pid, &status, wait_flag);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            f->pid = 0;
            return -ECHILD;
        }
        if ((wait_flag == WUNTRACED && WIFSTOPPED(status)) ||
            (wait_flag == WCONTINUED && WIFCONTINUED(status)))
            return 0;
    }
}

int etcd_fixture_pause(etcd_fixture_t *f)
{
    if (f && f->paused)
        return 0; /* a second SIGSTOP would cause no state change to wait for */
    int rc = s_signal_state(f, SIGSTOP, WUNTRACED);
    if (rc == 0)
        f->paused = true;
    return rc;
}

int etcd_fixture_resume(etcd_fixture_t *f)
{
    if (f && f->pid > 0 && !f->paused)
        return 0;
    int rc = s_signal_state(f, SIGCONT, WCONTINUED);
    if (f)
        f->paused = false;
    return rc;
}

int etcd_fixture_restart(etcd_fixture_t *f)
{
    int status = 0;
    if (!f)
        return -EINVAL;
    if (!s_reaped(f, &status))
        return -EALREADY;
    int rc = s_start_once(f);
    if (rc < 0) {
        fprintf(stderr, "etcd_fixture: restart at %s failed: %s\n", f->url,
                rc == -ECHILD ? "etcd exited" : strerror(-rc));
        s_dump_log_tail(f);
    }
    return rc;
}
