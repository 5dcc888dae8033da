/* cli_optimize.c — `kvtier optimize INPUT`: what another capacity or policy would
 * give, from a trace (traces/README.md) or an event recording (`kvtier events`
 * lines). Prints the table (tools/optimize/opt_report.h), writes CSV / JSON when
 * asked and the plot unless --no-plot (a missing gnuplot is reported, the rest
 * still printed). docs/OPTIMIZER.md describes every figure.
 *
 * Owns: flag parsing only; the figures are tools/optimize's. Exit 0, 1 when the
 * input cannot be read or an output cannot be written, 2 on bad usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "cli_optimize_live.h"
#include "opt_report.h"
#include "opt_trace.h"
#include "tier_policy.h"

#define S_DEFAULT_PLOT "kvtier-optimize"

enum {
    S_OPT_FORMAT = CLI_OPT_FIRST_COMMAND_OPT,
    S_OPT_CAPACITIES,
    S_OPT_CAPACITY,
    S_OPT_CHAIN,
    S_OPT_CHAIN_POLICY,
    S_OPT_CHAIN_PLACEMENT,
    S_OPT_NO_BELADY,
    S_OPT_NO_ARC,
    S_OPT_NO_POLICIES,
    S_OPT_CSV,
    S_OPT_JSON,
    S_OPT_PLOT,
    S_OPT_NO_PLOT,
    S_OPT_MAX_REFS,
    S_OPT_PARAMS,
    S_OPT_GPU_FLOPS,
    S_OPT_FLOPS_PER_TOKEN,
    S_OPT_BLOCK_BYTES,
    S_OPT_HOST_BW,
    S_OPT_NVME_BW,
    S_OPT_SUBSCRIBE,
    S_OPT_INSTANCE,
    S_OPT_ENDPOINT,
    S_OPT_EVERY,
    S_OPT_FOR,
    S_OPT_WINDOW,
    S_OPT_PUBLISH,
};

typedef struct {
    opt_load_config_t load;
    opt_run_config_t run;
    const char *csv, *json, *plot;
    bool no_plot;
    char chain_policy[2][136];
    bool subscribe;
    cli_live_args_t live;
} s_args_t;

/* "A,B,C" of capacities into the run's table. */
static int s_parse_list(const char *flag, const char *text, uint64_t *out, size_t max, size_t *n)
{
    char buf[1024];
    if (strlen(text) >= sizeof buf) {
        fprintf(stderr, "kvtier optimize: %s: list too long\n", flag);
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", text);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (*n == max) {
            fprintf(stderr, "kvtier optimize: %s: at most %zu values\n", flag, max);
            return -1;
        }
        if (cli_parse_u64(flag, tok, 1, OPT_MAX_CAPACITY, &out[(*n)++]) < 0)
            return -1;
    }
    if (*n == 0) {
        fprintf(stderr, "kvtier optimize: %s: empty list\n", flag);
        return -1;
    }
    return 0;
}

static int s_parse_chain_policy(s_args_t *a, const char *text)
{
    char buf[130];
    snprintf(buf, sizeof buf, "%s", text);
    char *comma = strchr(buf, ',');
    if (comma)
        *comma = '\0';
    snprintf(a->chain_policy[0], sizeof a->chain_policy[0], "%s", buf);
    snprintf(a->chain_policy[1], sizeof a->chain_policy[1], "%s", comma ? comma + 1 : buf);
    for (int l = 0; l < 2; l++) {
        if (!tier_policy_find(a->chain_policy[l])) {
            fprintf(stderr, "kvtier optimize: --chain-policy: unknown policy \"%s\" (known:",
                    a->chain_policy[l]);
            for (size_t i = 0; i < tier_policy_count(); i++)
                fprintf(stderr, " %s", tier_policy_at(i)->name);
            fprintf(stderr, ")\n");
            return -1;
        }
        a->run.chain_cfg.policy[l] = a->chain_policy[l];
    }
    return 0;
}

static int s_parse_format(s_args_t *a, const char *arg)
{
    if (!strcmp(arg, "auto"))
        a->load.format = OPT_FORMAT_AUTO;
    else if (!strcmp(arg, "trace") || !strcmp(arg, "mooncake"))
        a->load.format = OPT_FORMAT_MOONCAKE;
    else if (!strcmp(arg, "events"))
        a->load.format = OPT_FORMAT_EVENTS;
    else {
        fprintf(stderr, "kvtier optimize: --format: auto, trace or events, not \"%s\"\n", arg);
        return -1;
    }
    return 0;
}

