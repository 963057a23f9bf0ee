"""Regions and their grids (simulations.regions).

- the presets are the evaluation's boxes and grids (docs/data-and-streams.md);
- cell numbering: row-major from the south-west corner (cell 0), rows are latitude bands; the
  north-east corner is cell k-1; points on an upper edge go to the last row / column, on a lower
  edge to the first; a point just outside (the next float) has no cell;
- hand-computed cells of the SF grid, and an exact rational computation (fractions of the
  decimal coordinates) agreeing with the float one on random points away from cell borders;
- cell_of (pure Python) and cells_of (numpy) agree on every point, edges and NaN included;
  cell_bounds tiles the box, and the centre of each cell maps back to it;
- --box / --grid / --region parsing and Region validation: every error names the rule.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from shuffledp.errors import InvalidParameterError
from shuffledp.randomness import SeededRandom
from shuffledp.simulations.data.regions import (
    PRESETS,
    Region,
    parse_box,
    parse_grid,
    region_from_options,
)

SF = PRESETS["sf"]
PARIS = PRESETS["paris"]


def test_presets_are_the_evaluation_regions() -> None:
    # docs/data-and-streams.md, "Regions": San Francisco lat 37.7228 .. 37.7946, lon -122.5153 ..
    # -122.3789, grid 24 (lon) x 17 (lat) = 408 cells; Paris lat 48.8286 .. 48.8798, lon 2.2855 ..
    # 2.3909, grid 16 (lon) x 12 (lat) = 192 cells.
    assert (SF.lat_min, SF.lat_max, SF.lon_min, SF.lon_max) == (
        37.7228,
        37.7946,
        -122.5153,
        -122.3789,
    )
    assert (SF.columns, SF.rows, SF.k) == (24, 17, 408)
    assert (PARIS.lat_min, PARIS.lat_max, PARIS.lon_min, PARIS.lon_max) == (
        48.8286,
        48.8798,
        2.2855,
        2.3909,
    )
    assert (PARIS.columns, PARIS.rows, PARIS.k) == (16, 12, 192)


@pytest.mark.parametrize("region", [SF, PARIS], ids=["sf", "paris"])
def test_corners_and_edges(region: Region) -> None:
    last = region.k - 1
    assert region.cell_of(region.lat_min, region.lon_min) == 0  # south-west
    assert region.cell_of(region.lat_max, region.lon_max) == last  # north-east
    assert region.cell_of(region.lat_min, region.lon_max) == region.columns - 1  # south-east
    assert region.cell_of(region.lat_max, region.lon_min) == (region.rows - 1) * region.columns
    mid_lat = (region.lat_min + region.lat_max) / 2
    mid_lon = (region.lon_min + region.lon_max) / 2
    mid_row = region.rows // 2 if region.rows % 2 else None
    # Upper latitude edge -> last row; lower -> first row; same column as the middle.
    middle = region.cell_of(mid_lat, mid_lon)
    assert middle is not None
    column = middle % region.columns
    row = middle // region.columns
    if mid_row is not None:
        assert row == mid_row
    assert region.cell_of(region.lat_max, mid_lon) == (region.rows - 1) * region.columns + column
    assert region.cell_of(region.lat_min, mid_lon) == column
    # Upper longitude edge -> last column; lower -> first column; same row.
    assert region.cell_of(mid_lat, region.lon_max) == row * region.columns + region.columns - 1
    assert region.cell_of(mid_lat, region.lon_min) == row * region.columns
    # The next float outside, on each side: no cell.
    for lat, lon in [
        (math.nextafter(region.lat_max, math.inf), mid_lon),
        (math.nextafter(region.lat_min, -math.inf), mid_lon),
        (mid_lat, math.nextafter(region.lon_max, math.inf)),
        (mid_lat, math.nextafter(region.lon_min, -math.inf)),
        (0.0, 0.0),
        (math.nan, mid_lon),
        (mid_lat, math.inf),
    ]:
        assert region.cell_of(lat, lon) is None, (lat, lon)
        assert not region.contains(lat, lon)
        assert region.cells_of([lat], [lon]).tolist() == [-1]


@pytest.mark.parametrize(
    ("lat", "lon", "cell"),
    [
        # SF grid: lat step 0.0718 / 17, lon step 0.1364 / 24.
        # (37.7749, -122.4194): row floor(0.0521 * 17 / 0.0718) = floor(12.34) = 12,
        # column floor(0.0959 * 24 / 0.1364) = floor(16.87) = 16 -> 12 * 24 + 16 = 304.
        (37.7749, -122.4194, 304),
        # (37.7300, -122.5100): row floor(0.0072 * 17 / 0.0718) = floor(1.70) = 1,
        # column floor(0.0053 * 24 / 0.1364) = floor(0.93) = 0 -> 24.
        (37.7300, -122.5100, 24),
        # (37.7900, -122.3800): row floor(0.0672 * 17 / 0.0718) = floor(15.91) = 15,
        # column floor(0.1353 * 24 / 0.1364) = floor(23.81) = 23 -> 15 * 24 + 23 = 383.
        (37.7900, -122.3800, 383),
        # (37.7600, -122.4500): row floor(0.0372 * 17 / 0.0718) = floor(8.81) = 8,
        # column floor(0.0653 * 24 / 0.1364) = floor(11.49) = 11 -> 8 * 24 + 11 = 203.
        (37.7600, -122.4500, 203),
    ],
)
def test_hand_computed_sf_cells(lat: float, lon: float, cell: int) -> None:
    assert SF.cell_of(lat, lon) == cell
    assert SF.cells_of([lat], [lon]).tolist() == [cell]


def _exact_cell(region: Region, lat: float, lon: float) -> tuple[int, float]:
    """(cell, distance to the nearest cell border in steps), in exact rational arithmetic on
    the decimal values the region was written with."""
    lat_min, lat_max = (
        Fraction(Decimal(repr(region.lat_min))),
        Fraction(Decimal(repr(region.lat_max))),
    )
    lon_min, lon_max = (
        Fraction(Decimal(repr(region.lon_min))),
        Fraction(Decimal(repr(region.lon_max))),
    )
    row_pos = (Fraction(lat) - lat_min) / (lat_max - lat_min) * region.rows
    col_pos = (Fraction(lon) - lon_min) / (lon_max - lon_min) * region.columns
    row = min(math.floor(row_pos), region.rows - 1)
    col = min(math.floor(col_pos), region.columns - 1)
    margin = min(
        abs(float(row_pos - round(row_pos))),
        abs(float(col_pos - round(col_pos))),
    )
    return row * region.columns + col, margin


@pytest.mark.parametrize("region", [SF, PARIS], ids=["sf", "paris"])
def test_float_cells_equal_exact_cells_away_from_borders(region: Region) -> None:
    rng = SeededRandom(11)
    u = rng.uniform(4000)
    v = rng.uniform(4000)
    lats = region.lat_min + u * (region.lat_max - region.lat_min)
    lons = region.lon_min + v * (region.lon_max - region.lon_min)
    cells = region.cells_of(lats, lons)
    checked = 0
    for lat, lon, cell in zip(lats.tolist(), lons.tolist(), cells.tolist(), strict=True):
        exact, margin = _exact_cell(region, lat, lon)
        if margin < 1e-9:  # a hair from a border, where float rounding may pick either side
            continue
        checked += 1
        assert cell == exact, (lat, lon)
    assert checked > 3900


@pytest.mark.parametrize("region", [SF, PARIS], ids=["sf", "paris"])
def test_cell_of_and_cells_of_agree(region: Region) -> None:
    rng = SeededRandom(5)
    # Points in a box twice as large (inside and outside), plus every cell border and edge.
    lat_span = region.lat_max - region.lat_min
    lon_span = region.lon_max - region.lon_min
    lats = list(region.lat_min - lat_span / 2 + 2 * lat_span * rng.uniform(3000))
    lons = list(region.lon_min - lon_span / 2 + 2 * lon_span * rng.uniform(3000))
    lat_lines = [region.lat_min + i * lat_span / region.rows for i in range(region.rows + 1)]
    lon_lines = [region.lon_min + j * lon_span / region.columns for j in range(region.columns + 1)]
    lat_lines += [region.lat_max, math.nan, math.inf, -math.inf]
    lon_lines += [region.lon_max, math.nan]
    for lat in lat_lines:
        for lon in lon_lines:
            lats.append(lat)
            lons.append(lon)
    vector = region.cells_of(np.asarray(lats), np.asarray(lons))
    scalar = [region.cell_of(lat, lon) for lat, lon in zip(lats, lons, strict=True)]
    assert [-1 if c is None else c for c in scalar] == vector.tolist()
    assert set(vector.tolist()) - {-1} <= set(range(region.k))


@pytest.mark.parametrize("region", [SF, PARIS], ids=["sf", "paris"])
def test_cell_bounds_tile_the_box_and_centres_map_back(region: Region) -> None:
    lat_step = (region.lat_max - region.lat_min) / region.rows
    lon_step = (region.lon_max - region.lon_min) / region.columns
    for cell in range(region.k):
        lat_lo, lat_hi, lon_lo, lon_hi = region.cell_bounds(cell)
        assert lat_hi - lat_lo == pytest.approx(lat_step, rel=1e-9)
        assert lon_hi - lon_lo == pytest.approx(lon_step, rel=1e-9)
        assert region.cell_of((lat_lo + lat_hi) / 2, (lon_lo + lon_hi) / 2) == cell
    assert region.cell_bounds(0)[0] == region.lat_min and region.cell_bounds(0)[2] == region.lon_min
    north_east = region.cell_bounds(region.k - 1)
    assert north_east[1] == pytest.approx(region.lat_max, abs=1e-12)
    assert north_east[3] == pytest.approx(region.lon_max, abs=1e-12)
    # Row-major from the south-west: the cell east of c is c + 1, the one north is c + columns.
    assert region.cell_bounds(1)[2] == pytest.approx(region.cell_bounds(0)[3])
    assert region.cell_bounds(region.columns)[0] == pytest.approx(region.cell_bounds(0)[1])
    for bad in (-1, region.k, 1.0, True):
        with pytest.raises(InvalidParameterError, match=r"cell must be an integer in \[0, "):
            region.cell_bounds(bad)  # type: ignore[arg-type]


def test_heat_map_layout_puts_north_up() -> None:
    # histogram.reshape(rows, columns)[row, column] is cell row * columns + column.
    counts = np.zeros(PARIS.k, dtype=np.int64)
    cell = PARIS.cell_of(PARIS.lat_max, PARIS.lon_min)  # the north-west corner
    assert cell is not None
    counts[cell] = 1
    grid = counts.reshape(PARIS.rows, PARIS.columns)
    assert grid[PARIS.rows - 1, 0] == 1


# --- options ----------------------------------------------------------------------------------


def test_parse_box_and_grid() -> None:
    assert parse_box("37.7,37.8,-122.5,-122.4") == (37.7, 37.8, -122.5, -122.4)
    assert parse_box(" 1 , 2 ,3e0, +4 ") == (1.0, 2.0, 3.0, 4.0)
    assert parse_grid("24x17") == (24, 17)
    assert parse_grid("16X12") == (16, 12)
    assert parse_grid(" 3 x 2 ") == (3, 2)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("1,2,3", "four numbers"),
        ("1,2,3,4,5", "four numbers"),
        ("", "four numbers"),
        ("a,2,3,4", "not a decimal number: 'a'"),
        ("1,2,nan,4", "not a decimal number: 'nan'"),
        ("1,2,inf,4", "not a decimal number: 'inf'"),
        ("1,2,1_0,4", "not a decimal number: '1_0'"),
        ("1,,3,4", "not a decimal number: ''"),
    ],
)
def test_parse_box_errors(text: str, fragment: str) -> None:
    with pytest.raises(InvalidParameterError, match="--box") as caught:
        parse_box(text)
    assert fragment in str(caught.value)


@pytest.mark.parametrize(
    "text", ["24", "24x", "x17", "24*17", "24x17x2", "-2x3", "2.5x3", "axb", ""]
)
def test_parse_grid_errors(text: str) -> None:
    with pytest.raises(InvalidParameterError, match=r"--grid must be COLUMNSxROWS"):
        parse_grid(text)


def test_region_from_options() -> None:
    assert region_from_options("sf") is SF
    assert region_from_options("PARIS") is PARIS
    regridded = region_from_options("paris", grid="8x6")
    assert (regridded.columns, regridded.rows, regridded.k) == (8, 6, 48)
    assert regridded.lat_min == PARIS.lat_min and regridded.lon_max == PARIS.lon_max
    assert regridded.name == "paris-8x6"
    custom = region_from_options(None, "10,20,30,40", "4x5")
    assert (custom.name, custom.lat_min, custom.lat_max, custom.lon_min, custom.lon_max) == (
        "custom",
        10.0,
        20.0,
        30.0,
        40.0,
    )
    assert (custom.columns, custom.rows) == (4, 5)
    assert region_from_options("lyon", "45.7,45.8,4.8,4.9", "2x2").name == "lyon"


@pytest.mark.parametrize(
    ("region", "box", "grid", "fragment"),
    [
        (None, None, None, "give --region"),
        ("london", None, None, "unknown region 'london'"),
        (None, "1,2,3,4", None, "--box needs --grid"),
        ("sf", "1,2,3,4", "2x2", "--region sf is a preset"),
        (None, "2,1,3,4", "2x2", "lat_min < lat_max"),
        (None, "1,2,4,3", "2x2", "lon_min < lon_max"),
        (None, "80,95,3,4", "2x2", "lat_max <= 90"),
        (None, "1,2,-181,4", "2x2", "-180 <= lon_min"),
        (None, "1,2,3,4", "0x5", "--grid 0x5: columns must be an integer in [1, 10000], got 0"),
        (None, "1,2,3,4", "5x10001", "--grid 5x10001: rows must be an integer in [1, 10000]"),
        (None, "1,2,3,4", "1x1", "--grid 1x1: a grid needs at least 2 cells"),
        ("paris", None, "0x3", "--grid 0x3: columns must be"),
    ],
)
def test_region_from_options_errors(
    region: str | None, box: str | None, grid: str | None, fragment: str
) -> None:
    with pytest.raises(InvalidParameterError) as caught:
        region_from_options(region, box, grid)
    assert fragment in str(caught.value)


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"name": ""}, "name must be a non-empty string"),
        ({"lat_min": "1"}, "lat_min must be a number"),
        ({"lon_max": math.nan}, "lon_max must be finite"),
        ({"columns": 2.0}, "columns must be an integer"),
        ({"rows": True}, "rows must be an integer"),
    ],
)
def test_region_validation(changes: dict[str, object], fragment: str) -> None:
    fields: dict[str, object] = {
        "name": "t",
        "lat_min": 0.0,
        "lat_max": 1.0,
        "lon_min": 0.0,
        "lon_max": 1.0,
        "columns": 2,
        "rows": 2,
    }
    fields.update(changes)
    with pytest.raises(InvalidParameterError) as caught:
        Region(**fields)  # type: ignore[arg-type]
    assert fragment in str(caught.value)
