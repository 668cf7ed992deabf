"""Lab 4: data parallelism from scratch, and our all-reduce inside torch's DDP.

    torchrun --standalone --nproc-per-node 8 labs/scripts/ddp.py --out ddp.json --trace ddp_trace.json
    python labs/scripts/ddp.py --virtual dgx_h100 --out ddp.json   # 8 virtual GPUs, no torchrun

Three ways to average gradients, all checked against a single-process
reference (the whole global batch on one model):

* torch's ``DistributedDataParallel`` as shipped;
* torch's DDP with ``register_comm_hook``: our ``mc.all_reduce`` on each bucket;
* ``BucketedDDP`` below: hooks on every parameter fill buckets (last layer
  first, the order backward produces them) and each full bucket's all-reduce
  is launched asynchronously (``async_op=True``: the package runs it on a
  communication thread, a virtual GPU on its communication stream) while
  backward goes on computing.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import mycollectives as mc
from labs.scripts.common import (
    Env,
    clock,
    launch,
    log,
    make_model,
    native_group,
    parser,
    save,
    setup,
    teardown,
    time_label,
    timed,
)


def batch(step: int, global_batch: int, width: int, env: Env) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + step)
    x, y = torch.randn(global_batch, width, generator=g), torch.randn(global_batch, 1, generator=g)
    return x.to(env.device), y.to(env.device)


def shard(t: torch.Tensor, env: Env) -> torch.Tensor:
    return t.chunk(env.world_size)[env.rank]  # this rank's slice of the global batch


class BucketedDDP:
    """Average gradients over the default group, bucket by bucket, during backward."""

    def __init__(self, module: nn.Module, env: Env, bucket_bytes: float, overlap: bool = True):
        self.module, self.env, self.overlap = module, env, overlap
        params = [p for p in module.parameters() if p.requires_grad]
        for p in params:
            mc.broadcast(p.data, 0)  # every rank starts from rank 0's weights
        self.buckets: list[list[nn.Parameter]] = [[]]
        size = 0
        for p in reversed(params):  # backward produces the last layer's gradients first
            if size >= bucket_bytes:
                self.buckets.append([])
                size = 0
            self.buckets[-1].append(p)
            size += p.numel() * p.element_size()
        self.bucket_of = {p: k for k, b in enumerate(self.buckets) for p in b}
        self.buffers = [torch.zeros(sum(p.numel() for p in b), device=env.device) for b in self.buckets]
        for p in params:
            p.register_post_accumulate_grad_hook(self._grad_ready)
        self.events: list[tuple[str, float, float]] = []  # (what, start, end), seconds of clock()

    def __call__(self, *args, **kwargs):
        self.missing = [len(b) for b in self.buckets]
        self.launched, self.pending = 0, []
        self.events = []  # this step's; a late note of the last step's final bucket goes to that step's list
        return self.module(*args, **kwargs)

    def _grad_ready(self, p: nn.Parameter) -> None:
        self.missing[self.bucket_of[p]] -= 1
        # launch buckets strictly in order, so every rank issues the same collectives in the same order
        while self.launched < len(self.buckets) and self.missing[self.launched] == 0:
            k = self.launched
            torch.cat([q.grad.reshape(-1) for q in self.buckets[k]], out=self.buffers[k])
            self.pending.append(self._all_reduce(k) if self.overlap else k)
            self.launched += 1

    def _all_reduce(self, k: int, async_op: bool = True):
        """Average bucket ``k`` over the ranks; with ``async_op`` return at once with a work whose
        completion notes the all-reduce's end (on the thread or stream that ran it)."""
        posted, events = clock(self.env), self.events
        work = mc.all_reduce(self.buffers[k], op=mc.ReduceOp.AVG, async_op=async_op)

        def done(_) -> None:  # buckets run in order: this one started when posted and the last was done
            start = max(posted, events[-1][2]) if events else posted
            events.append((f"bucket {k}", start, clock(self.env)))

        work.get_future().add_done_callback(done) if work is not None else done(None)
        return work

    def finish(self) -> None:
        """Wait for every bucket and write the averages back into ``.grad``."""
        assert self.launched == len(self.buckets), "some parameters did not receive a gradient"
        for item in self.pending:
            item.wait() if self.overlap else self._all_reduce(item, async_op=False)
        for bucket, buf in zip(self.buckets, self.buffers):
            offset = 0
            for p in bucket:
                p.grad.copy_(buf[offset : offset + p.numel()].view_as(p))
                offset += p.numel()