static int s_bw(const char *flag, const char *arg, double *out)
{
    double gbs;
    if (cli_parse_double(flag, arg, 1e-6, 1e6, &gbs) < 0)
        return -1;
    *out = gbs * 1e9;
    return 0;
}

static int s_opt_model(s_args_t *a, int opt, const char *arg)
{
    opt_ttft_model_t *m = &a->run.ttft;
    uint64_t v;
    switch (opt) {
    case S_OPT_PARAMS:
        return cli_parse_double("--params", arg, 1e3, 1e15, &m->params);
    case S_OPT_GPU_FLOPS:
        return cli_parse_double("--gpu-flops", arg, 1e6, 1e20, &m->gpu_flops);
    case S_OPT_FLOPS_PER_TOKEN:
        return cli_parse_double("--flops-per-token", arg, 1, 1e18, &m->flops_per_token);
    case S_OPT_BLOCK_BYTES:
        if (cli_parse_size("--block-bytes", arg, &v) < 0)
            return -1;
        if (v == 0 || v > (1ull << 40)) {
            fprintf(stderr, "kvtier optimize: --block-bytes: 1 B .. 1 TiB\n");
            return -1;
        }
        m->block_bytes = (double)v;
        return 0;
    case S_OPT_HOST_BW:
        return s_bw("--host-bw", arg, &m->bw[0]);
    case S_OPT_NVME_BW:
        return s_bw("--nvme-bw", arg, &m->bw[1]);
    default:
        return -1;
    }
}

static int s_opt(void *ctx, int opt, const char *arg)
{
    s_args_t *a = ctx;
    uint64_t caps[2];
    size_t n = 0;
    switch (opt) {
    case S_OPT_FORMAT:
        return s_parse_format(a, arg);
    case S_OPT_CAPACITIES:
        return s_parse_list("--capacities", arg, a->run.capacities, OPT_MAX_CAPACITIES,
                            &a->run.n_capacities);
    case S_OPT_CAPACITY:
        return cli_parse_u64("--capacity", arg, 1, OPT_MAX_CAPACITY, &a->run.point);
    case S_OPT_CHAIN:
        if (s_parse_list("--chain", arg, caps, 2, &n) < 0)
            return -1;
        if (n != 2) {
            fprintf(stderr, "kvtier optimize: --chain: expected HOST,NVME capacities\n");
            return -1;
        }
        a->run.chain = true;
        a->run.chain_cfg.capacity[0] = caps[0];
        a->run.chain_cfg.capacity[1] = caps[1];
        return 0;
    case S_OPT_CHAIN_POLICY:
        return s_parse_chain_policy(a, arg);
    case S_OPT_CHAIN_PLACEMENT:
        if (strcmp(arg, "exclusive") != 0 && strcmp(arg, "inclusive") != 0) {
            fprintf(stderr,
                    "kvtier optimize: --chain-placement: \"%s\" is neither \"exclusive\" nor "
                    "\"inclusive\" (a deployment's chains[i].placement)\n",
                    arg);
            return -1;
        }
        a->run.chain_cfg.inclusive = strcmp(arg, "inclusive") == 0;
        return 0;
    case S_OPT_NO_BELADY:
        a->run.no_belady = true;
        return 0;
    case S_OPT_NO_ARC:
        a->run.no_arc = true;
        return 0;
    case S_OPT_NO_POLICIES:
        a->run.no_policies = true;
        return 0;
    case S_OPT_CSV:
        a->csv = arg;
        return 0;
    case S_OPT_JSON:
        a->json = arg;
        return 0;
    case S_OPT_PLOT:
        a->plot = arg;
        return 0;
    case S_OPT_NO_PLOT:
        a->no_plot = true;
        return 0;
    case S_OPT_MAX_REFS:
        return cli_parse_u64("--max-refs", arg, 1, OPT_TRACE_LIMIT_MAX_REFS, &a->load.max_refs);
    case S_OPT_INSTANCE:
        if (!arg[0]) {
            fprintf(stderr, "kvtier optimize: --instance: empty id\n");
            return -1;
        }
        a->load.instance = arg;
        return 0;
    case S_OPT_SUBSCRIBE:
        a->subscribe = true;
        return 0;
    case S_OPT_ENDPOINT:
        a->live.endpoint = arg;
        return arg[0] ? 0 : -1;
    case S_OPT_EVERY:
        if (cli_parse_u64("--every", arg, 1, 86400, &a->live.every_ms) < 0)
            return -1;
        a->live.every_ms *= 1000;
        return 0;
    case S_OPT_FOR:
        if (cli_parse_u64("--for", arg, 1, 30 * 86400, &a->live.for_ms) < 0)
            return -1;
        a->live.for_ms *= 1000;
        return 0;
    case S_OPT_WINDOW:
        return cli_parse_u64("--window", arg, 1, CLI_LIVE_MAX_WINDOW, &a->live.window_refs);
    case S_OPT_PUBLISH:
        a->live.publish = true;
        return 0;
    default:
        return s_opt_model(a, opt, arg);
    }
}

