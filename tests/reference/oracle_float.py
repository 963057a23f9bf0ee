"""Float64 exhaustive oracle: the worst-case delta of shuffled k-RR over every dataset, with a
rigorous bracket for its own rounding (test reference, not production code).

Same model and conventions as tests/reference/oracle.py (the 80-digit mpmath oracle it is checked against):
the distinguished user u holds 0 (law P) or 1 (law Q), the other n - 1 users hold a multiset of
values, the output is the full histogram, and a dataset's delta is max(H(P||Q), H(Q||P)).

Datasets. Values 2..k-1 are interchangeable (k-RR is symmetric under permutations of the
alphabet fixing 0 and 1), so a dataset is ``counts = (c0, c1, c2, ..., c_{k-1})`` with
c2 >= c3 >= ... (how many others hold each value). Swapping x0 and x1 swaps P and Q and leaves
max(H(P||Q), H(Q||P)) unchanged, so only c0 >= c1 is enumerated; every dataset is the image of
an enumerated one under these symmetries.

Laws. The histogram law lives in a dense array indexed by the counts of values 1..k-1 (the count
of 0 is n minus their sum). Users are added one at a time (a DP step: k shifted, scaled adds);
the datasets are visited depth-first (rest values, then 0, then 1) so that each dataset costs
about one step per user of its last group instead of n - 1 steps.

Divergences. L = log(P/Q) per histogram, and H(P||Q) = the sum over L > eps of P (-expm1(eps - L)),
a sum of non-negative terms (H(Q||P) the same with Q and -L). All eps of a case share the laws.

Rounding (u = 2^-53). pt = e^eps0 / (e^eps0 + k - 1) and pb = 1 / (e^eps0 + k - 1) are computed
to within 3u relative. A DP step forms k non-negative products and adds them, so each entry's
relative error grows by at most (3 + 1 + (k - 1)) u = (k + 3) u per user: after the n users,
P and Q are within eP = (n + 1)(k + 4) u relative. Then L is within
eL = 2.5 eP + 16 (1 + eps0) u absolute (ratio, log, and eps - L with |L| <= eps0), and a term's
evaluation (products, expm1) adds at most 4u relative and the sum, accumulated in long double,
at most len * eps_longdouble + u (len * 2^-63 + u on x86-64). Every term is monotone in
P and L, so evaluating it at (P(1 -/+ eP), L -/+ eL) and scaling by those factors gives a rigorous
[lower, upper] for each dataset's exact delta, hence for the worst case: the true worst delta
lies in [max of lowers, max of uppers]. :func:`worst_case` returns that bracket with the float
estimate. Its relative half-width is about 1e-13 at ordinary deltas; on the grid of
tests/reference/test_accountant_exhaustive.py (672 cases, n <= 30) the largest is 3.5e-11, in the far tail
(n = 30, k = 4, eps0 = 0.2, eps = 0.198, delta = 1.4e-19). tests/reference/test_accountant_exhaustive.py
checks that the 80-digit values of tests/reference/oracle.py lie inside the brackets, for the worst case
and for every single dataset.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

U = 2.0**-53

Counts = tuple[int, ...]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class CaseResult:
    """The worst case at one eps. ``lower <= true worst delta <= upper`` (rigorous)."""

    eps: float
    delta: float
    lower: float
    upper: float
    witness: Counts  # counts (c0, c1, c2, ...) of the dataset with the largest estimate
    #: the largest estimate among F(a) datasets (see :func:`family_f_a`), its bracket and a
    family_delta: float
    family_lower: float
    family_upper: float
    family_a: int

    @property
    def rel_error(self) -> float:
        """Relative half-width of the bracket (0 for an exact 0)."""
        return 0.0 if self.upper == 0 else (self.upper - self.lower) / (2 * self.upper)


def family_f_a(counts: Counts) -> int | None:
    """a if ``counts`` (with c0 >= c1, as enumerated) is the dataset F(a), else None.

    F(a): a others hold x0 = 0 and the remaining n-1-a all hold ONE third value (k >= 3), nobody
    holds x1 = 1; for k = 2 every dataset is F(c0) (the rest hold x1). With c0 >= c1, the mirror
    image (x0 and x1 swapped) of an F(a) dataset has c1 > 0 only when c0 = 0 (then c1 = 0 too
    unless a = 0, i.e. F(0)'s mirror is itself), so c1 == 0 is the right test."""
    if len(counts) == 2:
        return counts[0]
    c0, c1, *rest = counts
    if c1 == 0 and sum(1 for c in rest if c > 0) <= 1:
        return c0
    return None


def others_of(counts: Counts) -> tuple[int, ...]:
    """The others' values as a sorted tuple (tests/reference/oracle.py's dataset format)."""
    return tuple(v for v, c in enumerate(counts) for _ in range(c))


def krr_float(k: int, eps0: float) -> tuple[float, float]:
    """(pt, pb) in float64, each within 3u relative."""
    e0 = math.exp(eps0)
    d = e0 + (k - 1)
    return e0 / d, 1.0 / d


class _Model:
    def __init__(self, n: int, k: int, eps0: float) -> None:
        self.n, self.k = n, k
        self.pt, self.pb = krr_float(k, eps0)
        self.shape = (n + 1,) * (k - 1)
        grids = np.indices(self.shape).reshape(k - 1, -1)
        # histograms of all n reports: counts of values 1..k-1 summing to at most n
        self.simplex = np.flatnonzero(grids.sum(axis=0) <= n)

    def start(self) -> FloatArray:
        law = np.zeros(self.shape)
        law[(0,) * (self.k - 1)] = 1.0
        return law

    def step(self, law: FloatArray, value: int) -> FloatArray:
        """Add one user holding ``value``: pt to its own count, pb to each other value."""
        pt, pb = self.pt, self.pb
        out = law * (pt if value == 0 else pb)
        for r in range(1, self.k):
            dst = [slice(None)] * (self.k - 1)
            src = [slice(None)] * (self.k - 1)
            dst[r - 1], src[r - 1] = slice(1, None), slice(None, -1)
            out[tuple(dst)] += (pt if r == value else pb) * law[tuple(src)]
        return out

    def datasets(self) -> Iterator[tuple[Counts, FloatArray]]:
        """Every dataset of the n-1 others with the law of their reports, depth-first."""
        m, k = self.n - 1, self.k

        def rest(
            law: FloatArray, value: int, left: int, cap: int, counts: Counts
        ) -> Iterator[tuple[Counts, FloatArray]]:
            if value == k:
                # (c0, c1) and (c1, c0) have the same delta (swap x0 and x1, and P and Q):
                # only c0 >= c1, with value 1 added last (the shorter chain)
                law0 = law
                for c0 in range(left + 1):
                    if c0:
                        law0 = self.step(law0, 0)
                    if 2 * c0 < left:
                        continue
                    law1 = law0
                    for _ in range(left - c0):
                        law1 = self.step(law1, 1)
                    yield (c0, left - c0, *counts), law1
                return
            cur = law
            for c in range(min(cap, left) + 1):
                if c:
                    cur = self.step(cur, value)
                yield from rest(cur, value + 1, left - c, c, (*counts, c))

        yield from rest(self.start(), 2, m, m, ())


def _sum(terms: FloatArray) -> float:
    """Sum of non-negative float64 terms, accumulated in long double (x87: 64-bit mantissa)."""
    return float(np.sum(terms, dtype=np.longdouble))


def _directions(
    p: FloatArray, q: FloatArray, eps: Sequence[float], e_p: float, e_l: float
) -> list[tuple[float, float, float]]:
    """Per eps: (estimate, lower, upper) of max(H(P||Q), H(Q||P)); p, q on the simplex."""
    loss = np.log(p / q)
    # terms: products and expm1 (4u); the sum: the long-double accumulation of len(p) terms
    # and the final rounding to double
    slack = 4 * U + len(p) * float(np.finfo(np.longdouble).eps) + U
    out = []
    for e in eps:
        best = (0.0, 0.0, 0.0)
        for w, ll in ((p, loss), (q, -loss)):
            hi_mask = ll + e_l > e
            if not hi_mask.any():
                continue
            wh, lh = w[hi_mask], ll[hi_mask]
            est = _sum(wh * -np.expm1(np.minimum(e - lh, 0.0)))
            hi = _sum(wh * (1 + e_p) * -np.expm1(e - lh - e_l)) * (1 + slack)
            lo_mask = lh - e_l > e
            lo = _sum(wh[lo_mask] * (1 - e_p) * -np.expm1(e - lh[lo_mask] + e_l)) * (1 - slack)
            best = (max(best[0], est), max(best[1], lo), max(best[2], hi))
        out.append(best)
    return out


def errors(n: int, k: int, eps0: float) -> tuple[float, float]:
    """(eP, eL): the relative error of the histogram laws and the absolute error of the loss."""
    e_p = (n + 1) * (k + 4) * U
    return e_p, 2.5 * e_p + 16 * (1 + eps0) * U


def evaluate_datasets(
    n: int, k: int, eps0: float, eps: Sequence[float], keep: Callable[[Counts], bool] | None = None
) -> Iterator[tuple[Counts, list[tuple[float, float, float]]]]:
    """(counts, per-eps (estimate, lower, upper)) for every dataset (those ``keep`` accepts)."""
    model = _Model(n, k, eps0)
    e_p, e_l = errors(n, k, eps0)
    for counts, law in model.datasets():
        if keep is not None and not keep(counts):
            continue
        p = model.step(law, 0).reshape(-1)[model.simplex]
        q = model.step(law, 1).reshape(-1)[model.simplex]
        yield counts, _directions(p, q, eps, e_p, e_l)


@functools.lru_cache(maxsize=256)
def worst_case(n: int, k: int, eps0: float, eps: tuple[float, ...]) -> tuple[CaseResult, ...]:
    """The worst-case delta over every dataset at each eps (one CaseResult per eps)."""
    if n < 2 or k < 2:
        raise ValueError("need n >= 2 and k >= 2")
    zero = (0.0, 0.0, 0.0)
    best: list[tuple[tuple[float, float, float], Counts]] = [(zero, ()) for _ in eps]
    best_f = [(zero, -1) for _ in eps]
    for counts, values in evaluate_datasets(n, k, eps0, eps):
        a = family_f_a(counts)
        for i, v in enumerate(values):
            (est, lo, hi), witness = best[i]
            if v[0] > est or not witness:
                witness = counts
            best[i] = ((max(est, v[0]), max(lo, v[1]), max(hi, v[2])), witness)
            if a is not None:
                (fe, flo, fhi), fa = best_f[i]
                if v[0] > fe or fa < 0:
                    fa = a
                best_f[i] = ((max(fe, v[0]), max(flo, v[1]), max(fhi, v[2])), fa)
    return tuple(
        CaseResult(e, *b[0], b[1], *f[0], f[1]) for e, b, f in zip(eps, best, best_f, strict=True)
    )
