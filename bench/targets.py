#!/usr/bin/env python3
"""Turns a run of bench/targets.ini (results.jsonl) into the targets table
of docs/benchmarks.md: each target's measured value, its ratio, whether it
is met, and the point it came from. Every number is from that one run.

usage: bench/targets.py results/targets/results.jsonl
"""
import json
import sys


def load(path):
    points, overhead = [], []
    with open(path) as f:
        for line in f:
            j = json.loads(line)
            if j.get("type") == "point" and j.get("verified"):
                j["cfg"] = dict(kv.split("=", 1) for kv in j["config"].split(","))
                points.append(j)
            elif j.get("type") == "metrics_overhead":
                overhead.append(j)
    return points, overhead


def pick(points, **want):
    return [p for p in points if all(p.get(k) == v for k, v in want.items())]


def best(points):
    return max(points, key=lambda p: p["ops_per_s"]) if points else None


def name(p):
    return "%s %s/%s %s %s x%d" % (p["medium"]["name"], p["backend"], p["segment_kind"],
                                   p["mode"], p["record_size"]["label"], p["threads"])


class Table:
    def __init__(self):
        self.rows = []

    def add(self, target, goal, measured, ratio, met, point):
        verdict = "n/a" if met is None else ("met" if met else "**missed**")
        self.rows.append((target, goal, measured, ratio, verdict, point))

    def missing(self, target, goal, why):
        self.rows.append((target, goal, "not measured", "-", "n/a", why))

    def print(self):
        print("| # | target | measured | ratio | verdict | point |")
        print("|---|---|---|---|---|---|")
        for r in self.rows:
            print("| " + " | ".join(r) + " |")


def fio_ratio_target(t, label, goal, p):
    if p is None or "fio" not in p:
        t.missing(label, "%.2f of fio" % goal, "no batch point with a fio ceiling")
        return
    f = p["fio"]
    t.add(label, ">= %.2f x fio" % goal,
          "%.0f op/s vs fio %.0f op/s" % (p["ops_per_s"], f["ceiling"]), "%.2f" % f["ratio"],
          f["ratio"] >= goal, name(p))


def main(path):
    points, overhead = load(path)
    t = Table()
    disk_batch = pick(points, job="batch-disk")

    # 1: the best backend (highest op/s) at 1 and 16 writers against fio.
    fio_ratio_target(t, "1. batch 128 B disk, 1 writer", 0.85, best(pick(disk_batch, threads=1)))
    fio_ratio_target(t, "1. batch 128 B disk, 16 writers", 0.75, best(pick(disk_batch, threads=16)))

    # 2: against RocksDB at 16 and 64 writers.
    for threads, goal in ((16, 3.5), (64, 5.0)):
        p = best(pick(disk_batch, threads=threads))
        label = "2. batch 128 B disk, %d writers vs RocksDB" % threads
        if p is None or "rocksdb" not in p:
            t.missing(label, ">= %.1fx" % goal, "no db_bench run for this point")
            continue
        r = p["rocksdb"]
        t.add(label, ">= %.1fx" % goal,
              "%.0f op/s vs RocksDB %.0f op/s" % (p["ops_per_s"], r["ops_per_s"]),
              "%.2fx" % r["ratio"], r["ratio"] >= goal, name(p))

    # 3: batch on /dev/shm, one writer.
    p = best(pick(points, job="batch-ram", threads=1))
    if p:
        t.add("3. batch 128 B /dev/shm, 1 writer", ">= 500k op/s", "%.0f op/s" % p["ops_per_s"],
              "%.2f" % (p["ops_per_s"] / 500e3), p["ops_per_s"] >= 500e3, name(p))

    # 4: periodic 4 KiB bandwidth on disk against fio's sequential bandwidth;
    # the disk/ramdisk ratio for the same backend.
    periodic = pick(points, job="periodic-4k")
    p = best([q for q in periodic if q["medium"]["name"] == "disk" and "fio" in q])
    if p:
        ram = [q for q in periodic if q["medium"]["name"] == "ram" and q["backend"] == p["backend"]]
        lag = p["lag_blocked_appends"]
        note = "; disk/ram %.2f" % (p["mb_per_s"] / ram[0]["mb_per_s"]) if ram else ""
        note += "; %d appends waited for a lagging sync" % lag
        t.add("4. periodic 4 KiB disk bandwidth vs fio", ">= 0.80 x fio, within lag bound",
              "%.0f MB/s vs fio %.0f MB/s%s" % (p["mb_per_s"], p["fio"]["ceiling"], note),
              "%.2f" % p["fio"]["ratio"], p["fio"]["ratio"] >= 0.8 and lag == 0, name(p))

    # 5: the msync pool against one msync thread, per pool size.
    single = best(pick(points, job="msync-single"))
    pool = sorted(pick(points, job="msync-pool"), key=lambda q: int(q["cfg"]["sync_threads"]))
    if single and pool:
        curve = ", ".join("%s: %.2fx" % (q["cfg"]["sync_threads"], q["ops_per_s"] / single["ops_per_s"])
                          for q in pool)
        top = best(pool)
        speedup = top["ops_per_s"] / single["ops_per_s"]
        t.add("5. msync-pool vs one msync thread (disk, interval 2 ms)", ">= 1.3x",
              "single %.0f op/s; pool by sync_threads %s" % (single["ops_per_s"], curve),
              "%.2fx" % speedup, speedup >= 1.3, name(top) + " sync_threads=" + top["cfg"]["sync_threads"])

    # 6: the hot path, metrics on.
    hot = {q["threads"]: q for q in pick(points, job="hot-path", metrics=True)}
    if 1 in hot:
        one = hot[1]["ops_per_s"]
        t.add("6. periodic 128 B /dev/shm, 1 writer", ">= 5M op/s", "%.2fM op/s" % (one / 1e6),
              "%.2f" % (one / 5e6), one >= 5e6, name(hot[1]))
        if 2 in hot:
            two = hot[2]["ops_per_s"]
            t.add("6. same, 2 writers vs 1", ">= 1.6x", "%.2fM op/s" % (two / 1e6),
                  "%.2fx" % (two / one), two / one >= 1.6, name(hot[2]))

    # 7: batch p99 at 16 writers against fio's write + fdatasync p99.
    p = best(pick(disk_batch, threads=16))
    if p and "fio" in p and "p99_ratio" in p["fio"]:
        f = p["fio"]
        t.add("7. batch 128 B disk, 16 writers: p99 ack latency", "<= 2x fio round p99",
              "%.0f us vs fio %.0f us" % (p["latency_us"]["p99"], f["round_p99_us"]),
              "%.2fx" % f["p99_ratio"], f["p99_ratio"] <= 2.0, name(p))

    # Issue 6: metrics on against off ("on" and "off" are point indexes).
    by_index = {q["index"]: q for q in points}
    for o in overhead:
        on = by_index.get(o["on"])
        t.add("issue 6: metrics overhead", "< 2%",
              "on %.0f vs off %.0f op/s" % (o["on_ops_per_s"], o["off_ops_per_s"]),
              "%.1f%%" % o["overhead_pct"], o["overhead_pct"] < 2.0, name(on) if on else "")
    t.print()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip())
    main(sys.argv[1])
