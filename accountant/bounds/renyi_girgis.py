"""`renyi-girgis`: the RDP upper bound of Girgis, Data, Diggavi, Suresh, Kairouz, "On the Renyi
Differential Privacy of the Shuffle Model", CCS 2021 (arXiv 2105.05180), Theorem 3.1 (eq. 5),
converted to (eps, delta) and composed over rounds in RDP.

Theorem 3.1 bounds the Renyi divergence of order lambda between the shuffled outputs of any two
neighbouring datasets, for any discrete eps0-LDP randomizer (k-RR is one), n clients and any
integer lambda >= 2. With E = e^eps0 and nbar = floor((n - 1) / (2E)) + 1:

    eps(lambda) <= 1/(lambda - 1) * log( 1 + C(lambda, 2) (E - 1)^2 / (nbar E)
                    + sum_{i=3..lambda} C(lambda, i) i Gamma(i/2) ((E^2 - 1)^2 / (2 E^2 nbar))^(i/2)
                    + exp(eps0 lambda - (n - 1) / (8E)) ).

Conditions: the theorem states none beyond n a positive integer, eps0 >= 0 and lambda an integer
>= 2 (the condition lambda^4 e^(5 eps0) < n/9 belongs to the simplified Corollary 3.2, which is
not implemented). Outside them :class:`OutsideConditionsError` names the condition and the value.

Conversion to (eps, delta) (the paper's Lemma 2.1, from Canonne-Kamath-Steinke and Asoodeh et
al.): delta(eps) = min_lambda exp((lambda-1)(eps(lambda) - eps)) / lambda * (1 - 1/lambda)^(lambda-1)
and eps(delta) = min_lambda eps(lambda) + (log(1/delta) + (lambda-1) log(1 - 1/lambda)
- log(lambda)) / (lambda - 1). Both are evaluated by dp-accounting's
``rdp_privacy_accountant.compute_delta`` / ``compute_epsilon``: they implement exactly this
conversion (CKS Proposition 12, cited in their source) and also take the minimum with the valid
KL-based bound delta(eps) <= delta(0) = TV <= sqrt(1 - exp(-KL)) <= sqrt(1 - exp(-eps(lambda)))
(Bretagnolle-Huber; KL <= D_lambda for lambda > 1), so they are at least as tight as Lemma 2.1
and valid. The minimum runs over the integer orders in :data:`ORDERS`.

Composition (Lemma 2.2): RDP of the same order adds up under adaptive composition, so R rounds
have eps_R(lambda) = R eps(lambda) at every order; the sum is converted afterwards.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, logsumexp

from shuffledp.accountant.bounds.base import (
    Bound,
    BoundKind,
    DeltaResult,
    EpsResult,
    OutsideConditionsError,
)
from shuffledp.accountant.engines.numerics import FloatArray
from shuffledp.accountant.engines.pairs import Bracket
from shuffledp.accountant.mechanism import (
    InvalidParameterError,
    ShuffledKRR,
    require_delta,
    require_eps,
)

#: Orders over which the conversion minimises: every integer 2..256, then 2^9 .. 2^16. Larger
#: orders only help when the last term exp(eps0 lambda - (n-1)/(8E)) is still small, i.e. for
#: n above about 8 e^eps0 eps0 lambda (n ~ 1.4e6 at eps0 = 1 for lambda = 65536).
ORDERS: tuple[int, ...] = (*range(2, 257), *(2**j for j in range(9, 17)))

#: Relative slack on every rounded quantity, far above the float errors it covers (see below).
_ULP_SLACK = 1e-13


def check_conditions(n: int, eps0: float, order: int) -> None:
    """OutsideConditionsError unless n, eps0, order satisfy Theorem 3.1's hypotheses."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise OutsideConditionsError(
            f"renyi-girgis (Theorem 3.1) needs an integer n >= 1, got {n!r}"
        )
    if not (isinstance(eps0, int | float) and math.isfinite(eps0) and eps0 >= 0):
        raise OutsideConditionsError(f"renyi-girgis (Theorem 3.1) needs eps0 >= 0, got {eps0!r}")
    if isinstance(order, bool) or not isinstance(order, int | np.integer) or order < 2:
        raise OutsideConditionsError(
            f"renyi-girgis (Theorem 3.1) needs an integer order lambda >= 2, got {order!r}"
        )


def nbar(n: int, eps0: float) -> int:
    """floor((n - 1) / (2 e^eps0)) + 1, rounded down where float rounding could matter: the
    bound decreases in nbar, so a smaller nbar is the safe side."""
    x = (n - 1) * math.exp(-eps0) / 2.0  # exact for eps0 = 0, else within 3 ulp
    m = math.floor(x)
    if eps0 > 0 and m >= 1 and x - m <= 1e-12 * x:
        m -= 1  # the exact value may lie just below the integer m: take the smaller floor
    return m + 1


