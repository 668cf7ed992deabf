"""NCCL's three protocols as the simulator sees them (chapter 4, "Inside NCCL").

A protocol trades bandwidth for latency (Hu et al. 2025, ``hu2025demystifying``):

* **Simple** moves large chunks and synchronises with memory fences: close to
  the link's bandwidth, several microseconds per hop.
* **LL** (low latency) stores 4 bytes of data with a 4-byte flag in every
  8-byte word, so the receiver can poll without a fence: about a microsecond
  per hop, at most half the bandwidth.
* **LL128** does the same per 128-byte line (120 bytes of data, 8 of flag):
  nearly Simple's bandwidth at nearly LL's latency, where NVLink keeps
  128-byte stores in order.

The numbers are NCCL's tuning constants for ring algorithms
(``nccl_tuning``, ``src/graph/tuning.cc``): a base latency per collective
and a per-step hardware latency per link class, in microseconds, and the
bandwidth factor its model applies (LL 0.5, LL128 0.92, Simple 1).
"""

from __future__ import annotations

from dataclasses import dataclass

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
PROTOCOLS = {
    "simple": Protocol("simple", 1.0, 8.4 * US, {NVLINK: 3.4 * US, PCI: 5.7 * US, NET: 14.0 * US}),
    "ll128": Protocol("ll128", 0.92, 14.0 * US, {NVLINK: 1.9 * US, PCI: 2.5 * US, NET: 4.0 * US}),
    "ll": Protocol("ll", 0.5, 6.6 * US, {NVLINK: 0.6 * US, PCI: 1.0 * US, NET: 2.7 * US}),
}
# A protocol-free model: no latency, the links' full usable bandwidth.
IDEAL = Protocol("ideal", 1.0, 0.0, {NVLINK: 0.0, PCI: 0.0, NET: 0.0})


def protocol(name: str | Protocol) -> Protocol:
    if isinstance(name, Protocol):
        return name
    if name == "ideal":
        return IDEAL
    try:
        return PROTOCOLS[name.lower()]
    except KeyError:
        raise ValueError(f"protocol must be one of {tuple(PROTOCOLS)} or 'ideal', got {name!r}") from None
