"""Figures shared by the experiments: runs and heat maps (delta curves: delta_figures.py).

* :func:`runs_plot`: one value per run at each x (e.g. the TV distance of every run at each n),
  drawn as the individual points when there are fewer than :data:`BOX_MIN_RUNS` runs (a box of
  three values misleads) and as box plots from there on; medians joined by a thin line; log x
  for n; optionally a strip below with the eps each mechanism ran at (so a Gaussian whose eps
  changes with n shows it).
* :func:`heat_maps`: a region's grid, one panel per release, one colour scale.

Styles (colour-blind safe colours fixed per mechanism, at most six series per panel, PNG + SVG)
come from :mod:`.figure_style`. Each function returns the files it wrote.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from shuffledp.errors import InvalidParameterError
from shuffledp.simulations.experiments.figure_style import (
    SeriesStyle,
    check_legend_size,
    pyplot,
    save_figure,
    series_style,
)

__all__ = ["BOX_MIN_RUNS", "RunsPanel", "draw_runs_at", "heat_maps", "runs_plot"]


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
) -> tuple[Path, Path]:
    """Heat maps of a region grid side by side, one panel per ``(caption, values)``.

    ``values``: one number per cell in the regions' numbering (``cell = row * columns +
    column``, row 0 the southernmost band, column 0 the westernmost; see
    :mod:`shuffledp.simulations.data.regions`), reshaped to (rows, columns) and drawn with
    ``origin="lower"``, so north is up and east is right. ``extent`` = (lon_min, lon_max,
    lat_min, lat_max) labels the axes in degrees (at most four ticks each, so they never
    overlap). ``shared_scale``: one colour scale for all panels (so equal colours mean equal
    values across panels). Writes PNG and SVG next to ``path``; returns both.
    """
    plt = pyplot()
    grids = _heat_map_grids(panels, rows, columns)
    vmin = min(float(np.nanmin(g)) for g in grids) if shared_scale else None
    vmax = max(float(np.nanmax(g)) for g in grids) if shared_scale else None
    # Cells drawn square (a map-like shape); constrained layout keeps labels and the shared
    # colour bar from overlapping the neighbouring panel.
    panel_width = 3.6
    fig, axes = plt.subplots(
        1,
        len(grids),
        figsize=(panel_width * len(grids) + 1.2, panel_width * rows / columns + 1.3),
        squeeze=False,
        layout="constrained",
    )
    try:
        image = None
        for ax, grid, (caption, _) in zip(axes[0], grids, panels, strict=True):
            image = _heat_map_panel(ax, grid, caption, extent, vmin, vmax, first=ax is axes[0][0])
            if not shared_scale:
                fig.colorbar(image, ax=ax, label=colorbar_label)
        if shared_scale and image is not None:
            fig.colorbar(image, ax=list(axes[0]), label=colorbar_label)
        fig.suptitle(title)
    except BaseException:
        plt.close(fig)
        raise
    return save_figure(fig, path)


def _heat_map_grids(
    panels: Sequence[tuple[str, npt.ArrayLike]], rows: int, columns: int
) -> list[npt.NDArray[np.float64]]:
    """Each panel's values as a (rows, columns) grid; InvalidParameterError on a wrong size."""
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
    return grids


def _heat_map_panel(
    ax: Any,
    grid: npt.NDArray[np.float64],
    caption: str,
    extent: tuple[float, float, float, float] | None,
    vmin: float | None,
    vmax: float | None,
    *,
    first: bool,
) -> Any:
    """Draw one grid on ``ax`` (north up, square cells on paper); returns the image."""
    rows, columns = grid.shape
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
        _degree_ticks(ax)
        ax.set_xlabel("longitude")
        if first:  # one y label: the panels share the latitude axis
            ax.set_ylabel("latitude")
        else:
            ax.tick_params(labelleft=False)
    return image


def _degree_ticks(ax: Any) -> None:
    from matplotlib.ticker import FormatStrFormatter, MaxNLocator

    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(MaxNLocator(nbins=4))
        axis.set_major_formatter(FormatStrFormatter("%.2f"))


# --- runs (the evaluation's style) ------------------------------------------------

#: From this many runs per point on, runs are drawn as box plots; below it, as points.
BOX_MIN_RUNS = 10


