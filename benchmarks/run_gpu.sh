#!/usr/bin/env bash
# The book's recorded run on GPUs: what the CUDA code paths measure there.
#   benchmarks/run_gpu.sh [OUTDIR]    (default benchmarks/results/gpu/<card>)
# Needs a CUDA GPU and a python with torch (CUDA build), pytest and
# matplotlib; no Jupyter (the lab runs through labs/scripts/run_myst.py).
# First every test that needs CUDA (make test-gpu's), then: with one GPU, NCCL
# runs a world of one: our algorithms' CUDA path (batched NCCL send/recv,
# copies and reductions on the device) against NCCL's own collective, the
# package's per-message wait against NCCL's (benchmarks/nccl_overhead.py;
# with two GPUs or more, a ping-pong), every lab script, and lab 1's
# measurements at GPU sizes. device.txt names the card. Several nodes: see
# chapters/benchmarks.md.
set -uo pipefail
py=${PYTHON:-python3}
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr -c 'A-Za-z0-9\n' '_' | tr -s '_')
out=${1:-benchmarks/results/gpu/${card:-unknown_gpu}}
gpus=$(nvidia-smi --list-gpus 2>/dev/null | wc -l)
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MPLBACKEND=Agg PYTHONUNBUFFERED=1
status=0
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  $py -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', '.'.join(map(str, torch.cuda.nccl.version())))"
} > "$out/device.txt" 2>&1 || status=1
cat "$out/device.txt"

echo "== the tests that need CUDA (make test-gpu)"
$py -m pytest -q -ra -m gpu tests --junitxml "$out/test_gpu.xml" > "$out/test_gpu.txt" 2>&1 || status=1
tail -5 "$out/test_gpu.txt"

echo "== per-message overhead of the NCCL path (lab 2)"
$py -m torch.distributed.run --standalone --nproc-per-node 1 benchmarks/nccl_overhead.py \
  --json "$out/nccl_overhead_1gpu.json" > "$out/nccl_overhead_1gpu.txt" 2>&1 || status=1
cat "$out/nccl_overhead_1gpu.txt"
if [ "$gpus" -ge 2 ]; then
  $py -m torch.distributed.run --standalone --nproc-per-node 2 benchmarks/nccl_overhead.py \
    --json "$out/nccl_overhead_2gpu.json" > "$out/nccl_overhead_2gpu.txt" 2>&1 || status=1
  cat "$out/nccl_overhead_2gpu.txt"
fi

for c in all_reduce all_gather reduce_scatter broadcast reduce all_to_all scatter gather; do
  echo "== $c"
  $py -m mycollectives.bench -C "$c" -b 8 -e 1G -f 8 -n 20 -w 5 --reps 3 --algorithm all --progress 0 \
    --json "$out/${c}_1gpu.json" > "$out/${c}_1gpu.txt" 2>&1 || { status=1; tail -20 "$out/${c}_1gpu.txt"; }
done
# the same under torchrun (one process, LOCAL_RANK 0)
$py -m torch.distributed.run --standalone --nproc-per-node 1 -m mycollectives.bench -C all_reduce \
  -b 1M -e 64M -f 8 --algorithm ring,native --progress 0 > "$out/all_reduce_torchrun.txt" 2>&1 || status=1

echo "== every lab script with one rank"
declare -A extra=([faults]="--fault none --rank 0" [allreduce_topo]="--local-size 1")
for s in pingpong ddp fsdp pipeline moe allreduce_topo faults; do
  # shellcheck disable=SC2086  # the extra flags are words
  $py -m torch.distributed.run --standalone --nproc-per-node 1 labs/scripts/$s.py ${extra[$s]:-} \
    --out "$out/$s.json" > "$out/$s.txt" 2>&1 || { status=1; tail -20 "$out/$s.txt"; }
done

echo "== lab 1 on the GPU"
$py labs/scripts/run_myst.py labs/lab1_memory.md --figures "$out" > "$out/lab1_memory.txt" 2>&1 || { status=1; tail -30 "$out/lab1_memory.txt"; }
exit $status
