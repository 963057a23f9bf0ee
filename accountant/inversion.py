"""eps for a given delta, and calibration of eps0, on the safe side of every bound.

delta(eps) of any pair is non-increasing in eps, so eps(delta) = inf{eps : delta(eps) <= target}
is found by bisection. The safe side depends on what the function bounds:

* an upper bound u(eps) >= true delta: return the top of the final interval, where u <= target
  was checked, so the true eps(delta) is no larger (a valid guarantee);
* a lower bound l(eps) <= true delta: return the bottom, where l > target was checked, so the true
  eps(delta) is at least that (a valid lower bound on eps).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from shuffledp.accountant.blanket import OptimalBlanket
from shuffledp.accountant.bounds import (
    BlanketAnalytic,
    Bound,
    BoundKind,
    Erlingsson,
    OutsideConditionsError,
)
from shuffledp.accountant.family import ExactK2, k2_eps_for_delta
from shuffledp.accountant.k3_exhaustive import (
    K3_MAX_N,
    Counts,
    ExactK3,
    counts_name,
    k3_calibrate_eps0,
    k3_eps_for_delta,
)
from shuffledp.accountant.mechanism import (
    InvalidParameterError,
    ShuffledKRR,
    require_delta,
    require_eps,
)
from shuffledp.accountant.numerics import largest_where
from shuffledp.accountant.pairs import Bracket
from shuffledp.accountant.renyi_girgis import RenyiGirgis
from shuffledp.accountant.tight import (
    FamilyMember,
    Tight,
    bracket_extra,
    covered,
    dominated,
    interior,
    witness_name,
)

#: Absolute tolerance on eps; the returned value is off by at most this, on the safe side.
EPS_TOL = 1e-9
#: Largest eps searched (beyond it a bound that never reaches the target reports inf). inf is
#: honest: the bound was checked above the target at an eps >= EPS_CAP (max(EPS_CAP, start) after
#: doubling from start), so it certifies no finite eps; strong-adversary is constant beyond
#: log(n - 1) and really never reaches a target below (1 - pb)^(n-1). A few evaluations, not minutes.
EPS_CAP = 64.0


@dataclass(frozen=True, slots=True, kw_only=True)
class EpsResult:
    """eps at a target delta from one bound; ``eps`` is the headline value on the safe side."""

    bound: str
    kind: BoundKind
    delta: float
    eps: float
    eps_lower: float
    eps_upper: float
    extra: dict[str, float | str] = field(default_factory=dict)


def smallest_eps_at_most(
    fn: Callable[[float], float],
    target: float,
    start: float,
    *,
    upper_side: bool,
    tol: float = EPS_TOL,
) -> float:
    """inf{eps >= 0 : fn(eps) <= target} for non-increasing fn, to tol, on the safe side.

    upper_side: fn bounds the truth from above (return the top of the final interval, where
    fn <= target was checked) or from below (return the bottom, where fn > target was checked).
    Returns inf (upper side) when fn stays above the target up to EPS_CAP.
    """
    f0 = fn(0.0)
    if f0 <= target:
        return 0.0
    lo, hi, flo = 0.0, max(start, EPS_TOL), f0
    fhi = fn(hi)
    while fhi > target:
        lo, flo, hi = hi, fhi, 2.0 * hi
        if hi > EPS_CAP:
            return math.inf if upper_side else lo
        fhi = fn(hi)
    lo, hi = _illinois(fn, target, lo, hi, flo, fhi, tol)
    return hi if upper_side else lo


def _illinois(
    fn: Callable[[float], float],
    target: float,
    lo: float,
    hi: float,
    flo: float,
    fhi: float,
    tol: float = EPS_TOL,
) -> tuple[float, float]:
    """Shrink [lo, hi] with fn(lo) > target >= fn(hi) to width <= tol.

    Regula falsi on g = log fn - log target (log delta is close to linear in eps, so this takes a
    handful of steps where bisection takes ~35), with the Illinois halving against stagnation and
    a margin that keeps each step shrinking the interval; where fn(hi) = 0 (g = -inf) the step
    interpolates to the smallest positive double instead.
    """
    log_t = math.log(target)
    # fn(hi) = 0 (at or beyond the largest loss) gives no slope; the step then interpolates to
    # the smallest positive double instead (delta drops fastest near the largest loss, so this
    # lands near the crossing). Only the choice of the next point depends on it.
    g_zero = math.log(math.ulp(0.0)) - log_t

    def g(value: float) -> float:
        return math.log(value) - log_t if value > 0.0 else -math.inf

    glo, ghi = g(flo), g(fhi)
    kept = 0  # +1: lo kept last step, -1: hi kept last step
    while hi - lo > tol:
        width = hi - lo
        g_step = ghi if math.isfinite(ghi) else min(g_zero, glo - 1.0)
        # fn(hi) = 0 and hi kept last step: bisect (the g_zero step can creep by 1e-3 of the
        # width per call, thousands of calls across [0, eps0] at eps0 = 700).
        creeping = kept == -1 and not math.isfinite(ghi)
        if math.isfinite(glo) and glo > g_step and not creeping:
            x = hi - g_step * width / (g_step - glo)
            margin = min(0.25 * width, max(tol / 4.0, 1e-3 * width))
            x = min(max(x, lo + margin), hi - margin)
        else:
            x = lo + 0.5 * width
        fx = fn(x)
        gx = g(fx)
        if fx > target:
            lo, glo = x, gx
            if kept == -1:
                ghi /= 2.0  # hi kept twice: halve its weight (Illinois)
            kept = -1
        else:
            hi, ghi = x, gx
            if kept == 1:
                glo /= 2.0
            kept = 1
    return lo, hi


def eps_for_delta(bound: Bound, mech: ShuffledKRR, delta: float) -> EpsResult:
    """The eps at which ``bound`` meets ``delta``, rounded to the bound's safe side."""
    delta = require_delta(delta)
    if isinstance(bound, Erlingsson | BlanketAnalytic | RenyiGirgis):
        value = bound.eps_for(mech, delta)
        return EpsResult(
            bound=bound.name,
            kind=bound.kind,
            delta=delta,
            eps=value,
            eps_lower=value,
            eps_upper=value,
        )
    start = bound.zero_from(mech)
    start = mech.eps0 if math.isinf(start) else start
    if isinstance(bound, Tight):
        return _tight_eps(bound, mech, delta, start)

    def upper(eps: float) -> float:
        return bound.bracket(mech, eps).upper

    def lower(eps: float) -> float:
        return bound.bracket(mech, eps).lower

    eps_upper = smallest_eps_at_most(upper, delta, start, upper_side=True)
    eps_lower = lower_near(lower, delta, start, eps_upper)
    headline = eps_lower if bound.kind is BoundKind.LOWER else eps_upper
    return EpsResult(
        bound=bound.name,
        kind=bound.kind,
        delta=delta,
        eps=headline,
        eps_lower=eps_lower,
        eps_upper=eps_upper,
    )


