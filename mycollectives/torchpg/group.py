"""``ThreadProcessGroup``: a ``torch.distributed.ProcessGroup`` whose collectives are the package's.

Each method is the one ``torch.distributed`` (or C++: DDP's reducer) calls
on a process group, with torch's arguments: lists of tensors (one tensor:
one device per rank), ranks numbered within the group, an options object.
It runs the package's collective of the same name on the group's transport
with ``async_op=True`` unless torch asked for a blocking call, and returns a
:class:`~mycollectives.torchpg.work.TorchWork`. What the package does not
offer (a receive from any source, several tensors per rank) raises
:class:`Unsupported` naming the call.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist

import mycollectives as mc

from .work import TorchWork

BACKEND = "mycollectives"


class Unsupported(NotImplementedError):
    """A ``torch.distributed`` call the package's process group does not serve."""


def _one(tensors, what: str) -> torch.Tensor:
    if len(tensors) != 1:
        raise Unsupported(f"{what}: one tensor per rank expected (one device per rank), got {len(tensors)}")
    return tensors[0]


def _async(opts) -> bool:
    return bool(getattr(opts, "asyncOp", True))


class ThreadProcessGroup(dist.ProcessGroup):
    """The ranks of ``transport`` (a thread world's, or a view of some of its ranks) as a
    torch process group. ``transport.rank`` is this thread's rank in it."""

    def __init__(self, transport):
        super().__init__(transport.rank, transport.world_size)
        self.transport = transport

    def getBackendName(self) -> str:
        return BACKEND

    def __repr__(self) -> str:
        return f"ThreadProcessGroup(rank {self.transport.rank} of {self.transport.world_size})"

    def _run(self, calls: list[Callable], opts, outputs) -> TorchWork:
        run_async = _async(opts)
        works = [call(run_async) for call in calls]
        return TorchWork(works if run_async else [], outputs)

    # reductions
    def allreduce(self, tensors, opts=None):
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        t = _one(tensors, "allreduce")
        return self._run([lambda a: mc.all_reduce(t, op=op, group=self.transport, async_op=a)], opts, [t])

    def allreduce_coalesced(self, tensors, opts=None):
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        calls = [lambda a, t=t: mc.all_reduce(t, op=op, group=self.transport, async_op=a) for t in tensors]
        return self._run(calls, opts, list(tensors))

    def reduce(self, tensors, opts):
        t = _one(tensors, "reduce")
        call = lambda a: mc.reduce(
            t, op=opts.reduceOp, group=self.transport, async_op=a, group_dst=opts.rootRank
        )  # noqa: E731
        return self._run([call], opts, [t])

    def reduce_scatter(self, outputs, input_lists, opts):
        out, ins = _one(outputs, "reduce_scatter"), _one(input_lists, "reduce_scatter")
        return self._run(
            [lambda a: mc.reduce_scatter(out, list(ins), op=opts.reduceOp, group=self.transport, async_op=a)],
            opts,
            [out],
        )

    def reduce_scatter_single(self, output, input, opts):
        op = opts.reduceOp
        return self._run(
            [lambda a: mc.reduce_scatter_tensor(output, input, op=op, group=self.transport, async_op=a)],
            opts,
            [output],
        )

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts):
        op = opts.reduceOp
        calls = [
            lambda a, o=o, i=i: mc.reduce_scatter_tensor(o, i, op=op, group=self.transport, async_op=a)
            for o, i in zip(outputs, inputs, strict=True)
        ]
        return self._run(calls, opts, list(outputs))

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # gathers and scatters
    def broadcast(self, tensors, opts):
        t = _one(tensors, "broadcast")
        call = lambda a: mc.broadcast(t, group=self.transport, async_op=a, group_src=opts.rootRank)  # noqa: E731
        return self._run([call], opts, [t])

    def allgather(self, output_lists, inputs, opts=None):
        outs, t = _one(output_lists, "allgather"), _one(inputs, "allgather")
        return self._run(
            [lambda a: mc.all_gather(list(outs), t, group=self.transport, async_op=a)], opts, list(outs)
        )

    def allgather_coalesced(self, output_lists, inputs, opts=None):
        calls = [
            lambda a, o=o, i=i: mc.all_gather(list(o), i, group=self.transport, async_op=a)
            for o, i in zip(output_lists, inputs, strict=True)
        ]
        return self._run(calls, opts, [t for o in output_lists for t in o])

    def all_gather_single(self, output, input, opts=None):
        return self._run(
            [lambda a: mc.all_gather_into_tensor(output, input, group=self.transport, async_op=a)],
            opts,
            [output],
        )

    _allgather_base = all_gather_single

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        calls = [
            lambda a, o=o, i=i: mc.all_gather_into_tensor(o, i, group=self.transport, async_op=a)
            for o, i in zip(outputs, inputs, strict=True)
        ]
        return self._run(calls, opts, list(outputs))

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def gather(self, output_lists, inputs, opts):
        t, root = _one(inputs, "gather"), opts.rootRank
        outs = list(output_lists[0]) if self.transport.rank == root else None
        call = lambda a: mc.gather(t, outs, group=self.transport, async_op=a, group_dst=root)  # noqa: E731
        return self._run([call], opts, outs or [])

    def scatter(self, outputs, input_lists, opts):
        t, root = _one(outputs, "scatter"), opts.rootRank
        ins = list(input_lists[0]) if self.transport.rank == root else None
        call = lambda a: mc.scatter(t, ins, group=self.transport, async_op=a, group_src=root)  # noqa: E731
        return self._run([call], opts, [t])

    def all_to_all_single(self, output, input, output_splits, input_splits, opts=None):
        out_s, in_s = list(output_splits) or None, list(input_splits) or None
        call = lambda a: mc.all_to_all_single(output, input, out_s, in_s, group=self.transport, async_op=a)  # noqa: E731
        return self._run([call], opts, [output])

    alltoall_base = all_to_all_single

    def alltoall(self, outputs, inputs, opts=None):
        return self._run(
            [lambda a: mc.all_to_all(list(outputs), list(inputs), group=self.transport, async_op=a)],
            opts,
            list(outputs),
        )

    def barrier(self, opts=None):
        return self._run([lambda a: mc.barrier(group=self.transport, async_op=a)], opts, [])

    # point to point (torch's tags are the user's; the package keeps its own apart)
    def send(self, tensors, dst: int, tag: int = 0):
        t = _one(tensors, "send")
        return TorchWork([mc.isend(t, group=self.transport, tag=tag, group_dst=dst)], [t])

    def recv(self, tensors, src: int, tag: int = 0):
        t = _one(tensors, "recv")
        return TorchWork([mc.irecv(t, group=self.transport, tag=tag, group_src=src)], [t])

    def recv_anysource(self, tensors, tag: int = 0):
        raise Unsupported(
            f"rank {self.transport.rank}: recv without src (from any source) is not offered by "
            "mycollectives' process group; name the source rank"
        )
