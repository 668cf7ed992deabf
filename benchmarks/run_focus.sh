#!/usr/bin/env bash
# The target sizes only (16 and 64 MiB), more interleaved repetitions than the
# sweeps (see chapters/benchmarks.md). All-reduce with our main algorithms,
# every other collective with all of ours.
# Usage: benchmarks/run_focus.sh [python] [transport]
#   transport group (default): our bytes through gloo's send/recv -> benchmarks/results/focus/
#   transport shm: through shared memory                           -> benchmarks/results/focus_shm/
set -euo pipefail
PY=${1:-.venv/bin/python}
TRANSPORT=${2:-group}
case "$TRANSPORT" in
  group) OUT=benchmarks/results/focus ;;
  shm) OUT=benchmarks/results/focus_shm ;;
  *) echo "transport: group or shm, not $TRANSPORT" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
for n in 2 4; do
  $PY -m mycollectives.bench --nprocs $n --transport "$TRANSPORT" -C all_reduce -b 16M -e 64M -f 4 -n 3 -w 1 \
      --reps 11 --algorithm auto,ring,direct,reduce_broadcast,recursive_doubling,rabenseifner,native \
      --json "$OUT/all_reduce_np$n.json" --csv "$OUT/all_reduce_np$n.csv"
  for c in broadcast reduce all_gather reduce_scatter all_to_all scatter gather; do
    $PY -m mycollectives.bench --nprocs $n --transport "$TRANSPORT" -C $c -b 16M -e 64M -f 4 -n 3 -w 1 \
        --reps 7 --algorithm all --json "$OUT/${c}_np$n.json" --csv "$OUT/${c}_np$n.csv"
  done
done
