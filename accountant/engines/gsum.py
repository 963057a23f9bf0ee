"""Exact (1/n) E[(G_1 + ... + G_n)_+] for i.i.d. categorical G, with a rigorous error bracket.

:func:`mean_positive_part` uses this engine where it is cheap and the Fourier bracket of
:mod:`gsum_fast` (work independent of n, relative width about 1e-4) beyond.

Several deltas of shuffled k-RR take this form (docs/accounting.md derives each): the optimal
"privacy blanket" decomposition bound of Su, Cheng and Wang (IEEE S&P 2026) and the exact delta
of the datasets "every other user holds x2" (F(0)) and "every other user holds x0" (F(n-1)).
G takes at most four values g_1 > 0 >= g_2, g_3, g_4 with probabilities p_1..p_4; the counts
(N_1, .., N_4) are multinomial and S = sum g_j N_j.

Method. Write T = N_1 + N_2 ~ Bin(n, p_1 + p_2). Given T, J = N_1 ~ Bin(T, p_1 / (p_1 + p_2))
and R = N_3 ~ Bin(n - T, p_3 / (p_3 + p_4)) are independent and

    S = s_J + beta R,  s_J = g_1 J + g_2 (T - J) + g_4 (n - T),  beta = g_3 - g_4 < 0 (labels
    chosen so; beta = 0 means S does not depend on R).

So S > 0 iff R < y_J = s_J / |beta| and E[S_+ | T, J] = |beta| f(y_J) with
f(y) = sum_{r <= y} P(R = r) (y - r) = (y - m) A(m) + B(m), m = floor(y), A the CDF of R and
B(m) = sum_{r < m} A(r). A and B are running sums of non-negative numbers (no cancellation), and
one pass over each row gives every f(y_J): the work per T is linear in the windows of J and R.

Windows. Most of E[S_+] lives where S is near 0, far in the tails of the untilted law. With the
exponential tilt theta > 0 (sum p_j g_j e^(theta g_j) = 0, floored at 1e-3 / sd(S)), the bound
s_+ <= e^(theta s) / (e theta) gives, for any set W of counts,

    E[S_+ 1{(T, J, R) outside W}] <= M(theta)^n / (e theta) * P_theta(outside W),

where M is the moment generating function of G and P_theta the tilted law, itself multinomial
with probabilities p_j e^(theta g_j) / M(theta). The windows are centred on the tilted law, and
that bound, computed with binomial tails, is added to the upper side: nothing is dropped silently.

Errors (all added to the bracket): log-pmf errors of gammaln (numerics.log_weight_error) and of
the binomial parameters; the running sums (a few ulp per term); the threshold y, whose error
moves f by at most |dy| A (f is 1-Lipschitz in y with slope A); and the atoms themselves, each
given to COEF_RELERR relative: a change dS of S moves S_+ by at most |dS|, and
|dS| <= eta sum |g_j| N_j, which enters y the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from shuffledp.accountant.engines.gsum_fast import fast_mean_positive_part
from shuffledp.accountant.engines.numerics import (
    FloatArray,
    log_binom_cdf,
    log_binom_pmf,
    log_binom_sf,
    log_sum,
    log_weight_error,
    tilt_root,
)
from shuffledp.accountant.engines.pairs import COEF_RELERR, PARAM_RELERR, Bracket
from shuffledp.errors import OutsideConditionsError

_ULP = 2.0**-52
#: Half-width of each window in tilted standard deviations (plus a few points); the tilted mass
#: outside is bounded and added to the upper side, and if that bound is not negligible the
#: evaluation is repeated with WIDE_SIGMAS.
NARROW_SIGMAS = 8.0
WIDE_SIGMAS = 14.0
#: Elements (window cells) processed per block of T values: bounds the memory of one pass.
BLOCK_CELLS = 1_500_000
#: Largest amount of work (window cells) one evaluation may take (about 10 s here); beyond it
#: :class:`TooLargeError` says so instead of running for minutes.
MAX_CELLS = 4e8


#: Above this many window cells (10-50 ms of the exact engine; its cost per cell varies from
#: 60 ns to over 1 us with the shape of the windows) the Fourier bracket of gsum_fast is tried
#: first (relative width about 3e-5 to 1.5e-4, 5-20 ms, work independent of n). Below it, and
#: so at every n up to a few thousand, the exact engine alone.
EXACT_CELLS = 2e5
#: Above this n the Fourier bracket is tried first without estimating the exact engine's cost
#: (that estimate, three tilts, takes about 5 ms; the exact engine is rarely cheaper there).
FAST_FIRST_N = 50_000
#: Largest relative width (upper / lower - 1) of a Fourier bracket accepted while the exact
#: engine could still run (below MAX_CELLS).
FAST_MAX_WIDTH = 1e-3


class TooLargeError(OutsideConditionsError):
    """The exact evaluation would take more work than MAX_CELLS allows."""


@dataclass(frozen=True, slots=True)
class Atom:
    """One value of G and its probability (each accurate to a few ulp relative)."""

    value: float
    prob: float


@dataclass(frozen=True, slots=True)
class _Setup:
    """The atoms, relabelled (positive, its partner, pair (3, 4)) and scaled to max |g| = 1."""

    g: tuple[float, float, float, float]
    scale: float
    theta: float
    log_mgf: float  # log M(theta)
    tilted: tuple[float, float, float, float]  # p_j e^(theta g_j) / M(theta)


def mean_positive_part(n: int, atoms: Sequence[Atom]) -> Bracket:
    """A bracket on (1/n) E[(G_1 + ... + G_n)_+] for i.i.d. G with the given atoms.

    Exact (this module) where that is cheap (n <= FAST_FIRST_N and at most EXACT_CELLS window
    cells), otherwise the Fourier bracket of gsum_fast, unless that is wider than FAST_MAX_WIDTH
    (and not below the normal range) and the exact engine may still run. Exactly 0 when no atom
    is positive. Raises TooLargeError when neither applies.
    """
    atoms = _checked(atoms)
    if not atoms:
        return Bracket.exact_zero()
    setup = _setup(n, atoms) if n <= FAST_FIRST_N else None
    if setup is None or _estimated_cells(n, setup.tilted, NARROW_SIGMAS) > EXACT_CELLS:
        fast = fast_mean_positive_part(n, atoms)
        if fast is not None and (
            fast.upper <= fast.lower * (1.0 + FAST_MAX_WIDTH)
            or fast.upper < 1e-290  # below the normal range: the exact one is no better there
        ):
            return fast
        setup = setup if setup is not None else _setup(n, atoms)
        if fast is not None and _estimated_cells(n, setup.tilted, NARROW_SIGMAS) > MAX_CELLS:
            return fast  # wide, but the exact engine may not run
    assert setup is not None
    return _exact(n, setup)


def exact_mean_positive_part(n: int, atoms: Sequence[Atom]) -> Bracket:
    """The exact engine alone (module docstring); raises TooLargeError beyond MAX_CELLS."""
    atoms = _checked(atoms)
    return _exact(n, _setup(n, atoms)) if atoms else Bracket.exact_zero()


def _checked(atoms: Sequence[Atom]) -> list[Atom]:
    """The atoms of positive probability; [] when none is positive (then E[S_+] = 0)."""
    atoms = [a for a in atoms if a.prob > 0.0]
    positive = [a for a in atoms if a.value > 0.0]
    if not positive:
        return []
    if len(positive) > 1 or len(atoms) > 4:
        raise ValueError("mean_positive_part needs one positive atom and at most four atoms")
    return atoms


def _exact(n: int, setup: _Setup) -> Bracket:
    narrow, dropped = _evaluate(n, setup, NARROW_SIGMAS)
    # Widen only if the mass outside the windows (added to the upper side) is not negligible
    # next to the bracket's own numerical width.
    if (
        dropped <= 1e-3 * max(narrow.upper - narrow.lower, 1e-300)
        or dropped <= 1e-12 * narrow.lower
    ):
        return narrow
    wide, _ = _evaluate(n, setup, WIDE_SIGMAS)
    return Bracket(max(narrow.lower, wide.lower), min(narrow.upper, wide.upper))


def _setup(n: int, atoms: list[Atom]) -> _Setup:
    pos = next(a for a in atoms if a.value > 0.0)
    rest = [a for a in atoms if a is not pos]
    while len(rest) < 3:
        rest.append(Atom(0.0, 0.0))
    scale = max(abs(a.value) for a in atoms)
    best: _Setup | None = None
    best_cost = math.inf
    for partner in range(3):
        others = [rest[i] for i in range(3) if i != partner]
        others.sort(key=lambda a: a.value)  # g_3 <= g_4: beta = g_3 - g_4 <= 0
        order = [pos, rest[partner], *others]
        g = tuple(a.value / scale for a in order)
        p = tuple(a.prob for a in order)
        theta, log_mgf, tilted = _tilt(n, g, p)
        cost = _estimated_cells(n, tilted, NARROW_SIGMAS) * (1.0 if g[2] < g[3] else 0.5)
        if cost < best_cost:
            best_cost = cost
            best = _Setup(g, scale, theta, log_mgf, tilted)  # type: ignore[arg-type]
    assert best is not None
    return best


def _tilt(
    n: int, g: tuple[float, ...], p: tuple[float, ...]
) -> tuple[float, float, tuple[float, ...]]:
    """theta = max(root of sum p_j g_j e^(theta g_j), 1e-3 / sd(S)), log M(theta) and the tilted
    probabilities. Bisection on the log of the positive over the negative part (increasing)."""
    gv = np.asarray(g)
    with np.errstate(divide="ignore"):
        lp = np.log(np.asarray(p))
    mean = float(np.sum(np.asarray(p) * gv))
    var = float(np.sum(np.asarray(p) * gv * gv)) - mean * mean
    # A small floor keeps 1 / (e theta) of the dropped-mass bound finite as eps -> 0 (the root
    # -> 0); 1e-3 / sd(S) leaves the tilt negligible there and never exceeds a real root by much.
    # Capped at 1 (|g| <= 1 after scaling): at n pb ~ e^-100 the uncapped floor reached 5e18, the
    # weights e^(-theta S) underflowed and the bracket came out near 1e-280 where the truth is ~1.
    floor = min(1e-3 / math.sqrt(max(n * var, 1e-300)), 1.0)

    theta = max(tilt_root(gv, lp), floor)
    terms = lp + theta * gv
    log_mgf = float(log_sum(terms))
    tilted = tuple(float(v) for v in np.exp(terms - log_mgf))
    return theta, log_mgf, tilted


def _estimated_cells(n: int, tilted: tuple[float, ...], sigmas: float) -> float:
    q12 = tilted[0] + tilted[1]
    t_mean = n * q12
    w_t = min(n + 1.0, 2.0 * sigmas * math.sqrt(max(n * q12 * (1.0 - q12), 0.0)) + 7.0)
    q1 = tilted[0] / q12 if q12 > 0 else 1.0
    q3 = tilted[2] / (tilted[2] + tilted[3]) if tilted[2] + tilted[3] > 0 else 0.0
    w_j = min(t_mean + 1.0, 2.0 * sigmas * math.sqrt(max(t_mean * q1 * (1.0 - q1), 0.0)) + 7.0)
    r_mean = n - t_mean
    w_r = min(r_mean + 1.0, 2.0 * sigmas * math.sqrt(max(r_mean * q3 * (1.0 - q3), 0.0)) + 7.0)
    return w_t * (w_j + w_r)


@dataclass(frozen=True, slots=True)
class _Laws:
    """The tilted binomial parameters, each with its complement (no subtraction)."""

    t12: tuple[float, float]
    t1: tuple[float, float]
    t3: tuple[float, float]


def _ratio(a: float, b: float) -> tuple[float, float]:
    """(a / (a + b), b / (a + b)), (1, 0) when both are 0."""
    total = a + b
    return (a / total, b / total) if total > 0.0 else (1.0, 0.0)


def _laws(s: _Setup) -> _Laws:
    t = s.tilted
    return _Laws(
        t12=_ratio(t[0] + t[1], t[2] + t[3]),
        t1=_ratio(t[0], t[1]),
        t3=_ratio(t[2], t[3]),
    )


def _window(trials: FloatArray, q: tuple[float, float], sigmas: float) -> tuple[FloatArray, int]:
    """Lower ends of windows (one per row) of a common width around trials * q, within [0, trials]."""
    mean = trials * q[0]
    sd = np.sqrt(trials * q[0] * q[1])
    width = int(min(float(np.max(trials)) + 1.0, 2.0 * math.ceil(sigmas * float(np.max(sd))) + 7))
    lo = np.floor(mean) - width // 2
    lo = np.clip(lo, 0.0, np.maximum(trials - width + 1.0, 0.0))
    return lo, width


def _evaluate(n: int, s: _Setup, sigmas: float) -> tuple[Bracket, float]:
    """The bracket and the bound on what lies outside the windows (both before capping)."""
    laws = _laws(s)
    cells = _estimated_cells(n, s.tilted, sigmas)
    if cells > MAX_CELLS:
        raise TooLargeError(
            f"exact evaluation would need about {cells:.2g} window cells at n={n} "
            f"(limit {MAX_CELLS:.0e}, about 10 s)"
        )
    t_lo, t_width = _window(np.asarray([float(n)]), laws.t12, sigmas)
    t_all = np.arange(t_lo[0], t_lo[0] + t_width)
    t_all = t_all[t_all <= n]
    per_row = max(1, int(BLOCK_CELLS // max(cells / max(t_all.size, 1), 1.0)))
    parts = [
        _block(n, s, laws, t_all[i : i + per_row], sigmas) for i in range(0, t_all.size, per_row)
    ]
    log_value = float(log_sum(np.asarray([x[0] for x in parts])))
    log_err = float(log_sum(np.asarray([x[1] for x in parts])))
    log_out = float(log_sum(np.asarray([x[2] for x in parts] + [_t_outside(n, laws, t_all)])))
    # Everything outside the windows: M(theta)^n / (e theta) P_theta(outside), in units of S.
    log_dropped = n * s.log_mgf - 1.0 - math.log(s.theta) + log_out
    factor = s.scale / n
    value = math.exp(log_value) if log_value > -math.inf else 0.0
    err = math.exp(min(log_err, 700.0)) if log_err > -math.inf else 0.0
    dropped = math.exp(min(log_dropped, 700.0)) if log_dropped > -math.inf else 0.0
    # The final products and sums round by a few ulp: widen by 8 ulp both ways.
    # Below the normal range a double keeps less than 53 bits: pad by two of its ulps as well.
    low = (value - err) * factor * (1.0 - 8 * _ULP)
    lower = max(0.0, low - 2.0 * math.ulp(low))
    high = (value + err + dropped) * factor * (1.0 + 8 * _ULP)
    upper = high + 2.0 * math.ulp(high)
    if upper == 0.0:
        # A positive atom makes E[S_+] > 0 (every draw on it has S > 0): 0 is not an upper bound.
        upper = math.ulp(0.0)
    return Bracket(lower, upper), dropped * factor


def _t_outside(n: int, laws: _Laws, t_all: FloatArray) -> float:
    """log P_theta(T outside [t_all[0], t_all[-1]])."""
    lo, hi = float(t_all[0]), float(t_all[-1])
    below = log_binom_cdf(lo - 1.0, n, laws.t12[0], laws.t12[1]) if lo > 0 else -math.inf
    above = log_binom_sf(hi + 1.0, n, laws.t12[0], laws.t12[1]) if hi < n else -math.inf
    return float(np.logaddexp(below, above))


def _block(
    n: int, s: _Setup, laws: _Laws, t: FloatArray, sigmas: float
) -> tuple[float, float, float]:
    """(log value, log absolute error, log tilted mass outside the J and R windows) for the
    rows T in t, in units of S (before the factor scale / n).

    Under the tilted law the window's probabilities stay within a few dozen nats of each other,
    so they can be summed in linear scale; the identity P = P_theta M(theta)^n e^(-theta S)
    brings the sum back: E[S_+] = M(theta)^n E_theta[S_+ e^(-theta S)].
    """
    g1, g2, g3, g4 = s.g
    beta = g3 - g4
    log_wt = log_binom_pmf(t, n, *laws.t12)
    j_lo, j_w = _window(t, laws.t1, sigmas)
    r_trials = n - t
    r_lo, r_w = _window(r_trials, laws.t3, sigmas)
    j = j_lo[:, None] + np.arange(j_w)[None, :]
    m_j, pj, err_j = _pmf_rows(j_lo, j_w, t, laws.t1)
    m_r, pr, err_r = _pmf_rows(r_lo, r_w, r_trials, laws.t3)
    # The part of S that does not depend on R, as a sum of products (not (g1 - g2) J + g2 T:
    # g1 - g2 can round g1 away when g1 << |g2|, e.g. at large eps0).
    s_jt = g1 * j + g2 * (t[:, None] - j) + g4 * r_trials[:, None]
    magnitude = abs(g1) * j + abs(g2) * (t[:, None] - j)
    # Its rounding: a few ulp of the magnitudes added.
    s_round = 4.0 * _ULP * (magnitude + abs(g4) * r_trials[:, None])
    eta = COEF_RELERR + 4.0 * _ULP
    # |dS| <= eta sum |g_j| N_j <= eta (|g1| J + |g2| (T - J) + max(|g3|, |g4|) (n - T)).
    ds = eta * (magnitude + max(abs(g3), abs(g4)) * r_trials[:, None])
    if beta < -1e-290:
        row, row_err = _rows_with_r(r_lo, pj, pr, -beta, s_jt, s_round + ds, s.theta)
        log_scale = math.log(-beta)
    else:  # g_3 == g_4: S does not depend on R (and the R window sums to its mass); also for
        # |beta| <= 1e-290 (eps0 = 700, eps = 1e-9), where s / |beta| overflows: |beta| R goes
        # into the error instead.
        s_val = s_jt
        ds = ds + s_round - beta * r_trials[:, None]
        weight = np.exp(-s.theta * np.maximum(s_val, 0.0))
        mass = np.sum(pr, axis=1)[:, None]
        row = np.sum(pj * mass * np.maximum(s_val, 0.0) * weight, axis=1)
        row_err = np.sum(pj * mass * np.where(s_val + ds > 0.0, ds, 0.0), axis=1)
        log_scale = 0.0
    log_base = log_wt + m_j + m_r + log_scale
    rel = _relative_error(n, s, laws, t, j_w, r_w) + 2.0 * (err_j + err_r)
    with np.errstate(divide="ignore"):
        log_row = log_base + np.log(row)
        log_err = log_sum(np.concatenate([log_row + math.log(rel), log_base + np.log(row_err)]))
        outside = log_wt + np.logaddexp(
            _outside(j_lo, j_w, t, laws.t1), _outside(r_lo, r_w, r_trials, laws.t3)
        )
    shift = n * s.log_mgf  # M(theta)^n
    return float(log_sum(log_row)) + shift, float(log_err) + shift, float(log_sum(outside))


def _rows_with_r(
    r_lo: FloatArray,
    pj: FloatArray,
    pr: FloatArray,
    abs_beta: float,
    s_jt: FloatArray,
    ds: FloatArray,
    theta: float,
) -> tuple[FloatArray, FloatArray]:
    """Per row: sum_J P_theta(J) E_theta[(y_J - R)_+ e^(-lam (y_J - R))] (lam = theta |beta|,
    relative to the row maxima) and its error bound.

    With U(m) = sum_{r <= m} p(r) e^(-lam (m - r)) and V(m) = sum_{r <= m} p(r) (m - r)
    e^(-lam (m - r)), both exponentially weighted running sums of non-negative terms
    (U(m) = p(m) + e^-lam U(m-1), V(m) = e^-lam (V(m-1) + U(m-1)), run by scipy's lfilter),
    the sum over r < y, m = floor(y), d = y - m, is e^(-lam d) (d U(m) + V(m)).
    """
    from scipy.signal import lfilter

    lam = theta * abs_beta
    decay = math.exp(-lam)
    u = lfilter([1.0], [1.0, -decay], pr, axis=1)
    u_prev = np.concatenate([np.zeros((pr.shape[0], 1)), u[:, :-1]], axis=1)
    v = lfilter([1.0], [1.0, -decay], decay * u_prev, axis=1)
    y = s_jt / abs_beta
    # S's error bound ds (rounding and atoms), in units of R, plus the division's rounding.
    dy = ds / abs_beta + 2.0 * _ULP * np.abs(y)
    last = pr.shape[1] - 1
    idx = np.clip(np.floor(y) - r_lo[:, None], -1, last).astype(np.int64)
    safe = np.maximum(idx, 0)
    u_at = np.take_along_axis(u, safe, axis=1)
    v_at = np.take_along_axis(v, safe, axis=1)
    d = y - (r_lo[:, None] + safe)
    with np.errstate(over="ignore", invalid="ignore"):  # rows with idx = -1 are discarded
        f = np.where(idx >= 0, np.exp(-lam * d) * (d * u_at + v_at), 0.0)
    # h(y) = sum_{r < y} p(r) (y - r) e^(-lam (y - r)) has |h'(y')| <= e^(-lam d') ((1 + lam d')
    # U(m') + lam V(m')) at y' = m' + d'. Over [y - dy, y + dy] (dy < 1 here) that is at most
    # e^(-lam d_lo) ((1 + lam (d_lo + 2 dy)) U(m_up) + lam V(m_up)), m_up = floor(y + dy) and
    # d_lo = max(y - dy - m_up, 0): the error of the shift is at most dy times that.
    up = np.clip(np.floor(y + dy) - r_lo[:, None], -1, last).astype(np.int64)
    up_safe = np.maximum(up, 0)
    u_up = np.take_along_axis(u, up_safe, axis=1)
    v_up = np.take_along_axis(v, up_safe, axis=1)
    d_lo = np.maximum(y - dy - (r_lo[:, None] + up_safe), 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        slope = np.exp(-lam * d_lo) * ((1.0 + lam * (d_lo + 2.0 * dy)) * u_up + lam * v_up)
    slope = np.where(up >= 0, slope, 0.0)
    return np.sum(pj * f, axis=1), np.sum(pj * dy * slope, axis=1)


def _pmf_rows(
    lo: FloatArray, width: int, trials: FloatArray, q: tuple[float, float]
) -> tuple[FloatArray, FloatArray, float]:
    """Bin(trials, q) on [lo, lo + width) per row, as (log scale, values / e^scale with the
    largest value of each row 1, their relative error): one gammaln-based value per row, then
    the logs of the exact ratios pmf(j + 1) / pmf(j) = (trials - j) q / ((j + 1) (1 - q)) summed
    (log space: at extreme tilts a ratio can be 1e13). A running sum of at most ``width`` terms
    is off by at most width ulp times its largest partial sum (and each log by an ulp of it)."""
    if q[0] <= 0.0 or q[1] <= 0.0:  # a point mass at 0 or at trials
        at = np.zeros_like(trials) if q[0] <= 0.0 else trials
        cells = lo[:, None] + np.arange(width)[None, :]
        return np.zeros_like(trials), (cells == at[:, None]).astype(np.float64), 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        log_start = log_binom_pmf(lo, trials, q[0], q[1])
        steps = lo[:, None] + np.arange(width - 1)[None, :]
        log_ratio = (
            np.log(np.maximum(trials[:, None] - steps, 0.0))
            - np.log(steps + 1.0)
            + (math.log(q[0]) - math.log(q[1]))
        )
    log_rel = np.concatenate([np.zeros((lo.size, 1)), np.cumsum(log_ratio, axis=1)], axis=1)
    log_rel = np.where(np.isfinite(log_start)[:, None], log_rel, -np.inf)
    top = np.max(log_rel, axis=1)
    safe = np.where(np.isfinite(top), top, 0.0)
    finite_steps = np.where(np.isfinite(log_ratio), np.abs(log_ratio), 0.0)
    biggest = float(np.max(np.cumsum(finite_steps, axis=1))) if width > 1 else 0.0
    err = 2.0 * width * _ULP * (biggest + 1.0)
    with np.errstate(invalid="ignore"):
        values = np.exp(log_rel - safe[:, None])
    values = np.where(np.isnan(values), 0.0, values)
    return np.where(np.isfinite(log_start), log_start + safe, 0.0), values, err


def _outside(lo: FloatArray, width: int, trials: FloatArray, q: tuple[float, float]) -> FloatArray:
    """log P(Bin(trials, q) outside [lo, lo + width - 1]), per row."""
    hi = lo + width - 1.0
    with np.errstate(divide="ignore"):
        below = np.where(lo > 0, log_binom_cdf(lo - 1.0, trials, q[0], q[1]), -np.inf)
        above = np.where(hi < trials, log_binom_sf(hi + 1.0, trials, q[0], q[1]), -np.inf)
    return np.logaddexp(below, above)


def _relative_error(n: int, s: _Setup, laws: _Laws, t: FloatArray, j_w: int, r_w: int) -> float:
    """Relative error of a row's value: gammaln in the three log-pmfs; the tilted binomial
    parameters p_j e^(theta g_j) / M(theta) (a few ulp plus theta |g| ulp each, over n trials),
    which also covers log M(theta); e^(-theta S) with S off by at most eta n (|g| <= 1 after
    scaling); and the running sums (a few ulp per term)."""
    t_max = float(np.max(t))
    tilt_relerr = PARAM_RELERR + 8.0 * (1.0 + s.theta) * _ULP
    log_err = (
        log_weight_error(n, *laws.t12)
        + log_weight_error(t_max, *laws.t1)
        + log_weight_error(n - float(np.min(t)), *laws.t3)
        + 4.04 * tilt_relerr * n
        + s.theta * (COEF_RELERR + 4.0 * _ULP) * n
    )
    # Capped: beyond e^700 the error swamps every value anyway (the bracket's upper side then
    # reaches 1), and expm1 would overflow (huge theta at large eps0: n = 2, eps0 = 100).
    return math.expm1(min(log_err, 700.0)) + 16.0 * (j_w + 2 * r_w + 8) * _ULP
