/* cli_drain.c — `kvtier drain TIER [--wait S] [--status] [--cancel]`: an operator
 * retires a tier of a chain without losing its blocks (issue 9 §3, docs/OPERATIONS.md
 * "Draining a tier"). One admin message on the bus (kvt_drain, internal.proto
 * AdminDrainRequest): the tier takes no new block, the leader moves its blocks down
 * the chain, and once it is empty it is retired; --wait polls until retired. Exit 1
 * when refused (unknown tier, the last tier of its chain, already draining) or not
 * retired within --wait. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli_common.h"

enum { S_OPT_WAIT = CLI_OPT_FIRST_COMMAND_OPT, S_OPT_CANCEL, S_OPT_STATUS };

#define S_MAX_WAIT_S 86400u
#define S_POLL_MS 200

typedef struct {
    uint64_t wait_s; /* 0: return at once */
    bool cancel, status;
} s_args_t;

static int s_opt(void *ctx, int opt, const char *arg)
{
    s_args_t *a = ctx;
    switch (opt) {
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

static void s_print(const char *tier, const kvt_drain_info_t *d)
{
    switch (d->state) {
    case KVT_TIER_DRAINING:
        printf("drain: tier %s: draining to %s: %" PRIu64 " blocks left, %" PRIu64
               " moved in %" PRIu64 " ms\n",
               tier, d->next_tier[0] ? d->next_tier : "(no tier below takes blocks now)",
               d->blocks_left, d->blocks_moved, d->elapsed_ms);
        break;
    case KVT_TIER_RETIRED:
        printf("drain: tier %s: retired (%" PRIu64 " blocks moved in %" PRIu64
               " ms): nothing is placed on it until kvtier drain %s --cancel\n",
               tier, d->blocks_moved, d->elapsed_ms, tier);
        break;
    default:
        printf("drain: tier %s: serving (not drained), %" PRIu64 " blocks\n", tier, d->blocks_left);
        break;
    }
}

int cli_cmd_drain(int argc, char **argv)
{
    static const struct option longopts[] = {CLI_COMMON_LONGOPTS,
                                             {"wait", required_argument, NULL, S_OPT_WAIT},
                                             {"cancel", no_argument, NULL, S_OPT_CANCEL},
                                             {"status", no_argument, NULL, S_OPT_STATUS},
                                             {0, 0, 0, 0}};
    cli_common_t o;
    s_args_t a = {0};
    cli_common_init(&o);
    int first = cli_parse(argc, argv, "c:", longopts, &o, s_opt, &a);
    bool bad = first < 0 || first != argc - 1 || (a.cancel && a.status) || (a.cancel && a.wait_s);
    if (bad || o.help) {
        fprintf(o.help ? stdout : stderr,
                "usage: kvtier drain TIER [--wait SECONDS] [--status | --cancel]\n"
                "  TIER takes no new block; its blocks move to the next tier of its chain\n"
                "  (each removed only once its copy below serves; pinned ones wait for\n"
                "  their pins); once empty it is retired: nothing is placed on it until\n"
                "  --cancel (or a new leader: the drain lives in the leader's memory).\n"
                "  --status reports, --cancel stops a drain / brings a retired tier back,\n"
                "  --wait polls until retired, at most SECONDS (exit 1 if not by then).\n"
                "  Refused (exit 1): an unknown tier, the last tier of its chain, a tier\n"
                "  already draining or retired.\n" CLI_COMMON_USAGE);
        return o.help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    const char *tier = argv[first];
    unsigned flags = a.cancel ? KVT_DRAIN_CANCEL : a.status ? KVT_DRAIN_STATUS : 0;
    kvt_client_t *c = cli_connect(&o, "kvtier-drain");
    if (!c)
        return CLI_EXIT_FAIL;
    kvt_drain_info_t d;
    int rc = kvt_drain(c, tier, flags, &d);
    if (rc < 0) {
        cli_report_error("drain", "drain", c, rc);
        kvt_close(&c);
        return CLI_EXIT_FAIL;
    }
    s_print(tier, &d);
    int status = CLI_EXIT_OK;
    if (a.wait_s && d.state == KVT_TIER_DRAINING) {
        struct timespec ts = {0, S_POLL_MS * 1000000L};
        uint64_t polls = a.wait_s * 1000 / S_POLL_MS;
        for (uint64_t i = 0; i < polls && d.state == KVT_TIER_DRAINING; i++) {
            nanosleep(&ts, NULL);
            rc = kvt_drain(c, tier, KVT_DRAIN_STATUS, &d);
            if (rc < 0) {
                cli_report_error("drain", "drain status", c, rc);
                kvt_close(&c);
                return CLI_EXIT_FAIL;
            }
        }
        s_print(tier, &d);
        if (d.state == KVT_TIER_DRAINING) {
            fprintf(stderr,
                    "kvtier drain: %s not retired after %" PRIu64 " s: %" PRIu64
                    " blocks left (pinned, or a tier is not up)\n",
                    tier, a.wait_s, d.blocks_left);
            status = CLI_EXIT_FAIL;
        } else if (d.state != KVT_TIER_RETIRED) {
            fprintf(stderr,
                    "kvtier drain: %s is no longer draining (cancelled, or a new leader took "
                    "over): run it again\n",
                    tier);
            status = CLI_EXIT_FAIL;
        }
    }
    kvt_close(&c);
    return status;
}
