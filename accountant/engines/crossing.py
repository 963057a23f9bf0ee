"""Where a non-increasing delta(eps) meets a target delta: the one safe-side search.

delta(eps) of any pair is non-increasing in eps, so eps(delta) = inf{eps : delta(eps) <= target}
is found by bracketing and regula falsi. The safe side depends on what the function bounds:

* an upper bound u(eps) >= true delta: return the top of the final interval, where u <= target
  was checked, so the true eps(delta) is no larger (a valid guarantee);
* a lower bound l(eps) <= true delta: return the bottom, where l > target was checked, so the true
  eps(delta) is at least that (a valid lower bound on eps).

Plain numerics: no bound is imported here, so every layer (the bounds' own ``eps_bracket``, the
k = 2 and k = 3 exact searches, ``tight``) uses this one search.
"""

from __future__ import annotations

import math
from collections.abc import Callable

#: Absolute tolerance on eps; the returned value is off by at most this, on the safe side.
EPS_TOL = 1e-9
#: Largest eps searched (beyond it a bound that never reaches the target reports inf). inf is
#: honest: the bound was checked above the target at an eps >= EPS_CAP (max(EPS_CAP, start) after
#: doubling from start), so it certifies no finite eps; strong-adversary is constant beyond
#: log(n - 1) and really never reaches a target below (1 - pb)^(n-1). A few evaluations, not minutes.
EPS_CAP = 64.0


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


def lower_near(fn: Callable[[float], float], target: float, start: float, near: float) -> float:
    """The lower-side crossing of fn, which lies at or below ``near`` (the upper side's crossing,
    since fn is a lower value of the same bracket): look just below it before searching afresh."""
    if math.isfinite(near) and near > 0.0:
        lo = max(near - 1e-6 * (1.0 + near), 0.0)
        f_lo, f_near = fn(lo), fn(near)
        if f_lo > target >= f_near:
            return _illinois(fn, target, lo, near, f_lo, f_near)[0]
    return smallest_eps_at_most(fn, target, start, upper_side=False)