def lower_near(fn: Callable[[float], float], target: float, start: float, near: float) -> float:
    """The lower-side crossing of fn, which lies at or below ``near`` (the upper side's crossing,
    since fn is a lower value of the same bracket): look just below it before searching afresh."""
    if math.isfinite(near) and near > 0.0:
        lo = max(near - 1e-6 * (1.0 + near), 0.0)
        f_lo, f_near = fn(lo), fn(near)
        if f_lo > target >= f_near:
            return _illinois(fn, target, lo, near, f_lo, f_near)[0]
    return smallest_eps_at_most(fn, target, start, upper_side=False)


#: An exact (k = 2 or k = 3) crossing this close to its lower end ends the search over the
#: upper members: every valid upper bound meets delta at or above the true eps, so none can
#: lower it by more than this (at n = 1e6, k = 2 the clone pairs cost 0.17 s for nothing).
EXACT_ENOUGH = 1e-9
#: eps(delta) skips the interior F(a) (k >= 3) once eps_upper <= eps_lower (1 + this): every
#: F(a) crosses delta at most at the true eps, so at most eps_upper; none can raise eps_lower by
#: more than this (relative). Otherwise each is checked at eps_lower (one evaluation of all a).
INTERIOR_EPS_WIDTH = 1e-6


def _tight_eps(bound: Tight, mech: ShuffledKRR, delta: float, start: float) -> EpsResult:
    # eps_upper = min over valid upper bounds of their eps (the min of the functions meets the
    # target at the min of their crossings); eps_lower = max over lower bounds l of theirs, since
    # l(eps) > target implies the true delta(eps) > target. Members that cannot beat the current
    # best at the current best are skipped (one evaluation each instead of a search); members
    # that cannot be evaluated here (OutsideConditionsError) are skipped and named.
    best_upper, upper_name, skipped = math.inf, "", []
    # k = 2 and k = 3 (n <= K3_MAX_N): the lower crossing found with the upper end (of F(k2_a),
    # or of the dataset k3_counts the enumeration confirmed) and the dataset's name.
    exact_lower: tuple[float, str] | None = None
    k2_a: int | None = None
    k3_counts: Counts | None = None
    blanket: Bracket | None = None  # optimal-blanket at its crossing, once it has answered
    for member in bound.upper_bounds(mech):

        def up(e: float, m: Bound = member) -> float:
            return m.bracket(mech, e).upper

        if dominated(member, blanket):
            continue
        try:
            if math.isfinite(best_upper) and up(best_upper - EPS_TOL) > delta:
                continue  # its crossing is above best_upper - tol: it cannot lower the minimum
            if isinstance(member, ExactK2):
                k2_lower, value, k2_a = k2_eps_for_delta(mech, delta, start)
                if math.isfinite(value):
                    exact_lower = (k2_lower, f"family-f(a={k2_a})")
                else:
                    value = smallest_eps_at_most(up, delta, start, upper_side=True)
            elif isinstance(member, ExactK3):
                # Never a search over enumerations: the candidate's crossing, confirmed once.
                k3_lower, value, candidate = k3_eps_for_delta(mech, delta, start)
                if math.isfinite(value):
                    k3_counts = candidate
                    exact_lower = (k3_lower, counts_name(candidate))
            else:
                value = smallest_eps_at_most(up, delta, start, upper_side=True)
        except OutsideConditionsError as exc:
            skipped.append(f"{member.name}: {exc}")
            continue
        if isinstance(member, OptimalBlanket) and math.isfinite(value):
            blanket = member.bracket(mech, value)
        if value < best_upper:
            best_upper, upper_name = value, member.name
        if exact_lower is not None and best_upper <= exact_lower[0] * (1.0 + EXACT_ENOUGH):
            break  # the exact worst case's crossing: no valid upper bound can be lower
    best_upper = min(best_upper, mech.eps0)  # k-RR alone is (eps0, 0)-DP
    best_lower, lower_name = _tight_eps_lower(
        bound, mech, delta, best_upper, exact_lower, k2_a, k3_counts
    )
    eps_lower = min(best_lower, best_upper)
    extra = bracket_extra(upper_name, lower_name, eps_lower, best_upper, skipped)
    return EpsResult(
        bound=bound.name,
        kind=bound.kind,
        delta=delta,
        eps=best_upper,
        eps_lower=eps_lower,
        eps_upper=best_upper,
        extra=extra,
    )


