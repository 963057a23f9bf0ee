"""``family-f``: the exact delta of the datasets F(a), the lower end of ``tight``.

F(a): a of the other n - 1 users hold x0 (u's value under P), the remaining n - 1 - a all hold
one third value x2, and nobody holds x1 (u's value under Q); for k = 2 the remaining users hold
x1. Exhaustive enumeration of every dataset (tests/reference/oracle_float.py) finds the worst dataset in
this family in every case checked. Any dataset's exact delta is a lower bound on the worst case.

* k = 2: the histogram is the count of x0 alone, so F(a) is the single-bin model with nx0 = a,
  computed by :mod:`k2_exact` (extended precision, about 1e-14 wide) or, where that declines,
  :class:`SingleBin`; F(a) = F(n - 1 - a) (swap the labels x0 and x1).
* a = 0 and a = n - 1, k >= 3: the others are i.i.d., and the leave-one-out identity
  Others(h - e_v) = Mult_n(h) h_v / (n p_v) turns delta into (1/n) E[(G_1 + ... + G_n)_+]
  (docs/accounting.md), bracketed by :mod:`gsum` at any n. For a = 0 both directions
  are equal: G = E0 - Ee (pb), 1 - Ee E0 (pb), (1 - Ee)/E0 (pt), 1 - Ee ((k - 3) pb). For
  a = n - 1: H(P||Q) has G = 1 - Ee/E0 (pt), 1 - Ee E0 (pb), 1 - Ee ((k - 2) pb), and H(Q||P)
  G = 1/E0 - Ee (pt), E0 - Ee (pb), 1 - Ee ((k - 2) pb). Up to n = :data:`G_FORM_FROM_N`,
  a = n - 1 is computed by :class:`AllOthersX0` (the counts (N_x0, N_x1) suffice, O(sqrt(n))
  work; the G-form is kept as its independent check), and a = 0 with k = 3 by the wang-krr pair
  (the same law); above it both by their G-forms (gsum's Fourier bracket, faster there).
* 0 < a < n - 1, k >= 3: every a at once by :mod:`family_counts` (the others' law of the
  counts (N_x0, N_x2) for every a by one matrix product per subset size, then the hockey-stick
  sum in O(1) per cell), for n <= :data:`DP_MAX_N`; beyond it the bound refuses.
"""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Callable

from shuffledp.accountant.bounds.base import (
    AllOthersX0,
    Bound,
    BoundKind,
    Crossing,
    DeltaResult,
    ExactCase,
    OutsideConditionsError,
    SingleBin,
    WangKRR,
)
from shuffledp.accountant.bounds.blanket import (
    OptimalBlanket,
    require_eps0_in_range,
    scaled_mean_positive_part,
)
from shuffledp.accountant.engines.crossing import smallest_eps_at_most
from shuffledp.accountant.engines.family_counts import family_all
from shuffledp.accountant.engines.gsum import Atom, TooLargeError
from shuffledp.accountant.engines.k2_contour import (
    Coefs,
    directions_many,
    k2_contour_value,
    k2_direction_value,
    shared_circle,
)
from shuffledp.accountant.engines.k2_exact import WorkMeter, k2_family_value
from shuffledp.accountant.engines.k2_fft import k2_fft_value
from shuffledp.accountant.engines.k2_waves import Certifier, certify_in_waves, k2_revealed_users
from shuffledp.accountant.engines.pairs import Bracket
from shuffledp.accountant.mechanism import InvalidParameterError, ShuffledKRR, require_eps

#: Above this n, F(n - 1) (k >= 3) is computed by its G-forms (all_x0_g_form) rather than by
#: the two-count pair of AllOthersX0, and F(0) for k = 3 by its G-form rather than the wang-krr
#: pair: the same exact values, by the faster route there (gsum's Fourier bracket).
G_FORM_FROM_N = 100_000
#: Above this n ``tight`` tries only the two ends of single-bin's nx0 (tight.py), and an upper end
#: below NEGLIGIBLE_DELTA ends its evaluation (:func:`negligible`).
ENDS_ONLY_FROM = 100_000
#: See :func:`negligible`.
NEGLIGIBLE_DELTA = 1e-300
#: Largest n at which F(a) with 0 < a < n - 1 (k >= 3) is computed: every a at once
#: (family_counts; about 0.1 s at n = 100 and 0.3-1.4 s at n = 200, 174 MiB there).
DP_MAX_N = 200
#: k = 2: up to this n, ``candidates`` lists every a (above it the certificate finds the best).
ALL_A_UP_TO = 24


def _require_a(mech: ShuffledKRR, a: int) -> None:
    if isinstance(a, bool) or not isinstance(a, int) or not 0 <= a <= mech.n - 1:
        raise InvalidParameterError(
            f"--a must be an integer in [0, n-1] = [0, {mech.n - 1}], got {a!r}"
        )


