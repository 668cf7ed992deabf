#!/usr/bin/env bash
# The book's recorded run on one GPU: what the CUDA code paths print there.
#   benchmarks/run_gpu.sh OUTDIR
# Needs a CUDA GPU and a python with torch (CUDA build) and matplotlib; no
# Jupyter (the lab runs through labs/scripts/run_myst.py). With one GPU, NCCL
# runs a world of one: our algorithms' CUDA path (batched NCCL send/recv,
# copies and reductions on the device) against NCCL's own collective, and
# lab 1's measurements at GPU sizes. Several GPUs: see chapters/benchmarks.md.
set -uo pipefail
out=${1:?usage: benchmarks/run_gpu.sh OUTDIR}
py=${PYTHON:-python3}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MPLBACKEND=Agg PYTHONUNBUFFERED=1
status=0
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  $py -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', '.'.join(map(str, torch.cuda.nccl.version())))"
} > "$out/device.txt" 2>&1 || status=1
cat "$out/device.txt"

for c in all_reduce all_gather reduce_scatter broadcast reduce all_to_all scatter gather; do
  echo "== $c"
  $py -m mycollectives.bench -C "$c" -b 8 -e 1G -f 8 -n 20 -w 5 --reps 3 --algorithm all --progress 0 \
    --json "$out/${c}_1gpu.json" > "$out/${c}_1gpu.txt" 2>&1 || { status=1; tail -20 "$out/${c}_1gpu.txt"; }
done
# the same under torchrun (one process, LOCAL_RANK 0)
$py -m torch.distributed.run --standalone --nproc-per-node 1 -m mycollectives.bench -C all_reduce \
  -b 1M -e 64M -f 8 --algorithm ring,native --progress 0 > "$out/all_reduce_torchrun.txt" 2>&1 || status=1

echo "== labs 4 and 5 (DDP, FSDP) with one rank"
for s in ddp fsdp; do
  $py -m torch.distributed.run --standalone --nproc-per-node 1 labs/scripts/$s.py --out "$out/$s.json" \
    > "$out/$s.txt" 2>&1 || { status=1; tail -20 "$out/$s.txt"; }
done

echo "== lab 1 on the GPU"
$py labs/scripts/run_myst.py labs/lab1_memory.md --figures "$out" > "$out/lab1_memory.txt" 2>&1 || { status=1; tail -30 "$out/lab1_memory.txt"; }
exit $status