def _tight_eps_lower(
    bound: Tight,
    mech: ShuffledKRR,
    delta: float,
    best_upper: float,
    exact_lower: tuple[float, str] | None = None,
    k2_a: int | None = None,
    k3_counts: Counts | None = None,
) -> tuple[float, str]:
    best_lower, lower_name = exact_lower if exact_lower is not None else (0.0, "none")
    family: dict[int, Bracket] = {}  # F(a) at its crossing, for tight.covered
    for candidate in bound.lower_bounds(mech, k2_a, k3_counts):

        def low(e: float, m: Bound = candidate) -> float:
            return m.bracket(mech, e).lower

        if covered(candidate, family):
            continue
        if interior(candidate, mech) and best_upper <= best_lower * (1.0 + INTERIOR_EPS_WIDTH):
            continue
        try:
            if low(best_lower) <= delta:
                continue  # its crossing is at or below best_lower: it cannot raise the maximum
            # A lower bound's crossing is at most best_upper (there it is <= the truth <= target);
            # with a narrow bracket it is just below, where lower_near looks first.
            value = lower_near(low, delta, max(best_upper, EPS_TOL), best_upper)
        except OutsideConditionsError:
            continue
        if isinstance(candidate, FamilyMember) and value > 0.0:
            family[candidate.a] = candidate.bracket(mech, value)
        if value > best_lower:
            best_lower, lower_name = value, witness_name(candidate)
    return best_lower, lower_name


def calibrate_eps0(n: int, k: int, eps: float, delta: float, bound: Bound | None = None) -> float:
    """The largest eps0 (to 1e-9 relative, rounded down) whose valid guarantee meets (eps, delta).

    Uses ``bound`` (default ``tight``, whose guarantee is delta_upper); only bounds that are valid
    upper bounds may be used. Assumes the guarantee grows with eps0 (more randomisation never
    hurts) and checks the returned eps0 directly.
    """
    eps = require_eps(eps)
    delta = require_delta(delta)
    bound = bound if bound is not None else Tight()
    if bound.kind not in (BoundKind.UPPER, BoundKind.BRACKET):
        raise InvalidParameterError(
            f"calibration needs a valid upper bound, got {bound.name} ({bound.kind})"
        )

    if isinstance(bound, Tight) and k == 3 and n <= K3_MAX_N:
        # Its first upper member enumerates every dataset: candidates first, one enumeration
        # to confirm (k3_exhaustive), instead of an enumeration at every step.
        found = k3_calibrate_eps0(n, eps, delta, EPS_CAP)
        if found is not None:
            return found

    def meets(eps0: float) -> bool:
        mech = ShuffledKRR(n=n, k=k, eps0=eps0)
        if isinstance(bound, Tight):
            return bound.upper_only(mech, eps) <= delta  # the lower side is not needed here
        return bound.bracket(mech, eps).upper <= delta

    eps0 = largest_where(meets, max(eps, 1e-6), EPS_CAP)
    if eps0 is None:
        raise InvalidParameterError(
            f"no eps0 >= 1e-9 meets eps={eps}, delta={delta} with n={n}, k={k} ({bound.name})"
        )
    return eps0
