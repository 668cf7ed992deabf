"""The benchmark pages' helpers (chapters 2, 3b, 4b, 6, the benchmarks page, lab 3).

``local``: collectives timed on a local world (threads), and a call's trace;
``heap``: symmetric memory's three ways timed side by side (chapter 4b);
``buckets``: one gradient all-reduced in buckets of several sizes (chapter 6);
``summary``: recorded sweeps read back as ratios against the native collective;
``mpi``: the recorded runs against MPICH and gloo;
``figures`` and ``tables``: the model drawn against measurement, and a sweep's
table narrowed to a page. The bench itself is :mod:`mycollectives.bench`,
nccl-tests' clone.
"""
