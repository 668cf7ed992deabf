"""How fast a virtual GPU's kernels run: achieved rates by default, the roofline on request.

A datasheet's peak is a bound no kernel reaches. By default (``virtual.run(...,
compute="achieved")``) a rank's ops are priced at what measured GPUs reach:

* **GEMMs** at the best bf16 matmul efficiency measured on each GPU, the
  "maximum achievable matmul FLOPS" of Bekman's table
  (bekman2025mamf) (A100 SXM 86.9 %, H100 SXM 80.3 %, GH200 83.8 %
  for the H200, which shares its HBM3e and Hopper die, B200 77.6 %, and
  the B200's figure for a GB200, which has none measured), and below it
  by shape: a GEMM of at least one wave is cut into 128 x 128 output tiles
  that the GPU's SMs run in waves, so a shape that leaves tiles partly
  empty, or a last wave partly idle, pays for the whole tile or wave (tile and wave quantisation,
  NVIDIA's *Matrix Multiplication Background* guide (nvidia2023matmul)).
  A float32 GEMM runs at the TF32 tensor-core rate (half the bf16 one, as
  on the A100 and H100 datasheets) when torch's
  ``torch.get_float32_matmul_precision()`` is ``"high"`` or ``"medium"``,
  and at the FP32 rate under ``"highest"`` (torch's default);
* **memory-bound kernels** at 84 % of the HBM datasheet rate: a coalesced
  stream on an H100 SXM measured 2.8 of 3.35 TB/s (mikamirai2026hbm)
  (one GPU's measurement, applied to all);
* **every kernel** at least ``KERNEL_FLOOR``.

``compute="roofline"`` prices every op at the datasheet's peak and HBM rate
(the bound of chapter 1). A :class:`Rates` of one's own is accepted too;
an efficiency outside (0, 1] is refused with a ``ValueError`` naming it.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch

# The smallest time one kernel takes on the GPU (launch and tail on the device, not the host's
# launch overhead): a few microseconds for the tiniest kernels. Assumed, not measured here or fitted.
KERNEL_FLOOR = 2e-6

# Maximum achievable bf16 matmul FLOPS over the datasheet's dense peak (bekman2025mamf).
GEMM_EFFICIENCY = {"A100 SXM4": 0.869, "H100 SXM5": 0.803, "H200 SXM5": 0.838, "B200": 0.776, "GB200": 0.776}
HBM_FRACTION = 0.84  # 2.8 of 3.35 TB/s, a coalesced stream on an H100 SXM (mikamirai2026hbm)
SMS = {"A100 SXM4": 108, "H100 SXM5": 132, "H200 SXM5": 132, "B200": 148, "GB200": 148}  # datasheets
TILE = 128  # the output tile of a GEMM (nvidia2023matmul)
MODES = ("achieved", "roofline")


def fraction(name: str, value) -> float:
    """``value`` as a float if it is an efficiency in (0, 1]; else a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value <= 1:
        raise ValueError(f"{name}: expected an efficiency in (0, 1], got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Rates:
    """The fraction of its peak each kind of kernel reaches, and how long the shortest one takes."""

    gemm: float = 1.0  # of the tensor-core (or FP32) peak, a GEMM of the best shape
    hbm: float = 1.0  # of the HBM datasheet rate, a memory-bound kernel
    floor: float = KERNEL_FLOOR  # seconds, at least, per kernel
    sms: int | None = None  # SMs that run a GEMM's tiles in waves (None: no tile or wave quantisation)
    name: str = "roofline"
    reductions: bool = True  # charge the reductions inside collectives (False: free, as the round simulator)

    def __post_init__(self) -> None:
        fraction("gemm", self.gemm)
        fraction("hbm", self.hbm)
        if isinstance(self.floor, bool) or not isinstance(self.floor, numbers.Real) or not self.floor >= 0:
            raise ValueError(f"floor: expected seconds >= 0, got {self.floor!r}")
        if self.sms is not None and (not isinstance(self.sms, int) or self.sms < 1):
            raise ValueError(f"sms: expected a positive int or None, got {self.sms!r}")


ROOFLINE = Rates()
# The roofline with free reductions: what the round simulator prices, for comparing the two engines' networks.
NETWORK_ONLY = Rates(name="roofline, reductions free", reductions=False)


def rates_of(gpu: str, compute: str | Rates = "achieved") -> Rates:
    """The rates of ``gpu`` (a name of ``GEMM_EFFICIENCY``) for ``compute``: ``"achieved"``,
    ``"roofline"`` or a :class:`Rates`."""
    if isinstance(compute, Rates):
        return compute
    if compute == "roofline":
        return ROOFLINE
    if compute != "achieved":
        raise ValueError(f"compute: expected one of {MODES} or a Rates, got {compute!r}")
    return Rates(GEMM_EFFICIENCY[gpu], HBM_FRACTION, KERNEL_FLOOR, SMS[gpu], f"achieved ({gpu})")


def gemm_shape(name: str, args) -> tuple[int, int, int, int] | None:
    """``(batch, m, n, k)`` of a matrix product (``aten::mm``, ``addmm``, ``bmm``, ``baddbmm``), else None."""
    if name in ("aten::mm", "aten::bmm"):
        a, b = args[0], args[1]
    elif name in ("aten::addmm", "aten::baddbmm"):
        a, b = args[1], args[2]
    else:
        return None
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.dim() not in (2, 3):
        return None
    batch = a.shape[0] if a.dim() == 3 else 1
    return batch, a.shape[-2], b.shape[-1], a.shape[-1]


def quantisation(shape: tuple[int, int, int, int], sms: int) -> float:
    """How much longer than its FLOPs say a GEMM takes: the tiles and waves it pays for over what it uses.

    Only a GEMM of at least one full wave of tiles is charged so; a smaller one leaves SMs idle
    whatever its tiles, and libraries split its K or pick smaller tiles, which this does not model
    (the HBM bound and the kernel floor price it)."""
    batch, m, n, _ = shape
    tiles = batch * math.ceil(m / TILE) * math.ceil(n / TILE)
    if tiles < sms:
        return 1.0
    waves = math.ceil(tiles / sms)
    return waves * sms * TILE * TILE / (batch * m * n)


def tf32() -> bool:
    """Whether torch runs float32 matmuls on TF32 tensor cores (its matmul precision setting)."""
    return torch.get_float32_matmul_precision() in ("high", "medium")
