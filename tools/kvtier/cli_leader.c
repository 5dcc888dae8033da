/* cli_leader.c — `kvtier leader resign [--wait S]`: an operator hands the leadership
 * to a standby coordinator (issue 9 §3, docs/OPERATIONS.md "Handing leadership
 * over"). One admin message on the bus (kvt_leader_resign, internal.proto
 * AdminResignRequest): the leader stops opening windows, lets the open ones finish
 * for up to S seconds, then lets go of its lease; this command prints what
 * finished, what was left to lapse and who took over. Exit 1 when refused (no
 * standby, a resign in progress, not reachable) or when no new leader answered. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli_common.h"

enum { S_OPT_WAIT = CLI_OPT_FIRST_COMMAND_OPT };

typedef struct {
    uint64_t wait_s; /* 0: the library's default */
} s_args_t;

static int s_opt(void *ctx, int opt, const char *arg)
{
    s_args_t *a = ctx;
    if (opt != S_OPT_WAIT)
        return -1;
    return cli_parse_u64("--wait", arg, 1, KVT_RESIGN_WAIT_MAX_S, &a->wait_s);
}

static int s_resign(cli_common_t *o, const s_args_t *a)
{
    kvt_client_t *c = cli_connect(o, "kvtier-leader");
    if (!c)
        return CLI_EXIT_FAIL;
    kvt_resign_info_t r;
    int rc = kvt_leader_resign(c, (uint32_t)a->wait_s, &r);
    if (rc < 0) {
        cli_report_error("leader resign", "resign", c, rc);
        kvt_close(&c);
        return CLI_EXIT_FAIL;
    }
    printf("resign: %s (epoch %" PRIu64 ") handed over after %" PRIu64
           " ms: %u windows open at the start, %u finished, %u left to lapse; %u standbys "
           "registered\n",
           r.old_leader[0] ? r.old_leader : "the leader", r.old_epoch, r.waited_ms, r.windows_open,
           r.windows_finished, r.windows_lapsed, r.standbys);
    int status = CLI_EXIT_OK;
    if (r.new_epoch) {
        printf("leader: %s at %s (epoch %" PRIu64 "); %s is a standby now\n",
               r.new_leader[0] ? r.new_leader : "?", r.new_leader_endpoint, r.new_epoch,
               r.old_leader[0] ? r.old_leader : "the old leader");
    } else {
        fprintf(stderr,
                "kvtier leader resign: no new leader answered in time (failover_ms); if no "
                "standby takes over, %s campaigns again one lease TTL after it let go\n",
                r.old_leader[0] ? r.old_leader : "the old leader");
        status = CLI_EXIT_FAIL;
    }
    kvt_close(&c);
    return status;
}

int cli_cmd_leader(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_COMMON_LONGOPTS, {"wait", required_argument, NULL, S_OPT_WAIT}, {0, 0, 0, 0}};
    cli_common_t o;
    s_args_t a = {0};
    cli_common_init(&o);
    int first = cli_parse(argc, argv, "c:", longopts, &o, s_opt, &a);
    bool bad = first < 0 || first != argc - 1 || strcmp(argv[first], "resign") != 0;
    if (bad || o.help) {
        fprintf(o.help ? stdout : stderr,
                "usage: kvtier leader resign [--wait SECONDS]\n"
                "  hands the leadership to a standby coordinator: the leader opens no new\n"
                "  windows (engines wait for the new leader), lets the open ones finish for\n"
                "  up to SECONDS (default %u, at most %u; the rest lapse), then lets go of\n"
                "  its etcd lease and stays up as a standby. Refused (exit 1) when no other\n"
                "  coordinator is registered.\n" CLI_COMMON_USAGE,
                KVT_RESIGN_WAIT_DEFAULT_S, KVT_RESIGN_WAIT_MAX_S);
        return o.help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    return s_resign(&o, &a);
}
