"""``table-5``: Table V of the seed paper, the individual-specific utility per primary input x0 on
synthetic data, central Gaussian vs shuffle+INV, k = 15, eps0 = eps = 4, n = 1,000 and 100,000.

The paper's measure (Section V.A, below eq. 7) is |n pihat_x0 - n pi_x0| for shuffle+INV and
|n pi_x0 - H_x0| for the Gaussian (H: the noisy count); Table V prints it divided by n, one value
per cell (one run). Ours, in the same unit: per x0 the median and the quartiles over
:data:`FULL_RUNS` runs (fresh data each run) of |pihat_x0 - pi_x0| (shuffle+INV: matrix
inversion projected onto the simplex) and |H_x0 - n pi_x0| / n (the Gaussian's raw noisy count;
the CSV also has the simplex-projected Gaussian's error). pi is the data set's own histogram.

x0: the paper's x0 is 1-based over the 15 bins; ours is bin x0 - 1 of
:mod:`.synthetic_common`'s binning, so x0 = 1 is the lower tail bin (p = 0.0047). The summary
tests that reading against the published numbers (how often our runs reach each published value,
in our bin and in the densest bin).

Settings (:mod:`.settings`): ``paper``: the Gaussian's delta per x0 ("calculating delta for each
x0": the printed formula at nx0 = count of x0 - 1, 1e-6 where it is 0); ``honest``: both at
(4, 1e-6), eps0 calibrated; ``amplified``: eps0 = 4, both at the shuffle's (eps(1e-6), 1e-6).
Outputs per setting: ``table-5-<setting>.csv`` (per n and x0: medians, quartiles, the published
values), ``table-5-<setting>-runs.csv`` (every run, n and x0), ``table-5-<setting>.png/.svg``
(per x0: our errors over runs as boxes, the published value as a star), and
``SUMMARY-table-5.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from shuffledp.simulations.experiments.base import ExperimentContext, ExperimentOutput
from shuffledp.simulations.experiments.csv_rows import write_csv
from shuffledp.simulations.experiments.synthetic_common import (
    DATASET_LABEL,
    EPS,
    SETTINGS,
    K,
    path_text,
    randomness_text,
    run_points,
)
from shuffledp.validation import require_int

__all__ = ["COLUMNS", "FULL_RUNS", "NS", "PUBLISHED", "QUICK_RUNS", "RUN_COLUMNS", "X0S", "run"]

NAME = "table-5"
NS = (1_000, 100_000)
X0S = (1, 3, 5, 7, 9, 11, 13)
FULL_RUNS = 200
QUICK_RUNS = 10

#: Table V as printed: x0 -> (n = 1,000: Gaussian, shuffle+INV; n = 100,000: Gaussian,
#: shuffle+INV), all |n pihat_x0 - n pi_x0| / n.
PUBLISHED: dict[int, tuple[float, float, float, float]] = {
    1: (3e-3, 1e-3, 6e-6, 3e-3),
    3: (6e-4, 2e-4, 1e-5, 5e-4),
    5: (12e-4, 11e-4, 1e-5, 5e-4),
    7: (1e-4, 4e-3, 8e-6, 3e-5),
    9: (9e-4, 3e-3, 7e-6, 8e-4),
    11: (6e-4, 1e-3, 6e-6, 7e-4),
    13: (15e-4, 15e-4, 2e-5, 4e-4),
}

#: Error series: name -> the per-x0 list in a run's row.
SERIES: dict[str, str] = {
    "gaussian": "gaussian_raw_error_per_x0",
    "shuffle_inv": "inv_error_per_x0",
    "gaussian_projected": "gaussian_projected_error_per_x0",
}
COLUMNS: tuple[str, ...] = (
    "setting", "n", "x0", "bin", "pi_x0", "runs", "eps0", "eps", "gaussian_delta",
    "gaussian_sigma", *(f"{name}_{stat}" for name in SERIES for stat in ("median", "q25", "q75")),
    "published_gaussian", "published_shuffle_inv",
)  # fmt: skip
RUN_COLUMNS: tuple[str, ...] = (
    "setting", "n", "run", "x0", "bin", "true_count", "eps0", "eps", "gaussian_delta",
    "gaussian_sigma", *SERIES, "randomness",
)  # fmt: skip


def run(context: ExperimentContext) -> ExperimentOutput:
    """Run the runs (module docstring) and write the CSVs and the summary."""
    runs = (
        context.runs if context.runs is not None else (QUICK_RUNS if context.quick else FULL_RUNS)
    )
    require_int("runs", runs, 1)
    _, rows = run_points(context, NAME, NS, runs, per_x0=True)
    per_run = [cell for row in rows for cell in _run_cells(row)]
    files: list[Path] = []
    tables: dict[str, list[dict[str, Any]]] = {}
    for setting in SETTINGS:
        cells = [cell for cell in per_run if cell["setting"] == setting]
        tables[setting] = [_aggregate(setting, n, x0, cells) for n in NS for x0 in X0S]
        table_path = context.out / f"{NAME}-{setting}.csv"
        runs_path = context.out / f"{NAME}-{setting}-runs.csv"
        write_csv(table_path, COLUMNS, tables[setting])
        write_csv(runs_path, RUN_COLUMNS, cells)
        files += [table_path, runs_path, *_figure(context.out, setting, cells)]
    summary = _summary(context, runs, tables, rows, files)
    summary_path = context.out / f"SUMMARY-{NAME}.md"
    summary_path.write_text(summary, encoding="utf-8")
    return ExperimentOutput(name=NAME, files=(*files, summary_path), summary=summary)


_TITLES = {
    "paper": "setting 'paper': eps0 = eps = 4, Gaussian at (4, 1e-6)",
    "honest": "setting 'honest': both at (4, 1e-6), eps0 calibrated",
    "amplified": "setting 'amplified': eps0 = 4, both at the shuffle's (eps(1e-6), 1e-6)",
}


def _figure(out: Path, setting: str, cells: Sequence[dict[str, Any]]) -> tuple[Path, Path]:
    from shuffledp.simulations.experiments.table_5_plot import per_x0_figure

    panels: dict[str, dict[str, list[list[float]]]] = {}
    published: dict[str, dict[str, list[float]]] = {}
    for position, n in enumerate(NS):
        title = f"n = {n:,}"
        panels[title] = {
            label: [[float(c[name]) for c in cells if c["n"] == n and c["x0"] == x0] for x0 in X0S]
            for label, name in (("Gaussian", "gaussian"), ("shuffle+INV", "shuffle_inv"))
        }
        published[title] = {
            label: [PUBLISHED[x0][2 * position + offset] for x0 in X0S]
            for offset, label in enumerate(("Gaussian", "shuffle+INV"))
        }
    return per_x0_figure(
        out / f"{NAME}-{setting}.png",
        X0S,
        panels,
        published,
        title=f"Table V, k = {K}, N(0, 2) data, ours in {_TITLES[setting]}\n(stars: the paper's "
        "values, one run each, from its own setting)",
    )


def _run_cells(row: dict[str, Any]) -> list[dict[str, Any]]:
    """One run's row -> one cell per x0 of Table V."""
    cells = []
    for x0 in X0S:
        index = x0 - 1
        cell = {key: row[key] for key in ("setting", "n", "run", "eps0", "eps", "randomness")}
        cell.update(
            x0=x0,
            bin=index,
            true_count=row["true_count_per_x0"][index],
            gaussian_delta=row["gaussian_delta_per_x0"][index],
            gaussian_sigma=row["gaussian_sigma_per_x0"][index],
        )
        for name, key in SERIES.items():
            cell[name] = row[key][index]
        cells.append(cell)
    return cells