static int s_usage(bool help)
{
    fprintf(help ? stdout : stderr,
            "usage: kvtier optimize INPUT [--format auto|trace|events] [--capacities LIST]\n"
            "                       [--capacity N] [--chain HOST,NVME] [--chain-policy P[,P]]\n"
            "                       [--chain-placement exclusive|inclusive]\n"
            "                       [--csv FILE] [--json FILE] [--plot PREFIX | --no-plot]\n"
            "  INPUT: a trace (traces/README.md format) or an event recording (the JSON lines\n"
            "  of `kvtier events`; its \"lookup\" lines are the requests); docs/OPTIMIZER.md\n"
            "  --format F          how to read INPUT (default auto: by its first line)\n"
            "  --instance ID       a recording: only the lookups of instance ID\n"
            "  --capacities LIST   table rows, blocks (default 100,300,1000,3000,10000,30000,\n"
            "                      100000; those below the distinct blocks, then unbounded)\n"
            "  --capacity N        the deployment's capacity: marked in the table and plot,\n"
            "                      and the LRU TTFT row (default: unbounded)\n"
            "  --chain HOST,NVME   also replay a host -> nvme chain (service's rules)\n"
            "  --chain-policy P[,P] the chain's policies (default lru,lru)\n"
            "  --chain-placement exclusive|inclusive  a promoted block moves to the host\n"
            "                      (default, as a deployment's chains) or keeps its nvme copy\n"
            "  --no-belady, --no-arc, --no-policies   leave those columns out\n"
            "  --csv FILE, --json FILE   the table (JSON: also the whole curve and TTFT)\n"
            "  --plot PREFIX       PREFIX.png and PREFIX.svg via gnuplot (default "
            "./" S_DEFAULT_PLOT ")\n"
            "  --no-plot           no plot\n"
            "  --max-refs N        refuse inputs with more block references (default %u;\n"
            "                      about 40 bytes each)\n"
            "  --tokens-per-block N  tokens of a block (512), for requests without input_length\n"
            "TTFT model: --params N (8e9), --gpu-flops F (400e12, effective), --flops-per-token F\n"
            "  (2 x params), --block-bytes SIZE (128 KiB per token x tokens per block),\n"
            "  --host-bw GB/s (5.97), --nvme-bw GB/s (2.34)\n"
            "live: kvtier optimize --subscribe [--capacity N] [--window REFS] [--every S]\n"
            "  [--for S] [--endpoint EP] [--instance ID] [connection flags, --cert,\n"
            "  --server-key]: every S seconds\n"
            "  (10) the service's hit rate over the last lookups holding REFS references\n"
            "  (%u), next to LRU and the Belady reference at N (default: all the tiers'\n"
            "  capacity) over the same requests (retrospective); until --for S or SIGINT\n"
            "  --publish: also write each figure to etcd (/kvtier/<cluster>/optimizer, needs\n"
            "  --etcd or $KVTIER_ETCD), for the metrics, the status page and kvtier status;\n"
            "  waits for the leader instead of failing (deploy/supervise runs it so)\n"
            "exit 0, 1 when the input cannot be read or an output written, 2 on bad usage\n",
            (unsigned)OPT_TRACE_DEFAULT_MAX_REFS, (unsigned)CLI_LIVE_DEFAULT_WINDOW);
    return help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}

static int s_outputs(const opt_report_t *rep, const s_args_t *a)
{
    char err[512];
    int status = CLI_EXIT_OK;
    if (a->csv && opt_report_csv(rep, a->csv, err, sizeof err) < 0) {
        fprintf(stderr, "kvtier optimize: %s\n", err);
        status = CLI_EXIT_FAIL;
    }
    if (a->json && opt_report_json(rep, a->json, err, sizeof err) < 0) {
        fprintf(stderr, "kvtier optimize: %s\n", err);
        status = CLI_EXIT_FAIL;
    }
    if (!a->no_plot) {
        const char *prefix = a->plot ? a->plot : S_DEFAULT_PLOT;
        int rc = opt_report_plot(rep, prefix, err, sizeof err);
        if (rc == 0)
            printf("\nplot: %s.png, %s.svg\n", prefix, prefix);
        else
            fprintf(stderr, "kvtier optimize: plot: %s\n", err);
        if (rc < 0)
            status = CLI_EXIT_FAIL;
    }
    return status;
}

