/* fuzz_trace.c — libFuzzer harness for the trace parsers: the Mooncake JSONL and
 * event-recording lines read by the optimizer (tools/optimize/opt_trace.c,
 * opt_trace_load) and by the CLI's replay (tools/kvtier/cli_trace.c,
 * cli_trace_load), both through the file path they are given. Byte 0 picks the
 * optimizer's format (auto, mooncake, events) and whether it filters one instance;
 * the rest is the file. Property: every block id of a request is below the
 * trace's distinct count. */
#include <stdint.h>
#include <stdlib.h>

#include "cli_trace.h"
#include "fuzz_util.h"
#include "opt_trace.h"

static void s_check_opt(const opt_trace_t *t)
{
    uint32_t distinct = opt_trace_distinct(t);
    for (size_t i = 0; i < opt_trace_requests(t); i++) {
        uint32_t n = 0;
        const uint32_t *b = opt_trace_blocks(t, i, &n);
        for (uint32_t k = 0; k < n; k++)
            if (b[k] >= distinct)
                abort();
        (void)opt_trace_tokens(t, i);
    }
    for (uint32_t b = 0; b < distinct; b++) {
        uint32_t inst;
        if (!opt_trace_key(t, b, &inst))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *path = fuzz_as_file(data + 1, size - 1);
    char err[512];
    opt_load_config_t cfg = {.format = (opt_format_t)(data[0] % 3u),
                             .instance = (data[0] & 4u) ? "vllm-0" : NULL};
    opt_trace_t *t = opt_trace_load(path, &cfg, err, sizeof err);
    if (t) {
        s_check_opt(t);
        opt_trace_destroy(&t);
    }
    cli_trace_t *c = cli_trace_load(path, err, sizeof err);
    if (c) {
        for (size_t i = 0; i < cli_trace_requests(c); i++) {
            size_t n = 0;
            (void)cli_trace_ids(c, i, &n);
        }
        cli_trace_destroy(&c);
    }
    return 0;
}