@dataclass(frozen=True, slots=True)
class RunsPanel:
    """One panel of :func:`runs_plot`. ``values[series][i]``: the runs' values at ``x[i]``
    (an empty sequence: nothing measured there). ``eps[series][i]``: the eps that series ran
    at, at ``x[i]`` (drawn in a strip below; None: no strip). ``quoted[series]``: (x, value)
    points a paper quotes for that series, drawn as stars in the series' colour with one legend
    entry each, ``"<series>: <quoted_as>"``."""

    title: str
    x: tuple[float, ...]
    values: Mapping[str, Sequence[Sequence[float]]]
    eps: Mapping[str, Sequence[float]] | None = None
    quoted: Mapping[str, Sequence[tuple[float, float]]] | None = None
    quoted_as: str = "quoted"

    def __post_init__(self) -> None:
        check_legend_size(len(self.values) + len(self.quoted or {}), self.title)
        for label in self.quoted or {}:
            if label not in self.values:
                raise InvalidParameterError(
                    f"quoted values for {label!r} in panel {self.title!r}, which has no such "
                    f"series ({', '.join(self.values)})"
                )
        for label, per_x in self.values.items():
            if len(per_x) != len(self.x):
                raise InvalidParameterError(
                    f"series {label!r} of panel {self.title!r} must have {len(self.x)} points, "
                    f"got {len(per_x)}"
                )
        for label, per_x_eps in (self.eps or {}).items():
            if len(per_x_eps) != len(self.x):
                raise InvalidParameterError(
                    f"eps of series {label!r} of panel {self.title!r} must have {len(self.x)} "
                    f"points, got {len(per_x_eps)}"
                )

    @property
    def most_runs(self) -> int:
        """The largest number of runs at any point of any series."""
        return max((len(runs) for per_x in self.values.values() for runs in per_x), default=0)


#: The widest sideways dodge of a series' runs on a log axis, as a factor: the runs at n = 100
#: are drawn between n = 100 / MAX_DODGE and 100 * MAX_DODGE (was up to x1.8 apart when the
#: points were far apart: the Gaussian at n = 100 sat near 55).
MAX_DODGE = 1.12


def _offsets(x: Sequence[float], count: int, logx: bool) -> tuple[list[float], float]:
    """Where each of ``count`` series' runs sit around each x (log10 of a factor on a log axis,
    a shift otherwise), and the width of one series' slot, in the same unit. On a log axis the
    outermost series is at most MAX_DODGE away from its x."""
    coords = np.log10(np.asarray(x, dtype=np.float64)) if logx else np.asarray(x, np.float64)
    gaps = np.diff(np.sort(coords))
    gap = float(gaps.min()) if gaps.size and gaps.min() > 0 else (0.3 if logx else 1.0)
    slot = 0.7 * gap / count
    if logx and count > 1:
        slot = min(slot, 2 * math.log10(MAX_DODGE) / (count - 1))
    return [(index - (count - 1) / 2) * slot for index in range(count)], slot


def _place(x: float, offset: float, logx: bool) -> float:
    return float(x * 10.0**offset) if logx else x + offset


def _draw_runs(ax: Any, panel: RunsPanel, *, logx: bool) -> int:
    """Draw every series of ``panel`` on ``ax``; return how many run values were drawn."""
    offsets, slot = _offsets(panel.x, len(panel.values), logx)
    boxes = panel.most_runs >= BOX_MIN_RUNS
    drawn = 0
    for index, (label, per_x) in enumerate(panel.values.items()):
        style = series_style(label, index)
        positions = [_place(x, offsets[index], logx) for x in panel.x]
        medians = [float(np.median(runs)) if len(runs) else np.nan for runs in per_x]
        # The line joins the medians at the true x; only the runs are dodged sideways.
        ax.plot(panel.x, medians, color=style.colour, linestyle=style.linestyle, lw=0.8)
        for position, runs in zip(positions, per_x, strict=True):
            values = np.asarray(runs, dtype=np.float64)
            if not values.size:
                continue
            drawn += int(values.size)
            width = position * (10.0**slot - 1.0) if logx else slot
            draw_runs_at(ax, position, values, boxes=boxes, width=width * 0.85, style=style)
        ax.plot([], [], color=style.colour, marker=style.marker, linestyle=style.linestyle,
                label=label)  # fmt: skip
    _draw_quoted(ax, panel)
    return drawn


def _draw_quoted(ax: Any, panel: RunsPanel) -> None:
    """A paper's quoted values as stars at their true x, in their series' colour."""
    series = list(panel.values)
    for label, points in (panel.quoted or {}).items():
        style = series_style(label, series.index(label))
        ax.plot(
            [x for x, _ in points], [y for _, y in points], linestyle="none", marker="*",
            markersize=13, markerfacecolor=style.colour, markeredgecolor="black", zorder=5,
            label=f"{label}: {panel.quoted_as}",
        )  # fmt: skip


