"""Composition over R rounds as a bracket [lower, upper] on the composed worst case, at any n.

* Upper: the dominating pair built from a valid one-round privacy profile (by default
  ``tight``'s upper end: the minimum of every valid upper bound, the certified exact worst case
  for k = 2), :func:`profile_pld.upper_pld`, composed R times by dp-accounting. No outcome list,
  so no cap and no fallback to a looser pair: where a profile value cannot be evaluated the
  value at the nearest smaller eps stands in (the worst case is non-increasing in eps), and
  the result says at how many points.
* Lower: one concrete pair of neighbouring datasets used in every round, a valid lower bound on
  the composed worst case: for k = 2 the dataset F(a) that ``tight`` finds worst at one round
  (its count of x0, listed, O(sqrt(n)) outcomes; :func:`profile_pld.lower_pld_from_pair`); for
  k >= 3 F(0) (a symmetric pair, from brackets of its exact curve:
  :func:`profile_pld.lower_pld_from_profile`) and, where it is the worse of the two at the
  middle of the grid and lists in MAX_WITNESS_OUTCOMES outcomes, F(n - 1) (listed:
  :func:`all_x0_log_pmfs`). All rounded down.

Memory does not grow with n: each profile value costs O(sqrt(n)) or less, and the grid step is
tied to the loss scale (profile_pld.choose_grid), so the PLDs span a number of cells that
depends on R only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from shuffledp.accountant.bounds.base import Bound, OutsideConditionsError
from shuffledp.accountant.bounds.blanket import OptimalBlanket, require_eps0_in_range
from shuffledp.accountant.composition.pair_pld import fft_error, require_above_rounding
from shuffledp.accountant.composition.profile_pld import (
    TAIL_TRUNCATION,
    Grid,
    choose_grid,
    lower_pld_from_pair,
    lower_pld_from_profile,
    upper_pld,
)
from shuffledp.accountant.engines.numerics import (
    FloatArray,
    binomial_window,
    log_binom_pmf,
    log_sum,
)
from shuffledp.accountant.mechanism import (
    InvalidParameterError,
    ShuffledKRR,
    require_delta,
    require_eps,
)
from shuffledp.accountant.tight import Tight
from shuffledp.accountant.worst_case.family import family_delta, k2_worst_case

#: Most rounds composed (dp-accounting's self-composition raises the one-round transform to the
#: R-th power; beyond this the grid step, tied to 1 / sqrt(R), makes the PLDs large).
MAX_ROUNDS = 100_000
#: k = 2: tight's best F(a) is listed for min(a, n - 1 - a) up to this (Bin(a, pt) is summed
#: point by point); beyond, only F(0), F(1), F(2): valid (perhaps weaker) lower ends.
K2_LISTED_A = 256
#: k = 2: up to this n every F(a) is composed (small n: the composition's worst a varies).
K2_ALL_A_UP_TO = 64
#: Depth (nats below the mode) of the listed window of the others' count; the rest is left out
#: of the lower end (dropped mass: the low side).
LIST_DEPTH = 40.0
#: Seconds spent evaluating the upper profile (tight's k = 2 certificate costs 0.1-0.5 s per
#: point at n = 1e6 and seconds at 1e9); past it, optimal-blanket's values stand in (tight) or
#: the carried-over value (one bound), and the output says at how many points.
PROFILE_BUDGET = 60.0
#: Outcomes per chunk when listing (memory of one chunk: CHUNK x (a + 1) doubles).
CHUNK = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class ComposedBracket:
    """After ``rounds`` rounds: the query (``eps`` or ``delta``) and the bracket on the other
    (``lower`` <= composed worst case <= ``upper``); which one-round curve gave each end; the
    grid step; notes on points where the upper profile had to be carried over."""

    rounds: int
    eps: float | None
    delta: float | None
    lower: float
    upper: float
    upper_from: str
    lower_from: str
    step: float
    notes: str | None = None

    @property
    def ratio(self) -> float:
        if self.upper == 0.0:
            return 1.0
        return self.upper / self.lower if self.lower > 0.0 else math.inf


class _Profile:
    """A one-round upper profile evaluated once per eps; refusals counted."""

    def __init__(self, fn: Callable[[float], float]) -> None:
        self._fn = fn
        self._values: dict[float, float] = {}
        self.refused = 0
        self.last_refusal = ""

    def __call__(self, eps: float) -> float:
        """The value at eps, nan where it refused (upper_pld carries the previous one over)."""
        if eps not in self._values:
            try:
                self._values[eps] = min(1.0, self._fn(eps))
            except OutsideConditionsError as exc:
                self.refused += 1
                self.last_refusal = str(exc)
                self._values[eps] = math.nan
        return self._values[eps]


def spread_order(size: int) -> list[int]:
    """0 .. size - 1, coarse first: every 32nd index, then the ones between, and so on; eps = 0
    (index 0) last: there k = 2's certificate is slowest (96 s at n = 1e6, F(a) is flat in a),
    and optimal-blanket's value is close."""
    order: list[int] = []
    seen: set[int] = set()
    stride = 32
    while stride >= 1:
        for i in range(0, size, stride):
            if i not in seen:
                seen.add(i)
                order.append(i)
        stride //= 2
    return [*order[1:], 0]


