"""Independent mpmath references for the optimal-blanket upper bound and the F(a) datasets.

Test reference, not production code. Everything is computed at :data:`DPS` significant digits
with mpmath; every ``eps0``/``eps`` argument is converted with ``mpmath.mpf`` (a float converts
exactly, so ``eps0=0.05`` means the binary double nearest 0.05, as in the production code).

Notation (docs/accounting.md): E0 = e^eps0, Ee = e^eps, D = E0 + k - 1, pt = E0 / D,
pb = 1 / D; the distinguished user u holds x0 (law P) or x1 (law Q), the other n - 1 users are
the same in both; the released output is the histogram of all n k-RR reports.

1. The "G-form": delta = (1/n) E[(G_1 + ... + G_n)_+], G_i i.i.d. over four categories with values
   g1..g4 and probabilities p1..p4 (:func:`g_form_delta`). The counts (m1, m2, m3, m4) are
   multinomial; the sum runs over (m1, m2) exactly, and given (m1, m2) the split of the other
   N = n - m1 - m2 draws between categories 3 and 4 is X ~ Bin(N, p3 / (p3 + p4)), so the
   inner sum is E[(alpha + beta X)_+] with alpha = m1 g1 + m2 g2 + N g4, beta = g3 - g4.
   That binomial expectation is summed as non-negative terms (:func:`_positive_part`): for
   beta < 0 and t the last j with alpha + beta j > 0,
       sum_{j<=t} pmf(j) (alpha + beta j) = |beta| sum_{i<t} F(i) + (alpha + beta t) F(t)
   (F the binomial CDF; sum_{j<=t} (t - j) pmf(j) = sum_{i<t} F(i)); for beta > 0 the same with
   X' = N - X ~ Bin(N, 1 - theta). O(n^2) terms, so n = 500 is a few seconds.
   Used with the forms stated in the brief (optimal-blanket, F(0), F(n-1)); whether those forms
   equal the datasets' exact deltas is checked against the exhaustive oracles and against 2.

2. F(a), general a (:func:`family_f_directions`), derived here independently of 1. k >= 3: a of
   the others hold x0, b = n - 1 - a hold x2. Values 3..k-1 are held by nobody and every user
   reports each of them w.p. pb, so given their total their split is uniform under P and Q:
   (N0, N1, N2) is sufficient. Among the others, x1 is reported w.p. pb by everybody too, so
   "x1 or a rest value" ("other", w.p. (k-2) pb) is uniform over those k-2 values: the others'
   law is O(N0', N1', N2') = W(N0', N2') Bin(M', theta)(N1'), theta = 1/(k-2),
   M' = n-1-N0'-N2', with W the law of (N0', N2'): the convolution of the trinomials
   Tri(a; pt, pb, (k-2)pb) (x0-holders: x0, x2, other) and Tri(b; pb, pt, (k-2)pb)
   (x2-holders). Adding u's report and using Bin(M-1, theta)(j-1) = Bin(M, theta)(j) j/(M theta),
   Bin(M-1, theta)(j) = Bin(M, theta)(j) (M-j)/(M (1-theta)), with M = n - N0 - N2,
   W1 = W(N0-1, N2), W2 = W(N0, N2-1), W3 = W(N0, N2) (0 outside the support; W3 = 0 if M = 0):
       P(N0, N1, N2) = Bin(M, theta)(N1) [pt W1 + pb W2 + (k-2) pb W3]
       Q(N0, N1, N2) = Bin(M, theta)(N1) [pb W1 + pb W2 + (k-2) W3 (pb M + (pt-pb) N1) / M].
   So given (N0, N2) the x1 count is Bin(M, theta) noise under P, and P - e^eps Q is linear in
   N1: each (N0, N2) contributes E[(alpha + beta N1)_+] (same summation as in 1). O(n^2) cells
   after W, which costs min(a, b) * n^2 / 2 DP updates. k = 2: a hold x0, the rest x1; the
   histogram is the count of x0, Bin(a, pt) + Bin(n-1-a, pb) + u's Bern(pt) (P) / Bern(pb) (Q).

Rounding: mpmath at 60 digits; the only subtractions are in forming alpha, beta (the exact
privacy-loss margins), so results carry ~50 correct digits except when a loss value coincides
with eps to within 1e-50 (then that one term is off by a relative 1e-50 of itself). Exact zeros:
when no G value (resp. no loss value) can exceed 0 (eps >= eps0), 0 is returned without summing.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, TypeAlias

import mpmath

DPS = 60

Mpf: TypeAlias = Any  # an mpmath.mpf (mpmath ships no type information)
Number: TypeAlias = Any  # int | float | str | mpmath.mpf


# --------------------------------------------------------------------------------------------
# Parameters and binomial tables


def params(k: int, eps0: Number, eps: Number) -> tuple[Mpf, Mpf, Mpf, Mpf, Mpf]:
    """(E0, Ee, D, pt, pb) at DPS digits."""
    if k < 2:
        raise ValueError("k must be >= 2")
    with mpmath.workdps(DPS):
        e0 = mpmath.exp(mpmath.mpf(eps0))
        ee = mpmath.exp(mpmath.mpf(eps))
        d = e0 + (k - 1)
        return e0, ee, d, e0 / d, 1 / d


@functools.lru_cache(maxsize=64)
def _factorials(n: int) -> tuple[Mpf, ...]:
    with mpmath.workdps(DPS):
        out = [mpmath.mpf(1)]
        for i in range(1, n + 1):
            out.append(out[-1] * i)
        return tuple(out)


def _powers(x: Mpf, n: int) -> list[Mpf]:
    with mpmath.workdps(DPS):
        out = [mpmath.mpf(1)]
        for _ in range(n):
            out.append(out[-1] * x)
        return out


class BinomialTails:
    """For X ~ Bin(M, theta), every M in 0..m_max: cdf[M][t] = P(X <= t) and
    cdf_sum[M][t] = sum_{i < t} cdf[M][i] (= E[(t - X) 1{X <= t}])."""

    def __init__(self, m_max: int, theta: Mpf) -> None:
        with mpmath.workdps(DPS):
            theta = mpmath.mpf(theta)
            fact = _factorials(m_max)
            up = _powers(theta, m_max)
            down = _powers(1 - theta, m_max)
            self.cdf: list[list[Mpf]] = []
            self.cdf_sum: list[list[Mpf]] = []
            for m in range(m_max + 1):
                cdf, sums = [], []
                run, acc = mpmath.mpf(0), mpmath.mpf(0)
                for j in range(m + 1):
                    sums.append(acc)
                    run += fact[m] / (fact[j] * fact[m - j]) * up[j] * down[m - j]
                    cdf.append(run)
                    acc += run
                self.cdf.append(cdf)
                self.cdf_sum.append(sums)


def _lower_part(alpha: Mpf, slope: Mpf, m: int, tails: BinomialTails) -> Mpf:
    """E[(alpha - slope X)_+] for X ~ Bin(m, theta) of ``tails``, slope >= 0, as non-negative
    terms: slope * sum_{i<t} F(i) + (alpha - slope t) F(t), t the last j with a positive term."""
    if alpha <= 0:
        return mpmath.mpf(0)
    if slope == 0:
        return alpha
    t = min(m, int(mpmath.ceil(alpha / slope)) - 1)
    return slope * tails.cdf_sum[m][t] + (alpha - slope * t) * tails.cdf[m][t]


def _positive_part(
    alpha: Mpf, beta: Mpf, m: int, tails: BinomialTails, mirror: BinomialTails
) -> Mpf:
    """E[(alpha + beta X)_+], X ~ Bin(m, theta); ``mirror`` holds Bin(., 1 - theta)."""
    if beta <= 0:
        return _lower_part(alpha, -beta, m, tails)
    # X = m - X' with X' ~ Bin(m, 1 - theta): alpha + beta X = (alpha + beta m) - beta X'.
    return _lower_part(alpha + beta * m, beta, m, mirror)


# --------------------------------------------------------------------------------------------
# 1. The G-form (1/n) E[(G_1 + ... + G_n)_+]


def g_form_delta(n: int, values: Sequence[Mpf], probs: Sequence[Mpf]) -> Mpf:
    """(1/n) E[(sum of n i.i.d. G)_+], G = values[i] w.p. probs[i] (exactly four categories;
    pass a value with probability 0 to pad)."""
    if len(values) != 4 or len(probs) != 4:
        raise ValueError("exactly four categories")
    with mpmath.workdps(DPS):
        g1, g2, g3, g4 = (mpmath.mpf(v) for v in values)
        p1, p2, p3, p4 = (mpmath.mpf(p) for p in probs)
        if all(g <= 0 for g, p in zip((g1, g2, g3, g4), (p1, p2, p3, p4), strict=True) if p > 0):
            return mpmath.mpf(0)  # the sum is never positive: exactly 0
        r = p3 + p4
        theta = p3 / r if r > 0 else mpmath.mpf(0)
        tails, mirror = BinomialTails(n, theta), BinomialTails(n, 1 - theta)
        fact = _factorials(n)
        w1, w2, wr = _powers(p1, n), _powers(p2, n), _powers(r, n)
        beta = g3 - g4
        # increasing m2 (one draw moved from categories 3/4 to 2) only lowers both ends of the
        # inner range when g2 <= g3, g4: then the m2 loop stops at the first all-zero term
        monotone = g2 <= g3 and g2 <= g4
        terms = []
        for m1 in range(n + 1):
            for m2 in range(n - m1 + 1):
                m = n - m1 - m2
                alpha = m1 * g1 + m2 * g2 + m * g4
                inner = _positive_part(alpha, beta, m, tails, mirror)
                if inner == 0:
                    if monotone:
                        break
                    continue
                weight = fact[n] / (fact[m1] * fact[m2] * fact[m]) * w1[m1] * w2[m2] * wr[m]
                terms.append(weight * inner)
        return mpmath.fsum(terms) / n


def optimal_blanket_forms(k: int, eps0: Number, eps: Number) -> tuple[list[Mpf], list[Mpf]]:
    """Su, Cheng, Wang (IEEE S&P 2026) privacy-blanket G for k-RR, as stated in docs/accounting.md
    ("optimal-blanket"): E0-Ee w.p. 1/D; 1-Ee E0 w.p. 1/D; 1-Ee w.p. (k-2)/D; 0 w.p. (E0-1)/D."""
    e0, ee, d, _, _ = params(k, eps0, eps)
    with mpmath.workdps(DPS):
        return [e0 - ee, 1 - ee * e0, 1 - ee, mpmath.mpf(0)], [
            1 / d,
            1 / d,
            (k - 2) / d,
            (e0 - 1) / d,
        ]


def optimal_blanket_reference(n: int, k: int, eps0: Number, eps: Number) -> Mpf:
    """The optimal-blanket upper bound (1/n) E[(G_1 + ... + G_n)_+]."""
    values, probs = optimal_blanket_forms(k, eps0, eps)
    return g_form_delta(n, values, probs)


def f0_g_form(n: int, k: int, eps0: Number, eps: Number) -> Mpf:
    """F(0) (every other user holds x2, k >= 3) by the brief's G-form (both directions equal):
    E0-Ee w.p. pb; 1-Ee E0 w.p. pb; (1-Ee)/E0 w.p. pt; 1-Ee w.p. (k-3) pb."""
    if k < 3:
        raise ValueError("F(0) needs k >= 3")
    e0, ee, _, pt, pb = params(k, eps0, eps)
    with mpmath.workdps(DPS):
        return g_form_delta(
            n, [e0 - ee, 1 - ee * e0, (1 - ee) / e0, 1 - ee], [pb, pb, pt, (k - 3) * pb]
        )


def fall_g_form(n: int, k: int, eps0: Number, eps: Number) -> tuple[Mpf, Mpf]:
    """F(n-1) (every other user holds x0) by the brief's G-forms: (H(P||Q), H(Q||P))."""
    e0, ee, _, pt, pb = params(k, eps0, eps)
    with mpmath.workdps(DPS):
        zero = mpmath.mpf(0)
        pq = g_form_delta(n, [1 - ee / e0, 1 - ee * e0, 1 - ee, zero], [pt, pb, (k - 2) * pb, zero])
        qp = g_form_delta(n, [e0 - ee, 1 / e0 - ee, 1 - ee, zero], [pb, pt, (k - 2) * pb, zero])
        return pq, qp


