"""``synthetic-utility``: Fig. 2 of the seed paper, TV distance vs n, shuffle vs central Gaussian.

Data: the synthetic distribution of the paper's evaluation, N(0, 2) (variance 2) discretised
into k = 15 equal bins over +-3 standard deviations
(:func:`shuffledp.simulations.data.datasets.synthetic_values`; k = 15 is the project's default, the
paper's own k could not be checked here). Each (n, run) draws a fresh data set of n values.

For every n on a log grid and every run, one round through the fast path
(:mod:`.fastpath`; ``--pipeline``: through the real pipeline) gives the total variation
distance to the true distribution of the raw shuffled histogram (``shuffle``), of matrix
inversion + simplex projection (``shuffle+INV``), of the iterative Bayesian update (``IBU``)
and of the central analytic Gaussian mechanism (``gaussian``) at the same guarantee. Privacy is
always the valid guarantee (the accountant's delta_upper). Two settings, on the same data:

* ``paper``: eps0 = 4, the paper's eps = eps0 = 4. The honest delta at eps = 4 is reported per n
  (column ``delta_at_eps_eq_eps0``); it is exactly 0, because k-RR alone is (eps0, 0)-DP and
  the shuffle is post-processing. No Gaussian mechanism reaches delta = 0, so the Gaussian is
  compared at the tightest guarantee this shuffle meets with delta = 1e-6: eps = the valid
  eps(1e-6) of the shuffle at that n, delta = its delta_upper there (<= 1e-6).
* ``calibrated``: a target (eps, delta) = (1, 1e-6); eps0 = ``calibrate_eps0(n, k, 1, 1e-6)``
  (the largest eps0 whose valid guarantee meets it), and the Gaussian at eps = 1 and the
  shuffle's delta_upper at eps = 1 (<= 1e-6): both mechanisms at the same guarantee.

Outputs: ``synthetic-utility.csv`` (one row per setting, n and run; columns :data:`COLUMNS`),
one box-plot PNG per setting, and ``SUMMARY-synthetic-utility.md`` (medians, the privacy
parameters per n, the randomness used).
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shuffledp.randomness import SeededRandom, SystemRandom
from shuffledp.simulations.data.datasets import synthetic_values
from shuffledp.simulations.experiments.base import ExperimentContext, ExperimentOutput
from shuffledp.simulations.experiments.fastpath import (
    PAPER_EPS0,
    TARGET_DELTA,
    TARGET_EPS,
    PrivacyPlan,
    RoundSpec,
    privacy_plan,
    run_spec,
    run_specs_through_pipeline,
)
from shuffledp.simulations.experiments.runner import repetition_seed
from shuffledp.validation import require_int

__all__ = ["COLUMNS", "ESTIMATORS", "run"]

NAME = "synthetic-utility"
K = 15
#: n on a log grid, 10^3 .. 10^5 in steps of 10^(1/3).
FULL_NS = tuple(round(10 ** (3 + i / 3)) for i in range(7))
QUICK_NS = (1_000, 3_000)
FULL_RUNS = 20
QUICK_RUNS = 3
DATASET_LABEL = "synthetic: N(0, 2) (variance 2) in k equal bins over +-3 sd"

#: Report key -> CSV column, in the order of the figures.
ESTIMATORS: dict[str, str] = {
    "shuffle": "tv_shuffle",
    "shuffle+INV": "tv_shuffle_inv",
    "IBU": "tv_ibu",
    "gaussian": "tv_gaussian",
}
COLUMNS: tuple[str, ...] = (
    "setting",
    "n",
    "run",
    "k",
    "eps0",
    "eps",
    "delta",
    "delta_lower",
    "accountant_bound",
    "delta_at_eps_eq_eps0",
    *ESTIMATORS.values(),
    "gaussian_sigma",
    "ibu_method",
    "n_received",
    "path",
    "randomness",
)
SETTINGS: dict[str, str] = {
    "paper": "eps0 = 4 (the paper's eps = eps0 = 4); Gaussian at the shuffle's valid "
    "(eps(1e-6), delta)",
    "calibrated": f"target (eps, delta) = ({TARGET_EPS:g}, {TARGET_DELTA:g}); eps0 calibrated "
    "per n",
}


def _privacy_plan(n: int) -> PrivacyPlan:
    """The :class:`PrivacyPlan` of n at this experiment's k (top-level: runs in workers)."""
    return privacy_plan(n, K)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Point:
    plan: PrivacyPlan
    run: int
    seed: int | None


