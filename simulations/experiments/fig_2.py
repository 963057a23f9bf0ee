"""``fig-2``: Fig. 2 of the seed paper, TV distance to the true distribution vs n, central
Gaussian vs shuffle, shuffle+INV (and IBU), k = 15, eps = 4, synthetic N(0, 2) data.

The paper (Section V.C) states k = 15, eps = 4, delta_hat of eq. 10 for the Gaussian, and quotes
TV 0.014 (Gaussian) vs 0.026 (shuffle+INV) at n = 1,000 and 0.0001 vs 0.0048 at n = 100,000;
its Table III lists n in {50, 100, 150, 1000, 100000}. Our n grid: those five plus 300, 3,000,
10,000 and 30,000 (a log axis with no gap wider than a factor 3.3). The paper does not state its
run count for Fig. 2; ours is :data:`FULL_RUNS` per n (fresh data every run).

Settings (:mod:`.settings`, one figure and one CSV each): ``paper``, ``honest``, ``amplified``
(see :mod:`.synthetic_common`). Outputs: ``fig-2-<setting>.csv`` (one row per n and run;
:data:`COLUMNS`), ``fig-2-<setting>.png/.svg`` (panel (a): all estimators, (b): Gaussian and
shuffle+INV only, as the paper's (a) and (b); the paper's quoted TV values as stars, legend
"paper, Sec. V.C"; a strip below with each mechanism's eps), and
``SUMMARY-fig-2.md``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shuffledp.simulations.experiments.base import ExperimentContext, ExperimentOutput
from shuffledp.simulations.experiments.csv_rows import write_csv
from shuffledp.simulations.experiments.synthetic_common import (
    DATASET_LABEL,
    EPS,
    SETTINGS,
    K,
    Plan,
    path_text,
    randomness_text,
    run_points,
)
from shuffledp.validation import require_int

__all__ = [
    "COLUMNS",
    "ESTIMATORS",
    "FULL_NS",
    "FULL_RUNS",
    "PUBLISHED",
    "QUICK_NS",
    "QUOTED_AS",
    "quoted_points",
    "run",
]

NAME = "fig-2"
#: Table III's n values plus points between them on the log axis.
FULL_NS = (50, 100, 150, 300, 1_000, 3_000, 10_000, 30_000, 100_000)
QUICK_NS = (100, 1_000, 100_000)
FULL_RUNS = 100
QUICK_RUNS = 5

#: Legend label -> CSV column, in drawing order.
ESTIMATORS: dict[str, str] = {
    "Gaussian": "tv_gaussian",
    "shuffle": "tv_shuffle",
    "shuffle+INV": "tv_shuffle_inv",
    "IBU": "tv_ibu",
}
COLUMNS: tuple[str, ...] = (
    "setting",
    "n",
    "run",
    "k",
    "eps0",
    "eps",
    "gaussian_delta",
    "printed_delta",
    "shuffle_delta_upper",
    "shuffle_delta_lower",
    *ESTIMATORS.values(),
    "gaussian_sigma",
    "ibu_method",
    "n_received",
    "path",
    "randomness",
)
#: The paper's TV values (Section V.C text): n -> (Gaussian, shuffle+INV).
PUBLISHED: dict[int, tuple[float, float]] = {1_000: (0.014, 0.026), 100_000: (0.0001, 0.0048)}
#: How the figures' legend names them (stars over both panels, every setting: the paper's
#: numbers are for its own setting, drawn elsewhere as the reference they are).
QUOTED_AS = "paper, Sec. V.C"


def quoted_points() -> dict[str, list[tuple[float, float]]]:
    """:data:`PUBLISHED` as the figure's overlay: series label -> (n, TV) points."""
    return {
        label: [(float(n), pair[column]) for n, pair in sorted(PUBLISHED.items())]
        for column, label in enumerate(("Gaussian", "shuffle+INV"))
    }


def run(context: ExperimentContext) -> ExperimentOutput:
    """Run the sweep (module docstring) and write its CSVs, figures and summary."""
    ns = QUICK_NS if context.quick else FULL_NS
    runs = (
        context.runs if context.runs is not None else (QUICK_RUNS if context.quick else FULL_RUNS)
    )
    require_int("runs", runs, 1)
    plans, rows = run_points(context, NAME, ns, runs, per_x0=False)
    files: list[Path] = []
    for setting in SETTINGS:
        picked = [row for row in rows if row["setting"] == setting]
        csv_path = context.out / f"{NAME}-{setting}.csv"
        write_csv(csv_path, COLUMNS, picked)
        files += [csv_path, *_figure(context.out, setting, picked, ns)]
    summary = _summary(context, plans, rows, ns, runs, files)
    summary_path = context.out / f"SUMMARY-{NAME}.md"
    summary_path.write_text(summary, encoding="utf-8")
    return ExperimentOutput(name=NAME, files=(*files, summary_path), summary=summary)


def values_at(rows: Sequence[dict[str, Any]], n: int, column: str) -> list[float]:
    """The column's values over the runs at n (rows of one setting)."""
    return [float(row[column]) for row in rows if row["n"] == n]


_TITLES = {
    "paper": "setting 'paper': eps0 = eps = 4, Gaussian at (4, 1e-6)",
    "honest": "setting 'honest': both at (4, 1e-6), eps0 calibrated",
    "amplified": "setting 'amplified': eps0 = 4, both at the shuffle's (eps, 1e-6)",
}


