/* bus_curve.h — CurveZMQ on the bus's tcp sockets (docs/SECURITY.md "Keys and
 * sockets"). When a process turns it on (bus_curve_start), every tcp bind of a
 * bus server, publisher or replay socket is a CURVE server presenting the
 * deployment's server key, and one zauth actor admits only the client public keys
 * found in the allow directory; every tcp connect is a CURVE client with this
 * process's own key pair. inproc:// and ipc:// sockets are left as they are (they
 * never leave the host's kernel). When it is off nothing changes: no
 * authentication, no encryption, no isolation.
 *
 * A library that has no process of its own (libkvtier) never turns the process
 * setting on: it passes its keys per socket (bus_curve_client_t).
 *
 * Owns: the zauth actor, the process's keys, loading and writing zcert files.
 * Never logs secrets; never accepts a secret file that others can read.
 *
 * Thread-safety: bus_curve_start / _stop run on the main thread before any socket
 * is made and after all are closed; the other calls only read the setting. */
#ifndef KVT_BUS_CURVE_H
#define KVT_BUS_CURVE_H

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>

/* A Z85 key (40 characters) and its NUL. */
#define BUS_CURVE_KEY_TXT 41
/* The ZAP domain of every CURVE server socket. */
#define BUS_CURVE_ZAP_DOMAIN "kvtier"

/* One connecting side's keys, Z85: its own pair and the server's public key. */
typedef struct {
    char public_key[BUS_CURVE_KEY_TXT];
    char secret_key[BUS_CURVE_KEY_TXT];
    char server_key[BUS_CURVE_KEY_TXT];
} bus_curve_client_t;

/* The process setting. Paths of zcert files name the public file ("k/tier0.key";
 * its secret is "k/tier0.key_secret"); a name ending in "_secret" is taken as the
 * secret file itself. */
typedef struct {
    const char *cert;        /* this process's own pair: its identity when it connects */
    const char *server_cert; /* the deployment's server pair (processes that bind tcp);
                                NULL: this process only connects (then server_key) */
    const char *server_key;  /* with server_cert NULL: the server's public key, a file
                                or the Z85 text */
    const char *clients;     /* directory of the client public keys a server admits;
                                reread when it changes (zcertstore) */
} bus_curve_config_t;

/* Turns CURVE on for this process: loads the keys, starts the zauth actor over
 * the allow directory. 0, or < 0 with a message naming the file and what to do
 * ("keys/coord0.key_secret: readable by group or others (chmod 600 it)"). Calling
 * it twice without bus_curve_stop is an error. */
int bus_curve_start(const bus_curve_config_t *cfg, char *err, size_t errlen);

/* Stops the zauth actor and forgets the keys; idempotent. */
void bus_curve_stop(void);

/* True between bus_curve_start and bus_curve_stop. */
bool bus_curve_on(void);

/* This process's keys (when on, else NULL). */
const bus_curve_client_t *bus_curve_process_keys(void);

/* Before a bind of SOCK to ENDPOINT: when CURVE is on and ENDPOINT is tcp, makes
 * SOCK a CURVE server with the ZAP domain, enforced (no ZAP handler: nobody is
 * admitted). 0 (also when nothing was to do), or < 0 with err set (CURVE on but this
 * process holds no server key). */
int bus_curve_bind_setup(zsock_t *sock, const char *endpoint, char *err, size_t errlen);

/* Before a connect of SOCK to ENDPOINT: when ENDPOINT is tcp and KEYS is given
 * (or, KEYS NULL, the process setting is on), makes SOCK a CURVE client. 0, or
 * < 0 with err set. */
int bus_curve_connect_setup(zsock_t *sock, const char *endpoint, const bus_curve_client_t *keys,
                            char *err, size_t errlen);

/* The client public key (Z85) a CURVE server authenticated for the connection a
 * received FRAME came on (ZMQ's "User-Id"), or NULL on a socket without CURVE. */
const char *bus_curve_peer_key(zframe_t *frame);

/* Loads the pair of a cert file: both keys Z85. Refuses a secret file that is not
 * a regular file or that group or others can read. 0, or < 0 with err set. */
int bus_curve_load_pair(const char *file, char public_key[BUS_CURVE_KEY_TXT],
                        char secret_key[BUS_CURVE_KEY_TXT], char *err, size_t errlen);

/* A public key: TEXT is a Z85 key (40 characters) or the name of a cert file. */
int bus_curve_load_public(const char *text, char public_key[BUS_CURVE_KEY_TXT], char *err,
                          size_t errlen);

/* Writes a new pair as DIR/NAME.key (public, 0644) and DIR/NAME.key_secret (0600),
 * creating DIR (0700) if needed; refuses to overwrite an existing pair. The
 * public key in *public_key (may be NULL). 0, or < 0 with err set. */
int bus_curve_keygen(const char *dir, const char *name, char public_key[BUS_CURVE_KEY_TXT],
                     char *err, size_t errlen);

/* True when TEXT is 40 characters of the Z85 alphabet. */
bool bus_curve_is_z85(const char *text);

#endif
