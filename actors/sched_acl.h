/* sched_acl.h — per-instance isolation by CURVE key (docs/SECURITY.md
 * "Isolation"), checked once per meta-plane request before its handler runs.
 * Private to actors/sched_*.c. */
#ifndef KVT_SCHED_ACL_H
#define KVT_SCHED_ACL_H

#include "sched_int.h"

/* True when the current request may run. Otherwise it has been answered
 * PERMISSION_DENIED naming the instance and the key, and the caller drops it.
 * Always true without cfg.acl_on and on the internal plane. */
bool sched_acl_allows(sched_t *self, sched_call_t *call);

#endif
