"""The registry of closed forms and the helpers they share (:mod:`.formulas`,
:mod:`.formulas_blocked`): ``formula(collective, algorithm)`` registers one
in ``FORMULAS``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..schedule import ceil_log2, floor_pow2
from .counted import Machine

Formula = Callable[..., float]
FORMULAS: dict[tuple[str, str], Formula] = {}
UPPER_BOUND = {("all_reduce", "double_binary_tree")}  # not exact, see module docstring


def formula(collective: str, algorithm: str) -> Callable[[Formula], Formula]:
    def deco(fn: Formula) -> Formula:
        FORMULAS[collective, algorithm] = fn
        return fn

    return deco


def has_closed_form(collective: str, algorithm: str) -> bool:
    """Whether ``algorithm`` registered a closed form (optional: its counted cost needs none)."""
    return (collective, algorithm) in FORMULAS


def _nodes(p: int, local_size: int | None) -> tuple[int, int]:
    """Ranks per node and nodes; a node size that does not divide ``p`` is refused, as the builders do."""
    local = local_size or p
    if local < 1 or p % local:
        raise ValueError(f"local_size={local} must divide the world size {p}")
    return local, p // local


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _fold(p: int) -> tuple[int, int, int, int]:
    """``p2``, ``log2 p2``, ``e`` (extra ranks) and ``sum_k min(2**k, e)``."""
    p2 = floor_pow2(p)
    k = p2.bit_length() - 1
    e = p - p2
    return p2, k, e, sum(min(1 << i, e) for i in range(k))


def _binomial_blocks(p: int) -> int:
    """Blocks the busiest rank sends over a binomial scatter: ``sum min(2^k, p - 2^k)``."""
    return sum(min(1 << k, p - (1 << k)) for k in range(ceil_log2(p)))


def _recursive(m: Machine, p: int, c: float, reduce: bool) -> float:
    """The power-of-two core of recursive halving (reduce) or doubling (copy)."""
    p2, k, _, ext = _fold(p)
    return k * m.alpha + (p2 - 1 + ext) * c * (m.beta + (m.gamma if reduce else 0.0))


# --- broadcast and reduce ----------------------------------------------------
