#!/usr/bin/env python3
"""test_opt_cli.py KVTIER SOURCE_DIR — the `kvtier optimize` and `kvtier trace synth`
commands (issue 10 §4): usage errors exit 2 with a message, bad input exits 1 naming
the line, the default run on the shipped trace prints the README's figures and
writes the plot, a missing gnuplot is reported while the rest is still printed, an
event recording gives the same curve as the trace it was made from and the
service's own hit rate, CSV / JSON are written, and synth is deterministic."""
import csv
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections import OrderedDict

FAILS = []


def run(cmd, cwd=None, env=None):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def usage_errors(kvtier, trace):
    for args, needle in [([], "usage: kvtier optimize"),
                         ([trace, "--capacity", "0"], "--capacity"),
                         ([trace, "--format", "xml"], "--format"),
                         ([trace, "--chain", "5"], "--chain"),
                         ([trace, "--chain-policy", "nope"], "known: lru"),
                         ([trace, "--gpu-flops", "-1"], "--gpu-flops"),
                         ([trace, "--subscribe"], "usage"),
                         (["--subscribe", "--window", "0"], "--window"),
                         ([trace, trace], "usage")]:
        r = run([kvtier, "optimize"] + args)
        expect(r.returncode == 2 and needle in r.stderr,
               f"optimize {' '.join(args[1:]) or '(no input)'}: exit 2, says {needle!r}")


def live_without_publisher(kvtier):
    # --subscribe to an endpoint nobody publishes on: a line per --every, a final one
    r = run([kvtier, "optimize", "--subscribe", "--endpoint", "tcp://127.0.0.1:9",
             "--capacity", "100", "--every", "1", "--for", "2"])
    expect(r.returncode == 0 and "live: no lookups yet" in r.stdout,
           "--subscribe without a publisher: reports no lookups, exits 0 after --for")


def bad_input(kvtier, tmp):
    bad = os.path.join(tmp, "bad.jsonl")
    with open(bad, "w") as f:
        f.write('{"hash_ids": [1, 2]}\n{"hash_ids": [1, "x"]}\n')
    r = run([kvtier, "optimize", bad, "--no-plot"])
    expect(r.returncode == 1 and f"{bad}:2: hash_ids[1]" in r.stderr,
           "bad trace line: exit 1, error names line 2 and the field")


def default_run(kvtier, trace, tmp):
    r = run([kvtier, "optimize", trace], cwd=tmp)
    expect(r.returncode == 0, "default run exits 0")
    rows = {line.split()[0]: line.split()[1] for line in r.stdout.splitlines()
            if line[:1].isdigit() or line.startswith("unbounded")}
    want = {"1000": "8.25%", "3000": "18.78%", "10000": "42.35%", "30000": "62.42%",
            "unbounded": "63.96%"}
    expect(all(rows.get(k) == v for k, v in want.items()),
           f"default run prints the README's LRU figures {want}, got {rows}")
    png, svg = os.path.join(tmp, "kvtier-optimize.png"), os.path.join(tmp, "kvtier-optimize.svg")
    expect(os.path.exists(png) and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n",
           "default run writes ./kvtier-optimize.png")
    expect(os.path.exists(svg) and "<svg" in open(svg).read(), "and ./kvtier-optimize.svg")
    env = dict(os.environ, KVTIER_GNUPLOT="/nonexistent/gnuplot")
    r = run([kvtier, "optimize", trace, "--plot", os.path.join(tmp, "nognuplot")], env=env)
    expect(r.returncode == 0 and "gnuplot not found" in r.stderr and "unbounded" in r.stdout
           and not os.path.exists(os.path.join(tmp, "nognuplot.png")),
           "without gnuplot: says so, prints the rest, writes no plot, exit 0")


def lru_per_request(requests, cap):
    lru, out = OrderedDict(), []
    for ids in requests:
        h = 0
        for i in ids:
            if i not in lru:
                break
            h += 1
        out.append(h)
        for i in ids:
            if i in lru:
                lru.move_to_end(i)
            else:
                lru[i] = None
                if len(lru) > cap:
                    lru.popitem(last=False)
    return out