#: ``progress(done, total)``: called as the upper profile's points are evaluated (the CLI's bar).
Progress = Callable[[int, int], None]


def profile_values(
    profile: _Profile,
    fallback: Callable[[float], float],
    eps: FloatArray,
    budget: float,
    progress: Progress | None = None,
) -> tuple[FloatArray, int]:
    """min(profile, fallback) at each eps, the profile evaluated coarse points first until
    ``budget`` seconds are spent (the pointwise minimum of two valid upper profiles is one);
    and how many points the profile reached."""
    values = np.array([fallback(e) for e in eps.tolist()])
    started = time.perf_counter()
    reached = 0
    for i in spread_order(eps.size):
        if time.perf_counter() - started > budget:
            break
        value = profile(float(eps[i]))
        reached += 1
        if progress is not None:
            progress(reached, eps.size)
        if not math.isnan(value):
            values[i] = min(values[i], value) if not math.isnan(values[i]) else value
    return values, reached


def _blanket(mech: ShuffledKRR, refused: float) -> Callable[[float], float]:
    """optimal-blanket's upper end (a few ms at any n), ``refused`` where it refuses (in the deep
    tail at large n): 0 to place the grid, nan (carry the previous value over) as a value."""
    blanket = OptimalBlanket()

    def value(eps: float) -> float:
        try:
            return blanket.bracket(mech, eps).upper
        except OutsideConditionsError:
            return refused

    return value


def upper_profile(mech: ShuffledKRR, bound: Bound | None) -> tuple[Callable[[float], float], str]:
    """The one-round upper profile and its name: tight's upper end, or one bound's."""
    if bound is None:
        tight = Tight()
        return (lambda eps: tight.upper_only(mech, eps)), "tight (min of the valid upper bounds)"
    return (lambda eps: bound.bracket(mech, eps).upper), bound.name