def _log_expm1(x: float) -> float:
    """log(e^x - 1) for x > 0, without overflow (x + log(1 - e^-x))."""
    return x + math.log(-math.expm1(-x))


def rdp_epsilon(n: int, eps0: float, order: int) -> float:
    """Theorem 3.1's upper bound on the RDP of order ``order`` of the shuffled output.

    Log space: each term of the sum inside the log is formed as a logarithm (gammaln for the
    binomials and Gamma(i/2)), and the result is log1p(sum) / (lambda - 1), so small values keep
    full relative precision. Safe-side rounding: each log-term's float error is a few ulp of the
    magnitudes of the parts it is formed from; each is raised by 1e-13 (about 450 ulp) times
    1 + those magnitudes, and the result by 1e-13 relative, so the returned value is >= the
    exact value of eq. 5.
    """
    check_conditions(n, eps0, order)
    lam = int(order)
    log_nb = math.log(nbar(n, float(eps0)))
    tail = (n - 1) * math.exp(-eps0) / 8.0
    log_terms = np.array([eps0 * lam - tail + _ULP_SLACK * (1.0 + eps0 * lam + tail)])
    if eps0 > 0:
        parts2 = (math.log(lam * (lam - 1) / 2.0), 2.0 * _log_expm1(eps0), -eps0, -log_nb)
        term2 = sum(parts2) + _ULP_SLACK * (1.0 + sum(map(abs, parts2)))
        log_terms = np.concatenate([log_terms, [term2], _log_terms_from_3(lam, eps0, log_nb)])
    lse = float(logsumexp(log_terms))
    total = math.log1p(math.exp(lse)) if lse < 30.0 else lse + math.log1p(math.exp(-lse))
    return total / (lam - 1) * (1.0 + _ULP_SLACK)


def _log_terms_from_3(lam: int, eps0: float, log_nb: float) -> FloatArray:
    """log of C(lam, i) i Gamma(i/2) b^(i/2), i = 3..lam, each raised by its error allowance."""
    if lam < 3:
        return np.empty(0)
    i = np.arange(3, lam + 1, dtype=np.float64)
    b_parts = (2.0 * _log_expm1(2.0 * eps0), -math.log(2.0), -2.0 * eps0, -log_nb)
    log_b, mag_b = sum(b_parts), sum(map(abs, b_parts))
    pieces = (
        np.full_like(i, gammaln(lam + 1.0)),
        -gammaln(i + 1.0),
        -gammaln(lam - i + 1.0),
        np.log(i),
        gammaln(i / 2.0),
        (i / 2.0) * log_b,
    )
    magnitude = sum(np.abs(p) for p in pieces) + (i / 2.0) * mag_b
    result: FloatArray = sum(pieces) + _ULP_SLACK * (1.0 + magnitude)
    return result


@functools.lru_cache(maxsize=256)
def _curve(n: int, eps0: float) -> tuple[float, ...]:
    return tuple(rdp_epsilon(n, eps0, order) for order in ORDERS)


def rdp_curve(n: int, eps0: float) -> tuple[FloatArray, FloatArray]:
    """(orders, eps(orders)) of Theorem 3.1 over :data:`ORDERS` (cached per (n, eps0))."""
    check_conditions(n, eps0, ORDERS[0])
    return np.array(ORDERS, dtype=np.float64), np.array(_curve(n, float(eps0)))


#: Smallest RDP value passed to dp-accounting: its KL branch forms log1p(-exp(-r)), which
#: raises (math domain error) once exp(-r) rounds to 1 (r < 2^-53, e.g. eps0 = 1e-6, n = 1e6).
RDP_FLOOR = 2.0**-40


def _floor_rdp(rdp: FloatArray) -> FloatArray:
    """rdp raised to at least RDP_FLOOR: a larger RDP bound is still a valid bound."""
    floored: FloatArray = np.maximum(rdp, RDP_FLOOR)
    return floored


