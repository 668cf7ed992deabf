"""The step-time calculator (chapter 5): model x layout x topology -> time, bytes and memory.

:func:`step_time` lists every collective of one training step
(:func:`~.traffic.comms`), prices each on the topology (the cost model of
:mod:`.costs`, or the simulator through :mod:`.groupsim`), and puts them
beside the compute:

- compute: the step's FLOPs per GPU (:meth:`~.config.ModelConfig.flops_per_token`,
  plus a second forward pass under full recomputation) at ``compute_rate``, by
  default the MFU that published FSDP runs on H100s sustained (:mod:`.sustained`,
  fitted on llm-foundry's runs); every MFU printed says which rate it assumed,
  and every step time is labelled as modelled;
- each collective is *hidden* behind the compute that may overlap it, as far
  as that compute lasts and as far as ``Overlap`` allows, and
  *exposed* otherwise: the gradient reduction behind the last micro-batch's
  backward pass, FSDP's gathers and reduce-scatters behind every unit's
  compute by prefetch, ring attention's steps behind attention, tensor
  parallelism's collectives behind the matmuls they feed (a collective
  matmul); expert and pipeline parallelism stay on the critical path;
- the pipeline bubble, ``(pp - 1) / (v m)`` of the work of one stage.

The defaults of ``Overlap`` are an asymmetry to keep in mind: data
parallelism, FSDP and ring attention hide *entirely* whenever there is
compute enough (as if their kernels took nothing from the matmuls), while
tensor parallelism hides *nothing* (Megatron-LM's default, no collective
matmul). A layout that trades tensor parallelism for FSDP looks as good as
the first assumption is true; pass other fractions to see how much the
answer depends on them.

Overlap draws on one pool of time per kind of compute, so two collectives
cannot both hide behind the same milliseconds. Links are not shared between
collectives that overlap one another; the simulator of chapter 4 prices
each call on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..memory.vendor import H100, GPUSpec
from ..topology import Topology
from .config import ModelConfig
from .costs import Links, cost, placement
from .footprint import memory_per_gpu
from .groupsim import simulate_comm
from .layout import Layout
from .sustained import SUSTAINED, Sustained
from .traffic import Comm, comms


@dataclass(frozen=True)
class Overlap:
    """The fraction of each kind of collective that may hide behind the compute beside it.

    ``data``: data parallelism's gradient reduction (DDP's buckets, ZeRO-1/2's
    reduce-scatter, HSDP's all-reduce) behind the last micro-batch's backward
    pass, and ZeRO-1/2's parameter all-gather behind the forward pass.
    ``fsdp``: FSDP's and HSDP's per-unit gathers and reduce-scatters behind
    the units' compute (prefetch). ``context``: ring attention's steps behind
    attention. ``tensor``: tensor and sequence parallelism's collectives
    behind the matmuls (0: Megatron-LM's default; 1: a perfect collective
    matmul). Each is a number from 0 to 1; the defaults are the optimistic
    bound for the first three and the pessimistic one for the last.
    """

    data: float = 1.0
    fsdp: float = 1.0
    context: float = 1.0
    tensor: float = 0.0

    def __post_init__(self) -> None:
        for name in ("data", "fsdp", "context", "tensor"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise ValueError(f"Overlap: {name} must be a fraction from 0 to 1, got {v!r}")

    @classmethod
    def none(cls) -> Overlap:
        """Every collective exposed."""
        return cls(0.0, 0.0, 0.0, 0.0)

    def fraction(self, window: str) -> float:
        """The fraction for a collective that hides behind ``window`` (:attr:`.traffic.Comm.hides_behind`)."""
        field_of = {"backward": "data", "forward": "data", "compute": "fsdp", "attention": "context"}
        field_of["matmul"] = "tensor"
        return getattr(self, field_of[window]) if window in field_of else 0.0


@dataclass(frozen=True)
class Row:
    """One kind of call in a step, per GPU: its cost and how much of it is hidden."""

    comm: Comm
    where: str  # "8 ranks on 1 node", "128 ranks, 1 per node" ...
    time: float  # seconds, all calls of the step
    nvlink_bytes: float  # sent by one GPU in the step
    network_bytes: float
    hidden: float  # seconds overlapped with compute

    @property
    def exposed(self) -> float:
        return self.time - self.hidden


@dataclass(frozen=True)
class StepReport:
    model: ModelConfig
    layout: Layout
    topology: str
    rows: list[Row]
    compute: float
    bubble: float
    memory: dict[str, float]
    gpu: GPUSpec = field(default=H100)
    gpus_per_node: int = 8
    assumption: str = ""  # the compute rate it assumed and its source ("at 39.8 % MFU, assumed: ...")

    @property
    def exposed(self) -> float:
        return sum(r.exposed for r in self.rows)

    @property
    def fits(self) -> bool:
        """Whether the memory per GPU fits in the GPU's HBM (an MFU means nothing otherwise)."""
        return self.memory["total"] <= self.gpu.hbm_bytes

    def verdict(self) -> str:
        """``"MFU 35 % (modelled at 39.8 % MFU, assumed: ...)"``, or ``"does not fit: 86 GB of 80"``
        for a layout that cannot run."""
        if self.fits:
            return f"MFU {100 * self.mfu:.0f} %; compute {self.assumption}"
        return f"does not fit: {self.memory['total'] / 1e9:.0f} GB of {self.gpu.hbm_bytes / 1e9:.0f}"

    @property
    def step(self) -> float:
        return self.compute + self.exposed + self.bubble

    @property
    def tokens(self) -> int:
        return self.layout.tokens(self.model)

    @property
    def mfu(self) -> float:
        """Model FLOPs over what the GPUs could do at peak in the step's time."""
        flops = self.model.flops_per_token() * self.tokens
        return flops / (self.step * self.layout.world * self.gpu.peak_flops["bf16"])

    def by_strategy(self) -> dict[str, dict[str, float]]:
        """Per strategy: seconds of communication, exposed seconds, and bytes per link class."""
        out: dict[str, dict[str, float]] = {}
        for r in self.rows:
            d = out.setdefault(r.comm.strategy, dict(time=0.0, exposed=0.0, nvlink=0.0, network=0.0))
            d["time"] += r.time
            d["exposed"] += r.exposed
            d["nvlink"] += r.nvlink_bytes
            d["network"] += r.network_bytes
        return out

    def table(self) -> str:
        """One line per kind of call, then the step; lines fit 95 characters."""
        head = f"{'strategy':9s}{'collective':15s}{'group':23s}{'calls':>6s}{'MB/call':>8s}"
        head += f"{'NVLink GB':>10s}{'net GB':>8s}{'time ms':>8s}{'exposed':>8s}"
        nodes = -(-self.layout.world // self.gpus_per_node)
        title = f"{self.model.name}, {self.layout.describe()}"
        lines = [
            title,
            f"{self.layout.world} GPUs, {nodes} nodes of {self.gpus_per_node}; modelled, not measured",
            head,
        ]
        for r in self.rows:
            c = r.comm
            lines.append(
                f"{c.strategy:9s}{c.collective:15s}{r.where:23s}{c.calls:6.0f}{c.nbytes / 1e6:8.1f}"
                f"{r.nvlink_bytes / 1e9:10.2f}{r.network_bytes / 1e9:8.2f}{r.time * 1e3:8.1f}{r.exposed * 1e3:8.1f}"
            )
        lines.append(
            f"compute {self.compute * 1e3:.0f} ms + exposed communication {self.exposed * 1e3:.0f} ms "
            f"+ bubble {self.bubble * 1e3:.0f} ms = step {self.step * 1e3:.0f} ms"
        )
        lines.append(f"{self.tokens / self.step / self.layout.world:,.0f} tokens/s per GPU")
        lines.append(self.verdict())
        short = {
            "parameters": "params",
            "gradients": "grads",
            "optimizer": "optimizer",
            "activations": "acts",
        }
        mem = ", ".join(f"{short[k]} {v / 1e9:.1f}" for k, v in self.memory.items() if k != "total")
        total = f"{self.memory['total'] / 1e9:.1f} of {self.gpu.hbm_bytes / 1e9:.0f}"
        lines.append(f"memory per GPU, GB: {mem}; total {total}")
        return "\n".join(lines)


def step_time(
    model: ModelConfig,
    layout: Layout,
    topology: Topology,
    *,
    method: str = "model",
    compute_rate: float | None = None,
    gpu: GPUSpec = H100,
    overlap: bool | Overlap = True,
    async_tp: bool = False,
    protocol: str = "simple",
    sustained: Sustained = SUSTAINED,
) -> StepReport:
    """Time, traffic and memory of one training step of ``model`` split by ``layout`` on ``topology``.

    ``method``: ``"model"`` (the cost model, instant) or ``"sim"`` (every
    call simulated on ``topology``, which must then have ``layout.world``
    GPUs). ``compute_rate``: FLOP/s a GPU sustains (default: ``sustained``'s
    MFU of ``gpu``'s bf16 peak, :mod:`.sustained`). ``overlap``: an ``Overlap``, ``True`` for
    its defaults, ``False`` to expose every collective. ``async_tp=True``
    hides tensor parallelism fully (``Overlap(tensor=1)``).
    """
    if method not in ("model", "sim"):
        raise ValueError(f"method must be 'model' or 'sim', got {method!r}")
    if method == "sim" and topology.num_gpus < layout.world:
        raise ValueError(f"method='sim' needs {layout.world} GPUs; {topology.name} has {topology.num_gpus}")
    fractions = overlap if isinstance(overlap, Overlap) else Overlap() if overlap else Overlap.none()
    if async_tp:
        fractions = replace(fractions, tensor=1.0)
    links = Links.of(topology, protocol)
    if compute_rate is None:
        rate, assumption = sustained.rate(model, gpu), sustained.label()
    else:
        rate, assumption = compute_rate, f"at {compute_rate / 1e12:g} TFLOP/s per GPU, given"
    compute = compute_seconds(model, layout, rate)
    pool = compute_pools(model, layout, compute)
    rows = price_rows(comms(model, layout), layout, topology, pool, fractions, method, protocol)
    per_micro = sum(r.exposed for r in rows if r.comm.strategy in ("TP", "SP", "CP", "EP", "PP"))
    bubble = (layout.pp - 1) / (layout.virtual * layout.microbatches) * (compute + per_micro)
    memory = memory_per_gpu(model, layout, gpu)
    return StepReport(
        model, layout, topology.name, rows, compute, bubble, memory, gpu, links.gpus_per_node, assumption
    )


def price_rows(
    calls: list[Comm],
    layout: Layout,
    topology: Topology,
    pool: dict[str, float],
    fractions: Overlap,
    method: str = "model",
    protocol: str = "simple",
) -> list[Row]:
    """Price each kind of call on ``topology`` and hide what ``fractions`` allows behind the
    seconds of compute left in ``pool`` (by window; spent in the order of ``calls``)."""
    links = Links.of(topology, protocol)
    rows = []
    for comm in calls:
        members = layout.members(comm.axes)
        per_node, nodes = placement(members, links.gpus_per_node)
        where = (
            f"{len(members)} ranks, {per_node} per node" if nodes > 1 else f"{len(members)} ranks on 1 node"
        )
        price = cost(comm, layout, links)
        one_call = simulate_comm(comm, layout, topology, protocol) if method == "sim" else price.time
        seconds = one_call * comm.calls
        window = comm.hides_behind
        hidden = min(seconds * fractions.fraction(window), pool.get(window, 0.0))
        if hidden:
            pool[window] -= hidden
        sent = (price.nvlink_bytes * comm.calls, price.network_bytes * comm.calls)
        rows.append(Row(comm, where, seconds, *sent, hidden))
    return rows


def compute_seconds(model: ModelConfig, layout: Layout, rate: float) -> float:
    """One GPU's compute in a step at ``rate`` FLOP/s (a second forward pass under full recomputation)."""
    flops = model.flops_per_token() * layout.tokens(model) / layout.world
    if layout.recompute == "full":
        flops *= 4 / 3  # the forward pass (a third of the work) runs again
    return flops / rate


def compute_pools(model: ModelConfig, layout: Layout, compute: float) -> dict[str, float]:
    """Seconds of each kind of compute that collectives may hide behind (:attr:`.traffic.Comm.hides_behind`)."""
    m = layout.microbatches
    attention = 6 * model.layers * model.seq * model.hidden / model.flops_per_token()
    return {
        "backward": 2 / 3 * compute / m,
        "forward": 1 / 3 * compute / m,
        "compute": compute,
        "attention": attention * compute,
        "matmul": (1 - attention) * compute,
    }
