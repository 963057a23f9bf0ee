"""``largest-group``: an upper bound for shuffled k-RR that keeps the largest group of others hidden.

The argument (docs/accounting.md, "The largest-group bound", has it in full). k-RR of any value
is, w.p. gamma = (E0 - 1) / D, the true value and otherwise (w.p. beta = k / D) a uniform value
(E0 = e^eps0, D = E0 + k - 1). Take any dataset of the other n - 1 users and let G be its
largest group of users holding one and the same value w; by pigeonhole |G| >= m_min =
ceil((n - 1) / k). Tell the adversary, for every other user outside G (the pool, r = n - 1 - |G|
users), whether that user reported the true value. The histogram is a function of what the
adversary then sees, so its delta is at most the delta of that view (post-processing). The pool
users who reported their true value add known counts: what is left is u's report, the |G|
holders of w and the J pool users who reported a uniform value, J ~ Bin(r, beta), independent
of u. So

    delta(dataset) <= Delta_w(|G|) = E_J delta(u + |G| holders of w + J uniform reports).

By symmetry of k-RR only the type of w matters: w = x0, w = x1 (the same pair with P and Q
swapped) or w a third value. And Delta_w(m + 1) <= Delta_w(m): the view for m + 1 is a
post-processing of the view for m that does not depend on u (given J, a designated pool user was
a uniform reporter w.p. J / r, then J' = J - 1; otherwise add one report of w and J' = J). Hence

    sup over datasets <= max(Delta_x0(m_min), Delta_third(m_min)),

and Delta_w(0) is the privacy-blanket view, so this is never above optimal-blanket (Su, Cheng,
Wang). It is a valid upper bound for every dataset, not a conjecture; it needs no assumption
about where the worst case lives.

Evaluation (exact, float64 with a rigorous bracket). For each J the law of the others' counts
is built by dynamic programming (one uniform user at a time, from the m holders' law), so the
whole mixture costs O(n^3): it is evaluated up to MAX_N. For a third value w the counts on x0
and x1 are symmetric (each user puts equal mass on both), so given c = h0 + h1, h0 ~ Bin(c, 1/2)
and the sum over h0 of the positive part is a binomial tail (three suffix sums), leaving a sum
over (c, h_w). For w = x0 the sum runs over (h0, h1) directly.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from shuffledp.accountant.bounds.base import Bound, BoundKind, OutsideConditionsError
from shuffledp.accountant.bounds.blanket import require_eps0_in_range
from shuffledp.accountant.engines.numerics import FloatArray, log_binom_pmf, log_weight_error
from shuffledp.accountant.engines.pairs import Bracket
from shuffledp.accountant.mechanism import ShuffledKRR

#: Largest n evaluated: the mixture over J costs O(n^3): 0.03 s at n = 100, 0.5-0.8 s at 300
#: (12-30 s at 1000, where an eps(delta) search would take many minutes).
MAX_N = 300
U = 2.0**-53
#: Absolute error of one floating-point operation whose result is subnormal (underflow).
TINY = 2.0**-1074
#: Holder types: the group holds x0 (u's value under P), or a value other than x0 and x1.
HOLDERS = ("x0", "other")


def minimum_group_size(n: int, k: int) -> int:
    """ceil((n - 1) / k): the largest of k groups of n - 1 users has at least this many."""
    return -(-(n - 1) // k)


@dataclass(frozen=True, slots=True)
class _Rates:
    """k-RR's probabilities and the eps-dependent constants, each to a few ulp relative."""

    k: int
    pt: float
    pb: float
    pt_minus_pb: float
    ee: float
    ee_minus_1: float

    @staticmethod
    def of(mech: ShuffledKRR, eps: float) -> _Rates:
        return _Rates(
            mech.k,
            mech.pt_precise,
            mech.pb_precise,
            mech.pt_minus_pb,
            math.exp(eps),
            math.expm1(eps),
        )


