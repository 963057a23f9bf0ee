"""``gowalla-sf`` and ``gowalla-paris``: shuffle vs central Gaussian on real check-ins.

The seed paper's Figs. 4-7 and Tables V-VI on Gowalla check-ins in San Francisco and Paris: heat
maps of the true distribution and of each release on the map grid, the total variation (TV)
distance to the true distribution vs n and vs eps, and per-location ("individual-specific")
utilities.

What the paper's figures and tables show exactly could not be checked here: the library's stored
copies of arXiv 2205.08858 reach only its abstract, not its evaluation section. The definitions
below are this project's, stated so a reader can judge them:

* **Data.** One value per individual: the grid cell of the individual's location
  (:mod:`shuffledp.simulations.data.regions`: SF 24 x 17 = 408 cells, Paris 16 x 12 = 192 cells, row-major
  from the south-west). The file is found by :func:`find_dataset`: ``--dataset``, else the slice
  in ``--data-dir``, else the full SNAP file cached by ``shuffledp data fetch gowalla``, else the
  lat,lon CSV slice in the sibling ``shared/data`` (``gowalla-sf-latlon.csv``,
  ``gowalla-paris-latlon.csv``). The slices have no user column, so every row is one individual
  (one report), as in the files' source (blitzwas/PRIVIC). A SNAP file (the cached
  ``loc-gowalla_totalCheckins.txt.gz``, or e.g. ``gowalla-paris-checkins.txt``) gives one report
  per user instead: the cell of the user's most recent check-in in the region (the rule of
  ``shuffledp simulate``).
* **TV vs n.** For each n on a log grid up to all N individuals (the last point is all of them)
  and each run, n individuals are drawn uniformly at random without replacement; both settings
  below run on the same draw, one round each, through the fast path (:mod:`.fastpath`: the
  clients' k-RR, the hops' permutation, the analyzer's report) or, with ``--pipeline``, through
  the real pipeline. The truth of a round is the histogram of its n individuals.
* **Settings** (as in ``synthetic-utility``; privacy is always the valid guarantee,
  the tight accountant's delta_upper):
  ``paper``: eps0 = 4, the paper's eps = eps0 = 4, whose honest delta is reported (exactly 0:
  k-RR alone is (eps0, 0)-DP and the shuffle is post-processing); as no Gaussian mechanism has
  delta = 0, both are compared at the tightest guarantee the shuffle meets with delta = 1e-6,
  eps = its valid eps(1e-6) and delta = its delta_upper there. ``calibrated``: target (eps,
  delta) = (1, 1e-6), eps0 = ``calibrate_eps0(n, k, 1, 1e-6)`` (the largest eps0 whose valid
  guarantee meets it), the Gaussian at eps = 1 and the shuffle's delta_upper at eps = 1.
* **TV vs eps.** At n = N (all individuals), for each target eps on a grid at delta = 1e-6,
  eps0 is calibrated as above and both mechanisms are compared at (eps, the shuffle's
  delta_upper at eps).
* **Estimators.** ``shuffle`` (raw normalised counts), ``shuffle+INV`` (matrix inversion and
  projection onto the simplex), ``IBU`` (iterative Bayesian update; the analyzer falls back to
  the closed-form k-RR MLE and says so in ``ibu_method`` if it does not converge) and
  ``gaussian`` (the central analytic Gaussian on the true histogram, projected onto the simplex).
  The Gaussian release behind every Gaussian number (TV, heat map, per-cell errors) is one draw
  of :func:`shuffledp.analyzer.baseline.gaussian_baseline` at the report's (eps, delta) made by
  this module, so that TV and per-cell numbers come from the same release; with ``--seed`` on
  the fast path it is the report's own draw (the same seeded stream), without it an independent
  draw from the OS CSPRNG.
* **Heat maps.** Run 0 at the largest n of the sweep (all individuals on the fast path), one PNG
  per setting, panels side by side on one colour scale: true, Gaussian, raw shuffle,
  shuffle+INV, IBU (shares of individuals per cell, north up).
* **Individual-specific utility** (Tables V-VI here): how well a release answers one person
  asking about one location. For selected cells (the most visited, a median one among the
  non-empty cells, the least visited non-empty one, an empty one, and a few named places), at the
  largest n and in both settings: the true count and share of the cell, and per estimator over
  runs the median and 90th percentile of the absolute error of the cell's estimated count
  (n |p_hat - p|, in individuals) and the median relative error |p_hat - p| / p (undefined for an
  empty cell).

Outputs (prefix NAME = ``gowalla-sf`` or ``gowalla-paris``): ``NAME-tv-vs-n.csv``,
``NAME-tv-vs-eps.csv``, ``NAME-cells.csv`` (per run and selected cell),
``NAME-individual-utility.csv``, ``NAME-heatmap-data.csv`` (every cell's true count and each
panel's share), the PNGs ``NAME-heatmap-{paper,calibrated}.png``,
``NAME-tv-vs-n-{paper,calibrated}.png``, ``NAME-tv-vs-eps.png``, and ``SUMMARY-NAME.md``.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from shuffledp.accountant import calibrate_eps0
from shuffledp.analyzer.baseline import gaussian_baseline
from shuffledp.analyzer.estimators import raw_normalised
from shuffledp.analyzer.metrics import tv_distance
from shuffledp.errors import InvalidParameterError
from shuffledp.randomness import SeededRandom, SystemRandom
from shuffledp.shuffler.permute import uniform_permutation
from shuffledp.simulations.data.checkins import (
    CheckInReader,
    CheckInReadError,
    LoadStats,
    load_checkin_arrays,
)
from shuffledp.simulations.data.fetch import (
    GOWALLA,
    FetchError,
    cache_dir,
    fetch_command,
    verify_cached,
)
from shuffledp.simulations.data.regions import PRESETS, Region
from shuffledp.simulations.experiments.base import (
    ExperimentContext,
    ExperimentError,
    ExperimentOutput,
)
from shuffledp.simulations.experiments.fastpath import (
    PAPER_EPS0,
    TARGET_DELTA,
    TARGET_EPS,
    EpsAtDelta,
    PrivacyPlan,
    RoundSpec,
    privacy_plan,
    run_spec,
    run_specs_through_pipeline,
    spec_sources,
)
from shuffledp.simulations.experiments.runner import repetition_seed
from shuffledp.validation import require_int

__all__ = [
    "CELL_COLUMNS",
    "EPS_COLUMNS",
    "ESTIMATORS",
    "EXPERIMENTS",
    "N_COLUMNS",
    "PAPER_EPS0",
    "PARIS",
    "SF",
    "TARGET_DELTA",
    "TARGET_EPS",
    "UTILITY_COLUMNS",
    "Outcome",
    "Population",
    "RegionExperiment",
    "SelectedCell",
    "Spot",
    "dataset_path",
    "find_dataset",
    "individual_utility",
    "load_population",
    "n_grid",
    "round_outcome",
    "run_paris",
    "run_region",
    "run_sf",
    "select_cells",
]

#: Target eps of the TV-vs-eps sweep (delta = TARGET_DELTA, eps0 calibrated per eps). The
#: quick grid contains TARGET_EPS, whose calibration the TV-vs-n sweep has already made at N.
FULL_EPS_GRID = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0)
QUICK_EPS_GRID = (0.5, 1.0)
#: n on a log grid, 10^3 .. 10^5 in steps of 10^(1/3); points above N / 1.25 are dropped and N
#: (all individuals) is always the last point. The quick grids are per region (RegionExperiment).
FULL_N_GRID = tuple(round(10 ** (3 + i / 3)) for i in range(7))
FULL_RUNS = 20
QUICK_RUNS = 2
#: With --pipeline one n only (every round goes through brokers and crypto, ~5 s per round of
#: 2,000 reports): the smaller of this and N.
PIPELINE_N = 2_000

#: Report key -> CSV column, in the order of the figures (as in ``synthetic-utility``).
ESTIMATORS: dict[str, str] = {
    "shuffle": "tv_shuffle",
    "shuffle+INV": "tv_shuffle_inv",
    "IBU": "tv_ibu",
    "gaussian": "tv_gaussian",
}
#: Heat-map panels: key -> caption.
PANELS: dict[str, str] = {
    "true": "true distribution",
    "gaussian": "central Gaussian",
    "shuffle": "shuffle (raw counts)",
    "shuffle+INV": "shuffle+INV",
    "IBU": "IBU",
}
SETTINGS: dict[str, str] = {
    "paper": "eps0 = 4 (the paper's eps = eps0 = 4); Gaussian at the shuffle's valid "
    "(eps(1e-6), delta)",
    "calibrated": f"target (eps, delta) = ({TARGET_EPS:g}, {TARGET_DELTA:g}); eps0 calibrated "
    "per n",
}
#: The settings as figure subtitles (short enough for one line).
FIGURE_SETTINGS: dict[str, str] = {
    "paper": "eps0 = 4; both at the shuffle's valid (eps(1e-6), delta)",
    "calibrated": f"eps0 calibrated to (eps, delta) = ({TARGET_EPS:g}, {TARGET_DELTA:g}) per n",
}
_PRIVACY_COLUMNS = (
    "k",
    "eps0",
    "eps",
    "delta",
    "delta_lower",
    "accountant_bound",
)
_ROUND_COLUMNS = (
    *ESTIMATORS.values(),
    "gaussian_eps",
    "gaussian_delta",
    "gaussian_sigma",
    "ibu_method",
    "n_received",
    "path",
    "randomness",
)
N_COLUMNS: tuple[str, ...] = (
    "setting",
    "n",
    "run",
    *_PRIVACY_COLUMNS,
    "delta_at_eps_eq_eps0",
    *_ROUND_COLUMNS,
)
EPS_COLUMNS: tuple[str, ...] = ("target_eps", "n", "run", *_PRIVACY_COLUMNS, *_ROUND_COLUMNS)
CELL_COLUMNS: tuple[str, ...] = (
    "setting",
    "n",
    "run",
    "cell",
    "label",
    "true_count",
    "true_share",
    "estimator",
    "estimate_share",
    "abs_error_count",
    "rel_error",
)
UTILITY_COLUMNS: tuple[str, ...] = (
    "setting",
    "n",
    "eps0",
    "eps",
    "delta",
    "cell",
    "label",
    "row",
    "column",
    "lat_centre",
    "lon_centre",
    "true_count",
    "true_share",
    "estimator",
    "runs",
    "median_estimate_share",
    "median_abs_error_count",
    "p90_abs_error_count",
    "median_rel_error",
)


# --- regions and data ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Spot:
    """A named place whose cell is one of the individual-utility cells (WGS84 degrees)."""

    name: str
    lat: float
    lon: float

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise InvalidParameterError(
                f"a spot's name must be a non-empty string, got {self.name!r}"
            )
        if not -90.0 <= self.lat <= 90.0:
            raise InvalidParameterError(f"lat must be in [-90, 90], got {self.lat!r}")
        if not -180.0 <= self.lon <= 180.0:
            raise InvalidParameterError(f"lon must be in [-180, 180], got {self.lon!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class RegionExperiment:
    """One region's experiment: its name, region preset, default data file and named places."""

    name: str
    region: str
    title: str
    default_file: str
    quick_ns: tuple[int, ...]
    spots: tuple[Spot, ...] = ()

    def __post_init__(self) -> None:
        if self.region not in PRESETS:
            raise InvalidParameterError(
                f"region must be one of {', '.join(sorted(PRESETS))}, got {self.region!r}"
            )
        if not self.quick_ns:
            raise InvalidParameterError("quick_ns must hold at least one n")
        for index, n in enumerate(self.quick_ns):
            require_int(f"quick_ns[{index}]", n, 2)


