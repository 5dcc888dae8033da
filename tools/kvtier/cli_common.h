/* cli_common.h — what every `kvtier` CLI command shares: the connection flags
 * (--coordinator, --etcd, -c, --cluster, --timeout, --no-shm), the instance flags
 * (--instance, --block-size, --tokens-per-block), connecting and registering, and
 * unique request ids.
 *
 * Owns: flag parsing rules and their defaults. Never keeps global state besides the
 * request-id counter; never exits the process (commands return a status). */
#ifndef KVT_CLI_COMMON_H
#define KVT_CLI_COMMON_H

#include "bus_curve.h"
#include "kvtier.h"

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The meta endpoint of deploy/default.json, used when nothing else names one. */
#define CLI_DEFAULT_COORDINATOR "tcp://127.0.0.1:7700"
#define CLI_DEFAULT_INSTANCE "demo"
#define CLI_DEFAULT_BLOCK_SIZE (64u * 1024u)
#define CLI_DEFAULT_TOKENS_PER_BLOCK 512u /* the shipped trace's block size */
#define CLI_MODEL "kvtier-demo"           /* instance spec of every CLI command */
#define CLI_DTYPE "u8"
#define CLI_MAX_BLOCK_SIZE (1ull << 30)

/* Exit statuses of commands. */
#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

/* Long-option ids shared by the commands (short ones are their letters). */
enum {
    CLI_OPT_COORDINATOR = 1000,
    CLI_OPT_ETCD,
    CLI_OPT_CLUSTER,
    CLI_OPT_TIMEOUT,
    CLI_OPT_NO_SHM,
    CLI_OPT_INSTANCE,
    CLI_OPT_BLOCK_SIZE,
    CLI_OPT_TOKENS_PER_BLOCK,
    CLI_OPT_HELP,
    CLI_OPT_CERT,
    CLI_OPT_SERVER_KEY,
    CLI_OPT_FIRST_COMMAND_OPT, /* commands number their own options from here */
};

/* clang-format off */
#define CLI_COMMON_LONGOPTS                                                    \
    {"coordinator", required_argument, NULL, CLI_OPT_COORDINATOR},             \
    {"etcd", required_argument, NULL, CLI_OPT_ETCD},                           \
    {"config", required_argument, NULL, 'c'},                                  \
    {"cluster", required_argument, NULL, CLI_OPT_CLUSTER},                     \
    {"timeout", required_argument, NULL, CLI_OPT_TIMEOUT},                     \
    {"no-shm", no_argument, NULL, CLI_OPT_NO_SHM},                             \
    {"instance", required_argument, NULL, CLI_OPT_INSTANCE},                   \
    {"block-size", required_argument, NULL, CLI_OPT_BLOCK_SIZE},               \
    {"tokens-per-block", required_argument, NULL, CLI_OPT_TOKENS_PER_BLOCK},   \
    {"help", no_argument, NULL, CLI_OPT_HELP},                                 \
    {"cert", required_argument, NULL, CLI_OPT_CERT},                           \
    {"server-key", required_argument, NULL, CLI_OPT_SERVER_KEY}
/* clang-format on */

#define CLI_COMMON_USAGE                                                                           \
    "connection (first that applies): --coordinator EP[,EP...], -c/--config DEPLOYMENT.json\n"     \
    "  (its coordinators' endpoints and cluster; its etcd.tls and CURVE server key apply too),\n"  \
    "  --etcd URLS (discovery), $KVTIER_COORDINATOR, $KVTIER_ETCD, else\n"                         \
    "  " CLI_DEFAULT_COORDINATOR ".\n"                                                             \
    "  --cluster NAME (etcd discovery, default \"kvtier\"), --timeout MS (per call, 5000),\n"      \
    "  --no-shm (frame path even on the tier's host)\n"                                            \
    "CURVE (a deployment with security.curve, docs/SECURITY.md): --cert FILE (this client's\n"     \
    "  pair, $KVTIER_CERT), --server-key FILE|Z85 ($KVTIER_SERVER_KEY; default with -c:\n"         \
    "  <keys>/server.key of the deployment)\n"                                                     \
    "instance: --instance ID (\"" CLI_DEFAULT_INSTANCE "\"), --block-size SIZE (64KiB),\n"         \
    "  --tokens-per-block N (512); registered on first use, an existing instance must match\n"