def compose_bracket(
    mech: ShuffledKRR,
    rounds: int,
    *,
    eps: float | None = None,
    delta: float | None = None,
    bound: Bound | None = None,
    progress: Progress | None = None,
) -> ComposedBracket:
    """The bracket after ``rounds`` rounds: on delta at ``eps`` or on eps at ``delta``
    (``progress``: see :data:`Progress`)."""
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= MAX_ROUNDS:
        raise InvalidParameterError(
            f"--rounds must be an integer in [1, {MAX_ROUNDS}], got {rounds!r}"
        )
    if (eps is None) == (delta is None):
        raise InvalidParameterError("give exactly one of eps and delta")
    eps_v = None if eps is None else require_eps(eps)
    delta_v = None if delta is None else require_delta(delta)
    require_eps0_in_range(mech)
    fn, upper_name = upper_profile(mech, bound)
    grid = choose_grid(_blanket(mech, 0.0), mech.eps0, rounds)
    profile = _Profile(fn)
    # optimal-blanket fills in where tight's profile is not reached (tight is never above it).
    fallback = _blanket(mech, math.nan) if bound is None else (lambda eps: math.nan)
    values, reached = profile_values(profile, fallback, grid.eps, PROFILE_BUDGET, progress)
    if np.all(np.isnan(values)):
        raise OutsideConditionsError(
            f"--rounds: {upper_name} refused at every eps of the grid: {profile.last_refusal}"
        )
    try:
        upper = upper_pld(grid, values)
    except OutsideConditionsError as exc:
        refusal = f" (it refused: {profile.last_refusal})" if profile.refused else ""
        raise OutsideConditionsError(f"--rounds with {upper_name}: {exc}{refusal}") from None
    err = fft_error(rounds, upper)
    if delta_v is not None:
        require_above_rounding(delta_v, err, rounds)
    if rounds > 1:
        upper = upper.self_compose(rounds, tail_mass_truncation=TAIL_TRUNCATION)
    hi = _answer(upper, eps_v, delta_v, -err)
    lo, lower_name = _lower_end(mech, grid, rounds, eps_v, delta_v)
    if lo > hi:
        raise ArithmeticError(
            f"composed bracket inverted at {mech}, {rounds} rounds: lower {lo!r} ({lower_name}) "
            f"> upper {hi!r} ({upper_name})"
        )
    notes = _notes(profile, reached, grid.j.size, bound is None)
    return ComposedBracket(
        rounds=rounds,
        eps=eps_v,
        delta=delta_v,
        lower=lo,
        upper=hi,
        upper_from=upper_name,
        lower_from=lower_name,
        step=grid.step,
        notes=notes,
    )


def _lower_end(
    mech: ShuffledKRR, grid: Grid, rounds: int, eps: float | None, delta: float | None
) -> tuple[float, str]:
    """The largest composed value over the witness pairs (rounded down) and its pair's name."""
    lo, lower_name = -math.inf, ""
    for pld, name in witness_plds(mech, grid):
        witness_err = fft_error(rounds, pld)
        if rounds > 1:
            pld = pld.self_compose(rounds, tail_mass_truncation=TAIL_TRUNCATION)
        # dp-accounting adds its truncated tail to the infinite loss of any PLD, optimistic
        # ones too: take it off the lower end again (twice, for the rounding of the sums), and
        # the FFT's rounding error.
        value = _answer(pld, eps, delta, 2.0 * TAIL_TRUNCATION + witness_err)
        if value > lo:
            lo, lower_name = value, name
    return lo, lower_name


def _answer(
    pld: pld_lib.PrivacyLossDistribution, eps: float | None, delta: float | None, slack: float
) -> float:
    """delta at eps (minus ``slack``, at least 0, at most 1) or eps at delta (+ ``slack``); a
    negative slack is a margin on the upper side (delta at eps plus it, eps at delta minus it)."""
    if eps is not None:
        return min(1.0, max(0.0, float(pld.get_delta_for_epsilon(eps)) - slack))
    assert delta is not None
    return float(pld.get_epsilon_for_delta(min(1.0, delta + slack)))


def _notes(profile: _Profile, reached: int, points: int, tight: bool) -> str | None:
    """What the output must say about the upper profile: points where it refused (the value at
    the next smaller eps stood in) or, past the time budget, was not evaluated."""
    notes = []
    if reached < points:
        other = "optimal-blanket's value" if tight else "the value at the next smaller eps"
        notes.append(
            f"upper profile evaluated at {reached} of {points} grid points within "
            f"{PROFILE_BUDGET:g} s; {other} at the others"
        )
    if profile.refused:
        notes.append(
            f"upper profile refused at {profile.refused} of {points} grid points (the value at "
            f"the next smaller eps stood in): {profile.last_refusal}"
        )
    return "; ".join(notes) if notes else None


