/* cli_trim.c — `kvtier trim INSTANCE --keep N` and `kvtier remove INSTANCE`: an
 * operator drops an instance's blocks beyond a count, or all of them (issue 9 §3,
 * "scale in and operate without losing the cache"). One admin message on the bus
 * (kvt_trim, internal.proto AdminTrimRequest); the service removes the coldest
 * blocks first in its reclaim rounds, and --wait polls until the count is reached. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_common.h"

enum { S_OPT_KEEP = CLI_OPT_FIRST_COMMAND_OPT, S_OPT_WAIT, S_OPT_CANCEL, S_OPT_STATUS };

#define S_MAX_WAIT_S 86400u
#define S_POLL_MS 200

typedef struct {
    bool remove; /* kvtier remove: keep 0 */
    bool keep_set;
    uint64_t keep;
    uint64_t wait_s; /* 0: return at once */
    bool cancel, status;
} s_args_t;

static int s_opt(void *ctx, int opt, const char *arg)
{
    s_args_t *a = ctx;
    switch (opt) {
    case S_OPT_KEEP:
        a->keep_set = true;
        return cli_parse_u64("--keep", arg, 0, UINT64_MAX, &a->keep);
    case S_OPT_WAIT:
        return cli_parse_u64("--wait", arg, 1, S_MAX_WAIT_S, &a->wait_s);
    case S_OPT_CANCEL:
        a->cancel = true;
        return 0;
    case S_OPT_STATUS:
        a->status = true;
        return 0;
    default:
        return -1;
    }
}

static void s_print(const char *instance, const kvt_trim_info_t *t)
{
    if (t->active)
        printf("trim: instance %s: %" PRIu64 " blocks, removing down to %" PRIu64 "\n", instance,
               t->blocks, t->keep_blocks);
    else
        printf("trim: instance %s: %" PRIu64 " blocks, no trim in progress\n", instance, t->blocks);
}

static int s_run(int argc, char **argv, bool remove)
{
    const char *cmd = remove ? "remove" : "trim";
    static const struct option longopts[] = {CLI_COMMON_LONGOPTS,
                                             {"keep", required_argument, NULL, S_OPT_KEEP},
                                             {"wait", required_argument, NULL, S_OPT_WAIT},
                                             {"cancel", no_argument, NULL, S_OPT_CANCEL},
                                             {"status", no_argument, NULL, S_OPT_STATUS},
                                             {0, 0, 0, 0}};
    cli_common_t o;
    s_args_t a = {.remove = remove};
    cli_common_init(&o);
    int first = cli_parse(argc, argv, "c:", longopts, &o, s_opt, &a);
    /* exactly one of --keep, --cancel, --status for trim; none of them for remove */
    int modes = a.keep_set + a.cancel + a.status;
    bool bad = first < 0 || first != argc - 1 || (remove ? modes != 0 : modes != 1);
    if (bad || o.help) {
        fprintf(o.help ? stdout : stderr,
                remove ? "usage: kvtier remove INSTANCE [--wait SECONDS]\n"
                         "  drops every block of INSTANCE (on every tier), coldest first\n"
                       : "usage: kvtier trim INSTANCE (--keep N | --cancel | --status) "
                         "[--wait SECONDS]\n"
                         "  drops INSTANCE's blocks beyond N (over all tiers), coldest first;\n"
                         "  --cancel stops a trim in progress, --status reports\n");
        fprintf(o.help ? stdout : stderr,
                "  --wait: poll until done, at most SECONDS (exit 1 if not done by then)\n"
                "  pinned blocks and blocks being written wait for their readers and "
                "writers\n" CLI_COMMON_USAGE);
        return o.help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    const char *instance = argv[first];
    unsigned flags = a.cancel ? KVT_TRIM_CANCEL : a.status ? KVT_TRIM_STATUS : 0;
    kvt_client_t *c = cli_connect(&o, remove ? "kvtier-remove" : "kvtier-trim");
    if (!c)
        return CLI_EXIT_FAIL;
    kvt_trim_info_t t;
    int rc = kvt_trim(c, instance, a.keep, flags, &t);
    if (rc < 0) {
        cli_report_error(cmd, cmd, c, rc);
        kvt_close(&c);
        return CLI_EXIT_FAIL;
    }
    s_print(instance, &t);
    int status = CLI_EXIT_OK;
    if (a.wait_s && t.active) {
        struct timespec d = {0, S_POLL_MS * 1000000L};
        uint64_t polls = a.wait_s * 1000 / S_POLL_MS;
        for (uint64_t i = 0; i < polls && t.active; i++) {
            nanosleep(&d, NULL);
            rc = kvt_trim(c, instance, 0, KVT_TRIM_STATUS, &t);
            if (rc < 0) {
                cli_report_error(cmd, "trim status", c, rc);
                kvt_close(&c);
                return CLI_EXIT_FAIL;
            }
        }
        s_print(instance, &t);
        uint64_t above = t.blocks > a.keep ? t.blocks - a.keep : 0;
        if (t.active) {
            fprintf(stderr,
                    "kvtier %s: not done after %" PRIu64 " s: %" PRIu64
                    " blocks above the target (pinned, being written, or a tier is not up)\n",
                    cmd, a.wait_s, above);
            status = CLI_EXIT_FAIL;
        } else if (above) { /* a leader change forgot it, or someone cancelled it */
            fprintf(stderr,
                    "kvtier %s: the trim is no longer in progress (cancelled, or a new leader "
                    "took over) with %" PRIu64 " blocks above the target: run it again\n",
                    cmd, above);
            status = CLI_EXIT_FAIL;
        }
    }
    kvt_close(&c);
    return status;
}

int cli_cmd_trim(int argc, char **argv)
{
    return s_run(argc, argv, false);
}

int cli_cmd_remove(int argc, char **argv)
{
    return s_run(argc, argv, true);
}
