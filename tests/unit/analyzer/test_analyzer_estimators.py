"""Estimators of shuffledp.analyzer against independent references (linear solve, brute force,
numerical optimisation, simulation) and their validation rules; tv_distance."""

from __future__ import annotations

import itertools
import math

import numpy as np
import numpy.typing as npt
import pytest
from scipy.optimize import minimize
from scipy.stats import norm

from shuffledp.accountant import InvalidParameterError, ShuffledKRR
from shuffledp.analyzer import (
    IBUConvergenceError,
    iterative_bayesian_update,
    krr_channel,
    krr_mle,
    krr_probabilities,
    matrix_inversion,
    project_to_simplex,
    raw_normalised,
    shuffle_inv,
    tv_distance,
)

FloatArray = npt.NDArray[np.float64]


def _simulate(
    rng: np.random.Generator, k: int, eps0: float, n: int, concentration: float = 1.0
) -> tuple[FloatArray, npt.NDArray[np.int64]]:
    """A true distribution pi ~ Dirichlet and one k-RR histogram of n reports from it."""
    pi = rng.dirichlet(np.full(k, concentration))
    histogram = rng.multinomial(n, krr_channel(k, eps0).T @ pi)
    return pi, histogram


def _log_likelihood(counts: npt.ArrayLike, eps0: float, pi: FloatArray) -> float:
    """sum_j h_j log (C^T pi)_j, straight from the dense channel."""
    h = np.asarray(counts, dtype=np.float64)
    q = krr_channel(h.size, eps0).T @ pi
    return float(h @ np.log(q))


# --- channel ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("k", "eps0"), [(2, 0.1), (3, 1.0), (15, 4.0), (7, 30.0)])
def test_channel_structure(k: int, eps0: float) -> None:
    """Diagonal pt, off-diagonal pb (as in the accountant's ShuffledKRR), rows sum to one."""
    channel = krr_channel(k, eps0)
    mech = ShuffledKRR(n=2, k=k, eps0=eps0)
    assert channel.shape == (k, k)
    np.testing.assert_allclose(np.diag(channel), mech.pt, rtol=1e-15)
    off = channel[~np.eye(k, dtype=bool)]
    np.testing.assert_allclose(off, mech.pb, rtol=1e-15)
    np.testing.assert_allclose(channel.sum(axis=1), 1.0, rtol=1e-14)
    assert krr_probabilities(k, eps0) == (mech.pt, mech.pb)


# --- matrix inversion -------------------------------------------------------------------------


def test_matrix_inversion_equals_linear_solve() -> None:
    """The closed form solves C^T pi_hat = h / n: equal to np.linalg.solve to 1e-12, 200 cases."""
    rng = np.random.default_rng(20240601)
    for _ in range(200):
        k = int(rng.integers(2, 25))
        eps0 = float(rng.uniform(0.3, 8.0))
        n = int(rng.integers(1, 100_000))
        _, h = _simulate(rng, k, eps0, n, concentration=0.5)
        expected = np.linalg.solve(krr_channel(k, eps0).T, h / n)
        np.testing.assert_allclose(matrix_inversion(h, eps0), expected, rtol=0, atol=1e-12)


def test_matrix_inversion_known_value() -> None:
    """k = 2, eps0 = ln 3: pt = 3/4, pb = 1/4; h = (7, 3) gives pi_hat_0 = (0.7 - 0.25) / 0.5."""
    np.testing.assert_allclose(
        matrix_inversion([7, 3], math.log(3.0)), [0.9, 0.1], rtol=0, atol=1e-15
    )


