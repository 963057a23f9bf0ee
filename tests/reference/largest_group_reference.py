"""Brute-force mpmath reference for the largest-group bound (test reference, not production code).

Definition (accountant/bounds/largest_group.py has the argument). k-RR of any value is, w.p.
gamma = (e^eps0 - 1) / (e^eps0 + k - 1), the true value and otherwise (w.p. beta = k / (e^eps0 +
k - 1)) a uniform value over all k. For a holder type w ("x0": value 0, "other": value 2, k >= 3)
and a group size 0 <= m <= n - 1, with r = n - 1 - m:

    Delta_w(m) = sum_{J=0}^{r} Binom(J; r, beta) * delta(u + m holders of w + J uniform reports)

where delta is max(H(P||Q), H(Q||P)) between the laws of the full k-count histogram with u
holding 0 (P) and 1 (Q). The bound is max over the types of Delta_w(ceil((n - 1) / k)).

Nothing clever: the full histogram law (dict histogram -> mpf) is built by dynamic programming
over users, the J uniform users are added one at a time (law J reuses law J - 1), and the
hockey-stick divergences are plain sums over all outcomes, at oracle.DPS (80) digits.
"""

from __future__ import annotations

import mpmath

from tests.reference.oracle import (
    DPS,
    Dist,
    Mpf,
    Number,
    _add_user,
    _report_probs,
    hockey_stick,
    krr_probs,
)

#: The value a holder of each type holds (u holds 0 under P and 1 under Q).
HOLDER_VALUES = {"x0": 0, "other": 2}


def holder_value(holder: str, k: int) -> int:
    """The value held by the group of type ``holder``; ValueError for an unknown type, or for
    "other" with k < 3 (no third value)."""
    if holder not in HOLDER_VALUES:
        raise ValueError(f"holder must be one of {tuple(HOLDER_VALUES)}, got {holder!r}")
    if holder == "other" and k < 3:
        raise ValueError("holder 'other' needs k >= 3")
    return HOLDER_VALUES[holder]


def blanket_probability(k: int, eps0: Number) -> Mpf:
    """beta = k / (e^eps0 + k - 1): the probability that a k-RR report is a uniform draw."""
    with mpmath.workdps(DPS):
        return k / (mpmath.exp(mpmath.mpf(eps0)) + (k - 1))


def view_delta(law: Dist, k: int, eps0: Number, eps: Number) -> Mpf:
    """max(H(P||Q), H(Q||P)) where P (Q) adds to the others' histogram law ``law`` the report of
    u holding 0 (1)."""
    pt, pb = krr_probs(k, eps0)
    with mpmath.workdps(DPS):
        dist_p = _add_user(law, _report_probs(0, k, pt, pb))
        dist_q = _add_user(law, _report_probs(1, k, pt, pb))
    return max(hockey_stick(dist_p, dist_q, eps), hockey_stick(dist_q, dist_p, eps))


def holders_law(value: int, m: int, k: int, eps0: Number) -> Dist:
    """Histogram law of the k-RR reports of m users who all hold ``value``."""
    if not 0 <= value < k:
        raise ValueError(f"value {value} not in range(k={k})")
    pt, pb = krr_probs(k, eps0)
    law: Dist = {(0,) * k: mpmath.mpf(1)}
    with mpmath.workdps(DPS):
        for _ in range(m):
            law = _add_user(law, _report_probs(value, k, pt, pb))
    return law


def group_view_deltas(n: int, k: int, eps0: Number, eps: Number, value: int, m: int) -> list[Mpf]:
    """[delta(u + m holders of ``value`` + J uniform reports) for J = 0..n - 1 - m] (one law per
    J, each the previous one plus a uniform user)."""
    if not 0 <= m <= n - 1:
        raise ValueError(f"need 0 <= m <= n - 1 = {n - 1}, got m = {m}")
    law = holders_law(value, m, k, eps0)
    with mpmath.workdps(DPS):
        uniform = [mpmath.mpf(1) / k] * k
    deltas = [view_delta(law, k, eps0, eps)]
    for _ in range(n - 1 - m):
        with mpmath.workdps(DPS):
            law = _add_user(law, uniform)
        deltas.append(view_delta(law, k, eps0, eps))
    return deltas


def value_view_delta(n: int, k: int, eps0: Number, eps: Number, value: int, m: int) -> Mpf:
    """sum_J Binom(J; r, beta) delta(u + m holders of ``value`` + J uniform reports),
    r = n - 1 - m, for any value in range(k) (the tests check that 1 gives the same as 0, and
    every value >= 2 the same as 2: the reason two holder types suffice)."""
    deltas = group_view_deltas(n, k, eps0, eps, value, m)
    r = n - 1 - m
    beta = blanket_probability(k, eps0)
    with mpmath.workdps(DPS):
        total = mpmath.mpf(0)
        for j, d in enumerate(deltas):
            total += mpmath.binomial(r, j) * beta**j * (1 - beta) ** (r - j) * d
        return +total


def group_view_delta(n: int, k: int, eps0: Number, eps: Number, holder: str, m: int) -> Mpf:
    """Delta_w(m) = sum_J Binom(J; r, beta) delta(u + m holders of w + J uniform reports),
    r = n - 1 - m (module docstring); ``holder`` is "x0" or "other"."""
    return value_view_delta(n, k, eps0, eps, holder_value(holder, k), m)


def minimum_group_size(n: int, k: int) -> int:
    """ceil((n - 1) / k), by the pigeonhole principle the least size of the largest group."""
    return -(-(n - 1) // k)


def largest_group(n: int, k: int, eps0: Number, eps: Number) -> Mpf:
    """The largest-group bound: max over the holder types (x0 always, other if k >= 3) of
    Delta_w(ceil((n - 1) / k))."""
    m = minimum_group_size(n, k)
    holders = ("x0", "other") if k >= 3 else ("x0",)
    return max(group_view_delta(n, k, eps0, eps, h, m) for h in holders)
