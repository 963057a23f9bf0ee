"""The printed Theorem IV.1 of Biswas, Jung, Palamidessi (``biswas-literal``), evaluated as printed.

S. Biswas, K. Jung, C. Palamidessi, "Tight Differential Privacy Guarantees for the Shuffle Model
with k-Randomized Response", FPS 2023 (arXiv 2205.08858), Section IV.C. With E = e^eps0,
m = n_x0 (others holding x0, 0 <= m <= n - 1, n counting the user u) and C(a, b) the binomial
coefficient (0 outside 0 <= b <= a):

* eq. 3: kappa1 = E (E + k - 2) / (k - 1);  eq. 4: kappa2 = (k - 1) / (E + k - 2);
* eq. 5: kappa3(s) = (k - 1)^m (E + k - 2)^(n - m - s) / (E + k - 1)^n;
* Definition IV.2: mu(s, r) = C(m, r) C(n - m, s - r) kappa1^r and
  tau(s, r) = kappa2 (n - m) + (E - kappa2)(s - r);
* Theorem IV.1 (restated as eq. 15 in the appendix): the privacy loss
  v_s = ln(kappa2 + (E - kappa2)/(n - m) * N(s) / D(s)) with
  N(s) = sum_r (s - r) C(m, r) C(n - 1 - m, s - 1 - r) kappa1^r and
  D(s) = sum_r C(m, r) C(n - m, s - r) kappa1^r;
* eq. 6: delta_hat(eps) = sum_{s=0..n} 1{v_s > eps} (1 - e^(eps - v_s))
  kappa3(s) / (n - m) * sum_{r=0..s} mu(s, r) tau(s, r).

This reproduces the paper's Table IV and the n = 100 column of its Table II (tests/
test_biswas_literal.py). It is NOT a valid guarantee: v_s is not the log-ratio of the two
distributions of the paper's own model (eqs. 12-13): the true numerator is
sum_r C(m, r) C(n - 1 - m, s - 1 - r) kappa1^r, and N(s) / (n - m) multiplies each of its terms by
an extra (s - r) / (n - m) <= 1. The values come out many orders of magnitude below the exact
delta of that model (``single-bin``; without the extra factor the same expression gives it). It
is kept only to reproduce the published tables, labelled "published formula, not a valid
guarantee".
"""

from __future__ import annotations

import math
from typing import Any

from shuffledp.accountant.mechanism import InvalidParameterError, require_finite

#: Largest n evaluated: the double sum costs O(n^2) high-precision operations (about 1 s at
#: n = 1000, the largest n of the paper's tables; 25x that at this limit).
MAX_N = 5000

#: Working precision in decimal digits. Every sum here has positive terms only (kappa1..3 > 0 and
#: E > kappa2), so each sum carries a relative error of at most (number of terms) * 10^-DPS
#: <= 1e-52; the one cancelling step is 1 - e^(eps - v_s), whose relative error is about
#: 10^-DPS * max(1, |v_s|) / (v_s - eps). The result, a sum of non-negative terms, is therefore
#: correct to double precision (relative 1e-16) unless some v_s lies within 1e-40 of eps, and
#: such a term weighs at most 1e-40 of its probability mass. Doubles (16 digits) would not do:
#: the sums span hundreds of orders of magnitude and the results go down to 1e-300.
DPS = 60


def biswas_literal_delta(n: int, k: int, eps0: float, nx0: int, eps: float) -> float:
    """delta_hat(eps) of eq. 6 with v_s as printed in Theorem IV.1 (see the module docstring),
    in DPS-digit arithmetic, as a float. NOT a valid guarantee (it is not log(P0/P1)).

    Raises InvalidParameterError (naming the command-line flag) for n outside [2, MAX_N],
    k < 2, eps0 <= 0, nx0 outside [0, n - 1] or eps < 0.
    """
    _validate(n, k, eps0, nx0, eps)
    import mpmath  # lazy: only this bound needs it

    ctx = mpmath.mp.clone()
    ctx.dps = DPS
    return float(_delta_hat(ctx, n, k, eps0, nx0, eps))