def _shift(law: FloatArray, axis: int) -> FloatArray:
    """The law with one more count on ``axis`` (shape kept; the last index stays empty)."""
    out = np.zeros_like(law)
    if axis == 0:
        out[1:, :] = law[:-1, :]
    else:
        out[:, 1:] = law[:, :-1]
    return out


def _add_user(law: FloatArray, w0: float, w1: float, w_rest: float) -> FloatArray:
    """Add one user: +1 on axis 0 w.p. w0, on axis 1 w.p. w1, on neither w.p. w_rest."""
    return law * w_rest + w0 * _shift(law, 0) + w1 * _shift(law, 1)


def _holders_law(rates: _Rates, holder: str, m: int, size: int) -> FloatArray:
    """The law of the m holders' counts: (h0, h1) for x0, (c = h0 + h1, h_w) for a third value."""
    law = np.zeros((size, size))
    law[0, 0] = 1.0
    pt, pb, k = rates.pt, rates.pb, rates.k
    weights = (pt, pb, (k - 2) * pb) if holder == "x0" else (2 * pb, pt, (k - 3) * pb)
    for _ in range(m):
        law = _add_user(law, *weights)
    return law


def _uniform_weights(k: int, holder: str) -> tuple[float, float, float]:
    """One uniform report on the axes of :func:`_holders_law`."""
    return (1 / k, 1 / k, (k - 2) / k) if holder == "x0" else (2 / k, 1 / k, (k - 3) / k)


