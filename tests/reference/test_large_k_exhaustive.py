"""Where the worst case lives at large k: every dataset of the others at n <= 6 for k = 8 and 15,
in 50-digit mpmath, against the family F(a) (a others hold x0, the rest one third value).

The exhaustive oracle of test_accountant_exhaustive.py keeps every count of the histogram, so it
stops at k = 4 (30 users) or 6. Values that nobody holds can be lumped: every user reports each of
them w.p. pb whatever he holds, so given their total the split among them is the same
multinomial under both laws and independent of the rest; the likelihood ratio depends on the
lumped count only, and the hockey-stick divergence is unchanged. A dataset is then
(c0, c1, a partition of the remaining others over third values), and its histogram law has
2 + (number of parts) + 1 counts. The test fails if some dataset outside F has a larger delta
than every F(a) (which would be a finding, docs/accounting.md "The lower end"), and checks that
largest-group is above the worst case.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterator

import mpmath
import pytest

from shuffledp.accountant import LargestGroup, ShuffledKRR

pytestmark = pytest.mark.slow

DIGITS = 50
Law = dict[tuple[int, ...], mpmath.mpf]


def partitions(total: int, largest: int, parts: int) -> Iterator[tuple[int, ...]]:
    """Non-increasing tuples of positive integers summing to total, each <= largest, at most
    ``parts`` of them."""
    if total == 0:
        yield ()
        return
    if parts == 0:
        return
    for first in range(min(total, largest), 0, -1):
        for rest in partitions(total - first, first, parts - 1):
            yield (first, *rest)


def law_of(values: tuple[int, ...], named: int, k: int, eps0: float) -> Law:
    """Histogram law of users holding ``values`` (each < named) over the ``named`` counts and one
    lumped count of the k - named values nobody holds (exact DP over users, 50 digits)."""
    with mpmath.workdps(DIGITS):
        e0 = mpmath.exp(mpmath.mpf(eps0))
        pt, pb = e0 / (e0 + k - 1), 1 / (e0 + k - 1)
        law: Law = {(0,) * (named + 1): mpmath.mpf(1)}
        for v in values:
            out: defaultdict[tuple[int, ...], mpmath.mpf] = defaultdict(mpmath.mpf)
            for h, p in law.items():
                for y in range(named + 1):
                    w = (pt if y == v else pb) if y < named else (k - named) * pb
                    hh = list(h)
                    hh[y] += 1
                    out[tuple(hh)] += p * w
            law = dict(out)
        return law


def dataset_delta(
    c0: int, c1: int, parts: tuple[int, ...], k: int, eps0: float, eps: float
) -> mpmath.mpf:
    """max(H(P||Q), H(Q||P)) for u on x0 (P) or x1 (Q), the others as given."""
    others = (0,) * c0 + (1,) * c1 + tuple(2 + i for i, m in enumerate(parts) for _ in range(m))
    named = 2 + len(parts)
    with mpmath.workdps(DIGITS):
        p, q = law_of((*others, 0), named, k, eps0), law_of((*others, 1), named, k, eps0)
        ee = mpmath.exp(mpmath.mpf(eps))
        zero = mpmath.mpf(0)
        forward = sum((max(zero, p[h] - ee * q.get(h, zero)) for h in p), zero)
        backward = sum((max(zero, q[h] - ee * p.get(h, zero)) for h in q), zero)
        return max(forward, backward)


@functools.cache
def worst_cases(n: int, k: int, eps0: float, eps: float) -> tuple[mpmath.mpf, mpmath.mpf, str]:
    """(max over every dataset, max over F(a), the worst dataset)."""
    best, best_f, witness = mpmath.mpf(-1), mpmath.mpf(-1), ""
    for c0 in range(n):
        for c1 in range(n - c0):
            for parts in partitions(n - 1 - c0 - c1, n - 1, k - 2):
                value = dataset_delta(c0, c1, parts, k, eps0, eps)
                if value > best:
                    best, witness = value, f"c0={c0}, c1={c1}, third values {parts}"
                if c1 == 0 and len(parts) <= 1:
                    best_f = max(best_f, value)
                if c0 == 0 and len(parts) <= 1:  # F(a) with x0 and x1 swapped: same delta
                    best_f = max(best_f, value)
    return best, best_f, witness


CASES = [
    (n, k, eps0, frac)
    for n, k in ((5, 8), (6, 15))
    for eps0 in (0.5, 2.0, 4.0)
    for frac in (0.1, 0.5, 0.9)
]


@pytest.mark.parametrize(("n", "k", "eps0", "frac"), CASES)
def test_the_worst_dataset_is_in_family_f_at_large_k(
    n: int, k: int, eps0: float, frac: float
) -> None:
    best, best_f, witness = worst_cases(n, k, eps0, frac * eps0)
    with mpmath.workdps(DIGITS):
        excess = best / best_f - 1
        assert excess <= mpmath.mpf("1e-40"), f"worst dataset outside F: {witness}, {excess}"


@pytest.mark.parametrize(("n", "k", "eps0", "frac"), CASES)
def test_largest_group_is_above_the_worst_case_at_large_k(
    n: int, k: int, eps0: float, frac: float
) -> None:
    best, _, witness = worst_cases(n, k, eps0, frac * eps0)
    bracket = LargestGroup().bracket(ShuffledKRR(n=n, k=k, eps0=eps0), frac * eps0)
    assert bracket.upper >= best, witness
