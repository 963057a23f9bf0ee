"""eps for a given delta, and calibration of eps0, on the safe side of every bound.

eps(delta) is each bound's own ``Bound.eps_bracket`` (by default the one safe-side search of
crossing.py; closed forms and ``tight`` say otherwise); this module keeps the public entry points
and re-exports the search (its old home) for one release.
"""

from __future__ import annotations

from shuffledp.accountant.bounds.base import Bound, BoundKind, EpsResult
from shuffledp.accountant.engines.crossing import EPS_CAP as EPS_CAP
from shuffledp.accountant.engines.crossing import EPS_TOL as EPS_TOL
from shuffledp.accountant.engines.crossing import lower_near as lower_near
from shuffledp.accountant.engines.crossing import smallest_eps_at_most as smallest_eps_at_most
from shuffledp.accountant.engines.numerics import largest_where
from shuffledp.accountant.mechanism import (
    InvalidParameterError,
    ShuffledKRR,
    require_delta,
    require_eps,
)
from shuffledp.accountant.tight import EXACT_ENOUGH as EXACT_ENOUGH
from shuffledp.accountant.tight import INTERIOR_EPS_WIDTH as INTERIOR_EPS_WIDTH
from shuffledp.accountant.tight import Tight

__all__ = [
    "EPS_CAP",
    "EPS_TOL",
    "EpsResult",
    "calibrate_eps0",
    "eps_for_delta",
    "lower_near",
    "smallest_eps_at_most",
]


def eps_for_delta(bound: Bound, mech: ShuffledKRR, delta: float) -> EpsResult:
    """The eps at which ``bound`` meets ``delta``, rounded to the bound's safe side."""
    return bound.eps_bracket(mech, delta)


def calibrate_eps0(n: int, k: int, eps: float, delta: float, bound: Bound | None = None) -> float:
    """The largest eps0 (to 1e-9 relative, rounded down) whose valid guarantee meets (eps, delta).

    Uses ``bound`` (default ``tight``, whose guarantee is delta_upper); only bounds that are valid
    upper bounds may be used. Assumes the guarantee grows with eps0 (more randomisation never
    hurts) and checks the returned eps0 directly.
    """
    eps = require_eps(eps)
    delta = require_delta(delta)
    bound = bound if bound is not None else Tight()
    if bound.kind not in (BoundKind.UPPER, BoundKind.BRACKET):
        raise InvalidParameterError(
            f"calibration needs a valid upper bound, got {bound.name} ({bound.kind})"
        )

    found = bound.calibration_shortcut(n, k, eps, delta)
    if found is not None:
        return found

    def meets(eps0: float) -> bool:
        # the upper side alone: the lower side is not needed here
        return bound.upper_only(ShuffledKRR(n=n, k=k, eps0=eps0), eps) <= delta

    eps0 = largest_where(meets, max(eps, 1e-6), EPS_CAP)
    if eps0 is None:
        raise InvalidParameterError(
            f"no eps0 >= 1e-9 meets eps={eps}, delta={delta} with n={n}, k={k} ({bound.name})"
        )
    return eps0
