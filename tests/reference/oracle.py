"""Exhaustive exact oracle for the shuffled k-RR accountant (test reference, not production code).

Everything here is computed by brute force at 80 significant digits with mpmath (e^eps0 is
irrational in general, so exact rationals are not available; 80 digits is far beyond anything a
float-based accountant can resolve). Nothing here uses binomial tails or any other structure that
the production code relies on: histograms are built by dynamic programming over users (one user
convolved at a time) and hockey-stick divergences are plain sums over all outcomes.

Model (see docs/accounting.md): n users, values {0..k-1}, k-RR with parameter eps0 reports
the true value w.p. pt = e^eps0/(e^eps0+k-1) and each other value w.p. pb = 1/(e^eps0+k-1). The
distinguished user u holds 0 (dataset D, law P) or 1 (dataset D', law Q); the other n-1 users hold
the same values in both. The released output is the histogram (count per value) of all n reports.

Numbers: every ``eps0``/``eps`` argument may be an int, float, str or mpf; it is converted with
``mpmath.mpf`` at 80 digits. Returned values are mpf (80-digit mantissas).
"""

from __future__ import annotations

import functools
import itertools
from collections import defaultdict
from typing import Any, TypeAlias

import mpmath

DPS = 80

Mpf: TypeAlias = Any  # an mpmath.mpf (mpmath ships no type information)
Number: TypeAlias = Any  # int | float | str | mpmath.mpf
Histogram: TypeAlias = tuple[int, ...]
Dist: TypeAlias = dict[Histogram, Mpf]


# --------------------------------------------------------------------------------------------
# k-RR and histogram distributions
# --------------------------------------------------------------------------------------------


def krr_probs(k: int, eps0: Number) -> tuple[Mpf, Mpf]:
    """(pt, pb) of k-RR: pt = e^eps0/(e^eps0+k-1), pb = 1/(e^eps0+k-1)."""
    if k < 2:
        raise ValueError("k must be >= 2")
    with mpmath.workdps(DPS):
        e = mpmath.exp(mpmath.mpf(eps0))
        den = e + (k - 1)
        return e / den, 1 / den


def _report_probs(value: int, k: int, pt: Mpf, pb: Mpf) -> list[Mpf]:
    """Distribution of the k-RR report of a user holding ``value``."""
    return [pt if r == value else pb for r in range(k)]


def _add_user(dist: Dist, report_probs: list[Mpf]) -> Dist:
    """Convolve a histogram distribution with one more user's report distribution."""
    out: defaultdict[Histogram, Mpf] = defaultdict(lambda: mpmath.mpf(0))
    for hist, p in dist.items():
        for r, q in enumerate(report_probs):
            h = list(hist)
            h[r] += 1
            out[tuple(h)] += p * q
    return dict(out)


def _check_values(values: tuple[int, ...], k: int) -> None:
    for v in values:
        if not 0 <= v < k:
            raise ValueError(f"value {v} not in range(k={k})")


@functools.lru_cache(maxsize=8192)
def _others_dist_cached(others: tuple[int, ...], k: int, pt: Mpf, pb: Mpf) -> Dist:
    """Histogram distribution of the reports of ``others`` (DP; prefixes are cached, so the
    multisets enumerated in lexicographic order by worst_case_delta share their work).

    The returned dict is shared through the cache: callers must not mutate it."""
    with mpmath.workdps(DPS):
        if not others:
            return {(0,) * k: mpmath.mpf(1)}
        prev = _others_dist_cached(others[:-1], k, pt, pb)
        return _add_user(prev, _report_probs(others[-1], k, pt, pb))


def histogram_distribution(
    others: tuple[int, ...], user_value: int, k: int, eps0: Number
) -> dict[tuple[int, ...], Mpf]:
    """Exact law of the histogram (k counts) of the n = len(others)+1 k-RR reports, where the
    other users hold ``others`` and u holds ``user_value``. Dynamic programming over users."""
    others = tuple(others)
    _check_values((*others, user_value), k)
    pt, pb = krr_probs(k, eps0)
    with mpmath.workdps(DPS):
        base = _others_dist_cached(others, k, pt, pb)
        return _add_user(base, _report_probs(user_value, k, pt, pb))


def histogram_distribution_bruteforce(
    others: tuple[int, ...], user_value: int, k: int, eps0: Number
) -> dict[tuple[int, ...], Mpf]:
    """Same as histogram_distribution, by enumerating all k^n report tuples (small n only)."""
    values = (*tuple(others), user_value)
    _check_values(values, k)
    n = len(values)
    if k**n > 200_000:
        raise ValueError(f"k^n = {k**n} report tuples is too many for brute force")
    pt, pb = krr_probs(k, eps0)
    out: defaultdict[Histogram, Mpf] = defaultdict(lambda: mpmath.mpf(0))
    with mpmath.workdps(DPS):
        for reports in itertools.product(range(k), repeat=n):
            prob = mpmath.mpf(1)
            for x, r in zip(values, reports, strict=True):
                prob *= pt if r == x else pb
            counts = [0] * k
            for r in reports:
                counts[r] += 1
            out[tuple(counts)] += prob
    return dict(out)


