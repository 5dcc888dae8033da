#!/usr/bin/python3
"""check.py — the soak's history checker (tests/soak/run; docs/RELIABILITY.md "Soak").

  check.py DIR [--margin-rss-mib M] [--margin-fds N]

Reads what a soak run left in DIR: the clients' histories (hist-*.jsonl, see
client.py), the event stream recorded by `kvtier events --record` (events.jsonl and
its summary line in events.err), the chaos log (chaos.log: one JSON line per action)
and the resource samples (samples.jsonl). It proves, or fails with the first cases:

 1. No load returned bytes other than the block's own (every hit checked by the
    client against the key's pattern).
 2. Every acknowledged block that later missed was reported gone first: between its
    acknowledgement and the miss (1 s of slack either side) the event stream removed
    it from the last tier it was on, or took down a non-persistent tier it was on
    (a persistent (nvme) tier's down explains it only while that tier is down, or
    within REBUILD_S of its coming back up if not adopted again since), or a new leader's
    term began and had not adopted it again before the miss (within REBUILD_S of the
    term's start), or the chaos log killed the process of the non-persistent (host)
    tier it was on. "The tier it was on" follows the moves: a BlockMoved takes the
    block off its source tier and puts it on its destination, in either direction —
    a demotion, or an exclusive chain's promotion (reason PROMOTED), which takes a
    block off nvme: from then on it is no longer persistent, and a host kill or a
    host eviction explains its miss. Any other miss is a loss. A load of it that failed (not a miss)
    must have a kill, stop or fault within ERR_WINDOW_S before it, or one of those
    explanations; else the index and the tiers disagreed. The recorder must report no
    gap it could not fill.
 3. No call was answered INVALID_ARGUMENT: the clients send valid calls only, so
    one means the service misjudged a resend or a window across a failure.
 4. After warm-up, each process's RSS and open file count in the last third of the
    run stay within the maximum of the middle third plus a margin (a memory bound,
    not a timing one).
Prints a report (one "name: value" per line) and writes DIR/report.json. Exit 0 when
every rule holds, 1 otherwise.
"""
import argparse
import glob
import json
import os
import re
import sys

SLACK_S = 1.0
ERR_WINDOW_S = 10.0  # a stopped or killed process can fail calls until it is back
REBUILD_S = 20.0
PERSISTENT = {"nvme"}


