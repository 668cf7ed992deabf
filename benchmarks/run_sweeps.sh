#!/usr/bin/env bash
# The recorded sweeps of chapters/benchmarks.md: our algorithms against gloo's
# own collectives, 2 and 4 local processes, interleaved, on this machine.
# Usage: benchmarks/run_sweeps.sh [python] [transport] [outdir]
#   transport group (default): every collective, our bytes through gloo's
#     send/recv -> benchmarks/results/
#   transport shm: all-reduce only (the cost model's points), through shared
#     memory -> benchmarks/results/shm/
#   outdir: record the all-reduce sweeps only, into outdir (the repeats the
#     benchmarks page compares: benchmarks/results/repeats/<transport>_<k>/)
# The all-reduce sweeps calibrate by ping-pong first and time 70 single calls
# per point (10 calls in each of 7 interleaved repetitions): the cost model is
# judged on the lower quartile of those calls (mycollectives.bench.model).
set -euo pipefail
PY=${1:-.venv/bin/python}
TRANSPORT=${2:-group}
case "$TRANSPORT" in
  group) OUT=benchmarks/results; OTHERS="broadcast reduce all_gather reduce_scatter all_to_all scatter gather" ;;
  shm) OUT=benchmarks/results/shm; OTHERS="" ;;
  *) echo "transport: group or shm, not $TRANSPORT" >&2; exit 2 ;;
esac
if [ -n "${3:-}" ]; then OUT=$3; OTHERS=""; fi
mkdir -p "$OUT"
for n in 2 4; do
  $PY -m mycollectives.bench --nprocs $n --transport "$TRANSPORT" -C all_reduce -b 64K -e 64M -f 2 -n 10 -w 2 \
      --reps 7 --algorithm all --calibrate 1 --json "$OUT/all_reduce_np$n.json" --csv "$OUT/all_reduce_np$n.csv"
  for c in $OTHERS; do
    $PY -m mycollectives.bench --nprocs $n --transport "$TRANSPORT" -C $c -b 64K -e 64M -f 4 -n 3 -w 1 \
        --reps 5 --algorithm all --json "$OUT/${c}_np$n.json" --csv "$OUT/${c}_np$n.csv"
  done
done
