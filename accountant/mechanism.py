"""The mechanism being accounted: n users, each applying k-RR with parameter eps0, then a shuffle."""

from __future__ import annotations

import math
from dataclasses import dataclass

# Re-exported: the accountant's modules and users import them from here.
from shuffledp.errors import InvalidParameterError as InvalidParameterError
from shuffledp.validation import require_finite as require_finite
from shuffledp.validation import require_int as require_int
from shuffledp.validation import require_positive as require_positive

#: Largest eps0 accepted. k-RR's pb = e^-eps0 / (1 + (k-1) e^-eps0) is a normal double down to
#: about 1e-308 (eps0 ~ 709); 700 leaves room for the factors k and n that multiply it.
EPS0_MAX = 700.0
#: Largest n accepted: the range the exact engines are built and tested for (their cost grows
#: with n, about sqrt(n) tail evaluations per eps; bench/accountant_grid.py).
N_MAX = 10**9


def require_eps(eps: float) -> float:
    """A target epsilon: finite and >= 0."""
    value = require_finite("eps", eps)
    if value < 0:
        raise InvalidParameterError(f"eps must be >= 0, got {eps}")
    return value


def require_delta(delta: float) -> float:
    """A target delta: finite, 0 < delta < 1."""
    value = require_finite("delta", delta)
    if not 0.0 < value < 1.0:
        raise InvalidParameterError(f"delta must be in (0, 1), got {delta}")
    return value


def check_range(n: int, eps0: float) -> None:
    """InvalidParameterError naming the command-line flag if n or eps0 is beyond the accountant's
    stated range (:data:`N_MAX`, :data:`EPS0_MAX`; docs/accounting.md, "Range")."""
    if n > N_MAX:
        raise InvalidParameterError(
            f"--n must be <= {N_MAX:_} (the range the exact bounds are built and tested for), "
            f"got {n:_}"
        )
    if eps0 > EPS0_MAX:
        raise InvalidParameterError(
            f"--eps0 must be <= {EPS0_MAX:g} (k-RR's probability e^-eps0 underflows double "
            f"precision beyond it), got {eps0:g}"
        )


def krr_log_probabilities(k: int, eps0: float) -> tuple[float, float]:
    """(log pt, log pb) of k-RR for already validated k >= 2 and eps0 > 0:
    pt = e^eps0 / (e^eps0 + k - 1), pb = 1 / (e^eps0 + k - 1).

    log(e^eps0 + k - 1) = eps0 + log1p((k - 1) e^-eps0): no overflow for large eps0. log pt is
    -log1p((k - 1) e^-eps0) directly, not eps0 - log(e^eps0 + k - 1): that difference cancels
    (at eps0 = 20 it keeps only 6 digits of log pt ~ -2e-9).
    """
    log_pt = -math.log1p((k - 1) * math.exp(-eps0))
    return log_pt, log_pt - eps0


@dataclass(frozen=True, slots=True, kw_only=True)
class ShuffledKRR:
    """n users each report k-RR(eps0) of a value in {0..k-1}; the shuffler releases the histogram.

    k-RR reports the true value w.p. pt = e^eps0 / (e^eps0 + k - 1) and each other value
    w.p. pb = 1 / (e^eps0 + k - 1).
    """

    n: int
    k: int
    eps0: float

    def __post_init__(self) -> None:
        require_int("n", self.n, 2)
        require_int("k", self.k, 2)
        object.__setattr__(self, "eps0", require_positive("eps0", self.eps0))
        check_range(self.n, self.eps0)

    @property
    def log_pt(self) -> float:
        """log pt = eps0 - log(e^eps0 + k - 1)."""
        return krr_log_probabilities(self.k, self.eps0)[0]

    @property
    def log_pb(self) -> float:
        """log pb = -log(e^eps0 + k - 1)."""
        return krr_log_probabilities(self.k, self.eps0)[1]

    @property
    def pt(self) -> float:
        """exp(log pt), as the analyzer computes it (see :attr:`pt_precise`)."""
        return math.exp(self.log_pt)

    @property
    def pb(self) -> float:
        """exp(log pb), as the analyzer computes it. log pb ~ -eps0 carries an absolute rounding
        of up to ulp(eps0) / 2, which exp turns into a relative error of up to eps0 / 2 ulp (16
        ulp at eps0 = 30): the accountant uses :attr:`pb_precise`."""
        return math.exp(self.log_pb)

    @property
    def pt_precise(self) -> float:
        """pt = 1 / (1 + (k - 1) e^-eps0), to a few ulp relative (1.0 once e^-eps0 underflows).

        1 - pt is (k - 1) pb_precise: never form it by subtraction (at large eps0 it is
        ~ (k - 1) e^-eps0 and 1.0 - pt keeps only ulp / (1 - pt) of relative precision)."""
        return 1.0 / (1.0 + (self.k - 1) * math.exp(-self.eps0))

    @property
    def pb_precise(self) -> float:
        """pb = e^-eps0 / (1 + (k - 1) e^-eps0), to a few ulp relative for every eps0."""
        tiny = math.exp(-self.eps0)
        return tiny / (1.0 + (self.k - 1) * tiny)

    @property
    def pt_minus_pb(self) -> float:
        """pt - pb = pt (1 - e^-eps0), to a few ulp relative (no cancellation at small eps0)."""
        return self.pt_precise * -math.expm1(-self.eps0)