def _aggregate(setting: str, n: int, x0: int, cells: Sequence[dict[str, Any]]) -> dict[str, Any]:
    picked = [cell for cell in cells if cell["n"] == n and cell["x0"] == x0]
    published = PUBLISHED[x0][0:2] if n == NS[0] else PUBLISHED[x0][2:4]
    deltas = {float(cell["gaussian_delta"]) for cell in picked}
    out: dict[str, Any] = {
        "setting": setting,
        "n": n,
        "x0": x0,
        "bin": x0 - 1,
        "pi_x0": float(np.mean([cell["true_count"] for cell in picked])) / n,
        "runs": len(picked),
        "eps0": float(picked[0]["eps0"]),
        "eps": float(picked[0]["eps"]),
        "gaussian_delta": max(deltas),
        "gaussian_sigma": max(float(cell["gaussian_sigma"]) for cell in picked),
        "published_gaussian": published[0],
        "published_shuffle_inv": published[1],
    }
    for name in SERIES:
        q25, median, q75 = np.quantile([float(cell[name]) for cell in picked], [0.25, 0.5, 0.75])
        out.update({f"{name}_median": median, f"{name}_q25": q25, f"{name}_q75": q75})
    return out


#: The densest bin (0-based; the paper's x0 = 8): the alternative reading of x0 = 1.
MODE_BIN = K // 2


def percentile_of(
    rows: Sequence[dict[str, Any]], n: int, index: int, key: str, value: float
) -> float:
    """Where ``value`` falls among the runs' errors (rows of one setting, per-x0 list ``key``)
    in bin ``index`` at n: the share of runs whose error is <= ``value`` (0: below every run,
    1: above every run)."""
    errors = [float(row[key][index]) for row in rows if row["n"] == n]
    return sum(e <= value for e in errors) / len(errors) if errors else float("nan")


