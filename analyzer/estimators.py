"""Frequency estimators for a shuffled k-RR histogram (pure numpy; no I/O, no randomness).

Setting: n users each hold a value in {0..k-1} and report it through k-RR(eps0), which keeps the
true value w.p. pt = e^eps0 / (e^eps0 + k - 1) and reports each other value w.p.
pb = 1 / (e^eps0 + k - 1) (see :class:`shuffledp.accountant.ShuffledKRR`). The analyzer sees the
histogram h of the n reports; E[h / n] = C^T pi, where C is the k x k channel of
:func:`krr_channel` and pi the true distribution. Because C = pb * 1 1^T + (pt - pb) I and pi sums
to one, (C^T pi)_j = pb + (pt - pb) pi_j: every estimator here costs O(k log k) (IBU: O(k) per
iteration).

Estimators (the names are the report's keys, docs/report-schema.md):

* ``shuffle``: :func:`raw_normalised`, h / n, no debiasing.
* ``shuffle+INV``: :func:`shuffle_inv`, the unbiased :func:`matrix_inversion` followed by the
  Euclidean projection onto the simplex of :func:`project_to_simplex`.
* ``IBU``: :func:`iterative_bayesian_update`, the EM iteration for the maximum-likelihood pi, with a
  certified stopping rule. :func:`krr_mle` is its limit in closed form.

Validation errors are :class:`shuffledp.accountant.InvalidParameterError` (a ValueError) whose
message names the rule and the offending value.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from shuffledp.accountant.mechanism import krr_log_probabilities
from shuffledp.errors import InvalidParameterError, OperationalError
from shuffledp.validation import require_positive

FloatArray = npt.NDArray[np.float64]

__all__ = [
    "IBUConvergenceError",
    "iterative_bayesian_update",
    "krr_channel",
    "krr_mle",
    "krr_probabilities",
    "matrix_inversion",
    "project_to_simplex",
    "raw_normalised",
    "shuffle_inv",
]

#: Default stopping tolerance of :func:`iterative_bayesian_update`: a certified bound on the
#: per-report log-likelihood shortfall (nats). Statistically negligible (the sampling noise of the
#: per-report log-likelihood is about k / (2 n)), and well above the ~1e-15 rounding floor.
IBU_DEFAULT_TOL = 1e-12
#: Default iteration cap of :func:`iterative_bayesian_update`.
IBU_DEFAULT_MAX_ITER = 100_000


class IBUConvergenceError(OperationalError):
    """The iterative Bayesian update did not reach its tolerance within max_iter iterations.

    The last iterate and its certified gap are attached, so a caller may still use (and label) it:
    ``estimate`` (on the simplex), ``iterations``, ``gap`` (per-report log-likelihood shortfall
    bound) and ``tol``.
    """

    def __init__(self, *, estimate: FloatArray, iterations: int, gap: float, tol: float) -> None:
        super().__init__(
            f"iterative Bayesian update must reach gap <= tol = {tol:g} within max_iter = "
            f"{iterations} iterations, got gap {gap:.3g}"
        )
        self.estimate = estimate
        self.iterations = iterations
        self.gap = gap
        self.tol = tol


# --- validation -----------------------------------------------------------------------------


def _require_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer):
        raise InvalidParameterError(f"k must be an integer, got {k!r}")
    if k < 2:
        raise InvalidParameterError(f"k must be >= 2, got {k}")
    return int(k)


def _validate_counts(counts: npt.ArrayLike) -> tuple[FloatArray, float]:
    """(h as float64, n) for a histogram: 1-D, k >= 2 bins, non-negative integers, n >= 1."""
    arr = np.asarray(counts)
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf":
        raise InvalidParameterError(f"counts must be integers, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise InvalidParameterError(f"counts must be one-dimensional, got shape {arr.shape}")
    if arr.size < 2:
        raise InvalidParameterError(f"counts must have k >= 2 bins, got {arr.size}")
    h = arr.astype(np.float64)
    if not np.all(np.isfinite(h)):
        raise InvalidParameterError(f"counts must be finite, got {arr.tolist()}")
    if np.any(h != np.floor(h)):
        bad = h[h != np.floor(h)][0]
        raise InvalidParameterError(f"counts must be integers, got {bad}")
    if np.any(h < 0):
        raise InvalidParameterError(f"counts must be >= 0, got {h[h < 0][0]:g}")
    n = float(h.sum())
    if n < 1:
        raise InvalidParameterError(f"counts must sum to n >= 1, got {n:g}")
    return h, n


# --- channel ----------------------------------------------------------------------------------


def krr_probabilities(k: int, eps0: float) -> tuple[float, float]:
    """(pt, pb) of k-RR: pt = e^eps0 / (e^eps0 + k - 1), pb = 1 / (e^eps0 + k - 1).

    Computed in log space as :class:`shuffledp.accountant.ShuffledKRR` does (no overflow for large
    eps0). Guarantees pt > pb > 0 for valid input.
    """
    log_pt, log_pb = krr_log_probabilities(_require_k(k), require_positive("eps0", eps0))
    return math.exp(log_pt), math.exp(log_pb)


def _gap_pt_pb(pt: float, eps0: float) -> float:
    """pt - pb = pt (1 - e^-eps0), relative-accurate also for small eps0."""
    return -pt * math.expm1(-eps0)


def krr_channel(k: int, eps0: float) -> FloatArray:
    """The k x k transition matrix of k-RR(eps0): C[x, y] = P[report y | true value x].

    pt on the diagonal, pb elsewhere; every row sums to one (up to rounding). The expected
    normalised histogram of the reports is C.T @ pi.
    """
    pt, pb = krr_probabilities(k, eps0)
    channel = np.full((k, k), pb, dtype=np.float64)
    np.fill_diagonal(channel, pt)
    return channel


# --- estimators -------------------------------------------------------------------------------


def raw_normalised(counts: npt.ArrayLike) -> FloatArray:
    """h / n: the raw normalised histogram (the report's ``shuffle`` estimate).

    On the simplex, but biased towards uniform by the k-RR noise: E[h / n] = C^T pi.
    """
    h, n = _validate_counts(counts)
    return h / n


def matrix_inversion(counts: npt.ArrayLike, eps0: float) -> FloatArray:
    """The unbiased matrix-inversion estimate pi_hat = (h/n - pb) / (pt - pb).

    This is the solution of C^T pi_hat = h / n (C from :func:`krr_channel`) in closed form, using
    C = pb 1 1^T + (pt - pb) I and sum(h / n) = 1 (Wang et al., "Locally differentially private
    protocols for frequency estimation", USENIX Security 2017, for k-RR / "direct encoding").

    Guarantees: E[pi_hat] = pi exactly (h ~ Multinomial(n, C^T pi)); sum(pi_hat) = 1 up to
    rounding. Entries may be negative or exceed one (it may leave the simplex); see
    :func:`shuffle_inv` for the projected version.
    """
    h, n = _validate_counts(counts)
    pt, pb = krr_probabilities(h.size, eps0)
    return (h / n - pb) / _gap_pt_pb(pt, float(eps0))


def project_to_simplex(v: npt.ArrayLike) -> FloatArray:
    """The Euclidean projection of v onto the probability simplex {x : x >= 0, sum x = 1}.

    Algorithm 1 of W. Wang and M. A. Carreira-Perpinan, "Projection onto the probability simplex:
    an efficient algorithm with a simple proof, and an application", arXiv:1309.1541 (2013):
    sort u = v descending, rho = max{j : u_j + (1 - sum_{i<=j} u_i) / j > 0},
    lambda = (1 - sum_{i<=rho} u_i) / rho, x = max(v + lambda, 0). O(k log k).

    Guarantees: x >= 0 exactly, |sum(x) - 1| at rounding level, x is the unique minimiser of
    ||x - v||_2 over the simplex (KKT: x_i = v_i + lambda where x_i > 0, v_i + lambda <= 0 where
    x_i = 0), and x = v for v already on the simplex (up to rounding).
    """
    arr = np.asarray(v, dtype=np.float64)
    if arr.ndim != 1 or arr.size < 1:
        raise InvalidParameterError(
            f"v must be a non-empty one-dimensional vector, got shape {arr.shape}"
        )
    if not np.all(np.isfinite(arr)):
        raise InvalidParameterError(f"v must be finite, got {arr.tolist()}")
    u = np.sort(arr)[::-1]
    cumulative = np.cumsum(u)
    j = np.arange(1, arr.size + 1, dtype=np.float64)
    positive = u + (1.0 - cumulative) / j > 0
    # positive[0] holds (u_1 + 1 - u_1 > 0), and the condition is true for a prefix only.
    rho = int(np.nonzero(positive)[0][-1]) + 1
    lam = float(1.0 - cumulative[rho - 1]) / rho
    projected: FloatArray = np.maximum(arr + lam, 0.0)
    return projected


def shuffle_inv(counts: npt.ArrayLike, eps0: float) -> FloatArray:
    """The seed paper's ``shuffle+INV``: :func:`matrix_inversion`, then :func:`project_to_simplex`.

    Guarantees: on the simplex; the closest simplex point (Euclidean) to the unbiased estimate, so
    never farther from pi in L2 than the unprojected estimate (projection onto a convex set is
    non-expansive). No longer unbiased where the projection is active.
    """
    return project_to_simplex(matrix_inversion(counts, eps0))


def krr_mle(counts: npt.ArrayLike, eps0: float) -> FloatArray:
    """The maximum-likelihood pi on the simplex for a k-RR histogram, in closed form.

    Maximises sum_j h_j log q_j with q = C^T pi = pb + (pt - pb) pi, i.e. over
    {q : q_j >= pb, sum q = 1}. KKT gives q_j = max(f_j / lambda, pb) with f = h / n and lambda
    fixed by sum q = 1 ("water filling"): with f sorted descending and S_m its partial sums,
    m* = max{m : f_(m) (1 - (k - m) pb) > pb S_m} (a prefix condition) and
    lambda = S_m* / (1 - (k - m*) pb). Then pi = (q - pb) / (pt - pb).

    Guarantees: the unique maximiser (the log-likelihood is strictly concave in q); equal to
    :func:`matrix_inversion` when that lies in the simplex; the fixed point that
    :func:`iterative_bayesian_update` converges to (this function is derived here and checked
    against EM and a numerical optimiser in tests/unit/analyzer/test_analyzer_estimators.py).
    """
    h, n = _validate_counts(counts)
    k = h.size
    pt, pb = krr_probabilities(k, eps0)
    f = h / n
    order = np.argsort(-f, kind="stable")
    sorted_f = f[order]
    partial = np.cumsum(sorted_f)
    m = np.arange(1, k + 1, dtype=np.float64)
    room = 1.0 - (k - m) * pb  # > 0 because k pb < 1
    active = sorted_f * room > pb * partial
    m_star = int(np.nonzero(active)[0][-1]) + 1  # active[0] holds since f_(1) >= 1/k > 0
    lam = partial[m_star - 1] / room[m_star - 1]
    q = np.maximum(f / lam, pb)
    pi: FloatArray = np.maximum((q - pb) / _gap_pt_pb(pt, float(eps0)), 0.0)
    return pi / float(pi.sum())


def iterative_bayesian_update(
    counts: npt.ArrayLike,
    eps0: float,
    *,
    tol: float = IBU_DEFAULT_TOL,
    max_iter: int = IBU_DEFAULT_MAX_ITER,
) -> FloatArray:
    """The iterative Bayesian update (EM) for the maximum-likelihood pi under k-RR.

    The EM step for a known channel (Agrawal and Aggarwal, "On the design and quantification of
    privacy preserving data mining algorithms", PODS 2001; called the iterative Bayesian update in
    Agrawal, Srikant and Thomas, SIGMOD 2005, and ElSalamouny and Palamidessi, EuroS&P 2020):
    pi_i <- pi_i * sum_j (h_j / n) C[i, j] / (C^T pi)_j, from the uniform distribution. Each step
    stays on the simplex and does not decrease the likelihood; the iterates converge to the MLE
    (:func:`krr_mle`).

    Stopping rule (certified): with g = grad of (1/n) sum_j h_j log (C^T pi)_j, concavity gives
    L(pi*) - L(pi) <= max_i g_i - pi . g (the Frank-Wolfe gap), per report, in nats. The iteration
    returns the first iterate whose gap is <= ``tol``; so the result's per-report log-likelihood is
    within ``tol`` of the maximum. Near the MLE the gap is linear in the distance to it, so the
    distance shrinks in proportion to ``tol`` (measured: tol = 1e-14 puts the result within 1e-11
    of :func:`krr_mle` for eps0 in [1, 4], k <= 6; tol = 1e-10 within ~1e-8 for eps0 >= 0.5,
    k <= 50). Rounding limits the attainable gap to about 1e-15.

    EM is linearly convergent here, but slowly when the channel is weak (small eps0, large k: the
    rate is about 1 - (pt - pb)^2). If ``max_iter`` steps do not reach ``tol`` this raises
    :class:`IBUConvergenceError` carrying the last iterate and its gap (never a silent result).
    """
    h, n = _validate_counts(counts)
    tol_value = require_positive("tol", tol)
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        raise InvalidParameterError(f"max_iter must be an integer >= 1, got {max_iter!r}")
    k = h.size
    pt, pb = krr_probabilities(k, eps0)
    strength = _gap_pt_pb(pt, float(eps0))
    f = h / n
    pi = np.full(k, 1.0 / k)
    for step in range(max_iter + 1):
        ratio = f / (pb * pi.sum() + strength * pi)  # f_j / (C^T pi)_j
        grad = pb * ratio.sum() + strength * ratio  # (C ratio)_i
        gap = float(grad.max() - pi @ grad)
        if gap <= tol_value:
            return pi
        if step == max_iter:
            raise IBUConvergenceError(estimate=pi, iterations=max_iter, gap=gap, tol=tol_value)
        pi = pi * grad
        pi /= pi.sum()
    raise AssertionError("unreachable")  # pragma: no cover
