"""Log-space numerics for binomial laws, with explicit error margins.

Privacy numbers here routinely reach 1e-250, so every probability is carried as a natural log.
Two library functions carry the load:

* ``scipy.special.gammaln`` for log binomial coefficients, and
* ``scipy.special.betainc`` (Boost ``ibeta``) for binomial tails:
  P[Bin(c, q) >= m] = I_q(m, c - m + 1).

``betainc`` underflows below about 1e-308 and scipy offers no log-space binomial tail
(``binom.logsf`` is ``log(sf)`` and underflows too), so :func:`log_binom_sf` falls back to summing
the tail's terms in log space where the value is tiny. Deep in a tail the terms shrink at least
geometrically (the ratio of consecutive terms is decreasing), so the sum converges fast and its
remainder has the closed bound ``term * r / (1 - r)``, which is added (safe side).

Error model (measured against 40-digit mpmath on 4,000 random binomial tails, see
tests/unit/accountant/test_numerics.py): the relative error of ``betainc`` above 1e-275 is at most 6.1e-13; the
log-space sum is accurate to a few ulp of |ln v|. :func:`log_tail_relative_error` allows
5e-12 + 1e-15 |ln v|, about eight times the worst seen.
``gammaln`` has relative error below GAMMALN_RELERR, so a log binomial coefficient built from three
of them is off by at most GAMMALN_RELERR * (sum of their magnitudes) in absolute log terms:
:func:`log_weight_error` returns that, and upper bounds are inflated by it.

Success probabilities near 1 (k-RR's pt, or pt / (pt + pb), at large eps0) cannot be given as a
float alone: 1 - q computed by subtraction keeps only ulp / (1 - q) relative precision (5e-8 at
1 - q = 2e-9), and the pmf and tails depend on 1 - q, not on q. Every function here therefore
takes an optional ``qc``, the exact complement 1 - q computed by the caller without subtraction;
with it, log(1 - q) is log(qc), and a tail at q > 1/2 is that of theta = 1 - qc: ``betainc`` at
q plus a first-order correction for the difference between 1 - q and qc, or, where that
correction is not small, an evaluation at the small parameter qc (I_q(a, b) = 1 - I_{1-q}(b, a);
see :func:`_sf_near_one`). The error models above assume q and qc are each accurate to a few ulp
relative.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from scipy.special import betainc, betaincc, gammaln

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Below this value a ``betainc`` result is recomputed in log space. Measured against mpmath
#: (tests/unit/accountant/test_numerics.py): relative error <= 6.1e-13 down to 1e-275, but 1e-3 at 2.6e-280 and
#: 1e-2 near 1e-300 (Boost's internal power terms underflow before the result does).
_BETAINC_FLOOR = 1e-250
#: Relative precision at which the log-space tail sum stops (the rest is bounded and added).
_TAIL_SUM_RTOL = 1e-18
#: Bound on the relative error of one gammaln value: measured worst 3.1e-16 (2.2 ulp) on 3,400
#: integers up to 1e7 against mpmath.loggamma (tests/unit/accountant/test_numerics.py); twice that.
GAMMALN_RELERR = 6e-16


def log1mexp(x: FloatArray | float) -> FloatArray:
    """log(1 - exp(-x)) for x > 0, accurately (Maechler 2012: expm1 near 0, log1p far out).

    Identity: 1 - e^-x = -expm1(-x); for x > ln 2, log1p(-e^-x) is the accurate form.
    """
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(x > math.log(2.0), np.log1p(-np.exp(-x)), np.log(-np.expm1(-x)))


def log_binom_pmf(
    a: npt.ArrayLike, c: npt.ArrayLike, q: float, qc: float | None = None
) -> FloatArray:
    """log P[Bin(c, q) = a], -inf outside 0 <= a <= c. Vectorised over a and c.

    qc: 1 - q computed without subtraction (see the module docstring); default 1 - q."""
    a_arr = np.asarray(a, dtype=np.float64)
    c_arr = np.asarray(c, dtype=np.float64)
    inside = (a_arr >= 0) & (a_arr <= c_arr)
    a_in = np.where(inside, a_arr, 0.0)
    c_in = np.where(inside, c_arr, 0.0)
    log_q, log_1mq = _log_q_pair(q, qc)
    out = (
        gammaln(c_in + 1.0)
        - gammaln(a_in + 1.0)
        - gammaln(c_in - a_in + 1.0)
        + _xlog(a_in, log_q)
        + _xlog(c_in - a_in, log_1mq)
    )
    return np.where(inside, out, -np.inf)


def log_weight_error(c: float, q: float, qc: float | None = None) -> float:
    """An upper bound on the absolute error of :func:`log_binom_pmf` for Bin(c, q), any a.

    Each gammaln value is accurate to GAMMALN_RELERR relative, so the absolute error of the sum is
    at most that times the magnitudes involved; |gammaln(c+1)| bounds each of the three terms and
    c * |log q| + c * |log(1-q)| bounds the power terms.
    """
    log_q, log_1mq = _log_q_pair(q, qc)
    # With q in {0, 1} the pmf puts all mass on one point; 0 * log 0 = 0 there.
    powers = sum(c * abs(v) for v in (log_q, log_1mq) if math.isfinite(v))
    magnitude = 3.0 * float(gammaln(c + 1.0)) + powers + 10.0
    return GAMMALN_RELERR * magnitude


def log_binom_sf(
    m: npt.ArrayLike, c: npt.ArrayLike, q: float, qc: float | None = None
) -> FloatArray:
    """log P[Bin(c, q) >= m], vectorised over m and c (broadcast together).

    0 for m <= 0, -inf for m > c. Uses ``betainc`` and, where that is near underflow, a log-space
    sum of the tail's terms (see the module docstring). With qc (= 1 - q, exact) and q > 1/2 the
    tail is that of 1 - qc (:func:`_sf_near_one`).
    """
    m_arr, c_arr = np.broadcast_arrays(
        np.asarray(m, dtype=np.float64), np.asarray(c, dtype=np.float64)
    )
    out = np.empty(m_arr.shape, dtype=np.float64)
    whole = m_arr <= 0
    empty = m_arr > c_arr
    out[whole] = 0.0
    out[empty] = -np.inf
    mid = ~(whole | empty)
    if q <= 0.0 or q >= 1.0 or (qc is not None and qc <= 0.0):
        # Degenerate binomial: all mass at 0 (q = 0) or at c (q = 1).
        out[mid] = -np.inf if q <= 0.0 else 0.0
        return out
    mm, cc = m_arr[mid], c_arr[mid]
    # A first-order correction (_sf_near_one) can leave a tail of order 1e-300 slightly below 0:
    # its log is nan here, and every value below the floor is recomputed in log space just below.
    with np.errstate(divide="ignore", invalid="ignore"):
        if qc is not None and q > 0.5:
            value = _sf_near_one(mm, cc, q, qc)
        else:
            value = betainc(mm, cc - mm + 1.0, q)
        res = np.log(value)
    tiny = value < _BETAINC_FLOOR
    if np.any(tiny):
        with np.errstate(divide="ignore", invalid="ignore"):  # log(0) = -inf is intended
            res[tiny] = _log_tail_sum(mm[tiny], cc[tiny], q, qc)
    out[mid] = res
    return out


#: Largest kappa (see :func:`_sf_near_one`) for which the first-order correction is used.
_KAPPA_MAX = 1e-7


def _sf_near_one(m: FloatArray, c: FloatArray, q: float, qc: float) -> FloatArray:
    """P[Bin(c, theta) >= m] for theta = 1 - qc > 1/2, where the float q only approximates theta.

    q's implied complement 1 - q (exact in floats) differs from the exact complement qc by d; the
    tail at theta is the tail at q plus d P'(xi), P'(xi) = c Bin(c - 1, xi)(m - 1), for some xi
    between q and theta (mean value theorem). Over that segment the pmf moves by a factor of at
    most e^kappa, kappa = c |d| (1/q + 1/min(1 - q, qc)) (1.01 for rounding), so

        P(theta) = betainc(m, c - m + 1, q) + d c Bin(c - 1, theta)(m - 1) (1 + eta),
        |eta| <= e^kappa - 1,

    and the correction itself is at most kappa P (c Bin(c-1, .)(m-1) = m Bin(c, .)(m) / theta).
    With kappa <= _KAPPA_MAX the added relative error is below 1.1 kappa^2 <= 1.1e-14, inside the
    8x margin of the tail error model (worst measured 6.1e-13, model 5e-12). Larger kappa (large
    eps0 with large c) evaluates at qc itself: I_theta(m, c - m + 1) = 1 - I_qc(c - m + 1, m),
    by ``betainc`` where I_qc(c - m + 1, m) <= 1/2 and by ``betaincc`` (4x slower) elsewhere.
    """
    d = (1.0 - q) - qc  # 1.0 - q is exact (q >= 1/2); d is the exact difference up to rounding
    if d == 0.0:
        exact: FloatArray = betainc(m, c - m + 1.0, q)
        return exact
    small_side = min(1.0 - q, qc)
    if small_side > 0.0:
        kappa = 1.01 * c * abs(d) * (1.0 / q + 1.0 / small_side)
    else:
        kappa = np.full_like(c, np.inf)
    value = np.empty_like(c)
    fast = kappa <= _KAPPA_MAX
    if np.any(fast):
        mf, cf = m[fast], c[fast]
        corr = d * cf * np.exp(log_binom_pmf(mf - 1.0, cf - 1.0, q, qc))
        value[fast] = betainc(mf, cf - mf + 1.0, q) + corr
    slow = ~fast
    if np.any(slow):
        ms, cs = m[slow], c[slow]
        other = betainc(cs - ms + 1.0, ms, qc)
        tail = 1.0 - other
        small = other > 0.5
        if np.any(small):
            tail[small] = betaincc(cs[small] - ms[small] + 1.0, ms[small], qc)
        value[slow] = tail
    return value


def log_binom_cdf(
    m: npt.ArrayLike, c: npt.ArrayLike, q: float, qc: float | None = None
) -> FloatArray:
    """log P[Bin(c, q) <= m] = log P[Bin(c, 1 - q) >= c - m] (qc: 1 - q, exact)."""
    m_arr = np.asarray(m, dtype=np.float64)
    c_arr = np.asarray(c, dtype=np.float64)
    if qc is None:
        return log_binom_sf(c_arr - m_arr, c_arr, 1.0 - q)
    return log_binom_sf(c_arr - m_arr, c_arr, qc, qc=q)


def log_tail_relative_error(log_value: FloatArray | float, extra: float = 0.0) -> FloatArray:
    """log of a bound on the relative error of a :func:`log_binom_sf` value,
    5e-12 + 1e-15 |ln v| (+ ``extra``, another relative error to add, e.g. of a coefficient
    multiplying the tail); finite for a zero tail, so that -inf + it stays -inf."""
    lv = np.asarray(log_value, dtype=np.float64)
    return np.log(5e-12 + extra + 1e-15 * np.where(np.isfinite(lv), np.abs(lv), 0.0))


def log_sum(log_terms: npt.ArrayLike, axis: int | None = None) -> FloatArray:
    """log(sum(exp(log_terms))) along axis; -inf (not nan) for all -inf input.

    Identity: log sum e^x = m + log sum e^(x - m) with m = max x. Written here rather than
    scipy.special.logsumexp, whose array-API dispatch costs ~70 us a call; this is called
    thousands of times per evaluation on small arrays.
    """
    arr = np.asarray(log_terms, dtype=np.float64)
    if arr.size == 0:
        return np.asarray(-np.inf)
    top = np.max(arr, axis=axis, keepdims=True)
    shift = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.sum(np.exp(arr - shift), axis=axis, keepdims=True)) + shift
    out = np.where(np.isnan(out), -np.inf, out)
    return np.squeeze(out, axis=axis) if axis is not None else out.reshape(())


def binomial_window(
    n_trials: int, q: float, depth: float = 745.0, qc: float | None = None
) -> tuple[int, int, float]:
    """The integer range [lo, hi] where log Bin(n_trials, q) pmf >= its maximum - depth.

    Returns (lo, hi, log_dropped) where log_dropped bounds the log of the mass outside the range:
    the pmf is unimodal, so each dropped point weighs at most the pmf just outside the range.
    With depth 745 (e^-745 is below the smallest double) nothing representable is dropped.
    qc: 1 - q, exact (see the module docstring).
    """
    if q <= 0.0:
        return 0, 0, -math.inf
    if q >= 1.0 or (qc is not None and qc <= 0.0):
        return n_trials, n_trials, -math.inf
    mode = min(n_trials, max(0, math.floor((n_trials + 1) * q)))
    top = float(log_binom_pmf(mode, n_trials, q, qc))
    floor_ = top - depth

    def above(a: int) -> bool:
        return bool(log_binom_pmf(a, n_trials, q, qc) >= floor_)

    lo = _first_true(0, mode, above)  # above() is False then True on [0, mode]
    hi = _last_true(mode, n_trials, above)  # above() is True then False on [mode, n_trials]
    dropped = []
    if lo > 0:
        dropped.append(math.log(lo) + float(log_binom_pmf(lo - 1, n_trials, q, qc)))
    if hi < n_trials:
        dropped.append(math.log(n_trials - hi) + float(log_binom_pmf(hi + 1, n_trials, q, qc)))
    log_dropped = float(log_sum(np.asarray(dropped))) if dropped else -math.inf
    return lo, hi, log_dropped


def _first_true(lo: int, hi: int, pred: object) -> int:
    """Smallest x in [lo, hi] with pred(x) true, for pred monotone False..True (pred(hi) true)."""
    assert callable(pred)
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _last_true(lo: int, hi: int, pred: object) -> int:
    """Largest x in [lo, hi] with pred(x) true, for pred monotone True..False (pred(lo) true)."""
    assert callable(pred)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if pred(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _log_q_pair(q: float, qc: float | None = None) -> tuple[float, float]:
    """(log q, log(1 - q)); log(1 - q) from the exact complement qc when given."""
    log_q = math.log(q) if q > 0.0 else -math.inf
    if qc is not None:
        return log_q, math.log(qc) if qc > 0.0 else -math.inf
    log_1mq = math.log1p(-q) if q < 1.0 else -math.inf
    return log_q, log_1mq


def _xlog(x: FloatArray, log_value: float) -> FloatArray:
    """x * log_value with the convention 0 * log 0 = 0."""
    if math.isinf(log_value):
        return np.where(x == 0, 0.0, -np.inf)
    return x * log_value


def _log_tail_sum(m: FloatArray, c: FloatArray, q: float, qc: float | None = None) -> FloatArray:
    """log sum_{j>=m} Bin(c, q)(j) by summing terms in log space (m > c*q, deep tail).

    The ratio of consecutive terms r_j = (c - j) / (j + 1) * q / (1 - q) decreases in j, so once
    r < 1 the remainder after term t is at most t * r / (1 - r); that bound is added (safe side).
    """
    log_q, log_1mq = _log_q_pair(q, qc)
    log_odds = log_q - log_1mq
    log_term = log_binom_pmf(m, c, q, qc)
    log_total = log_term.copy()
    j = m.copy()
    active = np.isfinite(log_term)
    while np.any(active):
        idx = np.nonzero(active)[0]
        jj, cc = j[idx], c[idx]
        ratio_log = np.log(np.maximum(cc - jj, 0.0)) - np.log(jj + 1.0) + log_odds
        log_term[idx] = log_term[idx] + ratio_log
        j[idx] = jj + 1.0
        log_total[idx] = np.logaddexp(log_total[idx], log_term[idx])
        small = log_term[idx] - log_total[idx] < math.log(_TAIL_SUM_RTOL)
        finished = ~np.isfinite(log_term[idx]) | small
        if np.any(finished):
            done = idx[finished]
            # Remainder bound: next ratio r < 1 (deep tail) => rest <= term * r / (1 - r).
            jd, cd = j[done], c[done]
            with np.errstate(divide="ignore"):
                r_log = np.log(np.maximum(cd - jd, 0.0)) - np.log(jd + 1.0) + log_odds
            r_log = np.minimum(r_log, -1e-12)
            rest = log_term[done] + r_log - log1mexp(-r_log)
            log_total[done] = np.logaddexp(
                log_total[done], np.where(np.isfinite(rest), rest, -np.inf)
            )
            active[done] = False
    return log_total


def tilt_root(g: FloatArray, log_p: FloatArray, rel_tol: float = 1e-12) -> float:
    """The theta >= 0 at which the exponentially tilted mean sum_j p_j g_j e^(theta g_j) is 0
    (0 when the untilted mean is already >= 0; capped at about 1e6 when no negative atom
    makes it cross). Bisection on log(positive part) - log(negative part), increasing in theta,
    in log space so that tiny probabilities neither underflow nor swamp the sum. Shared by
    gsum (the exact engine) and gsum_fast (the Fourier bracket); both accept any theta > 0, so
    the tolerance only affects speed, never validity."""
    positive, negative = g > 0, g < 0
    if not np.any(negative):
        return 0.0
    with np.errstate(divide="ignore"):
        log_pos_g, log_neg_g = np.log(g[positive]), np.log(-g[negative])

    def balance(theta: float) -> float:
        terms = log_p + theta * g
        pos = float(log_sum(terms[positive] + log_pos_g)) if np.any(positive) else -math.inf
        return pos - float(log_sum(terms[negative] + log_neg_g))

    if balance(0.0) >= 0.0:
        return 0.0
    lo, hi = 0.0, 1.0
    while balance(hi) < 0.0 and hi < 1e6:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if balance(mid) < 0.0 else (lo, mid)
        if hi - lo <= rel_tol * hi:
            break
    return hi


def largest_where(ok: Callable[[float], bool], lo: float, cap: float) -> float | None:
    """The largest x (to 1e-9 relative, rounded down) with ok(x), for ok true up to a point;
    None if ok(x) fails down to 1e-9; ``cap`` once ok holds beyond it."""
    while not ok(lo):
        lo /= 2.0
        if lo < 1e-9:
            return None
    hi = 2.0 * lo
    while ok(hi):
        lo, hi = hi, 2.0 * hi
        if hi > cap:
            return lo
    while hi - lo > 1e-9 * hi:
        mid = 0.5 * (lo + hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo
