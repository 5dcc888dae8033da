/* cli.c — `kvtier <command>` dispatch and the top-level help. */
#include "cli.h"

#include "cli_common.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} s_commands[] = {
    {"status", cli_cmd_status, "leader, tiers and their fill, counters, hit rate"},
    {"lookup", cli_cmd_lookup, "which of some block keys are cached, and where"},
    {"put", cli_cmd_put, "store one block from a file (or key-derived bytes)"},
    {"get", cli_cmd_get, "load one block into a file (or check key-derived bytes)"},
    {"replay", cli_cmd_replay, "replay a trace as an engine would, verifying every load"},
    {"events", cli_cmd_events, "print the leader's events as JSON lines (docs/EVENTS.md)"},
    {"optimize", cli_cmd_optimize, "hit rate vs capacity and policy, TTFT, from a trace"},
    {"trace", cli_cmd_trace, "trace synth: write a seeded synthetic trace"},
    {"trim", cli_cmd_trim, "drop an instance's coldest blocks beyond a count (operators)"},
    {"remove", cli_cmd_remove, "drop every block of an instance (operators)"},
    {"leader", cli_cmd_leader, "leader resign: hand the leadership to a standby (operators)"},
    {"drain", cli_cmd_drain, "move a tier's blocks down its chain and retire it (operators)"},
    {"fault", cli_cmd_fault, "set, clear and show a process's faults on purpose (tests)"},
    {"deployment", cli_cmd_deployment, "print a deployment file's processes (for scripts)"},
    {"keygen", cli_cmd_keygen, "a CURVE key pair, or a new cluster secret (docs/SECURITY.md)"},
    {"host-claim", cli_cmd_host_claim, "hold a host name of a deployment in etcd (deploy/supervise)"},
};

static void s_usage(FILE *out)
{
    fprintf(out, "usage: kvtier COMMAND [OPTIONS]   (kvtier COMMAND --help for its options)\n\n"
                 "service processes:\n"
                 "  coordinator     run a coordinator (kvtier coordinator -c FILE)\n"
                 "  tier            run a tier actor (kvtier tier -c FILE --name TIER)\n\n"
                 "client commands:\n");
    for (size_t i = 0; i < sizeof s_commands / sizeof s_commands[0]; i++)
        fprintf(out, "  %-15s %s\n", s_commands[i].name, s_commands[i].help);
}

int cli_main(int argc, char **argv)
{
    if (argc < 2) {
        s_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        s_usage(stdout);
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof s_commands / sizeof s_commands[0]; i++)
        if (!strcmp(cmd, s_commands[i].name))
            return s_commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "kvtier: unknown command \"%s\"\n", cmd);
    s_usage(stderr);
    return CLI_EXIT_USAGE;
}
