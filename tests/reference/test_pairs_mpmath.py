"""Production pairs against 60-digit mpmath enumeration (tests/reference/mpmath_pairs.py) at n in the hundreds.

Requirement: relative error <= 1e-9 for delta >= 1e-300, exact 0 where the privacy loss never
exceeds eps, and the rigorous bracket [lower, upper] contains the mpmath value.
"""

from __future__ import annotations

from typing import Any

import mpmath
import pytest

from shuffledp.accountant import ShuffledKRR, TwoCountPair
from shuffledp.accountant.bounds.base import Clones, KRRClones, SingleBin, StrongAdversary, WangKRR
from tests.reference import mpmath_pairs

# (n, k, eps0, eps): moderate deltas, deep tails (1e-30 .. 1e-300), eps at eps0 (exact zero).
CASES = [
    (100, 4, 1.0, 0.1),
    (100, 10, 2.0, 0.5),
    (150, 2, 0.7, 0.05),
    (200, 15, 4.0, 0.3),
    (250, 3, 3.0, 2.5),
    (300, 6, 5.0, 4.0),
    (300, 4, 2.5, 2.4),
    (120, 5, 1.5, 1.5),
]


def _check(value_bracket: Any, reference: Any, eps: float = 0.0, eps0: float = 1.0) -> None:
    with mpmath.workdps(60):
        ref = mpmath.mpf(reference)
        if eps >= eps0:
            # Every pair's loss is at most eps0, so the exact value is 0; the 60-digit reference
            # is zero up to its rounding (losses equal to eps0 come out as eps0 +- 1e-60).
            assert ref <= mpmath.mpf("1e-55")
            assert (value_bracket.lower, value_bracket.upper) == (0.0, 0.0)
            return
        if ref == 0:
            assert (value_bracket.lower, value_bracket.upper) == (0.0, 0.0)
            return
        assert value_bracket.lower <= ref * (1 + mpmath.mpf("1e-15")), (value_bracket, ref)
        assert value_bracket.upper >= ref * (1 - mpmath.mpf("1e-15")), (value_bracket, ref)
        if ref >= mpmath.mpf("1e-300"):
            for side in (value_bracket.lower, value_bracket.upper):
                assert abs(mpmath.mpf(side) / ref - 1) <= mpmath.mpf("1e-9"), (value_bracket, ref)


@pytest.mark.parametrize(("n", "k", "eps0", "eps"), CASES)
def test_strong_adversary(n: int, k: int, eps0: float, eps: float) -> None:
    d01, d10 = mpmath_pairs.strong_adversary(n, k, eps0, eps)
    # Its loss is unbounded (N2 = 0 after u's report is impossible under Q): never exactly 0.
    _check(StrongAdversary().bracket(ShuffledKRR(n=n, k=k, eps0=eps0), eps), max(d01, d10))


@pytest.mark.parametrize(("n", "k", "eps0", "eps"), CASES)
def test_clones(n: int, k: int, eps0: float, eps: float) -> None:
    d01, d10 = mpmath_pairs.clones(n, eps0, eps)
    _check(Clones().bracket(ShuffledKRR(n=n, k=k, eps0=eps0), eps), max(d01, d10), eps, eps0)


@pytest.mark.parametrize(("n", "k", "eps0", "eps"), CASES)
def test_krr_clones(n: int, k: int, eps0: float, eps: float) -> None:
    d01, d10 = mpmath_pairs.krr_clones(n, k, eps0, eps)
    _check(KRRClones().bracket(ShuffledKRR(n=n, k=k, eps0=eps0), eps), max(d01, d10), eps, eps0)


@pytest.mark.parametrize(("n", "k", "eps0", "eps"), [c for c in CASES if c[1] >= 3])
def test_wang_krr(n: int, k: int, eps0: float, eps: float) -> None:
    d01, d10 = mpmath_pairs.wang_krr(n, k, eps0, eps)
    _check(WangKRR().bracket(ShuffledKRR(n=n, k=k, eps0=eps0), eps), max(d01, d10), eps, eps0)


