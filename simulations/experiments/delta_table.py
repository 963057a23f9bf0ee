"""``delta-table``: the grid of the seed paper's Table IV and the delta(eps, eps0) surface of Fig. 1.

Table IV of Biswas, Jung, Palamidessi (arXiv 2205.08858) lists the delta of their Theorem IV.1
for one user among n whose value changes from x0 to x1 while n_x0 = 80 of the others hold x0,
varying eps0, n and k around the reference row n = 100, k = 10, eps0 = 2. Next to each setting
this experiment puts:

* the printed formula (``biswas-literal``, eq. 6 with v_s as printed in Theorem IV.1), evaluated
  by the accountant, and beside it the value Table IV publishes where it has one (e.g. 2.49E-15,
  3.25E-22, 2.20E-30 at eps = 0.1, 0.5, 1 on the reference row; we get 2.4837e-15, 3.2453e-22,
  2.2014e-30): both labelled "published formula, not a valid guarantee";
* the exact single-bin delta of the same model (``single-bin``: the count of x0 alone,
  B = Bin(n_x0, pt) + Bin(n-1-n_x0, pb), P0 = B + Bern(pt), P1 = B + Bern(pb)): informative only,
  it depends on the private data through n_x0 and ignores the other bins; both directions and
  the paper's direction H(P0 || P1) (6.1467e-3, 2.6062e-8, 2.6981e-18 on the reference row);
* the ``tight`` bracket [delta_lower, delta_upper] of the whole released histogram, every dataset:
  delta_upper is the valid guarantee.

Fig. 1 (the surface): delta over a grid of (eps, eps0) at n = 100, k = 10 (the reference row's;
this experiment's choice), as two heat maps on one log colour scale:
the valid delta_upper, and beside it the printed formula (not a valid guarantee).

Choices: eps in {0.1, 0.5, 1, 1.5, 2}; eps0 in {0.5, 1, 2, 3, 4}; n in {100, 200, 500, 1000};
k in {2, 5, 10, 20, 50}; each varied alone around the reference row; n_x0 = 80 throughout (so
n > 80). Table IV's published values exist for eps0 in {1, 2, 3} and k in {5, 10, 15}; its
"varying n" rows need n_x0 = 0.8 n (n = 150 with n_x0 = 120 reproduces; n = 50 only partly),
so at n != 100 no published value is shown beside ours. Deterministic (no randomness; neither --seed nor --runs matter). Grid points go through
``context.repeat`` in parallel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shuffledp.accountant import InvalidParameterError, ShuffledKRR, SingleBin
from shuffledp.accountant.mechanism import require_eps
from shuffledp.simulations.experiments.base import ExperimentContext, ExperimentOutput
from shuffledp.simulations.experiments.bounds_table import (
    LABEL_NOT_A_GUARANTEE,
    LABEL_SINGLE_BIN,
    LABEL_TIGHT_LOWER,
    LABEL_TIGHT_UPPER,
    PAPER,
    SHORT_INFORMATIVE,
    SHORT_NOT_A_GUARANTEE,
    Cell,
    Column,
    Footnotes,
    PointResult,
    bound_cell,
    display_cell,
    display_number,
    label_legend,
    markdown_table,
    orders_of_magnitude,
    point_csv_row,
    tight_cells,
    write_csv,
)
from shuffledp.validation import require_int, require_positive

__all__ = [
    "DELTA_COLUMNS",
    "PUBLISHED_TABLE_IV",
    "SURFACE_COLUMNS",
    "DeltaGrid",
    "SurfaceGrid",
    "evaluate_delta_point",
    "full_grids",
    "quick_grids",
    "run",
]

NAME = "delta-table"
SURFACE_NAME = "delta-surface"

_TABLE_IV_EPS = (0.1, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0)


def _row(*values: float) -> dict[float, float]:
    return dict(zip(_TABLE_IV_EPS, values, strict=True))


#: The printed formula's values as published in the paper's Table IV (3 significant digits):
#: (n, k, eps0, n_x0) -> {eps: delta}, the rows the accountant's evaluation reproduces ("varying
#: eps0" and "varying k" at n = 100, n_x0 = 80; "varying n" at n = 150, where n_x0 = 120 = 0.8 n
#: reproduces it, not the 80 the text states). Not a valid guarantee.
PUBLISHED_TABLE_IV: dict[tuple[int, int, float, int], dict[float, float]] = {
    (100, 10, 1.0, 80): _row(2.08e-20, 3.42e-43, 0.0, 0.0, 0.0, 0.0, 0.0),
    (100, 10, 2.0, 80): _row(2.49e-15, 3.25e-22, 2.20e-30, 1.57e-40, 0.0, 0.0, 0.0),
    (100, 10, 3.0, 80): _row(8.79e-11, 5.73e-13, 3.52e-16, 4.49e-20, 1.09e-25, 4.52e-33, 0.0),
    (100, 5, 2.0, 80): _row(1.96e-10, 2.51e-14, 1.08e-19, 2.02e-27, 0.0, 0.0, 0.0),
    (100, 15, 2.0, 80): _row(1.66e-18, 7.13e-28, 1.49e-38, 7.35e-50, 0.0, 0.0, 0.0),
    (150, 10, 2.0, 120): _row(6.58e-22, 7.83e-32, 2.75e-44, 6.99e-59, 0.0, 0.0, 0.0),
}
NOT_QUOTED = "not published: Table IV has no value at this setting"
#: Figures and the summary's ranges leave out positive values below this: they are the upper
#: side of a numerical bracket around a value that underflows (e.g. 4.94e-324), not a value.
SMALLEST_SHOWN = 1e-300

PUBLISHED = Column(
    key="biswas-literal published",
    label="published values of the printed formula (Table IV); " + LABEL_NOT_A_GUARANTEE,
    short="published; " + SHORT_NOT_A_GUARANTEE,
    role="not-a-guarantee",
)
COMPUTED = Column(
    key="biswas-literal",
    label="printed formula evaluated here; " + LABEL_NOT_A_GUARANTEE,
    short=SHORT_NOT_A_GUARANTEE,
    role="not-a-guarantee",
)
SINGLE_BIN = Column(
    key="single-bin",
    label=LABEL_SINGLE_BIN + "; max of both directions",
    short=SHORT_INFORMATIVE,
    role="informative",
)
SINGLE_BIN_FORWARD = Column(
    key="single-bin x0||x1",
    label=LABEL_SINGLE_BIN + "; H(P0 || P1), the paper's direction",
    short=SHORT_INFORMATIVE,
    role="informative",
)
TIGHT_LOWER = Column(key="tight delta_lower", label=LABEL_TIGHT_LOWER, short="lower", role="lower")
TIGHT_UPPER = Column(
    key="tight delta_upper", label=LABEL_TIGHT_UPPER, short="the guarantee", role="upper"
)

#: Result columns of delta-table.csv (after the setting columns), in order.
DELTA_COLUMNS: tuple[Column, ...] = (
    PUBLISHED,
    COMPUTED,
    SINGLE_BIN,
    SINGLE_BIN_FORWARD,
    TIGHT_LOWER,
    TIGHT_UPPER,
)
#: Result columns of delta-surface.csv.
SURFACE_COLUMNS: tuple[Column, ...] = (COMPUTED, SINGLE_BIN, TIGHT_LOWER, TIGHT_UPPER)
DELTA_KEYS: tuple[str, ...] = ("setting", "n", "k", "eps0", "nx0", "eps")
SURFACE_KEYS: tuple[str, ...] = ("n", "k", "eps0", "nx0", "eps")
WITNESS_KEYS: tuple[str, ...] = ("tight upper from", "tight lower from")


def _require_values(name: str, values: tuple[float, ...]) -> None:
    if not values:
        raise InvalidParameterError(f"{name} must not be empty, got {values!r}")
    for value in values:
        require_positive(name, value)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeltaGrid:
    """Table IV: the reference setting (n, k, eps0) and, one parameter at a time, the values it
    takes; every setting at every eps, all at one n_x0 (which needs n > n_x0)."""

    n: int
    k: int
    eps0: float
    nx0: int
    eps_values: tuple[float, ...]
    eps0_values: tuple[float, ...]
    n_values: tuple[int, ...]
    k_values: tuple[int, ...]

    def __post_init__(self) -> None:
        require_int("nx0", self.nx0, 0)
        for n in (self.n, *self.n_values):
            require_int("n", n, 2)
            if n <= self.nx0:
                raise InvalidParameterError(
                    f"n must be > n_x0 = {self.nx0} (n_x0 counts other users), got n={n}"
                )
        for k in (self.k, *self.k_values):
            require_int("k", k, 2)
        require_positive("eps0", self.eps0)
        _require_values("eps_values", self.eps_values)
        _require_values("eps0_values", self.eps0_values)

    def settings(self) -> list[tuple[str, int, int, float]]:
        """(what varies, n, k, eps0): the reference row first, then each parameter varied
        alone (the reference row is not repeated)."""
        reference = (self.n, self.k, self.eps0)
        rows: list[tuple[str, int, int, float]] = [("reference", *reference)]
        candidates = [
            *(("eps0", self.n, self.k, e0) for e0 in self.eps0_values),
            *(("n", n, self.k, self.eps0) for n in self.n_values),
            *(("k", self.n, k, self.eps0) for k in self.k_values),
        ]
        seen = {reference}
        for varies, n, k, eps0 in candidates:
            if (n, k, eps0) not in seen:
                seen.add((n, k, eps0))
                rows.append((f"vary {varies}", n, k, eps0))
        return rows

    def points(self) -> list[tuple[int, int, float, int, float]]:
        return [
            (n, k, eps0, self.nx0, eps)
            for _, n, k, eps0 in self.settings()
            for eps in self.eps_values
        ]


@dataclass(frozen=True, slots=True, kw_only=True)
class SurfaceGrid:
    """Fig. 1: every (eps0, eps) at one n, k and n_x0."""

    n: int
    k: int
    nx0: int
    eps_values: tuple[float, ...]
    eps0_values: tuple[float, ...]

    def __post_init__(self) -> None:
        require_int("n", self.n, 2)
        require_int("k", self.k, 2)
        require_int("nx0", self.nx0, 0, self.n - 1, bound="[0, n - 1]")
        _require_values("eps_values", self.eps_values)
        _require_values("eps0_values", self.eps0_values)

    def points(self) -> list[tuple[int, int, float, int, float]]:
        return [
            (self.n, self.k, eps0, self.nx0, eps)
            for eps0 in self.eps0_values
            for eps in self.eps_values
        ]


def full_grids() -> tuple[DeltaGrid, SurfaceGrid]:
    table = DeltaGrid(
        n=100,
        k=10,
        eps0=2.0,
        nx0=80,
        eps_values=(0.1, 0.5, 1.0, 1.5, 2.0),
        eps0_values=(0.5, 1.0, 2.0, 3.0, 4.0),
        n_values=(100, 200, 500, 1000),
        k_values=(2, 5, 10, 20, 50),
    )
    surface = SurfaceGrid(
        n=100,
        k=10,
        nx0=80,
        eps_values=tuple(round(0.1 * i, 10) for i in range(1, 31)),  # 0.1 .. 3.0
        eps0_values=tuple(0.25 * i for i in range(1, 17)),  # 0.25 .. 4.0
    )
    return table, surface


def quick_grids() -> tuple[DeltaGrid, SurfaceGrid]:
    """The reference row at the eps of the published values, one other value per parameter,
    and a coarse surface."""
    table = DeltaGrid(
        n=100,
        k=10,
        eps0=2.0,
        nx0=80,
        eps_values=(0.1, 0.5, 1.0, 2.0),
        eps0_values=(1.0,),
        n_values=(200,),
        k_values=(5,),
    )
    surface = SurfaceGrid(
        n=100,
        k=10,
        nx0=80,
        eps_values=(0.1, 0.5, 1.0, 2.0),
        eps0_values=(0.5, 1.0, 2.0, 4.0),
    )
    return table, surface


# ---------------------------------------------------------------------------------------------
# Evaluation (a top-level function of a plain tuple: it runs in worker processes)


def evaluate_delta_point(point: tuple[int, int, float, int, float]) -> PointResult:
    """The computed columns at one (n, k, eps0, n_x0, eps)."""
    n, k, eps0, nx0, eps = point
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    eps = require_eps(eps)
    single_bin = SingleBin(nx0).delta(mech, eps)
    cells: dict[str, Cell] = {
        COMPUTED.key: bound_cell("biswas-literal", mech, eps, nx0),
        SINGLE_BIN.key: single_bin.delta,
        SINGLE_BIN_FORWARD.key: float(single_bin.extra["delta_x0_over_x1"]),
    }
    tight, upper_from, lower_from = tight_cells(mech, eps)
    cells.update(tight)
    return PointResult(
        n=n,
        k=k,
        eps0=eps0,
        nx0=nx0,
        eps=eps,
        cells=cells,
        upper_from=upper_from,
        lower_from=lower_from,
    )


def published_cell(n: int, k: int, eps0: float, nx0: int, eps: float) -> Cell:
    return PUBLISHED_TABLE_IV.get((n, k, eps0, nx0), {}).get(eps, NOT_QUOTED)


def with_published(result: PointResult) -> dict[str, Cell]:
    cells = dict(result.cells)
    cells[PUBLISHED.key] = published_cell(result.n, result.k, result.eps0, result.nx0, result.eps)
    return cells


# ---------------------------------------------------------------------------------------------
# The experiment


def run(context: ExperimentContext) -> ExperimentOutput:
    table_grid, surface_grid = quick_grids() if context.quick else full_grids()
    table = context.repeat(evaluate_delta_point, table_grid.points(), label=NAME)
    surface = context.repeat(evaluate_delta_point, surface_grid.points(), label=SURFACE_NAME)
    out = context.out
    files = (
        out / f"{NAME}.csv",
        out / f"{SURFACE_NAME}.csv",
        out / f"{NAME}.png",
        out / f"{SURFACE_NAME}.png",
        out / f"SUMMARY-{NAME}.md",
    )
    write_table_csv(files[0], table_grid, table)
    write_surface_csv(files[1], surface)
    plot_table(files[2], table_grid, table)
    plot_surface(files[3], surface_grid, surface)
    summary = delta_summary(table_grid, table, surface_grid, surface, quick=context.quick)
    files[4].write_text(summary, encoding="utf-8")
    return ExperimentOutput(name=NAME, files=files, summary=summary)


def _setting_names(grid: DeltaGrid) -> dict[tuple[int, int, float], str]:
    return {(n, k, eps0): varies for varies, n, k, eps0 in grid.settings()}


def write_table_csv(path: Path, grid: DeltaGrid, results: Sequence[PointResult]) -> None:
    names = _setting_names(grid)
    header = [*DELTA_KEYS, *(c.header for c in DELTA_COLUMNS), *WITNESS_KEYS]
    rows = [
        [names[(r.n, r.k, r.eps0)], *point_csv_row(r, with_published(r), DELTA_COLUMNS)]
        for r in results
    ]
    write_csv(path, header, rows)


def write_surface_csv(path: Path, results: Sequence[PointResult]) -> None:
    header = [*SURFACE_KEYS, *(c.header for c in SURFACE_COLUMNS), *WITNESS_KEYS]
    rows = [point_csv_row(r, r.cells, SURFACE_COLUMNS) for r in results]
    write_csv(path, header, rows)


# ---------------------------------------------------------------------------------------------
# Summary


def delta_summary(
    grid: DeltaGrid,
    table: Sequence[PointResult],
    surface_grid: SurfaceGrid,
    surface: Sequence[PointResult],
    *,
    quick: bool,
) -> str:
    notes = Footnotes()
    reference = [r for r in table if (r.n, r.k, r.eps0) == (grid.n, grid.k, grid.eps0)]
    reference_rows = []
    for r in reference:
        cells = with_published(r)
        bracket = (
            f"[{display_number(float(r.cells[TIGHT_LOWER.key]), 'lower')}, "
            f"{display_number(float(r.cells[TIGHT_UPPER.key]), 'upper')}]"
        )
        reference_rows.append(
            [
                f"{r.eps:g}",
                _display_published(cells[PUBLISHED.key], notes),
                display_cell(cells[COMPUTED.key], COMPUTED.role, notes),
                display_cell(cells[SINGLE_BIN_FORWARD.key], SINGLE_BIN_FORWARD.role, notes, 5),
                display_cell(cells[SINGLE_BIN.key], SINGLE_BIN.role, notes, 5),
                bracket,
            ]
        )
    reference_headers = [
        "eps",
        "printed formula, published values (NOT a valid guarantee)",
        f"printed formula, computed ({COMPUTED.short})",
        "exact single-bin H(P0||P1) (informative)",
        f"exact single-bin, both directions ({SINGLE_BIN.short})",
        "tight [delta_lower, delta_upper] (upper: the valid guarantee)",
    ]
    eps_headers = [f"eps = {e:g}" for e in grid.eps_values]
    by_setting: dict[tuple[int, int, float], dict[float, PointResult]] = {}
    for r in table:
        by_setting.setdefault((r.n, r.k, r.eps0), {})[r.eps] = r
    grid_rows = []
    for varies, n, k, eps0 in grid.settings():
        row = [varies, str(n), str(k), f"{eps0:g}"]
        for eps in grid.eps_values:
            r = by_setting[(n, k, eps0)][eps]
            single = display_number(float(r.cells[SINGLE_BIN.key]), SINGLE_BIN.role)
            lower = display_number(float(r.cells[TIGHT_LOWER.key]), "lower")
            upper = display_number(float(r.cells[TIGHT_UPPER.key]), "upper")
            row.append(f"{single}; [{lower}, {upper}]")
        grid_rows.append(row)
    lines = [
        f"# {NAME}: the seed paper's Table IV grid and the delta(eps, eps0) surface of Fig. 1",
        "",
        f"n_x0 = {grid.nx0} (others holding x0) throughout; reference row n = {grid.n}, "
        f"k = {grid.k}, eps0 = {grid.eps0:g}; varied one at a time: eps0 in "
        f"{{{', '.join(f'{e:g}' for e in grid.eps0_values)}}}, n in "
        f"{{{', '.join(map(str, grid.n_values))}}}, k in {{{', '.join(map(str, grid.k_values))}}}"
        + (" (quick grid)" if quick else "")
        + ". The grid is this experiment's choice around Table IV's reference row (it covers "
        "Table IV's eps0 = 1, 2, 3 and k = 5 rows). Deterministic: no "
        "randomness is involved (the seed and --runs play no part).",
        "",
        "## The reference row",
        "",
        *markdown_table(reference_headers, reference_rows),
        "",
        *notes.lines(),
        "",
        "## Every setting: exact single-bin (informative, not a guarantee); "
        "tight [delta_lower, delta_upper] (upper: the valid guarantee)",
        "",
        *markdown_table(["setting", "n", "k", "eps0", *eps_headers], grid_rows),
        "",
        "Valid upper bounds are shown rounded up, lower bounds rounded down (3 significant "
        "digits); delta-table.csv has the exact values, the printed formula's columns "
        "(published and evaluated here; published formula, not a valid guarantee) and which "
        "bound gave each side of the bracket.",
        "",
        *label_legend(DELTA_COLUMNS),
        "",
        "## Fig. 1: delta over (eps, eps0)",
        "",
        f"delta-surface.png and delta-surface.csv: n = {surface_grid.n}, k = {surface_grid.k}, "
        f"n_x0 = {surface_grid.nx0}, eps from {min(surface_grid.eps_values):g} to "
        f"{max(surface_grid.eps_values):g} ({len(surface_grid.eps_values)} values), eps0 from "
        f"{min(surface_grid.eps0_values):g} to {max(surface_grid.eps0_values):g} "
        f"({len(surface_grid.eps0_values)} values), this experiment's choice. Left: the valid "
        "delta_upper (log10); right: the printed formula evaluated here (published formula, "
        "not a valid guarantee). Grey cells: delta = 0 exactly (every bound here except "
        "strong-adversary is 0 for eps >= eps0; the printed formula is 0 wherever no v_s "
        "exceeds eps).",
        "",
        "## What it shows",
        "",
        delta_findings(grid, table, surface),
        "",
        "## Sources",
        "",
        f"- {PAPER}: Theorem IV.1 and eqs. 3-6 (printed formula), eqs. 12-13 (the single-bin "
        "model), Table IV (published values), Fig. 1.",
        "- docs/accounting.md: the printed formula and why it is not a guarantee, the bounds "
        "inside `tight` and what each guarantees.",
        "",
    ]
    return "\n".join(lines)


def _display_published(cell: Cell, notes: Footnotes) -> str:
    """Published values exactly as quoted (they are data, not something this code rounds)."""
    return f"{cell:g}" if isinstance(cell, float) else notes.mark(cell)


def delta_findings(
    grid: DeltaGrid, table: Sequence[PointResult], surface: Sequence[PointResult]
) -> str:
    """One paragraph computed from the results."""
    sentences = _literal_findings(grid, table)
    above = [
        orders_of_magnitude(upper, single)
        for r in table
        if isinstance(upper := r.cells[TIGHT_UPPER.key], float)
        and isinstance(single := r.cells[SINGLE_BIN.key], float)
        and single >= SMALLEST_SHOWN
    ]
    if above:
        sentences.append(
            "The exact single-bin value is a lower bound on the worst case (one bin of one "
            "dataset), never a guarantee: the valid delta_upper for the whole histogram is "
            f"{min(above):.1f} to {max(above):.1f} orders of magnitude above it (where it is "
            f"at least {SMALLEST_SHOWN:g})."
        )
    winners: dict[str, int] = {}
    for r in table:
        winners[r.upper_from] = winners.get(r.upper_from, 0) + 1
    positive = [r for r in table if float(r.cells[TIGHT_UPPER.key]) > 0]
    sentences.append(
        "Among the valid bounds the minimum (delta_upper) comes from "
        + ", ".join(f"{name} at {count} of {len(table)} points" for name, count in winners.items())
        + f"; delta_upper is exactly 0 at {len(table) - len(positive)} points (eps >= eps0)."
    )
    small_eps = [r for r in surface if r.eps < r.eps0 and float(r.cells[TIGHT_UPPER.key]) > 0]
    if small_eps:
        worst = max(small_eps, key=lambda r: float(r.cells[TIGHT_UPPER.key]))
        sentences.append(
            "On the surface delta_upper falls steeply with eps and rises with eps0; its largest "
            f"value, {display_number(float(worst.cells[TIGHT_UPPER.key]), 'upper')}, is at "
            f"eps = {worst.eps:g}, eps0 = {worst.eps0:g}."
        )
    return " ".join(sentences)


def _literal_findings(grid: DeltaGrid, table: Sequence[PointResult]) -> list[str]:
    """The printed formula against its published values and against the exact single-bin delta
    of the same model."""
    sentences: list[str] = []
    compared = [
        abs(literal - published) / published
        for r in table
        if isinstance(published := published_cell(r.n, r.k, r.eps0, r.nx0, r.eps), float)
        and isinstance(literal := r.cells[COMPUTED.key], float)
        and published > 0
    ]
    if compared:
        sentences.append(
            f"The printed formula evaluated here reproduces the {len(compared)} positive values "
            f"Table IV publishes on this grid to within {100 * max(compared):.1f} % (they are "
            "printed to 3 digits), and its zeros exactly."
        )
    reference = [
        (r.eps, orders_of_magnitude(exact, literal))
        for r in table
        if (r.n, r.k, r.eps0) == (grid.n, grid.k, grid.eps0)
        and isinstance(literal := r.cells[COMPUTED.key], float)
        and isinstance(exact := r.cells[SINGLE_BIN_FORWARD.key], float)
        and literal > 0
    ]
    if reference:
        sentences.append(
            "It is not a valid guarantee, not even for the paper's own model: it lies "
            + ", ".join(f"{gap:.1f} orders of magnitude at eps = {eps:g}" for eps, gap in reference)
            + " below the exact single-bin H(P0 || P1) "
            f"(n = {grid.n}, k = {grid.k}, eps0 = {grid.eps0:g}, n_x0 = {grid.nx0})."
        )
    return sentences


# ---------------------------------------------------------------------------------------------
# Figures


def plot_table(path: Path, grid: DeltaGrid, results: Sequence[PointResult]) -> None:
    """delta vs eps for each varied parameter: exact single-bin (dashed) and the valid
    delta_upper (solid) per setting, the published printed values marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = [("eps0", "vary eps0"), ("n", "vary n"), ("k", "vary k")]
    fig, axes = plt.subplots(1, 3, figsize=(17.0, 7.6), squeeze=False, layout="constrained")
    settings = grid.settings()
    cmap = plt.get_cmap("viridis")
    for ax, (parameter, varies) in zip(axes[0], groups, strict=True):
        members = [s for s in settings if s[0] in (varies, "reference")]
        members.sort(key=lambda s: {"eps0": s[3], "n": s[1], "k": s[2]}[parameter])
        for index, (_, n, k, eps0) in enumerate(members):
            color = cmap(index / max(1, len(members) - 1))
            here = sorted(
                (r for r in results if (r.n, r.k, r.eps0) == (n, k, eps0)), key=lambda r: r.eps
            )
            value = {"eps0": f"{eps0:g}", "n": str(n), "k": str(k)}[parameter]
            for column, style, what in (
                (TIGHT_UPPER, "-", "delta_upper (valid)"),
                (SINGLE_BIN, "--", "single-bin (informative)"),
            ):
                points = [
                    (r.eps, float(r.cells[column.key]))
                    for r in here
                    if float(r.cells[column.key]) >= SMALLEST_SHOWN
                ]
                if points:
                    ax.plot(
                        *zip(*points, strict=True),
                        linestyle=style,
                        marker="o",
                        markersize=3,
                        color=color,
                        label=f"{parameter} = {value}: {what}",
                    )
            published = {
                eps: value
                for eps, value in PUBLISHED_TABLE_IV.get((n, k, eps0, grid.nx0), {}).items()
                if value > 0
            }
            if published:
                ax.plot(
                    list(published),
                    list(published.values()),
                    linestyle="none",
                    marker="X",
                    markersize=9,
                    color="tab:red",
                    label=f"{parameter} = {value}: Table IV, published",
                )
        ax.set_yscale("log")
        ax.set_ylim(top=3.0)  # delta <= 1
        ax.set_xlabel("eps")
        ax.set_ylabel("delta")
        fixed = {
            "eps0": f"n = {grid.n}, k = {grid.k}",
            "n": f"k = {grid.k}, eps0 = {grid.eps0:g}",
            "k": f"n = {grid.n}, eps0 = {grid.eps0:g}",
        }[parameter]
        ax.set_title(f"vary {parameter} ({fixed}, n_x0 = {grid.nx0})")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    fig.suptitle(
        "Table IV grid: valid delta_upper (solid) vs exact single-bin (dashed, informative); "
        f"X: printed formula as published ({LABEL_NOT_A_GUARANTEE});\n"
        "zeros (eps >= eps0) and values below 1e-300 not drawn"
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_surface(path: Path, grid: SurfaceGrid, results: Sequence[PointResult]) -> None:
    """Fig. 1: log10 delta over (eps, eps0), the valid delta_upper beside the printed formula
    (or, where the accountant cannot compute it, the exact single-bin value), one colour scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    eps_values = sorted(grid.eps_values)
    eps0_values = sorted(grid.eps0_values)

    def matrix(column: Column) -> np.ndarray:
        values = np.full((len(eps0_values), len(eps_values)), np.nan)
        for r in results:
            cell = r.cells[column.key]
            if isinstance(cell, float) and cell > 0:
                values[eps0_values.index(r.eps0), eps_values.index(r.eps)] = math.log10(cell)
        return values

    left_values, right_values = matrix(TIGHT_UPPER), matrix(COMPUTED)
    finite = np.concatenate([v[np.isfinite(v)] for v in (left_values, right_values)])
    vmax = 0.0
    vmin = max(float(finite.min()) if finite.size else -1.0, -120.0)
    fig, axes = plt.subplots(1, 2, figsize=(13.0, 5.6), sharey=True, layout="constrained")
    image = None
    titles = (
        f"valid delta_upper ({LABEL_TIGHT_UPPER})",
        f"printed formula evaluated here, n_x0 = {grid.nx0} ({LABEL_NOT_A_GUARANTEE});\n"
        "X: values published in Table IV",
    )
    for ax, values, title in zip(axes, (left_values, right_values), titles, strict=True):
        ax.set_facecolor("0.85")  # delta = 0 exactly (or nothing computed)
        image = ax.pcolormesh(
            eps_values,
            eps0_values,
            np.ma.masked_invalid(values),
            shading="nearest",
            cmap="magma",
            vmin=vmin,
            vmax=vmax,
        )
        top = min(max(eps_values), max(eps0_values))
        ax.plot([0, top], [0, top], color="white", linewidth=1.0, linestyle=":")
        ax.set_xlim(min(eps_values) - 0.05, max(eps_values) + 0.05)
        ax.set_ylim(min(eps0_values) - 0.125, max(eps0_values) + 0.125)
        ax.set_xlabel("eps")
        ax.set_title(title, fontsize=9)
    axes[0].set_ylabel("eps0")
    _mark_published(axes[1], grid, vmin, vmax)
    assert image is not None
    bar = fig.colorbar(image, ax=axes, extend="min")
    bar.set_label("log10 delta (grey: exactly 0)")
    fig.suptitle(
        f"Fig. 1 grid: delta over (eps, eps0), n = {grid.n}, k = {grid.k} (dotted: eps = eps0)"
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _mark_published(ax: Any, grid: SurfaceGrid, vmin: float, vmax: float) -> None:
    """The positive values Table IV publishes at this surface's (n, k, n_x0), coloured on the
    same scale: each marker's colour should match the cell under it (our evaluation)."""
    marks = [
        (eps, eps0, value)
        for (n, k, eps0, nx0), published in PUBLISHED_TABLE_IV.items()
        if (n, k, nx0) == (grid.n, grid.k, grid.nx0)
        for eps, value in published.items()
        if value > 0 and eps0 in grid.eps0_values and eps in grid.eps_values
    ]
    if not marks:
        return
    ax.scatter(
        [m[0] for m in marks],
        [m[1] for m in marks],
        c=[math.log10(m[2]) for m in marks],
        cmap="magma",
        vmin=vmin,
        vmax=vmax,
        marker="X",
        s=140,
        edgecolors="cyan",
        linewidths=1.2,
        zorder=3,
    )
    ax.text(
        0.97,
        0.03,
        f"X: values published in Table IV\n({LABEL_NOT_A_GUARANTEE})",
        transform=ax.transAxes,
        ha="right",
        va="bottom",
        fontsize=7,
        bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "cyan"},
    )