def family_delta(mech: ShuffledKRR, a: int, eps: float) -> Bracket:
    """A bracket on max(H(P||Q), H(Q||P)) of the full histogram for the dataset F(a)."""
    _require_a(mech, a)
    if eps >= mech.eps0:
        return Bracket.exact_zero()  # every dataset: k-RR alone is (eps0, 0)-DP
    if mech.k == 2:
        return _k2_value(mech, a, eps)
    require_eps0_in_range(mech)
    if a == mech.n - 1:
        if mech.n > G_FORM_FROM_N:
            # The G-forms by gsum's Fourier bracket (work independent of n): about 20 ms where
            # the two-count pair takes 0.04-1.2 s at n = 1e6 and 2.8 s at 1e8.
            try:
                return all_x0_g_form(mech, eps)
            except TooLargeError:
                pass
        # The same value as all_x0_g_form, by the two counts (N_x0, N_x1), O(sqrt(n)).
        return AllOthersX0().bracket(mech, eps)
    if a == 0 and mech.k == 3 and mech.n <= G_FORM_FROM_N:
        # For k = 3 the counts (N_x0, N_x1) determine the histogram: the wang-krr pair is F(0)
        # (above G_FORM_FROM_N its G-form below, by the Fourier bracket, is faster).
        return WangKRR().bracket(mech, eps)
    if a == 0:
        try:
            return scaled_mean_positive_part(mech, eps, _atoms_all_x2(mech, eps))
        except TooLargeError as exc:
            raise OutsideConditionsError(f"family-f: {exc}") from None
    if mech.n > DP_MAX_N:
        raise OutsideConditionsError(
            f"family-f with 0 < a < n-1 needs n <= {DP_MAX_N} (a = 0 and a = n-1 work at any n), "
            f"got n={mech.n}"
        )
    return family_all(mech, eps)[a]


def _atoms_all_x2(mech: ShuffledKRR, eps: float) -> list[Atom]:
    """F(0), divided by E0 Ee: (E0 - Ee), (1 - Ee E0), (1 - Ee)/E0, (1 - Ee) as in blanket.py."""
    pb, pt = mech.pb_precise, mech.pt_precise
    e0 = mech.eps0
    return [
        Atom(-math.exp(-eps) * math.expm1(eps - e0), pb),
        Atom(math.expm1(-(eps + e0)), pb),
        Atom(math.exp(-2.0 * e0) * math.expm1(-eps), pt),
        Atom(math.exp(-e0) * math.expm1(-eps), (mech.k - 3) * pb),
    ]


def all_x0_g_form(mech: ShuffledKRR, eps: float) -> Bracket:
    """F(n - 1) by its G-forms (both directions), the independent check of the two-count pair
    that :func:`family_delta` uses for it (tests/unit/accountant/test_blanket.py); eps < eps0, k >= 3."""
    forward, reverse = _atoms_all_x0(mech, eps)
    b1 = scaled_mean_positive_part(mech, eps, forward)
    b2 = scaled_mean_positive_part(mech, eps, reverse)
    return Bracket(max(b1.lower, b2.lower), max(b1.upper, b2.upper))


def _atoms_all_x0(mech: ShuffledKRR, eps: float) -> tuple[list[Atom], list[Atom]]:
    """F(n - 1), both directions, divided by E0 Ee:
    (1 - Ee/E0)/(E0 Ee) = -e^-(eps0 + eps) expm1(eps - eps0);
    (1/E0 - Ee)/(E0 Ee) = e^-eps0 expm1(-(eps0 + eps))."""
    pb, pt = mech.pb_precise, mech.pt_precise
    e0 = mech.eps0
    rest = Atom(math.exp(-e0) * math.expm1(-eps), (mech.k - 2) * pb)
    forward = [
        Atom(-math.exp(-(e0 + eps)) * math.expm1(eps - e0), pt),
        Atom(math.expm1(-(eps + e0)), pb),
        rest,
    ]
    reverse = [
        Atom(math.exp(-e0) * math.expm1(-(e0 + eps)), pt),
        Atom(-math.exp(-eps) * math.expm1(eps - e0), pb),
        rest,
    ]
    return forward, reverse


#: k = 2: ``candidates`` adds five a spread over the range up to this n.
K2_SPREAD_MAX_N = 200_000


def candidates(mech: ShuffledKRR) -> list[int]:
    """The a values ``tight`` tries, the ends first. k >= 3: every a up to n = DP_MAX_N (computed
    together by family_counts), only a = 0 and n - 1 above (the others are not computed there;
    what they could add is bounded by the bracket itself, max_a F(a) <= delta_upper). k = 2:
    every a for n <= ALL_A_UP_TO, otherwise the first eight values from each end
    (F(a) = F(n - 1 - a)) and, up to n = K2_SPREAD_MAX_N, five spread over the range (the
    certificate, family.k2_worst_case, finds the best a there)."""
    n = mech.n
    ends = [0] if n == 1 else [0, n - 1]
    if mech.k >= 3:
        return ends + list(range(1, n - 1)) if n <= DP_MAX_N else ends
    if n <= ALL_A_UP_TO:
        return list(range(n))
    ends = list(range(min(8, n)))
    # Above K2_SPREAD_MAX_N the spread a cost minutes where F(a) underflows (n = 1e6,
    # eps0 = 2, eps = 0.1: 390 s; the certificate, not these, finds interior maxima).
    spread = [round(i * (n - 1) / 8) for i in range(5)] if n <= K2_SPREAD_MAX_N else []
    return sorted(set(ends + spread))


