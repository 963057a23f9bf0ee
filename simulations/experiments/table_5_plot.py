"""The figure of ``table-5``: per x0, our errors over runs beside the paper's one value per cell.

One panel per n; at each x0 a box per mechanism (the Gaussian and shuffle+INV: quartiles,
whiskers at 1.5 IQR; points instead when there are fewer than 10 runs) and the published value
as a star in the mechanism's colour. Log y (the errors span four decades). Style from
:mod:`.figure_style` (the mechanisms' fixed colours, PNG + SVG).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from shuffledp.simulations.experiments.figure_style import pyplot, save_figure, series_style
from shuffledp.simulations.experiments.plots import BOX_MIN_RUNS

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
) -> tuple[Path, Path]:
    """``panels[panel title][mechanism][i]``: the runs' errors at ``x0s[i]``;
    ``published[panel title][mechanism][i]``: the paper's value there. Returns (png, svg)."""
    plt = pyplot()
    fig, axes = plt.subplots(
        1, len(panels), squeeze=False, sharey=True, figsize=(5.2 * len(panels) + 0.6, 4.4),
        layout="constrained",
    )  # fmt: skip
    try:
        for ax, (panel, series) in zip(axes[0], panels.items(), strict=True):
            for label, per_x0 in series.items():
                _draw(ax, label, x0s, per_x0, published[panel][label])
            ax.set_yscale("log")
            ax.set_xticks(list(x0s))
            ax.set_xlabel("x0 (the paper's 1-based bin; 1 = lower tail, 8 = mode)")
            ax.set_title(panel, fontsize="medium")
            ax.grid(True, which="major", alpha=0.3)
        axes[0][0].set_ylabel("|pihat_x0 - pi_x0|  (= |n pihat - n pi| / n)")
        axes[0][0].legend(fontsize="small", loc="lower left")
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
) -> None:
    style = series_style(label)
    positions = [x0 + _OFFSETS.get(label, 0.0) for x0 in x0s]
    runs = [np.asarray(values, dtype=np.float64) for values in per_x0]
    if min(len(values) for values in runs) >= BOX_MIN_RUNS:
        parts = ax.boxplot(
            runs, positions=positions, widths=0.36, patch_artist=True, manage_ticks=False,
            medianprops={"color": "black"},
            flierprops={"markersize": 2, "markeredgecolor": style.colour, "alpha": 0.5},
        )  # fmt: skip
        for patch in parts["boxes"]:
            patch.set_facecolor(style.colour)
            patch.set_alpha(0.55)
    else:
        for position, values in zip(positions, runs, strict=True):
            ax.plot(
                np.full(values.size, position), values, linestyle="none", marker=style.marker,
                color=style.colour, alpha=0.75, markersize=4,
            )  # fmt: skip
    ax.plot([], [], color=style.colour, marker=style.marker, linestyle="none",
            label=f"{label} (ours, over runs)")  # fmt: skip
    ax.plot(
        positions, list(published), linestyle="none", marker="*", markersize=11,
        markerfacecolor=style.colour, markeredgecolor="black", label=f"{label}: published (Table V)",
    )  # fmt: skip