def _specs(point: _Point) -> dict[str, RoundSpec]:
    """The two rounds of one (n, run) on the same data: setting -> RoundSpec."""
    n = point.plan.n
    values_seed = repetition_seed(point.seed, 0)
    source = SystemRandom() if values_seed is None else SeededRandom(values_seed)
    values = synthetic_values(n, K, source)
    return {
        "paper": RoundSpec(
            values=values,
            k=K,
            eps0=PAPER_EPS0,
            target_delta=TARGET_DELTA,
            seed=repetition_seed(point.seed, 1),
            label=DATASET_LABEL,
            inverted=point.plan.paper,
        ),
        "calibrated": RoundSpec(
            values=values,
            k=K,
            eps0=point.plan.calibrated_eps0,
            target_delta=TARGET_DELTA,
            eps=TARGET_EPS,
            seed=repetition_seed(point.seed, 2),
            label=DATASET_LABEL,
        ),
    }


def _run_point(point: _Point) -> list[dict[str, Any]]:
    """Both settings of one (n, run) on the fast path: two CSV rows."""
    return [_row(setting, point, run_spec(spec)) for setting, spec in _specs(point).items()]


def _row(setting: str, point: _Point, report: dict[str, Any]) -> dict[str, Any]:
    privacy = report["privacy"]
    tv = report.get("tv_distance", {})
    baseline = report.get("baseline", {})
    row: dict[str, Any] = {
        "setting": setting,
        "n": point.plan.n,
        "run": point.run,
        "k": report["k"],
        "eps0": report["eps0"],
        "eps": privacy.get("eps"),
        "delta": privacy.get("delta"),
        "delta_lower": privacy.get("delta_lower"),
        "accountant_bound": privacy.get("bound"),
        "delta_at_eps_eq_eps0": point.plan.paper_delta_at_eps0 if setting == "paper" else None,
        "gaussian_sigma": baseline.get("sigma"),
        "ibu_method": report.get("IBU_method"),
        "n_received": report["n_received"],
        "path": report.get("path", "pipeline"),
        "randomness": report.get("randomness"),
    }
    for key, column in ESTIMATORS.items():
        row[column] = tv.get(key)
    return row


def run(context: ExperimentContext) -> ExperimentOutput:
    """Run the sweep (module docstring) and write its CSV, figures and summary."""
    ns = QUICK_NS if context.quick else FULL_NS
    runs = (
        context.runs if context.runs is not None else (QUICK_RUNS if context.quick else FULL_RUNS)
    )
    require_int("runs", runs, 1)
    plans = context.repeat(_privacy_plan, list(ns), label=f"{NAME}: accountant")
    points = [
        _Point(plan=plan, run=r, seed=repetition_seed(context.seed, plan.n, r))
        for plan in plans
        for r in range(runs)
    ]
    if context.pipeline:
        specs = [
            (point, setting, spec) for point in points for setting, spec in _specs(point).items()
        ]
        reports = run_specs_through_pipeline(
            [spec for _, _, spec in specs], quiet=context.quiet, label=f"{NAME}: pipeline rounds"
        )
        rows = [
            _row(setting, point, report)
            for (point, setting, _), report in zip(specs, reports, strict=True)
        ]
    else:
        per_point = context.repeat(_run_point, points, label=f"{NAME}: rounds")
        rows = [row for point_rows in per_point for row in point_rows]

    out = context.out
    csv_path = out / f"{NAME}.csv"
    _write_csv(csv_path, rows)
    figures = [_figure(out, setting, rows, ns) for setting in SETTINGS]
    summary = _summary(context, plans, rows, ns, runs, csv_path, figures)
    summary_path = out / f"SUMMARY-{NAME}.md"
    summary_path.write_text(summary, encoding="utf-8")
    return ExperimentOutput(name=NAME, files=(csv_path, *figures, summary_path), summary=summary)


def _write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(COLUMNS))
        writer.writeheader()
        for row in rows:
            writer.writerow({key: _cell(row.get(key)) for key in COLUMNS})


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return value


def _values(rows: Sequence[dict[str, Any]], setting: str, n: int, column: str) -> list[float]:
    return [
        float(row[column])
        for row in rows
        if row["setting"] == setting and row["n"] == n and row[column] is not None
    ]


def _figure(out: Path, setting: str, rows: Sequence[dict[str, Any]], ns: Sequence[int]) -> Path:
    from shuffledp.simulations.experiments.plots import box_plot

    data = {
        label: [_values(rows, setting, n, column) or [math.nan] for n in ns]
        for label, column in ESTIMATORS.items()
    }
    return box_plot(
        out / f"{NAME}-{setting}.png",
        [f"{n:,}" for n in ns],
        data,
        xlabel="n (users)",
        ylabel="TV distance to the true distribution",
        title=f"{NAME}, k = {K}: setting '{setting}'\n{SETTINGS[setting]}",
        logy=True,
    )