def negligible(mech: ShuffledKRR, upper: float) -> bool:
    """Above n = ENDS_ONLY_FROM, an upper end below NEGLIGIBLE_DELTA ends the evaluation: the
    remaining upper members could only lower it within the subnormal range, and the lower end
    is then 0 (always valid). Those members (clone-form pairs, wang-krr) take 6-10 s each at
    n = 1e8 where delta underflows (eps = 0.05, k = 15, eps0 = 4)."""
    return mech.n > ENDS_ONLY_FROM and upper < NEGLIGIBLE_DELTA


class FamilyF(Bound):
    """The exact delta of the dataset F(a) (a others hold x0, the rest one third value), or, with
    a = None, the largest over :func:`candidates`. Guarantees: a lower bound on the worst case."""

    name = "family-f"
    kind = BoundKind.LOWER
    guarantee = "lower bound on the worst-case delta (exact delta of the dataset F(a))"

    def __init__(self, a: int | None = None) -> None:
        self.a = a

    def best(self, mech: ShuffledKRR, eps: float) -> tuple[Bracket, int]:
        """The largest lower end over the a values tried, and that a."""
        if self.a is not None:
            return family_delta(mech, self.a, eps), self.a
        best, best_a = Bracket.exact_zero(), 0
        for a in candidates(mech):
            try:
                b = family_delta(mech, a, eps)
            except OutsideConditionsError:
                continue
            if b.lower > best.lower or (best.lower == 0.0 and b.upper > best.upper):
                best, best_a = b, a
        return best, best_a

    def bracket(self, mech: ShuffledKRR, eps: float) -> Bracket:
        return self.best(mech, eps)[0]

    def delta(self, mech: ShuffledKRR, eps: float) -> DeltaResult:
        eps = require_eps(eps)
        b, a = self.best(mech, eps)
        return DeltaResult(
            bound=self.name,
            kind=self.kind,
            eps=eps,
            delta=b.lower,
            delta_lower=b.lower,
            delta_upper=b.upper,
            extra={"family": "F", "a": float(a)},
        )


class FamilyMember(Bound):
    """F(a) for one a, as a lower-bound member of ``tight``."""

    kind = BoundKind.LOWER
    guarantee = FamilyF.guarantee

    def __init__(self, a: int) -> None:
        self.a = a
        self.family_a = a
        self.name = f"family-f(a={a})"

    def bracket(self, mech: ShuffledKRR, eps: float) -> Bracket:
        return family_delta(mech, self.a, eps)


#: Most steps (a block cut, halved or evaluated) one certificate of the k = 2 maximum may take;
#: past it the blocks left keep their (valid, looser) removal bounds. (n = 1e6, eps0 = 0.5 at
#: eps(1e-6), the slowest grid point, takes 11,400.)
K2_BUDGET = 20_000
#: ... and at most this much work (k2_exact.WorkMeter, about 5 ns a unit) up to n =
#: K2_FULL_WORK_MAX_N: enough to finish every grid point at n = 1e6 (eps0 = 0.5 at eps(1e-6)
#: takes 3.4e9, 16.5 s; at n = 1e5 4.2e8, 2.4 s).
K2_WORK = 5_000_000_000
K2_FULL_WORK_MAX_N = 1_000_000
#: Above K2_FULL_WORK_MAX_N the certificate stops after this much (about 9 s) with a valid,
#: wider bracket, and so does each further certificate of an eps(delta) search whose first ran
#: out (:func:`_k2_uncertified`). There, too, a certificate whose every F(a <= K2_NEAR)
#: underflowed stops at once with [0, optimal-blanket's upper end]: the blocks would have to be
#: split until each bound underflows too (n = 1e6, eps0 = 2, eps = 0.1: F(a) about 1e-380,
#: optimal-blanket 2.3e-229; it spent 82 s to end at optimal-blanket's value all the same).
K2_SHORT_WORK = 1_500_000_000


def k2_work(n: int) -> int:
    """The work budget of one k = 2 certificate at this n (K2_WORK, or K2_SHORT_WORK above
    K2_FULL_WORK_MAX_N)."""
    return K2_WORK if n <= K2_FULL_WORK_MAX_N else K2_SHORT_WORK