@pytest.mark.slow
def test_matrix_inversion_unbiased() -> None:
    """Mean of pi_hat over R seeded simulated histograms is within a tolerance of pi.

    Var(pi_hat_i) = q_i (1 - q_i) / (n (pt - pb)^2) with q = C^T pi, so the mean of R draws has
    standard error se_i = sqrt(Var / R). The tolerance is z * se_i with z the two-sided normal
    quantile at 1e-6 / k (Bonferroni over the k bins), so the false-alarm rate is <= 1e-6 (normal
    approximation of a mean of R = 40,000 bounded i.i.d. terms). The same tolerance rejects the
    biased raw estimate h / n (checked below), so the assertion can fail.
    """
    k, eps0, n, repeats = 5, 1.0, 200, 40_000
    pi = np.array([0.5, 0.25, 0.15, 0.1, 0.0])
    pt, pb = krr_probabilities(k, eps0)
    q = krr_channel(k, eps0).T @ pi
    rng = np.random.default_rng(7)
    histograms = rng.multinomial(n, q, size=repeats)
    estimates = np.array([matrix_inversion(h, eps0) for h in histograms])
    se = np.sqrt(q * (1 - q) / (n * (pt - pb) ** 2) / repeats)
    z = norm.isf(1e-6 / (2 * k))
    assert np.all(np.abs(estimates.mean(axis=0) - pi) <= z * se)
    raw_mean = np.mean([raw_normalised(h) for h in histograms], axis=0)
    assert np.any(np.abs(raw_mean - pi) > z * se)


# --- simplex projection -----------------------------------------------------------------------


def _brute_force_projection(v: FloatArray) -> FloatArray:
    """Exact projection by enumerating every support S: x_S = v_S + lambda, sum x = 1, x_S >= 0.

    The minimiser has some support S, and there KKT forces x_S = v_S + lambda; so the best
    feasible candidate over all 2^k - 1 supports is the projection.
    """
    best: FloatArray | None = None
    best_distance = math.inf
    for size in range(1, v.size + 1):
        for support in itertools.combinations(range(v.size), size):
            idx = list(support)
            x = np.zeros_like(v)
            x[idx] = v[idx] + (1.0 - v[idx].sum()) / size
            if np.all(x >= 0):
                distance = float(np.sum((x - v) ** 2))
                if distance < best_distance:
                    best, best_distance = x, distance
    assert best is not None
    return best


def _assert_kkt(v: FloatArray, x: FloatArray) -> None:
    """x = v + lambda on the support, v + lambda <= 0 off it, for one lambda."""
    support = x > 0
    lam = float(np.mean(x[support] - v[support]))
    np.testing.assert_allclose(x[support] - v[support], lam, rtol=0, atol=1e-12)
    assert np.all(v[~support] + lam <= 1e-12)


def test_projection_matches_brute_force() -> None:
    """Sort-based projection equals exhaustive support enumeration (k <= 5) to 1e-12."""
    rng = np.random.default_rng(11)
    for _ in range(400):
        k = int(rng.integers(1, 6))
        scale = float(rng.choice([0.1, 1.0, 10.0]))
        v = rng.normal(0.2, scale, size=k)
        x = project_to_simplex(v)
        np.testing.assert_allclose(x, _brute_force_projection(v), rtol=0, atol=1e-12)


def test_projection_matches_slsqp() -> None:
    """Against scipy's SLSQP on min ||x - v||^2, sum x = 1, x >= 0 (an independent solver).

    SLSQP stops on the change of the objective (ftol 1e-14), so its x is only good to ~1e-7 (the
    objective is quadratic in the error): the points agree to 1e-6, and the projection's objective
    is never worse than SLSQP's by more than rounding.
    """
    rng = np.random.default_rng(12)
    for _ in range(30):
        k = int(rng.integers(2, 9))
        v = rng.normal(0.1, 0.8, size=k)
        result = minimize(
            lambda x, v=v: float(np.sum((x - v) ** 2)),
            np.full(k, 1.0 / k),
            jac=lambda x, v=v: 2 * (x - v),
            method="SLSQP",
            bounds=[(0.0, None)] * k,
            constraints=[{"type": "eq", "fun": lambda x: np.sum(x) - 1.0}],
            options={"ftol": 1e-14, "maxiter": 500},
        )
        assert result.success, result.message
        x = project_to_simplex(v)
        np.testing.assert_allclose(x, result.x, rtol=0, atol=1e-6)
        assert abs(result.x.sum() - 1.0) <= 1e-10
        assert np.sum((x - v) ** 2) <= np.sum((result.x - v) ** 2) + 1e-12


