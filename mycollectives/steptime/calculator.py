"""The step-time calculator (chapter 5): :func:`step_time` and its command line.

The calculator itself lives in ``mycollectives.steptime.step`` (:func:`step_time`,
:class:`StepReport`, :class:`Row`, ``Overlap``) and is imported from here.
``python -m mycollectives.steptime.calculator`` prints, for one layout, the
table the chapter prints (:meth:`~.calculator.StepReport.table`), or with
``--search`` the layouts that fit in memory, fastest first::

    python -m mycollectives.steptime.calculator --model llama3_70b --cluster dgx_h100:128 \\
        --tp 8 --pp 4 --zero 1 --microbatches 16 --virtual 5
    python -m mycollectives.steptime.calculator --model llama3_70b --cluster dgx_h100:64 \\
        --batch 512 --search --top 5

``--cluster NODE:NODES`` names a node of :mod:`mycollectives.topology` and
how many; ``dp`` defaults to the GPUs that ``tp * cp * pp`` leave. A layout
that does not fit in the GPU's memory says so where an MFU would be. Bad
input prints one line, ``calculator: error: ...``, and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..cliargs import finite, integer, number
from ..memory.vendor import A100, H100, GPUSpec
from ..sim.expect import MAX_NODES
from ..topology import cluster
from .config import PRESETS, ModelConfig
from .layout import RECOMPUTE, Layout
from .search import search
from .step import Overlap, Row, StepReport, step_time
from .sustained import SUSTAINED, Sustained

MODELS = {m.name.lower().replace("llama 3 ", "llama3_").replace(" ", "_"): m for m in PRESETS.values()}
GPUS = {"dgx_a100": A100, "dgx_h100": H100}  # the nodes whose GPU the memory module describes


class BadInput(Exception):
    """Input the calculator cannot use; printed as one line."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line instead of argparse's usage block
        raise BadInput(message)


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m mycollectives.steptime.calculator", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, choices=sorted(MODELS), help="a preset model")
    p.add_argument("--seq", type=integer(1), help="tokens per sequence (default: the model's)")
    p.add_argument("--cluster", required=True, help="NODE:NODES, e.g. dgx_h100:16")
    for axis in ("tp", "cp", "pp", "ep", "virtual", "micro-batch"):
        p.add_argument(f"--{axis}", default=None, help=f"{axis} degree (a comma list with --search)")
    p.add_argument("--dp", type=integer(1), help="data-parallel degree (default: the GPUs left)")
    p.add_argument("--zero", default=None, help="ZeRO stage 0-3 (a comma list with --search)")
    p.add_argument("--shard", type=integer(1), help="HSDP shard group (with --zero 3)")
    p.add_argument("--no-sp", action="store_true", help="no sequence parallelism (default: on when tp > 1)")
    p.add_argument(
        "--microbatches", type=integer(1), help="micro-batches per step (default: --batch / dp, or 1)"
    )
    p.add_argument("--batch", type=integer(1), help="sequences per step (the global batch)")
    p.add_argument("--recompute", default=None, help=f"one of {RECOMPUTE} (a comma list with --search)")
    p.add_argument(
        "--tflops", type=number(above=0), help="TFLOP/s a GPU sustains (default: --mfu of its bf16 peak)"
    )
    p.add_argument(
        "--mfu",
        type=float,
        help=f"sustained MFU in (0, 1] (default {SUSTAINED.mfu:.3f}: {SUSTAINED.source})",
    )
    p.add_argument("--overlap", action="append", default=[], metavar="KIND=FRACTION",
                   help="data, fsdp, context or tensor overlap fraction (repeatable)")  # fmt: skip
    p.add_argument("--method", choices=("model", "sim"), default="model", help="cost model or simulator")
    p.add_argument("--search", action="store_true", help="list the layouts that fit, fastest first")
    p.add_argument("--top", type=integer(1), default=10, help="how many layouts --search prints")
    return p