#: Blocks starting above this a that the FFT left open try the float64 single-bin code first
#: (50-400 ms at n = 1e6, up to 5e-5 wide), cheaper there than k2_exact, whose work grows with
#: a; counted as K2_SINGLE_BIN_WORK.
K2_BLOCK_A = 20_000
K2_SINGLE_BIN_WORK = 10_000_000
#: The certificate sweeps outwards (:class:`_K2Blocks`) from this n up to K2_FULL_WORK_MAX_N,
#: where delta is at least K2_FFT_MIN_DELTA: there F(a) is nearly flat near the ends and the
#: sweep saves a third of the evaluations; where the maximum is interior or F(a) falls fast
#: (n = 1e4, eps0 = 8 or deep tails) it costs more than halving (13 s against 0.25 s at
#: n = 1e4, eps0 = 2, eps = 1).
K2_SWEEP_FROM_N = 100_000
#: Blocks from this a1 on try the FFT evaluation first (accountant/engines/k2_fft.py: 1-3 ms at n = 1e6
#: where k2_exact's float64 convolution takes 3-150 ms).
K2_FFT_FROM = 1_000
#: ... where delta is at least this: the FFT's error is absolute (about 1e-16 of the count's
#: largest probability), so far below it the bracket is too wide to settle anything.
K2_FFT_MIN_DELTA = 1e-12
#: Every a <= K2_NEAR is evaluated exactly before the blocks (about 1 ms each by k2_exact).
K2_NEAR = 64
#: Smallest tolerance of the k = 2 eps(delta) crossings (_fine_crossing: 1e-11 relative below
#: eps = 1; inversion's default is 1e-9 absolute, 6e-8 relative at eps = 0.016).
K2_EPS_TOL = 1e-13
#: A block is accepted once its removal bound is within this factor of the best value found.
K2_TOLERANCE = 1e-11
#: The certificate stops as soon as optimal-blanket's upper end is within this factor of the
#: best F(a) (the bracket is then that narrow; the issue asks 1e-9 for k = 2).
K2_CEILING_TOLERANCE = 1e-10


def k2_worst_case(mech: ShuffledKRR, eps: float, work: int | None = None) -> tuple[Bracket, int]:
    """:func:`_k2_worst_case` with ``work`` (default :func:`k2_work`), remembered for the last
    few (n, eps0, eps, work): ``tight`` asks for both ends at the same points, and eps(delta)
    searches revisit them."""
    return _k2_cached(mech, eps, k2_work(mech.n) if work is None else work)


@functools.lru_cache(maxsize=512)
def _k2_cached(mech: ShuffledKRR, eps: float, work: int) -> tuple[Bracket, int]:
    return _k2_worst_case(mech, eps, work)


def _k2_value(
    mech: ShuffledKRR, a: int, eps: float, meter: WorkMeter | None = None, *, fast: bool = False
) -> Bracket:
    """F(a) for k = 2: the contour integral (k2_contour, 1e-14 to 1e-12 wide at any n) where it
    applies, else extended precision (k2_exact, about 1e-14 wide; fast: float64 convolution,
    about 1e-9), else the float64 single-bin code (wider at large n: 5e-5 relative at n =
    1e6)."""
    value = k2_contour_value(mech, a, eps, meter)
    if value is not None:
        return value
    value = k2_family_value(mech, a, eps, meter, fast=fast)
    if value is None and fast:  # near float64's underflow: the long double convolution
        value = k2_family_value(mech, a, eps, meter)
    return value if value is not None else SingleBin(a).bracket(mech, eps)


def k2_values_many(
    mech: ShuffledKRR, a_values: list[int], eps: float, meter: WorkMeter | None = None
) -> list[Bracket]:
    """F(a) for many a at once: both directions on the shared contour circle in one batched
    pass (accountant/engines/k2_contour.py), each a it leaves open by :func:`_k2_value`."""
    circle = shared_circle(mech.n, mech.eps0, eps) if mech.k == 2 else None
    if circle is None or not a_values:
        return [_k2_value(mech, a, eps, meter) for a in a_values]
    n = mech.n
    rows = [(n, a) for a in a_values] + [(n, n - 1 - a) for a in a_values]
    both = directions_many(rows, Coefs.of(mech.eps0, eps), circle, meter)
    out = []
    for a, one, other in zip(a_values, both[: len(a_values)], both[len(a_values) :], strict=True):
        if one is None or other is None:
            out.append(_k2_value(mech, a, eps, meter))
        else:
            out.append(Bracket(max(one.lower, other.lower), max(one.upper, other.upper)))
    return out