# --------------------------------------------------------------------------------------------
# 2. F(a) for general a, from the sufficient counts


def _trinomial(c: int, pu: Mpf, pv: Mpf, po: Mpf, size: int) -> list[list[Mpf]]:
    """table[u][v] = P(U = u, V = v) for (U, V, rest) ~ Mult(c; pu, pv, po), in a size x size
    table (zero outside u + v <= c)."""
    fact = _factorials(c)
    wu, wv, wo = _powers(pu, c), _powers(pv, c), _powers(po, c)
    zero = mpmath.mpf(0)
    table = [[zero] * size for _ in range(size)]
    for u in range(c + 1):
        for v in range(c - u + 1):
            table[u][v] = (
                fact[c] / (fact[u] * fact[v] * fact[c - u - v]) * wu[u] * wv[v] * wo[c - u - v]
            )
    return table


def _others_w(n: int, k: int, a: int, pt: Mpf, pb: Mpf) -> list[list[Mpf]]:
    """W[u][v]: law of (N0', N2') of the n-1 others, a holding x0 and b = n-1-a holding x2.
    The larger group in closed form, the smaller added one user at a time."""
    b = n - 1 - a
    other = (k - 2) * pb
    size = n + 1
    x0_user, x2_user = (pt, pb, other), (pb, pt, other)
    if a >= b:
        table, small, user = _trinomial(a, *x0_user, size), b, x2_user
    else:
        table, small, user = _trinomial(b, *x2_user, size), a, x0_user
    pu, pv, po = user
    filled = max(a, b)
    for _ in range(small):
        filled += 1
        new = [[mpmath.mpf(0)] * size for _ in range(size)]
        for u in range(filled + 1):
            row, prev = table[u], table[u - 1] if u > 0 else None
            out = new[u]
            for v in range(filled - u + 1):
                s = po * row[v]
                if v > 0:
                    s += pv * row[v - 1]
                if prev is not None:
                    s += pu * prev[v]
                out[v] = s
        table = new
    return table


