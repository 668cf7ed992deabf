"""Figures of chapter 1 and lab 1, drawn from measurements and vendor figures.

Matplotlib is imported inside each function: it belongs to the book's extra
dependencies, not to the package's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...memory.bandwidth import BandwidthPoint
from ...memory.ledger import STAGES
from ...memory.roofline import KernelPoint, Roofline
from ...memory.vendor import GPUSpec


def plot_sweep(
    points: Sequence[BandwidthPoint], caches: dict[str, int], ax: Any = None, label: str = ""
) -> Any:
    """Bandwidth (GB/s) against working-set size, with cache capacities marked."""
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(7, 3.6))[1]
    ax.semilogx(
        [p.size_bytes for p in points], [p.bandwidth / 1e9 for p in points], "o-", base=2, label=label
    )
    inside = ax.get_xaxis_transform()  # x in data, y as a fraction of the axes: labels stay inside
    for name, size in caches.items():
        ax.axvline(size, color="grey", ls="--", lw=1)
        label = f"{name} {size // 1024} KiB" if size < 1 << 20 else f"{name} {size >> 20} MiB"
        ax.text(
            size,
            0.97,
            label,
            transform=inside,
            ha="right",
            va="top",
            rotation=90,
            fontsize=8,
            bbox=dict(facecolor="white", edgecolor="none", alpha=0.85, pad=1.0),
        )  # readable over the curve
    ax.set_xlabel("working set (bytes)")
    ax.set_ylabel("read bandwidth (GB/s)")
    ax.grid(True, which="both", alpha=0.3)
    return ax


def _label_points(ax: Any, points: Sequence[KernelPoint], roof: Roofline) -> None:
    """Name each point without overprinting: a point on the roof is labelled
    above it to the left (the empty side of a memory roof) or under it past
    the ridge, a point under the roof to its right; labels on one side
    stack at least a line apart, each joined to its point by a thin line."""
    ax.autoscale_view()
    scale = 72 / ax.figure.dpi  # display pixels to points
    placed: dict[str, list[float]] = {"above": [], "below": []}
    for p in sorted(points, key=lambda p: -p.flops_per_s):
        x, y = ax.transData.transform((p.intensity, p.flops_per_s)) * scale
        on_roof = p.flops_per_s > 0.7 * roof.attainable(p.intensity)
        if on_roof and p.intensity >= roof.ridge_point:
            offset, ha = (0.0, -14.0), "center"
        elif on_roof:
            want = y + 16
            ty = min([want] + [t - 13 for t in placed["above"] if abs(t - want) < 13])
            placed["above"].append(ty)
            offset, ha = (-8.0, float(ty - y)), "right"
        else:
            want = y
            ty = min([want] + [t - 13 for t in placed["below"] if abs(t - want) < 13])
            placed["below"].append(ty)
            offset, ha = (10.0, float(ty - y)), "left"
        ax.annotate(
            p.name,
            (p.intensity, p.flops_per_s),
            textcoords="offset points",
            xytext=offset,
            ha=ha,
            va="center",
            fontsize=9,
            arrowprops=dict(arrowstyle="-", color="0.5", lw=0.6, shrinkA=0, shrinkB=3),
        )


def plot_roofline(roofs: Sequence[Roofline], points: Sequence[KernelPoint] = (), ax: Any = None) -> Any:
    """Rooflines (log-log) with measured kernels as points under the first one."""
    import matplotlib.pyplot as plt
    import numpy as np

    ax = ax or plt.subplots(figsize=(7, 4.2))[1]
    lo = min([0.05] + [p.intensity / 10 for p in points])  # room on the left for the labels
    hi = max([2 * r.ridge_point for r in roofs] + [2 * p.intensity for p in points])
    x = np.logspace(np.log10(lo), np.log10(hi), 200)
    for roof in roofs:
        ax.loglog(
            x,
            [roof.attainable(i) for i in x],
            lw=2,
            label=f"{roof.label}, ridge {roof.ridge_point:.0f} FLOP/B",
        )
    for p in points:
        ax.loglog(p.intensity, p.flops_per_s, "o", color="black")
    ax.set_xlabel("arithmetic intensity (FLOPs/byte)")
    ax.set_ylabel("FLOP/s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=9, loc="lower right")  # the side no roof or point reaches
    if points:
        _label_points(ax, points, roofs[0])
    return ax


def plot_ledger(predicted: dict[str, int], measured: dict[str, int], ax: Any = None, title: str = "") -> Any:
    """Predicted and measured live bytes after each stage, side by side (MB)."""
    import matplotlib.pyplot as plt
    import numpy as np

    ax = ax or plt.subplots(figsize=(7, 3.6))[1]
    x = np.arange(len(STAGES))
    ax.bar(x - 0.2, [predicted[s] / 1e6 for s in STAGES], 0.4, label="predicted")
    ax.bar(x + 0.2, [measured[s] / 1e6 for s in STAGES], 0.4, label="measured")
    ax.set_xticks(x, STAGES, rotation=20, fontsize=9)
    ax.set_ylabel("live memory (MB)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    return ax


def batch_animation_html(
    spec: GPUSpec, d: int = 4096, batches: Sequence[int] = (), dtype: str = "bf16"
) -> str:
    """HTML of an animation: a ``(batch, d) @ (d, d)`` GEMM climbing the roofline.

    Each frame doubles the batch; intensity is counted in ``dtype`` (2 bytes),
    the height is the vendor roof at that intensity. The HTML plays in the
    static book (no kernel) with the player of
    :func:`mycollectives.viz.to_html` (labelled buttons, nothing loaded from
    the network).
    """
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.animation import FuncAnimation

    from ...viz.animation import to_html

    batches = list(batches) or [2**k for k in range(0, 13)]
    roof = Roofline.from_spec(spec, dtype)
    inten = [2 * b * d * d / (2 * (2 * b * d + d * d)) for b in batches]
    fig, ax = plt.subplots(figsize=(6.4, 3.4), dpi=100)
    x = np.logspace(-1, np.log10(4 * max(inten + [roof.ridge_point])), 100)
    ax.loglog(x, [roof.attainable(i) / 1e12 for i in x], lw=2)
    ax.axvline(roof.ridge_point, color="grey", ls="--", lw=1)
    (dot,) = ax.loglog([], [], "o", color="tab:red", ms=9)
    text = ax.text(0.02, 0.95, "", transform=ax.transAxes, va="top", fontsize=9)
    ax.set_xlabel("arithmetic intensity (FLOPs/byte)")
    ax.set_ylabel("attainable TFLOP/s")
    ax.set_title(f"{spec.name}: batch-b GEMM with a {d}x{d} weight", fontsize=9)

    def frame(i: int) -> tuple[Any, ...]:
        dot.set_data([inten[i]], [roof.attainable(inten[i]) / 1e12])
        bound = "memory" if inten[i] < roof.ridge_point else "compute"
        text.set_text(f"batch {batches[i]}: {inten[i]:.1f} FLOPs/byte, {bound}-bound")
        return dot, text

    fig.tight_layout()  # every frame keeps the axis labels inside the figure
    anim = FuncAnimation(fig, frame, frames=len(batches), interval=700, blit=False)
    html = to_html(anim)
    plt.close(fig)
    return html