def mc_allreduce_hook(state, bucket):  # (object, dist.GradBucket) -> torch.futures.Future[torch.Tensor]
    """A DDP communication hook: our all-reduce on DDP's bucket, then the mean.

    No annotations: DDP inspects them, and ``from __future__ import annotations``
    turns them into strings that its check rejects.
    """
    buf = bucket.buffer()
    mc.all_reduce(buf)
    buf /= dist.get_world_size()
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    fut.set_result(buf)
    return fut


def grads_of(module: nn.Module) -> list[torch.Tensor]:
    return [p.grad.detach().clone() for p in module.parameters()]


def variants_of(width: int, depth: int, env: Env) -> dict:
    """The data-parallel variants compared, each as a function that builds a fresh one."""
    return {
        "torch DDP": lambda: DistributedDataParallel(
            make_model(width, depth, env), process_group=native_group()
        ),
        "torch DDP + mc hook": lambda: _with_hook(
            DistributedDataParallel(make_model(width, depth, env), process_group=native_group())
        ),
        "BucketedDDP overlap": lambda: BucketedDDP(make_model(width, depth, env), env, 4 << 20),
        "BucketedDDP no overlap": lambda: BucketedDDP(make_model(width, depth, env), env, 4 << 20, False),
    }


def check_gradients(variants: dict, x, y, want: list, loss_fn, env: Env, tol: dict) -> None:
    """Each variant's gradients after one step equal the reference's and torch DDP's, parameter by parameter."""
    got_by_variant = {}
    for name, build in variants.items():
        model = build()
        loss_fn(model(shard(x, env)), shard(y, env)).backward()
        if isinstance(model, BucketedDDP):
            model.finish()
            model = model.module
        got_by_variant[name] = grads_of(model)
        for k, (got, exp) in enumerate(zip(got_by_variant[name], want)):
            torch.testing.assert_close(got, exp, **tol, msg=lambda m, k=k, n=name: f"{n}, parameter {k}: {m}")
            torch.testing.assert_close(  # and torch's DDP, bucket for bucket
                got,
                got_by_variant["torch DDP"][k],
                **tol,
                msg=lambda m, k=k, n=name: f"{n} vs torch DDP, parameter {k}: {m}",
            )
        log(env, f"{name:24s} gradients equal torch DDP's and the single-process reference")


def bucket_caps(n_params: int) -> list[float]:
    """Bucket sizes in MiB for a float32 model: many buckets, a few, one."""
    mb = n_params * 4 / 2**20
    return [mb / 16, mb / 4, mb + 1]


def step_times(
    variants: dict, x, y, loss_fn, env: Env, new_model, n_params: int, steps: int
) -> dict[str, float]:
    """Seconds per training step (forward, backward, gradient averaging) per variant and bucket size."""
    xs, ys = shard(x, env), shard(y, env)

    def step_time(model, finish) -> float:
        def step():
            for p in model.parameters() if isinstance(model, nn.Module) else model.module.parameters():
                p.grad = None
            loss_fn(model(xs), ys).backward()
            finish()

        return timed(env, step, steps)

    times: dict[str, float] = {"no communication": step_time(new_model(), lambda: None)}
    for name in ("torch DDP", "torch DDP + mc hook"):
        times[name] = step_time(variants[name](), lambda: None)
    for cap in bucket_caps(n_params):
        for overlap in (True, False):
            m = BucketedDDP(new_model(), env, cap * 2**20, overlap)
            label = f"BucketedDDP {len(m.buckets)} bucket(s) {'overlap' if overlap else 'after backward'}"
            times[label] = step_time(m, m.finish)
    log(env, f"step times, {time_label(env)}")
    log(env, f"model: {n_params / 1e6:.2f} M parameters")
    for name, t in times.items():
        log(env, f"{name:45s} {t * 1e3:9.2f} ms/step")
    return times