def delta_from_rdp(orders: FloatArray, rdp: FloatArray, eps: float) -> tuple[float, int]:
    """(delta, best order) at eps from an RDP curve: dp-accounting's compute_delta (Lemma 2.1
    with the KL bound), rounded up. Its float error in log delta is a few ulp of
    order (rdp + eps + 1) where Lemma 2.1 wins and of rdp where the (eps-free) KL bound wins;
    the slack is 1e-13 times that magnitude, with eps left out in the KL case so that the
    result stays non-increasing in eps."""
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib  # lazy: ~1 s import

    eps = require_eps(eps)
    rdp = _floor_rdp(rdp)
    delta, order = rdp_lib.compute_delta(orders, rdp, eps)
    r = float(rdp[int(np.argmax(orders == order))])
    kl_branch = r > 0 and delta >= math.sqrt(-math.expm1(-r)) * (1.0 - 1e-15)
    magnitude = order * (abs(r) + 1.0) + math.log(order) + (0.0 if kl_branch else order * eps)
    # A delta below the smallest double underflows to 0: report that double (safe side).
    value = max(float(delta) * math.exp(_ULP_SLACK * (1.0 + magnitude)), math.ulp(0.0))
    return min(1.0, value), int(order)


def eps_from_rdp(orders: FloatArray, rdp: FloatArray, delta: float) -> tuple[float, int]:
    """(eps, best order) at delta from an RDP curve: dp-accounting's compute_epsilon (Lemma 2.1
    with the KL bound), rounded up by 1e-13 of the magnitudes it adds (a few ulp each)."""
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib  # lazy: ~1 s import

    delta = require_delta(delta)
    eps, order = rdp_lib.compute_epsilon(orders, rdp, delta)
    eps = float(eps)
    if math.isfinite(eps):
        eps = eps + _ULP_SLACK * (1.0 + eps + abs(math.log(delta)))
    return eps, int(order)


class RenyiGirgis(Bound):
    """Girgis et al., CCS 2021, Theorem 3.1 (eq. 5): an RDP upper bound for the shuffled output of
    any eps0-LDP randomizer, converted to delta(eps) / eps(delta) by Lemma 2.1 (dp-accounting's
    compute_delta / compute_epsilon) over the integer orders in :data:`ORDERS`. Valid for every
    dataset; never exactly 0 (the conversion leaves a positive delta at every eps).
    """

    name = "renyi-girgis"
    kind = BoundKind.UPPER
    guarantee = "valid upper bound (RDP of Girgis et al. Thm 3.1, converted by Lemma 2.1)"
    composition = "rdp"  # --rounds composes its Renyi curve (compose_rdp), not a pair

    def bracket(self, mech: ShuffledKRR, eps: float) -> Bracket:
        orders, rdp = rdp_curve(mech.n, mech.eps0)
        delta, _ = delta_from_rdp(orders, rdp, eps)
        return Bracket(delta, delta)

    def delta(self, mech: ShuffledKRR, eps: float) -> DeltaResult:
        eps = require_eps(eps)
        orders, rdp = rdp_curve(mech.n, mech.eps0)
        delta, order = delta_from_rdp(orders, rdp, eps)
        return DeltaResult(
            bound=self.name,
            kind=self.kind,
            eps=eps,
            delta=delta,
            delta_lower=delta,
            delta_upper=delta,
            extra={"order": float(order)},
        )

    def eps_for(self, mech: ShuffledKRR, delta: float) -> float:
        orders, rdp = rdp_curve(mech.n, mech.eps0)
        return eps_from_rdp(orders, rdp, delta)[0]

    def _eps_bracket(self, mech: ShuffledKRR, delta: float) -> EpsResult:
        return self._closed_form_eps(delta, self.eps_for(mech, delta))

    def zero_from(self, mech: ShuffledKRR) -> float:
        return math.inf


@dataclass(frozen=True, slots=True, kw_only=True)
class RdpComposedResult:
    """After ``rounds`` rounds composed in RDP: delta at eps or eps at delta, and the order used."""

    rounds: int
    eps: float
    delta: float
    order: int


def compose_rdp(
    mech: ShuffledKRR, rounds: int, *, eps: float | None = None, delta: float | None = None
) -> RdpComposedResult:
    """Theorem 3.1 composed over ``rounds`` rounds in RDP (Lemma 2.2: rounds * eps(lambda) at
    each order), then converted once (Lemma 2.1); give exactly one of eps and delta."""
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise InvalidParameterError(f"rounds must be an integer >= 1, got {rounds!r}")
    if (eps is None) == (delta is None):
        raise InvalidParameterError("give exactly one of eps and delta")
    orders, rdp = rdp_curve(mech.n, mech.eps0)
    composed = rounds * rdp  # exact scaling up to one rounding; covered by the conversion slack
    if eps is not None:
        value, order = delta_from_rdp(orders, composed, eps)
        return RdpComposedResult(rounds=rounds, eps=require_eps(eps), delta=value, order=order)
    assert delta is not None
    value, order = eps_from_rdp(orders, composed, delta)
    return RdpComposedResult(rounds=rounds, eps=value, delta=delta, order=order)