def draw_runs_at(
    ax: Any,
    position: float,
    values: npt.NDArray[np.float64],
    *,
    boxes: bool,
    width: float,
    style: SeriesStyle,
) -> None:
    """The run values at one x position: a box (``boxes``, for BOX_MIN_RUNS runs or more) or
    the points themselves. Shared by every figure that shows runs."""
    if not boxes:
        ax.plot(
            np.full(values.size, position), values, linestyle="none", marker=style.marker,
            color=style.colour, alpha=0.75, markersize=4,
        )  # fmt: skip
        return
    parts = ax.boxplot(
        [values], positions=[position], widths=[width], patch_artist=True,
        manage_ticks=False, medianprops={"color": "black"},
        flierprops={"markersize": 3, "markeredgecolor": style.colour},
    )  # fmt: skip
    for patch in parts["boxes"]:
        patch.set_facecolor(style.colour)
        patch.set_alpha(0.55)


def _format_x(ax: Any, x: Sequence[float], logx: bool) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    if not logx:
        ax.set_xticks(list(x))
        ax.set_xticklabels([f"{value:g}" for value in x])
        return
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(_count_label))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _count_label(value: float, _position: object) -> str:
    """Tick text for a count such as n: 1,000 and 20k up to 1e5, then 1e6, 2e6 ..."""
    if value >= 1e6 or value < 1:
        return f"{value:.0e}".replace("e+0", "e").replace("e-0", "e-")
    if value >= 1e3:  # "1k 2k 5k": "1,000" and "2,000" overlap on a log axis
        return f"{value / 1e3:.0f}k"
    return f"{value:,.0f}"


def _draw_eps(ax: Any, panel: RunsPanel) -> None:
    """The strip below a panel: the eps each series ran at, per x."""
    assert panel.eps is not None
    for index, (label, per_x) in enumerate(panel.eps.items()):
        style = series_style(label, index)
        ax.plot(
            list(panel.x), list(per_x), color=style.colour, marker=style.marker,
            linestyle=style.linestyle, markersize=3, lw=1.0, label=label,
        )  # fmt: skip
    finite = [v for per_x in panel.eps.values() for v in per_x if np.isfinite(v) and v > 0]
    from matplotlib.ticker import FormatStrFormatter, NullFormatter

    if finite and max(finite) / min(finite) > 10:
        ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel("eps", fontsize="small")
    ax.grid(True, which="major", alpha=0.3)
    ax.margins(y=0.3)  # room between the lines for the legend (it must not cover one)
    ax.legend(fontsize="x-small", loc="best")  # which line is which mechanism's eps


def runs_plot(
    path: Path,
    panels: Sequence[RunsPanel],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    logx: bool = True,
    logy: bool = True,
) -> tuple[Path, Path]:
    """Panels side by side (e.g. (a) eps = 4, (b) eps = 6), one value per run at each x: points
    below :data:`BOX_MIN_RUNS` runs, boxes (quartiles, whiskers at 1.5 IQR) from there; a thin
    line joins the medians. Panels with ``eps`` get a strip below showing each series' eps.
    Writes PNG and SVG next to ``path``; returns both."""
    if not panels:
        raise InvalidParameterError("runs_plot needs at least one panel")
    plt = pyplot()
    strip = any(panel.eps for panel in panels)
    fig, axes = plt.subplots(
        2 if strip else 1, len(panels), squeeze=False, sharex="col",
        figsize=(5.2 * len(panels) + 0.6, 5.4 if strip else 4.2),
        gridspec_kw={"height_ratios": [3, 1]} if strip else None, layout="constrained",
    )  # fmt: skip
    try:
        for column, panel in enumerate(panels):
            ax = axes[0][column]
            _draw_runs(ax, panel, logx=logx)
            if logy:
                ax.set_yscale("log")
            ax.set_title(panel.title, fontsize="medium")
            ax.grid(True, which="major", alpha=0.3)
            ax.set_ylabel(ylabel if column == 0 else "")
            if strip and panel.eps:
                _draw_eps(axes[1][column], panel)
            elif strip:
                axes[1][column].set_visible(False)
            bottom = axes[1][column] if strip and panel.eps else ax
            _format_x(bottom, panel.x, logx)
            bottom.set_xlabel(xlabel)
        axes[0][0].legend(fontsize="small")
        fig.suptitle(title, fontsize="medium")
    except BaseException:
        plt.close(fig)
        raise
    return save_figure(fig, path)
