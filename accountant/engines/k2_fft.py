"""k = 2: F(a) by one FFT convolution, with a rigorous bracket about 1e-7 wide, for the block
bounds of the k = 2 certificate far from the ends.

Same pair as accountant/engines/k2_exact.py: B = X * Y, X = Bin(a, pt), Y = Bin(N, pb), N = n - 1 - a,
P0 = B + Bern(pt), P1 = B + Bern(pb), and the two sums of [alpha B(s-1) + beta B(s)]_+ and
[alpha B(s) + beta B(s-1)]_+. k2_exact convolves X and Y directly (a few times 1e7 multiply-adds
at a = 3e5, n = 1e6: 50-150 ms). Here the convolution is one real FFT of a few 1e4 points
(about 1-3 ms), whose rounding is an absolute error on every B(s), bounded below; X and Y are
the same exact-ratio walks in long double as in k2_exact (relative error gamma(4d)), converted
to float64.

Why it is enough here and not everywhere: the FFT's error is absolute, about 1e-16 of the
largest B times a few norms, so it brackets F(a) to about 1e-8 relative where delta is
1e-6 at n = 1e6 (1e-7 with the padding below); the certificate needs that precision only for
blocks whose bound is 1e-5 or more below the maximum, which is every block far from the ends.
Near the maximum k2_exact decides.

The FFT error bound (docs/accounting.md, "k = 2 by FFT"): for a radix-2 FFT of length L = 2^t
with twiddles off by at most mu, the computed transform y~ of x has ||y~ - Fx||_2 <= zeta ||Fx||_2,
zeta = t eta / (1 - t eta), eta = mu + gamma_4 (sqrt 2 + mu) (Higham, Accuracy and Stability of
Numerical Algorithms, 2nd ed., Thm 24.2). Carrying it through the two forward transforms, the
pointwise product and the inverse transform gives :func:`fft_error` (the max error of any output
is at most the 2-norm of the error vector). numpy's pocketfft is mixed radix 4 / 2 with
accurately computed twiddles, and rfft adds one post-processing pass; FFT_PAD covers both with a
factor 100 (measured errors are 1e-3 to 1e-2 of the unpadded bound: tests/unit/accountant/
test_k2_fft.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from shuffledp.accountant.engines import k2_exact
from shuffledp.accountant.engines.k2_exact import (
    EXTENDED,
    WorkMeter,
    _Coefs,
    _gamma,
    _guesses,
    _walk,
)
from shuffledp.accountant.engines.pairs import Bracket
from shuffledp.accountant.mechanism import ShuffledKRR

FloatArray = npt.NDArray[np.float64]

#: Unit roundoff of float64.
_U64 = 2.0**-53
#: Padding of the radix-2 FFT bound for pocketfft's mixed radix and rfft's extra pass.
FFT_PAD = 10.0
#: X is kept where X(j) / X(mode) >= e^-X_DEPTH; the rest enters as a bounded absolute error.
X_DEPTH = 60.0
#: What one evaluation costs besides the transform (the 40-digit anchors, the walks), in
#: WorkMeter's units: 1-3 ms each, counted like that much of k2_exact's convolution.
FFT_CALL_WORK = 300_000
#: The window is widened until the Chernoff bound on the terms past it is below this fraction.
REST_RTOL = 1e-10


def fft_error(x: FloatArray, y: FloatArray, length: int) -> float:
    """A bound on max_s |computed - exact| of the convolution x * y by real FFTs of length L =
    ``length`` (a power of two) and one inverse, padded by FFT_PAD (module docstring).

    With zeta the relative 2-norm error of one transform, ||Fx||_inf <= ||x||_1 and ||Fx||_2 =
    sqrt(L) ||x||_2: each computed transform is off by at most zeta sqrt(L) ||.||_2; the
    pointwise product of the computed transforms is then off by at most sqrt(L) P, P = zeta
    ||x||_2 ||y||_1 + (||x||_1 + zeta sqrt(L) ||x||_2) (zeta + sqrt(2) gamma_2 (1 + zeta))
    ||y||_2 (a complex product rounds by sqrt(2) gamma_2); the exact inverse maps that to at
    most P in 2-norm (it divides by sqrt(L) twice over: 1 / L, exact for L = 2^t, times a
    unitary sqrt(L)), and its own rounding adds zeta (||x * y||_2 + P), ||x * y||_2 <= ||x||_1
    ||y||_2."""
    t = max(1, int(math.log2(length)))
    mu = 2.0 * _U64
    eta = mu + _gamma(4, _U64) * (math.sqrt(2.0) + mu)
    zeta = t * eta / (1.0 - t * eta)
    # (sums, not np.linalg.norm: a BLAS call wakes OpenBLAS threads that then spin, doubling
    # the CPU time of the whole certificate for nothing)
    x1, x2 = float(np.sum(x)) * (1 + 1e-12), math.sqrt(float(np.sum(x * x))) * (1 + 1e-12)
    y1, y2 = float(np.sum(y)) * (1 + 1e-12), math.sqrt(float(np.sum(y * y))) * (1 + 1e-12)
    if y2 * x1 > x2 * y1:  # the bound is symmetric in the roles; take the smaller
        x1, x2, y1, y2 = y1, y2, x1, x2
    root = math.sqrt(length)
    product = (
        zeta * x2 * y1
        + (x1 + zeta * root * x2) * (zeta + math.sqrt(2.0) * _gamma(2, _U64) * (1.0 + zeta)) * y2
    )
    return FFT_PAD * (product + zeta * (x1 * y2 + product))


def fft_convolve(x: FloatArray, y: FloatArray) -> tuple[FloatArray, float]:
    """x * y by real FFTs of a power-of-two length, and :func:`fft_error`'s bound on it."""
    size = x.size + y.size - 1
    length = 1 << max(1, (size - 1).bit_length())
    z = np.fft.irfft(np.fft.rfft(x, length) * np.fft.rfft(y, length), length)[:size]
    return z, fft_error(x, y, length)


