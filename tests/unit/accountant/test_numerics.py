"""Log-space binomial numerics against mpmath, and the error models the brackets rely on."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy.special import betainc, gammaln

from shuffledp.accountant.engines.numerics import (
    GAMMALN_RELERR,
    binomial_window,
    log1mexp,
    log_binom_cdf,
    log_binom_pmf,
    log_binom_sf,
    log_tail_relative_error,
    log_weight_error,
    tilt_root,
)


def _mp_tail(m: int, c: int, q: float) -> mpmath.mpf:
    """P[Bin(c, q) >= m] as an exact-ish 50-digit sum of terms."""
    with mpmath.workdps(50):
        qm = mpmath.mpf(q)
        return mpmath.fsum(
            mpmath.binomial(c, j) * qm**j * (1 - qm) ** (c - j) for j in range(max(m, 0), c + 1)
        )


# Tails from the bulk to far beyond double underflow (1e-300 .. 1e-1100), including the corner
# m ~ c with small q where scipy's betainc loses accuracy near 1e-280.
TAIL_CASES = [
    (10, 20, 0.5),
    (150, 299, 0.066),
    (265, 299, 0.06590),
    (270, 299, 0.06590),
    (271, 299, 0.06590),
    (250, 299, 0.00669),
    (1200, 2000, 0.31),
    (1900, 2000, 0.5),
    (3, 3, 0.5),
]


@pytest.mark.parametrize(("m", "c", "q"), TAIL_CASES)
def test_log_binom_sf_matches_mpmath_within_its_error_model(m: int, c: int, q: float) -> None:
    got = float(log_binom_sf(m, c, q))
    with mpmath.workdps(50):
        exact = mpmath.log(_mp_tail(m, c, q))
        rel = abs(math.expm1(got - float(exact)))
    assert rel <= math.exp(float(log_tail_relative_error(got)))


def test_betainc_error_model_holds_where_it_is_used() -> None:
    """The measurement behind the margin: betainc above the 1e-250 floor, random binomial tails,
    relative error below 6.1e-13 everywhere (the margin allows 5e-12 + 1e-15 |ln v|)."""
    rng = np.random.default_rng(20261122)
    worst = 0.0
    for _ in range(300):
        c = int(rng.integers(5, 3000))
        q = float(10 ** rng.uniform(-3, -0.3))
        m = int(rng.integers(max(1, int(c * q) + 1), c + 1))
        value = float(betainc(m, c - m + 1, q))
        if value < 1e-250:
            continue
        with mpmath.workdps(40):
            exact = mpmath.betainc(m, c - m + 1, 0, mpmath.mpf(q), regularized=True)
            worst = max(worst, abs(float(mpmath.mpf(value) / exact - 1)))
    assert worst <= 5e-12


def test_gammaln_error_model() -> None:
    """GAMMALN_RELERR is at least the worst relative error of gammaln on integers up to 1e7."""
    rng = np.random.default_rng(7)
    xs = np.unique(np.concatenate([np.arange(3, 200), np.round(np.exp(rng.uniform(5, 16.1, 300)))]))
    worst = 0.0
    with mpmath.workdps(40):
        for x in xs:
            exact = mpmath.loggamma(float(x))
            worst = max(worst, abs(float((mpmath.mpf(float(gammaln(x))) - exact) / exact)))
    assert worst <= GAMMALN_RELERR


@pytest.mark.parametrize(
    ("a", "c", "q"), [(0, 10, 0.3), (7, 10, 0.3), (500, 1000, 0.5), (3, 10**6, 1e-5)]
)
def test_log_binom_pmf_within_its_error_model(a: int, c: int, q: float) -> None:
    """gammaln differences cancel (about 1e-10 absolute at c = 1e6): log_weight_error covers it."""
    with mpmath.workdps(50):
        exact = mpmath.log(mpmath.binomial(c, a)) + a * mpmath.log(q) + (c - a) * mpmath.log1p(-q)
        assert abs(float(log_binom_pmf(a, c, q)) - float(exact)) <= log_weight_error(c, q)


def test_pmf_sf_cdf_edges() -> None:
    assert float(log_binom_sf(0, 5, 0.3)) == 0.0
    assert float(log_binom_sf(6, 5, 0.3)) == -math.inf
    assert float(log_binom_pmf(-1, 5, 0.3)) == -math.inf
    assert float(log_binom_pmf(6, 5, 0.3)) == -math.inf
    # P[X <= m] + P[X >= m + 1] = 1
    total = math.exp(float(log_binom_cdf(40, 100, 0.37))) + math.exp(
        float(log_binom_sf(41, 100, 0.37))
    )
    assert total == pytest.approx(1.0, abs=1e-14)


def test_log1mexp() -> None:
    for x in [1e-20, 1e-5, 0.5, math.log(2.0), 3.0, 50.0]:
        with mpmath.workdps(40):
            exact = float(mpmath.log(1 - mpmath.exp(-mpmath.mpf(x))))
        assert float(log1mexp(x)) == pytest.approx(exact, rel=1e-14)


@pytest.mark.parametrize(("n", "q"), [(100, 0.3), (10**6, 0.02), (10**7, 1e-6)])
def test_binomial_window_bounds_the_dropped_mass(n: int, q: float) -> None:
    lo, hi, log_dropped = binomial_window(n, q, depth=60.0)
    assert 0 <= lo <= n * q <= hi <= n
    # The exact mass outside [lo, hi] (by tails) is at most the reported bound.
    outside = math.exp(float(log_binom_cdf(lo - 1, n, q))) if lo > 0 else 0.0
    outside += math.exp(float(log_binom_sf(hi + 1, n, q)))
    assert outside <= math.exp(log_dropped) * (1 + 1e-9)
    # Each dropped point weighs <= e^-60 of the mode, and there are at most n of them.
    assert log_dropped <= -60.0 + math.log(n) + 1e-9


@pytest.mark.parametrize("p", [0.3, 0.1, 1e-3, 1e-12])
def test_tilt_root_known_answer(p: float) -> None:
    """G = +1 w.p. p, -1 w.p. 1 - p: the tilted mean p e^t - (1 - p) e^-t is 0 at
    t = log((1 - p) / p) / 2; a mean already >= 0 gives 0; no negative atom gives 0."""
    g = np.array([1.0, -1.0])
    log_p = np.log(np.array([p, 1.0 - p]))
    assert tilt_root(g, log_p) == pytest.approx(0.5 * math.log((1.0 - p) / p), rel=1e-11)
    assert tilt_root(g, np.log(np.array([0.6, 0.4]))) == 0.0
    assert tilt_root(np.array([1.0, 0.0]), np.log(np.array([0.5, 0.5]))) == 0.0


def test_largest_where_finds_the_threshold_from_below() -> None:
    """The largest x with ok(x) for a threshold predicate: within 1e-9 relative and never
    above it; None when ok fails down to 1e-9; the last doubling below ``cap`` when ok holds
    beyond it."""
    from shuffledp.accountant.engines.numerics import largest_where

    for threshold in (3.7e-6, 0.25, 3.7, 512.0):

        def below(x: float, t: float = threshold) -> bool:
            return x <= t

        found = largest_where(below, 1.0, 1e6)
        assert found is not None and threshold * (1 - 1e-9) <= found <= threshold
    assert largest_where(lambda x: x <= 1e-10, 1.0, 1e6) is None
    assert largest_where(lambda x: True, 1.0, 100.0) == 64.0
