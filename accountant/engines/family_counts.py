"""The exact delta of every dataset F(a) at once (k >= 3, n <= family.DP_MAX_N).

F(a): a of the m = n - 1 other users hold x0, the other m - a hold x2, nobody holds x1 (u's value
under Q) or one of the k - 3 "rest" values. The histogram's law depends on the counts
(N_x0, N_x2) and the "noise" count L = n - N_x0 - N_x2 (reports on x1 or a rest value), and given
L the x1 count N1 is Bin(L, 1 / (k - 2)) under P (docs/accounting.md, "The lower end").

*The others' law of (C0, C2), every a at once.* Every other user, of either type, reports x0 or
x2 with the same probability s = pt + pb. So the number T of others reporting x0 or x2 is
Bin(m, s) whatever a is, and given T those users are a uniformly random T-subset of the others:
J ~ Hypergeometric(m, a, T) of them are x0-users, and C0 = Bin(J, r) + Bin(T - J, 1 - r) with
r = pt / s = 1 / (1 + e^-eps0). Hence

    V_a(c0, T - c0) = Bin(m, s)(T) * sum_J H_T[a, J] K_T[J, c0],

one matrix product per T (H_T: the hypergeometric laws of every a; K_T: the laws of C0 for
every J), O(m^4 / 3) multiply-adds in all (BLAS), where the dynamic programme over users that
computed one F(a) before cost O(m^3) per a and its hockey-stick stage O(m^3) more.

*The hockey-stick sum, without the N1 axis.* At a cell (N0, N2) with L >= 1,

    P(N1) = b_L(N1) A,   Q(N1) = b_L(N1) (B + C N1 / L),

A = pt V(N0-1, N2) + pb V(N0, N2-1) + (k - 2) pb V(N0, N2), B = the same with pb for pt, and
C = (k - 2)(pt - pb) V(N0, N2) (family._count_laws before). So P - e^eps Q = b_L(N1) (D - E N1)
is positive exactly below a threshold tau = D / E in N1, and Q - e^eps P above one: each cell's
sum is D S0(t) - E S1(t) with S0, S1 the prefix sums of b_L(j) and j b_L(j) (suffix sums for
the other direction), O(1) per cell instead of a sum over N1.

*Error bound.* Everything is sums and products of non-negative numbers until the last
difference: K (T steps of a two-term stencil with r and 1 - r, each to PARAM_RELERR), H (m steps
of a two-term recursion with exact integer ratios), the product H K (T + 1 non-negative terms),
Bin(m, s)(T) and b_L from log_binom_pmf (its absolute log error numerics.log_weight_error, plus
the parameters'), the prefix sums (L + 2 terms). Every computed probability is thus within the
relative error `rho` of :func:`_relative_error`, the coefficients within COEF_RELERR, and a
cell's value moves by at most (rho + COEF_RELERR + 4 ulp) times the sum of the magnitudes of its
two parts (D's positive and negative parts times S0, E times S1), taken one N1 wider than the
threshold (a threshold misplaced by rounding moves only a term within that error of 0); a cell
whose D is computed <= 0 but within that error of 0 adds its magnitude to the error too.
Underflow (the laws reach 1e-1000 at eps0 = 8) loses at most 2^-1074 per operation; every step
is a combination with weights summing to at most 1 and the coefficients are at most k e^eps, so
:func:`_underflow_floor` bounds it absolutely. Checked against the previous dynamic programme
and 60-digit mpmath references (tests/unit/accountant/test_family_counts.py and
tests/reference/test_accountant_references.py).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from shuffledp.accountant.engines.numerics import (
    FloatArray,
    IntArray,
    log_binom_pmf,
    log_weight_error,
)
from shuffledp.accountant.engines.pairs import COEF_RELERR, PARAM_RELERR, Bracket
from shuffledp.accountant.mechanism import ShuffledKRR

_ULP = 2.0**-53
#: Rows of a evaluated together in the hockey-stick stage. Few, so that the twenty-odd
#: temporaries of a chunk stay in the CPU caches (8 a at n = 100: 0.3 MiB per array): at n = 100
#: one eps took 52 ms with 32 rows and 17 ms with 8, the same numbers (each row is summed on its
#: own; checked bit for bit on 292 cases, n from 5 to 200).
A_CHUNK = 8


class _Laws:
    """The eps-independent parts of every F(a) at one (n, k, eps0), on the cells (N0, N2) with
    N0 + N2 <= n: X = V(N0 - 1, N2), Y = pb (V(N0, N2 - 1) + (k - 2) V(N0, N2)), Z = V(N0, N2),
    each [a, cell]; L of each cell; the prefix and suffix sums of b_L; the relative error rho."""

    def __init__(self, mech: ShuffledKRR) -> None:
        n, k = mech.n, mech.k
        inside = np.add.outer(np.arange(n + 1), np.arange(n + 1)) <= n
        n0, n2 = np.nonzero(inside)
        cell = np.full((n + 1, n + 1), -1, dtype=np.int64)  # (N0, N2) -> its column
        cell[n0, n2] = np.arange(n0.size)
        self.x, self.z, self.y, rho_v = _others_laws(mech, cell)
        self.y += (k - 2) * self.z
        self.y *= mech.pb_precise
        self.size = n - n0 - n2  # L, the noise count of all n reports
        self.big_l = np.maximum(self.size, 1).astype(np.float64)
        self.top = self.size + 1.0  # L + 1: every j in [0, L]
        self.base = (self.size * (n + 2)).astype(np.float64)  # row L of the flat sums
        b, rho_b = _noise_laws(n, k)
        j = np.arange(n + 1.0)
        zero = np.zeros((n + 1, 1))
        # [L, t]: sum_{j < t} b_L(j), and with j b_L(j); the sums over j >= t; flattened.
        self.sums = tuple(
            np.ascontiguousarray(v).ravel()
            for v in (
                np.hstack([zero, np.cumsum(b, axis=1)]),
                np.hstack([zero, np.cumsum(b * j, axis=1)]),
                np.hstack([np.cumsum(b[:, ::-1], axis=1)[:, ::-1], zero]),
                np.hstack([np.cumsum((b * j)[:, ::-1], axis=1)[:, ::-1], zero]),
            )
        )
        # + the prefix sums (n + 2 terms), pb in Y and the few operations forming Y and a cell.
        self.rho = rho_v + rho_b + (n + 2.0 * PARAM_RELERR / _ULP + 16) * _ULP


def _others_laws(
    mech: ShuffledKRR, cell: IntArray
) -> tuple[FloatArray, FloatArray, FloatArray, float]:
    """V_a(c0, c2) for every a in [0, m], at the cells (N0, N2) of ``cell`` (their columns) where
    the formulas need it: V(N0 - 1, N2), V(N0, N2) and V(N0, N2 - 1), each [a, cell] (0 where the
    argument is outside); and its relative error."""
    n, k = mech.n, mech.k
    m = n - 1
    tiny = math.exp(-mech.eps0)
    r, q = 1.0 / (1.0 + tiny), tiny / (1.0 + tiny)  # in-subset user: own value, the other one
    s, s_c = mech.pt_precise + mech.pb_precise, (k - 2) * mech.pb_precise
    ts = np.arange(m + 1.0)
    log_beta = log_binom_pmf(ts, m, s, s_c)
    beta = np.exp(log_beta)
    a_col = np.arange(m + 1.0)[:, None]
    x, z, v01 = (np.zeros((m + 1, int(cell.max()) + 1)) for _ in range(3))
    hyp = np.zeros((m + 1, m + 1))  # H_T[a, J]
    hyp[:, 0] = 1.0
    laws = np.zeros((m + 1, m + 2))  # K_T[J, c0]
    laws[0, 0] = 1.0
    js = np.arange(m + 1.0)[None, :]
    for t in range(m + 1):
        w = hyp[:, : t + 1] @ laws[: t + 1, : t + 1]
        c0 = np.arange(t + 1)
        w *= beta[t]
        z[:, cell[c0, t - c0]] = w
        x[:, cell[c0 + 1, t - c0]] = w
        v01[:, cell[c0, t - c0 + 1]] = w
        if t == m:
            break
        # One more subset member: an x2-user for J <= t, an x0-user for the new row J = t + 1.
        top = laws[t, : t + 1].copy()
        laws[: t + 1, 1 : t + 2] = laws[: t + 1, : t + 1] * q + laws[: t + 1, 1 : t + 2] * r
        laws[: t + 1, 0] *= r
        laws[t + 1, : t + 2] = 0.0
        laws[t + 1, : t + 1] += top * q
        laws[t + 1, 1 : t + 2] += top * r
        stay = np.clip(m - a_col - t + js[:, : t + 2], 0.0, None) / (m - t)
        move = np.clip(a_col - js[:, : t + 2] + 1.0, 0.0, None) / (m - t)
        shifted = np.hstack([np.zeros((m + 1, 1)), hyp[:, : t + 1]])
        hyp[:, : t + 2] = np.hstack([hyp[:, : t + 1], np.zeros((m + 1, 1))]) * stay
        hyp[:, : t + 2] += shifted * move
    log_err = log_weight_error(m, s, s_c) + m * 2.0 * PARAM_RELERR
    # K: m steps of two products, a sum and r, q (PARAM_RELERR); H: m steps of two products, two
    # quotients and a sum; H K: m + 1 terms; beta: its log error (exp adds an ulp).
    rho = m * (2.0 * PARAM_RELERR + 3.0 * _ULP) + m * 5.0 * _ULP + (m + 2) * _ULP
    return x, z, v01, rho + math.expm1(log_err) + 2.0 * _ULP


def _noise_laws(n: int, k: int) -> tuple[FloatArray, float]:
    """b[L, j] = P[Bin(L, 1 / (k - 2)) = j] for L, j in [0, n] (k = 3: j = L surely), and its
    relative error."""
    if k == 3:
        return np.eye(n + 1), 0.0
    sizes = np.arange(n + 1.0)
    b = np.exp(log_binom_pmf(sizes[None, :], sizes[:, None], 1.0 / (k - 2), (k - 3) / (k - 2)))
    log_err = log_weight_error(n, 1.0 / (k - 2), (k - 3) / (k - 2)) + n * 4.0 * _ULP
    return b, math.expm1(log_err) + 2.0 * _ULP


@functools.lru_cache(maxsize=1)
def _laws(n: int, k: int, eps0: float) -> _Laws:
    return _Laws(ShuffledKRR(n=n, k=k, eps0=eps0))


def _underflow_floor(mech: ShuffledKRR, eps: float) -> float:
    """The absolute error underflow can add to a delta: at most 2^-1074 per operation (about
    8 (n + 1)^4 of them), carried with weights summing to at most 1, times k e^eps."""
    return 8.0 * (mech.n + 1.0) ** 4 * mech.k * math.exp(eps) * 2.0**-1074


@functools.lru_cache(maxsize=64)
def _all_family(n: int, k: int, eps0: float, eps: float) -> tuple[Bracket, ...]:
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    laws = _laws(n, k, eps0)
    pt = mech.pt_precise
    ee = math.exp(eps)
    coefs = (
        -pt * math.expm1(eps - eps0),  # pt - e^eps pb = pt (1 - e^(eps - eps0)) > 0
        math.expm1(eps),  # e^eps - 1 >= 0
        pt * math.expm1(eps) + mech.pt_minus_pb,  # e^eps pt - pb, without cancellation
        ee,
        (k - 2) * mech.pt_minus_pb,
    )
    relerr = laws.rho + COEF_RELERR + 4.0 * _ULP
    floor = _underflow_floor(mech, eps)
    out: list[Bracket] = []
    for start in range(0, n, A_CHUNK):
        rows = slice(start, min(n, start + A_CHUNK))
        for (f, f_err), (r, r_err) in zip(*_chunk(laws, rows, coefs, relerr), strict=True):
            lower = max(f - f_err, r - r_err) - floor
            upper = max(f + f_err, r + r_err) + floor
            out.append(Bracket(max(0.0, lower), min(1.0, upper)))
    return tuple(out)


def _chunk(
    laws: _Laws, rows: slice, coefs: tuple[float, ...], relerr: float
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """H(P||Q) and H(Q||P) of F(a) for the a of ``rows``, each with its error bound.

    Per cell and N1 = j the forward term is b_L(j) (D - E j) and the reverse one
    b_L(j) (E' j - D'), each computed within relerr b_L(j) (|D| parts + E j). The sums run over
    the j where the computed term is positive; the error sums that bound over every j where it
    is above minus twice the bound (a threshold a little wider, from the same linear inequality,
    so that rounding in the threshold itself cannot leave such a j out)."""
    c1, c2, c3, ee, c_noise = coefs
    x, y = laws.x[rows], laws.y[rows]
    slope = c_noise * laws.z[rows]  # C: E' L of the reverse direction; e^eps C the forward E L
    d_mag, d = c1 * x + c2 * y, c1 * x - c2 * y
    d_rev = c3 * x + c2 * y
    e_fwd = (ee / laws.big_l) * slope  # E
    e_rev = slope / laws.big_l  # E'
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        t = _count_below(d / e_fwd, laws)
        t_wide = _count_below((d + 2.0 * relerr * d_mag) / (e_fwd * (1.0 - 2.0 * relerr)), laws)
        t_rev = _count_below(d_rev / e_rev, laws, strict=False)
        wide = d_rev * (1.0 - 2.0 * relerr) / (e_rev * (1.0 + 2.0 * relerr))
        t_rev_wide = _count_below(wide, laws, strict=False)
    s0, s1, u0, u1 = laws.sums
    fwd = d * s0.take(t) - e_fwd * s1.take(t)
    fwd_mag = d_mag * s0.take(t_wide) + e_fwd * s1.take(t_wide)
    rev = e_rev * u1.take(t_rev) - d_rev * u0.take(t_rev)
    rev_mag = d_rev * u0.take(t_rev_wide) + e_rev * u1.take(t_rev_wide)
    cells = laws.size.size + 1
    out = []
    for terms, mag in ((fwd, fwd_mag), (rev, rev_mag)):
        total = np.sum(np.maximum(terms, 0.0), axis=1)
        err = relerr * np.sum(mag, axis=1) + _ULP * cells * total
        out.append([(float(v), float(e)) for v, e in zip(total, err, strict=True)])
    return out[0], out[1]


def _count_below(tau: FloatArray, laws: _Laws, strict: bool = True) -> IntArray:
    """Flat indices into laws.sums of: (strict) the number of j in [0, L] with j < tau, i.e.
    where a forward term is positive (tau = D / E; nan, from 0 / 0, and D <= 0 count none); or
    the first j > tau, where the reverse terms start (none: L + 1)."""
    if strict:
        count = np.where(tau > 0.0, np.ceil(np.minimum(tau, laws.top)), 0.0)
    else:
        count = np.where(tau >= 0.0, np.floor(np.minimum(tau, laws.top)) + 1.0, 0.0)
        count = np.where(np.isnan(tau), laws.top, count)
    out: IntArray = (np.minimum(count, laws.top) + laws.base).astype(np.int64)
    return out


def family_all(mech: ShuffledKRR, eps: float) -> tuple[Bracket, ...]:
    """A bracket on max(H(P||Q), H(Q||P)) of F(a) for every a in [0, n - 1] (k >= 3,
    0 <= eps < eps0), computed together (cached for the last 64 eps; the laws for the last
    (n, k, eps0))."""
    return _all_family(mech.n, mech.k, mech.eps0, float(eps))
