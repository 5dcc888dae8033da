/* bus_fault_admin.h — turning faults on and off in a running process
 * (docs/RELIABILITY.md "Faults", docs/OPERATIONS.md): the deployment file's
 * `faults` section, and a per-process admin socket that sets, clears and shows
 * the rules of bus_fault.h.
 *
 * The admin socket exists only in a process whose config has faults.enabled:
 * true. It is ipc://DIR/PROCESS.sock (DIR is faults.dir, else
 * $KVTIER_RUN_DIR/faults), a REP socket speaking one JSON object per message:
 *   {"op":"set","point":"nvme.read","action":"flip","rate":"1/10000"}
 *   {"op":"clear"}  {"op":"clear","point":"nvme.read"}  {"op":"show"}
 * answered with {"ok":true,"process":...,"points":[{"point","rule","hits",
 * "injected"}...]} or {"ok":false,"code":"INVALID_ARGUMENT","error":"..."}.
 *
 * Who may use it: only this service's user. DIR is created 0700 and must be
 * owned by this user and writable by no one else (else the socket is refused),
 * the socket file is 0600, and the kernel's peer credentials (SO_PEERCRED,
 * ZMQ_IPC_FILTER_UID) admit only connections of this process's effective uid.
 * It never depends on the cluster secret or CURVE keys. */
#ifndef KVT_BUS_FAULT_ADMIN_H
#define KVT_BUS_FAULT_ADMIN_H

#include <czmq.h>

#include "bus_config.h"
#include "bus_fault.h"

#define BUS_FAULT_ADMIN_MAX 4096 /* bytes of a request or reply */
#define BUS_FAULT_ENV_RUN_DIR "KVTIER_RUN_DIR"

/* Reads the optional `faults` object of a deployment file:
 *   "faults": {"enabled": false, "dir": "/run/kvtier/faults",
 *              "points": [{"point": "nvme.read", "action": "error:EIO",
 *                          "rate": "1/1000", "process": "tier-nvme0"}]}
 * Absent: disabled. Rules given while enabled is false are refused (a file that
 * lists faults it would not inject misleads). 0 or BUS_CONFIG_EINVALID with the
 * key's path in err. */
int bus_fault_config_read(const bus_config_node_t *root, bus_fault_config_t *out, char *err,
                          size_t errlen);

/* The socket directory a config names: faults.dir, else $KVTIER_RUN_DIR/faults.
 * -ENOENT when neither is set. */
int bus_fault_admin_dir(const bus_fault_config_t *cfg, char *out, size_t outlen);

/* For a process named `process` ("coordinator", "tier-nvme0"): nothing when
 * faults are off; else bus_fault_enable, the config's rules for this process
 * (or for every process), and the admin actor (*admin; destroy it with
 * zactor_destroy). 0, or a negative errno with a message for a person in err. */
int bus_fault_start(const bus_fault_config_t *cfg, const char *process, zactor_t **admin, char *err,
                    size_t errlen);

/* Answers one admin request (the JSON above) into out. Always fills out. */
void bus_fault_admin_handle(const char *process, const char *req, size_t len, char *out,
                            size_t outlen);

/* Client side (kvtier fault): sends req to the socket file at path and waits at
 * most timeout_ms for the answer (into out, NUL-terminated). 0, or -ENOENT (no
 * such socket: faults off in that process, or not running), -ETIMEDOUT, -EIO,
 * with a message in err. */
int bus_fault_admin_call(const char *path, const char *req, int timeout_ms, char *out,
                         size_t outlen, char *err, size_t errlen);

#endif