def test_projection_invariants() -> None:
    """On the simplex; KKT; idempotent; fixes simplex points; invariant to v + c 1."""
    rng = np.random.default_rng(13)
    for _ in range(300):
        k = int(rng.integers(1, 60))
        v = rng.normal(0.0, float(rng.choice([0.01, 1.0, 100.0])), size=k)
        x = project_to_simplex(v)
        assert np.all(x >= 0)
        assert abs(x.sum() - 1.0) <= 1e-12
        _assert_kkt(v, x)
        # Idempotent up to rounding: sum(x) is 1 only to ~1e-15, which moves lambda that much.
        np.testing.assert_allclose(project_to_simplex(x), x, rtol=0, atol=1e-14)
        np.testing.assert_allclose(project_to_simplex(v + 3.7), x, rtol=0, atol=1e-12)
        point = rng.dirichlet(np.ones(k))
        np.testing.assert_allclose(project_to_simplex(point), point, rtol=0, atol=1e-15)


def test_projection_known_values() -> None:
    np.testing.assert_array_equal(project_to_simplex([5.0]), [1.0])
    np.testing.assert_allclose(project_to_simplex([2.0, 0.0]), [1.0, 0.0])
    np.testing.assert_allclose(project_to_simplex([0.7, 0.7, -1.0]), [0.5, 0.5, 0.0])
    np.testing.assert_allclose(project_to_simplex([0.0, 0.0, 0.0, 0.0]), [0.25] * 4)


# --- maximum likelihood: IBU and its closed form ----------------------------------------------


def _scipy_mle(counts: npt.NDArray[np.int64], eps0: float) -> FloatArray:
    """argmax of the multinomial log-likelihood over the simplex by SLSQP (dense channel)."""
    h = counts.astype(np.float64)
    channel = krr_channel(h.size, eps0)
    n = float(h.sum())

    def objective(pi: FloatArray) -> float:
        return -float(h @ np.log(channel.T @ pi)) / n

    def gradient(pi: FloatArray) -> FloatArray:
        return np.asarray(-(channel @ (h / (channel.T @ pi))) / n, dtype=np.float64)

    result = minimize(
        objective,
        np.full(h.size, 1.0 / h.size),
        jac=gradient,
        method="SLSQP",
        bounds=[(0.0, 1.0)] * h.size,
        constraints=[{"type": "eq", "fun": lambda pi: np.sum(pi) - 1.0}],
        options={"ftol": 1e-16, "maxiter": 1000},
    )
    return np.asarray(result.x, dtype=np.float64)


@pytest.mark.slow
def test_ibu_converges_to_numerical_mle() -> None:
    """IBU (tol 1e-14) equals a direct SLSQP maximisation of the likelihood to 1e-6, and the
    closed form krr_mle to 1e-9; cases include MLEs on the simplex boundary."""
    rng = np.random.default_rng(21)
    boundary_cases = 0
    for _ in range(40):
        k = int(rng.integers(2, 7))
        eps0 = float(rng.uniform(1.0, 4.0))
        n = int(rng.integers(20, 2000))
        _, h = _simulate(rng, k, eps0, n, concentration=0.4)
        ibu = iterative_bayesian_update(h, eps0, tol=1e-14, max_iter=1_000_000)
        np.testing.assert_allclose(ibu, _scipy_mle(h, eps0), rtol=0, atol=1e-6)
        np.testing.assert_allclose(ibu, krr_mle(h, eps0), rtol=0, atol=1e-9)
        boundary_cases += bool(np.any(matrix_inversion(h, eps0) < 0))
    assert boundary_cases >= 10