def ints(text: str | None, name: str, default: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """``"1,2,4"`` -> ``(1, 2, 4)``; ``None`` -> ``default``."""
    if text is None:
        return default
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise BadInput(f"--{name}: expected an integer or a comma list of integers, got {text!r}") from None
    least = 0 if name == "zero" else 1
    if any(v < least for v in values):
        raise BadInput(f"--{name}: expected integers of at least {least}, got {text!r}")
    return values


def one(values: tuple[int, ...] | None, name: str, default: int) -> int:
    if values is None:
        return default
    if len(values) != 1:
        raise BadInput(f"--{name}: a list ({','.join(map(str, values))}) needs --search")
    return values[0]


def parse_cluster(text: str) -> tuple[str, int, GPUSpec]:
    node, _, count = text.partition(":")
    if node not in GPUS:
        raise BadInput(f"--cluster: node must be one of {sorted(GPUS)}, got {node!r}")
    if not count.isdigit() or not 1 <= int(count) <= MAX_NODES:
        raise BadInput(
            f"--cluster: expected NODE:NODES with NODES an integer from 1 to {MAX_NODES}, got {text!r}"
        )
    return node, int(count), GPUS[node]


def check_tflops(tflops: float | None, gpu: GPUSpec) -> None:
    """A sustained rate is at most the GPU's bf16 dense peak, and at least 0.1 % of it (MFU 0.1 %):
    below that the step takes longer than any training run, and is not a layout's question."""
    peak = gpu.peak_flops["bf16"] / 1e12
    if tflops is not None and not peak / 1000 <= tflops <= peak:
        raise BadInput(
            f"--tflops: expected a rate from {peak / 1000:g} to {peak:g} TFLOP/s (0.1 % to 100 % of the "
            f"{gpu.name}'s bf16 dense peak), got {tflops:g}"
        )


def parse_overlap(items: Sequence[str]) -> Overlap:
    fractions = {}
    for item in items:
        kind, _, value = item.partition("=")
        if kind not in ("data", "fsdp", "context", "tensor"):
            raise BadInput(f"--overlap: kind must be data, fsdp, context or tensor, got {item!r}")
        try:
            fractions[kind] = finite(float(value), "--overlap", least=0, most=1)
        except ValueError:
            raise BadInput(
                f"--overlap: expected KIND=FRACTION, a fraction from 0 to 1, got {item!r}"
            ) from None
    return Overlap(**fractions)


def layout_of(args, model: ModelConfig, gpus: int) -> Layout:
    """The single layout the arguments describe."""
    tp, cp, pp = (one(ints(getattr(args, a), a, None), a, 1) for a in ("tp", "cp", "pp"))
    if gpus % (tp * cp * pp):
        raise BadInput(f"tp x cp x pp = {tp * cp * pp} does not divide the cluster's {gpus} GPUs")
    dp = args.dp or gpus // (tp * cp * pp)
    if tp * cp * pp * dp != gpus:
        raise BadInput(f"tp x cp x pp x dp = {tp * cp * pp * dp}, but the cluster has {gpus} GPUs")
    micro_batch = one(ints(args.micro_batch, "micro-batch", None), "micro-batch", 1)
    m = args.microbatches or (args.batch // (dp * micro_batch) if args.batch else 1)
    if args.batch and m * dp * micro_batch != args.batch:
        raise BadInput(
            f"--batch {args.batch} is not dp x microbatches x micro-batch = {dp} x {m} x {micro_batch}"
        )
    recompute = args.recompute or "selective"
    lay = Layout(
        tp=tp, sp=tp > 1 and not args.no_sp, cp=cp, pp=pp, dp=dp,
        ep=one(ints(args.ep, "ep", None), "ep", 1), zero=one(ints(args.zero, "zero", None), "zero", 0),
        shard=args.shard, micro_batch=micro_batch, microbatches=m,
        virtual=one(ints(args.virtual, "virtual", None), "virtual", 1), recompute=recompute,
    )  # fmt: skip
    lay.check(model)
    return lay


def search_table(found: list[StepReport], top: int, gpus: int, batch: int) -> str:
    """The ``top`` fastest layouts that fit, one line each."""
    if not found:
        return f"no layout of the grid fits in memory on {gpus} GPUs with {batch} sequences per step"
    lines = [f"{'layout':66s}{'step s':>8s}{'MFU':>6s}{'GB':>5s}{'exposed':>9s}{'bubble':>8s}"]
    for r in found[:top]:
        lines.append(
            f"{r.layout.describe():66s}{r.step:8.2f}{100 * r.mfu:5.0f}%{r.memory['total'] / 1e9:5.0f}"
            f"{r.exposed:9.2f}{r.bubble:8.2f}"
        )
    lines.append(f"step times and MFU modelled, not measured, compute {found[0].assumption}; "
                 f"{len(found)} layouts fit; the fastest {min(top, len(found))} shown")  # fmt: skip
    return "\n".join(lines)


def run(argv: Sequence[str] | None) -> str:
    args = parser().parse_args(argv)
    model = MODELS[args.model]
    if args.seq:
        model = model.with_seq(args.seq)
    node, nodes, gpu = parse_cluster(args.cluster)
    check_tflops(args.tflops, gpu)
    topology = cluster(node, nodes if args.method == "sim" else min(nodes, 2))
    gpus = nodes * topology.gpus_per_node
    if args.mfu is not None and args.tflops:
        raise BadInput("give --mfu or --tflops, not both")
    sustained = SUSTAINED if args.mfu is None else Sustained(args.mfu, "given (--mfu)")
    kw = dict(
        method=args.method, gpu=gpu, overlap=parse_overlap(args.overlap),
        compute_rate=args.tflops * 1e12 if args.tflops else None, sustained=sustained,
    )  # fmt: skip
    if not args.search:
        return step_time(model, layout_of(args, model, gpus), topology, **kw).table()
    if not args.batch:
        raise BadInput("--search needs --batch, the sequences per step")
    grid = {a: ints(getattr(args, a), a, None) for a in ("tp", "cp", "pp", "ep", "virtual", "zero")}
    grid = {a: v for a, v in grid.items() if v is not None}
    if args.recompute:
        grid["recompute"] = tuple(args.recompute.split(","))
    found = search(model, gpus, args.batch, topology, step_kw=kw, **grid)
    return search_table(found, args.top, gpus, args.batch)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table (or the search); on bad input one line on stderr and status 2."""
    try:
        print(run(argv))
    except (BadInput, ValueError) as e:
        print(f"calculator: error: {e}".replace("error: mfu:", "error: --mfu:"), file=sys.stderr)
        return 2
    return 0


__all__ = ["Overlap", "Row", "StepReport", "main", "step_time"]

if __name__ == "__main__":
    raise SystemExit(main())
