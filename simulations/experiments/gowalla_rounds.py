"""One round of the Gowalla experiments: n individuals drawn from a region, shuffled k-RR and the
central Gaussian at one setting's privacy, every estimator's distribution and TV distance.

A :class:`RoundTask` is plain data (it may run in another process): the population, n, the
setting's :class:`~shuffledp.simulations.experiments.settings.SettingPrivacy` and two seeds (the
draw of individuals; the round's k-RR, permutation and Gaussian noise). :func:`run_round`:

1. draws n individuals uniformly without replacement (all of them when n = N);
2. runs the round on the fast path (:func:`~shuffledp.simulations.experiments.fastpath.run_spec`:
   the clients' k-RR at the setting's eps0, the hops' permutation, the analyzer's report with the
   tight delta bracket at the setting's eps): ``shuffle`` (raw normalised counts), ``shuffle+INV``
   (matrix inversion and projection onto the simplex), ``IBU``;
3. releases the true histogram with the analytic Gaussian
   (:func:`~shuffledp.analyzer.baseline.gaussian_baseline`, L2 sensitivity sqrt 2) at the
   setting's (eps, gaussian_delta), from the round's seeded baseline stream (or the OS CSPRNG):
   ``Gaussian`` is its noisy histogram / n projected onto the simplex.

TV distances are against the round's own truth (the histogram of its n individuals). With
``--pipeline`` (:func:`run_rounds`) step 2 goes through the real pipeline instead, one round
after the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from shuffledp.analyzer.baseline import gaussian_baseline
from shuffledp.analyzer.estimators import raw_normalised
from shuffledp.analyzer.metrics import tv_distance
from shuffledp.errors import InvalidParameterError
from shuffledp.simulations.experiments.base import ExperimentContext
from shuffledp.simulations.experiments.fastpath import (
    RoundSpec,
    run_spec,
    run_specs_through_pipeline,
    spec_sources,
)
from shuffledp.simulations.experiments.gowalla_data import draw_subset
from shuffledp.simulations.experiments.settings import (
    SettingPrivacy,
    amplified_privacy,
    honest_privacy,
    paper_privacy,
)

__all__ = [
    "ESTIMATORS",
    "ROUND_COLUMNS",
    "PlanRequest",
    "RoundResult",
    "RoundTask",
    "finish_round",
    "make_plan",
    "run_round",
    "run_rounds",
    "task_spec",
]

#: Estimator (figure label) -> CSV column of its TV distance.
ESTIMATORS: dict[str, str] = {
    "Gaussian": "tv_gaussian",
    "shuffle": "tv_shuffle",
    "shuffle+INV": "tv_shuffle_inv",
    "IBU": "tv_ibu",
}

#: The CSV columns of one round (:meth:`RoundResult.row`).
ROUND_COLUMNS: tuple[str, ...] = (
    "region",
    "setting",
    "n",
    "run",
    "k",
    "eps",
    "eps0",
    "shuffle_delta",
    "shuffle_delta_lower",
    "gaussian_delta",
    "gaussian_sigma",
    *ESTIMATORS.values(),
    "ibu_method",
    "randomness",
    "path",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRequest:
    """One setting's privacy for n individuals in k cells at the paper's eps (computed in the
    workers; for ``amplified`` that eps is k-RR's eps0 and the Gaussian gets the shuffle's eps).
    ``expected_counts``: individuals per cell expected among the n (the paper setting's eq. 10
    maximises its printed formula over x0 with n_x0 = count - 1)."""

    setting: str
    n: int
    k: int
    eps: float
    expected_counts: tuple[int, ...] = ()


def make_plan(request: PlanRequest) -> SettingPrivacy:
    """The :class:`SettingPrivacy` of a request (top-level: it runs in worker processes)."""
    if request.setting == "honest":
        return honest_privacy(request.n, request.k, request.eps)
    if request.setting == "amplified":
        return amplified_privacy(request.n, request.k, request.eps)
    if request.setting == "paper":
        others = tuple(max(count - 1, 0) for count in request.expected_counts if count > 0)
        return paper_privacy(request.n, request.k, request.eps, others or (0,))
    raise InvalidParameterError(
        f"setting must be 'paper', 'honest' or 'amplified', got {request.setting!r}"
    )


def expected_counts(counts: npt.NDArray[np.int64], n: int) -> tuple[int, ...]:
    """Individuals per cell expected in a random subset of n (rounded)."""
    total = int(counts.sum())
    return tuple(round(int(c) * n / total) for c in counts)


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundTask:
    """One round (module docstring). ``region``: the setup's name (for the CSV)."""

    region: str
    population: npt.NDArray[np.int64]
    n: int
    run: int
    privacy: SettingPrivacy
    subset_seed: int | None
    seed: int | None
    label: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundResult:
    """What one round gives: its privacy, each estimator's distribution (``shares``) and TV,
    the truth (counts per cell) and the Gaussian's noisy counts (the paper's H, before the
    simplex projection)."""

    region: str
    run: int
    privacy: SettingPrivacy
    truth: npt.NDArray[np.int64]
    shares: dict[str, npt.NDArray[np.float64]]
    gaussian_noisy: npt.NDArray[np.float64]
    gaussian_sigma: float
    shuffle_delta: float
    shuffle_delta_lower: float
    ibu_method: str
    randomness: str
    path: str = "fast"

    @property
    def n(self) -> int:
        return int(self.truth.sum())

    @property
    def tv(self) -> dict[str, float]:
        """TV distance of each estimator to the round's truth."""
        true_share = self.truth / self.n
        return {key: float(tv_distance(self.shares[key], true_share)) for key in ESTIMATORS}

    def row(self) -> dict[str, Any]:
        """The round's CSV row (:data:`ROUND_COLUMNS`)."""
        tv = self.tv
        return {
            "region": self.region,
            "setting": self.privacy.setting,
            "n": self.n,
            "run": self.run,
            "k": self.privacy.k,
            "eps": self.privacy.eps,
            "eps0": self.privacy.eps0,
            "shuffle_delta": self.shuffle_delta,
            "shuffle_delta_lower": self.shuffle_delta_lower,
            "gaussian_delta": self.privacy.gaussian_delta,
            "gaussian_sigma": self.gaussian_sigma,
            **{column: tv[key] for key, column in ESTIMATORS.items()},
            "ibu_method": self.ibu_method,
            "randomness": self.randomness,
            "path": self.path,
        }


