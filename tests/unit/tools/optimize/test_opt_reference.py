#!/usr/bin/env python3
"""test_opt_reference.py KVTIER SOURCE_DIR — issue 10 §4: the exact LRU curve of
`kvtier optimize` equals the Python reference (tools/trace/lru_prefix.py) at every
capacity checked: on the shipped trace, on a `kvtier trace synth` trace, and on a
random trace with blocks repeated inside requests and requests longer than the
capacity (the corner cases of the prefix semantics). Exit 0 when all agree."""
import csv
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile


def load_reference(src):
    spec = importlib.util.spec_from_file_location(
        "lru_prefix", os.path.join(src, "tools", "trace", "lru_prefix.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def optimizer_hits(kvtier, trace, caps, tmp):
    out = os.path.join(tmp, "curve.csv")
    subprocess.run([kvtier, "optimize", trace, "--no-plot", "--no-belady", "--no-arc",
                    "--no-policies", "--capacities", ",".join(map(str, caps)), "--csv", out],
                   check=True, stdout=subprocess.DEVNULL)
    rows = list(csv.DictReader(open(out)))
    unbounded = [r for r in rows if r["unbounded"] == "1"][0]
    by_cap = {int(r["capacity"]): int(r["lru_hits"]) for r in rows}
    return {c: by_cap.get(c, int(unbounded["lru_hits"])) if c < int(unbounded["capacity"])
            else int(unbounded["lru_hits"]) for c in caps}


def check(name, ref, kvtier, trace, caps, tmp):
    with open(trace) as f:
        requests = [json.loads(line)["hash_ids"] for line in f if line.strip()]
    got = optimizer_hits(kvtier, trace, caps, tmp)
    bad = 0
    for c in caps:
        want, _ = ref.hit_rate(requests, c)
        if got[c] != want:
            print(f"FAIL {name}: capacity {c}: kvtier optimize {got[c]}, lru_prefix.py {want}")
            bad += 1
    print(f"{name}: {len(caps)} capacities, {'all equal' if not bad else f'{bad} differ'}")
    return bad


def main(argv):
    kvtier, src = argv[1], argv[2]
    ref = load_reference(src)
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        shipped = os.path.join(src, "traces", "synthetic_trace.jsonl")
        bad += check("shipped trace", ref, kvtier, shipped,
                     [1, 7, 100, 500, 1000, 2048, 3000, 7777, 10000, 18432, 30000, 33000,
                      43923, 43924, 50000], tmp)
        synth = os.path.join(tmp, "synth.jsonl")
        subprocess.run([kvtier, "trace", "synth", "--seed", "7", "--requests", "3000",
                        "--scan-rate", "0.01", "-o", synth], check=True,
                       stderr=subprocess.DEVNULL)
        bad += check("synth trace", ref, kvtier, synth, [1, 10, 64, 300, 1000, 2500, 10**6], tmp)
        rnd = os.path.join(tmp, "random.jsonl")
        rng = random.Random(11)
        with open(rnd, "w") as f:
            for _ in range(400):
                n = rng.randint(0, 30)
                ids = [rng.randint(0, 60) for _ in range(n)]
                if ids and rng.random() < 0.5:
                    ids.insert(rng.randint(0, len(ids)), rng.choice(ids))  # repeated block
                f.write(json.dumps({"timestamp": 0, "hash_ids": ids}) + "\n")
        bad += check("random trace with repeats", ref, kvtier, rnd, list(range(1, 63)), tmp)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