def _k2_worst_case(mech: ShuffledKRR, eps: float, work: int = K2_WORK) -> tuple[Bracket, int]:
    """k = 2: a bracket on max_a F(a), which is the exact worst case (every dataset of the others
    is "a hold x0, the rest x1"), and the a that gave the lower end.

    Lower end: the best F(a) evaluated. Upper end: a certificate over every a. F(a) = F(n-1-a),
    so a <= (n - 1) / 2 suffices; every a <= K2_NEAR is evaluated (the maximum sits near the
    ends). For a block [a1, a2], revealing to the adversary about theta = 1 - e^-eps0 of the
    middle users (those of the a - a1 on x0 who report x0 for sure in a mixture; the others
    then report like x1 users) can only help it, and what remains is the single-bin model of
    n - d users with a1 on x0, for every a of the block at once, plus a Chernoff tail
    (:func:`k2_revealed_users`); each direction of F is bounded so separately. Blocks are
    swept in waves of batched contour evaluations (accountant/engines/k2_waves.py) or, where the
    contour declines, one by one (:func:`_k2_one_by_one`), until every block's bound is within
    K2_TOLERANCE of the best value found (or below 1e-300, where floats lose precision) or is
    a single a, or ``work`` is spent; the upper end is the largest bound (or value evaluated),
    capped by optimal-blanket's upper end (:func:`_k2_ceiling`), which ends the search at once
    where it is within K2_CEILING_TOLERANCE of the best F(a).
    """
    if mech.k != 2:
        raise OutsideConditionsError(f"the k = 2 certificate needs k = 2, got k={mech.k}")
    half = (mech.n - 1) // 2
    meter = WorkMeter()
    found = _K2Values(mech, eps, meter)
    ceiling = _k2_ceiling(mech, eps)
    if negligible(mech, ceiling):  # the minimum could only move within the subnormal range
        return Bracket(0.0, ceiling), 0
    near = min(half, K2_NEAR)
    found.prefill(range(near + 1))
    for a in range(near + 1):
        found.get(a)
        if found.best * (1.0 + K2_CEILING_TOLERANCE) >= ceiling:
            return Bracket(found.best, max(ceiling, found.best)), found.best_a
    if mech.n > K2_SPREAD_MAX_N and not found.best > 0.0:
        return Bracket(0.0, ceiling), 0  # every F(a <= K2_NEAR) underflowed
    waves = _k2_waves(mech, eps, found, meter)
    if waves is None or near >= half:
        upper = _k2_one_by_one(mech, eps, found, (near, half), work)
        return Bracket(found.best, max(min(upper, ceiling), found.best)), found.best_a
    cover = certify_in_waves(waves, near, half, meter, work)
    upper = min(max(cover, found.top_upper), ceiling)
    # the lower end by the evaluator the lower members use (family_delta), so that tight's
    # lower end is this one whichever path found the a
    lower = _k2_value(mech, found.best_a, eps, meter).lower
    return Bracket(lower, max(upper, lower)), found.best_a


def _k2_one_by_one(
    mech: ShuffledKRR, eps: float, found: _K2Values, span: tuple[int, int], work: int
) -> float:
    """The certificate's upper end over (near, half] with every block bounded by its own call
    (:class:`_K2Blocks`, :func:`_k2_block_bound`; the block with the largest bound is cut or
    split first), where the contour declines; at most K2_BUDGET steps."""
    near, half = span
    meter = found.meter

    def bound(a1: int, a2: int, forward: bool) -> float:
        if a1 == a2:
            return found.direction(a1, forward).upper
        return _k2_block_bound(mech, eps, (a1, a2), found.best, meter, forward)

    blocks = _K2Blocks(bound, lambda: max(found.best * (1.0 + K2_TOLERANCE), 1e-300), near, half)
    # (1e-300: below it floats lose precision)
    blocks.sweep = (
        K2_SWEEP_FROM_N <= mech.n <= K2_FULL_WORK_MAX_N and found.best >= K2_FFT_MIN_DELTA
    )
    for _ in range(K2_BUDGET):
        if blocks.done() or meter.work > work:
            break
        if blocks.sweep and meter.work > work // 2:  # not finishing: balance what is left
            blocks.settle()
            continue
        blocks.step()
    return max(blocks.settled_upper(), found.top_upper)


def _k2_waves(
    mech: ShuffledKRR, eps: float, found: _K2Values, meter: WorkMeter
) -> Certifier | None:
    """The batched certificate's hooks (accountant/engines/k2_waves.py), None where the contour does
    not apply (then the blocks are bounded one by one, :class:`_K2Blocks`)."""
    circle = shared_circle(mech.n, mech.eps0, eps)
    if circle is None:
        return None

    def fallback(block: tuple[int, int], forward: bool) -> float:
        if block[0] == block[1]:
            return found.get(block[0]).upper
        return _k2_block_bound(mech, eps, block, found.best, meter, forward)

    return Certifier(
        n=mech.n,
        eps0=mech.eps0,
        co=Coefs.of(mech.eps0, eps),
        circle=circle,
        target=lambda: max(found.best * (1.0 + K2_TOLERANCE), 1e-300),
        tail_target=lambda: found.best * K2_TOLERANCE * 1e-2,
        offer=found.record,
        fallback=fallback,
    )


