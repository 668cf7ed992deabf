"""Lab 6: pipeline parallelism with send/recv, GPipe and 1F1B.

    torchrun --standalone --nproc-per-node 8 labs/scripts/pipeline.py --out pipeline.json
    python labs/scripts/pipeline.py --virtual dgx_h100:2 --out pipeline.json   # 16 virtual GPUs, no torchrun

An MLP of ``p * layers`` blocks is cut into ``p`` stages, one per rank. A
batch is split into ``m`` micro-batches. A schedule is data: for each stage, a
list of actions ``("F", i)`` (forward micro-batch ``i``) and ``("B", i)``.
Activations travel downstream and their gradients upstream with our
point-to-point layer; a send is posted together with the next action's receive
(one batched exchange), which is what keeps 1F1B free of deadlock under NCCL.
Outputs and gradients are checked against the unsplit model; the measured
bubble is compared with ``(p - 1) / (m + p - 1)``.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from labs.scripts.common import Env, clock, launch, log, native_group, parser, save, seeded, setup, teardown
from mycollectives.transport import Label, Message, resolve_group


def schedule(kind: str, m: int, p: int, s: int) -> list[tuple[str, int]]:
    """The actions of stage ``s`` of ``p`` for ``m`` micro-batches."""
    if kind == "gpipe":  # all forwards, then all backwards
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    warmup = min(p - s - 1, m)  # 1F1B: fill the pipe, then alternate, then drain
    acts = [("F", i) for i in range(warmup)]
    for i in range(m - warmup):
        acts += [("F", warmup + i), ("B", i)]
    return acts + [("B", i) for i in range(m - warmup, m)]


def make_model(width: int, blocks: int, env: Env) -> nn.Sequential:
    blocks_ = [nn.Sequential(nn.Linear(width, width), nn.Tanh()) for _ in range(blocks)]
    return seeded(nn.Sequential(*blocks_)).to(env.device)


def exchange(send: tuple[torch.Tensor, int] | None, recv: tuple[torch.Tensor, int] | None) -> None:
    """Post one send and one receive together and wait for both (NCCL: one batch)."""
    t = resolve_group(None)
    sends = [Message(send[0].contiguous(), send[1])] if send else []
    recvs = [Message(recv[0], recv[1])] if recv else []
    if sends or recvs:
        send_works, recv_works = t.exchange(sends, recvs, Label("pipeline"))
        for w in send_works + recv_works:
            w.wait()


def run_stage(stage: nn.Module, acts, env: Env, xs, ys, shape) -> dict:
    """Execute one stage's actions; returns outputs (last stage), timeline, peak in-flight."""
    s, p, m = env.rank, env.world_size, len(xs)
    first, last = s == 0, s == p - 1
    inputs: dict[int, torch.Tensor] = {}
    outputs: dict[int, torch.Tensor] = {}
    results, events, peak = {}, [], 0
    pending = None  # the previous action's send, posted with this action's receive
    dist.barrier(group=native_group())
    t0 = clock(env)
    for kind, i in acts:
        if kind == "F":
            buf = xs[i] if first else torch.empty(shape, device=env.device)
            exchange(pending, None if first else (buf, s - 1))
            start = clock(env)
            inputs[i] = buf.requires_grad_(not first)
            out = stage(inputs[i])
            outputs[i] = nn.functional.mse_loss(out, ys[i]) / m if last else out
            if last:
                results[i] = out.detach()
            pending = None if last else (out.detach(), s + 1)
            peak = max(peak, len(outputs))
        else:
            grad = None if last else torch.empty(shape, device=env.device)
            exchange(pending, None if last else (grad, s + 1))
            start = clock(env)
            outputs.pop(i).backward(grad)
            x = inputs.pop(i)
            pending = None if first else (x.grad, s - 1)
        events.append((kind, i, start - t0, clock(env) - t0))
    exchange(pending, None)
    return dict(outputs=results, events=events, peak=peak, total=clock(env) - t0)


