"""The published report of one round (docs/report-schema.md): counts, estimate, privacy, utility.

:func:`build_report` turns what an :class:`~shuffledp.analyzer.round.AnalyzerRound` counted into
a :class:`~shuffledp.analyzer.records.Report` (typed, validated; ``to_json()`` gives its JSON,
whose every key is described in docs/report-schema.md), asking the accountant
(:class:`~shuffledp.accountant.Tight`) for the guarantee. Pure:
no I/O; the only randomness is the central Gaussian baseline's noise (``baseline_rng``), drawn
only when a true histogram is given (simulations).

The privacy guarantee is computed for the number of reports actually received and counted
(``n_received``), never for ``n_expected``: the shuffle hides each report among the reports that
were really mixed with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from shuffledp.accountant import OutsideConditionsError, ShuffledKRR, Tight, eps_for_delta
from shuffledp.accountant.mechanism import require_delta, require_eps
from shuffledp.analyzer.baseline import RandomState, gaussian_baseline
from shuffledp.analyzer.estimators import (
    IBU_DEFAULT_MAX_ITER,
    IBUConvergenceError,
    iterative_bayesian_update,
    krr_mle,
    raw_normalised,
    shuffle_inv,
)
from shuffledp.analyzer.metrics import tv_distance
from shuffledp.analyzer.records import (
    MODE_AT_EPS,
    MODE_AT_TARGET,
    Baseline,
    Estimate,
    PrivacyBlock,
    Report,
    TVDistance,
    Utility,
)
from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.record import MAX_K, MAX_ROUND_ID
from shuffledp.validation import require_int, require_positive

__all__ = ["ESTIMATOR", "IBU_METHOD_EM", "IBU_METHOD_FALLBACK", "build_report", "merge_rejected"]

#: The report's headline estimator (docs/estimators.md).
ESTIMATOR = "shuffle+INV"
#: ``IBU_method`` when the iterative Bayesian update converged.
IBU_METHOD_EM = "iterative Bayesian update (EM, converged)"
#: ``IBU_method`` when it did not, and its closed-form limit was used instead.
IBU_METHOD_FALLBACK = "closed-form MLE (IBU did not converge)"


def merge_rejected(*counters: Mapping[str, int]) -> dict[str, int]:
    """Rejection counts summed by reason over stages (hops, analyzer); every reason of every
    counter present, in first-seen order. Raises InvalidParameterError for a count that is not a
    non-negative integer."""
    merged: dict[str, int] = {}
    for counter in counters:
        for reason, count in counter.items():
            _check_count(f"rejected[{reason!r}]", count)
            merged[reason] = merged.get(reason, 0) + int(count)
    return merged


def build_report(
    *,
    round_id: int,
    k: int,
    eps0: float,
    histogram: npt.ArrayLike,
    n_expected: int,
    rejected: Mapping[str, int],
    target_delta: float = 1e-6,
    eps: float | None = None,
    true_histogram: npt.ArrayLike | None = None,
    baseline_rng: RandomState = None,
    randomness_name: str,
    ibu_max_iter: int = IBU_DEFAULT_MAX_ITER,
    colluders: int = 0,
) -> Report:
    """The report of round ``round_id`` (docs/report-schema.md).

    JSON keys (``Report.to_json()``): ``round``, ``n_expected``, ``n_received`` (=
    histogram.sum()), ``rejected`` (by reason), ``k``, ``eps0``, ``histogram`` (the noisy
    counts), ``estimate`` (shuffle+INV ``distribution`` on the simplex, and as ``counts``),
    ``estimator``, ``privacy``, ``randomness`` (``randomness_name``), and with
    ``true_histogram``: ``true_histogram``, ``tv_distance``, ``IBU_method`` and ``baseline``.

    ``privacy``: the guarantee for n_received - ``colluders`` (the manifest's C; :func:`_privacy`);
    ``tv_distance``: each estimate's distance to the truth (:func:`_utility`).

    Raises InvalidParameterError for inconsistent input (histogram not k counts >= 0, k not
    in [2, 2^32], eps0 not finite > 0, target_delta not in (0, 1), eps < 0, colluders < 0).
    """
    require_int("round_id", round_id, 0, MAX_ROUND_ID)
    require_int("k", k, 2, MAX_K)
    eps0_value = require_positive("eps0", eps0)
    counts = _counts("histogram", histogram, k)
    require_int("n_expected", n_expected, 0, None)
    rejected_out = merge_rejected(rejected)
    delta_target = require_delta(target_delta)
    eps_value = None if eps is None else require_eps(eps)
    _check_randomness_name(randomness_name)
    require_int("ibu_max_iter", ibu_max_iter, 1, None)
    truth = _true_counts(true_histogram, k)
    n = int(counts.sum())
    distribution = shuffle_inv(counts, eps0_value) if n >= 1 else None
    privacy = _privacy(
        n=n, k=k, eps0=eps0_value, target_delta=delta_target, eps=eps_value, colluders=colluders
    )
    return Report(
        round=round_id,
        n_expected=n_expected,
        n_received=n,
        rejected=rejected_out,
        k=k,
        eps0=eps0_value,
        histogram=tuple(int(c) for c in counts),
        estimate=_estimate(distribution, n),
        estimator=ESTIMATOR,
        privacy=privacy,
        randomness=randomness_name,
        utility=None
        if truth is None
        else _utility(counts, distribution, truth, eps0_value, privacy, baseline_rng, ibu_max_iter),
    )


def _check_randomness_name(randomness_name: str) -> None:
    if not isinstance(randomness_name, str) or not randomness_name:
        raise InvalidParameterError(
            f"randomness_name must be a non-empty string, got {randomness_name!r}"
        )


def _true_counts(true_histogram: npt.ArrayLike | None, k: int) -> npt.NDArray[np.int64] | None:
    """The validated true histogram (k counts summing to at least 1), or None."""
    if true_histogram is None:
        return None
    truth = _counts("true_histogram", true_histogram, k)
    if int(truth.sum()) < 1:
        raise InvalidParameterError("true_histogram must sum to at least 1, got 0")
    return truth


def _estimate(distribution: npt.NDArray[np.float64] | None, n: int) -> Estimate:
    """The shuffle+INV estimate (``distribution`` None: no report received)."""
    if distribution is None:
        return Estimate(
            distribution=None, counts=None, note="no report was received: nothing to estimate"
        )
    return Estimate(distribution=_floats(distribution), counts=_floats(distribution * n))


def _privacy(
    *, n: int, k: int, eps0: float, target_delta: float, eps: float | None, colluders: int = 0
) -> PrivacyBlock:
    """The report's ``privacy`` (Tight accountant, ``n`` = n_received): ``eps``, ``delta`` (=
    ``delta_upper``, the valid guarantee), ``delta_lower``, ``bound`` (the upper bound that gave
    delta_upper), ``n``, ``mode``. Without ``eps``: eps is the smallest eps whose valid delta is
    <= ``target_delta`` (``eps_for_delta``, safe side; its bracket in ``eps_lower``), and
    delta/delta_lower are the accountant's bracket at that eps. With ``eps``: the delta bracket at
    that eps. With fewer than 2 reports received the values are None and ``error`` says why."""
    require_int("colluders", colluders, 0, None)
    at_target = eps is None
    counted, n = n, max(n - colluders, 0)
    common: dict[str, Any] = {
        "mode": MODE_AT_TARGET if at_target else MODE_AT_EPS,
        "n": n,
        "target_delta": target_delta if at_target else None,
        "colluders": colluders,
        "n_counted": counted,
    }
    if n < 2:
        return PrivacyBlock(
            **common,
            eps=eps,
            delta=None,
            delta_lower=None,
            bound=None,
            error=(
                f"the guarantee needs at least 2 received reports beyond the colluders (the "
                f"accountant's n >= 2), got n_received = {counted} - colluders {colluders} = {n}"
                if colluders
                else f"the guarantee needs at least 2 received reports (the accountant's n >= 2), "
                f"got n_received = {n}"
            ),
        )
    return _certified_privacy(common, n=n, k=k, eps0=eps0, target_delta=target_delta, eps=eps)


def _certified_privacy(
    common: dict[str, Any], *, n: int, k: int, eps0: float, target_delta: float, eps: float | None
) -> PrivacyBlock:
    """The privacy block of n >= 2 received reports: the accountant's guarantee, or None and an
    error if it cannot certify one."""
    at_target = eps is None
    tight = Tight()
    eps_lower = None
    try:
        mech = ShuffledKRR(n=n, k=k, eps0=eps0)
        if eps is None:
            inverted = eps_for_delta(tight, mech, target_delta)
            eps = float(inverted.eps)
            eps_lower = float(inverted.eps_lower)
        at_eps = tight.delta(mech, eps)
    except (ArithmeticError, InvalidParameterError, OutsideConditionsError) as exc:
        # The accountant's own consistency check failed (e.g. its bracket inverted), or the round
        # lies outside its range (settings are checked at start-up; this is the last line): claim
        # no guarantee rather than crash or give one that may be wrong.
        return PrivacyBlock(
            **common,
            eps=None if at_target else eps,
            eps_lower=eps_lower,
            delta=None,
            delta_lower=None,
            bound=None,
            error=f"the accountant could not certify a guarantee: {exc}",
        )
    delta = float(at_eps.delta_upper)
    return PrivacyBlock(
        **common,
        eps=float(eps),
        eps_lower=eps_lower,
        delta=delta,
        delta_lower=float(at_eps.delta_lower),
        bound=str(at_eps.extra.get("upper_from", tight.name)),
        guarantee=(
            f"({float(eps):.6g}, {delta:.3g})-DP for replace-one neighbours among "
            f"the n = {n} reports received, if at least one hop is honest"
            + (
                f" (n = {common['n_counted']} counted minus {common['colluders']} colluding "
                f"clients whose reports the adversary is assumed to know)"
                if common["colluders"]
                else ""
            )
        ),
    )


def _utility(
    counts: npt.NDArray[np.int64],
    distribution: npt.NDArray[np.float64] | None,
    truth: npt.NDArray[np.int64],
    eps0: float,
    privacy: PrivacyBlock,
    baseline_rng: RandomState,
    ibu_max_iter: int,
) -> Utility:
    """The report's utility block. ``tv_distance``: total variation distance from
    true_histogram / its sum to each estimate; ``IBU`` is the iterative Bayesian update (at most
    ``ibu_max_iter`` steps), or if it does not converge its closed-form limit
    :func:`~shuffledp.analyzer.krr_mle` (``IBU_method`` says which); ``gaussian`` is the central
    analytic Gaussian on the true histogram at the same (eps, delta_upper), noise from
    ``baseline_rng`` (None: the OS CSPRNG). Entries that cannot be computed (no report received;
    no guarantee with 0 < delta < 1 for the Gaussian) are None, with a note."""
    true_distribution = truth / float(truth.sum())
    shuffle = shuffle_inv_tv = ibu_tv = gaussian = None
    ibu_method: str | None = None
    ibu_distribution: tuple[float, ...] | None = None
    if distribution is not None:
        shuffle = tv_distance(raw_normalised(counts), true_distribution)
        shuffle_inv_tv = tv_distance(distribution, true_distribution)
        try:
            ibu = iterative_bayesian_update(counts, eps0, max_iter=ibu_max_iter)
            ibu_method = IBU_METHOD_EM
        except IBUConvergenceError:
            ibu = krr_mle(counts, eps0)
            ibu_method = IBU_METHOD_FALLBACK
        ibu_tv = tv_distance(ibu, true_distribution)
        ibu_distribution = _floats(ibu)
    eps, delta = privacy.eps, privacy.delta
    if eps is not None and delta is not None and eps > 0 and 0.0 < delta < 1.0:
        release = gaussian_baseline(truth, eps, delta, random_state=baseline_rng)
        gaussian = tv_distance(release.estimate, true_distribution)
        baseline = Baseline(
            eps=float(release.eps), delta=float(release.delta), sigma=float(release.sigma)
        )
    else:
        baseline = Baseline(
            note=(
                "not computed: it needs the shuffle's guarantee with eps > 0 and "
                f"0 < delta < 1, got eps = {eps}, delta = {delta}"
            )
        )
    return Utility(
        true_histogram=tuple(int(c) for c in truth),
        tv_distance=TVDistance(
            shuffle=shuffle, shuffle_inv=shuffle_inv_tv, ibu=ibu_tv, gaussian=gaussian
        ),
        ibu_method=ibu_method,
        ibu_distribution=ibu_distribution,
        baseline=baseline,
    )


def _counts(name: str, values: npt.ArrayLike, k: int) -> npt.NDArray[np.int64]:
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.size != k:
        raise InvalidParameterError(
            f"{name} must be one-dimensional with k = {k} bins, got shape {arr.shape}"
        )
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf":
        raise InvalidParameterError(f"{name} must hold integer counts, got dtype {arr.dtype}")
    as_float = arr.astype(np.float64)
    if not np.all(np.isfinite(as_float)) or np.any(as_float != np.floor(as_float)):
        raise InvalidParameterError(f"{name} must hold integer counts, got {arr.tolist()}")
    if np.any(as_float < 0):
        raise InvalidParameterError(f"{name} must hold counts >= 0, got {arr.tolist()}")
    return arr.astype(np.int64)


def _floats(values: npt.NDArray[np.float64]) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


def _check_count(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise InvalidParameterError(f"{name} must be an integer >= 0, got {value!r}")