def family_f_directions(n: int, k: int, eps0: Number, eps: Number, a: int) -> tuple[Mpf, Mpf]:
    """(H(P||Q), H(Q||P)) of the full histogram for the dataset F(a): a of the other n-1 users
    hold x0 and the other n-1-a hold one third value x2 (k >= 3) or x1 (k = 2)."""
    return family_f_directions_many(n, k, eps0, (eps,), a)[0]


def family_f_directions_many(
    n: int, k: int, eps0: Number, eps_values: Sequence[Number], a: int
) -> list[tuple[Mpf, Mpf]]:
    """:func:`family_f_directions` at several eps (the law is computed once)."""
    if not 0 <= a <= n - 1:
        raise ValueError(f"need 0 <= a <= n-1, got a={a}, n={n}")
    _, _, _, pt, pb = params(k, eps0, 0)
    out: list[tuple[Mpf, Mpf]] = []
    with mpmath.workdps(DPS):
        zero = mpmath.mpf(0)
        live = [mpmath.mpf(e) for e in eps_values]
        # every loss is <= eps0 (k-RR is eps0-LDP): exactly 0 from eps0 on
        results = {i: (zero, zero) for i, e in enumerate(live) if e >= mpmath.mpf(eps0)}
        todo = [(i, mpmath.exp(e)) for i, e in enumerate(live) if i not in results]
        if todo and k == 2:
            for i, ee in todo:
                results[i] = _family_f_k2(n, ee, pt, pb, a)
        elif todo:
            w = _others_w(n, k, a, pt, pb)
            theta = mpmath.mpf(1) / (k - 2)
            tails, mirror = BinomialTails(n, theta), BinomialTails(n, 1 - theta)
            diff = pt - pb
            sums: dict[int, tuple[list[Mpf], list[Mpf]]] = {i: ([], []) for i, _ in todo}
            for n0 in range(n + 1):
                for n2 in range(n - n0 + 1):
                    m = n - n0 - n2
                    w1 = w[n0 - 1][n2] if n0 > 0 else zero
                    w2 = w[n0][n2 - 1] if n2 > 0 else zero
                    w3 = w[n0][n2] if m > 0 else zero
                    a_p = pt * w1 + pb * w2 + (k - 2) * pb * w3
                    c_q = (k - 2) * w3
                    # Q's bracket: q0 + slope * N1, q0 = pb (w1 + w2) + c_q pb,
                    # slope = c_q (pt - pb) / M (no N1 term when M = 0)
                    q0 = pb * (w1 + w2) + c_q * pb
                    slope = c_q * diff / m if m > 0 else zero
                    for i, ee in todo:
                        pq, qp = sums[i]
                        pq.append(_positive_part(a_p - ee * q0, -ee * slope, m, tails, mirror))
                        qp.append(_positive_part(q0 - ee * a_p, slope, m, tails, mirror))
            for i, _ in todo:
                results[i] = (mpmath.fsum(sums[i][0]), mpmath.fsum(sums[i][1]))
        out = [results[i] for i in range(len(live))]
    return out