class _K2Blocks:
    """The k = 2 certificate's blocks [a1, a2] of a values (a1 > ``near``, every a <= near
    evaluated already), one set per direction of F(a) (``forward``: H(P0||P1); the two are
    bounded separately, so the weaker one clears in a few large blocks), in one heap by bound,
    the largest first.

    A block split off another inherits its bound (valid for any part of it) and is evaluated
    only once it is the worst left. An unevaluated block is first cut to a step set by the
    evaluated block just before it (1.5 times its size where that one cleared, half where it
    failed), so the search sweeps outwards from the ends at the sizes that work instead of
    halving every block from the whole range down (at n = 1e6, eps0 = 0.5: 35 % fewer
    evaluations); an evaluated block that fails is halved. The sweep leaves one large block
    ahead of it with its inherited (loose) bound, so where the budget will not finish the search
    it is turned off (``sweep`` False: every block is evaluated as it comes, as in plain
    bisection, whose unfinished brackets are far narrower: n = 1e7, eps0 = 0.5, eps(1e-6) 1.002
    wide against 1.06), and so it is where it costs more (K2_SWEEP_FROM_N).
    :meth:`settled_upper` evaluates what is left unevaluated at the end."""

    sweep = True

    def __init__(
        self,
        bound: Callable[[int, int, bool], float],
        target: Callable[[], float],
        near: int,
        half: int,
    ) -> None:
        self._bound, self._target = bound, target
        self._heap: list[tuple[float, int, int, bool, bool]] = []
        # (forward, a2) -> (size, cleared)
        self._before: dict[tuple[bool, int], tuple[int, bool]] = {
            (True, near): (1, True),
            (False, near): (1, True),
        }
        for forward in (True, False):
            if near < half:
                self._evaluate(near + 1, half, forward)
            else:
                self._evaluate(near, near, forward)

    def _evaluate(self, a1: int, a2: int, forward: bool) -> None:
        value = self._bound(a1, a2, forward)
        self._before[forward, a2] = (a2 - a1 + 1, value <= self._target())
        heapq.heappush(self._heap, (-value, a1, a2, True, forward))

    def done(self) -> bool:
        neg_bound, a1, a2, evaluated, _ = self._heap[0]
        return -neg_bound <= self._target() or (a1 == a2 and evaluated)

    def step(self) -> None:
        neg_bound, a1, a2, evaluated, forward = heapq.heappop(self._heap)
        if evaluated:  # it failed: halve
            mid = (a1 + a2) // 2
            pieces = [(a1, mid), (mid + 1, a2)]
        elif not self.sweep:
            self._evaluate(a1, a2, forward)
            return
        else:
            size, cleared = self._before.get((forward, a1 - 1), (a2 - a1 + 1, True))
            step = math.ceil(1.5 * size) if cleared else max(1, size // 2)
            if a2 - a1 + 1 <= step:
                self._evaluate(a1, a2, forward)
                return
            pieces = [(a1, a1 + step - 1), (a1 + step, a2)]
        for p1, p2 in pieces:
            heapq.heappush(self._heap, (neg_bound, p1, p2, False, forward))

    def settle(self) -> None:
        """Evaluate every unevaluated block, and sweep no more."""
        self.sweep = False
        for _, a1, a2, _, forward in [b for b in self._heap if not b[3]]:
            self._evaluate(a1, a2, forward)
        self._heap = [b for b in self._heap if b[3]]
        heapq.heapify(self._heap)

    def settled_upper(self) -> float:
        """The largest bound left, once every unevaluated block is evaluated."""
        self.settle()
        return -self._heap[0][0]


class _K2Values:
    """The F(a) one k = 2 certificate has evaluated (each once), the best lower end among them
    and its a, and the largest upper end."""

    def __init__(self, mech: ShuffledKRR, eps: float, meter: WorkMeter) -> None:
        self._mech, self._eps, self.meter = mech, eps, meter
        self._values: dict[int, Bracket] = {}
        self._directions: dict[tuple[int, bool], Bracket] = {}
        self.best, self.best_a, self.top_upper, self._first = 0.0, 0, 0.0, True

    def get(self, a: int) -> Bracket:
        """F(a), both directions."""
        if a not in self._values:
            self._values[a] = self._offer(a, _k2_value(self._mech, a, self._eps, self.meter))
        return self._values[a]

    def direction(self, a: int, forward: bool) -> Bracket:
        """One direction of F(a) (its upper end bounds that direction; its lower end, F(a)):
        by the contour, or F(a) itself where that declines."""
        if a in self._values:
            return self._values[a]
        if (a, forward) not in self._directions:
            value = k2_direction_value(self._mech, a, self._eps, forward, self.meter)
            if value is None:
                value = self.get(a)
            self._directions[a, forward] = self._offer(a, value)
        return self._directions[a, forward]

    def prefill(self, a_values: range) -> None:
        """F(a) for these a in one batched pass (:func:`k2_values_many`)."""
        todo = [a for a in a_values if a not in self._values]
        for a, value in zip(
            todo, k2_values_many(self._mech, todo, self._eps, self.meter), strict=True
        ):
            self._values[a] = self._offer(a, value)

    def record(self, a: int, forward: bool, value: Bracket) -> None:
        """One direction of F(a), computed elsewhere (the batched certificate)."""
        self._directions[a, forward] = self._offer(a, value)

    def _offer(self, a: int, value: Bracket) -> Bracket:
        if value.lower > self.best or self._first:
            self.best, self.best_a, self._first = value.lower, a, False
        self.top_upper = max(self.top_upper, value.upper)
        return value


def _k2_block_bound(
    mech: ShuffledKRR,
    eps: float,
    block: tuple[int, int],
    best: float,
    meter: WorkMeter,
    forward: bool,
) -> float:
    """An upper bound on one direction of F(a) (``forward``: H(P0||P1)) for every a in the
    block [a1, a2] (the mixture argument of :func:`k2_revealed_users`, which holds for each
    direction): it is at most that direction of F(a1) of the n - d users left once d of the
    a2 - a1 middle users are revealed, plus the chance that more than d must be. By the
    contour (one direction, :mod:`k2_contour`) or, where that declines or its width decides
    against ``best`` (1 + K2_TOLERANCE), F(a1) itself (both directions): the FFT, the float64
    single-bin code far out, then the float64 convolution and again in long double."""
    a1, a2 = block
    revealed, tail = k2_revealed_users(a2 - a1, mech.eps0, best * K2_TOLERANCE * 1e-2)
    reduced = ShuffledKRR(n=mech.n - revealed, k=2, eps0=mech.eps0)
    target = best * (1.0 + K2_TOLERANCE)

    def settles(value: Bracket) -> bool:  # cleared, or not even its lower end clears: split
        return value.upper + tail <= target or value.lower + tail > target

    circle = shared_circle(mech.n, mech.eps0, eps)  # (one circle serves every reduced n)
    quick = k2_direction_value(reduced, a1, eps, forward, meter, circle)
    if quick is not None and settles(quick):
        return quick.upper + tail
    if a1 >= K2_FFT_FROM and best >= K2_FFT_MIN_DELTA:  # one FFT (1-3 ms) settles most far blocks
        quick = k2_fft_value(reduced, a1, eps, meter)
        if quick is not None and settles(quick):
            return quick.upper + tail
    if a1 > K2_BLOCK_A:  # far from the ends: the float64 single-bin code is cheaper there
        meter.work += K2_SINGLE_BIN_WORK
        single = SingleBin(a1).bracket(reduced, eps)  # (up to 5e-5 high at n = 1e6)
        if settles(single):
            return single.upper + tail
    bound = _k2_value(reduced, a1, eps, meter, fast=True)
    if not settles(bound):  # its width decides
        bound = _k2_value(reduced, a1, eps, meter)
    return bound.upper + tail


def _k2_ceiling(mech: ShuffledKRR, eps: float) -> float:
    """optimal-blanket's upper end (a valid upper bound at every k, a few ms), or inf where it
    refuses. Where it is already within K2_CEILING_TOLERANCE of some F(a) (both near 1: eps
    near 0 with a large eps0, where every F(a) is the same to 1e-10 and the certificate would
    evaluate hundreds of a), it closes the bracket at once."""
    try:
        return OptimalBlanket().bracket(mech, eps).upper
    except OutsideConditionsError:
        return math.inf


class ExactK2(Bound):
    """k = 2 only: max_a F(a) with the certificate of :func:`k2_worst_case`: the exact worst case
    to within K2_TOLERANCE (or the certificate's looser bound where its budget ran out).
    Guarantees: an upper bound on delta for the released histogram (every dataset)."""

    name = "family-f(k=2, every a)"
    kind = BoundKind.UPPER
    guarantee = "k = 2: the exact worst case max_a F(a), certified over every a"

    def bracket(self, mech: ShuffledKRR, eps: float) -> Bracket:
        if eps >= mech.eps0:
            return Bracket.exact_zero()
        return k2_worst_case(mech, eps)[0]

    def refusal(self, mech: ShuffledKRR) -> str | None:
        return None if mech.k == 2 else f"{self.name} applies only at --k 2, got {mech.k}"

    def exact_case(self, mech: ShuffledKRR, eps: float) -> ExactCase | None:
        """The certificate at eps (cached: the upper end asked for it) and its best a."""
        if eps >= mech.eps0:
            return None
        bracket, a = k2_worst_case(mech, eps)
        return ExactCase(bracket=bracket, k2_a=a)

    def upper_crossing(self, mech: ShuffledKRR, delta: float, start: float) -> Crossing:
        """The certified crossing of max_a F(a) (k2_eps_for_delta), with F(a*)'s lower
        crossing; where no certificate confirms one, the safe-side search of the bracket."""
        lower, value, a = k2_eps_for_delta(mech, delta, start)
        if math.isfinite(value):
            return Crossing(upper=value, lower=lower, witness=f"family-f(a={a})", k2_a=a)
        return Crossing(upper=super().upper_crossing(mech, delta, start).upper, k2_a=a)


def k2_eps_for_delta(mech: ShuffledKRR, delta: float, start: float) -> tuple[float, float, int]:
    """k = 2: (eps_lower, eps_upper, a*) around the eps at which the exact worst case max_a F(a)
    meets delta, with few certificates. The best a <= K2_NEAR at the starting eps is the first
    candidate a* for the maximum; the crossing of F(a*) alone is found by cheap evaluations (at
    delta (1 - 1e-10), so that a certificate within K2_TOLERANCE of it stays below delta); one
    certificate there confirms it, and F(a*)'s lower crossing is eps_lower. If another a <=
    K2_NEAR leads at the crossing, or the certificate finds one elsewhere, it becomes the
    candidate (at most 8 rounds). If the certificate stays above
    (its budget ran out), :func:`_k2_uncertified` looks further up with eps_lower 0; (0, inf)
    if none confirms. a* is returned in every case: the caller's lower search evaluates F(a*)
    (no state is kept between calls, so the answer does not depend on earlier ones).
    """

    guess_at = min(start, mech.eps0 * 0.5)
    near = range(min((mech.n - 1) // 2, K2_NEAR) + 1)  # the usual place of the maximum
    # a first candidate from a few a (the guess is often deep in the tail, where every
    # evaluation is dear: n = 1e7, eps0 = 4 took 0.8 s over all 65); the leader check at the
    # crossing below looks at every a <= K2_NEAR
    probe = [a for a in (0, 1, 2, 3, 4, 6, 8, 12, 16, 19, 24, 32, 48, 64) if a in near]
    at_guess = dict(zip(probe, k2_values_many(mech, probe, guess_at), strict=True))
    a_star = max(probe, key=lambda a: at_guess[a].lower)
    crossing = math.inf
    for _ in range(8):

        def up(e: float, a: int = a_star) -> float:
            return _k2_value(mech, a, e).upper if e < mech.eps0 else 0.0

        crossing = _fine_crossing(up, delta * (1.0 - 1e-10), start, upper_side=True)
        if not math.isfinite(crossing) or crossing >= mech.eps0:
            return 0.0, math.inf, a_star
        # another a near the ends may lead at the crossing (n = 1e6, eps0 = 0.5: a = 19, not the
        # a best at the guess): switch before paying for a certificate (22 s there)
        ahead = sorted({*near, a_star})
        lowers = {
            a: v.lower for a, v in zip(ahead, k2_values_many(mech, ahead, crossing), strict=True)
        }
        leader = max(near, key=lowers.__getitem__)
        if lowers[leader] > lowers[a_star]:
            a_star = leader
            continue
        certified, best = k2_worst_case(mech, crossing)
        if certified.upper <= delta:

            def low(e: float, a: int = a_star) -> float:
                return _k2_value(mech, a, e).lower if e < mech.eps0 else 0.0

            lower = _fine_crossing(low, delta, crossing, upper_side=False)
            return min(lower, crossing), crossing, a_star
        if best == a_star:
            return 0.0, _k2_uncertified(mech, delta, certified, up), a_star
        a_star = best
    return 0.0, math.inf, a_star


def _fine_crossing(
    fn: Callable[[float], float], target: float, start: float, *, upper_side: bool
) -> float:
    """smallest_eps_at_most to inversion's tolerance (1e-9 absolute), then, below eps = 1, again
    from there to 1e-11 relative (at least K2_EPS_TOL): 1e-9 is 6e-8 relative at eps = 0.016.
    (Near eps0 = 700 the refinement would creep through thousands of steps: not done there.)"""
    coarse = smallest_eps_at_most(fn, target, start, upper_side=upper_side)
    if not 0.0 < coarse <= 1.0:
        return coarse
    tol = max(K2_EPS_TOL, 1e-11 * coarse)
    return smallest_eps_at_most(fn, target, coarse, upper_side=upper_side, tol=tol)


def _k2_uncertified(
    mech: ShuffledKRR, delta: float, certified: Bracket, up: Callable[[float], float]
) -> float:
    """The certificate at the crossing stayed above delta (its budget ran out, ratio r =
    upper / lower): look for the eps where F(a*) alone meets delta / (1.01 r) (by the cheap
    evaluations of ``up``) and certify there, a few times; then a few eps further up. The lower
    end then comes from the lower members. inf if none confirms."""
    ratio = certified.upper / certified.lower if certified.lower > 0 else math.inf
    check = math.inf
    for _ in range(3):
        if not math.isfinite(ratio):
            break
        check = smallest_eps_at_most(up, delta / (1.01 * ratio), 0.0, upper_side=True)
        if not check < mech.eps0:
            break
        again = k2_worst_case(mech, check, K2_SHORT_WORK)[0]
        if again.upper <= delta:
            return check
        ratio *= again.upper / delta
    for step in (1e-3, 1e-2, 1e-1):
        top = min(check if math.isfinite(check) else mech.eps0, mech.eps0)
        if k2_worst_case(mech, min(top * (1.0 + step), mech.eps0), K2_SHORT_WORK)[0].upper <= delta:
            return min(top * (1.0 + step), mech.eps0)
    return math.inf
