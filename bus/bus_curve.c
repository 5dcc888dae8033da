/* bus_curve.c — the process's CURVE setting and one zauth actor (see bus_curve.h).
 * The setting is process-wide because ZAP is: libzmq asks one handler per context
 * (inproc://zeromq.zap.01) about every CURVE handshake of the process. */
#include "bus_curve.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bus_endpoint.h"

#define S_PATH_MAX 512
/* A draft option of libzmq 4.3 (zmq.h declares it only with ZMQ_BUILD_DRAFT_API); a
 * libzmq that does not know it refuses the setsockopt, and the bind is refused. */
#ifndef ZMQ_ZAP_ENFORCE_DOMAIN
#define ZMQ_ZAP_ENFORCE_DOMAIN 93
#endif
#define S_SECRET_SUFFIX "_secret"

typedef struct {
    bool on;
    bool serves; /* holds the server pair */
    bus_curve_client_t keys;
    char server_public[BUS_CURVE_KEY_TXT];
    char server_secret[BUS_CURVE_KEY_TXT];
    zactor_t *auth;
} s_state_t;

static s_state_t s_state;

static int s_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int s_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

bool bus_curve_is_z85(const char *text)
{
    static const char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                   ".-:+=^!/*?&<>()[]{}@%$#";
    if (!text || strlen(text) != BUS_CURVE_KEY_TXT - 1)
        return false;
    for (const char *p = text; *p; p++)
        if (!strchr(alphabet, *p))
            return false;
    return true;
}

/* FILE without a trailing "_secret" into BASE (what zcert_load takes). */
static int s_public_name(const char *file, char *base, size_t len, char *err, size_t errlen)
{
    size_t n = strlen(file), sl = strlen(S_SECRET_SUFFIX);
    if (n > sl && !strcmp(file + n - sl, S_SECRET_SUFFIX))
        n -= sl;
    if (n == 0 || n + sl >= len)
        return s_fail(err, errlen, "%s: not a usable cert file name", file);
    memcpy(base, file, n);
    base[n] = '\0';
    return 0;
}

