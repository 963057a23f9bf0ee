"""(1/n) E[(G_1 + ... + G_n)_+] for i.i.d. categorical G with work that does not grow with n.

A rigorous bracket from the inversion of the characteristic function of the tilted sum, smoothed
by a Gaussian (docs/accounting.md, "Evaluating (1/n) E[(sum G)_+]"). Notation: S = G_1 + ... +
G_n, atoms scaled to max |g| = 1, M(l) = E[e^(l G)], theta > 0 a tilt, E_theta the tilted law
(probabilities p_j e^(theta g_j) / M(theta)), phi its characteristic function, tau > 0.

1. Tilt. E[S_+] = M(theta)^n E_theta[w(S)] with w(x) = e^(-theta x) x_+ (every outcome's
   probability is M(theta)^n e^(-theta s) times its tilted probability).
2. Smooth. With Z ~ N(0, 1) independent and f(x) = E[(x + tau Z)_+]: x_+ <= f(x) (Jensen: x_+ is
   convex, E[tau Z] = 0), and f(x) - x_+ = tau psi(|x| / tau) with psi(a) = phi0(a) - a (1 -
   Phi(a)) <= phi0(a) (phi0, Phi: the standard normal density and CDF; a (1 - Phi(a)) >= 0). So
   with u(x) = e^(-theta x) f(x) and c(x) = tau e^(-theta x) phi0(x / tau):
       u - c <= w <= u.
   Both are integrable, with Fourier transforms (hat q(t) = int e^(i t x) q(x) dx)
       hat u(t) = e^(tau^2 (theta - i t)^2 / 2) / (theta - i t)^2  (u = w * [e^(-theta x) N(0, tau^2)]),
       hat c(t) = tau^2 e^(tau^2 (theta - i t)^2 / 2),
   both |.| <= e^(tau^2 theta^2 / 2) e^(-tau^2 t^2 / 2) (1 / (theta^2 + t^2), tau^2): Gaussian decay.
3. Poisson summation. For V(y) = E_theta[u(S + y)] (continuous, integrable, with transform
   hat u(t) conj(phi(t))^n, absolutely summable on any grid) and any step h, P = 2 pi / h:
       sum_m V(y + m P) = (h / 2 pi) sum_k hat u(k h) conj(phi(k h))^n e^(-i k h y).
   Every V(y + m P) >= 0 (u >= 0), so the grid sum is >= V(y) (upper side), and the same holds
   for c. The aliased terms m != 0 are bounded by Chernoff: for every l > 0,
   f(x) <= E[e^(l (x + tau Z))] / (e l) (since s_+ <= e^(l s) / (e l)), so
       V(y + m P) <= e^(l^2 tau^2 / 2) / (e l) e^((l - theta)(y + m P)) E_theta[e^((l - theta) S)],
   a geometric series in m >= 1 for l < theta and in m <= -1 for l > theta (lower side).
4. Truncation and skipping. |conj(phi)^n| <= 1 and |hat u| decreases in |t|, so the terms beyond
   |t| > L are at most (1 / pi) int_L^inf |hat u| (and likewise for c). Inside, groups ("cells")
   of grid points where sup |phi| is provably small are skipped: |phi| is Lipschitz in t with
   constant E_theta|G - g_r| (any r), so sup over [c - r, c + r] <= |phi(c)| + r E_theta|G - g_r|,
   and a skipped cell adds count * max|hat u| * sup|phi|^n to the error.
5. Floating point. The computed tilted probabilities define a probability law exactly (the
   largest one is taken as 1 minus the others); it differs from the true tilted law by a bounded
   relative error per draw, i.e. a factor within e^(+-n eta) on every outcome, and the atoms
   (COEF_RELERR each) move S by at most Delta = n (COEF_RELERR + 2 ulp), which is handled by
   evaluating at y = +Delta (upper) and y = -Delta (lower): E[(S + y)_+] = M^n e^(theta y)
   E_theta[w(S + y)]. Each evaluated term carries a bound on its rounding error (the
   characteristic function to 32 ulp times t E_theta|G - g_r|, the exponent and phase to a few
   ulp of their magnitudes, n times); sums are bounded by (count) ulp times the sum of magnitudes.

The bracket is then [M^n e^(-n eta - theta Delta) (grid_u(-Delta) - err_u - alias - grid_c(-Delta)
- err_c), M^n e^(n eta + theta Delta) (grid_u(+Delta) + err_u)] times scale / n: the relative
width is about 2 (tau theta)^2 plus the (tiny) error terms, with tau = TAU_FRACTION
min(1 / theta, sd_theta(S)). The work is the number of grid points evaluated (those with |phi|
not provably negligible: about 50 around t = 0 and a few per near-return of |phi| to 1) plus
one characteristic-function value per cell, independent of n.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import erfc

from shuffledp.accountant.engines.numerics import FloatArray, log_sum, tilt_root
from shuffledp.accountant.engines.pairs import COEF_RELERR, PARAM_RELERR, Bracket

if TYPE_CHECKING:  # gsum imports this module
    from shuffledp.accountant.engines.gsum import Atom

_ULP = 2.0**-52
#: tau = TAU_FRACTION min(1 / theta, sd_theta(S)): the bracket's relative width is about
#: 2 TAU_FRACTION^2; the work grows like 1 / TAU_FRACTION (number of cells).
TAU_FRACTION = 0.005
#: A bracket wider than this (relative) is refined with tau / REFINE_FACTOR (at most twice).
REFINE_WIDTH = 1.5e-4
REFINE_FACTOR = 4.0
#: Band limit L = BAND / tau: the truncated terms are below e^(-BAND^2 / 2) relative.
BAND = 9.0
#: Grid period P = |E_theta S| + ALIAS_SDS sd_theta(S) + ALIAS_DECAYS / theta (doubled if the
#: aliasing bound is not negligible).
ALIAS_SDS = 10.0
ALIAS_DECAYS = 40.0
#: Grid points per cell (one characteristic-function value decides whether a cell is skipped).
CELL_POINTS = 128
#: Most grid points (|t| <= BAND / tau) an evaluation may span; beyond, the method declines.
MAX_GRID = 5e7
#: The skipped cells' total error budget, relative to a low estimate of the value.
SKIP_TOL = 1e-10


@dataclass(frozen=True, slots=True)
class _Law:
    """The tilted law as used (scaled atoms g, tilted probabilities q, reference atom r)."""

    n: int
    g: FloatArray
    q: FloatArray
    d: FloatArray  # g_j - g_r for j != r
    qd: FloatArray  # q_j for j != r
    g_ref: float
    lip: float  # sum_{j != r} q_j |d_j|: the Lipschitz constant of phi
    scale: float
    theta: float
    log_mgf: float  # log M(theta) of the given law (scaled atoms)
    eta: float  # per-draw log error of the law (probabilities and tilt)
    shift: float  # Delta: |S_true - S_used| <= Delta (scaled units)
    tau: float
    mean: float  # E_theta[S]
    sd: float  # sd_theta(S)


def fast_mean_positive_part(n: int, atoms: Sequence[Atom]) -> Bracket | None:
    """A bracket on (1/n) E[(G_1 + ... + G_n)_+] (module docstring), or None where the method
    does not apply (no negative atom, or a degenerate tilted law).

    Where the bracket is wider than REFINE_WIDTH (a lattice-like sum: one atom carries nearly
    all the mass), tau is divided by REFINE_FACTOR, up to twice; every bracket is rigorous, so
    their intersection is returned."""
    law = _law(n, atoms)
    if law is None:
        return None
    best: Bracket | None = None
    for _ in range(3):
        got = _bracket(law)
        if got is None:
            break
        best = (
            got if best is None else Bracket(max(best.lower, got.lower), min(best.upper, got.upper))
        )
        if best.upper <= best.lower * (1.0 + REFINE_WIDTH) or best.lower < 1e-290:
            break  # narrow enough, or below the normal range (where the width is rounding)
        law = replace(law, tau=law.tau / REFINE_FACTOR)
    return best


def _bracket(law: _Law) -> Bracket | None:
    """The bracket at this law's tau (None if the grid would exceed MAX_GRID or the aliasing
    stays large after the period is doubled three times)."""
    period = abs(law.mean) + ALIAS_SDS * law.sd + ALIAS_DECAYS / law.theta
    for _ in range(4):
        if BAND / law.tau * period / (2.0 * math.pi) > MAX_GRID:
            return None  # a nearly degenerate tilted law: too many grid points
        inner = _inner(law, period)
        if inner is not None:
            break
        period *= 2.0
    else:
        return None
    lower_inner, upper_inner = inner
    n = law.n
    base = n * law.log_mgf + math.log(law.scale / n)
    # n eta and theta Delta (step 5), and the rounding of n log M and of log(scale / n).
    slack = (
        n * law.eta
        + law.theta * law.shift
        + 4.0 * _ULP * (abs(n * law.log_mgf) + abs(math.log(law.scale / n)) + 4.0)
    )
    if not upper_inner > 0.0:
        return None  # cannot happen (the k = 0 term dominates); never return a bad bracket
    return _assemble(base - slack, lower_inner, base + slack, upper_inner)


def _assemble(log_lo: float, lower_inner: float, log_hi: float, upper_inner: float) -> Bracket:
    """exp(log_lo) lower_inner and exp(log_hi) upper_inner, rounded outwards (8 ulp for the
    log, exp and product, two ulps of the result below the normal range); capped at 1 above
    only by the caller's scaling."""
    if lower_inner > 0.0:
        expo = log_lo + math.log(lower_inner)
        expo -= 4.0 * _ULP * (abs(log_lo) + abs(math.log(lower_inner)) + 1.0)
        low = math.exp(min(expo, 700.0)) * (1.0 - 8.0 * _ULP)
        lower = max(0.0, low - 2.0 * math.ulp(low))
    else:
        lower = 0.0
    expo = log_hi + math.log(upper_inner)
    expo += 4.0 * _ULP * (abs(log_hi) + abs(math.log(upper_inner)) + 1.0)
    high = math.exp(min(expo, 700.0)) * (1.0 + 8.0 * _ULP)
    return Bracket(lower, max(high + 2.0 * math.ulp(high), math.ulp(0.0)))


