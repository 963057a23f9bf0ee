"""Figures of the delta tables: delta(eps) curves coloured per setting, and log heat maps.

* :func:`trace_plot`: panels side by side, log y; each series ("trace") has a colour chosen by
  the setting it belongs to (so "eps0 = 3, published" and "eps0 = 3, printed formula" share a
  colour) and a kind: a line, a dashed line or markers only. Values a log axis cannot show
  (0, below 1e-300) are counted in the panel, never dropped silently.
* :func:`log_heat_maps`: maps over a grid of (x, y) values on one log10 colour scale; exact
  zeros drawn in grey and said so in the colour bar.

Colours are the Okabe-Ito palette of :mod:`.figure_style`, at most six series per panel, PNG and
SVG written by ``figure_style.save_figure``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from shuffledp.simulations.experiments.delta_cells import SMALLEST_SHOWN
from shuffledp.simulations.experiments.figure_style import (
    OKABE_ITO,
    check_legend_size,
    pyplot,
    save_figure,
    series_style,
)

__all__ = [
    "HeatPanel",
    "Log10Panel",
    "Trace",
    "TracePanel",
    "log10",
    "log10_curve_plot",
    "log_heat_maps",
    "trace_plot",
]

#: Colours for up to three settings per panel: blue, vermillion, bluish green (Okabe-Ito).
SETTING_COLOURS: tuple[str, ...] = (OKABE_ITO[5], OKABE_ITO[6], OKABE_ITO[3], OKABE_ITO[7])
_KINDS = {"line": ("-", "o"), "dashed": ("--", "s"), "marker": ("none", "X")}


@dataclass(frozen=True, slots=True)
class Trace:
    """One series: ``colour`` indexes SETTING_COLOURS; ``kind`` is "line", "dashed" or
    "marker" (markers only, e.g. published values)."""

    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    colour: int
    kind: Literal["line", "dashed", "marker"]


@dataclass(frozen=True, slots=True)
class TracePanel:
    title: str
    traces: tuple[Trace, ...]

    def __post_init__(self) -> None:
        check_legend_size(len(self.traces), self.title)


def _draw_trace(ax: Any, trace: Trace) -> int:
    """Draw one trace; return how many of its values a log axis cannot show."""
    linestyle, marker = _KINDS[trace.kind]
    shown = [(x, y) for x, y in zip(trace.x, trace.y, strict=True) if y >= SMALLEST_SHOWN]
    xs = [x for x, _ in shown]
    ys = [y for _, y in shown]
    ax.plot(
        xs, ys, linestyle=linestyle, marker=marker, color=SETTING_COLOURS[trace.colour],
        markersize=8 if trace.kind == "marker" else 4, label=trace.label,
        markeredgewidth=1.2 if trace.kind == "marker" else 0.5,
        markerfacecolor="none" if trace.kind == "marker" else SETTING_COLOURS[trace.colour],
    )  # fmt: skip
    return len(trace.y) - len(shown)


def trace_plot(
    path: Path,
    panels: Sequence[TracePanel],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    xlim: tuple[float, float] | None = None,
) -> tuple[Path, Path]:
    """Panels side by side, log y, legends below each panel; ``xlim``: one x range for every
    panel (so the panels line up). Returns (png, svg)."""
    plt = pyplot()
    fig, axes = plt.subplots(
        1, len(panels), squeeze=False, figsize=(4.6 * len(panels) + 0.4, 5.0),
        layout="constrained",
    )  # fmt: skip
    try:
        for ax, panel in zip(axes[0], panels, strict=True):
            hidden = sum(_draw_trace(ax, trace) for trace in panel.traces)
            if hidden:
                ax.text(
                    0.98, 0.98, f"{hidden} value(s) 0 or < 1e-300\nnot drawn (log axis)",
                    transform=ax.transAxes, fontsize="x-small", ha="right", va="top",
                )  # fmt: skip
            ax.set_yscale("log")
            if xlim is not None:
                ax.set_xlim(*xlim)
            ax.set_title(panel.title, fontsize="medium")
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel if ax is axes[0][0] else "")
            ax.grid(True, which="major", alpha=0.3)
            ax.legend(fontsize="x-small", loc="upper center", bbox_to_anchor=(0.5, -0.14))
        fig.suptitle(title, fontsize="medium")
    except BaseException:
        plt.close(fig)
        raise
    return save_figure(fig, path)


@dataclass(frozen=True, slots=True)
class HeatPanel:
    """``values[i][j]``: delta at y_values[i], x_values[j] (0 exactly, or positive)."""

    title: str
    values: tuple[tuple[float, ...], ...]


def _log_matrix(panel: HeatPanel, floor: float) -> Any:
    import numpy as np

    values = np.asarray(panel.values, dtype=np.float64)
    logs = np.full(values.shape, np.nan)
    positive = values > 0
    logs[positive] = np.log10(np.maximum(values[positive], floor))
    return np.ma.masked_invalid(logs)


def _cell_edges(values: Sequence[float]) -> tuple[float, float]:
    """The outer edges of the first and last cells of a sorted, evenly spaced axis."""
    ordered = sorted(values)
    half = (ordered[1] - ordered[0]) / 2 if len(ordered) > 1 else 0.5
    return ordered[0] - half, ordered[-1] + half


def log_heat_maps(
    path: Path,
    panels: Sequence[HeatPanel],
    *,
    x_values: Sequence[float],
    y_values: Sequence[float],
    xlabel: str,
    ylabel: str,
    title: str,
    floor: float,
) -> tuple[Path, Path]:
    """log10 delta over (x, y), one panel per map, one colour scale from log10(floor) to 0
    (values below ``floor`` take the lowest colour; the bar says so); exact zeros in grey.
    A dotted line marks x = y. Returns (png, svg)."""
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(
        1, len(panels), squeeze=False, sharey=True, figsize=(5.0 * len(panels) + 1.4, 4.6),
        layout="constrained",
    )  # fmt: skip
    try:
        image = None
        for ax, panel in zip(axes[0], panels, strict=True):
            ax.set_facecolor("0.8")  # delta = 0 exactly
            image = ax.pcolormesh(
                list(x_values), list(y_values), _log_matrix(panel, floor), shading="nearest",
                cmap="viridis", vmin=math.log10(floor), vmax=0.0,
            )  # fmt: skip
            low = max(min(x_values), min(y_values))
            top = min(max(x_values), max(y_values))
            ax.plot([low, top], [low, top], color="white", linewidth=1.0, linestyle=":")
            ax.set_xlim(*_cell_edges(x_values))
            ax.set_ylim(*_cell_edges(y_values))
            ax.set_title(panel.title, fontsize="small")
            ax.set_xlabel(xlabel)
            for axis in (ax.xaxis, ax.yaxis):  # round ticks: 0.5, 1, 1.5 ...
                axis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 5, 10]))
        axes[0][0].set_ylabel(ylabel)
        bar = fig.colorbar(image, ax=list(axes[0]), extend="min")
        bar.set_label(f"log10 delta (grey: exactly 0; below {floor:.0e}: lowest colour)")
        fig.suptitle(title, fontsize="medium")
    except BaseException:
        plt.close(fig)
        raise
    return save_figure(fig, path)


def log10(value: float | str) -> float:
    """log10 of a delta given as a float or a decimal string (exact also below double
    precision: "3.5e-398" -> -397.46); NaN for 0 (nothing to draw on a log scale)."""
    from decimal import Decimal

    number = Decimal(value)
    return float(number.log10()) if number > 0 else math.nan


@dataclass(frozen=True, slots=True)
class Log10Panel:
    """``series[label] = (x values, log10 delta values)`` (NaN: delta = 0, not drawn)."""

    title: str
    series: dict[str, tuple[tuple[float, ...], tuple[float, ...]]]

    def __post_init__(self) -> None:
        check_legend_size(len(self.series), self.title)


def log10_curve_plot(
    path: Path, panels: Sequence[Log10Panel], *, xlabel: str, title: str
) -> tuple[Path, Path]:
    """log10 delta on a linear axis (so values below double precision, 1e-398, still show),
    colours and markers fixed per mechanism (figure_style.series_style), legends below the
    panels, zeros counted in the panel. Returns (png, svg)."""
    plt = pyplot()
    fig, axes = plt.subplots(
        1, len(panels), squeeze=False, figsize=(5.4 * len(panels) + 0.4, 5.2),
        layout="constrained",
    )  # fmt: skip
    try:
        for ax, panel in zip(axes[0], panels, strict=True):
            zeros = 0
            for index, (label, (xs, ys)) in enumerate(panel.series.items()):
                style = series_style(label, index)
                zeros += sum(1 for y in ys if math.isnan(y))
                ax.plot(
                    xs, ys, color=style.colour, marker=style.marker, linestyle=style.linestyle,
                    markersize=5, label=label,
                )  # fmt: skip
            if zeros:
                ax.text(
                    0.98, 0.98, f"{zeros} value(s) 0 or below 1e-300\n(double precision) not drawn", transform=ax.transAxes,
                    fontsize="x-small", ha="right", va="top",
                )  # fmt: skip
            ax.set_title(panel.title, fontsize="medium")
            ax.set_xlabel(xlabel)
            ax.set_ylabel("log10 delta" if ax is axes[0][0] else "")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize="x-small", loc="upper center", bbox_to_anchor=(0.5, -0.14))
        fig.suptitle(title, fontsize="medium")
    except BaseException:
        plt.close(fig)
        raise
    return save_figure(fig, path)