def recording(kvtier, trace, tmp):
    """A recording as `kvtier events` prints it, of a service that behaved as LRU at
    3,000 blocks: the optimizer's curve equals the trace's, its observed rate LRU's."""
    requests = [json.loads(line)["hash_ids"] for line in open(trace) if line.strip()]
    hits = lru_per_request(requests, 3000)
    rec = os.path.join(tmp, "events.jsonl")
    with open(rec, "w") as f:
        for n, (ids, h) in enumerate(zip(requests, hits)):
            keys = [hashlib.md5(str(i).encode()).hexdigest() for i in ids]
            f.write(json.dumps({"seq": n + 1, "topic": "stored/demo", "instance": "demo",
                                "kind": "stored", "tier": 1, "keys": keys[:1]}) + "\n")
            f.write(json.dumps({"seq": n + 1, "topic": "lookup/demo", "epoch": 1,
                                "ts_us": n, "instance": "demo", "kind": "lookup",
                                "request": f"r{n}", "mode": 0, "hits": h, "head_hits": h,
                                "tier_hits": {"1": h}, "keys": keys, "new_field": 1}) + "\n")
    caps = "100,1000,3000,10000,30000"
    a, b = os.path.join(tmp, "t.csv"), os.path.join(tmp, "e.csv")
    r1 = run([kvtier, "optimize", trace, "--no-plot", "--capacities", caps, "--csv", a])
    r2 = run([kvtier, "optimize", rec, "--no-plot", "--capacities", caps, "--csv", b,
              "--json", os.path.join(tmp, "e.json")])
    expect(r1.returncode == 0 and r2.returncode == 0, "trace and recording runs exit 0")
    ta = [(r["capacity"], r["lru_hits"], r["belady_hits"]) for r in csv.DictReader(open(a))]
    tb = [(r["capacity"], r["lru_hits"], r["belady_hits"]) for r in csv.DictReader(open(b))]
    expect(ta == tb and len(ta) == 6, "a recording gives the same curve as its trace")
    j = json.load(open(os.path.join(tmp, "e.json")))
    expect(j["format"] == "events" and j["observed"]["hits"] == sum(hits) == 22883,
           "the recording's own hits are read (22,883 = LRU at 3,000)")
    expect("the service (recording): hit rate 18.8%" in r2.stdout and
           "skipped 3993 events" in r2.stdout, "and printed, with the skipped events")


def synth(kvtier, tmp):
    outs = []
    for name in ("a", "b"):
        p = os.path.join(tmp, f"s{name}.jsonl")
        r = run([kvtier, "trace", "synth", "--seed", "42", "--requests", "500", "-o", p])
        expect(r.returncode == 0 and "500 requests" in r.stderr, f"synth run {name} exits 0")
        outs.append(open(p, "rb").read())
    r = run([kvtier, "trace", "synth", "--seed", "42", "--requests", "500"])
    expect(outs[0] == outs[1] == r.stdout.encode(), "same seed, same bytes (file and stdout)")
    r = run([kvtier, "trace", "synth", "--seed", "43", "--requests", "500"])
    expect(r.stdout.encode() != outs[0], "another seed, other bytes")
    r = run([kvtier, "trace", "synth", "--share", "2"])
    expect(r.returncode == 2 and "--share" in r.stderr, "synth --share 2: exit 2 naming it")
    r = run([kvtier, "trace", "nope"])
    expect(r.returncode == 2, "trace with an unknown subcommand: exit 2")


def main(argv):
    kvtier, src = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    trace = os.path.join(src, "traces", "synthetic_trace.jsonl")
    with tempfile.TemporaryDirectory() as tmp:
        usage_errors(kvtier, trace)
        bad_input(kvtier, tmp)
        live_without_publisher(kvtier)
        default_run(kvtier, trace, tmp)
        recording(kvtier, trace, tmp)
        synth(kvtier, tmp)
    print(f"{len(FAILS)} failed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
