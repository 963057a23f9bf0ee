"""``table-6``: individual-specific utility on the Gowalla data (the paper's Table VI).

The paper (Section V, below eq. 7) defines the individual-specific utility of a primary input x0
as |n pihat_x0 - n pi_x0| for shuffle+INV and |n pi_x0 - H_x0| for the Gaussian (H: the noisy
histogram); Table VI prints it divided by n, at eps0 = eps = 4, for the cells x0 in {40, 80,
..., 280} (San Francisco) and {20, 40, ..., 140} (Paris). Here, in the same unit:

* Gaussian: |H_x0 - n pi_x0| / n with H the Gaussian's noisy counts (before any projection);
* shuffle+INV: |pihat_x0 - pi_x0| with pihat the matrix-inversion estimate projected onto the
  simplex (the paper's footnote 8: "matrix inversion and projection to probability simplex").

**Cell numbering.** The paper does not say how x0 maps to the grid (0- or 1-based, row- or
column-major, from which corner). We read x0 as our 0-based row-major index (``cell = row *
columns + column``, row 0 the southernmost band, column 0 the westernmost), because the paper
numbers the alphabet x_0 .. x_{k-1} from 0 (Section IV) and gives no other order. Both errors
barely depend on the cell (the Gaussian's noise does not at all; shuffle+INV's spread is set by
k-RR's flip probability, nearly the same for every cell), so the summary also gives the median
over *all* cells: a different reading of x0 moves the numbers within that spread.

Runs: all N individuals of each region, 10 runs (``--quick`` 3; the paper does not state its
count and prints one number per cell: we give the median and the 90th percentile over runs), in
the settings ``paper`` (eps0 = eps = 4, the Gaussian at (4, 1e-6): the printed formula gives
delta = 0 at eps = eps0) and ``honest`` (both at (4, 1e-6), eps0 calibrated).

Outputs: ``table-6.csv`` (one row per region, setting, run and table cell),
``table-6-<region>.png`` / ``.svg`` (per cell, our errors over runs beside the published value,
one panel per setting) and ``SUMMARY-table-6.md`` (the table beside the published values).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from shuffledp.simulations.experiments.base import ExperimentContext, ExperimentOutput
from shuffledp.simulations.experiments.csv_rows import write_csv
from shuffledp.simulations.experiments.gowalla_data import (
    PARIS,
    SF,
    Population,
    RegionSetup,
    dataset_path,
    load_population,
)
from shuffledp.simulations.experiments.gowalla_report import (
    data_lines,
    randomness_text,
    rounds_text,
)
from shuffledp.simulations.experiments.gowalla_rounds import (
    PlanRequest,
    RoundResult,
    RoundTask,
    make_plan,
    run_rounds,
)
from shuffledp.simulations.experiments.runner import repetition_seed
from shuffledp.validation import require_int

__all__ = ["EPS", "PUBLISHED", "READINGS", "SETTINGS", "cell_errors", "read_cell", "run"]

NAME = "table-6"
EPS = 4.0
FULL_RUNS = 10
QUICK_RUNS = 3
SETTINGS = ("paper", "honest")
SETUPS = (SF, PARIS)
#: Table VI as published: region -> x0 -> (Gaussian, shuffle+INV), normalised by n.
PUBLISHED: dict[str, dict[int, tuple[float, float]]] = {
    SF.name: {
        40: (4e-6, 1e-3), 80: (3e-5, 5e-4), 120: (9e-6, 1e-3), 160: (4e-5, 2e-4),
        200: (2e-5, 2e-4), 240: (2e-5, 7e-4), 280: (4e-6, 5e-4),
    },
    PARIS.name: {
        20: (2e-6, 3e-4), 40: (3e-5, 2e-3), 60: (4e-5, 2e-3), 80: (5e-5, 4e-4),
        100: (7e-5, 1e-4), 120: (3e-5, 2e-4), 140: (1e-4, 1e-4),
    },
}  # fmt: skip
CSV_COLUMNS = (
    "region", "setting", "run", "n", "eps", "eps0", "gaussian_delta", "gaussian_sigma", "cell",
    "row", "column", "true_count", "error_gaussian", "error_shuffle_inv",
)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class CellErrors:
    """The normalised errors of one round at ``cells`` (module docstring), and at every cell."""

    gaussian: npt.NDArray[np.float64]
    shuffle_inv: npt.NDArray[np.float64]


def cell_errors(result: RoundResult) -> CellErrors:
    """|H - n pi| / n (Gaussian) and |pihat - pi| (shuffle+INV) at every cell of one round."""
    n = result.n
    truth = result.truth.astype(np.float64)
    return CellErrors(
        gaussian=np.abs(result.gaussian_noisy - truth) / n,
        shuffle_inv=np.abs(result.shares["shuffle+INV"] - truth / n),
    )


def run(context: ExperimentContext) -> ExperimentOutput:
    """Both regions' runs, the table and the summary."""
    runs = (
        context.runs if context.runs is not None else (QUICK_RUNS if context.quick else FULL_RUNS)
    )
    require_int("runs", runs, 1)
    populations = {s: load_population(dataset_path(context, s), s.grid) for s in SETUPS}
    requests = [
        PlanRequest(
            setting=setting,
            n=pop.n,
            k=pop.region.k,
            eps=EPS,
            expected_counts=tuple(int(c) for c in pop.counts),
        )
        for pop in populations.values()
        for setting in SETTINGS
    ]
    plans = context.repeat(make_plan, requests, label=f"{NAME}: accountant")
    tasks = [
        RoundTask(
            region=setup.name,
            population=populations[setup].values,
            n=populations[setup].n,
            run=run,
            privacy=plans[2 * r_index + s_index],
            subset_seed=None,
            seed=repetition_seed(context.seed, r_index, s_index, run),
            label=f"gowalla:{populations[setup].path.name}",
        )
        for r_index, setup in enumerate(SETUPS)
        for s_index in range(len(SETTINGS))
        for run in range(runs)
    ]
    results = run_rounds(context, tasks, f"{NAME}: rounds")
    out = context.out
    table = "\n".join(table_lines(results))
    files = [write_csv(out / f"{NAME}.csv", CSV_COLUMNS, _csv_rows(results))]
    files += [path for setup in SETUPS for path in _figure(out, results, setup)]
    summary = _summary(context, populations, results, table, files)
    path = _write(out / f"SUMMARY-{NAME}.md", summary)
    return ExperimentOutput(name=NAME, files=(*files, path), summary=summary)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _csv_rows(results: Sequence[RoundResult]) -> list[dict[str, Any]]:
    rows = []
    for result in results:
        errors = cell_errors(result)
        columns = PARIS.grid.columns if result.region == PARIS.name else SF.grid.columns
        for cell in PUBLISHED[result.region]:
            rows.append(
                {
                    "region": result.region, "setting": result.privacy.setting, "run": result.run,
                    "n": result.n, "eps": result.privacy.eps, "eps0": result.privacy.eps0,
                    "gaussian_delta": result.privacy.gaussian_delta,
                    "gaussian_sigma": result.gaussian_sigma, "cell": cell,
                    "row": cell // columns, "column": cell % columns,
                    "true_count": int(result.truth[cell]),
                    "error_gaussian": float(errors.gaussian[cell]),
                    "error_shuffle_inv": float(errors.shuffle_inv[cell]),
                }
            )  # fmt: skip
    return rows


