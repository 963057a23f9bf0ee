"""The composed bracket against an exact composition at small n, every dataset enumerated.

For each dataset of the other users (tests/reference/oracle.py's histogram laws, 80 digits,
turned into log-probabilities), the R-fold product of its pair (P, Q) is listed outcome by
outcome and its hockey-stick divergence summed exactly (pairs.hockey_stick, both directions): the
delta of an adversary who uses that dataset pair in every round. The true composed worst case is
at least the largest of these, so the composed upper end must be above every one of them; the
lower end composes one such pair, so it must be below the largest. No dp-accounting and no
profile here: an independent route.
"""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import pytest

from shuffledp.accountant import ShuffledKRR
from shuffledp.accountant.composition.composition_bracket import compose_bracket
from shuffledp.accountant.engines.pairs import hockey_stick_both
from tests.reference.oracle import _pair_for_others


def _log_pair(others: tuple[int, ...], k: int, eps0: float) -> tuple[np.ndarray, np.ndarray]:
    dist_p, dist_q = _pair_for_others(others, k, eps0)
    keys = sorted(set(dist_p) | set(dist_q))
    lp = np.array(
        [float(mpmath.log(dist_p[o])) if dist_p.get(o, 0) > 0 else -math.inf for o in keys]
    )
    lq = np.array(
        [float(mpmath.log(dist_q[o])) if dist_q.get(o, 0) > 0 else -math.inf for o in keys]
    )
    return lp, lq


def _product(log_pmf: np.ndarray, rounds: int) -> np.ndarray:
    out = log_pmf
    for _ in range(rounds - 1):
        out = (out[:, None] + log_pmf[None, :]).ravel()
    return out


def _datasets(n: int, k: int) -> list[tuple[int, ...]]:
    """Every multiset of values for the n - 1 others (as a sorted tuple)."""
    return list(itertools.combinations_with_replacement(range(k), n - 1))


def exact_same_pair_worst(n: int, k: int, eps0: float, rounds: int, eps: float) -> float:
    """max over datasets of the exact R-fold delta of that dataset's pair (both directions)."""
    best = 0.0
    for others in _datasets(n, k):
        lp, lq = _log_pair(others, k, eps0)
        best = max(best, hockey_stick_both(_product(lp, rounds), _product(lq, rounds), eps))
    return best


CASES = [
    # (n, k, eps0, rounds, eps)
    (12, 2, 1.0, 3, 1.0),
    (30, 2, 0.5, 2, 0.2),
    (6, 3, 2.0, 2, 1.5),
    (4, 4, 1.0, 3, 1.0),
]


@pytest.mark.parametrize(("n", "k", "eps0", "rounds", "eps"), CASES)
def test_bracket_around_exact_same_pair_composition(
    n: int, k: int, eps0: float, rounds: int, eps: float
) -> None:
    exact = exact_same_pair_worst(n, k, eps0, rounds, eps)
    result = compose_bracket(ShuffledKRR(n=n, k=k, eps0=eps0), rounds, eps=eps)
    # Upper: a valid guarantee, so above what the same-pair adversary already achieves.
    assert result.upper >= exact * (1.0 - 1e-12)
    # Lower: one dataset pair composed (rounded down), so at most the best of them.
    assert result.lower <= exact * (1.0 + 1e-12)
    assert result.lower > 0.0
    # And the bracket is informative: within 10 % of the exact same-pair value.
    assert result.upper <= 1.1 * exact
    assert result.lower >= 0.9 * exact