@pytest.mark.slow
def test_mle_equals_inversion_inside_simplex() -> None:
    """When the unbiased inversion is a distribution it is the MLE: IBU and krr_mle match it."""
    rng = np.random.default_rng(22)
    checked = 0
    for _ in range(200):
        k = int(rng.integers(2, 12))
        eps0 = float(rng.uniform(0.5, 5.0))
        _, h = _simulate(rng, k, eps0, int(rng.integers(500, 50_000)), concentration=5.0)
        inversion = matrix_inversion(h, eps0)
        if np.any(inversion < 0):
            continue
        checked += 1
        np.testing.assert_allclose(krr_mle(h, eps0), inversion, rtol=0, atol=1e-12)
        ibu = iterative_bayesian_update(h, eps0, tol=1e-14, max_iter=1_000_000)
        np.testing.assert_allclose(ibu, inversion, rtol=0, atol=1e-9)
    assert checked >= 50


@pytest.mark.slow
def test_mle_likelihood_dominates() -> None:
    """Per-report log-likelihood of IBU is within tol of the best, so at least that of
    shuffle+INV and of random simplex points minus tol."""
    rng = np.random.default_rng(23)
    tol = 1e-10
    for _ in range(30):
        k = int(rng.integers(2, 20))
        eps0 = float(rng.uniform(0.5, 4.0))
        n = int(rng.integers(10, 5000))
        _, h = _simulate(rng, k, eps0, n, concentration=0.5)
        best = _log_likelihood(h, eps0, iterative_bayesian_update(h, eps0, tol=tol)) / n
        exact = _log_likelihood(h, eps0, krr_mle(h, eps0)) / n
        assert exact - tol - 1e-13 <= best <= exact + 1e-13
        assert best >= _log_likelihood(h, eps0, shuffle_inv(h, eps0)) / n - tol
        for other in rng.dirichlet(np.ones(k), size=20):
            assert best >= _log_likelihood(h, eps0, other) / n - tol


def test_ibu_reports_non_convergence() -> None:
    """Too few iterations: a clear error carrying the last iterate (on the simplex) and its gap."""
    h = np.array([500, 10, 0, 3, 200])
    with pytest.raises(
        IBUConvergenceError, match=r"gap <= tol = 1e-12 within max_iter = 3"
    ) as info:
        iterative_bayesian_update(h, 0.5, tol=1e-12, max_iter=3)
    error = info.value
    assert error.iterations == 3
    assert error.gap > 1e-12
    assert np.all(error.estimate >= 0)
    assert abs(error.estimate.sum() - 1.0) <= 1e-12
    # And with room to converge, the same input succeeds.
    converged = iterative_bayesian_update(h, 0.5)
    np.testing.assert_allclose(converged, krr_mle(h, 0.5), rtol=0, atol=1e-6)


# --- simple estimators ------------------------------------------------------------------------


def test_raw_and_shuffle_inv() -> None:
    h = np.array([30, 0, 10, 60])
    np.testing.assert_array_equal(raw_normalised(h), [0.3, 0.0, 0.1, 0.6])
    estimate = shuffle_inv(h, 2.0)
    np.testing.assert_allclose(estimate, project_to_simplex(matrix_inversion(h, 2.0)))
    assert np.all(estimate >= 0)
    assert abs(estimate.sum() - 1.0) <= 1e-12
    assert estimate[1] == 0.0  # the inversion is negative there


