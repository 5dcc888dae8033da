/* cli_trace_synth.c — `kvtier trace synth`: a seeded synthetic trace in the format of
 * traces/README.md (tools/optimize/opt_synth.h has the model), to stdout or -o FILE;
 * the same flags and seed give the same bytes. `kvtier trace` is the home of trace
 * tools; synth is its only subcommand so far.
 *
 * Owns: flag parsing only. Exit 0, 1 when the output cannot be written, 2 on bad
 * usage (bounds named by flag). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli_common.h"
#include "opt_synth.h"

enum {
    S_OPT_SEED = CLI_OPT_FIRST_COMMAND_OPT,
    S_OPT_REQUESTS,
    S_OPT_PREFIXES,
    S_OPT_SHARE,
    S_OPT_ZIPF,
    S_OPT_PREFIX_BLOCKS,
    S_OPT_REUSE,
    S_OPT_REUSE_DISTANCE,
    S_OPT_BLOCKS,
    S_OPT_MAX_BLOCKS,
    S_OPT_SCAN_RATE,
    S_OPT_SCAN_LEN,
    S_OPT_SCAN_BLOCKS,
    S_OPT_INTERVAL,
};

typedef struct {
    opt_synth_config_t c;
    const char *output;
} s_args_t;

static int s_u32(const char *flag, const char *arg, uint64_t max, uint32_t *out)
{
    uint64_t v;
    if (cli_parse_u64(flag, arg, 0, max, &v) < 0)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

static int s_opt(void *ctx, int opt, const char *arg)
{
    s_args_t *a = ctx;
    opt_synth_config_t *c = &a->c;
    switch (opt) {
    case 'o':
        a->output = arg;
        return 0;
    case S_OPT_SEED:
        return cli_parse_u64("--seed", arg, 0, UINT64_MAX, &c->seed);
    case S_OPT_REQUESTS:
        return cli_parse_u64("--requests", arg, 1, OPT_SYNTH_MAX_REQUESTS, &c->requests);
    case S_OPT_PREFIXES:
        return s_u32("--prefixes", arg, OPT_SYNTH_MAX_PREFIXES, &c->prefixes);
    case S_OPT_SHARE:
        return cli_parse_double("--share", arg, 0, 1, &c->share);
    case S_OPT_ZIPF:
        return cli_parse_double("--zipf", arg, 0, 10, &c->zipf);
    case S_OPT_PREFIX_BLOCKS:
        return s_u32("--prefix-blocks", arg, 100000, &c->prefix_blocks);
    case S_OPT_REUSE:
        return cli_parse_double("--reuse", arg, 0, 1, &c->reuse);
    case S_OPT_REUSE_DISTANCE:
        return s_u32("--reuse-distance", arg, 100000, &c->reuse_distance);
    case S_OPT_BLOCKS:
        return s_u32("--blocks", arg, 100000, &c->blocks);
    case S_OPT_MAX_BLOCKS:
        return s_u32("--max-blocks", arg, OPT_SYNTH_MAX_BLOCKS, &c->max_blocks);
    case S_OPT_SCAN_RATE:
        return cli_parse_double("--scan-rate", arg, 0, 1, &c->scan_rate);
    case S_OPT_SCAN_LEN:
        return s_u32("--scan-len", arg, 100000, &c->scan_len);
    case S_OPT_SCAN_BLOCKS:
        return s_u32("--scan-blocks", arg, OPT_SYNTH_MAX_BLOCKS, &c->scan_blocks);
    case S_OPT_INTERVAL:
        return s_u32("--interval", arg, 3600000, &c->interval_ms);
    default:
        return -1;
    }
}

static int s_usage(bool help)
{
    opt_synth_config_t d;
    opt_synth_defaults(&d);
    fprintf(help ? stdout : stderr,
            "usage: kvtier trace synth [-o FILE] [--seed S] [--requests N] [model flags]\n"
            "  writes a synthetic trace (traces/README.md format) to FILE or stdout; the same\n"
            "  flags and seed give the same bytes (docs/OPTIMIZER.md has the model)\n"
            "  --seed S             (%llu)\n"
            "  --requests N         requests (%llu)\n"
            "  --prefixes P         shared prefixes: system prompts, documents (%u)\n"
            "  --share F            a fresh request starts with one, probability (%.2f)\n"
            "  --zipf A             their popularity, Zipf exponent (%.2f)\n"
            "  --prefix-blocks M    their mean length in blocks (%u)\n"
            "  --reuse F            a request continues an earlier one, probability (%.2f)\n"
            "  --reuse-distance D   that one is D requests back on average (%u, at most %u)\n"
            "  --blocks M           new blocks per request, mean (%u)\n"
            "  --max-blocks N       a request is cut at N blocks (%u)\n"
            "  --scan-rate F        a scan burst starts at a request, probability (%.3f)\n"
            "  --scan-len N         requests per burst (%u)\n"
            "  --scan-blocks N      fresh, never reused blocks per scan request (%u)\n"
            "  --interval MS        mean arrival gap (%u)\n"
            "  --tokens-per-block N (%u)\n",
            (unsigned long long)d.seed, (unsigned long long)d.requests, d.prefixes, d.share, d.zipf,
            d.prefix_blocks, d.reuse, d.reuse_distance, OPT_SYNTH_HISTORY, d.blocks, d.max_blocks,
            d.scan_rate, d.scan_len, d.scan_blocks, d.interval_ms, d.tokens_per_block);
    return help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}

static int s_synth(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, CLI_OPT_HELP},
        {"tokens-per-block", required_argument, NULL, CLI_OPT_TOKENS_PER_BLOCK},
        {"output", required_argument, NULL, 'o'},
        {"seed", required_argument, NULL, S_OPT_SEED},
        {"requests", required_argument, NULL, S_OPT_REQUESTS},
        {"prefixes", required_argument, NULL, S_OPT_PREFIXES},
        {"share", required_argument, NULL, S_OPT_SHARE},
        {"zipf", required_argument, NULL, S_OPT_ZIPF},
        {"prefix-blocks", required_argument, NULL, S_OPT_PREFIX_BLOCKS},
        {"reuse", required_argument, NULL, S_OPT_REUSE},
        {"reuse-distance", required_argument, NULL, S_OPT_REUSE_DISTANCE},
        {"blocks", required_argument, NULL, S_OPT_BLOCKS},
        {"max-blocks", required_argument, NULL, S_OPT_MAX_BLOCKS},
        {"scan-rate", required_argument, NULL, S_OPT_SCAN_RATE},
        {"scan-len", required_argument, NULL, S_OPT_SCAN_LEN},
        {"scan-blocks", required_argument, NULL, S_OPT_SCAN_BLOCKS},
        {"interval", required_argument, NULL, S_OPT_INTERVAL},
        {0, 0, 0, 0}};
    cli_common_t o;
    s_args_t a = {0};
    opt_synth_defaults(&a.c);
    cli_common_init(&o);
    int first = cli_parse(argc, argv, "o:", longopts, &o, s_opt, &a);
    if (first < 0 || o.help || first != argc)
        return s_usage(o.help);
    a.c.tokens_per_block = o.tokens_per_block;
    char err[256];
    if (opt_synth_check(&a.c, err, sizeof err) < 0) {
        fprintf(stderr, "kvtier trace synth: %s\n", err);
        return CLI_EXIT_USAGE;
    }
    FILE *out = a.output ? fopen(a.output, "w") : stdout;
    if (!out) {
        fprintf(stderr, "kvtier trace synth: %s: cannot write: %s\n", a.output, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    uint64_t refs = 0;
    int rc = opt_synth_write(&a.c, out, &refs, err, sizeof err);
    if (a.output && fclose(out) != 0 && rc == 0) {
        snprintf(err, sizeof err, "write error");
        rc = -1;
    }
    if (rc < 0) {
        fprintf(stderr, "kvtier trace synth: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    fprintf(stderr, "kvtier trace synth: %llu requests, %llu block references\n",
            (unsigned long long)a.c.requests, (unsigned long long)refs);
    return CLI_EXIT_OK;
}

int cli_cmd_trace(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "synth"))
        return s_synth(argc - 1, argv + 1);
    bool help = argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
    fprintf(help ? stdout : stderr, "usage: kvtier trace synth [OPTIONS]   (kvtier trace synth "
                                    "--help)\n");
    return help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}
