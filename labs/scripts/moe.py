"""Lab 7: expert parallelism, an MoE layer whose tokens travel by all_to_all_single.

    torchrun --standalone --nproc-per-node 8 labs/scripts/moe.py --out moe.json
    python labs/scripts/moe.py --virtual dgx_h100:2 --out moe.json   # 16 virtual GPUs, no torchrun

``E`` experts (two-layer MLPs) are spread over ``p`` ranks, ``E / p`` each. Every
rank routes its own ``T`` tokens: a linear router scores the experts and each
token goes to its top ``k``. Then:

1. dispatch: sort the (token, expert) pairs by the rank that owns the expert;
   exchange the counts, then the token vectors with ``mc.all_to_all_single``
   and *uneven* splits (routing decides how many go where);
2. each rank runs its experts on the tokens it received;
3. combine: the inverse all-to-all brings the results home, where they are
   summed with the router's weights.

Both all-to-alls sit inside an autograd function, so the backward pass is two
more all-to-alls with the splits swapped. Forward outputs and every gradient
are checked against a single process that holds all experts and all tokens.
"""

from __future__ import annotations

import torch

import mycollectives as mc
from labs.scripts.common import Env, launch, log, parser, save, setup, teardown, time_label, timed


class AllToAll(torch.autograd.Function):
    """``mc.all_to_all_single`` on rows; its gradient is the all-to-all back."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, out_splits: list[int], in_splits: list[int]) -> torch.Tensor:
        ctx.splits = (out_splits, in_splits)
        out = x.new_empty(sum(out_splits), *x.shape[1:])
        mc.all_to_all_single(out, x.contiguous(), out_splits, in_splits)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        out_splits, in_splits = ctx.splits
        return AllToAll.apply(grad, in_splits, out_splits), None, None


def init_params(n_experts: int, d: int, h: int, env: Env) -> dict[str, torch.Tensor]:
    """Router and all experts, the same on every rank (the reference uses them all)."""
    g = torch.Generator().manual_seed(0)
    return {
        "router": torch.randn(d, n_experts, generator=g) / d**0.5,
        "w1": torch.randn(n_experts, d, h, generator=g) / d**0.5,
        "w2": torch.randn(n_experts, h, d, generator=g) / h**0.5,
    }


def tokens(rank: int, t: int, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + rank)
    return torch.randn(t, d, generator=g), torch.randn(t, d, generator=g)  # tokens, a target for the loss


def route(x: torch.Tensor, router: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k experts per token and their weights (softmax over the chosen k)."""
    scores, experts = (x @ router).topk(k, dim=-1)  # [T, k] each
    return experts, scores.softmax(dim=-1)


def expert(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w1) @ w2


def moe_reference(x, router, w1, w2, k: int) -> torch.Tensor:
    """One process, every expert: out[t] = sum_j weight[t, j] * expert_{e[t, j]}(x[t])."""
    experts, weights = route(x, router, k)
    out = torch.zeros_like(x)
    for e in range(w1.shape[0]):
        tok, slot = (experts == e).nonzero(as_tuple=True)
        out.index_add_(0, tok, weights[tok, slot, None] * expert(x[tok], w1[e], w2[e]))
    return out