typedef struct {
    const char *coordinator;
    const char *etcd;
    const char *config;
    const char *cluster;
    uint32_t timeout_ms;
    uint32_t failover_ms; /* 0: libkvtier's default (not a flag: a command's own bound) */
    bool no_shm;
    const char *instance;
    uint64_t block_size;
    uint32_t tokens_per_block;
    bool help;
    const char *cert;       /* --cert / $KVTIER_CERT */
    const char *server_key; /* --server-key / $KVTIER_SERVER_KEY */
    /* filled by cli_connect from --config */
    char cfg_endpoint[2048]; /* the advertised endpoints of its coordinators, comma-separated */
    char cfg_cluster[64];
    char cfg_server_key[512]; /* <keys>/server.key when security.curve is on */
} cli_common_t;

void cli_common_init(cli_common_t *o);

/* Handles OPT if it is a common option: 0 handled, 1 not a common option,
 * -1 bad value (message printed). */
int cli_common_option(cli_common_t *o, int opt, const char *arg);

/* Resets getopt and parses ARGV (argv[0] = the command) with the command's
 * options LONGOPTS (which include CLI_COMMON_LONGOPTS) and SHORTOPTS; each
 * non-common option goes to ON_OPT(ctx, opt, arg) (0 ok, -1 bad). Returns the
 * index of the first operand, or -1 on bad usage (message printed). */
int cli_parse(int argc, char **argv, const char *shortopts, const struct option *longopts,
              cli_common_t *o, int (*on_opt)(void *ctx, int opt, const char *arg), void *ctx);

/* Connects as the flags say; NULL with the reason on stderr. */
kvt_client_t *cli_connect(cli_common_t *o, const char *name);

/* An etcd handle on --etcd URLS or $KVTIER_ETCD (comma-separated), calls bounded
 * by timeout_ms; NULL when neither names any (or the URLs are unusable). */
struct coord_etcd;
struct coord_etcd *cli_etcd_open(const cli_common_t *o, int timeout_ms);

/* Registers the instance of the flags (equal spec again is fine). 0 or -code,
 * message on stderr. */
int cli_register(kvt_client_t *c, const cli_common_t *o);

/* A request id unique across processes and calls: "<tag>-<pid>-<seq>-<random>". */
void cli_request_id(char *buf, size_t len, const char *tag);

/* "64KiB", "4096", "1 MiB" (bus_config_parse_size); -1 with a message naming FLAG. */
int cli_parse_size(const char *flag, const char *text, uint64_t *out);
/* A decimal integer in [MIN, MAX]; -1 with a message naming FLAG. */
int cli_parse_u64(const char *flag, const char *text, uint64_t min, uint64_t max, uint64_t *out);

/* A finite decimal number in [MIN, MAX] ("0.5", "400e12"); -1 with a message naming FLAG. */
int cli_parse_double(const char *flag, const char *text, double min, double max, double *out);

/* Prints "kvtier CMD: what: STATUS_NAME: last error" to stderr. */
void cli_report_error(const char *cmd, const char *what, kvt_client_t *c, int rc);

/* Monotonic clock in seconds. */
double cli_now(void);

/* The commands (ARGV[0] is the command name); each returns an exit status. */
int cli_cmd_status(int argc, char **argv);
int cli_cmd_lookup(int argc, char **argv);
int cli_cmd_put(int argc, char **argv);
int cli_cmd_get(int argc, char **argv);
int cli_cmd_replay(int argc, char **argv);
int cli_cmd_deployment(int argc, char **argv);
int cli_cmd_keygen(int argc, char **argv);
int cli_cmd_events(int argc, char **argv);
int cli_cmd_fault(int argc, char **argv);
int cli_cmd_optimize(int argc, char **argv);
int cli_cmd_trace(int argc, char **argv);
int cli_cmd_trim(int argc, char **argv);
int cli_cmd_remove(int argc, char **argv);
int cli_cmd_leader(int argc, char **argv);
int cli_cmd_host_claim(int argc, char **argv);
int cli_cmd_drain(int argc, char **argv);

/* This client's CURVE keys from --cert / --server-key (or their variables, or the
 * deployment's server.key): 0 with *on false when none are named, 0 with the keys
 * in *keys, or -1 (printed). For commands that open ZeroMQ sockets themselves. */
int cli_curve_keys(cli_common_t *o, bool *on, bus_curve_client_t *keys);

/* A socket of TYPE connected to EP, a CURVE client with KEYS (may be NULL) when EP
 * is tcp, accepting frames of at most BUS_MAX_BLOB bytes (ZMQ_MAXMSGSIZE: a larger
 * one drops the connection). NULL (printed, naming CMD) on failure. */
zsock_t *cli_socket(const char *cmd, const bus_curve_client_t *keys, int type, const char *ep);

#endif
