"""Write PyTorch's Flight Recorder dump on gloo, where NCCL's watchdog would (chapter 6, step 4).

On NCCL, ``TORCH_NCCL_DUMP_ON_TIMEOUT=1`` makes ``ProcessGroupNCCL``'s
watchdog write each rank's recorder to ``TORCH_FR_DUMP_TEMP_FILE`` plus the
rank when a collective times out. No other backend reads that variable, so a
gloo job writes nothing by itself. :func:`install_fr_dump` is the handler a
gloo job installs instead: it writes the same pickle
(``torch._C._distributed_c10d._dump_fr_trace()``) to the same file, once,
when the job calls the function it returns (in a ``finally``, so also when a
collective raises its timeout), and when torchrun sends ``SIGTERM`` to the
ranks left after another failed. The job itself needs nothing of this
package; the function can be copied into it as it is.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

import torch


def dump_path(rank: int) -> str:
    """Where PyTorch 2.13 writes rank ``rank``'s dump: ``TORCH_FR_DUMP_TEMP_FILE`` (or its older name
    ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``), else ``$XDG_CACHE_HOME/torch/comm_lib_trace_rank_``
    (``~/.cache`` without ``XDG_CACHE_HOME``), followed by the rank."""
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
    if not prefix:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        prefix = os.path.join(cache, "torch", "comm_lib_trace_rank_")
    return f"{prefix}{rank}"


def install_fr_dump() -> Callable[[], None]:
    """Call before ``init_process_group`` (the ``SIGTERM`` mask must reach every thread gloo starts);
    returns ``dump()``, which writes this rank's dump once, whoever calls it first."""
    path, lock, done = dump_path(int(os.environ.get("RANK", "0"))), threading.Lock(), []

    def dump() -> None:
        with lock:
            if done:
                return
            done.append(True)
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path + ".tmp", "wb") as f:
                f.write(torch._C._distributed_c10d._dump_fr_trace())
            os.replace(path + ".tmp", path)  # a reader never sees half a dump

    def on_sigterm() -> None:  # a thread: the main one may be blocked inside gloo
        signal.sigwait({signal.SIGTERM})
        dump()
        os._exit(143)

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    threading.Thread(target=on_sigterm, daemon=True, name="fr-dump-on-sigterm").start()
    return dump


__all__ = ["dump_path", "install_fr_dump"]
