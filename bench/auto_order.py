#!/usr/bin/env python3
# The tables of docs/backends.md ("How the order was measured") from the
# JSON lines of bench/auto-order.sh. Rank: per repetition, each backend's
# appends/s over the fastest at the same medium and writer count; median
# over repetitions; geometric mean over 1, 4 and 16 writers.
# Usage: bench/auto_order.py results/auto-order batch
import json, glob, sys, math, statistics as st
out, mode = sys.argv[1], sys.argv[2]
B = ["msync", "msync-pool", "pwrite", "uring", "aio"]
reps = []
for f in sorted(glob.glob(f"{out}/{mode}-rep*.jsonl")):
    r = {}
    for line in open(f):
        d = json.loads(line)
        if d.get("type") == "point":
            r[(d["medium"]["name"], d["threads"], d["backend"])] = (d["ops_per_s"], (d.get("fio") or {}).get("ratio"))
    reps.append(r)
def k(x):
    return f"{x/1e6:.2f} M" if x >= 1e6 else (f"{x/1e3:.0f} k" if x >= 1e4 else f"{x:,.0f}")
show_fio = mode != "periodic"
print("| medium | writers | " + " | ".join(B) + " |")
print("|---|---|" + "---|" * len(B))
for m, label in [("disk", "disk"), ("ram", "tmpfs")]:
    score = {b: [] for b in B}
    for t in [1, 4, 16]:
        cells = []
        for b in B:
            rel = []
            for r in reps:
                best = max(r[(m, t, x)][0] for x in B)
                rel.append(r[(m, t, b)][0] / best)
            ops = [r[(m, t, b)][0] for r in reps]
            fio = [r[(m, t, b)][1] for r in reps if r[(m, t, b)][1] is not None]
            score[b].append(st.median(rel))
            c = f"{k(st.median(ops))} ({k(min(ops))}-{k(max(ops))}), {st.median(rel):.2f}"
            if fio and show_fio: c += f", fio {st.median(fio):.2f}"
            cells.append(c)
        print(f"| {label} | {t} | " + " | ".join(cells) + " |")
    g = {b: math.exp(sum(math.log(x) for x in score[b]) / 3) for b in B}
    print(f"| {label} | rank | " + " | ".join(f"**{g[b]:.2f}**" for b in B) + " |")
