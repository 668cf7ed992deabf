#!/usr/bin/env bash
# The recordings behind chapters/benchmarks.md, made on the machine at hand.
#   benchmarks/record.sh [python] [outdir]      (defaults: .venv/bin/python, benchmarks/results)
# 1. OUT/<collective>_np<N>.json: every collective with 2 and 4 local processes,
#    64 KiB to 64 MiB (x4), every algorithm of ours, auto and gloo's own
#    (native) interleaved; our bytes move through the shared-memory transport
#    (--transport auto, as for any local run).
# 2. OUT/model/all_reduce_np<N>.json: all-reduce, 64 KiB to 64 MiB (x2), with
#    the ping-pong calibration (--calibrate 1) and 70 single calls per point,
#    the cost model's points (python -m mycollectives.bench.predicted FILE).
set -euo pipefail
PY=${1:-.venv/bin/python}
OUT=${2:-benchmarks/results}
mkdir -p "$OUT/model"
for n in 2 4; do
  for c in all_reduce all_gather reduce_scatter broadcast reduce all_to_all scatter gather; do
    $PY -m mycollectives.bench --nprocs $n -C $c -b 64K -e 64M -f 4 -n 5 -w 1 --reps 5 \
        --algorithm all --progress 0 --json "$OUT/${c}_np$n.json" --csv "$OUT/${c}_np$n.csv"
  done
  $PY -m mycollectives.bench --nprocs $n -C all_reduce -b 64K -e 64M -f 2 -n 10 -w 2 --reps 7 \
      --algorithm all --calibrate 1 --progress 0 --json "$OUT/model/all_reduce_np$n.json"
done
