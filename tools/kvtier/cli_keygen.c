/* cli_keygen.c — `kvtier keygen`, two modes (docs/SECURITY.md):
 *   --out DIR --name NAME  a CURVE key pair for a process or a client ("Keys and
 *                          sockets"): DIR/NAME.key (the public half, to copy into the
 *                          servers' clients directory) and DIR/NAME.key_secret (mode
 *                          0600, stays with its owner); prints the public key
 *   --secret FILE          a new cluster secret (32 random bytes, mode 0600) for
 *                          security.secret_file ("The cluster secret")
 * Neither ever overwrites a file. */
#include "cli_common.h"

#include <stdio.h>
#include <string.h>

#include "bus_curve.h"
#include "bus_token_mac.h"
#include "coord_config.h"

static void s_usage(FILE *out)
{
    fprintf(out, "usage: kvtier keygen --out DIR --name NAME | --secret FILE\n"
                 "  --out DIR    where the pair goes (created 0700 if missing)\n"
                 "  --name NAME  DIR/NAME.key (public) and DIR/NAME.key_secret (0600)\n"
                 "Admit the client: copy DIR/NAME.key into the deployment's\n"
                 "security.curve.clients directory; grant instances in\n"
                 "security.curve.instances (docs/SECURITY.md).\n"
                 "  --secret FILE  a new cluster secret (32 random bytes, mode 0600; FILE must\n"
                 "                 not exist): name it in security.secret_file\n");
}

/* The CURVE mode: one pair. */
static int s_keygen_curve(const char *out, const char *name)
{
    char err[600], pub[BUS_CURVE_KEY_TXT];
    if (bus_curve_keygen(out, name, pub, err, sizeof err) < 0) {
        fprintf(stderr, "kvtier keygen: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    printf("%s/%s.key %s\n", out, name, pub);
    return CLI_EXIT_OK;
}

/* The cluster secret mode. */
static int s_keygen_secret(const char *path)
{
    char err[COORD_PATH_MAX + 128];
    if (bus_secret_create(path, err, sizeof err) < 0) {
        fprintf(stderr, "kvtier keygen: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    printf("kvtier keygen: wrote a new cluster secret to %s\n", path);
    return CLI_EXIT_OK;
}

int cli_cmd_keygen(int argc, char **argv)
{
    const char *out = NULL, *name = NULL, *secret = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            s_usage(stdout);
            return CLI_EXIT_OK;
        }
        if ((!strcmp(a, "--out") || !strcmp(a, "--name")) && i + 1 < argc) {
            *(a[2] == 'o' ? &out : &name) = argv[++i];
        } else if (!strcmp(a, "--secret") && i + 1 < argc) {
            secret = argv[++i];
        } else {
            fprintf(stderr, "kvtier keygen: %s \"%s\"\n",
                    i + 1 < argc || a[0] != '-' ? "unknown argument" : "no value for", a);
            s_usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (secret && (out || name)) {
        fprintf(stderr, "kvtier keygen: --secret FILE is a mode of its own (no --out / --name)\n");
        s_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (secret)
        return s_keygen_secret(secret);
    if (!out || !name) {
        fprintf(stderr, "kvtier keygen: --out DIR and --name NAME (a CURVE pair) or --secret "
                        "FILE (a cluster secret) are required\n");
        s_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    return s_keygen_curve(out, name);
}