# --- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counts", "eps0", "message"),
    [
        ([3, -1, 2], 1.0, "counts must be >= 0, got -1"),
        ([3, 1.5, 2], 1.0, "counts must be integers, got 1.5"),
        ([True, False], 1.0, "counts must be integers, got dtype bool"),
        (["a", "b"], 1.0, "counts must be integers, got dtype <U1"),
        ([[1, 2], [3, 4]], 1.0, r"counts must be one-dimensional, got shape \(2, 2\)"),
        ([5], 1.0, "counts must have k >= 2 bins, got 1"),
        ([0, 0, 0], 1.0, "counts must sum to n >= 1, got 0"),
        ([1.0, math.nan], 1.0, r"counts must be finite, got \[1.0, nan\]"),
        ([3, 2], 0.0, "eps0 must be > 0, got 0.0"),
        ([3, 2], -1.0, "eps0 must be > 0, got -1.0"),
        ([3, 2], math.inf, "eps0 must be finite, got inf"),
        ([3, 2], "1", "eps0 must be a real number, got '1'"),
    ],
)
def test_invalid_input(counts: object, eps0: object, message: str) -> None:
    for estimator in (matrix_inversion, shuffle_inv, iterative_bayesian_update, krr_mle):
        with pytest.raises(InvalidParameterError, match=message):
            estimator(counts, eps0)  # type: ignore[arg-type]


def test_invalid_other_parameters() -> None:
    with pytest.raises(InvalidParameterError, match="counts must be >= 0, got -2"):
        raw_normalised([4, -2])
    with pytest.raises(InvalidParameterError, match="k must be >= 2, got 1"):
        krr_channel(1, 1.0)
    with pytest.raises(InvalidParameterError, match=r"k must be an integer, got 2\.0"):
        krr_channel(2.0, 1.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match=r"tol must be > 0, got 0\.0"):
        iterative_bayesian_update([3, 2], 1.0, tol=0.0)
    with pytest.raises(InvalidParameterError, match="max_iter must be an integer >= 1, got 0"):
        iterative_bayesian_update([3, 2], 1.0, max_iter=0)
    with pytest.raises(InvalidParameterError, match=r"v must be finite, got \[1.0, inf\]"):
        project_to_simplex([1.0, math.inf])
    with pytest.raises(InvalidParameterError, match=r"non-empty one-dimensional .* shape \(0,\)"):
        project_to_simplex([])


# --- tv distance ------------------------------------------------------------------------------


def test_tv_distance_values() -> None:
    assert tv_distance([0.5, 0.5], [1.0, 0.0]) == 0.5
    assert tv_distance([0.2, 0.3, 0.5], [0.2, 0.3, 0.5]) == 0.0
    assert tv_distance([1.0, 0.0, 0.0], [0.0, 0.0, 1.0]) == 1.0
    rng = np.random.default_rng(31)
    for _ in range(50):
        p, q = rng.dirichlet(np.ones(6), size=2)
        d = tv_distance(p, q)
        assert d == tv_distance(q, p)
        # TV = max over events A of |P(A) - Q(A)|, attained at A = {p > q}.
        assert d == pytest.approx(float(np.sum((p - q)[p > q])), abs=1e-15)
        assert 0.0 <= d <= 1.0


@pytest.mark.parametrize(
    ("p", "q", "message"),
    [
        ([0.5, 0.5], [1.0, 0.0, 0.0], r"same shape, got \(2,\) and \(3,\)"),
        ([0.5, 0.6], [1.0, 0.0], "p must sum to 1 .* got sum 1.1"),
        ([1.0, 0.0], [1.2, -0.2], "q must have entries >= 0 .* got -0.2"),
        ([1.0, math.nan], [1.0, 0.0], "p must be finite"),
        ([[1.0]], [[1.0]], "p must be one-dimensional"),
    ],
)
def test_tv_distance_validation(p: object, q: object, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        tv_distance(p, q)  # type: ignore[arg-type]


def test_tv_distance_tolerance() -> None:
    """Within atol (default 1e-9) a vector counts as a distribution; beyond it, it does not."""
    assert tv_distance([0.5 + 1e-10, 0.5], [0.5, 0.5]) == pytest.approx(5e-11)
    with pytest.raises(InvalidParameterError, match="p must sum to 1"):
        tv_distance([0.5 + 1e-8, 0.5], [0.5, 0.5])
    assert tv_distance([0.5 + 1e-8, 0.5], [0.5, 0.5], atol=1e-6) == pytest.approx(5e-9)
