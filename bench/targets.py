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
    s = "%s %s/%s %s %s x%d" % (p["medium"]["name"], p["backend"], p["segment_kind"],
                                p["mode"], p["record_size"]["label"], p["threads"])
    if p.get("inflight"):
        s += " qd%d" % p["inflight"]
    return s


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
    # Batch and group ceilings are op/s; periodic ones sequential MB/s.
    unit = f.get("unit", "op/s")
    engine = p["mb_per_s"] if unit == "MB/s" else p["ops_per_s"]
    t.add(label, ">= %.3g x fio" % goal,
          "%.0f %s vs fio %.0f %s" % (engine, unit, f["ceiling"], unit), "%.3g" % f["ratio"],
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

    # 3: batch on /dev/shm, one writer, against fio's write+fdatasync rounds
    # on the same tmpfs (there fdatasync returns at once: the ceiling is the
    # rate of one small write per round). The goal is the former absolute
    # one, 500k op/s, over fio's 279,546 rounds/s on 2026-12-02.
    fio_ratio_target(t, "3. batch 128 B /dev/shm, 1 writer", 1.8,
                     best([q for q in pick(points, job="batch-ram", threads=1) if "fio" in q]))

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

    # 6: the hot path, metrics on, against fio's sequential bandwidth on the
    # same tmpfs; two writers against one.
    hot = {q["threads"]: q for q in pick(points, job="hot-path", metrics=True)}
    if 1 in hot:
        # The former goal, 5 M op/s (640 MB/s), over fio's 11.6 GB/s of
        # sequential writes into tmpfs on 2026-12-02.
        fio_ratio_target(t, "6. periodic 128 B /dev/shm, 1 writer", 0.055, hot[1])
        one = hot[1]["ops_per_s"]
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

    # A1-A4: appends in flight from few threads.
    ceiling16 = best([q for q in pick(disk_batch, threads=16) if "fio" in q])
    rocks64 = best([q for q in pick(disk_batch, threads=64) if "rocksdb" in q])
    async_disk = pick(points, job="async-disk")
    a1 = best(pick(async_disk, threads=1, inflight=16))
    if a1 and ceiling16:
        c = ceiling16["fio"]["ceiling"]
        r = a1["ops_per_s"] / c
        t.add("A1. disk, 1 thread x 16 in flight", ">= 0.90 x fio 16-writer ceiling",
              "%.0f op/s vs fio %.0f op/s" % (a1["ops_per_s"], c), "%.2f" % r, r >= 0.9, name(a1))
    else:
        t.missing("A1. disk, 1 thread x 16 in flight", ">= 0.90 x fio", "no point or no fio ceiling")
    a2 = best(pick(async_disk, threads=2, inflight=32))
    if a2 and rocks64:
        rk = rocks64["rocksdb"]["ops_per_s"]
        r = a2["ops_per_s"] / rk
        t.add("A2. disk, 2 threads x 32 in flight", ">= 6x RocksDB at 64 threads",
              "%.0f op/s vs RocksDB %.0f op/s" % (a2["ops_per_s"], rk), "%.2fx" % r, r >= 6.0,
              name(a2))
    else:
        t.missing("A2. disk, 2 threads x 32 in flight", ">= 6x RocksDB", "no point or no db_bench run")
    a3 = best(pick(points, job="async-ram", threads=1, inflight=64))
    blocking = best(pick(points, job="batch-ram", threads=1))
    if a3 and blocking:
        r = a3["ops_per_s"] / blocking["ops_per_s"]
        t.add("A3. /dev/shm, 1 thread x 64 in flight", ">= 3x blocking 1 writer",
              "%.0f op/s vs blocking %.0f op/s" % (a3["ops_per_s"], blocking["ops_per_s"]),
              "%.2fx" % r, r >= 3.0, name(a3))
    else:
        t.missing("A3. /dev/shm, 1 thread x 64 in flight", ">= 3x blocking", "no point")
    if a1 and ceiling16 and ceiling16["fio"].get("round_p99_us"):
        f = ceiling16["fio"]["round_p99_us"]
        r = a1["latency_us"]["p99"] / f
        t.add("A4. disk, 16 in flight: p99 ack latency", "<= 2x fio round p99",
              "%.0f us vs fio %.0f us" % (a1["latency_us"]["p99"], f), "%.2fx" % r, r <= 2.0,
              name(a1))
    else:
        t.missing("A4. disk, 16 in flight: p99 ack latency", "<= 2x fio round p99", "no point")

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