def _law(n: int, atoms: Sequence[Atom]) -> _Law | None:
    """The scaled atoms, the tilt and the error terms of step 5."""
    atoms = [a for a in atoms if a.prob > 0.0]
    if not any(a.value < 0.0 for a in atoms) or not any(a.value > 0.0 for a in atoms):
        return None
    scale = max(abs(a.value) for a in atoms)
    g = np.asarray([a.value / scale for a in atoms])
    lp = np.log(np.asarray([a.prob for a in atoms]))
    p = np.exp(lp)
    drift = n * float(np.sum(p * g))
    if drift > 3.0 * math.sqrt(n * float(np.sum(p * g * g))):
        # S is mostly positive (never the case for the deltas here, whose G has mean <= 0): the
        # mass of S_+ is not near 0 and the tilt below does not apply.
        return None
    theta = _tilt(n, g, lp)
    terms = lp + theta * g
    log_mgf = float(log_sum(terms))
    q = np.exp(terms - log_mgf)
    if float(np.min(q)) < 1e-290:
        # An underflowed (or subnormal) tilted probability would drop outcomes of the true law
        # (or carry more than a few ulp of error): the per-draw ratio of step 5 fails.
        return None
    ref = int(np.argmax(q))
    others = np.arange(g.size) != ref
    mean = float(np.sum(q * g))
    sd = math.sqrt(max(n * (float(np.sum(q * g * g)) - mean * mean), 0.0))
    if not sd > 0.0 or q[ref] < 0.2:
        return None
    # Step 5: log M to delta_m; each q_j to delta relative (log p, theta g, the sums, exp); the
    # reference q_r = 1 - sum of the others then to delta (1 - q_r) / q_r; the inputs to
    # PARAM_RELERR. Per draw the true/used probability ratio is within e^(+-eta).
    delta_m = 8.0 * _ULP * (float(np.max(np.abs(lp) + theta * np.abs(g))) + 4.0)
    delta = delta_m + 4.0 * _ULP * (
        float(np.max(np.abs(lp) + theta * np.abs(g))) + abs(log_mgf) + 2.0
    )
    delta_ref = delta * max(1.0, (1.0 - q[ref]) / q[ref])
    eta = 1.01 * (2.0 * PARAM_RELERR + 2.0 * delta_ref + delta_m)
    tau = TAU_FRACTION * min(1.0 / theta, sd)
    d = g[others] - g[ref]
    qd = q[others]
    return _Law(
        n=n,
        g=g,
        q=q,
        d=d,
        qd=qd,
        g_ref=float(g[ref]),
        lip=float(np.sum(qd * np.abs(d))),
        scale=scale,
        theta=theta,
        log_mgf=log_mgf,
        eta=eta,
        shift=n * (COEF_RELERR + 2.0 * _ULP) * 1.01,
        tau=tau,
        mean=n * mean,
        sd=sd,
    )