def jsonl(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a line cut by a kill -9: the client lost only that one
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dir")
    p.add_argument("--margin-rss-mib", type=float, default=32)
    p.add_argument("--margin-fds", type=int, default=32)
    a = p.parse_args()
    d = a.dir
    fails = []
    rep = {}

    # ---- histories ----
    acked = {}  # key -> ack time
    gets = []
    puts = put_acked = 0
    reconnects = {}  # status -> handles rebuilt after it
    errors = {}  # status -> failed operations
    for path in sorted(glob.glob(os.path.join(d, "hist-*.jsonl"))):
        for r in jsonl(path):
            if r.get("op") == "put":
                puts += 1
                if r.get("ack"):
                    put_acked += 1
                    for k in r["keys"]:
                        acked.setdefault(k, r["t"])
            elif r.get("op") == "get":
                gets.append(r)
            elif r.get("op") == "reconnect":
                reconnects[r.get("why")] = reconnects.get(r.get("why"), 0) + 1
            if r.get("err"):  # "STATUS: message", or "job JobResult(..., status=STATUS, ...)"
                m = re.search(r"status=([A-Z_]+)", r["err"])
                st = m.group(1) if m else r["err"].split(":", 1)[0]
                errors[st] = errors.get(st, 0) + 1
    hits = [g for g in gets if g["res"] == "hit"]
    wrong = [g for g in hits if not g["ok"]]
    rep.update(puts=puts, puts_acknowledged=put_acked, blocks_acknowledged=len(acked),
               loads=len(gets), loads_checked=len(hits),
               misses=sum(1 for g in gets if g["res"] == "miss"),
               load_errors=sum(1 for g in gets if g["res"] == "err"), wrong_bytes=len(wrong))
    for g in wrong[:5]:
        fails.append("WRONG BYTES: key %s at %.3f (sha %s)" % (g["key"], g["t"], g.get("sum")))

    # ---- events ----
    events = jsonl(os.path.join(d, "events.jsonl"))
    tier_kind = {}
    per_key = {}
    tier_events = []  # (t, tier, up)
    terms = []  # start times of leader terms
    for e in events:
        t = e.get("ts_us", 0) / 1e6
        kind = e.get("kind")
        if kind == "tier":
            tier_events.append((t, e["tier"], e["up"]))
            tier_kind[e["tier"]] = e.get("name", "")
        elif kind == "leader":
            terms.append(t)
        elif kind in ("stored", "removed", "moved"):
            for k in e.get("keys", []):
                per_key.setdefault(k, []).append((t, e))
    rep["events"] = len(events)
    rep["leader_terms"] = len(terms)
    rep["client_reconnects"] = reconnects
    rep["client_errors"] = errors
    # the clients send only well-formed calls in order: an INVALID_ARGUMENT means the
    # service misjudged a resend or a window across a failure
    if errors.get("INVALID_ARGUMENT"):
        fails.append("%d calls were answered INVALID_ARGUMENT (the clients' calls are valid)" %
                     errors["INVALID_ARGUMENT"])
    # moves off a persistent tier (an exclusive promotion nvme -> host): those
    # blocks count as non-persistent from the move on (on_tiers follows them)
    persistent = {tid for tid, name in tier_kind.items()
                  if any(name.startswith(p) for p in PERSISTENT)}
    rep["moved_off_persistent"] = sum(
        len(e.get("keys", [])) for e in events
        if e.get("kind") == "moved" and e.get("from") in persistent and e.get("to") not in persistent)
    summary = ""
    if os.path.exists(os.path.join(d, "events.err")):
        with open(os.path.join(d, "events.err")) as f:
            lines = [ln for ln in f if ln.startswith("events:")]
            summary = lines[-1].strip() if lines else ""
    m = re.search(r"(\d+) gaps \((\d+) missing\)(?:, (\d+) terms lost)?", summary)
    rep["event_gaps"], rep["event_missing"] = (int(m.group(1)), int(m.group(2))) if m else (-1, -1)
    rep["event_terms_lost"] = int(m.group(3) or 0) if m else -1
    if not m:
        fails.append("the event recorder printed no summary: %r" % summary)
    elif rep["event_missing"]:
        fails.append("the event stream lost %d batches no replay could fill" % rep["event_missing"])
    # a whole term the recorder never saw (its LeaderChanged's previous_epoch is
    # newer than the term before it): its removals are unknown, so misses would be
    # judged against a wrong history — a recorder defect, reported as itself
    if rep["event_terms_lost"] > 0:
        fails.append("the event stream lost %d whole leader terms (kvtier events said which)" %
                     rep["event_terms_lost"])

    chaos = jsonl(os.path.join(d, "chaos.log"))
    # kills of a non-persistent tier's process: (time, tier id) — the id from the
    # tier events' names ("tier-host0" is tier "host0")
    tier_id = {name: tid for tid, name in tier_kind.items()}
    host_kills = [(c["t"], tier_id.get(c["name"][len("tier-"):]))
                  for c in chaos if c.get("action") == "kill" and c.get("name", "").startswith("tier-")
                  and not c["name"].startswith("tier-nvme")]

    def on_tiers(k, t):
        """Tiers the events put key k on just before time t (unknown: None)."""
        where = None
        for (te, e) in per_key.get(k, []):
            if te > t:
                break
            kind = e["kind"]
            where = set() if where is None else where
            if kind == "stored":
                where.add(e["tier"])
            elif kind == "moved":
                where.discard(e["from"])
                where.add(e["to"])
            elif kind == "removed":
                where.discard(e["tier"])
        return where

    def explained(k, ta, tm):
        lo, hi = ta - SLACK_S, tm + SLACK_S
        for (te, e) in per_key.get(k, []):
            # a removal that left the block on no tier (not one of two copies)
            if lo < te <= hi and e["kind"] == "removed" and not on_tiers(k, te):
                return "removed"
        for (te, tier, up) in tier_events:
            if lo < te <= hi and not up:
                where = on_tiers(k, te)
                if where is not None and tier not in where:
                    continue
                if tier not in persistent:
                    return "tier down"  # its process died: its memory is gone
                # a persistent tier keeps its blocks across a restart: its down
                # explains a miss while it is down, or until REBUILD_S after it came
                # back up and only if the block was not adopted again since then
                ups = [tu for (tu, t2, u2) in tier_events if t2 == tier and u2 and tu > te]
                tu = min(ups) if ups else None
                if tu is None or tm < tu + SLACK_S:
                    return "persistent tier down"
                if tm <= tu + REBUILD_S:
                    again = [t2 for (t2, e) in per_key.get(k, [])
                             if e["kind"] == "stored" and tu <= t2 < tm - SLACK_S]
                    if not again:
                        return "persistent tier rebuilding"
        for ts in terms:
            if lo < ts <= hi and tm <= ts + REBUILD_S:
                again = [te for (te, e) in per_key.get(k, []) if e["kind"] == "stored" and ts <= te < tm - SLACK_S]
                if not again:
                    return "new term"
        for (tk, tid) in host_kills:
            if lo < tk <= hi:
                where = on_tiers(k, tk)
                if where is None or tid is None or tid in where:
                    return "host tier killed"
        return None

    losses = []
    why = {}
    for g in gets:
        if g["res"] != "miss" or g["key"] not in acked:
            continue
        ta = acked[g["key"]]
        if g["t"] < ta:
            continue
        r = explained(g["key"], ta, g["t"])
        if r:
            why[r] = why.get(r, 0) + 1
        else:
            losses.append(g)
    rep["misses_explained"] = why
    rep["losses"] = len(losses)
    # a load that failed (not a miss) is the chaos's doing only when the chaos acted
    # around it (a kill, a stop or a fault within ERR_WINDOW_S before it) or the block
    # was reported gone; otherwise the index and the tiers disagree: a violation
    acts = sorted(c["t"] for c in chaos if c.get("action") in ("kill", "stop", "fault"))
    bad_err = []
    err_why = {}
    for g in gets:
        if g["res"] != "err" or g["key"] not in acked or g["t"] < acked[g["key"]]:
            continue
        near = any(g["t"] - ERR_WINDOW_S <= t <= g["t"] + SLACK_S for t in acts)
        r = "chaos" if near else explained(g["key"], acked[g["key"]], g["t"])
        if r:
            err_why[r] = err_why.get(r, 0) + 1
        else:
            bad_err.append(g)
    rep["load_errors_explained"] = err_why
    rep["load_errors_unexplained"] = len(bad_err)
    for g in bad_err[:5]:
        fails.append("UNEXPLAINED LOAD ERROR: key %s at %.3f: %s" % (g["key"], g["t"], g.get("err")))
    for g in losses[:5]:
        hist = [(round(te, 3), e["kind"], e.get("tier", e.get("to"))) for (te, e) in per_key.get(g["key"], [])]
        fails.append("LOSS: key %s acknowledged at %.3f missed at %.3f, events %s" %
                     (g["key"], acked[g["key"]], g["t"], hist))

    # ---- chaos ----
    for act in ("kill", "stop", "fault", "fault_refused"):
        rep["chaos_" + act] = sum(1 for c in chaos if c.get("action") == act)
    if rep["chaos_fault_refused"] > 3 and rep["chaos_fault_refused"] > rep["chaos_fault"]:
        fails.append("most fault rules were refused (%d of %d): the soak injected no faults" %
                     (rep["chaos_fault_refused"], rep["chaos_fault_refused"] + rep["chaos_fault"]))
    rep["processes_killed"] = sorted({c["name"] for c in chaos if c.get("action") == "kill"})
    rep["fault_rules"] = sorted({"%s %s" % (c["name"], c.get("point")) for c in chaos
                                 if c.get("action") == "fault"})

    def injected(j):
        if isinstance(j, dict):
            return sum(v if k == "injected" and isinstance(v, int) else injected(v)
                       for k, v in j.items())
        if isinstance(j, list):
            return sum(injected(v) for v in j)
        return 0
    n = 0
    for path in glob.glob(os.path.join(d, "faults-*.json")):
        try:
            with open(path) as f:
                n += injected(json.load(f))
        except ValueError:
            pass  # a process that was down at the end answered nothing
    rep["faults_injected_last_incarnations"] = n

    # ---- resources ----
    samples = jsonl(os.path.join(d, "samples.jsonl"))
    trends = {}
    if samples:
        t0, t1 = samples[0]["t"], samples[-1]["t"]
        third = (t1 - t0) / 3
        # the coordinators are one series: which of them leads (a leader holds the
        # scheduler's sockets and memory, a standby little) moves between them, so
        # each alone would show a standby's middle third against a leader's last
        def series(n):
            return "coordinators" if n.startswith("coordinator-") else n
        for name in sorted({series(s["name"]) for s in samples}):
            mid = [s for s in samples
                   if series(s["name"]) == name and t0 + third <= s["t"] < t0 + 2 * third]
            last = [s for s in samples if series(s["name"]) == name and s["t"] >= t0 + 2 * third]
            if not mid or not last:
                continue
            tr = {"rss_mid_max_kb": max(s["rss_kb"] for s in mid),
                  "rss_last_max_kb": max(s["rss_kb"] for s in last),
                  "fds_mid_max": max(s["fds"] for s in mid),
                  "fds_last_max": max(s["fds"] for s in last)}
            trends[name] = tr
            if tr["rss_last_max_kb"] > tr["rss_mid_max_kb"] + a.margin_rss_mib * 1024:
                fails.append("RSS of %s grew: %s" % (name, tr))
            if tr["fds_last_max"] > tr["fds_mid_max"] + a.margin_fds:
                fails.append("open files of %s grew: %s" % (name, tr))
    rep["resources"] = trends
    rep["margins"] = {"rss_mib": a.margin_rss_mib, "fds": a.margin_fds}
    if not hits:
        fails.append("no load was checked: the soak proved nothing")
    rep["violations"] = fails
    with open(os.path.join(d, "report.json"), "w") as f:
        json.dump(rep, f, indent=2, sort_keys=True)
    for k in sorted(rep):
        if k != "violations":
            print("%s: %s" % (k, rep[k]))
    for x in fails:
        print("VIOLATION: %s" % x)
    print("check: %s" % ("FAILED" if fails else "passed"))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