def witness_plds(
    mech: ShuffledKRR, grid: Grid
) -> list[tuple[pld_lib.PrivacyLossDistribution, str]]:
    """The lower end's candidate one-round PLDs (rounded down), each with its dataset's name:
    each is a valid lower end once composed, and the largest composed value is kept."""
    if mech.k == 2:
        cap = float(grid.eps[-1])
        return [
            (lower_pld_from_pair(*k2_pair_log_pmfs(mech, a), grid.step, cap), f"family-f(a={a})")
            for a in k2_witnesses(mech, grid)
        ]
    return [_f0_pld(mech, grid), *_all_x0_witness(mech, grid)]


def _f0_pld(mech: ShuffledKRR, grid: Grid) -> tuple[pld_lib.PrivacyLossDistribution, str]:
    """k >= 3, F(0): a symmetric pair, from brackets of its exact curve at the grid points."""
    lower, upper = [], []
    for e in grid.eps.tolist():
        try:
            bracket = family_delta(mech, 0, e)
        except OutsideConditionsError:
            lower.append(math.nan)
            upper.append(math.nan)
            continue
        lower.append(bracket.lower)
        upper.append(bracket.upper)
    pld = lower_pld_from_profile(grid, np.array(lower), np.array(upper))
    return pld, "family-f(a=0)"


