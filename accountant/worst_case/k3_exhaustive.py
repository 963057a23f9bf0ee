"""k = 3: the exact worst-case delta of the shuffled histogram, by enumerating every dataset.

The argument. k-RR is symmetric under any permutation of the k = 3 values, so u's two
neighbouring values are x0 and x1 without loss of generality, and the released histogram's law
depends on the other m = n - 1 users only through how many of them hold each value, the counts
c = (c0, c1, c2), c0 + c1 + c2 = m: C(n + 1, 2) datasets (5,050 at n = 100). With Q_c the law of
the others' report counts (N0, N1) (N2 = m - N0 - N1) and u's report added,

    P0(h) - e^eps P1(h) = alpha Q_c(h - e0) + beta Q_c(h - e1) + gamma Q_c(h - e2),
    alpha = pt - e^eps pb,  beta = pb - e^eps pt,  gamma = pb (1 - e^eps),

and H(P1 || P0) swaps alpha and beta. Swapping the labels x0 and x1 maps the dataset
(c0, c1, c2) to (c1, c0, c2) and H(P0 || P1) to H(P1 || P0), so the datasets with c0 >= c1 and
both directions cover every dataset: true delta(eps) = max over them of both directions.

The laws. One k-RR user is one step of a dynamic program on the (m + 1) x (m + 1) array of
(N0, N1): out = p_0 X(N0 - 1, N1) + p_1 X(N0, N1 - 1) + p_2 X(N0, N1) with (p_0, p_1, p_2) the
user's report probabilities. The two-class laws W(c0, c1) (nobody on x2) come level by level
(c0 + c1 = s, one step from level s - 1), and each dataset's law is W(c0, c1) followed by c2
steps of an x2-user, a few datasets of one level at once (a stack of arrays), each step on
the rows N0 <= (users so far) that can be non-zero. Every dataset's law
takes m steps, each three products and two additions of non-negative numbers.

The error bound (u = 2^-53). pt and pb are within PARAM_RELERR (pairs.py) of the exact values;
each step multiplies by one of them, rounds the three products and the two additions: every
entry of the computed law is within the factor (1 + PARAM_RELERR)^m (1 + u)^(3m) of the exact
one (non-negative terms never cancel), apart from underflow, which adds at most 2^-1075 per
product; those absolute errors are carried on by later steps with weights summing to 1 (up to
the same factor), so each final entry is off by at most 3 m (m + 1)^2 2^-1075 more. The
coefficients alpha = -pt expm1(eps - eps0), beta = pt e^eps expm1(-(eps + eps0)),
gamma = -pb expm1(eps) carry COEF_RELERR each (no cancellation: written with expm1), and a
term's evaluation adds 4u of its magnitude |alpha| Q(h - e0) + |beta| Q(h - e1) + |gamma| Q(h - e2).
[.]_+ is 1-Lipschitz, so H moves by at most the sum of the term bounds over the terms whose
computed value plus bound is positive; the sum of the positive parts rounds by at most
(cells) u relative. Each dataset gets a rigorous bracket; the worst case lies in
[max of the lowers, max of the uppers]. Relative width about 1e-12 at n = 100 (wider only where
delta itself is near the underflow range).

Cost: about m^5 / 16 cell updates (three multiply-adds each), 1.6-1.8 s at n = 100 and 40 s at
n = 200 (docs/accounting.md, "k = 3 exactly at small n"). Above :data:`K3_MAX_N` the enumeration
refuses.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator

import numpy as np

from shuffledp.accountant.bounds.base import (
    Bound,
    BoundKind,
    Crossing,
    ExactCase,
    OutsideConditionsError,
)
from shuffledp.accountant.engines.crossing import lower_near, smallest_eps_at_most
from shuffledp.accountant.engines.numerics import FloatArray, largest_where
from shuffledp.accountant.engines.pairs import COEF_RELERR, PARAM_RELERR, Bracket
from shuffledp.accountant.mechanism import ShuffledKRR, require_eps

#: Largest n enumerated by default (work about m^5 / 16: 1.7 s at n = 100, 10 s at 150, 40 s at
#: 200, so ``tight`` stays at about 2 s per call up to here).
K3_MAX_N = 100
_U = 2.0**-53
#: Largest absolute rounding error of a product whose result underflows (half the smallest
#: subnormal); additions of subnormals are exact.
_ETA = 2.0**-1075

Counts = tuple[int, int, int]


def _require_k3(mech: ShuffledKRR, max_n: int = K3_MAX_N) -> None:
    if mech.k != 3:
        raise OutsideConditionsError(f"exhaustive(k=3) needs k = 3, got k={mech.k}")
    if mech.n > max_n:
        raise OutsideConditionsError(
            f"exhaustive(k=3) enumerates every dataset only for n <= {max_n} "
            f"(its work grows like n^5), got n={mech.n}"
        )


def _steps(mech: ShuffledKRR) -> tuple[float, float]:
    return mech.pt_precise, mech.pb_precise


def law_relerr(m: int) -> float:
    """Relative error bound of every entry of a computed law of m users (module docstring)."""
    return math.expm1(m * (math.log1p(PARAM_RELERR) + 3.0 * math.log1p(_U))) * (1.0 + 1e-6)


def law_abserr(m: int) -> float:
    """Absolute (underflow) error bound of every entry of a computed law of m users."""
    return 3.0 * m * (m + 1) ** 2 * _ETA * 1.01


def _step(x: FloatArray, probs: tuple[float, float, float], out: FloatArray) -> FloatArray:
    """One user added to a stack of laws x[..., N0, N1] (the last row and column of x are 0):
    out = p0 x(N0 - 1, N1) + p1 x(N0, N1 - 1) + p2 x(N0, N1)."""
    p0, p1, p2 = probs
    np.multiply(x, p2, out=out)
    out[..., 1:, :] += p0 * x[..., :-1, :]
    out[..., :, 1:] += p1 * x[..., :, :-1]
    return out


def _step_x2(x: FloatArray, pb: float, pt: float, out: FloatArray, tmp: FloatArray) -> FloatArray:
    """:func:`_step` for an x2-user (p0 = p1 = pb, p2 = pt): the product pb x formed once into
    ``tmp`` and added at both shifts (the same roundings, fewer passes over memory)."""
    np.multiply(x, pt, out=out)
    np.multiply(x, pb, out=tmp)
    lower = out[..., 1:, :]
    np.add(lower, tmp[..., :-1, :], out=lower)
    right = out[..., :, 1:]
    np.add(right, tmp[..., :, :-1], out=right)
    return out


def _two_class_levels(m: int, pt: float, pb: float) -> Iterator[tuple[int, FloatArray]]:
    """(s, W) for s = 0..m: W[c0] the law of s users, c0 on x0 and s - c0 on x1, on the
    (m + 1) x (m + 1) array (one step per user, from the level below)."""
    w = np.zeros((1, m + 1, m + 1))
    w[0, 0, 0] = 1.0
    yield 0, w
    for s in range(1, m + 1):
        nxt = np.zeros((s + 1, m + 1, m + 1))
        rows = (slice(None), slice(0, s + 1))  # N0 <= s
        _step(w[rows], (pt, pb, pb), nxt[1:][rows])  # one more x0-user: c0 - 1 -> c0
        _step(w[:1][rows], (pb, pt, pb), nxt[:1][rows])  # c0 = 0: one more x1-user
        w = nxt
        yield s, w


def _coefficients(mech: ShuffledKRR, eps: float) -> tuple[float, float, float]:
    """(alpha, beta, gamma) above, each to COEF_RELERR relative (no cancellation)."""
    pt, pb = _steps(mech)
    alpha = -pt * math.expm1(eps - mech.eps0)
    beta = pt * math.exp(eps) * math.expm1(-(eps + mech.eps0))
    gamma = -pb * math.expm1(eps)
    return alpha, beta, gamma


def _hockey(
    x: FloatArray, coef: tuple[float, float, float], rel: float, absolute: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(estimate, lower, upper) of sum_h [alpha x(h - e0) + beta x(h - e1) + gamma x(h - e2)]_+
    for each law of the stack x[..., N0, N1] (others' counts), x within ``rel`` relative and
    ``absolute`` of the exact laws. Exactly one of alpha, beta is > 0 and the others are <= 0
    (eps < eps0), so a term's magnitude |alpha| x(h - e0) + |beta| x(h - e1) + |gamma| x(h - e2)
    is 2 c x(h - e_pos) - term, c the positive coefficient."""
    a, b, g = coef
    if not (g <= 0.0 and min(a, b) <= 0.0 < max(a, b)):
        raise ArithmeticError(f"k3 hockey-stick: unexpected coefficient signs {coef}")
    shape = (*x.shape[:-2], x.shape[-2] + 1, x.shape[-1] + 1)
    shift = {0: (..., slice(1, None), slice(None, -1)), 1: (..., slice(None, -1), slice(1, None))}
    positive, c_pos, c_neg = (0, a, b) if a > 0.0 else (1, b, a)
    term = np.zeros(shape)
    scratch = np.empty(x.shape)
    np.multiply(x, g, out=term[..., :-1, :-1])
    for c, where in ((c_pos, shift[positive]), (c_neg, shift[1 - positive])):
        np.multiply(x, c, out=scratch)
        term[where] += scratch
    mag = np.negative(term)
    np.multiply(x, 2.0 * c_pos, out=scratch)
    mag[shift[positive]] += scratch
    cells = shape[-1] * shape[-2]
    # Term bound: law error (rel, absolute), coefficients, the term's own rounding (4u) and
    # underflow of its three products; 1.01 covers the rounding of the magnitude (a few u: it
    # is formed from the computed term) and of this bound itself.
    factor = (rel * (1.0 + COEF_RELERR) + COEF_RELERR + 4.0 * _U) * 1.01
    floor = (absolute * (abs(a) + abs(b) + abs(g)) + 3.0 * _ETA) * 1.01
    err = mag * factor + floor
    axes = (-2, -1)
    value = np.sum(np.maximum(term, 0.0), axis=axes)
    bound = np.sum(np.where(term + err > 0.0, err, 0.0), axis=axes)
    sum_rel = 2.0 * cells * _U
    lower = np.maximum(value * (1.0 - sum_rel) - bound * (1.0 + sum_rel), 0.0)
    upper = np.minimum(value * (1.0 + sum_rel) + bound * (1.0 + sum_rel), 1.0)
    return value, lower, upper