def _tilt(n: int, g: FloatArray, lp: FloatArray) -> float:
    """max(the root of E_l[G] = 0 (numerics.tilt_root), 1 / sd_root(S)): any theta > 0 is valid
    (step 1); the root centres the tilted sum on 0, and the floor keeps the grid short where the
    root is near 0."""

    root = tilt_root(g, lp, rel_tol=1e-13)
    w = np.exp(lp + root * g - float(np.max(lp + root * g)))
    w /= np.sum(w)
    var = float(np.sum(w * g * g) - np.sum(w * g) ** 2)
    return max(root, 1.0 / math.sqrt(max(n * var, 1e-300)))


def _inner(law: _Law, period: float) -> tuple[float, float] | None:
    """(lower, upper) on E_theta[w(S + y)] e^(theta y) / e^(theta y), i.e. the bracket of step 3
    at y = -Delta (lower) and y = +Delta (upper), without the factors M^n e^(+-(n eta + theta
    Delta)); None if the aliasing bound is not negligible (the caller doubles the period)."""
    h = 2.0 * math.pi / period
    period = 2.0 * math.pi / h * (1.0 - 4.0 * _ULP)  # the period the float step realises, low
    estimate = _low_estimate(law)
    ks, skipped_u, skipped_c = _plan(law, h, SKIP_TOL * estimate)
    sums = _grid_sums(law, h, ks)
    tail_u, tail_c = _tail(law, h)
    alias = _alias(law, period, -law.shift)
    weight = h / (2.0 * math.pi)
    zero_u = math.exp(0.5 * (law.tau * law.theta) ** 2) / law.theta**2 * (1.0 + 8.0 * _ULP)
    up = weight * (zero_u + 2.0 * sums.u_plus)
    # The weight h / 2 pi and the k = 0 term round by a few ulp: 16 ulp of the k = 0 term
    # (it enters both sides) and 4 ulp of the total.
    err_u = (
        weight * 2.0 * (sums.err_u + skipped_u)
        + tail_u
        + 4.0 * _ULP * abs(up)
        + 16.0 * _ULP * weight * zero_u
    )
    down = weight * (zero_u + 2.0 * sums.u_minus)
    c_sum = weight * (law.tau**2 * zero_u * law.theta**2 + 2.0 * sums.c_minus)
    err_c = weight * 2.0 * (sums.err_c + skipped_c) + tail_c + 4.0 * _ULP * abs(c_sum)
    if alias > 1e-6 * max(down, 1e-300):
        return None
    upper = (up + err_u) * (1.0 + 4.0 * _ULP)
    lower = (down - err_u - alias - c_sum - err_c) * (1.0 - 4.0 * _ULP)
    return max(lower, 0.0), upper


