"""The report's PNG chart: per partition, segment bytes, superseded records and the dirty ratio
(with each partition's ``min.cleanable.dirty.ratio``), one panel each; with a "before" report,
before and after side by side.

Drawn on an Agg canvas through :class:`matplotlib.figure.Figure`, not ``pyplot``: no global
backend is switched and no figure is left registered, so the chart can be written from a
notebook or a thread without side effects. The size in pixels is exact (no tight bounding box):
:func:`chart_size`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

from compactlog.spark._partition_report import PartitionReport

CHART_DPI = 100
CHART_HEIGHT_PX = 900
MIN_CHART_WIDTH_PX = 1000
#: Horizontal room per partition and per report drawn (a multiple of the DPI: exact inches).
BAR_GROUP_WIDTH_PX = 100
_BEFORE_COLOR = "tab:gray"
_AFTER_COLOR = "tab:blue"


def chart_size(partitions: int, comparing: bool) -> tuple[int, int]:
    """The chart's ``(width, height)`` in pixels for ``partitions`` partitions."""
    per_partition = BAR_GROUP_WIDTH_PX * (2 if comparing else 1)
    return max(MIN_CHART_WIDTH_PX, 2 * BAR_GROUP_WIDTH_PX + per_partition * partitions), (
        CHART_HEIGHT_PX
    )


def write_chart(
    reports: Sequence[PartitionReport],
    path: str | os.PathLike[str],
    before: Sequence[PartitionReport] | None = None,
    title: str | None = None,
) -> tuple[int, int]:
    """Draw ``reports`` (and ``before``, if given, to their left) into the PNG file ``path``;
    returns its ``(width, height)`` in pixels. Partitions are matched by topic and partition; a
    partition missing from one side has no bar there."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415
    from matplotlib.figure import Figure  # noqa: PLC0415
    from matplotlib.ticker import EngFormatter  # noqa: PLC0415

    after = {r.name: r for r in reports}
    prior = {r.name: r for r in before or ()}
    names = list(after) + [n for n in prior if n not in after]
    width, height = chart_size(len(names), before is not None)
    figure = Figure(figsize=(width / CHART_DPI, height / CHART_DPI), dpi=CHART_DPI)
    figure.set_layout_engine("constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(3, 1, sharex=True)
    series = [("after", after, _AFTER_COLOR)]
    if before is not None:
        series.insert(0, ("before", prior, _BEFORE_COLOR))
    x = np.arange(len(names), dtype=float)
    bar_width = 0.8 / len(series)
    panels: list[tuple[str, Callable[[PartitionReport], float]]] = [
        ("segment bytes", lambda r: r.bytes),
        ("superseded records", lambda r: r.superseded),
        ("dirty ratio", lambda r: r.dirty_ratio),
    ]
    for ax, (label, value) in zip(axes, panels, strict=True):
        for i, (name, by_name, color) in enumerate(series):
            heights = [value(by_name[n]) if n in by_name else np.nan for n in names]
            shift = (i - (len(series) - 1) / 2) * bar_width
            ax.bar(x + shift, heights, bar_width, label=name, color=color)
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)  # counts: an all-zero panel must not show negative ticks
        ax.grid(axis="y", alpha=0.3)
    axes[0].yaxis.set_major_formatter(EngFormatter(unit="B"))
    ratio = axes[2]
    ratio.set_ylim(0, 1.3)  # room above 1.0 for the legend
    ratio.set_yticks(np.linspace(0, 1, 6))
    thresholds = [(after.get(n) or prior[n]).min_cleanable_dirty_ratio for n in names]
    ratio.hlines(
        thresholds,
        x - 0.45,
        x + 0.45,
        colors="tab:red",
        linestyles="dashed",
        label="min.cleanable.dirty.ratio",
    )
    ratio.legend(loc="upper center", fontsize="small", ncols=len(series) + 1)
    if before is not None:
        axes[0].legend(loc="upper right", fontsize="small")
    ratio.set_xticks(
        x, names, rotation=45 if len(names) > 8 else 0, ha="right" if len(names) > 8 else "center"
    )
    figure.suptitle(title or "compactlog report")
    figure.savefig(os.fspath(path), format="png")
    return width, height
