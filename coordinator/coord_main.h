/* coord_main.h — the two service process mains (DESIGN.md §3), reached through
 * `kvtier coordinator ...` and `kvtier tier ...` (tools/kvtier/kvtier_main.c).
 *
 * ARGV starts at the subcommand: argv[0] is "coordinator" / "tier", options follow.
 * Both run until SIGINT or SIGTERM, then leave etcd clean (their lease revoked, so
 * their keys vanish at once) and return 0. Exit codes: 0 clean stop (or --help),
 * 1 a runtime failure (cannot bind, tier does not open, an actor does not start:
 * stderr names it, ...), 2 bad usage or a bad deployment file (the message names
 * the key path). */
#ifndef KVT_COORD_MAIN_H
#define KVT_COORD_MAIN_H

/* kvtier coordinator -c FILE [--etcd URLS] [--name NAME] [--endpoint EP]
 *   -c, --config FILE   the deployment file
 *   --etcd URLS         comma-separated etcd URLs (overrides etcd.endpoints)
 *   --name NAME         this coordinator's name in etcd (default <hostname>-<pid>)
 *   --endpoint EP       meta endpoint to bind and advertise (default
 *                       coordinator.endpoint). "tcp://127.0.0.1:*" picks a port
 *                       once at start; the scheduler and the standby then take
 *                       turns on it, so another process on the host that binds
 *                       "*" in the instant between them could take it (czmq
 *                       hands out 49152.. in order): give every coordinator a
 *                       fixed port in a real deployment.
 * Registers /kvtier/<cluster>/coordinators/<name>, campaigns for
 * /kvtier/<cluster>/leader; as leader runs the scheduler actor on the meta
 * endpoint and feeds it tier membership from etcd; otherwise answers there as a
 * standby (ClusterInfo, NOT_LEADER + the leader's endpoint). */
int coord_main(int argc, char **argv);

/* kvtier tier -c FILE --name TIER [--etcd URLS]
 *   -c, --config FILE   the deployment file
 *   --name TIER         which entry of "tiers" to run
 *   --etcd URLS         comma-separated etcd URLs (overrides etcd.endpoints)
 * Opens the tier and serves it with the tier actor on the tier's endpoint, and
 * registers /kvtier/<cluster>/tiers/<TIER> (the coord_membership.h record) under
 * a lease kept alive; when the lease is lost it registers again with a new one. */
int coord_tier_main(int argc, char **argv);

#endif
