#!/usr/bin/env python3
"""lru_prefix.py TRACE CAPACITY... — the offline reference for `kvtier replay`.

A plain prefix-hit LRU over the trace's block ids (traces/README.md): a request
hits its leading blocks up to the first miss, then all its blocks are inserted or
touched (most recent last). Prints the hit rate for each capacity (in blocks), the
figure docs/PERFORMANCE.md puts next to the replay's per-tier hits.
"""
import json
import sys
from collections import OrderedDict


def hit_rate(requests, capacity):
    lru = OrderedDict()
    hits = total = 0
    for ids in requests:
        total += len(ids)
        for i in ids:
            if i not in lru:
                break
            hits += 1
        for i in ids:
            if i in lru:
                lru.move_to_end(i)
            else:
                lru[i] = None
                if len(lru) > capacity:
                    lru.popitem(last=False)
    return hits, total


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        requests = [json.loads(line)["hash_ids"] for line in f if line.strip()]
    for cap in argv[2:]:
        hits, total = hit_rate(requests, int(cap))
        print(f"capacity {int(cap)}: {hits} of {total} blocks hit ({100.0 * hits / total:.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
