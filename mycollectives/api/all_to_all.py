"""``all_to_all`` and ``all_to_all_single`` (chapter 2; expert parallelism in lab 7)."""

from __future__ import annotations

import torch

from ..schedule import IN, OUT
from .core import Meta, launch, scratch


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors share any byte of memory."""
    if a.numel() == 0 or b.numel() == 0 or a.device != b.device:
        return False
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + b.numel() * b.element_size() and b0 < a0 + a.numel() * a.element_size()


def _row_numel(t: torch.Tensor) -> int:
    return (
        t[0].numel()
        if t.dim() > 0 and t.shape[0] > 0
        else (t.numel() // max(t.shape[0], 1) if t.dim() else 1)
    )


@torch.no_grad()
def all_to_all_single(
    output: torch.Tensor,
    input: torch.Tensor,
    output_split_sizes: list[int] | None = None,
    input_split_sizes: list[int] | None = None,
    group=None,
    async_op: bool = False,
    *,
    algorithm: str = "auto",
    **options,
):
    """Split ``input`` along dim 0, send piece ``i`` to rank ``i``; ``output``
    receives the pieces from ranks ``0..p-1`` in order.

    Split sizes count rows of dim 0 and may differ per rank (uneven
    all-to-all); if omitted, dim 0 is split evenly. Example on 2 ranks::

        input tensor([0, 1, 2])  input_split_sizes [1, 2]  # Rank 0
        input tensor([3, 4])     input_split_sizes [1, 1]  # Rank 1
        output tensor([0, 3])    # Rank 0, after (output_split_sizes [1, 1])
        output tensor([1, 2, 4]) # Rank 1, after (output_split_sizes [2, 1])
    """

    def validate(c, t):
        c.tensor("input", input)
        c.tensor("output", output, like=input)
        row_in, row_out = _row_numel(input), _row_numel(output)
        if input.dim() and output.dim() and input.shape[1:] != output.shape[1:]:
            raise c.fail(
                "output",
                f"has rows of shape {tuple(output.shape[1:])}; expected {tuple(input.shape[1:])} like input",
            )
        ins = c.splits("input_split_sizes", input_split_sizes, input.shape[0] if input.dim() else 1)
        outs = c.splits("output_split_sizes", output_split_sizes, output.shape[0] if output.dim() else 1)
        even = not input_split_sizes and not output_split_sizes and input.numel() == output.numel()
        return Meta(
            input.dtype,
            0,
            in_splits=[s * row_in for s in ins],
            out_splits=[s * row_out for s in outs],
            even=even,
        )

    def body(job) -> None:
        src = input.view(-1)
        if _overlap(src, output):  # output is (part of) input: read from a copy, as torch does
            src = scratch(src.numel(), src, job.transport, "a2a_in")
            src.copy_(input.view(-1))
        job.run({IN: src, OUT: output.view(-1)})

    return launch("all_to_all_single", group, algorithm, options, validate, body, async_op, [output])


@torch.no_grad()
def all_to_all(
    output_tensor_list: list[torch.Tensor],
    input_tensor_list: list[torch.Tensor],
    group=None,
    async_op: bool = False,
    *,
    algorithm: str = "auto",
    **options,
):
    """Send ``input_tensor_list[i]`` to rank ``i``; receive rank ``i``'s into
    ``output_tensor_list[i]``. Tensors may differ in size.

    Example on 2 ranks::

        input [tensor([0]), tensor([1])]  # Rank 0    output [tensor([0]), tensor([2])]  # Rank 0, after
        input [tensor([2]), tensor([3])]  # Rank 1    output [tensor([1]), tensor([3])]  # Rank 1, after
    """

    def validate(c, t):
        if not isinstance(input_tensor_list, (list, tuple)) or not input_tensor_list:
            raise c.fail("input_tensor_list", f"must be a list of {c.p} tensors", TypeError)
        like = c.tensor("input_tensor_list[0]", input_tensor_list[0])
        c.tensor_list("input_tensor_list", input_tensor_list, like, None)
        c.tensor_list("output_tensor_list", output_tensor_list, like, None)
        return Meta(
            like.dtype,
            0,
            in_splits=[x.numel() for x in input_tensor_list],
            out_splits=[x.numel() for x in output_tensor_list],
        )

    def body(job) -> None:
        like = input_tensor_list[0]
        inp = torch.cat([x.reshape(-1) for x in input_tensor_list])
        out = torch.empty(sum(x.numel() for x in output_tensor_list), dtype=like.dtype, device=like.device)
        job.run({IN: inp, OUT: out})
        at = 0
        for x in output_tensor_list:
            x.view(-1).copy_(out[at : at + x.numel()])
            at += x.numel()

    return launch("all_to_all", group, algorithm, options, validate, body, async_op, list(output_tensor_list))
