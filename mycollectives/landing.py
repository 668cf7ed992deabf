"""Where a received message lands: copied or reduced into its pieces (the last step of a receive,
in the executor and in the load/store path)."""

from __future__ import annotations

import torch

from .plan import Piece


def apply(data: torch.Tensor, pieces: list[Piece], view, combine) -> None:
    """Copy or reduce ``data``, the pieces end to end, into where each lands (``view(buf, off, count)``)."""
    at = 0
    for buf, off, count, red in pieces:
        part = data if count == data.numel() else data[at : at + count]  # each slice is a torch op
        into = view(buf, off, count)
        if red:
            combine(into, part)
        else:
            into.copy_(part)
        at += count


def settle(late: list, me: int, view, combine) -> None:
    """Apply a round's late writes, ``(src, data, pieces)`` each, at its end.

    Several reductions into one region are added in rank order, the region's
    own value taking this rank's place: every rank then adds the same operands
    in the same order, so a one-shot all-reduce (each rank adding up every
    vector itself) gives bitwise the same floats on every rank, as the others do.
    """
    groups: dict[tuple[int, int, int], list] = {}
    for src, data, pieces in late:
        if len(pieces) == 1 and pieces[0][3]:
            groups.setdefault(pieces[0][:3], []).append((src, data))
            continue
        apply(data, pieces, view, combine)
    for (buf, off, count), parts in groups.items():
        region = view(buf, off, count)
        ordered = sorted([*parts, (me, None)], key=lambda part: part[0])
        if ordered[0][1] is None:  # this rank's own value comes first: add onto it in place
            for _, data in ordered[1:]:
                combine(region, data)
            continue
        acc = ordered[0][1]  # a received (or staged) copy, this rank's own to overwrite
        for _, data in ordered[1:]:
            combine(acc, region if data is None else data)
        region.copy_(acc)