def log_chernoff_tail(a: int, big_n: int, eps0: float, s: float, *, upper: bool) -> float:
    """log of a bound on P(B >= s) (upper) or P(B <= s), B = Bin(a, pt) + Bin(N, pb), by
    Chernoff: P(B >= s) <= E[e^(l B)] e^(-l s) for every l >= 0 (and mirrored), at an l near
    the optimum found by bisection on the derivative (any l is valid). 0 (the trivial bound)
    where s is on the mean's side. Padded by 1e-9 of |each part| for float64 rounding."""
    pt = 1.0 / (1.0 + math.exp(-eps0))
    pb = 1.0 - pt
    sign = 1.0 if upper else -1.0
    if sign * (s - (a * pt + big_n * pb)) <= 0.0:
        return 0.0

    if (s > a + big_n) if upper else (s < 0):
        return -math.inf
    log_pt, log_pb = math.log(pt), math.log(pb)

    def sigmoid(v: float) -> float:
        return 1.0 / (1.0 + math.exp(-v)) if v >= 0 else math.exp(v) / (1.0 + math.exp(v))

    def log_mgf(lam: float) -> tuple[float, float]:  # log E[e^(sign lam B)], the tilted mean
        z = sign * lam
        lx = float(np.logaddexp(log_pb, log_pt + z))
        ly = float(np.logaddexp(log_pt, log_pb + z))
        return a * lx + big_n * ly, a * sigmoid(z + eps0) + big_n * sigmoid(z - eps0)

    low, high = 0.0, 1.0
    while sign * log_mgf(high)[1] < sign * s and high < 1e4:
        high *= 2.0
    for _ in range(60):
        mid = 0.5 * (low + high)
        if sign * log_mgf(mid)[1] < sign * s:
            low = mid
        else:
            high = mid
    value, _ = log_mgf(low)
    exponent = value - sign * low * s
    return min(0.0, exponent + 1e-9 * (abs(value) + abs(low * s)) + 1e-12)


@dataclass(frozen=True, slots=True)
class _Laws:
    """X / X(j0) on [jl, jh] and Y / Y(m0) on [m_lo, m_hi] (float64, each at most about 1) with
    the relative error of their values (walks in long double, then the conversion), the
    absolute amount (same scale) the dropped X values may add to any B(s), and exp(log_scale)
    = X(j0) Y(m0) as 25 digits."""

    x: FloatArray
    jl: int
    y: FloatArray
    m_lo: int
    rel_err: float
    dropped: float
    scale_digits: str
    log_scale: float


