"""One run of the synthetic utility comparison (Section V.C of the seed paper): what ``fig-2`` and
``table-5`` share.

Data: N(0, 2) (variance 2) cut into k = 15 equal bins over +-3 standard deviations, the tails
folded into the end bins (:func:`shuffledp.simulations.data.datasets.synthetic_values`); a fresh
data set of n values per run. The paper's x0 (1-based, Table V) is our bin x0 - 1: x0 = 1 is the
lower tail bin (probability 0.0047), x0 = 8 the mode (0.159).

Per run and on the same data, every setting of :mod:`.settings` (eps = :data:`EPS` = 4, the
paper's eps for Fig. 2 and Table V):

* ``paper``: eps0 = eps = 4; the Gaussian at (4, delta_paper), delta_paper from the printed
  formula (eq. 10: the maximum over the x0 present, each with nx0 = its count - 1; for Table V
  per x0, one delta per x0), 1e-6 where that is 0 (it is, at eps >= eps0);
* ``honest``: eps0 calibrated so that the shuffle's tight delta_upper at eps = 4 is <= 1e-6; the
  Gaussian at (4, 1e-6);
* ``amplified``: eps0 = 4; the Gaussian at the shuffle's tight eps at delta = 1e-6.

``paper`` and ``amplified`` share one shuffled round (both eps0 = 4); ``honest`` has its own.
Each round runs on the fast path (:mod:`.fastpath`) or, with ``--pipeline``, through the real
pipeline; the central Gaussians are drawn here from the true counts
(:func:`shuffledp.analyzer.baseline.gaussian_baseline`), one release per distinct (eps, delta):
``paper`` and ``honest`` both put it at (4, 1e-6) here, so they share one release per run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from shuffledp.analyzer.baseline import GaussianBaseline, gaussian_baseline
from shuffledp.randomness import SeededRandom, SystemRandom
from shuffledp.simulations.data.datasets import synthetic_values
from shuffledp.simulations.experiments.base import ExperimentContext
from shuffledp.simulations.experiments.fastpath import (
    RoundSpec,
    run_spec,
    run_specs_through_pipeline,
)
from shuffledp.simulations.experiments.runner import repetition_seed
from shuffledp.simulations.experiments.settings import (
    SETTINGS,
    SettingPrivacy,
    amplified_privacy,
    honest_privacy,
    paper_privacy,
)

__all__ = [
    "DATASET_LABEL",
    "EPS",
    "SETTINGS",
    "K",
    "Plan",
    "Point",
    "plan_for",
    "randomness_text",
    "run_points",
]

K = 15
#: The paper's eps (and eps0) for Fig. 2 and Table V.
EPS = 4.0
DATASET_LABEL = "synthetic: N(0, 2) (variance 2) in k = 15 equal bins over +-3 sd"


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """The privacy of the settings that do not depend on the data, for n users (computed once
    per n). ``paper`` depends on the data (the printed formula's nx0) and is made per run."""

    n: int
    honest: SettingPrivacy
    amplified: SettingPrivacy


def plan_for(n: int) -> Plan:
    """The :class:`Plan` of n (top-level: it runs in worker processes)."""
    return Plan(n=n, honest=honest_privacy(n, K, EPS), amplified=amplified_privacy(n, K, EPS))


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    """One (n, run). ``seed``: its own seed (None: the OS CSPRNG). ``per_x0``: also give the
    paper setting's Gaussian per x0 (Table V: one delta per primary input)."""

    plan: Plan
    run: int
    seed: int | None
    per_x0: bool = False


def _values(point: Point) -> npt.NDArray[np.int64]:
    seed = repetition_seed(point.seed, 0) if point.seed is not None else None
    source = SystemRandom() if seed is None else SeededRandom(seed)
    return synthetic_values(point.plan.n, K, source)


def _sub_seed(point: Point, index: int) -> int | None:
    return None if point.seed is None else repetition_seed(point.seed, index)


def _specs(point: Point, values: npt.NDArray[np.int64]) -> tuple[RoundSpec, RoundSpec]:
    """The two shuffled rounds of a point: eps0 = EPS (paper, amplified) and the honest eps0."""
    shared = RoundSpec(
        values=values, k=K, eps0=EPS, eps=EPS, seed=_sub_seed(point, 1), label=DATASET_LABEL
    )
    honest = RoundSpec(
        values=values,
        k=K,
        eps0=point.plan.honest.eps0,
        eps=EPS,
        seed=_sub_seed(point, 2),
        label=DATASET_LABEL,
    )
    return shared, honest


def _gaussian_state(point: Point) -> np.random.Generator | None:
    seed = _sub_seed(point, 3)
    return None if seed is None else np.random.default_rng(seed)


def _paper(point: Point, truth: npt.NDArray[np.int64]) -> tuple[SettingPrivacy, list[float]]:
    """The paper setting of this data set (eq. 10 over the x0 present, nx0 = count - 1), and,
    for Table V, the Gaussian's delta per x0 (a bin nobody holds gets the eq. 10 value)."""
    present = [int(c) - 1 for c in truth if c > 0]
    paper = paper_privacy(point.plan.n, K, EPS, present)
    if not point.per_x0:
        return paper, [paper.gaussian_delta] * K
    per_x0 = [
        paper_privacy(point.plan.n, K, EPS, [int(c) - 1]).gaussian_delta if c > 0 else
        paper.gaussian_delta
        for c in truth
    ]  # fmt: skip
    return paper, per_x0


def _releases(
    truth: npt.NDArray[np.int64], guarantees: Sequence[tuple[float, float]], state: Any
) -> dict[tuple[float, float], GaussianBaseline]:
    """One Gaussian release per distinct (eps, delta), drawn in sorted order (reproducible)."""
    return {
        guarantee: gaussian_baseline(truth, guarantee[0], guarantee[1], random_state=state)
        for guarantee in sorted(set(guarantees))
    }


def rows_of_point(point: Point, reports: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of one point (one per setting) from its two shuffled rounds' reports."""
    shared, honest_report = reports
    truth = np.asarray(shared["true_histogram"], dtype=np.int64)
    paper, per_x0 = _paper(point, truth)
    privacy = {"paper": paper, "honest": point.plan.honest, "amplified": point.plan.amplified}
    wanted = [(p.eps, p.gaussian_delta) for p in privacy.values()]
    wanted += [(EPS, delta) for delta in per_x0]
    releases = _releases(truth, wanted, _gaussian_state(point))
    rows = []
    for setting in SETTINGS:
        report = honest_report if setting == "honest" else shared
        setting_privacy = privacy[setting]
        release = releases[(setting_privacy.eps, setting_privacy.gaussian_delta)]
        row = _row(point, setting_privacy, report, truth, release)
        if setting == "paper":
            row["gaussian_delta_per_x0"] = per_x0
            row["gaussian_raw_error_per_x0"] = [
                _raw_error(releases[(EPS, delta)], truth, index)
                for index, delta in enumerate(per_x0)
            ]
            row["gaussian_sigma_per_x0"] = [float(releases[(EPS, d)].sigma) for d in per_x0]
        rows.append(row)
    return rows


def _raw_error(release: GaussianBaseline, truth: npt.NDArray[np.int64], index: int) -> float:
    return float(abs(release.noisy_counts[index] - truth[index]) / truth.sum())


def _row(
    point: Point,
    privacy: SettingPrivacy,
    report: dict[str, Any],
    truth: npt.NDArray[np.int64],
    release: GaussianBaseline,
) -> dict[str, Any]:
    """One setting's measurements of a point (plain data; CSV columns are picked from it)."""
    n = float(truth.sum())
    true_distribution = truth / n
    inv = np.asarray(report["estimate"]["distribution"], dtype=np.float64)
    tv = report["tv_distance"]
    return {
        "setting": privacy.setting,
        "n": point.plan.n,
        "run": point.run,
        "k": K,
        "eps0": float(report["eps0"]),
        "eps": privacy.eps,
        "gaussian_delta": privacy.gaussian_delta,
        "printed_delta": privacy.printed_delta,
        "shuffle_delta_upper": privacy.shuffle_delta_upper,
        "shuffle_delta_lower": privacy.shuffle_delta_lower,
        "tv_shuffle": float(tv["shuffle"]),
        "tv_shuffle_inv": float(tv["shuffle+INV"]),
        "tv_ibu": float(tv["IBU"]),
        "tv_gaussian": 0.5 * float(np.abs(release.estimate - true_distribution).sum()),
        "gaussian_sigma": float(release.sigma),
        "ibu_method": report.get("IBU_method"),
        "n_received": int(report["n_received"]),
        "path": report.get("path", "pipeline"),
        "randomness": report.get("randomness"),
        "note": privacy.note,
        "true_count_per_x0": [int(c) for c in truth],
        "inv_error_per_x0": [float(e) for e in np.abs(inv - true_distribution)],
        "gaussian_raw_error_per_x0": [float(e) for e in np.abs(release.noisy_counts - truth) / n],
        "gaussian_projected_error_per_x0": [
            float(e) for e in np.abs(release.estimate - true_distribution)
        ],
        "gaussian_delta_per_x0": [privacy.gaussian_delta] * K,
        "gaussian_sigma_per_x0": [float(release.sigma)] * K,
    }


def run_point(point: Point) -> list[dict[str, Any]]:
    """Every setting of one point on the fast path (top-level: it runs in worker processes)."""
    values = _values(point)
    return rows_of_point(point, [run_spec(spec) for spec in _specs(point, values)])


def run_points(
    context: ExperimentContext, name: str, ns: Sequence[int], runs: int, *, per_x0: bool
) -> tuple[list[Plan], list[dict[str, Any]]]:
    """Plans per n and the rows of every (n, run, setting), through ``context.repeat`` (fast
    path) or the real pipeline (``--pipeline``). Seeds: (n, run) -> repetition_seed."""
    plans = context.repeat(plan_for, list(ns), label=f"{name}: accountant")
    points = [
        Point(plan=plan, run=r, seed=repetition_seed(context.seed, plan.n, r), per_x0=per_x0)
        for plan in plans
        for r in range(runs)
    ]
    if not context.pipeline:
        per_point = context.repeat(run_point, points, label=f"{name}: rounds")
        return plans, [row for rows in per_point for row in rows]
    specs = [spec for point in points for spec in _specs(point, _values(point))]
    reports = run_specs_through_pipeline(specs, quiet=context.quiet, label=f"{name}: pipeline")
    rows = []
    for index, point in enumerate(points):
        rows += rows_of_point(point, reports[2 * index : 2 * index + 2])
    return plans, rows


def randomness_text(context: ExperimentContext) -> str:
    """What drove the data, the shuffles and the Gaussian noise (for the summaries)."""
    if context.seed is None:
        return (
            "the OS CSPRNG (no --seed): data, k-RR, permutations and Gaussian noise are not "
            "reproducible"
        )
    return (
        f"seeded from --seed {context.seed}: each (n, run) gets SeedSequence(seed, spawn_key=(n, "
        "run)), with independent streams for the data, the eps0 = 4 round, the honest round "
        "and the Gaussian noise; reproducible whatever --workers is, not a privacy guarantee"
    )


def path_text(context: ExperimentContext) -> str:
    """Which path the shuffled rounds took (for the summaries)."""
    if context.pipeline:
        return "the real pipeline (--pipeline: broker, onion encryption, 3 hops)"
    return (
        "the fast in-process path (the clients' k-RR, the hops' permutation, the analyzer's "
        "report; no broker or crypto)"
    )
