"""Privacy-loss distributions built from a privacy profile: composition at any n.

A bound that is valid at every eps at once (a *privacy profile* delta_up(eps), both directions)
is all composition needs. Zhu, Dong and Wang ("Optimal accounting of differential privacy via
characteristic function", AISTATS 2022, Section 3: dominating pairs) show that the worst-case
hockey-stick curve W(x) = sup over ordered neighbouring pairs of H_x(M(D) || M(D')), x = e^eps >=
0, is the curve of a pair that dominates the mechanism, and that dominating pairs compose. W is
convex in x (a supremum of convex functions), W(0) = 1, slope >= -1, and, the neighbouring
relation being symmetric, W(x) = 1 - x + x W(1/x). So any convex, symmetric curve above
delta_up on a grid is the curve of a dominating pair: :func:`upper_pld` builds it as the lower
convex hull (in x) of the profile's values at grid points eps_j = j d, whose linear
interpolation lies above W between grid points because W is convex (Doroshenko, Ghazi, Kamath,
Kumar, Manurangsi, "Connect the dots", PETS 2022, the pessimistic construction dp-accounting uses
for additive noise). Its losses sit exactly on the grid: no rounding.

The lower end (:func:`lower_pld_from_profile`, :func:`lower_pld_from_pair`) composes one
concrete dataset pair (D, D') in every round, a valid lower bound on the composed worst case
(the adversary may use the same pair each round). Its PLD is rounded *down*: losses floored to
the grid, truncated mass dropped (moved to loss -inf), so its curve
E_P[(1 - x e^-L)_+] can only fall, round by round and after composition.

Memory: every evaluation of a profile is O(sqrt(n)) or less, a grid holds at most
:data:`MAX_POINTS` points and the dense PLD spans [-eps_hi, eps_hi] / d cells, independent of n.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from dp_accounting.pld import pld_pmf
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from shuffledp.accountant.engines.numerics import FloatArray, IntArray
from shuffledp.errors import OutsideConditionsError

#: The grid stops where the upper profile falls below this; beyond it the upper curve is held
#: constant (that mass counts as infinite loss, the safe side).
TAIL_DELTA = 1e-20
#: One-round delta at which the loss scale is read (``reference_eps``) to size the grid step.
REFERENCE_DELTA = 1e-6
#: Most grid points (profile evaluations) per end.
MAX_POINTS = 200
#: Starting points, uniform in eps over [0, eps_hi].
START_POINTS = 40
#: An interval is split while log(delta_i / delta_{i+1}) exceeds this (the chord's excess over a
#: convex curve is then about LOG_STEP^2 / 8 relative: 3 % at the midpoint for 0.5)...
LOG_STEP = 0.5
#: ... or while delta drops by more than this in absolute terms (the region near eps = 0).
ABS_STEP = 2e-3
#: Relative padding of every upper value (and shrinking of every lower one): covers the float
#: eps = j * d being within an ulp of the real grid point and the hull's own rounding.
PAD = 1e-9
#: Grid step: reference_eps / (STEP_DIVISOR sqrt(R)); R rounds of rounding by less than one step
#: move the lower end's composed eps by less than about 1 / STEP_DIVISOR of it.
STEP_DIVISOR = 400.0
#: The coarsest grid step (dp-accounting's default).
MAX_STEP = 1e-4
#: dp-accounting's tail truncation per composition; it adds this to the infinite-loss mass of
#: any PLD (the lower end subtracts it again).
TAIL_TRUNCATION = 1e-20


@dataclass(frozen=True, slots=True)
class Grid:
    """Grid points eps_j = j * step (j ascending, j[0] = 0) and the step."""

    j: IntArray
    step: float

    @property
    def eps(self) -> FloatArray:
        return self.j.astype(np.float64) * self.step


def _bisect(fn: Callable[[float], float], target: float, hi: float) -> float:
    """The smallest eps in [0, hi] (to 1e-6 relative of hi) with fn(eps) <= target (fn is
    non-increasing; hi if none)."""
    if fn(0.0) <= target:
        return 0.0
    lo = 0.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if fn(mid) <= target:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-6 * hi:
            break
    return hi


def choose_grid(upper: Callable[[float], float], eps0: float, rounds: int) -> Grid:
    """The grid for a profile: its step from the loss scale at REFERENCE_DELTA, its end where
    the profile falls below TAIL_DELTA, refined where the profile changes fast. ``upper`` only
    places the points (any upper profile will do: a cheap one); the PLDs use values computed at
    the points afterwards."""
    eps_hi = _bisect(upper, TAIL_DELTA, eps0)
    reference = _bisect(upper, REFERENCE_DELTA, eps_hi) if eps_hi > 0.0 else 0.0
    scale = max(reference, eps_hi / 10.0, 1e-9)
    step = min(MAX_STEP, scale / (STEP_DIVISOR * math.sqrt(rounds)))
    top = max(1, math.ceil(eps_hi / step))
    points = sorted({round(i * top / START_POINTS) for i in range(START_POINTS + 1)})
    values = {j: upper(j * step) for j in points}
    while len(values) < MAX_POINTS:
        keys = sorted(values)
        split = [
            (a + b) // 2
            for a, b in itertools.pairwise(keys)
            if b - a > 1 and _steep(values[a], values[b])
        ]
        if not split:
            break
        for j in split[: MAX_POINTS - len(values)]:
            values[j] = upper(j * step)
    return Grid(np.array(sorted(values), dtype=np.int64), step)


def _steep(a: float, b: float) -> bool:
    if a - b > ABS_STEP:
        return True
    if b <= 0.0:
        return a > 0.0
    return math.log(a / b) > LOG_STEP


def _lower_hull(x: FloatArray, y: FloatArray) -> list[int]:
    """Indices of the lower convex hull of the points (x ascending). A point within rounding of
    a chord may be dropped: PAD covers that."""
    hull: list[int] = []
    for i in range(x.size):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            if (y[b] - y[a]) * (x[i] - x[b]) >= (y[i] - y[b]) * (x[b] - x[a]):
                hull.pop()
            else:
                break
        hull.append(i)
    return hull


def _symmetric_masses(
    eps: FloatArray, curve: FloatArray, infinity: float
) -> tuple[FloatArray, FloatArray, float]:
    """P-masses at +eps_i (i >= 1) and -eps_i of the symmetric pair whose curve for x >= 1 is
    the piecewise-linear ``curve`` (convex, eps[0] = 0) held at ``infinity`` beyond the last
    point, and the mass at loss 0. Q-mass at loss l is the curve's slope jump there; P = x Q;
    the mass at -l is the Q-mass at l (symmetry); the rest of the unit mass sits at 0."""
    x = np.exp(eps)
    gaps = np.exp(eps[:-1]) * np.expm1(np.diff(eps))  # x_{i+1} - x_i without cancellation
    slopes = np.append(np.diff(curve) / gaps, 0.0)
    q = np.maximum(np.diff(slopes), 0.0)  # the jump at each point i >= 1
    p = x[1:] * q
    zero = 1.0 - float(np.sum(p) + np.sum(q)) - infinity
    return p, q, max(zero, 0.0)


def upper_pld(grid: Grid, values: FloatArray) -> pld_lib.PrivacyLossDistribution:
    """The dominating pair's PLD from upper values of the profile at the grid points.

    ``values`` are made non-increasing (W is: an upper value at a smaller eps bounds W at a
    larger one) and padded up by PAD; the curve is their lower convex hull in x (above W, as W
    is convex), held at the last value beyond the grid (that mass is infinite loss). Symmetric
    consistency at x = 1 (mass at loss 0 >= 0, i.e. curve(1) + 2 |slope(1+)| <= 1, which W
    satisfies) is enforced by raising points near x = 1 onto the line of slope
    -(1 - curve(1)) / 2: raising keeps the curve above W. Losses lie on the grid: exact.
    """
    eps = grid.eps
    up = np.minimum(1.0, np.minimum.accumulate(np.nan_to_num(values, nan=1.0, posinf=1.0)))
    up = np.minimum(1.0, up * (1.0 + PAD) + 1e-300)
    if up[-1] >= 1.0:
        # Never below 1 on the grid (a profile that refused everywhere but at eps = 0): no
        # pair to build (dp-accounting cannot compose an infinite-loss mass of 1).
        raise OutsideConditionsError("the upper profile is 1 on the whole grid: nothing to compose")
    gaps = np.expm1(eps)  # x - 1
    up = np.maximum(up, up[0] - (1.0 - up[0]) * gaps / 2.0)
    x = np.exp(eps)
    hull = _lower_hull(x, up)
    infinity = float(up[-1])
    p, q, zero = _symmetric_masses(eps[hull], up[hull], infinity)
    j = grid.j[hull]
    probs: dict[int, float] = {0: zero}
    for index, pm, qm in zip(j[1:].tolist(), p.tolist(), q.tolist(), strict=True):
        probs[index] = probs.get(index, 0.0) + pm
        probs[-index] = probs.get(-index, 0.0) + qm
    pmf = pld_pmf.create_pmf(probs, grid.step, infinity, pessimistic_estimate=True)
    return pld_lib.PrivacyLossDistribution(pmf)


def lower_pld_from_profile(
    grid: Grid, lower: FloatArray, upper: FloatArray
) -> pld_lib.PrivacyLossDistribution:
    """A PLD whose curve is below that of a *symmetric* pair (H(P||Q) = H(Q||P)) given lower and
    upper values of its curve h at the grid points.

    Convexity of h gives, at each point i, a "roof" below h: the line through (x_i, lower_i) with
    slope (lower_i - upper_{i-1}) / (x_i - x_{i-1}) (at most h's left slope, so below h right of
    x_i) and, left of x_i, with slope (upper_{i+1} - lower_i) / (x_{i+1} - x_i) (at least h's
    right slope). The largest convex function below the maximum of consecutive roofs is the lower
    hull of their peaks and valleys. Its losses are floored to the grid (lower curve), the point
    at x = 1 lowered until the symmetric pair is consistent, the curve ends at 0.
    """
    eps = grid.eps
    lo = np.maximum(np.maximum.accumulate(np.nan_to_num(lower, nan=0.0)[::-1])[::-1], 0.0)
    lo = lo * (1.0 - PAD)
    lo[-1] = 0.0
    hi = np.minimum(1.0, np.minimum.accumulate(np.nan_to_num(upper, nan=1.0, posinf=1.0)))
    hi = np.maximum(hi * (1.0 + PAD), lo)
    x = np.exp(eps)
    vx, vy = _roof_vertices(x, lo, hi)
    # Symmetric consistency: lower the value at x = 1 (always allowed for a lower curve).
    d = vx[1:] - 1.0
    vy[0] = min(vy[0], float(np.min((d + 2.0 * vy[1:]) / (d + 2.0))))
    hull = _lower_hull(vx, vy)
    hx, hy = _merge_close(vx[hull], vy[hull])
    p, q, zero = _symmetric_masses(np.log(hx), hy, 0.0)
    losses = np.log(hx[1:])
    index = np.floor(losses / grid.step).astype(np.int64)  # rounded down: the curve falls
    neg = np.floor(-losses / grid.step).astype(np.int64)
    probs: dict[int, float] = {0: zero}
    for i, pm in zip(
        np.concatenate([index, neg]).tolist(), np.concatenate([p, q]).tolist(), strict=True
    ):
        probs[i] = probs.get(i, 0.0) + pm
    pmf = pld_pmf.create_pmf(probs, grid.step, 0.0, pessimistic_estimate=False)
    return pld_lib.PrivacyLossDistribution(pmf)


#: Hull vertices closer than this in log x are merged (_merge_close).
MERGE_LOG_GAP = 1e-9


def _merge_close(hx: FloatArray, hy: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The lower curve's vertices with each run closer than MERGE_LOG_GAP in log x (a valley on
    a peak, 7e-15 apart at n = 1,000, k = 3, eps0 = 4, made the masses divide by 0) replaced by
    one vertex at the run's first x with its last (smallest) y. Still below the curve: the
    curve is non-increasing, so the new vertex is below it, and the segment from it to the next
    vertex meets the old one there and lies below it at the run's last x, hence between; the
    result stays convex (its left slope only steepens, its right one only flattens)."""
    start = np.concatenate([[True], np.diff(np.log(hx)) > MERGE_LOG_GAP])
    if start.all():
        return hx, hy
    first = np.flatnonzero(start)
    return hx[first], np.minimum.reduceat(hy, first)