def _figure(out: Path, results: Sequence[RoundResult], setup: RegionSetup) -> tuple[Path, Path]:
    """``table-6-<region>.png``: per published cell, our errors over runs (one panel per
    setting) beside the paper's value, in the paper's unit."""
    from shuffledp.simulations.experiments.table_5_plot import per_x0_figure

    cells = list(PUBLISHED[setup.name])
    panels: dict[str, dict[str, list[list[float]]]] = {}
    published: dict[str, dict[str, list[float]]] = {}
    for setting in SETTINGS:
        errors = _errors(results, setup.name, setting)
        eps0 = next(r.privacy.eps0 for r in results if r.privacy.setting == setting
                    and r.region == setup.name)  # fmt: skip
        title = f"{setting}: eps = {EPS:g}, eps0 = {eps0:.3g}"
        panels[title] = {
            "Gaussian": [[float(e.gaussian[c]) for e in errors] for c in cells],
            "shuffle+INV": [[float(e.shuffle_inv[c]) for e in errors] for c in cells],
        }
        published[title] = {
            "Gaussian": [PUBLISHED[setup.name][c][0] for c in cells],
            "shuffle+INV": [PUBLISHED[setup.name][c][1] for c in cells],
        }
    return per_x0_figure(
        out / f"{NAME}-{setup.name}",
        cells,
        panels,
        published,
        title=f"{NAME}: individual-specific utility, {setup.title} (|n pihat - n pi| / n)\n"
        f"(stars: the paper's values, one each, at its eps0 = eps = {EPS:g})",
        xlabel="x0 (the paper's cell; read as our 0-based row-major index)",
        table="Table VI",
    )


