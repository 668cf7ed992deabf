"""NCCL's three protocols as the simulator sees them (chapter 4, "Inside NCCL").

A protocol trades bandwidth for latency (Hu et al. 2025, ``hu2025demystifying``):

* **Simple** moves large chunks and synchronises with memory fences: close to
  the link's bandwidth, several microseconds per hop.
* **LL** (low latency) stores 4 bytes of data with a 4-byte flag in every
  8-byte word, so the receiver can poll without a fence: under a microsecond
  per hop on NVLink, half the bandwidth at best.
* **LL128** does the same per 128-byte line (120 bytes of data, 8 of flag):
  nearly Simple's bandwidth at nearly LL's latency, where NVLink keeps
  128-byte stores in order.

The numbers are NCCL 2.30.7's for a ring (:mod:`mycollectives.nccl.constants`,
``nccl_tuning``): a base latency once per collective, a hardware latency per
step by the class of link the step crosses, and the bandwidth factor the model
applies (LL 0.5 since 2.21, LL128 0.92, Simple 1). NCCL also caps LL at
``llMaxBw`` and LL128 at a maximum per channel; those ceilings depend on the
GPU generation and the number of channels, so NCCL's model
(:mod:`mycollectives.nccl.model`) and the channel simulator
(:mod:`mycollectives.sim.nccl`) apply them, while a schedule of the package,
one message per pair of ranks per round, runs at the factor alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..nccl.constants import BASE_LATENCY, HW_LATENCY, LL128_FACTOR, RING_LL_FACTOR
from .graph import NET, NVLINK, PCI


@dataclass(frozen=True)
class Protocol:
    name: str
    efficiency: float  # fraction of link bandwidth that carries data
    base_latency: float  # seconds, once per collective
    step_latency: dict  # link class -> seconds per round (step)

    def round_latency(self, link_class: int) -> float:
        return self.step_latency[link_class]


US = 1e-6
_FACTOR = {"Simple": 1.0, "LL128": LL128_FACTOR, "LL": RING_LL_FACTOR}
PROTOCOLS = {
    name.lower(): Protocol(
        name.lower(),
        _FACTOR[name],
        BASE_LATENCY["Ring"][name] * US,
        {
            cls: HW_LATENCY[hw]["Ring"][name] * US
            for cls, hw in ((NVLINK, "NVLink"), (PCI, "PCI"), (NET, "NET"))
        },
    )
    for name in ("Simple", "LL128", "LL")
}
# A protocol-free model: no latency, the links' full usable bandwidth.
IDEAL = Protocol("ideal", 1.0, 0.0, {NVLINK: 0.0, PCI: 0.0, NET: 0.0})


def protocol(name: str | Protocol) -> Protocol:
    if isinstance(name, Protocol):
        return name
    if not isinstance(name, str):
        raise TypeError(f"protocol must be one of {tuple(PROTOCOLS)} or 'ideal' (a str), got {name!r}")
    if name == "ideal":
        return IDEAL
    try:
        return PROTOCOLS[name.lower()]
    except KeyError:
        raise ValueError(f"protocol must be one of {tuple(PROTOCOLS)} or 'ideal', got {name!r}") from None