def _all_x0_witness(
    mech: ShuffledKRR, grid: Grid
) -> list[tuple[pld_lib.PrivacyLossDistribution, str]]:
    """k >= 3, F(n - 1) (every other user holds x0), the other end of the family tight's lower
    end searches, where its one-round delta beats F(0)'s at the middle of the grid's eps range
    (tight reports it as the worst dataset there) and its pair lists in at most
    MAX_WITNESS_OUTCOMES outcomes (O(n) of them; beyond, F(0) alone: still valid)."""
    eps = float(grid.eps[grid.j.size // 2])
    try:
        if family_delta(mech, mech.n - 1, eps).lower <= family_delta(mech, 0, eps).upper:
            return []
    except OutsideConditionsError:
        return []
    listed = all_x0_log_pmfs(mech)
    if listed is None:
        return []
    cap = float(grid.eps[-1])
    pld = lower_pld_from_pair(*listed, grid.step, cap)
    return [(pld, f"family-f(a={mech.n - 1})")]


#: Most outcomes of F(n - 1)'s listed pair in the lower end (_all_x0_witness).
MAX_WITNESS_OUTCOMES = 4_000_000


def all_x0_log_pmfs(mech: ShuffledKRR) -> tuple[FloatArray, FloatArray] | None:
    """F(n - 1)'s pair over the counts (N_x0, N_x1) (sufficient: bounds.base.AllOthersX0),
    listed LIST_DEPTH nats deep: the others' N_x0 ~ Bin(n - 1, pt), N_x1 given it
    ~ Bin(n - 1 - N_x0, pb / (1 - pt)); u adds x0 w.p. pt (P) or pb (Q), x1 w.p. pb (P) or pt
    (Q), another value otherwise. Mass outside the window is left out (the low side: a lower
    end). None when it has more than MAX_WITNESS_OUTCOMES outcomes."""
    others = mech.n - 1
    pt, pb = mech.pt_precise, mech.pb_precise
    rest = max(0.0, 1.0 - pt - pb)
    lo, hi, _ = binomial_window(others, pt, depth=LIST_DEPTH)
    q1 = pb / (pb + rest) if pb + rest > 0.0 else 0.0
    sd = math.sqrt(max(others * q1 * (1.0 - q1), 1.0))
    width = 2.0 * (math.sqrt(2.0 * LIST_DEPTH) * sd + 3.0) + 2.0
    if (hi - lo + 2) * width > MAX_WITNESS_OUTCOMES:
        return None
    log_p: list[FloatArray] = []
    log_q: list[FloatArray] = []
    for i in range(lo, hi + 2):  # i: N_x0 with u's report
        m = others - np.arange(i - 1, i + 1, dtype=np.float64)  # others not on x0: i-1, i
        centre = float(m[0]) * q1
        half = math.sqrt(2.0 * LIST_DEPTH) * sd + 3.0
        j = np.arange(max(0, math.floor(centre - half)), math.ceil(centre + half) + 2)
        j = j.astype(np.float64)
        w_prev = float(log_binom_pmf(i - 1, others, pt))  # others on x0: i - 1 (u on x0)
        w_here = float(log_binom_pmf(i, others, pt))  # others on x0: i (u elsewhere)
        o_prev = w_prev + log_binom_pmf(j, m[0], q1, 1.0 - q1)  # u on x0
        o_here_j1 = w_here + log_binom_pmf(j - 1.0, m[1], q1, 1.0 - q1)  # u on x1
        o_here = w_here + log_binom_pmf(j, m[1], q1, 1.0 - q1)  # u on another value
        log_rest = math.log(rest) if rest > 0.0 else -math.inf
        log_p.append(
            np.logaddexp.reduce(
                [math.log(pt) + o_prev, math.log(pb) + o_here_j1, log_rest + o_here]
            )
        )
        log_q.append(
            np.logaddexp.reduce(
                [math.log(pb) + o_prev, math.log(pt) + o_here_j1, log_rest + o_here]
            )
        )
    return np.concatenate(log_p), np.concatenate(log_q)


def k2_witnesses(mech: ShuffledKRR, grid: Grid) -> list[int]:
    """k = 2: every a <= (n - 1) / 2 up to n = K2_ALL_A_UP_TO (F(a) = F(n - 1 - a) with the
    directions swapped); beyond, a in {0, 1, 2} and the a of tight's best F(a) at the middle of
    the grid's eps range if it is within K2_LISTED_A of an end (one round's worst pair need
    not be the composition's: n = 12, eps0 = 1, 3 rounds, eps = 1: F(0) 0.0168, F(1) 0.0094)."""
    half = (mech.n - 1) // 2
    if mech.n <= K2_ALL_A_UP_TO:
        return list(range(half + 1))
    eps = float(grid.eps[grid.j.size // 2])
    best = k2_worst_case(mech, eps)[1] if eps < mech.eps0 else 0
    best = min(best, mech.n - 1 - best)
    return sorted({0, 1, 2, *([best] if best <= K2_LISTED_A else [])})


def k2_pair_log_pmfs(mech: ShuffledKRR, a: int) -> tuple[FloatArray, FloatArray]:
    """k = 2, F(a): the count of x0, listed over the LIST_DEPTH window of the others' count
    B = Bin(a, pt) + Bin(n - 1 - a, pb); P(s) = pt B(s - 1) + pb B(s) (u holds x0),
    Q(s) = pb B(s - 1) + pt B(s) (u holds x1). Mass outside the window is left out (low side)."""
    others = mech.n - 1 - a
    pt, pb = mech.pt_precise, mech.pb_precise
    lo, hi, _ = binomial_window(others, pb, depth=LIST_DEPTH, qc=mech.pt_precise)
    y = np.arange(a + 1, dtype=np.float64)
    log_y = log_binom_pmf(y, a, pt, pb)
    # B at s - 1 and s for s in [lo, hi + a + 1] (B = 0 below 0: log_binom_pmf gives -inf).
    s_all = np.arange(lo - 1, hi + a + 2, dtype=np.float64)
    log_b = np.empty(s_all.size)
    for start in range(0, s_all.size, CHUNK):
        s = s_all[start : start + CHUNK, None]
        terms = log_y[None, :] + log_binom_pmf(s - y[None, :], others, pb, pt)
        log_b[start : start + CHUNK] = log_sum(terms, axis=1)
    prev, here = log_b[:-1], log_b[1:]
    log_p = np.logaddexp(math.log(pt) + prev, math.log(pb) + here)
    log_q = np.logaddexp(math.log(pb) + prev, math.log(pt) + here)
    return log_p, log_q
