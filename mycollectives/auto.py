"""``algorithm="auto"``: which algorithm to run for a message size and world size.

A first rule of thumb, as MPI libraries used before they had tuning tables:
latency-bound messages go to the algorithms with the fewest rounds
(``log p``), bandwidth-bound ones to the algorithms that send each byte the
fewest times (rings, Rabenseifner, pairwise exchange). The cost model
(``mycollectives.cost``) replaces these thresholds with a computed choice.
"""

from __future__ import annotations

SMALL = 64 * 1024  # bytes per rank below which latency dominates

_SMALL = {
    "broadcast": "binomial",
    "reduce": "binomial",
    "all_reduce": "recursive_doubling",
    "all_gather": "bruck",
    "reduce_scatter": "recursive_halving",
    "scatter": "binomial",
    "gather": "binomial",
    "all_to_all": "bruck",
    "barrier": "dissemination",
}
_LARGE = {
    "broadcast": "scatter_allgather",
    "reduce": "rabenseifner",
    "all_reduce": "ring",
    "all_gather": "ring",
    "reduce_scatter": "ring",
    "scatter": "binomial",
    "gather": "binomial",
    "all_to_all": "pairwise",
    "barrier": "dissemination",
}


def choose(collective: str, world_size: int, nbytes: int) -> str:
    """The algorithm ``auto`` runs; every rank computes the same answer."""
    if world_size <= 2 and collective == "broadcast":
        return "linear"
    return (_SMALL if nbytes < SMALL else _LARGE)[collective]