def _errors(results: Sequence[RoundResult], region: str, setting: str) -> list[CellErrors]:
    return [cell_errors(r) for r in results if r.region == region and r.privacy.setting == setting]


def _stat(values: npt.NDArray[np.float64]) -> str:
    """Median [90th percentile] in the paper's style (one significant digit is what it prints;
    we give two)."""
    return f"{np.median(values):.1e} [{np.quantile(values, 0.9):.1e}]"


def table_lines(results: Sequence[RoundResult]) -> list[str]:
    """The markdown table: per region and cell, the published values beside ours (median
    [90th percentile] over runs) in both settings, and the median over all cells."""
    lines = [
        "| region | x0 (row, col) | true count | Gaussian: published | Gaussian: paper setting "
        "| shuffle+INV: published | shuffle+INV: paper setting | Gaussian: honest | "
        "shuffle+INV: honest |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for setup in SETUPS:
        paper = _errors(results, setup.name, "paper")
        honest = _errors(results, setup.name, "honest")
        if not paper:
            continue
        truth = next(r.truth for r in results if r.region == setup.name)
        for cell, (gauss, inv) in PUBLISHED[setup.name].items():
            row, column = divmod(cell, setup.grid.columns)
            ours = [
                _stat(np.array([getattr(e, field)[cell] for e in errs]))
                for field, errs in (("gaussian", paper), ("shuffle_inv", paper))
            ]
            theirs = [
                _stat(np.array([getattr(e, field)[cell] for e in honest]))
                for field in ("gaussian", "shuffle_inv")
            ]
            lines.append(
                f"| {setup.title} | {cell} ({row}, {column}) | {int(truth[cell]):,} | {gauss:.0e} "
                f"| {ours[0]} | {inv:.0e} | {ours[1]} | {theirs[0]} | {theirs[1]} |"
            )
        lines.append(_all_cells_line(setup, paper, honest))
    return lines


def _all_cells_line(
    setup: RegionSetup, paper: Sequence[CellErrors], honest: Sequence[CellErrors]
) -> str:
    def pooled(errs: Sequence[CellErrors], field: str) -> str:
        return _stat(np.concatenate([getattr(e, field) for e in errs]))

    published = np.array(list(PUBLISHED[setup.name].values()))
    return (
        f"| {setup.title} | all {setup.grid.k} cells | | {np.median(published[:, 0]):.0e} (median) "
        f"| {pooled(paper, 'gaussian')} | {np.median(published[:, 1]):.0e} (median) | "
        f"{pooled(paper, 'shuffle_inv')} | {pooled(honest, 'gaussian')} | "
        f"{pooled(honest, 'shuffle_inv')} |"
    )


#: Readings of the paper's cell index x0 on a rows x columns grid, as our cell numbers.
READINGS: dict[str, str] = {
    "ours": "0-based, row-major from the south-west (what the table uses)",
    "1-based": "1-based, row-major from the south-west",
    "from the north": "0-based, row-major from the north-west",
    "column-major": "0-based, column-major from the south-west",
}


def read_cell(x0: int, reading: str, rows: int, columns: int) -> int:
    """Our cell number of the paper's x0 under ``reading`` (see :data:`READINGS`)."""
    if reading == "ours":
        return x0
    if reading == "1-based":
        return x0 - 1
    if reading == "from the north":
        row, column = divmod(x0, columns)
        return (rows - 1 - row) * columns + column
    if reading == "column-major":
        column, row = divmod(x0, rows)
        return row * columns + column
    raise ValueError(f"reading must be one of {', '.join(READINGS)}, got {reading!r}")


def _reading_lines(populations: dict[RegionSetup, Population]) -> list[str]:
    """The true count of each table cell under each reading of x0."""
    lines = [
        "| region | x0 | " + " | ".join(READINGS) + " |",
        "|---|---|" + "---|" * len(READINGS),
    ]
    for setup, population in populations.items():
        counts = population.counts
        grid = setup.grid
        for x0 in setup.table_cells:
            cells = [read_cell(x0, r, grid.rows, grid.columns) for r in READINGS]
            lines.append(
                f"| {setup.title} | {x0} | "
                + " | ".join(f"{int(counts[c]):,} (cell {c})" for c in cells)
                + " |"
            )
    return lines


def _implied_sigma_lines(populations: dict[RegionSetup, Population]) -> list[str]:
    """What Gaussian sigma the published values suggest: for N(0, sigma), the median of |noise|
    is 0.6745 sigma, so sigma ~ n * median(published) / 0.6745 (7 values: a rough estimate)."""
    lines = []
    for setup in SETUPS:
        values = [gauss for gauss, _ in PUBLISHED[setup.name].values()]
        sigma = setup.paper_n * float(np.median(values)) / 0.6745
        lines.append(
            f"- {setup.title}: the published Gaussian errors (median {np.median(values):.0e}) "
            f"suggest sigma ~ {sigma:.2g} at the paper's n = {setup.paper_n:,}; the analytic "
            "Gaussian at (4, 1e-6) has sigma = 1.69."
        )
    return lines


def _summary(
    context: ExperimentContext,
    populations: dict[RegionSetup, Population],
    results: Sequence[RoundResult],
    table: str,
    files: Sequence[Path],
) -> str:
    runs = len(results) // (len(SETUPS) * len(SETTINGS))
    notes = {r.privacy.setting + r.region: r.privacy for r in results}
    lines = [
        f"# {NAME}: individual-specific utility on the Gowalla data (the paper's Table VI)",
        "",
        "Unit: the paper's normalised error, |n pihat_x0 - n pi_x0| / n = |pihat_x0 - pi_x0| "
        "(a share of the n individuals), shuffle+INV with the simplex projection, the Gaussian "
        f"before it (|H_x0 - n pi_x0| / n). All N individuals, eps = {EPS:g}; {runs} run(s) per "
        "region and setting: median [90th percentile] over runs.",
        "",
        "Cell numbering (assumed, the paper does not say): x0 is our 0-based row-major index, "
        "cell = row * columns + column, row 0 the southernmost band, column 0 the westernmost "
        "(the paper numbers its alphabet x_0 .. x_{k-1} from 0). The 'all cells' rows pool every "
        "cell: a different reading of x0 moves the numbers within that spread.",
        "",
        randomness_text(context),
        "",
        rounds_text(context),
        "",
        *data_lines(populations),
        "## Table VI, published and ours",
        "",
        table,
        "",
        "## Settings",
        "",
    ]
    for setup in SETUPS:
        for setting in SETTINGS:
            privacy = notes[setting + setup.name]
            lines.append(f"- {setup.title}, `{setting}`: {privacy.note}")
    lines += ["", "## The published Gaussian errors", "", *_implied_sigma_lines(populations)]
    lines += [
        "",
        "## Other readings of x0",
        "",
        "True count (our cell number) of each table cell under four readings of the paper's "
        "index: " + "; ".join(f"{key}: {text}" for key, text in READINGS.items()) + ".",
        "",
        *_reading_lines(populations),
    ]
    lines += ["", "Files: " + ", ".join(f"`{p.name}`" for p in files) + ".", ""]
    return "\n".join(lines)
