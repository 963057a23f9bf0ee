"""``fig-3``: the check-in data of Section V.D (the paper's Fig. 3).

(a), (b): every check-in inside the San Francisco and Paris regions as a point on the region's
rectangle (lat/lon axes, no map tiles), with the grid's cell boundaries drawn; (c), (d): heat
maps of the true distributions on the grids (share of individuals per cell, north up). The
paper's maps show the check-ins as magenta dots on a street map; the points here are the same
kind of data on the bare rectangle.

Outputs: ``fig-3.png`` / ``.svg``, ``fig-3-counts.csv`` (every cell of both regions: grid
position, bounds, individuals) and ``SUMMARY-fig-3.md``. No randomness.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from shuffledp.simulations.data.regions import Region
from shuffledp.simulations.experiments.base import ExperimentContext, ExperimentOutput
from shuffledp.simulations.experiments.csv_rows import write_csv
from shuffledp.simulations.experiments.figure_style import OKABE_ITO, pyplot, save_figure
from shuffledp.simulations.experiments.gowalla_data import (
    PARIS,
    SF,
    Population,
    RegionSetup,
    dataset_path,
    load_points,
    load_population,
)
from shuffledp.simulations.experiments.gowalla_report import data_lines

__all__ = ["NAME", "run"]

NAME = "fig-3"
SETUPS = (SF, PARIS)
COUNT_COLUMNS = (
    "region", "cell", "row", "column", "lat_lo", "lat_hi", "lon_lo", "lon_hi", "individuals",
)  # fmt: skip


def run(context: ExperimentContext) -> ExperimentOutput:
    """Draw Fig. 3 (module docstring) and write its counts and summary."""
    paths = {setup: dataset_path(context, setup) for setup in SETUPS}
    populations = {setup: load_population(paths[setup], setup.grid) for setup in SETUPS}
    points = {setup: load_points(paths[setup], setup.grid) for setup in SETUPS}
    files = list(draw(context.out / f"{NAME}.png", populations, points))
    rows = [row for setup in SETUPS for row in _count_rows(setup, populations[setup])]
    files.append(write_csv(context.out / f"{NAME}-counts.csv", COUNT_COLUMNS, rows))
    summary = _summary(populations, points, files)
    path = context.out / f"SUMMARY-{NAME}.md"
    path.write_text(summary, encoding="utf-8")
    return ExperimentOutput(name=NAME, files=(*files, path), summary=summary)


def draw(
    path: Path,
    populations: dict[RegionSetup, Population],
    points: dict[RegionSetup, tuple[npt.NDArray[np.float64], ...]],
) -> tuple[Path, Path]:
    """The 2 x 2 figure: maps on top, heat maps below, one column per region."""
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(9.6, 7.2), layout="constrained")
    try:
        for column, setup in enumerate(SETUPS):
            region = setup.grid
            lat, lon = points[setup]
            letter_map, letter_heat = "ab"[column], "cd"[column]
            _point_map(axes[0][column], region, lat, lon)
            axes[0][column].set_title(
                f"({letter_map}) {setup.title}: {lat.size:,} check-ins", fontsize="medium"
            )
            image = _heat_map(axes[1][column], region, populations[setup])
            axes[1][column].set_title(
                f"({letter_heat}) {setup.title}: true distribution, k = {region.k}",
                fontsize="medium",
            )
            fig.colorbar(image, ax=axes[1][column], label="share of individuals", shrink=0.85)
        fig.suptitle("Gowalla check-ins (Fig. 3): points and their distribution on the grid")
    except BaseException:
        plt.close(fig)
        raise
    return save_figure(fig, path)


def _aspect(region: Region) -> float:
    """Degrees of latitude per degree of longitude drawn equal in km (cos of the mid latitude)."""
    return 1.0 / float(np.cos(np.radians(0.5 * (region.lat_min + region.lat_max))))


def _axes_in_degrees(ax: Any, region: Region) -> None:
    from matplotlib.ticker import FormatStrFormatter, MaxNLocator

    ax.set_xlim(region.lon_min, region.lon_max)
    ax.set_ylim(region.lat_min, region.lat_max)
    ax.set_aspect(_aspect(region))
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(MaxNLocator(nbins=4))
        axis.set_major_formatter(FormatStrFormatter("%.2f"))
    ax.set_xlabel("longitude")
    ax.set_ylabel("latitude")


def _point_map(
    ax: Any, region: Region, lat: npt.NDArray[np.float64], lon: npt.NDArray[np.float64]
) -> None:
    """Points on the rectangle with the grid's cell boundaries."""
    for edge in np.linspace(region.lon_min, region.lon_max, region.columns + 1):
        ax.axvline(edge, color="0.8", lw=0.4, zorder=0)
    for edge in np.linspace(region.lat_min, region.lat_max, region.rows + 1):
        ax.axhline(edge, color="0.8", lw=0.4, zorder=0)
    dense = lat.size > 50_000  # SF: small faint dots; Paris: larger ones, or the map looks empty
    ax.scatter(
        lon, lat, s=0.6 if dense else 2.5, color=OKABE_ITO[7], alpha=0.35 if dense else 0.6,
        linewidths=0, rasterized=True,
    )  # fmt: skip
    _axes_in_degrees(ax, region)


def _heat_map(ax: Any, region: Region, population: Population) -> Any:
    shares = (population.counts / population.n).reshape(region.rows, region.columns)
    image = ax.imshow(
        shares, origin="lower", cmap="viridis", interpolation="nearest",
        extent=(region.lon_min, region.lon_max, region.lat_min, region.lat_max),
    )  # fmt: skip
    _axes_in_degrees(ax, region)
    return image


def _count_rows(setup: RegionSetup, population: Population) -> list[dict[str, Any]]:
    region = setup.grid
    counts = population.counts
    rows = []
    for cell in range(region.k):
        lat_lo, lat_hi, lon_lo, lon_hi = region.cell_bounds(cell)
        row, column = divmod(cell, region.columns)
        rows.append(
            {"region": setup.name, "cell": cell, "row": row, "column": column, "lat_lo": lat_lo,
             "lat_hi": lat_hi, "lon_lo": lon_lo, "lon_hi": lon_hi, "individuals": int(counts[cell])}
        )  # fmt: skip
    return rows


def _summary(
    populations: dict[RegionSetup, Population],
    points: dict[RegionSetup, tuple[npt.NDArray[np.float64], ...]],
    files: list[Path],
) -> str:
    lines = [
        f"# {NAME}: the check-in data (the paper's Fig. 3)",
        "",
        "(a), (b): every check-in inside each region as a point on the region's rectangle "
        "(lat/lon axes drawn equal in km, the grid's cell boundaries in grey; the paper draws "
        "them on a street map); (c), (d): the true distribution on the grid (share of "
        "individuals per cell, north up, each region on its own colour scale). No randomness.",
        "",
        *data_lines(populations),
        "## Numbers",
        "",
    ]
    for setup, population in populations.items():
        counts = population.counts
        top = int(np.argmax(counts))
        row, column = divmod(top, setup.grid.columns)
        lines.append(
            f"- {setup.title}: {points[setup][0].size:,} check-ins drawn; "
            f"{int(np.count_nonzero(counts))} of {setup.grid.k} cells non-empty; the most "
            f"visited cell {top} (row {row}, column {column}) holds {counts[top] / population.n:.1%}"
            f"; {int(np.count_nonzero(counts >= 0.01 * population.n))} cells hold 1 % or more."
        )
    lines += ["", "Files: " + ", ".join(f"`{p.name}`" for p in files) + ".", ""]
    return "\n".join(lines)
