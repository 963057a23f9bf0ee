"""k = 2: the exact delta F(a) of one dataset, in extended precision, with a rigorous bracket.

For k = 2 the histogram is the count of x0, and the dataset F(a) (a of the other n - 1 users hold
x0, the rest x1) gives the pair P0 = B + Bern(pt), P1 = B + Bern(pb) with
B = X * Y, X = Bin(a, pt), Y = Bin(N, pb), N = n - 1 - a (the single-bin model with nx0 = a).
With e = e^eps, alpha = pt - e pb > 0 and beta = -(e pt - pb) < 0, the two directions are

    H(P0||P1) = sum_s [alpha B(s-1) + beta B(s)]_+,   H(P1||P0) = sum_s [alpha B(s) + beta B(s-1)]_+.

B is a sum of independent Bernoulli laws, hence log-concave: rho(s) = B(s-1)/B(s) is
non-decreasing, the first sum's positive terms are the tail rho(s) > R0 = -beta/alpha and the
second's the head rho(s) < 1/R0. Each is summed on a window of s; outside it, log-concavity
bounds the rest by a geometric series (docs/accounting.md, "k = 2 exactly").

Why extended precision and not logs: at n = 1e6 and small eps, H is a millionth of the tail mass
it is the difference of, so a relative error r in the ratios rho(s) costs about 1e6 r in H. B(s)
is therefore built from ratio walks (each step an exact-integer ratio times e^-eps0) in
``np.longdouble`` (x86: 64-bit mantissa, unit roundoff u = 2^-64), and the error analysis tracks
the ratio B(s-1)/B(s) separately from B(s) itself (:func:`_ratio_error`): the ratio of two
convolutions is a weighted average of Y's exact ratios, so errors in the weights barely move it.
Where the platform's long double is not extended, :func:`k2_family_value` returns None and the
caller uses the float64 single-bin code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from shuffledp.accountant.engines.pairs import Bracket
from shuffledp.accountant.mechanism import ShuffledKRR

LongArray = npt.NDArray[np.longdouble]

#: Unit roundoff of np.longdouble (2^-64 on x86-64); None where long double is only a double.
_U = float(np.finfo(np.longdouble).epsneg)
EXTENDED = _U < 1e-18
#: Largest work (WorkMeter's units) one evaluation takes; above it the caller falls back.
MAX_WORK = 60_000_000
#: The window is widened until the bounded rest is below this fraction of the window's sum.
_REST_RTOL = 1e-15
#: Values below this are too close to long double's underflow for the walk's error model.
_LD_FLOOR = 1e-4800
#: Unit roundoff of float64, and the smallest value the float64 convolution takes.
_U64 = 2.0**-53
_F64_FLOOR = 1e-280


def _gamma(k: float, u: float = _U) -> float:
    """Bound on the relative error of k roundings at unit roundoff u (Higham's gamma_k), padded."""
    ku = 1.01 * k * u
    return ku / (1.0 - ku)


@dataclass(frozen=True, slots=True)
class _Coefs:
    """alpha, beta (relative error at most u each: 40-digit values rounded once), R0, and
    e^eps0, e^-eps0 as long doubles (same error)."""

    eps0: float
    alpha: np.longdouble
    beta: np.longdouble
    log_r0: float
    up: np.longdouble  # e^eps0 = pt / pb
    down: np.longdouble  # e^-eps0

    @staticmethod
    def of(eps0: float, eps: float) -> _Coefs:
        import mpmath

        with mpmath.workdps(40):
            e0, e = mpmath.mpf(eps0), mpmath.mpf(eps)
            pt = 1 / (1 + mpmath.exp(-e0))
            pb = mpmath.exp(-e0) / (1 + mpmath.exp(-e0))
            alpha = -pt * mpmath.expm1(e - e0)
            beta = -pb * mpmath.expm1(e + e0)
            log_r0 = mpmath.log(-beta / alpha)
            return _Coefs(
                eps0,
                _ld(alpha),
                _ld(beta),
                float(log_r0),
                _ld(mpmath.exp(e0)),
                _ld(mpmath.exp(-e0)),
            )


def _ld(x: object) -> np.longdouble:
    """A 40-digit mpmath value rounded to long double (strtold: correctly rounded)."""
    import mpmath

    return np.longdouble(mpmath.nstr(x, 30, strip_zeros=False))


def _log_binom_pmf(trials: int, k: int, log_p: Any, log_q: Any) -> Any:
    """log Bin(trials, p)(k) in 40-digit mpmath (an anchor of a walk)."""
    import mpmath

    with mpmath.workdps(40):
        return (
            mpmath.loggamma(trials + 1)
            - mpmath.loggamma(k + 1)
            - mpmath.loggamma(trials - k + 1)
            + k * log_p
            + (trials - k) * log_q
        )


def _walk(trials: int, lo: int, hi: int, anchor: int, up: np.longdouble) -> LongArray:
    """Bin(trials, q)(m) / Bin(trials, q)(anchor) for m in [lo, hi] (lo <= anchor <= hi), with
    q / (1 - q) = up: each step multiplies by (trials - m) / (m + 1) * up (or its inverse), an
    exact-integer ratio, so the value at distance d from the anchor is off by at most gamma(4d)."""
    out = np.ones(hi - lo + 1, dtype=np.longdouble)
    i0 = anchor - lo
    if hi > anchor:
        m = np.arange(anchor, hi, dtype=np.longdouble)
        out[i0 + 1 :] = np.cumprod((trials - m) / (m + 1) * up)
    if lo < anchor:
        m = np.arange(anchor - 1, lo - 1, -1, dtype=np.longdouble)
        out[:i0][::-1] = np.cumprod((m + 1) / (trials - m) / up)
    return out


@dataclass(frozen=True, slots=True)
class _Window:
    """B(s) / exp(log_scale) for s in [lo - 1, hi] (zero outside B's support [0, n - 1]), with
    e_b >= |relative error| of each value and d[i] >= |e(s - 1) - e(s)| at s = lo + i, the
    error of the ratio B(s - 1) / B(s) (both relative to the exact values times the scale), of
    the part B_J of B from the kept X values; the dropped X values add between 0 and
    ``dropped`` (absolute, scaled) to every B(s), and at most ``dropped_total`` over all s."""

    lo: int
    hi: int
    b: LongArray
    scale_digits: str  # exp(log_scale) to 25 digits (mpmath), for the final product
    e_b: float
    d: LongArray
    dropped: np.longdouble
    dropped_total: np.longdouble  # >= the dropped X values' total contribution, over every s


@dataclass(frozen=True, slots=True)
class _Kept:
    """X = Bin(a, pt) / X(j0) (j0 its mode) on [jl, jh], the values at least e^-depth; err bounds
    their walk's relative error and dropped the mass left out (log-concave X: each side is at
    most a geometric series from its edge, the ratio X(j -+ 1) / X(j) being exact there)."""

    x: LongArray
    jl: int
    jh: int
    err: float
    dropped: np.longdouble


def _x_kept(a: int, j0: int, c: _Coefs, depth: float) -> _Kept | None:
    x = _walk(a, 0, a, j0, c.up)
    keep = np.nonzero(x >= np.exp(np.longdouble(-depth)))[0]
    jl, jh = int(keep[0]), int(keep[-1])
    err = _gamma(4 * max(j0, a - j0))
    dropped = x_cut_mass(a, (jl, jh), (x[jl], x[jh]), c, err)
    return None if dropped is None else _Kept(x[jl : jh + 1], jl, jh, err, dropped)


def x_cut_mass(
    a: int, kept: tuple[int, int], edges: tuple[Any, Any], c: _Coefs, err: float
) -> np.longdouble | None:
    """The mass of X / X(j0) outside ``kept`` = [jl, jh], from its computed values at jl and jh
    (``edges``, off by at most ``err`` relative): X is log-concave, so beyond each cut edge it is
    at most a geometric series with the exact ratio X(j -+ 1) / X(j) at the edge (padded for
    the values' error). None if an edge is not yet in a tail (that ratio is not below 1)."""
    jl, jh = kept
    pad = np.longdouble(1.0 + 2.0 * err + 1e-12)
    dropped = np.longdouble(0.0)
    for value, ratio, cut in (
        (edges[0], np.longdouble(jl) / np.longdouble(a - jl + 1) * c.down * pad, jl > 0),
        (edges[1], np.longdouble(a - jh) / np.longdouble(jh + 1) * c.up * pad, jh < a),
    ):
        if not cut:
            continue
        if not ratio < 1:
            return None
        dropped += value * pad * ratio / (1 - ratio)
    return dropped


def _anchors(
    a: int, j0: int, big_n: int, m0: int, peaks: set[int], logs: tuple[Any, Any]
) -> tuple[str, np.longdouble, np.longdouble]:
    """In 40 digits: X(j0) Y(m0) (25 digits), max over ``peaks`` of Y(m) / Y(m0), and
    sum_m Y(m) / Y(m0) = 1 / Y(m0) (inf beyond long double's range)."""
    import mpmath

    log_pt, log_pb = logs
    with mpmath.workdps(40):
        log_y0 = _log_binom_pmf(big_n, m0, log_pb, log_pt)
        log_scale = _log_binom_pmf(a, j0, log_pt, log_pb) + log_y0
        log_peak = max(_log_binom_pmf(big_n, m, log_pb, log_pt) for m in peaks)
        return (
            mpmath.nstr(mpmath.exp(log_scale), 25),
            _ld(mpmath.exp(log_peak - log_y0)),
            _ld(mpmath.exp(-log_y0)) if log_y0 > -11000 else np.longdouble(np.inf),
        )


def x_mode(a: int, eps0: float) -> tuple[int, tuple[Any, Any]]:
    """X = Bin(a, pt)'s mode floor((a + 1) pt), the anchor of its walk, and (log pt, log pb) in
    40-digit mpmath."""
    import mpmath

    with mpmath.workdps(40):
        e0 = mpmath.mpf(eps0)
        log_pt, log_pb = -mpmath.log1p(mpmath.exp(-e0)), -e0 - mpmath.log1p(mpmath.exp(-e0))
        return min(max(math.floor((a + 1) * float(mpmath.exp(log_pt))), 0), a), (log_pt, log_pb)


def y_anchor(
    a: int, big_n: int, eps0: float, walked: tuple[int, int], window: tuple[int, int]
) -> tuple[int, set[int]]:
    """Y = Bin(N, pb)'s walk anchor on ``walked`` = [m_lo, m_hi] (its mode (N + 1) pb rounded
    down, clipped there: Y / Y(anchor) <= 1), and the m (the float mode +- 1, clipped to the m
    that B on ``window`` = [lo, hi] meets) at which a dropped X value meets Y's largest value."""
    m_lo, m_hi = walked
    lo, hi = window
    mode = math.floor((big_n + 1) / (1.0 + math.exp(eps0)))
    mc = min(max(mode, lo - a, 0), hi, big_n)
    return min(max(mode, m_lo), m_hi), {max(mc - 1, lo - a, 0), mc, min(mc + 1, hi, big_n)}


def _b_window(
    n: int, a: int, lo: int, hi: int, c: _Coefs, depth: float, fast: bool
) -> _Window | None:
    """B = Bin(a, pt) * Bin(n - 1 - a, pb) on [lo - 1, hi] by one long double convolution of two
    ratio walks: X's kept values (:func:`_x_kept`) and Y on the m they need, Y anchored at its
    largest value there (so Y / Y(anchor) <= 1), each anchor's log pmf in 40 digits (a common
    factor: no error in the ratios). The dropped X values meet Y at any m in [lo - 1 - a, hi],
    where Y / Y(anchor) is at most its value at Y's mode clipped to that range (40 digits). None
    if a used value falls near long double's underflow. fast: the convolution in float64
    (BLAS-speed; its rounding, and that of converting each value to float64, enter the error
    model at u = 2^-53) where no value is near float64's underflow."""

    big_n = n - 1 - a
    cl, ch = max(lo - 1, 0), min(hi, n - 1)
    j0, logs = x_mode(a, c.eps0)
    kept = _x_kept(a, j0, c, depth)
    if kept is None:
        return None
    m_lo, m_hi = max(cl - kept.jh, 0), min(ch - kept.jl, big_n)
    if m_lo > m_hi:
        return None
    m0, peaks = y_anchor(a, big_n, c.eps0, (m_lo, m_hi), (cl, ch))
    scale_digits, y_max, y_total = _anchors(a, j0, big_n, m0, peaks, logs)
    y = _walk(big_n, m_lo, m_hi, m0, c.down)
    smallest = min(kept.x.min(), y.min())
    if smallest < _LD_FLOOR:
        return None
    u_conv = _U
    if fast and smallest <= _F64_FLOOR:
        return None  # the caller's fallback is cheaper than this convolution in long double
    if fast:
        u_conv = _U64
        conv = np.convolve(kept.x.astype(np.float64), y.astype(np.float64)).astype(np.longdouble)
    else:
        conv = np.convolve(kept.x, y)  # index k <-> s = m_lo + jl + k
    b = np.zeros(hi - lo + 2, dtype=np.longdouble)
    first = m_lo + kept.jl  # B from the kept X values is 0 outside [first, first + len - 1]
    s_lo, s_hi = max(cl, first), min(ch, first + conv.size - 1)
    if s_lo <= s_hi:
        b[s_lo - (lo - 1) : s_hi - (lo - 1) + 1] = conv[s_lo - first : s_hi - first + 1]
    terms = kept.jh - kept.jl + 1
    e_y = _gamma(4 * max(m0 - m_lo, m_hi - m0))
    conversions = 0.0 if u_conv == _U else 2.0 * u_conv
    e_b = kept.err + e_y + _gamma(terms + 1, u_conv) + conversions
    q = _gamma(4) + 2.0 * _gamma(terms + 1, u_conv) + 2.0 * conversions
    d = _ratio_error(big_n, kept.jl, kept.jh, lo, hi, e_b, q)
    dropped = kept.dropped * y_max * np.longdouble(1.0 + 1e-12)
    if kept.dropped > 0 and not np.isfinite(y_total):
        return None  # Y(anchor) below long double's range: the window is hopelessly deep
    dropped_total = (
        kept.dropped * y_total * np.longdouble(1.0 + 1e-12) if kept.dropped else np.longdouble(0)
    )
    return _Window(lo, hi, b, scale_digits, e_b, d, dropped, dropped_total)


def _ratio_error(big_n: int, jl: int, jh: int, lo: int, hi: int, e_b: float, q: float) -> LongArray:
    """d(s) >= |e(s - 1) - e(s)| for s in [lo, hi].

    B(s - 1) / B(s) = sum_j w_j r_j / sum_j w_j with w_j = X(j) Y(s - j) and r_j = Y(s-1-j) / Y(s-j)
    = (s - j) / (N - s + j + 1) e^eps0, increasing in s - j: a weighted average. The computed
    weights are off by factors within 1 +- P (P = e_b: the walks and the sum's rounding), which
    moves the average by at most 2P/(1 - P) (r_max - r_min), i.e. 2P/(1-P) * spread relative;
    the computed values r_j are off by at most q: one walk step (4u), the two sums' rounding
    (2 gamma(terms + 1)) and, in float64, the conversion of both Y values. Where s - jh < 1 or s - jl > N (a ratio at Y's support edge) the plain
    |e(s-1)| + |e(s)| <= 2 e_b is used, which also caps every d(s)."""
    s = np.arange(lo, hi + 1, dtype=np.float64)
    inside = (s - jh >= 1) & (s - jl <= big_n)
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.where(
            inside,
            ((s - jl) * (big_n - s + jh + 1)) / ((big_n - s + jl + 1) * (s - jh)) - 1.0,
            np.inf,
        )
    spread = np.abs(spread) + 1e-15  # its float64 rounding, on the safe side
    d = 1.02 * (q + 2.0 * e_b / (1.0 - e_b) * spread)
    return np.minimum(d, 2.01 * e_b).astype(np.longdouble)


@dataclass(frozen=True, slots=True)
class _Sum:
    """One direction on a window (scaled): the sum of the positive computed terms, a bound on its
    error, a bound on the terms outside the window (inf if unknown) and whether the window's
    inner edge is provably past the region's start."""

    value: np.longdouble
    err: np.longdouble
    rest: np.longdouble
    edge_ok: bool


def _direction(w: _Window, n: int, c: _Coefs, *, forward: bool) -> _Sum:
    """forward: H(P0||P1), terms t(s) = alpha B(s-1) + beta B(s), positive on a tail; else
    H(P1||P0), terms alpha B(s) + beta B(s-1), positive on a head.

    With B(s-1), B(s) off by relative e1, e2, the computed term is (1 + e2) t + alpha B(s-1)
    (e1 - e2) (forward; mirrored otherwise), plus five roundings (two products, one sum, the
    coefficients' own rounding) of alpha B(s-1) + |beta| B(s); the dropped X values move the
    term by at most max(alpha, |beta|) dropped. [.]_+ is 1-Lipschitz, so the
    sum of positive parts moves by at most the sum of these bounds over the terms that may be
    positive (computed term + bound > 0)."""
    prev, cur = w.b[:-1], w.b[1:]
    main, other = (prev, cur) if forward else (cur, prev)
    t = c.alpha * main + c.beta * other
    scale_err = np.longdouble(1.0 + 1e-9) / np.longdouble(1.0 - w.e_b)
    err = (
        w.e_b * np.abs(t)
        + c.alpha * main * w.d * np.longdouble(1.0 + w.e_b)
        + np.longdouble(_gamma(5)) * (c.alpha * main - c.beta * other)
        + max(c.alpha, -c.beta) * w.dropped
    ) * scale_err
    positive = t > 0
    value = np.sum(t[positive]) if np.any(positive) else np.longdouble(0.0)
    maybe = (t + err) > 0
    total_err = np.sum(err[maybe]) + value * np.longdouble(_gamma(t.size + 1))
    if forward:
        edge_ok = w.lo <= 0 or bool(t[0] + err[0] <= 0)
        rest = _rest(w, n, upper=True) * c.alpha
    else:
        edge_ok = w.hi >= n or bool(t[-1] + err[-1] <= 0)
        rest = _rest(w, n, upper=False) * c.alpha
    return _Sum(value, total_err, rest, edge_ok)


def _rest(w: _Window, n: int, *, upper: bool) -> np.longdouble:
    """upper: a bound on sum_{m >= hi} B(m) (the terms past the window are at most alpha
    B(s - 1)); else on sum_{m <= lo - 1} B(m). B_J (X truncated: still log-concave) has
    B_J(m + 1) / B_J(m) non-increasing, so its part is at most a geometric series from the
    window's last ratio (upper bounds of the values); the dropped part adds dropped_total."""
    pad = np.longdouble(1.0 + 2.0 * w.e_b + 1e-12)
    if upper:
        if w.hi >= n:
            return np.longdouble(0.0)
        last, before, d = w.b[-1], w.b[-2], w.d[-1]
    else:
        if w.lo <= 0:
            return np.longdouble(0.0)
        last, before, d = w.b[0], w.b[1], w.d[0]
    if last == 0:
        return w.dropped_total if before > 0 else np.longdouble(np.inf)
    if not before > 0:
        return np.longdouble(np.inf)
    ratio = last / before * (1 + d) * pad
    if not ratio < 1:
        return np.longdouble(np.inf)
    return np.longdouble(last * pad / (1 - ratio) + w.dropped_total)


def _guesses(n: int, a: int, c: _Coefs, eps0: float) -> tuple[int, int, int]:
    """(s0, s1, length): where rho(s) crosses R0 and 1/R0, from Y's exact ratio
    (m / (N - m + 1) e^eps0) shifted by X's mean, and the length over which the terms fall by
    about e^-45 (rho grows by a factor R0 per step at least, and like a Gaussian)."""
    big_n = n - 1 - a
    pt = 1.0 / (1.0 + math.exp(-eps0))
    pb = 1.0 - pt
    log_g = c.log_r0 - eps0  # m / (N - m + 1) = R0 e^-eps0 at s0, e^-eps0 / R0 at s1
    g0, g1 = math.exp(min(log_g, 700.0)), math.exp(-c.log_r0 - eps0)
    s0 = round(g0 * (big_n + 1) / (1 + g0) + a * pt)
    s1 = round(g1 * (big_n + 1) / (1 + g1) + a * pt) + 1
    var = (n - 1) * pt * pb + 1.0
    lr = c.log_r0
    length = var * (-lr + math.sqrt(lr * lr + 90.0 / var))
    return s0, s1, math.ceil(length) + 8


@dataclass(slots=True)
class WorkMeter:
    """Counts the long double multiply-adds of the convolutions (float64 ones as 1/8: a
    deterministic measure of cost, about 5-10 ns each), so that a caller can budget a search."""

    work: int = 0


def k2_family_value(
    mech: ShuffledKRR,
    a: int,
    eps: float,
    meter: WorkMeter | None = None,
    *,
    fast: bool = False,
) -> Bracket | None:
    """A bracket on F(a) = max(H(P0||P1), H(P1||P0)) for k = 2 (the single-bin model with
    nx0 = a), with relative width about 1e-12; None where this evaluator does not apply (no
    extended long double, work above MAX_WORK, values near long double's underflow): the caller
    then uses the float64 single-bin code. eps < eps0 (the caller returns 0 above). fast: the
    convolution in float64, about 10 times faster and about 1e-6 wide at n = 1e6 (enough where
    only an upper bound far from the maximum is wanted)."""
    n = mech.n
    if not EXTENDED or mech.k != 2 or not 0 <= a <= n - 1 or eps >= mech.eps0:
        return None
    a = min(a, n - 1 - a)  # F(a) = F(n - 1 - a)
    c = _Coefs.of(mech.eps0, eps)
    s0, s1, length = _guesses(n, a, c, mech.eps0)
    margin = 16 + length // 20
    # X's kept values at depth 80 (_one_direction): about mode +- sqrt(2 * 80 * variance)
    x_var = a / (2.0 + 2.0 * math.cosh(mech.eps0))
    terms = min(a + 1, 2 * math.ceil(math.sqrt(200.0 * x_var)) + 1)
    found: list[Bracket] = []
    for forward, lo, hi in ((True, s0 - margin, s0 + length), (False, s1 - length, s1 + margin)):
        one = _one_direction(n, a, c, (lo, hi, margin, length, terms), meter, forward, fast)
        if one is None:
            return None
        found.append(one)
    return Bracket(max(b.lower for b in found), max(b.upper for b in found))


def _one_direction(
    n: int,
    a: int,
    c: _Coefs,
    start: tuple[int, int, int, int, int],
    meter: WorkMeter | None,
    forward: bool,
    fast: bool,
) -> Bracket | None:
    """One direction's bracket, widening its window (doubling the step) until :func:`_grow` says
    it is done, and cutting X deeper where its dropped part would widen the bracket; None past
    16 tries (at most 8 of them deeper) or MAX_WORK."""
    lo, hi, margin, length, terms = start
    depth, deeper = 80.0, 0
    for _ in range(16):
        # float64 multiply-adds cost about a tenth of long double ones: counted as 1/8
        work = (hi - lo + terms + 2) * terms // (8 if fast else 1)
        if work > MAX_WORK:
            return None
        if meter is not None:
            meter.work += work
        w = _b_window(n, a, lo, hi, c, depth, fast)
        if w is None:
            return None
        result = _direction(w, n, c, forward=forward)
        # X cut deep enough that the dropped values' share of the error (and of the rest, which
        # a wider window does not shrink) is below 1e-16 of the sum
        cut_err = float(w.dropped * max(c.alpha, -c.beta)) * (hi - lo + 1) + float(
            w.dropped_total * c.alpha
        )
        if cut_err > 1e-16 * float(result.value) > 0.0 and deeper < 8:
            depth += max(math.log(cut_err / (1e-16 * float(result.value))) + 5.0, 40.0)
            deeper += 1
            continue
        lo, hi, done = _grow(result, lo, hi, margin, length, forward=forward)
        if done:
            return _bracket(result, w)
        margin, length = 2 * margin, 2 * length
    return None


def _grow(
    s: _Sum, lo: int, hi: int, margin: int, length: int, *, forward: bool
) -> tuple[int, int, bool]:
    """The window for the next try, and whether this one is done: its inner edge is past the
    region's start and the bounded rest is below _REST_RTOL of the sum."""
    rest_ok = bool(s.rest <= s.value * np.longdouble(_REST_RTOL))
    if forward:
        return (
            (lo if s.edge_ok else lo - margin),
            (hi if rest_ok else hi + length),
            (s.edge_ok and rest_ok),
        )
    return (
        (lo if rest_ok else lo - length),
        (hi if s.edge_ok else hi + margin),
        (s.edge_ok and rest_ok),
    )


def _bracket(s: _Sum, w: _Window) -> Bracket:
    """The scaled sum's bracket times exp(log_scale) (25 digits), rounded outwards to floats."""
    import mpmath

    def real(x: np.longdouble) -> float:
        with mpmath.workdps(30):
            return float(
                mpmath.mpf(np.format_float_scientific(x, unique=True)) * mpmath.mpf(w.scale_digits)
            )

    lower = real(max(s.value - s.err, np.longdouble(0.0)))
    upper = real(s.value + s.err + s.rest) if np.isfinite(s.rest) else 1.0
    return Bracket(
        max(0.0, math.nextafter(lower * (1.0 - 1e-15), 0.0)),
        min(1.0, math.nextafter(upper * (1.0 + 1e-15), math.inf)),
    )