def task_spec(task: RoundTask) -> RoundSpec:
    """The round's :class:`RoundSpec`: its n individuals, k-RR at eps0, accounted at eps."""
    privacy = task.privacy
    values = draw_subset(task.population, task.n, task.subset_seed)
    return RoundSpec(
        values=values, k=privacy.k, eps0=privacy.eps0, eps=privacy.eps, seed=task.seed,
        label=task.label,
    )  # fmt: skip


def run_round(task: RoundTask) -> RoundResult:
    """One round on the fast path (module docstring; a top-level function: it pickles)."""
    return finish_round(task, run_spec(task_spec(task)))


def run_rounds(
    context: ExperimentContext, tasks: Sequence[RoundTask], label: str
) -> list[RoundResult]:
    """Every round: on the fast path through ``context.repeat``, or with ``--pipeline`` through
    the real pipeline (broker, onion encryption, 3 hops), one after the other (slow: about
    2,700 reports/s; use it with ``--quick``)."""
    if not context.pipeline:
        return context.repeat(run_round, tasks, label=label)
    specs = [task_spec(task) for task in tasks]
    reports = run_specs_through_pipeline(specs, quiet=context.quiet, label=label)
    return [finish_round(task, report) for task, report in zip(tasks, reports, strict=True)]


def finish_round(task: RoundTask, report: dict[str, Any]) -> RoundResult:
    """The :class:`RoundResult` of a round from its report (fast path or pipeline): the
    estimators' distributions and the Gaussian's release at the setting's (eps, delta)."""
    privacy = task.privacy
    truth = np.asarray(report["true_histogram"], dtype=np.int64)
    state = spec_sources(task.seed)[1] if task.seed is not None else None
    release = gaussian_baseline(truth, privacy.eps, privacy.gaussian_delta, random_state=state)
    shares = {
        "Gaussian": np.asarray(release.estimate, dtype=np.float64),
        "shuffle": raw_normalised(np.asarray(report["histogram"], dtype=np.int64)),
        "shuffle+INV": np.asarray(report["estimate"]["distribution"], dtype=np.float64),
        "IBU": np.asarray(report["IBU_distribution"], dtype=np.float64),
    }
    section = report["privacy"]
    return RoundResult(
        region=task.region,
        run=task.run,
        privacy=privacy,
        truth=truth,
        shares=shares,
        gaussian_noisy=np.asarray(release.noisy_counts, dtype=np.float64),
        gaussian_sigma=float(release.sigma),
        shuffle_delta=float(section["delta"]),
        shuffle_delta_lower=float(section["delta_lower"]),
        ibu_method=str(report.get("IBU_method")),
        randomness=str(report.get("randomness")),
        path=str(report.get("path", "pipeline")),
    )


def tv_values(results: Sequence[RoundResult], estimator: str, **match: Any) -> list[float]:
    """The TV distances of ``estimator`` over the results whose privacy fields (setting, n, eps)
    or own fields equal ``match``."""
    picked = []
    for result in results:
        fields = {"setting": result.privacy.setting, "eps": result.privacy.eps, "n": result.n}
        if all(
            fields.get(key, getattr(result, key, None)) == value for key, value in match.items()
        ):
            picked.append(result.tv[estimator])
    return picked
