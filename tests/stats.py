"""Statistical helpers shared by the tests: bounds with a stated false-alarm rate."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from shuffledp.clients.krr import krr_probabilities

__all__ = ["tv_bound"]


def tv_bound(counts: npt.NDArray[np.int64], eps0: float, alpha: float) -> float:
    """A bound on TV(shuffle+INV, pi) that the estimate exceeds with probability <= alpha.

    Setting: n clients with fixed values (empirical distribution pi = counts / n), independent
    k-RR reports y_i, all n received. h_j = sum_i 1[y_i = j] is a sum of n independent Bernoulli
    with mean n q_j, q_j = pb + (pt - pb) pi_j, and total variance sum_i p_ij (1 - p_ij) <=
    n q_j (1 - q_j) =: n v_j (Jensen: p(1 - p) is concave).

    1. Bernstein: P(|h_j / n - q_j| >= t) <= 2 exp(-n t^2 / (2 (v_j + t / 3))). With
       L = ln(2 k / alpha), t_j = L / (3 n) + sqrt((L / (3 n))^2 + 2 L v_j / n) solves
       n t^2 = 2 L (v_j + t / 3), so each bin fails w.p. <= alpha / k; union bound over the k
       bins: all |h_j / n - q_j| <= t_j except w.p. <= alpha.
    2. Matrix inversion is exact on the error: pi_hat_j - pi_j = (h_j / n - q_j) / (pt - pb), so
       ||pi_hat - pi||_2 <= sqrt(sum_j t_j^2) / (pt - pb).
    3. Euclidean projection onto the simplex is 1-Lipschitz in L2 and pi is in the simplex, so
       the projected estimate is no farther from pi in L2.
    4. TV = ||.||_1 / 2 <= sqrt(k) ||.||_2 / 2 (Cauchy-Schwarz).
    """
    n = int(counts.sum())
    k = counts.size
    pt, pb = krr_probabilities(k, eps0)
    q = pb + (pt - pb) * counts / n
    variance = q * (1.0 - q)
    log_term = math.log(2 * k / alpha)
    linear = log_term / (3 * n)
    t = linear + np.sqrt(linear**2 + 2 * log_term * variance / n)
    return math.sqrt(k) / 2 * math.sqrt(float((t**2).sum())) / (pt - pb)
