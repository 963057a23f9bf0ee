"""Straightforward mpmath (60 digits) reference values of the published pairs (test reference).

Each pair is evaluated by enumerating every outcome, computing P(o) and Q(o) from the definition of
the pair, and summing max(0, P(o) - e^eps Q(o)) and max(0, Q(o) - e^eps P(o)). No tail formulas and
no conditioning tricks are used, so these are independent of the production code, which works
with binomial tails. Cost is O(n^2) mpf operations: intended for n up to a few hundred (n = 1000
takes a few seconds).

Every function returns the pair (H(P||Q), H(Q||P)) as mpf. ``eps0``/``eps`` may be int, float,
str or mpf; they are converted at 60 digits. For an irrational parameter pass an mpf computed at
>= 60 digits, e.g. ``mpmath.log(13)`` inside ``mpmath.workdps(80)`` (a float is exact only for
itself). Do any arithmetic on the results inside ``mpmath.workdps``: outside it mpmath rounds to
its global default of 15 digits.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any, TypeAlias

import mpmath

DPS = 60

Mpf: TypeAlias = Any  # an mpmath.mpf (mpmath ships no type information)
Number: TypeAlias = Any  # int | float | str | mpmath.mpf


def _krr(k: int, eps0: Number) -> tuple[Mpf, Mpf]:
    if k < 2:
        raise ValueError("k must be >= 2")
    e = mpmath.exp(mpmath.mpf(eps0))
    return e / (e + k - 1), 1 / (e + k - 1)


def _hockey_both(pairs: Iterable[tuple[Mpf, Mpf]], eps: Number) -> tuple[Mpf, Mpf]:
    """(sum max(0, P - e^eps Q), sum max(0, Q - e^eps P)) over the outcomes (P(o), Q(o))."""
    e = mpmath.exp(mpmath.mpf(eps))
    zero = mpmath.mpf(0)
    h_pq = zero
    h_qp = zero
    for p, q in pairs:
        d = p - e * q
        if d > 0:
            h_pq += d
        d = q - e * p
        if d > 0:
            h_qp += d
    return h_pq, h_qp


def _binomial_pmf(m: int, p: Mpf) -> list[Mpf]:
    """Bin(m, p) pmf, each term from mpmath.binomial and powers (0^0 = 1)."""
    q = 1 - p
    return [mpmath.binomial(m, i) * p**i * q ** (m - i) for i in range(m + 1)]


@functools.lru_cache(maxsize=4)
def _split_table(m: int, q: Mpf) -> tuple[tuple[Mpf, ...], ...]:
    """Row c (c = 0..m) is (0, T[c][0], ..., T[c][c], 0), zero-padded on both sides, where
    T[c][a] = Pr[C = c, A = a] for C ~ Bin(m, q), A | C ~ Bin(C, 1/2).

    This is also the law of (N1 + N2, N1) for (N1, N2) ~ Multinomial(m; q/2, q/2): the
    multinomial pmf m!/(a! b! (m-a-b)!) (q/2)^(a+b) (1-q)^(m-a-b) factorises this way. A row is
    built from the binomial coefficients by the ratio C(c, a+1) = C(c, a) (c-a)/(a+1).
    Cached (the table is the expensive part) so that a sweep over eps pays for it once; must be
    called at DPS digits."""
    outer = _binomial_pmf(m, q)
    half = mpmath.mpf(1) / 2
    zero = mpmath.mpf(0)
    table: list[tuple[Mpf, ...]] = []
    for c in range(m + 1):
        x = outer[c] * half**c
        row = [zero, x]
        for a in range(c):
            x = x * (c - a) / (a + 1)
            row.append(x)
        row.append(zero)
        table.append(tuple(row))
    return tuple(table)


def _padded_row(table: tuple[tuple[Mpf, ...], ...], c: int) -> tuple[Mpf, ...]:
    """Row c of a _split_table (index a+1 holds T[c][a]); all zeros (length c+3) outside 0..m."""
    if 0 <= c < len(table):
        return table[c]
    return (mpmath.mpf(0),) * max(c + 3, 0)


def strong_adversary(n: int, k: int, eps0: Number, eps: Number) -> tuple[Mpf, Mpf]:
    """(N1, N2) ~ Mult(n-1; pb, pb); P = law of (N1+1, N2), Q = law of (N1, N2+1).

    Outcome (i, j), t = i+j: P(i, j) = M(i-1, j) = T[t-1][i-1], Q(i, j) = M(i, j-1) = T[t-1][i]."""
    with mpmath.workdps(DPS):
        _, pb = _krr(k, eps0)
        table = _split_table(n - 1, 2 * pb)

        def pairs() -> Iterable[tuple[Mpf, Mpf]]:
            for t in range(1, n + 1):
                row = _padded_row(table, t - 1)
                for i in range(t + 1):
                    yield row[i], row[i + 1]

        return _hockey_both(pairs(), eps)


def _clone_pair(n: int, q: Mpf, p_delta: Mpf, eps: Number) -> tuple[Mpf, Mpf]:
    """C ~ Bin(n-1, q), A ~ Bin(C, 1/2), Delta ~ Bern(p_delta);
    P = law of (A+Delta, C-A+1-Delta), Q = law of (A+1-Delta, C-A+Delta).

    Outcome (x, y) has C = x+y-1. Under P: Delta=1 needs A=x-1, Delta=0 needs A=x;
    under Q: Delta=0 needs A=x-1, Delta=1 needs A=x."""
    table = _split_table(n - 1, q)
    r = 1 - p_delta

    def pairs() -> Iterable[tuple[Mpf, Mpf]]:
        for t in range(1, n + 1):
            row = _padded_row(table, t - 1)
            for x in range(t + 1):
                lo = row[x]  # Pr[C = t-1, A = x-1]
                hi = row[x + 1]  # Pr[C = t-1, A = x]
                yield p_delta * lo + r * hi, r * lo + p_delta * hi

    return _hockey_both(pairs(), eps)


def clones(n: int, eps0: Number, eps: Number) -> tuple[Mpf, Mpf]:
    """Feldman-McMillan-Talwar clones pair: C ~ Bin(n-1, e^-eps0),
    Delta ~ Bern(e^eps0/(e^eps0+1))."""
    with mpmath.workdps(DPS):
        e0 = mpmath.exp(mpmath.mpf(eps0))
        return _clone_pair(n, 1 / e0, e0 / (e0 + 1), eps)


def krr_clones(n: int, k: int, eps0: Number, eps: Number) -> tuple[Mpf, Mpf]:
    """(pt+pb) * the clones-type pair with C ~ Bin(n-1, 2pb), Delta ~ Bern(pt/(pt+pb))."""
    with mpmath.workdps(DPS):
        pt, pb = _krr(k, eps0)
        s = pt + pb
        a, b = _clone_pair(n, 2 * pb, pt / s, eps)
        return s * a, s * b


def wang_krr(n: int, k: int, eps0: Number, eps: Number) -> tuple[Mpf, Mpf]:
    """Others (N1, N2) ~ Mult(n-1; pb, pb); u adds 1 to N1 w.p. pt (P) / pb (Q), to N2 w.p.
    pb (P) / pt (Q), else nothing; the view is (N1', N2').

    Outcome (i, j), t = i+j: the others were at (i-1, j) = T[t-1][i-1], (i, j-1) = T[t-1][i]
    or (i, j) = T[t][i]."""
    with mpmath.workdps(DPS):
        pt, pb = _krr(k, eps0)
        rest = 1 - pt - pb
        table = _split_table(n - 1, 2 * pb)

        def pairs() -> Iterable[tuple[Mpf, Mpf]]:
            for t in range(n + 1):
                prev = _padded_row(table, t - 1)
                cur = _padded_row(table, t)
                for i in range(t + 1):
                    to1 = prev[i]  # u's report went to N1
                    to2 = prev[i + 1]  # u's report went to N2
                    none = cur[i + 1]  # u's report went elsewhere
                    yield (
                        pt * to1 + pb * to2 + rest * none,
                        pb * to1 + pt * to2 + rest * none,
                    )

        return _hockey_both(pairs(), eps)


def single_bin(n: int, k: int, eps0: Number, nx0: int, eps: Number) -> tuple[Mpf, Mpf]:
    """Seed-paper single-bin model: B = Bin(nx0, pt) + Bin(n-1-nx0, pb), P0 = B + Bern(pt),
    P1 = B + Bern(pb); returns (H(P0||P1), H(P1||P0)). Outcome s: P(s) = sum over the others'
    count b and u's bit of the product of the three pmfs."""
    if not 0 <= nx0 <= n - 1:
        raise ValueError("need 0 <= nx0 <= n-1")
    with mpmath.workdps(DPS):
        pt, pb = _krr(k, eps0)
        f = _binomial_pmf(nx0, pt)
        g = _binomial_pmf(n - 1 - nx0, pb)
        others = [mpmath.mpf(0)] * n
        for i, x in enumerate(f):
            for j, y in enumerate(g):
                others[i + j] += x * y

        def b(s: int) -> Mpf:
            return others[s] if 0 <= s < n else mpmath.mpf(0)

        pairs = (
            ((1 - pt) * b(s) + pt * b(s - 1), (1 - pb) * b(s) + pb * b(s - 1)) for s in range(n + 1)
        )
        return _hockey_both(pairs, eps)