def _median(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.4g}" if values else "n/a"


def _summary(
    context: ExperimentContext,
    plans: Sequence[PrivacyPlan],
    rows: Sequence[dict[str, Any]],
    ns: Sequence[int],
    runs: int,
    csv_path: Path,
    figures: Sequence[Path],
) -> str:
    path = (
        "the real pipeline (--pipeline: broker, onion encryption, 3 hops)"
        if context.pipeline
        else (
            "the fast in-process path (the clients' k-RR, the hops' permutation, the analyzer's "
            "report; no broker or crypto)"
        )
    )
    if context.seed is None:
        randomness = (
            "the OS CSPRNG (no --seed): k-RR, permutations, data and Gaussian noise are not "
            "reproducible"
        )
    else:
        randomness = (
            f"seeded from --seed {context.seed}: each (n, run) gets "
            "SeedSequence(seed, spawn_key=(n, run)), with independent streams for the data, each "
            "setting's k-RR and permutation, and the Gaussian noise; reproducible, not a privacy "
            "guarantee"
        )
    zero = all(plan.paper_delta_at_eps0 == 0.0 for plan in plans)
    lines = [
        f"# {NAME}",
        "",
        f"Fig. 2 of the seed paper: TV distance to the true distribution vs n, k = {K}, data "
        f"{DATASET_LABEL}; {runs} run(s) per n (fresh data each run), through {path}.",
        "",
        f"Randomness: {randomness}.",
        "",
        "Privacy is the valid guarantee everywhere (the tight accountant's delta_upper).",
        "",
        "## Privacy parameters per n",
        "",
        "| n | paper: eps0 | paper: delta at eps = eps0 = 4 | paper: eps at delta = 1e-6 "
        "(valid) | calibrated: eps0 for (1, 1e-6) |",
        "|---|---|---|---|---|",
    ]
    for plan in plans:
        lines.append(
            f"| {plan.n:,} | {PAPER_EPS0:g} | {plan.paper_delta_at_eps0:.3g} "
            f"(lower {plan.paper_delta_lower_at_eps0:.3g}) | {plan.paper.eps:.4g} "
            f"(true eps >= {plan.paper.eps_lower:.4g}) | {plan.calibrated_eps0:.4g} |"
        )
    lines += [
        "",
        (
            "At eps = eps0 = 4 the honest delta is exactly 0 for every n: k-RR alone is "
            "(eps0, 0)-DP and the shuffle is post-processing."
            if zero
            else "At eps = eps0 = 4 the honest delta is as listed."
        )
        + " No Gaussian mechanism reaches delta = 0, so in the `paper` setting the central "
        "Gaussian gets the tightest guarantee this shuffle meets with delta = 1e-6: eps = the "
        "valid eps(1e-6) above and delta = the shuffle's delta_upper there. In the `calibrated` "
        f"setting both mechanisms meet (eps, delta) = ({TARGET_EPS:g}, {TARGET_DELTA:g}): eps0 "
        "is the largest value whose valid guarantee meets it, and the Gaussian gets eps = 1 and "
        "the shuffle's delta_upper at eps = 1.",
        "",
    ]
    for setting, description in SETTINGS.items():
        lines += [
            f"## Setting `{setting}`: {description}",
            "",
            "Median TV distance over runs:",
            "",
            "| n | eps0 | eps | delta (valid) | " + " | ".join(ESTIMATORS) + " |",
            "|---|---|---|---|" + "---|" * len(ESTIMATORS),
        ]
        for n in ns:
            picked = [row for row in rows if row["setting"] == setting and row["n"] == n]
            if not picked:
                continue
            first = picked[0]
            deltas = [float(row["delta"]) for row in picked if row["delta"] is not None]
            medians = " | ".join(
                _median(_values(rows, setting, n, column)) for column in ESTIMATORS.values()
            )
            eps_text = "n/a" if first["eps"] is None else f"{float(first['eps']):.4g}"
            delta_text = f"<= {max(deltas):.3g}" if deltas else "n/a"
            lines.append(
                f"| {n:,} | {float(first['eps0']):.4g} | {eps_text} | {delta_text} | {medians} |"
            )
        lines.append("")
    lines += [
        "Estimators: `shuffle` = raw normalised counts; `shuffle+INV` = matrix inversion and "
        "projection onto the simplex; `IBU` = iterative Bayesian update (EM); `gaussian` = the "
        "central analytic Gaussian on the true histogram (L2 sensitivity sqrt 2), projected onto "
        "the simplex.",
        "",
        "Files: " + ", ".join(f"`{p.name}`" for p in (csv_path, *figures)) + ".",
        "",
    ]
    return "\n".join(lines)
