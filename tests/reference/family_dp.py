"""F(a) for one a by dynamic programming over the users in log space: the production code before
accountant/engines/family_counts.py computed every a at once, kept as an independent float reference for it.

The others' 2-d law of (x0, x2) counts by a DP over users (logaddexp), the full law of
(N_x0, N_x1, N_x2) on an (n + 1)^3 grid, and the hockey-stick sums with a rigorous rounding bound
(docs/accounting.md, "The lower end"). O(n^3) per a: 0.3 s at n = 100.
"""

from __future__ import annotations

import math

import numpy as np

from shuffledp.accountant import ShuffledKRR
from shuffledp.accountant.engines.numerics import FloatArray, log_binom_pmf, log_sum
from shuffledp.accountant.engines.pairs import Bracket


def dp_delta(mech: ShuffledKRR, a: int, eps: float) -> Bracket:
    """Exact both-direction delta by the law of (N_x0, N_x1, N_x2) (log space) for small n."""
    log_p, log_q = count_laws(mech, a)
    d1, e1 = hockey_with_error(log_p, log_q, eps)
    d2, e2 = hockey_with_error(log_q, log_p, eps)
    value, err = max(d1, d2), max(e1, e2)
    return Bracket(max(0.0, value - err), min(1.0, value + err))


def count_laws(mech: ShuffledKRR, a: int) -> tuple[FloatArray, FloatArray]:
    """log P and log Q of the counts (N_x0, N_x1, N_x2) of all n reports, indexed [N0, N2, N1].

    Nobody else holds x1, so every other user reports x1 or one of the k - 3 rest values (the
    "noise" values) w.p. (k - 2) pb, uniformly among them: given the others' counts V(x0, x2)
    (a 2-d law, by dynamic programming over the others in log space), the noise count splits
    binomially. With L = n - N0 - N2 and b_L = Bin(L, 1/(k - 2)):
        P = b_L(N1) (pt V(N0-1, N2) + pb V(N0, N2-1) + (k - 2) pb V(N0, N2)),
        Q = b_L(N1) (pb V(N0-1, N2) + pb V(N0, N2-1) + (k - 2) V(N0, N2) (pb + (pt - pb) N1 / L)),
    u's report being x0, x2, or a noise value (x1 w.p. pt under Q, pb under P).
    """
    n, k = mech.n, mech.k
    lt, lb = math.log(mech.pt_precise), math.log(mech.pb_precise)
    l_noise = math.log((k - 2) * mech.pb_precise)
    v = np.full((n + 1, n + 1), -np.inf)  # [x0, x2] of the others
    v[0, 0] = 0.0
    for holder in [0] * a + [2] * (n - 1 - a):
        to_x0, to_x2 = (lt, lb) if holder == 0 else (lb, lt)
        nxt = v + l_noise
        nxt[1:, :] = np.logaddexp(nxt[1:, :], v[:-1, :] + to_x0)
        nxt[:, 1:] = np.logaddexp(nxt[:, 1:], v[:, :-1] + to_x2)
        v = nxt
    v10 = np.full_like(v, -np.inf)
    v10[1:, :] = v[:-1, :]
    v01 = np.full_like(v, -np.inf)
    v01[:, 1:] = v[:, :-1]
    n0, n2 = np.meshgrid(np.arange(n + 1.0), np.arange(n + 1.0), indexing="ij")
    size = n - n0 - n2  # L, the noise count of all n reports
    n1 = np.arange(n + 1.0)[None, None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        log_b = log_binom_pmf(
            n1, np.maximum(size, 0.0)[:, :, None], 1.0 / (k - 2), (k - 3) / (k - 2)
        )
        common = np.logaddexp(v01 + lb, v + math.log(k - 2) + lb)  # x2, and noise at rate pb
        log_a = np.logaddexp(v10 + lt, common)
        # (k - 2) V (pt - pb) N1 / L, the part of Q's noise term above pb (0 where L = 0).
        extra = (
            v[:, :, None]
            + math.log(k - 2)
            + math.log(mech.pt_minus_pb)
            + np.log(n1)
            - np.log(np.maximum(size, 1.0))[:, :, None]
        )
        log_bq = np.logaddexp(np.logaddexp(v10 + lb, common)[:, :, None], extra)
    inside = (size >= 0)[:, :, None] & (n1 <= size[:, :, None])
    log_p = np.where(inside, log_b + log_a[:, :, None], -np.inf)
    log_q = np.where(inside, log_b + log_bq, -np.inf)
    return log_p, log_q


def hockey_with_error(log_p: FloatArray, log_q: FloatArray, eps: float) -> tuple[float, float]:
    """(H_eps(P||Q), a bound on its error). Each log-probability is off by at most
    d = 4 ulp n (|log p| + 4): the DP takes n steps of a few logaddexp each, each rounding by an
    ulp of its result, whose magnitude only grows along the way (log-probabilities are added).
    A term P (1 - e^(eps - L)) then moves by at most P (2 d + 2 d) where L > eps - 2 d."""
    lp, lq = log_p.ravel(), log_q.ravel()
    n = log_p.shape[0]
    d = 4.0 * 2.0**-52 * n * (np.abs(np.where(np.isfinite(lp), lp, 0.0)) + 4.0)
    with np.errstate(invalid="ignore"):
        loss = lp - lq
    near = np.isfinite(lp) & (loss > eps - 2.0 * d)
    terms = np.isfinite(lp) & (loss > eps)
    excess = np.where(terms, loss - eps, 1.0)
    with np.errstate(divide="ignore"):
        log_terms = lp + np.where(np.isinf(excess), 0.0, np.log(-np.expm1(-excess)))
    value = float(np.exp(log_sum(log_terms[terms]))) if np.any(terms) else 0.0
    err = float(np.exp(log_sum(lp[near] + np.log(4.0 * d[near])))) if np.any(near) else 0.0
    return value, err