def main() -> None:
    args = parser(__doc__)
    args.add_argument("--width", type=int, default=None)
    args.add_argument("--depth", type=int, default=8)
    args.add_argument("--batch", type=int, default=None, help="rows of the batch per rank")
    args.add_argument("--steps", type=int, default=None, help="timed steps per variant (median)")
    args.add_argument("--trace", default=None, help="rank 0 writes a chrome trace (open in ui.perfetto.dev)")
    a = args.parse_args()
    env = setup()
    native_group()  # torch's DDP communicates here, our collectives on the default group
    width = a.width or (4096 if env.gpu else 256)
    # virtual time is deterministic: one timed step (after a warm-up step) says all
    steps = a.steps or (20 if env.gpu else 1 if env.mode == "virtual" else 3)
    per_rank = a.batch or (64 if env.gpu else 16)
    gb = per_rank * env.world_size
    loss_fn = nn.MSELoss()
    tol = dict(rtol=1e-4, atol=1e-5) if env.gpu else dict(rtol=1e-5, atol=1e-6)

    # the reference: one process, the whole global batch
    ref = make_model(width, a.depth, env)
    x, y = batch(0, gb, width, env)
    loss_fn(ref(x), y).backward()
    want = grads_of(ref)
    n_params = sum(p.numel() for p in ref.parameters())
    log(
        env,
        f"model: {a.depth + 1} Linear layers of width {width}, {n_params / 1e6:.2f} M parameters, {env.backend}",
    )

    variants = variants_of(width, a.depth, env)
    check_gradients(variants, x, y, want, loss_fn, env, tol)
    times = step_times(variants, x, y, loss_fn, env, lambda: make_model(width, a.depth, env), n_params, steps)

    # one step's timeline: when did backward run, and when each bucket's all-reduce
    m = BucketedDDP(make_model(width, a.depth, env), env, bucket_caps(n_params)[0] * 2**20)
    timeline, hidden, comm = one_step(m, shard(x, env), shard(y, env), loss_fn, env, a.trace)
    log(
        env,
        f"{len(m.buckets)} buckets: {hidden * 1e3:.2f} of {comm * 1e3:.2f} ms of all-reduce ran during backward",
    )
    save(
        env,
        a.out,
        dict(
            n_params=n_params,
            width=width,
            depth=a.depth,
            times=times,
            timeline=timeline,
            overlap_fraction=hidden / comm if comm else 0.0,
        ),
    )
    teardown()


def one_step(
    m: BucketedDDP, xs, ys, loss_fn, env: Env, trace: str | None = None
) -> tuple[list, float, float]:
    """Time one step of ``m`` after a warm-up step: its timeline (what, start, end) from the step's
    start, and the seconds of all-reduce that ran during backward (hidden) out of all of it (comm)."""
    step = lambda: (loss_fn(m(xs), ys).backward(), m.finish())  # noqa: E731
    step()
    m.events.clear()
    dist.barrier(group=native_group())
    profiling = trace is not None and env.rank == 0
    with (
        torch.profiler.profile(activities=_activities(env)) if profiling else contextlib.nullcontext() as prof
    ):
        t0 = clock(env)
        with torch.profiler.record_function("forward"):
            loss = loss_fn(m(xs), ys)
        t1 = clock(env)
        with torch.profiler.record_function("backward"):
            loss.backward()
        t2 = clock(env)
        m.finish()
        t3 = clock(env)
    if profiling:
        prof.export_chrome_trace(trace)
        add_comm_thread(trace, m.events, t0)
        log(env, f"profiler trace written to {trace}")
    timeline = [("forward", t0, t1), ("backward", t1, t2), *m.events, ("finish", t2, t3)]
    timeline = [(w, s - t0, e - t0) for w, s, e in timeline]
    hidden = sum(max(0.0, min(e, t2 - t0) - s) for w, s, e in timeline if w.startswith("bucket"))
    comm = sum(e - s for w, s, e in timeline if w.startswith("bucket"))
    return timeline, hidden, comm


def add_comm_thread(path: str, events: list[tuple[str, float, float]], t0: float) -> None:
    """Add the communication thread's all-reduces to a chrome trace.

    torch's CPU profiler records only the thread that started it, so the
    buckets' all-reduces (run on our communication thread) are missing; we
    place them on the trace's clock by aligning ``t0`` with the "forward" event.
    (On GPUs the NCCL kernels appear in the trace by themselves, on the CUDA stream.)
    """
    trace = json.loads(Path(path).read_text())
    fwd = next(e for e in trace["traceEvents"] if e.get("name") == "forward" and e.get("ph") == "X")
    pid, tid = fwd["pid"], 999_999  # a lane of its own, named below
    name = dict(name="thread_name", ph="M", pid=pid, tid=tid, args=dict(name="comm thread (mycollectives)"))
    trace["traceEvents"].append(name)
    for what, start, end in events:
        ts, dur = fwd["ts"] + (start - t0) * 1e6, (end - start) * 1e6
        span = dict(name=f"mc.all_reduce {what}", ph="X", pid=pid, tid=tid, ts=ts, dur=dur)
        trace["traceEvents"].append({**span, "cat": "user_annotation"})
    Path(path).write_text(json.dumps(trace))


def _with_hook(model: DistributedDataParallel) -> DistributedDataParallel:
    model.register_comm_hook(None, mc_allreduce_hook)
    return model


def _activities(env: Env) -> list:
    acts = [torch.profiler.ProfilerActivity.CPU]
    return acts + [torch.profiler.ProfilerActivity.CUDA] if env.gpu else acts


if __name__ == "__main__":
    launch(main)
