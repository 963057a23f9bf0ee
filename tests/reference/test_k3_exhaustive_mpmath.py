"""k = 3 enumeration (accountant/worst_case/k3_exhaustive.py) against an independent 60-digit mpmath
computation of single datasets at n = 40, and the whole enumeration against the float oracle
(tests/reference/oracle_float.py, every dataset of user values) on a grid at n <= 10."""

from __future__ import annotations

import functools
import itertools

import mpmath
import pytest

from shuffledp.accountant import ShuffledKRR
from shuffledp.accountant.worst_case.family import family_delta
from shuffledp.accountant.worst_case.k3_exhaustive import dataset_delta, k3_worst_case
from tests.reference import oracle, oracle_float

pytestmark = pytest.mark.slow

DIGITS = 60
N = 40
DATASETS = [(0, 0, 39), (39, 0, 0), (10, 5, 24), (20, 19, 0), (3, 1, 35), (13, 13, 13)]


@functools.lru_cache(maxsize=32)
def mp_law(eps0: float, counts: tuple[int, int, int]) -> dict[tuple[int, int], mpmath.mpf]:
    """The others' law of (N0, N1) by exact convolution, one user at a time, 60 digits."""
    with mpmath.workdps(DIGITS):
        e0 = mpmath.exp(mpmath.mpf(eps0))
        pt, pb = e0 / (e0 + 2), 1 / (e0 + 2)
        law = {(0, 0): mpmath.mpf(1)}
        users = [(pt, pb, pb)] * counts[0] + [(pb, pt, pb)] * counts[1]
        users += [(pb, pb, pt)] * counts[2]
        for p0, p1, p2 in users:
            nxt: dict[tuple[int, int], mpmath.mpf] = {}
            for (a, b), v in law.items():
                for key, p in (((a + 1, b), p0), ((a, b + 1), p1), ((a, b), p2)):
                    nxt[key] = nxt.get(key, mpmath.mpf(0)) + v * p
            law = nxt
        return law


def mp_delta(eps0: float, counts: tuple[int, int, int], eps: float) -> mpmath.mpf:
    """max(H(P0||P1), H(P1||P0)) of the histogram, u on x0 (P0) or x1 (P1), 60 digits."""
    law = mp_law(eps0, counts)
    with mpmath.workdps(DIGITS):
        e0 = mpmath.exp(mpmath.mpf(eps0))
        pt, pb = e0 / (e0 + 2), 1 / (e0 + 2)
        ee = mpmath.exp(mpmath.mpf(eps))
        p0: dict[tuple[int, int], mpmath.mpf] = {}
        p1: dict[tuple[int, int], mpmath.mpf] = {}
        for (a, b), v in law.items():
            for key, w0, w1 in (((a + 1, b), pt, pb), ((a, b + 1), pb, pt), ((a, b), pb, pb)):
                p0[key] = p0.get(key, mpmath.mpf(0)) + v * w0
                p1[key] = p1.get(key, mpmath.mpf(0)) + v * w1
        forward = mpmath.fsum(max(p0[h] - ee * p1[h], 0) for h in p0)
        backward = mpmath.fsum(max(p1[h] - ee * p0[h], 0) for h in p0)
        return max(forward, backward)


@pytest.mark.parametrize(
    ("eps0", "fraction"), list(itertools.product((0.5, 1.0, 4.0), (0.1, 0.5, 0.9)))
)
def test_single_datasets_against_mpmath(eps0: float, fraction: float) -> None:
    mech = ShuffledKRR(n=N, k=3, eps0=eps0)
    eps = fraction * eps0
    for counts in DATASETS:
        exact = mp_delta(eps0, counts, eps)
        bracket = dataset_delta(mech, counts, eps)
        assert bracket.lower <= exact <= bracket.upper, counts
        if exact >= 1e-30:
            assert bracket.upper - bracket.lower <= 1e-9 * float(exact), counts


@pytest.mark.parametrize(("eps0", "fraction"), [(1.0, 0.5), (4.0, 0.25)])
def test_worst_case_bounds_every_mpmath_dataset(eps0: float, fraction: float) -> None:
    mech = ShuffledKRR(n=N, k=3, eps0=eps0)
    eps = fraction * eps0
    bracket, witness = k3_worst_case(mech, eps)
    assert all(bracket.upper >= mp_delta(eps0, c, eps) for c in DATASETS)
    assert bracket.lower <= mp_delta(eps0, witness, eps) <= bracket.upper


@pytest.mark.parametrize(
    ("n", "eps0"), list(itertools.product((3, 5, 8, 10), (0.2, 0.5, 1.0, 2.0, 4.0, 8.0)))
)
def test_worst_case_equals_the_oracle_grid(n: int, eps0: float) -> None:
    mech = ShuffledKRR(n=n, k=3, eps0=eps0)
    eps = tuple(f * eps0 for f in (0.01, 0.1, 0.3, 0.5, 0.8, 0.99))
    for case in oracle_float.worst_case(n, 3, eps0, eps):
        bracket, witness = k3_worst_case(mech, case.eps)
        assert bracket.lower <= case.upper and case.lower <= bracket.upper
        assert bracket.upper - bracket.lower <= 1e-9 * bracket.upper
        assert dataset_delta(mech, witness, case.eps).upper >= case.lower
        # The family F(a) is a subset of the datasets.
        best_f = max(family_delta(mech, a, case.eps).lower for a in range(n))
        assert best_f <= bracket.upper


@pytest.mark.parametrize(
    ("n", "eps0", "eps"), [(3, 0.5, 0.2), (4, 2.0, 0.5), (5, 1.0, 0.3), (5, 4.0, 3.0)]
)
def test_worst_case_contains_the_80_digit_oracle(n: int, eps0: float, eps: float) -> None:
    exact, _ = oracle.worst_case_delta(n, 3, eps0, eps)
    bracket, witness = k3_worst_case(ShuffledKRR(n=n, k=3, eps0=eps0), eps)
    assert bracket.lower <= exact <= bracket.upper
    # The witness reaches the worst case: its 80-digit delta is within the bracket too.
    values = tuple(v for v, c in enumerate(witness) for _ in range(c))
    assert bracket.lower <= oracle.dataset_delta(values, 3, eps0, eps) <= bracket.upper
