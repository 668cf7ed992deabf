"""The alpha-beta-gamma cost model, driven by the schedules (chapters 2 and 3).

* :func:`counted_cost` counts a schedule's time round by round;
* :func:`closed_form` is the textbook formula of each algorithm (they agree);
* :func:`calibrate` fits the model's parameters on a live group;
* :func:`predict` and :func:`cheapest` rank the menu for a message size, the
  way NCCL's tuner does (time = latency + bytes / bandwidth, minimum wins).
"""

from __future__ import annotations

from .calibration import Calibration, calibrate, fit_alpha_beta, measure_gamma
from .choose import DEFAULT_MACHINE, cheapest, counted_time, crossover_size, predict, spec_for
from .counted import Machine, counted_cost, round_load, round_times
from .formulas import FORMULAS, UPPER_BOUND, closed_form

__all__ = [
    "Machine",
    "Calibration",
    "counted_cost",
    "closed_form",
    "round_load",
    "round_times",
    "calibrate",
    "fit_alpha_beta",
    "measure_gamma",
    "predict",
    "cheapest",
    "spec_for",
    "counted_time",
    "crossover_size",
    "FORMULAS",
    "UPPER_BOUND",
    "DEFAULT_MACHINE",
]
