#!/usr/bin/env bash
# The recorded sweeps of chapters/benchmarks.md: our algorithms against gloo's
# own collectives, 2 and 4 local processes, interleaved, on this machine.
# Usage: benchmarks/run_sweeps.sh [python] [transport]
#   transport group (default): every collective, our bytes through gloo's
#     send/recv -> benchmarks/results/
#   transport shm: all-reduce only (the cost model's points), through shared
#     memory -> benchmarks/results/shm/
set -euo pipefail
PY=${1:-.venv/bin/python}
TRANSPORT=${2:-group}
case "$TRANSPORT" in
  group) OUT=benchmarks/results; OTHERS="broadcast reduce all_gather reduce_scatter all_to_all scatter gather" ;;
  shm) OUT=benchmarks/results/shm; OTHERS="" ;;
  *) echo "transport: group or shm, not $TRANSPORT" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
for n in 2 4; do
  $PY -m mycollectives.bench --nprocs $n --transport "$TRANSPORT" -C all_reduce -b 64K -e 64M -f 2 -n 3 -w 1 \
      --reps 11 --algorithm all --calibrate 1 --json "$OUT/all_reduce_np$n.json" --csv "$OUT/all_reduce_np$n.csv"
  for c in $OTHERS; do
    $PY -m mycollectives.bench --nprocs $n --transport "$TRANSPORT" -C $c -b 64K -e 64M -f 4 -n 3 -w 1 \
        --reps 5 --algorithm all --json "$OUT/${c}_np$n.json" --csv "$OUT/${c}_np$n.csv"
  done
done