@dataclass(frozen=True, slots=True)
class _XNear:
    """X / X(j0) (float64) on [jl, jl + len - 1] near its mode j0, the walk's relative error,
    the dropped mass on X(j0)'s scale, and (log pt, log pb) in 40 digits. It does not depend
    on the window of s, so one serves every widening."""

    x: FloatArray
    j0: int
    jl: int
    err: float
    dropped: float
    logs: tuple[Any, Any]


def _x_near(a: int, c: _Coefs, depth: float) -> _XNear | None:
    """X walked only within about sqrt(2 depth variance) of its mode (values below e^-depth
    cut; k2_exact.x_cut_mass bounds the rest); None if a cut edge is not yet in a tail."""
    j0, logs = k2_exact.x_mode(a, c.eps0)
    var = a / (2.0 + 2.0 * math.cosh(c.eps0))
    reach = math.ceil(1.3 * math.sqrt(2.0 * depth * var)) + 16
    lo, hi = max(j0 - reach, 0), min(j0 + reach, a)
    x = _walk(a, lo, hi, j0, c.up)
    err = _gamma(4 * max(j0 - lo, hi - j0))
    dropped = k2_exact.x_cut_mass(a, (lo, hi), (x[0], x[-1]), c, err)
    if dropped is None:
        return None
    return _XNear(x.astype(np.float64), j0, lo, err + 2.0 * _U64, float(dropped), logs)


def _laws(n: int, a: int, c: _Coefs, near: _XNear, window: tuple[int, int]) -> _Laws | None:
    """X (``near``) and Y for B on [lo, hi] (module docstring), Y anchored at its largest value
    there; None where a value nears float64's underflow (the caller falls back to k2_exact)."""
    import mpmath

    lo, hi = window
    big_n = n - 1 - a
    x, jl = near.x, near.jl
    jh = jl + x.size - 1
    m_lo, m_hi = max(lo - jh, 0), min(hi - jl, big_n)
    if m_lo > m_hi:
        return None
    m0, peaks = k2_exact.y_anchor(a, big_n, c.eps0, (m_lo, m_hi), (lo, hi))
    scale_digits, y_max, _ = k2_exact._anchors(a, near.j0, big_n, m0, peaks, near.logs)
    y = _walk(big_n, m_lo, m_hi, m0, c.down)
    if min(float(x.min()), float(y.min())) < 1e-250:
        return None
    y_err = _gamma(4 * max(m0 - m_lo, m_hi - m0)) + 2.0 * _U64
    with mpmath.workdps(30):
        log_scale = float(mpmath.log(mpmath.mpf(scale_digits)))
    dropped = near.dropped * float(y_max) * (1.0 + 1e-12)
    return _Laws(
        x, jl, y.astype(np.float64), m_lo, near.err + y_err, dropped, scale_digits, log_scale
    )


@dataclass(frozen=True, slots=True)
class _Side:
    """One direction's scaled sum on a window: the positive computed terms' sum, its error
    bound, a bound on the terms past the window, and whether the inner edge is past the region
    of positive terms (provably: the computed term plus its bound is <= 0 there)."""

    value: float
    err: float
    rest: float
    edge_ok: bool