def _chain_x2(w: FloatArray, s: int, m: int, pt: float, pb: float) -> FloatArray:
    """The stack w of laws of s users (on the (m + 1) x (m + 1) array) after m - s more users
    holding x2; each step works on the rows that can be non-zero (N0 <= j after j users; whole
    rows keep each law's block contiguous: faster than the (j + 1) x (j + 1) corner)."""
    x = w.copy()
    y = np.zeros_like(x)
    tmp = np.empty_like(x)
    for j in range(s + 1, m + 1):
        rows = (..., slice(0, j + 1), slice(None))
        _step_x2(x[rows], pb, pt, y[rows], tmp[rows])
        x, y = y, x
    return x


#: Laws chained together (a stack of this many (m + 1) x (m + 1) arrays stays in cache: faster
#: than whole levels at n = 100).
CHUNK = 8


def _levels(mech: ShuffledKRR) -> Iterator[tuple[list[Counts], FloatArray]]:
    """(counts, laws) of every dataset with c0 >= c1, a few datasets of one level
    s = c0 + c1 at a time."""
    m = mech.n - 1
    pt, pb = _steps(mech)
    for s, w in _two_class_levels(m, pt, pb):
        for first in range((s + 1) // 2, s + 1, CHUNK):  # c0 >= s - c0
            last = min(first + CHUNK, s + 1)
            counts = [(c0, s - c0, m - s) for c0 in range(first, last)]
            yield counts, _chain_x2(w[first:last], s, m, pt, pb)


def enumerate_datasets(
    mech: ShuffledKRR, eps: float, *, max_n: int = K3_MAX_N
) -> Iterator[tuple[Counts, float, float, float]]:
    """(counts, estimate, lower, upper) of max(H(P0||P1), H(P1||P0)) for every dataset with
    c0 >= c1 (its mirror (c1, c0, c2) has the same delta), k = 3."""
    _require_k3(mech, max_n)
    eps = require_eps(eps)
    m = mech.n - 1
    if eps >= mech.eps0:  # k-RR alone is (eps0, 0)-DP: every dataset's delta is exactly 0
        for s in range(m + 1):
            yield from (((c0, s - c0, m - s), 0.0, 0.0, 0.0) for c0 in range((s + 1) // 2, s + 1))
        return
    alpha, beta, gamma = _coefficients(mech, eps)
    rel, absolute = law_relerr(m), law_abserr(m)
    for counts, laws in _levels(mech):
        v1, lo1, up1 = _hockey(laws, (alpha, beta, gamma), rel, absolute)
        v2, lo2, up2 = _hockey(laws, (beta, alpha, gamma), rel, absolute)
        value, lower, upper = np.maximum(v1, v2), np.maximum(lo1, lo2), np.maximum(up1, up2)
        for i, c in enumerate(counts):
            yield c, float(value[i]), float(lower[i]), float(upper[i])


def k3_worst_case(
    mech: ShuffledKRR, eps: float, *, max_n: int = K3_MAX_N
) -> tuple[Bracket, Counts]:
    """A rigorous bracket on the true worst-case delta(eps) for k = 3 (every dataset of the
    others), and the counts (c0, c1, c2) (c0 >= c1) of the dataset that gave the lower end.
    OutsideConditionsError for k != 3 or n > max_n (default :data:`K3_MAX_N`)."""
    _require_k3(mech, max_n)
    if require_eps(eps) >= mech.eps0:
        return Bracket.exact_zero(), (0, 0, mech.n - 1)  # k-RR alone is (eps0, 0)-DP
    return _cached(mech, eps, max_n)


@functools.lru_cache(maxsize=64)
def _cached(mech: ShuffledKRR, eps: float, max_n: int) -> tuple[Bracket, Counts]:
    best_lower, best_upper, witness = -1.0, 0.0, (0, 0, mech.n - 1)
    for counts, _, lower, upper in enumerate_datasets(mech, eps, max_n=max_n):
        if lower > best_lower:
            best_lower, witness = lower, counts
        best_upper = max(best_upper, upper)
    return Bracket(max(best_lower, 0.0), max(best_upper, best_lower, 0.0)), witness


def dataset_law(mech: ShuffledKRR, counts: Counts) -> FloatArray:
    """The law of the others' counts (N0, N1) for one dataset (c0 on x0, c1 on x1, c2 on x2):
    m steps of the same dynamic program (same error bound); kept for the last few datasets
    (an eps(delta) search evaluates one dataset at many eps). Read-only."""
    m = mech.n - 1
    if len(counts) != 3 or min(counts) < 0 or sum(counts) != m:
        raise OutsideConditionsError(
            f"a k = 3 dataset is three counts >= 0 summing to n - 1 = {m}, got {counts}"
        )
    return _dataset_law(mech, (int(counts[0]), int(counts[1]), int(counts[2])))


@functools.lru_cache(maxsize=16)
def _dataset_law(mech: ShuffledKRR, counts: Counts) -> FloatArray:
    m = mech.n - 1
    pt, pb = _steps(mech)
    x = np.zeros((m + 1, m + 1))
    x[0, 0] = 1.0
    y = np.zeros_like(x)
    users = [(pt, pb, pb)] * counts[0] + [(pb, pt, pb)] * counts[1] + [(pb, pb, pt)] * counts[2]
    for j, probs in enumerate(users, start=1):
        _step(x[: j + 1], probs, y[: j + 1])
        x, y = y, x
    x.flags.writeable = False
    return x


def dataset_delta(mech: ShuffledKRR, counts: Counts, eps: float) -> Bracket:
    """A rigorous bracket on max(H(P0||P1), H(P1||P0)) of the histogram for one k = 3 dataset
    (c0 others on x0, c1 on x1, c2 on x2; u holds x0 or x1)."""
    _require_k3(mech, max_n=mech.n)
    if require_eps(eps) >= mech.eps0:
        return Bracket.exact_zero()
    law = dataset_law(mech, counts)
    m = mech.n - 1
    alpha, beta, gamma = _coefficients(mech, eps)
    rel, absolute = law_relerr(m), law_abserr(m)
    _, lo1, up1 = _hockey(law, (alpha, beta, gamma), rel, absolute)
    _, lo2, up2 = _hockey(law, (beta, alpha, gamma), rel, absolute)
    return Bracket(float(max(lo1, lo2)), float(max(up1, up2)))


def counts_name(counts: Counts) -> str:
    """The lower member's name for one dataset, parsed back by tight.witness_dataset: the
    family-f member's name for F(c0) (nobody on x1), else its three counts."""
    c0, c1, c2 = counts
    return f"family-f(a={c0})" if c1 == 0 else f"counts(x0={c0},x1={c1},x2={c2})"


class ExactK3(Bound):
    """k = 3, n <= K3_MAX_N: the exact worst case over every dataset (:func:`k3_worst_case`).
    Guarantees: an upper bound on delta for the released histogram (every dataset)."""

    name = "exhaustive(k=3)"
    kind = BoundKind.UPPER
    guarantee = "k = 3: the exact worst case, every dataset of the others enumerated"

    def bracket(self, mech: ShuffledKRR, eps: float) -> Bracket:
        return k3_worst_case(mech, eps)[0]

    def refusal(self, mech: ShuffledKRR) -> str | None:
        if mech.k != 3:
            return f"{self.name} applies only at --k 3, got {mech.k}"
        if mech.n > K3_MAX_N:
            return (
                f"{self.name} enumerates every dataset only up to --n {K3_MAX_N} (its work "
                f"grows like n^5), got {mech.n}"
            )
        return None

    def exact_case(self, mech: ShuffledKRR, eps: float) -> ExactCase | None:
        """The enumeration at eps (cached: the upper end asked for it) and its witness."""
        if eps >= mech.eps0:
            return None
        bracket, counts = k3_worst_case(mech, eps)
        return ExactCase(bracket=bracket, k3_counts=counts)

    def upper_crossing(self, mech: ShuffledKRR, delta: float, start: float) -> Crossing:
        """Never a search over enumerations: the candidate's crossing, confirmed once
        (k3_eps_for_delta); inf (the other members answer) if none confirms."""
        lower, value, counts = k3_eps_for_delta(mech, delta, start)
        if math.isfinite(value):
            return Crossing(upper=value, lower=lower, witness=counts_name(counts), k3_counts=counts)
        return Crossing(upper=value)


class CountsMember(Bound):
    """The exact delta of one k = 3 dataset (c0 others on x0, c1 on x1, c2 on x2), a lower
    member of ``tight``: the witness of :func:`k3_worst_case` (named as F(c0) when c1 = 0, the
    same dataset; computed here, where its law is already kept, rather than by family.py)."""

    kind = BoundKind.LOWER
    guarantee = "lower bound on the worst-case delta (exact delta of one dataset)"

    def __init__(self, counts: Counts) -> None:
        self.counts = counts
        self.name = counts_name(counts)

    def bracket(self, mech: ShuffledKRR, eps: float) -> Bracket:
        return dataset_delta(mech, self.counts, eps)


#: eps(delta): the candidate's crossing is sought at delta (1 - CROSSING_MARGIN), so that the
#: enumeration there (bracket about 1e-11 wide at n = 100) confirms it if the candidate is the
#: worst dataset.
CROSSING_MARGIN = 1e-9
#: eps(delta): at most this many candidates (one enumeration each) before giving up.
K3_ROUNDS = 4


def k3_eps_for_delta(mech: ShuffledKRR, delta: float, start: float) -> tuple[float, float, Counts]:
    """(eps_lower, eps_upper, counts) around the eps at which the exact worst case meets delta,
    with few enumerations. Candidates first: F(0), F(1), F(m - 1), F(m) (the usual worst
    datasets); the crossing of each one's own delta is found by single-dataset evaluations
    (cheap: its law is kept), and the candidate with the largest crossing is confirmed by one
    enumeration there (every dataset's upper end <= delta); its lower crossing is eps_lower. If
    another dataset is the worst there, it becomes the candidate. (0, inf, counts) if none
    confirms within K3_ROUNDS enumerations (the caller's other upper members then answer)."""
    _require_k3(mech)
    crossings = {c: _crossing(mech, c, delta, start) for c in sorted(_usual_worst(mech.n))}
    counts = max(crossings, key=lambda c: crossings[c])
    crossing = crossings[counts]
    for _ in range(K3_ROUNDS):
        if not math.isfinite(crossing):
            return 0.0, math.inf, counts
        certified, best = k3_worst_case(mech, crossing)
        if certified.upper <= delta:
            return _lower_crossing(mech, counts, delta, start, crossing), crossing, counts
        if best == counts:
            break  # the bracket is too wide here to confirm the crossing
        counts, crossing = best, _crossing(mech, best, delta, start)
    return 0.0, math.inf, counts


def _usual_worst(n: int) -> set[Counts]:
    """The usual worst datasets, the first candidates of eps(delta) and calibration: F(0),
    F(1), F(m - 1) and F(m) (m = n - 1 others; nobody on x1)."""
    m = n - 1
    one = min(1, m)
    return {(0, 0, m), (one, 0, m - one), (m - one, 0, one), (m, 0, 0)}


def _crossing(mech: ShuffledKRR, counts: Counts, delta: float, start: float) -> float:
    """Where the upper end of ``counts``' own delta meets delta (1 - CROSSING_MARGIN)."""

    def up(e: float) -> float:
        return dataset_delta(mech, counts, e).upper

    return smallest_eps_at_most(up, delta * (1.0 - CROSSING_MARGIN), start, upper_side=True)


def _lower_crossing(
    mech: ShuffledKRR, counts: Counts, delta: float, start: float, near: float
) -> float:
    """Where the lower end of ``counts``' own delta meets delta, at or below ``near``."""

    def low(e: float) -> float:
        return dataset_delta(mech, counts, e).lower

    return min(lower_near(low, delta, start, near), near)


def k3_calibrate_eps0(n: int, eps: float, delta: float, eps0_cap: float) -> float | None:
    """k = 3, n <= K3_MAX_N: the largest eps0 (to 1e-9 relative, rounded down) at which the
    exact worst case meets (eps, delta), with few enumerations: the largest eps0 at which the
    candidates (F(0), F(1), F(m - 1), F(m), and any dataset an enumeration found worse) stay
    below delta (1 - CROSSING_MARGIN) is found by single-dataset evaluations, then one
    enumeration there confirms that every dataset does. None if none confirms within K3_ROUNDS
    (the caller then bisects with every evaluation exact). Assumes, like the caller, that delta
    grows with eps0; the candidates are datasets, so their eps0 is never below the truth's, and
    the confirmed one meets the target."""
    candidates = _usual_worst(n)
    for _ in range(K3_ROUNDS):

        def below(eps0: float, group: frozenset[Counts] = frozenset(candidates)) -> bool:
            mech = ShuffledKRR(n=n, k=3, eps0=eps0)
            target = delta * (1.0 - CROSSING_MARGIN)
            return all(dataset_delta(mech, c, eps).upper <= target for c in sorted(group))

        eps0 = largest_where(below, max(eps, 1e-6), eps0_cap)
        if eps0 is None:
            return None
        mech = ShuffledKRR(n=n, k=3, eps0=eps0)
        certified, best = k3_worst_case(mech, eps)
        if certified.upper <= delta:
            return eps0
        if best in candidates:
            return None
        candidates.add(best)
    return None
