"""Map regions and their grids: which cell a (lat, lon) point falls in.

A :class:`Region` is a latitude/longitude box (bounds inclusive) cut into ``columns`` equal steps
of longitude and ``rows`` equal steps of latitude. One cell numbering is used everywhere (the
pipeline's values, histograms, CSV files and heat maps):

    cell = row * columns + column,   row 0 = the southernmost band (lowest latitudes),
                                     column 0 = the westernmost band (lowest longitudes),

that is row-major from the south-west corner. A heat map drawn with ``origin="lower"`` and
``histogram.reshape(rows, columns)`` puts north up and east right. A point on an upper edge
(lat == lat_max or lon == lon_max) goes to the last row or column; a point outside the box has
no cell.

Presets are the evaluation's regions (docs/data-and-streams.md): ``sf`` is San Francisco, lat
37.7228..37.7946, lon -122.5153..-122.3789, 24 columns (lon) x 17 rows (lat) = 408 cells;
``paris`` is lat 48.8286..48.8798, lon 2.2855..2.3909, 16 columns x 12 rows = 192 cells.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from shuffledp.errors import InvalidParameterError

__all__ = [
    "DECIMAL_NUMBER",
    "PRESETS",
    "Region",
    "parse_box",
    "parse_grid",
    "region_from_options",
]

#: Largest grid side accepted (cells = rows * columns stay well inside the record's value range).
MAX_SIDE = 10_000

#: A plain decimal number as written in data files and options: an optional sign, digits with an
#: optional fraction, an optional exponent; ASCII only. Python's ``float`` alone would also take
#: "nan", "inf", "1_000" and non-ASCII digits, none of which is a coordinate anyone meant.
DECIMAL_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_GRID = re.compile(r"\s*([0-9]+)\s*[xX]\s*([0-9]+)\s*")


@dataclass(frozen=True, slots=True, kw_only=True)
class Region:
    """A lat/lon box with a rows x columns grid; see the module docstring for cell numbering."""

    name: str
    lat_min: float
    lat_max: float
    lon_min: float
    lon_max: float
    columns: int
    rows: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise InvalidParameterError(
                f"a region's name must be a non-empty string, got {self.name!r}"
            )
        for label, value in (
            ("lat_min", self.lat_min),
            ("lat_max", self.lat_max),
            ("lon_min", self.lon_min),
            ("lon_max", self.lon_max),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidParameterError(f"{label} must be a number, got {value!r}")
            if not math.isfinite(value):
                raise InvalidParameterError(f"{label} must be finite, got {value!r}")
        if not -90.0 <= self.lat_min < self.lat_max <= 90.0:
            raise InvalidParameterError(
                f"latitudes must satisfy -90 <= lat_min < lat_max <= 90, "
                f"got {self.lat_min}..{self.lat_max}"
            )
        if not -180.0 <= self.lon_min < self.lon_max <= 180.0:
            raise InvalidParameterError(
                f"longitudes must satisfy -180 <= lon_min < lon_max <= 180, "
                f"got {self.lon_min}..{self.lon_max}"
            )
        for label, side in (("columns", self.columns), ("rows", self.rows)):
            if isinstance(side, bool) or not isinstance(side, int) or not 1 <= side <= MAX_SIDE:
                raise InvalidParameterError(
                    f"{label} must be an integer in [1, {MAX_SIDE}], got {side!r}"
                )
        if self.columns * self.rows < 2:
            raise InvalidParameterError(
                f"a grid needs at least 2 cells (k >= 2), got {self.columns} x {self.rows}"
            )

    @property
    def k(self) -> int:
        """Number of cells (the histogram's size)."""
        return self.columns * self.rows

    def contains(self, lat: float, lon: float) -> bool:
        """Inside the box, bounds inclusive."""
        return self.lat_min <= lat <= self.lat_max and self.lon_min <= lon <= self.lon_max

    def cell_of(self, lat: float, lon: float) -> int | None:
        """The cell of one point, or None outside the box (or not finite).

        The same float operations as :meth:`cells_of`, in the same order, on Python floats
        (IEEE double, like numpy's): both give the same cell for every point, and this one costs
        well under a microsecond (a loader calls it once per check-in).
        """
        lat = float(lat)
        lon = float(lon)
        if not (
            self.lat_min <= lat <= self.lat_max and self.lon_min <= lon <= self.lon_max
        ):  # also False for NaN
            return None
        row = min(
            math.floor((lat - self.lat_min) / (self.lat_max - self.lat_min) * self.rows),
            self.rows - 1,
        )
        col = min(
            math.floor((lon - self.lon_min) / (self.lon_max - self.lon_min) * self.columns),
            self.columns - 1,
        )
        return row * self.columns + col

    def cells_of(self, lat: npt.ArrayLike, lon: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Cells of many points; -1 for a point outside the box (or not finite)."""
        lat_a = np.asarray(lat, dtype=np.float64)
        lon_a = np.asarray(lon, dtype=np.float64)
        inside = (
            (lat_a >= self.lat_min)
            & (lat_a <= self.lat_max)
            & (lon_a >= self.lon_min)
            & (lon_a <= self.lon_max)
        )
        with np.errstate(invalid="ignore"):
            row = np.floor((lat_a - self.lat_min) / (self.lat_max - self.lat_min) * self.rows)
            col = np.floor((lon_a - self.lon_min) / (self.lon_max - self.lon_min) * self.columns)
        # An upper edge (and any rounding just past it) belongs to the last row / column.
        row = np.clip(np.nan_to_num(row, nan=0.0), 0, self.rows - 1)
        col = np.clip(np.nan_to_num(col, nan=0.0), 0, self.columns - 1)
        cells = (row * self.columns + col).astype(np.int64)
        out: npt.NDArray[np.int64] = np.where(inside, cells, -1)
        return out

    def cell_bounds(self, cell: int) -> tuple[float, float, float, float]:
        """(lat_lo, lat_hi, lon_lo, lon_hi) of a cell."""
        if isinstance(cell, bool) or not isinstance(cell, int) or not 0 <= cell < self.k:
            raise InvalidParameterError(f"cell must be an integer in [0, {self.k}), got {cell!r}")
        row, col = divmod(cell, self.columns)
        lat_step = (self.lat_max - self.lat_min) / self.rows
        lon_step = (self.lon_max - self.lon_min) / self.columns
        return (
            self.lat_min + row * lat_step,
            self.lat_min + (row + 1) * lat_step,
            self.lon_min + col * lon_step,
            self.lon_min + (col + 1) * lon_step,
        )

    def describe(self) -> str:
        return (
            f"{self.name}: lat {self.lat_min}..{self.lat_max}, lon {self.lon_min}..{self.lon_max}, "
            f"{self.columns} x {self.rows} = {self.k} cells (row-major from the south-west)"
        )


PRESETS: dict[str, Region] = {
    "sf": Region(
        name="sf",
        lat_min=37.7228,
        lat_max=37.7946,
        lon_min=-122.5153,
        lon_max=-122.3789,
        columns=24,
        rows=17,
    ),
    "paris": Region(
        name="paris",
        lat_min=48.8286,
        lat_max=48.8798,
        lon_min=2.2855,
        lon_max=2.3909,
        columns=16,
        rows=12,
    ),
}


def parse_box(text: str) -> tuple[float, float, float, float]:
    """``LAT_MIN,LAT_MAX,LON_MIN,LON_MAX`` (the ``--box`` option) as four floats.

    Only the syntax is checked here; the ranges (-90 <= lat_min < lat_max <= 90, ...) are the
    :class:`Region`'s rules and are checked when it is built.
    """
    parts = [part.strip() for part in str(text).split(",")]
    if len(parts) != 4:
        raise InvalidParameterError(
            f"--box must be LAT_MIN,LAT_MAX,LON_MIN,LON_MAX (four numbers), got {text!r}"
        )
    for part in parts:
        if DECIMAL_NUMBER.fullmatch(part) is None:
            raise InvalidParameterError(
                f"--box has a value that is not a decimal number: {part!r} in {text!r}"
            )
    lat_min, lat_max, lon_min, lon_max = (float(part) for part in parts)
    return lat_min, lat_max, lon_min, lon_max


def parse_grid(text: str) -> tuple[int, int]:
    """``COLUMNSxROWS`` (the ``--grid`` option, longitude steps first, e.g. ``24x17``); the
    sides' range is the :class:`Region`'s rule, checked here too so that the error names
    ``--grid``."""
    found = _GRID.fullmatch(str(text))
    if found is None:
        raise InvalidParameterError(
            f"--grid must be COLUMNSxROWS with two positive integers (e.g. 24x17), got {text!r}"
        )
    columns, rows = int(found.group(1)), int(found.group(2))
    for label, side in (("columns", columns), ("rows", rows)):  # the Region's rule, with the flag
        if not 1 <= side <= MAX_SIDE:
            raise InvalidParameterError(
                f"--grid {text}: {label} must be an integer in [1, {MAX_SIDE}], got {side}"
            )
    if columns * rows < 2:
        raise InvalidParameterError(
            f"--grid {text}: a grid needs at least 2 cells (k >= 2), got {columns} x {rows}"
        )
    return columns, rows


def region_from_options(
    region: str | None, box: str | None = None, grid: str | None = None
) -> Region:
    """The region of ``--region NAME`` or ``--box ... --grid ...``.

    ``--grid`` alone re-grids a preset; ``--box`` needs ``--grid`` (no silent default grid).
    With ``--box``, ``--region`` only names the custom box, and may not be a preset's name (the
    box would silently replace the preset's).
    """
    if box is not None:
        if grid is None:
            raise InvalidParameterError("--box needs --grid COLUMNSxROWS (e.g. --grid 16x12)")
        if region is not None and region.lower() in PRESETS:
            raise InvalidParameterError(
                f"--region {region} is a preset and --box defines another box: give one of them"
            )
        lat_min, lat_max, lon_min, lon_max = parse_box(box)
        columns, rows = parse_grid(grid)
        return Region(
            name=region or "custom",
            lat_min=lat_min,
            lat_max=lat_max,
            lon_min=lon_min,
            lon_max=lon_max,
            columns=columns,
            rows=rows,
        )
    if region is None:
        raise InvalidParameterError(
            f"give --region ({', '.join(sorted(PRESETS))}) or --box with --grid"
        )
    preset = PRESETS.get(region.lower())
    if preset is None:
        raise InvalidParameterError(
            f"unknown region {region!r}: presets are {', '.join(sorted(PRESETS))} "
            f"(or give --box and --grid)"
        )
    if grid is None:
        return preset
    columns, rows = parse_grid(grid)
    return Region(
        name=f"{preset.name}-{columns}x{rows}",
        lat_min=preset.lat_min,
        lat_max=preset.lat_max,
        lon_min=preset.lon_min,
        lon_max=preset.lon_max,
        columns=columns,
        rows=rows,
    )