SF = RegionExperiment(
    name="gowalla-sf",
    region="sf",
    title="San Francisco",
    default_file="gowalla-sf-latlon.csv",
    # One n below N whose accountant calls are cheap (~1 s; some n take 10 s: the inversion's
    # cost varies with n), so that --quick stays well under a minute.
    quick_ns=(30_000,),
    spots=(
        Spot(name="Union Square", lat=37.7880, lon=-122.4075),
        Spot(name="Mission Dolores Park", lat=37.7596, lon=-122.4269),
        Spot(name="Golden Gate Park (de Young)", lat=37.7715, lon=-122.4687),
    ),
)
PARIS = RegionExperiment(
    name="gowalla-paris",
    region="paris",
    title="Paris",
    default_file="gowalla-paris-latlon.csv",
    quick_ns=(4_000,),
    spots=(
        Spot(name="Eiffel Tower", lat=48.8584, lon=2.2945),
        Spot(name="Louvre", lat=48.8606, lon=2.3376),
        Spot(name="Notre-Dame", lat=48.8530, lon=2.3499),
    ),
)
EXPERIMENTS: dict[str, RegionExperiment] = {SF.name: SF, PARIS.name: PARIS}


def _default_data_dir() -> Path:
    """The repository's sibling ``shared/data`` (this file is
    ``<repo>/simulations/experiments/gowalla_utility.py``, so parents[3] is the repo's parent)."""
    return Path(__file__).resolve().parents[3] / "shared" / "data"


def dataset_path(context: ExperimentContext, setup: RegionExperiment) -> Path:
    """The check-in file to read (:func:`find_dataset` with the context's options)."""
    return find_dataset(setup, context.options.get("dataset"), context.data_dir)