def bubble_of(r: dict, p: int) -> tuple[float, float, list[dict]]:
    """The bubble of a step that :func:`run_stage` timed (call on every stage): the mean over
    stages of the fraction of the step spent not computing; the step's time; every stage's record."""
    busy = sum(e - b for _, _, b, e in r["events"])
    gathered: list = [None] * p
    dist.all_gather_object(gathered, dict(events=r["events"], busy=busy, total=r["total"], peak=r["peak"]))
    total = max(g["total"] for g in gathered)
    return sum(1 - g["busy"] / total for g in gathered) / p, total, gathered


def main() -> None:
    args = parser(__doc__)
    args.add_argument("--width", type=int, default=None)
    args.add_argument("--layers", type=int, default=2, help="blocks per stage")
    args.add_argument("--micro", type=int, default=None, help="rows per micro-batch")
    args.add_argument("--micro-batches", type=int, nargs="*", default=None, help="values of m to sweep")
    a = args.parse_args()
    env = setup()
    p, s = env.world_size, env.rank
    width = a.width or (4096 if env.gpu else 512)
    micro = a.micro or (64 if env.gpu else 64)
    ms = a.micro_batches or ([1, 2, 4, 8, 16, 32] if env.gpu else [1, 2, 4, 8])
    full = make_model(width, p * a.layers, env)
    stage = full[s * a.layers : (s + 1) * a.layers]
    tol = dict(rtol=1e-4, atol=1e-5) if env.gpu else dict(rtol=1e-5, atol=1e-6)
    sweep = []
    for m in ms:
        g = torch.Generator().manual_seed(m)
        x, y = torch.randn(m * micro, width, generator=g), torch.randn(m * micro, width, generator=g)
        x, y = x.to(env.device), y.to(env.device)
        # the reference: the unsplit model on the whole batch, on every rank
        full.zero_grad()
        ref_out = full(x)
        nn.functional.mse_loss(ref_out, y).backward()
        ref_grads = [q.grad.clone() for q in stage.parameters()]
        for kind in ("gpipe", "1f1b"):
            if env.mode != "virtual":  # virtual time is deterministic: no warm-up to leave out
                run_stage(stage, schedule(kind, m, p, s), env, x.chunk(m), y.chunk(m), (micro, width))
            stage.zero_grad()
            r = run_stage(stage, schedule(kind, m, p, s), env, x.chunk(m), y.chunk(m), (micro, width))
            if s == p - 1:
                got = torch.cat([r["outputs"][i] for i in range(m)])
                torch.testing.assert_close(
                    got, ref_out.detach(), **tol, msg=lambda e, k=kind: f"{k} outputs: {e}"
                )
            for q, want in zip(stage.parameters(), ref_grads):
                torch.testing.assert_close(
                    q.grad, want, **tol, msg=lambda e, k=kind: f"{k} stage {s} grads: {e}"
                )
            bound = m if kind == "gpipe" else min(p - s, m)
            assert r["peak"] == bound, (
                f"{kind} stage {s}: {r['peak']} micro-batches in flight, expected {bound}"
            )
            bubble, total, gathered = bubble_of(r, p)
            sweep.append(
                dict(
                    schedule=kind,
                    m=m,
                    bubble=bubble,
                    ideal=(p - 1) / (m + p - 1),
                    time=total,
                    peaks=[g["peak"] for g in gathered],
                    timelines=[g["events"] for g in gathered],
                )
            )
            log(
                env,
                f"{kind:5s} m={m:3d}: {total * 1e3:8.2f} ms, bubble {bubble:.3f} (ideal {(p - 1) / (m + p - 1):.3f})",
            )
    log(env, f"outputs and gradients of GPipe and 1F1B equal the unsplit model's for m in {ms}")
    save(env, a.out, dict(p=p, width=width, micro=micro, layers=a.layers, sweep=sweep))
    teardown()


if __name__ == "__main__":
    launch(main)
