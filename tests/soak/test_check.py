#!/usr/bin/python3
"""test_check.py — the soak checker's rules on made-up runs: each violation it must
find (wrong bytes, an unexplained miss, a gap no replay filled, growing RSS) is
found, and each legitimate miss (removed, tier down, a new term not yet rebuilt, a
killed host tier, a block promoted off nvme then lost on host) is not counted as a
loss."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check.py")
K = "11" * 16


def run(hist, events, chaos=(), samples=(), summary="events: 9 batches, 0 gaps (0 missing), 0 terms lost"):
    d = tempfile.mkdtemp(prefix="kvt-check-")
    for name, rows in (("hist-0-1.jsonl", hist), ("events.jsonl", events),
                       ("chaos.log", chaos), ("samples.jsonl", samples)):
        with open(os.path.join(d, name), "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    with open(os.path.join(d, "events.err"), "w") as f:
        f.write(summary + "\n")
    p = subprocess.run([sys.executable, CHECK, d], capture_output=True, text=True)
    with open(os.path.join(d, "report.json")) as f:
        rep = json.load(f)
    shutil.rmtree(d)
    return p.returncode, rep, p.stdout


def put(t, key=K):
    return {"t": t, "op": "put", "keys": [key], "ack": True}


def get(t, res, ok=True, key=K):
    return {"t": t, "op": "get", "key": key, "res": res, "ok": ok}


def ev(t, kind, **kw):
    e = {"ts_us": int(t * 1e6), "kind": kind, "keys": kw.pop("keys", [K])}
    e.update(kw)
    return e


STORED = ev(10.1, "stored", tier=1)


class Rules(unittest.TestCase):
    def test_clean_run_passes(self):
        rc, rep, _ = run([put(10), get(11, "hit")], [STORED])
        self.assertEqual(rc, 0)
        self.assertEqual(rep["loads_checked"], 1)

    def test_wrong_bytes_fail(self):
        rc, rep, out = run([put(10), get(11, "hit", ok=False)], [STORED])
        self.assertEqual(rc, 1)
        self.assertEqual(rep["wrong_bytes"], 1)
        self.assertIn("WRONG BYTES", out)

    def test_unexplained_miss_is_a_loss(self):
        rc, rep, out = run([put(10), get(11, "hit"), get(40, "miss")], [STORED])
        self.assertEqual(rc, 1)
        self.assertEqual(rep["losses"], 1)
        self.assertIn("LOSS", out)

    def test_removed_or_tier_down_explains_a_miss(self):
        for e in (ev(20, "removed", tier=1, reason=1), ev(20, "tier", tier=1, up=False, keys=[])):
            rc, rep, _ = run([put(10), get(11, "hit"), get(40, "miss")], [STORED, e])
            self.assertEqual(rc, 0, e)
            self.assertEqual(rep["losses"], 0)

    def test_persistent_tier_down_explains_only_while_down_or_rebuilding(self):
        tiers = [ev(1, "tier", tier=1, name="host0", up=True, keys=[]),
                 ev(1, "tier", tier=2, name="nvme0", up=True, keys=[])]
        on_nvme = ev(10.1, "stored", tier=2)
        down = ev(20, "tier", tier=2, name="nvme0", up=False, keys=[])
        up = ev(30, "tier", tier=2, name="nvme0", up=True, keys=[])
        # still down at the miss: explained
        rc, rep, _ = run([put(10), get(11, "hit"), get(25, "miss")], tiers + [on_nvme, down])
        self.assertEqual(rep["losses"], 0)
        self.assertEqual(rep["misses_explained"], {"persistent tier down": 1})
        # back up, the miss within REBUILD_S and before it was restored: explained
        rc, rep, _ = run([put(10), get(11, "hit"), get(40, "miss")], tiers + [on_nvme, down, up])
        self.assertEqual(rep["losses"], 0)
        self.assertEqual(rep["misses_explained"], {"persistent tier rebuilding": 1})
        # back up, the miss 60 s later: its blocks must have come back, a loss
        rc, rep, out = run([put(10), get(11, "hit"), get(90, "miss")], tiers + [on_nvme, down, up])
        self.assertEqual(rc, 1)
        self.assertEqual(rep["losses"], 1)
        self.assertIn("LOSS", out)
        # back up and the block adopted again, then missed: a loss
        again = ev(32, "stored", tier=2)
        rc, rep, _ = run([put(10), get(11, "hit"), get(40, "miss")],
                         tiers + [on_nvme, down, up, again])
        self.assertEqual(rep["losses"], 1)

    def test_host_tier_down_explains_a_miss_at_any_time(self):
        # a host tier's down: its process died and its memory with it
        tiers = [ev(1, "tier", tier=1, name="host0", up=True, keys=[])]
        down = ev(20, "tier", tier=1, name="host0", up=False, keys=[])
        up = ev(30, "tier", tier=1, name="host0", up=True, keys=[])
        rc, rep, _ = run([put(10), get(11, "hit"), get(90, "miss")], tiers + [STORED, down, up])
        self.assertEqual(rc, 0)
        self.assertEqual(rep["losses"], 0)
        self.assertEqual(rep["misses_explained"], {"tier down": 1})

    def test_tier_down_of_another_tier_does_not(self):
        rc, rep, _ = run([put(10), get(11, "hit"), get(40, "miss")],
                         [STORED, ev(20, "tier", tier=2, up=False, keys=[])])
        self.assertEqual(rep["losses"], 1)

    def test_new_term_explains_only_until_it_rebuilt(self):
        term = ev(20, "leader", node="c", leader_epoch=2, keys=[])
        rc, rep, _ = run([put(10), get(11, "hit"), get(25, "miss")], [STORED, term])
        self.assertEqual(rep["losses"], 0)
        rc, rep, _ = run([put(10), get(11, "hit"), get(60, "miss")], [STORED, term])
        self.assertEqual(rep["losses"], 1)  # not adopted again, long after the term began
        again = ev(21, "stored", tier=1)
        rc, rep, _ = run([put(10), get(11, "hit"), get(25, "miss")], [STORED, term, again])
        self.assertEqual(rep["losses"], 1)  # adopted again, then missed: a loss

    def test_killed_host_tier_explains_a_miss(self):
        chaos = [{"t": 20, "action": "kill", "name": "tier-host0", "pid": 1}]
        rc, rep, _ = run([put(10), get(11, "hit"), get(40, "miss")], [STORED], chaos=chaos)
        self.assertEqual(rep["losses"], 0)
        chaos = [{"t": 20, "action": "kill", "name": "tier-nvme0", "pid": 1}]
        rc, rep, _ = run([put(10), get(11, "hit"), get(40, "miss")], [STORED], chaos=chaos)
        self.assertEqual(rep["losses"], 1)  # nvme is persistent: it must come back

    def test_unfilled_gap_fails(self):
        rc, rep, out = run([put(10), get(11, "hit")], [STORED],
                           summary="events: 9 batches, 2 gaps (5 missing)")
        self.assertEqual(rc, 1)
        self.assertIn("lost 5 batches", out)

    def test_lost_term_fails(self):
        rc, rep, out = run([put(10), get(11, "hit")], [STORED],
                           summary="events: 9 batches, 0 gaps (0 missing), 1 terms lost")
        self.assertEqual(rc, 1)
        self.assertEqual(rep["event_terms_lost"], 1)
        self.assertIn("lost 1 whole leader terms", out)

    def test_growing_rss_fails(self):
        samples = [{"t": t, "name": "coordinator", "pid": 1, "rss_kb": 1000 + (t > 20) * 100000,
                    "fds": 10} for t in range(0, 31)]
        rc, rep, out = run([put(10), get(11, "hit")], [STORED], samples=samples)
        self.assertEqual(rc, 1)
        self.assertIn("RSS of coordinator grew", out)

    def test_host_kill_explains_only_blocks_on_the_host_tier(self):
        tiers = [ev(1, "tier", tier=1, name="host0", up=True, keys=[]),
                 ev(1, "tier", tier=2, name="nvme0", up=True, keys=[])]
        chaos = [{"t": 20, "action": "kill", "name": "tier-host0", "pid": 1}]
        on_nvme = ev(10.1, "stored", tier=2)
        rc, rep, _ = run([put(10), get(11, "hit"), get(40, "miss")], tiers + [on_nvme], chaos=chaos)
        self.assertEqual(rep["losses"], 1)
        rc, rep, _ = run([put(10), get(11, "hit"), get(40, "miss")], tiers + [STORED], chaos=chaos)
        self.assertEqual(rep["losses"], 0)

    def test_promotion_off_nvme_makes_a_block_non_persistent(self):
        # acknowledged on nvme, moved to host by an exclusive promotion (reason 2),
        # then evicted from host or lost with the host process: explained, not a loss
        tiers = [ev(1, "tier", tier=1, name="host0", up=True, keys=[]),
                 ev(1, "tier", tier=2, name="nvme0", up=True, keys=[])]
        on_nvme = ev(10.1, "stored", tier=2)
        promoted = ev(15, "moved", **{"from": 2, "to": 1, "reason": 2})
        evicted = ev(20, "removed", tier=1, reason=1)
        rc, rep, _ = run([put(10), get(11, "hit"), get(40, "miss")],
                         tiers + [on_nvme, promoted, evicted])
        self.assertEqual(rc, 0)
        self.assertEqual(rep["losses"], 0)
        self.assertEqual(rep["misses_explained"], {"removed": 1})
        self.assertEqual(rep["moved_off_persistent"], 1)
        chaos = [{"t": 20, "action": "kill", "name": "tier-host0", "pid": 1}]
        rc, rep, _ = run([put(10), get(11, "hit"), get(40, "miss")],
                         tiers + [on_nvme, promoted], chaos=chaos)
        self.assertEqual(rep["losses"], 0)
        self.assertEqual(rep["misses_explained"], {"host tier killed": 1})
        # demoted back to nvme before the host kill: persistent again, a loss
        back = ev(18, "moved", **{"from": 1, "to": 2, "reason": 1})
        rc, rep, _ = run([put(10), get(11, "hit"), get(40, "miss")],
                         tiers + [on_nvme, promoted, back], chaos=chaos)
        self.assertEqual(rep["losses"], 1)
        self.assertEqual(rep["moved_off_persistent"], 1)
        # the move without a removal or a kill after it explains nothing
        rc, rep, _ = run([put(10), get(11, "hit"), get(40, "miss")], tiers + [on_nvme, promoted])
        self.assertEqual(rep["losses"], 1)

    def test_removal_of_one_of_two_copies_explains_nothing(self):
        events = [STORED, ev(10.2, "stored", tier=2), ev(20, "removed", tier=1, reason=1)]
        rc, rep, _ = run([put(10), get(11, "hit"), get(40, "miss")], events)
        self.assertEqual(rep["losses"], 1)

    def test_failed_load_without_chaos_fails(self):
        err = {"t": 40, "op": "get", "key": K, "res": "err", "ok": False, "err": "job failed"}
        rc, rep, out = run([put(10), get(11, "hit"), err], [STORED])
        self.assertEqual(rc, 1)
        self.assertIn("UNEXPLAINED LOAD ERROR", out)
        chaos = [{"t": 35, "action": "stop", "name": "tier-host0", "pid": 1}]
        rc, rep, _ = run([put(10), get(11, "hit"), err], [STORED], chaos=chaos)
        self.assertEqual(rc, 0)

    def test_nothing_checked_fails(self):
        rc, _, out = run([put(10)], [STORED])
        self.assertEqual(rc, 1)
        self.assertIn("proved nothing", out)


if __name__ == "__main__":
    unittest.main()
