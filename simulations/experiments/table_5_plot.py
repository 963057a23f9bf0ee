"""The figure of ``table-5``: per x0, our errors over runs beside the paper's one value per cell.

One panel per n; at each x0 a box per mechanism (the Gaussian and shuffle+INV: quartiles,
whiskers at 1.5 IQR; points instead where fewer than 10 runs are above 0, since a log axis
cannot show a 0 and quartiles of the others alone would mislead) and the published value
as a star in the mechanism's colour. Log y (the errors span four decades). Style from
:mod:`.figure_style` (the mechanisms' fixed colours, PNG + SVG).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from shuffledp.simulations.experiments.figure_style import pyplot, save_figure, series_style
from shuffledp.simulations.experiments.plots import BOX_MIN_RUNS, draw_runs_at

__all__ = ["per_x0_figure"]

#: Mechanism label -> (position offset in x0 units).
_OFFSETS = {"Gaussian": -0.22, "shuffle+INV": 0.22}


def per_x0_figure(
    path: Path,
    x0s: Sequence[int],
    panels: Mapping[str, Mapping[str, Sequence[Sequence[float]]]],
    published: Mapping[str, Mapping[str, Sequence[float]]],
    *,
    title: str,
    xlabel: str = "x0 (the paper's 1-based bin; 1 = lower tail, 8 = mode)",
    table: str = "Table V",
) -> tuple[Path, Path]:
    """``panels[panel title][mechanism][i]``: the runs' errors at ``x0s[i]``;
    ``published[panel title][mechanism][i]``: the paper's value there (labelled as ``table``'s).
    Boxes and offsets scale with the spacing of ``x0s``. Returns (png, svg)."""
    spacing = float(min(np.diff(sorted(x0s)), default=1.0)) if len(x0s) > 1 else 1.0
    plt = pyplot()
    fig, axes = plt.subplots(
        1, len(panels), squeeze=False, sharey=True, figsize=(5.2 * len(panels) + 0.6, 4.4),
        layout="constrained",
    )  # fmt: skip
    try:
        for ax, (panel, series) in zip(axes[0], panels.items(), strict=True):
            hidden = sum(
                _draw(ax, label, x0s, per_x0, published[panel][label], spacing, table)
                for label, per_x0 in series.items()
            )
            if hidden:  # a log axis cannot show an exact 0 (an empty cell estimated empty)
                ax.text(
                    0.98, 0.02, f"{hidden} value(s) = 0 not drawn (log axis)",
                    transform=ax.transAxes, ha="right", fontsize="x-small",
                )  # fmt: skip
            ax.set_yscale("log")
            ax.set_xticks(list(x0s))
            ax.set_xlabel(xlabel)
            ax.set_title(panel, fontsize="medium")
            ax.grid(True, which="major", alpha=0.3)
        axes[0][0].set_ylabel("|pihat_x0 - pi_x0|  (= |n pihat - n pi| / n)")
        # Below the panels: inside, it covered the low stars and whiskers (Table VI, Paris).
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=4, fontsize="small")
        fig.suptitle(title, fontsize="medium")
    except BaseException:
        plt.close(fig)
        raise
    return save_figure(fig, path)


def _draw(
    ax: Any,
    label: str,
    x0s: Sequence[int],
    per_x0: Sequence[Sequence[float]],
    published: Sequence[float],
    spacing: float,
    table: str,
) -> int:
    """Draw one mechanism; return how many of its values are <= 0 (not drawable on log y)."""
    style = series_style(label)
    positions = [x0 + spacing * _OFFSETS.get(label, 0.0) for x0 in x0s]
    every = [np.asarray(values, dtype=np.float64) for values in per_x0]
    runs = [values[values > 0] for values in every]
    hidden = sum(int(values.size) for values in every) - sum(int(v.size) for v in runs)
    for position, values in zip(positions, runs, strict=True):
        # A box needs BOX_MIN_RUNS drawable values: quartiles of the positive runs only (a run
        # of exactly 0 dropped) would misplace the median, so such a position shows points.
        if values.size:
            boxes = values.size >= BOX_MIN_RUNS
            draw_runs_at(ax, position, values, boxes=boxes, width=0.36 * spacing, style=style)
    ax.plot([], [], color=style.colour, marker=style.marker, linestyle="none",
            label=f"{label} (ours, over runs)")  # fmt: skip
    ax.plot(
        positions, list(published), linestyle="none", marker="*", markersize=11,
        markerfacecolor=style.colour, markeredgecolor="black", label=f"{label}: published ({table})",
    )  # fmt: skip
    return hidden
