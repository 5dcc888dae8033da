/* cli.h — the `kvtier` command-line client: status, lookup, put, get, replay.
 * Talks to the service through libkvtier only (client/kvtier.h). */
#ifndef KVT_CLI_H
#define KVT_CLI_H

/* ARGV as main() got it: argv[0] the program, argv[1] the command ("status",
 * "lookup", "put", "get", "replay", "help"). Returns the process exit status:
 * 0 success, 1 failure (or verify failures for replay), 2 bad usage. */
int cli_main(int argc, char **argv);

#endif
