"""The step-time calculator (chapter 5): model x layout x topology -> time, bytes and memory.

It prices a training step from formulas and the cost model, without
running the strategies of :mod:`mycollectives.parallel` (it imports nothing
of them):

- :mod:`.config`: model shapes (the Llama 3 and Mixtral presets);
- :mod:`.layout`: degrees of each parallelism and where its groups sit;
- :mod:`.traffic`: what each strategy communicates, as formulas;
- :mod:`.costs`: where a group sits and what a call costs (chapters 3 and 4);
- :mod:`.groupsim`: every group of an axis on the simulator at once;
- :mod:`.footprint`: memory per GPU;
- :mod:`.sustained`: the compute rate assumed when none is given (fitted);
- :mod:`.step`: :func:`~.step.step_time` and its report;
- :mod:`.dense`: a model known by its size alone, data parallelism only;
- :mod:`.search`: the layouts of a cluster, fastest first;
- :mod:`.published_runs`: published training runs it is checked against;
- :mod:`.calculator`: ``step_time`` and the command line
  (``python -m mycollectives.steptime.calculator``).
"""

from __future__ import annotations
