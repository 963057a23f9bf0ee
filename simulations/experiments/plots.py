"""Figures shared by the experiments: line plots with error bands, grouped box plots, heat maps.

matplotlib is imported inside each function with the non-interactive Agg backend (no display
needed; ``shuffledp`` commands that do not plot never pay for the import). Each function writes
one PNG and returns its path. Colours follow one fixed order per series label, so the same
estimator has the same colour in every figure of a run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from shuffledp.errors import InvalidParameterError

__all__ = ["box_plot", "heat_maps", "line_plot"]

#: Resolution of every PNG (dots per inch).
DPI = 120


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _colours(count: int) -> list[Any]:
    plt = _pyplot()
    cycle = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    return [cycle[i % len(cycle)] for i in range(count)]


def line_plot(
    path: Path,
    x: Sequence[float],
    series: Mapping[str, tuple[Sequence[float], Sequence[float], Sequence[float]]],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    logx: bool = False,
    logy: bool = False,
) -> Path:
    """One line per series with a shaded band: ``series[label] = (centre, low, high)`` at each
    x (e.g. median and the 10th / 90th percentiles over runs; say which in the caption)."""
    plt = _pyplot()
    xs = np.asarray(x, dtype=np.float64)
    fig, ax = plt.subplots(figsize=(7.0, 4.5))
    try:
        for colour, (label, (centre, low, high)) in zip(
            _colours(len(series)), series.items(), strict=True
        ):
            for name, values in (("centre", centre), ("low", low), ("high", high)):
                if len(values) != xs.size:
                    raise InvalidParameterError(
                        f"series {label!r} {name} must have {xs.size} points, got {len(values)}"
                    )
            ax.plot(xs, centre, marker="o", color=colour, label=label)
            ax.fill_between(xs, low, high, color=colour, alpha=0.2, linewidth=0)
        ax.legend(fontsize="small")
        _finish(ax, xlabel=xlabel, ylabel=ylabel, title=title, logx=logx, logy=logy)
        fig.tight_layout()
        fig.savefig(path, dpi=DPI)
    finally:
        plt.close(fig)
    return path


def box_plot(
    path: Path,
    groups: Sequence[str],
    data: Mapping[str, Sequence[Sequence[float]]],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    logy: bool = False,
) -> Path:
    """Grouped box plots: for each group (e.g. each n) one box per series side by side;
    ``data[series][g]`` are the values of series in group g (e.g. one TV distance per run).
    Boxes: quartiles, median line, whiskers at 1.5 IQR, outliers as points."""
    plt = _pyplot()
    if not groups or not data:
        raise InvalidParameterError("box_plot needs at least one group and one series")
    for label, per_group in data.items():
        if len(per_group) != len(groups):
            raise InvalidParameterError(
                f"series {label!r} must have {len(groups)} groups, got {len(per_group)}"
            )
    count = len(data)
    width = 0.8 / count
    fig, ax = plt.subplots(figsize=(max(7.0, 1.2 * len(groups) * count * 0.45 + 2), 4.8))
    try:
        handles = []
        for index, (colour, (label, per_group)) in enumerate(
            zip(_colours(count), data.items(), strict=True)
        ):
            positions = np.arange(len(groups)) + (index - (count - 1) / 2) * width
            boxes = ax.boxplot(
                [np.asarray(values, dtype=np.float64) for values in per_group],
                positions=positions,
                widths=width * 0.9,
                patch_artist=True,
                manage_ticks=False,
                flierprops={"markersize": 3, "markeredgecolor": colour},
                medianprops={"color": "black"},
            )
            for patch in boxes["boxes"]:
                patch.set_facecolor(colour)
                patch.set_alpha(0.6)
            handles.append((boxes["boxes"][0], label))
        ax.set_xticks(np.arange(len(groups)))
        ax.set_xticklabels(list(groups))
        ax.legend([h for h, _ in handles], [label for _, label in handles], fontsize="small")
        _finish(ax, xlabel=xlabel, ylabel=ylabel, title=title, logx=False, logy=logy)
        fig.tight_layout()
        fig.savefig(path, dpi=DPI)
    finally:
        plt.close(fig)
    return path


def heat_maps(
    path: Path,
    panels: Sequence[tuple[str, npt.ArrayLike]],
    *,
    rows: int,
    columns: int,
    title: str,
    colorbar_label: str = "share of check-ins",
    extent: tuple[float, float, float, float] | None = None,
    shared_scale: bool = True,
) -> Path:
    """Heat maps of a region grid side by side, one panel per ``(caption, values)``.

    ``values``: one number per cell in the regions' numbering (``cell = row * columns +
    column``, row 0 the southernmost band, column 0 the westernmost; see
    :mod:`shuffledp.simulations.data.regions`), reshaped to (rows, columns) and drawn with
    ``origin="lower"``, so north is up and east is right. ``extent`` = (lon_min, lon_max,
    lat_min, lat_max) labels the axes in degrees. ``shared_scale``: one colour scale for all
    panels (so equal colours mean equal values across panels).
    """
    plt = _pyplot()
    if not panels:
        raise InvalidParameterError("heat_maps needs at least one panel")
    grids = []
    for caption, values in panels:
        arr = np.asarray(values, dtype=np.float64)
        if arr.size != rows * columns:
            raise InvalidParameterError(
                f"panel {caption!r} must have rows * columns = {rows * columns} cells, "
                f"got {arr.size}"
            )
        grids.append(arr.reshape(rows, columns))
    vmin = min(float(np.nanmin(g)) for g in grids) if shared_scale else None
    vmax = max(float(np.nanmax(g)) for g in grids) if shared_scale else None
    count = len(grids)
    # Cells drawn square (a map-like shape); constrained layout keeps labels and the shared
    # colour bar from overlapping the neighbouring panel.
    aspect_ratio = rows / columns
    panel_width = 3.6
    fig, axes = plt.subplots(
        1,
        count,
        figsize=(panel_width * count + 1.2, panel_width * aspect_ratio + 1.3),
        squeeze=False,
        layout="constrained",
    )
    try:
        image = None
        for ax, grid, (caption, _) in zip(axes[0], grids, panels, strict=True):
            image = ax.imshow(
                grid,
                origin="lower",
                extent=extent,
                # square cells in degrees of the extent would distort; square cells on paper
                aspect=(
                    "auto"
                    if extent is None
                    else ((extent[1] - extent[0]) / columns) / ((extent[3] - extent[2]) / rows)
                ),
                cmap="viridis",
                vmin=vmin,
                vmax=vmax,
                interpolation="nearest",
            )
            ax.set_title(caption, fontsize="medium")
            if extent is not None:
                ax.set_xlabel("longitude")
                if ax is axes[0][0]:  # one y label: the panels share the latitude axis
                    ax.set_ylabel("latitude")
                else:
                    ax.tick_params(labelleft=False)
            if not shared_scale:
                fig.colorbar(image, ax=ax, label=colorbar_label)
        if shared_scale and image is not None:
            fig.colorbar(image, ax=list(axes[0]), label=colorbar_label)
        fig.suptitle(title)
        fig.savefig(path, dpi=DPI)
    finally:
        plt.close(fig)
    return path


def _finish(ax: Any, *, xlabel: str, ylabel: str, title: str, logx: bool, logy: bool) -> None:
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize="medium")
    ax.grid(True, which="both", alpha=0.3)
