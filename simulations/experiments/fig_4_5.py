"""``fig-4`` (San Francisco) and ``fig-5`` (Paris): the original distribution estimated from the
Gaussian and the shuffle releases at the paper's eps = 4 (the paper's Figs. 4 and 5).

All N individuals of the region (n = N), eps = 4, in two settings
(:mod:`shuffledp.simulations.experiments.settings`):

* ``paper``: eps0 = eps = 4; the Gaussian at (4, delta_paper) (the printed formula gives 0 at
  eps = eps0, so delta_paper = 1e-6, our assumption); the shuffle's valid guarantee is (4, 0).
* ``honest``: both at (4, 1e-6): eps0 calibrated, the Gaussian at exactly (4, 1e-6).
* ``amplified`` (an extra view): eps0 = 4 as in ``paper``, but the Gaussian at the shuffle's own
  valid guarantee, its tight eps at delta = 1e-6 (the amplification by shuffling).

Each figure (one per setting) shows run 0's heat maps on one colour scale: the true
distribution, the Gaussian, the raw shuffle and shuffle+INV, each caption with its TV distance
and its mechanism's (eps, delta). The runs (10; ``--quick`` 2; the paper shows one) give the TV
medians of the summary.

Outputs (NAME = fig-4 or fig-5): ``NAME-paper.png``, ``NAME-honest.png``,
``NAME-amplified.png`` (+ ``.svg``),
``NAME.csv`` (one row per setting and run), ``NAME-maps.csv`` (run 0's share per cell and
panel) and ``SUMMARY-NAME.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

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
    fmt,
    median_text,
    randomness_text,
    rounds_text,
)
from shuffledp.simulations.experiments.gowalla_rounds import (
    ESTIMATORS,
    ROUND_COLUMNS,
    PlanRequest,
    RoundResult,
    RoundTask,
    make_plan,
    run_rounds,
    tv_values,
)
from shuffledp.simulations.experiments.runner import repetition_seed
from shuffledp.simulations.experiments.settings import SettingPrivacy, setting_legend
from shuffledp.validation import require_int

__all__ = ["EPS", "FULL_RUNS", "PANELS", "QUICK_RUNS", "SETTINGS", "run_paris", "run_sf"]

EPS = 4.0
FULL_RUNS = 10
QUICK_RUNS = 2
SETTINGS = ("paper", "honest", "amplified")
#: Heat-map panels, in order: the truth, then the releases.
PANELS = ("true", "Gaussian", "shuffle", "shuffle+INV")
NAMES = {SF.name: "fig-4", PARIS.name: "fig-5"}


def run_sf(context: ExperimentContext) -> ExperimentOutput:
    """``fig-4``: San Francisco (module docstring)."""
    return run_region(context, SF)


def run_paris(context: ExperimentContext) -> ExperimentOutput:
    """``fig-5``: Paris (module docstring)."""
    return run_region(context, PARIS)


def run_region(context: ExperimentContext, setup: RegionSetup) -> ExperimentOutput:
    """The region's runs, heat maps, CSVs and summary."""
    name = NAMES[setup.name]
    runs = (
        context.runs if context.runs is not None else (QUICK_RUNS if context.quick else FULL_RUNS)
    )
    require_int("runs", runs, 1)
    population = load_population(dataset_path(context, setup), setup.grid)
    n, k = population.n, setup.grid.k
    counts = tuple(int(c) for c in population.counts)
    requests = [PlanRequest(setting=s, n=n, k=k, eps=EPS, expected_counts=counts) for s in SETTINGS]
    plans = context.repeat(make_plan, requests, label=f"{name}: accountant")
    tasks = [
        RoundTask(
            region=setup.name,
            population=population.values,
            n=n,
            run=run,
            privacy=plan,
            subset_seed=None,
            seed=repetition_seed(context.seed, index, run),
            label=f"gowalla:{population.path.name}",
        )
        for index, plan in enumerate(plans)
        for run in range(runs)
    ]
    results = run_rounds(context, tasks, f"{name}: rounds")
    out = context.out
    files: list[Path] = []
    for plan in plans:
        first = next(r for r in results if r.privacy.setting == plan.setting and r.run == 0)
        files += _figure(out / f"{name}-{plan.setting}.png", setup, first)
    files.append(write_csv(out / f"{name}.csv", ROUND_COLUMNS, [r.row() for r in results]))
    files.append(_write_maps(out / f"{name}-maps.csv", setup, results))
    summary = _summary(context, name, setup, population, plans, results, files)
    path = out / f"SUMMARY-{name}.md"
    path.write_text(summary, encoding="utf-8")
    return ExperimentOutput(name=name, files=(*files, path), summary=summary)


