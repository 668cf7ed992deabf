"""The alpha-beta-gamma cost model, driven by the schedules (chapters 2 and 3).

* :func:`counted_cost` counts a schedule's time round by round, and
  ``traffic`` the bytes each rank sends and receives;
* :func:`closed_form` is the textbook formula of each algorithm (the two
  agree wherever a formula exists, ``tests/test_cost.py``);
* :func:`predict` and :func:`cheapest` rank the menu for a call, the way
  NCCL's tuner does (time = latency + bytes / bandwidth, minimum wins);
* :func:`fit_alpha_beta` fits ping-pong times (measured by
  :func:`mycollectives.calibrate`);
* :mod:`mycollectives.cost.cpu` is the variant for CPU processes sharing a
  machine, and :mod:`mycollectives.cost.fit` fits a model's parameters to
  measured collectives.

Nothing here moves a byte: the cost model reads schedules.
"""

from __future__ import annotations

from .calibration import Calibration, fit_alpha_beta
from .choose import DEFAULT_MACHINE, cheapest, crossover_size, formula_time, left_out, predict
from .counted import Machine, counted_cost, round_load, round_times, traffic
from .formulas import FORMULAS, UPPER_BOUND, closed_form, has_closed_form

__all__ = [
    "left_out",
    "Machine",
    "Calibration",
    "counted_cost",
    "closed_form",
    "has_closed_form",
    "formula_time",
    "round_load",
    "round_times",
    "traffic",
    "fit_alpha_beta",
    "predict",
    "cheapest",
    "crossover_size",
    "FORMULAS",
    "UPPER_BOUND",
    "DEFAULT_MACHINE",
]
