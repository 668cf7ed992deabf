"""``auto`` at scale: closed forms above 64 ranks, the same answers as counting, ``local_size`` honoured."""

from __future__ import annotations

import pytest

import mycollectives as mc
from mycollectives import auto
from mycollectives.algorithms import register, unregister
from mycollectives.collectives import collectives
from mycollectives.cost import DEFAULT_MACHINE, Machine, cheapest, has_closed_form, left_out, predict
from mycollectives.cost import choose as choose_mod

WORLD_SIZES = (2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 31, 32, 48, 64)
SIZES = tuple(4 << k for k in range(0, 25, 4))  # 4 B .. 64 MiB
UNEVEN = (1000, 12345 * 4, (3 << 20) + 4)  # no p > 2 divides them
MACHINES = (DEFAULT_MACHINE, Machine(alpha=1e-6, beta=1e-9, gamma=1e-9))


def _node_sizes(p: int) -> list[int | None]:
    return [None] + [ls for ls in (2, 3, 4, 8) if p % ls == 0 and ls < p]


@pytest.mark.parametrize("collective", collectives())
def test_closed_forms_choose_what_counting_chooses(collective):
    """For p <= 64, sizes from 4 B to 64 MiB and every node size: the ranking by
    closed forms (what ``auto`` uses above 64 ranks) picks what counting picks.
    On sizes no p divides, a closed form charges the largest chunk
    (``ceil(n/p)``) and may break a near-tie the other way: its pick then costs,
    counted, within 0.1 % of counting's."""
    for p in WORLD_SIZES:
        for ls in _node_sizes(p):
            for m in MACHINES:
                for n in SIZES + UNEVEN:
                    counted = predict(collective, p, n, m, local_size=ls, method="counted")
                    formula = cheapest(collective, p, n, m, local_size=ls, method="formula")
                    low = min(counted.values())
                    best = next(a for a, t in counted.items() if t <= low * (1 + 1e-9))  # cheapest's rule
                    where = (collective, p, n, ls, m)
                    if n in SIZES:
                        assert formula == best, where
                    else:
                        assert counted[formula] <= counted[best] * 1.001, where


@pytest.mark.parametrize("collective", collectives())
def test_closed_forms_rank_every_candidate_counting_ranks(collective):
    """Same candidates both ways (a node size that does not divide p is refused by both)."""
    for p, ls in ((6, 4), (12, 4), (16, 8), (15, 4)):
        counted = predict(collective, p, 1 << 16, local_size=ls, method="counted")
        formula = predict(collective, p, 1 << 16, local_size=ls, method="formula")
        assert list(counted) == list(formula)
        for name, t in counted.items():  # exact where p divides the vector, an upper bound otherwise
            assert formula[name] >= t * (1 - 1e-9), (collective, name, p)


def test_small_worlds_are_counted_large_ones_use_formulas(monkeypatch):
    """Up to COUNT_UP_TO ranks auto counts from schedules; above, it builds only the schedules of
    algorithms without a closed form (a new algorithm needs none)."""
    built = []
    real = choose_mod.schedule_for
    monkeypatch.setattr(choose_mod, "schedule_for", lambda *a, **k: built.append(a) or real(*a, **k))
    cheapest("all_reduce", choose_mod.COUNT_UP_TO, 1 << 20)
    assert built, "a small world is ranked by counting"
    built.clear()
    for c in collectives():
        for n in (4, 1 << 20, 64 << 20):
            assert cheapest(c, 4096, n, local_size=8) in mc.algorithms(c)
    without = {(c, a) for c in collectives() for a in mc.algorithms(c) if not has_closed_form(c, a)}
    assert {a[:2] for a in built} <= without, "4,096 ranks: a schedule with a closed form was built"


def test_symmetric_memory_is_always_counted(monkeypatch):
    """Closed forms model messages, not loads: a load/store machine is counted at any size."""
    built = []
    real = choose_mod.schedule_for
    monkeypatch.setattr(choose_mod, "schedule_for", lambda *a, **k: built.append(a) or real(*a, **k))
    assert auto.choose("all_reduce", 80, 1 << 20, heap=True) in mc.algorithms("all_reduce")
    assert built


def test_an_algorithm_without_a_closed_form_is_counted_then_left_out_at_scale():
    """Closed forms are optional: a new algorithm is ranked by counting up to 256 ranks; above, where
    counting would build a schedule of every rank's transfers, auto leaves it out and says so."""

    @register("all_gather", "free_lunch")  # moves nothing: the cheapest there is
    def free_lunch(spec):
        return []

    try:
        assert not has_closed_form("all_gather", "free_lunch")
        assert predict("all_gather", 256, 1 << 20)["free_lunch"] == 0.0
        assert cheapest("all_gather", 256, 1 << 20) == "free_lunch"
        assert left_out("all_gather", 256) == ()
        assert left_out("all_gather", 4096) == ("free_lunch",)
        assert "free_lunch" not in predict("all_gather", 4096, 1 << 20)
        assert cheapest("all_gather", 4096, 1 << 20) in mc.algorithms("all_gather")
        assert predict("all_gather", 4096, 1 << 20, method="counted", candidates=["free_lunch"]) == {
            "free_lunch": 0.0
        }
    finally:
        unregister("all_gather", "free_lunch")


def test_predict_refuses_an_unknown_method():
    with pytest.raises(ValueError, match="method='guess'"):
        predict("all_reduce", 8, 64, method="guess")


def test_every_algorithm_without_a_closed_form_is_ranked_by_counting():
    """An algorithm of the menu without a closed form (shipped or added) is a candidate the formula
    ranking counts, at the time counting gives."""
    for c in collectives():
        for a in mc.algorithms(c):
            if has_closed_form(c, a):
                continue
            for p, ls in ((8, 4), (12, 4)):
                both = [
                    predict(c, p, 1 << 16, local_size=ls, candidates=[a], method=m)
                    for m in ("formula", "counted")
                ]
                assert both[0] == both[1] and list(both[0]) in ([a], []), (c, a, p)


def test_local_size_reaches_auto(monkeypatch):
    """The call's ``local_size`` is a candidate's input: hierarchical is chosen where it is cheapest."""
    assert auto.choose("all_reduce", 6, 1 << 20, local_size=3) == "hierarchical"
    seen = []
    real = auto.choose
    monkeypatch.setattr(auto, "choose", lambda *a, **k: seen.append(k.get("local_size")) or real(*a, **k))

    def fn(rank):
        import torch

        t = torch.full(((1 << 20) // 4,), float(rank))
        mc.all_reduce(t, local_size=3)
        return t[0].item()

    assert mc.run_local(fn, 6) == [15.0] * 6
    assert seen and set(seen) == {3}