# --------------------------------------------------------------------------------------------
# Hockey-stick divergences
# --------------------------------------------------------------------------------------------


def hockey_stick(P: dict[Any, Mpf], Q: dict[Any, Mpf], eps: Number) -> Mpf:  # noqa: N803
    """H_eps(P||Q) = sum_o max(0, P(o) - e^eps Q(o)), summed over the support of P."""
    with mpmath.workdps(DPS):
        e = mpmath.exp(mpmath.mpf(eps))
        total = mpmath.mpf(0)
        for o, p in P.items():
            d = p - e * Q.get(o, 0)
            if d > 0:
                total += d
        return +total


def _pair_for_others(others: tuple[int, ...], k: int, eps0: Number) -> tuple[Dist, Dist]:
    """(P, Q): histogram laws with u holding 0 resp. 1; the others' law is computed once."""
    _check_values(others, k)
    if k < 2:
        raise ValueError("k must be >= 2")
    pt, pb = krr_probs(k, eps0)
    with mpmath.workdps(DPS):
        base = _others_dist_cached(tuple(others), k, pt, pb)
        dist_p = _add_user(base, _report_probs(0, k, pt, pb))
        dist_q = _add_user(base, _report_probs(1, k, pt, pb))
    return dist_p, dist_q


def dataset_delta_pair(
    others: tuple[int, ...], k: int, eps0: Number, eps: Number
) -> tuple[Mpf, Mpf]:
    """(H(P||Q), H(Q||P)) for the full histogram; P: u holds 0, Q: u holds 1."""
    dist_p, dist_q = _pair_for_others(tuple(others), k, eps0)
    return hockey_stick(dist_p, dist_q, eps), hockey_stick(dist_q, dist_p, eps)


def dataset_delta(others: tuple[int, ...], k: int, eps0: Number, eps: Number) -> Mpf:
    """max(H(P||Q), H(Q||P)) for the full histogram; P: u holds 0, Q: u holds 1."""
    a, b = dataset_delta_pair(others, k, eps0, eps)
    return max(a, b)


def worst_case_delta(n: int, k: int, eps0: Number, eps: Number) -> tuple[Mpf, tuple[int, ...]]:
    """Tight delta(eps) of shuffled k-RR: max of dataset_delta over every multiset of values of
    the other n-1 users (the histogram is symmetric in users; by the symmetry of k-RR under
    permutations of the alphabet, (x0, x1) = (0, 1) loses no generality).

    Returns (worst delta, witness ``others`` tuple). The first maximiser in lexicographic order
    is returned."""
    if n < 1:
        raise ValueError("n must be >= 1")
    best: Mpf = None
    witness: tuple[int, ...] = ()
    for others in itertools.combinations_with_replacement(range(k), n - 1):
        d = dataset_delta(others, k, eps0, eps)
        if best is None or d > best:
            best, witness = d, others
    return best, witness


# --------------------------------------------------------------------------------------------
# The seed paper's single-bin model and the "all others hold x2" family
# --------------------------------------------------------------------------------------------


def _binomial_pmf(m: int, p: Mpf) -> list[Mpf]:
    with mpmath.workdps(DPS):
        q = 1 - p
        return [mpmath.binomial(m, i) * p**i * q ** (m - i) for i in range(m + 1)]


def _convolve(a: list[Mpf], b: list[Mpf]) -> list[Mpf]:
    with mpmath.workdps(DPS):
        out = [mpmath.mpf(0)] * (len(a) + len(b) - 1)
        for i, x in enumerate(a):
            for j, y in enumerate(b):
                out[i + j] += x * y
        return out


def single_bin_exact(n: int, k: int, eps0: Number, nx0: int, eps: Number) -> tuple[Mpf, Mpf]:
    """(H(P0||P1), H(P1||P0)) for the seed paper's single-bin model: B = Bin(nx0, pt) +
    Bin(n-1-nx0, pb) (count of x0 among the others' reports), P0 = B + Bern(pt),
    P1 = B + Bern(pb)."""
    if not 0 <= nx0 <= n - 1:
        raise ValueError("need 0 <= nx0 <= n-1")
    pt, pb = krr_probs(k, eps0)
    with mpmath.workdps(DPS):
        others = _convolve(_binomial_pmf(nx0, pt), _binomial_pmf(n - 1 - nx0, pb))
        d0 = dict(enumerate(_convolve(others, [1 - pt, pt])))
        d1 = dict(enumerate(_convolve(others, [1 - pb, pb])))
    return hockey_stick(d0, d1, eps), hockey_stick(d1, d0, eps)


def x2_dataset_delta(n: int, k: int, eps0: Number, eps: Number) -> Mpf:
    """dataset_delta (full histogram, both directions) when all n-1 other users hold 2 (k >= 3)."""
    if k < 3:
        raise ValueError("the x2 family needs k >= 3")
    return dataset_delta((2,) * (n - 1), k, eps0, eps)