def find_dataset(setup: RegionExperiment, given: object, data_dir: Path | None) -> Path:
    """The check-in file to read, the first of: ``given`` (``--dataset``); ``setup.default_file``
    in ``data_dir`` (``--data-dir``); the SNAP file in the cache of ``shuffledp data fetch
    gowalla``, checked against its recorded SHA-256 and size; the slice in the repository's
    sibling ``shared/data`` (a development checkout). ExperimentError, one line naming the fetch
    command, if there is none (``shuffledp experiment`` asks before any experiment runs)."""
    if given is not None:
        if not isinstance(given, str | Path) or not str(given):
            raise ExperimentError(
                f"{setup.name}: options['dataset'] must be a file path, got {given!r}"
            )
        path = Path(given)
        if not path.is_file():
            raise ExperimentError(f"{setup.name}: the check-in file {path} does not exist")
        return path
    if data_dir is not None:
        path = data_dir / setup.default_file
        if not path.is_file():
            raise ExperimentError(
                f"{setup.name}: the check-in file {path} does not exist; pass --data-dir with "
                f"the folder holding {setup.default_file}, give another file (SNAP or lat,lon) "
                f"with --dataset FILE, or leave both out to use the file of `{fetch_command()}`"
            )
        return path
    try:
        cached = verify_cached(GOWALLA)
    except FetchError as exc:
        raise ExperimentError(f"{setup.name}: {exc}") from None
    if cached is not None:
        return cached
    slice_path = _default_data_dir() / setup.default_file
    if slice_path.is_file():
        return slice_path
    raise ExperimentError(
        f"{setup.name}: no check-in data: run `{fetch_command()}` (the SNAP file, "
        f"{GOWALLA.size or 0:,} bytes, into {cache_dir()}), or give --dataset FILE"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Population:
    """Every individual of a region in a check-in file: one cell each (``values``).

    ``has_users``: False for a lat,lon file (each row one individual), True for SNAP (each user
    one individual: the cell of the most recent check-in inside the region). ``inside`` /
    ``outside``: accepted check-ins inside / outside the region; ``stats``: the reader's counts.
    """

    path: Path
    region: Region
    values: npt.NDArray[np.int64]
    stats: LoadStats
    inside: int
    outside: int
    has_users: bool

    @property
    def n(self) -> int:
        return int(self.values.size)

    @property
    def counts(self) -> npt.NDArray[np.int64]:
        """Individuals per cell (length ``region.k``)."""
        return np.bincount(self.values, minlength=self.region.k).astype(np.int64)

    @property
    def noun(self) -> str:
        return "users" if self.has_users else "rows"


def load_population(path: Path, region: Region) -> Population:
    """Read ``path`` (SNAP or lat,lon, plain or gzip) and keep the individuals inside ``region``.

    ExperimentError (one line, naming the file) if it cannot be read or fewer than 2 individuals
    fall inside the region; broken lines are counted rejections, never errors.
    """
    try:
        reader = CheckInReader(path)
        arrays = load_checkin_arrays(reader, region)
    except CheckInReadError as exc:
        raise ExperimentError(str(exc)) from None
    values = arrays.most_recent_cells()
    if values.size < 2:
        raise ExperimentError(
            f"{path}: {values.size} individual(s) inside region {region.describe()}, at least 2 "
            f"are needed ({reader.stats.summary()}; {arrays.outside:,} outside the region)"
        )
    return Population(
        path=path,
        region=region,
        values=values.astype(np.int64),
        stats=reader.stats,
        inside=len(arrays),
        outside=arrays.outside,
        has_users=arrays.has_users,
    )


def n_grid(total: int, grid: Sequence[int], *, pipeline: bool = False) -> tuple[int, ...]:
    """The n of the TV-vs-n sweep for a population of ``total``: the points of ``grid`` up to
    total / 1.25 (so the last two are not nearly equal), then ``total``; with ``pipeline`` the
    one n min(PIPELINE_N, total)."""
    require_int("total", total, 2)
    if pipeline:
        return (min(PIPELINE_N, total),)
    return (*(n for n in sorted(set(grid)) if n * 1.25 <= total), total)


# --- the individual-utility cells ---------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectedCell:
    """A cell of the individual-utility table: ``label`` says why it was chosen (labels of one
    cell chosen for several reasons are joined with "; "); ``true_count``: individuals in it
    over the whole population."""

    cell: int
    label: str
    true_count: int


def select_cells(
    counts: npt.ArrayLike, region: Region, spots: Sequence[Spot] = ()
) -> tuple[SelectedCell, ...]:
    """The individual-utility cells of a population with ``counts`` individuals per cell.

    In this order: the most visited cell; the median non-empty cell (non-empty cells sorted by
    (count, cell), the one at index (m - 1) // 2 of m); the least visited non-empty cell; the first
    empty cell if there is one; each spot's cell (spots outside the region are skipped). Ties go
    to the lowest cell number. A cell chosen twice appears once, its labels joined.
    """
    arr = np.asarray(counts, dtype=np.int64)
    if arr.ndim != 1 or arr.size != region.k:
        raise InvalidParameterError(
            f"counts must have one entry per cell (k = {region.k}), got shape {arr.shape}"
        )
    if np.any(arr < 0) or int(arr.sum()) < 1:
        raise InvalidParameterError("counts must be >= 0 with at least one individual")
    chosen: dict[int, list[str]] = {}

    def add(cell: int, label: str) -> None:
        chosen.setdefault(int(cell), []).append(label)

    add(int(np.argmax(arr)), "most visited")
    nonempty = np.flatnonzero(arr > 0)
    by_count = nonempty[np.lexsort((nonempty, arr[nonempty]))]
    add(int(by_count[(by_count.size - 1) // 2]), "median non-empty")
    add(int(by_count[0]), "least visited non-empty")
    empty = np.flatnonzero(arr == 0)
    if empty.size:
        add(int(empty[0]), "empty")
    for spot in spots:
        cell = region.cell_of(spot.lat, spot.lon)
        if cell is not None:
            add(cell, spot.name)
    return tuple(
        SelectedCell(cell=cell, label="; ".join(labels), true_count=int(arr[cell]))
        for cell, labels in chosen.items()
    )


# --- the accountant's numbers -------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class EpsPlan:
    """One point of the TV-vs-eps sweep: eps0 = the largest meeting (target_eps, TARGET_DELTA)
    for n individuals."""

    n: int
    k: int
    target_eps: float
    eps0: float


@dataclass(frozen=True, slots=True, kw_only=True)
class _PlanRequest:
    n: int
    k: int
    target_eps: float | None  # None: a PrivacyPlan


def _make_plan(request: _PlanRequest) -> PrivacyPlan | EpsPlan:
    """The plan of one request (a top-level function: it runs in worker processes)."""
    n, k = request.n, request.k
    if request.target_eps is not None:
        return EpsPlan(
            n=n,
            k=k,
            target_eps=request.target_eps,
            eps0=calibrate_eps0(n, k, request.target_eps, TARGET_DELTA),
        )
    return privacy_plan(n, k)


# --- rounds -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Setting:
    """One round of a task: ``eps`` None = eps at TARGET_DELTA (with ``inverted``)."""

    name: str
    eps0: float
    eps: float | None
    inverted: EpsAtDelta | None
    seed: int | None
    target_eps: float | None = None
    delta_at_eps0: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Task:
    """The rounds of one (sweep point, run) on one draw of n individuals (plain data: it may
    run in another process). ``cells``: the individual-utility cells; ``keep_maps``: return
    every cell's estimates (the heat maps' run)."""

    sweep: str
    n: int
    run: int
    population: npt.NDArray[np.int64]
    k: int
    subsample_seed: int | None
    settings: tuple[_Setting, ...]
    cells: tuple[int, ...]
    keep_maps: bool
    label: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What one round contributes: its CSV row, the truth and each estimator's share at the
    selected cells, and (for the heat maps' run) every cell's shares per panel."""

    sweep: str
    setting: str
    n: int
    run: int
    row: dict[str, Any]
    cell_truth: npt.NDArray[np.int64]
    cell_estimates: dict[str, npt.NDArray[np.float64]]
    maps: dict[str, npt.NDArray[np.float64]] | None = field(default=None)


def _draw_values(task: _Task) -> npt.NDArray[np.int64]:
    """The task's n individuals: all of them when n = N, else a uniformly random subset without
    replacement (the first n of a uniform permutation), in population order."""
    population = np.asarray(task.population, dtype=np.int64)
    if task.n == population.size:
        return population
    if task.n > population.size:
        raise InvalidParameterError(
            f"n = {task.n} is more than the {population.size} individuals in the population"
        )
    source = SystemRandom() if task.subsample_seed is None else SeededRandom(task.subsample_seed)
    chosen = np.sort(uniform_permutation(int(population.size), source)[: task.n])
    values: npt.NDArray[np.int64] = population[chosen]
    return values


def _task_specs(task: _Task) -> list[RoundSpec]:
    values = _draw_values(task)
    return [
        RoundSpec(
            values=values,
            k=task.k,
            eps0=setting.eps0,
            target_delta=TARGET_DELTA,
            eps=setting.eps,
            seed=setting.seed,
            label=task.label,
            inverted=setting.inverted,
        )
        for setting in task.settings
    ]


def _run_task(task: _Task) -> list[Outcome]:
    """Every round of a task on the fast path (a top-level function: it pickles)."""
    return [
        round_outcome(
            run_spec(spec),
            spec,
            sweep=task.sweep,
            setting=setting.name,
            run=task.run,
            cells=task.cells,
            keep_maps=task.keep_maps,
            target_eps=setting.target_eps,
            delta_at_eps0=setting.delta_at_eps0,
        )
        for setting, spec in zip(task.settings, _task_specs(task), strict=True)
    ]


def round_outcome(
    report: Mapping[str, Any],
    spec: RoundSpec,
    *,
    sweep: str,
    setting: str,
    run: int,
    cells: Sequence[int],
    keep_maps: bool = False,
    target_eps: float | None = None,
    delta_at_eps0: float | None = None,
) -> Outcome:
    """The :class:`Outcome` of one round from its report (fast path or pipeline).

    The Gaussian release is drawn here (module docstring): ``gaussian_baseline`` on the report's
    true histogram at the report's baseline (eps, delta), with the round's seeded baseline
    stream (``spec_sources(spec.seed)``: on the fast path the very draw the report made) or the
    OS CSPRNG. No Gaussian (None / NaN) when the report has no baseline guarantee.
    """
    k = int(report["k"])
    truth = np.asarray(report["true_histogram"], dtype=np.int64)
    n = int(truth.sum())
    true_share = truth / n
    histogram = np.asarray(report["histogram"], dtype=np.int64)
    shares: dict[str, npt.NDArray[np.float64] | None] = {
        "shuffle": raw_normalised(histogram) if histogram.sum() > 0 else None,
        "shuffle+INV": _floats_or_none(report.get("estimate", {}).get("distribution")),
        "IBU": _floats_or_none(report.get("IBU_distribution")),
        "gaussian": None,
    }
    baseline = report.get("baseline", {})
    gaussian_eps = baseline.get("eps")
    gaussian_delta = baseline.get("delta")
    gaussian_sigma = None
    if gaussian_eps is not None and gaussian_delta is not None:
        state = spec_sources(spec.seed)[1] if spec.seed is not None else None
        release = gaussian_baseline(truth, gaussian_eps, gaussian_delta, random_state=state)
        shares["gaussian"] = release.estimate
        gaussian_sigma = float(release.sigma)
    privacy = report.get("privacy", {})
    row: dict[str, Any] = {
        "setting": setting,
        "target_eps": target_eps,
        "n": n,
        "run": run,
        "k": k,
        "eps0": float(report["eps0"]),
        "eps": privacy.get("eps"),
        "delta": privacy.get("delta"),
        "delta_lower": privacy.get("delta_lower"),
        "accountant_bound": privacy.get("bound"),
        "delta_at_eps_eq_eps0": delta_at_eps0,
        "gaussian_eps": gaussian_eps,
        "gaussian_delta": gaussian_delta,
        "gaussian_sigma": gaussian_sigma,
        "ibu_method": report.get("IBU_method"),
        "n_received": int(report["n_received"]),
        "path": report.get("path", "pipeline"),
        "randomness": report.get("randomness"),
    }
    for key, column in ESTIMATORS.items():
        estimate = shares[key]
        row[column] = None if estimate is None else tv_distance(estimate, true_share)
    index = np.asarray(list(cells), dtype=np.int64)
    cell_estimates = {
        key: (np.full(index.size, math.nan) if est is None else np.asarray(est)[index])
        for key, est in shares.items()
    }
    maps = None
    if keep_maps:
        maps = {"true": true_share.astype(np.float64)}
        for key, est in shares.items():
            maps[key] = np.full(k, math.nan) if est is None else np.asarray(est, dtype=np.float64)
    return Outcome(
        sweep=sweep,
        setting=setting,
        n=n,
        run=run,
        row=row,
        cell_truth=truth[index],
        cell_estimates=cell_estimates,
        maps=maps,
    )


def _floats_or_none(values: Any) -> npt.NDArray[np.float64] | None:
    return None if values is None else np.asarray(values, dtype=np.float64)


# --- the individual-utility table ---------------------------------------------------------------


def individual_utility(
    outcomes: Sequence[Outcome], cells: Sequence[SelectedCell], region: Region
) -> list[dict[str, Any]]:
    """Per (setting, selected cell, estimator): the true count and share and the errors over
    runs (module docstring), from the outcomes of one n. Rows in setting, cell, estimator order.

    ``true_count`` / ``true_share``: the mean over runs of the cell's count / share in the
    round's individuals (the same in every run when n = N). Errors per run are against that
    run's truth: abs_error_count = n |p_hat - p|, rel_error = |p_hat - p| / p (None for p = 0).
    """
    rows: list[dict[str, Any]] = []
    settings = list(dict.fromkeys(outcome.setting for outcome in outcomes))
    for setting in settings:
        picked = [outcome for outcome in outcomes if outcome.setting == setting]
        first = picked[0]
        for position, selected in enumerate(cells):
            row_index, column_index = divmod(selected.cell, region.columns)
            lat_lo, lat_hi, lon_lo, lon_hi = region.cell_bounds(selected.cell)
            truths = np.array([o.cell_truth[position] for o in picked], dtype=np.float64)
            ns = np.array([o.n for o in picked], dtype=np.float64)
            for estimator in ESTIMATORS:
                estimates = np.array(
                    [o.cell_estimates[estimator][position] for o in picked], dtype=np.float64
                )
                p = truths / ns
                abs_count = ns * np.abs(estimates - p)
                with np.errstate(divide="ignore", invalid="ignore"):
                    rel = np.where(p > 0, np.abs(estimates - p) / p, np.nan)
                rows.append(
                    {
                        "setting": setting,
                        "n": first.n,
                        "eps0": first.row["eps0"],
                        "eps": first.row["eps"],
                        "delta": _max_or_none(o.row["delta"] for o in picked),
                        "cell": selected.cell,
                        "label": selected.label,
                        "row": row_index,
                        "column": column_index,
                        "lat_centre": round(0.5 * (lat_lo + lat_hi), 6),
                        "lon_centre": round(0.5 * (lon_lo + lon_hi), 6),
                        "true_count": float(truths.mean()),
                        "true_share": float(p.mean()),
                        "estimator": estimator,
                        "runs": int(np.count_nonzero(~np.isnan(estimates))),
                        "median_estimate_share": _quantile(estimates, 0.5),
                        "median_abs_error_count": _quantile(abs_count, 0.5),
                        "p90_abs_error_count": _quantile(abs_count, 0.9),
                        "median_rel_error": _quantile(rel, 0.5),
                    }
                )
    return rows


def _cell_rows(outcomes: Sequence[Outcome], cells: Sequence[SelectedCell]) -> list[dict[str, Any]]:
    rows = []
    for outcome in outcomes:
        for position, selected in enumerate(cells):
            count = int(outcome.cell_truth[position])
            p = count / outcome.n
            for estimator in ESTIMATORS:
                estimate = float(outcome.cell_estimates[estimator][position])
                known = not math.isnan(estimate)
                rows.append(
                    {
                        "setting": outcome.setting,
                        "n": outcome.n,
                        "run": outcome.run,
                        "cell": selected.cell,
                        "label": selected.label,
                        "true_count": count,
                        "true_share": p,
                        "estimator": estimator,
                        "estimate_share": estimate if known else None,
                        "abs_error_count": outcome.n * abs(estimate - p) if known else None,
                        "rel_error": abs(estimate - p) / p if known and p > 0 else None,
                    }
                )
    return rows


def _quantile(values: npt.NDArray[np.float64], q: float) -> float | None:
    finite = values[~np.isnan(values)]
    return float(np.quantile(finite, q)) if finite.size else None


def _max_or_none(values: Any) -> float | None:
    present = [float(v) for v in values if v is not None]
    return max(present) if present else None


# --- the experiment -----------------------------------------------------------------------------


def run_sf(context: ExperimentContext) -> ExperimentOutput:
    """``gowalla-sf``: the experiment on San Francisco check-ins (module docstring)."""
    return run_region(context, SF)


def run_paris(context: ExperimentContext) -> ExperimentOutput:
    """``gowalla-paris``: the experiment on Paris check-ins (module docstring)."""
    return run_region(context, PARIS)


def run_region(context: ExperimentContext, setup: RegionExperiment) -> ExperimentOutput:
    """Run one region's sweeps (module docstring) and write its CSVs, figures and summary."""
    runs = (
        context.runs if context.runs is not None else (QUICK_RUNS if context.quick else FULL_RUNS)
    )
    require_int("runs", runs, 1)
    region = PRESETS[setup.region]
    population = load_population(dataset_path(context, setup), region)
    k = region.k
    ns = n_grid(
        population.n, setup.quick_ns if context.quick else FULL_N_GRID, pipeline=context.pipeline
    )
    n_eps = ns[-1]
    eps_grid = QUICK_EPS_GRID if context.quick else FULL_EPS_GRID
    selected = select_cells(population.counts, region, setup.spots)
    cell_ids = tuple(cell.cell for cell in selected)

    # TARGET_EPS at n_eps is the calibrated setting's eps0 at the sweep's last n: not twice.
    requests = [_PlanRequest(n=n, k=k, target_eps=None) for n in ns]
    requests += [_PlanRequest(n=n_eps, k=k, target_eps=e) for e in eps_grid if e != TARGET_EPS]
    plans = context.repeat(_make_plan, requests, label=f"{setup.name}: accountant")
    size_plans = [plan for plan in plans if isinstance(plan, PrivacyPlan)]
    computed = {plan.target_eps: plan for plan in plans if isinstance(plan, EpsPlan)}
    eps_plans = [
        computed[e]
        if e in computed
        else EpsPlan(n=n_eps, k=k, target_eps=e, eps0=size_plans[-1].calibrated_eps0)
        for e in eps_grid
    ]

    label = _dataset_label(population)
    tasks: list[_Task] = []
    for index, plan in enumerate(size_plans):
        for run in range(runs):
            seed = repetition_seed(context.seed, 0, index, run)
            tasks.append(
                _Task(
                    sweep="n",
                    n=plan.n,
                    run=run,
                    population=population.values,
                    k=k,
                    subsample_seed=repetition_seed(seed, 0),
                    settings=(
                        _Setting(
                            name="paper",
                            eps0=PAPER_EPS0,
                            eps=None,
                            inverted=plan.paper,
                            seed=repetition_seed(seed, 1),
                            delta_at_eps0=plan.paper_delta_at_eps0,
                        ),
                        _Setting(
                            name="calibrated",
                            eps0=plan.calibrated_eps0,
                            eps=TARGET_EPS,
                            inverted=None,
                            seed=repetition_seed(seed, 2),
                        ),
                    ),
                    cells=cell_ids,
                    keep_maps=plan.n == n_eps and run == 0,
                    label=label,
                )
            )
    for index, eps_plan in enumerate(eps_plans):
        for run in range(runs):
            seed = repetition_seed(context.seed, 1, index, run)
            tasks.append(
                _Task(
                    sweep="eps",
                    n=eps_plan.n,
                    run=run,
                    population=population.values,
                    k=k,
                    subsample_seed=repetition_seed(seed, 0),
                    settings=(
                        _Setting(
                            name="calibrated",
                            eps0=eps_plan.eps0,
                            eps=eps_plan.target_eps,
                            inverted=None,
                            seed=repetition_seed(seed, 1),
                            target_eps=eps_plan.target_eps,
                        ),
                    ),
                    cells=(),
                    keep_maps=False,
                    label=label,
                )
            )

    if context.pipeline:
        outcomes = _through_pipeline(tasks, context, setup)
    else:
        per_task = context.repeat(_run_task, tasks, label=f"{setup.name}: rounds")
        outcomes = [outcome for task_outcomes in per_task for outcome in task_outcomes]

    n_outcomes = [o for o in outcomes if o.sweep == "n"]
    eps_outcomes = [o for o in outcomes if o.sweep == "eps"]
    at_largest = [o for o in n_outcomes if o.n == n_eps]
    utility_rows = individual_utility(at_largest, selected, region)

    out = context.out
    name = setup.name
    files: list[Path] = []
    files.append(_write_csv(out / f"{name}-tv-vs-n.csv", N_COLUMNS, [o.row for o in n_outcomes]))
    files.append(
        _write_csv(out / f"{name}-tv-vs-eps.csv", EPS_COLUMNS, [o.row for o in eps_outcomes])
    )
    files.append(
        _write_csv(out / f"{name}-cells.csv", CELL_COLUMNS, _cell_rows(at_largest, selected))
    )
    files.append(_write_csv(out / f"{name}-individual-utility.csv", UTILITY_COLUMNS, utility_rows))
    map_outcomes = {o.setting: o for o in at_largest if o.maps is not None}
    files.append(_write_heatmap_data(out / f"{name}-heatmap-data.csv", region, map_outcomes))
    files += [f for o in map_outcomes.values() for f in _heat_map(out, setup, region, o)]
    files += [_tv_vs_n_figure(out, setup, setting, n_outcomes, ns) for setting in SETTINGS]
    files.append(_tv_vs_eps_figure(out, setup, eps_outcomes, eps_grid, n_eps))
    summary = _summary(
        context,
        setup,
        population,
        runs=runs,
        size_plans=size_plans,
        eps_plans=eps_plans,
        n_outcomes=n_outcomes,
        eps_outcomes=eps_outcomes,
        utility_rows=utility_rows,
        files=files,
    )
    summary_path = out / f"SUMMARY-{name}.md"
    summary_path.write_text(summary, encoding="utf-8")
    return ExperimentOutput(name=name, files=(*files, summary_path), summary=summary)


def _through_pipeline(
    tasks: Sequence[_Task], context: ExperimentContext, setup: RegionExperiment
) -> list[Outcome]:
    """Every round of every task through the real pipeline, one after the other."""
    planned = [
        (task, setting, spec)
        for task in tasks
        for setting, spec in zip(task.settings, _task_specs(task), strict=True)
    ]
    reports = run_specs_through_pipeline(
        [spec for _, _, spec in planned],
        quiet=context.quiet,
        label=f"{setup.name}: pipeline rounds",
    )
    return [
        round_outcome(
            report,
            spec,
            sweep=task.sweep,
            setting=setting.name,
            run=task.run,
            cells=task.cells,
            keep_maps=task.keep_maps,
            target_eps=setting.target_eps,
            delta_at_eps0=setting.delta_at_eps0,
        )
        for (task, setting, spec), report in zip(planned, reports, strict=True)
    ]


def _dataset_label(population: Population) -> str:
    region = population.region
    if population.has_users:
        return (
            f"gowalla:{population.path} (SNAP), region {region.name} ({region.k} cells); each "
            "user reports the cell of their most recent check-in in the region"
        )
    return (
        f"gowalla:{population.path} (lat,lon, no users), region {region.name} "
        f"({region.k} cells); each row one individual"
    )


# --- files and figures --------------------------------------------------------------------------


def _write_csv(path: Path, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns))
        writer.writeheader()
        for row in rows:
            writer.writerow({key: _cell(row.get(key)) for key in columns})
    return path


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    return value


def _write_heatmap_data(path: Path, region: Region, maps: Mapping[str, Outcome]) -> Path:
    """Every cell: its grid position and bounds, the true count of the heat maps' run and each
    panel's share per setting (columns ``SETTING:PANEL``)."""
    columns = ["cell", "row", "column", "lat_lo", "lat_hi", "lon_lo", "lon_hi", "true_count"]
    columns += [f"{setting}:{panel}" for setting in maps for panel in PANELS]
    rows = []
    truth: npt.NDArray[np.float64] | None = None
    for outcome in maps.values():
        assert outcome.maps is not None
        truth = outcome.maps["true"] * outcome.n
        break
    for cell in range(region.k):
        row_index, column_index = divmod(cell, region.columns)
        lat_lo, lat_hi, lon_lo, lon_hi = region.cell_bounds(cell)
        row: dict[str, Any] = {
            "cell": cell,
            "row": row_index,
            "column": column_index,
            "lat_lo": lat_lo,
            "lat_hi": lat_hi,
            "lon_lo": lon_lo,
            "lon_hi": lon_hi,
            "true_count": None if truth is None else round(float(truth[cell])),
        }
        for setting, outcome in maps.items():
            assert outcome.maps is not None
            for panel in PANELS:
                row[f"{setting}:{panel}"] = float(outcome.maps[panel][cell])
        rows.append(row)
    return _write_csv(path, columns, rows)


def _heat_map(
    out: Path, setup: RegionExperiment, region: Region, outcome: Outcome
) -> tuple[Path, Path]:
    from shuffledp.simulations.experiments.plots import heat_maps

    assert outcome.maps is not None
    row = outcome.row
    tv_of = {key: row[column] for key, column in ESTIMATORS.items()}
    panels = []
    for key, caption in PANELS.items():
        tv = tv_of.get(key)
        text = caption if key == "true" else f"{caption}, TV {_fmt(tv, '.3f')}"
        panels.append((text, outcome.maps[key]))
    return heat_maps(
        out / f"{setup.name}-heatmap-{outcome.setting}.png",
        panels,
        rows=region.rows,
        columns=region.columns,
        title=(
            f"{setup.title}, setting '{outcome.setting}': n = {outcome.n:,}, k = {region.k}, "
            f"eps0 = {_fmt(row['eps0'], '.3g')}, (eps, delta) = ({_fmt(row['eps'], '.3g')}, "
            f"{_fmt(row['delta'], '.2g')}), run {outcome.run}"
        ),
        colorbar_label="share of individuals",
        extent=(region.lon_min, region.lon_max, region.lat_min, region.lat_max),
    )


def _tv_values(outcomes: Sequence[Outcome], column: str, **match: Any) -> list[float]:
    return [
        float(o.row[column])
        for o in outcomes
        if all(getattr(o, key) == value for key, value in match.items())
        and o.row[column] is not None
    ]


def _tv_vs_n_figure(
    out: Path, setup: RegionExperiment, setting: str, outcomes: Sequence[Outcome], ns: Sequence[int]
) -> Path:
    from shuffledp.simulations.experiments.plots import box_plot

    data = {
        label: [_tv_values(outcomes, column, setting=setting, n=n) or [math.nan] for n in ns]
        for label, column in ESTIMATORS.items()
    }
    return box_plot(
        out / f"{setup.name}-tv-vs-n-{setting}.png",
        [f"{n:,}" for n in ns],
        data,
        xlabel="n (individuals drawn at random from the region's check-ins)",
        ylabel="TV distance to the true distribution",
        title=f"{setup.title} (k = {PRESETS[setup.region].k}), setting '{setting}':\n"
        f"{FIGURE_SETTINGS[setting]}",
        logy=True,
    )


def _tv_vs_eps_figure(
    out: Path,
    setup: RegionExperiment,
    outcomes: Sequence[Outcome],
    eps_grid: Sequence[float],
    n: int,
) -> Path:
    from shuffledp.simulations.experiments.plots import box_plot

    data = {
        label: [
            [
                float(o.row[column])
                for o in outcomes
                if o.row["target_eps"] == eps and o.row[column] is not None
            ]
            or [math.nan]
            for eps in eps_grid
        ]
        for label, column in ESTIMATORS.items()
    }
    return box_plot(
        out / f"{setup.name}-tv-vs-eps.png",
        [f"{eps:g}" for eps in eps_grid],
        data,
        xlabel=f"eps (delta = {TARGET_DELTA:g}; eps0 calibrated per eps)",
        ylabel="TV distance to the true distribution",
        title=f"{setup.title} (k = {PRESETS[setup.region].k}): TV vs eps at n = {n:,}, "
        "both at the same guarantee",
        logy=True,
    )


# --- summary ------------------------------------------------------------------------------------


def _fmt(value: Any, spec: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return format(float(value), spec)


def _median_text(values: Sequence[float]) -> str:
    return f"{float(np.median(values)):.4g}" if values else "n/a"


def _summary(
    context: ExperimentContext,
    setup: RegionExperiment,
    population: Population,
    *,
    runs: int,
    size_plans: Sequence[PrivacyPlan],
    eps_plans: Sequence[EpsPlan],
    n_outcomes: Sequence[Outcome],
    eps_outcomes: Sequence[Outcome],
    utility_rows: Sequence[Mapping[str, Any]],
    files: Sequence[Path],
) -> str:
    region = population.region
    stats = population.stats
    counts = population.counts
    top = int(np.argmax(counts))
    top_lat_lo, top_lat_hi, top_lon_lo, top_lon_hi = region.cell_bounds(top)
    path_text = (
        "the real pipeline (--pipeline: broker, onion encryption, 3 hops; one n only)"
        if context.pipeline
        else (
            "the fast in-process path (the clients' k-RR, the hops' permutation, the analyzer's "
            "report; no broker or crypto)"
        )
    )
    if context.seed is None:
        randomness = (
            "the OS CSPRNG (no --seed): the draws of individuals, k-RR, permutations and "
            "Gaussian noise are not reproducible"
        )
    else:
        randomness = (
            f"seeded from --seed {context.seed}: each (sweep point, run) gets its own "
            "SeedSequence spawn key, with independent streams for the draw of individuals, "
            "each setting's k-RR and permutation, and the Gaussian noise; reproducible, not a "
            "privacy guarantee"
        )
    unit = (
        "users (each reports the cell of their most recent check-in inside the region)"
        if population.has_users
        else "rows (the file has no user column: each check-in row is one individual)"
    )
    n_eps = eps_plans[0].n if eps_plans else population.n
    lines = [
        f"# {setup.name}",
        "",
        f"Figs. 4-7 and Tables V-VI of the seed paper on {setup.title} check-ins, as defined in "
        "this project (the paper's evaluation section could not be read here: see the module "
        f"docstring of `{__name__}`). Rounds run through {path_text}; {runs} run(s) per point.",
        "",
        f"Randomness: {randomness}.",
        "",
        "## Data",
        "",
        f"- File: `{population.path}` ({stats.format}); {stats.summary()}.",
        f"- Region {region.describe()}.",
        f"- Check-ins inside the region: {population.inside:,}; outside: {population.outside:,}.",
        f"- Individuals: N = {population.n:,} {unit}.",
        f"- Non-empty cells: {int(np.count_nonzero(counts))} of {region.k}; the most visited "
        f"cell {top} (lat {top_lat_lo:.4f}..{top_lat_hi:.4f}, lon {top_lon_lo:.4f}.."
        f"{top_lon_hi:.4f}) holds {counts[top]:,} individuals ({counts[top] / population.n:.1%}).",
        f"- Rounds: n in {', '.join(f'{n:,}' for n in sorted({o.n for o in n_outcomes}))} for "
        f"TV vs n and n = {n_eps:,} for TV vs eps; each round's n individuals are drawn "
        "uniformly at random without replacement (n = N: all of them), and its truth is their "
        "histogram.",
        "",
        "## Privacy parameters",
        "",
        "Privacy is the valid guarantee everywhere (the tight accountant's delta_upper, "
        "eps rounded up, eps0 calibrated down).",
        "",
        "| n | paper: eps0 | paper: delta at eps = eps0 = 4 | paper: eps at delta = 1e-6 (valid) "
        f"| calibrated: eps0 for ({TARGET_EPS:g}, {TARGET_DELTA:g}) |",
        "|---|---|---|---|---|",
    ]
    for plan in size_plans:
        lines.append(
            f"| {plan.n:,} | {PAPER_EPS0:g} | {plan.paper_delta_at_eps0:.3g} "
            f"(lower {plan.paper_delta_lower_at_eps0:.3g}) | {_fmt(plan.paper.eps, '.4g')} "
            f"(true eps >= {_fmt(plan.paper.eps_lower, '.4g')}) | {plan.calibrated_eps0:.4g} |"
        )
    zero = all(plan.paper_delta_at_eps0 == 0.0 for plan in size_plans)
    bounds = sorted(
        {str(o.row["accountant_bound"]) for o in n_outcomes if o.row["accountant_bound"]}
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
        f"setting both meet (eps, delta) = ({TARGET_EPS:g}, {TARGET_DELTA:g}): the Gaussian gets "
        f"eps = {TARGET_EPS:g} and the shuffle's delta_upper at that eps.",
        "",
        f"Upper bound behind delta_upper (column `accountant_bound`): {', '.join(bounds) or 'n/a'}."
        " With k this large the valid bracket is wide (compare `delta` with `delta_lower` in the "
        "CSVs): the guarantees here are safe, not tight.",
        "",
        "## TV distance vs n",
        "",
    ]
    ns = sorted({o.n for o in n_outcomes})
    for setting, description in SETTINGS.items():
        lines += [
            f"### Setting `{setting}`: {description}",
            "",
            "Median TV distance over runs:",
            "",
            "| n | eps0 | eps | delta (valid) | " + " | ".join(ESTIMATORS) + " |",
            "|---|---|---|---|" + "---|" * len(ESTIMATORS),
        ]
        for n in ns:
            picked = [o for o in n_outcomes if o.setting == setting and o.n == n]
            if not picked:
                continue
            first = picked[0].row
            delta = _max_or_none(o.row["delta"] for o in picked)
            medians = " | ".join(
                _median_text(_tv_values(n_outcomes, column, setting=setting, n=n))
                for column in ESTIMATORS.values()
            )
            lines.append(
                f"| {n:,} | {_fmt(first['eps0'], '.4g')} | {_fmt(first['eps'], '.4g')} | "
                f"<= {_fmt(delta, '.3g')} | {medians} |"
            )
        lines.append("")
    lines += [
        f"## TV distance vs eps (n = {n_eps:,}, delta target {TARGET_DELTA:g}, eps0 calibrated)",
        "",
        "| target eps | eps0 | delta (valid) | " + " | ".join(ESTIMATORS) + " |",
        "|---|---|---|" + "---|" * len(ESTIMATORS),
    ]
    for eps_plan in eps_plans:
        picked = [o for o in eps_outcomes if o.row["target_eps"] == eps_plan.target_eps]
        delta = _max_or_none(o.row["delta"] for o in picked)
        medians = " | ".join(
            _median_text([float(o.row[column]) for o in picked if o.row[column] is not None])
            for column in ESTIMATORS.values()
        )
        lines.append(
            f"| {eps_plan.target_eps:g} | {eps_plan.eps0:.4g} | <= {_fmt(delta, '.3g')} | "
            f"{medians} |"
        )
    lines += ["", *_utility_markdown(utility_rows), *_findings(n_outcomes, eps_outcomes)]
    fallbacks = sum(
        1
        for o in (*n_outcomes, *eps_outcomes)
        if o.row["ibu_method"] is not None and "MLE" in str(o.row["ibu_method"])
    )
    lines += [
        "",
        f"IBU: {fallbacks} of {len(n_outcomes) + len(eps_outcomes)} rounds fell back to the "
        "closed-form k-RR MLE (column `ibu_method`); the rest converged.",
        "",
        "Estimators: `shuffle` = raw normalised counts; `shuffle+INV` = matrix inversion and "
        "projection onto the simplex; `IBU` = iterative Bayesian update (EM); `gaussian` = the "
        "central analytic Gaussian on the true histogram (L2 sensitivity sqrt 2), projected onto "
        "the simplex, drawn by the experiment at the report's (eps, delta).",
        "",
        "Files: " + ", ".join(f"`{p.name}`" for p in files) + ".",
        "",
    ]
    return "\n".join(lines)


def _utility_markdown(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    if not rows:
        return []
    lines = [
        f"## Individual-specific utility (n = {int(rows[0]['n']):,})",
        "",
        "For each selected cell: the median over runs of the absolute error of the cell's "
        "estimated count, in individuals (n |p_hat - p|), and in brackets the median relative "
        "error |p_hat - p| / p. CSV: every run (`-cells.csv`) and the 90th percentiles "
        "(`-individual-utility.csv`).",
        "",
    ]
    for setting in dict.fromkeys(row["setting"] for row in rows):
        picked = [row for row in rows if row["setting"] == setting]
        first = picked[0]
        lines += [
            f"### Setting `{setting}`: eps0 = {_fmt(first['eps0'], '.4g')}, (eps, delta) = "
            f"({_fmt(first['eps'], '.4g')}, {_fmt(first['delta'], '.3g')})",
            "",
            "| cell | label | true count | " + " | ".join(ESTIMATORS) + " |",
            "|---|---|---|" + "---|" * len(ESTIMATORS),
        ]
        for cell in dict.fromkeys(row["cell"] for row in picked):
            of_cell = {row["estimator"]: row for row in picked if row["cell"] == cell}
            head = next(iter(of_cell.values()))
            entries = []
            for estimator in ESTIMATORS:
                row = of_cell[estimator]
                rel = row["median_rel_error"]
                rel_text = "" if rel is None else f" ({rel:.0%})"
                entries.append(f"{_fmt(row['median_abs_error_count'], '.1f')}{rel_text}")
            lines.append(
                f"| {cell} (row {head['row']}, col {head['column']}) | {head['label']} | "
                f"{head['true_count']:,.0f} | " + " | ".join(entries) + " |"
            )
        lines.append("")
    return lines


def _findings(n_outcomes: Sequence[Outcome], eps_outcomes: Sequence[Outcome]) -> list[str]:
    """Sentences computed from the medians (what the figures show), no claims made in advance."""
    lines = ["## What the figures show", ""]
    if n_outcomes:
        largest = max(o.n for o in n_outcomes)
        for setting in SETTINGS:
            medians = {
                key: _tv_values(n_outcomes, column, setting=setting, n=largest)
                for key, column in ESTIMATORS.items()
            }
            inv, gauss = medians["shuffle+INV"], medians["gaussian"]
            raw, ibu = medians["shuffle"], medians["IBU"]
            if inv and gauss:
                inv_m, gauss_m = float(np.median(inv)), float(np.median(gauss))
                ratio = inv_m / gauss_m if gauss_m > 0 else math.inf
                lines.append(
                    f"- `{setting}`, n = {largest:,}: median TV shuffle+INV {inv_m:.4g} vs "
                    f"central Gaussian {gauss_m:.4g} (ratio {ratio:.3g}); raw shuffle "
                    f"{_median_text(raw)}, IBU {_median_text(ibu)}."
                )
    if eps_outcomes:
        grid = sorted({float(o.row["target_eps"]) for o in eps_outcomes})
        parts = []
        for eps in grid:
            inv = [
                float(o.row["tv_shuffle_inv"])
                for o in eps_outcomes
                if o.row["target_eps"] == eps and o.row["tv_shuffle_inv"] is not None
            ]
            gauss = [
                float(o.row["tv_gaussian"])
                for o in eps_outcomes
                if o.row["target_eps"] == eps and o.row["tv_gaussian"] is not None
            ]
            parts.append(f"eps {eps:g}: {_median_text(inv)} vs {_median_text(gauss)}")
        lines.append(
            "- TV vs eps, median shuffle+INV vs central Gaussian: " + "; ".join(parts) + "."
        )
    lines.append(
        "- Heat maps: run 0 at the largest n, one colour scale per figure "
        "(`-heatmap-paper.png`, `-heatmap-calibrated.png`; every value in `-heatmap-data.csv`)."
    )
    return lines
