#!/usr/bin/env bash
# The all-reduce target sizes only (16 and 64 MiB), more interleaved
# repetitions: benchmarks/results/focus/ (see chapters/benchmarks.md).
set -euo pipefail
PY=${1:-.venv/bin/python}
OUT=benchmarks/results/focus
mkdir -p "$OUT"
for n in 2 4; do
  $PY -m mycollectives.bench --nprocs $n -C all_reduce -b 16M -e 64M -f 4 -n 3 -w 1 --reps 11 \
      --algorithm auto,ring,reduce_broadcast,recursive_doubling,rabenseifner,native \
      --json "$OUT/all_reduce_np$n.json" --csv "$OUT/all_reduce_np$n.csv"
done
