#!/bin/bash
# Measures the order backend=auto uses (docs/backends.md, "Which backend
# auto picks"): 128 B records, 1/4/16 writers, every backend, on the disk
# (<checkout>/bench-data) and /dev/shm, repeated, with the backends' order
# rotated per repetition so a slow minute does not always land on one.
# Usage: bench/auto-order.sh [reps=4] [duration=2s] [modes="batch group periodic"]
# Then: bench/auto_order.py results/auto-order <mode>
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/release/bench/synclog-bench
out=$root/results/auto-order
reps=${1:-4}
duration=${2:-2s}
modes=${3:-batch group periodic}
orders=(msync,msync-pool,pwrite,uring,aio aio,uring,pwrite,msync-pool,msync
        pwrite,aio,msync,uring,msync-pool uring,msync,aio,msync-pool,pwrite
        msync-pool,pwrite,uring,aio,msync)
ram=/dev/shm/synclog-auto-order-$$
trap 'rm -rf -- "$ram" "$root/bench-data/auto-order"' EXIT
mkdir -p "$out"
for mode in $modes; do
  for r in $(seq 1 "$reps"); do
    order=${orders[$(((r - 1) % ${#orders[@]}))]}
    echo "auto-order: $mode repetition $r/$reps ($order)" >&2
    "$bin" --media "disk=$root/bench-data/auto-order,ram=$ram" --backend "$order" \
      --mode "$mode" --size 128 --threads 1,4,16 --duration "$duration" \
      --rocksdb off --plot off --quiet --json >"$out/$mode-rep$r.jsonl"
  done
done
