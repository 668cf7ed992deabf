"""Every strategy against the unsharded reference, on whatever group runs it (chapter 5).

Each ``check_*`` function runs on every rank of a group (a local world,
``mc.run_gloo``, or a ``torchrun`` job), splits the small Transformer the
strategy's way, runs a forward and backward pass, computes the unsharded
reference on its own (every rank can: it is small and seeded), and returns
the largest absolute differences, ``{"output": .., "grads": .., ...}``.
The tests hold them below ``1e-9`` (float64); :func:`worst` picks the
largest over ranks.

>>> errs = mc.run_local(check_tp, 2)
>>> worst(errs) < 1e-12
True
"""

from __future__ import annotations

import torch

from ... import api
from ...parallel import cp, dp, ep, ep_hier, fsdp, pp, sp, tp
from ...parallel import model as M
from ...parallel.comm import all_reduce_
from ...parallel.mesh import Mesh


def _diff(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        raise AssertionError(f"shapes differ: {tuple(a.shape)} against the reference's {tuple(b.shape)}")
    return float((a - b).detach().abs().max()) if a.numel() else 0.0


def _grad_diff(got: M.Params, want: M.Params) -> float:
    return max(_diff(g[k], w[k]) for g, w in zip(got, want) for k in g)


def _divides(rank: int, what: str, n: int, p: int) -> None:
    if n % p:
        raise ValueError(f"rank {rank}: the config's {what} ({n}) must be a multiple of the world size {p}")


def worst(per_rank: list[dict[str, float]]) -> float:
    """The largest difference over ranks and quantities."""
    return max(max(d.values()) for d in per_rank)


def check_dp(rank: int, overlap: bool = False, bucket_bytes: int = 1 << 10, cfg: M.BlockConfig | None = None):
    """Data parallelism: the batch split over ranks, gradients all-reduced in buckets."""
    p = api.get_world_size()
    cfg = cfg or M.BlockConfig(batch=2 * p)
    _divides(rank, "batch", cfg.batch, p)
    y_ref, g_ref, _ = M.reference(cfg)
    params = M.leaves(M.init_params(cfg))
    x, t = M.batch(cfg)
    b = cfg.batch // p
    mine = slice(rank * b, (rank + 1) * b)
    y = dp.dp_step(params, x[:, mine], t[:, mine], cfg, t.numel(), None, bucket_bytes, overlap)
    return {"output": _diff(y.detach(), y_ref[:, mine]), "grads": _grad_diff(M.grads_of(params), g_ref)}


def check_fsdp(rank: int, replicate: int = 1, prefetch: bool = True, cfg: M.BlockConfig | None = None):
    """ZeRO-3 over ``world / replicate`` ranks, replicated ``replicate`` times (HSDP)."""
    p = api.get_world_size()
    cfg = cfg or M.BlockConfig(batch=2 * p)
    _divides(rank, "batch", cfg.batch, p)
    y_ref, g_ref, _ = M.reference(cfg)
    mesh = Mesh({"replicate": replicate, "shard": p // replicate})
    like = M.init_params(cfg)
    size, me = mesh.shape["shard"], mesh.coord("shard")
    x, t = M.batch(cfg)
    b = cfg.batch // p
    mine = slice(rank * b, (rank + 1) * b)
    y, grads = fsdp.fsdp_step(
        fsdp.shard_units(like, me, size), like, x[:, mine], t[:, mine], cfg, t.numel(), mesh, prefetch
    )
    want = fsdp.shard_units(g_ref, me, size)
    return {"output": _diff(y, y_ref[:, mine]), "grads": max(_diff(g, w) for g, w in zip(grads, want))}


def check_tp(rank: int, cfg: M.BlockConfig | None = None):
    """Megatron tensor parallelism: heads and MLP columns split over the ranks."""
    p = api.get_world_size()
    cfg = cfg or M.BlockConfig(heads=2 * p, d=4 * p, ffn=8 * p)
    y_ref, g_ref, xg_ref = M.reference(cfg)
    params = tp.shard_tp(M.init_params(cfg), rank, p)
    x, t = M.batch(cfg)
    x.requires_grad_()
    y = tp.tp_forward(params, x, cfg, None)
    M.loss_fn(y, t, t.numel()).backward()
    return {
        "output": _diff(y.detach(), y_ref),
        "input grad": _diff(x.grad, xg_ref),
        "grads": _grad_diff(M.grads_of(params), tp.shard_tp(g_ref, rank, p)),
    }


def check_sp(rank: int, regather: bool = True, cfg: M.BlockConfig | None = None):
    """Sequence parallelism: tensor parallelism with the sequence split between its regions."""
    p = api.get_world_size()
    cfg = cfg or M.BlockConfig(heads=2 * p, d=4 * p, ffn=8 * p, seq=4 * p)
    _divides(rank, "seq", cfg.seq, p)
    y_ref, g_ref, xg_ref = M.reference(cfg)
    params = tp.shard_tp(M.init_params(cfg), rank, p)
    x, t = M.batch(cfg)
    s = cfg.seq // p
    mine = slice(rank * s, (rank + 1) * s)
    xs = x[mine].clone().requires_grad_()
    y = sp.sp_forward(params, xs, cfg, None, regather)
    M.loss_fn(y, t[mine], t.numel()).backward()
    sp.sync_norm_grads(params, None)
    return {
        "output": _diff(y.detach(), y_ref[mine]),
        "input grad": _diff(xs.grad, xg_ref[mine]),
        "grads": _grad_diff(M.grads_of(params), tp.shard_tp(g_ref, rank, p)),
    }


def check_cp(rank: int, variant: str = "ring", cfg: M.BlockConfig | None = None):
    """Context parallelism: the sequence split, attention by a ring or by an all-gather."""
    p = api.get_world_size()
    cfg = cfg or M.BlockConfig(seq=3 * p)
    _divides(rank, "seq", cfg.seq, p)
    y_ref, g_ref, xg_ref = M.reference(cfg)
    params = M.leaves(M.init_params(cfg))
    x, t = M.batch(cfg)
    s = cfg.seq // p
    mine = slice(rank * s, (rank + 1) * s)
    xs = x[mine].clone().requires_grad_()
    y = cp.cp_forward(params, xs, cfg, None, variant)
    M.loss_fn(y, t[mine], t.numel()).backward()
    grads = M.grads_of(params)
    for g in grads:  # every rank holds the whole model: sum its gradients over the sequence shards
        for v in g.values():
            all_reduce_(v, None)
    return {
        "output": _diff(y.detach(), y_ref[mine]),
        "input grad": _diff(xs.grad, xg_ref[mine]),
        "grads": _grad_diff(grads, g_ref),
    }


def check_ep(rank: int, nodes: int = 1, hierarchical: bool = False, cfg: ep.MoEConfig | None = None):
    """Expert parallelism: experts split over ranks, tokens dispatched by all-to-all
    (``hierarchical``: over a mesh of ``nodes`` nodes, the network first, then NVLink)."""
    p = api.get_world_size()
    cfg = cfg or ep.MoEConfig(experts=2 * p, top_k=min(3, 2 * p))
    full = ep.init_moe(cfg)
    local = cfg.experts // p
    mine = slice(rank * local, (rank + 1) * local)
    router = full["router"].clone().requires_grad_()
    w1, w2 = (full[w][mine].clone().requires_grad_() for w in ("w1", "w2"))
    x, t = ep.tokens(cfg, rank)
    x.requires_grad_()
    if hierarchical:
        out = ep_hier.moe_hierarchical(
            x, router, w1, w2, cfg.top_k, Mesh({"node": nodes, "local": p // nodes})
        )
    else:
        out = ep.moe_ep(x, router, w1, w2, cfg.top_k)
    (out * t).sum().backward()
    all_reduce_(router.grad, None)  # the router is replicated: its gradient is summed, as DP would
    ref = {k: v.clone().requires_grad_() for k, v in full.items()}
    xs = [ep.tokens(cfg, r) for r in range(p)]
    xa = torch.cat([u for u, _ in xs]).requires_grad_()
    ro = ep.moe_reference(xa, ref, cfg.top_k)
    (ro * torch.cat([v for _, v in xs])).sum().backward()
    rows = slice(rank * cfg.tokens, (rank + 1) * cfg.tokens)
    return {
        "output": _diff(out.detach(), ro[rows].detach()),
        "input grad": _diff(x.grad, xa.grad[rows]),
        "grads": max(_diff(w1.grad, ref["w1"].grad[mine]), _diff(w2.grad, ref["w2"].grad[mine])),
        "router grad": _diff(router.grad, ref["router"].grad),
    }


def check_pp(rank: int, microbatches: int = 2, cfg: M.BlockConfig | None = None):
    """Pipeline parallelism (GPipe): one stage per rank, micro-batches by send/recv."""
    p = api.get_world_size()
    cfg = cfg or M.BlockConfig(layers=2 * p, batch=2 * microbatches)
    y_ref, g_ref, _ = M.reference(cfg)
    layers = list(pp.stage_layers(cfg, rank, p))
    every = M.init_params(cfg)
    params = M.leaves([every[i] for i in layers])
    x, t = M.batch(cfg)
    out = pp.pp_step(params, list(x.chunk(microbatches, 1)), list(t.chunk(microbatches, 1)), cfg, t.numel())
    errs = {"grads": _grad_diff(M.grads_of(params), [g_ref[i] for i in layers])}
    if rank == p - 1:
        errs["output"] = _diff(torch.cat(out, dim=1), y_ref)
    return errs


def suite(p: int) -> list[tuple[str, object, tuple]]:
    """The checks that fit a world of ``p`` ranks: (name, function, arguments)."""
    out = [
        ("data parallel, buckets", check_dp, ()),
        ("data parallel, overlapped buckets", check_dp, (True,)),
        ("FSDP (ZeRO-3)", check_fsdp, (1,)),
        ("tensor parallel", check_tp, ()),
        ("sequence parallel", check_sp, ()),
        ("context parallel, ring", check_cp, ("ring",)),
        ("context parallel, all-gather", check_cp, ("all_gather",)),
        ("expert parallel", check_ep, ()),
        ("pipeline parallel", check_pp, ()),
    ]
    if p % 2 == 0 and p > 2:
        out.insert(3, ("HSDP, 2 replicas", check_fsdp, (2,)))
        out.insert(-1, ("expert parallel, hierarchical", check_ep, (2, True)))
    return out


def main(tolerance: float = 1e-9) -> None:
    """Every check on the ranks of a ``torchrun`` job over gloo; rank 0 prints the table.

    ``torchrun --standalone --nproc-per-node 4 -m mycollectives.book.parallel.checks``
    """
    import datetime
    import sys

    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank, p = dist.get_rank(), dist.get_world_size()
    failed = False
    for name, fn, args in suite(p):
        err = torch.tensor([max(fn(rank, *args).values())], dtype=torch.float64)
        api.all_reduce(err, op=api.ReduceOp.MAX)
        failed |= err.item() > tolerance
        if rank == 0:
            print(f"{name:34s} largest difference from the reference {err.item():.1e}", flush=True)
    dist.destroy_process_group()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
