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

from functools import partial

import torch
import torch.distributed as dist

from .. import api as mc
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

    def __init__(self, transport, name: str = "", desc: str = ""):
        super().__init__(transport.rank, transport.world_size)
        self.transport, self._name, self._desc = transport, name, desc

    def getBackendName(self) -> str:
        return BACKEND

    # the name torch gives the group (C++ keeps names in backends, which this group has none of)
    @property
    def group_name(self) -> str:
        return self._name

    @property
    def group_desc(self) -> str:
        return self._desc

    def getGroupName(self) -> str:
        return self._name

    def getGroupDesc(self) -> str:
        return self._desc

    def _set_group_name(self, name: str) -> None:
        self._name = name

    def _set_group_desc(self, desc: str) -> None:
        self._desc = desc

    def __repr__(self) -> str:
        return f"ThreadProcessGroup(rank {self.transport.rank} of {self.transport.world_size})"

    def _run(self, opts, outputs, *calls: partial) -> TorchWork:
        """Run each of the package's ``calls`` on this group (async unless torch asked to block)."""
        run_async = _async(opts)
        works = [call(group=self.transport, async_op=run_async) for call in calls]
        work = TorchWork(works if run_async else [], outputs)
        work.join_at_backward_end()
        return work

    # reductions
    def allreduce(self, tensors, opts=None):
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        t = _one(tensors, "allreduce")
        return self._run(opts, [t], partial(mc.all_reduce, t, op=op))

    def allreduce_coalesced(self, tensors, opts=None):
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        return self._run(opts, list(tensors), *(partial(mc.all_reduce, t, op=op) for t in tensors))

    def reduce(self, tensors, opts):
        t = _one(tensors, "reduce")
        return self._run(opts, [t], partial(mc.reduce, t, op=opts.reduceOp, group_dst=opts.rootRank))

    def reduce_scatter(self, outputs, input_lists, opts):
        out, ins = _one(outputs, "reduce_scatter"), _one(input_lists, "reduce_scatter")
        return self._run(opts, [out], partial(mc.reduce_scatter, out, list(ins), op=opts.reduceOp))

    def reduce_scatter_single(self, output, input, opts):
        return self._run(opts, [output], partial(mc.reduce_scatter_tensor, output, input, op=opts.reduceOp))

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts):
        pairs = zip(outputs, inputs, strict=True)
        calls = (partial(mc.reduce_scatter_tensor, o, i, op=opts.reduceOp) for o, i in pairs)
        return self._run(opts, list(outputs), *calls)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # gathers and scatters
    def broadcast(self, tensors, opts):
        t = _one(tensors, "broadcast")
        return self._run(opts, [t], partial(mc.broadcast, t, group_src=opts.rootRank))

    def allgather(self, output_lists, inputs, opts=None):
        outs, t = list(_one(output_lists, "allgather")), _one(inputs, "allgather")
        return self._run(opts, outs, partial(mc.all_gather, outs, t))

    def allgather_coalesced(self, output_lists, inputs, opts=None):
        calls = (partial(mc.all_gather, list(o), i) for o, i in zip(output_lists, inputs, strict=True))
        return self._run(opts, [t for o in output_lists for t in o], *calls)

    def all_gather_single(self, output, input, opts=None):
        return self._run(opts, [output], partial(mc.all_gather_into_tensor, output, input))

    _allgather_base = all_gather_single

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        calls = (partial(mc.all_gather_into_tensor, o, i) for o, i in zip(outputs, inputs, strict=True))
        return self._run(opts, list(outputs), *calls)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def gather(self, output_lists, inputs, opts):
        t, root = _one(inputs, "gather"), opts.rootRank
        outs = list(output_lists[0]) if self.transport.rank == root else None
        return self._run(opts, outs or [], partial(mc.gather, t, outs, group_dst=root))

    def scatter(self, outputs, input_lists, opts):
        t, root = _one(outputs, "scatter"), opts.rootRank
        ins = list(input_lists[0]) if self.transport.rank == root else None
        return self._run(opts, [t], partial(mc.scatter, t, ins, group_src=root))

    def all_to_all_single(self, output, input, output_splits, input_splits, opts=None):
        out_s, in_s = list(output_splits) or None, list(input_splits) or None
        return self._run(opts, [output], partial(mc.all_to_all_single, output, input, out_s, in_s))

    alltoall_base = all_to_all_single

    def alltoall(self, outputs, inputs, opts=None):
        return self._run(opts, list(outputs), partial(mc.all_to_all, list(outputs), list(inputs)))

    def barrier(self, opts=None):
        return self._run(opts, [], partial(mc.barrier))

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
