"""The fast in-process path: one round without the broker and the crypto, same code otherwise.

A sweep over n, eps0 and many repetitions through the real pipeline would spend nearly all its
time on sealed boxes and MQTT (about 2,700 reports/s on 2 cores, docs/performance.md). What decides the
published histogram is three pure functions, and this module calls exactly those:

1. each value is randomised by :func:`shuffledp.clients.krr.krr_randomize`, the function every
   client applies;
2. the reports are permuted by :func:`shuffledp.shuffler.permute.uniform_permutation`, the
   function every hop applies. The pipeline permutes once per hop; ``hops`` times here (default
   once) is the same distribution, because a composition of independent uniform permutations is
   uniform (for any fixed sigma, sigma composed with a uniform pi is uniform). The histogram
   does not depend on the order at all; the permutation is kept so that the path runs the hop's
   code, not to change the counts;
3. the reports are counted (``np.bincount``, what :class:`~shuffledp.analyzer.round.AnalyzerRound`
   does one report at a time) and the report is built by
   :func:`shuffledp.analyzer.report.build_report`, the analyzer's own function.

What is left out is what cannot change the counts when nothing is lost: the onion layers, the
transport, the hops' screening (no message is malformed, duplicated or late here, so every
rejection counter is 0 and ``n_received = n``). ``tests/unit/simulations/test_fastpath.py`` checks that the fast
path and the full pipeline produce the same histogram distribution at n = 2,000.

The accountant is the expensive part (eps at a target delta takes 0.2-2 s, the delta at a
given eps about 15 ms): :func:`eps_at_delta` caches the inversion per (n, k, eps0, delta) within
a process, and :func:`run_round` then asks :func:`build_report` for the delta bracket at that
eps, which is exactly the second half of what ``build_report`` does in its target-delta mode.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from shuffledp.accountant import ShuffledKRR, Tight, eps_for_delta
from shuffledp.accountant.mechanism import require_delta, require_eps
from shuffledp.analyzer.baseline import RandomState
from shuffledp.analyzer.records import MODE_AT_TARGET, PrivacyBlock
from shuffledp.analyzer.report import build_report
from shuffledp.clients.krr import krr_randomize
from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.errors import REJECTION_REASONS
from shuffledp.protocol.record import MAX_K
from shuffledp.randomness import (
    RandomLike,
    RandomSource,
    SeededRandom,
    SystemRandom,
    as_random_source,
)
from shuffledp.shuffler.hop import HOP_REJECTION_REASONS
from shuffledp.shuffler.permute import uniform_permutation
from shuffledp.validation import require_int, require_positive

__all__ = [
    "EpsAtDelta",
    "RoundSpec",
    "eps_at_delta",
    "histogram_of_round",
    "run_round",
    "run_spec",
    "run_specs_through_pipeline",
    "spec_sources",
]

#: Every rejection reason of the hops and the analyzer, all zero: nothing is rejected here.
_NO_REJECTIONS: dict[str, int] = dict.fromkeys((*REJECTION_REASONS, *HOP_REJECTION_REASONS), 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class EpsAtDelta:
    """The accountant's eps at a target delta for one mechanism (:func:`eps_at_delta`).

    ``eps``: the valid value (the smallest eps whose valid delta_upper is <= ``delta``, rounded
    up); ``eps_lower``: a lower bound on the true eps at that delta; ``error``: set (and the eps
    values NaN) when the accountant could not certify a guarantee.
    """

    n: int
    k: int
    eps0: float
    delta: float
    eps: float
    eps_lower: float
    error: str | None = None


@functools.lru_cache(maxsize=1024)
def eps_at_delta(n: int, k: int, eps0: float, delta: float) -> EpsAtDelta:
    """eps at ``delta`` for n users, k values, local eps0 (Tight, safe side), cached per process.

    The same inversion ``build_report`` runs in its target-delta mode
    (:func:`shuffledp.accountant.eps_for_delta` with :class:`~shuffledp.accountant.Tight`).
    """
    require_int("n", n, 2)
    require_int("k", k, 2, MAX_K)
    eps0_value = require_positive("eps0", eps0)
    delta_value = require_delta(delta)
    try:
        result = eps_for_delta(Tight(), ShuffledKRR(n=n, k=k, eps0=eps0_value), delta_value)
    except ArithmeticError as exc:
        return EpsAtDelta(
            n=n,
            k=k,
            eps0=eps0_value,
            delta=delta_value,
            eps=math.nan,
            eps_lower=math.nan,
            error=str(exc),
        )
    return EpsAtDelta(
        n=n,
        k=k,
        eps0=eps0_value,
        delta=delta_value,
        eps=float(result.eps),
        eps_lower=float(result.eps_lower),
    )


def histogram_of_round(
    values: npt.ArrayLike,
    *,
    k: int,
    eps0: float,
    rng: RandomLike = None,
    hops: int = 1,
) -> npt.NDArray[np.int64]:
    """The analyzer's histogram of one round over ``values`` (true values in [0, k)): k-RR with
    the clients' function, ``hops`` uniform permutations with the hops' function, counted.

    Randomness from ``rng`` (the OS CSPRNG unless a RandomSource or a numpy Generator is given). InvalidParameterError for
    values that are not integers in [0, k), k not in [2, 2^32], eps0 not finite > 0, hops < 1.
    """
    require_int("k", k, 2, MAX_K)
    require_int("hops", hops, 1, 64)
    source: RandomSource = as_random_source(rng)
    reports = krr_randomize(values, k, eps0, source)
    for _ in range(hops):
        reports = reports[uniform_permutation(int(reports.size), source)]
    counts: npt.NDArray[np.int64] = np.bincount(reports, minlength=k).astype(np.int64)
    return counts


def run_round(
    values: npt.ArrayLike,
    *,
    k: int,
    eps0: float,
    rng: RandomLike = None,
    target_delta: float = 1e-6,
    eps: float | None = None,
    hops: int = 1,
    round_id: int = 0,
    baseline_rng: RandomState = None,
    randomness_name: str | None = None,
    inverted: EpsAtDelta | None = None,
) -> dict[str, Any]:
    """One round on the fast path: the report (docs/report-schema.md) with the keys the pipeline's
    report has (``round``, ``n_expected``, ``n_received``, ``rejected``, ``k``, ``eps0``,
    ``histogram``, ``estimate``, ``estimator``, ``privacy``, ``randomness``, ``true_histogram``,
    ``tv_distance``, ``IBU_method``, ``baseline``), plus ``path`` = "fast".

    Privacy as in the pipeline: without ``eps``, eps is the smallest eps whose valid delta is <=
    ``target_delta`` (cached per process, :func:`eps_at_delta`) and delta its bracket there; with
    ``eps``, the delta bracket at that eps. The central Gaussian baseline is drawn at the same
    (eps, delta_upper) with ``baseline_rng`` (None: the OS CSPRNG). ``randomness_name``: what the
    report says drove k-RR and the permutations (default: ``rng.name``). ``inverted``: the
    :func:`eps_at_delta` of this round's (n, k, eps0, target_delta), when the caller computed it
    already (e.g. once per grid point in the parent process rather than once per worker).
    """
    source: RandomSource = as_random_source(rng)
    truth_values = np.asarray(values)
    histogram = histogram_of_round(truth_values, k=k, eps0=eps0, rng=source, hops=hops)
    truth = np.bincount(truth_values.astype(np.int64), minlength=k)
    n = int(truth_values.size)
    delta_target = require_delta(target_delta)
    eps_value = None if eps is None else require_eps(eps)
    common: dict[str, Any] = {
        "round_id": round_id,
        "k": k,
        "eps0": eps0,
        "histogram": histogram,
        "n_expected": n,
        "rejected": _NO_REJECTIONS,
        "target_delta": delta_target,
        "true_histogram": truth,
        "baseline_rng": baseline_rng,
        "randomness_name": randomness_name or source.name,
    }
    if eps_value is not None or n < 2:
        report = build_report(eps=eps_value, **common)
    else:
        inverted = _inverted_for(inverted, n, k, float(eps0), delta_target)
        if inverted.error is not None:
            report = build_report(**common)  # it finds the same failure and says so
        else:
            report = build_report(eps=inverted.eps, **common)
            report = replace(report, privacy=_as_target_mode(report.privacy, inverted))
    return {**report.to_json(), "path": "fast"}


def _inverted_for(
    inverted: EpsAtDelta | None, n: int, k: int, eps0: float, delta: float
) -> EpsAtDelta:
    """The caller's :class:`EpsAtDelta` if it is for (n, k, eps0, delta) (InvalidParameterError
    if it is for another round), else :func:`eps_at_delta` of those."""
    if inverted is None:
        return eps_at_delta(n, k, eps0, delta)
    if (inverted.n, inverted.k, inverted.eps0, inverted.delta) != (n, k, eps0, delta):
        raise InvalidParameterError(
            f"inverted must be for (n, k, eps0, delta) = ({n}, {k}, {eps0}, {delta}), "
            f"got ({inverted.n}, {inverted.k}, {inverted.eps0}, {inverted.delta})"
        )
    return inverted


def _as_target_mode(section: PrivacyBlock, inverted: EpsAtDelta) -> PrivacyBlock:
    """The privacy section of build_report's target-delta mode, from its given-eps section at
    the inverted eps (the same numbers: build_report computes the bracket at that eps too)."""
    return replace(
        section,
        mode=MODE_AT_TARGET,
        target_delta=inverted.delta,
        eps_lower=inverted.eps_lower,
        # the bracket at that eps failed: target-delta mode then claims no eps
        eps=None if section.error is not None else section.eps,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundSpec:
    """One round of a sweep, as plain picklable data (it may run in another process).

    ``values``: the true values (int64, in [0, k)). ``target_delta`` / ``eps`` / ``inverted``:
    as in :func:`run_round`. ``seed``: None for the OS CSPRNG (the default), an int for a
    reproducible round (k-RR and permutation from ``SeededRandom``, the Gaussian baseline from
    an independent stream of the same seed). ``label``: what the pipeline's report calls the
    dataset.
    """

    values: npt.NDArray[np.int64]
    k: int
    eps0: float
    target_delta: float = 1e-6
    eps: float | None = None
    seed: int | None = None
    label: str = "synthetic"
    inverted: EpsAtDelta | None = None

    def __post_init__(self) -> None:
        require_int("k", self.k, 2, MAX_K)
        require_positive("eps0", self.eps0)
        require_delta(self.target_delta)
        if self.eps is not None:
            require_eps(self.eps)
        if self.seed is not None:
            require_int("seed", self.seed, 0)
        values = np.asarray(self.values)
        if values.ndim != 1 or (values.size and not np.issubdtype(values.dtype, np.integer)):
            raise InvalidParameterError(
                f"values must be a one-dimensional integer array, got shape {values.shape} "
                f"and dtype {values.dtype}"
            )
        if values.size < 2:
            raise InvalidParameterError(f"a round needs at least 2 values, got {values.size}")
        if values.min() < 0 or values.max() >= self.k:
            raise InvalidParameterError(
                f"values must lie in [0, k) = [0, {self.k}), got min {int(values.min())} and "
                f"max {int(values.max())}"
            )


def spec_sources(seed: int | None) -> tuple[RandomSource, RandomState, str]:
    """(k-RR and permutation source, Gaussian baseline state, randomness label) of a round.

    None: the OS CSPRNG for both (diffprivlib's ``secrets.SystemRandom`` for the baseline). An
    int: two independent streams of ``np.random.SeedSequence(seed)`` (children 0 and 1), so the
    round is reproducible; the label says so.
    """
    if seed is None:
        return SystemRandom(), None, "os-csprng"
    require_int("seed", seed, 0)
    krr_child, baseline_child = np.random.SeedSequence(seed).spawn(2)
    words = krr_child.generate_state(2, dtype=np.uint64)
    krr_seed = (int(words[0]) << 64) | int(words[1])
    baseline = np.random.Generator(np.random.PCG64(baseline_child))
    label = f"seeded-pcg64 from seed {seed} (reproducible simulation; not a privacy guarantee)"
    return SeededRandom(krr_seed), baseline, label


def run_spec(spec: RoundSpec) -> dict[str, Any]:
    """:func:`run_round` for one :class:`RoundSpec` (a top-level function: it pickles)."""
    source, baseline, label = spec_sources(spec.seed)
    return run_round(
        spec.values,
        k=spec.k,
        eps0=spec.eps0,
        rng=source,
        target_delta=spec.target_delta,
        eps=spec.eps,
        baseline_rng=baseline,
        randomness_name=label,
        inverted=spec.inverted,
    )


def run_specs_through_pipeline(
    specs: list[RoundSpec],
    *,
    hops: int = 3,
    broker: str | None = None,
    quiet: bool = False,
    label: str = "pipeline rounds",
) -> list[dict[str, Any]]:
    """The same rounds through the real pipeline (``--pipeline``): one
    :class:`~shuffledp.simulations.pipeline.simulate.PipelineSession` (``--broker auto``:
    Mosquitto if installed, else the embedded broker, unless ``broker`` is given), the rounds one after the other, each with its own analyzer, hops and
    client processes. Slow: about 4-5 s per round of 2,000 reports, and ~2,700 reports/s beyond.

    Each report gets ``path`` = "pipeline". SimulationError if a round fails.
    """
    import asyncio

    from shuffledp.simulations.experiments.runner import progress_bar
    from shuffledp.simulations.pipeline.simulate import PipelineSession, SimulationOptions

    if not specs:
        return []
    largest = max(int(np.asarray(spec.values).size) for spec in specs)
    first = specs[0]
    options = SimulationOptions(
        n=largest, k=first.k, eps0=first.eps0, hops=hops, broker=broker, client_processes=2
    )

    async def run_all() -> list[dict[str, Any]]:
        reports: list[dict[str, Any]] = []
        with progress_bar(len(specs), label, quiet=quiet) as advance:
            async with PipelineSession(options) as session:
                for index, spec in enumerate(specs):
                    session.options = replace(
                        options,
                        k=spec.k,
                        eps0=spec.eps0,
                        target_delta=spec.target_delta,
                        eps=spec.eps,
                        seed=spec.seed,
                    )
                    report = await session.run_round(
                        np.asarray(spec.values, dtype=np.int64),
                        round_id=index + 1,
                        dataset_label=spec.label,
                    )
                    report["path"] = "pipeline"
                    reports.append(report)
                    advance()
        return reports

    return asyncio.run(run_all())
