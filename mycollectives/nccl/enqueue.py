"""The channels and threads NCCL gives one call, once its tuner has chosen (chapter 4, "Channels").

After :func:`~mycollectives.nccl.model.choose` has picked an algorithm and a
protocol, ``topoGetAlgoInfo`` (``src/enqueue.cc``, NCCL 2.30.7,
``nccl_enqueue``) sizes the launch: NVLS and NVLSTree run all of
``comm->nvlsChannels``; Ring, Tree and CollNetChain start from
``comm->nChannels`` and give up channels while the call is small against
``channels x threads x threshold`` (each thread's share of work must reach the
threshold), then halve their threads; CollNetDirect counts its heads too and
halves its threshold on the way down. A 1 MiB ring all-reduce on 16 H100s thus
runs on fewer channels than a 1 GiB one; an 8-byte call on one.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import constants as K
from .model import System


@dataclass(frozen=True)
class Sized:
    """What one call runs: NCCL's channels and threads per channel."""

    channels: int
    threads: int


def max_threads(s: System, algorithm: str, protocol: str) -> int:
    """``comm->maxThreads[algorithm][protocol]`` (tuning.cc): Ring/Simple takes 256 where the ring
    graph's channels carry no more than PCIe (``PCI_BW``), NVLS and CollNet the most a block has."""
    if algorithm in ("NVLS", "NVLSTree", "CollNetDirect", "CollNetChain"):
        return K.MAX_NTHREADS
    if algorithm == "Ring" and protocol == "Simple":
        ring = s.graphs["ring"]
        slow = ring.bw_intra * ring.channels <= K.PCI_BW
        return K.RING_SIMPLE_SLOW_THREADS if slow else K.MAX_THREADS["Simple"]
    return K.MAX_THREADS[protocol]


def threshold(s: System, algorithm: str, protocol: str) -> int:
    """``comm->threadThresholds[algorithm][protocol]`` (tuning.cc)."""
    if algorithm.startswith("CollNet") and protocol == "Simple":
        return K.COLLNET_THREAD_THRESHOLD
    t = K.THREAD_THRESHOLD[protocol]
    return t * s.ranks if algorithm == "Ring" and protocol == "LL" else t


def sized(s: System, algorithm: str, protocol: str, nbytes: int, nvls_channels: int, heads: int = 1) -> Sized:
    """The channels and threads of a call of ``nbytes`` (nccl-tests' size) that NCCL's tuner gave
    ``algorithm`` and ``protocol``; ``nvls_channels`` is ``comm->nvlsChannels``, ``heads`` the
    CollNetDirect heads of a channel."""
    nc, nt = s.runtime_channels, max_threads(s, algorithm, protocol)
    thr = threshold(s, algorithm, protocol)
    if algorithm in ("NVLS", "NVLSTree"):
        nc = nvls_channels
    elif algorithm == "CollNetDirect":
        switch, short = 16, True
        while switch >= 1 and short:
            while (short := nbytes < nc * nt * heads * thr) and nc > switch:
                if nc == switch + switch // 2:
                    thr //= 2
                nc -= 1
            switch //= 2
    else:
        while nbytes < nc * nt * thr:
            if nc >= 2:
                nc -= 1
            elif nt % 128 == 0:
                nt //= 2
            else:
                break
    return Sized(nc, nt)
