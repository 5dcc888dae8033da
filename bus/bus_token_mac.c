/* bus_token_mac.c — sealing and verifying token payloads, and the secret file
 * (rules in bus_token_mac.h). Only libsodium touches key bytes; the key's
 * derivation binds the cluster name so it never verifies across clusters. */
#include "bus_token_mac.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_CONTEXT "kvtier token mac v1"

_Static_assert(crypto_auth_hmacsha512256_BYTES == BUS_TOKEN_MAC_HMAC_BYTES, "MAC length");
_Static_assert(crypto_auth_hmacsha512256_KEYBYTES == sizeof(bus_token_key_t), "key length");
_Static_assert(BUS_TOKEN_MAC_HMAC_BYTES <= BUS_TOKEN_MAC_MAX, "trailer room");

int bus_token_key_derive(const uint8_t *secret, const char *cluster, bus_token_key_t *out)
{
    if (!secret || !cluster || !cluster[0] || !out)
        return -EINVAL;
    if (sodium_init() < 0)
        return -EIO;
    uint8_t msg[sizeof S_CONTEXT + 256];
    size_t n = strnlen(cluster, 255);
    memcpy(msg, S_CONTEXT, sizeof S_CONTEXT); /* the NUL separates context and name */
    memcpy(msg + sizeof S_CONTEXT, cluster, n);
    crypto_generichash(out->k, sizeof out->k, msg, sizeof S_CONTEXT + n, secret, BUS_SECRET_BYTES);
    sodium_memzero(msg, sizeof msg);
    return 0;
}

static void s_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

int bus_token_seal(const bus_token_key_t *key, uint8_t *buf, size_t cap, size_t *len)
{
    if (!key || !buf || !len || *len < BUS_TOKEN_HEADER_BYTES + BUS_TOKEN_TRAILER_BYTES)
        return -EINVAL;
    size_t covered = *len - BUS_TOKEN_TRAILER_BYTES;
    static const uint8_t none[BUS_TOKEN_TRAILER_BYTES] = {0};
    if (memcmp(buf + covered, none, sizeof none) != 0)
        return -EINVAL;
    if (cap < *len + BUS_TOKEN_MAC_HMAC_BYTES)
        return -ENOSPC;
    s_put16(buf + covered, BUS_TOKEN_MAC_HMAC512_256);
    s_put16(buf + covered + 2, BUS_TOKEN_MAC_HMAC_BYTES);
    crypto_auth_hmacsha512256(buf + *len, buf, covered, key->k);
    *len += BUS_TOKEN_MAC_HMAC_BYTES;
    return 0;
}

int bus_token_verify(const bus_token_key_t *key, const bus_token_view_t *view, const uint8_t *buf)
{
    if (!key || !view || !buf)
        return -EINVAL;
    if (view->mac_alg != BUS_TOKEN_MAC_HMAC512_256 || view->mac_len != BUS_TOKEN_MAC_HMAC_BYTES ||
        !view->mac)
        return -EPERM;
    return crypto_auth_hmacsha512256_verify(view->mac, buf, view->mac_covered, key->k) == 0
               ? 0
               : -EBADMSG;
}

static int s_fail(char *err, size_t errlen, const char *path, const char *what)
{
    if (err && errlen)
        snprintf(err, errlen, "secret file %s: %s", path, what);
    return -1;
}

int bus_secret_load(const char *path, uint8_t *out, char *err, size_t errlen)
{
    char why[160];
    if (!path || !path[0])
        return s_fail(err, errlen, "(none)", "no path given");
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        snprintf(why, sizeof why, "%s (create one with: kvtier keygen --secret %s)",
                 strerror(errno), path);
        return s_fail(err, errlen, path, why);
    }
    struct stat sb;
    int rc = -1;
    if (fstat(fd, &sb) < 0) {
        rc = s_fail(err, errlen, path, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        rc = s_fail(err, errlen, path, "not a regular file");
    } else if ((sb.st_mode & 077) != 0) {
        snprintf(why, sizeof why,
                 "mode %04o lets group or others reach it: chmod 600 %s (a secret is readable "
                 "by its owner only)",
                 (unsigned)(sb.st_mode & 07777), path);
        rc = s_fail(err, errlen, path, why);
    } else if (sb.st_size != (off_t)BUS_SECRET_BYTES) {
        snprintf(why, sizeof why,
                 "%lld bytes, a secret is exactly %u raw bytes (kvtier keygen --secret FILE "
                 "writes one)",
                 (long long)sb.st_size, BUS_SECRET_BYTES);
        rc = s_fail(err, errlen, path, why);
    } else if (read(fd, out, BUS_SECRET_BYTES) != (ssize_t)BUS_SECRET_BYTES) {
        rc = s_fail(err, errlen, path, "short read");
    } else {
        rc = 0;
    }
    close(fd);
    return rc;
}

int bus_secret_create(const char *path, char *err, size_t errlen)
{
    if (!path || !path[0])
        return s_fail(err, errlen, "(none)", "no path given");
    if (sodium_init() < 0)
        return s_fail(err, errlen, path, "libsodium did not start");
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return s_fail(err, errlen, path,
                      errno == EEXIST ? "exists already (never overwritten: remove it first)"
                                      : strerror(errno));
    uint8_t s[BUS_SECRET_BYTES];
    randombytes_buf(s, sizeof s);
    bool ok = fchmod(fd, 0600) == 0 && write(fd, s, sizeof s) == (ssize_t)sizeof s;
    ok = fsync(fd) == 0 && ok;
    sodium_memzero(s, sizeof s);
    close(fd);
    if (!ok) {
        unlink(path);
        return s_fail(err, errlen, path, "could not be written");
    }
    return 0;
}

void bus_secret_wipe(void *p, size_t n)
{
    if (p && n)
        sodium_memzero(p, n);
}