def _figure(
    out: Path, setting: str, rows: Sequence[dict[str, Any]], ns: Sequence[int]
) -> tuple[Path, Path]:
    from shuffledp.simulations.experiments.plots import RunsPanel, runs_plot

    def series(labels: Sequence[str]) -> dict[str, list[list[float]]]:
        return {label: [values_at(rows, n, ESTIMATORS[label]) for n in ns] for label in labels}

    first = {n: next(row for row in rows if row["n"] == n) for n in ns}
    eps = {
        "Gaussian (= the shuffle's valid eps)": [float(first[n]["eps"]) for n in ns],
        "shuffle (k-RR eps0)": [float(first[n]["eps0"]) for n in ns],
    }
    x = tuple(float(n) for n in ns)
    quoted = quoted_points()
    panels = [
        RunsPanel(
            "(a) all estimators", x, series(list(ESTIMATORS)), eps=eps, quoted=quoted,
            quoted_as=QUOTED_AS,
        ),
        RunsPanel(
            "(b) Gaussian and shuffle+INV", x, series(["Gaussian", "shuffle+INV"]), eps=eps,
            quoted=quoted, quoted_as=QUOTED_AS,
        ),
    ]  # fmt: skip
    return runs_plot(
        out / f"{NAME}-{setting}.png",
        panels,
        xlabel="n (users)",
        ylabel="TV distance to the true distribution",
        title=f"Fig. 2, k = {K}, N(0, 2) data: {_TITLES[setting]}",
    )


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _summary(
    context: ExperimentContext,
    plans: Sequence[Plan],
    rows: Sequence[dict[str, Any]],
    ns: Sequence[int],
    runs: int,
    files: Sequence[Path],
) -> str:
    lines = [
        f"# {NAME}",
        "",
        f"Fig. 2 of the seed paper: TV distance to the true distribution vs n, k = {K}, eps = "
        f"{EPS:g}, data {DATASET_LABEL}; {runs} run(s) per n (fresh data each run; the paper "
        f"does not state its run count), through {path_text(context)}.",
        "",
        f"Randomness: {randomness_text(context)}.",
        "",
        *_privacy_lines(plans, rows),
    ]
    for setting in SETTINGS:
        lines += _setting_lines(setting, [r for r in rows if r["setting"] == setting], ns)
    lines += [
        "Estimators: `shuffle` = raw normalised counts; `shuffle+INV` = matrix inversion "
        "projected onto the simplex; `IBU` = iterative Bayesian update; `Gaussian` = the "
        "central analytic Gaussian (L2 sensitivity sqrt 2, sigma = the exact analytic "
        "calibration at the (eps, delta) listed) on the true histogram, projected onto the "
        "simplex.",
        "",
        "Files: " + ", ".join(f"`{p.name}`" for p in files) + ".",
        "",
    ]
    return "\n".join(lines)


def _privacy_lines(plans: Sequence[Plan], rows: Sequence[dict[str, Any]]) -> list[str]:
    paper_rows = [row for row in rows if row["setting"] == "paper"]
    printed = {row["printed_delta"] for row in paper_rows}
    notes = {row["note"] for row in paper_rows}
    lines = [
        "## Privacy per setting",
        "",
        "- `paper`: " + " / ".join(sorted(notes)),
        f"  Printed formula's delta_hat (eq. 10, max over the x0 present with nx0 = count - 1) "
        f"in every run: {', '.join(f'{p!r}' for p in sorted(printed, key=str))}.",
        "- `honest`: both at the valid (eps, delta) = (4, 1e-6); eps0 calibrated per n.",
        "- `amplified`: eps0 = 4; both at the shuffle's valid (eps(1e-6), 1e-6) from the tight "
        "accountant.",
        "",
        "| n | honest: eps0 | honest: shuffle delta_upper (lower) at eps = 4 | amplified: eps "
        "at delta = 1e-6 | amplified: delta_upper (lower) |",
        "|---|---|---|---|---|",
    ]
    for plan in plans:
        h, a = plan.honest, plan.amplified
        lines.append(
            f"| {plan.n:,} | {h.eps0:.4g} | {h.shuffle_delta_upper:.3g} "
            f"({h.shuffle_delta_lower:.3g}) | {a.eps:.4g} | {a.shuffle_delta_upper:.3g} "
            f"({a.shuffle_delta_lower:.3g}) |"
        )
    return [*lines, ""]


def _setting_lines(setting: str, rows: Sequence[dict[str, Any]], ns: Sequence[int]) -> list[str]:
    lines = [
        f"## Setting `{setting}`",
        "",
        "Median TV distance over runs (ratio: Gaussian / shuffle+INV of the medians; the "
        "published values are the paper's, quoted from Section V.C):",
        "",
        "| n | eps0 | Gaussian (eps, delta) | sigma | "
        + " | ".join(ESTIMATORS)
        + " | Gaussian / shuffle+INV | published Gaussian, shuffle+INV |",
        "|---|---|---|---|" + "---|" * len(ESTIMATORS) + "---|---|",
    ]
    for n in ns:
        picked = [row for row in rows if row["n"] == n]
        if not picked:
            continue
        first = picked[0]
        medians = {label: _median(values_at(rows, n, c)) for label, c in ESTIMATORS.items()}
        ratio = medians["Gaussian"] / medians["shuffle+INV"]
        published = PUBLISHED.get(n)
        quoted = "" if published is None else f"{published[0]:g}, {published[1]:g}"
        lines.append(
            f"| {n:,} | {float(first['eps0']):.4g} | ({float(first['eps']):.4g}, "
            f"{float(first['gaussian_delta']):.3g}) | {float(first['gaussian_sigma']):.4g} | "
            + " | ".join(f"{medians[label]:.3g}" for label in ESTIMATORS)
            + f" | {ratio:.3g} | {quoted} |"
        )
    return [*lines, ""]
