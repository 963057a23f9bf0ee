"""profile_pld: PLDs built from a privacy profile compose to a bracket around the exact
composition of the pair (listed outcome by outcome here, summed by pairs.hockey_stick).

The pair: P = Bin(m, p), Q = Bin(m, 1 - p), symmetric (s -> m - s maps P to Q), so one profile
describes both directions, and its R-fold product is small enough to list."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shuffledp.accountant import OptimalBlanket, ShuffledKRR, compose
from shuffledp.accountant.bounds.base import OutsideConditionsError
from shuffledp.accountant.composition.profile_pld import (
    Grid,
    lower_pld_from_pair,
    lower_pld_from_profile,
    upper_pld,
)
from shuffledp.accountant.engines.numerics import log_binom_pmf
from shuffledp.accountant.engines.pairs import hockey_stick, hockey_stick_both

M, P = 12, 0.6


def pair() -> tuple[np.ndarray, np.ndarray]:
    s = np.arange(M + 1.0)
    return log_binom_pmf(s, M, P), log_binom_pmf(s, M, 1.0 - P)


def product(log_pmf: np.ndarray, rounds: int) -> np.ndarray:
    out = log_pmf
    for _ in range(rounds - 1):
        out = (out[:, None] + log_pmf[None, :]).ravel()
    return out


def grid() -> Grid:
    top = math.log(P / (1.0 - P)) * M  # the largest loss: the curve is 0 from there on
    step = 1e-3
    j = np.unique(np.round(np.linspace(0.0, top / step + 1.0, 60)).astype(np.int64))
    return Grid(j, step)


def exact_curve(g: Grid) -> np.ndarray:
    lp, lq = pair()
    return np.array([hockey_stick(lp, lq, e) for e in g.eps.tolist()])


EPS = [0.0, 0.05, 0.3, 0.77, 1.5, 2.5]


@pytest.mark.parametrize("rounds", [1, 2, 3])
def test_upper_pld_dominates_the_exact_composition(rounds: int) -> None:
    g = grid()
    composed = upper_pld(g, exact_curve(g))
    if rounds > 1:
        composed = composed.self_compose(rounds)
    lp, lq = (product(x, rounds) for x in pair())
    for eps in EPS:
        exact = hockey_stick_both(lp, lq, eps)
        value = composed.get_delta_for_epsilon(eps)
        assert value >= exact * (1.0 - 1e-12), eps
        # 60 points on the curve: the hull is close (a few % at most in delta).
        assert value <= exact * 1.2 + 1e-12, eps


@pytest.mark.parametrize("rounds", [1, 2, 3])
def test_lower_plds_are_below_the_exact_composition(rounds: int) -> None:
    g = grid()
    curve = exact_curve(g)
    from_profile = lower_pld_from_profile(g, curve * (1 - 1e-12), curve * (1 + 1e-12))
    listed = lower_pld_from_pair(*pair(), g.step, float(g.eps[-1]))
    if rounds > 1:
        from_profile = from_profile.self_compose(rounds)
        listed = listed.self_compose(rounds)
    lp, lq = (product(x, rounds) for x in pair())
    for eps in EPS:
        exact = hockey_stick_both(lp, lq, eps)
        slack = 2e-15  # dp-accounting's tail truncation, added to any PLD's infinite loss
        assert from_profile.get_delta_for_epsilon(eps) - slack <= exact * (1 + 1e-12), eps
        assert listed.get_delta_for_epsilon(eps) - slack <= exact * (1 + 1e-12), eps
        if exact > 1e-6:
            assert listed.get_delta_for_epsilon(eps) >= 0.95 * exact, eps
            assert from_profile.get_delta_for_epsilon(eps) >= 0.7 * exact, eps


def test_upper_pld_raises_an_inconsistent_start() -> None:
    """An upper profile too large at eps = 0 for its slope (delta(0) + 2 |slope| > 1) still
    gives a valid PLD (masses >= 0, total 1) that is above it."""
    g = Grid(np.array([0, 10, 20], dtype=np.int64), 1e-2)
    values = np.array([0.9, 0.1, 0.0])
    pld = upper_pld(g, values)
    for eps, value in zip(g.eps.tolist(), values.tolist(), strict=True):
        assert pld.get_delta_for_epsilon(eps) >= value * (1 - 1e-12)


def test_listed_compose_refuses_in_one_line_over_the_cap() -> None:
    """Issue 25's bare AssertionError: optimal-blanket alone, its listed pair over the cap."""
    with pytest.raises(OutsideConditionsError, match="no dominating pair could be listed"):
        compose(ShuffledKRR(n=10_000, k=10, eps0=1.0), 10, delta=1e-6, bounds=[OptimalBlanket()])
