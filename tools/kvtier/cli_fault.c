/* cli_fault.c — `kvtier fault`: sets, clears and shows the faults of one
 * running process through its admin socket (bus_fault_admin.h;
 * docs/OPERATIONS.md "Faults on purpose"). The socket is DIR/PROCESS.sock, DIR
 * being --dir, else RUN_DIR/faults (--run-dir, else $KVTIER_RUN_DIR, which
 * deploy/supervise sets). Prints the process's points after each command; --json
 * prints the answer as it came. */
#include "cli_common.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_fault_admin.h"

#define S_TIMEOUT_MS 5000

enum { S_OPT_PROCESS = CLI_OPT_FIRST_COMMAND_OPT, S_OPT_RUN_DIR, S_OPT_DIR, S_OPT_JSON };

static void s_usage(FILE *out)
{
    fprintf(out,
            "usage: kvtier fault --process NAME [--run-dir DIR | --dir DIR] [--json]\n"
            "                    (set POINT ACTION [RATE] [SEED] | clear [POINT] | show)\n\n"
            "  --process NAME  the process: coordinator, tier-NAME (deploy/supervise's names)\n"
            "  --run-dir DIR   the supervisor's run dir (default $KVTIER_RUN_DIR); the socket\n"
            "                  is DIR/faults/NAME.sock\n"
            "  --dir DIR       the socket directory itself (the deployment's faults.dir)\n"
            "  --json          print the process's answer as JSON\n\n"
            "points:  nvme.write nvme.read nvme.fsync host.read bus.server.reply\n"
            "         bus.client.reply etcd.request\n"
            "actions: error[:ERRNO] short delay:MS drop late:MS flip timeout[:MS]\n"
            "rates:   1/N (one hit in N, at random) next:K (the next K hits) always\n"
            "Only a process whose deployment sets faults.enabled: true has a socket.\n");
}

static int s_socket_path(const char *dir, const char *run_dir, const char *process, char *out,
                         size_t outlen)
{
    if (!process || !*process || strchr(process, '/')) {
        fprintf(stderr, "kvtier fault: --process NAME is required (coordinator, tier-NAME)\n");
        return -1;
    }
    if (!dir && !run_dir)
        run_dir = getenv(BUS_FAULT_ENV_RUN_DIR);
    if (!dir && (!run_dir || !*run_dir)) {
        fprintf(stderr, "kvtier fault: no socket directory: give --run-dir DIR (the "
                        "supervisor's run dir), --dir DIR, or set $KVTIER_RUN_DIR\n");
        return -1;
    }
    if (dir)
        snprintf(out, outlen, "%s/%s.sock", dir, process);
    else
        snprintf(out, outlen, "%s/faults/%s.sock", run_dir, process);
    return 0;
}

/* The request of the words after the options. */
static char *s_request(int argc, char **argv)
{
    const char *op = argc > 0 ? argv[0] : "show";
    json_t *req = NULL;
    if (!strcmp(op, "set") && (argc == 3 || argc == 4 || argc == 5)) {
        req = json_pack("{s:s,s:s,s:s,s:s}", "op", "set", "point", argv[1], "action", argv[2],
                        "rate", argc >= 4 ? argv[3] : "always");
        char *end = NULL;
        long long seed = argc == 5 ? strtoll(argv[4], &end, 10) : 0;
        if (argc == 5 && (!*argv[4] || *end || seed < 0)) {
            fprintf(stderr, "kvtier fault: SEED \"%s\": expected a number >= 0\n", argv[4]);
            json_decref(req);
            return NULL;
        }
        if (req && argc == 5)
            json_object_set_new(req, "seed", json_integer(seed));
    } else if (!strcmp(op, "clear") && argc <= 2) {
        req = json_pack("{s:s}", "op", "clear");
        if (req && argc == 2)
            json_object_set_new(req, "point", json_string(argv[1]));
    } else if (!strcmp(op, "show") && argc <= 1) {
        req = json_pack("{s:s}", "op", "show");
    } else {
        fprintf(stderr, "kvtier fault: \"%s\" with %d word(s) after it is not a command\n", op,
                argc - 1);
        return NULL;
    }
    char *s = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    return s;
}

static int s_print(const char *ans, bool as_json)
{
    json_error_t jerr;
    json_t *o = json_loads(ans, 0, &jerr);
    if (!o) {
        fprintf(stderr, "kvtier fault: the answer is not JSON: %s\n", jerr.text);
        return CLI_EXIT_FAIL;
    }
    int rc = CLI_EXIT_OK;
    if (!json_is_true(json_object_get(o, "ok"))) {
        const char *code = json_string_value(json_object_get(o, "code"));
        fprintf(stderr, "kvtier fault: %s: %s\n", code ? code : "ERROR",
                json_string_value(json_object_get(o, "error")));
        rc = code && !strcmp(code, "INVALID_ARGUMENT") ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    } else if (as_json) {
        printf("%s\n", ans);
    } else {
        json_t *pts = json_object_get(o, "points"), *pt;
        size_t i;
        printf("%-18s %-24s %12s %12s\n", "POINT", "RULE", "HITS", "INJECTED");
        json_array_foreach(pts, i, pt)
        {
            printf("%-18s %-24s %12lld %12lld\n", json_string_value(json_object_get(pt, "point")),
                   json_string_value(json_object_get(pt, "rule")),
                   (long long)json_integer_value(json_object_get(pt, "hits")),
                   (long long)json_integer_value(json_object_get(pt, "injected")));
        }
    }
    json_decref(o);
    return rc;
}

int cli_cmd_fault(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"process", required_argument, NULL, S_OPT_PROCESS},
        {"run-dir", required_argument, NULL, S_OPT_RUN_DIR},
        {"dir", required_argument, NULL, S_OPT_DIR},
        {"json", no_argument, NULL, S_OPT_JSON},
        {"help", no_argument, NULL, CLI_OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    const char *process = NULL, *run_dir = NULL, *dir = NULL;
    bool as_json = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
        switch (c) {
        case S_OPT_PROCESS:
            process = optarg;
            break;
        case S_OPT_RUN_DIR:
            run_dir = optarg;
            break;
        case S_OPT_DIR:
            dir = optarg;
            break;
        case S_OPT_JSON:
            as_json = true;
            break;
        case CLI_OPT_HELP:
            s_usage(stdout);
            return CLI_EXIT_OK;
        default:
            s_usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    char path[BUS_FAULT_DIR_MAX + 2 * BUS_FAULT_NAME_MAX];
    if (s_socket_path(dir, run_dir, process, path, sizeof path) < 0)
        return CLI_EXIT_USAGE;
    char *req = s_request(argc - optind, argv + optind);
    if (!req) {
        s_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    char ans[BUS_FAULT_ADMIN_MAX], err[BUS_FAULT_ADMIN_MAX / 2];
    int rc = bus_fault_admin_call(path, req, S_TIMEOUT_MS, ans, sizeof ans, err, sizeof err);
    free(req);
    if (rc < 0) {
        fprintf(stderr, "kvtier fault: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    return s_print(ans, as_json);
}