def _summary(
    context: ExperimentContext,
    runs: int,
    tables: dict[str, list[dict[str, Any]]],
    rows: Sequence[dict[str, Any]],
    files: Sequence[Path],
) -> str:
    paper_rows = [row for row in rows if row["setting"] == "paper"]
    deltas = sorted({d for row in paper_rows for d in row["gaussian_delta_per_x0"]})
    lines = [
        f"# {NAME}",
        "",
        f"Table V of the seed paper: individual-specific utility per primary input x0, k = {K}, "
        f"eps = {EPS:g}, data {DATASET_LABEL}; n = 1,000 and 100,000, {runs} run(s) per n "
        f"(fresh data each run; the paper prints one value per cell), through "
        f"{path_text(context)}.",
        "",
        f"Randomness: {randomness_text(context)}.",
        "",
        "Unit: |n pihat_x0 - n pi_x0| / n (the paper's Table V unit). Gaussian: the raw noisy "
        "count's error |H_x0 - n pi_x0| / n (the paper's definition); shuffle+INV: matrix "
        "inversion projected onto the simplex. Cells: median [25th, 75th percentile] over runs. "
        "x0 is the paper's 1-based index; ours is bin x0 - 1 (x0 = 1: the lower tail bin).",
        "",
        "- `paper`: " + paper_rows[0]["note"] if paper_rows else "- `paper`: no rows",
        "  Per x0 (nx0 = count of x0 - 1), the Gaussian's delta took the values "
        + ", ".join(f"{d:g}" for d in deltas)
        + " over every run and x0.",
        "- `honest`: both at the valid (4, 1e-6), eps0 calibrated per n.",
        "- `amplified`: eps0 = 4, both at the shuffle's valid (eps(1e-6), 1e-6).",
        "",
    ]
    for setting in SETTINGS:
        lines += _table_lines(setting, tables[setting])
    lines += _mapping_lines(paper_rows)
    lines += ["Files: " + ", ".join(f"`{p.name}`" for p in files) + ".", ""]
    return "\n".join(lines)


def _cell_text(entry: dict[str, Any], name: str) -> str:
    return f"{entry[f'{name}_median']:.2g} [{entry[f'{name}_q25']:.2g}, {entry[f'{name}_q75']:.2g}]"


def _table_lines(setting: str, table: Sequence[dict[str, Any]]) -> list[str]:
    by = {(entry["n"], entry["x0"]): entry for entry in table}
    first = {n: by[(n, X0S[0])] for n in NS}
    lines = [
        f"## Setting `{setting}`",
        "",
        " ".join(
            f"n = {n:,}: eps0 = {first[n]['eps0']:.4g}, Gaussian at (eps, delta) = "
            f"({first[n]['eps']:.4g}, {first[n]['gaussian_delta']:.3g}), sigma = "
            f"{first[n]['gaussian_sigma']:.4g}."
            for n in NS
        ),
        "",
        "| x0 | pi_x0 | n = 1,000 Gaussian | shuffle+INV | published G / S | n = 100,000 "
        "Gaussian | shuffle+INV | published G / S |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for x0 in X0S:
        cells = []
        for n in NS:
            entry = by[(n, x0)]
            cells += [
                _cell_text(entry, "gaussian"),
                _cell_text(entry, "shuffle_inv"),
                f"{entry['published_gaussian']:.1g} / {entry['published_shuffle_inv']:.1g}",
            ]
        lines.append(f"| {x0} | {by[(NS[0], x0)]['pi_x0']:.3g} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _mapping_lines(paper_rows: Sequence[dict[str, Any]]) -> list[str]:
    """How often our runs (paper setting) reach each published value, in our bin for that x0
    and in the densest bin: which reading of x0 the published numbers support."""
    lines = [
        "## Which bin is the paper's x0? (setting `paper`)",
        "",
        "Where each published value falls among our runs (the share of runs with an error at "
        "most that value) in our bin x0 - 1 and in the densest bin "
        f"(x0 = {MODE_BIN + 1}). A share near 0% or 100% means our runs rarely give such a "
        "value in that bin.",
        "",
        "| x0 | n | mechanism | published | percentile in bin x0 - 1 | percentile in the densest "
        "bin |",
        "|---|---|---|---|---|---|",
    ]
    for x0 in X0S:
        for position, n in enumerate(NS):
            for offset, (label, key) in enumerate(
                (("Gaussian", "gaussian_raw_error_per_x0"), ("shuffle+INV", "inv_error_per_x0"))
            ):
                value = PUBLISHED[x0][2 * position + offset]
                ours = percentile_of(paper_rows, n, x0 - 1, key, value)
                dense = percentile_of(paper_rows, n, MODE_BIN, key, value)
                lines.append(f"| {x0} | {n:,} | {label} | {value:g} | {ours:.0%} | {dense:.0%} |")
    return [*lines, ""]