def _binomial_pmf(m: int, p: Mpf) -> list[Mpf]:
    fact = _factorials(m)
    up, down = _powers(p, m), _powers(1 - p, m)
    return [fact[m] / (fact[j] * fact[m - j]) * up[j] * down[m - j] for j in range(m + 1)]


def _family_f_k2(n: int, ee: Mpf, pt: Mpf, pb: Mpf, a: int) -> tuple[Mpf, Mpf]:
    """k = 2: the histogram is (N0, n - N0); others' N0' = Bin(a, pt) + Bin(n-1-a, pb)."""
    x, y = _binomial_pmf(a, pt), _binomial_pmf(n - 1 - a, pb)
    others = [mpmath.mpf(0)] * n
    for i, xi in enumerate(x):
        for j, yj in enumerate(y):
            others[i + j] += xi * yj

    def with_user(p: Mpf) -> list[Mpf]:
        return [
            (1 - p) * (others[s] if s < n else 0) + p * (others[s - 1] if s > 0 else 0)
            for s in range(n + 1)
        ]

    law_p, law_q = with_user(pt), with_user(pb)
    pq = mpmath.fsum(max(p - ee * q, 0) for p, q in zip(law_p, law_q, strict=True))
    qp = mpmath.fsum(max(q - ee * p, 0) for p, q in zip(law_p, law_q, strict=True))
    return pq, qp


def family_f_reference(n: int, k: int, eps0: Number, eps: Number, a: int) -> Mpf:
    """delta of the dataset F(a): max(H(P||Q), H(Q||P)) of the full histogram."""
    pq, qp = family_f_directions(n, k, eps0, eps, a)
    return max(pq, qp)