def moe_parallel(x, router, w1, w2, k: int, env: Env, stats: dict | None = None) -> torch.Tensor:
    """This rank's tokens through experts spread over all ranks (``w1``, ``w2``: local experts)."""
    p, local = env.world_size, w1.shape[0]
    experts, weights = route(x, router, k)  # [T, k]
    flat = experts.reshape(-1)  # one entry per (token, choice)
    order = flat.argsort(stable=True)  # grouped by expert, hence by owning rank
    in_splits = torch.bincount(flat // local, minlength=p)  # rows for each rank
    counts = torch.empty_like(in_splits)
    mc.all_to_all_single(counts, in_splits.to(x.device))  # how many rows each rank will send me
    in_s, out_s = in_splits.tolist(), counts.tolist()
    sent = x.repeat_interleave(k, dim=0)[order]  # token rows, in expert order
    ids = torch.empty(sum(out_s), dtype=flat.dtype, device=x.device)
    mc.all_to_all_single(ids, flat[order].contiguous(), out_s, in_s)  # which expert each row is for
    rows = AllToAll.apply(sent, out_s, in_s)
    y = torch.empty_like(rows)
    for e in range(local):  # run each local expert on its rows
        mask = ids == env.rank * local + e
        y = y.index_put((mask,), expert(rows[mask], w1[e], w2[e]))
    back = AllToAll.apply(y, in_s, out_s)  # combine: results return in the order they left
    unsorted = torch.empty_like(back).index_copy(0, order, back)
    if stats is not None:
        stats["received"] = sum(out_s)
    return (unsorted.view(-1, k, x.shape[1]) * weights[..., None]).sum(dim=1)


def main() -> None:
    args = parser(__doc__)
    args.add_argument("--tokens", type=int, default=None, help="tokens per rank")
    args.add_argument("--hidden", type=int, default=None, help="model width d")
    args.add_argument("--k", type=int, default=2)
    args.add_argument(
        "--experts-per-rank", type=int, nargs="*", default=None, help="default 1 2 4 8 (CPU: 1 2 4)"
    )
    a = args.parse_args()
    env = setup()
    p, dev = env.world_size, env.device
    t, d = a.tokens or (8192 if env.gpu else 256), a.hidden or (1024 if env.gpu else 64)
    h = 4 * d
    tol = dict(rtol=1e-4, atol=1e-4) if env.gpu else dict(rtol=1e-5, atol=1e-5)
    results = []
    log(env, f"times are {time_label(env)}")
    for per_rank in a.experts_per_rank or ([1, 2, 4, 8] if env.gpu else [1, 2, 4]):
        n_exp = per_rank * p
        k = min(a.k, n_exp)
        full = init_params(n_exp, d, h, env)
        mine = slice(env.rank * per_rank, (env.rank + 1) * per_rank)
        router = full["router"].to(dev).requires_grad_()
        w1 = full["w1"][mine].to(dev).requires_grad_()
        w2 = full["w2"][mine].to(dev).requires_grad_()
        x, target = (u.to(dev) for u in tokens(env.rank, t, d))
        x.requires_grad_()
        stats: dict = {}
        out = moe_parallel(x, router, w1, w2, k, env, stats)
        (out * target).sum().backward()
        mc.all_reduce(router.grad)  # the router is replicated: sum its gradient as DDP would

        # the reference: every rank's tokens, every expert, one process
        ref = {name: v.to(dev).requires_grad_() for name, v in full.items()}
        xs = [tokens(r, t, d) for r in range(p)]
        xa = torch.cat([u for u, _ in xs]).to(dev).requires_grad_()
        ref_out = moe_reference(xa, ref["router"], ref["w1"], ref["w2"], k)
        (ref_out * torch.cat([v for _, v in xs]).to(dev)).sum().backward()
        rows = slice(env.rank * t, (env.rank + 1) * t)
        torch.testing.assert_close(out, ref_out[rows], **tol)
        torch.testing.assert_close(x.grad, xa.grad[rows], **tol)
        torch.testing.assert_close(w1.grad, ref["w1"].grad[mine], **tol)
        torch.testing.assert_close(w2.grad, ref["w2"].grad[mine], **tol)
        torch.testing.assert_close(router.grad, ref["router"].grad, rtol=1e-4, atol=1e-4)

        received = torch.tensor([stats["received"]], device=dev)
        loads = torch.empty(p, dtype=received.dtype, device=dev)
        mc.all_gather_into_tensor(loads, received)
        with torch.no_grad():
            args_ = (x, router, w1, w2, k, env)
            sec = timed(env, lambda a=args_: moe_parallel(*a), reps=10 if env.gpu else 3)
        loads = loads.tolist()
        imbalance = max(loads) / (sum(loads) / p)
        results.append(dict(experts=n_exp, k=k, time=sec, loads=loads, imbalance=imbalance))
        log(
            env,
            f"E={n_exp:3d} k={k}: forward {sec * 1e3:8.2f} ms, rows per rank {loads} (max/mean {imbalance:.2f})",
        )
    log(env, "outputs and gradients (tokens, experts, router) equal the single-process reference")
    save(env, a.out, dict(p=p, tokens=t, d=d, results=results))
    teardown()


if __name__ == "__main__":
    launch(main)