int bus_curve_load_pair(const char *file, char public_key[BUS_CURVE_KEY_TXT],
                        char secret_key[BUS_CURVE_KEY_TXT], char *err, size_t errlen)
{
    char base[S_PATH_MAX], secret[S_PATH_MAX + sizeof S_SECRET_SUFFIX];
    if (!file || !*file)
        return s_fail(err, errlen, "no cert file given");
    if (s_public_name(file, base, sizeof base, err, errlen) < 0)
        return -EINVAL;
    snprintf(secret, sizeof secret, "%s%s", base, S_SECRET_SUFFIX);
    struct stat sb;
    if (stat(secret, &sb) < 0)
        return s_fail(err, errlen, "%s: %s (make a pair with kvtier keygen --out DIR --name NAME)",
                      secret, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return s_fail(err, errlen, "%s: not a regular file", secret);
    if (sb.st_mode & 077)
        return s_fail(err, errlen, "%s: readable by group or others (chmod 600 it)", secret);
    zcert_t *cert = zcert_load(base);
    if (!cert)
        return s_fail(err, errlen, "%s: not a zcert file (no public-key / secret-key)", secret);
    int rc = 0;
    const char *pub = zcert_public_txt(cert), *sec = zcert_secret_txt(cert);
    if (!bus_curve_is_z85(pub) || !bus_curve_is_z85(sec) ||
        !strcmp(sec, "0000000000000000000000000000000000000000"))
        rc = s_fail(err, errlen, "%s: no secret key in it (a public cert cannot be used here)",
                    secret);
    else {
        snprintf(public_key, BUS_CURVE_KEY_TXT, "%s", pub);
        snprintf(secret_key, BUS_CURVE_KEY_TXT, "%s", sec);
    }
    zcert_destroy(&cert);
    return rc;
}

int bus_curve_load_public(const char *text, char public_key[BUS_CURVE_KEY_TXT], char *err,
                          size_t errlen)
{
    if (!text || !*text)
        return s_fail(err, errlen, "no public key given");
    if (bus_curve_is_z85(text)) {
        snprintf(public_key, BUS_CURVE_KEY_TXT, "%s", text);
        return 0;
    }
    char base[S_PATH_MAX];
    if (s_public_name(text, base, sizeof base, err, errlen) < 0)
        return -EINVAL;
    /* the public file only: zcert_load would read the secret too where it exists */
    zconfig_t *root = zconfig_load(base);
    if (!root)
        return s_fail(err, errlen, "%s: cannot read (neither a Z85 key nor a cert file)", base);
    const char *pub = zconfig_get(root, "curve/public-key", NULL);
    int rc = 0;
    if (!bus_curve_is_z85(pub))
        rc = s_fail(err, errlen, "%s: no curve/public-key of 40 Z85 characters in it", base);
    else
        snprintf(public_key, BUS_CURVE_KEY_TXT, "%s", pub);
    zconfig_destroy(&root);
    return rc;
}

int bus_curve_keygen(const char *dir, const char *name, char public_key[BUS_CURVE_KEY_TXT],
                     char *err, size_t errlen)
{
    if (!dir || !*dir || !name || !*name || strchr(name, '/') || name[0] == '.')
        return s_fail(err, errlen,
                      "a key needs a directory and a NAME without '/' or a leading '.'");
    char pub[S_PATH_MAX], sec[S_PATH_MAX + sizeof S_SECRET_SUFFIX];
    if ((size_t)snprintf(pub, sizeof pub, "%s/%s.key", dir, name) >= sizeof pub)
        return s_fail(err, errlen, "%s/%s: path too long", dir, name);
    snprintf(sec, sizeof sec, "%s%s", pub, S_SECRET_SUFFIX);
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return s_fail(err, errlen, "%s: cannot create: %s", dir, strerror(errno));
    if (access(pub, F_OK) == 0)
        return s_fail(err, errlen, "%s: exists (remove the pair first to make a new one)", pub);
    /* the secret file is created 0600 before a byte is written into it */
    int fd = open(sec, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
        return s_fail(err, errlen, "%s: %s", sec,
                      errno == EEXIST ? "exists (remove the pair first to make a new one)"
                                      : strerror(errno));
    close(fd);
    zcert_t *cert = zcert_new();
    int rc = -EIO;
    if (!cert) {
        s_fail(err, errlen, "cannot make a key pair (is libzmq built with CURVE?)");
        goto out;
    }
    zcert_set_meta(cert, "name", "%s", name);
    if (zcert_save_secret(cert, sec) < 0 || zcert_save_public(cert, pub) < 0) {
        s_fail(err, errlen, "%s: cannot write: %s", dir, strerror(errno));
        goto out;
    }
    if (public_key)
        snprintf(public_key, BUS_CURVE_KEY_TXT, "%s", zcert_public_txt(cert));
    rc = 0;
out:
    if (rc < 0) {
        unlink(sec);
        unlink(pub);
    }
    zcert_destroy(&cert);
    return rc;
}

static int s_start_auth(const char *clients, char *err, size_t errlen)
{
    struct stat sb;
    int rc = stat(clients, &sb);
    if (rc < 0 || !S_ISDIR(sb.st_mode))
        return s_fail(err, errlen, "%s: %s (the directory of admitted client public keys)", clients,
                      rc < 0 ? strerror(errno) : "not a directory");
    s_state.auth = zactor_new(zauth, NULL);
    if (!s_state.auth)
        return s_fail(err, errlen, "cannot start the zauth actor");
    if (zstr_sendx(s_state.auth, "CURVE", clients, NULL) < 0 || zsock_wait(s_state.auth) < 0)
        return s_fail(err, errlen, "the zauth actor did not take %s", clients);
    return 0;
}

int bus_curve_start(const bus_curve_config_t *cfg, char *err, size_t errlen)
{
    if (s_state.on)
        return s_fail(err, errlen, "CURVE is already on in this process");
    if (!zsys_has_curve())
        return s_fail(err, errlen, "this libzmq has no CURVE (built without libsodium)");
    s_state_t st = {0};
    if (!cfg ||
        bus_curve_load_pair(cfg->cert, st.keys.public_key, st.keys.secret_key, err, errlen) < 0)
        return cfg ? -EINVAL : s_fail(err, errlen, "no CURVE setting");
    if (cfg->server_cert) {
        if (bus_curve_load_pair(cfg->server_cert, st.server_public, st.server_secret, err, errlen) <
            0)
            return -EINVAL;
        st.serves = true;
        snprintf(st.keys.server_key, sizeof st.keys.server_key, "%s", st.server_public);
    } else if (bus_curve_load_public(cfg->server_key, st.keys.server_key, err, errlen) < 0) {
        return -EINVAL;
    }
    s_state = st;
    if (st.serves && (!cfg->clients || s_start_auth(cfg->clients, err, errlen) < 0)) {
        if (!cfg->clients)
            s_fail(err, errlen,
                   "a process that serves CURVE needs the admitted clients' directory");
        bus_curve_stop();
        return -EINVAL;
    }
    s_state.on = true;
    return 0;
}

void bus_curve_stop(void)
{
    zactor_destroy(&s_state.auth);
    memset(&s_state, 0, sizeof s_state);
}

bool bus_curve_on(void)
{
    return s_state.on;
}

const bus_curve_client_t *bus_curve_process_keys(void)
{
    return s_state.on ? &s_state.keys : NULL;
}

static bool s_is_tcp(const char *endpoint)
{
    return endpoint && !strncmp(endpoint, "tcp://", 6);
}

int bus_curve_bind_setup(zsock_t *sock, const char *endpoint, char *err, size_t errlen)
{
    if (!s_state.on || !s_is_tcp(endpoint))
        return 0;
    if (!s_state.serves)
        return s_fail(err, errlen, "%s: CURVE is on but this process holds no server key",
                      endpoint);
    zsock_set_curve_publickey(sock, s_state.server_public);
    zsock_set_curve_secretkey(sock, s_state.server_secret);
    zsock_set_curve_server(sock, 1);
    zsock_set_zap_domain(sock, BUS_CURVE_ZAP_DOMAIN);
    /* fail closed: without a ZAP handler (the zauth actor gone) libzmq would admit
     * any CURVE client; enforced, it refuses them all */
    int one = 1;
    if (zmq_setsockopt(zsock_resolve(sock), ZMQ_ZAP_ENFORCE_DOMAIN, &one, sizeof one) != 0)
        return s_fail(err, errlen,
                      "%s: this libzmq cannot enforce ZAP (ZMQ_ZAP_ENFORCE_DOMAIN: %s)", endpoint,
                      zmq_strerror(errno));
    return 0;
}

int bus_curve_connect_setup(zsock_t *sock, const char *endpoint, const bus_curve_client_t *keys,
                            char *err, size_t errlen)
{
    if (!keys)
        keys = bus_curve_process_keys();
    if (!keys || !s_is_tcp(endpoint))
        return 0;
    if (!bus_curve_is_z85(keys->public_key) || !bus_curve_is_z85(keys->secret_key) ||
        !bus_curve_is_z85(keys->server_key))
        return s_fail(err, errlen, "%s: CURVE keys must be 40 Z85 characters each", endpoint);
    zsock_set_curve_publickey(sock, keys->public_key);
    zsock_set_curve_secretkey(sock, keys->secret_key);
    zsock_set_curve_serverkey(sock, keys->server_key);
    return 0;
}

const char *bus_curve_peer_key(zframe_t *frame)
{
    const char *uid = frame ? zframe_meta(frame, "User-Id") : NULL;
    return uid && bus_curve_is_z85(uid) ? uid : NULL;
}