def _side(
    laws: _Laws, b: FloatArray, fft_err: float, c: _Coefs, n: int, a: int, lo: int, *, forward: bool
) -> _Side:
    """One direction on B's computed values b on [lo, lo + len - 1] (k2_exact._direction's
    argument with absolute errors: a term alpha B(s-1) + beta B(s) moves by at most rel (alpha
    (b(s-1) + E) + |beta| (b(s) + E)) + (alpha + |beta|) E, E = the FFT's bound plus what the
    dropped X values may add; [.]_+ is 1-Lipschitz)."""
    alpha, beta = float(c.alpha), float(c.beta)
    prev, cur = b[:-1], b[1:]
    main, other = (prev, cur) if forward else (cur, prev)
    t = alpha * main + beta * other
    e_abs = laws.dropped
    rel = laws.rel_err + _gamma(3, _U64) + 2.0 * _U64
    err = (rel * (alpha * (main + fft_err + e_abs) - beta * (other + fft_err + e_abs))) * (1 + 1e-9)
    err += (alpha - beta) * e_abs * (1 + 1e-9)
    # Log-concavity: where a term is provably <= 0 (t + err + the FFT's share <= 0), so is every
    # term on the far side of it, so the region of positive terms starts past the last such
    # term (forward; before the first one backward). The terms beyond are not summed.
    sure_neg = np.nonzero(t + err + (alpha - beta) * fft_err * (1 + 1e-9) <= 0)[0]
    hi = lo + b.size - 1
    big_n = n - 1 - a
    if forward:
        edge_ok = lo <= 0 or bool(sure_neg.size and sure_neg[-1] < t.size - 1)
        keep = slice(int(sure_neg[-1]) + 1 if sure_neg.size else 0, t.size)
        log_tail = log_chernoff_tail(a, big_n, c.eps0, hi, upper=True)  # alpha P(B >= hi)
    else:
        edge_ok = hi >= n - 1 or bool(sure_neg.size and sure_neg[0] > 0)
        keep = slice(0, int(sure_neg[0]) if sure_neg.size else t.size)
        log_tail = log_chernoff_tail(a, big_n, c.eps0, lo, upper=False)  # alpha P(B <= lo)
    t, err = t[keep], err[keep]
    value = float(np.sum(t[t > 0]))
    maybe = (t + err + (alpha - beta) * fft_err) > 0
    # The FFT's part by Cauchy-Schwarz: over K terms, sum |error of b| <= sqrt(K) ||error||_2
    # (fft_err bounds the 2-norm; each term has two values), far below K fft_err.
    fft_part = (alpha - beta) * 2.0 * math.sqrt(float(np.count_nonzero(maybe))) * fft_err
    total_err = float(np.sum(err[maybe])) + fft_part + _gamma(t.size + 1, _U64) * value
    rest = alpha * math.exp(min(log_tail - laws.log_scale, 700.0)) * (1.0 + 1e-9)
    return _Side(value, total_err * (1.0 + 1e-9), rest, edge_ok)


def _to_bracket(side: _Side, laws: _Laws) -> Bracket:
    """The scaled bracket times exp(log_scale) (25 digits), rounded outwards to floats."""
    import mpmath

    with mpmath.workdps(30):
        scale = mpmath.mpf(laws.scale_digits)
        lower = float(mpmath.mpf(max(side.value - side.err, 0.0)) * scale)
        upper = float(mpmath.mpf(side.value + side.err + side.rest) * scale)
    return Bracket(
        max(0.0, math.nextafter(lower * (1.0 - 1e-15), 0.0)),
        min(1.0, math.nextafter(upper * (1.0 + 1e-15), math.inf)),
    )


def k2_fft_value(
    mech: ShuffledKRR, a: int, eps: float, meter: WorkMeter | None = None
) -> Bracket | None:
    """A bracket on F(a) = max(H(P0||P1), H(P1||P0)) for k = 2 by one FFT convolution per
    window (module docstring), about 1e-7 wide where delta is 1e-6 at n = 1e6; None where it
    does not apply (no extended long double for the walks, values near float64's underflow,
    a window that will not close in 6 widenings): the caller then uses k2_exact."""
    n = mech.n
    if not EXTENDED or mech.k != 2 or not 0 <= a <= n - 1 or eps >= mech.eps0:
        return None
    a = min(a, n - 1 - a)
    c = _Coefs.of(mech.eps0, eps)
    s0, s1, length = _guesses(n, a, c, mech.eps0)
    margin = 16 + length // 20
    near = _x_near(a, c, X_DEPTH)
    if near is None:
        return None
    for _ in range(6):
        lo = max(min(s0 - margin, s1 - length), 0)
        hi = min(max(s0 + length, s1 + margin), n - 1)
        laws = _laws(n, a, c, near, (lo, hi))
        if laws is None:
            return None
        z, fft_err = fft_convolve(laws.x, laws.y)
        if meter is not None:  # (WorkMeter's units: about a long double multiply-add each)
            meter.work += FFT_CALL_WORK + z.size * max(1, z.size.bit_length()) // 8
        first = laws.m_lo + laws.jl  # z[k] <-> s = first + k
        b = np.zeros(hi - lo + 1)
        s_lo, s_hi = max(lo, first), min(hi, first + z.size - 1)
        b[s_lo - lo : s_hi - lo + 1] = z[s_lo - first : s_hi - first + 1]
        sides = [_side(laws, b, fft_err, c, n, a, lo, forward=f) for f in (True, False)]
        if all(s.edge_ok and s.rest <= REST_RTOL * s.value for s in sides):
            found = [_to_bracket(s, laws) for s in sides]
            return Bracket(max(f.lower for f in found), max(f.upper for f in found))
        margin, length = 2 * margin, 2 * length
    return None