@pytest.mark.parametrize(("n", "k", "eps0", "eps"), CASES)
@pytest.mark.parametrize("fraction", [0.0, 0.3, 0.8, 1.0])
def test_single_bin_both_directions(
    n: int, k: int, eps0: float, eps: float, fraction: float
) -> None:
    nx0 = round(fraction * (n - 1))
    d01, d10 = mpmath_pairs.single_bin(n, k, eps0, nx0, eps)
    got = SingleBin(nx0).directions(ShuffledKRR(n=n, k=k, eps0=eps0), eps)
    _check(got.d01, d01, eps, eps0)
    _check(got.d10, d10, eps, eps0)


def test_symmetric_pairs_are_symmetric() -> None:
    """The clone-form and wang pairs are symmetric under swapping coordinates: H(P||Q) = H(Q||P),
    which is why the production code evaluates one direction. Checked in mpmath."""
    n, k, eps0, eps = 80, 4, 1.5, 0.2
    for d01, d10 in [
        mpmath_pairs.strong_adversary(n, k, eps0, eps),
        mpmath_pairs.clones(n, eps0, eps),
        mpmath_pairs.krr_clones(n, k, eps0, eps),
        mpmath_pairs.wang_krr(n, k, eps0, eps),
    ]:
        with mpmath.workdps(60):
            assert abs(d01 - d10) <= mpmath.mpf("1e-50") * d01


def _mp_two_count(n: int, k: int, eps0: float, alpha_is_pt: bool, eps: float) -> Any:
    """H_eps(P || Q) of the two-count pair by direct 60-digit enumeration of every (A', B').

    Others (A, B, rest) ~ Mult(n-1; alpha, beta, 1 - alpha - beta); u adds to A w.p. pt (P) or
    pb (Q), to B w.p. pb (P) or pt (Q), else to neither. (alpha, beta) = (pt, pb) when
    alpha_is_pt (dataset: every other user holds x0), else (pb, pt).
    """
    with mpmath.workdps(60):
        e0 = mpmath.exp(mpmath.mpf(eps0))
        pt, pb = e0 / (e0 + k - 1), 1 / (e0 + k - 1)
        alpha, beta = (pt, pb) if alpha_is_pt else (pb, pt)
        rest_o = 1 - alpha - beta
        rest_u = 1 - pt - pb
        m = n - 1
        fact = [mpmath.factorial(i) for i in range(m + 1)]

        def mult(a: int, b: int) -> Any:
            if a < 0 or b < 0 or a + b > m:
                return mpmath.mpf(0)
            c = m - a - b
            return fact[m] / (fact[a] * fact[b] * fact[c]) * alpha**a * beta**b * rest_o**c

        table = {(a, b): mult(a, b) for a in range(-1, m + 2) for b in range(-1, m + 2)}
        total = mpmath.mpf(0)
        ee = mpmath.exp(mpmath.mpf(eps))
        for a in range(n + 1):
            for b in range(n + 1 - a):
                p = pt * table[(a - 1, b)] + pb * table[(a, b - 1)] + rest_u * table[(a, b)]
                q = pb * table[(a - 1, b)] + pt * table[(a, b - 1)] + rest_u * table[(a, b)]
                if p > ee * q:
                    total += p - ee * q
        return total


@pytest.mark.parametrize(
    ("n", "k", "eps0", "eps"),
    [(100, 4, 1.0, 0.1), (120, 2, 0.7, 0.05), (150, 10, 2.0, 0.5), (200, 3, 3.0, 2.5)],
)
@pytest.mark.parametrize("alpha_is_pt", [True, False])
def test_two_count_pair(n: int, k: int, eps0: float, eps: float, alpha_is_pt: bool) -> None:
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    alpha, beta = (mech.pt, mech.pb) if alpha_is_pt else (mech.pb, mech.pt)
    got = TwoCountPair(mechanism=mech, alpha=alpha, beta=beta).delta(eps)
    _check(got, _mp_two_count(n, k, eps0, alpha_is_pt, eps), eps, eps0)
