"""k = 2: F(a) by a saddle-point contour integral, a few dozen points at any n, with a rigorous
bracket.

Same pair as :mod:`k2_exact`: B is the law of the others' x0 count, with generating function
G(z) = (pb + pt z)^a (pt + pb z)^m (a others on x0, m = n - 1 - a on x1), and the direction
P0 -> P1 is H1 = sum_s [alpha B(s-1) + beta B(s)]_+. B is log-concave, so its positive terms
are those from some c* on, and for every c

    Phi(c) = sum_{s >= c} (alpha B(s-1) + beta B(s)) = alpha B(c-1) - E T(c),

T(c) = sum_{s >= c} B(s), E = e^eps - 1 (alpha + beta = -E), rises up to c* and falls after it:
H1 = max_c Phi(c). The other direction is H1 of a' = n - 1 - a (swap the labels x0 and x1), so
F(a) = max(H1(a), H1(n - 1 - a)).

Cauchy's formula on the circle |z| = R > 1, where the tail sum converges:

    Phi(c) = (1 / 2 pi) int_{-pi}^{pi} G(z) z^-c K(z) dtheta,   z = R e^{i theta},
    K(z) = z (alpha - E / (z - 1)).

The integrand g is smooth and periodic with Fourier coefficients g^(j) = R^j Phi(c + j), so the
N-point trapezoid rule gives exactly sum_j R^{jN} Phi(c + jN). The aliased terms j != 0 are
bounded: |Phi| <= max(alpha, E) everywhere, and |Phi(c)| <= max(alpha, E) T(c - 1) <=
max(alpha, E) G(R2) R2^(1 - c) for any R2 >= 1 (Chernoff); N puts both sums below e^-40 of the
value. With R at the saddle point of G(z) z^-c, |g| falls like exp(-sigma^2 theta^2 / 2)
(sigma^2 the variance of B tilted by R), and |G(R e^{i theta})| decreases in |theta| (so does the
modulus of each factor), so the nodes past theta_m, where |G| has fallen by e^-40, are bounded
by their number times the value there instead of being summed. N grows like sqrt(n) and theta_m
shrinks like 1 / sqrt(n): a few dozen nodes are summed at any n. The saddle point barely moves
with a, so one circle (:func:`shared_circle`) serves a whole certificate, and an F(a) on it is a
few array operations, batched over many a (:func:`directions_many`: 10-40 microseconds a row at
n = 1e6; k2_exact takes 1-150 ms there, growing with a).

Why not the FFT of k2_fft: the tilt makes the sum well conditioned (the terms' moduli sum to 2-10
times the value, measured), so the bracket is relative, 1e-14 to 1e-12 wide, even where delta is
1e-44; the FFT's error is absolute (1e-16 of B's largest value).

Rounding (:func:`_phi_rows`): the exponent a log(1 + pt w) + m log(1 + pb w) - c log z (w = z -
1) is formed in long double from log1p of small complex numbers (real part by log1p of 2x + x^2 +
y^2, imaginary by atan2), so its error is a few units of roundoff u times the magnitudes it is
made of, plus its derivative times the nodes' and w's own rounding; its real part is then taken
relative to the row's scale and its phase reduced to [-pi, pi], and exp, cos, sin and the sums
are float64 (u64 of the reduced exponent, 4 u64 per rotation from c to c + 1, each product, the
sums with gamma_(nodes + 2)). K's error is bounded the same way. CONTOUR_PAD = 32 covers the libm
functions (a few ulp each) and the operation counts; tests/unit/accountant/test_k2_contour.py
checks the bracket against 60-digit mpmath with the padding set to 1.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from shuffledp.accountant.engines.k2_exact import WorkMeter
from shuffledp.accountant.engines.pairs import Bracket
from shuffledp.accountant.mechanism import ShuffledKRR

LongArray = npt.NDArray[np.longdouble]

#: 2 pi in long double (the phases' reduction; its rounding is within the exponent's bound).
_TWO_PI = 2 * np.longdouble(math.pi) + np.longdouble(2.4492935982947064e-16)
#: Unit roundoff of np.longdouble (2^-64 on x86-64, 2^-53 where it is a double).
_U = float(np.finfo(np.longdouble).epsneg)
#: Padding of the per-node rounding model (module docstring).
CONTOUR_PAD = 32.0
#: Nodes past theta_m are bounded, not summed: |G| has fallen by e^-DEPTH there.
DEPTH = 40.0
#: R^-N is below e^-ALIAS_DEPTH times the estimated value.
ALIAS_DEPTH = 40.0
#: Most nodes one evaluation sums (about 2,000 where n is large and eps tiny); past it: None.
MAX_NODES = 20_000
#: What one evaluation costs in k2_exact.WorkMeter's units (about 0.3 ms).
CONTOUR_CALL_WORK = 60_000
#: The window of c values evaluated together around the guess of c*.
WINDOW = 2
#: Rows of (n, a) evaluated together by :func:`directions_many`, and each row's cost in
#: k2_exact.WorkMeter's units (about 30 microseconds).
ROWS = 256
CONTOUR_ROW_WORK = 6_000
#: A shared circle's bracket wider than this (relative) is redone on a circle placed for the
#: a; one still wider there is declined.
SHARED_WIDTH = 1e-9
#: Above this eps0, or where R0 - 1 = E / alpha passes R0_MAX (eps within a hair of eps0),
#: the contour declines: the saddle point runs off towards e^eps0 and its float placement
#: overflows (k2_exact takes those).
MAX_EPS0 = 30.0
R0_MAX = 1e12
#: Below this n the contour declines (k2_exact is exact and instant there, and with a
#: handful of users the saddle point runs off to infinity for c near the top of the support).
MIN_N = 16


@dataclass(frozen=True, slots=True)
class Coefs:
    """pt, pb, alpha, E = e^eps - 1 as long doubles (relative error a few u each: long double
    exp and expm1 of the exact float inputs; CONTOUR_PAD covers it), and R0 - 1 = E / alpha
    (float), where K(z) vanishes and near which c* lies."""

    pt: np.longdouble
    pb: np.longdouble
    alpha: np.longdouble
    big_e: np.longdouble
    r0: float

    @staticmethod
    @functools.lru_cache(maxsize=256)
    def of(eps0: float, eps: float) -> Coefs:
        e0, e = np.longdouble(eps0), np.longdouble(eps)
        down = np.exp(-e0)
        pt = 1 / (1 + down)
        alpha = -pt * np.expm1(e - e0)
        big_e = np.expm1(e)
        return Coefs(pt, down * pt, alpha, big_e, float(big_e / alpha))


def applies(n: int, eps0: float, eps: float) -> bool:
    """Whether the contour is used at all (MIN_N, MAX_EPS0, R0_MAX)."""
    return n >= MIN_N and 0.0 < eps < eps0 <= MAX_EPS0 and Coefs.of(eps0, eps).r0 <= R0_MAX


def _clog1p(x: LongArray, y: LongArray) -> tuple[LongArray, LongArray]:
    """log(1 + x + i y), accurate for small x + i y: (log|.|, arg)."""
    return 0.5 * np.log1p(2 * x + x * x + y * y), np.arctan2(y, 1 + x)


@dataclass(frozen=True, slots=True)
class Circle:
    """The circle |z| = R = 1 + r and its N nodes theta_k = 2 pi k / N (k = 0..K summed; by
    the symmetry g(-theta) = conj g(theta) only k >= 0 is formed), with everything that does
    not depend on (a, m, c): log(1 + pt w) and log(1 + pb w) (w = z - 1; real and imaginary
    parts, long double), K(z) and the rotations (float64), and the error model's largest
    values over the nodes. One circle serves every
    (a, m) of a certificate (the saddle point barely moves with a or with the reduced n of a
    block): the bracket is valid for any, only its width depends on how far R is from the
    saddle point."""

    r: np.longdouble
    log_r: np.longdouble
    n_nodes: int
    theta: LongArray
    l1x: LongArray
    l1y: LongArray
    l2x: LongArray
    l2y: LongArray
    l1_max: float  # max |log(1 + pt w)| and |log(1 + pb w)| over the summed nodes
    l2_max: float
    s1_max: float  # max pt R / |1 + pt w| and pb R / |1 + pb w| (the derivatives' parts)
    s2_max: float
    w_scale: float  # r + R (1 - cos) + R |sin| at the last node: w's components' scale
    k_err: float  # |K's error| <= CONTOUR_PAD u k_err
    l1_out: float  # log|1 + pt w|, log|1 + pb w| at theta_(K+1) (not summed); -inf if none
    l2_out: float
    log_r2: float  # R2 > R of the upper aliasing bound, and log(pb + pt R2), log(pt + pb R2)
    g1_r2: float
    g2_r2: float
    log_alias: float  # log max(alpha, E) (|Phi| <= max(alpha, E) T(c - 1)), padded
    log_k_max: float  # log (R (alpha + E / r)) >= log |K| on the circle, padded
    weight64: npt.NDArray[np.float64]  # the trapezoid's weights: 1 at theta = 0, else 2
    weighted_k64: npt.NDArray[np.float64]  # weight |K|
    kx64: npt.NDArray[np.float64]  # K(z), rounded to float64 (error u64 |K|: k_max)
    ky64: npt.NDArray[np.float64]
    k_max: float
    cos64: npt.NDArray[np.float64]  # cos theta, sin theta at the nodes (the rotations)
    sin64: npt.NDArray[np.float64]


def _saddle(a: int, m: int, c: float, co: Coefs) -> tuple[float, float]:
    """(log R, sigma) with R the saddle point of G(z) z^-c (the tilted mean is c), by Newton
    on log R from R0, and the tilted standard deviation."""
    pt, pb = float(co.pt), float(co.pb)
    log_r = math.log1p(co.r0)
    var = 1.0
    for _ in range(100):
        big_r = math.exp(min(log_r, 700.0))
        s1, s2 = pb + pt * big_r, pt + pb * big_r
        mean = a * pt * big_r / s1 + m * pb * big_r / s2
        var = max(a * pt * pb * big_r / s1**2 + m * pb * pt * big_r / s2**2, 1e-300)
        step = max(-2.0, min(2.0, (c - mean) / var))
        log_r += step
        if abs(step) < 1e-13:
            break
    return log_r, math.sqrt(var)


def _log_modulus(a: int, m: int, co: Coefs, r: float, theta: float) -> float:
    """log |G(R e^{i theta})| in floats (only to place theta_m: not part of the bracket)."""
    s2 = math.sin(theta / 2)
    wx, wy = r - 2 * (1 + r) * s2 * s2, (1 + r) * math.sin(theta)
    pt, pb = float(co.pt), float(co.pb)
    x1, y1, x2, y2 = pt * wx, pt * wy, pb * wx, pb * wy
    return 0.5 * (
        a * math.log1p(2 * x1 + x1 * x1 + y1 * y1) + m * math.log1p(2 * x2 + x2 * x2 + y2 * y2)
    )


def _log_factors(co: Coefs, log_x: float) -> tuple[float, float]:
    """log(pb + pt x), log(pt + pb x) for x = e^log_x > 0 in floats, padded upwards."""
    lpt, lpb = math.log(float(co.pt)), math.log(float(co.pb))
    f1 = float(np.logaddexp(lpb, lpt + log_x))
    f2 = float(np.logaddexp(lpt, lpb + log_x))
    return f1 + 1e-13 * abs(f1) + 1e-15, f2 + 1e-13 * abs(f2) + 1e-15


@dataclass(frozen=True, slots=True)
class _Plan:
    """Where a circle goes: log R, theta_m, N, and R2 for the upper aliasing bound."""

    log_r: float
    theta_m: float
    n_nodes: int
    log_r2: float


def _plan(a: int, m: int, c: float, co: Coefs) -> _Plan:
    """R at the saddle point of G(z) z^-c (at least 1 + 2 / sigma, and away from e^eps0, where
    pt + pb z vanishes on the circle), theta_m where |G| has fallen by e^-DEPTH, N with both
    aliasing sums below e^-ALIAS_DEPTH of the value's estimate: R^-N for the terms below c,
    and, for those above, the Chernoff bound G(R2) R2^(1 - c) (R / R2)^N at R2 the saddle point
    of c + N - 1 (those terms are 0 past the support)."""
    log_r, sigma = _saddle(a, m, min(c, a + m - 0.5), co)
    floor = 2.0 / max(sigma, 1.0)
    log_r = max(log_r, floor)
    log_pole = math.log(float(co.pt / co.pb))
    if abs(log_r - log_pole) < 0.01:
        log_r = log_pole - 0.01 if log_r - 0.01 > floor else log_pole + 0.01
    r = math.expm1(log_r)
    ex0 = _log_modulus(a, m, co, r, 0.0)
    theta_m = math.sqrt(2.0 * DEPTH) / max(sigma, 1e-3)
    while theta_m < math.pi and _log_modulus(a, m, co, r, theta_m) - ex0 > -DEPTH - 5.0:
        theta_m *= 1.25
    est = ex0 - c * log_r + math.log(float(co.alpha) + float(co.big_e)) - math.log(sigma) - 8.0
    n_nodes = 2 * math.ceil(max(0.0, ALIAS_DEPTH - min(est, 0.0)) / (2.0 * log_r)) + 1
    big = math.log(max(float(co.alpha), float(co.big_e)))
    log_r2 = 2.0 * log_r
    for _ in range(40):
        if c + n_nodes - 1 > a + m:
            break
        log_r2 = max(_saddle(a, m, c + n_nodes - 1, co)[0], 1.5 * log_r)
        f1, f2 = _log_factors(co, log_r2)
        log_rho = n_nodes * (log_r - log_r2)
        high = big + a * f1 + m * f2 + (1.0 - c) * log_r2 + log_rho
        if high - math.log(-math.expm1(log_rho)) <= est - ALIAS_DEPTH:
            break
        n_nodes = 2 * n_nodes + 1
    return _Plan(log_r, min(theta_m, math.pi), n_nodes, log_r2)


def make_circle(plan: _Plan, co: Coefs) -> Circle | None:
    """The circle of ``plan``, None past MAX_NODES."""
    n_nodes = plan.n_nodes
    last = min(int(plan.theta_m * n_nodes / (2.0 * math.pi)) + 1, (n_nodes - 1) // 2)
    if last + 1 > MAX_NODES:
        return None
    r = np.longdouble(math.expm1(plan.log_r))
    big_r = 1 + r
    k = np.arange(last + 2, dtype=np.longdouble)
    theta = np.asarray(_TWO_PI * k / n_nodes, dtype=np.longdouble)  # (the nodes' error is u)
    s2 = np.sin(theta / 2)
    wx, wy = r - 2 * big_r * s2 * s2, big_r * np.sin(theta)
    l1x, l1y = _clog1p(co.pt * wx, co.pt * wy)
    l2x, l2y = _clog1p(co.pb * wx, co.pb * wy)
    w2 = wx * wx + wy * wy
    ax, ay = co.alpha - co.big_e * wx / w2, co.big_e * wy / w2  # alpha - E / w
    kx, ky = (1 + wx) * ax - wy * ay, (1 + wx) * ay + wy * ax  # K = z (alpha - E / w)
    s1 = co.pt * big_r / np.hypot(1 + co.pt * wx, co.pt * wy)
    s2_ = co.pb * big_r / np.hypot(1 + co.pb * wx, co.pb * wy)
    t = theta[last]
    w_scale = float(r + big_r * (1 - np.cos(t)) + big_r * np.abs(np.sin(t)))
    k_err = float(big_r) * (float(co.alpha) + float(co.big_e) * (1 + w_scale / float(r)) / float(r))
    summed = slice(0, last + 1)
    outside = last < (n_nodes - 1) // 2
    weight = np.full(last + 1, 2, dtype=np.longdouble)
    weight[0] = 1
    f1, f2 = _log_factors(co, plan.log_r2)
    return Circle(
        r, np.log1p(r), n_nodes, theta[summed], l1x[summed], l1y[summed], l2x[summed],
        l2y[summed],
        float(np.max(np.hypot(l1x, l1y)[summed])), float(np.max(np.hypot(l2x, l2y)[summed])),
        float(np.max(s1[summed])), float(np.max(s2_[summed])), w_scale, k_err * 1.01,
        _padded(l1x[last + 1]) if outside else -math.inf,
        _padded(l2x[last + 1]) if outside else -math.inf,
        plan.log_r2, f1, f2,
        math.log(max(float(co.alpha), float(co.big_e))) + 1e-12,
        math.log(float(big_r) * (float(co.alpha) + float(co.big_e) / float(r))) + 1e-12,
        weight.astype(np.float64), (weight * np.hypot(kx, ky)[summed]).astype(np.float64) * (1 + 1e-15),
        kx[summed].astype(np.float64), ky[summed].astype(np.float64),
        float(np.max(np.hypot(kx, ky)[summed])) * 1.01,
        np.cos(theta[summed]).astype(np.float64), np.sin(theta[summed]).astype(np.float64),
    )  # fmt: skip


def _padded(x: np.longdouble) -> float:
    """A long double as a float rounded upwards, with 1e-12 of room for its own rounding."""
    return float(x) + 1e-12 * abs(float(x)) + 1e-300


@dataclass(frozen=True, slots=True)
class _Rows:
    """Phi(c) for rows of (a, m) and windows c = lo + j (j < J): exp(unit) (value +- err), one
    unit per row."""

    values: npt.NDArray[np.float64]  # (R, J)
    errs: npt.NDArray[np.float64]  # (R, J), the tails included
    units: npt.NDArray[np.float64]  # (R,)


def _phi_rows(
    circle: Circle,
    a: npt.NDArray[np.int64],
    m: npt.NDArray[np.int64],
    lo: npt.NDArray[np.int64],
    width: int,
) -> _Rows:
    """Phi(c) by the trapezoid sum on the circle for every row (a, m) and c = lo .. lo +
    width - 1, all in units of exp(ref) of the row (that of c = lo), with the bounds on their
    errors (module docstring): each node's exponent error delta and K's by their largest over
    the nodes (every magnitude in them grows with |theta|).

    The exponent (thousands in size at n = 1e6) is formed in long double for c = lo, its real
    part taken relative to the scale and its phase reduced to [-pi, pi]; the rest is float64:
    exp, cos and sin once per node, then c + 1 from c by one rotation by e^(-i theta) and the
    factor R^-1 (the real part of c log z does not depend on theta). Their rounding (u64 of
    the reduced exponent, 4 u64 per rotation, each product, the sums) is added to the
    bound."""
    u, u64 = _U, 2.0**-53
    a2, m2 = a.astype(np.longdouble)[:, None], m.astype(np.longdouble)[:, None]
    lo2 = lo.astype(np.longdouble)[:, None]
    base = a2 * circle.l1x + m2 * circle.l2x  # (R, K)
    ref = (base[:, 0] - lo2[:, 0] * circle.log_r).astype(np.float64)  # the rows' units
    rel = (base - (ref.astype(np.longdouble)[:, None] + lo2 * circle.log_r)).astype(np.float64)
    phase = a2 * circle.l1y + m2 * circle.l2y - lo2 * circle.theta
    phase = (phase - _TWO_PI * np.round(phase / _TWO_PI)).astype(np.float64)
    mag = np.exp(rel)
    re, im = mag * np.cos(phase), mag * np.sin(phase)
    n_nodes = float(circle.n_nodes)
    theta, big_r = float(circle.theta[-1]), 1.0 + float(circle.r)
    c_max = (lo + width - 1).astype(np.float64)
    size = a * circle.l1_max + m * circle.l2_max + c_max * math.hypot(float(circle.log_r), theta)
    slope = a * circle.s1_max + m * circle.s2_max + c_max
    base_delta = CONTOUR_PAD * (
        u * (size + slope * (theta + circle.w_scale / big_r) + 8)
        + u64 * (np.max(np.abs(rel), axis=1) + 8)
    )
    with_k = mag @ circle.weighted_k64
    plain = mag @ circle.weight64
    k_err = CONTOUR_PAD * (u * circle.k_err + u64 * circle.k_max)
    values, errs = np.empty((len(a), width)), np.empty((len(a), width))
    log_r = float(circle.log_r)
    for j in range(width):
        terms = re * circle.kx64 - im * circle.ky64
        grow = np.expm1(base_delta + CONTOUR_PAD * u64 * 4 * j) * (1 + 1e-9)
        shrink = math.exp(-j * log_r)  # R^-j, relative error below 2 u64 (1 + j log R)
        values[:, j] = terms @ circle.weight64 / n_nodes * shrink
        errs[:, j] = (
            (
                (grow + CONTOUR_PAD * u64 * (1 + j * log_r)) * with_k
                + k_err * (1 + grow) * plain
                + (1.01 * (circle.theta.size + 2) * u64) * (np.abs(terms) @ circle.weight64)
            )
            / n_nodes
            * shrink
        )
        re, im = re * circle.cos64 + im * circle.sin64, im * circle.cos64 - re * circle.sin64
    c = lo[:, None] + np.arange(width)
    tails = _tails(circle, a, m, c.astype(np.float64), ref[:, None])
    return _Rows(values, (errs + tails) * (1 + 1e-9), ref)


def _tails(
    circle: Circle,
    a: npt.NDArray[np.int64],
    m: npt.NDArray[np.int64],
    c: npt.NDArray[np.float64],
    refs: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """For each row and c: the unsummed nodes (each at most |G| at theta_(K+1) times max |K| =
    R (alpha + E / r)) and the aliased terms (module docstring), divided by exp(ref) (the
    row's unit, ``refs`` of shape (R, 1))."""
    log_r, n = float(circle.log_r), circle.n_nodes
    low = circle.log_alias - n * log_r - math.log(-math.expm1(-n * log_r)) - refs
    parts = [low]
    if circle.l1_out > -math.inf:
        out = a * circle.l1_out + m * circle.l2_out + circle.log_k_max
        parts.append(out[:, None] - c * log_r - refs)
    log_rho = n * (log_r - circle.log_r2)  # (R / R2)^N
    high = circle.log_alias + a * circle.g1_r2 + m * circle.g2_r2 + circle.log_r2
    high = high + log_rho - math.log(-math.expm1(log_rho))
    inside = c + n - 1 <= (a + m)[:, None]  # (past the support T is 0)
    parts.append(np.where(inside, high[:, None] - c * circle.log_r2 - refs, -np.inf))
    with np.errstate(over="ignore"):
        total = sum(np.exp(np.minimum(x, 710.0)) for x in parts)
    return np.where(np.isfinite(total), total * (1.0 + 1e-9), np.inf)


def _guess(a: npt.NDArray[np.int64], m: npt.NDArray[np.int64], co: Coefs) -> npt.NDArray[np.int64]:
    """c*, estimated as the mean of B tilted by R0 plus 1/2 (B(c - 1) / B(c) is about the
    saddle point of c - 1/2, and c* is where it passes R0), rounded."""
    pt, pb, big_r = float(co.pt), float(co.pb), 1.0 + co.r0
    guess = np.floor(a / (1.0 + pb / (pt * big_r)) + m / (1.0 + pt / (pb * big_r)) + 1.0)
    return guess.astype(np.int64)


def _window_start(
    a: npt.NDArray[np.int64], m: npt.NDArray[np.int64], co: Coefs
) -> npt.NDArray[np.int64]:
    """Where each window of 2 WINDOW + 1 values of c starts: centred on the guess of c*, kept
    inside [1, n] (n = a + m + 1)."""
    return np.clip(_guess(a, m, co) - WINDOW, 1, a + m + 1 - 2 * WINDOW)


def _narrow(bracket: Bracket) -> bool:
    """At most SHARED_WIDTH wide (relative), or below 1e-300, where floats end."""
    return bracket.upper <= bracket.lower * (1.0 + SHARED_WIDTH) or bracket.upper < 1e-300


def direction_one(
    n: int, a: int, co: Coefs, meter: WorkMeter | None = None, circle: Circle | None = None
) -> Bracket | None:
    """A bracket on H1 = max_c Phi(c) (module docstring) for a of the n - 1 others on x0, on
    ``circle`` (shared) or else on circles placed for this a; None where the contour does not
    apply (too many nodes, a window that would not settle, or a bracket wider than
    SHARED_WIDTH even on its own circle: eps0 above 10 with eps near it, up to 1 % wide; the
    callers then use k2_exact). A shared circle's wide bracket (R far from this a's saddle
    point) is redone on the a's own circle."""
    for here in ([circle] if circle is not None else []) + [None]:
        result = _window_search(n, a, co, meter, here)
        if result is not None and _narrow(result):
            return result
    return None


def _window_search(
    n: int, a: int, co: Coefs, meter: WorkMeter | None, circle: Circle | None
) -> Bracket | None:
    """max_c Phi(c) over a window of c around the guess of c*, moved until Phi certainly rises
    into it and falls out of it (Phi is unimodal: then the maximum is inside)."""
    m = n - 1 - a
    width = 2 * WINDOW + 1
    lo = int(_window_start(np.array([a]), np.array([m]), co)[0])
    for _ in range(8):
        here = circle or make_circle(_plan(a, m, lo + WINDOW, co), co)
        if here is None:
            return None
        if meter is not None:
            meter.work += CONTOUR_CALL_WORK
        rows = _phi_rows(here, np.array([a]), np.array([m]), np.array([lo]), width)
        outcome = _row_outcome(rows, np.array([lo]), np.array([n]))
        rises, falls = bool(outcome.rises[0]), bool(outcome.falls[0])
        if rises and falls:
            return outcome.brackets[0]
        if not rises and not falls:
            return None  # too wide to tell
        lo = max(lo - 2 * WINDOW, 1) if not rises else min(lo + 2 * WINDOW, n - width + 1)
    return None


def directions_many(
    pairs: list[tuple[int, int]], co: Coefs, circle: Circle, meter: WorkMeter | None = None
) -> list[Bracket | None]:
    """H1 for many (n, a) at once (:func:`direction_one` on one circle, rows of ROWS at a
    time: one pass of array arithmetic instead of one per a); None for a row whose window did
    not settle or whose bracket is wider than SHARED_WIDTH (the caller then calls
    direction_one, which moves the window or places a circle of its own)."""
    out: list[Bracket | None] = []
    width = 2 * WINDOW + 1
    for start in range(0, len(pairs), ROWS):
        n = np.array([p[0] for p in pairs[start : start + ROWS]], dtype=np.int64)
        a = np.array([p[1] for p in pairs[start : start + ROWS]], dtype=np.int64)
        m = n - 1 - a
        lo = _window_start(a, m, co)
        if meter is not None:
            meter.work += CONTOUR_ROW_WORK * len(n)
        outcome = _row_outcome(_phi_rows(circle, a, m, lo, width), lo, n)
        out.extend(outcome.settled(i) for i in range(len(n)))
    return out


@dataclass(frozen=True, slots=True)
class _Outcome:
    """Each row's max over its window as a Bracket, and whether Phi certainly rises into the
    window (or it starts at c = 1) and falls out of it (or it ends at c = n): only then is the
    maximum inside (Phi(c) = -E below 1 and 0 above n)."""

    brackets: list[Bracket]
    rises: npt.NDArray[np.bool_]
    falls: npt.NDArray[np.bool_]

    def settled(self, i: int) -> Bracket | None:
        """Row i's bracket if its window holds the maximum and it is at most SHARED_WIDTH wide
        (or below 1e-300, where floats end), else None."""
        b = self.brackets[i]
        return b if self.rises[i] and self.falls[i] and _narrow(b) else None


def _row_outcome(rows: _Rows, lo: npt.NDArray[np.int64], n: npt.NDArray[np.int64]) -> _Outcome:
    """The rows' maxima, exp(unit) carried in logs with a margin of 8 u (1 + |unit|) and 4 ulp
    of the float log, rounded outwards to floats: an upper end that underflows is the smallest
    positive float, never 0."""
    unit = rows.units
    low, high = rows.values - rows.errs, rows.values + rows.errs
    rises = (lo == 1) | (low[:, 1] > high[:, 0])
    falls = (lo + rows.values.shape[1] - 1 == n) | (low[:, -2] > high[:, -1])
    top = np.max(high, axis=1).astype(np.longdouble)  # (its log in long double)
    bottom = np.max(low, axis=1).astype(np.longdouble)
    slack = 8 * _U * (1 + np.abs(unit))
    with np.errstate(divide="ignore", invalid="ignore"):
        log_u = unit + np.log(top).astype(np.float64) + slack
        log_l = unit + np.log(bottom).astype(np.float64) - slack
    log_u += 4 * 2.0**-53 * np.abs(log_u)
    log_l -= 4 * 2.0**-53 * np.abs(log_l)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        upper = np.where(
            log_u > -745, np.minimum(np.exp(np.minimum(log_u, 0.0)) * (1 + 1e-15), 1.0), 5e-324
        )
        upper = np.where(top > 0, upper, 0.0)
        lower = np.where((bottom > 0) & (log_l > -745), np.exp(log_l) * (1 - 1e-15), 0.0)
    brackets = [
        Bracket(min(low_i, up_i), up_i)
        for low_i, up_i in zip(lower.tolist(), upper.tolist(), strict=True)
    ]
    return _Outcome(brackets, rises, falls)


@functools.lru_cache(maxsize=64)
def shared_circle(n: int, eps0: float, eps: float) -> Circle | None:
    """One circle for every F(a) of one (n, eps0, eps) (and the reduced n of the certificate's
    blocks): R at the saddle point of a = (n - 1) / 2 (it barely moves with a), theta_m and N
    the largest that a = 0, (n - 1) / 2 and n - 1 ask for."""
    if not applies(n, eps0, eps):
        return None
    co = Coefs.of(eps0, eps)
    ends = np.array([0, (n - 1) // 2, n - 1])
    guesses = _guess(ends, n - 1 - ends, co)
    plans = [_plan(int(a), n - 1 - int(a), int(c), co) for a, c in zip(ends, guesses, strict=True)]
    middle = plans[1]
    return make_circle(
        _Plan(
            middle.log_r,
            max(p.theta_m for p in plans),
            max(p.n_nodes for p in plans),
            middle.log_r2,
        ),
        co,
    )


def k2_contour_value(
    mech: ShuffledKRR, a: int, eps: float, meter: WorkMeter | None = None
) -> Bracket | None:
    """A bracket on F(a) = max(H1(a), H1(n - 1 - a)) for k = 2 (module docstring), about
    1e-14 wide in long double; None where the contour does not apply (the caller then uses
    k2_exact)."""
    n = mech.n
    if mech.k != 2 or not 0 <= a <= n - 1 or not applies(n, mech.eps0, eps):
        return None
    co = Coefs.of(mech.eps0, eps)
    one = direction_one(n, a, co, meter)
    other = direction_one(n, n - 1 - a, co, meter) if one is not None else None
    if one is None or other is None:
        return None
    return Bracket(max(one.lower, other.lower), max(one.upper, other.upper))


def k2_direction_value(
    mech: ShuffledKRR,
    a: int,
    eps: float,
    forward: bool,
    meter: WorkMeter | None = None,
    circle: Circle | None = None,
) -> Bracket | None:
    """One direction of F(a): H(P0||P1) (``forward``) = H1(a), or H(P1||P0) = H1(n - 1 - a),
    on ``circle`` if given (else on circles placed for it); None where the contour declines."""
    n = mech.n
    if mech.k != 2 or not 0 <= a <= n - 1 or not applies(n, mech.eps0, eps):
        return None
    return direction_one(n, a if forward else n - 1 - a, Coefs.of(mech.eps0, eps), meter, circle)