def _low_estimate(law: _Law) -> float:
    """A rough low estimate of V(0) (Gaussian local approximation, times 1e-2): it only sets the
    budget of the skipped cells, so any positive value is safe."""
    z = law.mean / max(law.sd, 1e-300)
    density = math.exp(-0.5 * min(z * z, 1400.0)) / (math.sqrt(2.0 * math.pi) * law.sd)
    return 1e-2 * density / (law.theta**2 + 1.0 / law.sd**2)


@dataclass(frozen=True, slots=True)
class _Sums:
    u_plus: float  # sum over k >= 1 of Re(term_u) at y = +Delta
    u_minus: float  # ... at y = -Delta
    c_minus: float  # sum of Re(term_c) at y = -Delta
    err_u: float  # bound on the rounding of the u sums (both)
    err_c: float


def _cf_log(law: _Law, t: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(log |phi(t) e^(-i t g_r)|, its argument, and bounds on their absolute errors), with
    phi(t) e^(-i t g_r) = 1 + z, z = sum_{j != r} q_j (e^(i t d_j) - 1) computed as x + i y,
    x = -2 sum q_j sin^2(t d_j / 2) and y = sum q_j sin(t d_j) (no cancellation in x)."""
    a = t[:, None] * law.d[None, :]
    s = np.sin(0.5 * a)
    x = -2.0 * ((s * s) @ law.qd)
    y = np.sin(a) @ law.qd
    # |z_computed - z| <= 32 ulp t sum q_j |d_j|: every rounding (t d_j, sin, squares, products,
    # the sum) is a few ulp of a quantity at most |t d_j| per term, and d_j itself is g_j - g_r
    # to an ulp (a phase error of t ulp |d_j|).
    dz = 32.0 * _ULP * t * law.lip
    wq = 2.0 * x + x * x + y * y  # |1 + z|^2 - 1
    log_abs = 0.5 * np.log1p(wq)
    arg = np.arctan2(y, 1.0 + x)
    mod = np.sqrt(1.0 + wq)
    # d|1+z|^2 <= (2 + 2|x| + 2|y|) dz + 4 ulp (2|x| + x^2 + y^2); log1p's slope is 1 / |1+z|^2;
    # the argument moves by at most sqrt(2) dz / (|1+z| - dz) plus its own rounding.
    safe = np.maximum(mod - 2.0 * dz, 1e-300)
    d_sq = (2.0 + 2.0 * np.abs(x) + 2.0 * np.abs(y)) * dz + 4.0 * _ULP * (
        2.0 * np.abs(x) + x * x + y * y
    )
    err_abs = 0.5 * d_sq / (safe * safe) + 2.0 * _ULP * np.abs(log_abs)
    err_arg = 1.5 * dz / safe + 4.0 * _ULP * (np.abs(arg) + (1.0 + np.abs(x)) / safe)
    return log_abs, arg, err_abs, err_arg


def _grid_sums(law: _Law, h: float, ks: FloatArray) -> _Sums:
    """The grid sums of step 3 over the evaluated points k h (k >= 1), with rounding bounds."""
    n, tau, theta = law.n, law.tau, law.theta
    u_p = u_m = c_m = abs_u = abs_c = err_u = err_c = 0.0
    for start in range(0, ks.size, 1 << 16):
        t = ks[start : start + (1 << 16)] * h
        log_abs, arg, err_abs, err_arg = _cf_log(law, t)
        expo = 0.5 * tau * tau * (theta * theta - t * t) + n * log_abs
        # conj(phi)^n e^(-i t y) hat-factor: phase -(n arg + t n g_r + tau^2 theta t + t y).
        base_phase = -(n * arg + t * (n * law.g_ref) + tau * tau * theta * t)
        # The exponent's and phase's rounding (a few ulp of each part) and the error of evaluating
        # at fl(k h) instead of k h (|t| ulp times the log-derivative, at most n / |phi| + ...).
        mod = np.exp(log_abs)
        e_expo = n * err_abs + 8.0 * _ULP * (np.abs(expo) + tau * tau * t * t + 1.0)
        e_phase = n * err_arg + 8.0 * _ULP * (
            np.abs(n * arg)
            + t * n * (abs(law.g_ref) + 2.0 / mod)
            + tau * tau * t * (theta + t)
            + t * law.shift
            + 2.0 * t / np.hypot(theta, t)
            + 1.0
        )
        mag = np.exp(expo)
        rel = (np.expm1(e_expo) + np.exp(e_expo) * e_phase + 16.0 * _ULP) * 1.01
        inv = 1.0 / (theta - 1j * t) ** 2
        for sign in (1.0, -1.0):
            ph = base_phase - sign * t * law.shift
            term_u = mag * (np.cos(ph) * inv.real - np.sin(ph) * inv.imag)
            if sign > 0:
                u_p += float(np.sum(term_u))
            else:
                u_m += float(np.sum(term_u))
                c_m += float(np.sum(tau * tau * mag * np.cos(ph)))
        mag_u = mag * np.abs(inv)
        abs_u += float(np.sum(mag_u))
        abs_c += float(tau * tau * np.sum(mag))
        err_u += float(np.sum(mag_u * rel))
        err_c += float(tau * tau * np.sum(mag * rel))
    count = float(ks.size + 2)
    # Any summation order: at most (count) ulp times the sum of magnitudes.
    err_u += 2.0 * count * _ULP * abs_u * 1.01
    err_c += 2.0 * count * _ULP * abs_c * 1.01
    return _Sums(u_p, u_m, c_m, err_u, err_c)


def _plan(law: _Law, h: float, budget: float) -> tuple[FloatArray, float, float]:
    """The grid indices k >= 1 (|k h| <= BAND / tau) to evaluate, and the bounds on the skipped
    terms' magnitudes (sum over skipped k of |hat u(k h)| |phi|^n, and the same for c), step 4.

    Cells of CELL_POINTS indices; a cell is skipped if its bound is at most its share of the
    budget."""
    k_max = math.ceil(BAND / law.tau / h)
    starts = np.arange(1, k_max + 1, CELL_POINTS, dtype=np.float64)
    ends = np.minimum(starts + CELL_POINTS - 1, k_max)
    a = starts * h * (1.0 - 4.0 * _ULP)
    b = ends * h * (1.0 + 4.0 * _ULP)
    mid = 0.5 * (a + b)
    half = 0.5 * (b - a) * (1.0 + 4.0 * _ULP)
    log_abs, _, err_abs, _ = _cf_log(law, mid)
    # sup |phi| over the cell <= |phi(mid)| (to its rounding) + half * lip, capped at 1.
    rho = np.minimum(np.exp(log_abs + err_abs) * (1.0 + 4.0 * _ULP) + half * law.lip * 1.01, 1.0)
    count = ends - starts + 1.0
    with np.errstate(divide="ignore"):
        log_common = np.log(count) + 0.5 * law.tau**2 * (law.theta**2 - a * a) + law.n * np.log(rho)
    bound_u = np.exp(log_common) / (law.theta**2 + a * a) * (1.0 + 1e-12)
    bound_c = np.exp(log_common) * law.tau**2 * (1.0 + 1e-12)
    share = budget * count / k_max
    skip = (bound_u <= share) & (bound_c <= share)
    keep = ~skip
    pieces = [np.arange(s, e + 1.0) for s, e in zip(starts[keep], ends[keep], strict=True)]
    ks = np.concatenate(pieces) if pieces else np.zeros(0)
    return ks, float(np.sum(bound_u[skip])), float(np.sum(bound_c[skip]))


def _tail(law: _Law, h: float) -> tuple[float, float]:
    """Bounds on the terms beyond the band (|t| > k_max h >= BAND / tau), both signs, times
    h / (2 pi): (1 / pi) int_L^inf |hat u| <= (1 / pi) e^(tau^2 theta^2 / 2) / (theta^2 + L^2)
    sqrt(pi / 2) / tau erfc(tau L / sqrt 2), and tau^2 times that without the 1 / (theta^2 + L^2)
    for c (|hat u| decreases in |t|, so the grid sum is below the integral from L)."""
    k_max = math.ceil(BAND / law.tau / h)
    big_l = k_max * h * (1.0 - 4.0 * _ULP)
    tau, theta = law.tau, law.theta
    common = (
        math.exp(0.5 * (tau * theta) ** 2)
        * math.sqrt(math.pi / 2.0)
        / tau
        * float(erfc(tau * big_l / math.sqrt(2.0)))
        / math.pi
        * 1.01
    )
    return common / (theta**2 + big_l**2), common * tau**2


def _alias(law: _Law, period: float, y: float) -> float:
    """sum_{m != 0} V(y + m P) by the Chernoff bound of step 3, minimised over a grid of l (any
    l > 0 is valid): m >= 1 with l < theta, m <= -1 with l > theta."""
    theta, n, tau = law.theta, law.n, law.tau
    scale = max(law.sd, 1e-300)
    steps = np.concatenate(
        [theta * np.geomspace(1e-4, 0.999, 80), (period / scale**2) * np.geomspace(1e-2, 1e2, 80)]
    )
    log_q_max = float(np.max(np.abs(np.log(law.q))))
    total = 0.0
    for sign in (-1.0, 1.0):  # l = theta - s (m >= 1), l = theta + s (m <= -1)
        s = steps[(steps > 0) & ((sign > 0) | (steps < theta))]
        lam = theta + sign * s
        # E_theta[e^(sign s S)] = (sum_j q_j e^(sign s g_j))^n for the law used; to 8 ulp per
        # draw plus its log error, widened by n (eta + 16 ulp (1 + s)).
        log_m = log_sum(np.log(law.q)[None, :] + sign * s[:, None] * law.g[None, :], axis=1)
        log_r = -s * period
        log_bound = (
            0.5 * (lam * tau) ** 2
            - 1.0
            - np.log(lam)
            + sign * s * y
            + n * log_m
            + n * (law.eta + 16.0 * _ULP * (1.0 + s + log_q_max))
            + log_r
            - np.log(-np.expm1(log_r))
        )
        total += float(np.exp(min(float(np.min(log_bound)), 700.0))) * 1.01
    return total