int cli_cmd_optimize(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, CLI_OPT_HELP},
        {"tokens-per-block", required_argument, NULL, CLI_OPT_TOKENS_PER_BLOCK},
        {"format", required_argument, NULL, S_OPT_FORMAT},
        {"capacities", required_argument, NULL, S_OPT_CAPACITIES},
        {"capacity", required_argument, NULL, S_OPT_CAPACITY},
        {"chain", required_argument, NULL, S_OPT_CHAIN},
        {"chain-policy", required_argument, NULL, S_OPT_CHAIN_POLICY},
        {"chain-placement", required_argument, NULL, S_OPT_CHAIN_PLACEMENT},
        {"no-belady", no_argument, NULL, S_OPT_NO_BELADY},
        {"no-arc", no_argument, NULL, S_OPT_NO_ARC},
        {"no-policies", no_argument, NULL, S_OPT_NO_POLICIES},
        {"csv", required_argument, NULL, S_OPT_CSV},
        {"json", required_argument, NULL, S_OPT_JSON},
        {"plot", required_argument, NULL, S_OPT_PLOT},
        {"no-plot", no_argument, NULL, S_OPT_NO_PLOT},
        {"max-refs", required_argument, NULL, S_OPT_MAX_REFS},
        {"params", required_argument, NULL, S_OPT_PARAMS},
        {"gpu-flops", required_argument, NULL, S_OPT_GPU_FLOPS},
        {"flops-per-token", required_argument, NULL, S_OPT_FLOPS_PER_TOKEN},
        {"block-bytes", required_argument, NULL, S_OPT_BLOCK_BYTES},
        {"host-bw", required_argument, NULL, S_OPT_HOST_BW},
        {"nvme-bw", required_argument, NULL, S_OPT_NVME_BW},
        {"subscribe", no_argument, NULL, S_OPT_SUBSCRIBE},
        {"endpoint", required_argument, NULL, S_OPT_ENDPOINT},
        {"every", required_argument, NULL, S_OPT_EVERY},
        {"for", required_argument, NULL, S_OPT_FOR},
        {"window", required_argument, NULL, S_OPT_WINDOW},
        {"publish", no_argument, NULL, S_OPT_PUBLISH},
        {"coordinator", required_argument, NULL, CLI_OPT_COORDINATOR},
        {"etcd", required_argument, NULL, CLI_OPT_ETCD},
        {"config", required_argument, NULL, 'c'},
        {"cluster", required_argument, NULL, CLI_OPT_CLUSTER},
        {"timeout", required_argument, NULL, CLI_OPT_TIMEOUT},
        {"cert", required_argument, NULL, CLI_OPT_CERT},
        {"server-key", required_argument, NULL, CLI_OPT_SERVER_KEY},
        {"instance", required_argument, NULL, S_OPT_INSTANCE},
        {0, 0, 0, 0}};
    cli_common_t o;
    s_args_t a;
    memset(&a, 0, sizeof a);
    opt_run_defaults(&a.run);
    cli_common_init(&o);
    a.live.window_refs = CLI_LIVE_DEFAULT_WINDOW;
    a.live.every_ms = CLI_LIVE_DEFAULT_EVERY_MS;
    int first = cli_parse(argc, argv, "c:", longopts, &o, s_opt, &a);
    if (first < 0 || o.help || first != argc - (a.subscribe ? 0 : 1))
        return s_usage(o.help);
    if (a.subscribe) {
        a.live.instance = a.load.instance;
        a.live.capacity = a.run.point;
        a.live.tokens_per_block = o.tokens_per_block;
        return cli_optimize_live(&o, &a.live);
    }
    a.load.tokens_per_block = o.tokens_per_block;
    char err[700];
    double t0 = cli_now();
    opt_trace_t *t = opt_trace_load(argv[first], &a.load, err, sizeof err);
    double secs_load = cli_now() - t0;
    if (!t) {
        fprintf(stderr, "kvtier optimize: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    opt_report_t *rep = malloc(sizeof *rep);
    int status = CLI_EXIT_FAIL;
    if (!rep || opt_report_run(t, argv[first], &a.run, rep, err, sizeof err) < 0) {
        fprintf(stderr, "kvtier optimize: %s\n", rep ? err : "out of memory");
        goto out;
    }
    rep->secs_load = secs_load;
    opt_report_table(rep, stdout);
    fflush(stdout);
    status = s_outputs(rep, &a);
    opt_report_fini(rep);
out:
    free(rep);
    opt_trace_destroy(&t);
    return status;
}
