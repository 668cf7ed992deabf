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

The bubble is the time a stage waits for another stage's work. A message's own
time (one activation between neighbours, measured first by
:func:`message_time`) is communication, which the formula leaves out and
chapter 5's calculator adds to every micro-batch; :func:`bubble_of` counts
it apart, and also reports the fraction of the step spent not computing.
On a virtual GPU (``--virtual``) every kernel takes at least a few
microseconds and a message about ten, so the defaults there are stages of
many narrow layers: a stage's work per micro-batch then dwarfs both a
message and the loss that only the last stage computes.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from labs.scripts.common import (
    Env,
    clock,
    launch,
    log,
    native_group,
    parser,
    save,
    seeded,
    setup,
    teardown,
    time_label,
)
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


def timed_exchange(env: Env, send, recv) -> float:
    """:func:`exchange`, and the seconds it took."""
    t0 = clock(env)
    exchange(send, recv)
    return clock(env) - t0


def message_time(env: Env, shape, reps: int = 3) -> float:
    """Seconds one activation of ``shape`` takes from a stage to the next when both are ready: every
    stage sends to the next and receives from the one before at once, as the schedules do (the median
    of ``reps``, on the slowest stage)."""
    s, p = env.rank, env.world_size
    out, buf = torch.zeros(shape, device=env.device), torch.empty(shape, device=env.device)
    times = []
    for _ in range(reps):
        dist.barrier(group=native_group())
        times.append(timed_exchange(env, (out, s + 1) if s < p - 1 else None, (buf, s - 1) if s else None))
    gathered: list = [None] * p
    dist.all_gather_object(gathered, sorted(times)[len(times) // 2])
    return max(gathered)


def run_stage(stage: nn.Module, acts, env: Env, xs, ys, shape) -> dict:
    """Execute one stage's actions; returns outputs (last stage), timeline, the seconds of each
    exchange of messages, peak in-flight."""
    s, p, m = env.rank, env.world_size, len(xs)
    first, last = s == 0, s == p - 1
    inputs: dict[int, torch.Tensor] = {}
    outputs: dict[int, torch.Tensor] = {}
    results, events, waits, peak = {}, [], [], 0
    pending = None  # the previous action's send, posted with this action's receive
    dist.barrier(group=native_group())
    t0 = clock(env)
    for kind, i in acts:
        if kind == "F":
            buf = xs[i] if first else torch.empty(shape, device=env.device)
            waits.append(timed_exchange(env, pending, None if first else (buf, s - 1)))
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
            waits.append(timed_exchange(env, pending, None if last else (grad, s + 1)))
            start = clock(env)
            outputs.pop(i).backward(grad)
            x = inputs.pop(i)
            pending = None if first else (x.grad, s - 1)
        events.append((kind, i, start - t0, clock(env) - t0))
    waits.append(timed_exchange(env, pending, None))
    return dict(outputs=results, events=events, waits=waits, peak=peak, total=clock(env) - t0)


def bubble_of(r: dict, p: int, message: float = 0.0) -> tuple[float, float, list[dict]]:
    """The bubble of a step that :func:`run_stage` timed (call on every stage): the mean over
    stages of the fraction of the step spent neither computing nor moving the stage's own messages
    (each exchange counts as communication up to ``message`` seconds, one message's time; the rest
    of it is waiting for another stage); the step's time; every stage's record.
    With ``message=0``, the fraction of the step spent not computing."""
    busy = sum(e - b for _, _, b, e in r["events"])
    comm = sum(min(w, message) for w in r.get("waits", ()))
    record = dict(events=r["events"], busy=busy, comm=comm, total=r["total"], peak=r["peak"])
    gathered: list = [None] * p
    dist.all_gather_object(gathered, record)
    total = max(g["total"] for g in gathered)
    return sum(1 - (g["busy"] + g["comm"]) / total for g in gathered) / p, total, gathered


def record(r: dict, env: Env, kind: str, m: int, message: float) -> dict:
    """The sweep's row for one timed step (call on every stage): the bubble against the formula, the
    fraction of the step not computing, the step's time, the peaks and timelines; rank 0 logs it."""
    p = env.world_size
    bubble, total, gathered = bubble_of(r, p, message)
    idle = sum(1 - g["busy"] / total for g in gathered) / p
    ideal = (p - 1) / (m + p - 1)
    log(
        env,
        f"{kind:5s} m={m:3d}: {total * 1e3:8.2f} ms, bubble {bubble:.3f} (ideal {ideal:.3f}), "
        f"not computing {idle:.3f}",
    )
    peaks, timelines = [g["peak"] for g in gathered], [g["events"] for g in gathered]
    return dict(
        schedule=kind,
        m=m,
        bubble=bubble,
        idle=idle,
        ideal=ideal,
        time=total,
        peaks=peaks,
        timelines=timelines,
    )


def main() -> None:
    args = parser(__doc__)
    args.add_argument("--width", type=int, default=None)
    args.add_argument("--layers", type=int, default=None, help="blocks per stage")
    args.add_argument("--micro", type=int, default=None, help="rows per micro-batch")
    args.add_argument("--micro-batches", type=int, nargs="*", default=None, help="values of m to sweep")
    a = args.parse_args()
    env = setup()
    p, s = env.world_size, env.rank
    virtual = env.mode == "virtual"  # stages of many narrow layers (see the module)
    width = a.width or (4096 if env.gpu else 128 if virtual else 512)
    micro = a.micro or 64
    layers = a.layers or (32 if virtual else 2)
    ms = a.micro_batches or ([1, 2, 4, 8, 16, 32] if env.gpu else [4, 8, 16] if virtual else [1, 2, 4, 8])
    full = make_model(width, p * layers, env)
    stage = full[s * layers : (s + 1) * layers]
    message = message_time(env, (micro, width))
    log(env, f"times are {time_label(env)}")
    log(env, f"model: {p} stages of {layers} layers of width {width}")
    log(env, f"one activation ({micro} x {width}) to the next stage: {message * 1e6:.1f} us")
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
            sweep.append(record(r, env, kind, m, message))
    log(env, f"outputs and gradients of GPipe and 1F1B equal the unsplit model's for m in {ms}")
    save(env, a.out, dict(p=p, width=width, micro=micro, layers=layers, message=message, sweep=sweep))
    teardown()


if __name__ == "__main__":
    launch(main)