def _roof_vertices(x: FloatArray, lo: FloatArray, hi: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Peaks (x_i, lo_i) and, between consecutive peaks, the valley where the right arm of the
    left peak meets the left arm of the right one (module docstring of lower_pld_from_profile)."""
    gaps = np.diff(x)
    right = np.full(x.size, -1.0)  # slope of the arm right of each peak (-1: h's slope >= -1)
    right[1:] = np.maximum((lo[1:] - hi[:-1]) / gaps, -1.0)
    left = np.zeros(x.size)  # slope of the arm left of each peak (h is non-increasing: <= 0)
    left[:-1] = np.minimum((hi[1:] - lo[:-1]) / gaps, 0.0)
    a, b = right[:-1], left[1:]  # the two arms over interval i
    with np.errstate(divide="ignore", invalid="ignore"):
        cross = (lo[1:] - lo[:-1] - b * x[1:] + a * x[:-1]) / (a - b)
    cross = np.where(np.isfinite(cross), cross, x[:-1])
    cross = np.clip(cross, x[:-1], x[1:])
    valley = np.maximum(lo[:-1] + a * (cross - x[:-1]), lo[1:] + b * (cross - x[1:]))
    valley = np.maximum(valley, 0.0)
    vx = np.empty(2 * x.size - 1)
    vy = np.empty_like(vx)
    vx[0::2], vy[0::2] = x, lo
    vx[1::2], vy[1::2] = cross, valley
    keep = np.concatenate([[True], np.diff(vx) > 0.0])  # valleys on a peak add nothing
    return vx[keep], vy[keep]


def lower_pld_from_pair(
    log_p: FloatArray, log_q: FloatArray, step: float, cap: float
) -> pld_lib.PrivacyLossDistribution:
    """The PLD of a listed pair (both directions), rounded down: losses floored to the grid,
    losses above ``cap`` lowered to it and those below -cap left out, like the mass not listed
    (as loss -inf), so both curves are below the pair's and the PLD spans at most 2 cap."""
    remove = _floored_pmf(log_p, log_q, step, cap)
    add = _floored_pmf(log_q, log_p, step, cap)
    return pld_lib.PrivacyLossDistribution(
        pld_pmf.create_pmf(remove, step, 0.0, pessimistic_estimate=False),
        pld_pmf.create_pmf(add, step, 0.0, pessimistic_estimate=False),
    )


def _floored_pmf(
    log_upper: FloatArray, log_lower: FloatArray, step: float, cap: float
) -> dict[int, float]:
    finite = np.isfinite(log_upper) & np.isfinite(log_lower)
    loss = np.minimum(log_upper[finite] - log_lower[finite], cap)
    keep = loss >= -cap
    loss, weights = loss[keep], log_upper[finite][keep]
    index = np.floor(loss / step).astype(np.int64)
    mass = np.exp(weights)
    base = int(index.min()) if index.size else 0
    sums = np.bincount(index - base, weights=mass)
    return {int(i) + base: float(sums[i]) for i in np.nonzero(sums)[0]}