@functools.lru_cache(maxsize=64)
def _binomial_tails(size: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    """For c < size and 0 <= t <= c + 1: S0[c, t] = P(B >= t), S1[c, t] = E[B; B >= t] and
    S1c[c, t] = E[c - B; B >= t], B ~ Bin(c, 1/2). Pascal's rule with halving: each row adds
    one rounding per entry, so row c is within (c + 1) u relative; the suffix sums add c + 2
    more roundings (non-negative terms)."""
    pmf = np.zeros((size, size + 1))
    pmf[0, 0] = 1.0
    for c in range(1, size):
        pmf[c, 1:] = 0.5 * (pmf[c - 1, :-1] + pmf[c - 1, 1:])
        pmf[c, 0] = 0.5 * pmf[c - 1, 0]
    h = np.arange(size + 1, dtype=np.float64)
    c_col = np.arange(size, dtype=np.float64)[:, None]

    def suffix(a: FloatArray) -> FloatArray:
        return np.cumsum(a[:, ::-1], axis=1)[:, ::-1]

    s0 = suffix(pmf)
    s1 = suffix(pmf * h)
    s1c = suffix(pmf * np.maximum(c_col - h, 0.0))
    s0.flags.writeable = s1.flags.writeable = s1c.flags.writeable = False
    return s0, s1, s1c


def _sum_with_error(terms: FloatArray) -> tuple[float, float]:
    """(sum, relative error bound) of non-negative terms, accumulated in long double."""
    slack = terms.size * float(np.finfo(np.longdouble).eps) + U
    return float(np.sum(terms, dtype=np.longdouble)), slack


def _third_value_view(
    rates: _Rates, law: FloatArray, e_law: float, tails: tuple[FloatArray, FloatArray, FloatArray]
) -> tuple[float, float]:
    """[lower, upper] of delta(u + the others whose counts (c, h_w) have law ``law``), for a
    third value w: one direction suffices (swapping x0 and x1 maps P to Q and keeps the law).

    With b_c the Bin(c, 1/2) pmf, P(h0, c - h0, h_w) = b_c(h0) (A (pt h0 + pb h1) + W) and Q the
    same with pt and pb swapped, A = 2 law(c - 1, h_w) / c, W = pb law(c, h_w - 1) +
    (k - 3) pb law(c, h_w). P - Ee Q grows with h0, so its positive part sums over h0 >= t*:
    F(t) = sum_{h0 >= t} (P - Ee Q) is largest at t*, and every F(t) is at most the true sum.
    t* is the smallest integer above rhs (below); rhs is computed to well within 1/2, so t* is
    one of the three integers tried, and the upper end is the largest of their upper ends.
    """
    size = law.shape[0]
    c = np.arange(size, dtype=np.float64)[:, None]
    s0, s1, s1c = (table[:size] for table in tails)
    a = np.zeros_like(law)
    a[1:, :] = 2.0 * law[:-1, :] / c[1:]
    w = rates.pb * _shift(law, 1) + (rates.k - 3) * rates.pb * law
    mask = a > 0.0
    a, w = a[mask], w[mask]
    cc = np.broadcast_to(c, law.shape)[mask]
    ee, pt, pb = rates.ee, rates.pt, rates.pb
    slope = ee * pt - pb
    with np.errstate(over="ignore"):  # W / A = inf (A tiny): P < Ee Q at every h0 (eps > 0)
        dilution = rates.ee_minus_1 * (w / a) if rates.ee_minus_1 > 0.0 else 0.0 * w
        rhs = (slope * cc + dilution) / (rates.pt_minus_pb * (1.0 + ee))
    e = e_law + (2 * size + 6) * U + 16 * U  # law, suffix sums, products and sums
    rho = e + 20 * U * (ee * pt + pb) / slope + 20 * U
    near = rhs <= cc + 2.0
    if np.any(rho * np.abs(rhs[near]) >= 0.5):
        raise OutsideConditionsError("largest-group: a tail threshold is not resolved in float64")
    base = np.floor(np.minimum(rhs, cc + 2.0)) + 1.0
    rows = cc.astype(np.int64)
    up = np.zeros_like(a)
    lo = np.zeros_like(a)
    ee_lo, ee_hi = ee * (1 - 2 * U), ee * (1 + 2 * U)
    for offset in (-1.0, 0.0, 1.0):
        t = np.clip(base + offset, 0.0, cc + 1.0).astype(np.int64)
        t0, t1, t1c = s0[rows, t], s1[rows, t], s1c[rows, t]
        x = a * (pt * t1 + pb * t1c) + w * t0
        y = a * (pb * t1 + pt * t1c) + w * t0
        up = np.maximum(up, x * (1 + e) - ee_lo * y * (1 - e))
        lo = np.maximum(lo, x * (1 - e) - ee_hi * y * (1 + e))
    total_up, slack_up = _sum_with_error(np.maximum(up, 0.0))
    total_lo, slack_lo = _sum_with_error(np.maximum(lo, 0.0))
    return total_lo * (1 - slack_lo), total_up * (1 + slack_up)


def _x0_view(rates: _Rates, law: FloatArray, e_law: float) -> tuple[float, float]:
    """[lower, upper] of delta(u + the others whose counts (h0, h1) have law ``law``), both
    directions: P(h) = pt law(h0 - 1, h1) + pb law(h0, h1 - 1) + (k - 2) pb law(h0, h1)."""
    from_x0, from_x1 = _shift(law, 0), _shift(law, 1)
    rest = (rates.k - 2) * rates.pb * law
    p = rates.pt * from_x0 + rates.pb * from_x1 + rest
    q = rates.pb * from_x0 + rates.pt * from_x1 + rest
    e = e_law + 16 * U
    ee_lo, ee_hi = rates.ee * (1 - 2 * U), rates.ee * (1 + 2 * U)
    best_lo, best_up = 0.0, 0.0
    for first, second in ((p, q), (q, p)):
        total_up, slack_up = _sum_with_error(
            np.maximum(first * (1 + e) - ee_lo * second * (1 - e), 0.0)
        )
        total_lo, slack_lo = _sum_with_error(
            np.maximum(first * (1 - e) - ee_hi * second * (1 + e), 0.0)
        )
        best_up = max(best_up, total_up * (1 + slack_up))
        best_lo = max(best_lo, total_lo * (1 - slack_lo))
    return best_lo, best_up


def _mixture_weights(mech: ShuffledKRR, r: int) -> tuple[FloatArray, float]:
    """P(J = j), j = 0..r, J ~ Bin(r, beta), beta = k pb, and their relative error bound."""
    beta, beta_c = mech.k * mech.pb_precise, mech.pt_minus_pb
    j = np.arange(r + 1, dtype=np.float64)
    log_w = log_binom_pmf(j, r, beta, beta_c)
    # exp(x + d) = exp(x) e^d: the log's absolute error d becomes expm1(d) relative, plus exp's
    # own rounding and that of beta (a few ulp, times up to r in the powers).
    error = math.expm1(log_weight_error(r, beta, beta_c)) + (4 * r + 8) * U
    return np.exp(log_w), error


def group_view_delta(mech: ShuffledKRR, eps: float, holder: str, m: int) -> Bracket:
    """Delta_w(m) = E_J delta(u + m holders of w + J uniform reports), J ~ Bin(n - 1 - m, beta)
    (module docstring), w = x0 (``holder="x0"``) or a third value (``holder="other"``, k >= 3)."""
    if holder not in HOLDERS or (holder == "other" and mech.k < 3):
        raise ValueError(f"holder must be one of {HOLDERS} (other needs k >= 3), got {holder!r}")
    if not 0 <= m <= mech.n - 1:
        raise ValueError(f"group size must be in [0, n - 1 = {mech.n - 1}], got {m}")
    if eps >= mech.eps0:
        return Bracket.exact_zero()  # u's report is eps0-LDP and the rest does not depend on u
    rates, size, r = _Rates.of(mech, eps), mech.n + 1, mech.n - 1 - m
    law = _holders_law(rates, holder, m, m + 2)
    weights, e_weights = _mixture_weights(mech, r)
    tails = _binomial_tails(size) if holder == "other" else None
    uniform = _uniform_weights(mech.k, holder)
    lower = upper = 0.0
    for j in range(r + 1):
        if j:
            # the others' total is m + j: counts up to m + j + 1 (u's report) are kept
            law = _add_user(np.pad(law, ((0, 1), (0, 1))), *uniform)
        if weights[j] == 0.0:
            continue  # its weight is below the normal range: counted in the slack below
        e_law = 10 * (m + j + 1) * U  # one step: three products and two sums, weights to 4u
        lo, up = (
            _third_value_view(rates, law, e_law, tails) if tails else _x0_view(rates, law, e_law)
        )
        lower += weights[j] * lo
        upper += weights[j] * up
    # Weights: relative error; the J loop's sum: r + 1 roundings of non-negative terms.
    e_sum = e_weights + (r + 3) * U
    # Underflow: every operation whose result is subnormal is off by at most TINY (absolute);
    # about 60 of them per state and J, and an underflowed weight is below 2^-1022.
    slack = 100.0 * size * size * (r + 1) * TINY + (r + 1) * 2.0**-1022
    low = max(float(lower) * (1 - e_sum) - slack, 0.0)
    return Bracket(low, min(float(upper) * (1 + e_sum) + slack, 1.0))


class LargestGroup(Bound):
    """Upper bound: max over the group's type of Delta_w(ceil((n - 1) / k)) (module docstring).
    Guarantees: an upper bound on delta of the released histogram, for every dataset; never
    above optimal-blanket. Evaluated exactly up to n = MAX_N."""

    name = "largest-group"
    kind = BoundKind.UPPER
    guarantee = "valid upper bound on delta for the released histogram (every dataset)"

    def refusal(self, mech: ShuffledKRR) -> str | None:
        if mech.n > MAX_N:
            return (
                f"largest-group needs n <= {MAX_N} (its exact evaluation takes O(n^3) time), "
                f"got n = {mech.n}"
            )
        return None

    def bracket(self, mech: ShuffledKRR, eps: float) -> Bracket:
        refusal = self.refusal(mech)
        if refusal is not None:
            raise OutsideConditionsError(refusal)
        require_eps0_in_range(mech)
        m = minimum_group_size(mech.n, mech.k)
        holders = HOLDERS if mech.k >= 3 else HOLDERS[:1]
        brackets = [group_view_delta(mech, eps, holder, m) for holder in holders]
        return Bracket(max(b.lower for b in brackets), max(b.upper for b in brackets))