def _guarantee(privacy: SettingPrivacy, mechanism: str, delta: float) -> str:
    if mechanism == "Gaussian":
        return f"({privacy.eps:.3g}, {privacy.gaussian_delta:.2g})-DP"
    return f"k-RR eps0 = {privacy.eps0:.3g}; ({privacy.eps:.3g}, {delta:.2g})-DP"


def _figure(path: Path, setup: RegionSetup, result: RoundResult) -> tuple[Path, Path]:
    from shuffledp.simulations.experiments.plots import heat_maps

    region = setup.grid
    privacy = result.privacy
    tv = result.tv
    truth = result.truth / result.n
    panels: list[tuple[str, Any]] = [("true distribution", truth)]
    for key in PANELS[1:]:
        guarantee = _guarantee(privacy, key, result.shuffle_delta)
        panels.append((f"{key}, TV {tv[key]:.3g}\n{guarantee}", result.shares[key]))
    return heat_maps(
        path,
        panels,
        rows=region.rows,
        columns=region.columns,
        title=f"{setup.title}, n = {result.n:,}, k = {region.k}, eps = {privacy.eps:.3g} (run 0)\n"
        f"{setting_legend(privacy.setting)}",
        colorbar_label="share of individuals",
        extent=(region.lon_min, region.lon_max, region.lat_min, region.lat_max),
    )


def _write_maps(path: Path, setup: RegionSetup, results: Sequence[RoundResult]) -> Path:
    """Run 0's share per cell: the truth and each release per setting (``SETTING:PANEL``)."""
    firsts = [r for r in results if r.run == 0]
    columns = ["cell", "row", "column", "true_count"]
    columns += [f"{r.privacy.setting}:{panel}" for r in firsts for panel in PANELS[1:]]
    rows = []
    for cell in range(setup.grid.k):
        row, column = divmod(cell, setup.grid.columns)
        entry: dict[str, Any] = {"cell": cell, "row": row, "column": column}
        entry["true_count"] = int(firsts[0].truth[cell])
        for result in firsts:
            for panel in PANELS[1:]:
                entry[f"{result.privacy.setting}:{panel}"] = float(result.shares[panel][cell])
        rows.append(entry)
    return write_csv(path, columns, rows)


def _summary(
    context: ExperimentContext,
    name: str,
    setup: RegionSetup,
    population: Population,
    plans: Sequence[SettingPrivacy],
    results: Sequence[RoundResult],
    files: Sequence[Path],
) -> str:
    runs = len(results) // len(plans)
    lines = [
        f"# {name}: {setup.title}, the distribution estimated at eps = {EPS:g} "
        f"(the paper's Fig. {name[-1]})",
        "",
        f"All N = {population.n:,} individuals, {runs} run(s) per setting; the heat maps show "
        "run 0 on one colour scale (true, Gaussian, raw shuffle, shuffle+INV). The paper shows "
        "one release per mechanism and states no TV for these figures; it says the Gaussian "
        "approximates the original distribution 'slightly better than the shuffle+INV in all "
        "cases, but it is comparable'.",
        "",
        randomness_text(context),
        "",
        rounds_text(context),
        "",
        *data_lines({setup: population}),
        "## Settings and TV distance (median over runs)",
        "",
        "| setting | eps0 | Gaussian (eps, delta) | shuffle valid (eps, delta) | "
        + " | ".join(f"TV {key}" for key in ESTIMATORS)
        + " | Gaussian / shuffle+INV |",
        "|---|---|---|---|" + "---|" * len(ESTIMATORS) + "---|",
    ]
    for plan in plans:
        tv = {key: tv_values(results, key, setting=plan.setting) for key in ESTIMATORS}
        ratio = float(np.median(tv["Gaussian"])) / float(np.median(tv["shuffle+INV"]))
        shuffle_delta = max(r.shuffle_delta for r in results if r.privacy.setting == plan.setting)
        lines.append(
            f"| {plan.setting} | {plan.eps0:.4g} | ({plan.eps:.3g}, {plan.gaussian_delta:.3g}) | "
            f"({plan.eps:.3g}, {fmt(shuffle_delta, '.3g')}) | "
            + " | ".join(median_text(tv[key], ".4g") for key in ESTIMATORS)
            + f" | {ratio:.3g} |"
        )
    lines += ["", "Settings (as `settings.py` states them):", ""]
    lines += [f"- `{plan.setting}`: {plan.note}" for plan in plans]
    lines += ["", "Files: " + ", ".join(f"`{p.name}`" for p in files) + ".", ""]
    return "\n".join(lines)