def biswas_literal_delta_text(
    n: int, k: int, eps0: float, nx0: int, eps: float, digits: int = 17
) -> str:
    """The same value as :func:`biswas_literal_delta`, as a decimal string of ``digits``
    significant digits ("6.0204e-143"), also below double precision, where the float is 0
    (the published tables go down to 1e-292; at n = 1000 eq. 6 reaches far lower)."""
    _validate(n, k, eps0, nx0, eps)
    import mpmath

    ctx = mpmath.mp.clone()
    ctx.dps = DPS
    return str(ctx.nstr(_delta_hat(ctx, n, k, eps0, nx0, eps), digits, min_fixed=0, max_fixed=0))


def _validate(n: int, k: int, eps0: float, nx0: int, eps: float) -> None:
    for flag, value, low in (("--n", n, 2), ("--k", k, 2), ("--nx0", nx0, 0)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidParameterError(f"{flag} must be an integer, got {value!r}")
        if value < low:
            raise InvalidParameterError(f"{flag} must be >= {low}, got {value}")
    if n > MAX_N:
        raise InvalidParameterError(
            f"biswas-literal evaluates an O(n^2) high-precision double sum; --n must be "
            f"<= {MAX_N}, got {n}"
        )
    if nx0 > n - 1:
        raise InvalidParameterError(f"--nx0 must be in [0, n-1] = [0, {n - 1}], got {nx0}")
    if require_finite("--eps0", eps0) <= 0:
        raise InvalidParameterError(f"--eps0 must be > 0, got {eps0}")
    if require_finite("--eps", eps) < 0:
        raise InvalidParameterError(f"--eps must be >= 0, got {eps}")


def _delta_hat(ctx: Any, n: int, k: int, eps0: float, m: int, eps: float) -> Any:
    """eq. 6 term by term; the inner sums over r are the printed ones, each written as a dot
    product of the s-independent factors (C(m, r) kappa1^r) with (s - r)-dependent ones."""
    big_e = ctx.exp(ctx.mpf(eps0))  # eps0 and eps are binary floats: converted exactly
    kappa1 = big_e * (big_e + k - 2) / (k - 1)  # eq. 3
    kappa2 = (k - 1) / (big_e + k - 2)  # eq. 4
    slope = big_e - kappa2  # E - kappa2 > 0
    rest = n - m  # n - n_x0 >= 1
    # a[r] = C(m, r) kappa1^r; binomials are exact integers, converted once.
    a = [ctx.mpf(math.comb(m, r)) * kappa1**r for r in range(m + 1)]
    full = [ctx.mpf(math.comb(rest, j)) for j in range(rest + 1)]  # C(n - m, j)
    shifted = [ctx.mpf(math.comb(rest - 1, j)) for j in range(rest)]  # C(n - 1 - m, j)
    weighted_full = [j * full[j] for j in range(rest + 1)]  # j C(n - m, j)
    weighted_shifted = [(j + 1) * shifted[j] for j in range(rest)]  # (j + 1) C(n - 1 - m, j)
    kappa3_scale = ctx.mpf(k - 1) ** m / (big_e + k - 1) ** n  # eq. 5 without its s-part
    eps_mp = ctx.mpf(eps)
    total = ctx.mpf(0)
    for s in range(n + 1):
        lo, hi = max(0, s - rest), min(s, m)  # r with C(m, r) C(n - m, s - r) != 0
        terms_r = range(lo, hi + 1)
        d = ctx.fdot((a[r], full[s - r]) for r in terms_r)  # D(s)
        # N(s): (s - r) C(n - 1 - m, s - 1 - r) = (j + 1) C(n - 1 - m, j) with j = s - 1 - r.
        lo_n, hi_n = max(0, s - rest), min(s - 1, m)
        num = ctx.fdot((a[r], weighted_shifted[s - 1 - r]) for r in range(lo_n, hi_n + 1))
        v_s = ctx.log(kappa2 + slope / rest * num / d)  # Theorem IV.1 / eq. 15, as printed
        if not v_s > eps_mp:
            continue
        # sum_r mu(s, r) tau(s, r) = kappa2 (n - m) D(s) + (E - kappa2) sum_r (s - r) mu(s, r)
        mu_tau = kappa2 * rest * d + slope * ctx.fdot((a[r], weighted_full[s - r]) for r in terms_r)
        kappa3 = kappa3_scale * (big_e + k - 2) ** (n - m - s)  # eq. 5
        total += -ctx.expm1(eps_mp - v_s) * kappa3 / rest * mu_tau
    return total
