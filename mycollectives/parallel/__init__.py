"""What each parallelism communicates (chapter 5): every strategy on a small Transformer.

One module per strategy, each a few hundred lines at most and written with
the package's own collectives (``mc.all_reduce``, ``mc.all_to_all_single``,
``mc.isend`` ...), so that it runs on a local world (``mc.run_local``), on
gloo processes (``mc.run_gloo``) and under ``torchrun``:

- :mod:`.model`: the small Transformer and its unsharded reference;
- :mod:`.mesh`: meshes of ranks, subgroups, and a communication stream;
- :mod:`.comm`: collectives that autograd differentiates (Megatron's ``f`` and ``g``);
- :mod:`.dp` (data parallelism, buckets), :mod:`.fsdp` (ZeRO-3, HSDP, prefetch),
  :mod:`.tp` (Megatron), :mod:`.sp` (sequence parallelism), :mod:`.cp`
  (ring attention, and the all-gather variant), :mod:`.ep` and
  :mod:`.ep_hier` (mixture of experts), :mod:`.pp` (pipeline);
- :mod:`.overlap`: the collective matmul.

The step-time calculator, which prices these strategies without running
them, is a sibling subpackage, :mod:`mycollectives.steptime`. The chapter's
checks of every strategy against the reference, and the calculator's
figures, are the book's (``mycollectives.book.parallel``).
"""

from __future__ import annotations
